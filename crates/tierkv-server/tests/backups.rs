//! BGSAVE, SAVE and LASTSAVE: a checkpoint of the running store, made while clients write,
//! that another server serves with every key as of one point (here: every key written
//! before the command was answered, for SAVE); the newest `tierkv-checkpoint-keep` are
//! kept; LASTSAVE and INFO persistence follow.

mod common;

use common::{q, TestServer};
use tierkv_server::ServerConfig;

fn info_field(c: &mut redis::Connection, name: &str) -> String {
    let info: String = q(c, &["INFO", "persistence"]).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("INFO persistence lacks {name}"))
        .trim()
        .to_string()
}

fn checkpoints(root: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(root)
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn bgsave_and_save_make_checkpoints_another_server_serves() {
    let dir = tempfile::tempdir().unwrap();
    let slow = dir.path().join("slow");
    let root = dir.path().join("saves");
    let slow_root = dir.path().join("slow-saves");
    let s = TestServer::start(
        &dir.path().join("db"),
        common::two_tier_options(&slow),
        ServerConfig {
            checkpoint_dir: Some(root.clone()),
            checkpoint_slow_dir: Some(slow_root.clone()),
            checkpoint_keep: 2,
            ..ServerConfig::default()
        },
    );
    let mut c = s.client();
    let started: i64 = q(&mut c, &["LASTSAVE"]).unwrap();
    for i in 0..2000 {
        q::<()>(&mut c, &["SET", &format!("k{i}"), &format!("v{i}")]).unwrap();
    }
    q::<i64>(&mut c, &["RPUSH", "list", "a", "b", "c"]).unwrap();
    q::<i64>(&mut c, &["ZADD", "z", "1", "one", "2", "two"]).unwrap();
    assert_eq!(q::<String>(&mut c, &["SAVE"]).unwrap(), "OK");
    // Writes after SAVE answered are not in it.
    q::<()>(&mut c, &["SET", "later", "x"]).unwrap();
    assert!(q::<i64>(&mut c, &["LASTSAVE"]).unwrap() >= started);
    assert_eq!(info_field(&mut c, "tierkv_checkpoints"), "1");
    let first = checkpoints(&root);
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(
        checkpoints(&slow_root),
        first,
        "the slow tables beside the slow tier"
    );

    // BGSAVE answers at once; a second one while it runs is refused (or scheduled).
    assert_eq!(
        q::<String>(&mut c, &["BGSAVE"]).unwrap(),
        "Background saving started"
    );
    common::wait_for("BGSAVE done", || {
        info_field(&mut c, "rdb_bgsave_in_progress") == "0"
    });
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    q::<String>(&mut c, &["BGSAVE", "SCHEDULE"]).unwrap();
    common::wait_for("the third checkpoint", || {
        info_field(&mut c, "tierkv_checkpoints") == "3"
    });
    common::wait_for("BGSAVE done", || {
        info_field(&mut c, "rdb_bgsave_in_progress") == "0"
    });
    let kept = checkpoints(&root);
    assert_eq!(kept.len(), 2, "tierkv-checkpoint-keep 2: {kept:?}");
    assert!(!kept.contains(&first[0]), "the oldest went");
    assert_eq!(checkpoints(&slow_root), kept);
    drop(c);
    s.stop();

    // The first SAVE's copy, served: everything before SAVE answered, nothing after.
    let copy = TestServer::start(
        &root.join(&kept[0]),
        tierkv::Options::default(),
        ServerConfig::default(),
    );
    let mut c = copy.client();
    assert_eq!(q::<String>(&mut c, &["GET", "k1999"]).unwrap(), "v1999");
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "list", "0", "-1"]).unwrap(),
        ["a", "b", "c"]
    );
    assert_eq!(q::<f64>(&mut c, &["ZSCORE", "z", "two"]).unwrap(), 2.0);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 2003);
}

#[test]
fn save_reports_what_it_cannot_do() {
    let dir = tempfile::tempdir().unwrap();
    // A checkpoint directory that cannot be created (a file is in the way).
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, b"x").unwrap();
    let s = TestServer::start(
        &dir.path().join("db"),
        tierkv::Options::default(),
        ServerConfig {
            checkpoint_dir: Some(blocker.join("saves")),
            ..ServerConfig::default()
        },
    );
    let mut c = s.client();
    let e = common::err_text(q::<String>(&mut c, &["SAVE"]));
    assert!(e.starts_with("ERR checkpoint failed"), "{e}");
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "err");
    // Fixed online, it works.
    let root = dir.path().join("saves");
    q::<String>(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "tierkv-checkpoint-dir",
            root.to_str().unwrap(),
        ],
    )
    .unwrap();
    assert_eq!(q::<String>(&mut c, &["SAVE"]).unwrap(), "OK");
    assert_eq!(checkpoints(&root).len(), 1);
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
}

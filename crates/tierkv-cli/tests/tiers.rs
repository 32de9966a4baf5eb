//! A store that remembers its tiers, from the shell (issue 22): a two-tier store takes
//! `--slow-dir`/`--fd-budget` on its first call only; a conflicting or meaningless tier
//! flag is refused naming the values; `put` never creates a store among other files, and
//! `serve` refuses a busy port, naming it, before creating anything.

use std::path::Path;
mod common;

use common::{code, text, tierkv};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn two_tier_flags_are_needed_on_the_first_call_only() {
    let dir = tempfile::tempdir().unwrap();
    let (fast, slow) = (dir.path().join("fast"), dir.path().join("slow"));
    let first = tierkv(&[
        "put",
        "--db",
        s(&fast),
        "--slow-dir",
        s(&slow),
        "--fd-budget",
        "384KiB",
        "first",
        "one",
    ]);
    assert_eq!(code(&first), 0, "{}", text(&first.stderr));
    // Enough data, written without tier options, to reach the slow tier: the store's
    // recorded tiers apply to a Rust user's open too.
    let opts = tierkv::Options {
        write_buffer_size: 16 * 1024,
        target_file_size: 16 * 1024,
        max_bytes_for_level_base: 64 * 1024,
        level0_compaction_trigger: 2,
        num_levels: 5,
        use_direct_io: false,
        ..Default::default()
    };
    let db = tierkv::Db::open(&fast, opts).unwrap();
    for i in 0..8_000u32 {
        db.put(
            format!("key{i:05}"),
            format!("value{i}-{}", "x".repeat(200)),
        )
        .unwrap();
    }
    db.flush().unwrap();
    db.wait_for_background().unwrap();
    assert!(db.stats().slow_tier_bytes > 0, "data reached the slow tier");
    db.close().unwrap();

    let mut want = vec![("first".to_string(), "one".to_string())];
    want.extend((0..8_000).step_by(997).map(|i| {
        (
            format!("key{i:05}"),
            format!("value{i}-{}", "x".repeat(200)),
        )
    }));
    for (key, want) in &want {
        let got = tierkv(&["get", "--db", s(&fast), key]);
        assert_eq!(code(&got), 0, "{key}: {}", text(&got.stderr));
        assert_eq!(text(&got.stdout).trim_end(), want.as_str(), "{key}");
    }
    let put = tierkv(&["put", "--db", s(&fast), "second", "two"]);
    assert_eq!(code(&put), 0, "{}", text(&put.stderr));
    let stats = tierkv(&["stats", "--db", s(&fast), "--json"]);
    assert_eq!(code(&stats), 0, "{}", text(&stats.stderr));
    let json: serde_json::Value = serde_json::from_slice(&stats.stdout).unwrap();
    assert!(json["slow_tier_bytes"].as_u64().unwrap() > 0, "{json}");
    assert_eq!(json["fd_budget"].as_u64(), Some(384 * 1024), "{json}");

    // A different slow directory or budget is refused naming both values.
    let other = dir.path().join("other");
    let bad = tierkv(&["get", "--db", s(&fast), "--slow-dir", s(&other), "first"]);
    assert_eq!(code(&bad), 2);
    let err = text(&bad.stderr);
    assert!(err.contains(s(&other)) && err.contains(s(&slow)), "{err}");
    assert!(
        !other.exists(),
        "the refused call created {}",
        other.display()
    );
    let bad = tierkv(&["get", "--db", s(&fast), "--fd-budget", "1MiB", "first"]);
    assert_eq!(code(&bad), 2);
    let err = text(&bad.stderr);
    assert!(err.contains("1048576") && err.contains("393216"), "{err}");
}

#[test]
fn fd_budget_without_a_slow_tier_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let out = tierkv(&["put", "--db", s(&db), "--fd-budget", "1MiB", "k", "v"]);
    assert_eq!(code(&out), 2);
    assert!(
        text(&out.stderr).contains("--slow-dir"),
        "{}",
        text(&out.stderr)
    );
    assert!(!db.exists(), "the refused put created the store");
}

#[test]
fn put_into_a_non_empty_directory_without_a_store_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), b"mine").unwrap();
    let out = tierkv(&["put", "--db", s(dir.path()), "k", "v"]);
    assert_eq!(code(&out), 2);
    let err = text(&out.stderr);
    assert!(
        err.contains("not empty") && err.contains(s(dir.path())),
        "{err}"
    );
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["notes.txt"], "nothing was created");
}

#[test]
fn serve_on_a_busy_port_names_it_and_creates_nothing() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port().to_string();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let out = tierkv(&["serve", "--db", s(&db), "--port", &port]);
    assert_eq!(code(&out), 2);
    let err = text(&out.stderr);
    assert!(err.contains(&port), "{err}");
    assert!(!db.exists(), "the refused serve created the store");
}

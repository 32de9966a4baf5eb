//! Replication (REPLICAOF, PSYNC, WAIT, ROLE; docs/DEPLOYMENT.md "Replication"):
//!
//! - a replica holds its primary's store record for record, with the same sequence
//!   numbers, after a full copy taken while clients write and the stream that follows;
//! - a restarted replica continues where it stopped (no copy), a promoted replica's
//!   history is continued by a replica that followed the same primary, and an old
//!   primary that wrote after the promotion is given a full copy (its divergent write
//!   is gone);
//! - replicas refuse writes (READONLY), WAIT counts acknowledgements and times out,
//!   CLIENT KILL TYPE replica ends a replica's stream and it continues after reconnecting;
//! - the primary's reads reach the replica (its store reads the same keys).

mod common;

use common::{q, wait_for, TestServer};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tierkv_server::ServerConfig;

/// A store's directories (fast, slow) under `root/name`.
fn dirs(root: &Path, name: &str) -> (PathBuf, PathBuf) {
    (root.join(name).join("fast"), root.join(name).join("slow"))
}

fn start(root: &Path, name: &str, primary: Option<&TestServer>) -> TestServer {
    let (fast, slow) = dirs(root, name);
    std::fs::create_dir_all(&slow).unwrap();
    let opts = tierkv::Options {
        wal_retention_bytes: 64 << 20,
        ..common::two_tier_options(&slow)
    };
    let config = ServerConfig {
        replicaof: primary.map(|p| (p.addr.ip().to_string(), p.addr.port())),
        ..ServerConfig::default()
    };
    TestServer::start(&fast, opts, config)
}

/// Every record of the stopped store `name` (raw engine keys and values), and its latest
/// sequence.
fn records(root: &Path, name: &str) -> (BTreeMap<Vec<u8>, Vec<u8>>, u64) {
    let (fast, slow) = dirs(root, name);
    let db = tierkv::Db::open(&fast, common::two_tier_options(&slow)).unwrap();
    let mut it = db.iter().unwrap();
    it.seek_to_first().unwrap();
    let mut out = BTreeMap::new();
    while it.valid() {
        out.insert(it.key().to_vec(), it.value().to_vec());
        it.next().unwrap();
    }
    drop(it);
    (out, db.latest_sequence())
}

fn field(c: &mut redis::Connection, section: &str, name: &str) -> String {
    let info: String = q(c, &["INFO", section]).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("INFO {section} lacks {name}"))
        .trim()
        .to_string()
}

/// Random commands of every family on keys of a small space.
fn write_some(c: &mut redis::Connection, rng: &mut rand::rngs::StdRng, n: usize, tag: &str) {
    for i in 0..n {
        let k = format!("k{}", rng.gen_range(0..300));
        let v = format!("{tag}{i}").repeat(rng.gen_range(1..40));
        let _: redis::RedisResult<redis::Value> = match rng.gen_range(0..10) {
            0 => q(c, &["DEL", &k]),
            1 => q(c, &["HSET", &format!("h{}", i % 7), &k, &v]),
            2 => q(c, &["RPUSH", &format!("l{}", i % 5), &v]),
            3 => q(c, &["ZADD", &format!("z{}", i % 5), &i.to_string(), &k]),
            4 => q(c, &["SADD", &format!("s{}", i % 5), &k]),
            5 => q(c, &["INCRBY", &format!("n{}", i % 9), "3"]),
            6 => q(c, &["SET", &k, &v, "EX", "1000"]),
            _ => q(c, &["SET", &k, &v]),
        };
    }
}

/// Invariant: a replica is its primary record for record, sequence for sequence, after a
/// full copy taken while a client writes and the stream after it (WAIT 1 answered 1).
#[test]
fn a_replica_holds_the_primarys_records_and_sequence_numbers() {
    let root = tempfile::tempdir().unwrap();
    let p = start(root.path(), "p", None);
    let mut c = p.client();
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    write_some(&mut c, &mut rng, 3000, "a");
    // A client keeps writing while the replica joins (its copy is taken under load).
    let url = p.url();
    let writer = std::thread::spawn(move || {
        let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(2);
        write_some(&mut c, &mut rng, 3000, "w");
    });
    let r = start(root.path(), "r", Some(&p));
    writer.join().unwrap();
    write_some(&mut c, &mut rng, 500, "b");
    let acked: i64 = q(&mut c, &["WAIT", "1", "0"]).unwrap();
    assert_eq!(acked, 1);
    let mut rc = r.client();
    assert_eq!(field(&mut rc, "replication", "master_link_status"), "up");
    assert_eq!(field(&mut c, "stats", "sync_full"), "1");
    r.stop();
    p.stop();
    let (primary, p_seq) = records(root.path(), "p");
    let (replica, r_seq) = records(root.path(), "r");
    assert_eq!(r_seq, p_seq, "the replica is at the primary's sequence");
    assert_eq!(replica.len(), primary.len());
    assert!(
        replica == primary,
        "the replica's records differ from the primary's"
    );
}

/// Invariants: a restarted replica continues (no copy); a replica of the old primary
/// continues the promoted replica's history; an old primary that wrote after the
/// promotion is given a full copy, losing that write; at the end all three stores are
/// equal record for record.
#[test]
fn restart_promotion_and_rejoin_continue_or_copy_as_the_histories_allow() {
    let root = tempfile::tempdir().unwrap();
    let p = start(root.path(), "p", None);
    let mut pc = p.client();
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    write_some(&mut pc, &mut rng, 1000, "a");
    let r1 = start(root.path(), "r1", Some(&p));
    let r2 = start(root.path(), "r2", Some(&p));
    assert_eq!(q::<i64>(&mut pc, &["WAIT", "2", "0"]).unwrap(), 2);
    assert_eq!(field(&mut pc, "stats", "sync_full"), "2");

    // A replica restarted continues from its latest write.
    r2.stop();
    write_some(&mut pc, &mut rng, 300, "b");
    let r2 = start(root.path(), "r2", Some(&p));
    assert_eq!(q::<i64>(&mut pc, &["WAIT", "2", "0"]).unwrap(), 2);
    assert_eq!(field(&mut pc, "stats", "sync_partial_ok"), "1");
    assert_eq!(field(&mut pc, "stats", "sync_full"), "2", "no new copy");

    // Promote r1; r2 follows it, continuing the same history.
    let mut c1 = r1.client();
    let r1_port = r1.addr.port().to_string();
    assert_eq!(
        q::<String>(&mut c1, &["REPLICAOF", "NO", "ONE"]).unwrap(),
        "OK"
    );
    let mut c2 = r2.client();
    assert_eq!(
        q::<String>(&mut c2, &["REPLICAOF", "127.0.0.1", &r1_port]).unwrap(),
        "OK"
    );
    q::<()>(&mut c1, &["SET", "on-new-primary", "1"]).unwrap();
    assert_eq!(q::<i64>(&mut c1, &["WAIT", "1", "0"]).unwrap(), 1);
    assert_eq!(field(&mut c1, "stats", "sync_partial_ok"), "1");
    assert_eq!(field(&mut c1, "stats", "sync_full"), "0");

    // The old primary wrote after the promotion: it is given a copy.
    q::<()>(&mut pc, &["SET", "divergent", "1"]).unwrap();
    assert_eq!(
        q::<String>(&mut pc, &["REPLICAOF", "127.0.0.1", &r1_port]).unwrap(),
        "OK"
    );
    write_some(&mut c1, &mut rng, 300, "c");
    assert_eq!(q::<i64>(&mut c1, &["WAIT", "2", "0"]).unwrap(), 2);
    assert_eq!(field(&mut c1, "stats", "sync_full"), "1");
    assert_eq!(
        q::<Option<String>>(&mut pc, &["GET", "divergent"]).unwrap(),
        None
    );
    assert_eq!(
        q::<Option<String>>(&mut pc, &["GET", "on-new-primary"]).unwrap(),
        Some("1".into())
    );
    p.stop();
    r1.stop();
    r2.stop();
    let (new_primary, seq) = records(root.path(), "r1");
    for name in ["p", "r2"] {
        let (other, other_seq) = records(root.path(), name);
        assert_eq!(other_seq, seq, "{name} at the new primary's sequence");
        assert!(other == new_primary, "{name} differs from the new primary");
    }
}

/// Invariants: a replica refuses writes and WAIT; WAIT counts the replicas that
/// acknowledged and returns at its timeout with fewer; ROLE names both sides; CLIENT KILL
/// TYPE replica (not TYPE normal) ends a replica's stream, which then continues.
#[test]
fn replicas_refuse_writes_and_wait_counts_acknowledgements() {
    let root = tempfile::tempdir().unwrap();
    let p = start(root.path(), "p", None);
    let mut pc = p.client();
    assert_eq!(
        q::<i64>(&mut pc, &["WAIT", "1", "50"]).unwrap(),
        0,
        "no replica yet"
    );
    let r = start(root.path(), "r", Some(&p));
    let mut rc = r.client();
    wait_for("the replica's link", || {
        field(&mut rc, "replication", "master_link_status") == "up"
    });
    q::<()>(&mut pc, &["SET", "a", "1"]).unwrap();
    assert_eq!(q::<i64>(&mut pc, &["WAIT", "1", "0"]).unwrap(), 1);
    assert_eq!(
        q::<i64>(&mut pc, &["WAIT", "2", "100"]).unwrap(),
        1,
        "timed out"
    );
    assert_eq!(
        q::<Option<String>>(&mut rc, &["GET", "a"]).unwrap(),
        Some("1".into())
    );
    for write in [
        &["SET", "a", "2"][..],
        &["DEL", "a"],
        &["HSET", "h", "f", "v"],
    ] {
        let e = common::err_text(q::<redis::Value>(&mut rc, write));
        assert!(e.starts_with("READONLY"), "{e}");
    }
    assert!(common::err_text(q::<i64>(&mut rc, &["WAIT", "1", "0"])).contains("replica"));
    let role: Vec<redis::Value> = q(&mut rc, &["ROLE"]).unwrap();
    assert_eq!(role[0], redis::Value::BulkString(b"slave".to_vec()));
    assert_eq!(role[3], redis::Value::BulkString(b"connected".to_vec()));
    let role: Vec<redis::Value> = q(&mut pc, &["ROLE"]).unwrap();
    assert_eq!(role[0], redis::Value::BulkString(b"master".to_vec()));
    let redis::Value::Array(replicas) = &role[2] else {
        panic!("ROLE's replicas: {role:?}")
    };
    assert_eq!(replicas.len(), 1);
    let line = field(&mut pc, "replication", "slave0");
    assert!(line.contains(&format!("port={}", r.addr.port())), "{line}");
    assert!(line.contains("state=online"), "{line}");
    // CLIENT KILL TYPE replica ends the stream (TYPE normal spares it); the replica
    // reconnects and continues where it stopped.
    assert_eq!(
        q::<i64>(
            &mut pc,
            &["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]
        )
        .unwrap(),
        0
    );
    assert_eq!(
        q::<i64>(&mut pc, &["CLIENT", "KILL", "TYPE", "replica"]).unwrap(),
        1
    );
    wait_for("the replica continuing after the kill", || {
        field(&mut pc, "stats", "sync_partial_ok") == "1"
    });
    q::<()>(&mut pc, &["SET", "a", "3"]).unwrap();
    assert_eq!(q::<i64>(&mut pc, &["WAIT", "1", "0"]).unwrap(), 1);
    assert_eq!(
        q::<Option<String>>(&mut rc, &["GET", "a"]).unwrap(),
        Some("3".into())
    );
}

/// Invariant: the keys the primary's clients read are read on the replica too (its
/// tracker and fast disk follow the primary's reads, not its own idle ones).
#[test]
fn the_primarys_reads_reach_the_replica() {
    let root = tempfile::tempdir().unwrap();
    let p = start(root.path(), "p", None);
    let mut pc = p.client();
    for i in 0..200 {
        q::<()>(&mut pc, &["SET", &format!("k{i}"), &"v".repeat(100)]).unwrap();
    }
    let r = start(root.path(), "r", Some(&p));
    assert_eq!(q::<i64>(&mut pc, &["WAIT", "1", "0"]).unwrap(), 1);
    let mut rc = r.client();
    let gets = |c: &mut redis::Connection| field(c, "engine", "gets").parse::<u64>().unwrap();
    let before = gets(&mut rc);
    for i in 0..100 {
        q::<Option<String>>(&mut pc, &["GET", &format!("k{i}")]).unwrap();
    }
    wait_for("the replica reading the primary's keys", || {
        gets(&mut rc) >= before + 100
    });
}

//! Key expiry over the protocol against Redis 7's semantics: SET's expiry options, SETEX,
//! PSETEX, EXPIRE/PEXPIRE/EXPIREAT/PEXPIREAT with NX/XX/GT/LT, TTL/PTTL/EXPIRETIME,
//! PERSIST, GETEX; the edge cases (negative, zero, past and overflowing times), which
//! commands keep or clear a deadline, hashes expiring with their fields, expiry across a
//! restart of a two-tier store, and a key expiring in the middle of a pipeline. Most tests
//! drive the store's clock (`tierkv::ManualClock`) so they are exact on a loaded machine.

mod common;

use common::{err_text, q, two_tier_options, TestServer};
use redis::Commands;
use std::collections::HashMap;
use std::sync::Arc;
use tierkv::ManualClock;
use tierkv_server::ServerConfig;

const T0: u64 = 1_700_000_000_000;

fn manual(opts: tierkv::Options) -> (Arc<ManualClock>, tierkv::Options) {
    let clock = Arc::new(ManualClock::new(T0));
    let opts = tierkv::Options {
        clock: clock.clone(),
        ..opts
    };
    (clock, opts)
}

fn server() -> (tempfile::TempDir, Arc<ManualClock>, TestServer) {
    let dir = tempfile::tempdir().unwrap();
    let (clock, opts) = manual(tierkv::Options::default());
    let s = TestServer::start(dir.path(), opts, ServerConfig::default());
    (dir, clock, s)
}

#[test]
fn set_expiry_options_and_their_errors_follow_redis() {
    let (_d, clock, s) = server();
    let mut c = s.client();
    let ok = |c: &mut redis::Connection, args: &[&str]| {
        assert_eq!(q::<String>(c, args).unwrap(), "OK", "{args:?}");
    };
    ok(&mut c, &["SET", "ex", "v", "EX", "10"]);
    ok(&mut c, &["SET", "px", "v", "PX", "1500"]);
    let exat = ((T0 + 20_000) / 1000).to_string();
    ok(&mut c, &["SET", "exat", "v", "EXAT", &exat]);
    let pxat = (T0 + 30_000).to_string();
    ok(&mut c, &["SET", "pxat", "v", "PXAT", &pxat]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "ex"]).unwrap(), 10);
    assert_eq!(q::<i64>(&mut c, &["PTTL", "px"]).unwrap(), 1500);
    assert_eq!(
        q::<i64>(&mut c, &["TTL", "px"]).unwrap(),
        2,
        "rounded like Redis"
    );
    assert_eq!(
        q::<i64>(&mut c, &["EXPIRETIME", "exat"]).unwrap(),
        (T0 + 20_000) as i64 / 1000
    );
    assert_eq!(
        q::<i64>(&mut c, &["PEXPIRETIME", "pxat"]).unwrap(),
        (T0 + 30_000) as i64
    );
    // KEEPTTL keeps it; a plain SET clears it; SET ... GET returns the old value.
    ok(&mut c, &["SET", "ex", "v2", "KEEPTTL"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "ex"]).unwrap(), 10);
    assert_eq!(
        q::<String>(&mut c, &["SET", "px", "v3", "GET", "EX", "100"]).unwrap(),
        "v"
    );
    assert_eq!(q::<i64>(&mut c, &["TTL", "px"]).unwrap(), 100);
    ok(&mut c, &["SET", "px", "v4"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "px"]).unwrap(), -1);
    // Past the deadline the key is gone for every command.
    clock.advance(10_000);
    assert_eq!(c.get::<_, Option<String>>("ex").unwrap(), None);
    assert_eq!(q::<i64>(&mut c, &["TTL", "ex"]).unwrap(), -2);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "ex"]).unwrap(), 0);
    assert_eq!(q::<String>(&mut c, &["TYPE", "ex"]).unwrap(), "none");
    assert_eq!(q::<i64>(&mut c, &["SETNX", "ex", "again"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["TTL", "ex"]).unwrap(), -1);
    // Errors: zero, negative, not a number, overflow, conflicting options. Nothing written.
    for (args, want) in [
        (
            &["SET", "e", "v", "EX", "0"][..],
            "ERR invalid expire time in 'set' command",
        ),
        (
            &["SET", "e", "v", "PX", "-1"],
            "ERR invalid expire time in 'set' command",
        ),
        (
            &["SET", "e", "v", "EXAT", "0"],
            "ERR invalid expire time in 'set' command",
        ),
        (
            &["SET", "e", "v", "EX", "9223372036854775807"],
            "ERR invalid expire time in 'set' command",
        ),
        (
            &["SET", "e", "v", "PX", "9223372036854775807"],
            "ERR invalid expire time in 'set' command",
        ),
        (
            &["SET", "e", "v", "EX", "ten"],
            "ERR value is not an integer or out of range",
        ),
        (
            &["SET", "e", "v", "EX", "10", "PX", "10"],
            "ERR syntax error",
        ),
        (
            &["SET", "e", "v", "EX", "10", "KEEPTTL"],
            "ERR syntax error",
        ),
        (
            &["SET", "e", "v", "KEEPTTL", "EX", "10"],
            "ERR syntax error",
        ),
        (&["SET", "e", "v", "EX"], "ERR syntax error"),
        (
            &["SETEX", "e", "0", "v"],
            "ERR invalid expire time in 'setex' command",
        ),
        (
            &["PSETEX", "e", "-5", "v"],
            "ERR invalid expire time in 'psetex' command",
        ),
        (
            &["GETEX", "ex", "EX", "0"],
            "ERR invalid expire time in 'getex' command",
        ),
        (&["GETEX", "ex", "EX", "1", "PERSIST"], "ERR syntax error"),
    ] {
        assert_eq!(err_text(q::<redis::Value>(&mut c, args)), want, "{args:?}");
    }
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "e"]).unwrap(), 0);
    ok(&mut c, &["SETEX", "se", "5", "v"]);
    ok(&mut c, &["PSETEX", "pse", "5", "v"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "se"]).unwrap(), 5);
    assert_eq!(q::<i64>(&mut c, &["PTTL", "pse"]).unwrap(), 5);
    // A SET whose absolute deadline is already past leaves no key.
    ok(&mut c, &["SET", "past", "v", "PXAT", "1"]);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "past"]).unwrap(), 0);
}

#[test]
fn expire_with_nx_xx_gt_lt_and_past_times_follow_redis() {
    let (_d, _clock, s) = server();
    let mut c = s.client();
    let () = c.set("k", "v").unwrap();
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "nope", "10"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "100", "XX"]).unwrap(), 0);
    assert_eq!(
        q::<i64>(&mut c, &["EXPIRE", "k", "100", "GT"]).unwrap(),
        0,
        "no TTL is infinite"
    );
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "100", "NX"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "50", "NX"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "50", "GT"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "200", "GT"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "300", "LT"]).unwrap(), 0);
    assert_eq!(
        q::<i64>(&mut c, &["PEXPIRE", "k", "150000", "LT"]).unwrap(),
        1
    );
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]).unwrap(), 150);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "10", "XX"]).unwrap(), 1);
    let at = ((T0 + 60_000) / 1000).to_string();
    assert_eq!(q::<i64>(&mut c, &["EXPIREAT", "k", &at]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]).unwrap(), 60);
    let pat = (T0 + 70_000).to_string();
    assert_eq!(q::<i64>(&mut c, &["PEXPIREAT", "k", &pat]).unwrap(), 1);
    assert_eq!(
        q::<i64>(&mut c, &["PEXPIRETIME", "k"]).unwrap(),
        (T0 + 70_000) as i64
    );
    // Option errors.
    for (args, want) in [
        (
            &["EXPIRE", "k", "10", "NX", "XX"][..],
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        ),
        (
            &["EXPIRE", "k", "10", "GT", "LT"],
            "ERR GT and LT options at the same time are not compatible",
        ),
        (
            &["EXPIRE", "k", "10", "BOGUS"],
            "ERR Unsupported option BOGUS",
        ),
        (
            &["EXPIRE", "k", "x"],
            "ERR value is not an integer or out of range",
        ),
        (
            &["EXPIRE", "k", "9223372036854775807"],
            "ERR invalid expire time in 'expire' command",
        ),
        (
            &["PEXPIRE", "k", "9223372036854775807"],
            "ERR invalid expire time in 'pexpire' command",
        ),
        (
            &["EXPIREAT", "k", "-9223372036854775808"],
            "ERR invalid expire time in 'expireat' command",
        ),
    ] {
        assert_eq!(err_text(q::<redis::Value>(&mut c, args)), want, "{args:?}");
    }
    assert_eq!(
        q::<i64>(&mut c, &["PEXPIRETIME", "k"]).unwrap(),
        (T0 + 70_000) as i64,
        "unchanged"
    );
    // Zero, negative and past times delete the key (and answer 1).
    for args in [
        &["EXPIRE", "a", "0"][..],
        &["EXPIRE", "b", "-5"],
        &["PEXPIRE", "c", "-1"],
        &["EXPIREAT", "d", "1"],
        &["PEXPIREAT", "e", "0"],
    ] {
        let () = c.set(args[1], "v").unwrap();
        assert_eq!(q::<i64>(&mut c, args).unwrap(), 1, "{args:?}");
        assert_eq!(
            q::<i64>(&mut c, &["EXISTS", args[1]]).unwrap(),
            0,
            "{args:?}"
        );
    }
    // PERSIST.
    assert_eq!(q::<i64>(&mut c, &["PERSIST", "k"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["PERSIST", "k"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["PERSIST", "nope"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]).unwrap(), -1);
    assert_eq!(q::<i64>(&mut c, &["EXPIRETIME", "k"]).unwrap(), -1);
    assert_eq!(q::<i64>(&mut c, &["PTTL", "nope"]).unwrap(), -2);
    assert_eq!(q::<i64>(&mut c, &["EXPIRETIME", "nope"]).unwrap(), -2);
}

#[test]
fn getex_reads_and_changes_the_deadline() {
    let (_d, clock, s) = server();
    let mut c = s.client();
    let () = c.set("k", "v").unwrap();
    assert_eq!(q::<String>(&mut c, &["GETEX", "k"]).unwrap(), "v");
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]).unwrap(), -1);
    assert_eq!(
        q::<String>(&mut c, &["GETEX", "k", "EX", "30"]).unwrap(),
        "v"
    );
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]).unwrap(), 30);
    assert_eq!(
        q::<String>(&mut c, &["GETEX", "k", "PX", "5000"]).unwrap(),
        "v"
    );
    assert_eq!(q::<i64>(&mut c, &["PTTL", "k"]).unwrap(), 5000);
    assert_eq!(
        q::<String>(&mut c, &["GETEX", "k", "PERSIST"]).unwrap(),
        "v"
    );
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]).unwrap(), -1);
    let pat = (T0 + 1000).to_string();
    assert_eq!(
        q::<String>(&mut c, &["GETEX", "k", "PXAT", &pat]).unwrap(),
        "v"
    );
    clock.advance(1000);
    assert_eq!(q::<Option<String>>(&mut c, &["GETEX", "k"]).unwrap(), None);
    assert_eq!(
        q::<Option<String>>(&mut c, &["GETEX", "nope", "EX", "5"]).unwrap(),
        None
    );
}

#[test]
fn modifying_commands_keep_the_deadline_and_set_clears_it() {
    let (_d, clock, s) = server();
    let mut c = s.client();
    let ttl = |c: &mut redis::Connection, k: &str| q::<i64>(c, &["TTL", k]).unwrap();
    let () = c.set_ex("n", 5, 100).unwrap();
    assert_eq!(c.incr::<_, _, i64>("n", 1).unwrap(), 6);
    assert_eq!(
        q::<String>(&mut c, &["INCRBYFLOAT", "n", "0.5"]).unwrap(),
        "6.5"
    );
    assert_eq!(c.append::<_, _, i64>("n", "0").unwrap(), 4);
    assert_eq!(q::<i64>(&mut c, &["SETRANGE", "n", "0", "7"]).unwrap(), 4);
    assert_eq!(
        ttl(&mut c, "n"),
        100,
        "INCR, INCRBYFLOAT, APPEND, SETRANGE keep the TTL"
    );
    // RENAME and COPY carry it.
    assert_eq!(q::<String>(&mut c, &["RENAME", "n", "m"]).unwrap(), "OK");
    assert_eq!(ttl(&mut c, "m"), 100);
    assert_eq!(q::<i64>(&mut c, &["COPY", "m", "m2"]).unwrap(), 1);
    assert_eq!(ttl(&mut c, "m2"), 100);
    // SET, GETSET and MSET clear it.
    let () = c.set("m", "x").unwrap();
    assert_eq!(ttl(&mut c, "m"), -1);
    let () = c.set_ex("g", 1, 100).unwrap();
    assert_eq!(q::<String>(&mut c, &["GETSET", "g", "2"]).unwrap(), "1");
    assert_eq!(ttl(&mut c, "g"), -1);
    let () = c.set_ex("ms", 1, 100).unwrap();
    let () = c.mset(&[("ms", "2")]).unwrap();
    assert_eq!(ttl(&mut c, "ms"), -1);
    // A hash's deadline is on its metadata: field writes keep it, and the fields go with it.
    let () = c.hset_multiple("h", &[("a", "1"), ("b", "2")]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "h", "50"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["HSET", "h", "c", "3"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["HINCRBY", "h", "a", "1"]).unwrap(), 2);
    assert_eq!(q::<i64>(&mut c, &["HDEL", "h", "b"]).unwrap(), 1);
    assert_eq!(ttl(&mut c, "h"), 50);
    assert_eq!(q::<String>(&mut c, &["RENAME", "h", "h2"]).unwrap(), "OK");
    assert_eq!(ttl(&mut c, "h2"), 50);
    clock.advance(50_000);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "h2"]).unwrap(), 0);
    assert_eq!(ttl(&mut c, "m2"), 50);
    clock.advance(50_000);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "m2"]).unwrap(), 0);
    let all: HashMap<String, String> = c.hgetall("h2").unwrap();
    assert!(all.is_empty());
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h2"]).unwrap(), 0);
    assert_eq!(
        q::<Option<String>>(&mut c, &["HGET", "h2", "a"]).unwrap(),
        None
    );
    assert_eq!(q::<String>(&mut c, &["TYPE", "h2"]).unwrap(), "none");
    let keys: Vec<String> = q(&mut c, &["KEYS", "*"]).unwrap();
    assert!(!keys.iter().any(|k| k == "h2" || k == "m2"), "{keys:?}");
    // Recreated, the hash has none of the expired one's fields.
    assert_eq!(q::<i64>(&mut c, &["HSET", "h2", "z", "9"]).unwrap(), 1);
    let all: HashMap<String, String> = c.hgetall("h2").unwrap();
    assert_eq!(all, HashMap::from([("z".into(), "9".into())]));
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h2"]).unwrap(), 1);
    assert_eq!(ttl(&mut c, "h2"), -1);
}

/// Deadlines are stored with the records: after a restart of a two-tier store (records on
/// both tiers) a key keeps its TTL and expires at the same instant.
#[test]
fn expiry_survives_a_restart_of_a_two_tier_store() {
    let fast = tempfile::tempdir().unwrap();
    let slow = tempfile::tempdir().unwrap();
    let (clock, opts) = manual(two_tier_options(slow.path()));
    let s = TestServer::start(fast.path(), opts.clone(), ServerConfig::default());
    let mut c = s.client();
    let value = "x".repeat(200);
    let mut p = redis::pipe();
    for i in 0..2000 {
        if i % 2 == 0 {
            p.set_ex(format!("k{i:04}"), &value, 100).ignore();
        } else {
            p.set(format!("k{i:04}"), &value).ignore();
        }
    }
    let () = p.query(&mut c).unwrap();
    let () = c.hset_multiple("h", &[("a", "1")]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "h", "100"]).unwrap(), 1);
    s.stop();
    let s = TestServer::start(fast.path(), opts, ServerConfig::default());
    let mut c = s.client();
    assert_eq!(q::<i64>(&mut c, &["TTL", "k0000"]).unwrap(), 100);
    assert_eq!(q::<i64>(&mut c, &["TTL", "k0001"]).unwrap(), -1);
    assert_eq!(q::<i64>(&mut c, &["TTL", "h"]).unwrap(), 100);
    clock.advance(100_000);
    assert_eq!(c.get::<_, Option<String>>("k0000").unwrap(), None);
    assert_eq!(c.get::<_, String>("k0001").unwrap(), value);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["KEYS", "k*"]).unwrap().len(),
        1000
    );
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]).unwrap(), 0);
}

/// A key that expires while a pipeline runs: every GET before its deadline sees it, and
/// once one misses it no later one sees it again (real clock).
#[test]
fn a_key_expiring_during_a_pipeline_is_never_seen_again() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(
        dir.path(),
        tierkv::Options::default(),
        ServerConfig::default(),
    );
    let mut c = s.client();
    let mut seen_gone = false;
    let mut saw_both = false;
    for _ in 0..20 {
        let mut p = redis::pipe();
        p.cmd("SET").arg("k").arg("v").arg("PX").arg(2).ignore();
        for _ in 0..5000 {
            p.get("k");
        }
        let replies: Vec<Option<String>> = p.query(&mut c).unwrap();
        let first_gone = replies.iter().position(Option::is_none);
        if let Some(i) = first_gone {
            assert!(
                replies[i..].iter().all(Option::is_none),
                "seen again after expiring"
            );
            seen_gone = true;
            saw_both |= i > 0;
        }
        if saw_both {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(seen_gone || saw_both, "2 ms never passed during 5000 GETs");
    std::thread::sleep(std::time::Duration::from_millis(10));
    assert_eq!(c.get::<_, Option<String>>("k").unwrap(), None);
}

fn info_field(c: &mut redis::Connection, name: &str) -> u64 {
    let text: String = q(c, &["INFO", "stats"]).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("INFO has no {name}: {text}"))
}

/// An expired hash does not leave its fields on disk: the server's sweep (one bounded step
/// a second over the expiring-hash records) deletes them, and a live hash with a deadline
/// keeps its fields.
#[test]
fn the_fields_of_an_expired_hash_are_swept_from_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let (clock, opts) = manual(tierkv::Options::default());
    let s = TestServer::start(dir.path(), opts.clone(), ServerConfig::default());
    let mut c = s.client();
    let mut p = redis::pipe();
    for i in 0..300 {
        p.hset("doomed", format!("f{i}"), i).ignore();
        p.hset("kept", format!("f{i}"), i).ignore();
    }
    let () = p.query(&mut c).unwrap();
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "doomed", "10"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "kept", "1000"]).unwrap(), 1);
    let () = c.set("plain", "v").unwrap();
    let keyspace: String = q(&mut c, &["INFO", "keyspace"]).unwrap();
    assert!(keyspace.contains("db0:keys=3,expires=2,"), "{keyspace}");
    clock.advance(10_000);
    let start = std::time::Instant::now();
    while info_field(&mut c, "tierkv_expired_hash_fields_swept") < 300 {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(20),
            "the sweep never removed the expired hash's fields"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(info_field(&mut c, "tierkv_expired_hash_fields_swept"), 300);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "kept"]).unwrap(), 300);
    s.stop();
    // In the store: no field record of the expired hash; every one of the live hash.
    let db = tierkv::Db::open(dir.path(), opts).unwrap();
    let fields = |key: &[u8]| {
        let mut prefix = vec![b'f'];
        prefix.extend_from_slice(&(key.len() as u32).to_be_bytes());
        prefix.extend_from_slice(key);
        db.scan(Some(&prefix), Some(&[b'f' + 1][..]), 10_000)
            .unwrap()
            .into_iter()
            .filter(|(k, _)| k.starts_with(&prefix))
            .count()
    };
    assert_eq!(fields(b"doomed"), 0);
    assert_eq!(fields(b"kept"), 300);
}

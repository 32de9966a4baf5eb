//! Set commands against Redis 7's replies, checked against a model (`BTreeSet`) under
//! random operations; WRONGTYPE across strings, hashes and sets; the keyspace commands
//! (TYPE, DEL, RENAME, COPY, EXPIRE, SCAN TYPE, OBJECT ENCODING) on sets; and an
//! overwritten or deleted set leaving no member behind.

mod common;

use common::{err_text, q, WRONGTYPE};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};

use common::default_server as server;

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[test]
fn set_commands_answer_as_redis() {
    let (_d, s) = server();
    let mut c = s.client();
    assert_eq!(
        q::<i64>(&mut c, &["SADD", "s", "a", "b", "c", "a"]).unwrap(),
        3
    );
    assert_eq!(q::<i64>(&mut c, &["SADD", "s", "c", "d"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["SCARD", "s"]).unwrap(), 4);
    assert_eq!(q::<i64>(&mut c, &["SCARD", "nope"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["SISMEMBER", "s", "a"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["SISMEMBER", "s", "z"]).unwrap(), 0);
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["SMISMEMBER", "s", "a", "z", "d"]).unwrap(),
        vec![1, 0, 1]
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SMEMBERS", "s"]).unwrap(),
        vec!["a", "b", "c", "d"]
    );
    assert_eq!(q::<i64>(&mut c, &["SREM", "s", "a", "z"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["SREM", "nope", "a"]).unwrap(), 0);
    assert_eq!(q::<String>(&mut c, &["TYPE", "s"]).unwrap(), "set");
    // Random members.
    let one: String = q(&mut c, &["SRANDMEMBER", "s"]).unwrap();
    assert!(["b", "c", "d"].contains(&one.as_str()));
    let three = sorted(q(&mut c, &["SRANDMEMBER", "s", "10"]).unwrap());
    assert_eq!(three, vec!["b", "c", "d"]);
    let rep: Vec<String> = q(&mut c, &["SRANDMEMBER", "s", "-7"]).unwrap();
    assert_eq!(rep.len(), 7);
    assert_eq!(
        q::<Option<String>>(&mut c, &["SRANDMEMBER", "nope"]).unwrap(),
        None
    );
    // SPOP removes what it returns; the last member takes the key with it.
    let popped: Vec<String> = q(&mut c, &["SPOP", "s", "2"]).unwrap();
    assert_eq!(popped.len(), 2);
    assert_eq!(q::<i64>(&mut c, &["SCARD", "s"]).unwrap(), 1);
    let last: String = q(&mut c, &["SPOP", "s"]).unwrap();
    assert!(!popped.contains(&last));
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "s"]).unwrap(), 0);
    assert_eq!(q::<Option<String>>(&mut c, &["SPOP", "s"]).unwrap(), None);
    // Algebra.
    let () = q(&mut c, &["SADD", "x", "1", "2", "3"])
        .map(|_: i64| ())
        .unwrap();
    let () = q(&mut c, &["SADD", "y", "2", "3", "4"])
        .map(|_: i64| ())
        .unwrap();
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SINTER", "x", "y"]).unwrap(),
        vec!["2", "3"]
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SUNION", "x", "y", "nope"]).unwrap(),
        vec!["1", "2", "3", "4"]
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SDIFF", "x", "y"]).unwrap(),
        vec!["1"]
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SINTER", "x", "nope"]).unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(q::<i64>(&mut c, &["SINTERCARD", "2", "x", "y"]).unwrap(), 2);
    assert_eq!(
        q::<i64>(&mut c, &["SINTERCARD", "2", "x", "y", "LIMIT", "1"]).unwrap(),
        1
    );
    assert!(err_text(q::<i64>(&mut c, &["SINTERCARD", "0", "x"])).contains("numkeys"));
    // STORE forms replace the destination, whatever it held.
    let () = redis::Commands::set(&mut c, "dst", "a string").unwrap();
    assert_eq!(
        q::<i64>(&mut c, &["SUNIONSTORE", "dst", "x", "y"]).unwrap(),
        4
    );
    assert_eq!(q::<String>(&mut c, &["TYPE", "dst"]).unwrap(), "set");
    assert_eq!(
        q::<i64>(&mut c, &["SINTERSTORE", "dst", "x", "y"]).unwrap(),
        2
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SMEMBERS", "dst"]).unwrap(),
        vec!["2", "3"]
    );
    assert_eq!(
        q::<i64>(&mut c, &["SDIFFSTORE", "dst", "x", "x"]).unwrap(),
        0
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "dst"]).unwrap(), 0);
    // SMOVE.
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "x", "y", "1"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "x", "y", "1"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "x", "new", "2"]).unwrap(), 1);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SMEMBERS", "x"]).unwrap(),
        vec!["3"]
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SMEMBERS", "y"]).unwrap(),
        vec!["1", "2", "3", "4"]
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SMEMBERS", "new"]).unwrap(),
        vec!["2"]
    );
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "x", "x", "3"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["SCARD", "x"]).unwrap(), 1);
    // SSCAN walks every member once.
    let members: Vec<String> = (0..300).map(|i| format!("m{i:03}")).collect();
    let mut sadd = vec!["SADD", "big"];
    sadd.extend(members.iter().map(String::as_str));
    assert_eq!(q::<i64>(&mut c, &sadd).unwrap(), 300);
    let mut cursor = "0".to_string();
    let mut seen = Vec::new();
    loop {
        let (next, batch): (String, Vec<String>) =
            q(&mut c, &["SSCAN", "big", &cursor, "COUNT", "40"]).unwrap();
        seen.extend(batch);
        if next == "0" {
            break;
        }
        cursor = next;
    }
    assert_eq!(sorted(seen), members);
    assert_eq!(
        q::<String>(&mut c, &["OBJECT", "ENCODING", "big"]).unwrap(),
        "hashtable"
    );
    assert_eq!(
        q::<String>(&mut c, &["OBJECT", "ENCODING", "y"]).unwrap(),
        "intset"
    );
}

#[test]
fn sets_take_part_in_the_keyspace_commands_and_wrongtype() {
    let (_d, s) = server();
    let mut c = s.client();
    assert_eq!(q::<i64>(&mut c, &["SADD", "s", "a", "b"]).unwrap(), 2);
    let () = redis::Commands::set(&mut c, "str", "v").unwrap();
    assert_eq!(q::<i64>(&mut c, &["HSET", "h", "f", "v"]).unwrap(), 1);
    for cmd in [
        &["GET", "s"][..],
        &["HGET", "s", "f"],
        &["SADD", "str", "x"],
        &["SMEMBERS", "h"],
        &["SCARD", "str"],
        &["SISMEMBER", "h", "f"],
        &["SINTER", "s", "str"],
        &["SMOVE", "s", "h", "a"],
    ] {
        assert_eq!(
            err_text(q::<redis::Value>(&mut c, cmd)),
            WRONGTYPE,
            "{cmd:?}"
        );
    }
    assert_eq!(q::<String>(&mut c, &["RENAME", "s", "t"]).unwrap(), "OK");
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SMEMBERS", "t"]).unwrap(),
        vec!["a", "b"]
    );
    assert_eq!(q::<i64>(&mut c, &["COPY", "t", "u"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["SREM", "t", "a"]).unwrap(), 1);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SMEMBERS", "u"]).unwrap(),
        vec!["a", "b"]
    );
    let mut scan: Vec<String> = Vec::new();
    let mut cursor = "0".to_string();
    loop {
        let (next, keys): (String, Vec<String>) =
            q(&mut c, &["SCAN", &cursor, "TYPE", "set"]).unwrap();
        scan.extend(keys);
        if next == "0" {
            break;
        }
        cursor = next;
    }
    assert_eq!(sorted(scan), vec!["t", "u"]);
    // SET over a set, DEL and expiry leave no member reachable: a new set of the same
    // name starts empty.
    let () = redis::Commands::set(&mut c, "t", "now a string").unwrap();
    assert_eq!(q::<i64>(&mut c, &["DEL", "t"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["SADD", "t", "z"]).unwrap(), 1);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SMEMBERS", "t"]).unwrap(),
        vec!["z"]
    );
    assert_eq!(q::<i64>(&mut c, &["PEXPIRE", "u", "30"]).unwrap(), 1);
    std::thread::sleep(std::time::Duration::from_millis(80));
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "u"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["SADD", "u", "fresh"]).unwrap(), 1);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SMEMBERS", "u"]).unwrap(),
        vec!["fresh"]
    );
}

/// Random SADD / SREM / SPOP / SMOVE / STORE forms over a few sets, against a model: after
/// every command the replies and, at the end, every set's members and count match.
#[test]
fn random_set_operations_match_a_model() {
    let (_d, s) = server();
    let mut c = s.client();
    let mut rng = StdRng::seed_from_u64(7);
    let mut model: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let keys = ["a", "b", "c"];
    for step in 0..1500 {
        let k = keys[rng.gen_range(0..keys.len())].to_string();
        let m = format!("{}", rng.gen_range(0..30));
        match rng.gen_range(0..6) {
            0 | 1 => {
                let added: i64 = q(&mut c, &["SADD", &k, &m]).unwrap();
                assert_eq!(
                    added == 1,
                    model.entry(k).or_default().insert(m),
                    "step {step}"
                );
            }
            2 => {
                let removed: i64 = q(&mut c, &["SREM", &k, &m]).unwrap();
                let had = model.get_mut(&k).is_some_and(|s| s.remove(&m));
                assert_eq!(removed == 1, had, "step {step}");
            }
            3 => {
                let popped: Option<String> = q(&mut c, &["SPOP", &k]).unwrap();
                let set = model.entry(k.clone()).or_default();
                match popped {
                    Some(p) => assert!(set.remove(&p), "step {step}: popped {p} not in {set:?}"),
                    None => assert!(set.is_empty(), "step {step}"),
                }
            }
            4 => {
                let d = keys[rng.gen_range(0..keys.len())].to_string();
                let moved: i64 = q(&mut c, &["SMOVE", &k, &d, &m]).unwrap();
                let had = model.get(&k).is_some_and(|s| s.contains(&m));
                assert_eq!(moved == 1, had, "step {step}");
                if had && k != d {
                    model.get_mut(&k).unwrap().remove(&m);
                    model.entry(d).or_default().insert(m);
                }
            }
            _ => {
                let (x, y) = (keys[rng.gen_range(0..3)], keys[rng.gen_range(0..3)]);
                let sx = model.get(x).cloned().unwrap_or_default();
                let sy = model.get(y).cloned().unwrap_or_default();
                let n: i64 = q(&mut c, &["SUNIONSTORE", &k, x, y]).unwrap();
                let u: BTreeSet<String> = sx.union(&sy).cloned().collect();
                assert_eq!(n as usize, u.len(), "step {step}");
                model.insert(k, u);
            }
        }
        model.retain(|_, s| !s.is_empty());
    }
    for k in keys {
        let want: Vec<String> = model
            .get(k)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        assert_eq!(
            q::<Vec<String>>(&mut c, &["SMEMBERS", k]).unwrap(),
            want,
            "{k}"
        );
        assert_eq!(
            q::<i64>(&mut c, &["SCARD", k]).unwrap() as usize,
            want.len(),
            "{k}"
        );
        assert_eq!(
            q::<i64>(&mut c, &["EXISTS", k]).unwrap(),
            !want.is_empty() as i64
        );
    }
}

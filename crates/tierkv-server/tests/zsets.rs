//! Sorted-set commands against Redis 7's replies (edge cases included: negative ranks,
//! exclusive and infinite bounds, LIMIT, REV, WITHSCORES, the ZADD option combinations and
//! their errors, RESP3 doubles); a model-based random test (a `BTreeMap` per key) across a
//! server restart; WRONGTYPE across types; the keyspace commands (TYPE, DEL, RENAME, COPY,
//! EXPIRE, OBJECT ENCODING) on sorted sets; an overwritten, deleted or expired sorted
//! set leaving no element record behind in the store; and the rank index (counted chunks,
//! `commands/zset_index.rs`), with a chunk size of 4 so that sets of a few hundred members
//! cross many splits and merges: ranks against the model, its records' invariant read
//! from the store, and a set stored without an index (as before it existed) indexed on
//! first use.

mod common;

use common::{err_text, q, TestServer, WRONGTYPE};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use tierkv_server::ServerConfig;

use common::default_server as server;

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn zrange(c: &mut redis::Connection, args: &[&str]) -> Vec<String> {
    q::<Vec<String>>(c, args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

#[test]
fn zadd_and_single_member_commands_answer_as_redis() {
    let (_d, s) = server();
    let mut c = s.client();
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "z", "1", "a", "2", "b", "3", "c"]).unwrap(),
        3
    );
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "z", "1", "a", "5", "d"]).unwrap(),
        1
    );
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "z"]).unwrap(), 4);
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "nope"]).unwrap(), 0);
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "z", "b"]).unwrap(), "2");
    assert_eq!(
        q::<Option<String>>(&mut c, &["ZSCORE", "z", "x"]).unwrap(),
        None
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["ZSCORE", "nope", "x"]).unwrap(),
        None
    );
    assert_eq!(
        q::<Vec<Option<String>>>(&mut c, &["ZMSCORE", "z", "a", "x", "d"]).unwrap(),
        vec![Some("1".into()), None, Some("5".into())]
    );
    assert_eq!(
        q::<Vec<Option<String>>>(&mut c, &["ZMSCORE", "nope", "a"]).unwrap(),
        vec![None]
    );
    // Score texts: shortest round trip, %.17g layout, inf.
    assert_eq!(
        q::<i64>(
            &mut c,
            &["ZADD", "f", "1.5", "x", "-inf", "lo", "+inf", "hi", "1e300", "big"]
        )
        .unwrap(),
        4
    );
    assert_eq!(
        zrange(&mut c, &["ZRANGE", "f", "0", "-1", "WITHSCORES"]),
        strs(&[
            "lo",
            "-inf",
            "x",
            "1.5",
            "big",
            "1.0000000000000001e+300",
            "hi",
            "inf"
        ])
    );
    // Redis 7.0 prints 17 significant digits (%.17g).
    assert_eq!(q::<i64>(&mut c, &["ZADD", "f", "1.1", "y"]).unwrap(), 1);
    assert_eq!(
        q::<String>(&mut c, &["ZSCORE", "f", "y"]).unwrap(),
        "1.1000000000000001"
    );
    assert_eq!(q::<i64>(&mut c, &["ZREM", "f", "y"]).unwrap(), 1);
    assert_eq!(
        err_text(q::<i64>(&mut c, &["ZADD", "f", "nan", "x"])),
        "ERR value is not a valid float"
    );
    assert_eq!(
        err_text(q::<i64>(&mut c, &["ZADD", "f", "1", "x", "abc", "y"])),
        "ERR value is not a valid float"
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["ZSCORE", "f", "y"]).unwrap(),
        None,
        "an error writes nothing"
    );
    // ZINCRBY.
    assert_eq!(
        q::<String>(&mut c, &["ZINCRBY", "z", "2.5", "a"]).unwrap(),
        "3.5"
    );
    assert_eq!(
        q::<String>(&mut c, &["ZINCRBY", "z", "-1", "new"]).unwrap(),
        "-1"
    );
    assert_eq!(
        q::<String>(&mut c, &["ZINCRBY", "f", "1", "hi"]).unwrap(),
        "inf"
    );
    assert_eq!(
        err_text(q::<String>(&mut c, &["ZINCRBY", "f", "-inf", "hi"])),
        "ERR resulting score is not a number (NaN)"
    );
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "f", "hi"]).unwrap(), "inf");
    assert_eq!(
        err_text(q::<String>(&mut c, &["ZINCRBY", "f", "x", "hi"])),
        "ERR value is not a valid float"
    );
    // ZREM.
    assert_eq!(
        q::<i64>(&mut c, &["ZREM", "z", "new", "x", "new"]).unwrap(),
        1
    );
    assert_eq!(q::<i64>(&mut c, &["ZREM", "nope", "x"]).unwrap(), 0);
    // ZRANK / ZREVRANK: z is b=2 c=3 a=3.5 d=5.
    assert_eq!(q::<i64>(&mut c, &["ZRANK", "z", "b"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["ZRANK", "z", "a"]).unwrap(), 2);
    assert_eq!(q::<i64>(&mut c, &["ZREVRANK", "z", "a"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["ZREVRANK", "z", "d"]).unwrap(), 0);
    assert_eq!(
        q::<Option<i64>>(&mut c, &["ZRANK", "z", "x"]).unwrap(),
        None
    );
    assert_eq!(
        q::<Option<i64>>(&mut c, &["ZRANK", "nope", "x"]).unwrap(),
        None
    );
    // The last member takes the key with it.
    assert_eq!(q::<i64>(&mut c, &["ZADD", "one", "1", "m"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["ZREM", "one", "m"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "one"]).unwrap(), 0);
}

#[test]
fn zadd_options_combine_as_redis() {
    let (_d, s) = server();
    let mut c = s.client();
    let zadd = |c: &mut redis::Connection, args: &[&str]| -> redis::Value {
        let mut all = vec!["ZADD", "z"];
        all.extend_from_slice(args);
        q::<redis::Value>(c, &all).unwrap_or_else(|e| panic!("{args:?}: {e}"))
    };
    let int = |v: redis::Value| -> i64 { redis::from_redis_value(v).unwrap() };
    assert_eq!(int(zadd(&mut c, &["10", "a", "20", "b"])), 2);
    // NX: only new members.
    assert_eq!(int(zadd(&mut c, &["NX", "11", "a", "30", "c"])), 1);
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "z", "a"]).unwrap(), "10");
    // XX: only existing members; CH counts the changed ones.
    assert_eq!(int(zadd(&mut c, &["XX", "12", "a", "40", "d"])), 0);
    assert_eq!(int(zadd(&mut c, &["XX", "CH", "13", "a", "40", "d"])), 1);
    assert_eq!(
        q::<Option<String>>(&mut c, &["ZSCORE", "z", "d"]).unwrap(),
        None
    );
    // CH counts added + updated, not unchanged ones.
    assert_eq!(
        int(zadd(&mut c, &["CH", "13", "a", "21", "b", "1", "e"])),
        2
    );
    // GT / LT only update in their direction, and still add new members.
    assert_eq!(
        int(zadd(&mut c, &["GT", "CH", "5", "a", "50", "b", "7", "f"])),
        2
    );
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "z", "a"]).unwrap(), "13");
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "z", "b"]).unwrap(), "50");
    assert_eq!(int(zadd(&mut c, &["LT", "CH", "5", "a", "60", "b"])), 1);
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "z", "a"]).unwrap(), "5");
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "z", "b"]).unwrap(), "50");
    assert_eq!(
        int(zadd(&mut c, &["XX", "GT", "CH", "6", "a", "6", "zz"])),
        1
    );
    // INCR: the new score, nil when an option blocks it.
    let v = zadd(&mut c, &["INCR", "2", "a"]);
    assert_eq!(redis::from_redis_value::<String>(v.clone()).unwrap(), "8");
    let v = zadd(&mut c, &["NX", "INCR", "2", "a"]);
    assert_eq!(v, redis::Value::Nil);
    let v = zadd(&mut c, &["XX", "INCR", "2", "nobody"]);
    assert_eq!(v, redis::Value::Nil);
    let v = zadd(&mut c, &["GT", "INCR", "-1", "a"]);
    assert_eq!(v, redis::Value::Nil);
    let v = zadd(&mut c, &["LT", "INCR", "-1", "a"]);
    assert_eq!(redis::from_redis_value::<String>(v.clone()).unwrap(), "7");
    let v = zadd(&mut c, &["INCR", "0", "a"]);
    assert_eq!(redis::from_redis_value::<String>(v.clone()).unwrap(), "7");
    let v = zadd(&mut c, &["incr", "1.5", "brand-new"]);
    assert_eq!(redis::from_redis_value::<String>(v.clone()).unwrap(), "1.5");
    // XX on a missing key creates nothing.
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "missing", "XX", "1", "a"]).unwrap(),
        0
    );
    assert_eq!(
        q::<redis::Value>(&mut c, &["ZADD", "missing", "XX", "INCR", "1", "a"]).unwrap(),
        redis::Value::Nil
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "missing"]).unwrap(), 0);
    // The same member twice in one ZADD: the last score wins, one member.
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "dup", "1", "m", "2", "m", "3", "m"]).unwrap(),
        1
    );
    assert_eq!(
        zrange(&mut c, &["ZRANGE", "dup", "0", "-1", "WITHSCORES"]),
        strs(&["m", "3"])
    );
    // Option errors (nothing written).
    for (args, err) in [
        (
            &["ZADD", "z", "NX", "XX", "1", "a"][..],
            "ERR XX and NX options at the same time are not compatible",
        ),
        (
            &["ZADD", "z", "NX", "GT", "1", "a"],
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ),
        (
            &["ZADD", "z", "LT", "NX", "1", "a"],
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ),
        (
            &["ZADD", "z", "GT", "LT", "1", "a"],
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ),
        (
            &["ZADD", "z", "INCR", "1", "a", "2", "b"],
            "ERR INCR option supports a single increment-element pair",
        ),
        (
            &["ZADD", "z", "1"],
            "ERR wrong number of arguments for 'zadd' command",
        ),
        (&["ZADD", "z", "1", "a", "2"], "ERR syntax error"),
        (&["ZADD", "z", "NX", "CH"], "ERR syntax error"),
        (&["ZADD", "z", "XX", "1"], "ERR syntax error"),
        (&["ZADD", "z", "FOO", "1", "a"], "ERR syntax error"),
        (&["ZADD", "z", "FOO", "a"], "ERR value is not a valid float"),
    ] {
        assert_eq!(err_text(q::<redis::Value>(&mut c, args)), err, "{args:?}");
    }
    assert_eq!(
        q::<Option<String>>(&mut c, &["ZSCORE", "z", "b"]).unwrap(),
        Some("50".into())
    );
}

#[test]
fn ranges_answer_as_redis() {
    let (_d, s) = server();
    let mut c = s.client();
    assert_eq!(
        q::<i64>(
            &mut c,
            &["ZADD", "z", "1", "a", "2", "b", "2", "c", "3", "d", "4", "e", "5", "f"]
        )
        .unwrap(),
        6
    );
    // By rank, negative indexes, out of range.
    assert_eq!(
        zrange(&mut c, &["ZRANGE", "z", "0", "-1"]),
        strs(&["a", "b", "c", "d", "e", "f"])
    );
    assert_eq!(
        zrange(&mut c, &["ZRANGE", "z", "1", "2"]),
        strs(&["b", "c"])
    );
    assert_eq!(
        zrange(&mut c, &["ZRANGE", "z", "-2", "-1"]),
        strs(&["e", "f"])
    );
    assert_eq!(
        zrange(&mut c, &["ZRANGE", "z", "-100", "1"]),
        strs(&["a", "b"])
    );
    assert_eq!(
        zrange(&mut c, &["ZRANGE", "z", "4", "100"]),
        strs(&["e", "f"])
    );
    assert_eq!(zrange(&mut c, &["ZRANGE", "z", "3", "2"]), strs(&[]));
    assert_eq!(zrange(&mut c, &["ZRANGE", "z", "6", "10"]), strs(&[]));
    assert_eq!(zrange(&mut c, &["ZRANGE", "z", "-1", "-2"]), strs(&[]));
    assert_eq!(
        zrange(
            &mut c,
            &["ZRANGE", "z", "-9223372036854775808", "9223372036854775807"]
        )
        .len(),
        6
    );
    assert_eq!(zrange(&mut c, &["ZRANGE", "nope", "0", "-1"]), strs(&[]));
    assert_eq!(
        zrange(&mut c, &["ZRANGE", "z", "0", "1", "REV"]),
        strs(&["f", "e"])
    );
    assert_eq!(
        zrange(&mut c, &["ZREVRANGE", "z", "-2", "-1"]),
        strs(&["b", "a"])
    );
    assert_eq!(
        zrange(&mut c, &["ZREVRANGE", "z", "0", "0", "WITHSCORES"]),
        strs(&["f", "5"])
    );
    // Ranks near the end are reached from the end, in the same order.
    assert_eq!(
        zrange(&mut c, &["ZRANGE", "z", "4", "5"]),
        strs(&["e", "f"])
    );
    assert_eq!(
        zrange(&mut c, &["ZRANGE", "z", "4", "5", "REV"]),
        strs(&["b", "a"])
    );
    assert_eq!(
        zrange(&mut c, &["ZRANGE", "z", "0", "1", "WITHSCORES"]),
        strs(&["a", "1", "b", "2"])
    );
    // By score: inclusive, exclusive, infinite, REV (max first), LIMIT.
    assert_eq!(
        zrange(&mut c, &["ZRANGEBYSCORE", "z", "2", "3"]),
        strs(&["b", "c", "d"])
    );
    assert_eq!(
        zrange(&mut c, &["ZRANGEBYSCORE", "z", "(2", "3"]),
        strs(&["d"])
    );
    assert_eq!(
        zrange(&mut c, &["ZRANGEBYSCORE", "z", "(2", "(3"]),
        strs(&[])
    );
    assert_eq!(
        zrange(&mut c, &["ZRANGEBYSCORE", "z", "-inf", "(2"]),
        strs(&["a"])
    );
    assert_eq!(
        zrange(&mut c, &["ZRANGEBYSCORE", "z", "(4", "+inf"]),
        strs(&["f"])
    );
    assert_eq!(zrange(&mut c, &["ZRANGEBYSCORE", "z", "3", "2"]), strs(&[]));
    assert_eq!(
        zrange(&mut c, &["ZRANGEBYSCORE", "z", "2.5", "2.6"]),
        strs(&[])
    );
    assert_eq!(
        zrange(
            &mut c,
            &[
                "ZRANGEBYSCORE",
                "z",
                "2",
                "4",
                "WITHSCORES",
                "LIMIT",
                "1",
                "2"
            ]
        ),
        strs(&["c", "2", "d", "3"])
    );
    assert_eq!(
        zrange(
            &mut c,
            &["ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "2", "-1"]
        ),
        strs(&["c", "d", "e", "f"])
    );
    assert_eq!(
        zrange(
            &mut c,
            &["ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "-1", "2"]
        ),
        strs(&[])
    );
    assert_eq!(
        zrange(
            &mut c,
            &["ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "0", "0"]
        ),
        strs(&[])
    );
    assert_eq!(
        zrange(
            &mut c,
            &["ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "100", "1"]
        ),
        strs(&[])
    );
    assert_eq!(
        zrange(&mut c, &["ZREVRANGEBYSCORE", "z", "3", "2"]),
        strs(&["d", "c", "b"])
    );
    assert_eq!(
        zrange(&mut c, &["ZREVRANGEBYSCORE", "z", "(3", "-inf"]),
        strs(&["c", "b", "a"])
    );
    assert_eq!(
        zrange(&mut c, &["ZREVRANGEBYSCORE", "z", "2", "3"]),
        strs(&[])
    );
    assert_eq!(
        zrange(
            &mut c,
            &["ZREVRANGEBYSCORE", "z", "+inf", "-inf", "LIMIT", "1", "3"]
        ),
        strs(&["e", "d", "c"])
    );
    assert_eq!(
        zrange(&mut c, &["ZRANGE", "z", "(1", "2", "BYSCORE", "WITHSCORES"]),
        strs(&["b", "2", "c", "2"])
    );
    assert_eq!(
        zrange(&mut c, &["ZRANGE", "z", "+inf", "(4", "BYSCORE", "REV"]),
        strs(&["f"])
    );
    assert_eq!(
        zrange(
            &mut c,
            &["ZRANGE", "z", "5", "0", "BYSCORE", "REV", "LIMIT", "0", "2"]
        ),
        strs(&["f", "e"])
    );
    assert_eq!(q::<i64>(&mut c, &["ZCOUNT", "z", "2", "3"]).unwrap(), 3);
    assert_eq!(q::<i64>(&mut c, &["ZCOUNT", "z", "(2", "+inf"]).unwrap(), 3);
    assert_eq!(
        q::<i64>(&mut c, &["ZCOUNT", "z", "-inf", "+inf"]).unwrap(),
        6
    );
    assert_eq!(
        q::<i64>(&mut c, &["ZCOUNT", "nope", "-inf", "+inf"]).unwrap(),
        0
    );
    // By lex, over members of one score.
    assert_eq!(
        q::<i64>(
            &mut c,
            &["ZADD", "l", "0", "a", "0", "b", "0", "c", "0", "d", "0", "e", "0", "ab"]
        )
        .unwrap(),
        6
    );
    assert_eq!(
        zrange(&mut c, &["ZRANGEBYLEX", "l", "-", "+"]),
        strs(&["a", "ab", "b", "c", "d", "e"])
    );
    assert_eq!(
        zrange(&mut c, &["ZRANGEBYLEX", "l", "[b", "[d"]),
        strs(&["b", "c", "d"])
    );
    assert_eq!(
        zrange(&mut c, &["ZRANGEBYLEX", "l", "(b", "(d"]),
        strs(&["c"])
    );
    assert_eq!(
        zrange(&mut c, &["ZRANGEBYLEX", "l", "(a", "[b"]),
        strs(&["ab", "b"])
    );
    assert_eq!(
        zrange(&mut c, &["ZRANGEBYLEX", "l", "[aa", "(b"]),
        strs(&["ab"])
    );
    assert_eq!(zrange(&mut c, &["ZRANGEBYLEX", "l", "[d", "[b"]), strs(&[]));
    assert_eq!(zrange(&mut c, &["ZRANGEBYLEX", "l", "+", "-"]), strs(&[]));
    assert_eq!(
        zrange(&mut c, &["ZRANGEBYLEX", "l", "-", "[a"]),
        strs(&["a"])
    );
    assert_eq!(
        zrange(&mut c, &["ZRANGEBYLEX", "l", "-", "+", "LIMIT", "1", "2"]),
        strs(&["ab", "b"])
    );
    assert_eq!(
        zrange(&mut c, &["ZREVRANGEBYLEX", "l", "[c", "(a"]),
        strs(&["c", "b", "ab"])
    );
    assert_eq!(
        zrange(&mut c, &["ZREVRANGEBYLEX", "l", "+", "[d"]),
        strs(&["e", "d"])
    );
    assert_eq!(
        zrange(&mut c, &["ZREVRANGEBYLEX", "l", "(b", "-"]),
        strs(&["ab", "a"])
    );
    assert_eq!(
        zrange(
            &mut c,
            &["ZRANGE", "l", "[e", "[c", "BYLEX", "REV", "LIMIT", "1", "5"]
        ),
        strs(&["d", "c"])
    );
    assert_eq!(q::<i64>(&mut c, &["ZLEXCOUNT", "l", "-", "+"]).unwrap(), 6);
    assert_eq!(
        q::<i64>(&mut c, &["ZLEXCOUNT", "l", "[b", "(e"]).unwrap(),
        3
    );
    assert_eq!(
        q::<i64>(&mut c, &["ZLEXCOUNT", "nope", "-", "+"]).unwrap(),
        0
    );
    // Errors.
    let syntax = "ERR syntax error";
    for (args, err) in [
        (
            &["ZRANGE", "z", "0", "-1", "LIMIT", "0", "1"][..],
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ),
        (
            &["ZRANGEBYLEX", "l", "-", "+", "WITHSCORES"],
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        ),
        (&["ZRANGE", "z", "0", "-1", "BYSCORE", "BYLEX"], syntax),
        (&["ZRANGE", "z", "0", "-1", "REV", "REV"], syntax),
        (&["ZRANGE", "z", "0", "-1", "LIMIT", "0"], syntax),
        (&["ZRANGE", "z", "0", "-1", "FOO"], syntax),
        (&["ZRANGEBYSCORE", "z", "0", "1", "REV"], syntax),
        (&["ZRANGEBYSCORE", "z", "0", "1", "BYSCORE"], syntax),
        (
            &["ZRANGE", "z", "a", "-1"],
            "ERR value is not an integer or out of range",
        ),
        (
            &["ZRANGEBYSCORE", "z", "x", "1"],
            "ERR min or max is not a float",
        ),
        (
            &["ZRANGEBYSCORE", "z", "0", "(nan"],
            "ERR min or max is not a float",
        ),
        (
            &["ZRANGEBYSCORE", "z", "0", "1", "LIMIT", "x", "1"],
            "ERR value is not an integer or out of range",
        ),
        (&["ZCOUNT", "z", "1", "y"], "ERR min or max is not a float"),
        (
            &["ZRANGEBYLEX", "l", "a", "+"],
            "ERR min or max not valid string range item",
        ),
        (
            &["ZRANGEBYLEX", "l", "-", ""],
            "ERR min or max not valid string range item",
        ),
        (
            &["ZLEXCOUNT", "l", "+a", "+"],
            "ERR min or max not valid string range item",
        ),
        (&["ZRANGESTORE", "d", "z", "0", "-1", "WITHSCORES"], syntax),
    ] {
        assert_eq!(err_text(q::<redis::Value>(&mut c, args)), err, "{args:?}");
    }
    // ZRANGESTORE replaces the destination, whatever it held, and deletes it when empty.
    let () = redis::Commands::set(&mut c, "dst", "a string").unwrap();
    assert_eq!(
        q::<i64>(
            &mut c,
            &[
                "ZRANGESTORE",
                "dst",
                "z",
                "1",
                "3",
                "BYSCORE",
                "LIMIT",
                "1",
                "5"
            ]
        )
        .unwrap(),
        3
    );
    assert_eq!(q::<String>(&mut c, &["TYPE", "dst"]).unwrap(), "zset");
    assert_eq!(
        zrange(&mut c, &["ZRANGE", "dst", "0", "-1", "WITHSCORES"]),
        strs(&["b", "2", "c", "2", "d", "3"])
    );
    assert_eq!(
        q::<i64>(&mut c, &["ZRANGESTORE", "dst", "z", "0", "1", "REV"]).unwrap(),
        2
    );
    assert_eq!(
        zrange(&mut c, &["ZRANGE", "dst", "0", "-1"]),
        strs(&["e", "f"])
    );
    assert_eq!(
        q::<i64>(&mut c, &["ZRANGESTORE", "dst", "l", "[b", "[c", "BYLEX"]).unwrap(),
        2
    );
    assert_eq!(
        zrange(&mut c, &["ZRANGE", "dst", "0", "-1"]),
        strs(&["b", "c"])
    );
    assert_eq!(
        q::<i64>(&mut c, &["ZRANGESTORE", "dst", "z", "10", "20"]).unwrap(),
        0
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "dst"]).unwrap(), 0);
    assert_eq!(
        q::<i64>(&mut c, &["ZRANGESTORE", "dst", "nope", "0", "-1"]).unwrap(),
        0
    );
}

#[test]
fn pops_and_range_removals_answer_as_redis() {
    let (_d, s) = server();
    let mut c = s.client();
    let fill = |c: &mut redis::Connection| {
        let _: i64 = q(
            c,
            &[
                "ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e",
            ],
        )
        .unwrap();
    };
    fill(&mut c);
    assert_eq!(zrange(&mut c, &["ZPOPMIN", "z"]), strs(&["a", "1"]));
    assert_eq!(zrange(&mut c, &["ZPOPMAX", "z"]), strs(&["e", "5"]));
    assert_eq!(
        zrange(&mut c, &["ZPOPMIN", "z", "2"]),
        strs(&["b", "2", "c", "3"])
    );
    assert_eq!(zrange(&mut c, &["ZPOPMAX", "z", "0"]), strs(&[]));
    let () = redis::Commands::set(&mut c, "str", "v").unwrap();
    assert_eq!(
        err_text(q::<redis::Value>(&mut c, &["ZPOPMAX", "str", "0"])),
        WRONGTYPE
    );
    assert_eq!(zrange(&mut c, &["ZPOPMAX", "z", "100"]), strs(&["d", "4"]));
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "z"]).unwrap(), 0);
    assert_eq!(zrange(&mut c, &["ZPOPMIN", "z"]), strs(&[]));
    assert_eq!(zrange(&mut c, &["ZPOPMIN", "z", "3"]), strs(&[]));
    assert_eq!(
        err_text(q::<redis::Value>(&mut c, &["ZPOPMIN", "z", "-1"])),
        "ERR value is out of range, must be positive"
    );
    assert_eq!(
        err_text(q::<redis::Value>(&mut c, &["ZPOPMIN", "z", "1", "2"])),
        "ERR syntax error"
    );
    fill(&mut c);
    assert_eq!(
        zrange(&mut c, &["ZPOPMAX", "z", "9223372036854775807"]),
        strs(&["e", "5", "d", "4", "c", "3", "b", "2", "a", "1"])
    );
    fill(&mut c);
    assert_eq!(
        q::<i64>(&mut c, &["ZREMRANGEBYRANK", "z", "1", "2"]).unwrap(),
        2
    );
    assert_eq!(
        zrange(&mut c, &["ZRANGE", "z", "0", "-1"]),
        strs(&["a", "d", "e"])
    );
    assert_eq!(
        q::<i64>(&mut c, &["ZREMRANGEBYRANK", "z", "-1", "-1"]).unwrap(),
        1
    );
    assert_eq!(
        q::<i64>(&mut c, &["ZREMRANGEBYRANK", "z", "5", "10"]).unwrap(),
        0
    );
    assert_eq!(
        q::<i64>(&mut c, &["ZREMRANGEBYRANK", "z", "0", "-1"]).unwrap(),
        2
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "z"]).unwrap(), 0);
    assert_eq!(
        q::<i64>(&mut c, &["ZREMRANGEBYRANK", "z", "0", "-1"]).unwrap(),
        0
    );
    fill(&mut c);
    assert_eq!(
        q::<i64>(&mut c, &["ZREMRANGEBYSCORE", "z", "(1", "3"]).unwrap(),
        2
    );
    assert_eq!(
        q::<i64>(&mut c, &["ZREMRANGEBYSCORE", "z", "(5", "+inf"]).unwrap(),
        0
    );
    assert_eq!(
        zrange(&mut c, &["ZRANGE", "z", "0", "-1"]),
        strs(&["a", "d", "e"])
    );
    assert_eq!(
        q::<i64>(&mut c, &["ZREMRANGEBYSCORE", "z", "-inf", "+inf"]).unwrap(),
        3
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "z"]).unwrap(), 0);
    let _: i64 = q(
        &mut c,
        &["ZADD", "l", "0", "a", "0", "b", "0", "c", "0", "d"],
    )
    .unwrap();
    assert_eq!(
        q::<i64>(&mut c, &["ZREMRANGEBYLEX", "l", "(a", "[c"]).unwrap(),
        2
    );
    assert_eq!(
        zrange(&mut c, &["ZRANGE", "l", "0", "-1"]),
        strs(&["a", "d"])
    );
    assert_eq!(
        err_text(q::<i64>(&mut c, &["ZREMRANGEBYLEX", "l", "a", "c"])),
        "ERR min or max not valid string range item"
    );
    assert_eq!(
        err_text(q::<i64>(&mut c, &["ZREMRANGEBYSCORE", "l", "a", "c"])),
        "ERR min or max is not a float"
    );
    assert_eq!(
        err_text(q::<i64>(&mut c, &["ZREMRANGEBYRANK", "l", "a", "1"])),
        "ERR value is not an integer or out of range"
    );
}

#[test]
fn algebra_answers_as_redis() {
    let (_d, s) = server();
    let mut c = s.client();
    let _: i64 = q(&mut c, &["ZADD", "x", "1", "a", "2", "b", "3", "c"]).unwrap();
    let _: i64 = q(&mut c, &["ZADD", "y", "10", "b", "20", "c", "30", "d"]).unwrap();
    let _: i64 = q(&mut c, &["SADD", "s", "a", "d", "e"]).unwrap();
    assert_eq!(
        q::<i64>(&mut c, &["ZUNIONSTORE", "u", "2", "x", "y"]).unwrap(),
        4
    );
    assert_eq!(
        zrange(&mut c, &["ZRANGE", "u", "0", "-1", "WITHSCORES"]),
        strs(&["a", "1", "b", "12", "c", "23", "d", "30"])
    );
    assert_eq!(
        q::<i64>(
            &mut c,
            &["ZINTERSTORE", "i", "2", "x", "y", "WEIGHTS", "2", "0.5"]
        )
        .unwrap(),
        2
    );
    assert_eq!(
        zrange(&mut c, &["ZRANGE", "i", "0", "-1", "WITHSCORES"]),
        strs(&["b", "9", "c", "16"])
    );
    assert_eq!(
        q::<i64>(
            &mut c,
            &["ZINTERSTORE", "i", "2", "x", "y", "AGGREGATE", "MIN"]
        )
        .unwrap(),
        2
    );
    assert_eq!(
        zrange(&mut c, &["ZRANGE", "i", "0", "-1", "WITHSCORES"]),
        strs(&["b", "2", "c", "3"])
    );
    assert_eq!(
        q::<i64>(
            &mut c,
            &["ZUNIONSTORE", "u", "3", "x", "y", "s", "aggregate", "max"]
        )
        .unwrap(),
        5
    );
    assert_eq!(
        zrange(&mut c, &["ZRANGE", "u", "0", "-1", "WITHSCORES"]),
        strs(&["a", "1", "e", "1", "b", "10", "c", "20", "d", "30"])
    );
    // A set counts as score 1; a missing key as empty.
    assert_eq!(
        zrange(&mut c, &["ZINTER", "2", "x", "s", "WITHSCORES"]),
        strs(&["a", "2"])
    );
    assert_eq!(zrange(&mut c, &["ZINTER", "2", "x", "nope"]), strs(&[]));
    assert_eq!(
        zrange(&mut c, &["ZUNION", "2", "x", "nope", "WITHSCORES"]),
        strs(&["a", "1", "b", "2", "c", "3"])
    );
    assert_eq!(zrange(&mut c, &["ZDIFF", "2", "x", "y"]), strs(&["a"]));
    assert_eq!(
        zrange(&mut c, &["ZDIFF", "3", "y", "x", "s", "WITHSCORES"]),
        strs(&[])
    );
    assert_eq!(
        q::<i64>(&mut c, &["ZDIFFSTORE", "dd", "1", "y"]).unwrap(),
        3
    );
    assert_eq!(
        q::<i64>(&mut c, &["ZDIFFSTORE", "dd", "2", "y", "y"]).unwrap(),
        0
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "dd"]).unwrap(), 0);
    // inf + -inf sums to 0; weights times inf.
    let _: i64 = q(&mut c, &["ZADD", "p", "inf", "m"]).unwrap();
    let _: i64 = q(&mut c, &["ZADD", "n", "-inf", "m"]).unwrap();
    assert_eq!(
        zrange(&mut c, &["ZUNION", "2", "p", "n", "WITHSCORES"]),
        strs(&["m", "0"])
    );
    assert_eq!(
        zrange(&mut c, &["ZUNION", "1", "p", "WEIGHTS", "0", "WITHSCORES"]),
        strs(&["m", "0"])
    );
    assert_eq!(
        zrange(&mut c, &["ZUNION", "1", "p", "WEIGHTS", "-1", "WITHSCORES"]),
        strs(&["m", "-inf"])
    );
    // The destination may be a source, and is replaced whatever its type.
    assert_eq!(
        q::<i64>(&mut c, &["ZUNIONSTORE", "x", "2", "x", "x"]).unwrap(),
        3
    );
    assert_eq!(
        zrange(&mut c, &["ZRANGE", "x", "0", "-1", "WITHSCORES"]),
        strs(&["a", "2", "b", "4", "c", "6"])
    );
    let () = redis::Commands::set(&mut c, "str", "v").unwrap();
    assert_eq!(q::<i64>(&mut c, &["HSET", "h", "f", "v"]).unwrap(), 1);
    assert_eq!(
        q::<i64>(&mut c, &["ZINTERSTORE", "h", "1", "s"]).unwrap(),
        3
    );
    assert_eq!(q::<String>(&mut c, &["TYPE", "h"]).unwrap(), "zset");
    // Errors.
    for (args, err) in [
        (
            &["ZUNIONSTORE", "d", "0", "x"][..],
            "ERR at least 1 input key is needed for 'zunionstore' command",
        ),
        (
            &["ZINTER", "0", "x"],
            "ERR at least 1 input key is needed for 'zinter' command",
        ),
        (&["ZUNIONSTORE", "d", "3", "x", "y"], "ERR syntax error"),
        (
            &["ZUNIONSTORE", "d", "x", "y"],
            "ERR value is not an integer or out of range",
        ),
        (&["ZUNIONSTORE", "d", "2", "x", "str"], WRONGTYPE),
        (
            &["ZUNIONSTORE", "d", "2", "x", "y", "WEIGHTS", "1"],
            "ERR syntax error",
        ),
        (
            &["ZUNIONSTORE", "d", "2", "x", "y", "WEIGHTS", "1", "z"],
            "ERR weight value is not a float",
        ),
        (
            &["ZUNIONSTORE", "d", "2", "x", "y", "AGGREGATE", "AVG"],
            "ERR syntax error",
        ),
        (
            &["ZUNIONSTORE", "d", "2", "x", "y", "WITHSCORES"],
            "ERR syntax error",
        ),
        (
            &["ZDIFF", "2", "x", "y", "WEIGHTS", "1", "1"],
            "ERR syntax error",
        ),
        (
            &["ZDIFFSTORE", "d", "2", "x", "y", "AGGREGATE", "SUM"],
            "ERR syntax error",
        ),
    ] {
        assert_eq!(err_text(q::<redis::Value>(&mut c, args)), err, "{args:?}");
    }
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "d"]).unwrap(), 0);
}

#[test]
fn zintercard_zrandmember_zmpop_answer_as_redis() {
    let (_d, s) = server();
    let mut c = s.client();
    let _: i64 = q(&mut c, &["ZADD", "x", "1", "a", "2", "b", "3", "c"]).unwrap();
    let _: i64 = q(&mut c, &["ZADD", "y", "10", "b", "20", "c", "30", "d"]).unwrap();
    let _: i64 = q(&mut c, &["SADD", "s", "b", "c", "e"]).unwrap();
    let () = redis::Commands::set(&mut c, "str", "v").unwrap();
    // ZINTERCARD.
    assert_eq!(q::<i64>(&mut c, &["ZINTERCARD", "2", "x", "y"]).unwrap(), 2);
    assert_eq!(
        q::<i64>(&mut c, &["ZINTERCARD", "3", "x", "y", "s"]).unwrap(),
        2
    );
    assert_eq!(
        q::<i64>(&mut c, &["ZINTERCARD", "2", "x", "y", "LIMIT", "1"]).unwrap(),
        1
    );
    assert_eq!(
        q::<i64>(&mut c, &["ZINTERCARD", "2", "x", "y", "LIMIT", "0"]).unwrap(),
        2
    );
    assert_eq!(
        q::<i64>(&mut c, &["ZINTERCARD", "2", "x", "nope"]).unwrap(),
        0
    );
    for (args, err) in [
        (
            &["ZINTERCARD", "2", "x", "y", "LIMIT", "-1"][..],
            "ERR LIMIT can't be negative",
        ),
        (
            &["ZINTERCARD", "0", "x"],
            "ERR at least 1 input key is needed for 'zintercard' command",
        ),
        (&["ZINTERCARD", "3", "x", "y"], "ERR syntax error"),
        (
            &["ZINTERCARD", "2", "x", "y", "WITHSCORES"],
            "ERR syntax error",
        ),
        (
            &["ZINTERCARD", "2", "x", "y", "WEIGHTS", "1", "2"],
            "ERR syntax error",
        ),
        (&["ZINTERCARD", "2", "x", "str"], WRONGTYPE),
        // ZRANDMEMBER.
        (&["ZRANDMEMBER", "x", "1", "FOO"], "ERR syntax error"),
        (
            &["ZRANDMEMBER", "x", "1", "WITHSCORES", "x"],
            "ERR syntax error",
        ),
        (
            &["ZRANDMEMBER", "x", "one"],
            "ERR value is not an integer or out of range",
        ),
        (&["ZRANDMEMBER", "str"], WRONGTYPE),
        (&["ZRANDMEMBER", "s", "1"], WRONGTYPE),
        // ZMPOP.
        (
            &["ZMPOP", "0", "x", "MIN"],
            "ERR numkeys should be greater than 0",
        ),
        (
            &["ZMPOP", "-1", "x", "MIN"],
            "ERR numkeys should be greater than 0",
        ),
        (&["ZMPOP", "2", "x", "MIN"], "ERR syntax error"),
        (
            &["ZMPOP", "9223372036854775807", "x", "MIN"],
            "ERR syntax error",
        ),
        (&["ZMPOP", "1", "x", "MIDDLE"], "ERR syntax error"),
        (
            &["ZMPOP", "1", "x", "MIN", "COUNT", "0"],
            "ERR count should be greater than 0",
        ),
        (
            &["ZMPOP", "1", "x", "MIN", "COUNT", "1", "COUNT", "1"],
            "ERR syntax error",
        ),
        (&["ZMPOP", "1", "x", "MIN", "COUNT"], "ERR syntax error"),
        (&["ZMPOP", "2", "nope", "str", "MIN"], WRONGTYPE),
    ] {
        assert_eq!(err_text(q::<redis::Value>(&mut c, args)), err, "{args:?}");
    }
    // ZRANDMEMBER.
    assert_eq!(
        q::<Option<String>>(&mut c, &["ZRANDMEMBER", "nope"]).unwrap(),
        None
    );
    assert_eq!(zrange(&mut c, &["ZRANDMEMBER", "nope", "3"]), strs(&[]));
    let one: String = q(&mut c, &["ZRANDMEMBER", "x"]).unwrap();
    assert!(["a", "b", "c"].contains(&one.as_str()));
    let mut all = zrange(&mut c, &["ZRANDMEMBER", "x", "10"]);
    all.sort();
    assert_eq!(all, strs(&["a", "b", "c"]));
    assert_eq!(zrange(&mut c, &["ZRANDMEMBER", "x", "0"]), strs(&[]));
    let two = zrange(&mut c, &["ZRANDMEMBER", "x", "2", "WITHSCORES"]);
    assert_eq!(two.len(), 4);
    assert_ne!(two[0], two[2], "distinct members");
    for pair in two.chunks(2) {
        let want = match pair[0].as_str() {
            "a" => "1",
            "b" => "2",
            _ => "3",
        };
        assert_eq!(pair[1], want);
    }
    let rep = zrange(&mut c, &["ZRANDMEMBER", "x", "-7", "WITHSCORES"]);
    assert_eq!(rep.len(), 14);
    assert_eq!(zrange(&mut c, &["ZRANDMEMBER", "x", "-5"]).len(), 5);
    // ZMPOP: from the first key holding a sorted set.
    let v: (String, Vec<Vec<String>>) = q(&mut c, &["ZMPOP", "2", "nope", "x", "MIN"]).unwrap();
    assert_eq!(v, ("x".to_string(), vec![strs(&["a", "1"])]));
    let v: (String, Vec<Vec<String>>) =
        q(&mut c, &["ZMPOP", "2", "x", "y", "max", "COUNT", "5"]).unwrap();
    assert_eq!(
        v,
        ("x".to_string(), vec![strs(&["c", "3"]), strs(&["b", "2"])])
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "x"]).unwrap(), 0);
    let v: (String, Vec<Vec<String>>) = q(&mut c, &["ZMPOP", "2", "x", "y", "MIN"]).unwrap();
    assert_eq!(v.0, "y");
    assert_eq!(
        q::<redis::Value>(&mut c, &["ZMPOP", "2", "nope", "x", "MIN"]).unwrap(),
        redis::Value::Nil
    );
}

#[test]
fn zscan_and_resp3_replies() {
    let (_d, s) = server();
    let mut c = s.client();
    let mut zadd = vec!["ZADD".to_string(), "big".into()];
    for i in 0..300 {
        zadd.push(format!("{}.5", i));
        zadd.push(format!("m{i:03}"));
    }
    let zadd: Vec<&str> = zadd.iter().map(String::as_str).collect();
    assert_eq!(q::<i64>(&mut c, &zadd).unwrap(), 300);
    let mut cursor = "0".to_string();
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    loop {
        let (next, batch): (String, Vec<String>) =
            q(&mut c, &["ZSCAN", "big", &cursor, "COUNT", "40"]).unwrap();
        for pair in batch.chunks(2) {
            assert!(seen.insert(pair[0].clone(), pair[1].clone()).is_none());
        }
        if next == "0" {
            break;
        }
        cursor = next;
    }
    assert_eq!(seen.len(), 300);
    assert_eq!(seen["m007"], "7.5");
    let (next, batch): (String, Vec<String>) = q(
        &mut c,
        &["ZSCAN", "big", "0", "MATCH", "m29*", "COUNT", "1000"],
    )
    .unwrap();
    assert_eq!(next, "0");
    assert_eq!(batch.len(), 20);
    let (next, batch): (String, Vec<String>) = q(&mut c, &["ZSCAN", "nope", "0"]).unwrap();
    assert_eq!((next.as_str(), batch.len()), ("0", 0));
    assert_eq!(
        err_text(q::<redis::Value>(
            &mut c,
            &["ZSCAN", "big", "0", "NOVALUES"]
        )),
        "ERR syntax error"
    );
    assert_eq!(
        q::<String>(&mut c, &["OBJECT", "ENCODING", "big"]).unwrap(),
        "skiplist"
    );
    // RESP3: scores are doubles, WITHSCORES and counted pops are pairs.
    let mut r = s.client();
    let _: redis::Value = q(&mut r, &["HELLO", "3"]).unwrap();
    let _: i64 = q(&mut r, &["ZADD", "z", "1.5", "a", "inf", "b"]).unwrap();
    assert_eq!(
        q::<redis::Value>(&mut r, &["ZSCORE", "z", "a"]).unwrap(),
        redis::Value::Double(1.5)
    );
    assert_eq!(
        q::<redis::Value>(&mut r, &["ZINCRBY", "z", "1", "a"]).unwrap(),
        redis::Value::Double(2.5)
    );
    let v = q::<redis::Value>(&mut r, &["ZRANGE", "z", "0", "-1", "WITHSCORES"]).unwrap();
    let want = redis::Value::Array(vec![
        redis::Value::Array(vec![
            redis::Value::BulkString(b"a".to_vec()),
            redis::Value::Double(2.5),
        ]),
        redis::Value::Array(vec![
            redis::Value::BulkString(b"b".to_vec()),
            redis::Value::Double(f64::INFINITY),
        ]),
    ]);
    assert_eq!(v, want);
    let v = q::<redis::Value>(&mut r, &["ZPOPMIN", "z"]).unwrap();
    assert_eq!(
        v,
        redis::Value::Array(vec![
            redis::Value::BulkString(b"a".to_vec()),
            redis::Value::Double(2.5)
        ])
    );
    let v = q::<redis::Value>(&mut r, &["ZPOPMAX", "z", "1"]).unwrap();
    assert_eq!(
        v,
        redis::Value::Array(vec![redis::Value::Array(vec![
            redis::Value::BulkString(b"b".to_vec()),
            redis::Value::Double(f64::INFINITY)
        ])])
    );
    assert_eq!(
        q::<redis::Value>(&mut r, &["ZSCORE", "z", "a"]).unwrap(),
        redis::Value::Nil
    );
}

#[test]
fn sorted_sets_take_part_in_the_keyspace_commands_and_wrongtype() {
    let (_d, s) = server();
    let mut c = s.client();
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "z", "1", "a", "2", "b"]).unwrap(),
        2
    );
    let () = redis::Commands::set(&mut c, "str", "v").unwrap();
    assert_eq!(q::<i64>(&mut c, &["HSET", "h", "f", "v"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["SADD", "s", "m"]).unwrap(), 1);
    for cmd in [
        &["GET", "z"][..],
        &["HGET", "z", "f"],
        &["SMEMBERS", "z"],
        &["SADD", "z", "x"],
        &["SINTER", "z"],
        &["ZADD", "str", "1", "x"],
        &["ZADD", "s", "XX", "1", "x"],
        &["ZINCRBY", "h", "1", "x"],
        &["ZREM", "s", "x"],
        &["ZCARD", "str"],
        &["ZSCORE", "h", "f"],
        &["ZMSCORE", "s", "m"],
        &["ZRANK", "s", "m"],
        &["ZRANGE", "s", "0", "-1"],
        &["ZRANGEBYSCORE", "h", "-inf", "+inf"],
        &["ZRANGEBYLEX", "str", "-", "+"],
        &["ZRANGESTORE", "d", "s", "0", "-1"],
        &["ZCOUNT", "s", "0", "1"],
        &["ZLEXCOUNT", "s", "-", "+"],
        &["ZPOPMIN", "s"],
        &["ZPOPMAX", "h", "2"],
        &["ZREMRANGEBYRANK", "s", "0", "-1"],
        &["ZREMRANGEBYSCORE", "s", "0", "1"],
        &["ZREMRANGEBYLEX", "s", "-", "+"],
        &["ZUNIONSTORE", "d", "2", "z", "h"],
        &["ZINTER", "2", "z", "str"],
        &["ZSCAN", "s", "0"],
    ] {
        assert_eq!(
            err_text(q::<redis::Value>(&mut c, cmd)),
            WRONGTYPE,
            "{cmd:?}"
        );
    }
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "d"]).unwrap(), 0);
    assert_eq!(q::<String>(&mut c, &["TYPE", "z"]).unwrap(), "zset");
    assert_eq!(
        q::<String>(&mut c, &["OBJECT", "ENCODING", "z"]).unwrap(),
        "listpack"
    );
    assert_eq!(q::<String>(&mut c, &["RENAME", "z", "t"]).unwrap(), "OK");
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "z"]).unwrap(), 0);
    assert_eq!(
        zrange(&mut c, &["ZRANGE", "t", "0", "-1", "WITHSCORES"]),
        strs(&["a", "1", "b", "2"])
    );
    assert_eq!(q::<i64>(&mut c, &["COPY", "t", "u"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["ZADD", "t", "5", "a"]).unwrap(), 0);
    assert_eq!(
        zrange(&mut c, &["ZRANGE", "u", "0", "-1", "WITHSCORES"]),
        strs(&["a", "1", "b", "2"]),
        "the copy has its own score records"
    );
    assert_eq!(
        zrange(&mut c, &["ZRANGEBYSCORE", "t", "3", "+inf"]),
        strs(&["a"])
    );
    // Writes keep the deadline; EXPIRE takes the set with it.
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "u", "100"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["ZADD", "u", "3", "c"]).unwrap(), 1);
    assert!(q::<i64>(&mut c, &["TTL", "u"]).unwrap() > 0);
    assert_eq!(q::<i64>(&mut c, &["PEXPIRE", "u", "30"]).unwrap(), 1);
    std::thread::sleep(std::time::Duration::from_millis(80));
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "u"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["ZADD", "u", "9", "fresh"]).unwrap(), 1);
    assert_eq!(
        zrange(&mut c, &["ZRANGE", "u", "0", "-1", "WITHSCORES"]),
        strs(&["fresh", "9"])
    );
    // SET over a sorted set, DEL: a new one of the same name starts empty.
    let () = redis::Commands::set(&mut c, "t", "now a string").unwrap();
    assert_eq!(q::<i64>(&mut c, &["DEL", "t"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["ZADD", "t", "0", "z"]).unwrap(), 1);
    assert_eq!(zrange(&mut c, &["ZRANGE", "t", "0", "-1"]), strs(&["z"]));
    assert_eq!(
        q::<i64>(&mut c, &["ZCOUNT", "t", "-inf", "+inf"]).unwrap(),
        1
    );
    // A long member makes it a skiplist.
    let long = "x".repeat(65);
    assert_eq!(q::<i64>(&mut c, &["ZADD", "t", "1", &long]).unwrap(), 1);
    assert_eq!(
        q::<String>(&mut c, &["OBJECT", "ENCODING", "t"]).unwrap(),
        "skiplist"
    );
}

/// The rank index's chunk size in these tests (the smallest allowed): a sorted set of a
/// few hundred members then has three levels and its writes split and merge chunks often.
const CHUNK: u64 = 4;

/// Reads every record under `prefix` of the store opened as `db`.
fn records(db: &tierkv::Db, prefix: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    // The first key past every key under `prefix`: its last byte that is not 0xff, plus
    // one (a version, taken from the clock, may end in 0xff); none when all are 0xff.
    let mut upper = prefix.to_vec();
    while upper.last() == Some(&0xff) {
        upper.pop();
    }
    if let Some(last) = upper.last_mut() {
        *last += 1;
    }
    let ropts = tierkv::ReadOptions {
        lower_bound: Some(prefix.to_vec()),
        upper_bound: (!upper.is_empty()).then_some(upper),
        ..tierkv::ReadOptions::new()
    };
    let mut it = db.iter_opt(&ropts).unwrap();
    it.seek_to_first().unwrap();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next().unwrap();
    }
    out
}

/// The engine key prefix of sorted set `k`'s records of family `family` (`b'f'` member,
/// `b'z'` score, `b'r'` rank index) at `version`.
fn family_prefix(family: u8, k: &[u8], version: u64) -> Vec<u8> {
    let mut p = vec![family];
    p.extend_from_slice(&(k.len() as u32).to_be_bytes());
    p.extend_from_slice(k);
    p.extend_from_slice(&version.to_be_bytes());
    p
}

/// Checks, in the store at `dir` (its server stopped), the invariant of every sorted set's
/// rank index ("the counts sum to ZCARD"): at every level of the index, the records'
/// member counts sum to the set's member count (its metadata's, what ZCARD answers); a
/// level-1 record's member and child counts are both the number of score records after
/// the previous record's separator up to and including its own; a record above level 1
/// counts as members the sum over its children (the records of the level below in that
/// range) and as children how many they are, its last child having its separator; every
/// level ends with the separator `ff ff` (above every score key); no record has more than 2 x CHUNK
/// children, nor the top level more than 2 x CHUNK records; the header record (level 0)
/// names the top level. Every set of more than one
/// member must have an index unless it is named in `unindexed`. Returns the number of
/// indexes checked.
fn check_rank_index(dir: &std::path::Path, unindexed: &[&str]) -> usize {
    let db = tierkv::Db::open(dir, tierkv::Options::default()).unwrap();
    let mut checked = 0;
    for (mk, meta) in records(&db, b"k") {
        if meta.first() != Some(&b'z') {
            continue;
        }
        let k = &mk[1..];
        let name = String::from_utf8_lossy(k).to_string();
        let version = u64::from_be_bytes(meta[1..9].try_into().unwrap());
        let card = u64::from_be_bytes(meta[9..17].try_into().unwrap());
        let sp = family_prefix(b'z', k, version);
        let scores: Vec<Vec<u8>> = records(&db, &sp)
            .into_iter()
            .map(|(key, _)| key[sp.len()..].to_vec())
            .collect();
        assert_eq!(scores.len() as u64, card, "{name}: score records");
        let rp = family_prefix(b'r', k, version);
        let mut levels: BTreeMap<u8, Vec<(Vec<u8>, u64, u64)>> = BTreeMap::new();
        let mut header = None;
        for (key, v) in records(&db, &rp) {
            if key[rp.len()..] == [0] {
                header = Some(v);
                continue;
            }
            assert_eq!(v.len(), 16, "{name}: an index record's value");
            let members = u64::from_be_bytes(v[..8].try_into().unwrap());
            let children = u64::from_be_bytes(v[8..].try_into().unwrap());
            levels.entry(key[rp.len()]).or_default().push((
                key[rp.len() + 1..].to_vec(),
                members,
                children,
            ));
        }
        if levels.is_empty() {
            assert!(
                unindexed.contains(&name.as_str()),
                "{name} ({card} members) has no rank index"
            );
            continue;
        }
        checked += 1;
        let top = *levels.keys().last().unwrap();
        assert_eq!(
            header,
            Some(vec![top]),
            "{name}: the header names the top level"
        );
        assert_eq!(
            levels.keys().copied().collect::<Vec<u8>>(),
            (1..=top).collect::<Vec<u8>>(),
            "{name}: levels 1 to the top"
        );
        assert!(
            levels[&top].len() as u64 <= 2 * CHUNK,
            "{name}: the top level has {} records",
            levels[&top].len()
        );
        for (&l, recs) in &levels {
            assert_eq!(
                recs.last().unwrap().0,
                vec![0xff, 0xff],
                "{name}: level {l} ends with the end separator"
            );
            let sum: u64 = recs.iter().map(|r| r.1).sum();
            assert_eq!(sum, card, "{name}: level {l}'s counts sum to ZCARD");
            for (i, (sep, members, children)) in recs.iter().enumerate() {
                let prev = i.checked_sub(1).map(|p| recs[p].0.as_slice());
                let within = |x: &[u8]| x <= sep.as_slice() && prev.is_none_or(|p| x > p);
                assert!(
                    *children <= 2 * CHUNK,
                    "{name}: level {l} record {i} has {children} children"
                );
                if l == 1 {
                    let n = scores.iter().filter(|s| within(s)).count() as u64;
                    assert_eq!(
                        (*members, *children),
                        (n, n),
                        "{name}: level-1 record {i} counts its score records"
                    );
                } else {
                    let kids: Vec<&(Vec<u8>, u64, u64)> =
                        levels[&(l - 1)].iter().filter(|c| within(&c.0)).collect();
                    assert_eq!(
                        kids.last().map(|c| &c.0),
                        Some(sep),
                        "{name}: level {l} separator {i} is its last child's",
                    );
                    let m: u64 = kids.iter().map(|c| c.1).sum();
                    assert_eq!(
                        (*members, *children),
                        (m, kids.len() as u64),
                        "{name}: level-{l} record {i} sums its children"
                    );
                }
            }
        }
    }
    checked
}

/// Counts the store's element records (member records `f...`, score records `z...` and
/// rank index records `r...`) by raw engine key prefix.
fn element_records(dir: &std::path::Path) -> (usize, usize, usize) {
    let db = tierkv::Db::open(dir, tierkv::Options::default()).unwrap();
    let count = |p: u8| {
        let ropts = tierkv::ReadOptions {
            lower_bound: Some(vec![p]),
            upper_bound: Some(vec![p + 1]),
            ..tierkv::ReadOptions::new()
        };
        let mut it = db.iter_opt(&ropts).unwrap();
        it.seek_to_first().unwrap();
        let mut n = 0;
        while it.valid() {
            n += 1;
            it.next().unwrap();
        }
        n
    };
    (count(b'f'), count(b'z'), count(b'r'))
}

#[test]
fn overwritten_and_deleted_sorted_sets_leave_no_element_records() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(
        dir.path(),
        tierkv::Options::default(),
        ServerConfig::default(),
    );
    let mut c = s.client();
    let mut zadd = vec!["ZADD".to_string(), "a".into()];
    for i in 0..3000 {
        zadd.push(i.to_string());
        zadd.push(format!("m{i}"));
    }
    let zadd: Vec<&str> = zadd.iter().map(String::as_str).collect();
    assert_eq!(q::<i64>(&mut c, &zadd).unwrap(), 3000);
    let _: i64 = q(&mut c, &["ZADD", "b", "1", "x", "2", "y"]).unwrap();
    let _: i64 = q(&mut c, &["ZADD", "c", "1", "x"]).unwrap();
    let _: i64 = q(&mut c, &["ZADD", "keep", "1", "x", "2", "y"]).unwrap();
    let _: i64 = q(&mut c, &["ZADD", "gone", "1", "x", "2", "y"]).unwrap();
    let _: i64 = q(&mut c, &["ZADD", "exp", "1", "x", "2", "y"]).unwrap();
    // Overwritten by a SET that reads the old value (more members than one batch deletes
    // inline; a blind SET leaves them unreachable, see docs/DEPLOYMENT.md), by a STORE,
    // deleted, emptied, renamed over, expired (the sweep removes its records).
    assert_eq!(
        q::<String>(&mut c, &["SET", "a", "string now", "XX"]).unwrap(),
        "OK"
    );
    assert_eq!(q::<i64>(&mut c, &["PEXPIRE", "exp", "20"]).unwrap(), 1);
    assert_eq!(
        q::<i64>(&mut c, &["ZUNIONSTORE", "b", "1", "c"]).unwrap(),
        1
    );
    assert_eq!(q::<i64>(&mut c, &["DEL", "c"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["ZREM", "b", "x"]).unwrap(), 1);
    assert_eq!(
        q::<String>(&mut c, &["RENAME", "keep", "gone"]).unwrap(),
        "OK"
    );
    // The sweep takes a step a second.
    std::thread::sleep(std::time::Duration::from_millis(2500));
    s.stop();
    // Only "gone" (ex-"keep") is left: two members, two score records, two index records
    // (the header and a chunk).
    assert_eq!(element_records(dir.path()), (2, 2, 2));
}

/// Random ZADD (with options, and of many members) / ZINCRBY / ZREM / ZPOPMIN / ZPOPMAX /
/// ZREMRANGEBY* / ZUNIONSTORE over a few sorted sets of up to a few hundred members
/// against a model (`BTreeMap<member, score>` per key), with a server restart in the
/// middle, and the rank index at its smallest chunk size (so its chunks split and merge
/// all along). Checked after every command: its reply (ZRANGE / ZREVRANGE of a window at
/// a random rank, ZRANK and ZREVRANK of a random member, and the removals by rank among
/// them); periodically and at the end, per key, the invariant of the layout: the count
/// (ZCARD) equals the number of elements, ZRANGE WITHSCORES (the score records) lists
/// exactly the model's members in (score, member) order with their scores, ZSCORE /
/// ZMSCORE (the member records) agree with it, ZRANK of every member and ZRANGE windows
/// at ranks throughout agree with that order (through the rank index), and ZRANGEBYSCORE
/// / ZRANGEBYLEX / ZCOUNT agree with it too; before the restart and at the end, the rank
/// index's records in the store (`check_rank_index`).
#[test]
fn random_sorted_set_operations_match_a_model() {
    type Model = BTreeMap<String, BTreeMap<String, f64>>;
    tierkv_server::set_zset_index_chunk(CHUNK);
    let dir = tempfile::tempdir().unwrap();
    let start = || {
        TestServer::start(
            dir.path(),
            tierkv::Options::default(),
            ServerConfig::default(),
        )
    };
    let mut s = start();
    let mut c = s.client();
    let mut rng = StdRng::seed_from_u64(11);
    let mut model: Model = BTreeMap::new();
    let keys = ["a", "b", "c"];
    let ordered = |set: &BTreeMap<String, f64>| -> Vec<(String, f64)> {
        let mut v: Vec<(String, f64)> = set.iter().map(|(m, s)| (m.clone(), *s)).collect();
        v.sort_by(|x, y| x.1.partial_cmp(&y.1).unwrap().then(x.0.cmp(&y.0)));
        v
    };
    let fmt = |s: f64| -> String {
        if s == f64::INFINITY {
            "inf".into()
        } else if s == f64::NEG_INFINITY {
            "-inf".into()
        } else {
            format!("{s}")
        }
    };
    let check = |c: &mut redis::Connection, model: &Model, when: &str| {
        for k in keys {
            let empty = BTreeMap::new();
            let set = model.get(k).unwrap_or(&empty);
            let want = ordered(set);
            assert_eq!(
                q::<i64>(c, &["ZCARD", k]).unwrap() as usize,
                want.len(),
                "{when} {k}: count equals elements"
            );
            let got: Vec<String> = q(c, &["ZRANGE", k, "0", "-1", "WITHSCORES"]).unwrap();
            let flat: Vec<String> = want
                .iter()
                .flat_map(|(m, s)| [m.clone(), fmt(*s)])
                .collect();
            assert_eq!(got, flat, "{when} {k}: score records in score order");
            let rev: Vec<String> = q(c, &["ZREVRANGE", k, "0", "-1"]).unwrap();
            let fwd: Vec<String> = want.iter().rev().map(|(m, _)| m.clone()).collect();
            assert_eq!(rev, fwd, "{when} {k}: reverse order");
            if !want.is_empty() {
                let mut cmd = vec!["ZMSCORE", k];
                cmd.extend(want.iter().map(|(m, _)| m.as_str()));
                let scores: Vec<String> = q(c, &cmd).unwrap();
                let model_scores: Vec<String> = want.iter().map(|(_, s)| fmt(*s)).collect();
                assert_eq!(scores, model_scores, "{when} {k}: member records agree");
                for (i, (m, _)) in want.iter().enumerate() {
                    assert_eq!(
                        q::<i64>(c, &["ZRANK", k, m]).unwrap() as usize,
                        i,
                        "{when} {k}: rank of {m}"
                    );
                }
                let len = want.len();
                for start in (0..len).step_by(7) {
                    let end = start + 9;
                    let got = zrange(c, &["ZRANGE", k, &start.to_string(), &end.to_string()]);
                    let w: Vec<String> = want
                        .iter()
                        .skip(start)
                        .take(10)
                        .map(|x| x.0.clone())
                        .collect();
                    assert_eq!(got, w, "{when} {k}: ZRANGE {start} {end}");
                    let got = zrange(c, &["ZREVRANGE", k, &start.to_string(), &end.to_string()]);
                    let w: Vec<String> = want
                        .iter()
                        .rev()
                        .skip(start)
                        .take(10)
                        .map(|x| x.0.clone())
                        .collect();
                    assert_eq!(got, w, "{when} {k}: ZREVRANGE {start} {end}");
                }
                let (lo, hi) = (-3.0, 3.0);
                let n = want.iter().filter(|(_, s)| *s > lo && *s <= hi).count();
                assert_eq!(
                    q::<i64>(c, &["ZCOUNT", k, "(-3", "3"]).unwrap() as usize,
                    n,
                    "{when} {k}: count by score"
                );
                let by: Vec<String> = q(c, &["ZRANGEBYSCORE", k, "(-3", "3"]).unwrap();
                let want_by: Vec<String> = want
                    .iter()
                    .filter(|(_, s)| *s > lo && *s <= hi)
                    .map(|(m, _)| m.clone())
                    .collect();
                assert_eq!(by, want_by, "{when} {k}: range by score");
            }
        }
    };
    for step in 0..2000 {
        if step == 1000 {
            check(&mut c, &model, "before restart");
            drop(c);
            s.stop();
            assert!(check_rank_index(dir.path(), &[]) > 0);
            s = start();
            c = s.client();
            check(&mut c, &model, "after restart");
        }
        let k = keys[rng.gen_range(0..keys.len())].to_string();
        // Most members come from a small pool (so single-member commands hit), the rest
        // from a large one, which bulk ZADDs (below) fill to a few hundred per set.
        let m = match rng.gen_bool(0.5) {
            true => format!("m{}", rng.gen_range(0..25)),
            false => format!("m{}", rng.gen_range(0..600)),
        };
        let score = (rng.gen_range(-8..8) as f64) / 2.0;
        let score = match rng.gen_range(0..30) {
            0 => f64::INFINITY,
            1 => f64::NEG_INFINITY,
            _ => score,
        };
        let set = model.entry(k.clone()).or_default();
        match rng.gen_range(0..13) {
            10..=12 => {
                // Many members in one command: up to a few chunks' splits at once.
                let n = rng.gen_range(1..40);
                let mut cmd = vec!["ZADD".to_string(), k.clone()];
                let mut added = BTreeMap::new();
                for _ in 0..n {
                    let m = format!("m{}", rng.gen_range(0..600));
                    let sc = (rng.gen_range(-400..400) as f64) / 4.0;
                    cmd.push(fmt(sc));
                    cmd.push(m.clone());
                    added.insert(m, sc);
                }
                let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
                let got: i64 = q(&mut c, &cmd).unwrap();
                let new = added.keys().filter(|m| !set.contains_key(*m)).count();
                assert_eq!(got as usize, new, "step {step}: bulk ZADD");
                set.extend(added);
            }
            0 | 1 => {
                let (opt, gt, lt) = match rng.gen_range(0..4) {
                    0 => ("GT", true, false),
                    1 => ("LT", false, true),
                    _ => ("CH", false, false),
                };
                let n: i64 = q(&mut c, &["ZADD", &k, opt, &fmt(score), &m]).unwrap();
                let cur = set.get(&m).copied();
                let changed = match cur {
                    None => true,
                    Some(c) => (!gt || score > c) && (!lt || score < c) && score != c,
                };
                if changed {
                    set.insert(m.clone(), score);
                }
                let want = match (opt, cur) {
                    ("CH", _) => changed as i64,
                    (_, None) => 1,
                    _ => 0,
                };
                assert_eq!(n, want, "step {step}: ZADD {opt}");
            }
            2 => {
                let by = (rng.gen_range(-4..4) as f64) / 4.0;
                let cur = set.get(&m).copied().unwrap_or(0.0);
                let r = q::<String>(&mut c, &["ZINCRBY", &k, &fmt(by), &m]);
                let new = cur + by;
                if new.is_nan() {
                    assert!(err_text(r).contains("NaN"), "step {step}");
                } else {
                    assert_eq!(r.unwrap(), fmt(new), "step {step}: ZINCRBY");
                    set.insert(m.clone(), new);
                }
            }
            3 => {
                let n: i64 = q(&mut c, &["ZREM", &k, &m]).unwrap();
                assert_eq!(n == 1, set.remove(&m).is_some(), "step {step}");
            }
            4 => {
                let max = rng.gen_bool(0.5);
                let count = rng.gen_range(1..4);
                let got: Vec<String> = q(
                    &mut c,
                    &[
                        if max { "ZPOPMAX" } else { "ZPOPMIN" },
                        &k,
                        &count.to_string(),
                    ],
                )
                .unwrap();
                let mut order = ordered(set);
                if max {
                    order.reverse();
                }
                let want: Vec<String> = order
                    .iter()
                    .take(count)
                    .flat_map(|(m, s)| [m.clone(), fmt(*s)])
                    .collect();
                assert_eq!(got, want, "step {step}: pop");
                for (m, _) in order.iter().take(count) {
                    set.remove(m);
                }
            }
            5 => {
                let len = set.len() as i64;
                let (a, b) = match rng.gen_bool(0.5) {
                    true => (rng.gen_range(-5i64..5), rng.gen_range(-5i64..5)),
                    false => {
                        let a = rng.gen_range(0..len.max(1));
                        (a, a + rng.gen_range(0..12))
                    }
                };
                let n: i64 = q(
                    &mut c,
                    &["ZREMRANGEBYRANK", &k, &a.to_string(), &b.to_string()],
                )
                .unwrap();
                let order = ordered(set);
                let len = order.len() as i64;
                let (mut s0, mut e0) = (
                    if a < 0 { a + len } else { a },
                    if b < 0 { b + len } else { b },
                );
                s0 = s0.max(0);
                e0 = e0.min(len - 1);
                let mut removed = 0;
                if s0 <= e0 && s0 < len {
                    for (m, _) in &order[s0 as usize..=e0 as usize] {
                        set.remove(m);
                        removed += 1;
                    }
                }
                assert_eq!(n, removed, "step {step}: ZREMRANGEBYRANK {a} {b}");
            }
            6 => {
                let lo = (rng.gen_range(-8..8) as f64) / 2.0;
                let hi = lo + (rng.gen_range(0..4) as f64) / 2.0;
                let n: i64 = q(
                    &mut c,
                    &["ZREMRANGEBYSCORE", &k, &format!("({lo}"), &fmt(hi)],
                )
                .unwrap();
                let before = set.len();
                set.retain(|_, s| !(*s > lo && *s <= hi));
                assert_eq!(
                    n as usize,
                    before - set.len(),
                    "step {step}: ZREMRANGEBYSCORE"
                );
            }
            7 => {
                let order = ordered(set);
                let a = rng.gen_range(0..order.len().max(1) + 5);
                let b = a + rng.gen_range(0..20);
                let (a, b) = (a.to_string(), b.to_string());
                let rev = rng.gen_bool(0.5);
                let mut cmd = vec!["ZRANGE", &k, &a, &b, "WITHSCORES"];
                if rev {
                    cmd.push("REV");
                }
                let got: Vec<String> = q(&mut c, &cmd).unwrap();
                let mut it: Vec<&(String, f64)> = order.iter().collect();
                if rev {
                    it.reverse();
                }
                let (a, b): (usize, usize) = (a.parse().unwrap(), b.parse().unwrap());
                let want: Vec<String> = it
                    .iter()
                    .skip(a)
                    .take(b + 1 - a)
                    .flat_map(|(m, s)| [m.clone(), fmt(*s)])
                    .collect();
                assert_eq!(got, want, "step {step}: ZRANGE {a} {b} rev {rev}");
                if let Some((m, _)) = order.get(rng.gen_range(0..order.len().max(1))) {
                    let r: i64 = q(&mut c, &["ZRANK", &k, m]).unwrap();
                    let want = order.iter().position(|(x, _)| x == m).unwrap();
                    assert_eq!(r as usize, want, "step {step}: ZRANK {m}");
                }
                let got: Vec<String> =
                    q(&mut c, &["ZRANGE", &k, "1", "3", "REV", "WITHSCORES"]).unwrap();
                let want: Vec<String> = ordered(set)
                    .iter()
                    .rev()
                    .skip(1)
                    .take(3)
                    .flat_map(|(m, s)| [m.clone(), fmt(*s)])
                    .collect();
                assert_eq!(got, want, "step {step}: ZRANGE REV");
                let r: Option<i64> = q(&mut c, &["ZREVRANK", &k, &m]).unwrap();
                let want = ordered(set).iter().rev().position(|(x, _)| *x == m);
                assert_eq!(r.map(|r| r as usize), want, "step {step}: ZREVRANK");
            }
            8 => {
                // Members of one key all at one score: lex ranges.
                let lo = format!("m{}", rng.gen_range(0..25));
                let hi = format!("m{}", rng.gen_range(0..25));
                let got: Vec<String> = q(
                    &mut c,
                    &["ZRANGEBYLEX", &k, &format!("[{lo}"), &format!("({hi}")],
                )
                .unwrap();
                let order = ordered(set);
                let single = order.windows(2).all(|w| w[0].1 == w[1].1);
                if single {
                    let want: Vec<String> = order
                        .iter()
                        .filter(|(x, _)| *x >= lo && *x < hi)
                        .map(|(x, _)| x.clone())
                        .collect();
                    assert_eq!(got, want, "step {step}: ZRANGEBYLEX");
                }
                if rng.gen_bool(0.05) {
                    let n: i64 = q(&mut c, &["ZREMRANGEBYLEX", &k, "-", "+"]).unwrap();
                    assert_eq!(n as usize, set.len(), "step {step}: ZREMRANGEBYLEX");
                    set.clear();
                }
            }
            _ => {
                let (x, y) = (keys[rng.gen_range(0..3)], keys[rng.gen_range(0..3)]);
                let sx = model.get(x).cloned().unwrap_or_default();
                let sy = model.get(y).cloned().unwrap_or_default();
                let n: i64 =
                    q(&mut c, &["ZUNIONSTORE", &k, "2", x, y, "AGGREGATE", "MAX"]).unwrap();
                let mut u = sx.clone();
                for (m, s) in sy {
                    let e = u.entry(m).or_insert(s);
                    if s > *e {
                        *e = s;
                    }
                }
                assert_eq!(n as usize, u.len(), "step {step}: ZUNIONSTORE");
                model.insert(k, u);
            }
        }
        model.retain(|_, s| !s.is_empty());
        if step % 250 == 0 {
            check(&mut c, &model, &format!("step {step}"));
        }
    }
    check(&mut c, &model, "end");
    for k in keys {
        assert_eq!(
            q::<i64>(&mut c, &["EXISTS", k]).unwrap(),
            model.contains_key(k) as i64
        );
    }
    drop(c);
    s.stop();
    check_rank_index(dir.path(), &[]);
}

/// Random argument lists for every sorted-set command (numbers at the i64 and f64 edges,
/// bounds, option words in any order): each gets a reply (an error or not), the
/// connection stays usable, and every key left is a well-formed sorted set (its count
/// equals its elements, in score order).
#[test]
fn random_arguments_never_break_the_server() {
    let (_d, s) = server();
    let mut c = s.client();
    let mut rng = StdRng::seed_from_u64(5);
    let commands = [
        "ZADD",
        "ZINCRBY",
        "ZREM",
        "ZCARD",
        "ZSCORE",
        "ZMSCORE",
        "ZRANK",
        "ZREVRANK",
        "ZRANGE",
        "ZRANGESTORE",
        "ZREVRANGE",
        "ZRANGEBYSCORE",
        "ZREVRANGEBYSCORE",
        "ZRANGEBYLEX",
        "ZREVRANGEBYLEX",
        "ZCOUNT",
        "ZLEXCOUNT",
        "ZPOPMIN",
        "ZPOPMAX",
        "ZREMRANGEBYRANK",
        "ZREMRANGEBYSCORE",
        "ZREMRANGEBYLEX",
        "ZUNION",
        "ZINTER",
        "ZDIFF",
        "ZUNIONSTORE",
        "ZINTERSTORE",
        "ZDIFFSTORE",
        "ZINTERCARD",
        "ZRANDMEMBER",
        "ZMPOP",
        "ZSCAN",
    ];
    let words = [
        "k1",
        "k2",
        "k3",
        "0",
        "1",
        "2",
        "-1",
        "-2",
        "3",
        "1.5",
        "-0",
        "inf",
        "-inf",
        "+inf",
        "nan",
        "(1",
        "(",
        "[a",
        "(b",
        "[",
        "-",
        "+",
        "a",
        "b",
        "c",
        "",
        "9223372036854775807",
        "-9223372036854775808",
        "1e308",
        "1e400",
        "NX",
        "XX",
        "GT",
        "LT",
        "CH",
        "INCR",
        "BYSCORE",
        "BYLEX",
        "REV",
        "LIMIT",
        "WITHSCORES",
        "WEIGHTS",
        "AGGREGATE",
        "SUM",
        "MIN",
        "MAX",
        "COUNT",
        "MATCH",
        "*",
    ];
    for k in ["k1", "k2"] {
        let _: i64 = q(
            &mut c,
            &["ZADD", k, "1", "a", "2", "b", "2", "c", "inf", "d"],
        )
        .unwrap();
    }
    for _ in 0..4000 {
        let name = commands[rng.gen_range(0..commands.len())];
        let n = rng.gen_range(0..8);
        let mut args = vec![name];
        if rng.gen_bool(0.8) {
            args.push(["k1", "k2", "k3"][rng.gen_range(0..3)]);
        }
        for _ in 0..n {
            args.push(words[rng.gen_range(0..words.len())]);
        }
        let _ = q::<redis::Value>(&mut c, &args)
            .map_err(|e| assert!(e.code().is_some(), "{args:?}: {e}"));
        if rng.gen_bool(0.05) {
            let _: i64 = q(&mut c, &["ZADD", "k1", "1", "a", "-inf", "e", "3", "f"]).unwrap();
        }
    }
    assert_eq!(q::<String>(&mut c, &["PING"]).unwrap(), "PONG");
    for k in ["k1", "k2", "k3"] {
        let t: String = q(&mut c, &["TYPE", k]).unwrap();
        if t != "zset" {
            continue;
        }
        let all: Vec<String> = q(&mut c, &["ZRANGE", k, "0", "-1", "WITHSCORES"]).unwrap();
        let n: i64 = q(&mut c, &["ZCARD", k]).unwrap();
        assert_eq!(all.len(), 2 * n as usize, "{k}: count equals elements");
        let scores: Vec<f64> = all
            .chunks(2)
            .map(|p| match p[1].as_str() {
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                s => s.parse().unwrap(),
            })
            .collect();
        assert!(scores.windows(2).all(|w| w[0] <= w[1]), "{k}: {all:?}");
        for p in all.chunks(2) {
            let s: String = q(&mut c, &["ZSCORE", k, &p[0]]).unwrap();
            assert_eq!(s, p[1], "{k}: member and score records agree");
        }
    }
}

/// BZPOPMIN / BZPOPMAX / BZMPOP: an element already there answers at once; an empty key
/// blocks until a ZADD (or a STORE into it) from another client, or the timeout.
#[test]
fn blocking_pops_wait_for_members() {
    use std::time::{Duration, Instant};
    let (_d, s) = server();
    let mut c = s.client();
    q::<i64>(&mut c, &["ZADD", "z", "1", "a", "2", "b"]).unwrap();
    assert_eq!(
        q::<(String, String, f64)>(&mut c, &["BZPOPMAX", "none", "z", "0"]).unwrap(),
        ("z".into(), "b".into(), 2.0)
    );
    let t = Instant::now();
    assert_eq!(
        q::<Option<(String, String, f64)>>(&mut c, &["BZPOPMIN", "empty", "0.1"]).unwrap(),
        None
    );
    assert!(t.elapsed() >= Duration::from_millis(95));
    assert_eq!(
        q::<Option<(String, Vec<(String, f64)>)>>(&mut c, &["BZMPOP", "0.05", "1", "empty", "MIN"])
            .unwrap(),
        None
    );
    let mut w = s.client();
    w.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let h = std::thread::spawn(move || {
        q::<(String, String, f64)>(&mut w, &["BZPOPMIN", "later", "0"]).unwrap()
    });
    std::thread::sleep(Duration::from_millis(150));
    q::<i64>(&mut c, &["ZADD", "later", "5", "x", "3", "y"]).unwrap();
    assert_eq!(h.join().unwrap(), ("later".into(), "y".into(), 3.0));
    let mut w = s.client();
    w.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let h = std::thread::spawn(move || {
        q::<(String, Vec<(String, f64)>)>(
            &mut w,
            &["BZMPOP", "0", "1", "stored", "MAX", "COUNT", "5"],
        )
        .unwrap()
    });
    std::thread::sleep(Duration::from_millis(150));
    q::<i64>(&mut c, &["ZUNIONSTORE", "stored", "1", "later"]).unwrap();
    assert_eq!(
        h.join().unwrap(),
        ("stored".into(), vec![("x".into(), 5.0)])
    );
    assert_eq!(
        err_text(q::<String>(&mut c, &["BZPOPMIN", "z", "-1"])),
        "ERR timeout is negative"
    );
}

/// A store of format 1 holding a sorted set as the server stored one before the rank
/// index existed (metadata, member and score records, no index records) is served (and
/// marked format 2), the set indexed by the first rank
/// lookup far from its ends, and kept indexed by later writes: ZRANGE / ZREVRANGE /
/// ZRANK agree with the order before and after, and the store's index satisfies
/// `check_rank_index`'s invariant at the end.
#[test]
fn a_set_stored_without_an_index_is_indexed_on_first_use() {
    tierkv_server::set_zset_index_chunk(CHUNK);
    let dir = tempfile::tempdir().unwrap();
    let n = 500u64;
    {
        let db = tierkv::Db::open(dir.path(), tierkv::Options::default()).unwrap();
        db.put(b"\x00tierkv-server-format", b"1").unwrap();
        let (k, version) = (b"old".as_slice(), 7u64);
        let mut meta = vec![b'z'];
        meta.extend_from_slice(&version.to_be_bytes());
        meta.extend_from_slice(&n.to_be_bytes());
        db.put([b"k".as_slice(), k].concat(), meta).unwrap();
        for i in 0..n {
            let member = format!("m{i:04}");
            let score = i as f64;
            let mut fk = family_prefix(b'f', k, version);
            fk.extend_from_slice(member.as_bytes());
            db.put(fk, score.to_bits().to_be_bytes()).unwrap();
            // The ordered score of a non-negative number: its bits with the sign bit set.
            let mut sk = family_prefix(b'z', k, version);
            sk.extend_from_slice(&(score.to_bits() | 1 << 63).to_be_bytes());
            sk.extend_from_slice(member.as_bytes());
            db.put(sk, b"").unwrap();
        }
    }
    let s = TestServer::start(
        dir.path(),
        tierkv::Options::default(),
        ServerConfig::default(),
    );
    let mut c = s.client();
    let names =
        |r: std::ops::Range<u64>| -> Vec<String> { r.map(|i| format!("m{i:04}")).collect() };
    // The first lookup steps through the set and indexes it; the next ones use the index.
    for _ in 0..2 {
        assert_eq!(
            zrange(&mut c, &["ZRANGE", "old", "250", "259"]),
            names(250..260)
        );
        assert_eq!(q::<i64>(&mut c, &["ZRANK", "old", "m0300"]).unwrap(), 300);
        assert_eq!(
            q::<i64>(&mut c, &["ZREVRANK", "old", "m0300"]).unwrap(),
            199
        );
    }
    let rev: Vec<String> = names(240..250).into_iter().rev().collect();
    assert_eq!(zrange(&mut c, &["ZREVRANGE", "old", "250", "259"]), rev);
    // Writes after the build keep the index.
    assert_eq!(
        q::<i64>(&mut c, &["ZREM", "old", "m0100", "m0101"]).unwrap(),
        2
    );
    assert_eq!(q::<i64>(&mut c, &["ZADD", "old", "0.5", "a"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["ZRANK", "old", "m0300"]).unwrap(), 299);
    assert_eq!(
        q::<i64>(&mut c, &["ZREMRANGEBYRANK", "old", "200", "299"]).unwrap(),
        100
    );
    assert_eq!(
        zrange(&mut c, &["ZRANGE", "old", "200", "201"]),
        names(301..303)
    );
    drop(c);
    s.stop();
    assert_eq!(check_rank_index(dir.path(), &[]), 1);
    // The store was marked format 2 when served (an older server refuses it now).
    let db = tierkv::Db::open(dir.path(), tierkv::Options::default()).unwrap();
    assert_eq!(
        db.get(b"\x00tierkv-server-format").unwrap().as_deref(),
        Some(&b"2"[..])
    );
}

/// Writers racing on one sorted set (ZADD of many members, ZREM, ZINCRBY, ZPOPMIN,
/// ZREMRANGEBYRANK from several connections at once) leave its rank index exact: every
/// change to it is made in the write step conditioned on the set's metadata record, so
/// racing steps retry. Checked: ZRANK of every member against ZRANGE's order, and
/// `check_rank_index`'s invariant in the store.
#[test]
fn racing_writers_keep_the_rank_index_exact() {
    tierkv_server::set_zset_index_chunk(CHUNK);
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(
        dir.path(),
        tierkv::Options::default(),
        ServerConfig::default(),
    );
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let url = s.url();
            std::thread::spawn(move || {
                let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
                let mut rng = StdRng::seed_from_u64(100 + t);
                for _ in 0..300 {
                    let m = format!("m{}", rng.gen_range(0..400));
                    let sc = rng.gen_range(0..100).to_string();
                    match rng.gen_range(0..6) {
                        0 | 1 => {
                            let mut cmd = vec!["ZADD".to_string(), "z".into()];
                            for _ in 0..rng.gen_range(1..20) {
                                cmd.push(rng.gen_range(0..100).to_string());
                                cmd.push(format!("m{}", rng.gen_range(0..400)));
                            }
                            let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
                            let _: i64 = q(&mut c, &cmd).unwrap();
                        }
                        2 => {
                            let _: i64 = q(&mut c, &["ZREM", "z", &m]).unwrap();
                        }
                        3 => {
                            let _: String = q(&mut c, &["ZINCRBY", "z", &sc, &m]).unwrap();
                        }
                        4 => {
                            let _: Vec<String> = q(&mut c, &["ZPOPMIN", "z"]).unwrap();
                        }
                        _ => {
                            let a = rng.gen_range(0..200);
                            let b = (a + rng.gen_range(0..4)).to_string();
                            let _: i64 =
                                q(&mut c, &["ZREMRANGEBYRANK", "z", &a.to_string(), &b]).unwrap();
                        }
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut c = s.client();
    let all = zrange(&mut c, &["ZRANGE", "z", "0", "-1"]);
    assert_eq!(
        q::<i64>(&mut c, &["ZCARD", "z"]).unwrap() as usize,
        all.len()
    );
    for (i, m) in all.iter().enumerate() {
        assert_eq!(
            q::<i64>(&mut c, &["ZRANK", "z", m]).unwrap() as usize,
            i,
            "{m}"
        );
    }
    drop(c);
    s.stop();
    assert_eq!(check_rank_index(dir.path(), &[]), 1);
}

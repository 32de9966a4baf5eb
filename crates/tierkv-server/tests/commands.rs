//! The everyday Redis commands against Redis 7's replies and error texts, and the server
//! keyspace format (docs/FORMAT.md "Server keyspace"): types and WRONGTYPE, hashes on the
//! ordered key space (exact counts under concurrency, incremental HGETALL, no resurrected
//! fields), RENAME/COPY/MSETNX atomic steps, KEYS/RANDOMKEY/FLUSHDB/OBJECT ENCODING, a
//! store not written by the server refused, and everything across a restart of a two-tier
//! store.

mod common;

use common::{err_text, q, two_tier_options, TestServer, WRONGTYPE};
use redis::Commands;
use std::collections::HashMap;
use tierkv_server::{ServeError, ServerConfig};

use common::default_server as server;

#[test]
fn string_commands_on_a_hash_and_hash_commands_on_a_string_answer_wrongtype() {
    let (_d, s) = server();
    let mut c = s.client();
    assert_eq!(q::<i64>(&mut c, &["HSET", "h", "f", "1"]).unwrap(), 1);
    let () = c.set("s", "1").unwrap();
    for cmd in [
        &["GET", "h"][..],
        &["APPEND", "h", "x"],
        &["INCR", "h"],
        &["INCRBYFLOAT", "h", "1"],
        &["STRLEN", "h"],
        &["GETRANGE", "h", "0", "1"],
        &["SETRANGE", "h", "0", "x"],
        &["GETDEL", "h"],
        &["GETEX", "h"],
        &["GETSET", "h", "x"],
        &["SET", "h", "x", "GET"],
    ] {
        assert_eq!(
            err_text(q::<redis::Value>(&mut c, cmd)),
            WRONGTYPE,
            "{cmd:?}"
        );
    }
    for cmd in [
        &["HSET", "s", "f", "v"][..],
        &["HGET", "s", "f"],
        &["HMGET", "s", "f"],
        &["HGETALL", "s"],
        &["HDEL", "s", "f"],
        &["HLEN", "s"],
        &["HEXISTS", "s", "f"],
        &["HINCRBY", "s", "f", "1"],
        &["HSCAN", "s", "0"],
        &["HKEYS", "s"],
    ] {
        assert_eq!(
            err_text(q::<redis::Value>(&mut c, cmd)),
            WRONGTYPE,
            "{cmd:?}"
        );
    }
    // The failed commands changed nothing; MGET reads a hash as nil; SET replaces any type.
    assert_eq!(q::<String>(&mut c, &["HGET", "h", "f"]).unwrap(), "1");
    let v: Vec<Option<String>> = q(&mut c, &["MGET", "h", "s"]).unwrap();
    assert_eq!(v, vec![None, Some("1".into())]);
    assert_eq!(q::<String>(&mut c, &["TYPE", "h"]).unwrap(), "hash");
    assert_eq!(q::<String>(&mut c, &["TYPE", "s"]).unwrap(), "string");
    assert_eq!(q::<String>(&mut c, &["TYPE", "none"]).unwrap(), "none");
    let () = c.set("h", "now a string").unwrap();
    assert_eq!(q::<String>(&mut c, &["TYPE", "h"]).unwrap(), "string");
    // A hash created again under the same name has none of the old fields.
    assert_eq!(q::<i64>(&mut c, &["DEL", "h"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["HSET", "h", "g", "2"]).unwrap(), 1);
    let all: HashMap<String, String> = c.hgetall("h").unwrap();
    assert_eq!(all, HashMap::from([("g".into(), "2".into())]));
}

#[test]
fn setnx_getdel_getrange_setrange_msetnx_follow_redis() {
    let (_d, s) = server();
    let mut c = s.client();
    assert_eq!(q::<i64>(&mut c, &["SETNX", "k", "a"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["SETNX", "k", "b"]).unwrap(), 0);
    assert_eq!(q::<String>(&mut c, &["GETDEL", "k"]).unwrap(), "a");
    assert_eq!(q::<Option<String>>(&mut c, &["GETDEL", "k"]).unwrap(), None);
    assert!(!c.exists::<_, bool>("k").unwrap());

    let () = c.set("s", "This is a string").unwrap();
    for (start, end, want) in [
        ("0", "3", "This"),
        ("-3", "-1", "ing"),
        ("0", "-1", "This is a string"),
        ("10", "100", "string"),
        ("5", "3", ""),
        ("-1", "-5", ""),
        ("-100", "2", "Thi"),
    ] {
        assert_eq!(
            q::<String>(&mut c, &["GETRANGE", "s", start, end]).unwrap(),
            want,
            "GETRANGE s {start} {end}"
        );
    }
    assert_eq!(
        q::<String>(&mut c, &["GETRANGE", "nope", "0", "-1"]).unwrap(),
        ""
    );
    assert_eq!(
        err_text(q::<String>(&mut c, &["GETRANGE", "s", "a", "1"])),
        "ERR value is not an integer or out of range"
    );

    let () = c.set("r", "Hello World").unwrap();
    assert_eq!(
        q::<i64>(&mut c, &["SETRANGE", "r", "6", "Redis"]).unwrap(),
        11
    );
    assert_eq!(c.get::<_, String>("r").unwrap(), "Hello Redis");
    assert_eq!(q::<i64>(&mut c, &["SETRANGE", "pad", "3", "x"]).unwrap(), 4);
    assert_eq!(c.get::<_, Vec<u8>>("pad").unwrap(), b"\0\0\0x");
    // An empty value creates nothing and reports the current length.
    assert_eq!(
        q::<i64>(&mut c, &["SETRANGE", "absent", "5", ""]).unwrap(),
        0
    );
    assert!(!c.exists::<_, bool>("absent").unwrap());
    assert_eq!(q::<i64>(&mut c, &["SETRANGE", "r", "100", ""]).unwrap(), 11);
    assert_eq!(
        err_text(q::<i64>(&mut c, &["SETRANGE", "r", "-1", "x"])),
        "ERR offset is out of range"
    );
    assert_eq!(
        err_text(q::<i64>(&mut c, &["SETRANGE", "r", "536870912", "x"])),
        "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
    );

    assert_eq!(
        q::<i64>(&mut c, &["MSETNX", "m1", "a", "m2", "b"]).unwrap(),
        1
    );
    assert_eq!(
        q::<i64>(&mut c, &["MSETNX", "m2", "x", "m3", "c"]).unwrap(),
        0
    );
    assert!(!c.exists::<_, bool>("m3").unwrap(), "all or nothing");
    assert_eq!(c.get::<_, String>("m2").unwrap(), "b");
    assert_eq!(
        err_text(q::<i64>(&mut c, &["MSETNX", "a", "1", "b"])),
        "ERR wrong number of arguments for 'msetnx' command"
    );
}

#[test]
fn incrbyfloat_decr_decrby_follow_redis() {
    let (_d, s) = server();
    let mut c = s.client();
    let () = c.set("f", "10.50").unwrap();
    assert_eq!(
        q::<String>(&mut c, &["INCRBYFLOAT", "f", "0.1"]).unwrap(),
        "10.6"
    );
    assert_eq!(
        q::<String>(&mut c, &["INCRBYFLOAT", "f", "-5"]).unwrap(),
        "5.6"
    );
    let () = c.set("e", "5.0e3").unwrap();
    assert_eq!(
        q::<String>(&mut c, &["INCRBYFLOAT", "e", "2.0e2"]).unwrap(),
        "5200"
    );
    assert_eq!(
        q::<String>(&mut c, &["INCRBYFLOAT", "new", "3"]).unwrap(),
        "3"
    );
    assert_eq!(
        err_text(q::<String>(&mut c, &["INCRBYFLOAT", "f", "abc"])),
        "ERR value is not a valid float"
    );
    let () = c.set("txt", "hello").unwrap();
    assert_eq!(
        err_text(q::<String>(&mut c, &["INCRBYFLOAT", "txt", "1"])),
        "ERR value is not a valid float"
    );
    assert_eq!(
        err_text(q::<String>(&mut c, &["INCRBYFLOAT", "f", "inf"])),
        "ERR increment would produce NaN or Infinity"
    );
    assert_eq!(q::<i64>(&mut c, &["DECR", "d"]).unwrap(), -1);
    assert_eq!(q::<i64>(&mut c, &["DECRBY", "d", "10"]).unwrap(), -11);
    assert_eq!(
        err_text(q::<i64>(&mut c, &["DECRBY", "d", "-9223372036854775808"])),
        "ERR decrement would overflow"
    );
}

#[test]
fn rename_renamenx_copy_carry_the_value_of_every_type() {
    let (_d, s) = server();
    let mut c = s.client();
    let () = c.set("a", "1").unwrap();
    assert_eq!(q::<String>(&mut c, &["RENAME", "a", "b"]).unwrap(), "OK");
    assert!(!c.exists::<_, bool>("a").unwrap());
    assert_eq!(c.get::<_, String>("b").unwrap(), "1");
    assert_eq!(
        err_text(q::<String>(&mut c, &["RENAME", "nope", "x"])),
        "ERR no such key"
    );
    assert_eq!(q::<String>(&mut c, &["RENAME", "b", "b"]).unwrap(), "OK");
    let () = c.set("c", "2").unwrap();
    assert_eq!(q::<i64>(&mut c, &["RENAMENX", "b", "c"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["RENAMENX", "b", "d"]).unwrap(), 1);
    assert_eq!(c.get::<_, String>("d").unwrap(), "1");

    // A hash moves with all its fields; the one it replaces leaves nothing behind.
    let () = c.hset_multiple("h", &[("f1", "v1"), ("f2", "v2")]).unwrap();
    let () = c.hset_multiple("g", &[("old", "x")]).unwrap();
    assert_eq!(q::<String>(&mut c, &["RENAME", "h", "g"]).unwrap(), "OK");
    let g: HashMap<String, String> = c.hgetall("g").unwrap();
    assert_eq!(
        g,
        HashMap::from([("f1".into(), "v1".into()), ("f2".into(), "v2".into())])
    );
    assert_eq!(q::<i64>(&mut c, &["HLEN", "g"]).unwrap(), 2);
    assert!(!c.exists::<_, bool>("h").unwrap());

    assert_eq!(q::<i64>(&mut c, &["COPY", "g", "g2"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["HSET", "g2", "f3", "v3"]).unwrap(), 1);
    assert_eq!(
        q::<i64>(&mut c, &["HLEN", "g"]).unwrap(),
        2,
        "a copy is independent"
    );
    assert_eq!(q::<i64>(&mut c, &["COPY", "d", "g2"]).unwrap(), 0);
    assert_eq!(
        q::<i64>(&mut c, &["COPY", "d", "g2", "REPLACE"]).unwrap(),
        1
    );
    assert_eq!(c.get::<_, String>("g2").unwrap(), "1");
    assert_eq!(q::<i64>(&mut c, &["COPY", "nope", "x"]).unwrap(), 0);
    assert_eq!(
        err_text(q::<i64>(&mut c, &["COPY", "d", "d"])),
        "ERR source and destination objects are the same"
    );
    assert_eq!(
        err_text(q::<i64>(&mut c, &["COPY", "d", "e", "DB", "1"])),
        "ERR DB index is out of range"
    );
    assert_eq!(q::<i64>(&mut c, &["COPY", "d", "e", "DB", "0"]).unwrap(), 1);
}

#[test]
fn keys_randomkey_dbsize_and_flushdb() {
    let (_d, s) = server();
    let mut c = s.client();
    assert_eq!(q::<Option<String>>(&mut c, &["RANDOMKEY"]).unwrap(), None);
    for i in 0..20 {
        let () = c.set(format!("user:{i}"), i).unwrap();
    }
    let () = c.hset("hash:1", "f", "v").unwrap();
    let mut k: Vec<String> = q(&mut c, &["KEYS", "user:1*"]).unwrap();
    k.sort();
    let mut want: Vec<String> = (0..20)
        .map(|i| format!("user:{i}"))
        .filter(|s| s.starts_with("user:1"))
        .collect();
    want.sort();
    assert_eq!(k, want);
    assert_eq!(q::<Vec<String>>(&mut c, &["KEYS", "*"]).unwrap().len(), 21);
    let r: String = q(&mut c, &["RANDOMKEY"]).unwrap();
    assert!(r.starts_with("user:") || r == "hash:1", "{r}");
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 21);
    // A count is not reused across writes to a small store (Redis's test suite deletes
    // every key and asks DBSIZE at once; it was answered from a 5-second-old count).
    for i in 0..5 {
        let _: i64 = q(&mut c, &["DEL", &format!("user:{i}")]).unwrap();
        assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 20 - i);
    }
    let () = c.set("user:0", 0).unwrap();
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 17);
    for i in 1..5 {
        let () = c.set(format!("user:{i}"), i).unwrap();
    }
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 21);
    // SCAN TYPE filters by type.
    let mut cursor = "0".to_string();
    let mut hashes = Vec::new();
    loop {
        let (next, keys): (String, Vec<String>) =
            q(&mut c, &["SCAN", &cursor, "TYPE", "hash"]).unwrap();
        hashes.extend(keys);
        if next == "0" {
            break;
        }
        cursor = next;
    }
    assert_eq!(hashes, vec!["hash:1".to_string()]);
    assert_eq!(q::<String>(&mut c, &["FLUSHDB"]).unwrap(), "OK");
    assert_eq!(q::<Vec<String>>(&mut c, &["KEYS", "*"]).unwrap().len(), 0);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 0);
    let () = c.set("after", "1").unwrap();
    assert_eq!(q::<String>(&mut c, &["FLUSHALL", "ASYNC"]).unwrap(), "OK");
    assert_eq!(q::<String>(&mut c, &["FLUSHDB", "SYNC"]).unwrap(), "OK");
    assert_eq!(
        err_text(q::<String>(&mut c, &["FLUSHDB", "LATER"])),
        "ERR syntax error"
    );
    assert!(!c.exists::<_, bool>("after").unwrap());
    // The store still serves after a flush (the format marker survives it).
    let () = c.hset("h", "f", "v").unwrap();
    assert_eq!(q::<String>(&mut c, &["HGET", "h", "f"]).unwrap(), "v");
}

#[test]
fn object_encoding_follows_redis_rules() {
    let (_d, s) = server();
    let mut c = s.client();
    let () = c.set("int", "12345").unwrap();
    let () = c.set("short", "hello").unwrap();
    let () = c.set("long", "x".repeat(45)).unwrap();
    let () = c.hset("small", "f", "v").unwrap();
    let () = c.hset("bigval", "f", "v".repeat(65)).unwrap();
    for i in 0..129 {
        let () = c.hset("many", format!("f{i}"), i).unwrap();
    }
    for (key, want) in [
        ("int", "int"),
        ("short", "embstr"),
        ("long", "raw"),
        ("small", "listpack"),
        ("bigval", "hashtable"),
        ("many", "hashtable"),
    ] {
        assert_eq!(
            q::<String>(&mut c, &["OBJECT", "ENCODING", key]).unwrap(),
            want,
            "{key}"
        );
    }
    assert_eq!(
        q::<Option<String>>(&mut c, &["OBJECT", "ENCODING", "nope"]).unwrap(),
        None
    );
    assert!(err_text(q::<String>(&mut c, &["OBJECT", "BOGUS", "k"])).contains("OBJECT HELP"));
}

#[test]
fn hash_commands_follow_redis() {
    let (_d, s) = server();
    let mut c = s.client();
    assert_eq!(
        q::<i64>(&mut c, &["HSET", "h", "a", "1", "b", "2"]).unwrap(),
        2
    );
    assert_eq!(
        q::<i64>(&mut c, &["HSET", "h", "a", "10", "c", "3"]).unwrap(),
        1
    );
    assert_eq!(
        q::<i64>(&mut c, &["HSET", "h", "d", "x", "d", "y"]).unwrap(),
        1
    );
    assert_eq!(q::<String>(&mut c, &["HGET", "h", "d"]).unwrap(), "y");
    assert_eq!(
        err_text(q::<i64>(&mut c, &["HSET", "h", "a"])),
        "ERR wrong number of arguments for 'hset' command"
    );
    assert_eq!(
        err_text(q::<i64>(&mut c, &["HSET", "h", "a", "1", "b"])),
        "ERR wrong number of arguments for 'hset' command"
    );
    assert_eq!(
        q::<String>(&mut c, &["HMSET", "h", "e", "5"]).unwrap(),
        "OK"
    );
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]).unwrap(), 5);
    assert_eq!(q::<String>(&mut c, &["HGET", "h", "a"]).unwrap(), "10");
    assert_eq!(
        q::<Option<String>>(&mut c, &["HGET", "h", "zz"]).unwrap(),
        None
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["HGET", "nope", "a"]).unwrap(),
        None
    );
    let v: Vec<Option<String>> = q(&mut c, &["HMGET", "h", "a", "zz", "c"]).unwrap();
    assert_eq!(v, vec![Some("10".into()), None, Some("3".into())]);
    let v: Vec<Option<String>> = q(&mut c, &["HMGET", "nope", "a"]).unwrap();
    assert_eq!(v, vec![None]);
    assert_eq!(q::<i64>(&mut c, &["HEXISTS", "h", "a"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["HEXISTS", "h", "zz"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["HSTRLEN", "h", "a"]).unwrap(), 2);
    assert_eq!(q::<i64>(&mut c, &["HSTRLEN", "h", "zz"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["HSETNX", "h", "a", "no"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["HSETNX", "h", "f", "6"]).unwrap(), 1);
    let keys: Vec<String> = q(&mut c, &["HKEYS", "h"]).unwrap();
    assert_eq!(keys, vec!["a", "b", "c", "d", "e", "f"], "field order");
    let vals: Vec<String> = q(&mut c, &["HVALS", "h"]).unwrap();
    assert_eq!(vals, vec!["10", "2", "3", "y", "5", "6"]);
    assert_eq!(q::<i64>(&mut c, &["HINCRBY", "h", "a", "5"]).unwrap(), 15);
    assert_eq!(q::<i64>(&mut c, &["HINCRBY", "h", "n", "-3"]).unwrap(), -3);
    assert_eq!(
        err_text(q::<i64>(&mut c, &["HINCRBY", "h", "d", "1"])),
        "ERR hash value is not an integer"
    );
    assert_eq!(
        err_text(q::<i64>(&mut c, &["HINCRBY", "h", "a", "x"])),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err_text(q::<i64>(
            &mut c,
            &["HINCRBY", "h", "a", "9223372036854775807"]
        )),
        "ERR increment or decrement would overflow"
    );
    assert_eq!(
        q::<String>(&mut c, &["HINCRBYFLOAT", "h", "fl", "1.5"]).unwrap(),
        "1.5"
    );
    assert_eq!(
        q::<String>(&mut c, &["HINCRBYFLOAT", "h", "fl", "0.25"]).unwrap(),
        "1.75"
    );
    assert_eq!(
        err_text(q::<String>(&mut c, &["HINCRBYFLOAT", "h", "d", "1"])),
        "ERR hash value is not a float"
    );
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]).unwrap(), 8);
    assert_eq!(
        q::<i64>(&mut c, &["HDEL", "h", "a", "zz", "b", "a"]).unwrap(),
        2
    );
    assert_eq!(q::<i64>(&mut c, &["HDEL", "nope", "a"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]).unwrap(), 6);
    // Deleting the last field deletes the key.
    let () = c.hset("one", "f", "v").unwrap();
    assert_eq!(q::<i64>(&mut c, &["HDEL", "one", "f"]).unwrap(), 1);
    assert_eq!(q::<String>(&mut c, &["TYPE", "one"]).unwrap(), "none");
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "one"]).unwrap(), 0);
    let all: HashMap<String, String> = q(&mut c, &["HGETALL", "nope"]).unwrap();
    assert!(all.is_empty());
    // Binary-safe fields, and fields of a key that is a prefix of another key.
    let () = c.hset("p", &b"\x00\xff"[..], &b"bin"[..]).unwrap();
    let () = c.hset("pq", "x", "1").unwrap();
    assert_eq!(q::<i64>(&mut c, &["HLEN", "p"]).unwrap(), 1);
    let got: Vec<u8> = c.hget("p", &b"\x00\xff"[..]).unwrap();
    assert_eq!(got, b"bin");
    // RESP3: HGETALL is a map.
    let mut raw = redis::Client::open(s.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let _: redis::Value = q(&mut raw, &["HELLO", "3"]).unwrap();
    let v: redis::Value = q(&mut raw, &["HGETALL", "pq"]).unwrap();
    assert!(
        matches!(v, redis::Value::Map(ref m) if m.len() == 1),
        "{v:?}"
    );
}

#[test]
fn hscan_returns_every_field_once() {
    let (_d, s) = server();
    let mut c = s.client();
    let mut p = redis::pipe();
    for i in 0..300 {
        p.hset("h", format!("f{i:03}"), i).ignore();
    }
    let () = p.query(&mut c).unwrap();
    let mut cursor = "0".to_string();
    let mut seen: HashMap<String, String> = HashMap::new();
    let mut calls = 0;
    loop {
        let (next, items): (String, Vec<String>) =
            q(&mut c, &["HSCAN", "h", &cursor, "COUNT", "50"]).unwrap();
        assert!(items.len() <= 100);
        for fv in items.chunks(2) {
            assert!(seen.insert(fv[0].clone(), fv[1].clone()).is_none(), "once");
        }
        calls += 1;
        if next == "0" {
            break;
        }
        cursor = next;
    }
    assert_eq!(seen.len(), 300);
    assert!(calls >= 6);
    assert_eq!(seen["f042"], "42");
    let (next, items): (String, Vec<String>) = q(
        &mut c,
        &[
            "HSCAN", "h", "0", "MATCH", "f1?0", "COUNT", "1000", "NOVALUES",
        ],
    )
    .unwrap();
    assert_eq!(next, "0");
    assert_eq!(items.len(), 10);
    assert!(items.iter().all(|f| f.starts_with('f')));
    let (next, items): (String, Vec<String>) = q(&mut c, &["HSCAN", "nope", "0"]).unwrap();
    assert_eq!((next.as_str(), items.len()), ("0", 0));
    // redis-rs drives HSCAN too.
    let it: Vec<(String, String)> = c
        .hscan("h")
        .unwrap()
        .collect::<redis::RedisResult<_>>()
        .unwrap();
    assert_eq!(it.len(), 300);
}

/// HGETALL of a hash larger than the connection's output limit completes: the reply is
/// produced in steps of `reply_chunk` as the client reads it (the Resume machinery), so
/// the server never holds more than the limit. HKEYS and HVALS likewise.
#[test]
fn hgetall_of_a_hash_larger_than_the_output_limit_is_produced_incrementally() {
    let dir = tempfile::tempdir().unwrap();
    let config = ServerConfig {
        limits: tierkv_server::Limits {
            max_bulk: 64 * 1024,
            max_key: 1024,
            max_query: 1024 * 1024,
            ..tierkv_server::Limits::default()
        },
        reply_chunk: 16 * 1024,
        output_limit: 256 * 1024,
        ..ServerConfig::default()
    };
    let s = TestServer::start(dir.path(), tierkv::Options::default(), config);
    let mut c = s.client();
    let value = "v".repeat(1000);
    let n = 2000; // ~2 MB of fields and values: 8x the output limit
    for chunk in (0..n).collect::<Vec<_>>().chunks(200) {
        let mut p = redis::pipe();
        for i in chunk {
            p.hset("big", format!("field{i:05}"), &value).ignore();
        }
        let () = p.query(&mut c).unwrap();
    }
    let all: HashMap<String, String> = c.hgetall("big").unwrap();
    assert_eq!(all.len(), n);
    assert!(all.values().all(|v| v == &value));
    let keys: Vec<String> = q(&mut c, &["HKEYS", "big"]).unwrap();
    assert_eq!(keys.len(), n);
    let vals: Vec<String> = q(&mut c, &["HVALS", "big"]).unwrap();
    assert_eq!(vals.len(), n);
    // Deleting it removes every field (more than one batch's worth inline).
    assert_eq!(q::<i64>(&mut c, &["DEL", "big"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["HSET", "big", "only", "1"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "big"]).unwrap(), 1);
    let all: HashMap<String, String> = c.hgetall("big").unwrap();
    assert_eq!(all.len(), 1);
}

/// Concurrent HINCRBY and HSET on one hash lose no update and keep HLEN exact: every
/// hash write is one atomic step conditioned on the metadata record.
#[test]
fn concurrent_hash_writes_lose_no_update_and_keep_the_count_exact() {
    let (_d, s) = server();
    let url = s.url();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let url = url.clone();
            std::thread::spawn(move || {
                let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
                for i in 0..150 {
                    let _: i64 = c.hincr("h", "counter", 1).unwrap();
                    let _: i64 = c.hset("h", format!("t{t}-{i}"), i).unwrap();
                    let _: i64 = c.hset("h", format!("shared{}", i % 10), t).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut c = s.client();
    assert_eq!(c.hget::<_, _, i64>("h", "counter").unwrap(), 600);
    let all: HashMap<String, String> = c.hgetall("h").unwrap();
    assert_eq!(all.len(), 1 + 600 + 10);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]).unwrap(), all.len() as i64);
}

#[test]
fn command_table_registers_every_command() {
    let (_d, s) = server();
    let mut c = s.client();
    let names: Vec<String> = q(&mut c, &["COMMAND", "LIST"]).unwrap();
    for n in [
        "setnx",
        "getdel",
        "getex",
        "getrange",
        "setrange",
        "incrbyfloat",
        "msetnx",
        "keys",
        "rename",
        "renamenx",
        "copy",
        "randomkey",
        "object",
        "flushdb",
        "flushall",
        "expire",
        "pexpire",
        "expireat",
        "pexpireat",
        "ttl",
        "pttl",
        "expiretime",
        "pexpiretime",
        "persist",
        "setex",
        "psetex",
        "hset",
        "hmset",
        "hsetnx",
        "hget",
        "hmget",
        "hgetall",
        "hkeys",
        "hvals",
        "hdel",
        "hlen",
        "hexists",
        "hstrlen",
        "hincrby",
        "hincrbyfloat",
        "hscan",
        "lpush",
        "blpop",
        "lmove",
    ] {
        assert!(
            names.iter().any(|x| x == n),
            "{n} missing from COMMAND LIST"
        );
    }
    let info: Vec<Vec<redis::Value>> = q(&mut c, &["COMMAND", "INFO", "hset", "rename"]).unwrap();
    assert_eq!(info[0][1], redis::Value::Int(-4));
    assert_eq!(
        (&info[1][3], &info[1][4], &info[1][5]),
        (
            &redis::Value::Int(1),
            &redis::Value::Int(2),
            &redis::Value::Int(1)
        )
    );
    // Still unsupported commands answer as Redis does for unknown ones.
    assert_eq!(
        err_text(q::<i64>(&mut c, &["XADD", "l", "*", "f", "v"])),
        "ERR unknown command 'XADD', with args beginning with: 'l' '*' 'f' 'v' "
    );
    assert_eq!(
        err_text(q::<i64>(&mut c, &["HGET", "h"])),
        "ERR wrong number of arguments for 'hget' command"
    );
}

/// A store holding records not written by the server (from `tierkv put`, the benchmark
/// or a library user) is refused with a clear error; an empty one is adopted; an unknown
/// format version is refused.
#[test]
fn a_store_not_written_by_the_server_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = tierkv::Db::open(dir.path(), tierkv::Options::default()).unwrap();
    db.put(b"raw-key", b"raw-value").unwrap();
    let e = TestServer::serve(db, ServerConfig::default())
        .err()
        .expect("refused");
    assert!(matches!(e, ServeError::Format(_)), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("holds data not written by tierkv serve")
            && msg.contains("serve an empty directory"),
        "{msg}"
    );

    let dir = tempfile::tempdir().unwrap();
    let db = tierkv::Db::open(dir.path(), tierkv::Options::default()).unwrap();
    db.put(b"\x00tierkv-server-format", b"99").unwrap();
    let e = TestServer::serve(db, ServerConfig::default())
        .err()
        .expect("refused");
    assert!(
        e.to_string().contains("format version \"99\" is unknown"),
        "{e}"
    );

    // An empty store is adopted, and served again after a restart.
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(
        dir.path(),
        tierkv::Options::default(),
        ServerConfig::default(),
    );
    let () = s.client().set("k", "v").unwrap();
    s.stop();
    let s = TestServer::start(
        dir.path(),
        tierkv::Options::default(),
        ServerConfig::default(),
    );
    assert_eq!(s.client().get::<_, String>("k").unwrap(), "v");
}

/// Strings, counters and hashes (with fields spread over both tiers) read back the same
/// after a restart of a two-tier store; a hash recreated after the restart gets a version
/// no earlier hash used, so none of the old fields reappear.
#[test]
fn every_type_survives_a_restart_of_a_two_tier_store() {
    let fast = tempfile::tempdir().unwrap();
    let slow = tempfile::tempdir().unwrap();
    let s = TestServer::start(
        fast.path(),
        two_tier_options(slow.path()),
        ServerConfig::default(),
    );
    let mut c = s.client();
    let value = "x".repeat(200);
    let mut p = redis::pipe();
    for i in 0..2000 {
        p.set(format!("s{i:04}"), &value).ignore();
        p.hset(format!("user:{}", i % 20), format!("f{i:04}"), i)
            .ignore();
    }
    p.incr("counter", 7).ignore();
    let () = p.query(&mut c).unwrap();
    let () = c.hset_multiple("gone", &[("a", "1"), ("b", "2")]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["DEL", "gone"]).unwrap(), 1);
    s.stop();
    let slow_files = std::fs::read_dir(slow.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".sst")
        })
        .count();
    assert!(slow_files > 0, "the data reached the slow tier");

    let s = TestServer::start(
        fast.path(),
        two_tier_options(slow.path()),
        ServerConfig::default(),
    );
    let mut c = s.client();
    assert_eq!(c.get::<_, String>("s1234").unwrap(), value);
    assert_eq!(c.get::<_, i64>("counter").unwrap(), 7);
    for u in 0..20 {
        let h: HashMap<String, i64> = c.hgetall(format!("user:{u}")).unwrap();
        assert_eq!(h.len(), 100, "user:{u}");
        assert!(h
            .iter()
            .all(|(f, v)| f == &format!("f{v:04}") && v % 20 == u));
        assert_eq!(
            q::<i64>(&mut c, &["HLEN", &format!("user:{u}")]).unwrap(),
            100
        );
    }
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 2000 + 20 + 1);
    assert_eq!(q::<i64>(&mut c, &["HSET", "gone", "c", "3"]).unwrap(), 1);
    let h: HashMap<String, String> = c.hgetall("gone").unwrap();
    assert_eq!(h, HashMap::from([("c".into(), "3".into())]));
}

/// KEYS builds its reply in memory as Redis does, but bounded: a reply past the
/// connection's output limit closes that connection (checked while scanning, so the server
/// never holds more than the limit); the server serves others, and a narrower pattern works.
#[test]
fn keys_past_the_output_limit_closes_the_connection() {
    let dir = tempfile::tempdir().unwrap();
    let config = ServerConfig {
        limits: tierkv_server::Limits {
            max_bulk: 1024,
            max_key: 1024,
            max_query: 1024 * 1024,
            ..tierkv_server::Limits::default()
        },
        reply_chunk: 1024,
        output_limit: 70 * 1024,
        ..ServerConfig::default()
    };
    let s = TestServer::start(dir.path(), tierkv::Options::default(), config);
    let mut c = s.client();
    let mut p = redis::pipe();
    for i in 0..2000 {
        p.set(format!("{}{i:05}", "k".repeat(100)), 1).ignore();
    }
    p.set("small", 1).ignore();
    let () = p.query(&mut c).unwrap();
    assert!(
        q::<Vec<String>>(&mut c, &["KEYS", "*"]).is_err(),
        "200 KB of keys past a 70 KB limit"
    );
    let mut c = s.client();
    assert_eq!(
        q::<Vec<String>>(&mut c, &["KEYS", "sm*"]).unwrap(),
        vec!["small"]
    );
}

/// `keyspace_hits` and `keyspace_misses` from INFO.
fn hits_and_misses(c: &mut redis::Connection) -> (u64, u64) {
    let info: String = redis::cmd("INFO").arg("stats").query(c).unwrap();
    let field = |name: &str| -> u64 {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .unwrap_or_else(|| panic!("no {name} in INFO"))
            .trim()
            .parse()
            .unwrap()
    };
    (field("keyspace_hits"), field("keyspace_misses"))
}

/// One reply as the client sees it: a value or an error's text.
fn reply(r: redis::RedisResult<redis::Value>) -> Result<redis::Value, String> {
    r.map_err(|e| match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        _ => e.to_string(),
    })
}

/// Pipelined GETs (answered by batched reads, `multi_get_prefix`) and MGET answer exactly
/// as GETs sent one at a time: values from memtables and both tiers, missing keys,
/// WRONGTYPE for a hash (nil inside MGET), expired keys absent and live expiring keys
/// present, the same hit and miss counts; a reply chunk far smaller than the values makes
/// the batched reads stop at their byte bound and the rest of the run follow in order; a
/// write inside a pipeline of GETs is seen by the GETs after it and not by those before.
#[test]
fn pipelined_gets_and_mget_answer_as_sequential_gets() {
    let dir = tempfile::tempdir().unwrap();
    let slow = tempfile::tempdir().unwrap();
    let clock = std::sync::Arc::new(tierkv::ManualClock::new(1_700_000_000_000));
    let opts = tierkv::Options {
        clock: clock.clone(),
        ..two_tier_options(slow.path())
    };
    let config = ServerConfig {
        reply_chunk: 8 * 1024,
        ..ServerConfig::default()
    };
    let s = TestServer::start(dir.path(), opts, config);
    let mut c = s.client();
    let value = |i: usize| -> String {
        let fill = if i.is_multiple_of(9) {
            20_000
        } else {
            50 + i % 300
        };
        format!("{i}-{}", "v".repeat(fill))
    };
    for i in 0..300 {
        let () = c.set(format!("s{i}"), value(i)).unwrap();
    }
    for i in 0..20 {
        assert_eq!(
            q::<i64>(&mut c, &["HSET", &format!("h{i}"), "f", "x"]).unwrap(),
            1
        );
    }
    for i in 0..40 {
        let (k, v) = (format!("e{i}"), value(i));
        assert_eq!(
            q::<String>(&mut c, &["SET", &k, &v, "PX", "1000"]).unwrap(),
            "OK"
        );
        let (k, v) = (format!("f{i}"), value(i + 1));
        assert_eq!(
            q::<String>(&mut c, &["SET", &k, &v, "PX", "1000000"]).unwrap(),
            "OK"
        );
    }
    // The e keys expire; the f keys do not yet.
    clock.advance(5_000);
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: usize| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng % n as u64) as usize
    };
    let keys: Vec<String> = (0..700)
        .map(|_| match next(10) {
            0 => format!("h{}", next(20)),
            1 => format!("e{}", next(40)),
            2 => format!("f{}", next(40)),
            3 => format!("missing{}", next(1000)),
            _ => format!("s{}", next(300)),
        })
        .collect();
    let before = hits_and_misses(&mut c);
    let one_by_one: Vec<Result<redis::Value, String>> = keys
        .iter()
        .map(|k| reply(redis::cmd("GET").arg(k).query(&mut c)))
        .collect();
    let after_sequential = hits_and_misses(&mut c);
    let mut p = redis::pipe();
    for k in &keys {
        p.cmd("GET").arg(k);
    }
    let piped: Vec<redis::RedisResult<redis::Value>> = p.ignore_errors().query(&mut c).unwrap();
    let piped: Vec<Result<redis::Value, String>> = piped.into_iter().map(reply).collect();
    let after_piped = hits_and_misses(&mut c);
    assert_eq!(piped.len(), keys.len());
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(piped[i], one_by_one[i], "pipelined GET {k} (command {i})");
        let want = match &one_by_one[i] {
            Err(e) => {
                assert!(k.starts_with('h'), "{k}: {e}");
                assert_eq!(e, WRONGTYPE);
                continue;
            }
            Ok(v) => v,
        };
        match k.as_bytes()[0] {
            b's' | b'f' => assert!(matches!(want, redis::Value::BulkString(_)), "{k}"),
            _ => assert_eq!(*want, redis::Value::Nil, "{k}"),
        }
    }
    assert_eq!(
        (after_sequential.0 - before.0, after_sequential.1 - before.1),
        (
            after_piped.0 - after_sequential.0,
            after_piped.1 - after_sequential.1
        ),
        "pipelined GETs count the same hits and misses as sequential ones"
    );
    // MGET: the same values, nil for a hash.
    let mut mget = redis::cmd("MGET");
    for k in &keys {
        mget.arg(k);
    }
    let mgot: Vec<redis::Value> = mget.query(&mut c).unwrap();
    assert_eq!(mgot.len(), keys.len());
    for (i, k) in keys.iter().enumerate() {
        let want = one_by_one[i].clone().unwrap_or(redis::Value::Nil);
        assert_eq!(mgot[i], want, "MGET element {i} ({k})");
    }
    // A write in the middle of a run of GETs: the GETs before it read the old value.
    let mut p = redis::pipe();
    p.cmd("GET").arg("s1").cmd("GET").arg("s2");
    p.cmd("SET").arg("s1").arg("new");
    p.cmd("GET").arg("s1").cmd("GET").arg("s2");
    p.cmd("HSET").arg("s2").arg("f").arg("x");
    p.cmd("DEL").arg("s2");
    p.cmd("GET").arg("s1").cmd("GET").arg("s2");
    let got: Vec<redis::RedisResult<redis::Value>> = p.ignore_errors().query(&mut c).unwrap();
    let got: Vec<Result<redis::Value, String>> = got.into_iter().map(reply).collect();
    let bulk = |s: String| Ok(redis::Value::BulkString(s.into_bytes()));
    assert_eq!(
        got,
        vec![
            bulk(value(1)),
            bulk(value(2)),
            Ok(redis::Value::Okay),
            bulk("new".into()),
            bulk(value(2)),
            Err(WRONGTYPE.to_string()),
            Ok(redis::Value::Int(1)),
            bulk("new".into()),
            Ok(redis::Value::Nil),
        ]
    );
}

/// Bitmaps against Redis 7's replies: SETBIT/GETBIT (bit 0 the high bit of byte 0,
/// zero-padding, the old bit), BITCOUNT and BITPOS in BYTE and BIT ranges with negative
/// indexes, BITPOS's padding rule for 0, BITOP over strings of unequal lengths, and
/// WRONGTYPE.
#[test]
fn bitmaps_answer_as_redis() {
    let (_d, s) = server();
    let mut c = s.client();
    assert_eq!(q::<i64>(&mut c, &["SETBIT", "b", "7", "1"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["SETBIT", "b", "7", "1"]).unwrap(), 1);
    assert_eq!(q::<String>(&mut c, &["GET", "b"]).unwrap(), "\u{1}");
    assert_eq!(q::<i64>(&mut c, &["SETBIT", "b", "100", "0"]).unwrap(), 0);
    assert_eq!(
        q::<i64>(&mut c, &["STRLEN", "b"]).unwrap(),
        13,
        "padded with zeros"
    );
    assert_eq!(q::<i64>(&mut c, &["GETBIT", "b", "7"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["GETBIT", "b", "9999"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["GETBIT", "none", "0"]).unwrap(), 0);
    assert_eq!(
        err_text(q::<i64>(&mut c, &["SETBIT", "b", "-1", "1"])),
        "ERR bit offset is not an integer or out of range"
    );
    assert_eq!(
        err_text(q::<i64>(&mut c, &["SETBIT", "b", "1", "2"])),
        "ERR bit is not an integer or out of range"
    );
    let () = redis::Commands::set(&mut c, "f", "foobar").unwrap();
    assert_eq!(q::<i64>(&mut c, &["BITCOUNT", "f"]).unwrap(), 26);
    assert_eq!(q::<i64>(&mut c, &["BITCOUNT", "f", "0", "0"]).unwrap(), 4);
    assert_eq!(q::<i64>(&mut c, &["BITCOUNT", "f", "1", "1"]).unwrap(), 6);
    assert_eq!(q::<i64>(&mut c, &["BITCOUNT", "f", "-2", "-1"]).unwrap(), 7);
    assert_eq!(
        q::<i64>(&mut c, &["BITCOUNT", "f", "5", "30", "BIT"]).unwrap(),
        17
    );
    let () = redis::Commands::set(&mut c, "p", b"\xff\xf0\x00".as_slice()).unwrap();
    assert_eq!(q::<i64>(&mut c, &["BITPOS", "p", "0"]).unwrap(), 12);
    assert_eq!(q::<i64>(&mut c, &["BITPOS", "p", "1", "2"]).unwrap(), -1);
    assert_eq!(
        q::<i64>(&mut c, &["BITPOS", "p", "0", "7", "15", "BIT"]).unwrap(),
        12
    );
    let () = redis::Commands::set(&mut c, "ones", b"\xff\xff".as_slice()).unwrap();
    assert_eq!(
        q::<i64>(&mut c, &["BITPOS", "ones", "0"]).unwrap(),
        16,
        "past the string"
    );
    assert_eq!(
        q::<i64>(&mut c, &["BITPOS", "ones", "0", "0", "-1"]).unwrap(),
        -1
    );
    assert_eq!(q::<i64>(&mut c, &["BITPOS", "none", "0"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["BITPOS", "none", "1"]).unwrap(), -1);
    let () = redis::Commands::set(&mut c, "x", b"\x0f\xf0".as_slice()).unwrap();
    let () = redis::Commands::set(&mut c, "y", b"\xff".as_slice()).unwrap();
    assert_eq!(
        q::<i64>(&mut c, &["BITOP", "AND", "d", "x", "y"]).unwrap(),
        2
    );
    assert_eq!(q::<Vec<u8>>(&mut c, &["GET", "d"]).unwrap(), b"\x0f\x00");
    assert_eq!(
        q::<i64>(&mut c, &["BITOP", "OR", "d", "x", "y", "none"]).unwrap(),
        2
    );
    assert_eq!(q::<Vec<u8>>(&mut c, &["GET", "d"]).unwrap(), b"\xff\xf0");
    assert_eq!(
        q::<i64>(&mut c, &["BITOP", "XOR", "d", "x", "y"]).unwrap(),
        2
    );
    assert_eq!(q::<Vec<u8>>(&mut c, &["GET", "d"]).unwrap(), b"\xf0\xf0");
    assert_eq!(q::<i64>(&mut c, &["BITOP", "NOT", "d", "y"]).unwrap(), 1);
    assert_eq!(q::<Vec<u8>>(&mut c, &["GET", "d"]).unwrap(), b"\x00");
    assert_eq!(q::<i64>(&mut c, &["BITOP", "AND", "d", "none"]).unwrap(), 0);
    assert_eq!(
        q::<i64>(&mut c, &["EXISTS", "d"]).unwrap(),
        0,
        "an empty result deletes"
    );
    assert!(err_text(q::<i64>(&mut c, &["BITOP", "NOT", "d", "x", "y"])).contains("single source"));
    q::<i64>(&mut c, &["HSET", "h", "f", "v"]).unwrap();
    assert_eq!(err_text(q::<i64>(&mut c, &["GETBIT", "h", "0"])), WRONGTYPE);
    assert_eq!(
        err_text(q::<i64>(&mut c, &["SETBIT", "h", "0", "1"])),
        WRONGTYPE
    );
    assert_eq!(
        q::<i64>(&mut c, &["BITOP", "OR", "h", "x"]).unwrap(),
        2,
        "BITOP replaces any type"
    );
    assert_eq!(q::<String>(&mut c, &["TYPE", "h"]).unwrap(), "string");
}

/// BITFIELD against Redis's documented examples: signed and unsigned fields, `#` offsets,
/// INCRBY with WRAP, SAT and FAIL overflow, and BITFIELD_RO refusing writes.
#[test]
fn bitfield_answers_as_redis() {
    let (_d, s) = server();
    let mut c = s.client();
    let r: Vec<Option<i64>> = q(
        &mut c,
        &[
            "BITFIELD", "k", "INCRBY", "i5", "100", "1", "GET", "u4", "0",
        ],
    )
    .unwrap();
    assert_eq!(r, [Some(1), Some(0)]);
    let r: Vec<Option<i64>> = q(
        &mut c,
        &[
            "BITFIELD", "m", "INCRBY", "u2", "100", "1", "OVERFLOW", "SAT", "INCRBY", "u2", "102",
            "1",
        ],
    )
    .unwrap();
    assert_eq!(r, [Some(1), Some(1)]);
    for _ in 0..3 {
        q::<Vec<Option<i64>>>(
            &mut c,
            &[
                "BITFIELD", "m", "INCRBY", "u2", "100", "1", "OVERFLOW", "SAT", "INCRBY", "u2",
                "102", "1",
            ],
        )
        .unwrap();
    }
    let r: Vec<Option<i64>> = q(
        &mut c,
        &["BITFIELD", "m", "GET", "u2", "100", "GET", "u2", "102"],
    )
    .unwrap();
    assert_eq!(
        r,
        [Some(0), Some(3)],
        "WRAP wrapped to 0 after 4, SAT stayed at 3"
    );
    let r: Vec<Option<i64>> = q(
        &mut c,
        &[
            "BITFIELD", "m", "OVERFLOW", "FAIL", "INCRBY", "u2", "102", "1",
        ],
    )
    .unwrap();
    assert_eq!(r, [None]);
    let r: Vec<Option<i64>> = q(
        &mut c,
        &[
            "BITFIELD", "s", "SET", "i8", "#1", "-100", "GET", "i8", "#1", "GET", "u8", "8",
        ],
    )
    .unwrap();
    assert_eq!(r, [Some(0), Some(-100), Some(156)]);
    let r: Vec<Option<i64>> = q(
        &mut c,
        &["BITFIELD", "s", "SET", "i8", "8", "200", "GET", "i8", "8"],
    )
    .unwrap();
    assert_eq!(r, [Some(-100), Some(-56)], "200 wraps to -56 in i8");
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["BITFIELD_RO", "s", "GET", "i8", "8"]).unwrap(),
        [-56]
    );
    assert!(err_text(q::<Vec<i64>>(
        &mut c,
        &["BITFIELD_RO", "s", "SET", "i8", "8", "1"]
    ))
    .contains("only supports the GET"));
    assert!(
        err_text(q::<Vec<i64>>(&mut c, &["BITFIELD", "s", "GET", "u64", "0"]))
            .contains("Invalid bitfield type")
    );
}

/// HyperLogLog: PFADD's 1/0, PFCOUNT of one key and of a union, PFMERGE, and the counts
/// Redis 7.0 gives for the same elements (checked against `redis-server` when written:
/// 999 for 1,000 elements, 19,968 for 20,000); a string that is not a HyperLogLog and a
/// hash are refused.
#[test]
fn hyperloglogs_count_as_redis_does() {
    let (_d, s) = server();
    let mut c = s.client();
    assert_eq!(q::<i64>(&mut c, &["PFADD", "a", "1", "2", "3"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["PFADD", "a", "1", "2", "3"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["PFADD", "empty"]).unwrap(), 1, "created");
    assert_eq!(q::<i64>(&mut c, &["PFCOUNT", "a"]).unwrap(), 3);
    assert_eq!(q::<i64>(&mut c, &["PFCOUNT", "none"]).unwrap(), 0);
    q::<i64>(&mut c, &["PFADD", "b", "2", "3", "4"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["PFCOUNT", "a", "b"]).unwrap(), 4);
    assert_eq!(
        q::<String>(&mut c, &["PFMERGE", "d", "a", "b"]).unwrap(),
        "OK"
    );
    assert_eq!(q::<i64>(&mut c, &["PFCOUNT", "d"]).unwrap(), 4);
    for (n, want) in [(1000, 999), (20_000, 19_968)] {
        let key = format!("h{n}");
        for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
            let mut cmd = redis::cmd("PFADD");
            cmd.arg(&key);
            for i in chunk {
                cmd.arg(format!("e{n}-{i}"));
            }
            cmd.query::<i64>(&mut c).unwrap();
        }
        assert_eq!(q::<i64>(&mut c, &["PFCOUNT", &key]).unwrap(), want, "{n}");
    }
    let () = redis::Commands::set(&mut c, "str", "plain").unwrap();
    assert_eq!(
        err_text(q::<i64>(&mut c, &["PFADD", "str", "x"])),
        "WRONGTYPE Key is not a valid HyperLogLog string value."
    );
    assert_eq!(
        err_text(q::<i64>(&mut c, &["PFCOUNT", "str"])),
        "WRONGTYPE Key is not a valid HyperLogLog string value."
    );
    q::<i64>(&mut c, &["HSET", "h", "f", "v"]).unwrap();
    assert_eq!(err_text(q::<i64>(&mut c, &["PFCOUNT", "h"])), WRONGTYPE);
}

/// SORT and SORT_RO against the replies of `redis-server` 7.0 for the same commands
/// (compared when written): numeric with ties broken by the elements' bytes, DESC, LIMIT
/// (negative offsets and counts), ALPHA, BY a string or a hash field (missing values sort
/// as 0), BY without `*` keeping the source's order (a sorted set's reversed by DESC), GET
/// patterns with `#`, STORE as a list, a non-number refused, SORT_RO refusing STORE.
#[test]
fn sort_answers_as_redis() {
    let (_d, s) = server();
    let mut c = s.client();
    q::<i64>(&mut c, &["RPUSH", "l", "3", "1", "2", "10", "1.5", "-4"]).unwrap();
    q::<i64>(&mut c, &["SADD", "s", "b", "a", "c", "aa"]).unwrap();
    q::<i64>(&mut c, &["ZADD", "z", "3", "x", "1", "y", "2", "w"]).unwrap();
    q::<i64>(&mut c, &["RPUSH", "t", "a", "b", "c"]).unwrap();
    for (k, v) in [("w_a", "5"), ("w_b", "5"), ("g_a", "A")] {
        let () = redis::Commands::set(&mut c, k, v).unwrap();
    }
    q::<i64>(&mut c, &["HSET", "h_c", "f", "1"]).unwrap();
    q::<i64>(&mut c, &["HSET", "h_a", "f", "HA"]).unwrap();
    let sorted =
        |c: &mut redis::Connection, args: &[&str]| -> Vec<Option<String>> { q(c, args).unwrap() };
    let some =
        |v: &[&str]| -> Vec<Option<String>> { v.iter().map(|s| Some(s.to_string())).collect() };
    assert_eq!(
        sorted(&mut c, &["SORT", "l"]),
        some(&["-4", "1", "1.5", "2", "3", "10"])
    );
    assert_eq!(
        sorted(&mut c, &["SORT", "l", "DESC"]),
        some(&["10", "3", "2", "1.5", "1", "-4"])
    );
    assert_eq!(
        sorted(&mut c, &["SORT", "l", "LIMIT", "1", "3"]),
        some(&["1", "1.5", "2"])
    );
    assert_eq!(
        sorted(&mut c, &["SORT", "l", "LIMIT", "-1", "2"]),
        some(&["-4", "1"])
    );
    assert_eq!(
        sorted(&mut c, &["SORT", "l", "LIMIT", "2", "-1"]),
        some(&["1.5", "2", "3", "10"])
    );
    assert_eq!(
        sorted(&mut c, &["SORT", "s", "ALPHA"]),
        some(&["a", "aa", "b", "c"])
    );
    assert_eq!(
        sorted(&mut c, &["SORT", "z", "BY", "nosort"]),
        some(&["y", "w", "x"])
    );
    assert_eq!(
        sorted(&mut c, &["SORT", "z", "BY", "nosort", "DESC"]),
        some(&["x", "w", "y"])
    );
    assert_eq!(
        sorted(&mut c, &["SORT", "t", "BY", "w_*"]),
        some(&["c", "a", "b"])
    );
    assert_eq!(
        err_text(q::<Vec<String>>(&mut c, &["SORT", "t", "BY", "h_*->f"])),
        "ERR One or more scores can't be converted into double",
        "h_a's f is HA"
    );
    assert_eq!(
        sorted(&mut c, &["SORT", "t", "BY", "h_*->f", "ALPHA"]),
        some(&["b", "c", "a"]),
        "a missing value first"
    );
    assert_eq!(
        sorted(
            &mut c,
            &["SORT", "t", "BY", "nosort", "GET", "g_*", "GET", "#", "GET", "h_*->f"]
        ),
        [
            Some("A".into()),
            Some("a".into()),
            Some("HA".into()),
            None,
            Some("b".into()),
            None,
            None,
            Some("c".into()),
            Some("1".into())
        ]
    );
    assert_eq!(
        q::<i64>(&mut c, &["SORT", "t", "ALPHA", "DESC", "STORE", "dst"]).unwrap(),
        3
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "dst", "0", "-1"]).unwrap(),
        ["c", "b", "a"]
    );
    assert!(sorted(&mut c, &["SORT", "none"]).is_empty());
    q::<i64>(&mut c, &["RPUSH", "bad", "x", "1"]).unwrap();
    assert_eq!(
        err_text(q::<Vec<String>>(&mut c, &["SORT", "bad"])),
        "ERR One or more scores can't be converted into double"
    );
    assert_eq!(
        err_text(q::<Vec<String>>(&mut c, &["SORT", "w_a"])),
        WRONGTYPE
    );
    assert_eq!(
        err_text(q::<i64>(&mut c, &["SORT_RO", "t", "STORE", "x"])),
        "ERR syntax error"
    );
}

/// Geo commands against Redis's documented examples (Palermo and Catania): positions,
/// distance, geohashes, radius and box searches with their options, STORE/STOREDIST, and
/// the refusals (a position out of range, an unknown unit). The replies were also compared
/// byte for byte with `redis-server` 7.0 on random positions when written.
#[test]
fn geo_answers_as_redis() {
    let (_d, s) = server();
    let mut c = s.client();
    let add = &[
        "GEOADD",
        "Sicily",
        "13.361389",
        "38.115556",
        "Palermo",
        "15.087269",
        "37.502669",
        "Catania",
    ];
    assert_eq!(q::<i64>(&mut c, add).unwrap(), 2);
    assert_eq!(
        q::<String>(&mut c, &["GEODIST", "Sicily", "Palermo", "Catania"]).unwrap(),
        "166274.1516"
    );
    assert_eq!(
        q::<String>(&mut c, &["GEODIST", "Sicily", "Palermo", "Catania", "km"]).unwrap(),
        "166.2742"
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["GEODIST", "Sicily", "Palermo", "Nowhere"]).unwrap(),
        None
    );
    assert_eq!(
        q::<Vec<Option<String>>>(&mut c, &["GEOHASH", "Sicily", "Palermo", "Catania", "x"])
            .unwrap(),
        [Some("sqc8b49rny0".into()), Some("sqdtr74hyu0".into()), None]
    );
    let pos: Vec<Option<(String, String)>> =
        q(&mut c, &["GEOPOS", "Sicily", "Palermo", "x"]).unwrap();
    assert_eq!(
        pos,
        [
            Some(("13.36138933897018433".into(), "38.11555639549629859".into())),
            None
        ]
    );
    let near: Vec<(String, String)> = q(
        &mut c,
        &[
            "GEORADIUS",
            "Sicily",
            "15",
            "37",
            "200",
            "km",
            "WITHDIST",
            "ASC",
        ],
    )
    .unwrap();
    assert_eq!(
        near,
        [
            ("Catania".to_string(), "56.4413".to_string()),
            ("Palermo".into(), "190.4424".into())
        ]
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["GEORADIUS", "Sicily", "15", "37", "100", "km"]).unwrap(),
        ["Catania"]
    );
    assert_eq!(
        q::<Vec<String>>(
            &mut c,
            &[
                "GEOSEARCH",
                "Sicily",
                "FROMLONLAT",
                "15",
                "37",
                "BYBOX",
                "400",
                "400",
                "km",
                "DESC"
            ]
        )
        .unwrap(),
        ["Palermo", "Catania"]
    );
    assert_eq!(
        q::<Vec<String>>(
            &mut c,
            &[
                "GEORADIUSBYMEMBER",
                "Sicily",
                "Palermo",
                "200",
                "km",
                "COUNT",
                "1"
            ]
        )
        .unwrap(),
        ["Palermo"]
    );
    assert_eq!(
        q::<i64>(
            &mut c,
            &[
                "GEOSEARCHSTORE",
                "d",
                "Sicily",
                "FROMMEMBER",
                "Palermo",
                "BYRADIUS",
                "200",
                "km",
                "STOREDIST"
            ]
        )
        .unwrap(),
        2
    );
    assert_eq!(
        q::<Vec<(String, f64)>>(&mut c, &["ZRANGE", "d", "0", "-1", "WITHSCORES"]).unwrap(),
        [
            ("Palermo".to_string(), 0.0),
            ("Catania".into(), 166.27415156960032)
        ]
    );
    assert_eq!(
        err_text(q::<i64>(&mut c, &["GEOADD", "Sicily", "181", "0", "x"])),
        "ERR invalid longitude,latitude pair 181.000000,0.000000"
    );
    assert_eq!(
        err_text(q::<Vec<String>>(
            &mut c,
            &["GEORADIUS", "Sicily", "15", "37", "1", "parsec"]
        )),
        "ERR unsupported unit provided. please use M, KM, FT, MI"
    );
    assert_eq!(q::<String>(&mut c, &["TYPE", "Sicily"]).unwrap(), "zset");
}

/// LCS against Redis's documented example (ohmytext / mynewtext) and its refusals; the
/// replies were compared with `redis-server` 7.0 on 1,000 random pairs when written.
#[test]
fn lcs_answers_as_redis() {
    let (_d, s) = server();
    let mut c = s.client();
    q::<()>(&mut c, &["MSET", "key1", "ohmytext", "key2", "mynewtext"]).unwrap();
    assert_eq!(
        q::<String>(&mut c, &["LCS", "key1", "key2"]).unwrap(),
        "mytext"
    );
    assert_eq!(
        q::<i64>(&mut c, &["LCS", "key1", "key2", "LEN"]).unwrap(),
        6
    );
    let idx: redis::Value = q(
        &mut c,
        &[
            "LCS",
            "key1",
            "key2",
            "IDX",
            "MINMATCHLEN",
            "4",
            "WITHMATCHLEN",
        ],
    )
    .unwrap();
    assert_eq!(
        format!("{idx:?}"),
        format!(
            "{:?}",
            redis::Value::Array(vec![
                redis::Value::BulkString(b"matches".to_vec()),
                redis::Value::Array(vec![redis::Value::Array(vec![
                    redis::Value::Array(vec![redis::Value::Int(4), redis::Value::Int(7)]),
                    redis::Value::Array(vec![redis::Value::Int(5), redis::Value::Int(8)]),
                    redis::Value::Int(4),
                ])]),
                redis::Value::BulkString(b"len".to_vec()),
                redis::Value::Int(6),
            ])
        )
    );
    assert_eq!(q::<String>(&mut c, &["LCS", "key1", "none"]).unwrap(), "");
    assert!(
        err_text(q::<i64>(&mut c, &["LCS", "key1", "key2", "LEN", "IDX"])).contains("just use IDX")
    );
    q::<i64>(&mut c, &["HSET", "h", "f", "v"]).unwrap();
    assert_eq!(
        err_text(q::<String>(&mut c, &["LCS", "key1", "h"])),
        "ERR The specified keys must contain string values"
    );
}

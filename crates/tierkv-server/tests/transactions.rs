//! MULTI / EXEC / DISCARD / WATCH / UNWATCH against Redis 7's replies: queued commands,
//! errors at queue time (EXECABORT) and at run time (that command's reply only), WATCH
//! aborting on a write or an expiry by anyone, and isolation (no other client's command
//! between a transaction's commands).

mod common;

use common::{err_text, q};
use redis::Value;
use std::io::{Read, Write};

use common::default_server as server;

fn queued(c: &mut redis::Connection, args: &[&str]) {
    assert_eq!(q::<String>(c, args).unwrap(), "QUEUED", "{args:?}");
}

#[test]
fn exec_runs_the_queued_commands_and_answers_their_replies() {
    let (_d, s) = server();
    let mut c = s.client();
    assert_eq!(q::<String>(&mut c, &["MULTI"]).unwrap(), "OK");
    queued(&mut c, &["SET", "a", "1"]);
    queued(&mut c, &["INCR", "a"]);
    queued(&mut c, &["GET", "a"]);
    queued(&mut c, &["MSET", "b", "x", "c", "y"]);
    queued(&mut c, &["MGET", "a", "b", "c", "nope"]);
    let r: Value = q(&mut c, &["EXEC"]).unwrap();
    let Value::Array(r) = r else { panic!("{r:?}") };
    assert_eq!(r.len(), 5);
    assert_eq!(r[0], Value::Okay);
    assert_eq!(r[1], Value::Int(2));
    assert_eq!(r[2], Value::BulkString(b"2".to_vec()));
    assert_eq!(r[3], Value::Okay);
    assert_eq!(
        r[4],
        Value::Array(vec![
            Value::BulkString(b"2".to_vec()),
            Value::BulkString(b"x".to_vec()),
            Value::BulkString(b"y".to_vec()),
            Value::Nil
        ])
    );
    // An empty transaction answers an empty array.
    assert_eq!(q::<String>(&mut c, &["MULTI"]).unwrap(), "OK");
    assert_eq!(q::<Value>(&mut c, &["EXEC"]).unwrap(), Value::Array(vec![]));
}

#[test]
fn errors_at_queue_time_abort_and_errors_at_run_time_do_not() {
    let (_d, s) = server();
    let mut c = s.client();
    assert_eq!(q::<String>(&mut c, &["MULTI"]).unwrap(), "OK");
    queued(&mut c, &["SET", "x", "1"]);
    assert!(err_text(q::<String>(&mut c, &["SET", "x"])).contains("wrong number of arguments"));
    assert!(err_text(q::<String>(&mut c, &["NOSUCH"])).contains("unknown command"));
    assert_eq!(
        err_text(q::<Value>(&mut c, &["EXEC"])),
        "EXECABORT Transaction discarded because of previous errors."
    );
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "x"]).unwrap(), None);

    // WRONGTYPE while running is that command's reply; the others run. (Raw bytes: the
    // client library turns an array holding an error into an error.)
    assert_eq!(q::<i64>(&mut c, &["HSET", "h", "f", "v"]).unwrap(), 1);
    let mut raw = std::net::TcpStream::connect(s.addr).unwrap();
    raw.write_all(b"MULTI\r\nSET x 1\r\nGET h\r\nINCR x\r\nEXEC\r\n")
        .unwrap();
    let want = "+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*3\r\n+OK\r\n\
                -WRONGTYPE Operation against a key holding the wrong kind of value\r\n:2\r\n";
    let mut got = vec![0u8; want.len()];
    raw.read_exact(&mut got).unwrap();
    assert_eq!(String::from_utf8_lossy(&got), want);
}

#[test]
fn misuse_is_refused_as_redis_refuses_it() {
    let (_d, s) = server();
    let mut c = s.client();
    assert_eq!(
        err_text(q::<Value>(&mut c, &["EXEC"])),
        "ERR EXEC without MULTI"
    );
    assert_eq!(
        err_text(q::<Value>(&mut c, &["DISCARD"])),
        "ERR DISCARD without MULTI"
    );
    assert_eq!(q::<String>(&mut c, &["MULTI"]).unwrap(), "OK");
    assert_eq!(
        err_text(q::<Value>(&mut c, &["MULTI"])),
        "ERR MULTI calls can not be nested"
    );
    assert_eq!(
        err_text(q::<Value>(&mut c, &["WATCH", "k"])),
        "ERR WATCH inside MULTI is not allowed"
    );
    queued(&mut c, &["SET", "z", "1"]);
    assert_eq!(q::<String>(&mut c, &["DISCARD"]).unwrap(), "OK");
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "z"]).unwrap(), None);
    // Pipelined: the whole transaction in one round trip, then a plain GET.
    let (set, get): (Vec<Value>, Option<String>) = redis::pipe()
        .cmd("MULTI")
        .ignore()
        .cmd("SET")
        .arg("p")
        .arg("1")
        .ignore()
        .cmd("GET")
        .arg("p")
        .ignore()
        .cmd("EXEC")
        .cmd("GET")
        .arg("p")
        .query(&mut c)
        .unwrap();
    assert_eq!(set, vec![Value::Okay, Value::BulkString(b"1".to_vec())]);
    assert_eq!(get.as_deref(), Some("1"));
}

#[test]
fn watch_aborts_exec_when_a_watched_key_changes_or_expires() {
    let (_d, s) = server();
    let (mut c, mut other) = (s.client(), s.client());
    let exec_set = |c: &mut redis::Connection, key: &str| -> Value {
        assert_eq!(q::<String>(c, &["MULTI"]).unwrap(), "OK");
        queued(c, &["SET", key, "mine"]);
        q(c, &["EXEC"]).unwrap()
    };
    // Unchanged: EXEC runs.
    assert_eq!(q::<String>(&mut c, &["WATCH", "k"]).unwrap(), "OK");
    assert_eq!(exec_set(&mut c, "k"), Value::Array(vec![Value::Okay]));
    // Written by another client: EXEC answers nil and runs nothing.
    assert_eq!(q::<String>(&mut c, &["WATCH", "k", "k2"]).unwrap(), "OK");
    let () = redis::Commands::set(&mut other, "k2", "theirs").unwrap();
    assert_eq!(exec_set(&mut c, "k"), Value::Nil);
    assert_eq!(q::<String>(&mut c, &["GET", "k"]).unwrap(), "mine");
    // A hash written (field only) counts too: its metadata record is rewritten.
    assert_eq!(q::<String>(&mut c, &["WATCH", "h"]).unwrap(), "OK");
    assert_eq!(q::<i64>(&mut other, &["HSET", "h", "f", "v"]).unwrap(), 1);
    assert_eq!(exec_set(&mut c, "k"), Value::Nil);
    // EXEC forgot the watches: the next transaction runs.
    assert_eq!(exec_set(&mut c, "k"), Value::Array(vec![Value::Okay]));
    // UNWATCH forgets them too.
    assert_eq!(q::<String>(&mut c, &["WATCH", "k"]).unwrap(), "OK");
    let () = redis::Commands::set(&mut other, "k", "theirs").unwrap();
    assert_eq!(q::<String>(&mut c, &["UNWATCH"]).unwrap(), "OK");
    assert_eq!(exec_set(&mut c, "k"), Value::Array(vec![Value::Okay]));
    // A watched key that expires meanwhile.
    assert_eq!(
        q::<String>(&mut c, &["SET", "e", "1", "PX", "50"]).unwrap(),
        "OK"
    );
    assert_eq!(q::<String>(&mut c, &["WATCH", "e"]).unwrap(), "OK");
    std::thread::sleep(std::time::Duration::from_millis(120));
    assert_eq!(exec_set(&mut c, "k"), Value::Nil);
}

/// No other client's command runs between a transaction's commands: one client adds 10
/// to a counter in ten INCRs per transaction while another reads it; every read is a
/// multiple of 10.
#[test]
fn a_transaction_runs_with_no_other_command_between_its_own() {
    let (_d, s) = server();
    let mut c = s.client();
    let mut reader = s.client();
    let () = redis::Commands::set(&mut c, "n", 0).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                seen.push(q::<i64>(&mut reader, &["GET", "n"]).unwrap());
            }
            seen
        })
    };
    for _ in 0..400 {
        let mut p = redis::pipe();
        p.cmd("MULTI").ignore();
        for _ in 0..10 {
            p.cmd("INCR").arg("n").ignore();
        }
        p.cmd("EXEC").ignore();
        let () = p.query(&mut c).unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let seen = seen.join().unwrap();
    assert_eq!(q::<i64>(&mut c, &["GET", "n"]).unwrap(), 4000);
    assert!(seen.len() > 10, "{} reads", seen.len());
    let torn: Vec<i64> = seen.into_iter().filter(|v| v % 10 != 0).collect();
    assert!(
        torn.is_empty(),
        "reads between a transaction's commands: {torn:?}"
    );
}

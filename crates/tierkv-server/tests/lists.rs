//! List commands against Redis 7's replies; a model (`VecDeque`) under random operations
//! with a restart in the middle, checking after it that every list's count equals its
//! element records and that no element record outlives its list; WRONGTYPE and the
//! keyspace commands on lists; and the blocking pops: woken by a push from another client
//! (each element to exactly one waiter), timing out, not blocking inside MULTI, and
//! leaving the connection's later commands to run after them.

mod common;

use common::{err_text, q, TestServer, WRONGTYPE};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, VecDeque};
use std::io::Write;
use std::time::{Duration, Instant};
use tierkv_server::ServerConfig;

use common::default_server as server;

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn list_commands_answer_as_redis() {
    let (_d, s) = server();
    let mut c = s.client();
    assert_eq!(q::<i64>(&mut c, &["RPUSH", "l", "a", "b", "c"]).unwrap(), 3);
    assert_eq!(q::<i64>(&mut c, &["LPUSH", "l", "y", "x"]).unwrap(), 5);
    let all = |c: &mut redis::Connection| q::<Vec<String>>(c, &["LRANGE", "l", "0", "-1"]);
    assert_eq!(all(&mut c).unwrap(), strs(&["x", "y", "a", "b", "c"]));
    assert_eq!(q::<i64>(&mut c, &["LLEN", "l"]).unwrap(), 5);
    assert_eq!(q::<i64>(&mut c, &["LLEN", "none"]).unwrap(), 0);
    for (start, stop, want) in [
        ("1", "2", &["y", "a"][..]),
        ("-2", "-1", &["b", "c"]),
        ("-100", "1", &["x", "y"]),
        ("3", "100", &["b", "c"]),
        ("4", "2", &[]),
        ("5", "9", &[]),
    ] {
        assert_eq!(
            q::<Vec<String>>(&mut c, &["LRANGE", "l", start, stop]).unwrap(),
            strs(want),
            "LRANGE {start} {stop}"
        );
    }
    assert_eq!(
        q::<Option<String>>(&mut c, &["LINDEX", "l", "-1"]).unwrap(),
        Some("c".into())
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["LINDEX", "l", "5"]).unwrap(),
        None
    );
    assert_eq!(
        q::<String>(&mut c, &["LSET", "l", "-2", "B"]).unwrap(),
        "OK"
    );
    assert_eq!(
        err_text(q::<String>(&mut c, &["LSET", "l", "5", "z"])),
        "ERR index out of range"
    );
    assert_eq!(
        err_text(q::<String>(&mut c, &["LSET", "none", "0", "z"])),
        "ERR no such key"
    );
    // Pops, with and without a count.
    assert_eq!(
        q::<Option<String>>(&mut c, &["LPOP", "l"]).unwrap(),
        Some("x".into())
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["RPOP", "l", "2"]).unwrap(),
        strs(&["c", "B"])
    );
    assert_eq!(
        q::<Option<Vec<String>>>(&mut c, &["LPOP", "none", "2"]).unwrap(),
        None
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["RPOP", "none"]).unwrap(),
        None
    );
    assert_eq!(
        err_text(q::<String>(&mut c, &["LPOP", "l", "-1"])),
        "ERR value is out of range, must be positive"
    );
    // PUSHX only onto an existing list.
    assert_eq!(q::<i64>(&mut c, &["LPUSHX", "none", "a"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "none"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["RPUSHX", "l", "z"]).unwrap(), 3);
    assert_eq!(all(&mut c).unwrap(), strs(&["y", "a", "z"]));
    // LINSERT on both sides of the middle (each moves the shorter side).
    assert_eq!(
        q::<i64>(&mut c, &["LINSERT", "l", "BEFORE", "a", "p"]).unwrap(),
        4
    );
    assert_eq!(
        q::<i64>(&mut c, &["LINSERT", "l", "AFTER", "a", "q"]).unwrap(),
        5
    );
    assert_eq!(
        q::<i64>(&mut c, &["LINSERT", "l", "after", "z", "end"]).unwrap(),
        6
    );
    assert_eq!(
        q::<i64>(&mut c, &["LINSERT", "l", "before", "y", "start"]).unwrap(),
        7
    );
    assert_eq!(
        q::<i64>(&mut c, &["LINSERT", "l", "AFTER", "nope", "q"]).unwrap(),
        -1
    );
    assert_eq!(
        q::<i64>(&mut c, &["LINSERT", "none", "AFTER", "a", "q"]).unwrap(),
        0
    );
    assert_eq!(
        all(&mut c).unwrap(),
        strs(&["start", "y", "p", "a", "q", "z", "end"])
    );
    // LREM from the head, from the tail, all.
    q::<i64>(&mut c, &["DEL", "r"]).unwrap();
    q::<i64>(&mut c, &["RPUSH", "r", "a", "b", "a", "c", "a", "b"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["LREM", "r", "1", "a"]).unwrap(), 1);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "r", "0", "-1"]).unwrap(),
        strs(&["b", "a", "c", "a", "b"])
    );
    assert_eq!(q::<i64>(&mut c, &["LREM", "r", "-1", "b"]).unwrap(), 1);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "r", "0", "-1"]).unwrap(),
        strs(&["b", "a", "c", "a"])
    );
    assert_eq!(q::<i64>(&mut c, &["LREM", "r", "0", "a"]).unwrap(), 2);
    assert_eq!(q::<i64>(&mut c, &["LREM", "r", "0", "zz"]).unwrap(), 0);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "r", "0", "-1"]).unwrap(),
        strs(&["b", "c"])
    );
    // LTRIM, including to nothing (the key goes).
    assert_eq!(
        q::<String>(&mut c, &["LTRIM", "l", "1", "-2"]).unwrap(),
        "OK"
    );
    assert_eq!(all(&mut c).unwrap(), strs(&["y", "p", "a", "q", "z"]));
    assert_eq!(
        q::<String>(&mut c, &["LTRIM", "l", "-2", "100"]).unwrap(),
        "OK"
    );
    assert_eq!(all(&mut c).unwrap(), strs(&["q", "z"]));
    assert_eq!(
        q::<String>(&mut c, &["LTRIM", "l", "5", "1"]).unwrap(),
        "OK"
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "l"]).unwrap(), 0);
    // LPOS with RANK, COUNT, MAXLEN.
    q::<i64>(
        &mut c,
        &["RPUSH", "p", "a", "b", "c", "1", "2", "3", "c", "c"],
    )
    .unwrap();
    assert_eq!(
        q::<Option<i64>>(&mut c, &["LPOS", "p", "c"]).unwrap(),
        Some(2)
    );
    assert_eq!(
        q::<Option<i64>>(&mut c, &["LPOS", "p", "c", "RANK", "2"]).unwrap(),
        Some(6)
    );
    assert_eq!(
        q::<Option<i64>>(&mut c, &["LPOS", "p", "c", "RANK", "-1"]).unwrap(),
        Some(7)
    );
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["LPOS", "p", "c", "COUNT", "2"]).unwrap(),
        vec![2, 6]
    );
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["LPOS", "p", "c", "COUNT", "0"]).unwrap(),
        vec![2, 6, 7]
    );
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["LPOS", "p", "c", "RANK", "-1", "COUNT", "2"]).unwrap(),
        vec![7, 6]
    );
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["LPOS", "p", "c", "COUNT", "0", "MAXLEN", "3"]).unwrap(),
        vec![2]
    );
    assert_eq!(q::<Option<i64>>(&mut c, &["LPOS", "p", "x"]).unwrap(), None);
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["LPOS", "none", "x", "COUNT", "1"]).unwrap(),
        Vec::<i64>::new()
    );
    assert!(
        err_text(q::<i64>(&mut c, &["LPOS", "p", "c", "RANK", "0"])).contains("RANK can't be zero")
    );
    // LMOVE / RPOPLPUSH between lists and within one (a rotation).
    q::<i64>(&mut c, &["RPUSH", "m", "1", "2", "3"]).unwrap();
    assert_eq!(
        q::<Option<String>>(&mut c, &["LMOVE", "m", "n", "LEFT", "RIGHT"]).unwrap(),
        Some("1".into())
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["RPOPLPUSH", "m", "m"]).unwrap(),
        Some("3".into())
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "m", "0", "-1"]).unwrap(),
        strs(&["3", "2"])
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["LMOVE", "none", "n", "LEFT", "LEFT"]).unwrap(),
        None
    );
    assert_eq!(
        err_text(q::<String>(&mut c, &["LMOVE", "m", "n", "UP", "LEFT"])),
        "ERR syntax error"
    );
    // LMPOP from the first non-empty list.
    assert_eq!(
        q::<(String, Vec<String>)>(
            &mut c,
            &["LMPOP", "3", "none", "n", "m", "RIGHT", "COUNT", "5"]
        )
        .unwrap(),
        ("n".to_string(), strs(&["1"]))
    );
    assert_eq!(
        q::<Option<(String, Vec<String>)>>(&mut c, &["LMPOP", "1", "none", "LEFT"]).unwrap(),
        None
    );
    assert_eq!(
        err_text(q::<String>(&mut c, &["LMPOP", "0", "m", "LEFT"])),
        "ERR numkeys should be greater than 0"
    );
    assert_eq!(q::<String>(&mut c, &["TYPE", "m"]).unwrap(), "list");
    assert_eq!(
        q::<String>(&mut c, &["OBJECT", "ENCODING", "m"]).unwrap(),
        "quicklist"
    );
}

#[test]
fn lists_take_part_in_the_keyspace_commands_and_wrongtype() {
    let (_d, s) = server();
    let mut c = s.client();
    q::<i64>(&mut c, &["RPUSH", "l", "a", "b"]).unwrap();
    let () = redis::Commands::set(&mut c, "str", "v").unwrap();
    q::<i64>(&mut c, &["SADD", "s", "m"]).unwrap();
    for cmd in [
        &["GET", "l"][..],
        &["SADD", "l", "x"],
        &["LPUSH", "str", "x"],
        &["RPUSH", "s", "x"],
        &["LRANGE", "s", "0", "-1"],
        &["LLEN", "str"],
        &["LINDEX", "s", "0"],
        &["LPOP", "str"],
        &["LMOVE", "l", "s", "LEFT", "LEFT"],
        &["LMOVE", "str", "l", "LEFT", "LEFT"],
        &["BLPOP", "str", "0"],
    ] {
        assert_eq!(
            err_text(q::<redis::Value>(&mut c, cmd)),
            WRONGTYPE,
            "{cmd:?}"
        );
    }
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "l", "0", "-1"]).unwrap(),
        strs(&["a", "b"]),
        "a refused move changes nothing"
    );
    assert_eq!(q::<String>(&mut c, &["RENAME", "l", "t"]).unwrap(), "OK");
    assert_eq!(q::<i64>(&mut c, &["COPY", "t", "u"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["LPUSH", "t", "z"]).unwrap(), 3);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "u", "0", "-1"]).unwrap(),
        strs(&["a", "b"])
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "t", "0", "-1"]).unwrap(),
        strs(&["z", "a", "b"])
    );
    let (_, found): (String, Vec<String>) = q(&mut c, &["SCAN", "0", "TYPE", "list"]).unwrap();
    let mut found = found;
    found.sort();
    assert_eq!(found, strs(&["t", "u"]));
    // Overwritten, deleted or expired, a list leaves no element reachable.
    let () = redis::Commands::set(&mut c, "t", "now a string").unwrap();
    assert_eq!(q::<i64>(&mut c, &["DEL", "t"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["RPUSH", "t", "new"]).unwrap(), 1);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "t", "0", "-1"]).unwrap(),
        strs(&["new"])
    );
    assert_eq!(q::<i64>(&mut c, &["PEXPIRE", "u", "30"]).unwrap(), 1);
    std::thread::sleep(Duration::from_millis(80));
    assert_eq!(q::<i64>(&mut c, &["LLEN", "u"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["RPUSH", "u", "fresh"]).unwrap(), 1);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "u", "0", "-1"]).unwrap(),
        strs(&["fresh"])
    );
}

/// Invariant: after any sequence of list writes, every list's element records are exactly
/// its metadata's count, at the indexes from its head, and no element record is left
/// without a live list (read from the engine's own records after the server stopped).
fn check_records(dir: &std::path::Path) {
    let db = tierkv::Db::open(dir, tierkv::Options::default()).unwrap();
    let mut it = db.iter().unwrap();
    it.seek_to_first().unwrap();
    let mut lists: BTreeMap<Vec<u8>, (u64, u64, u64)> = BTreeMap::new();
    let mut elements: BTreeMap<(Vec<u8>, u64), Vec<u64>> = BTreeMap::new();
    while it.valid() {
        let (k, v) = (it.key().to_vec(), it.value().to_vec());
        match k.first() {
            Some(b'k') if v.first() == Some(&b'l') => {
                let word = |at: usize| u64::from_be_bytes(v[at..at + 8].try_into().unwrap());
                lists.insert(k[1..].to_vec(), (word(1), word(9), word(17)));
            }
            Some(b'f') => {
                let len = u32::from_be_bytes(k[1..5].try_into().unwrap()) as usize;
                let key = k[5..5 + len].to_vec();
                let version = u64::from_be_bytes(k[5 + len..13 + len].try_into().unwrap());
                let index = u64::from_be_bytes(k[13 + len..].try_into().unwrap());
                elements.entry((key, version)).or_default().push(index);
            }
            _ => {}
        }
        it.next().unwrap();
    }
    for ((key, version), indexes) in &elements {
        let Some(&(v, len, head)) = lists.get(key) else {
            panic!("element records of a dead list {key:?}");
        };
        assert_eq!(*version, v, "element records of an old version of {key:?}");
        let want: Vec<u64> = (head..head + len).collect();
        assert_eq!(
            indexes, &want,
            "{key:?}: elements at the indexes from its head"
        );
    }
    for (key, (v, len, _)) in &lists {
        assert!(*len > 0, "an empty list's metadata is deleted");
        assert!(
            elements.contains_key(&(key.clone(), *v)),
            "{key:?} has elements"
        );
    }
}

/// Random pushes, pops, LSET, LREM, LINSERT, LTRIM, LMOVE over a few lists against a
/// model, with a restart of the server in the middle; at the end every list reads as the
/// model and its records agree with its metadata (`check_records`).
#[test]
fn random_list_operations_match_a_model() {
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
    let mut model: BTreeMap<String, VecDeque<String>> = BTreeMap::new();
    let keys = ["a", "b", "c"];
    for step in 0..2000 {
        if step == 1000 {
            s.stop();
            s = start();
            c = s.client();
        }
        let k = keys[rng.gen_range(0..keys.len())].to_string();
        let v = format!("{}", rng.gen_range(0..8));
        let l = model.entry(k.clone()).or_default();
        let len = l.len() as i64;
        match rng.gen_range(0..10) {
            0 | 1 => {
                let n: i64 = q(&mut c, &["LPUSH", &k, &v]).unwrap();
                l.push_front(v);
                assert_eq!(n, l.len() as i64, "step {step}");
            }
            2 | 3 => {
                let n: i64 = q(&mut c, &["RPUSH", &k, &v, "x"]).unwrap();
                l.push_back(v);
                l.push_back("x".into());
                assert_eq!(n, l.len() as i64, "step {step}");
            }
            4 => {
                let got: Option<String> = q(&mut c, &["LPOP", &k]).unwrap();
                assert_eq!(got, l.pop_front(), "step {step}");
            }
            5 => {
                let got: Option<String> = q(&mut c, &["RPOP", &k]).unwrap();
                assert_eq!(got, l.pop_back(), "step {step}");
            }
            6 if len > 0 => {
                let i = rng.gen_range(-len..len);
                q::<String>(&mut c, &["LSET", &k, &i.to_string(), &v]).unwrap();
                let at = if i < 0 { len + i } else { i } as usize;
                l[at] = v;
            }
            7 => {
                let count = rng.gen_range(-2..3i64);
                let n: i64 = q(&mut c, &["LREM", &k, &count.to_string(), &v]).unwrap();
                let limit = if count == 0 {
                    usize::MAX
                } else {
                    count.unsigned_abs() as usize
                };
                let mut removed = 0;
                let idx: Vec<usize> = if count < 0 {
                    (0..l.len()).rev().collect()
                } else {
                    (0..l.len()).collect()
                };
                let mut drop = vec![false; l.len()];
                for i in idx {
                    if removed < limit && l[i] == v {
                        drop[i] = true;
                        removed += 1;
                    }
                }
                let mut i = 0;
                l.retain(|_| {
                    i += 1;
                    !drop[i - 1]
                });
                assert_eq!(n as usize, removed, "step {step}");
            }
            8 => {
                let pivot = format!("{}", rng.gen_range(0..8));
                let after = rng.gen_bool(0.5);
                let n: i64 = q(
                    &mut c,
                    &[
                        "LINSERT",
                        &k,
                        if after { "AFTER" } else { "BEFORE" },
                        &pivot,
                        &v,
                    ],
                )
                .unwrap();
                let want = match l.iter().position(|e| *e == pivot) {
                    _ if l.is_empty() => 0,
                    None => -1,
                    Some(p) => {
                        l.insert(p + after as usize, v);
                        l.len() as i64
                    }
                };
                assert_eq!(n, want, "step {step}");
            }
            _ => {
                if rng.gen_bool(0.5) {
                    let (a, b) = (rng.gen_range(-6..6i64), rng.gen_range(-6..6i64));
                    q::<String>(&mut c, &["LTRIM", &k, &a.to_string(), &b.to_string()]).unwrap();
                    let norm = |x: i64| if x < 0 { (len + x).max(0) } else { x };
                    let (a, b) = (norm(a), if b < 0 { len + b } else { b.min(len - 1) });
                    if a > b || a >= len {
                        l.clear();
                    } else {
                        *l = l
                            .iter()
                            .skip(a as usize)
                            .take((b - a + 1) as usize)
                            .cloned()
                            .collect();
                    }
                } else {
                    let d = keys[rng.gen_range(0..keys.len())].to_string();
                    let got: Option<String> =
                        q(&mut c, &["LMOVE", &k, &d, "RIGHT", "LEFT"]).unwrap();
                    let popped = l.pop_back();
                    assert_eq!(got, popped, "step {step}");
                    if let Some(p) = popped {
                        model.entry(d).or_default().push_front(p);
                    }
                }
            }
        }
        model.retain(|_, l| !l.is_empty());
    }
    for k in keys {
        let want: Vec<String> = model
            .get(k)
            .map(|l| l.iter().cloned().collect())
            .unwrap_or_default();
        assert_eq!(
            q::<Vec<String>>(&mut c, &["LRANGE", k, "0", "-1"]).unwrap(),
            want,
            "{k}"
        );
        assert_eq!(
            q::<i64>(&mut c, &["LLEN", k]).unwrap() as usize,
            want.len(),
            "{k}"
        );
    }
    s.stop();
    check_records(dir.path());
}

/// A client for blocking tests: replies within `secs` or the read fails.
fn client_with_timeout(s: &TestServer, secs: u64) -> redis::Connection {
    let c = s.client();
    c.set_read_timeout(Some(Duration::from_secs(secs))).unwrap();
    c
}

#[test]
fn blocking_pops_wait_for_a_push_and_time_out() {
    let (_d, s) = server();
    let mut c = s.client();
    // An element already there: no wait.
    q::<i64>(&mut c, &["RPUSH", "q2", "ready"]).unwrap();
    assert_eq!(
        q::<(String, String)>(&mut c, &["BLPOP", "q1", "q2", "0"]).unwrap(),
        ("q2".into(), "ready".into())
    );
    // Timeouts: a null array for BLPOP / BLMPOP, nil for BLMOVE, after about the time asked.
    let t = Instant::now();
    assert_eq!(
        q::<Option<(String, String)>>(&mut c, &["BRPOP", "q1", "0.2"]).unwrap(),
        None
    );
    let waited = t.elapsed();
    assert!(waited >= Duration::from_millis(190), "{waited:?}");
    assert_eq!(
        q::<Option<String>>(&mut c, &["BLMOVE", "q1", "d", "LEFT", "LEFT", "0.05"]).unwrap(),
        None
    );
    assert_eq!(
        q::<Option<(String, Vec<String>)>>(&mut c, &["BLMPOP", "0.05", "1", "q1", "LEFT"]).unwrap(),
        None
    );
    assert_eq!(
        err_text(q::<String>(&mut c, &["BLPOP", "q1", "-1"])),
        "ERR timeout is negative"
    );
    assert_eq!(
        err_text(q::<String>(&mut c, &["BLPOP", "q1", "soon"])),
        "ERR timeout is not a float or out of range"
    );
    // A push from another client wakes the waiter; the wait holds no thread, so many
    // waiters and the pusher all make progress.
    let waiters: Vec<_> = (0..6)
        .map(|i| {
            let mut w = client_with_timeout(&s, 20);
            let key = if i % 2 == 0 { "jobs" } else { "other" };
            std::thread::spawn(move || {
                q::<(String, String)>(&mut w, &["BLPOP", key, "jobs", "0"]).unwrap()
            })
        })
        .collect();
    common::wait_for("six clients blocked", || {
        q::<String>(&mut c, &["INFO", "clients"])
            .unwrap()
            .contains("blocked_clients:6")
    });
    for i in 0..6 {
        q::<i64>(&mut c, &["RPUSH", "jobs", &format!("job{i}")]).unwrap();
    }
    let mut got: Vec<String> = waiters
        .into_iter()
        .map(|h| {
            let (k, v) = h.join().unwrap();
            assert_eq!(k, "jobs");
            v
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        (0..6).map(|i| format!("job{i}")).collect::<Vec<_>>(),
        "each job to one waiter"
    );
    assert_eq!(q::<i64>(&mut c, &["LLEN", "jobs"]).unwrap(), 0);
    // BLMOVE moves what arrives; the commands pipelined after a blocked one wait for it.
    let mut w = client_with_timeout(&s, 20);
    let h = std::thread::spawn(move || {
        redis::pipe()
            .cmd("BLMOVE")
            .arg("src")
            .arg("dst")
            .arg("RIGHT")
            .arg("LEFT")
            .arg("0")
            .cmd("LRANGE")
            .arg("dst")
            .arg("0")
            .arg("-1")
            .query::<(String, Vec<String>)>(&mut w)
            .unwrap()
    });
    std::thread::sleep(Duration::from_millis(150));
    q::<i64>(&mut c, &["RPUSH", "src", "moved"]).unwrap();
    assert_eq!(h.join().unwrap(), ("moved".into(), strs(&["moved"])));
    // A list arriving by RENAME wakes a waiter too.
    let mut w = client_with_timeout(&s, 20);
    let h = std::thread::spawn(move || {
        q::<(String, String)>(&mut w, &["BRPOP", "renamed", "0"]).unwrap()
    });
    std::thread::sleep(Duration::from_millis(150));
    q::<i64>(&mut c, &["RPUSH", "tmp", "r1"]).unwrap();
    q::<String>(&mut c, &["RENAME", "tmp", "renamed"]).unwrap();
    assert_eq!(h.join().unwrap(), ("renamed".into(), "r1".into()));
}

#[test]
fn blocking_pops_do_not_block_inside_multi_nor_outlive_their_client() {
    let (_d, s) = server();
    let mut c = s.client();
    let (a, b): (Option<(String, String)>, i64) = redis::pipe()
        .atomic()
        .cmd("BLPOP")
        .arg("empty")
        .arg("0")
        .cmd("RPUSH")
        .arg("empty")
        .arg("x")
        .query(&mut c)
        .unwrap();
    assert_eq!(
        (a, b),
        (None, 1),
        "inside EXEC a blocking pop answers at once"
    );
    // A client that goes away while blocked leaves nothing waiting, and a later push
    // stays in the list.
    let mut raw = std::net::TcpStream::connect(s.addr).unwrap();
    raw.write_all(b"*3\r\n$5\r\nBLPOP\r\n$4\r\ngone\r\n$1\r\n0\r\n")
        .unwrap();
    let blocked = |c: &mut redis::Connection| {
        let info: String = q(c, &["INFO", "clients"]).unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("blocked_clients:"))
            .map(|n| n.trim().to_string())
            .unwrap()
    };
    common::wait_for("the raw client blocked", || blocked(&mut c) == "1");
    drop(raw);
    common::wait_for("the gone client unblocked", || blocked(&mut c) == "0");
    q::<i64>(&mut c, &["RPUSH", "gone", "x"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["LLEN", "gone"]).unwrap(), 1);
    drop(c);
    drop(s);
    // A blocked client does not hold up shutdown: with a grace period of a day, a stop
    // that waited for it would never finish.
    let (_d, s) = {
        let dir = tempfile::tempdir().unwrap();
        let config = ServerConfig {
            shutdown_grace: Duration::from_secs(24 * 3600),
            ..ServerConfig::default()
        };
        let s = TestServer::start(dir.path(), tierkv::Options::default(), config);
        (dir, s)
    };
    let mut c = s.client();
    let mut w = s.client();
    let h = std::thread::spawn(move || {
        let _ = redis::cmd("BLPOP")
            .arg("gone2")
            .arg("0")
            .query::<redis::Value>(&mut w);
    });
    common::wait_for("the client blocked", || blocked(&mut c) == "1");
    let stopper = std::thread::spawn(move || s.stop());
    common::wait_for("the server stopped", || stopper.is_finished());
    stopper.join().unwrap();
    h.join().unwrap();
}

/// Invariant under concurrency: clients pushing, popping and moving on the same lists at
/// once never see an error, and every element pushed is popped exactly once or still in a
/// list (the atomic steps serialise on each list's metadata).
#[test]
fn concurrent_pushes_pops_and_moves_lose_nothing() {
    let (_d, s) = server();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let mut c = s.client();
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(t);
                let mut pushed = Vec::new();
                let mut popped = Vec::new();
                for i in 0..300 {
                    let k = ["x", "y"][rng.gen_range(0..2)];
                    match rng.gen_range(0..4) {
                        0 | 1 => {
                            let v = format!("{t}-{i}");
                            q::<i64>(&mut c, &["RPUSH", k, &v]).unwrap();
                            pushed.push(v);
                        }
                        2 => popped.extend(q::<Option<String>>(&mut c, &["LPOP", k]).unwrap()),
                        _ => {
                            q::<Option<String>>(&mut c, &["LMOVE", k, "y", "LEFT", "RIGHT"])
                                .unwrap();
                        }
                    }
                }
                (pushed, popped)
            })
        })
        .collect();
    let mut pushed = Vec::new();
    let mut popped = Vec::new();
    for h in threads {
        let (p, q) = h.join().unwrap();
        pushed.extend(p);
        popped.extend(q);
    }
    let mut c = s.client();
    for k in ["x", "y"] {
        let rest: Vec<String> = q(&mut c, &["LRANGE", k, "0", "-1"]).unwrap();
        assert_eq!(q::<i64>(&mut c, &["LLEN", k]).unwrap() as usize, rest.len());
        popped.extend(rest);
    }
    pushed.sort();
    popped.sort();
    assert_eq!(pushed, popped, "each element popped once or still listed");
}

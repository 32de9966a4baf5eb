//! Crash test of the Redis-protocol server: `tierkv serve --sync` runs as a child process
//! under four writer threads (one each for lists, sets, sorted sets and hashes, each owning
//! its keys and keeping a model of them), and is killed with SIGKILL at random moments,
//! then restarted on the same store, several times over.
//!
//! Invariant: kill -9 of `tierkv serve --sync` under concurrent list, set, sorted-set and
//! hash writes loses no acknowledged write and leaves every collection's size
//! (LLEN/SCARD/ZCARD/HLEN) equal to its elements (LRANGE/SMEMBERS/ZRANGE/HGETALL length),
//! with no element records left for a dead collection.
//!
//! After each kill: the engine's raw records are checked (every element and score record
//! belongs to a live collection at its version, each collection's count is its element
//! records, a list's elements sit at the indexes from its head, a sorted set's two records
//! per member agree); then the restarted server must show each writer's keys exactly as
//! its model after every acknowledged command, or after those and the one command in
//! flight at the kill (which may or may not have applied), and each key's size must be its
//! element count. The writers then carry on from that state. A last round under the same
//! load ends in a graceful SHUTDOWN instead, with the same checks.
//!
//! Collections stay well under the 1,024 element records a deletion removes in its own
//! atomic batch (docs/FORMAT.md, "Server keyspace"), and nothing expires: either would
//! legitimately leave element records of a dead collection until a later cleanup.
//! `TIERKV_SERVE_CRASH_ROUNDS` and `TIERKV_SERVE_CRASH_SEED` override the rounds (4) and
//! the seed.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One Redis value as the test models it.
#[derive(Clone, Debug, PartialEq)]
enum Val {
    List(VecDeque<String>),
    Set(BTreeSet<String>),
    ZSet(BTreeMap<String, f64>),
    Hash(BTreeMap<String, String>),
}

impl Val {
    fn len(&self) -> usize {
        match self {
            Val::List(l) => l.len(),
            Val::Set(s) => s.len(),
            Val::ZSet(z) => z.len(),
            Val::Hash(h) => h.len(),
        }
    }
}

/// A writer's keys and their values (absent keys are not in the map).
type Model = BTreeMap<String, Val>;

/// The reply a command must get, as the model computes it.
#[derive(Debug, PartialEq)]
enum Reply {
    Int(i64),
    Bulk(Option<String>),
    Score(f64),
    Ok,
}

fn list<'m>(m: &'m mut Model, k: &str) -> &'m mut VecDeque<String> {
    match m
        .entry(k.into())
        .or_insert_with(|| Val::List(VecDeque::new()))
    {
        Val::List(l) => l,
        other => panic!("{k} is not a list: {other:?}"),
    }
}

fn set<'m>(m: &'m mut Model, k: &str) -> &'m mut BTreeSet<String> {
    match m
        .entry(k.into())
        .or_insert_with(|| Val::Set(BTreeSet::new()))
    {
        Val::Set(s) => s,
        other => panic!("{k} is not a set: {other:?}"),
    }
}

fn zset<'m>(m: &'m mut Model, k: &str) -> &'m mut BTreeMap<String, f64> {
    match m
        .entry(k.into())
        .or_insert_with(|| Val::ZSet(BTreeMap::new()))
    {
        Val::ZSet(z) => z,
        other => panic!("{k} is not a sorted set: {other:?}"),
    }
}

fn hash<'m>(m: &'m mut Model, k: &str) -> &'m mut BTreeMap<String, String> {
    match m
        .entry(k.into())
        .or_insert_with(|| Val::Hash(BTreeMap::new()))
    {
        Val::Hash(h) => h,
        other => panic!("{k} is not a hash: {other:?}"),
    }
}

/// Applies `cmd` to the model as the server must, returning its reply. Empty collections
/// are removed, as Redis removes them.
fn apply(m: &mut Model, cmd: &[String]) -> Reply {
    let a: Vec<&str> = cmd.iter().map(String::as_str).collect();
    let k = a[1];
    let reply = match a[0] {
        "RPUSH" | "LPUSH" => {
            let l = list(m, k);
            for v in &a[2..] {
                if a[0] == "RPUSH" {
                    l.push_back(v.to_string());
                } else {
                    l.push_front(v.to_string());
                }
            }
            Reply::Int(l.len() as i64)
        }
        "LPOP" => Reply::Bulk(list(m, k).pop_front()),
        "LTRIM" => {
            let l = list(m, k);
            let len = l.len() as i64;
            let norm = |i: i64| if i < 0 { len + i } else { i };
            let (start, stop) = (
                norm(a[2].parse().unwrap()).max(0),
                norm(a[3].parse().unwrap()),
            );
            if start > stop || start >= len {
                l.clear();
            } else {
                let stop = stop.min(len - 1);
                l.truncate(stop as usize + 1);
                l.drain(..start as usize);
            }
            Reply::Ok
        }
        "SADD" => {
            let s = set(m, k);
            Reply::Int(a[2..].iter().filter(|v| s.insert(v.to_string())).count() as i64)
        }
        "SREM" => {
            let s = set(m, k);
            Reply::Int(a[2..].iter().filter(|v| s.remove(**v)).count() as i64)
        }
        "ZADD" => {
            let z = zset(m, k);
            let added = z.insert(a[3].into(), a[2].parse().unwrap()).is_none();
            Reply::Int(added as i64)
        }
        "ZREM" => {
            let z = zset(m, k);
            Reply::Int(a[2..].iter().filter(|v| z.remove(**v).is_some()).count() as i64)
        }
        "ZINCRBY" => {
            let z = zset(m, k);
            let score = z.entry(a[3].into()).or_insert(0.0);
            *score += a[2].parse::<f64>().unwrap();
            Reply::Score(*score)
        }
        "HSET" => {
            let h = hash(m, k);
            let new = a[2..]
                .chunks(2)
                .filter(|fv| h.insert(fv[0].into(), fv[1].into()).is_none())
                .count();
            Reply::Int(new as i64)
        }
        "HDEL" => {
            let h = hash(m, k);
            Reply::Int(a[2..].iter().filter(|f| h.remove(**f).is_some()).count() as i64)
        }
        "DEL" => Reply::Int(a[1..].iter().filter(|k| m.remove(**k).is_some()).count() as i64),
        "RENAME" => {
            let v = m.remove(k).expect("RENAME of a key the model has");
            m.insert(a[2].into(), v);
            Reply::Ok
        }
        other => panic!("the model does not know {other}"),
    };
    m.retain(|_, v| v.len() > 0);
    reply
}

/// Which type a writer writes.
#[derive(Clone, Copy, Debug)]
enum Kind {
    List,
    Set,
    ZSet,
    Hash,
}

/// A writer thread's state, carried from one server run to the next.
struct Writer {
    kind: Kind,
    /// Its two keys: the main one and the one RENAME moves it to.
    keys: [String; 2],
    rng: StdRng,
    /// Commands generated so far (names new elements).
    counter: u64,
    /// The state after every acknowledged command.
    model: Model,
    /// Acknowledged commands, over all rounds.
    acked: u64,
    /// The last few acknowledged commands, for a failure's message.
    recent: VecDeque<Vec<String>>,
    /// The command sent when the server died, unacknowledged.
    in_flight: Option<Vec<String>>,
}

fn cmd(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

impl Writer {
    fn new(kind: Kind, prefix: &str, seed: u64) -> Writer {
        Writer {
            kind,
            keys: [format!("{prefix}:main"), format!("{prefix}:moved")],
            rng: StdRng::seed_from_u64(seed),
            counter: 0,
            model: Model::new(),
            acked: 0,
            recent: VecDeque::new(),
            in_flight: None,
        }
    }

    fn len(&self, key: usize) -> usize {
        self.model.get(&self.keys[key]).map_or(0, Val::len)
    }

    /// The next command: mostly growth of the main key, some removals, and now and then a
    /// DEL (the key is created again, at a new version) or a RENAME onto the other key
    /// (which replaces it). Each collection stays below about 200 elements.
    fn next_command(&mut self) -> Vec<String> {
        self.counter += 1;
        let i = self.counter;
        let (main, moved) = (self.keys[0].clone(), self.keys[1].clone());
        let r = self.rng.gen_range(0..100);
        let exists = self.model.contains_key(&main);
        // About one command in 130 each: rare enough for collections to grow to ~150.
        if r >= 97 && self.rng.gen_ratio(1, 4) {
            return match r {
                97 if exists => cmd(&["RENAME", &main, &moved]),
                97 | 98 => cmd(&["DEL", &moved]),
                _ => cmd(&["DEL", &main]),
            };
        }
        let too_big = self.len(0) > 150;
        let e = self.rng.gen_range(0..200u32);
        let e2 = self.rng.gen_range(0..200u32);
        match self.kind {
            Kind::List => match r {
                _ if too_big => cmd(&["LTRIM", &main, "-40", "-1"]),
                0..=49 => cmd(&["RPUSH", &main, &format!("a{i}")]),
                50..=59 => cmd(&["RPUSH", &main, &format!("b{i}"), &format!("c{i}")]),
                60..=79 => cmd(&["LPOP", &main]),
                80..=84 => {
                    let n = self.rng.gen_range(1..60);
                    cmd(&["LTRIM", &main, &format!("-{n}"), "-1"])
                }
                85..=86 if self.len(1) < 100 => cmd(&["LPUSH", &moved, &format!("d{i}")]),
                _ => cmd(&["RPUSH", &main, &format!("e{i}")]),
            },
            Kind::Set => match r {
                _ if too_big => cmd(&["DEL", &main]),
                0..=44 => cmd(&["SADD", &main, &format!("m{e}")]),
                45..=54 => cmd(&["SADD", &main, &format!("m{e}"), &format!("m{e2}")]),
                55..=79 => cmd(&["SREM", &main, &format!("m{e}")]),
                80..=84 => cmd(&["SREM", &main, &format!("m{e}"), &format!("m{e2}")]),
                85..=86 => cmd(&["SREM", &moved, &format!("m{e}")]),
                _ => cmd(&["SADD", &main, &format!("n{i}")]),
            },
            Kind::ZSet => match r {
                _ if too_big => cmd(&["DEL", &main]),
                0..=44 => cmd(&["ZADD", &main, &i.to_string(), &format!("m{e}")]),
                45..=64 => cmd(&["ZREM", &main, &format!("m{e}")]),
                65..=84 => {
                    let by = self.rng.gen_range(-5..=5i32);
                    cmd(&["ZINCRBY", &main, &by.to_string(), &format!("m{e}")])
                }
                85..=86 => cmd(&["ZREM", &moved, &format!("m{e}"), &format!("m{e2}")]),
                _ => cmd(&["ZADD", &main, &format!("-{i}"), &format!("m{e}")]),
            },
            Kind::Hash => match r {
                _ if too_big => cmd(&["DEL", &main]),
                0..=39 => cmd(&["HSET", &main, &format!("f{e}"), &format!("v{i}")]),
                40..=49 => cmd(&[
                    "HSET",
                    &main,
                    &format!("f{e}"),
                    &format!("v{i}"),
                    &format!("f{e2}"),
                    &format!("w{i}"),
                ]),
                50..=74 => cmd(&["HDEL", &main, &format!("f{e}")]),
                75..=84 => cmd(&["HDEL", &main, &format!("f{e}"), &format!("f{e2}")]),
                85..=86 => cmd(&["HDEL", &moved, &format!("f{e}")]),
                _ => cmd(&["HSET", &main, &format!("f{e}"), &format!("x{i}")]),
            },
        }
    }

    /// Writes until the server goes away, checking every reply against the model.
    fn run(mut self, addr: String) -> Writer {
        // A writer slow to start may find the server already gone: nothing was sent.
        let Ok(mut con) = try_connect(&addr) else {
            return self;
        };
        loop {
            let c = self.next_command();
            match query(&mut con, &c) {
                Ok(got) => {
                    let want = apply(&mut self.model, &c);
                    assert!(
                        reply_matches(&want, &got),
                        "{:?} writer: {c:?} answered {got:?}, the model says {want:?}",
                        self.kind
                    );
                    self.acked += 1;
                    if self.recent.len() == 8 {
                        self.recent.pop_front();
                    }
                    self.recent.push_back(c);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        redis::ErrorKind::Server(_) | redis::ErrorKind::Extension
                    ) =>
                {
                    panic!("{:?} writer: {c:?} failed: {e}", self.kind)
                }
                Err(_) => {
                    self.in_flight = Some(c);
                    return self;
                }
            }
        }
    }
}

fn try_connect(addr: &str) -> redis::RedisResult<redis::Connection> {
    let con = redis::Client::open(format!("redis://{addr}/"))?
        .get_connection_with_timeout(Duration::from_secs(10))?;
    con.set_read_timeout(Some(Duration::from_secs(10)))?;
    Ok(con)
}

fn connect(addr: &str) -> redis::Connection {
    try_connect(addr).unwrap_or_else(|e| panic!("connect to {addr}: {e}"))
}

fn query(con: &mut redis::Connection, c: &[String]) -> redis::RedisResult<redis::Value> {
    let mut q = redis::cmd(&c[0]);
    for a in &c[1..] {
        q.arg(a);
    }
    q.query(con)
}

fn text(v: &redis::Value) -> String {
    redis::from_redis_value_ref::<String>(v).unwrap()
}

fn reply_matches(want: &Reply, got: &redis::Value) -> bool {
    match (want, got) {
        (Reply::Int(n), redis::Value::Int(m)) => n == m,
        (Reply::Bulk(None), redis::Value::Nil) => true,
        (Reply::Bulk(Some(s)), redis::Value::BulkString(b)) => s.as_bytes() == b.as_slice(),
        (Reply::Score(s), redis::Value::BulkString(_)) => text(got).parse::<f64>() == Ok(*s),
        (Reply::Ok, redis::Value::Okay) => true,
        _ => false,
    }
}

/// Reads one key through the server, checking that its size is its element count.
fn read_key(con: &mut redis::Connection, k: &str) -> Option<Val> {
    let q = |con: &mut redis::Connection, c: &[&str]| -> redis::Value {
        query(con, &cmd(c)).unwrap_or_else(|e| panic!("{c:?}: {e}"))
    };
    let items = |v: redis::Value| -> Vec<String> {
        match v {
            redis::Value::Array(a) => a.iter().map(text).collect(),
            other => panic!("{k}: not an array: {other:?}"),
        }
    };
    let int = |v: redis::Value| -> usize {
        match v {
            redis::Value::Int(n) => n as usize,
            other => panic!("{k}: not an integer: {other:?}"),
        }
    };
    let ty = match q(con, &["TYPE", k]) {
        redis::Value::SimpleString(s) => s,
        other => panic!("TYPE {k}: {other:?}"),
    };
    let (val, size) = match ty.as_str() {
        "none" => return None,
        "list" => {
            let l = items(q(con, &["LRANGE", k, "0", "-1"]));
            (Val::List(l.into()), int(q(con, &["LLEN", k])))
        }
        "set" => {
            let s = items(q(con, &["SMEMBERS", k]));
            let n = s.len();
            let s: BTreeSet<String> = s.into_iter().collect();
            assert_eq!(s.len(), n, "{k}: SMEMBERS repeats a member");
            (Val::Set(s), int(q(con, &["SCARD", k])))
        }
        "zset" => {
            let flat = items(q(con, &["ZRANGE", k, "0", "-1", "WITHSCORES"]));
            let pairs: Vec<(f64, String)> = flat
                .chunks(2)
                .map(|p| (p[1].parse().unwrap(), p[0].clone()))
                .collect();
            assert!(
                pairs.windows(2).all(|w| w[0] < w[1]),
                "{k}: ZRANGE is not in (score, member) order: {pairs:?}"
            );
            let z: BTreeMap<String, f64> = pairs.into_iter().map(|(s, m)| (m, s)).collect();
            assert_eq!(z.len() * 2, flat.len(), "{k}: ZRANGE repeats a member");
            (Val::ZSet(z), int(q(con, &["ZCARD", k])))
        }
        "hash" => {
            let flat = items(q(con, &["HGETALL", k]));
            let h: BTreeMap<String, String> = flat
                .chunks(2)
                .map(|p| (p[0].clone(), p[1].clone()))
                .collect();
            assert_eq!(h.len() * 2, flat.len(), "{k}: HGETALL repeats a field");
            (Val::Hash(h), int(q(con, &["HLEN", k])))
        }
        other => panic!("{k} has type {other}"),
    };
    assert_eq!(
        size,
        val.len(),
        "{k}: its size disagrees with its elements {val:?}"
    );
    Some(val)
}

/// A running `tierkv serve` child and the thread draining its stderr.
struct ServerProc {
    child: Child,
    addr: String,
    stderr: Option<JoinHandle<String>>,
}

impl ServerProc {
    fn start(dir: &Path) -> ServerProc {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tierkv"))
            .arg("serve")
            .arg("--db")
            .arg(dir)
            .args(["--port", "0", "--sync"])
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run tierkv serve");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut seen = String::new();
        let addr = loop {
            match lines.next() {
                Some(Ok(line)) => {
                    if let Some(a) = line.strip_prefix("tierkv serve: listening on ") {
                        break a.trim().to_string();
                    }
                    seen.push_str(&line);
                    seen.push('\n');
                }
                _ => {
                    let status = child.wait().unwrap();
                    panic!("tierkv serve exited ({status}) before listening:\n{seen}");
                }
            }
        };
        // Drained to the end, so the server never blocks on a full pipe.
        let stderr = std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                seen.push_str(&line);
                seen.push('\n');
            }
            seen
        });
        ServerProc {
            child,
            addr,
            stderr: Some(stderr),
        }
    }

    /// SIGKILL (`Child::kill` on Unix); returns what the server wrote on stderr.
    fn kill(mut self) -> String {
        if let Some(status) = self.child.try_wait().unwrap() {
            let log = self.stderr.take().unwrap().join().unwrap();
            panic!("tierkv serve exited ({status}) before the kill:\n{log}");
        }
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        self.stderr.take().unwrap().join().unwrap()
    }

    /// SHUTDOWN, then waits for a clean exit; returns what the server wrote on stderr.
    fn shutdown(mut self) -> String {
        let mut con = connect(&self.addr);
        // The server closes the connection instead of replying.
        let _ = query(&mut con, &cmd(&["SHUTDOWN"]));
        // A guard against a hang, not a speed check.
        let deadline = Instant::now() + Duration::from_secs(600);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "tierkv serve did not exit");
            std::thread::sleep(Duration::from_millis(20));
        };
        let log = self.stderr.take().unwrap().join().unwrap();
        assert!(status.success(), "SHUTDOWN: exit {status}:\n{log}");
        log
    }
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        // A failed test must not leave a server running.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn be_u64(b: &[u8]) -> u64 {
    u64::from_be_bytes(b[..8].try_into().unwrap())
}

/// `'f'`/`'z'` + u32 BE len(K) + K + version u64 BE + rest: (K, version, rest).
fn split_element_key(k: &[u8]) -> (Vec<u8>, u64, Vec<u8>) {
    let len = u32::from_be_bytes(k[1..5].try_into().unwrap()) as usize;
    assert!(k.len() >= 13 + len, "element record key too short: {k:?}");
    (
        k[5..5 + len].to_vec(),
        be_u64(&k[5 + len..]),
        k[13 + len..].to_vec(),
    )
}

/// The ordered 8 bytes of a score record (keyspace.rs `score_bytes`).
fn score_bytes(score: f64) -> [u8; 8] {
    let score = if score == 0.0 { 0.0 } else { score };
    let bits = score.to_bits();
    let ordered = if bits >> 63 == 0 {
        bits | (1 << 63)
    } else {
        !bits
    };
    ordered.to_be_bytes()
}

/// A collection's version: its Redis key and version number.
type Version = (Vec<u8>, u64);

/// The raw check, on the stopped server's store: every element record (`'f'`) and score
/// record (`'z'`) belongs to the live collection `'k' + K` at its version; each
/// collection's count (value bytes 9..17) is its element records (and, for a sorted set,
/// its score records, which agree with the members' scores); a list's elements sit at
/// `head..head + count`; no collection is empty; no expiring-hash record exists (nothing
/// here expires).
fn check_records(dir: &Path, when: &str) {
    let db = tierkv::Db::open(dir, tierkv::Options::default()).unwrap();
    // Live collections: key -> (type byte, version, count, list head).
    let mut colls: BTreeMap<Vec<u8>, (u8, u64, u64, u64)> = BTreeMap::new();
    // (key, version) -> element -> value.
    let mut elements: BTreeMap<Version, BTreeMap<Vec<u8>, Vec<u8>>> = BTreeMap::new();
    // (key, version) -> score records' (ordered score, member).
    let mut scores: BTreeMap<Version, BTreeSet<Vec<u8>>> = BTreeMap::new();
    let mut it = db.iter().unwrap();
    it.seek_to_first().unwrap();
    while it.valid() {
        let (k, v) = (it.key().to_vec(), it.value().to_vec());
        match k.first() {
            Some(b'k') => match v.first() {
                Some(&t @ (b'h' | b'S' | b'z')) => {
                    assert_eq!(v.len(), 17, "{when}: metadata of {k:?}: {v:?}");
                    colls.insert(k[1..].to_vec(), (t, be_u64(&v[1..]), be_u64(&v[9..]), 0));
                }
                Some(b'l') => {
                    assert_eq!(v.len(), 25, "{when}: metadata of {k:?}: {v:?}");
                    let head = be_u64(&v[17..]);
                    colls.insert(
                        k[1..].to_vec(),
                        (b'l', be_u64(&v[1..]), be_u64(&v[9..]), head),
                    );
                }
                _ => panic!("{when}: {k:?} is not a collection: {v:?}"),
            },
            Some(b'f') => {
                let (key, version, element) = split_element_key(&k);
                elements
                    .entry((key, version))
                    .or_default()
                    .insert(element, v);
            }
            Some(b'z') => {
                let (key, version, rest) = split_element_key(&k);
                assert!(v.is_empty(), "{when}: score record {k:?} has a value");
                scores.entry((key, version)).or_default().insert(rest);
            }
            // The sorted sets' rank index (its counts are checked against the members by
            // the server's zsets tests, `check_rank_index`).
            Some(b'r') => {}
            Some(0) => {}
            _ => panic!("{when}: unexpected record {k:?} -> {v:?}"),
        }
        it.next().unwrap();
    }
    drop(it);
    drop(db);
    let show = |k: &[u8]| String::from_utf8_lossy(k).into_owned();
    for (key, version) in elements.keys().chain(scores.keys()) {
        match colls.get(key) {
            None => panic!(
                "{when}: element records of {} (version {version}), which is dead",
                show(key)
            ),
            Some(&(_, v, _, _)) => assert_eq!(
                *version,
                v,
                "{when}: element records of an old version of {}",
                show(key)
            ),
        }
    }
    for key in scores.keys().map(|(k, _)| k) {
        assert_eq!(
            colls[key].0,
            b'z',
            "{when}: score records of {}, not a sorted set",
            show(key)
        );
    }
    for (key, &(t, version, count, head)) in &colls {
        let name = show(key);
        assert!(count > 0, "{when}: {name} is an empty collection");
        let elems = elements
            .get(&(key.clone(), version))
            .cloned()
            .unwrap_or_default();
        assert_eq!(
            elems.len() as u64,
            count,
            "{when}: {name}: count {count} but {} element records",
            elems.len()
        );
        match t {
            b'l' => {
                let want: Vec<Vec<u8>> = (head..head + count)
                    .map(|i| i.to_be_bytes().to_vec())
                    .collect();
                let got: Vec<Vec<u8>> = elems.keys().cloned().collect();
                assert_eq!(
                    got, want,
                    "{when}: {name}: elements not at head..head+count"
                );
            }
            b'S' => assert!(
                elems.values().all(Vec::is_empty),
                "{when}: {name}: a set member's record has a value"
            ),
            b'z' => {
                let want: BTreeSet<Vec<u8>> = elems
                    .iter()
                    .map(|(member, score)| {
                        assert_eq!(score.len(), 8, "{when}: {name}: a member's score");
                        let mut r = score_bytes(f64::from_bits(be_u64(score))).to_vec();
                        r.extend_from_slice(member);
                        r
                    })
                    .collect();
                let got = scores
                    .get(&(key.clone(), version))
                    .cloned()
                    .unwrap_or_default();
                assert_eq!(
                    got, want,
                    "{when}: {name}: score records disagree with the members"
                );
            }
            _ => {}
        }
    }
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn kill_9_of_serve_sync_loses_no_acknowledged_collection_write() {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let seed = env_u64("TIERKV_SERVE_CRASH_SEED", 20);
    let rounds = env_u64("TIERKV_SERVE_CRASH_ROUNDS", 4);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut writers: Vec<Writer> = [
        (Kind::List, "list"),
        (Kind::Set, "set"),
        (Kind::ZSet, "zset"),
        (Kind::Hash, "hash"),
    ]
    .into_iter()
    .enumerate()
    .map(|(n, (kind, prefix))| Writer::new(kind, prefix, seed * 10 + n as u64))
    .collect();
    let mut server = ServerProc::start(&db);
    let mut in_flight = [0u32; 4];
    // Rounds 0..rounds end in a kill; the last one in a SHUTDOWN under the same load.
    for round in 0..=rounds {
        let threads: Vec<JoinHandle<Writer>> = writers
            .drain(..)
            .map(|w| {
                let addr = server.addr.clone();
                std::thread::spawn(move || w.run(addr))
            })
            .collect();
        std::thread::sleep(Duration::from_millis(rng.gen_range(200..1500)));
        let log = if round < rounds {
            server.kill()
        } else {
            server.shutdown()
        };
        writers = threads
            .into_iter()
            .map(|t| t.join().expect("a writer failed"))
            .collect();
        let when = format!("round {round} (seed {seed})");
        check_records(&db, &when);
        server = ServerProc::start(&db);
        let mut con = connect(&server.addr);
        for w in &mut writers {
            let mut got = Model::new();
            for k in &w.keys {
                if let Some(v) = read_key(&mut con, k) {
                    got.insert(k.clone(), v);
                }
            }
            let mut with_in_flight = w.model.clone();
            if let Some(c) = &w.in_flight {
                apply(&mut with_in_flight, c);
            }
            // How the commands in flight fared: applied, not applied, or no telling.
            in_flight[usize::from(with_in_flight == w.model)
                + 2 * usize::from(got != with_in_flight)] += 1;
            if got == with_in_flight {
                w.model = with_in_flight;
            } else {
                assert_eq!(
                    got, w.model,
                    "{when}: {:?} writer's keys after the restart are neither its state after \
                     its {} acknowledged commands (the last ones {:?}) nor that plus the \
                     one in flight {:?}\nserver log:\n{log}",
                    w.kind, w.acked, w.recent, w.in_flight
                );
            }
            w.in_flight = None;
        }
    }
    server.shutdown();
    check_records(&db, &format!("at the end (seed {seed})"));
    for w in &writers {
        assert!(
            w.acked >= 20,
            "{:?} writer: only {} acknowledged commands, too few to test anything",
            w.kind,
            w.acked
        );
        eprintln!(
            "{:?} writer: {} acknowledged commands, final keys {:?}",
            w.kind,
            w.acked,
            w.model
                .iter()
                .map(|(k, v)| (k, v.len()))
                .collect::<Vec<_>>()
        );
    }
    eprintln!(
        "{rounds} kill/restart rounds and a SHUTDOWN in {:?}; commands in flight: {} \
         applied, {} not, {} no-ops",
        started.elapsed(),
        in_flight[0],
        in_flight[2],
        in_flight[1]
    );
}

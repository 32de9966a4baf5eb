//! Crash torture across writes, flushes, compactions and promotions: a child process runs
//! a two-tier store with promotion on, with writers (some writes synced), readers that hit
//! the slow tier (so the promotion cache fills and records are promoted by flush and by
//! compaction), and a thread forcing flushes and narrow compactions. The parent kills it
//! with SIGKILL at random moments (some during the child's own recovery), reopens the
//! store and checks (invariants of docs/DESIGN.md):
//!
//! - invariant 2 (durability): every synced write is present; each writer's key stream
//!   survives as a gap-free prefix (no middle write lost, nothing beyond the last write
//!   attempted); the update stream survives as a prefix of its sequence (for every key,
//!   exactly the newest update up to the surviving cut);
//! - invariant 3: every value is intact, the loaded data promotion copies around is
//!   complete and unchanged, and `verify_checksums` passes;
//! - invariant 1 inside the child: a read never returns a version older than an update
//!   acknowledged before it began (the child dies, failing the round, if one does).
//!
//! 10 short rounds run in CI. `TIERKV_CRASH_PROMO_ROUNDS=300 cargo test -p tierkv --test
//! crash_promotion -- --nocapture` is the long run; it prints its counts.

mod common;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tierkv::{Db, SlowTierFormat, WriteOptions};

const CHILD_ENV: &str = "TIERKV_CRASH_PROMO_CHILD_DIR";
const ROUND_ENV: &str = "TIERKV_CRASH_PROMO_ROUND";
const FORMAT_ENV: &str = "TIERKV_CRASH_PROMO_FORMAT";
/// Writers appending to their own key streams.
const WRITERS: u64 = 2;
/// Keys loaded before the first round, pushed to the slow tier and never written again:
/// the readers' skewed reads promote them.
const LOADED: u64 = 2000;
/// Keys of the update stream (also loaded at position 0).
const UPDATED: u64 = 200;
/// Loaded keys a round's readers favour (a different window each round, so promotion
/// keeps finding cold records on the slow tier).
const HOT_WINDOW: u64 = 50;

/// The slow tier's table format of a run, and whether compactions push keys down past
/// their output level (the child reads both from [`FORMAT_ENV`]).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Setup {
    format: SlowTierFormat,
    pushdown: bool,
}

fn opts(dir: &Path, setup: Setup) -> tierkv::Options {
    let mut o = common::two_tier_options(&dir.join("slow"), 256 * 1024, true);
    o.compaction.slow_tier_format = setup.format;
    o.compaction.preemptive_pushdown = setup.pushdown;
    if setup.pushdown {
        // More slow levels, so there is somewhere below the output to push to.
        o.fd_budget = Some(128 * 1024);
        o.level_size_ratio = 2;
        o.num_levels = 7;
    }
    o
}

fn child_setup() -> Setup {
    let v = std::env::var(FORMAT_ENV).unwrap_or_default();
    Setup {
        format: if v.starts_with("semi") {
            SlowTierFormat::SemiSorted
        } else {
            SlowTierFormat::Sorted
        },
        pushdown: v.ends_with("+push"),
    }
}

fn fast(dir: &Path) -> std::path::PathBuf {
    dir.join("fast")
}

fn loaded_key(k: u64) -> Vec<u8> {
    format!("load{k:05}").into_bytes()
}

fn loaded_value(k: u64) -> Vec<u8> {
    let mut v = format!("loaded-{k}-").into_bytes();
    v.resize(150 + (k % 5) as usize * 20, b'a' + (k % 26) as u8);
    v
}

fn stream_prefix(t: u64) -> String {
    format!("stream{t}-")
}

fn stream_key(t: u64, i: u64) -> Vec<u8> {
    format!("stream{t}-{i:09}").into_bytes()
}

fn stream_value(t: u64, i: u64) -> Vec<u8> {
    let mut v = format!("{t}:{i}:").into_bytes();
    v.resize(40 + (i % 11) as usize * 10, b'0' + (i % 10) as u8);
    v
}

fn update_key(k: u64) -> Vec<u8> {
    format!("upd{k:04}").into_bytes()
}

/// The key written by update number `j` (numbers start at 1; 0 is the initial load):
/// a fixed pseudo-random function, so the parent knows every update the child may have
/// made, acknowledged or not.
fn update_target(j: u64) -> u64 {
    let mut x = j.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^= x >> 29;
    x % UPDATED
}

fn update_value(k: u64, j: u64) -> Vec<u8> {
    let mut v = format!("{k}:{j}:").into_bytes();
    v.resize(100 + (j % 7) as usize * 40, b'u');
    v
}

/// The update number a value carries, checking the rest of it.
fn update_number(k: u64, v: &[u8]) -> u64 {
    let s = std::str::from_utf8(v).expect("update value is text");
    let j: u64 = s
        .split(':')
        .nth(1)
        .and_then(|x| x.parse().ok())
        .unwrap_or_else(|| panic!("malformed update value of key {k}: {s:?}"));
    assert_eq!(v, update_value(k, j), "update value of key {k} damaged");
    j
}

/// The number of keys of stream `t`, checking that they are consecutive from 0 (nothing
/// survived beyond a gap) and intact.
fn check_stream(db: &Db, t: u64) -> u64 {
    let lo = stream_prefix(t).into_bytes();
    let mut hi = lo.clone();
    *hi.last_mut().unwrap() += 1;
    let got = db.scan(Some(&lo), Some(&hi), usize::MAX).unwrap();
    for (i, (k, v)) in got.iter().enumerate() {
        let i = i as u64;
        assert_eq!(
            k,
            &stream_key(t, i),
            "stream {t}: key {i} missing while a later one survived"
        );
        assert_eq!(v, &stream_value(t, i), "stream {t}: value {i} damaged");
    }
    got.len() as u64
}

/// The update numbers every key holds.
fn update_state(db: &Db) -> Vec<u64> {
    (0..UPDATED)
        .map(|k| {
            let v = db
                .get(update_key(k))
                .unwrap()
                .unwrap_or_else(|| panic!("updated key {k} lost"));
            update_number(k, &v)
        })
        .collect()
}

/// Loads the keys every round reads and updates, and pushes them to the slow tier.
fn load(dir: &Path, setup: Setup) {
    let db = Db::open(fast(dir), opts(dir, setup)).unwrap();
    for k in 0..LOADED {
        db.put(loaded_key(k), loaded_value(k)).unwrap();
    }
    for k in 0..UPDATED {
        db.put(update_key(k), update_value(k, 0)).unwrap();
    }
    db.compact_range(None, None).unwrap();
    db.close().unwrap();
}

/// The child: resumes every stream where the store ends and runs until killed.
#[test]
#[ignore = "run by crash_torture_across_promotions as a child process"]
fn crash_promotion_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let dir = Path::new(&dir);
    let round: u64 = std::env::var(ROUND_ENV).unwrap().parse().unwrap();
    let db = Arc::new(Db::open(fast(dir), opts(dir, child_setup())).unwrap());
    let out = Arc::new(Mutex::new(std::io::stdout()));
    let say = {
        let out = out.clone();
        move |line: String| {
            let mut o = out.lock().unwrap();
            writeln!(o, "{line}").unwrap();
            o.flush().unwrap();
        }
    };
    let starts: Vec<u64> = (0..WRITERS).map(|t| check_stream(&db, t)).collect();
    let state = update_state(&db);
    let acked: Arc<Vec<AtomicU64>> = Arc::new(state.iter().map(|&j| AtomicU64::new(j)).collect());
    let next_update = state.iter().max().copied().unwrap_or(0) + 1;
    say("READY".into());
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for (t, start) in starts.into_iter().enumerate() {
        let (db, say) = (db.clone(), say.clone());
        threads.push(std::thread::spawn(move || {
            let t = t as u64;
            let mut rng = StdRng::seed_from_u64(round * 100 + t);
            for i in start.. {
                let sync = rng.gen_ratio(1, 16);
                db.put_opt(stream_key(t, i), stream_value(t, i), &WriteOptions { sync })
                    .unwrap();
                say(format!("A {t} {i} {}", sync as u8));
                // Paced, so a long run's streams stay small enough to verify every round.
                if i % 2 == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }));
    }
    {
        let (db, say, acked) = (db.clone(), say.clone(), acked.clone());
        threads.push(std::thread::spawn(move || {
            let mut rng = StdRng::seed_from_u64(round * 100 + 50);
            for j in next_update.. {
                let k = update_target(j);
                let sync = rng.gen_ratio(1, 32);
                db.put_opt(update_key(k), update_value(k, j), &WriteOptions { sync })
                    .unwrap();
                acked[k as usize].store(j, Ordering::Release);
                say(format!("U {j} {}", sync as u8));
                // Overwrites churn memtables, flushes and compactions without growing the
                // store.
                if j % 4 == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }));
    }
    for r in 0..2u64 {
        let (db, acked, stop) = (db.clone(), acked.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let mut rng = StdRng::seed_from_u64(round * 100 + 60 + r);
            let window = (round * HOT_WINDOW) % LOADED;
            while !stop.load(Ordering::Relaxed) {
                if rng.gen_ratio(1, 5) {
                    let k = rng.gen_range(0..UPDATED);
                    let floor = acked[k as usize].load(Ordering::Acquire);
                    let v = db.get(update_key(k)).unwrap().expect("updated key present");
                    let j = update_number(k, &v);
                    assert!(
                        j >= floor,
                        "key {k}: read update {j} after {floor} was acked"
                    );
                    continue;
                }
                let k = if rng.gen_ratio(9, 10) {
                    (window + rng.gen_range(0..HOT_WINDOW)) % LOADED
                } else {
                    rng.gen_range(0..LOADED)
                };
                let v = db.get(loaded_key(k)).unwrap();
                assert_eq!(v, Some(loaded_value(k)), "loaded key {k}");
            }
        }));
    }
    {
        let (db, stop) = (db.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let mut rng = StdRng::seed_from_u64(round * 100 + 70);
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(rng.gen_range(20..60)));
                db.flush().unwrap();
                if rng.gen_ratio(1, 3) {
                    let a = rng.gen_range(0..LOADED);
                    let b = (a + 200).min(LOADED - 1);
                    db.compact_range(Some(&loaded_key(a)), Some(&loaded_key(b)))
                        .unwrap();
                }
            }
        }));
    }
    // Counters for the parent's report, until the kill.
    loop {
        std::thread::sleep(Duration::from_millis(50));
        let s = db.stats();
        let p = &s.promotion;
        say(format!(
            "S {} {} {} {} {} {} {} {}",
            s.user_bytes_written,
            p.promoted_by_flush_bytes,
            p.promoted_by_compaction_bytes,
            p.retained_bytes,
            p.cache_inserts,
            s.flushes,
            s.compactions,
            s.compaction_pushdown_bytes
        ));
        if threads.iter().any(|t| t.is_finished()) {
            // A thread failed its check: the panic message is on stderr.
            stop.store(true, Ordering::Relaxed);
            for t in threads {
                let _ = t.join();
            }
            std::process::exit(3);
        }
    }
}

/// What the child acknowledged in one round.
#[derive(Default)]
struct Acks {
    ready: bool,
    /// Per writer: last acknowledged index, last acknowledged synced index.
    stream: HashMap<u64, (u64, Option<u64>)>,
    update: Option<u64>,
    update_synced: Option<u64>,
    /// The last counters line.
    stats: Vec<u64>,
}

fn parse_acks(lines: impl Iterator<Item = String>) -> Acks {
    let mut a = Acks::default();
    for line in lines {
        let f: Vec<&str> = line.split_whitespace().collect();
        let n = |i: usize| f[i].parse::<u64>().unwrap();
        match f.first().copied() {
            _ if line.ends_with("READY") => a.ready = true,
            Some("A") if f.len() == 4 => {
                let e = a.stream.entry(n(1)).or_insert((0, None));
                e.0 = n(2);
                if n(3) == 1 {
                    e.1 = Some(n(2));
                }
            }
            Some("U") if f.len() == 3 => {
                a.update = Some(n(1));
                if n(2) == 1 {
                    a.update_synced = Some(n(1));
                }
            }
            Some("S") if f.len() == 9 => a.stats = (1..9).map(n).collect(),
            // A line cut by the kill.
            _ => {}
        }
    }
    a
}

#[derive(Default, Debug)]
struct Totals {
    rounds: u64,
    killed_in_recovery: u64,
    synced_writes_checked: u64,
    bytes_written: u64,
    promoted_by_flush: u64,
    promoted_by_compaction: u64,
    retained: u64,
    cache_inserts: u64,
    flushes: u64,
    compactions: u64,
    pushed: u64,
}

#[test]
fn crash_torture_across_promotions() {
    torture(Setup {
        format: SlowTierFormat::Sorted,
        pushdown: false,
    });
}

/// The same torture with semi-sorted slow-tier tables: kills land between a generation's
/// append and its manifest edit too (the linked copy is then an orphan, the original
/// keeps its recorded size), and nothing synced is lost.
#[test]
fn crash_torture_across_promotions_semi_sorted() {
    torture(Setup {
        format: SlowTierFormat::SemiSorted,
        pushdown: false,
    });
}

/// The same torture with preemptive pushdown on both slow-tier formats: kills land
/// between writing a compaction's deeper outputs and its one edit; recovery keeps the
/// acknowledged writes and the update stream's order (invariant 2).
#[test]
fn crash_torture_across_promotions_with_pushdown() {
    for format in [SlowTierFormat::Sorted, SlowTierFormat::SemiSorted] {
        torture(Setup {
            format,
            pushdown: true,
        });
    }
}

fn torture(setup: Setup) {
    let rounds = common::env_count("TIERKV_CRASH_PROMO_ROUNDS", 10);
    // TIERKV_CRASH_PROMO_DIR keeps the store where a failure can be inspected.
    let tmp = tempfile::tempdir().unwrap();
    let kept = std::env::var_os("TIERKV_CRASH_PROMO_DIR").map(std::path::PathBuf::from);
    let dir = kept.as_deref().unwrap_or(tmp.path());
    if kept.is_some() {
        let _ = std::fs::remove_dir_all(dir);
    }
    load(dir, setup);
    let exe = std::env::current_exe().unwrap();
    let mut rng = StdRng::seed_from_u64(42);
    let mut totals = Totals::default();
    let started = Instant::now();
    for round in 0..rounds {
        let mut child = Command::new(&exe)
            .args([
                "crash_promotion_child",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, dir)
            .env(ROUND_ENV, round.to_string())
            .env(
                FORMAT_ENV,
                match (setup.format, setup.pushdown) {
                    (SlowTierFormat::SemiSorted, false) => "semi",
                    (SlowTierFormat::SemiSorted, true) => "semi+push",
                    (_, false) => "sorted",
                    (_, true) => "sorted+push",
                },
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut stderr = child.stderr.take().unwrap();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let lines = stdout.lines().map_while(Result::ok).inspect(|l| {
                // The test harness's "test crash_promotion_child ... " precedes it.
                if l.ends_with("READY") {
                    let _ = ready_tx.send(());
                }
            });
            parse_acks(lines)
        });
        let err_reader = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            s
        });
        // One round in ten is killed at a random moment of its start, recovery included;
        // the others after the child resumed, while everything runs.
        let in_recovery = round % 10 == 9;
        if in_recovery {
            std::thread::sleep(Duration::from_millis(rng.gen_range(1..80)));
        } else {
            let _ = ready_rx.recv_timeout(Duration::from_secs(60));
            std::thread::sleep(Duration::from_millis(rng.gen_range(150..700)));
        }
        let early_exit = child.try_wait().unwrap();
        let _ = child.kill(); // SIGKILL
        child.wait().unwrap();
        let acks = reader.join().unwrap();
        let stderr = err_reader.join().unwrap();
        assert!(
            early_exit.is_none(),
            "round {round}: the child exited by itself ({early_exit:?}):\n{stderr}"
        );
        assert!(
            acks.ready || in_recovery,
            "round {round}: the child never resumed:\n{stderr}"
        );
        totals.killed_in_recovery += !acks.ready as u64;

        let db = Db::open(fast(dir), opts(dir, setup)).unwrap();
        for t in 0..WRITERS {
            let n = check_stream(&db, t);
            if let Some(&(last, synced)) = acks.stream.get(&t) {
                if let Some(s) = synced {
                    assert!(
                        n > s,
                        "round {round}: stream {t} lost synced write {s} ({n} survived)"
                    );
                    totals.synced_writes_checked += 1;
                }
                // At most the one write in flight beyond the last acknowledgement.
                assert!(
                    n <= last + 2,
                    "round {round}: stream {t} has {n} keys, {last} acked"
                );
            }
        }
        let state = update_state(&db);
        let cut = state.iter().max().copied().unwrap_or(0);
        if let Some(s) = acks.update_synced {
            assert!(
                cut >= s,
                "round {round}: synced update {s} lost (cut {cut})"
            );
            totals.synced_writes_checked += 1;
        }
        if let Some(last) = acks.update {
            assert!(
                cut <= last + 1,
                "round {round}: update {cut} survived, {last} acked"
            );
        }
        // The updates that survived are exactly those up to the cut: for every key, the
        // newest update at or below it.
        let mut expect = vec![0u64; UPDATED as usize];
        for j in 1..=cut {
            expect[update_target(j) as usize] = j;
        }
        assert_eq!(state, expect, "round {round}: the updates are not a prefix");
        for k in 0..LOADED {
            assert_eq!(
                db.get(loaded_key(k)).unwrap(),
                Some(loaded_value(k)),
                "round {round}: loaded key {k}"
            );
        }
        db.verify_checksums()
            .unwrap_or_else(|e| panic!("round {round}: verify_checksums: {e}"));
        db.close().unwrap();

        totals.rounds += 1;
        if let [bytes, pf, pc, ret, ins, fl, co, pu] = acks.stats[..] {
            totals.pushed += pu;
            totals.bytes_written += bytes;
            totals.promoted_by_flush += pf;
            totals.promoted_by_compaction += pc;
            totals.retained += ret;
            totals.cache_inserts += ins;
            totals.flushes += fl;
            totals.compactions += co;
        }
    }
    eprintln!(
        "crash torture across promotions: {rounds} rounds (= kills) in {:.1} s: {totals:?}",
        started.elapsed().as_secs_f64()
    );
    assert!(
        !setup.pushdown || totals.pushed > 0,
        "no compaction pushed anything down: the kills never met a pushdown"
    );
    assert!(
        totals.synced_writes_checked > 0 && totals.cache_inserts > 0,
        "the rounds were too short to test anything: {totals:?}"
    );
}

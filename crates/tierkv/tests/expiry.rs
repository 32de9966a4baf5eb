//! Key expiry (issue 22): an expiring record reads as a deletion once its deadline has
//! passed, on every read path (get, get_entry, iterators both ways, snapshots,
//! read-modify-write and merge), wherever it lives (memtable, tables of either tier,
//! promotion cache); flushes and compactions remove expired data; it is never promoted;
//! and expiry survives reopen and crash like any write. A model-based randomized run with
//! a `ManualClock` checks all reads against a `BTreeMap` with deadlines.

mod common;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;
use tierkv::{Db, Entry, ManualClock, Options, ReadOptions, Update, WriteBatch};

const T0: u64 = 1_700_000_000_000;

fn opts_with(clock: &Arc<ManualClock>, base: Options) -> Options {
    Options {
        clock: clock.clone(),
        ..base
    }
}

fn scan_all(db: &Db, ropts: &ReadOptions) -> Vec<(Vec<u8>, Vec<u8>, Option<u64>)> {
    let mut it = db.iter_opt(ropts).unwrap();
    it.seek_to_first().unwrap();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec(), it.deadline()));
        it.next().unwrap();
    }
    out
}

fn scan_back(db: &Db) -> Vec<Vec<u8>> {
    let mut it = db.iter().unwrap();
    it.seek_to_last().unwrap();
    let mut out = Vec::new();
    while it.valid() {
        out.push(it.key().to_vec());
        it.prev().unwrap();
    }
    out.reverse();
    out
}

/// An expired record reads as a deletion on every read path and hides older versions,
/// in the memtable and after a flush; a plain put clears the deadline; a deadline already
/// past is accepted and reads as absent.
#[test]
fn expired_records_read_as_deletions_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let db = Db::open(dir.path(), opts_with(&clock, common::tiny_options())).unwrap();
    for flush in [false, true] {
        db.put(b"a", b"old").unwrap();
        db.flush().unwrap();
        db.put_expiring(b"a", b"new", T0 + 100).unwrap();
        db.put_expiring(b"b", b"bv", T0 + 200).unwrap();
        db.put(b"c", b"cv").unwrap();
        db.put_expiring(b"past", b"x", T0 - 1).unwrap();
        if flush {
            db.flush().unwrap();
        }
        let snap = db.snapshot();
        assert_eq!(
            db.get_entry(b"a").unwrap(),
            Some(Entry {
                value: b"new".to_vec(),
                deadline: Some(T0 + 100)
            })
        );
        assert_eq!(
            db.get(b"past").unwrap(),
            None,
            "a past deadline reads as absent"
        );
        assert_eq!(
            scan_all(&db, &ReadOptions::new()),
            vec![
                (b"a".to_vec(), b"new".to_vec(), Some(T0 + 100)),
                (b"b".to_vec(), b"bv".to_vec(), Some(T0 + 200)),
                (b"c".to_vec(), b"cv".to_vec(), None),
            ]
        );
        clock.set(T0 + 100);
        // Expired: absent, and the older "old" stays hidden.
        assert_eq!(db.get(b"a").unwrap(), None, "flush={flush}");
        assert_eq!(db.get_entry(b"a").unwrap(), None);
        let at_snap = ReadOptions {
            snapshot: Some(snap.seq()),
            ..ReadOptions::new()
        };
        assert_eq!(
            db.get_opt(b"a", &at_snap).unwrap(),
            None,
            "expiry is by time, not sequence: a snapshot read sees it expired"
        );
        let keys: Vec<Vec<u8>> = scan_all(&db, &at_snap).into_iter().map(|e| e.0).collect();
        assert_eq!(keys, vec![b"b".to_vec(), b"c".to_vec()]);
        assert_eq!(scan_back(&db), vec![b"b".to_vec(), b"c".to_vec()]);
        // A merge or update onto an expired record sees it absent.
        let seen = std::cell::Cell::new(true);
        db.update_entry(b"a", |old| {
            seen.set(old.is_some());
            Update::Keep
        })
        .unwrap();
        assert!(!seen.get(), "update_entry saw an expired record");
        clock.set(T0 + 200);
        assert_eq!(scan_back(&db), vec![b"c".to_vec()]);
        // A plain put clears the deadline.
        db.put_expiring(b"b", b"again", T0 + 300).unwrap();
        db.put(b"b", b"forever").unwrap();
        clock.set(T0 + 10_000);
        assert_eq!(
            db.get_entry(b"b").unwrap(),
            Some(Entry {
                value: b"forever".to_vec(),
                deadline: None
            })
        );
        drop(snap);
        for k in [&b"a"[..], b"b", b"c", b"past"] {
            db.delete(k).unwrap();
        }
        clock.set(T0);
    }
}

/// update_entry sees the deadline and can keep it; merge keeps a live record's deadline
/// and treats an expired one as absent; WriteBatch::put_expiring applies atomically.
#[test]
fn update_entry_and_merge_keep_or_drop_deadlines() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let opts = Options {
        merge_operator: Some(Arc::new(tierkv::merge::AddI64)),
        ..opts_with(&clock, common::tiny_options())
    };
    let db = Db::open(dir.path(), opts).unwrap();
    let mut b = WriteBatch::new();
    b.put_expiring(b"n", b"5", T0 + 50).put(b"m", b"1");
    db.write(b).unwrap();
    assert_eq!(db.merge(b"n", b"2").unwrap(), b"7");
    assert_eq!(db.get_entry(b"n").unwrap().unwrap().deadline, Some(T0 + 50));
    // Keep the deadline explicitly through update_entry.
    db.update_entry(b"n", |old| {
        let old = old.unwrap();
        Update::PutExpiring(b"8".to_vec(), old.deadline.unwrap())
    })
    .unwrap();
    assert_eq!(
        db.get_entry(b"n").unwrap(),
        Some(Entry {
            value: b"8".to_vec(),
            deadline: Some(T0 + 50)
        })
    );
    clock.advance(50);
    assert_eq!(
        db.merge(b"n", b"3").unwrap(),
        b"3",
        "merge onto expired = onto absent"
    );
    assert_eq!(db.get_entry(b"n").unwrap().unwrap().deadline, None);
    // rmw through the plain closure sees an expired record as absent too.
    db.put_expiring(b"r", b"x", T0 + 60).unwrap();
    clock.advance(10);
    let got = db.rmw(b"r", |old| {
        assert!(old.is_none(), "rmw saw an expired value");
        Some(b"y".to_vec())
    });
    assert_eq!(got.unwrap().as_deref(), Some(&b"y"[..]));
}

/// Expiring writes survive a clean reopen (from the WAL and from tables) with their
/// deadlines, and a record that expires while the store is closed reads as absent.
#[test]
fn expiry_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    {
        let db = Db::open(dir.path(), opts_with(&clock, common::tiny_options())).unwrap();
        db.put_expiring(b"t", b"table", T0 + 10).unwrap();
        db.flush().unwrap();
        db.put(b"w", b"old").unwrap();
        db.put_expiring(b"w", b"wal", T0 + 20).unwrap();
        db.put_expiring(b"long", b"l", T0 + 1000).unwrap();
    }
    let db = Db::open(dir.path(), opts_with(&clock, common::tiny_options())).unwrap();
    assert_eq!(db.get_entry(b"t").unwrap().unwrap().deadline, Some(T0 + 10));
    assert_eq!(db.get_entry(b"w").unwrap().unwrap().deadline, Some(T0 + 20));
    drop(db);
    clock.set(T0 + 20);
    let db = Db::open(dir.path(), opts_with(&clock, common::tiny_options())).unwrap();
    assert_eq!(db.get(b"t").unwrap(), None);
    assert_eq!(
        db.get(b"w").unwrap(),
        None,
        "the older plain value stays hidden"
    );
    assert_eq!(db.get(b"long").unwrap().as_deref(), Some(&b"l"[..]));
}

/// One step of the model: a value and its deadline (`None`: never expires).
type Model = BTreeMap<Vec<u8>, (Vec<u8>, Option<u64>)>;

fn live(model: &Model, now: u64) -> Vec<(Vec<u8>, Vec<u8>, Option<u64>)> {
    model
        .iter()
        .filter(|(_, (_, d))| d.is_none_or(|d| d > now))
        .map(|(k, (v, d))| (k.clone(), v.clone(), *d))
        .collect()
}

/// Model-based randomized test with a ManualClock: puts, expiring puts (some already past),
/// deletes, batches, clock advances, gets, scans, snapshots (read at their sequence but at
/// the current time), flushes, compactions and reopens, checked against a BTreeMap with
/// deadlines after every step (invariant 1 with expiry: the newest version decides, an
/// expired one as a deletion).
#[test]
fn model_with_deadlines() {
    for seed in 0..4u64 {
        run_model(seed, 1500, 200, &common::tiny_options);
    }
}

/// The same on two tiers with promotion on (reads of the slow tier feed the promotion
/// cache, the checker and promotion by compaction, compactions into the slow tier retain
/// hot keys), over a key space large enough to reach the slow tier.
#[test]
fn model_with_deadlines_two_tiers_promoting() {
    let slow = tempfile::tempdir().unwrap();
    let opts = || common::two_tier_options(slow.path(), 96 * 1024, true);
    let (mut slow_gets, mut inserts, mut expired) = (0, 0, 0);
    for seed in 10..12u64 {
        let (g, i, e) = run_model(seed, 3000, 1500, &opts);
        slow_gets += g;
        inserts += i;
        expired += e;
    }
    // The run must reach what it is for.
    assert!(slow_gets > 0, "no get reached the slow tier");
    assert!(inserts > 0, "nothing entered the promotion cache");
    assert!(expired > 0, "no expired record was rewritten");
}

/// What a model run exercised, summed over its reopens: gets served by the slow tier,
/// promotion-cache inserts, expired records rewritten.
type Exercised = (u64, u64, u64);

fn exercised(db: &Db) -> Exercised {
    let s = db.stats();
    (
        s.get_sources.slow,
        s.promotion.cache_inserts,
        s.expired_entries_removed,
    )
}

fn add(a: Exercised, b: Exercised) -> Exercised {
    (a.0 + b.0, a.1 + b.1, a.2 + b.2)
}

/// Runs the model; returns what it exercised.
fn run_model(seed: u64, steps: usize, keyspace: u64, base: &dyn Fn() -> Options) -> Exercised {
    let mut done: Exercised = (0, 0, 0);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let open = || Db::open(dir.path(), opts_with(&clock, base())).unwrap();
    let mut db = open();
    let mut model = Model::new();
    let mut snaps: Vec<(tierkv::Snapshot, Model)> = Vec::new();
    for step in 0..steps {
        let now = clock.now_ms();
        // Half the operations on a small hot set, so that reads repeat (promotion).
        let k = if rng.gen_bool(0.5) {
            common::key(rng.gen_range(0..keyspace.min(40)))
        } else {
            common::key(rng.gen_range(0..keyspace))
        };
        match rng.gen_range(0..100) {
            0..=24 => {
                let v: Vec<u8> = (0..rng.gen_range(1..200)).map(|_| rng.gen()).collect();
                db.put(&k, &v).unwrap();
                model.insert(k, (v, None));
            }
            25..=49 => {
                let v: Vec<u8> = (0..rng.gen_range(1..200)).map(|_| rng.gen()).collect();
                let d = now + rng.gen_range(0..2000) - 100;
                db.put_expiring(&k, &v, d).unwrap();
                model.insert(k, (v, Some(d)));
            }
            50..=54 => {
                db.delete(&k).unwrap();
                model.remove(&k);
            }
            55..=59 => {
                let mut b = WriteBatch::new();
                for _ in 0..rng.gen_range(1..8) {
                    let k = common::key(rng.gen_range(0..keyspace));
                    let d = now + rng.gen_range(1..500);
                    b.put_expiring(&k, b"batch", d);
                    model.insert(k, (b"batch".to_vec(), Some(d)));
                }
                db.write(b).unwrap();
            }
            60..=69 => clock.advance(rng.gen_range(1..150)),
            70..=81 => {
                let want = model
                    .get(&k)
                    .filter(|(_, d)| d.is_none_or(|d| d > now))
                    .map(|(v, d)| Entry {
                        value: v.clone(),
                        deadline: *d,
                    });
                assert_eq!(db.get_entry(&k).unwrap(), want, "seed {seed} step {step}");
            }
            82..=85 => {
                assert!(
                    scan_all(&db, &ReadOptions::new()) == live(&model, now),
                    "seed {seed} step {step}: scan differs"
                );
                let back: Vec<Vec<u8>> = live(&model, now).into_iter().map(|e| e.0).collect();
                assert_eq!(
                    scan_back(&db),
                    back,
                    "seed {seed} step {step}: reverse scan"
                );
            }
            86..=88 => {
                if snaps.len() < 3 {
                    snaps.push((db.snapshot(), model.clone()));
                } else {
                    let (snap, m) = snaps.remove(rng.gen_range(0..snaps.len()));
                    let ropts = ReadOptions {
                        snapshot: Some(snap.seq()),
                        ..ReadOptions::new()
                    };
                    assert!(
                        scan_all(&db, &ropts) == live(&m, now),
                        "seed {seed} step {step}: snapshot scan differs"
                    );
                }
            }
            89..=93 => db.flush().unwrap(),
            94..=96 => db.compact_range(None, None).unwrap(),
            _ => {
                snaps.clear();
                done = add(done, exercised(&db));
                drop(db);
                db = open();
            }
        }
    }
    db.compact_range(None, None).unwrap();
    let now = clock.now_ms();
    assert!(scan_all(&db, &ReadOptions::new()) == live(&model, now));
    add(done, exercised(&db))
}

/// Every entry of every table in `dir`: (user key, kind byte). Run with background work
/// idle, so that no file listed is being deleted.
fn table_entries(dir: &std::path::Path) -> Vec<(Vec<u8>, tierkv::key::ValueKind)> {
    use tierkv::env::{Env, IoCause, Tier};
    use tierkv::iter::InternalIterator;
    let env = Env::single(dir, false).unwrap();
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        let Some(number) = name.strip_suffix(".sst") else {
            continue;
        };
        let file = env.open_random(Tier::Fast, &name).unwrap();
        let t = Arc::new(
            tierkv::sst::Table::open(file, number.parse().unwrap(), None, IoCause::Check).unwrap(),
        );
        let mut it = t.iter(IoCause::Check, false);
        it.seek_to_first().unwrap();
        while it.valid() {
            let p = tierkv::key::parse_internal_key(it.key()).unwrap();
            out.push((p.user_key.to_vec(), p.kind));
            it.next().unwrap();
        }
    }
    out
}

fn expiring_key(i: u64) -> Vec<u8> {
    format!("exp{i:06}").into_bytes()
}

/// Expired data is gone from disk after a compaction: the expired records (and the older
/// versions they hide) leave no entry in any table, the table properties count no
/// expiring record, and the live data is untouched.
#[test]
fn expired_data_is_gone_from_disk_after_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let opts = Options {
        // The sweep stays out of the way: this test compacts explicitly.
        compaction: tierkv::CompactionOptions {
            expired_share_trigger: 2.0,
            ..Default::default()
        },
        ..opts_with(&clock, common::tiny_options())
    };
    let db = Db::open(dir.path(), opts).unwrap();
    for i in 0..2000 {
        db.put(expiring_key(i), vec![b'o'; 100]).unwrap();
        db.put(common::key(i), vec![b'p'; 100]).unwrap();
    }
    db.compact_range(None, None).unwrap();
    for i in 0..2000 {
        db.put_expiring(expiring_key(i), vec![b'e'; 100], T0 + 1000 + i % 7)
            .unwrap();
    }
    db.flush().unwrap();
    db.wait_for_background().unwrap();
    assert!(
        db.stats().expiring_entries > 0,
        "properties count expiring records"
    );
    clock.set(T0 + 1006);
    db.compact_range(None, None).unwrap();
    db.wait_for_background().unwrap();
    let entries = table_entries(dir.path());
    let left = entries
        .iter()
        .filter(|(k, _)| k.starts_with(b"exp"))
        .count();
    if left > 0 {
        let kinds: std::collections::BTreeMap<String, usize> = entries
            .iter()
            .filter(|(k, _)| k.starts_with(b"exp"))
            .fold(Default::default(), |mut m, (_, kind)| {
                *m.entry(format!("{kind:?}")).or_default() += 1;
                m
            });
        let files: Vec<usize> = db.stats().levels.iter().map(|l| l.files).collect();
        eprintln!("left by kind: {kinds:?}; files per level {files:?}");
    }
    assert_eq!(left, 0, "no entry of an expired key is left on disk");
    assert_eq!(entries.len(), 2000, "the live keys are all there, once");
    let s = db.stats();
    assert_eq!(s.expiring_entries, 0);
    assert!(
        s.expired_entries_removed >= 2000,
        "{}",
        s.expired_entries_removed
    );
    assert_eq!(db.get(expiring_key(5)).unwrap(), None);
    assert_eq!(db.scan(None, None, usize::MAX).unwrap().len(), 2000);
}

/// The expiry sweep: with expired records in the last level and no write, no flush and no
/// compact_range call, the picker's sweep (woken by its check interval) compacts the
/// tables whose estimated expired share passed the trigger, and the expired data leaves
/// the disk.
#[test]
fn the_sweep_removes_expired_data_without_compact_range() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let opts = Options {
        compaction: tierkv::CompactionOptions {
            expiry_check_interval: std::time::Duration::from_millis(50),
            ..Default::default()
        },
        ..opts_with(&clock, common::tiny_options())
    };
    let db = Db::open(dir.path(), opts).unwrap();
    for i in 0..3000 {
        if i % 4 == 0 {
            db.put(common::key(i), vec![b'p'; 100]).unwrap();
        } else {
            db.put_expiring(common::key(i), vec![b'e'; 100], T0 + 10_000 + i)
                .unwrap();
        }
    }
    db.compact_range(None, None).unwrap();
    db.wait_for_background().unwrap();
    let before = table_entries(dir.path()).len();
    assert_eq!(before, 3000);
    assert_eq!(db.stats().expiry_compactions, 0, "nothing expired yet");
    clock.set(T0 + 20_000);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while db.stats().expiring_entries > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    db.wait_for_background().unwrap();
    let s = db.stats();
    assert!(s.expiry_compactions > 0, "the sweep ran");
    assert_eq!(
        s.expiring_entries, 0,
        "the sweep left expiring records on disk"
    );
    assert_eq!(
        table_entries(dir.path()).len(),
        750,
        "only the plain keys remain"
    );
    assert_eq!(db.scan(None, None, usize::MAX).unwrap().len(), 750);
}

/// Expired records are never promoted (HotRAP's promotion by flush): in a two-tier store
/// with promotion on, a few expiring keys are read from the slow tier into the promotion
/// cache while live, then expire; cold reads then fill the cache until it freezes and the
/// checker promotes what it holds (hotness check off, so it promotes every live record:
/// the control). No entry of an expired key reaches the fast tier, none is left in the
/// promotion cache (a read of it no longer hits the cache), and they read as absent,
/// also after a flush and a full compaction. (Retention and promotion by compaction:
/// `compaction::tests::expired_records_are_rewritten_and_never_retained_or_promoted`.)
#[test]
fn expired_records_are_never_promoted() {
    let fast = tempfile::tempdir().unwrap();
    let slow = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let mut base = common::two_tier_options(slow.path(), 256 * 1024, true);
    base.promotion.by_compaction = false;
    base.promotion.retention = false;
    base.promotion.hotness_check = false;
    let db = Db::open(fast.path(), opts_with(&clock, base)).unwrap();
    let short = T0 + 1_000;
    let doomed = |i: u64| format!("doom{i:03}").into_bytes();
    for k in 0..3000 {
        db.put(common::key(k), vec![b'v'; 200]).unwrap();
    }
    for i in 0..8 {
        db.put_expiring(doomed(i), vec![b'd'; 200], short).unwrap();
    }
    db.compact_range(None, None).unwrap();
    db.wait_for_background().unwrap();
    let on_fast = |pick: &dyn Fn(&[u8]) -> bool| {
        table_entries(fast.path())
            .into_iter()
            .filter(|(k, _)| pick(k))
            .count()
    };
    assert_eq!(
        on_fast(&|k| k.starts_with(b"doom")),
        0,
        "loaded onto the slow tier"
    );
    // Read while live, several times: into the promotion cache (8 KiB: not yet full).
    for _ in 0..3 {
        for i in 0..8 {
            assert!(db.get(doomed(i)).unwrap().is_some());
        }
    }
    clock.set(short);
    for i in 0..8 {
        assert_eq!(
            db.get(doomed(i)).unwrap(),
            None,
            "expired in the promotion cache"
        );
    }
    // Cold reads fill the cache; it freezes and the checker runs.
    let promoted = |db: &Db| db.stats().promotion.promoted_by_flush_bytes;
    let mut k = 0;
    while promoted(&db) == 0 && k < 3000 {
        assert!(db.get(common::key(k)).unwrap().is_some());
        k += 1;
        if k % 50 == 0 {
            db.wait_for_background().unwrap();
        }
    }
    db.wait_for_background().unwrap();
    assert!(
        promoted(&db) > 0,
        "the checker promoted the live records (the control)"
    );
    assert!(on_fast(&|k| k.starts_with(b"key")) > 0);
    assert_eq!(
        on_fast(&|k| k.starts_with(b"doom")),
        0,
        "an expired record was promoted"
    );
    let pc_hits = db.stats().get_sources.promotion_cache;
    for i in 0..8 {
        assert_eq!(db.get(doomed(i)).unwrap(), None);
    }
    assert_eq!(
        db.stats().get_sources.promotion_cache,
        pc_hits,
        "expired records are still in the promotion cache"
    );
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    db.wait_for_background().unwrap();
    assert_eq!(on_fast(&|k| k.starts_with(b"doom")), 0);
    for i in 0..8 {
        assert_eq!(db.get(doomed(i)).unwrap(), None);
    }
}

const CRASH_CHILD_ENV: &str = "TIERKV_EXPIRY_CRASH_CHILD_DIR";

/// The deadline the crash child gives key `i`.
fn crash_deadline(i: u64) -> u64 {
    T0 + 1_000 + i
}

/// The child: synced expiring puts from where the store ends, each acknowledged on stdout.
#[test]
#[ignore = "run by expiring_writes_survive_a_crash as a child process"]
fn expiry_crash_child() {
    use std::io::Write;
    let Ok(dir) = std::env::var(CRASH_CHILD_ENV) else {
        return;
    };
    let clock = Arc::new(ManualClock::new(T0));
    let db = Db::open(&dir, opts_with(&clock, common::tiny_options())).unwrap();
    let mut next = 0;
    while db.get(common::key(next)).unwrap().is_some() {
        next += 1;
    }
    let mut out = std::io::stdout().lock();
    loop {
        db.put_expiring_opt(
            common::key(next),
            vec![b'c'; 300],
            crash_deadline(next),
            &tierkv::WriteOptions { sync: true },
        )
        .unwrap();
        writeln!(out, "ACK {next}").unwrap();
        out.flush().unwrap();
        next += 1;
    }
}

/// Expiry survives a crash like any write (invariant 2): expiring writes acknowledged
/// before a SIGKILL are present after reopen with their deadlines, and expire at them.
#[test]
fn expiring_writes_survive_a_crash() {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut total = 0;
    for round in 0..4 {
        let mut child = Command::new(&exe)
            .args([
                "expiry_crash_child",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CRASH_CHILD_ENV, dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut last = None;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(n) = line.strip_prefix("ACK ") {
                    last = Some(n.trim().parse::<u64>().unwrap());
                }
            }
            last
        });
        std::thread::sleep(std::time::Duration::from_millis(300 + round * 150));
        child.kill().unwrap();
        child.wait().unwrap();
        let Some(last) = reader.join().unwrap() else {
            continue;
        };
        total = last;
        let clock = Arc::new(ManualClock::new(T0));
        let db = Db::open(dir.path(), opts_with(&clock, common::tiny_options())).unwrap();
        for i in 0..=last {
            let e = db.get_entry(common::key(i)).unwrap();
            assert_eq!(
                e.map(|e| e.deadline),
                Some(Some(crash_deadline(i))),
                "round {round}: acknowledged expiring write {i} lost or lost its deadline"
            );
        }
        // They expire at their deadlines: half of them now (the rest are acknowledged,
        // so present, from last / 2 + 1 <= last on).
        if last >= 2 {
            clock.set(crash_deadline(last / 2));
            assert_eq!(db.get(common::key(last / 2)).unwrap(), None);
            assert!(db.get(common::key(last / 2 + 1)).unwrap().is_some());
        }
    }
    assert!(total > 20, "the child made too little progress: {total}");
}

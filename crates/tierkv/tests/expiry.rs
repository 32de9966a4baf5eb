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
        run_model(seed, 1500);
    }
}

fn run_model(seed: u64, steps: usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let open = || Db::open(dir.path(), opts_with(&clock, common::tiny_options())).unwrap();
    let mut db = open();
    let mut model = Model::new();
    let mut snaps: Vec<(tierkv::Snapshot, Model)> = Vec::new();
    let keyspace = 200;
    for step in 0..steps {
        let now = clock.now_ms();
        let k = common::key(rng.gen_range(0..keyspace));
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
                drop(db);
                db = open();
            }
        }
    }
    db.compact_range(None, None).unwrap();
    let now = clock.now_ms();
    assert!(scan_all(&db, &ReadOptions::new()) == live(&model, now));
}

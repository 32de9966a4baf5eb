//! The fast disk's record cache inside a two-tier store (invariant 1): gets of records on
//! the slow tier are served from its copies once their keys were read there twice, while
//! overwrites, deletes, compactions that rewrite the slow tables, snapshot reads and
//! reopens go on. Every get, snapshot get and the final contents match a `BTreeMap` model;
//! each run must have served reads from the cache, so the path under test is exercised.

mod common;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use tierkv::{Db, Options, ReadOptions};

const KEYS: u64 = 3000;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options(slow: &std::path::Path, promotion: bool) -> Options {
    let mut opts = common::two_tier_options(slow, 192 * 1024, promotion);
    // No memory caches: repeated reads of a slow record reach the tables every time.
    opts.cache_size = 0;
    opts.record_cache = tierkv::RecordCacheOptions {
        enabled: true,
        max_bytes: None,
        segment_size: 4096,
    };
    opts
}

/// A skewed key: most reads go to a hundred keys, so they are read again.
fn skewed_key(rng: &mut StdRng) -> Vec<u8> {
    let i = if rng.gen_bool(0.8) {
        rng.gen_range(0..100)
    } else {
        rng.gen_range(0..KEYS)
    };
    common::key(i * 7919 % KEYS)
}

fn value(rng: &mut StdRng, step: usize) -> Vec<u8> {
    let mut v = format!("v{step}-").into_bytes();
    v.resize(rng.gen_range(20..300), b'x');
    v
}

fn run(seed: u64, steps: usize, promotion: bool) -> tierkv::RecordCacheStats {
    let dir = tempfile::tempdir().unwrap();
    let slow = tempfile::tempdir().unwrap();
    let opts = options(slow.path(), promotion);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut db = Db::open(dir.path(), opts.clone()).unwrap();
    let mut model = Model::new();
    for i in 0..KEYS {
        let v = value(&mut rng, 0);
        db.put(common::key(i), &v).unwrap();
        model.insert(common::key(i), v);
    }
    db.flush().unwrap();
    db.wait_for_background().unwrap();
    let mut snapshot: Option<(tierkv::Snapshot, Model)> = None;
    let mut served = 0;
    for step in 1..=steps {
        match rng.gen_range(0..100) {
            0..=69 => {
                let k = skewed_key(&mut rng);
                assert_eq!(
                    db.get(&k).unwrap(),
                    model.get(&k).cloned(),
                    "seed {seed} step {step} get {k:?}"
                );
            }
            70..=81 => {
                let k = skewed_key(&mut rng);
                let v = value(&mut rng, step);
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            82..=85 => {
                let k = skewed_key(&mut rng);
                db.delete(&k).unwrap();
                model.remove(&k);
            }
            86..=90 => match &snapshot {
                Some((snap, old)) => {
                    let k = skewed_key(&mut rng);
                    let ropts = ReadOptions {
                        snapshot: Some(snap.seq()),
                        ..ReadOptions::new()
                    };
                    assert_eq!(
                        db.get_opt(&k, &ropts).unwrap(),
                        old.get(&k).cloned(),
                        "seed {seed} step {step} snapshot get {k:?}"
                    );
                    if rng.gen_bool(0.1) {
                        snapshot = None;
                    }
                }
                None => snapshot = Some((db.snapshot(), model.clone())),
            },
            91..=94 => db.flush().unwrap(),
            95..=97 => {
                let a = common::key(rng.gen_range(0..KEYS));
                let b = common::key(rng.gen_range(0..KEYS));
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                db.compact_range(Some(&lo), Some(&hi)).unwrap();
            }
            _ if rng.gen_bool(0.95) => {
                let k = skewed_key(&mut rng);
                assert_eq!(db.get(&k).unwrap(), model.get(&k).cloned());
            }
            _ => {
                // Reopen: the cache starts empty, snapshots do not survive.
                served += db.stats().record_cache.map_or(0, |r| r.hits);
                snapshot = None;
                drop(db);
                db = Db::open(dir.path(), opts.clone()).unwrap();
            }
        }
    }
    db.wait_for_background().unwrap();
    let got: Model = db
        .scan(None, None, usize::MAX)
        .unwrap()
        .into_iter()
        .collect();
    assert!(got == model, "seed {seed}: final contents differ");
    let mut stats = db.stats().record_cache.expect("the record cache is on");
    stats.hits += served;
    stats
}

#[test]
fn gets_served_from_the_record_cache_match_the_model() {
    let all: Vec<_> = (0..4).map(|seed| run(seed, 6000, seed % 2 == 0)).collect();
    for (seed, stats) in all.iter().enumerate() {
        let floor = if seed % 2 == 0 { 1 } else { 200 };
        assert!(stats.hits >= floor, "seed {seed}: {stats:?}");
    }
}

/// Invariant 1 under concurrency: readers hitting the record cache while a writer
/// overwrites keys, flushes and compacts (segments sealed, written and evicted by the
/// readers themselves) never see another key's value nor a version older than one they
/// saw before for the same key.
#[test]
fn concurrent_readers_never_go_back_in_time_through_the_record_cache() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let slow = tempfile::tempdir().unwrap();
    let mut opts = options(slow.path(), false);
    opts.record_cache.max_bytes = Some(24 * 1024);
    let db = Arc::new(Db::open(dir.path(), opts).unwrap());
    let val = |i: u64, version: u64| {
        let mut v = format!("{i}:{version}:").into_bytes();
        v.resize(120, b'x');
        v
    };
    for i in 0..KEYS {
        db.put(common::key(i), val(i, 0)).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_background().unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..4u64)
        .map(|t| {
            let (db, done) = (db.clone(), done.clone());
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(t);
                let mut seen = vec![0u64; KEYS as usize];
                while !done.load(Ordering::Relaxed) {
                    let i = if rng.gen_bool(0.8) {
                        rng.gen_range(0..200)
                    } else {
                        rng.gen_range(0..KEYS)
                    };
                    let v = db.get(common::key(i)).unwrap().expect("never deleted");
                    let text = String::from_utf8_lossy(&v);
                    let mut parts = text.split(':');
                    let key: u64 = parts.next().unwrap().parse().unwrap();
                    let version: u64 = parts.next().unwrap().parse().unwrap();
                    assert_eq!(key, i, "another key's value");
                    assert!(version >= seen[i as usize], "key {i} went back in time");
                    seen[i as usize] = version;
                }
            })
        })
        .collect();
    let mut rng = StdRng::seed_from_u64(99);
    for version in 1..=3000u64 {
        let i = if rng.gen_bool(0.5) {
            rng.gen_range(0..200)
        } else {
            rng.gen_range(0..KEYS)
        };
        db.put(common::key(i), val(i, version)).unwrap();
        if version % 500 == 0 {
            db.compact_range(None, None).unwrap();
        }
    }
    done.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    let rc = db.stats().record_cache.unwrap();
    assert!(rc.hits > 0 && rc.evicted > 0, "{rc:?}");
}

//! Concurrency stress: 4 writers and 4 readers with gets, snapshots and iterators while
//! flushes and compactions run.
//!
//! Checks invariant 1 (docs/DESIGN.md): a read never returns a version older than
//! one whose write was acknowledged before the read began, a snapshot's reads never change,
//! and an iterator never shows a version older than what was acknowledged before it opened.

mod common;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tierkv::{Db, ReadOptions};

const WRITERS: u64 = 4;
const KEYS_PER_WRITER: u64 = 50;

fn key(w: u64, k: u64) -> Vec<u8> {
    format!("w{w}-k{k:04}").into_bytes()
}

fn encode(version: u64) -> Vec<u8> {
    // Padding makes flushes and compactions frequent with the tiny options.
    let mut v = format!("{version:012}").into_bytes();
    v.resize(200, b'.');
    v
}

fn decode(v: &[u8]) -> u64 {
    std::str::from_utf8(&v[..12]).unwrap().parse().unwrap()
}

#[test]
fn readers_never_see_versions_go_backwards() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), common::tiny_options()).unwrap());
    // acked[w * KEYS + k] = newest version whose put has returned.
    let acked: Arc<Vec<AtomicU64>> = Arc::new(
        (0..WRITERS * KEYS_PER_WRITER)
            .map(|_| AtomicU64::new(0))
            .collect(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + Duration::from_secs(6);
    let mut handles = Vec::new();
    for w in 0..WRITERS {
        let (db, acked, stop) = (db.clone(), acked.clone(), stop.clone());
        handles.push(std::thread::spawn(move || {
            let mut rng = StdRng::seed_from_u64(w);
            let mut version = 0u64;
            while !stop.load(Ordering::Relaxed) {
                version += 1;
                let k = rng.gen_range(0..KEYS_PER_WRITER);
                db.put(key(w, k), encode(version)).unwrap();
                acked[(w * KEYS_PER_WRITER + k) as usize].store(version, Ordering::SeqCst);
            }
            version
        }));
    }
    for r in 0..4u64 {
        let (db, acked, stop) = (db.clone(), acked.clone(), stop.clone());
        handles.push(std::thread::spawn(move || {
            let mut rng = StdRng::seed_from_u64(100 + r);
            let mut checks = 0u64;
            while !stop.load(Ordering::Relaxed) {
                match rng.gen_range(0..10) {
                    0..=5 => {
                        let (w, k) = (rng.gen_range(0..WRITERS), rng.gen_range(0..KEYS_PER_WRITER));
                        let floor =
                            acked[(w * KEYS_PER_WRITER + k) as usize].load(Ordering::SeqCst);
                        let got = db.get(key(w, k)).unwrap().map(|v| decode(&v)).unwrap_or(0);
                        assert!(
                            got >= floor,
                            "get {w}/{k}: version {got} older than acknowledged {floor}"
                        );
                    }
                    6..=7 => {
                        let snap = db.snapshot();
                        let ropts = ReadOptions {
                            snapshot: Some(snap.seq()),
                            ..ReadOptions::new()
                        };
                        let (w, k) = (rng.gen_range(0..WRITERS), rng.gen_range(0..KEYS_PER_WRITER));
                        let first = db.get_opt(key(w, k), &ropts).unwrap();
                        std::thread::sleep(Duration::from_millis(rng.gen_range(0..5)));
                        let again = db.get_opt(key(w, k), &ropts).unwrap();
                        assert_eq!(first, again, "a snapshot read changed");
                    }
                    _ => {
                        let floors: Vec<u64> =
                            acked.iter().map(|a| a.load(Ordering::SeqCst)).collect();
                        let mut it = db.iter().unwrap();
                        let forward = rng.gen_bool(0.5);
                        if forward {
                            it.seek_to_first().unwrap();
                        } else {
                            it.seek_to_last().unwrap();
                        }
                        let mut last: Option<Vec<u8>> = None;
                        while it.valid() {
                            let k = it.key().to_vec();
                            if let Some(l) = &last {
                                let ordered = if forward { &k > l } else { &k < l };
                                assert!(ordered, "iterator out of order: {l:?} then {k:?}");
                            }
                            let s = std::str::from_utf8(&k).unwrap();
                            let w: u64 = s[1..2].parse().unwrap();
                            let kk: u64 = s[4..].parse().unwrap();
                            let got = decode(it.value());
                            let floor = floors[(w * KEYS_PER_WRITER + kk) as usize];
                            assert!(
                                got >= floor,
                                "iterator {s}: version {got} older than acknowledged {floor}"
                            );
                            last = Some(k);
                            if forward {
                                it.next().unwrap()
                            } else {
                                it.prev().unwrap()
                            }
                        }
                    }
                }
                checks += 1;
            }
            checks
        }));
    }
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    let mut total = 0;
    for h in handles {
        total += h
            .join()
            .expect("a thread panicked: see its assertion above");
    }
    assert!(total > 1000, "too little work done: {total}");
    let stats = db.stats();
    assert!(
        stats.flushes > 0 && stats.compactions > 0,
        "the stress must overlap flushes and compactions: {stats:?}"
    );
}

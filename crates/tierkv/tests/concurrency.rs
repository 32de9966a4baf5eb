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

/// The writer queue hands off correctly (`db/write.rs`: each waiting writer is unparked
/// only by the leader that answers its write or makes it the head): 16 threads queue
/// single writes, sync writes (which a non-sync leader's group never takes, so groups end
/// early and the head changes often) and several writes at once (`write_many_if_unchanged`,
/// whose caller may lead, follow and lead again), over flushes. Every write gets its
/// outcome (a lost wakeup would leave a writer parked forever: the watchdog fails the test
/// instead of hanging), none is lost (each key reads back the last value its thread
/// acknowledged, also after a reopen), and the counters agree.
#[test]
fn every_queued_writer_gets_its_outcome_and_no_write_is_lost() {
    const THREADS: u64 = 16;
    const ROUNDS: u64 = 150;
    const KEYS: u64 = 20;
    let dir = tempfile::tempdir().unwrap();
    let opts = common::tiny_options();
    let db = Arc::new(Db::open(dir.path(), opts.clone()).unwrap());
    let (done_tx, done_rx) = std::sync::mpsc::channel::<u64>();
    for t in 0..THREADS {
        let (db, done_tx) = (db.clone(), done_tx.clone());
        std::thread::spawn(move || {
            let mut rng = StdRng::seed_from_u64(1000 + t);
            let mut writes = 0u64;
            for round in 1..=ROUNDS {
                let v = encode(round);
                match rng.gen_range(0..4) {
                    0 => db.put(key(t, rng.gen_range(0..KEYS)), &v).unwrap(),
                    1 => {
                        let mut b = tierkv::WriteBatch::new();
                        b.put(key(t, rng.gen_range(0..KEYS)), &v);
                        db.write_opt(b, &tierkv::WriteOptions { sync: true })
                            .unwrap();
                    }
                    _ => {
                        // Several writes of this thread queued together; unconditional
                        // ones (no keys) always apply.
                        let many = (0..rng.gen_range(2..5))
                            .map(|_| {
                                let mut batch = tierkv::WriteBatch::new();
                                batch.put(key(t, rng.gen_range(0..KEYS)), &v);
                                tierkv::ConditionalWrite {
                                    batch,
                                    keys: Vec::new(),
                                    since: 0,
                                }
                            })
                            .collect::<Vec<_>>();
                        let n = many.len() as u64;
                        let outcomes = db
                            .write_many_if_unchanged(many, &tierkv::WriteOptions::default())
                            .unwrap();
                        assert_eq!(outcomes.len() as u64, n, "one outcome per write");
                        assert!(outcomes.into_iter().all(|o| o.unwrap()));
                        writes += n - 1;
                    }
                }
                writes += 1;
            }
            // Closed before reporting, so the reopen below finds the store unlocked.
            drop(db);
            done_tx.send(writes).unwrap();
        });
    }
    drop(done_tx);
    let mut writes = 0;
    for _ in 0..THREADS {
        writes += done_rx
            .recv_timeout(Duration::from_secs(300))
            .expect("a writer never got its outcome (parked forever?) or panicked");
    }
    let stats = db.stats();
    assert_eq!(
        stats.write_batches, writes,
        "every queued write committed once"
    );
    assert!(stats.write_groups < writes, "writes never shared a group");
    // Each thread wrote its keys with increasing versions: a key holds the version of its
    // thread's last write of it, which is at most ROUNDS, and the last round wrote one.
    let check = |db: &Db| {
        for t in 0..THREADS {
            let newest = (0..KEYS)
                .filter_map(|k| db.get(key(t, k)).unwrap().map(|v| decode(&v)))
                .max();
            assert_eq!(newest, Some(ROUNDS), "thread {t}'s last write is missing");
        }
    };
    check(&db);
    drop(db);
    check(&Db::open(dir.path(), opts).unwrap());
}

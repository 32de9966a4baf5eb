//! Atomic read-modify-write (F2, docs/DESIGN.md).
//!
//! `concurrent_increments_never_lose_an_update` checks invariant 1 for read-modify-write:
//! 8 threads increment counters over skewed keys (so the same keys race constantly) while
//! plain puts to other keys force memtable switches, flushes, compactions into the slow
//! tier and promotions; after a reopen every counter equals the number of increments
//! applied to it. `concurrent_transfers_conserve_the_total` checks the multi-key form
//! (`Db::update_many`): transfers between random account pairs, each reading two keys and
//! writing both in one conditioned batch, never create or lose a unit.

mod common;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tierkv::Db;

fn counter_key(i: u64) -> Vec<u8> {
    format!("counter{i:04}").into_bytes()
}

fn parse(v: Option<&[u8]>) -> u64 {
    v.map(|v| {
        std::str::from_utf8(&v[..20])
            .expect("utf8")
            .parse()
            .expect("number")
    })
    .unwrap_or(0)
}

fn incr(old: Option<&[u8]>) -> Option<Vec<u8>> {
    // Padded so counters take space and move through flushes and compactions too.
    let mut v = format!("{:020}", parse(old) + 1).into_bytes();
    v.resize(120, b'.');
    Some(v)
}

/// Every counter holds exactly the increments applied to it.
fn check_counters(db: &Db, applied: &[AtomicU64]) {
    for (k, applied) in applied.iter().enumerate() {
        let got = parse(db.get(counter_key(k as u64)).unwrap().as_deref());
        assert_eq!(got, applied.load(Ordering::Relaxed), "counter {k}");
    }
}

#[test]
fn concurrent_increments_never_lose_an_update() {
    const THREADS: u64 = 8;
    const PER_THREAD: u64 = 1500;
    const COUNTERS: u64 = 64;
    let fast = tempfile::tempdir().unwrap();
    let slow = tempfile::tempdir().unwrap();
    let opts = common::two_tier_options(slow.path(), 192 * 1024, true);
    let db = Arc::new(Db::open(fast.path(), opts.clone()).unwrap());
    let applied: Arc<Vec<AtomicU64>> = Arc::new((0..COUNTERS).map(|_| AtomicU64::new(0)).collect());
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (db, applied) = (db.clone(), applied.clone());
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(t);
                for i in 0..PER_THREAD {
                    // Skewed: half the increments go to 4 counters.
                    let k = if rng.gen_bool(0.5) {
                        rng.gen_range(0..4)
                    } else {
                        rng.gen_range(0..COUNTERS)
                    };
                    let new = db.rmw(counter_key(k), incr).unwrap();
                    assert!(parse(new.as_deref()) >= 1);
                    applied[k as usize].fetch_add(1, Ordering::Relaxed);
                    // Filler writes and reads keep flushes, compactions and promotion busy.
                    let filler = format!("filler{:06}", (t * PER_THREAD + i) % 4000);
                    db.put(filler.as_bytes(), [b'f'; 300]).unwrap();
                    if i % 3 == 0 {
                        let _ = db
                            .get(format!("filler{:06}", rng.gen_range(0..4000)))
                            .unwrap();
                    }
                }
            });
        }
    });
    let check = |db: &Db| check_counters(db, &applied);
    check(&db);
    let s = db.stats();
    assert_eq!(s.rmws, THREADS * PER_THREAD);
    assert!(
        s.flushes > 0 && s.compactions > 0,
        "{} flushes {} compactions",
        s.flushes,
        s.compactions
    );
    eprintln!("{} retries of {} read-modify-writes", s.rmw_retries, s.rmws);
    drop(db);
    let db = Db::open(fast.path(), opts).unwrap();
    check(&db);
    // Keep writes nothing and returns the current value; Delete removes the key.
    let before = db.stats().puts;
    let kept = db.update(counter_key(1), |_| tierkv::Update::Keep).unwrap();
    assert_eq!(parse(kept.as_deref()), applied[1].load(Ordering::Relaxed));
    assert_eq!(db.stats().puts, before, "Keep wrote something");
    // Deleting through rmw works too.
    assert_eq!(db.rmw(counter_key(0), |_| None).unwrap(), None);
    assert_eq!(db.get(counter_key(0)).unwrap(), None);
}

/// `Db::merge` with the counter operator: concurrent merges from 8 threads never lose an
/// update (invariant 1 for read-modify-write); a rejected operand leaves the key unchanged.
#[test]
fn concurrent_merges_add_up_and_rejections_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let opts = tierkv::Options {
        merge_operator: Some(Arc::new(tierkv::merge::AddI64)),
        ..common::tiny_options()
    };
    let db = Arc::new(Db::open(dir.path(), opts.clone()).unwrap());
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let db = db.clone();
            s.spawn(move || {
                for i in 0..500u64 {
                    db.merge(format!("c{}", i % 5), "2").unwrap();
                    db.put(format!("f{t}-{i}"), [b'x'; 200]).unwrap();
                }
            });
        }
    });
    for c in 0..5 {
        assert_eq!(db.get(format!("c{c}")).unwrap().unwrap(), b"1600");
    }
    db.put("text", "abc").unwrap();
    let err = db.merge("text", "1").unwrap_err();
    assert!(err.to_string().contains("not a decimal"), "{err}");
    assert_eq!(db.get("text").unwrap().unwrap(), b"abc");
    drop(db);
    let db = Db::open(dir.path(), opts).unwrap();
    assert_eq!(db.merge("c0", "-600").unwrap(), b"1000");
    let plain = tempfile::tempdir().unwrap();
    let db = Db::open(plain.path(), common::tiny_options()).unwrap();
    assert!(db.merge("k", "1").is_err(), "no operator configured");
}

/// `Db::update_many`: 8 threads move units between random pairs of 16 accounts, each move
/// reading both balances and writing both in one batch conditioned on neither having
/// changed; filler writes force flushes and compactions meanwhile. No unit is created or
/// lost (invariant 1 for multi-key read-modify-write), a refused move (`None`) writes
/// nothing, and a batch may write keys it did not read.
#[test]
fn concurrent_transfers_conserve_the_total() {
    const ACCOUNTS: u64 = 16;
    const THREADS: u64 = 8;
    const PER_THREAD: u64 = 400;
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), common::tiny_options()).unwrap());
    let acct = |i: u64| format!("acct{i:02}").into_bytes();
    let bal = |e: &Option<tierkv::Entry>| -> i64 {
        e.as_ref()
            .map(|e| std::str::from_utf8(&e.value).unwrap().parse().unwrap())
            .unwrap_or(0)
    };
    for i in 0..ACCOUNTS {
        db.put(acct(i), b"100").unwrap();
    }
    let wopts = tierkv::WriteOptions::default();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let db = db.clone();
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(100 + t);
                for i in 0..PER_THREAD {
                    let a = rng.gen_range(0..ACCOUNTS);
                    let b = (a + rng.gen_range(1..ACCOUNTS)) % ACCOUNTS;
                    let (ka, kb) = (acct(a), acct(b));
                    db.update_many(&[&ka, &kb], &wopts, |cur| {
                        let (x, y) = (bal(&cur[0]), bal(&cur[1]));
                        if x == 0 {
                            return None;
                        }
                        let mut batch = tierkv::WriteBatch::new();
                        batch.put(&ka, (x - 1).to_string());
                        batch.put(&kb, (y + 1).to_string());
                        batch.put(format!("log{t}"), i.to_string());
                        Some(batch)
                    })
                    .unwrap();
                    db.put(
                        format!("filler{:05}", (t * PER_THREAD + i) % 3000),
                        [b'f'; 200],
                    )
                    .unwrap();
                }
            });
        }
    });
    let total: i64 = (0..ACCOUNTS)
        .map(|i| bal(&db.get_entry(acct(i)).unwrap()))
        .sum();
    assert_eq!(total, 100 * ACCOUNTS as i64, "units created or lost");
    let s = db.stats();
    assert!(s.flushes > 0, "no flush ran during the transfers");
    eprintln!("{} retries of {} read-modify-writes", s.rmw_retries, s.rmws);
    let before = db.stats().puts;
    let applied = db.update_many(&[&acct(0)], &wopts, |_| None).unwrap();
    assert!(!applied);
    assert_eq!(db.stats().puts, before, "a refused batch wrote something");
}

/// Optimistic writes whose reads were made elsewhere (`Db::latest_sequence` before a
/// batched read, then `Db::write_many_if_unchanged`): 4 threads increment skewed counters
/// in groups of 16 while 2 others increment the same counters with `Db::rmw` and write
/// filler that forces flushes and compactions; a declined write is read again and retried.
/// Invariant 1 for read-modify-write: every counter ends at exactly the increments applied
/// to it (a write applied over a newer version would lose one), also after a reopen.
#[test]
fn grouped_optimistic_increments_never_lose_an_update() {
    const COUNTERS: u64 = 32;
    const ROUNDS: u64 = 150;
    const GROUP: u64 = 16;
    let fast = tempfile::tempdir().unwrap();
    let slow = tempfile::tempdir().unwrap();
    let opts = common::two_tier_options(slow.path(), 192 * 1024, true);
    let db = Arc::new(Db::open(fast.path(), opts.clone()).unwrap());
    let applied: Arc<Vec<AtomicU64>> = Arc::new((0..COUNTERS).map(|_| AtomicU64::new(0)).collect());
    let declined = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let (db, applied, declined) = (db.clone(), applied.clone(), &declined);
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(100 + t);
                for _ in 0..ROUNDS {
                    // Distinct keys within a group (a key twice would decline by rule).
                    let mut keys: Vec<u64> = Vec::new();
                    while keys.len() < GROUP as usize / 2 {
                        let k = if rng.gen_bool(0.5) {
                            rng.gen_range(0..4)
                        } else {
                            rng.gen_range(0..COUNTERS)
                        };
                        if !keys.contains(&k) {
                            keys.push(k);
                        }
                    }
                    while !keys.is_empty() {
                        let since = db.latest_sequence();
                        let names: Vec<Vec<u8>> = keys.iter().map(|&k| counter_key(k)).collect();
                        let olds = db.multi_get(&names);
                        let writes = names
                            .iter()
                            .zip(olds)
                            .map(|(name, old)| {
                                let mut batch = tierkv::WriteBatch::new();
                                batch.put(name, incr(old.unwrap().as_deref()).unwrap());
                                tierkv::ConditionalWrite {
                                    batch,
                                    keys: vec![name.clone()],
                                    since,
                                }
                            })
                            .collect();
                        let outcomes = db
                            .write_many_if_unchanged(writes, &tierkv::WriteOptions::default())
                            .unwrap();
                        let mut retry = Vec::new();
                        for (&k, outcome) in keys.iter().zip(outcomes) {
                            if outcome.unwrap() {
                                applied[k as usize].fetch_add(1, Ordering::Relaxed);
                            } else {
                                declined.fetch_add(1, Ordering::Relaxed);
                                retry.push(k);
                            }
                        }
                        keys = retry;
                    }
                }
            });
        }
        for t in 0..2u64 {
            let (db, applied) = (db.clone(), applied.clone());
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(200 + t);
                for i in 0..ROUNDS * GROUP / 2 {
                    let k = rng.gen_range(0..4);
                    db.rmw(counter_key(k), incr).unwrap();
                    applied[k as usize].fetch_add(1, Ordering::Relaxed);
                    let filler = format!("filler{:06}", (t * 10_000 + i) % 4000);
                    db.put(filler.as_bytes(), [b'f'; 300]).unwrap();
                }
            });
        }
    });
    let check = |db: &Db| check_counters(db, &applied);
    check(&db);
    let s = db.stats();
    assert!(s.flushes > 0 && s.compactions > 0, "{s:?}");
    assert!(
        declined.load(Ordering::Relaxed) > 0,
        "racing writers never made an optimistic write decline"
    );
    drop(db);
    check(&Db::open(fast.path(), opts).unwrap());
}

/// When `Db::write_if_unchanged` applies and when it declines: unchanged keys apply; a
/// newer write of a key, an earlier write of the same call to the key, or a write after
/// `since` that was flushed (the memtables no longer hold every newer write) decline; an
/// empty batch applies.
#[test]
fn optimistic_write_declines_exactly_when_it_cannot_be_sure() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), tierkv::Options::default()).unwrap();
    let wo = tierkv::WriteOptions::default();
    let put = |k: &str, v: &str| {
        let mut b = tierkv::WriteBatch::new();
        b.put(k, v);
        b
    };
    db.put("a", "1").unwrap();
    let since = db.latest_sequence();
    assert!(db
        .write_if_unchanged(put("a", "2"), &[b"a"], since, &wo)
        .unwrap());
    assert_eq!(db.get("a").unwrap().as_deref(), Some(&b"2"[..]));
    // "a" changed after `since` (by the write above).
    assert!(!db
        .write_if_unchanged(put("a", "3"), &[b"a"], since, &wo)
        .unwrap());
    assert_eq!(db.get("a").unwrap().as_deref(), Some(&b"2"[..]));
    // Another key's write does not matter.
    let since = db.latest_sequence();
    db.put("b", "x").unwrap();
    assert!(db
        .write_if_unchanged(put("a", "4"), &[b"a"], since, &wo)
        .unwrap());
    // In one call: the second write of "a" declines, a write of "c" applies.
    let since = db.latest_sequence();
    let w = |b, k: &str| tierkv::ConditionalWrite {
        batch: b,
        keys: vec![k.as_bytes().to_vec()],
        since,
    };
    let outcomes = db
        .write_many_if_unchanged(
            vec![
                w(put("a", "5"), "a"),
                w(put("a", "6"), "a"),
                w(tierkv::WriteBatch::new(), "a"),
                w(put("c", "7"), "c"),
            ],
            &wo,
        )
        .unwrap();
    let outcomes: Vec<bool> = outcomes.into_iter().map(|o| o.unwrap()).collect();
    assert_eq!(outcomes, [true, false, true, true]);
    assert_eq!(db.get("a").unwrap().as_deref(), Some(&b"5"[..]));
    // A flush of nothing newer than `since` changes nothing; a write after `since` that
    // was flushed since makes it decline although "a" did not change.
    let since = db.latest_sequence();
    db.flush().unwrap();
    db.put("d", "y").unwrap();
    assert!(db
        .write_if_unchanged(put("a", "7"), &[b"a"], since, &wo)
        .unwrap());
    let since = db.latest_sequence();
    db.put("d", "z").unwrap();
    db.flush().unwrap();
    db.put("e", "z").unwrap();
    assert!(!db
        .write_if_unchanged(put("a", "8"), &[b"a"], since, &wo)
        .unwrap());
    assert_eq!(db.get("a").unwrap().as_deref(), Some(&b"7"[..]));
    assert!(db
        .write_if_unchanged(put("a", "8"), &[b"a"], db.latest_sequence(), &wo)
        .unwrap());
    assert_eq!(db.get("a").unwrap().as_deref(), Some(&b"8"[..]));
}

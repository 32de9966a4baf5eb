//! `Db::multi_get`, the batched point read: the same answers as repeated `get` (invariant 1,
//! reads see one consistent state: a batch is read at one sequence number), per-key errors
//! under injected read faults (invariant 3: an I/O error is reported for the key that
//! needed the failing file, never turned into wrong data or another key's failure), and no
//! hang while the reader pool runs the disk reads; an expired key is absent, as from `get`.
//! Each test runs on both read paths ([`ReadIo::Threads`]: the reader pool; and
//! [`ReadIo::Uring`]: the caller's thread submitting each round's block reads together).

mod common;

use common::{key, tiny_options, two_tier_options};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tierkv::env::{FaultError, FaultInjector, FaultOp, FaultRule, Trigger};
use tierkv::{Db, Error, ManualClock, Options, ReadIo, ReadOptions, Tier, WriteBatch};

/// The io_uring read path. This machine's kernel allows io_uring, so the tests ask for it
/// outright (opening fails if it is unavailable, instead of quietly testing the pool).
const URING: ReadIo = ReadIo::Uring;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn value(i: u64, version: u64) -> Vec<u8> {
    let mut v = format!("v{version}-{i}-").into_bytes();
    v.resize(120 + (i % 7) as usize * 30, b'x');
    v
}

/// A random batch over `0..space`: present, absent, deleted and repeated keys alike.
fn random_batch(rng: &mut StdRng, space: u64) -> Vec<Vec<u8>> {
    let len = rng.gen_range(1..=40);
    let mut batch: Vec<Vec<u8>> = (0..len).map(|_| key(rng.gen_range(0..space))).collect();
    if len > 2 && rng.gen_bool(0.5) {
        // A key twice in one batch.
        let dup = batch[rng.gen_range(0..len)].clone();
        batch.push(dup);
    }
    batch
}

/// `multi_get` at `ropts` answers every key as `model` holds it, and as `get` does.
fn check_batch(db: &Db, batch: &[Vec<u8>], ropts: &ReadOptions, model: &Model, what: &str) {
    let answers = db.multi_get_opt(batch, ropts);
    assert_eq!(answers.len(), batch.len(), "{what}: one answer per key");
    for (k, answer) in batch.iter().zip(answers) {
        let answer = answer.unwrap_or_else(|e| panic!("{what}: {k:?} failed: {e}"));
        assert_eq!(
            answer.as_ref(),
            model.get(k),
            "{what}: multi_get of {:?} disagrees with the model",
            String::from_utf8_lossy(k)
        );
        let single = db.get_opt(k, ropts).unwrap();
        assert_eq!(
            answer, single,
            "{what}: multi_get and get disagree on {k:?}"
        );
    }
}

/// Random batches against a BTreeMap model on a two-tier store with promotion on (keys in
/// memtables, on both tiers and in the promotion cache), with snapshots, flushes and
/// compactions between batches; each key counts as one get.
fn model_run(read_parallelism: usize, read_io: ReadIo, seed: u64) {
    let fast = tempfile::tempdir().unwrap();
    let slow = tempfile::tempdir().unwrap();
    let opts = Options {
        read_parallelism,
        read_io,
        ..two_tier_options(slow.path(), 192 * 1024, true)
    };
    let db = Db::open(fast.path(), opts).unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let space = 3000;
    let mut model = Model::new();
    for i in 0..space {
        if i % 3 != 2 {
            db.put(key(i), value(i, 0)).unwrap();
            model.insert(key(i), value(i, 0));
        }
    }
    db.flush().unwrap();
    db.wait_for_background().unwrap();
    let mut snapshots: Vec<(tierkv::Snapshot, Model)> = Vec::new();
    let mut keys_read = 0u64;
    let gets_before = db.stats().gets;
    for round in 0..300u64 {
        // Some writes: updates, deletes, and now and then a flush or a compaction.
        for _ in 0..rng.gen_range(0..30) {
            let i = rng.gen_range(0..space);
            if rng.gen_bool(0.25) {
                db.delete(key(i)).unwrap();
                model.remove(&key(i));
            } else {
                db.put(key(i), value(i, round + 1)).unwrap();
                model.insert(key(i), value(i, round + 1));
            }
        }
        match rng.gen_range(0..20) {
            0 => db.flush().unwrap(),
            1 => db.compact_range(None, None).unwrap(),
            2 => snapshots.push((db.snapshot(), model.clone())),
            3 if !snapshots.is_empty() => {
                snapshots.remove(rng.gen_range(0..snapshots.len()));
            }
            _ => {}
        }
        // Hot keys are read again and again so that some are promoted.
        let batch = if rng.gen_bool(0.3) {
            (0..32).map(|_| key(rng.gen_range(0..60))).collect()
        } else {
            random_batch(&mut rng, space + 200)
        };
        check_batch(&db, &batch, &ReadOptions::new(), &model, "latest");
        keys_read += batch.len() as u64 * 2;
        for (snap, snap_model) in &snapshots {
            let batch = random_batch(&mut rng, space + 200);
            let ropts = ReadOptions {
                snapshot: Some(snap.seq()),
                ..ReadOptions::new()
            };
            check_batch(&db, &batch, &ropts, snap_model, "snapshot");
            keys_read += batch.len() as u64 * 2;
        }
    }
    let stats = db.stats();
    assert_eq!(
        stats.gets - gets_before,
        keys_read,
        "each key of a batch counts as one get"
    );
    let s = &stats.get_sources;
    assert!(s.slow > 0, "no read reached the slow tier: {s:?}");
    assert!(s.fast > 0, "no read reached the fast tier: {s:?}");
    assert!(
        s.promotion_cache > 0 && stats.promotion.promoted_by_flush_bytes > 0,
        "no read was answered by the promotion cache, or nothing was promoted: {s:?} {:?}",
        stats.promotion
    );
    assert!(
        s.kv_cache > 0 && s.kp_cache > 0,
        "the point caches answered nothing: {s:?}"
    );
}

#[test]
fn multi_get_equals_repeated_get_and_the_model_on_both_tiers_with_snapshots() {
    model_run(16, ReadIo::Threads, 7);
}

#[test]
fn multi_get_with_a_pool_of_one_runs_inline_and_equals_the_model() {
    model_run(1, ReadIo::Threads, 8);
}

#[test]
fn multi_get_through_io_uring_equals_repeated_get_and_the_model() {
    model_run(16, URING, 7);
    model_run(1, URING, 9);
}

/// Expiry as `get` has it: a key whose deadline has passed is absent from a batch (and
/// hides its older version) while a live one, expiring or not, is present, in the
/// memtable and after a flush (where the batch's table reads run on the reader pool).
#[test]
fn an_expired_key_is_absent_from_a_batch_and_a_live_one_present() {
    an_expired_key_is_absent_from_a_batch_and_a_live_one_present_with(ReadIo::Threads);
}

#[test]
fn an_expired_key_is_absent_from_a_batch_and_a_live_one_present_through_io_uring() {
    an_expired_key_is_absent_from_a_batch_and_a_live_one_present_with(URING);
}

fn an_expired_key_is_absent_from_a_batch_and_a_live_one_present_with(read_io: ReadIo) {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let opts = Options {
        clock: clock.clone(),
        read_parallelism: 4,
        read_io,
        ..tiny_options()
    };
    let db = Db::open(dir.path(), opts).unwrap();
    let keys: Vec<&[u8]> = vec![b"expired", b"live", b"plain", b"absent"];
    for flush in [false, true] {
        // The clock only moves forward: the second round starts later.
        let t0 = clock.now_ms();
        db.put(b"expired", b"old").unwrap();
        db.flush().unwrap();
        db.put_expiring(b"expired", b"e", t0 + 100).unwrap();
        db.put_expiring(b"live", b"l", t0 + 1000).unwrap();
        db.put(b"plain", b"p").unwrap();
        if flush {
            db.flush().unwrap();
        }
        clock.set(t0 + 100);
        let values: Vec<Option<Vec<u8>>> = db
            .multi_get(&keys)
            .into_iter()
            .map(|a| a.unwrap())
            .collect();
        assert_eq!(
            values,
            vec![None, Some(b"l".to_vec()), Some(b"p".to_vec()), None],
            "flush={flush}"
        );
        for (k, v) in keys.iter().zip(&values) {
            assert_eq!(&db.get(k).unwrap(), v, "flush={flush}: get agrees on {k:?}");
        }
        clock.set(t0 + 1000);
        let values: Vec<Option<Vec<u8>>> = db
            .multi_get(&keys)
            .into_iter()
            .map(|a| a.unwrap())
            .collect();
        assert_eq!(
            values,
            vec![None, None, Some(b"p".to_vec()), None],
            "flush={flush}"
        );
    }
}

#[test]
fn a_batch_never_mixes_two_snapshots_under_writers_and_compactions() {
    a_batch_never_mixes_two_snapshots_under_writers_and_compactions_with(ReadIo::Threads);
}

#[test]
fn a_batch_never_mixes_two_snapshots_under_writers_and_compactions_through_io_uring() {
    a_batch_never_mixes_two_snapshots_under_writers_and_compactions_with(URING);
}

fn a_batch_never_mixes_two_snapshots_under_writers_and_compactions_with(read_io: ReadIo) {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(
        Db::open(
            dir.path(),
            Options {
                read_io,
                ..tiny_options()
            },
        )
        .unwrap(),
    );
    // Static keys live in the tables so the batch's pool reads run while writers go on.
    let statics = 2000u64;
    for i in 0..statics {
        db.put(key(i), value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    // A group of keys always written together, with one version each time.
    let group: Vec<Vec<u8>> = (0..6).map(|g| format!("group{g}").into_bytes()).collect();
    let mut b = WriteBatch::new();
    for k in &group {
        b.put(k, b"0");
    }
    db.write(b).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    {
        let (db, stop, group) = (db.clone(), stop.clone(), group.clone());
        threads.push(std::thread::spawn(move || {
            let mut version = 0u64;
            while !stop.load(Ordering::Relaxed) {
                version += 1;
                let mut b = WriteBatch::new();
                for k in &group {
                    b.put(k, version.to_string());
                }
                // Filler so that memtables switch and flush all the time.
                b.put(format!("fill{}", version % 500), vec![b'f'; 300]);
                db.write(b).unwrap();
            }
        }));
    }
    {
        let (db, stop) = (db.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                db.compact_range(None, None).unwrap();
                std::thread::sleep(Duration::from_millis(20));
            }
        }));
    }
    let mut rng = StdRng::seed_from_u64(3);
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut batches = 0;
    let mut versions_seen = std::collections::BTreeSet::new();
    while Instant::now() < deadline {
        let mut batch: Vec<Vec<u8>> = (0..24).map(|_| key(rng.gen_range(0..statics))).collect();
        // The group's keys spread among the static ones.
        for (n, k) in group.iter().enumerate() {
            batch.insert(n * 4, k.clone());
        }
        let answers = db.multi_get(&batch);
        let mut group_values = Vec::new();
        for (k, a) in batch.iter().zip(answers) {
            let a = a.unwrap();
            if group.contains(k) {
                group_values.push(a.expect("a group key is always present"));
            } else {
                let i: u64 = std::str::from_utf8(&k[3..]).unwrap().parse().unwrap();
                assert_eq!(a, Some(value(i, 0)), "static key {i}");
            }
        }
        assert!(
            group_values.iter().all(|v| v == &group_values[0]),
            "one batch saw two versions of the group: {:?}",
            group_values
                .iter()
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .collect::<Vec<_>>()
        );
        versions_seen.insert(group_values[0].clone());
        batches += 1;
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    assert!(batches > 10, "only {batches} batches ran");
    assert!(
        versions_seen.len() > 2,
        "the writers never raced the reads ({} versions seen)",
        versions_seen.len()
    );
    assert!(db.stats().flushes > 1, "no flush raced the reads");
}

/// Runs `f` on a thread and fails the test if it does not return within `limit` (a hang
/// would otherwise stall the suite instead of failing it).
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit)
        .expect("multi_get did not return in time: it hangs")
}

#[test]
fn injected_read_errors_fail_exactly_the_keys_that_need_the_failing_files() {
    injected_read_errors_fail_exactly_the_keys_that_need_the_failing_files_with(ReadIo::Threads);
}

#[test]
fn injected_read_errors_fail_exactly_the_keys_that_need_the_failing_files_through_io_uring() {
    injected_read_errors_fail_exactly_the_keys_that_need_the_failing_files_with(URING);
}

/// Keys `0..FAILING_STORE_KEYS` are in [`store_with_failing_tables`]'s store.
const FAILING_STORE_KEYS: u64 = 3000;

/// A store of [`FAILING_STORE_KEYS`] keys compacted into several tables, no block cache,
/// whose second and middle tables fail every read (injected I/O errors, cleared through
/// the returned injector); returns it with 100 more keys than it holds and, per key,
/// whether a `get` of it fails (it needs a failing file).
fn store_with_failing_tables(
    dir: &std::path::Path,
    read_io: ReadIo,
) -> (Db, Arc<FaultInjector>, Vec<Vec<u8>>, Vec<bool>) {
    let faults = FaultInjector::new();
    let opts = Options {
        // No block cache: every table read goes to the file.
        cache_size: 0,
        fault_injector: Some(faults.clone()),
        read_io,
        ..tiny_options()
    };
    let db = Db::open(dir, opts).unwrap();
    let n = FAILING_STORE_KEYS;
    for i in 0..n {
        db.put(key(i), value(i, 0)).unwrap();
    }
    db.compact_range(None, None).unwrap();
    db.wait_for_background().unwrap();
    let tables = fast_tables(&db);
    assert!(tables.len() >= 4, "too few tables: {tables:?}");
    for failing in [&tables[1], &tables[tables.len() / 2]] {
        faults.add(FaultRule {
            tier: None,
            op: FaultOp::Read,
            name_contains: Some(failing.clone()),
            error: FaultError::Io,
            trigger: Trigger::After(0),
        });
    }
    let all: Vec<Vec<u8>> = (0..n + 100).map(key).collect();
    let failing: Vec<bool> = all.iter().map(|k| db.get(k).is_err()).collect();
    (db, faults, all, failing)
}

fn injected_read_errors_fail_exactly_the_keys_that_need_the_failing_files_with(read_io: ReadIo) {
    within(Duration::from_secs(120), move || {
        let dir = tempfile::tempdir().unwrap();
        let (db, faults, all, failing) = store_with_failing_tables(dir.path(), read_io);
        let n = FAILING_STORE_KEYS;
        let failed = failing.iter().filter(|f| **f).count();
        assert!(
            failed > 0 && failed < all.len() / 2,
            "{failed} of {} keys need the failing files",
            all.len()
        );
        let mut rng = StdRng::seed_from_u64(11);
        let mut seen_failures = 0;
        for _ in 0..200 {
            let picks: Vec<usize> = (0..32).map(|_| rng.gen_range(0..all.len())).collect();
            let batch: Vec<&[u8]> = picks.iter().map(|&p| &all[p][..]).collect();
            let answers = db.multi_get(&batch);
            for (&p, answer) in picks.iter().zip(answers) {
                match answer {
                    Err(e) => {
                        assert!(failing[p], "key {p} failed but needs no failing file: {e}");
                        assert!(matches!(e, Error::Io { .. }), "key {p}: {e}");
                        seen_failures += 1;
                    }
                    Ok(v) => {
                        assert!(!failing[p], "key {p} answered although its file fails");
                        let expected = (p as u64) < n;
                        assert_eq!(v, expected.then(|| value(p as u64, 0)), "key {p}");
                    }
                }
            }
        }
        assert!(seen_failures > 0, "no batch met a failing key");
        faults.clear();
        let answers = db.multi_get(&all);
        for (p, a) in answers.into_iter().enumerate() {
            let expected = (p as u64) < n;
            assert_eq!(a.unwrap(), expected.then(|| value(p as u64, 0)), "key {p}");
        }
    });
}

/// `multi_get_prefix` (the byte-bounded batch): each call answers a non-empty prefix of the
/// keys it is given, whose values add up to at most the budget plus one value (the bound a
/// server relies on to hold about one reply chunk per slow client), and the prefixes of
/// successive calls at one snapshot add up to exactly what `multi_get` answers: same
/// values, same absent keys, nothing skipped or repeated.
#[test]
fn multi_get_prefix_answers_a_prefix_within_its_byte_budget_and_equals_multi_get() {
    multi_get_prefix_answers_a_prefix_within_its_byte_budget_and_equals_multi_get_with(
        ReadIo::Threads,
    );
}

#[test]
fn multi_get_prefix_answers_a_prefix_within_its_byte_budget_and_equals_multi_get_through_io_uring()
{
    multi_get_prefix_answers_a_prefix_within_its_byte_budget_and_equals_multi_get_with(URING);
}

fn multi_get_prefix_answers_a_prefix_within_its_byte_budget_and_equals_multi_get_with(
    read_io: ReadIo,
) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options {
            read_io,
            ..tiny_options()
        },
    )
    .unwrap();
    let n = 600u64;
    let sized = |i: u64| -> Option<Vec<u8>> {
        match i % 10 {
            3 => None,
            0 => Some(vec![b'L'; 20_000 + i as usize]),
            _ => Some(value(i, 0)),
        }
    };
    for i in 0..n {
        if let Some(v) = sized(i) {
            db.put(key(i), v).unwrap();
        }
        if i == n / 2 {
            // Half in tables (pool reads), half in the memtable (inline answers).
            db.flush().unwrap();
            db.wait_for_background().unwrap();
        }
    }
    let snap = db.snapshot();
    let ropts = ReadOptions {
        snapshot: Some(snap.seq()),
        ..ReadOptions::new()
    };
    // The keys in a scrambled order, some twice, some never written.
    let mut rng = StdRng::seed_from_u64(5);
    let keys: Vec<Vec<u8>> = (0..900).map(|_| key(rng.gen_range(0..n + 50))).collect();
    let whole: Vec<Option<Vec<u8>>> = db
        .multi_get_opt(&keys, &ropts)
        .into_iter()
        .map(|a| a.unwrap())
        .collect();
    for (k, v) in keys.iter().zip(&whole) {
        assert_eq!(*v, db.get_opt(k, &ropts).unwrap());
    }
    for budget in [1usize, 1000, 16 << 10, 1 << 20] {
        let mut got: Vec<Option<Vec<u8>>> = Vec::new();
        let mut calls = 0;
        while got.len() < keys.len() {
            let answers = db.multi_get_prefix(&keys[got.len()..], &ropts, budget);
            calls += 1;
            assert!(
                !answers.is_empty(),
                "budget {budget}: a call made no progress"
            );
            let sizes: Vec<usize> = answers
                .iter()
                .map(|a| a.as_ref().unwrap().as_ref().map_or(0, |e| e.value.len()))
                .collect();
            let held: usize = sizes.iter().sum();
            let largest = sizes.iter().copied().max().unwrap_or(0);
            assert!(
                held <= budget + largest,
                "budget {budget}: a call held {held} bytes of values (largest {largest})"
            );
            got.extend(answers.into_iter().map(|a| a.unwrap().map(|e| e.value)));
        }
        assert_eq!(
            got, whole,
            "budget {budget}: the prefixes differ from multi_get"
        );
        if budget == 1 << 20 {
            assert!(calls <= 12, "a large budget still took {calls} calls");
        }
        if budget == 1 {
            // Every present key needs a call of its own at a budget of one byte.
            let present = whole.iter().filter(|v| v.is_some()).count();
            assert!(calls >= present, "{calls} calls for {present} present keys");
        }
    }
    assert!(db.multi_get_prefix::<Vec<u8>>(&[], &ropts, 10).is_empty());
}

/// The asynchronous path under read faults while the store is busy: a writer adds keys
/// (above the read keys' range) with flushes and the compactions they trigger, while
/// batches (`multi_get`, and `multi_get_prefix` at a small budget) read keys of which some
/// need two failing table files. Every key that needs a failing file answers `Io` (the
/// same keys `get` cannot read), every other key its value, each call returns (under a
/// timeout: nothing hangs while the pool runs reads that fail), and the writer's
/// background work is unharmed.
#[test]
fn read_faults_under_concurrent_writes_and_compactions_fail_only_their_keys() {
    read_faults_under_concurrent_writes_and_compactions_fail_only_their_keys_with(ReadIo::Threads);
}

#[test]
fn read_faults_under_concurrent_writes_and_compactions_fail_only_their_keys_through_io_uring() {
    read_faults_under_concurrent_writes_and_compactions_fail_only_their_keys_with(URING);
}

fn read_faults_under_concurrent_writes_and_compactions_fail_only_their_keys_with(read_io: ReadIo) {
    within(Duration::from_secs(240), move || {
        let dir = tempfile::tempdir().unwrap();
        let faults = FaultInjector::new();
        let opts = Options {
            cache_size: 0,
            fault_injector: Some(faults.clone()),
            read_io,
            ..tiny_options()
        };
        let db = Arc::new(Db::open(dir.path(), opts).unwrap());
        let n = 3000u64;
        for i in 0..n {
            db.put(key(i), value(i, 0)).unwrap();
        }
        // All read keys in the last level: compactions of the writer's keys (above them
        // in key order) never take these files as inputs.
        db.compact_range(None, None).unwrap();
        db.wait_for_background().unwrap();
        let tables = fast_tables(&db);
        assert!(tables.len() >= 4, "too few tables: {tables:?}");
        for failing in [&tables[0], &tables[tables.len() - 2]] {
            faults.add(FaultRule {
                tier: None,
                op: FaultOp::Read,
                name_contains: Some(failing.clone()),
                error: FaultError::Io,
                trigger: Trigger::After(0),
            });
        }
        let all: Vec<Vec<u8>> = (0..n + 100).map(key).collect();
        let failing: Vec<bool> = all.iter().map(|k| db.get(k).is_err()).collect();
        let failed = failing.iter().filter(|f| **f).count();
        assert!(
            failed > 0 && failed < all.len() / 2,
            "{failed} failing keys"
        );
        let compactions_before = db.stats().compactions;
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (db, stop) = (db.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    db.put(key(1_000_000 + i), value(i, 1)).unwrap();
                    i += 1;
                    if i.is_multiple_of(300) {
                        db.flush().unwrap();
                    }
                }
                i
            })
        };
        let check =
            |p: usize, answer: tierkv::Result<Option<Vec<u8>>>, seen: &mut usize| match answer {
                Err(e) => {
                    assert!(failing[p], "key {p} failed but needs no failing file: {e}");
                    assert!(matches!(e, Error::Io { .. }), "key {p}: {e}");
                    *seen += 1;
                }
                Ok(v) => {
                    assert!(!failing[p], "key {p} answered although its file fails");
                    let expected = (p as u64) < n;
                    assert_eq!(v, expected.then(|| value(p as u64, 0)), "key {p}");
                }
            };
        let mut rng = StdRng::seed_from_u64(23);
        let mut seen_failures = 0;
        let started = Instant::now();
        let mut round = 0;
        while round < 150 || (db.stats().compactions == compactions_before && round < 3000) {
            round += 1;
            let picks: Vec<usize> = (0..32).map(|_| rng.gen_range(0..all.len())).collect();
            let batch: Vec<&[u8]> = picks.iter().map(|&p| &all[p][..]).collect();
            if round % 2 == 0 {
                for (&p, answer) in picks.iter().zip(db.multi_get(&batch)) {
                    check(p, answer, &mut seen_failures);
                }
            } else {
                let mut next = 0;
                while next < batch.len() {
                    let answers = db.multi_get_prefix(&batch[next..], &ReadOptions::new(), 1024);
                    assert!(!answers.is_empty());
                    for answer in answers {
                        check(
                            picks[next],
                            answer.map(|e| e.map(|e| e.value)),
                            &mut seen_failures,
                        );
                        next += 1;
                    }
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        let written = writer.join().unwrap();
        db.wait_for_background().unwrap();
        assert!(seen_failures > 0, "no batch met a failing key");
        assert!(written > 0);
        assert!(
            db.stats().compactions > compactions_before,
            "no compaction ran during the {round} rounds ({:?})",
            started.elapsed()
        );
        assert!(
            db.background_error().is_none(),
            "{:?}",
            db.background_error()
        );
        // The writer's keys all read back.
        let theirs: Vec<Vec<u8>> = (0..written).map(|i| key(1_000_000 + i)).collect();
        for (i, a) in db.multi_get(&theirs).into_iter().enumerate() {
            assert_eq!(a.unwrap(), Some(value(i as u64, 1)), "writer key {i}");
        }
    });
}

// ---- The streaming get (`Db::get_pipelined`) ----

/// A stream of `keys` through `get_pipelined_opt` with `window`: every key's answer (in
/// entry order), checking that each key is answered exactly once and that never more
/// than `window` keys are unanswered. `between(i)` runs in `next_key` before key `i`
/// enters (it may write keys that are not in flight).
fn stream(
    db: &Db,
    ropts: &ReadOptions,
    window: usize,
    keys: &[Vec<u8>],
    mut between: impl FnMut(usize),
) -> Vec<tierkv::Result<Option<Vec<u8>>>> {
    type Answer = tierkv::Result<Option<Vec<u8>>>;
    let answers: std::cell::RefCell<Vec<Option<Answer>>> =
        std::cell::RefCell::new((0..keys.len()).map(|_| None).collect());
    let entered = std::cell::Cell::new(0usize);
    let unanswered = std::cell::Cell::new(0usize);
    let most = std::cell::Cell::new(0usize);
    db.get_pipelined_opt(
        ropts,
        window,
        || {
            let i = entered.get();
            if i == keys.len() {
                return None;
            }
            between(i);
            entered.set(i + 1);
            unanswered.set(unanswered.get() + 1);
            most.set(most.get().max(unanswered.get()));
            Some(Keyed(i, keys[i].clone()))
        },
        |Keyed(i, k), answer| {
            assert_eq!(k, keys[i]);
            unanswered.set(unanswered.get() - 1);
            let slot = &mut answers.borrow_mut()[i];
            assert!(slot.is_none(), "key {i} answered twice");
            *slot = Some(answer.map(|e| e.map(|e| e.value)));
        },
    );
    assert_eq!(entered.get(), keys.len(), "the stream took every key");
    assert!(
        most.get() <= window.max(1),
        "{} keys in flight with a window of {window}",
        most.get()
    );
    answers
        .into_inner()
        .into_iter()
        .enumerate()
        .map(|(i, a)| a.unwrap_or_else(|| panic!("key {i} never answered")))
        .collect()
}

/// A stream key carries its position (the answer names it back).
impl AsRef<[u8]> for Keyed {
    fn as_ref(&self) -> &[u8] {
        &self.1
    }
}
struct Keyed(usize, Vec<u8>);

/// The streaming get against a BTreeMap model on a two-tier store with promotion (keys
/// in memtables, both tiers, point caches and the promotion cache) under random puts,
/// deletes, flushes and compactions between streams: every key is answered exactly once,
/// as the model holds it when the key entered (writes made by the stream's own callback
/// between keys are seen by the keys after them: a fresh read point per key), repeated
/// keys included; at a snapshot, as the snapshot's model; never more than the window in
/// flight.
fn stream_model_run(read_io: ReadIo, seed: u64) {
    let fast = tempfile::tempdir().unwrap();
    let slow = tempfile::tempdir().unwrap();
    let opts = Options {
        read_parallelism: 4,
        read_io,
        ..two_tier_options(slow.path(), 192 * 1024, true)
    };
    let db = Db::open(fast.path(), opts).unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let space = 3000;
    let mut model = Model::new();
    for i in 0..space {
        if i % 3 != 2 {
            db.put(key(i), value(i, 0)).unwrap();
            model.insert(key(i), value(i, 0));
        }
    }
    db.flush().unwrap();
    db.wait_for_background().unwrap();
    let gets_before = db.stats().gets;
    let mut streamed = 0u64;
    for round in 0..120u64 {
        for _ in 0..rng.gen_range(0..30) {
            let i = rng.gen_range(0..space);
            if rng.gen_bool(0.25) {
                db.delete(key(i)).unwrap();
                model.remove(&key(i));
            } else {
                db.put(key(i), value(i, round + 1)).unwrap();
                model.insert(key(i), value(i, round + 1));
            }
        }
        match rng.gen_range(0..12) {
            0 => db.flush().unwrap(),
            1 => db.compact_range(None, None).unwrap(),
            _ => {}
        }
        let window = [1, 2, 8, 32, 64][rng.gen_range(0..5)];
        let len = rng.gen_range(1..120);
        let mut keys: Vec<Vec<u8>> = (0..len)
            .map(|_| {
                if rng.gen_bool(0.3) {
                    key(rng.gen_range(0..60))
                } else {
                    key(rng.gen_range(0..space + 200))
                }
            })
            .collect();
        keys.push(keys[0].clone());
        // Writes between keys, of keys outside the stream (so none is in flight): each
        // key is expected as the model holds it when it enters.
        let repeat = keys.len() - 1;
        let mut expected: Vec<Option<Vec<u8>>> = Vec::new();
        let snap = db.snapshot();
        let snap_model = model.clone();
        let answers = {
            let model = std::cell::RefCell::new(&mut model);
            let expected = std::cell::RefCell::new(&mut expected);
            let mut writes = StdRng::seed_from_u64(seed ^ round);
            stream(&db, &ReadOptions::new(), window, &keys, |i| {
                let mut m = model.borrow_mut();
                if i == repeat {
                    // The repeated key itself is rewritten just before its second entry,
                    // while its first may still be in flight: the first answers the old
                    // version (its read point is its entry), the second the new one.
                    let v = value(7, 10_000 + round);
                    db.put(&keys[i], &v).unwrap();
                    m.insert(keys[i].clone(), v);
                } else if writes.gen_bool(0.1) {
                    let outside = key(space + 1000 + writes.gen_range(0..50));
                    db.put(&outside, value(0, round)).unwrap();
                    m.insert(outside, value(0, round));
                }
                expected.borrow_mut().push(m.get(&keys[i]).cloned());
            })
        };
        for (i, (k, a)) in keys.iter().zip(answers).enumerate() {
            let a = a.unwrap_or_else(|e| panic!("{k:?} failed: {e}"));
            assert_eq!(
                a, expected[i],
                "round {round}: stream answer of key {i} {k:?}"
            );
        }
        streamed += keys.len() as u64;
        // The same keys at the snapshot taken before the stream's writes.
        let ropts = ReadOptions {
            snapshot: Some(snap.seq()),
            ..ReadOptions::new()
        };
        for (k, a) in keys.iter().zip(stream(&db, &ropts, window, &keys, |_| {})) {
            assert_eq!(a.unwrap().as_ref(), snap_model.get(k), "snapshot {k:?}");
        }
        streamed += keys.len() as u64;
        // The outside keys the stream wrote are readable afterwards.
        let outside: Vec<Vec<u8>> = (0..50).map(|j| key(space + 1000 + j)).collect();
        for (k, a) in outside
            .iter()
            .zip(stream(&db, &ReadOptions::new(), 4, &outside, |_| {}))
        {
            assert_eq!(a.unwrap().as_ref(), model.get(k), "outside key {k:?}");
        }
        streamed += outside.len() as u64;
    }
    assert_eq!(
        db.stats().gets - gets_before,
        streamed,
        "each streamed key counts as one get"
    );
    let s = db.stats().get_sources;
    assert!(s.slow > 0 && s.fast > 0, "both tiers read: {s:?}");
}

#[test]
fn a_stream_equals_the_model_through_io_uring() {
    stream_model_run(URING, 21);
}

#[test]
fn a_stream_equals_the_model_on_the_reader_pool() {
    stream_model_run(ReadIo::Threads, 22);
}

/// Injected read faults in a stream (invariant 3): a key fails exactly when `get` of it
/// fails (it needs a failing file), with an I/O error, and the others are answered
/// correctly; the stream ends (no hang).
#[test]
fn injected_read_errors_fail_exactly_the_streamed_keys_that_read_the_failing_files() {
    within(Duration::from_secs(120), || {
        let dir = tempfile::tempdir().unwrap();
        let (db, _faults, all, failing) = store_with_failing_tables(dir.path(), URING);
        let n = FAILING_STORE_KEYS;
        assert!(failing.iter().any(|f| *f) && !failing.iter().all(|f| *f));
        let mut rng = StdRng::seed_from_u64(12);
        let picks: Vec<usize> = (0..2000).map(|_| rng.gen_range(0..all.len())).collect();
        let keys: Vec<Vec<u8>> = picks.iter().map(|&p| all[p].clone()).collect();
        let mut failures = 0;
        for (&p, a) in picks
            .iter()
            .zip(stream(&db, &ReadOptions::new(), 16, &keys, |_| {}))
        {
            match a {
                Err(e) => {
                    assert!(failing[p], "key {p} failed but needs no failing file: {e}");
                    assert!(matches!(e, Error::Io { .. }), "key {p}: {e}");
                    failures += 1;
                }
                Ok(v) => {
                    assert!(!failing[p], "key {p} answered although its file fails");
                    assert_eq!(v, ((p as u64) < n).then(|| value(p as u64, 0)), "key {p}");
                }
            }
        }
        assert!(failures > 0, "no streamed key met a failing file");
    });
}

/// No round barrier (the point of the pipeline): with the slow tier's device model
/// adding 150 ms to every read, a key on the fast tier that enters after a key on the
/// slow tier is answered first, without waiting for the slow key's read. Under rounds
/// (every read of a round reaped before any key goes on) the two answers would come
/// together, in entry order.
#[test]
fn a_key_whose_block_is_quick_is_answered_before_another_keys_slow_read_completes() {
    within(Duration::from_secs(120), || {
        let fast = tempfile::tempdir().unwrap();
        let slow = tempfile::tempdir().unwrap();
        let base = Options {
            cache_size: 0,
            read_io: URING,
            ..two_tier_options(slow.path(), 64 * 1024, false)
        };
        let n = 3000u64;
        {
            let db = Db::open(fast.path(), base.clone()).unwrap();
            for i in 0..n {
                db.put(key(i), value(i, 0)).unwrap();
            }
            db.compact_range(None, None).unwrap();
            db.wait_for_background().unwrap();
            db.close().unwrap();
        }
        let mut opts = base;
        if let Some(s) = opts.slow.as_mut() {
            s.device = tierkv::DeviceProfile {
                iops: None,
                bandwidth: None,
                latency_us: 150_000,
            };
        }
        let db = Db::open(fast.path(), opts).unwrap();
        // A fresh version of one key, flushed: it is read from the fast tier.
        let quick = key(5);
        db.put(&quick, b"fresh").unwrap();
        db.flush().unwrap();
        db.wait_for_background().unwrap();
        // A key whose read reaches the slow tier (tables opened by this first get).
        let slow_key = (100..n)
            .step_by(97)
            .map(key)
            .find(|k| {
                let before = db.stats().get_sources.slow;
                db.get(k).unwrap();
                db.stats().get_sources.slow > before
            })
            .expect("some key lives on the slow tier");
        let before = db.stats().get_sources;
        assert_eq!(db.get(&quick).unwrap().as_deref(), Some(&b"fresh"[..]));
        assert!(
            db.stats().get_sources.fast > before.fast,
            "the quick key is on the fast tier"
        );
        let keys = vec![slow_key.clone(), quick.clone()];
        let start = Instant::now();
        let mut order = Vec::new();
        let mut next = keys.into_iter();
        db.get_pipelined(
            2,
            || next.next(),
            |k, a| {
                assert!(a.unwrap().is_some());
                order.push((k, start.elapsed()));
            },
        );
        assert_eq!(order.len(), 2);
        assert_eq!(
            order[0].0, quick,
            "the quick key is answered first: {order:?}"
        );
        assert!(
            order[1].1 >= Duration::from_millis(150),
            "the slow key waited for its device time: {order:?}"
        );
        assert!(
            order[0].1 < order[1].1,
            "the quick key did not wait for the slow read: {order:?}"
        );
    });
}

/// The fast tier's table files, by name (so in creation order).
fn fast_tables(db: &Db) -> Vec<String> {
    let mut tables: Vec<String> = std::fs::read_dir(db.tier_dir(Tier::Fast))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".sst"))
        .collect();
    tables.sort();
    tables
}

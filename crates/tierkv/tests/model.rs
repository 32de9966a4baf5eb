//! Model-based randomized test: random puts, deletes, batches, gets, scans (both
//! directions, with bounds), snapshots, flushes, compactions and reopens, checked after
//! every step against a `BTreeMap` model.
//!
//! Checks docs/DESIGN.md invariant 1 (newest version wins, snapshots see exactly their state) and
//! invariant 2 for clean reopens (nothing acknowledged is lost across close/open).
//! Compactions copy untouched blocks (block reuse, the default) in every run but
//! `model_two_tiers_block_reuse_off`, which takes the entry-by-entry path; the bloom-cascade
//! run checks retention that asks the tracker key by key.

mod common;

use tierkv::SlowTierFormat;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use tierkv::{Db, Options, ReadOptions, WriteBatch};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn value(rng: &mut StdRng) -> Vec<u8> {
    let len = match rng.gen_range(0..10) {
        0 => 0,
        1 => rng.gen_range(500..3000),
        _ => rng.gen_range(1..64),
    };
    (0..len).map(|_| rng.gen()).collect()
}

fn expected_range(
    model: &Model,
    lo: &Option<Vec<u8>>,
    hi: &Option<Vec<u8>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    model
        .iter()
        .filter(|(k, _)| {
            lo.as_ref().is_none_or(|lo| *k >= lo) && hi.as_ref().is_none_or(|hi| *k < hi)
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn check_scan(db: &Db, model: &Model, snapshot: Option<u64>, rng: &mut StdRng, keyspace: u64) {
    let lo = rng
        .gen_bool(0.5)
        .then(|| common::key(rng.gen_range(0..keyspace)));
    let hi = rng
        .gen_bool(0.5)
        .then(|| common::key(rng.gen_range(0..keyspace)));
    // A length hint changes only how tables are read (one window per seek), never
    // what the scan returns, whether it is short of the scan or far past it (up to
    // "everything", as `Db::scan(.., usize::MAX)` says).
    let scan_length_hint = rng.gen_bool(0.5).then(|| match rng.gen_range(0..10) {
        0 => usize::MAX,
        _ => rng.gen_range(1..2000),
    });
    let ropts = ReadOptions {
        snapshot,
        lower_bound: lo.clone(),
        upper_bound: hi.clone(),
        scan_length_hint,
        ..ReadOptions::new()
    };
    let want = expected_range(model, &lo, &hi);
    let mut it = db.iter_opt(&ropts).unwrap();
    if rng.gen_bool(0.5) {
        it.seek_to_first().unwrap();
        let mut got = Vec::new();
        while it.valid() {
            got.push((it.key().to_vec(), it.value().to_vec()));
            it.next().unwrap();
        }
        assert_eq!(
            got.len(),
            want.len(),
            "forward scan length, bounds {lo:?}..{hi:?}"
        );
        assert!(got == want, "forward scan content differs");
    } else {
        it.seek_to_last().unwrap();
        let mut got = Vec::new();
        while it.valid() {
            got.push((it.key().to_vec(), it.value().to_vec()));
            it.prev().unwrap();
        }
        got.reverse();
        assert_eq!(
            got.len(),
            want.len(),
            "reverse scan length, bounds {lo:?}..{hi:?}"
        );
        assert!(got == want, "reverse scan content differs");
    }
    // A seek lands on the first key >= target; then one step each way stays consistent.
    let target = common::key(rng.gen_range(0..keyspace));
    it.seek(&target).unwrap();
    let first = want.iter().find(|(k, _)| *k >= target);
    match first {
        Some((k, v)) => {
            assert!(it.valid(), "seek to {target:?} found nothing, want {k:?}");
            assert_eq!((it.key(), it.value()), (k.as_slice(), v.as_slice()));
            it.prev().unwrap();
            let before = want.iter().rev().find(|(k2, _)| k2 < k);
            assert_eq!(it.valid(), before.is_some());
            if let Some((k2, _)) = before {
                assert_eq!(it.key(), k2.as_slice());
                it.next().unwrap();
                assert_eq!(
                    it.key(),
                    k.as_slice(),
                    "next after prev returns to the seek target"
                );
            }
        }
        None => assert!(!it.valid(), "seek past the end must be invalid"),
    }
}

fn run(seed: u64, steps: usize, opts: Options) -> tierkv::DbStats {
    run_with(seed, steps, opts, true)
}

/// `reopen`: whether the step mix includes close/open (a tracker that lives in memory only
/// starts cold after each).
fn run_with(seed: u64, steps: usize, opts: Options, reopen: bool) -> tierkv::DbStats {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let keyspace = 400;
    let mut db = Db::open(dir.path(), opts.clone()).unwrap();
    let mut model = Model::new();
    let mut snapshots: Vec<(tierkv::Snapshot, Model)> = Vec::new();
    for step in 0..steps {
        let op = rng.gen_range(0..100);
        match op {
            0..=39 => {
                let k = common::key(rng.gen_range(0..keyspace));
                let v = value(&mut rng);
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            40..=49 => {
                let k = common::key(rng.gen_range(0..keyspace));
                db.delete(&k).unwrap();
                model.remove(&k);
            }
            50..=56 => {
                let mut b = WriteBatch::new();
                for _ in 0..rng.gen_range(1..20) {
                    let k = common::key(rng.gen_range(0..keyspace));
                    if rng.gen_bool(0.7) {
                        let v = value(&mut rng);
                        b.put(&k, &v);
                        model.insert(k, v);
                    } else {
                        b.delete(&k);
                        model.remove(&k);
                    }
                }
                db.write(b).unwrap();
            }
            57..=76 => {
                let k = common::key(rng.gen_range(0..keyspace));
                // Repeated gets walk a key through the point caches (miss, KP, KV).
                for _ in 0..rng.gen_range(1..=3) {
                    assert_eq!(
                        db.get(&k).unwrap(),
                        model.get(&k).cloned(),
                        "seed {seed} step {step} get {k:?}"
                    );
                }
            }
            77..=83 => check_scan(&db, &model, None, &mut rng, keyspace),
            84..=86 => {
                if snapshots.len() < 4 {
                    snapshots.push((db.snapshot(), model.clone()));
                } else {
                    snapshots.remove(rng.gen_range(0..snapshots.len()));
                }
            }
            87..=90 => {
                if !snapshots.is_empty() {
                    let i = rng.gen_range(0..snapshots.len());
                    let (snap, old) = &snapshots[i];
                    let k = common::key(rng.gen_range(0..keyspace));
                    let ropts = ReadOptions {
                        snapshot: Some(snap.seq()),
                        ..ReadOptions::new()
                    };
                    assert_eq!(
                        db.get_opt(&k, &ropts).unwrap(),
                        old.get(&k).cloned(),
                        "snapshot get"
                    );
                    check_scan(&db, old, Some(snap.seq()), &mut rng, keyspace);
                }
            }
            91..=93 => db.flush().unwrap(),
            94..=95 => {
                let a = common::key(rng.gen_range(0..keyspace));
                let b = common::key(rng.gen_range(0..keyspace));
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                if rng.gen_bool(0.3) {
                    db.compact_range(None, None).unwrap();
                } else {
                    db.compact_range(Some(&lo), Some(&hi)).unwrap();
                }
            }
            _ if !reopen => {
                let k = common::key(rng.gen_range(0..keyspace));
                assert_eq!(db.get(&k).unwrap(), model.get(&k).cloned(), "get {k:?}");
            }
            _ => {
                // Reopen: snapshots do not survive it.
                snapshots.clear();
                drop(db);
                db = Db::open(dir.path(), opts.clone()).unwrap();
            }
        }
    }
    // Final full check, after letting background work finish.
    db.wait_for_background().unwrap();
    let got = db.scan(None, None, usize::MAX).unwrap();
    assert!(
        got == expected_range(&model, &None, &None),
        "final state differs"
    );
    db.verify_checksums().unwrap();
    db.stats()
}

#[test]
fn model_small_buffers() {
    for seed in 0..4 {
        run(seed, 3000, common::tiny_options());
    }
}

#[test]
fn model_default_buffers() {
    // Everything in the memtable and few flushes: exercises the memtable paths.
    run(100, 2000, Options::default());
}

#[test]
fn model_lz4_no_filter_no_cache() {
    let opts = Options {
        compression: tierkv::Compression::Lz4,
        bloom_bits_per_key: 0,
        cache_size: 0,
        use_direct_io: false,
        ..common::tiny_options()
    };
    run(200, 2500, opts);
}

/// Two-tier options with the slow tier written in `format`.
fn two_tiers(slow: &std::path::Path, promotion: bool, format: SlowTierFormat) -> Options {
    let mut opts = common::two_tier_options(slow, 128 * 1024, promotion);
    opts.compaction.slow_tier_format = format;
    opts
}

#[test]
fn model_two_tiers_with_promotion() {
    // Reads hit the slow tier, records are promoted by flush and by compaction and hot ones
    // retained, with deletes, snapshots and reopens in the mix (invariant 1 across tiers).
    for seed in 300..303 {
        let slow = tempfile::tempdir().unwrap();
        run(
            seed,
            3000,
            two_tiers(slow.path(), true, SlowTierFormat::Sorted),
        );
    }
}

/// As above with semi-sorted slow-tier tables: merges append generations and keep clean
/// blocks, tables more than half dirty are rewritten; every read, scan and snapshot still
/// matches the model, and every table verifies.
#[test]
fn model_two_tiers_semi_sorted() {
    for seed in [300, 301, 302, 400] {
        let slow = tempfile::tempdir().unwrap();
        let promotion = seed != 400;
        run(
            seed,
            3000,
            two_tiers(slow.path(), promotion, SlowTierFormat::SemiSorted),
        );
    }
}

/// Preemptive pushdown (and HyperDB's overlap-score victim) on both slow-tier formats:
/// keys written past the output level into deeper slow levels in the same edit; every
/// read, scan and snapshot matches the model across reopens, and every table verifies
/// (invariants 1 and 2). A 32 KiB fast tier gives the store several slow levels.
#[test]
fn model_two_tiers_preemptive_pushdown() {
    let mut pushed = 0;
    for (seed, format, reopen) in [
        (500, SlowTierFormat::Sorted, true),
        (501, SlowTierFormat::SemiSorted, true),
        (502, SlowTierFormat::Sorted, false),
        (503, SlowTierFormat::SemiSorted, false),
    ] {
        let slow = tempfile::tempdir().unwrap();
        let mut opts = common::two_tier_options(slow.path(), 40 * 1024, seed % 2 == 0);
        opts.write_buffer_size = 4 * 1024;
        opts.target_file_size = 4 * 1024;
        opts.level_size_ratio = 2;
        opts.num_levels = 8;
        opts.compaction.slow_tier_format = format;
        opts.compaction.preemptive_pushdown = true;
        opts.compaction.overlap_score_victim = seed >= 502;
        // (Counters start at each open: the runs without reopens count all they push.)
        let s = run_with(seed, 3000, opts, reopen);
        let slow_levels = s
            .levels
            .iter()
            .filter(|l| l.tier == tierkv::Tier::Slow && l.files > 0)
            .count();
        eprintln!(
            "seed {seed}: {slow_levels} slow levels with data, {} bytes pushed since the last open",
            s.compaction_pushdown_bytes
        );
        pushed += s.compaction_pushdown_bytes;
    }
    assert!(pushed > 0, "no compaction pushed anything down");
}

#[test]
fn model_two_tiers_small_blocks_no_last_level_filters() {
    // Record-sized read units without the deepest level's filters (the small-record
    // profile): lookups of absent keys read a block of that level instead of stopping at
    // its filter, and must still answer None (invariant 1).
    let slow = tempfile::tempdir().unwrap();
    let opts = Options {
        block_records: Some(8),
        last_level_filters: tierkv::LastLevelFilters::Never,
        ..common::two_tier_options(slow.path(), 128 * 1024, true)
    };
    run(310, 3000, opts.clone());
    // The same with semi-sorted slow-tier tables, whose deepest level's generations are
    // written without filters too.
    let slow = tempfile::tempdir().unwrap();
    let mut semi = Options {
        slow: Some(tierkv::SlowTier {
            dir: slow.path().to_path_buf(),
            ..opts.slow.clone().unwrap()
        }),
        ..opts
    };
    semi.compaction.slow_tier_format = SlowTierFormat::SemiSorted;
    run(311, 3000, semi);
}

/// The KV, KP and block caches with budgets of a few KiB, so entries churn through every
/// cache and ghost while the model's updates, deletes, flushes, compactions and reopens
/// happen: no cache may return a stale value (invariant 1).
fn with_cache(opts: Options, mode: tierkv::CacheMode, budget: usize) -> Options {
    Options {
        cache_size: budget,
        cache: tierkv::CacheOptions {
            mode,
            ..Default::default()
        },
        ..opts
    }
}

#[test]
fn model_cache_modes_tiny_budgets() {
    use tierkv::CacheMode::*;
    for (seed, mode, budget) in [
        (500, Adaptive, 16 * 1024),
        (501, Adaptive, 6 * 1024),
        (502, KvOnly, 8 * 1024),
        (503, KpOnly, 8 * 1024),
        (
            504,
            Split {
                kv: 2.0,
                kp: 1.0,
                block: 1.0,
            },
            12 * 1024,
        ),
    ] {
        run(seed, 1500, with_cache(common::tiny_options(), mode, budget));
    }
}

#[test]
fn model_cache_two_tiers() {
    // Promotion on for the adaptive and KP runs: promoted L0 files and retained records
    // must not disturb the KV/KP entries.
    use tierkv::CacheMode::*;
    for (seed, mode, promotion) in [
        (600, Adaptive, true),
        (601, KvOnly, false),
        (602, KpOnly, true),
    ] {
        let slow = tempfile::tempdir().unwrap();
        let opts = common::two_tier_options(slow.path(), 128 * 1024, promotion);
        run(seed, 1500, with_cache(opts, mode, 12 * 1024));
    }
}

#[test]
fn model_two_tiers_without_promotion() {
    let slow = tempfile::tempdir().unwrap();
    run(
        400,
        2500,
        common::two_tier_options(slow.path(), 128 * 1024, false),
    );
}

#[test]
fn model_two_tiers_block_reuse_off() {
    let slow = tempfile::tempdir().unwrap();
    let mut opts = common::two_tier_options(slow.path(), 128 * 1024, true);
    opts.compaction.block_reuse = false;
    run(700, 1500, opts);
}

#[test]
fn model_two_tiers_bloom_cascade_tracker() {
    // Small windows and no reopens (the cascade lives in memory), so some keys of the
    // 400-key space are hot at a time and retention, promotion and the checker all ask
    // the cascade.
    let slow = tempfile::tempdir().unwrap();
    let mut opts = common::two_tier_options(slow.path(), 128 * 1024, true);
    opts.promotion.tracker = tierkv::TrackerKind::BloomCascade;
    opts.promotion.bloom_cascade.window_objects = Some(20);
    run_with(701, 2000, opts, false);
}

/// Invariant 1 at flush: a flush drops a version only when a newer version of its key in
/// the same memtable is visible to every snapshot (the rule compaction uses: newer version
/// at or below the oldest snapshot). The oldest snapshot pins the versions a flush keeps;
/// every snapshot still reads its own version, and so does a reopen, whose WAL replay
/// refills the memtable, flushed later with no snapshot at all.
#[test]
fn flush_drops_exactly_the_versions_no_snapshot_sees() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::tiny_options()).unwrap();
    let get_at = |db: &Db, snap: Option<u64>| {
        let ropts = ReadOptions {
            snapshot: snap,
            ..ReadOptions::new()
        };
        db.get_opt(b"k", &ropts).unwrap()
    };
    db.put(b"k", b"v1").unwrap();
    let s1 = db.snapshot();
    db.put(b"k", b"v2").unwrap();
    db.put(b"k", b"v3").unwrap();
    let s2 = db.snapshot();
    db.put(b"k", b"v4").unwrap();
    db.delete(b"k").unwrap();
    db.put(b"k", b"v5").unwrap();
    // s1 pins everything from v1 up: nothing can go.
    db.flush().unwrap();
    assert_eq!(db.stats().flush_entries_dropped, 0);
    assert_eq!(get_at(&db, Some(s1.seq())).as_deref(), Some(&b"v1"[..]));
    drop(s1);
    // v1, v2, v3, a snapshot, v4, a tombstone, v5: the snapshot sees v3.
    let history = |db: &Db| {
        for v in [&b"v1"[..], b"v2", b"v3"] {
            db.put(b"k", v).unwrap();
        }
        let snap = db.snapshot();
        db.put(b"k", b"v4").unwrap();
        db.delete(b"k").unwrap();
        db.put(b"k", b"v5").unwrap();
        snap
    };
    // The history in a new memtable, now with s2 the oldest snapshot.
    let s3 = history(&db);
    db.flush().unwrap();
    // s2, the oldest snapshot, is older than every version of this memtable: all stay
    // (s3 needs v3; v1 and v2 are kept too, the price of looking at the oldest only).
    assert_eq!(db.stats().flush_entries_dropped, 0);
    assert_eq!(get_at(&db, Some(s2.seq())).as_deref(), Some(&b"v3"[..]));
    drop(s2);
    let s4 = history(&db);
    drop(s3);
    // s4 is the oldest: v1 and v2 are hidden from it by v3; v4 and the tombstone are newer
    // than s4 and kept (a version above the oldest snapshot is kept, as in compaction).
    db.flush().unwrap();
    assert_eq!(db.stats().flush_entries_dropped, 2);
    assert_eq!(get_at(&db, Some(s4.seq())).as_deref(), Some(&b"v3"[..]));
    assert_eq!(get_at(&db, None).as_deref(), Some(&b"v5"[..]));
    let mut it = db
        .iter_opt(&ReadOptions {
            snapshot: Some(s4.seq()),
            ..ReadOptions::new()
        })
        .unwrap();
    it.seek_to_first().unwrap();
    assert!(it.valid());
    assert_eq!((it.key(), it.value()), (&b"k"[..], &b"v3"[..]));
    drop(it);
    drop(s4);
    // Without snapshots only the newest version of each key is flushed.
    for i in 0..5u8 {
        db.put(b"k", [b'w', b'0' + i]).unwrap();
        db.put(b"j", [b'x', b'0' + i]).unwrap();
    }
    db.delete(b"j").unwrap();
    db.flush().unwrap();
    assert_eq!(db.stats().flush_entries_dropped, 2 + 4 + 5);
    assert_eq!(get_at(&db, None).as_deref(), Some(&b"w4"[..]));
    assert_eq!(db.get(b"j").unwrap(), None);
    // Unflushed versions are replayed from the WAL at the next open into the memtable,
    // and its flush drops the older ones.
    for i in 0..3u8 {
        db.put(b"k", [b'y', b'0' + i]).unwrap();
    }
    db.close().unwrap();
    let db = Db::open(dir.path(), common::tiny_options()).unwrap();
    assert_eq!(
        db.stats().flush_entries_dropped,
        0,
        "the open flushes nothing"
    );
    assert_eq!(get_at(&db, None).as_deref(), Some(&b"y2"[..]));
    db.flush().unwrap();
    assert_eq!(db.stats().flush_entries_dropped, 2);
    assert_eq!(get_at(&db, None).as_deref(), Some(&b"y2"[..]));
    assert_eq!(db.get(b"j").unwrap(), None);
}

/// Invariant 1 across flushes that drop versions: a live snapshot keeps reading its version,
/// and reading at a released snapshot's sequence number after a flush dropped what it saw
/// is refused with a clear error (invariant 3: detect, never invent) instead of answering
/// with an older version or none.
#[test]
fn released_snapshot_below_the_drop_horizon_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::tiny_options()).unwrap();
    let at = |seq: u64| ReadOptions {
        snapshot: Some(seq),
        ..ReadOptions::new()
    };
    db.put(b"k", b"v1").unwrap();
    let released = db.snapshot().seq();
    db.put(b"k", b"v2").unwrap();
    let live = db.snapshot();
    db.put(b"k", b"v3").unwrap();
    // No snapshot older than `live`: v1 is dropped, v2 kept for `live`.
    db.flush().unwrap();
    assert_eq!(db.stats().flush_entries_dropped, 1);
    assert_eq!(
        db.get_opt(b"k", &at(live.seq())).unwrap().as_deref(),
        Some(&b"v2"[..])
    );
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v3"[..]));
    let e = db.get_opt(b"k", &at(released)).unwrap_err().to_string();
    assert!(e.contains("released"), "{e}");
    let e = db
        .iter_opt(&at(released))
        .err()
        .expect("refused")
        .to_string();
    assert!(e.contains("released"), "{e}");
}

//! The one memory budget (F2, docs/DESIGN.md).
//!
//! `budget_holds_under_a_write_read_mix` checks invariant 4 of docs/DESIGN.md ("budgets hold")
//! for memory: a two-tier store with promotion, opened with the smallest accepted
//! `memory_budget`, serves writers and skewed readers (so flushes, compactions, promotion
//! and RALT all run) while a sampler reads `DbStats::memory` every few milliseconds; the
//! memtables, the cache, the open tables' index and filter blocks, the promotion cache and
//! RALT together stay within the budget at every sample, and each stays within its share.
//!
//! `table_memory_limit_bounds_open_tables` checks the table cache's byte bound alone
//! (invariant 4 for index and filter blocks) and that reads stay correct when tables are
//! evicted and reopened (invariant 1).
//!
//! `a_runtime_cache_resize_changes_only_the_caches_share` checks what
//! `Db::set_cache_capacity` does to the division: only the cache's limit moves.

mod common;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tierkv::{Db, LastLevelFilters, MemoryStats};

const KEYS: u64 = 20_000;

fn value(k: u64, version: u64) -> Vec<u8> {
    sized_value(k, version, 200)
}

fn sized_value(k: u64, version: u64, len: usize) -> Vec<u8> {
    let mut v = format!("{k}:{version}:").into_bytes();
    v.resize(len, b'.');
    v
}

#[test]
fn budget_holds_under_a_write_read_mix() {
    let budget = tierkv::memory::MIN_MEMORY_BUDGET;
    let fast = tempfile::tempdir().unwrap();
    let slow = tempfile::tempdir().unwrap();
    let opts = tierkv::Options {
        memory_budget: Some(budget),
        ..common::two_tier_options(slow.path(), 512 * 1024, true)
    };
    let db = Arc::new(Db::open(fast.path(), opts).unwrap());
    let m = db.stats().memory;
    assert_eq!(m.budget, Some(budget));
    let limits = [
        m.memtables.limit,
        m.cache.limit,
        m.tables.limit,
        m.promotion_cache.limit,
        m.tracker.limit,
    ];
    assert!(limits.iter().all(|l| l.is_some_and(|l| l > 0)), "{m:?}");
    assert_eq!(limits.iter().flatten().sum::<usize>(), budget, "{m:?}");

    // Load about 4 MiB (4x the budget), most of it pushed to the slow tier.
    for k in 0..KEYS {
        db.put(k.to_be_bytes(), value(k, 0)).unwrap();
    }
    db.compact_range(None, None).unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut samples = 0u64;
            let mut peak = MemoryStats::default();
            while !stop.load(Ordering::Relaxed) {
                let m = db.stats().memory;
                assert!(
                    !m.over_budget(),
                    "sample {samples}: {} bytes over the budget of {budget}: {m:?}",
                    m.total_bytes - budget
                );
                for (name, c) in [
                    ("memtables", m.memtables),
                    ("cache", m.cache),
                    ("tables", m.tables),
                    ("promotion cache", m.promotion_cache),
                    ("tracker", m.tracker),
                ] {
                    let limit = c.limit.unwrap_or(0);
                    assert!(
                        c.bytes <= limit,
                        "{name} over its share: {m:?}; RALT: {:?}",
                        db.stats().promotion.ralt
                    );
                }
                for (p, c) in [
                    (&mut peak.memtables, m.memtables),
                    (&mut peak.cache, m.cache),
                    (&mut peak.tables, m.tables),
                    (&mut peak.promotion_cache, m.promotion_cache),
                    (&mut peak.tracker, m.tracker),
                ] {
                    p.bytes = p.bytes.max(c.bytes);
                }
                peak.total_bytes = peak.total_bytes.max(m.total_bytes);
                samples += 1;
                std::thread::sleep(Duration::from_millis(2));
            }
            (samples, peak)
        })
    };
    let deadline = Instant::now() + Duration::from_secs(3);
    let workers: Vec<_> = (0..4u64)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(t);
                let mut version = 1;
                while Instant::now() < deadline {
                    // 90% of operations on the first 5% of the keys: read-hot keys that
                    // live on the slow tier feed the promotion cache and RALT.
                    let k = if rng.gen_bool(0.9) {
                        rng.gen_range(0..KEYS / 20)
                    } else {
                        rng.gen_range(0..KEYS)
                    };
                    if t == 0 || rng.gen_bool(0.1) {
                        db.put(k.to_be_bytes(), value(k, version)).unwrap();
                        version += 1;
                    } else {
                        let v = db.get(k.to_be_bytes()).unwrap().expect("loaded key");
                        assert!(v.starts_with(format!("{k}:").as_bytes()));
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let (samples, peak) = sampler.join().unwrap();
    let s = db.stats();
    assert!(samples > 50, "only {samples} samples");
    // Every component was exercised, not just bounded by being idle.
    assert!(s.flushes > 0 && s.compactions > 0, "{s:?}");
    assert!(s.promotion.cache_inserts > 0, "{:?}", s.promotion);
    for (name, c) in [
        ("memtables", peak.memtables),
        ("cache", peak.cache),
        ("tables", peak.tables),
        ("promotion cache", peak.promotion_cache),
        ("tracker", peak.tracker),
    ] {
        assert!(c.bytes > 0, "{name} never held anything: {peak:?}");
    }
    assert!(peak.total_bytes <= budget, "{peak:?}");
}

#[test]
fn table_memory_limit_bounds_open_tables() {
    let dir = tempfile::tempdir().unwrap();
    let limit = 8 * 1024;
    let opts = tierkv::Options {
        table_memory_limit: Some(limit),
        use_direct_io: false,
        ..common::tiny_options()
    };
    let db = Db::open(dir.path(), opts).unwrap();
    for k in 0..KEYS {
        db.put(k.to_be_bytes(), value(k, 0)).unwrap();
    }
    db.compact_range(None, None).unwrap();
    let files: usize = db.stats().levels.iter().map(|l| l.files).sum();
    assert!(files > 20, "{files} tables: too few to overflow the limit");
    let mut rng = StdRng::seed_from_u64(3);
    for _ in 0..5000 {
        let k = rng.gen_range(0..KEYS);
        let v = db.get(k.to_be_bytes()).unwrap().expect("loaded key");
        assert_eq!(v, value(k, 0));
        let m = db.stats().memory;
        assert_eq!(m.tables.limit, Some(limit));
        assert!(m.tables.bytes <= limit, "{m:?}");
    }
    assert!(db.stats().memory.tables.bytes > 0);
}

/// `Db::set_cache_capacity` under a memory budget changes the cache's share only: the
/// other components keep their limits, and the budget reported is the open budget plus the
/// cache's change (so `total_bytes` is still compared with the sum of the limits), both
/// ways; the options keep the division made at open.
#[test]
fn a_runtime_cache_resize_changes_only_the_caches_share() {
    let dir = tempfile::tempdir().unwrap();
    let budget = 8 << 20;
    let opts = tierkv::Options {
        memory_budget: Some(budget),
        ..tierkv::Options::default()
    };
    let db = Db::open(dir.path(), opts).unwrap();
    let before = db.stats().memory;
    let share = before.cache.limit.unwrap();
    assert_eq!(before.budget, Some(budget));
    assert_eq!(db.options().cache_size, share);
    for cache in [share + (3 << 20), share / 4] {
        db.set_cache_capacity(cache).unwrap();
        for k in 0..2000u64 {
            db.put(k.to_be_bytes(), value(k, 0)).unwrap();
            db.get(k.to_be_bytes()).unwrap();
        }
        let m = db.stats().memory;
        assert_eq!(m.cache.limit, Some(cache));
        assert_eq!(m.budget, Some(budget - share + cache), "{m:?}");
        assert!(m.cache.bytes <= cache, "{m:?}");
        for (name, now, then) in [
            ("memtables", m.memtables, before.memtables),
            ("tables", m.tables, before.tables),
            ("promotion cache", m.promotion_cache, before.promotion_cache),
            ("tracker", m.tracker, before.tracker),
        ] {
            assert_eq!(now.limit, then.limit, "{name}");
        }
        assert!(!m.over_budget(), "{m:?}");
    }
    assert_eq!(db.options().cache_size, share);
}

/// A two-tier store of 8-record blocks in slow-tier `format`, with the deepest level's
/// filters by `last_level_filters`, after the guards of its directories (so it is dropped
/// before them).
fn open_small_records(
    format: tierkv::SlowTierFormat,
    last_level_filters: LastLevelFilters,
) -> ([tempfile::TempDir; 2], Db) {
    let fast = tempfile::tempdir().unwrap();
    let slow = tempfile::tempdir().unwrap();
    let mut opts = tierkv::Options {
        last_level_filters,
        block_records: Some(8),
        ..common::two_tier_options(slow.path(), 256 * 1024, false)
    };
    opts.compaction.slow_tier_format = format;
    let db = Db::open(fast.path(), opts).unwrap();
    ([fast, slow], db)
}

/// `LastLevelFilters::Never` drops the filters of the deepest level only, with either
/// slow-tier format (semi-sorted tables follow the sorted tables' rule): after a full
/// compaction the open tables hold no filter bytes (with `Always` they do), a flush
/// afterwards writes an L0 table with its filter, and every read answers as with filters
/// (present keys found, absent keys None, on both tiers).
#[test]
fn last_level_filters_off_drops_only_the_deepest_levels_filters() {
    let filter_bytes = |db: &Db| db.stats().memory.table_filter_bytes;
    for format in [
        tierkv::SlowTierFormat::Sorted,
        tierkv::SlowTierFormat::SemiSorted,
    ] {
        let mut bytes_after_compaction = Vec::new();
        for filters in [LastLevelFilters::Always, LastLevelFilters::Never] {
            let (_dirs, db) = open_small_records(format, filters);
            for k in (0..KEYS).step_by(2) {
                db.put(k.to_be_bytes(), value(k, 0)).unwrap();
            }
            db.compact_range(None, None).unwrap();
            let read_all = |db: &Db| {
                for k in 0..KEYS {
                    let want = (k % 2 == 0).then(|| value(k, 0));
                    assert_eq!(
                        db.get(k.to_be_bytes()).unwrap(),
                        want,
                        "{format:?}: key {k}"
                    );
                }
            };
            read_all(&db);
            let s = db.stats();
            assert!(
                s.slow_tier_bytes > 0,
                "{format:?}: nothing on the slow tier"
            );
            bytes_after_compaction.push(filter_bytes(&db));
            db.put(1u64.to_be_bytes(), value(1, 0)).unwrap();
            db.flush().unwrap();
            // The get opens the new L0 table (the table cache may have closed others).
            assert_eq!(db.get(1u64.to_be_bytes()).unwrap(), Some(value(1, 0)));
            if filters == LastLevelFilters::Never {
                assert!(
                    filter_bytes(&db) > 0,
                    "{format:?}: the flushed L0 table has a filter"
                );
            }
            db.delete(1u64.to_be_bytes()).unwrap();
            db.flush().unwrap();
            read_all(&db);
            db.verify_checksums().unwrap();
        }
        assert!(
            bytes_after_compaction[0] > 0,
            "{format:?}: {bytes_after_compaction:?}"
        );
        assert_eq!(
            bytes_after_compaction[1], 0,
            "{format:?}: {bytes_after_compaction:?}"
        );
    }
}

/// The last-level rule holds for tables that reach the deepest level by a move as well as
/// for those a merge writes there (`Never`, and `Auto` with records under its 125-byte
/// line): keys above every stored key are flushed into an L0 table (with its filter), and
/// a full compaction carries that table down through levels where nothing overlaps it.
/// Once it lands on the deepest level no open table holds filter bytes, with either
/// slow-tier format, and every read answers.
#[test]
fn a_table_moved_to_the_deepest_level_drops_its_filter() {
    let filter_bytes = |db: &Db| db.stats().memory.table_filter_bytes;
    for (rule, len) in [(LastLevelFilters::Never, 200), (LastLevelFilters::Auto, 60)] {
        for format in [
            tierkv::SlowTierFormat::Sorted,
            tierkv::SlowTierFormat::SemiSorted,
        ] {
            let (_dirs, db) = open_small_records(format, rule);
            // The same bytes either way, so the data reaches the same depth.
            let n = KEYS / 2 * 200 / len as u64;
            for k in 0..n {
                db.put(k.to_be_bytes(), sized_value(k, 0, len)).unwrap();
            }
            db.compact_range(None, None).unwrap();
            assert_eq!(
                filter_bytes(&db),
                0,
                "{rule:?} {format:?}: after the first compaction"
            );
            // A few keys above every stored one: their table overlaps nothing below L0.
            for k in 10 * KEYS..10 * KEYS + 50 {
                db.put(k.to_be_bytes(), sized_value(k, 0, len)).unwrap();
            }
            db.flush().unwrap();
            db.compact_range(None, None).unwrap();
            for k in (0..n).chain(10 * KEYS..10 * KEYS + 50) {
                assert_eq!(
                    db.get(k.to_be_bytes()).unwrap(),
                    Some(sized_value(k, 0, len)),
                    "{rule:?} {format:?}: key {k}"
                );
            }
            assert_eq!(db.get((10 * KEYS - 1).to_be_bytes()).unwrap(), None);
            let s = db.stats();
            assert_eq!(
                s.memory.table_filter_bytes, 0,
                "{rule:?} {format:?}: a table on the deepest level kept its filter ({} trivial \
                 moves)",
                s.trivial_moves
            );
            db.verify_checksums().unwrap();
        }
    }
}

/// `LastLevelFilters::Auto` (the default) judges each deepest-level table by its records:
/// with 60-byte values (about 80 bytes a record, a 10-bit filter would be 1.6% of them)
/// the tables a full compaction leaves hold no filter bytes; with 200-byte values (0.6%)
/// they keep their filters. Present and absent keys answer alike either way.
#[test]
fn auto_last_level_filters_follow_the_record_size() {
    assert_eq!(
        tierkv::Options::default().last_level_filters,
        LastLevelFilters::Auto
    );
    for format in [
        tierkv::SlowTierFormat::Sorted,
        tierkv::SlowTierFormat::SemiSorted,
    ] {
        for (len, filtered) in [(60, false), (200, true)] {
            let (_dirs, db) = open_small_records(format, LastLevelFilters::Auto);
            for k in (0..KEYS).step_by(2) {
                db.put(k.to_be_bytes(), sized_value(k, 0, len)).unwrap();
            }
            db.compact_range(None, None).unwrap();
            let bytes = db.stats().memory.table_filter_bytes;
            assert_eq!(
                bytes > 0,
                filtered,
                "{format:?}, {len}-byte values: {bytes}"
            );
            for k in 0..KEYS {
                let want = (k % 2 == 0).then(|| sized_value(k, 0, len));
                assert_eq!(
                    db.get(k.to_be_bytes()).unwrap(),
                    want,
                    "{format:?}: key {k}"
                );
            }
            db.verify_checksums().unwrap();
        }
    }
}

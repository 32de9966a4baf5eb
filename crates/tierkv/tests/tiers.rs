//! Two-tier placement and accounting (docs/DESIGN.md).
//!
//! Checks invariant 4 of docs/DESIGN.md (every table file lives in the directory of its level's
//! tier, and the fast tier stays within its budget once background work settles),
//! invariant 2 across reopen (placement survives restart, data intact), and that the
//! per-tier, per-cause I/O accounting agrees with the engine's own byte counters.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use tierkv::env::IoCause;
use tierkv::{Db, Options, Tier};

const FD_BUDGET: u64 = 384 * 1024;

fn two_tier_options(slow_dir: &Path) -> Options {
    common::two_tier_options(slow_dir, FD_BUDGET, true)
}

fn sst_sizes(dir: &Path) -> Vec<u64> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".sst"))
        .map(|e| e.metadata().unwrap().len())
        .collect()
}

fn fill(db: &Db, n: u64, round: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model = BTreeMap::new();
    for i in 0..n {
        let k = common::key((i * 7919) % n);
        let v = format!("value-{round}-{i}-{}", "x".repeat(200)).into_bytes();
        db.put(&k, &v).unwrap();
        model.insert(k, v);
    }
    model
}

/// Files in each directory match the levels placed on that tier, per the layout.
fn check_placement(db: &Db) {
    let layout = db.layout().clone();
    let stats = db.stats();
    let mut want_files = [0usize; 2];
    let mut want_bytes = [0u64; 2];
    for l in &stats.levels {
        assert_eq!(l.tier, layout.tiers[l.level], "level {} tier", l.level);
        want_files[l.tier.index()] += l.files;
        want_bytes[l.tier.index()] += l.bytes;
    }
    for tier in Tier::ALL {
        let sizes = sst_sizes(db.tier_dir(tier));
        assert_eq!(sizes.len(), want_files[tier.index()], "{tier:?} file count");
        assert_eq!(
            sizes.iter().sum::<u64>(),
            want_bytes[tier.index()],
            "{tier:?} bytes"
        );
    }
}

#[test]
fn files_live_on_their_levels_tier_and_fd_stays_within_budget() {
    let fast = tempfile::tempdir().unwrap();
    let slow = tempfile::tempdir().unwrap();
    let opts = two_tier_options(slow.path());
    let db = Db::open(fast.path(), opts.clone()).unwrap();
    let layout = db.layout().clone();
    assert!(layout.last_fast_level >= 1 && layout.last_fast_level + 1 < layout.tiers.len());
    let model = fill(&db, 12_000, 0);
    db.flush().unwrap();
    db.wait_for_background().unwrap();
    check_placement(&db);
    let stats = db.stats();
    assert!(stats.slow_tier_bytes > 0, "data reached the slow tier");
    assert!(
        stats.fast_tier_bytes <= FD_BUDGET + opts.target_file_size,
        "fast tier holds {} bytes, budget {FD_BUDGET} + one file {}",
        stats.fast_tier_bytes,
        opts.target_file_size
    );
    // WAL and manifest stay on the fast tier.
    assert!(std::fs::read_dir(slow.path()).unwrap().all(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .ends_with(".sst")));
    db.close().unwrap();

    let db = Db::open(fast.path(), opts).unwrap();
    check_placement(&db);
    for (k, v) in model.iter().step_by(37) {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
    }
    db.compact_range(None, None).unwrap();
    check_placement(&db);
    assert_eq!(db.verify_checksums().unwrap() as usize, model.len());
}

#[test]
fn reopening_with_the_wrong_slow_directory_is_a_clear_error() {
    let fast = tempfile::tempdir().unwrap();
    let slow = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let db = Db::open(fast.path(), two_tier_options(slow.path())).unwrap();
    fill(&db, 8_000, 0);
    db.flush().unwrap();
    db.wait_for_background().unwrap();
    assert!(db.stats().slow_tier_bytes > 0);
    db.close().unwrap();

    let err = match Db::open(fast.path(), two_tier_options(elsewhere.path())) {
        Ok(_) => panic!("opened with a slow directory that lacks the store's files"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains(".sst"), "error names the missing file: {err}");
    assert!(err.contains("slow"), "error names the tier: {err}");

    // Without a slow tier at all, a store that has one is refused too.
    let err = match Db::open(fast.path(), common::tiny_options()) {
        Ok(_) => panic!("opened a two-tier store without its slow tier"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("slow"), "{err}");
    // The right directory still works: nothing was damaged by the refused opens.
    Db::open(fast.path(), two_tier_options(slow.path()))
        .unwrap()
        .close()
        .unwrap();
}

#[test]
fn all_on_fast_keeps_every_file_on_the_fast_tier() {
    let fast = tempfile::tempdir().unwrap();
    let slow = tempfile::tempdir().unwrap();
    let opts = Options {
        all_on_fast: true,
        ..two_tier_options(slow.path())
    };
    let db = Db::open(fast.path(), opts).unwrap();
    fill(&db, 8_000, 0);
    db.flush().unwrap();
    db.wait_for_background().unwrap();
    assert_eq!(db.stats().slow_tier_bytes, 0);
    assert!(sst_sizes(slow.path()).is_empty());
    check_placement(&db);
}

#[test]
fn io_accounting_agrees_with_engine_counters_and_file_sizes() {
    let fast = tempfile::tempdir().unwrap();
    let slow = tempfile::tempdir().unwrap();
    let db = Db::open(fast.path(), two_tier_options(slow.path())).unwrap();
    fill(&db, 10_000, 0);
    db.flush().unwrap();
    db.wait_for_background().unwrap();
    let s = db.stats();
    let written = |cause| {
        s.io.tier(Tier::Fast).cause(cause).write_bytes
            + s.io.tier(Tier::Slow).cause(cause).write_bytes
    };
    assert_eq!(written(IoCause::Flush), s.flush_bytes_written);
    assert_eq!(written(IoCause::Compaction), s.compaction_bytes_written);
    // Per level, the compactions out of it add up to the totals; the fill reached the slow
    // tier, so L0 and the last fast level both compacted.
    let by_level = |f: fn(&tierkv::LevelStats) -> u64| s.levels.iter().map(f).sum::<u64>();
    assert_eq!(
        by_level(|l| l.compaction_write_bytes),
        s.compaction_bytes_written
    );
    assert_eq!(
        by_level(|l| l.compaction_read_bytes),
        s.compaction_bytes_read
    );
    let last_fast = s.levels.iter().rfind(|l| l.tier == Tier::Fast).unwrap();
    assert!(s.levels[0].compaction_write_bytes > 0);
    assert!(last_fast.compaction_write_bytes > 0);
    assert_eq!(s.io.tier(Tier::Slow).cause(IoCause::Wal).write_bytes, 0);
    assert_eq!(s.io.tier(Tier::Slow).cause(IoCause::Flush).write_bytes, 0);
    assert!(s.io.tier(Tier::Slow).cause(IoCause::Compaction).write_bytes > 0);
    // The WAL carries at least every user byte.
    assert!(written(IoCause::Wal) >= s.user_bytes_written);

    // A verification pass reads every table (checksum cause only), on the right tier.
    let before = db.stats().io;
    db.verify_checksums().unwrap();
    let after = db.stats().io;
    for tier in Tier::ALL {
        let read = after.tier(tier).cause(IoCause::Check).read_bytes
            - before.tier(tier).cause(IoCause::Check).read_bytes;
        let on_disk: u64 = sst_sizes(db.tier_dir(tier)).iter().sum();
        assert!(read <= on_disk, "{tier:?}: read {read} of {on_disk}");
        assert!(
            read * 10 >= on_disk * 9,
            "{tier:?}: read {read} of {on_disk}"
        );
        assert_eq!(
            after.tier(tier).cause(IoCause::UserGet).read_bytes,
            before.tier(tier).cause(IoCause::UserGet).read_bytes
        );
    }
}

/// Invariant 4 under a sustained write load: the fast tier's table bytes, sampled while
/// writers keep L0 and the upper levels busy, stay within twice the budget (the budget is a
/// soft limit: L0 backlog and in-flight compaction outputs come on top), because compaction
/// into the slow tier takes priority whenever the fast tier is over budget.
#[test]
fn fast_tier_stays_near_its_budget_under_sustained_writes() {
    let fast = tempfile::tempdir().unwrap();
    let slow = tempfile::tempdir().unwrap();
    let mut opts = common::two_tier_options(slow.path(), FD_BUDGET, false);
    // A slow disk that makes compactions into it slow, as in the benchmark.
    if let Some(s) = opts.slow.as_mut() {
        s.device = tierkv::DeviceProfile {
            iops: Some(2000),
            bandwidth: Some(8 << 20),
            latency_us: 200,
        };
    }
    let db = std::sync::Arc::new(Db::open(fast.path(), opts).unwrap());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..2u64)
        .map(|t| {
            let (db, stop) = (db.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let k = common::key((i * 7919 + t) % 40_000);
                    db.put(&k, [b'w'; 300]).unwrap();
                    i += 1;
                }
            })
        })
        .collect();
    let mut max_fast = 0;
    for _ in 0..150 {
        std::thread::sleep(std::time::Duration::from_millis(20));
        max_fast = max_fast.max(db.stats().fast_tier_bytes);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    let s = db.stats();
    assert!(s.slow_tier_bytes > 0, "data reached the slow tier");
    assert!(
        max_fast <= 2 * FD_BUDGET,
        "the fast tier held {max_fast} bytes, budget {FD_BUDGET}"
    );
    eprintln!(
        "max fast-tier bytes {max_fast} (budget {FD_BUDGET}); slow {}",
        s.slow_tier_bytes
    );
}

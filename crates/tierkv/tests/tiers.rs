//! Two-tier placement and accounting (docs/DESIGN.md).
//!
//! Checks invariant 4 of docs/DESIGN.md (every table file lives in the directory of its level's
//! tier, and the fast tier stays within its budget once background work settles),
//! invariant 2 across reopen (placement survives restart, data intact), and that the
//! per-tier, per-cause I/O accounting agrees with the engine's own byte counters.
//! `a_tiers_device_profile_changes_while_the_store_is_open` checks `Db::set_device_profile`.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};
use tierkv::env::IoCause;
use tierkv::{Db, DeviceProfile, Error, Options, Tier};

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

/// A two-tier store with data on both tiers, closed.
fn two_tier_store(fast: &Path, slow: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = Db::open(fast, two_tier_options(slow)).unwrap();
    let model = fill(&db, 8_000, 0);
    db.flush().unwrap();
    db.wait_for_background().unwrap();
    let stats = db.stats();
    assert!(stats.slow_tier_bytes > 0 && stats.fast_tier_bytes > 0);
    db.close().unwrap();
    model
}

#[test]
fn reopening_with_the_wrong_slow_directory_is_a_clear_error() {
    let fast = tempfile::tempdir().unwrap();
    let slow = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    two_tier_store(fast.path(), slow.path());

    // The recorded slow directory is fixed: another one is refused naming both.
    let err = match Db::open(fast.path(), two_tier_options(elsewhere.path())) {
        Ok(_) => panic!("opened with a slow directory that lacks the store's files"),
        Err(e) => e,
    };
    assert!(matches!(err, tierkv::Error::InvalidArgument(_)), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains(&elsewhere.path().display().to_string())
            && msg.contains(&slow.path().display().to_string()),
        "error names both directories: {msg}"
    );

    // A store without a recorded layout (made before tiers were recorded) still has its
    // manifest check: the missing table is named with its tier.
    std::fs::remove_file(fast.path().join("TIERS")).unwrap();
    let err = match Db::open(fast.path(), two_tier_options(elsewhere.path())) {
        Ok(_) => panic!("opened with a slow directory that lacks the store's files"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains(".sst"), "error names the missing file: {err}");
    assert!(err.contains("slow"), "error names the tier: {err}");
    let err = match Db::open(fast.path(), common::tiny_options()) {
        Ok(_) => panic!("opened a two-tier store without its slow tier"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("slow"), "{err}");
    // The right directory still works (nothing was damaged by the refused opens) and
    // records the tiers again.
    Db::open(fast.path(), two_tier_options(slow.path()))
        .unwrap()
        .close()
        .unwrap();
    assert!(fast.path().join("TIERS").is_file());
}

/// Issue 22: a two-tier store reopened with no tier options uses the tiers it recorded,
/// and finds every key on both tiers (invariant 1 across reopen).
#[test]
fn reopening_without_tiers_uses_the_recorded_ones() {
    let fast = tempfile::tempdir().unwrap();
    let slow = tempfile::tempdir().unwrap();
    let model = two_tier_store(fast.path(), slow.path());
    let stored = Db::stored_tiers(fast.path()).unwrap().unwrap();
    assert_eq!(stored.slow_dir, slow.path());
    assert_eq!(stored.fd_budget, FD_BUDGET);

    let db = Db::open(fast.path(), common::tiny_options()).unwrap();
    assert_eq!(db.tier_dir(Tier::Slow), slow.path());
    assert_eq!(db.options().fd_budget, Some(FD_BUDGET));
    assert!(db.stats().slow_tier_bytes > 0);
    for (k, v) in &model {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v), "key {k:?}");
    }
    check_placement(&db);
    db.close().unwrap();
    // The slow directory alone (the budget from the record) opens it too.
    let only_slow = tierkv::Options {
        fd_budget: None,
        ..two_tier_options(slow.path())
    };
    Db::open(fast.path(), only_slow).unwrap().close().unwrap();
}

#[test]
fn a_different_fd_budget_is_refused_naming_both() {
    let fast = tempfile::tempdir().unwrap();
    let slow = tempfile::tempdir().unwrap();
    two_tier_store(fast.path(), slow.path());
    for slow_given in [true, false] {
        let mut opts = two_tier_options(slow.path());
        opts.fd_budget = Some(FD_BUDGET * 2);
        if !slow_given {
            opts.slow = None;
        }
        let err = match Db::open(fast.path(), opts) {
            Ok(_) => panic!("opened with a different fd budget"),
            Err(e) => e,
        };
        assert!(matches!(err, tierkv::Error::InvalidArgument(_)), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains(&FD_BUDGET.to_string()) && msg.contains(&(FD_BUDGET * 2).to_string()),
            "error names both budgets: {msg}"
        );
    }
}

#[test]
fn a_missing_slow_directory_is_named_not_corruption() {
    let fast = tempfile::tempdir().unwrap();
    let parent = tempfile::tempdir().unwrap();
    let slow = parent.path().join("slow");
    two_tier_store(fast.path(), &slow);
    let moved = parent.path().join("moved");
    std::fs::rename(&slow, &moved).unwrap();
    for opts in [common::tiny_options(), two_tier_options(&slow)] {
        let err = match Db::open(fast.path(), opts) {
            Ok(_) => panic!("opened without its slow directory"),
            Err(e) => e,
        };
        assert!(!err.is_corruption(), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("slow-tier directory {} ", slow.display()))
                && msg.contains("not found"),
            "{msg}"
        );
        assert!(
            !slow.exists(),
            "the refused open created the slow directory"
        );
    }
    std::fs::rename(&moved, &slow).unwrap();
    Db::open(fast.path(), common::tiny_options())
        .unwrap()
        .close()
        .unwrap();
}

/// Invariant 3 for the tier record: a damaged `TIERS` is a corruption naming the file,
/// never a silent fall back to one directory.
#[test]
fn a_damaged_tier_record_is_corruption_naming_the_file() {
    let fast = tempfile::tempdir().unwrap();
    let slow = tempfile::tempdir().unwrap();
    two_tier_store(fast.path(), slow.path());
    let file = fast.path().join("TIERS");
    let mut bytes = std::fs::read(&file).unwrap();
    let n = bytes.len();
    bytes[n - 6] ^= 0x40;
    std::fs::write(&file, &bytes).unwrap();
    let err = match Db::open(fast.path(), common::tiny_options()) {
        Ok(_) => panic!("opened with a damaged tier record"),
        Err(e) => e,
    };
    assert!(err.is_corruption(), "{err}");
    assert!(
        err.to_string().contains(&file.display().to_string()),
        "{err}"
    );
}

/// Creating a store among other files is refused, and creates nothing there.
#[test]
fn creating_a_store_in_a_non_empty_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), b"mine").unwrap();
    let err = match Db::open(dir.path(), common::tiny_options()) {
        Ok(_) => panic!("created a store among other files"),
        Err(e) => e,
    };
    assert!(matches!(err, tierkv::Error::NotAStore(_)), "{err}");
    assert!(err.to_string().contains("not empty"), "{err}");
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(names.len(), 1, "nothing was created");
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

/// A long scan with the block cache bypassed (`fill_cache: false`) reads ahead on each
/// tier holding enough of the data (the slow tier always does): its read calls (counted per tier under `IoCause::UserScan`) are a small fraction
/// of the data blocks it passes (1 KiB blocks here: one read call each without readahead),
/// and it returns every record in order.
#[test]
fn a_long_scan_reads_ahead_on_both_tiers() {
    let fast = tempfile::tempdir().unwrap();
    let slow = tempfile::tempdir().unwrap();
    // Tables of many blocks (a table's first two blocks are plain reads).
    let opts = Options {
        block_size: 1024,
        target_file_size: 256 * 1024,
        ..two_tier_options(slow.path())
    };
    let db = Db::open(fast.path(), opts).unwrap();
    let n = 10_000u64;
    let model = fill(&db, n, 0);
    db.flush().unwrap();
    db.wait_for_background().unwrap();
    let before = db.stats().io;
    let ropts = tierkv::ReadOptions {
        fill_cache: false,
        ..tierkv::ReadOptions::new()
    };
    let mut it = db.iter_opt(&ropts).unwrap();
    it.seek_to_first().unwrap();
    let mut want = model.iter();
    let mut seen = 0u64;
    while it.valid() {
        let (k, v) = want.next().expect("more records than written");
        assert_eq!((it.key(), it.value()), (k.as_slice(), v.as_slice()));
        seen += 1;
        it.next().unwrap();
    }
    assert_eq!(seen, model.len() as u64);
    let after = db.stats().io;
    let (mut all_ops, mut all_blocks) = (0, 0);
    for tier in Tier::ALL {
        let scan = |s: &tierkv::env::IoStatsSnapshot| s.tier(tier).cause(IoCause::UserScan);
        let ops = scan(&after).read_ops - scan(&before).read_ops;
        let bytes = scan(&after).read_bytes - scan(&before).read_bytes;
        let blocks = sst_sizes(db.tier_dir(tier)).iter().sum::<u64>() / 1024;
        eprintln!("{tier:?}: {ops} read calls, {bytes} bytes, about {blocks} blocks");
        // How the 10 MB split between the tiers depends on when background compactions
        // ran; a tier left with a few dozen blocks (a handful of memtable-sized tables,
        // whose first two blocks are plain reads each) says nothing about readahead. Since
        // memtables hold 1.7x the entries (stop 40) the fast tier is sometimes left with
        // 52 blocks in 7-8 tables and 20 read calls: under 100 blocks it is not checked.
        if blocks < 100 {
            assert!(tier == Tier::Fast, "{tier:?}: only {blocks} blocks of data");
            // A check left out is reported like any skip (docs/TESTING.md, "Skips").
            tierkv::testing::skip(
                "a_long_scan_reads_ahead_on_both_tiers (its fast-tier readahead check)",
                &format!("the fast tier holds only {blocks} blocks of data this run"),
            );
            continue;
        }
        // The fast tier's tables are few blocks each (L0 and L1): less to gain there.
        assert!(
            ops * 3 <= blocks,
            "{tier:?}: {ops} read calls for about {blocks} blocks ({bytes} bytes)"
        );
        all_ops += ops;
        all_blocks += blocks;
    }
    assert!(all_blocks > 50, "no tier held enough blocks to check");
    assert!(
        all_ops * 10 <= all_blocks,
        "{all_ops} read calls for about {all_blocks} blocks"
    );
}

/// Bytes of the WAL files in the fast directory.
fn wal_file_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

/// Slow levels sized from the data (docs/DESIGN.md, "Slow levels sized from the data"):
/// with the slow tier holding many times the last fast level, the targets the store
/// reports (`DbStats::levels[*].target_bytes`, the picker's) for the slow levels above the
/// deepest holding data are no longer the layout's: the first is at least the last fast
/// level's and below the layout's, each next one is one ratio (at most the size ratio)
/// times the one above, and once background work settles each of those levels holds at
/// most its target. With `dynamic_slow_levels` off they are the layout's.
#[test]
fn slow_levels_are_sized_from_their_data() {
    for dynamic in [true, false] {
        let fast = tempfile::tempdir().unwrap();
        let slow = tempfile::tempdir().unwrap();
        // A small fast tier, so that the slow tier spreads over three levels.
        let mut opts = common::two_tier_options(slow.path(), FD_BUDGET / 3, false);
        opts.compaction.dynamic_slow_levels = dynamic;
        let ratio = opts.level_size_ratio as f64;
        let db = Db::open(fast.path(), opts).unwrap();
        let layout = db.layout().clone();
        let k = layout.last_fast_level;
        let model = fill(&db, 30_000, 0);
        db.flush().unwrap();
        db.wait_for_background().unwrap();
        let s = db.stats();
        let deepest = (k + 1..s.levels.len())
            .rev()
            .find(|&l| s.levels[l].bytes > 0)
            .expect("data on the slow tier");
        let slow_bytes: u64 = s.levels[k + 1..].iter().map(|l| l.bytes).sum();
        let last_fast = layout.targets[k];
        assert!(
            slow_bytes > 20 * last_fast,
            "{slow_bytes} slow bytes under a last fast level of {last_fast}"
        );
        let targets: Vec<u64> = s.levels.iter().map(|l| l.target_bytes).collect();
        if !dynamic {
            assert_eq!(targets[1..], layout.targets[1..], "static");
            continue;
        }
        assert!(
            deepest >= k + 2,
            "the data spread over one slow level: {targets:?}"
        );
        let first = targets[k + 1];
        assert!(
            first >= last_fast && first < layout.targets[k + 1],
            "first slow level {first} against the last fast {last_fast} and the layout's {}",
            layout.targets[k + 1]
        );
        for l in k + 2..deepest {
            let x = targets[l] as f64 / targets[l - 1] as f64;
            assert!(x >= 1.0 && x <= ratio, "L{l}: ratio {x} in {targets:?}");
            if l > k + 2 {
                let above = targets[l - 1] as f64 / targets[l - 2] as f64;
                assert!((x - above).abs() < 0.01 * x, "unequal ratios {targets:?}");
            }
        }
        for l in &s.levels[k + 1..deepest] {
            assert!(
                l.bytes <= l.target_bytes,
                "L{} holds {} over its target {} after settling",
                l.level,
                l.bytes,
                l.target_bytes
            );
        }
        for (k, v) in model.iter().step_by(97) {
            assert_eq!(db.get(k).unwrap().as_deref(), Some(&v[..]));
        }
    }
}

/// Invariant 4 with the budget used fully (`CompactionOptions::fill_fast_budget`): the
/// store counts its live WALs exactly (`DbStats::wal_bytes` equals the `.log` files' bytes,
/// after writes, after a flush retires them and after recovery), and L0's byte target is
/// the fast-disk budget less the WALs and the fast levels below it, never below the
/// layout's share (the other fast levels keep the layout's); once background work settles,
/// tables and WALs together hold no more than the budget and one file.
#[test]
fn level0_takes_the_budget_the_wals_and_fast_levels_leave() {
    let fast = tempfile::tempdir().unwrap();
    let slow = tempfile::tempdir().unwrap();
    let opts = common::two_tier_options(slow.path(), FD_BUDGET, false);
    let db = Db::open(fast.path(), opts.clone()).unwrap();
    let layout = db.layout().clone();
    let k = layout.last_fast_level;
    let check = |db: &Db, when: &str| {
        let s = db.stats();
        assert_eq!(s.wal_bytes, wal_file_bytes(fast.path()), "WAL bytes {when}");
        let below: u64 = s.levels[1..=k].iter().map(|l| l.bytes).sum();
        let want = FD_BUDGET
            .saturating_sub(s.wal_bytes + below)
            .max(layout.targets[0]);
        assert_eq!(s.levels[0].target_bytes, want, "L0 target {when}");
        // The slow levels are sized from their data (`slow_levels_are_sized_from_their_data`).
        for l in &s.levels[1..=k] {
            assert_eq!(
                l.target_bytes, layout.targets[l.level],
                "L{} {when}",
                l.level
            );
        }
        s
    };
    // Well past the budget, so that data reaches the slow tier.
    fill(&db, 6_000, 0);
    // Settled, so that no flush retires a WAL between the stats and the listing.
    db.wait_for_background().unwrap();
    let s = check(&db, "after writes");
    assert!(s.wal_bytes > 0);
    db.flush().unwrap();
    db.wait_for_background().unwrap();
    let s = check(&db, "after a flush");
    assert!(s.slow_tier_bytes > 0, "data reached the slow tier");
    assert!(
        s.levels[0].target_bytes > layout.targets[0],
        "with the WALs retired L0 may hold more than the layout's {}",
        layout.targets[0]
    );
    assert!(
        s.fast_tier_bytes + s.wal_bytes <= FD_BUDGET + opts.target_file_size,
        "tables {} and WALs {} over the budget {FD_BUDGET}",
        s.fast_tier_bytes,
        s.wal_bytes
    );
    // Unflushed writes survive a reopen in their WAL, which recovery counts again.
    for i in 0..50u64 {
        db.put(common::key(i), [b'r'; 100]).unwrap();
    }
    db.close().unwrap();
    let db = Db::open(fast.path(), opts).unwrap();
    let s = check(&db, "after recovery");
    assert!(
        s.wal_bytes > 50 * 100,
        "recovered WAL counted: {}",
        s.wal_bytes
    );
}

/// Scan-triggered L0 compaction (`CompactionOptions::compact_scanned_level0`): L0 tables
/// under their compaction trigger stay while only writes and point reads arrive, each
/// a read for every scan's seek; once scans have read them as much as compacting them
/// costs, L0 goes into L1 without a write, and the same scans then read less; every scan
/// answers as the model (1).
#[test]
fn scans_compact_the_level0_tables_they_read() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        level0_compaction_trigger: 8,
        level0_slowdown_trigger: 20,
        level0_stop_trigger: 36,
        cache_size: 0,
        use_direct_io: false,
        compaction: tierkv::CompactionOptions {
            expiry_check_interval: std::time::Duration::from_millis(10),
            ..Default::default()
        },
        ..common::tiny_options()
    };
    let db = Db::open(dir.path(), opts).unwrap();
    let mut model = BTreeMap::new();
    // Six flushes of keys spread over the whole range: six overlapping L0 tables.
    for round in 0..6u64 {
        for i in 0..60u64 {
            let (k, v) = (common::key(i * 6 + round), vec![b'v'; 100]);
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
        db.flush().unwrap();
    }
    db.wait_for_background().unwrap();
    let level0 = |db: &Db| db.stats().levels[0].files;
    assert_eq!(level0(&db), 6, "L0 compacted without scans");
    for (k, v) in &model {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
    }
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(level0(&db), 6, "point reads compacted L0");
    let scans = |db: &Db| {
        let reads = |db: &Db| db.stats().io.fast.cause(IoCause::UserScan).read_ops;
        let before = reads(db);
        for i in 0..300u64 {
            let from = common::key(i % 360);
            let got = db.scan(Some(&from), None, 10).unwrap();
            let want: Vec<_> = model
                .range(from..)
                .take(10)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            assert!(got == want, "a scan differs from the model");
        }
        reads(db) - before
    };
    let reads_before = scans(&db);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while level0(&db) > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    db.wait_for_background().unwrap();
    assert_eq!(level0(&db), 0, "scans did not compact L0");
    assert!(db.stats().scanned_level0_compactions >= 1);
    let reads_after = scans(&db);
    assert!(
        reads_after * 2 <= reads_before,
        "scans read {reads_after} blocks after L0 was compacted, {reads_before} before"
    );
}

/// Reads keys of `model` until `reads` gets were answered by the slow tier; returns the
/// time taken and the slow-tier reads made (every one a get's: nothing else runs).
fn slow_gets(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, reads: u64) -> (Duration, u64) {
    let before = db.stats();
    let start = Instant::now();
    for (k, v) in model.iter().cycle() {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
        if db.stats().get_sources.slow - before.get_sources.slow >= reads {
            break;
        }
    }
    let took = start.elapsed();
    let ops = db.stats().io.slow.total().read_ops - before.io.slow.total().read_ops;
    (took, ops)
}

/// `Db::set_device_profile`: a slow tier switched from `none` to `custom:100:1:0` (10 ms
/// per read at 100 IOPS) makes its gets take at least 10 ms per read from then on, and
/// switching back to `none` removes the delay; the stats report the profile in force, the
/// options keep the one at open. (The model's exact schedule through a change is
/// `env::device::tests::the_profile_changes_at_runtime`; here only lower bounds of the
/// wall clock are trusted, plus the absence of a 10 ms-per-read delay.) Bad profiles and
/// the slow tier of a one-tier store are refused.
#[test]
fn a_tiers_device_profile_changes_while_the_store_is_open() {
    let fast = tempfile::tempdir().unwrap();
    let slow = tempfile::tempdir().unwrap();
    let opts = Options {
        cache_size: 0,
        ..common::two_tier_options(slow.path(), FD_BUDGET, false)
    };
    let db = Db::open(fast.path(), opts).unwrap();
    let model = fill(&db, 4000, 0);
    db.compact_range(None, None).unwrap();
    db.wait_for_background().unwrap();
    assert!(db.stats().slow_tier_bytes > 0);
    assert_eq!(db.stats().slow_device, Some(DeviceProfile::none()));
    assert_eq!(db.stats().fast_device, DeviceProfile::none());

    let custom: DeviceProfile = "custom:100:1:0".parse().unwrap();
    db.set_device_profile(Tier::Slow, custom).unwrap();
    assert_eq!(db.stats().slow_device, Some(custom));
    let (took, reads) = slow_gets(&db, &model, 20);
    assert!(reads >= 20, "{reads} slow reads");
    // Back to back at 100 IOPS: 10 ms each, less the 2 ms burst of an idle start.
    let floor = Duration::from_millis(10 * reads - 2);
    assert!(
        took >= floor,
        "{reads} slow reads at 100 IOPS took {took:?}, want at least {floor:?}"
    );

    db.set_device_profile(Tier::Slow, DeviceProfile::none())
        .unwrap();
    assert_eq!(db.stats().slow_device, Some(DeviceProfile::none()));
    let (took, reads) = slow_gets(&db, &model, 20);
    assert!(reads >= 20, "{reads} slow reads");
    assert!(
        took < Duration::from_millis(10 * reads - 2),
        "{reads} slow reads without a device model took {took:?}: still delayed"
    );

    db.set_device_profile(Tier::Fast, DeviceProfile::gp3_max())
        .unwrap();
    assert_eq!(db.stats().fast_device, DeviceProfile::gp3_max());
    // The options keep the profiles the store was opened with.
    assert_eq!(db.options().fast_device, DeviceProfile::none());
    assert_eq!(
        db.options().slow.as_ref().unwrap().device,
        DeviceProfile::none()
    );
    for bad in [
        DeviceProfile {
            iops: Some(0),
            ..DeviceProfile::none()
        },
        DeviceProfile {
            latency_us: DeviceProfile::MAX_LATENCY_US + 1,
            ..DeviceProfile::none()
        },
    ] {
        assert!(matches!(
            db.set_device_profile(Tier::Slow, bad),
            Err(Error::InvalidArgument(_))
        ));
    }
    assert_eq!(db.stats().fast_device, DeviceProfile::gp3_max());
    drop(db);

    let one = tempfile::tempdir().unwrap();
    let db = Db::open(one.path(), common::tiny_options()).unwrap();
    assert_eq!(db.stats().slow_device, None);
    match db.set_device_profile(Tier::Slow, custom) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("no slow tier"), "{m}"),
        other => panic!("{other:?}"),
    }
    db.set_device_profile(Tier::Fast, custom).unwrap();
    assert_eq!(db.stats().fast_device, custom);
}

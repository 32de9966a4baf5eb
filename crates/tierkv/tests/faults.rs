//! Injected faults: failing writes, reads and syncs, full disks, and power cuts that drop
//! every unsynced byte (docs/DESIGN.md).
//!
//! Checks invariant 2 (durability: a synced write survives a power cut, and a cut loses only
//! a suffix of the writes), invariant 3 (an injected read error is reported, never turned
//! into wrong data) and invariant 4 (a full fast disk spills tables to the slow tier; writes
//! fail, clearly, when both tiers are full or the WAL cannot grow), and recovery after a full
//! disk (a reopen needs room for a manifest, not the WAL's size). `TIERKV_FAULT_ROUNDS` lengthens the
//! torture test (default 12 rounds).

mod common;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use tierkv::env::{FaultError, FaultInjector, FaultOp, FaultRule, Trigger};
use tierkv::{Db, Error, Options, Tier, WriteOptions};

fn key(i: u64) -> Vec<u8> {
    format!("k{i:08}").into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    let mut v = format!("value-{i}-").into_bytes();
    v.resize(150 + (i % 5) as usize * 40, b'v');
    v
}

fn with_faults(opts: Options, faults: &Arc<FaultInjector>) -> Options {
    Options {
        fault_injector: Some(faults.clone()),
        ..opts
    }
}

fn rule(tier: Option<Tier>, op: FaultOp, name: &str, error: FaultError, t: Trigger) -> FaultRule {
    FaultRule {
        tier,
        op,
        name_contains: (!name.is_empty()).then(|| name.to_string()),
        error,
        trigger: t,
    }
}

/// Writes keys `from..` until a write fails; returns the first key not acknowledged and the
/// error.
fn write_until_error(db: &Db, from: u64) -> (u64, Error) {
    let mut next = from;
    loop {
        match db.put(key(next), value(next)) {
            Ok(()) => next += 1,
            Err(e) => return (next, e),
        }
        assert!(next < from + 200_000, "the writes never failed");
    }
}

/// Keys `0..n` are present with their values.
fn check_prefix(db: &Db, n: u64) {
    for i in 0..n {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i)), "key {i}");
    }
}

/// Number of consecutive keys present from 0; asserts nothing exists beyond them (a gap
/// would mean a middle write was lost).
fn surviving_prefix(db: &Db) -> u64 {
    let mut n = 0;
    while let Some(v) = db.get(key(n)).unwrap() {
        assert_eq!(v, value(n), "key {n} has a wrong value");
        n += 1;
    }
    let after = db.scan(Some(&key(n)), None, 1).unwrap();
    assert!(after.is_empty(), "a key after the gap at {n} survived");
    n
}

#[test]
fn failed_flush_makes_the_store_read_only_and_reopen_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let faults = FaultInjector::new();
    let opts = with_faults(common::tiny_options(), &faults);
    let db = Db::open(dir.path(), opts).unwrap();
    for i in 0..200 {
        db.put(key(i), value(i)).unwrap();
    }
    faults.add(rule(
        None,
        FaultOp::Write,
        ".sst",
        FaultError::Io,
        Trigger::After(0),
    ));
    let (acked, err) = write_until_error(&db, 200);
    assert!(matches!(err, Error::Background(_)), "{err}");
    assert!(err.to_string().contains(".sst"), "names the file: {err}");
    // Reads keep working from memtables and older tables.
    check_prefix(&db, acked);
    // A later write gets the same clear error.
    assert!(matches!(db.put(b"x", b"y"), Err(Error::Background(_))));
    faults.clear();
    drop(db);
    let db = Db::open(dir.path(), common::tiny_options()).unwrap();
    check_prefix(&db, acked);
    db.put(b"after", b"reopen").unwrap();
    db.flush().unwrap();
}

#[test]
fn power_cut_keeps_every_synced_write_and_loses_only_a_suffix() {
    let dir = tempfile::tempdir().unwrap();
    let faults = FaultInjector::new();
    let opts = with_faults(common::tiny_options(), &faults);
    let mut rng = StdRng::seed_from_u64(11);
    let mut next = 0u64;
    let mut dropped_bytes = 0;
    for round in 0..6 {
        let db = Db::open(dir.path(), opts.clone()).unwrap();
        let present = surviving_prefix(&db);
        assert!(present <= next, "round {round}: keys appeared from nowhere");
        next = present;
        let mut last_synced = None;
        for _ in 0..rng.gen_range(200..1500) {
            let sync = rng.gen_bool(0.05);
            db.put_opt(key(next), value(next), &WriteOptions { sync })
                .unwrap();
            if sync {
                last_synced = Some(next);
            }
            next += 1;
        }
        faults.crash();
        drop(db);
        dropped_bytes += faults.drop_unsynced_data().unwrap();
        faults.clear();
        let db = Db::open(dir.path(), opts.clone()).unwrap();
        let present = surviving_prefix(&db);
        if let Some(s) = last_synced {
            assert!(
                present > s,
                "round {round}: synced write {s} lost ({present} kept)"
            );
        }
        next = present;
    }
    assert!(dropped_bytes > 0, "the power cuts never dropped anything");
}

#[test]
fn full_fast_disk_spills_tables_to_the_slow_tier() {
    let fast = tempfile::tempdir().unwrap();
    let slow = tempfile::tempdir().unwrap();
    let faults = FaultInjector::new();
    // Every level on the fast tier: only a spill can put a table on the slow one.
    let opts = Options {
        all_on_fast: true,
        ..with_faults(
            common::two_tier_options(slow.path(), 1 << 20, false),
            &faults,
        )
    };
    let db = Db::open(fast.path(), opts).unwrap();
    assert!(db.layout().tiers.iter().all(|t| *t == Tier::Fast));
    faults.add(rule(
        Some(Tier::Fast),
        FaultOp::Create,
        ".sst",
        FaultError::NoSpace,
        Trigger::After(3),
    ));
    for i in 0..4000 {
        db.put(key(i), value(i)).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_background().unwrap();
    check_prefix(&db, 4000);
    let s = db.stats();
    assert!(s.slow_tier_bytes > 0, "tables spilled to the slow tier");
    assert!(faults.injected() > 0);
    let on_slow = std::fs::read_dir(slow.path()).unwrap().count();
    assert!(on_slow > 0);
    db.verify_checksums().unwrap();
}

#[test]
fn both_tiers_full_fails_writes_with_a_clear_error() {
    let fast = tempfile::tempdir().unwrap();
    let slow = tempfile::tempdir().unwrap();
    let faults = FaultInjector::new();
    let opts = with_faults(
        common::two_tier_options(slow.path(), 64 << 20, false),
        &faults,
    );
    let db = Db::open(fast.path(), opts).unwrap();
    for i in 0..100 {
        db.put(key(i), value(i)).unwrap();
    }
    faults.add(rule(
        None,
        FaultOp::Create,
        ".sst",
        FaultError::NoSpace,
        Trigger::After(0),
    ));
    let (acked, err) = write_until_error(&db, 100);
    assert!(err.is_no_space(), "{err}");
    assert!(err.to_string().contains("both tiers are full"), "{err}");
    check_prefix(&db, acked);
}

#[test]
fn slow_tier_budget_reached_rejects_writes_clearly() {
    let fast = tempfile::tempdir().unwrap();
    let slow = tempfile::tempdir().unwrap();
    let mut opts = common::two_tier_options(slow.path(), 128 * 1024, false);
    if let Some(s) = opts.slow.as_mut() {
        s.budget = Some(256 * 1024);
    }
    let db = Db::open(fast.path(), opts).unwrap();
    let (acked, err) = write_until_error(&db, 0);
    assert!(matches!(err, Error::NoSpace(_)), "{err}");
    assert!(err.to_string().contains("slow tier holds"), "{err}");
    check_prefix(&db, acked);
}

#[test]
fn read_errors_are_reported_never_turned_into_wrong_data() {
    let dir = tempfile::tempdir().unwrap();
    let faults = FaultInjector::new();
    let opts = Options {
        cache_size: 0,
        max_open_files: 10,
        ..with_faults(common::tiny_options(), &faults)
    };
    let db = Db::open(dir.path(), opts).unwrap();
    for i in 0..3000 {
        db.put(key(i), value(i)).unwrap();
    }
    db.compact_range(None, None).unwrap();
    faults.add(rule(
        None,
        FaultOp::Read,
        "",
        FaultError::Io,
        Trigger::Random {
            probability: 0.2,
            seed: 5,
        },
    ));
    let (mut ok, mut failed) = (0, 0);
    for i in 0..3000 {
        match db.get(key(i)) {
            Ok(v) => {
                assert_eq!(v, Some(value(i)), "key {i}");
                ok += 1;
            }
            Err(e) => {
                assert!(matches!(e, Error::Io { .. }), "{e}");
                failed += 1;
            }
        }
    }
    assert!(ok > 0 && failed > 0, "{ok} ok, {failed} failed");
    faults.clear();
    check_prefix(&db, 3000);
}

/// Invariant 3 for scans: a seek reads its tables' first blocks together in one round
/// (`crate::env::read_round`), and a read of that round that fails must surface as the
/// seek's error or be read again, never as a missing or wrong entry. Scans over three
/// overlapping tables (the bottom level and two L0 tables), no block cache, under random
/// read faults: each answers exactly the model's entries or an I/O error; with the faults
/// cleared, every scan answers.
#[test]
fn scans_under_read_faults_answer_the_model_or_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let faults = FaultInjector::new();
    let opts = Options {
        cache_size: 0,
        level0_compaction_trigger: 8,
        ..with_faults(common::tiny_options(), &faults)
    };
    let db = Db::open(dir.path(), opts).unwrap();
    let mut model = std::collections::BTreeMap::new();
    for i in 0..3000 {
        db.put(key(i), value(i)).unwrap();
        model.insert(key(i), value(i));
    }
    db.compact_range(None, None).unwrap();
    for step in [3, 7] {
        for i in (0..3000).step_by(step) {
            let v = format!("{i}-{step}").into_bytes();
            db.put(key(i), &v).unwrap();
            model.insert(key(i), v);
        }
        db.flush().unwrap();
    }
    db.wait_for_background().unwrap();
    type Entries = Vec<(Vec<u8>, Vec<u8>)>;
    let scan = |start: u64| -> Result<Entries, Error> {
        let mut it = db.iter()?;
        it.seek(key(start))?;
        let mut out = Vec::new();
        while it.valid() && out.len() < 40 {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.next()?;
        }
        Ok(out)
    };
    let expect = |start: u64| -> Entries {
        model
            .range(key(start)..)
            .take(40)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    faults.add(rule(
        None,
        FaultOp::Read,
        "",
        FaultError::Io,
        Trigger::Random {
            probability: 0.2,
            seed: 11,
        },
    ));
    let (mut ok, mut failed) = (0, 0);
    for n in 0..400u64 {
        let start = n * 7 % 3000;
        match scan(start) {
            Ok(got) => {
                assert_eq!(got, expect(start), "scan from {start}");
                ok += 1;
            }
            Err(e) => {
                assert!(matches!(e, Error::Io { .. }), "{e}");
                failed += 1;
            }
        }
    }
    assert!(ok > 0 && failed > 0, "{ok} ok, {failed} failed");
    faults.clear();
    for n in 0..400u64 {
        let start = n * 7 % 3000;
        assert_eq!(scan(start).unwrap(), expect(start), "scan from {start}");
    }
}

/// Random write, sync and create faults while writing, each failure followed by a power
/// cut and a reopen: every synced write survives, the survivors form a prefix. Prints the
/// counts recorded in docs/TESTING.md.
#[test]
fn fault_torture() {
    let rounds = common::env_count("TIERKV_FAULT_ROUNDS", 12);
    let fast = tempfile::tempdir().unwrap();
    let slow = tempfile::tempdir().unwrap();
    let faults = FaultInjector::new();
    let opts = with_faults(
        common::two_tier_options(slow.path(), 256 * 1024, false),
        &faults,
    );
    let mut rng = StdRng::seed_from_u64(99);
    let mut next = 0;
    let (mut failures, mut dropped) = (0, 0);
    for round in 0..rounds {
        let db = Db::open(fast.path(), opts.clone()).unwrap();
        let present = surviving_prefix(&db);
        assert!(present <= next, "round {round}: keys appeared from nowhere");
        next = present;
        let ops = [FaultOp::Write, FaultOp::Sync, FaultOp::Create];
        faults.add(rule(
            None,
            ops[rng.gen_range(0..ops.len())],
            "",
            if rng.gen_bool(0.5) {
                FaultError::Io
            } else {
                FaultError::NoSpace
            },
            Trigger::Random {
                probability: rng.gen_range(0.0005..0.01),
                seed: round,
            },
        ));
        let mut last_synced = None;
        for _ in 0..rng.gen_range(500..3000) {
            let sync = rng.gen_bool(0.1);
            match db.put_opt(key(next), value(next), &WriteOptions { sync }) {
                Ok(()) => {
                    if sync {
                        last_synced = Some(next);
                    }
                    next += 1;
                }
                Err(_) => {
                    failures += 1;
                    break;
                }
            }
        }
        faults.crash();
        drop(db);
        dropped += faults.drop_unsynced_data().unwrap();
        faults.clear();
        let db = Db::open(fast.path(), opts.clone()).unwrap();
        let present = surviving_prefix(&db);
        if let Some(s) = last_synced {
            assert!(
                present > s,
                "round {round}: synced write {s} lost ({present} kept)"
            );
        }
        next = present;
        db.verify_checksums().unwrap();
    }
    eprintln!(
        "fault torture: {rounds} rounds, {} faults injected, {failures} writes failed, \
         {dropped} unsynced bytes dropped, {next} keys survive",
        faults.injected()
    );
}

/// Size of the WAL files in `dir`.
fn wal_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

/// Invariant 2 across a full disk: the disk fills while synced writes go on, the
/// store turns read-only; a reopen with much less space than the WAL holds (the open
/// writes a manifest and an empty WAL, it does not flush the replayed WAL) keeps every
/// acknowledged write and takes writes again; a power cut right after that loses no
/// synced write; with no space at all the open says how much it needs and where.
#[test]
fn reopen_after_a_full_disk_needs_only_a_little_space() {
    let dir = tempfile::tempdir().unwrap();
    let faults = FaultInjector::new();
    // One memtable holds everything written, as a 64 MiB memtable held the 57 MB WAL of the
    // audit: the replayed WAL is all in memory, nothing of it in a table.
    let opts = Options {
        write_buffer_size: 1 << 20,
        ..with_faults(common::tiny_options(), &faults)
    };
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    faults.set_free_space(None, Some(256 * 1024));
    let mut acked = 0u64;
    let err = loop {
        let sync = acked.is_multiple_of(3);
        match db.put_opt(key(acked), value(acked), &WriteOptions { sync }) {
            Ok(()) => acked += 1,
            Err(e) => break e,
        }
        assert!(acked < 100_000, "the disk never filled");
    };
    assert!(err.is_no_space(), "{err}");
    assert!(err.to_string().contains(".log"), "names the WAL: {err}");
    assert!(db.put(b"x", b"y").is_err(), "the store is read-only");
    check_prefix(&db, acked);
    drop(db);
    let wal = wal_bytes(dir.path());
    assert!(wal > 200 * 1024, "the WAL holds the writes: {wal} bytes");

    // No space at all: the open cannot write its manifest and says what it needs.
    faults.set_free_space(None, Some(0));
    let e = Db::open(dir.path(), opts.clone())
        .err()
        .expect("no space to open");
    let msg = e.to_string();
    assert!(matches!(e, Error::NoSpace(_)), "{msg}");
    assert!(msg.contains("needs about"), "{msg}");
    assert!(msg.contains(&dir.path().display().to_string()), "{msg}");

    // A sixteenth of the WAL's size is enough to open and to take writes.
    faults.set_free_space(None, Some(wal / 16));
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    check_prefix(&db, acked);
    let more = acked + 20;
    for i in acked..more {
        db.put_opt(key(i), value(i), &WriteOptions { sync: true })
            .unwrap();
    }
    check_prefix(&db, more);

    // A power cut right after: the replayed WAL and the new one are both still live.
    faults.crash();
    drop(db);
    faults.drop_unsynced_data().unwrap();
    faults.clear();
    let db = Db::open(dir.path(), opts).unwrap();
    assert_eq!(surviving_prefix(&db), more);
    db.put(b"after", b"recovery").unwrap();
    db.flush().unwrap();
    check_prefix(&db, more);
    // The flush retired every WAL the memtable came from.
    assert_eq!(wal_bytes(dir.path()), 0);
    db.verify_checksums().unwrap();
}

/// Invariant 2 when the disk fills at any point (a WAL append, a flush, a compaction, a
/// manifest edit): with 16 KiB freed the store reopens with every acknowledged write,
/// replaying several WALs into several memtables that flush in the background (or fail to,
/// for lack of space, turning the store read-only again); a power cut then loses no synced
/// write and only a suffix of the others.
#[test]
fn full_disk_at_any_point_then_reopen_keeps_every_acknowledged_write() {
    for (round, budget) in [40u64, 90, 150, 230, 310].into_iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let faults = FaultInjector::new();
        let opts = with_faults(common::tiny_options(), &faults);
        let db = Db::open(dir.path(), opts.clone()).unwrap();
        faults.set_free_space(None, Some(budget * 1024));
        let (mut acked, mut last_synced) = (0u64, None);
        let err = loop {
            let sync = acked.is_multiple_of(4);
            match db.put_opt(key(acked), value(acked), &WriteOptions { sync }) {
                Ok(()) => {
                    if sync {
                        last_synced = Some(acked);
                    }
                    acked += 1;
                }
                Err(e) => break e,
            }
            assert!(acked < 100_000, "round {round}: the disk never filled");
        };
        assert!(err.is_no_space(), "round {round}: {err}");
        check_prefix(&db, acked);
        drop(db);
        // Little space in even rounds (the background flush of what the open replayed
        // fails again), room for a few tables in odd ones.
        let free = if round % 2 == 0 { 16 } else { 96 };
        faults.set_free_space(None, Some(free * 1024));
        let db = Db::open(dir.path(), opts.clone())
            .unwrap_or_else(|e| panic!("round {round}: reopen with {free} KiB free: {e}"));
        check_prefix(&db, acked);
        // Whether this fits depends on what waits for flush; it must not lose anything.
        let took = db
            .put_opt(key(acked), value(acked), &WriteOptions { sync: true })
            .is_ok();
        faults.crash();
        drop(db);
        faults.drop_unsynced_data().unwrap();
        faults.clear();
        let db = Db::open(dir.path(), opts).unwrap();
        let present = surviving_prefix(&db);
        let must = if took { Some(acked) } else { last_synced };
        assert!(
            must.is_none_or(|s| present > s),
            "round {round}: synced write {must:?} lost ({present} kept)"
        );
        assert!(present <= acked + 1, "round {round}: keys from nowhere");
        db.verify_checksums().unwrap();
    }
}

/// A full fast disk with room on the slow one (documented in ARCHITECTURE.md
/// "Failures"): tables spill to the slow tier, but the WAL and the manifest live on the
/// fast disk only, so the first write that cannot be logged fails with ENOSPC naming its
/// fast-tier file and the store turns read-only (reads go on); after space is freed a
/// reopen has every acknowledged write (2) and takes writes.
#[test]
fn full_fast_disk_fails_writes_once_the_wal_cannot_grow() {
    let fast = tempfile::tempdir().unwrap();
    let slow = tempfile::tempdir().unwrap();
    let faults = FaultInjector::new();
    let opts = with_faults(
        common::two_tier_options(slow.path(), 1 << 20, false),
        &faults,
    );
    let db = Db::open(fast.path(), opts.clone()).unwrap();
    faults.set_free_space(Some(Tier::Fast), Some(96 * 1024));
    let (acked, err) = write_until_error(&db, 0);
    assert!(err.is_no_space(), "{err}");
    let msg = err.to_string();
    let fast_dir = fast.path().display().to_string();
    assert!(
        msg.contains(&fast_dir) && (msg.contains(".log") || msg.contains("MANIFEST")),
        "names the WAL or manifest on the fast tier: {msg}"
    );
    assert!(db.put(b"x", b"y").is_err(), "the store is read-only");
    check_prefix(&db, acked);
    // The slow disk never filled: every failed write was on the fast one.
    assert_eq!(faults.free_space(Tier::Slow), None);
    drop(db);
    faults.clear();
    let db = Db::open(fast.path(), opts).unwrap();
    check_prefix(&db, acked);
    db.put(key(acked), value(acked)).unwrap();
    db.flush().unwrap();
    check_prefix(&db, acked + 1);
}

/// Invariant 2 across a process crash, a reopen and then a power cut: the writes the
/// crashed process left unsynced in the page cache were replayed by the reopen, whose WAL
/// stays live, so they must be made durable before the reopened store's synced writes,
/// or the power cut would lose them from the middle of the history.
#[test]
fn process_crash_then_reopen_then_power_cut_loses_no_middle() {
    let dir = tempfile::tempdir().unwrap();
    let faults = FaultInjector::new();
    let opts = with_faults(common::tiny_options(), &faults);
    let opts = Options {
        write_buffer_size: 1 << 20,
        ..opts
    };
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    for i in 0..100 {
        let sync = i < 50;
        db.put_opt(key(i), value(i), &WriteOptions { sync })
            .unwrap();
    }
    // The process dies: its unsynced writes stay in the page cache.
    faults.crash();
    drop(db);
    faults.clear();
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    check_prefix(&db, 100);
    for i in 100..120 {
        db.put_opt(key(i), value(i), &WriteOptions { sync: true })
            .unwrap();
    }
    // Now the machine loses power.
    faults.crash();
    drop(db);
    faults.drop_unsynced_data().unwrap();
    faults.clear();
    let db = Db::open(dir.path(), opts).unwrap();
    assert_eq!(surviving_prefix(&db), 120);
}

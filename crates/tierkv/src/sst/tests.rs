//! Table round trips against an in-memory model; damage detection (invariant 3, docs/DESIGN.md).

use super::*;
use crate::cache::Cache;
use crate::env::{Env, IoCause, Tier};
use crate::iter::InternalIterator;
use crate::key::{make_internal_key, seek_key, ValueKind, MAX_SEQ};
use std::sync::Arc;

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// Keys `key00000..` with 1-3 versions each (newest first), some tombstones.
fn entries(n: usize) -> Entries {
    let mut out = Vec::new();
    for i in 0..n {
        let user = format!("key{:05}", i * 2);
        let versions = 1 + i % 3;
        for v in (0..versions).rev() {
            let seq = (i * 10 + v + 1) as u64;
            let kind = if (i + v) % 7 == 0 {
                ValueKind::Delete
            } else {
                ValueKind::Value
            };
            let value = if kind == ValueKind::Delete {
                Vec::new()
            } else {
                format!("value-{i}-{v}-{}", "x".repeat(i % 40)).into_bytes()
            };
            out.push((make_internal_key(user.as_bytes(), seq, kind), value));
        }
    }
    out
}

fn build(env: &Env, name: &str, entries: &Entries, opts: TableOptions) -> TableInfo {
    build_as(env, name, entries, opts, format::FORMAT_VERSION)
}

/// Builds a table in format `version`: the current one, or 1 or 2 (what stores written
/// before format 2, or 3, hold).
fn build_as(
    env: &Env,
    name: &str,
    entries: &Entries,
    opts: TableOptions,
    version: u32,
) -> TableInfo {
    let file = env
        .create_writable(Tier::Fast, name, IoCause::Flush)
        .unwrap();
    let mut b = if version == format::FORMAT_VERSION {
        TableBuilder::new(file, opts)
    } else {
        TableBuilder::new_old_format(file, opts, version)
    };
    for (k, v) in entries {
        b.add(k, v).unwrap();
    }
    b.finish().unwrap()
}

fn open(env: &Env, name: &str, cache: Option<Arc<Cache>>) -> crate::error::Result<Arc<Table>> {
    let file = env.open_random(Tier::Fast, name)?;
    let cache = cache.map(|c| c as Arc<dyn crate::sst::BlockCache>);
    Ok(Arc::new(Table::open(file, 1, cache, IoCause::UserGet)?))
}

fn small_blocks() -> TableOptions {
    TableOptions {
        block_size: 512,
        restart_interval: 4,
        ..TableOptions::default()
    }
}

#[test]
fn round_trip_iterate_seek_and_get() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::single(dir.path(), true).unwrap();
    let data = entries(600);
    let variants = [
        small_blocks(),
        TableOptions {
            compression: Compression::Lz4,
            bloom_bits_per_key: 0,
            ..small_blocks()
        },
        TableOptions::default(),
        TableOptions {
            block_records: Some(8),
            ..TableOptions::default()
        },
    ];
    // Every variant in the current format, then in formats 2 and 1 (older stores' tables).
    let variants = [format::FORMAT_VERSION, 2, 1]
        .into_iter()
        .flat_map(|version| variants.map(|o| (o, version)));
    for (n, (opts, version)) in variants.enumerate() {
        let name = format!("{n}.sst");
        let info = build_as(&env, &name, &data, opts, version);
        assert_eq!(info.smallest.encoded(), data[0].0.as_slice());
        assert_eq!(info.largest.encoded(), data.last().unwrap().0.as_slice());
        assert_eq!(info.props.num_entries, data.len() as u64);
        assert_eq!(info.file_size, env.file_size(Tier::Fast, &name).unwrap());
        let cache = Arc::new(Cache::new(1 << 20));
        let t = open(&env, &name, Some(cache.clone())).unwrap();
        assert_eq!(t.verify(IoCause::Check).unwrap(), data.len() as u64);

        let mut it = t.iter(IoCause::UserScan, true);
        it.seek_to_first().unwrap();
        for (k, v) in &data {
            assert!(it.valid());
            assert_eq!((it.key(), it.value()), (k.as_slice(), v.as_slice()));
            it.next().unwrap();
        }
        assert!(!it.valid());
        it.seek_to_last().unwrap();
        for (k, _) in data.iter().rev() {
            assert_eq!(it.key(), k.as_slice());
            it.prev().unwrap();
        }
        assert!(!it.valid());

        // Every user key at every snapshot: get returns the newest visible version.
        for i in 0..601 {
            let user = format!("key{:05}", i * 2 - (i % 2));
            for snap in [0, (i * 10 + 1) as u64, (i * 10 + 2) as u64, MAX_SEQ] {
                let sk = seek_key(user.as_bytes(), snap);
                let want = data
                    .iter()
                    .find(|(k, _)| crate::key::compare_internal(k, &sk).is_ge())
                    .filter(|(k, _)| crate::key::user_key(k) == user.as_bytes());
                let got = t.get(&sk, IoCause::UserGet).unwrap();
                assert_eq!(
                    got.as_ref().map(|(k, v)| (k.to_vec(), v.to_vec())),
                    want.cloned(),
                    "{user} at {snap}"
                );
                it.seek(&sk).unwrap();
                let first = data
                    .iter()
                    .find(|(k, _)| crate::key::compare_internal(k, &sk).is_ge());
                assert_eq!(it.valid(), first.is_some());
                if let Some((k, _)) = first {
                    assert_eq!(it.key(), k.as_slice());
                }
            }
        }
        assert!(cache.hits() > 0);
    }
}

#[test]
fn compaction_iterators_read_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::single(dir.path(), true).unwrap();
    let data = entries(2000);
    build(&env, "t.sst", &data, small_blocks());
    let t = open(&env, "t.sst", None).unwrap();
    let before = env.stats().snapshot();
    let mut it = t.iter(IoCause::Compaction, false);
    it.seek_to_first().unwrap();
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next().unwrap();
    }
    assert_eq!(n, data.len());
    let ops = env
        .stats()
        .snapshot()
        .fast
        .cause(IoCause::Compaction)
        .read_ops
        - before.fast.cause(IoCause::Compaction).read_ops;
    assert!(
        ops <= 2,
        "a table under 1 MiB is read in one go, took {ops} reads"
    );
}

/// Read calls and bytes a user iterator (`IoCause::UserScan`) made on the fast tier since
/// `before`.
fn scan_reads(env: &Env, before: &crate::env::IoStatsSnapshot) -> (u64, u64) {
    let now = env.stats().snapshot();
    let (a, b) = (
        now.fast.cause(IoCause::UserScan),
        before.fast.cause(IoCause::UserScan),
    );
    (a.read_ops - b.read_ops, a.read_bytes - b.read_bytes)
}

/// A user iterator reads ahead on a long forward scan of a table (after two blocks read
/// one after the other, windows of 64-256 KiB), so it makes a few read calls instead of
/// one per block; the entries are those of a plain read, forwards, backwards, from a seek
/// and from the cache. A seek followed by a short scan reads no window: no more than the
/// blocks it needs.
#[test]
fn user_iterators_read_ahead_on_long_scans_only() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::single(dir.path(), true).unwrap();
    let data = entries(6000);
    build(&env, "t.sst", &data, small_blocks());
    let t = open(&env, "t.sst", None).unwrap();
    let mut blocks = 0u64;
    let mut raw = t.data_blocks(IoCause::Check);
    while raw.next_block().unwrap().is_some() {
        blocks += 1;
    }
    assert!(blocks > 200, "{blocks} blocks");
    let before = env.stats().snapshot();
    let mut it = t.iter(IoCause::UserScan, false);
    it.seek_to_first().unwrap();
    for (k, v) in &data {
        assert!(it.valid());
        assert_eq!((it.key(), it.value()), (k.as_slice(), v.as_slice()));
        it.next().unwrap();
    }
    assert!(!it.valid());
    let (ops, bytes) = scan_reads(&env, &before);
    assert!(
        ops * 10 <= blocks,
        "a full scan of {blocks} blocks made {ops} read calls"
    );
    let file_len = std::fs::metadata(dir.path().join("t.sst")).unwrap().len();
    assert!(
        bytes <= file_len,
        "read {bytes} bytes of a {file_len}-byte table"
    );

    // Backwards: no readahead, the same entries.
    it.seek_to_last().unwrap();
    for (k, _) in data.iter().rev() {
        assert_eq!(it.key(), k.as_slice());
        it.prev().unwrap();
    }
    assert!(!it.valid());

    // A seek and a few steps: at most the blocks it visits, no window.
    let before = env.stats().snapshot();
    let mut it = t.iter(IoCause::UserScan, false);
    let from = data.len() / 2;
    it.seek(&data[from].0).unwrap();
    for (k, _) in &data[from..from + 3] {
        assert_eq!(it.key(), k.as_slice());
        it.next().unwrap();
    }
    let (ops, bytes) = scan_reads(&env, &before);
    assert!(
        ops <= 2 && bytes < 2048,
        "{ops} reads, {bytes} bytes for a short scan"
    );
    // Then on to the end from there: read ahead, same entries.
    for (k, _) in &data[from + 3..] {
        assert_eq!(it.key(), k.as_slice());
        it.next().unwrap();
    }
    assert!(!it.valid());
    let (ops, _) = scan_reads(&env, &before);
    assert!(ops * 10 <= blocks / 2, "half a scan: {ops} read calls");

    // With a cache the iterator fills: the second scan reads nothing.
    let cache = Arc::new(Cache::new(64 << 20));
    let t = open(&env, "t.sst", Some(cache)).unwrap();
    for round in 0..2 {
        let before = env.stats().snapshot();
        let mut it = t.iter(IoCause::UserScan, true);
        it.seek_to_first().unwrap();
        let mut n = 0;
        while it.valid() {
            assert_eq!(it.key(), data[n].0.as_slice());
            n += 1;
            it.next().unwrap();
        }
        assert_eq!(n, data.len());
        let (ops, _) = scan_reads(&env, &before);
        match round {
            0 => assert!(ops * 10 <= blocks, "{ops} reads filling the cache"),
            _ => assert_eq!(ops, 0, "every block came from the cache"),
        }
    }
}

/// A user iterator told how far its scans go (`TableIterator::expect_scan`) reads a short
/// scan's blocks in one window at the seek, where the adaptive readahead takes three
/// reads to get there, and reads about the bytes the scan needs (whole blocks, with the
/// margin the estimate takes), not a speculative window. A scan that goes on past the expectation, one that expects a
/// single entry and one that turns backwards all yield exactly the table's entries.
#[test]
fn an_expected_scan_reads_its_blocks_in_one_window() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::single(dir.path(), true).unwrap();
    let data = entries(6000);
    build(&env, "t.sst", &data, small_blocks());
    let t = open(&env, "t.sst", None).unwrap();
    let bytes_per_entry = t.stored_bytes_per_entry();
    let from = data.len() / 3;
    let scan = 200;
    let needed = scan as f64 * bytes_per_entry;
    // The window covers the expectation and its margin (two standard deviations).
    let planned = (scan as f64 + 2.0 * (scan as f64).sqrt()) * bytes_per_entry;
    // Seek, then `scan` entries: (reads, bytes) with and without the expectation.
    let run = |expect: Option<f64>, steps: usize| {
        let before = env.stats().snapshot();
        let mut it = t.iter(IoCause::UserScan, false).expect_scan(expect);
        it.seek(&data[from].0).unwrap();
        for (k, v) in &data[from..from + steps] {
            assert_eq!((it.key(), it.value()), (k.as_slice(), v.as_slice()));
            it.next().unwrap();
        }
        (scan_reads(&env, &before), it)
    };
    let ((plain_ops, _), _) = run(None, scan);
    let ((ops, bytes), _) = run(Some(scan as f64), scan);
    assert!(plain_ops >= 3, "the adaptive ramp took {plain_ops} reads");
    assert_eq!(ops, 1, "an expected scan took {ops} reads");
    assert!(
        bytes as f64 >= needed && (bytes as f64) < planned + 3.0 * 560.0,
        "read {bytes} bytes for a scan needing about {needed:.0} (planned {planned:.0})"
    );
    // Expecting one entry: the seek's block alone.
    let ((ops, bytes), _) = run(Some(1.0), 1);
    assert!(ops == 1 && bytes < 1024, "{ops} reads, {bytes} bytes");
    // On past the expectation to the end, then back: the table's entries.
    let ((_, _), mut it) = run(Some(scan as f64), scan);
    for (k, _) in &data[from + scan..] {
        assert_eq!(it.key(), k.as_slice());
        it.next().unwrap();
    }
    assert!(!it.valid());
    it.seek(&data[from].0).unwrap();
    it.prev().unwrap();
    for (k, _) in data[..from].iter().rev() {
        assert_eq!(it.key(), k.as_slice());
        it.prev().unwrap();
    }
    assert!(!it.valid());
}

/// A scan that goes a little past its expected window (`TableIterator::expect_scan`) reads
/// the next block alone, not a readahead window, on a device whose reads cost less than
/// that window's bytes (or cost nothing known): the rest is usually near. Only a scan that
/// goes on from there reads ahead again, so a long one still makes few reads. Where a read
/// costs more (gp3-max: 100 KiB), the window follows at once.
#[test]
fn a_scan_just_past_its_expectation_reads_one_more_block() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::single(dir.path(), true).unwrap();
    let data = entries(6000);
    build(&env, "t.sst", &data, small_blocks());
    let from = data.len() / 3;
    // (bytes of the read after the window ran out, reads and blocks of 2,000 entries more)
    let run = |profile: crate::env::DeviceProfile| {
        env.set_device_profile(Tier::Fast, profile);
        let t = open(&env, "t.sst", None).unwrap();
        let mut it = t.iter(IoCause::UserScan, false).expect_scan(Some(200.0));
        let before = env.stats().snapshot();
        it.seek(&data[from].0).unwrap();
        let (first_ops, first_bytes) = scan_reads(&env, &before);
        assert_eq!(first_ops, 1, "the expected scan's window");
        let mut i = from;
        while scan_reads(&env, &before).0 == first_ops {
            assert_eq!(it.key(), data[i].0.as_slice());
            it.next().unwrap();
            i += 1;
        }
        let (ops, bytes) = scan_reads(&env, &before);
        assert_eq!(ops, 2);
        for (k, _) in &data[i..i + 2000] {
            assert_eq!(it.key(), k.as_slice());
            it.next().unwrap();
        }
        let (long_ops, long_bytes) = scan_reads(&env, &before);
        (
            bytes - first_bytes,
            long_ops - ops,
            (long_bytes - bytes) / 512,
        )
    };
    let (one_more, reads, blocks) = run(crate::env::DeviceProfile::none());
    assert!(
        one_more <= 8192,
        "the scan past its window read {one_more} bytes more (a 512-byte block, aligned)"
    );
    assert!(
        reads < 10 && blocks > 40,
        "{reads} reads for about {blocks} blocks after"
    );
    let (one_more, ..) = run(crate::env::DeviceProfile::gp3_max());
    assert!(
        one_more >= 60 << 10,
        "where a read costs 100 KiB the next window follows at once ({one_more} bytes)"
    );
}

#[test]
fn builder_rejects_disorder_and_emptiness() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::single(dir.path(), true).unwrap();
    let file = env
        .create_writable(Tier::Fast, "a.sst", IoCause::Flush)
        .unwrap();
    let mut b = TableBuilder::new(file, TableOptions::default());
    b.add(&make_internal_key(b"b", 1, ValueKind::Value), b"")
        .unwrap();
    assert!(b
        .add(&make_internal_key(b"a", 1, ValueKind::Value), b"")
        .is_err());
    assert!(b.add(b"short", b"").is_err());
    let file = env
        .create_writable(Tier::Fast, "b.sst", IoCause::Flush)
        .unwrap();
    assert!(TableBuilder::new(file, TableOptions::default())
        .finish()
        .is_err());
}

/// Flipping any byte of a table is detected at open, by a read, or by `verify`; reads
/// never return wrong data. (Invariant 3.)
#[test]
fn every_flipped_byte_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::single(dir.path(), false).unwrap();
    let data = entries(60);
    build(
        &env,
        "good.sst",
        &data,
        TableOptions {
            block_size: 256,
            ..TableOptions::default()
        },
    );
    let good = std::fs::read(dir.path().join("good.sst")).unwrap();
    for i in 0..good.len() {
        let mut bad = good.clone();
        bad[i] ^= 0x10;
        std::fs::write(dir.path().join("bad.sst"), &bad).unwrap();
        let t = match open(&env, "bad.sst", None) {
            Ok(t) => t,
            Err(e) => {
                assert!(e.is_corruption(), "byte {i}: {e}");
                assert!(e.to_string().contains("bad.sst"), "{e}");
                continue;
            }
        };
        for (k, v) in &data {
            let p = crate::key::parse_internal_key(k).unwrap();
            match t.get(&seek_key(p.user_key, p.seq), IoCause::UserGet) {
                Ok(Some((gk, gv))) => {
                    assert_eq!((&gk[..], &gv[..]), (&k[..], &v[..]), "byte {i}");
                }
                Ok(None) => panic!("byte {i}: a present key vanished without an error"),
                Err(e) => assert!(e.is_corruption(), "byte {i}: {e}"),
            }
        }
        assert!(
            t.verify(IoCause::Check).is_err(),
            "byte {i} went unnoticed by verify"
        );
    }
}

/// `n` records with `key_len`-byte hashed keys (one version each) and `value_len`-byte values.
fn fixed_records(n: u64, key_len: usize, value_len: usize) -> Entries {
    let mut keys: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            let h = i.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17) ^ i;
            let mut k = h.to_be_bytes().to_vec();
            k.resize(key_len, b'k');
            k
        })
        .collect();
    keys.sort();
    keys.into_iter()
        .enumerate()
        .map(|(i, k)| {
            let v = vec![(i % 251) as u8; value_len];
            (make_internal_key(&k, i as u64 + 1, ValueKind::Value), v)
        })
        .collect()
}

/// Entries per data block and each block's stored bytes, in file order.
fn block_shapes(t: &Arc<Table>) -> Vec<(usize, u64)> {
    block_list(t)
        .iter()
        .map(|raw| (entries_in(raw), raw.stored_len()))
        .collect()
}

/// Every data block of `t`, in file order.
fn block_list(t: &Arc<Table>) -> Vec<RawBlock> {
    let mut blocks = t.data_blocks(IoCause::Check);
    let mut out = Vec::new();
    while let Some(raw) = blocks.next_block().unwrap() {
        out.push(raw);
    }
    out
}

fn entries_in(raw: &RawBlock) -> usize {
    let mut it = raw.block().iter();
    it.seek_to_first().unwrap();
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next().unwrap();
    }
    n
}

/// `block_records` sizes the read unit to the records: F2's 108-byte records get blocks of
/// exactly that many entries (a few KiB, not 16), 1 KiB records still fill `block_size`,
/// every get answers as before, and the index stays within a bound per key.
#[test]
fn record_sized_blocks_follow_the_records_and_bound_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::single(dir.path(), true).unwrap();
    let opts = TableOptions {
        block_records: Some(48),
        ..TableOptions::default()
    };
    let small = fixed_records(20_000, 8, 100);
    build(&env, "small.sst", &small, opts);
    let t = open(&env, "small.sst", None).unwrap();
    let shapes = block_shapes(&t);
    let (last, full) = shapes.split_last().unwrap();
    assert!(last.0 <= 48);
    for &(n, bytes) in full {
        assert_eq!(n, 48, "entries per block");
        // 48 entries of 3 header + 16 key + 100 value bytes, restarts and trailer.
        assert!((48 * 108..48 * 125).contains(&bytes), "{bytes} B block");
    }
    // The index (one entry per block: a user-key separator of a few bytes, prefix-compressed
    // between restarts, and the handle); format 1's index held about 0.5 B per key here.
    let index_per_key = t.index_bytes() as f64 / small.len() as f64;
    assert!(index_per_key < 0.3, "index {index_per_key:.3} B per key");
    for (k, v) in small.iter().step_by(7) {
        let sk = seek_key(crate::key::user_key(k), MAX_SEQ);
        let got = t.get(&sk, IoCause::UserGet).unwrap().unwrap();
        assert_eq!(
            (got.0.as_ref(), got.1.as_ref()),
            (k.as_slice(), v.as_slice())
        );
    }
    assert_eq!(t.verify(IoCause::Check).unwrap(), small.len() as u64);

    // Without it the same records fill 16 KiB blocks: as many as a 16 KiB read holds.
    let unbounded = TableOptions {
        block_records: None,
        ..opts
    };
    build(&env, "small16k.sst", &small, unbounded);
    let t16 = open(&env, "small16k.sst", None).unwrap();
    let shapes = block_shapes(&t16);
    let (_, full) = shapes.split_last().unwrap();
    let filled = 15 * 1024..=16 * 1024;
    assert!(
        full.iter().all(|&(_, b)| filled.contains(&b)),
        "16 KiB blocks"
    );

    // 1 KiB records reach block_size long before 48 records: unchanged read unit.
    let large = fixed_records(1_000, 24, 1000);
    build(&env, "large.sst", &large, opts);
    let t = open(&env, "large.sst", None).unwrap();
    let shapes = block_shapes(&t);
    let (_, full) = shapes.split_last().unwrap();
    for &(n, bytes) in full {
        let filled = 14 * 1024..=16 * 1024;
        assert!(n < 48 && filled.contains(&bytes), "{n} entries, {bytes} B");
    }
    assert_eq!(t.verify(IoCause::Check).unwrap(), large.len() as u64);
}

/// Format 3 delta-codes the index's handles: with F2's 108-byte records in 8-record blocks
/// (its side-by-side setup) the index takes about a third less memory than format 2's whole
/// handles, and stays below 1 B per key, for the same answers.
#[test]
fn a_delta_coded_index_takes_less_memory_per_key() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::single(dir.path(), true).unwrap();
    let opts = TableOptions {
        block_records: Some(8),
        bloom_bits_per_key: 0,
        ..TableOptions::default()
    };
    let records = fixed_records(200_000, 8, 100);
    let per_key = |version: u32| {
        let name = format!("v{version}.sst");
        build_as(&env, &name, &records, opts, version);
        let t = open(&env, &name, None).unwrap();
        for (k, v) in records.iter().step_by(101) {
            let sk = seek_key(crate::key::user_key(k), MAX_SEQ);
            let got = t.get(&sk, IoCause::UserGet).unwrap().unwrap();
            assert_eq!(got.1.as_ref(), v.as_slice());
        }
        t.index_bytes() as f64 / records.len() as f64
    };
    let (now, whole) = (per_key(format::FORMAT_VERSION), per_key(2));
    eprintln!("index per key: format 3 {now:.3} B, format 2 {whole:.3} B");
    assert!(
        now < 1.0 && now < whole * 0.7,
        "{now:.3} vs {whole:.3} B per key"
    );
}

/// Invariant (docs/FORMAT.md, "Table files"): a point read of a data block moves at most
/// `block_size` rounded up to 512-byte sectors, counted as the direct read that fetches it
/// (whole sectors from the one the block starts in, trailer included), unless the block
/// holds a single entry larger than that. 1 KiB records in 4 KiB blocks: three per block
/// (a 3.1 KB block, at most a 4 KiB read wherever it starts), not four (4.2 KB, a 4.5-5 KiB
/// read).
#[test]
fn a_block_read_stays_within_the_block_size() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::single(dir.path(), true).unwrap();
    let opts = TableOptions {
        block_size: 4096,
        block_records: None,
        ..TableOptions::default()
    };
    let spans = |name: &str| {
        let t = open(&env, name, None).unwrap();
        block_list(&t)
            .iter()
            .map(|raw| {
                let span = crate::env::direct_read_span(raw.offset(), raw.stored_len() as usize);
                (entries_in(raw), span)
            })
            .collect::<Vec<_>>()
    };

    let kib = fixed_records(3_000, 24, 1000);
    build(&env, "kib.sst", &kib, opts);
    let shapes = spans("kib.sst");
    let (_, full) = shapes.split_last().unwrap();
    for &(n, span) in full {
        assert!(n == 3 && span <= 4096, "{n} entries, a {span} B read");
    }

    // Mixed sizes, 40 B to 5 KB: no block's read passes 4 KiB but a lone large record's.
    let mut mixed = fixed_records(3_000, 16, 0);
    for (i, (_, v)) in mixed.iter_mut().enumerate() {
        let len = 40 + (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) % 5_000;
        v.resize(len as usize, b'm');
    }
    build(&env, "mixed.sst", &mixed, opts);
    let shapes = spans("mixed.sst");
    assert!(shapes.iter().any(|&(n, span)| n == 1 && span > 4096));
    for &(n, span) in &shapes {
        assert!(n == 1 || span <= 4096, "{n} entries, a {span} B read");
    }
    // Blocks still fill up: 3,000 records of 2.5 KB on average, at most 4 KiB per read.
    assert!(shapes.len() < 2_700, "{} blocks", shapes.len());
    let t = open(&env, "mixed.sst", None).unwrap();
    assert_eq!(t.verify(IoCause::Check).unwrap(), mixed.len() as u64);
}

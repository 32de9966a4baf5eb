//! Semi-sorted tables against an in-memory model: a first generation and an appended one
//! read back exactly (gets, iterators, verification), the previous generation stays
//! readable at its recorded size, index memory matches a sorted table's, and a byte flip
//! anywhere is detected or harmless, never wrong data (invariant 3, docs/DESIGN.md).

use super::*;
use crate::env::{DeviceProfile, Env, IoCause, Tier};
use crate::iter::InternalIterator;
use crate::key::{compare_internal, make_internal_key, seek_key, user_key, ValueKind, MAX_SEQ};
use crate::sst::{Table, TableBuilder, TableOptions};
use std::sync::Arc;

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

fn opts() -> TableOptions {
    TableOptions {
        block_size: 256,
        restart_interval: 4,
        ..TableOptions::default()
    }
}

/// User keys `u{i*4}` with one or two versions, some tombstones.
fn first_entries(n: usize) -> Entries {
    let mut out = Vec::new();
    for i in 0..n {
        let u = format!("u{:06}", i * 4);
        for v in (0..1 + i % 2).rev() {
            let seq = (i * 4 + v + 1) as u64;
            let kind = if i % 11 == 0 && v == 0 {
                ValueKind::Delete
            } else {
                ValueKind::Value
            };
            let value = match kind {
                ValueKind::Delete => Vec::new(),
                _ => format!("v{i}-{v}-{}", "x".repeat(i % 23)).into_bytes(),
            };
            out.push((make_internal_key(u.as_bytes(), seq, kind), value));
        }
    }
    out
}

fn sort(e: &mut Entries) {
    e.sort_by(|a, b| compare_internal(&a.0, &b.0));
}

fn write_first(env: &Env, name: &str, e: &Entries) -> crate::sst::TableInfo {
    let f = env
        .create_writable(Tier::Slow, name, IoCause::Compaction)
        .unwrap();
    let mut w = GenerationWriter::new(f, opts());
    for (k, v) in e {
        w.add(k, v).unwrap();
    }
    w.finish().unwrap()
}

fn open(env: &Env, name: &str, size: u64) -> crate::error::Result<Arc<Table>> {
    let f = env.open_random(Tier::Slow, name)?;
    Ok(Arc::new(Table::open_sized(
        f,
        7,
        size,
        None,
        IoCause::Check,
    )?))
}

/// Every user key of the model reads its newest version, keys between them read nothing,
/// and the iterator yields exactly the model.
fn check_against(t: &Arc<Table>, model: &Entries) -> crate::error::Result<()> {
    let mut it = t.iter(IoCause::UserGet, false);
    it.seek_to_first()?;
    let mut i = 0;
    while it.valid() {
        assert!(i < model.len(), "iterator yields more than the model");
        assert_eq!((it.key(), it.value()), (&model[i].0[..], &model[i].1[..]));
        i += 1;
        it.next()?;
    }
    assert_eq!(i, model.len(), "iterator yields less than the model");
    let mut prev: Option<&[u8]> = None;
    for (k, v) in model {
        let u = user_key(k);
        if prev == Some(u) {
            continue;
        }
        prev = Some(u);
        let got = t.get(&seek_key(u, MAX_SEQ), IoCause::UserGet)?;
        assert_eq!(
            got.as_ref().map(|(gk, gv)| (&gk[..], &gv[..])),
            Some((&k[..], &v[..]))
        );
        let mut absent = u.to_vec();
        absent.push(b'!');
        assert_eq!(t.get(&seek_key(&absent, MAX_SEQ), IoCause::UserGet)?, None);
    }
    Ok(())
}

/// Builds a second generation of table `from` into `to`: `new` entries merged, the valid
/// blocks whose range holds one of their user keys rewritten. Returns the new model,
/// the new size and how many blocks were dirtied.
fn append(
    env: &Env,
    from: (&str, u64),
    to: &str,
    model: &Entries,
    new: &Entries,
) -> (Entries, u64, usize) {
    let t = open(env, from.0, from.1).unwrap();
    let prior = t.semi_generation(IoCause::Compaction).unwrap().unwrap();
    let dirty: Vec<usize> = prior
        .blocks
        .iter()
        .enumerate()
        .filter(|(_, b)| b.valid && new.iter().any(|(k, _)| b.covers(user_key(k))))
        .map(|(i, _)| i)
        .collect();
    let in_dirty = |k: &[u8]| dirty.iter().any(|&i| prior.blocks[i].covers(user_key(k)));
    let mut input: Entries = model.iter().filter(|(k, _)| in_dirty(k)).cloned().collect();
    input.extend(new.iter().cloned());
    sort(&mut input);
    env.link(Tier::Slow, from.0, to).unwrap();
    let f = env
        .reopen_writable(Tier::Slow, to, from.1, IoCause::Compaction)
        .unwrap();
    let mut w = GenerationWriter::continuing(f, opts(), from.1, prior, &dirty);
    for (k, v) in &input {
        w.add(k, v).unwrap();
    }
    let info = w.finish().unwrap();
    let mut next = model.clone();
    next.extend(new.iter().cloned());
    sort(&mut next);
    (next, info.file_size, dirty.len())
}

fn second_entries() -> Entries {
    let mut new = Entries::new();
    // Updates of existing keys (dirty their blocks) and runs in gaps.
    for i in [3usize, 40, 41, 150] {
        let u = format!("u{:06}", i * 4);
        new.push((
            make_internal_key(u.as_bytes(), 10_000 + i as u64, ValueKind::Value),
            b"updated".to_vec(),
        ));
    }
    for i in 0..20usize {
        let u = format!("u{:06}", 2000 + i);
        new.push((
            make_internal_key(u.as_bytes(), 20_000 + i as u64, ValueKind::Value),
            b"appended".to_vec(),
        ));
    }
    let u = b"a-before-everything";
    new.push((make_internal_key(u, 30_000, ValueKind::Delete), Vec::new()));
    sort(&mut new);
    new
}

#[test]
fn first_generation_reads_back_like_the_model_and_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::single(dir.path(), false).unwrap();
    let mut model = first_entries(300);
    sort(&mut model);
    let info = write_first(&env, "000001.sst", &model);
    let t = open(&env, "000001.sst", info.file_size).unwrap();
    check_against(&t, &model).unwrap();
    assert_eq!(t.verify(IoCause::Check).unwrap(), model.len() as u64);
    let s = t.semi_summary(IoCause::Check).unwrap().unwrap();
    assert!(s.valid_blocks > 10 && s.dirty_blocks == 0, "{s:?}");
    assert_eq!(t.properties().num_entries, model.len() as u64);
}

/// Memory per key: the open table's index (one separator and handle per valid block) and
/// filter are what a sorted table of the same entries holds, within a few percent.
#[test]
fn index_memory_matches_a_sorted_table() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::single(dir.path(), false).unwrap();
    let mut model = first_entries(2000);
    sort(&mut model);
    let semi = write_first(&env, "000001.sst", &model);
    let f = env
        .create_writable(Tier::Slow, "000002.sst", IoCause::Compaction)
        .unwrap();
    let mut b = TableBuilder::new(f, opts());
    for (k, v) in &model {
        b.add(k, v).unwrap();
    }
    let sorted = b.finish().unwrap();
    let s = open(&env, "000001.sst", semi.file_size).unwrap();
    let f = env.open_random(Tier::Slow, "000002.sst").unwrap();
    let t = Table::open_sized(f, 8, sorted.file_size, None, IoCause::Check).unwrap();
    assert!(t.semi_summary(IoCause::Check).unwrap().is_none());
    let (a, b) = (s.memory_usage() as f64, t.memory_usage() as f64);
    assert!(a <= b * 1.05, "semi-sorted {a} bytes vs sorted {b}");
}

/// A second generation appended to a linked copy: the copy reads the merged model, the
/// original name still reads the first generation at its recorded size (bytes below it
/// never change), clean blocks were kept (only the covering ones dirtied), and both verify.
#[test]
fn appended_generation_keeps_clean_blocks_and_the_old_generation_readable() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::single(dir.path(), false).unwrap();
    let mut model = first_entries(300);
    sort(&mut model);
    let info = write_first(&env, "000001.sst", &model);
    let new = second_entries();
    let (next, size, dirtied) = append(
        &env,
        ("000001.sst", info.file_size),
        "000002.sst",
        &model,
        &new,
    );
    assert!((1..=4).contains(&dirtied), "dirtied {dirtied}");
    let t2 = open(&env, "000002.sst", size).unwrap();
    check_against(&t2, &next).unwrap();
    assert_eq!(t2.verify(IoCause::Check).unwrap(), next.len() as u64);
    let s = t2.semi_summary(IoCause::Check).unwrap().unwrap();
    assert_eq!(s.dirty_blocks, dirtied as u64);
    let t1 = open(&env, "000001.sst", info.file_size).unwrap();
    check_against(&t1, &model).unwrap();
    t1.verify(IoCause::Check).unwrap();
    // A third generation on top of the second.
    let mut third = Entries::new();
    for i in 0..300usize {
        if i % 50 == 7 {
            let u = format!("u{:06}", i * 4 + 2);
            third.push((
                make_internal_key(u.as_bytes(), 40_000 + i as u64, ValueKind::Value),
                b"third".to_vec(),
            ));
        }
    }
    let (next3, size3, _) = append(&env, ("000002.sst", size), "000003.sst", &next, &third);
    let t3 = open(&env, "000003.sst", size3).unwrap();
    check_against(&t3, &next3).unwrap();
    t3.verify(IoCause::Check).unwrap();
    // A compaction reading it whole in key order jumps between generations; its
    // readahead follows the blocks it needs next, reading through small gaps between
    // them (dirty blocks, old metadata) up to half the bytes it needs.
    let reads = || {
        env.stats()
            .snapshot()
            .tier(Tier::Slow)
            .cause(IoCause::Compaction)
            .read_bytes
    };
    let before = reads();
    let mut it = t3.iter(IoCause::Compaction, false);
    it.seek_to_first().unwrap();
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next().unwrap();
    }
    assert_eq!(n, next3.len());
    let s3 = t3.semi_summary(IoCause::Check).unwrap().unwrap();
    assert!(s3.dirty_blocks > 0);
    let read = reads() - before;
    assert!(
        (s3.valid_bytes..=s3.valid_bytes * 3 / 2).contains(&read),
        "{read} bytes read by a whole-table scan of {s3:?}"
    );
}

/// A crashed append leaves bytes past a generation's recorded size in the shared file:
/// the table still opens at that size, and the next append cuts them off.
#[test]
fn bytes_past_the_recorded_size_are_ignored_then_cut() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::single(dir.path(), false).unwrap();
    let mut model = first_entries(200);
    sort(&mut model);
    let info = write_first(&env, "000001.sst", &model);
    let mut w = env
        .reopen_writable(
            Tier::Slow,
            "000001.sst",
            info.file_size,
            IoCause::Compaction,
        )
        .unwrap();
    w.append(&[0xab; 3000]).unwrap();
    w.sync().unwrap();
    drop(w);
    let t = open(&env, "000001.sst", info.file_size).unwrap();
    check_against(&t, &model).unwrap();
    t.verify(IoCause::Check).unwrap();
    let (next, size, _) = append(
        &env,
        ("000001.sst", info.file_size),
        "000002.sst",
        &model,
        &second_entries(),
    );
    assert_eq!(env.file_size(Tier::Slow, "000002.sst").unwrap(), size);
    check_against(&open(&env, "000002.sst", size).unwrap(), &next).unwrap();
}

/// Flips one byte at a time over the whole file of a two-generation table (data blocks,
/// dirty blocks, both generations' key lists, filters, properties, indexes and footers):
/// each flip is caught by open or `verify`, or it lies in bytes no reader uses (garbage of
/// dirty blocks or of the first generation's metadata) and every read is still right.
/// Reads of a damaged table return an error or the right data, never wrong data.
#[test]
fn byte_flips_are_detected_or_harmless_never_wrong_data() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::single(dir.path(), false).unwrap();
    let mut model = first_entries(60);
    sort(&mut model);
    let info = write_first(&env, "000001.sst", &model);
    let (next, size, _) = append(
        &env,
        ("000001.sst", info.file_size),
        "000002.sst",
        &model,
        &second_entries(),
    );
    let pristine = std::fs::read(dir.path().join("000002.sst")).unwrap();
    let (mut detected, mut harmless) = (0, 0);
    for pos in 0..pristine.len() {
        let mut bytes = pristine.clone();
        bytes[pos] ^= 0x41;
        std::fs::write(dir.path().join("000009.sst"), &bytes).unwrap();
        let t = match open(&env, "000009.sst", size) {
            Ok(t) => t,
            Err(e) => {
                assert!(e.is_corruption(), "flip at {pos}: {e}");
                detected += 1;
                continue;
            }
        };
        match t.verify(IoCause::Check) {
            Err(e) => {
                assert!(e.is_corruption(), "flip at {pos}: {e}");
                detected += 1;
                // Reads may fail, but whatever they return must be right.
                let mut prev: Option<&[u8]> = None;
                for (k, v) in &next {
                    if prev == Some(user_key(k)) {
                        continue;
                    }
                    prev = Some(user_key(k));
                    if let Ok(got) = t.get(&seek_key(user_key(k), MAX_SEQ), IoCause::UserGet) {
                        let got = got.map(|(gk, gv)| (gk.to_vec(), gv.to_vec()));
                        assert_eq!(got, Some((k.clone(), v.clone())), "flip at {pos}");
                    }
                }
            }
            Ok(_) => {
                check_against(&t, &next).unwrap_or_else(|e| panic!("flip at {pos}: {e}"));
                harmless += 1;
            }
        }
    }
    assert!(
        detected > 0 && harmless > 0,
        "{detected} detected, {harmless} harmless"
    );
}

/// Opening a semi-sorted table reads its filter, properties and stored lookup index, not
/// its block index (every block's first and last internal key and counts, dirty blocks
/// too) nor its key list: about what opening a sorted table of the same entries reads.
/// Under a tight table cache every get that misses it pays this read, so a larger one
/// multiplied the slow-disk bytes of small-record workloads (docs/BENCHMARKS-LOG.md).
#[test]
fn opening_reads_no_more_metadata_than_a_sorted_table() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::single(dir.path(), false).unwrap();
    let mut model = first_entries(2000);
    sort(&mut model);
    let info = write_first(&env, "000001.sst", &model);
    // A second generation: dirty blocks in the block index, none in what a reader keeps.
    let mut new = second_entries();
    for i in (0..2000usize).step_by(97) {
        let u = format!("u{:06}", i * 4);
        new.push((
            make_internal_key(u.as_bytes(), 50_000 + i as u64, ValueKind::Value),
            b"again".to_vec(),
        ));
    }
    sort(&mut new);
    new.dedup_by(|a, b| user_key(&a.0) == user_key(&b.0));
    let (next, size, dirtied) = append(
        &env,
        ("000001.sst", info.file_size),
        "000002.sst",
        &model,
        &new,
    );
    assert!(dirtied >= 15, "dirtied {dirtied}");
    let f = env
        .create_writable(Tier::Slow, "000003.sst", IoCause::Compaction)
        .unwrap();
    let mut b = TableBuilder::new(f, opts());
    for (k, v) in &next {
        b.add(k, v).unwrap();
    }
    let sorted = b.finish().unwrap();
    let semi = open(&env, "000002.sst", size).unwrap();
    check_against(&semi, &next).unwrap();
    let f = env.open_random(Tier::Slow, "000003.sst").unwrap();
    let t = Table::open_sized(f, 8, sorted.file_size, None, IoCause::Check).unwrap();
    let (a, b) = (semi.open_read_bytes(), t.open_read_bytes());
    assert!(
        a as f64 <= b as f64 * 1.05,
        "opening the semi-sorted table read {a} bytes, the sorted one {b}"
    );
    // And the reads of the open are what the stats count.
    let reads = || {
        env.stats()
            .snapshot()
            .tier(Tier::Slow)
            .cause(IoCause::UserGet)
            .read_bytes
    };
    let before = reads();
    let f = env.open_random(Tier::Slow, "000002.sst").unwrap();
    let again = Table::open_sized(f, 9, size, None, IoCause::UserGet).unwrap();
    assert_eq!(reads() - before, again.open_read_bytes());
}

/// Rewrites the table `from` (of logical size `size`, written now) as a table `to` of an
/// older `version`, as a binary before it wrote it: version 1 has no stored lookup index
/// (key list, filter, properties, block index, 80-byte footer), version 2 stores it with
/// whole handles. Blocks are copied framed: a trailer's checksum does not cover the
/// block's offset.
fn rewrite_as_old_version(
    dir: &std::path::Path,
    from: &str,
    size: u64,
    to: &str,
    version: u32,
) -> u64 {
    use crate::sst::block::{Block, BlockBuilder, ValueCoding};
    use crate::sst::format::{frame_block, BlockHandle, BLOCK_TRAILER_LEN};
    use crate::sst::INDEX_RESTART_INTERVAL;
    let bytes = std::fs::read(dir.join(from)).unwrap();
    let bytes = &bytes[..size as usize];
    let footer = SemiFooter::decode(&bytes[bytes.len() - SEMI_FOOTER_LEN..], size).unwrap();
    assert_eq!(
        footer.version, SEMI_VERSION,
        "written in the current version"
    );
    let mut out = bytes[..footer.keys.offset as usize].to_vec();
    fn append(out: &mut Vec<u8>, framed: &[u8]) -> BlockHandle {
        let at = out.len() as u64;
        out.extend_from_slice(framed);
        BlockHandle {
            offset: at,
            size: (framed.len() - BLOCK_TRAILER_LEN) as u64,
        }
    }
    let copy = |out: &mut Vec<u8>, h: BlockHandle| match h.size {
        0 => BlockHandle {
            offset: out.len() as u64,
            size: 0,
        },
        _ => append(
            out,
            &bytes[h.offset as usize..(h.offset + h.size) as usize + BLOCK_TRAILER_LEN],
        ),
    };
    let old = if version == 1 {
        SemiFooter {
            keys: copy(&mut out, footer.keys),
            filter: copy(&mut out, footer.filter),
            properties: copy(&mut out, footer.properties),
            index: copy(&mut out, footer.index),
            lookup: None,
            version,
        }
    } else {
        let keys = copy(&mut out, footer.keys);
        let index = copy(&mut out, footer.index);
        let filter = copy(&mut out, footer.filter);
        let properties = copy(&mut out, footer.properties);
        let h = footer.lookup.unwrap();
        let raw = &bytes[h.offset as usize..(h.offset + h.size) as usize];
        let stored = Block::with_coding(
            bytes::Bytes::copy_from_slice(raw),
            ValueCoding::DeltaHandles,
        )
        .unwrap();
        let mut plain = BlockBuilder::new(INDEX_RESTART_INTERVAL);
        let mut it = stored.iter();
        it.seek_to_first().unwrap();
        while it.valid() {
            let mut v = Vec::new();
            it.handle().unwrap().encode_varint(&mut v);
            plain.add(it.key(), &v);
            it.next().unwrap();
        }
        let (framed, _) = frame_block(&plain.finish(), crate::sst::Compression::None);
        SemiFooter {
            keys,
            index,
            filter,
            properties,
            lookup: Some(append(&mut out, &framed)),
            version,
        }
    };
    out.extend_from_slice(&old.encode());
    std::fs::write(dir.join(to), &out).unwrap();
    out.len() as u64
}

/// Tables written before the lookup index was stored (format version 1), or before its
/// handles were delta-coded (version 2), still open, read back exactly, verify, and take a
/// new generation (written in the current version) that reads and verifies too.
#[test]
fn version_1_and_2_tables_still_read_and_take_a_new_generation() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::single(dir.path(), false).unwrap();
    let mut model = first_entries(300);
    sort(&mut model);
    let info = write_first(&env, "000001.sst", &model);
    let now = open(&env, "000001.sst", info.file_size).unwrap();
    for version in [1, 2] {
        let (old, next) = (format!("{version}-old.sst"), format!("{version}-next.sst"));
        let size = rewrite_as_old_version(dir.path(), "000001.sst", info.file_size, &old, version);
        let t = open(&env, &old, size).unwrap();
        check_against(&t, &model).unwrap();
        assert_eq!(t.verify(IoCause::Check).unwrap(), model.len() as u64);
        assert_eq!(t.block_handles().unwrap(), now.block_handles().unwrap());
        assert_eq!(t.index_user_keys().unwrap(), now.index_user_keys().unwrap());
        if version == 2 {
            assert!(
                t.index_bytes() > now.index_bytes(),
                "whole handles take more room"
            );
        }
        let (merged, size2, dirtied) = append(&env, (&old, size), &next, &model, &second_entries());
        assert!(dirtied >= 1);
        let t3 = open(&env, &next, size2).unwrap();
        check_against(&t3, &merged).unwrap();
        t3.verify(IoCause::Check).unwrap();
        let s = t3.semi_summary(IoCause::Check).unwrap().unwrap();
        assert_eq!(s.dirty_blocks, dirtied as u64);
    }
}

/// `tierkv check` compares a table's stored lookup index with its block index: a lookup
/// index whose separators and handles a reader would accept but that points a key range
/// at the wrong block (here: the first two entries' handles swapped, the block and footer
/// rewritten with their checksums) is reported as corruption.
#[test]
fn verify_catches_a_lookup_index_that_disagrees_with_the_block_index() {
    use crate::sst::block::{Block, BlockBuilder, ValueCoding};
    use crate::sst::INDEX_RESTART_INTERVAL;
    let dir = tempfile::tempdir().unwrap();
    let env = Env::single(dir.path(), false).unwrap();
    let mut model = first_entries(300);
    sort(&mut model);
    let info = write_first(&env, "000001.sst", &model);
    let path = dir.path().join("000001.sst");
    let bytes = std::fs::read(&path).unwrap();
    let footer =
        SemiFooter::decode(&bytes[bytes.len() - SEMI_FOOTER_LEN..], info.file_size).unwrap();
    let h = footer.lookup.unwrap();
    let (at, end) = (h.offset as usize, (h.offset + h.size) as usize);
    assert_eq!(bytes[end], 0, "stored uncompressed (TableOptions::default)");
    let raw = bytes::Bytes::copy_from_slice(&bytes[at..end]);
    let stored = Block::with_coding(raw, ValueCoding::DeltaHandles).unwrap();
    let mut entries = Vec::new();
    let mut it = stored.iter();
    it.seek_to_first().unwrap();
    while it.valid() {
        entries.push((it.key().to_vec(), it.handle().unwrap()));
        it.next().unwrap();
    }
    (entries[0].1, entries[1].1) = (entries[1].1, entries[0].1);
    let mut b = BlockBuilder::new(INDEX_RESTART_INTERVAL);
    entries.iter().for_each(|(k, h)| b.add_handle(k, *h));
    let (framed, len) = crate::sst::format::frame_block(&b.finish(), crate::sst::Compression::None);
    // The lookup index is the last block before the footer: rewrite both.
    let mut out = bytes[..at].to_vec();
    out.extend_from_slice(&framed);
    let lookup = crate::sst::format::BlockHandle {
        offset: at as u64,
        size: len as u64,
    };
    out.extend_from_slice(
        &SemiFooter {
            lookup: Some(lookup),
            ..footer
        }
        .encode(),
    );
    std::fs::write(&path, &out).unwrap();
    let t = open(&env, "000001.sst", out.len() as u64).unwrap();
    let e = t.verify(IoCause::Check).unwrap_err();
    assert!(
        e.is_corruption() && e.to_string().contains("lookup index"),
        "{e}"
    );
}

/// A table of many appended generations: eight merges each update scattered keys, so its
/// valid blocks in key order jump between generations at dozens of places (each jump ends
/// a run of blocks contiguous in the file). Builds it and returns the table, its model and
/// the number of such runs.
fn many_generations(env: &Env) -> (Arc<Table>, Entries, usize) {
    let mut model = first_entries(1500);
    sort(&mut model);
    let info = write_first(env, "000001.sst", &model);
    let (mut name, mut size) = ("000001.sst".to_string(), info.file_size);
    for g in 0..8usize {
        let mut new = Entries::new();
        for i in (g * 7..1500).step_by(97) {
            let u = format!("u{:06}", i * 4);
            new.push((
                make_internal_key(
                    u.as_bytes(),
                    100_000 + (g * 10_000 + i) as u64,
                    ValueKind::Value,
                ),
                format!("gen{g}").into_bytes(),
            ));
        }
        sort(&mut new);
        let to = format!("{:06}.sst", g + 2);
        let (next, next_size, dirtied) = append(env, (&name, size), &to, &model, &new);
        assert!(dirtied >= 10, "generation {g} dirtied {dirtied} blocks");
        (model, name, size) = (next, to, next_size);
    }
    let t = open(env, &name, size).unwrap();
    let handles = t.block_handles().unwrap();
    let runs = 1 + handles
        .windows(2)
        .filter(|w| {
            w[0].offset + w[0].size + crate::sst::format::BLOCK_TRAILER_LEN as u64 != w[1].offset
        })
        .count();
    (t, model, runs)
}

/// The slow tier's I/O by user iterators so far.
fn slow_scan_io(env: &Env) -> crate::env::CauseIo {
    env.stats()
        .snapshot()
        .tier(Tier::Slow)
        .cause(IoCause::UserScan)
}

/// Reads ahead across runs: a user scan over a table of many appended generations
/// follows the blocks it needs next, not the file, so it issues a few reads per window
/// (one per generation's cluster of blocks), not one per run of file-contiguous blocks;
/// it yields exactly the model, in order, from the first key and from a seek.
#[test]
fn scans_over_many_appended_generations_read_ahead_across_runs() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::single(dir.path(), false).unwrap();
    let (t, model, runs) = many_generations(&env);
    let summary = t.semi_summary(IoCause::Check).unwrap().unwrap();
    assert!(runs >= 100, "only {runs} runs");
    let scan_ops = || slow_scan_io(&env);
    let before = scan_ops();
    let thread_before = crate::env::thread_read_count();
    let mut it = t.iter(IoCause::UserScan, false);
    it.seek_to_first().unwrap();
    for (k, v) in &model {
        assert!(it.valid(), "scan ended early");
        assert_eq!((it.key(), it.value()), (&k[..], &v[..]));
        it.next().unwrap();
    }
    assert!(!it.valid(), "scan yields more than the model");
    let after = scan_ops();
    let ops = after.read_ops - before.read_ops;
    assert_eq!(crate::env::thread_read_count() - thread_before, ops);
    // One plain read, then windows of 64, 128, 256, 256 ... KiB of needed blocks, each
    // at most one read per generation (nine) and in practice two or three.
    let windows = 2 + summary.valid_bytes.div_ceil(256 << 10);
    let bound = 1 + windows * 9;
    assert!(
        ops <= bound && ops * 4 <= runs as u64,
        "a scan over {runs} runs made {ops} reads (bound {bound})"
    );
    // Gaps read with the blocks are bounded: a window reads at most 1.5 times the bytes
    // it needs.
    let bytes = after.read_bytes - before.read_bytes;
    assert!(
        bytes <= summary.valid_bytes * 3 / 2,
        "read {bytes} bytes for {summary:?}"
    );

    // From a seek in the middle: ordered, equal to the model.
    let from = model.len() / 3;
    let mut it = t.iter(IoCause::UserScan, false);
    it.seek(&model[from].0).unwrap();
    for (k, v) in &model[from..] {
        assert_eq!((it.key(), it.value()), (&k[..], &v[..]));
        it.next().unwrap();
    }
    assert!(!it.valid());
}

/// A scan that expects its length reads a semi-sorted table of many generations in one
/// window from its seek: its spans (one per generation's cluster of blocks) all in flight
/// together, about the bytes the scan needs (with the estimate's margin and the gaps the
/// window may read through), where the adaptive readahead reads a block first, then a
/// 64 KiB window mostly past the scan's end. It yields the model. On a device where a
/// read costs more than 64 KiB of bandwidth the window takes `SEMI_SCAN_SLACK` past the
/// estimate, as a sorted table's ends inside a 16 KiB block: a scan 8 KiB longer than the
/// estimate and its margin reads no more. Where the cost is unknown (no device model) it
/// takes none, and such a scan reads again.
#[test]
fn an_expected_scan_over_many_generations_reads_one_window() {
    let dir = tempfile::tempdir().unwrap();
    let unknown_cost = Env::single(dir.path(), false).unwrap();
    expected_scans_over_many_generations(&unknown_cost, false);
    let dir = tempfile::tempdir().unwrap();
    // A read costs 100 KiB of bandwidth, as on gp3-max; fast enough not to slow the test.
    let costly = DeviceProfile {
        iops: Some(1_000_000),
        bandwidth: Some(100 << 30),
        latency_us: 0,
    };
    assert_eq!(costly.read_cost_bytes(), Some(107_374));
    let costly_reads = Env::new(
        dir.path(),
        dir.path(),
        DeviceProfile::none(),
        costly,
        false,
        None,
    )
    .unwrap();
    expected_scans_over_many_generations(&costly_reads, true);
}

/// Scans of `an_expected_scan_over_many_generations_reads_one_window` on `env`, whose
/// slow tier's windows take slack or not.
fn expected_scans_over_many_generations(env: &Env, slack: bool) {
    let (t, model, _) = many_generations(env);
    let scan = 300;
    let slack_bytes = if slack {
        crate::sst::table::SEMI_SCAN_SLACK as f64
    } else {
        0.0
    };
    let planned =
        (scan as f64 + 2.0 * (scan as f64).sqrt()) * t.stored_bytes_per_entry() + slack_bytes;
    // Entries past the estimate's margin: 8 KiB of them, what a sorted table's window
    // takes past its estimate on average.
    let beyond = (8192.0 / t.stored_bytes_per_entry()) as usize;
    let margin = (2.0 * (scan as f64).sqrt()) as usize;
    // (reads, bytes) of a seek at `from` and `steps` steps.
    let run_steps = |from: usize, steps: usize, expect: Option<f64>| {
        let before = slow_scan_io(env);
        let mut it = t.iter(IoCause::UserScan, false).expect_scan(expect);
        it.seek(&model[from].0).unwrap();
        for (k, v) in &model[from..from + steps] {
            assert_eq!((it.key(), it.value()), (&k[..], &v[..]));
            it.next().unwrap();
        }
        let after = slow_scan_io(env);
        (
            after.read_ops - before.read_ops,
            after.read_bytes - before.read_bytes,
        )
    };
    let mut longer_scans_read_again = 0;
    for from in [model.len() / 5, model.len() / 2, model.len() * 3 / 5] {
        let (ops, bytes) = run_steps(from, scan, Some(scan as f64));
        let (longer_ops, _) = run_steps(from, scan + margin + beyond, Some(scan as f64));
        longer_scans_read_again += usize::from(longer_ops > ops);
        let (_, adaptive_bytes) = run_steps(from, scan, None);
        // One window: at most one span per generation (nine).
        assert!((1..=9).contains(&ops), "{ops} reads from {from}");
        // The adaptive readahead's 64 KiB window mostly past the scan's end reads at
        // least twice a window without slack.
        let under_adaptive = if slack {
            bytes < adaptive_bytes
        } else {
            bytes * 2 < adaptive_bytes
        };
        assert!(
            (bytes as f64) <= planned * 1.5 + 1024.0 && under_adaptive,
            "{bytes} bytes from {from} (planned {planned:.0}, adaptive {adaptive_bytes})"
        );
    }
    if slack {
        assert_eq!(
            longer_scans_read_again, 0,
            "{beyond} entries past the margin cost reads"
        );
    } else {
        assert!(
            longer_scans_read_again > 0,
            "a window without slack covered {beyond} entries past the margin"
        );
    }
}

/// A compaction reading a table of many appended generations (its table iterator and
/// its block cursor) reads 1 MiB windows of the blocks it needs next across runs: a few
/// reads in all, not one per run, every block once, in key order.
#[test]
fn compaction_reads_of_many_generations_read_ahead_across_runs() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::single(dir.path(), false).unwrap();
    let (t, model, runs) = many_generations(&env);
    let summary = t.semi_summary(IoCause::Check).unwrap().unwrap();
    let reads = || {
        env.stats()
            .snapshot()
            .tier(Tier::Slow)
            .cause(IoCause::Compaction)
    };
    let before = reads();
    let mut it = t.iter(IoCause::Compaction, false);
    it.seek_to_first().unwrap();
    for (k, _) in &model {
        assert_eq!(it.key(), &k[..]);
        it.next().unwrap();
    }
    assert!(!it.valid());
    let mid = reads();
    let mut blocks = t.data_blocks(IoCause::Compaction);
    let mut n = 0;
    let mut prev: Option<Vec<u8>> = None;
    while let Some(b) = blocks.next_block().unwrap() {
        assert!(prev
            .as_deref()
            .is_none_or(|p| compare_internal(p, b.last_key()).is_lt()));
        prev = Some(b.last_key().to_vec());
        n += 1;
    }
    assert_eq!(n, summary.valid_blocks);
    let after = reads();
    let bound = summary.valid_bytes.div_ceil(1 << 20) * 9;
    for (ops, bytes) in [
        (
            mid.read_ops - before.read_ops,
            mid.read_bytes - before.read_bytes,
        ),
        (
            after.read_ops - mid.read_ops,
            after.read_bytes - mid.read_bytes,
        ),
    ] {
        assert!(ops <= bound, "{ops} reads over {runs} runs (bound {bound})");
        assert!(bytes >= summary.valid_bytes);
        assert!(
            bytes <= summary.valid_bytes * 3 / 2,
            "{bytes} bytes, {summary:?}"
        );
    }
}

/// A read failing anywhere in a readahead window over many generations (its first span,
/// or one of several in flight) fails the scan or the compaction read with an error; what
/// either yielded before is a prefix of the model, never wrong data, and nothing panics.
#[test]
fn a_failed_readahead_span_is_an_error_never_wrong_data() {
    use crate::env::{DeviceProfile, FaultError, FaultInjector, FaultOp, FaultRule, Trigger};
    let dir = tempfile::tempdir().unwrap();
    let faults = FaultInjector::new();
    let env = Env::new(
        dir.path(),
        dir.path(),
        DeviceProfile::none(),
        DeviceProfile::none(),
        false,
        Some(faults.clone()),
    )
    .unwrap();
    let (t, model, _) = many_generations(&env);
    let name = t.path().file_name().unwrap().to_str().unwrap().to_string();
    let mut failed = 0;
    for cause in [IoCause::UserScan, IoCause::Compaction] {
        for after in 0..12 {
            faults.clear();
            faults.add(FaultRule {
                tier: None,
                op: FaultOp::Read,
                name_contains: Some(name.clone()),
                error: FaultError::Io,
                trigger: Trigger::After(after),
            });
            let mut it = t.iter(cause, false);
            let mut i = 0;
            let r = (|| -> crate::error::Result<()> {
                it.seek_to_first()?;
                while it.valid() {
                    assert_eq!(
                        (it.key(), it.value()),
                        (&model[i].0[..], &model[i].1[..]),
                        "{cause:?}, reads failing after {after}"
                    );
                    i += 1;
                    it.next()?;
                }
                Ok(())
            })();
            match r {
                Err(_) => failed += 1,
                Ok(()) => assert_eq!(i, model.len()),
            }
        }
    }
    faults.clear();
    assert!(failed >= 12, "only {failed} of 24 scans met a failed read");
}

//! The checks behind the engine's fuzz targets, one function per target. Each takes the
//! fuzzer's bytes (and an empty scratch directory when it needs files) and panics only when
//! a property fails. The property everywhere is invariant 3 of docs/DESIGN.md (detect, never
//! invent): a reader turns hostile bytes into an `Err`, never a panic, a hang, keys out of
//! order or data that no valid file held.
//!
//! Checksums stop almost every mutation at the first check, so each file target runs twice:
//! on the bytes as given, and on the same bytes with every checksum recomputed where the
//! format puts it (`repair_*` below). The second run reaches the decoders behind the
//! checksums, which must hold up against a forged or miswritten file as well.
//!
//! Also compiled into `crates/tierkv/tests/fuzz_regressions.rs`, which runs the committed
//! seeds and every crash input through these same checks in `cargo test`: keep it free of
//! dependencies other than `tierkv`, its dependency `lz4_flex`, and `std`.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use tierkv::env::{Env, IoCause, Tier};
use tierkv::hot::ralt::{Ralt, RaltOptions};
use tierkv::iter::InternalIterator;
use tierkv::key::{compare_internal, seek_key, user_key, ValueKind, MAX_SEQ};
use tierkv::sst::{Compression, Table, TableBuilder, TableOptions};
use tierkv::version::{VersionEdit, VersionSet};
use tierkv::wal::LogReader;
use tierkv::{Db, LevelLayout, Options, RecoveryMode};

const TABLE: &str = "000001.sst";

type Entry = (Vec<u8>, Vec<u8>);

fn env_in(dir: &Path) -> Arc<Env> {
    Env::single(dir, false).expect("scratch environment")
}

fn open_table(env: &Env, dir: &Path) -> Option<Arc<Table>> {
    let file = env
        .open_random(Tier::Fast, TABLE)
        .unwrap_or_else(|e| panic!("scratch table in {}: {e}", dir.display()));
    Table::open(file, 1, None, IoCause::Check)
        .ok()
        .map(Arc::new)
}

/// Scans forward from the first entry, asserting every key is above the one before.
/// Returns what it saw and whether it reached the end without an error.
fn scan_forward(t: &Arc<Table>) -> (Vec<Entry>, bool) {
    let mut it = t.iter(IoCause::UserScan, false);
    let mut out: Vec<Entry> = Vec::new();
    let mut step = it.seek_to_first();
    while step.is_ok() && it.valid() {
        if let Some((prev, _)) = out.last() {
            assert_eq!(
                compare_internal(prev, it.key()),
                Ordering::Less,
                "forward scan returned keys out of order"
            );
        }
        out.push((it.key().to_vec(), it.value().to_vec()));
        step = it.next();
    }
    (out, step.is_ok())
}

/// [`scan_forward`] backwards: every key below the one before.
fn scan_backward(t: &Arc<Table>) -> (Vec<Entry>, bool) {
    let mut it = t.iter(IoCause::UserScan, false);
    let mut out: Vec<Entry> = Vec::new();
    let mut step = it.seek_to_last();
    while step.is_ok() && it.valid() {
        if let Some((prev, _)) = out.last() {
            assert_eq!(
                compare_internal(it.key(), prev),
                Ordering::Less,
                "backward scan returned keys out of order"
            );
        }
        out.push((it.key().to_vec(), it.value().to_vec()));
        step = it.prev();
    }
    out.reverse();
    (out, step.is_ok())
}

/// A get of `ukey` at `seq` found an entry: it must be that key, at or below `seq`.
fn check_get_result(ukey: &[u8], seek: &[u8], found: &Entry) {
    assert_eq!(user_key(&found.0), ukey, "get returned another user key");
    assert_ne!(
        compare_internal(&found.0, seek),
        Ordering::Less,
        "get returned a version newer than its snapshot"
    );
}

/// Arbitrary bytes opened as a table: open, scans both ways, seeks, gets and verify
/// either fail cleanly or agree with each other, and keys always come in order.
fn sst_table_once(data: &[u8], dir: &Path) {
    let env = env_in(dir);
    std::fs::write(dir.join(TABLE), data).expect("write scratch table");
    let Some(t) = open_table(&env, dir) else {
        return;
    };
    let (fwd, fwd_ok) = scan_forward(&t);
    let (bwd, bwd_ok) = scan_backward(&t);
    let verified = t.verify(IoCause::Check);
    if let Ok(n) = verified {
        // A table that passes verification reads back the same way by every path.
        assert!(fwd_ok && bwd_ok, "verify passed but a scan failed");
        assert_eq!(
            n,
            fwd.len() as u64,
            "verify counted other entries than a scan"
        );
        assert_eq!(fwd, bwd, "forward and backward scans differ");
    }
    // Gets of the keys the scan saw (bounded: a forged table may hold many).
    let mut it = t.iter(IoCause::UserScan, false);
    for (i, (k, v)) in fwd.iter().enumerate().take(64) {
        let ukey = user_key(k);
        let newest = seek_key(ukey, MAX_SEQ);
        let got = t.get(&newest, IoCause::UserGet);
        if let Ok(Some(found)) = &got {
            let found = (found.0.to_vec(), found.1.to_vec());
            check_get_result(ukey, &newest, &found);
        }
        let exact = t.get(k, IoCause::UserGet);
        if let Ok(Some(found)) = &exact {
            check_get_result(ukey, k, &(found.0.to_vec(), found.1.to_vec()));
        }
        let sought = it.seek(k).map(|_| it.valid().then(|| it.key().to_vec()));
        if verified.is_ok() {
            let first = fwd.iter().find(|(fk, _)| user_key(fk) == ukey);
            let first = first.map(|(fk, fv)| (fk.as_slice(), fv.as_slice()));
            let got = got.expect("get on a verified table");
            assert_eq!(
                got.as_ref().map(|(gk, gv)| (&gk[..], &gv[..])),
                first,
                "get of entry {i}'s user key on a verified table"
            );
            let exact = exact.expect("exact get on a verified table");
            assert_eq!(
                exact.as_ref().map(|(gk, gv)| (&gk[..], &gv[..])),
                Some((&k[..], &v[..])),
                "get of entry {i} by its internal key"
            );
            assert_eq!(sought.expect("seek"), Some(k.clone()), "seek to entry {i}");
        }
    }
}

/// What a table is built from and how it is then damaged, decoded from fuzzer bytes.
struct DamageCase {
    opts: TableOptions,
    entries: Vec<Entry>,
    damage: Damage,
}

enum Damage {
    None,
    /// XOR `pattern` (a burst of at most 32 bits, first byte non-zero) at `at` (taken
    /// modulo the file size). CRC32C detects every burst of up to 32 bits, so the
    /// checksums must catch each one.
    Burst {
        at: usize,
        pattern: Vec<u8>,
    },
    /// Keep the first `keep` bytes (modulo the file size).
    Truncate {
        keep: usize,
    },
}

fn decode_damage_case(data: &[u8]) -> Option<DamageCase> {
    let (head, mut rest) = data.split_at_checked(7)?;
    let opts = TableOptions {
        restart_interval: [1, 2, 4, 16][(head[0] & 3) as usize],
        compression: if head[0] & 4 != 0 {
            Compression::Lz4
        } else {
            Compression::None
        },
        bloom_bits_per_key: if head[0] & 8 != 0 { 10 } else { 0 },
        filter_min_record_bytes: 0,
        block_size: [64, 256, 1024, 4096][((head[0] >> 4) & 3) as usize],
        // Cut by record count too when the byte pattern asks (the 1 KiB floor applies).
        block_records: (head[1] & 1 != 0).then_some(4),
    };
    let at = u16::from_le_bytes([head[1], head[2]]) as usize;
    let damage = match head[0] >> 6 {
        0 => Damage::None,
        2 => Damage::Truncate { keep: at },
        _ => {
            let len = 1 + (head[3] & 3) as usize;
            let mut pattern = head[3..3 + len].to_vec();
            if pattern[0] == 0 {
                pattern[0] = 0x80;
            }
            Damage::Burst { at, pattern }
        }
    };
    // Entries: `klen % 12` key bytes, then a byte whose low bit makes a deletion and whose
    // other bits size a value made of a repeated seed (so LZ4 has something to compress).
    // Several versions of one user key are allowed; each entry gets its own sequence.
    let mut entries = Vec::new();
    while let Some((&klen, r)) = rest.split_first() {
        let (key, r) = r.split_at_checked((klen % 12) as usize)?;
        let (&shape, r) = r.split_first()?;
        let (&seed, r) = r.split_first().unwrap_or((&0, r));
        rest = r;
        let seq = entries.len() as u64 + 1;
        let ikey = if shape & 1 == 1 {
            tierkv::key::make_internal_key(key, seq, ValueKind::Delete)
        } else {
            tierkv::key::make_internal_key(key, seq, ValueKind::Value)
        };
        let value: Vec<u8> = if shape & 1 == 1 {
            Vec::new()
        } else {
            (0..(shape as usize >> 1) * 3)
                .map(|i| seed.wrapping_add((i / 8) as u8))
                .collect()
        };
        entries.push((ikey, value));
        if entries.len() >= 2000 {
            break;
        }
    }
    if entries.is_empty() {
        return None;
    }
    entries.sort_by(|a, b| compare_internal(&a.0, &b.0));
    Some(DamageCase {
        opts,
        entries,
        damage,
    })
}

/// A valid table built from fuzzer-chosen entries and options, then damaged by one burst
/// of at most 32 bits or a truncation: every read returns the original data or an error,
/// never a wrong value, a missing key or a key the table did not hold; and the damage is
/// always detected, at open or by `verify`.
pub fn sst_damage(data: &[u8], dir: &Path) {
    let Some(case) = decode_damage_case(data) else {
        return;
    };
    let env = env_in(dir);
    let file = env
        .create_writable(Tier::Fast, TABLE, IoCause::Flush)
        .expect("create scratch table");
    let mut b = TableBuilder::new(file, case.opts);
    for (k, v) in &case.entries {
        b.add(k, v).expect("entries are sorted and distinct");
    }
    b.finish().expect("finish table");
    let path = dir.join(TABLE);
    let mut bytes = std::fs::read(&path).expect("read table back");
    let damaged = match &case.damage {
        Damage::None => false,
        Damage::Burst { at, pattern } => {
            let at = at % bytes.len();
            for (i, x) in pattern.iter().enumerate() {
                if let Some(b) = bytes.get_mut(at + i) {
                    *b ^= x;
                }
            }
            true
        }
        Damage::Truncate { keep } => {
            bytes.truncate(keep % bytes.len());
            true
        }
    };
    std::fs::write(&path, &bytes).expect("write damaged table");
    let original: BTreeMap<&[u8], &[u8]> = case
        .entries
        .iter()
        .map(|(k, v)| (k.as_slice(), v.as_slice()))
        .collect();
    let Some(t) = open_table(&env, dir) else {
        assert!(damaged, "an undamaged table failed to open");
        return;
    };
    for (fwd, ok) in [scan_forward(&t), scan_backward(&t)] {
        for (k, v) in &fwd {
            assert_eq!(
                original.get(k.as_slice()),
                Some(&v.as_slice()),
                "a scan returned an entry the table never held"
            );
        }
        if ok {
            assert_eq!(fwd, case.entries, "a complete scan lost entries");
        }
    }
    match t.verify(IoCause::Check) {
        Ok(n) => {
            assert!(!damaged, "damage went undetected by open and verify");
            assert_eq!(n, case.entries.len() as u64);
        }
        Err(e) => assert!(damaged, "verify failed on an undamaged table: {e}"),
    }
    // Every key reads as itself or as an error: never absent, never another value.
    let mut newest_seen: Option<&[u8]> = None;
    for (k, v) in &case.entries {
        let ukey = user_key(k);
        if newest_seen != Some(ukey) {
            newest_seen = Some(ukey);
            check_exact_get(&t, &seek_key(ukey, MAX_SEQ), k, v, damaged);
            // A user key just above this one: absent unless the table holds it.
            let mut above = ukey.to_vec();
            above.push(0);
            let probe = seek_key(&above, MAX_SEQ);
            if let Ok(Some((fk, fv))) = t.get(&probe, IoCause::UserGet) {
                assert_eq!(
                    original.get(&fk[..]),
                    Some(&&fv[..]),
                    "a get found an entry the table never held"
                );
            }
        }
        check_exact_get(&t, k, k, v, damaged);
    }
}

fn check_exact_get(t: &Table, seek: &[u8], want_key: &[u8], want_value: &[u8], damaged: bool) {
    match t.get(seek, IoCause::UserGet) {
        Ok(Some((k, v))) => {
            assert_eq!(&k[..], want_key, "get returned another version");
            assert_eq!(&v[..], want_value, "get returned a wrong value");
        }
        Ok(None) => panic!("a key the table holds read as absent"),
        Err(e) => assert!(damaged, "get failed on an undamaged table: {e}"),
    }
}

/// Records read from a log in one recovery mode, and how the read ended.
struct LogRead {
    records: Vec<(u64, Vec<u8>)>,
    error: bool,
    dropped: Option<(u64, u64)>,
}

fn read_log(data: &[u8], mode: RecoveryMode) -> LogRead {
    let mut r = LogReader::new(data.to_vec(), PathBuf::from("fuzz.log"), mode);
    let mut records = Vec::new();
    loop {
        match r.next_record() {
            Ok(Some(rec)) => {
                let at = r.last_record_offset();
                assert!(at < data.len() as u64, "record offset past the end");
                records.push((at, rec));
            }
            Ok(None) => break,
            Err(_) => {
                return LogRead {
                    records,
                    error: true,
                    dropped: r.dropped_tail(),
                }
            }
        }
        assert!(records.len() <= data.len(), "more records than bytes");
    }
    LogRead {
        records,
        error: false,
        dropped: r.dropped_tail(),
    }
}

/// Arbitrary bytes read as a log in every recovery mode, each record then decoded as a
/// write batch. The modes differ only in how reading ends: they return the same records,
/// point-in-time never fails, and a log that strict mode accepts is clean for every mode.
fn wal_log_once(data: &[u8]) {
    let tolerant = read_log(data, RecoveryMode::TolerateTornTail);
    let pit = read_log(data, RecoveryMode::PointInTime);
    let strict = read_log(data, RecoveryMode::Strict);
    assert!(!pit.error, "point-in-time recovery failed");
    assert_eq!(
        tolerant.records, pit.records,
        "tolerant and point-in-time differ"
    );
    assert_eq!(
        strict.records, pit.records,
        "strict and point-in-time differ"
    );
    if !strict.error {
        assert!(!tolerant.error && tolerant.dropped.is_none() && pit.dropped.is_none());
    }
    if !tolerant.error && tolerant.dropped.is_none() {
        assert!(
            pit.dropped.is_none(),
            "a clean log lost a tail at point in time"
        );
    }
    for read in [&tolerant, &pit] {
        if let Some((at, len)) = read.dropped {
            assert_eq!(
                at + len,
                data.len() as u64,
                "a dropped tail must reach the end"
            );
        }
    }
    for (at, rec) in &pit.records {
        if let Ok((seq, entries)) = tierkv::fuzz_hooks::wal_batch(rec, Path::new("fuzz.log"), *at) {
            // Recovery numbers the entries seq, seq+1, ...: they must fit the key format.
            let last = seq.checked_add(entries.len() as u64);
            assert!(
                entries.is_empty() || last.is_some_and(|l| l - 1 <= MAX_SEQ),
                "a batch decoded with sequence numbers past MAX_SEQ"
            );
        }
    }
}

/// What a store should hold after replaying `wal`: `None` when recovery is expected to
/// fail or to keep only part of the log, or when sequence numbers do not rise through
/// the log (a forged order that no writer produces, where "newest" is ill-defined).
fn wal_model(wal: &[u8]) -> Option<BTreeMap<Vec<u8>, Vec<u8>>> {
    let read = read_log(wal, RecoveryMode::TolerateTornTail);
    if read.error || read.dropped.is_some() {
        return None;
    }
    let mut model = BTreeMap::new();
    let mut next_seq = 1u64;
    for (at, rec) in &read.records {
        let (seq, entries) = tierkv::fuzz_hooks::wal_batch(rec, Path::new("fuzz.log"), *at).ok()?;
        if entries.is_empty() {
            continue;
        }
        if seq < next_seq || seq.checked_add(entries.len() as u64)? - 1 > MAX_SEQ {
            return None;
        }
        next_seq = seq + entries.len() as u64;
        // Expiring puts read by the system clock, as the store opened here does (a random
        // deadline lands within the run's few milliseconds with negligible odds).
        let now = tierkv::Clock::now_ms(&tierkv::SystemClock);
        for e in entries {
            match e.kind {
                ValueKind::Value => model.insert(e.key.to_vec(), e.value.to_vec()),
                ValueKind::Expiring if e.deadline.is_some_and(|d| d > now) => {
                    model.insert(e.key.to_vec(), e.value.to_vec())
                }
                ValueKind::Expiring | ValueKind::Delete => model.remove(e.key),
            };
        }
    }
    Some(model)
}

/// A fresh store's files by name, and the name of its live WAL.
type Template = (Vec<(String, Vec<u8>)>, String);

/// The template store, created once per process.
fn store_template(scratch: &Path) -> &'static Template {
    static T: OnceLock<Template> = OnceLock::new();
    T.get_or_init(|| {
        let dir = scratch.join("template");
        let db = Db::open(&dir, replay_options()).expect("create template store");
        db.close().expect("close template store");
        let mut files = Vec::new();
        let mut wal = None;
        for e in std::fs::read_dir(&dir).expect("list template") {
            let e = e.expect("template entry");
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(".log") {
                wal = wal.max(Some(name));
            } else if name == "CURRENT" || name.starts_with("MANIFEST-") {
                files.push((name, std::fs::read(e.path()).expect("read template file")));
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        (files, wal.expect("a fresh store has a WAL"))
    })
}

fn replay_options() -> Options {
    Options {
        write_buffer_size: 4 * 1024,
        use_direct_io: false,
        ..Options::default()
    }
}

fn contents(db: &Db) -> tierkv::Result<BTreeMap<Vec<u8>, Vec<u8>>> {
    Ok(db.scan(None, None, usize::MAX)?.into_iter().collect())
}

/// Arbitrary bytes as the WAL of a fresh store, recovered by `Db::open`: recovery fails
/// cleanly or yields exactly the writes of the log (a model replayed from the decoded
/// records), passes `verify_checksums`, and a second recovery finds the same state.
fn wal_replay_once(data: &[u8], dir: &Path) {
    let (files, wal) = store_template(dir);
    let store = dir.join("store");
    std::fs::create_dir_all(&store).expect("scratch store");
    for (name, bytes) in files {
        std::fs::write(store.join(name), bytes).expect("write template file");
    }
    std::fs::write(store.join(wal), data).expect("write WAL");
    let model = wal_model(data);
    let db = match Db::open(&store, replay_options()) {
        Ok(db) => db,
        Err(e) => {
            assert!(model.is_none(), "recovery of a clean log failed: {e}");
            return;
        }
    };
    let first = contents(&db).expect("read a recovered store");
    if let Some(model) = &model {
        assert_eq!(
            &first, model,
            "recovered store differs from the log's writes"
        );
    }
    db.verify_checksums().expect("a recovered store verifies");
    db.close().expect("close a recovered store");
    let db = Db::open(&store, replay_options()).expect("reopen a recovered store");
    assert_eq!(
        contents(&db).expect("read again"),
        first,
        "second recovery differs"
    );
    db.close().expect("close again");
}

/// Arbitrary bytes as a manifest: every record decodes to an edit that re-encodes to
/// itself or fails cleanly, and a store whose manifest it is opens or fails cleanly (with
/// no table files present it can only open if the manifest lists none); a store that
/// opens takes a write that survives a reopen.
fn manifest_once(data: &[u8], dir: &Path) {
    let name = "MANIFEST-000001";
    let mut r = LogReader::new(
        data.to_vec(),
        PathBuf::from(name),
        RecoveryMode::TolerateTornTail,
    );
    while let Ok(Some(rec)) = r.next_record() {
        if let Ok(edit) = VersionEdit::decode(&rec, Path::new(name), r.last_record_offset()) {
            let again = VersionEdit::decode(&edit.encode(), Path::new(name), 0)
                .expect("an encoded edit decodes");
            assert_eq!(again, edit, "edit round trip");
        }
    }
    std::fs::write(dir.join("CURRENT"), format!("{name}\n")).expect("write CURRENT");
    std::fs::write(dir.join(name), data).expect("write manifest");
    let opts = Options::default();
    let layout = Arc::new(LevelLayout::new(&opts));
    let Ok((vs, created)) = VersionSet::open(env_in(dir), layout, false, false) else {
        return;
    };
    assert!(!created, "an existing manifest was replaced by a new store");
    let files = vs.current().all_files().count();
    assert_eq!(files, 0, "opened a version whose tables do not exist");
    drop(vs);
    // The counters it recovered must let the store take writes: open it, write, reopen.
    let opts = || Options {
        create_if_missing: false,
        use_direct_io: false,
        ..Options::default()
    };
    let Ok(db) = Db::open(dir, opts()) else {
        return;
    };
    let wrote = db.put(b"key", b"value").is_ok() && db.flush().is_ok();
    if wrote {
        assert_eq!(db.get(b"key").expect("get").as_deref(), Some(&b"value"[..]));
    }
    let _ = db.close();
    if wrote {
        let db = Db::open(dir, opts()).expect("reopen after a write");
        assert_eq!(db.get(b"key").expect("get").as_deref(), Some(&b"value"[..]));
        let _ = db.close();
    }
}

/// Bytes of a RALT manifest (docs/FORMAT.md, "Manifest (`ralt/MANIFEST`)") listing
/// `files`, with both limits at 1 so that opening it makes an eviction due and
/// maintenance reads every record.
fn ralt_manifest(files: &[(u64, u64)]) -> Vec<u8> {
    use tierkv::coding::{masked_crc, put_fixed32, put_varint64};
    let mut body = Vec::new();
    let hot_rank = f64::NEG_INFINITY.to_bits();
    // next_file, tick, tick_bytes, epoch, epoch_bytes, total_bytes, hot_rank,
    // threshold_tick, hot_set_limit, physical_limit, evictions, evicted_keys,
    // scoring (0, 0: exponential smoothing, the default), file_count.
    for v in [2, 0, 0, 0, 0, 0, hot_rank, 0, 1, 1, 0, 0, 0, 0] {
        put_varint64(&mut body, v);
    }
    put_varint64(&mut body, files.len() as u64);
    for &(level, number) in files {
        put_varint64(&mut body, level);
        put_varint64(&mut body, number);
    }
    let mut out = b"RALTMAN1".to_vec();
    put_fixed32(&mut out, body.len() as u32);
    out.extend_from_slice(&body);
    put_fixed32(&mut out, masked_crc(&body));
    out
}

/// RALT's files from fuzzer bytes: a first byte `M` makes the rest its manifest; any other
/// first byte makes the rest run file 1 at level `byte % 7`, listed by a valid manifest.
/// Opening fails cleanly or gives a tracker whose hot keys come in order and whose
/// maintenance (an eviction reads every record) fails cleanly or completes.
fn ralt_once(data: &[u8], dir: &Path) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let ralt_dir = dir.join("ralt");
    std::fs::create_dir_all(&ralt_dir).expect("scratch ralt dir");
    if mode == b'M' {
        std::fs::write(ralt_dir.join("MANIFEST"), rest).expect("write manifest");
    } else {
        let level = (mode % 7) as u64;
        std::fs::write(ralt_dir.join("MANIFEST"), ralt_manifest(&[(level, 1)]))
            .expect("write manifest");
        std::fs::write(ralt_dir.join("000001.rlt"), rest).expect("write run file");
    }
    let opts = RaltOptions {
        fd_budget: 1 << 20,
        buffer_bytes: 4096,
        ..RaltOptions::default()
    };
    let Ok(r) = Ralt::open(env_in(dir), opts) else {
        return;
    };
    let hi = vec![0xff; data.len() + 1];
    let mut hot: Vec<Vec<u8>> = Vec::new();
    if let Ok(keys) = r.hot_keys(&[], &hi) {
        for item in keys {
            let Ok((k, _)) = item else { break };
            if let Some(prev) = hot.last() {
                assert!(prev < &k, "hot keys out of order");
            }
            hot.push(k);
            assert!(hot.len() <= data.len(), "more hot keys than bytes");
        }
    }
    if let (Some(lo), Some(hi)) = (hot.first(), hot.last()) {
        let _ = r.range_hot_size(lo, hi);
        let _ = r.range_hot_size(hi, lo);
    }
    for k in hot.iter().take(16) {
        let _ = r.is_hot(k);
        let _ = r.record_access(k, 100);
    }
    let _ = r.stats();
    for _ in 0..16 {
        match r.maintenance() {
            Ok(true) => {}
            Ok(false) | Err(_) => break,
        }
    }
    let _ = r.flush();
    let _ = r.stats();
}

/// Recomputes a file's checksums (see the module comment).
type Repair = fn(&[u8]) -> Vec<u8>;

/// Runs `check` on `data`, then on `repair(data)` when that differs, each in its own new
/// subdirectory of `dir`.
fn with_repaired(data: &[u8], dir: &Path, repair: Repair, check: fn(&[u8], &Path)) {
    let run = |data: &[u8], sub: &str| {
        let d = dir.join(sub);
        std::fs::create_dir_all(&d).expect("scratch subdirectory");
        check(data, &d);
    };
    run(data, "as-given");
    let fixed = repair(data);
    if fixed != data {
        run(&fixed, "repaired");
    }
}

/// Arbitrary bytes opened as a table: open, scans both ways, seeks, gets and verify
/// either fail cleanly or agree with each other, and keys always come in order.
pub fn sst_table(data: &[u8], dir: &Path) {
    with_repaired(data, dir, repair_table, sst_table_once);
}

/// Arbitrary bytes read as a log in every recovery mode, each record then decoded as a
/// write batch. The modes differ only in how reading ends: they return the same records,
/// point-in-time never fails, and a log that strict mode accepts is clean for every mode.
pub fn wal_log(data: &[u8]) {
    wal_log_once(data);
    let fixed = repair_log(data);
    if fixed != data {
        wal_log_once(&fixed);
    }
}

/// Arbitrary bytes as the WAL of a fresh store, recovered by `Db::open`: recovery fails
/// cleanly or yields exactly the writes of the log (a model replayed from the decoded
/// records), passes `verify_checksums`, and a second recovery finds the same state.
pub fn wal_replay(data: &[u8], dir: &Path) {
    with_repaired(data, dir, repair_log, wal_replay_once);
}

/// Arbitrary bytes as a manifest: every record decodes to an edit that re-encodes to
/// itself or fails cleanly, and a store whose manifest it is opens or fails cleanly (with
/// no table files present it can only open if the manifest lists none); a store that
/// opens takes a write that survives a reopen.
pub fn manifest(data: &[u8], dir: &Path) {
    with_repaired(data, dir, repair_log, manifest_once);
}

/// RALT's files from fuzzer bytes: a first byte `M` makes the rest its manifest; any other
/// first byte makes the rest run file 1 at level `byte % 7`, listed by a valid manifest.
/// Opening fails cleanly or gives a tracker whose hot keys come in order and whose
/// maintenance (an eviction reads every record) fails cleanly or completes.
pub fn ralt(data: &[u8], dir: &Path) {
    with_repaired(data, dir, repair_ralt, ralt_once);
}

fn masked(data: &[u8]) -> [u8; 4] {
    tierkv::coding::masked_crc(data).to_le_bytes()
}

fn slice_at(data: &[u8], off: u64, len: u64) -> Option<std::ops::Range<usize>> {
    let start = usize::try_from(off).ok()?;
    let end = start.checked_add(usize::try_from(len).ok()?)?;
    (end <= data.len()).then_some(start..end)
}

/// Recomputes every fragment checksum of a log (docs/FORMAT.md, "Log format") while the
/// framing holds together.
fn repair_log(data: &[u8]) -> Vec<u8> {
    use tierkv::wal::{BLOCK_SIZE, HEADER_SIZE};
    let mut out = data.to_vec();
    let mut pos = 0;
    loop {
        let left = BLOCK_SIZE - pos % BLOCK_SIZE;
        if left < HEADER_SIZE {
            pos += left;
            continue;
        }
        let Some(h) = out.get(pos..pos + HEADER_SIZE) else {
            break;
        };
        let len = u16::from_le_bytes([h[4], h[5]]) as usize;
        if h == [0; HEADER_SIZE] || HEADER_SIZE + len > left || pos + HEADER_SIZE + len > out.len()
        {
            break;
        }
        let body_start = pos + HEADER_SIZE;
        let crc = tierkv::coding::masked_crc_parts(&[
            &out[pos + 6..pos + 7],
            &out[body_start..body_start + len],
        ]);
        out[pos..pos + 4].copy_from_slice(&crc.to_le_bytes());
        pos = body_start + len;
    }
    out
}

/// Recomputes a table's checksums (docs/FORMAT.md, "Table files"): the footer's, the
/// metadata blocks' it points at, and the data blocks' the index points at.
fn repair_table(data: &[u8]) -> Vec<u8> {
    use tierkv::coding::decode_fixed64;
    use tierkv::sst::format::{BlockHandle, FOOTER_LEN};
    let mut out = data.to_vec();
    let Some(foot) = out.len().checked_sub(FOOTER_LEN) else {
        return out;
    };
    let crc = masked(&out[foot..foot + 52]);
    out[foot + 52..foot + 56].copy_from_slice(&crc);
    // Fixes the trailer of the block at (off, size); returns its contents if stored plain
    // or LZ4-compressed.
    let fix_block = |out: &mut Vec<u8>, off: u64, size: u64| -> Option<Vec<u8>> {
        let r = slice_at(out, off, size.checked_add(5)?)?;
        let n = r.end - 5;
        let crc = masked(&out[r.start..n + 1]);
        out[n + 1..n + 5].copy_from_slice(&crc);
        match out[n] {
            0 => Some(out[r.start..n].to_vec()),
            1 => lz4_flex::decompress_size_prepended(&out[r.start..n]).ok(),
            _ => None,
        }
    };
    let handle = |i: usize| {
        (
            decode_fixed64(&out[foot + 16 * i..]),
            decode_fixed64(&out[foot + 16 * i + 8..]),
        )
    };
    let (filter, props, index) = (handle(0), handle(1), handle(2));
    fix_block(&mut out, filter.0, filter.1);
    fix_block(&mut out, props.0, props.1);
    let Some(index) = fix_block(&mut out, index.0, index.1) else {
        return out;
    };
    let Ok(block) = tierkv::sst::block::Block::new(bytes::Bytes::from(index)) else {
        return out;
    };
    let mut it = block.iter();
    let mut step = it.seek_to_first();
    while step.is_ok() && it.valid() {
        if let Some(h) = BlockHandle::decode_varint(it.value()) {
            fix_block(&mut out, h.offset, h.size);
        }
        step = it.next();
    }
    out
}

/// Recomputes the checksums of RALT's files (docs/FORMAT.md, "RALT files") behind the
/// target's mode byte: the manifest's, or a run file's footer, index, filter and data
/// blocks.
fn repair_ralt(data: &[u8]) -> Vec<u8> {
    use tierkv::coding::{decode_fixed32, decode_fixed64, get_length_prefixed, get_varint64};
    let mut out = data.to_vec();
    let Some((&mode, _)) = data.split_first() else {
        return out;
    };
    let file = &mut out[1..];
    if mode == b'M' {
        if file.len() >= 16 {
            let len = decode_fixed32(&file[8..]) as usize;
            if let Some(end) = 12usize.checked_add(len).filter(|e| e + 4 <= file.len()) {
                let crc = masked(&file[12..end]);
                file[end..end + 4].copy_from_slice(&crc);
            }
        }
        return out;
    }
    const FOOTER: usize = 88;
    let Some(foot) = file.len().checked_sub(FOOTER) else {
        return out;
    };
    let crc = masked(&file[foot..foot + 84]);
    file[foot + 84..foot + 88].copy_from_slice(&crc);
    let fix = |file: &mut [u8], off: u64, len: u64| -> Option<Vec<u8>> {
        let r = slice_at(file, off, len.checked_add(4)?)?;
        let end = r.end - 4;
        let crc = masked(&file[r.start..end]);
        file[end..r.end].copy_from_slice(&crc);
        Some(file[r.start..end].to_vec())
    };
    let index_at = (
        decode_fixed64(&file[foot..]),
        decode_fixed32(&file[foot + 8..]) as u64,
    );
    let filter_at = (
        decode_fixed64(&file[foot + 12..]),
        decode_fixed32(&file[foot + 20..]) as u64,
    );
    fix(file, filter_at.0, filter_at.1);
    let Some(index) = fix(file, index_at.0, index_at.1) else {
        return out;
    };
    let Some((count, mut p)) = get_varint64(&index) else {
        return out;
    };
    for _ in 0..count.min(index.len() as u64) {
        let Some((_, n)) = get_length_prefixed(&index[p..]) else {
            break;
        };
        p += n;
        let mut vals = [0u64; 3];
        for v in &mut vals {
            match get_varint64(&index[p..]) {
                Some((x, n)) => {
                    *v = x;
                    p += n;
                }
                None => return out,
            }
        }
        fix(file, vals[0], vals[1]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On the real files of the seed corpora the repairs change nothing: they put every
    /// checksum where the format does (a format change that moves one shows up here).
    #[test]
    fn repairs_leave_real_files_unchanged() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let seeds = [root.join("seeds"), root.join("../../fuzz/seeds")]
            .into_iter()
            .find(|p| p.is_dir())
            .expect("seed corpora");
        let repairs: [(&str, Repair); 5] = [
            ("sst_table", repair_table),
            ("wal_log", repair_log),
            ("wal_replay", repair_log),
            ("manifest", repair_log),
            ("ralt", repair_ralt),
        ];
        for (target, repair) in repairs {
            let mut n = 0;
            for e in std::fs::read_dir(seeds.join(target)).expect("seed dir") {
                let path = e.expect("seed").path();
                let data = std::fs::read(&path).expect("read seed");
                assert!(
                    repair(&data) == data,
                    "{} changed by its repair",
                    path.display()
                );
                n += 1;
            }
            assert!(n > 0, "no seeds for {target}");
        }
    }
}

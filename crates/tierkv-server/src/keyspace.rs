//! The server's keyspace format: how Redis keys of each type are laid out as records of the
//! one ordered engine key space (documented byte for byte in docs/FORMAT.md, "Server
//! keyspace"), the format marker checked when a server starts, the hash version allocator,
//! and the record-level helpers every command goes through.
//!
//! Layout (Kvrocks-style, so a hash field update is one small write and reads are point
//! lookups or short scans):
//! - `\x00tierkv-server-format` -> `2`: the marker; a store without it is not served. A
//!   store marked `1` (written before sorted sets had a rank index) is served and marked
//!   `2` at open (see [`open`]).
//! - `\x00tierkv-hash-version` -> u64 BE: the reserved ceiling of hash versions handed out.
//! - `'k' + K` -> `[type][payload]`: one top-level record per Redis key, `'s'` + the raw
//!   bytes for a string, `'h'` + version (u64 BE) + field count (u64 BE) for a hash, and
//!   the same with `'S'` and the member count for a set, `'z'` for a sorted set, and `'l'`
//!   plus the head index (u64 BE) for a list (collections, [`Coll`]). The key's expiry
//!   deadline is this record's engine deadline.
//! - `'f' + u32 BE len(K) + K + version (u64 BE) + element` -> the element's record: a
//!   hash field's value; a set member's (empty); a sorted-set member's score (f64 bits, BE);
//!   for a list, the element is its index (u64 BE), the value the list element.
//! - `'z' + u32 BE len(K) + K + version (u64 BE) + score (8 bytes, ordered) + member` ->
//!   empty: a sorted set's members in score order (see [`score_key`]).
//! - `'r' + u32 BE len(K) + K + version (u64 BE) + level (u8) + separator` -> member
//!   count (u64 BE) + child count (u64 BE): a sorted set's rank index, counted chunks of
//!   its score records (see [`rank_key`] and `commands::zset_index`).
//! - `'x' + u32 BE len(K) + K + version (u64 BE)` -> deadline (u64 BE): a hash version that
//!   has (or had) a deadline, written with its metadata; [`sweep`] removes the fields of
//!   such a version once its metadata is gone, so an expired hash does not leave its
//!   fields on disk.
//!
//! A hash's fields carry the version of the metadata that created them: a hash that is
//! deleted, overwritten or expired and created again gets a new version, so old fields can
//! never reappear in it, whatever was left on disk. Every write to a hash rewrites its
//! metadata record in the same atomic batch, conditioned on that record (see
//! [`transact`]), so hash writers are serialised by it and the field count stays exact.

use crate::error::CmdError;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use tierkv::{Db, ReadOptions, WriteBatch, WriteOptions};

/// The format marker's engine key.
pub(crate) const MARKER_KEY: &[u8] = b"\x00tierkv-server-format";
/// The format version this server writes and serves: 2, with sorted sets' rank index
/// records (`'r'`).
pub(crate) const FORMAT_VERSION: &[u8] = b"2";
/// The format version before the rank index: served as it is (a sorted set without an
/// index is indexed on first use), once its marker is rewritten to [`FORMAT_VERSION`] so
/// that an older server, whose writes would leave an index stale, refuses the store.
pub(crate) const FORMAT_VERSION_1: &[u8] = b"1";
/// The record holding the reserved ceiling of hash versions.
pub(crate) const VERSION_KEY: &[u8] = b"\x00tierkv-hash-version";
/// Prefix of top-level records.
pub(crate) const META: u8 = b'k';
/// Prefix of hash field records.
pub(crate) const FIELD: u8 = b'f';
/// Prefix of expiring-hash records.
pub(crate) const EXPIRING: u8 = b'x';
/// Prefix of sorted-set score records.
pub(crate) const SCORE: u8 = b'z';
/// Prefix of sorted-set rank index records.
pub(crate) const RANK: u8 = b'r';
/// Type byte of a string.
pub(crate) const T_STRING: u8 = b's';
/// Type byte of a hash.
pub(crate) const T_HASH: u8 = b'h';
/// Type byte of a set.
pub(crate) const T_SET: u8 = b'S';
/// Type byte of a sorted set.
pub(crate) const T_ZSET: u8 = b'z';
/// Type byte of a list.
pub(crate) const T_LIST: u8 = b'l';
/// The head index of a new list: the middle of the index space, so it can grow both ways.
pub(crate) const LIST_START: u64 = 1 << 63;

/// Hash versions reserved (persisted) at a time.
const VERSION_BLOCK: u64 = 1 << 20;

/// Fields of a deleted hash removed in the same atomic batch as its metadata; the rest
/// (already unreachable, since their version is dead) are removed in further batches of
/// this size right after.
pub(crate) const INLINE_FIELD_DELETES: usize = 1024;

/// The Redis error for a command on a key of another type.
pub(crate) fn wrongtype() -> CmdError {
    CmdError("WRONGTYPE Operation against a key holding the wrong kind of value".into())
}

/// A top-level record as stored: its encoded value and its expiry deadline (ms since the
/// epoch).
#[derive(Clone, Debug)]
pub(crate) struct Rec {
    pub raw: Vec<u8>,
    pub deadline: Option<u64>,
}

/// The types kept as a metadata record plus one record per element (field or member).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Coll {
    /// Elements are fields, each record's value the field's value.
    Hash,
    /// Elements are members, each record's value empty.
    Set,
    /// Elements are members, each record's value the score; plus a score record each.
    ZSet,
    /// Elements are indexes from the metadata's head, each record's value the element.
    List,
}

impl Coll {
    fn type_byte(self) -> u8 {
        match self {
            Coll::Hash => T_HASH,
            Coll::Set => T_SET,
            Coll::ZSet => T_ZSET,
            Coll::List => T_LIST,
        }
    }

    fn of_type_byte(t: u8) -> Option<Coll> {
        match t {
            T_HASH => Some(Coll::Hash),
            T_SET => Some(Coll::Set),
            T_ZSET => Some(Coll::ZSet),
            T_LIST => Some(Coll::List),
            _ => None,
        }
    }
}

/// A collection's metadata: its type, the version its elements carry, their count, and
/// for a list the index of its first element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CollMeta {
    pub coll: Coll,
    pub version: u64,
    pub len: u64,
    /// A list's first index (its elements are `head..head + len`); [`LIST_START`] for
    /// other types (not stored).
    pub head: u64,
}

impl CollMeta {
    /// The metadata of a collection of `len` elements at `version` (a list's head at
    /// [`LIST_START`]).
    pub fn new(coll: Coll, version: u64, len: u64) -> CollMeta {
        CollMeta {
            coll,
            version,
            len,
            head: LIST_START,
        }
    }
}

/// A decoded top-level value.
#[derive(Debug)]
pub(crate) enum Kind<'a> {
    Str(&'a [u8]),
    Coll(CollMeta),
}

fn corrupt(raw: &[u8]) -> CmdError {
    CmdError::err(format!(
        "corrupt top-level record (type byte {:?}, {} bytes): not written by this server",
        raw.first().map(|b| *b as char),
        raw.len()
    ))
}

/// Decodes a top-level record's value.
pub(crate) fn decode(raw: &[u8]) -> Result<Kind<'_>, CmdError> {
    match raw.first() {
        Some(&T_STRING) => Ok(Kind::Str(&raw[1..])),
        Some(&t) => {
            let coll = Coll::of_type_byte(t).ok_or_else(|| corrupt(raw))?;
            let want = if coll == Coll::List { 25 } else { 17 };
            if raw.len() != want {
                return Err(corrupt(raw));
            }
            let word = |at: usize| {
                let mut w = [0u8; 8];
                w.copy_from_slice(&raw[at..at + 8]);
                u64::from_be_bytes(w)
            };
            Ok(Kind::Coll(CollMeta {
                coll,
                version: word(1),
                len: word(9),
                head: if coll == Coll::List {
                    word(17)
                } else {
                    LIST_START
                },
            }))
        }
        None => Err(corrupt(raw)),
    }
}

impl Rec {
    pub fn kind(&self) -> Result<Kind<'_>, CmdError> {
        decode(&self.raw)
    }

    /// The string payload, or WRONGTYPE.
    pub fn string(&self) -> Result<&[u8], CmdError> {
        match self.kind()? {
            Kind::Str(s) => Ok(s),
            Kind::Coll(_) => Err(wrongtype()),
        }
    }

    /// The metadata of a collection of type `coll`, or WRONGTYPE.
    pub fn coll(&self, coll: Coll) -> Result<CollMeta, CmdError> {
        match self.kind()? {
            Kind::Coll(m) if m.coll == coll => Ok(m),
            _ => Err(wrongtype()),
        }
    }

    /// Redis's TYPE name.
    pub fn type_name(&self) -> &'static str {
        type_name(&self.raw)
    }
}

/// Redis's TYPE name of an encoded top-level value.
pub(crate) fn type_name(raw: &[u8]) -> &'static str {
    match raw.first() {
        Some(&T_HASH) => "hash",
        Some(&T_SET) => "set",
        Some(&T_ZSET) => "zset",
        Some(&T_LIST) => "list",
        _ => "string",
    }
}

/// The top-level record key of Redis key `k`.
pub(crate) fn meta_key(k: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(1 + k.len());
    v.push(META);
    v.extend_from_slice(k);
    v
}

/// The common prefix of the field records of hash `k` at `version`.
pub(crate) fn field_prefix(k: &[u8], version: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(13 + k.len());
    v.push(FIELD);
    v.extend_from_slice(&(k.len() as u32).to_be_bytes());
    v.extend_from_slice(k);
    v.extend_from_slice(&version.to_be_bytes());
    v
}

/// The record key of one field.
pub(crate) fn field_key(k: &[u8], version: u64, field: &[u8]) -> Vec<u8> {
    let mut v = field_prefix(k, version);
    v.extend_from_slice(field);
    v
}

/// The smallest key greater than every key starting with `prefix` (None: no such bound).
pub(crate) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last != 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// A string's encoded value.
pub(crate) fn str_value(v: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + v.len());
    out.push(T_STRING);
    out.extend_from_slice(v);
    out
}

/// A collection's metadata record value.
pub(crate) fn coll_value(m: CollMeta) -> Vec<u8> {
    let mut out = Vec::with_capacity(25);
    out.push(m.coll.type_byte());
    out.extend_from_slice(&m.version.to_be_bytes());
    out.extend_from_slice(&m.len.to_be_bytes());
    if m.coll == Coll::List {
        out.extend_from_slice(&m.head.to_be_bytes());
    }
    out
}

/// The common prefix of sorted set `k`'s score records at `version`.
pub(crate) fn score_prefix(k: &[u8], version: u64) -> Vec<u8> {
    let mut v = field_prefix(k, version);
    v[0] = SCORE;
    v
}

/// A score as 8 bytes whose byte order is the scores' numeric order (-inf first, +inf
/// last; -0 and 0 as one): the sign bit flipped for positives, every bit for negatives.
pub(crate) fn score_bytes(score: f64) -> [u8; 8] {
    let score = if score == 0.0 { 0.0 } else { score };
    let bits = score.to_bits();
    let ordered = if bits >> 63 == 0 {
        bits | (1 << 63)
    } else {
        !bits
    };
    ordered.to_be_bytes()
}

/// The score [`score_bytes`] encoded.
pub(crate) fn score_from_bytes(b: [u8; 8]) -> f64 {
    let ordered = u64::from_be_bytes(b);
    let bits = if ordered >> 63 == 1 {
        ordered & !(1 << 63)
    } else {
        !ordered
    };
    f64::from_bits(bits)
}

/// The score record key of `member` at `score` in sorted set `k` at `version`.
pub(crate) fn score_key(k: &[u8], version: u64, score: f64, member: &[u8]) -> Vec<u8> {
    let mut v = score_prefix(k, version);
    v.extend_from_slice(&score_bytes(score));
    v.extend_from_slice(member);
    v
}

/// The common prefix of sorted set `k`'s rank index records at `version`.
pub(crate) fn rank_prefix(k: &[u8], version: u64) -> Vec<u8> {
    let mut v = field_prefix(k, version);
    v[0] = RANK;
    v
}

/// The rank index record of sorted set `k` at `version` at `level` (1 and up; 0 is the
/// header) whose separator is `sep` (a score record's key after [`score_prefix`], or the
/// end mark `ff ff`; empty for the header).
pub(crate) fn rank_key(k: &[u8], version: u64, level: u8, sep: &[u8]) -> Vec<u8> {
    let mut v = rank_prefix(k, version);
    v.push(level);
    v.extend_from_slice(sep);
    v
}

/// The element key of a list's element at `index`.
pub(crate) fn list_key(k: &[u8], version: u64, index: u64) -> Vec<u8> {
    field_key(k, version, &index.to_be_bytes())
}

/// The element records' prefixes of a collection at `version`: its element records and,
/// for a sorted set, its score records and its rank index records (none for other types).
/// Deletion, the sweep, RENAME and COPY go through these, so they treat the index as more
/// element records of the version.
pub(crate) fn element_prefixes(k: &[u8], version: u64) -> [Vec<u8>; 3] {
    [
        field_prefix(k, version),
        score_prefix(k, version),
        rank_prefix(k, version),
    ]
}

/// Read options over the field records of hash `k` at `version`.
pub(crate) fn field_ropts(k: &[u8], version: u64, snapshot: Option<u64>) -> ReadOptions {
    prefix_ropts(&field_prefix(k, version), snapshot)
}

/// Read options over the records starting with `prefix`.
pub(crate) fn prefix_ropts(prefix: &[u8], snapshot: Option<u64>) -> ReadOptions {
    ReadOptions {
        upper_bound: prefix_end(prefix),
        lower_bound: Some(prefix.to_vec()),
        snapshot,
        ..ReadOptions::new()
    }
}

/// Reads Redis key `k`'s top-level record (an expired one reads as absent).
pub(crate) fn get(db: &Db, k: &[u8], ropts: &ReadOptions) -> tierkv::Result<Option<Rec>> {
    Ok(db.get_entry_opt(meta_key(k), ropts)?.map(|e| Rec {
        raw: e.value,
        deadline: e.deadline,
    }))
}

/// [`get`] answered from memory (`Db::get_entry_in_memory`): `WouldBlock` when only a
/// disk read would answer.
pub(crate) fn get_in_memory(db: &Db, k: &[u8]) -> tierkv::Result<Option<Rec>> {
    Ok(db
        .get_entry_in_memory(meta_key(k), &ReadOptions::new())?
        .map(|e| Rec {
            raw: e.value,
            deadline: e.deadline,
        }))
}

/// Reads the top-level records of a prefix of `keys` in one batched read (the engine's
/// `multi_get_prefix`: their disk reads in flight together), holding at most `max_bytes`
/// of records plus one: one answer per key of the prefix, in order, at least one. Each
/// answer is what [`get`] gives for its key at the same read point (expiry included: the
/// engine's deadline is the key's).
pub(crate) fn get_prefix<K: AsRef<[u8]>>(
    db: &Db,
    keys: &[K],
    ropts: &ReadOptions,
    max_bytes: usize,
) -> Vec<tierkv::Result<Option<Rec>>> {
    let meta: Vec<Vec<u8>> = keys.iter().map(|k| meta_key(k.as_ref())).collect();
    db.multi_get_prefix(&meta, ropts, max_bytes)
        .into_iter()
        .map(|answer| {
            answer.map(|e| {
                e.map(|e| Rec {
                    raw: e.value,
                    deadline: e.deadline,
                })
            })
        })
        .collect()
}

/// The expiring-hash record key of hash `k` at `version`.
pub(crate) fn expiring_key(k: &[u8], version: u64) -> Vec<u8> {
    let mut v = field_prefix(k, version);
    v[0] = EXPIRING;
    v
}

/// The hash key and version an expiring-hash record names.
fn parse_expiring_key(ek: &[u8]) -> Option<(&[u8], u64)> {
    let rest = ek.strip_prefix(&[EXPIRING])?;
    let len = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    let k = rest.get(4..4 + len)?;
    let v = rest.get(4 + len..)?;
    (v.len() == 8).then(|| (k, u64::from_be_bytes(v.try_into().unwrap_or_default())))
}

/// Adds a top-level record write (with its deadline) to `batch`. A hash metadata record
/// with a deadline also (re)writes its expiring-hash record, so [`sweep`] finds its fields
/// once it has expired.
pub(crate) fn put(batch: &mut WriteBatch, engine_key: &[u8], raw: &[u8], deadline: Option<u64>) {
    match deadline {
        Some(d) => batch.put_expiring(engine_key, raw, d),
        None => batch.put(engine_key, raw),
    };
    if let (Some(d), Some(k), Ok(Kind::Coll(m))) = (deadline, engine_key.get(1..), decode(raw)) {
        batch.put(expiring_key(k, m.version), d.to_be_bytes());
    }
}

/// Expiring-hash records examined per [`sweep`] call.
pub(crate) const SWEEP_BATCH: usize = 1024;

/// One bounded step of the expired-hash sweep: examines up to [`SWEEP_BATCH`] expiring-hash
/// records from `cursor` (wrapping around at the end); for each whose hash version is dead
/// (its metadata expired, deleted or replaced), deletes the version's fields and the
/// record. Reads only these records and the metadata they name, never the field range of
/// live hashes. Returns the number of field records deleted.
pub(crate) fn sweep(db: &Db, wopts: &WriteOptions, cursor: &mut Vec<u8>) -> tierkv::Result<u64> {
    let lower = if cursor.is_empty() {
        vec![EXPIRING]
    } else {
        cursor.clone()
    };
    let ropts = ReadOptions {
        lower_bound: Some(lower),
        upper_bound: Some(vec![EXPIRING + 1]),
        fill_cache: false,
        scan_length_hint: Some(SWEEP_BATCH),
        ..ReadOptions::new()
    };
    let mut it = db.iter_opt(&ropts)?;
    it.seek_to_first()?;
    let mut dead: Vec<Vec<u8>> = Vec::new();
    let mut n = 0;
    while it.valid() && n < SWEEP_BATCH {
        let ek = it.key();
        if let Some((k, version)) = parse_expiring_key(ek) {
            let alive = match get(db, k, &ReadOptions::new())? {
                Some(r) => matches!(decode(&r.raw), Ok(Kind::Coll(m)) if m.version == version),
                None => false,
            };
            if !alive {
                dead.push(ek.to_vec());
            }
        }
        n += 1;
        it.next()?;
    }
    *cursor = if it.valid() {
        it.key().to_vec()
    } else {
        Vec::new()
    };
    drop(it);
    let mut swept = 0;
    for ek in dead {
        if let Some((k, version)) = parse_expiring_key(&ek) {
            swept += drop_fields_counted(db, wopts, k, version)?;
        }
        db.delete_opt(&ek, wopts)?;
    }
    Ok(swept)
}

/// The store's multi-record atomic step: reads the records `keys` (engine keys), and
/// applies the batch `f` builds only if none of them changed meanwhile (retrying
/// otherwise). Returns whether a batch applied.
pub(crate) fn transact(
    db: &Db,
    wopts: &WriteOptions,
    keys: &[&[u8]],
    mut f: impl FnMut(&[Option<Rec>]) -> Option<WriteBatch>,
) -> tierkv::Result<bool> {
    db.update_many(keys, wopts, |vals| {
        let recs: Vec<Option<Rec>> = vals
            .iter()
            .map(|v| {
                v.as_ref().map(|e| Rec {
                    raw: e.value.clone(),
                    deadline: e.deadline,
                })
            })
            .collect();
        f(&recs)
    })
}

/// Adds to `batch` the deletion of Redis key `k`, whose record is `old`: its top-level
/// record and, for a hash, up to [`INLINE_FIELD_DELETES`] fields. Returns the hash version
/// whose remaining fields [`drop_fields`] must remove once the batch applied (`None`: none
/// left).
pub(crate) fn delete_value(
    db: &Db,
    batch: &mut WriteBatch,
    k: &[u8],
    old: &Rec,
) -> Result<Option<u64>, CmdError> {
    batch.delete(meta_key(k));
    let Kind::Coll(m) = old.kind()? else {
        return Ok(None);
    };
    let families: &[Vec<u8>] = if m.coll == Coll::ZSet {
        &element_prefixes(k, m.version)
    } else {
        &[field_prefix(k, m.version)]
    };
    let mut n = 0;
    for prefix in families {
        let mut it = db.iter_opt(&prefix_ropts(prefix, None))?;
        it.seek_to_first()?;
        while it.valid() {
            if n == INLINE_FIELD_DELETES {
                return Ok(Some(m.version));
            }
            batch.delete(it.key());
            n += 1;
            it.next()?;
        }
    }
    Ok(None)
}

/// Removes every element record (fields, and a sorted set's score records) of collection
/// `k` at a dead `version` (one whose metadata is gone: nothing reads or writes it any
/// more), in bounded batches.
pub(crate) fn drop_fields(
    db: &Db,
    wopts: &WriteOptions,
    k: &[u8],
    version: u64,
) -> tierkv::Result<()> {
    drop_fields_counted(db, wopts, k, version).map(|_| ())
}

/// [`drop_fields`], returning how many field records it deleted.
fn drop_fields_counted(
    db: &Db,
    wopts: &WriteOptions,
    k: &[u8],
    version: u64,
) -> tierkv::Result<u64> {
    let mut total = 0u64;
    for prefix in element_prefixes(k, version) {
        loop {
            let mut it = db.iter_opt(&ReadOptions {
                fill_cache: false,
                ..prefix_ropts(&prefix, None)
            })?;
            it.seek_to_first()?;
            let mut batch = WriteBatch::new();
            while it.valid() && batch.len() < INLINE_FIELD_DELETES {
                batch.delete(it.key());
                it.next()?;
            }
            let more = it.valid();
            drop(it);
            if batch.is_empty() {
                break;
            }
            total += batch.len() as u64;
            db.write_opt(batch, wopts)?;
            if !more {
                break;
            }
        }
    }
    Ok(total)
}

/// Hands out hash versions: unique for the life of the store (across restarts, whatever
/// the clock does), increasing. Versions are reserved in blocks whose ceiling is persisted
/// before any version of the block is used.
pub(crate) struct Versions {
    next: AtomicU64,
    reserved: Mutex<u64>,
}

impl Versions {
    /// Continues from `other` (loaded from a store this server now serves, or its own
    /// store after replicated writes moved its ceiling): never goes back.
    pub fn adopt(&self, other: Versions) {
        let mut reserved = self.reserved.lock();
        *reserved = other.reserved.into_inner();
        self.next
            .fetch_max(other.next.into_inner(), Ordering::Relaxed);
    }

    /// Takes the next version, persisting a new ceiling first when the block is used up.
    pub fn next(&self, db: &Db) -> tierkv::Result<u64> {
        let v = self.next.fetch_add(1, Ordering::Relaxed);
        let mut reserved = self.reserved.lock();
        if v >= *reserved {
            let ceiling = v.saturating_add(VERSION_BLOCK);
            db.put_opt(
                VERSION_KEY,
                ceiling.to_be_bytes(),
                &WriteOptions { sync: true },
            )?;
            *reserved = ceiling;
        }
        Ok(v)
    }
}

/// Why a store cannot be served.
pub(crate) fn format_error(dir: &str, why: &str) -> String {
    format!("{dir}: {why}")
}

/// Checks (or, for an empty store, writes) the format marker, moving a version-1 store to
/// version 2 (only the marker changes: its sorted sets are indexed when first used), and
/// loads the hash version allocator. A store holding data without the marker (written by `tierkv put`, the
/// benchmark, or a library user) is refused: its records are raw engine keys, not this
/// server's encoding.
pub(crate) fn open(db: &Db) -> Result<Versions, String> {
    let dir = db.tier_dir(tierkv::Tier::Fast).display().to_string();
    match db
        .get(MARKER_KEY)
        .map_err(|e| format_error(&dir, &e.to_string()))?
    {
        Some(v) if v == FORMAT_VERSION => {}
        Some(v) if v == FORMAT_VERSION_1 => {
            db.put_opt(MARKER_KEY, FORMAT_VERSION, &WriteOptions { sync: true })
                .map_err(|e| format_error(&dir, &e.to_string()))?;
        }
        Some(v) => {
            return Err(format_error(
                &dir,
                &format!(
                    "server keyspace format version {:?} is unknown to this tierkv serve \
                     (it reads versions {} and {})",
                    String::from_utf8_lossy(&v),
                    String::from_utf8_lossy(FORMAT_VERSION_1),
                    String::from_utf8_lossy(FORMAT_VERSION)
                ),
            ))
        }
        None => {
            let mut it = db.iter().map_err(|e| format_error(&dir, &e.to_string()))?;
            it.seek_to_first()
                .map_err(|e| format_error(&dir, &e.to_string()))?;
            if it.valid() {
                return Err(format_error(
                    &dir,
                    "holds data not written by tierkv serve (e.g. from tierkv put or bench); \
                     serve an empty directory",
                ));
            }
            drop(it);
            db.put_opt(MARKER_KEY, FORMAT_VERSION, &WriteOptions { sync: true })
                .map_err(|e| format_error(&dir, &e.to_string()))?;
        }
    }
    let stored = match db
        .get(VERSION_KEY)
        .map_err(|e| format_error(&dir, &e.to_string()))?
    {
        Some(v) if v.len() == 8 => {
            let mut b = [0u8; 8];
            b.copy_from_slice(&v);
            u64::from_be_bytes(b)
        }
        Some(_) => return Err(format_error(&dir, "corrupt hash version record")),
        None => 0,
    };
    // Start above every version ever reserved; the clock only makes versions of different
    // runs far apart, which helps whoever reads the raw records.
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0);
    let start = stored.max(now_us).max(1);
    Ok(Versions {
        next: AtomicU64::new(start),
        reserved: Mutex::new(stored),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_round_trip_and_order() {
        for coll in [Coll::Hash, Coll::Set, Coll::ZSet, Coll::List] {
            let m = CollMeta {
                head: if coll == Coll::List { 99 } else { LIST_START },
                ..CollMeta::new(coll, 7, 3)
            };
            assert!(matches!(decode(&coll_value(m)).unwrap(), Kind::Coll(x) if x == m));
        }
        let m = CollMeta::new(Coll::Hash, 7, 3);
        let mut scores = [
            f64::NEG_INFINITY,
            -1e300,
            -2.5,
            -f64::MIN_POSITIVE,
            0.0,
            f64::MIN_POSITIVE,
            1.0,
            3.5e10,
            f64::INFINITY,
        ]
        .map(score_bytes);
        let sorted = scores;
        scores.sort();
        assert_eq!(scores, sorted, "score bytes sort as the scores do");
        assert_eq!(score_bytes(-0.0), score_bytes(0.0));
        for s in [-2.5, 0.0, 1e-300, f64::INFINITY] {
            assert_eq!(score_from_bytes(score_bytes(s)), s);
        }
        assert!(matches!(decode(&str_value(b"v")).unwrap(), Kind::Str(b"v")));
        assert!(decode(b"").is_err() && decode(b"h12").is_err() && decode(b"x").is_err());
        // The length prefix keeps one key's fields apart from a longer key's.
        assert!(field_key(b"a", 1, b"zzz") < field_key(b"ab", 1, b""));
        assert_eq!(meta_key(b"x"), b"kx");
        assert_eq!(
            parse_expiring_key(&expiring_key(b"key", 9)),
            Some((&b"key"[..], 9))
        );
        assert_eq!(parse_expiring_key(b"x\0\0\0\x05ab"), None);
        let mut b = WriteBatch::new();
        put(&mut b, &meta_key(b"h"), &coll_value(m), Some(5));
        put(&mut b, &meta_key(b"s"), &str_value(b"v"), Some(5));
        put(&mut b, &meta_key(b"h2"), &coll_value(m), None);
        assert_eq!(
            b.len(),
            4,
            "only a hash with a deadline gets an expiring record"
        );
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff\xff"), None);
    }
}

//! The fast disk's record cache: copies of records read from the slow tier, kept in the
//! part of the fast disk's budget that the fast tier's tables and WALs leave idle,
//! and, once full, admitted by how often their keys were read from the slow tier (a
//! count-min sketch of those reads, TinyLFU's rule: a candidate displaces an entry only
//! if its key was read more often lately). It serves the warm keys that the memory caches cannot
//! hold and HotRAP's tracker does not judge hot: keys read every few million operations
//! (docs/bench/hyperdb-ycsb.md). It owns its segment files (`NNNNNN.rcs` on the fast tier)
//! and its in-memory index; it never touches the LSM's tables, versions or manifest.
//!
//! **Why an entry is never stale** (invariant 1, no invalidation needed): an entry is a
//! copy of the newest version of its key in one slow-tier table, tagged with that
//! table's number, and tables are immutable. The read path asks for it only at the point
//! where it would read that same table's data block for the key
//! (`version::LevelLookup::step`), so the entry answers exactly what the block would. A
//! compaction writes its output under new numbers, so entries of the tables it removed
//! stop matching and age out. Only reads of the latest state offer records (a snapshot
//! read may find a version older than the table's newest), and a read at a sequence
//! number older than an entry's reads the block.
//!
//! **Space**: admitted records are appended to an open segment in memory; a full segment
//! is written to its own file once, without sync: the cache is not kept across opens
//! (opening removes any segment file left behind), so a crash loses nothing but warmth.
//! When the segments outgrow the room the store gives ([`RecordCache::set_room`], after
//! every background job: the budget less the fast tier's tables, the live WALs and two
//! memtables' worth), the oldest segment goes: entries read since they were written are copied
//! into the open segment (a second chance, as in CLOCK), up to half a segment's worth,
//! and the rest leave the index. So the cache gives its space back as L0 fills.
//!
//! Reading or writing a segment that fails (I/O error, a checksum mismatch) costs only
//! the copy: the read goes on to the slow tier, and the failure is counted.

mod sketch;

use crate::env::{Env, IoCause, RandomAccessFile, Tier};
use crate::error::Result;
use crate::key::{parse_internal_key, SeqNo};
use bytes::Bytes;
use parking_lot::Mutex;
use serde::Serialize;
use sketch::Sketch;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Bytes of a record's header (table number, key and value lengths) and trailer (CRC).
const HEADER: usize = 16;
const TRAILER: usize = 4;
/// Index bytes per entry, for the stats: the key hash, the slot, hashbrown's control byte
/// and its load factor.
const INDEX_BYTES_PER_ENTRY: u64 = 40;

/// Name of a segment file.
fn segment_file_name(id: u32) -> String {
    format!("{id:06}.rcs")
}

/// True for a name [`segment_file_name`] makes.
fn is_segment_file_name(name: &str) -> bool {
    name.strip_suffix(".rcs")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// What the record cache holds and did (in [`crate::DbStats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RecordCacheStats {
    /// Bytes of records held (sealed segments and the open one).
    pub bytes: u64,
    /// The room the store gives it now (it shrinks as the fast levels grow).
    pub room: u64,
    /// Records indexed.
    pub entries: u64,
    /// Memory the index and the sketch take (estimated).
    pub memory_bytes: u64,
    /// Reads of a slow-tier table's block it answered instead.
    pub hits: u64,
    /// Records read from the slow tier offered to it.
    pub offered: u64,
    /// Offered records it admitted.
    pub admitted: u64,
    /// Bytes of segments written to the fast disk.
    pub written_bytes: u64,
    /// Entries dropped with their segment.
    pub evicted: u64,
    /// Entries of an evicted segment kept by being copied into the open one.
    pub kept: u64,
    /// Segment reads or writes that failed, and entries that failed their checksum.
    pub errors: u64,
}

/// Where an indexed record is.
#[derive(Clone, Copy)]
struct Slot {
    /// The slow-tier table the record is the newest version of its key in.
    table: u64,
    segment: u32,
    offset: u32,
    len: u32,
    /// Read since it was written (it gets a second chance at eviction).
    referenced: bool,
}

/// A segment's bytes: in memory until its file is written, then in the file.
#[derive(Clone)]
enum Data {
    Memory(Arc<Vec<u8>>),
    File(Arc<RandomAccessFile>),
}

struct Segment {
    id: u32,
    data: Data,
    len: u64,
    /// The key hashes of the records appended to it (some since replaced or evicted).
    keys: Vec<u64>,
}

struct State {
    index: HashMap<u64, Slot>,
    sketch: Sketch,
    open_id: u32,
    open: Vec<u8>,
    open_keys: Vec<u64>,
    /// Sealed segments, oldest first, with consecutive ids.
    sealed: VecDeque<Segment>,
    sealed_bytes: u64,
    /// The next entry of the oldest segment that admission weighs a candidate against
    /// (an index into its `keys`).
    victim_at: usize,
}

impl State {
    fn used(&self) -> u64 {
        self.sealed_bytes + self.open.len() as u64
    }

    /// The entry the next admission into a full cache displaces: the oldest segment's
    /// first entry still indexed there and not read since it was written (a read one
    /// will be kept when its segment goes). `None` when there is none.
    fn next_victim(&mut self) -> Option<u64> {
        let oldest = self.sealed.front()?;
        while let Some(&hash) = oldest.keys.get(self.victim_at) {
            if self
                .index
                .get(&hash)
                .is_some_and(|s| s.segment == oldest.id && !s.referenced)
            {
                return Some(hash);
            }
            self.victim_at += 1;
        }
        None
    }

    fn sealed_index(&self, id: u32) -> Option<usize> {
        let first = self.sealed.front()?.id;
        let i = id.wrapping_sub(first) as usize;
        (i < self.sealed.len()).then_some(i)
    }

    /// Appends the record `write` puts at the open segment's end and indexes it
    /// (replacing any entry of the same hash).
    fn append(&mut self, hash: u64, table: u64, write: impl FnOnce(&mut Vec<u8>)) {
        let offset = self.open.len();
        write(&mut self.open);
        let slot = Slot {
            table,
            segment: self.open_id,
            offset: offset as u32,
            len: (self.open.len() - offset) as u32,
            referenced: false,
        };
        self.open_keys.push(hash);
        self.index.insert(hash, slot);
    }

    /// Moves the open segment to the sealed ones (its bytes stay in memory until written).
    fn seal(&mut self) {
        let data = std::mem::take(&mut self.open);
        let len = data.len() as u64;
        self.sealed.push_back(Segment {
            id: self.open_id,
            data: Data::Memory(Arc::new(data)),
            len,
            keys: std::mem::take(&mut self.open_keys),
        });
        self.sealed_bytes += len;
        self.open_id = self.open_id.wrapping_add(1);
    }
}

/// The fast disk's record cache (see the module doc).
pub struct RecordCache {
    env: Arc<Env>,
    segment_size: usize,
    max_bytes: u64,
    room: AtomicU64,
    state: Mutex<State>,
    /// Held by the one thread writing and evicting segments.
    upkeep: Mutex<()>,
    hits: AtomicU64,
    offered: AtomicU64,
    admitted: AtomicU64,
    written_bytes: AtomicU64,
    evicted: AtomicU64,
    kept: AtomicU64,
    errors: AtomicU64,
}

impl RecordCache {
    /// An empty cache of at most `max_bytes` in segments of `segment_size`, removing any
    /// segment file an earlier open left on the fast tier.
    /// `max_bytes` is the most it will ever hold (at most the fast disk's budget).
    pub(crate) fn open(env: Arc<Env>, max_bytes: u64, segment_size: usize) -> Result<RecordCache> {
        for name in env.list(Tier::Fast)? {
            if is_segment_file_name(&name) {
                env.remove(Tier::Fast, &name)?;
            }
        }
        // The sketch counts keys read from the slow disk over a window of ten times as
        // many reads as the cache holds records; records are assumed to average 256
        // bytes (HyperDB's are 136, HotRAP's 1 KiB), and the sketch to at most 4 MiB.
        let keys = (max_bytes / 256).clamp(1 << 10, 1 << 20) as usize;
        Ok(RecordCache {
            env,
            segment_size: segment_size.max(4096),
            max_bytes,
            room: AtomicU64::new(0),
            state: Mutex::new(State {
                index: HashMap::new(),
                sketch: Sketch::new(keys),
                open_id: 1,
                open: Vec::new(),
                open_keys: Vec::new(),
                sealed: VecDeque::new(),
                sealed_bytes: 0,
                victim_at: 0,
            }),
            upkeep: Mutex::new(()),
            hits: AtomicU64::new(0),
            offered: AtomicU64::new(0),
            admitted: AtomicU64::new(0),
            written_bytes: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
            kept: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        })
    }

    /// The bytes it may hold: `room`, capped by its own maximum. Evicts at once when it
    /// holds more.
    pub(crate) fn set_room(&self, room: u64) {
        self.room.store(room.min(self.max_bytes), Relaxed);
        if self.state.lock().used() > self.room() {
            self.upkeep(false);
        }
    }

    fn room(&self) -> u64 {
        self.room.load(Relaxed)
    }

    /// The newest version of `key` in slow-tier table `table`, if cached and not newer
    /// than `read_seq`: `(internal key, stored value)`, as the table's block search would
    /// return them. `hash` is [`crate::cache::key_hash`] of the key.
    pub(crate) fn get(
        &self,
        key: &[u8],
        hash: u64,
        table: u64,
        read_seq: SeqNo,
    ) -> Option<(Bytes, Bytes)> {
        let (data, slot) = {
            let mut st = self.state.lock();
            let open_id = st.open_id;
            let slot = st.index.get_mut(&hash).filter(|s| s.table == table)?;
            slot.referenced = true;
            let slot = *slot;
            // A read the cache answers is a read of the slow tier's record all the same:
            // its key keeps its count against the candidates that would displace it.
            st.sketch.increment(hash);
            if slot.segment == open_id {
                let at = slot.offset as usize;
                let record = st.open.get(at..at + slot.len as usize)?.to_vec();
                return self.decode(record, key, table, read_seq);
            }
            let i = st.sealed_index(slot.segment)?;
            (st.sealed[i].data.clone(), slot)
        };
        let record = match data {
            Data::Memory(bytes) => {
                let at = slot.offset as usize;
                bytes.get(at..at + slot.len as usize)?.to_vec()
            }
            Data::File(file) => {
                match file.read_at(slot.offset as u64, slot.len as usize, IoCause::UserGet) {
                    Ok(record) => record,
                    Err(e) => {
                        tracing::warn!("record cache read failed, reading the slow tier: {e}");
                        self.errors.fetch_add(1, Relaxed);
                        return None;
                    }
                }
            }
        };
        self.decode(record, key, table, read_seq)
    }

    /// Checks a record read back and splits it; `None` when it is not the key's in this
    /// table (a hash shared with another key), is newer than the read, or is damaged.
    fn decode(
        &self,
        record: Vec<u8>,
        key: &[u8],
        table: u64,
        read_seq: SeqNo,
    ) -> Option<(Bytes, Bytes)> {
        let Some(klen) = decode_record(&record, table) else {
            self.errors.fetch_add(1, Relaxed);
            return None;
        };
        let record = Bytes::from(record);
        let ikey = record.slice(HEADER..HEADER + klen);
        let parsed = parse_internal_key(&ikey)?;
        if parsed.user_key != key || parsed.seq > read_seq {
            return None;
        }
        self.hits.fetch_add(1, Relaxed);
        let value = record.slice(HEADER + klen..record.len() - TRAILER);
        Some((ikey, value))
    }

    /// Offers the newest version of its key in slow-tier table `table`, just read from
    /// that table by a read of the latest state. While the cache has room (more than a
    /// segment's) it is admitted; once full, only when its key was read from the slow
    /// tier more often lately (the sketch's estimates) than the entry it would displace
    /// (TinyLFU's rule, against the oldest segment's next unread entry). A key already
    /// cached for the table is not.
    pub(crate) fn offer(&self, hash: u64, table: u64, ikey: &[u8], value: &[u8]) {
        let len = HEADER + ikey.len() + value.len() + TRAILER;
        self.offered.fetch_add(1, Relaxed);
        let room = self.room();
        // A segment must fit a few records, and the room a few segments.
        if len > self.segment_size / 4 || room < 4 * self.segment_size as u64 {
            return;
        }
        let full = {
            let mut st = self.state.lock();
            let count = st.sketch.increment(hash);
            if st.index.get(&hash).is_some_and(|s| s.table == table) {
                return;
            }
            // Within a segment of its room the cache counts as full: each eviction
            // frees a whole segment, which would otherwise admit the next segment's
            // worth of records unweighed.
            if st.used() + (self.segment_size + len) as u64 > room {
                if let Some(victim) = st.next_victim() {
                    if st.sketch.estimate(victim) >= count {
                        return;
                    }
                    st.victim_at += 1;
                }
            }
            st.append(hash, table, |out| encode_record(out, table, ikey, value));
            self.admitted.fetch_add(1, Relaxed);
            if st.open.len() >= self.segment_size {
                st.seal();
                true
            } else {
                false
            }
        };
        if full {
            self.upkeep(true);
        }
    }

    /// Writes the sealed segments still in memory to their files, then evicts the oldest
    /// segments while the cache holds more than its room, with a second chance for their
    /// read entries unless the room shrank (`second_chance` false). One thread at a time;
    /// another that finds it busy leaves the work to it.
    fn upkeep(&self, second_chance: bool) {
        let Some(_turn) = self.upkeep.try_lock() else {
            return;
        };
        loop {
            let unwritten = {
                let st = self.state.lock();
                st.sealed.iter().find_map(|s| match &s.data {
                    Data::Memory(bytes) => Some((s.id, bytes.clone())),
                    Data::File(_) => None,
                })
            };
            if let Some((id, bytes)) = unwritten {
                let written = self.write_segment(id, &bytes);
                let mut st = self.state.lock();
                match (written, st.sealed_index(id)) {
                    (Some(file), Some(i)) => st.sealed[i].data = Data::File(Arc::new(file)),
                    // Evicted meanwhile: its file is not needed.
                    (Some(_), None) => self.remove_segment_file(id),
                    // Not written: it stays readable from memory until evicted, and the
                    // room it may take shrinks to what the others hold.
                    (None, Some(i)) => {
                        let len = st.sealed[i].len;
                        drop(st);
                        let room = self.room().saturating_sub(len);
                        self.room.store(room, Relaxed);
                        self.evict_oldest(false);
                        continue;
                    }
                    (None, None) => {}
                }
                continue;
            }
            let over = {
                let st = self.state.lock();
                st.used() > self.room() && !st.sealed.is_empty()
            };
            if !over {
                return;
            }
            self.evict_oldest(second_chance);
        }
    }

    /// Writes segment `id`'s bytes to its file and opens it for reading.
    fn write_segment(&self, id: u32, bytes: &[u8]) -> Option<RandomAccessFile> {
        let name = segment_file_name(id);
        let written = (|| {
            let mut f = self
                .env
                .create_writable(Tier::Fast, &name, IoCause::Promotion)?;
            f.append(bytes)?;
            f.flush()?;
            drop(f);
            self.env.open_random(Tier::Fast, &name)
        })();
        match written {
            Ok(file) => {
                self.written_bytes.fetch_add(bytes.len() as u64, Relaxed);
                Some(file)
            }
            Err(e) => {
                tracing::warn!("record cache segment {name} not written: {e}");
                self.errors.fetch_add(1, Relaxed);
                self.remove_segment_file(id);
                None
            }
        }
    }

    fn remove_segment_file(&self, id: u32) {
        let name = segment_file_name(id);
        if self.env.exists(Tier::Fast, &name) {
            if let Err(e) = self.env.remove(Tier::Fast, &name) {
                tracing::warn!("record cache segment {name} not removed: {e}");
            }
        }
    }

    /// Drops the oldest segment. With `second_chance`, its entries read since they were
    /// written are first copied into the open segment, up to half a segment's bytes.
    fn evict_oldest(&self, second_chance: bool) {
        let (segment, referenced) = {
            let mut st = self.state.lock();
            let Some(segment) = st.sealed.pop_front() else {
                return;
            };
            st.sealed_bytes -= segment.len;
            st.victim_at = 0;
            let referenced = second_chance
                && segment.keys.iter().any(|h| {
                    st.index
                        .get(h)
                        .is_some_and(|s| s.segment == segment.id && s.referenced)
                });
            (segment, referenced)
        };
        // Read outside the lock: readers go on meanwhile (an entry they find in this
        // segment now is a miss, as after its eviction).
        let bytes = match (&segment.data, referenced) {
            (_, false) => None,
            (Data::Memory(b), true) => Some(b.clone()),
            (Data::File(f), true) => match f.read_at(0, segment.len as usize, IoCause::Promotion) {
                Ok(b) => Some(Arc::new(b)),
                Err(e) => {
                    tracing::warn!("record cache segment read failed: {e}");
                    self.errors.fetch_add(1, Relaxed);
                    None
                }
            },
        };
        let mut kept_bytes = 0;
        let (mut kept, mut evicted) = (0, 0);
        {
            let mut st = self.state.lock();
            for &hash in &segment.keys {
                let Some(slot) = st.index.get(&hash).copied() else {
                    continue;
                };
                if slot.segment != segment.id {
                    continue;
                }
                let at = slot.offset as usize;
                let record = bytes
                    .as_ref()
                    .filter(|_| slot.referenced && kept_bytes < self.segment_size / 2)
                    .and_then(|b| b.get(at..at + slot.len as usize));
                match record {
                    Some(record) => {
                        kept_bytes += record.len();
                        kept += 1;
                        st.append(hash, slot.table, |out| out.extend_from_slice(record));
                    }
                    None => {
                        evicted += 1;
                        st.index.remove(&hash);
                    }
                }
            }
            if st.open.len() >= self.segment_size {
                st.seal();
            }
        }
        self.kept.fetch_add(kept, Relaxed);
        self.evicted.fetch_add(evicted, Relaxed);
        if matches!(segment.data, Data::File(_)) {
            self.remove_segment_file(segment.id);
        }
    }

    /// What it holds and did.
    pub fn stats(&self) -> RecordCacheStats {
        let st = self.state.lock();
        RecordCacheStats {
            bytes: st.used(),
            room: self.room(),
            entries: st.index.len() as u64,
            memory_bytes: st.index.capacity() as u64 * INDEX_BYTES_PER_ENTRY
                + st.sketch.memory_usage() as u64,
            hits: self.hits.load(Relaxed),
            offered: self.offered.load(Relaxed),
            admitted: self.admitted.load(Relaxed),
            written_bytes: self.written_bytes.load(Relaxed),
            evicted: self.evicted.load(Relaxed),
            kept: self.kept.load(Relaxed),
            errors: self.errors.load(Relaxed),
        }
    }
}

/// A record in a segment (docs/FORMAT.md, "Record cache segments"): the table number
/// (u64), the internal key's and the stored value's lengths (u32 each), both, then a
/// CRC-32C of everything before it; integers little-endian. Appended to `out`.
fn encode_record(out: &mut Vec<u8>, table: u64, ikey: &[u8], value: &[u8]) {
    let start = out.len();
    out.extend_from_slice(&table.to_le_bytes());
    out.extend_from_slice(&(ikey.len() as u32).to_le_bytes());
    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    out.extend_from_slice(ikey);
    out.extend_from_slice(value);
    let crc = crc32c::crc32c(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// The internal key's length in an encoded record of `table` (the key follows the
/// header, the value the key, up to the trailer); `None` when it is damaged or of
/// another table.
fn decode_record(r: &[u8], table: u64) -> Option<usize> {
    let body = r.get(..r.len().checked_sub(TRAILER)?)?;
    let crc = u32::from_le_bytes(r.get(body.len()..)?.try_into().ok()?);
    if crc32c::crc32c(body) != crc {
        return None;
    }
    let number = u64::from_le_bytes(body.get(..8)?.try_into().ok()?);
    let klen = u32::from_le_bytes(body.get(8..12)?.try_into().ok()?) as usize;
    let vlen = u32::from_le_bytes(body.get(12..16)?.try_into().ok()?) as usize;
    (number == table && HEADER + klen + vlen == body.len()).then_some(klen)
}

#[cfg(test)]
mod tests;

//! The memtable: recent writes in a lock-free skiplist ordered by internal key, readable
//! while written. It owns the in-memory ordering and size accounting only; when it is
//! frozen, flushed and dropped is decided by the write path (`db::write`, `db::background`).

use crate::iter::InternalIterator;
use crate::key::{
    compare_internal, parse_internal_key, SeqNo, ShortBytes, ValueKind, KIND_FOR_SEEK, TRAILER_LEN,
};
use crate::mem_filter::MemFilter;
use crate::sst::filter::filter_hash;
use crate::Result;
use bytes::Bytes;
use crossbeam_skiplist::SkipMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Per-entry bookkeeping charged on top of key and value bytes (skiplist node and tower,
/// the key's and the value's heap blocks and their allocator headers), so
/// `approximate_size` tracks real memory rather than payload only: measured at 245 bytes
/// of resident memory per entry of an 8-byte key and a 100-byte value (116 bytes of key,
/// sequence and value).
/// (Measured while keys had their own heap block; a short key is now inline in the node,
/// so the charge errs high by that block (16 bytes for an 8-byte key), which only makes a
/// memtable switch a little early.)
const ENTRY_OVERHEAD: usize = 128;

/// An internal key as the memtable stores it: inline in the skiplist node when short
/// (encoded up to [`ShortBytes::INLINE`] bytes: user keys up to 22 bytes), on the heap
/// otherwise. Inline, an insert makes one allocation fewer, a lookup builds its seek key
/// on the stack, and each comparison of a skiplist search reads the key from the node it
/// already loaded instead of following a pointer to a separate heap block (the search's
/// comparisons were its cost, mostly cache misses on those blocks). Its order is
/// [`compare_internal`], as the on-disk tables'.
#[derive(Clone, Debug)]
struct MemKey(ShortBytes);

impl MemKey {
    /// The encoded internal key `user_key` + `trailer` (already packed).
    fn with_trailer(user_key: &[u8], trailer: u64) -> Self {
        MemKey(ShortBytes::concat(user_key, &trailer.to_le_bytes()))
    }

    /// An already encoded internal key (a seek target).
    fn from_encoded(ikey: &[u8]) -> Self {
        MemKey(ShortBytes::new(ikey))
    }

    /// The key to seek to for the newest version of `user_key` at or below `seq` (as
    /// [`crate::key::seek_key`]).
    fn seek(user_key: &[u8], seq: SeqNo) -> Self {
        Self::with_trailer(user_key, (seq << 8) | KIND_FOR_SEEK as u64)
    }

    #[inline]
    fn encoded(&self) -> &[u8] {
        self.0.as_slice()
    }
}

impl PartialEq for MemKey {
    fn eq(&self, other: &Self) -> bool {
        self.encoded() == other.encoded()
    }
}

impl Eq for MemKey {}

impl Ord for MemKey {
    #[inline]
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        compare_internal(self.encoded(), other.encoded())
    }
}

impl PartialOrd for MemKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// What a memtable knows about a key at a snapshot.
#[derive(Debug, PartialEq, Eq)]
pub enum MemGet {
    /// The newest visible version is a value: a copy of the value (a reader returns a
    /// copy anyway; cloning the shared buffer would cost an atomic reference count on a
    /// hot record's buffer, shared by every reading thread), and its deadline if it
    /// expires (whether it has expired is the reader's decision: it knows the time).
    Found(Vec<u8>, Option<u64>),
    /// The newest visible version is a deletion.
    Deleted,
    /// No visible version here: look in older data.
    NotFound,
}

/// A sorted, concurrent, in-memory write buffer.
pub struct MemTable {
    id: u64,
    map: SkipMap<MemKey, Bytes>,
    /// Every user key added, so that a lookup of a key never written here (most point
    /// reads, in every memtable they search) skips the skiplist.
    filter: MemFilter,
    size: AtomicUsize,
    /// Bytes of WAL records written for this memtable (its WAL files' bytes), which stay
    /// on the fast disk until it is flushed.
    wal_bytes: AtomicU64,
    smallest_seq: AtomicU64,
    largest_seq: AtomicU64,
}

impl MemTable {
    /// An empty memtable; `id` is the number of the WAL that backs it, `capacity` the size
    /// ([`MemTable::approximate_size`]) at which it is expected to be switched (its filter
    /// is sized for the most entries that fit; a fuller memtable only filters less well).
    pub fn new(id: u64, capacity: usize) -> Self {
        MemTable {
            id,
            map: SkipMap::new(),
            filter: MemFilter::with_capacity(capacity / Self::entry_charge(0, 0)),
            size: AtomicUsize::new(0),
            wal_bytes: AtomicU64::new(0),
            smallest_seq: AtomicU64::new(u64::MAX),
            largest_seq: AtomicU64::new(0),
        }
    }

    /// The number of the WAL whose records this memtable holds.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Bytes an entry of these sizes adds to [`MemTable::approximate_size`].
    pub fn entry_charge(key_len: usize, value_len: usize) -> usize {
        key_len + 8 + value_len + ENTRY_OVERHEAD
    }

    /// What a whole batch adds to [`MemTable::approximate_size`].
    pub fn batch_charge(batch: &crate::batch::WriteBatch) -> usize {
        batch
            .iter()
            .map(|e| Self::entry_charge(e.key.len(), e.stored_value().len()))
            .sum()
    }

    /// Inserts one version. Sequence numbers are unique, so entries never collide. `value`
    /// is the stored value (an expiring one carries its deadline prefix).
    pub fn add(&self, seq: SeqNo, kind: ValueKind, key: &[u8], value: &[u8]) {
        let ikey = MemKey::with_trailer(key, crate::key::pack_trailer(seq, kind));
        let charge = key.len() + TRAILER_LEN + value.len() + ENTRY_OVERHEAD;
        // Before the insert: a reader that may see the entry must find its bits set.
        self.filter.insert(filter_hash(key));
        self.map.insert(ikey, Bytes::copy_from_slice(value));
        self.size.fetch_add(charge, Ordering::Relaxed);
        self.smallest_seq.fetch_min(seq, Ordering::Relaxed);
        self.largest_seq.fetch_max(seq, Ordering::Relaxed);
    }

    /// The newest version of `key` with sequence number `<= snapshot`. An expiring value
    /// too short to hold its deadline (never written by this crate) reads as a deletion.
    #[cfg(test)]
    pub fn get(&self, key: &[u8], snapshot: SeqNo) -> MemGet {
        self.get_hashed(key, filter_hash(key), snapshot)
    }

    /// [`MemTable::get`] for a key whose [`filter_hash`] the caller computed (once for all
    /// the memtables it searches).
    pub fn get_hashed(&self, key: &[u8], hash: u64, snapshot: SeqNo) -> MemGet {
        if !self.filter.may_contain(hash) {
            return MemGet::NotFound;
        }
        let target = MemKey::seek(key, snapshot);
        let Some(entry) = self.map.lower_bound(Bound::Included(&target)) else {
            return MemGet::NotFound;
        };
        match parse_internal_key(entry.key().encoded()) {
            Some(p) if p.user_key == key => match p.kind {
                ValueKind::Value => MemGet::Found(entry.value().to_vec(), None),
                ValueKind::Expiring => {
                    let stored = entry.value();
                    match crate::expiry::split_stored(p.kind, stored) {
                        Some((_, deadline)) => {
                            MemGet::Found(stored[crate::expiry::DEADLINE_LEN..].to_vec(), deadline)
                        }
                        None => MemGet::Deleted,
                    }
                }
                ValueKind::Delete => MemGet::Deleted,
            },
            _ => MemGet::NotFound,
        }
    }

    /// Sequence number of the newest version of `key` held, if any.
    pub fn latest_seq(&self, key: &[u8]) -> Option<SeqNo> {
        if !self.filter.may_contain(filter_hash(key)) {
            return None;
        }
        let target = MemKey::seek(key, crate::key::MAX_SEQ);
        let entry = self.map.lower_bound(Bound::Included(&target))?;
        parse_internal_key(entry.key().encoded())
            .filter(|p| p.user_key == key)
            .map(|p| p.seq)
    }

    /// True when any version of `key` is here.
    pub fn contains_user_key(&self, key: &[u8]) -> bool {
        self.latest_seq(key).is_some()
    }

    /// Bytes of memory used, approximately (entries and the filter).
    pub fn approximate_size(&self) -> usize {
        self.size.load(Ordering::Relaxed) + self.filter.memory()
    }

    /// Counts `n` more bytes of WAL written for this memtable's records.
    pub fn add_wal_bytes(&self, n: u64) {
        self.wal_bytes.fetch_add(n, Ordering::Relaxed);
    }

    /// Bytes of WAL that back this memtable: what it keeps on the fast disk until it is
    /// flushed (the compaction picker counts them against the fast-disk budget).
    pub fn wal_bytes(&self) -> u64 {
        self.wal_bytes.load(Ordering::Relaxed)
    }

    /// Number of versions held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when nothing was written.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Smallest sequence number held (`u64::MAX` when empty).
    pub fn smallest_seq(&self) -> SeqNo {
        self.smallest_seq.load(Ordering::Relaxed)
    }

    /// Largest sequence number held (0 when empty).
    #[cfg(test)]
    pub fn largest_seq(&self) -> SeqNo {
        self.largest_seq.load(Ordering::Relaxed)
    }

    /// Calls `f` with every version's encoded internal key and value, in internal-key
    /// order, stopping at the first error. Each step follows one link (a
    /// [`MemTableIterator`] re-searches the skiplist per step): for the full scans of a
    /// flush.
    pub fn for_each_entry(&self, mut f: impl FnMut(&[u8], &[u8]) -> Result<()>) -> Result<()> {
        for e in self.map.iter() {
            f(e.key().encoded(), e.value())?;
        }
        Ok(())
    }

    /// A cursor over every version, in internal-key order. It sees entries added after
    /// its creation too; readers filter by sequence number.
    pub fn iter(self: &Arc<Self>) -> MemTableIterator {
        MemTableIterator {
            mem: self.clone(),
            current: None,
        }
    }
}

/// Cursor over a memtable. Holds the current entry by value (a key copy, a `Bytes` clone) and
/// re-seeks the skiplist to step, so it needs no borrow of the map.
pub struct MemTableIterator {
    mem: Arc<MemTable>,
    current: Option<(MemKey, Bytes)>,
}

impl MemTableIterator {
    fn set(&mut self, entry: Option<crossbeam_skiplist::map::Entry<'_, MemKey, Bytes>>) {
        self.current = entry.map(|e| (e.key().clone(), e.value().clone()));
    }
}

impl InternalIterator for MemTableIterator {
    fn valid(&self) -> bool {
        self.current.is_some()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        let mem = self.mem.clone();
        self.set(mem.map.front());
        Ok(())
    }
    fn seek_to_last(&mut self) -> Result<()> {
        let mem = self.mem.clone();
        self.set(mem.map.back());
        Ok(())
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let mem = self.mem.clone();
        let t = MemKey::from_encoded(target);
        self.set(mem.map.lower_bound(Bound::Included(&t)));
        Ok(())
    }
    fn next(&mut self) -> Result<()> {
        let mem = self.mem.clone();
        if let Some((k, _)) = self.current.take() {
            self.set(mem.map.lower_bound(Bound::Excluded(&k)));
        }
        Ok(())
    }
    fn prev(&mut self) -> Result<()> {
        let mem = self.mem.clone();
        if let Some((k, _)) = self.current.take() {
            self.set(mem.map.upper_bound(Bound::Excluded(&k)));
        }
        Ok(())
    }
    fn key(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |(k, _)| k.encoded())
    }
    fn value(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::compare_internal;
    use crate::key::{seek_key, InternalKey};

    /// Invariant: the filter never hides a key the memtable holds, also in a memtable
    /// filled far past the capacity its filter was sized for.
    #[test]
    fn overfilled_memtable_still_finds_every_key() {
        let m = MemTable::new(1, 4096);
        for i in 0..5_000u32 {
            m.add(u64::from(i) + 1, ValueKind::Value, &i.to_be_bytes(), b"v");
        }
        for i in 0..5_000u32 {
            let k = i.to_be_bytes();
            assert_eq!(m.get(&k, u64::MAX >> 8), MemGet::Found(b"v".to_vec(), None));
            assert!(m.contains_user_key(&k));
        }
        assert!(!m.contains_user_key(b"absent key"));
    }

    #[test]
    fn get_sees_newest_version_at_or_below_snapshot() {
        let m = MemTable::new(1, 1 << 20);
        m.add(1, ValueKind::Value, b"k", b"v1");
        m.add(3, ValueKind::Delete, b"k", b"");
        m.add(5, ValueKind::Value, b"k", b"v5");
        m.add(2, ValueKind::Value, b"j", b"j2");
        assert_eq!(m.get(b"k", 0), MemGet::NotFound);
        assert_eq!(m.get(b"k", 1), MemGet::Found(b"v1".to_vec(), None));
        assert_eq!(m.get(b"k", 4), MemGet::Deleted);
        assert_eq!(m.get(b"k", 9), MemGet::Found(b"v5".to_vec(), None));
        assert_eq!(m.get(b"ka", 9), MemGet::NotFound);
        assert_eq!(m.get(b"", 9), MemGet::NotFound);
        assert!(m.contains_user_key(b"j"));
        assert_eq!((m.smallest_seq(), m.largest_seq(), m.len()), (1, 5, 4));
        assert!(m.approximate_size() >= 4 * ENTRY_OVERHEAD);
        // An expiring value comes back without its deadline prefix, with the deadline.
        m.add(
            7,
            ValueKind::Expiring,
            b"k",
            &crate::expiry::encode_expiring(42, b"v7"),
        );
        assert_eq!(m.get(b"k", 9), MemGet::Found(b"v7".to_vec(), Some(42)));
    }

    #[test]
    fn iterator_walks_both_ways_in_internal_order() {
        let m = Arc::new(MemTable::new(1, 1 << 20));
        let mut expected = Vec::new();
        for i in 0..50u64 {
            let k = format!("key{:03}", i % 17);
            m.add(i + 1, ValueKind::Value, k.as_bytes(), &i.to_le_bytes());
            expected.push(InternalKey::new(k.as_bytes(), i + 1, ValueKind::Value));
        }
        expected.sort();
        let mut it = m.iter();
        it.seek_to_first().unwrap();
        let mut fwd = Vec::new();
        while it.valid() {
            fwd.push(it.key().to_vec());
            it.next().unwrap();
        }
        let exp: Vec<Vec<u8>> = expected.iter().map(|k| k.encoded().to_vec()).collect();
        assert_eq!(fwd, exp);
        it.seek_to_last().unwrap();
        let mut back = Vec::new();
        while it.valid() {
            back.push(it.key().to_vec());
            it.prev().unwrap();
        }
        back.reverse();
        assert_eq!(back, exp);
        it.seek(&seek_key(b"key005", MAX)).unwrap();
        assert_eq!(crate::key::user_key(it.key()), b"key005");
        assert!(compare_internal(it.key(), &exp[0]).is_gt());
    }

    /// Keys held inline (encoded up to `INLINE_KEY` bytes) and on the heap sort and read
    /// back alike: the memtable's order is `compare_internal` over every key length, and
    /// a get finds each length's newest visible version.
    #[test]
    fn inline_and_heap_keys_share_one_order() {
        let m = Arc::new(MemTable::new(1, 1 << 20));
        let mut expected = Vec::new();
        let mut seq = 0;
        // Lengths around the inline limit (22-byte user keys are the longest inline).
        assert_eq!(ShortBytes::INLINE, 30);
        for len in [0usize, 1, 7, 8, 9, 21, 22, 23, 24, 40] {
            for fill in [b'a', b'b'] {
                let k = vec![fill; len];
                for _ in 0..2 {
                    seq += 1;
                    m.add(seq, ValueKind::Value, &k, &seq.to_le_bytes());
                    expected.push(crate::key::make_internal_key(&k, seq, ValueKind::Value));
                }
                assert_eq!(
                    m.get(&k, seq),
                    MemGet::Found(seq.to_le_bytes().to_vec(), None),
                    "newest version of a {len}-byte key"
                );
                assert_eq!(
                    m.get(&k, seq - 1),
                    MemGet::Found((seq - 1).to_le_bytes().to_vec(), None),
                    "older version of a {len}-byte key"
                );
                assert_eq!(m.latest_seq(&k), Some(seq));
            }
        }
        expected.sort_by(|a, b| compare_internal(a, b));
        let mut it = m.iter();
        it.seek_to_first().unwrap();
        let mut got = Vec::new();
        while it.valid() {
            got.push(it.key().to_vec());
            it.next().unwrap();
        }
        assert_eq!(got, expected);
        // A long seek target (heap form) lands on its key.
        let long = vec![b'b'; 40];
        it.seek(&seek_key(&long, MAX)).unwrap();
        assert_eq!(crate::key::user_key(it.key()), &long[..]);
    }

    const MAX: SeqNo = crate::key::MAX_SEQ;
}

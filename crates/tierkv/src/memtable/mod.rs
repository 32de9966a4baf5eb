//! The memtable: recent writes in a skiplist ordered by internal key, readable while
//! written. It owns the in-memory ordering and size accounting only; when it is frozen,
//! flushed and dropped is decided by the write path (`db::write`, `db::background`).
//! The skiplist itself (one node per user key, its versions chained newest first), its
//! arena and its lock-free reads are `skiplist`'s; the hash index over its keys is
//! `index`'s.

mod index;
#[allow(unsafe_code)]
mod skiplist;

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{SeqNo, ValueKind, KIND_FOR_SEEK};
use crate::sst::filter::filter_hash;
use skiplist::{node_size, version_size, Position, SkipList, INDEX_BYTES_PER_KEY, MAX_HEIGHT};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The trailer of the newest version at or below `seq` (as [`crate::key::seek_key`]'s).
fn seek_trailer(seq: SeqNo) -> u64 {
    (seq << 8) | KIND_FOR_SEEK as u64
}

/// `buf` set to the internal key of `user_key` and `trailer`.
fn fill_internal<'b>(buf: &'b mut Vec<u8>, user_key: &[u8], trailer: u64) -> &'b [u8] {
    buf.clear();
    buf.extend_from_slice(user_key);
    buf.extend_from_slice(&trailer.to_le_bytes());
    buf
}

/// Entries of a batch whose index slots and nodes [`MemTable::add_batch`] loads together
/// before inserting them: enough misses in flight to hide most of memory's latency, few
/// enough that the first group's lines are still cached when its inserts run.
const PREFETCH_GROUP: usize = 16;

fn kind_of(trailer: u64) -> Option<ValueKind> {
    ValueKind::from_u8(trailer as u8)
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
    list: SkipList,
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
            list: SkipList::new(capacity),
            wal_bytes: AtomicU64::new(0),
            smallest_seq: AtomicU64::new(u64::MAX),
            largest_seq: AtomicU64::new(0),
        }
    }

    /// The number of the WAL whose records this memtable holds.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The most bytes an entry of these sizes adds to [`MemTable::approximate_size`]: a
    /// new key's node with the tallest tower, its version and its share of the hash index
    /// (most nodes take one link: the first version of an 8-byte key and a 100-byte value
    /// takes 160 bytes and 10-20 of index, a rewrite 128).
    pub fn entry_charge(key_len: usize, value_len: usize) -> usize {
        node_size(key_len, MAX_HEIGHT) + version_size(value_len) + INDEX_BYTES_PER_KEY
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
        let trailer = crate::key::pack_trailer(seq, kind);
        self.list.insert(key, filter_hash(key), trailer, value);
        self.smallest_seq.fetch_min(seq, Ordering::Relaxed);
        self.largest_seq.fetch_max(seq, Ordering::Relaxed);
    }

    /// Inserts `batch`'s entries with sequence numbers from `first_seq` on, as
    /// [`MemTable::add`] one after another would. Each group of [`PREFETCH_GROUP`] entries
    /// first has its index slots and then the nodes they name loaded together, so that
    /// their cache misses (two per rewritten key in a memtable larger than the cache)
    /// overlap instead of following one another.
    pub fn add_batch(&self, first_seq: SeqNo, batch: &crate::batch::WriteBatch) {
        // Two walks of the batch's encoding, one a group ahead of the other, instead of a
        // copy of each group's entries.
        let (mut ahead, mut entries) = (batch.iter(), batch.iter());
        let mut seq = first_seq;
        let mut hashes = [0u64; PREFETCH_GROUP];
        loop {
            let n = hashes
                .iter_mut()
                .zip(ahead.by_ref())
                .map(|(hash, e)| *hash = filter_hash(e.key))
                .count();
            if n == 0 {
                break;
            }
            if n > 1 {
                self.list.prefetch(&hashes[..n]);
            }
            // The hashes first: `zip` then stops without taking an entry past the group.
            for (&hash, e) in hashes[..n].iter().zip(entries.by_ref()) {
                let trailer = crate::key::pack_trailer(seq, e.kind);
                self.list.insert(e.key, hash, trailer, e.stored_value());
                seq += 1;
            }
        }
        if seq > first_seq {
            self.smallest_seq.fetch_min(first_seq, Ordering::Relaxed);
            self.largest_seq.fetch_max(seq - 1, Ordering::Relaxed);
        }
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
        let Some((trailer, stored)) = self.list.get(key, hash, seek_trailer(snapshot)) else {
            return MemGet::NotFound;
        };
        match kind_of(trailer) {
            Some(ValueKind::Value) => MemGet::Found(stored.to_vec(), None),
            Some(ValueKind::Expiring) => {
                match crate::expiry::split_stored(ValueKind::Expiring, stored) {
                    Some((_, deadline)) => {
                        MemGet::Found(stored[crate::expiry::DEADLINE_LEN..].to_vec(), deadline)
                    }
                    None => MemGet::Deleted,
                }
            }
            Some(ValueKind::Delete) => MemGet::Deleted,
            // Never written by this crate.
            None => MemGet::NotFound,
        }
    }

    /// Sequence number of the newest version of `key` held, if any.
    pub fn latest_seq(&self, key: &[u8]) -> Option<SeqNo> {
        let max = seek_trailer(crate::key::MAX_SEQ);
        let (trailer, _) = self.list.get(key, filter_hash(key), max)?;
        Some(trailer >> 8)
    }

    /// True when any version of `key` is here.
    pub fn contains_user_key(&self, key: &[u8]) -> bool {
        self.latest_seq(key).is_some()
    }

    /// Bytes of memory used, approximately (keys, versions and the hash index).
    pub fn approximate_size(&self) -> usize {
        self.list.memory()
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
        self.list.len()
    }

    /// True when nothing was written.
    pub fn is_empty(&self) -> bool {
        self.list.len() == 0
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
    /// order, stopping at the first error: for the full scans of a flush. The values live
    /// as long as the memtable (entries are never moved or freed before it is); the key
    /// is assembled for the call.
    pub fn for_each_entry<'a>(
        &'a self,
        mut f: impl FnMut(&[u8], &'a [u8]) -> Result<()>,
    ) -> Result<()> {
        let mut ikey = Vec::new();
        for (key, trailer, value) in self.list.iter() {
            f(fill_internal(&mut ikey, key, trailer), value)?;
        }
        Ok(())
    }

    /// Calls `f` with each key's newest version: its user key, kind and value, in key
    /// order (a version of a kind this crate does not write is passed over).
    pub fn for_each_newest<'a>(&'a self, mut f: impl FnMut(&'a [u8], ValueKind, &'a [u8])) {
        for (key, trailer, value) in self.list.newest_versions() {
            if let Some(kind) = kind_of(trailer) {
                f(key, kind, value);
            }
        }
    }

    /// A cursor over every version, in internal-key order. It sees entries added after
    /// its creation too; readers filter by sequence number.
    pub fn iter(self: &Arc<Self>) -> MemTableIterator {
        MemTableIterator {
            mem: self.clone(),
            current: None,
            before: None,
            key: Vec::new(),
        }
    }
}

/// Cursor over a memtable: the memtable it holds keeps its entries alive, so the cursor
/// steps forward by one link; after a seek it searches; backward it walks the current
/// key's chain once and keeps what it found.
pub struct MemTableIterator {
    mem: Arc<MemTable>,
    current: Option<Position>,
    /// The versions before `current`, the nearest last, when a backward step found them.
    before: Option<Vec<Position>>,
    /// The current version's internal key.
    key: Vec<u8>,
}

impl MemTableIterator {
    /// Moves to `pos` (forgetting the versions before the old position, unless the move
    /// came from them).
    fn set(&mut self, pos: Option<Position>, before: Option<Vec<Position>>) {
        self.current = pos;
        self.before = before;
        match pos {
            Some(p) => {
                let (key, trailer, _) = self.mem.list.entry(p);
                fill_internal(&mut self.key, key, trailer);
            }
            None => self.key.clear(),
        }
    }
}

impl InternalIterator for MemTableIterator {
    fn valid(&self) -> bool {
        self.current.is_some()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.set(self.mem.list.first(), None);
        Ok(())
    }
    fn seek_to_last(&mut self) -> Result<()> {
        self.set(self.mem.list.last(), None);
        Ok(())
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let (key, trailer) = (crate::key::user_key(target), crate::key::trailer(target));
        self.set(self.mem.list.seek(key, trailer), None);
        Ok(())
    }
    fn next(&mut self) -> Result<()> {
        let next = self.current.and_then(|p| self.mem.list.next(p));
        self.set(next, None);
        Ok(())
    }
    fn prev(&mut self) -> Result<()> {
        let Some(p) = self.current else {
            return Ok(());
        };
        // An empty list of versions before means `p` is its key's newest: the versions
        // before it are the previous key's.
        let mut before = match self.before.take() {
            Some(before) if !before.is_empty() => before,
            _ => self.mem.list.before(p),
        };
        let pos = before.pop();
        self.set(pos, Some(before));
        Ok(())
    }
    fn key(&self) -> &[u8] {
        &self.key
    }
    fn value(&self) -> &[u8] {
        self.current.map_or(&[], |p| self.mem.list.entry(p).2)
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

    /// Every entry a memtable holds, in iteration order, with its value.
    fn entries(m: &Arc<MemTable>) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut it = m.iter();
        it.seek_to_first().unwrap();
        let mut all = Vec::new();
        while it.valid() {
            all.push((it.key().to_vec(), it.value().to_vec()));
            it.next().unwrap();
        }
        all
    }

    /// Invariant 1 (newest version wins): `add_batch` numbers and inserts a batch's entries
    /// as `add` one after another does, also when a key repeats within a prefetch group,
    /// across groups and after a delete, and when the batch crosses groups unevenly.
    #[test]
    fn a_batch_is_added_as_its_entries_one_by_one() {
        let mut batch = crate::batch::WriteBatch::new();
        for i in 0..(3 * PREFETCH_GROUP as u64 + 5) {
            let key = format!("k{}", i % 11);
            match i % 7 {
                3 => {
                    batch.delete(key.as_bytes());
                }
                5 => {
                    batch.put_expiring(key.as_bytes(), i.to_le_bytes(), 1_000 + i);
                }
                _ => {
                    batch.put(key.as_bytes(), i.to_le_bytes());
                }
            }
        }
        let (by_batch, one_by_one) = (
            Arc::new(MemTable::new(1, 1 << 20)),
            Arc::new(MemTable::new(2, 1 << 20)),
        );
        // A key the memtable already holds: the prefetch finds its node.
        for m in [&by_batch, &one_by_one] {
            m.add(1, ValueKind::Value, b"k3", b"old");
        }
        by_batch.add_batch(10, &batch);
        for (seq, e) in (10..).zip(batch.iter()) {
            one_by_one.add(seq, e.kind, e.key, e.stored_value());
        }
        assert_eq!(entries(&by_batch), entries(&one_by_one));
        for i in 0..11 {
            let key = format!("k{i}");
            for at in [9, 20, 40, u64::MAX >> 8] {
                assert_eq!(
                    by_batch.get(key.as_bytes(), at),
                    one_by_one.get(key.as_bytes(), at)
                );
            }
        }
        assert_eq!(by_batch.len(), batch.len() + 1);
        assert_eq!(by_batch.smallest_seq(), 1);
        assert_eq!(by_batch.largest_seq(), 10 + batch.len() as u64 - 1);
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
        assert!(m.approximate_size() >= 2 * node_size(1, 1) + 4 * version_size(2));
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
        // Lengths around `compare_user_keys`'s 8-byte prefix and `ShortBytes`'s inline
        // limit (22 bytes), which the memtable's keys once lived in.
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

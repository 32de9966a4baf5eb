//! The promotion cache (HotRAP §3.1, §3.3, §3.4): records read from the slow tier, held in
//! memory logically between the last fast level and the first slow level, until promotion
//! by flush or by compaction moves the hot ones to the fast tier.
//!
//! It owns the cache tables, the lock and epoch that keep inserts safe against concurrent
//! compactions into the slow tier, and the memtables switched while a table is frozen (the
//! paper's `updated` sets, kept as memtable references so that a memtable switch costs
//! O(1), not a pass over its keys, on the write path). It does not decide hotness (RALT
//! does) nor write files (the engine's checker and compaction do).
//!
//! Insert safety (docs/DESIGN.md invariant 1: a read never returns a version older than the newest
//! one visible to it). A record read from the slow tier is the newest version in its
//! reader's superversion. It would become stale only if a newer version moved into the
//! slow tier, which happens only through a compaction whose output is on the slow tier.
//! Every such compaction is announced with [`PromotionCache::begin_compaction`] under the
//! write lock; it bumps an epoch, remembers its key range, and drains the mutable table's
//! records in that range (they go to the compaction: promotion by compaction). A reader
//! takes the epoch *before* its superversion; its insert takes the read lock (try-lock,
//! abort on contention) and aborts if any compaction announced since then covers the key.
//! This is the paper's "being or having been compacted" check, made exact for keys whose
//! range no slow file covered yet.

use crate::key::{SeqNo, ShortBytes};
use crate::mem_filter::MemFilter;
use crate::memtable::MemTable;
use crate::sst::filter::filter_hash;
use bytes::Bytes;
use hashbrown::HashTable;
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Per-record bookkeeping charged on top of key and value bytes.
const ENTRY_OVERHEAD: usize = 64;
/// Compaction ranges remembered for the insert check; a reader older than the oldest one
/// remembered aborts (rare: it means this many compactions started during one read).
const RECENT_COMPACTIONS: usize = 256;

/// Bytes a record of these sizes is charged.
pub fn record_charge(key_len: usize, value_len: usize) -> usize {
    key_len + value_len + ENTRY_OVERHEAD
}

/// One cached record: the newest slow-tier version of its key when it was read.
#[derive(Clone, Debug)]
pub struct PcRecord {
    /// The value.
    pub value: Bytes,
    /// Its sequence number.
    pub seq: SeqNo,
    /// Its deadline, if it expires: an expired record reads as a deletion and is never
    /// promoted (by flush or by compaction).
    pub deadline: Option<u64>,
    /// The slow-tier read that cached it was already logged in RALT (a record put back by
    /// the checker), so the next checker or compaction must not log it again.
    pub recorded: bool,
}

/// Frozen tables allowed at once (awaiting or inside the checker): beyond it the mutable
/// table is not frozen, and inserts stop once it holds twice its size (invariant 4).
pub const MAX_FROZEN_TABLES: usize = 2;

/// Shards of a table's records (a power of two): an insert or a lookup locks one.
const PC_SHARDS: usize = 16;

/// One shard of a table: records indexed by their key's [`filter_hash`], the hash every
/// reader has already computed for the memtables' filters, so a lookup hashes nothing.
/// Keys are held inline when short ([`ShortBytes`]), so a probe compares bytes in the slot
/// it loaded.
type PcShard = Mutex<HashTable<(u64, ShortBytes, PcRecord)>>;

/// One promotion cache table (mutable, then immutable while the checker works on it): a
/// hash table, not an ordered map. Lookups and inserts are point operations, one per get
/// that reaches the table and per slow-tier read; order is needed only by the checker and
/// by compactions taking a key range, once per table or per compaction, which sort what
/// they take. (A `crossbeam_skiplist::SkipMap` until stop 42: its searches were 2-3% of
/// the CPU of YCSB A over F2's small records, almost all inserts of records that a later
/// update made stale.)
pub struct PcTable {
    shards: Box<[PcShard]>,
    /// Every key inserted: most reads that reach the cache find nothing in it, and the
    /// filter answers them without locking a shard.
    filter: MemFilter,
    size: AtomicUsize,
    /// Memtables that became immutable while this table was frozen (HotRAP §3.4 steps
    /// a-c): a key any of them holds was written after the freeze and is never promoted.
    switched: Mutex<Vec<Arc<MemTable>>>,
    /// Epoch when the table was frozen: compactions announced after it may have made its
    /// records stale, so records promoted or put back are checked against it.
    frozen_epoch: AtomicU64,
}

impl PcTable {
    /// An empty table whose filter is sized for `capacity` bytes of records (of 16-byte
    /// keys and values: larger records only make it more accurate).
    fn new(capacity: usize) -> Self {
        PcTable {
            shards: (0..PC_SHARDS).map(|_| Mutex::default()).collect(),
            filter: MemFilter::with_capacity(capacity / record_charge(16, 16)),
            size: AtomicUsize::new(0),
            switched: Mutex::new(Vec::new()),
            frozen_epoch: AtomicU64::new(0),
        }
    }

    /// The shard of a key whose `filter_hash` is `hash` (its top bits: the table uses the
    /// low ones).
    fn shard(&self, hash: u64) -> &PcShard {
        &self.shards[(hash >> 60) as usize & (PC_SHARDS - 1)]
    }

    /// Bytes of records held, approximately (keys, values, overhead).
    pub fn approximate_size(&self) -> usize {
        self.size.load(Ordering::Relaxed)
    }

    /// Bytes held in all: the records and the filter.
    fn memory(&self) -> usize {
        self.approximate_size() + self.filter.memory()
    }

    /// True when empty.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.shards.iter().all(|s| s.lock().is_empty())
    }

    /// Every record in key order.
    pub fn records(&self) -> Vec<(Bytes, PcRecord)> {
        let mut all: Vec<(Bytes, PcRecord)> = Vec::new();
        for shard in self.shards.iter() {
            all.extend(
                shard
                    .lock()
                    .iter()
                    .map(|(_, k, r)| (Bytes::copy_from_slice(k.as_slice()), r.clone())),
            );
        }
        all.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// Takes every record whose key lies in `[lo, hi]`, in no particular order.
    fn take_range(&self, lo: &[u8], hi: &[u8]) -> Vec<(Bytes, PcRecord)> {
        let mut taken = Vec::new();
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            for (_, k, r) in shard.extract_if(|(_, k, _)| (lo..=hi).contains(&k.as_slice())) {
                let charge = record_charge(k.as_slice().len(), r.value.len());
                self.size.fetch_sub(charge, Ordering::Relaxed);
                taken.push((Bytes::copy_from_slice(k.as_slice()), r));
            }
        }
        taken
    }

    /// True if `key` was written after the table froze (it is in a memtable switched since).
    pub fn is_updated(&self, key: &[u8]) -> bool {
        self.is_updated_since(key, 0)
    }

    /// Like [`PcTable::is_updated`], looking only at memtables switched after the first
    /// `seen` (a caller that already checked those).
    pub fn is_updated_since(&self, key: &[u8], seen: usize) -> bool {
        let switched = self.switched.lock().clone();
        switched.iter().skip(seen).any(|m| m.contains_user_key(key))
    }

    /// Memtables switched since the freeze so far.
    pub fn switched_count(&self) -> usize {
        self.switched.lock().len()
    }

    /// Epoch at which the table was frozen.
    pub fn frozen_epoch(&self) -> u64 {
        self.frozen_epoch.load(Ordering::Acquire)
    }

    /// The record of `key` (whose `filter_hash` is `hash`), asking the filter first.
    fn get(&self, key: &[u8], hash: u64) -> Option<PcRecord> {
        if !self.filter.may_contain(hash) {
            return None;
        }
        self.shard(hash)
            .lock()
            .find(hash, |(h, k, _)| *h == hash && k.as_slice() == key)
            .map(|(_, _, r)| r.clone())
    }

    /// Drops `key` if the table holds exactly version `seq` of it.
    fn remove_version(&self, key: &[u8], seq: SeqNo) {
        let hash = filter_hash(key);
        let mut shard = self.shard(hash).lock();
        if let Ok(e) = shard.find_entry(hash, |(h, k, r)| {
            *h == hash && k.as_slice() == key && r.seq == seq
        }) {
            let ((_, _, r), _) = e.remove();
            self.size
                .fetch_sub(record_charge(key.len(), r.value.len()), Ordering::Relaxed);
        }
    }

    fn insert(&self, key: &[u8], record: PcRecord) {
        let hash = filter_hash(key);
        let charge = record_charge(key.len(), record.value.len());
        let mut shard = self.shard(hash).lock();
        let replaced = match shard.find_mut(hash, |(h, k, _)| *h == hash && k.as_slice() == key) {
            Some((_, _, old)) if old.seq >= record.seq => return,
            Some((_, _, old)) => {
                let replaced = record_charge(key.len(), old.value.len());
                *old = record;
                replaced
            }
            None => {
                // Before the record can be found: a reader that may see it must find its
                // filter bits set.
                self.filter.insert(hash);
                shard.insert_unique(hash, (hash, ShortBytes::new(key), record), |e| e.0);
                0
            }
        };
        // One update of the net change: adding the new charge before subtracting the
        // replaced one showed a sampler the cache over its limit in between.
        if charge >= replaced {
            self.size.fetch_add(charge - replaced, Ordering::Relaxed);
        } else {
            self.size.fetch_sub(replaced - charge, Ordering::Relaxed);
        }
    }
}

/// `(epoch, lo, hi)`: a compaction into the slow tier of user keys `[lo, hi]`.
type AnnouncedCompaction = (u64, Vec<u8>, Vec<u8>);

/// Why an insert did not happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InsertOutcome {
    /// The record is in the mutable table.
    Inserted,
    /// A concurrent compaction may have moved a newer version to the slow tier, or the
    /// lock was contended: the record was not cached (the read itself is still correct).
    Aborted,
    /// The cache is at its memory limit: the record was not cached.
    Full,
}

/// A frozen table, and what the checker needs from the moment it froze (`V`: the engine's
/// view of the store then), until the checker takes it.
struct Frozen<V> {
    table: Arc<PcTable>,
    for_checker: Option<V>,
}

/// The promotion cache: one mutable table and the frozen ones, awaiting or inside the
/// checker. The one list of frozen tables: reads, compactions and the checker's queue all
/// use it.
pub struct PromotionCache<V = ()> {
    lock: RwLock<()>,
    epoch: AtomicU64,
    /// Recently announced compactions into the slow tier.
    recent: Mutex<VecDeque<AnnouncedCompaction>>,
    mutable: RwLock<Arc<PcTable>>,
    immutables: Mutex<Vec<Frozen<V>>>,
    /// Serializes inserts under a memory limit, so that two readers cannot both pass the
    /// limit check and together exceed it.
    capped_insert: Mutex<()>,
    aborted: AtomicU64,
    inserted: AtomicU64,
    /// Bytes of records a mutable table is expected to hold before it is frozen, for
    /// sizing each new table's filter.
    table_capacity: usize,
    /// Memory of a new table's filter: a capped insert leaves room for it, because a
    /// freeze starts a new table without a check (it must not refuse: a full table that
    /// never froze would stay full).
    fresh_filter_bytes: usize,
}

impl<V> PromotionCache<V> {
    /// An empty cache whose tables hold up to about `table_capacity` bytes each.
    pub fn new(table_capacity: usize) -> Self {
        let mutable = PcTable::new(table_capacity);
        PromotionCache {
            lock: RwLock::new(()),
            epoch: AtomicU64::new(1),
            recent: Mutex::new(VecDeque::new()),
            fresh_filter_bytes: mutable.filter.memory(),
            mutable: RwLock::new(Arc::new(mutable)),
            table_capacity,
            immutables: Mutex::new(Vec::new()),
            capped_insert: Mutex::new(()),
            aborted: AtomicU64::new(0),
            inserted: AtomicU64::new(0),
        }
    }

    /// The epoch a reader must take before loading its superversion.
    pub fn read_epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// The cached version of `key` visible at `snapshot`: mutable table first, then the
    /// immutable ones newest first.
    #[cfg(test)]
    pub fn get(&self, key: &[u8], snapshot: SeqNo) -> Option<PcRecord> {
        self.get_hashed(key, filter_hash(key), snapshot)
    }

    /// [`PromotionCache::get`] for a key whose `filter_hash` the caller computed.
    pub fn get_hashed(&self, key: &[u8], hash: u64, snapshot: SeqNo) -> Option<PcRecord> {
        let visible = |r: PcRecord| (r.seq <= snapshot).then_some(r);
        if let Some(r) = self.mutable.read().get(key, hash) {
            return visible(r);
        }
        let imms = self.frozen_tables();
        imms.iter()
            .rev()
            .find_map(|t| t.get(key, hash))
            .and_then(visible)
    }

    /// Caches a record read from the slow tier by a reader that took `read_epoch` before
    /// its superversion, with no memory limit. See the module comment for why this is safe.
    #[cfg(test)]
    pub fn try_insert(&self, key: &[u8], record: PcRecord, read_epoch: u64) -> InsertOutcome {
        self.try_insert_within(key, record, read_epoch, None)
    }

    /// Caches a record read from the slow tier by a reader that took `read_epoch` before
    /// its superversion (see the module comment for why this is safe), keeping every table
    /// together within `limit` bytes (invariant 4). Capped inserts take one more try-lock, never a wait (invariant 5).
    pub fn try_insert_within(
        &self,
        key: &[u8],
        record: PcRecord,
        read_epoch: u64,
        limit: Option<usize>,
    ) -> InsertOutcome {
        let _capped = match limit {
            Some(limit) => {
                let Some(g) = self.capped_insert.try_lock() else {
                    self.aborted.fetch_add(1, Ordering::Relaxed);
                    return InsertOutcome::Aborted;
                };
                let charge = record_charge(key.len(), record.value.len());
                if self.memory_usage() + charge + self.fresh_filter_bytes > limit {
                    return InsertOutcome::Full;
                }
                Some(g)
            }
            None => None,
        };
        let Some(_guard) = self.lock.try_read() else {
            self.aborted.fetch_add(1, Ordering::Relaxed);
            return InsertOutcome::Aborted;
        };
        if self.compacted_since(key, read_epoch) {
            self.aborted.fetch_add(1, Ordering::Relaxed);
            return InsertOutcome::Aborted;
        }
        self.mutable.read().insert(key, record);
        self.inserted.fetch_add(1, Ordering::Relaxed);
        InsertOutcome::Inserted
    }

    /// True if a compaction announced after `epoch` covers `key` (or may have: when too many
    /// compactions happened since to remember them all).
    pub fn compacted_since(&self, key: &[u8], epoch: u64) -> bool {
        if self.epoch.load(Ordering::Acquire) == epoch {
            return false;
        }
        let recent = self.recent.lock();
        match recent.front() {
            Some((oldest, _, _)) if *oldest > epoch + 1 => true,
            _ => recent
                .iter()
                .any(|(e, lo, hi)| *e > epoch && lo.as_slice() <= key && key <= hi.as_slice()),
        }
    }

    /// Announces a compaction writing user keys `[lo, hi]` into the slow tier and takes every
    /// table's records in that range (for promotion by compaction), sorted by key.
    pub fn begin_compaction(&self, lo: &[u8], hi: &[u8]) -> Vec<(Bytes, PcRecord)> {
        let _guard = self.lock.write();
        let epoch = self.epoch.fetch_add(1, Ordering::AcqRel) + 1;
        {
            let mut recent = self.recent.lock();
            recent.push_back((epoch, lo.to_vec(), hi.to_vec()));
            while recent.len() > RECENT_COMPACTIONS {
                recent.pop_front();
            }
        }
        // Immutable tables are drained too: their records would otherwise shadow the newer
        // versions this compaction moves down, and the checker re-checks the epoch anyway.
        let mut tables = vec![self.mutable.read().clone()];
        tables.extend(self.frozen_tables());
        let mut taken: BTreeMap<Bytes, PcRecord> = BTreeMap::new();
        for table in tables {
            for (k, r) in table.take_range(lo, hi) {
                if taken.get(&k).is_none_or(|t| t.seq < r.seq) {
                    taken.insert(k, r);
                }
            }
        }
        taken.into_iter().collect()
    }

    /// Bytes in the mutable table.
    pub fn mutable_size(&self) -> usize {
        self.mutable.read().approximate_size()
    }

    /// Freezes the mutable table (the caller holds the database mutex, HotRAP §3.4 step 3)
    /// and returns it. With `for_checker` it joins the checker's queue
    /// ([`PromotionCache::next_for_checker`]); without, the caller retires it. `None` if a
    /// compaction holds the cache's lock right now (a reader never waits for it; the next
    /// insert tries again).
    pub fn freeze(&self, for_checker: Option<V>) -> Option<Arc<PcTable>> {
        let _guard = self.lock.try_write()?;
        let mut m = self.mutable.write();
        let frozen = std::mem::replace(&mut *m, Arc::new(PcTable::new(self.table_capacity)));
        frozen
            .frozen_epoch
            .store(self.epoch.load(Ordering::Acquire), Ordering::Release);
        self.immutables.lock().push(Frozen {
            table: frozen.clone(),
            for_checker,
        });
        Some(frozen)
    }

    /// The oldest frozen table awaiting the checker, with what the freeze left for it; it
    /// stays frozen (and readable) until [`PromotionCache::retire`].
    pub fn next_for_checker(&self) -> Option<(Arc<PcTable>, V)> {
        let mut imms = self.immutables.lock();
        let f = imms.iter_mut().find(|f| f.for_checker.is_some())?;
        let view = f.for_checker.take()?;
        Some((f.table.clone(), view))
    }

    /// True while some frozen table awaits the checker.
    pub fn awaits_checker(&self) -> bool {
        self.immutables
            .lock()
            .iter()
            .any(|f| f.for_checker.is_some())
    }

    /// The keys of every record held (mutable and frozen tables; a key may repeat).
    pub fn keys(&self) -> Vec<Bytes> {
        let mut tables = vec![self.mutable.read().clone()];
        tables.extend(self.frozen_tables());
        tables
            .iter()
            .flat_map(|t| t.records().into_iter().map(|(k, _)| k))
            .collect()
    }

    /// The frozen tables, oldest first.
    fn frozen_tables(&self) -> Vec<Arc<PcTable>> {
        self.immutables
            .lock()
            .iter()
            .map(|f| f.table.clone())
            .collect()
    }

    /// Called (under the database mutex) when a memtable becomes immutable: every frozen
    /// table remembers it, so the keys it holds are never promoted from them (HotRAP §3.4
    /// steps a-c). O(frozen tables): the write path never walks the memtable's keys.
    pub fn note_switched(&self, mem: &Arc<MemTable>) {
        for f in self.immutables.lock().iter() {
            f.table.switched.lock().push(mem.clone());
        }
    }

    /// Frozen tables (awaiting or inside the checker).
    pub fn frozen_count(&self) -> usize {
        self.immutables.lock().len()
    }

    /// Drops an immutable table once the checker is done with it.
    pub fn retire(&self, table: &Arc<PcTable>) {
        self.immutables
            .lock()
            .retain(|f| !Arc::ptr_eq(&f.table, table));
    }

    /// Moves records of a frozen table back into the mutable one (too few hot records to
    /// fill a file), skipping any a compaction announced since the freeze may have staled
    /// and any written since. Their reads are already logged in RALT. Moved, not copied:
    /// the frozen table lets go of each record before the mutable one takes it, so the
    /// cache never holds (or charges) a record twice against its memory limit.
    pub fn put_back(&self, table: &PcTable, records: Vec<(Bytes, PcRecord)>) {
        let epoch = table.frozen_epoch();
        let _guard = self.lock.read();
        let mutable = self.mutable.read().clone();
        for (k, r) in records {
            if table.is_updated(&k) || self.compacted_since(&k, epoch) {
                continue;
            }
            // Out of the frozen table first: a reader missing the record for a moment
            // reads the slow tier instead, while charging it twice could pass the limit.
            table.remove_version(&k, r.seq);
            mutable.insert(
                &k,
                PcRecord {
                    recorded: true,
                    ..r
                },
            );
        }
    }

    /// Memtables that frozen tables still hold for their update check (see
    /// [`PcTable::is_updated`]), each once: they stay in memory after their flush until
    /// the checker retires the table.
    pub fn held_memtables(&self) -> Vec<Arc<MemTable>> {
        let mut held: Vec<Arc<MemTable>> = Vec::new();
        for f in self.immutables.lock().iter() {
            for m in f.table.switched.lock().iter() {
                if !held.iter().any(|h| Arc::ptr_eq(h, m)) {
                    held.push(m.clone());
                }
            }
        }
        held
    }

    /// Inserts that went through.
    pub fn inserted(&self) -> u64 {
        self.inserted.load(Ordering::Relaxed)
    }

    /// Inserts aborted by the concurrency check.
    pub fn aborted(&self) -> u64 {
        self.aborted.load(Ordering::Relaxed)
    }

    /// Bytes held by all tables (records and filters).
    pub fn memory_usage(&self) -> usize {
        // Holding the mutable table's lock while summing the frozen ones: a freeze swaps
        // the mutable table and pushes the old one under that lock, and a sum across it
        // would count the old table twice (a stats sampler saw the cache over its limit).
        let mutable = self.mutable.read();
        mutable.memory()
            + self
                .immutables
                .lock()
                .iter()
                .map(|f| f.table.memory())
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(v: &str, seq: SeqNo) -> PcRecord {
        PcRecord {
            value: Bytes::copy_from_slice(v.as_bytes()),
            seq,
            deadline: None,
            recorded: false,
        }
    }

    #[test]
    fn insert_is_aborted_only_for_keys_a_later_compaction_covers() {
        let pc = PromotionCache::<()>::new(1 << 20);
        let e = pc.read_epoch();
        let taken = pc.begin_compaction(b"b", b"d");
        assert!(taken.is_empty());
        assert_eq!(
            pc.try_insert(b"c", rec("old", 1), e),
            InsertOutcome::Aborted
        );
        assert_eq!(pc.try_insert(b"e", rec("v", 1), e), InsertOutcome::Inserted);
        // A reader that started after the compaction was announced may insert.
        let e2 = pc.read_epoch();
        assert_eq!(
            pc.try_insert(b"c", rec("new", 5), e2),
            InsertOutcome::Inserted
        );
        assert_eq!(pc.get(b"c", 9).unwrap().value, "new");
        assert_eq!((pc.inserted(), pc.aborted()), (2, 1));
    }

    #[test]
    fn compaction_drains_its_range_from_the_mutable_table() {
        let pc = PromotionCache::<()>::new(1 << 20);
        for (i, k) in ["a", "b", "c", "d"].iter().enumerate() {
            let e = pc.read_epoch();
            pc.try_insert(k.as_bytes(), rec(k, i as u64 + 1), e);
        }
        let taken = pc.begin_compaction(b"b", b"c");
        let keys: Vec<_> = taken.iter().map(|(k, _)| k.clone()).collect();
        assert_eq!(keys, vec![Bytes::from("b"), Bytes::from("c")]);
        assert!(pc.get(b"b", 9).is_none());
        assert!(pc.get(b"a", 9).is_some() && pc.get(b"d", 9).is_some());
    }

    #[test]
    fn overwriting_a_record_charges_only_the_difference() {
        let pc = PromotionCache::<()>::new(1 << 20);
        pc.try_insert(b"k", rec("aaaa", 1), pc.read_epoch());
        let once = pc.mutable_size();
        pc.try_insert(b"k", rec("bbbb", 2), pc.read_epoch());
        assert_eq!(pc.mutable_size(), once);
    }

    // Invariant 4: putting records back moves them, so the cache's charge does not grow.
    #[test]
    fn put_back_moves_records_without_charging_them_twice() {
        let pc = PromotionCache::<()>::new(1 << 20);
        pc.try_insert(b"a", rec("aaaa", 1), pc.read_epoch());
        pc.try_insert(b"b", rec("bbbb", 2), pc.read_epoch());
        let before = pc.memory_usage();
        let frozen = pc.freeze(None).unwrap();
        let mem = Arc::new(MemTable::new(3, 1 << 20));
        pc.note_switched(&mem);
        pc.note_switched(&mem);
        assert_eq!(pc.held_memtables().len(), 1);
        pc.put_back(&frozen, frozen.records());
        // The frozen table's filter stays until it is retired.
        let filter = PromotionCache::<()>::new(1 << 20).memory_usage();
        assert_eq!(pc.memory_usage(), before + filter);
        assert!(frozen.is_empty());
        assert_eq!(pc.get(b"a", 9).unwrap().value, "aaaa");
        pc.retire(&frozen);
        assert_eq!(pc.memory_usage(), before);
        assert!(pc.held_memtables().is_empty());
    }

    // Invariant 4: a capped insert never takes the cache past its limit, nor leaves too
    // little room for the freeze that follows (it starts a new table, whose filter
    // counts too).
    #[test]
    fn capped_inserts_stop_at_the_limit() {
        let pc = PromotionCache::<()>::new(1 << 20);
        // The table's filter counts against the limit too.
        let filter = pc.memory_usage();
        assert!(filter > 0);
        let one = record_charge(1, 4);
        let cap = 2 * filter + 2 * one + one / 2;
        let limit = Some(cap);
        for (i, k) in [b"a", b"b", b"c"].iter().enumerate() {
            let out = pc.try_insert_within(*k, rec("vvvv", i as u64 + 1), pc.read_epoch(), limit);
            let want = if i < 2 {
                InsertOutcome::Inserted
            } else {
                InsertOutcome::Full
            };
            assert_eq!(out, want);
        }
        assert_eq!(pc.memory_usage(), filter + 2 * one);
        pc.freeze(None).unwrap();
        assert!(pc.memory_usage() <= cap, "{}", pc.memory_usage());
    }

    #[test]
    fn snapshot_older_than_the_record_does_not_see_it() {
        let pc = PromotionCache::<()>::new(1 << 20);
        pc.try_insert(b"k", rec("v", 10), pc.read_epoch());
        assert!(pc.get(b"k", 9).is_none());
        assert!(pc.get(b"k", 10).is_some());
    }

    #[test]
    fn frozen_tables_track_updated_keys_and_put_back_checks_the_freeze_epoch() {
        let pc = PromotionCache::<()>::new(1 << 20);
        pc.try_insert(b"a", rec("a", 1), pc.read_epoch());
        pc.try_insert(b"b", rec("b", 2), pc.read_epoch());
        let frozen = pc.freeze(None).unwrap();
        assert_eq!(pc.mutable_size(), 0);
        assert!(
            pc.get(b"a", 9).is_some(),
            "immutable tables still serve reads"
        );
        let mem = Arc::new(MemTable::new(7, 1 << 20));
        mem.add(9, crate::key::ValueKind::Value, b"a", b"new");
        mem.add(10, crate::key::ValueKind::Value, b"zz", b"new");
        pc.note_switched(&mem);
        assert!(frozen.is_updated(b"a") && !frozen.is_updated(b"b"));
        assert!(!frozen.is_updated_since(b"a", 1));
        pc.begin_compaction(b"b", b"b");
        pc.put_back(&frozen, frozen.records());
        pc.retire(&frozen);
        assert!(pc.get(b"a", 9).is_none(), "a was written after the freeze");
        assert!(
            pc.get(b"b", 9).is_none(),
            "b may be stale after the compaction"
        );
    }
}

//! The cache: AC-Key's three components under one memory budget
//! ([`crate::Options::cache_size`]): a KV cache (user key -> value), a KP cache (user
//! key -> pointer to the data block holding the newest version, or the value itself when
//! smaller than a pointer) and the block cache (decoded data blocks), sized online by HAC
//! or split in a fixed way ([`CacheMode`]).
//!
//! Files: `elru` (entry store, recency lists, E-LRU victims), `ghost` (ghost caches),
//! `point` and `block` (entry layouts and charges), `shard` (one shard's components,
//! admission, eviction and ghost sizing), `adaptive` (modes, targets, E-ARC moves, ghost
//! turn-off). This file owns the sharding, the flush fence, resizing and the statistics.
//!
//! **Resizing** ([`Cache::set_capacity`], `Db::set_cache_capacity`): the shard count is
//! chosen at open from the budget and kept (re-sharding would move every entry to another
//! shard with every shard's lock held); each shard gets `capacity / shards` and a smaller
//! share is enforced at once under the shard's lock by the eviction path inserts use. The
//! budget changes before the shards grow and after they shrink, so the shards' capacities
//! add up to at most the budget at every instant (invariant 4).
//!
//! **Invariant 1 (docs/DESIGN.md).** KV and KP entries describe the newest version of a key
//! outside the memtables, so they sit below the memtables in the read order and only reads
//! of the latest state (no snapshot) use or fill them. Table files never gain newer
//! versions except by flush: compaction and retention only move versions, and promotion
//! writes a version only when no newer one exists. So a flush is the one event that can
//! make an entry stale, and it updates every entry of its keys ([`Cache::apply_flush`])
//! before the store publishes the SuperVersion without the flushed memtable. A reader that
//! loaded its SuperVersion before the flush could still insert the old version after the
//! flush updated the key: readers take the **flush fence** ([`Cache::fence`]) before their
//! SuperVersion, the flush bumps it before touching any key, and every insert checks it
//! under the shard's lock (a flush's update of the key takes the same lock, so either the
//! update sees the insert and fixes it, or the insert sees the bump and gives up). KP
//! pointers into files that compaction removed are validated by the reader (the file must
//! be in its version at the recorded level, the block must hold the key) and fall back to
//! the normal path.

mod adaptive;
mod block;
mod elru;
mod ghost;
mod point;
mod shard;

pub use adaptive::{CacheMode, CacheOptions, WINDOW};
pub use point::BlockPtr;
pub use shard::PointLookup;

use crate::sst::block::Block;
use adaptive::Comp;
use adaptive::{Controller, HitCounts};
use parking_lot::Mutex;
use serde::Serialize;
use shard::{FlushOutcome, Shard, ShardCounters};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Most shards; fewer for small budgets so each shard holds at least [`BLOCKS_PER_SHARD`]
/// blocks (the hysteresis and E-LRU need room to work).
const MAX_SHARDS: usize = 32;
const BLOCKS_PER_SHARD: usize = 32;
/// A shard reports to the turn-off window every this many lookups.
const TICK: u64 = 1024;

/// The largest budget [`Cache::set_capacity`] accepts: 256 TiB, beyond any machine's memory
/// (a larger figure is a unit mistake, not a cache) and small enough that the adaptive
/// fractions' f64 arithmetic stays exact to the byte.
pub const MAX_CACHE_CAPACITY: usize = 1 << 48;

/// The hash of a user key (shard choice, the index, and the ghost fingerprint): the
/// filters' hash, so that a read hashes its key once for the memtables' filters and the
/// caches.
pub fn key_hash(key: &[u8]) -> u64 {
    crate::sst::filter::filter_hash(key)
}

/// The hash of a block's (file number, offset).
pub fn block_hash(file: u64, offset: u64) -> u64 {
    let mut x = file.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ offset;
    // splitmix64's finalizer.
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// One shard and its counters, on their own cache lines.
#[repr(align(128))]
struct Slot {
    shard: Mutex<Shard>,
    counters: ShardCounters,
}

/// The sharded AC-Key cache shared by every table and the read path.
pub struct Cache {
    slots: Box<[Slot]>,
    mask: usize,
    ctl: Controller,
    /// The budget in bytes; changed by [`Cache::set_capacity`].
    budget: AtomicUsize,
    /// Held by one resize at a time, so two resizes cannot interleave their shards.
    resizing: Mutex<()>,
    fence: AtomicU64,
    ticks: AtomicU64,
    /// Table accesses on the get path and the opens among them (see
    /// `Controller::kp_saved_ios`).
    table_accesses: AtomicU64,
    table_opens: AtomicU64,
    aborted: AtomicU64,
    stale_pointers: AtomicU64,
    flush_updates: AtomicU64,
}

/// One component's figures.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ComponentStats {
    /// Bytes charged by its entries.
    pub bytes: usize,
    /// Entries held.
    pub entries: usize,
    /// Current target in bytes (adaptive: HAC's target; fixed: the share).
    pub target: usize,
    /// Lookups that found an entry.
    pub hits: u64,
    /// Lookups (for KV and KP: point lookups, which consult both).
    pub lookups: u64,
    /// hits / lookups.
    pub hit_rate: f64,
    /// Hits in this component's ghost cache.
    pub ghost_hits: u64,
    /// Virtual size of its ghost cache (bytes the remembered entries took).
    pub ghost_virtual_bytes: usize,
    /// Entries evicted.
    pub evictions: u64,
}

/// What the cache holds and did, from [`crate::DbStats::cache`].
#[derive(Clone, Debug, Default, Serialize)]
pub struct AdaptiveCacheStats {
    /// The mode (`adaptive`, `block`, `kv`, `kp`, `split:KV:KP:BLOCK`).
    pub mode: String,
    /// The budget in bytes (as resized by `Db::set_cache_capacity`, if it was).
    pub capacity: usize,
    /// Bytes charged (entries and ghost records); never above `capacity`.
    pub usage: usize,
    /// Shards.
    pub shards: usize,
    /// The KV cache.
    pub kv: ComponentStats,
    /// The KP cache.
    pub kp: ComponentStats,
    /// The block cache.
    pub block: ComponentStats,
    /// Hits in the point ghost (G_point).
    pub point_ghost_hits: u64,
    /// Virtual size of G_point.
    pub point_ghost_virtual_bytes: usize,
    /// Bytes of every ghost record (charged to the budget).
    pub ghost_bytes: usize,
    /// Ghosts recording evictions now.
    pub ghosts_on: bool,
    /// Times the ghosts were turned off because hit ratios settled.
    pub ghost_turnoffs: u64,
    /// Times they were turned back on.
    pub ghost_turnons: u64,
    /// Share of the get path's table accesses that had to open their table (the p that
    /// scales a KP pointer's credit), averaged over recent windows.
    pub metadata_miss: f64,
    /// KP hits promoted to KV.
    pub promotions: u64,
    /// Entries refused because they could not fit.
    pub rejected: u64,
    /// Inserts abandoned because a flush ran since the reader started (the fence).
    pub inserts_aborted: u64,
    /// KP pointers that led to a file no longer in the version (fell back to the levels).
    pub stale_pointers: u64,
    /// Flushed keys whose cached entries were updated or dropped.
    pub flush_updates: u64,
}

/// A flushed key: its newest version in the flushed memtable (`None`: a tombstone),
/// borrowed from the memtable (an entry the cache holds copies what it keeps).
pub struct FlushedKey<'a> {
    /// User key.
    pub key: &'a [u8],
    /// Newest value, or `None` for a deletion.
    pub value: Option<&'a [u8]>,
}

impl Cache {
    /// An adaptive cache of `capacity` bytes for 4 KiB blocks and 4 L0 files.
    pub fn new(capacity: usize) -> Cache {
        Cache::with_options(capacity, &CacheOptions::default(), 4096, 4)
    }

    /// A cache of `capacity` bytes. `block_size` sizes the shards and the hysteresis;
    /// `l0_files` is n0 of the efficiency factor.
    pub fn with_options(
        capacity: usize,
        opts: &CacheOptions,
        block_size: usize,
        l0_files: usize,
    ) -> Cache {
        let block_unit = block_size.max(256);
        let by_size = capacity / (BLOCKS_PER_SHARD * block_unit);
        let n = if by_size >= MAX_SHARDS {
            MAX_SHARDS
        } else if by_size <= 1 {
            1
        } else {
            // Largest power of two not above by_size.
            1 << (usize::BITS - 1 - by_size.leading_zeros())
        };
        let per_shard = capacity / n;
        let slots = (0..n)
            .map(|_| Slot {
                shard: Mutex::new(Shard::new(per_shard)),
                counters: ShardCounters::default(),
            })
            .collect();
        Cache {
            slots,
            mask: n - 1,
            ctl: Controller::new(opts, capacity, block_unit, l0_files),
            budget: AtomicUsize::new(capacity),
            resizing: Mutex::new(()),
            fence: AtomicU64::new(0),
            ticks: AtomicU64::new(0),
            table_accesses: AtomicU64::new(0),
            table_opens: AtomicU64::new(0),
            aborted: AtomicU64::new(0),
            stale_pointers: AtomicU64::new(0),
            flush_updates: AtomicU64::new(0),
        }
    }

    /// The keys of the KV and KP entries found below level `level` (as admitted: a record
    /// may have moved since), one shard locked at a time.
    pub fn point_keys_below(&self, level: usize) -> Vec<bytes::Bytes> {
        let level = level.min(u8::MAX as usize) as u8;
        let mut keys = Vec::new();
        for slot in self.slots.iter() {
            slot.shard.lock().point_keys_below(level, &mut keys);
        }
        keys
    }

    /// The mode.
    pub fn mode(&self) -> CacheMode {
        self.ctl.mode
    }

    /// True when point lookups use the KV/KP caches.
    pub fn point_enabled(&self) -> bool {
        self.ctl.mode.has_point()
    }

    /// True when blocks are cached.
    pub fn block_enabled(&self) -> bool {
        self.ctl.mode.has_block()
    }

    fn slot(&self, hash: u64) -> &Slot {
        // Bits 32.. choose the shard: the index uses the low bits and the top seven.
        &self.slots[((hash >> 32) as usize) & self.mask]
    }

    fn after_lookup(&self, lookups: u64) {
        if lookups.is_multiple_of(TICK) {
            let t = self.ticks.fetch_add(1, Ordering::Relaxed) + 1;
            if t.is_multiple_of(WINDOW / TICK) {
                self.ctl.end_window(self.hit_counts());
            }
        }
    }

    /// Records a table access of the get path; `opened`: the table was not open, so its
    /// index and filter were read from disk.
    pub fn note_table_access(&self, opened: bool) {
        self.table_accesses.fetch_add(1, Ordering::Relaxed);
        if opened {
            self.table_opens.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn hit_counts(&self) -> HitCounts {
        let mut h = HitCounts {
            table_accesses: self.table_accesses.load(Ordering::Relaxed),
            table_opens: self.table_opens.load(Ordering::Relaxed),
            ..HitCounts::default()
        };
        for s in self.slots.iter() {
            let c = &s.counters;
            let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
            h.kv_hits += l(&c.kv_hits);
            h.kp_hits += l(&c.kp_hits);
            h.point_lookups += l(&c.point_lookups);
            h.block_hits += l(&c.block_hits);
            h.block_lookups += l(&c.block_lookups);
            for (n, e) in
                h.evictions
                    .iter_mut()
                    .zip([&c.kv_evictions, &c.kp_evictions, &c.block_evictions])
            {
                *n += l(e);
            }
        }
        h
    }

    /// The flush fence: take it before loading the SuperVersion and pass it to the inserts
    /// of that read.
    pub fn fence(&self) -> u64 {
        self.fence.load(Ordering::Acquire)
    }

    /// Looks a key up in the KV and KP caches (latest-state reads only).
    pub fn lookup_point(&self, key: &[u8], hash: u64) -> PointLookup {
        let slot = self.slot(hash);
        let (r, n) = {
            let mut s = slot.shard.lock();
            let r = s.lookup_point(key, hash, &self.ctl, &slot.counters);
            (r, s.lookups)
        };
        self.after_lookup(n);
        r
    }

    /// True when the KV or KP cache holds `key`'s value (see `Shard::holds_value`): no
    /// counter, recency or ghost changes.
    pub fn holds_value(&self, key: &[u8], hash: u64) -> bool {
        self.slot(hash).shard.lock().holds_value(key, hash)
    }

    /// The block pointer the KP cache holds for `key`, if any: no counter, recency or
    /// ghost changes.
    pub fn peek_pointer(&self, key: &[u8], hash: u64) -> Option<BlockPtr> {
        self.slot(hash).shard.lock().peek_pointer(key, hash)
    }

    /// True when the block at `offset` of table `file` is cached: no counter, recency or
    /// ghost changes.
    pub fn holds_block(&self, file: u64, offset: u64) -> bool {
        if !self.block_enabled() {
            return false;
        }
        let hash = block_hash(file, offset);
        self.slot(hash).shard.lock().holds_block(file, offset, hash)
    }

    /// Runs `f` on a key's shard if no flush ran since `fence` was taken (checked under
    /// the shard's lock, see the module comment).
    fn if_fresh(&self, hash: u64, fence: u64, f: impl FnOnce(&mut Shard, &ShardCounters)) {
        let slot = self.slot(hash);
        let mut s = slot.shard.lock();
        if self.fence.load(Ordering::Acquire) != fence {
            self.aborted.fetch_add(1, Ordering::Relaxed);
            return;
        }
        f(&mut s, &slot.counters);
    }

    /// Caches a key the normal read path found at `level` (in the block `ptr` when known):
    /// into KV when `warm`, else into KP. Nothing happens if a flush ran since `fence`.
    #[allow(clippy::too_many_arguments)]
    pub fn admit(
        &self,
        key: &[u8],
        hash: u64,
        value: &[u8],
        level: usize,
        ptr: Option<BlockPtr>,
        warm: bool,
        fence: u64,
    ) {
        let level = level.min(u8::MAX as usize) as u8;
        self.if_fresh(hash, fence, |s, c| {
            s.admit(key, hash, value, level, ptr, warm, &self.ctl, c)
        });
    }

    /// After a KP hit: moves the key to the KV cache with the value its block held.
    pub fn upgrade_to_value(&self, key: &[u8], hash: u64, value: &[u8], ptr: BlockPtr, fence: u64) {
        self.if_fresh(hash, fence, |s, c| {
            s.upgrade_to_value(key, hash, value, ptr, &self.ctl, c)
        });
    }

    /// Drops a KP entry whose pointer is stale.
    pub fn forget(&self, key: &[u8], hash: u64, ptr: BlockPtr) {
        self.stale_pointers.fetch_add(1, Ordering::Relaxed);
        self.slot(hash).shard.lock().forget(key, hash, ptr);
    }

    /// The block at `offset` of table `file`, if cached.
    pub fn get_block(&self, file: u64, offset: u64) -> Option<Block> {
        if !self.block_enabled() {
            return None;
        }
        let hash = block_hash(file, offset);
        let slot = self.slot(hash);
        let (b, n) = {
            let mut s = slot.shard.lock();
            let b = s.lookup_block(file, offset, hash, &self.ctl, &slot.counters);
            (b, s.lookups)
        };
        self.after_lookup(n);
        b
    }

    /// Caches a block.
    pub fn insert_block(&self, file: u64, offset: u64, block: Block) {
        if !self.block_enabled() {
            return;
        }
        let hash = block_hash(file, offset);
        let slot = self.slot(hash);
        slot.shard
            .lock()
            .insert_block(file, offset, hash, block, &self.ctl, &slot.counters);
    }

    /// Brings the point caches up to date with a flushed memtable, before the store
    /// publishes the SuperVersion without it: bumps the fence, gives KV (and inline KP)
    /// entries their new value or drops them on a tombstone, then re-points KP entries at
    /// the new L0 table (`file`) through `handle_of`, which looks a key's block up in it
    /// (`None`: drop the entry).
    pub fn apply_flush(
        &self,
        keys: &[FlushedKey<'_>],
        file: u64,
        mut handle_of: impl FnMut(&[u8]) -> Option<crate::sst::format::BlockHandle>,
    ) {
        if !self.point_enabled() {
            return;
        }
        self.fence.fetch_add(1, Ordering::AcqRel);
        // One lock per shard: group the keys by shard.
        let mut order: Vec<(usize, u64, usize)> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| {
                let h = key_hash(k.key);
                (((h >> 32) as usize) & self.mask, h, i)
            })
            .collect();
        order.sort_unstable_by_key(|&(s, _, _)| s);
        let mut repoint: Vec<(usize, u64, usize)> = Vec::new();
        let mut updated = 0u64;
        for group in order.chunk_by(|a, b| a.0 == b.0) {
            let slot = &self.slots[group[0].0];
            let mut s = slot.shard.lock();
            for &(si, h, i) in group {
                let k = &keys[i];
                match s.flush_update(k.key, h, k.value, &self.ctl) {
                    FlushOutcome::Repoint => repoint.push((si, h, i)),
                    FlushOutcome::Updated => updated += 1,
                    FlushOutcome::NotCached => {}
                }
            }
            s.fit(&self.ctl, &slot.counters);
        }
        // Index lookups in the new table happen outside the shard locks.
        let repoint: Vec<(usize, u64, usize, Option<BlockPtr>)> = repoint
            .into_iter()
            .map(|(si, h, i)| {
                let p = handle_of(keys[i].key).map(|handle| BlockPtr {
                    file,
                    level: 0,
                    handle,
                });
                (si, h, i, p)
            })
            .collect();
        for group in repoint.chunk_by(|a, b| a.0 == b.0) {
            let mut s = self.slots[group[0].0].shard.lock();
            for &(_, h, i, p) in group {
                s.repoint(keys[i].key, h, p, &self.ctl);
            }
        }
        updated += repoint.len() as u64;
        self.flush_updates.fetch_add(updated, Ordering::Relaxed);
    }

    /// Bytes charged now (entries and ghosts).
    pub fn usage(&self) -> usize {
        self.slots.iter().map(|s| s.shard.lock().usage()).sum()
    }

    /// The budget.
    pub fn capacity(&self) -> usize {
        self.budget.load(Ordering::Acquire)
    }

    /// Resizes the cache to `capacity` bytes while it is in use, keeping the shard count
    /// chosen at open: each shard gets `capacity / shards`, evicting down to it at once
    /// when smaller (see the module comment), and the adaptive targets, fractions of each
    /// shard's real capacity, scale with it (`Controller::set_budget`). A budget far below
    /// the one the shard count was chosen for leaves shards too small for blocks (an
    /// entry over a quarter of a shard is refused), one far above leaves fewer shards, and
    /// more contention, than opening at that size would. [`Error::InvalidArgument`]
    /// (naming the value) for 0 or more than [`MAX_CACHE_CAPACITY`].
    ///
    /// [`Error::InvalidArgument`]: crate::Error::InvalidArgument
    pub fn set_capacity(&self, capacity: usize) -> crate::error::Result<()> {
        if capacity == 0 || capacity > MAX_CACHE_CAPACITY {
            return Err(crate::error::Error::InvalidArgument(format!(
                "cache capacity {capacity} is outside 1..={MAX_CACHE_CAPACITY} bytes"
            )));
        }
        let _one_at_a_time = self.resizing.lock();
        let per_shard = capacity / self.slots.len();
        let growing = capacity > self.capacity();
        if growing {
            self.budget.store(capacity, Ordering::Release);
        }
        self.ctl.set_budget(capacity);
        for slot in self.slots.iter() {
            slot.shard
                .lock()
                .set_capacity(per_shard, &self.ctl, &slot.counters);
        }
        if !growing {
            self.budget.store(capacity, Ordering::Release);
        }
        Ok(())
    }

    /// Block lookups that found their block.
    pub fn hits(&self) -> u64 {
        self.sum(|c| &c.block_hits)
    }

    /// Block lookups that missed.
    pub fn misses(&self) -> u64 {
        self.sum(|c| &c.block_lookups).saturating_sub(self.hits())
    }

    fn sum(&self, f: impl Fn(&ShardCounters) -> &AtomicU64) -> u64 {
        self.slots
            .iter()
            .map(|s| f(&s.counters).load(Ordering::Relaxed))
            .sum()
    }

    /// Sizes, targets, hit rates and ghost figures of every component.
    pub fn stats(&self) -> AdaptiveCacheStats {
        // The budget before and after the shards are read: a resize meanwhile raises it
        // before growing shards and lowers it after shrinking them, so the larger of the
        // two bounds every usage read in between.
        let budget_before = self.capacity();
        let mut st = AdaptiveCacheStats {
            mode: self.ctl.mode.to_string(),
            capacity: budget_before,
            shards: self.slots.len(),
            ghosts_on: self.ctl.ghosts_on(),
            ghost_turnoffs: self.ctl.turnoffs.load(Ordering::Relaxed),
            metadata_miss: self.ctl.metadata_miss(),
            ghost_turnons: self.ctl.turnons.load(Ordering::Relaxed),
            inserts_aborted: self.aborted.load(Ordering::Relaxed),
            stale_pointers: self.stale_pointers.load(Ordering::Relaxed),
            flush_updates: self.flush_updates.load(Ordering::Relaxed),
            ..Default::default()
        };
        let mut targets = [0.0f64; 3];
        for slot in self.slots.iter() {
            let s = slot.shard.lock();
            st.usage += s.usage();
            st.ghost_bytes += s.ghost_memory();
            let t = self.ctl.targets(if self.ctl.fixed().is_some() {
                s.capacity()
            } else {
                s.real_capacity()
            });
            targets[0] += t.kv;
            targets[1] += t.kp;
            targets[2] += t.block;
            let g = s.ghost_sizes();
            for (comp, c, gv) in [
                (Comp::Kv, &mut st.kv, g[0]),
                (Comp::Kp, &mut st.kp, g[1]),
                (Comp::Block, &mut st.block, g[3]),
            ] {
                c.bytes += s.bytes(comp);
                c.entries += s.entries(comp);
                c.ghost_virtual_bytes += gv;
            }
            st.point_ghost_virtual_bytes += g[2];
        }
        st.capacity = st.capacity.max(self.capacity());
        st.kv.target = targets[0] as usize;
        st.kp.target = targets[1] as usize;
        st.block.target = targets[2] as usize;
        let point_lookups = self.sum(|c| &c.point_lookups);
        let rate = |h: u64, n: u64| if n == 0 { 0.0 } else { h as f64 / n as f64 };
        st.kv.hits = self.sum(|c| &c.kv_hits);
        st.kv.lookups = point_lookups;
        st.kv.hit_rate = rate(st.kv.hits, point_lookups);
        st.kv.ghost_hits = self.sum(|c| &c.g_kv_hits);
        st.kv.evictions = self.sum(|c| &c.kv_evictions);
        st.kp.hits = self.sum(|c| &c.kp_hits);
        st.kp.lookups = point_lookups;
        st.kp.hit_rate = rate(st.kp.hits, point_lookups);
        st.kp.ghost_hits = self.sum(|c| &c.g_kp_hits);
        st.kp.evictions = self.sum(|c| &c.kp_evictions);
        st.block.hits = self.hits();
        st.block.lookups = self.sum(|c| &c.block_lookups);
        st.block.hit_rate = rate(st.block.hits, st.block.lookups);
        st.block.ghost_hits = self.sum(|c| &c.g_block_hits);
        st.block.evictions = self.sum(|c| &c.block_evictions);
        st.point_ghost_hits = self.sum(|c| &c.g_point_hits);
        st.promotions = self.sum(|c| &c.promotions);
        st.rejected = self.sum(|c| &c.rejected);
        st
    }
}

impl crate::sst::BlockCache for Cache {
    fn get_block(&self, file: u64, offset: u64) -> Option<Block> {
        Cache::get_block(self, file, offset)
    }

    fn insert_block(&self, file: u64, offset: u64, block: Block) {
        Cache::insert_block(self, file, offset, block)
    }

    fn holds_block(&self, file: u64, offset: u64) -> bool {
        Cache::holds_block(self, file, offset)
    }
}

#[cfg(test)]
mod tests;

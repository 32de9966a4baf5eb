//! One shard of the cache: its share of the budget holding KV, KP and block entries and the
//! four ghost caches, under one mutex. Owns the per-shard mechanics of HAC: lookups (and
//! the ghost hits they report to the controller), admission, KP-to-KV promotion, the
//! choice of which component gives up space (the "actual boundary" of §4.3), eviction into
//! the ghosts, ghost sizing (equations 4 and 5) and the flush updates.
//!
//! The shard's usage (real entries plus ghost records) never exceeds its capacity; the
//! shards' capacities add up to at most the budget (invariant 4, docs/DESIGN.md).

use super::adaptive::{Comp, Controller, Targets};
use super::block::BlockEntry;
use super::elru::Store;
use super::ghost::Ghost;
use super::point::{BlockPtr, Kind, PointEntry, POINTER_SIZE};
use crate::sst::block::Block;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Point store lists.
const KV: u8 = 0;
const KP: u8 = 1;

/// Counters of one shard. Bumped under the shard's lock with a plain load and store (no
/// locked instruction on the hot path), read without it by the stats and the turn-off
/// windows.
#[derive(Default)]
pub(crate) struct ShardCounters {
    pub kv_hits: AtomicU64,
    pub kp_hits: AtomicU64,
    pub point_lookups: AtomicU64,
    pub block_hits: AtomicU64,
    pub block_lookups: AtomicU64,
    pub g_kv_hits: AtomicU64,
    pub g_kp_hits: AtomicU64,
    pub g_point_hits: AtomicU64,
    pub g_block_hits: AtomicU64,
    pub kv_evictions: AtomicU64,
    pub kp_evictions: AtomicU64,
    pub block_evictions: AtomicU64,
    pub promotions: AtomicU64,
    pub rejected: AtomicU64,
}

pub(crate) fn bump(c: &AtomicU64) {
    c.store(c.load(Relaxed) + 1, Relaxed);
}

/// What a point lookup found.
#[derive(Debug, PartialEq, Eq)]
pub enum PointLookup {
    /// The value (KV hit, or a KP entry holding its value inline).
    Value(Vec<u8>),
    /// A KP hit: the data block holding the newest version.
    Pointer(BlockPtr),
    /// Not cached; `warm` when a ghost remembered the key (it then enters the KV cache).
    Miss {
        /// A ghost hit, or the key's KP pointer turned out stale.
        warm: bool,
    },
}

/// What a flush did to a key's entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FlushOutcome {
    NotCached,
    /// Given the new value, or dropped for a tombstone.
    Updated,
    /// A KP entry that must point at the new table.
    Repoint,
}

/// One shard.
pub(crate) struct Shard {
    capacity: usize,
    points: Store<PointEntry, 2>,
    blocks: Store<BlockEntry, 1>,
    g_kv: Ghost<u32>,
    g_kp: Ghost<u32>,
    g_point: Ghost<u32>,
    g_block: Ghost<(u64, u64)>,
    /// Lookups served, to pace the turn-off windows.
    pub lookups: u64,
}

fn fingerprint(hash: u64) -> u32 {
    hash as u32
}

impl Shard {
    pub fn new(capacity: usize) -> Shard {
        Shard {
            capacity,
            points: Store::default(),
            blocks: Store::default(),
            g_kv: Ghost::default(),
            g_kp: Ghost::default(),
            g_point: Ghost::default(),
            g_block: Ghost::default(),
            lookups: 0,
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn bytes(&self, c: Comp) -> usize {
        match c {
            Comp::Kv => self.points.lists[KV as usize].bytes,
            Comp::Kp => self.points.lists[KP as usize].bytes,
            Comp::Block => self.blocks.lists[0].bytes,
        }
    }

    pub fn entries(&self, c: Comp) -> usize {
        match c {
            Comp::Kv => self.points.lists[KV as usize].len,
            Comp::Kp => self.points.lists[KP as usize].len,
            Comp::Block => self.blocks.lists[0].len,
        }
    }

    /// Bytes the ghost records take.
    pub fn ghost_memory(&self) -> usize {
        self.g_kv.memory() + self.g_kp.memory() + self.g_point.memory() + self.g_block.memory()
    }

    /// Virtual sizes of the ghosts: KV, KP, point, block.
    pub fn ghost_sizes(&self) -> [usize; 4] {
        [
            self.g_kv.virtual_size(),
            self.g_kp.virtual_size(),
            self.g_point.virtual_size(),
            self.g_block.virtual_size(),
        ]
    }

    /// Everything charged: real entries and ghost records.
    pub fn usage(&self) -> usize {
        self.bytes(Comp::Kv) + self.bytes(Comp::Kp) + self.bytes(Comp::Block) + self.ghost_memory()
    }

    /// The capacity left for real entries.
    pub fn real_capacity(&self) -> usize {
        self.capacity.saturating_sub(self.ghost_memory())
    }

    /// Drops the ghosts when the controller turned them off.
    fn sync_ghosts(&mut self, ctl: &Controller) {
        if !ctl.ghosts_on() && self.ghost_memory() > 0 {
            self.g_kv.clear();
            self.g_kp.clear();
            self.g_point.clear();
            self.g_block.clear();
        }
    }

    fn efficiency(ctl: &Controller, kind: Kind, level: u8, charge: u32) -> f32 {
        let b = match kind {
            Kind::KpPtr(_) => ctl.kp_saved_ios(level),
            Kind::Kv | Kind::KpInline => ctl.f(level),
        };
        b / charge.max(1) as f32
    }

    fn find_point(&self, key: &[u8], hash: u64) -> Option<u32> {
        self.points.find(hash, |e| e.key() == key)
    }

    /// Appends the keys of the KV and KP entries found below `level` to `out`.
    pub fn point_keys_below(&self, level: u8, out: &mut Vec<bytes::Bytes>) {
        out.extend(
            self.points
                .entries()
                .filter(|e| e.level > level)
                .map(|e| bytes::Bytes::copy_from_slice(e.key())),
        );
    }

    /// True when the point caches hold `key`'s value (a KV entry, or a KP entry inlining
    /// it). Counts nothing and touches nothing: a peek before a lookup that must not be
    /// counted twice.
    pub fn holds_value(&self, key: &[u8], hash: u64) -> bool {
        self.find_point(key, hash)
            .is_some_and(|i| self.points.node(i).val.value().is_some())
    }

    /// The block pointer a KP entry of `key` holds, if any: counts and touches nothing
    /// (as [`Shard::holds_value`]).
    pub fn peek_pointer(&self, key: &[u8], hash: u64) -> Option<BlockPtr> {
        self.find_point(key, hash)
            .and_then(|i| match self.points.node(i).val.kind {
                Kind::KpPtr(p) => Some(p),
                _ => None,
            })
    }

    /// True when the block is cached: counts and touches nothing.
    pub fn holds_block(&self, file: u64, offset: u64, hash: u64) -> bool {
        self.blocks
            .find(hash, |b| b.file == file && b.offset == offset)
            .is_some()
    }

    /// Looks a key up in the KV and KP caches (AC-Key §4.1.1 cases I-III).
    pub fn lookup_point(
        &mut self,
        key: &[u8],
        hash: u64,
        ctl: &Controller,
        c: &ShardCounters,
    ) -> PointLookup {
        self.sync_ghosts(ctl);
        self.lookups += 1;
        bump(&c.point_lookups);
        if let Some(i) = self.find_point(key, hash) {
            let n = self.points.node(i);
            let kind = n.val.kind;
            let value = n.val.value().map(|v| v.to_vec());
            match (kind, value) {
                (Kind::Kv, Some(v)) => {
                    bump(&c.kv_hits);
                    self.points.touch(i);
                    return PointLookup::Value(v);
                }
                (Kind::KpInline, Some(v)) => {
                    bump(&c.kp_hits);
                    if ctl.promotes() {
                        // The value is at hand: the second hit moves it to KV at once.
                        let (charge, level) = (n.charge, n.val.level);
                        let e = Self::efficiency(ctl, Kind::Kv, level, charge);
                        self.points.relist(i, KV, charge, e);
                        self.points
                            .update(i, charge, e, |entry| entry.kind = Kind::Kv);
                        bump(&c.promotions);
                        // The move changes no total, but a fixed split keeps KV within
                        // its own share (else KP refills behind it and the shard
                        // overflows; found by the budget test). No-op when adaptive.
                        self.make_room(Comp::Kv, 0, ctl, c);
                    } else {
                        self.points.touch(i);
                    }
                    return PointLookup::Value(v);
                }
                (Kind::KpPtr(p), _) => {
                    bump(&c.kp_hits);
                    self.points.touch(i);
                    return PointLookup::Pointer(p);
                }
                // A KV entry always holds its value.
                (_, None) => {}
            }
        }
        let mut warm = false;
        if ctl.ghosts_on() {
            let fp = fingerprint(hash);
            // Lower level first, then the upper (§4.3.2).
            if let Some((_, e)) = self.g_kv.take(&fp) {
                bump(&c.g_kv_hits);
                ctl.move_lower(true, e);
                warm = true;
            }
            if let Some((_, e)) = self.g_kp.take(&fp) {
                bump(&c.g_kp_hits);
                ctl.move_lower(false, e);
                warm = true;
            }
            if let Some((_, e)) = self.g_point.take(&fp) {
                bump(&c.g_point_hits);
                ctl.move_upper(true, e);
                warm = true;
            }
        }
        PointLookup::Miss { warm }
    }

    /// Caches a key found on the normal read path (case III, or a ghost hit).
    #[allow(clippy::too_many_arguments)]
    pub fn admit(
        &mut self,
        key: &[u8],
        hash: u64,
        value: &[u8],
        level: u8,
        ptr: Option<BlockPtr>,
        warm: bool,
        ctl: &Controller,
        c: &ShardCounters,
    ) {
        if let Some(i) = self.find_point(key, hash) {
            // Another reader cached it meanwhile, from the same state (no flush since).
            self.points.touch(i);
            return;
        }
        let Some(comp) = ctl.admission(warm) else {
            return;
        };
        let entry = match comp {
            Comp::Kv => PointEntry::new(key, Some(value), hash, level, Kind::Kv),
            _ if value.len() <= POINTER_SIZE => {
                PointEntry::new(key, Some(value), hash, level, Kind::KpInline)
            }
            _ => match ptr {
                Some(p) => PointEntry::new(key, None, hash, level, Kind::KpPtr(p)),
                // Found where no pointer can lead (the promotion cache).
                None => return,
            },
        };
        self.insert_point(entry, comp, ctl, c);
    }

    fn insert_point(&mut self, entry: PointEntry, comp: Comp, ctl: &Controller, c: &ShardCounters) {
        let charge = entry.charge();
        let e = Self::efficiency(ctl, entry.kind, entry.level, charge);
        if !self.make_room(comp, charge as usize, ctl, c) {
            bump(&c.rejected);
            return;
        }
        let list = if comp == Comp::Kv { KV } else { KP };
        self.points.insert(entry, list, charge, e);
        self.trim_ghosts(ctl);
        // Last in every caller: no node index is held across the renumbering.
        self.compact_stores();
    }

    /// Gives back slab slots a shrunken component left (see `Store::compact_if_sparse`):
    /// they are memory no charge accounts for.
    fn compact_stores(&mut self) {
        self.points.compact_if_sparse();
        self.blocks.compact_if_sparse();
    }

    /// A KP hit whose block gave `value`: moves the key to the KV cache (§4.1.1 case II),
    /// unless its entry changed since (then the newer entry stays).
    pub fn upgrade_to_value(
        &mut self,
        key: &[u8],
        hash: u64,
        value: &[u8],
        ptr: BlockPtr,
        ctl: &Controller,
        c: &ShardCounters,
    ) {
        let Some(i) = self.find_point(key, hash) else {
            return;
        };
        if self.points.node(i).val.kind != Kind::KpPtr(ptr) || !ctl.promotes() {
            return;
        }
        let level = self.points.node(i).val.level;
        self.points.remove(i);
        bump(&c.promotions);
        let entry = PointEntry::new(key, Some(value), hash, level, Kind::Kv);
        self.insert_point(entry, Comp::Kv, ctl, c);
    }

    /// Drops a KP entry whose pointer led nowhere (its file was compacted away).
    pub fn forget(&mut self, key: &[u8], hash: u64, ptr: BlockPtr) {
        if let Some(i) = self.find_point(key, hash) {
            if self.points.node(i).val.kind == Kind::KpPtr(ptr) {
                self.points.remove(i);
            }
        }
    }

    /// Flush: the key's newest version is now `value` (None: a tombstone) in the new L0
    /// table. KV entries take the value, inline KP entries too when it still fits; entries
    /// are dropped on a tombstone.
    pub fn flush_update(
        &mut self,
        key: &[u8],
        hash: u64,
        value: Option<&[u8]>,
        ctl: &Controller,
    ) -> FlushOutcome {
        let Some(i) = self.find_point(key, hash) else {
            return FlushOutcome::NotCached;
        };
        let kind = self.points.node(i).val.kind;
        let Some(v) = value else {
            self.points.remove(i);
            return FlushOutcome::Updated;
        };
        let new_kind = match kind {
            Kind::Kv => Kind::Kv,
            _ if v.len() <= POINTER_SIZE => Kind::KpInline,
            Kind::KpInline | Kind::KpPtr(_) => return FlushOutcome::Repoint,
        };
        let entry = PointEntry::new(key, Some(v), hash, 0, new_kind);
        let charge = entry.charge();
        let e = Self::efficiency(ctl, new_kind, 0, charge);
        self.points.update(i, charge, e, |old| *old = entry);
        FlushOutcome::Updated
    }

    /// Flush, second pass: points a KP entry at the new L0 table (or drops it when the
    /// block could not be found).
    pub fn repoint(&mut self, key: &[u8], hash: u64, ptr: Option<BlockPtr>, ctl: &Controller) {
        let Some(i) = self.find_point(key, hash) else {
            return;
        };
        match ptr {
            Some(p) if matches!(self.points.node(i).val.kind, Kind::KpPtr(_)) => {
                let charge = self.points.node(i).charge;
                let e = Self::efficiency(ctl, Kind::KpPtr(p), 0, charge);
                self.points.update(i, charge, e, |entry| {
                    entry.kind = Kind::KpPtr(p);
                    entry.level = 0;
                });
            }
            _ => {
                self.points.remove(i);
            }
        }
    }

    /// A new share of the budget (the cache was resized): a smaller one is enforced at
    /// once, before the lock is released, so the shard's usage is never above it.
    pub fn set_capacity(&mut self, capacity: usize, ctl: &Controller, c: &ShardCounters) {
        self.capacity = capacity;
        self.fit(ctl, c);
    }

    /// Evicts until the shard is within its capacity (after updates that grew entries, or
    /// a smaller capacity). Adaptive: the first `make_room` evicts from whichever
    /// component HAC's boundaries say until the whole shard fits, and the others find
    /// nothing to do. Fixed split: each component is held to its own share, blocks
    /// included (a flush never grows them, a resize does shrink their share).
    pub fn fit(&mut self, ctl: &Controller, c: &ShardCounters) {
        for comp in [Comp::Kv, Comp::Kp, Comp::Block] {
            self.make_room(comp, 0, ctl, c);
        }
        self.trim_ghosts(ctl);
        self.compact_stores();
    }

    /// A cached block.
    pub fn lookup_block(
        &mut self,
        file: u64,
        offset: u64,
        hash: u64,
        ctl: &Controller,
        c: &ShardCounters,
    ) -> Option<Block> {
        self.sync_ghosts(ctl);
        self.lookups += 1;
        bump(&c.block_lookups);
        if let Some(i) = self
            .blocks
            .find(hash, |b| b.file == file && b.offset == offset)
        {
            bump(&c.block_hits);
            self.blocks.touch(i);
            return Some(self.blocks.node(i).val.block.clone());
        }
        if ctl.ghosts_on() {
            if let Some((_, e)) = self.g_block.take(&(file, offset)) {
                bump(&c.g_block_hits);
                ctl.move_upper(false, e);
            }
        }
        None
    }

    /// Caches a block just read.
    pub fn insert_block(
        &mut self,
        file: u64,
        offset: u64,
        hash: u64,
        block: Block,
        ctl: &Controller,
        c: &ShardCounters,
    ) {
        if self
            .blocks
            .find(hash, |b| b.file == file && b.offset == offset)
            .is_some()
        {
            return;
        }
        let entry = BlockEntry {
            file,
            offset,
            hash,
            block,
        };
        let charge = entry.charge();
        if !self.make_room(Comp::Block, charge as usize, ctl, c) {
            bump(&c.rejected);
            return;
        }
        self.blocks.insert(entry, 0, charge, 1.0 / charge as f32);
        self.trim_ghosts(ctl);
        self.compact_stores();
    }

    /// Evicts until an entry of `charge` bytes for `comp` fits; false when it cannot.
    fn make_room(
        &mut self,
        comp: Comp,
        charge: usize,
        ctl: &Controller,
        c: &ShardCounters,
    ) -> bool {
        if let Some(shares) = ctl.fixed() {
            // Fixed split: each component lives within its own share.
            let idx = match comp {
                Comp::Kv => 0,
                Comp::Kp => 1,
                Comp::Block => 2,
            };
            let cap = (shares[idx] * self.capacity as f64) as usize;
            if charge > cap {
                return false;
            }
            while self.bytes(comp) + charge > cap {
                if !self.evict(comp, ctl, c) {
                    return false;
                }
            }
            return true;
        }
        self.sync_ghosts(ctl);
        let t = ctl.targets(self.real_capacity());
        // An entry this large would flush most of the shard for one key or block.
        if charge > self.real_capacity() / 4 {
            return false;
        }
        while self.usage() + charge > self.capacity {
            let Some(victim) = self.pick_victim(comp, charge, &t, ctl) else {
                return false;
            };
            if !self.evict(victim, ctl, c) {
                return false;
            }
        }
        true
    }

    fn nonempty(&self, c: Comp) -> Option<Comp> {
        (self.entries(c) > 0).then_some(c)
    }

    /// HAC's actual-boundary rule: which component gives up space for `comp` to grow.
    fn pick_victim(
        &self,
        comp: Comp,
        charge: usize,
        t: &Targets,
        ctl: &Controller,
    ) -> Option<Comp> {
        let (kv, kp, bl) = (
            self.bytes(Comp::Kv),
            self.bytes(Comp::Kp),
            self.bytes(Comp::Block),
        );
        // Lower level: evict from KV when the KV/KP boundary lies inside the KV cache.
        let lower = |incoming_kv: usize| {
            let (first, second) = if (kv + incoming_kv) as f64 > t.kv {
                (Comp::Kv, Comp::Kp)
            } else {
                (Comp::Kp, Comp::Kv)
            };
            self.nonempty(first).or_else(|| self.nonempty(second))
        };
        match comp {
            Comp::Block => {
                if (bl + charge) as f64 > t.block && bl > 0 {
                    Some(Comp::Block)
                } else {
                    lower(0).or_else(|| self.nonempty(Comp::Block))
                }
            }
            Comp::Kv | Comp::Kp => {
                // Hysteresis: the point cache takes a block's room only once its target
                // exceeds its size by a whole block.
                if t.point >= (kv + kp + ctl.block_unit) as f64 && bl > 0 {
                    Some(Comp::Block)
                } else {
                    let incoming_kv = if comp == Comp::Kv { charge } else { 0 };
                    lower(incoming_kv).or_else(|| self.nonempty(Comp::Block))
                }
            }
        }
    }

    /// Evicts comp's E-LRU victim, remembering it in the ghosts; false when empty.
    fn evict(&mut self, comp: Comp, ctl: &Controller, c: &ShardCounters) -> bool {
        let ghosts = ctl.ghosts_on();
        match comp {
            Comp::Kv | Comp::Kp => {
                let list = if comp == Comp::Kv { KV } else { KP };
                let Some(i) = self.points.victim(list) else {
                    return false;
                };
                let n = self.points.remove(i);
                if ghosts {
                    let fp = fingerprint(n.val.hash);
                    if comp == Comp::Kv {
                        self.g_kv.insert(fp, n.charge, n.e);
                    } else {
                        self.g_kp.insert(fp, n.charge, n.e);
                    }
                    self.g_point.insert(fp, n.charge, n.e);
                }
                bump(if comp == Comp::Kv {
                    &c.kv_evictions
                } else {
                    &c.kp_evictions
                });
            }
            Comp::Block => {
                let Some(i) = self.blocks.victim(0) else {
                    return false;
                };
                let n = self.blocks.remove(i);
                if ghosts {
                    self.g_block
                        .insert((n.val.file, n.val.offset), n.charge, n.e);
                }
                bump(&c.block_evictions);
            }
        }
        true
    }

    /// Keeps the ghosts within equations 4 and 5: |G_kv| <= S_point - |R_kv|,
    /// |G_kp| <= S_point - |R_kp|, |G_point| <= S - |R_point|, |G_block| <= S - |R_block|,
    /// with S the real capacity and S_point the point cache's size.
    fn trim_ghosts(&mut self, ctl: &Controller) {
        if !ctl.ghosts_on() {
            return;
        }
        let (kv, kp, bl) = (
            self.bytes(Comp::Kv),
            self.bytes(Comp::Kp),
            self.bytes(Comp::Block),
        );
        let real = self.real_capacity();
        self.g_kv.trim(kp);
        self.g_kp.trim(kv);
        self.g_point.trim(real.saturating_sub(kv + kp));
        self.g_block.trim(real.saturating_sub(bl));
    }
}

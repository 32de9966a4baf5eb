//! Database counters and the [`DbStats`] report. Counters are relaxed atomics: they
//! describe the store, they never steer it.

use super::DbInner;
use crate::cache::Cache;
use crate::env::{CauseIo, DeviceProfile, IoCause, IoStatsSnapshot, Tier};
use crate::options::MAX_LEVELS;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Live counters, bumped on the hot paths.
#[derive(Default)]
pub(crate) struct Counters {
    pub puts: AtomicU64,
    pub deletes: AtomicU64,
    pub write_batches: AtomicU64,
    pub write_groups: AtomicU64,
    pub user_bytes_written: AtomicU64,
    pub gets: AtomicU64,
    pub get_memtable: AtomicU64,
    pub get_block_cache: AtomicU64,
    pub get_kv_cache: AtomicU64,
    pub get_kp_cache: AtomicU64,
    pub get_fast: AtomicU64,
    pub get_slow: AtomicU64,
    pub get_not_found: AtomicU64,
    pub flushes: AtomicU64,
    pub flush_bytes_written: AtomicU64,
    pub flush_entries_dropped: AtomicU64,
    pub compactions: AtomicU64,
    pub trivial_moves: AtomicU64,
    pub compaction_bytes_read: AtomicU64,
    pub compaction_bytes_written: AtomicU64,
    /// Bytes compactions out of each level read and wrote (index: the level compacted).
    pub compaction_level_read: [AtomicU64; MAX_LEVELS],
    pub compaction_level_written: [AtomicU64; MAX_LEVELS],
    pub compaction_entries_dropped: AtomicU64,
    pub expired_entries_removed: AtomicU64,
    pub expiry_compactions: AtomicU64,
    pub defragment_compactions: AtomicU64,
    pub scanned_level0_compactions: AtomicU64,
    pub defragment_bytes_written: AtomicU64,
    pub compaction_blocks_reused: AtomicU64,
    pub compaction_bytes_reused: AtomicU64,
    pub compaction_blocks_rewritten: AtomicU64,
    pub compaction_bytes_rewritten: AtomicU64,
    pub compaction_pushdown_bytes: AtomicU64,
    pub write_stalls: AtomicU64,
    pub write_stall_micros: AtomicU64,
    pub write_slowdowns: AtomicU64,
    pub get_promotion_cache: AtomicU64,
    pub promoted_by_flush_bytes: AtomicU64,
    pub promoted_by_compaction_bytes: AtomicU64,
    pub retained_bytes: AtomicU64,
    pub checker_runs: AtomicU64,
    pub checker_dropped_newer: AtomicU64,
    pub checker_put_back: AtomicU64,
    pub rmws: AtomicU64,
    pub rmw_retries: AtomicU64,
    pub promotion_cache_full: AtomicU64,
    pub checker_stale: AtomicU64,
}

impl Counters {
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Relaxed);
    }

    /// Where gets found their answer, so far.
    pub fn get_sources(&self) -> GetSources {
        GetSources {
            memtable: self.get_memtable.load(Relaxed),
            block_cache: self.get_block_cache.load(Relaxed),
            kv_cache: self.get_kv_cache.load(Relaxed),
            kp_cache: self.get_kp_cache.load(Relaxed),
            promotion_cache: self.get_promotion_cache.load(Relaxed),
            fast: self.get_fast.load(Relaxed),
            slow: self.get_slow.load(Relaxed),
            not_found: self.get_not_found.load(Relaxed),
        }
    }
}

/// Where gets found their answer.
#[derive(Clone, Debug, Default, Serialize)]
pub struct GetSources {
    /// Answered by a memtable.
    pub memtable: u64,
    /// Answered by table files without any disk read (block cache).
    pub block_cache: u64,
    /// Answered by the KV cache.
    pub kv_cache: u64,
    /// Answered through a KP cache pointer without any disk read (a KP hit whose block
    /// was read from disk counts as `fast` or `slow`).
    pub kp_cache: u64,
    /// Answered by the promotion cache (records read from the slow tier earlier).
    pub promotion_cache: u64,
    /// Answered by a table on the fast tier, reading the disk.
    pub fast: u64,
    /// Answered by a table on the slow tier, reading the disk.
    pub slow: u64,
    /// The key was not found anywhere.
    pub not_found: u64,
}

impl GetSources {
    /// Gets answered from memory without a disk read: memtable, KV cache, KP pointers into
    /// cached blocks, block cache.
    pub fn memory_hits(&self) -> u64 {
        self.memtable + self.kv_cache + self.kp_cache + self.block_cache
    }

    /// Share of found gets that did not read the slow disk: (memtable + caches +
    /// promotion cache + fast) / (the same + slow). Misses are left out: they say nothing
    /// about placement.
    pub fn fd_hit_rate(&self) -> f64 {
        let fd = self.memory_hits() + self.promotion_cache + self.fast;
        let all = fd + self.slow;
        if all == 0 {
            0.0
        } else {
            fd as f64 / all as f64
        }
    }
}

/// One level's shape.
#[derive(Clone, Debug, Serialize)]
pub struct LevelStats {
    /// Level number.
    pub level: usize,
    /// Tier of its files.
    pub tier: Tier,
    /// Number of files.
    pub files: usize,
    /// Total file bytes (disk space, a semi-sorted table's garbage included).
    pub bytes: u64,
    /// The bytes compared with the target: `bytes` less the garbage and the key lists of
    /// semi-sorted tables (`FileMeta::sized_bytes`; equal to `bytes` on a level of sorted
    /// tables).
    pub sized_bytes: u64,
    /// Target bytes as the compaction picker sets them now: L0's is its byte trigger,
    /// which grows into the fast-disk budget the WALs and the other fast levels leave
    /// free (`CompactionOptions::fill_fast_budget`).
    pub target_bytes: u64,
    /// Bytes compactions out of this level (into the next, or kept on it by retention and
    /// promotion) read since open: its inputs and the next level's overlapping files.
    pub compaction_read_bytes: u64,
    /// Bytes those compactions wrote since open: where write amplification comes from,
    /// level by level.
    pub compaction_write_bytes: u64,
}

/// Block cache figures.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CacheStats {
    /// Capacity in bytes.
    pub capacity: usize,
    /// Bytes in use.
    pub usage: usize,
    /// Lookups that found the block.
    pub hits: u64,
    /// Lookups that read the disk.
    pub misses: u64,
}

impl CacheStats {
    /// hits / (hits + misses).
    pub fn hit_rate(&self) -> f64 {
        let all = self.hits + self.misses;
        if all == 0 {
            0.0
        } else {
            self.hits as f64 / all as f64
        }
    }
}

/// A snapshot of everything the store counts, from [`crate::Db::stats`].
#[derive(Clone, Debug, Serialize)]
pub struct DbStats {
    /// Put operations (batch entries included).
    pub puts: u64,
    /// Delete operations (batch entries included).
    pub deletes: u64,
    /// Write calls (each `put`, `delete` or `write` is one).
    pub write_batches: u64,
    /// WAL records written (one per group commit).
    pub write_groups: u64,
    /// Key plus value bytes written by users.
    pub user_bytes_written: u64,
    /// Point lookups.
    pub gets: u64,
    /// Where they were answered.
    pub get_sources: GetSources,
    /// Share of found gets that did not read the slow disk.
    pub fd_hit_rate: f64,
    /// Memtable flushes.
    pub flushes: u64,
    /// Bytes written by flushes.
    pub flush_bytes_written: u64,
    /// Memtable entries flushes dropped: versions a newer version of the same key in the
    /// memtable hides from every snapshot.
    pub flush_entries_dropped: u64,
    /// Compactions run (trivial moves included).
    pub compactions: u64,
    /// Compactions that only re-linked a file.
    pub trivial_moves: u64,
    /// Bytes read by compactions.
    pub compaction_bytes_read: u64,
    /// Bytes written by compactions.
    pub compaction_bytes_written: u64,
    /// Entries compactions dropped (shadowed versions, dead tombstones).
    pub compaction_entries_dropped: u64,
    /// Expired records flushes and compactions rewrote as tombstones (or dropped with
    /// the tombstone where it hid nothing).
    pub expired_entries_removed: u64,
    /// Compactions the expiry sweep picked (a table whose estimated expired share passed
    /// `CompactionOptions::expired_share_trigger`).
    pub expiry_compactions: u64,
    /// Compactions scan defragmentation picked (a semi-sorted table rewritten in place
    /// once its scans' extra reads paid for it, `CompactionOptions::defragment_scanned`).
    pub defragment_compactions: u64,
    /// Bytes those compactions wrote (included in `compaction_bytes_written`).
    pub defragment_bytes_written: u64,
    /// L0 compactions user scans' reads of L0 triggered before L0 reached its size
    /// trigger (`CompactionOptions::compact_scanned_level0`).
    pub scanned_level0_compactions: u64,
    /// Expiring records in the live tables (expired or not), from their properties.
    pub expiring_entries: u64,
    /// Data blocks compactions copied from an input as stored (block reuse).
    pub compaction_blocks_reused: u64,
    /// Their bytes (trailers included).
    pub compaction_bytes_reused: u64,
    /// Bytes of tables compactions wrote below their output level (preemptive
    /// pushdown, `CompactionOptions::preemptive_pushdown`).
    pub compaction_pushdown_bytes: u64,
    /// Data blocks compactions encoded anew from entries.
    pub compaction_blocks_rewritten: u64,
    /// Their bytes (trailers included).
    pub compaction_bytes_rewritten: u64,
    /// Times a write waited for flush or compaction to catch up.
    pub write_stalls: u64,
    /// Total time writes spent stalled, in microseconds.
    pub write_stall_micros: u64,
    /// Writes delayed by 1 ms because L0 is filling up.
    pub write_slowdowns: u64,
    /// Read-modify-writes applied.
    pub rmws: u64,
    /// Read-modify-write attempts retried because another write to the key raced them.
    pub rmw_retries: u64,
    /// Per-level shape.
    pub levels: Vec<LevelStats>,
    /// Bytes of table files on the fast tier.
    pub fast_tier_bytes: u64,
    /// Bytes of the live WALs (of the memtables not yet flushed), also on the fast tier.
    pub wal_bytes: u64,
    /// Bytes of table files on the slow tier.
    pub slow_tier_bytes: u64,
    /// Bytes of the slow tier's semi-sorted tables that are garbage until the table is
    /// rewritten (dirty blocks and earlier generations' metadata), as the manifest
    /// records them.
    pub slow_tier_dirty_bytes: u64,
    /// Slow-tier space amplification: table bytes over valid bytes (1.0 with sorted
    /// tables only; semi-sorted tables are rewritten before half of one is dirty).
    pub slow_tier_space_amp: f64,
    /// Slow-tier tables holding dirty blocks (semi-sorted tables a merge appended to).
    pub slow_tier_dirty_tables: u64,
    /// Reads user scans spent on the live tables beyond one per readahead window because
    /// the window's blocks lay in several places of the file (semi-sorted tables'
    /// appended generations; counted in this process). Scan defragmentation rewrites a
    /// table once its share pays for the rewrite (`CompactionOptions::defragment_scanned`).
    pub split_scan_reads: u64,
    /// Configured fast-tier budget.
    pub fd_budget: Option<u64>,
    /// The fast tier's device profile in force (`Db::set_device_profile` changes it;
    /// `none`: not emulated).
    pub fast_device: DeviceProfile,
    /// The slow tier's device profile in force (`None`: the store has no slow tier).
    pub slow_device: Option<DeviceProfile>,
    /// The whole cache's budget and usage (all components and ghosts), with the block
    /// component's hits and misses; `cache` has every component's figures.
    pub cache_total: CacheStats,
    /// The KV, KP and block caches: sizes, targets, hit rates, ghosts.
    pub cache: crate::cache::AdaptiveCacheStats,
    /// Bytes of index and filter blocks held by open tables.
    pub table_memory: usize,
    /// Table-cache misses: tables opened and the bytes their opening read, by tier.
    pub table_opens: crate::version::TableOpenStats,
    /// Memory by component against the memory budget (or the components' own limits).
    pub memory: crate::memory::MemoryStats,
    /// Bytes in the mutable memtable.
    pub memtable_bytes: usize,
    /// Immutable memtables awaiting flush.
    pub immutable_memtables: usize,
    /// Last sequence number visible to readers.
    pub last_sequence: u64,
    /// An estimate of the live keys: entries in table files and memtables less tombstones.
    /// Versions of one key not yet merged by compaction count once each, and a tombstone
    /// hides a put elsewhere, so the true count can be lower; DBSIZE-like exact counts need
    /// a scan. Like the table sizes, it describes the store, not this process.
    pub estimated_keys: u64,
    /// I/O by tier and cause.
    pub io: IoStatsSnapshot,
    /// Hot-record retention and promotion.
    pub promotion: PromotionStats,
    /// The fast disk's record cache (`None`: the store keeps none).
    pub record_cache: Option<crate::record_cache::RecordCacheStats>,
}

/// Table bytes over the valid ones (1.0 for an empty tier).
fn space_amp(bytes: u64, dirty: u64) -> f64 {
    let valid = bytes.saturating_sub(dirty);
    if valid == 0 {
        1.0
    } else {
        bytes as f64 / valid as f64
    }
}

impl DbStats {
    /// Bytes background work (flush, compaction, promotion, the hotness tracker; see
    /// [`IoCause::BACKGROUND`]) read and wrote on `tier` since open.
    pub fn background_io(&self, tier: Tier) -> CauseIo {
        self.io.tier(tier).sum(&IoCause::BACKGROUND)
    }

    /// Write amplification of `tier`: background bytes written there per key and value
    /// byte users wrote since open (`None` before any write). The WAL is not counted.
    pub fn write_amplification(&self, tier: Tier) -> Option<f64> {
        (self.user_bytes_written > 0)
            .then(|| self.background_io(tier).write_bytes as f64 / self.user_bytes_written as f64)
    }

    /// Background bytes read on `tier` per user byte written (`None` before any write).
    pub fn read_amplification(&self, tier: Tier) -> Option<f64> {
        (self.user_bytes_written > 0)
            .then(|| self.background_io(tier).read_bytes as f64 / self.user_bytes_written as f64)
    }
}

/// What HotRAP's machinery did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PromotionStats {
    /// Promotion is active (enabled, two tiers, not all on the fast tier).
    pub active: bool,
    /// Bytes held by the promotion cache.
    pub cache_bytes: usize,
    /// Records read from the slow tier and cached.
    pub cache_inserts: u64,
    /// Inserts aborted by the concurrency check (HotRAP §3.3).
    pub cache_inserts_aborted: u64,
    /// Bytes (keys + values) promoted to L0 by the checker.
    pub promoted_by_flush_bytes: u64,
    /// Bytes promoted to the last fast level by compactions.
    pub promoted_by_compaction_bytes: u64,
    /// Bytes kept on the last fast level by compactions into the slow tier.
    pub retained_bytes: u64,
    /// Frozen promotion caches the checker processed.
    pub checker_runs: u64,
    /// Hot records the checker dropped because a newer version exists.
    pub checker_dropped_newer: u64,
    /// Checker runs whose hot records were too few and went back to the cache.
    pub checker_put_back: u64,
    /// Hot records the checker dropped because they were written, or taken by a compaction
    /// into the slow tier, while their promotion file was being written.
    pub checker_stale: u64,
    /// Slow-tier reads not cached because the promotion cache was at its memory cap.
    pub cache_full: u64,
    /// The store still reads back the keys its last run or its checkpoint listed
    /// (`PCKEYS`: the slow tier's records served from memory there).
    pub warming: bool,
    /// Keys of that list read back since open.
    pub warm_keys_read: u64,
    /// The hotness tracker, when it is RALT.
    pub ralt: Option<crate::hot::ralt::RaltStats>,
    /// The hotness tracker, when it is the bloom cascade.
    pub bloom_tracker: Option<crate::hot::cascade::BloomCascadeStats>,
}

/// Table entries less tombstones, plus memtable entries (memtable tombstones are not
/// counted separately: they are few and the figure is an estimate).
fn estimate_keys(sv: &super::SuperVersion) -> u64 {
    let tables: u64 = sv
        .version
        .levels
        .iter()
        .flatten()
        .map(|f| f.info.num_entries.saturating_sub(f.info.num_deletions))
        .sum();
    let memtables: usize = std::iter::once(&sv.mem)
        .chain(sv.imms.iter())
        .map(|m| m.len())
        .sum();
    tables.saturating_add(u64::try_from(memtables).unwrap_or(u64::MAX))
}

impl DbInner {
    /// The [`DbStats`] report: counters, levels, cache, memory and promotion.
    pub(super) fn stats(&self) -> DbStats {
        use std::sync::atomic::Ordering::Relaxed;
        let c = &self.counters;
        let get_sources = c.get_sources();
        let sv = self.reads.sv.load();
        let v = &sv.version;
        let wal_bytes: u64 = std::iter::once(&sv.mem)
            .chain(&sv.imms)
            .map(|m| m.wal_bytes())
            .sum();
        let occ = crate::compaction::picker::Occupancy {
            wal_bytes,
            hot_bytes: self.retained_hot_bytes(),
        };
        let levels = self.level_stats(v, occ);
        let cache = self
            .tables
            .cache()
            .map(|c: &Arc<Cache>| c.stats())
            .unwrap_or_default();
        let ralt_stats = self.hot.tracker.as_ref().and_then(|r| r.ralt_stats());
        let bloom_stats = self.hot.tracker.as_ref().and_then(|r| r.bloom_stats());
        let tracker_bytes = ralt_stats
            .as_ref()
            .map(|s| s.memory_bytes + s.run_memory_bytes)
            .or(bloom_stats.as_ref().map(|s| s.memory_bytes))
            .unwrap_or(0);
        let memory = self.memory_stats(
            &sv,
            &cache,
            usize::try_from(tracker_bytes).unwrap_or(usize::MAX),
        );
        let (mut slow_dirty, mut slow_semi) = (0, 0);
        for (_, f) in v.all_files().filter(|(_, f)| f.tier == Tier::Slow) {
            slow_dirty += f.info.garbage_bytes;
            slow_semi += u64::from(f.info.garbage_bytes > 0);
        }
        let split_scan_reads = v
            .all_files()
            .map(|(_, f)| f.scan_reads.split.load(Relaxed))
            .sum();
        let cache_total = CacheStats {
            capacity: cache.capacity,
            usage: cache.usage,
            hits: cache.block.hits,
            misses: cache.block.lookups - cache.block.hits,
        };
        DbStats {
            puts: c.puts.load(Relaxed),
            deletes: c.deletes.load(Relaxed),
            write_batches: c.write_batches.load(Relaxed),
            write_groups: c.write_groups.load(Relaxed),
            user_bytes_written: c.user_bytes_written.load(Relaxed),
            gets: c.gets.load(Relaxed),
            fd_hit_rate: get_sources.fd_hit_rate(),
            get_sources,
            flushes: c.flushes.load(Relaxed),
            flush_bytes_written: c.flush_bytes_written.load(Relaxed),
            flush_entries_dropped: c.flush_entries_dropped.load(Relaxed),
            compactions: c.compactions.load(Relaxed),
            trivial_moves: c.trivial_moves.load(Relaxed),
            compaction_bytes_read: c.compaction_bytes_read.load(Relaxed),
            compaction_bytes_written: c.compaction_bytes_written.load(Relaxed),
            compaction_entries_dropped: c.compaction_entries_dropped.load(Relaxed),
            expired_entries_removed: c.expired_entries_removed.load(Relaxed),
            expiry_compactions: c.expiry_compactions.load(Relaxed),
            defragment_compactions: c.defragment_compactions.load(Relaxed),
            defragment_bytes_written: c.defragment_bytes_written.load(Relaxed),
            scanned_level0_compactions: c.scanned_level0_compactions.load(Relaxed),
            expiring_entries: v.all_files().map(|(_, f)| f.info.expiry.count).sum(),
            compaction_blocks_reused: c.compaction_blocks_reused.load(Relaxed),
            compaction_bytes_reused: c.compaction_bytes_reused.load(Relaxed),
            compaction_blocks_rewritten: c.compaction_blocks_rewritten.load(Relaxed),
            compaction_bytes_rewritten: c.compaction_bytes_rewritten.load(Relaxed),
            compaction_pushdown_bytes: c.compaction_pushdown_bytes.load(Relaxed),
            write_stalls: c.write_stalls.load(Relaxed),
            write_stall_micros: c.write_stall_micros.load(Relaxed),
            write_slowdowns: c.write_slowdowns.load(Relaxed),
            rmws: c.rmws.load(Relaxed),
            rmw_retries: c.rmw_retries.load(Relaxed),
            levels,
            fast_tier_bytes: v.tier_bytes(Tier::Fast),
            wal_bytes,
            slow_tier_bytes: v.tier_bytes(Tier::Slow),
            slow_tier_dirty_bytes: slow_dirty,
            slow_tier_space_amp: space_amp(v.tier_bytes(Tier::Slow), slow_dirty),
            slow_tier_dirty_tables: slow_semi,
            split_scan_reads,
            fd_budget: self.opts.fd_budget,
            fast_device: self.env.device_profile(Tier::Fast),
            slow_device: self
                .opts
                .slow
                .is_some()
                .then(|| self.env.device_profile(Tier::Slow)),
            cache_total,
            cache,
            table_memory: self.tables.memory_usage(),
            table_opens: self.tables.open_stats(),
            memory,
            memtable_bytes: sv.mem.approximate_size(),
            immutable_memtables: sv.imms.len(),
            last_sequence: self.reads.visible_seq.load(Relaxed),
            estimated_keys: estimate_keys(&sv),
            io: self.env.stats().snapshot(),
            promotion: self.promotion_stats(ralt_stats, bloom_stats),
            record_cache: self.tables.record_cache().map(|r| r.stats()),
        }
    }

    /// Every level's files, bytes, target and compaction traffic.
    fn level_stats(
        &self,
        v: &crate::version::Version,
        occ: crate::compaction::picker::Occupancy,
    ) -> Vec<LevelStats> {
        use std::sync::atomic::Ordering::Relaxed;
        let targets = crate::compaction::picker::level_targets(v, &self.opts, occ);
        (0..v.num_levels())
            .map(|l| LevelStats {
                level: l,
                tier: self.layout.tiers[l],
                files: v.levels[l].len(),
                bytes: v.level_bytes(l),
                sized_bytes: v.level_sized_bytes(l),
                target_bytes: targets[l],
                compaction_read_bytes: self.counters.compaction_level_read[l].load(Relaxed),
                compaction_write_bytes: self.counters.compaction_level_written[l].load(Relaxed),
            })
            .collect()
    }

    /// HotRAP's promotion cache, pathways and tracker.
    fn promotion_stats(
        &self,
        ralt: Option<crate::hot::ralt::RaltStats>,
        bloom_tracker: Option<crate::hot::cascade::BloomCascadeStats>,
    ) -> PromotionStats {
        use std::sync::atomic::Ordering::Relaxed;
        let c = &self.counters;
        PromotionStats {
            active: self.hot.tracker.is_some(),
            cache_bytes: self.hot.pc.memory_usage(),
            cache_inserts: self.hot.pc.inserted(),
            cache_inserts_aborted: self.hot.pc.aborted(),
            promoted_by_flush_bytes: c.promoted_by_flush_bytes.load(Relaxed),
            promoted_by_compaction_bytes: c.promoted_by_compaction_bytes.load(Relaxed),
            retained_bytes: c.retained_bytes.load(Relaxed),
            checker_runs: c.checker_runs.load(Relaxed),
            checker_dropped_newer: c.checker_dropped_newer.load(Relaxed),
            checker_put_back: c.checker_put_back.load(Relaxed),
            checker_stale: c.checker_stale.load(Relaxed),
            cache_full: c.promotion_cache_full.load(Relaxed),
            warming: self.hot.last_listed.warming(),
            warm_keys_read: self.hot.last_listed.keys_read(),
            ralt,
            bloom_tracker,
        }
    }

    /// Memory by component: the division's shares (or each option's own limit) and what
    /// each component holds now. `cache` and `tracker_bytes` come from the caller's
    /// snapshot of the same stats.
    pub(super) fn memory_stats(
        &self,
        sv: &super::SuperVersion,
        cache: &crate::cache::AdaptiveCacheStats,
        tracker_bytes: usize,
    ) -> crate::memory::MemoryStats {
        use crate::memory::{MemoryComponent, MemoryStats};
        let opts = &self.opts;
        let live: Vec<&std::sync::Arc<crate::memtable::MemTable>> =
            std::iter::once(&sv.mem).chain(sv.imms.iter()).collect();
        let mut memtable_bytes: usize = live.iter().map(|m| m.approximate_size()).sum();
        // Flushed memtables a frozen promotion table still holds are memory too.
        for m in self.hot.pc.held_memtables() {
            if !live.iter().any(|l| std::sync::Arc::ptr_eq(l, &m)) {
                memtable_bytes += m.approximate_size();
            }
        }
        let active = self.hot.tracker.is_some();
        let promotion_limit =
            if !active {
                Some(0)
            } else {
                // Without a limit: a mutable table of up to twice its size plus the frozen ones.
                let size = opts.promotion_cache_size();
                Some(opts.promotion.memory_limit.unwrap_or(
                    (2 + 2 * crate::hot::promotion::MAX_FROZEN_TABLES).saturating_mul(size),
                ))
            };
        let tracker_limit = if !active {
            Some(0)
        } else {
            match &self.hot.tracker.as_deref() {
                Some(crate::hot::HotTracker::Ralt(_)) => {
                    let ralt = &opts.promotion.ralt;
                    ralt.memory_limit.map(|l| {
                        usize::try_from(l.saturating_add(ralt.run_memory_limit))
                            .unwrap_or(usize::MAX)
                    })
                }
                _ => None,
            }
        };
        let memtables = MemoryComponent {
            limit: Some(
                opts.write_buffer_size
                    .saturating_mul(1 + opts.max_immutable_memtables),
            ),
            bytes: memtable_bytes,
        };
        // The capacity in force: `Db::set_cache_capacity` may have changed it since open.
        let cache = MemoryComponent {
            limit: Some(cache.capacity),
            bytes: cache.usage,
        };
        let (table_index_bytes, table_filter_bytes) = self.tables.memory_breakdown();
        let tables = MemoryComponent {
            limit: self.tables.byte_limit(),
            bytes: table_index_bytes + table_filter_bytes,
        };
        let promotion_cache = MemoryComponent {
            limit: promotion_limit,
            bytes: self.hot.pc.memory_usage(),
        };
        let tracker = MemoryComponent {
            limit: tracker_limit,
            bytes: tracker_bytes,
        };
        let total_bytes =
            memtables.bytes + cache.bytes + tables.bytes + promotion_cache.bytes + tracker.bytes;
        MemoryStats {
            // A runtime resize changes only the cache's share (`Db::set_cache_capacity`).
            budget: self
                .memory
                .map(|d| (d.budget - d.cache).saturating_add(cache.limit.unwrap_or(0))),
            memtables,
            cache,
            tables,
            table_index_bytes,
            table_filter_bytes,
            promotion_cache,
            tracker,
            total_bytes,
        }
    }
}

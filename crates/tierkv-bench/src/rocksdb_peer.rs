//! RocksDB as a peer system (feature `rocksdb-peer`): `rocksdb-tiered` keeps L0 and an
//! enlarged L1 on the fast disk through `db_paths` (the HotRAP paper's "RocksDB-fat"
//! placement) and `rocksdb-fd` keeps everything on the fast disk. Both use direct I/O and the
//! block size, block cache, bloom bits, memtable sizes and background threads tierkv gets.
//!
//! tierkv's in-engine device model cannot throttle RocksDB: run both under
//! `scripts/tiers.sh` (kernel-enforced limits, `--slow-device none --fast-dir --slow-dir`)
//! for a fair side-by-side. RocksDB does not split I/O by tier, so per-tier bytes are
//! reported as unavailable; its FD hit rate comes from its per-level get tickers. Its
//! `engine_stats` say where each level's live tables are (fast or slow directory) and the
//! fast directory's peak bytes at the runner's samples, to check the placement.

use rocksdb::statistics::Ticker;
use rocksdb::{
    BlockBasedOptions, Cache, DBCompressionType, DBPath, Direction, IteratorMode, Options,
    WriteBatch, DB,
};

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::error::{BenchError, Result};
use crate::scale::Config;
use crate::store::{Counters, Store, TierDirs};
use crate::systems::System;

/// `rocksdb-tiered`'s sizes: L1's target and the fast `db_paths` entry's target size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct TieredLayout {
    /// `max_bytes_for_level_base`: the enlarged L1 that fills the fast disk next to L0.
    l1_target: u64,
    /// The fast path's `target_size`. It only steers placement (RocksDB does not enforce
    /// it): `LevelCompactionBuilder::GetPathId` walks the levels from L0, estimating L0 as
    /// large as L1, and puts a level on the first path whose target still holds it after
    /// the levels before it. So L1 lands on the fast path only if that target covers L0's
    /// estimate plus L1's target, twice `l1_target`, even though L0 really holds about four
    /// memtables (with `budget less the WALs` as the target, L1 went to the slow disk:
    /// docs/bench/background-traffic.md).
    fast_path_target: u64,
}

impl TieredLayout {
    fn new(cfg: &Config) -> TieredLayout {
        // The WALs of RocksDB's memtables (max_write_buffer_number, 2) share the fast
        // disk, as tierkv's share its budget (`Options::fast_tier_reserve`).
        let tables = cfg.fd_budget.saturating_sub(2 * cfg.write_buffer_size);
        // L0 holds up to the compaction trigger's four flushed memtables.
        let l0_share = 4 * cfg.write_buffer_size;
        // One enlarged L1 fills the rest of the fast disk: RocksDB-fat.
        let l1_target = tables.saturating_sub(l0_share).max(cfg.level_base);
        TieredLayout {
            l1_target,
            fast_path_target: l1_target.saturating_mul(2),
        }
    }
}

/// A RocksDB store under test.
pub struct RocksStore {
    name: String,
    db: DB,
    opts: Options,
    tiered: bool,
    /// The fast directory, to tell which files live there.
    fast_dir: PathBuf,
    /// The most bytes the fast directory held (every file: tables, WALs, manifest, `LOG`)
    /// at any `counters` call since the open, i.e. at the runner's samples.
    fast_dir_peak: AtomicU64,
    /// Key and value bytes of every record written (deletes: the key), as tierkv's
    /// `user_bytes_written` counts them: the denominator of write amplification must be the
    /// same for every system. RocksDB's `BytesWritten` ticker also counts each write
    /// batch's encoding (a 12-byte header, a type byte and varint lengths per record: 11%
    /// more than the user's bytes in F2's setup of 108-byte records).
    user_bytes: AtomicU64,
    // Keeps the block cache alive as long as the store.
    _cache: Cache,
}

impl RocksStore {
    /// Opens (creating when needed) a RocksDB system's store.
    pub fn open(cfg: &Config, system: System, dirs: &TierDirs) -> Result<RocksStore> {
        let name = system.name().to_string();
        let err = |e: rocksdb::Error| BenchError::engine(&name, e);
        for d in [&dirs.fast, &dirs.slow] {
            std::fs::create_dir_all(d).map_err(|e| BenchError::io(d, e))?;
        }
        let tiered = system == System::RocksdbTiered;
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.enable_statistics();
        opts.set_compression_type(DBCompressionType::None);
        opts.set_use_direct_reads(true);
        opts.set_use_direct_io_for_flush_and_compaction(true);
        // tierkv's background threads: with RocksDB's default of 2 (one compaction thread)
        // its L1 grew to twice its target under YCSB A, holding the fast disk at about twice
        // the budget (docs/BENCHMARKS-LOG.md, 2026-11-25).
        opts.set_max_background_jobs(tierkv::Options::default().background_threads as i32);
        opts.set_write_buffer_size(cfg.write_buffer_size as usize);
        opts.set_target_file_size_base(cfg.target_file_size);
        opts.set_level_zero_file_num_compaction_trigger(4);
        opts.set_max_bytes_for_level_multiplier(10.0);
        // db_paths places levels by their static targets; dynamic level sizing would move them.
        opts.set_level_compaction_dynamic_level_bytes(false);
        if tiered {
            let layout = TieredLayout::new(cfg);
            opts.set_max_bytes_for_level_base(layout.l1_target);
            let paths = [
                DBPath::new(&dirs.fast, layout.fast_path_target).map_err(err)?,
                DBPath::new(&dirs.slow, u64::MAX / 4).map_err(err)?,
            ];
            opts.set_db_paths(&paths);
        } else {
            opts.set_max_bytes_for_level_base(cfg.level_base);
        }
        let cache = Cache::new_lru_cache(cfg.cache_size as usize);
        let mut table = BlockBasedOptions::default();
        // tierkv's read unit (its default block size), so both move the same bytes per get.
        table.set_block_size(tierkv::Options::default().block_size);
        table.set_block_cache(&cache);
        table.set_bloom_filter(10.0, false);
        // tierkv keeps index and filter blocks of open tables in memory, outside the cache.
        table.set_cache_index_and_filter_blocks(false);
        opts.set_block_based_table_factory(&table);
        let db = DB::open(&opts, &dirs.fast).map_err(err)?;
        Ok(RocksStore {
            name,
            db,
            opts,
            tiered,
            fast_dir: dirs.fast.clone(),
            fast_dir_peak: AtomicU64::new(0),
            user_bytes: AtomicU64::new(0),
            _cache: cache,
        })
    }

    fn err(&self, e: rocksdb::Error) -> BenchError {
        BenchError::engine(&self.name, e)
    }
}

impl Store for RocksStore {
    fn get(&self, key: &[u8]) -> Result<bool> {
        self.db
            .get_pinned(key)
            .map(|v| v.is_some())
            .map_err(|e| self.err(e))
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.db.put(key, value).map_err(|e| self.err(e))?;
        self.user_bytes
            .fetch_add((key.len() + value.len()) as u64, Relaxed);
        Ok(())
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        self.db.delete(key).map_err(|e| self.err(e))?;
        self.user_bytes.fetch_add(key.len() as u64, Relaxed);
        Ok(())
    }

    fn scan(&self, from: &[u8], limit: usize) -> Result<usize> {
        let mut n = 0;
        for item in self
            .db
            .iterator(IteratorMode::From(from, Direction::Forward))
        {
            if n >= limit {
                break;
            }
            let (_, v) = item.map_err(|e| self.err(e))?;
            std::hint::black_box(v.len());
            n += 1;
        }
        Ok(n)
    }

    fn write_batch(&self, records: &[(Vec<u8>, Vec<u8>)]) -> Result<()> {
        let mut b = WriteBatch::default();
        let mut bytes = 0;
        for (k, v) in records {
            b.put(k, v);
            bytes += (k.len() + v.len()) as u64;
        }
        self.db.write(b).map_err(|e| self.err(e))?;
        self.user_bytes.fetch_add(bytes, Relaxed);
        Ok(())
    }

    fn settle(&self) -> Result<()> {
        self.db.flush().map_err(|e| self.err(e))?;
        // Wait until no compaction is pending or running.
        loop {
            let pending = self
                .db
                .property_int_value("rocksdb.compaction-pending")
                .map_err(|e| self.err(e))?
                .unwrap_or(0);
            let running = self
                .db
                .property_int_value("rocksdb.num-running-compactions")
                .map_err(|e| self.err(e))?
                .unwrap_or(0);
            if pending == 0 && running == 0 {
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    fn counters(&self) -> Counters {
        if let Some(b) = dir_bytes(&self.fast_dir) {
            self.fast_dir_peak.fetch_max(b, Relaxed);
        }
        let t = |k| self.opts.get_ticker_count(k);
        let upper = t(Ticker::MemtableHit) + t(Ticker::GetHitL0) + t(Ticker::GetHitL1);
        let deep = t(Ticker::GetHitL2AndUp);
        let (gets_fd, gets_sd) = if self.tiered {
            (upper, deep)
        } else {
            (upper + deep, 0)
        };
        Counters {
            gets_fd,
            gets_sd,
            // RocksDB does not split I/O by tier.
            fd_read_bytes: None,
            fd_write_bytes: None,
            sd_read_bytes: None,
            sd_write_bytes: None,
            sd_read_ops: None,
            user_read_ios: None,
            sd_write_ops: None,
            // Both tiers together, from the kernel: every file read and write of RocksDB
            // is a system call (direct I/O, no mmap), and nothing else in the process
            // touches files during a run but a few small /proc reads per sample.
            disk_read_bytes: crate::rss::process_io().map(|io| io.read_bytes),
            disk_write_bytes: crate::rss::process_io().map(|io| io.write_bytes),
            // It never promotes or retains.
            promoted_by_flush_bytes: Some(0),
            promoted_by_compaction_bytes: Some(0),
            retained_bytes: Some(0),
            // Background writes, all tiers together: flushes and compactions.
            user_bytes_written: Some(self.user_bytes.load(Relaxed)),
            bg_write_bytes: Some(t(Ticker::FlushWriteBytes) + t(Ticker::CompactWriteBytes)),
            ..Default::default()
        }
    }

    fn engine_stats(&self) -> serde_json::Value {
        let stats = self.db.property_value("rocksdb.stats").ok().flatten();
        // Where each level's live tables are: the fast directory or the slow one (RocksDB
        // names them relative to their `db_paths` entry).
        let mut levels: Vec<[u64; 4]> = Vec::new();
        for f in self.db.live_files().unwrap_or_default() {
            let level = usize::try_from(f.level).unwrap_or(0);
            if levels.len() <= level {
                levels.resize(level + 1, [0; 4]);
            }
            let on_fast = self.fast_dir.join(f.name.trim_start_matches('/')).exists();
            let at = if on_fast { 0 } else { 2 };
            levels[level][at] += 1;
            levels[level][at + 1] += f.size as u64;
        }
        let placement: Vec<_> = levels
            .iter()
            .enumerate()
            .map(|(level, [ff, fb, sf, sb])| {
                serde_json::json!({
                    "level": level,
                    "fast_files": ff,
                    "fast_bytes": fb,
                    "slow_files": sf,
                    "slow_bytes": sb,
                })
            })
            .collect();
        serde_json::json!({
            "rocksdb.stats": stats,
            "placement": placement,
            "fast_dir_bytes": dir_bytes(&self.fast_dir),
            "fast_dir_peak_bytes": self.fast_dir_peak.load(Relaxed),
        })
    }

    fn close(self: Box<Self>) -> Result<()> {
        // Dropping the handle closes RocksDB (it flushes nothing unsynced we rely on).
        drop(self);
        Ok(())
    }
}

/// Bytes of the regular files in `dir` (not recursive: RocksDB keeps its files flat), or
/// `None` when it cannot be listed.
fn dir_bytes(dir: &Path) -> Option<u64> {
    let mut total = 0;
    for e in std::fs::read_dir(dir).ok()? {
        // A file deleted between the listing and the stat counts as gone.
        if let Ok(m) = e.ok()?.metadata() {
            if m.is_file() {
                total += m.len();
            }
        }
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RocksDB's `LevelCompactionBuilder::GetPathId` (db/compaction/compaction_picker_level.cc,
    /// static level sizes): the path a level's compaction outputs go to.
    fn rocksdb_path_id(targets: &[u64], level_base: u64, multiplier: u64, level: usize) -> usize {
        let mut p = 0;
        let mut left = targets[0];
        // L0 is estimated as large as L1.
        let mut level_size = level_base;
        let mut cur = 0;
        while p < targets.len() - 1 {
            if level_size <= left {
                if cur == level {
                    return p;
                }
                left -= level_size;
                if cur > 0 {
                    level_size *= multiplier;
                }
                cur += 1;
                continue;
            }
            p += 1;
            left = targets[p];
        }
        p
    }

    /// The peer's claim: `rocksdb-tiered` keeps L0 and L1 on the fast disk and everything
    /// deeper on the slow one, with L1 sized to the fast-tier budget less the WALs and L0.
    #[test]
    fn tiered_layout_places_l0_and_l1_on_the_fast_path() {
        let config = |scale: &str, budget: Option<u64>| {
            let a = crate::args::BenchArgs {
                scale: scale.into(),
                out: "o".into(),
                fd_budget: budget,
                memory_budget: budget,
                ..Default::default()
            };
            Config::from_args(&a).unwrap()
        };
        // The presets and issue 20's F2 setup (one 43.2 MB budget for memory and fast disk).
        let configs = [
            config("smoke", None),
            config("small", None),
            config("paper", None),
            config("small", Some(43_200_000)),
        ];
        for cfg in &configs {
            let l = TieredLayout::new(cfg);
            let wb = cfg.write_buffer_size;
            // The fast path's target covers L0's estimate (one L1) plus L1's target.
            assert!(l.fast_path_target >= 2 * l.l1_target, "{l:?}");
            // L1's target is the budget less two WALs and four L0 tables.
            assert_eq!(
                l.l1_target,
                cfg.fd_budget.saturating_sub(6 * wb).max(cfg.level_base),
                "{l:?}"
            );
            let targets = [l.fast_path_target, u64::MAX / 4];
            for (level, path) in [(0, 0), (1, 0), (2, 1), (3, 1)] {
                assert_eq!(
                    rocksdb_path_id(&targets, l.l1_target, 10, level),
                    path,
                    "level {level} of {l:?}"
                );
            }
        }
        // The old target (budget less the WALs) sent L1 to the slow path: the check can fail.
        let cfg = &configs[1];
        let l = TieredLayout::new(cfg);
        let old = [cfg.fd_budget - 2 * cfg.write_buffer_size, u64::MAX / 4];
        assert_eq!(rocksdb_path_id(&old, l.l1_target, 10, 1), 1);
    }
}

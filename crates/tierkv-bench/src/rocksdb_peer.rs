//! RocksDB as a peer system (feature `rocksdb-peer`): `rocksdb-tiered` keeps L0 and an
//! enlarged L1 on the fast disk through `db_paths` (the HotRAP paper's "RocksDB-fat"
//! placement) and `rocksdb-fd` keeps everything on the fast disk. Both use direct I/O and the
//! block size, block cache, bloom bits, memtable sizes and background threads tierkv gets.
//!
//! tierkv's in-engine device model cannot throttle RocksDB: run both under
//! `scripts/tiers.sh` (kernel-enforced limits, `--slow-device none --fast-dir --slow-dir`)
//! for a fair side-by-side. RocksDB does not split I/O by tier, so per-tier bytes are
//! reported as unavailable; its FD hit rate comes from its per-level get tickers.

use rocksdb::statistics::Ticker;
use rocksdb::{
    BlockBasedOptions, Cache, DBCompressionType, DBPath, Direction, IteratorMode, Options,
    WriteBatch, DB,
};

use crate::error::{BenchError, Result};
use crate::scale::Config;
use crate::store::{Counters, Store, TierDirs};
use crate::systems::System;

/// A RocksDB store under test.
pub struct RocksStore {
    name: String,
    db: DB,
    opts: Options,
    tiered: bool,
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
        let l0_share = 4 * cfg.write_buffer_size;
        if tiered {
            // The WALs of RocksDB's memtables (max_write_buffer_number, 2) share the fast
            // disk, as tierkv's share its budget (`Options::fast_tier_reserve`).
            let tables = cfg.fd_budget.saturating_sub(2 * cfg.write_buffer_size);
            // One enlarged L1 fills the fast disk next to L0: RocksDB-fat.
            opts.set_max_bytes_for_level_base(tables.saturating_sub(l0_share).max(cfg.level_base));
            let paths = [
                DBPath::new(&dirs.fast, tables).map_err(err)?,
                DBPath::new(&dirs.slow, u64::MAX / 4).map_err(err)?,
            ];
            opts.set_db_paths(&paths);
        } else {
            opts.set_max_bytes_for_level_base(cfg.level_base);
        }
        let cache = Cache::new_lru_cache(cfg.cache_size as usize);
        let mut table = BlockBasedOptions::default();
        table.set_block_size(16 << 10);
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
        self.db.put(key, value).map_err(|e| self.err(e))
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        self.db.delete(key).map_err(|e| self.err(e))
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
        for (k, v) in records {
            b.put(k, v);
        }
        self.db.write(b).map_err(|e| self.err(e))
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
            user_bytes_written: Some(t(Ticker::BytesWritten)),
            bg_write_bytes: Some(t(Ticker::FlushWriteBytes) + t(Ticker::CompactWriteBytes)),
            ..Default::default()
        }
    }

    fn engine_stats(&self) -> serde_json::Value {
        let stats = self.db.property_value("rocksdb.stats").ok().flatten();
        serde_json::json!({ "rocksdb.stats": stats })
    }

    fn close(self: Box<Self>) -> Result<()> {
        // Dropping the handle closes RocksDB (it flushes nothing unsynced we rely on).
        drop(self);
        Ok(())
    }
}

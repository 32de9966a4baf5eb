//! The [`Store`] interface the runner drives, the cumulative [`Counters`] it samples, the
//! [`TierDirs`] a store lives in, and tierkv's implementation ([`TierkvStore`], its options
//! per system). RocksDB's implementation is in `rocksdb_peer`; choosing between
//! them is the runner's. Knows nothing of workloads or reports.

use serde::Serialize;
use std::path::{Path, PathBuf};

use crate::error::{BenchError, Result};
use crate::scale::Config;
use crate::systems::System;

/// The two directories of one store.
#[derive(Clone, Debug, Serialize)]
pub struct TierDirs {
    /// Fast-tier directory.
    pub fast: PathBuf,
    /// Slow-tier directory.
    pub slow: PathBuf,
    /// The per-system directory holding both, when they share one root.
    #[serde(skip)]
    parent: Option<PathBuf>,
}

impl TierDirs {
    /// Directories named `name` under the configured fast and slow roots.
    pub fn for_name(cfg: &Config, name: &str) -> TierDirs {
        if cfg.fast_root == cfg.slow_root {
            let base = cfg.fast_root.join(name);
            TierDirs {
                fast: base.join("fast"),
                slow: base.join("slow"),
                parent: Some(base),
            }
        } else {
            TierDirs {
                fast: cfg.fast_root.join(name),
                slow: cfg.slow_root.join(name),
                parent: None,
            }
        }
    }

    /// Removes both directories (missing ones are fine).
    pub fn remove(&self) -> Result<()> {
        for d in [&self.fast, &self.slow] {
            match std::fs::remove_dir_all(d) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(BenchError::io(d, e)),
            }
        }
        // Drop the per-system directory once empty; never a user-given root.
        if let Some(parent) = &self.parent {
            let _ = std::fs::remove_dir(parent);
        }
        Ok(())
    }

    /// Copies (or, when `moving`, renames) a loaded store into these directories.
    pub fn take_from(&self, src: &TierDirs, moving: bool) -> Result<()> {
        self.remove()?;
        for (from, to) in [(&src.fast, &self.fast), (&src.slow, &self.slow)] {
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent).map_err(|e| BenchError::io(parent, e))?;
            }
            if moving && std::fs::rename(from, to).is_ok() {
                continue;
            }
            copy_dir(from, to)?;
        }
        // The store records the slow directory it was loaded with (its `TIERS` file); the
        // copy lives elsewhere, so it forgets that and records its new place at its first
        // open, as the engine documents for moving a slow tier.
        let record = self.fast.join("TIERS");
        match std::fs::remove_file(&record) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(BenchError::io(&record, e)),
            _ => Ok(()),
        }
    }
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).map_err(|e| BenchError::io(to, e))?;
    let entries = std::fs::read_dir(from).map_err(|e| BenchError::io(from, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| BenchError::io(from, e))?;
        let ty = entry
            .file_type()
            .map_err(|e| BenchError::io(entry.path(), e))?;
        let dst = to.join(entry.file_name());
        if ty.is_dir() {
            copy_dir(&entry.path(), &dst)?;
        } else if entry.file_name() != "LOCK" {
            std::fs::copy(entry.path(), &dst).map_err(|e| BenchError::io(&dst, e))?;
        }
    }
    Ok(())
}

/// Cumulative counters of a store, read once per timeline point. `None`: the system cannot
/// tell (RocksDB does not split I/O by tier).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Counters {
    /// Gets answered without reading the slow disk (memtable, caches, fast disk).
    pub gets_fd: u64,
    /// Gets that read the slow disk.
    pub gets_sd: u64,
    /// Bytes read from the fast disk.
    pub fd_read_bytes: Option<u64>,
    /// Bytes written to the fast disk.
    pub fd_write_bytes: Option<u64>,
    /// Bytes read from the slow disk.
    pub sd_read_bytes: Option<u64>,
    /// Bytes written to the slow disk.
    pub sd_write_bytes: Option<u64>,
    /// Bytes read from files on both disks, every cause (for RocksDB, which cannot split
    /// them by tier: the process's read system calls, all direct I/O on its files).
    pub disk_read_bytes: Option<u64>,
    /// Bytes written to files on both disks, every cause (for RocksDB: the process's write
    /// system calls).
    pub disk_write_bytes: Option<u64>,
    /// Read I/Os on the slow disk.
    pub sd_read_ops: Option<u64>,
    /// Write I/Os on the slow disk.
    pub sd_write_ops: Option<u64>,
    /// Read I/Os that gets and scans issued on both disks (cache misses, table opens): what
    /// the cache saves, without the noise of the machine's disk latency.
    pub user_read_ios: Option<u64>,
    /// Bytes promoted to the fast disk by flush.
    pub promoted_by_flush_bytes: Option<u64>,
    /// Bytes promoted to the fast disk by compaction.
    pub promoted_by_compaction_bytes: Option<u64>,
    /// Bytes kept on the fast disk by compactions into the slow disk.
    pub retained_bytes: Option<u64>,
    /// Sizes of the cache's components now (gauges, not counts): KV, KP, block bytes.
    pub cache_bytes: Option<[u64; 3]>,
    /// Hits of the KV, KP and block caches and lookups of the point and block caches
    /// (counts).
    pub cache_hits: Option<[u64; 5]>,
    /// Key and value bytes users wrote.
    pub user_bytes_written: Option<u64>,
    /// Bytes background work (flush, compaction, promotion, hotness tracking) wrote, all
    /// tiers together (what RocksDB can report as well).
    pub bg_write_bytes: Option<u64>,
    /// Background bytes read from / written to the fast and the slow disk:
    /// `[fd read, fd write, sd read, sd write]`.
    pub bg_tier_bytes: Option<[u64; 4]>,
    /// Of the fast disk's background writes, the hotness tracker's (RALT's run files).
    pub fd_tracker_write_bytes: Option<u64>,
    /// Bytes compactions read from and wrote to the slow disk.
    pub sd_compaction_bytes: Option<u64>,
    /// Bytes compactions wrote below their output level (preemptive pushdown).
    pub pushdown_bytes: Option<u64>,
    /// Data-block bytes compactions copied as stored (block reuse) and encoded anew.
    pub block_bytes: Option<[u64; 2]>,
    /// Bytes the engine's budgeted components hold now (a gauge: memtables, cache, index
    /// and filter blocks, promotion cache, hotness tracker).
    pub memory_bytes: Option<u64>,
    /// The slow tier's table bytes over its valid bytes now (a gauge; above 1 with
    /// semi-sorted tables holding dirty blocks).
    pub slow_tier_space_amp: Option<f64>,
}

fn sub(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    Some(a?.saturating_sub(b?))
}

fn sub_array<const N: usize>(a: Option<[u64; N]>, b: Option<[u64; N]>) -> Option<[u64; N]> {
    let (a, b) = (a?, b?);
    Some(std::array::from_fn(|i| a[i].saturating_sub(b[i])))
}

impl Counters {
    /// Counts accumulated since `earlier`.
    pub fn since(&self, earlier: &Counters) -> Counters {
        Counters {
            gets_fd: self.gets_fd.saturating_sub(earlier.gets_fd),
            gets_sd: self.gets_sd.saturating_sub(earlier.gets_sd),
            fd_read_bytes: sub(self.fd_read_bytes, earlier.fd_read_bytes),
            fd_write_bytes: sub(self.fd_write_bytes, earlier.fd_write_bytes),
            sd_read_bytes: sub(self.sd_read_bytes, earlier.sd_read_bytes),
            sd_write_bytes: sub(self.sd_write_bytes, earlier.sd_write_bytes),
            disk_read_bytes: sub(self.disk_read_bytes, earlier.disk_read_bytes),
            disk_write_bytes: sub(self.disk_write_bytes, earlier.disk_write_bytes),
            sd_read_ops: sub(self.sd_read_ops, earlier.sd_read_ops),
            sd_write_ops: sub(self.sd_write_ops, earlier.sd_write_ops),
            user_read_ios: sub(self.user_read_ios, earlier.user_read_ios),
            promoted_by_flush_bytes: sub(
                self.promoted_by_flush_bytes,
                earlier.promoted_by_flush_bytes,
            ),
            promoted_by_compaction_bytes: sub(
                self.promoted_by_compaction_bytes,
                earlier.promoted_by_compaction_bytes,
            ),
            retained_bytes: sub(self.retained_bytes, earlier.retained_bytes),
            cache_bytes: self.cache_bytes,
            cache_hits: match (self.cache_hits, earlier.cache_hits) {
                (Some(a), Some(b)) => Some(std::array::from_fn(|i| a[i].saturating_sub(b[i]))),
                _ => None,
            },
            user_bytes_written: sub(self.user_bytes_written, earlier.user_bytes_written),
            bg_write_bytes: sub(self.bg_write_bytes, earlier.bg_write_bytes),
            bg_tier_bytes: sub_array(self.bg_tier_bytes, earlier.bg_tier_bytes),
            fd_tracker_write_bytes: sub(
                self.fd_tracker_write_bytes,
                earlier.fd_tracker_write_bytes,
            ),
            sd_compaction_bytes: sub(self.sd_compaction_bytes, earlier.sd_compaction_bytes),
            pushdown_bytes: sub(self.pushdown_bytes, earlier.pushdown_bytes),
            block_bytes: sub_array(self.block_bytes, earlier.block_bytes),
            memory_bytes: self.memory_bytes,
            slow_tier_space_amp: self.slow_tier_space_amp,
        }
    }

    /// Share of found gets that did not read the slow disk (`None` without gets).
    pub fn fd_hit_rate(&self) -> Option<f64> {
        let all = self.gets_fd + self.gets_sd;
        (all > 0).then(|| self.gets_fd as f64 / all as f64)
    }

    /// Promoted bytes by both pathways.
    pub fn promoted_bytes(&self) -> Option<u64> {
        Some(self.promoted_by_flush_bytes? + self.promoted_by_compaction_bytes?)
    }
}

/// One get of a stream ([`Store::get_stream`]): its key and when it entered (its latency
/// runs from then to its answer).
pub struct StreamGet {
    /// The key read.
    pub key: Vec<u8>,
    /// When the get entered the stream.
    pub entered: std::time::Instant,
    /// The operation this read goes ahead of, run when it is answered: a read-modify-write
    /// whose read streams first (bringing the record's block into memory), so its atomic
    /// read-modify-write runs without waiting on the disk. `None` for a plain get.
    pub then: Option<crate::workload::Op>,
    /// For a read-modify-write: [`Store::read_token`] taken before its read entered.
    pub token: Option<u64>,
}

/// One entry of a stream's group of writes ([`Store::write_group`]).
#[derive(Clone, Debug)]
pub enum GroupWrite {
    /// Plain writes, applied as one atomic batch.
    Records(Vec<(Vec<u8>, Vec<u8>)>),
    /// A read-modify-write's write: applies only if `key` was not written after `token`
    /// (when its read was taken).
    IfUnchanged {
        /// The key read and written.
        key: Vec<u8>,
        /// Its new value.
        value: Vec<u8>,
        /// [`Store::read_token`] from before the read.
        token: u64,
    },
}

impl AsRef<[u8]> for StreamGet {
    fn as_ref(&self) -> &[u8] {
        &self.key
    }
}

/// What the runner needs from a store. Implementations are shared by the client threads.
pub trait Store: Send + Sync {
    /// Point read; true when the key was found.
    fn get(&self, key: &[u8]) -> Result<bool>;
    /// Point reads of several keys issued together (`--batch`): one answer per key, in
    /// order, true when found. Engines with a batched read keep the keys' disk reads in
    /// flight together; this default reads them one by one.
    fn multi_get(&self, keys: &[Vec<u8>]) -> Result<Vec<bool>> {
        keys.iter().map(|k| self.get(k)).collect()
    }
    /// Streams point reads (`--batch N`): keys come from `next` whenever fewer than
    /// `window` are unanswered (`None` ends the stream), and each answer (true when found)
    /// goes to `done` with its get; returns once every get taken was answered. Engines
    /// with a streaming read keep up to `window` gets in flight continuously; this
    /// default takes up to `window` gets and reads them with one [`Store::multi_get`],
    /// then the next window (each read when its window goes out, not when it entered).
    fn get_stream(
        &self,
        window: usize,
        next: &mut dyn FnMut() -> Option<StreamGet>,
        done: &mut dyn FnMut(StreamGet, Result<bool>),
    ) {
        loop {
            let mut gets = Vec::with_capacity(window);
            while gets.len() < window.max(1) {
                match next() {
                    Some(g) => gets.push(g),
                    None => break,
                }
            }
            if gets.is_empty() {
                return;
            }
            let full = gets.len() >= window.max(1);
            let keys: Vec<Vec<u8>> = gets.iter().map(|g| g.key.clone()).collect();
            match self.multi_get(&keys) {
                Ok(found) => {
                    for (g, f) in gets.into_iter().zip(found) {
                        done(g, Ok(f));
                    }
                }
                Err(e) => {
                    // The window failed as one read: each get gets the error.
                    let msg = e.to_string();
                    for g in gets {
                        done(g, Err(BenchError::engine("batched read", msg.clone())));
                    }
                }
            }
            if !full {
                return;
            }
        }
    }
    /// Whether [`Store::get_stream`] reads each get at the moment it entered (its own read
    /// point), so a write made while the get is in flight cannot change its answer. The
    /// default stream reads a window when it goes out, so it does not.
    fn stream_reads_at_entry(&self) -> bool {
        false
    }
    /// For a read-modify-write whose read streams ahead: a token taken before the read
    /// enters, with which [`Store::write_group`] applies its write only if the key was not
    /// written since. `None` (this default): the store has no such write, and the
    /// read-modify-write runs atomically ([`Store::read_modify_write`]) when its read is
    /// answered.
    fn read_token(&self) -> Option<u64> {
        None
    }
    /// Writes a stream's group of writes in order, in as few commits as the store can;
    /// returns per entry whether it applied (plain records always do, when no error).
    /// This default writes each batch of records with [`Store::write_batch`] and declines
    /// every conditional write (the runner then runs it as a read-modify-write).
    fn write_group(&self, group: &[GroupWrite]) -> Result<Vec<bool>> {
        group
            .iter()
            .map(|w| match w {
                GroupWrite::Records(records) => self.write_batch(records).map(|()| true),
                GroupWrite::IfUnchanged { .. } => Ok(false),
            })
            .collect()
    }
    /// Write one record.
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()>;
    /// Write one record that expires `ttl_secs` seconds from now (a trace write with a
    /// TTL). Engines without per-record expiry (the RocksDB peer: its TTL is per database)
    /// write it without one, which this default does.
    fn put_with_ttl(&self, key: &[u8], value: &[u8], ttl_secs: u32) -> Result<()> {
        let _ = ttl_secs;
        self.put(key, value)
    }
    /// Delete one record.
    fn delete(&self, key: &[u8]) -> Result<()>;
    /// Read `key`, then write `value` to it (YCSB F); true when the key was found. Engines
    /// with an atomic read-modify-write use it.
    fn read_modify_write(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        let found = self.get(key)?;
        self.put(key, value)?;
        Ok(found)
    }
    /// Read up to `limit` records from `from` on; returns how many were read.
    fn scan(&self, from: &[u8], limit: usize) -> Result<usize>;
    /// Write records atomically (the load phase).
    fn write_batch(&self, records: &[(Vec<u8>, Vec<u8>)]) -> Result<()>;
    /// Flush memtables and wait until background work is idle.
    fn settle(&self) -> Result<()>;
    /// Cumulative counters.
    fn counters(&self) -> Counters;
    /// The engine's full statistics, for results.json.
    fn engine_stats(&self) -> serde_json::Value;
    /// Close cleanly.
    fn close(self: Box<Self>) -> Result<()>;
}

/// Engine options of a tierkv system. `loading` drops the slow-disk model and promotion (the
/// load phase is not measured, and nothing is read while loading, so neither changes where
/// data ends up).
pub fn tierkv_options(
    cfg: &Config,
    system: System,
    dirs: &TierDirs,
    loading: bool,
) -> tierkv::Options {
    tierkv::Options {
        write_buffer_size: cfg.write_buffer_size as usize,
        target_file_size: cfg.target_file_size,
        max_bytes_for_level_base: cfg.level_base,
        block_records: match cfg.block_records {
            None => tierkv::Options::default().block_records,
            Some(0) => None,
            Some(n) => Some(n),
        },
        last_level_filters: cfg.last_level_filters,
        read_io: cfg.read_io.parse().unwrap_or_default(),
        cache_size: cfg.cache_size as usize,
        cache: tierkv::CacheOptions {
            mode: system.cache_mode(),
            ..Default::default()
        },
        fd_budget: Some(cfg.fd_budget),
        slow: Some(tierkv::SlowTier {
            dir: dirs.slow.clone(),
            budget: None,
            device: if loading {
                tierkv::DeviceProfile::none()
            } else {
                cfg.sd_device
            },
        }),
        all_on_fast: system.all_on_fast(),
        // The budget overrides the memtable and cache sizes above (they are its share
        // anyway, see Config::from_args); each system divides it for its own features.
        memory_budget: cfg
            .memory_budget
            .map(|b| usize::try_from(b).unwrap_or(usize::MAX)),
        promotion: if loading {
            tierkv::PromotionOptions::disabled()
        } else {
            system.promotion()
        },
        // Every two-tier system shares one load, made with the default compaction, except
        // that a system with the semi-sorted slow tier loads its own in that format (its
        // `load_class`): loaded as sorted tables, its run would spend its merges
        // converting them.
        compaction: {
            let mut c = if loading {
                tierkv::CompactionOptions {
                    slow_tier_format: system.compaction().slow_tier_format,
                    ..Default::default()
                }
            } else {
                system.compaction()
            };
            if let Some(b) = cfg.semi_block_size {
                c.semi_block_size = b;
            }
            c
        },
        record_cache: tierkv::RecordCacheOptions {
            enabled: system
                .record_cache()
                .or(cfg.record_cache)
                .unwrap_or(tierkv::RecordCacheOptions::default().enabled),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// A tierkv store under test.
pub struct TierkvStore {
    name: String,
    db: tierkv::Db,
}

/// The deadline of a record written at `now_ms` with a TTL of `ttl_secs` seconds.
pub fn ttl_deadline(now_ms: u64, ttl_secs: u32) -> u64 {
    now_ms.saturating_add(u64::from(ttl_secs) * 1000)
}

impl TierkvStore {
    /// Opens (creating when needed) a tierkv system's store.
    pub fn open(
        cfg: &Config,
        system: System,
        dirs: &TierDirs,
        loading: bool,
    ) -> Result<TierkvStore> {
        for d in [&dirs.fast, &dirs.slow] {
            std::fs::create_dir_all(d).map_err(|e| BenchError::io(d, e))?;
        }
        let opts = tierkv_options(cfg, system, dirs, loading);
        let db = tierkv::Db::open(&dirs.fast, opts)
            .map_err(|e| BenchError::engine(&system.name(), e))?;
        Ok(TierkvStore {
            name: system.name(),
            db,
        })
    }

    fn err(&self, e: tierkv::Error) -> BenchError {
        BenchError::engine(&self.name, e)
    }
}

impl Store for TierkvStore {
    fn get(&self, key: &[u8]) -> Result<bool> {
        self.db
            .get(key)
            .map(|v| v.is_some())
            .map_err(|e| self.err(e))
    }

    fn get_stream(
        &self,
        window: usize,
        next: &mut dyn FnMut() -> Option<StreamGet>,
        done: &mut dyn FnMut(StreamGet, Result<bool>),
    ) {
        self.db.get_pipelined(window, next, |g, answer| {
            done(g, answer.map(|v| v.is_some()).map_err(|e| self.err(e)))
        });
    }

    /// `Db::get_pipelined` gives each key a fresh read point when it enters.
    fn stream_reads_at_entry(&self) -> bool {
        true
    }

    fn read_token(&self) -> Option<u64> {
        Some(self.db.latest_sequence())
    }

    /// One `Db::write_many_if_unchanged`: the group's writes queue together and share
    /// group commits.
    fn write_group(&self, group: &[GroupWrite]) -> Result<Vec<bool>> {
        let writes = group
            .iter()
            .map(|w| {
                let mut batch = tierkv::WriteBatch::new();
                match w {
                    GroupWrite::Records(records) => {
                        for (k, v) in records {
                            batch.put(k, v);
                        }
                        tierkv::ConditionalWrite {
                            batch,
                            keys: Vec::new(),
                            since: 0,
                        }
                    }
                    GroupWrite::IfUnchanged { key, value, token } => {
                        batch.put(key, value);
                        tierkv::ConditionalWrite {
                            batch,
                            keys: vec![key.clone()],
                            since: *token,
                        }
                    }
                }
            })
            .collect();
        self.db
            .write_many_if_unchanged(writes, &tierkv::WriteOptions::default())
            .map_err(|e| self.err(e))?
            .into_iter()
            .map(|outcome| outcome.map_err(|e| self.err(e)))
            .collect()
    }

    fn multi_get(&self, keys: &[Vec<u8>]) -> Result<Vec<bool>> {
        self.db
            .multi_get(keys)
            .into_iter()
            .map(|answer| answer.map(|v| v.is_some()).map_err(|e| self.err(e)))
            .collect()
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.db.put(key, value).map_err(|e| self.err(e))
    }

    fn put_with_ttl(&self, key: &[u8], value: &[u8], ttl_secs: u32) -> Result<()> {
        if ttl_secs == 0 {
            return self.put(key, value);
        }
        let deadline = ttl_deadline(self.db.options().clock.now_ms(), ttl_secs);
        self.db
            .put_expiring(key, value, deadline)
            .map_err(|e| self.err(e))
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        self.db.delete(key).map_err(|e| self.err(e))
    }

    fn read_modify_write(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        let mut found = false;
        self.db
            .rmw(key, |old| {
                found = old.is_some();
                Some(value.to_vec())
            })
            .map_err(|e| self.err(e))?;
        Ok(found)
    }

    fn scan(&self, from: &[u8], limit: usize) -> Result<usize> {
        let ropts = tierkv::ReadOptions {
            lower_bound: Some(from.to_vec()),
            scan_length_hint: Some(limit),
            ..tierkv::ReadOptions::new()
        };
        let mut it = self.db.iter_opt(&ropts).map_err(|e| self.err(e))?;
        it.seek_to_first().map_err(|e| self.err(e))?;
        let mut n = 0;
        while it.valid() && n < limit {
            // Touch the value as a reader would.
            std::hint::black_box(it.value().len());
            n += 1;
            it.next().map_err(|e| self.err(e))?;
        }
        Ok(n)
    }

    fn write_batch(&self, records: &[(Vec<u8>, Vec<u8>)]) -> Result<()> {
        let mut b = tierkv::WriteBatch::new();
        for (k, v) in records {
            b.put(k, v);
        }
        self.db.write(b).map_err(|e| self.err(e))
    }

    fn settle(&self) -> Result<()> {
        self.db.flush().map_err(|e| self.err(e))?;
        self.db.wait_for_background().map_err(|e| self.err(e))
    }

    fn counters(&self) -> Counters {
        counters_of(&self.db.stats())
    }

    fn engine_stats(&self) -> serde_json::Value {
        serde_json::to_value(self.db.stats()).unwrap_or(serde_json::Value::Null)
    }

    fn close(self: Box<Self>) -> Result<()> {
        let name = self.name;
        self.db.close().map_err(|e| BenchError::engine(&name, e))
    }
}

/// The benchmark's counters from tierkv's statistics.
pub fn counters_of(s: &tierkv::DbStats) -> Counters {
    let g = &s.get_sources;
    let fast = s.io.fast.total();
    let slow = s.io.slow.total();
    let bg_fast = s.background_io(tierkv::Tier::Fast);
    let bg_slow = s.background_io(tierkv::Tier::Slow);
    let sd_compaction = s.io.slow.cause(tierkv::env::IoCause::Compaction);
    Counters {
        gets_fd: g.memory_hits() + g.promotion_cache + g.fast,
        gets_sd: g.slow,
        fd_read_bytes: Some(fast.read_bytes),
        fd_write_bytes: Some(fast.write_bytes),
        sd_read_bytes: Some(slow.read_bytes),
        sd_write_bytes: Some(slow.write_bytes),
        disk_read_bytes: Some(fast.read_bytes + slow.read_bytes),
        disk_write_bytes: Some(fast.write_bytes + slow.write_bytes),
        sd_read_ops: Some(slow.read_ops),
        sd_write_ops: Some(slow.write_ops),
        user_read_ios: Some(
            [
                tierkv::env::IoCause::UserGet,
                tierkv::env::IoCause::UserScan,
            ]
            .iter()
            .map(|&c| s.io.fast.cause(c).read_ops + s.io.slow.cause(c).read_ops)
            .sum(),
        ),
        promoted_by_flush_bytes: Some(s.promotion.promoted_by_flush_bytes),
        promoted_by_compaction_bytes: Some(s.promotion.promoted_by_compaction_bytes),
        retained_bytes: Some(s.promotion.retained_bytes),
        cache_bytes: Some([
            s.cache.kv.bytes as u64,
            s.cache.kp.bytes as u64,
            s.cache.block.bytes as u64,
        ]),
        cache_hits: Some([
            s.cache.kv.hits,
            s.cache.kp.hits,
            s.cache.block.hits,
            s.cache.kv.lookups,
            s.cache.block.lookups,
        ]),
        user_bytes_written: Some(s.user_bytes_written),
        bg_write_bytes: Some(bg_fast.write_bytes + bg_slow.write_bytes),
        bg_tier_bytes: Some([
            bg_fast.read_bytes,
            bg_fast.write_bytes,
            bg_slow.read_bytes,
            bg_slow.write_bytes,
        ]),
        fd_tracker_write_bytes: Some(s.io.fast.cause(tierkv::env::IoCause::Ralt).write_bytes),
        sd_compaction_bytes: Some(sd_compaction.read_bytes + sd_compaction.write_bytes),
        pushdown_bytes: Some(s.compaction_pushdown_bytes),
        block_bytes: Some([s.compaction_bytes_reused, s.compaction_bytes_rewritten]),
        memory_bytes: Some(s.memory.total_bytes as u64),
        slow_tier_space_amp: Some(s.slow_tier_space_amp),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `tierkv-semi` loads its own store (its load class) and must load it in its own
    /// slow-tier format: loaded as sorted tables, its measured run would spend its merges
    /// rewriting them into semi-sorted ones. Every other two-tier system shares the
    /// default load.
    #[test]
    fn the_semi_sorted_system_loads_in_its_format() {
        let cfg = Config::from_args(&crate::args::BenchArgs {
            scale: "smoke".into(),
            out: "unused".into(),
            no_progress: true,
            ..Default::default()
        })
        .unwrap();
        let dirs = TierDirs::for_name(&cfg, "x");
        let semi = tierkv::SlowTierFormat::SemiSorted;
        for loading in [true, false] {
            let o = tierkv_options(&cfg, System::TierkvSemi, &dirs, loading);
            assert_eq!(o.compaction.slow_tier_format, semi, "loading {loading}");
            let o = tierkv_options(&cfg, System::Tierkv, &dirs, loading);
            assert_eq!(
                o.compaction.slow_tier_format,
                tierkv::SlowTierFormat::Sorted
            );
        }
        assert_ne!(System::TierkvSemi.load_class(), System::Tierkv.load_class());
    }

    /// tierkv's `get_stream` (`Db::get_pipelined`): every get of a stream answered exactly
    /// once, found exactly when its key was loaded, with at most the window in flight.
    #[test]
    fn tierkv_streams_gets_with_a_window_and_answers_each_once() {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = Config::from_args(&crate::args::BenchArgs {
            scale: "smoke".into(),
            out: tmp.path().to_path_buf(),
            no_progress: true,
            ..Default::default()
        })
        .unwrap();
        let dirs = TierDirs::for_name(&cfg, "stream");
        let store = TierkvStore::open(&cfg, System::Tierkv, &dirs, false).unwrap();
        let key = |i: u64| format!("user{i:08}").into_bytes();
        for i in 0..2000 {
            store.put(&key(i), &[7u8; 100]).unwrap();
        }
        store.db.flush().unwrap();
        store.db.compact_range(None, None).unwrap();
        let ids: Vec<u64> = (0..3000).step_by(7).collect();
        let mut next_id = ids.iter();
        let mut answered = std::collections::HashMap::new();
        let mut most = 0usize;
        let unanswered_cell = std::cell::Cell::new(0usize);
        store.get_stream(
            8,
            &mut || {
                let &i = next_id.next()?;
                unanswered_cell.set(unanswered_cell.get() + 1);
                most = most.max(unanswered_cell.get());
                Some(StreamGet {
                    key: key(i),
                    entered: std::time::Instant::now(),
                    then: None,
                    token: None,
                })
            },
            &mut |g, found| {
                unanswered_cell.set(unanswered_cell.get() - 1);
                let n = answered.entry(g.key).or_insert((0, false));
                n.0 += 1;
                n.1 = found.unwrap();
            },
        );
        assert_eq!(unanswered_cell.get(), 0, "every get answered");
        assert!(most <= 8, "{most} gets in flight with a window of 8");
        assert_eq!(answered.len(), ids.len());
        for i in ids {
            assert_eq!(answered[&key(i)], (1, i < 2000), "key {i}");
        }
    }

    #[test]
    fn counter_deltas() {
        let a = Counters {
            gets_fd: 10,
            gets_sd: 5,
            sd_read_bytes: Some(100),
            ..Default::default()
        };
        let b = Counters {
            gets_fd: 40,
            gets_sd: 15,
            sd_read_bytes: Some(150),
            ..Default::default()
        };
        let d = b.since(&a);
        assert_eq!(d.fd_hit_rate(), Some(0.75));
        assert_eq!(d.sd_read_bytes, Some(50));
        assert_eq!(d.fd_read_bytes, None);
        assert_eq!(Counters::default().fd_hit_rate(), None);
    }

    /// A trace write with a TTL expires that long after it is replayed: the record reads
    /// until then and misses from then on; a TTL of 0 never expires.
    #[test]
    fn trace_ttls_expire_records() {
        let dir = tempfile::tempdir().unwrap();
        let clock = std::sync::Arc::new(tierkv::ManualClock::new(1_700_000_000_000));
        let db = tierkv::Db::open(
            dir.path(),
            tierkv::Options {
                clock: clock.clone(),
                ..Default::default()
            },
        )
        .unwrap();
        let store = TierkvStore {
            name: "tierkv".into(),
            db,
        };
        store.put_with_ttl(b"ttl", b"v", 30).unwrap();
        store.put_with_ttl(b"forever", b"v", 0).unwrap();
        assert!(store.get(b"ttl").unwrap());
        clock.advance(29_999);
        assert!(store.get(b"ttl").unwrap());
        clock.advance(1);
        assert!(
            !store.get(b"ttl").unwrap(),
            "an expired trace record must miss"
        );
        clock.advance(1 << 40);
        assert!(store.get(b"forever").unwrap());
        assert_eq!(ttl_deadline(5, u32::MAX), 5 + u32::MAX as u64 * 1000);
    }
}

//! The table cache: a bounded set of open table readers keyed by file number, so hot files
//! keep their index and filter in memory and cold ones give back their file descriptors.
//! Bounded by count (`max_open_files`) and optionally by the bytes of index and filter
//! blocks the tables hold (`table_memory_limit`, a share of the memory budget).

use super::FileMeta;
use crate::cache::Cache;
use crate::env::{Env, IoCause};
use crate::error::Result;
use crate::record_cache::RecordCache;
use crate::sst::Table;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Table-cache misses by tier: how many tables were opened and the bytes their opening
/// read (footer and the metadata a reader keeps: filter, properties, index). With a
/// table cache too small for the tables a workload touches, these reads can outweigh the
/// data blocks gets read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TableOpenStats {
    /// Tables opened on the fast tier.
    pub fast_opens: u64,
    /// Bytes those openings read.
    pub fast_bytes: u64,
    /// Tables opened on the slow tier.
    pub slow_opens: u64,
    /// Bytes those openings read.
    pub slow_bytes: u64,
}

/// Weighs a table for the two bounds at once: by its index and filter bytes, but never
/// less than `byte_limit / max_open_files`, so the byte capacity also caps the count.
/// Without a byte limit every table weighs 1 and the capacity is the count.
#[derive(Clone)]
struct TableWeighter {
    by_bytes: bool,
    floor: u64,
}

impl quick_cache::Weighter<u64, Arc<Table>> for TableWeighter {
    fn weight(&self, _: &u64, t: &Arc<Table>) -> u64 {
        if self.by_bytes {
            (t.memory_usage() as u64).max(self.floor)
        } else {
            1
        }
    }
}

type Tables = quick_cache::sync::Cache<u64, Arc<Table>, TableWeighter>;

/// Open tables, bounded by count and optionally by index and filter bytes.
pub struct TableCache {
    env: Arc<Env>,
    tables: Tables,
    byte_limit: Option<usize>,
    cache: Option<Arc<Cache>>,
    /// The fast disk's copies of slow-tier records, consulted before a slow table's
    /// data block is read for a get (`LevelLookup::step`).
    records: Option<Arc<RecordCache>>,
    /// Openings and their bytes, by tier (`[fast, slow]`; see [`TableOpenStats`]).
    opens: [AtomicU64; 2],
    open_bytes: [AtomicU64; 2],
}

impl TableCache {
    /// A cache keeping at most `capacity` tables open.
    pub fn new(env: Arc<Env>, capacity: usize, cache: Option<Arc<Cache>>) -> Self {
        Self::with_limits(env, capacity, None, cache)
    }

    /// A cache keeping at most `capacity` tables open whose index and filter blocks hold at
    /// most `byte_limit` bytes together (when given).
    pub fn with_limits(
        env: Arc<Env>,
        capacity: usize,
        byte_limit: Option<usize>,
        cache: Option<Arc<Cache>>,
    ) -> Self {
        let capacity = capacity.max(1);
        let (weigher, weight_capacity, shards) = match byte_limit {
            Some(bytes) => {
                let bytes = bytes.max(1) as u64;
                let floor = bytes.div_ceil(capacity as u64).max(1);
                // One shard: each shard gets its part of the capacity, and a table heavier
                // than one part would never be kept although it fits the limit.
                (
                    TableWeighter {
                        by_bytes: true,
                        floor,
                    },
                    bytes,
                    1,
                )
            }
            None => (
                TableWeighter {
                    by_bytes: false,
                    floor: 1,
                },
                capacity as u64,
                // quick_cache's default: four per core.
                std::thread::available_parallelism().map_or(4, |n| n.get() * 4),
            ),
        };
        let options = quick_cache::OptionsBuilder::new()
            .estimated_items_capacity(capacity)
            .weight_capacity(weight_capacity)
            .shards(shards)
            .build();
        let tables = match options {
            Ok(o) => Tables::with_options(o, weigher, Default::default(), Default::default()),
            // Unreachable (both required fields are set); fall back to a count bound.
            Err(_) => Tables::with_weighter(capacity, weight_capacity, weigher),
        };
        TableCache {
            env,
            tables,
            byte_limit,
            cache,
            records: None,
            opens: Default::default(),
            open_bytes: Default::default(),
        }
    }

    /// The same cache, with the fast disk's record cache in front of slow tables' blocks.
    pub(crate) fn with_record_cache(mut self, records: Option<Arc<RecordCache>>) -> Self {
        self.records = records;
        self
    }

    /// The fast disk's record cache, if the store keeps one.
    pub(crate) fn record_cache(&self) -> Option<&Arc<RecordCache>> {
        self.records.as_ref()
    }

    /// Tables opened so far and the bytes their opening read, by tier.
    pub fn open_stats(&self) -> TableOpenStats {
        let l = |a: &[AtomicU64; 2], i: usize| a[i].load(Relaxed);
        TableOpenStats {
            fast_opens: l(&self.opens, 0),
            fast_bytes: l(&self.open_bytes, 0),
            slow_opens: l(&self.opens, 1),
            slow_bytes: l(&self.open_bytes, 1),
        }
    }

    /// The byte limit on index and filter blocks, if any.
    pub fn byte_limit(&self) -> Option<usize> {
        self.byte_limit
    }

    /// The table if it is open, without opening it (no I/O).
    pub fn peek(&self, number: u64) -> Option<Arc<Table>> {
        self.tables.get(&number)
    }

    /// The reader of a file if it is open, without opening it (no I/O).
    pub fn get_if_open(&self, meta: &FileMeta) -> Option<Arc<Table>> {
        match meta.late_reader.get() {
            Some(t) => Some(t.clone()),
            None => self.peek(meta.number),
        }
    }

    /// The reader of a file, opening it (charged to `cause`) on a miss.
    pub fn get(&self, meta: &FileMeta, cause: IoCause) -> Result<Arc<Table>> {
        if let Some(t) = meta.late_reader.get() {
            return Ok(t.clone());
        }
        let mut opened = false;
        let table = self.tables.get_or_insert_with(&meta.number, || {
            opened = true;
            let file = self
                .env
                .open_random(meta.tier, &super::table_file_name(meta.number))?;
            // The manifest's size, not the file's: a semi-sorted table's file may hold a
            // crashed append's bytes past it.
            let t = Table::open_sized(
                file,
                meta.number,
                meta.size(),
                self.cache
                    .clone()
                    .map(|c| c as Arc<dyn crate::sst::BlockCache>),
                cause,
            )?
            .with_scan_reads(meta.scan_reads.clone());
            let tier = usize::from(meta.tier == crate::env::Tier::Slow);
            self.opens[tier].fetch_add(1, Relaxed);
            self.open_bytes[tier].fetch_add(t.open_read_bytes(), Relaxed);
            Ok(Arc::new(t))
        });
        // A reader of an older version can open a table after the compaction that removed
        // it evicted it from here; kept here, that opening would hold the unlinked file
        // open, its disk space never freed (the fast disk held twice its budget under
        // RW hotspot-5%: docs/bench/hotrap-peer.md). The compaction marks the file obsolete
        // before it evicts (and the cache's shard lock orders the two against this
        // insert), so an entry inserted after the eviction sees the mark here. The
        // opening moves to the file's metadata instead, which the old versions hold and
        // drop: their later lookups reuse it (opened afresh each time, the promotion
        // checker's probes through the version it froze read 700 MiB/s of index and
        // filter blocks and stalled writers for up to 110 s), and the file closes with
        // the last of them.
        if opened && meta.is_obsolete() {
            self.tables.remove(&meta.number);
            if let Ok(t) = &table {
                let _ = meta.late_reader.set(t.clone());
            }
        }
        // What a KP pointer saves depends on how often gets read table metadata.
        if cause == IoCause::UserGet {
            if let Some(c) = &self.cache {
                c.note_table_access(opened);
            }
        }
        table
    }

    /// Forgets a file (it was deleted or replaced).
    pub fn evict(&self, number: u64) {
        self.tables.remove(&number);
    }

    /// The cache (KV, KP and block components) shared by every table and the read path.
    pub fn cache(&self) -> Option<&Arc<Cache>> {
        self.cache.as_ref()
    }

    /// Bytes of index blocks and of filters held by open tables.
    pub fn memory_breakdown(&self) -> (usize, usize) {
        self.tables.iter().fold((0, 0), |(i, f), (_, t)| {
            (i + t.index_bytes(), f + t.filter_bytes())
        })
    }

    /// Bytes of index and filter blocks held by open tables.
    pub fn memory_usage(&self) -> usize {
        self.tables.iter().map(|(_, t)| t.memory_usage()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::Tier;
    use crate::key::{make_internal_key, ValueKind};
    use crate::sst::{TableBuilder, TableOptions};
    use crate::version::{table_file_name, NewFile};

    fn one_table(env: &Arc<Env>, number: u64) -> Arc<FileMeta> {
        let name = table_file_name(number);
        let file = env
            .create_writable(Tier::Fast, &name, IoCause::Flush)
            .unwrap();
        let mut b = TableBuilder::new(file, TableOptions::default());
        b.add(&make_internal_key(b"k", 1, ValueKind::Value), b"v")
            .unwrap();
        let info = b.finish().unwrap();
        Arc::new(FileMeta::new(
            NewFile::from_table(1, number, Tier::Fast, info),
            env.clone(),
        ))
    }

    /// Open file handles per path under `dir`, from /proc/self/fd (Linux).
    fn handles_to(dir: &std::path::Path, name: &str) -> usize {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter(|p| p.starts_with(dir) && p.to_string_lossy().contains(name))
            .count()
    }

    /// Invariant 4 (budgets hold, docs/DESIGN.md): a table a compaction removed frees its
    /// disk space once its last reader is done. A reader of an older version may open it
    /// after the compaction evicted it from the cache; the cache must not keep that
    /// opening, or the unlinked file stays open for as long as the entry lives. (Fails
    /// without the obsolete check in `get`: the handle outlives the file.) The old
    /// version's later lookups reuse the opening instead of reading the table's index and
    /// filter again each time (fails without `FileMeta::late_reader`: two openings).
    #[test]
    fn a_removed_table_opened_by_an_old_reader_is_not_kept_open() {
        let dir = tempfile::tempdir().unwrap();
        let env = Env::single(dir.path(), false).unwrap();
        let cache = TableCache::new(env.clone(), 100, None);
        let meta = one_table(&env, 7);
        let name = table_file_name(7);
        // The compaction: mark obsolete, then evict (nothing was open yet).
        meta.mark_obsolete();
        cache.evict(7);
        // The old version's reader opens it now, and can read it.
        let table = cache.get(&meta, IoCause::UserGet).unwrap();
        let seek = crate::key::seek_key(b"k", u64::MAX >> 8);
        assert!(table.get(&seek, IoCause::UserGet).unwrap().is_some());
        assert!(
            cache.peek(7).is_none(),
            "an obsolete table stays in the cache"
        );
        let again = cache.get(&meta, IoCause::UserGet).unwrap();
        assert!(Arc::ptr_eq(&table, &again));
        assert_eq!(
            cache.open_stats().fast_opens,
            1,
            "opened once per old version"
        );
        drop((table, again));
        // The reader's version goes: the file is unlinked and nothing holds it open.
        drop(meta);
        assert!(!dir.path().join(&name).exists());
        assert_eq!(
            handles_to(dir.path(), &name),
            0,
            "the unlinked table is still open"
        );
        // A live table is kept (the check is not a cache bypass).
        let live = one_table(&env, 8);
        cache.get(&live, IoCause::UserGet).unwrap();
        assert!(cache.peek(8).is_some());
    }
}

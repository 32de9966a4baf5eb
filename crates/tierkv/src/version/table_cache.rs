//! The table cache: a bounded set of open table readers keyed by file number, so hot files
//! keep their index and filter in memory and cold ones give back their file descriptors.

use super::FileMeta;
use crate::cache::Cache;
use crate::env::{Env, IoCause};
use crate::sst::Table;
use crate::Result;
use std::sync::Arc;

/// Open tables, bounded by count.
pub struct TableCache {
    env: Arc<Env>,
    tables: quick_cache::sync::Cache<u64, Arc<Table>>,
    block_cache: Option<Arc<Cache>>,
}

impl TableCache {
    /// A cache keeping at most `capacity` tables open.
    pub fn new(env: Arc<Env>, capacity: usize, block_cache: Option<Arc<Cache>>) -> Self {
        TableCache {
            env,
            tables: quick_cache::sync::Cache::new(capacity),
            block_cache,
        }
    }

    /// The reader of a file, opening it (charged to `cause`) on a miss.
    pub fn get(&self, meta: &FileMeta, cause: IoCause) -> Result<Arc<Table>> {
        self.tables.get_or_insert_with(&meta.number, || {
            let file = self
                .env
                .open_random(meta.tier, &super::table_file_name(meta.number))?;
            Ok(Arc::new(Table::open(
                file,
                meta.number,
                self.block_cache.clone(),
                cause,
            )?))
        })
    }

    /// Forgets a file (it was deleted or replaced).
    pub fn evict(&self, number: u64) {
        self.tables.remove(&number);
    }

    /// The cache (KV, KP and block components) shared by every table and the read path.
    pub fn cache(&self) -> Option<&Arc<Cache>> {
        self.block_cache.as_ref()
    }

    /// Bytes of index and filter blocks held by open tables.
    pub fn memory_usage(&self) -> usize {
        self.tables.iter().map(|(_, t)| t.memory_usage()).sum()
    }
}

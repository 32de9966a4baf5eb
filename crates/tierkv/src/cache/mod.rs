//! The block cache: decoded data blocks shared by every table, bounded in bytes.
//!
//! Built on `quick_cache` (sharded, CLOCK-Pro-like eviction, weighted by block size), keyed
//! by (file number, block offset); file numbers are never reused, so a key never names two
//! different blocks. Owns caching only: blocks enter it already checksum-verified.

use crate::sst::block::Block;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[derive(Clone)]
struct BlockWeighter;

impl quick_cache::Weighter<(u64, u64), Block> for BlockWeighter {
    fn weight(&self, _key: &(u64, u64), block: &Block) -> u64 {
        // Charge the bookkeeping too, so tiny blocks cannot overrun the budget.
        (block.size() + 64) as u64
    }
}

/// A sharded block cache bounded in bytes.
pub struct BlockCache {
    blocks: quick_cache::sync::Cache<(u64, u64), Block, BlockWeighter>,
    capacity: usize,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl BlockCache {
    /// A cache holding at most `capacity` bytes of blocks.
    pub fn new(capacity: usize) -> Self {
        // Sized for 4 KiB blocks: quick_cache preallocates per estimated item.
        let estimated_items = (capacity / 4096).max(16);
        BlockCache {
            blocks: quick_cache::sync::Cache::with_weighter(
                estimated_items,
                capacity as u64,
                BlockWeighter,
            ),
            capacity,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The block at `offset` of table `file`, if cached.
    pub fn get(&self, file: u64, offset: u64) -> Option<Block> {
        let b = self.blocks.get(&(file, offset));
        let counter = if b.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Relaxed);
        b
    }

    /// Caches a block.
    pub fn insert(&self, file: u64, offset: u64, block: Block) {
        self.blocks.insert((file, offset), block);
    }

    /// Lookups that found their block.
    pub fn hits(&self) -> u64 {
        self.hits.load(Relaxed)
    }

    /// Lookups that missed.
    pub fn misses(&self) -> u64 {
        self.misses.load(Relaxed)
    }

    /// Bytes held.
    pub fn usage(&self) -> usize {
        self.blocks.weight() as usize
    }

    /// Configured capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sst::block::BlockBuilder;

    #[test]
    fn stays_within_its_byte_budget() {
        let cache = BlockCache::new(64 * 1024);
        let mut b = BlockBuilder::new(16);
        b.add(b"key", &[7u8; 4000]);
        let block = Block::new(b.finish().into()).unwrap();
        for i in 0..100 {
            cache.insert(1, i, block.clone());
            assert!(cache.usage() <= cache.capacity(), "{}", cache.usage());
        }
        assert!(cache.get(1, 99).is_some() || cache.get(1, 98).is_some());
        assert!(cache.hits() + cache.misses() >= 1);
    }
}

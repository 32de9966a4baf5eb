//! STUB (not committed)
#![allow(missing_docs, unused)]
pub struct BlockCache;
impl BlockCache {
    pub fn new(c: usize) -> Self {
        BlockCache
    }
    pub fn hits(&self) -> u64 {
        0
    }
    pub fn misses(&self) -> u64 {
        0
    }
    pub fn usage(&self) -> usize {
        0
    }
    pub fn capacity(&self) -> usize {
        0
    }
}

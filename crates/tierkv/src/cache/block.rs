//! Block entries: decoded data blocks keyed by (file number, block offset). File numbers
//! are never reused, so a key never names two different blocks; blocks enter already
//! checksum-verified. Owns the entry layout and its charge.

use super::elru::Entry;
use crate::sst::block::Block;

/// One cached block.
pub(crate) struct BlockEntry {
    pub file: u64,
    pub offset: u64,
    pub hash: u64,
    pub block: Block,
}

/// Memory of an entry beyond the block's bytes: node, index slot, the shared buffer's
/// header.
pub(crate) const BLOCK_OVERHEAD: usize =
    std::mem::size_of::<Option<super::elru::Node<BlockEntry>>>() + 8 + 48;

impl Entry for BlockEntry {
    fn hash(&self) -> u64 {
        self.hash
    }
}

impl BlockEntry {
    /// Bytes charged to the budget.
    pub fn charge(&self) -> u32 {
        (self.block.size() + BLOCK_OVERHEAD).min(u32::MAX as usize) as u32
    }
}

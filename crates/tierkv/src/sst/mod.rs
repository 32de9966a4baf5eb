//! Sorted string tables: the immutable files every level is made of.
//!
//! A table is a run of data blocks (sorted internal keys with prefix compression and
//! restart points), then a bloom filter over its user keys, a properties block, an index
//! block (the last key of each data block and its handle), and a fixed footer with a
//! checksum, format version and magic. Every block carries a checksum, so every byte of a
//! table is covered (invariant 3, docs/DESIGN.md). Byte layout: docs/FORMAT.md, "Table files".
//!
//! Owns the format, its builder and reader, and the table iterator. It does not decide
//! which tables exist (`version`) nor what goes into them (`db`, `compaction`).

pub use crate::options::{Compression, TableOptions};
pub mod block;
mod builder;
pub mod filter;
pub mod format;
mod properties;
pub mod semi;
mod table;

pub use builder::TableBuilder;
pub use properties::TableProperties;
pub use table::{BlockLookup, DataBlocks, RawBlock, ScanReads, Table, TableIterator};

use crate::key::InternalKey;
use block::Block;

/// Where a table keeps the data blocks it read, so the next read of one needs no disk
/// (the store's cache implements it; `sst` never names the cache, which sits above it).
pub trait BlockCache: Send + Sync {
    /// The cached block at `offset` of table `file`, if any.
    fn get_block(&self, file: u64, offset: u64) -> Option<Block>;
    /// Offers a block just read from disk.
    fn insert_block(&self, file: u64, offset: u64, block: Block);
    /// True when the block at `offset` of table `file` is cached; unlike
    /// [`BlockCache::get_block`], counts and touches nothing.
    fn holds_block(&self, file: u64, offset: u64) -> bool;
}

/// Smallest data block `block_records` cuts: a direct read moves whole 512-byte sectors,
/// so a smaller block saves no I/O and only adds index entries.
pub const MIN_RECORD_BLOCK: usize = 1024;

/// The most a point read of one data block may move for `block_size`: whole 512-byte
/// sectors, the target rounded up to them. A table writer closes a data block before an
/// entry that would take the block's read past it, and a compaction re-encodes a block that
/// exceeds it wherever it lands (cut for a larger read unit).
pub fn block_read_limit(block_size: usize) -> usize {
    crate::env::direct_read_span(0, block_size)
}

/// Keys between restart points in the index block. Index entries are then
/// prefix-compressed (neighbouring blocks' last keys share a prefix) and need one restart
/// offset per 16 entries instead of one each: the index holds one entry per data block,
/// so its bytes per key grow as blocks shrink. A seek binary-searches the restarts and
/// scans at most 16 entries, as in a data block. (Tables written before kept every entry
/// a restart; readers handle both.)
pub const INDEX_RESTART_INTERVAL: usize = 16;

/// What a finished table holds, for the manifest.
#[derive(Clone, Debug)]
pub struct TableInfo {
    /// Size of the file in bytes.
    pub file_size: u64,
    /// Smallest internal key.
    pub smallest: InternalKey,
    /// Largest internal key.
    pub largest: InternalKey,
    /// Counts and sequence bounds.
    pub props: TableProperties,
    /// How its data blocks were written.
    pub blocks: BlockWrites,
    /// Bytes of dirty blocks it holds (a semi-sorted table's garbage; 0 for a sorted one).
    pub garbage_bytes: u64,
    /// Bytes of its last generation's key list, trailer included (a semi-sorted table's
    /// copy of its valid keys, which a sorted table does not carry; 0 for a sorted one).
    pub key_list_bytes: u64,
}

/// Data blocks a builder wrote: encoded from entries, or copied verbatim from another
/// table (block-reuse compaction). Bytes include the 5-byte block trailer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockWrites {
    /// Blocks copied as stored.
    pub copied_blocks: u64,
    /// Their bytes.
    pub copied_bytes: u64,
    /// Blocks encoded from entries.
    pub built_blocks: u64,
    /// Their bytes.
    pub built_bytes: u64,
}

#[cfg(test)]
mod tests;

//! Reading a table, one concern per file. `open`: the open [`Table`], sorted or
//! semi-sorted (footer, then index, filter and properties in one read), and what it keeps
//! in memory. `blocks`: one data block by its handle (block cache, disk, a span read).
//! `lookup`: point lookups (filter, index, one data block). `readahead`: windows of whole
//! blocks read in few I/Os for sequential readers; `scan_readahead`: when a user iterator
//! reads ahead and how far. `iter`: the two-level table iterator and the data-block cursor
//! compaction copies from. `verify`: every block read and checked.
//!
//! Imports point one way: every file builds on `open`, `iter` on both readaheads and
//! `verify` on `readahead`; `lookup` and the readaheads never reach each other, so a change
//! to readahead cannot reach a point lookup. Owns the read side of the format; which tables
//! exist is the version's business.

mod blocks;
mod iter;
mod lookup;
mod open;
mod readahead;
mod scan_readahead;
mod verify;

pub use iter::{DataBlocks, RawBlock, TableIterator};
pub use lookup::BlockLookup;
pub use open::{ScanReads, Table};

// The semi-sorted tables' tests measure scan windows against it.
#[cfg(test)]
pub(crate) use scan_readahead::SEMI_SCAN_SLACK;

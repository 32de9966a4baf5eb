//! Semi-sorted tables (HyperDB's semi-SSTables), the slow tier's optional format: data
//! blocks in the ordinary block format, each sorted inside, appended in any order. A table
//! is a run of *generations*; each ends with its key list (the valid user keys,
//! prefix-compressed: merges and the filter rebuild never read clean data blocks), a block
//! index listing every block (handle, first and last key, valid or dirty, counts), a
//! filter over the keys, the properties of the valid entries, the lookup index (one
//! separator and handle per valid block) and a footer with its own magic. Valid blocks' key
//! ranges never overlap, so a point lookup is filter -> search of the lookup index -> at
//! most one data-block read; opening a table reads only the filter, properties and lookup
//! index (as much as a sorted table's open), and keeps the filter and lookup index in
//! memory. Byte layout: docs/FORMAT.md, "Semi-sorted tables".
//!
//! A new generation is appended to a *copy* of the table's name: the previous generation's
//! file N is hard-linked to a new number M, M is cut back to N's recorded size (dropping
//! what a crashed earlier append left), the new blocks and metadata are appended and
//! synced, and the version edit replaces N by M with M's new logical size. Bytes below a
//! generation's recorded size never change, so readers of N are undisturbed, a crash before
//! the edit leaves M an orphan, and readers locate the footer from the recorded size, not
//! the file's length.
//!
//! Owns the format (`layout`), writing a generation (`writer`), opening and reading one
//! back (`reader`) and verifying it (`verify`). Which tables are semi-sorted, and when a
//! merge appends rather than rewrites, is compaction's business.

mod layout;
mod reader;
mod verify;
mod writer;

pub use layout::{BlockStats, SemiBlock, SemiFooter, SEMI_FOOTER_LEN, SEMI_MAGIC, SEMI_VERSION};
pub use reader::{has_semi_magic, open, read_generation, SemiOpen, SemiSummary};
pub use verify::verify;
pub use writer::{GenerationWriter, PriorGeneration};

#[cfg(test)]
mod tests;

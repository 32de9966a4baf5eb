//! Opening a semi-sorted table: its footer at the logical end the manifest recorded, the
//! metadata after the key list in one read, and the block index turned into the in-memory
//! lookup structure a sorted table has (one user-key separator and handle per valid block,
//! in key order, prefix-compressed): the rest of the reader (`super::super::table`) then
//! serves point lookups and iterators unchanged, at most one data-block read per lookup.
//! Also reads a generation back whole (index and key list) for merges and verification.
//! Owns these reads; the table type that holds the result is not its business.

use super::layout::{decode_index, SemiBlock, SemiFooter, SEMI_FOOTER_LEN, SEMI_MAGIC};
use super::writer::PriorGeneration;
use crate::coding::decode_fixed64;
use crate::env::{IoCause, RandomAccessFile};
use crate::sst::block::{Block, BlockBuilder};
use crate::sst::format::{
    parse_block, read_block_contents, shortest_separator, unframe_block, BlockHandle,
    BLOCK_TRAILER_LEN,
};
use crate::sst::{TableProperties, INDEX_RESTART_INTERVAL};
use crate::{Error, Result};
use bytes::Bytes;

/// True if `tail` (the last bytes before a table's logical end) ends with the
/// semi-sorted magic.
pub fn has_semi_magic(tail: &[u8]) -> bool {
    tail.len() >= SEMI_FOOTER_LEN && decode_fixed64(&tail[tail.len() - 8..]) == SEMI_MAGIC
}

/// How much of a semi-sorted table is live: valid blocks, and dirty ones (garbage until
/// the table is rewritten).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SemiSummary {
    /// Valid data blocks.
    pub valid_blocks: u64,
    /// Dirty data blocks.
    pub dirty_blocks: u64,
    /// Stored bytes of valid blocks.
    pub valid_bytes: u64,
    /// Stored bytes of dirty blocks.
    pub dirty_bytes: u64,
}

/// What an open semi-sorted table keeps.
pub struct SemiOpen {
    /// One entry per valid block: a user-key separator and the block's handle.
    pub index: Block,
    /// The filter over the valid user keys.
    pub filter: Option<Bytes>,
    /// The properties of the valid entries.
    pub props: TableProperties,
    /// Where the current generation's metadata starts (every valid block lies before).
    pub data_end: u64,
    /// The footer (to read the key list and index again).
    pub footer: SemiFooter,
    /// Valid and dirty blocks and bytes.
    pub summary: SemiSummary,
    /// Bytes read after the footer (the metadata).
    pub read_bytes: u64,
}

fn corrupt(file: &RandomAccessFile, offset: u64, reason: impl Into<String>) -> Error {
    Error::corruption(file.path(), offset, reason)
}

/// Opens the semi-sorted table whose logical size is `size`, given its last
/// [`SEMI_FOOTER_LEN`] bytes.
pub fn open(file: &RandomAccessFile, size: u64, tail: &[u8], cause: IoCause) -> Result<SemiOpen> {
    let footer_offset = size - SEMI_FOOTER_LEN as u64;
    let footer = SemiFooter::decode(tail, size).map_err(|e| corrupt(file, footer_offset, e))?;
    // Everything after the key list, in one read.
    let start = [footer.filter, footer.properties, footer.index]
        .iter()
        .filter(|h| h.size > 0)
        .map(|h| h.offset)
        .min()
        .unwrap_or(footer.index.offset);
    let meta = file.read_at(start, (footer_offset - start) as usize, cause)?;
    let block_at = |h: BlockHandle| -> Result<Bytes> {
        let outside = || corrupt(file, h.offset, "metadata block outside its region");
        let from = h.offset.checked_sub(start).ok_or_else(outside)? as usize;
        let to = from + h.size as usize + BLOCK_TRAILER_LEN;
        unframe_block(meta.get(from..to).ok_or_else(outside)?, file, h.offset)
    };
    let data_end = footer.meta_start();
    let blocks = decode_index(&block_at(footer.index)?, data_end)
        .map_err(|e| corrupt(file, footer.index.offset, format!("semi-sorted index: {e}")))?;
    let props = TableProperties::decode(&block_at(footer.properties)?)
        .ok_or_else(|| corrupt(file, footer.properties.offset, "malformed properties block"))?;
    let filter = (footer.filter.size > 0)
        .then(|| block_at(footer.filter))
        .transpose()?;
    let mut summary = SemiSummary::default();
    for b in &blocks {
        if b.valid {
            summary.valid_blocks += 1;
            summary.valid_bytes += b.stored_len();
        } else {
            summary.dirty_blocks += 1;
            summary.dirty_bytes += b.stored_len();
        }
    }
    let valid = &blocks[..summary.valid_blocks as usize];
    if valid.is_empty() {
        return Err(corrupt(file, footer.index.offset, "no valid block"));
    }
    Ok(SemiOpen {
        index: lookup_index(valid)
            .map_err(|e| corrupt(file, footer.index.offset, format!("semi-sorted index: {e}")))?,
        filter,
        props,
        data_end,
        footer,
        summary,
        read_bytes: meta.len() as u64,
    })
}

/// The in-memory index of valid blocks (in key order, ranges disjoint): the same
/// structure and separators as a sorted table's version-2 index, so a seek by user key
/// lands on the only block that can hold it.
fn lookup_index(valid: &[SemiBlock]) -> std::result::Result<Block, &'static str> {
    let mut b = BlockBuilder::new(INDEX_RESTART_INTERVAL);
    let mut handle = Vec::with_capacity(16);
    for (i, blk) in valid.iter().enumerate() {
        let sep = match valid.get(i + 1) {
            Some(next) => shortest_separator(blk.last_user_key(), next.first_user_key()),
            None => blk.last_user_key().to_vec(),
        };
        handle.clear();
        blk.handle.encode_varint(&mut handle);
        b.add(&sep, &handle);
    }
    Block::new(Bytes::from(b.finish()))
}

/// Reads a generation back whole from disk: its block index, its key list (checked to be
/// strictly increasing) and its properties. Merges continue from it; verification checks
/// the blocks against it.
pub fn read_generation(
    file: &RandomAccessFile,
    footer: &SemiFooter,
    cause: IoCause,
) -> Result<PriorGeneration> {
    let data_end = footer.meta_start();
    let index = read_block_contents(file, footer.index, cause)?;
    let blocks = decode_index(&index, data_end)
        .map_err(|e| corrupt(file, footer.index.offset, format!("semi-sorted index: {e}")))?;
    let props = TableProperties::decode(&read_block_contents(file, footer.properties, cause)?)
        .ok_or_else(|| corrupt(file, footer.properties.offset, "malformed properties block"))?;
    let key_block = parse_block(
        read_block_contents(file, footer.keys, cause)?,
        file,
        footer.keys.offset,
    )?;
    let bad_keys = |e: &str| corrupt(file, footer.keys.offset, format!("key list: {e}"));
    key_block.check_restarts().map_err(bad_keys)?;
    let mut keys: Vec<Vec<u8>> = Vec::new();
    let mut it = key_block.iter();
    it.seek_to_first().map_err(bad_keys)?;
    while it.valid() {
        if keys.last().is_some_and(|p| p.as_slice() >= it.key()) {
            return Err(bad_keys("keys out of order"));
        }
        keys.push(it.key().to_vec());
        it.next().map_err(bad_keys)?;
    }
    Ok(PriorGeneration {
        blocks,
        keys,
        props,
    })
}

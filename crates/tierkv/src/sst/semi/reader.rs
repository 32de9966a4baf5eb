//! Opening a semi-sorted table: its footer at the logical end the manifest recorded, then
//! in one read the filter, properties and the lookup index a reader keeps (one user-key
//! separator and handle per valid block, in key order, prefix-compressed; a version-1
//! table has none stored and its block index is read instead and turned into it): the
//! rest of the reader (`super::super::table`) then serves point lookups and iterators
//! unchanged, at most one data-block read per lookup. Also reads a generation back whole
//! (block index and key list) for merges and verification. Owns these reads; the table
//! type that holds the result is not its business.

use super::layout::{decode_index, lookup_index, SemiFooter, SEMI_FOOTER_V1_LEN, SEMI_MAGIC};
use super::writer::PriorGeneration;
use crate::coding::decode_fixed64;
use crate::env::{IoCause, RandomAccessFile};
use crate::error::{Error, Result};
use crate::sst::block::Block;
use crate::sst::format::{
    parse_block, parse_block_as, read_block_contents, unframe_block, BlockHandle, BLOCK_TRAILER_LEN,
};
use crate::sst::TableProperties;
use bytes::Bytes;

/// True if `tail` (the last bytes before a table's logical end) ends with the
/// semi-sorted magic.
pub fn has_semi_magic(tail: &[u8]) -> bool {
    tail.len() >= SEMI_FOOTER_V1_LEN && decode_fixed64(&tail[tail.len() - 8..]) == SEMI_MAGIC
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
    /// Bytes read after the footer (the metadata).
    pub read_bytes: u64,
}

fn corrupt(file: &RandomAccessFile, offset: u64, reason: impl Into<String>) -> Error {
    Error::corruption(file.path(), offset, reason)
}

/// Opens the semi-sorted table whose logical size is `size`, given its last bytes `tail`
/// (at least its footer; [`super::SEMI_FOOTER_LEN`] serves either version).
pub fn open(file: &RandomAccessFile, size: u64, tail: &[u8], cause: IoCause) -> Result<SemiOpen> {
    let footer = SemiFooter::decode(tail, size)
        .map_err(|e| corrupt(file, size.saturating_sub(tail.len() as u64), e))?;
    let footer_offset = size - footer.encoded_len() as u64;
    // Everything after the key list (and in version 2 the block index), in one read.
    let start = footer.open_start();
    let meta = file.read_at(start, (footer_offset - start) as usize, cause)?;
    let block_at = |h: BlockHandle| -> Result<Bytes> {
        let outside = || corrupt(file, h.offset, "metadata block outside its region");
        let from = h.offset.checked_sub(start).ok_or_else(outside)? as usize;
        let to = from + h.size as usize + BLOCK_TRAILER_LEN;
        unframe_block(meta.get(from..to).ok_or_else(outside)?, file, h.offset)
    };
    let data_end = footer.meta_start();
    let props = TableProperties::decode(&block_at(footer.properties)?)
        .ok_or_else(|| corrupt(file, footer.properties.offset, "malformed properties block"))?;
    let filter = (footer.filter.size > 0)
        .then(|| block_at(footer.filter))
        .transpose()?;
    let index = match footer.lookup {
        // Handles are checked against the data blocks' end when a lookup decodes them, as
        // a sorted table's are; `tierkv check` compares the entries with the block index.
        Some(h) => parse_block_as(block_at(h)?, footer.lookup_coding(), file, h.offset)?,
        None => {
            let blocks = decode_index(&block_at(footer.index)?, data_end).map_err(|e| {
                corrupt(file, footer.index.offset, format!("semi-sorted index: {e}"))
            })?;
            let valid: Vec<_> = blocks.into_iter().take_while(|b| b.valid).collect();
            if valid.is_empty() {
                return Err(corrupt(file, footer.index.offset, "no valid block"));
            }
            let coding = footer.lookup_coding();
            Block::with_coding(Bytes::from(lookup_index(&valid)), coding).map_err(|e| {
                corrupt(file, footer.index.offset, format!("semi-sorted index: {e}"))
            })?
        }
    };
    if props.num_data_blocks == 0 {
        return Err(corrupt(file, footer.properties.offset, "no valid block"));
    }
    Ok(SemiOpen {
        index,
        filter,
        props,
        data_end,
        footer,
        read_bytes: meta.len() as u64,
    })
}

impl SemiSummary {
    /// The valid and dirty blocks of a generation read back ([`read_generation`]).
    pub fn of(generation: &PriorGeneration) -> SemiSummary {
        let mut summary = SemiSummary::default();
        for b in &generation.blocks {
            if b.valid {
                summary.valid_blocks += 1;
                summary.valid_bytes += b.stored_len();
            } else {
                summary.dirty_blocks += 1;
                summary.dirty_bytes += b.stored_len();
            }
        }
        summary
    }
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

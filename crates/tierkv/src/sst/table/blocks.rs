//! One data block by its handle, as every reader takes it: through the block cache or
//! bypassing it, read from disk on its own, or sliced out of a span a compaction read;
//! each checked (framing, checksum, decoding) before it is handed out. Which block a reader
//! wants (filter, index, readahead windows) is not this file's business.

use super::open::Table;
use crate::env::IoCause;
use crate::error::Result;
use crate::sst::block::Block;
use crate::sst::format::{
    parse_block, read_block_contents, unframe_block, BlockHandle, BLOCK_TRAILER_LEN,
};
use bytes::Bytes;

impl Table {
    /// The stored length (contents and trailer) of the block at `h`: what a read of it
    /// moves.
    pub fn framed_len(&self, h: BlockHandle) -> Result<usize> {
        usize::try_from(h.size)
            .ok()
            .and_then(|s| s.checked_add(BLOCK_TRAILER_LEN))
            .ok_or_else(|| self.corrupt(h.offset, "block handle size overflows"))
    }

    /// A data block through the block cache.
    pub(super) fn data_block(
        &self,
        h: BlockHandle,
        cause: IoCause,
        fill_cache: bool,
    ) -> Result<Block> {
        if let Some(cache) = &self.cache {
            if let Some(b) = cache.get_block(self.number, h.offset) {
                return Ok(b);
            }
        }
        let block = parse_block(
            read_block_contents(&self.file, h, cause)?,
            &self.file,
            h.offset,
        )?;
        if fill_cache {
            if let Some(cache) = &self.cache {
                cache.insert_block(self.number, h.offset, block.clone());
            }
        }
        Ok(block)
    }

    /// Reads the data block at `h` (a handle of this table) from disk, bypassing the block
    /// cache (a compaction reading the blocks it rewrites).
    pub fn read_block(&self, h: BlockHandle, cause: IoCause) -> Result<Block> {
        self.data_block(h, cause, false)
    }

    /// Reads the data block at `h` from disk (one read) and enters it in the block cache.
    pub fn read_data_block(&self, h: BlockHandle, cause: IoCause) -> Result<Block> {
        let framed = self.file.read_at(h.offset, self.framed_len(h)?, cause)?;
        self.block_from_disk(h, &framed)
    }

    /// The data block at `h` from its stored bytes as read (`framed_len` bytes at its
    /// offset): checks and decodes it and enters it in the block cache.
    pub fn block_from_disk(&self, h: BlockHandle, framed: &[u8]) -> Result<Block> {
        let contents = unframe_block(framed, &self.file, h.offset)?;
        let block = parse_block(contents, &self.file, h.offset)?;
        if let Some(cache) = &self.cache {
            cache.insert_block(self.number, h.offset, block.clone());
        }
        Ok(block)
    }

    /// Reads `len` bytes of data blocks from `offset` in one call, bypassing the block
    /// cache: a compaction reading several blocks that lie close together in the file
    /// ([`Table::block_in_span`] takes each out), so a slow disk sees one read, not one
    /// per block. The span must lie within one run of data blocks.
    pub fn read_data_span(&self, offset: u64, len: usize, cause: IoCause) -> Result<Bytes> {
        let end = offset.checked_add(len as u64);
        if end.is_none_or(|e| e > self.run_end(offset)) {
            return Err(self.corrupt(offset, "block span runs past its run of data blocks"));
        }
        Ok(Bytes::from(self.file.read_at(offset, len, cause)?))
    }

    /// The data block at `h` out of `span`, the bytes [`Table::read_data_span`] read
    /// from `span_offset` (checksum verified, as [`Table::read_block`] would).
    pub fn block_in_span(&self, span: &Bytes, span_offset: u64, h: BlockHandle) -> Result<Block> {
        let len = h.size as usize + BLOCK_TRAILER_LEN;
        let from = h
            .offset
            .checked_sub(span_offset)
            .and_then(|f| usize::try_from(f).ok())
            .filter(|f| f.checked_add(len).is_some_and(|e| e <= span.len()))
            .ok_or_else(|| self.corrupt(h.offset, "block lies outside the span read for it"))?;
        let contents = unframe_block(&span[from..from + len], &self.file, h.offset)?;
        parse_block(contents, &self.file, h.offset)
    }
}

//! Point lookups: the filter, then the index, then one data block (from the block cache or
//! one read), searched for the newest version of the key the seek key can see. A lookup
//! comes in two halves, [`Table::locate`] from memory and [`Table::search_block`] once the
//! block is read, so a batch of lookups can read its blocks together. Builds on the open
//! table and its block reads; readahead and iteration are not its business, and nothing
//! here serves them.

use super::open::Table;
use crate::env::IoCause;
use crate::error::Result;
use crate::key::user_key;
use crate::sst::block::Block;
use crate::sst::filter::may_contain;
use crate::sst::format::{BlockHandle, BLOCK_TRAILER_LEN};
use bytes::Bytes;

/// Where a point lookup's entry would be, as far as memory tells ([`Table::locate`]).
pub enum BlockLookup {
    /// The table does not hold the key (its filter says so, or no block covers it).
    Absent,
    /// The block that would hold it, from the block cache.
    Cached(BlockHandle, Block),
    /// The block that would hold it must be read from disk.
    Read(BlockHandle),
}

impl Table {
    /// The first entry at or after `seek_key` (an internal key, see
    /// [`crate::key::seek_key`]) if it has the same user key: the newest version of that
    /// key visible at the seek key's sequence number.
    pub fn get(&self, seek_key: &[u8], cause: IoCause) -> Result<Option<(Bytes, Bytes)>> {
        Ok(self
            .get_with_handle(seek_key, cause)?
            .map(|(k, v, _)| (k, v)))
    }

    /// True when the in-memory filter proves the table holds no version of user key
    /// `ukey` (no I/O; false without a filter or when the key may be there).
    pub fn filter_excludes(&self, ukey: &[u8]) -> bool {
        self.filter.as_ref().is_some_and(|f| !may_contain(f, ukey))
    }

    /// [`Table::get`], also returning the handle of the data block that held the entry
    /// (what a KP cache entry points at).
    pub fn get_with_handle(
        &self,
        seek_key: &[u8],
        cause: IoCause,
    ) -> Result<Option<(Bytes, Bytes, BlockHandle)>> {
        let found = match self.locate(seek_key)? {
            BlockLookup::Absent => None,
            BlockLookup::Cached(h, block) => {
                self.search_block(&block, h, seek_key)?.map(|e| (e, h))
            }
            BlockLookup::Read(h) => {
                let block = self.read_data_block(h, cause)?;
                self.search_block(&block, h, seek_key)?.map(|e| (e, h))
            }
        };
        Ok(found.map(|((k, v), h)| (k, v, h)))
    }

    /// The first half of a point lookup, from memory alone (filter, index, block cache):
    /// whether the table may hold `seek_key`'s user key and where. A
    /// [`BlockLookup::Read`] is finished by reading the block (one at a time with
    /// [`Table::read_data_block`], or batched with [`Table::block_from_disk`]) and then
    /// [`Table::search_block`].
    pub fn locate(&self, seek_key: &[u8]) -> Result<BlockLookup> {
        if let Some(f) = &self.filter {
            if !may_contain(f, user_key(seek_key)) {
                return Ok(BlockLookup::Absent);
            }
        }
        Ok(match self.block_handle_for(seek_key)? {
            Some(h) => self.locate_block(h),
            None => BlockLookup::Absent,
        })
    }

    /// True when a lookup of `seek_key` here reads no disk: the filter or the index rules
    /// the key out, or its data block is in the block cache. Counts and touches nothing
    /// in the cache.
    pub fn lookup_needs_no_read(&self, seek_key: &[u8]) -> Result<bool> {
        if self.filter_excludes(user_key(seek_key)) {
            return Ok(true);
        }
        Ok(match self.block_handle_for(seek_key)? {
            Some(h) => self.block_needs_no_read(h),
            None => true,
        })
    }

    /// True when [`Table::locate_block`] of `h` reads no disk: `h` lies outside the data
    /// blocks or the block is cached. Counts and touches nothing in the cache.
    pub fn block_needs_no_read(&self, h: BlockHandle) -> bool {
        !self.in_data_blocks(h)
            || self
                .cache
                .as_ref()
                .is_some_and(|c| c.holds_block(self.number, h.offset))
    }

    /// True when the block at `h`, with its trailer, lies within the data blocks.
    fn in_data_blocks(&self, h: BlockHandle) -> bool {
        h.offset
            .checked_add(h.size)
            .and_then(|e| e.checked_add(BLOCK_TRAILER_LEN as u64))
            .is_some_and(|e| e <= self.data_end)
    }

    /// [`Table::locate`] for a known handle (as a KP cache entry keeps it): absent when it
    /// lies outside the data blocks, else the cached block or the read it needs.
    pub fn locate_block(&self, h: BlockHandle) -> BlockLookup {
        if !self.in_data_blocks(h) {
            return BlockLookup::Absent;
        }
        if let Some(cache) = &self.cache {
            if let Some(b) = cache.get_block(self.number, h.offset) {
                return BlockLookup::Cached(h, b);
            }
        }
        BlockLookup::Read(h)
    }

    /// The second half of a point lookup: in `block` (the data block at `h`), the first
    /// entry at or after `seek_key`, if it has the same user key.
    pub fn search_block(
        &self,
        block: &Block,
        h: BlockHandle,
        seek_key: &[u8],
    ) -> Result<Option<(Bytes, Bytes)>> {
        let mut it = block.iter();
        it.seek(seek_key).map_err(|e| self.corrupt(h.offset, e))?;
        if it.valid() && user_key(it.key()) == user_key(seek_key) {
            return Ok(Some((Bytes::copy_from_slice(it.key()), it.value_bytes())));
        }
        Ok(None)
    }

    /// The handle of the data block where `seek_key` would be (index only, no I/O).
    pub fn block_handle_for(&self, seek_key: &[u8]) -> Result<Option<BlockHandle>> {
        let mut idx = self.index.iter();
        self.seek_index(&mut idx, seek_key)?;
        if !idx.valid() {
            return Ok(None);
        }
        Ok(Some(self.index_handle(&idx)?))
    }

    /// Looks `seek_key` up in the data block at `h` (a handle this table's index gave, as
    /// kept by a KP cache entry): the first entry at or after it, if it has the same user
    /// key. A handle outside the data blocks finds nothing.
    pub fn get_in_block(
        &self,
        h: BlockHandle,
        seek_key: &[u8],
        cause: IoCause,
    ) -> Result<Option<(Bytes, Bytes)>> {
        match self.locate_block(h) {
            BlockLookup::Absent => Ok(None),
            BlockLookup::Cached(h, block) => self.search_block(&block, h, seek_key),
            BlockLookup::Read(h) => {
                self.search_block(&self.read_data_block(h, cause)?, h, seek_key)
            }
        }
    }
}

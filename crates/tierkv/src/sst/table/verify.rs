//! Verifying a table: every data block read from disk (not the cache) and checked
//! (checksums, entry structure, key order, the index's keys and handles, the filter
//! against every user key, the properties' entry count); a semi-sorted table is `semi`'s
//! to verify. Reads through `readahead`'s windows; changes nothing and serves no reader.

use super::open::Table;
use super::readahead::Readahead;
use crate::env::IoCause;
use crate::error::Result;
use crate::key::{compare_internal, parse_internal_key, user_key};
use crate::sst::filter::may_contain;
use crate::sst::format::BLOCK_TRAILER_LEN;
use crate::sst::semi;
use std::sync::Arc;

impl Table {
    /// Reads every data block from disk (not the cache), checking checksums, entry
    /// structure, key order and the index; returns the number of entries.
    pub fn verify(self: &Arc<Self>, cause: IoCause) -> Result<u64> {
        if let Some(footer) = &self.semi {
            return semi::verify(
                &self.file,
                footer,
                self.filter.as_deref(),
                &self.props,
                cause,
            );
        }
        let mut ra = Readahead::default();
        self.index
            .check_restarts()
            .map_err(|e| self.index_error(e))?;
        let mut idx = self.index.iter();
        idx.seek_to_first().map_err(|e| self.index_error(e))?;
        let mut entries = 0u64;
        let mut prev: Option<Vec<u8>> = None;
        let mut prev_index_key: Option<Vec<u8>> = None;
        let mut expected_offset = 0u64;
        while idx.valid() {
            let h = self.index_handle(&idx)?;
            if h.offset != expected_offset {
                return Err(self.index_error("data blocks are not contiguous"));
            }
            expected_offset = h.offset + h.size + BLOCK_TRAILER_LEN as u64;
            let block = ra.block(self, h, &idx, cause)?;
            block
                .check_restarts()
                .map_err(|e| self.corrupt(h.offset, e))?;
            let mut it = block.iter();
            it.seek_to_first().map_err(|e| self.corrupt(h.offset, e))?;
            if !it.valid() {
                return Err(self.corrupt(h.offset, "empty data block"));
            }
            // A user-key index: the separator before this block lies below its first key.
            if self.user_key_index
                && prev_index_key
                    .as_deref()
                    .is_some_and(|p| p >= user_key(it.key()))
            {
                return Err(self.index_error("a separator is not below its next block's keys"));
            }
            while it.valid() {
                if parse_internal_key(it.key()).is_none() {
                    return Err(self.corrupt(h.offset, "malformed internal key"));
                }
                if prev
                    .as_deref()
                    .is_some_and(|p| compare_internal(p, it.key()).is_ge())
                {
                    return Err(self.corrupt(h.offset, "keys out of order"));
                }
                // Gets trust the filter: one that denies a key the table holds (a forged
                // or miswritten filter block) would make the key read as absent.
                let new_user_key = prev
                    .as_deref()
                    .is_none_or(|p| user_key(p) != user_key(it.key()));
                if new_user_key {
                    if let Some(f) = &self.filter {
                        if !may_contain(f, user_key(it.key())) {
                            return Err(self.corrupt(
                                self.data_end,
                                "the filter denies a key the table holds",
                            ));
                        }
                    }
                }
                prev = Some(it.key().to_vec());
                entries += 1;
                it.next().map_err(|e| self.corrupt(h.offset, e))?;
            }
            let last = prev.as_deref().unwrap_or_default();
            if self.user_key_index {
                if idx.key() < user_key(last) {
                    return Err(self.index_error("a separator is below its block's last key"));
                }
                prev_index_key = Some(idx.key().to_vec());
            } else if last != idx.key() {
                return Err(self.index_error("index key differs from its block's last key"));
            }
            idx.next().map_err(|e| self.index_error(e))?;
        }
        if expected_offset != self.data_end {
            return Err(self.index_error("index does not cover every data block"));
        }
        if entries != self.props.num_entries {
            return Err(self.corrupt(
                self.data_end,
                format!(
                    "properties count {} entries, the blocks hold {entries}",
                    self.props.num_entries
                ),
            ));
        }
        Ok(entries)
    }
}

//! Iterating a table: the two-level cursor over its entries ([`TableIterator`]: the index
//! picks the data block, the block's cursor the entry, each step checked to keep key
//! order) and the cursor over its data blocks as stored ([`DataBlocks`]), for a compaction
//! that copies untouched blocks. Blocks come through readahead (`readahead` for compaction
//! and checks, `scan_readahead` for user scans) or one at a time; how a window is read is
//! not its business, nor are point lookups.

use super::open::Table;
use super::readahead::{Fit, Readahead};
use super::scan_readahead::{Arrival, ScanReadahead, SeekPlan};
use crate::env::{IoCause, RoundRead};
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::compare_internal;
use crate::sst::block::{Block, BlockIter};
use bytes::Bytes;
use std::sync::{Arc, OnceLock};

impl Table {
    /// A cursor over every entry. `fill_cache` decides whether blocks it reads enter the
    /// block cache; compaction and verification read ahead instead.
    pub fn iter(self: &Arc<Self>, cause: IoCause, fill_cache: bool) -> TableIterator {
        let readahead = matches!(cause, IoCause::Compaction | IoCause::Check);
        TableIterator {
            table: self.clone(),
            cause,
            fill_cache,
            index: self.index.iter(),
            data: None,
            data_offset: 0,
            readahead: readahead.then(Readahead::default),
            scan_readahead: (cause == IoCause::UserScan).then(ScanReadahead::new),
            prev_key: Vec::new(),
        }
    }

    /// A cursor over the data blocks with their stored bytes (see [`RawBlock`]); reads
    /// ahead and bypasses the block cache, like a compaction's table iterator.
    pub fn data_blocks(self: &Arc<Self>, cause: IoCause) -> DataBlocks {
        DataBlocks {
            table: self.clone(),
            cause,
            index: self.index.iter(),
            started: false,
            readahead: Readahead::default(),
        }
    }
}

/// One data block as a compaction sees it: the bytes exactly as stored in its table
/// (contents and trailer, checksum already verified), the decoded block, and its last
/// internal key. A [`crate::sst::TableBuilder`] can append it verbatim.
#[derive(Clone)]
pub struct RawBlock {
    pub(in crate::sst) framed: Bytes,
    pub(in crate::sst) block: Block,
    pub(in crate::sst) last_key: Bytes,
    offset: u64,
}

impl RawBlock {
    /// The decoded block.
    pub fn block(&self) -> &Block {
        &self.block
    }

    /// Its last internal key.
    pub fn last_key(&self) -> &[u8] {
        &self.last_key
    }

    /// Bytes it occupies in a table, trailer included.
    pub fn stored_len(&self) -> u64 {
        self.framed.len() as u64
    }

    /// Its offset in the table it was read from (for error messages).
    pub fn offset(&self) -> u64 {
        self.offset
    }
}

/// A forward cursor over a table's data blocks with readahead, for compaction: every block
/// comes with its stored bytes so that an untouched one can be copied, not re-encoded.
pub struct DataBlocks {
    table: Arc<Table>,
    cause: IoCause,
    index: BlockIter,
    started: bool,
    readahead: Readahead,
}

impl DataBlocks {
    /// The next data block, `None` after the last.
    pub fn next_block(&mut self) -> Result<Option<RawBlock>> {
        if self.started {
            self.index.next().map_err(|e| self.table.index_error(e))?;
        } else {
            self.index
                .seek_to_first()
                .map_err(|e| self.table.index_error(e))?;
            self.started = true;
        }
        if !self.index.valid() {
            return Ok(None);
        }
        let h = self.table.index_handle(&self.index)?;
        let (framed, block) =
            self.readahead
                .framed_block(&self.table, h, &self.index, self.cause)?;
        // From the block itself: a version-2 index holds a separator, not the last key.
        let mut it = block.iter();
        it.seek_to_last()
            .map_err(|e| self.table.corrupt(h.offset, e))?;
        if !it.valid() {
            return Err(self.table.corrupt(h.offset, "empty data block"));
        }
        let last_key = Bytes::copy_from_slice(it.key());
        Ok(Some(RawBlock {
            framed,
            block,
            last_key,
            offset: h.offset,
        }))
    }

    /// A corruption error at `offset` of this table.
    pub fn corrupt(&self, offset: u64, reason: impl Into<String>) -> Error {
        self.table.corrupt(offset, reason)
    }
}

/// Two-level cursor over a table: the index picks the data block, the block's cursor the
/// entry.
pub struct TableIterator {
    table: Arc<Table>,
    cause: IoCause,
    fill_cache: bool,
    index: BlockIter,
    data: Option<BlockIter>,
    data_offset: u64,
    readahead: Option<Readahead>,
    /// A user iterator's adaptive readahead.
    scan_readahead: Option<ScanReadahead>,
    /// The key before the last step. Checksums only prove a block is what was written: a
    /// forged or miswritten table whose entries are out of order must read as corrupt,
    /// never hand keys out of order to a merge that relies on the order.
    prev_key: Vec<u8>,
}

impl TableIterator {
    /// A user iterator expecting a forward scan from each seek to read about `entries`
    /// of this table's entries (a mean) reads them in one window at the seek (sized by
    /// the table's stored bytes per entry) rather than block by block. Changes only how
    /// the table is read, never what the iterator returns. `None`: no expectation.
    pub fn expect_scan(mut self, entries: Option<f64>) -> TableIterator {
        let Some(entries) = entries else {
            return self;
        };
        // How many of a scan's entries come from one table varies from scan to scan:
        // the window covers the mean and two standard deviations of a count (2√n), so
        // a scan seldom outruns it (which costs another read, and a readahead window
        // mostly past the scan's end).
        let entries = entries + 2.0 * entries.max(0.0).sqrt();
        let bytes = entries * self.table.stored_bytes_per_entry();
        let slack = self.table.scan_slack();
        if let Some(sra) = self.scan_readahead.as_mut() {
            // `as` saturates: a huge expectation is capped by the window's maximum.
            sra.planned = (bytes as u64).saturating_add(slack);
        }
        self
    }

    fn data_error(&self, reason: &str) -> Error {
        self.table.corrupt(self.data_offset, reason)
    }

    fn remember_key(&mut self) {
        if let Some(d) = &self.data {
            self.prev_key.clear();
            self.prev_key.extend_from_slice(d.key());
        }
    }

    /// After a step, the new key must be on the `want` side of the one before.
    fn check_step(&mut self, want: std::cmp::Ordering) -> Result<()> {
        if self.valid() && compare_internal(&self.prev_key, self.key()) != want {
            self.data = None;
            return Err(self.data_error("keys out of order"));
        }
        Ok(())
    }

    /// Loads the block the index cursor points at (or clears it when the index is done);
    /// `arrival`: how the cursor got there.
    fn load_block(&mut self, arrival: Arrival) -> Result<()> {
        if !self.index.valid() {
            self.data = None;
            return Ok(());
        }
        let h = self.table.index_handle(&self.index)?;
        let block = match (self.readahead.as_mut(), self.scan_readahead.as_mut()) {
            (Some(ra), _) => ra.block(&self.table, h, &self.index, self.cause)?,
            (None, Some(sra)) => sra.block(
                &self.table,
                h,
                &self.index,
                arrival,
                self.cause,
                self.fill_cache,
            )?,
            (None, None) => self.table.data_block(h, self.cause, self.fill_cache)?,
        };
        self.data_offset = h.offset;
        self.data = Some(block.iter());
        Ok(())
    }

    fn skip_forward(&mut self) -> Result<()> {
        while self.data.as_ref().is_some_and(|d| !d.valid()) {
            self.index.next().map_err(|e| self.table.index_error(e))?;
            self.load_block(Arrival::Step)?;
            if let Some(d) = self.data.as_mut() {
                let r = d.seek_to_first();
                r.map_err(|e| self.data_error(e))?;
            }
        }
        Ok(())
    }

    fn skip_backward(&mut self) -> Result<()> {
        while self.data.as_ref().is_some_and(|d| !d.valid()) {
            self.index.prev().map_err(|e| self.table.index_error(e))?;
            self.load_block(Arrival::Back)?;
            if let Some(d) = self.data.as_mut() {
                let r = d.seek_to_last();
                r.map_err(|e| self.data_error(e))?;
            }
        }
        Ok(())
    }

    /// Runs a positioning call on the data cursor, then skips exhausted blocks.
    fn on_data(
        &mut self,
        forward: bool,
        f: impl FnOnce(&mut BlockIter) -> std::result::Result<(), &'static str>,
    ) -> Result<()> {
        if let Some(d) = self.data.as_mut() {
            if let Err(e) = f(d) {
                self.data = None;
                return Err(self.data_error(e));
            }
        }
        if forward {
            self.skip_forward()
        } else {
            self.skip_backward()
        }
    }
}

impl InternalIterator for TableIterator {
    fn valid(&self) -> bool {
        self.data.as_ref().is_some_and(|d| d.valid())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.index
            .seek_to_first()
            .map_err(|e| self.table.index_error(e))?;
        self.load_block(Arrival::Seek)?;
        self.on_data(true, |d| d.seek_to_first())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.index
            .seek_to_last()
            .map_err(|e| self.table.index_error(e))?;
        self.load_block(Arrival::Back)?;
        self.on_data(false, |d| d.seek_to_last())
    }

    /// Plans the reads a user scan's seek to `target` starts with: its first block taken
    /// from the block cache now if it is there (one lookup, as the seek would make), else
    /// that block's read, or the window's when the scan is expected to go on past it
    /// ([`TableIterator::expect_scan`]), for the caller's round
    /// ([`crate::env::read_round`]). Compactions and point reads plan nothing.
    fn plan_seek(&mut self, target: &[u8], reads: &mut Vec<RoundRead>) {
        let Some(sra) = self.scan_readahead.as_mut() else {
            return;
        };
        sra.seek_plan = None;
        let table = &self.table;
        let mut idx = self.index.clone();
        if table.seek_index(&mut idx, target).is_err() || !idx.valid() {
            return;
        }
        let Ok(h) = table.index_handle(&idx) else {
            return;
        };
        if sra.window.covers(h) {
            return;
        }
        if let Some(b) = table
            .cache
            .as_ref()
            .and_then(|c| c.get_block(table.number, h.offset))
        {
            sra.seek_plan = Some((h.offset, SeekPlan::Cached(b)));
            return;
        }
        let Ok(len) = table.framed_len(h) else {
            return;
        };
        let expected = sra.planned.saturating_add(len as u64 / 2);
        let window = ScanReadahead::seek_window(expected, len as u64);
        let spans = match window {
            Some(w) => match table.readahead_spans(h, &idx, w, Fit::Reach) {
                Ok(spans) => spans,
                Err(_) => return,
            },
            None => vec![(h.offset, len)],
        };
        table.note_scan_spans(spans.len());
        let spans = spans
            .into_iter()
            .map(|(offset, len)| {
                let slot = Arc::new(OnceLock::new());
                reads.push(RoundRead::new(
                    table.clone(),
                    offset,
                    len,
                    self.cause,
                    slot.clone(),
                ));
                (offset, slot)
            })
            .collect();
        sra.seek_plan = Some((h.offset, SeekPlan::Reads { window, spans }));
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.table.seek_index(&mut self.index, target)?;
        self.load_block(Arrival::Seek)?;
        self.on_data(true, |d| d.seek(target))?;
        // An index whose keys disagree with its blocks can land before the target.
        if self.valid() && compare_internal(self.key(), target).is_lt() {
            self.data = None;
            return Err(self.table.index_error("seek landed before its target"));
        }
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        self.remember_key();
        self.on_data(true, |d| d.next())?;
        self.check_step(std::cmp::Ordering::Less)
    }

    fn prev(&mut self) -> Result<()> {
        self.remember_key();
        self.on_data(false, |d| d.prev())?;
        self.check_step(std::cmp::Ordering::Greater)
    }

    fn key(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], |d| d.key())
    }

    fn value(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], |d| d.value())
    }
}

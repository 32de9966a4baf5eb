//! The open table: opening one, sorted or semi-sorted (the footer, then the index, filter
//! and properties in one read), what it keeps in memory while it is open, and the index
//! helpers every reader shares (the checked handle at an index entry, the seek into the
//! index). Every other file of `table` builds on the [`Table`] defined here and this file
//! uses none of them: lookups, readahead, iteration and verification are not its business.

use crate::env::{HoldsFile, IoCause, RandomAccessFile};
use crate::error::{Error, Result};
use crate::key::user_key;
use crate::sst::block::{Block, BlockIter};
use crate::sst::format::{
    parse_block_as, unframe_block, BlockHandle, Footer, BLOCK_TRAILER_LEN, FOOTER_LEN,
};
use crate::sst::properties::TableProperties;
use crate::sst::semi::{self, PriorGeneration, SemiFooter, SemiSummary, SEMI_FOOTER_LEN};
use crate::sst::BlockCache;
use bytes::Bytes;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// What user scans have read from one table's file from disk, shared between its
/// `FileMeta` and its open [`Table`] (the picker reads it: scan defragmentation and
/// scan-triggered L0 compaction, `compaction::picker`).
#[derive(Debug, Default)]
pub struct ScanReads {
    /// Reads (a window's spans, or a single block), each one I/O.
    pub reads: AtomicU64,
    /// Of those, the reads beyond one per window: its blocks lay in several runs of the
    /// file (a semi-sorted table's appended generations; never a table in one run).
    pub split: AtomicU64,
}

/// An open table: its index, filter and properties stay in memory while it is open.
pub struct Table {
    pub(super) file: RandomAccessFile,
    pub(super) number: u64,
    pub(super) index: Block,
    /// The index is keyed by user-key separators (format version 2), not by the blocks'
    /// last internal keys.
    pub(super) user_key_index: bool,
    pub(super) index_offset: u64,
    pub(super) filter: Option<Bytes>,
    pub(super) props: TableProperties,
    pub(super) cache: Option<Arc<dyn BlockCache>>,
    /// Offset where the data blocks end (the first metadata block starts).
    pub(super) data_end: u64,
    /// A semi-sorted table's footer (`None`: a sorted table).
    pub(super) semi: Option<SemiFooter>,
    /// A semi-sorted table's runs of valid blocks that follow each other both in key
    /// order and in the file, as `(start, end)` offsets sorted by start (empty for a
    /// sorted table: its blocks are one run). A span read with `read_data_span` (a
    /// merge's dirty blocks) stays within one; readahead follows the key order across
    /// them instead (`readahead_spans`).
    pub(super) runs: Vec<(u64, u64)>,
    /// Stored bytes of the data blocks a reader sees (a semi-sorted table's valid blocks:
    /// its runs' total).
    pub(super) valid_data_bytes: u64,
    /// Bytes opening the table read (footer and metadata).
    pub(super) open_bytes: u64,
    /// What user scans read from this table. Shared with the file's `FileMeta` when the
    /// table cache opens it ([`Table::with_scan_reads`]), so the counts outlive the open
    /// table.
    pub(super) scan_reads: Arc<ScanReads>,
}

impl Table {
    /// Opens table `number` from `file`, reading and checking its footer and metadata;
    /// the table ends where the file does.
    pub fn open(
        file: RandomAccessFile,
        number: u64,
        cache: Option<Arc<dyn BlockCache>>,
        cause: IoCause,
    ) -> Result<Table> {
        let size = file.size();
        Self::open_sized(file, number, size, cache, cause)
    }

    /// Opens table `number`, sorted or semi-sorted, whose logical size is `size` (the
    /// manifest's record): a semi-sorted table's file may hold bytes past it that a
    /// crashed append left, which are ignored.
    pub fn open_sized(
        file: RandomAccessFile,
        number: u64,
        size: u64,
        cache: Option<Arc<dyn BlockCache>>,
        cause: IoCause,
    ) -> Result<Table> {
        if size > file.size() {
            return Err(Error::corruption(
                file.path(),
                file.size(),
                format!("table recorded as {size} bytes is shorter on disk"),
            ));
        }
        // One read serves either footer: the semi-sorted one is the longer.
        let tail_len = size.min(SEMI_FOOTER_LEN as u64) as usize;
        let tail = file.read_at(size - tail_len as u64, tail_len, cause)?;
        if semi::has_semi_magic(&tail) {
            let s = semi::open(&file, size, &tail, cause)?;
            let mut t = Table {
                number,
                index: s.index,
                user_key_index: true,
                index_offset: s.footer.lookup.unwrap_or(s.footer.index).offset,
                filter: s.filter,
                props: s.props,
                cache,
                data_end: s.data_end,
                semi: Some(s.footer),
                runs: Vec::new(),
                valid_data_bytes: 0,
                open_bytes: tail_len as u64 + s.read_bytes,
                scan_reads: Arc::default(),
                file,
            };
            t.runs = key_order_runs(&t.block_handles()?);
            t.valid_data_bytes = t.runs.iter().map(|r| r.1 - r.0).sum();
            return Ok(t);
        }
        if size < FOOTER_LEN as u64 {
            return Err(Error::corruption(
                file.path(),
                0,
                format!("file of {size} bytes is too short to be a table"),
            ));
        }
        let footer_offset = size - FOOTER_LEN as u64;
        let footer = Footer::decode(&tail[tail_len - FOOTER_LEN..], &file)?;
        // The metadata blocks are contiguous just before the footer: read them at once.
        let meta_start = [footer.filter, footer.properties, footer.index]
            .iter()
            .filter(|h| h.size > 0)
            .map(|h| h.offset)
            .min()
            .unwrap_or(footer_offset);
        // The tail read already holds the metadata's last bytes: read only what precedes
        // it, so opening reads each byte once.
        let tail_start = size - tail_len as u64;
        let tail_meta = &tail[..tail_len - FOOTER_LEN];
        let mut open_bytes = tail_len as u64;
        let meta = if meta_start >= tail_start {
            tail_meta[(meta_start - tail_start) as usize..].to_vec()
        } else {
            open_bytes += tail_start - meta_start;
            let mut m = file.read_at(meta_start, (tail_start - meta_start) as usize, cause)?;
            m.extend_from_slice(tail_meta);
            m
        };
        let block_at = |h: BlockHandle| -> Result<Bytes> {
            let outside =
                || Error::corruption(file.path(), h.offset, "metadata block outside its region");
            // A handle of size 0 took no part in `meta_start`, so it may lie before it.
            let from = h.offset.checked_sub(meta_start).ok_or_else(outside)? as usize;
            let to = from + h.size as usize + BLOCK_TRAILER_LEN;
            let framed = meta.get(from..to).ok_or_else(outside)?;
            unframe_block(framed, &file, h.offset)
        };
        let (index, coding) = (footer.index, footer.index_coding());
        let index = parse_block_as(block_at(index)?, coding, &file, index.offset)?;
        let props = TableProperties::decode(&block_at(footer.properties)?).ok_or_else(|| {
            Error::corruption(
                file.path(),
                footer.properties.offset,
                "malformed properties block",
            )
        })?;
        let filter = (footer.filter.size > 0)
            .then(|| block_at(footer.filter))
            .transpose()?;
        Ok(Table {
            number,
            index,
            user_key_index: footer.user_key_index(),
            index_offset: footer.index.offset,
            filter,
            props,
            cache,
            data_end: meta_start,
            semi: None,
            runs: Vec::new(),
            valid_data_bytes: meta_start,
            open_bytes,
            scan_reads: Arc::default(),
            file,
        })
    }

    /// Where the run of data blocks holding `offset` ends (see `runs`): a span read with
    /// [`Table::read_data_span`] from `offset` stays below it (a semi-sorted table's
    /// generations keep their metadata between runs; a sorted table's one run ends where
    /// its metadata starts).
    pub fn run_end(&self, offset: u64) -> u64 {
        let i = self.runs.partition_point(|r| r.0 <= offset);
        match i.checked_sub(1).map(|i| self.runs[i]) {
            Some((_, end)) if offset < end => end,
            _ => self.data_end,
        }
    }

    /// Stored bytes of data blocks per entry a reader sees (a semi-sorted table's valid
    /// blocks only).
    pub(crate) fn stored_bytes_per_entry(&self) -> f64 {
        self.valid_data_bytes as f64 / self.props.num_entries.max(1) as f64
    }

    /// Counts what user scans read from this table into `counts` instead of its own.
    pub fn with_scan_reads(mut self, counts: Arc<ScanReads>) -> Self {
        self.scan_reads = counts;
        self
    }

    /// The handles of the data blocks a reader sees, in key order (a semi-sorted table's
    /// valid blocks), from the in-memory index (no I/O).
    pub fn block_handles(&self) -> Result<Vec<BlockHandle>> {
        let mut idx = self.index.iter();
        idx.seek_to_first().map_err(|e| self.index_error(e))?;
        let mut out = Vec::new();
        while idx.valid() {
            out.push(self.index_handle(&idx)?);
            idx.next().map_err(|e| self.index_error(e))?;
        }
        Ok(out)
    }

    /// One user key per data block a reader sees, in key order, from the in-memory index
    /// (no I/O): an upper bound of the block's user keys below the next block's first
    /// (the separator of a format-2 index, the block's last key's user key before that).
    pub fn index_user_keys(&self) -> Result<Vec<Vec<u8>>> {
        let mut idx = self.index.iter();
        idx.seek_to_first().map_err(|e| self.index_error(e))?;
        let mut out = Vec::new();
        while idx.valid() {
            out.push(if self.user_key_index {
                idx.key().to_vec()
            } else {
                user_key(idx.key()).to_vec()
            });
            idx.next().map_err(|e| self.index_error(e))?;
        }
        Ok(out)
    }

    /// The user keys bounding its data blocks, from the in-memory index (no I/O): one
    /// per data block a reader sees, in key order, each at or above that block's last
    /// user key and below the next block's first (the index's separators). A block's
    /// range is then `(previous bound, its bound]`; the first starts at the table's
    /// smallest key.
    pub fn block_bounds(&self) -> Result<Vec<Vec<u8>>> {
        let mut idx = self.index.iter();
        idx.seek_to_first().map_err(|e| self.index_error(e))?;
        let mut out = Vec::new();
        while idx.valid() {
            let k = if self.user_key_index {
                idx.key()
            } else {
                user_key(idx.key())
            };
            out.push(k.to_vec());
            idx.next().map_err(|e| self.index_error(e))?;
        }
        Ok(out)
    }

    /// A semi-sorted table's valid and dirty blocks, from its block index read from disk
    /// (`None`: a sorted table).
    pub fn semi_summary(&self, cause: IoCause) -> Result<Option<SemiSummary>> {
        Ok(self.semi_generation(cause)?.map(|g| SemiSummary::of(&g)))
    }

    /// Reads a semi-sorted table's current generation back from disk (block index, key
    /// list, properties), for a merge that continues it. `None` for a sorted table.
    pub fn semi_generation(&self, cause: IoCause) -> Result<Option<PriorGeneration>> {
        self.semi
            .as_ref()
            .map(|footer| semi::read_generation(&self.file, footer, cause))
            .transpose()
    }

    /// Bytes opening the table read from disk: its footer and the metadata it keeps
    /// (filter, properties, index), not a semi-sorted table's key list or block list.
    pub fn open_read_bytes(&self) -> u64 {
        self.open_bytes
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// The file number.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The table's properties.
    pub fn properties(&self) -> &TableProperties {
        &self.props
    }

    /// Bytes of index and filter held in memory (and a semi-sorted table's block runs).
    pub fn memory_usage(&self) -> usize {
        self.index_bytes() + self.filter_bytes() + 16 * self.runs.len()
    }

    /// Bytes of the index block held in memory.
    pub fn index_bytes(&self) -> usize {
        self.index.size()
    }

    /// Bytes of the bloom filter held in memory (0 without one).
    pub fn filter_bytes(&self) -> usize {
        self.filter.as_ref().map_or(0, |f| f.len())
    }

    pub(super) fn corrupt(&self, offset: u64, reason: impl Into<String>) -> Error {
        Error::corruption(self.file.path(), offset, reason)
    }

    pub(super) fn index_error(&self, reason: &str) -> Error {
        self.corrupt(self.index_offset, format!("index block: {reason}"))
    }

    /// The handle at an index cursor's entry, checked to lie among the data blocks.
    pub(super) fn index_handle(&self, idx: &BlockIter) -> Result<BlockHandle> {
        let h = idx
            .handle()
            .ok_or_else(|| self.index_error("malformed block handle"))?;
        let end = h
            .offset
            .checked_add(h.size)
            .and_then(|e| e.checked_add(BLOCK_TRAILER_LEN as u64));
        if end.is_none_or(|e| e > self.data_end) {
            return Err(self.index_error("block handle points outside the data blocks"));
        }
        Ok(h)
    }

    /// Positions `idx` (a cursor over this table's index) at the only data block that can
    /// hold the first entry `>= target` (an internal key).
    pub(super) fn seek_index(&self, idx: &mut BlockIter, target: &[u8]) -> Result<()> {
        let r = if self.user_key_index {
            idx.seek_by(user_key(target), crate::key::compare_user_keys)
        } else {
            idx.seek(target)
        };
        r.map_err(|e| self.index_error(e))
    }

    /// The file the table reads from (a batch of block reads goes to it directly).
    pub(crate) fn file(&self) -> &RandomAccessFile {
        &self.file
    }
}

/// The runs of `handles` (in key order) that lie one after the other in the file, as
/// `(start, end)` offsets sorted by start.
fn key_order_runs(handles: &[BlockHandle]) -> Vec<(u64, u64)> {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for h in handles {
        let end = h.offset + h.size + BLOCK_TRAILER_LEN as u64;
        match runs.last_mut() {
            Some(r) if r.1 == h.offset => r.1 = end,
            _ => runs.push((h.offset, end)),
        }
    }
    runs.sort_unstable();
    runs.shrink_to_fit();
    runs
}

impl HoldsFile for Table {
    fn file(&self) -> &RandomAccessFile {
        &self.file
    }
}

//! Reading a table: open (footer, then the index, filter and properties in one read),
//! point lookups (filter, index, one data block through the block cache), and the
//! two-level iterator (index block -> data blocks) with readahead for sequential readers
//! (whole windows for compaction and checks; adaptive for user iterators, see
//! `ScanReadahead`).
//! Owns the read side of the format; which tables exist is the version's business.

use super::block::{Block, BlockIter};
use super::filter::may_contain;
use super::format::{
    parse_block, parse_block_as, read_block_contents, unframe_block, BlockHandle, Footer,
    BLOCK_TRAILER_LEN, FOOTER_LEN,
};
use super::properties::TableProperties;
use super::semi::{self, PriorGeneration, SemiFooter, SemiSummary, SEMI_FOOTER_LEN};
use super::BlockCache;
use crate::env::{HoldsFile, IoCause, RandomAccessFile, RoundRead};
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{compare_internal, parse_internal_key, user_key};
use bytes::Bytes;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};

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

/// Sequential readers (compaction, verification) read this much at a time, so a slow
/// disk sees few large reads instead of one small read per block.
const READAHEAD: usize = 1 << 20;

/// A semi-sorted table's readahead reads blocks it needs that lie at most this far apart
/// in the file in one span, gap included (the dirty blocks and old metadata between one
/// generation's valid blocks): on the slow disks modelled (gp3: 3000 IOPS, 125 MiB/s) one
/// more read costs about as much time as 40 KiB more bytes.
const SPAN_GAP: u64 = 32 << 10;
/// The gaps a semi-sorted table's readahead window reads through come to at most
/// 1/`SPAN_WASTE` of the bytes it needs (the smallest gaps first), so a window reads at
/// most 1.5 times what it needs.
const SPAN_WASTE: u64 = 2;

/// A user iterator reading a table's data blocks one after another from disk starts
/// reading ahead after this many consecutive block reads (a seek followed by a step or
/// two reads no more than it needs).
const SCAN_READAHEAD_AFTER: u32 = 2;
/// The same for a semi-sorted table: its blocks are an eighth of a sorted table's (2 KiB
/// by default, `CompactionOptions::semi_block_size`), so a scan that steps into a second
/// block almost always goes on, and a first window (64 KiB) costs about what the two
/// plain block reads before a sorted table's does.
const SEMI_SCAN_READAHEAD_AFTER: u32 = 1;
/// What a semi-sorted table's scan window takes past the scan's expectation, on a device
/// where a read costs at least [`SEMI_SCAN_SLACK_MIN_READ_COST`]. A sorted table's seek
/// adds half its first block (8 KiB of the default 16 KiB) and its window then ends inside
/// a block it reads whole, half a block more on average; a semi-sorted table's blocks are
/// an eighth of that size, so without slack its window ends about where the expectation
/// does and scans outrun it: 2.3 slow-disk reads per YCSB E scan against the sorted tier's
/// 1.95; this slack brings them to 2.0 (docs/bench/semi-sorted-scans.md, "Scan window slack").
pub(crate) const SEMI_SCAN_SLACK: u64 = 16 << 10;
/// The least cost of a read, in bytes of the device's bandwidth
/// ([`crate::DeviceProfile::read_cost_bytes`]), at which a semi-sorted scan window takes
/// [`SEMI_SCAN_SLACK`]. The slack saves about 0.3 reads per scan for 16 KiB more read,
/// so it pays where a read costs more than about 53 KiB (gp3-max: 100 KiB, gp3: 42 KiB);
/// on a device whose cost is unknown (no model: this machine's disk, bound by bandwidth
/// in YCSB E) it cost up to a tenth of the throughput and is not taken.
const SEMI_SCAN_SLACK_MIN_READ_COST: u64 = 64 << 10;
/// Its first readahead window; each next one doubles, up to [`SCAN_READAHEAD_MAX`].
const SCAN_READAHEAD_MIN: usize = 64 << 10;
/// Its largest readahead window.
const SCAN_READAHEAD_MAX: usize = 256 << 10;

/// Where a point lookup's entry would be, as far as memory tells ([`Table::locate`]).
pub enum BlockLookup {
    /// The table does not hold the key (its filter says so, or no block covers it).
    Absent,
    /// The block that would hold it, from the block cache.
    Cached(BlockHandle, Block),
    /// The block that would hold it must be read from disk.
    Read(BlockHandle),
}

/// An open table: its index, filter and properties stay in memory while it is open.
pub struct Table {
    file: RandomAccessFile,
    number: u64,
    index: Block,
    /// The index is keyed by user-key separators (format version 2), not by the blocks'
    /// last internal keys.
    user_key_index: bool,
    index_offset: u64,
    filter: Option<Bytes>,
    props: TableProperties,
    cache: Option<Arc<dyn BlockCache>>,
    /// Offset where the data blocks end (the first metadata block starts).
    data_end: u64,
    /// A semi-sorted table's footer (`None`: a sorted table).
    semi: Option<SemiFooter>,
    /// A semi-sorted table's runs of valid blocks that follow each other both in key
    /// order and in the file, as `(start, end)` offsets sorted by start (empty for a
    /// sorted table: its blocks are one run). A span read with `read_data_span` (a
    /// merge's dirty blocks) stays within one; readahead follows the key order across
    /// them instead (`readahead_spans`).
    runs: Vec<(u64, u64)>,
    /// Stored bytes of the data blocks a reader sees (a semi-sorted table's valid blocks:
    /// its runs' total).
    valid_data_bytes: u64,
    /// Bytes opening the table read (footer and metadata).
    open_bytes: u64,
    /// What user scans read from this table. Shared with the file's `FileMeta` when the
    /// table cache opens it ([`Table::with_scan_reads`]), so the counts outlive the open
    /// table.
    scan_reads: Arc<ScanReads>,
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

    /// The spans a readahead window from the block at `h` reads, as `(offset, len)` sorted
    /// by offset; `ahead` is a cursor over this table's index at `h`'s entry. The window
    /// holds whole blocks: `h`, then the blocks after it in key order while their stored
    /// bytes fit in `window` (`Fit::Within`) or until they reach it (`Fit::Reach`: a scan
    /// that expects to need that much also takes the block it ends in). A sorted table's
    /// blocks lie in the file in key order, so its window is one span; a semi-sorted
    /// table's are grouped by file position: blocks at most [`SPAN_GAP`] apart share a
    /// span while the gaps read stay within [`SPAN_WASTE`]'s share. No I/O.
    fn readahead_spans(
        &self,
        h: BlockHandle,
        ahead: &BlockIter,
        window: usize,
        fit: Fit,
    ) -> Result<Vec<(u64, usize)>> {
        let len = self.framed_len(h)? as u64;
        let mut blocks = vec![(h.offset, h.offset + len)];
        let mut budget = (window as u64).saturating_sub(len);
        let mut it = ahead.clone();
        while budget > 0 && it.valid() {
            it.next().map_err(|e| self.index_error(e))?;
            if !it.valid() {
                break;
            }
            let n = self.index_handle(&it)?;
            let n_len = self.framed_len(n)? as u64;
            if n_len > budget && fit == Fit::Within {
                break;
            }
            budget = budget.saturating_sub(n_len);
            blocks.push((n.offset, n.offset + n_len));
        }
        let needed: u64 = blocks.iter().map(|b| b.1 - b.0).sum();
        blocks.sort_unstable();
        // Which gaps between blocks adjacent in the file to read through: the smallest
        // first, each at most SPAN_GAP, all together at most 1/SPAN_WASTE of the bytes
        // needed (a gap may hold blocks a later window needs, read again then).
        let mut gaps: Vec<(u64, usize)> = blocks
            .windows(2)
            .enumerate()
            .map(|(i, w)| (w[1].0.saturating_sub(w[0].1), i))
            .filter(|&(gap, _)| gap <= SPAN_GAP)
            .collect();
        gaps.sort_unstable();
        let mut join = vec![false; blocks.len()];
        let mut waste = needed / SPAN_WASTE;
        for (gap, i) in gaps {
            if gap > waste {
                break;
            }
            waste -= gap;
            join[i] = true;
        }
        let mut spans: Vec<(u64, u64)> = Vec::new();
        for (i, &(start, end)) in blocks.iter().enumerate() {
            match spans.last_mut() {
                Some(last) if i > 0 && join[i - 1] => last.1 = last.1.max(end),
                _ => spans.push((start, end)),
            }
        }
        Ok(spans
            .into_iter()
            .map(|(start, end)| (start, (end - start) as usize))
            .collect())
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

    /// Counts a user scan's window (or single block) read as `spans` reads.
    fn note_scan_spans(&self, spans: usize) {
        let spans = spans as u64;
        self.scan_reads.reads.fetch_add(spans, Relaxed);
        if spans > 1 {
            self.scan_reads.split.fetch_add(spans - 1, Relaxed);
        }
    }

    /// Bytes a scan window at a seek takes past the expectation ([`SEMI_SCAN_SLACK`]).
    fn scan_slack(&self) -> u64 {
        let costly_reads =
            self.file.device_profile().read_cost_bytes() >= Some(SEMI_SCAN_SLACK_MIN_READ_COST);
        if self.semi.is_some() && costly_reads {
            SEMI_SCAN_SLACK
        } else {
            0
        }
    }

    /// Consecutive blocks a user iterator reads from disk before it reads ahead.
    fn scan_readahead_after(&self) -> u32 {
        if self.semi.is_some() {
            SEMI_SCAN_READAHEAD_AFTER
        } else {
            SCAN_READAHEAD_AFTER
        }
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

    /// Reads the data block at `h` (a handle of this table) from disk, bypassing the block
    /// cache (a compaction reading the blocks it rewrites).
    pub fn read_block(&self, h: BlockHandle, cause: IoCause) -> Result<Block> {
        self.data_block(h, cause, false)
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

    fn corrupt(&self, offset: u64, reason: impl Into<String>) -> Error {
        Error::corruption(self.file.path(), offset, reason)
    }

    fn index_error(&self, reason: &str) -> Error {
        self.corrupt(self.index_offset, format!("index block: {reason}"))
    }

    /// The handle at an index cursor's entry, checked to lie among the data blocks.
    fn index_handle(&self, idx: &BlockIter) -> Result<BlockHandle> {
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

    /// A data block through the block cache.
    fn data_block(&self, h: BlockHandle, cause: IoCause, fill_cache: bool) -> Result<Block> {
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

    /// [`Table::locate`] for a known handle (as a KP cache entry keeps it): absent when it
    /// lies outside the data blocks, else the cached block or the read it needs.
    pub fn locate_block(&self, h: BlockHandle) -> BlockLookup {
        let end = h
            .offset
            .checked_add(h.size)
            .and_then(|e| e.checked_add(BLOCK_TRAILER_LEN as u64));
        if end.is_none_or(|e| e > self.data_end) {
            return BlockLookup::Absent;
        }
        if let Some(cache) = &self.cache {
            if let Some(b) = cache.get_block(self.number, h.offset) {
                return BlockLookup::Cached(h, b);
            }
        }
        BlockLookup::Read(h)
    }

    /// The stored length (contents and trailer) of the block at `h`: what a read of it
    /// moves.
    pub fn framed_len(&self, h: BlockHandle) -> Result<usize> {
        usize::try_from(h.size)
            .ok()
            .and_then(|s| s.checked_add(BLOCK_TRAILER_LEN))
            .ok_or_else(|| self.corrupt(h.offset, "block handle size overflows"))
    }

    /// The file the table reads from (a batch of block reads goes to it directly).
    pub(crate) fn file(&self) -> &RandomAccessFile {
        &self.file
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

    /// Positions `idx` (a cursor over this table's index) at the only data block that can
    /// hold the first entry `>= target` (an internal key).
    fn seek_index(&self, idx: &mut BlockIter, target: &[u8]) -> Result<()> {
        let r = if self.user_key_index {
            idx.seek_by(user_key(target), crate::key::compare_user_keys)
        } else {
            idx.seek(target)
        };
        r.map_err(|e| self.index_error(e))
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

/// Where a readahead window ends ([`Table::readahead_spans`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fit {
    /// At the last block that fits in the window: a speculative window reads no more
    /// than it was given.
    Within,
    /// At the block the window's size reaches into: a scan that expects to read that
    /// many bytes takes the block it ends in too.
    Reach,
}

/// The reads that fill a readahead window: one or more spans of the file, each one I/O,
/// from which blocks are sliced. A sorted table's window is one span from the block read
/// onwards (its blocks lie in the file in key order). A semi-sorted table's blocks do
/// not: after merges its key order jumps between appended generations, so a window that
/// stopped at the end of each file-contiguous run would restart at every jump (one short
/// read per run). Its window instead follows the blocks the reader needs next: the next
/// blocks in key order (from the in-memory index) up to the window's size, grouped by
/// file position into spans (blocks close together share one, [`SPAN_GAP`]), read with
/// several in flight ([`read_spans`]).
#[derive(Default)]
struct Readahead {
    /// The spans read, as `(offset, bytes)`, sorted by offset and disjoint.
    spans: Vec<(u64, Bytes)>,
}

impl Readahead {
    /// The block at `h`; `ahead` is the index cursor at `h`'s entry (the blocks after it
    /// in key order are the ones a window reads).
    fn block(
        &mut self,
        table: &Table,
        h: BlockHandle,
        ahead: &BlockIter,
        cause: IoCause,
    ) -> Result<Block> {
        Ok(self.framed_block(table, h, ahead, cause)?.1)
    }

    /// The span holding the whole block at `h`, if any.
    fn span_of(&self, h: BlockHandle) -> Option<usize> {
        let end = h.offset + h.size + BLOCK_TRAILER_LEN as u64;
        let i = self
            .spans
            .partition_point(|s| s.0 <= h.offset)
            .checked_sub(1)?;
        let (offset, buf) = &self.spans[i];
        (end <= offset + buf.len() as u64).then_some(i)
    }

    /// True when the window holds the whole block at `h`.
    fn covers(&self, h: BlockHandle) -> bool {
        self.span_of(h).is_some()
    }

    /// The block at `h` as stored (contents and trailer, checksum verified) and decoded.
    fn framed_block(
        &mut self,
        table: &Table,
        h: BlockHandle,
        ahead: &BlockIter,
        cause: IoCause,
    ) -> Result<(Bytes, Block)> {
        self.framed_block_within(table, h, ahead, cause, READAHEAD, Fit::Within)
    }

    /// [`Readahead::framed_block`], reading a new window of about `window` bytes
    /// ([`Table::readahead_spans`]: at least the block) when the block is not in the
    /// current one.
    fn framed_block_within(
        &mut self,
        table: &Table,
        h: BlockHandle,
        ahead: &BlockIter,
        cause: IoCause,
        window: usize,
        fit: Fit,
    ) -> Result<(Bytes, Block)> {
        let len = h.size as usize + BLOCK_TRAILER_LEN;
        if !self.covers(h) {
            let spans = table.readahead_spans(h, ahead, window, fit)?;
            if cause == IoCause::UserScan {
                table.note_scan_spans(spans.len());
            }
            self.spans = read_spans(table, &spans, cause)?;
        }
        let outside = || table.corrupt(h.offset, "block runs past the end of the data blocks");
        let (offset, buf) = &self.spans[self.span_of(h).ok_or_else(outside)?];
        let from = (h.offset - offset) as usize;
        let framed = buf.get(from..from + len).ok_or_else(outside)?;
        let contents = unframe_block(framed, &table.file, h.offset)?;
        let block = parse_block(contents, &table.file, h.offset)?;
        Ok((buf.slice(from..from + len), block))
    }
}

impl HoldsFile for Table {
    fn file(&self) -> &RandomAccessFile {
        &self.file
    }
}

/// A table's file as the holder of its reads in flight (the table outlives them).
#[derive(Clone, Copy)]
struct SpanFile<'a>(&'a RandomAccessFile);

impl HoldsFile for SpanFile<'_> {
    fn file(&self) -> &RandomAccessFile {
        self.0
    }
}

/// Reads `spans` (`(offset, len)`, from [`Table::readahead_spans`]) of `table`'s file, one
/// I/O each: one span as a plain read, several together, all in flight at once
/// ([`crate::env::read_together`]). Every read is counted as a plain read is.
fn read_spans(table: &Table, spans: &[(u64, usize)], cause: IoCause) -> Result<Vec<(u64, Bytes)>> {
    if let [(offset, len)] = spans {
        return Ok(vec![(
            *offset,
            Bytes::from(table.file.read_at(*offset, *len, cause)?),
        )]);
    }
    let read = crate::env::read_together(
        spans
            .iter()
            .map(|&(offset, len)| (SpanFile(&table.file), offset, len, cause)),
    );
    spans
        .iter()
        .zip(read)
        .map(|(&(offset, _), bytes)| Ok((offset, Bytes::from(bytes?))))
        .collect()
}

/// Readahead for a user iterator (`IoCause::UserScan`): adaptive, unlike compaction's. A
/// scan often reads a block or two after a seek, which whole windows would waste; a long
/// one reads block after block of a table, each a read call of its own without this
/// (record-sized blocks make that one call per few records). After
/// [`SCAN_READAHEAD_AFTER`] ([`SEMI_SCAN_READAHEAD_AFTER`] for a semi-sorted table's
/// small blocks) consecutive blocks read from disk in key order (each the next
/// one in the file, or the iterator's next block: a semi-sorted table's key order jumps
/// between generations), the next read takes a window of [`SCAN_READAHEAD_MIN`] bytes of
/// the blocks that follow (see [`Readahead`]), doubling per window up to
/// [`SCAN_READAHEAD_MAX`], and the following blocks are sliced from it. Blocks in the block
/// cache are taken from there and do not break the run; a block elsewhere (a seek, a step
/// backwards) starts over. Blocks sliced from a window enter the block cache as a plain
/// read's would (when the iterator fills it).
///
/// A caller that says how far its scans go (`ReadOptions::scan_length_hint`, through
/// [`TableIterator::expect_scan`]) skips the ramp: the first block a forward seek reads
/// from disk takes a window of the bytes the scan is expected to read from this table
/// (whole blocks, up to [`SCAN_READAHEAD_MAX`]), so a short scan costs one read per
/// table instead of two or three, and no more bytes than it needs.
struct ScanReadahead {
    window: Readahead,
    /// Where the block read last ends (the next block in the file starts there).
    next_offset: u64,
    /// Consecutive blocks read from disk in key order.
    run: u32,
    /// The next window's size.
    size: usize,
    /// Stored bytes of this table a forward scan from a seek is expected to read
    /// ([`TableIterator::expect_scan`]; 0: no expectation).
    planned: u64,
    /// What of `planned` the blocks since the last seek have not delivered yet.
    plan_left: u64,
    /// What a planned seek starts with ([`TableIterator::plan_seek`]), for the block at
    /// this offset.
    seek_plan: Option<(u64, SeekPlan)>,
}

/// The first block of a planned seek ([`TableIterator::plan_seek`]).
enum SeekPlan {
    /// The block cache held it when the seek was planned.
    Cached(Block),
    /// Reads in the caller's round: the block alone, or (`window`) the window a scan
    /// expected to go on past it takes, as `(offset, bytes once read)` spans. A span left
    /// empty (its read failed) drops the plan: the seek reads again and reports the error.
    Reads {
        window: Option<usize>,
        spans: Vec<(u64, Arc<OnceLock<Vec<u8>>>)>,
    },
}

impl ScanReadahead {
    fn new() -> ScanReadahead {
        ScanReadahead {
            window: Readahead::default(),
            next_offset: u64::MAX,
            run: 0,
            size: SCAN_READAHEAD_MIN,
            planned: 0,
            plan_left: 0,
            seek_plan: None,
        }
    }

    /// The window a scan expected to read `expected` bytes from a block of `len` takes at
    /// the seek (`None`: the block alone).
    fn seek_window(expected: u64, len: u64) -> Option<usize> {
        (expected > len).then(|| expected.min(SCAN_READAHEAD_MAX as u64) as usize)
    }

    /// A window of `window` bytes read at a seek: should the scan go on past it, the usual
    /// readahead takes over, at its largest window when the expectation was larger still,
    /// else from its smallest (an estimate a little short is the common case, and the
    /// rest is near).
    fn after_seek_window(&mut self, table: &Table, window: usize) {
        self.run = table.scan_readahead_after();
        self.size = if window == SCAN_READAHEAD_MAX {
            SCAN_READAHEAD_MAX
        } else {
            SCAN_READAHEAD_MIN
        };
        self.plan_left = 0;
    }

    /// A block read alone, not from a window: the run of blocks read in key order goes on
    /// or starts again.
    fn count_plain_read(&mut self, in_order: bool) {
        if in_order {
            self.run += 1;
        } else {
            self.run = 1;
            self.size = SCAN_READAHEAD_MIN;
        }
    }

    /// The planned seek's block at `h` ([`TableIterator::plan_seek`]), if the plan was for
    /// it and every read arrived: from the cache, or from the spans read (which become
    /// the window). `None` leaves the block to the ordinary path.
    fn take_seek_plan(
        &mut self,
        table: &Table,
        h: BlockHandle,
        ahead: &BlockIter,
        arrival: Arrival,
        in_order: bool,
        cause: IoCause,
    ) -> Result<Option<(Block, bool)>> {
        let plan = match self.seek_plan.take() {
            Some((offset, plan)) if offset == h.offset && arrival == Arrival::Seek => plan,
            _ => return Ok(None),
        };
        let (window, spans) = match plan {
            SeekPlan::Cached(b) => return Ok(Some((b, true))),
            SeekPlan::Reads { window, spans } => (window, spans),
        };
        let mut read = Vec::with_capacity(spans.len());
        for (offset, slot) in spans {
            let bytes = Arc::try_unwrap(slot)
                .map(OnceLock::into_inner)
                .unwrap_or_else(|slot| slot.get().cloned());
            match bytes {
                Some(bytes) => read.push((offset, Bytes::from(bytes))),
                None => return Ok(None),
            }
        }
        self.window.spans = read;
        match window {
            Some(w) => self.after_seek_window(table, w),
            None => self.count_plain_read(in_order),
        }
        let block = self
            .window
            .framed_block_within(table, h, ahead, cause, 0, Fit::Within)?
            .1;
        Ok(Some((block, false)))
    }

    /// The block at `h`; `ahead` is the index cursor at its entry, `arrival` how the
    /// iterator reached it.
    fn block(
        &mut self,
        table: &Table,
        h: BlockHandle,
        ahead: &BlockIter,
        arrival: Arrival,
        cause: IoCause,
        fill_cache: bool,
    ) -> Result<Block> {
        let len = table.framed_len(h)? as u64;
        // A sorted table's next block in key order is the next in the file, so for it
        // a step adds nothing; a semi-sorted table's may lie anywhere.
        let in_order = h.offset == self.next_offset || arrival == Arrival::Step;
        self.next_offset = h.offset + len;
        // The bytes the scan is expected to read from here on, this block included. A
        // seek lands inside its block, half way on average.
        let expected = match arrival {
            Arrival::Seek => self.planned.saturating_add(len / 2),
            Arrival::Step => self.plan_left,
            Arrival::Back => 0,
        };
        self.plan_left = expected.saturating_sub(len);
        let cached = match self.take_seek_plan(table, h, ahead, arrival, in_order, cause)? {
            Some((b, true)) => Some(b),
            Some((b, false)) => {
                if fill_cache {
                    if let Some(cache) = &table.cache {
                        cache.insert_block(table.number, h.offset, b.clone());
                    }
                }
                return Ok(b);
            }
            None => table
                .cache
                .as_ref()
                .and_then(|c| c.get_block(table.number, h.offset)),
        };
        if let Some(b) = cached {
            if !in_order {
                self.run = 0;
            }
            return Ok(b);
        }
        let block = if self.window.covers(h) {
            self.window
                .framed_block_within(table, h, ahead, cause, 0, Fit::Within)?
                .1
        } else if let Some(window) = Self::seek_window(expected, len) {
            // The scan is expected to go on past this block: read what it needs in one
            // window now, not block by block until the readahead below starts.
            self.after_seek_window(table, window);
            self.window
                .framed_block_within(table, h, ahead, cause, window, Fit::Reach)?
                .1
        } else if in_order && self.run >= table.scan_readahead_after() {
            let size = self.size;
            self.size = (self.size * 2).min(SCAN_READAHEAD_MAX);
            self.window
                .framed_block_within(table, h, ahead, cause, size, Fit::Within)?
                .1
        } else {
            self.count_plain_read(in_order);
            // Not read ahead: a plain read, which fills the cache itself.
            return table.data_block(h, cause, fill_cache);
        };
        if fill_cache {
            if let Some(cache) = &table.cache {
                cache.insert_block(table.number, h.offset, block.clone());
            }
        }
        Ok(block)
    }
}

/// How a table iterator reached the block it loads.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Arrival {
    /// A forward positioning call (`seek`, `seek_to_first`): a scan may start here.
    Seek,
    /// A step forward from the block loaded before.
    Step,
    /// A backward positioning call or step.
    Back,
}

/// One data block as a compaction sees it: the bytes exactly as stored in its table
/// (contents and trailer, checksum already verified), the decoded block, and its last
/// internal key. A [`crate::sst::TableBuilder`] can append it verbatim.
#[derive(Clone)]
pub struct RawBlock {
    pub(super) framed: Bytes,
    pub(super) block: Block,
    pub(super) last_key: Bytes,
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

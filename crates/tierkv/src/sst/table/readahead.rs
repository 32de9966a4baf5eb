//! Readahead windows: a sequential reader (compaction, verification, a user scan once its
//! adaptive readahead starts) reads the next blocks in key order in a few large reads
//! instead of one per block. Owns the window ([`Readahead`]), which blocks go into it and
//! how they group into spans of the file ([`Table::readahead_spans`]), and reading the
//! spans with all in flight. When a user scan takes a window is `scan_readahead`'s
//! decision; point lookups never read through here.

use super::open::Table;
use crate::env::{HoldsFile, IoCause, RandomAccessFile};
use crate::error::Result;
use crate::sst::block::{Block, BlockIter};
use crate::sst::format::{parse_block, unframe_block, BlockHandle, BLOCK_TRAILER_LEN};
use bytes::Bytes;
use std::sync::atomic::Ordering::Relaxed;

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

impl Table {
    /// The spans a readahead window from the block at `h` reads, as `(offset, len)` sorted
    /// by offset; `ahead` is a cursor over this table's index at `h`'s entry. The window
    /// holds whole blocks: `h`, then the blocks after it in key order while their stored
    /// bytes fit in `window` (`Fit::Within`) or until they reach it (`Fit::Reach`: a scan
    /// that expects to need that much also takes the block it ends in). A sorted table's
    /// blocks lie in the file in key order, so its window is one span; a semi-sorted
    /// table's are grouped by file position: blocks at most [`SPAN_GAP`] apart share a
    /// span while the gaps read stay within [`SPAN_WASTE`]'s share. No I/O.
    pub(super) fn readahead_spans(
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

    /// Counts a user scan's window (or single block) read as `spans` reads.
    pub(super) fn note_scan_spans(&self, spans: usize) {
        let spans = spans as u64;
        self.scan_reads.reads.fetch_add(spans, Relaxed);
        if spans > 1 {
            self.scan_reads.split.fetch_add(spans - 1, Relaxed);
        }
    }
}

/// Where a readahead window ends ([`Table::readahead_spans`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Fit {
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
pub(super) struct Readahead {
    /// The spans read, as `(offset, bytes)`, sorted by offset and disjoint.
    pub(super) spans: Vec<(u64, Bytes)>,
}

impl Readahead {
    /// The block at `h`; `ahead` is the index cursor at `h`'s entry (the blocks after it
    /// in key order are the ones a window reads).
    pub(super) fn block(
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
    pub(super) fn covers(&self, h: BlockHandle) -> bool {
        self.span_of(h).is_some()
    }

    /// The block at `h` as stored (contents and trailer, checksum verified) and decoded.
    pub(super) fn framed_block(
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
    pub(super) fn framed_block_within(
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

//! A user iterator's readahead (`IoCause::UserScan`), adaptive where compaction's reads
//! whole windows: when a scan reads ahead and how far (after a run of blocks read in key
//! order, in windows doubling from 64 KiB to 256 KiB; at once from a scan length hint),
//! and the reads a planned seek started. The windows themselves are `readahead`'s; moving
//! the iterator is `iter`'s, which tells it how each block was reached.

use super::open::Table;
use super::readahead::{Fit, Readahead};
use crate::env::IoCause;
use crate::error::Result;
use crate::sst::block::{Block, BlockIter};
use crate::sst::format::BlockHandle;
use bytes::Bytes;
use std::sync::{Arc, OnceLock};

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

impl Table {
    /// Bytes a scan window at a seek takes past the expectation ([`SEMI_SCAN_SLACK`]).
    pub(super) fn scan_slack(&self) -> u64 {
        if self.semi.is_some() && self.reads_cost_at_least(SEMI_SCAN_SLACK_MIN_READ_COST) {
            SEMI_SCAN_SLACK
        } else {
            0
        }
    }

    /// Whether one read of this table's device costs at least `bytes` of its bandwidth
    /// ([`crate::DeviceProfile::read_cost_bytes`]); false when the cost is unknown (no
    /// device model), where the disks measured were bound by their bandwidth in scans.
    fn reads_cost_at_least(&self, bytes: u64) -> bool {
        self.file.device_profile().read_cost_bytes() >= Some(bytes)
    }

    /// Consecutive blocks a user iterator reads from disk before it reads ahead.
    pub(super) fn scan_readahead_after(&self) -> u32 {
        if self.semi.is_some() {
            SEMI_SCAN_READAHEAD_AFTER
        } else {
            SCAN_READAHEAD_AFTER
        }
    }
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
/// `TableIterator::expect_scan`) skips the ramp: the first block a forward seek reads
/// from disk takes a window of the bytes the scan is expected to read from this table
/// (whole blocks, up to [`SCAN_READAHEAD_MAX`]), so a short scan costs one read per
/// table instead of two or three, and no more bytes than it needs.
pub(super) struct ScanReadahead {
    pub(super) window: Readahead,
    /// Where the block read last ends (the next block in the file starts there).
    next_offset: u64,
    /// Consecutive blocks read from disk in key order.
    run: u32,
    /// The next window's size.
    size: usize,
    /// Stored bytes of this table a forward scan from a seek is expected to read
    /// (`TableIterator::expect_scan`; 0: no expectation).
    pub(super) planned: u64,
    /// What of `planned` the blocks since the last seek have not delivered yet.
    plan_left: u64,
    /// What a planned seek starts with (`TableIterator::plan_seek`), for the block at
    /// this offset.
    pub(super) seek_plan: Option<(u64, SeekPlan)>,
}

/// The first block of a planned seek (`TableIterator::plan_seek`).
pub(super) enum SeekPlan {
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
    pub(super) fn new() -> ScanReadahead {
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
    pub(super) fn seek_window(expected: u64, len: u64) -> Option<usize> {
        (expected > len).then(|| expected.min(SCAN_READAHEAD_MAX as u64) as usize)
    }

    /// A window of `window` bytes read at a seek: should the scan go on past it, the usual
    /// readahead takes over at its largest window when the expectation was larger still.
    /// Otherwise the estimate was short and the rest is usually near. Where a read costs
    /// at least the smallest window's bytes, that window follows at once, as the cheaper
    /// bet; elsewhere the next block is read alone, and only a scan that goes on from
    /// there reads ahead again. (On a slow disk bound by its bandwidth, the 64 KiB window
    /// after a scan outran its margin made YCSB E read 11.3 KB per scan where 8.4 KB
    /// served it, and cost a quarter of its throughput; on gp3-max, where a read costs
    /// 100 KiB, reading the block alone took 8% more reads per scan.
    /// docs/bench/hyperdb-ycsb.md.)
    fn after_seek_window(&mut self, table: &Table, window: usize) {
        let largest = window == SCAN_READAHEAD_MAX;
        let read_ahead_at_once = largest || table.reads_cost_at_least(SCAN_READAHEAD_MIN as u64);
        // One block short of the run that starts a window: the next block is read alone.
        self.run = table.scan_readahead_after() - u32::from(!read_ahead_at_once);
        self.size = if largest {
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

    /// The planned seek's block at `h` (`TableIterator::plan_seek`), if the plan was for
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
    pub(super) fn block(
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
pub(super) enum Arrival {
    /// A forward positioning call (`seek`, `seek_to_first`): a scan may start here.
    Seek,
    /// A step forward from the block loaded before.
    Step,
    /// A backward positioning call or step.
    Back,
}

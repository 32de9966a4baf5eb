//! Planning a merge into semi-sorted tables (HyperDB's block-level merge) and finding its
//! dirty blocks while it runs. Before the merge, each overlapping output-level table is
//! either continued (a new generation is appended) or rewritten whole: whole when more
//! than half of it would be garbage afterwards (`T_CLEAN`, by stored bytes: dirty blocks
//! and earlier generations' metadata, the blocks this merge dirties estimated before it
//! runs, see [`plan`]), when its valid blocks have grown past twice the target file size,
//! when it is still sorted, or when it is small (below a quarter of the target size) and
//! a neighbour is rewritten whole, so that the two are written as fewer, fuller tables. During the merge, [`DirtyBlocks`] wraps the merge's input and reads
//! a continued table's valid block only when the next input key falls in its range,
//! marking it dirty (the marks reach the outputs through [`DirtyLog`]); blocks no input
//! key falls in are never read and stay where they are. The inputs are read once.
//!
//! Each output-level table owns a *territory*: from its smallest user key up to the next
//! table's (the first one's reaches down to the bottom), so a record that lands in a gap
//! between tables joins a neighbour and the level's tables stay disjoint.

use super::context::JobContext;
use super::span_reads::{SpanReadStats, SpanReads};
use super::Compaction;
use crate::env::{IoCause, Tier};
use crate::error::{Error, Result};
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::{compare_internal, user_key};
use crate::sst::block::BlockIter;
use crate::sst::format::BlockHandle;
use crate::sst::semi::PriorGeneration;
use crate::sst::Table;
use crate::version::FileMeta;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// A table is rewritten whole once more than this share of its bytes would be garbage.
pub(super) const T_CLEAN: f64 = 0.5;

/// A table below the target file size over this is small: rewritten with a neighbour
/// rewritten whole, so the two become fewer, fuller files.
pub(super) const SMALL_TABLE_DIVISOR: u64 = 4;

/// What the merge does with one output-level table.
pub(super) enum TargetMode {
    /// Append a generation: the valid blocks at `dirty` (indexes into `prior.blocks`) are
    /// rewritten, the others kept. `dirty` fills while the merge runs ([`DirtyLog`]).
    Append {
        prior: PriorGeneration,
        dirty: Vec<usize>,
    },
    /// Read every block and write its territory into fresh tables.
    Rewrite,
}

/// One output-level table the merge overlaps.
pub(super) struct Target {
    pub(super) meta: Arc<FileMeta>,
    pub(super) table: Arc<Table>,
    pub(super) mode: TargetMode,
}

/// The blocks [`DirtyBlocks`] read, as the merge reaches them: `(target, block)` pairs in
/// key order (block indexes into the target's `prior.blocks`), and their stored bytes.
#[derive(Default)]
pub(super) struct DirtyLog {
    marks: Mutex<Vec<(usize, usize)>>,
    /// How many marks were ever pushed (checked without the lock on every record).
    pushed: AtomicUsize,
    read_bytes: AtomicU64,
    /// The merge's span reads so far ([`SpanReads`]).
    spans_started: AtomicU64,
    span_waits: AtomicU64,
    span_wait_micros: AtomicU64,
    span_rounds: AtomicU64,
    spans_most_in_flight: AtomicUsize,
}

impl DirtyLog {
    fn push(&self, target: usize, block: usize, bytes: u64) {
        if let Ok(mut m) = self.marks.lock() {
            m.push((target, block));
        }
        self.pushed.fetch_add(1, Relaxed);
        self.read_bytes.fetch_add(bytes, Relaxed);
    }

    /// The marks pushed after the first `seen` (and the new count), without locking
    /// when there are none.
    pub(super) fn since(&self, seen: usize) -> (Vec<(usize, usize)>, usize) {
        if self.pushed.load(Relaxed) == seen {
            return (Vec::new(), seen);
        }
        match self.marks.lock() {
            Ok(m) => (m.get(seen..).unwrap_or_default().to_vec(), m.len()),
            Err(_) => (Vec::new(), seen),
        }
    }

    /// Stored bytes of the blocks read so far.
    pub(super) fn read_bytes(&self) -> u64 {
        self.read_bytes.load(Relaxed)
    }

    fn set_span_stats(&self, s: SpanReadStats) {
        self.spans_started.store(s.started, Relaxed);
        self.span_waits.store(s.waits, Relaxed);
        self.span_wait_micros.store(s.wait_micros, Relaxed);
        self.span_rounds.store(s.rounds, Relaxed);
        self.spans_most_in_flight.store(s.most_in_flight, Relaxed);
    }

    /// What the merge's span reads did so far.
    pub(super) fn span_stats(&self) -> SpanReadStats {
        SpanReadStats {
            started: self.spans_started.load(Relaxed),
            waits: self.span_waits.load(Relaxed),
            wait_micros: self.span_wait_micros.load(Relaxed),
            rounds: self.span_rounds.load(Relaxed),
            most_in_flight: self.spans_most_in_flight.load(Relaxed),
        }
    }
}

/// The targets, in key order, the bytes the merge reads besides the dirty blocks (the
/// inputs and the tables rewritten whole), and where the dirty blocks are logged.
pub(super) struct SemiPlan {
    pub(super) targets: Vec<Target>,
    pub(super) read_bytes: u64,
    pub(super) log: Arc<DirtyLog>,
    /// Per target, per block of its `prior.blocks`: the estimated chance that the merge
    /// leaves the block clean ([`estimate_dirty`]); [`DirtyBlocks`] reads the blocks likely
    /// dirtied that lie close after the one it needs in the same read.
    clean_odds: Vec<Vec<f64>>,
}

/// A block the merge will likely dirty joins the read of a block before it when the
/// chance that it stays clean is below this.
const LIKELY_DIRTY_CLEAN_ODDS: f64 = 0.5;

/// A block the merge may dirty (any input lands near it, though it likely stays clean)
/// joins a span read when it lies at most this far from the span in the file: the
/// blocks at the edges of a run of input keys are the ones the estimate puts below
/// even odds, and each read of one the merge then needs on its own costs a device
/// latency; taking it costs its bytes (2 KiB: about 2 us at 1000 MiB/s).
const SPAN_GAP_POSSIBLE: u64 = 4 << 10;

/// How far a block's chance of being dirtied lies (from the plan's estimate).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Chance {
    /// No input lands in or near its range.
    None,
    /// Some input may land in it, though it likely stays clean.
    Possible,
    /// Likely dirtied ([`LIKELY_DIRTY_CLEAN_ODDS`]).
    Likely,
}

/// The most bytes between two blocks read in one span (blocks not expected dirty, or
/// other data): on a latency-bound disk reading them costs less than another read (at
/// 1000 MiB/s, 64 KiB take about 60 us, against 500 us of latency on `gp3-max`), and on a
/// bandwidth-bound one it bounds what a span reads needlessly.
const SPAN_GAP_MAX: u64 = 64 << 10;

/// The most bytes one span of dirty blocks reads.
const SPAN_MAX: u64 = 1 << 20;

/// How many blocks after the one needed a span looks through for ones to join it.
const SPAN_LOOKAHEAD: usize = 256;

/// The most span reads a merge holds ahead of itself (in flight, or read and not yet
/// passed; each at most [`SPAN_MAX`]): on `gp3-max` (10K IOPS, 500 us) five reads in
/// flight use the device's whole rate, and the rest leave room for reads that come back
/// late or spans of few blocks.
const SPANS_AHEAD: usize = 8;

/// No span holds the block (`DirtyBlocks::covered`).
const NO_SPAN: usize = usize::MAX;

/// The index of the target whose territory holds user key `k` (0 with no target).
pub(super) fn territory<T>(items: &[T], meta: impl Fn(&T) -> &FileMeta, k: &[u8]) -> usize {
    items
        .partition_point(|t| user_key(meta(t).smallest()) <= k)
        .saturating_sub(1)
}

/// A continued table's valid block, as the estimate and the merge see it.
struct ValidBlock {
    target: usize,
    /// Index into the target's `prior.blocks`.
    index: usize,
    first: Vec<u8>,
    last: Vec<u8>,
    handle: BlockHandle,
    stored_len: u64,
}

/// Every valid block of the targets that may be continued, in key order (targets are
/// disjoint and in order; valid blocks lead each index, in key order).
fn valid_blocks(targets: &[Target]) -> Vec<ValidBlock> {
    let mut out = Vec::new();
    for (t, target) in targets.iter().enumerate() {
        if let TargetMode::Append { prior, .. } = &target.mode {
            for (i, b) in prior.blocks.iter().enumerate().take_while(|(_, b)| b.valid) {
                out.push(ValidBlock {
                    target: t,
                    index: i,
                    first: b.first_user_key().to_vec(),
                    last: b.last_user_key().to_vec(),
                    handle: b.handle,
                    stored_len: b.stored_len(),
                });
            }
        }
    }
    out
}

/// The expected bytes each target's valid blocks lose to this merge, and the chance that
/// each of `blocks` stays clean, from what is in
/// memory or small: a semi-sorted input's key list marks exactly; a sorted input's data
/// is not read (the merge reads it once, later), so its index stands in: each of its
/// data blocks holds about `entries / blocks` keys somewhere between its separators, and
/// each of those keys is taken to fall into the blocks there in proportion to the keys
/// they hold (the targets' key lists), as updates of existing keys do. A block in whose
/// range an input block falls without a key of its own there counts as dirtied.
fn estimate_dirty(
    c: &Compaction,
    ctx: &JobContext<'_>,
    targets: &[Target],
    blocks: &[ValidBlock],
) -> Result<(Vec<f64>, Vec<f64>)> {
    // The targets' valid keys with the block holding each, in key order.
    let mut keys: Vec<(&[u8], usize)> = Vec::new();
    {
        let mut j = 0;
        for target in targets {
            let TargetMode::Append { prior, .. } = &target.mode else {
                continue;
            };
            for k in &prior.keys {
                while j < blocks.len() && blocks[j].last.as_slice() < k.as_slice() {
                    j += 1;
                }
                if j < blocks.len() && blocks[j].first.as_slice() <= k.as_slice() {
                    keys.push((k, j));
                }
            }
        }
    }
    // The probability that each block stays clean.
    let mut clean = vec![1.0f64; blocks.len()];
    let covering = |k: &[u8]| {
        let j = blocks.partition_point(|b| b.last.as_slice() < k);
        (j < blocks.len() && blocks[j].first.as_slice() <= k).then_some(j)
    };
    for f in &c.inputs {
        let table = ctx.tables.get(f, IoCause::Compaction)?;
        if let Some(g) = table.semi_generation(IoCause::Compaction)? {
            for k in &g.keys {
                if let Some(j) = covering(k) {
                    clean[j] = 0.0;
                }
            }
            continue;
        }
        let seps = table.index_user_keys()?;
        if seps.is_empty() {
            continue;
        }
        let per_block = (table.properties().num_entries as f64 / seps.len() as f64).max(1.0);
        let (smallest, largest) = (user_key(f.smallest()), user_key(f.largest()));
        for (i, sep) in seps.iter().enumerate() {
            let lo = match i {
                0 => keys.partition_point(|(k, _)| *k < smallest),
                _ => keys.partition_point(|(k, _)| *k <= seps[i - 1].as_slice()),
            };
            let hi_key = sep.as_slice().min(largest);
            let hi = keys.partition_point(|(k, _)| *k <= hi_key);
            if lo >= hi {
                // No target key in the block's range: a block spanning it is dirtied.
                let from = if i == 0 {
                    smallest
                } else {
                    seps[i - 1].as_slice()
                };
                let j = blocks.partition_point(|b| b.last.as_slice() < from);
                if j < blocks.len() && blocks[j].first.as_slice() <= hi_key {
                    clean[j] = 0.0;
                }
                continue;
            }
            let n = (hi - lo) as f64;
            let mut at = lo;
            while at < hi {
                let j = keys[at].1;
                let run = keys[at..hi].iter().take_while(|(_, b)| *b == j).count();
                clean[j] *= (1.0 - run as f64 / n).powf(per_block);
                at += run;
            }
        }
    }
    let mut dirty = vec![0.0f64; targets.len()];
    for (b, c) in blocks.iter().zip(&clean) {
        dirty[b.target] += (1.0 - c) * b.stored_len as f64;
    }
    Ok((dirty, clean))
}

/// Opens the targets and decides, per target, whether the merge continues it or rewrites
/// it whole (the module comment); reads no input data.
pub(super) fn plan(c: &Compaction, ctx: &JobContext<'_>) -> Result<SemiPlan> {
    let mut outputs = c.output_inputs.clone();
    outputs.sort_by(|a, b| compare_internal(a.smallest(), b.smallest()));
    let mut targets = Vec::with_capacity(outputs.len());
    for meta in outputs {
        let table = ctx.tables.get(&meta, IoCause::Compaction)?;
        let prior = match meta.tier {
            Tier::Slow => table.semi_generation(IoCause::Compaction)?,
            Tier::Fast => None,
        };
        let mode = match prior {
            Some(prior) => TargetMode::Append {
                prior,
                dirty: Vec::new(),
            },
            None => TargetMode::Rewrite,
        };
        targets.push(Target { meta, table, mode });
    }
    let mut read_bytes = c.inputs.iter().map(|f| f.size()).sum::<u64>();
    let blocks = valid_blocks(&targets);
    let (newly, clean) = estimate_dirty(c, ctx, &targets, &blocks)?;
    let mut clean_odds: Vec<Vec<f64>> = targets
        .iter()
        .map(|t| match &t.mode {
            TargetMode::Append { prior, .. } => vec![1.0; prior.blocks.len()],
            TargetMode::Rewrite => Vec::new(),
        })
        .collect();
    for (b, c) in blocks.iter().zip(clean) {
        clean_odds[b.target][b.index] = c;
    }
    for (t, newly) in targets.iter_mut().zip(newly) {
        let rewrite = match &t.mode {
            TargetMode::Append { prior, .. } => {
                // After the append, everything but the valid blocks left is garbage:
                // dirty blocks, every earlier generation's metadata (the current one's
                // too) and the blocks dirtied now, whose entries are written again.
                let size = t.meta.size().max(1) as f64;
                let valid = prior.valid_bytes() as f64;
                let share = ((size - valid).max(0.0) + newly) / (size + newly);
                // A table grown past twice the target size (inserts) is split.
                share > T_CLEAN || prior.valid_bytes() > 2 * ctx.target_file_size
            }
            TargetMode::Rewrite => true,
        };
        if rewrite {
            t.mode = TargetMode::Rewrite;
            read_bytes += t.meta.size();
        }
    }
    // A small table next to one rewritten whole is rewritten too: its records join the
    // neighbour's fresh tables, which span neighbouring rewritten territories
    // (`super::semi_sink`), so the level keeps fewer, fuller files.
    let small = ctx.target_file_size / SMALL_TABLE_DIVISOR;
    let rewritten = |targets: &[Target], i: usize| {
        targets
            .get(i)
            .is_some_and(|t| matches!(t.mode, TargetMode::Rewrite))
    };
    let mut changed = true;
    while changed {
        changed = false;
        for i in 0..targets.len() {
            let joins = matches!(targets[i].mode, TargetMode::Append { .. })
                && targets[i].meta.size() < small
                && ((i > 0 && rewritten(&targets, i - 1)) || rewritten(&targets, i + 1));
            if joins {
                targets[i].mode = TargetMode::Rewrite;
                read_bytes += targets[i].meta.size();
                changed = true;
            }
        }
    }
    Ok(SemiPlan {
        targets,
        read_bytes,
        log: Arc::default(),
        clean_odds,
    })
}

impl SemiPlan {
    /// Cursors over the tables rewritten whole (their ordinary iterators, which read
    /// ahead), to merge with the inputs. Their key ranges are disjoint.
    pub(super) fn rewrite_iterators(&self) -> Vec<Box<dyn InternalIterator>> {
        let mut out: Vec<Box<dyn InternalIterator>> = Vec::new();
        for t in &self.targets {
            if let TargetMode::Rewrite = t.mode {
                out.push(Box::new(t.table.iter(IoCause::Compaction, false)));
            }
        }
        out
    }

    /// The merge's input: `inner` (the inputs and the tables rewritten whole) with the
    /// continued tables' blocks that its keys or the `promoted` user keys (the
    /// promotion-cache records the merge may write, in order) fall in, read as the merge
    /// reaches them. (A promoted record's key reads its block so that the merge decides
    /// about it knowing the slow tier's version, as a sorted merge does.)
    pub(super) fn dirty_blocks(
        &self,
        inner: MergingIterator,
        promoted: Vec<Vec<u8>>,
    ) -> DirtyBlocks {
        let blocks: Vec<_> = valid_blocks(&self.targets)
            .into_iter()
            .map(|b| (self.targets[b.target].table.clone(), b))
            .collect();
        let chance = blocks
            .iter()
            .map(
                |(_, b)| match self.clean_odds.get(b.target).and_then(|o| o.get(b.index)) {
                    Some(&c) if c < LIKELY_DIRTY_CLEAN_ODDS => Chance::Likely,
                    Some(&c) if c < 1.0 => Chance::Possible,
                    _ => Chance::None,
                },
            )
            .collect();
        let covered = vec![NO_SPAN; blocks.len()];
        DirtyBlocks {
            inner,
            blocks,
            chance,
            reads: SpanReads::new(),
            covered,
            ahead: 0,
            next: 0,
            current: None,
            from_block: false,
            prev: Vec::new(),
            log: self.log.clone(),
            promoted,
            next_promoted: 0,
        }
    }
}

/// The merge's input over continued semi-sorted tables: the entries of `inner` merged
/// with those of the valid blocks its keys fall in. Blocks are in key order with disjoint
/// ranges and `inner`'s keys ascend, so a block is read (and logged dirty) when the next
/// key of `inner` lands in its range and no block is read twice; every key of `inner`
/// emitted before lies below the block's first, so the merge stays in order. Forward only.
///
/// Dirty blocks lie anywhere in their file, and a read of one costs a slow disk's full
/// latency, so reading them one by one holds a background thread for seconds in a merge
/// that dirties thousands. Two things cut that. A read takes with it, as one span, the
/// blocks after its first in key order that the plan expects dirtied and that lie close
/// after it in the file ([`SPAN_GAP_MAX`], [`SPAN_MAX`]). And the spans of the blocks
/// the plan expects dirtied are read ahead of the merge, up to [`SPANS_AHEAD`] held at
/// once ([`SpanReads`]: reads in flight together cost about one device latency, not one
/// each), so the merge waits at most about one latency per window of spans; a block not
/// expected dirty that the merge needs is read (with the expected ones close after it not
/// yet started) when the merge reaches it. Blocks are logged dirty only when the merge
/// reaches them, so a block read that the merge never needs stays clean and is kept
/// (only its bytes were read).
pub(super) struct DirtyBlocks {
    inner: MergingIterator,
    blocks: Vec<(Arc<Table>, ValidBlock)>,
    /// Per block: how likely the plan expects the merge to dirty it.
    chance: Vec<Chance>,
    /// The span reads started, in flight or read.
    reads: SpanReads,
    /// Per block: the id of the span read started for it ([`NO_SPAN`]: none yet).
    covered: Vec<usize>,
    /// The first block not yet looked at for reading ahead.
    ahead: usize,
    /// The first block not yet read or passed.
    next: usize,
    current: Option<(usize, BlockIter)>,
    /// The current entry is the block's (else `inner`'s).
    from_block: bool,
    /// The last block entry emitted (keys must ascend across blocks).
    prev: Vec<u8>,
    log: Arc<DirtyLog>,
    /// User keys that read their block as an input key would, in order, and the first
    /// not yet passed.
    promoted: Vec<Vec<u8>>,
    next_promoted: usize,
}

impl DirtyBlocks {
    fn corrupt(&self, reason: &str) -> Error {
        match self.current.as_ref().map(|(i, _)| &self.blocks[*i]) {
            Some((t, b)) => Error::corruption(t.path(), b.handle.offset, reason),
            None => Error::corruption("<compaction block list>", 0, reason),
        }
    }

    fn block_valid(&self) -> bool {
        self.current.as_ref().is_some_and(|(_, it)| it.valid())
    }

    /// Where block `at` ends in its file (its stored bytes included).
    fn block_end(&self, at: usize) -> u64 {
        let b = &self.blocks[at].1;
        b.handle.offset + b.stored_len
    }

    /// The blocks a read for block `at` takes: `at`, then the blocks after it in key
    /// order (in the same table, not yet in a span) that lie after it in the file, taken
    /// in file order: a block the plan expects dirtied while it starts within
    /// [`SPAN_GAP_MAX`] of the previous one's end, one it may dirty within
    /// [`SPAN_GAP_POSSIBLE`]; all within the same run of data blocks, and the span within
    /// [`SPAN_MAX`]. (After a few generations, neighbours in key order alternate between
    /// runs appended at different times, so the blocks are taken by offset, not in key
    /// order.) Blocks before `at` in key order the merge has not passed that it may dirty
    /// and that lie just before it in the file ([`SPAN_GAP_POSSIBLE`]) join too: the
    /// first blocks of a run of input keys. Returns the span's start and end in the file,
    /// and its blocks.
    fn span_from(&self, at: usize) -> (u64, u64, Vec<usize>) {
        let (t, b) = &self.blocks[at];
        let run_end = t.run_end(b.handle.offset);
        let free = |j: usize| {
            self.blocks[j].1.target == b.target
                && self.covered[j] == NO_SPAN
                && self.chance[j] != Chance::None
        };
        let mut start = b.handle.offset;
        let mut taken = vec![at];
        let mut j = at;
        while j > self.next && taken.len() <= SPAN_LOOKAHEAD {
            j -= 1;
            let end_j = self.block_end(j);
            let fits = end_j <= start
                && start - end_j <= SPAN_GAP_POSSIBLE
                && t.run_end(self.blocks[j].1.handle.offset) == run_end;
            if !free(j) || !fits {
                break;
            }
            start = self.blocks[j].1.handle.offset;
            taken.push(j);
        }
        let limit = run_end.min(start.saturating_add(SPAN_MAX));
        let mut end = self.block_end(at);
        let last = (at + 1 + SPAN_LOOKAHEAD).min(self.blocks.len());
        let mut later: Vec<(u64, u64, usize)> = (at + 1..last)
            .take_while(|&j| self.blocks[j].1.target == b.target)
            .filter(|&j| free(j) && self.blocks[j].1.handle.offset >= end)
            .map(|j| (self.blocks[j].1.handle.offset, self.block_end(j), j))
            .filter(|&(_, e, _)| e <= limit)
            .collect();
        later.sort_unstable();
        for (off, e, j) in later {
            if off < end {
                // Blocks do not overlap, so only a corrupt index puts one here: leave it
                // to its own read, which reports it.
                continue;
            }
            let gap = match self.chance[j] {
                Chance::Likely => SPAN_GAP_MAX,
                _ => SPAN_GAP_POSSIBLE,
            };
            if off - end > gap {
                if self.chance[j] == Chance::Likely {
                    break;
                }
                continue;
            }
            end = e;
            taken.push(j);
        }
        (start, end, taken)
    }

    /// Starts the span read for block `at` ([`DirtyBlocks::span_from`]) and returns its
    /// id; `None` when its range is not within the block's run of data blocks (a corrupt
    /// index: the block's own read reports it).
    fn start_span(&mut self, at: usize) -> Option<usize> {
        let (start, end, taken) = self.span_from(at);
        let t = &self.blocks[at].0;
        let len = usize::try_from(end.checked_sub(start)?).ok()?;
        if end > t.run_end(start) {
            return None;
        }
        let last = taken.iter().copied().max().unwrap_or(at);
        let id = self.reads.start(t.clone(), start, len, last);
        for j in taken {
            self.covered[j] = id;
        }
        Some(id)
    }

    /// Starts the span reads of the next blocks the plan expects dirtied, in key order,
    /// while fewer than [`SPANS_AHEAD`] are held.
    fn read_ahead(&mut self) {
        self.ahead = self.ahead.max(self.next);
        while self.reads.held() < SPANS_AHEAD && self.ahead < self.blocks.len() {
            let j = self.ahead;
            self.ahead += 1;
            if self.chance[j] == Chance::Likely && self.covered[j] == NO_SPAN {
                // A range a corrupt index puts outside its run is left to the block's
                // own read, if the merge needs it.
                let _ = self.start_span(j);
            }
        }
    }

    /// Reads block `at` (from the span read that holds it, started now if none is) and
    /// positions at its first entry (an empty one reads as nothing). The spans ahead are
    /// started first, so they go to the disk with it.
    fn load(&mut self, at: usize) -> Result<()> {
        let id = match self.covered[at] {
            NO_SPAN => self.start_span(at),
            id => Some(id),
        };
        self.read_ahead();
        let span = match id {
            Some(id) => self.reads.wait(id, at),
            None => Ok(None),
        };
        self.log.set_span_stats(self.reads.stats());
        let (t, b) = &self.blocks[at];
        let block = match span? {
            Some((off, buf)) => t.block_in_span(&buf, off, b.handle)?,
            None => t.read_block(b.handle, IoCause::Compaction)?,
        };
        self.log.push(b.target, b.index, b.stored_len);
        let mut it = block.iter();
        if let Err(e) = it.seek_to_first() {
            return Err(Error::corruption(t.path(), b.handle.offset, e));
        }
        self.current = Some((at, it));
        self.check_order()
    }

    fn check_order(&mut self) -> Result<()> {
        let Some((_, it)) = self.current.as_ref() else {
            return Ok(());
        };
        if !it.valid() {
            return Ok(());
        }
        if !self.prev.is_empty() && compare_internal(&self.prev, it.key()).is_ge() {
            return Err(self.corrupt("keys out of order across rewritten blocks"));
        }
        self.prev.clear();
        self.prev.extend_from_slice(it.key());
        Ok(())
    }

    /// Once the current block is done, reads the block the next key (of `inner`, or a
    /// promoted one before it) falls in, then picks the smaller of the two heads.
    fn settle(&mut self) -> Result<()> {
        while !self.block_valid() {
            let from_inner = self.inner.valid().then(|| user_key(self.inner.key()));
            let promoted = self.promoted.get(self.next_promoted).map(Vec::as_slice);
            let (u, is_promoted) = match (from_inner, promoted) {
                (Some(i), Some(p)) if p < i => (p, true),
                (Some(i), _) => (i, false),
                (None, Some(p)) => (p, true),
                (None, None) => break,
            };
            let mut next = self.next;
            while self
                .blocks
                .get(next)
                .is_some_and(|(_, b)| b.last.as_slice() < u)
            {
                next += 1;
            }
            let load = self
                .blocks
                .get(next)
                .is_some_and(|(_, b)| b.first.as_slice() <= u);
            self.next = next;
            if is_promoted {
                self.next_promoted += 1;
            }
            if load {
                self.current = None;
                self.next += 1;
                self.load(self.next - 1)?;
            } else if !is_promoted {
                break;
            }
        }
        self.from_block = match self.current.as_ref() {
            Some((_, it)) if it.valid() => {
                !self.inner.valid() || compare_internal(it.key(), self.inner.key()).is_lt()
            }
            _ => false,
        };
        Ok(())
    }

    fn forward_only(&self) -> Error {
        Error::InvalidArgument("a compaction's merge input reads forward only".into())
    }
}

impl InternalIterator for DirtyBlocks {
    fn valid(&self) -> bool {
        self.block_valid() || self.inner.valid()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.next = 0;
        self.current = None;
        self.prev.clear();
        self.inner.seek_to_first()?;
        self.settle()
    }

    fn seek_to_last(&mut self) -> Result<()> {
        Err(self.forward_only())
    }

    fn seek(&mut self, _target: &[u8]) -> Result<()> {
        Err(self.forward_only())
    }

    fn next(&mut self) -> Result<()> {
        if self.from_block {
            let step = match self.current.as_mut() {
                Some((_, it)) => it.next(),
                None => Ok(()),
            };
            if let Err(e) = step {
                return Err(self.corrupt(e));
            }
            self.check_order()?;
        } else {
            self.inner.next()?;
        }
        self.settle()
    }

    fn prev(&mut self) -> Result<()> {
        Err(self.forward_only())
    }

    fn key(&self) -> &[u8] {
        match (&self.current, self.from_block) {
            (Some((_, it)), true) => it.key(),
            _ => self.inner.key(),
        }
    }

    fn value(&self) -> &[u8] {
        match (&self.current, self.from_block) {
            (Some((_, it)), true) => it.value(),
            _ => self.inner.value(),
        }
    }
}

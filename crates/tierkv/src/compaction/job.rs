//! Running a compaction: merge the inputs newest-first, drop versions no snapshot can see
//! and tombstones that hide nothing, and write the survivors into new tables of the output
//! level, split at the target file size (never inside one user key's versions, so deeper
//! levels stay disjoint by user key). Past half the target size an output is also cut where
//! a file of the level below the output ends (as RocksDB does), so that a later compaction
//! of the output overlaps whole files there rather than straddling one more at each end.
//!
//! **Block reuse** (HyperDB's clean blocks, within the unchanged table format): the merge
//! walks its inputs block by block, and when a data block is reached whose whole key range
//! holds no key of any other input, whose entries are each the only version of their user
//! key, none of them a tombstone the merge would drop, and none routed to the fast tier by
//! retention or interleaved with a promoted record, the block is appended to the output as
//! it is stored (compressed bytes and trailer) instead of being decoded and re-encoded.
//! Everything else goes entry by entry exactly as without reuse, through the same
//! decisions ([`Merger`]). With reuse off the merge runs over a `MergingIterator`, the
//! older code path, which the tests compare against.

use super::Compaction;
use crate::env::{Env, IoCause, Tier};
use crate::hot::promotion::PcRecord;
use crate::hot::{HotKeys, HotTracker};
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::{
    compare_internal, make_internal_key, parse_internal_key, user_key, ParsedKey, SeqNo, ValueKind,
    MAX_SEQ,
};
use crate::sst::block::BlockIter;
use crate::sst::{BlockWrites, DataBlocks, RawBlock, TableBuilder, TableOptions};
use crate::version::VersionEdit;
use crate::version::{table_file_name, FileMeta, LevelIterator, NewFile, TableCache, Version};
use crate::{Error, Result};
use std::collections::VecDeque;
use std::sync::Arc;

/// What a finished job produced.
#[derive(Debug, Default)]
pub struct JobOutput {
    /// The edit to install: inputs deleted, outputs added.
    pub edit: VersionEdit,
    /// Bytes of input tables.
    pub bytes_read: u64,
    /// Bytes of output tables.
    pub bytes_written: u64,
    /// Entries dropped (shadowed versions and obsolete tombstones).
    pub entries_dropped: u64,
    /// Key and value bytes kept on the last fast level by retention.
    pub retained_bytes: u64,
    /// Key and value bytes of promotion-cache records written to the last fast level.
    pub promoted_bytes: u64,
    /// Data blocks of the outputs: copied from an input as stored, or encoded anew.
    pub blocks: BlockWrites,
}

/// HotRAP's part in a compaction from the last fast level into the slow tier.
pub struct HotRouting<'a> {
    /// The hotness tracker.
    pub tracker: &'a HotTracker,
    /// Keep hot input records on the fast tier.
    pub retention: bool,
    /// Ask the tracker before promoting cache records (off: promote them all).
    pub hotness_check: bool,
    /// Promotion-cache records taken for this compaction, sorted by key.
    pub promote: Vec<(bytes::Bytes, PcRecord)>,
    /// User-key range of the fast-tier inputs: only keys inside it may stay on that level
    /// (the level's other files lie outside it).
    pub lo: Vec<u8>,
    /// Upper end of that range (inclusive).
    pub hi: Vec<u8>,
}

/// Everything a job needs besides the compaction itself.
pub struct JobContext<'a> {
    /// The environment.
    pub env: &'a Arc<Env>,
    /// Open tables.
    pub tables: &'a Arc<TableCache>,
    /// Table format options.
    pub table_options: TableOptions,
    /// Split outputs at this size.
    pub target_file_size: u64,
    /// The oldest sequence number any live snapshot (or the latest state) reads at.
    pub smallest_snapshot: SeqNo,
    /// The version the compaction was picked from (to know what lies deeper).
    pub version: &'a Version,
    /// Allocates a file number.
    pub new_file_number: &'a (dyn Fn() -> u64 + Sync),
    /// Retention and promotion, for compactions from the last fast level into the slow tier.
    pub hot: Option<HotRouting<'a>>,
    /// The fast disk is full: write every output to the slow tier (a fast level's files may
    /// live there; the fast-tier budget is a soft limit).
    pub spill_to_slow: bool,
    /// Copy untouched data blocks verbatim (see the module comment).
    pub block_reuse: bool,
}

/// Merges the inputs of `c` into new files. On error, files written so far are deleted.
pub fn run(c: &Compaction, ctx: &JobContext<'_>) -> Result<JobOutput> {
    let mut out = JobOutput::default();
    for f in c.all_inputs() {
        out.edit.deleted.push((
            if c.inputs.iter().any(|i| i.number == f.number) {
                c.level
            } else {
                c.output_level
            },
            f.number,
        ));
    }
    out.bytes_read = c.input_bytes();
    if c.is_trivial_move() {
        let f = &c.inputs[0];
        out.edit.added.push(NewFile {
            level: c.output_level,
            ..f.info.clone()
        });
        out.bytes_read = 0;
        return Ok(out);
    }
    let place = |tier: Tier| if ctx.spill_to_slow { Tier::Slow } else { tier };
    let mut down = Sink::new(c.output_level, place(c.output_tier));
    if let Some(below) = ctx.version.levels.get(c.output_level + 1) {
        down.next_level_ends = below
            .iter()
            .map(|f| user_key(f.largest()).to_vec())
            .collect();
    }
    let mut fast = Sink::new(c.level, place(Tier::Fast));
    let merged = Merger::new(c, ctx, &mut down, &mut fast, &mut out).and_then(|m| {
        if ctx.block_reuse {
            merge_blocks(c, ctx, m)
        } else {
            merge_entries(c, ctx, m)
        }
    });
    if let Err(e) = merged {
        for sink in [&down, &fast] {
            for &number in &sink.created {
                let _ = ctx.env.remove(sink.tier, &table_file_name(number));
            }
        }
        return Err(e);
    }
    for sink in [&down, &fast] {
        let b = &sink.blocks;
        out.blocks.copied_blocks += b.copied_blocks;
        out.blocks.copied_bytes += b.copied_bytes;
        out.blocks.built_blocks += b.built_blocks;
        out.blocks.built_bytes += b.built_bytes;
    }
    let written: Vec<NewFile> = down.done.into_iter().chain(fast.done).collect();
    out.bytes_written = written.iter().map(|f| f.size).sum();
    out.edit.added = written;
    Ok(out)
}

fn input_iterator(c: &Compaction, ctx: &JobContext<'_>) -> Result<MergingIterator> {
    let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
    if c.level == 0 {
        // L0 files overlap: one iterator each, newest first (they are stored that way).
        for f in &c.inputs {
            let t = ctx.tables.get(f, IoCause::Compaction)?;
            children.push(Box::new(t.iter(IoCause::Compaction, false)));
        }
    } else {
        children.push(Box::new(LevelIterator::new(
            c.inputs.clone(),
            ctx.tables.clone(),
            IoCause::Compaction,
            false,
        )));
    }
    children.push(Box::new(LevelIterator::new(
        c.output_inputs.clone(),
        ctx.tables.clone(),
        IoCause::Compaction,
        false,
    )));
    Ok(MergingIterator::new(children))
}

struct Output {
    builder: TableBuilder,
    number: u64,
}

/// Where one output stream goes: the compaction's output level, or (for retention and
/// promotion by compaction) back to the last fast level.
struct Sink {
    level: usize,
    tier: Tier,
    current: Option<Output>,
    /// Every file number created (finished or not), to delete them all on failure.
    created: Vec<u64>,
    done: Vec<NewFile>,
    bytes_in: u64,
    blocks: BlockWrites,
    /// Largest user keys of the files of the level below this sink's, in order: the
    /// boundaries an output may be cut at early (empty: cut at the target size only).
    next_level_ends: Vec<Vec<u8>>,
    /// Index of the first of `next_level_ends` at or above the last key seen.
    next_end: usize,
    /// Boundaries passed while the current output was written.
    ends_passed: usize,
}

impl Sink {
    fn new(level: usize, tier: Tier) -> Self {
        Sink {
            level,
            tier,
            current: None,
            created: Vec::new(),
            done: Vec::new(),
            bytes_in: 0,
            blocks: BlockWrites::default(),
            next_level_ends: Vec::new(),
            next_end: 0,
            ends_passed: 0,
        }
    }

    /// The table being written, created on first use.
    fn builder(&mut self, ctx: &JobContext<'_>) -> Result<&mut TableBuilder> {
        let o = match self.current.take() {
            Some(o) => o,
            None => {
                let number = (ctx.new_file_number)();
                self.created.push(number);
                let file = ctx.env.create_writable(
                    self.tier,
                    &table_file_name(number),
                    IoCause::Compaction,
                )?;
                Output {
                    builder: TableBuilder::new(file, ctx.table_options),
                    number,
                }
            }
        };
        Ok(&mut self.current.insert(o).builder)
    }

    fn add(&mut self, ctx: &JobContext<'_>, ikey: &[u8], value: &[u8]) -> Result<()> {
        self.bytes_in += (ikey.len() - crate::key::TRAILER_LEN + value.len()) as u64;
        self.builder(ctx)?.add(ikey, value)
    }

    /// Appends a stored block whose entries hold `bytes_in` key and value bytes.
    fn add_block(&mut self, ctx: &JobContext<'_>, raw: &RawBlock, bytes_in: u64) -> Result<()> {
        self.bytes_in += bytes_in;
        self.builder(ctx)?.add_raw_block(raw)
    }

    /// Finishes the current file before user key `next` (call between user keys) if it
    /// reached the target size, or if `next` lies past the end of a file of the level below
    /// and the current file holds at least half the target size. As in RocksDB 11.8
    /// (`CompactionOutputs::ShouldStopBefore`) that threshold rises by 5% of the target per
    /// boundary already passed, up to 90%, so files mostly end near their target size.
    fn maybe_cut(&mut self, ctx: &JobContext<'_>, next: &[u8]) -> Result<()> {
        let mut crossed = 0;
        while self
            .next_level_ends
            .get(self.next_end)
            .is_some_and(|end| end.as_slice() < next)
        {
            self.next_end += 1;
            crossed += 1;
        }
        let Some(size) = self.current.as_ref().map(|o| o.builder.estimated_size()) else {
            return Ok(());
        };
        let early = ctx.target_file_size / 100 * (50 + (self.ends_passed as u64 * 5).min(40));
        if size >= ctx.target_file_size || (crossed > 0 && size >= early) {
            self.finish()?;
        } else {
            self.ends_passed += crossed;
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        let Some(o) = self.current.take() else {
            return Ok(());
        };
        self.ends_passed = 0;
        let info = o.builder.finish()?;
        let b = &mut self.blocks;
        b.copied_blocks += info.blocks.copied_blocks;
        b.copied_bytes += info.blocks.copied_bytes;
        b.built_blocks += info.blocks.built_blocks;
        b.built_bytes += info.blocks.built_bytes;
        self.done
            .push(new_file_from(self.level, o.number, self.tier, info));
        Ok(())
    }
}

/// Where retention learns which keys are hot.
enum HotSource {
    /// Retention is off: nothing stays.
    Off,
    /// RALT's hot keys of the range, merged with the compaction's keys (HotRAP §3.1).
    Listed(std::iter::Peekable<HotKeys>),
    /// A tracker that cannot list keys (the bloom cascade): `is_hot` per merged key.
    PerKey,
}

/// Decides, key by key, what a compaction from the last fast level into the slow tier keeps
/// on the fast tier (HotRAP §3.1): hot keys of the inputs (retention), and hot
/// promotion-cache records the inputs do not hold (promotion by compaction).
struct HotRouter<'a> {
    hot: &'a HotRouting<'a>,
    source: HotSource,
    pending: VecDeque<(bytes::Bytes, PcRecord)>,
}

impl<'a> HotRouter<'a> {
    fn new(hot: &'a HotRouting<'a>) -> Result<Self> {
        let source = if !hot.retention {
            HotSource::Off
        } else {
            match hot.tracker.hot_keys(&hot.lo, &hot.hi)? {
                Some(keys) => HotSource::Listed(keys.peekable()),
                None => HotSource::PerKey,
            }
        };
        Ok(HotRouter {
            hot,
            source,
            pending: hot.promote.iter().cloned().collect(),
        })
    }

    fn in_range(&self, ukey: &[u8]) -> bool {
        ukey >= self.hot.lo.as_slice() && ukey <= self.hot.hi.as_slice()
    }

    /// Skips listed hot keys below `ukey` and returns the next one (at or above it). Keys
    /// arrive in order, so nothing skipped is asked about again.
    fn next_hot_from(&mut self, ukey: &[u8]) -> Result<Option<&[u8]>> {
        let HotSource::Listed(keys) = &mut self.source else {
            return Ok(None);
        };
        loop {
            match keys.peek() {
                None => return Ok(None),
                Some(Err(_)) => {
                    return match keys.next() {
                        Some(Err(e)) => Err(e),
                        _ => Ok(None),
                    }
                }
                Some(Ok((k, _))) if k.as_slice() < ukey => {
                    keys.next();
                }
                Some(Ok(_)) => break,
            }
        }
        Ok(match keys.peek() {
            Some(Ok((k, _))) => Some(k.as_slice()),
            _ => None,
        })
    }

    /// True if `ukey` (the next user key of the merge, in order) stays on the fast tier.
    fn retain(&mut self, ukey: &[u8]) -> Result<bool> {
        if !self.in_range(ukey) {
            return Ok(false);
        }
        match self.source {
            HotSource::Off => Ok(false),
            HotSource::PerKey => Ok(self.hot.tracker.is_hot(ukey)),
            HotSource::Listed(_) => Ok(self.next_hot_from(ukey)? == Some(ukey)),
        }
    }

    /// True if routing could treat some key of a block spanning `[first, last]` (user keys
    /// `keys`, in order) differently from "goes down": a key would be retained, or a
    /// promoted record falls inside the range. Call after `promotable_before(first)`.
    /// Consumes nothing a later `retain` of a key `>= first` needs.
    fn touches(&mut self, first: &[u8], last: &[u8], keys: &[Vec<u8>]) -> Result<bool> {
        if self
            .pending
            .front()
            .is_some_and(|(k, _)| k.as_ref() <= last)
        {
            return Ok(true);
        }
        if last < self.hot.lo.as_slice() || first > self.hot.hi.as_slice() {
            return Ok(false);
        }
        match self.source {
            HotSource::Off => Ok(false),
            HotSource::PerKey => Ok(keys
                .iter()
                .any(|k| self.in_range(k) && self.hot.tracker.is_hot(k))),
            // Conservative: any listed hot key inside the block's range, whether or not
            // the block holds it.
            HotSource::Listed(_) => Ok(self.next_hot_from(first)?.is_some_and(|k| k <= last)),
        }
    }

    /// Promotion-cache records before `ukey` (all of them when `None`) that are hot; a
    /// record for `ukey` itself is dropped: the merge holds that version or a newer one.
    fn promotable_before(&mut self, ukey: Option<&[u8]>) -> Result<Vec<(bytes::Bytes, PcRecord)>> {
        let mut out = Vec::new();
        while let Some((k, r)) = self.pending.pop_front() {
            match ukey {
                Some(u) if k.as_ref() > u => {
                    self.pending.push_front((k, r));
                    break;
                }
                Some(u) if k.as_ref() == u => break,
                _ => {}
            }
            let tracker = self.hot.tracker;
            crate::db::record_cached_read(tracker, &k, &r)?;
            if !self.hot.hotness_check || tracker.is_hot(&k) {
                out.push((k, r));
            }
        }
        Ok(out)
    }
}

/// The per-entry decisions of a merge, shared by both drivers: what to drop, where each
/// survivor goes, when to cut output files.
struct Merger<'a, 's> {
    c: &'a Compaction,
    ctx: &'a JobContext<'a>,
    down: &'s mut Sink,
    fast: &'s mut Sink,
    out: &'s mut JobOutput,
    router: Option<HotRouter<'a>>,
    promoted: u64,
    last_user_key: Vec<u8>,
    has_last: bool,
    last_seq_for_key: SeqNo,
    keep_on_fast: bool,
    /// Scratch for the user keys of a block considered for reuse.
    block_keys: Vec<Vec<u8>>,
}

impl<'a, 's> Merger<'a, 's> {
    fn new(
        c: &'a Compaction,
        ctx: &'a JobContext<'a>,
        down: &'s mut Sink,
        fast: &'s mut Sink,
        out: &'s mut JobOutput,
    ) -> Result<Self> {
        Ok(Merger {
            c,
            ctx,
            down,
            fast,
            out,
            router: ctx.hot.as_ref().map(HotRouter::new).transpose()?,
            promoted: 0,
            last_user_key: Vec::new(),
            has_last: false,
            last_seq_for_key: MAX_SEQ,
            keep_on_fast: false,
            block_keys: Vec::new(),
        })
    }

    fn malformed(&self) -> Error {
        Error::corruption(
            self.ctx.env.dir(self.c.output_tier),
            0,
            "compaction input holds a malformed internal key",
        )
    }

    /// A tombstone every snapshot sees, with nothing deeper to hide, can go.
    fn dead_tombstone(&self, k: &ParsedKey<'_>) -> bool {
        k.kind == ValueKind::Delete
            && k.seq <= self.ctx.smallest_snapshot
            && self
                .ctx
                .version
                .is_base_level_for_key(self.c.output_level, k.user_key)
    }

    /// Work due before the first version of a new user key: cut outputs (only between
    /// user keys), write promoted records that sort before it, decide its retention.
    /// Calling it twice for one key changes nothing.
    fn start_user_key(&mut self, ukey: &[u8]) -> Result<()> {
        self.down.maybe_cut(self.ctx, ukey)?;
        self.fast.maybe_cut(self.ctx, ukey)?;
        self.write_promoted_before(Some(ukey))?;
        if let Some(r) = self.router.as_mut() {
            self.keep_on_fast = r.retain(ukey)?;
        }
        Ok(())
    }

    /// Writes the promoted records that sort before `bound` (all of them when `None`) to
    /// the fast outputs.
    fn write_promoted_before(&mut self, bound: Option<&[u8]>) -> Result<()> {
        if let Some(r) = self.router.as_mut() {
            for (k, rec) in r.promotable_before(bound)? {
                self.fast.add(
                    self.ctx,
                    &make_internal_key(&k, rec.seq, ValueKind::Value),
                    &rec.value,
                )?;
                self.promoted += (k.len() + rec.value.len()) as u64;
            }
        }
        Ok(())
    }

    /// The next entry of the merge, in internal-key order.
    fn add_entry(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        let parsed = parse_internal_key(ikey).ok_or_else(|| self.malformed())?;
        let new_user_key = !self.has_last || parsed.user_key != self.last_user_key.as_slice();
        if new_user_key {
            self.start_user_key(parsed.user_key)?;
            self.last_user_key.clear();
            self.last_user_key.extend_from_slice(parsed.user_key);
            self.has_last = true;
            self.last_seq_for_key = MAX_SEQ;
        }
        // A newer version of this key is visible to every snapshot: this one is hidden.
        let shadowed = self.last_seq_for_key <= self.ctx.smallest_snapshot;
        // Promotion copies records with their sequence numbers, so the same version can
        // reach one merge twice (from the promoted file and from the slow tier).
        let duplicate = !new_user_key && parsed.seq == self.last_seq_for_key;
        let dead_tombstone = self.dead_tombstone(&parsed);
        self.last_seq_for_key = parsed.seq;
        if shadowed || dead_tombstone || duplicate {
            self.out.entries_dropped += 1;
        } else if self.keep_on_fast {
            self.fast.add(self.ctx, ikey, value)?;
        } else {
            self.down.add(self.ctx, ikey, value)?;
        }
        Ok(())
    }

    /// Copies `raw` (a block whose first entry is the merge's next entry) to the output
    /// level as stored, if nothing in it would be handled differently entry by entry:
    /// - every key of the merge's other inputs is above its last user key
    ///   (`next_other`: the smallest user key any other input has left), and everything
    ///   already merged is below its first, so no other version of its keys is anywhere
    ///   in the merge;
    /// - its entries have distinct user keys (no version shadows another) and none is a
    ///   tombstone the merge would drop;
    /// - routing sends every key down: none retained, no promoted record inside its range.
    ///
    /// Returns false (and changes nothing the entry path depends on) otherwise.
    fn try_reuse(&mut self, raw: &RawBlock, next_other: Option<&[u8]>) -> Result<bool> {
        // The neighbour checks first: they need only the block's index key and the
        // cursor's position, and they are what most blocks of a dense merge fail.
        let last = user_key(raw.last_key());
        if next_other.is_some_and(|o| o <= last) {
            return Ok(false);
        }
        let mut it = raw.block().iter();
        if it.seek_to_first().is_err() || !it.valid() {
            // The entry path reports the damage with its file and offset.
            return Ok(false);
        }
        let mut keys = std::mem::take(&mut self.block_keys);
        keys.clear();
        let mut bytes_in = 0u64;
        let mut last_seq = MAX_SEQ;
        let mut ok = true;
        let mut last_ikey_matches = false;
        while it.valid() {
            let Some(k) = parse_internal_key(it.key()) else {
                ok = false;
                break;
            };
            if keys.last().is_some_and(|p| p.as_slice() >= k.user_key) || self.dead_tombstone(&k) {
                ok = false;
                break;
            }
            bytes_in += (k.user_key.len() + it.value().len()) as u64;
            last_seq = k.seq;
            last_ikey_matches = it.key() == raw.last_key();
            keys.push(k.user_key.to_vec());
            if it.next().is_err() {
                ok = false;
                break;
            }
        }
        // (Its index key must be its last key; a table where it is not is left to the
        // entry path.)
        ok &= last_ikey_matches;
        let reused = ok && self.reuse_checked(raw, &keys, next_other, bytes_in, last_seq)?;
        self.block_keys = keys;
        Ok(reused)
    }

    fn reuse_checked(
        &mut self,
        raw: &RawBlock,
        keys: &[Vec<u8>],
        next_other: Option<&[u8]>,
        bytes_in: u64,
        last_seq: SeqNo,
    ) -> Result<bool> {
        let (Some(first), Some(last)) = (keys.first(), keys.last()) else {
            return Ok(false);
        };
        if user_key(raw.last_key()) != last.as_slice() {
            return Ok(false);
        }
        if self.has_last && self.last_user_key.as_slice() >= first.as_slice() {
            return Ok(false);
        }
        if next_other.is_some_and(|o| o <= last.as_slice()) {
            return Ok(false);
        }
        // A new user key starts here whatever happens next.
        self.start_user_key(first)?;
        if let Some(r) = self.router.as_mut() {
            if r.touches(first, last, keys)? {
                return Ok(false);
            }
        }
        self.down.add_block(self.ctx, raw, bytes_in)?;
        self.last_user_key.clear();
        self.last_user_key.extend_from_slice(last);
        self.has_last = true;
        self.last_seq_for_key = last_seq;
        self.keep_on_fast = false;
        Ok(true)
    }

    /// Writes the remaining promoted records and closes the outputs.
    fn finish(mut self) -> Result<()> {
        self.write_promoted_before(None)?;
        self.down.finish()?;
        self.fast.finish()?;
        self.out.promoted_bytes = self.promoted;
        self.out.retained_bytes = self.fast.bytes_in - self.promoted;
        Ok(())
    }
}

/// The entry-by-entry merge over a merging iterator (block reuse off).
fn merge_entries(c: &Compaction, ctx: &JobContext<'_>, mut m: Merger<'_, '_>) -> Result<()> {
    let mut iter = input_iterator(c, ctx)?;
    iter.seek_to_first()?;
    while iter.valid() {
        m.add_entry(iter.key(), iter.value())?;
        iter.next()?;
    }
    m.finish()
}

/// One sorted input of a block-aware merge (an L0 file, or a level's files in key order),
/// read block by block.
struct BlockSource {
    files: VecDeque<Arc<FileMeta>>,
    blocks: Option<DataBlocks>,
    /// The current block and the cursor in it.
    current: Option<(RawBlock, BlockIter)>,
    /// The cursor is on the block's first entry.
    at_block_start: bool,
    /// The last key this source handed out (or the last key of a block copied whole).
    prev: Option<Vec<u8>>,
}

impl BlockSource {
    fn new(files: Vec<Arc<FileMeta>>) -> BlockSource {
        BlockSource {
            files: files.into(),
            blocks: None,
            current: None,
            at_block_start: false,
            prev: None,
        }
    }

    fn corrupt(&self, offset: u64, reason: &str) -> Error {
        match &self.blocks {
            Some(b) => b.corrupt(offset, reason),
            None => Error::corruption("<compaction input>", offset, reason),
        }
    }

    /// A checksum-valid table can still hold entries out of order (a forged or miswritten
    /// file): that is corruption of that table, never keys handed to the merge out of order.
    fn check_order(&mut self) -> Result<()> {
        let Some((raw, it)) = self.current.as_ref() else {
            return Ok(());
        };
        if self
            .prev
            .as_deref()
            .is_some_and(|p| compare_internal(p, it.key()).is_ge())
        {
            return Err(self.corrupt(raw.offset(), "keys out of order"));
        }
        let prev = self.prev.get_or_insert_with(Vec::new);
        prev.clear();
        prev.extend_from_slice(it.key());
        Ok(())
    }

    /// Moves past the current block, which was copied whole.
    fn skip_block(&mut self, tables: &TableCache) -> Result<()> {
        if let Some((raw, _)) = self.current.as_ref() {
            self.prev = Some(raw.last_key().to_vec());
        }
        self.next_block(tables)
    }

    /// Moves to the first entry of the next non-empty block (of this or a later file).
    fn next_block(&mut self, tables: &TableCache) -> Result<()> {
        self.current = None;
        loop {
            let Some(blocks) = self.blocks.as_mut() else {
                let Some(f) = self.files.pop_front() else {
                    return Ok(());
                };
                let t = tables.get(&f, IoCause::Compaction)?;
                self.blocks = Some(t.data_blocks(IoCause::Compaction));
                continue;
            };
            let Some(raw) = blocks.next_block()? else {
                self.blocks = None;
                continue;
            };
            let mut it = raw.block().iter();
            it.seek_to_first()
                .map_err(|e| blocks.corrupt(raw.offset(), e))?;
            if it.valid() {
                self.current = Some((raw, it));
                self.at_block_start = true;
                return self.check_order();
            }
        }
    }

    fn key(&self) -> Option<&[u8]> {
        self.current.as_ref().map(|(_, it)| it.key())
    }

    fn advance(&mut self, tables: &TableCache) -> Result<()> {
        let Some((raw, it)) = self.current.as_mut() else {
            return Ok(());
        };
        self.at_block_start = false;
        if let Err(e) = it.next() {
            let offset = raw.offset();
            return Err(self.corrupt(offset, e));
        }
        if it.valid() {
            self.check_order()
        } else {
            self.next_block(tables)
        }
    }
}

/// The block-aware merge (block reuse on): picks the input with the smallest next entry;
/// at the start of one of its blocks, tries to copy the whole block.
fn merge_blocks(c: &Compaction, ctx: &JobContext<'_>, mut m: Merger<'_, '_>) -> Result<()> {
    let mut sources: Vec<BlockSource> = Vec::new();
    if c.level == 0 {
        // L0 files overlap: one source each, newest first (they are stored that way).
        for f in &c.inputs {
            sources.push(BlockSource::new(vec![f.clone()]));
        }
    } else {
        sources.push(BlockSource::new(c.inputs.clone()));
    }
    sources.push(BlockSource::new(c.output_inputs.clone()));
    for s in &mut sources {
        s.next_block(ctx.tables)?;
    }
    loop {
        // The smallest next entry and the runner-up (whose user key is the smallest any
        // other input has left). Ties go to the earlier (newer) source.
        let mut best: Option<usize> = None;
        let mut second: Option<usize> = None;
        for (i, s) in sources.iter().enumerate() {
            let Some(k) = s.key() else { continue };
            let smaller = |j: Option<usize>| {
                j.and_then(|j| sources[j].key())
                    .is_none_or(|kj| compare_internal(k, kj).is_lt())
            };
            if smaller(best) {
                second = best;
                best = Some(i);
            } else if smaller(second) {
                second = Some(i);
            }
        }
        let Some(i) = best else { break };
        if sources[i].at_block_start {
            let next_other = second.and_then(|j| sources[j].key()).map(user_key);
            if let Some((raw, _)) = sources[i].current.as_ref() {
                if m.try_reuse(raw, next_other)? {
                    sources[i].skip_block(ctx.tables)?;
                    continue;
                }
            }
        }
        if let Some((_, it)) = sources[i].current.as_ref() {
            m.add_entry(it.key(), it.value())?;
        }
        sources[i].advance(ctx.tables)?;
    }
    m.finish()
}

/// The manifest record of a finished table.
pub fn new_file_from(
    level: usize,
    number: u64,
    tier: crate::env::Tier,
    info: crate::sst::TableInfo,
) -> NewFile {
    NewFile {
        level,
        number,
        tier,
        size: info.file_size,
        smallest: info.smallest.encoded().to_vec(),
        largest: info.largest.encoded().to_vec(),
        smallest_seq: info.props.smallest_seq,
        largest_seq: info.props.largest_seq,
        num_entries: info.props.num_entries,
        num_deletions: info.props.num_deletions,
    }
}

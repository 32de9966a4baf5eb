//! Where a merge into semi-sorted tables writes (pass 2's outputs): a record goes to the
//! output-level table whose territory holds it (`super::semi_plan::territory`); an
//! appended table gets it in its new generation, a table rewritten whole (or no table at
//! all) sends it to fresh semi-sorted tables cut at the target size; a fresh table spans
//! the territories of neighbouring tables rewritten whole and closes before one that
//! stays (appended or untouched), so the level's tables stay disjoint and small rewritten
//! tables do not stay small. The blocks the merge dirties arrive through the plan's `DirtyLog` as the
//! merge reads them, always before their keys (a generation in progress takes them then,
//! the others when they start). At the end every appended table with dirty blocks gets its generation
//! (even with no record landing: its dirty blocks must stop being valid), an appended
//! table left empty is dropped, and a table the merge never touched stays as it is.

use super::context::JobContext;
use super::semi_plan::{territory, DirtyLog, Target, TargetMode};
use crate::env::{IoCause, Tier};
use crate::error::Result;
use crate::key::user_key;
use crate::sst::semi::GenerationWriter;
use crate::sst::BlockWrites;
use crate::version::{table_file_name, NewFile};
use std::sync::Arc;

/// The least block size of scan defragmentation's tables: the block size scans were
/// measured at (docs/bench/semi-sorted-scans.md), kept when the sorted tables' blocks,
/// sized for point reads, are smaller.
const SCAN_BLOCK_SIZE: usize = 16 << 10;

/// An appended table's new generation in progress.
struct Appending {
    writer: GenerationWriter,
    number: u64,
}

struct SinkTarget {
    target: Target,
    appending: Option<Appending>,
}

/// The semi-sorted outputs of one merge.
pub(super) struct SemiOutputs {
    targets: Vec<SinkTarget>,
    fresh: Option<(GenerationWriter, u64)>,
    fresh_territory: usize,
    /// Output-level tables the merge left as they were (not to be deleted).
    pub(super) untouched: Vec<u64>,
    /// Bytes of appended tables' earlier generations (in their size, not written now).
    pub(super) appended_base: u64,
    /// The dirty blocks the merge read, and how many of its marks were applied.
    log: Arc<DirtyLog>,
    marks_seen: usize,
    /// A fresh table closes at this size ([`fresh_table_size`]).
    cut_size: u64,
    /// Fresh tables take the sorted tables' block size, not the semi-sorted one
    /// ([`SemiOutputs::for_scans`]).
    scan_blocks: bool,
}

/// The size at which compaction `c` closes a fresh semi-sorted table: the target file
/// size, except in a rewrite of a level's tables in place (scan defragmentation, the
/// expiry sweep). There the live bytes are split into as few tables as keep each within
/// twice the target (the most a merge lets a semi-sorted table grow to), of about equal
/// size, with a quarter of the target to spare for the estimate: cutting at the target
/// would leave a full table and a sliver, more tables for every scan to seek in (a table
/// of 1.2 times the target rewritten in place stays one table).
pub(super) fn fresh_table_size(c: &super::Compaction, target_file_size: u64) -> u64 {
    let in_place = c.level == c.output_level && c.output_inputs.is_empty();
    if !in_place {
        return target_file_size;
    }
    let live: u64 = c.inputs.iter().map(|f| f.sized_bytes()).sum();
    let tables = live.div_ceil(2 * target_file_size.max(1)).max(1);
    (live.div_ceil(tables) + target_file_size / 4).max(target_file_size)
}

/// Where finished tables are recorded (the owning sink's lists).
pub(super) struct SinkLists<'a> {
    pub(super) level: usize,
    pub(super) tier: Tier,
    pub(super) created: &'a mut Vec<u64>,
    pub(super) done: &'a mut Vec<NewFile>,
    pub(super) blocks: &'a mut BlockWrites,
}

impl SinkLists<'_> {
    fn record(&mut self, number: u64, info: crate::sst::TableInfo) {
        let b = &mut self.blocks;
        b.built_blocks += info.blocks.built_blocks;
        b.built_bytes += info.blocks.built_bytes;
        self.done
            .push(NewFile::from_table(self.level, number, self.tier, info));
    }
}

impl SemiOutputs {
    pub(super) fn new(targets: Vec<Target>, log: Arc<DirtyLog>, cut_size: u64) -> Self {
        SemiOutputs {
            targets: targets
                .into_iter()
                .map(|target| SinkTarget {
                    target,
                    appending: None,
                })
                .collect(),
            fresh: None,
            fresh_territory: 0,
            untouched: Vec::new(),
            appended_base: 0,
            log,
            marks_seen: 0,
            cut_size,
            scan_blocks: false,
        }
    }

    /// With `scans`, writes fresh tables in blocks of [`SCAN_BLOCK_SIZE`] or the sorted
    /// tables' block size (`Options::block_size`) if larger, against the semi-sorted 2 KiB:
    /// for scan defragmentation, whose tables are the ones user scans read. A scan's
    /// per-block work (checksum, copy, parse, block-cache insert) then comes once per 16
    /// KiB: with 2 KiB blocks a defragmented tier spent 1.05-1.36x the sorted tier's CPU
    /// (16 KiB blocks then) per YCSB E scan at equal reads, 1.06-1.17x since
    /// (docs/bench/semi-sorted-scans.md, "Defragmented tables in the sorted block size"). A
    /// merge into such a table later dirties its larger blocks: it costs more slow-tier
    /// writes only for tables both scanned and written. (Blocks cut
    /// at `block_records` entries stay cut there: record-sized blocks are a choice about
    /// the read unit, which this does not override.)
    pub(super) fn for_scans(mut self, scans: bool) -> Self {
        self.scan_blocks = scans;
        self
    }

    /// Stored bytes of the dirty blocks the merge read.
    pub(super) fn dirty_read_bytes(&self) -> u64 {
        self.log.read_bytes()
    }

    /// What the merge's dirty-block span reads did.
    pub(super) fn span_stats(&self) -> super::span_reads::SpanReadStats {
        self.log.span_stats()
    }

    /// Takes the blocks the merge marked dirty since the last call: a generation in
    /// progress is told, a target not yet started records them for its start.
    fn apply_marks(&mut self) -> Result<()> {
        let (marks, seen) = self.log.since(self.marks_seen);
        self.marks_seen = seen;
        for (t, i) in marks {
            let Some(st) = self.targets.get_mut(t) else {
                continue;
            };
            if let Some(a) = st.appending.as_mut() {
                a.writer.mark_dirty(i)?;
            } else if let TargetMode::Append { dirty, .. } = &mut st.target.mode {
                dirty.push(i);
            }
        }
        Ok(())
    }

    /// Starts target `t`'s new generation: its file is linked to a new number, cut back
    /// to its recorded size, and continued.
    fn start_append(
        &mut self,
        ctx: &JobContext<'_>,
        lists: &mut SinkLists<'_>,
        t: usize,
    ) -> Result<()> {
        let st = &mut self.targets[t];
        let TargetMode::Append { prior, dirty } = &mut st.target.mode else {
            return Ok(());
        };
        let meta = &st.target.meta;
        let number = (ctx.new_file_number)();
        lists.created.push(number);
        let name = table_file_name(number);
        ctx.env
            .link(meta.tier, &table_file_name(meta.number), &name)?;
        let file = ctx
            .env
            .reopen_writable(meta.tier, &name, meta.size(), IoCause::Compaction)?;
        let writer = GenerationWriter::continuing(
            file,
            ctx.semi_table_options_for(lists.level),
            meta.size(),
            std::mem::take(prior),
            dirty,
        );
        st.appending = Some(Appending { writer, number });
        Ok(())
    }

    fn finish_fresh(&mut self, lists: &mut SinkLists<'_>) -> Result<()> {
        if let Some((w, number)) = self.fresh.take() {
            let info = w.finish()?;
            lists.record(number, info);
        }
        Ok(())
    }

    /// Adds a record (internal keys ascending across calls).
    pub(super) fn add(
        &mut self,
        ctx: &JobContext<'_>,
        lists: &mut SinkLists<'_>,
        ikey: &[u8],
        value: &[u8],
    ) -> Result<()> {
        self.apply_marks()?;
        let t = territory(&self.targets, |s| &s.target.meta, user_key(ikey));
        let appends = self
            .targets
            .get(t)
            .is_some_and(|s| matches!(s.target.mode, TargetMode::Append { .. }));
        if appends {
            if self.targets[t].appending.is_none() {
                self.start_append(ctx, lists, t)?;
            }
            if let Some(a) = self.targets[t].appending.as_mut() {
                a.writer.add(ikey, value)?;
            }
            return Ok(());
        }
        // Keys ascend, so `t` is at or past the fresh table's territory; it may go on only
        // over territories rewritten whole.
        let spans = (self.fresh_territory + 1..=t).all(|i| {
            self.targets
                .get(i)
                .is_some_and(|s| matches!(s.target.mode, TargetMode::Rewrite))
        });
        if self.fresh.is_some() && !spans {
            self.finish_fresh(lists)?;
        }
        self.fresh_territory = t;
        if self.fresh.is_none() {
            let number = (ctx.new_file_number)();
            lists.created.push(number);
            let file = ctx.env.create_writable(
                lists.tier,
                &table_file_name(number),
                IoCause::Compaction,
            )?;
            let mut opts = ctx.semi_table_options_for(lists.level);
            if self.scan_blocks {
                opts.block_size = opts
                    .block_size
                    .max(ctx.table_options.block_size)
                    .max(SCAN_BLOCK_SIZE);
            }
            self.fresh = Some((GenerationWriter::new(file, opts), number));
        }
        if let Some((w, _)) = self.fresh.as_mut() {
            w.add(ikey, value)?;
        }
        Ok(())
    }

    /// Between user keys: closes a fresh table that reached its size (`cut_size`).
    pub(super) fn maybe_cut(&mut self, lists: &mut SinkLists<'_>) -> Result<()> {
        if self
            .fresh
            .as_ref()
            .is_some_and(|(w, _)| w.estimated_size() >= self.cut_size)
        {
            self.finish_fresh(lists)?;
        }
        Ok(())
    }

    /// Closes every output (see the module comment).
    pub(super) fn finish(&mut self, ctx: &JobContext<'_>, lists: &mut SinkLists<'_>) -> Result<()> {
        self.apply_marks()?;
        self.finish_fresh(lists)?;
        for t in 0..self.targets.len() {
            let dirty_any = matches!(
                &self.targets[t].target.mode,
                TargetMode::Append { dirty, .. } if !dirty.is_empty()
            );
            let is_append = matches!(self.targets[t].target.mode, TargetMode::Append { .. });
            if is_append && self.targets[t].appending.is_none() {
                if !dirty_any {
                    self.untouched.push(self.targets[t].target.meta.number);
                    continue;
                }
                self.start_append(ctx, lists, t)?;
            }
            let base = self.targets[t].target.meta.size();
            let tier = self.targets[t].target.meta.tier;
            if let Some(a) = self.targets[t].appending.take() {
                if a.writer.is_empty() {
                    // Everything it held was rewritten away (dropped or kept on the fast
                    // tier): the table goes, and so does its new name.
                    drop(a.writer);
                    ctx.env.remove(tier, &table_file_name(a.number))?;
                    continue;
                }
                let info = a.writer.finish()?;
                self.appended_base += base;
                lists.record(a.number, info);
            }
        }
        Ok(())
    }
}

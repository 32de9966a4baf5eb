//! Running a compaction: merge the inputs newest-first, drop versions no snapshot can see
//! and tombstones that hide nothing, and write the survivors into new tables of the output
//! level, split at the target file size (never inside one user key's versions, so deeper
//! levels stay disjoint by user key). Past half the target size an output is also cut where
//! a file of the level below the output ends (as RocksDB does), so that a later compaction
//! of the output overlaps whole files there rather than straddling one more at each end.
//!
//! The job's parts, one file each: `merger` (the per-entry decisions: drop, route, cut),
//! `output` (the output files and where they are cut), `routing` (HotRAP's retention and
//! promotion by compaction) and `reuse` (the block-aware merge that copies untouched data
//! blocks as stored). With block reuse off the merge runs here over a `MergingIterator`
//! ([`run`]'s older code path, which the tests compare against); both drive the same
//! `Merger`. Which versions no snapshot can see is `super::stream`'s rule, shared with the
//! flush.

use super::merger::Merger;
use super::output::Sink;
use super::pushdown::Pushdown;
use super::reuse::merge_blocks;
use super::semi_plan;
use super::semi_sink::SemiOutputs;
use super::Compaction;
use crate::env::{IoCause, Tier};
use crate::error::Result;
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::user_key;
use crate::sst::TableOptions;
use crate::version::{table_file_name, LevelIterator, NewFile};

pub use super::context::{HotRouting, JobContext, JobOutput};

/// The format of the output level's new tables ([`JobContext::table_options_for`]).
fn output_table_options(c: &Compaction, ctx: &JobContext<'_>) -> TableOptions {
    ctx.table_options_for(c.output_level)
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
    if c.is_trivial_move() && !ctx.move_would_keep_a_filter(&c.inputs[0], c.output_level) {
        let f = &c.inputs[0];
        out.edit.added.push(NewFile {
            level: c.output_level,
            ..f.info.clone()
        });
        out.bytes_read = 0;
        out.moved = true;
        return Ok(out);
    }
    let place = |tier: Tier| if ctx.spill_to_slow { Tier::Slow } else { tier };
    let mut down = Sink::new(
        c.output_level,
        place(c.output_tier),
        output_table_options(c, ctx),
    );
    if let Some(below) = ctx.version.levels.get(c.output_level + 1) {
        down.next_level_ends = below
            .iter()
            .map(|f| user_key(f.largest()).to_vec())
            .collect();
    }
    let mut fast = Sink::new(c.level, place(Tier::Fast), ctx.table_options);
    // Semi-sorted merges: into the slow tier's levels as laid out (not a spill). A
    // rewrite of a level's table into itself (scan defragmentation, the expiry sweep) has
    // no table to continue and writes fresh semi-sorted tables, one generation each.
    let semi = ctx.semi_sorted && c.output_tier == Tier::Slow && !ctx.spill_to_slow;
    let mut push = None;
    if let Some(deepest) = c.pushdown.filter(|&d| d > c.output_level) {
        push = Some(Pushdown::new(
            c,
            ctx,
            deepest,
            semi,
            |level| place(ctx.version.layout.tiers[level]),
            |level| ctx.table_options_for(level),
        )?);
    }
    let mut semi_read = None;
    let merged = Merger::new(c, ctx, &mut down, &mut fast, &mut out).and_then(|mut m| {
        m.push = push.as_mut();
        if semi {
            merge_semi(c, ctx, m, &mut semi_read)
        } else if ctx.block_reuse {
            merge_blocks(c, ctx, m)
        } else {
            merge_entries(c, ctx, m)
        }
    });
    let merged = merged.and_then(|()| match push.as_mut() {
        Some(p) => p.finish(ctx),
        None => Ok(()),
    });
    if let Err(e) = merged {
        let created = [&down, &fast]
            .into_iter()
            .flat_map(|s| s.created.iter().map(|&n| (s.tier, n)))
            .chain(push.iter().flat_map(|p| p.created()));
        remove_files(ctx, created);
        return Err(e);
    }
    let (pushed, pushed_blocks) = match push.as_mut() {
        Some(p) => p.take_done(),
        None => Default::default(),
    };
    for b in [&down.blocks, &fast.blocks, &pushed_blocks] {
        out.blocks.copied_blocks += b.copied_blocks;
        out.blocks.copied_bytes += b.copied_bytes;
        out.blocks.built_blocks += b.built_blocks;
        out.blocks.built_bytes += b.built_bytes;
    }
    out.pushed_bytes = pushed.iter().map(|f| f.size).sum();
    let mut appended_base = 0;
    if let Some(semi) = down.semi.take() {
        // Tables the merge left alone stay; appended ones were rewritten only in part.
        out.edit
            .deleted
            .retain(|(_, n)| !semi.untouched.contains(n));
        appended_base = semi.appended_base;
        out.bytes_read = semi_read.map_or(out.bytes_read, |r| r + semi.dirty_read_bytes());
        let spans = semi.span_stats();
        out.dirty_span_reads = spans.started;
        out.dirty_span_waits = spans.waits;
        out.dirty_span_wait_micros = spans.wait_micros;
        out.dirty_span_rounds = spans.rounds;
        out.dirty_spans_in_flight = spans.most_in_flight;
    }
    let written: Vec<NewFile> = down
        .done
        .into_iter()
        .chain(pushed)
        .chain(fast.done)
        .collect();
    out.bytes_written = written.iter().map(|f| f.size).sum::<u64>() - appended_base;
    out.edit.added = written;
    Ok(out)
}

/// The merge into semi-sorted slow-tier tables, in one pass: the dirty blocks are found
/// and read as the merge reaches them. `read_bytes` gets the plan's estimate of its reads.
fn merge_semi(
    c: &Compaction,
    ctx: &JobContext<'_>,
    m: Merger<'_, '_>,
    read_bytes: &mut Option<u64>,
) -> Result<()> {
    let plan = semi_plan::plan(c, ctx)?;
    *read_bytes = Some(plan.read_bytes);
    let promoted = ctx.hot.as_ref().map_or_else(Vec::new, |h| {
        h.promote.iter().map(|(k, _)| k.to_vec()).collect()
    });
    let inner = input_iterator(c, ctx, plan.rewrite_iterators())?;
    let mut iter = plan.dirty_blocks(inner, promoted);
    let cut = super::semi_sink::fresh_table_size(c, ctx.target_file_size);
    let scans = c.reason == super::picker::DEFRAGMENT_REASON;
    m.down.semi = Some(SemiOutputs::new(plan.targets, plan.log, cut).for_scans(scans));
    iter.seek_to_first()?;
    merge_iter(iter, m)
}

/// Removes the tables a failed job created (a table that cannot be removed now is removed
/// by the next open, as no version names it).
fn remove_files(ctx: &JobContext<'_>, created: impl Iterator<Item = (Tier, u64)>) {
    for (tier, number) in created {
        let _ = ctx.env.remove(tier, &table_file_name(number));
    }
}

/// The merge's input: the input level's files, then `outputs` (the output level's part).
fn input_iterator(
    c: &Compaction,
    ctx: &JobContext<'_>,
    outputs: Vec<Box<dyn InternalIterator>>,
) -> Result<MergingIterator> {
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
    children.extend(outputs);
    Ok(MergingIterator::new(children))
}

/// The entry-by-entry merge over a merging iterator (block reuse off).
fn merge_entries(c: &Compaction, ctx: &JobContext<'_>, m: Merger<'_, '_>) -> Result<()> {
    let outputs: Box<dyn InternalIterator> = Box::new(LevelIterator::new(
        c.output_inputs.clone(),
        ctx.tables.clone(),
        IoCause::Compaction,
        false,
    ));
    let mut iter = input_iterator(c, ctx, vec![outputs])?;
    iter.seek_to_first()?;
    merge_iter(iter, m)
}

/// Feeds a positioned merging iterator through the merger.
fn merge_iter(mut iter: impl InternalIterator, mut m: Merger<'_, '_>) -> Result<()> {
    while iter.valid() {
        m.add_entry(iter.key(), iter.value())?;
        iter.next()?;
    }
    m.finish()
}

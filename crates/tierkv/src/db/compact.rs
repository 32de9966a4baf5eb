//! The compaction job on the engine side: the HotRAP routing `hot::policy` decides for a
//! compaction into the slow tier, the job itself (`compaction::job`, retried with its
//! outputs on the slow tier when the fast one is full), the install of its result, and its
//! counters and log event. Scheduling is `background`'s; the routing decisions are
//! `hot::policy`'s: this file carries them out and must not make them.

use super::stats::Counters;
use super::{DbInner, State};
use crate::compaction::job::{self, HotRouting, JobContext, JobOutput};
use crate::compaction::{picker, Compaction};
use crate::env::kill::kill_point;
use crate::env::Tier;
use crate::error::Result;
use crate::hot::policy;
use crate::version::{FileMeta, Version};
use std::sync::Arc;
use std::time::Duration;

/// What the picker's level targets depend on beside the version: the live WALs, and the
/// hot set retention keeps on the last fast level.
pub(crate) fn occupancy(inner: &DbInner, st: &State) -> picker::Occupancy {
    picker::Occupancy {
        wal_bytes: st.tree.wal_bytes(),
        hot_bytes: inner.retained_hot_bytes(),
    }
}

/// The target the picker sets for `level`.
pub(crate) fn level_target(inner: &DbInner, st: &State, v: &Version, level: usize) -> u64 {
    picker::level_targets(v, &inner.opts, occupancy(inner, st))[level]
}

/// Whether the last fast level `level` is saturated with retained hot data
/// (`policy::Retention::saturated`): picking it would only rewrite it in place.
pub(crate) fn retention_saturated(inner: &DbInner, st: &State, v: &Version, level: usize) -> bool {
    st.retention.saturated(
        v.level_sized_bytes(level),
        level_target(inner, st, v, level),
        inner.opts.target_file_size,
    )
}

/// Runs a claimed compaction and installs its result.
pub(crate) fn run_compaction(inner: &Arc<DbInner>, c: &Compaction, v: &Version) -> Result<()> {
    let started = std::time::Instant::now();
    let alloc = || inner.state.lock().tree.versions.new_file_number();
    let mut ctx = JobContext {
        env: &inner.env,
        tables: &inner.tables,
        table_options: inner.opts.table_options(),
        semi_table_options: inner.opts.semi_table_options(),
        last_level_filters: inner.opts.last_level_filters,
        target_file_size: inner.opts.target_file_size,
        smallest_snapshot: inner.reads.smallest_snapshot(),
        version: v,
        new_file_number: &alloc,
        hot: hot_routing(inner, c, v),
        spill_to_slow: false,
        block_reuse: inner.opts.compaction.block_reuse,
        semi_sorted: inner.opts.compaction.slow_tier_format
            == crate::options::SlowTierFormat::SemiSorted,
        now: inner.opts.clock.now_ms(),
    };
    let result = match job::run(c, &ctx) {
        Err(e) if e.is_no_space() && !inner.env.is_single_dir() => {
            tracing::warn!(
                "a compaction found no space, retrying with outputs on the slow tier: {e}"
            );
            ctx.spill_to_slow = true;
            job::run(c, &ctx).map_err(|e2| super::flush::both_tiers_full(&e, e2))
        }
        r => r,
    };
    let out = match result {
        Ok(out) => out,
        Err(e) => {
            c.release();
            return Err(e);
        }
    };
    let output_files = out.edit.added.len();
    let out = install(inner, c, &ctx, out)?;
    if !out.moved {
        for f in c.all_inputs() {
            inner.tables.evict(f.number);
        }
    }
    log_compaction(c, v, &out, output_files, started.elapsed());
    inner.counters.add_compaction(c, &out);
    Ok(())
}

/// HotRAP's part in a compaction (HotRAP §3.3): one from the fast into the slow tier
/// announces itself to the promotion cache and takes the cached records in its range, and
/// retains or promotes as `policy::plan_crossing` says.
fn hot_routing<'a>(inner: &'a DbInner, c: &Compaction, v: &Version) -> Option<HotRouting<'a>> {
    let tracker = inner.hot.tracker.as_ref()?;
    let crosses_tiers = v.layout.tiers[c.level] == Tier::Fast && c.output_tier == Tier::Slow;
    if !crosses_tiers {
        return None;
    }
    let (lo, hi) = picker::key_range(&c.inputs)?;
    let force_down = {
        let st = inner.state.lock();
        let target = level_target(inner, &st, v, c.level);
        st.retention.force_down(
            v.level_sized_bytes(c.level),
            target,
            inner.opts.target_file_size,
        )
    };
    let plan = policy::plan_crossing(
        &inner.opts.promotion,
        c.level == inner.layout.last_fast_level,
        force_down,
    );
    let taken = inner.hot.pc.begin_compaction(&lo, &hi);
    Some(HotRouting {
        tracker,
        retention: plan.retain,
        check: plan.check,
        promote: if plan.promote_cached {
            taken
        } else {
            Vec::new()
        },
        lo,
        hi,
    })
}

/// Logs the job's edit and publishes the new version; a compaction into the slow tier
/// also tells retention how much of its input stayed. The claim is released either way.
fn install(
    inner: &DbInner,
    c: &Compaction,
    ctx: &JobContext<'_>,
    mut out: JobOutput,
) -> Result<JobOutput> {
    let stayed: u64 = out
        .edit
        .added
        .iter()
        .filter(|f| f.level == c.level)
        .map(|f| f.size)
        .sum();
    let installing = inner.installs.lock();
    let mut st = inner.state.lock();
    kill_point("compact.outputs_written");
    let logged = inner.log_and_apply(&mut st, &installing, std::mem::take(&mut out.edit));
    if let Err(e) = logged {
        // The outputs stay: the edit may be durable anyway (see log_and_apply).
        c.release();
        return Err(e);
    }
    kill_point("compact.installed");
    st.tree.drop_horizon = st.tree.drop_horizon.max(ctx.smallest_snapshot);
    inner.reads.install(&st.tree);
    c.release();
    if ctx.hot.is_some() {
        // In file bytes: what stayed or was promoted into the level against what it took.
        let taken: u64 = c.inputs.iter().map(|f| f.size()).sum();
        let now = st.tree.versions.current().level_sized_bytes(c.level);
        st.retention.after_compaction(stayed, taken, now);
    }
    Ok(out)
}

impl Counters {
    /// Counts a finished compaction: the one place its counters are updated.
    pub(crate) fn add_compaction(&self, c: &Compaction, out: &JobOutput) {
        let add = Counters::add;
        add(&self.compactions, 1);
        add(&self.trivial_moves, u64::from(out.moved));
        add(&self.compaction_bytes_read, out.bytes_read);
        add(&self.compaction_bytes_written, out.bytes_written);
        add(&self.compaction_level_read[c.level], out.bytes_read);
        add(&self.compaction_level_written[c.level], out.bytes_written);
        add(&self.compaction_entries_dropped, out.entries_dropped);
        add(&self.expired_entries_removed, out.expired_removed);
        let reason = |r| u64::from(c.reason == r);
        add(&self.expiry_compactions, reason(picker::EXPIRY_REASON));
        add(
            &self.scanned_level0_compactions,
            reason(picker::SCANNED_LEVEL0_REASON),
        );
        add(
            &self.defragment_compactions,
            reason(picker::DEFRAGMENT_REASON),
        );
        if c.reason == picker::DEFRAGMENT_REASON {
            add(&self.defragment_bytes_written, out.bytes_written);
        }
        add(&self.retained_bytes, out.retained_bytes);
        add(&self.promoted_by_compaction_bytes, out.promoted_bytes);
        add(&self.compaction_blocks_reused, out.blocks.copied_blocks);
        add(&self.compaction_bytes_reused, out.blocks.copied_bytes);
        add(&self.compaction_blocks_rewritten, out.blocks.built_blocks);
        add(&self.compaction_bytes_rewritten, out.blocks.built_bytes);
        add(&self.compaction_pushdown_bytes, out.pushed_bytes);
    }
}

/// One structured event per finished compaction (target `tierkv::compaction`, level
/// debug; e.g. `RUST_LOG=tierkv::compaction=debug tierkv ...`), the counterpart of
/// RocksDB's `compaction_finished` event: enough to trace write amplification to single
/// compactions (bytes taken from each level, written, kept up by HotRAP).
fn log_compaction(
    c: &Compaction,
    v: &Version,
    out: &JobOutput,
    output_files: usize,
    took: Duration,
) {
    let bytes = |files: &[Arc<FileMeta>]| -> u64 { files.iter().map(|f| f.size()).sum() };
    tracing::debug!(
        target: "tierkv::compaction",
        level = c.level,
        output_level = c.output_level,
        reason = c.reason,
        trivial = out.moved,
        level_bytes = v.level_bytes(c.level),
        level_sized_bytes = v.level_sized_bytes(c.level),
        level_target = v.layout.targets[c.level],
        fast_tier_bytes = v.tier_bytes(Tier::Fast),
        input_files = c.inputs.len(),
        input_bytes = bytes(&c.inputs),
        output_level_files = c.output_inputs.len(),
        output_level_bytes = bytes(&c.output_inputs),
        written_bytes = out.bytes_written,
        output_files,
        retained_bytes = out.retained_bytes,
        promoted_bytes = out.promoted_bytes,
        entries_dropped = out.entries_dropped,
        reused_blocks = out.blocks.copied_blocks,
        pushed_bytes = out.pushed_bytes,
        pushdown_limit = c.pushdown,
        millis = took.as_millis() as u64,
        "compaction finished"
    );
}

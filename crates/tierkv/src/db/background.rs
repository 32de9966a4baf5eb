//! Background work: the thread loop that flushes immutable memtables (oldest first, one at
//! a time) and runs compactions (up to the thread count, one thread kept free for flushes),
//! plus manual compaction and waiting for quiescence.

use super::stats::Counters;
use super::{promote, DbInner, State};
use crate::cache::FlushedKey;
use crate::compaction::job::{self, HotRouting, JobContext};
use crate::compaction::stream::{tombstone_for, VersionStream};
use crate::compaction::{picker, Compaction};
use crate::env::{Env, IoCause, Tier};
use crate::error::{Error, Result};
use crate::key::{parse_internal_key, SeqNo};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::sst::TableBuilder;
use crate::version::{table_file_name, wal_file_name, FileMeta, NewFile, VersionEdit};
use parking_lot::MutexGuard;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// The body of each background thread.
pub(crate) fn thread_loop(inner: Arc<DbInner>) {
    let mut st = inner.state.lock();
    loop {
        if inner.shutting_down.load(Ordering::Acquire) {
            return;
        }
        if st.bg_error.is_none() {
            let oldest = st.imms.last().cloned();
            if let (false, Some(mem)) = (st.flush_running, oldest) {
                st.flush_running = true;
                MutexGuard::unlocked(&mut st, || {
                    if let Err(e) = flush_memtable(&inner, &mem) {
                        let mut st = inner.state.lock();
                        inner.set_bg_error(&mut st, e);
                    }
                });
                st.flush_running = false;
                inner.done_cv.notify_all();
                inner.bg_cv.notify_all();
                continue;
            }
            if !st.checker_running && inner.pc.awaits_checker() {
                st.checker_running = true;
                let Some((table, sv)) = inner.pc.next_for_checker() else {
                    st.checker_running = false;
                    continue;
                };
                MutexGuard::unlocked(&mut st, || {
                    // A failed promotion loses nothing (the records stay on the slow tier).
                    if let Err(e) = promote::run_checker(&inner, &table, &sv) {
                        tracing::warn!("promotion by flush failed: {e}");
                    }
                });
                st.checker_running = false;
                inner.done_cv.notify_all();
                continue;
            }
            if let Some(tracker) = inner.hot_tracker.clone() {
                if !st.tracker_maint_running && tracker.needs_maintenance() {
                    st.tracker_maint_running = true;
                    let r = MutexGuard::unlocked(&mut st, || tracker.maintenance());
                    st.tracker_maint_running = false;
                    if let Err(e) = r {
                        inner.set_bg_error(&mut st, e);
                    }
                    inner.done_cv.notify_all();
                    continue;
                }
            }
            let max_compactions = inner.opts.background_threads.saturating_sub(1).max(1);
            if !st.manual_compaction && st.running_compactions.len() < max_compactions {
                let v = st.versions.current();
                if let Some(c) = pick(&inner, &st, &v) {
                    let claim = c.range_claim(&v.layout);
                    st.running_compactions.extend(claim.clone());
                    MutexGuard::unlocked(&mut st, || {
                        if let Err(e) = run_compaction(&inner, &c, &v) {
                            let mut st = inner.state.lock();
                            inner.set_bg_error(&mut st, e);
                        }
                    });
                    if let Some(claim) = claim {
                        let running = &mut st.running_compactions;
                        if let Some(i) = running.iter().position(|r| *r == claim) {
                            running.swap_remove(i);
                        }
                    }
                    inner.done_cv.notify_all();
                    inner.bg_cv.notify_all();
                    continue;
                }
            }
        }
        // While tables hold expiring records, time alone can make a table worth sweeping,
        // and scans alone L0 worth compacting or a semi-sorted table worth defragmenting:
        // wake to let the picker look even if nothing else happens.
        let v = st.versions.current();
        let co = &inner.opts.compaction;
        let expiring =
            co.expired_share_trigger <= 1.0 && v.all_files().any(|(_, f)| f.info.expiry.count > 0);
        let scan_driven = (co.compact_scanned_level0 && !v.levels[0].is_empty())
            || (co.defragment_scanned
                && co.slow_tier_format == crate::options::SlowTierFormat::SemiSorted);
        drop(v);
        if expiring || scan_driven {
            inner
                .bg_cv
                .wait_for(&mut st, inner.opts.compaction.expiry_check_interval);
        } else {
            inner.bg_cv.wait(&mut st);
        }
    }
}

/// True while the last fast level holds (nearly) only retained hot data and has not grown
/// by a file since: compacting it would only rewrite it in place. Never once the level is
/// half again over its target: then the next compaction pushes data down regardless of
/// hotness (see `run_compaction`): the fast tier stays within budget (invariant 4, docs/DESIGN.md).
fn retention_saturated(
    inner: &DbInner,
    st: &State,
    v: &crate::version::Version,
    level: usize,
) -> bool {
    st.retention_saturated_at
        .is_some_and(|at| v.level_sized_bytes(level) <= at + inner.opts.target_file_size)
        && !far_over_target(inner, st, v, level)
}

/// The level holds more than 1.5 times its target (live bytes, as the picker sizes levels;
/// the target as the picker sets it, see `picker::level_targets`).
fn far_over_target(inner: &DbInner, st: &State, v: &crate::version::Version, level: usize) -> bool {
    let target = picker::level_targets(v, &inner.opts, wal_bytes(st))[level];
    v.level_sized_bytes(level) > target / 2 * 3
}

/// What the live WALs hold on the fast tier: those of every memtable not yet flushed (the
/// mutable one and the immutable ones; a flush removes its memtable's WALs).
fn wal_bytes(st: &State) -> u64 {
    std::iter::once(&st.mem)
        .chain(&st.imms)
        .map(|m| m.wal_bytes())
        .sum()
}

/// Picks the next compaction, hot-aware at the fast-to-slow boundary when promoting.
fn pick(inner: &DbInner, st: &State, v: &crate::version::Version) -> Option<Compaction> {
    // Open tables only: the picker runs under the database lock.
    let block_bounds = |f: &FileMeta| {
        inner
            .tables
            .peek(f.number)
            .and_then(|t| t.block_bounds().ok())
    };
    let tracker = match &inner.hot_tracker {
        // Without retention nothing stays behind: plain picking (the no-retain ablation).
        Some(tracker) if inner.opts.promotion.retention => tracker,
        _ => {
            return picker::pick_with(
                v,
                &inner.opts,
                None,
                &st.running_compactions,
                Some(&block_bounds),
                wal_bytes(st),
            )
        }
    };
    let level = inner.layout.last_fast_level;
    // Built on first use: most picks never reach the boundary level, and building it copies
    // and sorts the tracker's buffered hot keys under the lock every access takes (it was
    // 15% of the CPU time of a read-only phase, where the background loop picks after
    // every RALT step).
    let sizer = std::cell::OnceCell::new();
    let hot_size = |lo: &[u8], hi: &[u8]| {
        sizer
            .get_or_init(|| tracker.range_hot_sizer())
            .range_hot_size(lo, hi)
    };
    let saturated = retention_saturated(inner, st, v, level);
    let hot = picker::HotPicking {
        level,
        hot_size: &hot_size,
        saturated,
    };
    picker::pick_with(
        v,
        &inner.opts,
        Some(&hot),
        &st.running_compactions,
        Some(&block_bounds),
        wal_bytes(st),
    )
}

/// Writes a memtable's entries into a new L0 table on the fast tier, or on the slow tier
/// when the fast disk is full (spill: the fast-tier budget is a soft limit). A version
/// that a newer version of its key in the same memtable hides from every snapshot
/// (`smallest_snapshot`, as in compaction) is dropped: under skewed updates most of a
/// memtable can be such versions, and every byte not flushed is also not compacted again.
pub(crate) fn write_level0_table(
    env: &Env,
    opts: &Options,
    counters: &Counters,
    mem: &Arc<MemTable>,
    number: u64,
    smallest_snapshot: SeqNo,
) -> Result<Option<NewFile>> {
    let write = |tier| write_table_on(env, opts, counters, mem, number, smallest_snapshot, tier);
    match write(Tier::Fast) {
        Err(e) if e.is_no_space() && !env.is_single_dir() => {
            tracing::warn!("fast tier full, writing L0 table {number} to the slow tier: {e}");
            write(Tier::Slow).map_err(|e2| both_tiers_full(&e, e2))
        }
        r => r,
    }
}

/// The error for a write that found no room on the fast tier and then failed on the slow.
pub(crate) fn both_tiers_full(fast: &Error, slow: Error) -> Error {
    if slow.is_no_space() {
        Error::NoSpace(format!("both tiers are full (fast: {fast}; slow: {slow})"))
    } else {
        slow
    }
}

fn write_table_on(
    env: &Env,
    opts: &Options,
    counters: &Counters,
    mem: &Arc<MemTable>,
    number: u64,
    smallest_snapshot: SeqNo,
    tier: Tier,
) -> Result<Option<NewFile>> {
    if mem.is_empty() {
        return Ok(None);
    }
    let name = table_file_name(number);
    let file = env.create_writable(tier, &name, IoCause::Flush)?;
    let mut builder = TableBuilder::new(file, opts.table_options());
    let mut dropped = 0u64;
    let mut expired = 0u64;
    let built = (|| {
        // The newest version of each key is always kept, so a non-empty memtable never
        // yields an empty table. An expired record is kept as a tombstone (older versions
        // may lie in the tables).
        let mut versions = VersionStream::new(smallest_snapshot, opts.clock.now_ms());
        mem.for_each_entry(|ikey, value| {
            let (hidden, tombstone) = match parse_internal_key(ikey) {
                Some(k) => {
                    let step = versions.step(&k, value);
                    (step.hidden, step.expired.then(|| tombstone_for(&k)))
                }
                None => {
                    versions.reset();
                    (false, None)
                }
            };
            if hidden {
                dropped += 1;
            } else if let Some(t) = tombstone {
                expired += 1;
                builder.add(&t, b"")?;
            } else {
                builder.add(ikey, value)?;
            }
            Ok(())
        })?;
        builder.finish()
    })();
    match built {
        Ok(info) => {
            Counters::add(&counters.flush_bytes_written, info.file_size);
            Counters::add(&counters.flush_entries_dropped, dropped);
            Counters::add(&counters.expired_entries_removed, expired);
            Ok(Some(NewFile::from_table(0, number, tier, info)))
        }
        Err(e) => {
            let _ = env.remove(tier, &name);
            Err(e)
        }
    }
}

/// Flushes the oldest immutable memtable to L0 and retires its WAL.
fn flush_memtable(inner: &Arc<DbInner>, mem: &Arc<MemTable>) -> Result<()> {
    let number = inner.state.lock().versions.new_file_number();
    let horizon = inner.smallest_snapshot();
    let file = write_level0_table(
        &inner.env,
        &inner.opts,
        &inner.counters,
        mem,
        number,
        horizon,
    )?;
    if let Some(f) = &file {
        // Before the SuperVersion without `mem` is published (invariant 1, see cache).
        update_cache_for_flush(inner, mem, f)?;
    }
    let mut st = inner.state.lock();
    // WALs older than the next-oldest memtable hold nothing unflushed after this.
    let next_log = st
        .imms
        .iter()
        .rev()
        .nth(1)
        .map(|m| m.id())
        .unwrap_or_else(|| st.mem.id());
    let edit = VersionEdit {
        log_number: Some(next_log),
        last_sequence: Some(inner.visible_seq.load(Ordering::Acquire)),
        added: file.into_iter().collect(),
        ..Default::default()
    };
    // On failure the table stays: the edit may be durable anyway (see log_and_apply).
    st.versions.log_and_apply(edit)?;
    let flushed = st.imms.pop();
    debug_assert!(flushed.is_some_and(|f| Arc::ptr_eq(&f, mem)));
    st.drop_horizon = st.drop_horizon.max(horizon);
    inner.install_super_version(&st);
    Counters::add(&inner.counters.flushes, 1);
    drop(st);
    // Retire every log older than the oldest live memtable.
    for name in inner.env.list(Tier::Fast)? {
        if let Some(n) = crate::version::parse_file_number(&name, "log") {
            if n < next_log {
                inner.env.remove(Tier::Fast, &wal_file_name(n))?;
            }
        }
    }
    Ok(())
}

/// Gives the cached entries of the keys of a flushed memtable their newest version, which
/// now lives in the L0 table `file` (see `crate::cache`, "Correctness"). Runs before the
/// SuperVersion without the memtable is published, so no reader can miss the memtable and
/// find an older version in the cache. The new table is opened (into the table cache) only
/// if a KP entry needs re-pointing; if it cannot be, such entries are dropped.
fn update_cache_for_flush(inner: &Arc<DbInner>, mem: &Arc<MemTable>, file: &NewFile) -> Result<()> {
    let Some(cache) = inner.tables.cache().filter(|c| c.point_enabled()) else {
        return Ok(());
    };
    let mut keys: Vec<FlushedKey> = Vec::new();
    mem.for_each_entry(|ikey, value| {
        if let Some(k) = crate::key::parse_internal_key(ikey) {
            // Versions of a key come newest first: keep the first of each.
            if keys.last().is_none_or(|l| l.key != k.user_key) {
                keys.push(FlushedKey {
                    key: k.user_key,
                    value: (k.kind == crate::key::ValueKind::Value).then_some(value),
                });
            }
        }
        Ok(())
    })?;
    let meta = FileMeta::new(file.clone(), inner.env.clone());
    let mut table: Option<Option<Arc<crate::sst::Table>>> = None;
    cache.apply_flush(&keys, file.number, |key| {
        let t = table.get_or_insert_with(|| inner.tables.get(&meta, IoCause::Flush).ok());
        let t = t.as_ref()?;
        t.block_handle_for(&crate::key::seek_key(key, crate::key::MAX_SEQ))
            .ok()
            .flatten()
    });
    Ok(())
}

/// Runs a claimed compaction and installs its result.
pub(crate) fn run_compaction(
    inner: &Arc<DbInner>,
    c: &Compaction,
    v: &crate::version::Version,
) -> Result<()> {
    let started = std::time::Instant::now();
    let alloc = || inner.state.lock().versions.new_file_number();
    // A compaction from the fast into the slow tier moves newer versions below the
    // promotion cache: announce it (HotRAP §3.3) and take the cached records in its range.
    let crosses_tiers = v.layout.tiers[c.level] == Tier::Fast && c.output_tier == Tier::Slow;
    // A level full of retained hot data and far over its target pushes this compaction's
    // data down whatever its hotness: the hot set outgrew the fast tier.
    let force_down = {
        let st = inner.state.lock();
        st.retention_saturated_at.is_some() && far_over_target(inner, &st, v, c.level)
    };
    let hot = match (
        &inner.hot_tracker,
        crosses_tiers,
        picker::key_range(&c.inputs),
    ) {
        (Some(tracker), true, Some((lo, hi))) => {
            let taken = inner.pc.begin_compaction(&lo, &hi);
            let p = &inner.opts.promotion;
            Some(HotRouting {
                tracker,
                retention: p.retention && c.level == inner.layout.last_fast_level && !force_down,
                hotness_check: p.hotness_check,
                promote: if p.by_compaction { taken } else { Vec::new() },
                lo,
                hi,
            })
        }
        _ => None,
    };
    let mut ctx = JobContext {
        env: &inner.env,
        tables: &inner.tables,
        table_options: inner.opts.table_options(),
        semi_table_options: inner.opts.semi_table_options(),
        last_level_filters: inner.opts.last_level_filters,
        target_file_size: inner.opts.target_file_size,
        smallest_snapshot: inner.smallest_snapshot(),
        version: v,
        new_file_number: &alloc,
        hot,
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
            job::run(c, &ctx).map_err(|e2| both_tiers_full(&e, e2))
        }
        r => r,
    };
    let mut out = match result {
        Ok(out) => out,
        Err(e) => {
            c.release();
            return Err(e);
        }
    };
    let mut st = inner.state.lock();
    let trivial = out.moved;
    let stayed: u64 = out
        .edit
        .added
        .iter()
        .filter(|f| f.level == c.level)
        .map(|f| f.size)
        .sum();
    let output_files = out.edit.added.len();
    if let Err(e) = st.versions.log_and_apply(std::mem::take(&mut out.edit)) {
        // The outputs stay: the edit may be durable anyway (see log_and_apply).
        c.release();
        return Err(e);
    }
    st.drop_horizon = st.drop_horizon.max(ctx.smallest_snapshot);
    inner.install_super_version(&st);
    c.release();
    if ctx.hot.is_some() {
        // The compaction barely shrank the level (in file bytes: what stayed or was
        // promoted into it against what it took out): the level is full of hot data, and
        // picking it again before it grows would only rewrite it.
        let fast_in: u64 = c.inputs.iter().map(|f| f.size()).sum();
        st.retention_saturated_at =
            (stayed * 10 >= fast_in * 9).then(|| st.versions.current().level_sized_bytes(c.level));
    }
    drop(st);
    if !trivial {
        for f in c.all_inputs() {
            inner.tables.evict(f.number);
        }
    }
    log_compaction(c, v, &out, output_files, trivial, started.elapsed());
    let k = &inner.counters;
    Counters::add(&k.compactions, 1);
    if trivial {
        Counters::add(&k.trivial_moves, 1);
    }
    Counters::add(&k.compaction_bytes_read, out.bytes_read);
    Counters::add(&k.compaction_bytes_written, out.bytes_written);
    Counters::add(&k.compaction_level_read[c.level], out.bytes_read);
    Counters::add(&k.compaction_level_written[c.level], out.bytes_written);
    Counters::add(&k.compaction_entries_dropped, out.entries_dropped);
    Counters::add(&k.expired_entries_removed, out.expired_removed);
    if c.reason == picker::EXPIRY_REASON {
        Counters::add(&k.expiry_compactions, 1);
    }
    if c.reason == picker::SCANNED_LEVEL0_REASON {
        Counters::add(&k.scanned_level0_compactions, 1);
    }
    if c.reason == picker::DEFRAGMENT_REASON {
        Counters::add(&k.defragment_compactions, 1);
        Counters::add(&k.defragment_bytes_written, out.bytes_written);
    }
    Counters::add(&k.retained_bytes, out.retained_bytes);
    Counters::add(&k.promoted_by_compaction_bytes, out.promoted_bytes);
    Counters::add(&k.compaction_blocks_reused, out.blocks.copied_blocks);
    Counters::add(&k.compaction_bytes_reused, out.blocks.copied_bytes);
    Counters::add(&k.compaction_blocks_rewritten, out.blocks.built_blocks);
    Counters::add(&k.compaction_bytes_rewritten, out.blocks.built_bytes);
    Counters::add(&k.compaction_pushdown_bytes, out.pushed_bytes);
    Ok(())
}

/// One structured event per finished compaction (target `tierkv::compaction`, level
/// debug; e.g. `RUST_LOG=tierkv::compaction=debug tierkv ...`), the counterpart of
/// RocksDB's `compaction_finished` event: enough to trace write amplification to single
/// compactions (bytes taken from each level, written, kept up by HotRAP).
fn log_compaction(
    c: &Compaction,
    v: &crate::version::Version,
    out: &job::JobOutput,
    output_files: usize,
    trivial: bool,
    took: Duration,
) {
    let bytes = |files: &[Arc<FileMeta>]| -> u64 { files.iter().map(|f| f.size()).sum() };
    tracing::debug!(
        target: "tierkv::compaction",
        level = c.level,
        output_level = c.output_level,
        reason = c.reason,
        trivial,
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

fn wait_for<F: FnMut(&State) -> bool>(inner: &DbInner, mut done: F) -> Result<()> {
    let mut st = inner.state.lock();
    loop {
        if let Some(e) = &st.bg_error {
            return Err(Error::Background(e.clone()));
        }
        if done(&st) {
            return Ok(());
        }
        if inner.shutting_down.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        inner.bg_cv.notify_all();
        inner.done_cv.wait_for(&mut st, Duration::from_millis(50));
    }
}

/// Waits until nothing is flushing, promoting or compacting and no level needs compaction.
pub(crate) fn wait_idle(inner: &DbInner) -> Result<()> {
    wait_for(inner, |st| {
        st.imms.is_empty()
            && !st.flush_running
            && st.running_compactions.is_empty()
            && !inner.pc.awaits_checker()
            && !st.checker_running
            && !st.tracker_maint_running
            && !needs_compaction(inner, st)
    })
}

/// True if some level is over its target and may be picked.
fn needs_compaction(inner: &DbInner, st: &State) -> bool {
    let v = st.versions.current();
    let hot_level = inner
        .hot_tracker
        .as_ref()
        .map(|_| inner.layout.last_fast_level);
    picker::level_scores(&v, &inner.opts, wal_bytes(st))
        .iter()
        .enumerate()
        .any(|(level, score)| {
            let saturated = hot_level == Some(level) && retention_saturated(inner, st, &v, level);
            *score >= 1.0 && !saturated
        })
}

/// Manual compaction of `[from, to]` down to the deepest level holding data in it.
pub(crate) fn compact_range(
    inner: &Arc<DbInner>,
    from: Option<&[u8]>,
    to: Option<&[u8]>,
) -> Result<()> {
    inner.flush_and_wait()?;
    {
        let mut st = inner.state.lock();
        if st.manual_compaction {
            return Err(Error::InvalidArgument(
                "another manual compaction is running".into(),
            ));
        }
        st.manual_compaction = true;
    }
    let r = (|| {
        wait_for(inner, |st| st.running_compactions.is_empty())?;
        let v = inner.state.lock().versions.current();
        let deepest = (0..v.num_levels())
            .rev()
            .find(|&l| !v.overlapping(l, from, to).is_empty());
        let Some(deepest) = deepest else {
            return Ok(());
        };
        // Overlapping L0 tables are merged into L1 even when nothing lies deeper, so that a
        // manual compaction always leaves the range in one sorted level.
        let deepest = if deepest == 0 {
            1.min(v.num_levels() - 1)
        } else {
            deepest
        };
        for level in 0..deepest {
            let v = inner.state.lock().versions.current();
            if let Some(c) = picker::pick_range(&v, level, from, to) {
                run_compaction(inner, &c, &v)?;
            }
        }
        // The deepest level is not compacted above: rewrite its tables that hold expired
        // records, so that after a manual compaction no expired data is left on disk.
        let v = inner.state.lock().versions.current();
        let now = inner.opts.clock.now_ms();
        if let Some(c) = picker::pick_expired_in_place(&v, deepest, from, to, now) {
            run_compaction(inner, &c, &v)?;
        }
        Ok(())
    })();
    let mut st = inner.state.lock();
    st.manual_compaction = false;
    inner.bg_cv.notify_all();
    match r {
        Err(e @ (Error::Closed | Error::Background(_))) => Err(e),
        Err(e) => Err(Error::Background(inner.set_bg_error(&mut st, e))),
        Ok(()) => Ok(()),
    }
}

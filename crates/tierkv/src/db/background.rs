//! Background work's scheduling: the thread loop that claims the next job (a flush of the
//! oldest immutable memtable, one at a time; the promotion checker; the tracker's upkeep;
//! compactions, up to the thread count, one thread kept free for flushes), runs it with the
//! state lock released and releases its claim; plus manual compaction and waiting for
//! quiescence. The jobs themselves are `flush`, `compact` and `promote`.

use super::compact::{occupancy, retention_saturated, run_compaction};
use super::flush::flush_memtable;
use super::{promote, DbInner, State};
use crate::compaction::{picker, Compaction};
use crate::error::{Error, Result};
use crate::version::{FileMeta, Version};
use parking_lot::MutexGuard;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// The body of each background thread.
pub(crate) fn thread_loop(inner: Arc<DbInner>) {
    let mut st = inner.state.lock();
    loop {
        if inner.signals.shutting_down.load(Ordering::Acquire) {
            return;
        }
        // How long until a pick that found nothing may look again at the same version.
        let mut pick_wait = None;
        if st.jobs.bg_error.is_none() {
            let oldest = st.tree.imms.last().cloned();
            if let (false, Some(mem)) = (st.jobs.flush_running, oldest) {
                st.jobs.flush_running = true;
                MutexGuard::unlocked(&mut st, || {
                    if let Err(e) = flush_memtable(&inner, &mem) {
                        let mut st = inner.state.lock();
                        inner.set_bg_error(&mut st, e);
                    }
                    inner.fit_record_cache();
                });
                st.jobs.flush_running = false;
                inner.signals.done_cv.notify_all();
                inner.signals.bg_cv.notify_all();
                continue;
            }
            if !st.jobs.checker_running && inner.hot.pc.awaits_checker() {
                st.jobs.checker_running = true;
                let Some((table, sv)) = inner.hot.pc.next_for_checker() else {
                    st.jobs.checker_running = false;
                    continue;
                };
                MutexGuard::unlocked(&mut st, || {
                    // A failed promotion loses nothing (the records stay on the slow tier).
                    if let Err(e) = promote::run_checker(&inner, &table, &sv, false) {
                        tracing::warn!("promotion by flush failed: {e}");
                    }
                    inner.fit_record_cache();
                });
                st.jobs.checker_running = false;
                inner.signals.done_cv.notify_all();
                continue;
            }
            let max_compactions = inner.opts.background_threads.saturating_sub(1).max(1);
            let v = st.tree.versions.current();
            pick_wait = IdlePick::wait(&st, &v);
            if !st.jobs.manual_compaction
                && st.jobs.running_compactions.len() < max_compactions
                && pick_wait.is_none()
            {
                let picked = pick(&inner, &st, &v);
                if picked.is_none() {
                    st.jobs.idle_pick = Some(IdlePick::new(&st, &v));
                }
                if let Some(c) = picked {
                    let claim = c.range_claim(&v.layout);
                    st.jobs.running_compactions.extend(claim.clone());
                    MutexGuard::unlocked(&mut st, || {
                        if let Err(e) = run_compaction(&inner, &c, &v) {
                            let mut st = inner.state.lock();
                            inner.set_bg_error(&mut st, e);
                        }
                        inner.fit_record_cache();
                    });
                    if let Some(claim) = claim {
                        let running = &mut st.jobs.running_compactions;
                        if let Some(i) = running.iter().position(|r| *r == claim) {
                            running.swap_remove(i);
                        }
                    }
                    inner.signals.done_cv.notify_all();
                    inner.signals.bg_cv.notify_all();
                    continue;
                }
            }
        }
        if super::cached_keys::save_due(&inner) {
            MutexGuard::unlocked(&mut st, || {
                // A hint for the next open: a failure only loses it.
                if let Err(e) = super::cached_keys::save(&inner) {
                    tracing::warn!("listing the keys served from memory: {e}");
                }
            });
            continue;
        }
        // While tables hold expiring records, time alone can make a table worth sweeping,
        // and scans alone L0 worth compacting or a semi-sorted table worth defragmenting:
        // wake to let the picker look even if nothing else happens.
        let v = st.tree.versions.current();
        let co = &inner.opts.compaction;
        let expiring =
            co.expired_share_trigger <= 1.0 && v.all_files().any(|(_, f)| f.info.expiry.count > 0);
        let scan_driven = (co.compact_scanned_level0 && !v.levels[0].is_empty())
            || (co.defragment_scanned
                && co.slow_tier_format == crate::options::SlowTierFormat::SemiSorted);
        drop(v);
        let timeout = if expiring || scan_driven {
            Some(inner.opts.compaction.expiry_check_interval)
        } else if inner.hot.tracker.is_some() {
            // Time alone makes the list of keys served from memory due.
            Some(inner.opts.promotion.warm_list_interval)
        } else {
            None
        };
        match timeout.into_iter().chain(pick_wait).min() {
            Some(t) => {
                inner.signals.bg_cv.wait_for(&mut st, t);
            }
            None => inner.signals.bg_cv.wait(&mut st),
        }
    }
}

/// How often the tracker's thread looks for upkeep without being woken: RALT's checkpoint
/// becomes due as the engine writes, which does not wake it.
const TRACKER_POLL: Duration = Duration::from_millis(50);

/// The body of the tracker's thread: the hotness tracker's upkeep (RALT's buffer flushes,
/// compactions, evictions and checkpoints), one unit at a time, at a CPU priority
/// `Options::tracker_nice` steps below the foreground's. It has a thread of its own so
/// that the lower priority touches nothing else: flushes and compactions, which writers
/// may wait for, keep theirs. Reads wake it when a buffer fills (`record_access`). It holds
/// the state lock only to check and flip its flag and to wait: a thread of lower priority
/// descheduled inside that lock would hold up every job and writer behind it.
pub(crate) fn tracker_loop(inner: Arc<DbInner>) {
    let Some(tracker) = inner.hot.tracker.clone() else {
        return;
    };
    lower_priority(inner.opts.tracker_nice);
    let mut st = inner.state.lock();
    loop {
        if inner.signals.shutting_down.load(Ordering::Acquire) {
            return;
        }
        if st.jobs.bg_error.is_none() && tracker.needs_maintenance() {
            st.jobs.tracker_maint_running = true;
            let r = MutexGuard::unlocked(&mut st, || tracker.maintenance());
            st.jobs.tracker_maint_running = false;
            inner.signals.done_cv.notify_all();
            match r {
                Ok(true) => continue,
                // Due but nothing to do yet (e.g. an eviction waiting for a flush).
                Ok(false) => {}
                Err(e) => {
                    inner.set_bg_error(&mut st, e);
                }
            }
        }
        inner.signals.tracker_cv.wait_for(&mut st, TRACKER_POLL);
    }
}

/// Lowers the calling thread's CPU priority by `steps` nice steps (Linux keeps a nice
/// value per thread), up to the lowest, 19. A refusal leaves the priority as it was.
fn lower_priority(steps: i32) {
    if steps <= 0 {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        use rustix::process::{getpriority_process, setpriority_process};
        let me = Some(rustix::thread::gettid());
        let lowered =
            getpriority_process(me).and_then(|now| setpriority_process(me, (now + steps).min(19)));
        if let Err(e) = lowered {
            tracing::debug!("the tracker's thread keeps its priority: {e}");
        }
    }
}

/// A pick that found no compaction, remembered so that the loop does not pick again
/// until something it looks at may have changed: a new version (every flush and
/// compaction installs one), a change in the running compactions, or
/// [`IDLE_PICK_INTERVAL`] for what moves without either (the WALs' bytes, the tracker's
/// hot set, scan and expiry counters). A pick walks every table (the expiry sweep's and
/// scan defragmentation's choices); when the loop also ran the tracker's upkeep, which a
/// read-only workload runs many times a second, picking after each step took 10% of the
/// process's CPU time in the final part of the paper-scale RO hotspot run, with about
/// 2,000 tables (docs/bench/hotrap.md).
pub(crate) struct IdlePick {
    /// Weak: the memory must not keep the version's files alive.
    version: Weak<Version>,
    running: usize,
    at: Instant,
}

/// How long a pick that found nothing stands for the same version (see [`IdlePick`]).
const IDLE_PICK_INTERVAL: Duration = Duration::from_millis(20);

impl IdlePick {
    fn new(st: &State, v: &Arc<Version>) -> IdlePick {
        IdlePick::at(v, st.jobs.running_compactions.len(), Instant::now())
    }

    fn at(v: &Arc<Version>, running: usize, at: Instant) -> IdlePick {
        IdlePick {
            version: Arc::downgrade(v),
            running,
            at,
        }
    }

    /// `None` when a pick is due now; otherwise how long until it is.
    fn wait(st: &State, v: &Arc<Version>) -> Option<Duration> {
        let last = st.jobs.idle_pick.as_ref()?;
        last.wait_at(v, st.jobs.running_compactions.len(), Instant::now())
    }

    fn wait_at(&self, v: &Arc<Version>, running: usize, now: Instant) -> Option<Duration> {
        if !std::ptr::eq(self.version.as_ptr(), Arc::as_ptr(v)) || self.running != running {
            return None;
        }
        IDLE_PICK_INTERVAL
            .checked_sub(now.saturating_duration_since(self.at))
            .filter(|d| !d.is_zero())
    }
}

/// Picks the next compaction, hot-aware at the fast-to-slow boundary when promoting.
fn pick(inner: &DbInner, st: &State, v: &Version) -> Option<Compaction> {
    // Open tables only: the picker runs under the database lock.
    let block_bounds = |f: &FileMeta| {
        inner
            .tables
            .peek(f.number)
            .and_then(|t| t.block_bounds().ok())
    };
    let tracker = match &inner.hot.tracker {
        // Without retention nothing stays behind: plain picking (the no-retain ablation).
        Some(tracker) if inner.opts.promotion.retention => tracker,
        _ => {
            return picker::pick_with(
                v,
                &inner.opts,
                None,
                &st.jobs.running_compactions,
                Some(&block_bounds),
                occupancy(inner, st),
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
        &st.jobs.running_compactions,
        Some(&block_bounds),
        occupancy(inner, st),
    )
}

fn wait_for<F: FnMut(&State) -> bool>(inner: &DbInner, mut done: F) -> Result<()> {
    let mut st = inner.state.lock();
    loop {
        if let Some(e) = &st.jobs.bg_error {
            return Err(Error::Background(e.clone()));
        }
        if done(&st) {
            return Ok(());
        }
        if inner.signals.shutting_down.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        inner.signals.bg_cv.notify_all();
        inner.signals.tracker_cv.notify_all();
        inner
            .signals
            .done_cv
            .wait_for(&mut st, Duration::from_millis(50));
    }
}

/// Waits until nothing is flushing, promoting or compacting, no level needs compaction and
/// the hotness tracker has no upkeep waiting (a full buffer to flush, a compaction or an
/// eviction due; a checkpoint due is not waited for).
pub(crate) fn wait_idle(inner: &DbInner) -> Result<()> {
    wait_for(inner, |st| {
        st.tree.imms.is_empty()
            && !st.jobs.flush_running
            && st.jobs.running_compactions.is_empty()
            && !inner.hot.pc.awaits_checker()
            && !st.jobs.checker_running
            && !st.jobs.tracker_maint_running
            && !inner.hot.tracker.as_ref().is_some_and(|t| t.work_waiting())
            && !needs_compaction(inner, st)
    })
}

/// True if some level is over its target and may be picked.
fn needs_compaction(inner: &DbInner, st: &State) -> bool {
    let v = st.tree.versions.current();
    let hot_level = inner
        .hot
        .tracker
        .as_ref()
        .map(|_| inner.layout.last_fast_level);
    picker::level_scores(&v, &inner.opts, occupancy(inner, st))
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
        if st.jobs.manual_compaction {
            return Err(Error::InvalidArgument(
                "another manual compaction is running".into(),
            ));
        }
        st.jobs.manual_compaction = true;
    }
    let r = (|| {
        wait_for(inner, |st| st.jobs.running_compactions.is_empty())?;
        let v = inner.state.lock().tree.versions.current();
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
            let v = inner.state.lock().tree.versions.current();
            if let Some(c) = picker::pick_range(&v, level, from, to) {
                run_compaction(inner, &c, &v)?;
            }
        }
        // The deepest level is not compacted above: rewrite its tables that hold expired
        // records, so that after a manual compaction no expired data is left on disk.
        let v = inner.state.lock().tree.versions.current();
        let now = inner.opts.clock.now_ms();
        if let Some(c) = picker::pick_expired_in_place(&v, deepest, from, to, now) {
            run_compaction(inner, &c, &v)?;
        }
        Ok(())
    })();
    let mut st = inner.state.lock();
    st.jobs.manual_compaction = false;
    inner.signals.bg_cv.notify_all();
    match r {
        Err(e @ (Error::Closed | Error::Background(_))) => Err(e),
        Err(e) => Err(Error::Background(inner.set_bg_error(&mut st, e))),
        Ok(()) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Options;
    use crate::tiers::LevelLayout;

    /// A pick that found nothing stands only for the version and running compactions it
    /// looked at, and only for `IDLE_PICK_INTERVAL`: a new version (a flush or compaction
    /// installed), a compaction ending, or the interval passing makes the next pick due.
    #[test]
    fn an_idle_pick_stands_for_its_version_and_interval_only() {
        let layout = Arc::new(LevelLayout::new(&Options::default()));
        let v1 = Arc::new(Version::empty(layout.clone()));
        let v2 = Arc::new(Version::empty(layout));
        let t0 = Instant::now();
        let idle = IdlePick::at(&v1, 1, t0);
        let soon = t0 + IDLE_PICK_INTERVAL / 4;
        assert_eq!(idle.wait_at(&v1, 1, soon), Some(IDLE_PICK_INTERVAL * 3 / 4));
        assert_eq!(idle.wait_at(&v2, 1, soon), None, "a new version");
        assert_eq!(idle.wait_at(&v1, 0, soon), None, "a compaction ended");
        assert_eq!(
            idle.wait_at(&v1, 1, t0 + IDLE_PICK_INTERVAL),
            None,
            "interval over"
        );
        // The memory does not keep the version (and so its files) alive.
        drop(v1);
        assert!(idle.version.upgrade().is_none());
    }
}

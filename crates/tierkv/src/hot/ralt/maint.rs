//! RALT's background work, serialized by the maintenance lock: flushing a frozen buffer to
//! level 0, leveled compaction, eviction (sampled score thresholds, then a step-by-step
//! merge of everything into one sorted run) and auto-tuning of the two limits
//! (Algorithm 1), writing out the hot stage, and checkpoints (in-memory runs written as
//! their files, then the manifest). Each call does one bounded unit of work and installs a
//! new version.

use super::admit::Admission;
use super::buffer::{BufEntry, Buffer};
use super::manifest::{self, State, Thresholds};
use super::options::{
    Params, RaltOptions, EVICT_STEP_FILES, L0_L1_RATIO, L0_MAX_FILES, L0_TRIGGER, MAX_LEVEL,
    SAMPLE_POINTS,
};
use super::run::{self, Rec, RunFile, RunWriter};
use super::score::{encoded_len, is_stable, Meta};
use super::stage::Stage;
use super::version::{MergeIter, Source, Version};
use super::Ralt;
use crate::env::Tier;
use crate::error::Result;
use crate::sst::filter::filter_hash;
use std::collections::HashSet;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// State owned by the maintenance lock.
pub(crate) struct Maint {
    /// The threshold, limits and counters the manifest saves.
    pub th: Thresholds,
    flushes: u64,
    /// Flush count when the last eviction ended: a new one needs new data, so limits
    /// that cannot be met do not make the background spin.
    flushes_at_eviction: u64,
    /// Counter period (`Clock::epoch`) when the last eviction started: with auto-tuning an
    /// eviction is due once a later period begins, whether or not a limit is passed (see
    /// [`Ralt::retune_due`]).
    tuned_epoch: u64,
    /// Counter period for which the active buffer was last frozen ahead of a re-tuning
    /// (see [`Ralt::retune_needs_flush`]).
    retune_flushed: u64,
    pub(super) eviction: Option<Eviction>,
    /// Per level, the largest key of the last file compacted (round-robin picking).
    compact_ptr: Vec<Option<Vec<u8>>>,
    /// Single accesses not written (see `RaltOptions::admission`).
    admission: Admission,
    /// Accesses of keys hot in a run not written yet (see `RaltOptions::stage`).
    pub(super) stage: Stage,
    /// The stage was written out for the eviction the limits call for (reset when it
    /// starts), so a stage refilled by later flushes does not hold the eviction back.
    stage_drained: bool,
    /// Records merged into the stage since the last L0 compaction, and the level-0 files
    /// the stage wrote: buffer sizing counts the former as flushed records that met
    /// another record of their key (as their writes would have at that compaction) and
    /// leaves the latter out.
    staged_since_l0: u64,
    stage_files: HashSet<u64>,
    /// Files of in-memory runs removed from the version whose file a checkpoint (or the
    /// open) wrote: the manifest on disk may still name them, so they are deleted only
    /// after the next manifest write.
    deferred: Vec<u64>,
}

impl Maint {
    pub fn new(s: &State, hot_limit: u64, phys_limit: u64) -> Maint {
        Maint {
            th: Thresholds {
                hot_limit,
                phys_limit,
                ..s.th
            },
            flushes: 1,
            flushes_at_eviction: 0,
            tuned_epoch: s.clock.epoch,
            retune_flushed: s.clock.epoch,
            eviction: None,
            compact_ptr: vec![None; MAX_LEVEL + 1],
            admission: Admission::default(),
            stage: Stage::default(),
            stage_drained: false,
            staged_since_l0: 0,
            stage_files: HashSet::new(),
            deferred: Vec::new(),
        }
    }
}

/// The state of a store that has tracked nothing yet: every record is hot until the
/// first eviction sets a threshold, and the limits start at the paper's initial values.
pub(crate) fn fresh_state(o: &RaltOptions, p: &Params, next_file: u64) -> State {
    State {
        next_file,
        clock: Default::default(),
        th: Thresholds {
            hot_rank: f64::NEG_INFINITY,
            thr_tick: 0,
            hot_limit: p.init_hot_limit,
            phys_limit: p.init_phys_limit,
            evictions: 0,
            evicted_keys: 0,
        },
        scoring: o.scoring.code(),
        files: Vec::new(),
    }
}

/// An eviction in progress: thresholds decided by the sampling scan, and how far the
/// step-by-step merge has come.
pub(super) struct Eviction {
    /// Files of the eviction's snapshot not merged yet (files flushed later are newer and
    /// stay out of it).
    inputs: HashSet<u64>,
    out_level: usize,
    /// Keys up to and including this one are merged.
    cut: Option<Vec<u8>>,
    /// Below this rank a record is evicted; at it, kept with probability `keep_tied`.
    evict_rank: f64,
    keep_tied: f64,
    hot_rank: f64,
    hot_tied: f64,
    tick: u64,
    epoch: u64,
    /// Auto-tuning: unstable records go first.
    drop_unstable: bool,
}

/// A deterministic fraction in [0, 1) per key, to split records tied at a threshold.
fn key_fraction(key: &[u8]) -> f64 {
    (filter_hash(key) >> 11) as f64 / (1u64 << 53) as f64
}

fn at_least(rank: f64, thr: f64, tied_frac: f64, key: &[u8]) -> bool {
    rank > thr || (rank == thr && key_fraction(key) < tied_frac)
}

/// Folds a key's records (given newest first) into one by the merge rule.
pub(super) fn fold(r: &Ralt, group: &[(usize, Rec)]) -> Meta {
    let mut it = group.iter().rev();
    let mut m = it.next().map(|(_, rec)| rec.meta).unwrap_or(Meta {
        value_len: 0,
        tick: 0,
        score: 0.0,
        epoch: 0,
        counter: 0,
        tag: false,
    });
    for (_, rec) in it {
        m = r.scorer.merge(&m, &rec.meta);
    }
    m
}

/// The k-th largest sampled rank with k = N * target / total (HotRAP §3.2), and the
/// fraction of records tied at it to keep so that about k samples survive.
fn threshold(mut samples: Vec<f64>, total: u64, target: f64) -> (f64, f64) {
    let n = samples.len();
    if n == 0 || total == 0 {
        return (f64::NEG_INFINITY, 1.0);
    }
    let k = ((n as f64) * target / total as f64)
        .round()
        .clamp(0.0, n as f64) as usize;
    if k == 0 {
        return (f64::INFINITY, 0.0);
    }
    samples.sort_by(|a, b| b.total_cmp(a));
    let thr = samples[k - 1];
    let above = samples.iter().take_while(|&&s| s > thr).count();
    let tied = samples.iter().filter(|&&s| s == thr).count();
    (thr, (k - above) as f64 / tied.max(1) as f64)
}

/// Sorted-run outputs of one job, split at the target file size.
struct Outputs<'a> {
    r: &'a Ralt,
    level: usize,
    cur: Option<RunWriter>,
    done: Vec<Arc<RunFile>>,
}

impl<'a> Outputs<'a> {
    fn new(r: &'a Ralt, level: usize) -> Outputs<'a> {
        Outputs {
            r,
            level,
            cur: None,
            done: Vec::new(),
        }
    }

    fn add(&mut self, key: &[u8], meta: &Meta, hot: bool, dup: bool) -> Result<()> {
        let w = match &mut self.cur {
            Some(w) => w,
            None => {
                let n = self.r.next_file.fetch_add(1, Relaxed);
                let bits = self.r.opts.bloom_bits_per_key;
                self.cur
                    .insert(RunWriter::create(&self.r.env, n, bits, &self.r.mem_runs)?)
            }
        };
        w.add(key, meta, hot, dup)?;
        if w.len() >= self.r.params.file_target {
            self.close_file()?;
        }
        Ok(())
    }

    fn close_file(&mut self) -> Result<()> {
        if let Some(w) = self.cur.take() {
            if let Some(f) = w.finish()? {
                self.done.push(Arc::new(f));
            }
        }
        Ok(())
    }

    fn finish(mut self) -> Result<Vec<(usize, Arc<RunFile>)>> {
        self.close_file()?;
        let level = self.level;
        Ok(std::mem::take(&mut self.done)
            .into_iter()
            .map(|f| (level, f))
            .collect())
    }
}

impl Drop for Outputs<'_> {
    /// On an error path, files written but never installed are deleted.
    fn drop(&mut self) {
        if let Some(w) = self.cur.take() {
            w.abandon();
        }
        for f in &self.done {
            f.mark_obsolete();
        }
    }
}

/// True if `key` is hot in a file deeper (older) than the position of a new file at
/// `level`: below it for levels >= 1, or anywhere in the version for a new L0 file.
fn hot_below(v: &Version, level: usize, key: &[u8]) -> bool {
    v.may_be_hot_where(key, filter_hash(key), |l| level == 0 || l > level)
}

impl Ralt {
    /// Saves the manifest for version `v` with the current clock and thresholds.
    pub(super) fn save_manifest(&self, m: &Maint, v: &Version) -> Result<()> {
        let clock = self.front.lock().clock;
        let state = State {
            next_file: self.next_file.load(Relaxed),
            clock,
            th: m.th,
            scoring: self.opts.scoring.code(),
            files: v.files().map(|(l, f)| (l as u32, f.number)).collect(),
        };
        manifest::write(&self.env, &state)
    }

    /// A checkpoint of version `v`: every in-memory run of it not yet on disk is written
    /// as its file, then the manifest naming exactly `v`'s runs, then the files of removed
    /// runs the previous manifest named are deleted. Every manifest write goes through
    /// here, so a manifest never names a file that is not on disk. Without in-memory runs
    /// (`run_memory_limit` 0, or past it) this is the manifest write alone, as before.
    pub(super) fn save_state(&self, m: &mut Maint, v: &Version) -> Result<()> {
        let mut written = 0;
        for (_, f) in v.files() {
            written += f.persist()?;
        }
        self.save_manifest(m, v)?;
        self.checkpoint_written.fetch_add(written, Relaxed);
        self.checkpoints.fetch_add(1, Relaxed);
        self.delete_deferred(m);
        self.dirty.store(false, Relaxed);
        self.checkpoint_base.store(self.other_writes(), Relaxed);
        Ok(())
    }

    /// Saves the state of version `v` now, unless every run of `v` (and of `also`) is in
    /// memory: then the state only changed in memory and waits for the next checkpoint
    /// (a crash meanwhile resumes from the last one; RALT's state is a hint).
    /// Returns whether it saved.
    fn save_or_defer(&self, m: &mut Maint, v: &Version, also: &[Arc<RunFile>]) -> Result<bool> {
        let in_memory = self.opts.run_memory_limit > 0
            && v.files().all(|(_, f)| f.in_memory())
            && also.iter().all(|f| f.in_memory());
        if in_memory {
            self.dirty.store(true, Relaxed);
            Ok(false)
        } else {
            self.save_state(m, v).map(|_| true)
        }
    }

    /// Replaces `removed` files by `added` ones in a new version: state saved first (see
    /// [`Ralt::save_or_defer`]), then the swap, so a failure leaves the old version in
    /// force. A flush (nothing removed) skips the save: its run is referenced by the next
    /// one (compaction, eviction, checkpoint, close), and a crash before that only forgets
    /// recent accesses (RALT is a hint), saving three fsyncs per flush.
    fn install(
        &self,
        m: &mut Maint,
        removed: &[Arc<RunFile>],
        added: Vec<(usize, Arc<RunFile>)>,
    ) -> Result<()> {
        let cur = self.version.load_full();
        let gone: HashSet<u64> = removed.iter().map(|f| f.number).collect();
        let mut levels: Vec<Vec<Arc<RunFile>>> = cur
            .levels
            .iter()
            .map(|fs| {
                fs.iter()
                    .filter(|f| !gone.contains(&f.number))
                    .cloned()
                    .collect()
            })
            .collect();
        for (level, f) in &added {
            if levels.len() <= *level {
                levels.resize_with(level + 1, Vec::new);
            }
            if *level == 0 {
                levels[0].insert(0, f.clone());
            } else {
                levels[*level].push(f.clone());
            }
        }
        for fs in levels.iter_mut().skip(1) {
            fs.sort_by(|a, b| a.smallest.cmp(&b.smallest));
        }
        while levels.last().is_some_and(|l| l.is_empty()) {
            levels.pop();
        }
        let v = Version { levels };
        let saved = if removed.is_empty() {
            self.dirty.store(true, Relaxed);
            Ok(false)
        } else {
            self.save_or_defer(m, &v, removed)
        };
        let saved_now = match saved {
            Ok(s) => s,
            Err(e) => {
                for (_, f) in &added {
                    f.mark_obsolete();
                }
                return Err(e);
            }
        };
        self.file_memory.store(v.memory_bytes(), Relaxed);
        self.version.store(Arc::new(v));
        for f in removed {
            f.mark_obsolete();
            if f.persisted_in_memory() {
                m.deferred.push(f.number);
            }
        }
        if saved_now {
            // The manifest just written names none of the removed runs.
            self.delete_deferred(m);
        }
        Ok(())
    }

    /// Deletes the files of removed runs that the manifest on disk named until the write
    /// that just happened. A failure leaves a stray file (the next open deletes files the
    /// manifest does not name), never a manifest naming a missing one.
    fn delete_deferred(&self, m: &mut Maint) {
        for number in m.deferred.drain(..) {
            if let Err(e) = self.env.remove(Tier::Fast, &run::file_name(number)) {
                tracing::warn!("RALT could not delete a file the last manifest dropped: {e}");
            }
        }
    }

    /// Counts the bytes of `added` files as written by flushes (0), compactions (1) or
    /// evictions (2).
    fn count_written(&self, kind: usize, added: &[(usize, Arc<RunFile>)]) {
        // Runs kept in memory wrote nothing (a checkpoint counts them when it does).
        let bytes: u64 = added
            .iter()
            .filter(|(_, f)| !f.in_memory())
            .map(|(_, f)| f.size)
            .sum();
        self.written[kind].fetch_add(bytes, Relaxed);
    }

    pub(super) fn update_pending(&self, m: &Maint) {
        let v = self.version.load();
        let pending = m.eviction.is_some()
            || self.over_limits(m, &v)
            || self.stage_needs_memory(m, &v)
            || self.compaction_level(&v).is_some()
            || self.retune_needs_flush(m) && !self.front.lock().active.is_empty();
        self.pending.store(pending, Relaxed);
    }

    fn over_limits(&self, m: &Maint, v: &Version) -> bool {
        let hot = v.hot_set_bytes();
        m.flushes > m.flushes_at_eviction
            && (hot > m.th.hot_limit + self.hot_step(m.th.hot_limit)
                || v.record_bytes() > m.th.phys_limit
                || self
                    .file_memory_limit()
                    .is_some_and(|l| v.memory_bytes() > l)
                || self.retune_due(m))
    }

    /// How far the hot set may pass `hot_limit` before an eviction re-ranks it: with
    /// auto-tuning a tenth of the limit, and at least a twentieth of the tuning range (the
    /// authors' RALT, `kHotSetExceedLimit`); with a fixed limit nothing.
    fn hot_step(&self, hot_limit: u64) -> u64 {
        if !self.opts.auto_tune {
            return 0;
        }
        let p = &self.params;
        (hot_limit / 10).max(p.rhs.saturating_sub(p.lhs) / 20)
    }

    /// With auto-tuning, an eviction (which is where Algorithm 1 sets both limits and
    /// the hot threshold) is due once per counter period even below the limits. The
    /// paper's RALT writes every access, so its files reach the physical limit and evict
    /// (and retune) again and again; with the admission stage and the hot stage they hold
    /// a fraction of that and may never reach the initial limits (50% of the fast levels
    /// for the hot set), so no threshold was ever set: every key seen twice counted as
    /// hot and was retained on the fast tier, up to half of it, and the cross-tier
    /// compaction overlapped more of the slow tier per byte demoted
    /// (docs/bench/cross-tier-bisect.md). Once a period is enough: the stability counters
    /// Algorithm 1 measures change only when one ends.
    fn retune_due(&self, m: &Maint) -> bool {
        self.opts.auto_tune && self.period() > m.tuned_epoch
    }

    /// A re-tuning is due and the active buffer was not flushed for it yet. The eviction
    /// judges the files alone, so accesses still in the active buffer count for nothing:
    /// a key read only there for five periods (a hotspot's keys recur in the buffer, which
    /// can go several periods without filling) would look unstable and be dropped. The
    /// active buffer is frozen for a flush first; the eviction follows (`over_limits`).
    fn retune_needs_flush(&self, m: &Maint) -> bool {
        m.eviction.is_none() && self.retune_due(m) && self.period() > m.retune_flushed
    }

    fn period(&self) -> u64 {
        self.front.lock().clock.epoch
    }

    /// True when the run files' filters and indexes and the hot stage together pass what
    /// the files may hold: the stage is written out rather than the files evicted.
    fn stage_needs_memory(&self, m: &Maint, v: &Version) -> bool {
        !m.stage.is_empty()
            && self
                .file_memory_limit()
                .is_some_and(|l| v.memory_bytes() + m.stage.bytes() > l)
    }

    /// Memory the hot stage may hold now: at most a quarter of the memory limit (without
    /// one, `max_buffer_bytes`), and at most half of what the run files leave free of
    /// their part, so that the files flushed before the next eviction or stage write-out
    /// still fit beside it.
    fn stage_room(&self, v: &Version) -> u64 {
        let most = self
            .opts
            .memory_limit
            .map_or(self.opts.max_buffer_bytes as u64, |l| l / 4);
        match self.file_memory_limit() {
            Some(l) => most.min(l.saturating_sub(v.memory_bytes()) / 2),
            None => most,
        }
    }

    /// Publishes the stage's counters for `stats` and the memory limit.
    fn publish_stage(&self, m: &Maint) {
        self.stage_bytes.store(m.stage.bytes(), Relaxed);
        self.staged_keys.store(m.stage.len() as u64, Relaxed);
        self.stage_merged.store(m.stage.merged(), Relaxed);
    }

    /// Writes the hot stage as one level-0 run and empties it: each key's record merges
    /// every access staged since the last write, judged hot by its score as a flush
    /// judges it (the key stays hot through its older hot record either way).
    pub(super) fn write_stage(&self, m: &mut Maint) -> Result<()> {
        if m.stage.is_empty() {
            return Ok(());
        }
        let v = self.version.load_full();
        let entries = m.stage.take_sorted();
        // On an error below the staged accesses are lost, as a crash loses them.
        self.publish_stage(m);
        let mut out = Outputs::new(self, 0);
        for (key, meta) in &entries {
            let hot = self.scorer.rank(meta, m.th.thr_tick) >= m.th.hot_rank;
            let dup = hot && hot_below(&v, 0, key);
            // One file, as a flush writes: level 0 files are not split.
            let w = match &mut out.cur {
                Some(w) => w,
                None => {
                    let n = self.next_file.fetch_add(1, Relaxed);
                    out.cur.insert(RunWriter::create(
                        &self.env,
                        n,
                        self.opts.bloom_bits_per_key,
                        &self.mem_runs,
                    )?)
                }
            };
            w.add(key, meta, hot, dup)?;
        }
        let added = out.finish()?;
        self.count_written(0, &added);
        m.stage_files.extend(added.iter().map(|(_, f)| f.number));
        self.install(m, &[], added)
    }

    /// What the run files' filters and indexes may hold: the memory limit less the active
    /// buffer's capacity, the frozen buffer (at least that capacity: a buffer frozen before
    /// a halving holds up to the old one, and counting both at the new capacity left the
    /// difference out), the admission table and the repeat stage at its cap. The repeat
    /// stage grows on the foreground's reads whenever a re-tuning raises the hot-set limit
    /// (its window), with no maintenance step between; counted at its size of the moment,
    /// its growth took room the hot stage had already filled, and the tracker passed its
    /// share of the memory budget until the next stage write-out (found by
    /// `memory_budget::budget_holds_under_a_write_read_mix`).
    fn file_memory_limit(&self) -> Option<u64> {
        let capacity = self.buffer_capacity.load(Relaxed);
        let frozen = self.frozen_bytes.load(Relaxed).max(capacity);
        let buffers = capacity + frozen + self.admission_bytes.load(Relaxed);
        self.opts.memory_limit.map(|l| {
            let repeats = self.repeat_memory_limit().max(self.repeats.lock().bytes());
            l.saturating_sub(buffers + repeats).max(1)
        })
    }

    /// Sizes the admission table for a window of `unstable_window` HotRAP bytes of
    /// single-access keys (what auto-tuning lets unstable records take before an eviction
    /// drops them), at the mean record size seen so far; at most an eighth of the memory
    /// limit (without one, `max_buffer_bytes`).
    fn size_admission(&self, m: &mut Maint) {
        let (total, accesses) = {
            let f = self.front.lock();
            (f.clock.total, f.accesses)
        };
        let mean = (total / accesses.max(1)).max(1);
        let keys = self.params.unstable_window / mean;
        let max_bytes = self
            .opts
            .memory_limit
            .map_or(self.opts.max_buffer_bytes as u64, |l| l / 8);
        m.admission.resize(Admission::target_slots(keys, max_bytes));
        self.admission_bytes.store(m.admission.bytes(), Relaxed);
    }

    /// The level most in need of compaction, if any is over its target.
    fn compaction_level(&self, v: &Version) -> Option<usize> {
        let mut best = (0.0, None);
        let files = v.level(0).len();
        let l0 = files as f64 / L0_TRIGGER as f64;
        let l0_bytes: u64 = v.level(0).iter().map(|f| f.size).sum();
        let l1_bytes = v.level_bytes(1);
        if l0 >= 1.0 && (l0_bytes * L0_L1_RATIO >= l1_bytes || files >= L0_MAX_FILES) {
            best = (l0, Some(0));
        }
        for level in 1..MAX_LEVEL.min(v.levels.len()) {
            let s = v.level_bytes(level) as f64 / self.params.level_target(level) as f64;
            if s >= 1.0 && s > best.0 {
                best = (s, Some(level));
            }
        }
        best.1
    }

    /// Writes a frozen buffer as a new level-0 run, then releases it.
    pub(super) fn flush_frozen(&self, m: &mut Maint, buf: &Arc<Buffer>) -> Result<()> {
        if !buf.is_empty() {
            self.write_level0(m, buf)?;
        }
        let mut f = self.front.lock();
        if f.frozen.as_ref().is_some_and(|b| Arc::ptr_eq(b, buf)) {
            f.frozen = None;
            self.frozen_bytes.store(0, Relaxed);
            self.has_frozen.store(false, Relaxed);
        }
        Ok(())
    }

    fn write_level0(&self, m: &mut Maint, buf: &Buffer) -> Result<()> {
        let mut entries: Vec<(&[u8], &BufEntry)> =
            buf.entries().iter().map(|e| (buf.key(e), e)).collect();
        entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let v = self.version.load_full();
        let admit = self.opts.admission;
        if admit {
            self.size_admission(m);
        }
        let mut out = Outputs::new(self, 0);
        for (key, e) in entries {
            let mut meta = e.meta;
            if admit {
                match m.admission.take_merged(e.hash, &e.meta, &self.scorer) {
                    Some(merged) => meta = merged,
                    // Seen once and no earlier access waiting: park it. A key hot in a
                    // run stays hot there meanwhile; its score lags by this one access.
                    None if e.count < 2 => {
                        m.admission.park(e.hash, &e.meta);
                        continue;
                    }
                    None => {}
                }
            }
            // A key accessed again while buffered stays hot after the flush, unless it is
            // hot below already (then that record answers, and a second hot record would
            // only count the key twice in range hot sizes).
            let below = v.may_be_hot(key, e.hash);
            // Hot in a run already: nothing decided before the next eviction reads this
            // access, so it waits in the stage (merged with the key's earlier staged
            // accesses) instead of adding a record at every flush.
            if self.opts.stage && below {
                let room = self.stage_room(&v);
                if m.stage.absorb(key, &meta, &self.scorer, room) {
                    m.staged_since_l0 += 1;
                    continue;
                }
            }
            let by_score = self.scorer.rank(&meta, m.th.thr_tick) >= m.th.hot_rank;
            let hot = by_score || (buf.is_hot(e) && !below);
            let dup = hot && below;
            // One file per flush, whatever its size: level 0 files are whole buffers.
            let w = match &mut out.cur {
                Some(w) => w,
                None => {
                    let n = self.next_file.fetch_add(1, Relaxed);
                    out.cur.insert(RunWriter::create(
                        &self.env,
                        n,
                        self.opts.bloom_bits_per_key,
                        &self.mem_runs,
                    )?)
                }
            };
            w.add(key, &meta, hot, dup)?;
        }
        let added = out.finish()?;
        self.count_written(0, &added);
        self.parked.store(m.admission.parked(), Relaxed);
        self.credited.store(m.admission.credited(), Relaxed);
        self.publish_stage(m);
        // The new run's filter and index must fit beside the stage before they are
        // published: left to the next maintenance step, the stage's write-out came after
        // a moment with both in memory, over the tracker's share (a sampler saw it:
        // `memory_budget::budget_holds_under_a_write_read_mix`). The stage's run is the
        // older of the two, so it goes first.
        let added_memory: u64 = added
            .iter()
            .map(|(_, f)| {
                let (filter, index) = f.memory();
                filter + index
            })
            .sum();
        let files = self.version.load().memory_bytes();
        if self
            .file_memory_limit()
            .is_some_and(|l| files + added_memory + m.stage.bytes() > l)
        {
            self.write_stage(m)?;
        }
        self.install(m, &[], added)?;
        m.flushes += 1;
        Ok(())
    }

    /// Eviction step, else an eviction start (after emptying L0), else a compaction.
    pub(super) fn background_step(&self, m: &mut Maint) -> Result<bool> {
        let v = self.version.load_full();
        if m.eviction.is_some() {
            self.eviction_step(m, &v)?;
            return Ok(true);
        }
        if self.stage_needs_memory(m, &v) {
            self.write_stage(m)?;
            return Ok(true);
        }
        if self.retune_needs_flush(m) {
            m.retune_flushed = self.period();
            if self.freeze_active() {
                return Ok(true);
            }
        }
        if self.over_limits(m, &v) {
            // The eviction judges scores: the staged accesses must be on disk first.
            let v = if m.stage_drained {
                v
            } else {
                self.write_stage(m)?;
                m.stage_drained = true;
                self.version.load_full()
            };
            if !v.level(0).is_empty() {
                self.compact(m, &v, 0)?;
            } else {
                m.stage_drained = false;
                self.start_eviction(m, &v)?;
            }
            return Ok(true);
        }
        if let Some(level) = self.compaction_level(&v) {
            self.compact(m, &v, level)?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Leveled compaction of `level` into `level + 1`: all of L0, or the next file of a
    /// deeper level round-robin, with the overlapping files below.
    fn compact(&self, m: &mut Maint, v: &Version, level: usize) -> Result<()> {
        let upper: Vec<Arc<RunFile>> = if level == 0 {
            v.level(0).to_vec()
        } else {
            let files = v.level(level);
            let ptr = m.compact_ptr[level].as_deref();
            let i = ptr.map_or(0, |p| files.partition_point(|f| &*f.largest <= p));
            let f = files.get(i).or(files.first()).cloned();
            f.into_iter().collect()
        };
        let (Some(lo), Some(hi)) = (
            upper.iter().map(|f| &f.smallest).min().cloned(),
            upper.iter().map(|f| &f.largest).max().cloned(),
        ) else {
            return Ok(());
        };
        if level > 0 {
            m.compact_ptr[level] = Some(hi.to_vec());
        }
        let lower: Vec<Arc<RunFile>> = v
            .level(level + 1)
            .iter()
            .filter(|f| f.overlaps(Some(&*lo), Some(&*hi)))
            .cloned()
            .collect();
        let mut sources: Vec<Source> = upper
            .iter()
            .map(|f| Source::files(vec![f.clone()], None, false))
            .collect();
        sources.push(Source::files(lower.clone(), None, false));
        let out_level = level + 1;
        let mut out = Outputs::new(self, out_level);
        let mut it = MergeIter::new(sources);
        // From L0, sources 0..upper.len() are flushed buffers, one run each: how many of
        // their records meet another record of the same key (from another buffer or from
        // L1: a key tracked already) sizes the buffer.
        let runs = if level == 0 { upper.len() } else { 0 };
        let flushed: Vec<bool> = upper
            .iter()
            .map(|f| !m.stage_files.contains(&f.number))
            .collect();
        // Records the stage took met their key's hot record, as their writes would have.
        let staged = if level == 0 {
            std::mem::take(&mut m.staged_since_l0)
        } else {
            0
        };
        let (mut buffered, mut repeated) = (staged, staged);
        while let Some(group) = it.next_group()? {
            let from_runs = group
                .iter()
                .filter(|(i, _)| *i < runs && flushed[*i])
                .count() as u64;
            buffered += from_runs;
            if from_runs > 0 && group.len() > 1 {
                repeated += from_runs;
            }
            let meta = fold(self, group);
            let key = &group[0].1.key;
            let hot = group.iter().any(|(_, r)| r.hot)
                || self.scorer.rank(&meta, m.th.thr_tick) >= m.th.hot_rank;
            let dup = hot && hot_below(v, out_level, key);
            out.add(key, &meta, hot, dup)?;
        }
        if runs > 0 {
            self.resize_buffer(repeated, buffered);
            for f in &upper {
                m.stage_files.remove(&f.number);
            }
        }
        let added = out.finish()?;
        self.count_written(1, &added);
        let removed: Vec<Arc<RunFile>> = upper.into_iter().chain(lower).collect();
        self.install(m, &removed, added)
    }

    /// Scans everything once to size the eviction: sampled score thresholds for both
    /// limits, and with auto-tuning the new limits from the stable records' sizes.
    fn start_eviction(&self, m: &mut Maint, v: &Version) -> Result<()> {
        let clock = self.front.lock().clock;
        let (t, e) = (clock.tick, clock.epoch);
        m.tuned_epoch = e;
        let auto = self.opts.auto_tune;
        let files: Vec<&Arc<RunFile>> = v.files().map(|(_, f)| f).collect();
        let est_h: u64 = files.iter().map(|f| f.info.hotrap_bytes).sum();
        let est_p: u64 = files.iter().map(|f| f.info.record_bytes).sum();
        let SizeScan {
            all_h,
            all_p,
            st_h,
            st_p,
            cand_h,
            cand_p,
            samples_h,
            samples_p,
        } = self.scan_sizes(v, clock.total, (est_h, est_p), t, e)?;
        if auto {
            // Algorithm 1, lines 18-21.
            let pr = &self.params;
            m.th.hot_limit = pr.lhs.max((st_h + pr.dhs).min(pr.rhs));
            let r = if all_h > 0 {
                all_p as f64 / all_h as f64
            } else {
                0.0
            };
            m.th.phys_limit = st_p + (r * pr.unstable_window as f64) as u64;
            self.hot_limit.store(m.th.hot_limit, Relaxed);
            self.phys_limit.store(m.th.phys_limit, Relaxed);
        }
        if let Some(limit) = self.file_memory_limit() {
            let memory = v.memory_bytes();
            if memory > limit {
                // Filter and index memory grow about linearly with the records held, so
                // the physical limit shrinks in proportion until the files fit.
                let fit = (all_p as f64 * limit as f64 / memory as f64) as u64;
                m.th.phys_limit = m.th.phys_limit.min(fit.max(1));
                self.phys_limit.store(m.th.phys_limit, Relaxed);
            }
        }
        // The target after eviction is (1 - beta) of the limit: the paper's "evict beta"
        // when the size is at its limit, and still a real margin when the limit was just
        // lowered or the trigger counted keys duplicated across levels.
        //
        // Auto-tuning sets the hot threshold at the hot limit itself, as the authors' RALT
        // does (the hot set then grows a step past it before the next eviction re-ranks,
        // `hot_step`): the limit is the stable records plus Dhs, and at 90% of it a
        // hotspot of more than nine Dhs kept a tenth of its stable keys below the
        // threshold at any moment, a different tenth after each eviction, so every
        // compaction into the slow tier demoted the ones it met (RW at the small bench
        // preset: 88% of reads on the fast disk instead of 94.5%). A fixed limit is a cap
        // the user set: the hot set stays within it.
        let keep = 1.0 - self.opts.beta;
        let target_p = keep * m.th.phys_limit as f64;
        let target_h = if auto { 1.0 } else { keep } * m.th.hot_limit as f64;
        let (evict_rank, keep_tied) = if cand_p as f64 > target_p {
            threshold(samples_p, cand_p, target_p)
        } else {
            (f64::NEG_INFINITY, 1.0)
        };
        let (mut hot_rank, mut hot_tied) = if cand_h as f64 > target_h {
            threshold(samples_h, cand_h, target_h)
        } else {
            (f64::NEG_INFINITY, 1.0)
        };
        if evict_rank > hot_rank || (evict_rank == hot_rank && keep_tied < hot_tied) {
            (hot_rank, hot_tied) = (evict_rank, keep_tied);
        }
        m.th.hot_rank = hot_rank;
        m.th.thr_tick = t;
        tracing::debug!(
            target: "tierkv::ralt",
            period = e,
            tracked = all_h,
            stable = st_h,
            candidates = cand_h,
            hot_limit = m.th.hot_limit,
            phys_limit = m.th.phys_limit,
            hot_rank,
            evict_rank,
            "eviction started"
        );
        m.eviction = Some(Eviction {
            inputs: files.iter().map(|f| f.number).collect(),
            out_level: v.deepest().max(1),
            cut: None,
            evict_rank,
            keep_tied,
            hot_rank,
            hot_tied,
            tick: t,
            epoch: e,
            drop_unstable: auto,
        });
        // Records flushed from now on are judged by the new threshold: make it durable
        // (at the next checkpoint while the runs are in memory).
        self.save_or_defer(m, v, &[]).map(|_| ())
    }

    /// One pass over every record for `start_eviction`: the totals and the sampled ranks.
    fn scan_sizes(
        &self,
        v: &Version,
        total: u64,
        (est_h, est_p): (u64, u64),
        t: u64,
        e: u64,
    ) -> Result<SizeScan> {
        // Systematic sampling: N evenly spaced points in [0, A) with a random offset. A is
        // known only after the merge, so the points span the files' (larger) total and
        // the points past the merged total simply find no record.
        let seed = key_fraction(&total.to_le_bytes());
        let stride_h = (est_h as f64 / SAMPLE_POINTS as f64).max(1.0);
        let stride_p = (est_p as f64 / SAMPLE_POINTS as f64).max(1.0);
        let (mut next_h, mut next_p) = (seed * stride_h, seed * stride_p);
        let (mut cum_h, mut cum_p) = (0.0f64, 0.0f64);
        let mut s = SizeScan::default();
        let sources = v
            .levels
            .iter()
            .enumerate()
            .flat_map(|(l, fs)| {
                if l == 0 {
                    fs.iter()
                        .map(|f| Source::files(vec![f.clone()], None, false))
                        .collect::<Vec<_>>()
                } else {
                    vec![Source::files(fs.clone(), None, false)]
                }
            })
            .collect();
        let mut it = MergeIter::new(sources);
        while let Some(group) = it.next_group()? {
            let meta = fold(self, group);
            let key = &group[0].1.key;
            let h = key.len() as u64 + meta.value_len as u64;
            let p = encoded_len(key.len(), &meta) as u64;
            let stable = is_stable(&meta, e);
            let rank = self.scorer.rank(&meta, t);
            let candidate = !self.opts.auto_tune || stable;
            s.all_h += h;
            s.all_p += p;
            if stable {
                s.st_h += h;
                s.st_p += p;
            }
            if candidate {
                s.cand_h += h;
                s.cand_p += p;
            }
            cum_h += h as f64;
            while next_h < cum_h {
                if candidate {
                    s.samples_h.push(rank);
                }
                next_h += stride_h;
            }
            cum_p += p as f64;
            while next_p < cum_p {
                if candidate {
                    s.samples_p.push(rank);
                }
                next_p += stride_p;
            }
        }
        Ok(s)
    }

    /// Merges the next few files of the eviction's output level with everything above
    /// them into the output level, dropping evicted records. Upper files reaching past
    /// the step's last key keep that tail as a rewritten, smaller file.
    fn eviction_step(&self, m: &mut Maint, v: &Version) -> Result<()> {
        let Some(ev) = m.eviction.as_ref() else {
            return Ok(());
        };
        let out_level = ev.out_level;
        let cut = ev.cut.clone();
        let pending: Vec<Arc<RunFile>> = v
            .level(out_level)
            .iter()
            .filter(|f| ev.inputs.contains(&f.number))
            .cloned()
            .collect();
        let take = pending.len().min(EVICT_STEP_FILES);
        let picked: Vec<Arc<RunFile>> = pending[..take].to_vec();
        let last_key: Option<Vec<u8>> = if take < pending.len() {
            picked.last().map(|f| f.largest.to_vec())
        } else {
            None
        };
        let in_step = |f: &&Arc<RunFile>| {
            ev.inputs.contains(&f.number)
                && cut.as_deref().is_none_or(|c| &*f.largest > c)
                && last_key.as_deref().is_none_or(|k| &*f.smallest <= k)
        };
        let upper: Vec<Vec<Arc<RunFile>>> = (1..out_level)
            .map(|l| v.level(l).iter().filter(in_step).cloned().collect())
            .collect();
        let mut sources: Vec<Source> = upper
            .iter()
            .map(|fs| Source::files(fs.clone(), cut.as_deref(), false))
            .collect();
        sources.push(Source::files(picked.clone(), cut.as_deref(), false));
        let mut out = Outputs::new(self, out_level);
        let mut tails: Vec<Outputs> = (1..out_level).map(|l| Outputs::new(self, l)).collect();
        let mut evicted = 0u64;
        let mut it = MergeIter::new(sources);
        while let Some(group) = it.next_group()? {
            let key = group[0].1.key.as_slice();
            if cut.as_deref().is_some_and(|c| key <= c) {
                continue;
            }
            if last_key.as_deref().is_some_and(|k| key > k) {
                // Past this step: each upper file's tail is rewritten as it is.
                for (src, rec) in group {
                    if let Some(t) = tails.get_mut(*src) {
                        let hot = self.scorer.rank(&rec.meta, ev.tick) >= ev.hot_rank;
                        let dup = hot && hot_below(v, src + 1, key);
                        t.add(key, &rec.meta, hot, dup)?;
                    }
                }
                continue;
            }
            let meta = fold(self, group);
            let rank = self.scorer.rank(&meta, ev.tick);
            let unstable = ev.drop_unstable && !is_stable(&meta, ev.epoch);
            if unstable || !at_least(rank, ev.evict_rank, ev.keep_tied, key) {
                evicted += 1;
                continue;
            }
            let hot = at_least(rank, ev.hot_rank, ev.hot_tied, key);
            out.add(key, &meta, hot, false)?;
        }
        let mut added = out.finish()?;
        let mut tail_files = Vec::new();
        for t in tails {
            let fs = t.finish()?;
            tail_files.extend(fs.iter().map(|(_, f)| f.number));
            added.extend(fs);
        }
        self.count_written(2, &added);
        let removed: Vec<Arc<RunFile>> = upper.into_iter().flatten().chain(picked).collect();
        self.install(m, &removed, added)?;
        m.th.evicted_keys += evicted;
        self.evicted_keys.store(m.th.evicted_keys, Relaxed);
        let done = last_key.is_none();
        if let Some(ev) = m.eviction.as_mut() {
            for f in &removed {
                ev.inputs.remove(&f.number);
            }
            ev.inputs.extend(tail_files);
            ev.cut = last_key;
        }
        if done {
            m.eviction = None;
            m.th.evictions += 1;
            m.flushes_at_eviction = m.flushes;
            self.evictions.store(m.th.evictions, Relaxed);
            self.save_or_defer(m, &self.version.load_full(), &[])?;
        }
        Ok(())
    }
}

/// What one scan of every record tells an eviction (`Ralt::scan_sizes`): the hot-set
/// (`_h`, key plus value) and physical (`_p`, encoded) bytes of all records, of the stable
/// ones and of the eviction's candidates, and the candidates' ranks at systematically
/// sampled points of each.
#[derive(Default)]
struct SizeScan {
    all_h: u64,
    all_p: u64,
    st_h: u64,
    st_p: u64,
    cand_h: u64,
    cand_p: u64,
    samples_h: Vec<f64>,
    samples_p: Vec<f64>,
}

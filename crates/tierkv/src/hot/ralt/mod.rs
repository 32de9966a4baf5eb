//! RALT (Recent Access Lookup Table, HotRAP §3.2 and §3.7): the on-disk hotness tracker.
//!
//! A small LSM-tree of access records on the fast disk, under `ralt/`. Accesses go to an
//! in-memory unsorted buffer (one entry per key); a full buffer is frozen and the
//! background flushes it to a level-0 run file; leveled compaction (size ratio 10) merges
//! records of one key by the paper's score rule. Readers load an immutable `Version`
//! through an `ArcSwap` and never block on maintenance.
//!
//! What "hot" means: every run record carries a hot bit, decided when the record is
//! written (flush, compaction, eviction) by comparing its score with the hot threshold in
//! force; a compaction keeps a key hot if any merged record was. `is_hot` asks the
//! in-memory bloom filters of hot keys, `range_hot_size` sums per-block prefix sums of hot
//! sizes, `hot_keys` merges the hot records of every level. A key still in the buffer is
//! hot if its runs say so, or if it was accessed again while buffered (the paper's "super
//! hot" key); a single buffered access alone never makes a key hot, so a promotion check
//! that records an access and then asks `is_hot` needs an earlier access.
//!
//! What is written: a flush writes a buffered key accessed twice while buffered, or whose
//! one access meets an earlier one parked in the admission table; a key seen once is
//! parked there instead (`admit`; off with `RaltOptions::admission = false`, the paper's
//! every-key flush). A key already hot in a run is not rewritten at every flush either: its
//! flushed access is merged into the hot stage (`stage`), which is written as one run
//! before an eviction reads the scores, when the run files need its memory, and at close
//! (off with `RaltOptions::stage = false`).
//!
//! When the hot set size or the physical size exceeds its limit, an eviction computes two
//! score thresholds by sampling, drops records below the physical one (and, with
//! auto-tuning, every unstable record first), re-decides every hot bit against the hot
//! one, and merges everything into one sorted run a few files at a time. Auto-tuning then
//! resets both limits by Algorithm 1.
//!
//! Files: `options` (options, derived parameters), `score` (score and counter arithmetic,
//! record encoding), `buffer` (clock, unsorted buffer), `admit` (admission table), `stage`
//! (hot stage), `repeat` (slow-tier reads judged recently, for promotion on a repeat),
//! `deferred` (reads' accesses that found the front lock held), `run` (run files), `manifest`
//! (persisted state), `version` (file sets, merging iterator), `maint` (flush, compaction,
//! eviction, auto-tuning).

mod admit;
mod buffer;
mod deferred;
mod maint;
mod manifest;
mod options;
mod repeat;
mod run;
mod score;
mod stage;
#[cfg(test)]
mod tests;
mod version;

pub use options::{RaltOptions, ScoringMethod};

use crate::env::{Env, Tier};
use crate::error::{Error, Result};
use crate::sst::filter::filter_hash;
use arc_swap::ArcSwap;
use buffer::{entry_cost, Buffer, Clock};
use maint::Maint;
use options::Params;
use parking_lot::Mutex;
use run::{MemRuns, Rec, RunFile};
use score::Scorer;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use version::{MergeIter, Source, Version};

/// What the foreground touches: the clock and the buffers, behind one short mutex.
struct Front {
    active: Buffer,
    /// A full buffer waiting for the background to flush it.
    frozen: Option<Arc<Buffer>>,
    clock: Clock,
    accesses: u64,
    dropped: u64,
}

/// The hotness tracker. `Send + Sync`; share it as `Arc<Ralt>`.
pub struct Ralt {
    env: Arc<Env>,
    opts: RaltOptions,
    params: Params,
    scorer: Scorer,
    front: Mutex<Front>,
    /// Reads' accesses that found `front` held, for its next holder to merge.
    deferred: deferred::Deferred,
    /// Bytes the active buffer may hold (see `RaltOptions::max_buffer_bytes`); changed
    /// only under the front lock, when a buffer freezes.
    buffer_capacity: AtomicU64,
    /// The capacity the next buffer gets (set by L0 compactions, see
    /// `RaltOptions::max_buffer_bytes`).
    buffer_target: AtomicU64,
    has_frozen: AtomicBool,
    /// Bytes of the frozen buffer (0 when none). It was filled at the capacity in force
    /// before it froze, which may be larger than the current one after a halving.
    frozen_bytes: AtomicU64,
    /// Compaction or eviction work is waiting.
    pending: AtomicBool,
    version: ArcSwap<Version>,
    /// The current version's filter and index memory (a copy for the foreground's room
    /// check, `active_room`).
    file_memory: AtomicU64,
    next_file: AtomicU64,
    maint: Mutex<Maint>,
    /// Copies of the limits for `stats` without the maintenance lock.
    hot_limit: AtomicU64,
    phys_limit: AtomicU64,
    evictions: AtomicU64,
    evicted_keys: AtomicU64,
    /// Bytes of run files written by flushes, compactions and evictions.
    written: [AtomicU64; 3],
    /// Memory of the admission table (a copy for `stats` and the memory limit).
    admission_bytes: AtomicU64,
    /// Accesses the admission stage parked and credited (copies for `stats`).
    parked: AtomicU64,
    credited: AtomicU64,
    /// Memory, entries and merged records of the hot stage (copies for `stats` and the
    /// memory limit).
    stage_bytes: AtomicU64,
    staged_keys: AtomicU64,
    stage_merged: AtomicU64,
    /// Bytes of run images held in memory and their limit (`RaltOptions::run_memory_limit`).
    mem_runs: Arc<MemRuns>,
    /// Keys whose slow-tier read was judged for promotion lately (`repeat`).
    repeats: Mutex<repeat::Repeats>,
    /// The state changed since the last checkpoint (changed only under the maintenance
    /// lock; read by `needs_maintenance`).
    dirty: AtomicBool,
    /// The engine's other writes (every cause but RALT, both tiers) at the last
    /// checkpoint: the next is due when they have grown by `checkpoint_ratio` times what
    /// it would write.
    checkpoint_base: AtomicU64,
    /// Checkpoints completed (every manifest write is one) and the run bytes they wrote.
    checkpoints: AtomicU64,
    checkpoint_written: AtomicU64,
}

/// What a checkpoint writes beyond its runs (the manifest, counted at a page), so that a
/// state changed without new runs (a threshold, removed runs) is saved only after the
/// engine wrote `checkpoint_ratio` times this.
const MANIFEST_COST: u64 = 4096;

/// Answers `range_hot_size` from one snapshot of the runs and the buffers' hot keys.
pub struct RangeHotSizer {
    version: Arc<Version>,
    /// Hot buffered keys, sorted, and the prefix sums of their HotRAP sizes.
    keys: Vec<Vec<u8>>,
    prefix: Vec<u64>,
}

impl RangeHotSizer {
    /// HotRAP bytes of hot keys in `[lo, hi]` (an overestimate, never below the truth).
    pub fn range_hot_size(&self, lo: &[u8], hi: &[u8]) -> u64 {
        if lo > hi {
            return 0;
        }
        let from = self.keys.partition_point(|k| k.as_slice() < lo);
        let to = self.keys.partition_point(|k| k.as_slice() <= hi);
        self.version.range_hot_size(lo, hi) + self.prefix[to] - self.prefix[from]
    }
}

/// A snapshot of RALT's sizes and counters.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct RaltStats {
    /// HotRAP size of hot keys in the runs (each hot key counted about once).
    pub hot_set_size: u64,
    /// Current hot set size limit.
    pub hot_set_limit: u64,
    /// Physical size: total length of the access records in the runs.
    pub physical_size: u64,
    /// Current physical size limit.
    pub physical_limit: u64,
    /// Records in the runs (a key in several levels counts again) plus buffered keys.
    pub tracked_keys: u64,
    /// Memory of filters, indexes and buffers.
    pub memory_bytes: u64,
    /// Accesses recorded (including dropped ones).
    pub accesses: u64,
    /// Evictions completed.
    pub evictions: u64,
    /// Current time slice.
    pub tick: u64,
    /// Accesses dropped because both buffers were full (the background fell behind).
    pub dropped_accesses: u64,
    /// Bytes of RALT's files on the fast disk (records plus indexes, filters, footers).
    pub file_bytes: u64,
    /// Live run files.
    pub files: u64,
    /// Memory of the hot-key bloom filters.
    pub filter_bytes: u64,
    /// Memory of the block indexes.
    pub index_bytes: u64,
    /// Memory of the buffers.
    pub buffer_bytes: u64,
    /// Bytes the active buffer may hold now (it grows while keys recur, see
    /// `RaltOptions::max_buffer_bytes`).
    pub buffer_capacity: u64,
    /// Keys evicted so far.
    pub evicted_keys: u64,
    /// Counter periods elapsed (auto-tuning counters lose one unit per period).
    pub counter_period: u64,
    /// Bytes of run files flushes wrote (level 0).
    pub flush_write_bytes: u64,
    /// Bytes of run files compactions wrote.
    pub compaction_write_bytes: u64,
    /// Bytes of run files evictions wrote.
    pub eviction_write_bytes: u64,
    /// Memory of the admission table (included in `memory_bytes`).
    pub admission_bytes: u64,
    /// Flushed single accesses the admission stage kept off the disk.
    pub admission_parked: u64,
    /// Parked accesses credited to a later record of their key.
    pub admission_credited: u64,
    /// Memory of the hot stage (included in `memory_bytes`).
    pub stage_bytes: u64,
    /// Keys in the hot stage.
    pub staged_keys: u64,
    /// Flushed records of keys hot in a run merged into the hot stage instead of written
    /// (the stage writes one record per key when it is written out).
    pub stage_merged: u64,
    /// Slow-tier reads judged for promotion by the repeat stage
    /// (`PromotionOptions::promote_on_repeat`; a record put back and judged again counts
    /// again).
    pub repeat_reads: u64,
    /// Of those, reads of a key judged within the window: repeats.
    pub repeat_hits: u64,
    /// Bytes of runs held in memory (not in `memory_bytes`; their limit is
    /// `RaltOptions::run_memory_limit`).
    pub run_memory_bytes: u64,
    /// `RaltOptions::run_memory_limit`.
    pub run_memory_limit: u64,
    /// Bytes of in-memory runs whose file no checkpoint has written yet.
    pub unpersisted_bytes: u64,
    /// Checkpoints (manifest writes) since open.
    pub checkpoints: u64,
    /// Bytes of in-memory runs checkpoints wrote as files since open (RALT's writes are
    /// these plus `*_write_bytes`, plus the manifests).
    pub checkpoint_write_bytes: u64,
}

impl Ralt {
    /// Opens (or creates) the tracker under `ralt/` on the fast tier, resuming the state
    /// saved by the last manifest and deleting files it does not reference.
    pub fn open(env: Arc<Env>, opts: RaltOptions) -> Result<Ralt> {
        opts.validate()?;
        if opts.fd_budget == 0 {
            return Err(Error::InvalidArgument(
                "ralt: fd_budget must be positive".into(),
            ));
        }
        let dir = env.path(Tier::Fast, manifest::DIR);
        if !dir.is_dir() {
            std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
            env.sync_dir(Tier::Fast)?;
        }
        let params = Params::new(&opts);
        // With a fixed limit every record is a candidate, and a record read once lately would
        // rank above a hot key idle for a few slices: recency only ranks the stable keys
        // auto-tuning lets compete.
        let recency = if opts.auto_tune {
            opts.recency_weight
        } else {
            0.0
        };
        let scorer = Scorer::new(opts.scoring, opts.alpha, recency);
        let mut state = manifest::read(&env)?;
        if let Some(s) = &state {
            if s.scoring != opts.scoring.code() {
                tracing::warn!(
                    "RALT was tracking with another scoring method; starting afresh with {:?}",
                    opts.scoring
                );
                let next_file = s.next_file;
                state = None;
                // Keep numbering monotonic so no old name is reused.
                let st = maint::fresh_state(&opts, &params, next_file);
                manifest::write(&env, &st)?;
            }
        }
        let state = state.unwrap_or_else(|| maint::fresh_state(&opts, &params, 1));
        let mem_runs = Arc::new(MemRuns {
            bytes: AtomicU64::new(0),
            limit: opts.run_memory_limit,
        });
        let mut levels: Vec<Vec<Arc<RunFile>>> = Vec::new();
        for &(level, number) in &state.files {
            let level = level as usize;
            let f = RunFile::open(&env, number, &mem_runs).map_err(|e| match e {
                Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                    Error::corruption(
                        env.path(Tier::Fast, manifest::MANIFEST),
                        0,
                        format!(
                            "RALT manifest references missing file {}",
                            run::file_name(number)
                        ),
                    )
                }
                e => e,
            })?;
            if levels.len() <= level {
                levels.resize_with(level + 1, Vec::new);
            }
            levels[level].push(Arc::new(f));
        }
        for (l, files) in levels.iter_mut().enumerate().skip(1) {
            files.sort_by(|a, b| a.smallest.cmp(&b.smallest));
            if files.windows(2).any(|w| w[0].largest >= w[1].smallest) {
                return Err(Error::corruption(
                    env.path(Tier::Fast, manifest::MANIFEST),
                    0,
                    format!("RALT level {l} holds files with overlapping key ranges"),
                ));
            }
        }
        let version = Version { levels };
        remove_unreferenced(&env, &version)?;
        let (hot_limit, phys_limit) = if opts.auto_tune {
            (state.th.hot_limit, state.th.phys_limit)
        } else {
            (params.init_hot_limit, params.init_phys_limit)
        };
        let m = Maint::new(&state, hot_limit, phys_limit);
        let ralt = Ralt {
            front: Mutex::new(Front {
                active: Buffer::default(),
                frozen: None,
                clock: state.clock,
                accesses: 0,
                dropped: 0,
            }),
            deferred: deferred::Deferred::default(),
            buffer_capacity: AtomicU64::new(opts.buffer_bytes as u64),
            buffer_target: AtomicU64::new(opts.buffer_bytes as u64),
            has_frozen: AtomicBool::new(false),
            frozen_bytes: AtomicU64::new(0),
            pending: AtomicBool::new(false),
            file_memory: AtomicU64::new(version.memory_bytes()),
            version: ArcSwap::from_pointee(version),
            next_file: AtomicU64::new(state.next_file),
            hot_limit: AtomicU64::new(hot_limit),
            phys_limit: AtomicU64::new(phys_limit),
            evictions: AtomicU64::new(state.th.evictions),
            evicted_keys: AtomicU64::new(state.th.evicted_keys),
            written: Default::default(),
            admission_bytes: AtomicU64::new(0),
            parked: AtomicU64::new(0),
            credited: AtomicU64::new(0),
            stage_bytes: AtomicU64::new(0),
            staged_keys: AtomicU64::new(0),
            stage_merged: AtomicU64::new(0),
            mem_runs,
            repeats: Mutex::new(repeat::load(&env)),
            dirty: AtomicBool::new(false),
            checkpoint_base: AtomicU64::new(other_writes(&env)),
            checkpoints: AtomicU64::new(0),
            checkpoint_written: AtomicU64::new(0),
            maint: Mutex::new(m),
            env,
            opts,
            params,
            scorer,
        };
        ralt.update_pending(&ralt.maint.lock());
        Ok(ralt)
    }

    /// Records an access to `key` whose value is `value_len` bytes. No I/O: the access goes
    /// to the buffer; when the buffer fills it is handed to the background
    /// ([`Ralt::needs_maintenance`]); when the handed-over one is not flushed yet either,
    /// the access only advances the clock and is counted as dropped.
    pub fn record_access(&self, key: &[u8], value_len: u32) -> Result<()> {
        self.record(key, value_len, true).map(|_| ())
    }

    /// Records an access from a background thread (the promotion checker, a compaction):
    /// when both buffers are full it flushes the frozen one itself instead of dropping the
    /// access, since nothing waits on it but background work.
    pub fn record_access_background(&self, key: &[u8], value_len: u32) -> Result<()> {
        while !self.record(key, value_len, false)? {
            let mut m = self.maint.lock();
            let frozen = self.front.lock().frozen.clone();
            if let Some(buf) = frozen {
                self.flush_frozen(&mut m, &buf)?;
            }
            self.update_pending(&m);
        }
        Ok(())
    }

    /// Hands the active buffer to the background for its flush (the frozen slot must be
    /// empty) and starts a new one at the target capacity.
    fn freeze(&self, f: &mut Front) {
        // Sized like the buffer just filled, which tells the typical key length.
        let key_len = f.active.key_bytes() / f.active.len().max(1);
        let capacity = self.next_buffer_capacity(f.active.bytes() as u64);
        self.buffer_capacity.store(capacity, Relaxed);
        let scale = (capacity / self.opts.buffer_bytes.max(1) as u64).max(1);
        let fresh = Buffer::with_capacity(
            usize::try_from(capacity).unwrap_or(usize::MAX),
            key_len,
            u32::try_from(scale).unwrap_or(u32::MAX),
        );
        let full = std::mem::replace(&mut f.active, fresh);
        self.frozen_bytes.store(full.bytes() as u64, Relaxed);
        f.frozen = Some(Arc::new(full));
        self.has_frozen.store(true, Relaxed);
    }

    /// The next active buffer's capacity: the target, but grown only as far as the memory
    /// limit leaves room for it beside what the tracker holds now. The new capacity counts
    /// twice in what the run files may hold (active now, frozen later: `file_memory_limit`),
    /// so a doubling taken while the files filled their part put them over it at once,
    /// and the tracker passed its share of the memory budget as soon as both buffers
    /// filled, before an eviction could make room (found by
    /// `memory_budget::budget_holds_under_a_write_read_mix`). A shrinking target is taken
    /// as it is.
    fn next_buffer_capacity(&self, frozen: u64) -> u64 {
        let target = self.buffer_target.load(Relaxed);
        let now = self.buffer_capacity.load(Relaxed);
        let Some((limit, held)) = self.held_beside_buffers().filter(|_| target > now) else {
            return target;
        };
        // With c at least the frozen buffer's bytes: held + c + c <= limit.
        let room = limit.saturating_sub(held) / 2;
        if room <= frozen.max(now) {
            return now;
        }
        target.min(room)
    }

    /// How far the active buffer may grow within the memory limit beside what the tracker
    /// holds now (`held_beside_buffers` and the frozen buffer). The buffers fill from the
    /// foreground while the background's eviction is what shrinks the files, so without
    /// this check a flush that put the files over their part (`file_memory_limit`) was
    /// followed by both buffers filling before the eviction ended, over the tracker's share
    /// of the memory budget (`memory_budget::budget_holds_under_a_write_read_mix`).
    fn active_room(&self) -> u64 {
        self.held_beside_buffers()
            .map_or(u64::MAX, |(limit, held)| {
                limit.saturating_sub(held + self.frozen_bytes.load(Relaxed))
            })
    }

    /// The memory limit, if any, and what the tracker holds besides its two buffers: the
    /// run files' filters and indexes, the hot stage, the admission table and the repeat
    /// window at its cap (it grows on reads with no maintenance step between).
    fn held_beside_buffers(&self) -> Option<(u64, u64)> {
        let limit = self.opts.memory_limit?;
        let held = self.file_memory.load(Relaxed)
            + self.stage_bytes.load(Relaxed)
            + self.admission_bytes.load(Relaxed)
            + self.repeat_memory_limit();
        Some((limit, held))
    }

    /// Freezes the active buffer for a flush if it holds anything and none waits.
    fn freeze_active(&self) -> bool {
        let mut f = self.front.lock();
        self.merge_deferred(&mut f);
        if f.frozen.is_some() || f.active.is_empty() {
            return false;
        }
        self.freeze(&mut f);
        true
    }

    /// Moves the clock by one access of `size` bytes. With auto-tuning a new counter
    /// period makes a re-tuning due (`Ralt::retune_due`): the background is told at once.
    fn advance_clock(&self, clock: &mut Clock, size: u64) {
        let period = clock.epoch;
        clock.advance(size, self.params.tick_bytes, self.params.decay_bytes);
        if self.opts.auto_tune && clock.epoch > period {
            self.pending.store(true, Relaxed);
        }
    }

    /// Merges one access into the buffers. When both buffers are full: drops it (counted)
    /// if `drop_if_full`, else records nothing and returns `false`. A read's access
    /// (`drop_if_full`) never waits for the front lock while another thread holds it: it
    /// is left in `deferred` for that holder's successor (see the `deferred` module).
    fn record(&self, key: &[u8], value_len: u32, drop_if_full: bool) -> Result<bool> {
        let hash = filter_hash(key);
        let mut f = match self.front.try_lock() {
            Some(f) => f,
            None if drop_if_full && self.deferred.push(hash, key, value_len) => return Ok(true),
            None => self.front.lock(),
        };
        self.merge_deferred(&mut f);
        Ok(self.record_locked(&mut f, hash, key, value_len, drop_if_full))
    }

    /// Merges the reads' accesses left in `deferred`, as reads (dropped if both buffers
    /// are full).
    fn merge_deferred(&self, f: &mut Front) {
        if self.deferred.is_empty() {
            return;
        }
        for a in self.deferred.take() {
            self.record_locked(f, a.hash, &a.key, a.value_len, true);
        }
    }

    /// [`Ralt::record`] with the front lock held.
    fn record_locked(
        &self,
        f: &mut Front,
        hash: u64,
        key: &[u8],
        value_len: u32,
        drop_if_full: bool,
    ) -> bool {
        let size = key.len() as u64 + value_len as u64;
        let c = f.clock;
        let access = self
            .scorer
            .first_access(value_len, c.tick, c.epoch, c.total);
        if f.active.merge_access(hash, key, &access, &self.scorer) {
            self.advance_clock(&mut f.clock, size);
            f.accesses += 1;
            return true;
        }
        let after = (f.active.bytes() + entry_cost(key.len())) as u64;
        let full = after > self.buffer_capacity.load(Relaxed);
        // Out of memory while the buffer has room: a freeze would only write a small run.
        let no_room = !full && after > self.active_room();
        if !f.active.is_empty() && (full || no_room) {
            if no_room && !drop_if_full && f.frozen.is_none() {
                // A background access still needs a place, and the frozen buffer's flush
                // is what frees memory (the caller flushes it when this returns false).
                self.freeze(f);
                return false;
            }
            if f.frozen.is_some() || no_room {
                if drop_if_full {
                    // Time still moves: the paper's clock counts every accessed byte.
                    self.advance_clock(&mut f.clock, size);
                    f.accesses += 1;
                    f.dropped += 1;
                    return true;
                }
                return false;
            }
            self.freeze(f);
        }
        self.advance_clock(&mut f.clock, size);
        f.accesses += 1;
        // Accessed again while its earlier access waits in the frozen buffer: that is a
        // second buffered access too.
        let earlier = f
            .frozen
            .as_deref()
            .and_then(|b| b.get(hash, key))
            .map(|e| e.count);
        f.active.insert(hash, key, access, earlier.unwrap_or(0));
        true
    }

    /// Sizes the next buffers after an L0 compaction in which `repeated` of the `records`
    /// from flushed buffers met another record of their key, from another buffer or from
    /// the level below (see `RaltOptions::max_buffer_bytes`).
    fn resize_buffer(&self, repeated: u64, records: u64) {
        if records == 0 {
            return;
        }
        let floor = self.opts.buffer_bytes as u64;
        // Twice the physical limit holds about as many keys as RALT keeps on disk (an
        // entry takes about two and a half times a record's bytes); a larger buffer would
        // flush, and so evict, too rarely to follow the workload.
        let ceiling = (self.opts.max_buffer_bytes as u64)
            .min(self.opts.memory_limit.map_or(u64::MAX, |l| l / 4))
            .min(self.phys_limit.load(Relaxed).saturating_mul(2))
            .max(floor);
        let now = self.buffer_target.load(Relaxed);
        let next = if repeated * 2 >= records {
            now.saturating_mul(2)
        } else if repeated * 10 < records {
            now / 2
        } else {
            now
        }
        .clamp(floor, ceiling);
        if next != now {
            tracing::debug!(
                target: "tierkv::ralt",
                repeated,
                records,
                from = now,
                to = next,
                "buffer resized"
            );
            self.buffer_target.store(next, Relaxed);
        }
    }

    /// True if `key` is hot: a hot-key filter of some run says so (no I/O, no second
    /// check, as in the paper), or the key was accessed again while buffered.
    pub fn is_hot(&self, key: &[u8]) -> bool {
        let hash = filter_hash(key);
        {
            let f = self.front.lock();
            let hot = |b: &Buffer| b.get(hash, key).is_some_and(|e| b.is_hot(e));
            if hot(&f.active) || f.frozen.as_deref().is_some_and(hot) {
                return true;
            }
        }
        self.version.load().may_be_hot(key, hash)
    }

    /// Remembers that `key` (`value_len` bytes of value) was read from the slow tier and
    /// judged for promotion; true if it already was within the last hot-set limit's worth
    /// of such keys, up to twice that while most judged reads are repeats (see the
    /// `repeat` module, `Repeats::widening`).
    pub fn read_again(&self, key: &[u8], value_len: u32) -> bool {
        let mut r = self.repeats.lock();
        let window = (self.hot_limit.load(Relaxed) as f64 * r.widening()) as u64;
        r.fit(window, self.repeat_memory_limit());
        r.seen_again(filter_hash(key), key.len() as u64 + value_len as u64)
    }

    /// True if `key` is in the repeat stage's window, without counting a read.
    pub fn remembers(&self, key: &[u8]) -> bool {
        self.repeats.lock().remembers(filter_hash(key))
    }

    /// Most memory the repeat stage holds: as the admission table, an eighth of the memory
    /// limit (unbounded without one but for its own cap).
    pub(super) fn repeat_memory_limit(&self) -> u64 {
        self.opts.memory_limit.map_or(u64::MAX, |l| l / 8)
    }

    /// Estimated HotRAP size of the hot keys in `[lo, hi]`: per level, the difference of
    /// the prefix sums at the range's edge blocks (edge blocks counted whole), summed over
    /// levels, plus hot buffered keys that no run counts as hot already. Never below the
    /// exact value but for the hot-key filters' false positives (as at flush, where the
    /// same filters decide whether a buffered key needs a hot record), often a little
    /// above.
    pub fn range_hot_size(&self, lo: &[u8], hi: &[u8]) -> u64 {
        self.range_hot_sizer().range_hot_size(lo, hi)
    }

    /// A snapshot for many `range_hot_size` questions (compaction picking asks once per
    /// file): the buffers are scanned once, under the lock `record_access` takes, instead
    /// of once per question.
    pub fn range_hot_sizer(&self) -> RangeHotSizer {
        let version = self.version.load_full();
        // (key, HotRAP size, filter hash): the hash is the buffer's, not computed again.
        let mut buffered: Vec<(Vec<u8>, u64, u64)> = {
            let f = self.front.lock();
            std::iter::once(&f.active)
                .chain(f.frozen.as_deref())
                .flat_map(|b| {
                    b.entries().iter().filter(|e| b.is_hot(e)).map(move |e| {
                        let key = b.key(e);
                        let size = key.len() as u64 + e.meta.value_len as u64;
                        (key.to_vec(), size, e.hash)
                    })
                })
                .collect()
        };
        // A key hot in a run is counted by the run's prefix sums already: with a buffer
        // large enough to hold the hot set most buffered hot keys are (30% too much in
        // the hotspot test before this check). The filters are probed outside the lock.
        buffered.retain(|(k, _, hash)| !version.may_be_hot(k, *hash));
        buffered.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut prefix = Vec::with_capacity(buffered.len() + 1);
        prefix.push(0u64);
        for (_, size, _) in &buffered {
            prefix.push(prefix.last().copied().unwrap_or(0) + size);
        }
        RangeHotSizer {
            version,
            keys: buffered.into_iter().map(|(k, _, _)| k).collect(),
            prefix,
        }
    }

    /// The hot keys in `[lo, hi]` in key order, each with the value length of its newest
    /// hot record. Reads a snapshot: maintenance running meanwhile does not disturb it.
    // The signature is the engine's contract; spelled out rather than aliased.
    #[allow(clippy::type_complexity)]
    pub fn hot_keys(
        &self,
        lo: &[u8],
        hi: &[u8],
    ) -> Result<Box<dyn Iterator<Item = Result<(Vec<u8>, u32)>> + Send>> {
        if lo > hi {
            return Ok(Box::new(std::iter::empty()));
        }
        let v = self.version.load_full();
        let mut mem: Vec<Rec> = Vec::new();
        {
            let f = self.front.lock();
            // Active first: it is newer, and the stable sort plus dedup keeps it.
            for b in std::iter::once(&f.active).chain(f.frozen.as_deref()) {
                for e in b.entries() {
                    let key = b.key(e);
                    if b.is_hot(e) && key >= lo && key <= hi {
                        mem.push(Rec {
                            key: key.to_vec(),
                            meta: e.meta,
                            hot: true,
                        });
                    }
                }
            }
        }
        mem.sort_by(|a, b| a.key.cmp(&b.key));
        mem.dedup_by(|later, earlier| later.key == earlier.key);
        let mut sources = vec![Source::Mem(mem.into_iter())];
        for (level, files) in v.levels.iter().enumerate() {
            let overlapping: Vec<Arc<RunFile>> = files
                .iter()
                .filter(|f| f.overlaps(Some(lo), Some(hi)))
                .cloned()
                .collect();
            if level == 0 {
                for f in overlapping {
                    sources.push(Source::files(vec![f], Some(lo), true));
                }
            } else if !overlapping.is_empty() {
                sources.push(Source::files(overlapping, Some(lo), true));
            }
        }
        Ok(Box::new(HotKeys {
            merge: MergeIter::new(sources),
            hi: hi.to_vec(),
            done: false,
        }))
    }

    /// Persists the buffers and the hot stage as level-0 runs and checkpoints (called on
    /// close): every in-memory run is written as its file, then the manifest, so a reopen
    /// resumes from exactly this state.
    pub fn flush(&self) -> Result<()> {
        let mut m = self.maint.lock();
        loop {
            let buf = {
                let mut f = self.front.lock();
                match f.frozen.clone() {
                    Some(b) => b,
                    None if f.active.is_empty() => break,
                    None => {
                        let full = std::mem::take(&mut f.active);
                        self.frozen_bytes.store(full.bytes() as u64, Relaxed);
                        let b = Arc::new(full);
                        f.frozen = Some(b.clone());
                        self.has_frozen.store(true, Relaxed);
                        b
                    }
                }
            };
            self.flush_frozen(&mut m, &buf)?;
        }
        self.write_stage(&mut m)?;
        self.save_state(&mut m, &self.version.load_full())?;
        self.save_repeats()?;
        self.update_pending(&m);
        Ok(())
    }

    /// Saves the repeat stage's window with the rest of the state (see the `repeat`
    /// module): at close and at checkpoints.
    fn save_repeats(&self) -> Result<()> {
        let written = repeat::save(&self.env, &self.repeats)?;
        self.checkpoint_written.fetch_add(written, Relaxed);
        Ok(())
    }

    /// One unit of background work: flush a frozen buffer, else one eviction step, else
    /// one compaction, else a checkpoint if one is due. Returns whether it did anything.
    pub fn maintenance(&self) -> Result<bool> {
        let mut m = self.maint.lock();
        let frozen = self.front.lock().frozen.clone();
        let mut did = match frozen {
            Some(buf) => {
                self.flush_frozen(&mut m, &buf)?;
                true
            }
            None => self.background_step(&mut m)?,
        };
        if !did && self.checkpoint_due() {
            self.save_state(&mut m, &self.version.load_full())?;
            self.save_repeats()?;
            did = true;
        }
        self.update_pending(&m);
        Ok(did)
    }

    /// True when a buffer waits for its flush, compaction/eviction is due, or a
    /// checkpoint is. For the background loop: the checkpoint test sums the engine's
    /// write counters.
    pub fn needs_maintenance(&self) -> bool {
        self.work_waiting() || self.checkpoint_due()
    }

    /// True when a buffer waits for its flush or compaction/eviction is due: two atomic
    /// loads, for the read path after every access. A due checkpoint is left to the
    /// background loop's next wake-up (it becomes due only as the engine writes, and
    /// every flush or compaction wakes the loop).
    pub fn work_waiting(&self) -> bool {
        self.has_frozen.load(Relaxed) || self.pending.load(Relaxed)
    }

    /// Checkpoints now: writes every in-memory run not on disk yet, then the manifest
    /// (`flush` does it at close, background maintenance when the trigger fires).
    pub fn checkpoint(&self) -> Result<()> {
        let mut m = self.maint.lock();
        self.save_state(&mut m, &self.version.load_full())?;
        self.save_repeats()
    }

    /// Writes the tracker's whole state into `dest` (a new directory, the `ralt/` of a
    /// store checkpoint): checkpoints now, then, holding maintenance off so no file is
    /// replaced meanwhile, gives every file of `ralt/` a second name in `dest` (a copy where
    /// the file system cannot link). Returns the files linked and copied.
    pub fn checkpoint_into(&self, dest: &std::path::Path) -> Result<(usize, usize)> {
        let mut m = self.maint.lock();
        self.save_state(&mut m, &self.version.load_full())?;
        self.save_repeats()?;
        let dir = self.env.path(Tier::Fast, manifest::DIR);
        std::fs::create_dir_all(dest).map_err(|e| Error::io(dest, e))?;
        let (mut linked, mut copied) = (0, 0);
        let entries = std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| Error::io(&dir, e))?;
            let name = entry.file_name();
            let text = name.to_string_lossy();
            if text.ends_with(".tmp") {
                continue;
            }
            // Runs are written once; anything else (the manifest) is copied, so the
            // copy never shares a file the tracker might rewrite.
            let (from, to) = (entry.path(), dest.join(&name));
            if text.ends_with(".rlt") && crate::env::link_or_copy(&from, &to)? {
                linked += 1;
            } else {
                if !text.ends_with(".rlt") {
                    std::fs::copy(&from, &to)
                        .and_then(|_| std::fs::File::open(&to)?.sync_all())
                        .map_err(|e| Error::io(&to, e))?;
                }
                copied += 1;
            }
        }
        drop(m);
        std::fs::File::open(dest)
            .and_then(|d| d.sync_all())
            .map_err(|e| Error::io(dest, e))?;
        Ok((linked, copied))
    }

    /// True when the state changed since the last checkpoint and the engine's other
    /// writes since then reach `checkpoint_ratio` times what a checkpoint would write now,
    /// so that checkpoints stay at most about 1/`checkpoint_ratio` of the engine's writes
    /// and a phase that writes nothing else (read-only) writes nothing until close.
    fn checkpoint_due(&self) -> bool {
        if !self.dirty.load(Relaxed) {
            return false;
        }
        let since = other_writes(&self.env).saturating_sub(self.checkpoint_base.load(Relaxed));
        let ratio = self.opts.checkpoint_ratio;
        if since < ratio.saturating_mul(MANIFEST_COST) {
            return false;
        }
        let unpersisted = self.version.load().unpersisted_bytes();
        since >= ratio.saturating_mul(unpersisted + MANIFEST_COST)
    }

    /// The engine's writes by every cause but RALT, both tiers.
    fn other_writes(&self) -> u64 {
        other_writes(&self.env)
    }

    /// The hot set's size (`RaltStats::hot_set_size`), without the rest of the stats.
    pub fn hot_set_bytes(&self) -> u64 {
        self.version.load().hot_set_bytes()
    }

    /// Sizes, limits and counters.
    pub fn stats(&self) -> RaltStats {
        let (rep_reads, rep_hits, rep_bytes) = {
            let r = self.repeats.lock();
            (r.reads(), r.hits(), r.bytes())
        };
        let v = self.version.load();
        let (mut filter_bytes, mut index_bytes, mut records) = (0, 0, 0);
        for (_, f) in v.files() {
            let (fb, ib) = f.memory();
            filter_bytes += fb;
            index_bytes += ib;
            records += f.info.records;
        }
        // Accesses left by reads count once merged.
        let mut f = self.front.lock();
        self.merge_deferred(&mut f);
        let buffers = std::iter::once(&f.active).chain(f.frozen.as_deref());
        let buffer_bytes: u64 = buffers.clone().map(|b| b.bytes() as u64).sum();
        let buffered: u64 = buffers.map(|b| b.len() as u64).sum();
        let admission_bytes = self.admission_bytes.load(Relaxed);
        let stage_bytes = self.stage_bytes.load(Relaxed);
        RaltStats {
            hot_set_size: v.hot_set_bytes(),
            hot_set_limit: self.hot_limit.load(Relaxed),
            physical_size: v.record_bytes(),
            physical_limit: self.phys_limit.load(Relaxed),
            tracked_keys: records + buffered,
            memory_bytes: filter_bytes
                + index_bytes
                + buffer_bytes
                + admission_bytes
                + stage_bytes
                + rep_bytes,
            accesses: f.accesses,
            evictions: self.evictions.load(Relaxed),
            tick: f.clock.tick,
            dropped_accesses: f.dropped,
            file_bytes: v.file_bytes(),
            files: v.files().count() as u64,
            filter_bytes,
            index_bytes,
            buffer_bytes,
            buffer_capacity: self.buffer_capacity.load(Relaxed),
            evicted_keys: self.evicted_keys.load(Relaxed),
            counter_period: f.clock.epoch,
            flush_write_bytes: self.written[0].load(Relaxed),
            compaction_write_bytes: self.written[1].load(Relaxed),
            eviction_write_bytes: self.written[2].load(Relaxed),
            admission_bytes,
            admission_parked: self.parked.load(Relaxed),
            admission_credited: self.credited.load(Relaxed),
            stage_bytes,
            staged_keys: self.staged_keys.load(Relaxed),
            stage_merged: self.stage_merged.load(Relaxed),
            repeat_reads: rep_reads,
            repeat_hits: rep_hits,
            run_memory_bytes: self.mem_runs.bytes.load(Relaxed),
            run_memory_limit: self.opts.run_memory_limit,
            unpersisted_bytes: v.unpersisted_bytes(),
            checkpoints: self.checkpoints.load(Relaxed),
            checkpoint_write_bytes: self.checkpoint_written.load(Relaxed),
        }
    }
}

/// Bytes the engine wrote by every cause but RALT, on both tiers.
fn other_writes(env: &Env) -> u64 {
    env.stats().write_bytes_except(crate::env::IoCause::Ralt)
}

/// Deletes files under `ralt/` that the version does not hold (left by a crash between
/// writing a file and saving the manifest, or by a failed job).
fn remove_unreferenced(env: &Env, v: &Version) -> Result<()> {
    let dir = env.path(Tier::Fast, manifest::DIR);
    let live: std::collections::HashSet<String> =
        v.files().map(|(_, f)| run::file_name(f.number)).collect();
    let entries = std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))?;
    let mut removed = false;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(&dir, e))?;
        let Some(name) = entry
            .file_name()
            .to_str()
            .map(|n| format!("{}/{n}", manifest::DIR))
        else {
            continue;
        };
        let ours = name.ends_with(".rlt") || name.ends_with(".tmp");
        if ours && !live.contains(&name) {
            env.remove(Tier::Fast, &name)?;
            removed = true;
        }
    }
    if removed {
        manifest::sync_ralt_dir(env)?;
    }
    Ok(())
}

/// The iterator behind [`Ralt::hot_keys`].
struct HotKeys {
    merge: MergeIter,
    hi: Vec<u8>,
    done: bool,
}

impl Iterator for HotKeys {
    type Item = Result<(Vec<u8>, u32)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.merge.next_group() {
            Ok(Some(group)) => {
                // Sources are newest first: the first record has the newest value length.
                let r = &group[0].1;
                if r.key > self.hi {
                    self.done = true;
                    return None;
                }
                Some(Ok((r.key.clone(), r.meta.value_len)))
            }
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

//! RALT's user-facing options, their validation, and the internal parameters derived from
//! them (time slice, counter period, auto-tuning bounds, file and level sizes).

use crate::error::{Error, Result};

/// How RALT scores a key's accesses (HotRAP §3.2, §4.7 ablation).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum ScoringMethod {
    /// Exponential smoothing: score = sum of alpha^(t - i) over the time slices i with an
    /// access. The paper's method and the default.
    #[default]
    ExpSmoothing,
    /// Least recently used: the score is the time of the last access (bytes accessed so far).
    Lru,
    /// Multi-bit CLOCK: an access adds 1 (saturating at 2^bits - 1); every time slice takes
    /// 1 away, like a clock hand sweeping once per slice.
    Clock {
        /// Width of the counter, 1..=16.
        bits: u8,
    },
}

impl ScoringMethod {
    /// Stable code stored in the RALT manifest: records scored one way are meaningless
    /// under another.
    pub(crate) fn code(self) -> (u8, u8) {
        match self {
            ScoringMethod::ExpSmoothing => (0, 0),
            ScoringMethod::Lru => (1, 0),
            ScoringMethod::Clock { bits } => (2, bits),
        }
    }
}

/// Settings of the RALT hotness tracker.
#[derive(Clone, Debug)]
pub struct RaltOptions {
    /// Size of the fast disk budget in bytes; filled in by the engine from
    /// `Options::fd_budget`. Every size below that is "a fraction of FD" is of this.
    pub fd_budget: u64,
    /// Exponential-smoothing decay per time slice (paper: 0.999).
    pub alpha: f64,
    /// A time slice lasts `gamma * fd_budget` accessed bytes (paper: 0.1).
    pub gamma: f64,
    /// Fraction of the tracked size an eviction removes (paper: 0.1).
    pub beta: f64,
    /// Hot set size limit in HotRAP bytes; `None` = the paper's initial 50% of `fd_budget`.
    /// With `auto_tune` it is only the starting value.
    pub hot_set_limit: Option<u64>,
    /// Physical size limit of RALT's own files; `None` = the paper's initial 15% of
    /// `fd_budget`. With `auto_tune` it is only the starting value.
    pub physical_limit: Option<u64>,
    /// Tune both limits after every eviction by the paper's Algorithm 1.
    pub auto_tune: bool,
    /// Starting size of the in-memory unsorted buffer of accesses (one more may wait for
    /// its flush).
    pub buffer_bytes: usize,
    /// Largest size the buffer grows to. When at least half the records of the flushed
    /// buffers an L0 compaction merges meet another record of their key (in another
    /// buffer or in L1: the same keys come back buffer after buffer), the next buffers are
    /// twice as large;
    /// when under a tenth do, half as large (never below `buffer_bytes`). A skewed
    /// workload's recurring keys then merge in memory instead of being flushed and
    /// compacted again and again (a read-only phase over a hot set larger than the buffer
    /// wrote 40-75 MiB/s of RALT files), and a workload without repeats, where a larger
    /// buffer saves nothing, keeps the small one. A buffer never passes twice RALT's
    /// physical limit (then it holds about as many keys as RALT keeps on disk) nor, with
    /// `memory_limit`, a quarter of that. At or below `buffer_bytes` the buffer keeps that
    /// size.
    pub max_buffer_bytes: usize,
    /// Bits per key of the in-memory bloom filters of hot keys (paper: 20).
    pub bloom_bits_per_key: usize,
    /// Admission stage (default on): a flushed key seen once, and hot in no run, is not
    /// written; its access waits in a small in-memory table and is credited when the key
    /// is seen again (see the `admit` module). Off, every buffered key is written, as in
    /// the paper.
    pub admission: bool,
    /// Hot stage (default on): a flush merges the accesses of a key already hot in a run
    /// into an in-memory table instead of writing a new record, and the table is written
    /// as one run before an eviction judges scores, when the run files need its memory,
    /// and at close (see the `stage` module). It holds at most a quarter of the memory
    /// limit (without one, `max_buffer_bytes`), and only memory the run files leave free.
    /// Off, every such flushed access is written at its flush.
    pub stage: bool,
    /// Scoring method.
    pub scoring: ScoringMethod,
    /// Most bytes of memory RALT holds: its two buffers, its admission table, and the bloom
    /// filters and block indexes of its run files together with the hot stage (default
    /// `None`: bounded through `physical_limit` only). When files and stage pass the
    /// files' part (the limit less two buffers and the admission table), the stage is
    /// written out; when the files alone do, an eviction runs and lowers the physical
    /// limit in proportion; set by `Options::memory_budget`.
    pub memory_limit: Option<u64>,
    /// Most bytes of run data RALT keeps in memory instead of in files (default 4 MiB;
    /// with `Options::memory_budget`, its `tracker_runs` share; 0 keeps every run on
    /// disk). While the runs fit, flushes, compactions and evictions produce runs in
    /// memory and nothing is written until a checkpoint, which writes the runs not on disk
    /// yet as their files and then the manifest: at close, and when the engine's other
    /// writes since the last checkpoint reach `checkpoint_ratio` times what it would write.
    /// A crash loses the changes since the last checkpoint, which is hotness only (RALT
    /// never holds data). A run that does not fit is written as a file when complete, as
    /// without the option, and while any run is on disk every change of the file set saves
    /// the manifest.
    pub run_memory_limit: u64,
    /// Engine writes (every cause but RALT) per byte a checkpoint writes (default 20: RALT's
    /// checkpoints stay at most about 5% of the engine's writes; a read-only phase writes
    /// nothing until close). At least 1.
    pub checkpoint_ratio: u64,
}

impl Default for RaltOptions {
    fn default() -> Self {
        RaltOptions {
            fd_budget: 0,
            alpha: 0.999,
            gamma: 0.1,
            beta: 0.1,
            hot_set_limit: None,
            physical_limit: None,
            auto_tune: true,
            buffer_bytes: 256 << 10,
            max_buffer_bytes: 4 << 20,
            bloom_bits_per_key: 20,
            admission: true,
            stage: true,
            scoring: ScoringMethod::ExpSmoothing,
            memory_limit: None,
            run_memory_limit: 4 << 20,
            checkpoint_ratio: 20,
        }
    }
}

impl RaltOptions {
    /// Checks every field; `fd_budget` 0 is accepted here because the engine fills it in
    /// later (`Ralt::open` refuses it).
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidArgument(format!("ralt: {m}")));
        if !(self.alpha > 0.0 && self.alpha <= 1.0) {
            return bad(format!("alpha must be in (0, 1], got {}", self.alpha));
        }
        if !(self.gamma > 0.0 && self.gamma.is_finite()) {
            return bad(format!("gamma must be positive, got {}", self.gamma));
        }
        if !(self.beta > 0.0 && self.beta < 1.0) {
            return bad(format!("beta must be in (0, 1), got {}", self.beta));
        }
        if self.hot_set_limit == Some(0) {
            return bad("hot_set_limit must be positive".into());
        }
        if self.physical_limit == Some(0) {
            return bad("physical_limit must be positive".into());
        }
        if !(1024..=(1 << 30)).contains(&self.buffer_bytes) {
            return bad(format!(
                "buffer_bytes must be between 1 KiB and 1 GiB, got {}",
                self.buffer_bytes
            ));
        }
        if self.max_buffer_bytes > 1 << 30 {
            return bad(format!(
                "max_buffer_bytes must be at most 1 GiB, got {}",
                self.max_buffer_bytes
            ));
        }
        if !(1..=64).contains(&self.bloom_bits_per_key) {
            return bad(format!(
                "bloom_bits_per_key must be in 1..=64, got {}",
                self.bloom_bits_per_key
            ));
        }
        if let Some(limit) = self.memory_limit {
            if limit <= 2 * self.buffer_bytes as u64 {
                return bad(format!(
                    "memory_limit {limit} must exceed its two buffers of buffer_bytes {}",
                    self.buffer_bytes
                ));
            }
        }
        if self.checkpoint_ratio == 0 {
            return bad("checkpoint_ratio must be at least 1".into());
        }
        if let ScoringMethod::Clock { bits } = self.scoring {
            if !(1..=16).contains(&bits) {
                return bad(format!("CLOCK bits must be in 1..=16, got {bits}"));
            }
        }
        Ok(())
    }
}

/// Auto-tuning counter arithmetic is kept in tenths so that dc = 2.6 is exact.
pub(crate) const COUNTER_ONE: u8 = 10;
/// dc = 2.6 (paper §3.7).
pub(crate) const COUNTER_DC: u8 = 26;
/// cmax = 5 (paper §3.7).
pub(crate) const COUNTER_MAX: u8 = 50;

/// L0 files that trigger an L0 -> L1 compaction, once they also hold at least
/// 1/`L0_L1_RATIO` of L1's bytes (or there are `L0_MAX_FILES`): every L0 compaction rewrites
/// the L1 files it overlaps, which with RALT's random keys is all of L1, so small flushes
/// (the admission stage makes them small) must gather before they pay for that.
pub(crate) const L0_TRIGGER: usize = 4;
/// See [`L0_TRIGGER`].
pub(crate) const L0_L1_RATIO: u64 = 1;
/// Most L0 files before a compaction regardless of size (each costs `is_hot` a filter probe,
/// on background threads only). With the hot stage a flush writes few records (about 9 KB
/// per flush with 108-byte records), so 16 files triggered most L0 compactions, each
/// rewriting all of L1 for a small L0.
pub(crate) const L0_MAX_FILES: usize = 32;
/// Size ratio between adjacent levels.
pub(crate) const LEVEL_RATIO: u64 = 10;
/// Deepest level index; it never compacts further.
pub(crate) const MAX_LEVEL: usize = 6;
/// Target size of a data block (the paper uses 8 KiB; 4 KiB halves the error of
/// `range_hot_size` at its edge blocks for a little more index memory).
pub(crate) const BLOCK_SIZE: usize = 4096;
/// Sample points N of the eviction threshold search.
pub(crate) const SAMPLE_POINTS: u64 = 8192;
/// Output-level files consumed per eviction step (bounds temporary space).
pub(crate) const EVICT_STEP_FILES: usize = 4;

/// Parameters derived from the options, in bytes.
#[derive(Clone, Debug)]
pub(crate) struct Params {
    /// A time slice: gamma * FD accessed bytes.
    pub tick_bytes: u64,
    /// Counter period R = Rhs accessed bytes.
    pub decay_bytes: u64,
    /// Lower bound of the hot set limit, 0.05 * FD.
    pub lhs: u64,
    /// Upper bound of the hot set limit, 0.7 * FD.
    pub rhs: u64,
    /// Allowed HotRAP size of unstable records, 0.1 * Rhs.
    pub dhs: u64,
    pub init_hot_limit: u64,
    pub init_phys_limit: u64,
    pub file_target: u64,
    pub l1_target: u64,
}

impl Params {
    pub fn new(o: &RaltOptions) -> Params {
        let fd = o.fd_budget as f64;
        let at_least_1 = |x: f64| (x as u64).max(1);
        let rhs = at_least_1(0.7 * fd);
        let file_target = (o.buffer_bytes as u64 * 4).clamp(32 << 10, 4 << 20);
        Params {
            tick_bytes: at_least_1(o.gamma * fd),
            decay_bytes: rhs,
            lhs: at_least_1(0.05 * fd),
            rhs,
            dhs: at_least_1(0.1 * rhs as f64),
            init_hot_limit: o.hot_set_limit.unwrap_or_else(|| at_least_1(0.5 * fd)),
            init_phys_limit: o.physical_limit.unwrap_or_else(|| at_least_1(0.15 * fd)),
            file_target,
            l1_target: file_target * L0_TRIGGER as u64,
        }
    }

    /// Target size of level `level` (>= 1).
    pub fn level_target(&self, level: usize) -> u64 {
        let mut t = self.l1_target;
        for _ in 1..level {
            t = t.saturating_mul(LEVEL_RATIO);
        }
        t
    }
}

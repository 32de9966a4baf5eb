//! The hotness trackers' settings: which tracker ([`TrackerKind`]), RALT's
//! ([`RaltOptions`], [`ScoringMethod`]) and the bloom cascade's ([`BloomCascadeOptions`]),
//! with their validation. Defined here, below `crate::hot`, so that `Options` names them
//! without importing the trackers; the parameters RALT derives from them stay in
//! `hot::ralt::options`.

use crate::error::{Error, Result};

/// Which hotness tracker promotion and retention use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TrackerKind {
    /// RALT (HotRAP §3.2): scored access records in a small LSM-tree on the fast disk.
    #[default]
    Ralt,
    /// HyperDB's cascade of bloom filters: hot when seen in 3 of the last 4 windows.
    BloomCascade,
}

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
    /// With auto-tuning and exponential smoothing, how much a record's last access counts
    /// beside its score when records are ranked against the hot and eviction thresholds:
    /// each time slice of idleness divides the score by `exp(recency_weight)` for ranking
    /// (the score itself decays by `alpha` only). Not in the paper (0.0 ranks by score
    /// alone; a fixed limit always does). The default 0.7 halves it per slice: when the
    /// stable keys do not fit the hot-set limit (a hotspot that moved, while the old keys
    /// stay stable for five counter periods), the keys read lately win over keys read more
    /// often before; while they fit, every stable key is hot and nothing changes
    /// (docs/bench/hotrap.md, "The moved hotspot").
    pub recency_weight: f64,
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
    /// Most bytes of memory RALT holds: its two buffers, its admission table, its repeat
    /// stage (at most an eighth of this; see `PromotionOptions::promote_on_repeat`), and the bloom
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
            recency_weight: 0.7,
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
        if !(self.recency_weight >= 0.0 && self.recency_weight.is_finite()) {
            return bad(format!(
                "recency_weight must be finite and not negative, got {}",
                self.recency_weight
            ));
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

/// Settings of the bloom-cascade tracker.
#[derive(Clone, Debug)]
pub struct BloomCascadeOptions {
    /// Objects per window; `None`: the fast tier's capacity in bytes (filled in by the
    /// engine, see `fd_bytes`) over the mean record size seen so far (HyperDB: "the number
    /// of objects the NVMe tier holds").
    pub window_objects: Option<u64>,
    /// Bytes of the fast levels; filled in by the engine from `Options::fd_budget`.
    pub fd_bytes: u64,
    /// Record size assumed before any access was seen (key plus value bytes).
    pub initial_record_size: u64,
    /// Bits per object of each filter (HyperDB: 10, about 1% false positives).
    pub bits_per_object: usize,
    /// Sealed filters kept (HyperDB: 4).
    pub filters: usize,
    /// Sealed filters that must contain a key for it to be hot (HyperDB: 3).
    pub hot_threshold: usize,
    /// Keys kept in the hot sample that estimates `range_hot_size` (0: estimate 0).
    pub sample_keys: usize,
}

impl Default for BloomCascadeOptions {
    fn default() -> Self {
        BloomCascadeOptions {
            window_objects: None,
            fd_bytes: 0,
            initial_record_size: 1024,
            bits_per_object: 10,
            filters: 4,
            hot_threshold: 3,
            sample_keys: 1 << 16,
        }
    }
}

impl BloomCascadeOptions {
    /// Checks every field (`fd_bytes` 0 is accepted: the engine fills it in).
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidArgument(format!("bloom cascade: {m}")));
        if self.window_objects == Some(0) {
            return bad("window_objects must be positive".into());
        }
        if self.initial_record_size == 0 {
            return bad("initial_record_size must be positive".into());
        }
        if !(1..=64).contains(&self.bits_per_object) {
            return bad(format!(
                "bits_per_object must be in 1..=64, got {}",
                self.bits_per_object
            ));
        }
        if !(1..=64).contains(&self.filters) {
            return bad(format!("filters must be in 1..=64, got {}", self.filters));
        }
        if !(1..=self.filters).contains(&self.hot_threshold) {
            return bad(format!(
                "hot_threshold must be in 1..=filters ({}), got {}",
                self.filters, self.hot_threshold
            ));
        }
        Ok(())
    }
}

//! RALT's user-facing options, their validation, and the internal parameters derived from
//! them (time slice, counter period, auto-tuning bounds, file and level sizes).

pub use crate::options::{RaltOptions, ScoringMethod};

/// Auto-tuning counter arithmetic is kept in tenths (the paper's dc = 2.6 was exact in them).
pub(crate) const COUNTER_ONE: u8 = 10;
/// dc = cmax = 5, as the authors' RALT sets it (every access sets the counter to cmax), not
/// the paper's 2.6: with 2.6 and R = Rhs a key stayed stable for 1.8 fast disks of accessed
/// bytes after a lone repeat, and under zipfian the hot set stopped at the keys read twice
/// within that (69.7% of reads on the fast disk instead of 74.5%; docs/bench/hotrap.md).
pub(crate) const COUNTER_DC: u8 = 50;
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
    /// Counter period R: one fast disk of accessed bytes (the authors' RALT; the paper says
    /// Rhs).
    pub decay_bytes: u64,
    /// Lower bound of the hot set limit, 0.05 * FD.
    pub lhs: u64,
    /// Upper bound of the hot set limit, 0.7 * FD.
    pub rhs: u64,
    /// Allowed HotRAP size of unstable records in the hot set, 0.1 * Rhs.
    pub dhs: u64,
    /// HotRAP bytes of single-access keys RALT remembers while they wait for a second
    /// access: one fast disk. It sizes the admission table and the part of the physical
    /// limit auto-tuning leaves to unstable records (the paper's r * Dhs, a tenth of this:
    /// a key read once was forgotten after 0.07 fast disks of other keys, and under
    /// zipfian few keys but the hottest were read twice within that; the authors' RALT
    /// keeps a fixed physical limit of about 0.8 fast disks of 1 KiB records' keys).
    pub unstable_window: u64,
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
            decay_bytes: at_least_1(fd),
            lhs: at_least_1(0.05 * fd),
            rhs,
            dhs: at_least_1(0.1 * rhs as f64),
            unstable_window: at_least_1(fd),
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

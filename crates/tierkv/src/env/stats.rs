//! I/O counters by tier and cause. Lock-free (relaxed atomics): counters are statistics,
//! never used to decide correctness.

use super::Tier;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Why the engine touched a disk. Every read and write is charged to exactly one cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum IoCause {
    /// Point lookups (`get`).
    #[default]
    UserGet,
    /// Iterators and scans.
    UserScan,
    /// Memtable flush to L0.
    Flush,
    /// Compaction reads and writes.
    Compaction,
    /// Write-ahead log.
    Wal,
    /// Manifest and CURRENT.
    Manifest,
    /// Promotion of hot records from the slow tier.
    Promotion,
    /// The RALT hotness tracker.
    Ralt,
    /// Recovery at open (WAL replay).
    Recovery,
    /// Integrity checks (`tierkv check`) and other tools.
    Check,
}

impl IoCause {
    /// Every cause, in reporting order.
    pub const ALL: [IoCause; 10] = [
        IoCause::UserGet,
        IoCause::UserScan,
        IoCause::Flush,
        IoCause::Compaction,
        IoCause::Wal,
        IoCause::Manifest,
        IoCause::Promotion,
        IoCause::Ralt,
        IoCause::Recovery,
        IoCause::Check,
    ];

    /// Background work: what the engine writes and reads on its own (flushes,
    /// compactions, promotion, the hotness tracker), as opposed to the foreground (gets,
    /// scans, the WAL every write appends to) and to maintenance (recovery, checks,
    /// manifest). Write amplification by tier counts these.
    pub const BACKGROUND: [IoCause; 4] = [
        IoCause::Flush,
        IoCause::Compaction,
        IoCause::Promotion,
        IoCause::Ralt,
    ];

    /// Stable snake_case name used in stats output.
    pub fn name(self) -> &'static str {
        match self {
            IoCause::UserGet => "get",
            IoCause::UserScan => "scan",
            IoCause::Flush => "flush",
            IoCause::Compaction => "compaction",
            IoCause::Wal => "wal",
            IoCause::Manifest => "manifest",
            IoCause::Promotion => "promotion",
            IoCause::Ralt => "ralt",
            IoCause::Recovery => "recovery",
            IoCause::Check => "check",
        }
    }

    #[allow(clippy::expect_used, reason = "IoCause::ALL lists every cause")]
    fn index(self) -> usize {
        IoCause::ALL
            .iter()
            .position(|c| *c == self)
            .expect("listed")
    }
}

const CAUSES: usize = IoCause::ALL.len();

#[derive(Default)]
struct Counters {
    read_bytes: AtomicU64,
    read_ops: AtomicU64,
    write_bytes: AtomicU64,
    write_ops: AtomicU64,
}

/// Live counters; take a [`IoStatsSnapshot`] to read them.
#[derive(Default)]
pub struct IoStats {
    counters: [[Counters; CAUSES]; 2],
}

impl IoStats {
    pub(crate) fn record_read(&self, tier: Tier, cause: IoCause, bytes: u64) {
        let c = &self.counters[tier.index()][cause.index()];
        c.read_bytes.fetch_add(bytes, Relaxed);
        c.read_ops.fetch_add(1, Relaxed);
    }

    pub(crate) fn record_write(&self, tier: Tier, cause: IoCause, bytes: u64) {
        let c = &self.counters[tier.index()][cause.index()];
        c.write_bytes.fetch_add(bytes, Relaxed);
        c.write_ops.fetch_add(1, Relaxed);
    }

    /// Bytes written on both tiers by every cause but `except` (RALT's checkpoint trigger
    /// compares its own writes with the rest of the engine's).
    pub fn write_bytes_except(&self, except: IoCause) -> u64 {
        let skip = except.index();
        self.counters
            .iter()
            .flat_map(|tier| tier.iter().enumerate())
            .filter(|(i, _)| *i != skip)
            .map(|(_, c)| c.write_bytes.load(Relaxed))
            .sum()
    }

    /// A consistent-enough copy of every counter.
    pub fn snapshot(&self) -> IoStatsSnapshot {
        let tier = |t: usize| TierIo {
            causes: IoCause::ALL
                .iter()
                .map(|&cause| {
                    let c = &self.counters[t][cause.index()];
                    CauseIo {
                        cause,
                        read_bytes: c.read_bytes.load(Relaxed),
                        read_ops: c.read_ops.load(Relaxed),
                        write_bytes: c.write_bytes.load(Relaxed),
                        write_ops: c.write_ops.load(Relaxed),
                    }
                })
                .collect(),
        };
        IoStatsSnapshot {
            fast: tier(0),
            slow: tier(1),
        }
    }
}

/// Counters of one cause on one tier.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CauseIo {
    /// The cause.
    pub cause: IoCause,
    /// Bytes read.
    pub read_bytes: u64,
    /// Read operations (one per `pread` of a block or file).
    pub read_ops: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Write operations (one per `write` syscall).
    pub write_ops: u64,
}

/// Counters of one tier.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TierIo {
    /// One entry per cause, in [`IoCause::ALL`] order.
    pub causes: Vec<CauseIo>,
}

impl TierIo {
    /// Counters of one cause.
    pub fn cause(&self, cause: IoCause) -> CauseIo {
        self.causes
            .iter()
            .copied()
            .find(|c| c.cause == cause)
            .unwrap_or(CauseIo {
                cause,
                ..Default::default()
            })
    }

    /// Sum over all causes.
    pub fn total(&self) -> CauseIo {
        self.sum_where(|_| true)
    }

    /// Sum over the causes listed.
    pub fn sum(&self, causes: &[IoCause]) -> CauseIo {
        self.sum_where(|c| causes.contains(&c))
    }

    fn sum_where(&self, keep: impl Fn(IoCause) -> bool) -> CauseIo {
        let kept = self.causes.iter().filter(|c| keep(c.cause));
        kept.fold(CauseIo::default(), |a, c| CauseIo {
            cause: a.cause,
            read_bytes: a.read_bytes + c.read_bytes,
            read_ops: a.read_ops + c.read_ops,
            write_bytes: a.write_bytes + c.write_bytes,
            write_ops: a.write_ops + c.write_ops,
        })
    }
}

/// A copy of all I/O counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoStatsSnapshot {
    /// Fast tier.
    pub fast: TierIo,
    /// Slow tier.
    pub slow: TierIo,
}

impl IoStatsSnapshot {
    /// Counters of one tier.
    pub fn tier(&self, tier: Tier) -> &TierIo {
        match tier {
            Tier::Fast => &self.fast,
            Tier::Slow => &self.slow,
        }
    }
}

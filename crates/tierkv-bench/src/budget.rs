//! The figures for F2's larger-than-memory questions: the process's memory against the
//! memory budget (peak RSS, the engine's own accounting), and I/O per byte of user data by
//! tier (F2's Table 2: bytes read from disk per byte users read, bytes written per byte
//! users wrote). Computed from RSS readings and store counters; [`crate::results`] holds
//! them per system and [`crate::report`] renders their tables.

use serde::Serialize;

use crate::rss::Rss;
use crate::scale::Config;
use crate::store::Counters;

/// One system's memory during its run phase.
#[derive(Clone, Debug, Default, Serialize)]
pub struct MemoryUse {
    /// The memory budget it was given (`None`: none).
    pub budget: Option<u64>,
    /// Resident set size just before the store was opened for the run (the bench's own
    /// memory: the operation plan, value buffer, histograms, code).
    pub rss_before_bytes: Option<u64>,
    /// Peak resident set size from the open until the store was closed.
    pub rss_peak_bytes: Option<u64>,
    /// `rss_peak_bytes - rss_before_bytes`: what the store and the client threads added.
    pub rss_added_bytes: Option<u64>,
    /// What of it the budget does not cover: `rss_added_bytes - budget` (0 when within).
    pub overhead_bytes: Option<u64>,
    /// Anonymous resident memory (heap and stacks, without code pages) before the open.
    pub anon_before_bytes: Option<u64>,
    /// The highest anonymous resident memory sampled during the run (once per timeline
    /// interval, so a short spike can be missed).
    pub anon_peak_bytes: Option<u64>,
    /// The highest total of the engine's budgeted components sampled during the run
    /// (`DbStats::memory.total_bytes`; tierkv only).
    pub engine_peak_bytes: Option<u64>,
}

impl MemoryUse {
    /// From the RSS readings around the run and the timeline's engine samples.
    pub fn new(
        budget: Option<u64>,
        before: Option<Rss>,
        peak: Option<Rss>,
        anon_peak_bytes: Option<u64>,
        engine_peak_bytes: Option<u64>,
    ) -> MemoryUse {
        let rss_before_bytes = before.map(|r| r.current);
        let rss_peak_bytes = peak.map(|r| r.peak.max(r.current));
        let rss_added_bytes = rss_peak_bytes
            .zip(rss_before_bytes)
            .map(|(p, b)| p.saturating_sub(b));
        MemoryUse {
            budget,
            rss_before_bytes,
            rss_peak_bytes,
            rss_added_bytes,
            overhead_bytes: rss_added_bytes
                .zip(budget)
                .map(|(a, b)| a.saturating_sub(b)),
            anon_before_bytes: before.map(|r| r.anon),
            anon_peak_bytes,
            engine_peak_bytes,
        }
    }
}

/// Disk bytes per byte of user data over the run phase and the settling after it, like
/// F2's Table 2: read amplification is bytes read from disk (every cause: gets,
/// compactions, promotion, tracking, recovery) per key-and-value byte that reads
/// (including read-modify-writes) returned; write amplification is bytes written (WAL,
/// flushes, compactions, promotion, tracking) per byte that updates, inserts and
/// read-modify-writes wrote.
#[derive(Clone, Debug, Default, Serialize)]
pub struct IoAmplification {
    /// Key and value bytes of the records reads addressed.
    pub user_read_bytes: u64,
    /// Key and value bytes writes wrote.
    pub user_write_bytes: u64,
    /// Fast-disk bytes read per user byte read.
    pub fd_read_amp: Option<f64>,
    /// Slow-disk bytes read per user byte read.
    pub sd_read_amp: Option<f64>,
    /// Both disks.
    pub read_amp: Option<f64>,
    /// Fast-disk bytes written per user byte written.
    pub fd_write_amp: Option<f64>,
    /// Slow-disk bytes written per user byte written.
    pub sd_write_amp: Option<f64>,
    /// Both disks.
    pub write_amp: Option<f64>,
}

impl IoAmplification {
    /// From the counter deltas `c` of a run (and its settling) with `reads` reads and
    /// `writes` writes; `None` for a trace (records differ in size) or a system that counts
    /// no disk bytes. Per-tier figures only for systems that split them by tier.
    pub fn of(cfg: &Config, c: &Counters, reads: u64, writes: u64) -> Option<IoAmplification> {
        if cfg.trace.is_some() {
            return None;
        }
        let (read, write) = (c.disk_read_bytes?, c.disk_write_bytes?);
        let user_read_bytes = reads * cfg.record_size;
        let user_write_bytes = writes * cfg.record_size;
        let per = |n: Option<u64>, d: u64| Some(n? as f64 / (d > 0).then_some(d)? as f64);
        Some(IoAmplification {
            user_read_bytes,
            user_write_bytes,
            fd_read_amp: per(c.fd_read_bytes, user_read_bytes),
            sd_read_amp: per(c.sd_read_bytes, user_read_bytes),
            read_amp: per(Some(read), user_read_bytes),
            fd_write_amp: per(c.fd_write_bytes, user_write_bytes),
            sd_write_amp: per(c.sd_write_bytes, user_write_bytes),
            write_amp: per(Some(write), user_write_bytes),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_use_against_the_budget() {
        let m = MemoryUse::new(
            Some(100),
            Some(Rss {
                current: 1000,
                peak: 1200,
                anon: 900,
            }),
            Some(Rss {
                current: 1050,
                peak: 1130,
                anon: 950,
            }),
            Some(960),
            Some(90),
        );
        assert_eq!(m.rss_added_bytes, Some(130));
        assert_eq!(m.overhead_bytes, Some(30));
        let within = MemoryUse::new(
            Some(500),
            Some(Rss {
                current: 1000,
                peak: 1000,
                anon: 900,
            }),
            Some(Rss {
                current: 1000,
                peak: 1130,
                anon: 900,
            }),
            None,
            None,
        );
        assert_eq!(within.overhead_bytes, Some(0));
        assert_eq!(m.anon_before_bytes, Some(900));
        assert_eq!(
            MemoryUse::new(None, None, None, None, None).rss_added_bytes,
            None
        );
    }

    /// Per-tier figures where the system splits its I/O by tier; totals for a system that
    /// only counts both disks together (RocksDB); nothing for one that counts neither.
    #[test]
    fn amplification_per_tier_and_in_total() {
        use crate::args::BenchArgs;
        let cfg = Config::from_args(&BenchArgs {
            scale: "smoke".into(),
            record_size: Some(100),
            out: "unused".into(),
            ..Default::default()
        })
        .unwrap();
        let tiered = IoAmplification::of(
            &cfg,
            &Counters {
                fd_read_bytes: Some(1000),
                sd_read_bytes: Some(3000),
                fd_write_bytes: Some(2000),
                sd_write_bytes: Some(500),
                disk_read_bytes: Some(4000),
                disk_write_bytes: Some(2500),
                ..Default::default()
            },
            20,
            10,
        )
        .unwrap();
        assert_eq!(
            (tiered.user_read_bytes, tiered.user_write_bytes),
            (2000, 1000)
        );
        assert_eq!(tiered.fd_read_amp, Some(0.5));
        assert_eq!(tiered.sd_read_amp, Some(1.5));
        assert_eq!(tiered.read_amp, Some(2.0));
        assert_eq!(tiered.fd_write_amp, Some(2.0));
        assert_eq!(tiered.write_amp, Some(2.5));
        let totals = IoAmplification::of(
            &cfg,
            &Counters {
                disk_read_bytes: Some(6000),
                disk_write_bytes: Some(0),
                ..Default::default()
            },
            20,
            10,
        )
        .unwrap();
        assert_eq!((totals.fd_read_amp, totals.sd_write_amp), (None, None));
        assert_eq!((totals.read_amp, totals.write_amp), (Some(3.0), Some(0.0)));
        assert!(IoAmplification::of(&cfg, &Counters::default(), 20, 10).is_none());
    }
}

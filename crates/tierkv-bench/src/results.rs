//! What a run measured and what `results.json` holds: the raw measurements of one run phase
//! ([`RunMeasure`], the per-interval [`TimelinePoint`]s, per-phase throughput), the figures
//! computed from them per system ([`SystemResult`]: throughput over the final 10%, FD hit
//! rate, latency percentiles, per-tier I/O, promotion, background traffic) and the whole
//! [`BenchResults`]. Plain data and arithmetic: the runner fills it in, [`crate::report`]
//! and [`crate::chart`] render it. Field names are stable: scripts and CI
//! (`.ci/check_bench.py`) rely on them.

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::budget::{IoAmplification, MemoryUse};
use crate::scale::Config;
use crate::store::Counters;
use crate::systems::System;
use crate::workload::OpKind;

/// Version of the `results.json` layout.
pub const RESULTS_VERSION: u32 = 1;

/// One point of a system's timeline: what happened during one interval.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TimelinePoint {
    /// End of the interval, seconds since the run phase started.
    pub t_s: f64,
    /// Length of the interval in seconds (the last one may be shorter).
    pub interval_s: f64,
    /// Operations per second during the interval.
    pub ops_per_sec: f64,
    /// FD hit rate of the interval's gets (`None` without gets).
    pub fd_hit_rate: Option<f64>,
    /// Bytes read from the fast disk during the interval.
    pub fd_read_bytes: Option<u64>,
    /// Bytes written to the fast disk during the interval.
    pub fd_write_bytes: Option<u64>,
    /// Of `fd_write_bytes`, background work's (flush, compaction, promotion, tracker).
    pub fd_bg_write_bytes: Option<u64>,
    /// Of `fd_bg_write_bytes`, the hotness tracker's.
    pub fd_tracker_write_bytes: Option<u64>,
    /// Bytes read from the slow disk during the interval.
    pub sd_read_bytes: Option<u64>,
    /// Bytes written to the slow disk during the interval.
    pub sd_write_bytes: Option<u64>,
    /// Phase of a phased distribution at the end of the interval.
    pub phase: usize,
    /// Bytes of the KV cache at the end of the interval (`None`: not tierkv).
    pub cache_kv_bytes: Option<u64>,
    /// Bytes of the KP cache at the end of the interval.
    pub cache_kp_bytes: Option<u64>,
    /// Bytes of the block cache at the end of the interval.
    pub cache_block_bytes: Option<u64>,
    /// Share of the interval's point lookups answered by the KV or KP cache.
    pub point_cache_hit_rate: Option<f64>,
    /// Share of the interval's block lookups answered by the block cache.
    pub block_cache_hit_rate: Option<f64>,
    /// Bytes compactions read from and wrote to the slow disk during the interval.
    pub sd_compaction_bytes: Option<u64>,
    /// Bytes compactions wrote below their output level during the interval (preemptive
    /// pushdown).
    pub pushdown_bytes: Option<u64>,
    /// Bytes the engine's budgeted components held at the end of the interval.
    pub engine_memory_bytes: Option<u64>,
    /// The slow tier's space amplification at the end of the interval (table bytes over
    /// valid bytes; `None`: not tierkv).
    pub slow_tier_space_amp: Option<f64>,
    /// The process's resident set size at the end of the interval.
    pub rss_bytes: Option<u64>,
    /// Of it, anonymous memory (heap and stacks).
    pub rss_anon_bytes: Option<u64>,
    /// The process's CPU time during the interval over its length: cores busy on average
    /// (client threads and the engine's background threads together).
    pub cpu_cores: Option<f64>,
}

impl TimelinePoint {
    /// The point for an interval of `dt` seconds ending at `t_s` with `ops` operations and
    /// the counters' deltas `d`.
    pub fn between(t_s: f64, dt: f64, ops: u64, d: &Counters, phase: usize) -> TimelinePoint {
        TimelinePoint {
            t_s,
            interval_s: dt,
            ops_per_sec: if dt > 0.0 { ops as f64 / dt } else { 0.0 },
            fd_hit_rate: d.fd_hit_rate(),
            fd_read_bytes: d.fd_read_bytes,
            fd_write_bytes: d.fd_write_bytes,
            fd_bg_write_bytes: d.bg_tier_bytes.map(|t| t[1]),
            fd_tracker_write_bytes: d.fd_tracker_write_bytes,
            sd_read_bytes: d.sd_read_bytes,
            sd_write_bytes: d.sd_write_bytes,
            phase,
            cache_kv_bytes: d.cache_bytes.map(|c| c[0]),
            cache_kp_bytes: d.cache_bytes.map(|c| c[1]),
            cache_block_bytes: d.cache_bytes.map(|c| c[2]),
            point_cache_hit_rate: d
                .cache_hits
                .filter(|h| h[3] > 0)
                .map(|h| (h[0] + h[1]) as f64 / h[3] as f64),
            block_cache_hit_rate: d
                .cache_hits
                .filter(|h| h[4] > 0)
                .map(|h| h[2] as f64 / h[4] as f64),
            sd_compaction_bytes: d.sd_compaction_bytes,
            pushdown_bytes: d.pushdown_bytes,
            engine_memory_bytes: d.memory_bytes,
            slow_tier_space_amp: d.slow_tier_space_amp,
            rss_bytes: None,
            rss_anon_bytes: None,
            cpu_cores: None,
        }
    }
}

/// Throughput of one phase of a phased workload (the whole run is one phase otherwise).
#[derive(Clone, Debug, Serialize)]
pub struct PhaseResult {
    /// Phase index.
    pub phase: usize,
    /// Operations in the phase.
    pub ops: u64,
    /// Operations per second over the phase.
    pub ops_per_sec: f64,
    /// Operations per second over the phase's second half (after adaptive caches settle).
    pub second_half_ops_per_sec: f64,
    /// Disk reads gets and scans issued per operation over the phase (`None`: the system
    /// does not count them).
    pub read_ios_per_op: Option<f64>,
    /// Same, over the phase's second half.
    pub second_half_read_ios_per_op: Option<f64>,
    /// The climb: operations from the phase's start to the end of its first timeline
    /// interval whose FD hit rate reached [`CLIMB_HIT_RATE`] (`None`: none did, or the
    /// system reports no hit rate).
    pub ops_to_climb: Option<u64>,
    /// FD hit rate over the phase's operations from 45% to 55% of it: its midpoint (issue
    /// 46), from the timeline (`hit_rate_within`; `None`: the system reports no hit rate).
    pub fd_hit_mid: Option<f64>,
    /// FD hit rate over the phase's last tenth of operations.
    pub fd_hit_end: Option<f64>,
}

/// The FD hit rate a phase's climb is measured to (issue 46: 90% within the first 15% of
/// the default run's operations).
pub const CLIMB_HIT_RATE: f64 = 0.9;

/// Operations from the start of each of `phases` phases to the end of its first interval
/// with an FD hit rate of at least `rate` (intervals are attributed to the phase they end
/// in; operations are counted from the intervals' rates and lengths).
pub fn ops_to_hit_rate(timeline: &[TimelinePoint], phases: usize, rate: f64) -> Vec<Option<u64>> {
    let mut out = vec![None; phases];
    let mut ops_in_phase = vec![0.0f64; phases];
    for p in timeline {
        let i = p.phase;
        if i >= phases {
            continue;
        }
        ops_in_phase[i] += p.ops_per_sec * p.interval_s;
        if out[i].is_none() && p.fd_hit_rate.is_some_and(|h| h >= rate) {
            out[i] = Some(ops_in_phase[i].round() as u64);
        }
    }
    out
}

/// The FD hit rate of each of `phases` phases over the operations from `lo` to `hi`
/// (fractions of the phase's operations in the timeline): its intervals weighted by the
/// operations each has inside the window. Intervals are attributed to the phase they end
/// in, their operations spread evenly over them; so a phase's positions are counted over
/// the intervals it has (the one across its end belongs to the next phase), and its last
/// tenth ends where its last interval does.
pub fn hit_rate_within(
    timeline: &[TimelinePoint],
    phases: usize,
    lo: f64,
    hi: f64,
) -> Vec<Option<f64>> {
    let ops = |p: &TimelinePoint| p.ops_per_sec * p.interval_s;
    let mut total = vec![0.0f64; phases];
    for p in timeline.iter().filter(|p| p.phase < phases) {
        total[p.phase] += ops(p);
    }
    let (mut done, mut hits, mut weight) =
        (vec![0.0; phases], vec![0.0; phases], vec![0.0; phases]);
    for p in timeline.iter().filter(|p| p.phase < phases) {
        let i = p.phase;
        let (start, end) = (done[i], done[i] + ops(p));
        done[i] = end;
        let inside = (end.min(hi * total[i]) - start.max(lo * total[i])).max(0.0);
        if let Some(h) = p.fd_hit_rate.filter(|_| inside > 0.0) {
            hits[i] += h * inside;
            weight[i] += inside;
        }
    }
    (0..phases)
        .map(|i| (weight[i] > 0.0).then(|| hits[i] / weight[i]))
        .collect()
}

/// Background I/O (flushes, compactions, promotion, hotness tracking; not the WAL) caused by
/// the run phase's writes, against what users wrote: write amplification by tier. Counted
/// from the start of the run phase until background work settled after it, so compaction
/// debt left at the end of the run (levels over their targets) is paid and counted, not
/// hidden; `run_phase_write_bytes` is what was written while the operations ran.
#[derive(Clone, Debug, Default, Serialize)]
pub struct BackgroundTraffic {
    /// Key and value bytes users wrote.
    pub user_bytes_written: u64,
    /// Background bytes written, all tiers, run phase and settling.
    pub write_bytes: u64,
    /// Of which while the operations ran.
    pub run_phase_write_bytes: u64,
    /// Seconds background work took to settle after the last operation.
    pub settle_seconds: Option<f64>,
    /// `write_bytes / user_bytes_written`.
    pub write_amp: Option<f64>,
    /// Background bytes read from the fast disk.
    pub fd_read_bytes: Option<u64>,
    /// Background bytes written to the fast disk.
    pub fd_write_bytes: Option<u64>,
    /// Background bytes read from the slow disk.
    pub sd_read_bytes: Option<u64>,
    /// Background bytes written to the slow disk.
    pub sd_write_bytes: Option<u64>,
    /// Fast-disk background writes per user byte written.
    pub fd_write_amp: Option<f64>,
    /// Slow-disk background writes per user byte written.
    pub sd_write_amp: Option<f64>,
    /// Fast-disk background reads per user byte written.
    pub fd_read_amp: Option<f64>,
    /// Slow-disk background reads per user byte written.
    pub sd_read_amp: Option<f64>,
    /// Data-block bytes compactions copied as stored (block reuse).
    pub reused_block_bytes: Option<u64>,
    /// Data-block bytes compactions encoded anew.
    pub rewritten_block_bytes: Option<u64>,
    /// Mean slow-disk bandwidth (reads plus writes) compactions used, MiB/s.
    pub sd_compaction_mib_s: Option<f64>,
    /// The highest interval's slow-disk compaction bandwidth, MiB/s.
    pub sd_compaction_peak_mib_s: Option<f64>,
}

impl BackgroundTraffic {
    /// From the counter deltas of the run phase and of the run phase plus settling (the
    /// latter `None` if not settled); `None` when the system cannot tell.
    pub fn of(m: &RunMeasure) -> Option<Self> {
        let (run, seconds, timeline) = (&m.run, m.run_seconds, &m.timeline);
        let all = m.settled.as_ref().unwrap_or(run);
        let user = run.user_bytes_written?;
        let write_bytes = all.bg_write_bytes?;
        let per_user = |b: Option<u64>| b.filter(|_| user > 0).map(|b| b as f64 / user as f64);
        let tier = |i: usize| all.bg_tier_bytes.map(|t| t[i]);
        let mib = (1u64 << 20) as f64;
        Some(BackgroundTraffic {
            user_bytes_written: user,
            write_bytes,
            run_phase_write_bytes: run.bg_write_bytes?,
            settle_seconds: m.settled.as_ref().map(|_| m.settle_seconds),
            write_amp: per_user(Some(write_bytes)),
            fd_read_bytes: tier(0),
            fd_write_bytes: tier(1),
            sd_read_bytes: tier(2),
            sd_write_bytes: tier(3),
            fd_read_amp: per_user(tier(0)),
            fd_write_amp: per_user(tier(1)),
            sd_read_amp: per_user(tier(2)),
            sd_write_amp: per_user(tier(3)),
            reused_block_bytes: all.block_bytes.map(|b| b[0]),
            rewritten_block_bytes: all.block_bytes.map(|b| b[1]),
            sd_compaction_mib_s: run
                .sd_compaction_bytes
                .filter(|_| seconds > 0.0)
                .map(|b| b as f64 / mib / seconds),
            sd_compaction_peak_mib_s: timeline
                .iter()
                .filter(|p| p.interval_s > 0.0)
                .filter_map(|p| p.sd_compaction_bytes.map(|b| b as f64 / mib / p.interval_s))
                .reduce(f64::max),
        })
    }
}

/// Raw measurements of one run phase, turned into a [`SystemResult`].
pub struct RunMeasure {
    /// Operations in the run.
    pub total_ops: u64,
    /// Operations in the final 10%.
    pub final_ops: u64,
    /// Seconds of the whole run phase.
    pub run_seconds: f64,
    /// Seconds of the final 10%.
    pub final_seconds: f64,
    /// Counter deltas over the run phase.
    pub run: Counters,
    /// Counter deltas over the final 10%.
    pub final_window: Counters,
    /// Latency of every operation, in nanoseconds.
    pub hist: Histogram<u64>,
    /// The same by kind of operation.
    pub by_kind: Vec<(OpKind, Histogram<u64>)>,
    /// One-at-a-time gets that read no slow-tier file, and those that did.
    pub gets_by_tier: [Histogram<u64>; 2],
    /// Reads that found their key.
    pub reads_found: u64,
    /// Reads that did not.
    pub reads_missing: u64,
    /// Writes: updates, inserts, deletes and read-modify-writes.
    pub writes: u64,
    /// The timeline.
    pub timeline: Vec<TimelinePoint>,
    /// Per-phase throughput.
    pub phases: Vec<PhaseResult>,
    /// Counter deltas from the start of the run phase until background work settled after
    /// it (`None`: not settled).
    pub settled: Option<Counters>,
    /// Seconds the settling took.
    pub settle_seconds: f64,
    /// CPU seconds the process used during the run phase (`None`: not measurable here).
    pub cpu_seconds: Option<f64>,
    /// What the slow tier's own block device completed during the run phase (`None`: the
    /// tiers share a device, or its counters are not readable; `crate::blockdev`).
    pub slow_device: Option<crate::blockdev::DeviceIos>,
}

/// The latency of one kind of operation over the whole run.
#[derive(Clone, Debug, Serialize)]
pub struct OpLatency {
    /// The kind ([`OpKind::name`]).
    pub op: &'static str,
    /// Operations of the kind.
    pub ops: u64,
    /// Median latency, microseconds.
    pub p50_us: f64,
    /// 99th percentile latency, microseconds.
    pub p99_us: f64,
    /// 99.9th percentile latency, microseconds.
    pub p999_us: f64,
    /// Largest latency, microseconds.
    pub max_us: f64,
    /// Mean latency, microseconds.
    pub mean_us: f64,
}

impl OpLatency {
    fn of(kind: OpKind, h: &Histogram<u64>) -> OpLatency {
        Self::named(kind.name(), h)
    }

    fn named(op: &'static str, h: &Histogram<u64>) -> OpLatency {
        let us = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
        OpLatency {
            op,
            ops: h.len(),
            p50_us: us(0.5),
            p99_us: us(0.99),
            p999_us: us(0.999),
            max_us: h.max() as f64 / 1000.0,
            mean_us: h.mean() / 1000.0,
        }
    }
}

/// [`SystemResult::get_latency_by_tier`]'s two rows.
const GETS_WITHOUT_SLOW_READ: &str = "get, no slow-disk read";
const GETS_WITH_SLOW_READ: &str = "get, slow-disk read";

/// Everything reported about one system. Byte and hit-rate fields are `None` (JSON `null`)
/// only when the system cannot measure them; they are then listed in `unavailable`.
#[derive(Clone, Debug, Serialize)]
pub struct SystemResult {
    /// System name.
    pub name: String,
    /// Seconds the load phase took (shared loads are counted once per system).
    pub load_seconds: f64,
    /// Seconds the run phase took.
    pub run_seconds: f64,
    /// Operations in the run phase.
    pub ops: u64,
    /// Operations per second over the final 10% of the run phase.
    pub throughput_ops: f64,
    /// Operations per second over the whole run phase.
    pub throughput_run_ops: f64,
    /// CPU the whole process (client threads and the store's background work) used per
    /// operation over the run phase, in microseconds (`None`: not measurable here).
    pub cpu_us_per_op: Option<f64>,
    /// `throughput_ops` relative to the first system's.
    pub ratio: f64,
    /// FD hit rate of gets over the final 10% of the run phase.
    pub fd_hit_rate: Option<f64>,
    /// FD hit rate of gets over the whole run phase.
    pub fd_hit_rate_run: Option<f64>,
    /// Median operation latency, microseconds.
    pub p50_us: f64,
    /// 99th percentile latency, microseconds.
    pub p99_us: f64,
    /// 99.9th percentile latency, microseconds.
    pub p999_us: f64,
    /// Largest latency, microseconds.
    pub max_us: f64,
    /// Latency by kind of operation (the kinds the run had), over the whole run.
    pub latency_by_op: Vec<OpLatency>,
    /// Latency of the gets that read no slow-disk file and of those that did, over the
    /// whole run (tierkv systems, one get at a time; empty otherwise): where the mean
    /// latency of a get, and so a 16-thread run's throughput, goes.
    pub get_latency_by_tier: Vec<OpLatency>,
    /// Mean latency, microseconds.
    pub mean_us: f64,
    /// Bytes read from the fast disk during the run phase.
    pub fd_read_bytes: Option<u64>,
    /// Bytes written to the fast disk during the run phase.
    pub fd_write_bytes: Option<u64>,
    /// Bytes read from the slow disk during the run phase.
    pub sd_read_bytes: Option<u64>,
    /// Bytes written to the slow disk during the run phase.
    pub sd_write_bytes: Option<u64>,
    /// Read I/Os on the slow disk during the run phase.
    pub sd_read_ops: Option<u64>,
    /// Write I/Os on the slow disk during the run phase.
    pub sd_write_ops: Option<u64>,
    /// Bytes promoted to the fast disk (both pathways) during the run phase.
    pub promoted_bytes: Option<u64>,
    /// Of which by flush (the checker).
    pub promoted_by_flush_bytes: Option<u64>,
    /// Of which by compaction.
    pub promoted_by_compaction_bytes: Option<u64>,
    /// Bytes retained on the fast disk by compactions during the run phase.
    pub retained_bytes: Option<u64>,
    /// Slow-disk reads per operation over the final 10%.
    pub sd_reads_per_op: Option<f64>,
    /// Slow-disk I/Os (reads and writes: both draw on the device's IOPS) per operation over
    /// the final 10%.
    pub sd_ios_per_op: Option<f64>,
    /// Read requests the slow tier's block device completed per operation over the whole
    /// run phase, for every system alike (`None`: no device of its own; `crate::blockdev`).
    pub sd_device_reads_per_op: Option<f64>,
    /// Write requests, likewise.
    pub sd_device_writes_per_op: Option<f64>,
    /// The physical bound over the final 10%: the slow disk's IOPS limit divided by its I/Os
    /// per operation (and likewise for bandwidth), for a throttled slow disk.
    pub sd_bound_ops: Option<f64>,
    /// Reads that found their key.
    pub reads_found: u64,
    /// Reads that did not (inserts of other threads not yet visible, trace misses).
    pub reads_missing: u64,
    /// Size of the hot set the hotness tracker (RALT) holds at the end of the run.
    pub ralt_hot_set_bytes: Option<u64>,
    /// Its current limit (auto-tuned).
    pub ralt_hot_set_limit: Option<u64>,
    /// Physical size of RALT's access records at the end of the run.
    pub ralt_physical_bytes: Option<u64>,
    /// Its current limit.
    pub ralt_physical_limit: Option<u64>,
    /// Background I/O and write amplification by tier over the run phase.
    pub background: Option<BackgroundTraffic>,
    /// Memory during the run phase against the memory budget (set by the runner).
    pub memory: Option<MemoryUse>,
    /// Disk bytes per byte of user data by tier (F2's Table 2).
    pub io_amp: Option<IoAmplification>,
    /// Fields this system cannot measure.
    pub unavailable: Vec<&'static str>,
    /// Per-interval timeline of the run phase.
    pub timeline: Vec<TimelinePoint>,
    /// Throughput of each phase (one entry when the workload is not phased).
    pub phases: Vec<PhaseResult>,
    /// The engine's own statistics at the end of the run.
    pub engine_stats: serde_json::Value,
}

impl SystemResult {
    /// Computes the reported figures of one run.
    pub fn new(cfg: &Config, system: System, mut m: RunMeasure) -> SystemResult {
        let phases = with_climbs(std::mem::take(&mut m.phases), &m.timeline);
        let us = |q: f64| m.hist.value_at_quantile(q) as f64 / 1000.0;
        let f = &m.final_window;
        let per_op = |x: Option<u64>| {
            x.filter(|_| m.final_ops > 0)
                .map(|x| x as f64 / m.final_ops as f64)
        };
        // The slow device's own counts cover the whole run phase.
        let device = m.slow_device.filter(|_| m.total_ops > 0);
        let per_run_op = |x: fn(&crate::blockdev::DeviceIos) -> u64| {
            device.map(|d| x(&d) as f64 / m.total_ops as f64)
        };
        let sd_device_reads_per_op = per_run_op(|d| d.reads);
        let sd_device_writes_per_op = per_run_op(|d| d.writes);
        let sd_reads_per_op = per_op(f.sd_read_ops);
        let sd_ios_per_op = per_op(f.sd_read_ops.zip(f.sd_write_ops).map(|(r, w)| r + w));
        let sd_bytes_per_op = per_op(f.sd_read_bytes.zip(f.sd_write_bytes).map(|(r, w)| r + w));
        let throttled = cfg.sd_device.iops.is_some() || cfg.sd_device.bandwidth.is_some();
        let sd_bound_ops = if throttled && !system.all_on_fast() && !system.is_rocksdb() {
            let by_iops = cfg
                .sd_device
                .iops
                .zip(sd_ios_per_op)
                .map(|(iops, per)| iops as f64 / per);
            let by_bw = cfg
                .sd_device
                .bandwidth
                .zip(sd_bytes_per_op)
                .map(|(bw, per)| bw as f64 / per);
            match (by_iops, by_bw) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
            .filter(|b| b.is_finite())
        } else {
            None
        };
        let mut unavailable = Vec::new();
        let run = &m.run;
        for (name, v) in [
            ("fd_read_bytes", run.fd_read_bytes),
            ("fd_write_bytes", run.fd_write_bytes),
            ("sd_read_bytes", run.sd_read_bytes),
            ("sd_write_bytes", run.sd_write_bytes),
            ("promoted_bytes", run.promoted_bytes()),
            ("retained_bytes", run.retained_bytes),
        ] {
            if v.is_none() {
                unavailable.push(name);
            }
        }
        if f.fd_hit_rate().is_none() {
            unavailable.push("fd_hit_rate");
        }
        let rate = |ops: u64, secs: f64| if secs > 0.0 { ops as f64 / secs } else { 0.0 };
        SystemResult {
            name: system.name(),
            load_seconds: 0.0,
            run_seconds: m.run_seconds,
            ops: m.total_ops,
            throughput_ops: rate(m.final_ops, m.final_seconds),
            throughput_run_ops: rate(m.total_ops, m.run_seconds),
            cpu_us_per_op: m
                .cpu_seconds
                .filter(|_| m.total_ops > 0)
                .map(|c| c * 1e6 / m.total_ops as f64),
            ratio: 1.0,
            fd_hit_rate: f.fd_hit_rate(),
            fd_hit_rate_run: run.fd_hit_rate(),
            p50_us: us(0.5),
            p99_us: us(0.99),
            p999_us: us(0.999),
            max_us: m.hist.max() as f64 / 1000.0,
            latency_by_op: m
                .by_kind
                .iter()
                .filter(|(_, h)| !h.is_empty())
                .map(|(kind, h)| OpLatency::of(*kind, h))
                .collect(),
            get_latency_by_tier: if system.is_rocksdb() {
                Vec::new()
            } else {
                [GETS_WITHOUT_SLOW_READ, GETS_WITH_SLOW_READ]
                    .into_iter()
                    .zip(&m.gets_by_tier)
                    .filter(|(_, h)| !h.is_empty())
                    .map(|(name, h)| OpLatency::named(name, h))
                    .collect()
            },
            mean_us: m.hist.mean() / 1000.0,
            fd_read_bytes: run.fd_read_bytes,
            fd_write_bytes: run.fd_write_bytes,
            sd_read_bytes: run.sd_read_bytes,
            sd_write_bytes: run.sd_write_bytes,
            sd_read_ops: run.sd_read_ops,
            sd_write_ops: run.sd_write_ops,
            promoted_bytes: run.promoted_bytes(),
            promoted_by_flush_bytes: run.promoted_by_flush_bytes,
            promoted_by_compaction_bytes: run.promoted_by_compaction_bytes,
            retained_bytes: run.retained_bytes,
            sd_reads_per_op,
            sd_device_reads_per_op,
            sd_device_writes_per_op,
            sd_ios_per_op,
            sd_bound_ops,
            reads_found: m.reads_found,
            reads_missing: m.reads_missing,
            ralt_hot_set_bytes: None,
            ralt_hot_set_limit: None,
            ralt_physical_bytes: None,
            ralt_physical_limit: None,
            background: BackgroundTraffic::of(&m),
            memory: None,
            io_amp: IoAmplification::of(
                cfg,
                m.settled.as_ref().unwrap_or(&m.run),
                m.reads_found + m.reads_missing,
                m.writes,
            ),
            unavailable,
            timeline: m.timeline,
            phases,
            engine_stats: serde_json::Value::Null,
        }
    }
}

/// Fills in each phase's climb from the timeline.
fn with_climbs(mut phases: Vec<PhaseResult>, timeline: &[TimelinePoint]) -> Vec<PhaseResult> {
    let climbs = ops_to_hit_rate(timeline, phases.len(), CLIMB_HIT_RATE);
    let mids = hit_rate_within(timeline, phases.len(), 0.45, 0.55);
    let ends = hit_rate_within(timeline, phases.len(), 0.9, 1.0);
    for (((p, c), mid), end) in phases.iter_mut().zip(climbs).zip(mids).zip(ends) {
        p.ops_to_climb = c;
        p.fd_hit_mid = mid;
        p.fd_hit_end = end;
    }
    phases
}

impl SystemResult {
    /// Keeps the engine's final statistics and picks out the hotness tracker's sizes.
    pub fn set_engine_stats(&mut self, stats: serde_json::Value) {
        let ralt = &stats["promotion"]["ralt"];
        self.ralt_hot_set_bytes = ralt["hot_set_size"].as_u64();
        self.ralt_hot_set_limit = ralt["hot_set_limit"].as_u64();
        self.ralt_physical_bytes = ralt["physical_size"].as_u64();
        self.ralt_physical_limit = ralt["physical_limit"].as_u64();
        self.engine_stats = stats;
    }
}

/// Everything `results.json` holds.
#[derive(Clone, Debug, Serialize)]
pub struct BenchResults {
    /// Layout version ([`RESULTS_VERSION`]).
    pub version: u32,
    /// The command line that produced the results.
    pub command: String,
    /// The resolved configuration.
    pub config: Config,
    /// Results in the order of `config.systems`.
    pub systems: Vec<SystemResult>,
    /// Wall-clock seconds of the whole benchmark.
    pub total_seconds: f64,
}

impl BenchResults {
    /// Assembles the results and fills in each system's ratio to the first.
    pub fn new(cfg: &Config, mut systems: Vec<SystemResult>, total_seconds: f64) -> BenchResults {
        let base = systems.first().map_or(0.0, |s| s.throughput_ops);
        for s in &mut systems {
            s.ratio = if base > 0.0 {
                s.throughput_ops / base
            } else {
                0.0
            };
        }
        BenchResults {
            version: RESULTS_VERSION,
            command: std::env::args().collect::<Vec<_>>().join(" "),
            config: cfg.clone(),
            systems,
            total_seconds,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::args::BenchArgs;
    use std::path::Path;

    /// A half-second timeline point of `phase` with `ops` operations, `fd` of every 100
    /// gets served by the fast disk.
    fn point(phase: usize, ops: u64, fd: u64) -> TimelinePoint {
        let c = Counters {
            gets_fd: fd,
            gets_sd: 100 - fd,
            ..Default::default()
        };
        TimelinePoint::between(0.0, 0.5, ops, &c, phase)
    }

    /// The climb counts a phase's operations up to the end of its first interval at or
    /// above the rate, restarts at each phase, and is `None` for a phase that never gets
    /// there. (Issue 46's figure: it must move when the hit rate rises earlier or later.)
    #[test]
    fn climb_counts_operations_to_the_first_interval_at_the_rate() {
        let timeline = vec![
            point(0, 100, 10),
            point(0, 200, 89),
            point(0, 300, 90),
            point(0, 400, 99),
            point(1, 500, 95),
            point(2, 600, 50),
        ];
        assert_eq!(
            ops_to_hit_rate(&timeline, 4, 0.9),
            vec![Some(600), Some(500), None, None]
        );
        assert_eq!(ops_to_hit_rate(&timeline, 1, 0.99), vec![Some(1000)]);
    }

    /// A phase's midpoint and end hit rates weigh each interval by its operations inside
    /// the window, per phase, and are `None` for a phase without points. (Issue 46's
    /// figures: a window read from the wrong interval would move them.)
    #[test]
    fn hit_rates_within_a_window_weigh_the_intervals_inside_it() {
        // Phase 0: 1,000 operations in intervals of 400, 200 and 400; phase 1: one of 500.
        let timeline = vec![
            point(0, 400, 20),
            point(0, 200, 60),
            point(0, 400, 90),
            point(1, 500, 70),
        ];
        let mid = hit_rate_within(&timeline, 3, 0.45, 0.55);
        let end = hit_rate_within(&timeline, 3, 0.9, 1.0);
        // 450-550 lies in the 200-operation interval (400-600).
        assert!((mid[0].unwrap() - 0.6).abs() < 1e-9, "{mid:?}");
        assert!((end[0].unwrap() - 0.9).abs() < 1e-9, "{end:?}");
        // 350-650 spans 50 operations at 20%, 200 at 60% and 50 at 90%.
        let wide = hit_rate_within(&timeline, 3, 0.35, 0.65);
        let expected = (50.0 * 0.2 + 200.0 * 0.6 + 50.0 * 0.9) / 300.0;
        assert!((wide[0].unwrap() - expected).abs() < 1e-9, "{wide:?}");
        assert!((mid[1].unwrap() - 0.7).abs() < 1e-9);
        assert_eq!((mid[2], end[2]), (None, None));
    }

    pub(crate) fn sample_results(out: &Path) -> BenchResults {
        let cfg = Config::from_args(&BenchArgs {
            scale: "smoke".into(),
            out: out.to_path_buf(),
            ..Default::default()
        })
        .unwrap();
        let mk = |system: System, ops_per_s: f64, hit: f64| {
            let mut hist = Histogram::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
            for i in 1..=1000u64 {
                hist.record(i * 1000).unwrap();
            }
            let timeline = (1..=5)
                .map(|i| {
                    TimelinePoint::between(
                        i as f64,
                        1.0,
                        (ops_per_s * (0.5 + i as f64 / 10.0)) as u64,
                        &Counters {
                            gets_fd: (hit * 1000.0).round() as u64,
                            gets_sd: ((1.0 - hit) * 1000.0).round() as u64,
                            sd_read_bytes: Some(4096 * i),
                            ..Default::default()
                        },
                        0,
                    )
                })
                .collect();
            let c = |fd: u64, sd: u64| Counters {
                gets_fd: fd,
                gets_sd: sd,
                fd_read_bytes: Some(1 << 20),
                fd_write_bytes: Some(2 << 20),
                sd_read_bytes: Some(3 << 20),
                sd_write_bytes: Some(0),
                disk_read_bytes: Some(4 << 20),
                disk_write_bytes: Some(2 << 20),
                sd_read_ops: Some(sd),
                sd_write_ops: Some(0),
                user_read_ios: Some(sd + 10),
                promoted_by_flush_bytes: Some(10),
                promoted_by_compaction_bytes: Some(5),
                retained_bytes: Some(7),
                cache_bytes: Some([3 << 20, 1 << 20, 4 << 20]),
                cache_hits: Some([60, 20, 30, 100, 50]),
                user_bytes_written: Some(1 << 20),
                bg_write_bytes: Some(5 << 20),
                bg_tier_bytes: Some([1 << 20, 2 << 20, 3 << 20, 3 << 20]),
                fd_tracker_write_bytes: Some(1 << 20),
                sd_compaction_bytes: Some(6 << 20),
                pushdown_bytes: Some(0),
                block_bytes: Some([1 << 20, 3 << 20]),
                memory_bytes: Some(8 << 20),
                slow_tier_space_amp: Some(1.25),
            };
            SystemResult::new(
                &cfg,
                system,
                RunMeasure {
                    total_ops: 10_000,
                    final_ops: 1000,
                    run_seconds: 10_000.0 / ops_per_s,
                    final_seconds: 1000.0 / ops_per_s,
                    run: c(
                        (hit * 10_000.0).round() as u64,
                        ((1.0 - hit) * 10_000.0).round() as u64,
                    ),
                    final_window: c(
                        (hit * 1000.0).round() as u64,
                        ((1.0 - hit) * 1000.0).round() as u64,
                    ),
                    by_kind: vec![(OpKind::Read, hist.clone()), (OpKind::Update, hist.clone())],
                    gets_by_tier: [hist.clone(), hist.clone()],
                    hist,
                    reads_found: 10_000,
                    reads_missing: 0,
                    writes: 0,
                    settled: None,
                    settle_seconds: 0.0,
                    cpu_seconds: Some(0.25),
                    slow_device: None,
                    timeline,
                    phases: vec![
                        PhaseResult {
                            phase: 0,
                            ops: 4000,
                            ops_per_sec: ops_per_s * 0.8,
                            second_half_ops_per_sec: ops_per_s * 0.9,
                            read_ios_per_op: Some(0.5),
                            second_half_read_ios_per_op: Some(0.25),
                            ops_to_climb: None,
                            fd_hit_mid: None,
                            fd_hit_end: None,
                        },
                        PhaseResult {
                            phase: 1,
                            ops: 6000,
                            ops_per_sec: ops_per_s,
                            second_half_ops_per_sec: ops_per_s * 1.1,
                            read_ios_per_op: None,
                            second_half_read_ios_per_op: None,
                            ops_to_climb: None,
                            fd_hit_mid: None,
                            fd_hit_end: None,
                        },
                    ],
                },
            )
        };
        let mut tierkv = mk(System::Tierkv, 2000.0, 0.9);
        tierkv.set_engine_stats(serde_json::json!({
            "promotion": {"ralt": {"hot_set_size": 1024, "hot_set_limit": 2048,
                                   "physical_size": 4096, "physical_limit": 8192}}
        }));
        BenchResults::new(
            &cfg,
            vec![
                tierkv,
                mk(System::TierkvNoPromo, 500.0, 0.1),
                mk(System::TierkvFd, 2500.0, 1.0),
            ],
            12.0,
        )
    }
}

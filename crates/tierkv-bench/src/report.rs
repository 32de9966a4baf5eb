//! What a run reports: per-system results (throughput over the final 10% of the run phase,
//! FD hit rate, latency percentiles, per-tier I/O, promotion), the per-interval timeline,
//! the markdown table (`report.md`), `results.json` and the charts. Field names in
//! `results.json` are stable: scripts and CI (`.ci/check_bench.py`) rely on them.

use hdrhistogram::Histogram;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

use crate::error::{BenchError, Result};
use crate::scale::Config;
use crate::systems::{Counters, System};

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
    /// Bytes the engine's budgeted components held at the end of the interval.
    pub engine_memory_bytes: Option<u64>,
    /// The process's resident set size at the end of the interval.
    pub rss_bytes: Option<u64>,
    /// Of it, anonymous memory (heap and stacks).
    pub rss_anon_bytes: Option<u64>,
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
            engine_memory_bytes: d.memory_bytes,
            rss_bytes: None,
            rss_anon_bytes: None,
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
}

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
    pub memory: Option<crate::budget::MemoryUse>,
    /// Disk bytes per byte of user data by tier (F2's Table 2).
    pub io_amp: Option<crate::budget::IoAmplification>,
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
    pub fn new(cfg: &Config, system: System, m: RunMeasure) -> SystemResult {
        let us = |q: f64| m.hist.value_at_quantile(q) as f64 / 1000.0;
        let f = &m.final_window;
        let per_op = |x: Option<u64>| {
            x.filter(|_| m.final_ops > 0)
                .map(|x| x as f64 / m.final_ops as f64)
        };
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
            ratio: 1.0,
            fd_hit_rate: f.fd_hit_rate(),
            fd_hit_rate_run: run.fd_hit_rate(),
            p50_us: us(0.5),
            p99_us: us(0.99),
            p999_us: us(0.999),
            max_us: m.hist.max() as f64 / 1000.0,
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
            io_amp: crate::budget::IoAmplification::of(cfg, &m),
            unavailable,
            timeline: m.timeline,
            phases: m.phases,
            engine_stats: serde_json::Value::Null,
        }
    }
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

/// Human-readable bytes (binary units).
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

fn opt_bytes(n: Option<u64>) -> String {
    n.map_or_else(|| "n/a".to_string(), bytes)
}

fn pct(r: Option<f64>) -> String {
    r.map_or_else(|| "n/a".to_string(), |r| format!("{:.1}%", r * 100.0))
}

/// Thousands separators for operation rates.
pub fn rate(v: f64) -> String {
    let n = v.round().max(0.0) as u64;
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn latency(us: f64) -> String {
    if us >= 10_000.0 {
        format!("{:.1} ms", us / 1000.0)
    } else if us >= 100.0 {
        format!("{us:.0}")
    } else {
        format!("{us:.1}")
    }
}

fn latency_with_unit(us: f64) -> String {
    if us >= 10_000.0 {
        latency(us)
    } else {
        format!("{} us", latency(us))
    }
}

/// One line per finished system for the console.
pub fn summary_line(cfg: &Config, r: &SystemResult) -> String {
    let mut s = format!(
        "{}: {} ops in {:.1} s; final 10%: {} ops/s, FD hit rate {}; p99 {}",
        r.name,
        r.ops,
        r.run_seconds,
        rate(r.throughput_ops),
        pct(r.fd_hit_rate),
        latency_with_unit(r.p99_us)
    );
    if let Some(b) = r.sd_bound_ops {
        let _ = write!(
            s,
            "; SD bound {} ops/s ({} at {:.0}% of it)",
            rate(b),
            cfg.sd_profile,
            100.0 * r.throughput_ops / b
        );
    }
    s
}

/// The markdown report.
pub fn markdown(res: &BenchResults) -> String {
    let c = &res.config;
    let mut s = String::new();
    let _ = writeln!(s, "# tierkv bench\n");
    let _ = writeln!(s, "`{}`\n", res.command);
    let _ = writeln!(
        s,
        "- workload: {}, distribution: {}",
        crate::runner::workload_label(c),
        if c.trace.is_some() {
            "from the trace".to_string()
        } else {
            c.distribution.describe()
        }
    );
    let _ = writeln!(
        s,
        "- {} records of {} loaded ({}), then {} operations with {} client threads",
        rate(c.records as f64),
        if c.trace.is_some() {
            "trace sizes".to_string()
        } else {
            format!("{} B", c.record_size)
        },
        bytes(c.loaded_bytes),
        rate(c.ops as f64),
        c.threads
    );
    let _ = writeln!(
        s,
        "- fast disk budget {} (no device model), slow disk model `{}`, block cache {}, scale `{}`, seed {}",
        bytes(c.fd_budget),
        c.sd_profile,
        bytes(c.block_cache),
        serde_json::to_value(c.scale)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        c.seed
    );
    let _ = writeln!(
        s,
        "- throughput and FD hit rate over the final 10% of the run phase; latency over the whole run; bytes are run-phase totals; total time {:.0} s\n",
        res.total_seconds
    );
    let _ = writeln!(
        s,
        "| system | ops/s | vs {} | FD hit rate | p50 us | p99 us | p999 us | FD read | FD write | SD read | SD write | promoted | retained |",
        res.systems.first().map_or("first", |r| r.name.as_str())
    );
    let _ = writeln!(s, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    for r in &res.systems {
        let _ = writeln!(
            s,
            "| {} | {} | {:.2}x | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.name,
            rate(r.throughput_ops),
            r.ratio,
            pct(r.fd_hit_rate),
            latency(r.p50_us),
            latency(r.p99_us),
            latency(r.p999_us),
            opt_bytes(r.fd_read_bytes),
            opt_bytes(r.fd_write_bytes),
            opt_bytes(r.sd_read_bytes),
            opt_bytes(r.sd_write_bytes),
            opt_bytes(r.promoted_bytes),
            opt_bytes(r.retained_bytes),
        );
    }
    let bounds: Vec<&SystemResult> = res
        .systems
        .iter()
        .filter(|r| r.sd_bound_ops.is_some())
        .collect();
    if !bounds.is_empty() {
        let _ = writeln!(
            s,
            "\nPhysical bound of the throttled slow disk (`{}`: {} IOPS, {}/s) over the final 10%: \
             IOPS limit / SD I/Os per operation (reads and writes draw on the same limit), or the \
             bandwidth limit / SD bytes per operation if lower; and never above the all-on-FD \
             throughput measured in the same run.\n",
            c.sd_profile,
            c.sd_device.iops.map_or("unlimited".to_string(), |i| i.to_string()),
            c.sd_device.bandwidth.map_or("unlimited".to_string(), bytes)
        );
        // Nothing placed across the two tiers outruns the same store with every level on
        // the fast disk either (docs/DESIGN.md): when tierkv-fd ran too, the bound is the lower
        // of the two.
        let fd_ceiling = res
            .systems
            .iter()
            .find(|r| r.name == "tierkv-fd")
            .map(|r| r.throughput_ops);
        let _ = writeln!(
            s,
            "| system | ops/s | SD reads/op | SD I/Os/op | SD bound ops/s | all-on-FD ops/s | bound ops/s | share of bound |"
        );
        let _ = writeln!(s, "|---|--:|--:|--:|--:|--:|--:|--:|");
        for r in bounds {
            let sd = r.sd_bound_ops.unwrap_or(0.0);
            let b = fd_ceiling.map_or(sd, |fd| sd.min(fd));
            let _ = writeln!(
                s,
                "| {} | {} | {:.3} | {:.3} | {} | {} | {} | {:.0}% |",
                r.name,
                rate(r.throughput_ops),
                r.sd_reads_per_op.unwrap_or(0.0),
                r.sd_ios_per_op.unwrap_or(0.0),
                rate(sd),
                fd_ceiling.map_or("-".to_string(), rate),
                rate(b),
                if b > 0.0 {
                    100.0 * r.throughput_ops / b
                } else {
                    0.0
                }
            );
        }
    }
    let ralt: Vec<&SystemResult> = res
        .systems
        .iter()
        .filter(|r| r.ralt_hot_set_bytes.is_some())
        .collect();
    if !ralt.is_empty() {
        let _ = writeln!(
            s,
            "\nHotness tracker (RALT) at the end of the run:\n\n\
             | system | hot set | hot set limit | physical size | physical limit |\n\
             |---|--:|--:|--:|--:|"
        );
        for r in ralt {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} |",
                r.name,
                opt_bytes(r.ralt_hot_set_bytes),
                opt_bytes(r.ralt_hot_set_limit),
                opt_bytes(r.ralt_physical_bytes),
                opt_bytes(r.ralt_physical_limit)
            );
        }
    }
    let bg: Vec<(&SystemResult, &BackgroundTraffic)> = res
        .systems
        .iter()
        .filter_map(|r| r.background.as_ref().map(|b| (r, b)))
        .collect();
    if !bg.is_empty() {
        let _ = writeln!(
            s,
            "\nBackground traffic of the run phase (flushes, compactions, promotion, hotness \
             tracking; not the WAL), counted until background work settled after the last \
             operation so that compaction debt is included: bytes, and in parentheses per \
             byte users wrote (write amplification by tier); `during run`: background writes \
             while the operations ran. Block reuse: share of compacted data-block bytes \
             copied as stored. SD compaction: slow-disk bandwidth compactions used during the \
             run, mean / peak interval.\n\n\
             | system | user writes | background writes | during run | settle s | FD write | SD write | FD read | SD read | block reuse | SD compaction MiB/s |\n\
             |---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
        );
        let amp = |b: Option<u64>, a: Option<f64>| match (b, a) {
            (Some(b), Some(a)) => format!("{} ({a:.2})", bytes(b)),
            (Some(b), None) => bytes(b),
            _ => "n/a".to_string(),
        };
        for (r, b) in bg {
            let reuse = match (b.reused_block_bytes, b.rewritten_block_bytes) {
                (Some(u), Some(w)) if u + w > 0 => {
                    format!("{:.1}%", 100.0 * u as f64 / (u + w) as f64)
                }
                _ => "n/a".to_string(),
            };
            let bw = match (b.sd_compaction_mib_s, b.sd_compaction_peak_mib_s) {
                (Some(m), Some(p)) => format!("{m:.1} / {p:.1}"),
                (Some(m), None) => format!("{m:.1}"),
                _ => "n/a".to_string(),
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.name,
                bytes(b.user_bytes_written),
                amp(Some(b.write_bytes), b.write_amp),
                bytes(b.run_phase_write_bytes),
                b.settle_seconds
                    .map_or("-".to_string(), |s| format!("{s:.1}")),
                amp(b.fd_write_bytes, b.fd_write_amp),
                amp(b.sd_write_bytes, b.sd_write_amp),
                amp(b.fd_read_bytes, b.fd_read_amp),
                amp(b.sd_read_bytes, b.sd_read_amp),
                reuse,
                bw
            );
        }
    }
    if res.systems.iter().any(|r| r.phases.len() > 1) {
        let _ = writeln!(
            s,
            "\nThroughput by phase (ops/s over the whole phase / over its second half; in \
             brackets, disk reads of gets and scans per operation over the same spans):\n"
        );
        let n = res
            .systems
            .iter()
            .map(|r| r.phases.len())
            .max()
            .unwrap_or(0);
        let head: Vec<String> = (0..n).map(|i| format!("phase {i}")).collect();
        let _ = writeln!(s, "| system | {} |", head.join(" | "));
        let _ = writeln!(s, "|---|{}", "--:|".repeat(n));
        for r in &res.systems {
            let cells: Vec<String> = r
                .phases
                .iter()
                .map(|p| {
                    let ios = match (p.read_ios_per_op, p.second_half_read_ios_per_op) {
                        (Some(a), Some(b)) => format!(" ({a:.3} / {b:.3} reads/op)"),
                        _ => String::new(),
                    };
                    format!(
                        "{} / {}{ios}",
                        rate(p.ops_per_sec),
                        rate(p.second_half_ops_per_sec)
                    )
                })
                .collect();
            let _ = writeln!(s, "| {} | {} |", r.name, cells.join(" | "));
        }
    }
    s.push_str(&crate::budget::markdown(res));
    let caches: Vec<(&SystemResult, &serde_json::Value)> = res
        .systems
        .iter()
        .filter_map(|r| r.engine_stats.get("cache").map(|c| (r, c)))
        .filter(|(_, c)| c.get("mode").is_some())
        .collect();
    if !caches.is_empty() {
        let _ = writeln!(
            s,
            "\nCache at the end of the run (size / hit rate; KV and KP hit rates are shares of \
             point lookups; ghosts on/off and their memory):\n\n\
             | system | mode | KV | KP | block | ghosts |\n|---|---|--:|--:|--:|--:|"
        );
        for (r, c) in caches {
            let comp = |name: &str| {
                let x = &c[name];
                format!(
                    "{} / {}",
                    bytes(x["bytes"].as_u64().unwrap_or(0)),
                    pct(x["hit_rate"].as_f64())
                )
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} {} |",
                r.name,
                c["mode"].as_str().unwrap_or("?"),
                comp("kv"),
                comp("kp"),
                comp("block"),
                if c["ghosts_on"].as_bool().unwrap_or(false) {
                    "on"
                } else {
                    "off"
                },
                bytes(c["ghost_bytes"].as_u64().unwrap_or(0))
            );
        }
    }
    let _ = writeln!(
        s,
        "\nCharts: `throughput.png`, `fd_hit_rate.png`, `sd_read.png`, `sd_compaction.png` \
         (slow-disk bandwidth of compactions), `cache_<system>.png` (cache component sizes \
         over time). Full data: `results.json`."
    );
    s
}

/// Writes `report.md`, `results.json` and the charts to `out`; returns the markdown.
pub fn write_all(res: &BenchResults, out: &Path) -> Result<String> {
    std::fs::create_dir_all(out).map_err(|e| BenchError::io(out, e))?;
    let md = markdown(res);
    let p = out.join("report.md");
    std::fs::write(&p, &md).map_err(|e| BenchError::io(&p, e))?;
    let p = out.join("results.json");
    let json = serde_json::to_string_pretty(res)
        .map_err(|e| BenchError::io(&p, std::io::Error::other(e)))?;
    std::fs::write(&p, json + "\n").map_err(|e| BenchError::io(&p, e))?;
    crate::chart::write_charts(res, out)?;
    Ok(md)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::args::BenchArgs;

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
                sd_compaction_bytes: Some(6 << 20),
                block_bytes: Some([1 << 20, 3 << 20]),
                memory_bytes: Some(8 << 20),
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
                    hist,
                    reads_found: 10_000,
                    reads_missing: 0,
                    writes: 0,
                    settled: None,
                    settle_seconds: 0.0,
                    timeline,
                    phases: vec![
                        PhaseResult {
                            phase: 0,
                            ops: 4000,
                            ops_per_sec: ops_per_s * 0.8,
                            second_half_ops_per_sec: ops_per_s * 0.9,
                            read_ios_per_op: Some(0.5),
                            second_half_read_ios_per_op: Some(0.25),
                        },
                        PhaseResult {
                            phase: 1,
                            ops: 6000,
                            ops_per_sec: ops_per_s,
                            second_half_ops_per_sec: ops_per_s * 1.1,
                            read_ios_per_op: None,
                            second_half_read_ios_per_op: None,
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

    #[test]
    fn results_have_the_stable_fields() {
        let dir = tempfile::tempdir().unwrap();
        let res = sample_results(dir.path());
        assert!((res.systems[1].ratio - 0.25).abs() < 1e-9);
        let t = &res.systems[0];
        assert!((t.throughput_ops - 2000.0).abs() < 1e-6);
        assert!((t.fd_hit_rate.unwrap() - 0.9).abs() < 1e-9);
        assert!(t.p50_us <= t.p99_us && t.p99_us <= t.p999_us);
        assert!((t.p50_us - 500.0).abs() < 5.0, "{}", t.p50_us);
        // gp3: 3000 IOPS, 0.1 SD reads per op -> 30,000 ops/s.
        let b = t.sd_bound_ops.unwrap();
        assert!((b - 30_000.0).abs() < 1.0, "{b}");
        assert_eq!(
            res.systems[2].sd_bound_ops, None,
            "all on FD has no SD bound"
        );
        let v = serde_json::to_value(&res).unwrap();
        for f in [
            "throughput_ops",
            "fd_hit_rate",
            "p50_us",
            "p99_us",
            "p999_us",
            "sd_read_bytes",
            "fd_read_bytes",
            "sd_write_bytes",
            "fd_write_bytes",
            "promoted_bytes",
            "retained_bytes",
            "timeline",
        ] {
            assert!(v["systems"][0].get(f).is_some(), "missing {f}");
        }
        assert_eq!(v["systems"][0]["name"], "tierkv");
        assert_eq!(v["systems"][0]["promoted_bytes"], 15);
        assert_eq!(v["config"]["systems"][1], "tierkv-nopromo");
        assert_eq!(v["config"]["workload"], "ro");
        assert_eq!(v["config"]["distribution"], "hotspot-5%");
        // Write amplification by tier: 1 MiB written by users, 5 MiB in the background.
        let bg = &v["systems"][0]["background"];
        assert_eq!(bg["write_amp"], 5.0);
        assert_eq!(bg["sd_write_amp"], 3.0);
        assert_eq!(bg["fd_write_amp"], 2.0);
        assert_eq!(bg["reused_block_bytes"], 1 << 20);
        let md = markdown(&res);
        assert!(
            md.contains("| tierkv | 1.0 MiB | 5.0 MiB (5.00) | 5.0 MiB | - | 2.0 MiB (2.00) |"),
            "{md}"
        );
    }

    #[test]
    fn markdown_has_a_row_per_system() {
        let dir = tempfile::tempdir().unwrap();
        let res = sample_results(dir.path());
        let md = markdown(&res);
        for name in ["| tierkv |", "| tierkv-nopromo |", "| tierkv-fd |"] {
            assert!(md.contains(name), "{md}");
        }
        assert!(md.contains("0.25x"), "{md}");
        assert!(md.contains("90.0%"), "{md}");
        assert!(md.contains("Physical bound"), "{md}");
        assert!(
            md.contains("| tierkv | 1.0 KiB | 2.0 KiB | 4.0 KiB | 8.0 KiB |"),
            "{md}"
        );
    }

    #[test]
    fn writes_every_output() {
        let dir = tempfile::tempdir().unwrap();
        let res = sample_results(dir.path());
        write_all(&res, dir.path()).unwrap();
        for f in [
            "report.md",
            "results.json",
            "throughput.png",
            "fd_hit_rate.png",
            "sd_read.png",
            "sd_compaction.png",
        ] {
            let meta = std::fs::metadata(dir.path().join(f)).unwrap();
            assert!(meta.len() > 100, "{f} is {} bytes", meta.len());
        }
        let text = std::fs::read_to_string(dir.path().join("results.json")).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["systems"].as_array().unwrap().len(), 3);
        assert_eq!(v["version"], RESULTS_VERSION);
    }

    #[test]
    fn formats() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(3 << 30), "3.0 GiB");
        assert_eq!(rate(1234567.4), "1,234,567");
        assert_eq!(rate(12.0), "12");
        assert_eq!(pct(None), "n/a");
    }
}

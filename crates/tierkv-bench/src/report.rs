//! How a run is reported: the markdown tables (`report.md`), the console line per system,
//! the number formats, and writing `report.md`, `results.json` and the charts. Renders
//! [`crate::results`] (what was measured) and never measures or runs anything itself.

use std::fmt::Write as _;
use std::path::Path;

use crate::budget::{IoAmplification, MemoryUse};
use crate::error::{BenchError, Result};
use crate::results::{BackgroundTraffic, BenchResults, OpLatency, SystemResult, CLIMB_HIT_RATE};
use crate::scale::Config;

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

/// The unit of a set of latency columns: one for all of them (p50, p99 and p999 side by
/// side compare at a glance only in one unit), chosen by the largest value shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LatencyUnit {
    /// Microseconds, while every value is below 10 ms.
    Us,
    /// Milliseconds with two decimals, once any value reaches 10 ms.
    Ms,
}

impl LatencyUnit {
    /// The unit for columns holding these values (in microseconds).
    pub fn for_values(us: impl IntoIterator<Item = f64>) -> Self {
        if us.into_iter().any(|v| v >= 10_000.0) {
            LatencyUnit::Ms
        } else {
            LatencyUnit::Us
        }
    }

    /// The unit's name, for column headers.
    pub fn name(self) -> &'static str {
        match self {
            LatencyUnit::Us => "us",
            LatencyUnit::Ms => "ms",
        }
    }

    /// `us` microseconds in this unit, without the unit's name.
    pub fn format(self, us: f64) -> String {
        match self {
            LatencyUnit::Us if us >= 100.0 => format!("{us:.0}"),
            LatencyUnit::Us => format!("{us:.1}"),
            LatencyUnit::Ms => format!("{:.2}", us / 1000.0),
        }
    }
}

/// One latency with its unit (`450 us`, `15.08 ms`), for single values in prose.
fn latency_with_unit(us: f64) -> String {
    let unit = LatencyUnit::for_values([us]);
    format!("{} {}", unit.format(us), unit.name())
}

/// How far above its bound a measured throughput may be and still count as "at the bound":
/// the bound and the throughput are measured over different windows (and the all-on-FD
/// ceiling in another system's run), so a few percent either way is run-to-run noise.
const BOUND_NOISE: f64 = 0.15;

/// A throughput as a share of its bound. At or below the bound: the percentage. Above it
/// by no more than [`BOUND_NOISE`]: "at the bound" and why it can read higher. Further
/// above the all-on-FD ceiling: by how much, and the two reasons it can be (that ceiling is
/// measured in another run, on a shared machine over a short final window; and promotion
/// packs the hot records denser than the all-on-FD layout does). Further above the
/// slow-disk bound, which the device model enforces: a warning.
pub fn share_of_bound(ops: f64, bound: f64, bound_is_all_on_fd: bool) -> String {
    if bound <= 0.0 {
        return "-".to_string();
    }
    let share = ops / bound;
    let above = (share - 1.0) * 100.0;
    if share <= 1.0 {
        format!("{:.0}%", share * 100.0)
    } else if share <= 1.0 + BOUND_NOISE {
        let why = if bound_is_all_on_fd {
            "the all-on-FD run is another run"
        } else {
            "bound and throughput are measured over different I/Os"
        };
        format!("at the bound (+{above:.0}%, within noise: {why})")
    } else if bound_is_all_on_fd {
        format!(
            "above all-on-FD's bound by {above:.0}% (another run: noise of a shared machine and a \
             short final window, or hot records packed denser than all-on-FD's layout)"
        )
    } else {
        format!(
            "{:.0}% (above the modelled slow disk's bound by more than noise: check the run)",
            share * 100.0
        )
    }
}

/// The name a load phase is reported under: the system's own, or, when several systems
/// start from one shared load, all of them as `--systems` names them.
pub fn load_label(cfg: &Config, system: crate::systems::System) -> String {
    let sharing: Vec<String> = match system.load_class() {
        Some(class) => cfg
            .systems
            .iter()
            .filter(|s| s.load_class() == Some(class))
            .map(|s| s.name())
            .collect(),
        None => vec![],
    };
    if sharing.len() > 1 {
        format!("load shared by {}", sharing.join(", "))
    } else {
        system.name()
    }
}

/// One line per finished system for the console.
pub fn summary_line(cfg: &Config, r: &SystemResult) -> String {
    let mut s = format!(
        "{}: {} ops in {:.1} s ({} ops/s{}); final 10%: {} ops/s, FD hit rate {}; p99 {}",
        r.name,
        r.ops,
        r.run_seconds,
        rate(r.throughput_run_ops),
        r.cpu_us_per_op
            .map_or(String::new(), |c| format!(", {c:.1} us CPU/op")),
        rate(r.throughput_ops),
        pct(r.fd_hit_rate),
        latency_with_unit(r.p99_us)
    );
    if let Some(b) = r.sd_bound_ops {
        let _ = write!(
            s,
            "; SD bound {} ops/s ({}; throughput {})",
            rate(b),
            cfg.sd_profile,
            share_of_bound(r.throughput_ops, b, false)
        );
    }
    s
}

/// One column of a markdown table: its header, its alignment and its cell in one row.
struct Column<R> {
    head: String,
    /// Numbers are right-aligned (`--:`), names and words left-aligned (`---`).
    numeric: bool,
    cell: fn(&R) -> String,
}

impl<R> Column<R> {
    fn text(head: impl Into<String>, cell: fn(&R) -> String) -> Self {
        Column {
            head: head.into(),
            numeric: false,
            cell,
        }
    }

    fn num(head: impl Into<String>, cell: fn(&R) -> String) -> Self {
        Column {
            head: head.into(),
            numeric: true,
            cell,
        }
    }
}

/// `| a | b |`: one line of a markdown table.
fn table_line(s: &mut String, cells: impl IntoIterator<Item = String>) {
    let cells: Vec<String> = cells.into_iter().collect();
    let _ = writeln!(s, "| {} |", cells.join(" | "));
}

/// A markdown table: the header, the alignment line and one line per row.
fn table<R>(s: &mut String, columns: &[Column<R>], rows: impl IntoIterator<Item = R>) {
    table_line(s, columns.iter().map(|c| c.head.clone()));
    s.push('|');
    for c in columns {
        s.push_str(if c.numeric { "--:|" } else { "---|" });
    }
    s.push('\n');
    for row in rows {
        table_line(s, columns.iter().map(|c| (c.cell)(&row)));
    }
}

/// The parts of the report, in order; each writes nothing when no system has its figures.
const PARTS: [fn(&mut String, &BenchResults); 14] = [
    setup,
    systems_table,
    latency_by_op_table,
    gets_by_tier_table,
    whole_run,
    climb,
    bounds_table,
    ralt_table,
    background_table,
    phases_table,
    memory_table,
    io_amp_table,
    cache_table,
    charts,
];

/// The markdown report.
pub fn markdown(res: &BenchResults) -> String {
    let mut s = String::new();
    for part in PARTS {
        part(&mut s, res);
    }
    s
}

/// The setup list under the command line, one line each; `None` leaves a line out (a
/// setting at its default).
const SETUP: [fn(&Config) -> Option<String>; 7] = [
    |c| {
        Some(format!(
            "workload: {}, distribution: {}",
            c.workload_label(),
            c.keys_label()
        ))
    },
    |c| {
        Some(format!(
            "{} records of {} loaded ({}), then {} operations with {} client threads{}",
            rate(c.records as f64),
            if c.trace.is_some() {
                "trace sizes".to_string()
            } else {
                format!("{} B", c.record_size)
            },
            bytes(c.loaded_bytes),
            rate(c.ops as f64),
            c.threads,
            if c.batch > 1 {
                format!(
                    ", each issuing up to {} consecutive gets as one batched read (--batch)",
                    c.batch
                )
            } else {
                String::new()
            }
        ))
    },
    |c| {
        Some(format!(
            "fast disk budget {} (no device model), slow disk model `{}`, block cache {}, scale `{}`, seed {}",
            bytes(c.fd_budget),
            c.sd_profile,
            bytes(c.cache_size),
            serde_json::to_value(c.scale)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            c.seed
        ))
    },
    |c| {
        (c.read_io != tierkv::Options::default().read_io.name())
            .then(|| format!("tierkv batched reads: read_io {}", c.read_io))
    },
    |c| {
        c.semi_block_size
            .map(|b| format!("tierkv semi-sorted tables: data blocks of at most {b} bytes"))
    },
    |c| {
        c.record_cache.map(|on| {
            format!(
                "tierkv fast-disk record cache: {}",
                if on { "on" } else { "off" }
            )
        })
    },
    |c| {
        let default_filters = tierkv::Options::default().last_level_filters;
        (c.block_records.is_some() || c.last_level_filters != default_filters).then(|| {
            format!(
                "tierkv tables: {} records per data block, deepest level's filters: {}",
                c.block_records
                    .map_or("the default".to_string(), |n| n.to_string()),
                c.last_level_filters.name()
            )
        })
    },
];

/// The title, the command line and the setup.
fn setup(s: &mut String, res: &BenchResults) {
    let _ = writeln!(s, "# tierkv bench\n");
    let _ = writeln!(s, "`{}`\n", res.command);
    for line in SETUP.iter().filter_map(|line| line(&res.config)) {
        let _ = writeln!(s, "- {line}");
    }
    let _ = writeln!(
        s,
        "- throughput and FD hit rate over the final 10% of the run phase; latency over the whole run; bytes are run-phase totals; total time {:.0} s\n",
        res.total_seconds
    );
}

/// The main table: throughput, latency and bytes per system.
fn systems_table(s: &mut String, res: &BenchResults) {
    let unit = LatencyUnit::for_values(
        res.systems
            .iter()
            .flat_map(|r| [r.p50_us, r.p99_us, r.p999_us]),
    );
    let (u, first) = (
        unit.name(),
        res.systems.first().map_or("first", |r| r.name.as_str()),
    );
    let columns: [Column<(LatencyUnit, &SystemResult)>; 13] = [
        Column::text("system", |(_, r)| r.name.clone()),
        Column::num("ops/s", |(_, r)| rate(r.throughput_ops)),
        Column::num(format!("vs {first}"), |(_, r)| format!("{:.2}x", r.ratio)),
        Column::num("FD hit rate", |(_, r)| pct(r.fd_hit_rate)),
        Column::num(format!("p50 {u}"), |(unit, r)| unit.format(r.p50_us)),
        Column::num(format!("p99 {u}"), |(unit, r)| unit.format(r.p99_us)),
        Column::num(format!("p999 {u}"), |(unit, r)| unit.format(r.p999_us)),
        Column::num("FD read", |(_, r)| opt_bytes(r.fd_read_bytes)),
        Column::num("FD write", |(_, r)| opt_bytes(r.fd_write_bytes)),
        Column::num("SD read", |(_, r)| opt_bytes(r.sd_read_bytes)),
        Column::num("SD write", |(_, r)| opt_bytes(r.sd_write_bytes)),
        Column::num("promoted", |(_, r)| opt_bytes(r.promoted_bytes)),
        Column::num("retained", |(_, r)| opt_bytes(r.retained_bytes)),
    ];
    table(s, &columns, res.systems.iter().map(|r| (unit, r)));
}

/// A row of a latency table: the unit of the table, the system, one of its latency rows.
type LatencyRow<'a> = (LatencyUnit, &'a SystemResult, &'a OpLatency);

/// A table of latency rows (`rows_of` each system), under `heading`, with `columns` in the
/// unit their percentiles share; nothing when no system has two rows.
fn latency_rows_table(
    s: &mut String,
    res: &BenchResults,
    heading: &str,
    rows_of: fn(&SystemResult) -> &[OpLatency],
    columns: impl FnOnce(&str) -> [Column<LatencyRow<'_>>; 7],
) {
    if res.systems.iter().all(|r| rows_of(r).len() < 2) {
        return;
    }
    let unit = LatencyUnit::for_values(
        res.systems
            .iter()
            .flat_map(rows_of)
            .flat_map(|l| [l.p50_us, l.p99_us, l.p999_us]),
    );
    let _ = writeln!(s, "\n{heading}\n");
    let rows = res
        .systems
        .iter()
        .flat_map(|r| rows_of(r).iter().map(move |l| (unit, r, l)));
    table(s, &columns(unit.name()), rows);
}

/// Latency by kind of operation, when a run mixes kinds (a write's tail beside a read's).
fn latency_by_op_table(s: &mut String, res: &BenchResults) {
    let heading = "Latency by operation, over the whole run:";
    latency_rows_table(
        s,
        res,
        heading,
        |r| &r.latency_by_op,
        |u| {
            [
                Column::text("system", |(_, r, _)| r.name.clone()),
                Column::text("operation", |(_, _, l)| l.op.to_string()),
                Column::num("ops", |(_, _, l)| rate(l.ops as f64)),
                Column::num(format!("p50 {u}"), |(unit, _, l)| unit.format(l.p50_us)),
                Column::num(format!("p99 {u}"), |(unit, _, l)| unit.format(l.p99_us)),
                Column::num(format!("p999 {u}"), |(unit, _, l)| unit.format(l.p999_us)),
                Column::num(format!("max {u}"), |(unit, _, l)| unit.format(l.max_us)),
            ]
        },
    );
}

/// The latency of gets that waited on the slow disk beside the others', when some did: a
/// run of synchronous client threads is bound by the mean latency of a get, and this is
/// where it goes.
fn gets_by_tier_table(s: &mut String, res: &BenchResults) {
    let heading =
        "Gets by whether they read the slow disk (one get at a time), over the whole run:";
    latency_rows_table(
        s,
        res,
        heading,
        |r| &r.get_latency_by_tier,
        |u| {
            [
                Column::text("system", |(_, r, _)| r.name.clone()),
                Column::text("gets", |(_, _, l)| l.op.to_string()),
                Column::num("count", |(_, _, l)| rate(l.ops as f64)),
                Column::num(format!("mean {u}"), |(unit, _, l)| unit.format(l.mean_us)),
                Column::num(format!("p50 {u}"), |(unit, _, l)| unit.format(l.p50_us)),
                Column::num(format!("p99 {u}"), |(unit, _, l)| unit.format(l.p99_us)),
                Column::num(format!("p999 {u}"), |(unit, _, l)| unit.format(l.p999_us)),
            ]
        },
    );
}

/// Throughput over the whole run phase. The final 10% is a short window that a shared
/// machine moves by a third; the whole run is what comparisons between binaries and with
/// other drivers should use.
fn whole_run(s: &mut String, res: &BenchResults) {
    let whole: Vec<String> = res
        .systems
        .iter()
        .map(|r| {
            format!(
                "{} {} ops/s{}",
                r.name,
                rate(r.throughput_run_ops),
                r.cpu_us_per_op.map_or(String::new(), |c| format!(
                    " at {c:.1} us of process CPU per operation"
                ))
            )
        })
        .collect();
    let _ = writeln!(s, "\nWhole run phase: {}.", whole.join("; "));
}

/// A row of the bounds table: a system's slow-disk bound, the all-on-FD ceiling, the latency
/// bound, and the lowest of them it is held to.
struct BoundRow<'a> {
    r: &'a SystemResult,
    sd: f64,
    fd_ceiling: Option<f64>,
    latency: Option<f64>,
    bound: f64,
}

/// The latency bound of clients that issue one operation at a time: `threads` over the mean
/// operation time, which is at least the all-on-FD store's (`threads / fd_ops`) plus the
/// slow disk's service time for each slow-disk read an operation makes. Where the slow disk's
/// IOPS are far from used up (a high hit rate), this is the lower bound: the reads of cold
/// records cost their latency whatever the disk's spare IOPS.
pub fn latency_bound(
    threads: usize,
    fd_ops: f64,
    sd_reads_per_op: f64,
    sd_latency_us: u64,
) -> Option<f64> {
    if fd_ops <= 0.0 || sd_latency_us == 0 {
        return None;
    }
    let op_us = threads as f64 / fd_ops * 1e6 + sd_reads_per_op * sd_latency_us as f64;
    Some(threads as f64 / op_us * 1e6)
}

/// Throughput against the physical bound of the throttled slow disk.
fn bounds_table(s: &mut String, res: &BenchResults) {
    let c = &res.config;
    let bounded: Vec<&SystemResult> = res
        .systems
        .iter()
        .filter(|r| r.sd_bound_ops.is_some())
        .collect();
    if bounded.is_empty() {
        return;
    }
    let _ =
        writeln!(
        s,
        "\nPhysical bound of the throttled slow disk (`{}`: {} IOPS, {}/s) over the final 10%: \
         IOPS limit / SD I/Os per operation (reads and writes draw on the same limit), or the \
         bandwidth limit / SD bytes per operation if lower; and never above the all-on-FD \
         throughput measured in the same run, nor (clients one operation at a time) above the \
         latency bound: the client threads over the all-on-FD run's mean operation time plus \
         the modelled latency for each SD read per operation.\n",
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
    // Only where each slow read is waited for alone: a batched get or a scan keeps several
    // in flight, and their latencies overlap.
    let one_read_at_a_time = c.batch == 1 && c.workload.mix().scan == 0.0;
    let latency_bound_of = |r: &SystemResult| {
        let fd = fd_ceiling.filter(|_| one_read_at_a_time && r.name != "tierkv-fd")?;
        latency_bound(
            c.threads,
            fd,
            r.sd_reads_per_op.unwrap_or(0.0),
            c.sd_device.latency_us,
        )
    };
    let columns: [Column<BoundRow>; 9] = [
        Column::text("system", |b| b.r.name.clone()),
        Column::num("ops/s", |b| rate(b.r.throughput_ops)),
        Column::num("SD reads/op", |b| {
            format!("{:.3}", b.r.sd_reads_per_op.unwrap_or(0.0))
        }),
        Column::num("SD I/Os/op", |b| {
            format!("{:.3}", b.r.sd_ios_per_op.unwrap_or(0.0))
        }),
        Column::num("SD bound ops/s", |b| rate(b.sd)),
        Column::num("all-on-FD ops/s", |b| {
            b.fd_ceiling.map_or("-".to_string(), rate)
        }),
        Column::num("latency bound ops/s", |b| {
            b.latency.map_or("-".to_string(), rate)
        }),
        Column::num("bound ops/s", |b| rate(b.bound)),
        Column::num("share of bound", |b| {
            // The all-on-FD ceiling and the latency bound both come from the all-on-FD run.
            share_of_bound(b.r.throughput_ops, b.bound, b.bound < b.sd)
        }),
    ];
    let rows = bounded.into_iter().map(|r| {
        let sd = r.sd_bound_ops.unwrap_or(0.0);
        let latency = latency_bound_of(r);
        let bound = [fd_ceiling, latency]
            .into_iter()
            .flatten()
            .fold(sd, f64::min);
        BoundRow {
            r,
            sd,
            fd_ceiling,
            latency,
            bound,
        }
    });
    table(s, &columns, rows);
}

/// The hotness tracker's sizes against their limits.
fn ralt_table(s: &mut String, res: &BenchResults) {
    let ralt: Vec<&SystemResult> = res
        .systems
        .iter()
        .filter(|r| r.ralt_hot_set_bytes.is_some())
        .collect();
    if ralt.is_empty() {
        return;
    }
    let _ = writeln!(s, "\nHotness tracker (RALT) at the end of the run:\n");
    let columns: [Column<&SystemResult>; 5] = [
        Column::text("system", |r| r.name.clone()),
        Column::num("hot set", |r| opt_bytes(r.ralt_hot_set_bytes)),
        Column::num("hot set limit", |r| opt_bytes(r.ralt_hot_set_limit)),
        Column::num("physical size", |r| opt_bytes(r.ralt_physical_bytes)),
        Column::num("physical limit", |r| opt_bytes(r.ralt_physical_limit)),
    ];
    table(s, &columns, ralt);
}

/// Bytes with their amplification in parentheses when known.
fn with_amp(b: Option<u64>, a: Option<f64>) -> String {
    match (b, a) {
        (Some(b), Some(a)) => format!("{} ({a:.2})", bytes(b)),
        (Some(b), None) => bytes(b),
        _ => "n/a".to_string(),
    }
}

/// Background traffic and write amplification by tier.
fn background_table(s: &mut String, res: &BenchResults) {
    let bg: Vec<(&SystemResult, &BackgroundTraffic)> = res
        .systems
        .iter()
        .filter_map(|r| r.background.as_ref().map(|b| (r, b)))
        .collect();
    if bg.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\nBackground traffic of the run phase (flushes, compactions, promotion, hotness \
         tracking; not the WAL), counted until background work settled after the last \
         operation so that compaction debt is included: bytes, and in parentheses per \
         byte users wrote (write amplification by tier); `during run`: background writes \
         while the operations ran. Block reuse: share of compacted data-block bytes \
         copied as stored. SD compaction: slow-disk bandwidth compactions used during the \
         run, mean / peak interval.\n"
    );
    let columns: [Column<(&SystemResult, &BackgroundTraffic)>; 11] = [
        Column::text("system", |(r, _)| r.name.clone()),
        Column::num("user writes", |(_, b)| bytes(b.user_bytes_written)),
        Column::num("background writes", |(_, b)| {
            with_amp(Some(b.write_bytes), b.write_amp)
        }),
        Column::num("during run", |(_, b)| bytes(b.run_phase_write_bytes)),
        Column::num("settle s", |(_, b)| {
            b.settle_seconds
                .map_or("-".to_string(), |s| format!("{s:.1}"))
        }),
        Column::num("FD write", |(_, b)| {
            with_amp(b.fd_write_bytes, b.fd_write_amp)
        }),
        Column::num("SD write", |(_, b)| {
            with_amp(b.sd_write_bytes, b.sd_write_amp)
        }),
        Column::num("FD read", |(_, b)| with_amp(b.fd_read_bytes, b.fd_read_amp)),
        Column::num("SD read", |(_, b)| with_amp(b.sd_read_bytes, b.sd_read_amp)),
        Column::num("block reuse", |(_, b)| {
            match (b.reused_block_bytes, b.rewritten_block_bytes) {
                (Some(u), Some(w)) if u + w > 0 => {
                    format!("{:.1}%", 100.0 * u as f64 / (u + w) as f64)
                }
                _ => "n/a".to_string(),
            }
        }),
        Column::num("SD compaction MiB/s", |(_, b)| {
            match (b.sd_compaction_mib_s, b.sd_compaction_peak_mib_s) {
                (Some(m), Some(p)) => format!("{m:.1} / {p:.1}"),
                (Some(m), None) => format!("{m:.1}"),
                _ => "n/a".to_string(),
            }
        }),
    ];
    table(s, &columns, bg);
}

/// The climb of a one-phase run: operations until the FD hit rate first reached
/// [`CLIMB_HIT_RATE`] (phased runs give it per phase in the phases table).
fn climb(s: &mut String, res: &BenchResults) {
    if res.systems.iter().any(|r| r.phases.len() > 1) {
        return;
    }
    let cells: Vec<String> = res
        .systems
        .iter()
        .filter(|r| r.fd_hit_rate_run.is_some())
        .map(|r| {
            let at = r.phases.first().and_then(|p| p.ops_to_climb);
            format!("{} {}", r.name, climb_cell(at, r.ops))
        })
        .collect();
    if cells.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\nClimb to a {:.0}% FD hit rate (the first timeline interval at or above it): {}.",
        CLIMB_HIT_RATE * 100.0,
        cells.join("; ")
    );
}

/// "after N ops (P% of them)" or "never", of a span of `ops` operations.
fn climb_cell(at: Option<u64>, ops: u64) -> String {
    match at {
        Some(n) => format!(
            "after {} ops ({:.0}%)",
            rate(n as f64),
            100.0 * n as f64 / ops.max(1) as f64
        ),
        None => "never".to_string(),
    }
}

/// Throughput by phase of a phased workload (left out when every system ran one phase).
fn phases_table(s: &mut String, res: &BenchResults) {
    if !res.systems.iter().any(|r| r.phases.len() > 1) {
        return;
    }
    let _ = writeln!(
        s,
        "\nThroughput by phase (ops/s over the whole phase / over its second half; in \
         brackets, disk reads of gets and scans per operation over the same spans; then \
         the climb: operations until the FD hit rate first reached {:.0}%; then the FD hit \
         rate at the phase's midpoint and end, over 45-55% and 90-100% of its operations):\n",
        CLIMB_HIT_RATE * 100.0
    );
    let n = res
        .systems
        .iter()
        .map(|r| r.phases.len())
        .max()
        .unwrap_or(0);
    table_line(
        s,
        std::iter::once("system".to_string()).chain((0..n).map(|i| format!("phase {i}"))),
    );
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
                let climb = match r.fd_hit_rate_run {
                    Some(_) => format!(
                        ", {:.0}% {}",
                        CLIMB_HIT_RATE * 100.0,
                        climb_cell(p.ops_to_climb, p.ops)
                    ),
                    None => String::new(),
                };
                let mid_end = match (p.fd_hit_mid, p.fd_hit_end) {
                    (Some(m), Some(e)) => {
                        format!("; FD hit {:.0}% / {:.0}%", m * 100.0, e * 100.0)
                    }
                    _ => String::new(),
                };
                format!(
                    "{} / {}{ios}{climb}{mid_end}",
                    rate(p.ops_per_sec),
                    rate(p.second_half_ops_per_sec)
                )
            })
            .collect();
        // Joined rather than one cell each: a system without phases still gets its
        // (empty) cell.
        let _ = writeln!(s, "| {} | {} |", r.name, cells.join(" | "));
    }
}

/// Memory against the memory budget ([`crate::budget`]'s figures).
fn memory_table(s: &mut String, res: &BenchResults) {
    let mem: Vec<(&SystemResult, &MemoryUse)> = res
        .systems
        .iter()
        .filter_map(|r| r.memory.as_ref().map(|m| (r, m)))
        .filter(|(_, m)| m.rss_peak_bytes.is_some())
        .collect();
    if mem.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\nMemory during the run phase: peak resident set size (`VmHWM`, reset before each \
         system's open; the allocator's free memory is trimmed between systems) against the \
         memory budget. \"Added\" is the peak less the resident size before the open (the \
         bench's own plan, buffers and code); \"overhead\" is what of it the budget does \
         not cover (thread stacks, compaction and read buffers, allocator slack). \
         \"Engine peak\" is tierkv's own accounting of its budgeted components. \
         \"Anon\": anonymous memory only (heap and stacks, not the binary's pages), before \
         the open and the highest sampled once per interval.\n"
    );
    let columns: [Column<(&SystemResult, &MemoryUse)>; 9] = [
        Column::text("system", |(r, _)| r.name.clone()),
        Column::num("budget", |(_, m)| opt_bytes(m.budget)),
        Column::num("engine peak", |(_, m)| opt_bytes(m.engine_peak_bytes)),
        Column::num("RSS before", |(_, m)| opt_bytes(m.rss_before_bytes)),
        Column::num("peak RSS", |(_, m)| opt_bytes(m.rss_peak_bytes)),
        Column::num("added", |(_, m)| opt_bytes(m.rss_added_bytes)),
        Column::num("overhead", |(_, m)| opt_bytes(m.overhead_bytes)),
        Column::num("anon before", |(_, m)| opt_bytes(m.anon_before_bytes)),
        Column::num("anon peak", |(_, m)| opt_bytes(m.anon_peak_bytes)),
    ];
    table(s, &columns, mem);
}

/// An amplification ratio, `-` when unknown.
fn amp_ratio(a: Option<f64>) -> String {
    a.map_or_else(|| "-".to_string(), |a| format!("{a:.2}"))
}

/// Disk bytes per user byte by tier, F2's Table 2 ([`crate::budget`]'s figures).
fn io_amp_table(s: &mut String, res: &BenchResults) {
    let io: Vec<(&SystemResult, &IoAmplification)> = res
        .systems
        .iter()
        .filter_map(|r| r.io_amp.as_ref().map(|a| (r, a)))
        .collect();
    if io.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\nI/O amplification over the run phase and its settling (as F2's Table 2): disk \
         bytes read per byte users read, disk bytes written (WAL included) per byte users \
         wrote, by tier (RocksDB cannot split its I/O by tier: its totals are the \
         process's read and write system calls, all direct I/O on its files).\n"
    );
    let columns: [Column<(&SystemResult, &IoAmplification)>; 9] = [
        Column::text("system", |(r, _)| r.name.clone()),
        Column::num("user read", |(_, a)| bytes(a.user_read_bytes)),
        Column::num("user write", |(_, a)| bytes(a.user_write_bytes)),
        Column::num("read amp FD", |(_, a)| amp_ratio(a.fd_read_amp)),
        Column::num("read amp SD", |(_, a)| amp_ratio(a.sd_read_amp)),
        Column::num("read amp", |(_, a)| amp_ratio(a.read_amp)),
        Column::num("write amp FD", |(_, a)| amp_ratio(a.fd_write_amp)),
        Column::num("write amp SD", |(_, a)| amp_ratio(a.sd_write_amp)),
        Column::num("write amp", |(_, a)| amp_ratio(a.write_amp)),
    ];
    table(s, &columns, io);
}

/// One cache component from the engine's statistics: `size / hit rate`.
fn cache_component(cache: &serde_json::Value, name: &str) -> String {
    let x = &cache[name];
    format!(
        "{} / {}",
        bytes(x["bytes"].as_u64().unwrap_or(0)),
        pct(x["hit_rate"].as_f64())
    )
}

/// The cache's components at the end of the run (from the engine's own statistics).
fn cache_table(s: &mut String, res: &BenchResults) {
    let caches: Vec<(&SystemResult, &serde_json::Value)> = res
        .systems
        .iter()
        .filter_map(|r| r.engine_stats.get("cache").map(|c| (r, c)))
        .filter(|(_, c)| c.get("mode").is_some())
        .collect();
    if caches.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\nCache at the end of the run (size / hit rate; KV and KP hit rates are shares of \
         point lookups; ghosts on/off and their memory):\n"
    );
    let columns: [Column<(&SystemResult, &serde_json::Value)>; 6] = [
        Column::text("system", |(r, _)| r.name.clone()),
        Column::text("mode", |(_, c)| {
            c["mode"].as_str().unwrap_or("?").to_string()
        }),
        Column::num("KV", |(_, c)| cache_component(c, "kv")),
        Column::num("KP", |(_, c)| cache_component(c, "kp")),
        Column::num("block", |(_, c)| cache_component(c, "block")),
        Column::num("ghosts", |(_, c)| {
            let on = c["ghosts_on"].as_bool().unwrap_or(false);
            let ghost_bytes = bytes(c["ghost_bytes"].as_u64().unwrap_or(0));
            format!("{} {ghost_bytes}", if on { "on" } else { "off" })
        }),
    ];
    table(s, &columns, caches);
}

/// Where the charts and the full data are.
fn charts(s: &mut String, _: &BenchResults) {
    let _ = writeln!(
        s,
        "\nCharts: `throughput.png`, `fd_hit_rate.png`, `sd_read.png`, `sd_compaction.png` \
         (slow-disk bandwidth of compactions), `cache_<system>.png` (cache component sizes \
         over time). Full data: `results.json`."
    );
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
    use crate::results::tests::sample_results;
    use crate::results::RESULTS_VERSION;

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
    fn latency_columns_share_one_unit() {
        assert_eq!(
            LatencyUnit::for_values([5.0, 90.0, 9_999.0]),
            LatencyUnit::Us
        );
        assert_eq!(
            LatencyUnit::for_values([500.0, 900.0, 15_100.0]),
            LatencyUnit::Ms
        );
        assert_eq!(LatencyUnit::Ms.format(500.0), "0.50");
        assert_eq!(LatencyUnit::Ms.format(15_100.0), "15.10");
        assert_eq!(LatencyUnit::Us.format(450.4), "450");
        assert_eq!(LatencyUnit::Us.format(12.34), "12.3");
        assert_eq!(latency_with_unit(15_100.0), "15.10 ms");
        assert_eq!(latency_with_unit(450.0), "450 us");

        let dir = tempfile::tempdir().unwrap();
        let mut res = sample_results(dir.path());
        let md = markdown(&res);
        assert!(md.contains("| p50 us | p99 us | p999 us |"), "{md}");
        // One slow tail moves every latency column of the table to ms, not just its cell.
        res.systems[1].p999_us = 15_100.0;
        let md = markdown(&res);
        assert!(md.contains("| p50 ms | p99 ms | p999 ms |"), "{md}");
        assert!(md.contains("| 15.10 |"), "{md}");
        assert!(!md.contains("15.1 ms"), "{md}");
        let p50 = LatencyUnit::Ms.format(res.systems[0].p50_us);
        assert!(md.contains(&format!("| {p50} |")), "{md}");
    }

    /// Invariant: with one operation at a time per client, a store that reads the slow disk
    /// runs no faster than the clients over the all-on-FD mean operation time plus the slow
    /// disk's latency per slow read; without a latency or an all-on-FD run there is none.
    #[test]
    fn the_latency_bound_adds_the_slow_disks_latency_per_slow_read() {
        // 16 clients at 64,000 ops/s: 250 us an operation; 0.05 slow reads of 500 us: 275.
        let bound = latency_bound(16, 64_000.0, 0.05, 500).unwrap();
        assert!((bound - 16.0 / 275e-6).abs() < 1e-6, "{bound}");
        assert_eq!(latency_bound(16, 64_000.0, 0.0, 500), Some(64_000.0));
        assert_eq!(latency_bound(16, 64_000.0, 0.05, 0), None);
        assert_eq!(latency_bound(16, 0.0, 0.05, 500), None);
    }

    #[test]
    fn throughput_above_its_bound_is_called_noise_not_a_share_over_100() {
        assert_eq!(share_of_bound(900.0, 1000.0, true), "90%");
        assert_eq!(share_of_bound(1000.0, 1000.0, false), "100%");
        let over = share_of_bound(1100.0, 1000.0, true);
        assert!(
            over.starts_with("at the bound (+10%, within noise"),
            "{over}"
        );
        assert!(over.contains("all-on-FD"), "{over}");
        assert!(!over.contains("110%"), "{over}");
        let far = share_of_bound(1500.0, 1000.0, false);
        assert!(
            far.contains("150%") && far.contains("more than noise"),
            "{far}"
        );
        let far_fd = share_of_bound(1230.0, 1000.0, true);
        assert!(
            far_fd.starts_with("above all-on-FD's bound by 23% (another run"),
            "{far_fd}"
        );
        assert!(!far_fd.contains("123%"), "{far_fd}");
        assert_eq!(share_of_bound(10.0, 0.0, false), "-");

        // tierkv measured 10% above tierkv-fd, whose run gives its binding bound here (the
        // latency bound: 1,798 ops/s at 0.1 slow reads per operation of gp3's 500 us).
        let dir = tempfile::tempdir().unwrap();
        let mut res = sample_results(dir.path());
        res.systems[2].throughput_ops = res.systems[0].throughput_ops / 1.1;
        let md = markdown(&res);
        assert!(
            md.contains("| 1,818 | 1,798 | 1,798 | at the bound (+11%, within noise: the all-on-FD run is another run)"),
            "{md}"
        );
        assert!(!md.contains("110%"), "{md}");
    }

    #[test]
    fn a_shared_load_is_named_by_the_systems_that_share_it() {
        let dir = tempfile::tempdir().unwrap();
        let res = sample_results(dir.path());
        use crate::systems::System;
        assert_eq!(
            load_label(&res.config, System::Tierkv),
            "load shared by tierkv, tierkv-nopromo"
        );
        assert_eq!(load_label(&res.config, System::TierkvFd), "tierkv-fd");
        let mut cfg = res.config.clone();
        cfg.systems = vec![System::Tierkv, System::TierkvFd];
        assert_eq!(load_label(&cfg, System::Tierkv), "tierkv");
    }

    /// `tierkv::testing::assert_golden` over this crate's `tests/golden`.
    pub(crate) fn assert_golden(name: &str, got: &str) {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
        tierkv::testing::assert_golden(&dir, name, got);
    }

    /// [`sample_results`] with every section of the report filled in, and both sides of
    /// each choice a cell makes (present and missing figures, ghosts on and off, ...).
    fn full_results(dir: &Path) -> BenchResults {
        let mut res = sample_results(dir);
        res.command = "tierkv bench --scale smoke --batch 8".into();
        let c = &mut res.config;
        c.batch = 8;
        c.read_io = "threads".into();
        c.semi_block_size = Some(4096);
        c.block_records = Some(16);
        c.last_level_filters = tierkv::LastLevelFilters::Never;
        let [a, b, fd] = &mut res.systems[..] else {
            panic!("three systems")
        };
        b.cpu_us_per_op = None;
        fd.phases.truncate(1);
        let bg = a.background.as_mut().unwrap();
        bg.settle_seconds = Some(1.5);
        let bg = b.background.as_mut().unwrap();
        (bg.fd_write_amp, bg.sd_compaction_peak_mib_s) = (None, None);
        bg.reused_block_bytes = None;
        let bg = fd.background.as_mut().unwrap();
        (bg.sd_write_bytes, bg.sd_compaction_mib_s) = (None, None);
        a.memory = Some(MemoryUse {
            budget: Some(64 << 20),
            rss_before_bytes: Some(10 << 20),
            rss_peak_bytes: Some(90 << 20),
            rss_added_bytes: Some(80 << 20),
            overhead_bytes: Some(16 << 20),
            anon_before_bytes: Some(6 << 20),
            anon_peak_bytes: Some(70 << 20),
            engine_peak_bytes: Some(60 << 20),
        });
        b.memory = Some(MemoryUse {
            rss_peak_bytes: Some(50 << 20),
            ..Default::default()
        });
        fd.io_amp = None;
        let cache = |mode: &str, ghosts: bool| {
            serde_json::json!({
                "mode": mode,
                "kv": {"bytes": 3 << 20, "hit_rate": 0.5},
                "kp": {"bytes": 1 << 20, "hit_rate": null},
                "block": {"bytes": 4 << 20, "hit_rate": 0.25},
                "ghosts_on": ghosts,
                "ghost_bytes": 2048
            })
        };
        a.engine_stats["cache"] = cache("adaptive", true);
        b.engine_stats = serde_json::json!({ "cache": cache("block", false) });
        res
    }

    #[test]
    fn the_full_report_is_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        assert_golden("report_full.md", &markdown(&full_results(dir.path())));
    }

    #[test]
    fn a_sparse_report_is_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let mut res = sample_results(dir.path());
        res.command = "tierkv bench --trace /traces/t.csv".into();
        res.config.trace = Some("/traces/t.csv".into());
        res.systems.truncate(2);
        let r = &mut res.systems[1];
        // Its bound is its slow disk's alone: no tierkv-fd ran.
        (r.background, r.memory, r.io_amp) = (None, None, None);
        r.cpu_us_per_op = None;
        res.systems.remove(0);
        res.systems[0].phases.truncate(1);
        assert_golden("report_sparse.md", &markdown(&res));
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

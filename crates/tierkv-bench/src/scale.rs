//! Scale presets (`smoke`, `small`, `paper`) and the resolved run configuration: flags
//! override the preset, and values the user did not give are derived as in docs/DESIGN.md
//! ("Measuring"): about 11x the fast-disk budget loaded, about 2 operations
//! per KiB loaded, engine sizes scaled to the budget. Sits above the plain names (`mix`,
//! `systems`, `distribution`) and below everything that runs or reports.

use serde::Serialize;
use std::path::PathBuf;
use std::str::FromStr;

use crate::args::BenchArgs;
use crate::distribution::DistSpec;
use crate::error::{BenchError, Result};
use crate::mix::Workload;
use crate::systems::System;
use crate::workload::{KEY_SIZE, MIN_KEY_SIZE};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
/// Record size of F2's driver: an 8-byte key and a 100-byte value.
pub const F2_RECORD_SIZE: u64 = 108;

/// A preset size of the whole benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    /// Seconds: CI's check that everything runs and reports.
    Smoke,
    /// The default: a few minutes on two cores, all default systems.
    Small,
    /// Hours: the paper's setup scaled to one machine (1 GiB fast disk).
    Paper,
}

impl FromStr for Scale {
    type Err = BenchError;

    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "smoke" => Ok(Scale::Smoke),
            "small" => Ok(Scale::Small),
            "paper" => Ok(Scale::Paper),
            _ => Err(BenchError::InvalidArgument(format!(
                "unknown scale {s:?}: expected smoke, small or paper"
            ))),
        }
    }
}

/// A preset's values, before flags override them.
#[derive(Clone, Debug)]
pub struct Preset {
    /// Fast-disk budget in bytes.
    pub fd_budget: u64,
    /// Records loaded per byte of fast-disk budget.
    pub load_factor: f64,
    /// Run-phase operations per KiB loaded.
    pub ops_per_kib: f64,
    /// Cap on run-phase operations (keeps the slowest system's run bounded).
    pub max_ops: Option<u64>,
    /// Client threads.
    pub threads: usize,
    /// Seconds per timeline point.
    pub interval: f64,
}

impl Scale {
    /// The preset's values.
    pub fn preset(self) -> Preset {
        match self {
            Scale::Smoke => Preset {
                fd_budget: 4 * MIB,
                load_factor: 11.0,
                ops_per_kib: 1.0,
                max_ops: Some(30_000),
                threads: 8,
                interval: 0.5,
            },
            Scale::Small => Preset {
                fd_budget: 32 * MIB,
                load_factor: 11.0,
                ops_per_kib: 2.0,
                max_ops: None,
                threads: 16,
                // About 5K operations a point in the default run: the climb to a 90% FD
                // hit rate (issue 46's figure) is read to that, not to 20-40K.
                interval: 0.25,
            },
            Scale::Paper => Preset {
                fd_budget: GIB,
                load_factor: 11.0,
                ops_per_kib: 2.0,
                max_ops: None,
                threads: 16,
                interval: 1.0,
            },
        }
    }
}

/// Everything a run needs, resolved from flags and the preset. Serialized into
/// `results.json` so a result always says how it was produced.
#[derive(Clone, Debug, Serialize)]
pub struct Config {
    /// The preset.
    pub scale: Scale,
    /// Operation mix.
    #[serde(serialize_with = "ser_workload")]
    pub workload: Workload,
    /// Key distribution.
    #[serde(serialize_with = "ser_dist")]
    pub distribution: DistSpec,
    /// Trace replayed instead of generated operations.
    pub trace: Option<PathBuf>,
    /// Rows whose keys the load phase writes before the trace's own (`--trace-load`).
    pub trace_load: Option<PathBuf>,
    /// F2 driver key files (load, run) replayed instead of generated keys.
    pub key_files: Option<(PathBuf, PathBuf)>,
    /// Key plus value bytes of generated records.
    pub record_size: u64,
    /// Key bytes of generated records.
    pub key_size: usize,
    /// Value bytes of generated records.
    pub value_size: u64,
    /// Records loaded (for a trace: filled in from its distinct keys).
    pub records: u64,
    /// Bytes (keys and values) the load phase writes.
    pub loaded_bytes: u64,
    /// Run-phase operations (for a trace: at most this many of its rows).
    pub ops: u64,
    /// Client threads.
    pub threads: usize,
    /// Gets each client thread issues as one batched read (1: one at a time).
    pub batch: usize,
    /// Fast-disk budget.
    pub fd_budget: u64,
    /// Slow-disk device model, as given.
    pub sd_profile: String,
    /// The parsed device model.
    #[serde(skip)]
    pub sd_device: tierkv::DeviceProfile,
    /// Systems, in report order (the first is the ratio's reference).
    pub systems: Vec<System>,
    /// Output directory.
    pub out: PathBuf,
    /// Parent of the fast-tier directories.
    pub fast_root: PathBuf,
    /// Parent of the slow-tier directories.
    pub slow_root: PathBuf,
    /// Operation seed.
    pub seed: u64,
    /// Block cache bytes (with a memory budget: the cache's share of it).
    pub cache_size: u64,
    /// The memory budget of each tierkv system (`None`: sized by the options above).
    pub memory_budget: Option<u64>,
    /// Memtable size (scaled to the budget).
    pub write_buffer_size: u64,
    /// Table file target size (scaled to the budget).
    pub target_file_size: u64,
    /// L1 target size (scaled to the budget).
    pub level_base: u64,
    /// Records per data block of tierkv systems (`None`: the engine's default).
    pub block_records: Option<usize>,
    /// Largest semi-sorted data block of tierkv systems (`None`: the engine's default).
    pub semi_block_size: Option<usize>,
    /// The fast disk's record cache of tierkv systems (`None`: the engine's default).
    pub record_cache: Option<bool>,
    /// Bloom filters on tierkv's deepest level.
    pub last_level_filters: tierkv::LastLevelFilters,
    /// tierkv's read path for batches (`Options::read_io`: auto, uring or threads).
    pub read_io: String,
    /// Seconds per timeline point.
    pub interval: f64,
    /// Keep stores after their runs.
    pub keep_data: bool,
    /// Show progress bars.
    pub progress: bool,
}

fn ser_workload<S: serde::Serializer>(w: &Workload, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(w.name())
}

fn ser_dist<S: serde::Serializer>(d: &DistSpec, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&d.describe())
}

/// An invalid flag, as the error `from_args` returns.
fn bad<T>(m: impl Into<String>) -> Result<T> {
    Err(BenchError::InvalidArgument(m.into()))
}

/// The F2 driver key files (load, run), when given, checked against the flags they
/// replace.
fn key_files(a: &BenchArgs, workload: Workload) -> Result<Option<(PathBuf, PathBuf)>> {
    let key_files = match (&a.load_keys, &a.run_keys) {
        (Some(l), Some(r)) => Some((l.clone(), r.clone())),
        (None, None) => None,
        _ => return bad("--load-keys and --run-keys go together"),
    };
    if key_files.is_some() {
        if a.trace.is_some() || a.distribution.is_some() || a.records.is_some() {
            return bad(
                "--load-keys/--run-keys decide the keys and the record count: drop --trace, --distribution and --records",
            );
        }
        if a.key_size.is_some_and(|k| k != MIN_KEY_SIZE) {
            return bad(format!(
                "key files hold {MIN_KEY_SIZE}-byte keys: drop --key-size"
            ));
        }
        if workload.mix().insert > 0.0 {
            return bad(format!(
                "--workload {} inserts new records, which key files cannot name: use a, b, c, f, ro, uh or scan",
                workload.name()
            ));
        }
    }
    Ok(key_files)
}

/// The key and record sizes of generated records: `--key-size` and `--record-size`, or
/// F2's driver's (8-byte keys, 100-byte values) for key files.
fn record_shape(a: &BenchArgs, key_files: bool) -> Result<(usize, u64)> {
    let key_size = a
        .key_size
        .unwrap_or(if key_files { MIN_KEY_SIZE } else { KEY_SIZE });
    if !(MIN_KEY_SIZE..=1024).contains(&key_size) {
        return bad(format!(
            "--key-size {key_size} must be in {MIN_KEY_SIZE}..=1024 bytes"
        ));
    }
    let record_size = a
        .record_size
        .unwrap_or(if key_files { F2_RECORD_SIZE } else { KIB });
    if record_size <= key_size as u64 || record_size > 64 * MIB {
        return bad(format!(
            "--record-size {record_size} must be above the {key_size}-byte key and at most 64 MiB"
        ));
    }
    Ok((key_size, record_size))
}

/// Records loaded and operations run: the flags, or the preset's ratios to the fast-disk
/// budget (docs/DESIGN.md, "Measuring"). `replayed`: a trace or key files decide them.
fn volume(
    a: &BenchArgs,
    p: &Preset,
    fd_budget: u64,
    record_size: u64,
    replayed: bool,
) -> Result<(u64, u64)> {
    let records = match a.records {
        Some(n) => n,
        None => ((fd_budget as f64 * p.load_factor) / record_size as f64).round() as u64,
    };
    if records == 0 && !replayed {
        return bad("--records must be positive");
    }
    let ops = match a.ops {
        Some(n) => n,
        // A trace is replayed whole unless --ops caps it; a run file once.
        None if replayed => u64::MAX,
        None => {
            let loaded_kib = records as f64 * record_size as f64 / KIB as f64;
            let n = (loaded_kib * p.ops_per_kib).round() as u64;
            p.max_ops.map_or(n, |m| n.min(m))
        }
    };
    if ops == 0 {
        return bad("--ops must be positive");
    }
    Ok((records, ops))
}

/// The systems `--systems` names (each once), or the default three.
fn systems(a: &BenchArgs) -> Result<Vec<System>> {
    let names = a.systems.clone().unwrap_or_else(|| {
        vec![
            "tierkv".to_string(),
            "tierkv-nopromo".to_string(),
            "tierkv-fd".to_string(),
        ]
    });
    let mut systems = Vec::new();
    for n in names.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        let s: System = n.parse()?;
        if systems.contains(&s) {
            return bad(format!("--systems lists {n} twice"));
        }
        systems.push(s);
    }
    if systems.is_empty() {
        return bad("--systems is empty");
    }
    Ok(systems)
}

/// Engine sizes scaled to the fast-disk budget, or divided from the memory budget.
struct EngineSizes {
    write_buffer_size: u64,
    target_file_size: u64,
    level_base: u64,
    cache_size: u64,
}

impl EngineSizes {
    fn new(a: &BenchArgs, fd_budget: u64) -> Result<EngineSizes> {
        // Engine sizes follow the paper's ratios (10 GB fast disk: 64 MiB memtables and
        // files, 256 MiB L1), clamped so tiny budgets still get sane files.
        let mut write_buffer_size = a
            .write_buffer_size
            .unwrap_or((fd_budget / 128).clamp(MIB, 64 * MIB));
        let target_file_size = a.target_file_size.unwrap_or(write_buffer_size);
        let level_base = a
            .level_base
            .unwrap_or((fd_budget / 32).clamp(2 * MIB, 256 * MIB));
        // The paper's 128 MiB cache for 10 GB of fast disk.
        let mut cache_size = a
            .cache_size
            .unwrap_or((fd_budget / 80).clamp(MIB, 128 * MIB));
        if let Some(budget) = a.memory_budget {
            if a.cache_size.is_some() {
                return bad("--memory-budget sizes the cache: drop --cache-size");
            }
            // tierkv's division with promotion on (the first system's usual case; each
            // system divides its own budget at open): these sizes go to the report and to
            // RocksDB, whose memtables and block cache then match tierkv's.
            let d = memory_division(budget, fd_budget)?;
            write_buffer_size = d.write_buffer_size as u64;
            cache_size = d.cache as u64;
        }
        Ok(EngineSizes {
            write_buffer_size,
            target_file_size,
            level_base,
            cache_size,
        })
    }
}

impl Config {
    /// Resolves the flags against the preset and checks every value (in the order the
    /// flags' errors are reported).
    pub fn from_args(a: &BenchArgs) -> Result<Config> {
        let scale: Scale = a.scale.parse()?;
        let p = scale.preset();
        let workload: Workload = a.workload.as_deref().unwrap_or("ro").parse()?;
        let distribution = match (&a.distribution, DistSpec::of_workload(workload)) {
            (Some(d), _) => DistSpec::parse(d)?,
            (None, Some(d)) => d,
            (None, None) => DistSpec::parse("hotspot-5%")?,
        };
        let key_files = key_files(a, workload)?;
        let (key_size, record_size) = record_shape(a, key_files.is_some())?;
        let fd_budget = a.fd_budget.unwrap_or(p.fd_budget);
        if fd_budget < MIB {
            return bad(format!("--fd-budget {fd_budget} is below 1 MiB"));
        }
        let replayed = a.trace.is_some() || key_files.is_some();
        let (records, ops) = volume(a, &p, fd_budget, record_size, replayed)?;
        let threads = a.threads.unwrap_or(p.threads);
        if !(1..=1024).contains(&threads) {
            return bad(format!("--threads {threads} must be in 1..=1024"));
        }
        let batch = a.batch.unwrap_or(1);
        if !(1..=4096).contains(&batch) {
            return bad(format!("--batch {batch} must be in 1..=4096"));
        }
        let sd_profile = a.sd_profile.clone().unwrap_or_else(|| "gp3".into());
        let read_io = a
            .read_io
            .clone()
            .unwrap_or_else(|| tierkv::Options::default().read_io.name().into());
        if let Err(e) = read_io.parse::<tierkv::ReadIo>() {
            return bad(e.to_string());
        }
        let last_level_filters = match (&a.last_level_filters, a.no_last_level_filters) {
            (Some(rule), _) => rule
                .parse()
                .map_err(|e| BenchError::InvalidArgument(format!("--last-level-filters: {e}")))?,
            (None, true) => tierkv::LastLevelFilters::Never,
            (None, false) => tierkv::Options::default().last_level_filters,
        };
        let sd_device: tierkv::DeviceProfile = sd_profile.parse().map_err(|e: tierkv::Error| {
            BenchError::InvalidArgument(format!("--slow-device: {e}"))
        })?;
        let systems = systems(a)?;
        // A phase of the phased presets lasts a few seconds: its midpoint and end hit rates
        // (`PhaseResult::fd_hit_mid`, `fd_hit_end`, over a tenth of its operations each)
        // need several timeline points per phase.
        let phased = matches!(distribution, DistSpec::Phased(_));
        let interval = a.interval.unwrap_or(if phased {
            p.interval.min(0.25)
        } else {
            p.interval
        });
        if !(0.05..=3600.0).contains(&interval) {
            return bad(format!(
                "--interval {interval} must be in 0.05..=3600 seconds"
            ));
        }
        let sizes = EngineSizes::new(a, fd_budget)?;
        let out = a.out.clone();
        Ok(Config {
            scale,
            workload,
            distribution,
            trace: a.trace.clone(),
            trace_load: a.trace_load.clone(),
            key_files,
            record_size,
            key_size,
            value_size: record_size - key_size as u64,
            records,
            loaded_bytes: records.saturating_mul(record_size),
            ops,
            threads,
            batch,
            fd_budget,
            sd_profile,
            sd_device,
            systems,
            fast_root: a.fast_dir.clone().unwrap_or_else(|| out.clone()),
            slow_root: a.slow_dir.clone().unwrap_or_else(|| out.clone()),
            out,
            seed: a.seed.unwrap_or(42),
            cache_size: sizes.cache_size,
            memory_budget: a.memory_budget,
            write_buffer_size: sizes.write_buffer_size,
            target_file_size: sizes.target_file_size,
            level_base: sizes.level_base,
            block_records: a.block_records,
            semi_block_size: a
                .semi_block_size
                .map(|b| usize::try_from(b).unwrap_or(usize::MAX)),
            record_cache: match a.record_cache.as_deref() {
                None => None,
                Some("on") => Some(true),
                Some("off") => Some(false),
                Some(other) => {
                    return Err(BenchError::InvalidArgument(format!(
                        "--record-cache {other}: expected on or off"
                    )))
                }
            },
            last_level_filters,
            read_io,
            interval,
            keep_data: a.keep_data,
            progress: !a.no_progress,
        })
    }

    /// The workload's display name, for reports.
    pub fn workload_label(&self) -> String {
        match &self.trace {
            Some(t) => format!("trace {}", t.display()),
            None => match self.workload {
                Workload::A
                | Workload::B
                | Workload::C
                | Workload::D
                | Workload::E
                | Workload::F => {
                    format!("YCSB {}", self.workload.name().to_uppercase())
                }
                w => w.name().to_uppercase(),
            },
        }
    }

    /// Where the keys come from, for reports: the distribution, the trace or the key files.
    pub fn keys_label(&self) -> String {
        match (&self.trace, &self.key_files) {
            (Some(_), _) => "from the trace".to_string(),
            (None, Some((load, run))) => format!(
                "key files {} (load) and {} (run)",
                load.display(),
                run.display()
            ),
            (None, None) => self.distribution.describe(),
        }
    }
}

/// tierkv's division of `budget` for a two-tier store with promotion.
pub fn memory_division(budget: u64, fd_budget: u64) -> Result<tierkv::MemoryDivision> {
    let budget = usize::try_from(budget).unwrap_or(usize::MAX);
    let opts = tierkv::Options {
        fd_budget: Some(fd_budget),
        slow: Some(tierkv::SlowTier {
            dir: PathBuf::new(),
            budget: None,
            device: tierkv::DeviceProfile::none(),
        }),
        ..Default::default()
    };
    tierkv::MemoryDivision::new(budget, &opts)
        .map_err(|e| BenchError::InvalidArgument(format!("--memory-budget: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(scale: &str) -> BenchArgs {
        BenchArgs {
            scale: scale.into(),
            out: "o".into(),
            ..Default::default()
        }
    }

    #[test]
    fn presets_follow_the_paper_ratios() {
        let c = Config::from_args(&args("small")).unwrap();
        assert_eq!(c.fd_budget, 32 * MIB);
        // ~11x the budget loaded, 2 ops per KiB.
        assert_eq!(c.records, (11.0 * 32.0 * 1024.0_f64).round() as u64);
        assert_eq!(c.ops, 2 * c.records);
        assert_eq!(c.value_size, 1000);
        assert_eq!(c.systems.len(), 3);
        let p = Config::from_args(&args("paper")).unwrap();
        assert_eq!(p.fd_budget, GIB);
        assert_eq!(p.write_buffer_size, 8 * MIB);
        assert!(Config::from_args(&args("huge")).is_err());
    }

    #[test]
    fn flags_override_and_derive() {
        let mut a = args("smoke");
        a.fd_budget = Some(8 * MIB);
        a.record_size = Some(200);
        a.workload = Some("d".into());
        let c = Config::from_args(&a).unwrap();
        assert_eq!(c.records, (8.0 * 11.0 * MIB as f64 / 200.0).round() as u64);
        assert!(matches!(c.distribution, DistSpec::Latest { .. }));
        a.distribution = Some("uniform".into());
        a.records = Some(1000);
        a.ops = Some(5);
        a.systems = Some(vec!["tierkv-fd".into()]);
        let c = Config::from_args(&a).unwrap();
        assert_eq!((c.records, c.ops), (1000, 5));
        assert_eq!(c.distribution, DistSpec::Uniform);
        assert_eq!(c.systems, vec![System::TierkvFd]);
    }

    #[test]
    fn key_size_and_memory_budget() {
        let mut a = args("smoke");
        a.key_size = Some(8);
        a.record_size = Some(108);
        a.memory_budget = Some(40 * MIB);
        let c = Config::from_args(&a).unwrap();
        assert_eq!((c.key_size, c.value_size), (8, 100));
        assert_eq!(c.memory_budget, Some(40 * MIB));
        let d = memory_division(40 * MIB, c.fd_budget).unwrap();
        assert_eq!(c.write_buffer_size, d.write_buffer_size as u64);
        assert_eq!(c.cache_size, d.cache as u64);
        assert_eq!(d.budget as u64, 40 * MIB);
    }

    #[test]
    fn key_files_default_to_f2_records() {
        let mut a = args("smoke");
        a.load_keys = Some("l.dat".into());
        a.run_keys = Some("r.dat".into());
        a.workload = Some("c".into());
        let c = Config::from_args(&a).unwrap();
        assert_eq!((c.key_size, c.value_size), (8, 100));
        assert_eq!(c.ops, u64::MAX, "the run file decides");
        assert!(c.keys_label().contains("r.dat"));
        for (f, what) in [
            (
                (|a| a.workload = Some("d".into())) as fn(&mut BenchArgs),
                "inserts",
            ),
            (|a| a.key_size = Some(24), "--key-size"),
            (|a| a.records = Some(5), "--records"),
            (
                |a| a.distribution = Some("uniform".into()),
                "--distribution",
            ),
            (|a| a.run_keys = None, "go together"),
        ] {
            let mut b = a.clone();
            f(&mut b);
            let e = Config::from_args(&b).unwrap_err().to_string();
            assert!(e.contains(what), "{what}: {e}");
        }
    }

    /// Every error `from_args` reports, in the order it checks (two bad flags: the first
    /// checked is named), and configurations derived from the preset, from flags and from
    /// key files, against the text the code before the split into helpers produced.
    #[test]
    fn flag_errors_and_derived_configs_are_unchanged() {
        type Case = (&'static str, fn(&mut BenchArgs));
        let cases: Vec<Case> = vec![
            ("smoke", |_| {}),
            ("small", |a| a.scale = "small".into()),
            ("unknown scale", |a| a.scale = "huge".into()),
            ("unknown workload", |a| a.workload = Some("z".into())),
            ("workload d", |a| a.workload = Some("d".into())),
            ("bad distribution", |a| a.distribution = Some("nope".into())),
            ("half the key files", |a| a.load_keys = Some("l.dat".into())),
            ("key files", |a| {
                a.load_keys = Some("l.dat".into());
                a.run_keys = Some("r.dat".into());
                a.workload = Some("c".into());
            }),
            ("key files with records", |a| {
                (a.load_keys, a.run_keys) = (Some("l".into()), Some("r".into()));
                a.records = Some(5);
            }),
            ("key files with a key size", |a| {
                (a.load_keys, a.run_keys) = (Some("l".into()), Some("r".into()));
                a.key_size = Some(24);
            }),
            ("key files inserting", |a| {
                (a.load_keys, a.run_keys) = (Some("l".into()), Some("r".into()));
                a.workload = Some("d".into());
            }),
            ("key size", |a| a.key_size = Some(4)),
            ("record size", |a| a.record_size = Some(10)),
            ("record size too large", |a| a.record_size = Some(65 << 20)),
            ("fd budget", |a| a.fd_budget = Some(1000)),
            ("no records", |a| a.records = Some(0)),
            ("no ops", |a| a.ops = Some(0)),
            ("trace", |a| {
                a.trace = Some("t.csv".into());
                a.records = Some(0);
            }),
            ("threads", |a| a.threads = Some(0)),
            ("batch", |a| a.batch = Some(5000)),
            ("read io", |a| a.read_io = Some("mmap".into())),
            ("record cache on", |a| a.record_cache = Some("on".into())),
            ("bad record cache", |a| {
                a.record_cache = Some("maybe".into())
            }),
            ("last level filters", |a| {
                a.last_level_filters = Some("sometimes".into())
            }),
            ("slow device", |a| a.sd_profile = Some("ssd".into())),
            ("unknown system", |a| a.systems = Some(vec!["mysql".into()])),
            ("a system twice", |a| {
                a.systems = Some(vec!["tierkv".into(), " tierkv ".into()])
            }),
            ("no systems", |a| a.systems = Some(vec![" ".into()])),
            ("interval", |a| a.interval = Some(0.01)),
            ("cache with a memory budget", |a| {
                a.memory_budget = Some(64 * MIB);
                a.cache_size = Some(MIB);
            }),
            ("memory budget too small", |a| a.memory_budget = Some(1000)),
            ("memory budget", |a| a.memory_budget = Some(40 * MIB)),
            ("threads and systems", |a| {
                a.threads = Some(0);
                a.systems = Some(vec!["mysql".into()]);
            }),
            ("systems and interval", |a| {
                a.systems = Some(vec![]);
                a.interval = Some(0.0);
            }),
            ("read io and slow device", |a| {
                a.read_io = Some("x".into());
                a.sd_profile = Some("y".into());
            }),
            ("every flag", |a| {
                a.workload = Some("b".into());
                a.distribution = Some("uniform".into());
                (a.record_size, a.key_size) = (Some(200), Some(16));
                (a.records, a.ops) = (Some(1000), Some(3000));
                (a.threads, a.batch, a.fd_budget) = (Some(3), Some(4), Some(16 * MIB));
                a.sd_profile = Some("hdd".into());
                a.systems = Some(vec!["tierkv-fd".into(), "tierkv".into()]);
                (a.fast_dir, a.slow_dir) = (Some("f".into()), Some("s".into()));
                (a.seed, a.cache_size) = (Some(7), Some(3 * MIB));
                (a.block_records, a.semi_block_size) = (Some(8), Some(8192));
                (a.write_buffer_size, a.target_file_size) = (Some(2 * MIB), Some(MIB));
                a.level_base = Some(8 * MIB);
                a.no_last_level_filters = true;
                (a.read_io, a.interval) = (Some("threads".into()), Some(2.5));
                (a.keep_data, a.no_progress) = (true, true);
            }),
        ];
        let mut text = String::new();
        for (name, f) in cases {
            let mut a = args("smoke");
            f(&mut a);
            let line = match Config::from_args(&a) {
                // As `results.json` holds it (the engine's device type is left out: its
                // own tests cover its parsing).
                Ok(c) => serde_json::to_string(&c).unwrap(),
                Err(e) => format!("error: {e}"),
            };
            text.push_str(&format!("{name}: {line}\n"));
        }
        crate::report::tests::assert_golden("flags.txt", &text);
    }

    #[test]
    fn bad_flags_are_clear_errors() {
        type Case = (fn(&mut BenchArgs), &'static str);
        let cases: Vec<Case> = vec![
            (|a| a.record_size = Some(10), "--record-size"),
            (|a| a.fd_budget = Some(1000), "--fd-budget"),
            (|a| a.threads = Some(0), "--threads"),
            (|a| a.batch = Some(0), "--batch"),
            (|a| a.sd_profile = Some("ssd".into()), "--slow-device"),
            (|a| a.systems = Some(vec!["mysql".into()]), "unknown system"),
            (
                |a| a.systems = Some(vec!["tierkv".into(), "tierkv".into()]),
                "twice",
            ),
            (|a| a.workload = Some("z".into()), "unknown workload"),
            (|a| a.ops = Some(0), "--ops"),
            (|a| a.key_size = Some(4), "--key-size"),
            (
                |a| {
                    a.key_size = Some(8);
                    a.record_size = Some(8);
                },
                "8-byte key",
            ),
            (|a| a.memory_budget = Some(1000), "--memory-budget"),
            (
                |a| {
                    a.memory_budget = Some(64 * MIB);
                    a.cache_size = Some(MIB);
                },
                "--cache-size",
            ),
        ];
        for (f, what) in cases {
            let mut a = args("smoke");
            f(&mut a);
            let e = Config::from_args(&a).unwrap_err().to_string();
            assert!(e.contains(what), "{what}: {e}");
        }
    }
}

//! Command-line flags of `tierkv bench` and the size parser shared with the other
//! subcommands. Flags left unset take the scale preset's value (see [`crate::scale`]).

use std::path::PathBuf;

/// Flags of `tierkv bench`. Every `Option` left `None` takes its value from the preset.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct BenchArgs {
    /// Preset sizes: smoke (seconds, CI), small (a few minutes), paper (hours).
    #[arg(long, default_value = "small")]
    pub scale: String,
    /// Operation mix: ro, rw, wh, uh (HotRAP), a..f (YCSB) or scan (short scans only)
    /// [default: ro].
    #[arg(long)]
    pub workload: Option<String>,
    /// Key distribution: uniform, zipfian[:CONST], hotspot-5%, hotspot:KEYFRAC[:OPFRAC[:SHIFT]],
    /// latest, exponential[:RANGE], dynamic (the paper's shifting hotspot) or phased:FILE
    /// (lines `LENGTH DISTRIBUTION [WORKLOAD]`; a workload there overrides --workload)
    /// [default: hotspot-5%; latest for workload d].
    #[arg(long)]
    pub distribution: Option<String>,
    /// Replay a Twitter cache-trace CSV file instead of generating operations (its distinct
    /// keys are loaded first). A write's TTL (last field, seconds) is honoured: tierkv writes
    /// it to expire that long after the replay writes it, and reads of it miss afterwards
    /// (the RocksDB peer writes it without expiry).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Rows in the trace's format whose keys, with their value sizes, the load phase writes
    /// before the trace's own keys; they are not replayed. A generated trace
    /// (scripts/twitter/trace.py) names its whole key space here, as the HotRAP paper
    /// loaded every record of a Twitter cluster before replaying its operations.
    #[arg(long, requires = "trace", value_name = "FILE")]
    pub trace_load: Option<PathBuf>,
    /// Load file in F2's driver format (raw little-endian 64-bit keys, no header, as
    /// scripts/f2/gen_ycsb_keys.py writes it): the load phase inserts exactly these keys, in
    /// order, as 8-byte keys with 100-byte values unless --record-size says otherwise. Needs
    /// --run-keys and a mix without inserts (a, b, c, f, ro, uh, scan).
    #[arg(
        long,
        requires = "run_keys",
        conflicts_with_all = ["trace", "distribution", "records"]
    )]
    pub load_keys: Option<PathBuf>,
    /// Run file in the same format: operation i addresses its key i (cycled when --ops is
    /// larger; the whole file once by default); the operation type still comes from the
    /// workload's mix and --seed.
    #[arg(long, requires = "load_keys")]
    pub run_keys: Option<PathBuf>,
    /// Bytes per record: the key (--key-size, 24 bytes by default) plus the value (e.g. 1024
    /// or 200).
    #[arg(long, value_parser = parse_size)]
    pub record_size: Option<u64>,
    /// Bytes per generated key, at least 8 (default 24: `user` and 20 digits, as YCSB; other
    /// sizes: the key's 8-byte hash, then zero padding). F2 uses 8-byte keys.
    #[arg(long)]
    pub key_size: Option<usize>,
    /// One memory budget for each tierkv system (Options::memory_budget: memtables, cache,
    /// index and filter blocks, promotion cache, hotness tracker), e.g. 64MiB; the report
    /// then compares each system's peak RSS with it. RocksDB gets the same memtable and
    /// cache sizes. Excludes --cache-size.
    #[arg(long, value_parser = parse_size, conflicts_with = "cache_size")]
    pub memory_budget: Option<u64>,
    /// Records loaded before the run [default: 11x the fast-disk budget].
    #[arg(long)]
    pub records: Option<u64>,
    /// Operations in the run phase [default: 2 per KiB loaded; the smoke scale at most
    /// 30000].
    #[arg(long)]
    pub ops: Option<u64>,
    /// Client threads in the run phase [default: the scale's: 8 for smoke, 16 for small and
    /// paper].
    #[arg(long)]
    pub threads: Option<usize>,
    /// Operations in flight per client thread, as an asynchronous client (or F2's driver,
    /// which keeps many reads outstanding per thread) has them: each thread streams its
    /// gets with up to N in flight continuously (tierkv's `Db::get_pipelined`, each get
    /// read as of its entry; other engines read windows of N with one batched read), and
    /// holds up to N writes to commit them together (one group commit: plain writes as
    /// one batch; on tierkv a read-modify-write, whose read streams ahead, writes
    /// optimistically with `Db::write_many_if_unchanged` once its read is answered). An
    /// operation on a key with a write held waits for the group to commit, one on a key
    /// whose read-modify-write is in flight (or, on engines that read late, a write of a
    /// key being read) and a scan wait until the stream drained, so operations on one key
    /// keep their order. An operation's latency runs from its entry to its end (a write's
    /// to its group's commit) [default: 1, one at a time].
    #[arg(long)]
    pub batch: Option<usize>,
    /// Fast-disk budget (e.g. 64MiB, 1GiB) [default: the scale's: 4MiB for smoke, 32MiB for
    /// small, 1GiB for paper].
    #[arg(long, value_parser = parse_size)]
    pub fd_budget: Option<u64>,
    /// Device model emulated on the slow disk: gp3, gp3-max, hdd, none or
    /// custom:IOPS:MIBPS[:LATENCY_US] [default: gp3] (the same models as `tierkv serve
    /// --slow-device`; `--sd-profile` is its old name, still accepted).
    #[arg(long = "slow-device", alias = "sd-profile", value_name = "PROFILE")]
    pub sd_profile: Option<String>,
    /// Systems to run, comma-separated: tierkv, tierkv-nopromo, tierkv-fd, tierkv-noretain,
    /// tierkv-nohotcheck, tierkv-norepeat (no promotion on a repeat), tierkv-nobycompaction,
    /// tierkv-nobyflush, tierkv-noautotune,
    /// tierkv-noreuse (no block reuse), tierkv-nobatch (no batched demotion),
    /// tierkv-staticslow (slow levels not sized from their data),
    /// tierkv-bloomtracker (HyperDB's bloom cascade instead of RALT), tierkv-semi
    /// (HyperDB's semi-sorted tables on the slow tier);
    /// cache modes of tierkv: tierkv-blockonly, tierkv-kvonly, tierkv-kponly,
    /// tierkv-split:KV:KP:BLOCK (integer shares) and tierkv-adaptive (= tierkv);
    /// RocksDB (only in a build with `--features tierkv-bench/rocksdb-peer`): rocksdb-tiered,
    /// rocksdb-fd [default: tierkv,tierkv-nopromo,tierkv-fd].
    #[arg(long, value_delimiter = ',')]
    pub systems: Option<Vec<String>>,
    /// Output directory for report.md, results.json, charts and (by default) the stores.
    #[arg(long, default_value = "bench-out")]
    pub out: PathBuf,
    /// Put each system's fast-tier directory under this directory instead of --out
    /// (e.g. a mount of a real fast disk, or scripts/tiers.sh's $TIERKV_FAST_DIR).
    #[arg(long)]
    pub fast_dir: Option<PathBuf>,
    /// Put each system's slow-tier directory under this directory instead of --out.
    #[arg(long)]
    pub slow_dir: Option<PathBuf>,
    /// Seed of the generated operations (every system gets the same ones) [default: 42].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Cache budget of every system: tierkv's KV, KP and block caches together, RocksDB's
    /// block cache [default: scaled to the fast-disk budget].
    /// (`--block-cache`, its name before the cache held more than blocks, still works.)
    #[arg(long, aliases = ["cache", "block-cache"], value_parser = parse_size)]
    pub cache_size: Option<u64>,
    /// Memtable size of every system (tierkv's `Options::write_buffer_size`, RocksDB's
    /// `write_buffer_size`), and table file size unless `--target-file-size` says otherwise
    /// [default: 1/128 of the fast-disk budget, 1-64 MiB].
    #[arg(long, value_parser = parse_size, conflicts_with = "memory_budget")]
    pub write_buffer_size: Option<u64>,
    /// Target size of a table file of every system [default: the memtable size].
    #[arg(long, value_parser = parse_size)]
    pub target_file_size: Option<u64>,
    /// Target size of level 1 of every system (`max_bytes_for_level_base`) [default: 1/32
    /// of the fast-disk budget, 2-256 MiB].
    #[arg(long, value_parser = parse_size)]
    pub level_base: Option<u64>,
    /// Records per data block of every tierkv system (`Options::block_records`; 0: blocks cut
    /// by size only) [default: the engine's, 8].
    #[arg(long)]
    pub block_records: Option<usize>,
    /// The fast disk's record cache of every two-tier tierkv system
    /// (`Options::record_cache`): on or off [default: the engine's, off].
    #[arg(long)]
    pub record_cache: Option<String>,
    /// Largest data block of the semi-sorted tables of every tierkv system
    /// (`CompactionOptions::semi_block_size`), e.g. 4KiB [default: the engine's, 2 KiB].
    #[arg(long, value_parser = parse_size)]
    pub semi_block_size: Option<u64>,
    /// Bloom filters on the deepest level of every tierkv system
    /// (`Options::last_level_filters`): auto (per table: kept where they cost at most 1% of
    /// its record bytes, so records under 125 bytes go without), always, or never (less
    /// memory per key, one data-block read for a lookup of a key stored nowhere)
    /// [default: the engine's, auto].
    #[arg(long, conflicts_with = "no_last_level_filters")]
    pub last_level_filters: Option<String>,
    /// The same as `--last-level-filters never`.
    #[arg(long)]
    pub no_last_level_filters: bool,
    /// How tierkv's batched reads (`--batch`) keep their block reads in flight
    /// (`Options::read_io`): auto, uring (the client thread keeps its gets' block reads in
    /// flight through io_uring, each get going on as its block completes) or threads (the
    /// reader pool) [default: the engine's, auto].
    #[arg(long, value_name = "IO")]
    pub read_io: Option<String>,
    /// Seconds per timeline point [default: the scale's: 0.5 for smoke, 0.25 for small, 1
    /// for paper; at most 0.25 for a phased distribution].
    #[arg(long)]
    pub interval: Option<f64>,
    /// Keep each system's store after its run (default: removed to save disk space).
    #[arg(long)]
    pub keep_data: bool,
    /// No progress bars (summary lines only).
    #[arg(long)]
    pub no_progress: bool,
    /// Run no system: write the load and run phases these flags describe into DIR as
    /// traces for the HotRAP prototype's kvexe driver (`load.trace`, `run.trace`, its
    /// plain-length-only format), so it replays the same records and operations.
    #[arg(long, value_name = "DIR")]
    pub write_kvexe_trace: Option<PathBuf>,
}

/// Parses a size such as `1000`, `64KiB`, `256MiB`, `1GiB`, `1.5GB` or `4k` into bytes.
/// Binary (`KiB`, `K`, `k`) and decimal (`KB`) suffixes are both accepted.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim();
    let mult: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => {
            return Err(format!(
                "invalid size {s:?}: unknown unit {unit:?} (use B, KiB, MiB, GiB, TiB, KB, MB, GB)"
            ))
        }
    };
    if num.is_empty() {
        return Err(format!(
            "invalid size {s:?}: expected a number, e.g. 256MiB"
        ));
    }
    let value = if num.contains('.') {
        let f: f64 = num
            .parse()
            .map_err(|_| format!("invalid size {s:?}: {num:?} is not a number"))?;
        let bytes = f * mult as f64;
        if !bytes.is_finite() || bytes >= u64::MAX as f64 {
            return Err(format!("invalid size {s:?}: too large"));
        }
        bytes.round() as u64
    } else {
        let n: u64 = num
            .parse()
            .map_err(|_| format!("invalid size {s:?}: {num:?} is not a number"))?;
        n.checked_mul(mult)
            .ok_or_else(|| format!("invalid size {s:?}: too large"))?
    };
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sizes() {
        assert_eq!(parse_size("1000"), Ok(1000));
        assert_eq!(parse_size("64KiB"), Ok(64 << 10));
        assert_eq!(parse_size("256MiB"), Ok(256 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("2 MiB"), Ok(2 << 20));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("10KB"), Ok(10_000));
        assert_eq!(parse_size("200B"), Ok(200));
    }

    #[test]
    fn rejects_bad_sizes_with_a_message() {
        for bad in [
            "",
            "MiB",
            "12XB",
            "-5",
            "1.2.3MiB",
            "99999999999999999999",
            "1e3",
        ] {
            let e = parse_size(bad).unwrap_err();
            assert!(e.contains("invalid size"), "{bad}: {e}");
        }
        assert!(parse_size("100000000TiB")
            .unwrap_err()
            .contains("too large"));
    }
}

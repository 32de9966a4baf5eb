//! The `tierkv` command: benchmark, inspect and edit a store from the shell.
//!
//! Exit codes: 0 success, 1 key not found (`get`) or corruption found (`check`),
//! 2 usage or runtime error (including a store `check` cannot open for another reason than
//! corruption). Read-only commands (`get`, `scan`, `stats`, `check`) never create a store.

#![deny(unsafe_code)]

mod alloc;
mod store_args;

use clap::{Parser, Subcommand};
use std::io::Write;
use std::process::ExitCode;
use store_args::StoreArgs;

#[derive(Parser)]
#[command(
    name = "tierkv",
    version,
    about = "A key-value store for tiered storage"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the benchmark: tierkv and its baselines on the same generated operations.
    Bench(Box<tierkv_bench::BenchArgs>),
    /// Write one key.
    Put {
        #[command(flatten)]
        store: StoreArgs,
        /// The key.
        key: String,
        /// The value.
        value: String,
        /// Fsync the WAL before returning.
        #[arg(long)]
        sync: bool,
    },
    /// Print the value of a key (exit code 1 when absent).
    Get {
        #[command(flatten)]
        store: StoreArgs,
        /// The key.
        key: String,
    },
    /// Delete a key.
    Del {
        #[command(flatten)]
        store: StoreArgs,
        /// The key.
        key: String,
    },
    /// Print keys and values in order, one `key<TAB>value` per line.
    Scan {
        #[command(flatten)]
        store: StoreArgs,
        /// First key (inclusive).
        #[arg(long)]
        from: Option<String>,
        /// End key (exclusive).
        #[arg(long)]
        to: Option<String>,
        /// At most this many records (no limit when absent).
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Print the store's statistics.
    Stats {
        #[command(flatten)]
        store: StoreArgs,
        /// As JSON.
        #[arg(long)]
        json: bool,
    },
    /// Verify every checksum of every file (exit code 1 on any corruption, 2 when the store
    /// cannot be checked: missing, in use, unreadable).
    Check {
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Serve the store over the Redis protocol (RESP) until SHUTDOWN, SIGTERM or SIGINT.
    Serve(Box<ServeArgs>),
}

/// `tierkv serve` flags.
#[derive(clap::Args)]
struct ServeArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// Device model emulated on the slow tier: none (the disk as it is), gp3, gp3-max, hdd
    /// or custom:IOPS:MIBPS[:LATENCY_US] (the same models as `tierkv bench --slow-device`).
    #[arg(
        long,
        alias = "sd-profile",
        value_name = "PROFILE",
        default_value = "none",
        requires = "slow_dir"
    )]
    slow_device: String,
    /// Cache budget: the KV, KP and block caches together (e.g. 64MiB, 1GiB); the engine's
    /// default when absent (with --memory-budget the budget sizes the cache).
    /// (`--block-cache`, its name before the cache held more than blocks, still works.)
    #[arg(
        long,
        alias = "block-cache",
        value_parser = tierkv_bench::parse_size,
        conflicts_with = "memory_budget"
    )]
    cache_size: Option<u64>,
    /// Address to listen on (loopback unless told otherwise).
    #[arg(long, default_value = "127.0.0.1")]
    bind: std::net::IpAddr,
    /// TCP port (0 picks a free one; the bound address is printed on stderr).
    #[arg(long, default_value_t = 6380)]
    port: u16,
    /// Require AUTH with this password (visible to `ps`: prefer --requirepass-file).
    #[arg(long, conflicts_with = "requirepass_file")]
    requirepass: Option<String>,
    /// Require AUTH with the password on the first line of this file.
    #[arg(long)]
    requirepass_file: Option<std::path::PathBuf>,
    /// Make every write durable (WAL fsync, group-committed) before replying.
    #[arg(long)]
    sync: bool,
    /// Largest bulk string accepted (Redis proto-max-bulk-len), refused at its header;
    /// default and maximum: the store's largest value (256MiB).
    #[arg(long, value_parser = tierkv_bench::parse_size)]
    max_bulk: Option<u64>,
    /// Largest key accepted, refused at its header; default and maximum: the store's
    /// largest key (64KiB).
    #[arg(long, value_parser = tierkv_bench::parse_size)]
    max_key: Option<u64>,
    /// Most arguments in one command.
    #[arg(long, default_value_t = 1024 * 1024)]
    max_args: usize,
    /// Most bytes one command may occupy while being received (client-query-buffer-limit);
    /// at least --max-bulk.
    #[arg(long, default_value = "1GiB", value_parser = tierkv_bench::parse_size)]
    max_query_buffer: u64,
    /// Pending reply bytes after which a connection waits for its client to read before
    /// producing more (also between the elements of one reply, e.g. MGET).
    #[arg(long, default_value = "1MiB", value_parser = tierkv_bench::parse_size)]
    reply_chunk: u64,
    /// Most reply bytes one connection may hold; a connection that would pass it is closed
    /// (client-output-buffer-limit). Default: --max-bulk + --reply-chunk + 64MiB.
    #[arg(long, value_parser = tierkv_bench::parse_size)]
    client_output_limit: Option<u64>,
    /// Close a connection silent (or taking none of its replies) for this many seconds;
    /// 0 never closes idle connections (Redis timeout).
    #[arg(long, default_value_t = 300)]
    timeout: u64,
    /// Failed AUTH attempts after which a connection is closed (each one is delayed
    /// more: 10ms, 20ms, ... up to 1s).
    #[arg(long, default_value_t = 10)]
    max_auth_failures: u32,
    /// Seconds a graceful shutdown waits for connections whose clients do not take their
    /// last replies.
    #[arg(long, default_value_t = 30)]
    shutdown_grace: u64,
    /// Most simultaneous client connections.
    #[arg(long, default_value_t = 10_000)]
    max_clients: usize,
    /// Async reactor threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Most threads running store calls at once.
    #[arg(long, default_value_t = 64)]
    io_threads: usize,
}

fn serve(args: ServeArgs) -> CliResult {
    let device: tierkv::DeviceProfile = args
        .slow_device
        .parse()
        .map_err(|e| format!("--slow-device: {e}"))?;
    let store = &args.store;
    let mut opts = store.options(true, device)?;
    let requirepass = match &args.requirepass_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let first = text.lines().next().unwrap_or("");
            if first.trim().is_empty() {
                return Err(format!(
                    "--requirepass-file {}: the first line is empty or blank; an empty \
                     password would let `AUTH \"\"` in",
                    path.display()
                )
                .into());
            }
            Some(first.to_string())
        }
        None => args.requirepass.clone(),
    };
    let size = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
    if let Some(b) = args.cache_size {
        opts.cache_size = size(b);
    }
    // The request limits derive from the store's (one source of truth); larger ones are
    // refused at startup.
    let max_bulk = args.max_bulk.map_or(opts.max_value_size, size);
    let config = tierkv_server::ServerConfig {
        bind: args.bind,
        port: args.port,
        requirepass,
        sync: args.sync,
        limits: tierkv_server::Limits {
            max_bulk,
            max_key: args.max_key.map_or(opts.max_key_size, size),
            max_args: args.max_args,
            max_query: size(args.max_query_buffer),
        },
        max_clients: args.max_clients,
        reply_chunk: size(args.reply_chunk),
        output_limit: args.client_output_limit.map_or_else(
            || tierkv_server::ServerConfig::default_output_limit(max_bulk),
            size,
        ),
        idle_timeout: (args.timeout > 0).then(|| std::time::Duration::from_secs(args.timeout)),
        max_auth_failures: args.max_auth_failures,
        shutdown_grace: std::time::Duration::from_secs(args.shutdown_grace),
        threads: args.threads,
        io_threads: args.io_threads,
        db_dir: Some(store.db.clone()),
        slow_dir: store.slow_dir.clone(),
    };
    // Refuse nonsense before touching the store.
    config.validate()?;
    config.validate_for_store(&opts)?;
    // A busy port is refused before the store is created or opened (a test bind; port 0
    // always finds one).
    if args.port != 0 {
        std::net::TcpListener::bind((args.bind, args.port))
            .map_err(|e| format!("cannot listen on {}:{}: {e}", args.bind, args.port))?;
    }
    let db = tierkv::Db::open(&store.db, opts)?;
    tierkv_server::serve(db, config, |addr| {
        eprintln!("tierkv serve: listening on {addr}");
    })?;
    eprintln!("tierkv serve: store flushed and closed");
    Ok(ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    use std::io::IsTerminal;
    alloc::setup();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal, never in a log file or a pipe.
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

type CliResult = Result<ExitCode, Box<dyn std::error::Error>>;

fn run(cmd: Command) -> CliResult {
    let mut out = std::io::stdout().lock();
    match cmd {
        Command::Bench(args) => {
            tierkv_bench::run_cli(&args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Put {
            store,
            key,
            value,
            sync,
        } => {
            let db = store.open(true)?;
            db.put_opt(key, value, &tierkv::WriteOptions { sync })?;
            db.close()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Get { store, key } => {
            let db = store.open(false)?;
            match db.get(key)? {
                Some(v) => {
                    out.write_all(&v)?;
                    out.write_all(b"\n")?;
                    Ok(ExitCode::SUCCESS)
                }
                None => Ok(ExitCode::from(1)),
            }
        }
        Command::Del { store, key } => {
            let db = store.open(false)?;
            db.delete(key)?;
            db.close()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Scan {
            store,
            from,
            to,
            limit,
        } => {
            let db = store.open(false)?;
            let ropts = tierkv::ReadOptions {
                lower_bound: from.map(String::into_bytes),
                upper_bound: to.map(String::into_bytes),
                scan_length_hint: limit,
                ..tierkv::ReadOptions::new()
            };
            let mut it = db.iter_opt(&ropts)?;
            it.seek_to_first()?;
            let mut n = 0;
            let limit = limit.unwrap_or(usize::MAX);
            while it.valid() && n < limit {
                out.write_all(it.key())?;
                out.write_all(b"\t")?;
                out.write_all(it.value())?;
                out.write_all(b"\n")?;
                n += 1;
                it.next()?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Stats { store, json } => {
            let db = store.open(false)?;
            let stats = db.stats();
            if json {
                serde_json::to_writer_pretty(&mut out, &stats)?;
                writeln!(out)?;
            } else {
                print_stats(&mut out, &stats)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve(args) => serve(*args),
        Command::Check { store } => {
            // Opening already verifies the manifest, every table's presence and size, and
            // replays the WAL with checksums; then every table block is read and checked.
            // Only damaged data is "CORRUPT" (exit 1); a store that cannot be checked (in
            // use, unreadable, missing) is an error like any other (exit 2).
            let verified = store.open(false).and_then(|db| {
                let entries = db.verify_checksums()?;
                let files: usize = db.stats().levels.iter().map(|l| l.files).sum();
                Ok((files, entries))
            });
            match verified {
                Ok((files, entries)) => {
                    writeln!(out, "OK: {files} tables, {entries} entries verified")?;
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) if e.is_corruption() => {
                    writeln!(out, "CORRUPT: {e}")?;
                    Ok(ExitCode::from(1))
                }
                Err(e) => Err(format!("cannot check the store: {e}").into()),
            }
        }
    }
}

/// Bytes in binary units with one decimal (`512 B`, `1.5 KiB`, `3.2 GiB`): the text report
/// is read by people; `--json` keeps the raw byte counts.
fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut unit = 0;
    // Move up while the one-decimal figure would print as 1024.0 or more.
    while v >= 1023.95 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// [`human`] for in-memory sizes.
fn human_usize(bytes: usize) -> String {
    human(u64::try_from(bytes).unwrap_or(u64::MAX))
}

/// The text report of `tierkv stats`, in two parts: what the store holds (persisted, so
/// the same after a restart) and what this process counted since it opened the store (for
/// `tierkv stats` itself, only what opening did, such as replaying the WAL; a long-running
/// process reports the same figures through `INFO` in `tierkv serve`).
fn print_stats(out: &mut impl Write, s: &tierkv::DbStats) -> std::io::Result<()> {
    writeln!(out, "store (persisted: the same across restarts)")?;
    writeln!(
        out,
        "  keys: about {} (entries in tables and memtables less tombstones; versions not yet compacted count once each)",
        s.estimated_keys
    )?;
    writeln!(out, "  last sequence number: {}", s.last_sequence)?;
    writeln!(
        out,
        "  tiers: fast {}{}, slow {}",
        human(s.fast_tier_bytes),
        s.fd_budget
            .map(|b| format!(" (budget {})", human(b)))
            .unwrap_or_default(),
        human(s.slow_tier_bytes)
    )?;
    if s.slow_tier_dirty_tables > 0 {
        writeln!(
            out,
            "  slow tier: {} tables with dirty blocks, {} of them, space amplification {:.2}x",
            s.slow_tier_dirty_tables,
            human(s.slow_tier_dirty_bytes),
            s.slow_tier_space_amp
        )?;
    }
    // "sized" is what the target is compared with: the size less semi-sorted tables'
    // garbage and key lists.
    writeln!(
        out,
        "  {:<6} {:<5} {:>6} {:>11} {:>11} {:>11}",
        "level", "tier", "files", "size", "sized", "target"
    )?;
    for l in &s.levels {
        writeln!(
            out,
            "  L{:<5} {:<5} {:>6} {:>11} {:>11} {:>11}",
            l.level,
            l.tier.name(),
            l.files,
            human(l.bytes),
            human(l.sized_bytes),
            if l.level == 0 {
                "-".to_string() // L0 is triggered by its file count
            } else {
                human(l.target_bytes)
            }
        )?;
    }

    writeln!(out)?;
    writeln!(
        out,
        "this process (counted since the store was opened; reset by every restart)"
    )?;
    writeln!(
        out,
        "  writes: {} puts, {} deletes, {} of keys and values, {} batches in {} WAL groups",
        s.puts,
        s.deletes,
        human(s.user_bytes_written),
        s.write_batches,
        s.write_groups
    )?;
    let g = &s.get_sources;
    writeln!(out, "  gets: {} (memtable {}, block cache {}, fast disk {}, slow disk {}, not found {}); FD hit rate {:.1}%",
        s.gets, g.memtable, g.block_cache, g.fast, g.slow, g.not_found, s.fd_hit_rate * 100.0)?;
    writeln!(
        out,
        "  flushes: {} ({} written, {} shadowed versions dropped); compactions: {} ({} trivial moves), read {}, wrote {}",
        s.flushes,
        human(s.flush_bytes_written),
        s.flush_entries_dropped,
        s.compactions,
        s.trivial_moves,
        human(s.compaction_bytes_read),
        human(s.compaction_bytes_written)
    )?;
    writeln!(
        out,
        "  compaction blocks: {} reused as stored ({}), {} re-encoded ({})",
        s.compaction_blocks_reused,
        human(s.compaction_bytes_reused),
        s.compaction_blocks_rewritten,
        human(s.compaction_bytes_rewritten)
    )?;
    if s.compaction_pushdown_bytes > 0 {
        writeln!(
            out,
            "  preemptive pushdown: {} written below the output level",
            human(s.compaction_pushdown_bytes)
        )?;
    }
    for l in s
        .levels
        .iter()
        .filter(|l| l.compaction_read_bytes + l.compaction_write_bytes > 0)
    {
        writeln!(
            out,
            "    compactions out of L{}: read {}, wrote {}",
            l.level,
            human(l.compaction_read_bytes),
            human(l.compaction_write_bytes)
        )?;
    }
    for tier in [tierkv::Tier::Fast, tierkv::Tier::Slow] {
        let io = s.background_io(tier);
        let per_user = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.2}"));
        writeln!(
            out,
            "  background I/O on {} (flush, compaction, promotion, tracker): read {} ({} per user byte), wrote {} (write amplification {})",
            tier.name(),
            human(io.read_bytes),
            per_user(s.read_amplification(tier)),
            human(io.write_bytes),
            per_user(s.write_amplification(tier))
        )?;
    }
    writeln!(
        out,
        "  write stalls: {} ({:.1} ms), slowdowns: {}",
        s.write_stalls,
        s.write_stall_micros as f64 / 1000.0,
        s.write_slowdowns
    )?;
    writeln!(
        out,
        "  I/O by tier and cause (read size / ops, write size / ops):"
    )?;
    for (name, tier) in [("fast", &s.io.fast), ("slow", &s.io.slow)] {
        for c in tier.causes.iter().filter(|c| c.read_ops + c.write_ops > 0) {
            writeln!(
                out,
                "    {name:<5} {:<11} {:>11} / {:<9} {:>11} / {}",
                c.cause.name(),
                human(c.read_bytes),
                c.read_ops,
                human(c.write_bytes),
                c.write_ops
            )?;
        }
    }
    let t = &s.table_opens;
    writeln!(
        out,
        "  table opens (table cache misses): fast {} ({} read), slow {} ({} read)",
        t.fast_opens,
        human(t.fast_bytes),
        t.slow_opens,
        human(t.slow_bytes)
    )?;
    let c = &s.cache;
    writeln!(
        out,
        "  cache ({}): {} of {}, ghosts {} ({}); gets from KV {}, from KP {}",
        c.mode,
        human_usize(c.usage),
        human_usize(c.capacity),
        if c.ghosts_on { "on" } else { "off" },
        human_usize(c.ghost_bytes),
        g.kv_cache,
        g.kp_cache
    )?;
    for (name, x) in [("KV", &c.kv), ("KP", &c.kp), ("block", &c.block)] {
        writeln!(
            out,
            "    {name}: {} in {} entries (target {}), hit rate {:.1}%, ghost hits {}",
            human_usize(x.bytes),
            x.entries,
            human_usize(x.target),
            x.hit_rate * 100.0,
            x.ghost_hits
        )?;
    }
    let m = &s.memory;
    writeln!(
        out,
        "  memory: {}{}",
        human_usize(m.total_bytes),
        m.budget
            .map(|b| format!(" of a budget of {}", human_usize(b)))
            .unwrap_or_else(|| " (no memory budget: each component has its own limit)".into())
    )?;
    for (name, c) in [
        ("memtables", &m.memtables),
        ("cache", &m.cache),
        ("index and filter blocks", &m.tables),
        ("promotion cache", &m.promotion_cache),
        ("hotness tracker", &m.tracker),
    ] {
        writeln!(
            out,
            "    {name}: {} (limit {})",
            human_usize(c.bytes),
            c.limit.map_or("none".to_string(), human_usize)
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{human, print_stats};
    use std::path::Path;

    /// Compares `got` with the golden file `tests/golden/<name>` (written by the code the
    /// report replaced, so a refactoring that changes one byte fails here);
    /// `TIERKV_BLESS=1` rewrites the file instead, for a deliberate change of the output.
    fn assert_golden(name: &str, got: &str) {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/golden")
            .join(name);
        if std::env::var_os("TIERKV_BLESS").is_some() {
            std::fs::write(&path, got).unwrap();
            return;
        }
        let want =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if got != want {
            let line = got
                .lines()
                .zip(want.lines())
                .position(|(g, w)| g != w)
                .unwrap_or_else(|| got.lines().count().min(want.lines().count()));
            panic!(
                "{name} differs from line {}:\n got: {:?}\nwant: {:?}\n\nwhole output:\n{got}",
                line + 1,
                got.lines().nth(line),
                want.lines().nth(line)
            );
        }
    }

    /// A two-tier store's statistics with every figure the text report shows set to a
    /// distinct value, and the optional lines present. Starts from a real store's, so a
    /// figure the engine adds later needs no change here.
    fn full_stats(dir: &Path) -> tierkv::DbStats {
        let db = tierkv::Db::open(
            dir.join("fast"),
            tierkv::Options {
                fd_budget: Some(64 << 20),
                slow: Some(tierkv::SlowTier {
                    dir: dir.join("slow"),
                    budget: None,
                    device: tierkv::DeviceProfile::none(),
                }),
                ..Default::default()
            },
        )
        .unwrap();
        let mut s = db.stats();
        db.close().unwrap();
        (s.estimated_keys, s.last_sequence) = (123_456, 200_001);
        (s.fast_tier_bytes, s.fd_budget, s.slow_tier_bytes) = (40 << 20, Some(64 << 20), 3 << 30);
        (s.slow_tier_dirty_tables, s.slow_tier_dirty_bytes) = (3, 5 << 20);
        s.slow_tier_space_amp = 1.25;
        // Four levels, two on each tier, whatever the engine's default shape.
        s.levels.truncate(4);
        for (i, l) in s.levels.iter_mut().enumerate() {
            l.tier = if i < 2 {
                tierkv::Tier::Fast
            } else {
                tierkv::Tier::Slow
            };
            let i = i as u64;
            l.files = 2 * i as usize + 1;
            (l.bytes, l.sized_bytes) = ((i + 1) << 20, (i + 1) << 19);
            l.target_bytes = (i + 2) << 22;
            // Levels without compactions have no line of their own.
            let n = if i % 2 == 1 { i << 18 } else { 0 };
            (l.compaction_read_bytes, l.compaction_write_bytes) = (n, n / 2);
        }
        (s.puts, s.deletes, s.user_bytes_written) = (1000, 20, 3 << 20);
        (s.write_batches, s.write_groups, s.gets) = (900, 450, 5000);
        let g = &mut s.get_sources;
        (g.memtable, g.block_cache, g.fast, g.slow, g.not_found) = (100, 200, 3000, 1500, 200);
        (g.kv_cache, g.kp_cache) = (40, 60);
        s.fd_hit_rate = 0.6667;
        (s.flushes, s.flush_bytes_written, s.flush_entries_dropped) = (12, 24 << 20, 7);
        (s.compactions, s.trivial_moves) = (30, 4);
        (s.compaction_bytes_read, s.compaction_bytes_written) = (100 << 20, 90 << 20);
        (s.compaction_blocks_reused, s.compaction_bytes_reused) = (800, 3 << 20);
        (s.compaction_blocks_rewritten, s.compaction_bytes_rewritten) = (1200, 5 << 20);
        s.compaction_pushdown_bytes = 9 << 20;
        (s.write_stalls, s.write_stall_micros, s.write_slowdowns) = (3, 4567, 8);
        for (tier, k) in [(&mut s.io.fast, 1), (&mut s.io.slow, 3)] {
            for c in &mut tier.causes {
                // Causes without I/O have no line; a cause the engine adds later has none.
                let i = match c.cause.name() {
                    "flush" => k,
                    "compaction" => k + 1,
                    "wal" if k == 1 => 5,
                    _ => 0,
                };
                (c.read_bytes, c.read_ops) = (i << 20, i * 10);
                (c.write_bytes, c.write_ops) = (i << 21, i * 7);
            }
        }
        let t = &mut s.table_opens;
        (t.fast_opens, t.fast_bytes, t.slow_opens, t.slow_bytes) = (5, 6 << 10, 7, 8 << 10);
        let c = &mut s.cache;
        c.mode = "adaptive".into();
        (c.usage, c.capacity, c.ghosts_on, c.ghost_bytes) = (7 << 20, 8 << 20, true, 4096);
        for (i, x) in [&mut c.kv, &mut c.kp, &mut c.block].into_iter().enumerate() {
            (x.bytes, x.entries, x.target) = ((i + 1) << 20, 100 * (i + 1), (i + 2) << 20);
            (x.hit_rate, x.ghost_hits) = (0.125 * (i + 1) as f64, 11 * i as u64);
        }
        let m = &mut s.memory;
        (m.total_bytes, m.budget) = (30 << 20, Some(32 << 20));
        for (i, c) in [
            &mut m.memtables,
            &mut m.cache,
            &mut m.tables,
            &mut m.promotion_cache,
            &mut m.tracker,
        ]
        .into_iter()
        .enumerate()
        {
            (c.bytes, c.limit) = ((i + 1) << 20, (i != 3).then_some((i + 2) << 20));
        }
        s
    }

    #[test]
    fn the_stats_report_is_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = full_stats(dir.path());
        let mut out = Vec::new();
        print_stats(&mut out, &s).unwrap();
        assert_golden("stats_full.txt", &String::from_utf8(out).unwrap());
        // The other side of each optional figure.
        (
            s.fd_budget,
            s.slow_tier_dirty_tables,
            s.compaction_pushdown_bytes,
        ) = (None, 0, 0);
        s.user_bytes_written = 0;
        (s.cache.ghosts_on, s.memory.budget) = (false, None);
        for l in &mut s.levels {
            (l.compaction_read_bytes, l.compaction_write_bytes) = (0, 0);
        }
        let mut out = Vec::new();
        print_stats(&mut out, &s).unwrap();
        assert_golden("stats_sparse.txt", &String::from_utf8(out).unwrap());
    }

    #[test]
    fn sizes_print_in_binary_units_with_one_decimal() {
        assert_eq!(human(0), "0 B");
        assert_eq!(human(1023), "1023 B");
        assert_eq!(human(1024), "1.0 KiB");
        assert_eq!(human(1536), "1.5 KiB");
        assert_eq!(human(5 << 20), "5.0 MiB");
        // Just below 1 MiB rounds up to the next unit rather than "1024.0 KiB".
        assert_eq!(human((1 << 20) - 1), "1.0 MiB");
        assert_eq!(human(3 << 30), "3.0 GiB");
        assert_eq!(human(u64::MAX), "16384.0 PiB");
    }
}

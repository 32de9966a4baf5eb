//! The `tierkv` command: benchmark, inspect and edit a store from the shell.
//!
//! Exit codes: 0 success, 1 key not found (`get`) or corruption found (`check`),
//! 2 usage or runtime error (including a store `check` cannot open for another reason than
//! corruption). Read-only commands (`get`, `scan`, `stats`, `check`) never create a store.

#![deny(unsafe_code)]

mod alloc;
mod stats_text;
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
    /// Make a consistent, openable copy of a store (every write up to one point, the tier
    /// record and the hotness tracker's state), with hard links where the file system
    /// allows. For a store a running `tierkv serve` holds, ask the server (BGSAVE).
    Checkpoint {
        #[command(flatten)]
        store: StoreArgs,
        /// The copy's directory (must not exist).
        #[arg(long)]
        to: std::path::PathBuf,
        /// The copy's slow-tier directory (a two-tier store's; must not exist; on the slow
        /// disk's file system for hard links).
        #[arg(long)]
        slow_to: Option<std::path::PathBuf>,
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
    /// Read server settings from this file (Redis's redis.conf syntax for the names they
    /// share: `timeout 300`, `maxclients 1000`, `requirepass "..."`, ...); flags given on
    /// the command line win. CONFIG REWRITE writes the running settings back to it.
    #[arg(long, value_name = "FILE")]
    config: Option<std::path::PathBuf>,
    /// Replicate the primary at HOST PORT (Redis replicaof; "no one" or absent: serve as a
    /// primary). The store is replaced by the primary's copy when it cannot continue the
    /// primary's history.
    #[arg(long, value_name = "\"HOST PORT\"", alias = "slaveof")]
    replicaof: Option<String>,
    /// The password this replica gives its primary (Redis masterauth).
    #[arg(long)]
    masterauth: Option<String>,
    /// Bytes of the newest writes a primary keeps for replicas that fall behind or
    /// reconnect, in memory and in retired WALs on the fast disk (Redis repl-backlog-size).
    #[arg(long, default_value = "64MiB", value_parser = tierkv_bench::parse_size)]
    repl_backlog_size: u64,
    /// Async reactor threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Most threads running store calls at once.
    #[arg(long, default_value_t = 64)]
    io_threads: usize,
    /// Seconds the server waits, before it listens, for the store to read back the keys
    /// of the slow tier's records it served from memory before its restart (or that its
    /// checkpoint listed), so that its first clients find them in memory; 0 listens at
    /// once, the reading going on beside the clients.
    #[arg(long, default_value_t = 30.0, value_parser = non_negative_seconds)]
    warm_wait: f64,
}

/// A number of seconds, at least 0 and finite.
fn non_negative_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(format!("{s:?}: accepted: seconds, 0 and up (e.g. 30, 2.5)")),
    }
}

/// Waits up to `seconds` while the store reads back its list of keys served from memory
/// (`Db::is_warming`), and says how it went.
fn wait_for_warming(db: &tierkv::Db, seconds: f64) {
    let start = std::time::Instant::now();
    if seconds == 0.0 || !db.is_warming() {
        return;
    }
    let limit = std::time::Duration::from_secs_f64(seconds);
    while db.is_warming() && start.elapsed() < limit {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let keys = db.stats().promotion.warm_keys_read;
    let how = if db.is_warming() {
        "still reading"
    } else {
        "read back"
    };
    eprintln!(
        "tierkv serve: {how} {keys} keys served from memory before the restart ({:.1} s)",
        start.elapsed().as_secs_f64()
    );
}

fn serve(args: ServeArgs, on_command_line: &dyn Fn(&str) -> bool) -> CliResult {
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
    let mut config = tierkv_server::ServerConfig {
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
        config_file: args.config.clone(),
        replicaof: match &args.replicaof {
            Some(v) => tierkv_server::params::parse_replicaof(v)
                .map_err(|e| format!("--replicaof {v:?}: {e}"))?,
            None => None,
        },
        masterauth: args.masterauth.clone(),
        repl_backlog_size: size(args.repl_backlog_size),
        ..tierkv_server::ServerConfig::default()
    };
    if let Some(path) = &args.config {
        // A file that does not exist yet is an empty one (CONFIG REWRITE creates it).
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(format!("--config {}: {e}", path.display()).into()),
        };
        tierkv_server::params::apply_file(&mut config, &text, on_command_line)
            .map_err(|e| format!("--config {}: {e}", path.display()))?;
        tierkv_server::params::apply_log_level(&config.log_level)
            .map_err(|e| format!("--config {}: loglevel: {e}", path.display()))?;
        // The store's own settings from the file (CONFIG REWRITE writes them).
        if let Some(bytes) = config.cache_size {
            opts.cache_size = bytes;
        }
        if let (Some(p), Some(slow)) = (config.slow_device, opts.slow.as_mut()) {
            slow.device = p;
        }
    }
    // Refuse nonsense before touching the store.
    config.validate()?;
    config.validate_for_store(&opts)?;
    // A busy port is refused before the store is created or opened (a test bind; port 0
    // always finds one).
    if args.port != 0 {
        std::net::TcpListener::bind((args.bind, args.port))
            .map_err(|e| format!("cannot listen on {}:{}: {e}", args.bind, args.port))?;
    }
    // Retired WALs back the replication backlog on disk.
    opts.wal_retention_bytes = config.repl_backlog_size as u64;
    let db = tierkv::Db::open(&store.db, opts)?;
    wait_for_warming(&db, args.warm_wait);
    tierkv_server::serve(db, config, |addr| {
        eprintln!("tierkv serve: listening on {addr}");
    })?;
    eprintln!("tierkv serve: store flushed and closed");
    Ok(ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    use std::io::IsTerminal;
    alloc::setup();
    use tracing_subscriber::prelude::*;
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into());
    let (filter, log_level) = tracing_subscriber::reload::Layer::new(filter);
    tracing_subscriber::registry()
        .with(filter)
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                // Colour codes only for a person at a terminal, never in a log file or a
                // pipe.
                .with_ansi(std::io::stderr().is_terminal()),
        )
        .init();
    // CONFIG SET loglevel swaps the filter.
    tierkv_server::params::set_log_level_hook(Box::new(move |directive| {
        log_level
            .reload(EnvFilter::new(directive))
            .map_err(|e| e.to_string())
    }));
    let matches = <Cli as clap::CommandFactory>::command().get_matches();
    let cli = match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    // Which `serve` flags the command line gave (they win over a config file's lines).
    let on_line = |id: &str| {
        matches
            .subcommand_matches("serve")
            .is_some_and(|m| m.value_source(id) == Some(clap::parser::ValueSource::CommandLine))
    };
    let given = |id: &str| on_line(id) || (id == "requirepass" && on_line("requirepass_file"));
    match run(cli.command, &given) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

type CliResult = Result<ExitCode, Box<dyn std::error::Error>>;

/// Runs one subcommand; `serve_flag_given` tells which `serve` flags the command line gave.
fn run(cmd: Command, serve_flag_given: &dyn Fn(&str) -> bool) -> CliResult {
    let mut out = std::io::stdout().lock();
    match cmd {
        Command::Bench(args) => {
            match &args.write_kvexe_trace {
                Some(dir) => {
                    let (load, run) = tierkv_bench::write_kvexe_trace(&args, dir)?;
                    writeln!(out, "wrote {} and {}", load.display(), run.display())?;
                }
                None => {
                    tierkv_bench::run_cli(&args)?;
                }
            }
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
                stats_text::print_stats(&mut out, &stats)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve(args) => serve(*args, serve_flag_given),
        Command::Checkpoint { store, to, slow_to } => {
            let db = store
                .open(false)
                .map_err(|e| -> Box<dyn std::error::Error> {
                    match e {
                        tierkv::Error::Locked(_) => format!(
                            "{e}: a store `tierkv serve` holds is checkpointed through the server \
                         (BGSAVE; docs/DEPLOYMENT.md, \"Backups\")"
                        )
                        .into(),
                        e => e.into(),
                    }
                })?;
            let started = std::time::Instant::now();
            let c = db.checkpoint(&to, slow_to.as_deref())?;
            db.close()?;
            writeln!(
                out,
                "checkpoint {}: {} tables ({} bytes) up to sequence {}, {} files linked, {} \
                 copied, in {:.2?}",
                to.display(),
                c.tables,
                c.table_bytes,
                c.sequence,
                c.linked,
                c.copied,
                started.elapsed()
            )?;
            Ok(ExitCode::SUCCESS)
        }
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

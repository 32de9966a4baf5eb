//! Server configuration: where to listen, authentication, durability, the limits that
//! bound each connection's memory and time, and their validation (one place, so `tierkv
//! serve` and embedders refuse the same nonsense with the same message).

use crate::resp::Limits;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

/// How `tierkv serve` runs. `Default` listens on 127.0.0.1:6380 with limits derived from
/// the engine's defaults (see `docs/DEPLOYMENT.md`, "Limits and defaults").
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Address to bind (default loopback: exposing a store is an explicit decision).
    pub bind: IpAddr,
    /// TCP port; 0 picks a free one (see [`crate::Server::local_addr`]).
    pub port: u16,
    /// Password required by AUTH before any other command (Redis `requirepass`). Must not
    /// be empty or blank.
    pub requirepass: Option<String>,
    /// Make every write durable (WAL fsync, group-committed) before replying, like Redis's
    /// `appendfsync always`.
    pub sync: bool,
    /// Request size limits. `max_bulk` may not exceed the store's `max_value_size`
    /// (checked by [`crate::Server::bind`]).
    pub limits: Limits,
    /// Most simultaneous connections; more are refused with an error (Redis `maxclients`).
    pub max_clients: usize,
    /// Soft bound on a connection's pending replies: once this many reply bytes are
    /// pending, the connection stops producing (between commands, and between the elements
    /// of a multi-element reply such as MGET) and writes them out, waiting for the client to
    /// read, before producing more.
    pub reply_chunk: usize,
    /// Hard bound on the reply bytes one connection may hold at once (Redis
    /// `client-output-buffer-limit`): a reply that would pass it closes the connection,
    /// with a warning in the log. Must leave room for the largest value plus `reply_chunk`.
    pub output_limit: usize,
    /// Close a connection that sends nothing, or takes none of its pending replies, for
    /// this long (Redis `timeout`); `None` never closes idle connections.
    pub idle_timeout: Option<Duration>,
    /// Failed AUTH attempts after which a connection is closed (each failure before that
    /// delays its reply, doubling from 10 ms).
    pub max_auth_failures: u32,
    /// How long a graceful shutdown waits for connections to finish their in-flight requests
    /// before dropping them.
    pub shutdown_grace: Duration,
    /// Async reactor threads ([`crate::serve`]).
    pub threads: usize,
    /// Most threads running store calls at once ([`crate::serve`]).
    pub io_threads: usize,
    /// Store directories, reported by INFO (informational only).
    pub db_dir: Option<PathBuf>,
    /// Slow-tier directory, reported by INFO (informational only).
    pub slow_dir: Option<PathBuf>,
    /// Commands taking at least this many microseconds go to the slow log (Redis
    /// `slowlog-log-slower-than`; negative: none, 0: every command).
    pub slowlog_slower_than_us: i64,
    /// Most entries the slow log keeps (Redis `slowlog-max-len`).
    pub slowlog_max_len: usize,
    /// Commands taking at least this many milliseconds are latency events for LATENCY
    /// LATEST (Redis `latency-monitor-threshold`; 0: off).
    pub latency_threshold_ms: u64,
    /// Redis's name of the log level (`debug`, `verbose`, `notice`, `warning`, `nothing`),
    /// applied through `params::set_log_level_hook`.
    pub log_level: String,
    /// The config file the server was started with: CONFIG REWRITE writes it.
    pub config_file: Option<PathBuf>,
    /// Where BGSAVE/SAVE put checkpoints (None: `<store dir>.checkpoints`).
    pub checkpoint_dir: Option<PathBuf>,
    /// Where a two-tier store's checkpoints put their slow tables (None:
    /// `<slow dir>.checkpoints`; on the slow disk's file system for hard links).
    pub checkpoint_slow_dir: Option<PathBuf>,
    /// Checkpoints BGSAVE/SAVE keep (the oldest beyond are removed).
    pub checkpoint_keep: usize,
    /// The store's cache budget (CONFIG SET `tierkv-cache-size` resizes the cache of the
    /// running store; None until the server reads it from the store).
    pub cache_size: Option<usize>,
    /// The slow tier's device model (CONFIG SET `tierkv-slow-device` swaps it on the
    /// running store; None: the store's, or no slow tier).
    pub slow_device: Option<tierkv::DeviceProfile>,
    /// The primary this server replicates at startup (Redis `replicaof host port`;
    /// REPLICAOF changes it while serving).
    pub replicaof: Option<(String, u16)>,
    /// The password a replica gives its primary (Redis `masterauth`).
    pub masterauth: Option<String>,
    /// Bytes of the newest writes a primary keeps for replicas that fall behind or
    /// reconnect (Redis `repl-backlog-size`): in memory, and in retired WALs on the fast
    /// disk (the store's `wal_retention_bytes`, set at open).
    pub repl_backlog_size: usize,
    /// A replication link silent this long is dropped and reconnected (Redis
    /// `repl-timeout`).
    pub repl_timeout: Duration,
    /// Sentinel promotes the replica with the lowest nonzero priority (Redis
    /// `replica-priority`; 0: never).
    pub replica_priority: u32,
    /// A replica follows its primary's hotness: it reads the keys the primary's readers
    /// touched and keeps the tracker's state that comes with a copy (`tierkv-repl-hotness`;
    /// off, it is an ordinary replica that receives writes only, for comparison).
    pub repl_mirror_hotness: bool,
}

/// Default replication backlog (Redis's is 1 MiB of its command stream; a store's write
/// batches are larger, and a replica that outruns it must copy the whole store).
pub const DEFAULT_REPL_BACKLOG: usize = 64 * MIB;

/// Default soft bound of pending replies per connection.
pub const DEFAULT_REPLY_CHUNK: usize = MIB;
/// Default idle timeout (Redis's is 0, off; a server exposed to careless clients needs one
/// so silent sockets cannot hold every `max_clients` slot forever).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// Default failed AUTH attempts per connection.
pub const DEFAULT_MAX_AUTH_FAILURES: u32 = 10;
/// Largest `max_bulk`, `max_query`, `reply_chunk` or `output_limit` accepted (the engine's
/// values are `u32`-sized).
pub const MAX_SIZE_LIMIT: usize = 4 * 1024 * MIB;
/// Most `threads` / `io_threads` accepted.
pub const MAX_THREADS: usize = 4096;
/// Room `output_limit` must leave beyond the largest value and `reply_chunk` (the bulk
/// header and the rest of a pipeline's replies).
const OUTPUT_SLACK: usize = 64 * KIB;

impl ServerConfig {
    /// The default hard output limit for a given largest value: one value, a full chunk of
    /// other replies and a margin (so every legal GET can be answered).
    pub fn default_output_limit(max_bulk: usize) -> usize {
        max_bulk
            .saturating_add(DEFAULT_REPLY_CHUNK)
            .saturating_add(64 * MIB)
    }

    /// Checks every setting; the error names the setting (as a `tierkv serve` flag), the
    /// value, and the accepted range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |flag: &'static str, value: String, accepted: String| {
            Err(ConfigError {
                flag,
                value,
                accepted,
            })
        };
        if let Some(p) = &self.requirepass {
            if p.trim().is_empty() {
                return bad(
                    "--requirepass",
                    "(empty or blank)".into(),
                    "a non-blank password (an empty one would let `AUTH \"\"` in)".into(),
                );
            }
        }
        let l = &self.limits;
        let sizes: [(&'static str, usize, usize); 5] = [
            ("--max-bulk", l.max_bulk, 1),
            ("--max-key", l.max_key, 1),
            ("--max-query-buffer", l.max_query, 1),
            ("--reply-chunk", self.reply_chunk, 1),
            ("--client-output-limit", self.output_limit, 1),
        ];
        for (flag, v, min) in sizes {
            if v < min || v > MAX_SIZE_LIMIT {
                return bad(flag, v.to_string(), format!("{min} B ..= 4 GiB"));
            }
        }
        if l.max_key > l.max_bulk {
            return bad(
                "--max-key",
                l.max_key.to_string(),
                format!("1 ..= --max-bulk ({})", l.max_bulk),
            );
        }
        if l.max_query < l.max_bulk {
            return bad(
                "--max-query-buffer",
                l.max_query.to_string(),
                format!(
                    "at least --max-bulk ({}), or a largest value could never be sent",
                    l.max_bulk
                ),
            );
        }
        if !(1..=i32::MAX as usize).contains(&l.max_args) {
            return bad("--max-args", l.max_args.to_string(), "1 ..= 2^31-1".into());
        }
        let need = l
            .max_bulk
            .saturating_add(self.reply_chunk)
            .saturating_add(OUTPUT_SLACK);
        if self.output_limit < need {
            return bad(
                "--client-output-limit",
                self.output_limit.to_string(),
                format!(
                    "at least --max-bulk + --reply-chunk + 64 KiB ({need}), or a GET of a \
                     largest value would close its connection"
                ),
            );
        }
        if !(1..=1_000_000).contains(&self.max_clients) {
            return bad(
                "--max-clients",
                self.max_clients.to_string(),
                "1 ..= 1000000".into(),
            );
        }
        if let Some(t) = self.idle_timeout {
            if t.is_zero() || t > Duration::from_secs(365 * 24 * 3600) {
                return bad(
                    "--timeout",
                    format!("{t:?}"),
                    "1 s ..= 1 year (0 turns the timeout off)".into(),
                );
            }
        }
        if self.max_auth_failures == 0 || self.max_auth_failures > 1_000_000 {
            return bad(
                "--max-auth-failures",
                self.max_auth_failures.to_string(),
                "1 ..= 1000000".into(),
            );
        }
        if self.shutdown_grace > Duration::from_secs(24 * 3600) {
            return bad(
                "--shutdown-grace",
                format!("{:?}", self.shutdown_grace),
                "0 s ..= 1 day".into(),
            );
        }
        if !(1..=10_000).contains(&self.checkpoint_keep) {
            return bad(
                "tierkv-checkpoint-keep",
                self.checkpoint_keep.to_string(),
                "1 ..= 10000".into(),
            );
        }
        if self.slowlog_max_len > 1_000_000 {
            return bad(
                "slowlog-max-len",
                self.slowlog_max_len.to_string(),
                "0 ..= 1000000".into(),
            );
        }
        for (flag, v) in [
            ("--threads", self.threads),
            ("--io-threads", self.io_threads),
        ] {
            if !(1..=MAX_THREADS).contains(&v) {
                return bad(flag, v.to_string(), format!("1 ..= {MAX_THREADS}"));
            }
        }
        Ok(())
    }

    /// Checks the request limits against the store's: a server must never accept a key or
    /// value the engine will refuse only after receiving it whole.
    pub fn validate_for_store(&self, opts: &tierkv::Options) -> Result<(), ConfigError> {
        if self.limits.max_bulk > opts.max_value_size {
            return Err(ConfigError {
                flag: "--max-bulk",
                value: self.limits.max_bulk.to_string(),
                accepted: format!(
                    "1 ..= the store's max_value_size ({}): larger values are refused by the \
                     store anyway",
                    opts.max_value_size
                ),
            });
        }
        if self.limits.max_key > opts.max_key_size {
            return Err(ConfigError {
                flag: "--max-key",
                value: self.limits.max_key.to_string(),
                accepted: format!("1 ..= the store's max_key_size ({})", opts.max_key_size),
            });
        }
        Ok(())
    }
}

/// A setting out of its accepted range.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid {flag} {value}: accepted {accepted}")]
pub struct ConfigError {
    /// The setting, named as its `tierkv serve` flag.
    pub flag: &'static str,
    /// The value given.
    pub value: String,
    /// What is accepted.
    pub accepted: String,
}

impl Default for ServerConfig {
    fn default() -> Self {
        let limits = Limits::default();
        ServerConfig {
            bind: IpAddr::from([127, 0, 0, 1]),
            port: 6380,
            requirepass: None,
            sync: false,
            limits,
            max_clients: 10_000,
            reply_chunk: DEFAULT_REPLY_CHUNK,
            output_limit: Self::default_output_limit(limits.max_bulk),
            idle_timeout: Some(DEFAULT_IDLE_TIMEOUT),
            max_auth_failures: DEFAULT_MAX_AUTH_FAILURES,
            shutdown_grace: Duration::from_secs(30),
            threads: 2,
            io_threads: 64,
            db_dir: None,
            slow_dir: None,
            slowlog_slower_than_us: 10_000,
            slowlog_max_len: 128,
            latency_threshold_ms: 0,
            log_level: "warning".into(),
            config_file: None,
            checkpoint_dir: None,
            checkpoint_slow_dir: None,
            checkpoint_keep: 5,
            cache_size: None,
            slow_device: None,
            replicaof: None,
            masterauth: None,
            repl_backlog_size: DEFAULT_REPL_BACKLOG,
            repl_timeout: Duration::from_secs(60),
            replica_priority: 100,
            repl_mirror_hotness: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(c: ServerConfig, flag: &str) {
        let e = c.validate().expect_err(flag);
        assert_eq!(e.flag, flag, "{e}");
        let text = e.to_string();
        assert!(text.contains(flag) && text.contains("accepted"), "{text}");
    }

    #[test]
    fn defaults_are_valid_and_match_the_engine() {
        let c = ServerConfig::default();
        c.validate().unwrap();
        let engine = tierkv::Options::default();
        c.validate_for_store(&engine).unwrap();
        assert_eq!(c.limits.max_bulk, engine.max_value_size);
        assert_eq!(c.limits.max_key, engine.max_key_size);
    }

    #[test]
    fn each_zero_or_nonsense_setting_is_refused() {
        let d = ServerConfig::default;
        let lim = |f: fn(&mut Limits)| {
            let mut c = d();
            f(&mut c.limits);
            c
        };
        refused(lim(|l| l.max_bulk = 0), "--max-bulk");
        refused(lim(|l| l.max_key = 0), "--max-key");
        refused(lim(|l| l.max_args = 0), "--max-args");
        refused(lim(|l| l.max_query = 0), "--max-query-buffer");
        refused(lim(|l| l.max_query = l.max_bulk - 1), "--max-query-buffer");
        refused(
            ServerConfig {
                max_clients: 0,
                ..d()
            },
            "--max-clients",
        );
        refused(ServerConfig { threads: 0, ..d() }, "--threads");
        refused(
            ServerConfig {
                io_threads: 0,
                ..d()
            },
            "--io-threads",
        );
        refused(
            ServerConfig {
                reply_chunk: 0,
                ..d()
            },
            "--reply-chunk",
        );
        refused(
            ServerConfig {
                output_limit: 0,
                ..d()
            },
            "--client-output-limit",
        );
        refused(
            ServerConfig {
                output_limit: d().limits.max_bulk,
                ..d()
            },
            "--client-output-limit",
        );
        refused(
            ServerConfig {
                idle_timeout: Some(Duration::ZERO),
                ..d()
            },
            "--timeout",
        );
        refused(
            ServerConfig {
                max_auth_failures: 0,
                ..d()
            },
            "--max-auth-failures",
        );
    }

    #[test]
    fn empty_or_blank_password_is_refused() {
        for p in ["", " ", "\t \n"] {
            refused(
                ServerConfig {
                    requirepass: Some(p.into()),
                    ..ServerConfig::default()
                },
                "--requirepass",
            );
        }
        ServerConfig {
            requirepass: Some(" x ".into()),
            ..ServerConfig::default()
        }
        .validate()
        .unwrap();
    }

    #[test]
    fn limits_above_the_stores_are_refused() {
        let engine = tierkv::Options::default();
        let mut c = ServerConfig::default();
        c.limits.max_bulk = engine.max_value_size + 1;
        c.limits.max_query = c.limits.max_bulk;
        c.output_limit = ServerConfig::default_output_limit(c.limits.max_bulk);
        c.validate().unwrap();
        assert_eq!(
            c.validate_for_store(&engine).unwrap_err().flag,
            "--max-bulk"
        );
        let mut c = ServerConfig::default();
        c.limits.max_key = engine.max_key_size + 1;
        assert_eq!(c.validate_for_store(&engine).unwrap_err().flag, "--max-key");
    }
}

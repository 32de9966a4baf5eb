//! Server configuration: where to listen, authentication, durability and the limits that
//! bound each connection's memory.

use crate::resp::Limits;
use std::net::IpAddr;
use std::path::PathBuf;

/// How `tierkv serve` runs. `Default` listens on 127.0.0.1:6380 with Redis's limits.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Address to bind (default loopback: exposing a store is an explicit decision).
    pub bind: IpAddr,
    /// TCP port; 0 picks a free one (see [`crate::Server::local_addr`]).
    pub port: u16,
    /// Password required by AUTH before any other command (Redis `requirepass`).
    pub requirepass: Option<String>,
    /// Make every write durable (WAL fsync, group-committed) before replying, like Redis's
    /// `appendfsync always`.
    pub sync: bool,
    /// Request size limits.
    pub limits: Limits,
    /// Most simultaneous connections; more are refused with an error (Redis `maxclients`).
    pub max_clients: usize,
    /// Stop executing a pipeline and write the replies out once this many reply bytes are
    /// pending: bounds reply memory per connection and lets TCP backpressure reach a client
    /// that does not read.
    pub reply_chunk: usize,
    /// How long a graceful shutdown waits for connections to finish their in-flight requests
    /// before dropping them.
    pub shutdown_grace: std::time::Duration,
    /// Store directories, reported by INFO (informational only).
    pub db_dir: Option<PathBuf>,
    /// Slow-tier directory, reported by INFO (informational only).
    pub slow_dir: Option<PathBuf>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind: IpAddr::from([127, 0, 0, 1]),
            port: 6380,
            requirepass: None,
            sync: false,
            limits: Limits::default(),
            max_clients: 10_000,
            reply_chunk: 1024 * 1024,
            shutdown_grace: std::time::Duration::from_secs(30),
            db_dir: None,
            slow_dir: None,
        }
    }
}

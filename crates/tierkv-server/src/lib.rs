//! tierkv-server: `tierkv serve`, a Redis-protocol (RESP2, and RESP3 via HELLO) server over
//! a tierkv store, so any Redis client, `redis-cli`, `redis-benchmark` or a proxy such as
//! twemproxy can use it.
//!
//! ```no_run
//! # async fn demo() -> Result<(), tierkv_server::ServeError> {
//! let db = tierkv::Db::open("/tmp/served", tierkv::Options::default())?;
//! let config = tierkv_server::ServerConfig { port: 6380, ..Default::default() };
//! let server = tierkv_server::Server::bind(db, config).await?;
//! println!("listening on {}", server.local_addr()?);
//! server.run_until_signal().await // SHUTDOWN, SIGTERM or SIGINT stop it cleanly
//! # }
//! ```
//!
//! Modules: `resp` (wire format), `glob` (MATCH patterns), `commands` (table, dispatch and
//! handlers), `keyspace` (how Redis keys and types are encoded as engine records), `info`
//! (the INFO report), `state` (shared and per-connection state),
//! `server` (networking and shutdown), `config`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]
// A server must not panic on a client's input: library code handles every error.
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

mod backup;
mod client;
mod commands;
mod config;
mod error;
pub mod glob;
mod info;
mod keyspace;
pub mod params;
mod pubsub;
mod replication;
pub mod resp;
mod server;
mod slowlog;
mod state;

pub use config::{ConfigError, ServerConfig};
pub use resp::Limits;
pub use server::{ServeError, Server, ShutdownHandle};

/// Sets the chunk size of the sorted sets' rank index (at least 4; 32 by default) for every
/// server in this process, and returns the previous one. For tests, so that sets of a few
/// hundred members cross many chunk splits and merges; any size reads an index built with
/// any other.
#[doc(hidden)]
pub fn set_zset_index_chunk(n: u64) -> u64 {
    commands::set_zset_index_chunk(n)
}

/// Runs a server to completion on a new multi-threaded runtime of `config.threads` reactor
/// threads (and at most `config.io_threads` threads running store calls): checks the
/// configuration, binds, calls `on_bound` with the bound address, and serves until
/// SHUTDOWN, SIGTERM or SIGINT. What `tierkv serve` calls.
pub fn serve(
    db: tierkv::Db,
    config: ServerConfig,
    on_bound: impl FnOnce(std::net::SocketAddr),
) -> Result<(), ServeError> {
    config.validate()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.threads)
        .max_blocking_threads(config.io_threads)
        .thread_name("tierkv-serve")
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let server = Server::bind(db, config).await?;
        on_bound(server.local_addr()?);
        server.run_until_signal().await
    })
}

//! tierkv-bench: workloads, key distributions, the runner and reports behind `tierkv bench`.
//!
//! One invocation loads a store, then runs the same generated operations against each
//! requested system (tierkv with and without promotion, all on the fast disk, ablations and,
//! behind the `rocksdb-peer` feature, RocksDB) and writes a markdown report, `results.json`
//! and PNG charts. Entry point: [`run_cli`] with [`BenchArgs`].

// One unsafe block, `rss::release_free_memory`'s call into glibc; nothing else.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod args;
pub mod budget;
pub mod chart;
pub mod distribution;
mod error;
pub mod report;
#[cfg(feature = "rocksdb-peer")]
pub mod rocksdb_peer;
pub mod rss;
pub mod runner;
pub mod scale;
pub mod systems;
pub mod trace;
pub mod workload;

pub use args::{parse_size, BenchArgs};
pub use error::{BenchError, Result};
pub use report::BenchResults;
pub use scale::Config;

/// Runs the whole benchmark described by the command-line flags and writes its outputs to
/// the output directory. Returns the results that were written.
pub fn run_cli(args: &BenchArgs) -> Result<BenchResults> {
    let cfg = Config::from_args(args)?;
    runner::run(&cfg)
}

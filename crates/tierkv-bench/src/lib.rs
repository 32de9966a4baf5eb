//! tierkv-bench: workloads, key distributions, the runner and reports behind `tierkv bench`.
//!
//! One invocation loads a store, then runs the same generated operations against each
//! requested system (tierkv with and without promotion, all on the fast disk, ablations and,
//! behind the `rocksdb-peer` feature, RocksDB) and writes a markdown report, `results.json`
//! and PNG charts. Entry point: [`run_cli`] with [`BenchArgs`].
//!
//! Modules import one way only. From the bottom up, each uses only those before it (and the
//! leaves `error` and `rss`): `mix`, `systems`, `distribution`, `trace`, `keyfile`,
//! `workload`, `kvexe_trace`, `args`,
//! `scale`, `store`, `rocksdb_peer`, `budget`, `results`, `chart`, `report`, `runner`.
//! `crates/tierkv/tests/module_graph.rs` fails on any circle.

#![warn(missing_docs)]
// One `unsafe` block (glibc's `malloc_trim` in `rss`), allowed there with its reason.
#![deny(unsafe_code)]
// Library code reports errors as `BenchError`; tests may unwrap.
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

pub mod args;
pub mod blockdev;
pub mod budget;
pub mod chart;
pub mod distribution;
mod error;
pub mod keyfile;
pub mod kvexe_trace;
pub mod mix;
pub mod report;
pub mod results;
#[cfg(feature = "rocksdb-peer")]
pub mod rocksdb_peer;
pub mod rss;
pub mod runner;
pub mod scale;
pub mod store;
pub mod systems;
pub mod trace;
pub mod workload;

pub use args::{parse_size, BenchArgs};
pub use error::{BenchError, Result};
pub use results::BenchResults;
pub use scale::Config;

/// Runs the whole benchmark described by the command-line flags and writes its outputs to
/// the output directory. Returns the results that were written.
pub fn run_cli(args: &BenchArgs) -> Result<BenchResults> {
    let cfg = Config::from_args(args)?;
    runner::run(&cfg)
}

/// Writes the load and run phases the flags describe as traces for the HotRAP prototype's
/// driver (see [`kvexe_trace`]) into `dir`, running no system. Returns the two files.
pub fn write_kvexe_trace(
    args: &BenchArgs,
    dir: &std::path::Path,
) -> Result<(std::path::PathBuf, std::path::PathBuf)> {
    let mut cfg = Config::from_args(args)?;
    let plan = runner::build_plan(&mut cfg)?;
    kvexe_trace::write(&plan, dir)
}

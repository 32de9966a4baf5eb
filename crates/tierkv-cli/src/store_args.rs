//! Flags that locate a store (its tier directories) shared by every store subcommand.

use std::path::PathBuf;

/// Where the store lives.
#[derive(clap::Args, Debug)]
pub struct StoreArgs {
    /// The store's (fast tier) directory.
    #[arg(long)]
    pub db: PathBuf,
    /// The slow tier directory of a two-tier store.
    #[arg(long, requires = "fd_budget")]
    pub slow_dir: Option<PathBuf>,
    /// Fast tier budget of a two-tier store (e.g. 256MiB, 1GiB).
    #[arg(long, value_parser = tierkv_bench::parse_size)]
    pub fd_budget: Option<u64>,
    /// One memory budget for memtables, cache, index and filter blocks, promotion cache and
    /// hotness tracker (e.g. 256MiB); `stats` then reports each component against its share.
    #[arg(long, value_parser = tierkv_bench::parse_size)]
    pub memory_budget: Option<u64>,
}

impl StoreArgs {
    /// Opens the store; only `put` may create it (otherwise a path without a store is
    /// refused before anything is created there).
    pub fn open(&self, create: bool) -> tierkv::Result<tierkv::Db> {
        let opts = tierkv::Options {
            create_if_missing: create,
            fd_budget: self.fd_budget,
            memory_budget: self.memory_budget(),
            slow: self.slow_dir.as_ref().map(|dir| tierkv::SlowTier {
                dir: dir.clone(),
                budget: None,
                device: tierkv::DeviceProfile::none(),
            }),
            ..Default::default()
        };
        tierkv::Db::open(&self.db, opts)
    }

    /// `--memory-budget` in bytes.
    pub fn memory_budget(&self) -> Option<usize> {
        self.memory_budget
            .map(|b| usize::try_from(b).unwrap_or(usize::MAX))
    }
}

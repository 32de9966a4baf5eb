//! Flags that locate a store (its tier directories) shared by every store subcommand.
//!
//! A two-tier store records its tiers at its first two-tier open (see `tierkv::Db::open`),
//! so `--slow-dir` and `--fd-budget` are needed only then; later calls may leave them out,
//! and a value different from the recorded one is refused by the engine naming both.

use std::path::PathBuf;

/// Where the store lives.
#[derive(clap::Args, Debug)]
pub struct StoreArgs {
    /// The store's (fast tier) directory.
    #[arg(long)]
    pub db: PathBuf,
    /// The slow tier directory of a two-tier store (recorded in the store at its first
    /// two-tier open; later calls may leave it out).
    #[arg(long)]
    pub slow_dir: Option<PathBuf>,
    /// Fast tier budget of a two-tier store (e.g. 256MiB, 1GiB); needed with --slow-dir when
    /// the store is created, recorded like it.
    #[arg(long, value_parser = positive_size)]
    pub fd_budget: Option<u64>,
    /// One memory budget for memtables, cache, index and filter blocks, promotion cache and
    /// hotness tracker (e.g. 256MiB); `stats` then reports each component against its share.
    #[arg(long, value_parser = positive_size)]
    pub memory_budget: Option<u64>,
    /// Keep the fast disk's record cache on a two-tier store: copies of slow-tier records
    /// read often, in the part of the fast budget the tables and WALs leave free (not
    /// kept across opens; its index takes about 40 bytes of memory per record).
    #[arg(long)]
    pub record_cache: bool,
}

impl StoreArgs {
    /// Opens the store; only `put` may create it (otherwise a path without a store is
    /// refused before anything is created there).
    pub fn open(&self, create: bool) -> tierkv::Result<tierkv::Db> {
        let opts = self.options(create, tierkv::DeviceProfile::none())?;
        tierkv::Db::open(&self.db, opts)
    }

    /// The engine options these flags give (`slow_device`: the device profile of
    /// `--slow-dir`). `--fd-budget` alone is refused unless the store records a slow tier:
    /// a budget for a single-directory store would be silently meaningless.
    pub fn options(
        &self,
        create: bool,
        slow_device: tierkv::DeviceProfile,
    ) -> tierkv::Result<tierkv::Options> {
        if let (Some(budget), None) = (self.fd_budget, &self.slow_dir) {
            if tierkv::Db::stored_tiers(&self.db)?.is_none() {
                return Err(tierkv::Error::InvalidArgument(format!(
                    "--fd-budget {budget} needs --slow-dir: the store at {} records no slow tier",
                    self.db.display()
                )));
            }
        }
        Ok(tierkv::Options {
            create_if_missing: create,
            fd_budget: self.fd_budget,
            memory_budget: self.memory_budget(),
            slow: self.slow_dir.as_ref().map(|dir| tierkv::SlowTier {
                dir: dir.clone(),
                budget: None,
                device: slow_device,
            }),
            record_cache: tierkv::RecordCacheOptions {
                enabled: self.record_cache,
                ..Default::default()
            },
            ..Default::default()
        })
    }

    /// `--memory-budget` in bytes.
    pub fn memory_budget(&self) -> Option<usize> {
        self.memory_budget
            .map(|b| usize::try_from(b).unwrap_or(usize::MAX))
    }
}

/// A size (as `tierkv_bench::parse_size` reads it) of at least one byte: a zero budget is
/// refused here, naming the flag, rather than by the engine in its own terms.
fn positive_size(s: &str) -> Result<u64, String> {
    match tierkv_bench::parse_size(s)? {
        0 => Err("accepted: 1 byte and up (e.g. 256MiB)".into()),
        n => Ok(n),
    }
}

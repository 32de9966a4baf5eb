//! tierkv: an embeddable, persistent, ordered key-value store for tiered storage.
//!
//! A leveled LSM-tree whose upper levels live on a fast disk and whose lower levels live on
//! a slow disk. See `docs/ARCHITECTURE.md` for the map of modules and the data flow.
//!
//! ```no_run
//! use tierkv::{Db, Options};
//! let db = Db::open("/tmp/my-store", Options::default())?;
//! db.put(b"hello", b"world")?;
//! assert_eq!(db.get(b"hello")?.as_deref(), Some(&b"world"[..]));
//! # Ok::<(), tierkv::Error>(())
//! ```

#![warn(missing_docs)]
// The engine has no unsafe code but in two modules, allowed there alone: `env::uring`
// (io_uring submissions of raw buffer pointers) and `memtable::skiplist` (the memtable's
// arena skiplist); docs/ARCHITECTURE.md lists them.
#![deny(unsafe_code)]
// No panic on an I/O or input path: library code returns errors. The few `expect`s left
// state an invariant the code upholds, each with its reason; tests may unwrap.
#![warn(clippy::unwrap_used, clippy::expect_used)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod batch;
mod cache;
#[doc(hidden)]
pub mod coding;
mod compaction;
mod db;
pub mod env;
mod error;
mod expiry;
#[doc(hidden)]
pub mod fuzz_hooks;
pub mod hot;
#[doc(hidden)]
pub mod iter;
#[doc(hidden)]
pub mod key;
mod mem_filter;
pub mod memory;
mod memtable;
pub mod merge;
mod options;
mod record_cache;
#[doc(hidden)]
pub mod sst;
#[doc(hidden)]
pub mod testing;
mod tiers;
#[doc(hidden)]
pub mod version;
#[doc(hidden)]
pub mod wal;

pub use batch::{BatchEntry, WriteBatch};
pub use cache::{AdaptiveCacheStats, CacheMode, CacheOptions, ComponentStats, MAX_CACHE_CAPACITY};
pub use db::{
    CacheStats, Change, ChangeBytes, Checkpoint, ConditionalWrite, Db, DbIterator, DbStats,
    GetSources, LevelStats, Snapshot, StoredTiers, Update,
};
pub use env::{DeviceProfile, Tier};
pub use error::{Error, Result};
pub use expiry::{Clock, Entry, EntryRef, ManualClock, SystemClock};
pub use hot::cascade::BloomCascadeOptions;
pub use hot::TrackerKind;
pub use memory::{MemoryDivision, MemoryShares, MemoryStats};
pub use options::{
    CompactionOptions, LastLevelFilters, Options, PromotionOptions, ReadIo, ReadOptions,
    RecordCacheOptions, SlowTier, SlowTierFormat, WriteOptions,
};
pub use record_cache::RecordCacheStats;
pub use sst::Compression;
pub use tiers::LevelLayout;
pub use wal::RecoveryMode;

/// The README's example, compiled and run as a doc test so it stays true.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

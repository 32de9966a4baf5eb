//! User-facing configuration: [`Options`] for opening a store, [`ReadOptions`] and
//! [`WriteOptions`] per call. Owns validation of option values and the level layout
//! derived from them (targets and tier placement); it never opens files.

use crate::env::DeviceProfile;
use crate::error::{Error, Result};
use crate::memory::{MemoryDivision, MemoryShares};
use std::path::PathBuf;

mod cache;
mod recovery;
mod table;
mod tracker;

pub use cache::{CacheMode, CacheOptions};
pub use recovery::RecoveryMode;
pub use table::{Compression, LastLevelFilters, TableOptions};
pub use tracker::{BloomCascadeOptions, RaltOptions, ScoringMethod, TrackerKind};

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

/// Most levels a store may have ([`Options::num_levels`]).
pub const MAX_LEVELS: usize = 20;

/// The slow tier of a two-tier store.
#[derive(Clone, Debug)]
pub struct SlowTier {
    /// Directory on the slow disk.
    pub dir: PathBuf,
    /// Capacity of the slow tier in bytes (`None`: unlimited).
    pub budget: Option<u64>,
    /// Device model applied to every I/O on this tier.
    pub device: DeviceProfile,
}

/// Options for [`crate::Db::open`].
#[derive(Clone, Debug)]
pub struct Options {
    /// Create the store if it does not exist (default true).
    pub create_if_missing: bool,
    /// Fail if the store already exists (default false).
    pub error_if_exists: bool,
    /// Memtable size that triggers a switch to a new memtable (default 64 MiB).
    pub write_buffer_size: usize,
    /// Immutable memtables allowed to wait for flush before writes stall (default 2).
    pub max_immutable_memtables: usize,
    /// Largest point read of a data block (default 4 KiB): a block closes once its
    /// uncompressed size reaches it, and before an entry that would take the block's read
    /// (whole 512-byte sectors from where it starts) past it, so 1 KiB records make blocks
    /// of three (a 4.5-5 KiB read of four cost 20% more per read on the benchmark disk,
    /// docs/bench/block-read-unit.md). With `block_records`, the size a block of large
    /// records stops at. A point read moves one block, so this is the read unit of records
    /// of about 100 B and more: with 1 KiB records, 4 KiB blocks took
    /// RO hotspot-5% beside the HotRAP prototype from 36.7-38.3K to 50.5-55.2K ops/s at the
    /// same reads per operation (16 KiB random reads on that disk: 42K IOPS at 379 us;
    /// 4 KiB: 75K at 213 us; docs/bench/hotrap-peer.md). Scan defragmentation's tables
    /// keep blocks of at least 16 KiB (`compaction::semi_sink`).
    pub block_size: usize,
    /// Records per data block (default `Some(8)`; `None`: blocks are cut by `block_size`
    /// only). A block is closed once it holds this many entries and at least 1 KiB, or
    /// when it reaches `block_size`, whichever comes first. A point read moves one block
    /// from disk, so with small records the read unit follows the record (108 B records:
    /// blocks of about 1 KiB, against 4 KiB at the size cut, and a block cache holding four
    /// times as many distinct hot blocks), at the cost of one index entry per block (about
    /// 0.76 B per key at 8 records, table format 3). Records of 512 B and more fill
    /// `block_size` first, so they are not affected.
    pub block_records: Option<usize>,
    /// Keys between restart points in a data block (default 16).
    pub block_restart_interval: usize,
    /// Bloom filter bits per key, 0 disables filters (default 10).
    pub bloom_bits_per_key: u32,
    /// Bloom filters on the tables of the deepest level holding data (default
    /// [`LastLevelFilters::Auto`]: kept where they cost at most 1% of a table's record
    /// bytes, so tables of records under 125 bytes go without at 10 bits per key). Without
    /// them a lookup of a key stored nowhere reads one data block of that level; every other
    /// lookup costs the same. With 108-byte records and 8-record blocks the index and
    /// filters stay near 0.9 B per key instead of 2.0 (docs/bench/read-units.md). Applies to
    /// both slow-tier formats (`CompactionOptions::slow_tier_format`). A table that would
    /// reach that level by a move with a filter the rule leaves out is rewritten without it
    /// instead; a table left above a level that later fills keeps its filter until a
    /// compaction rewrites it.
    pub last_level_filters: LastLevelFilters,
    /// Block compression (default none).
    pub compression: Compression,
    /// Target size of a table file written by compaction (default 64 MiB).
    pub target_file_size: u64,
    /// L0 file count that triggers an L0 compaction (default 4).
    pub level0_compaction_trigger: usize,
    /// L0 file count at which each write is delayed by 1 ms (default 20).
    pub level0_slowdown_trigger: usize,
    /// L0 file count at which writes stop until compaction catches up (default 36).
    pub level0_stop_trigger: usize,
    /// Target size of L1 (default 256 MiB). With an FD budget it only decides how many
    /// levels the fast tier holds; their sizes then fill the budget (see
    /// [`LevelLayout`](crate::LevelLayout)).
    pub max_bytes_for_level_base: u64,
    /// Size ratio between adjacent levels (default 10).
    pub level_size_ratio: u64,
    /// Number of levels including L0 (default 7).
    pub num_levels: usize,
    /// Background threads for flushes and compactions (default 4: one kept free for
    /// flushes, so up to three compactions run at once; compactions into a slow disk spend
    /// most of their time waiting on it, and one of them must not hold up L0).
    pub background_threads: usize,
    /// How much lower than the foreground's the CPU priority of the hotness tracker's
    /// thread is, in nice steps (default 10; 0..=19, 0 keeps it level). The tracker's
    /// upkeep (RALT's flushes, compactions and evictions) runs on its own thread: a merge
    /// of its runs takes a core for a fraction of a second, and on a machine the reads keep
    /// busy that core came out of the foreground's share (the paper scale's read-only
    /// hotspot lost a fifth of its throughput in the seconds RALT merged). Its work is a
    /// hint: when it lags, accesses are dropped and counted, never data. On Linux only;
    /// elsewhere the thread keeps the process's priority.
    pub tracker_nice: i32,
    /// Threads of the reader pool that runs the table reads of a [`crate::Db::multi_get`]
    /// batch in parallel, so one caller keeps up to this many disk reads in flight
    /// (default 16, 1..=1024; 1 runs every batch on the caller's thread). Started at open,
    /// stopped at close; idle workers only wait. Used when [`Options::read_io`] resolves
    /// to [`ReadIo::Threads`]; with io_uring it only sizes a bounded batch's waves.
    pub read_parallelism: usize,
    /// How a [`crate::Db::multi_get`] batch keeps its disk reads in flight (default
    /// [`ReadIo::Auto`]: io_uring where the kernel allows it, else the reader pool).
    pub read_io: ReadIo,
    /// Memory budget of the whole cache in bytes, 0 disables it (default 64 MiB): the KV,
    /// KP and block caches and the ghost caches' metadata together stay within it
    /// ([`crate::CacheMode::BlockOnly`] gives it all to the block cache). Called
    /// `block_cache_size` before the cache held more than blocks.
    pub cache_size: usize,
    /// How the cache budget is split between KV, KP and block caches (default: adaptive,
    /// AC-Key) and the adaptive policy's parameters.
    pub cache: CacheOptions,
    /// Table files kept open (default 0: automatic, the process's open-file limit, raised
    /// to its hard limit at open, less 256 descriptors for the rest; see
    /// [`crate::env::open_file_budget`]). A store with more tables than this reopens them
    /// (reading footer, index and filter again) as reads reach them.
    pub max_open_files: usize,
    /// Most bytes of index and filter blocks the open tables hold (default `None`: only
    /// `max_open_files` bounds them). A table evicted from the table cache gives its memory
    /// back once no reader or compaction holds it; a table too large for the limit alone is
    /// opened for each use and never kept.
    pub table_memory_limit: Option<usize>,
    /// One memory budget for the whole store (default `None`: each component has its own
    /// option). Divided by `memory_shares` among the memtables, the cache, the open tables'
    /// index and filter blocks, the promotion cache and the hotness tracker, and overriding
    /// the options that size them; see [`crate::memory`] and [`crate::DbStats::memory`].
    pub memory_budget: Option<usize>,
    /// How `memory_budget` is divided (used only with a budget).
    pub memory_shares: MemoryShares,
    /// Read table data with O_DIRECT so the page cache cannot hide a slow tier (default true;
    /// falls back to buffered reads, with a warning, where the filesystem refuses it).
    pub use_direct_io: bool,
    /// Largest accepted key (default 64 KiB).
    pub max_key_size: usize,
    /// Largest accepted value (default 256 MiB).
    pub max_value_size: usize,
    /// How WAL replay treats damaged records (default: tolerate only a torn tail).
    pub wal_recovery_mode: RecoveryMode,
    /// Bytes of retired WAL files kept for the change feed ([`crate::Db::changes_since`]),
    /// the oldest removed first beyond it (default 0: removed at once). A replica that
    /// falls further behind starts again from a checkpoint.
    pub wal_retention_bytes: u64,
    /// Device model of the fast tier (default none).
    pub fast_device: DeviceProfile,
    /// Budget of the fast tier in bytes: the levels kept on it are sized to fill it. A soft
    /// limit: compaction pushes data down when it is exceeded. `None` with a slow tier set
    /// is an error; without a slow tier it only sizes the levels.
    pub fd_budget: Option<u64>,
    /// The slow tier; `None` keeps everything in the store's one directory.
    pub slow: Option<SlowTier>,
    /// Keep every level on the fast tier even when a slow tier is configured (the
    /// "all on FD" upper bound used in comparisons). Level sizes stay the same.
    pub all_on_fast: bool,
    /// Hot-record retention and promotion (HotRAP); acts only on a two-tier store.
    pub promotion: PromotionOptions,
    /// How compactions save background I/O (HyperDB's ideas within the table format).
    pub compaction: CompactionOptions,
    /// The fast disk's record cache: copies of warm slow-tier records in the fast
    /// disk's idle budget (acts only on a two-tier store).
    pub record_cache: RecordCacheOptions,
    /// Injects I/O faults into every file operation (testing; default none).
    pub fault_injector: Option<std::sync::Arc<crate::env::FaultInjector>>,
    /// The operator behind [`crate::Db::merge`] (default none: `merge` is refused).
    pub merge_operator: Option<std::sync::Arc<dyn crate::merge::MergeOperator>>,
    /// The time source of key expiry (default [`crate::SystemClock`]): a record whose
    /// deadline is at or before `clock.now_ms()` reads as deleted. Tests use a
    /// [`crate::ManualClock`].
    pub clock: std::sync::Arc<dyn crate::expiry::Clock>,
}

/// Switches and sizes of HotRAP's retention and promotion, including the paper's ablations.
#[derive(Clone, Debug)]
pub struct PromotionOptions {
    /// Master switch (default true). Off gives the "RocksDB-fat" baseline: no RALT, no
    /// promotion cache, no retention.
    pub enabled: bool,
    /// Keep hot records on the last fast level when compacting into the slow tier.
    pub retention: bool,
    /// Ask RALT before promoting (off: every record read from the slow tier is promoted,
    /// the paper's "no hotness check" ablation).
    pub hotness_check: bool,
    /// With `hotness_check`, also promote a record read from the slow tier whose key was
    /// read from it and judged within the last hot-set limit's worth of such keys
    /// (default true; not in the paper): a repeat. RALT's scores see an access only once
    /// its buffer is written, so a hot key otherwise waited several slow reads before its
    /// first promotion; a key of a uniform workload is rarely read again within the
    /// window. Retention and eviction still follow the scores alone. Only RALT keeps the
    /// window: with the bloom cascade this does nothing.
    pub promote_on_repeat: bool,
    /// Promote promotion-cache records inside a fast-to-slow compaction's range.
    pub by_compaction: bool,
    /// Promote through the checker when the promotion cache fills.
    pub by_flush: bool,
    /// Size at which the mutable promotion cache is frozen for the checker (default: the
    /// target file size, as in the paper).
    pub cache_size: Option<usize>,
    /// Most bytes the promotion cache holds, mutable and frozen tables together; a record
    /// read from the slow tier beyond it is not cached (default `None`: bounded by the
    /// mutable table's cap of twice `cache_size` and the frozen tables' count).
    pub memory_limit: Option<usize>,
    /// How often a store serving reads lists the keys of the slow tier's records it serves
    /// from memory (`PCKEYS`; the promotion cache's and the point caches'), which the next
    /// open reads back into its caches: the part of the hot set that a kill -9 would
    /// otherwise send back to the slow disk (default 10 s; a clean close lists them too).
    pub warm_list_interval: std::time::Duration,
    /// Which hotness tracker decides what is hot (default RALT).
    pub tracker: TrackerKind,
    /// RALT's settings; its `fd_budget` is taken from [`Options::fd_budget`].
    pub ralt: RaltOptions,
    /// The bloom-cascade tracker's settings (when `tracker` is `BloomCascade`); its
    /// `fd_bytes` is taken from the fast levels' capacity.
    pub bloom_cascade: BloomCascadeOptions,
}

/// The fast disk's record cache (`record_cache`, docs/ARCHITECTURE.md): records read from
/// the slow disk are copied to the fast disk, into the part of `fd_budget` the fast
/// tables and WALs leave free, and served from there until the room is
/// needed or records whose keys are read more often take it. Not kept across opens.
#[derive(Clone, Debug)]
pub struct RecordCacheOptions {
    /// Keep one (default false).
    pub enabled: bool,
    /// Most bytes of records it holds (default `None`: whatever room the budget leaves).
    pub max_bytes: Option<u64>,
    /// Bytes of the segments it writes and drops whole (default 256 KiB).
    pub segment_size: usize,
}

impl Default for RecordCacheOptions {
    fn default() -> Self {
        RecordCacheOptions {
            enabled: false,
            max_bytes: None,
            segment_size: 256 << 10,
        }
    }
}

/// Switches of the compaction's background-traffic savings (HyperDB, docs/DESIGN.md).
#[derive(Clone, Debug)]
pub struct CompactionOptions {
    /// Copy a data block of an input table into the output verbatim, instead of decoding
    /// and re-encoding it, when no other input has a key inside its range and nothing in
    /// it is dropped or routed elsewhere (default true). Saves CPU, not bytes: the output
    /// holds the same bytes either way.
    pub block_reuse: bool,
    /// At the fast-to-slow boundary, demote narrow key ranges in batches: extend the
    /// picked file with neighbours of its level whose overlap in the slow level adds no
    /// file, so the slow files are rewritten once for all of them (default true).
    pub batched_demotion: bool,
    /// With a slow tier, L0's compaction trigger (bytes, and files up to
    /// `level0_slowdown_trigger`) grows into whatever part of [`Options::fd_budget`] the
    /// rest of the fast tier does not hold now (the live WALs and L1..Lk), never below
    /// its layout share (default true). The layout sizes the fast levels for the worst
    /// case, every WAL and L0 full at once; most of the time they hold far less, and each
    /// L0 compaction rewrites the L1 files it overlaps, so larger, rarer ones rewrite L1
    /// fewer times (docs/DESIGN.md, "Two tiers on one machine"). False keeps the fixed
    /// trigger.
    pub fill_fast_budget: bool,
    /// The expiry sweep: when no level needs compacting, a table whose estimated share of
    /// expired records (from the count and deadline range its properties record) is at
    /// least this is compacted, which rewrites them as tombstones or drops them (default
    /// 0.5; above 1 turns the sweep off). It reads no table to find expired data.
    pub expired_share_trigger: f64,
    /// While any table holds expiring records (or the slow tier is semi-sorted, see
    /// [`CompactionOptions::defragment_scanned`], or L0 holds a table, see
    /// [`CompactionOptions::compact_scanned_level0`]), the background threads wake this
    /// often to let the picker look (default 1 s), even when no write arrives.
    pub expiry_check_interval: std::time::Duration,
    /// The format of the slow tier's tables (default [`SlowTierFormat::Sorted`]: the
    /// semi-sorted format is new and not yet measured against it).
    pub slow_tier_format: SlowTierFormat,
    /// Preemptive pushdown (HyperDB §3.4, docs/DESIGN.md): a compaction whose output level
    /// is on the slow tier writes a user key directly into a deeper level when no level in
    /// between holds a version of it (by the open tables' in-memory filters and key
    /// ranges, no data read) and it falls in a gap between that level's files, instead of
    /// into the output level where the next compaction would rewrite it. The compaction
    /// then claims its key range on every level down to the deepest it may write (default
    /// false: see docs/bench/preemptive.md).
    pub preemptive_pushdown: bool,
    /// On a slow level not under space pressure, pick the victim as HyperDB's Algorithm 1:
    /// the highest overlap score (blocks overlapped level by level below, from the open
    /// tables' in-memory indexes) among up to 8 candidate files drawn at random, instead
    /// of the smallest overlap-to-size ratio (default false).
    pub overlap_score_victim: bool,
    /// Largest data block of a semi-sorted table (default 2 KiB; `Options::block_size`
    /// when that is smaller, and `block_records` still cuts). A merge into a semi-sorted
    /// table rewrites every block an input key lands in, so the bytes a demoted record
    /// costs there grow with the block it lands in: with 1 KiB records the slow tier's
    /// writes per user byte were about 2.4 / 1.2 / 0.9 / 0.7 with 16 / 4 / 2 / 1 KiB blocks,
    /// while the block index grows the other way (docs/bench/semi-block-size.md). Sorted
    /// tables are rewritten whole either way and keep `block_size`, and so
    /// do the tables scan defragmentation rewrites ([`CompactionOptions::defragment_scanned`]:
    /// scans read them, and pay per block).
    pub semi_block_size: usize,
    /// Scan defragmentation (docs/DESIGN.md, "Semi-sorted slow tier"): when no level
    /// needs compacting, a semi-sorted table whose appended generations have cost user
    /// scans one extra read per 16 KiB of the table (at least 100; reads a scan window
    /// split across the file; more bytes per read where the tier's device model makes a
    /// read cost more, half its `DeviceProfile::read_cost_bytes`) is rewritten in place, its blocks in key order again and in
    /// the sorted tables' `Options::block_size` (default true; only semi-sorted tables are
    /// ever fragmented). While the slow tier is semi-sorted, the background threads wake
    /// every [`CompactionOptions::expiry_check_interval`] to let the picker look, even when no
    /// write arrives.
    pub defragment_scanned: bool,
    /// Scan-triggered L0 compaction: when no level needs compacting, L0 is compacted into
    /// L1 once user scans have read its tables (a block of each per seek, as they
    /// overlap) one time per 16 KiB of L0 and the L1 files it overlaps (at least 100),
    /// whether or not L0 reached its size trigger (default true). Writes alone never
    /// trigger it. While L0 holds a table, the background threads wake every
    /// [`CompactionOptions::expiry_check_interval`] to let the picker look.
    pub compact_scanned_level0: bool,
    /// Size the slow levels from the data they hold (default true): from the first slow
    /// level down to the deepest holding data they grow by one ratio from the part of the
    /// last fast level that retained hot records leave to cold data, as many levels as
    /// keep the writes per byte demoted lowest, the first never smaller than the last
    /// fast level (the HotRAP prototype's auto-tuner; docs/DESIGN.md, "Slow levels sized
    /// from the data"). False keeps the layout's targets: each slow level
    /// [`Options::level_size_ratio`] times the one above.
    pub dynamic_slow_levels: bool,
}

/// How a [`crate::Db::multi_get`] batch (and a [`crate::Db::get_pipelined`] stream) reads
/// the blocks its keys need.
///
/// The default is [`ReadIo::Auto`]. On the F2 workload (docs/BENCHMARKS-LOG.md, "F2 side
/// by side before pipelined reads": YCSB C, 2 client threads, `--batch 32`) on a quiet machine the io_uring path did
/// 1.28-1.50x the pool's operations per second at a third of its CPU, with half the peak
/// resident size (the `tierkv` binary, mimalloc: the pool's run peaked at 331 MiB).
/// On a machine whose cores are oversubscribed the pool did better (0.69-0.85x for io_uring
/// in two pairs at load 16-37): its 16 runnable workers win a larger share of the CPU, and
/// an io_uring round then waited for its slowest read (those measurements predate the
/// completion-driven pipeline, which has no rounds). [`ReadIo::Threads`] is the choice
/// there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReadIo {
    /// io_uring when the kernel allows it (tried at open), else [`ReadIo::Threads`].
    #[default]
    Auto,
    /// io_uring (Linux only): the calling thread keeps its keys' block reads in flight
    /// and reaps them itself, each key going on as soon as its block completes. Opening fails if no ring can be set up
    /// (seccomp, an old kernel, a memlock limit).
    Uring,
    /// The reader pool ([`Options::read_parallelism`] threads): each key's reads run on a
    /// worker, one at a time.
    Threads,
}

impl ReadIo {
    /// The name [`ReadIo::from_str`](std::str::FromStr) takes: `auto`, `uring` or
    /// `threads`.
    pub fn name(self) -> &'static str {
        match self {
            ReadIo::Auto => "auto",
            ReadIo::Uring => "uring",
            ReadIo::Threads => "threads",
        }
    }
}

impl std::str::FromStr for ReadIo {
    type Err = crate::error::Error;

    /// `auto`, `uring` or `threads`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(ReadIo::Auto),
            "uring" => Ok(ReadIo::Uring),
            "threads" => Ok(ReadIo::Threads),
            _ => Err(crate::error::Error::InvalidArgument(format!(
                "unknown read I/O {s:?}: expected auto, uring or threads"
            ))),
        }
    }
}

/// How compactions into the slow tier write their tables (docs/DESIGN.md, "Semi-sorted
/// slow tier"; bytes in docs/FORMAT.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum SlowTierFormat {
    /// Sorted tables, rewritten whole when a merge lands inside their range.
    #[default]
    Sorted,
    /// HyperDB's semi-sorted tables: a merge marks only the blocks holding an input key
    /// dirty, appends their replacements and the records landing in gaps as a new
    /// generation, and keeps every clean block where it is; a table more than half dirty
    /// is rewritten whole. Promotion by compaction then sees only the records it reads
    /// (the dirty blocks'), and the slow tier holds garbage up to about 2x its live bytes
    /// (reported as its space amplification).
    SemiSorted,
}

impl Default for CompactionOptions {
    fn default() -> Self {
        CompactionOptions {
            block_reuse: true,
            batched_demotion: true,
            fill_fast_budget: true,
            expired_share_trigger: 0.5,
            expiry_check_interval: std::time::Duration::from_secs(1),
            slow_tier_format: SlowTierFormat::Sorted,
            preemptive_pushdown: false,
            overlap_score_victim: false,
            semi_block_size: 2 * KIB,
            defragment_scanned: true,
            compact_scanned_level0: true,
            dynamic_slow_levels: true,
        }
    }
}

impl Default for PromotionOptions {
    fn default() -> Self {
        PromotionOptions {
            enabled: true,
            retention: true,
            hotness_check: true,
            promote_on_repeat: true,
            by_compaction: true,
            by_flush: true,
            cache_size: None,
            memory_limit: None,
            warm_list_interval: std::time::Duration::from_secs(10),
            tracker: TrackerKind::Ralt,
            ralt: RaltOptions::default(),
            bloom_cascade: BloomCascadeOptions::default(),
        }
    }
}

impl PromotionOptions {
    /// Everything off (the baseline placement).
    pub fn disabled() -> Self {
        PromotionOptions {
            enabled: false,
            ..Default::default()
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create_if_missing: true,
            error_if_exists: false,
            write_buffer_size: 64 * MIB,
            max_immutable_memtables: 2,
            block_size: 4 * KIB,
            block_records: Some(8),
            block_restart_interval: 16,
            bloom_bits_per_key: 10,
            last_level_filters: LastLevelFilters::Auto,
            compression: Compression::None,
            target_file_size: 64 * MIB as u64,
            level0_compaction_trigger: 4,
            level0_slowdown_trigger: 20,
            level0_stop_trigger: 36,
            max_bytes_for_level_base: 256 * MIB as u64,
            level_size_ratio: 10,
            num_levels: 7,
            background_threads: 4,
            tracker_nice: 10,
            read_parallelism: 16,
            read_io: ReadIo::Auto,
            cache_size: 64 * MIB,
            cache: CacheOptions::default(),
            max_open_files: 0,
            table_memory_limit: None,
            memory_budget: None,
            memory_shares: MemoryShares::default(),
            use_direct_io: true,
            max_key_size: 64 * KIB,
            max_value_size: 256 * MIB,
            wal_recovery_mode: RecoveryMode::default(),
            wal_retention_bytes: 0,
            fast_device: DeviceProfile::none(),
            fd_budget: None,
            slow: None,
            all_on_fast: false,
            promotion: PromotionOptions::default(),
            compaction: CompactionOptions::default(),
            record_cache: RecordCacheOptions::default(),
            fault_injector: None,
            merge_operator: None,
            clock: std::sync::Arc::new(crate::expiry::SystemClock),
        }
    }
}

impl Options {
    /// Checks every value; a clear error names the first bad one.
    pub fn validate(&self) -> Result<()> {
        self.validate_memtables_and_tables()?;
        self.validate_levels_and_threads()?;
        self.validate_limits()?;
        self.validate_tiers_caches_and_promotion()
    }

    /// Memtables and the table format.
    fn validate_memtables_and_tables(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::InvalidArgument(msg));
        if self.write_buffer_size < 4 * KIB {
            return bad(format!(
                "write_buffer_size {} is below 4 KiB",
                self.write_buffer_size
            ));
        }
        if self.max_immutable_memtables == 0 {
            return bad("max_immutable_memtables must be at least 1".into());
        }
        if !(256..=64 * MIB).contains(&self.block_size) {
            return bad(format!(
                "block_size {} is outside 256 B..64 MiB",
                self.block_size
            ));
        }
        if !(256..=64 * MIB).contains(&self.compaction.semi_block_size) {
            return bad(format!(
                "compaction.semi_block_size {} is outside 256 B..64 MiB",
                self.compaction.semi_block_size
            ));
        }
        if self.block_restart_interval == 0 {
            return bad("block_restart_interval must be at least 1".into());
        }
        if self.block_records == Some(0) {
            return bad("block_records must be at least 1 (or None)".into());
        }
        if self.bloom_bits_per_key > 64 {
            return bad(format!(
                "bloom_bits_per_key {} exceeds 64",
                self.bloom_bits_per_key
            ));
        }
        Ok(())
    }

    /// Level sizing, L0 triggers, background and reader threads.
    fn validate_levels_and_threads(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::InvalidArgument(msg));
        if self.target_file_size < 4 * KIB as u64 {
            return bad(format!(
                "target_file_size {} is below 4 KiB",
                self.target_file_size
            ));
        }
        if self.level0_compaction_trigger == 0
            || self.level0_slowdown_trigger < self.level0_compaction_trigger
            || self.level0_stop_trigger < self.level0_slowdown_trigger
        {
            return bad(format!(
                "L0 triggers must satisfy 0 < compaction ({}) <= slowdown ({}) <= stop ({})",
                self.level0_compaction_trigger,
                self.level0_slowdown_trigger,
                self.level0_stop_trigger
            ));
        }
        if self.level_size_ratio < 2 {
            return bad(format!(
                "level_size_ratio {} must be at least 2",
                self.level_size_ratio
            ));
        }
        if !(2..=MAX_LEVELS).contains(&self.num_levels) {
            return bad(format!(
                "num_levels {} is outside 2..{MAX_LEVELS}",
                self.num_levels
            ));
        }
        if self.background_threads == 0 {
            return bad("background_threads must be at least 1".into());
        }
        if !(0..=19).contains(&self.tracker_nice) {
            return bad(format!(
                "tracker_nice {} is outside 0..=19",
                self.tracker_nice
            ));
        }
        if !(1..=1024).contains(&self.read_parallelism) {
            return bad(format!(
                "read_parallelism {} is outside 1..=1024",
                self.read_parallelism
            ));
        }
        if self.read_io == ReadIo::Uring && !cfg!(target_os = "linux") {
            return bad("read_io Uring needs Linux (io_uring)".into());
        }
        Ok(())
    }

    /// Open files and the sizes of keys, values and levels.
    fn validate_limits(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::InvalidArgument(msg));
        if self.max_open_files != 0 && self.max_open_files < 10 {
            return bad(format!(
                "max_open_files {} is below 10 (0: automatic)",
                self.max_open_files
            ));
        }
        if self.max_key_size == 0 || self.max_key_size > 16 * MIB {
            return bad(format!(
                "max_key_size {} is outside 1 B..16 MiB",
                self.max_key_size
            ));
        }
        if self.max_value_size > u32::MAX as usize {
            return bad(format!(
                "max_value_size {} exceeds 4 GiB",
                self.max_value_size
            ));
        }
        if self.max_bytes_for_level_base == 0 {
            return bad("max_bytes_for_level_base must be positive".into());
        }
        Ok(())
    }

    /// The tiers, the caches, the memory budget and the hotness tracker.
    fn validate_tiers_caches_and_promotion(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::InvalidArgument(msg));
        if self.slow.is_some() && self.fd_budget.is_none() {
            return bad(
                "a slow tier needs fd_budget: the fast tier's levels are sized to it".into(),
            );
        }
        if self.fd_budget == Some(0) {
            return bad("fd_budget must be positive".into());
        }
        if !(4 << 10..=64 << 20).contains(&self.record_cache.segment_size) {
            return bad(format!(
                "record_cache.segment_size {} is outside 4 KiB..=64 MiB",
                self.record_cache.segment_size
            ));
        }
        if !(self.cache.learning_rate.is_finite() && self.cache.learning_rate >= 0.0) {
            return bad(format!(
                "cache.learning_rate {} must be a finite number >= 0",
                self.cache.learning_rate
            ));
        }
        if !(0.0..=1.0).contains(&self.cache.ghost_turnoff) {
            return bad(format!(
                "cache.ghost_turnoff {} is outside 0..=1",
                self.cache.ghost_turnoff
            ));
        }
        if self.promotion.cache_size == Some(0) {
            return bad("promotion.cache_size must be positive".into());
        }
        if self.promotion.warm_list_interval.is_zero() {
            return bad("promotion.warm_list_interval must be positive".into());
        }
        if self.promotion.memory_limit == Some(0) {
            return bad("promotion.memory_limit must be positive".into());
        }
        if self.table_memory_limit == Some(0) {
            return bad("table_memory_limit must be positive".into());
        }
        if let Some(budget) = self.memory_budget {
            MemoryDivision::new(budget, self)?;
        }
        if self.promotion_active() {
            match self.promotion.tracker {
                TrackerKind::Ralt => self.promotion.ralt.validate()?,
                TrackerKind::BloomCascade => self.promotion.bloom_cascade.validate()?,
            }
        }
        Ok(())
    }
    /// True when hot-record promotion runs: enabled, with a slow tier actually in use.
    pub fn promotion_active(&self) -> bool {
        self.promotion.enabled && self.slow.is_some() && !self.all_on_fast
    }

    /// Bytes of `fd_budget` kept for the WALs, so that the levels [`LevelLayout`](crate::LevelLayout) sizes to
    /// the rest leave room for them (invariant 4): the WALs of every memtable that may be
    /// unflushed at once, `(max_immutable_memtables + 1) x write_buffer_size`, at most half
    /// the budget (a budget smaller than twice that cannot hold the worst case, and its WALs
    /// may then take the fast disk past it). 0 without a budget. RALT's files are not
    /// counted: they sit beside the budget under RALT's own physical limit (15% of the fast
    /// levels at most, auto-tuned down to what the hot set needs, reported by
    /// `DbStats`), as in the HotRAP paper, whose RALT limits are fractions of the fast
    /// disk's LSM size; reserving RALT's upper bound took more room from the levels than
    /// RALT uses (4.4 MiB against 0.6 MiB in the default bench). The manifest, CURRENT and
    /// LOCK are not counted either: the manifest is rewritten as a snapshot once it passes
    /// 64 MiB, and is a few KiB to a few MiB in practice.
    pub fn fast_tier_reserve(&self) -> u64 {
        let Some(budget) = self.fd_budget else {
            return 0;
        };
        (self.max_immutable_memtables as u64 + 1)
            .saturating_mul(self.write_buffer_size as u64)
            .min(budget / 2)
    }

    /// The options a store opened with these really uses: with a memory budget, every
    /// per-component size derived from it (and the division); otherwise a copy.
    pub fn resolve_memory_budget(&self) -> Result<(Options, Option<MemoryDivision>)> {
        match self.memory_budget {
            Some(budget) => {
                let d = MemoryDivision::new(budget, self)?;
                Ok((d.apply(self), Some(d)))
            }
            None => Ok((self.clone(), None)),
        }
    }

    /// Size at which the promotion cache freezes.
    pub(crate) fn promotion_cache_size(&self) -> usize {
        self.promotion
            .cache_size
            .unwrap_or(self.target_file_size as usize)
    }

    pub(crate) fn table_options(&self) -> TableOptions {
        TableOptions {
            block_size: self.block_size,
            block_records: self.block_records,
            restart_interval: self.block_restart_interval,
            bloom_bits_per_key: self.bloom_bits_per_key as usize,
            filter_min_record_bytes: 0,
            compression: self.compression,
        }
    }

    /// The format of semi-sorted tables: [`Options::table_options`] with data blocks of at
    /// most `compaction.semi_block_size`.
    pub(crate) fn semi_table_options(&self) -> TableOptions {
        let mut o = self.table_options();
        o.block_size = o.block_size.min(self.compaction.semi_block_size);
        o
    }
}

/// The half of [`MemoryDivision`] that reads [`Options`]: the arithmetic lives in
/// `crate::memory`, which never names `Options`, so the two modules do not import each other.
impl MemoryDivision {
    /// Divides `budget` for a store opened with `opts` (whose `memory_shares`,
    /// `max_immutable_memtables` and promotion settings count; its sizes do not).
    pub fn new(budget: usize, opts: &Options) -> Result<MemoryDivision> {
        MemoryDivision::divide(
            budget,
            &opts.memory_shares,
            1 + opts.max_immutable_memtables,
            opts.promotion_active(),
        )
    }

    /// `opts` with every per-component size derived from this division (see the module
    /// comment for what is overridden).
    pub fn apply(&self, opts: &Options) -> Options {
        let mut o = opts.clone();
        let defaults = Options::default();
        let mut overridden = Vec::new();
        if o.write_buffer_size != defaults.write_buffer_size {
            overridden.push("write_buffer_size");
        }
        if o.cache_size != defaults.cache_size {
            overridden.push("cache_size");
        }
        if o.table_memory_limit.is_some() {
            overridden.push("table_memory_limit");
        }
        o.write_buffer_size = self.write_buffer_size;
        o.cache_size = self.cache;
        o.table_memory_limit = Some(self.tables);
        if o.promotion_active() {
            let p = &mut o.promotion;
            if p.cache_size.is_some() {
                overridden.push("promotion.cache_size");
            }
            if p.memory_limit.is_some() {
                overridden.push("promotion.memory_limit");
            }
            if p.ralt.memory_limit.is_some() {
                overridden.push("promotion.ralt.memory_limit");
            }
            // Half the share freezes a table, so one frozen table and a full mutable one
            // fit together; the hard cap refuses inserts beyond the share.
            p.cache_size = Some((self.promotion_cache / 2).max(1));
            p.memory_limit = Some(self.promotion_cache);
            p.ralt.memory_limit = Some(self.tracker as u64);
            p.ralt.run_memory_limit = self.tracker_runs as u64;
            p.ralt.buffer_bytes = p
                .ralt
                .buffer_bytes
                .min(self.tracker / crate::memory::TRACKER_BUFFER_DIVISOR)
                .max(crate::memory::MIN_TRACKER / crate::memory::TRACKER_BUFFER_DIVISOR);
        }
        if !overridden.is_empty() {
            tracing::warn!(
                "memory_budget {} overrides {} (the budget derives them)",
                self.budget,
                overridden.join(", ")
            );
        }
        o
    }
}

/// Per-read options.
#[derive(Clone, Debug, Default)]
pub struct ReadOptions {
    /// Read as of this snapshot instead of the latest state.
    pub snapshot: Option<crate::key::SeqNo>,
    /// Insert blocks read by this call into the block cache (default true via
    /// [`ReadOptions::new`]; long scans may turn it off).
    pub fill_cache: bool,
    /// Iterator lower bound on user keys (inclusive).
    pub lower_bound: Option<Vec<u8>>,
    /// Iterator upper bound on user keys (exclusive).
    pub upper_bound: Option<Vec<u8>>,
    /// About how many entries a scan reads forward from each seek of an iterator made
    /// with these options ([`crate::Db::scan`] sets its limit). Each table the scan
    /// reaches from disk is then read in one window sized to its expected share of
    /// them, instead of block by block with readahead that starts after a few blocks.
    /// Only what is read changes, never what the iterator returns.
    pub scan_length_hint: Option<usize>,
}

impl ReadOptions {
    /// Default read options (latest state, fill the cache, no bounds).
    pub fn new() -> Self {
        ReadOptions {
            fill_cache: true,
            ..Default::default()
        }
    }
}

/// Per-write options.
#[derive(Clone, Copy, Debug, Default)]
pub struct WriteOptions {
    /// Fsync the WAL before acknowledging (group-committed with concurrent writers).
    pub sync: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        Options::default().validate().unwrap();
    }

    #[test]
    fn bad_values_are_named() {
        let o = Options {
            level0_stop_trigger: 1,
            ..Default::default()
        };
        let e = o.validate().unwrap_err().to_string();
        assert!(e.contains("L0 triggers"), "{e}");
        let o = Options {
            slow: Some(SlowTier {
                dir: "/x".into(),
                budget: None,
                device: DeviceProfile::none(),
            }),
            ..Default::default()
        };
        assert!(o.validate().unwrap_err().to_string().contains("fd_budget"));
        for bad in [0, 1025] {
            let o = Options {
                read_parallelism: bad,
                ..Default::default()
            };
            let e = o.validate().unwrap_err().to_string();
            assert!(e.contains("read_parallelism"), "{e}");
        }
        for good in [1, 1024] {
            let o = Options {
                read_parallelism: good,
                ..Default::default()
            };
            o.validate().unwrap();
        }
        for (nice, ok) in [(-1, false), (0, true), (19, true), (20, false)] {
            let o = Options {
                tracker_nice: nice,
                ..Default::default()
            };
            match o.validate() {
                Ok(()) => assert!(ok, "tracker_nice {nice} accepted"),
                Err(e) => assert!(!ok && e.to_string().contains("tracker_nice"), "{e}"),
            }
        }
        let mut o = Options::default();
        o.promotion.warm_list_interval = std::time::Duration::ZERO;
        let e = o.validate().unwrap_err().to_string();
        assert!(e.contains("warm_list_interval"), "{e}");
    }
}

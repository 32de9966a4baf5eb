//! Opening a store: tier directories and their lock, manifest recovery, WAL replay into
//! memtables, a fresh WAL, removal of files no version references, background threads.
//!
//! Recovery writes almost nothing (RocksDB's `avoid_flush_during_recovery`): the replayed
//! WALs become the store's memtables and stay live until those memtables are flushed in
//! the background like any other, so a store whose disk filled up reopens once there is room
//! for a new manifest (about the old one's size), CURRENT and an empty WAL. Each recovered memtable holds whole
//! WAL files and is identified, like a memtable of the write path, by the first WAL it
//! needs: its flush retires exactly the WALs below the next memtable's, so a crash at any
//! point replays every WAL whose records are not in a table, and none that are.

use super::background::{thread_loop, tracker_loop};
use super::flush::write_level0_table;
use super::stats::Counters;
use super::stored_tiers::{self, StoredTiers};
use super::{
    Db, DbInner, Hotness, Jobs, ReadView, Signals, State, SuperVersion, Tree, Wal, WriteQueue,
};
use crate::batch::DecodedBatch;
use crate::cache::Cache;
use crate::env::{DeviceProfile, Env, IoCause, Tier};
use crate::error::{Error, Result};
use crate::hot::cascade::{BloomCascade, BloomCascadeOptions};
use crate::hot::policy::Retention;
use crate::hot::promotion::PromotionCache;
use crate::hot::ralt::{Ralt, RaltOptions};
use crate::hot::{HotTracker, TrackerKind};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::record_cache::RecordCache;
use crate::tiers::LevelLayout;
use crate::version::{
    manifest_file_name, parse_file_number, wal_file_name, TableCache, VersionEdit, VersionSet,
};
use crate::wal::{LogReader, LogWriter};
use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex};
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

const LOCK: &str = "LOCK";
const CURRENT: &str = "CURRENT";

pub(super) fn open(path: &Path, mut opts: Options) -> Result<Db> {
    // The recorded tiers first: everything below (the checks, the memory budget's division,
    // the layout) sees the tiers the store really has.
    let stored = stored_tiers::apply(path, &mut opts)?;
    check_dirs(path, &opts)?;
    let mut needs = SpaceNeeds::default();
    open_inner(path, opts, stored.as_ref(), &mut needs).map_err(|e| needs.explain(path, e))
}

/// Refuses, before anything is created, a store directory that is a file and a missing
/// store when `create_if_missing` is off (read-only tools must leave no trace).
fn check_dirs(path: &Path, opts: &Options) -> Result<()> {
    let slow = opts.slow.as_ref().map(|s| s.dir.as_path());
    for dir in std::iter::once(path).chain(slow) {
        match std::fs::metadata(dir) {
            Ok(m) if !m.is_dir() => return Err(Error::NotADirectory(dir.to_path_buf())),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(dir, e)),
        }
    }
    if !opts.create_if_missing {
        if !path.join(CURRENT).is_file() {
            return Err(Error::NoStore(path.to_path_buf()));
        }
        if let Some(slow) = slow.filter(|s| !s.is_dir()) {
            return Err(Error::SlowTierNotFound {
                dir: slow.to_path_buf(),
                store: path.to_path_buf(),
            });
        }
    } else if !path.join(CURRENT).is_file() {
        // Creating: only in a new or empty directory (or one an interrupted creation
        // left), never among someone else's files.
        if let Ok(entries) = std::fs::read_dir(path) {
            for entry in entries {
                let entry = entry.map_err(|e| Error::io(path, e))?;
                let name = entry.file_name();
                let name = name.to_string_lossy();
                let is_slow = slow.is_some_and(|s| same_dir(&entry.path(), s));
                if !(stored_tiers::is_store_file(&name) || name == "lost+found" || is_slow) {
                    return Err(Error::NotAStore(path.to_path_buf()));
                }
            }
        }
    }
    Ok(())
}

/// What an open writes, so that running out of space can say how much it needs and where.
#[derive(Default)]
struct SpaceNeeds {
    /// Bytes of the manifest the open rewrites (its new one is at most about as large).
    manifest: u64,
    /// Bytes of memtables flushed at open because they do not fit the memtable limit.
    flushed: u64,
}

impl SpaceNeeds {
    /// Turns a full disk during open into an error saying what the open needs.
    fn explain(&self, path: &Path, e: Error) -> Error {
        if !e.is_no_space() {
            return e;
        }
        // The new manifest, CURRENT and a block of slack; the WAL starts empty.
        let need = self.manifest + self.flushed + 8 * 1024;
        let flushed = if self.flushed > 0 {
            format!(
                " and {} bytes of L0 tables for WAL data beyond the memtable limit \
                 (max_immutable_memtables)",
                self.flushed
            )
        } else {
            String::new()
        };
        Error::NoSpace(format!(
            "opening the store needs about {need} bytes free in {}: a new manifest of \
             about {} bytes{flushed}; free that much and open again: {e}",
            path.display(),
            self.manifest
        ))
    }
}

fn open_inner(
    path: &Path,
    opts: Options,
    stored: Option<&StoredTiers>,
    needs: &mut SpaceNeeds,
) -> Result<Db> {
    opts.validate()?;
    // From here on the sizes the memory budget derived are the store's options.
    let (opts, memory) = opts.resolve_memory_budget()?;
    opts.validate()?;
    let layout = Arc::new(LevelLayout::new(&opts));
    let env = open_env(path, &opts)?;
    let lock_path = env.path(Tier::Fast, LOCK);
    let store_lock = super::store_lock::StoreLock::acquire(path, &lock_path)?;
    needs.manifest = current_manifest_size(path);
    let (mut versions, _created) = VersionSet::open(
        env.clone(),
        layout.clone(),
        opts.create_if_missing,
        opts.error_if_exists,
    )?;
    // Recorded once the store exists (before any data reaches the slow tier): a crash
    // before this leaves a store that holds nothing on its slow tier.
    stored_tiers::record(path, &opts, stored)?;
    let cache = (opts.cache_size > 0).then(|| {
        Arc::new(Cache::with_options(
            opts.cache_size,
            &opts.cache,
            opts.block_size,
            opts.level0_compaction_trigger,
        ))
    });
    let open_tables = match opts.max_open_files {
        0 => crate::env::open_file_budget(),
        n => n,
    };
    let records = if opts.record_cache.enabled && opts.slow.is_some() && !opts.all_on_fast {
        Some(Arc::new(RecordCache::open(
            env.clone(),
            opts.record_cache
                .max_bytes
                .unwrap_or(u64::MAX)
                .min(opts.fd_budget.unwrap_or(0)),
            opts.record_cache.segment_size,
        )?))
    } else {
        None
    };
    let tables = Arc::new(
        TableCache::with_limits(env.clone(), open_tables, opts.table_memory_limit, cache)
            .with_record_cache(records),
    );
    let counters = Counters::default();
    let tree = recover(&env, &opts, &mut versions, &counters, needs)?;
    let hot_tracker = open_tracker(&env, &opts)?;
    let inner = Arc::new(DbInner {
        env,
        layout,
        memory,
        tables,
        counters,
        writes: WriteQueue {
            queue: Mutex::new(VecDeque::new()),
            commit: Mutex::new(()),
            wal: Mutex::new(Wal {
                writer: LogWriter::new(tree.wal_file),
            }),
        },
        reads: ReadView {
            visible_seq: AtomicU64::new(tree.last_seq),
            sv: ArcSwap::from_pointee(SuperVersion {
                mem: tree.mem.clone(),
                imms: tree.imms.clone(),
                version: versions.current(),
                drop_horizon: 0,
            }),
            snapshots: Mutex::new(BTreeMap::new()),
        },
        installs: Mutex::new(()),
        state: Mutex::new(State {
            tree: Tree {
                versions,
                mem: tree.mem,
                imms: tree.imms,
                drop_horizon: 0,
            },
            jobs: Jobs::default(),
            retention: Retention::default(),
        }),
        signals: Signals {
            bg_cv: Condvar::new(),
            tracker_cv: Condvar::new(),
            done_cv: Condvar::new(),
            shutting_down: AtomicBool::new(false),
            failed: AtomicBool::new(false),
        },
        hot: Hotness {
            pc: PromotionCache::new(opts.promotion_cache_size()),
            tracker: hot_tracker,
            last_listed: super::cached_keys::LastSave::now(),
        },
        recent_changes: Default::default(),
        access_feed: Default::default(),
        _store_lock: store_lock,
        opts,
    });
    inner.fit_record_cache();
    start(inner)
}

/// The tier directories' environment (the slow tier's directory must not be the fast one's).
fn open_env(path: &Path, opts: &Options) -> Result<Arc<Env>> {
    let (slow_dir, slow_device) = match &opts.slow {
        Some(s) => (s.dir.clone(), s.device),
        None => (path.to_path_buf(), DeviceProfile::none()),
    };
    if opts.slow.is_some() && same_dir(path, &slow_dir) {
        return Err(Error::InvalidArgument(format!(
            "the slow tier directory {} is the fast tier directory",
            slow_dir.display()
        )));
    }
    Env::new(
        path,
        &slow_dir,
        opts.fast_device,
        slow_device,
        opts.use_direct_io,
        opts.fault_injector.clone(),
    )
}

/// What recovery hands the open store: its memtables, the WAL it appends to next and the
/// last sequence number.
struct RecoveredTree {
    /// The mutable memtable.
    mem: Arc<MemTable>,
    /// Immutable memtables awaiting flush, newest first.
    imms: Vec<Arc<MemTable>>,
    wal_file: crate::env::WritableFile,
    last_seq: u64,
}

/// Replays the WALs into memtables (flushing only those the write path would not let
/// wait), starts a fresh WAL, records the recovered state in the manifest and removes the
/// files no version references.
fn recover(
    env: &Arc<Env>,
    opts: &Options,
    versions: &mut VersionSet,
    counters: &Counters,
    needs: &mut SpaceNeeds,
) -> Result<RecoveredTree> {
    let Recovered {
        mut memtables,
        last_seq,
        empty_logs,
    } = replay_wals(env, opts, versions)?;
    // The last recovered memtable stays the mutable one (the next write that does not fit
    // switches it), unless it gathered many small WALs (each open of a store that takes
    // a few writes adds one): then it waits for flush too, so WAL files do not pile up.
    let mem = match memtables.last() {
        Some(r) if r.wals <= MAX_WALS_PER_RECOVERED_MEMTABLE => memtables.pop(),
        _ => None,
    };
    // The others wait for flush. Only more of them than the write path would let wait
    // (after a reopen with a smaller memtable) are flushed here.
    let excess = memtables.len().saturating_sub(opts.max_immutable_memtables);
    let mut imms: Vec<Arc<MemTable>> = memtables
        .split_off(excess)
        .into_iter()
        .map(|r| r.mem)
        .collect();
    let wal_number = versions.new_file_number();
    let mem = mem.map_or_else(
        || Arc::new(MemTable::new(wal_number, opts.write_buffer_size)),
        |r| r.mem,
    );
    // WALs below the oldest memtable's hold nothing that is not in a table.
    let log_number = imms.first().unwrap_or(&mem).id();
    needs.flushed = memtables
        .iter()
        .map(|r| r.mem.approximate_size() as u64)
        .sum();
    flush_at_open(
        env, opts, versions, counters, &memtables, log_number, last_seq,
    )?;
    let wal_file = env.create_writable(Tier::Fast, &wal_file_name(wal_number), IoCause::Wal)?;
    // `Tree::imms` is newest first.
    imms.reverse();
    versions.log_and_apply(VersionEdit {
        log_number: Some(log_number),
        last_sequence: Some(last_seq),
        ..Default::default()
    })?;
    env.sync_dir(Tier::Fast)?;
    remove_obsolete_files(
        env,
        versions,
        log_number,
        wal_number,
        &empty_logs,
        opts.wal_retention_bytes,
    )?;
    Ok(RecoveredTree {
        mem,
        imms,
        wal_file,
        last_seq,
    })
}

/// The hotness tracker, when promotion is active on two tiers: RALT reopened from its
/// files, or a fresh bloom cascade.
fn open_tracker(env: &Arc<Env>, opts: &Options) -> Result<Option<Arc<HotTracker>>> {
    let (true, Some(fd_budget)) = (opts.promotion_active(), opts.fd_budget) else {
        return Ok(None);
    };
    // RALT's "FD size" is the paper's: what the fast levels hold, L0's share included (the
    // budget less the WALs). Hot records live in every fast level, not only the last one:
    // a promotion lands in L0, an update of a hot key in the memtable. With large
    // memtables L0's share is a quarter of the budget, and leaving it out held the hot-set
    // limit below a hot set the fast disk had room for (medium RW hotspot-5%: 77 MB
    // against a 108 MB hotspot, 83.5% fast-disk hits against the prototype's 95.0%). A hot
    // set larger than the last fast level's target is kept there up to 1.5 times it
    // (`hot::policy::Retention`) while L0's trigger shrinks to what the others leave
    // (`compaction::picker::level0_target`).
    let fd_bytes = fd_budget.saturating_sub(opts.fast_tier_reserve()).max(1);
    Ok(Some(Arc::new(match opts.promotion.tracker {
        TrackerKind::Ralt => HotTracker::Ralt(Ralt::open(
            env.clone(),
            RaltOptions {
                fd_budget: fd_bytes,
                ..opts.promotion.ralt.clone()
            },
        )?),
        // The same "FD size": one window is what the fast levels hold.
        TrackerKind::BloomCascade => {
            HotTracker::BloomCascade(BloomCascade::new(BloomCascadeOptions {
                fd_bytes,
                ..opts.promotion.bloom_cascade.clone()
            })?)
        }
    })))
}

/// A background thread running `body` ([`thread_loop`] or [`tracker_loop`]), with a panic
/// (a bug) turned into the store's background error so that writers and
/// `wait_for_background` get an error instead of waiting forever for work no thread will
/// do. (The state lock is `parking_lot`'s: an unwinding guard releases it unpoisoned.)
fn background_thread(inner: Arc<DbInner>, body: fn(Arc<DbInner>)) {
    let run = std::panic::AssertUnwindSafe(|| body(inner.clone()));
    if let Err(panic) = std::panic::catch_unwind(run) {
        let msg = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".to_string());
        let mut st = inner.state.lock();
        inner.set_bg_error(&mut st, Error::BackgroundPanic(msg));
        inner.signals.bg_cv.notify_all();
    }
}

/// Starts the background threads and the reader pool of an opened store.
fn start(inner: Arc<DbInner>) -> Result<Db> {
    let mut threads = (0..inner.opts.background_threads)
        .map(|i| {
            let inner = inner.clone();
            std::thread::Builder::new()
                .name(format!("tierkv-bg-{i}"))
                .spawn(move || background_thread(inner, thread_loop))
                .map_err(|e| Error::io("<spawning a background thread>", e))
        })
        .collect::<Result<Vec<_>>>()?;
    if inner.hot.tracker.is_some() {
        let inner = inner.clone();
        threads.push(
            std::thread::Builder::new()
                .name("tierkv-tracker".into())
                .spawn(move || background_thread(inner, tracker_loop))
                .map_err(|e| Error::io("<spawning the tracker's thread>", e))?,
        );
    }
    // A checkpoint's copy reads the keys its source's promotion cache held.
    threads.extend(super::cached_keys::start_warming(&inner)?);
    // Work may be pending right away (e.g. L0 full after recovery).
    inner.signals.bg_cv.notify_all();
    let db = Db {
        inner,
        threads: Mutex::new(threads),
        readers: super::multi_get::ReaderPool::new(),
    };
    // Started after the Db exists so a failure closes the store (and its threads) on drop.
    db.readers
        .start(db.inner.opts.read_parallelism, db.inner.opts.read_io)?;
    Ok(db)
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// The size of the manifest `CURRENT` names (0 when there is none yet).
fn current_manifest_size(path: &Path) -> u64 {
    std::fs::read_to_string(path.join(CURRENT))
        .ok()
        .and_then(|name| std::fs::metadata(path.join(name.trim_end())).ok())
        .map_or(0, |m| m.len())
}

/// A recovered memtable holding more WAL files than this waits for flush instead of
/// staying the mutable memtable.
const MAX_WALS_PER_RECOVERED_MEMTABLE: usize = 4;

/// A memtable refilled from WALs.
struct RecoveredMem {
    mem: Arc<MemTable>,
    /// How many WAL files it holds.
    wals: usize,
}

/// What WAL replay recovered.
struct Recovered {
    /// Memtables in WAL order, oldest first, each identified by the first WAL it holds.
    memtables: Vec<RecoveredMem>,
    /// The last sequence number recovered.
    last_seq: u64,
    /// WALs that yielded no record (empty, or nothing but a torn tail): nothing needs them.
    empty_logs: Vec<u64>,
}

/// Replays every WAL the manifest does not cover into memtables, writing nothing. A
/// memtable takes whole WAL files while they fit in `write_buffer_size` (as the write
/// path filled it, one WAL per memtable), so no WAL is split between two memtables: the
/// flush of one retires its WALs and none of the next one's.
fn replay_wals(env: &Arc<Env>, opts: &Options, versions: &mut VersionSet) -> Result<Recovered> {
    let mut logs: Vec<u64> = env
        .list(Tier::Fast)?
        .iter()
        .filter_map(|n| parse_file_number(n, "log"))
        .filter(|&n| n >= versions.log_number)
        .collect();
    logs.sort_unstable();
    // The manifest's next file number may lag behind WALs created after its last edit:
    // those WALs stay live now, so no new file may take their numbers.
    if let Some(&last) = logs.last() {
        versions.next_file_number = versions.next_file_number.max(last + 1);
    }
    let mut last_seq = versions.last_sequence;
    let mut memtables: Vec<RecoveredMem> = Vec::new();
    let mut empty_logs = Vec::new();
    for number in logs {
        let name = wal_file_name(number);
        let path = env.path(Tier::Fast, &name);
        let data = env.read_all(Tier::Fast, &name, IoCause::Recovery)?;
        let wal_bytes = data.len();
        let mut reader = LogReader::new(data, path.clone(), opts.wal_recovery_mode);
        // Chosen at the first record: a WAL without records joins no memtable.
        let mut mem: Option<Arc<MemTable>> = None;
        while let Some(rec) = reader.next_record()? {
            let batch = DecodedBatch::decode(&rec, &path, reader.last_record_offset())?;
            let mem = mem.get_or_insert_with(|| match memtables.last_mut() {
                Some(r) if r.mem.approximate_size() + wal_bytes <= opts.write_buffer_size => {
                    r.wals += 1;
                    r.mem.clone()
                }
                _ => {
                    let mem = Arc::new(MemTable::new(number, opts.write_buffer_size));
                    memtables.push(RecoveredMem {
                        mem: mem.clone(),
                        wals: 1,
                    });
                    mem
                }
            });
            let mut seq = batch.seq;
            for e in batch.entries() {
                mem.add(seq, e.kind, e.key, e.stored_value());
                seq += 1;
            }
            if batch.count > 0 {
                last_seq = last_seq.max(seq - 1);
            }
        }
        if let Some(mem) = &mem {
            // The log stays on the fast disk until its memtable is flushed.
            mem.add_wal_bytes(wal_bytes as u64);
        }
        if mem.is_none() {
            empty_logs.push(number);
        } else {
            // The log stays live and later writes go to a new one: the bytes of this one
            // that only reached the page cache (before a process crash) must be durable
            // before any of those are, or a power cut could lose a middle (invariant 2).
            env.sync_file(Tier::Fast, &name)?;
        }
        if let Some((offset, bytes)) = reader.dropped_tail() {
            tracing::warn!(
                "dropped a torn tail of {bytes} bytes at offset {offset} of {}",
                path.display()
            );
        }
    }
    Ok(Recovered {
        memtables,
        last_seq,
        empty_logs,
    })
}

/// Flushes, at open, recovered memtables beyond what may wait for flush (oldest first),
/// retiring their WALs: `log_number` is the first WAL of the oldest memtable kept.
fn flush_at_open(
    env: &Arc<Env>,
    opts: &Options,
    versions: &mut VersionSet,
    counters: &Counters,
    memtables: &[RecoveredMem],
    log_number: u64,
    last_seq: u64,
) -> Result<()> {
    if memtables.is_empty() {
        return Ok(());
    }
    let mut edit = VersionEdit::default();
    for r in memtables {
        let number = versions.new_file_number();
        // No snapshot exists yet: a version hidden by a newer one at or below the last
        // recovered sequence number is hidden from every future reader.
        if let Some(f) = write_level0_table(env, opts, counters, &r.mem, number, last_seq)? {
            edit.added.push(f);
        }
    }
    edit.log_number = Some(log_number);
    edit.last_sequence = Some(last_seq);
    versions.log_and_apply(edit)?;
    Ok(())
}

/// Deletes files no longer referenced: WALs without records, WALs below `log_number`
/// beyond the newest `wal_retention` bytes of them (kept for the change feed; never the
/// new one), old manifests, tables outside the version.
fn remove_obsolete_files(
    env: &Arc<Env>,
    versions: &VersionSet,
    log_number: u64,
    wal_number: u64,
    empty_logs: &[u64],
    wal_retention: u64,
) -> Result<()> {
    let live: HashSet<u64> = versions
        .current()
        .all_files()
        .map(|(_, f)| f.number)
        .collect();
    let manifest = manifest_file_name(versions.manifest_number());
    for tier in Tier::ALL {
        if tier == Tier::Slow && env.is_single_dir() {
            continue;
        }
        for name in env.list(tier)? {
            let obsolete = if let Some(n) = parse_file_number(&name, "sst") {
                !live.contains(&n)
            } else if let Some(n) = parse_file_number(&name, "log") {
                // Retired WALs are pruned to the retention below.
                tier == Tier::Fast && n != wal_number && empty_logs.contains(&n)
            } else {
                (name.starts_with("MANIFEST-") && name != manifest) || name == "CURRENT.tmp"
            };
            if obsolete {
                env.remove(tier, &name)?;
            }
        }
    }
    // Retired WALs, newest kept first, within the retention.
    let mut retired: Vec<(u64, u64)> = Vec::new();
    for name in env.list(Tier::Fast)? {
        if let Some(n) = parse_file_number(&name, "log").filter(|&n| n < log_number) {
            let size = std::fs::metadata(env.path(Tier::Fast, &name)).map_or(0, |m| m.len());
            retired.push((n, size));
        }
    }
    retired.sort_unstable_by(|a, b| b.cmp(a));
    let mut kept = 0u64;
    for (n, size) in retired {
        kept = kept.saturating_add(size);
        if kept > wal_retention || size == 0 {
            env.remove(Tier::Fast, &wal_file_name(n))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wal_files(dir: &Path) -> usize {
        std::fs::read_dir(dir)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".log"))
            })
            .count()
    }

    /// Recovery keeps WALs live instead of flushing them, but a store opened again and
    /// again for a few writes each (the `tierkv put` pattern) does not collect WAL files
    /// without bound: a recovered memtable of many WALs is flushed, retiring them.
    #[test]
    fn reopens_with_a_few_writes_each_do_not_pile_up_wals() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..12u32 {
            let db = Db::open(dir.path(), Options::default()).unwrap();
            db.put(format!("k{i:02}"), format!("v{i}")).unwrap();
            db.wait_for_background().unwrap();
            db.close().unwrap();
            let wals = wal_files(dir.path());
            assert!(
                wals <= MAX_WALS_PER_RECOVERED_MEMTABLE + 2,
                "{wals} WALs after {} opens",
                i + 1
            );
        }
        let db = Db::open(dir.path(), Options::default()).unwrap();
        for i in 0..12u32 {
            assert_eq!(
                db.get(format!("k{i:02}")).unwrap(),
                Some(format!("v{i}").into_bytes())
            );
        }
        assert!(
            db.stats().levels[0].files > 0,
            "the gathered WALs were flushed"
        );
    }

    /// Opening never leaves a trace where it refuses to open: a missing store with
    /// `create_if_missing` off, or a path that is a file.
    #[test]
    fn refused_opens_create_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let missing = tmp.path().join("missing");
        let opts = Options {
            create_if_missing: false,
            ..Options::default()
        };
        let e = Db::open(&missing, opts.clone()).err().expect("no store");
        assert!(matches!(&e, Error::NoStore(p) if *p == missing), "{e}");
        assert!(!missing.exists());
        let empty = tmp.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        assert!(matches!(Db::open(&empty, opts), Err(Error::NoStore(_))));
        assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);

        let file = tmp.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        let e = Db::open(&file, Options::default()).err().expect("a file");
        assert_eq!(
            e.to_string(),
            format!("{} is not a directory", file.display())
        );
        let opts = Options {
            fd_budget: Some(1 << 20),
            slow: Some(crate::options::SlowTier {
                dir: file.clone(),
                budget: None,
                device: DeviceProfile::none(),
            }),
            ..Options::default()
        };
        let fast = tmp.path().join("fast");
        assert!(matches!(Db::open(&fast, opts), Err(Error::NotADirectory(p)) if p == file));
        assert!(!fast.exists());
    }
}

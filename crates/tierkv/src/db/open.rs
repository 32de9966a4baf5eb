//! Opening a store: tier directories and their lock, manifest recovery, WAL replay into
//! L0 tables, a fresh WAL, removal of files no version references, background threads.

use super::background::{thread_loop, write_level0_table};
use super::stats::Counters;
use super::{Db, DbInner, State, SuperVersion, Wal};
use crate::batch::DecodedBatch;
use crate::cache::Cache;
use crate::env::{DeviceProfile, Env, IoCause, Tier};
use crate::hot::cascade::{BloomCascade, BloomCascadeOptions};
use crate::hot::promotion::PromotionCache;
use crate::hot::ralt::{Ralt, RaltOptions};
use crate::hot::{HotTracker, TrackerKind};
use crate::key::MAX_SEQ;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::tiers::LevelLayout;
use crate::version::{
    manifest_file_name, parse_file_number, wal_file_name, TableCache, VersionEdit, VersionSet,
};
use crate::wal::{LogReader, LogWriter};
use crate::{Error, Result};
use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex};
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

const LOCK: &str = "LOCK";

pub(super) fn open(path: &Path, opts: Options) -> Result<Db> {
    opts.validate()?;
    // From here on the sizes the memory budget derived are the store's options.
    let (opts, memory) = opts.resolve_memory_budget()?;
    opts.validate()?;
    let layout = Arc::new(LevelLayout::new(&opts));
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
    let env = Env::new(
        path,
        &slow_dir,
        opts.fast_device,
        slow_device,
        opts.use_direct_io,
        opts.fault_injector.clone(),
    )?;
    let lock_path = env.path(Tier::Fast, LOCK);
    let lock_file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| Error::io(&lock_path, e))?;
    match lock_file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => return Err(Error::Locked(path.to_path_buf())),
        Err(std::fs::TryLockError::Error(e)) => return Err(Error::io(&lock_path, e)),
    }
    let (mut versions, _created) = VersionSet::open(
        env.clone(),
        layout.clone(),
        opts.create_if_missing,
        opts.error_if_exists,
    )?;
    let block_cache = (opts.cache_size > 0).then(|| {
        Arc::new(Cache::with_options(
            opts.cache_size,
            &opts.cache,
            opts.block_size,
            opts.level0_compaction_trigger,
        ))
    });
    let tables = Arc::new(TableCache::with_limits(
        env.clone(),
        opts.max_open_files,
        opts.table_memory_limit,
        block_cache,
    ));

    let counters = Counters::default();
    let last_seq = replay_wals(&env, &opts, &mut versions, &counters)?;

    let wal_number = versions.new_file_number();
    let wal_file = env.create_writable(Tier::Fast, &wal_file_name(wal_number), IoCause::Wal)?;
    versions.log_and_apply(VersionEdit {
        log_number: Some(wal_number),
        last_sequence: Some(last_seq),
        ..Default::default()
    })?;
    env.sync_dir(Tier::Fast)?;
    remove_obsolete_files(&env, &versions, wal_number)?;

    let mem = Arc::new(MemTable::new(wal_number));
    let sv = SuperVersion {
        mem: mem.clone(),
        imms: Vec::new(),
        version: versions.current(),
        drop_horizon: 0,
    };
    let hot_tracker = match (opts.promotion_active(), opts.fd_budget) {
        (true, Some(fd_budget)) => {
            // RALT's "FD size" is what the fast levels below L0 hold: the hot set limit
            // must fit the level that retains hot records (the layout reserves part of the
            // budget for L0).
            let fast_levels: u64 = layout.targets[1..=layout.last_fast_level].iter().sum();
            let fd_bytes = fast_levels.clamp(1, fd_budget);
            Some(Arc::new(match opts.promotion.tracker {
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
            }))
        }
        _ => None,
    };
    let inner = Arc::new(DbInner {
        env,
        layout,
        state: Mutex::new(State {
            versions,
            mem,
            imms: Vec::new(),
            flush_running: false,
            running_compactions: Vec::new(),
            manual_compaction: false,
            bg_error: None,
            checker_running: false,
            tracker_maint_running: false,
            retention_saturated_at: None,
            drop_horizon: 0,
        }),
        bg_cv: Condvar::new(),
        done_cv: Condvar::new(),
        sv: ArcSwap::from_pointee(sv),
        writers: Mutex::new(VecDeque::new()),
        writers_cv: Condvar::new(),
        write_lock: Mutex::new(()),
        wal: Mutex::new(Wal {
            writer: LogWriter::new(wal_file),
        }),
        visible_seq: AtomicU64::new(last_seq),
        tables,
        snapshots: Mutex::new(BTreeMap::new()),
        shutting_down: AtomicBool::new(false),
        counters,
        pc: PromotionCache::new(),
        hot_tracker,
        memory,
        _lock_file: lock_file,
        opts,
    });
    let threads = (0..inner.opts.background_threads)
        .map(|i| {
            let inner = inner.clone();
            std::thread::Builder::new()
                .name(format!("tierkv-bg-{i}"))
                .spawn(move || thread_loop(inner))
                .map_err(|e| Error::io("<spawning a background thread>", e))
        })
        .collect::<Result<Vec<_>>>()?;
    // Work may be pending right away (e.g. L0 full after recovery).
    inner.bg_cv.notify_all();
    Ok(Db {
        inner,
        threads: Mutex::new(threads),
    })
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// Replays every WAL the manifest does not cover into L0 tables. Returns the last sequence
/// number recovered.
fn replay_wals(
    env: &Arc<Env>,
    opts: &Options,
    versions: &mut VersionSet,
    counters: &Counters,
) -> Result<u64> {
    let mut logs: Vec<u64> = env
        .list(Tier::Fast)?
        .iter()
        .filter_map(|n| parse_file_number(n, "log"))
        .filter(|&n| n >= versions.log_number)
        .collect();
    logs.sort_unstable();
    let mut last_seq = versions.last_sequence;
    let mut edit = VersionEdit::default();
    let mut mem = Arc::new(MemTable::new(0));
    let flush =
        |mem: &Arc<MemTable>, versions: &mut VersionSet, edit: &mut VersionEdit| -> Result<()> {
            let number = versions.new_file_number();
            // No snapshot exists yet: only the newest version of a key is needed.
            if let Some(f) = write_level0_table(env, opts, counters, mem, number, MAX_SEQ)? {
                edit.added.push(f);
            }
            Ok(())
        };
    for number in logs {
        let name = wal_file_name(number);
        let path = env.path(Tier::Fast, &name);
        let data = env.read_all(Tier::Fast, &name, IoCause::Recovery)?;
        let mut reader = LogReader::new(data, path.clone(), opts.wal_recovery_mode);
        while let Some(rec) = reader.next_record()? {
            let batch = DecodedBatch::decode(&rec, &path, reader.last_record_offset())?;
            let mut seq = batch.seq;
            for e in batch.entries() {
                mem.add(seq, e.kind, e.key, e.value);
                seq += 1;
            }
            if batch.count > 0 {
                last_seq = last_seq.max(seq - 1);
            }
            if mem.approximate_size() >= opts.write_buffer_size {
                flush(&mem, versions, &mut edit)?;
                mem = Arc::new(MemTable::new(0));
            }
        }
        if let Some((offset, bytes)) = reader.dropped_tail() {
            tracing::warn!(
                "dropped a torn tail of {bytes} bytes at offset {offset} of {}",
                path.display()
            );
        }
    }
    flush(&mem, versions, &mut edit)?;
    if !edit.added.is_empty() {
        edit.last_sequence = Some(last_seq);
        versions.log_and_apply(edit)?;
    }
    Ok(last_seq)
}

/// Deletes files no longer referenced: old WALs, old manifests, tables outside the version.
fn remove_obsolete_files(env: &Arc<Env>, versions: &VersionSet, wal_number: u64) -> Result<()> {
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
                tier == Tier::Fast && n < wal_number
            } else {
                (name.starts_with("MANIFEST-") && name != manifest) || name == "CURRENT.tmp"
            };
            if obsolete {
                env.remove(tier, &name)?;
            }
        }
    }
    Ok(())
}

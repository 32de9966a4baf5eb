//! The flush job: an immutable memtable written as an L0 table (on the slow tier when the
//! fast one is full), the caches' entries of its keys re-pointed at that table, the
//! version installed and the WALs it covered removed. Scheduling is `background`'s; this
//! file must not pick work or touch the jobs' bookkeeping.

use super::stats::Counters;
use super::DbInner;
use crate::cache::FlushedKey;
use crate::compaction::stream::{tombstone_for, VersionStream};
use crate::env::kill::kill_point;
use crate::env::{Env, IoCause, Tier};
use crate::error::{Error, Result};
use crate::key::{parse_internal_key, SeqNo};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::sst::TableBuilder;
use crate::version::{table_file_name, FileMeta, NewFile, VersionEdit};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Writes a memtable's entries into a new L0 table on the fast tier, or on the slow tier
/// when the fast disk is full (spill: the fast-tier budget is a soft limit). A version
/// that a newer version of its key in the same memtable hides from every snapshot
/// (`smallest_snapshot`, as in compaction) is dropped: under skewed updates most of a
/// memtable can be such versions, and every byte not flushed is also not compacted again.
pub(crate) fn write_level0_table(
    env: &Env,
    opts: &Options,
    counters: &Counters,
    mem: &Arc<MemTable>,
    number: u64,
    smallest_snapshot: SeqNo,
) -> Result<Option<NewFile>> {
    let write = |tier| write_table_on(env, opts, counters, mem, number, smallest_snapshot, tier);
    match write(Tier::Fast) {
        Err(e) if e.is_no_space() && !env.is_single_dir() => {
            tracing::warn!("fast tier full, writing L0 table {number} to the slow tier: {e}");
            write(Tier::Slow).map_err(|e2| both_tiers_full(&e, e2))
        }
        r => r,
    }
}

/// The error for a write that found no room on the fast tier and then failed on the slow.
pub(crate) fn both_tiers_full(fast: &Error, slow: Error) -> Error {
    if slow.is_no_space() {
        Error::NoSpace(format!("both tiers are full (fast: {fast}; slow: {slow})"))
    } else {
        slow
    }
}

fn write_table_on(
    env: &Env,
    opts: &Options,
    counters: &Counters,
    mem: &Arc<MemTable>,
    number: u64,
    smallest_snapshot: SeqNo,
    tier: Tier,
) -> Result<Option<NewFile>> {
    if mem.is_empty() {
        return Ok(None);
    }
    let name = table_file_name(number);
    let file = env.create_writable(tier, &name, IoCause::Flush)?;
    let mut builder = TableBuilder::new(file, opts.table_options());
    let mut dropped = 0u64;
    let mut expired = 0u64;
    let built = (|| {
        // The newest version of each key is always kept, so a non-empty memtable never
        // yields an empty table. An expired record is kept as a tombstone (older versions
        // may lie in the tables).
        let mut versions = VersionStream::new(smallest_snapshot, opts.clock.now_ms());
        mem.for_each_entry(|ikey, value| {
            let (hidden, tombstone) = match parse_internal_key(ikey) {
                Some(k) => {
                    let step = versions.step(&k, value);
                    (step.hidden, step.expired.then(|| tombstone_for(&k)))
                }
                None => {
                    versions.reset();
                    (false, None)
                }
            };
            if hidden {
                dropped += 1;
            } else if let Some(t) = tombstone {
                expired += 1;
                builder.add(&t, b"")?;
            } else {
                builder.add(ikey, value)?;
            }
            Ok(())
        })?;
        builder.finish()
    })();
    match built {
        Ok(info) => {
            Counters::add(&counters.flush_bytes_written, info.file_size);
            Counters::add(&counters.flush_entries_dropped, dropped);
            Counters::add(&counters.expired_entries_removed, expired);
            Ok(Some(NewFile::from_table(0, number, tier, info)))
        }
        Err(e) => {
            let _ = env.remove(tier, &name);
            Err(e)
        }
    }
}

/// Flushes the oldest immutable memtable to L0 and retires its WAL.
pub(crate) fn flush_memtable(inner: &Arc<DbInner>, mem: &Arc<MemTable>) -> Result<()> {
    let number = inner.state.lock().tree.versions.new_file_number();
    let horizon = inner.reads.smallest_snapshot();
    let file = write_level0_table(
        &inner.env,
        &inner.opts,
        &inner.counters,
        mem,
        number,
        horizon,
    )?;
    if let Some(f) = &file {
        // Before the SuperVersion without `mem` is published (invariant 1, see cache).
        update_cache_for_flush(inner, mem, f)?;
    }
    let installing = inner.installs.lock();
    let mut st = inner.state.lock();
    // WALs older than the next-oldest memtable hold nothing unflushed after this.
    let next_log = st
        .tree
        .imms
        .iter()
        .rev()
        .nth(1)
        .map(|m| m.id())
        .unwrap_or_else(|| st.tree.mem.id());
    let edit = VersionEdit {
        log_number: Some(next_log),
        last_sequence: Some(inner.reads.visible_seq.load(Ordering::Acquire)),
        added: file.into_iter().collect(),
        ..Default::default()
    };
    kill_point("flush.table_written");
    // On failure the table stays: the edit may be durable anyway (see log_and_apply).
    inner.log_and_apply(&mut st, &installing, edit)?;
    kill_point("flush.installed");
    let flushed = st.tree.imms.pop();
    debug_assert!(flushed.is_some_and(|f| Arc::ptr_eq(&f, mem)));
    st.tree.drop_horizon = st.tree.drop_horizon.max(horizon);
    inner.reads.install(&st.tree);
    Counters::add(&inner.counters.flushes, 1);
    drop(st);
    drop(installing);
    // Retire every log older than the oldest live memtable: removed, or kept for the
    // change feed up to `wal_retention_bytes`.
    super::changes::prune_retired(inner, next_log, inner.opts.wal_retention_bytes)
}

/// Gives the cached entries of the keys of a flushed memtable their newest version, which
/// now lives in the L0 table `file` (see `crate::cache`, "Correctness"). Runs before the
/// SuperVersion without the memtable is published, so no reader can miss the memtable and
/// find an older version in the cache. The new table is opened (into the table cache) only
/// if a KP entry needs re-pointing; if it cannot be, such entries are dropped.
fn update_cache_for_flush(inner: &Arc<DbInner>, mem: &Arc<MemTable>, file: &NewFile) -> Result<()> {
    let Some(cache) = inner.tables.cache().filter(|c| c.point_enabled()) else {
        return Ok(());
    };
    let mut keys: Vec<FlushedKey> = Vec::new();
    mem.for_each_newest(|key, kind, value| {
        keys.push(FlushedKey {
            key,
            value: (kind == crate::key::ValueKind::Value).then_some(value),
        });
    });
    let meta = FileMeta::new(file.clone(), inner.env.clone());
    let mut table: Option<Option<Arc<crate::sst::Table>>> = None;
    cache.apply_flush(&keys, file.number, |key| {
        let t = table.get_or_insert_with(|| inner.tables.get(&meta, IoCause::Flush).ok());
        let t = t.as_ref()?;
        t.block_handle_for(&crate::key::seek_key(key, crate::key::MAX_SEQ))
            .ok()
            .flatten()
    });
    Ok(())
}

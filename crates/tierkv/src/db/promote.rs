//! HotRAP's pathways on the engine side: recording accesses in RALT, offering records read
//! from the slow tier to the promotion cache, freezing it, and the checker that promotes
//! the hot records of a frozen cache by flush (HotRAP §3.4): which records go is
//! `hot::policy::select_for_flush`'s decision, writing and installing their file is this
//! file's. Retention and promotion by compaction live in `compaction::job` (routing) and
//! `db::compact`; the cache itself in `hot::promotion`.

use super::stats::Counters;
use super::{DbInner, SuperVersion};
use crate::env::kill::kill_point;
use crate::env::{IoCause, Tier};
use crate::error::Result;
use crate::hot::policy;
use crate::hot::promotion::{InsertOutcome, PcRecord, PcTable, MAX_FROZEN_TABLES};
use crate::key::{make_internal_key, seek_key, ValueKind, MAX_SEQ};
use crate::sst::TableBuilder;
use crate::version::{table_file_name, NewFile, VersionEdit};
use bytes::Bytes;
use std::sync::Arc;

impl DbInner {
    /// Logs a read of `key` in RALT. A failure to log loses hotness information, never
    /// data, so it is reported rather than failing the read.
    pub(crate) fn record_access(&self, key: &[u8], value_len: usize) {
        let Some(tracker) = &self.hot.tracker else {
            return;
        };
        self.access_feed.note(key);
        if let Err(e) = tracker.record_access(key, value_len.min(u32::MAX as usize) as u32) {
            tracing::warn!("RALT could not record an access: {e}");
        }
        if tracker.work_waiting() {
            self.signals.tracker_cv.notify_one();
        }
    }

    /// Offers a record just read from the slow tier to the promotion cache (HotRAP §3.3).
    /// Never blocks the reader beyond a try-lock (invariant 5, docs/DESIGN.md). The caller
    /// offers live records only; `deadline` goes with the record, so that it is checked
    /// again when the record is read from the cache and before it is promoted.
    pub(crate) fn offer_for_promotion(
        &self,
        key: &[u8],
        value: &Bytes,
        seq: u64,
        deadline: Option<u64>,
        epoch: u64,
    ) {
        let limit = self.opts.promotion_cache_size();
        let inserted = if self.hot.pc.mutable_size() >= 2 * limit {
            // The checker is behind (frozen tables at their cap): memory stays bounded
            // (invariant 4) and the record simply stays where it is.
            Counters::add(&self.counters.promotion_cache_full, 1);
            false
        } else {
            let record = PcRecord {
                // A copy: `value` is a slice of the whole data block it was read from, which
                // a cached record would otherwise keep alive (16 KiB held for a 100-byte
                // value, invisible to the cache's charge and the memory budget).
                value: Bytes::copy_from_slice(value),
                seq,
                deadline,
                recorded: false,
            };
            // With a memory limit (the memory budget's share) every table together stays
            // within it.
            let cap = self.opts.promotion.memory_limit;
            match self.hot.pc.try_insert_within(key, record, epoch, cap) {
                InsertOutcome::Inserted => true,
                InsertOutcome::Aborted => false,
                InsertOutcome::Full => {
                    Counters::add(&self.counters.promotion_cache_full, 1);
                    false
                }
            }
        };
        if !inserted {
            // The checker will not log this read for us: log it now, so a key read while
            // the cache is busy still gains its score.
            self.record_access(key, value.len());
        }
        // Also when the insert was refused: a full table must freeze once the checker
        // catches up, or it would stay full forever.
        if self.hot.pc.mutable_size() < limit || self.hot.pc.frozen_count() >= MAX_FROZEN_TABLES {
            return;
        }
        // Freeze under the database mutex (HotRAP §3.4 step 3), so the list of frozen
        // caches cannot change while a memtable switch records itself in them. A reader
        // only tries the mutex: if it is busy, a later insert freezes.
        let Some(_st) = self.state.try_lock() else {
            return;
        };
        if self.hot.pc.mutable_size() < limit || self.hot.pc.frozen_count() >= MAX_FROZEN_TABLES {
            return;
        }
        // The checker reads the SuperVersion of the freeze (HotRAP §3.4 step 4): under the
        // database mutex none can be installed meanwhile.
        let by_flush = self.opts.promotion.by_flush;
        let Some(frozen) = self
            .hot
            .pc
            .freeze(by_flush.then(|| self.reads.sv.load_full()))
        else {
            return;
        };
        if by_flush {
            self.signals.bg_cv.notify_all();
        } else {
            // Without promotion by flush, a full cache is simply emptied: its records are
            // still on the slow tier.
            self.hot.pc.retire(&frozen);
        }
    }
}

/// Attempts at writing a promotion file whose keys go stale meanwhile before giving up.
const CHECKER_ATTEMPTS: usize = 3;

/// Promotes every record the promotion cache holds now to the fast disk, however few
/// (the checker's half-a-file rule waived) and without the tracker's check (they were
/// read lately; retention judges them by the tracker when they next move down): a hot set
/// small enough to live in the cache would otherwise never reach a table, and the store
/// reopened after a clean close would find it on the slow disk. At most the cache's size
/// is written, once. Runs as the checker (waiting for a running one), on the calling
/// thread. (Not for a checkpoint of a running store: the records would leave this store's
/// cache for a table that retention then moves down when the tracker does not call them
/// hot.)
pub(crate) fn promote_cached_now(inner: &Arc<DbInner>) -> Result<()> {
    if inner.hot.tracker.is_none() || !inner.opts.promotion.by_flush {
        return Ok(());
    }
    {
        let mut st = inner.state.lock();
        while st.jobs.checker_running {
            inner
                .signals
                .done_cv
                .wait_for(&mut st, std::time::Duration::from_millis(100));
        }
        if st.jobs.bg_error.is_some() {
            return Ok(());
        }
        st.jobs.checker_running = true;
        if inner.hot.pc.mutable_size() > 0 {
            // Under the state lock, as a reader's freeze (HotRAP §3.4 step 3); the cache's
            // own lock is only tried there, so a busy moment is waited out.
            for _ in 0..1000 {
                if inner
                    .hot
                    .pc
                    .freeze(Some(inner.reads.sv.load_full()))
                    .is_some()
                {
                    break;
                }
                parking_lot::MutexGuard::unlocked(&mut st, || {
                    std::thread::sleep(std::time::Duration::from_millis(1))
                });
            }
        }
    }
    let result = (|| {
        while let Some((table, sv)) = inner.hot.pc.next_for_checker() {
            run_checker(inner, &table, &sv, true)?;
        }
        Ok(())
    })();
    inner.state.lock().jobs.checker_running = false;
    inner.signals.done_cv.notify_all();
    inner.signals.bg_cv.notify_all();
    result
}

/// The checker: promotes the hot records of a frozen promotion cache to L0, or puts them
/// back when too few to fill half a file; with `force`, every record, whatever their
/// bytes (`promote_cached_now`). `sv` is the superversion taken at the freeze.
pub(crate) fn run_checker(
    inner: &Arc<DbInner>,
    table: &Arc<PcTable>,
    sv: &SuperVersion,
    force: bool,
) -> Result<()> {
    let Some(tracker) = &inner.hot.tracker else {
        inner.hot.pc.retire(table);
        return Ok(());
    };
    let counters = &inner.counters;
    Counters::add(&counters.checker_runs, 1);
    let last_fast = inner.layout.last_fast_level;
    let file_bytes = inner.opts.promotion_cache_size();
    // Compactions into the slow tier announced before this epoch already took the frozen
    // records in their ranges (promotion by compaction); later ones are checked at install.
    let check_epoch = inner.hot.pc.read_epoch();
    let mut switched_seen = table.switched_count();
    // A newer version in the snapshot (memtables or fast levels) must not be shadowed by
    // an older one promoted to L0 (HotRAP §3.4 step 8).
    let newer_exists = |key: &[u8]| -> Result<bool> {
        let in_memory = std::iter::once(&sv.mem)
            .chain(sv.imms.iter())
            .any(|m| m.contains_user_key(key));
        Ok(in_memory
            || sv
                .version
                .get(
                    &inner.tables,
                    &seek_key(key, MAX_SEQ),
                    0..=last_fast,
                    IoCause::Promotion,
                )?
                .is_some())
    };
    let selected = policy::select_for_flush(
        table,
        tracker,
        (!force).then(|| policy::PromotionCheck::of(&inner.opts.promotion)),
        inner.opts.clock.now_ms(),
        newer_exists,
    )?;
    Counters::add(&counters.checker_dropped_newer, selected.dropped_newer);
    let mut hot = selected.hot;
    let bytes = |hot: &[(Bytes, PcRecord)]| -> usize {
        hot.iter().map(|(k, r)| k.len() + r.value.len()).sum()
    };
    for _ in 0..CHECKER_ATTEMPTS {
        if hot.is_empty() {
            break;
        }
        if !force && !policy::worth_a_file(bytes(&hot), file_bytes) {
            Counters::add(&counters.checker_put_back, 1);
            inner.hot.pc.put_back(table, hot);
            break;
        }
        let number = inner.state.lock().tree.versions.new_file_number();
        let info = match write_promotion_file(inner, number, &hot) {
            Ok(info) => info,
            Err(e) => {
                inner.hot.pc.retire(table);
                return Err(e);
            }
        };
        let installing = inner.installs.lock();
        let mut st = inner.state.lock();
        // Under the mutex nothing changes underneath, and while this job installs no other
        // can: drop keys written since the probe above (their memtables switched since) or
        // taken by a compaction into the slow tier meanwhile (HotRAP §3.4 step 9), one by
        // one. A memtable switched while the manifest is written (the state lock released)
        // holds writes newer than the promoted versions, and its flush installs after this.
        let stale: Vec<usize> = (0..hot.len())
            .filter(|&i| {
                let k = &hot[i].0;
                table.is_updated_since(k, switched_seen)
                    || inner.hot.pc.compacted_since(k, check_epoch)
            })
            .collect();
        if stale.is_empty() {
            let edit = VersionEdit {
                added: vec![NewFile::from_table(0, number, Tier::Fast, info)],
                ..Default::default()
            };
            kill_point("promote.file_written");
            if let Err(e) = inner.log_and_apply(&mut st, &installing, edit) {
                // The file stays: the edit may be durable anyway (see log_and_apply).
                drop(st);
                inner.hot.pc.retire(table);
                return Err(e);
            }
            kill_point("promote.installed");
            inner.reads.install(&st.tree);
            drop(st);
            Counters::add(&counters.promoted_by_flush_bytes, bytes(&hot) as u64);
            inner.signals.bg_cv.notify_all();
            break;
        }
        // Rare (the window is one file write): rewrite the file without the stale keys.
        switched_seen = table.switched_count();
        drop(st);
        // A file that cannot be removed now is removed by the next open.
        let _ = inner.env.remove(Tier::Fast, &table_file_name(number));
        Counters::add(&counters.checker_stale, stale.len() as u64);
        for &i in stale.iter().rev() {
            hot.swap_remove(i);
        }
        hot.sort_by(|a, b| a.0.cmp(&b.0));
    }
    inner.hot.pc.retire(table);
    Ok(())
}

/// Writes `hot` (sorted by key) as table `number` on the fast tier.
fn write_promotion_file(
    inner: &DbInner,
    number: u64,
    hot: &[(Bytes, PcRecord)],
) -> Result<crate::sst::TableInfo> {
    let name = table_file_name(number);
    let written = (|| {
        let file = inner
            .env
            .create_writable(Tier::Fast, &name, IoCause::Promotion)?;
        let mut builder = TableBuilder::new(file, inner.opts.table_options());
        for (key, record) in hot {
            match record.deadline {
                None => {
                    let ikey = make_internal_key(key, record.seq, ValueKind::Value);
                    builder.add(&ikey, &record.value)?;
                }
                Some(d) => {
                    let ikey = make_internal_key(key, record.seq, ValueKind::Expiring);
                    builder.add(&ikey, &crate::expiry::encode_expiring(d, &record.value))?;
                }
            }
        }
        builder.finish()
    })();
    if written.is_err() {
        let _ = inner.env.remove(Tier::Fast, &name);
    }
    written
}

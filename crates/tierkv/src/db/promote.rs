//! HotRAP's pathways on the engine side: recording accesses in RALT, offering records read
//! from the slow tier to the promotion cache, freezing it, and the checker that promotes
//! the hot records of a frozen cache by flush (HotRAP §3.4). Retention and promotion by
//! compaction live in `compaction::job`; the cache itself in `hot::promotion`.

use super::stats::Counters;
use super::{DbInner, SuperVersion};
use crate::compaction::job::new_file_from;
use crate::env::{IoCause, Tier};
use crate::hot::promotion::{InsertOutcome, PcRecord, PcTable};
use crate::key::{make_internal_key, seek_key, ValueKind, MAX_SEQ};
use crate::sst::TableBuilder;
use crate::version::{table_file_name, VersionEdit};
use crate::Result;
use bytes::Bytes;
use std::sync::Arc;

impl DbInner {
    /// Logs a read of `key` in RALT. A failure to log loses hotness information, never
    /// data, so it is reported rather than failing the read.
    pub(crate) fn record_access(&self, key: &[u8], value_len: usize) {
        let Some(ralt) = &self.ralt else { return };
        if let Err(e) = ralt.record_access(key, value_len.min(u32::MAX as usize) as u32) {
            tracing::warn!("RALT could not record an access: {e}");
        }
        if ralt.needs_maintenance() {
            self.bg_cv.notify_one();
        }
    }

    /// Offers a record just read from the slow tier to the promotion cache (HotRAP §3.3).
    pub(crate) fn offer_for_promotion(&self, key: &[u8], value: &Bytes, seq: u64, epoch: u64) {
        let record = PcRecord {
            value: value.clone(),
            seq,
        };
        if self.pc.try_insert(key, record, epoch) != InsertOutcome::Inserted {
            return;
        }
        let limit = self.opts.promotion_cache_size();
        if self.pc.mutable_size() < limit {
            return;
        }
        // Freeze under the database mutex (HotRAP §3.4 step 3), so the list of frozen
        // caches cannot change while a memtable switch marks updated keys.
        let mut st = self.state.lock();
        if self.pc.mutable_size() < limit {
            return;
        }
        let frozen = self.pc.freeze();
        if self.opts.promotion.by_flush {
            st.pc_pending.push((frozen, self.sv.load_full()));
            self.bg_cv.notify_all();
        } else {
            // Without promotion by flush, a full cache is simply emptied: its records are
            // still on the slow tier.
            self.pc.retire(&frozen);
        }
    }
}

/// The checker: promotes the hot records of a frozen promotion cache to L0, or puts them
/// back when too few to fill half a file. `sv` is the superversion taken at the freeze.
pub(crate) fn run_checker(
    inner: &Arc<DbInner>,
    table: &Arc<PcTable>,
    sv: &SuperVersion,
) -> Result<()> {
    let Some(ralt) = &inner.ralt else {
        inner.pc.retire(table);
        return Ok(());
    };
    let counters = &inner.counters;
    Counters::add(&counters.checker_runs, 1);
    let last_fast = inner.layout.last_fast_level;
    let mut hot: Vec<(Bytes, PcRecord)> = Vec::new();
    let mut hot_bytes = 0usize;
    // Compactions into the slow tier announced before this epoch already took the frozen
    // records in their ranges (promotion by compaction); later ones are checked at install.
    let check_epoch = inner.pc.read_epoch();
    for (key, record) in table.records() {
        if table.is_updated(&key) {
            continue;
        }
        // The SD read that cached the record is an access RALT has not seen yet.
        ralt.record_access(&key, record.value.len().min(u32::MAX as usize) as u32)?;
        if inner.opts.promotion.hotness_check && !ralt.is_hot(&key) {
            continue;
        }
        // A newer version in the snapshot (memtables or fast levels) must not be shadowed
        // by an older one promoted to L0 (HotRAP §3.4 step 8).
        let newer_in_memory = std::iter::once(&sv.mem)
            .chain(sv.imms.iter())
            .any(|m| m.contains_user_key(&key));
        let newer_on_fast = !newer_in_memory
            && sv
                .version
                .get(
                    &inner.tables,
                    &seek_key(&key, MAX_SEQ),
                    0..=last_fast,
                    IoCause::Promotion,
                )?
                .is_some();
        if newer_in_memory || newer_on_fast {
            Counters::add(&counters.checker_dropped_newer, 1);
            continue;
        }
        hot_bytes += key.len() + record.value.len();
        hot.push((key, record));
    }
    if hot.is_empty() {
        inner.pc.retire(table);
        return Ok(());
    }
    if hot_bytes < inner.opts.promotion_cache_size() / 2 {
        Counters::add(&counters.checker_put_back, 1);
        inner.pc.put_back(table, hot);
        inner.pc.retire(table);
        return Ok(());
    }

    let number = inner.state.lock().versions.new_file_number();
    let name = table_file_name(number);
    let written = (|| {
        let file = inner
            .env
            .create_writable(Tier::Fast, &name, IoCause::Promotion)?;
        let mut builder = TableBuilder::new(file, inner.opts.table_options());
        for (key, record) in &hot {
            let ikey = make_internal_key(key, record.seq, ValueKind::Value);
            builder.add(&ikey, &record.value)?;
        }
        builder.finish()
    })();
    let info = match written {
        Ok(info) => info,
        Err(e) => {
            let _ = inner.env.remove(Tier::Fast, &name);
            inner.pc.retire(table);
            return Err(e);
        }
    };
    let mut st = inner.state.lock();
    // Under the mutex nothing changes underneath: a key updated (its memtable switched) or
    // taken by a compaction into the slow tier while the file was written disqualifies the
    // file (rare: the window is one file write).
    let stale = hot
        .iter()
        .any(|(k, _)| table.is_updated(k) || inner.pc.compacted_since(k, check_epoch));
    if stale {
        drop(st);
        inner.pc.retire(table);
        return inner.env.remove(Tier::Fast, &name);
    }
    let edit = VersionEdit {
        added: vec![new_file_from(0, number, Tier::Fast, info)],
        ..Default::default()
    };
    if let Err(e) = st.versions.log_and_apply(edit) {
        // The file stays: the edit may be durable anyway (see log_and_apply).
        drop(st);
        inner.pc.retire(table);
        return Err(e);
    }
    inner.install_super_version(&st);
    inner.pc.retire(table);
    Counters::add(&counters.promoted_by_flush_bytes, hot_bytes as u64);
    inner.bg_cv.notify_all();
    Ok(())
}

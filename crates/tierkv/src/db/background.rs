//! Background work: the thread loop that flushes immutable memtables (oldest first, one at
//! a time) and runs compactions (up to the thread count, one thread kept free for flushes),
//! plus manual compaction and waiting for quiescence.

use super::stats::Counters;
use super::{DbInner, State};
use crate::compaction::job::{self, new_file_from, JobContext};
use crate::compaction::{picker, Compaction};
use crate::env::{Env, IoCause, Tier};
use crate::iter::InternalIterator;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::sst::TableBuilder;
use crate::version::{table_file_name, wal_file_name, NewFile, VersionEdit};
use crate::{Error, Result};
use parking_lot::MutexGuard;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// The body of each background thread.
pub(crate) fn thread_loop(inner: Arc<DbInner>) {
    let mut st = inner.state.lock();
    loop {
        if inner.shutting_down.load(Ordering::Acquire) {
            return;
        }
        if st.bg_error.is_none() {
            if !st.flush_running && !st.imms.is_empty() {
                st.flush_running = true;
                let mem = st.imms.last().expect("non-empty").clone();
                MutexGuard::unlocked(&mut st, || {
                    if let Err(e) = flush_memtable(&inner, &mem) {
                        let mut st = inner.state.lock();
                        inner.set_bg_error(&mut st, e);
                    }
                });
                st.flush_running = false;
                inner.done_cv.notify_all();
                inner.bg_cv.notify_all();
                continue;
            }
            let max_compactions = inner.opts.background_threads.saturating_sub(1).max(1);
            if !st.manual_compaction && st.running_compactions < max_compactions {
                let v = st.versions.current();
                if let Some(c) = picker::pick(&v, &inner.opts) {
                    st.running_compactions += 1;
                    MutexGuard::unlocked(&mut st, || {
                        if let Err(e) = run_compaction(&inner, &c, &v) {
                            let mut st = inner.state.lock();
                            inner.set_bg_error(&mut st, e);
                        }
                    });
                    st.running_compactions -= 1;
                    inner.done_cv.notify_all();
                    inner.bg_cv.notify_all();
                    continue;
                }
            }
        }
        inner.bg_cv.wait(&mut st);
    }
}

/// Writes a memtable's entries into a new table file on the fast tier.
pub(crate) fn write_level0_table(
    env: &Env,
    opts: &Options,
    counters: &Counters,
    mem: &Arc<MemTable>,
    number: u64,
) -> Result<Option<NewFile>> {
    if mem.is_empty() {
        return Ok(None);
    }
    let name = table_file_name(number);
    let file = env.create_writable(Tier::Fast, &name, IoCause::Flush)?;
    let mut builder = TableBuilder::new(file, opts.table_options());
    let mut it = mem.iter();
    let built = (|| {
        it.seek_to_first()?;
        while it.valid() {
            builder.add(it.key(), it.value())?;
            it.next()?;
        }
        builder.finish()
    })();
    match built {
        Ok(info) => {
            Counters::add(&counters.flush_bytes_written, info.file_size);
            Ok(Some(new_file_from(0, number, Tier::Fast, info)))
        }
        Err(e) => {
            let _ = env.remove(Tier::Fast, &name);
            Err(e)
        }
    }
}

/// Flushes the oldest immutable memtable to L0 and retires its WAL.
fn flush_memtable(inner: &Arc<DbInner>, mem: &Arc<MemTable>) -> Result<()> {
    let number = inner.state.lock().versions.new_file_number();
    let file = write_level0_table(&inner.env, &inner.opts, &inner.counters, mem, number)?;
    let mut st = inner.state.lock();
    // WALs older than the next-oldest memtable hold nothing unflushed after this.
    let next_log = st
        .imms
        .iter()
        .rev()
        .nth(1)
        .map(|m| m.id())
        .unwrap_or_else(|| st.mem.id());
    let edit = VersionEdit {
        log_number: Some(next_log),
        last_sequence: Some(inner.visible_seq.load(Ordering::Acquire)),
        added: file.into_iter().collect(),
        ..Default::default()
    };
    if let Err(e) = st.versions.log_and_apply(edit) {
        let _ = inner.env.remove(Tier::Fast, &table_file_name(number));
        return Err(e);
    }
    let flushed = st.imms.pop().expect("the flushed memtable");
    debug_assert!(Arc::ptr_eq(&flushed, mem));
    inner.install_super_version(&st);
    Counters::add(&inner.counters.flushes, 1);
    drop(st);
    // Retire every log older than the oldest live memtable.
    for name in inner.env.list(Tier::Fast)? {
        if let Some(n) = crate::version::parse_file_number(&name, "log") {
            if n < next_log {
                inner.env.remove(Tier::Fast, &wal_file_name(n))?;
            }
        }
    }
    Ok(())
}

/// Runs a claimed compaction and installs its result.
pub(crate) fn run_compaction(
    inner: &Arc<DbInner>,
    c: &Compaction,
    v: &crate::version::Version,
) -> Result<()> {
    let alloc = || inner.state.lock().versions.new_file_number();
    let ctx = JobContext {
        env: &inner.env,
        tables: &inner.tables,
        table_options: inner.opts.table_options(),
        target_file_size: inner.opts.target_file_size,
        smallest_snapshot: inner.smallest_snapshot(),
        version: v,
        new_file_number: &alloc,
    };
    let out = match job::run(c, &ctx) {
        Ok(out) => out,
        Err(e) => {
            c.release();
            return Err(e);
        }
    };
    let mut st = inner.state.lock();
    let trivial = c.is_trivial_move();
    let outputs: Vec<NewFile> = out.edit.added.clone();
    if let Err(e) = st.versions.log_and_apply(out.edit) {
        c.release();
        if !trivial {
            for f in &outputs {
                let _ = inner.env.remove(f.tier, &table_file_name(f.number));
            }
        }
        return Err(e);
    }
    inner.install_super_version(&st);
    c.release();
    drop(st);
    if !trivial {
        for f in c.all_inputs() {
            inner.tables.evict(f.number);
        }
    }
    let k = &inner.counters;
    Counters::add(&k.compactions, 1);
    if trivial {
        Counters::add(&k.trivial_moves, 1);
    }
    Counters::add(&k.compaction_bytes_read, out.bytes_read);
    Counters::add(&k.compaction_bytes_written, out.bytes_written);
    Counters::add(&k.compaction_entries_dropped, out.entries_dropped);
    Ok(())
}

fn wait_for<F: FnMut(&State) -> bool>(inner: &DbInner, mut done: F) -> Result<()> {
    let mut st = inner.state.lock();
    loop {
        if let Some(e) = &st.bg_error {
            return Err(Error::Background(e.clone()));
        }
        if done(&st) {
            return Ok(());
        }
        if inner.shutting_down.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        inner.bg_cv.notify_all();
        inner.done_cv.wait_for(&mut st, Duration::from_millis(50));
    }
}

/// Waits until nothing is flushing or compacting and no level needs compaction.
pub(crate) fn wait_idle(inner: &DbInner) -> Result<()> {
    wait_for(inner, |st| {
        st.imms.is_empty()
            && !st.flush_running
            && st.running_compactions == 0
            && picker::level_scores(&st.versions.current(), &inner.opts)
                .iter()
                .all(|s| *s < 1.0)
    })
}

/// Manual compaction of `[from, to]` down to the deepest level holding data in it.
pub(crate) fn compact_range(
    inner: &Arc<DbInner>,
    from: Option<&[u8]>,
    to: Option<&[u8]>,
) -> Result<()> {
    inner.flush_and_wait()?;
    {
        let mut st = inner.state.lock();
        if st.manual_compaction {
            return Err(Error::InvalidArgument(
                "another manual compaction is running".into(),
            ));
        }
        st.manual_compaction = true;
    }
    let r = (|| {
        wait_for(inner, |st| st.running_compactions == 0)?;
        let v = inner.state.lock().versions.current();
        let deepest = (0..v.num_levels())
            .rev()
            .find(|&l| !v.overlapping(l, from, to).is_empty());
        let Some(deepest) = deepest else {
            return Ok(());
        };
        for level in 0..deepest {
            let v = inner.state.lock().versions.current();
            if let Some(c) = picker::pick_range(&v, level, from, to) {
                run_compaction(inner, &c, &v)?;
            }
        }
        Ok(())
    })();
    let mut st = inner.state.lock();
    st.manual_compaction = false;
    inner.bg_cv.notify_all();
    match r {
        Err(e @ (Error::Closed | Error::Background(_))) => Err(e),
        Err(e) => Err(Error::Background(inner.set_bg_error(&mut st, e))),
        Ok(()) => Ok(()),
    }
}

//! The write path: validation, group commit through the WAL, memtable inserts, memtable
//! switches, write stalls when flush or L0 compaction falls behind, and atomic
//! read-modify-write. The invariants cited below are in docs/DESIGN.md.
//!
//! Read-modify-write is optimistic: it takes the visible sequence number `s`, reads the
//! key's latest state without locks, computes the new value, and queues a write conditioned
//! on "no version of the key newer than `s` exists". The read is a plain get, not a
//! snapshot read at `s`, so it is served by the KV/KP caches and counts as an access for
//! hot-record promotion like any get; it stays exact for the condition, because a version
//! it returns that is newer than `s` was written after `s`, which fails the condition.
//! The leader checks the condition while holding `WriteQueue::commit`, where every write newer
//! than the oldest in-memory memtable is in a memtable; a write whose condition fails is
//! dropped and retried by its caller. So an RMW is atomic with respect to every other
//! write (puts, deletes, batches and other RMWs) and no lock is held while it reads from
//! disk.

use super::stats::Counters;
use super::{DbInner, Wal};
use crate::batch::WriteBatch;
use crate::env::kill::kill_point;
use crate::env::PlantedBug;
use crate::env::{IoCause, Tier};
use crate::error::{Error, Result};
use crate::expiry::EntryRef;
use crate::key::SeqNo;
use crate::memtable::MemTable;
use crate::version::wal_file_name;
use crate::wal::LogWriter;
use parking_lot::Mutex;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A write's condition: the keys it read and the sequence number it read at.
type Condition = (Vec<Vec<u8>>, SeqNo);

/// Upper bound of a commit group's encoded size.
const MAX_GROUP_BYTES: usize = 1 << 20;

/// How long [`DbInner::write_now`] waits for another writer's commit before it declines:
/// a few commits of a WAL append and a memtable insert, far less than a switch or a stall.
const COMMIT_WAIT: Duration = Duration::from_micros(100);

/// A writer waiting in the queue.
pub(crate) struct PendingWrite {
    batch: Mutex<Option<WriteBatch>>,
    sync: bool,
    /// For a read-modify-write: the keys it read and the sequence number it read at. The
    /// write applies only if no newer version of any of those keys exists.
    condition: Option<Condition>,
    /// `Some` once the group holding this write has committed (or failed): `Ok(true)`
    /// applied, `Ok(false)` dropped because its condition failed.
    result: Mutex<Option<Result<bool, Arc<Error>>>>,
    /// The thread that queued the write: it parks while the write waits, and is unparked
    /// when the write gets its result or reaches the head of the queue (so a commit wakes
    /// only the writers it concerns, not every waiting writer).
    waiter: std::thread::Thread,
}

/// A write that applies only if none of `keys` was written after sequence number
/// `since` (see [`crate::Db::write_if_unchanged`]).
#[derive(Clone, Debug)]
pub struct ConditionalWrite {
    /// What to write, atomically.
    pub batch: WriteBatch,
    /// The keys whose state the write depends on (none: it applies unconditionally).
    pub keys: Vec<Vec<u8>>,
    /// A [`crate::Db::latest_sequence`] taken before those keys were read.
    pub since: u64,
}

/// What a read-modify-write does with the value it read (see [`crate::Db::update`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Update {
    /// Write this value (a plain put: any deadline the key had is cleared).
    Put(Vec<u8>),
    /// Write this value, expiring at the deadline (milliseconds since the UNIX epoch).
    PutExpiring(Vec<u8>, u64),
    /// Delete the key.
    Delete,
    /// Leave the key as it is (nothing is written).
    Keep,
}

/// What the leader decided about one write of its group.
struct GroupOutcome {
    /// Writes taken from the head of the queue.
    len: usize,
    /// Per write: applied (true) or dropped by a failed condition (false).
    applied: Vec<bool>,
}

/// The writes still in memtables, for telling whether a key was written after a sequence
/// number without reading any table.
struct WritesInMemory {
    sv: arc_swap::Guard<Arc<super::SuperVersion>>,
    /// The sequence number of the oldest write the memtables hold (every later write is
    /// in them).
    from: SeqNo,
}

impl WritesInMemory {
    /// The superversion first, then the sequence: every write newer than the oldest
    /// in-memory memtable's first one is in this superversion's memtables.
    fn now(db: &DbInner) -> WritesInMemory {
        let sv = db.reads.sv.load();
        let visible = db.reads.visible_seq.load(Ordering::Acquire);
        let oldest = sv.imms.last().unwrap_or(&sv.mem);
        let from = if oldest.is_empty() {
            visible + 1
        } else {
            oldest.smallest_seq()
        };
        WritesInMemory { sv, from }
    }

    /// False if `key` has a version newer than `since`, or may have one (`since` is older
    /// than the memtables' oldest write: a memtable was flushed since).
    fn unchanged_since(&self, key: &[u8], since: SeqNo) -> bool {
        since + 1 >= self.from
            && std::iter::once(&self.sv.mem)
                .chain(self.sv.imms.iter())
                .all(|m| m.latest_seq(key).is_none_or(|s| s <= since))
    }
}

impl DbInner {
    /// True if none of `keys` was written after sequence `since` (see
    /// [`crate::Db::unchanged_since`]).
    pub(crate) fn unchanged_since(&self, keys: &[&[u8]], since: SeqNo) -> bool {
        let memory = WritesInMemory::now(self);
        keys.iter().all(|k| memory.unchanged_since(k, since))
    }

    fn validate(&self, batch: &WriteBatch) -> Result<()> {
        for e in batch.iter() {
            if e.key.len() > self.opts.max_key_size {
                return Err(Error::KeyTooLarge {
                    size: e.key.len(),
                    limit: self.opts.max_key_size,
                });
            }
            if e.value.len() > self.opts.max_value_size {
                return Err(Error::ValueTooLarge {
                    size: e.value.len(),
                    limit: self.opts.max_value_size,
                });
            }
        }
        Ok(())
    }

    pub(crate) fn write(&self, batch: WriteBatch, sync: bool) -> Result<()> {
        self.write_conditional(batch, sync, None).map(|_| ())
    }

    /// Atomically applies `f(current record)` to `key` and returns the value afterwards.
    /// Retries when another write to the key races it. An expired record reads as absent.
    pub(crate) fn update(
        &self,
        key: &[u8],
        sync: bool,
        mut f: impl FnMut(Option<EntryRef<'_>>) -> Update,
    ) -> Result<Option<Vec<u8>>> {
        loop {
            // The sequence before the read (see the module comment).
            let seq = self.reads.visible_seq.load(Ordering::Acquire);
            let old = self.get(key, &crate::options::ReadOptions::new())?;
            let mut batch = WriteBatch::new();
            let old_ref = old.as_ref().map(|e| EntryRef {
                value: &e.value,
                deadline: e.deadline,
            });
            let new = match f(old_ref) {
                // Nothing to write: the read itself is the atomic step.
                Update::Keep => return Ok(old.map(|e| e.value)),
                Update::Put(v) => {
                    batch.put(key, &v);
                    Some(v)
                }
                Update::PutExpiring(v, deadline) => {
                    batch.put_expiring(key, &v, deadline);
                    Some(v)
                }
                Update::Delete => {
                    batch.delete(key);
                    None
                }
            };
            if self.write_conditional(batch, sync, Some((vec![key.to_vec()], seq)))? {
                Counters::add(&self.counters.rmws, 1);
                return Ok(new);
            }
            Counters::add(&self.counters.rmw_retries, 1);
        }
    }

    /// Multi-key read-modify-write: reads `keys` (values and deadlines; an expired record
    /// reads as absent), lets `f` build a batch (which may write any keys), and applies it
    /// only if none of `keys` was written since the read; retries otherwise. `f` returning
    /// `None` writes nothing. Returns whether a batch applied.
    pub(crate) fn update_many(
        &self,
        keys: &[&[u8]],
        sync: bool,
        mut f: impl FnMut(&[Option<crate::expiry::Entry>]) -> Option<WriteBatch>,
    ) -> Result<bool> {
        loop {
            let seq = self.reads.visible_seq.load(Ordering::Acquire);
            let mut old = Vec::with_capacity(keys.len());
            for k in keys {
                old.push(self.get(k, &crate::options::ReadOptions::new())?);
            }
            let Some(batch) = f(&old) else {
                return Ok(false);
            };
            let cond = keys.iter().map(|k| k.to_vec()).collect();
            if self.write_conditional(batch, sync, Some((cond, seq)))? {
                Counters::add(&self.counters.rmws, 1);
                return Ok(true);
            }
            Counters::add(&self.counters.rmw_retries, 1);
        }
    }

    /// Queues a write (see the module comment for `condition`); returns whether it applied.
    fn write_conditional(
        &self,
        batch: WriteBatch,
        sync: bool,
        condition: Option<Condition>,
    ) -> Result<bool> {
        self.validate(&batch)?;
        let mut results = self.write_queued(vec![(batch, condition)], sync)?;
        results.pop().unwrap_or(Ok(true))
    }

    /// Applies `batch` at once on this thread (WAL written, not fsynced), or fails with
    /// [`Error::WouldBlock`] without writing anything when that would mean waiting:
    /// another writer holds the commit for more than [`COMMIT_WAIT`], level 0 is at its
    /// slowdown trigger, or the memtable is full (a switch creates and syncs files). See
    /// [`crate::Db::write_now`].
    pub(crate) fn write_now(&self, batch: WriteBatch) -> Result<()> {
        if self.signals.shutting_down.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        self.validate(&batch)?;
        if batch.is_empty() {
            return Ok(());
        }
        // A commit that only writes the WAL and the memtable takes tens of microseconds:
        // waiting for one costs the caller less than a hand-off to a thread that may wait
        // (a leader holding the commit longer is making room: a switch, a stall).
        let Some(_commit) = self.writes.commit.try_lock_for(COMMIT_WAIT) else {
            return Err(Error::WouldBlock("another writer is committing"));
        };
        self.room_without_waiting(MemTable::batch_charge(&batch))?;
        self.apply_batch(batch, false, 1)
            .map_err(|e| Arc::try_unwrap(e).unwrap_or_else(Error::Background))
    }

    /// [`DbInner::make_room_for_write`]'s checks for a write that may not wait: `Ok` when
    /// the memtable takes `incoming` bytes with no switch and no slowdown is due, else
    /// [`Error::WouldBlock`] (or the store's background error). Called holding
    /// `WriteQueue::commit`.
    fn room_without_waiting(&self, incoming: usize) -> Result<()> {
        if self.room_at_once(incoming) {
            return Ok(());
        }
        let st = self.state.lock();
        if let Some(e) = &st.jobs.bg_error {
            return Err(Error::Background(e.clone()));
        }
        if st.tree.versions.current().levels[0].len() >= self.opts.level0_slowdown_trigger {
            return Err(Error::WouldBlock("level 0 is at its slowdown trigger"));
        }
        let mem = &st.tree.mem;
        if mem.is_empty() || mem.approximate_size() + incoming <= self.opts.write_buffer_size {
            Ok(())
        } else {
            Err(Error::WouldBlock("the memtable is full"))
        }
    }

    /// Several optimistic writes (see [`crate::Db::write_many_if_unchanged`]), queued
    /// together so that they commit in as few groups as the group limits allow.
    pub(crate) fn write_many_if_unchanged(
        &self,
        writes: Vec<ConditionalWrite>,
        sync: bool,
    ) -> Result<Vec<Result<bool>>> {
        for w in &writes {
            self.validate(&w.batch)?;
        }
        self.write_queued(
            writes
                .into_iter()
                .map(|w| {
                    let condition = (!w.keys.is_empty()).then_some((w.keys, w.since));
                    (w.batch, condition)
                })
                .collect(),
            sync,
        )
    }

    /// Queues `writes` one after another and returns each one's outcome (applied, dropped
    /// by its condition, or the error of its group). The writer whose write reaches the
    /// head of the queue leads: it commits a group that starts there and hands the results
    /// out; a caller with several writes keeps leading until all of its own are done.
    fn write_queued(
        &self,
        writes: Vec<(WriteBatch, Option<Condition>)>,
        sync: bool,
    ) -> Result<Vec<Result<bool>>> {
        if self.signals.shutting_down.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        // An empty batch applies at once, whatever its condition.
        let mut outcomes: Vec<Option<Result<bool>>> = Vec::with_capacity(writes.len());
        let mut mine: Vec<(usize, Arc<PendingWrite>)> = Vec::with_capacity(writes.len());
        for (i, (batch, condition)) in writes.into_iter().enumerate() {
            if batch.is_empty() {
                outcomes.push(Some(Ok(true)));
                continue;
            }
            outcomes.push(None);
            let w = PendingWrite {
                batch: Mutex::new(Some(batch)),
                sync,
                condition,
                result: Mutex::new(None),
                waiter: std::thread::current(),
            };
            mine.push((i, Arc::new(w)));
        }
        let mut next = 0; // mine[..next] have outcomes
        self.writes
            .queue
            .lock()
            .extend(mine.iter().map(|(_, w)| w.clone()));
        while let Some((slot, me)) = mine.get(next) {
            let queue = self.writes.queue.lock();
            if let Some(r) = me.result.lock().take() {
                outcomes[*slot] = Some(r.map_err(Error::Background));
                next += 1;
                continue;
            }
            if !Arc::ptr_eq(&queue[0], me) {
                drop(queue);
                // Until the leader answering this write, or making it the head, unparks
                // this thread (a token left by an earlier unpark, or a spurious return,
                // only costs one more look at the queue).
                std::thread::park();
                continue;
            }
            drop(queue);
            // Leader: commit a group that starts with this write, in a memtable with room
            // for at least this write (so memtables stay within write_buffer_size:
            // invariant 4).
            let guard = self.writes.commit.lock();
            let charge = me.batch.lock().as_ref().map_or(0, MemTable::batch_charge);
            let outcome = self
                .make_room_for_write(false, charge)
                .and_then(|_| self.commit_group());
            drop(guard);
            let (group_len, result) = match outcome {
                Ok(g) => (g.len, Ok(g.applied)),
                Err(e) => (1, Err(e)),
            };
            let mut wake: Vec<std::thread::Thread> = Vec::new();
            {
                let mut queue = self.writes.queue.lock();
                let me_id = me.waiter.id();
                for (i, w) in queue.drain(..group_len).enumerate().skip(1) {
                    *w.result.lock() = Some(match &result {
                        Ok(applied) => Ok(applied[i]),
                        Err(e) => Err(e.clone()),
                    });
                    let id = w.waiter.id();
                    if id != me_id && wake.last().is_none_or(|t| t.id() != id) {
                        wake.push(w.waiter.clone());
                    }
                }
                // The next head leads the next group (it may be this thread's own next
                // write: it then leads at once, without parking).
                if let Some(head) = queue.front() {
                    let id = head.waiter.id();
                    if id != me_id && !wake.iter().any(|t| t.id() == id) {
                        wake.push(head.waiter.clone());
                    }
                }
            }
            // Unparked outside the queue's lock, which each of them takes next.
            for t in wake {
                t.unpark();
            }
            outcomes[*slot] = Some(match result {
                Ok(applied) => Ok(applied[0]),
                // An error of this write alone (e.g. both tiers full) comes back as itself;
                // one shared with the group is the store's background error.
                Err(e) => Err(Arc::try_unwrap(e).unwrap_or_else(Error::Background)),
            });
            next += 1;
        }
        Ok(outcomes.into_iter().flatten().collect())
    }

    /// Writes the queue's head group to the WAL and the memtable. Called by the leader
    /// holding `WriteQueue::commit`.
    fn commit_group(&self) -> Result<GroupOutcome, Arc<Error>> {
        let group: Vec<Arc<PendingWrite>> = {
            // The leader made room for its own write; followers join only while the
            // memtable stays within write_buffer_size.
            let room = self
                .opts
                .write_buffer_size
                .saturating_sub(self.reads.sv.load().mem.approximate_size());
            let queue = self.writes.queue.lock();
            let leader_sync = queue[0].sync;
            let (mut size, mut charge) = (0, 0);
            let mut group = Vec::new();
            for w in queue.iter() {
                // A sync write never rides in a group whose leader would not fsync.
                if w.sync && !leader_sync && !group.is_empty() {
                    break;
                }
                let (len, c) = w.batch.lock().as_ref().map_or((0, 0), |b| {
                    (b.approximate_size(), MemTable::batch_charge(b))
                });
                if !group.is_empty() && (size + len > MAX_GROUP_BYTES || charge + c > room) {
                    break;
                }
                size += len;
                charge += c;
                group.push(w.clone());
            }
            group
        };
        let applied = self.check_conditions(&group);
        let mut batch = WriteBatch::new();
        for (w, _) in group.iter().zip(&applied).filter(|(_, ok)| **ok) {
            #[allow(
                clippy::expect_used,
                reason = "a queued write holds its batch until its group commits"
            )]
            batch.append(w.batch.lock().as_ref().expect("queued batch"));
        }
        let outcome = GroupOutcome {
            len: group.len(),
            applied,
        };
        if batch.is_empty() {
            return Ok(outcome);
        }
        let sync = group.iter().any(|w| w.sync);
        self.apply_batch(batch, sync, group.len())?;
        Ok(outcome)
    }

    /// Writes `batch` (the batches of `writes` writes) to the WAL, fsynced when `sync`,
    /// then to the memtable, and makes it visible. Called holding `WriteQueue::commit`,
    /// after `make_room_for_write` (or `room_without_waiting`) made room for it.
    fn apply_batch(
        &self,
        mut batch: WriteBatch,
        sync: bool,
        writes: usize,
    ) -> Result<(), Arc<Error>> {
        let first_seq = self.reads.visible_seq.load(Ordering::Acquire) + 1;
        let wal_written = {
            let mut wal = self.writes.wal.lock();
            let before = wal.writer.len();
            let r = wal
                .writer
                .add_record(batch.encode_with_seq(first_seq))
                .and_then(|_| wal.writer.flush())
                .and_then(|_| {
                    // A test may plant the bug of skipping this sync (env::PlantedBug).
                    if sync && !self.env.planted(PlantedBug::SkipWalSync) {
                        wal.writer.sync()
                    } else {
                        Ok(())
                    }
                });
            if let Err(e) = r {
                let mut st = self.state.lock();
                return Err(self.set_bg_error(&mut st, e));
            }
            wal.writer.len().saturating_sub(before)
        };
        // The change feed's memory gets the record the WAL did (when it is kept).
        self.recent_changes.push(
            first_seq,
            first_seq + batch.len() as u64 - 1,
            batch.encode_with_seq(first_seq),
        );
        // In the WAL (a crash now replays it), not yet in the memtable nor visible.
        kill_point("write.wal_appended");
        // The caller holds `WriteQueue::commit`, so no switch came between the WAL write
        // and here: this is the memtable the WAL belongs to.
        let mem = self.reads.sv.load().mem.clone();
        mem.add_wal_bytes(wal_written);
        mem.add_batch(first_seq, &batch);
        let seq = first_seq + batch.len() as u64;
        let (mut puts, mut dels, mut bytes) = (0, 0, 0);
        for e in batch.iter() {
            match e.kind {
                crate::key::ValueKind::Value | crate::key::ValueKind::Expiring => puts += 1,
                crate::key::ValueKind::Delete => dels += 1,
            }
            bytes += (e.key.len() + e.value.len()) as u64;
        }
        self.reads.visible_seq.store(seq - 1, Ordering::Release);
        let c = &self.counters;
        Counters::add(&c.puts, puts);
        Counters::add(&c.deletes, dels);
        Counters::add(&c.user_bytes_written, bytes);
        Counters::add(&c.write_batches, writes as u64);
        Counters::add(&c.write_groups, 1);
        Ok(())
    }

    /// Which writes of a group may apply: a conditional write fails if its key has a
    /// version newer than the one it read, in a memtable or possibly flushed, or if an
    /// earlier write of the same group touches the key. Called holding `WriteQueue::commit`, so
    /// no write commits meanwhile.
    fn check_conditions(&self, group: &[Arc<PendingWrite>]) -> Vec<bool> {
        if group.iter().all(|w| w.condition.is_none()) {
            return vec![true; group.len()];
        }
        let memory = WritesInMemory::now(self);
        let mut group_keys: std::collections::HashSet<Vec<u8>> = Default::default();
        group
            .iter()
            .map(|w| {
                let ok = match &w.condition {
                    None => true,
                    Some((keys, read_at)) => keys.iter().all(|key| {
                        !group_keys.contains(key) && memory.unchanged_since(key, *read_at)
                    }),
                };
                if ok {
                    if let Some(b) = w.batch.lock().as_ref() {
                        group_keys.extend(b.iter().map(|e| e.key.to_vec()));
                    }
                }
                ok
            })
            .collect()
    }

    /// Ensures the memtable has room, switching to a new one (and WAL) when it is full or
    /// `force` is set, and stalling while too much awaits flush or compaction. Called with
    /// `WriteQueue::commit` held.
    /// `incoming` is what the next write adds to the memtable: a memtable that cannot take
    /// it is switched first, unless it is empty (a batch larger than a whole memtable
    /// still goes into one).
    pub(crate) fn make_room_for_write(
        &self,
        mut force: bool,
        incoming: usize,
    ) -> Result<(), Arc<Error>> {
        if !force && self.room_at_once(incoming) {
            return Ok(());
        }
        let mut delayed = false;
        let mut st = self.state.lock();
        loop {
            if let Some(e) = &st.jobs.bg_error {
                return Err(e.clone());
            }
            if self.signals.shutting_down.load(Ordering::Acquire) {
                return Err(Arc::new(Error::Closed));
            }
            let l0 = st.tree.versions.current().levels[0].len();
            if !delayed && l0 >= self.opts.level0_slowdown_trigger {
                // Spread the delay over many writes instead of one long stall.
                delayed = true;
                Counters::add(&self.counters.write_slowdowns, 1);
                drop(st);
                std::thread::sleep(Duration::from_millis(1));
                st = self.state.lock();
                continue;
            }
            let size = st.tree.mem.approximate_size();
            if !force && (st.tree.mem.is_empty() || size + incoming <= self.opts.write_buffer_size)
            {
                return Ok(());
            }
            if force && st.tree.mem.is_empty() {
                return Ok(());
            }
            // A flushed memtable that a frozen promotion cache still holds for its update
            // check is memory like an immutable one: it counts against the same limit.
            let held = self
                .hot
                .pc
                .held_memtables()
                .iter()
                .filter(|m| !st.tree.imms.iter().any(|i| Arc::ptr_eq(i, m)))
                .count();
            if st.tree.imms.len() + held >= self.opts.max_immutable_memtables
                || l0 >= self.opts.level0_stop_trigger
            {
                let start = Instant::now();
                Counters::add(&self.counters.write_stalls, 1);
                self.signals.bg_cv.notify_all();
                self.signals
                    .done_cv
                    .wait_for(&mut st, Duration::from_millis(100));
                Counters::add(
                    &self.counters.write_stall_micros,
                    start.elapsed().as_micros() as u64,
                );
                continue;
            }
            if let Some(full) = self.tiers_over_budget(&st) {
                return Err(Arc::new(full));
            }
            // Switch to a new WAL and memtable.
            let number = st.tree.versions.new_file_number();
            let file = self
                .env
                .create_writable(Tier::Fast, &wal_file_name(number), IoCause::Wal)
                .map_err(|e| self.set_bg_error(&mut st, e))?;
            // The new log's name must be durable before a synced write in it is
            // acknowledged: its own fsync covers its bytes, not its directory entry, and a
            // power cut would take the whole log (invariant 2; found by the power-cut
            // stress test, issue 44).
            if !self.env.planted(PlantedBug::SkipNewFileDirSync) {
                self.env
                    .sync_dir(Tier::Fast)
                    .map_err(|e| self.set_bg_error(&mut st, e))?;
            }
            kill_point("write.wal_switched");
            {
                let mut wal = self.writes.wal.lock();
                // The old log's tail must be durable before later writes are, or a power cut
                // could lose a middle of the history (invariant 2).
                wal.writer
                    .sync()
                    .map_err(|e| self.set_bg_error(&mut st, e))?;
                *wal = Wal {
                    writer: LogWriter::new(file),
                };
            }
            let old = std::mem::replace(
                &mut st.tree.mem,
                Arc::new(MemTable::new(number, self.opts.write_buffer_size)),
            );
            // HotRAP §3.4 steps a-c: keys written while a frozen promotion cache awaits
            // the checker must not be promoted from it (O(frozen caches) here).
            self.hot.pc.note_switched(&old);
            st.tree.imms.insert(0, old);
            self.reads.install(&st.tree);
            self.signals.bg_cv.notify_all();
            force = false;
        }
    }

    /// The common case of [`DbInner::make_room_for_write`], decided without
    /// `DbInner::state`: no background error, level 0 below its slowdown trigger, and room
    /// for `incoming` bytes in the memtable. A background job holds `state` while it picks
    /// and installs work, and a writer waiting for it there (worse, for a background thread
    /// the scheduler took off the CPU while holding it) was the slowest 1% of writes in a
    /// read-mostly mix (docs/bench/hyperdb-ycsb.md). Called holding `WriteQueue::commit`:
    /// only a holder switches the memtable, so the published one is the one to write, and
    /// level 0 read from the published version can be one install behind, which a check
    /// under `state` could be a moment later too.
    fn room_at_once(&self, incoming: usize) -> bool {
        if self.signals.failed.load(Ordering::Acquire)
            || self.signals.shutting_down.load(Ordering::Acquire)
        {
            return false;
        }
        let sv = self.reads.sv.load();
        let mem = &sv.mem;
        sv.version.levels[0].len() < self.opts.level0_slowdown_trigger
            && (mem.is_empty() || mem.approximate_size() + incoming <= self.opts.write_buffer_size)
    }

    /// `Some(error)` when the slow tier has reached its budget and the fast tier its own:
    /// a new memtable would have nowhere to go. (The fast-tier budget alone is soft: data
    /// moves down; a full fast disk spills table files to the slow tier.)
    fn tiers_over_budget(&self, st: &super::State) -> Option<Error> {
        let slow_budget = self.opts.slow.as_ref()?.budget?;
        let v = st.tree.versions.current();
        let (fast, slow) = (v.tier_bytes(Tier::Fast), v.tier_bytes(Tier::Slow));
        // Tables may fill the fast budget less what the WALs need (see
        // `Options::fast_tier_reserve`).
        let fd_budget = self.opts.fd_budget.unwrap_or(0);
        let tables = fd_budget.saturating_sub(self.opts.fast_tier_reserve());
        (slow >= slow_budget && fast >= tables).then(|| {
            Error::NoSpace(format!(
                "both tiers are full: the slow tier holds {slow} bytes of its {slow_budget}-byte \
                 budget and the fast tier {fast} bytes of tables, its {fd_budget}-byte budget \
                 less {} bytes kept for WALs",
                fd_budget - tables
            ))
        })
    }

    /// Switches the memtable (if it holds anything) and waits until every immutable
    /// memtable is flushed.
    pub(crate) fn flush_and_wait(&self) -> Result<()> {
        {
            let _w = self.writes.commit.lock();
            self.make_room_for_write(true, 0)
                .map_err(Error::Background)?;
        }
        let mut st = self.state.lock();
        while !st.tree.imms.is_empty() {
            if let Some(e) = &st.jobs.bg_error {
                return Err(Error::Background(e.clone()));
            }
            if self.signals.shutting_down.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            self.signals.bg_cv.notify_all();
            self.signals
                .done_cv
                .wait_for(&mut st, Duration::from_millis(100));
        }
        Ok(())
    }
}

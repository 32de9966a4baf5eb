//! The database. This file holds the public API ([`Db`], [`Snapshot`]) and the store's
//! state ([`SuperVersion`], `State`, `DbInner`); the paths live beside it: `open` (open and
//! recovery), `write` (WAL group commit, memtables, write stalls), `read` (the get path,
//! stage by stage in tier order), `multi_get` (batched reads and their reader pool),
//! `iterator`, `background` (the threads' scheduling), `flush` and `compact` (the jobs),
//! `promote` (HotRAP's pathways), `stats` and `store_lock` (the `LOCK` file).
//! Invariants: docs/DESIGN.md.
//!
//! Concurrency in one paragraph: readers take no lock; they load the visible sequence
//! number, then the current [`SuperVersion`] (memtables + version) through an `ArcSwap`.
//! Writers queue; the writer at the head becomes leader, takes `WriteQueue::commit`, commits
//! the whole group to the WAL and the memtable, then publishes the new sequence number.
//! Structural changes (memtable switch, flush, compaction install) happen under the
//! `state` mutex and publish a new SuperVersion; an install (one at a time, `installs`)
//! releases it while the manifest is synced. `DbInner`'s fields are grouped by owner;
//! docs/ARCHITECTURE.md, "Owners and locks", has what guards each and the lock order.

mod background;
mod cached_keys;
mod changes;
mod checkpoint;
mod compact;
mod flush;
mod iterator;
mod multi_get;
mod open;
mod pipeline;
mod promote;
mod read;
mod stats;
mod store_lock;
mod stored_tiers;
mod write;

pub use changes::{Change, ChangeBytes};
pub use checkpoint::Checkpoint;
pub use iterator::DbIterator;
pub use stats::{CacheStats, DbStats, GetSources, LevelStats};
pub use stored_tiers::StoredTiers;
pub use write::{ConditionalWrite, Update};

use crate::batch::WriteBatch;
use crate::env::{DeviceProfile, Env, IoCause, Tier};
use crate::error::{Error, Result};
use crate::expiry::{Entry, EntryRef};
use crate::hot::policy::Retention;
use crate::hot::promotion::PromotionCache;
use crate::hot::HotTracker;
use crate::key::SeqNo;
use crate::memtable::MemTable;
use crate::options::{Options, ReadOptions, WriteOptions};
use crate::tiers::LevelLayout;
use crate::version::{TableCache, Version, VersionEdit, VersionSet};
use crate::wal::LogWriter;
use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex, MutexGuard};
use stats::Counters;
use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// What a reader needs to see one consistent state: the memtables and the version.
pub struct SuperVersion {
    /// The mutable memtable.
    pub mem: Arc<MemTable>,
    /// Immutable memtables awaiting flush, newest first.
    pub imms: Vec<Arc<MemTable>>,
    /// Table files.
    pub version: Arc<Version>,
    /// The largest oldest-snapshot bound (`DbInner::smallest_snapshot`) any flush or
    /// compaction in these files dropped versions under. Such a job drops a version only
    /// when a newer one at or below its bound exists, so a read at or above the bound
    /// loses nothing, but a latest-state read that took its sequence number before the
    /// job started and loads this SuperVersion after it was installed could miss both
    /// (the newer version is above its sequence, the older one gone): such a read takes
    /// a new sequence number (see `DbInner::read_view`). Registered snapshots are never
    /// below it.
    pub drop_horizon: SeqNo,
}

/// The tree's structure and the background jobs: everything under `DbInner::state`.
/// Background threads wait on `Signals::bg_cv` with it held.
pub(crate) struct State {
    /// What the next SuperVersion is made of.
    pub tree: Tree,
    /// Which background jobs run, and the error that stopped them.
    pub jobs: Jobs,
    /// HotRAP's memory of the last compaction into the slow tier (`hot::policy`).
    pub retention: Retention,
}

/// The version set (with the manifest it writes) and the memtables. Changed under
/// `DbInner::state` and published to readers by `ReadView::install`.
pub(crate) struct Tree {
    pub versions: VersionSet,
    /// The mutable memtable.
    pub mem: Arc<MemTable>,
    /// Immutable memtables awaiting flush, newest first.
    pub imms: Vec<Arc<MemTable>>,
    /// See `SuperVersion::drop_horizon`.
    pub drop_horizon: SeqNo,
}

impl Tree {
    /// What the live WALs hold on the fast tier: those of every memtable not yet flushed
    /// (a flush removes its memtable's WALs).
    pub(crate) fn wal_bytes(&self) -> u64 {
        std::iter::once(&self.mem)
            .chain(&self.imms)
            .map(|m| m.wal_bytes())
            .sum()
    }

    /// The sequence number up to which every write is in a table of the current version
    /// and none after it is: the writes before the oldest live memtable's first, or all of
    /// them up to `visible` (loaded before the memtables are looked at) when the memtables
    /// are empty.
    pub(crate) fn flushed_through(&self, visible: SeqNo) -> SeqNo {
        std::iter::once(&self.mem)
            .chain(&self.imms)
            .map(|m| m.smallest_seq())
            .min()
            .map_or(visible, |s| visible.min(s.saturating_sub(1)))
    }
}

/// The background jobs' bookkeeping, under `DbInner::state`: a job is claimed here before
/// it runs (with the lock released) and released here when it ends.
#[derive(Default)]
pub(crate) struct Jobs {
    pub flush_running: bool,
    /// What each running compaction may write (see `compaction::RangeClaim`).
    pub running_compactions: Vec<crate::compaction::RangeClaim>,
    pub manual_compaction: bool,
    pub checker_running: bool,
    /// The hotness tracker's maintenance (RALT's flushes, compactions, evictions) runs.
    pub tracker_maint_running: bool,
    /// The background error that made the store read-only.
    pub bg_error: Option<Arc<Error>>,
    /// The last pick that found no compaction (`background::IdlePick`).
    pub idle_pick: Option<background::IdlePick>,
}

/// The WAL being appended to.
pub(crate) struct Wal {
    pub writer: LogWriter,
}

/// The write path (`write.rs`). `queue` is only ever held alone, briefly; `commit` comes
/// before `wal` and `DbInner::state`, which are held together only under it.
pub(crate) struct WriteQueue {
    /// Writers waiting to commit, in order; the head leads the next group. Waiters park
    /// (`write.rs`): no condition variable, each is unparked by the leader concerning it.
    pub queue: Mutex<VecDeque<Arc<write::PendingWrite>>>,
    /// Held by a group's leader from the memtable switch to the memtable insert, and by
    /// close: commits never interleave.
    pub commit: Mutex<()>,
    /// The WAL; switched with the memtable, under `commit`.
    pub wal: Mutex<Wal>,
}

/// What readers load without locks: the visible sequence number and the SuperVersion
/// (in that order, `read_view`); plus the registered snapshots, under their own mutex.
pub(crate) struct ReadView {
    pub visible_seq: AtomicU64,
    pub sv: ArcSwap<SuperVersion>,
    pub snapshots: Mutex<BTreeMap<SeqNo, usize>>,
}

/// How the foreground and the background threads wake each other. The condition
/// variables are waited on with `DbInner::state` held.
pub(crate) struct Signals {
    /// Wakes background threads.
    pub bg_cv: Condvar,
    /// Wakes the tracker's thread (`background::tracker_loop`).
    pub tracker_cv: Condvar,
    /// Signals finished background work (stalled writers, `flush`, `compact_range`).
    pub done_cv: Condvar,
    pub shutting_down: AtomicBool,
    /// Set once `Jobs::bg_error` is: lets a write see the store is read-only without
    /// taking `DbInner::state`.
    pub failed: AtomicBool,
}

/// HotRAP's runtime state (present or not, the promotion cache is internally locked).
pub(crate) struct Hotness {
    /// Records read from the slow tier awaiting promotion; its frozen tables await the
    /// checker with the SuperVersion taken when they froze (HotRAP §3.4 steps 3-4).
    pub pc: PromotionCache<Arc<SuperVersion>>,
    /// The hotness tracker, RALT or the bloom cascade (when promotion is active).
    pub tracker: Option<Arc<HotTracker>>,
    /// When the keys served from memory were last listed for a restart (`cached_keys`).
    pub last_listed: cached_keys::LastSave,
}

/// The engine's shared state, grouped by owner: the type of a field says what guards it
/// (docs/ARCHITECTURE.md, "Locks").
pub(crate) struct DbInner {
    /// Fixed at open: no lock.
    pub env: Arc<Env>,
    pub opts: Options,
    pub layout: Arc<LevelLayout>,
    /// How `Options::memory_budget` was divided (`opts` already holds the derived sizes).
    pub memory: Option<crate::memory::MemoryDivision>,
    /// Internally synchronized.
    pub tables: Arc<TableCache>,
    pub counters: Counters,
    pub writes: WriteQueue,
    pub reads: ReadView,
    /// Held by the one job installing a version edit (flush, compaction, promotion by
    /// flush) from its last checks to its publication; taken before `state`, which the
    /// install releases while the manifest is written (`DbInner::log_and_apply`).
    pub installs: Mutex<()>,
    pub state: Mutex<State>,
    pub signals: Signals,
    pub hot: Hotness,
    /// The change feed's in-memory tail (internally locked; off unless asked for).
    pub recent_changes: changes::RecentChanges,
    /// Keys read lately, for a replica that mirrors this store's hotness (internally
    /// locked; off unless asked for).
    pub access_feed: crate::hot::AccessFeed,
    /// Released last, when the inner state drops (after every background thread ended).
    _store_lock: store_lock::StoreLock,
}

/// An open store. Cheap to share across threads (`&Db` is `Sync`); closes cleanly on drop.
pub struct Db {
    inner: Arc<DbInner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Runs the disk reads of [`Db::multi_get`] batches.
    readers: multi_get::ReaderPool,
}

/// A consistent read view. Reads through it see the store as it was when it was taken;
/// compactions keep every version it needs until it is dropped.
pub struct Snapshot {
    seq: SeqNo,
    inner: Arc<DbInner>,
}

impl Snapshot {
    /// The sequence number the snapshot reads at.
    pub fn seq(&self) -> SeqNo {
        self.seq
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        self.inner.reads.release_snapshot(self.seq);
    }
}

impl Db {
    /// Opens (or creates) the store whose fast-tier directory is `path`.
    ///
    /// A two-tier store records its tiers (slow directory, fast-disk budget, slow budget
    /// and device profile) at its first two-tier open: options without `slow` or
    /// `fd_budget` then take the recorded ones, a different slow directory or fast-disk
    /// budget is refused ([`Error::InvalidArgument`](crate::Error) naming both), and a
    /// recorded slow directory that is gone is [`crate::Error::SlowTierNotFound`].
    /// Creating a store in a directory that holds other files is refused
    /// ([`crate::Error::NotAStore`]).
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        open::open(path.as_ref(), opts)
    }

    /// The tier layout recorded in the store at `path` (`None`: none recorded: a
    /// single-directory store, no store, or one not opened with two tiers since tiers
    /// were recorded). Reads one small file; the store may be open.
    pub fn stored_tiers(path: impl AsRef<Path>) -> Result<Option<StoredTiers>> {
        StoredTiers::read(path.as_ref())
    }

    /// Reads the latest value of `key`.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.get_opt(key, &ReadOptions::new())
    }

    /// Reads `key` with options (e.g. at a snapshot).
    pub fn get_opt(&self, key: impl AsRef<[u8]>, ropts: &ReadOptions) -> Result<Option<Vec<u8>>> {
        Ok(self.inner.get(key.as_ref(), ropts)?.map(|e| e.value))
    }

    /// Reads the latest value of `key` with its deadline (`None`: it never expires). A
    /// record whose deadline has passed reads as absent, as with [`Db::get`].
    pub fn get_entry(&self, key: impl AsRef<[u8]>) -> Result<Option<Entry>> {
        self.get_entry_opt(key, &ReadOptions::new())
    }

    /// [`Db::get_entry`] with options (e.g. at a snapshot: expiry is by time, not by
    /// sequence number, so a snapshot read does not see a record that has expired since).
    pub fn get_entry_opt(
        &self,
        key: impl AsRef<[u8]>,
        ropts: &ReadOptions,
    ) -> Result<Option<Entry>> {
        self.inner.get(key.as_ref(), ropts)
    }

    /// [`Db::get_entry_opt`] for a caller that must not wait (an event loop): answered when
    /// memory can answer (the memtables, the point caches, or open tables whose filters
    /// rule the key out or whose blocks holding it are cached), and [`Error::WouldBlock`]
    /// otherwise (nothing is counted or cached for such a key: ask again with
    /// [`Db::get_entry_opt`], which reads the disk). Never reads a disk or waits on a
    /// lock held across I/O.
    pub fn get_entry_in_memory(
        &self,
        key: impl AsRef<[u8]>,
        ropts: &ReadOptions,
    ) -> Result<Option<Entry>> {
        self.inner.get_in_memory(key.as_ref(), ropts)
    }

    /// Reads the latest value of every key in `keys`: one answer per key, in order, all
    /// from one consistent state (one sequence number for the batch, as a snapshot read).
    /// An error reading one key is that key's answer only.
    ///
    /// Keys the memtables and point caches answer are answered on the calling thread; the
    /// others' table reads run in parallel on the store's reader pool
    /// ([`Options::read_parallelism`](crate::Options::read_parallelism) threads), or, with
    /// [`Options::read_io`](crate::Options::read_io) set to io_uring, are submitted
    /// together from the calling thread, so one caller keeps many disk reads in flight. Each key counts as one get in
    /// [`Db::stats`] and in hotness tracking, as [`Db::get`] would.
    ///
    /// ```no_run
    /// # let db = tierkv::Db::open("/tmp/mget-demo", tierkv::Options::default())?;
    /// let answers = db.multi_get(&[&b"a"[..], b"b"]);
    /// assert_eq!(answers.len(), 2);
    /// # Ok::<(), tierkv::Error>(())
    /// ```
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Vec<Result<Option<Vec<u8>>>> {
        self.multi_get_opt(keys, &ReadOptions::new())
    }

    /// [`Db::multi_get`] with options (e.g. at a snapshot). Expiry is as with
    /// [`Db::get_opt`]: the batch reads the clock once, and a key whose deadline is at or
    /// before that time reads as absent.
    pub fn multi_get_opt<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        ropts: &ReadOptions,
    ) -> Vec<Result<Option<Vec<u8>>>> {
        self.inner
            .multi_get(&self.readers, keys, ropts)
            .into_iter()
            .map(|answer| answer.map(|entry| entry.map(|e| e.value)))
            .collect()
    }

    /// Streams point reads of the latest state through the calling thread with up to
    /// `window` keys in flight: keys are taken from `next_key` whenever fewer than
    /// `window` are unanswered, and each key's answer goes to `on_answer` as soon as it is
    /// known, in completion order (not entry order). Returns once `next_key` answered
    /// `None` and every key taken was answered (exactly once). See
    /// [`Db::get_pipelined_opt`].
    ///
    /// ```no_run
    /// # let db = tierkv::Db::open("/tmp/pipe-demo", tierkv::Options::default())?;
    /// let mut keys = (0..1000u32).map(|i| format!("key{i}").into_bytes());
    /// let mut found = 0;
    /// db.get_pipelined(32, || keys.next(), |_key, answer| {
    ///     found += usize::from(matches!(answer, Ok(Some(_))));
    /// });
    /// # Ok::<(), tierkv::Error>(())
    /// ```
    pub fn get_pipelined<K, N, A>(&self, window: usize, next_key: N, mut on_answer: A)
    where
        K: AsRef<[u8]>,
        N: FnMut() -> Option<K>,
        A: FnMut(K, Result<Option<Vec<u8>>>),
    {
        self.get_pipelined_opt(&ReadOptions::new(), window, next_key, |k, a| {
            on_answer(k, a.map(|e| e.map(|e| e.value)))
        })
    }

    /// [`Db::get_pipelined`] with options (e.g. at a snapshot), answering entries with
    /// their deadlines (as [`Db::get_entry_opt`]).
    ///
    /// **Read points.** Each key takes a fresh read point when it enters (sequence number,
    /// SuperVersion, time of expiry; or the snapshot's sequence number): it is answered
    /// exactly as a [`Db::get_entry_opt`] issued at that moment would answer it. Writes
    /// made between two keys entering (by the callbacks or other threads) are seen by the
    /// later key, and a long stream never pins an old version. (Keys entering while
    /// nothing changed share one read point: the same one, as the sequence number, the
    /// SuperVersion and the cache fences are compared each time, with only the time
    /// taken anew.) An error is that key's answer only.
    ///
    /// **In flight.** With [`Options::read_io`](crate::Options::read_io) on io_uring, the
    /// keys' table reads run on the calling thread with no round barrier: a key is
    /// answered, or reads its next block, as soon as its block is back, and its slot goes
    /// to the next key. Never more than `window` keys (at least 1) are unanswered. With
    /// the reader pool, the keys that need the disk go in windows of up to `window`, read
    /// in parallel on the pool as [`Db::multi_get`]'s are (each key still at its own read
    /// point). Each key counts as one get, as with [`Db::get`].
    ///
    /// The callbacks run on the calling thread, never at the same time. While the stream
    /// runs it holds the thread's io_uring ring: a read issued from a callback is served
    /// without it (one block read at a time), writes are unaffected.
    pub fn get_pipelined_opt<K, N, A>(
        &self,
        ropts: &ReadOptions,
        window: usize,
        next_key: N,
        on_answer: A,
    ) where
        K: AsRef<[u8]>,
        N: FnMut() -> Option<K>,
        A: FnMut(K, Result<Option<Entry>>),
    {
        self.inner
            .get_pipelined(&self.readers, ropts, window, next_key, on_answer)
    }

    /// Reads a prefix of `keys` as [`Db::multi_get_opt`] does, holding at most about
    /// `max_bytes` of values: the answers (with deadlines, as [`Db::get_entry_opt`]) of
    /// the first keys, in order, stopping once their values reach `max_bytes`. At least the
    /// first key is answered (when `keys` is not empty), so the values returned are at most
    /// `max_bytes` plus one value; the caller asks again with the keys after the answers.
    /// Successive calls see one state only when `ropts` names a snapshot.
    ///
    /// For callers that must bound their memory whatever the values' sizes (a server
    /// answering MGET for a slow client). The keys are read in waves: the first of one
    /// key, each next sized from the room left and the largest value seen so far, so small
    /// values still get many reads in flight. A value read in parallel that does not fit
    /// is dropped and its key left for the next call (it counts as a get again then).
    ///
    /// ```no_run
    /// # let db = tierkv::Db::open("/tmp/mget-demo", tierkv::Options::default())?;
    /// let keys = [&b"a"[..], b"b", b"c"];
    /// let mut next = 0;
    /// while next < keys.len() {
    ///     let answers = db.multi_get_prefix(&keys[next..], &tierkv::ReadOptions::new(), 64 << 10);
    ///     next += answers.len();
    /// }
    /// # Ok::<(), tierkv::Error>(())
    /// ```
    pub fn multi_get_prefix<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        ropts: &ReadOptions,
        max_bytes: usize,
    ) -> Vec<Result<Option<Entry>>> {
        self.inner
            .multi_get_bounded(&self.readers, keys, ropts, Some(max_bytes))
    }

    /// Writes one key that expires at `deadline_ms` (milliseconds since the UNIX epoch, as
    /// [`Options::clock`](crate::Options::clock) reads): once the clock reaches it, every
    /// read (gets, iterators, snapshots, read-modify-writes) sees the key as deleted, and
    /// flushes and compactions rewrite the record as a tombstone or drop it. A deadline
    /// already past is accepted (the key reads as absent). A later plain [`Db::put`]
    /// clears the deadline.
    pub fn put_expiring(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        deadline_ms: u64,
    ) -> Result<()> {
        self.put_expiring_opt(key, value, deadline_ms, &WriteOptions::default())
    }

    /// [`Db::put_expiring`] with write options (e.g. `sync`).
    pub fn put_expiring_opt(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        deadline_ms: u64,
        wopts: &WriteOptions,
    ) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put_expiring(key, value, deadline_ms);
        self.write_opt(b, wopts)
    }

    /// Writes one key (a plain put: any deadline the key had is cleared).
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put(key, value);
        self.write(b)
    }

    /// Writes one key with options.
    pub fn put_opt(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        wopts: &WriteOptions,
    ) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put(key, value);
        self.write_opt(b, wopts)
    }

    /// Deletes one key.
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete(key);
        self.write(b)
    }

    /// Deletes one key with options.
    pub fn delete_opt(&self, key: impl AsRef<[u8]>, wopts: &WriteOptions) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete(key);
        self.write_opt(b, wopts)
    }

    /// Applies a batch atomically on the calling thread, for a caller that must not wait
    /// (an event loop), or fails with [`Error::WouldBlock`] having written nothing: when
    /// another writer's commit lasts more than 100 microseconds (it is making room: a
    /// memtable switch, a stall), level 0 is at its slowdown trigger, or the memtable is
    /// full. The WAL is written but not fsynced (as [`Db::write`] with the default
    /// options); what is left is a `write(2)` into the page cache and the memtable
    /// insert. Retry with [`Db::write`] (or [`Db::write_opt`]), which waits.
    pub fn write_now(&self, batch: WriteBatch) -> Result<()> {
        self.inner.write_now(batch)
    }

    /// Applies a batch atomically.
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        self.write_opt(batch, &WriteOptions::default())
    }

    /// Applies a batch atomically with options.
    pub fn write_opt(&self, batch: WriteBatch, wopts: &WriteOptions) -> Result<()> {
        self.inner.write(batch, wopts.sync)
    }

    /// The sequence number of the latest write visible to reads: a read that starts after
    /// this call sees every write up to it. Taken before reading some keys, it is the
    /// `since` of an optimistic write that depends on what was read
    /// ([`Db::write_if_unchanged`]).
    pub fn latest_sequence(&self) -> u64 {
        self.inner.reads.visible_seq.load(Ordering::Acquire)
    }

    /// An optimistic read-modify-write whose read was made some other way (a pipelined
    /// get, a batch of gets): applies `batch` atomically only if none of `keys` was written
    /// after sequence `since` ([`Db::latest_sequence`], taken before `keys` were read), so
    /// that what was read is still their latest state. Returns whether it applied; when
    /// it did not, read again and retry. It may also decline when it can no longer tell
    /// (`since` is older than every write still in memory: a memtable was flushed since),
    /// which a retry resolves. Atomic with respect to every other write, like
    /// [`Db::update_many`].
    pub fn write_if_unchanged(
        &self,
        batch: WriteBatch,
        keys: &[&[u8]],
        since: u64,
        wopts: &WriteOptions,
    ) -> Result<bool> {
        let keys = keys.iter().map(|k| k.to_vec()).collect();
        let mut outcomes = self
            .inner
            .write_many_if_unchanged(vec![ConditionalWrite { batch, keys, since }], wopts.sync)?;
        outcomes.pop().unwrap_or(Ok(true))
    }

    /// True if none of `keys` was written after sequence `since` ([`Db::latest_sequence`]
    /// taken earlier): the check [`Db::write_if_unchanged`] makes, without a write, for a
    /// caller that serializes its own writers (a Redis `WATCH`). False also when it can no
    /// longer tell (a memtable holding writes after `since` was flushed). Reads no table.
    pub fn unchanged_since(&self, keys: &[&[u8]], since: u64) -> bool {
        self.inner.unchanged_since(keys, since)
    }

    /// Several [`Db::write_if_unchanged`] writes, queued together so that they share group
    /// commits (one WAL record for as many as a group takes) instead of one each. Each
    /// applies or not on its own, in order: a write also declines when an earlier write
    /// of the same call that applied wrote one of its keys. Returns one outcome per write;
    /// the outer error is an invalid write (nothing was queued).
    pub fn write_many_if_unchanged(
        &self,
        writes: Vec<ConditionalWrite>,
        wopts: &WriteOptions,
    ) -> Result<Vec<Result<bool>>> {
        self.inner.write_many_if_unchanged(writes, wopts.sync)
    }

    /// Atomically replaces the value of `key` with `f(current value)`; `f` returning `None`
    /// deletes the key. Atomic with respect to every other write: concurrent
    /// read-modify-writes of one key never lose an update. `f` may be called more than
    /// once (when another write to the key races this one), so it should be pure. Returns
    /// the value written.
    ///
    /// ```no_run
    /// # let db = tierkv::Db::open("/tmp/rmw-demo", tierkv::Options::default())?;
    /// let incr = |old: Option<&[u8]>| {
    ///     let n: u64 = old.and_then(|v| std::str::from_utf8(v).ok()?.parse().ok()).unwrap_or(0);
    ///     Some((n + 1).to_string().into_bytes())
    /// };
    /// db.rmw(b"counter", incr)?;
    /// # Ok::<(), tierkv::Error>(())
    /// ```
    pub fn rmw(
        &self,
        key: impl AsRef<[u8]>,
        f: impl FnMut(Option<&[u8]>) -> Option<Vec<u8>>,
    ) -> Result<Option<Vec<u8>>> {
        self.rmw_opt(key, &WriteOptions::default(), f)
    }

    /// [`Db::rmw`] with write options (e.g. `sync`).
    pub fn rmw_opt(
        &self,
        key: impl AsRef<[u8]>,
        wopts: &WriteOptions,
        mut f: impl FnMut(Option<&[u8]>) -> Option<Vec<u8>>,
    ) -> Result<Option<Vec<u8>>> {
        self.update_opt(key, wopts, |old| match f(old) {
            Some(v) => Update::Put(v),
            None => Update::Delete,
        })
    }

    /// Read-modify-write that may also leave the key alone: `f` returns an [`Update`];
    /// [`Update::Keep`] writes nothing (e.g. a conditional set whose condition fails, or an
    /// increment of a value that is not a number). Atomic like [`Db::rmw`]; returns the
    /// key's value afterwards.
    pub fn update(
        &self,
        key: impl AsRef<[u8]>,
        f: impl FnMut(Option<&[u8]>) -> Update,
    ) -> Result<Option<Vec<u8>>> {
        self.update_opt(key, &WriteOptions::default(), f)
    }

    /// [`Db::update`] with write options (e.g. `sync`).
    pub fn update_opt(
        &self,
        key: impl AsRef<[u8]>,
        wopts: &WriteOptions,
        mut f: impl FnMut(Option<&[u8]>) -> Update,
    ) -> Result<Option<Vec<u8>>> {
        self.inner
            .update(key.as_ref(), wopts.sync, |old| f(old.map(|e| e.value)))
    }

    /// [`Db::update`] whose closure also sees the current record's deadline, so that it
    /// can keep it ([`Update::PutExpiring`] with the same deadline, as Redis's `INCR`
    /// keeps a key's TTL) or change it. An expired record is absent (`None`). Returns the
    /// key's value afterwards.
    pub fn update_entry(
        &self,
        key: impl AsRef<[u8]>,
        f: impl FnMut(Option<EntryRef<'_>>) -> Update,
    ) -> Result<Option<Vec<u8>>> {
        self.update_entry_opt(key, &WriteOptions::default(), f)
    }

    /// [`Db::update_entry`] with write options (e.g. `sync`).
    pub fn update_entry_opt(
        &self,
        key: impl AsRef<[u8]>,
        wopts: &WriteOptions,
        f: impl FnMut(Option<EntryRef<'_>>) -> Update,
    ) -> Result<Option<Vec<u8>>> {
        self.inner.update(key.as_ref(), wopts.sync, f)
    }

    /// Multi-key read-modify-write (a small optimistic transaction): reads the current
    /// records of `keys` (value and deadline; an expired one reads as absent), calls `f`
    /// with them, and applies the batch `f` returns only if
    /// none of `keys` was written since the read, retrying otherwise (so `f` may run more
    /// than once and should be pure). The batch may write any keys, read or not; `f`
    /// returning `None` writes nothing. Atomic with respect to every other write, like
    /// [`Db::update`]. Returns whether a batch was applied. What a server needs for a
    /// value spread over several records (a hash's metadata and fields) or a command on
    /// several keys (RENAME, MSETNX).
    pub fn update_many(
        &self,
        keys: &[&[u8]],
        wopts: &WriteOptions,
        f: impl FnMut(&[Option<Entry>]) -> Option<WriteBatch>,
    ) -> Result<bool> {
        self.inner.update_many(keys, wopts.sync, f)
    }

    /// Combines `operand` with the current value of `key` through the configured
    /// [`Options::merge_operator`](crate::Options::merge_operator), atomically (as
    /// [`Db::update`]): concurrent merges never lose an update. Returns the new value. An
    /// operand the operator rejects leaves the key unchanged and returns
    /// [`Error::InvalidArgument`]. A merge onto an expired record is a merge onto an
    /// absent key; a merge onto a live expiring record keeps its deadline (as Redis's
    /// `INCRBY` and `APPEND` keep a key's TTL).
    ///
    /// ```no_run
    /// # use std::sync::Arc;
    /// let opts = tierkv::Options {
    ///     merge_operator: Some(Arc::new(tierkv::merge::AddI64)),
    ///     ..Default::default()
    /// };
    /// let db = tierkv::Db::open("/tmp/merge-demo", opts)?;
    /// db.merge(b"visits", b"1")?;
    /// # Ok::<(), tierkv::Error>(())
    /// ```
    pub fn merge(&self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> Result<Vec<u8>> {
        let op = self.inner.opts.merge_operator.clone().ok_or_else(|| {
            Error::InvalidArgument("merge needs Options::merge_operator to be set".into())
        })?;
        let key = key.as_ref();
        let mut rejected = None;
        let new = self.update_entry(key, |old| {
            match op.merge(key, old.map(|e| e.value), operand.as_ref()) {
                Ok(v) => {
                    rejected = None;
                    match old.and_then(|e| e.deadline) {
                        Some(d) => Update::PutExpiring(v, d),
                        None => Update::Put(v),
                    }
                }
                Err(why) => {
                    rejected = Some(why);
                    Update::Keep
                }
            }
        })?;
        match rejected {
            Some(why) => Err(Error::InvalidArgument(format!(
                "merge operator {} rejected the merge: {why}",
                op.name()
            ))),
            None => Ok(new.unwrap_or_default()),
        }
    }

    /// Takes a snapshot of the current state.
    pub fn snapshot(&self) -> Snapshot {
        let seq = self.inner.reads.take_snapshot();
        Snapshot {
            seq,
            inner: self.inner.clone(),
        }
    }

    /// An iterator over the latest state (unpositioned: call a seek first).
    pub fn iter(&self) -> Result<DbIterator> {
        self.iter_opt(&ReadOptions::new())
    }

    /// An iterator with options (snapshot, bounds).
    pub fn iter_opt(&self, ropts: &ReadOptions) -> Result<DbIterator> {
        iterator::new_iterator(&self.inner, ropts)
    }

    /// Collects up to `limit` key-value pairs with `from <= key < to`.
    pub fn scan(
        &self,
        from: Option<&[u8]>,
        to: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let ropts = ReadOptions {
            lower_bound: from.map(|k| k.to_vec()),
            upper_bound: to.map(|k| k.to_vec()),
            scan_length_hint: Some(limit),
            ..ReadOptions::new()
        };
        let mut it = self.iter_opt(&ropts)?;
        it.seek_to_first()?;
        let mut out = Vec::new();
        while it.valid() && out.len() < limit {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.next()?;
        }
        Ok(out)
    }

    /// Makes a consistent, openable copy of the store while it runs: every write up to one
    /// point of its history ([`Checkpoint::sequence`]), the tier record and the hotness
    /// tracker's state included, in the new directory `to` (and `slow_to` for the slow
    /// tier of a two-tier store). Tables get a second name (a hard link) where the file
    /// system allows, so a checkpoint on the same file systems takes little time and
    /// space; elsewhere they are copied. Open the copy as any store (with `slow_to` as its
    /// slow directory). A crash during a checkpoint leaves no `to` (see the module
    /// `db::checkpoint`).
    pub fn checkpoint(&self, to: impl AsRef<Path>, slow_to: Option<&Path>) -> Result<Checkpoint> {
        checkpoint::make(&self.inner, to.as_ref(), slow_to)
    }

    /// The write batches applied after `sequence`, in order, each with the sequence
    /// number of its first entry, up to about `max_bytes` of them (at least one when any
    /// follows): the change feed a replica applies after a checkpoint taken at `sequence`
    /// ([`Checkpoint::sequence`]), or after the last batch it applied. Read from the WAL
    /// files the store keeps: the live ones, and retired ones up to
    /// [`Options::wal_retention_bytes`](crate::Options::wal_retention_bytes).
    /// [`Error::ChangesGone`] when the next batch is no longer kept. Empty when nothing
    /// follows yet.
    pub fn changes_since(&self, sequence: u64, max_bytes: usize) -> Result<Vec<Change>> {
        changes::since(&self.inner, sequence, max_bytes)
    }

    /// [`Db::changes_since`] in the changes' byte form ([`Change::to_bytes`]), for a
    /// reader that forwards them: those kept in memory come without a copy or a decode.
    pub fn change_bytes_since(&self, sequence: u64, max_bytes: usize) -> Result<Vec<ChangeBytes>> {
        changes::since_bytes(&self.inner, sequence, max_bytes)
    }

    /// [`Db::change_bytes_since`] when the changes after `sequence` are in memory
    /// ([`Db::keep_recent_changes`]); `None` when they would be read from the WAL files
    /// (for a caller that must not wait for the disk).
    pub fn change_bytes_in_memory(
        &self,
        sequence: u64,
        max_bytes: usize,
    ) -> Option<Result<Vec<ChangeBytes>>> {
        self.inner.recent_changes.since(sequence, max_bytes)
    }

    /// Keeps up to `bytes` of the newest write batches in memory from the next write on
    /// (0: none, the default), so that [`Db::changes_since`] serves a reader that follows
    /// the store closely without reading the WAL files again.
    pub fn keep_recent_changes(&self, bytes: usize) {
        self.inner.recent_changes.set_capacity(bytes);
    }

    /// Applies `change`, read from another store's change feed, as the next write of this
    /// one: its entries take the same sequence numbers they had there, so this store's
    /// [`Db::latest_sequence`] is the other's sequence it has caught up to. Fails with
    /// [`Error::InvalidArgument`], writing nothing, unless `change` starts right after
    /// this store's latest write. The caller must be the store's only writer (a replica):
    /// a write by anyone else between the check and the commit would shift the numbers,
    /// which this reports as [`Error::InvalidArgument`] afterwards.
    pub fn apply_change(&self, change: Change, wopts: &WriteOptions) -> Result<()> {
        let latest = self.latest_sequence();
        if change.sequence != latest + 1 {
            return Err(Error::InvalidArgument(format!(
                "a change starting at sequence {} does not follow this store's latest write {latest}",
                change.sequence
            )));
        }
        let last = change.last_sequence();
        self.write_opt(change.batch, wopts)?;
        let now = self.latest_sequence();
        if now != last {
            return Err(Error::InvalidArgument(format!(
                "another write came between: the change ended at sequence {last}, the store is at {now}"
            )));
        }
        Ok(())
    }

    /// Starts (or stops) collecting the keys reads touch, for [`Db::take_accesses`]: the
    /// hotness a replica mirrors. Off by default; while off it costs one atomic load per
    /// read.
    pub fn watch_accesses(&self, on: bool) {
        self.inner.access_feed.set_on(on);
    }

    /// The distinct keys read since the last call (at most 65,536; more are dropped),
    /// sorted, while [`Db::watch_accesses`] is on. Reading them on another store (a
    /// replica) records them in its tracker as reads there would.
    pub fn take_accesses(&self) -> Vec<Vec<u8>> {
        self.inner.access_feed.take()
    }

    /// Flushes every memtable to L0 and waits for it.
    pub fn flush(&self) -> Result<()> {
        self.inner.flush_and_wait()
    }

    /// Compacts every level's files overlapping `[from, to]` (None = unbounded) down to the
    /// deepest level that holds data in the range (at least L1: L0's overlapping tables are
    /// always merged into one sorted level), then returns.
    pub fn compact_range(&self, from: Option<&[u8]>, to: Option<&[u8]>) -> Result<()> {
        background::compact_range(&self.inner, from, to)
    }

    /// Waits until no flush, compaction or promotion is pending or running and the hotness
    /// tracker's upkeep (RALT's buffer flushes, compactions, evictions) has caught up.
    pub fn wait_for_background(&self) -> Result<()> {
        background::wait_idle(&self.inner)
    }

    /// Everything the store counts.
    pub fn stats(&self) -> DbStats {
        self.inner.stats()
    }

    /// The directory of a tier.
    pub fn tier_dir(&self, tier: Tier) -> &Path {
        self.inner.env.dir(tier)
    }

    /// Verifies every checksum of every live table; returns the number of entries checked.
    pub fn verify_checksums(&self) -> Result<u64> {
        let v = self.inner.reads.sv.load().version.clone();
        let mut entries = 0;
        for (_, f) in v.all_files() {
            entries += self
                .inner
                .tables
                .get(f, IoCause::Check)?
                .verify(IoCause::Check)?;
        }
        Ok(entries)
    }

    /// The level layout in force (targets and tiers).
    pub fn layout(&self) -> &LevelLayout {
        &self.inner.layout
    }

    /// The options the store was opened with (with the sizes a memory budget derived):
    /// lets a server take its request limits from the store's `max_key_size` /
    /// `max_value_size`. The runtime setters do not change them: after
    /// [`Db::set_cache_capacity`] `cache_size` is still the size at open and after
    /// [`Db::set_device_profile`] `fast_device` and `slow.device` are still the profiles at
    /// open; [`Db::stats`] reports the ones in force (`cache.capacity`, `fast_device`,
    /// `slow_device`).
    pub fn options(&self) -> &Options {
        &self.inner.opts
    }

    /// Resizes the cache (KV, KP and block components and the ghosts' records together) to
    /// `bytes` while the store is open, as `Options::cache_size` would at open, until the
    /// store closes (nothing is recorded: a reopen takes the options' size again).
    /// Shrinking evicts down to the new size before returning; growing lets new entries
    /// fill it. The shard count chosen at open is kept, and the adaptive split keeps its
    /// fractions (its ghosts turn back on to learn the best split for the new size).
    ///
    /// With `Options::memory_budget`, only the cache changes: the memtables, the open
    /// tables, the promotion cache and the tracker keep the bytes the budget gave them at
    /// open, so the budget in force is the open budget plus the cache's change, and
    /// [`DbStats::memory`] reports it that way (`budget` and `cache.limit`).
    ///
    /// [`Error::InvalidArgument`] (naming the value) for 0, for more than
    /// [`crate::MAX_CACHE_CAPACITY`] (256 TiB), and for a store opened without a cache
    /// (`cache_size` 0: the read path was built without one).
    pub fn set_cache_capacity(&self, bytes: usize) -> Result<()> {
        match self.inner.tables.cache() {
            Some(cache) => cache.set_capacity(bytes),
            None => Err(Error::InvalidArgument(format!(
                "cannot set the cache capacity to {bytes}: the store was opened without a \
                 cache (cache_size 0)"
            ))),
        }
    }

    /// Makes `tier` behave like a device of `profile` (its device model delays every read
    /// and write the engine issues there) from now on, e.g. from `none` to `gp3-max` and
    /// back, until the store closes (nothing is recorded: a reopen takes the options' or
    /// the recorded profile again). Every file of the tier, open or not, sees it at once,
    /// and so does everything that weighs reads by it (the compaction picker's and the
    /// scans' `DeviceProfile::read_cost_bytes`). I/Os already waiting keep the time the
    /// old profile gave them; the new profile starts idle. [`DbStats`] reports the profiles
    /// in force (`fast_device`, `slow_device`).
    ///
    /// [`Error::InvalidArgument`] for a profile with a zero rate or a latency over a minute
    /// (`DeviceProfile::validate`), and for [`Tier::Slow`] on a store without a slow tier.
    pub fn set_device_profile(&self, tier: Tier, profile: DeviceProfile) -> Result<()> {
        profile.validate()?;
        if tier == Tier::Slow && self.inner.opts.slow.is_none() {
            return Err(Error::InvalidArgument(format!(
                "cannot set the slow tier's device profile to {profile:?}: the store has \
                 no slow tier"
            )));
        }
        self.inner.env.set_device_profile(tier, profile);
        Ok(())
    }

    /// The background error that made the store read-only, if one did (writes fail until
    /// the store is reopened).
    pub fn background_error(&self) -> Option<Arc<Error>> {
        self.inner.state.lock().jobs.bg_error.clone()
    }

    /// True while the store reads back, on a thread of its own, the keys of the slow
    /// tier's records it served from memory before it was closed or killed (or that the
    /// checkpoint it was opened from listed), bringing them into its caches; see
    /// `PromotionOptions::warm_list_interval`. A server may wait for it before it serves.
    pub fn is_warming(&self) -> bool {
        self.inner.hot.last_listed.warming()
    }

    /// Stops background work, syncs the WAL and closes the store. Dropping the `Db` does
    /// the same but cannot report errors.
    pub fn close(self) -> Result<()> {
        self.shutdown()
    }

    /// Closes the store while others may still hold it (a server replacing it by another
    /// at the same place): stops background work and syncs the WAL and the tracker, as
    /// [`Db::close`]; afterwards writes fail with [`Error::Closed`]. Its files stay open
    /// (and its directory locked) until the last holder drops it.
    pub fn close_in_place(&self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&self) -> Result<()> {
        if self.inner.signals.shutting_down.load(Ordering::Acquire) {
            return Ok(());
        }
        // The hot set the promotion cache holds survives the close on the fast disk (a
        // failure loses only that: the records are on the slow tier). Listed first: the
        // records leave the cache for a table, which retention may move down again.
        let served_from_memory = cached_keys::served_from_memory(&self.inner);
        if let Err(e) = promote::promote_cached_now(&self.inner) {
            tracing::warn!("promoting the cached hot records at close: {e}");
        }
        if self
            .inner
            .signals
            .shutting_down
            .swap(true, Ordering::AcqRel)
        {
            return Ok(());
        }
        {
            let _st = self.inner.state.lock();
            self.inner.signals.bg_cv.notify_all();
            self.inner.signals.tracker_cv.notify_all();
            self.inner.signals.done_cv.notify_all();
        }
        self.readers.stop();
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
        // Read again at the next open (written once the threads stopped: a warming thread
        // that did not finish keeps the list it was reading).
        if let Err(e) = cached_keys::save_keys(&self.inner, served_from_memory) {
            tracing::warn!("listing the keys served from memory at close: {e}");
        }
        // Serialize with any in-flight leader, then make the log durable.
        let _w = self.inner.writes.commit.lock();
        self.inner.writes.wal.lock().writer.sync()?;
        // Hotness survives a restart (the promotion cache itself is only a cache).
        match &self.inner.hot.tracker {
            Some(tracker) => tracker.flush(),
            None => Ok(()),
        }
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::warn!("error while closing the store: {e}");
        }
    }
}

impl DbInner {
    /// Logs `edit` in the manifest and makes its version current, with `st` released while
    /// the manifest is written and synced (as LevelDB's `LogAndApply` releases its mutex),
    /// so writers and readers of the state never wait for that sync. The caller holds
    /// `installs` (`_installing`), taken before `state`: no other install can change the
    /// version set meanwhile, and the version stays the one before the edit until it is
    /// durable. On error nothing changes in memory (see `VersionSet::log_and_apply`).
    pub(crate) fn log_and_apply(
        &self,
        st: &mut MutexGuard<'_, State>,
        _installing: &MutexGuard<'_, ()>,
        edit: VersionEdit,
    ) -> Result<()> {
        let mut install = st.tree.versions.begin_install(edit)?;
        let written = MutexGuard::unlocked(st, || install.write());
        st.tree
            .versions
            .finish_install(install, written)
            .map(|_| ())
    }

    /// The hot bytes retention keeps on the fast tier: the tracker's hot set (0 without
    /// retention). The slow levels are sized from the rest of the last fast level.
    pub(crate) fn retained_hot_bytes(&self) -> u64 {
        match &self.hot.tracker {
            Some(t) if self.opts.promotion.retention => t.hot_set_bytes(),
            _ => 0,
        }
    }

    /// Gives the fast disk's record cache the room the rest of the fast tier leaves now:
    /// the budget less the fast tier's tables, the live WALs, and two memtables' worth
    /// (the mutable memtable's WAL filling up and the next flush's L0 table, so both fit
    /// before the cache has given its space back: invariant 4). Called after every
    /// background job, without the state lock: the cache may evict.
    pub(crate) fn fit_record_cache(&self) {
        let (Some(records), Some(budget)) = (self.tables.record_cache(), self.opts.fd_budget)
        else {
            return;
        };
        let sv = self.reads.sv.load();
        let wals: u64 = std::iter::once(&sv.mem)
            .chain(&sv.imms)
            .map(|m| m.wal_bytes())
            .sum();
        let held =
            sv.version.tier_bytes(Tier::Fast) + wals + 2 * self.opts.write_buffer_size as u64;
        records.set_room(budget.saturating_sub(held));
    }

    /// Makes the store read-only with `e` (the first background error wins) and wakes
    /// everyone waiting for background work, so they see it.
    pub(crate) fn set_bg_error(&self, st: &mut State, e: Error) -> Arc<Error> {
        let e = match e {
            Error::Background(inner) => inner,
            e => Arc::new(e),
        };
        if st.jobs.bg_error.is_none() {
            tracing::error!("background error, store is now read-only: {e}");
            st.jobs.bg_error = Some(e.clone());
            self.signals.failed.store(true, Ordering::Release);
        }
        self.signals.done_cv.notify_all();
        e
    }
}

impl ReadView {
    /// Publishes the memtables and version of `tree` to readers (called with
    /// `DbInner::state` held, so installs are ordered).
    pub(crate) fn install(&self, tree: &Tree) {
        self.sv.store(Arc::new(SuperVersion {
            mem: tree.mem.clone(),
            imms: tree.imms.clone(),
            version: tree.versions.current(),
            drop_horizon: tree.drop_horizon,
        }));
    }

    /// The sequence number and SuperVersion a read works on: `snapshot`, or the latest
    /// visible sequence, then the SuperVersion (in that order: every write at or below the
    /// sequence is in it). A latest-state read whose sequence fell below the SuperVersion's
    /// drop horizon takes both again (see `SuperVersion::drop_horizon`); a snapshot below
    /// it was released, and reading it is an error rather than a wrong answer.
    pub(crate) fn read_view(
        &self,
        snapshot: Option<SeqNo>,
    ) -> Result<(SeqNo, arc_swap::Guard<Arc<SuperVersion>>)> {
        loop {
            let seq = snapshot.unwrap_or_else(|| self.visible_seq.load(Ordering::Acquire));
            let sv = self.sv.load();
            if seq >= sv.drop_horizon {
                return Ok((seq, sv));
            }
            if let Some(s) = snapshot {
                return Err(Error::InvalidArgument(format!(
                    "snapshot {s} was released: compaction has dropped versions it reads \
                     (keep the Snapshot alive while reading at its sequence number)"
                )));
            }
        }
    }

    /// The oldest sequence number any reader may still read at.
    pub(crate) fn smallest_snapshot(&self) -> SeqNo {
        let snaps = self.snapshots.lock();
        let latest = self.visible_seq.load(Ordering::Acquire);
        snaps.keys().next().copied().unwrap_or(latest).min(latest)
    }

    /// Registers a snapshot at the latest visible sequence number.
    fn take_snapshot(&self) -> SeqNo {
        let mut snaps = self.snapshots.lock();
        // Read the sequence under the lock so compaction never misses a new snapshot.
        let seq = self.visible_seq.load(Ordering::Acquire);
        *snaps.entry(seq).or_insert(0) += 1;
        seq
    }

    /// Releases one registration of the snapshot at `seq`.
    fn release_snapshot(&self, seq: SeqNo) {
        let mut snaps = self.snapshots.lock();
        if let Some(n) = snaps.get_mut(&seq) {
            *n -= 1;
            if *n == 0 {
                snaps.remove(&seq);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::seek_key;
    use crate::version::LevelGet;

    /// Invariant 1, the reader that is descheduled between taking its sequence number and
    /// loading the SuperVersion: meanwhile a newer version is written and a flush drops the
    /// older one. Reading that SuperVersion at the old number finds neither; `read_view`
    /// never hands out such a pair, and a read through it finds the newer version.
    #[test]
    fn read_view_never_pairs_a_sequence_below_the_drop_horizon() {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options {
            write_buffer_size: 16 * 1024,
            ..Options::default()
        };
        let db = Db::open(dir.path(), opts).unwrap();
        db.put(b"k", b"v1").unwrap();
        // The reader takes its number here...
        let stale = db.inner.reads.visible_seq.load(Ordering::Acquire);
        // ...and while it waits, v2 is written and the flush drops v1.
        db.put(b"k", b"v2").unwrap();
        db.flush().unwrap();
        assert_eq!(db.stats().flush_entries_dropped, 1);
        let sv = db.inner.reads.sv.load();
        assert!(sv.drop_horizon > stale);
        let lookup = seek_key(b"k", stale);
        let hit = sv
            .version
            .get(
                &db.inner.tables,
                &lookup,
                0..=sv.version.num_levels() - 1,
                IoCause::UserGet,
            )
            .unwrap();
        assert!(
            !matches!(hit.map(|h| h.result), Some(LevelGet::Found(_))),
            "the stale pair finds no version: the hazard read_view exists for"
        );
        let (seq, sv) = db.inner.reads.read_view(None).unwrap();
        assert!(seq >= sv.drop_horizon);
        assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v2"[..]));
    }

    /// A write that fits its memtable never waits for `DbInner::state`, which background
    /// jobs hold while they pick and install work (docs/ARCHITECTURE.md, "Locks"). The
    /// test holds the state lock, as a background thread descheduled inside it would,
    /// while another thread writes; a write path that took the lock would still be
    /// waiting when the bound below runs out (a bound on a hang, not a speed).
    #[test]
    fn a_write_with_room_in_its_memtable_does_not_wait_for_the_state_lock() {
        let dir = tempfile::tempdir().unwrap();
        let db = std::sync::Arc::new(Db::open(dir.path(), Options::default()).unwrap());
        db.put(b"first", b"v").unwrap();
        let (done_tx, done) = std::sync::mpsc::channel();
        let held = db.inner.state.lock();
        let writer = {
            let db = db.clone();
            std::thread::spawn(move || {
                let r = db.put(b"second", b"v");
                let _ = done_tx.send(());
                r
            })
        };
        let finished = done
            .recv_timeout(std::time::Duration::from_secs(20))
            .is_ok();
        drop(held);
        writer.join().unwrap().unwrap();
        assert!(finished, "the write waited for the state lock");
        assert_eq!(db.get(b"second").unwrap().as_deref(), Some(&b"v"[..]));
    }
}

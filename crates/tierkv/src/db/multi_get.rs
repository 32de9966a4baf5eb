//! Batched point reads ([`crate::Db::multi_get`]): keeping many of a batch's disk reads in
//! flight for one caller, through io_uring from the caller's thread or through a pool of
//! reader threads ([`crate::ReadIo`]).
//!
//! A batch takes one read point (sequence number, SuperVersion, cache fence, promotion
//! epoch, time of expiry) for all its keys and resolves every key it can without I/O
//! (memtables, point caches) on the caller's thread. The keys that need table reads then
//! go one of two ways:
//!
//! - io_uring (`read_pending_together`): each key's disk stages run as a resumable state
//!   machine (`read.rs`'s `DiskGet`) on the caller's thread in a `pipeline.rs`
//!   [`Pipeline`]: every key goes as far as it can without I/O and its block read goes
//!   out at once (a block already in flight is not read again: the key joins its
//!   waiters); as reads complete, each block goes to the keys waiting on it, which go on
//!   at once and submit their next reads with the next `io_uring_enter`. No round
//!   barrier (a key is not held back by another key's slow read), no thread hand-off,
//!   no wakeup per read, and one doorbell per loop turn.
//! - the reader pool (`read_pending_in_pool`): workers each run the ordinary per-key disk
//!   stages, the caller one of them meanwhile; the queue depth the disk sees is up to the
//!   pool's size per caller. The fallback where io_uring is unavailable.
//!
//! Nothing waits forever: every job owns a sender of its answer, so a job the pool drops
//! unrun (the pool stopping) or a worker that panics closes its sender, and the caller's
//! wait ends with [`Error::Closed`] for the keys it got no answer for.

use super::pipeline::Pipeline;
use super::read::{PendingKey, ReadPoint, StreamPin};
use super::stats::Counters;
use super::{DbInner, SuperVersion};
use crate::error::{Error, Result};
use crate::expiry::Entry;
use crate::options::ReadIo;
use crate::options::ReadOptions;
use parking_lot::Mutex;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

type Job = Box<dyn FnOnce() + Send>;

/// A fixed set of threads, started at open and stopped at close, that run the disk stages
/// of batched reads.
pub(crate) struct ReaderPool {
    /// `None` once the pool stopped (or when it has one thread: batches then run inline).
    queue: Mutex<Option<mpsc::Sender<Job>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Batches read through io_uring from the caller's thread (no workers run).
    uring: AtomicBool,
}

impl ReaderPool {
    /// A pool with no workers (batches run inline until [`ReaderPool::start`]).
    pub(crate) fn new() -> ReaderPool {
        ReaderPool {
            queue: Mutex::new(None),
            threads: Mutex::new(Vec::new()),
            uring: AtomicBool::new(false),
        }
    }

    /// Chooses how batches read (`io`, resolved against what this kernel allows) and, for
    /// the thread pool, starts `size` workers (none when `size` is 1: a pool of one would
    /// only add a hand-off to the inline read).
    pub(crate) fn start(&self, size: usize, io: ReadIo) -> Result<()> {
        let uring = match io {
            ReadIo::Threads => false,
            ReadIo::Auto => crate::env::uring_available(),
            ReadIo::Uring if crate::env::uring_available() => true,
            ReadIo::Uring => {
                return Err(Error::InvalidArgument(
                    "read_io Uring: io_uring is unavailable here (an old kernel, a seccomp \
                     policy or a memlock limit); use Auto or Threads"
                        .into(),
                ))
            }
        };
        self.uring.store(uring, Relaxed);
        if uring {
            return Ok(());
        }
        self.start_threads(size)
    }

    /// True when batches read through io_uring.
    pub(crate) fn uses_uring(&self) -> bool {
        self.uring.load(Relaxed)
    }

    fn start_threads(&self, size: usize) -> Result<()> {
        if size <= 1 {
            return Ok(());
        }
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let mut threads = self.threads.lock();
        for i in 0..size {
            let rx = rx.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("tierkv-read-{i}"))
                .spawn(move || worker(&rx));
            match spawned {
                Ok(t) => threads.push(t),
                // The ones already started stop when `tx` drops here (and are joined by
                // `stop`, which the failing open's drop of the Db runs).
                Err(e) => return Err(Error::io("<spawning a reader thread>", e)),
            }
        }
        *self.queue.lock() = Some(tx);
        Ok(())
    }

    /// Stops taking jobs, lets the workers finish the queued ones and joins them.
    pub(crate) fn stop(&self) {
        drop(self.queue.lock().take());
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
    }

    /// A handle for queueing jobs, if the pool runs.
    fn sender(&self) -> Option<mpsc::Sender<Job>> {
        self.queue.lock().clone()
    }
}

/// A worker: runs jobs until the queue closes and is empty. A panicking job is contained
/// (its answer's sender drops, which its caller sees) so the pool keeps its size.
fn worker(rx: &Mutex<mpsc::Receiver<Job>>) {
    loop {
        // The lock is held only while waiting for the next job, never while running it.
        let job = rx.lock().recv();
        match job {
            Ok(job) => {
                let _ = catch_unwind(AssertUnwindSafe(job));
            }
            Err(mpsc::RecvError) => return,
        }
    }
}

/// The byte budget of a bounded batch ([`DbInner::multi_get_bounded`]): the value bytes
/// its answers may hold together. Shared by the caller and the pool jobs of one call.
struct Budget {
    limit: usize,
    held: AtomicUsize,
    /// The largest value kept or turned away so far (sizes the next wave).
    largest: AtomicUsize,
}

impl Budget {
    /// Keeps a value of `len` bytes when it fits in what is left, or when it answers the
    /// call's first key (so every call makes progress): together the kept values are at
    /// most `limit` plus that one value.
    fn admit(&self, len: usize, first: bool) -> bool {
        self.largest.fetch_max(len, Relaxed);
        if first {
            self.held.fetch_add(len, Relaxed);
            return true;
        }
        let mut cur = self.held.load(Relaxed);
        loop {
            if cur.saturating_add(len) > self.limit {
                return false;
            }
            match self
                .held
                .compare_exchange_weak(cur, cur + len, Relaxed, Relaxed)
            {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
    }
}

/// A streamed key after [`DbInner::enter_streamed_key`]: answered, or waiting for the
/// disk at its read point.
enum Entered<K> {
    Answered(K, Result<Option<Entry>>),
    Pending(K, StreamPin, ReadPoint, PendingKey),
}

/// The read point and SuperVersion of a stream's last key, shared by the next keys while
/// they are unchanged ([`DbInner::start_streamed_read`]).
type StreamPoint = Option<(ReadPoint, StreamPin)>;

/// One key's place in a wave.
enum Slot {
    /// Not answered: its job never ran (the pool stopped) or panicked.
    Waiting,
    Done(Result<Option<Entry>>),
    /// Read, but its value did not fit the budget and was dropped: the key is left for
    /// the caller's next call.
    Deferred,
}

/// Keeps an answer if the budget (when there is one) admits its value.
fn admit(answer: Result<Option<Entry>>, budget: Option<&Budget>, first: bool) -> Slot {
    if let (Some(b), Ok(Some(e))) = (budget, &answer) {
        if !b.admit(e.value.len(), first) {
            return Slot::Deferred;
        }
    }
    Slot::Done(answer)
}

/// Most keys in one wave of a bounded batch (in units of the reader pool's size): enough to
/// keep the pool busy between the waves' barriers.
const WAVE_PER_READER: usize = 4;

impl DbInner {
    /// Reads every key of `keys` at one read point (one sequence number, SuperVersion and
    /// time of expiry for the batch); one answer per key, in order, with its deadline as
    /// [`DbInner::get`] gives it.
    pub(super) fn multi_get<K: AsRef<[u8]>>(
        self: &Arc<Self>,
        pool: &ReaderPool,
        keys: &[K],
        ropts: &ReadOptions,
    ) -> Vec<Result<Option<Entry>>> {
        self.multi_get_bounded(pool, keys, ropts, None)
    }

    /// [`DbInner::multi_get`], answering only a prefix of `keys` when `max_bytes` is given:
    /// the keys are read in waves, and the batch stops once the values it holds reach
    /// `max_bytes` (at least the first key is always answered). The values held at once are
    /// at most `max_bytes` plus one value: a value read in parallel that does not fit is
    /// dropped and its key left for the next call.
    ///
    /// The first wave is one key (nothing is known of the values' sizes yet: a wave of
    /// large values read only to be dropped would be wasted I/O); each next wave holds as
    /// many keys as the room left would take if each were as large as the largest value
    /// seen, up to [`WAVE_PER_READER`] per reader.
    pub(super) fn multi_get_bounded<K: AsRef<[u8]>>(
        self: &Arc<Self>,
        pool: &ReaderPool,
        keys: &[K],
        ropts: &ReadOptions,
        max_bytes: Option<usize>,
    ) -> Vec<Result<Option<Entry>>> {
        let (at, sv) = match self.start_read(ropts) {
            Ok(view) => view,
            Err(e) => {
                // Only a released snapshot fails here; every key gets the same error.
                let msg = match e {
                    Error::InvalidArgument(m) => m,
                    e => e.to_string(),
                };
                return keys
                    .iter()
                    .map(|_| Err(Error::InvalidArgument(msg.clone())))
                    .collect();
            }
        };
        let sv: Arc<SuperVersion> = arc_swap::Guard::into_inner(sv);
        let Some(limit) = max_bytes else {
            return self
                .read_wave(pool, keys, &sv, at, None, false)
                .into_iter()
                .map(|slot| match slot {
                    Slot::Done(answer) => answer,
                    Slot::Waiting | Slot::Deferred => Err(Error::Closed),
                })
                .collect();
        };
        let budget = Budget {
            limit,
            held: AtomicUsize::new(0),
            largest: AtomicUsize::new(0),
        };
        let most = WAVE_PER_READER * self.opts.read_parallelism.max(1);
        let mut out = Vec::new();
        let mut pos = 0;
        let mut wave = 1;
        while pos < keys.len() {
            let end = (pos + wave).min(keys.len());
            let slots = self.read_wave(pool, &keys[pos..end], &sv, at, Some(&budget), pos == 0);
            for slot in slots {
                match slot {
                    Slot::Done(answer) => out.push(answer),
                    Slot::Waiting => out.push(Err(Error::Closed)),
                    Slot::Deferred => return out,
                }
            }
            pos = end;
            let held = budget.held.load(Relaxed);
            if held >= limit {
                break;
            }
            let largest = budget.largest.load(Relaxed).max(1);
            wave = ((limit - held) / largest).clamp(1, most);
        }
        out
    }

    /// Reads one wave of keys: the inline stages for each on this thread, the disk stages
    /// of the rest on the pool. `first`: `keys[0]` is the call's first key (its value is
    /// always kept).
    fn read_wave<K: AsRef<[u8]>>(
        self: &Arc<Self>,
        pool: &ReaderPool,
        keys: &[K],
        sv: &Arc<SuperVersion>,
        at: ReadPoint,
        budget: Option<&Budget>,
        first: bool,
    ) -> Vec<Slot> {
        let mut out: Vec<Slot> = Vec::with_capacity(keys.len());
        let mut pending = Vec::new();
        for (i, key) in keys.iter().enumerate() {
            match self.get_inline_for_batch(i, key.as_ref(), sv, at) {
                Ok(answer) => out.push(admit(Ok(answer), budget, first && i == 0)),
                Err(p) => {
                    out.push(Slot::Waiting);
                    pending.push(p);
                }
            }
        }
        if pending.len() > 1 && pool.uses_uring() {
            self.read_pending_together(keys, sv, at, pending, budget, first, &mut out);
            return out;
        }
        let queue = if pending.len() > 1 {
            pool.sender()
        } else {
            None
        };
        match queue {
            Some(queue) => {
                self.read_pending_in_pool(&queue, keys, sv, at, pending, budget, first, &mut out)
            }
            None => {
                for p in &pending {
                    let answer = self.get_pending(keys[p.index].as_ref(), sv, at, p);
                    out[p.index] = admit(answer, budget, first && p.index == 0);
                }
            }
        }
        out
    }

    /// Reads the pending keys on this thread through a [`Pipeline`]: every key's block
    /// reads go out as soon as it needs them and each key goes on as soon as its block is
    /// back (see the module doc). A key whose disk stages panic is answered
    /// `Error::Closed`, as a panicking pool job's would be.
    #[allow(clippy::too_many_arguments)]
    fn read_pending_together<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        sv: &SuperVersion,
        at: ReadPoint,
        pending: Vec<PendingKey>,
        budget: Option<&Budget>,
        first: bool,
        out: &mut [Slot],
    ) {
        let mut answer = |index: usize, a: Result<Option<Entry>>| {
            out[index] = admit(a, budget, first && index == 0);
        };
        let mut pipe: Pipeline<'_, usize> = Pipeline::new(self);
        for p in &pending {
            let g = self.disk_get(keys[p.index].as_ref(), sv, at, p);
            pipe.add(p.index, g, &mut answer);
        }
        while pipe.keys_in_flight() > 0 {
            pipe.turn(true, &mut answer);
        }
    }

    /// Streams point reads with up to `window` keys in flight on this thread (see
    /// [`crate::Db::get_pipelined_opt`]): each key entering takes a fresh read point and
    /// SuperVersion, so it is answered as a [`DbInner::get`] issued when it entered
    /// would answer it, and no long stream pins an old version. Through io_uring the
    /// keys' disk stages run in one [`Pipeline`]; with the reader pool, in windows of
    /// up to `window` keys read together on the pool.
    pub(super) fn get_pipelined<K, N, A>(
        self: &Arc<Self>,
        pool: &ReaderPool,
        ropts: &ReadOptions,
        window: usize,
        mut next_key: N,
        mut on_answer: A,
    ) where
        K: AsRef<[u8]>,
        N: FnMut() -> Option<K>,
        A: FnMut(K, Result<Option<Entry>>),
    {
        let window = window.max(1);
        if !pool.uses_uring() {
            return self.get_windows_in_pool(pool, ropts, window, next_key, on_answer);
        }
        let mut pipe: Pipeline<'_, K> = Pipeline::new(self);
        let mut point: StreamPoint = None;
        let mut ended = false;
        loop {
            while !ended && pipe.keys_in_flight() < window {
                let Some(k) = next_key() else {
                    ended = true;
                    break;
                };
                match self.enter_streamed_key(ropts, 0, k, &mut point) {
                    Entered::Answered(k, answer) => on_answer(k, answer),
                    Entered::Pending(k, sv, at, p) => {
                        let g = self.disk_get_owned(k.as_ref().to_vec(), sv, at, &p);
                        pipe.add(k, g, &mut on_answer);
                    }
                }
            }
            if pipe.keys_in_flight() == 0 {
                // The window was not full, so the stream ended.
                return;
            }
            pipe.turn(true, &mut on_answer);
        }
    }

    /// A key entering a stream: the read point a get issued now would take (shared with
    /// the stream's previous key while unchanged: `point`), then its stages that need no
    /// I/O (`index`: its place among the keys waiting for the disk).
    fn enter_streamed_key<K: AsRef<[u8]>>(
        &self,
        ropts: &ReadOptions,
        index: usize,
        k: K,
        point: &mut StreamPoint,
    ) -> Entered<K> {
        let (at, sv) = match self.start_streamed_read(ropts, point) {
            Ok(view) => view,
            Err(e) => {
                Counters::add(&self.counters.gets, 1);
                return Entered::Answered(k, Err(e));
            }
        };
        match self.get_inline_for_batch(index, k.as_ref(), &sv, at) {
            Ok(answer) => Entered::Answered(k, Ok(answer)),
            Err(p) => Entered::Pending(k, sv, at, p),
        }
    }

    /// [`DbInner::get_pipelined`] on the reader pool: keys enter (each with its own read
    /// point, its inline stages run at once) until `window` of them need the disk, then
    /// those are read together on the pool and the next window starts.
    fn get_windows_in_pool<K, N, A>(
        self: &Arc<Self>,
        pool: &ReaderPool,
        ropts: &ReadOptions,
        window: usize,
        mut next_key: N,
        mut on_answer: A,
    ) where
        K: AsRef<[u8]>,
        N: FnMut() -> Option<K>,
        A: FnMut(K, Result<Option<Entry>>),
    {
        let mut ended = false;
        let mut point: StreamPoint = None;
        while !ended {
            let mut waiting: Vec<(K, Arc<SuperVersion>, ReadPoint, PendingKey)> = Vec::new();
            while waiting.len() < window {
                let Some(k) = next_key() else {
                    ended = true;
                    break;
                };
                match self.enter_streamed_key(ropts, waiting.len(), k, &mut point) {
                    Entered::Answered(k, answer) => on_answer(k, answer),
                    // The pool's jobs run on other threads: each takes its own `Arc`.
                    Entered::Pending(k, sv, at, p) => waiting.push((k, Arc::clone(&sv), at, p)),
                }
            }
            let queue = if waiting.len() > 1 {
                pool.sender()
            } else {
                None
            };
            let Some(queue) = queue else {
                for (k, sv, at, p) in waiting {
                    let answer = self.get_pending(k.as_ref(), &sv, at, &p);
                    on_answer(k, answer);
                }
                continue;
            };
            let (answers, rx) = mpsc::channel::<(usize, Result<Option<Entry>>)>();
            let mut slots: Vec<Option<K>> = Vec::with_capacity(waiting.len());
            let mut queued = 0usize;
            for (i, (k, sv, at, p)) in waiting.into_iter().enumerate() {
                let db = self.clone();
                let key = k.as_ref().to_vec();
                slots.push(Some(k));
                let answers = answers.clone();
                let job: Job = Box::new(move || {
                    let answer = db.get_pending(&key, &sv, at, &p);
                    let _ = answers.send((i, answer));
                });
                if queue.send(job).is_ok() {
                    queued += 1;
                }
            }
            drop(answers);
            for _ in 0..queued {
                match rx.recv() {
                    Ok((i, answer)) => {
                        if let Some(k) = slots.get_mut(i).and_then(Option::take) {
                            on_answer(k, answer);
                        }
                    }
                    Err(mpsc::RecvError) => break,
                }
            }
            // A job the pool dropped unrun (it stopped) or that panicked.
            for k in slots.into_iter().flatten() {
                on_answer(k, Err(Error::Closed));
            }
        }
    }

    /// Queues every pending key but the first on the pool, reads the first on this
    /// thread, then collects the pool's answers. The pool's jobs are scoped to this call:
    /// it returns only once each has answered or dropped its sender.
    #[allow(clippy::too_many_arguments)]
    fn read_pending_in_pool<K: AsRef<[u8]>>(
        self: &Arc<Self>,
        queue: &mpsc::Sender<Job>,
        keys: &[K],
        sv: &Arc<SuperVersion>,
        at: ReadPoint,
        pending: Vec<PendingKey>,
        budget: Option<&Budget>,
        first: bool,
        out: &mut [Slot],
    ) {
        let (answers, rx) = mpsc::channel::<(usize, Result<Option<Entry>>)>();
        let mut pending = pending.into_iter();
        let mine = pending.next();
        let mut queued = 0usize;
        for p in pending {
            let index = p.index;
            let db = self.clone();
            let sv = sv.clone();
            let key = keys[index].as_ref().to_vec();
            let answers = answers.clone();
            let job: Job = Box::new(move || {
                let answer = db.get_pending(&key, &sv, at, &p);
                let _ = answers.send((index, answer));
            });
            // A send fails only when the pool stopped: the job comes back and is dropped,
            // and its key is answered `Error::Closed`.
            if queue.send(job).is_ok() {
                queued += 1;
            }
        }
        drop(answers);
        if let Some(p) = mine {
            let answer = self.get_pending(keys[p.index].as_ref(), sv, at, &p);
            out[p.index] = admit(answer, budget, first && p.index == 0);
        }
        // Each queued job sends once or drops its sender unsent: `recv` fails only after
        // every job finished one way or the other. A value is admitted (or dropped) as it
        // arrives, so no more than the budget's worth waits here.
        for _ in 0..queued {
            match rx.recv() {
                Ok((index, answer)) => out[index] = admit(answer, budget, first && index == 0),
                Err(mpsc::RecvError) => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The key of record `i` in [`cold_store`].
    fn key(i: u64) -> Vec<u8> {
        format!("key{i:06}").into_bytes()
    }

    /// A store of `n` records of 300 bytes compacted into 1 KiB blocks, with no block
    /// cache and io_uring reads on a fast tier of `device`, so every get of a record reads
    /// its block from disk. `None` where io_uring is unavailable and skips are allowed
    /// (`testing::require_io_uring`, which otherwise fails `test`, the caller's name).
    fn cold_store(
        test: &str,
        n: u64,
        device: crate::env::DeviceProfile,
    ) -> Option<(tempfile::TempDir, crate::db::Db)> {
        if !crate::testing::require_io_uring(&format!("db::multi_get::tests::{test}")) {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let opts = crate::options::Options {
            cache_size: 0,
            block_size: 1024,
            block_records: None,
            read_io: ReadIo::Uring,
            fast_device: device,
            ..crate::options::Options::default()
        };
        let db = crate::db::Db::open(dir.path(), opts).unwrap();
        for i in 0..n {
            db.put(key(i), vec![b'v'; 300]).unwrap();
        }
        db.compact_range(None, None).unwrap();
        db.wait_for_background().unwrap();
        Some((dir, db))
    }

    /// No hang: a job that panics drops its answer's sender (the waiter's `recv` fails
    /// instead of blocking), and the worker survives to run the next job.
    #[test]
    fn a_panicking_job_closes_its_answer_and_the_pool_keeps_working() {
        let pool = ReaderPool::new();
        pool.start(2, ReadIo::Threads).unwrap();
        let queue = pool.sender().expect("a pool of 2 runs");
        let (tx, rx) = mpsc::channel::<u32>();
        let job: Job = Box::new(move || {
            let _keep = tx;
            panic!("injected panic in a reader job");
        });
        queue.send(job).unwrap();
        assert!(rx.recv_timeout(Duration::from_secs(10)).is_err());
        for n in 0..4 {
            let (tx, rx) = mpsc::channel::<u32>();
            queue.send(Box::new(move || tx.send(n).unwrap())).unwrap();
            assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(n));
        }
        drop(queue);
        pool.stop();
        assert!(pool.sender().is_none(), "a stopped pool takes no jobs");
    }

    /// A pool of 1 starts no thread: its batches run on the caller's thread.
    #[test]
    fn a_pool_of_one_has_no_workers() {
        let pool = ReaderPool::new();
        pool.start(1, ReadIo::Threads).unwrap();
        assert!(pool.sender().is_none());
        assert!(pool.threads.lock().is_empty());
    }

    /// Many reads in flight from one thread: a batch of cold keys, each in its own block
    /// of one level (no cache), has its block reads submitted together (one
    /// `io_uring_enter` holding one read per key), and is answered correctly.
    #[test]
    fn a_batch_of_cold_keys_submits_its_block_reads_together() {
        let Some((_dir, db)) = cold_store(
            "a_batch_of_cold_keys_submits_its_block_reads_together",
            2000,
            crate::env::DeviceProfile::none(),
        ) else {
            return;
        };
        // Every 20th key: 20 records of 300 bytes span several 1 KiB blocks.
        let keys: Vec<Vec<u8>> = (0..32).map(|i| key(i * 20 + 7)).collect();
        let before = crate::env::thread_submissions();
        let answers = db.multi_get(&keys);
        let after = crate::env::thread_submissions();
        for a in &answers {
            assert_eq!(a.as_ref().unwrap().as_deref(), Some(&[b'v'; 300][..]));
        }
        assert_eq!(
            (
                after.submissions - before.submissions,
                after.reads - before.reads
            ),
            (1, 32),
            "one level, no cache: the 32 block reads went out with one submission"
        );
        assert!(after.most_in_flight >= 32);
    }

    /// No round barrier, counted: a stream of cold keys (one block read each, no cache)
    /// with a window of 8 submits new reads while earlier ones are still in flight (a
    /// round barrier delivers every read before the next submission, so it never does),
    /// and never has more than 8 reads in flight. A device model (2000 IOPS, 1 ms) spaces
    /// the reads' completions, so the result does not hang on how fast this disk is.
    #[test]
    fn a_stream_submits_new_reads_while_earlier_ones_are_in_flight() {
        let device = crate::env::DeviceProfile {
            iops: Some(2000),
            bandwidth: None,
            latency_us: 1000,
        };
        let Some((_dir, db)) = cold_store(
            "a_stream_submits_new_reads_while_earlier_ones_are_in_flight",
            4000,
            device,
        ) else {
            return;
        };
        let mut keys = (0..150u64).map(|i| key(i * 20 + 3));
        let before = crate::env::thread_submissions();
        let mut answered = 0;
        db.get_pipelined(
            8,
            || keys.next(),
            |_, a| {
                assert_eq!(a.unwrap().as_deref(), Some(&[b'v'; 300][..]));
                answered += 1;
            },
        );
        let after = crate::env::thread_submissions();
        assert_eq!(answered, 150);
        assert_eq!(after.reads - before.reads, 150, "one block read per key");
        assert!(
            after.while_outstanding > before.while_outstanding,
            "every submission waited for the reads before it: a round barrier"
        );
        assert!(
            after.most_in_flight <= 8,
            "{} reads in flight",
            after.most_in_flight
        );
    }

    /// A block already in flight is not read twice: ten keys of a stream needing one
    /// cold block (the same key ten times, no cache) share one read, and each is answered.
    #[test]
    fn keys_needing_a_block_in_flight_join_its_read() {
        let Some((_dir, db)) = cold_store(
            "keys_needing_a_block_in_flight_join_its_read",
            2000,
            crate::env::DeviceProfile::none(),
        ) else {
            return;
        };
        let mut keys = std::iter::repeat_n(key(501), 10);
        let before = crate::env::thread_submissions();
        let mut answered = 0;
        db.get_pipelined(
            16,
            || keys.next(),
            |_, a| {
                assert_eq!(a.unwrap().as_deref(), Some(&[b'v'; 300][..]));
                answered += 1;
            },
        );
        let after = crate::env::thread_submissions();
        assert_eq!(answered, 10);
        assert_eq!(after.reads - before.reads, 1, "one read for the ten keys");
    }
}

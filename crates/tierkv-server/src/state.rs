//! State shared by every connection (the store, configuration, counters, the client registry,
//! SCAN cursors, the cached key count, the keys blocked clients wait on) and the
//! per-connection state that commands change.

use crate::client::ClientInfo;
use crate::config::ServerConfig;
use crate::resp::{Proto, ReplyWriter};
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tierkv::Db;

/// Server-wide counters reported by INFO.
#[derive(Default)]
pub(crate) struct ServerStats {
    pub connections_received: AtomicU64,
    pub connections_rejected: AtomicU64,
    pub commands: AtomicU64,
    pub protocol_errors: AtomicU64,
    pub keyspace_hits: AtomicU64,
    pub keyspace_misses: AtomicU64,
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    /// Field records of expired hashes removed by the sweep.
    pub hash_fields_swept: AtomicU64,
    /// Bytes currently held in connection read buffers (memory accounting for INFO).
    pub query_buffer_bytes: AtomicUsize,
    /// The counters sampled every [`RATE_SAMPLE_INTERVAL`], the last [`RATE_SAMPLES`]
    /// (INFO's `instantaneous_*` rates).
    pub samples: Mutex<VecDeque<RateSample>>,
    /// Most memory INFO's `used_memory` has been seen at (sampled every second).
    pub peak_memory: AtomicU64,
}

/// Time between two samples of the counters.
pub(crate) const RATE_SAMPLE_INTERVAL: Duration = Duration::from_millis(100);
/// Samples kept (Redis's 16: the rates cover the last 1.6 s).
pub(crate) const RATE_SAMPLES: usize = 16;

/// The counters at one instant.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RateSample {
    pub at: Instant,
    pub commands: u64,
    pub net_in: u64,
    pub net_out: u64,
}

impl ServerStats {
    pub fn bump(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Relaxed);
    }

    /// Takes a sample of the counters (keeping the last [`RATE_SAMPLES`]).
    pub fn sample(&self) {
        let mut samples = self.samples.lock();
        samples.push_back(RateSample {
            at: Instant::now(),
            commands: self.commands.load(Relaxed),
            net_in: self.net_input_bytes.load(Relaxed),
            net_out: self.net_output_bytes.load(Relaxed),
        });
        while samples.len() > RATE_SAMPLES {
            samples.pop_front();
        }
    }

    /// Per second over the samples kept: commands, input bytes, output bytes.
    pub fn rates(&self) -> (f64, f64, f64) {
        let samples = self.samples.lock();
        let (Some(a), Some(b)) = (samples.front(), samples.back()) else {
            return (0.0, 0.0, 0.0);
        };
        let secs = b.at.duration_since(a.at).as_secs_f64();
        if secs <= 0.0 {
            return (0.0, 0.0, 0.0);
        }
        let per = |x: u64, y: u64| y.saturating_sub(x) as f64 / secs;
        (
            per(a.commands, b.commands),
            per(a.net_in, b.net_in),
            per(a.net_out, b.net_out),
        )
    }

    /// CONFIG RESETSTAT: the counters back to 0 (the gauges stay).
    pub fn reset(&self) {
        for c in [
            &self.connections_received,
            &self.connections_rejected,
            &self.commands,
            &self.protocol_errors,
            &self.keyspace_hits,
            &self.keyspace_misses,
            &self.net_input_bytes,
            &self.net_output_bytes,
            &self.hash_fields_swept,
        ] {
            c.store(0, Relaxed);
        }
        self.samples.lock().clear();
        self.peak_memory.store(0, Relaxed);
    }
}

/// Bounded table of SCAN cursors. Real clients (redis-cli, redis-rs) parse a SCAN cursor
/// as an unsigned 64-bit number, so the resume key cannot travel in the cursor itself; the
/// cursor is an opaque id of the key the next call resumes at. Old entries are evicted
/// first-in first-out when the count or byte bound is hit; a cursor is not removed on use,
/// so a client may retry a call.
pub(crate) struct Cursors {
    map: HashMap<u64, Vec<u8>>,
    order: VecDeque<u64>,
    bytes: usize,
    counter: u64,
    salt: u64,
}

/// Most live cursors.
pub(crate) const MAX_CURSORS: usize = 64 * 1024;
/// Most bytes of resume keys held by live cursors.
pub(crate) const MAX_CURSOR_BYTES: usize = 64 * 1024 * 1024;

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Cursors {
    pub fn new() -> Self {
        // Ids from different server runs should not collide, so a stale cursor from before a
        // restart is reported invalid instead of resuming somewhere unrelated.
        let salt = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
            ^ ((std::process::id() as u64) << 32);
        Cursors {
            map: HashMap::new(),
            order: VecDeque::new(),
            bytes: 0,
            counter: 0,
            salt,
        }
    }

    /// Stores a resume key and returns its cursor (never 0: 0 means "start" and "done").
    pub fn insert(&mut self, key: Vec<u8>) -> u64 {
        let id = loop {
            self.counter += 1;
            // Bijective mixing: distinct counters give distinct ids within one run.
            let id = splitmix64(self.counter ^ self.salt);
            if id != 0 && !self.map.contains_key(&id) {
                break id;
            }
        };
        self.bytes += key.len();
        self.map.insert(id, key);
        self.order.push_back(id);
        while self.order.len() > MAX_CURSORS || self.bytes > MAX_CURSOR_BYTES {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(k) = self.map.remove(&old) {
                self.bytes -= k.len();
            }
        }
        id
    }

    /// The resume key of a cursor, if it is still known.
    pub fn get(&self, id: u64) -> Option<Vec<u8>> {
        self.map.get(&id).cloned()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }
}

/// How long INFO reuses a key count taken before later writes: monitoring tools poll INFO
/// every second or so, and a full scan of a large store (slow tier included) must not run
/// that often.
pub(crate) const INFO_KEYS_MAX_AGE: Duration = Duration::from_secs(60);
/// DBSIZE reuses a count taken before later writes for this many times the scan took, so
/// that a client polling it keeps the server scanning at most a tenth of the time...
pub(crate) const DBSIZE_SCAN_SHARE: u32 = 10;
/// ... but only a count whose scan took at least this long: a smaller store (up to tens of
/// thousands of keys) is counted again after every write, so its DBSIZE is exact, as the
/// Redis test suite expects right after deleting keys.
pub(crate) const DBSIZE_EXACT_BELOW: Duration = Duration::from_millis(10);

/// How stale a reused key count may be when writes came after it (see
/// [`Shared::key_count`]).
#[derive(Clone, Copy, Debug)]
pub(crate) enum CountReuse {
    /// For up to [`DBSIZE_SCAN_SHARE`] times the time its scan took, if that was at least
    /// [`DBSIZE_EXACT_BELOW`].
    ScanCost,
    /// For up to this age.
    MaxAge(Duration),
}

/// A key count and what it knew (see [`Shared::key_count`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct CountedKeys {
    pub at: Instant,
    pub took: Duration,
    /// The store's latest sequence number during the whole scan (`None`: writes came
    /// while it ran).
    pub seq: Option<u64>,
    pub n: KeyCount,
}

/// A counted key space (see [`Shared::key_count`]).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct KeyCount {
    /// Keys of every type.
    pub keys: u64,
    /// Keys with a deadline (INFO keyspace's `expires`).
    pub expiring: u64,
}

/// Everything connections share.
pub(crate) struct Shared {
    /// The store; replaced whole when a replica loads its primary's copy
    /// (`replication::replica`). Read it through [`Shared::db`].
    store: arc_swap::ArcSwap<Db>,
    /// The configuration; CONFIG SET swaps in a changed copy.
    pub config: arc_swap::ArcSwap<ServerConfig>,
    pub started: Instant,
    pub started_unix: u64,
    pub next_client_id: AtomicU64,
    pub clients: Mutex<HashMap<u64, Arc<ClientInfo>>>,
    pub stats: ServerStats,
    pub cursors: Mutex<Cursors>,
    /// Last key count.
    pub key_count: Mutex<Option<CountedKeys>>,
    /// Serialises counting so concurrent DBSIZE calls share one scan.
    pub counting: Mutex<()>,
    pub shutdown: Arc<tokio::sync::watch::Sender<bool>>,
    /// The port actually bound (differs from the configured one when that is 0).
    pub port: u16,
    /// Hands out hash versions (see `keyspace`).
    pub versions: crate::keyspace::Versions,
    /// Where the next expired-hash sweep step resumes.
    pub sweep_cursor: Mutex<Vec<u8>>,
    /// Isolates EXEC: a pipeline's store commands run holding it shared, a transaction's
    /// queued commands holding it exclusively, so no other client's command runs between
    /// them (Redis runs EXEC's commands as one step of its single thread).
    pub transactions: parking_lot::RwLock<()>,
    /// The keys blocked clients (BLPOP ...) wait on.
    pub blocked_keys: BlockedKeys,
    /// CLIENT PAUSE in effect (None: none).
    pub pause: tokio::sync::watch::Sender<Option<Pause>>,
    /// The slow log and the latency monitor.
    pub monitor: crate::slowlog::Monitor,
    /// BGSAVE/SAVE's checkpoints.
    pub saves: Arc<crate::backup::Saves>,
    /// Pub/sub subscriptions.
    pub pubsub: Arc<crate::pubsub::PubSub>,
    /// Replication: this server's role, its replicas, its link to its primary.
    pub replication: crate::replication::Replication,
    /// This state's own `Arc` (for the tasks replication starts).
    me: std::sync::Weak<Shared>,
}

/// A CLIENT PAUSE: until when, and whether it holds every command or only writes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pause {
    pub until: Instant,
    pub all: bool,
}

impl Shared {
    /// The store as of now (a command holds it for its duration).
    pub fn db(&self) -> arc_swap::Guard<Arc<Db>> {
        self.store.load()
    }

    /// Puts `db` in the store's place; returns the one it replaces.
    pub fn replace_db(&self, db: Arc<Db>) -> Arc<Db> {
        self.store.swap(db)
    }

    pub fn new(
        db: Arc<Db>,
        config: ServerConfig,
        port: u16,
        shutdown: Arc<tokio::sync::watch::Sender<bool>>,
        versions: crate::keyspace::Versions,
        me: std::sync::Weak<Shared>,
    ) -> Self {
        let replication = crate::replication::Replication::new(&db, config.replicaof.is_some());
        let started_unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Shared {
            store: arc_swap::ArcSwap::new(db),
            config: arc_swap::ArcSwap::from_pointee(config),
            started: Instant::now(),
            started_unix,
            next_client_id: AtomicU64::new(1),
            clients: Mutex::new(HashMap::new()),
            stats: ServerStats::default(),
            cursors: Mutex::new(Cursors::new()),
            key_count: Mutex::new(None),
            counting: Mutex::new(()),
            shutdown,
            port,
            versions,
            sweep_cursor: Mutex::new(Vec::new()),
            transactions: parking_lot::RwLock::new(()),
            blocked_keys: BlockedKeys::default(),
            pause: tokio::sync::watch::Sender::new(None),
            monitor: crate::slowlog::Monitor::default(),
            saves: Arc::new(crate::backup::Saves::starting_at(started_unix)),
            pubsub: Arc::default(),
            replication,
            me,
        }
    }

    /// A server's state over `db` with `config` for unit tests (no listener, no tasks).
    #[cfg(test)]
    pub fn for_test(db: Db, config: ServerConfig) -> Shared {
        let versions = crate::keyspace::open(&db).unwrap_or_else(|e| panic!("{e}"));
        let (tx, _) = tokio::sync::watch::channel(false);
        Shared::new(
            Arc::new(db),
            config,
            6390,
            Arc::new(tx),
            versions,
            std::sync::Weak::new(),
        )
    }

    /// This state as replication's [`crate::replication::Host`] (None while the server
    /// is being torn down).
    pub fn host(&self) -> Option<Arc<dyn crate::replication::Host>> {
        self.me
            .upgrade()
            .map(|s| s as Arc<dyn crate::replication::Host>)
    }

    /// Asks the server to shut down gracefully.
    pub fn request_shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// One bounded step of the expired-hash sweep (`keyspace::sweep`).
    pub fn sweep_step(&self) -> tierkv::Result<()> {
        // A replica writes only what its primary sends (the primary's sweep included).
        if self.replication.is_replica() {
            return Ok(());
        }
        let wopts = tierkv::WriteOptions {
            sync: self.config.load().sync,
        };
        let mut cursor = self.sweep_cursor.lock();
        let n = crate::keyspace::sweep(&self.db(), &wopts, &mut cursor)?;
        ServerStats::bump(&self.stats.hash_fields_swept, n);
        Ok(())
    }

    /// Forgets the cached key count (after FLUSHDB).
    pub fn forget_key_count(&self) {
        *self.key_count.lock() = None;
    }

    /// The number of keys, with the age of the count. A count is reused while nothing was
    /// written since it was taken (it is then exact, but for keys that expired since, which
    /// it still counts as Redis counts expired keys it has not reclaimed yet; the store
    /// keeps no running count, as a blind SET does not know whether its key existed), and
    /// after later writes only as long as `reuse` allows; otherwise the keys are counted by
    /// a full scan.
    pub fn key_count(&self, reuse: CountReuse) -> tierkv::Result<(KeyCount, Duration)> {
        let usable = |c: &CountedKeys| {
            let age = c.at.elapsed();
            c.seq == Some(self.db().latest_sequence())
                || match reuse {
                    CountReuse::ScanCost => {
                        c.took >= DBSIZE_EXACT_BELOW && age < c.took * DBSIZE_SCAN_SHARE
                    }
                    CountReuse::MaxAge(max) => age < max,
                }
        };
        if let Some(c) = self.key_count.lock().filter(usable) {
            return Ok((c.n, c.at.elapsed()));
        }
        let _one_at_a_time = self.counting.lock();
        if let Some(c) = self.key_count.lock().filter(usable) {
            return Ok((c.n, c.at.elapsed()));
        }
        let at = Instant::now();
        let seq = self.db().latest_sequence();
        // A full scan must not evict the working set from the block cache.
        let ropts = tierkv::ReadOptions {
            fill_cache: false,
            lower_bound: Some(vec![crate::keyspace::META]),
            upper_bound: Some(vec![crate::keyspace::META + 1]),
            ..tierkv::ReadOptions::new()
        };
        let mut it = self.db().iter_opt(&ropts)?;
        it.seek_to_first()?;
        let mut n = KeyCount::default();
        while it.valid() {
            n.keys += 1;
            n.expiring += it.deadline().is_some() as u64;
            it.next()?;
        }
        let counted = CountedKeys {
            at,
            took: at.elapsed(),
            seq: (self.db().latest_sequence() == seq).then_some(seq),
            n,
        };
        *self.key_count.lock() = Some(counted);
        Ok((n, at.elapsed()))
    }
}

/// The rest of a reply too large to produce at once (see `commands::run_pipeline`).
pub(crate) trait Resume: Send {
    /// Writes more of the reply, until it is complete (returns `None`) or `out` holds at
    /// least `chunk` bytes (returns what is left).
    fn resume(
        self: Box<Self>,
        shared: &Shared,
        out: &mut ReplyWriter,
        chunk: usize,
    ) -> Option<Box<dyn Resume>>;
}

/// Produces the elements `*next..len` of a reply with `one`, stopping after an element once
/// `out` holds `chunk` bytes: true when elements are left (the caller hands itself back as
/// the rest of the reply), false when the reply is complete or passed the hard limit.
pub(crate) fn produce_in_steps(
    next: &mut usize,
    len: usize,
    out: &mut ReplyWriter,
    chunk: usize,
    mut one: impl FnMut(usize, &mut ReplyWriter),
) -> bool {
    while *next < len {
        one(*next, out);
        *next += 1;
        if out.overflowed() {
            return false;
        }
        if out.len() >= chunk && *next < len {
            return true;
        }
    }
    false
}

/// Per-connection state that commands read and change. Moved into the blocking task that
/// runs a pipeline and handed back, so no lock is needed.
pub(crate) struct ConnState {
    pub info: Arc<ClientInfo>,
    pub authed: bool,
    pub proto: Proto,
    /// The rest of a reply that stopped at the output bound (an MGET half sent): it runs
    /// before any further command of this connection.
    pub resume: Option<Box<dyn Resume>>,
    /// Failed AUTH attempts on this connection (throttled, then the connection is closed).
    pub auth_failures: u32,
    /// The transaction being queued, between MULTI and EXEC or DISCARD.
    pub multi: Option<Multi>,
    /// The keys WATCHed since the last EXEC, DISCARD or UNWATCH.
    pub watched: Vec<Watched>,
    /// Running EXEC's queued commands: a blocking command does not block.
    pub in_exec: bool,
    /// The blocking command this connection waits on (its later commands wait too).
    pub blocked: Option<Blocked>,
    /// Set when a blocked command runs again: its deadline, and whether it passed.
    pub unblocked: Option<Unblocked>,
    /// CLIENT REPLY: whether the next commands' replies are sent.
    pub replies: Replies,
    /// Pub/sub channels and patterns subscribed to, and the queue of their messages.
    pub subscriptions: Option<crate::pubsub::Subscriptions>,
    /// The port a replica said it serves on (`REPLCONF listening-port`).
    pub repl_port: u16,
    /// A replica's `PSYNC`: the connection becomes its replication stream.
    pub psync: Option<crate::replication::primary::Psync>,
    /// A `WAIT` to answer once enough replicas acknowledged (its later commands wait).
    pub wait: Option<WaitFor>,
}

/// What a `WAIT` waits for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WaitFor {
    /// The sequence the replicas must have acknowledged.
    pub offset: u64,
    pub replicas: usize,
    pub deadline: Option<Instant>,
}

impl ConnState {
    /// In Redis's subscribed mode: subscriptions over RESP2, where only (un)subscribing,
    /// PING, QUIT and RESET may run.
    pub fn subscribed_mode(&self) -> bool {
        self.proto == Proto::Resp2
            && self
                .subscriptions
                .as_ref()
                .is_some_and(|s| s.count() + s.shard_channels.len() > 0)
    }
}

/// CLIENT REPLY's modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Replies {
    On,
    Off,
    /// Off for the next command only.
    Skip,
}

impl ConnState {
    /// A new connection's state (authenticated already when no password is set).
    pub fn new(info: Arc<ClientInfo>, authed: bool) -> ConnState {
        ConnState {
            info,
            authed,
            proto: Proto::Resp2,
            resume: None,
            auth_failures: 0,
            multi: None,
            watched: Vec::new(),
            in_exec: false,
            blocked: None,
            unblocked: None,
            replies: Replies::On,
            subscriptions: None,
            repl_port: 0,
            psync: None,
            wait: None,
        }
    }
}

/// A transaction's queued commands.
#[derive(Default)]
pub(crate) struct Multi {
    pub queued: Vec<crate::resp::Args>,
    /// A command was refused while queuing (unknown, wrong arity): EXEC aborts.
    pub failed: bool,
}

/// A WATCHed key: the store's sequence number when it was watched, and whether the key
/// existed then (a key that expired since counts as changed, as in Redis).
pub(crate) struct Watched {
    pub key: bytes::Bytes,
    pub since: u64,
    pub existed: bool,
}

/// A connection blocked in BLPOP (or another blocking command) on empty lists.
pub(crate) struct Blocked {
    /// The command, run again when woken.
    pub args: crate::resp::Args,
    /// The keys registered in [`BlockedKeys`] for it.
    pub keys: Vec<bytes::Bytes>,
    /// When it gives up (None: never).
    pub deadline: Option<Instant>,
    /// Notified by a push to one of the keys.
    pub wake: Arc<tokio::sync::Notify>,
}

/// What a blocked command learns when it runs again.
pub(crate) struct Unblocked {
    pub deadline: Option<Instant>,
    /// The deadline passed (or CLIENT UNBLOCK ... TIMEOUT): answer now, whatever the
    /// lists hold.
    pub timed_out: bool,
    /// CLIENT UNBLOCK ... ERROR: answer with the UNBLOCKED error.
    pub error: bool,
}

/// A blocked connection's id and wake-up.
type Waiter = (u64, Arc<tokio::sync::Notify>);

/// The keys blocked clients wait on: key -> the waiting connections' wake-ups, in the
/// order they blocked. A push to a waited key wakes every client waiting on it; each runs
/// its command again, and those that find the list empty again block again. A waiter is
/// registered before its command first looks at the lists, and a pusher looks for waiters
/// after its write applied, both under the one lock: either the pusher sees the waiter or
/// the waiter's look sees the push, so no push is missed.

#[derive(Default)]
pub(crate) struct BlockedKeys {
    waiting: Mutex<HashMap<Vec<u8>, Vec<Waiter>>>,
    /// Connections blocked (INFO's `blocked_clients`).
    pub clients: AtomicUsize,
}

impl BlockedKeys {
    /// Registers client `id` as waiting on `keys`; returns the wake-up a push notifies.
    pub fn watch(&self, id: u64, keys: &[bytes::Bytes]) -> Arc<tokio::sync::Notify> {
        let wake = Arc::new(tokio::sync::Notify::new());
        let mut w = self.waiting.lock();
        for k in keys {
            let waiters = w.entry(k.to_vec()).or_default();
            if !waiters.iter().any(|(c, _)| *c == id) {
                waiters.push((id, wake.clone()));
            }
        }
        wake
    }

    /// Removes client `id`'s registrations on `keys`.
    pub fn unwatch(&self, id: u64, keys: &[bytes::Bytes]) {
        let mut w = self.waiting.lock();
        for k in keys {
            if let Some(waiters) = w.get_mut(k.as_ref()) {
                waiters.retain(|(c, _)| *c != id);
                if waiters.is_empty() {
                    w.remove(k.as_ref());
                }
            }
        }
    }

    /// Wakes the clients waiting on `key` (called after a write that gave it elements
    /// applied).
    pub fn pushed(&self, key: &[u8]) {
        if let Some(waiters) = self.waiting.lock().get(key) {
            for (_, wake) in waiters {
                wake.notify_one();
            }
        }
    }
}

impl crate::replication::Host for Shared {
    fn db(&self) -> Arc<Db> {
        self.store.load_full()
    }

    fn replication(&self) -> &crate::replication::Replication {
        &self.replication
    }

    fn config(&self) -> Arc<ServerConfig> {
        self.config.load_full()
    }

    fn pause_commands(&self) -> parking_lot::RwLockWriteGuard<'_, ()> {
        self.transactions.write()
    }

    fn install_db(&self, db: Db) -> Result<(), String> {
        let versions = crate::keyspace::open(&db)?;
        self.versions.adopt(versions);
        self.replace_db(Arc::new(db));
        self.forget_key_count();
        Ok(())
    }

    fn port(&self) -> u16 {
        self.port
    }

    fn stopping(&self) -> tokio::sync::watch::Receiver<bool> {
        self.shutdown.subscribe()
    }
}

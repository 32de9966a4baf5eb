//! Replication: a primary's replicas hold its store, sequence number for sequence number,
//! and its hot set (docs/DEPLOYMENT.md, "Replication"; the stream's bytes in
//! docs/FORMAT.md).
//!
//! A replica (`REPLICAOF host port`) asks its primary with `PSYNC replid offset`, where
//! the offset is the sequence number of its latest write. The primary continues from
//! there when that is a point of its own history still in its change feed (its WALs and
//! their in-memory tail); otherwise it sends a checkpoint of its store (both tiers, the
//! hotness tracker's state included), which the replica opens in place of its own. Then
//! it streams every write batch (applied on the replica with the same sequence numbers,
//! `Db::apply_change`, so offsets are sequence numbers on both sides), the keys its
//! readers touched (read again on the replica, so its tracker and fast disk follow the
//! primary's), and a ping each second. The replica acknowledges what it applied; `WAIT`
//! counts those acknowledgements.
//!
//! Replication ids follow Redis's PSYNC2: a store's history is named by its `replid`; a
//! promoted replica (`REPLICAOF NO ONE`) and a restarted primary take a new one and keep
//! the old as `replid2` up to the offset where the histories part (`second_offset`), so a
//! replica of the old history continues when it is not ahead of that point, and copies
//! the store whole when it is. The id is kept in the store's directory (`REPLID`).
//!
//! Owns the replication state, the protocol and the store swap on a full copy; reaches
//! the server only through [`Host`] (implemented by the shared state), so it knows no
//! connection handling.

pub(crate) mod primary;
pub(crate) mod replica;
pub(crate) mod wire;

use crate::config::ServerConfig;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use tierkv::Db;

/// What replication needs of the server.
pub(crate) trait Host: Send + Sync + 'static {
    /// The store as of now.
    fn db(&self) -> Arc<Db>;
    /// The replication state.
    fn replication(&self) -> &Replication;
    /// The configuration as of now.
    fn config(&self) -> Arc<ServerConfig>;
    /// Holds every command of every client until dropped (a store swap).
    fn pause_commands(&self) -> parking_lot::RwLockWriteGuard<'_, ()>;
    /// Serves `db` from now on (its keyspace checked and loaded), in the place of the
    /// store it replaces.
    fn install_db(&self, db: Db) -> Result<(), String>;
    /// The port this server listens on (a replica tells its primary).
    fn port(&self) -> u16;
    /// Becomes true when the server stops.
    fn stopping(&self) -> tokio::sync::watch::Receiver<bool>;
}

/// The id of no history (Redis's forty zeros).
pub(crate) const NO_ID: &str = "0000000000000000000000000000000000000000";
/// The file in the store's fast directory keeping its replication id.
const ID_FILE: &str = "REPLID";

/// A new replication id: forty random hex digits.
fn new_id() -> String {
    let mut s = String::with_capacity(40);
    for _ in 0..20 {
        let _ = write!(s, "{:02x}", rand::random::<u8>());
    }
    s
}

/// The histories this store can continue.
#[derive(Clone, Debug)]
struct Ids {
    replid: String,
    replid2: String,
    /// The last offset shared with `replid2`'s history (-1: none).
    second_offset: i64,
    /// The store holds `replid`'s history (false for a replica before its first copy).
    known: bool,
}

/// A replica's link to its primary.
pub(crate) struct PrimaryLink {
    pub host: String,
    pub port: u16,
    pub status: LinkStatus,
    pub down_since: Instant,
    pub last_io: Instant,
    /// Bytes of the copy received so far (while `status` is `Sync`).
    pub copy_bytes: u64,
    generation: u64,
    task: tokio::task::AbortHandle,
}

/// Where a replica's link stands (ROLE's words).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LinkStatus {
    Connect,
    Connecting,
    Sync,
    Connected,
}

impl LinkStatus {
    fn word(self) -> &'static str {
        match self {
            LinkStatus::Connect => "connect",
            LinkStatus::Connecting => "connecting",
            LinkStatus::Sync => "sync",
            LinkStatus::Connected => "connected",
        }
    }
}

/// A replica connected to this server.
#[derive(Clone, Debug)]
pub(crate) struct ReplicaState {
    pub ip: String,
    pub port: u16,
    /// Its latest acknowledged sequence.
    pub ack: u64,
    pub ack_at: Instant,
    /// Streaming changes (false while its copy is made and sent).
    pub online: bool,
}

/// The replication state of one server.
pub(crate) struct Replication {
    ids: Mutex<Ids>,
    id_file: Mutex<PathBuf>,
    link: Mutex<Option<PrimaryLink>>,
    /// `link.is_some()`, read by every command without the lock.
    following: std::sync::atomic::AtomicBool,
    generations: std::sync::atomic::AtomicU64,
    /// Connected replicas by client id.
    pub(crate) replicas: Mutex<BTreeMap<u64, ReplicaState>>,
    /// Woken at every acknowledgement (WAIT).
    pub(crate) acks: tokio::sync::Notify,
    /// The primary's readers' keys, for every replica's sender.
    pub(crate) hot: tokio::sync::broadcast::Sender<Arc<Vec<u8>>>,
    /// Replicas served, by how they started (INFO stats).
    pub(crate) syncs: SyncCounts,
    /// This process's id (INFO's `run_id`: Sentinel tells a restart by it).
    pub(crate) run_id: String,
}

/// Redis's `sync_full`, `sync_partial_ok`, `sync_partial_err`: replicas given a copy,
/// continued, and given a copy although they asked to continue.
#[derive(Default)]
pub(crate) struct SyncCounts {
    pub full: std::sync::atomic::AtomicU64,
    pub partial_ok: std::sync::atomic::AtomicU64,
    pub partial_err: std::sync::atomic::AtomicU64,
}

impl Replication {
    /// The state of a server whose store is `db`, a replica when `replica` (then it
    /// follows the history its id file names), else a primary: a new history, continuing
    /// the one the file names up to the store's latest write.
    pub fn new(db: &Db, replica: bool) -> Replication {
        let id_file = db.tier_dir(tierkv::Tier::Fast).join(ID_FILE);
        let stored = read_id(&id_file);
        let ids = match (replica, stored) {
            (true, Some(id)) => Ids {
                replid: id,
                replid2: NO_ID.into(),
                second_offset: -1,
                known: true,
            },
            (true, None) => Ids {
                replid: new_id(),
                replid2: NO_ID.into(),
                second_offset: -1,
                known: false,
            },
            (false, stored) => Ids {
                replid: new_id(),
                second_offset: stored.as_ref().map_or(-1, |_| db.latest_sequence() as i64),
                replid2: stored.unwrap_or_else(|| NO_ID.into()),
                known: true,
            },
        };
        let r = Replication {
            ids: Mutex::new(ids),
            id_file: Mutex::new(id_file),
            link: Mutex::new(None),
            following: Default::default(),
            generations: Default::default(),
            replicas: Mutex::new(BTreeMap::new()),
            acks: tokio::sync::Notify::new(),
            hot: tokio::sync::broadcast::channel(64).0,
            syncs: SyncCounts::default(),
            run_id: new_id(),
        };
        r.save_id();
        r
    }

    fn save_id(&self) {
        let ids = self.ids.lock().clone();
        if !ids.known {
            return;
        }
        let path = self.id_file.lock().clone();
        if let Err(e) = write_id(&path, &ids.replid) {
            tracing::warn!(
                "could not keep the replication id in {}: {e}",
                path.display()
            );
        }
    }

    /// True while this server follows a primary (and refuses writes from clients).
    pub fn is_replica(&self) -> bool {
        self.following.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The current replication id.
    pub fn replid(&self) -> String {
        self.ids.lock().replid.clone()
    }

    /// Whether a replica at `offset` of history `replid` can continue from this store,
    /// whose latest write is `latest` (the changes it needs may still be gone).
    pub fn can_continue(&self, replid: &str, offset: u64, latest: u64) -> bool {
        let ids = self.ids.lock();
        offset <= latest
            && ((replid == ids.replid && ids.known)
                || (replid == ids.replid2 && offset as i64 <= ids.second_offset))
    }

    /// PSYNC's arguments for a replica whose latest write is `latest`.
    pub fn psync_args(&self, latest: u64) -> (String, String) {
        let ids = self.ids.lock();
        if ids.known {
            (ids.replid.clone(), latest.to_string())
        } else {
            ("?".into(), "-1".into())
        }
    }

    /// The store now holds `replid`'s history (after a full copy, or a continuation under
    /// a new id: the old one is kept as the second, up to `offset`).
    pub fn follow_history(&self, replid: &str, offset: u64, copied: bool) {
        {
            let mut ids = self.ids.lock();
            if copied || !ids.known {
                ids.replid2 = NO_ID.into();
                ids.second_offset = -1;
            } else if ids.replid != replid {
                ids.replid2 = std::mem::replace(&mut ids.replid, replid.into());
                ids.second_offset = offset as i64;
            }
            ids.replid = replid.into();
            ids.known = true;
        }
        self.save_id();
    }

    /// The store is being replaced by a copy (a `+FULLRESYNC`): until the copy is loaded
    /// it holds no history a primary continues, and offers none (its offset reads 0, so
    /// Sentinel never prefers it, and an interrupted copy starts again).
    pub fn forget_history(&self) {
        self.ids.lock().known = false;
        let path = self.id_file.lock().clone();
        if let Err(e) = std::fs::remove_file(&path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!("could not remove {}: {e}", path.display());
            }
        }
    }

    /// The offset a replica reports: its latest write's sequence while its store holds the
    /// history it follows, else 0.
    fn replica_offset(&self, latest: u64) -> u64 {
        if self.ids.lock().known {
            latest
        } else {
            0
        }
    }

    /// Points the id file at a new store directory (after a full copy replaced it).
    pub fn moved_to(&self, dir: &Path) {
        *self.id_file.lock() = dir.join(ID_FILE);
        self.save_id();
    }

    /// Starts following `host:port` (stopping any link before it); the link's task runs
    /// on the current runtime.
    pub fn start_following(&self, server: Arc<dyn Host>, host: String, port: u16) {
        let generation = self
            .generations
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        let task = tokio::runtime::Handle::current()
            .spawn(replica::follow(
                server.clone(),
                host.clone(),
                port,
                generation,
            ))
            .abort_handle();
        let now = Instant::now();
        let old = self.link.lock().replace(PrimaryLink {
            host,
            port,
            status: LinkStatus::Connect,
            down_since: now,
            last_io: now,
            copy_bytes: 0,
            generation,
            task,
        });
        self.following
            .store(true, std::sync::atomic::Ordering::Release);
        if let Some(old) = old {
            old.task.abort();
        }
        // A replica serves no replicas of its own: they reconnect and find it refusing.
        self.replicas.lock().clear();
    }

    /// Stops following (REPLICAOF NO ONE): this store starts a new history, continuing
    /// the one it followed up to `latest`. False when it followed none.
    pub fn stop_following(&self, latest: u64) -> bool {
        let Some(link) = self.link.lock().take() else {
            return false;
        };
        self.following
            .store(false, std::sync::atomic::Ordering::Release);
        link.task.abort();
        {
            let mut ids = self.ids.lock();
            if ids.known {
                ids.replid2 = std::mem::replace(&mut ids.replid, new_id());
                ids.second_offset = latest as i64;
            } else {
                ids.replid = new_id();
                ids.known = true;
            }
        }
        self.save_id();
        true
    }

    /// Stops the link's task (the server stops), keeping the history followed for the
    /// next start.
    pub fn shutdown(&self) {
        if let Some(link) = self.link.lock().as_ref() {
            link.task.abort();
        }
    }

    /// The primary this server follows.
    pub fn primary(&self) -> Option<(String, u16)> {
        self.link.lock().as_ref().map(|l| (l.host.clone(), l.port))
    }

    /// Updates the link of `generation` (a stopped link's task changes nothing).
    pub(crate) fn set_link(&self, generation: u64, f: impl FnOnce(&mut PrimaryLink)) -> bool {
        match self.link.lock().as_mut() {
            Some(l) if l.generation == generation => {
                f(l);
                true
            }
            _ => false,
        }
    }

    /// Replicas whose acknowledged offset is at least `offset`.
    pub fn replicas_at(&self, offset: u64) -> usize {
        self.replicas
            .lock()
            .values()
            .filter(|r| r.ack >= offset)
            .count()
    }

    /// Waits until `n` replicas acknowledged `offset` or `deadline` passes (None: no
    /// limit); returns how many did.
    pub async fn wait(&self, offset: u64, n: usize, deadline: Option<Instant>) -> usize {
        loop {
            let notified = self.acks.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let count = self.replicas_at(offset);
            if count >= n || deadline.is_some_and(|d| Instant::now() >= d) {
                return count;
            }
            match deadline {
                Some(d) => {
                    let _ = tokio::time::timeout_at(d.into(), notified).await;
                }
                None => notified.await,
            }
        }
    }

    /// INFO's replication section (without its header), `latest` the store's latest
    /// sequence.
    pub fn info(&self, latest: u64, config: &ServerConfig) -> String {
        let mut out = String::new();
        let link = self.link.lock();
        match link.as_ref() {
            None => {
                let _ = writeln!(out, "role:master");
            }
            Some(l) => {
                let up = l.status == LinkStatus::Connected;
                let _ = writeln!(out, "role:slave");
                let _ = writeln!(out, "master_host:{}", l.host);
                let _ = writeln!(out, "master_port:{}", l.port);
                let _ = writeln!(out, "master_link_status:{}", if up { "up" } else { "down" });
                let _ = writeln!(
                    out,
                    "master_last_io_seconds_ago:{}",
                    if up {
                        l.last_io.elapsed().as_secs() as i64
                    } else {
                        -1
                    }
                );
                let syncing = l.status == LinkStatus::Sync;
                let _ = writeln!(out, "master_sync_in_progress:{}", u8::from(syncing));
                if syncing {
                    let _ = writeln!(out, "master_sync_read_bytes:{}", l.copy_bytes);
                }
                let offset = self.replica_offset(latest);
                let _ = writeln!(out, "slave_read_repl_offset:{offset}");
                let _ = writeln!(out, "slave_repl_offset:{offset}");
                if !up {
                    let _ = writeln!(
                        out,
                        "master_link_down_since_seconds:{}",
                        l.down_since.elapsed().as_secs()
                    );
                }
                let _ = writeln!(out, "slave_priority:{}", config.replica_priority);
                let _ = writeln!(out, "slave_read_only:1");
                let _ = writeln!(out, "replica_announced:1");
            }
        }
        drop(link);
        let replicas = self.replicas.lock();
        let _ = writeln!(out, "connected_slaves:{}", replicas.len());
        for (i, r) in replicas.values().enumerate() {
            let _ = writeln!(
                out,
                "slave{i}:ip={},port={},state={},offset={},lag={}",
                r.ip,
                r.port,
                if r.online { "online" } else { "wait_bgsave" },
                r.ack,
                r.ack_at.elapsed().as_secs()
            );
        }
        drop(replicas);
        let ids = self.ids.lock();
        let _ = writeln!(out, "master_failover_state:no-failover");
        let _ = writeln!(out, "master_replid:{}", ids.replid);
        let _ = writeln!(out, "master_replid2:{}", ids.replid2);
        let _ = writeln!(out, "master_repl_offset:{latest}");
        let _ = writeln!(out, "second_repl_offset:{}", ids.second_offset);
        let active = u8::from(ids.known);
        let _ = writeln!(out, "repl_backlog_active:{active}");
        let _ = writeln!(out, "repl_backlog_size:{}", config.repl_backlog_size);
        let _ = writeln!(out, "repl_backlog_first_byte_offset:1");
        let _ = writeln!(out, "repl_backlog_histlen:{latest}");
        out
    }

    /// ROLE's reply as a tree of values.
    pub fn role(&self, latest: u64) -> Role {
        if let Some(l) = self.link.lock().as_ref() {
            return Role::Replica {
                host: l.host.clone(),
                port: l.port,
                state: l.status.word(),
                offset: self.replica_offset(latest),
            };
        }
        Role::Primary {
            offset: latest,
            replicas: self
                .replicas
                .lock()
                .values()
                .map(|r| (r.ip.clone(), r.port, r.ack))
                .collect(),
        }
    }
}

/// What ROLE answers.
pub(crate) enum Role {
    Primary {
        offset: u64,
        replicas: Vec<(String, u16, u64)>,
    },
    Replica {
        host: String,
        port: u16,
        state: &'static str,
        offset: u64,
    },
}

/// The directory beside `dir` named as it with `suffix` (a copy received or sent, a
/// store replaced).
fn beside(dir: &Path, suffix: &str) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    dir.with_file_name(name)
}

fn read_id(path: &Path) -> Option<String> {
    let s = std::fs::read_to_string(path).ok()?;
    let id = s.trim();
    (id.len() == 40 && id.bytes().all(|b| b.is_ascii_hexdigit())).then(|| id.to_string())
}

fn write_id(path: &Path, id: &str) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, format!("{id}\n"))?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, path)
}

//! The primary's side: serving one replica's connection after its `PSYNC` (a copy of the
//! store when it cannot continue, then the stream of changes, hot keys and pings, while
//! reading its acknowledgements), and the pump that collects the readers' keys for every
//! replica.
//!
//! Owns nothing beyond the connection it serves; the change feed and the checkpoint are
//! the store's.

use super::wire::{self, ACK, CHANGE, DATA, END, FILE, HOT, PING};
use super::{Host, ReplicaState};
use bytes::BytesMut;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;

/// What a replica asked for.
#[derive(Clone, Debug)]
pub(crate) struct Psync {
    pub replid: String,
    /// Its latest sequence (None: it has no history, `-1`).
    pub offset: Option<u64>,
    /// The port it serves clients on (`REPLCONF listening-port`).
    pub listening_port: u16,
}

/// Changes read per step of the stream.
const STEP_BYTES: usize = 1 << 20;
/// How often an idle stream looks for new writes.
const POLL: Duration = Duration::from_millis(1);
/// How often the readers' keys are collected and sent.
const HOT_INTERVAL: Duration = Duration::from_millis(100);
/// Most bytes of keys in one hot-keys frame.
const HOT_FRAME_BYTES: usize = 1 << 20;

/// Serves the replica connected on `sock` (whose unread bytes are in `buf`) until it
/// goes away or the server stops.
pub(crate) async fn serve(
    host: Arc<dyn Host>,
    sock: TcpStream,
    buf: BytesMut,
    client: Arc<crate::client::ClientInfo>,
    req: Psync,
) -> std::io::Result<()> {
    let id = client.id;
    let ip = client.addr.ip().to_string();
    let rep = host.replication();
    if rep.is_replica() {
        let mut sock = sock;
        sock.write_all(
            b"-ERR tierkv replicas serve no replicas of their own (no chained replication)\r\n",
        )
        .await?;
        return Ok(());
    }
    let config = host.config();
    {
        // From the first replica on, the newest writes are kept in memory too and the
        // readers' keys are collected.
        let db = host.db();
        db.keep_recent_changes(config.repl_backlog_size);
        db.watch_accesses(true);
    }
    rep.replicas.lock().insert(
        id,
        ReplicaState {
            ip,
            port: req.listening_port,
            // Nothing counts for WAIT before the replica is known to hold this history.
            ack: 0,
            ack_at: Instant::now(),
            online: false,
        },
    );
    // CLIENT KILL (TYPE replica, ID ...) ends the stream; the replica reconnects.
    let killed = async {
        while !client.control.is_killed() {
            client.control.wake.notified().await;
        }
    };
    let r = tokio::select! {
        r = serve_registered(&host, sock, buf, id, req) => r,
        _ = killed => Ok(()),
    };
    if let Err(e) = &r {
        tracing::warn!("replica {id}: link ended: {e}");
    }
    rep.replicas.lock().remove(&id);
    rep.acks.notify_waiters();
    r
}

async fn serve_registered(
    host: &Arc<dyn Host>,
    sock: TcpStream,
    buf: BytesMut,
    id: u64,
    req: Psync,
) -> std::io::Result<()> {
    let (read, write) = sock.into_split();
    let mut w = BufWriter::with_capacity(256 * 1024, write);
    let mut stop = host.stopping();
    // The acknowledgements, read on their own.
    let mut acks = {
        let host = host.clone();
        tokio::spawn(async move {
            let mut r = std::io::Cursor::new(buf.to_vec()).chain(read);
            while let Some((kind, payload)) = wire::read_frame(&mut r).await? {
                if kind == ACK {
                    let offset = wire::number(&payload)?;
                    let rep = host.replication();
                    if let Some(s) = rep.replicas.lock().get_mut(&id) {
                        s.ack = s.ack.max(offset);
                        s.ack_at = Instant::now();
                    }
                    rep.acks.notify_waiters();
                }
            }
            Ok::<(), std::io::Error>(())
        })
    };
    let streamed = async {
        let db = host.db();
        let latest = db.latest_sequence();
        let rep = host.replication();
        let continues = match req
            .offset
            .filter(|&o| rep.can_continue(&req.replid, o, latest))
        {
            // Its next change must still be in the feed (which may read WAL files).
            Some(o) => tokio::task::spawn_blocking(move || match db.change_bytes_since(o, 1) {
                Ok(_) => Some(o),
                Err(e) => {
                    tracing::info!("replica {id}: cannot continue from {o}: {e}");
                    None
                }
            })
            .await
            .map_err(std::io::Error::other)?,
            None => None,
        };
        let syncs = &rep.syncs;
        let bump = |c: &std::sync::atomic::AtomicU64| {
            c.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        };
        match (continues, req.offset) {
            (Some(_), _) => bump(&syncs.partial_ok),
            (None, Some(_)) => {
                bump(&syncs.partial_err);
                bump(&syncs.full);
            }
            (None, None) => bump(&syncs.full),
        }
        let from = match continues {
            Some(offset) => {
                w.write_all(format!("+CONTINUE {}\r\n", rep.replid()).as_bytes())
                    .await?;
                tracing::info!("replica {id}: continuing from sequence {offset}");
                offset
            }
            None => send_copy(host, &mut w, id).await?,
        };
        if let Some(s) = rep.replicas.lock().get_mut(&id) {
            s.online = true;
            // A continuing replica holds the history up to its offset; one given a copy
            // counts once it acknowledges having loaded it.
            if continues.is_some() {
                s.ack = s.ack.max(from);
            }
        }
        stream(host, &mut w, from).await
    };
    let r = tokio::select! {
        r = streamed => r,
        r = &mut acks => match r {
            Ok(r) => r,
            Err(e) => Err(std::io::Error::other(e)),
        },
        _ = stop.wait_for(|s| *s) => Ok(()),
    };
    acks.abort();
    let _ = w.shutdown().await;
    r
}

/// Makes a checkpoint and sends it; returns its sequence.
async fn send_copy(
    host: &Arc<dyn Host>,
    w: &mut BufWriter<OwnedWriteHalf>,
    id: u64,
) -> std::io::Result<u64> {
    let db = host.db();
    let fast = db.tier_dir(tierkv::Tier::Fast).to_path_buf();
    let slow = db
        .options()
        .slow
        .as_ref()
        .map(|_| db.tier_dir(tierkv::Tier::Slow).to_path_buf());
    let suffix = format!(".replsync-{id}");
    let targets = CopyDirs {
        fast: super::beside(&fast, &suffix),
        slow: slow.as_deref().map(|s| super::beside(s, &suffix)),
    };
    let (f, s) = (targets.fast.clone(), targets.slow.clone());
    let started = Instant::now();
    let cp = tokio::task::spawn_blocking(move || {
        // Left by a copy this server was making when it stopped.
        let leftover = CopyDirs {
            fast: f.clone(),
            slow: s.clone(),
        };
        drop(leftover);
        db.checkpoint(&f, s.as_deref())
    })
    .await
    .map_err(std::io::Error::other)?
    .map_err(std::io::Error::other)?;
    let replid = host.replication().replid();
    tracing::info!(
        "replica {id}: full copy at sequence {} ({} tables, {} bytes; checkpoint in {:?})",
        cp.sequence,
        cp.tables,
        cp.table_bytes,
        started.elapsed()
    );
    w.write_all(format!("+FULLRESYNC {replid} {}\r\n", cp.sequence).as_bytes())
        .await?;
    send_dir(w, b'f', &targets.fast).await?;
    if let Some(slow) = &targets.slow {
        send_dir(w, b's', slow).await?;
    }
    wire::write_frame(w, END, &cp.sequence.to_le_bytes()).await?;
    w.flush().await?;
    drop(targets);
    Ok(cp.sequence)
}

/// A checkpoint made for one replica, removed when dropped.
struct CopyDirs {
    fast: PathBuf,
    slow: Option<PathBuf>,
}

impl CopyDirs {
    fn remove(&self) {
        for d in std::iter::once(&self.fast).chain(&self.slow) {
            if d.exists() {
                if let Err(e) = std::fs::remove_dir_all(d) {
                    tracing::warn!("could not remove {}: {e}", d.display());
                }
            }
        }
    }
}

impl Drop for CopyDirs {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Sends every file under `dir` (recursively) as tier `tier`.
async fn send_dir(w: &mut BufWriter<OwnedWriteHalf>, tier: u8, dir: &Path) -> std::io::Result<()> {
    let mut files = Vec::new();
    list_files(dir, Path::new(""), &mut files)?;
    files.sort();
    let mut chunk = vec![0u8; wire::FILE_CHUNK];
    for rel in files {
        let path = dir.join(&rel);
        let mut f = tokio::fs::File::open(&path).await?;
        let size = f.metadata().await?.len();
        let name = rel
            .to_str()
            .ok_or_else(|| wire::invalid("file name is not UTF-8"))?;
        wire::write_frame(w, FILE, &wire::file_header(tier, size, name)).await?;
        let mut left = size;
        while left > 0 {
            let n = (left as usize).min(chunk.len());
            f.read_exact(&mut chunk[..n]).await?;
            wire::write_frame(w, DATA, &chunk[..n]).await?;
            left -= n as u64;
        }
    }
    Ok(())
}

fn list_files(root: &Path, rel: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(root.join(rel))? {
        let entry = entry?;
        let rel = rel.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            list_files(root, &rel, out)?;
        } else {
            out.push(rel);
        }
    }
    Ok(())
}

/// Streams the changes after `from`, the readers' keys and a ping each second.
async fn stream(
    host: &Arc<dyn Host>,
    w: &mut BufWriter<OwnedWriteHalf>,
    mut sent: u64,
) -> std::io::Result<()> {
    let mut hot = host.replication().hot.subscribe();
    let mut ping = tokio::time::interval(Duration::from_secs(1));
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let db = host.db();
        if db.latest_sequence() > sent {
            // From memory this is a lock and a few reference counts; the WAL files are read
            // on a blocking thread.
            let changes = match db.change_bytes_in_memory(sent, STEP_BYTES) {
                Some(r) => r,
                None => {
                    tokio::task::spawn_blocking(move || db.change_bytes_since(sent, STEP_BYTES))
                        .await
                        .map_err(std::io::Error::other)?
                }
            }
            .map_err(|e| std::io::Error::other(format!("change feed: {e}")))?;
            for c in changes {
                wire::write_frame(w, CHANGE, &c.bytes).await?;
                sent = c.last_sequence;
            }
            w.flush().await?;
            continue;
        }
        drop(db);
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            keys = hot.recv() => match keys {
                Ok(payload) => {
                    wire::write_frame(w, HOT, &payload).await?;
                    w.flush().await?;
                }
                // Fell behind: the keys it missed are only hints.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return Ok(()),
            },
            _ = ping.tick() => {
                let latest = host.db().latest_sequence();
                wire::write_frame(w, PING, &latest.to_le_bytes()).await?;
                w.flush().await?;
            }
        }
    }
}

/// Collects the keys the store's readers touched every [`HOT_INTERVAL`] and hands them to
/// every replica's sender, until the server stops.
pub(crate) async fn pump(host: Arc<dyn Host>) {
    let mut stop = host.stopping();
    let mut tick = tokio::time::interval(HOT_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            _ = tick.tick() => {}
        }
        let rep = host.replication();
        if rep.replicas.lock().is_empty() || rep.is_replica() {
            continue;
        }
        let keys = host.db().take_accesses();
        let mut rest = &keys[..];
        while !rest.is_empty() {
            let (payload, n) = wire::hot_payload(rest, HOT_FRAME_BYTES);
            let _ = rep.hot.send(Arc::new(payload));
            rest = &rest[n.max(1)..];
        }
    }
}

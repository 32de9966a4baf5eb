//! The replica's side: the link to the primary (connect, handshake, `PSYNC`), receiving a
//! full copy and opening it in the place of the store, then applying the stream: changes
//! with the primary's sequence numbers, hot keys read again so the tracker and the fast
//! disk follow the primary's, acknowledgements after each applied step and every second.
//! A broken link is retried every second, continuing from the store's latest write.
//!
//! Owns the link's task and the store swap; the server's commands see only the state in
//! [`super::Replication`].

use super::wire::{self, ACK, CHANGE, DATA, END, FILE, HOT, PING};
use super::{Host, LinkStatus};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tierkv::{Change, Db, Tier};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

/// Time between two attempts to reach the primary.
const RETRY: Duration = Duration::from_secs(1);
/// Time allowed to connect, and for each handshake reply.
const HANDSHAKE: Duration = Duration::from_secs(10);
/// Most bytes of changes applied as one write.
const APPLY_BYTES: usize = 4 << 20;
/// Frames read ahead of the applier.
const READ_AHEAD: usize = 1024;
/// Most of the primary's hot keys waiting to be read.
const MAX_HOT_QUEUED: usize = 1 << 20;
/// Hot keys read per batched read.
const HOT_READ_CHUNK: usize = 1024;

type Res<T> = Result<T, String>;

/// Follows `host:port` until the link's generation is replaced or the server stops.
pub(crate) async fn follow(server: Arc<dyn Host>, host: String, port: u16, generation: u64) {
    let mut stop = server.stopping();
    loop {
        let r = session(&server, &host, port, generation).await;
        let still = server.replication().set_link(generation, |l| {
            if l.status == LinkStatus::Connected {
                l.down_since = Instant::now();
            }
            l.status = LinkStatus::Connect;
        });
        if !still || *stop.borrow() {
            return;
        }
        match r {
            Ok(()) => tracing::info!("replication link to {host}:{port} closed"),
            Err(e) => tracing::warn!("replication from {host}:{port}: {e}"),
        }
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            _ = tokio::time::sleep(RETRY) => {}
        }
    }
}

/// One connection to the primary, from the handshake to its end.
async fn session(server: &Arc<dyn Host>, host: &str, port: u16, generation: u64) -> Res<()> {
    let rep = server.replication();
    rep.set_link(generation, |l| l.status = LinkStatus::Connecting);
    let sock = tokio::time::timeout(HANDSHAKE, TcpStream::connect((host, port)))
        .await
        .map_err(|_| "connection timed out".to_string())?
        .map_err(|e| format!("cannot connect: {e}"))?;
    let _ = sock.set_nodelay(true);
    let (read, mut w) = sock.into_split();
    let mut r = BufReader::with_capacity(1 << 20, read);
    let config = server.config();
    if let Some(pw) = &config.masterauth {
        ask(&mut r, &mut w, &[b"AUTH", pw.as_bytes()]).await?;
    }
    ask(&mut r, &mut w, &[b"PING"]).await?;
    let port_text = server.port().to_string();
    ask(
        &mut r,
        &mut w,
        &[b"REPLCONF", b"listening-port", port_text.as_bytes()],
    )
    .await?;
    ask(&mut r, &mut w, &[b"REPLCONF", b"capa", b"tierkv"]).await?;
    let (id, offset) = rep.psync_args(server.db().latest_sequence());
    let reply = ask(
        &mut r,
        &mut w,
        &[b"PSYNC", id.as_bytes(), offset.as_bytes()],
    )
    .await?;
    let words: Vec<&str> = reply.split_whitespace().collect();
    match words.as_slice() {
        ["+FULLRESYNC", replid, seq] => {
            let seq: u64 = seq
                .parse()
                .map_err(|_| format!("bad FULLRESYNC reply {reply:?}"))?;
            rep.forget_history();
            rep.set_link(generation, |l| {
                l.status = LinkStatus::Sync;
                l.copy_bytes = 0;
            });
            tracing::info!("replication: full copy from {host}:{port} at sequence {seq}");
            let stages = receive_copy(server, &mut r, generation).await?;
            let sv = server.clone();
            let fast = tokio::task::spawn_blocking(move || load_copy(sv.as_ref(), &stages, seq))
                .await
                .map_err(|e| e.to_string())??;
            rep.moved_to(&fast);
            rep.follow_history(replid, seq, true);
            tracing::info!("replication: loaded the copy at sequence {seq}");
        }
        ["+CONTINUE", rest @ ..] => {
            let latest = server.db().latest_sequence();
            let replid = rest.first().map_or_else(|| rep.replid(), |s| s.to_string());
            rep.follow_history(&replid, latest, false);
            tracing::info!("replication: continuing from {host}:{port} at sequence {latest}");
        }
        _ => return Err(format!("unexpected PSYNC reply {reply:?}")),
    }
    rep.set_link(generation, |l| {
        l.status = LinkStatus::Connected;
        l.last_io = Instant::now();
    });
    apply_stream(server, r, w, generation).await
}

/// Sends one command and reads its one-line reply (an error reply is an error).
async fn ask(
    r: &mut BufReader<OwnedReadHalf>,
    w: &mut OwnedWriteHalf,
    args: &[&[u8]],
) -> Res<String> {
    let mut cmd = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        cmd.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        cmd.extend_from_slice(a);
        cmd.extend_from_slice(b"\r\n");
    }
    w.write_all(&cmd).await.map_err(|e| e.to_string())?;
    let mut line = Vec::new();
    let read = tokio::time::timeout(HANDSHAKE, async {
        // Bounded: a peer that is not a Redis-protocol server sends no short line.
        let mut limited = (&mut *r).take(4096);
        limited.read_until(b'\n', &mut line).await
    })
    .await
    .map_err(|_| "no reply to the handshake".to_string())?
    .map_err(|e| e.to_string())?;
    if read == 0 {
        return Err("the primary closed the connection".into());
    }
    let text = String::from_utf8_lossy(&line).trim_end().to_string();
    if text.starts_with('-') {
        let name = String::from_utf8_lossy(args[0]);
        return Err(format!("the primary refused {name}: {text}"));
    }
    Ok(text)
}

/// Where a copy is received before it replaces the store.
struct Stages {
    fast: PathBuf,
    slow: Option<PathBuf>,
}

/// Receives the copy's files into directories beside the store's.
async fn receive_copy(
    server: &Arc<dyn Host>,
    r: &mut BufReader<OwnedReadHalf>,
    generation: u64,
) -> Res<Stages> {
    let db = server.db();
    let stages = Stages {
        fast: super::beside(db.tier_dir(Tier::Fast), ".sync-tmp"),
        slow: db
            .options()
            .slow
            .as_ref()
            .map(|_| super::beside(db.tier_dir(Tier::Slow), ".sync-tmp")),
    };
    drop(db);
    for d in std::iter::once(&stages.fast).chain(&stages.slow) {
        if d.exists() {
            std::fs::remove_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
        }
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    let mut current: Option<(tokio::fs::File, u64, PathBuf)> = None;
    let mut received = 0u64;
    loop {
        let (kind, payload) = wire::read_frame(r)
            .await
            .map_err(|e| format!("receiving the copy: {e}"))?
            .ok_or("the primary closed the link during the copy")?;
        match kind {
            FILE => {
                if let Some((_, left, path)) = &current {
                    return Err(format!("{} cut {left} bytes short", path.display()));
                }
                let (tier, size, rel) =
                    wire::parse_file_header(&payload).map_err(|e| e.to_string())?;
                let base = match tier {
                    b'f' => &stages.fast,
                    _ => stages.slow.as_ref().ok_or(
                        "the primary's store has a slow tier: give this replica one too \
                         (tierkv serve --slow-dir)",
                    )?,
                };
                let path = base.join(rel);
                if let Some(parent) = path.parent() {
                    tokio::fs::create_dir_all(parent)
                        .await
                        .map_err(|e| format!("{}: {e}", parent.display()))?;
                }
                let f = tokio::fs::File::create(&path)
                    .await
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                if size == 0 {
                    f.sync_all()
                        .await
                        .map_err(|e| format!("{}: {e}", path.display()))?;
                } else {
                    current = Some((f, size, path));
                }
            }
            DATA => {
                let (f, left, path) = current.as_mut().ok_or("file data outside a file")?;
                if payload.len() as u64 > *left {
                    return Err(format!("{} is longer than announced", path.display()));
                }
                f.write_all(&payload)
                    .await
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                *left -= payload.len() as u64;
                received += payload.len() as u64;
                if *left == 0 {
                    f.sync_all()
                        .await
                        .map_err(|e| format!("{}: {e}", path.display()))?;
                    current = None;
                }
                server
                    .replication()
                    .set_link(generation, |l| l.copy_bytes = received);
            }
            END => {
                if let Some((_, left, path)) = &current {
                    return Err(format!("{} cut {left} bytes short", path.display()));
                }
                return Ok(stages);
            }
            k => return Err(format!("unexpected frame {:?} during the copy", k as char)),
        }
    }
}

fn sync_dir(dir: &Path) {
    if let Err(e) = std::fs::File::open(dir).and_then(|d| d.sync_all()) {
        tracing::warn!("could not sync {}: {e}", dir.display());
    }
}

/// Puts the received copy in the store's place and serves it (commands held meanwhile);
/// returns the store's fast directory. The replaced store is closed first and its
/// directories removed after.
fn load_copy(server: &dyn Host, stages: &Stages, seq: u64) -> Res<PathBuf> {
    let _paused = server.pause_commands();
    let old = server.db();
    let opts = old.options().clone();
    let fast = old.tier_dir(Tier::Fast).to_path_buf();
    let slow = opts
        .slow
        .as_ref()
        .map(|_| old.tier_dir(Tier::Slow).to_path_buf());
    if let Err(e) = old.close_in_place() {
        tracing::warn!("closing the store the copy replaces: {e}");
    }
    // The copy's tier record names the primary's directories: this store records its own
    // at open.
    let _ = std::fs::remove_file(stages.fast.join("TIERS"));
    if !server.config().repl_mirror_hotness {
        // An ordinary replica's copy: the data without the tracker's state, nor the keys
        // of the primary's promotion cache.
        let _ = std::fs::remove_dir_all(stages.fast.join("ralt"));
        let _ = std::fs::remove_file(stages.fast.join("PCKEYS"));
    }
    let mut replaced = Vec::new();
    let pairs = std::iter::once((&stages.fast, &fast)).chain(stages.slow.iter().zip(slow.iter()));
    for (stage, dir) in pairs {
        let old_dir = super::beside(dir, ".replaced");
        if old_dir.exists() {
            std::fs::remove_dir_all(&old_dir).map_err(|e| format!("{}: {e}", old_dir.display()))?;
        }
        std::fs::rename(dir, &old_dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        std::fs::rename(stage, dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        if let Some(parent) = dir.parent() {
            sync_dir(parent);
        }
        replaced.push(old_dir);
    }
    let db = Db::open(&fast, opts).map_err(|e| format!("opening the copy: {e}"))?;
    if db.latest_sequence() != seq {
        return Err(format!(
            "the copy opened at sequence {}, not the primary's {seq}",
            db.latest_sequence()
        ));
    }
    server.install_db(db)?;
    drop(old);
    for d in replaced {
        if let Err(e) = std::fs::remove_dir_all(&d) {
            tracing::warn!("could not remove the replaced store {}: {e}", d.display());
        }
    }
    Ok(fast)
}

/// What the reader task hands the applier.
type Frame = Result<(u8, Vec<u8>), String>;

/// Applies the stream until the link breaks.
async fn apply_stream(
    server: &Arc<dyn Host>,
    mut r: BufReader<OwnedReadHalf>,
    mut w: OwnedWriteHalf,
    generation: u64,
) -> Res<()> {
    let config = server.config();
    // Redis's `repl-timeout`: a link silent this long is dropped.
    let timeout = config.repl_timeout;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Frame>(READ_AHEAD);
    // Frames are read on their own task: a read cut by the ack timer would lose bytes.
    let reader = tokio::spawn(async move {
        loop {
            let f = match tokio::time::timeout(timeout, wire::read_frame(&mut r)).await {
                Err(_) => Err(format!("no word from the primary for {timeout:?}")),
                Ok(Err(e)) => Err(format!("reading the stream: {e}")),
                Ok(Ok(None)) => Err("the primary closed the link".into()),
                Ok(Ok(Some(f))) => Ok(f),
            };
            let end = f.is_err();
            if tx.send(f).await.is_err() || end {
                return;
            }
        }
    });
    let r = apply_frames(server, &mut rx, &mut w, generation, config.sync).await;
    reader.abort();
    r
}

async fn apply_frames(
    server: &Arc<dyn Host>,
    rx: &mut tokio::sync::mpsc::Receiver<Frame>,
    w: &mut OwnedWriteHalf,
    generation: u64,
    sync: bool,
) -> Res<()> {
    let rep = server.replication();
    let mut ack_tick = tokio::time::interval(Duration::from_secs(1));
    let mut hot_reads: Option<tokio::task::JoinHandle<()>> = None;
    let mut hot_keys: Vec<Vec<u8>> = Vec::new();
    let source = Path::new("the replication stream");
    loop {
        let first = tokio::select! {
            f = rx.recv() => f.ok_or("the stream's reader ended")??,
            _ = ack_tick.tick() => {
                send_ack(w, server.db().latest_sequence()).await?;
                continue;
            }
        };
        rep.set_link(generation, |l| l.last_io = Instant::now());
        // Every change already received goes in one write (up to a bound).
        let mut changes: Vec<Change> = Vec::new();
        let mut bytes = 0;
        let mut next = Some(first);
        while let Some((kind, payload)) = next.take() {
            match kind {
                CHANGE => {
                    bytes += payload.len();
                    changes.push(Change::from_bytes(&payload, source).map_err(|e| e.to_string())?);
                }
                HOT => {
                    let keys = wire::parse_hot(&payload).map_err(|e| e.to_string())?;
                    // Queued while earlier keys are read; past the bound they are dropped
                    // (hints only).
                    if server.config().repl_mirror_hotness && hot_keys.len() < MAX_HOT_QUEUED {
                        hot_keys.extend(keys);
                    }
                }
                PING => {}
                k => return Err(format!("unexpected frame {:?} in the stream", k as char)),
            }
            if bytes < APPLY_BYTES {
                if let Ok(f) = rx.try_recv() {
                    next = Some(f?);
                }
            }
        }
        if !hot_keys.is_empty() && hot_reads.as_ref().is_none_or(|h| h.is_finished()) {
            let db = server.db();
            let keys = std::mem::take(&mut hot_keys);
            hot_reads = Some(tokio::task::spawn_blocking(move || {
                for chunk in keys.chunks(HOT_READ_CHUNK) {
                    let _ = db.multi_get(chunk);
                }
            }));
        }
        if let Some(merged) = merge(changes)? {
            let db = server.db();
            let wopts = tierkv::WriteOptions { sync };
            let latest = tokio::task::spawn_blocking(move || {
                db.apply_change(merged, &wopts)
                    .map(|()| db.latest_sequence())
            })
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("applying the primary's changes: {e}"))?;
            send_ack(w, latest).await?;
        }
    }
}

/// Consecutive changes as one (their entries keep their sequence numbers).
fn merge(changes: Vec<Change>) -> Res<Option<Change>> {
    let mut it = changes.into_iter();
    let Some(mut merged) = it.next() else {
        return Ok(None);
    };
    for c in it {
        if c.sequence != merged.last_sequence() + 1 {
            return Err(format!(
                "the stream skipped from sequence {} to {}",
                merged.last_sequence(),
                c.sequence
            ));
        }
        merged.batch.append(&c.batch);
    }
    Ok(Some(merged))
}

async fn send_ack(w: &mut OwnedWriteHalf, offset: u64) -> Res<()> {
    let mut f = Vec::with_capacity(13);
    wire::frame(&mut f, ACK, &offset.to_le_bytes());
    w.write_all(&f)
        .await
        .map_err(|e| format!("acknowledging: {e}"))
}

//! The network side: the accept loop, one task per connection, graceful shutdown and closing
//! the store.
//!
//! A connection reads, parses every complete command in its buffer (pipelining), runs them
//! in order and writes their replies, then reads again. Commands that touch the store run
//! as one batch on a blocking thread (`spawn_blocking`): store calls do disk I/O and may
//! sleep in the device model, and must never stall the reactor. Reading pauses while a
//! batch runs and its replies are written, so a client that pipelines without reading
//! meets TCP backpressure instead of growing server memory.
//!
//! Replies are bounded per connection: a batch stops producing once `reply_chunk` bytes
//! are pending, between commands and between the elements of one reply (a half-produced
//! reply waits in `ConnState::resume`, holding no thread), and the connection writes them
//! out before producing more; the writer's hard `output_limit` closes a connection whose
//! replies would pass it. A connection silent for `idle_timeout`, or whose client takes
//! none of its replies for that long, is closed.
//!
//! Graceful shutdown: stop accepting; each connection answers every request it has
//! already read, reads nothing more, and closes; then the memtable is flushed and the
//! store closed. `shutdown_grace` bounds the wait for connections whose client does not
//! take its replies.

use crate::client::ClientInfo;
use crate::commands::{self, Flow};
use crate::config::ServerConfig;
use crate::resp::{Args, Parser, ProtocolError, ReplyWriter};
use crate::state::{Blocked, ConnState, ServerStats, Shared, Unblocked};
use bytes::BytesMut;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tierkv::Db;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Why the server stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Binding or accepting failed.
    #[error("network error: {0}")]
    Io(#[from] std::io::Error),
    /// Flushing or closing the store failed at shutdown.
    #[error("store error: {0}")]
    Store(#[from] tierkv::Error),
    /// A setting is out of range (nothing was started).
    #[error("{0}")]
    Config(#[from] crate::config::ConfigError),
    /// The store was read-only after a background error: the server stopped without the
    /// final flush (acknowledged writes are in the WAL and are replayed at the next open).
    #[error(
        "the store was read-only after a background error ({0}); stopped without the final \
         flush: acknowledged writes are in the WAL and are replayed at the next open"
    )]
    ReadOnly(std::sync::Arc<tierkv::Error>),
    /// The store is not in the server's keyspace format (nothing was started).
    #[error("cannot serve {0}")]
    Format(String),
}

/// Most commands taken from one read before running them: bounds the parsed-but-not-run
/// backlog of a connection.
const MAX_PENDING: usize = 1024;
/// Read size when no large bulk string is in progress.
const READ_CHUNK: usize = 16 * 1024;
/// Largest single growth of the read buffer for a bulk string in progress: the buffer
/// grows with the data actually received, never by what a header claims.
const MAX_READ_GROWTH: usize = 1024 * 1024;
/// How long a closing connection discards further input so its close is not a reset
/// (which could destroy replies the client has not read yet).
const STOP_LINGER: Duration = Duration::from_millis(100);
/// First delay of a failed AUTH reply; it doubles with each failure on the connection.
const AUTH_DELAY: Duration = Duration::from_millis(10);
/// Longest delay of a failed AUTH reply.
const AUTH_DELAY_MAX: Duration = Duration::from_secs(1);
/// An idle read buffer larger than this is released.
const SHRINK_ABOVE: usize = 256 * 1024;

/// Stops a running [`Server`] gracefully from anywhere (another task, a signal handler).
#[derive(Clone)]
pub struct ShutdownHandle {
    tx: Arc<watch::Sender<bool>>,
}

impl ShutdownHandle {
    /// Stops accepting, lets connections finish their in-flight requests, then flushes and
    /// closes the store; [`Server::run`] returns when that is done.
    pub fn shutdown(&self) {
        self.tx.send_replace(true);
    }
}

/// A bound, not yet running, RESP server over one store.
pub struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
    tx: Arc<watch::Sender<bool>>,
}

impl Server {
    /// Checks `config` (see [`ServerConfig::validate`]; its limits may not exceed the
    /// store's), then binds `config.bind:config.port` (port 0 picks a free port). The store
    /// is closed when [`Server::run`] returns.
    pub async fn bind(db: Db, mut config: ServerConfig) -> Result<Server, ServeError> {
        // What the store runs with, for CONFIG GET (and CONFIG SET to change).
        let stats = db.stats();
        config.cache_size = Some(stats.cache_total.capacity);
        config.slow_device = stats.slow_device;
        config.validate()?;
        config.validate_for_store(db.options())?;
        let versions = crate::keyspace::open(&db).map_err(ServeError::Format)?;
        let listener = TcpListener::bind((config.bind, config.port)).await?;
        let port = listener.local_addr()?.port();
        let (tx, _rx) = watch::channel(false);
        let tx = Arc::new(tx);
        let shared = Arc::new_cyclic(|me| {
            Shared::new(Arc::new(db), config, port, tx.clone(), versions, me.clone())
        });
        Ok(Server {
            listener,
            shared,
            tx,
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// A handle that stops the server.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle {
            tx: self.tx.clone(),
        }
    }

    /// Like [`Server::run`], and also shuts down gracefully on SIGTERM or SIGINT. A second
    /// signal during the graceful shutdown exits the process at once (every acknowledged
    /// write is already in the OS, so only the final memtable flush is skipped).
    pub async fn run_until_signal(self) -> Result<(), ServeError> {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        let handle = self.shutdown_handle();
        let watcher = tokio::spawn(async move {
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
                _ = int.recv() => tracing::info!("SIGINT: shutting down"),
            }
            handle.shutdown();
            tokio::select! {
                _ = term.recv() => {},
                _ = int.recv() => {},
            }
            eprintln!("tierkv serve: second signal, exiting without finishing the shutdown");
            std::process::exit(130);
        });
        let r = self.run().await;
        watcher.abort();
        r
    }

    /// Serves until SHUTDOWN or a [`ShutdownHandle`] asks to stop; then stops accepting,
    /// waits (up to `shutdown_grace`) for connections to finish their in-flight requests,
    /// flushes the memtable and closes the store.
    pub async fn run(self) -> Result<(), ServeError> {
        let Server {
            listener,
            shared,
            tx,
        } = self;
        let mut stop = tx.subscribe();
        let mut conns: JoinSet<()> = JoinSet::new();
        let sweep = tokio::spawn(sweeper(shared.clone(), tx.subscribe()));
        let sample = tokio::spawn(sampler(shared.clone(), tx.subscribe()));
        let pump = tokio::spawn(crate::replication::primary::pump(shared.clone()));
        if let Some((host, port)) = shared.config.load().replicaof.clone() {
            shared
                .replication
                .start_following(shared.clone(), host, port);
        }
        loop {
            tokio::select! {
                _ = stop.wait_for(|s| *s) => break,
                accepted = listener.accept() => match accepted {
                    Ok((sock, addr)) => accept(&shared, &mut conns, sock, addr),
                    Err(e) => {
                        // Typically EMFILE: back off instead of spinning; the server lives on.
                        tracing::warn!("accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                },
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
            }
        }
        drop(listener);
        tracing::info!("shutting down: waiting for {} connection(s)", conns.len());
        let grace = shared.config.load().shutdown_grace;
        let drained =
            tokio::time::timeout(grace, async { while conns.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            tracing::warn!("connections still busy after {grace:?}: dropping them");
            conns.abort_all();
            while conns.join_next().await.is_some() {}
        }
        // The sweeper stops at the same signal; a step in progress ends first.
        let _ = sweep.await;
        let _ = sample.await;
        let _ = pump.await;
        shared.replication.shutdown();
        close_store(shared).await
    }
}

/// Time between two steps of the expired-hash sweep.
const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// Runs a bounded step of the expired-hash sweep (`keyspace::sweep`) every
/// [`SWEEP_INTERVAL`] on a blocking thread, until the server stops.
async fn sweeper(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            _ = tokio::time::sleep(SWEEP_INTERVAL) => {}
        }
        let sh = shared.clone();
        match tokio::task::spawn_blocking(move || sh.sweep_step()).await {
            Ok(Ok(())) => {}
            Ok(Err(tierkv::Error::Closed)) => return,
            Ok(Err(e)) => tracing::warn!("expired-hash sweep: {e}"),
            Err(e) => tracing::warn!("expired-hash sweep panicked: {e}"),
        }
    }
}

/// Samples the counters every `RATE_SAMPLE_INTERVAL` for INFO's instantaneous rates, and
/// the memory in use every tenth sample for its peak, until the server stops.
async fn sampler(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(crate::state::RATE_SAMPLE_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    for n in 0u64.. {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            _ = tick.tick() => {}
        }
        shared.stats.sample();
        if n % 10 == 0 {
            let sh = shared.clone();
            let _ = tokio::task::spawn_blocking(move || crate::info::note_peak_memory(&sh)).await;
        }
    }
}

fn accept(shared: &Arc<Shared>, conns: &mut JoinSet<()>, sock: TcpStream, addr: SocketAddr) {
    ServerStats::bump(&shared.stats.connections_received, 1);
    let laddr = sock
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    let id = shared.next_client_id.fetch_add(1, Relaxed);
    let info = Arc::new(ClientInfo::new(id, addr, laddr));
    {
        let mut clients = shared.clients.lock();
        if clients.len() >= shared.config.load().max_clients {
            drop(clients);
            ServerStats::bump(&shared.stats.connections_rejected, 1);
            conns.spawn(async move {
                let mut sock = sock;
                let _ = sock
                    .write_all(b"-ERR max number of clients reached\r\n")
                    .await;
            });
            return;
        }
        clients.insert(id, info.clone());
    }
    let shared = shared.clone();
    conns.spawn(async move {
        let _ = sock.set_nodelay(true);
        if let Err(e) = connection(&shared, sock, info).await {
            tracing::debug!("connection {id} ended: {e}");
        }
        shared.clients.lock().remove(&id);
    });
}

/// Takes the store out of the shared state once every connection has let go of it, then
/// flushes and closes it on a blocking thread. A read-only store (background error) is
/// closed without the flush, which could only fail, and reported as [`ServeError::ReadOnly`].
async fn close_store(shared: Arc<Shared>) -> Result<(), ServeError> {
    let db = shared.db().clone();
    drop(shared);
    let result = tokio::task::spawn_blocking(move || -> Result<(), ServeError> {
        let read_only = db.background_error();
        if let Some(e) = &read_only {
            tracing::error!(
                "store is read-only after a background error: skipping the final flush: {e}"
            );
        }
        // A batch of an aborted connection may still hold the store for a moment.
        let mut db = db;
        for _ in 0..200 {
            match Arc::try_unwrap(db) {
                Ok(owned) => {
                    if let Some(e) = read_only {
                        let _ = owned.close();
                        return Err(ServeError::ReadOnly(e));
                    }
                    owned.flush()?;
                    return Ok(owned.close()?);
                }
                Err(still_shared) => {
                    db = still_shared;
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
        tracing::warn!("store still referenced at shutdown: flushing; it closes when released");
        if let Some(e) = read_only {
            return Err(ServeError::ReadOnly(e));
        }
        Ok(db.flush()?)
    })
    .await;
    match result {
        Ok(r) => r,
        Err(e) => Err(ServeError::Io(std::io::Error::other(e))),
    }
}

/// Bytes a connection's read buffer holds, kept in the server-wide gauge for INFO.
struct BufferGauge<'a> {
    shared: &'a Shared,
    counted: usize,
}

impl BufferGauge<'_> {
    fn set(&mut self, now: usize) {
        let g = &self.shared.stats.query_buffer_bytes;
        if now > self.counted {
            g.fetch_add(now - self.counted, Relaxed);
        } else {
            g.fetch_sub(self.counted - now, Relaxed);
        }
        self.counted = now;
    }
}

impl Drop for BufferGauge<'_> {
    fn drop(&mut self) {
        self.set(0);
    }
}

fn is_auth_command(args: &Args) -> bool {
    args.first()
        .is_some_and(|n| n.eq_ignore_ascii_case(b"auth") || n.eq_ignore_ascii_case(b"hello"))
}

async fn connection(
    shared: &Arc<Shared>,
    mut sock: TcpStream,
    info: Arc<ClientInfo>,
) -> std::io::Result<()> {
    let mut stop = shared.shutdown.subscribe();
    let config = shared.config.load_full();
    let authed = config.requirepass.is_none();
    let mut parser = Parser::new(config.limits, authed).with_key_positions(commands::key_positions);
    let mut conn = ConnState::new(info, authed);
    let who = format!("client {} ({})", conn.info.id, conn.info.addr);
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    let mut gauge = BufferGauge { shared, counted: 0 };
    let mut pending: VecDeque<Args> = VecDeque::new();
    let mut protocol_error: Option<ProtocolError> = None;
    loop {
        if conn.info.control.is_killed() {
            tracing::info!("{who}: closed by CLIENT KILL");
            linger_close(sock).await;
            return Ok(());
        }
        if protocol_error.is_none() && conn.resume.is_none() {
            protocol_error = take_commands(&mut parser, &mut buf, &mut pending, conn.authed);
        }
        if !pending.is_empty() || conn.resume.is_some() {
            wait_unpaused(shared, &pending).await;
            let Some((c, mut out, flow)) = answer(shared, conn, &mut pending, &who).await? else {
                return Ok(());
            };
            conn = c;
            if let Err(e) = write_out(shared, &mut sock, &mut out).await {
                if e.kind() == std::io::ErrorKind::TimedOut {
                    tracing::info!("{who}: took none of its replies for {:?} (--timeout): closing the connection", config.idle_timeout.unwrap_or_default());
                    return Ok(());
                }
                return Err(e);
            }
            match flow {
                Flow::Continue => {}
                Flow::Close => {
                    linger_close(sock).await;
                    return Ok(());
                }
                Flow::Shutdown | Flow::Overflow => {
                    let _ = sock.shutdown().await;
                    return Ok(());
                }
                Flow::Replicate => {
                    let (Some(req), Some(host)) = (conn.psync.take(), shared.host()) else {
                        return Ok(());
                    };
                    conn.info.control.replica.store(true, Relaxed);
                    let rest = buf.split();
                    return crate::replication::primary::serve(
                        host,
                        sock,
                        rest,
                        conn.info.clone(),
                        req,
                    )
                    .await;
                }
            }
            parser.set_authenticated(conn.authed);
            if let Some(w) = conn.wait.take() {
                let n = tokio::select! {
                    n = shared.replication.wait(w.offset, w.replicas, w.deadline) => n,
                    _ = stop.changed() => shared.replication.replicas_at(w.offset),
                };
                let mut out = ReplyWriter::new(conn.proto);
                out.int(n as i64);
                write_out(shared, &mut sock, &mut out).await?;
                continue;
            }
            if let Some(b) = conn.blocked.take() {
                let blocked = &shared.blocked_keys;
                blocked.clients.fetch_add(1, Relaxed);
                conn.info.control.blocked.store(true, Relaxed);
                let woken =
                    wait_unblocked(shared, &conn.info, &mut sock, &mut buf, &b, &mut stop).await;
                conn.info.control.blocked.store(false, Relaxed);
                blocked.clients.fetch_sub(1, Relaxed);
                blocked.unwatch(conn.info.id, &b.keys);
                match woken? {
                    Woken::Run { timed_out, error } => {
                        conn.unblocked = Some(Unblocked {
                            deadline: b.deadline,
                            timed_out,
                            error,
                        });
                        pending.push_front(b.args);
                    }
                    Woken::Closed => return Ok(()),
                    Woken::Stopping => {
                        linger_close(sock).await;
                        return Ok(());
                    }
                }
            }
            continue;
        }
        if let Some(e) = protocol_error {
            ServerStats::bump(&shared.stats.protocol_errors, 1);
            let mut w = ReplyWriter::new(conn.proto);
            w.error(&format!("ERR {e}"));
            sock.write_all(&w.to_vec()).await?;
            linger_close(sock).await;
            return Ok(());
        }
        // Every request read so far has been answered. When the server is stopping, read
        // nothing more: a client that keeps sending is not served through the grace period.
        if *stop.borrow() {
            linger_close(sock).await;
            return Ok(());
        }
        let subs = conn.subscriptions.as_mut();
        match receive(
            shared, &conn.info, subs, &mut sock, &mut buf, &parser, &mut gauge, &mut stop,
        )
        .await?
        {
            Received::More => {}
            Received::Push(first) => {
                if let Some(s) = conn.subscriptions.as_mut() {
                    let mut out = ReplyWriter::new(conn.proto);
                    let mut next = Some(first);
                    while let Some(p) = next {
                        commands::pubsub::write_push(&mut out, &p);
                        s.written(&p);
                        next = if out.len() < config.reply_chunk {
                            s.rx.try_recv().ok()
                        } else {
                            None
                        };
                    }
                    write_out(shared, &mut sock, &mut out).await?;
                }
            }
            Received::Idle => {
                tracing::info!(
                    "{who}: idle for {:?} (--timeout): closing the connection",
                    config.idle_timeout.unwrap_or_default()
                );
                linger_close(sock).await;
                return Ok(());
            }
            Received::Closed => return Ok(()),
        }
    }
}

/// Holds a batch while a CLIENT PAUSE applies to one of its commands, until the pause
/// ends (its timeout, CLIENT UNPAUSE, or a narrower pause).
async fn wait_unpaused(shared: &Shared, pending: &VecDeque<Args>) {
    if shared.pause.borrow().is_none() {
        return;
    }
    let mut rx = shared.pause.subscribe();
    loop {
        let Some(p) = *rx.borrow_and_update() else {
            return;
        };
        if Instant::now() >= p.until || !pending.iter().any(|a| commands::held_by_pause(a, p.all)) {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep_until(tokio::time::Instant::from_std(p.until)) => {}
            _ = rx.changed() => {}
        }
    }
}

/// How a blocked command's wait ended.
enum Woken {
    /// Run the command again (after a push to one of its keys, its timeout, or CLIENT
    /// UNBLOCK).
    Run { timed_out: bool, error: bool },
    /// The client closed its side.
    Closed,
    /// The server is stopping.
    Stopping,
}

/// Most bytes of further requests read from a blocked client while it waits; past them
/// the socket is left unread until the wait ends (as Redis, which stops processing a
/// blocked client's input but keeps its buffer).
const MAX_BUFFERED_WHILE_BLOCKED: usize = 1024 * 1024;

/// Waits, holding no thread, until a push to one of `b`'s keys, its deadline, the client
/// closing, or the server stopping. Requests the client sends meanwhile are buffered in
/// `buf` (up to a bound) and run after the blocked command.
async fn wait_unblocked(
    shared: &Shared,
    info: &ClientInfo,
    sock: &mut TcpStream,
    buf: &mut BytesMut,
    b: &Blocked,
    stop: &mut watch::Receiver<bool>,
) -> std::io::Result<Woken> {
    let deadline = b.deadline.map(tokio::time::Instant::from_std);
    let timeout = async {
        match deadline {
            Some(d) => tokio::time::sleep_until(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(timeout);
    loop {
        if *stop.borrow() {
            return Ok(Woken::Stopping);
        }
        buf.reserve(READ_CHUNK);
        let room = buf.len() < MAX_BUFFERED_WHILE_BLOCKED;
        let control = &info.control;
        if control.is_killed() {
            return Ok(Woken::Closed);
        }
        if let Some(error) = control.unblock.lock().take() {
            return Ok(Woken::Run {
                timed_out: !error,
                error,
            });
        }
        tokio::select! {
            _ = b.wake.notified() => return Ok(Woken::Run { timed_out: false, error: false }),
            _ = &mut timeout => return Ok(Woken::Run { timed_out: true, error: false }),
            _ = stop.changed() => return Ok(Woken::Stopping),
            _ = control.wake.notified() => {}
            n = sock.read_buf(buf), if room => {
                let n = n?;
                if n == 0 {
                    return Ok(Woken::Closed);
                }
                ServerStats::bump(&shared.stats.net_input_bytes, n as u64);
            }
        }
    }
}

/// What waiting for a connection's next bytes gave.
enum Received {
    /// Bytes, or the server started stopping.
    More,
    /// Nothing for the idle timeout.
    Idle,
    /// The client closed its side.
    Closed,
    /// A pub/sub message for this subscriber.
    Push(crate::pubsub::Push),
}

/// Reads more of a connection's requests into `buf` (grown for the bulk string in
/// progress, released when empty and large); returns early when the server starts
/// stopping.
#[allow(clippy::too_many_arguments)]
async fn receive(
    shared: &Shared,
    info: &ClientInfo,
    subs: Option<&mut crate::pubsub::Subscriptions>,
    sock: &mut TcpStream,
    buf: &mut BytesMut,
    parser: &Parser,
    gauge: &mut BufferGauge<'_>,
    stop: &mut watch::Receiver<bool>,
) -> std::io::Result<Received> {
    if buf.is_empty() && buf.capacity() > SHRINK_ABOVE {
        *buf = BytesMut::with_capacity(READ_CHUNK);
    }
    let want = parser.wanted(buf).unwrap_or(0);
    buf.reserve(want.clamp(READ_CHUNK, MAX_READ_GROWTH));
    gauge.set(buf.capacity());
    // A subscriber waits for messages: the idle timeout does not apply (as in Redis).
    let idle_timeout = match &subs {
        Some(s) if s.any() => None,
        _ => shared.config.load().idle_timeout,
    };
    let read = async {
        match idle_timeout {
            Some(t) => tokio::time::timeout(t, sock.read_buf(buf)).await.ok(),
            None => Some(sock.read_buf(buf).await),
        }
    };
    let message = async {
        match subs {
            Some(s) => s.rx.recv().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        // CLIENT KILL: the connection's loop sees it and closes.
        _ = info.control.wake.notified() => {}
        Some(p) = message => return Ok(Received::Push(p)),
        n = read => {
            let Some(n) = n else {
                return Ok(Received::Idle);
            };
            let n = n?;
            if n == 0 {
                return Ok(Received::Closed);
            }
            ServerStats::bump(&shared.stats.net_input_bytes, n as u64);
        }
        _ = stop.changed() => {}
    }
    Ok(Received::More)
}

/// Parses the commands complete in `buf` into `pending` (up to [`MAX_PENDING`]); returns
/// the protocol error that ends the connection, if one came.
fn take_commands(
    parser: &mut Parser,
    buf: &mut BytesMut,
    pending: &mut VecDeque<Args>,
    authed: bool,
) -> Option<ProtocolError> {
    while pending.len() < MAX_PENDING {
        match parser.next(buf) {
            Ok(Some(args)) => {
                // AUTH changes the limits the parser applies to what follows, and a
                // failed one is throttled before anything after it runs.
                let stop_here = !authed && is_auth_command(&args);
                pending.push_back(args);
                if stop_here {
                    break;
                }
            }
            Ok(None) => break,
            Err(e) => return Some(e),
        }
    }
    None
}

/// Runs the pending commands (see [`run_batch`]) and throttles failed AUTH attempts;
/// returns the connection's state, its replies and how it goes on, or `None` when the
/// replies would pass the output limit (the connection closes without them).
async fn answer(
    shared: &Arc<Shared>,
    conn: ConnState,
    pending: &mut VecDeque<Args>,
    who: &str,
) -> std::io::Result<Option<(ConnState, ReplyWriter, Flow)>> {
    *conn.info.last_active.lock() = Instant::now();
    let failures = conn.auth_failures;
    let (conn, p, mut out, mut flow) = run_batch(shared, conn, std::mem::take(pending)).await?;
    *pending = p;
    if flow == Flow::Overflow {
        tracing::warn!(
            "{who}: replies would pass the output limit of {} bytes \
             (--client-output-limit): closing the connection",
            out.limit()
        );
        return Ok(None);
    }
    if conn.auth_failures > failures {
        let n = conn.auth_failures;
        if n >= shared.config.load().max_auth_failures {
            tracing::warn!("{who}: {n} failed AUTH attempts: closing the connection");
            out.error("ERR too many failed AUTH attempts: closing the connection");
            flow = Flow::Close;
            pending.clear();
        } else {
            // Slows down password guessing; the sleep holds no thread.
            let delay = AUTH_DELAY
                .saturating_mul(1 << (n - 1).min(16))
                .min(AUTH_DELAY_MAX);
            tokio::time::sleep(delay).await;
        }
    }
    Ok(Some((conn, out, flow)))
}

/// Writes a batch's replies. With an idle timeout, a write that makes no progress for that
/// long (the client takes none of its replies) fails with `TimedOut`.
async fn write_out(
    shared: &Shared,
    sock: &mut TcpStream,
    out: &mut ReplyWriter,
) -> std::io::Result<()> {
    for seg in out.take() {
        let mut pos = 0;
        while pos < seg.len() {
            let n = match shared.config.load().idle_timeout {
                Some(t) => tokio::time::timeout(t, sock.write(&seg[pos..]))
                    .await
                    .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??,
                None => sock.write(&seg[pos..]).await?,
            };
            if n == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            pos += n;
            ServerStats::bump(&shared.stats.net_output_bytes, n as u64);
        }
    }
    Ok(())
}

/// Closes the way a careful HTTP server does: send FIN, then read and discard what the
/// client still sends for a moment. Closing with unread input makes the kernel send a
/// reset, which can destroy replies before the client reads them.
async fn linger_close(mut sock: TcpStream) {
    let _ = sock.shutdown().await;
    let mut sink = [0u8; 4096];
    let mut left: usize = 1024 * 1024; // bounded: a client streaming garbage is not waited for
    let _ = tokio::time::timeout(STOP_LINGER, async {
        while left > 0 {
            match sock.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    })
    .await;
}

type BatchResult = (ConnState, VecDeque<Args>, ReplyWriter, Flow);

/// Runs pending commands (after the rest of a half-produced reply, if any): on the reactor
/// those at the front that memory answers or the memtable takes at once
/// (`commands::run_inline`) and any batch where none touches the store (PING, AUTH, ...),
/// the rest on a blocking thread.
async fn run_batch(
    shared: &Arc<Shared>,
    mut conn: ConnState,
    mut pending: VecDeque<Args>,
) -> std::io::Result<BatchResult> {
    let chunk = shared.config.load().reply_chunk;
    let mut out = ReplyWriter::with_limit(conn.proto, shared.config.load().output_limit);
    if conn.resume.is_none() {
        let flow = commands::run_inline(shared, &mut conn, &mut out, &mut pending, chunk);
        if flow != Flow::Continue
            || pending.is_empty()
            || out.len() >= chunk
            || conn.resume.is_some()
        {
            return Ok((conn, pending, out, flow));
        }
    }
    if conn.resume.is_none() && !pending.iter().any(|a| commands::needs_io(a)) {
        let flow = commands::run_pipeline(shared, &mut conn, &mut out, &mut pending, chunk);
        return Ok((conn, pending, out, flow));
    }
    let sh = shared.clone();
    tokio::task::spawn_blocking(move || {
        let flow = commands::run_pipeline(&sh, &mut conn, &mut out, &mut pending, chunk);
        (conn, pending, out, flow)
    })
    .await
    // A panic in a handler ends this connection only.
    .map_err(std::io::Error::other)
}

//! One connection as the rest of the server sees it: what CLIENT LIST / CLIENT INFO show
//! ([`ClientInfo`]) and the requests other connections make of it ([`ClientControl`]:
//! CLIENT KILL, CLIENT UNBLOCK). Shared by the registry of clients, pub/sub and the slow
//! log; imports nothing of theirs.

use crate::resp::Proto;
use parking_lot::Mutex;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

/// What CLIENT LIST / CLIENT INFO show about one connection.
pub(crate) struct ClientInfo {
    pub id: u64,
    pub addr: SocketAddr,
    pub laddr: SocketAddr,
    pub created: Instant,
    pub name: Mutex<Option<String>>,
    pub last_cmd: Mutex<&'static str>,
    pub last_active: Mutex<Instant>,
    pub proto: Mutex<Proto>,
    /// What other connections ask of this one (CLIENT KILL, CLIENT UNBLOCK).
    pub control: ClientControl,
}

/// Requests to a connection from other connections: set the request, then notify `wake`
/// (the connection waits on it whenever it waits for its socket or a blocked command).
#[derive(Default)]
pub(crate) struct ClientControl {
    /// CLIENT KILL: the connection closes before running anything more.
    pub killed: std::sync::atomic::AtomicBool,
    /// Waiting in a blocking command (CLIENT LIST's `b` flag; CLIENT UNBLOCK's answer).
    pub blocked: std::sync::atomic::AtomicBool,
    /// CLIENT UNBLOCK: end the blocking command now, with an error (true) or as if timed
    /// out (false).
    pub unblock: Mutex<Option<bool>>,
    pub wake: tokio::sync::Notify,
    /// The connection is a replica's replication stream (CLIENT LIST's `S` flag).
    pub replica: std::sync::atomic::AtomicBool,
}

impl ClientControl {
    /// Asks the connection to close.
    pub fn kill(&self) {
        self.killed.store(true, Relaxed);
        self.wake.notify_one();
    }

    pub fn is_killed(&self) -> bool {
        self.killed.load(Relaxed)
    }
}

impl ClientInfo {
    /// A new connection's record.
    pub fn new(id: u64, addr: SocketAddr, laddr: SocketAddr) -> ClientInfo {
        ClientInfo {
            id,
            addr,
            laddr,
            created: Instant::now(),
            name: Mutex::new(None),
            last_cmd: Mutex::new("NULL"),
            last_active: Mutex::new(Instant::now()),
            proto: Mutex::new(Proto::Resp2),
            control: ClientControl::default(),
        }
    }

    /// A client from 127.0.0.1:50000, for unit tests.
    #[cfg(test)]
    pub fn for_test(id: u64) -> std::sync::Arc<ClientInfo> {
        let addr = SocketAddr::from(([127, 0, 0, 1], 50_000));
        std::sync::Arc::new(ClientInfo::new(id, addr, addr))
    }

    /// One line in Redis 7.0's CLIENT LIST format, every field in its order (the buffer
    /// and memory figures are 0: the server does not track them per connection).
    pub fn line(&self) -> String {
        let now = Instant::now();
        format!(
            "id={} addr={} laddr={} fd=-1 name={} age={} idle={} flags={} db=0 sub=0 psub=0 \
             ssub=0 multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 \
             oll=0 omem=0 \
             tot-mem=0 events=r cmd={} user=default redir=-1 resp={}",
            self.id,
            self.addr,
            self.laddr,
            self.name.lock().as_deref().unwrap_or(""),
            now.duration_since(self.created).as_secs(),
            now.duration_since(*self.last_active.lock()).as_secs(),
            if self.control.replica.load(Relaxed) {
                "S"
            } else if self.control.blocked.load(Relaxed) {
                "b"
            } else {
                "N"
            },
            self.last_cmd.lock(),
            self.proto.lock().number(),
        )
    }
}

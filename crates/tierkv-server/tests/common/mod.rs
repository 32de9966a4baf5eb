//! A server started per test on an ephemeral loopback port, and small client helpers,
//! shared by the command and expiry suites.
#![allow(dead_code)]

use redis::RedisResult;
use std::net::SocketAddr;
use std::path::Path;
use std::thread::JoinHandle;
use tierkv_server::{ServeError, Server, ServerConfig, ShutdownHandle};

pub struct TestServer {
    pub addr: SocketAddr,
    pub handle: ShutdownHandle,
    thread: Option<JoinHandle<Result<(), ServeError>>>,
}

/// A server over a fresh store with the default options and configuration, after the
/// guard of its directory (so it stops before the directory goes).
pub fn default_server() -> (tempfile::TempDir, TestServer) {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(
        dir.path(),
        tierkv::Options::default(),
        ServerConfig::default(),
    );
    (dir, s)
}

impl TestServer {
    /// Opens the store at `dir` with `opts` and serves it with `config` (port 0).
    pub fn start(dir: &Path, opts: tierkv::Options, config: ServerConfig) -> TestServer {
        let db = tierkv::Db::open(dir, opts).unwrap();
        Self::serve(db, config).unwrap()
    }

    /// Serves an open store; the bind error (a refused store) comes back as is.
    pub fn serve(db: tierkv::Db, config: ServerConfig) -> Result<TestServer, ServeError> {
        let config = ServerConfig { port: 0, ..config };
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let server = match Server::bind(db, config).await {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = tx.send(None);
                        return Err(e);
                    }
                };
                tx.send(Some((server.local_addr()?, server.shutdown_handle())))
                    .unwrap();
                server.run().await
            })
        });
        match rx.recv().unwrap() {
            Some((addr, handle)) => Ok(TestServer {
                addr,
                handle,
                thread: Some(thread),
            }),
            None => Err(thread.join().unwrap().unwrap_err()),
        }
    }

    pub fn url(&self) -> String {
        format!("redis://{}/", self.addr)
    }

    pub fn client(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .unwrap()
            .get_connection()
            .unwrap()
    }

    /// Stops the server and closes its store.
    pub fn stop(mut self) {
        self.handle.shutdown();
        self.thread.take().unwrap().join().unwrap().unwrap();
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            self.handle.shutdown();
            let _ = t.join();
        }
    }
}

/// Two tiers with a small fast-tier budget and small memtables, so a few hundred KiB of
/// data reach the slow tier.
pub fn two_tier_options(slow: &Path) -> tierkv::Options {
    tierkv::Options {
        write_buffer_size: 16 * 1024,
        target_file_size: 16 * 1024,
        max_bytes_for_level_base: 64 * 1024,
        level0_compaction_trigger: 2,
        num_levels: 5,
        fd_budget: Some(128 * 1024),
        slow: Some(tierkv::SlowTier {
            dir: slow.to_path_buf(),
            budget: None,
            device: tierkv::DeviceProfile::none(),
        }),
        use_direct_io: false,
        ..tierkv::Options::default()
    }
}

pub fn err_text<T: std::fmt::Debug>(r: RedisResult<T>) -> String {
    let e = r.expect_err("expected an error reply");
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        _ => e.to_string(),
    }
}

pub fn q<T: redis::FromRedisValue>(c: &mut redis::Connection, args: &[&str]) -> RedisResult<T> {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c)
}

pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// Polls `cond` every 10 ms until it holds: for a state the server reaches on its own
/// time (a client registered, blocked or gone). Only a hang fails it: the bound, ten
/// minutes, is a guard against waiting forever, not a speed check.
pub fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..60_000 {
        if cond() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("{what}: not reached in ten minutes");
}

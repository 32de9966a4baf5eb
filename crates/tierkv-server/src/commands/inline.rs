//! Store commands answered on the connection's event-loop thread, without the hand-off of
//! the pipeline to a blocking thread (two thread wake-ups per pipeline, most of a cached
//! GET's cost at one command per round trip: docs/bench/server.md): plain GETs that memory
//! answers (`Db::get_entry_in_memory`: the memtables, the point caches, or tables whose
//! blocks are cached) and runs of plain SETs and MSETs the memtable takes at once
//! (`Db::write_now`: no stall, no memtable switch, no other writer committing), with the
//! commands that touch no store between them. Each is recorded in SLOWLOG and the latency
//! monitor as the blocking path records it. The first command that would wait, fails, or
//! is anything else (or anything after MULTI, which the dispatcher queues) ends the inline
//! run: it and the rest go to the blocking thread as before, in order, so every reply is
//! the one the blocking path would give. Nothing runs inline on a connection in RESP2's
//! subscribed mode (the dispatcher refuses GET and SET there), nor when every write is
//! fsynced (`--sync`): an fsync must not hold the event loop.
//!
//! Owns only this choice of what may run inline; the commands' semantics stay in their
//! modules (`strings`, `keyspace`).

use super::{
    execute, mergeable, needs_io, record_run, set_batch, strings, Ctx, Flow, MAX_MERGED,
    MAX_MERGED_BYTES,
};
use crate::keyspace as ks;
use crate::resp::{Args, ReplyWriter};
use crate::state::{ConnState, ServerStats, Shared};
use std::collections::VecDeque;

/// Runs the commands at the front of `pending` that may run on the event loop (see the
/// module comment), until one may not, `reply_chunk` bytes of replies are pending, or the
/// connection must close. Leaves the rest in `pending`.
pub(crate) fn run_inline(
    shared: &Shared,
    conn: &mut ConnState,
    out: &mut ReplyWriter,
    pending: &mut VecDeque<Args>,
    reply_chunk: usize,
) -> Flow {
    if shared.config.load().sync
        || !conn.authed
        || conn.resume.is_some()
        || conn.replies != crate::state::Replies::On
        || conn.subscribed_mode()
        || shared.pubsub.monitoring()
        || shared.replication.is_replica()
    {
        return Flow::Continue;
    }
    // Never waits for a transaction to finish (see `multi`): then the blocking path runs all.
    let Some(_isolation) = shared.transactions.try_read() else {
        return Flow::Continue;
    };
    while let Some(args) = pending.front() {
        let queuing = conn.multi.is_some();
        // A command run here may turn replies off (CLIENT REPLY): the dispatcher's path
        // runs the rest.
        let silent = conn.replies != crate::state::Replies::On;
        if out.len() >= reply_chunk
            || out.overflowed()
            || conn.resume.is_some()
            || queuing
            || silent
        {
            break;
        }
        if !needs_io(args) {
            let args = pending.pop_front().unwrap_or_default();
            let flow = execute(&mut Ctx { shared, conn, out }, &args);
            if flow != Flow::Continue || conn.wait.is_some() {
                return flow;
            }
        } else if strings::plain_get(args) {
            let started = std::time::Instant::now();
            let Ok(rec) = ks::get_in_memory(&shared.db(), &args[1]) else {
                break;
            };
            ServerStats::bump(&shared.stats.commands, 1);
            *conn.info.last_cmd.lock() = "get";
            strings::answer_get(shared, out, rec);
            record_run(shared, conn, std::iter::once(args), started.elapsed());
            pending.pop_front();
        } else if mergeable(args) {
            let run = set_run(pending);
            let started = std::time::Instant::now();
            if shared
                .db()
                .write_now(set_batch(pending.iter().take(run)))
                .is_err()
            {
                break;
            }
            record_run(shared, conn, pending.iter().take(run), started.elapsed());
            pending.drain(..run);
            ServerStats::bump(&shared.stats.commands, run as u64);
            *conn.info.last_cmd.lock() = "set";
            for _ in 0..run {
                out.ok();
            }
        } else {
            break;
        }
    }
    if out.overflowed() {
        Flow::Overflow
    } else {
        Flow::Continue
    }
}

/// How many of the SET and MSET commands at the front of `pending` one batch takes (the
/// blocking path's merge limits).
fn set_run(pending: &VecDeque<Args>) -> usize {
    let (mut n, mut bytes) = (0, 0usize);
    for cmd in pending.iter().take_while(|a| mergeable(a)) {
        if n == MAX_MERGED || bytes >= MAX_MERGED_BYTES {
            break;
        }
        bytes += cmd.iter().map(|x| x.len()).sum::<usize>();
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ClientInfo;
    use crate::commands::run_pipeline;
    use crate::config::ServerConfig;

    fn server(dir: &std::path::Path, sync: bool) -> (Shared, ConnState) {
        let db = tierkv::Db::open(dir, tierkv::Options::default()).unwrap();
        let config = ServerConfig {
            sync,
            ..Default::default()
        };
        let shared = Shared::for_test(db, config);
        let info = ClientInfo::for_test(1);
        let conn = ConnState::new(info, true);
        (shared, conn)
    }

    fn commands(cmds: &[&str]) -> VecDeque<Args> {
        cmds.iter()
            .map(|c| {
                c.split(' ')
                    .map(|a| bytes::Bytes::from(a.to_string()))
                    .collect()
            })
            .collect()
    }

    fn replies(out: &mut ReplyWriter) -> Vec<u8> {
        out.take().concat()
    }

    const PIPELINE: &[&str] = &[
        "SET a 1",
        "SET b 2",
        "MSET c 3 d 4",
        "GET a",
        "PING",
        "GET missing",
        "HSET h f v",
        "GET h",
        "GET a",
        "SET e 5",
    ];

    /// The inline run answers the plain GETs and SETs at the front (and the PING between
    /// them, and a GET of a key stored nowhere, which no table holds), stops at the first
    /// command it may not run (HSET), and the blocking path's run of the rest gives, byte
    /// for byte, the replies a run of the blocking path alone gives.
    #[test]
    fn the_inline_run_then_the_rest_reply_as_the_blocking_path_alone() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (shared, mut conn) = server(a.path(), false);
        let mut pending = commands(PIPELINE);
        let mut out = ReplyWriter::new(conn.proto);
        let flow = run_inline(&shared, &mut conn, &mut out, &mut pending, 1 << 20);
        assert!(flow == Flow::Continue);
        assert_eq!(pending.len(), 4, "stopped at HSET");
        let inline = replies(&mut out);
        assert_eq!(inline, b"+OK\r\n+OK\r\n+OK\r\n$1\r\n1\r\n+PONG\r\n$-1\r\n");
        run_pipeline(&shared, &mut conn, &mut out, &mut pending, 1 << 20);
        let both = [inline, replies(&mut out)].concat();

        let (shared, mut conn) = server(b.path(), false);
        let mut pending = commands(PIPELINE);
        let mut out = ReplyWriter::new(conn.proto);
        run_pipeline(&shared, &mut conn, &mut out, &mut pending, 1 << 20);
        assert_eq!(
            String::from_utf8_lossy(&both),
            String::from_utf8_lossy(&replies(&mut out))
        );
    }

    /// A GET whose key only a disk read finds (flushed, its block not cached) is left for
    /// the blocking path, as is everything with `--sync`; once that path's read cached the
    /// block, the GET runs inline.
    #[test]
    fn what_would_wait_is_left_pending() {
        let dir = tempfile::tempdir().unwrap();
        let (shared, mut conn) = server(dir.path(), false);
        let mut out = ReplyWriter::new(conn.proto);
        run_pipeline(
            &shared,
            &mut conn,
            &mut out,
            &mut commands(&["SET a 1"]),
            1 << 20,
        );
        replies(&mut out);
        shared.db().flush().unwrap();
        let mut pending = commands(&["GET a", "PING"]);
        run_inline(&shared, &mut conn, &mut out, &mut pending, 1 << 20);
        assert_eq!(pending.len(), 2);
        assert!(replies(&mut out).is_empty());
        run_pipeline(&shared, &mut conn, &mut out, &mut pending, 1 << 20);
        assert_eq!(replies(&mut out), b"$1\r\n1\r\n+PONG\r\n");
        let mut pending = commands(&["GET a", "PING"]);
        run_inline(&shared, &mut conn, &mut out, &mut pending, 1 << 20);
        assert!(pending.is_empty(), "answered from the cached block");
        assert_eq!(replies(&mut out), b"$1\r\n1\r\n+PONG\r\n");

        let dir = tempfile::tempdir().unwrap();
        let (shared, mut conn) = server(dir.path(), true);
        let mut pending = commands(&["SET a 1", "GET a"]);
        run_inline(&shared, &mut conn, &mut out, &mut pending, 1 << 20);
        assert_eq!(pending.len(), 2, "--sync: nothing inline");
    }
}

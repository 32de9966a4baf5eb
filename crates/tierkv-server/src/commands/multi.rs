//! Transactions with Redis's semantics: MULTI queues the connection's commands, EXEC runs
//! them one after another with no other client's command between them, DISCARD drops them,
//! and WATCH makes EXEC abort (a null reply) when a watched key was written, or expired,
//! after it was watched. A command refused while queuing (unknown, wrong arity, before
//! AUTH) makes EXEC abort with EXECABORT; an error while running one (WRONGTYPE) is that
//! command's reply, and the others still run, as in Redis.
//!
//! Isolation is `Shared::transactions`: the pipeline runner holds it shared around store
//! commands, EXEC exclusively (`run_exec`). A watched key is its top-level record, which
//! every write to a key of any type rewrites (`keyspace`), checked with
//! `Db::unchanged_since` (conservative: after a memtable flush since WATCH it cannot tell,
//! and EXEC aborts, which a client retries as after any conflict).
//!
//! Owns the transaction state's commands; queuing itself is the dispatcher's
//! (`commands::execute` calls [`queue`]).

use super::{execute, CmdError, CmdResult, Ctx, Flow};
use crate::keyspace as ks;
use crate::resp::Args;
use crate::state::{Multi, Watched};
use bytes::Bytes;

/// The commands that run at once inside MULTI instead of being queued.
pub(super) fn runs_inside_multi(name: &str) -> bool {
    matches!(
        name,
        "exec" | "discard" | "multi" | "watch" | "quit" | "reset"
    )
}

/// Queues `args` in the open transaction and answers QUEUED.
pub(super) fn queue(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Flow {
    if let Some(m) = ctx.conn.multi.as_mut() {
        m.queued.push(args.to_vec());
        ctx.out.simple("QUEUED");
    }
    Flow::Continue
}

/// Marks the open transaction, if any, as refused (EXEC will abort).
pub(super) fn refuse(ctx: &mut Ctx<'_>) {
    if let Some(m) = ctx.conn.multi.as_mut() {
        m.failed = true;
    }
}

pub(super) fn multi(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> CmdResult {
    if ctx.conn.multi.is_some() {
        return Err(CmdError::err("MULTI calls can not be nested"));
    }
    ctx.conn.multi = Some(Multi::default());
    ctx.out.ok();
    Ok(Flow::Continue)
}

pub(super) fn discard(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> CmdResult {
    if ctx.conn.multi.take().is_none() {
        return Err(CmdError::err("DISCARD without MULTI"));
    }
    ctx.conn.watched.clear();
    ctx.out.ok();
    Ok(Flow::Continue)
}

pub(super) fn watch(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    if ctx.conn.multi.is_some() {
        return Err(CmdError::err("WATCH inside MULTI is not allowed"));
    }
    for key in &args[1..] {
        // The sequence first: a write after it, even one racing the read, is seen by EXEC.
        let since = ctx.shared.db().latest_sequence();
        let existed = ks::get(&ctx.shared.db(), key, &tierkv::ReadOptions::new())?.is_some();
        ctx.conn.watched.push(Watched {
            key: key.clone(),
            since,
            existed,
        });
    }
    ctx.out.ok();
    Ok(Flow::Continue)
}

pub(super) fn unwatch(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> CmdResult {
    ctx.conn.watched.clear();
    ctx.out.ok();
    Ok(Flow::Continue)
}

/// EXEC, for a caller holding `Shared::transactions` exclusively: aborts on a refused
/// command or a changed watched key, else runs the queued commands and answers an array
/// of their replies (each produced whole: a reply that would be sent in steps is finished
/// at once).
pub(super) fn exec(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> CmdResult {
    let Some(m) = ctx.conn.multi.take() else {
        return Err(CmdError::err("EXEC without MULTI"));
    };
    let watched = std::mem::take(&mut ctx.conn.watched);
    if m.failed {
        return Err(CmdError(
            "EXECABORT Transaction discarded because of previous errors.".into(),
        ));
    }
    if !watched_unchanged(ctx, &watched)? {
        ctx.out.null_array();
        return Ok(Flow::Continue);
    }
    ctx.out.array(m.queued.len());
    ctx.conn.in_exec = true;
    for args in &m.queued {
        run_queued(ctx, args);
    }
    ctx.conn.in_exec = false;
    Ok(Flow::Continue)
}

/// True when no watched key was written since it was watched, and none that existed then
/// has expired since.
fn watched_unchanged(ctx: &Ctx<'_>, watched: &[Watched]) -> Result<bool, CmdError> {
    for w in watched {
        let meta = ks::meta_key(&w.key);
        if !ctx.shared.db().unchanged_since(&[&meta], w.since) {
            return Ok(false);
        }
        if w.existed && ks::get(&ctx.shared.db(), &w.key, &tierkv::ReadOptions::new())?.is_none() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Runs one queued command to its whole reply.
fn run_queued(ctx: &mut Ctx<'_>, args: &Args) {
    // A queued command cannot change the connection's flow: QUIT runs at once and is
    // never queued.
    let _ = execute(ctx, args);
    while let Some(rest) = ctx.conn.resume.take() {
        if ctx.out.overflowed() {
            break;
        }
        ctx.conn.resume = rest.resume(ctx.shared, ctx.out, usize::MAX);
    }
}

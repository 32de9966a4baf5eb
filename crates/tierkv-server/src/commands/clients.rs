//! CLIENT subcommands that act on other connections: KILL (by address or by filters),
//! UNBLOCK, PAUSE and UNPAUSE. A connection is asked through its `ClientControl` and acts
//! at its next step (a killed one closes before running anything more); a pause is a
//! server-wide state (`Shared::pause`) each connection consults before running a batch
//! (`server::wait_unpaused`).

use super::{int_arg, CmdError, CmdResult, Ctx, Flow, SYNTAX};
use crate::client::ClientInfo;
use crate::state::Pause;
use bytes::Bytes;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One CLIENT KILL filter.
enum Filter {
    Id(u64),
    Addr(String),
    Laddr(String),
    User(String),
    /// TYPE: normal clients (true) or replicas' streams (false); `master` and `pubsub`
    /// match none (a replica's link to its primary is not a client here).
    Normal(Option<bool>),
    MaxAge(u64),
}

impl Filter {
    fn matches(&self, c: &ClientInfo) -> bool {
        match self {
            Filter::Id(id) => c.id == *id,
            Filter::Addr(a) => c.addr.to_string() == *a,
            Filter::Laddr(a) => c.laddr.to_string() == *a,
            Filter::User(u) => u == "default",
            Filter::Normal(n) => {
                *n == Some(!c.control.replica.load(std::sync::atomic::Ordering::Relaxed))
            }
            Filter::MaxAge(secs) => c.created.elapsed().as_secs() >= *secs,
        }
    }
}

/// CLIENT KILL ip:port (OK, or an error when no such client) and CLIENT KILL filter
/// value ... (ID, ADDR, LADDR, USER, TYPE, MAXAGE, SKIPME; the number killed).
pub(super) fn kill(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    if args.len() == 3 {
        let addr = String::from_utf8_lossy(&args[2]).into_owned();
        let found = matching(ctx, &[Filter::Addr(addr)], false);
        let Some(c) = found.first() else {
            return Err(CmdError::err("No such client"));
        };
        kill_client(ctx, c);
        ctx.out.ok();
        return Ok(Flow::Continue);
    }
    if args.len() < 4 || !args.len().is_multiple_of(2) {
        return Err(CmdError::err(SYNTAX));
    }
    let mut filters = Vec::new();
    let mut skip_me = true;
    for pair in args[2..].chunks_exact(2) {
        let value = String::from_utf8_lossy(&pair[1]).into_owned();
        filters.push(match pair[0].to_ascii_uppercase().as_slice() {
            b"ID" => Filter::Id(
                value
                    .parse()
                    .map_err(|_| CmdError::err("client-id should be greater than 0"))?,
            ),
            b"ADDR" => Filter::Addr(value),
            b"LADDR" => Filter::Laddr(value),
            b"USER" if value == "default" => Filter::User(value),
            b"USER" => {
                return Err(CmdError::err(format!(
                    "No such user '{}'",
                    super::quote_arg(&pair[1])
                )))
            }
            b"TYPE" => match value.to_ascii_lowercase().as_str() {
                "normal" => Filter::Normal(Some(true)),
                "replica" | "slave" => Filter::Normal(Some(false)),
                "master" | "pubsub" => Filter::Normal(None),
                _ => {
                    return Err(CmdError::err(format!(
                        "Unknown client type '{}'",
                        super::quote_arg(&pair[1])
                    )))
                }
            },
            b"MAXAGE" => Filter::MaxAge(value.parse().map_err(|_| CmdError::err(SYNTAX))?),
            b"SKIPME" => {
                skip_me = match value.to_ascii_lowercase().as_str() {
                    "yes" => true,
                    "no" => false,
                    _ => return Err(CmdError::err(SYNTAX)),
                };
                continue;
            }
            _ => return Err(CmdError::err(SYNTAX)),
        });
    }
    let killed = matching(ctx, &filters, skip_me);
    for c in &killed {
        kill_client(ctx, c);
    }
    ctx.out.int(killed.len() as i64);
    Ok(Flow::Continue)
}

/// Asks `c` to close, and takes it out of CLIENT LIST at once (as Redis frees a killed
/// client before it answers), though its socket closes at its next step.
fn kill_client(ctx: &Ctx<'_>, c: &ClientInfo) {
    c.control.kill();
    ctx.shared.clients.lock().remove(&c.id);
}

/// The connections every filter matches (without this one when `skip_me`).
fn matching(ctx: &Ctx<'_>, filters: &[Filter], skip_me: bool) -> Vec<Arc<ClientInfo>> {
    let me = ctx.conn.info.id;
    ctx.shared
        .clients
        .lock()
        .values()
        .filter(|c| !(skip_me && c.id == me) && filters.iter().all(|f| f.matches(c)))
        .cloned()
        .collect()
}

/// CLIENT UNBLOCK id [TIMEOUT | ERROR]: 1 when that client was blocked (it answers as if
/// its timeout passed, or with the UNBLOCKED error), else 0.
pub(super) fn unblock(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let error = match args.get(3).map(|a| a.to_ascii_uppercase()) {
        None => false,
        Some(a) if a == b"TIMEOUT" => false,
        Some(a) if a == b"ERROR" => true,
        Some(_) => {
            return Err(CmdError::err(
                "CLIENT UNBLOCK reason should be TIMEOUT or ERROR",
            ))
        }
    };
    if args.len() > 4 {
        return Err(CmdError::err(SYNTAX));
    }
    let id = int_arg(&args[2])?;
    let target = ctx.shared.clients.lock().get(&(id as u64)).cloned();
    let done = match target {
        Some(c) if c.control.blocked.load(Relaxed) => {
            *c.control.unblock.lock() = Some(error);
            c.control.wake.notify_one();
            true
        }
        _ => false,
    };
    ctx.out.int(done as i64);
    Ok(Flow::Continue)
}

/// CLIENT PAUSE timeout-ms [WRITE | ALL]: holds every connection's commands (ALL, the
/// default) or its writes (WRITE) until the timeout or CLIENT UNPAUSE. CLIENT commands
/// are never held, so a paused server can always be unpaused.
pub(super) fn pause(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let ms = int_arg(&args[2])
        .ok()
        .filter(|ms| *ms >= 0)
        .ok_or_else(|| CmdError::err("timeout is not an integer or out of range"))?;
    let all = match args.get(3).map(|a| a.to_ascii_uppercase()) {
        None => true,
        Some(a) if a == b"ALL" => true,
        Some(a) if a == b"WRITE" => false,
        Some(_) => return Err(CmdError::err(SYNTAX)),
    };
    if args.len() > 4 {
        return Err(CmdError::err(SYNTAX));
    }
    let until = Instant::now()
        .checked_add(Duration::from_millis(ms as u64))
        .ok_or_else(|| CmdError::err("timeout is not an integer or out of range"))?;
    ctx.shared.pause.send_modify(|p| {
        // A longer or wider pause already in place stays (as in Redis).
        *p = Some(match *p {
            Some(old) if old.until > until => Pause {
                until: old.until,
                all: old.all || all,
            },
            Some(old) => Pause {
                until,
                all: old.all || all,
            },
            None => Pause { until, all },
        });
    });
    ctx.out.ok();
    Ok(Flow::Continue)
}

/// CLIENT UNPAUSE.
pub(super) fn unpause(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> CmdResult {
    ctx.shared.pause.send_replace(None);
    ctx.out.ok();
    Ok(Flow::Continue)
}

//! What every blocking command (BLPOP, BRPOP, BLMOVE, BLMPOP, BZPOPMIN, BZPOPMAX, BZMPOP)
//! shares: its timeout argument, and the step that either answers or leaves the
//! connection blocked.
//!
//! A command that finds nothing to take does not hold a thread: it registers its keys with
//! [`crate::state::BlockedKeys`], leaves `ConnState::blocked` set and returns; the
//! connection waits for a write giving one of the keys elements (or the timeout, or CLIENT
//! UNBLOCK) and then runs the command again (`server::wait_unblocked`). Inside EXEC it
//! does not block: it answers as if its timeout had passed.

use super::{CmdError, CmdResult, Ctx, Flow};
use crate::state::Blocked;
use bytes::Bytes;
use std::time::{Duration, Instant};

/// A blocking command's timeout argument (seconds, fractions allowed; 0 waits forever).
pub(super) fn timeout_arg(a: &[u8]) -> Result<Option<Duration>, CmdError> {
    let bad = || CmdError::err("timeout is not a float or out of range");
    let s = std::str::from_utf8(a).map_err(|_| bad())?;
    let secs: f64 = s.trim().parse().map_err(|_| bad())?;
    if !secs.is_finite() {
        return Err(bad());
    }
    if secs < 0.0 {
        return Err(CmdError::err("timeout is negative"));
    }
    if secs == 0.0 {
        return Ok(None);
    }
    Duration::try_from_secs_f64(secs)
        .map(Some)
        .map_err(|_| bad())
}

/// The part every blocking command shares: tries `attempt` with the keys registered as
/// waited for (so a push racing the attempt wakes the connection); when it finds nothing
/// and may block, leaves the connection blocked on them and answers nothing; otherwise
/// answers with `reply` (None: the timeout reply).
pub(super) fn block_or_reply<T>(
    ctx: &mut Ctx<'_>,
    args: &[Bytes],
    keys: Vec<Bytes>,
    timeout: Option<Duration>,
    attempt: impl FnOnce(&Ctx<'_>) -> Result<Option<T>, CmdError>,
    reply: impl FnOnce(&mut Ctx<'_>, Option<T>),
) -> CmdResult {
    let again = ctx.conn.unblocked.take();
    if again.as_ref().is_some_and(|a| a.error) {
        return Err(CmdError(
            "UNBLOCKED client unblocked via CLIENT UNBLOCK".into(),
        ));
    }
    let may_block = !ctx.conn.in_exec && !again.as_ref().is_some_and(|a| a.timed_out);
    let waiter = may_block.then(|| ctx.shared.blocked_keys.watch(ctx.conn.info.id, &keys));
    match (waiter, attempt(ctx)) {
        (Some(wake), Ok(None)) => {
            let deadline = match again {
                Some(a) => a.deadline,
                None => timeout.and_then(|t| Instant::now().checked_add(t)),
            };
            ctx.conn.blocked = Some(Blocked {
                args: args.to_vec(),
                keys,
                deadline,
                wake,
            });
        }
        (waiter, r) => {
            if waiter.is_some() {
                ctx.shared.blocked_keys.unwatch(ctx.conn.info.id, &keys);
            }
            reply(ctx, r?);
        }
    }
    Ok(Flow::Continue)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_parse_as_redis() {
        assert_eq!(timeout_arg(b"0").unwrap(), None);
        assert_eq!(
            timeout_arg(b"0.5").unwrap(),
            Some(Duration::from_millis(500))
        );
        assert!(timeout_arg(b"-1").unwrap_err().0.contains("negative"));
        assert!(timeout_arg(b"abc").is_err() && timeout_arg(b"inf").is_err());
        assert!(timeout_arg(b"1e300").is_err());
    }
}

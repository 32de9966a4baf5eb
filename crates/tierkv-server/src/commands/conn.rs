//! Connection commands: PING, ECHO, HELLO, AUTH, SELECT, CLIENT, QUIT.

use super::{int_arg, CmdError, CmdResult, Ctx, Flow, SYNTAX};
use crate::resp::Proto;
use crate::state::Replies;
use bytes::Bytes;

pub(super) fn ping(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    if ctx.conn.subscribed_mode() && args.len() <= 2 {
        // A subscriber's PING answers in the shape of its messages.
        ctx.out.array(2);
        ctx.out.bulk(b"pong");
        ctx.out.bulk(args.get(1).map_or(&b""[..], |a| a.as_ref()));
        return Ok(Flow::Continue);
    }
    match args.len() {
        1 => ctx.out.simple("PONG"),
        2 => ctx.out.bulk(&args[1]),
        _ => {
            return Err(CmdError::err(
                "wrong number of arguments for 'ping' command",
            ))
        }
    }
    Ok(Flow::Continue)
}

pub(super) fn echo(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    ctx.out.bulk(&args[1]);
    Ok(Flow::Continue)
}

/// Compares in time independent of where the inputs differ, so response timing does not
/// reveal how much of a guessed password was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= (x ^ y) as usize;
    }
    diff == 0
}

/// Checks a username/password pair against `requirepass` (only the `default` user exists).
fn check_password(ctx: &mut Ctx<'_>, user: Option<&[u8]>, pass: &[u8]) -> Result<(), CmdError> {
    let config = ctx.shared.config.load();
    let user_ok = user.is_none_or(|u| u == b"default");
    let Some(expected) = config.requirepass.as_deref() else {
        if user.is_none() {
            return Err(CmdError::err(
                "AUTH <password> called without any password configured for the default \
                 user. Are you sure your configuration is correct?",
            ));
        }
        if user_ok {
            // Redis accepts any password for the default user when it has none ("nopass").
            ctx.conn.authed = true;
            return Ok(());
        }
        return Err(CmdError(
            "WRONGPASS invalid username-password pair or user is disabled.".into(),
        ));
    };
    if user_ok && constant_time_eq(pass, expected.as_bytes()) {
        ctx.conn.authed = true;
        Ok(())
    } else {
        // The connection delays this reply, and closes after too many (see server.rs).
        ctx.conn.auth_failures = ctx.conn.auth_failures.saturating_add(1);
        Err(CmdError(
            "WRONGPASS invalid username-password pair or user is disabled.".into(),
        ))
    }
}

pub(super) fn auth(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    match args.len() {
        2 => check_password(ctx, None, &args[1])?,
        3 => check_password(ctx, Some(&args[1]), &args[2])?,
        _ => return Err(CmdError::err(SYNTAX)),
    }
    ctx.out.ok();
    Ok(Flow::Continue)
}

/// `HELLO [protover [AUTH user pass] [SETNAME name]]`: RESP3 is supported (maps and the
/// `_` null); replies are otherwise the same as in RESP2.
pub(super) fn hello(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let mut proto = ctx.conn.proto;
    let mut name: Option<String> = None;
    if args.len() >= 2 {
        proto = match int_arg(&args[1]) {
            Ok(2) => Proto::Resp2,
            Ok(3) => Proto::Resp3,
            Ok(_) => return Err(CmdError("NOPROTO unsupported protocol version".into())),
            Err(_) => {
                return Err(CmdError::err(
                    "Protocol version is not an integer or out of range",
                ))
            }
        };
        let mut i = 2;
        while i < args.len() {
            let opt = args[i].to_ascii_uppercase();
            match opt.as_slice() {
                b"AUTH" if i + 2 < args.len() => {
                    check_password(ctx, Some(&args[i + 1]), &args[i + 2])?;
                    i += 3;
                }
                b"SETNAME" if i + 1 < args.len() => {
                    name = Some(valid_name(&args[i + 1])?);
                    i += 2;
                }
                _ => {
                    return Err(CmdError::err(format!(
                        "Syntax error in HELLO option '{}'",
                        super::quote_arg(&args[i])
                    )))
                }
            }
        }
    }
    if !ctx.conn.authed {
        return Err(CmdError(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the \
             HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client \
             and select the RESP protocol version at the same time"
                .into(),
        ));
    }
    if let Some(n) = name {
        *ctx.conn.info.name.lock() = if n.is_empty() { None } else { Some(n) };
    }
    ctx.conn.proto = proto;
    *ctx.conn.info.proto.lock() = proto;
    ctx.out.proto = proto;
    let out = &mut *ctx.out;
    out.map(7);
    out.bulk(b"server");
    out.bulk(b"redis");
    out.bulk(b"version");
    out.bulk(crate::info::REDIS_COMPAT_VERSION.as_bytes());
    out.bulk(b"proto");
    out.int(proto.number());
    out.bulk(b"id");
    out.int(ctx.conn.info.id as i64);
    out.bulk(b"mode");
    out.bulk(b"standalone");
    out.bulk(b"role");
    out.bulk(if ctx.shared.replication.is_replica() {
        b"replica"
    } else {
        b"master"
    });
    out.bulk(b"modules");
    out.array(0);
    Ok(Flow::Continue)
}

pub(super) fn select(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    match int_arg(&args[1])? {
        0 => {
            ctx.out.ok();
            Ok(Flow::Continue)
        }
        _ => Err(CmdError::err(
            "DB index is out of range (tierkv has only database 0)",
        )),
    }
}

/// Longest client name CLIENT SETNAME accepts. Redis sets none, but every name is held
/// for the connection's life and repeated in each CLIENT LIST reply (one string, all
/// clients): without a bound a few clients could make one CLIENT LIST gigabytes long.
const MAX_CLIENT_NAME: usize = 1024;

/// Client names are printable ASCII without spaces, as in Redis, of at most
/// [`MAX_CLIENT_NAME`] bytes.
fn valid_name(n: &[u8]) -> Result<String, CmdError> {
    if n.len() > MAX_CLIENT_NAME {
        return Err(CmdError::err(format!(
            "Client names are limited to {MAX_CLIENT_NAME} bytes (got {})",
            n.len()
        )));
    }
    if n.iter().all(|&c| (b'!'..=b'~').contains(&c)) {
        Ok(String::from_utf8_lossy(n).into_owned())
    } else {
        Err(CmdError::err(
            "Client names cannot contain spaces, newlines or special characters.",
        ))
    }
}

pub(super) fn client(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let sub = args[1].to_ascii_uppercase();
    let arity_err = || {
        CmdError::err(format!(
            "wrong number of arguments for 'client|{}' command",
            String::from_utf8_lossy(&sub).to_lowercase()
        ))
    };
    // Redis shows a container command with its subcommand (CLIENT LIST's `cmd=`).
    let full_name = match sub.as_slice() {
        b"ID" => Some("client|id"),
        b"GETNAME" => Some("client|getname"),
        b"SETNAME" => Some("client|setname"),
        b"INFO" => Some("client|info"),
        b"LIST" => Some("client|list"),
        b"SETINFO" => Some("client|setinfo"),
        b"HELP" => Some("client|help"),
        b"KILL" => Some("client|kill"),
        b"UNBLOCK" => Some("client|unblock"),
        b"PAUSE" => Some("client|pause"),
        b"UNPAUSE" => Some("client|unpause"),
        b"REPLY" => Some("client|reply"),
        b"NO-EVICT" => Some("client|no-evict"),
        b"GETREDIR" => Some("client|getredir"),
        _ => None,
    };
    if let Some(name) = full_name {
        *ctx.conn.info.last_cmd.lock() = name;
    }
    match sub.as_slice() {
        b"ID" => ctx.out.int(ctx.conn.info.id as i64),
        b"GETNAME" => {
            let name = ctx.conn.info.name.lock().clone();
            ctx.out.opt_bulk(name.as_deref().map(str::as_bytes));
        }
        b"SETNAME" => {
            if args.len() != 3 {
                return Err(arity_err());
            }
            let n = valid_name(&args[2])?;
            *ctx.conn.info.name.lock() = if n.is_empty() { None } else { Some(n) };
            ctx.out.ok();
        }
        b"INFO" => {
            let line = ctx.conn.info.line() + "\n";
            ctx.out.bulk(line.as_bytes());
        }
        b"LIST" => {
            let clients: Vec<_> = ctx.shared.clients.lock().values().cloned().collect();
            let mut text = String::new();
            for c in clients {
                text.push_str(&c.line());
                text.push('\n');
            }
            ctx.out.bulk(text.as_bytes());
        }
        b"KILL" if args.len() >= 3 => return super::clients::kill(ctx, args),
        b"UNBLOCK" if args.len() >= 3 => return super::clients::unblock(ctx, args),
        b"PAUSE" if args.len() >= 3 => return super::clients::pause(ctx, args),
        b"UNPAUSE" if args.len() == 2 => return super::clients::unpause(ctx, args),
        b"KILL" | b"UNBLOCK" | b"PAUSE" | b"UNPAUSE" => return Err(arity_err()),
        b"REPLY" => {
            if args.len() != 3 {
                return Err(arity_err());
            }
            match args[2].to_ascii_uppercase().as_slice() {
                b"ON" => {
                    ctx.conn.replies = Replies::On;
                    ctx.out.ok();
                }
                // The dispatcher sends nothing more until CLIENT REPLY ON (not even this
                // command's OK).
                b"OFF" => ctx.conn.replies = Replies::Off,
                b"SKIP" => ctx.conn.replies = Replies::Skip,
                _ => return Err(CmdError::err(SYNTAX)),
            }
        }
        // tierkv never evicts clients: ON and OFF are both what it does anyway.
        b"NO-EVICT" => {
            if args.len() != 3 {
                return Err(arity_err());
            }
            match args[2].to_ascii_uppercase().as_slice() {
                b"ON" | b"OFF" => ctx.out.ok(),
                _ => return Err(CmdError::err(SYNTAX)),
            }
        }
        // No client-side caching (CLIENT TRACKING): nothing is redirected.
        b"GETREDIR" => ctx.out.int(-1),
        // Client libraries announce themselves; nothing to store beyond accepting it.
        b"SETINFO" => {
            if args.len() != 4 {
                return Err(arity_err());
            }
            ctx.out.ok();
        }
        b"HELP" => {
            let lines = [
                "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "ID -- Return the ID of the current connection.",
                "GETNAME -- Return the name of the current connection.",
                "SETNAME <name> -- Assign the name <name> to the current connection.",
                "INFO -- Return information about the current client connection.",
                "LIST -- Return information about client connections.",
                "SETINFO <LIB-NAME|LIB-VER> <value> -- Accepted and ignored.",
                "KILL <ip:port> | KILL <filter> <value> ... -- Close connections (ID, ADDR, \
                 LADDR, USER, TYPE, MAXAGE, SKIPME).",
                "UNBLOCK <clientid> [TIMEOUT|ERROR] -- End a client's blocking command.",
                "PAUSE <timeout-ms> [WRITE|ALL] -- Hold clients' commands (or writes).",
                "UNPAUSE -- End CLIENT PAUSE.",
                "REPLY ON|OFF|SKIP -- Control the replies sent to this connection.",
                "NO-EVICT ON|OFF -- Accepted: tierkv never evicts clients.",
                "GETREDIR -- -1: no client-side caching.",
            ];
            ctx.out.array(lines.len());
            for l in lines {
                ctx.out.simple(l);
            }
        }
        _ => {
            return Err(CmdError::err(format!(
                "unknown subcommand '{}'. Try CLIENT HELP.",
                super::quote_arg(&args[1])
            )))
        }
    }
    Ok(Flow::Continue)
}

/// RESET: the connection as if new (no transaction, no watched keys, no subscriptions,
/// replies on, RESP2, no name, and unauthenticated when a password is set).
pub(super) fn reset(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> CmdResult {
    let c = &mut *ctx.conn;
    // Unsubscribes from everything (the registry forgets the dropped subscriptions).
    c.subscriptions = None;
    c.multi = None;
    c.watched.clear();
    c.replies = Replies::On;
    c.proto = Proto::Resp2;
    *c.info.proto.lock() = Proto::Resp2;
    *c.info.name.lock() = None;
    c.authed = ctx.shared.config.load().requirepass.is_none();
    ctx.out.proto = Proto::Resp2;
    ctx.out.simple("RESET");
    Ok(Flow::Continue)
}

pub(super) fn quit(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> CmdResult {
    ctx.out.ok();
    Ok(Flow::Close)
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn password_compare() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
        assert!(constant_time_eq(b"", b""));
    }
}

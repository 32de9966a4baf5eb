//! SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, PUBLISH, the shard forms SSUBSCRIBE,
//! SUNSUBSCRIBE, SPUBLISH (a namespace of their own, as in Redis 7 without a cluster) and
//! PUBSUB (CHANNELS, NUMSUB, NUMPAT, SHARDCHANNELS, SHARDNUMSUB) over the registry of
//! `crate::pubsub`. A connection with subscriptions is in
//! Redis's subscribed mode: in RESP2 it may only (un)subscribe, PING, QUIT and RESET
//! (`allowed_when_subscribed`); its messages are written between its commands' replies by
//! the connection loop.

use super::{CmdError, CmdResult, Ctx, Flow};
use crate::pubsub::{Push, Subscriptions};
use crate::resp::ReplyWriter;
use bytes::Bytes;

/// The commands a RESP2 connection with subscriptions may run.
pub(crate) fn allowed_when_subscribed(name: &str) -> bool {
    matches!(
        name,
        "subscribe"
            | "unsubscribe"
            | "psubscribe"
            | "punsubscribe"
            | "ssubscribe"
            | "sunsubscribe"
            | "ping"
            | "quit"
            | "reset"
    )
}

fn push_header(out: &mut ReplyWriter, n: usize) {
    out.push(n);
}

/// Writes one delivered message.
pub(crate) fn write_push(out: &mut ReplyWriter, p: &Push) {
    match p {
        Push::Monitor(line) => out.simple(&String::from_utf8_lossy(line)),
        Push::Message { channel, payload } | Push::SMessage { channel, payload } => {
            push_header(out, 3);
            let kind: &[u8] = match p {
                Push::SMessage { .. } => b"smessage",
                _ => b"message",
            };
            out.bulk(kind);
            out.bulk(channel);
            out.bulk(payload);
        }
        Push::PMessage {
            pattern,
            channel,
            payload,
        } => {
            push_header(out, 4);
            out.bulk(b"pmessage");
            out.bulk(pattern);
            out.bulk(channel);
            out.bulk(payload);
        }
    }
}

fn confirm(out: &mut ReplyWriter, kind: &str, name: Option<&[u8]>, count: usize) {
    push_header(out, 3);
    out.bulk(kind.as_bytes());
    match name {
        Some(n) => out.bulk(n),
        None => out.null(),
    }
    out.int(count as i64);
}

/// The connection's subscriptions, created at its first.
fn subs<'a>(ctx: &'a mut Ctx<'_>) -> &'a mut Subscriptions {
    let limit = ctx.shared.config.load().output_limit;
    let info = ctx.conn.info.clone();
    let registry = ctx.shared.pubsub.clone();
    ctx.conn
        .subscriptions
        .get_or_insert_with(|| Subscriptions::new(registry, info, limit))
}

/// What a (un)subscribe command names: channels, patterns or shard channels.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Names {
    Channels,
    Patterns,
    Shard,
}

impl Names {
    fn of(cmd: &[u8]) -> Names {
        match cmd.to_ascii_lowercase().as_slice() {
            b"psubscribe" | b"punsubscribe" => Names::Patterns,
            b"ssubscribe" | b"sunsubscribe" => Names::Shard,
            _ => Names::Channels,
        }
    }

    fn set(self, s: &mut Subscriptions) -> &mut std::collections::BTreeSet<Bytes> {
        match self {
            Names::Channels => &mut s.channels,
            Names::Patterns => &mut s.patterns,
            Names::Shard => &mut s.shard_channels,
        }
    }

    /// What the confirmations count: shard channels apart, the others together.
    fn count(self, s: &Subscriptions) -> usize {
        match self {
            Names::Shard => s.shard_channels.len(),
            _ => s.count(),
        }
    }
}

/// SUBSCRIBE channel..., PSUBSCRIBE pattern..., SSUBSCRIBE shardchannel...
pub(super) fn subscribe(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let names = Names::of(&args[0]);
    let kind = args[0].to_ascii_lowercase();
    let kind = String::from_utf8_lossy(&kind).into_owned();
    let registry = ctx.shared.pubsub.clone();
    for name in &args[1..] {
        let s = subs(ctx);
        if names.set(s).insert(name.clone()) {
            match names {
                Names::Patterns => registry.psubscribe(s, name),
                n => registry.subscribe(s, name, n == Names::Shard),
            }
        }
        let count = names.count(s);
        confirm(ctx.out, &kind, Some(name), count);
    }
    Ok(Flow::Continue)
}

/// UNSUBSCRIBE, PUNSUBSCRIBE, SUNSUBSCRIBE [name...] (none: all of that kind).
pub(super) fn unsubscribe(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let names = Names::of(&args[0]);
    let kind = args[0].to_ascii_lowercase();
    let kind = String::from_utf8_lossy(&kind).into_owned();
    let id = ctx.conn.info.id;
    let registry = ctx.shared.pubsub.clone();
    let listed: Vec<Bytes> = if args.len() > 1 {
        args[1..].to_vec()
    } else {
        match ctx.conn.subscriptions.as_mut() {
            Some(s) => names.set(s).iter().cloned().collect(),
            None => Vec::new(),
        }
    };
    if listed.is_empty() {
        let count = ctx
            .conn
            .subscriptions
            .as_ref()
            .map_or(0, |s| names.count(s));
        confirm(ctx.out, &kind, None, count);
    }
    for name in &listed {
        let count = match ctx.conn.subscriptions.as_mut() {
            Some(s) => {
                if names.set(s).remove(name) {
                    match names {
                        Names::Patterns => registry.punsubscribe(id, name),
                        n => registry.unsubscribe(id, name, n == Names::Shard),
                    }
                }
                names.count(s)
            }
            None => 0,
        };
        confirm(ctx.out, &kind, Some(name), count);
    }
    Ok(Flow::Continue)
}

/// MONITOR: from now on every command of every client is reported on this connection
/// (`monitor_line`), until it closes or RESETs.
pub(super) fn monitor(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> CmdResult {
    let registry = ctx.shared.pubsub.clone();
    let s = subs(ctx);
    if !s.monitor {
        registry.add_monitor(s);
    }
    ctx.out.ok();
    Ok(Flow::Continue)
}

/// A command as MONITOR reports it: `unix-seconds.micros [0 client-address] "arg" ...`,
/// each argument quoted with Redis's escapes (`\"`, `\\`, `\n`, `\xHH` ...).
pub(crate) fn monitor_line(at: std::time::SystemTime, addr: &str, args: &[Bytes]) -> Bytes {
    let d = at.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let mut line = format!("{}.{:06} [0 {addr}]", d.as_secs(), d.subsec_micros());
    for a in args {
        line.push_str(" \"");
        for &b in a.iter() {
            match b {
                b'\\' => line.push_str("\\\\"),
                b'"' => line.push_str("\\\""),
                b'\n' => line.push_str("\\n"),
                b'\r' => line.push_str("\\r"),
                b'\t' => line.push_str("\\t"),
                7 => line.push_str("\\a"),
                8 => line.push_str("\\b"),
                b if b.is_ascii_graphic() || b == b' ' => line.push(b as char),
                b => line.push_str(&format!("\\x{b:02x}")),
            }
        }
        line.push('"');
    }
    Bytes::from(line)
}

/// PUBLISH / SPUBLISH channel message: how many subscribers received it.
pub(super) fn publish(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let registry = &ctx.shared.pubsub;
    let n = if args[0].eq_ignore_ascii_case(b"spublish") {
        registry.spublish(&args[1], &args[2])
    } else {
        registry.publish(&args[1], &args[2])
    };
    ctx.out.int(n as i64);
    Ok(Flow::Continue)
}

/// PUBSUB CHANNELS [pattern] | NUMSUB [channel...] | NUMPAT | HELP.
pub(super) fn pubsub(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let registry = &ctx.shared.pubsub;
    match (args[1].to_ascii_uppercase().as_slice(), args.len()) {
        (sub @ (b"CHANNELS" | b"SHARDCHANNELS"), 2 | 3) => {
            let shard = sub == b"SHARDCHANNELS";
            let chans = registry.channels(args.get(2).map(|a| a.as_ref()), shard);
            ctx.out.array(chans.len());
            for c in &chans {
                ctx.out.bulk(c);
            }
        }
        (sub @ (b"NUMSUB" | b"SHARDNUMSUB"), _) => {
            let shard = sub == b"SHARDNUMSUB";
            ctx.out.map(args.len() - 2);
            for c in &args[2..] {
                ctx.out.bulk(c);
                ctx.out.int(registry.numsub(c, shard) as i64);
            }
        }
        (b"NUMPAT", 2) => ctx.out.int(registry.numpat() as i64),
        (b"HELP", 2) => {
            let lines = [
                "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "CHANNELS [<pattern>]",
                "    Return the currently active channels matching a <pattern> (default: '*').",
                "NUMPAT",
                "    Return number of subscriptions to patterns.",
                "NUMSUB [<channel> ...]",
                "    Return the number of subscribers for the specified channels.",
                "SHARDCHANNELS [<pattern>]",
                "    Return the currently active shard level channels matching a <pattern>.",
                "SHARDNUMSUB [<shardchannel> ...]",
                "    Return the number of subscribers for the specified shard level channel(s).",
                "HELP",
                "    Print this help.",
            ];
            ctx.out.array(lines.len());
            for l in lines {
                ctx.out.simple(l);
            }
        }
        _ => {
            return Err(CmdError::err(format!(
                "unknown subcommand or wrong number of arguments for '{}'. Try PUBSUB HELP.",
                super::quote_arg(&args[1])
            )))
        }
    }
    Ok(Flow::Continue)
}

//! Server commands: INFO, CONFIG GET, COMMAND (COUNT, DOCS, INFO, LIST), TIME, SHUTDOWN.

use super::{CmdError, CmdResult, CommandSpec, Ctx, Flow, Resume, COMMANDS};
use crate::glob::Glob;
use crate::resp::ReplyWriter;
use crate::state::{produce_in_steps, Shared};
use bytes::Bytes;

pub(super) fn info(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let sections: Vec<String> = args[1..]
        .iter()
        .map(|a| String::from_utf8_lossy(a).to_lowercase())
        .collect();
    let text = crate::info::render(ctx.shared, &sections)?;
    ctx.out.bulk(text.as_bytes());
    Ok(Flow::Continue)
}

/// The read-only configuration CONFIG GET reports: enough for redis-cli, redis-benchmark
/// (which asks for `save` and `appendonly`) and monitoring tools.
fn config_values(ctx: &Ctx<'_>) -> Vec<(&'static str, String)> {
    let c = &ctx.shared.config;
    vec![
        ("bind", c.bind.to_string()),
        ("port", ctx.shared.port.to_string()),
        ("databases", "1".into()),
        ("save", String::new()),
        ("appendonly", if c.sync { "yes" } else { "no" }.into()),
        ("appendfsync", if c.sync { "always" } else { "no" }.into()),
        ("maxclients", c.max_clients.to_string()),
        ("maxmemory", "0".into()),
        ("maxmemory-policy", "noeviction".into()),
        (
            "timeout",
            c.idle_timeout.map_or(0, |t| t.as_secs()).to_string(),
        ),
        ("tcp-keepalive", "0".into()),
        ("proto-max-bulk-len", c.limits.max_bulk.to_string()),
        ("client-query-buffer-limit", c.limits.max_query.to_string()),
        (
            "client-output-buffer-limit",
            format!("normal {} {} 0", c.output_limit, c.output_limit),
        ),
        ("tierkv-max-key", c.limits.max_key.to_string()),
        ("tierkv-reply-chunk", c.reply_chunk.to_string()),
        ("tierkv-max-args", c.limits.max_args.to_string()),
        ("tierkv-sync", if c.sync { "yes" } else { "no" }.into()),
        (
            "dir",
            c.db_dir
                .as_ref()
                .map(|d| d.display().to_string())
                .unwrap_or_default(),
        ),
        (
            "tierkv-slow-dir",
            c.slow_dir
                .as_ref()
                .map(|d| d.display().to_string())
                .unwrap_or_default(),
        ),
    ]
}

pub(super) fn config(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let sub = args[1].to_ascii_uppercase();
    match sub.as_slice() {
        b"GET" => {
            if args.len() < 3 {
                return Err(CmdError::err(
                    "wrong number of arguments for 'config|get' command",
                ));
            }
            let values = config_values(ctx);
            let globs: Vec<Glob> = args[2..].iter().map(|p| Glob::new_nocase(p)).collect();
            let hits: Vec<_> = values
                .iter()
                .filter(|(k, _)| globs.iter().any(|g| g.matches(k.as_bytes())))
                .collect();
            ctx.out.map(hits.len());
            for (k, v) in hits {
                ctx.out.bulk(k.as_bytes());
                ctx.out.bulk(v.as_bytes());
            }
        }
        b"RESETSTAT" => ctx.out.ok(),
        b"SET" | b"REWRITE" => {
            return Err(CmdError::err(format!(
                "CONFIG {} is not supported: tierkv's configuration is set on the command line",
                String::from_utf8_lossy(&sub)
            )))
        }
        _ => {
            return Err(CmdError::err(format!(
                "unknown subcommand '{}'. Try CONFIG GET.",
                super::quote_arg(&args[1])
            )))
        }
    }
    Ok(Flow::Continue)
}

fn acl_category(spec: &CommandSpec) -> &'static str {
    match spec.group {
        "string" => "@string",
        "hash" => "@hash",
        "generic" => "@keyspace",
        "connection" => "@connection",
        _ => "@admin",
    }
}

/// One COMMAND INFO entry in Redis 7's ten-element shape.
fn command_entry(out: &mut ReplyWriter, spec: &CommandSpec) {
    out.array(10);
    out.bulk(spec.name.as_bytes());
    out.int(spec.arity as i64);
    out.array(spec.flags.len());
    for f in spec.flags {
        out.simple(f);
    }
    out.int(spec.keys.0 as i64);
    out.int(spec.keys.1 as i64);
    out.int(spec.keys.2 as i64);
    out.array(1);
    out.simple(acl_category(spec));
    out.array(0); // tips
    out.array(0); // key specs
    out.array(0); // subcommands
}

fn command_doc(out: &mut ReplyWriter, spec: &CommandSpec) {
    out.bulk(spec.name.as_bytes());
    out.map(3);
    out.bulk(b"summary");
    out.bulk(spec.summary.as_bytes());
    out.bulk(b"since");
    out.bulk(b"1.0.0");
    out.bulk(b"group");
    out.bulk(spec.group.as_bytes());
}

pub(super) fn command(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    if args.len() == 1 {
        ctx.out.array(COMMANDS.len());
        send_specs(ctx, COMMANDS.iter().map(Some).collect(), false);
        return Ok(Flow::Continue);
    }
    let sub = args[1].to_ascii_uppercase();
    match sub.as_slice() {
        b"COUNT" => ctx.out.int(COMMANDS.len() as i64),
        b"LIST" => {
            ctx.out.array(COMMANDS.len());
            for spec in COMMANDS {
                ctx.out.bulk(spec.name.as_bytes());
            }
        }
        b"INFO" => {
            let specs: Vec<_> = if args.len() == 2 {
                COMMANDS.iter().map(Some).collect()
            } else {
                args[2..].iter().map(|n| super::lookup(n)).collect()
            };
            ctx.out.array(specs.len());
            send_specs(ctx, specs, false);
        }
        b"DOCS" => {
            let specs: Vec<_> = if args.len() == 2 {
                COMMANDS.iter().map(Some).collect()
            } else {
                args[2..]
                    .iter()
                    .filter_map(|n| super::lookup(n))
                    .map(Some)
                    .collect()
            };
            ctx.out.map(specs.len());
            send_specs(ctx, specs, true);
        }
        _ => {
            return Err(CmdError::err(format!(
                "unknown subcommand '{}'. Try COMMAND COUNT, DOCS, INFO or LIST.",
                super::quote_arg(&args[1])
            )))
        }
    }
    Ok(Flow::Continue)
}

/// Sends COMMAND INFO entries (or DOCS pairs) one command at a time: a request naming a
/// command a million times would otherwise build a reply of a hundred times its size at
/// once. Unknown names (INFO only) answer nil.
fn send_specs(ctx: &mut Ctx<'_>, specs: Vec<Option<&'static CommandSpec>>, docs: bool) {
    let rest = Box::new(SpecsRest {
        specs,
        next: 0,
        docs,
    });
    ctx.conn.resume = rest.resume(ctx.shared, ctx.out, ctx.shared.config.reply_chunk);
}

/// The part of a COMMAND INFO or DOCS reply not produced yet.
struct SpecsRest {
    specs: Vec<Option<&'static CommandSpec>>,
    next: usize,
    docs: bool,
}

impl Resume for SpecsRest {
    fn resume(
        mut self: Box<Self>,
        _shared: &Shared,
        out: &mut ReplyWriter,
        chunk: usize,
    ) -> Option<Box<dyn Resume>> {
        let (specs, docs) = (&self.specs, self.docs);
        let more = produce_in_steps(
            &mut self.next,
            specs.len(),
            out,
            chunk,
            |i, out| match specs[i] {
                Some(spec) if docs => command_doc(out, spec),
                Some(spec) => command_entry(out, spec),
                None => out.null(),
            },
        );
        more.then_some(self as Box<dyn Resume>)
    }
}

pub(super) fn time(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> CmdResult {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    ctx.out.array(2);
    ctx.out.bulk(now.as_secs().to_string().as_bytes());
    ctx.out.bulk(now.subsec_micros().to_string().as_bytes());
    Ok(Flow::Continue)
}

/// `SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE]`: the store is always flushed and closed cleanly
/// (there is nothing "not to save": every acknowledged write is already in the WAL), so the
/// options are accepted and make no difference. Like Redis, no reply is sent on success.
///
/// A store made read-only by a background error (a full or failing disk) cannot take the
/// final flush: the client is told so in an error reply, and the server still stops
/// (skipping the flush; the WAL keeps every acknowledged write for the next open) and
/// exits with an error, instead of closing the connection without a word.
pub(super) fn shutdown(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    for a in &args[1..] {
        let opt = a.to_ascii_uppercase();
        match opt.as_slice() {
            b"NOSAVE" | b"SAVE" | b"NOW" | b"FORCE" => {}
            b"ABORT" => return Err(CmdError::err("No shutdown in progress.")),
            _ => return Err(CmdError::err(super::SYNTAX)),
        }
    }
    if let Some(e) = ctx.shared.db.background_error() {
        tracing::error!("SHUTDOWN on a read-only store: stopping without the final flush: {e}");
        ctx.out.error(&format!(
            "ERR store is read-only after a background error ({e}): shutting down without \
             the final flush; acknowledged writes are in the WAL and are replayed at the \
             next open"
        ));
    }
    ctx.shared.request_shutdown();
    Ok(Flow::Shutdown)
}

//! Server commands: INFO, CONFIG (GET, SET, RESETSTAT, REWRITE; the parameters are
//! `params`'), COMMAND (COUNT, DOCS, INFO, LIST), TIME, SHUTDOWN.

use super::{CmdError, CmdResult, CommandSpec, Ctx, Flow, Resume, COMMANDS};
use crate::config::ServerConfig;
use crate::glob::Glob;
use crate::params;
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

/// CONFIG GET pattern... (every parameter matching one), SET, RESETSTAT, REWRITE.
pub(super) fn config(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let sub = args[1].to_ascii_uppercase();
    let arity = |name: &str| {
        CmdError::err(format!(
            "wrong number of arguments for 'config|{name}' command"
        ))
    };
    match sub.as_slice() {
        b"GET" => {
            if args.len() < 3 {
                return Err(arity("get"));
            }
            // The port actually bound (the configuration may say 0).
            let config = ServerConfig {
                port: ctx.shared.port,
                ..ServerConfig::clone(&ctx.shared.config.load())
            };
            let globs: Vec<Glob> = args[2..].iter().map(|p| Glob::new_nocase(p)).collect();
            let hits: Vec<_> = params::PARAMS
                .iter()
                .filter(|p| globs.iter().any(|g| g.matches(p.name.as_bytes())))
                .collect();
            ctx.out.map(hits.len());
            for p in hits {
                ctx.out.bulk(p.name.as_bytes());
                ctx.out.bulk(p.get(&config).as_bytes());
            }
        }
        b"SET" => {
            if args.len() < 4 || !args.len().is_multiple_of(2) {
                return Err(arity("set"));
            }
            config_set(ctx, &args[2..])?;
            ctx.out.ok();
        }
        b"RESETSTAT" => {
            if args.len() != 2 {
                return Err(arity("resetstat"));
            }
            ctx.shared.stats.reset();
            ctx.out.ok();
        }
        b"REWRITE" => {
            if args.len() != 2 {
                return Err(arity("rewrite"));
            }
            let config = ctx.shared.config.load_full();
            let Some(path) = config.config_file.as_ref() else {
                return Err(CmdError::err("The server is running without a config file"));
            };
            params::rewrite_file(path, &config).map_err(|e| {
                CmdError::err(format!("Rewriting config file {}: {e}", path.display()))
            })?;
            ctx.out.ok();
        }
        _ => {
            return Err(CmdError::err(format!(
                "unknown subcommand '{}'. Try CONFIG HELP.",
                super::quote_arg(&args[1])
            )))
        }
    }
    Ok(Flow::Continue)
}

/// CONFIG SET name value [name value ...]: every pair applies, or none (an unknown or
/// fixed name, a bad value, or a combination the server refuses).
fn config_set(ctx: &Ctx<'_>, pairs: &[Bytes]) -> Result<(), CmdError> {
    let failed = |name: &str, why: &str| {
        CmdError::err(format!(
            "CONFIG SET failed (possibly related to argument '{name}') - {why}"
        ))
    };
    let current = ctx.shared.config.load_full();
    let mut next = ServerConfig::clone(&current);
    let mut seen: Vec<&str> = Vec::new();
    for pair in pairs.chunks_exact(2) {
        let name = String::from_utf8_lossy(&pair[0]);
        let Some(p) = params::find(&name) else {
            return Err(CmdError::err(format!(
                "Unknown option or number of arguments for CONFIG SET - '{}'",
                super::quote_arg(&pair[0])
            )));
        };
        if seen.contains(&p.name) {
            return Err(failed(p.name, "duplicate parameter"));
        }
        seen.push(p.name);
        if !p.runtime {
            return Err(failed(p.name, "can't set immutable config"));
        }
        let value = std::str::from_utf8(&pair[1])
            .map_err(|_| failed(p.name, "argument is not valid UTF-8"))?;
        p.set(&mut next, value).map_err(|e| failed(p.name, &e))?;
    }
    next.validate()
        .and_then(|()| next.validate_for_store(ctx.shared.db().options()))
        .map_err(|e| failed(seen.first().copied().unwrap_or(""), &e.to_string()))?;
    // The store's settings are checked before anything is applied (all pairs or none).
    let db = &ctx.shared.db();
    let cache_change = next.cache_size.filter(|b| Some(*b) != current.cache_size);
    let device_change = next.slow_device.filter(|p| Some(*p) != current.slow_device);
    if cache_change.is_some() && current.cache_size == Some(0) {
        return Err(failed(
            "tierkv-cache-size",
            "the store was opened without a cache (cache size 0)",
        ));
    }
    if cache_change == Some(0) {
        return Err(failed(
            "tierkv-cache-size",
            "a cache of 0 bytes: reopen without one",
        ));
    }
    if device_change.is_some() && db.tier_dir(tierkv::Tier::Fast) == db.tier_dir(tierkv::Tier::Slow)
    {
        return Err(failed("tierkv-slow-device", "the store has no slow tier"));
    }
    if next.log_level != current.log_level {
        params::apply_log_level(&next.log_level).map_err(|e| failed("loglevel", &e))?;
    }
    if let Some(bytes) = cache_change {
        db.set_cache_capacity(bytes)
            .map_err(|e| failed("tierkv-cache-size", &e.to_string()))?;
    }
    if let Some(p) = device_change {
        db.set_device_profile(tierkv::Tier::Slow, p)
            .map_err(|e| failed("tierkv-slow-device", &e.to_string()))?;
    }
    ctx.shared.config.store(std::sync::Arc::new(next));
    Ok(())
}

fn acl_category(spec: &CommandSpec) -> &'static str {
    match spec.group {
        "string" => "@string",
        "hash" => "@hash",
        "list" => "@list",
        "set" => "@set",
        "sorted-set" => "@sortedset",
        "bitmap" => "@bitmap",
        "geo" => "@geo",
        "hyperloglog" => "@hyperloglog",
        "pubsub" => "@pubsub",
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
    ctx.conn.resume = rest.resume(ctx.shared, ctx.out, ctx.shared.config.load().reply_chunk);
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
    if let Some(e) = ctx.shared.db().background_error() {
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

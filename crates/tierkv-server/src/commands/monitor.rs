//! SLOWLOG (GET, LEN, RESET, HELP) and LATENCY (LATEST, HISTORY, RESET, HELP): the
//! records `crate::slowlog` keeps, in Redis's reply shapes.

use super::{int_arg, CmdError, CmdResult, Ctx, Flow};
use crate::slowlog::COMMAND_EVENT;
use bytes::Bytes;

fn help(ctx: &mut Ctx<'_>, lines: &[&str]) {
    ctx.out.array(lines.len());
    for l in lines {
        ctx.out.simple(l);
    }
}

fn unknown(cmd: &str, args: &[Bytes]) -> CmdError {
    CmdError::err(format!(
        "unknown subcommand or wrong number of arguments for '{}'. Try {cmd} HELP.",
        super::quote_arg(&args[1])
    ))
}

pub(super) fn slowlog(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let sub = args[1].to_ascii_uppercase();
    match (sub.as_slice(), args.len()) {
        (b"GET", 2 | 3) => {
            let count = match args.get(2) {
                None => Some(10),
                Some(a) => match int_arg(a)? {
                    -1 => None,
                    n if n < 0 => {
                        return Err(CmdError::err("count should be greater than or equal to -1"))
                    }
                    n => Some(n as usize),
                },
            };
            let out = &mut *ctx.out;
            ctx.shared.monitor.slow_entries(count, |entries| {
                out.array(entries.len());
                for e in entries {
                    out.array(6);
                    out.int(e.id as i64);
                    out.int(e.unix_secs as i64);
                    out.int(e.micros as i64);
                    out.array(e.args.len());
                    for a in &e.args {
                        out.bulk(a);
                    }
                    out.bulk(e.addr.as_bytes());
                    out.bulk(e.name.as_bytes());
                }
            });
        }
        (b"LEN", 2) => ctx.out.int(ctx.shared.monitor.slow_len() as i64),
        (b"RESET", 2) => {
            ctx.shared.monitor.slow_reset();
            ctx.out.ok();
        }
        (b"HELP", 2) => help(
            ctx,
            &[
                "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "GET [<count>]",
                "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
                "LEN",
                "    Return the length of the slowlog.",
                "RESET",
                "    Reset the slowlog.",
                "HELP",
                "    Print this help.",
            ],
        ),
        _ => return Err(unknown("SLOWLOG", args)),
    }
    Ok(Flow::Continue)
}

pub(super) fn latency(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let sub = args[1].to_ascii_uppercase();
    match (sub.as_slice(), args.len()) {
        (b"LATEST", 2) => match ctx.shared.monitor.latest() {
            None => ctx.out.array(0),
            Some(l) => {
                ctx.out.array(1);
                ctx.out.array(4);
                ctx.out.bulk(COMMAND_EVENT.as_bytes());
                ctx.out.int(l.unix_secs as i64);
                ctx.out.int(l.latest_ms as i64);
                ctx.out.int(l.max_ms as i64);
            }
        },
        (b"HISTORY", 3) => {
            let samples = if args[2].eq_ignore_ascii_case(COMMAND_EVENT.as_bytes()) {
                ctx.shared.monitor.history()
            } else {
                Vec::new()
            };
            ctx.out.array(samples.len());
            for (t, ms) in samples {
                ctx.out.array(2);
                ctx.out.int(t as i64);
                ctx.out.int(ms as i64);
            }
        }
        (b"RESET", _) => {
            let all = args.len() == 2;
            let named = args[2..]
                .iter()
                .any(|a| a.eq_ignore_ascii_case(COMMAND_EVENT.as_bytes()));
            let n = if all || named {
                ctx.shared.monitor.reset_latency()
            } else {
                0
            };
            ctx.out.int(n as i64);
        }
        (b"HELP", 2) => help(
            ctx,
            &[
                "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "LATEST",
                "    Return the latest latency samples for all events.",
                "HISTORY <event>",
                "    Return time-latency samples for the <event> class.",
                "RESET [<event> ...]",
                "    Reset latency data of one or more <event> classes.",
                "    (default: reset all data for all event classes)",
                "HELP",
                "    Print this help.",
            ],
        ),
        _ => return Err(unknown("LATENCY", args)),
    }
    Ok(Flow::Continue)
}

//! String commands: GET, SET (NX/XX/GET), GETSET, MGET, MSET, INCR/INCRBY/DECR/DECRBY,
//! APPEND, STRLEN.
//!
//! Every read-modify-write goes through `Db::update`, so concurrent INCRs never lose an
//! update, and one whose condition fails (or whose value is not a number) writes nothing.
//! Conditional writes first read the key: when the condition already fails, that read is
//! the command's linearization point and nothing is written; only when it holds does the
//! command pay for an atomic rmw (which re-checks it).

use super::{CmdError, CmdResult, Ctx, Flow, Resume, NOT_INT, SYNTAX};
use crate::resp::{parse_int, ReplyWriter};
use crate::state::{ServerStats, Shared};
use bytes::Bytes;
use tierkv::Update;

pub(super) fn get(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let v = ctx.shared.db.get(&args[1])?;
    let stats = &ctx.shared.stats;
    ServerStats::bump(
        if v.is_some() {
            &stats.keyspace_hits
        } else {
            &stats.keyspace_misses
        },
        1,
    );
    ctx.out.opt_bulk_owned(v);
    Ok(Flow::Continue)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Cond {
    Always,
    /// NX: only if absent.
    Absent,
    /// XX: only if present.
    Present,
}

impl Cond {
    fn holds(self, old: Option<&[u8]>) -> bool {
        match self {
            Cond::Always => true,
            Cond::Absent => old.is_none(),
            Cond::Present => old.is_some(),
        }
    }
}

pub(super) fn set(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let (key, value) = (&args[1], &args[2]);
    let mut cond = Cond::Always;
    let mut want_old = false;
    let mut ttl: Option<String> = None;
    let mut i = 3;
    while i < args.len() {
        let opt = args[i].to_ascii_uppercase();
        match opt.as_slice() {
            b"NX" if cond == Cond::Always => cond = Cond::Absent,
            b"XX" if cond == Cond::Always => cond = Cond::Present,
            b"GET" if !want_old => want_old = true,
            b"EX" | b"PX" | b"EXAT" | b"PXAT" if ttl.is_none() && i + 1 < args.len() => {
                ttl = Some(String::from_utf8_lossy(&opt).into_owned());
                i += 1;
            }
            b"KEEPTTL" if ttl.is_none() => ttl = Some("KEEPTTL".into()),
            _ => return Err(CmdError::err(SYNTAX)),
        }
        i += 1;
    }
    if let Some(opt) = ttl {
        return Err(CmdError::err(format!(
            "SET {opt} is not supported: tierkv has no key expiry (EX, PX, EXAT, PXAT and \
             KEEPTTL are rejected)"
        )));
    }
    let wopts = ctx.wopts();
    let db = &ctx.shared.db;
    if cond == Cond::Always && !want_old {
        db.put_opt(key, value, &wopts)?;
        ctx.out.ok();
        return Ok(Flow::Continue);
    }
    let before = db.get(key)?;
    if !cond.holds(before.as_deref()) {
        if want_old {
            ctx.out.opt_bulk(before.as_deref());
        } else {
            ctx.out.null();
        }
        return Ok(Flow::Continue);
    }
    let mut old: Option<Vec<u8>> = None;
    let mut applied = false;
    db.update_opt(key, &wopts, |cur| {
        old = cur.map(<[u8]>::to_vec);
        applied = cond.holds(cur);
        if applied {
            Update::Put(value.to_vec())
        } else {
            // Lost a race: leave the key as it is.
            Update::Keep
        }
    })?;
    if want_old {
        ctx.out.opt_bulk_owned(old);
    } else if applied {
        ctx.out.ok();
    } else {
        ctx.out.null();
    }
    Ok(Flow::Continue)
}

pub(super) fn getset(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let value = &args[2];
    let mut old: Option<Vec<u8>> = None;
    let wopts = ctx.wopts();
    ctx.shared.db.rmw_opt(&args[1], &wopts, |cur| {
        old = cur.map(<[u8]>::to_vec);
        Some(value.to_vec())
    })?;
    ctx.out.opt_bulk_owned(old);
    Ok(Flow::Continue)
}

/// MGET reads every key at one snapshot (it sees all its keys at the same instant, as in
/// Redis) but fetches and encodes them one at a time: the reply stops at the connection's
/// output bound and [`MgetRest`] produces the rest once the client has taken what came
/// before, so `MGET big big big ...` never holds more than about one value per connection.
pub(super) fn mget(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let rest = Box::new(MgetRest {
        snap: ctx.shared.db.snapshot(),
        keys: args.to_vec(),
        next: 1,
    });
    ctx.out.array(args.len() - 1);
    ctx.conn.resume = rest.resume(ctx.shared, ctx.out, ctx.shared.config.reply_chunk);
    Ok(Flow::Continue)
}

/// The part of an MGET reply not produced yet.
struct MgetRest {
    snap: tierkv::Snapshot,
    /// The command as sent (the keys start at 1).
    keys: Vec<Bytes>,
    next: usize,
}

impl Resume for MgetRest {
    fn resume(
        mut self: Box<Self>,
        shared: &Shared,
        out: &mut ReplyWriter,
        chunk: usize,
    ) -> Option<Box<dyn Resume>> {
        let ropts = tierkv::ReadOptions {
            snapshot: Some(self.snap.seq()),
            ..tierkv::ReadOptions::new()
        };
        while self.next < self.keys.len() {
            match shared.db.get_opt(&self.keys[self.next], &ropts) {
                Ok(v) => out.opt_bulk_owned(v),
                // The array header is out: the failed element carries the error.
                Err(e) => out.error(&CmdError::from(e).0),
            }
            self.next += 1;
            if out.overflowed() {
                return None;
            }
            if out.len() >= chunk && self.next < self.keys.len() {
                return Some(self);
            }
        }
        None
    }
}

pub(super) fn mset(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Err(CmdError::err(
            "wrong number of arguments for 'mset' command",
        ));
    }
    let mut batch = tierkv::WriteBatch::new();
    for kv in args[1..].chunks_exact(2) {
        batch.put(&kv[0], &kv[1]);
    }
    ctx.shared.db.write_opt(batch, &ctx.wopts())?;
    ctx.out.ok();
    Ok(Flow::Continue)
}

/// The delta an INCR/INCRBY/DECR/DECRBY command applies, if `args` is one (with the error
/// its argument earns, if any), and its key.
pub(super) fn counter_delta(args: &[Bytes]) -> Option<(&Bytes, Result<i64, &'static str>)> {
    let name = args.first()?;
    let is = |n: &[u8]| name.eq_ignore_ascii_case(n);
    let delta = match args.len() {
        2 if is(b"incr") => Ok(1),
        2 if is(b"decr") => Ok(-1),
        3 if is(b"incrby") => parse_int(&args[2]).ok_or(NOT_INT),
        3 if is(b"decrby") => match parse_int(&args[2]) {
            None => Err(NOT_INT),
            Some(i64::MIN) => Err("decrement would overflow"),
            Some(d) => Ok(-d),
        },
        _ => return None,
    };
    Some((&args[1], delta))
}

/// Applies counter deltas to one key in one atomic read-modify-write and writes one reply
/// per delta, as if the commands ran one after another (a failing one leaves the value as
/// it was, like in Redis).
pub(super) fn counter_run(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    deltas: &[Result<i64, &'static str>],
) -> Result<(), CmdError> {
    let mut results: Vec<Result<i64, &'static str>> = Vec::new();
    let wopts = ctx.wopts();
    ctx.shared.db.update_opt(key, &wopts, |cur| {
        let mut value = match cur {
            None => Some(0),
            Some(v) => parse_int(v),
        };
        let mut changed = false;
        results.clear();
        for d in deltas {
            let r = match (d, value) {
                (Err(e), _) => Err(*e),
                (Ok(_), None) => Err(NOT_INT),
                (Ok(d), Some(v)) => v
                    .checked_add(*d)
                    .ok_or("increment or decrement would overflow"),
            };
            if let Ok(n) = r {
                value = Some(n);
                changed = true;
            }
            results.push(r);
        }
        match value {
            Some(n) if changed => Update::Put(n.to_string().into_bytes()),
            _ => Update::Keep,
        }
    })?;
    for r in &results {
        match r {
            Ok(n) => ctx.out.int(*n),
            Err(e) => ctx.out.error(&format!("ERR {e}")),
        }
    }
    Ok(())
}

/// INCR, INCRBY, DECR, DECRBY: one atomic read-modify-write.
pub(super) fn counter(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let Some((key, delta)) = counter_delta(args) else {
        return Err(CmdError::err(SYNTAX));
    };
    // An argument error touches nothing (Redis checks it before reading the key).
    if let Err(e) = delta {
        return Err(CmdError::err(e));
    }
    counter_run(ctx, key, &[delta])?;
    Ok(Flow::Continue)
}

pub(super) fn append(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let suffix = &args[2];
    let max = ctx.shared.config.limits.max_bulk;
    let mut too_big = false;
    let wopts = ctx.wopts();
    let new = ctx.shared.db.rmw_opt(&args[1], &wopts, |cur| {
        let old = cur.unwrap_or_default();
        too_big = old.len().saturating_add(suffix.len()) > max;
        if too_big {
            return cur.map(<[u8]>::to_vec);
        }
        let mut v = Vec::with_capacity(old.len() + suffix.len());
        v.extend_from_slice(old);
        v.extend_from_slice(suffix);
        Some(v)
    })?;
    if too_big {
        return Err(CmdError::err(
            "string exceeds maximum allowed size (proto-max-bulk-len)",
        ));
    }
    ctx.out.int(new.map_or(0, |v| v.len()) as i64);
    Ok(Flow::Continue)
}

pub(super) fn strlen(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let v = ctx.shared.db.get(&args[1])?;
    ctx.out.int(v.map_or(0, |v| v.len()) as i64);
    Ok(Flow::Continue)
}

//! String commands: GET, SET (NX/XX/GET and the expiry options), SETNX, SETEX, PSETEX,
//! GETSET, GETDEL, GETEX, MGET, MSET, MSETNX, INCR/INCRBY/DECR/DECRBY, INCRBYFLOAT, APPEND,
//! STRLEN, GETRANGE, SETRANGE.
//!
//! Values are the server keyspace's string records (`keyspace`): a string command on a
//! hash answers WRONGTYPE. Every read-modify-write is one `keyspace::transact` step (the
//! engine's conditional write on the key's record), so concurrent INCRs never lose an
//! update, and one whose condition fails (or whose value is not a number) writes nothing.
//! Commands that change a value without setting it (INCR, APPEND, SETRANGE) keep its
//! deadline; SET without KEEPTTL, GETSET and MSET clear it, as in Redis.

use super::expiry::{now_ms, parse_expire_option, ExpireOpt};
use super::{CmdError, CmdResult, Ctx, Flow, Resume, NOT_INT, SYNTAX};
use crate::keyspace::{self as ks, Kind, Rec};
use crate::resp::{parse_int, ReplyWriter};
use crate::state::{ServerStats, Shared};
use bytes::Bytes;
use tierkv::WriteBatch;

pub(super) const TOO_BIG: &str = "string exceeds maximum allowed size (proto-max-bulk-len)";

fn count_hit(shared: &Shared, hit: bool) {
    let stats = &shared.stats;
    ServerStats::bump(
        if hit {
            &stats.keyspace_hits
        } else {
            &stats.keyspace_misses
        },
        1,
    );
}

/// Writes a string record read from the store (its encoding's type byte skipped without a
/// copy), or the null reply.
pub(super) fn reply_string(out: &mut ReplyWriter, rec: Option<Rec>) -> Result<(), CmdError> {
    match rec {
        None => out.null(),
        Some(r) => {
            r.string()?;
            out.bulk_owned_from(r.raw, 1);
        }
    }
    Ok(())
}

pub(super) fn get(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let rec = ks::get(&ctx.shared.db(), &args[1], &tierkv::ReadOptions::new())?;
    answer_get(ctx.shared, ctx.out, rec);
    Ok(Flow::Continue)
}

/// GET's reply to the record read for its key (a hit or a miss counted; WRONGTYPE for a
/// hash).
pub(super) fn answer_get(shared: &Shared, out: &mut ReplyWriter, rec: Option<Rec>) {
    count_hit(shared, rec.is_some());
    if let Err(e) = reply_string(out, rec) {
        out.error(&e.0);
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Cond {
    Always,
    /// NX: only if absent.
    Absent,
    /// XX: only if present.
    Present,
}

/// What a SET-like command writes.
struct SetSpec<'a> {
    value: &'a [u8],
    cond: Cond,
    /// Reply with the old value (GET option): WRONGTYPE on a hash.
    want_old: bool,
    /// `None`: no deadline; `Some(d)`: deadline `d` (ms).
    deadline: Option<u64>,
    keep_ttl: bool,
}

/// The outcome of a SET-like command: whether it wrote and the old string (for GET).
fn set_generic(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    spec: &SetSpec<'_>,
) -> Result<(bool, Option<Vec<u8>>), CmdError> {
    let wopts = ctx.wopts();
    let db = &ctx.shared.db();
    let mk = ks::meta_key(key);
    if spec.cond == Cond::Always && !spec.want_old && !spec.keep_ttl {
        // A blind write: one record, no read (a hash it replaces leaves its fields
        // unreachable; see docs/DEPLOYMENT.md).
        let mut b = WriteBatch::new();
        ks::put(&mut b, &mk, &ks::str_value(spec.value), spec.deadline);
        db.write_opt(b, &wopts)?;
        return Ok((true, None));
    }
    let mut err = None;
    let mut old = None;
    let mut leftover = None;
    let applied = ks::transact(db, &wopts, &[&mk], |cur| {
        err = None;
        old = None;
        leftover = None;
        let cur = cur[0].as_ref();
        if spec.want_old {
            if let Some(r) = cur {
                match r.string() {
                    Ok(s) => old = Some(s.to_vec()),
                    Err(e) => {
                        err = Some(e);
                        return None;
                    }
                }
            }
        }
        let holds = match spec.cond {
            Cond::Always => true,
            Cond::Absent => cur.is_none(),
            Cond::Present => cur.is_some(),
        };
        if !holds {
            return None;
        }
        let mut b = WriteBatch::new();
        if let Some(r) = cur {
            if matches!(r.kind(), Ok(Kind::Coll(_))) {
                match ks::delete_value(db, &mut b, key, r) {
                    Ok(l) => leftover = l,
                    Err(e) => {
                        err = Some(e);
                        return None;
                    }
                }
            }
        }
        let deadline = if spec.keep_ttl {
            cur.and_then(|r| r.deadline)
        } else {
            spec.deadline
        };
        ks::put(&mut b, &mk, &ks::str_value(spec.value), deadline);
        Some(b)
    })?;
    if let Some(e) = err {
        return Err(e);
    }
    if let Some(v) = leftover {
        ks::drop_fields(db, &wopts, key, v)?;
    }
    Ok((applied, old))
}

pub(super) fn set(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let (key, value) = (&args[1], &args[2]);
    let mut cond = Cond::Always;
    let mut want_old = false;
    let mut expire: Option<(ExpireOpt, &[u8])> = None;
    let mut keep_ttl = false;
    let mut i = 3;
    while i < args.len() {
        let opt = args[i].to_ascii_uppercase();
        match opt.as_slice() {
            b"NX" if cond == Cond::Always => cond = Cond::Absent,
            b"XX" if cond == Cond::Always => cond = Cond::Present,
            b"GET" if !want_old => want_old = true,
            b"KEEPTTL" if expire.is_none() && !keep_ttl => keep_ttl = true,
            _ => match ExpireOpt::parse(&opt) {
                Some(e) if expire.is_none() && !keep_ttl && i + 1 < args.len() => {
                    expire = Some((e, &args[i + 1]));
                    i += 1;
                }
                _ => return Err(CmdError::err(SYNTAX)),
            },
        }
        i += 1;
    }
    let deadline = match expire {
        Some((opt, arg)) => Some(parse_expire_option(opt, arg, now_ms(ctx.shared), "set")?),
        None => None,
    };
    let spec = SetSpec {
        value,
        cond,
        want_old,
        deadline,
        keep_ttl,
    };
    let (applied, old) = set_generic(ctx, key, &spec)?;
    if want_old {
        ctx.out.opt_bulk_owned(old);
    } else if applied {
        ctx.out.ok();
    } else {
        ctx.out.null();
    }
    Ok(Flow::Continue)
}

pub(super) fn setnx(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let spec = SetSpec {
        value: &args[2],
        cond: Cond::Absent,
        want_old: false,
        deadline: None,
        keep_ttl: false,
    };
    let (applied, _) = set_generic(ctx, &args[1], &spec)?;
    ctx.out.int(applied as i64);
    Ok(Flow::Continue)
}

/// SETEX key seconds value, PSETEX key milliseconds value.
pub(super) fn setex(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let (opt, name) = if args[0].eq_ignore_ascii_case(b"psetex") {
        (ExpireOpt::Px, "psetex")
    } else {
        (ExpireOpt::Ex, "setex")
    };
    let deadline = parse_expire_option(opt, &args[2], now_ms(ctx.shared), name)?;
    let spec = SetSpec {
        value: &args[3],
        cond: Cond::Always,
        want_old: false,
        deadline: Some(deadline),
        keep_ttl: false,
    };
    set_generic(ctx, &args[1], &spec)?;
    ctx.out.ok();
    Ok(Flow::Continue)
}

pub(super) fn getset(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let spec = SetSpec {
        value: &args[2],
        cond: Cond::Always,
        want_old: true,
        deadline: None,
        keep_ttl: false,
    };
    let (_, old) = set_generic(ctx, &args[1], &spec)?;
    ctx.out.opt_bulk_owned(old);
    Ok(Flow::Continue)
}

/// GETDEL: the string, deleted in the same atomic step.
pub(super) fn getdel(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    get_then(ctx, &args[1], |mk, _| {
        let mut b = WriteBatch::new();
        b.delete(mk);
        Some(b)
    })
}

/// Replies with the string at `key` (nil when absent, WRONGTYPE for a hash) and, in the
/// same atomic step, writes the batch `then` makes from its record key and record (nothing
/// when it returns `None`): GETDEL and GETEX.
fn get_then(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    mut then: impl FnMut(&[u8], &Rec) -> Option<WriteBatch>,
) -> CmdResult {
    let mk = ks::meta_key(key);
    let mut res: Result<Option<Vec<u8>>, CmdError> = Ok(None);
    ks::transact(&ctx.shared.db(), &ctx.wopts(), &[&mk], |cur| {
        res = Ok(None);
        let r = cur[0].as_ref()?;
        match r.string() {
            Ok(s) => res = Ok(Some(s.to_vec())),
            Err(e) => {
                res = Err(e);
                return None;
            }
        }
        then(&mk, r)
    })?;
    ctx.out.opt_bulk_owned(res?);
    Ok(Flow::Continue)
}

/// Most keys one batched read of MGET or of a run of pipelined GETs takes (bounds the
/// key copies it makes; the value bytes are bounded by the reply chunk).
pub(super) const MAX_KEYS_PER_READ: usize = 1024;

/// MGET reads every key at one snapshot (it sees all its keys at the same instant, as in
/// Redis). It reads them in batches (`keyspace::get_prefix`: many disk reads in flight)
/// that hold at most the room left under the connection's output bound plus one value,
/// and encodes each batch before reading the next: the reply stops at the bound and
/// [`MgetRest`] produces the rest once the client has taken what came before, so
/// `MGET big big big ...` never holds much more than one reply chunk plus one value per
/// connection. A key holding a hash reads as nil, as in Redis.
pub(super) fn mget(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let rest = Box::new(MgetRest {
        snap: ctx.shared.db().snapshot(),
        keys: args.to_vec(),
        next: 1,
    });
    ctx.out.array(args.len() - 1);
    ctx.conn.resume = rest.resume(ctx.shared, ctx.out, ctx.shared.config.load().reply_chunk);
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
            let end = (self.next + MAX_KEYS_PER_READ).min(self.keys.len());
            // At least one key per read, so a reply that already fills its chunk still
            // makes progress.
            let room = chunk.saturating_sub(out.len()).max(1);
            let answers = ks::get_prefix(&shared.db(), &self.keys[self.next..end], &ropts, room);
            for answer in answers {
                match answer {
                    Ok(Some(r)) if r.string().is_ok() => out.bulk_owned_from(r.raw, 1),
                    Ok(_) => out.null(),
                    // The array header is out: the failed element carries the error.
                    Err(e) => out.error(&CmdError::from(e).0),
                }
                self.next += 1;
            }
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

/// True for `GET key`: the command a pipeline may answer in a batched read with its
/// neighbours.
pub(super) fn plain_get(args: &[Bytes]) -> bool {
    args.len() == 2 && args[0].eq_ignore_ascii_case(b"get")
}

/// Answers a run of pipelined `GET key` commands with one batched read
/// (`keyspace::get_prefix`) holding at most `room` bytes of values plus one, each reply as
/// [`get`] writes it (hits and misses counted, WRONGTYPE for a hash, an error for a failed
/// read). Returns how many of the run it answered (at least one): the caller runs the rest
/// later, in order. All of them read at one instant, which a client cannot tell from one
/// after another: none of their replies leaves before all were read, and they write
/// nothing.
pub(super) fn get_run(shared: &Shared, out: &mut ReplyWriter, run: &[Bytes], room: usize) -> usize {
    let answers = ks::get_prefix(&shared.db(), run, &tierkv::ReadOptions::new(), room.max(1));
    let n = answers.len();
    for answer in answers {
        match answer {
            Ok(rec) => answer_get(shared, out, rec),
            Err(e) => out.error(&CmdError::from(e).0),
        }
    }
    n
}

fn check_pairs(args: &[Bytes], name: &str) -> Result<(), CmdError> {
    if args.len().is_multiple_of(2) {
        return Err(CmdError::err(format!(
            "wrong number of arguments for '{name}' command"
        )));
    }
    Ok(())
}

pub(super) fn mset(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    check_pairs(args, "mset")?;
    let mut batch = WriteBatch::new();
    for kv in args[1..].chunks_exact(2) {
        batch.put(ks::meta_key(&kv[0]), ks::str_value(&kv[1]));
    }
    ctx.shared.db().write_opt(batch, &ctx.wopts())?;
    ctx.out.ok();
    Ok(Flow::Continue)
}

/// MSETNX: all the keys are set, in one atomic step, only if none of them exists.
pub(super) fn msetnx(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    check_pairs(args, "msetnx")?;
    let keys: Vec<Vec<u8>> = args[1..]
        .chunks_exact(2)
        .map(|kv| ks::meta_key(&kv[0]))
        .collect();
    let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
    let applied = ks::transact(&ctx.shared.db(), &ctx.wopts(), &refs, |cur| {
        if cur.iter().any(Option::is_some) {
            return None;
        }
        let mut b = WriteBatch::new();
        for (k, kv) in keys.iter().zip(args[1..].chunks_exact(2)) {
            b.put(k, ks::str_value(&kv[1]));
        }
        Some(b)
    })?;
    ctx.out.int(applied as i64);
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

/// Read-modify-write of one string key: `f` gets the current string (None: absent) and
/// returns the new one (None: leave it). The key's deadline is kept. WRONGTYPE on a hash.
pub(super) fn modify_string(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    mut f: impl FnMut(Option<&[u8]>) -> Option<Vec<u8>>,
) -> Result<(), CmdError> {
    let mk = ks::meta_key(key);
    let mut err = None;
    ks::transact(&ctx.shared.db(), &ctx.wopts(), &[&mk], |cur| {
        err = None;
        let cur = cur[0].as_ref();
        let s = match cur.map(Rec::string).transpose() {
            Ok(s) => s,
            Err(e) => {
                err = Some(e);
                return None;
            }
        };
        let new = f(s)?;
        let mut b = WriteBatch::new();
        ks::put(
            &mut b,
            &mk,
            &ks::str_value(&new),
            cur.and_then(|r| r.deadline),
        );
        Some(b)
    })?;
    match err {
        Some(e) => Err(e),
        None => Ok(()),
    }
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
    modify_string(ctx, key, |cur| {
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
            Some(n) if changed => Some(n.to_string().into_bytes()),
            _ => None,
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

/// Parses a float argument or stored value as Redis does (no spaces, no NaN).
pub(super) fn parse_float(s: &[u8]) -> Option<f64> {
    let t = std::str::from_utf8(s).ok()?;
    if t.is_empty()
        || t.starts_with(|c: char| c.is_ascii_whitespace())
        || t.ends_with(|c: char| c.is_ascii_whitespace())
    {
        return None;
    }
    let v: f64 = t.parse().ok()?;
    (!v.is_nan()).then_some(v)
}

/// Formats a float the way INCRBYFLOAT replies: the shortest decimal that reads back as
/// the same number, without an exponent or trailing zeros.
pub(super) fn format_float(v: f64) -> String {
    let s = format!("{v}");
    if s == "-0" {
        "0".into()
    } else {
        s
    }
}

pub(super) fn incrbyfloat(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let incr = parse_float(&args[2]).ok_or_else(|| CmdError::err("value is not a valid float"))?;
    let mut res: Result<String, &'static str> = Err("");
    modify_string(ctx, &args[1], |cur| {
        let old = match cur {
            None => 0.0,
            Some(v) => match parse_float(v) {
                Some(x) => x,
                None => {
                    res = Err("value is not a valid float");
                    return None;
                }
            },
        };
        let new = old + incr;
        if !new.is_finite() {
            res = Err("increment would produce NaN or Infinity");
            return None;
        }
        let s = format_float(new);
        res = Ok(s.clone());
        Some(s.into_bytes())
    })?;
    match res {
        Ok(s) => ctx.out.bulk(s.as_bytes()),
        Err(e) => return Err(CmdError::err(e)),
    }
    Ok(Flow::Continue)
}

pub(super) fn append(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let suffix = &args[2];
    let max = ctx.shared.config.load().limits.max_bulk;
    let mut too_big = false;
    let mut len = 0usize;
    modify_string(ctx, &args[1], |cur| {
        let old = cur.unwrap_or_default();
        too_big = old.len().saturating_add(suffix.len()) > max;
        if too_big {
            return None;
        }
        let mut v = Vec::with_capacity(old.len() + suffix.len());
        v.extend_from_slice(old);
        v.extend_from_slice(suffix);
        len = v.len();
        Some(v)
    })?;
    if too_big {
        return Err(CmdError::err(TOO_BIG));
    }
    ctx.out.int(len as i64);
    Ok(Flow::Continue)
}

pub(super) fn strlen(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let rec = ks::get(&ctx.shared.db(), &args[1], &tierkv::ReadOptions::new())?;
    let n = match &rec {
        Some(r) => r.string()?.len(),
        None => 0,
    };
    ctx.out.int(n as i64);
    Ok(Flow::Continue)
}

/// GETRANGE key start end (Redis 7's index rules: negative from the end, clamped).
pub(super) fn getrange(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let start = super::int_arg(&args[2])?;
    let end = super::int_arg(&args[3])?;
    let rec = ks::get(&ctx.shared.db(), &args[1], &tierkv::ReadOptions::new())?;
    let s = match &rec {
        Some(r) => r.string()?,
        None => &[][..],
    };
    let len = s.len() as i64;
    if start < 0 && end < 0 && start > end {
        ctx.out.bulk(b"");
        return Ok(Flow::Continue);
    }
    let mut start = if start < 0 { len + start } else { start };
    let mut end = if end < 0 { len + end } else { end };
    start = start.max(0);
    end = end.max(0);
    if end >= len {
        end = len - 1;
    }
    if start > end || len == 0 {
        ctx.out.bulk(b"");
    } else {
        ctx.out.bulk(&s[start as usize..=end as usize]);
    }
    Ok(Flow::Continue)
}

/// SETRANGE key offset value: overwrites from `offset`, zero-padding; bounded by the
/// largest value the server accepts.
pub(super) fn setrange(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let offset = super::int_arg(&args[2])?;
    if offset < 0 {
        return Err(CmdError::err("offset is out of range"));
    }
    let value = &args[3];
    let max = ctx.shared.config.load().limits.max_bulk as u64;
    if !value.is_empty() && (offset as u64).saturating_add(value.len() as u64) > max {
        return Err(CmdError::err(TOO_BIG));
    }
    let offset = offset as usize;
    let mut len = 0usize;
    modify_string(ctx, &args[1], |cur| {
        let old = cur.unwrap_or_default();
        len = old.len();
        if value.is_empty() {
            // Nothing to write (and an absent key is not created).
            return None;
        }
        let mut v = old.to_vec();
        if v.len() < offset + value.len() {
            v.resize(offset + value.len(), 0);
        }
        v[offset..offset + value.len()].copy_from_slice(value);
        len = v.len();
        Some(v)
    })?;
    ctx.out.int(len as i64);
    Ok(Flow::Continue)
}

/// GETEX key [EX s | PX ms | EXAT ts | PXAT ts | PERSIST]: the string, and its deadline
/// changed in the same atomic step.
pub(super) fn getex(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    // None: leave the deadline; Some(None): PERSIST; Some(Some(d)): new deadline.
    let mut change: Option<Option<u64>> = None;
    let mut i = 2;
    while i < args.len() {
        let opt = args[i].to_ascii_uppercase();
        if opt == b"PERSIST" && change.is_none() {
            change = Some(None);
        } else if let (Some(e), true, true) =
            (ExpireOpt::parse(&opt), change.is_none(), i + 1 < args.len())
        {
            change = Some(Some(parse_expire_option(
                e,
                &args[i + 1],
                now_ms(ctx.shared),
                "getex",
            )?));
            i += 1;
        } else {
            return Err(CmdError::err(SYNTAX));
        }
        i += 1;
    }
    get_then(ctx, &args[1], |mk, r| {
        let new_deadline = change?;
        if new_deadline == r.deadline {
            return None;
        }
        let mut b = WriteBatch::new();
        ks::put(&mut b, mk, &r.raw, new_deadline);
        Some(b)
    })
}

/// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]: the longest common
/// subsequence of two strings (absent keys are empty), its length, or with IDX the
/// matching ranges (from the end, as Redis walks them) and the length. The table takes
/// (len1 + 1) x (len2 + 1) four-byte cells, refused past `proto-max-bulk-len`.
pub(super) fn lcs(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let (mut want_len, mut idx, mut with_len, mut min_len) = (false, false, false, 0u64);
    let mut i = 3;
    while i < args.len() {
        match args[i].to_ascii_uppercase().as_slice() {
            b"LEN" => want_len = true,
            b"IDX" => idx = true,
            b"WITHMATCHLEN" => with_len = true,
            b"MINMATCHLEN" if i + 1 < args.len() => {
                min_len = super::int_arg(&args[i + 1])?.max(0) as u64;
                i += 1;
            }
            _ => return Err(CmdError::err(SYNTAX)),
        }
        i += 1;
    }
    if want_len && idx {
        return Err(CmdError::err(
            "If you want both the length and indexes, please just use IDX.",
        ));
    }
    let string = |k: &[u8]| -> Result<Vec<u8>, CmdError> {
        match ks::get(&ctx.shared.db(), k, &tierkv::ReadOptions::new())? {
            None => Ok(Vec::new()),
            Some(r) => match r.kind()? {
                crate::keyspace::Kind::Str(s) => Ok(s.to_vec()),
                _ => Err(CmdError::err(
                    "The specified keys must contain string values",
                )),
            },
        }
    };
    let (a, b) = (string(&args[1])?, string(&args[2])?);
    let (alen, blen) = (a.len(), b.len());
    let cells = (alen as u64 + 1).saturating_mul(blen as u64 + 1);
    if cells.saturating_mul(4) > ctx.shared.config.load().limits.max_bulk as u64 {
        return Err(CmdError::err(
            "Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        ));
    }
    let w = blen + 1;
    let mut t = vec![0u32; (alen + 1) * w];
    for i in 1..=alen {
        for j in 1..=blen {
            t[i * w + j] = if a[i - 1] == b[j - 1] {
                t[(i - 1) * w + j - 1] + 1
            } else {
                t[(i - 1) * w + j].max(t[i * w + j - 1])
            };
        }
    }
    let total = t[alen * w + blen] as usize;
    if want_len {
        ctx.out.int(total as i64);
        return Ok(Flow::Continue);
    }
    // Walks back from the ends as Redis does, collecting the subsequence and the ranges.
    let mut result = vec![0u8; total];
    let mut ranges: Vec<[usize; 4]> = Vec::new();
    let (mut astart, mut aend, mut bstart, mut bend) = (alen, 0, 0, 0);
    let (mut i, mut j, mut k) = (alen, blen, total);
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            result[k - 1] = a[i - 1];
            if astart == alen {
                (astart, aend, bstart, bend) = (i - 1, i - 1, j - 1, j - 1);
            } else if astart == i && bstart == j {
                astart -= 1;
                bstart -= 1;
            } else {
                emit = true;
            }
            if astart == 0 || bstart == 0 {
                emit = true;
            }
            k -= 1;
            i -= 1;
            j -= 1;
        } else {
            if t[(i - 1) * w + j] > t[i * w + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            if astart != alen {
                emit = true;
            }
        }
        if emit {
            let len = aend - astart + 1;
            if min_len == 0 || len as u64 >= min_len {
                ranges.push([astart, aend, bstart, bend]);
            }
            astart = alen;
        }
    }
    if !idx {
        ctx.out.bulk(&result);
        return Ok(Flow::Continue);
    }
    ctx.out.map(2);
    ctx.out.bulk(b"matches");
    ctx.out.array(ranges.len());
    for [a0, a1, b0, b1] in ranges {
        ctx.out.array(2 + with_len as usize);
        ctx.out.array(2);
        ctx.out.int(a0 as i64);
        ctx.out.int(a1 as i64);
        ctx.out.array(2);
        ctx.out.int(b0 as i64);
        ctx.out.int(b1 as i64);
        if with_len {
            ctx.out.int((a1 - a0 + 1) as i64);
        }
    }
    ctx.out.bulk(b"len");
    ctx.out.int(total as i64);
    Ok(Flow::Continue)
}

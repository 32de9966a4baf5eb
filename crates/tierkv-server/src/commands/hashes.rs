//! Hash commands: HSET/HMSET, HSETNX, HGET, HMGET, HGETALL, HKEYS, HVALS, HDEL, HLEN,
//! HEXISTS, HSTRLEN, HINCRBY, HINCRBYFLOAT, HSCAN.
//!
//! A hash is a metadata record (version, field count, the key's deadline) plus one record
//! per field (see `keyspace`). Every write is one atomic step conditioned on the metadata
//! record, which it rewrites with the new count ([`edit`]); so writers of one hash are
//! serialised and the count stays exact. Multi-field reads (HGETALL, HKEYS, HVALS, HMGET)
//! read at one snapshot and are produced incrementally ([`Resume`]): a huge hash is bounded
//! by the connection's output limit, not held in memory.

use super::keys::{parse_scan_args, scan_step, SCAN_MAX_REPLY_BYTES};
use super::strings::{format_float, parse_float};
use super::{CmdError, CmdResult, Ctx, Flow, Resume};
use crate::keyspace::{self as ks, Coll, CollMeta};
use crate::resp::ReplyWriter;
use crate::state::{produce_in_steps, Shared};
use bytes::Bytes;
use rand::seq::index::sample;
use rand::Rng;
use std::collections::HashMap;
use tierkv::{Db, ReadOptions, WriteBatch};

/// The staged changes of one atomic hash step.
pub(super) struct HashEdit<'a> {
    db: &'a Db,
    key: &'a [u8],
    version: u64,
    len: u64,
    batch: WriteBatch,
    /// Fields written or deleted so far in this step (their new state).
    staged: HashMap<Vec<u8>, Option<Vec<u8>>>,
    changed: bool,
    /// An element was added (a sorted set's blocked poppers are woken).
    added: bool,
}

impl HashEdit<'_> {
    pub(super) fn get(&self, field: &[u8]) -> Result<Option<Vec<u8>>, CmdError> {
        if let Some(v) = self.staged.get(field) {
            return Ok(v.clone());
        }
        Ok(self.db.get(ks::field_key(self.key, self.version, field))?)
    }

    /// Sets a field; true when it is new.
    pub(super) fn set(&mut self, field: &[u8], value: &[u8]) -> Result<bool, CmdError> {
        let new = self.get(field)?.is_none();
        self.batch
            .put(ks::field_key(self.key, self.version, field), value);
        self.staged.insert(field.to_vec(), Some(value.to_vec()));
        self.len += new as u64;
        self.changed = true;
        self.added |= new;
        Ok(new)
    }

    /// The version this step's element records carry (a fresh one for a new collection).
    pub(super) fn version(&self) -> u64 {
        self.version
    }

    /// The element count after the step's changes so far.
    pub(super) fn len(&self) -> u64 {
        self.len
    }

    /// The step's batch, for records kept beside the elements (a sorted set's score
    /// records); the element records and the count go through [`Self::set`] / [`Self::del`].
    pub(super) fn batch(&mut self) -> &mut WriteBatch {
        &mut self.batch
    }

    /// Deletes a field; true when it existed.
    pub(super) fn del(&mut self, field: &[u8]) -> Result<bool, CmdError> {
        if self.get(field)?.is_none() {
            return Ok(false);
        }
        self.batch
            .delete(ks::field_key(self.key, self.version, field));
        self.staged.insert(field.to_vec(), None);
        self.len = self.len.saturating_sub(1);
        self.changed = true;
        Ok(true)
    }
}

/// Runs `f` on hash `key` as one atomic step (see [`edit_coll`]).
fn edit<T>(
    ctx: &Ctx<'_>,
    key: &[u8],
    f: impl FnMut(&mut HashEdit<'_>) -> Result<T, CmdError>,
) -> Result<T, CmdError> {
    edit_coll(ctx, key, Coll::Hash, f)
}

/// Runs `f` on collection `key` of type `coll` as one atomic step (retried when another
/// write to it races it); WRONGTYPE when the key holds another type. A missing collection
/// is created when `f` adds an element (with a fresh version); one left without elements
/// is deleted. `f` returns its result; an error writes nothing. The key's deadline is kept.
pub(super) fn edit_coll<T>(
    ctx: &Ctx<'_>,
    key: &[u8],
    coll: Coll,
    mut f: impl FnMut(&mut HashEdit<'_>) -> Result<T, CmdError>,
) -> Result<T, CmdError> {
    let db = &ctx.shared.db();
    let mk = ks::meta_key(key);
    loop {
        let mut seen: Option<Vec<u8>> = None;
        let r = edit_coll_once(ctx, db, key, &mk, coll, &mut f, &mut seen);
        // The step's reads of element and index records are not at the snapshot of its
        // metadata read: a writer committing in between makes them disagree, and the step
        // may fail on that mixed view (the rank index's "a count would go below zero")
        // where a completed step would only have been retried. An error from a step whose
        // metadata record has changed since is such a view's: run it again.
        if r.is_err() && db.get(&mk)?.as_deref() != seen.as_deref() {
            continue;
        }
        return r;
    }
}

/// One run of [`edit_coll`]'s step; `seen` gets the metadata record the step read.
fn edit_coll_once<T>(
    ctx: &Ctx<'_>,
    db: &tierkv::Db,
    key: &[u8],
    mk: &[u8],
    coll: Coll,
    f: &mut impl FnMut(&mut HashEdit<'_>) -> Result<T, CmdError>,
    seen: &mut Option<Vec<u8>>,
) -> Result<T, CmdError> {
    let mut out: Option<Result<T, CmdError>> = None;
    let mut added = false;
    let applied = ks::transact(db, &ctx.wopts(), &[mk], |cur| {
        added = false;
        *seen = cur[0].as_ref().map(|r| r.raw.clone());
        let cur = cur[0].as_ref();
        let (meta, deadline) = match cur.map(|r| r.coll(coll)).transpose() {
            Ok(Some(m)) => (Some(m), cur.and_then(|r| r.deadline)),
            Ok(None) => (None, None),
            Err(e) => {
                out = Some(Err(e));
                return None;
            }
        };
        let version = match meta {
            Some(m) => m.version,
            None => match ctx.shared.versions.next(db) {
                Ok(v) => v,
                Err(e) => {
                    out = Some(Err(e.into()));
                    return None;
                }
            },
        };
        let mut e = HashEdit {
            db,
            key,
            version,
            len: meta.map_or(0, |m| m.len),
            batch: WriteBatch::new(),
            staged: HashMap::new(),
            changed: false,
            added: false,
        };
        let r = f(&mut e);
        let ok = r.is_ok();
        out = Some(r);
        added = e.added;
        if !ok || !e.changed {
            return None;
        }
        let mut b = e.batch;
        if e.len == 0 {
            b.delete(mk);
        } else {
            let m = CollMeta::new(coll, version, e.len);
            ks::put(&mut b, mk, &ks::coll_value(m), deadline);
        }
        Some(b)
    })?;
    if applied && added && coll == Coll::ZSet {
        ctx.shared.blocked_keys.pushed(key);
    }
    out.unwrap_or_else(|| Err(CmdError::err("internal error: hash step did not run")))
}

/// The STORE forms' step (SINTERSTORE, ZUNIONSTORE, BITOP ...): replaces `dst` (whatever
/// its type) with a new value: `fill` adds a new collection's element records to the batch
/// at the version it is given and returns the encoded top-level value (a collection's
/// metadata, a string), or `None` for an empty result (then `dst` is deleted). One atomic
/// step conditioned on `dst`'s record; the old value's elements are removed with it (the
/// rest, past the inline bound, right after). The new value has no deadline, and wakes the
/// clients blocked on `dst` when there is one.
pub(super) fn replace_key(
    ctx: &Ctx<'_>,
    dst: &[u8],
    mut fill: impl FnMut(&mut WriteBatch, u64) -> Option<Vec<u8>>,
) -> Result<(), CmdError> {
    let db = &ctx.shared.db();
    let dmk = ks::meta_key(dst);
    let version = ctx.shared.versions.next(db)?;
    let mut err = None;
    let mut leftover = None;
    let mut filled = false;
    ks::transact(db, &ctx.wopts(), &[&dmk], |cur| {
        err = None;
        leftover = None;
        let mut b = WriteBatch::new();
        if let Some(old) = cur[0].as_ref() {
            match ks::delete_value(db, &mut b, dst, old) {
                Ok(l) => leftover = l,
                Err(e) => {
                    err = Some(e);
                    return None;
                }
            }
        }
        let value = fill(&mut b, version);
        filled = value.is_some();
        if let Some(v) = value {
            ks::put(&mut b, &dmk, &v, None);
        }
        (!b.is_empty()).then_some(b)
    })?;
    if let Some(e) = err {
        return Err(e);
    }
    if let Some(v) = leftover {
        ks::drop_fields(db, &ctx.wopts(), dst, v)?;
    }
    if filled {
        ctx.shared.blocked_keys.pushed(dst);
    }
    Ok(())
}

/// The hash metadata of `key` (None: no such key), WRONGTYPE for another type.
fn meta(db: &Db, key: &[u8], ropts: &ReadOptions) -> Result<Option<CollMeta>, CmdError> {
    coll_meta(db, key, ropts, Coll::Hash)
}

/// The metadata of collection `key` of type `coll` (None: no such key), WRONGTYPE for
/// another type.
pub(super) fn coll_meta(
    db: &Db,
    key: &[u8],
    ropts: &ReadOptions,
    coll: Coll,
) -> Result<Option<CollMeta>, CmdError> {
    ks::get(db, key, ropts)?.map(|r| r.coll(coll)).transpose()
}

fn check_pairs(args: &[Bytes], name: &str) -> Result<(), CmdError> {
    if args.len() < 4 || !args.len().is_multiple_of(2) {
        return Err(CmdError::err(format!(
            "wrong number of arguments for '{name}' command"
        )));
    }
    Ok(())
}

/// HSET key field value [field value ...] (number of new fields); HMSET (OK).
pub(super) fn hset(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let hmset = args[0].eq_ignore_ascii_case(b"hmset");
    check_pairs(args, if hmset { "hmset" } else { "hset" })?;
    let added = edit(ctx, &args[1], |e| {
        let mut n = 0i64;
        for fv in args[2..].chunks_exact(2) {
            n += e.set(&fv[0], &fv[1])? as i64;
        }
        Ok(n)
    })?;
    if hmset {
        ctx.out.ok();
    } else {
        ctx.out.int(added);
    }
    Ok(Flow::Continue)
}

pub(super) fn hsetnx(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let set = edit(ctx, &args[1], |e| {
        if e.get(&args[2])?.is_some() {
            return Ok(false);
        }
        e.set(&args[2], &args[3])
    })?;
    ctx.out.int(set as i64);
    Ok(Flow::Continue)
}

pub(super) fn hdel(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    remove_elements(ctx, args, Coll::Hash)
}

/// HDEL and SREM: removes the elements `args[2..]` of collection `args[1]` of type `coll`
/// and answers how many it held (0 for a missing key, which is left missing).
pub(super) fn remove_elements(ctx: &mut Ctx<'_>, args: &[Bytes], coll: Coll) -> CmdResult {
    if coll_meta(&ctx.shared.db(), &args[1], &ReadOptions::new(), coll)?.is_none() {
        ctx.out.int(0);
        return Ok(Flow::Continue);
    }
    let n = edit_coll(ctx, &args[1], coll, |e| {
        let mut n = 0i64;
        for element in &args[2..] {
            n += e.del(element)? as i64;
        }
        Ok(n)
    })?;
    ctx.out.int(n);
    Ok(Flow::Continue)
}

pub(super) fn hget(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let db = &ctx.shared.db();
    let snap = db.snapshot();
    let ropts = ReadOptions {
        snapshot: Some(snap.seq()),
        ..ReadOptions::new()
    };
    let v = match meta(db, &args[1], &ropts)? {
        Some(m) => db.get_opt(ks::field_key(&args[1], m.version, &args[2]), &ropts)?,
        None => None,
    };
    ctx.out.opt_bulk_owned(v);
    Ok(Flow::Continue)
}

pub(super) fn hexists(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    hget_then(ctx, args, |out, v| out.int(v.is_some() as i64))
}

pub(super) fn hstrlen(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    hget_then(ctx, args, |out, v| out.int(v.map_or(0, |v| v.len()) as i64))
}

fn hget_then(
    ctx: &mut Ctx<'_>,
    args: &[Bytes],
    reply: impl FnOnce(&mut ReplyWriter, Option<Vec<u8>>),
) -> CmdResult {
    let db = &ctx.shared.db();
    let snap = db.snapshot();
    let ropts = ReadOptions {
        snapshot: Some(snap.seq()),
        ..ReadOptions::new()
    };
    let v = match meta(db, &args[1], &ropts)? {
        Some(m) => db.get_opt(ks::field_key(&args[1], m.version, &args[2]), &ropts)?,
        None => None,
    };
    reply(ctx.out, v);
    Ok(Flow::Continue)
}

pub(super) fn hlen(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let n = meta(&ctx.shared.db(), &args[1], &ReadOptions::new())?.map_or(0, |m| m.len);
    ctx.out.int(n as i64);
    Ok(Flow::Continue)
}

pub(super) fn hincrby(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let delta = super::int_arg(&args[3])?;
    let n = edit(ctx, &args[1], |e| {
        let old = match e.get(&args[2])? {
            None => 0,
            Some(v) => crate::resp::parse_int(&v)
                .ok_or_else(|| CmdError::err("hash value is not an integer"))?,
        };
        let new = old
            .checked_add(delta)
            .ok_or_else(|| CmdError::err("increment or decrement would overflow"))?;
        e.set(&args[2], new.to_string().as_bytes())?;
        Ok(new)
    })?;
    ctx.out.int(n);
    Ok(Flow::Continue)
}

pub(super) fn hincrbyfloat(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let incr = parse_float(&args[3]).ok_or_else(|| CmdError::err("value is not a valid float"))?;
    let s = edit(ctx, &args[1], |e| {
        let old = match e.get(&args[2])? {
            None => 0.0,
            Some(v) => parse_float(&v).ok_or_else(|| CmdError::err("hash value is not a float"))?,
        };
        let new = old + incr;
        if !new.is_finite() {
            return Err(CmdError::err("increment would produce NaN or Infinity"));
        }
        let s = format_float(new);
        e.set(&args[2], s.as_bytes())?;
        Ok(s)
    })?;
    ctx.out.bulk(s.as_bytes());
    Ok(Flow::Continue)
}

/// Which parts of each field a listing reply carries.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Parts {
    Both,
    Keys,
    Values,
}

/// HGETALL (a map), HKEYS, HVALS (arrays): the count is the metadata's, read at the same
/// snapshot as the fields, so the header is exact before any field is read.
pub(super) fn hgetall(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let parts = match args[0].to_ascii_lowercase().as_slice() {
        b"hkeys" => Parts::Keys,
        b"hvals" => Parts::Values,
        _ => Parts::Both,
    };
    list_elements(ctx, &args[1], Coll::Hash, parts)
}

/// Every element of collection `key` of type `coll` (fields, values or both), produced
/// incrementally (see [`FieldsRest`]).
pub(super) fn list_elements(ctx: &mut Ctx<'_>, key: &[u8], coll: Coll, parts: Parts) -> CmdResult {
    let db = &ctx.shared.db();
    let snap = db.snapshot();
    let ropts = ReadOptions {
        snapshot: Some(snap.seq()),
        ..ReadOptions::new()
    };
    let Some(m) = coll_meta(db, key, &ropts, coll)? else {
        if parts == Parts::Both {
            ctx.out.map(0);
        } else {
            ctx.out.array(0);
        }
        return Ok(Flow::Continue);
    };
    if parts == Parts::Both {
        ctx.out.map(m.len as usize);
    } else {
        ctx.out.array(m.len as usize);
    }
    let rest = Box::new(FieldsRest {
        snap,
        prefix: ks::field_prefix(key, m.version),
        next: None,
        remaining: m.len,
        parts,
    });
    ctx.conn.resume = rest.resume(ctx.shared, ctx.out, ctx.shared.config.load().reply_chunk);
    Ok(Flow::Continue)
}

/// The `remaining` elements of a collection from engine key `first` on (under `prefix`),
/// read at `snap` and produced incrementally (LRANGE's reply after its header).
pub(super) fn elements_from(
    snap: tierkv::Snapshot,
    prefix: Vec<u8>,
    first: Vec<u8>,
    remaining: u64,
    parts: Parts,
) -> Box<dyn Resume> {
    Box::new(FieldsRest {
        snap,
        prefix,
        next: Some(first),
        remaining,
        parts,
    })
}

/// Replies of at most this many elements read through the block cache (filling it).
const CACHED_REPLY_ELEMENTS: u64 = 1024;

/// The part of an HGETALL / HKEYS / HVALS reply not produced yet.
struct FieldsRest {
    snap: tierkv::Snapshot,
    /// The fields' common engine key prefix.
    prefix: Vec<u8>,
    /// The engine key to resume at (None: the first field).
    next: Option<Vec<u8>>,
    /// Elements (fields) still owed: the header promised them.
    remaining: u64,
    parts: Parts,
}

impl FieldsRest {
    fn emit(&self, out: &mut ReplyWriter, field: &[u8], value: &[u8]) {
        if self.parts != Parts::Values {
            out.bulk(field);
        }
        if self.parts != Parts::Keys {
            out.bulk(value);
        }
    }

    fn step(
        &mut self,
        shared: &Shared,
        out: &mut ReplyWriter,
        chunk: usize,
    ) -> tierkv::Result<bool> {
        let ropts = ReadOptions {
            snapshot: Some(self.snap.seq()),
            lower_bound: Some(self.next.clone().unwrap_or_else(|| self.prefix.clone())),
            upper_bound: ks::prefix_end(&self.prefix),
            // A short reply (an LRANGE of a few hundred, a small hash) is what clients
            // repeat: its blocks stay cached. A long one is a scan, kept out of the cache.
            fill_cache: self.remaining <= CACHED_REPLY_ELEMENTS,
            // The metadata counts the fields still to read.
            scan_length_hint: usize::try_from(self.remaining).ok(),
        };
        let mut it = shared.db().iter_opt(&ropts)?;
        it.seek_to_first()?;
        while it.valid() && self.remaining > 0 {
            let field = &it.key()[self.prefix.len()..];
            self.emit(out, field, it.value());
            self.remaining -= 1;
            it.next()?;
            if out.overflowed() {
                return Ok(true);
            }
            if out.len() >= chunk && self.remaining > 0 && it.valid() {
                self.next = Some(it.key().to_vec());
                return Ok(false);
            }
        }
        // Fewer fields than the metadata counts would break the reply's framing: never
        // expected (both are written in one batch), but the header's promise is kept.
        if self.remaining > 0 {
            tracing::error!(
                "collection element count mismatch: {} elements missing under {:?}",
                self.remaining,
                String::from_utf8_lossy(&self.prefix)
            );
            while self.remaining > 0 {
                self.emit(out, b"", b"");
                self.remaining -= 1;
            }
        }
        Ok(true)
    }
}

impl Resume for FieldsRest {
    fn resume(
        mut self: Box<Self>,
        shared: &Shared,
        out: &mut ReplyWriter,
        chunk: usize,
    ) -> Option<Box<dyn Resume>> {
        match self.step(shared, out, chunk) {
            Ok(true) => None,
            Ok(false) => Some(self),
            Err(e) => {
                // The header is out: the rest of the elements carry the error.
                let msg = CmdError::from(e).0;
                let per = if self.parts == Parts::Both { 2 } else { 1 };
                for _ in 0..self.remaining.saturating_mul(per).min(1 << 20) {
                    out.error(&msg);
                }
                None
            }
        }
    }
}

/// HMGET key field [field ...]: one snapshot, produced incrementally like MGET.
pub(super) fn hmget(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let db = &ctx.shared.db();
    let snap = db.snapshot();
    let ropts = ReadOptions {
        snapshot: Some(snap.seq()),
        ..ReadOptions::new()
    };
    let version = meta(db, &args[1], &ropts)?.map(|m| m.version);
    let rest = Box::new(HmgetRest {
        snap,
        version,
        args: args.to_vec(),
        next: 2,
    });
    ctx.out.array(args.len() - 2);
    ctx.conn.resume = rest.resume(ctx.shared, ctx.out, ctx.shared.config.load().reply_chunk);
    Ok(Flow::Continue)
}

struct HmgetRest {
    snap: tierkv::Snapshot,
    /// The hash's version (None: no such hash, every field is nil).
    version: Option<u64>,
    args: Vec<Bytes>,
    next: usize,
}

impl Resume for HmgetRest {
    fn resume(
        mut self: Box<Self>,
        shared: &Shared,
        out: &mut ReplyWriter,
        chunk: usize,
    ) -> Option<Box<dyn Resume>> {
        let ropts = ReadOptions {
            snapshot: Some(self.snap.seq()),
            ..ReadOptions::new()
        };
        let (args, version) = (&self.args, self.version);
        let more = produce_in_steps(
            &mut self.next,
            args.len(),
            out,
            chunk,
            |i, out| match version {
                None => out.null(),
                Some(v) => {
                    let fk = ks::field_key(&args[1], v, &args[i]);
                    match shared.db().get_opt(fk, &ropts) {
                        Ok(v) => out.opt_bulk_owned(v),
                        Err(e) => out.error(&CmdError::from(e).0),
                    }
                }
            },
        );
        more.then_some(self as Box<dyn Resume>)
    }
}

/// Picks from `all` as SRANDMEMBER's (and HRANDFIELD's) count asks: `count` distinct members (all of them
/// when fewer), or, for a negative count, `-count` members that may repeat.
pub(super) fn pick<T: Clone>(all: &[T], count: i64) -> Vec<T> {
    let mut rng = rand::thread_rng();
    if all.is_empty() {
        return Vec::new();
    }
    if count < 0 {
        let n = count.unsigned_abs().min(u32::MAX as u64) as usize;
        return (0..n)
            .map(|_| all[rng.gen_range(0..all.len())].clone())
            .collect();
    }
    let n = (count as usize).min(all.len());
    sample(&mut rng, all.len(), n)
        .into_iter()
        .map(|i| all[i].clone())
        .collect()
}

/// HRANDFIELD key [count [WITHVALUES]]: random fields (distinct for a positive count,
/// possibly repeated for a negative one), read at one snapshot.
pub(super) fn hrandfield(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let (count, with_values) = match args.len() {
        2 => (None, false),
        3 => (Some(super::int_arg(&args[2])?), false),
        4 if args[3].eq_ignore_ascii_case(b"withvalues") => (Some(super::int_arg(&args[2])?), true),
        _ => return Err(CmdError::err(super::SYNTAX)),
    };
    let db = &ctx.shared.db();
    let snap = db.snapshot();
    let ropts = ReadOptions {
        snapshot: Some(snap.seq()),
        ..ReadOptions::new()
    };
    let mut all: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    if let Some(m) = meta(db, &args[1], &ropts)? {
        let mut it = db.iter_opt(&ks::field_ropts(&args[1], m.version, ropts.snapshot))?;
        it.seek_to_first()?;
        let plen = ks::field_prefix(&args[1], m.version).len();
        while it.valid() {
            all.push((it.key()[plen..].to_vec(), it.value().to_vec()));
            it.next()?;
        }
    }
    let Some(count) = count else {
        let one = pick(&all, 1);
        ctx.out.opt_bulk(one.first().map(|(f, _)| f.as_slice()));
        return Ok(Flow::Continue);
    };
    let picked = pick(&all, count);
    let resp3 = ctx.conn.proto == crate::resp::Proto::Resp3;
    ctx.out
        .array(picked.len() * if with_values && !resp3 { 2 } else { 1 });
    for (f, v) in &picked {
        if with_values {
            if resp3 {
                ctx.out.array(2);
            }
            ctx.out.bulk(f);
            ctx.out.bulk(v);
        } else {
            ctx.out.bulk(f);
        }
    }
    Ok(Flow::Continue)
}

/// HSCAN key cursor [MATCH pattern] [COUNT count] [NOVALUES]: fields in field order, the
/// reply bounded by COUNT and by the connection's output bound.
pub(super) fn hscan(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    scan_elements(ctx, args, Coll::Hash, <[u8]>::to_vec)
}

/// HSCAN and SSCAN: a step over collection `args[1]` of type `coll` (a set's members
/// without their empty values).
pub(super) fn scan_elements(
    ctx: &mut Ctx<'_>,
    args: &[Bytes],
    coll: Coll,
    value: fn(&[u8]) -> Vec<u8>,
) -> CmdResult {
    let mut sa = parse_scan_args(ctx, args, true)?;
    if coll == Coll::ZSet && sa.novalues {
        return Err(CmdError::err(super::SYNTAX));
    }
    sa.novalues |= coll == Coll::Set;
    let Some(m) = coll_meta(&ctx.shared.db(), &args[1], &ReadOptions::new(), coll)? else {
        ctx.out.array(2);
        ctx.out.bulk(b"0");
        ctx.out.array(0);
        return Ok(Flow::Continue);
    };
    let base = ks::field_prefix(&args[1], m.version);
    let mut items: Vec<Vec<u8>> = Vec::new();
    let max_bytes = SCAN_MAX_REPLY_BYTES.min(ctx.shared.config.load().reply_chunk);
    let next = scan_step(ctx, &base, &sa, max_bytes, |f, v| {
        items.push(f.to_vec());
        if sa.novalues {
            f.len()
        } else {
            let v = value(v);
            let n = f.len() + v.len();
            items.push(v);
            n
        }
    })?;
    ctx.out.array(2);
    ctx.out.bulk(next.to_string().as_bytes());
    ctx.out.array(items.len());
    for i in &items {
        ctx.out.bulk(i);
    }
    Ok(Flow::Continue)
}

//! Set commands: SADD, SREM, SCARD, SISMEMBER, SMISMEMBER, SMEMBERS, SRANDMEMBER, SPOP,
//! SMOVE, SINTER, SUNION, SDIFF and their STORE forms, SINTERCARD, SSCAN.
//!
//! A set is a collection (`keyspace::Coll::Set`): a metadata record (version, member
//! count, the key's deadline) plus one record per member with an empty value, the layout
//! of a hash's fields. Writes go through the hashes' atomic step (`hashes::edit_coll`),
//! so the count stays exact; SMEMBERS is produced incrementally as HKEYS is. The algebra
//! commands (SINTER ...) read their sources at one snapshot and build the result in
//! memory, as Redis does.

use super::hashes::{
    coll_meta, edit_coll, list_elements, pick, remove_elements, replace_key, scan_elements, Parts,
};
use super::{int_arg, CmdError, CmdResult, Ctx, Flow};
use crate::keyspace::{self as ks, Coll, CollMeta};
use bytes::Bytes;
use std::collections::BTreeSet;
use tierkv::{Db, ReadOptions, WriteBatch};

/// The members of set `key` at `ropts` in key order (empty for a missing key), WRONGTYPE
/// for another type.
fn members(db: &Db, key: &[u8], ropts: &ReadOptions) -> Result<Vec<Vec<u8>>, CmdError> {
    let Some(m) = coll_meta(db, key, ropts, Coll::Set)? else {
        return Ok(Vec::new());
    };
    read_members(db, key, m, ropts)
}

fn read_members(
    db: &Db,
    key: &[u8],
    m: CollMeta,
    ropts: &ReadOptions,
) -> Result<Vec<Vec<u8>>, CmdError> {
    let mut it = db.iter_opt(&ReadOptions {
        scan_length_hint: usize::try_from(m.len).ok(),
        ..ks::field_ropts(key, m.version, ropts.snapshot)
    })?;
    it.seek_to_first()?;
    let plen = ks::field_prefix(key, m.version).len();
    let mut out = Vec::with_capacity(usize::try_from(m.len).unwrap_or(0).min(1 << 16));
    while it.valid() {
        out.push(it.key()[plen..].to_vec());
        it.next()?;
    }
    Ok(out)
}

/// Read options at a fresh snapshot, and the snapshot (kept alive by the caller).
pub(super) fn at_snapshot(db: &Db) -> (tierkv::Snapshot, ReadOptions) {
    let snap = db.snapshot();
    let ropts = ReadOptions {
        snapshot: Some(snap.seq()),
        ..ReadOptions::new()
    };
    (snap, ropts)
}

pub(super) fn sadd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let added = edit_coll(ctx, &args[1], Coll::Set, |e| {
        let mut n = 0i64;
        for m in &args[2..] {
            n += e.set(m, b"")? as i64;
        }
        Ok(n)
    })?;
    ctx.out.int(added);
    Ok(Flow::Continue)
}

pub(super) fn srem(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    remove_elements(ctx, args, Coll::Set)
}

pub(super) fn scard(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let m = coll_meta(&ctx.shared.db(), &args[1], &ReadOptions::new(), Coll::Set)?;
    ctx.out.int(m.map_or(0, |m| m.len) as i64);
    Ok(Flow::Continue)
}

/// SISMEMBER key member (0/1) and SMISMEMBER key member... (an array of them).
pub(super) fn sismember(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let many = args[0].eq_ignore_ascii_case(b"smismember");
    let db = &ctx.shared.db();
    let (_snap, ropts) = at_snapshot(db);
    let m = coll_meta(db, &args[1], &ropts, Coll::Set)?;
    let mut found = Vec::with_capacity(args.len() - 2);
    for member in &args[2..] {
        found.push(match m {
            Some(m) => db
                .get_opt(ks::field_key(&args[1], m.version, member), &ropts)?
                .is_some(),
            None => false,
        });
    }
    if many {
        ctx.out.array(found.len());
    }
    for f in found {
        ctx.out.int(f as i64);
    }
    Ok(Flow::Continue)
}

pub(super) fn smembers(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    list_elements(ctx, &args[1], Coll::Set, Parts::Keys)
}

pub(super) fn sscan(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    scan_elements(ctx, args, Coll::Set, <[u8]>::to_vec)
}

/// The optional count argument of SRANDMEMBER / SPOP.
fn count_arg(args: &[Bytes]) -> Result<Option<i64>, CmdError> {
    match args.len() {
        2 => Ok(None),
        3 => Ok(Some(int_arg(&args[2])?)),
        _ => Err(CmdError::err(super::SYNTAX)),
    }
}

pub(super) fn srandmember(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let count = count_arg(args)?;
    let (_snap, ropts) = at_snapshot(&ctx.shared.db());
    let all = members(&ctx.shared.db(), &args[1], &ropts)?;
    match count {
        None => ctx.out.opt_bulk(pick(&all, 1).first().map(Vec::as_slice)),
        Some(c) => {
            let picked = pick(&all, c);
            ctx.out.array(picked.len());
            for m in &picked {
                ctx.out.bulk(m);
            }
        }
    }
    Ok(Flow::Continue)
}

pub(super) fn spop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let count = count_arg(args)?;
    if count.is_some_and(|c| c < 0) {
        return Err(CmdError::err("value is out of range, must be positive"));
    }
    let db = ctx.shared.db().clone();
    if coll_meta(&db, &args[1], &ReadOptions::new(), Coll::Set)?.is_none() {
        match count {
            None => ctx.out.null(),
            Some(_) => ctx.out.array(0),
        }
        return Ok(Flow::Continue);
    }
    // Chosen inside the atomic step, from the members it sees (a racing write retries it).
    let popped = edit_coll(ctx, &args[1], Coll::Set, |e| {
        let all = members(&db, &args[1], &ReadOptions::new())?;
        let picked = pick(&all, count.unwrap_or(1));
        for m in &picked {
            e.del(m)?;
        }
        Ok(picked)
    })?;
    match count {
        None => ctx.out.opt_bulk(popped.first().map(Vec::as_slice)),
        Some(_) => {
            ctx.out.array(popped.len());
            for m in &popped {
                ctx.out.bulk(m);
            }
        }
    }
    Ok(Flow::Continue)
}

/// SMOVE src dst member: one atomic step over both keys' metadata records.
pub(super) fn smove(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let (src, dst, member) = (&args[1], &args[2], &args[3]);
    let db = &ctx.shared.db();
    let (smk, dmk) = (ks::meta_key(src), ks::meta_key(dst));
    let mut moved = Ok(false);
    ks::transact(db, &ctx.wopts(), &[&smk, &dmk], |cur| {
        moved = Ok(false);
        let metas = cur
            .iter()
            .map(|r| r.as_ref().map(|r| r.coll(Coll::Set)).transpose())
            .collect::<Result<Vec<_>, _>>();
        let (s, d) = match metas {
            Ok(m) => (m[0], m[1]),
            Err(e) => {
                moved = Err(e);
                return None;
            }
        };
        let s = s?;
        let has = |m: CollMeta, key: &[u8]| {
            db.get(ks::field_key(key, m.version, member))
                .map(|v| v.is_some())
        };
        match has(s, src) {
            Ok(true) => {}
            Ok(false) => return None,
            Err(e) => {
                moved = Err(e.into());
                return None;
            }
        }
        moved = Ok(true);
        if src == dst {
            return None;
        }
        let mut b = WriteBatch::new();
        b.delete(ks::field_key(src, s.version, member));
        let s_left = CollMeta {
            len: s.len - 1,
            ..s
        };
        if s_left.len == 0 {
            b.delete(&smk);
        } else {
            ks::put(
                &mut b,
                &smk,
                &ks::coll_value(s_left),
                cur[0].as_ref()?.deadline,
            );
        }
        let d = match d {
            Some(d) => match has(d, dst) {
                Ok(true) => return Some(b),
                Ok(false) => d,
                Err(e) => {
                    moved = Err(e.into());
                    return None;
                }
            },
            None => match ctx.shared.versions.next(db) {
                Ok(version) => CollMeta::new(Coll::Set, version, 0),
                Err(e) => {
                    moved = Err(e.into());
                    return None;
                }
            },
        };
        b.put(ks::field_key(dst, d.version, member), b"");
        let d_deadline = cur[1].as_ref().and_then(|r| r.deadline);
        let grown = CollMeta {
            len: d.len + 1,
            ..d
        };
        ks::put(&mut b, &dmk, &ks::coll_value(grown), d_deadline);
        Some(b)
    })?;
    ctx.out.int(moved? as i64);
    Ok(Flow::Continue)
}

/// The set algebra of SINTER / SUNION / SDIFF.
#[derive(Clone, Copy)]
enum Op {
    Inter,
    Union,
    Diff,
}

impl Op {
    fn of(name: &[u8]) -> Op {
        let name = name.to_ascii_lowercase();
        if name.starts_with(b"sinter") {
            Op::Inter
        } else if name.starts_with(b"sunion") {
            Op::Union
        } else {
            Op::Diff
        }
    }
}

/// `op` over the sets `keys`, read at one snapshot (a missing key is an empty set).
fn combine(db: &Db, op: Op, keys: &[Bytes]) -> Result<BTreeSet<Vec<u8>>, CmdError> {
    let (_snap, ropts) = at_snapshot(db);
    let mut sets = Vec::with_capacity(keys.len());
    for k in keys {
        sets.push(members(db, k, &ropts)?);
    }
    let mut it = sets.into_iter();
    let mut acc: BTreeSet<Vec<u8>> = it.next().unwrap_or_default().into_iter().collect();
    for s in it {
        let s: BTreeSet<Vec<u8>> = s.into_iter().collect();
        match op {
            Op::Inter => acc.retain(|m| s.contains(m)),
            Op::Union => acc.extend(s),
            Op::Diff => acc.retain(|m| !s.contains(m)),
        }
    }
    Ok(acc)
}

/// SINTER / SUNION / SDIFF key [key ...]: the members, in key order.
pub(super) fn algebra(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let result = combine(&ctx.shared.db(), Op::of(&args[0]), &args[1..])?;
    ctx.out.array(result.len());
    for m in &result {
        ctx.out.bulk(m);
    }
    Ok(Flow::Continue)
}

/// SINTERSTORE / SUNIONSTORE / SDIFFSTORE dst key [key ...]: replaces `dst` (whatever its
/// type) with the result, or deletes it when the result is empty; answers the count.
pub(super) fn algebra_store(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let db = &ctx.shared.db();
    let result = combine(db, Op::of(&args[0]), &args[2..])?;
    let dst = &args[1];
    replace_key(ctx, dst, |b, version| {
        if result.is_empty() {
            return None;
        }
        for m in &result {
            b.put(ks::field_key(dst, version, m), b"");
        }
        Some(ks::coll_value(CollMeta::new(
            Coll::Set,
            version,
            result.len() as u64,
        )))
    })?;
    ctx.out.int(result.len() as i64);
    Ok(Flow::Continue)
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit].
pub(super) fn sintercard(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let numkeys = int_arg(&args[1])?;
    if numkeys <= 0 {
        return Err(CmdError::err("numkeys should be greater than 0"));
    }
    let numkeys = numkeys as usize;
    if args.len() < 2 + numkeys {
        return Err(CmdError::err(
            "Number of keys can't be greater than number of args",
        ));
    }
    let mut limit = 0usize;
    let rest = &args[2 + numkeys..];
    match rest {
        [] => {}
        [opt, n] if opt.eq_ignore_ascii_case(b"limit") => {
            let n = int_arg(n)?;
            if n < 0 {
                return Err(CmdError::err("LIMIT can't be negative"));
            }
            limit = n as usize;
        }
        _ => return Err(CmdError::err(super::SYNTAX)),
    }
    let result = combine(&ctx.shared.db(), Op::Inter, &args[2..2 + numkeys])?;
    let n = if limit == 0 {
        result.len()
    } else {
        result.len().min(limit)
    };
    ctx.out.int(n as i64);
    Ok(Flow::Continue)
}

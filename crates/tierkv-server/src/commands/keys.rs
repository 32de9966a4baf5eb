//! Keyspace commands: DEL/UNLINK, EXISTS, TYPE, SCAN, DBSIZE (every type; the records
//! are the server keyspace's top-level ones, `keyspace::META` + key).

use super::{CmdError, CmdResult, Ctx, Flow, SYNTAX};
use crate::glob::Glob;
use crate::keyspace::{self as ks, prefix_end};
use bytes::Bytes;

/// Most key bytes one SCAN call returns, whatever COUNT says (COUNT is a hint in Redis
/// too); bounds the reply's memory.
pub(super) const SCAN_MAX_REPLY_BYTES: usize = 8 * 1024 * 1024;

pub(super) fn del(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let mut removed = 0i64;
    for key in &args[1..] {
        removed += delete_key(ctx, key)? as i64;
    }
    ctx.out.int(removed);
    Ok(Flow::Continue)
}

/// Deletes Redis key `key` of any type (a hash with its fields); true if it existed.
pub(super) fn delete_key(ctx: &Ctx<'_>, key: &[u8]) -> Result<bool, CmdError> {
    let db = &ctx.shared.db();
    let wopts = ctx.wopts();
    // An absent key is the common no-op: report it from a read without writing a
    // tombstone. A present one is deleted in an atomic step so the count is exact even
    // when another client deletes it concurrently.
    if ks::get(db, key, &tierkv::ReadOptions::new())?.is_none() {
        return Ok(false);
    }
    let mk = ks::meta_key(key);
    let mut existed = false;
    let mut leftover = None;
    let mut err = None;
    ks::transact(db, &wopts, &[&mk], |cur| {
        existed = false;
        leftover = None;
        err = None;
        let r = cur[0].as_ref()?;
        existed = true;
        let mut b = tierkv::WriteBatch::new();
        match ks::delete_value(db, &mut b, key, r) {
            Ok(l) => leftover = l,
            Err(e) => {
                err = Some(e);
                return None;
            }
        }
        Some(b)
    })?;
    if let Some(e) = err {
        return Err(e);
    }
    if let Some(v) = leftover {
        ks::drop_fields(db, &wopts, key, v)?;
    }
    Ok(existed)
}

pub(super) fn exists(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let db = &ctx.shared.db();
    let mut n = 0i64;
    for key in &args[1..] {
        n += db.get(ks::meta_key(key))?.is_some() as i64;
    }
    ctx.out.int(n);
    Ok(Flow::Continue)
}

pub(super) fn type_(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let t = match ks::get(&ctx.shared.db(), &args[1], &tierkv::ReadOptions::new())? {
        Some(r) => r.type_name(),
        None => "none",
    };
    ctx.out.simple(t);
    Ok(Flow::Continue)
}

/// The options of SCAN / HSCAN, parsed.
pub(super) struct ScanArgs {
    /// The engine key to resume at (empty: from the start).
    pub resume: Vec<u8>,
    pub pattern: Option<Glob>,
    pub count: usize,
    /// TYPE filter (SCAN only), lower-cased.
    pub type_: Option<Vec<u8>>,
    /// NOVALUES (HSCAN only).
    pub novalues: bool,
}

/// Parses `cursor [MATCH pattern] [COUNT count] [TYPE type | NOVALUES]` from `args[1..]`.
pub(super) fn parse_scan_args(
    ctx: &Ctx<'_>,
    args: &[Bytes],
    hscan: bool,
) -> Result<ScanArgs, CmdError> {
    let cursor_arg = &args[if hscan { 2 } else { 1 }];
    let cursor: u64 = std::str::from_utf8(cursor_arg)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| CmdError::err("invalid cursor"))?;
    let mut sa = ScanArgs {
        resume: Vec::new(),
        pattern: None,
        count: 10,
        type_: None,
        novalues: false,
    };
    let mut i = if hscan { 3 } else { 2 };
    while i < args.len() {
        let opt = args[i].to_ascii_uppercase();
        if hscan && opt == b"NOVALUES" {
            sa.novalues = true;
            i += 1;
            continue;
        }
        let val = args.get(i + 1).ok_or_else(|| CmdError::err(SYNTAX))?;
        match opt.as_slice() {
            b"MATCH" => sa.pattern = Some(Glob::new(val)),
            b"COUNT" => {
                let n = super::int_arg(val)?;
                if n < 1 {
                    return Err(CmdError::err(SYNTAX));
                }
                sa.count = usize::try_from(n).unwrap_or(usize::MAX);
            }
            b"TYPE" if !hscan => sa.type_ = Some(val.to_ascii_lowercase()),
            _ => return Err(CmdError::err(SYNTAX)),
        }
        i += 2;
    }
    sa.pattern = sa.pattern.filter(|p| !p.matches_all());
    if cursor != 0 {
        sa.resume = ctx.shared.cursors.lock().get(cursor).ok_or_else(|| {
            CmdError::err("invalid cursor (unknown, or expired from the server's cursor table)")
        })?;
    }
    Ok(sa)
}

/// One SCAN-style step over the records under `base` (an engine key prefix): examines up to
/// `count` records from the cursor, passes each whose name (the key after `base`) matches
/// the pattern to `take` with its value, and stops early once `take` has reported
/// `max_bytes`. Returns the next cursor (0: done).
pub(super) fn scan_step(
    ctx: &Ctx<'_>,
    base: &[u8],
    sa: &ScanArgs,
    max_bytes: usize,
    mut take: impl FnMut(&[u8], &[u8]) -> usize,
) -> Result<u64, CmdError> {
    let mut prefix = base.to_vec();
    if let Some(p) = &sa.pattern {
        prefix.extend_from_slice(&p.literal_prefix());
    }
    let lower = if sa.resume.as_slice() > prefix.as_slice() {
        sa.resume.clone()
    } else {
        prefix.clone()
    };
    let ropts = tierkv::ReadOptions {
        lower_bound: Some(lower),
        upper_bound: prefix_end(&prefix),
        fill_cache: false,
        // The step examines at most COUNT records.
        scan_length_hint: Some(sa.count),
        ..tierkv::ReadOptions::new()
    };
    let mut it = ctx.shared.db().iter_opt(&ropts)?;
    it.seek_to_first()?;
    let (mut examined, mut bytes) = (0usize, 0usize);
    while it.valid() && examined < sa.count && bytes < max_bytes {
        let name = &it.key()[base.len()..];
        if sa.pattern.as_ref().is_none_or(|p| p.matches(name)) {
            bytes += take(name, it.value());
        }
        examined += 1;
        it.next()?;
    }
    Ok(if it.valid() {
        ctx.shared.cursors.lock().insert(it.key().to_vec())
    } else {
        0
    })
}

/// `SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]`. Keys come in key order; every
/// key present for the whole iteration is returned exactly once (stronger than Redis). The
/// cursor is an opaque number naming the key the next call resumes at.
pub(super) fn scan(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let sa = parse_scan_args(ctx, args, false)?;
    let mut keys: Vec<Vec<u8>> = Vec::new();
    // COUNT is a hint: the reply also stops at the connection's output bound.
    let max_bytes = SCAN_MAX_REPLY_BYTES.min(ctx.shared.config.load().reply_chunk);
    let next = scan_step(ctx, &[ks::META], &sa, max_bytes, |k, v| {
        let keep = sa
            .type_
            .as_deref()
            .is_none_or(|t| ks::type_name(v).as_bytes() == t);
        if keep {
            keys.push(k.to_vec());
            k.len()
        } else {
            0
        }
    })?;
    ctx.out.array(2);
    ctx.out.bulk(next.to_string().as_bytes());
    ctx.out.array(keys.len());
    for k in &keys {
        ctx.out.bulk(k);
    }
    Ok(Flow::Continue)
}

pub(super) fn dbsize(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> CmdResult {
    let (n, _age) = ctx.shared.key_count(crate::state::CountReuse::ScanCost)?;
    ctx.out.int(n.keys as i64);
    Ok(Flow::Continue)
}

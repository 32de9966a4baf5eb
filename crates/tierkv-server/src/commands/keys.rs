//! Keyspace commands: DEL/UNLINK, EXISTS, TYPE, SCAN, DBSIZE.

use super::{CmdError, CmdResult, Ctx, Flow, SYNTAX};
use crate::glob::Glob;
use bytes::Bytes;

/// Most key bytes one SCAN call returns, whatever COUNT says (COUNT is a hint in Redis
/// too); bounds the reply's memory.
const SCAN_MAX_REPLY_BYTES: usize = 8 * 1024 * 1024;

pub(super) fn del(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let db = &ctx.shared.db;
    let wopts = ctx.wopts();
    let mut removed = 0i64;
    for key in &args[1..] {
        // An absent key is the common no-op: report it from a read without writing a
        // tombstone. A present one is deleted by an rmw so the count is exact even when
        // another client deletes it concurrently.
        if db.get(key)?.is_none() {
            continue;
        }
        let mut existed = false;
        db.update_opt(key, &wopts, |cur| {
            existed = cur.is_some();
            if existed {
                tierkv::Update::Delete
            } else {
                tierkv::Update::Keep
            }
        })?;
        removed += existed as i64;
    }
    ctx.out.int(removed);
    Ok(Flow::Continue)
}

pub(super) fn exists(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let db = &ctx.shared.db;
    let mut n = 0i64;
    for key in &args[1..] {
        n += db.get(key)?.is_some() as i64;
    }
    ctx.out.int(n);
    Ok(Flow::Continue)
}

pub(super) fn type_(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let t = if ctx.shared.db.get(&args[1])?.is_some() {
        "string"
    } else {
        "none"
    };
    ctx.out.simple(t);
    Ok(Flow::Continue)
}

/// The smallest key greater than every key starting with `prefix` (None: no such bound).
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last != 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// `SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]`. Keys come in key order; every
/// key present for the whole iteration is returned exactly once (stronger than Redis). The
/// cursor is an opaque number naming the key the next call resumes at.
pub(super) fn scan(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let cursor: u64 = std::str::from_utf8(&args[1])
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| CmdError::err("invalid cursor"))?;
    let mut pattern: Option<Glob> = None;
    let mut count: usize = 10;
    let mut only_strings = true;
    let mut i = 2;
    while i < args.len() {
        let opt = args[i].to_ascii_uppercase();
        let val = args.get(i + 1).ok_or_else(|| CmdError::err(SYNTAX))?;
        match opt.as_slice() {
            b"MATCH" => pattern = Some(Glob::new(val)),
            b"COUNT" => {
                let n = super::int_arg(val)?;
                if n < 1 {
                    return Err(CmdError::err(SYNTAX));
                }
                count = usize::try_from(n).unwrap_or(usize::MAX);
            }
            b"TYPE" => only_strings = val.eq_ignore_ascii_case(b"string"),
            _ => return Err(CmdError::err(SYNTAX)),
        }
        i += 2;
    }
    if !only_strings {
        // Every value is a string: no key has another type.
        ctx.out.array(2);
        ctx.out.bulk(b"0");
        ctx.out.array(0);
        return Ok(Flow::Continue);
    }
    let start = if cursor == 0 {
        Vec::new()
    } else {
        ctx.shared.cursors.lock().get(cursor).ok_or_else(|| {
            CmdError::err("invalid cursor (unknown, or expired from the server's cursor table)")
        })?
    };
    let pattern = pattern.filter(|p| !p.matches_all());
    let prefix = pattern
        .as_ref()
        .map(Glob::literal_prefix)
        .unwrap_or_default();
    let lower = if start.as_slice() > prefix.as_slice() {
        start
    } else {
        prefix.clone()
    };
    let ropts = tierkv::ReadOptions {
        lower_bound: Some(lower),
        upper_bound: prefix_end(&prefix).filter(|_| !prefix.is_empty()),
        fill_cache: false,
        ..tierkv::ReadOptions::new()
    };
    let mut it = ctx.shared.db.iter_opt(&ropts)?;
    it.seek_to_first()?;
    let mut keys: Vec<Vec<u8>> = Vec::new();
    let (mut examined, mut bytes) = (0usize, 0usize);
    // COUNT is a hint: the reply also stops at the connection's output bound.
    let max_bytes = SCAN_MAX_REPLY_BYTES.min(ctx.shared.config.reply_chunk);
    while it.valid() && examined < count && bytes < max_bytes {
        let k = it.key();
        if pattern.as_ref().is_none_or(|p| p.matches(k)) {
            bytes += k.len();
            keys.push(k.to_vec());
        }
        examined += 1;
        it.next()?;
    }
    let next = if it.valid() {
        ctx.shared.cursors.lock().insert(it.key().to_vec())
    } else {
        0
    };
    ctx.out.array(2);
    ctx.out.bulk(next.to_string().as_bytes());
    ctx.out.array(keys.len());
    for k in &keys {
        ctx.out.bulk(k);
    }
    Ok(Flow::Continue)
}

pub(super) fn dbsize(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> CmdResult {
    let (n, _age) = ctx.shared.key_count(crate::state::DBSIZE_MAX_AGE)?;
    ctx.out.int(n as i64);
    Ok(Flow::Continue)
}

#[cfg(test)]
mod tests {
    use super::prefix_end;

    #[test]
    fn prefix_bounds() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff\xff"), None);
    }
}

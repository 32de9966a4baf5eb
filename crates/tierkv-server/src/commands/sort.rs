//! SORT and SORT_RO: the elements of a list, set or sorted set, sorted numerically (or
//! with ALPHA by their bytes), by themselves or by the values a BY pattern names, limited,
//! with GET patterns fetching strings or hash fields, and with STORE writing the result as
//! a list. Redis 7.0's rules: a BY pattern without `*` keeps the source's order; a missing
//! BY value sorts as 0 (or first, with ALPHA); equal scores fall back to the elements'
//! bytes; a GET of `#` is the element itself; `->field` reads a hash field.

use super::hashes::replace_key;
use super::{int_arg, CmdError, CmdResult, Ctx, Flow, SYNTAX};
use crate::keyspace::{self as ks, Coll, CollMeta, Kind};
use bytes::Bytes;
use std::cmp::Ordering;
use tierkv::{Db, ReadOptions};

/// The source's elements (a list's in order, a set's, a sorted set's by score) and
/// whether it is a sorted set.
fn elements(db: &Db, key: &[u8], ropts: &ReadOptions) -> Result<(Vec<Vec<u8>>, bool), CmdError> {
    let Some(rec) = ks::get(db, key, ropts)? else {
        return Ok((Vec::new(), false));
    };
    let m = match rec.kind()? {
        Kind::Str(_) => return Err(ks::wrongtype()),
        Kind::Coll(m) if m.coll == Coll::Hash => return Err(ks::wrongtype()),
        Kind::Coll(m) => m,
    };
    let prefix = match m.coll {
        Coll::ZSet => ks::score_prefix(key, m.version),
        _ => ks::field_prefix(key, m.version),
    };
    let mut it = db.iter_opt(&ReadOptions {
        scan_length_hint: usize::try_from(m.len).ok(),
        ..ks::prefix_ropts(&prefix, ropts.snapshot)
    })?;
    it.seek_to_first()?;
    let mut out = Vec::with_capacity(usize::try_from(m.len).unwrap_or(0).min(1 << 16));
    while it.valid() {
        out.push(match m.coll {
            Coll::List => it.value().to_vec(),
            // The score record's key: the 8 bytes of the score, then the member.
            Coll::ZSet => it.key()[prefix.len() + 8..].to_vec(),
            _ => it.key()[prefix.len()..].to_vec(),
        });
        it.next()?;
    }
    Ok((out, m.coll == Coll::ZSet))
}

/// The value a BY or GET `pattern` names for `element`: `#` is the element; the first `*`
/// is replaced by it, and `key->field` reads a hash field. None when absent (or the
/// pattern has no `*`).
fn lookup(
    db: &Db,
    ropts: &ReadOptions,
    pattern: &[u8],
    element: &[u8],
) -> Result<Option<Vec<u8>>, CmdError> {
    if pattern == b"#" {
        return Ok(Some(element.to_vec()));
    }
    let Some(star) = pattern.iter().position(|&b| b == b'*') else {
        return Ok(None);
    };
    let after = &pattern[star + 1..];
    let (rest, field) = match after.windows(2).position(|w| w == b"->") {
        Some(i) if i + 2 < after.len() => (&after[..i], Some(&after[i + 2..])),
        _ => (after, None),
    };
    let mut key = pattern[..star].to_vec();
    key.extend_from_slice(element);
    key.extend_from_slice(rest);
    match field {
        None => Ok(match ks::get(db, &key, ropts)? {
            Some(r) => match r.kind()? {
                Kind::Str(s) => Some(s.to_vec()),
                Kind::Coll(_) => None,
            },
            None => None,
        }),
        Some(f) => match ks::get(db, &key, ropts)? {
            Some(r) => match r.kind()? {
                Kind::Coll(m) if m.coll == Coll::Hash => {
                    Ok(db.get_opt(ks::field_key(&key, m.version, f), ropts)?)
                }
                _ => Ok(None),
            },
            None => Ok(None),
        },
    }
}

/// SORT's options.
#[derive(Default)]
struct Options {
    by: Option<Bytes>,
    limit: Option<(i64, i64)>,
    gets: Vec<Bytes>,
    desc: bool,
    alpha: bool,
    store: Option<Bytes>,
}

fn parse(args: &[Bytes], read_only: bool) -> Result<Options, CmdError> {
    let mut o = Options::default();
    let mut i = 2;
    while i < args.len() {
        let has = |n: usize| i + n < args.len();
        match args[i].to_ascii_uppercase().as_slice() {
            b"ASC" => o.desc = false,
            b"DESC" => o.desc = true,
            b"ALPHA" => o.alpha = true,
            b"LIMIT" if has(2) => {
                o.limit = Some((int_arg(&args[i + 1])?, int_arg(&args[i + 2])?));
                i += 2;
            }
            b"BY" if has(1) => {
                o.by = Some(args[i + 1].clone());
                i += 1;
            }
            b"GET" if has(1) => {
                o.gets.push(args[i + 1].clone());
                i += 1;
            }
            b"STORE" if has(1) && !read_only => {
                o.store = Some(args[i + 1].clone());
                i += 1;
            }
            _ => return Err(CmdError::err(SYNTAX)),
        }
        i += 1;
    }
    Ok(o)
}

/// The sort key of one element.
enum Weight {
    Score(f64),
    Bytes(Option<Vec<u8>>),
}

/// SORT key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC] [ALPHA]
/// [STORE destination], and SORT_RO (no STORE).
pub(super) fn sort(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let read_only = args[0].eq_ignore_ascii_case(b"sort_ro");
    let o = parse(args, read_only)?;
    let db = &ctx.shared.db();
    let snap = db.snapshot();
    let ropts = ReadOptions {
        snapshot: Some(snap.seq()),
        ..ReadOptions::new()
    };
    let (mut els, zset) = elements(db, &args[1], &ropts)?;
    let dont_sort = o.by.as_ref().is_some_and(|p| !p.contains(&b'*'));
    if dont_sort && zset && o.desc {
        // Unsorted, a sorted set still comes in its order, reversed by DESC (as Redis).
        els.reverse();
    }
    if !dont_sort {
        let mut weighted: Vec<(Weight, Vec<u8>)> = Vec::with_capacity(els.len());
        for e in els {
            let v = match &o.by {
                Some(p) => lookup(db, &ropts, p, &e)?,
                None => Some(e.clone()),
            };
            let w = if o.alpha {
                Weight::Bytes(v)
            } else {
                let score = match v {
                    None => 0.0,
                    Some(v) => super::strings::parse_float(&v).ok_or_else(|| {
                        CmdError::err("One or more scores can't be converted into double")
                    })?,
                };
                Weight::Score(score)
            };
            weighted.push((w, e));
        }
        weighted.sort_by(|(wa, ea), (wb, eb)| {
            let by = match (wa, wb) {
                (Weight::Score(a), Weight::Score(b)) => a.partial_cmp(b).unwrap_or(Ordering::Equal),
                (Weight::Bytes(a), Weight::Bytes(b)) => a.cmp(b),
                _ => Ordering::Equal,
            };
            let cmp = by.then_with(|| ea.cmp(eb));
            if o.desc {
                cmp.reverse()
            } else {
                cmp
            }
        });
        els = weighted.into_iter().map(|(_, e)| e).collect();
    }
    if let Some((offset, count)) = o.limit {
        let len = els.len() as i64;
        let start = offset.clamp(0, len);
        let end = if count < 0 {
            len
        } else {
            start.saturating_add(count).min(len)
        };
        els = els[start as usize..end as usize].to_vec();
    }
    let mut result: Vec<Option<Vec<u8>>> = Vec::new();
    if o.gets.is_empty() {
        result.extend(els.into_iter().map(Some));
    } else {
        for e in &els {
            for g in &o.gets {
                result.push(lookup(db, &ropts, g, e)?);
            }
        }
    }
    drop(snap);
    match &o.store {
        Some(dst) => {
            replace_key(ctx, dst, |b, version| {
                if result.is_empty() {
                    return None;
                }
                let m = CollMeta::new(Coll::List, version, result.len() as u64);
                for (i, v) in result.iter().enumerate() {
                    let at = m.head + i as u64;
                    b.put(
                        ks::list_key(dst, version, at),
                        v.as_deref().unwrap_or_default(),
                    );
                }
                Some(ks::coll_value(m))
            })?;
            ctx.out.int(result.len() as i64);
        }
        None => {
            ctx.out.array(result.len());
            for v in result {
                ctx.out.opt_bulk_owned(v);
            }
        }
    }
    Ok(Flow::Continue)
}

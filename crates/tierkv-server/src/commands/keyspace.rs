//! Whole-key and whole-keyspace commands: KEYS, RENAME, RENAMENX, COPY, RANDOMKEY,
//! OBJECT, FLUSHDB, FLUSHALL.
//!
//! RENAME and COPY move or copy a key of any type with its deadline in one atomic step
//! conditioned on both keys' records; a hash is copied field by field under a fresh version
//! (O(fields), as in Kvrocks). KEYS scans the key range in order (O(keys), as in Redis);
//! FLUSHDB deletes every record in bounded batches.

use super::{CmdError, CmdResult, Ctx, Flow, SYNTAX};
use crate::glob::Glob;
use crate::keyspace::{self as ks, Coll, CollMeta, Kind, Rec};
use bytes::Bytes;
use tierkv::{ReadOptions, WriteBatch};

/// KEYS pattern: every matching key, in key order. The reply is built in memory as in
/// Redis; one that would pass the connection's output limit closes the connection (the
/// limit is checked while scanning, so the server never holds more than that).
pub(super) fn keys(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let glob = Glob::new(&args[1]);
    let mut prefix = vec![ks::META];
    if !glob.matches_all() {
        prefix.extend_from_slice(&glob.literal_prefix());
    }
    let ropts = ReadOptions {
        upper_bound: ks::prefix_end(&prefix),
        lower_bound: Some(prefix),
        fill_cache: false,
        ..ReadOptions::new()
    };
    let mut it = ctx.shared.db().iter_opt(&ropts)?;
    it.seek_to_first()?;
    let limit = ctx.out.limit();
    let mut found: Vec<Vec<u8>> = Vec::new();
    let mut bytes = 0usize;
    while it.valid() {
        let k = &it.key()[1..];
        if glob.matches(k) {
            bytes = bytes.saturating_add(k.len() + 16);
            if bytes > limit {
                tracing::warn!(
                    "KEYS {:?}: the reply passes the output limit of {limit} bytes",
                    super::quote_arg(&args[1])
                );
                return Ok(Flow::Overflow);
            }
            found.push(k.to_vec());
        }
        it.next()?;
    }
    ctx.out.array(found.len());
    for k in &found {
        ctx.out.bulk(k);
    }
    Ok(Flow::Continue)
}

/// Adds to `b` a copy of `src`'s value as key `dst` (same deadline): a string record, or a
/// collection under a fresh version with every element record copied.
fn copy_into(
    ctx: &Ctx<'_>,
    b: &mut WriteBatch,
    src: &[u8],
    rec: &Rec,
    dst: &[u8],
) -> Result<(), CmdError> {
    let db = &ctx.shared.db();
    match rec.kind()? {
        Kind::Str(_) => ks::put(b, &ks::meta_key(dst), &rec.raw, rec.deadline),
        Kind::Coll(m) => {
            let version = ctx.shared.versions.next(db)?;
            let from = ks::element_prefixes(src, m.version);
            let to = ks::element_prefixes(dst, version);
            for (from, to) in from.iter().zip(&to) {
                let mut it = db.iter_opt(&ks::prefix_ropts(from, None))?;
                it.seek_to_first()?;
                while it.valid() {
                    let mut k = to.clone();
                    k.extend_from_slice(&it.key()[from.len()..]);
                    b.put(k, it.value());
                    it.next()?;
                }
            }
            // Same count and (for a list) head: the elements keep their indexes.
            let meta = CollMeta { version, ..m };
            ks::put(b, &ks::meta_key(dst), &ks::coll_value(meta), rec.deadline);
        }
    }
    Ok(())
}

/// What RENAME/COPY decided inside their atomic step.
enum Moved {
    NoSuchKey,
    Refused,
    Done,
}

/// RENAME src dst (OK) and RENAMENX src dst (1/0).
pub(super) fn rename(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let nx = args[0].eq_ignore_ascii_case(b"renamenx");
    let (src, dst) = (&args[1], &args[2]);
    let r = move_or_copy(ctx, src, dst, !nx, true)?;
    match r {
        Moved::NoSuchKey => return Err(CmdError::err("no such key")),
        Moved::Refused => ctx.out.int(0),
        Moved::Done if nx => ctx.out.int(1),
        Moved::Done => ctx.out.ok(),
    }
    Ok(Flow::Continue)
}

/// COPY src dst [DB 0] [REPLACE] (1/0).
pub(super) fn copy(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let mut replace = false;
    let mut i = 3;
    while i < args.len() {
        match args[i].to_ascii_uppercase().as_slice() {
            b"REPLACE" => replace = true,
            b"DB" if i + 1 < args.len() => {
                let db = super::int_arg(&args[i + 1])?;
                if db != 0 {
                    return Err(CmdError::err("DB index is out of range"));
                }
                i += 1;
            }
            _ => return Err(CmdError::err(SYNTAX)),
        }
        i += 1;
    }
    if args[1] == args[2] {
        return Err(CmdError::err("source and destination objects are the same"));
    }
    let r = move_or_copy(ctx, &args[1], &args[2], replace, false)?;
    ctx.out.int(matches!(r, Moved::Done) as i64);
    Ok(Flow::Continue)
}

/// The atomic step of RENAME (`remove_src`) and COPY: `src`'s value (with its deadline)
/// becomes `dst`'s, replacing an existing `dst` only when `replace`.
fn move_or_copy(
    ctx: &Ctx<'_>,
    src: &[u8],
    dst: &[u8],
    replace: bool,
    remove_src: bool,
) -> Result<Moved, CmdError> {
    let db = &ctx.shared.db();
    let wopts = ctx.wopts();
    let (ms, md) = (ks::meta_key(src), ks::meta_key(dst));
    let mut result: Result<Moved, CmdError> = Ok(Moved::NoSuchKey);
    let mut leftovers: Vec<(Vec<u8>, u64)> = Vec::new();
    ks::transact(db, &wopts, &[&ms, &md], |cur| {
        leftovers.clear();
        let Some(s) = cur[0].as_ref() else {
            result = Ok(Moved::NoSuchKey);
            return None;
        };
        if src == dst {
            // RENAME k k: nothing to do (RENAMENX k k answers 0, as the key exists).
            result = Ok(if replace { Moved::Done } else { Moved::Refused });
            return None;
        }
        if cur[1].is_some() && !replace {
            result = Ok(Moved::Refused);
            return None;
        }
        let mut b = WriteBatch::new();
        let step = (|| -> Result<(), CmdError> {
            if let Some(d) = cur[1].as_ref() {
                if let Some(v) = ks::delete_value(db, &mut b, dst, d)? {
                    leftovers.push((dst.to_vec(), v));
                }
            }
            if remove_src {
                if let Some(v) = ks::delete_value(db, &mut b, src, s)? {
                    leftovers.push((src.to_vec(), v));
                }
            }
            // The new dst record comes last in the batch: it wins over the deletion.
            copy_into(ctx, &mut b, src, s, dst)
        })();
        match step {
            Ok(()) => {
                result = Ok(Moved::Done);
                Some(b)
            }
            Err(e) => {
                result = Err(e);
                None
            }
        }
    })?;
    for (k, v) in &leftovers {
        ks::drop_fields(db, &wopts, k, *v)?;
    }
    if matches!(result, Ok(Moved::Done)) {
        // A list moved or copied there wakes the clients blocked on it, as a push does.
        ctx.shared.blocked_keys.pushed(dst);
    }
    result
}

/// RANDOMKEY: a key near a random point of the key space (nil when empty).
pub(super) fn randomkey(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> CmdResult {
    use std::hash::{BuildHasher, Hasher};
    let r = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let ropts = ReadOptions {
        lower_bound: Some(vec![ks::META]),
        upper_bound: Some(vec![ks::META + 1]),
        fill_cache: false,
        ..ReadOptions::new()
    };
    let mut it = ctx.shared.db().iter_opt(&ropts)?;
    let mut target = vec![ks::META];
    target.extend_from_slice(&r.to_be_bytes());
    it.seek(&target)?;
    if !it.valid() {
        it.seek_to_first()?;
    }
    if it.valid() {
        ctx.out.bulk(&it.key()[1..]);
    } else {
        ctx.out.null();
    }
    Ok(Flow::Continue)
}

/// Redis's encoding name for a string value.
fn string_encoding(s: &[u8]) -> &'static str {
    if s.len() <= 20 && crate::resp::parse_int(s).is_some() {
        "int"
    } else if s.len() <= 44 {
        "embstr"
    } else {
        "raw"
    }
}

/// Redis's default `hash-max-listpack-entries` / `-value` (and the sorted sets' ones).
const LISTPACK_ENTRIES: u64 = 128;
const LISTPACK_VALUE: usize = 64;
/// Redis 7.0's `set-max-intset-entries`.
const INTSET_ENTRIES: u64 = 512;

/// Redis 7.0's encoding of a set: `intset` while it holds at most 512 members that are all
/// integers, `hashtable` otherwise.
fn set_encoding(db: &tierkv::Db, key: &[u8], m: CollMeta) -> Result<&'static str, CmdError> {
    if m.len > INTSET_ENTRIES {
        return Ok("hashtable");
    }
    let mut it = db.iter_opt(&ks::field_ropts(key, m.version, None))?;
    it.seek_to_first()?;
    let plen = ks::field_prefix(key, m.version).len();
    while it.valid() {
        if crate::resp::parse_int(&it.key()[plen..]).is_none() {
            return Ok("hashtable");
        }
        it.next()?;
    }
    Ok("intset")
}

/// Whether Redis would keep hash or sorted set `key` as a listpack: at most 128 elements
/// (`hash-max-listpack-entries`, `zset-max-listpack-entries`), none longer than 64 bytes
/// (a hash's fields and values; a sorted set's members).
fn fits_listpack(db: &tierkv::Db, key: &[u8], m: CollMeta) -> Result<bool, CmdError> {
    if m.len > LISTPACK_ENTRIES {
        return Ok(false);
    }
    let mut it = db.iter_opt(&ks::field_ropts(key, m.version, None))?;
    it.seek_to_first()?;
    let plen = ks::field_prefix(key, m.version).len();
    let check_value = m.coll == Coll::Hash;
    while it.valid() {
        if it.key().len() - plen > LISTPACK_VALUE
            || (check_value && it.value().len() > LISTPACK_VALUE)
        {
            return Ok(false);
        }
        it.next()?;
    }
    Ok(true)
}

/// OBJECT ENCODING | REFCOUNT | HELP.
pub(super) fn object(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let sub = args[1].to_ascii_uppercase();
    match (sub.as_slice(), args.len()) {
        (b"HELP", 2) => {
            let lines = [
                "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "ENCODING <key>",
                "    Return the kind of internal representation Redis would use for <key>.",
                "REFCOUNT <key>",
                "    Return the number of references of the value associated with <key> (1).",
                "HELP",
                "    Print this help.",
            ];
            ctx.out.array(lines.len());
            for l in lines {
                ctx.out.simple(l);
            }
        }
        (b"ENCODING" | b"REFCOUNT", 3) => {
            let db = &ctx.shared.db();
            let Some(rec) = ks::get(db, &args[2], &ReadOptions::new())? else {
                ctx.out.null();
                return Ok(Flow::Continue);
            };
            if sub == b"REFCOUNT" {
                ctx.out.int(1);
                return Ok(Flow::Continue);
            }
            let enc = match rec.kind()? {
                Kind::Str(s) => string_encoding(s),
                Kind::Coll(m) => match m.coll {
                    Coll::Set => set_encoding(db, &args[2], m)?,
                    // Redis 7.0 keeps every list in a quicklist.
                    Coll::List => "quicklist",
                    Coll::Hash if fits_listpack(db, &args[2], m)? => "listpack",
                    Coll::Hash => "hashtable",
                    Coll::ZSet if fits_listpack(db, &args[2], m)? => "listpack",
                    Coll::ZSet => "skiplist",
                },
            };
            ctx.out.bulk(enc.as_bytes());
        }
        _ => {
            return Err(CmdError::err(format!(
                "unknown subcommand or wrong number of arguments for '{}'. Try OBJECT HELP.",
                super::quote_arg(&args[1])
            )))
        }
    }
    Ok(Flow::Continue)
}

/// Records deleted per batch by FLUSHDB.
const FLUSH_BATCH: usize = 1024;

/// FLUSHDB / FLUSHALL [ASYNC | SYNC]: deletes every key (every record but the format
/// marker and the version ceiling), in bounded batches, and returns when done. A key
/// written by another client while the flush runs may survive it.
pub(super) fn flushdb(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    match args.len() {
        1 => {}
        2 if args[1].eq_ignore_ascii_case(b"async") || args[1].eq_ignore_ascii_case(b"sync") => {}
        _ => return Err(CmdError::err(SYNTAX)),
    }
    let db = &ctx.shared.db();
    let wopts = ctx.wopts();
    let mut from = vec![1u8];
    loop {
        let ropts = ReadOptions {
            lower_bound: Some(from.clone()),
            fill_cache: false,
            ..ReadOptions::new()
        };
        let mut it = db.iter_opt(&ropts)?;
        it.seek_to_first()?;
        let mut b = WriteBatch::new();
        while it.valid() && b.len() < FLUSH_BATCH {
            b.delete(it.key());
            it.next()?;
        }
        let more = it.valid().then(|| it.key().to_vec());
        drop(it);
        if !b.is_empty() {
            db.write_opt(b, &wopts)?;
        }
        match more {
            Some(k) => from = k,
            None => break,
        }
    }
    ctx.shared.forget_key_count();
    ctx.out.ok();
    Ok(Flow::Continue)
}

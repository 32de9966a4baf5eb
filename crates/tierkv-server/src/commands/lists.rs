//! List commands: LPUSH RPUSH LPUSHX RPUSHX LPOP RPOP LLEN LRANGE LINDEX LSET LREM LTRIM
//! LINSERT LPOS LMOVE RPOPLPUSH LMPOP, and the blocking BLPOP BRPOP BLMOVE BRPOPLPUSH
//! BLMPOP.
//!
//! A list is a collection (`keyspace::Coll::List`): a metadata record (version, length,
//! head index, the key's deadline) plus one record per element keyed by its index, the
//! elements at `head..head + len`. Pushing or popping at either end moves the head or the
//! length: one element record and the metadata in one atomic batch. Reads by index are
//! point lookups, LRANGE one short scan. LSET is one record; LINSERT and LREM rewrite the
//! elements between the change and the nearer end (LINSERT) or the tail (LREM), as in
//! Kvrocks. Every write is one atomic step conditioned on the metadata record ([`edit`]).
//!
//! The blocking pops wait as `blocking` describes.

use super::blocking::{block_or_reply, timeout_arg};
use super::hashes::{elements_from, Parts};
use super::{int_arg, CmdError, CmdResult, Ctx, Flow, SYNTAX};
use crate::keyspace::{self as ks, Coll, CollMeta, Rec};
use bytes::Bytes;
use std::collections::HashMap;
use tierkv::{Db, ReadOptions, WriteBatch};

/// The staged changes of one atomic list step. Indexes given to its methods are logical
/// (0 is the head); the staged writes are by absolute index.
pub(super) struct ListEdit<'a> {
    db: &'a Db,
    key: &'a [u8],
    /// The list's version (None: no such list yet; one is taken when it gets elements).
    version: Option<u64>,
    head: u64,
    len: u64,
    deadline: Option<u64>,
    /// Absolute index -> new element (None: deleted).
    staged: HashMap<u64, Option<Vec<u8>>>,
    changed: bool,
    pushed: bool,
}

fn index_space() -> CmdError {
    CmdError::err("list index space exhausted")
}

impl<'a> ListEdit<'a> {
    /// The edit of list `key` whose metadata record is `rec`; WRONGTYPE for another type.
    fn open(db: &'a Db, key: &'a [u8], rec: Option<&Rec>) -> Result<ListEdit<'a>, CmdError> {
        let meta = rec.map(|r| r.coll(Coll::List)).transpose()?;
        Ok(ListEdit {
            db,
            key,
            version: meta.map(|m| m.version),
            head: meta.map_or(ks::LIST_START, |m| m.head),
            len: meta.map_or(0, |m| m.len),
            deadline: rec.and_then(|r| r.deadline),
            staged: HashMap::new(),
            changed: false,
            pushed: false,
        })
    }

    pub(super) fn len(&self) -> u64 {
        self.len
    }

    fn exists(&self) -> bool {
        self.version.is_some()
    }

    fn absolute(&self, i: u64) -> Result<u64, CmdError> {
        self.head.checked_add(i).ok_or_else(index_space)
    }

    /// The element at logical index `i` (< len).
    pub(super) fn get(&self, i: u64) -> Result<Vec<u8>, CmdError> {
        let at = self.absolute(i)?;
        if let Some(v) = self.staged.get(&at) {
            return v.clone().ok_or_else(|| missing(self.key, at));
        }
        let version = self.version.ok_or_else(|| missing(self.key, at))?;
        self.db
            .get(ks::list_key(self.key, version, at))?
            .ok_or_else(|| missing(self.key, at))
    }

    /// Sets the element at logical index `i` (< len after any growth).
    fn set(&mut self, i: u64, v: &[u8]) -> Result<(), CmdError> {
        let at = self.absolute(i)?;
        self.staged.insert(at, Some(v.to_vec()));
        self.changed = true;
        Ok(())
    }

    fn remove_at(&mut self, at: u64) {
        self.staged.insert(at, None);
        self.changed = true;
    }

    pub(super) fn push(&mut self, end: End, v: &[u8]) -> Result<(), CmdError> {
        match end {
            End::Left => {
                self.head = self.head.checked_sub(1).ok_or_else(index_space)?;
                self.len += 1;
                self.set(0, v)?;
            }
            End::Right => {
                self.len += 1;
                self.set(self.len - 1, v)?;
            }
        }
        self.pushed = true;
        Ok(())
    }

    pub(super) fn pop(&mut self, end: End) -> Result<Option<Vec<u8>>, CmdError> {
        if self.len == 0 {
            return Ok(None);
        }
        let i = match end {
            End::Left => 0,
            End::Right => self.len - 1,
        };
        let v = self.get(i)?;
        let at = self.absolute(i)?;
        self.remove_at(at);
        if end == End::Left {
            self.head += 1;
        }
        self.len -= 1;
        Ok(Some(v))
    }

    /// Every element, in order (read from the store: only before anything is staged).
    fn elements(&self) -> Result<Vec<Vec<u8>>, CmdError> {
        debug_assert!(self.staged.is_empty());
        let Some(version) = self.version else {
            return Ok(Vec::new());
        };
        let mut it = self.db.iter_opt(&ReadOptions {
            scan_length_hint: usize::try_from(self.len).ok(),
            ..ks::field_ropts(self.key, version, None)
        })?;
        it.seek(ks::list_key(self.key, version, self.head))?;
        let mut out = Vec::with_capacity(usize::try_from(self.len).unwrap_or(0).min(1 << 16));
        while it.valid() && (out.len() as u64) < self.len {
            out.push(it.value().to_vec());
            it.next()?;
        }
        if (out.len() as u64) < self.len {
            return Err(missing(self.key, self.head + out.len() as u64));
        }
        Ok(out)
    }

    /// Adds the staged writes and the new metadata (or its deletion, for an emptied list)
    /// to `b`; `None` when nothing changed. Takes a version for a new list.
    fn finish(mut self, ctx: &Ctx<'_>, b: &mut WriteBatch) -> Result<bool, CmdError> {
        if !self.changed {
            return Ok(false);
        }
        let version = match self.version {
            Some(v) => v,
            None => ctx.shared.versions.next(self.db)?,
        };
        let mk = ks::meta_key(self.key);
        for (at, v) in self.staged.drain() {
            let k = ks::list_key(self.key, version, at);
            match v {
                Some(v) => b.put(k, v),
                None => b.delete(k),
            };
        }
        if self.len == 0 {
            b.delete(&mk);
        } else {
            let m = CollMeta {
                head: self.head,
                ..CollMeta::new(Coll::List, version, self.len)
            };
            ks::put(b, &mk, &ks::coll_value(m), self.deadline);
        }
        Ok(true)
    }
}

/// The error of an element the metadata counts but the store lacks: corruption, or (inside
/// an atomic step) a racing write seen half (see [`edit`]).
fn missing(key: &[u8], at: u64) -> CmdError {
    CmdError::err(format!(
        "{MISSING} {:?}: element {at} is missing",
        super::quote_arg(key)
    ))
}

const MISSING: &str = "corrupt list";

fn is_missing(e: &CmdError) -> bool {
    e.0.strip_prefix("ERR ")
        .is_some_and(|m| m.starts_with(MISSING))
}

/// Steps whose metadata did not change that may find an element missing before it is
/// reported as corruption.
const MISSING_RETRIES: usize = 3;

/// An end of a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum End {
    Left,
    Right,
}

impl End {
    fn parse(a: &[u8]) -> Result<End, CmdError> {
        if a.eq_ignore_ascii_case(b"left") {
            Ok(End::Left)
        } else if a.eq_ignore_ascii_case(b"right") {
            Ok(End::Right)
        } else {
            Err(CmdError::err(SYNTAX))
        }
    }
}

/// Runs `f` on the lists `keys` as one atomic step (retried when another write to one of
/// them races it): WRONGTYPE when one holds another type. A list left without elements is
/// deleted; a new one is created when it gets elements, keeping no deadline. Keys pushed
/// to wake the clients blocked on them.
fn edit<T>(
    ctx: &Ctx<'_>,
    keys: &[&[u8]],
    mut f: impl FnMut(&mut [ListEdit<'_>]) -> Result<T, CmdError>,
) -> Result<T, CmdError> {
    let db = &ctx.shared.db();
    let mks: Vec<Vec<u8>> = keys.iter().map(|k| ks::meta_key(k)).collect();
    let refs: Vec<&[u8]> = mks.iter().map(Vec::as_slice).collect();
    let mut out: Option<Result<T, CmdError>> = None;
    let mut pushed: Vec<&[u8]> = Vec::new();
    // A step reads its elements after the metadata, so a write racing it (a pop from
    // another client) can make an element the metadata counts disappear; the step's batch
    // would be refused (the metadata changed), but the step must not report corruption
    // first. It runs again, and only a missing element under unchanged metadata, found
    // repeatedly, is corruption.
    let mut last_meta: Option<Vec<Option<Vec<u8>>>> = None;
    let mut same_meta_misses = 0;
    loop {
        let mut raced = false;
        ks::transact(db, &ctx.wopts(), &refs, |cur| {
            pushed.clear();
            let r = step(ctx, db, keys, cur, &mut f, &mut pushed);
            if let Err(e) = &r {
                if is_missing(e) {
                    let meta: Vec<Option<Vec<u8>>> = cur
                        .iter()
                        .map(|r| r.as_ref().map(|r| r.raw.clone()))
                        .collect();
                    if last_meta.as_ref() == Some(&meta) {
                        same_meta_misses += 1;
                    } else {
                        same_meta_misses = 0;
                    }
                    last_meta = Some(meta);
                    raced = same_meta_misses < MISSING_RETRIES;
                }
            }
            match r {
                Ok((r, b)) => {
                    out = Some(Ok(r));
                    (!b.is_empty()).then_some(b)
                }
                Err(e) => {
                    out = Some(Err(e));
                    None
                }
            }
        })?;
        if !raced {
            break;
        }
    }
    for k in pushed {
        ctx.shared.blocked_keys.pushed(k);
    }
    out.unwrap_or_else(|| Err(CmdError::err("internal error: list step did not run")))
}

/// One run of [`edit`]'s step over the metadata records `cur`: `f`'s result and the batch
/// (the keys pushed to in `pushed`).
fn step<'k, T>(
    ctx: &Ctx<'_>,
    db: &'k Db,
    keys: &[&'k [u8]],
    cur: &[Option<Rec>],
    f: &mut impl FnMut(&mut [ListEdit<'_>]) -> Result<T, CmdError>,
    pushed: &mut Vec<&'k [u8]>,
) -> Result<(T, WriteBatch), CmdError> {
    let mut edits = keys
        .iter()
        .zip(cur)
        .map(|(k, rec)| ListEdit::open(db, k, rec.as_ref()))
        .collect::<Result<Vec<_>, _>>()?;
    let r = f(&mut edits)?;
    let mut b = WriteBatch::new();
    for e in edits {
        if e.pushed {
            pushed.push(e.key);
        }
        e.finish(ctx, &mut b)?;
    }
    Ok((r, b))
}

/// One list's [`edit`].
fn edit_one<T>(
    ctx: &Ctx<'_>,
    key: &[u8],
    mut f: impl FnMut(&mut ListEdit<'_>) -> Result<T, CmdError>,
) -> Result<T, CmdError> {
    edit(ctx, &[key], |e| f(&mut e[0]))
}

/// The metadata of list `key` at `ropts` (None: no such key), WRONGTYPE for another type.
fn meta(db: &Db, key: &[u8], ropts: &ReadOptions) -> Result<Option<CollMeta>, CmdError> {
    super::hashes::coll_meta(db, key, ropts, Coll::List)
}

/// LPUSH / RPUSH key element... (the new length); LPUSHX / RPUSHX push only onto an
/// existing list (0 otherwise).
pub(super) fn push(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let name = args[0].to_ascii_lowercase();
    let end = if name.starts_with(b"l") {
        End::Left
    } else {
        End::Right
    };
    let only_existing = name.ends_with(b"x");
    let n = edit_one(ctx, &args[1], |e| {
        if only_existing && !e.exists() {
            return Ok(0);
        }
        for v in &args[2..] {
            e.push(end, v)?;
        }
        Ok(e.len())
    })?;
    ctx.out.int(n as i64);
    Ok(Flow::Continue)
}

/// The count argument of LPOP / RPOP / LMPOP: positive ("value is out of range, must be
/// positive" otherwise).
fn positive_count(a: &[u8]) -> Result<u64, CmdError> {
    let n = int_arg(a)?;
    if n < 0 {
        return Err(CmdError::err("value is out of range, must be positive"));
    }
    Ok(n as u64)
}

/// Pops up to `count` elements from `end` of `e`.
fn pop_many(e: &mut ListEdit<'_>, end: End, count: u64) -> Result<Vec<Vec<u8>>, CmdError> {
    let mut out = Vec::new();
    while (out.len() as u64) < count {
        match e.pop(end)? {
            Some(v) => out.push(v),
            None => break,
        }
    }
    Ok(out)
}

/// LPOP / RPOP key [count]: one element (nil when none), or an array of up to `count`
/// (a null array for a missing key).
pub(super) fn pop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let end = if args[0].eq_ignore_ascii_case(b"lpop") {
        End::Left
    } else {
        End::Right
    };
    let count = match args.len() {
        2 => None,
        3 => Some(positive_count(&args[2])?),
        _ => return Err(CmdError::err(SYNTAX)),
    };
    let (existed, popped) = edit_one(ctx, &args[1], |e| {
        Ok((e.exists(), pop_many(e, end, count.unwrap_or(1))?))
    })?;
    match count {
        None => ctx.out.opt_bulk(popped.first().map(Vec::as_slice)),
        Some(_) if !existed => ctx.out.null_array(),
        Some(_) => {
            ctx.out.array(popped.len());
            for v in &popped {
                ctx.out.bulk(v);
            }
        }
    }
    Ok(Flow::Continue)
}

pub(super) fn llen(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let n = meta(&ctx.shared.db(), &args[1], &ReadOptions::new())?.map_or(0, |m| m.len);
    ctx.out.int(n as i64);
    Ok(Flow::Continue)
}

/// Redis's range rule: negative indexes count from the tail, the range is clamped to the
/// list; None when it holds nothing.
fn clamp_range(start: i64, stop: i64, len: u64) -> Option<(u64, u64)> {
    let len = len as i64;
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let stop = if stop < 0 {
        len + stop
    } else {
        stop.min(len - 1)
    };
    (start <= stop && start < len).then_some((start as u64, stop as u64))
}

/// A logical index from Redis's (possibly negative) one; None when outside the list.
fn logical_index(i: i64, len: u64) -> Option<u64> {
    let i = if i < 0 { len as i64 + i } else { i };
    (i >= 0 && (i as u64) < len).then_some(i as u64)
}

/// LRANGE key start stop: read at one snapshot, produced incrementally like HGETALL.
pub(super) fn lrange(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let (start, stop) = (int_arg(&args[2])?, int_arg(&args[3])?);
    let db = &ctx.shared.db();
    let snap = db.snapshot();
    let ropts = ReadOptions {
        snapshot: Some(snap.seq()),
        ..ReadOptions::new()
    };
    let Some((m, (from, to))) =
        meta(db, &args[1], &ropts)?.and_then(|m| Some((m, clamp_range(start, stop, m.len)?)))
    else {
        ctx.out.array(0);
        return Ok(Flow::Continue);
    };
    let n = to - from + 1;
    ctx.out.array(n as usize);
    let first = ks::list_key(&args[1], m.version, m.head + from);
    let rest = elements_from(
        snap,
        ks::field_prefix(&args[1], m.version),
        first,
        n,
        Parts::Values,
    );
    ctx.conn.resume = rest.resume(ctx.shared, ctx.out, ctx.shared.config.load().reply_chunk);
    Ok(Flow::Continue)
}

pub(super) fn lindex(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let i = int_arg(&args[2])?;
    let db = &ctx.shared.db();
    let snap = db.snapshot();
    let ropts = ReadOptions {
        snapshot: Some(snap.seq()),
        ..ReadOptions::new()
    };
    let v = match meta(db, &args[1], &ropts)? {
        Some(m) => match logical_index(i, m.len) {
            Some(i) => db.get_opt(ks::list_key(&args[1], m.version, m.head + i), &ropts)?,
            None => None,
        },
        None => None,
    };
    ctx.out.opt_bulk_owned(v);
    Ok(Flow::Continue)
}

pub(super) fn lset(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let i = int_arg(&args[2])?;
    edit_one(ctx, &args[1], |e| {
        if !e.exists() {
            return Err(CmdError::err("no such key"));
        }
        let i = logical_index(i, e.len()).ok_or_else(|| CmdError::err("index out of range"))?;
        e.set(i, &args[3])
    })?;
    ctx.out.ok();
    Ok(Flow::Continue)
}

/// LREM key count element: removes up to |count| occurrences (all for 0), from the head
/// for a positive count and from the tail for a negative one; the elements after the
/// first removed one move up.
pub(super) fn lrem(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let count = int_arg(&args[2])?;
    let target = &args[3];
    let removed = edit_one(ctx, &args[1], |e| {
        let all = e.elements()?;
        let limit = if count == 0 {
            u64::MAX
        } else {
            count.unsigned_abs()
        };
        let mut drop = vec![false; all.len()];
        let mut n = 0u64;
        let order: Box<dyn Iterator<Item = usize>> = if count < 0 {
            Box::new((0..all.len()).rev())
        } else {
            Box::new(0..all.len())
        };
        for i in order {
            if n == limit {
                break;
            }
            if all[i] == target.as_ref() {
                drop[i] = true;
                n += 1;
            }
        }
        let Some(first) = drop.iter().position(|d| *d) else {
            return Ok(0);
        };
        let kept: Vec<&Vec<u8>> = (first..all.len())
            .filter(|i| !drop[*i])
            .map(|i| &all[i])
            .collect();
        for (j, v) in kept.iter().enumerate() {
            e.set(first as u64 + j as u64, v)?;
        }
        let new_len = e.len() - n;
        for i in new_len..e.len() {
            let at = e.absolute(i)?;
            e.remove_at(at);
        }
        e.len = new_len;
        Ok(n)
    })?;
    ctx.out.int(removed as i64);
    Ok(Flow::Continue)
}

/// LTRIM key start stop: keeps the range (deleting the list when it is empty).
pub(super) fn ltrim(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let (start, stop) = (int_arg(&args[2])?, int_arg(&args[3])?);
    edit_one(ctx, &args[1], |e| {
        let len = e.len();
        let (from, to) = clamp_range(start, stop, len).unwrap_or((len, len));
        for i in (0..from).chain(to.saturating_add(1).min(len)..len) {
            let at = e.absolute(i)?;
            e.remove_at(at);
        }
        if from >= len {
            e.len = 0;
        } else {
            e.head += from;
            e.len = to - from + 1;
        }
        Ok(())
    })?;
    ctx.out.ok();
    Ok(Flow::Continue)
}

/// LINSERT key BEFORE|AFTER pivot element: the new length, -1 when the pivot is absent, 0
/// for a missing key. The elements on the shorter side of the insertion point move.
pub(super) fn linsert(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let after = if args[2].eq_ignore_ascii_case(b"after") {
        true
    } else if args[2].eq_ignore_ascii_case(b"before") {
        false
    } else {
        return Err(CmdError::err(SYNTAX));
    };
    let (pivot, value) = (&args[3], &args[4]);
    let n = edit_one(ctx, &args[1], |e| {
        if !e.exists() {
            return Ok(0);
        }
        let all = e.elements()?;
        let Some(p) = all.iter().position(|v| v == pivot.as_ref()) else {
            return Ok(-1);
        };
        let q = (p + after as usize) as u64; // the new element's index
        let old_len = e.len();
        if q <= old_len / 2 {
            e.head = e.head.checked_sub(1).ok_or_else(index_space)?;
            e.len += 1;
            for i in 0..q {
                e.set(i, &all[i as usize])?;
            }
        } else {
            e.len += 1;
            for i in q..old_len {
                e.set(i + 1, &all[i as usize])?;
            }
        }
        e.set(q, value)?;
        e.pushed = true;
        Ok(e.len() as i64)
    })?;
    ctx.out.int(n);
    Ok(Flow::Continue)
}

/// LPOS key element [RANK rank] [COUNT num] [MAXLEN len].
pub(super) fn lpos(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let (mut rank, mut count, mut maxlen) = (1i64, None, 0u64);
    let mut i = 3;
    while i < args.len() {
        let Some(v) = args.get(i + 1) else {
            return Err(CmdError::err(SYNTAX));
        };
        let n = int_arg(v)?;
        match args[i].to_ascii_uppercase().as_slice() {
            b"RANK" => {
                if n == 0 || n == i64::MIN {
                    return Err(CmdError::err(
                        "RANK can't be zero: use 1 to start from the first match, 2 from the \
                         second ... or use negative to start from the end of the list",
                    ));
                }
                rank = n;
            }
            b"COUNT" if n >= 0 => count = Some(n as u64),
            b"COUNT" => return Err(CmdError::err("COUNT can't be negative")),
            b"MAXLEN" if n >= 0 => maxlen = n as u64,
            b"MAXLEN" => return Err(CmdError::err("MAXLEN can't be negative")),
            _ => return Err(CmdError::err(SYNTAX)),
        }
        i += 2;
    }
    let db = &ctx.shared.db();
    let snap = db.snapshot();
    let ropts = ReadOptions {
        snapshot: Some(snap.seq()),
        ..ReadOptions::new()
    };
    let mut found: Vec<u64> = Vec::new();
    let want = match count {
        Some(0) => u64::MAX,
        Some(c) => c,
        None => 1,
    };
    if let Some(m) = meta(db, &args[1], &ropts)? {
        let mut it = db.iter_opt(&ks::field_ropts(&args[1], m.version, ropts.snapshot))?;
        let reverse = rank < 0;
        let mut skip = rank.unsigned_abs() - 1;
        if reverse {
            it.seek_for_prev(ks::list_key(&args[1], m.version, m.head + m.len - 1))?;
        } else {
            it.seek(ks::list_key(&args[1], m.version, m.head))?;
        }
        let mut scanned = 0u64;
        while it.valid() && (maxlen == 0 || scanned < maxlen) && (found.len() as u64) < want {
            if it.value() == args[2].as_ref() {
                if skip == 0 {
                    let at = &it.key()[it.key().len() - 8..];
                    let at = u64::from_be_bytes(at.try_into().unwrap_or_default());
                    found.push(at.wrapping_sub(m.head));
                } else {
                    skip -= 1;
                }
            }
            scanned += 1;
            if reverse {
                it.prev()?;
            } else {
                it.next()?;
            }
        }
    }
    match count {
        None => match found.first() {
            Some(i) => ctx.out.int(*i as i64),
            None => ctx.out.null(),
        },
        Some(_) => {
            ctx.out.array(found.len());
            for i in found {
                ctx.out.int(i as i64);
            }
        }
    }
    Ok(Flow::Continue)
}

/// Moves one element from `from` of `src` to `to` of `dst` (one atomic step; the same list
/// rotates). The element moved, None when `src` is empty.
fn move_element(
    ctx: &Ctx<'_>,
    src: &[u8],
    dst: &[u8],
    from: End,
    to: End,
) -> Result<Option<Vec<u8>>, CmdError> {
    if src == dst {
        return edit_one(ctx, src, |e| {
            let v = e.pop(from)?;
            if let Some(v) = &v {
                e.push(to, v)?;
            }
            Ok(v)
        });
    }
    edit(ctx, &[src, dst], |e| {
        // The destination's type is checked even when the source is empty, as in Redis.
        let (s, d) = e.split_at_mut(1);
        let v = s[0].pop(from)?;
        if let Some(v) = &v {
            d[0].push(to, v)?;
        }
        Ok(v)
    })
}

/// LMOVE src dst LEFT|RIGHT LEFT|RIGHT and RPOPLPUSH src dst.
pub(super) fn lmove(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let (from, to) = if args[0].eq_ignore_ascii_case(b"rpoplpush") {
        (End::Right, End::Left)
    } else {
        (End::parse(&args[3])?, End::parse(&args[4])?)
    };
    let v = move_element(ctx, &args[1], &args[2], from, to)?;
    ctx.out.opt_bulk(v.as_deref());
    Ok(Flow::Continue)
}

/// The `numkeys key... LEFT|RIGHT [COUNT count]` of LMPOP (from `args[at]` on).
fn parse_mpop(args: &[Bytes], at: usize) -> Result<(Vec<Bytes>, End, u64), CmdError> {
    let numkeys = int_arg(&args[at])?;
    if numkeys <= 0 {
        return Err(CmdError::err("numkeys should be greater than 0"));
    }
    let first = at + 1;
    let end_at = first
        .checked_add(numkeys as usize)
        .filter(|e| *e < args.len())
        .ok_or_else(|| CmdError::err(SYNTAX))?;
    let keys = args[first..end_at].to_vec();
    let end = End::parse(&args[end_at])?;
    let count = match &args[end_at + 1..] {
        [] => 1,
        [opt, n] if opt.eq_ignore_ascii_case(b"count") => {
            let n = int_arg(n)?;
            if n <= 0 {
                return Err(CmdError::err("count should be greater than 0"));
            }
            n as u64
        }
        _ => return Err(CmdError::err(SYNTAX)),
    };
    Ok((keys, end, count))
}

/// A multi-key pop's result: the key popped from and its elements.
type Popped = (Bytes, Vec<Vec<u8>>);

/// Pops from the first non-empty list of `keys`: the key and what was popped.
fn pop_first(
    ctx: &Ctx<'_>,
    keys: &[Bytes],
    end: End,
    count: u64,
) -> Result<Option<Popped>, CmdError> {
    for k in keys {
        let popped = edit_one(ctx, k, |e| pop_many(e, end, count))?;
        if !popped.is_empty() {
            return Ok(Some((k.clone(), popped)));
        }
    }
    Ok(None)
}

fn reply_mpop(ctx: &mut Ctx<'_>, r: Option<Popped>) {
    match r {
        None => ctx.out.null_array(),
        Some((k, vs)) => {
            ctx.out.array(2);
            ctx.out.bulk(&k);
            ctx.out.array(vs.len());
            for v in &vs {
                ctx.out.bulk(v);
            }
        }
    }
}

/// LMPOP numkeys key... LEFT|RIGHT [COUNT count].
pub(super) fn lmpop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let (keys, end, count) = parse_mpop(args, 1)?;
    let r = pop_first(ctx, &keys, end, count)?;
    reply_mpop(ctx, r);
    Ok(Flow::Continue)
}

/// BLPOP / BRPOP key... timeout: [key, element] from the first non-empty list, blocking
/// until one gets an element or the timeout passes (a null array).
pub(super) fn bpop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let end = if args[0].eq_ignore_ascii_case(b"blpop") {
        End::Left
    } else {
        End::Right
    };
    let timeout = timeout_arg(&args[args.len() - 1])?;
    let keys = args[1..args.len() - 1].to_vec();
    let watched = keys.clone();
    block_or_reply(
        ctx,
        args,
        watched,
        timeout,
        |ctx| pop_first(ctx, &keys, end, 1),
        |ctx, r| match r {
            None => ctx.out.null_array(),
            Some((k, vs)) => {
                ctx.out.array(2);
                ctx.out.bulk(&k);
                ctx.out.bulk(&vs[0]);
            }
        },
    )
}

/// BLMPOP timeout numkeys key... LEFT|RIGHT [COUNT count].
pub(super) fn blmpop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let timeout = timeout_arg(&args[1])?;
    let (keys, end, count) = parse_mpop(args, 2)?;
    let watched = keys.clone();
    block_or_reply(
        ctx,
        args,
        watched,
        timeout,
        |ctx| pop_first(ctx, &keys, end, count),
        reply_mpop,
    )
}

/// BLMOVE src dst LEFT|RIGHT LEFT|RIGHT timeout and BRPOPLPUSH src dst timeout: the
/// element moved, or nil after the timeout.
pub(super) fn blmove(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let (from, to, t) = if args[0].eq_ignore_ascii_case(b"brpoplpush") {
        (End::Right, End::Left, &args[3])
    } else {
        (End::parse(&args[3])?, End::parse(&args[4])?, &args[5])
    };
    let timeout = timeout_arg(t)?;
    let (src, dst) = (args[1].clone(), args[2].clone());
    block_or_reply(
        ctx,
        args,
        vec![src.clone()],
        timeout,
        |ctx| move_element(ctx, &src, &dst, from, to),
        |ctx, v| ctx.out.opt_bulk(v.as_deref()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_follow_redis() {
        assert_eq!(clamp_range(0, -1, 5), Some((0, 4)));
        assert_eq!(clamp_range(-100, 100, 5), Some((0, 4)));
        assert_eq!(clamp_range(3, 1, 5), None);
        assert_eq!(clamp_range(5, 10, 5), None);
        assert_eq!(clamp_range(-2, -1, 5), Some((3, 4)));
        assert_eq!(clamp_range(0, 0, 0), None);
        assert_eq!(clamp_range(i64::MIN, i64::MAX, 3), Some((0, 2)));
        assert_eq!(logical_index(-1, 3), Some(2));
        assert_eq!(logical_index(3, 3), None);
        assert_eq!(logical_index(-4, 3), None);
        assert_eq!(logical_index(i64::MIN, 3), None);
    }
}

//! Sorted-set commands: ZADD, ZINCRBY, ZREM, ZCARD, ZSCORE, ZMSCORE, ZRANK, ZREVRANK,
//! ZRANGE (BYSCORE, BYLEX, REV, LIMIT, WITHSCORES) and its older forms (ZREVRANGE,
//! Z[REV]RANGEBYSCORE, Z[REV]RANGEBYLEX), ZRANGESTORE, ZCOUNT, ZLEXCOUNT, ZPOPMIN, ZPOPMAX,
//! ZREMRANGEBYRANK / BYSCORE / BYLEX, ZUNION, ZINTER, ZDIFF and their STORE forms,
//! ZINTERCARD, ZRANDMEMBER, ZMPOP, ZSCAN.
//!
//! A sorted set is a collection (`keyspace::Coll::ZSet`): a metadata record (version,
//! member count, the key's deadline), one member record per member whose value is its
//! score (`f64` bits, big-endian), and one score record per member (the score as ordered
//! bytes, then the member; empty value), so the score records list the members in
//! (score, member) order, plus a rank index of counted chunks over the score records
//! (`zset_index`). Writes go through the hashes' atomic step (`hashes::edit_coll`, here
//! [`edit_zset`]) and change a member's two records, and the index's counts, in the same
//! batch, so the count, the member records, the score records and the index always agree.
//! Score and lex ranges seek the score records; a rank range near either end steps
//! through them from that end, one farther in finds its start through the index (a few
//! hundred records at most, whatever the set's size); ZRANK likewise. ZSCORE / ZMSCORE
//! are point lookups of member records. Multi-record reads are at one
//! snapshot. Range replies and the algebra are built in memory as Redis builds them, a
//! range reply bounded by the connection's output limit while it is read.
//!
//! Scores print as Redis 7.0 prints them (C's `%.17g`: `1.5`, `3`, `inf`, and
//! `1.1000000000000001` for 1.1, which Redis 7.2 and later print as `1.1`).

use super::blocking::{block_or_reply, timeout_arg};
use super::hashes::{coll_meta, edit_coll, replace_key, scan_elements, HashEdit};
use super::sets::at_snapshot;
use super::strings::parse_float;
use super::zset_index;
use super::{int_arg, CmdError, CmdResult, Ctx, Flow, SYNTAX};
use crate::keyspace::{self as ks, Coll, CollMeta, Kind};
use crate::resp::{Proto, ReplyWriter};
use bytes::Bytes;
use rand::seq::index::sample;
use rand::Rng;
use std::collections::{BTreeMap, HashMap};
use tierkv::{Db, DbIterator, ReadOptions};

const NOT_FLOAT: &str = "value is not a valid float";
const RANGE_NOT_FLOAT: &str = "min or max is not a float";
const LEX_INVALID: &str = "min or max not valid string range item";
const NAN_SCORE: &str = "resulting score is not a number (NaN)";

/// A member and its score.
pub(super) type Scored = (Vec<u8>, f64);

// ---------------------------------------------------------------------------------------
// Scores: parsing, printing, the member record's encoding.

/// Parses a score as Redis's `getDoubleFromObject` does (strtod over the whole argument):
/// `inf`, `+inf`, `-inf` (and `infinity`) are scores; NaN, blanks, an overflow to
/// infinity or an underflow to zero are not.
fn parse_score(a: &[u8]) -> Option<f64> {
    let v = parse_float(a)?;
    let t = std::str::from_utf8(a).ok()?.to_ascii_lowercase();
    let body = t.trim_start_matches(['+', '-']);
    if v.is_infinite() && body != "inf" && body != "infinity" {
        return None;
    }
    let mantissa = body.split(['e']).next().unwrap_or("");
    if v == 0.0 && mantissa.bytes().any(|c| (b'1'..=b'9').contains(&c)) {
        return None;
    }
    Some(v)
}

fn score_arg(a: &[u8]) -> Result<f64, CmdError> {
    parse_score(a).ok_or_else(|| CmdError::err(NOT_FLOAT))
}

/// A score's reply text, as Redis 7.0's `addReplyDouble` prints it: C's `%.17g` (17
/// significant digits, trailing zeros dropped, an exponent below 1e-4 or from 1e17 on),
/// `inf` / `-inf` for the infinities.
fn format_score(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    if v.is_nan() {
        return "nan".into();
    }
    if v == 0.0 {
        return "0".into();
    }
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    // The exponent %g decides by is that of the value rounded to 17 digits.
    let sci = format!("{v:.16e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..17).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mantissa), exp.unsigned_abs())
    } else {
        trim(&format!("{v:.*}", (16 - exp) as usize))
    }
}

fn reply_score(out: &mut ReplyWriter, v: f64) {
    out.double(&format_score(v));
}

/// -0 stored as 0, so the member record and the score record (which cannot tell them
/// apart) agree.
fn canonical(v: f64) -> f64 {
    if v == 0.0 {
        0.0
    } else {
        v
    }
}

fn encode_score(v: f64) -> [u8; 8] {
    v.to_bits().to_be_bytes()
}

fn decode_score(v: &[u8]) -> Result<f64, CmdError> {
    let b: [u8; 8] = v
        .try_into()
        .map_err(|_| CmdError::err("corrupt sorted-set member record"))?;
    Ok(f64::from_bits(u64::from_be_bytes(b)))
}

// ---------------------------------------------------------------------------------------
// Writes: a member's two records, changed together inside `edit_coll`'s step.

/// A sorted-set write step: the hash step, and its net changes to the score records (key
/// after the score prefix -> true when added, false when removed), which the rank index
/// is brought up to date with at the end of the step.
struct ZEdit<'e, 'a> {
    e: &'e mut HashEdit<'a>,
    moved: BTreeMap<Vec<u8>, bool>,
}

impl ZEdit<'_, '_> {
    /// Records that score record `k` (after the prefix) is added (`added`) or removed; a
    /// change back within the step cancels out.
    fn moved(&mut self, k: Vec<u8>, added: bool) {
        match self.moved.get(&k) {
            Some(&was) if was != added => {
                self.moved.remove(&k);
            }
            _ => {
                self.moved.insert(k, added);
            }
        }
    }
}

/// The score record key of `member` at `score` after the score prefix.
fn score_suffix(score: f64, member: &[u8]) -> Vec<u8> {
    [&ks::score_bytes(score)[..], member].concat()
}

/// Runs `f` on sorted set `key` as one atomic step (`hashes::edit_coll`), adding the rank
/// index's changes to the step's batch when `f` succeeds.
fn edit_zset<T>(
    ctx: &Ctx<'_>,
    key: &[u8],
    mut f: impl FnMut(&mut ZEdit<'_, '_>) -> Result<T, CmdError>,
) -> Result<T, CmdError> {
    let db = ctx.shared.db().clone();
    edit_coll(ctx, key, Coll::ZSet, |e| {
        let mut z = ZEdit {
            e,
            moved: BTreeMap::new(),
        };
        let r = f(&mut z)?;
        let (version, len) = (z.e.version(), z.e.len());
        zset_index::update(&db, key, version, &z.moved, len, z.e.batch())?;
        Ok(r)
    })
}

fn z_get(e: &HashEdit<'_>, member: &[u8]) -> Result<Option<f64>, CmdError> {
    e.get(member)?.map(|v| decode_score(&v)).transpose()
}

/// Sets `member`'s score to `new` (its current score `old`): its member record, and its
/// score record moved when the score changes.
fn z_set(
    z: &mut ZEdit<'_, '_>,
    key: &[u8],
    member: &[u8],
    old: Option<f64>,
    new: f64,
) -> Result<(), CmdError> {
    let new = canonical(new);
    if old.is_some_and(|o| o.to_bits() == new.to_bits()) {
        return Ok(());
    }
    let v = z.e.version();
    if let Some(o) = old {
        z.e.batch().delete(ks::score_key(key, v, o, member));
        z.moved(score_suffix(o, member), false);
    }
    z.e.set(member, &encode_score(new))?;
    z.e.batch().put(ks::score_key(key, v, new, member), b"");
    z.moved(score_suffix(new, member), true);
    Ok(())
}

/// Removes `member` (at `score`): both its records.
fn z_remove(z: &mut ZEdit<'_, '_>, key: &[u8], member: &[u8], score: f64) -> Result<(), CmdError> {
    if z.e.del(member)? {
        let v = z.e.version();
        z.e.batch().delete(ks::score_key(key, v, score, member));
        z.moved(score_suffix(score, member), false);
    }
    Ok(())
}

/// Removes `member` if present; true when it was.
fn z_del(e: &mut ZEdit<'_, '_>, key: &[u8], member: &[u8]) -> Result<bool, CmdError> {
    match z_get(e.e, member)? {
        Some(score) => {
            z_remove(e, key, member, score)?;
            Ok(true)
        }
        None => Ok(false),
    }
}

fn meta(db: &Db, key: &[u8], ropts: &ReadOptions) -> Result<Option<CollMeta>, CmdError> {
    coll_meta(db, key, ropts, Coll::ZSet)
}

// ---------------------------------------------------------------------------------------
// Ranges.

/// A bound of a lex range.
#[derive(Clone, Debug)]
enum LexBound {
    /// `-`: below every member.
    Min,
    /// `+`: above every member.
    Max,
    /// `[m`.
    Incl(Vec<u8>),
    /// `(m`.
    Excl(Vec<u8>),
}

impl LexBound {
    fn parse(a: &[u8]) -> Result<LexBound, CmdError> {
        match a {
            b"-" => Ok(LexBound::Min),
            b"+" => Ok(LexBound::Max),
            [b'[', rest @ ..] => Ok(LexBound::Incl(rest.to_vec())),
            [b'(', rest @ ..] => Ok(LexBound::Excl(rest.to_vec())),
            _ => Err(CmdError::err(LEX_INVALID)),
        }
    }

    /// `m` satisfies this bound taken as the range's minimum.
    fn gte_min(&self, m: &[u8]) -> bool {
        match self {
            LexBound::Min => true,
            LexBound::Max => false,
            LexBound::Incl(b) => m >= b.as_slice(),
            LexBound::Excl(b) => m > b.as_slice(),
        }
    }

    /// `m` satisfies this bound taken as the range's maximum.
    fn lte_max(&self, m: &[u8]) -> bool {
        match self {
            LexBound::Min => false,
            LexBound::Max => true,
            LexBound::Incl(b) => m <= b.as_slice(),
            LexBound::Excl(b) => m < b.as_slice(),
        }
    }

    fn member(&self) -> Option<&[u8]> {
        match self {
            LexBound::Incl(b) | LexBound::Excl(b) => Some(b),
            _ => None,
        }
    }
}

/// A score range (`(` makes a bound exclusive).
#[derive(Clone, Copy, Debug)]
struct ScoreRange {
    min: f64,
    minex: bool,
    max: f64,
    maxex: bool,
}

impl ScoreRange {
    /// Parses as Redis's `zslParseRange` (strtod, so `1e400` is inf, and a bare `(` is 0).
    fn parse(min: &[u8], max: &[u8]) -> Result<ScoreRange, CmdError> {
        let bound = |a: &[u8]| -> Option<(f64, bool)> {
            let (ex, body) = match a.first() {
                Some(b'(') => (true, &a[1..]),
                _ => (false, a),
            };
            if body.is_empty() {
                return Some((0.0, ex));
            }
            let t = std::str::from_utf8(body).ok()?.trim_start();
            let v: f64 = t.parse().ok()?;
            (!v.is_nan()).then_some((v, ex))
        };
        match (bound(min), bound(max)) {
            (Some((min, minex)), Some((max, maxex))) => Ok(ScoreRange {
                min,
                minex,
                max,
                maxex,
            }),
            _ => Err(CmdError::err(RANGE_NOT_FLOAT)),
        }
    }

    fn gte_min(&self, s: f64) -> bool {
        if self.minex {
            s > self.min
        } else {
            s >= self.min
        }
    }

    fn lte_max(&self, s: f64) -> bool {
        if self.maxex {
            s < self.max
        } else {
            s <= self.max
        }
    }
}

#[derive(Clone, Debug)]
enum Range {
    /// Ranks (negative from the end), inclusive.
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexBound, LexBound),
}

/// What a range command selects.
#[derive(Clone, Debug)]
struct Query {
    range: Range,
    /// From the highest score down (ranks count from the end).
    rev: bool,
    /// LIMIT's offset (score and lex ranges; negative selects nothing).
    offset: i64,
    /// LIMIT's count (negative: all).
    limit: i64,
}

impl Query {
    fn new(range: Range, rev: bool) -> Query {
        Query {
            range,
            rev,
            offset: 0,
            limit: -1,
        }
    }
}

/// A cursor over a sorted set's score records.
struct Scores {
    it: DbIterator,
    prefix: Vec<u8>,
}

impl Scores {
    fn open(
        db: &Db,
        key: &[u8],
        m: CollMeta,
        ropts: &ReadOptions,
        hint: Option<usize>,
    ) -> Result<Scores, CmdError> {
        let prefix = ks::score_prefix(key, m.version);
        let it = db.iter_opt(&ReadOptions {
            scan_length_hint: hint,
            ..ks::prefix_ropts(&prefix, ropts.snapshot)
        })?;
        Ok(Scores { it, prefix })
    }

    /// The current record's score and member (None: past either end).
    fn cur(&self) -> Option<(f64, &[u8])> {
        if !self.it.valid() {
            return None;
        }
        let rest = self.it.key().get(self.prefix.len()..)?;
        let sb: [u8; 8] = rest.get(..8)?.try_into().ok()?;
        Some((ks::score_from_bytes(sb), &rest[8..]))
    }

    fn step(&mut self, rev: bool) -> Result<(), CmdError> {
        if rev {
            self.it.prev()?;
        } else {
            self.it.next()?;
        }
        Ok(())
    }

    /// Positions at the first record (the last when `rev`).
    fn start(&mut self, rev: bool) -> Result<(), CmdError> {
        if rev {
            self.it.seek_to_last()?;
        } else {
            self.it.seek_to_first()?;
        }
        Ok(())
    }

    /// The engine key of the first possible record at `score` with member `member`.
    fn key_at(&self, score: f64, member: &[u8]) -> Vec<u8> {
        let mut k = self.prefix.clone();
        k.extend_from_slice(&ks::score_bytes(score));
        k.extend_from_slice(member);
        k
    }

    /// Positions at the first record whose score is `>= score`.
    fn seek_score(&mut self, score: f64) -> Result<(), CmdError> {
        let k = self.key_at(score, b"");
        self.it.seek(k)?;
        Ok(())
    }

    /// Positions at the last record whose score is `<= score`.
    fn seek_score_for_prev(&mut self, score: f64) -> Result<(), CmdError> {
        let next = u64::from_be_bytes(ks::score_bytes(score)).checked_add(1);
        match next {
            Some(n) => {
                let mut k = self.prefix.clone();
                k.extend_from_slice(&n.to_be_bytes());
                self.it.seek_for_prev(k)?;
                // `k` itself (an empty member at the next score) is past the bound.
                while self.cur().is_some_and(|(s, _)| s > score) {
                    self.it.prev()?;
                }
            }
            None => self.it.seek_to_last()?,
        }
        Ok(())
    }

    /// Steps `n` records in direction `rev`.
    fn skip(&mut self, mut n: i64, rev: bool) -> Result<(), CmdError> {
        while n > 0 && self.it.valid() {
            self.step(rev)?;
            n -= 1;
        }
        Ok(())
    }

    /// From the current record in direction `rev`: skips `offset` records in range, then
    /// visits up to `limit` (negative: all) while `in_range` holds and `visit` says go on.
    fn visit_limited(
        &mut self,
        rev: bool,
        offset: i64,
        limit: i64,
        in_range: impl Fn(f64, &[u8]) -> bool,
        visit: &mut dyn FnMut(&[u8], f64) -> bool,
    ) -> Result<(), CmdError> {
        let (mut skip, mut left) = (offset, limit);
        while let Some((score, member)) = self.cur() {
            if !in_range(score, member) {
                break;
            }
            if skip > 0 {
                skip -= 1;
            } else {
                if left == 0 || !visit(member, score) {
                    break;
                }
                left -= (left > 0) as i64;
            }
            self.step(rev)?;
        }
        Ok(())
    }
}

/// Visits the members `q` selects in sorted set `key` (metadata `m`) at `ropts`, in reply
/// order (`q.rev`: from the highest), until `visit` returns false.
fn visit_range(
    db: &Db,
    key: &[u8],
    m: CollMeta,
    ropts: &ReadOptions,
    q: &Query,
    visit: &mut dyn FnMut(&[u8], f64) -> bool,
) -> Result<(), CmdError> {
    let len = i64::try_from(m.len).unwrap_or(i64::MAX);
    match &q.range {
        Range::Rank(start, end) => {
            let (mut start, mut end) = (*start, *end);
            if start < 0 {
                start += len;
            }
            if end < 0 {
                end += len;
            }
            start = start.max(0);
            if start > end || start >= len {
                return Ok(());
            }
            end = end.min(len - 1);
            let count = end - start + 1;
            let hint = usize::try_from(count).ok();
            let mut s = Scores::open(db, key, m, ropts, hint)?;
            let from_far = len - 1 - end;
            // Far from both ends, the index finds the first member in reply order (its
            // rank from the lowest) in O(levels x chunk); the walk from an end is the
            // fallback for a set without an index.
            if start.min(from_far) > indexed_walk() {
                let first = if q.rev { len - 1 - start } else { start };
                if let Some((sep, offset)) = indexed_position(db, key, m, ropts, first)? {
                    let k = [ks::score_prefix(key, m.version).as_slice(), &sep].concat();
                    s.it.seek(k)?;
                    s.skip(offset as i64, false)?;
                    s.visit_limited(q.rev, 0, count, |_, _| true, visit)?;
                    return Ok(());
                }
            }
            // Walk from the nearer end: ranks far from the requested end are reached
            // from the other one, and the members visited in reverse.
            if start <= from_far {
                s.start(q.rev)?;
                s.skip(start, q.rev)?;
                s.visit_limited(q.rev, 0, count, |_, _| true, visit)?;
            } else {
                s.start(!q.rev)?;
                s.skip(from_far, !q.rev)?;
                let mut got: Vec<Scored> = Vec::new();
                s.visit_limited(!q.rev, 0, count, |_, _| true, &mut |member, score| {
                    got.push((member.to_vec(), score));
                    true
                })?;
                for (member, score) in got.iter().rev() {
                    if !visit(member, *score) {
                        break;
                    }
                }
            }
        }
        Range::Score(r) => {
            if q.offset < 0 || q.limit == 0 || (q.offset > 0 && q.offset >= len) {
                return Ok(());
            }
            let hint = usize::try_from(if q.limit < 0 { len } else { q.limit.min(len) }).ok();
            let mut s = Scores::open(db, key, m, ropts, hint)?;
            if q.rev {
                s.seek_score_for_prev(r.max)?;
                while s.cur().is_some_and(|(sc, _)| !r.lte_max(sc)) {
                    s.step(true)?;
                }
                s.visit_limited(true, q.offset, q.limit, |sc, _| r.gte_min(sc), visit)?;
            } else {
                s.seek_score(r.min)?;
                while s.cur().is_some_and(|(sc, _)| !r.gte_min(sc)) {
                    s.step(false)?;
                }
                s.visit_limited(false, q.offset, q.limit, |sc, _| r.lte_max(sc), visit)?;
            }
        }
        Range::Lex(min, max) => {
            if q.offset < 0 || q.limit == 0 || (q.offset > 0 && q.offset >= len) {
                return Ok(());
            }
            let hint = usize::try_from(if q.limit < 0 { len } else { q.limit.min(len) }).ok();
            let mut s = Scores::open(db, key, m, ropts, hint)?;
            // Lex ranges assume one score for every member (as Redis documents). Then the
            // start is a seek; otherwise the members are read in order from the end, the
            // start being the first in range, as Redis's listpack scan does.
            s.it.seek_to_first()?;
            let first = s.cur().map(|(sc, _)| sc);
            s.it.seek_to_last()?;
            let last = s.cur().map(|(sc, _)| sc);
            let single = match (first, last) {
                (Some(a), Some(b)) if a.to_bits() == b.to_bits() => Some(a),
                _ => None,
            };
            if q.rev {
                match (single, max.member()) {
                    (Some(sc), Some(b)) => {
                        let k = s.key_at(sc, b);
                        s.it.seek_for_prev(k)?;
                    }
                    _ => s.it.seek_to_last()?,
                }
                while s.cur().is_some_and(|(_, mb)| !max.lte_max(mb)) {
                    s.step(true)?;
                }
                s.visit_limited(true, q.offset, q.limit, |_, mb| min.gte_min(mb), visit)?;
            } else {
                match (single, min.member()) {
                    (Some(sc), Some(b)) => {
                        let k = s.key_at(sc, b);
                        s.it.seek(k)?;
                    }
                    _ => s.it.seek_to_first()?,
                }
                while s.cur().is_some_and(|(_, mb)| !min.gte_min(mb)) {
                    s.step(false)?;
                }
                s.visit_limited(false, q.offset, q.limit, |_, mb| max.lte_max(mb), visit)?;
            }
        }
    }
    Ok(())
}

/// The farthest a rank range or ZRANK steps from an end of a sorted set before it uses
/// the rank index instead (a lookup reads up to a few chunks' worth of records).
fn indexed_walk() -> i64 {
    4 * zset_index::chunk() as i64
}

/// Where the member at `rank` (from the lowest) of sorted set `key` (metadata `m`) is at
/// `ropts`, through the rank index: a score record key after the prefix, and how many
/// records to step from it. None when the set has no index there; then an index is
/// built for it (a set stored before the index existed), for the next lookup.
fn indexed_position(
    db: &Db,
    key: &[u8],
    m: CollMeta,
    ropts: &ReadOptions,
    rank: i64,
) -> Result<Option<(Vec<u8>, u64)>, CmdError> {
    let rank = u64::try_from(rank).unwrap_or(0);
    let found = zset_index::locate(db, key, m.version, ropts, rank)?;
    if found.is_none() {
        build_index(db, key);
    }
    Ok(found)
}

thread_local! {
    /// Whether the command running on this thread may build a missing rank index (a
    /// write): not on a replica, which writes only what its primary sends. Set by the
    /// dispatcher before each command ([`allow_index_builds`]).
    static INDEX_BUILDS: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

/// Lets (or not) the commands run next on this thread build missing rank indexes.
pub(super) fn allow_index_builds(allowed: bool) {
    INDEX_BUILDS.with(|c| c.set(allowed));
}

/// Indexes sorted set `key` when it has no index. A failure (e.g. a store refusing
/// writes) is logged: lookups then step through the set as they did before the index.
fn build_index(db: &Db, key: &[u8]) {
    if !INDEX_BUILDS.with(|c| c.get()) {
        return;
    }
    if let Err(e) = zset_index::build(db, key) {
        tracing::warn!(
            "could not build the rank index of sorted set {}: {}",
            super::quote_arg(key),
            e.0
        );
    }
}

/// Every member of sorted set `key` with its score, in score order (empty for a missing
/// key), read at one snapshot; WRONGTYPE for another type.
pub(super) fn all_scored(db: &Db, key: &[u8]) -> Result<Vec<Scored>, CmdError> {
    let (_snap, ropts) = at_snapshot(db);
    let Some(m) = meta(db, key, &ropts)? else {
        return Ok(Vec::new());
    };
    let q = Query::new(Range::Rank(0, -1), false);
    Ok(collect_range(db, key, m, &ropts, &q, usize::MAX)?.unwrap_or_default())
}

/// The members `q` selects, with their scores; None when they pass `max_bytes` (the
/// reply could not be sent).
fn collect_range(
    db: &Db,
    key: &[u8],
    m: CollMeta,
    ropts: &ReadOptions,
    q: &Query,
    max_bytes: usize,
) -> Result<Option<Vec<Scored>>, CmdError> {
    let mut out: Vec<Scored> = Vec::new();
    let mut bytes = 0usize;
    let mut over = false;
    visit_range(db, key, m, ropts, q, &mut |member, score| {
        bytes = bytes.saturating_add(member.len() + 48);
        if bytes > max_bytes {
            over = true;
            return false;
        }
        out.push((member.to_vec(), score));
        true
    })?;
    Ok((!over).then_some(out))
}

/// The number of members `q` selects.
fn count_range(
    db: &Db,
    key: &[u8],
    m: CollMeta,
    ropts: &ReadOptions,
    q: &Query,
) -> Result<i64, CmdError> {
    let mut n = 0i64;
    visit_range(db, key, m, ropts, q, &mut |_, _| {
        n += 1;
        true
    })?;
    Ok(n)
}

/// Replies members (with their scores: pairs in RESP3, a flat list in RESP2).
fn reply_members(out: &mut ReplyWriter, items: &[Scored], withscores: bool) {
    if !withscores {
        out.array(items.len());
        for (m, _) in items {
            out.bulk(m);
        }
    } else if out.proto == Proto::Resp3 {
        out.array(items.len());
        for (m, s) in items {
            out.array(2);
            out.bulk(m);
            reply_score(out, *s);
        }
    } else {
        out.array(items.len() * 2);
        for (m, s) in items {
            out.bulk(m);
            reply_score(out, *s);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Single-member commands.

/// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...].
pub(super) fn zadd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let (mut nx, mut xx, mut gt, mut lt, mut ch, mut incr) =
        (false, false, false, false, false, false);
    let mut i = 2;
    while i < args.len() {
        match args[i].to_ascii_lowercase().as_slice() {
            b"nx" => nx = true,
            b"xx" => xx = true,
            b"gt" => gt = true,
            b"lt" => lt = true,
            b"ch" => ch = true,
            b"incr" => incr = true,
            _ => break,
        }
        i += 1;
    }
    let pairs = &args[i..];
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return Err(CmdError::err(SYNTAX));
    }
    if nx && xx {
        return Err(CmdError::err(
            "XX and NX options at the same time are not compatible",
        ));
    }
    if (nx && (gt || lt)) || (gt && lt) {
        return Err(CmdError::err(
            "GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if incr && pairs.len() > 2 {
        return Err(CmdError::err(
            "INCR option supports a single increment-element pair",
        ));
    }
    let mut scores = Vec::with_capacity(pairs.len() / 2);
    for p in pairs.chunks_exact(2) {
        scores.push(score_arg(&p[0])?);
    }
    let key = &args[1];
    if xx && meta(&ctx.shared.db(), key, &ReadOptions::new())?.is_none() {
        if incr {
            ctx.out.null();
        } else {
            ctx.out.int(0);
        }
        return Ok(Flow::Continue);
    }
    // (added, updated, the INCR result: None when nothing was done)
    let (added, updated, result) = edit_zset(ctx, key, |e| {
        let (mut added, mut updated) = (0i64, 0i64);
        let mut result = None;
        for (p, &score) in pairs.chunks_exact(2).zip(&scores) {
            let member = &p[1];
            match z_get(e.e, member)? {
                Some(cur) => {
                    if nx {
                        continue;
                    }
                    let mut new = score;
                    if incr {
                        new += cur;
                        if new.is_nan() {
                            return Err(CmdError::err(NAN_SCORE));
                        }
                    }
                    if (lt && new >= cur) || (gt && new <= cur) {
                        continue;
                    }
                    if canonical(new).to_bits() != cur.to_bits() {
                        z_set(e, key, member, Some(cur), new)?;
                        updated += 1;
                    }
                    result = Some(canonical(new));
                }
                None => {
                    if xx {
                        continue;
                    }
                    z_set(e, key, member, None, score)?;
                    added += 1;
                    result = Some(canonical(score));
                }
            }
        }
        Ok((added, updated, result))
    })?;
    if incr {
        match result {
            Some(s) => reply_score(ctx.out, s),
            None => ctx.out.null(),
        }
    } else {
        ctx.out.int(if ch { added + updated } else { added });
    }
    Ok(Flow::Continue)
}

/// ZINCRBY key increment member: the new score.
pub(super) fn zincrby(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let by = score_arg(&args[2])?;
    let (key, member) = (&args[1], &args[3]);
    let s = edit_zset(ctx, key, |e| {
        let cur = z_get(e.e, member)?;
        let new = cur.unwrap_or(0.0) + by;
        if new.is_nan() {
            return Err(CmdError::err(NAN_SCORE));
        }
        z_set(e, key, member, cur, new)?;
        Ok(canonical(new))
    })?;
    reply_score(ctx.out, s);
    Ok(Flow::Continue)
}

/// ZREM key member [member ...]: how many were members.
pub(super) fn zrem(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = &args[1];
    if meta(&ctx.shared.db(), key, &ReadOptions::new())?.is_none() {
        ctx.out.int(0);
        return Ok(Flow::Continue);
    }
    let n = edit_zset(ctx, key, |e| {
        let mut n = 0i64;
        for member in &args[2..] {
            n += z_del(e, key, member)? as i64;
        }
        Ok(n)
    })?;
    ctx.out.int(n);
    Ok(Flow::Continue)
}

pub(super) fn zcard(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let m = meta(&ctx.shared.db(), &args[1], &ReadOptions::new())?;
    ctx.out.int(m.map_or(0, |m| m.len) as i64);
    Ok(Flow::Continue)
}

/// The scores of `members` of sorted set `key`, at one snapshot.
pub(super) fn scores_of(
    db: &Db,
    key: &[u8],
    members: &[Bytes],
) -> Result<Vec<Option<f64>>, CmdError> {
    let (_snap, ropts) = at_snapshot(db);
    let m = meta(db, key, &ropts)?;
    let mut out = Vec::with_capacity(members.len());
    for member in members {
        out.push(match m {
            Some(m) => db
                .get_opt(ks::field_key(key, m.version, member), &ropts)?
                .map(|v| decode_score(&v))
                .transpose()?,
            None => None,
        });
    }
    Ok(out)
}

/// ZSCORE key member.
pub(super) fn zscore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    match scores_of(&ctx.shared.db(), &args[1], &args[2..3])?[0] {
        Some(s) => reply_score(ctx.out, s),
        None => ctx.out.null(),
    }
    Ok(Flow::Continue)
}

/// ZMSCORE key member [member ...].
pub(super) fn zmscore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let scores = scores_of(&ctx.shared.db(), &args[1], &args[2..])?;
    ctx.out.array(scores.len());
    for s in scores {
        match s {
            Some(s) => reply_score(ctx.out, s),
            None => ctx.out.null(),
        }
    }
    Ok(Flow::Continue)
}

/// ZRANK / ZREVRANK key member: the score records before the member's, counted through
/// the rank index in a set of more than a few chunks, else one by one.
pub(super) fn zrank(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let rev = args[0].eq_ignore_ascii_case(b"zrevrank");
    let db = &ctx.shared.db();
    let (key, member) = (&args[1], &args[2]);
    let (_snap, ropts) = at_snapshot(db);
    let Some(m) = meta(db, key, &ropts)? else {
        ctx.out.null();
        return Ok(Flow::Continue);
    };
    let Some(v) = db.get_opt(ks::field_key(key, m.version, member), &ropts)? else {
        ctx.out.null();
        return Ok(Flow::Continue);
    };
    let score = decode_score(&v)?;
    let len = i64::try_from(m.len).unwrap_or(i64::MAX);
    if len > indexed_walk() {
        let target = score_suffix(score, member);
        match zset_index::rank_of(db, key, m.version, &ropts, &target)? {
            Some(rank) => {
                let rank = i64::try_from(rank).unwrap_or(i64::MAX);
                ctx.out
                    .int(if rev { (len - 1 - rank).max(0) } else { rank });
                return Ok(Flow::Continue);
            }
            None => build_index(db, key),
        }
    }
    let prefix = ks::score_prefix(key, m.version);
    let mut it = db.iter_opt(&ReadOptions {
        upper_bound: Some(ks::score_key(key, m.version, score, member)),
        lower_bound: Some(prefix),
        snapshot: ropts.snapshot,
        fill_cache: false,
        ..ReadOptions::new()
    })?;
    it.seek_to_first()?;
    let mut rank = 0i64;
    while it.valid() {
        rank += 1;
        it.next()?;
    }
    let len = i64::try_from(m.len).unwrap_or(i64::MAX);
    ctx.out
        .int(if rev { (len - 1 - rank).max(0) } else { rank });
    Ok(Flow::Continue)
}

// ---------------------------------------------------------------------------------------
// Range commands.

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum By {
    Rank,
    Score,
    Lex,
}

/// Parses a ZRANGE-family range (`min`, `max` as given) and its options `opts` as Redis's
/// `zrangeGenericCommand` does: `by` / `rev` are fixed by the older commands' names
/// (None: an option may choose them); STORE forms take no WITHSCORES. Returns the query
/// and WITHSCORES.
fn parse_range(
    min: &[u8],
    max: &[u8],
    opts: &[Bytes],
    store: bool,
    by: Option<By>,
    rev: Option<bool>,
) -> Result<(Query, bool), CmdError> {
    let (mut by, mut rev) = (by, rev);
    let (mut withscores, mut offset, mut limit) = (false, 0i64, -1i64);
    let mut j = 0;
    while j < opts.len() {
        let left = opts.len() - j - 1;
        let o = opts[j].to_ascii_lowercase();
        match o.as_slice() {
            b"withscores" if !store => withscores = true,
            b"limit" if left >= 2 => {
                offset = int_arg(&opts[j + 1])?;
                limit = int_arg(&opts[j + 2])?;
                j += 2;
            }
            b"rev" if rev.is_none() => rev = Some(true),
            b"bylex" if by.is_none() => by = Some(By::Lex),
            b"byscore" if by.is_none() => by = Some(By::Score),
            _ => return Err(CmdError::err(SYNTAX)),
        }
        j += 1;
    }
    let rev = rev.unwrap_or(false);
    let by = by.unwrap_or(By::Rank);
    if limit != -1 && by == By::Rank {
        return Err(CmdError::err(
            "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if withscores && by == By::Lex {
        return Err(CmdError::err(
            "syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    // Score and lex ranges are given high end first in reverse.
    let (lo, hi) = if rev && by != By::Rank {
        (max, min)
    } else {
        (min, max)
    };
    let range = match by {
        By::Rank => Range::Rank(int_arg(lo)?, int_arg(hi)?),
        By::Score => Range::Score(ScoreRange::parse(lo, hi)?),
        By::Lex => Range::Lex(LexBound::parse(lo)?, LexBound::parse(hi)?),
    };
    Ok((
        Query {
            range,
            rev,
            offset,
            limit,
        },
        withscores,
    ))
}

/// ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES], and
/// ZREVRANGE, ZRANGEBYSCORE, ZREVRANGEBYSCORE, ZRANGEBYLEX, ZREVRANGEBYLEX.
pub(super) fn zrange(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let (by, rev) = match args[0].to_ascii_lowercase().as_slice() {
        b"zrevrange" => (Some(By::Rank), Some(true)),
        b"zrangebyscore" => (Some(By::Score), Some(false)),
        b"zrevrangebyscore" => (Some(By::Score), Some(true)),
        b"zrangebylex" => (Some(By::Lex), Some(false)),
        b"zrevrangebylex" => (Some(By::Lex), Some(true)),
        _ => (None, None),
    };
    let (q, withscores) = parse_range(&args[2], &args[3], &args[4..], false, by, rev)?;
    let db = &ctx.shared.db();
    let (_snap, ropts) = at_snapshot(db);
    let Some(m) = meta(db, &args[1], &ropts)? else {
        ctx.out.array(0);
        return Ok(Flow::Continue);
    };
    let Some(items) = collect_range(db, &args[1], m, &ropts, &q, ctx.out.limit())? else {
        tracing::warn!(
            "{}: the reply passes the output limit of {} bytes",
            super::quote_arg(&args[0]),
            ctx.out.limit()
        );
        return Ok(Flow::Overflow);
    };
    reply_members(ctx.out, &items, withscores);
    Ok(Flow::Continue)
}

/// ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]: the count.
pub(super) fn zrangestore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let (q, _) = parse_range(&args[3], &args[4], &args[5..], true, None, None)?;
    let db = &ctx.shared.db();
    let items = {
        let (_snap, ropts) = at_snapshot(db);
        match meta(db, &args[2], &ropts)? {
            Some(m) => collect_range(db, &args[2], m, &ropts, &q, usize::MAX)?.unwrap_or_default(),
            None => Vec::new(),
        }
    };
    store_result(ctx, &args[1], &items)?;
    ctx.out.int(items.len() as i64);
    Ok(Flow::Continue)
}

/// ZCOUNT key min max and ZLEXCOUNT key min max.
pub(super) fn zcount(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let range = if args[0].eq_ignore_ascii_case(b"zlexcount") {
        Range::Lex(LexBound::parse(&args[2])?, LexBound::parse(&args[3])?)
    } else {
        Range::Score(ScoreRange::parse(&args[2], &args[3])?)
    };
    let db = &ctx.shared.db();
    let (_snap, ropts) = at_snapshot(db);
    let n = match meta(db, &args[1], &ropts)? {
        Some(m) => count_range(db, &args[1], m, &ropts, &Query::new(range, false))?,
        None => 0,
    };
    ctx.out.int(n);
    Ok(Flow::Continue)
}

/// Removes the members `q` selects from sorted set `key` in one atomic step (chosen
/// inside it, from what it reads); returns them.
fn remove_range(ctx: &Ctx<'_>, key: &[u8], q: &Query) -> Result<Vec<Scored>, CmdError> {
    let db = ctx.shared.db().clone();
    if meta(&db, key, &ReadOptions::new())?.is_none() {
        return Ok(Vec::new());
    }
    edit_zset(ctx, key, |e| {
        let ropts = ReadOptions::new();
        let Some(m) = meta(&db, key, &ropts)? else {
            return Ok(Vec::new());
        };
        let items = collect_range(&db, key, m, &ropts, q, usize::MAX)?.unwrap_or_default();
        for (member, score) in &items {
            z_remove(e, key, member, *score)?;
        }
        Ok(items)
    })
}

/// ZREMRANGEBYRANK key start stop, ZREMRANGEBYSCORE key min max, ZREMRANGEBYLEX key min
/// max: how many were removed.
pub(super) fn zremrange(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let range = match args[0].to_ascii_lowercase().as_slice() {
        b"zremrangebyrank" => Range::Rank(int_arg(&args[2])?, int_arg(&args[3])?),
        b"zremrangebyscore" => Range::Score(ScoreRange::parse(&args[2], &args[3])?),
        _ => Range::Lex(LexBound::parse(&args[2])?, LexBound::parse(&args[3])?),
    };
    let removed = remove_range(ctx, &args[1], &Query::new(range, false))?;
    ctx.out.int(removed.len() as i64);
    Ok(Flow::Continue)
}

/// ZPOPMIN / ZPOPMAX key [count]: a flat member-score list (pairs in RESP3 with a count).
pub(super) fn zpop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let max = args[0].eq_ignore_ascii_case(b"zpopmax");
    if args.len() > 3 {
        return Err(CmdError::err(SYNTAX));
    }
    let count = match args.get(2) {
        Some(a) => {
            let n = crate::resp::parse_int(a)
                .filter(|n| *n >= 0)
                .ok_or_else(|| CmdError::err("value is out of range, must be positive"))?;
            if n == 0 {
                // Redis checks the type first.
                meta(&ctx.shared.db(), &args[1], &ReadOptions::new())?;
                ctx.out.array(0);
                return Ok(Flow::Continue);
            }
            Some(n)
        }
        None => None,
    };
    let n = count.unwrap_or(1);
    let popped = remove_range(ctx, &args[1], &Query::new(Range::Rank(0, n - 1), max))?;
    let nested = count.is_some() && ctx.out.proto == Proto::Resp3;
    if nested {
        reply_members(ctx.out, &popped, true);
    } else {
        ctx.out.array(popped.len() * 2);
        for (m, s) in &popped {
            ctx.out.bulk(m);
            reply_score(ctx.out, *s);
        }
    }
    Ok(Flow::Continue)
}

/// ZSCAN key cursor [MATCH pattern] [COUNT count]: member, score pairs in member order
/// (scores as bulk strings in either protocol, as Redis 7.0's SCAN family replies them).
pub(super) fn zscan(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    scan_elements(ctx, args, Coll::ZSet, |v| {
        decode_score(v)
            .map(format_score)
            .unwrap_or_default()
            .into_bytes()
    })
}

// ---------------------------------------------------------------------------------------
// Algebra and the STORE forms.

/// Replaces `dst` (whatever its type) with a sorted set of `items` (distinct members), or
/// deletes it when `items` is empty; the result has no deadline.
pub(super) fn store_result(ctx: &Ctx<'_>, dst: &[u8], items: &[Scored]) -> Result<(), CmdError> {
    replace_key(ctx, dst, |b, version| {
        if items.is_empty() {
            return None;
        }
        let mut keys = Vec::with_capacity(items.len());
        for (member, score) in items {
            let score = canonical(*score);
            b.put(ks::field_key(dst, version, member), encode_score(score));
            b.put(ks::score_key(dst, version, score, member), b"");
            keys.push(score_suffix(score, member));
        }
        keys.sort_unstable();
        zset_index::build_records(b, dst, version, keys.into_iter());
        Some(ks::coll_value(CollMeta::new(
            Coll::ZSet,
            version,
            items.len() as u64,
        )))
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

impl Aggregate {
    fn apply(self, acc: &mut f64, v: f64) {
        match self {
            Aggregate::Sum => {
                *acc += v;
                // inf + -inf: Redis's convention is 0.
                if acc.is_nan() {
                    *acc = 0.0;
                }
            }
            Aggregate::Min => {
                if v < *acc {
                    *acc = v;
                }
            }
            Aggregate::Max => {
                if v > *acc {
                    *acc = v;
                }
            }
        }
    }
}

/// The members of an algebra source: a sorted set's with their scores, a set's at score
/// 1, none for a missing key; WRONGTYPE for other types.
fn read_source(db: &Db, key: &[u8], ropts: &ReadOptions) -> Result<Vec<Scored>, CmdError> {
    let Some(rec) = ks::get(db, key, ropts)? else {
        return Ok(Vec::new());
    };
    let m = match rec.kind()? {
        Kind::Coll(m) if m.coll == Coll::ZSet || m.coll == Coll::Set => m,
        _ => return Err(ks::wrongtype()),
    };
    let mut it = db.iter_opt(&ReadOptions {
        scan_length_hint: usize::try_from(m.len).ok(),
        ..ks::field_ropts(key, m.version, ropts.snapshot)
    })?;
    it.seek_to_first()?;
    let plen = ks::field_prefix(key, m.version).len();
    let mut out = Vec::with_capacity(usize::try_from(m.len).unwrap_or(0).min(1 << 16));
    while it.valid() {
        let score = if m.coll == Coll::ZSet {
            decode_score(it.value())?
        } else {
            1.0
        };
        out.push((it.key()[plen..].to_vec(), score));
        it.next()?;
    }
    Ok(out)
}

/// Which form of the algebra runs: its reply and the options it takes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// ZUNION / ZINTER / ZDIFF: WITHSCORES.
    Reply,
    /// The STORE forms.
    Store,
    /// ZINTERCARD: LIMIT, no WEIGHTS / AGGREGATE.
    Card,
}

/// The algebra's result and its options: WITHSCORES, ZINTERCARD's LIMIT (0: none).
struct Computed {
    result: Vec<Scored>,
    withscores: bool,
    limit: i64,
}

/// Runs ZUNION / ZINTER / ZDIFF, their STORE forms and ZINTERCARD (numkeys at
/// `args[nk]`), with Redis's order of checks: numkeys, the sources' types, the options.
fn algebra(
    db: &Db,
    args: &[Bytes],
    nk: usize,
    op: SetOp,
    form: Form,
) -> Result<Computed, CmdError> {
    let name = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
    let numkeys = int_arg(&args[nk])?;
    if numkeys < 1 {
        return Err(CmdError::err(format!(
            "at least 1 input key is needed for '{name}' command"
        )));
    }
    let first = nk + 1;
    if numkeys > (args.len() - first) as i64 {
        return Err(CmdError::err(SYNTAX));
    }
    let numkeys = numkeys as usize;
    let sources = {
        let (_snap, ropts) = at_snapshot(db);
        let mut s = Vec::with_capacity(numkeys);
        for k in &args[first..first + numkeys] {
            s.push(read_source(db, k, &ropts)?);
        }
        s
    };
    let mut weights = vec![1.0f64; numkeys];
    let mut agg = Aggregate::Sum;
    let (mut withscores, mut limit) = (false, 0i64);
    let mut j = first + numkeys;
    while j < args.len() {
        let remaining = args.len() - j;
        let o = args[j].to_ascii_lowercase();
        let full = op != SetOp::Diff && form != Form::Card;
        if full && remaining > numkeys && o == b"weights" {
            for (i, w) in weights.iter_mut().enumerate() {
                *w = parse_score(&args[j + 1 + i])
                    .ok_or_else(|| CmdError::err("weight value is not a float"))?;
            }
            j += 1 + numkeys;
        } else if full && remaining >= 2 && o == b"aggregate" {
            agg = match args[j + 1].to_ascii_lowercase().as_slice() {
                b"sum" => Aggregate::Sum,
                b"min" => Aggregate::Min,
                b"max" => Aggregate::Max,
                _ => return Err(CmdError::err(SYNTAX)),
            };
            j += 2;
        } else if form == Form::Reply && o == b"withscores" {
            withscores = true;
            j += 1;
        } else if form == Form::Card && remaining >= 2 && o == b"limit" {
            limit = crate::resp::parse_int(&args[j + 1])
                .filter(|n| *n >= 0)
                .ok_or_else(|| CmdError::err("LIMIT can't be negative"))?;
            j += 2;
        } else {
            return Err(CmdError::err(SYNTAX));
        }
    }
    let weigh = |s: f64, w: f64| {
        let v = s * w;
        if v.is_nan() {
            0.0
        } else {
            v
        }
    };
    let mut acc: HashMap<Vec<u8>, f64> = HashMap::new();
    let mut it = sources.into_iter().zip(weights);
    if let Some((src, w)) = it.next() {
        let w = if op == SetOp::Diff { 1.0 } else { w };
        for (m, s) in src {
            acc.insert(m, weigh(s, w));
        }
    }
    for (src, w) in it {
        match op {
            SetOp::Union => {
                for (m, s) in src {
                    let v = weigh(s, w);
                    match acc.get_mut(&m) {
                        Some(a) => agg.apply(a, v),
                        None => {
                            acc.insert(m, v);
                        }
                    }
                }
            }
            SetOp::Inter => {
                let other: HashMap<Vec<u8>, f64> = src.into_iter().collect();
                acc.retain(|m, a| match other.get(m) {
                    Some(&s) => {
                        agg.apply(a, weigh(s, w));
                        true
                    }
                    None => false,
                });
            }
            SetOp::Diff => {
                for (m, _) in src {
                    acc.remove(&m);
                }
            }
        }
    }
    let mut result: Vec<Scored> = acc.into_iter().map(|(m, s)| (m, canonical(s))).collect();
    result.sort_by(|a, b| (ks::score_bytes(a.1), &a.0).cmp(&(ks::score_bytes(b.1), &b.0)));
    Ok(Computed {
        result,
        withscores,
        limit,
    })
}

fn set_op(name: &[u8]) -> SetOp {
    let name = name.to_ascii_lowercase();
    if name.starts_with(b"zunion") {
        SetOp::Union
    } else if name.starts_with(b"zinter") {
        SetOp::Inter
    } else {
        SetOp::Diff
    }
}

/// ZUNION / ZINTER numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX]
/// [WITHSCORES], ZDIFF numkeys key [key ...] [WITHSCORES]: in score order. Sets count as
/// sorted sets of score 1.
pub(super) fn zalgebra(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let c = algebra(&ctx.shared.db(), args, 1, set_op(&args[0]), Form::Reply)?;
    reply_members(ctx.out, &c.result, c.withscores);
    Ok(Flow::Continue)
}

/// ZUNIONSTORE / ZINTERSTORE / ZDIFFSTORE dst numkeys key [key ...] ...: replaces `dst`
/// with the result (deleted when empty); the result's size.
pub(super) fn zalgebra_store(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let c = algebra(&ctx.shared.db(), args, 2, set_op(&args[0]), Form::Store)?;
    store_result(ctx, &args[1], &c.result)?;
    ctx.out.int(c.result.len() as i64);
    Ok(Flow::Continue)
}

/// ZINTERCARD numkeys key [key ...] [LIMIT limit]: the intersection's size (at most
/// `limit` unless 0). Sets count as sorted sets.
pub(super) fn zintercard(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let c = algebra(&ctx.shared.db(), args, 1, SetOp::Inter, Form::Card)?;
    let n = c.result.len() as i64;
    ctx.out.int(if c.limit > 0 { n.min(c.limit) } else { n });
    Ok(Flow::Continue)
}

/// ZRANDMEMBER key [count [WITHSCORES]]: one random member (nil for a missing key), or
/// `count` distinct ones (all when fewer), or for a negative count `-count` that may
/// repeat. Reads the whole set at one snapshot (O(N)); a reply past the output limit
/// closes the connection.
pub(super) fn zrandmember(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let count = match args.get(2) {
        Some(c) => Some(int_arg(c)?),
        None => None,
    };
    let withscores = match args.get(3) {
        None => false,
        Some(a) if args.len() == 4 && a.eq_ignore_ascii_case(b"withscores") => true,
        Some(_) => return Err(CmdError::err(SYNTAX)),
    };
    let db = &ctx.shared.db();
    let (_snap, ropts) = at_snapshot(db);
    if meta(db, &args[1], &ropts)?.is_none() {
        match count {
            None => ctx.out.null(),
            Some(_) => ctx.out.array(0),
        }
        return Ok(Flow::Continue);
    }
    let all = read_source(db, &args[1], &ropts)?;
    let mut rng = rand::thread_rng();
    let Some(count) = count else {
        if all.is_empty() {
            ctx.out.null();
        } else {
            ctx.out.bulk(&all[rng.gen_range(0..all.len())].0);
        }
        return Ok(Flow::Continue);
    };
    if count >= 0 || all.is_empty() {
        let n = (count.max(0) as u64).min(all.len() as u64) as usize;
        let picked: Vec<Scored> = sample(&mut rng, all.len(), n)
            .into_iter()
            .map(|i| all[i].clone())
            .collect();
        reply_members(ctx.out, &picked, withscores);
        return Ok(Flow::Continue);
    }
    // With repetitions: written as drawn, stopping once the output limit is passed
    // (the connection then closes).
    let n = count.unsigned_abs();
    let resp3 = ctx.out.proto == Proto::Resp3;
    let header = if withscores && !resp3 {
        n.saturating_mul(2)
    } else {
        n
    };
    ctx.out.array(usize::try_from(header).unwrap_or(usize::MAX));
    for _ in 0..n {
        let (member, score) = &all[rng.gen_range(0..all.len())];
        if withscores && resp3 {
            ctx.out.array(2);
        }
        ctx.out.bulk(member);
        if withscores {
            reply_score(ctx.out, *score);
        }
        if ctx.out.overflowed() {
            return Ok(Flow::Overflow);
        }
    }
    Ok(Flow::Continue)
}

/// The `numkeys key... MIN|MAX [COUNT count]` of ZMPOP / BZMPOP (from `args[at]` on):
/// the keys, whether to pop the highest scores, how many.
fn parse_mpop(args: &[Bytes], at: usize) -> Result<(Vec<Bytes>, bool, i64), CmdError> {
    let numkeys = crate::resp::parse_int(&args[at])
        .filter(|n| *n >= 1)
        .ok_or_else(|| CmdError::err("numkeys should be greater than 0"))?;
    let where_idx = usize::try_from(numkeys)
        .ok()
        .and_then(|n| n.checked_add(at + 1))
        .filter(|i| *i < args.len())
        .ok_or_else(|| CmdError::err(SYNTAX))?;
    let max = match args[where_idx].to_ascii_lowercase().as_slice() {
        b"min" => false,
        b"max" => true,
        _ => return Err(CmdError::err(SYNTAX)),
    };
    let mut count = None;
    let mut j = where_idx + 1;
    while j < args.len() {
        if count.is_none() && args[j].eq_ignore_ascii_case(b"count") && j + 1 < args.len() {
            count = Some(
                crate::resp::parse_int(&args[j + 1])
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| CmdError::err("count should be greater than 0"))?,
            );
            j += 2;
        } else {
            return Err(CmdError::err(SYNTAX));
        }
    }
    Ok((args[at + 1..where_idx].to_vec(), max, count.unwrap_or(1)))
}

/// A pop from several sorted sets: the key popped from and its members.
type Popped = (Bytes, Vec<Scored>);

/// Pops up to `n` members (the lowest scores, or the highest when `max`) from the first
/// of `keys` that holds a sorted set; WRONGTYPE when the first existing key is another
/// type.
fn pop_first(ctx: &Ctx<'_>, keys: &[Bytes], max: bool, n: i64) -> Result<Option<Popped>, CmdError> {
    for key in keys {
        if meta(&ctx.shared.db(), key, &ReadOptions::new())?.is_none() {
            continue;
        }
        let popped = remove_range(ctx, key, &Query::new(Range::Rank(0, n - 1), max))?;
        if !popped.is_empty() {
            return Ok(Some((key.clone(), popped)));
        }
    }
    Ok(None)
}

/// ZMPOP's and BZMPOP's reply: `[key, [[member, score] ...]]`, a null array for none.
fn reply_mpop(ctx: &mut Ctx<'_>, r: Option<Popped>) {
    let Some((key, popped)) = r else {
        ctx.out.null_array();
        return;
    };
    ctx.out.array(2);
    ctx.out.bulk(&key);
    ctx.out.array(popped.len());
    for (m, s) in &popped {
        ctx.out.array(2);
        ctx.out.bulk(m);
        reply_score(ctx.out, *s);
    }
}

/// ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]: pops from the first of the keys
/// that holds a sorted set: `[key, [[member, score] ...]]`, nil when none does.
pub(super) fn zmpop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let (keys, max, n) = parse_mpop(args, 1)?;
    let r = pop_first(ctx, &keys, max, n)?;
    reply_mpop(ctx, r);
    Ok(Flow::Continue)
}

/// BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]: ZMPOP, blocking until one
/// of the keys has members or the timeout passes (a null array).
pub(super) fn bzmpop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let timeout = timeout_arg(&args[1])?;
    let (keys, max, n) = parse_mpop(args, 2)?;
    let watched = keys.clone();
    block_or_reply(
        ctx,
        args,
        watched,
        timeout,
        |ctx| pop_first(ctx, &keys, max, n),
        reply_mpop,
    )
}

/// BZPOPMIN / BZPOPMAX key [key ...] timeout: `[key, member, score]` from the first
/// non-empty sorted set, blocking until one has members or the timeout passes (a null
/// array).
pub(super) fn bzpop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let max = args[0].eq_ignore_ascii_case(b"bzpopmax");
    let timeout = timeout_arg(&args[args.len() - 1])?;
    let keys = args[1..args.len() - 1].to_vec();
    let watched = keys.clone();
    block_or_reply(
        ctx,
        args,
        watched,
        timeout,
        |ctx| pop_first(ctx, &keys, max, 1),
        |ctx, r| match r.and_then(|(k, p)| Some((k, p.into_iter().next()?))) {
            None => ctx.out.null_array(),
            Some((k, (m, s))) => {
                ctx.out.array(3);
                ctx.out.bulk(&k);
                ctx.out.bulk(&m);
                reply_score(ctx.out, s);
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_print_and_parse_as_redis() {
        // Pairs checked against C's printf("%.17g").
        for (v, s) in [
            (1.5, "1.5"),
            (3.0, "3"),
            (-3.0, "-3"),
            (0.0, "0"),
            (-0.0, "0"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (1e300, "1.0000000000000001e+300"),
            (1.5e-7, "1.4999999999999999e-07"),
            (1e-5, "1.0000000000000001e-05"),
            (0.0001, "0.0001"),
            (1e16, "10000000000000000"),
            (9.999999999999998e16, "99999999999999984"),
            (1e17, "1e+17"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1.1, "1.1000000000000001"),
            (123.456, "123.456"),
            (-1.75, "-1.75"),
            (5e-324, "4.9406564584124654e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
        ] {
            assert_eq!(format_score(v), s, "{v}");
        }
        for (t, v) in [
            ("1.5", Some(1.5)),
            ("inf", Some(f64::INFINITY)),
            ("+inf", Some(f64::INFINITY)),
            ("-inf", Some(f64::NEG_INFINITY)),
            ("-Infinity", Some(f64::NEG_INFINITY)),
            ("1e400", None),
            ("1e-400", None),
            ("0e0", Some(0.0)),
            ("nan", None),
            ("", None),
            (" 1", None),
            ("1x", None),
        ] {
            assert_eq!(parse_score(t.as_bytes()), v, "{t:?}");
        }
        let r = ScoreRange::parse(b"(1", b"+inf").unwrap();
        assert!(r.minex && !r.maxex && r.min == 1.0 && r.max == f64::INFINITY);
        assert!(ScoreRange::parse(b"(", b"1e400").is_ok());
        assert!(ScoreRange::parse(b"x", b"1").is_err());
        assert!(ScoreRange::parse(b"1", b"nan").is_err());
        assert!(LexBound::parse(b"a").is_err() && LexBound::parse(b"").is_err());
        assert!(LexBound::parse(b"+x").is_err());
    }
}

//! The sorted sets' rank index: counted chunks over a sorted set's score records, so that
//! finding the member at a rank (ZRANGE / ZREVRANGE by rank, ZREMRANGEBYRANK) or the rank
//! of a member (ZRANK / ZREVRANK) reads O(levels x chunk) records instead of stepping
//! through every score record before it. This module owns the index's records: their
//! maintenance inside a sorted-set write step ([`update`]), their building for a new set
//! ([`build_records`]) or for a set stored before the index existed ([`build`]), and the
//! two lookups ([`locate`], [`rank_of`]).
//!
//! The records (docs/FORMAT.md, "Server keyspace"): `ks::rank_key(K, version, level, sep)`
//! -> member count (u64 BE) and child count (u64 BE). A record is keyed by the upper end
//! of its range (inclusive): it covers what lies after the previous record's separator
//! of its level, up to and including its own. Level 1 counts the score records so; a
//! level-l record (l >= 2) covers the level-(l-1) records so, its member count theirs
//! summed, its child count how many they are. Every level's last record has the separator
//! [`END`] (above every score record key), and every separator of a level >= 2 is also
//! one of the level below (a record's last child has its separator). A separator is a
//! boundary, not necessarily a member: removing the member a chunk ends with leaves it.
//! The highest level (the top) is read from its start; a header record (level 0, empty
//! separator) holds its number (one byte).
//!
//! Why the upper end: the record covering a key is then the first record at or after it,
//! one forward seek, which lands on the record's newest version. Finding the last record
//! at or before a key would step backward, and a record that every write rewrites has
//! many versions in the memtable, each backward step there a search of it.
//!
//! Chunk sizes: with `C` = [`chunk`] (32 unless a test sets another), a record holds
//! `C / 2 ..= 2C` children: one above `2C` is split into pieces of about `C`, one below
//! `C / 2` is merged into a sibling under the same parent (a record that is its parent's
//! only child waits for its parent to merge). The top level is kept to at most `2C`
//! records by adding a level above it, and a top level of one record is dropped. With
//! `C` = 32, 1,000,000 members take 3 levels and a lookup reads about 100 records.
//!
//! Consistency: every change to the index is made inside a sorted-set write step
//! (`hashes::edit_coll`, the atomic step conditioned on the set's metadata record), in the
//! same batch as the score records it counts, from the step's net score-record changes;
//! so writers of one set are serialised by the metadata record as before, and a lookup at
//! any snapshot sees an index that counts exactly that snapshot's score records. A set
//! stored before the index existed (no index records) is indexed by [`build`], a step of
//! its own conditioned on (and rewriting) the metadata record, the first time a rank
//! lookup would otherwise step far; until then its writes leave it unindexed.

use super::CmdError;
use crate::keyspace::{self as ks, Coll};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use tierkv::{Db, DbIterator, ReadOptions, WriteBatch, WriteOptions};

/// The chunk size `C` of new and rebalanced records (see the module doc).
pub const DEFAULT_CHUNK: u64 = 32;

static CHUNK: AtomicU64 = AtomicU64::new(DEFAULT_CHUNK);

/// Sets the chunk size (at least 4) of every server in this process; returns the old one.
/// For tests, which make sets of a few hundred members cross many splits and merges. Any
/// size reads any index: the size only decides when records split and merge.
pub fn set_chunk(n: u64) -> u64 {
    CHUNK.swap(n.max(4), Ordering::Relaxed)
}

/// The current chunk size.
pub(super) fn chunk() -> u64 {
    CHUNK.load(Ordering::Relaxed)
}

/// The separator of every level's last record: above every score record key (whose first
/// bytes are an ordered score; `+inf` orders as `ff f0 ...`, and NaN is never stored).
pub(crate) const END: &[u8] = &[0xff, 0xff];

/// The header record's key after the version prefix (level 0, empty separator): its value
/// is the top level (one byte).
const HEADER: &[u8] = &[0];

fn corrupt(what: &str) -> CmdError {
    CmdError::err(format!("corrupt sorted-set rank index: {what}"))
}

/// A record's counts: the members under it and its children.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counts {
    members: u64,
    children: u64,
}

/// A score record, as a child of a level-1 record.
const MEMBER: Counts = Counts {
    members: 1,
    children: 1,
};

impl Counts {
    fn encode(self) -> Vec<u8> {
        let mut v = Vec::with_capacity(16);
        v.extend_from_slice(&self.members.to_be_bytes());
        v.extend_from_slice(&self.children.to_be_bytes());
        v
    }

    fn decode(v: &[u8]) -> Result<Counts, CmdError> {
        let word = |at: usize| -> Result<u64, CmdError> {
            let b: [u8; 8] = v
                .get(at..at + 8)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| corrupt("a record's value is not 16 bytes"))?;
            Ok(u64::from_be_bytes(b))
        };
        if v.len() != 16 {
            return Err(corrupt("a record's value is not 16 bytes"));
        }
        Ok(Counts {
            members: word(0)?,
            children: word(8)?,
        })
    }

    fn plus(self, o: Counts) -> Counts {
        Counts {
            members: self.members.saturating_add(o.members),
            children: self.children.saturating_add(o.children),
        }
    }
}

/// An index record's key after the version prefix: the level, then the separator.
fn lkey(level: u8, sep: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(1 + sep.len());
    v.push(level);
    v.extend_from_slice(sep);
    v
}

/// The smallest key above `k` (every key above it starts with it or sorts after it).
fn just_after(k: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(k.len() + 1);
    v.extend_from_slice(k);
    v.push(0);
    v
}

// ---------------------------------------------------------------------------------------
// Building.

/// The index records (level, separator, counts) of a set whose score records' keys (after
/// the score prefix) are `keys`, in order: level 1 in chunks of `C` members from the
/// first, a short last chunk merged into the one before, and levels above it grouping `C`
/// records at a time until a level has at most `2C` records. Nothing for no keys.
fn build_levels(keys: impl Iterator<Item = Vec<u8>>) -> Vec<(u8, Vec<u8>, Counts)> {
    let c = chunk();
    // Merges a short last record into the one before it (at most 1.5C children then),
    // which takes its separator (the level's end).
    let fold_tail = |level: &mut Vec<(Vec<u8>, Counts)>| {
        if level.len() >= 2 && level[level.len() - 1].1.children < c / 2 {
            if let Some((sep, tail)) = level.pop() {
                if let Some(last) = level.last_mut() {
                    *last = (sep, last.1.plus(tail));
                }
            }
        }
    };
    let mut level: Vec<(Vec<u8>, Counts)> = Vec::new();
    for (n, k) in keys.enumerate() {
        if (n as u64).is_multiple_of(c) {
            level.push((Vec::new(), Counts::default()));
        }
        if let Some(last) = level.last_mut() {
            *last = (k, last.1.plus(MEMBER));
        }
    }
    if let Some(last) = level.last_mut() {
        last.0 = END.to_vec();
    }
    fold_tail(&mut level);
    let mut out: Vec<(u8, Vec<u8>, Counts)> = Vec::new();
    let mut l = 1u8;
    loop {
        let above = level.len() as u64 > 2 * c;
        let mut next: Vec<(Vec<u8>, Counts)> = Vec::new();
        for (i, (sep, counts)) in level.into_iter().enumerate() {
            if above {
                if (i as u64).is_multiple_of(c) {
                    next.push((Vec::new(), Counts::default()));
                }
                if let Some(last) = next.last_mut() {
                    let add = Counts {
                        members: counts.members,
                        children: 1,
                    };
                    *last = (sep.clone(), last.1.plus(add));
                }
            }
            out.push((l, sep, counts));
        }
        if !above {
            return out;
        }
        fold_tail(&mut next);
        level = next;
        l += 1;
    }
}

/// Adds to `batch` the index of a new set of `version` whose score records' keys (after
/// the score prefix) are `keys`, in order.
pub(super) fn build_records(
    batch: &mut WriteBatch,
    key: &[u8],
    version: u64,
    keys: impl Iterator<Item = Vec<u8>>,
) {
    let mut top = 0;
    for (l, sep, counts) in build_levels(keys) {
        batch.put(ks::rank_key(key, version, l, &sep), counts.encode());
        top = l;
    }
    if top > 0 {
        batch.put(ks::rank_key(key, version, 0, b""), [top]);
    }
}

/// The top level a header record's value names (an error for a malformed one).
fn top_of(v: &[u8]) -> Result<u8, CmdError> {
    match v {
        [top] if *top >= 1 => Ok(*top),
        _ => Err(corrupt("a malformed header")),
    }
}

/// The top level of sorted set `key`'s index at `version` at `ropts` (None: no index).
fn top_level(
    db: &Db,
    key: &[u8],
    version: u64,
    ropts: &ReadOptions,
) -> Result<Option<u8>, CmdError> {
    db.get_opt(ks::rank_key(key, version, 0, b""), ropts)?
        .map(|v| top_of(&v))
        .transpose()
}

/// Indexes sorted set `key` if it is one without an index (stored before the index
/// existed): one step conditioned on its metadata record, which it rewrites unchanged so
/// that a writer that read the set as unindexed retries (and then maintains the index).
/// Reads every score record once. Returns whether it wrote an index.
pub(super) fn build(db: &Db, key: &[u8]) -> Result<bool, CmdError> {
    let mk = ks::meta_key(key);
    let mut err = None;
    let applied = ks::transact(db, &WriteOptions::default(), &[&mk], |cur| {
        err = None;
        let rec = cur[0].as_ref()?;
        let m = rec.coll(Coll::ZSet).ok()?;
        let mut b = WriteBatch::new();
        let built = (|| -> Result<bool, CmdError> {
            if top_level(db, key, m.version, &ReadOptions::new())?.is_some() {
                return Ok(false);
            }
            let prefix = ks::score_prefix(key, m.version);
            let mut it = db.iter_opt(&ReadOptions {
                fill_cache: false,
                ..ks::prefix_ropts(&prefix, None)
            })?;
            it.seek_to_first()?;
            let mut keys = Vec::new();
            while it.valid() {
                keys.push(it.key()[prefix.len()..].to_vec());
                it.next()?;
            }
            if keys.is_empty() {
                return Ok(false);
            }
            build_records(&mut b, key, m.version, keys.into_iter());
            Ok(true)
        })();
        match built {
            Ok(true) => {
                ks::put(&mut b, &mk, &rec.raw, rec.deadline);
                Some(b)
            }
            Ok(false) => None,
            Err(e) => {
                err = Some(e);
                None
            }
        }
    })?;
    match err {
        Some(e) => Err(e),
        None => Ok(applied),
    }
}

// ---------------------------------------------------------------------------------------
// Lookups (at a read point, no writes).

/// An iterator over the index records of `key` at `version`, and the top level (None: the
/// set has no index at `ropts`).
fn open_index(
    db: &Db,
    key: &[u8],
    version: u64,
    ropts: &ReadOptions,
) -> Result<Option<(DbIterator, Vec<u8>, u8)>, CmdError> {
    let Some(top) = top_level(db, key, version, ropts)? else {
        return Ok(None);
    };
    let prefix = ks::rank_prefix(key, version);
    let it = db.iter_opt(&ks::prefix_ropts(&prefix, ropts.snapshot))?;
    Ok(Some((it, prefix, top)))
}

/// The current index record's level, separator and counts (None: past the end).
fn cur(it: &DbIterator, plen: usize) -> Result<Option<(u8, Vec<u8>, Counts)>, CmdError> {
    if !it.valid() {
        return Ok(None);
    }
    let rest = &it.key()[plen..];
    let (&l, sep) = rest
        .split_first()
        .ok_or_else(|| corrupt("a record without a level"))?;
    Ok(Some((l, sep.to_vec(), Counts::decode(it.value())?)))
}

/// Positions `it` at the first level-`l` record after separator `lower` (None: the
/// level's first record): the first child of the record whose range starts after it.
fn seek_children(
    it: &mut DbIterator,
    prefix: &[u8],
    l: u8,
    lower: Option<&[u8]>,
) -> Result<(), CmdError> {
    let at = match lower {
        Some(lw) => just_after(lw),
        None => Vec::new(),
    };
    it.seek([prefix, &lkey(l, &at)].concat())?;
    Ok(())
}

/// Where the member at (0-based, from the lowest) `rank` of sorted set `key` at `version`
/// is, at `ropts`: a score record key (after the score prefix) to seek to, and how many
/// score records from there precede it. None when the set has no index at `ropts`; an
/// error when `rank` is past the members the index counts.
pub(super) fn locate(
    db: &Db,
    key: &[u8],
    version: u64,
    ropts: &ReadOptions,
    rank: u64,
) -> Result<Option<(Vec<u8>, u64)>, CmdError> {
    let Some((mut it, prefix, top)) = open_index(db, key, version, ropts)? else {
        return Ok(None);
    };
    let plen = prefix.len();
    // The separator of the last record passed (the range found starts after it).
    let (mut l, mut lower, mut before) = (top, None::<Vec<u8>>, 0u64);
    loop {
        // The children of the record found above (the whole top level first).
        seek_children(&mut it, &prefix, l, lower.as_deref())?;
        loop {
            let Some((_, rsep, c)) = cur(&it, plen)?.filter(|r| r.0 == l) else {
                return Err(corrupt("counts end before the rank"));
            };
            if before + c.members > rank {
                break;
            }
            before += c.members;
            lower = Some(rsep);
            it.next()?;
        }
        if l == 1 {
            let from = lower.map(|lw| just_after(&lw)).unwrap_or_default();
            return Ok(Some((from, rank - before)));
        }
        l -= 1;
    }
}

/// The rank (0-based, from the lowest) of the score record key `target` (after the score
/// prefix) of sorted set `key` at `version`, at `ropts`: how many score records precede
/// it. None when the set has no index at `ropts`.
pub(super) fn rank_of(
    db: &Db,
    key: &[u8],
    version: u64,
    ropts: &ReadOptions,
    target: &[u8],
) -> Result<Option<u64>, CmdError> {
    let Some((mut it, prefix, top)) = open_index(db, key, version, ropts)? else {
        return Ok(None);
    };
    let plen = prefix.len();
    let (mut l, mut lower, mut rank) = (top, None::<Vec<u8>>, 0u64);
    loop {
        // Among the children of the record found above, those ending below the target
        // precede it; the first ending at or above it covers it.
        seek_children(&mut it, &prefix, l, lower.as_deref())?;
        loop {
            let Some((_, rsep, c)) = cur(&it, plen)?.filter(|r| r.0 == l) else {
                return Err(corrupt("a level does not reach its end"));
            };
            if rsep.as_slice() >= target {
                break;
            }
            rank += c.members;
            lower = Some(rsep);
            it.next()?;
        }
        if l == 1 {
            break;
        }
        l -= 1;
    }
    // The score records of the covering chunk before the target.
    let sp = ks::score_prefix(key, version);
    let from = lower.map(|lw| just_after(&lw)).unwrap_or_default();
    let mut it = db.iter_opt(&ReadOptions {
        lower_bound: Some([sp.as_slice(), &from].concat()),
        upper_bound: Some([sp.as_slice(), target].concat()),
        snapshot: ropts.snapshot,
        ..ReadOptions::new()
    })?;
    it.seek_to_first()?;
    while it.valid() {
        rank += 1;
        it.next()?;
    }
    Ok(Some(rank))
}

// ---------------------------------------------------------------------------------------
// Maintenance inside a write step.

/// One record family (the score records, or the index records) as a write step sees it:
/// what the store holds under the step's own changes so far.
struct View {
    it: DbIterator,
    prefix: Vec<u8>,
    /// Records changed by the step, by key after the prefix: the new value, None when
    /// deleted.
    over: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

type Rec = (Vec<u8>, Vec<u8>);

/// A record's change in a step: its key at its level, its stored and its new counts
/// (None: absent).
type Change = (Vec<u8>, Option<Counts>, Option<Counts>);

impl View {
    fn open(db: &Db, prefix: Vec<u8>) -> Result<View, CmdError> {
        let it = db.iter_opt(&ks::prefix_ropts(&prefix, None))?;
        Ok(View {
            it,
            prefix,
            over: BTreeMap::new(),
        })
    }

    fn full(&self, k: &[u8]) -> Vec<u8> {
        [self.prefix.as_slice(), k].concat()
    }

    /// The stored record under the iterator, or the nearest one in direction `forward`
    /// that the step has not deleted, with the step's value if it changed it.
    fn live(&mut self, forward: bool) -> Result<Option<Rec>, CmdError> {
        while self.it.valid() {
            let s = self.it.key()[self.prefix.len()..].to_vec();
            match self.over.get(&s) {
                Some(None) if forward => self.it.next()?,
                Some(None) => self.it.prev()?,
                Some(Some(v)) => return Ok(Some((s, v.clone()))),
                None => return Ok(Some((s, self.it.value().to_vec()))),
            }
        }
        Ok(None)
    }

    /// The step's own record nearest in `range` (from its end when `last`).
    fn staged(&self, range: (Bound<&[u8]>, Bound<&[u8]>), last: bool) -> Option<Rec> {
        let mut r = self.over.range::<[u8], _>(range);
        let found =
            |(k, v): (&Vec<u8>, &Option<Vec<u8>>)| v.as_ref().map(|v| (k.clone(), v.clone()));
        if last {
            r.rev().find_map(found)
        } else {
            r.find_map(found)
        }
    }

    fn get(&mut self, k: &[u8]) -> Result<Option<Vec<u8>>, CmdError> {
        if let Some(v) = self.over.get(k) {
            return Ok(v.clone());
        }
        let full = self.full(k);
        self.it.seek(&full)?;
        Ok((self.it.valid() && self.it.key() == full.as_slice()).then(|| self.it.value().to_vec()))
    }

    /// The last record at or below `k` (`inclusive`) or below it.
    fn before(&mut self, k: &[u8], inclusive: bool) -> Result<Option<Rec>, CmdError> {
        let full = self.full(k);
        self.it.seek_for_prev(&full)?;
        if !inclusive && self.it.valid() && self.it.key() == full.as_slice() {
            self.it.prev()?;
        }
        let stored = self.live(false)?;
        let hi = if inclusive {
            Bound::Included(k)
        } else {
            Bound::Excluded(k)
        };
        let staged = self.staged((Bound::Unbounded, hi), true);
        Ok(match (stored, staged) {
            (Some(a), Some(b)) => Some(if a.0 > b.0 { a } else { b }),
            (a, b) => a.or(b),
        })
    }

    /// The first record above `k`.
    fn after(&mut self, k: &[u8]) -> Result<Option<Rec>, CmdError> {
        let full = self.full(k);
        self.it.seek(&full)?;
        if self.it.valid() && self.it.key() == full.as_slice() {
            self.it.next()?;
        }
        let stored = self.live(true)?;
        let staged = self.staged((Bound::Excluded(k), Bound::Unbounded), false);
        Ok(match (stored, staged) {
            (Some(a), Some(b)) => Some(if a.0 < b.0 { a } else { b }),
            (a, b) => a.or(b),
        })
    }

    /// Every record from `from` (inclusive) to `to` (exclusive; None: the end), in order.
    fn scan(&mut self, from: &[u8], to: Option<&[u8]>) -> Result<Vec<Rec>, CmdError> {
        let mut out: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let full = self.full(from);
        self.it.seek(&full)?;
        while self.it.valid() {
            let s = &self.it.key()[self.prefix.len()..];
            if to.is_some_and(|t| s >= t) {
                break;
            }
            out.insert(s.to_vec(), self.it.value().to_vec());
            self.it.next()?;
        }
        let hi = to.map_or(Bound::Unbounded, Bound::Excluded);
        for (k, v) in self.over.range::<[u8], _>((Bound::Included(from), hi)) {
            match v {
                Some(v) => out.insert(k.clone(), v.clone()),
                None => out.remove(k),
            };
        }
        Ok(out.into_iter().collect())
    }
}

/// A write step's view of a set's score records (level 0) and index records.
struct Step<'a> {
    db: &'a Db,
    /// The score records' prefix and the step's changes to them, until `members` opens.
    score_prefix: Vec<u8>,
    moved: &'a BTreeMap<Vec<u8>, bool>,
    /// The score records (opened when a level-1 record splits).
    members: Option<View>,
    index: View,
    /// The chunk size for this step.
    c: u64,
}

impl Step<'_> {
    /// The score records as the step sees them.
    fn members(&mut self) -> Result<&mut View, CmdError> {
        if self.members.is_none() {
            let mut v = View::open(self.db, self.score_prefix.clone())?;
            for (k, added) in self.moved {
                v.over.insert(k.clone(), added.then(Vec::new));
            }
            self.members = Some(v);
        }
        self.members
            .as_mut()
            .ok_or_else(|| CmdError::err("internal error: score view not open"))
    }

    fn get(&mut self, l: u8, sep: &[u8]) -> Result<Option<Counts>, CmdError> {
        self.index
            .get(&lkey(l, sep))?
            .map(|v| Counts::decode(&v))
            .transpose()
    }

    fn put(&mut self, l: u8, sep: &[u8], c: Option<Counts>) {
        self.index.over.insert(lkey(l, sep), c.map(Counts::encode));
    }

    /// A record of level `l` from an index view record (None: of another level).
    fn at_level(l: u8, r: Option<Rec>) -> Result<Option<(Vec<u8>, Counts)>, CmdError> {
        match r {
            Some((k, v)) if k.first() == Some(&l) => {
                Ok(Some((k[1..].to_vec(), Counts::decode(&v)?)))
            }
            _ => Ok(None),
        }
    }

    /// The stored level-`l` record covering `k` (a separator of level `l` - 1, or a score
    /// key): the first at or after it, one forward seek (the step has not changed level
    /// `l` yet).
    fn covering(&mut self, l: u8, k: &[u8]) -> Result<(Vec<u8>, Counts), CmdError> {
        let full = self.index.full(&lkey(l, k));
        self.index.it.seek(&full)?;
        match cur(&self.index.it, self.index.prefix.len())? {
            Some((rl, rsep, c)) if rl == l => Ok((rsep, c)),
            _ => Err(corrupt("a level does not reach its end")),
        }
    }

    fn next(&mut self, l: u8, sep: &[u8]) -> Result<Option<(Vec<u8>, Counts)>, CmdError> {
        let r = self.index.after(&lkey(l, sep))?;
        Self::at_level(l, r)
    }

    fn prev(&mut self, l: u8, sep: &[u8]) -> Result<Option<(Vec<u8>, Counts)>, CmdError> {
        let r = self.index.before(&lkey(l, sep), false)?;
        Self::at_level(l, r)
    }

    /// The children of level-`l` record `sep`: the records of level `l` - 1 (the score
    /// records for level 1) after the previous level-`l` record's separator, up to and
    /// including `sep`.
    fn children(&mut self, l: u8, sep: &[u8]) -> Result<Vec<(Vec<u8>, Counts)>, CmdError> {
        let from = match self.prev(l, sep)? {
            Some((p, _)) => just_after(&p),
            None => Vec::new(),
        };
        let to = just_after(sep);
        if l == 1 {
            let recs = self.members()?.scan(&from, Some(&to))?;
            return Ok(recs.into_iter().map(|(k, _)| (k, MEMBER)).collect());
        }
        let recs = self
            .index
            .scan(&lkey(l - 1, &from), Some(&lkey(l - 1, &to)))?;
        recs.into_iter()
            .map(|(k, v)| Ok((k[1..].to_vec(), Counts::decode(&v)?)))
            .collect()
    }

    /// Splits level-`l` record `sep` into pieces of about `C` children (rewriting its
    /// counts from its children as they are now); each piece ends at its last child,
    /// the last one at `sep`.
    fn split(&mut self, l: u8, sep: &[u8]) -> Result<(), CmdError> {
        let kids = self.children(l, sep)?;
        let n = kids.len();
        let pieces = (n / self.c as usize).max(1);
        for j in 0..pieces {
            let (from, to) = (j * n / pieces, (j + 1) * n / pieces);
            let mut counts = Counts::default();
            for (_, c) in &kids[from..to] {
                counts = counts.plus(Counts {
                    members: c.members,
                    children: 1,
                });
            }
            let last = if j + 1 == pieces {
                sep
            } else {
                kids[to - 1].0.as_slice()
            };
            self.put(l, last, Some(counts));
        }
        Ok(())
    }

    /// Merges level-`l` record `sep` (below `C / 2` children) into a sibling: the next
    /// record when `sep` ends no parent's range (on the top level every record is a
    /// sibling), else the one before when that one ends none. Returns the record that took
    /// it (None: it is its parent's only child).
    fn merge(&mut self, l: u8, sep: &[u8], top: bool) -> Result<Option<Vec<u8>>, CmdError> {
        let Some(c) = self.get(l, sep)? else {
            return Ok(None);
        };
        if top || self.get(l + 1, sep)?.is_none() {
            if let Some((next, nc)) = self.next(l, sep)? {
                self.put(l, sep, None);
                self.put(l, &next, Some(c.plus(nc)));
                return Ok(Some(next));
            }
        }
        if let Some((prev, pc)) = self.prev(l, sep)? {
            if top || self.get(l + 1, &prev)?.is_none() {
                self.put(l, &prev, None);
                self.put(l, sep, Some(pc.plus(c)));
                return Ok(Some(sep.to_vec()));
            }
        }
        Ok(None)
    }

    /// How many records level `l` has.
    fn level_len(&mut self, l: u8) -> Result<u64, CmdError> {
        Ok(self.index.scan(&[l], Some(&[l + 1]))?.len() as u64)
    }

    /// The step's changes to level `l`: separator, stored counts, new counts. `known`:
    /// stored counts read already (by separator); the others are read.
    fn changes(
        &mut self,
        l: u8,
        known: &BTreeMap<Vec<u8>, Counts>,
    ) -> Result<Vec<Change>, CmdError> {
        let staged: Vec<(Vec<u8>, Option<Vec<u8>>)> = self
            .index
            .over
            .range::<[u8], _>((Bound::Included(&[l][..]), Bound::Excluded(&[l + 1][..])))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut out = Vec::with_capacity(staged.len());
        for (k, v) in staged {
            let old = match known.get(&k[1..]) {
                Some(c) => Some(*c),
                None => {
                    let full = self.index.full(&k);
                    self.index.it.seek(&full)?;
                    (self.index.it.valid() && self.index.it.key() == full.as_slice())
                        .then(|| Counts::decode(self.index.it.value()))
                        .transpose()?
                }
            };
            let new = v.map(|v| Counts::decode(&v)).transpose()?;
            if old != new {
                out.push((k[1..].to_vec(), old, new));
            }
        }
        Ok(out)
    }
}

/// Brings the index of sorted set `key` at `version` up to date with a write step's net
/// changes to its score records, `moved` (score key after the score prefix -> true when
/// added, false when removed), leaving the set with `len` members: adds the index
/// records' changes to the step's `batch`. A new set (every member added by the step) is
/// indexed whole; an emptied one loses its index; one without an index (stored before it
/// existed) is left to [`build`]. Reads the store as the step does (latest state, which
/// the step's condition on the metadata record vouches for).
pub(super) fn update(
    db: &Db,
    key: &[u8],
    version: u64,
    moved: &BTreeMap<Vec<u8>, bool>,
    len: u64,
    batch: &mut WriteBatch,
) -> Result<(), CmdError> {
    if moved.is_empty() {
        return Ok(());
    }
    let prefix = ks::rank_prefix(key, version);
    if len == 0 {
        let mut it = db.iter_opt(&ks::prefix_ropts(&prefix, None))?;
        it.seek_to_first()?;
        while it.valid() {
            batch.delete(it.key());
            it.next()?;
        }
        return Ok(());
    }
    let Some(stored_top) = top_level(db, key, version, &ReadOptions::new())? else {
        if moved.len() as u64 == len && moved.values().all(|added| *added) {
            build_records(batch, key, version, moved.keys().cloned());
        }
        return Ok(());
    };
    let mut top = stored_top;
    let mut s = Step {
        db,
        score_prefix: ks::score_prefix(key, version),
        moved,
        members: None,
        index: View::open(db, prefix)?,
        c: chunk(),
    };
    // The changes of the level below: key, old counts, new counts.
    let mut below: Vec<Change> = moved
        .iter()
        .map(|(k, added)| match added {
            true => (k.clone(), None, Some(MEMBER)),
            false => (k.clone(), Some(MEMBER), None),
        })
        .collect();
    let mut l = 1u8;
    loop {
        // Fold the changes below into the level-l records covering them (the level as
        // stored: the step has not touched it yet). The changes are in key order, so a
        // covering record answers the keys after it up to its separator.
        let mut touched: BTreeMap<Vec<u8>, (Counts, i128, i128)> = BTreeMap::new();
        let mut range: Option<(Vec<u8>, Counts)> = None;
        for (k, old, new) in &below {
            if range.as_ref().is_none_or(|(sep, _)| k > sep) {
                range = Some(s.covering(l, k)?);
            }
            let Some((sep, c)) = &range else {
                return Err(CmdError::err("internal error: no covering record"));
            };
            let d = touched.entry(sep.clone()).or_insert((*c, 0, 0));
            d.1 += new.map_or(0, |c| c.members) as i128 - old.map_or(0, |c| c.members) as i128;
            d.2 += new.is_some() as i128 - old.is_some() as i128;
        }
        // Changes that cancel out (a member moved within one record's range) leave the
        // record, and so the levels above, as they are.
        touched.retain(|_, (_, dm, dc)| *dm != 0 || *dc != 0);
        for (sep, (c, dm, dc)) in &touched {
            let apply = |v: u64, d: i128| u64::try_from(v as i128 + d).ok();
            let (Some(members), Some(children)) = (apply(c.members, *dm), apply(c.children, *dc))
            else {
                return Err(corrupt("a count would go below zero"));
            };
            s.put(l, sep, Some(Counts { members, children }));
        }
        let known: BTreeMap<Vec<u8>, Counts> = touched
            .iter()
            .map(|(sep, (c, _, _))| (sep.clone(), *c))
            .collect();
        // Rebalance what changed.
        let mut work: BTreeSet<Vec<u8>> = touched.into_keys().collect();
        while let Some(sep) = work.pop_first() {
            let Some(c) = s.get(l, &sep)? else {
                continue;
            };
            if c.children > 2 * s.c {
                s.split(l, &sep)?;
            } else if c.children < s.c / 2 {
                if let Some(into) = s.merge(l, &sep, l == top)? {
                    work.insert(into);
                }
            }
        }
        let changes = s.changes(l, &known)?;
        let reshaped = changes
            .iter()
            .any(|(_, old, new)| old.is_some() != new.is_some());
        if l == top {
            if reshaped {
                // A top level grown past 2C gets a level above it; one of a single
                // record is dropped.
                loop {
                    let n = s.level_len(top)?;
                    if n > 2 * s.c {
                        top += 1;
                        s.put(top, END, Some(Counts::default()));
                        s.split(top, END)?;
                    } else if n == 1 && top > 1 {
                        s.put(top, END, None);
                        top -= 1;
                    } else {
                        break;
                    }
                }
            }
            break;
        }
        below = changes;
        l += 1;
    }
    if top != stored_top {
        s.index.over.insert(HEADER.to_vec(), Some(vec![top]));
    }
    for (k, v) in &s.index.over {
        let full = s.index.full(k);
        match v {
            Some(v) => batch.put(full, v),
            None => batch.delete(full),
        };
    }
    Ok(())
}

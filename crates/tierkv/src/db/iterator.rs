//! The user-facing iterator: a merge of the memtables and every level of one SuperVersion,
//! filtered to one snapshot, holding that SuperVersion so no file it reads is deleted.

use super::{DbInner, SuperVersion};
use crate::env::IoCause;
use crate::iter::{InternalIterator, MergingIterator, UserIterator};
use crate::options::ReadOptions;
use crate::version::LevelIterator;
use crate::Result;
use std::sync::Arc;

/// A cursor over the store's keys in order, forward or backward, at one snapshot.
/// Starts unpositioned: call `seek_to_first`, `seek_to_last`, `seek` or `seek_for_prev`.
pub struct DbIterator {
    inner: UserIterator<MergingIterator>,
    _sv: Arc<SuperVersion>,
}

pub(crate) fn new_iterator(db: &DbInner, ropts: &ReadOptions) -> Result<DbIterator> {
    let (seq, sv) = db.read_view(ropts.snapshot)?;
    let sv = arc_swap::Guard::into_inner(sv);
    let lo = ropts.lower_bound.as_deref();
    let hi = ropts.upper_bound.as_deref();
    let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
    children.push(Box::new(sv.mem.iter()));
    for m in &sv.imms {
        children.push(Box::new(m.iter()));
    }
    // A scan of `scan_length_hint` entries reads from each table about its share of the
    // store's entries (keys spread alike over the levels).
    let total_entries: u64 = sv
        .version
        .all_files()
        .map(|(_, f)| f.info.num_entries)
        .sum();
    let expected = |entries: u64| {
        ropts
            .scan_length_hint
            .filter(|_| total_entries > 0)
            .map(|n| n as f64 * entries as f64 / total_entries as f64)
    };
    for (level, files) in sv.version.levels.iter().enumerate() {
        let level_entries = files.iter().map(|f| f.info.num_entries).sum();
        // Files entirely outside the bounds cannot contribute.
        let files: Vec<_> = files
            .iter()
            .filter(|f| {
                f.overlaps(lo, None) && hi.is_none_or(|hi| crate::key::user_key(f.smallest()) < hi)
            })
            .cloned()
            .collect();
        if files.is_empty() {
            continue;
        }
        if level == 0 {
            for f in files {
                let t = db.tables.get(&f, IoCause::UserScan)?;
                let it = t.iter(IoCause::UserScan, ropts.fill_cache);
                children.push(Box::new(it.expect_scan(expected(f.info.num_entries))));
            }
        } else {
            let it = LevelIterator::new(
                files,
                db.tables.clone(),
                IoCause::UserScan,
                ropts.fill_cache,
            );
            children.push(Box::new(it.expect_scan(expected(level_entries))));
        }
    }
    let merged = MergingIterator::new(children);
    Ok(DbIterator {
        inner: UserIterator::new(
            merged,
            seq,
            ropts.lower_bound.clone(),
            ropts.upper_bound.clone(),
        )
        .with_clock(db.opts.clock.clone()),
        _sv: sv,
    })
}

impl DbIterator {
    /// True when positioned at a key.
    pub fn valid(&self) -> bool {
        self.inner.valid()
    }

    /// Positions at the first key (at or after the lower bound).
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.inner.seek_to_first()
    }

    /// Positions at the last key (before the upper bound).
    pub fn seek_to_last(&mut self) -> Result<()> {
        self.inner.seek_to_last()
    }

    /// Positions at the first key `>= key`.
    pub fn seek(&mut self, key: impl AsRef<[u8]>) -> Result<()> {
        self.inner.seek(key.as_ref())
    }

    /// Positions at the last key `<= key`.
    pub fn seek_for_prev(&mut self, key: impl AsRef<[u8]>) -> Result<()> {
        self.inner.seek_for_prev(key.as_ref())
    }

    /// Moves to the next key.
    // A fallible cursor step, not a std Iterator (the key and value borrow the cursor).
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<()> {
        self.inner.next()
    }

    /// Moves to the previous key.
    pub fn prev(&mut self) -> Result<()> {
        self.inner.prev()
    }

    /// The current key. Requires `valid()`.
    pub fn key(&self) -> &[u8] {
        self.inner.key()
    }

    /// The current value. Requires `valid()`.
    pub fn value(&self) -> &[u8] {
        self.inner.value()
    }

    /// The current entry's deadline (milliseconds since the UNIX epoch), if it expires.
    /// Requires `valid()`. Records whose deadline has passed (at the time of the last
    /// seek) are never shown.
    pub fn deadline(&self) -> Option<u64> {
        self.inner.deadline()
    }
}

//! The user-facing iterator: a merge of the memtables and every level of one SuperVersion,
//! filtered to one snapshot, holding that SuperVersion so no file it reads is deleted.

use super::{DbInner, SuperVersion};
use crate::env::IoCause;
use crate::error::Result;
use crate::iter::{InternalIterator, MergingIterator, UserIterator};
use crate::options::ReadOptions;
use crate::version::LevelIterator;
use std::sync::Arc;

/// A cursor over the store's keys in order, forward or backward, at one snapshot.
/// Starts unpositioned: call `seek_to_first`, `seek_to_last`, `seek` or `seek_for_prev`.
pub struct DbIterator {
    inner: UserIterator<MergingIterator>,
    _sv: Arc<SuperVersion>,
}

pub(crate) fn new_iterator(db: &DbInner, ropts: &ReadOptions) -> Result<DbIterator> {
    let (seq, sv) = db.reads.read_view(ropts.snapshot)?;
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

#[cfg(test)]
mod tests {
    use crate::options::{ReadIo, ReadOptions};
    use std::collections::BTreeMap;

    fn key(i: u64) -> Vec<u8> {
        format!("key{i:06}").into_bytes()
    }

    /// A scan's seek reads what every table it must look at starts with in one round:
    /// one io_uring submission holding one read per table (here the bottom level and two
    /// L0 tables, each with a version of the keys sought, no block cache) instead of one
    /// read per table in turn; with a scan length hint each table's read is its whole
    /// window, so the scan reads nothing more (the hint is twice the scan: every key sought
    /// has a version in the bottom level, which the hint's share by entry counts does not
    /// know). Both scans answer as the model does.
    #[test]
    fn a_seek_reads_each_tables_first_block_in_one_round() {
        if !crate::testing::require_io_uring(
            "db::iterator::tests::a_seek_reads_each_tables_first_block_in_one_round",
        ) {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let opts = crate::options::Options {
            cache_size: 0,
            block_size: 1024,
            block_records: None,
            read_io: ReadIo::Uring,
            level0_compaction_trigger: 8,
            ..crate::options::Options::default()
        };
        let db = crate::db::Db::open(dir.path(), opts).unwrap();
        let mut model = BTreeMap::new();
        let mut put = |i: u64, version: u8| {
            let value = vec![version; 200];
            db.put(key(i), &value).unwrap();
            model.insert(key(i), value);
        };
        for i in 0..2000 {
            put(i, b'a');
        }
        db.compact_range(None, None).unwrap();
        for (step, version) in [(3, b'b'), (5, b'c')] {
            for i in (0..2000).step_by(step) {
                put(i, version);
            }
            db.flush().unwrap();
        }
        db.wait_for_background().unwrap();
        let expected: Vec<_> = model.range(key(1000)..).take(300).collect();
        for hint in [None, Some(600)] {
            let ropts = ReadOptions {
                scan_length_hint: hint,
                ..ReadOptions::default()
            };
            let mut it = db.iter_opt(&ropts).unwrap();
            let before = crate::env::thread_submissions();
            it.seek(key(1000)).unwrap();
            let after = crate::env::thread_submissions();
            assert_eq!(
                after.submissions - before.submissions,
                1,
                "{hint:?}: the seek's reads in one submission"
            );
            let reads = after.reads - before.reads;
            let plain_reads = crate::env::thread_read_count();
            for &(k, v) in &expected {
                assert!(it.valid());
                assert_eq!((it.key(), it.value()), (k.as_slice(), v.as_slice()));
                it.next().unwrap();
            }
            let later = crate::env::thread_read_count() - plain_reads;
            match hint {
                None => assert_eq!(reads, 3, "one block per table"),
                Some(_) => {
                    assert!(reads >= 3, "{reads} reads: a window per table");
                    assert_eq!(later, 0, "the windows held the scan");
                }
            }
        }
    }
}

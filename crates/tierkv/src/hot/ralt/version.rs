//! An immutable version of RALT's file set (levels of run files) with the read paths that
//! need no I/O (hot-key filters, range hot size from index prefix sums), and the merging
//! iterator that reads several levels in key order. Versions are swapped atomically, so a
//! reader holding one never blocks and never sees a file disappear.

use super::run::{Rec, RunCursor, RunFile};
use crate::error::Result;
use std::collections::VecDeque;
use std::sync::Arc;

/// Level 0 holds flushed buffers (newest first, ranges may overlap); each deeper level
/// is one sorted run of files with disjoint ranges, in key order.
#[derive(Clone, Default)]
pub(crate) struct Version {
    pub levels: Vec<Vec<Arc<RunFile>>>,
}

impl Version {
    pub fn files(&self) -> impl Iterator<Item = (usize, &Arc<RunFile>)> {
        self.levels
            .iter()
            .enumerate()
            .flat_map(|(l, fs)| fs.iter().map(move |f| (l, f)))
    }

    pub fn level(&self, level: usize) -> &[Arc<RunFile>] {
        self.levels.get(level).map_or(&[], |v| v.as_slice())
    }

    pub fn level_bytes(&self, level: usize) -> u64 {
        self.level(level).iter().map(|f| f.size).sum()
    }

    /// Deepest level holding a file (0 when empty).
    pub fn deepest(&self) -> usize {
        (0..self.levels.len())
            .rev()
            .find(|&l| !self.level(l).is_empty())
            .unwrap_or(0)
    }

    /// Hot set size: fresh hot bytes summed over files, each hot key counted about once.
    pub fn hot_set_bytes(&self) -> u64 {
        self.files().map(|(_, f)| f.info.fresh_hot_bytes).sum()
    }

    /// Physical size: the sum of record lengths of every file.
    pub fn record_bytes(&self) -> u64 {
        self.files().map(|(_, f)| f.info.record_bytes).sum()
    }

    /// Memory of every file's bloom filter and block index.
    pub fn memory_bytes(&self) -> u64 {
        self.files()
            .map(|(_, f)| {
                let (filter, index) = f.memory();
                filter + index
            })
            .sum()
    }

    /// Bytes of in-memory runs whose file has not been written (what a checkpoint writes).
    pub fn unpersisted_bytes(&self) -> u64 {
        self.files()
            .filter(|(_, f)| f.unpersisted())
            .map(|(_, f)| f.size)
            .sum()
    }

    pub fn file_bytes(&self) -> u64 {
        self.files().map(|(_, f)| f.size).sum()
    }

    /// Files of `level` that may hold `key`.
    fn candidates<'a>(
        &'a self,
        level: usize,
        key: &'a [u8],
    ) -> impl Iterator<Item = &'a Arc<RunFile>> {
        let files = self.level(level);
        let range = if level == 0 {
            0..files.len()
        } else {
            let i = files.partition_point(|f| &*f.largest < key);
            i..(i + 1).min(files.len())
        };
        files[range]
            .iter()
            .filter(move |f| &*f.smallest <= key && key <= &*f.largest)
    }

    /// True if some file's hot-key filter may hold the key (no I/O).
    pub fn may_be_hot(&self, key: &[u8], hash: u64) -> bool {
        self.may_be_hot_where(key, hash, |_| true)
    }

    /// [`Version::may_be_hot`] restricted to the levels `pick` accepts.
    pub fn may_be_hot_where(&self, key: &[u8], hash: u64, pick: impl Fn(usize) -> bool) -> bool {
        (0..self.levels.len())
            .filter(|&l| pick(l))
            .any(|l| self.candidates(l, key).any(|f| f.may_be_hot(hash)))
    }

    /// Sum over files of their prefix-sum estimate for [lo, hi].
    pub fn range_hot_size(&self, lo: &[u8], hi: &[u8]) -> u64 {
        self.levels
            .iter()
            .flat_map(|fs| fs.iter())
            .map(|f| f.range_hot_size(lo, hi))
            .sum()
    }
}

/// One input of a merge: records in key order from memory or from a level's files.
pub(crate) enum Source {
    Mem(std::vec::IntoIter<Rec>),
    Files {
        files: VecDeque<Arc<RunFile>>,
        cur: Option<RunCursor>,
        start: Option<Vec<u8>>,
        only_hot: bool,
    },
}

impl Source {
    /// Files read one after the other (one file of L0, or a level's files in key order).
    pub fn files(files: Vec<Arc<RunFile>>, start: Option<&[u8]>, only_hot: bool) -> Source {
        Source::Files {
            files: files.into(),
            cur: None,
            start: start.map(|s| s.to_vec()),
            only_hot,
        }
    }

    /// The next record, decoded into `spare`'s record where the source decodes.
    fn next(&mut self, spare: &mut Option<Rec>) -> Result<Option<Rec>> {
        match self {
            Source::Mem(it) => Ok(it.next()),
            Source::Files {
                files,
                cur,
                start,
                only_hot,
            } => loop {
                if let Some(c) = cur {
                    if let Some(r) = c.next_reusing(spare)? {
                        return Ok(Some(r));
                    }
                }
                match files.pop_front() {
                    Some(f) => *cur = Some(RunCursor::new(f, start.as_deref(), *only_hot)),
                    None => {
                        *cur = None;
                        return Ok(None);
                    }
                }
            },
        }
    }
}

fn key_of(head: &Option<Rec>) -> &[u8] {
    head.as_ref().map_or(&[], |r| r.key.as_slice())
}

/// Merges sources given newest first; yields, per key, that key's records newest first
/// with the index of their source. The groups after a group decode into its records, so
/// a merge allocates only while its keys grow longer than any before.
pub(crate) struct MergeIter {
    sources: Vec<Source>,
    heads: Vec<Option<Rec>>,
    /// The group last returned.
    group: Vec<(usize, Rec)>,
    /// Records to decode into.
    spare: Vec<Rec>,
    started: bool,
}

impl MergeIter {
    pub fn new(sources: Vec<Source>) -> MergeIter {
        let n = sources.len();
        MergeIter {
            sources,
            heads: (0..n).map(|_| None).collect(),
            group: Vec::new(),
            spare: Vec::new(),
            started: false,
        }
    }

    pub fn next_group(&mut self) -> Result<Option<&[(usize, Rec)]>> {
        self.spare.extend(self.group.drain(..).map(|(_, r)| r));
        if !self.started {
            self.started = true;
            for i in 0..self.sources.len() {
                self.heads[i] = self.sources[i].next(&mut None)?;
            }
        }
        // The first source holding the smallest key: no source before it holds that key.
        let heads = &self.heads;
        let Some(first) = (0..heads.len())
            .filter(|&i| heads[i].is_some())
            .min_by(|&a, &b| key_of(&heads[a]).cmp(key_of(&heads[b])))
        else {
            return Ok(None);
        };
        let Some(rec) = self.heads[first].take() else {
            return Ok(None);
        };
        self.group.push((first, rec));
        for i in first + 1..self.heads.len() {
            if let Some(r) = self.heads[i].take_if(|r| r.key == self.group[0].1.key) {
                self.group.push((i, r));
            }
        }
        for g in 0..self.group.len() {
            let i = self.group[g].0;
            let mut spare = self.spare.pop();
            self.heads[i] = self.sources[i].next(&mut spare)?;
            self.spare.extend(spare);
        }
        Ok(Some(&self.group))
    }
}

//! Planning a merge into semi-sorted tables (HyperDB's block-level merge, pass 1): walk
//! the input level's user keys (a semi-sorted input's on-disk key list, a sorted input's
//! entries) and mark, in each overlapping output-level table, the valid blocks whose range
//! holds one of them (dirty). A table that would then be more than half dirty
//! (`T_CLEAN`, by stored bytes, estimated before the merge), that has grown past twice the
//! target file size, or that is still sorted, is rewritten whole instead. The merge then
//! reads the inputs plus only the blocks to rewrite ([`SemiPlan::iterators`]).
//!
//! Each output-level table owns a *territory*: from its smallest user key up to the next
//! table's (the first one's reaches down to the bottom), so a record that lands in a gap
//! between tables joins a neighbour and the level's tables stay disjoint.

use super::context::JobContext;
use super::Compaction;
use crate::env::{IoCause, Tier};
use crate::iter::InternalIterator;
use crate::key::{compare_internal, user_key};
use crate::sst::block::BlockIter;
use crate::sst::format::BlockHandle;
use crate::sst::semi::PriorGeneration;
use crate::sst::Table;
use crate::version::FileMeta;
use crate::{Error, Result};
use std::sync::Arc;

/// A table is rewritten whole once more than this share of its bytes would be dirty.
pub(super) const T_CLEAN: f64 = 0.5;

/// What the merge does with one output-level table.
pub(super) enum TargetMode {
    /// Append a generation: the valid blocks at `dirty` (indexes into `prior.blocks`) are
    /// rewritten, the others kept.
    Append {
        prior: PriorGeneration,
        dirty: Vec<usize>,
    },
    /// Read every block and write its territory into fresh tables.
    Rewrite,
}

/// One output-level table the merge overlaps.
pub(super) struct Target {
    pub(super) meta: Arc<FileMeta>,
    pub(super) table: Arc<Table>,
    pub(super) mode: TargetMode,
}

/// The targets, in key order, and the bytes pass 1 and the merge read.
pub(super) struct SemiPlan {
    pub(super) targets: Vec<Target>,
    pub(super) read_bytes: u64,
}

/// The index of the target whose territory holds user key `k` (0 with no target).
pub(super) fn territory<T>(items: &[T], meta: impl Fn(&T) -> &FileMeta, k: &[u8]) -> usize {
    items
        .partition_point(|t| user_key(meta(t).smallest()) <= k)
        .saturating_sub(1)
}

/// Pass 1: opens the targets and marks their dirty blocks.
pub(super) fn plan(c: &Compaction, ctx: &JobContext<'_>) -> Result<SemiPlan> {
    let mut outputs = c.output_inputs.clone();
    outputs.sort_by(|a, b| compare_internal(a.smallest(), b.smallest()));
    let mut targets = Vec::with_capacity(outputs.len());
    let mut marks: Vec<Vec<bool>> = Vec::with_capacity(outputs.len());
    for meta in outputs {
        let table = ctx.tables.get(&meta, IoCause::Compaction)?;
        let prior = match meta.tier {
            Tier::Slow => table.semi_generation(IoCause::Compaction)?,
            Tier::Fast => None,
        };
        marks.push(vec![false; prior.as_ref().map_or(0, |p| p.blocks.len())]);
        let mode = match prior {
            Some(prior) => TargetMode::Append {
                prior,
                dirty: Vec::new(),
            },
            None => TargetMode::Rewrite,
        };
        targets.push(Target { meta, table, mode });
    }
    let mut read_bytes = c.inputs.iter().map(|f| f.size()).sum::<u64>();
    // Valid blocks lead each index: how many, per target.
    let valid_counts: Vec<usize> = targets
        .iter()
        .map(|t| match &t.mode {
            TargetMode::Append { prior, .. } => prior.blocks.iter().take_while(|b| b.valid).count(),
            TargetMode::Rewrite => 0,
        })
        .collect();
    let mut mark = |k: &[u8]| {
        let at = territory(&targets, |t| &t.meta, k);
        let Some(t) = targets.get(at) else {
            return;
        };
        if let TargetMode::Append { prior, .. } = &t.mode {
            let valid = valid_counts[at];
            let i = prior.blocks[..valid].partition_point(|b| b.last_user_key() < k);
            if i < valid && prior.blocks[i].covers(k) {
                marks[at][i] = true;
            }
        }
    };
    for f in &c.inputs {
        let table = ctx.tables.get(f, IoCause::Compaction)?;
        if let Some(g) = table.semi_generation(IoCause::Compaction)? {
            g.keys.iter().for_each(|k| mark(k));
            continue;
        }
        let mut it = table.iter(IoCause::Compaction, false);
        it.seek_to_first()?;
        let mut prev: Vec<u8> = Vec::new();
        let mut first = true;
        while it.valid() {
            let u = user_key(it.key());
            if first || u != prev.as_slice() {
                mark(u);
                prev.clear();
                prev.extend_from_slice(u);
                first = false;
            }
            it.next()?;
        }
        // Pass 1 reads a sorted input once more.
        read_bytes += f.size();
    }
    for (t, m) in targets.iter_mut().zip(marks) {
        let rewrite = match &mut t.mode {
            TargetMode::Append { prior, dirty } => {
                *dirty = (0..m.len()).filter(|&i| m[i]).collect();
                let newly: u64 = dirty.iter().map(|&i| prior.blocks[i].stored_len()).sum();
                let total = (prior.valid_bytes() + prior.dirty_bytes()).max(1);
                let share = (prior.dirty_bytes() + newly) as f64 / total as f64;
                read_bytes += newly;
                share > T_CLEAN || t.meta.size() > 2 * ctx.target_file_size
            }
            TargetMode::Rewrite => true,
        };
        if rewrite {
            t.mode = TargetMode::Rewrite;
            read_bytes += t.meta.size();
        }
    }
    Ok(SemiPlan {
        targets,
        read_bytes,
    })
}

impl SemiPlan {
    /// Cursors over what the merge rewrites of the output level, one per target: the dirty
    /// blocks of an appended table, or the whole of a table rewritten (its ordinary
    /// iterator, which reads ahead). Their key ranges are disjoint.
    pub(super) fn iterators(&self) -> Vec<Box<dyn InternalIterator>> {
        let mut out: Vec<Box<dyn InternalIterator>> = Vec::new();
        for t in &self.targets {
            match &t.mode {
                TargetMode::Append { prior, dirty } => {
                    if !dirty.is_empty() {
                        out.push(Box::new(BlockListIter {
                            blocks: dirty
                                .iter()
                                .map(|&i| (t.table.clone(), prior.blocks[i].handle))
                                .collect(),
                            next: 0,
                            current: None,
                            prev: Vec::new(),
                        }));
                    }
                }
                TargetMode::Rewrite => {
                    out.push(Box::new(t.table.iter(IoCause::Compaction, false)));
                }
            }
        }
        out
    }
}

/// A forward-only cursor over chosen data blocks of tables, in the order given (key
/// order, ranges disjoint), for a compaction's merge. Keys must ascend across it: a table
/// whose blocks say otherwise reads as corrupt. (Dirty blocks lie anywhere in their file:
/// each is one read, without readahead.)
pub(super) struct BlockListIter {
    blocks: Vec<(Arc<Table>, BlockHandle)>,
    next: usize,
    current: Option<(usize, BlockIter)>,
    prev: Vec<u8>,
}

impl BlockListIter {
    fn corrupt(&self, reason: &str) -> Error {
        match self.current.as_ref().map(|(i, _)| &self.blocks[*i]) {
            Some((t, h)) => Error::corruption(t.path(), h.offset, reason),
            None => Error::corruption("<compaction block list>", 0, reason),
        }
    }

    /// Moves to the first entry of the next non-empty block.
    fn load(&mut self) -> Result<()> {
        self.current = None;
        while let Some((t, h)) = self.blocks.get(self.next) {
            let block = t.read_block(*h, IoCause::Compaction)?;
            let mut it = block.iter();
            let at = self.next;
            self.next += 1;
            if let Err(e) = it.seek_to_first() {
                return Err(Error::corruption(t.path(), h.offset, e));
            }
            if it.valid() {
                self.current = Some((at, it));
                return Ok(());
            }
        }
        Ok(())
    }

    fn check_order(&mut self) -> Result<()> {
        let Some((_, it)) = self.current.as_ref() else {
            return Ok(());
        };
        if !self.prev.is_empty() && compare_internal(&self.prev, it.key()).is_ge() {
            return Err(self.corrupt("keys out of order across rewritten blocks"));
        }
        self.prev.clear();
        self.prev.extend_from_slice(it.key());
        Ok(())
    }

    fn forward_only(&self) -> Error {
        Error::InvalidArgument("a compaction's block list reads forward only".into())
    }
}

impl InternalIterator for BlockListIter {
    fn valid(&self) -> bool {
        self.current.as_ref().is_some_and(|(_, it)| it.valid())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.next = 0;
        self.prev.clear();
        self.load()?;
        self.check_order()
    }

    fn seek_to_last(&mut self) -> Result<()> {
        Err(self.forward_only())
    }

    fn seek(&mut self, _target: &[u8]) -> Result<()> {
        Err(self.forward_only())
    }

    fn next(&mut self) -> Result<()> {
        let step = match self.current.as_mut() {
            Some((_, it)) => it.next(),
            None => return Ok(()),
        };
        if let Err(e) = step {
            return Err(self.corrupt(e));
        }
        if !self.valid() {
            self.load()?;
        }
        self.check_order()
    }

    fn prev(&mut self) -> Result<()> {
        Err(self.forward_only())
    }

    fn key(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |(_, it)| it.key())
    }

    fn value(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |(_, it)| it.value())
    }
}

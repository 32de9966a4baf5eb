//! Leveled compaction: what to compact ([`picker`]) and how ([`job`]), and the rule that
//! drops versions no snapshot can see (`stream`, shared with the flush). The picker reads a
//! version and claims files; the job merges them into new files and returns the version
//! edit. Neither installs anything: the database applies the edit under its lock.

mod context;
pub mod job;
mod merger;
mod output;
pub mod picker;
mod pushdown;
mod reuse;
mod routing;
mod semi_plan;
mod semi_sink;
mod slow_levels;
mod span_reads;
pub(crate) mod stream;
mod victim;

use crate::env::Tier;
use crate::version::FileMeta;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// A chosen compaction: input files of two adjacent levels, claimed until released.
#[derive(Debug)]
pub struct Compaction {
    /// The level compacted from.
    pub level: usize,
    /// The level written to.
    pub output_level: usize,
    /// Files of `level`.
    pub inputs: Vec<Arc<FileMeta>>,
    /// Files of `output_level` overlapping the inputs.
    pub output_inputs: Vec<Arc<FileMeta>>,
    /// Tier the outputs are written to.
    pub output_tier: Tier,
    /// Why it was picked (for logs and stats).
    pub reason: &'static str,
    /// Preemptive pushdown (`CompactionOptions::preemptive_pushdown`): the deepest level
    /// (below `output_level`) a user key of the output may be written to instead, when it
    /// has no version in the levels in between and lies in a gap between that level's
    /// files (`pushdown`). `None`: everything goes to `output_level`.
    pub pushdown: Option<usize>,
}

impl Compaction {
    /// Every input file.
    pub fn all_inputs(&self) -> impl Iterator<Item = &Arc<FileMeta>> {
        self.inputs.iter().chain(self.output_inputs.iter())
    }

    /// Total bytes of the inputs.
    pub fn input_bytes(&self) -> u64 {
        self.all_inputs().map(|f| f.size()).sum()
    }

    /// True when the single input can be re-linked to the output level without rewriting:
    /// nothing overlaps it there and it stays on the same tier.
    pub fn is_trivial_move(&self) -> bool {
        // A compaction of a level into itself (the expiry sweep's rewrite) must rewrite.
        self.level != self.output_level
            && self.inputs.len() == 1
            && self.output_inputs.is_empty()
            && self.inputs[0].tier == self.output_tier
    }

    /// Marks the inputs as claimed.
    pub(crate) fn claim(&self) {
        for f in self.all_inputs() {
            f.being_compacted.store(true, Relaxed);
        }
    }

    /// Releases the inputs (after success the files are obsolete anyway).
    pub(crate) fn release(&self) {
        for f in self.all_inputs() {
            f.being_compacted.store(false, Relaxed);
        }
    }

    /// What this compaction may write while it runs (see [`RangeClaim`]).
    pub fn range_claim(&self, layout: &crate::tiers::LevelLayout) -> Option<RangeClaim> {
        let files: Vec<Arc<FileMeta>> = self.all_inputs().cloned().collect();
        let (lo, hi) = picker::key_range(&files)?;
        let [a, b] = if self.output_level == self.level {
            [self.level, self.level]
        } else {
            picker::written_levels(layout, self.level)
        };
        // A pushdown writes deeper levels and relies on the levels it skips holding no
        // version of its keys: it claims every level from its output down.
        let deepest = a.max(b).max(self.pushdown.unwrap_or(0));
        Some(RangeClaim {
            levels: [a.min(b), deepest],
            lo,
            hi,
        })
    }
}

/// The user-key range a running compaction may write, and the levels it may write it on.
///
/// Claiming input files is not enough to keep two compactions' outputs apart: a batch of
/// adjacent files at the fast-to-slow boundary spans the gaps between them, and while it
/// runs another compaction (a trivial move, say) can put a file into such a gap and move
/// it on into the same range of the level below; the two outputs would then overlap. So a
/// compaction may start only if its range overlaps no running compaction's range on a
/// level both write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeClaim {
    /// The levels written, as an inclusive range `[first, last]`: the output level, the
    /// input level as well when the compaction can keep records there (the last fast
    /// level: retention and promotion by compaction), and with preemptive pushdown every
    /// level down to the deepest it may write.
    pub levels: [usize; 2],
    /// Smallest user key of the inputs.
    pub lo: Vec<u8>,
    /// Largest user key of the inputs (every output lies within `lo..=hi`).
    pub hi: Vec<u8>,
}

impl RangeClaim {
    /// True if a compaction writing the levels `levels` (an inclusive range, either
    /// order) over `lo..=hi` could overlap this one's outputs.
    pub fn conflicts(&self, levels: [usize; 2], lo: &[u8], hi: &[u8]) -> bool {
        let (a, b) = (levels[0].min(levels[1]), levels[0].max(levels[1]));
        let (c, d) = (
            self.levels[0].min(self.levels[1]),
            self.levels[0].max(self.levels[1]),
        );
        a.max(c) <= b.min(d) && lo <= self.hi.as_slice() && self.lo.as_slice() <= hi
    }
}

#[cfg(test)]
mod tests;

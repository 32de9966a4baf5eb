//! Preemptive pushdown (HyperDB §3.4, "preemptive block compaction", within tierkv's
//! version rules): a compaction into the slow tier writes a user key of its output
//! directly into a deeper level when that keeps every invariant, instead of into the
//! output level, where the next compaction would read and rewrite it again.
//!
//! A key `u` merged out of level `i` into level `o = i + 1` may go to level `d > o` (at
//! most the compaction's `pushdown` limit, which the picker sets so that no running
//! compaction claims those levels over this key range) when
//! - no level `o..d` holds a version of `u` (invariant 1: a newer version is never below
//!   an older one): the level has no file whose key range holds `u`, or that file's
//!   in-memory bloom filter rules `u` out (no data read; the index's block ranges are no
//!   finer here, since its separators tile the file's range);
//! - `u` falls in a gap between the files of level `d` (files of a level >= 1 never
//!   overlap), and the output file it joins there spans only that gap.
//!
//! Of the levels allowed, the deepest wins. Every version of `u` goes to the same level
//! (they all come from the inputs above `o`: a key with a version in `o` stays there).
//! The outputs of all levels go into the compaction's one version edit, so they become
//! visible (and durable) atomically (invariant 2). A tombstone pushed down is dropped or
//! kept by the same rule as at the output level (nothing deeper than `o` holds the key).

use super::context::JobContext;
use super::output::Sink;
use super::semi_sink::SemiOutputs;
use super::Compaction;
use crate::env::{IoCause, Tier};
use crate::error::Result;
use crate::key::user_key;
use crate::sst::{Table, TableOptions};
use crate::version::{FileMeta, NewFile};
use std::sync::Arc;

/// Where a user key stands on one level.
#[derive(Debug, PartialEq, Eq)]
enum Presence {
    /// No file's range holds it: it lies before file `n` of the level's view.
    Gap(usize),
    /// A file's range holds it, but the file's filter rules it out.
    Absent,
    /// A file may hold a version of it.
    Present,
}

/// One level below the compaction's input: its files overlapping the compaction's range.
struct LevelView {
    files: Vec<Arc<FileMeta>>,
    /// The open tables, for their filters (`None` where the filter is not needed: the
    /// deepest level, where only gaps matter).
    tables: Vec<Option<Arc<Table>>>,
}

impl LevelView {
    fn presence(&self, u: &[u8]) -> Presence {
        let i = self.files.partition_point(|f| user_key(f.smallest()) <= u);
        match i.checked_sub(1) {
            Some(j) if u <= user_key(self.files[j].largest()) => {
                let excluded = self.tables[j]
                    .as_ref()
                    .is_some_and(|t| t.filter_excludes(u));
                if excluded {
                    Presence::Absent
                } else {
                    Presence::Present
                }
            }
            _ => Presence::Gap(i),
        }
    }
}

/// The output of one level below the output level.
struct DeepSink {
    sink: Sink,
    /// The gap of the level the current file lies in.
    gap: Option<usize>,
}

/// The pushdown state of one compaction: the levels it may write and their outputs.
pub(super) struct Pushdown {
    /// Levels `output_level..=deepest`.
    levels: Vec<LevelView>,
    /// Outputs of levels `output_level + 1..=deepest`.
    deep: Vec<DeepSink>,
    /// The user key being routed and its level's index in `levels` (0: the output level).
    current: Option<(Vec<u8>, usize)>,
}

impl Pushdown {
    /// The pushdown of `c` down to level `deepest`; `tier` places a level's outputs and
    /// `options` gives its table format. `semi`: the slow tier is semi-sorted, so fresh
    /// tables there are too.
    pub(super) fn new(
        c: &Compaction,
        ctx: &JobContext<'_>,
        deepest: usize,
        semi: bool,
        tier: impl Fn(usize) -> Tier,
        options: impl Fn(usize) -> TableOptions,
    ) -> Result<Self> {
        let (lo, hi) = key_range(c).unwrap_or_default();
        let mut levels = Vec::new();
        let mut deep = Vec::new();
        for level in c.output_level..=deepest {
            let files = ctx.version.overlapping(level, Some(&lo), Some(&hi));
            let tables = files
                .iter()
                .map(|f| {
                    (level < deepest)
                        .then(|| ctx.tables.get(f, IoCause::Compaction))
                        .transpose()
                })
                .collect::<Result<Vec<_>>>()?;
            levels.push(LevelView { files, tables });
            if level > c.output_level {
                let t = tier(level);
                let mut sink = Sink::new(level, t, options(level));
                if semi && t == Tier::Slow {
                    // Fresh tables only: no target of this level is continued, so no dirty marks.
                    sink.semi = Some(SemiOutputs::new(
                        Vec::new(),
                        Default::default(),
                        ctx.target_file_size,
                    ));
                }
                deep.push(DeepSink { sink, gap: None });
            }
        }
        Ok(Pushdown {
            levels,
            deep,
            current: None,
        })
    }

    /// The deepest allowed level for user key `u` (index into `levels`) and its gap there.
    fn target(&self, u: &[u8]) -> (usize, usize) {
        let mut best = (0, 0);
        for (i, view) in self.levels.iter().enumerate() {
            match view.presence(u) {
                Presence::Present => break,
                Presence::Gap(g) if i > 0 => best = (i, g),
                Presence::Gap(_) | Presence::Absent => {}
            }
        }
        best
    }

    /// Writes the entry to a deeper level if its user key goes there (true), or leaves it
    /// to the output level (false). Entries come in merge order.
    pub(super) fn route(
        &mut self,
        ctx: &JobContext<'_>,
        ikey: &[u8],
        value: &[u8],
    ) -> Result<bool> {
        let u = user_key(ikey);
        let at = match &self.current {
            Some((k, at)) if k.as_slice() == u => *at,
            _ => {
                let (at, gap) = self.target(u);
                self.current = Some((u.to_vec(), at));
                if at > 0 {
                    let d = &mut self.deep[at - 1];
                    // An output file spans one gap of its level only; between user keys.
                    if d.gap != Some(gap) {
                        d.sink.finish(ctx)?;
                        d.gap = Some(gap);
                    }
                    d.sink.maybe_cut(ctx, u)?;
                }
                at
            }
        };
        if at == 0 {
            return Ok(false);
        }
        self.deep[at - 1].sink.add(ctx, ikey, value)?;
        Ok(true)
    }

    /// Closes every deeper output.
    pub(super) fn finish(&mut self, ctx: &JobContext<'_>) -> Result<()> {
        for d in &mut self.deep {
            d.sink.finish(ctx)?;
        }
        Ok(())
    }

    /// Every file created so far (finished or not) and its tier.
    pub(super) fn created(&self) -> impl Iterator<Item = (Tier, u64)> + '_ {
        self.deep
            .iter()
            .flat_map(|d| d.sink.created.iter().map(move |&n| (d.sink.tier, n)))
    }

    /// The finished files and the data blocks written, taken out.
    pub(super) fn take_done(&mut self) -> (Vec<NewFile>, crate::sst::BlockWrites) {
        let mut files = Vec::new();
        let mut blocks = crate::sst::BlockWrites::default();
        for d in &mut self.deep {
            files.append(&mut d.sink.done);
            let b = &d.sink.blocks;
            blocks.copied_blocks += b.copied_blocks;
            blocks.copied_bytes += b.copied_bytes;
            blocks.built_blocks += b.built_blocks;
            blocks.built_bytes += b.built_bytes;
        }
        (files, blocks)
    }
}

/// The user-key range of every input of `c` (as `picker::key_range`, which imports this
/// module).
fn key_range(c: &Compaction) -> Option<(Vec<u8>, Vec<u8>)> {
    let lo = c.all_inputs().map(|f| user_key(f.smallest())).min()?;
    let hi = c.all_inputs().map(|f| user_key(f.largest())).max()?;
    Some((lo.to_vec(), hi.to_vec()))
}

/// The deepest level a compaction's keys may be pushed to (see the module comment), or
/// `None`: no level below its output holds data, or running compactions claim the levels
/// right below over its range, or it is not a merge into the slow tier.
pub(super) fn limit(
    v: &crate::version::Version,
    c: &Compaction,
    running: &[super::RangeClaim],
) -> Option<usize> {
    if c.output_level == c.level || c.output_tier != Tier::Slow || c.is_trivial_move() {
        return None;
    }
    let deepest = (c.output_level + 1..v.num_levels())
        .rev()
        .find(|&l| !v.levels[l].is_empty())?;
    let (lo, hi) = key_range(c)?;
    let mut d = deepest;
    for r in running {
        // The first level below the output this claim writes over the range, if any.
        let first = r.levels[0].min(r.levels[1]).max(c.output_level + 1);
        if first <= d && r.conflicts([first, d], &lo, &hi) {
            d = first - 1;
        }
    }
    (d > c.output_level).then_some(d)
}

#[cfg(test)]
#[path = "pushdown_tests.rs"]
mod tests;

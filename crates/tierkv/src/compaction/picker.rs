//! Choosing the next compaction: the level whose size most exceeds its target (L0 by file
//! count), then within it the file with the least overlapping bytes in the next level per
//! byte of its own (RocksDB's "min overlapping ratio"), skipping files already claimed.

use super::Compaction;
use crate::key::user_key;
use crate::options::Options;
use crate::version::{FileMeta, Version};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// Per-level pressure: L0 by file count, deeper levels by bytes over target. >= 1 needs work.
pub fn level_scores(v: &Version, opts: &Options) -> Vec<f64> {
    (0..v.num_levels() - 1)
        .map(|level| {
            if level == 0 {
                v.levels[0].len() as f64 / opts.level0_compaction_trigger as f64
            } else {
                v.level_bytes(level) as f64 / v.layout.targets[level].max(1) as f64
            }
        })
        .collect()
}

/// The user-key range covered by `files`.
pub fn key_range(files: &[Arc<FileMeta>]) -> Option<(Vec<u8>, Vec<u8>)> {
    let lo = files.iter().map(|f| user_key(f.smallest())).min()?;
    let hi = files.iter().map(|f| user_key(f.largest())).max()?;
    Some((lo.to_vec(), hi.to_vec()))
}

fn claimed(files: &[Arc<FileMeta>]) -> bool {
    files.iter().any(|f| f.being_compacted.load(Relaxed))
}

/// What HotRAP changes in picking at the fast-to-slow boundary.
pub struct HotPicking<'a> {
    /// The last fast level (its compactions go to the slow tier).
    pub level: usize,
    /// Hot bytes in a user-key range (RALT's `range_hot_size`).
    pub hot_size: &'a dyn Fn(&[u8], &[u8]) -> u64,
    /// Do not pick `level` at all: its last compaction kept nearly everything (hot) on the
    /// fast tier, and it has not grown since.
    pub saturated: bool,
}

/// Picks and claims the most urgent compaction, if any level needs one.
pub fn pick(v: &Version, opts: &Options, hot: Option<&HotPicking<'_>>) -> Option<Compaction> {
    let scores = level_scores(v, opts);
    let mut order: Vec<usize> = (0..scores.len()).filter(|&l| scores[l] >= 1.0).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    for level in order {
        let hot_here = hot.filter(|h| h.level == level);
        if hot_here.is_some_and(|h| h.saturated) {
            continue;
        }
        let picked = if level == 0 {
            pick_level0(v)
        } else if let Some(h) = hot_here {
            pick_level_hot_aware(v, level, h)
        } else {
            pick_level(v, level)
        };
        if let Some(c) = picked {
            c.claim();
            return Some(c);
        }
    }
    None
}

/// L0 -> L1: every L0 file (they overlap each other) plus the L1 files they overlap.
fn pick_level0(v: &Version) -> Option<Compaction> {
    let inputs = v.levels[0].clone();
    if inputs.is_empty() || claimed(&inputs) {
        return None;
    }
    let (lo, hi) = key_range(&inputs)?;
    let output_inputs = v.overlapping(1, Some(&lo), Some(&hi));
    if claimed(&output_inputs) {
        return None;
    }
    Some(Compaction {
        level: 0,
        output_level: 1,
        inputs,
        output_inputs,
        output_tier: v.layout.tiers[1],
        reason: "L0 file count",
    })
}

/// Ln -> Ln+1: the unclaimed file with the smallest overlap-to-size ratio.
fn pick_level(v: &Version, level: usize) -> Option<Compaction> {
    let mut best: Option<(f64, Arc<FileMeta>, Vec<Arc<FileMeta>>)> = None;
    for f in &v.levels[level] {
        if f.being_compacted.load(Relaxed) {
            continue;
        }
        let lo = user_key(f.smallest());
        let hi = user_key(f.largest());
        let overlap = v.overlapping(level + 1, Some(lo), Some(hi));
        if claimed(&overlap) {
            continue;
        }
        let overlap_bytes: u64 = overlap.iter().map(|o| o.size()).sum();
        let ratio = overlap_bytes as f64 / f.size().max(1) as f64;
        if best.as_ref().is_none_or(|(r, _, _)| ratio < *r) {
            best = Some((ratio, f.clone(), overlap));
        }
    }
    let (_, file, output_inputs) = best?;
    Some(Compaction {
        level,
        output_level: level + 1,
        inputs: vec![file],
        output_inputs,
        output_tier: v.layout.tiers[level + 1],
        reason: "level size",
    })
}

/// Ln -> Ln+1 at the fast-to-slow boundary (HotRAP §3.5): the unclaimed file with the best
/// cost-benefit score `(size - hot size) / (size + overlapping bytes)`: the benefit is the
/// cold data that leaves the fast tier (hot records are retained), the cost is everything
/// the compaction rewrites. When every benefit is zero (RALT overestimates), the oldest
/// file.
fn pick_level_hot_aware(v: &Version, level: usize, hot: &HotPicking<'_>) -> Option<Compaction> {
    let mut best: Option<(f64, Arc<FileMeta>, Vec<Arc<FileMeta>>)> = None;
    let mut oldest: Option<(Arc<FileMeta>, Vec<Arc<FileMeta>>)> = None;
    for f in &v.levels[level] {
        if f.being_compacted.load(Relaxed) {
            continue;
        }
        let lo = user_key(f.smallest());
        let hi = user_key(f.largest());
        let overlap = v.overlapping(level + 1, Some(lo), Some(hi));
        if claimed(&overlap) {
            continue;
        }
        if oldest.as_ref().is_none_or(|(o, _)| f.number < o.number) {
            oldest = Some((f.clone(), overlap.clone()));
        }
        let cold = f.size().saturating_sub((hot.hot_size)(lo, hi));
        if cold == 0 {
            continue;
        }
        let overlap_bytes: u64 = overlap.iter().map(|o| o.size()).sum();
        let benefit = cold as f64 / (f.size() + overlap_bytes).max(1) as f64;
        if best.as_ref().is_none_or(|(b, _, _)| benefit > *b) {
            best = Some((benefit, f.clone(), overlap));
        }
    }
    let (file, output_inputs) = match best {
        Some((_, f, o)) => (f, o),
        None => oldest?,
    };
    Some(Compaction {
        level,
        output_level: level + 1,
        inputs: vec![file],
        output_inputs,
        output_tier: v.layout.tiers[level + 1],
        reason: "level size (hot-aware)",
    })
}

/// Claims a compaction of `level`'s files overlapping `[lo, hi]` into the next level
/// (manual compaction). `None` if nothing overlaps or a file is already claimed.
pub fn pick_range(
    v: &Version,
    level: usize,
    lo: Option<&[u8]>,
    hi: Option<&[u8]>,
) -> Option<Compaction> {
    let inputs = if level == 0 {
        v.levels[0].clone()
    } else {
        v.overlapping(level, lo, hi)
    };
    if inputs.is_empty() || claimed(&inputs) || level + 1 >= v.num_levels() {
        return None;
    }
    let (klo, khi) = key_range(&inputs)?;
    let output_inputs = v.overlapping(level + 1, Some(&klo), Some(&khi));
    if claimed(&output_inputs) {
        return None;
    }
    let c = Compaction {
        level,
        output_level: level + 1,
        inputs,
        output_inputs,
        output_tier: v.layout.tiers[level + 1],
        reason: "manual",
    };
    c.claim();
    Some(c)
}

//! HyperDB's victim choice on a slow level (§3.4, Algorithm 1;
//! `CompactionOptions::overlap_score_victim`): among up to [`CHOICES`] candidate files
//! drawn at random (power-of-k choices), the one with the highest *overlap score*: its
//! data blocks, then the blocks of the next level overlapping those, then the blocks of
//! the level after overlapping *those*, and so on down to the deepest level holding data,
//! counted level by level and summed. Block ranges come from the open tables' in-memory
//! indexes (no I/O; the picker runs under the database lock): a table that is not open
//! counts as one block spanning its file.

use crate::key::user_key;
use crate::version::{FileMeta, Version};
use std::sync::Arc;

/// Candidates drawn per choice (the paper's k = 8).
pub const CHOICES: usize = 8;

/// The block bounds of an open table (`crate::sst::Table::block_bounds`), or `None`.
pub type BlockBounds<'a> = &'a dyn Fn(&FileMeta) -> Option<Vec<Vec<u8>>>;

/// A file's blocks as closed user-key ranges, in key order. A block's range runs from the
/// previous block's bound (inclusive: conservative) to its own; the first starts at the
/// file's smallest key and the last ends at its largest at least.
fn block_ranges(f: &FileMeta, bounds: Option<BlockBounds<'_>>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let lo = user_key(f.smallest()).to_vec();
    let hi = user_key(f.largest()).to_vec();
    let Some(b) = bounds.and_then(|g| g(f)).filter(|b| !b.is_empty()) else {
        return vec![(lo, hi)];
    };
    let mut out = Vec::with_capacity(b.len());
    let mut prev = lo;
    let last = b.len() - 1;
    for (i, bound) in b.into_iter().enumerate() {
        let end = if i == last && bound < hi {
            hi.clone()
        } else {
            bound
        };
        out.push((std::mem::replace(&mut prev, end.clone()), end));
    }
    out
}

/// True if `r` overlaps any of `ranges` (sorted by start, ends non-decreasing).
fn overlaps_any(ranges: &[(Vec<u8>, Vec<u8>)], r: &(Vec<u8>, Vec<u8>)) -> bool {
    let i = ranges.partition_point(|x| x.1 < r.0);
    ranges.get(i).is_some_and(|x| x.0 <= r.1)
}

/// Algorithm 1's overlap score of `f`, a file of `level`.
pub fn overlap_score(
    v: &Version,
    level: usize,
    f: &FileMeta,
    bounds: Option<BlockBounds<'_>>,
) -> u64 {
    let deepest = (level + 1..v.num_levels())
        .rev()
        .find(|&l| !v.levels[l].is_empty())
        .unwrap_or(level);
    let mut ranges = block_ranges(f, bounds);
    let mut score = 0u64;
    for n in level + 1..=deepest {
        let (Some(lo), Some(hi)) = (ranges.first(), ranges.iter().map(|r| &r.1).max()) else {
            break;
        };
        let mut next = Vec::new();
        for g in v.overlapping(n, Some(&lo.0), Some(hi)) {
            next.extend(
                block_ranges(&g, bounds)
                    .into_iter()
                    .filter(|r| overlaps_any(&ranges, r)),
            );
        }
        score += next.len() as u64;
        ranges = next;
    }
    score
}

/// A SplitMix64 step: the picker's draws, seeded from the level's state so a choice is
/// reproducible for a given version.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The index (into `candidates`) of the highest-scoring of up to [`CHOICES`] candidates
/// drawn without replacement; ties go to the earlier draw.
pub fn choose(
    v: &Version,
    level: usize,
    candidates: &[Arc<FileMeta>],
    bounds: Option<BlockBounds<'_>>,
) -> Option<usize> {
    let mut seed = candidates.iter().fold(level as u64, |s, f| {
        s.wrapping_mul(31).wrapping_add(f.number)
    });
    let mut pool: Vec<usize> = (0..candidates.len()).collect();
    let mut best: Option<(u64, usize)> = None;
    for _ in 0..CHOICES.min(candidates.len()) {
        let j = (splitmix(&mut seed) % pool.len() as u64) as usize;
        let i = pool.swap_remove(j);
        let score = overlap_score(v, level, &candidates[i], bounds);
        if best.is_none_or(|(s, _)| score > s) {
            best = Some((score, i));
        }
    }
    best.map(|(_, i)| i)
}

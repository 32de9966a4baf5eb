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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{Env, Tier};
    use crate::key::{make_internal_key, ValueKind};
    use crate::tiers::LevelLayout;
    use crate::version::NewFile;

    fn file(env: &Arc<Env>, number: u64, level: usize, lo: &str, hi: &str) -> Arc<FileMeta> {
        Arc::new(FileMeta::new(
            NewFile {
                level,
                number,
                tier: Tier::Slow,
                size: 1000,
                smallest: make_internal_key(lo.as_bytes(), 2, ValueKind::Value),
                largest: make_internal_key(hi.as_bytes(), 1, ValueKind::Value),
                smallest_seq: 1,
                largest_seq: 2,
                num_entries: 2,
                num_deletions: 0,
                expiry: Default::default(),
                garbage_bytes: 0,
                key_list_bytes: 0,
            },
            env.clone(),
        ))
    }

    /// Algorithm 1: the score counts the blocks overlapped level by level, each level's
    /// search narrowed to the blocks found in the level above; the highest score wins.
    #[test]
    fn overlap_score_follows_blocks_down_and_the_highest_wins() {
        let dir = tempfile::tempdir().unwrap();
        let env = Env::single(dir.path(), false).unwrap();
        let layout = Arc::new(LevelLayout {
            targets: vec![1; 4],
            tiers: vec![Tier::Slow; 4],
            last_fast_level: 0,
        });
        let mut v = Version::empty(layout);
        // L1: a spans b..d, z spans x..y.
        let a = file(&env, 1, 1, "b", "d");
        let z = file(&env, 2, 1, "x", "y");
        v.levels[1] = vec![a.clone(), z.clone()];
        // L2: 10 and 11 under a, 12 under z.
        v.levels[2] = vec![
            file(&env, 10, 2, "a", "bb"),
            file(&env, 11, 2, "c", "e"),
            file(&env, 12, 2, "xa", "xb"),
        ];
        // L3: two files under 11 ("c".."e"), one under 10, none under 12.
        v.levels[3] = vec![
            file(&env, 20, 3, "a0", "b0"),
            file(&env, 21, 3, "c0", "c5"),
            file(&env, 22, 3, "d0", "d5"),
            file(&env, 23, 3, "f", "g"),
        ];
        // Every table one block (no bounds): a overlaps 2 + 3, z 1 + 0.
        assert_eq!(overlap_score(&v, 1, &a, None), 5);
        assert_eq!(overlap_score(&v, 1, &z, None), 1);
        // With bounds, 11 splits into blocks ..="c1" and "c1"..="e": a's search in L3 is
        // narrowed to each block's range, and the block count grows by one.
        let bounds = |f: &FileMeta| (f.number == 11).then(|| vec![b"c1".to_vec(), b"e".to_vec()]);
        assert_eq!(overlap_score(&v, 1, &a, Some(&bounds)), 6);
        let files = vec![z.clone(), a.clone()];
        assert_eq!(choose(&v, 1, &files, None), Some(1), "a scores highest");
    }
}

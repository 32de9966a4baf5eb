//! Slow levels sized from the data they hold (`CompactionOptions::dynamic_slow_levels`):
//! the targets the picker sets for the levels below the fast-to-slow boundary. It owns
//! only that arithmetic; the layout (`crate::tiers`) keeps the fast levels' targets and
//! the tiers, and the picker decides what to compact.
//!
//! Why: the layout grows the slow levels from the last fast level by the size ratio, a
//! static series that ignores two things. The first slow level receives only the cold
//! part of the last fast level, which retention keeps full of hot records: with a
//! hotspot of about half the last fast level's size, each byte demoted into a first slow
//! level ten times the fast one rewrote about twelve bytes there (medium preset RW,
//! docs/bench/hotrap-peer.md; L2 -> L3 rewrote 12 GB for 1 GB inserted). And the data
//! rarely fills the series: the deepest level holding data is under its target, so all
//! the write amplification sits in the steps above it at the full ratio.
//!
//! The rule is the authors' (the HotRAP prototype's AutoTuner, `calc_sd_size_ratio`): the
//! levels from the first slow one down to the deepest holding data grow by one ratio `x`
//! from the *effective* size of the last fast level (its target less the hot bytes
//! retained there, at least a ratio-th of it), such that they add up to what the slow
//! tier holds; `x` is at most the size ratio, with a level added below while it would
//! exceed it; the first slow level is never smaller than the last fast one (then it is
//! pinned at 1.01 times that and the ratio is solved again for the levels below it); and
//! the deepest sized level has no target (it is the last: nothing compacts out of it).
//! Leveled compaction rewrites about the ratio per byte at each step, and for a given
//! total the sum of equal ratios is smallest. The levels deeper than the sized ones keep
//! the layout's targets.

use crate::tiers::series_ratio;
use crate::version::Version;

/// Overwrites the targets of the slow levels in `targets` (the layout's) from the data in
/// `v` and the hot bytes retained on the last fast level. Leaves them as they are when
/// the layout has no slow tier under a fast one or the slow tier holds little more than
/// the last fast level.
pub fn size_slow_levels(targets: &mut [u64], v: &Version, ratio: u64, hot_bytes: u64) {
    let k = v.layout.last_fast_level;
    let n = targets.len().min(v.num_levels());
    if k + 1 >= n || v.layout.tiers[k + 1] != crate::env::Tier::Slow {
        return;
    }
    let held: Vec<u64> = (k + 1..n).map(|l| v.level_sized_bytes(l)).collect();
    let Some(deepest) = held.iter().rposition(|&b| b > 0).map(|i| k + 1 + i) else {
        return;
    };
    let slow: u64 = held.iter().sum();
    let last_fast = targets[k].max(1);
    let ratio = ratio as f64;
    let effective = last_fast
        .saturating_sub(hot_bytes)
        .max((last_fast as f64 / ratio) as u64);
    let Some(plan) = plan(effective, last_fast, slow, deepest - k, n - 1 - k, ratio) else {
        return;
    };
    // The deepest sized level keeps the layout's target, which its data stays under
    // while the ratio does (the layout grows by the full ratio from the whole last fast
    // level).
    let mut size = plan.first as f64;
    for t in &mut targets[k + 1..k + plan.levels] {
        *t = size as u64;
        size *= plan.ratio;
    }
}

/// The slow levels' sizes: `levels` of them from the first, whose target is `first`,
/// each `ratio` times the one above.
#[derive(Debug, PartialEq)]
struct Plan {
    levels: usize,
    first: u64,
    ratio: f64,
}

/// Solves the sizes for `slow` bytes below a last fast level of `last_fast` target bytes,
/// `effective` of them cold, over at least `levels` (those holding data now) and at most
/// `room` slow levels.
fn plan(
    effective: u64,
    last_fast: u64,
    slow: u64,
    levels: usize,
    room: usize,
    ratio: f64,
) -> Option<Plan> {
    let (effective, last_fast, slow) = (effective as f64, last_fast as f64, slow as f64);
    let (levels, x) = spread(levels.clamp(1, room), room, slow / effective, ratio);
    let pinned = last_fast * 1.01;
    if effective * x >= pinned {
        return Some(Plan {
            levels,
            first: (effective * x) as u64,
            ratio: x,
        });
    }
    // The first slow level would be smaller than the last fast one: pin it, and size the
    // levels below it from it. A slow tier that fits in about two such levels is left to
    // the layout.
    if room < 2 || slow <= pinned * 2.0 {
        return None;
    }
    let (below, x) = spread(
        levels.saturating_sub(1).max(1),
        room - 1,
        slow / pinned - 1.0,
        ratio,
    );
    Some(Plan {
        levels: below + 1,
        first: pinned as u64,
        ratio: x,
    })
}

/// How many levels (from `levels` to `room`) hold `growth` times the level above them,
/// and the ratio `x` between them: the fewest with `x` at most `ratio`, then more while
/// each cuts the estimated writes per byte demoted by a tenth. Leveled compaction writes
/// a byte and rewrites about `x` overlapping bytes at each step, `levels * (1 + x)` in
/// all: at a growth of 67 (the medium preset's RW cell) two levels at 7.7 write about
/// 17.4 per byte, three at 3.7 about 14.0, four at 2.5 about 14.1.
fn spread(mut levels: usize, room: usize, growth: f64, ratio: f64) -> (usize, f64) {
    let writes = |levels: usize, x: f64| levels as f64 * (1.0 + x);
    let mut x = series_ratio(levels, growth);
    while levels < room {
        let next = series_ratio(levels + 1, growth);
        let cheaper = writes(levels + 1, next) < writes(levels, x) * 0.9;
        if x <= ratio && !cheaper {
            break;
        }
        levels += 1;
        x = next;
    }
    (levels, x)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: u64 = 1 << 20;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 0.01 * b
    }

    #[test]
    fn series_ratio_solves_the_sum() {
        assert!(close(series_ratio(1, 58.0), 58.0));
        // x + x^2 = 56 at x = 7.
        assert!(close(series_ratio(2, 56.0), 7.0));
        // x + x^2 + x^3 = 14 at x = 2.
        assert!(close(series_ratio(3, 14.0), 2.0));
        assert_eq!(series_ratio(3, 2.0), 1.0, "never below 1");
    }

    /// The medium preset's RW cell: a 153 MB last fast level holding 107 MB of hot
    /// records above 3 GB on two slow levels. From the 46 MB cold part two levels would
    /// take 7.7x each; three take 3.7x and write a fifth less (the prototype's final sizes:
    /// 1.01x the last fast level, 3.71x, the rest).
    #[test]
    fn a_hot_last_fast_level_spreads_the_slow_tier_over_more_levels() {
        let p = plan(46 * MB, 153 * MB, 3080 * MB, 2, 4, 10.0).unwrap();
        assert_eq!(p.levels, 3, "{p:?}");
        assert!(close(p.ratio, 3.7), "{p:?}");
        assert!(close(p.first as f64, 46.0 * MB as f64 * p.ratio), "{p:?}");
    }

    /// When the cold part times the ratio falls under the last fast level, the first
    /// slow level is pinned at 1.01 times that and the levels below it share the rest.
    #[test]
    fn the_first_slow_level_is_never_smaller_than_the_last_fast_one() {
        let p = plan(17 * MB, 170 * MB, 2900 * MB, 2, 4, 10.0).unwrap();
        assert_eq!(p.first, (170.0 * MB as f64 * 1.01) as u64, "{p:?}");
        // 171.7 * (x + x^2) = 2728.3: x = 3.5 on two levels below the pinned one.
        assert_eq!(p.levels, 3, "{p:?}");
        assert!(close(p.ratio, 3.51), "{p:?}");
    }

    /// Without hot records the ratio comes from the whole last fast level; a level is
    /// added while the ratio would pass the size ratio, or while it saves a tenth.
    #[test]
    fn a_cold_last_fast_level_grows_the_slow_levels_by_one_ratio() {
        // 2 GB below 200 MB: one level at 10x (11 writes per byte) against two at 2.7x
        // (7.4) against three at 1.7x (8.2).
        let p = plan(200 * MB, 200 * MB, 2000 * MB, 1, 4, 10.0).unwrap();
        assert_eq!(p.levels, 2, "{p:?}");
        assert!(close(p.ratio, 2.70), "{p:?}");
        // 1 GB: one level at 5x (6 per byte) against two at 1.8x (5.6): not a tenth less.
        let p = plan(200 * MB, 200 * MB, 1000 * MB, 1, 4, 10.0).unwrap();
        assert_eq!(p.levels, 1, "{p:?}");
        assert!(close(p.first as f64, (1000 * MB) as f64), "{p:?}");
        // No room for a deeper level: the ratio passes 10.
        let p = plan(200 * MB, 200 * MB, 3000 * MB, 1, 1, 10.0).unwrap();
        assert_eq!(p.levels, 1);
        assert!(close(p.ratio, 15.0), "{p:?}");
    }

    /// A slow tier no larger than about two last fast levels is the layout's business.
    #[test]
    fn a_small_slow_tier_keeps_the_layout() {
        assert_eq!(plan(20 * MB, 100 * MB, 150 * MB, 1, 4, 10.0), None);
        assert_eq!(plan(20 * MB, 100 * MB, 150 * MB, 2, 4, 10.0), None);
    }
}

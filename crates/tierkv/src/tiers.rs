//! Tiers: which level lives on which disk. [`LevelLayout`] derives, from the options, every
//! level's target size and tier: the upper levels on the fast tier within its budget (the
//! FD budget), the deeper ones on the slow tier. The picker reads it to know where a
//! compaction crosses from fast to slow (the boundary HotRAP's retention and promotion
//! work at), the version to place new files, and the read path to split its levels around
//! the promotion cache.

use crate::env::Tier;
use crate::options::Options;

/// The level layout derived from [`Options`]: target size and tier of every level.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LevelLayout {
    /// Target bytes per level. Index 0 is L0's share: `level0_compaction_trigger` memtables
    /// (at most half the FD budget); L0 is compacted when its files hold that many bytes,
    /// or when it has twice the trigger's files (see `compaction::picker::level_scores`).
    pub targets: Vec<u64>,
    /// Tier of each level's files.
    pub tiers: Vec<Tier>,
    /// Deepest level kept on the fast tier.
    pub last_fast_level: usize,
}

impl LevelLayout {
    /// Computes the layout. With an FD budget, L1..Lk stay on the fast tier where `k` is the
    /// deepest level whose cumulative target fits the budget, and the fast levels are sized
    /// to add up to the budget less [`Options::fast_tier_reserve`] (the WALs) and L0's
    /// share (the HotRAP paper's "RocksDB-fat" placement) as one geometric
    /// series rising from L0's share; deeper levels grow by the size ratio from Lk and live
    /// on the slow tier.
    pub fn new(opts: &Options) -> Self {
        let n = opts.num_levels;
        let ratio = opts.level_size_ratio;
        let mut targets = vec![0u64; n];
        let mut size = opts.max_bytes_for_level_base;
        for t in targets.iter_mut().skip(1) {
            *t = size;
            size = size.saturating_mul(ratio);
        }
        let mut last_fast = n - 1;
        targets[0] = (opts.level0_compaction_trigger as u64)
            .saturating_mul(opts.write_buffer_size as u64)
            .max(1);
        if let Some(budget) = opts.fd_budget {
            // The WALs share the fast disk with the tables.
            let budget = budget - opts.fast_tier_reserve();
            // L0 lives on the fast tier too: reserve what it holds before it is compacted
            // (at most half the budget, so a tiny budget still has levels).
            targets[0] = targets[0].min(budget / 2).max(1);
            let l0_share = targets[0];
            let budget = budget - l0_share;
            let mut sum = 0u64;
            let mut k = 1;
            while k + 1 < n && sum + targets[k] + targets[k + 1] <= budget {
                sum += targets[k];
                k += 1;
            }
            // L1..Lk share the budget in one geometric series rising from L0's share, so
            // every fast level is the same multiple of the one above it: leveled compaction
            // rewrites about that multiple per byte at each level, and for a fixed number of
            // levels and a fixed total the sum is smallest when the multiples are equal.
            // (Keeping L1 at the base and giving Lk the rest made the last step 13x in the
            // small bench preset and 38x with the defaults.)
            match balanced_ratio(l0_share, budget, k) {
                Some(r) => {
                    let mut size = l0_share as f64;
                    for t in targets.iter_mut().take(k).skip(1) {
                        size *= r;
                        *t = size as u64;
                    }
                    let upper: u64 = targets[1..k].iter().sum();
                    targets[k] = budget.saturating_sub(upper).max(1);
                }
                _ => targets[k] = budget.saturating_sub(sum).max(1),
            }
            let mut size = targets[k];
            for t in targets.iter_mut().skip(k + 1) {
                size = size.saturating_mul(ratio);
                *t = size;
            }
            if opts.slow.is_some() && !opts.all_on_fast {
                last_fast = k;
            }
        }
        let tiers = (0..n)
            .map(|l| {
                if l <= last_fast {
                    Tier::Fast
                } else {
                    Tier::Slow
                }
            })
            .collect();
        LevelLayout {
            targets,
            tiers,
            last_fast_level: last_fast,
        }
    }
}

/// The ratio `r` for which `first * (r + r^2 + ... + r^levels)` equals `total`, if it is at
/// least 1 (the fast levels never shrink going down).
fn balanced_ratio(first: u64, total: u64, levels: usize) -> Option<f64> {
    let (first, total) = (first.max(1) as f64, total as f64);
    if levels == 0 || first * levels as f64 > total {
        return None;
    }
    Some(series_ratio(levels, total / first))
}

/// The `x >= 1` for which `x + x^2 + ... + x^levels = sum` (1 when `sum` is at most
/// `levels`: levels never shrink going down). The fast levels' layout and the slow levels
/// sized from their data (`compaction::slow_levels`) are both such series.
pub(crate) fn series_ratio(levels: usize, sum: f64) -> f64 {
    let series = |x: f64| (1..=levels as i32).map(|i| x.powi(i)).sum::<f64>();
    if levels == 0 || series(1.0) >= sum {
        return 1.0;
    }
    let (mut lo, mut hi) = (1.0f64, sum.max(2.0));
    for _ in 0..100 {
        let mid = (lo + hi) / 2.0;
        if series(mid) < sum {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::DeviceProfile;
    use crate::options::{PromotionOptions, SlowTier};

    #[test]
    fn fat_layout_fills_the_fd_budget() {
        let o = Options {
            max_bytes_for_level_base: 10,
            write_buffer_size: 100,
            level0_compaction_trigger: 2,
            // 1200 for the tables; 300 for the WALs of three memtables (two immutable).
            fd_budget: Some(1500),
            promotion: PromotionOptions::disabled(),
            slow: Some(SlowTier {
                dir: "/x".into(),
                budget: None,
                device: DeviceProfile::none(),
            }),
            ..Default::default()
        };
        let l = LevelLayout::new(&o);
        // L0 reserves 2 x 100, leaving 1000 for L1..Lk. L1 = 10 and L2 = 100 fit, but
        // 10 + 100 + 1000 does not, so L2 is the last fast level. The two fast levels then
        // rise from L0's 200 by one ratio r (200r + 200r^2 = 1000, r = 1.79), and the slow
        // levels grow by 10 from L2.
        assert_eq!(l.last_fast_level, 2);
        assert_eq!(&l.targets[0..4], &[200, 358, 642, 6420]);
        let (r1, r2): (f64, f64) = (358.0 / 200.0, 642.0 / 358.0);
        assert!(
            (r1 - r2).abs() / r1 < 0.01,
            "fast levels grow by one ratio: {r1} {r2}"
        );
        assert_eq!(l.tiers[2], Tier::Fast);
        assert_eq!(l.tiers[3], Tier::Slow);
        let fast_sum: u64 = l.targets[1..=l.last_fast_level].iter().sum();
        assert_eq!(o.fast_tier_reserve(), 300);
        assert_eq!(fast_sum + 200 + 300, 1500);
        // The same sizes, all on the fast tier, for the upper-bound configuration.
        let all = LevelLayout::new(&Options {
            all_on_fast: true,
            ..o
        });
        assert_eq!(all.targets, l.targets);
        assert!(all.tiers.iter().all(|t| *t == Tier::Fast));
    }

    /// Invariant 4 on the fast disk: the WALs of every memtable that may be unflushed are
    /// kept out of what the levels may fill, so tables and WALs together stay within
    /// `fd_budget` (RALT sits beside it under its own physical limit).
    #[test]
    fn fast_levels_leave_room_for_wals() {
        let mib = 1u64 << 20;
        let o = Options {
            write_buffer_size: 4 << 20,
            max_immutable_memtables: 2,
            fd_budget: Some(256 * mib),
            slow: Some(SlowTier {
                dir: "/x".into(),
                budget: None,
                device: DeviceProfile::none(),
            }),
            ..Default::default()
        };
        let wal = 3 * 4 * mib;
        assert!(o.promotion_active());
        assert_eq!(o.fast_tier_reserve(), wal);
        let l = LevelLayout::new(&o);
        let tables: u64 = l.targets[..=l.last_fast_level].iter().sum();
        assert!(tables + wal <= 256 * mib, "{tables} + {wal}");
        assert!(tables + wal > 256 * mib - 16, "the budget is filled");
        // The same with promotion off; a tiny budget keeps half for the tables.
        let off = Options {
            promotion: PromotionOptions::disabled(),
            ..o.clone()
        };
        assert_eq!(off.fast_tier_reserve(), wal);
        let tiny = Options {
            fd_budget: Some(8 * mib),
            ..off
        };
        assert_eq!(tiny.fast_tier_reserve(), 4 * mib);
        assert_eq!(Options::default().fast_tier_reserve(), 0);
    }

    #[test]
    fn single_dir_layout_is_all_fast() {
        let l = LevelLayout::new(&Options::default());
        assert!(l.tiers.iter().all(|t| *t == Tier::Fast));
        assert_eq!(l.targets[1], 256 << 20);
        assert_eq!(l.targets[2], 2560 << 20);
    }
}

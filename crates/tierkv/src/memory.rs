//! The one memory budget ([`crate::Options::memory_budget`], F2): how it is divided among
//! the memtables, the cache, the index and filter blocks of open tables, the promotion cache
//! and the hotness tracker, how each share becomes the component's own limit, and what the
//! store reports about it ([`MemoryStats`] in [`crate::DbStats::memory`]).
//!
//! The division is fixed at open, by shares of the budget ([`MemoryShares`]): memtables 20%,
//! table index and filter blocks 20%, and with promotion active the promotion cache 10% and
//! the tracker 5% plus 3% for the runs it keeps in memory (`tracker_runs`, RALT's
//! `run_memory_limit`); the cache takes the rest (42%, or 60% without promotion). Fixed shares,
//! like F2's fixed split of its 3 GiB, keep every component's limit predictable; a share a
//! component does not use (e.g. the index and filter blocks of a small store) is not lent
//! to another, because a later need could not take it back without evicting under a lock.
//!
//! Given alongside the budget, the per-component options it derives (`write_buffer_size`,
//! `cache_size`, `table_memory_limit`, `promotion.cache_size`,
//! `promotion.memory_limit`, `promotion.ralt.memory_limit`, `promotion.ralt.run_memory_limit`
//! and `promotion.ralt.buffer_bytes`) are overridden, with a warning for each that differs from its default: the budget is the
//! one knob, and a plain size field cannot tell an explicit default from an unset one.

use crate::error::{Error, Result};
use serde::Serialize;

/// The smallest accepted [`crate::Options::memory_budget`]: below it the memtables would be
/// too small to hold a write group and the cache too small to shard.
pub const MIN_MEMORY_BUDGET: usize = 1 << 20;

/// RALT keeps an active and a frozen access buffer; with a budget each gets this fraction of
/// the tracker's share, and its run files' filters and indexes the rest.
pub(crate) const TRACKER_BUFFER_DIVISOR: usize = 8;

/// Shares of [`crate::Options::memory_budget`], as fractions; the cache takes what is left.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemoryShares {
    /// The mutable memtable and the immutable ones awaiting flush (default 0.20): each
    /// memtable gets `memtables / (1 + max_immutable_memtables)` of the budget.
    pub memtables: f64,
    /// Index and filter blocks of open tables (default 0.20: 1.5 bytes per key of 8-byte
    /// keys and 100-byte values, 16 KiB blocks and 10-bit filters, are 1.4% of the data, so
    /// a budget of 10% of the data needs 14% of it before updates add versions; see
    /// docs/bench/read-units.md). A table that does not fit is reopened on each use.
    pub tables: f64,
    /// The promotion cache, when promotion is active (default 0.10).
    pub promotion_cache: f64,
    /// The hotness tracker (RALT's buffers, filters and indexes), when promotion is active
    /// (default 0.05).
    pub tracker: f64,
    /// RALT's runs kept in memory (`RaltOptions::run_memory_limit`), when promotion is
    /// active (default 0.03: RALT's runs took about 0.6 MB, 1.5% of a 41 MiB budget, in
    /// F2's setup, and a compaction holds its inputs and outputs together). 0 keeps them
    /// on disk.
    pub tracker_runs: f64,
}

impl Default for MemoryShares {
    fn default() -> Self {
        MemoryShares {
            memtables: 0.20,
            tables: 0.20,
            promotion_cache: 0.10,
            tracker: 0.05,
            tracker_runs: 0.03,
        }
    }
}

impl MemoryShares {
    /// Checks that every share is a fraction and that the cache is left a positive share.
    pub fn validate(&self, promotion_active: bool) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidArgument(m));
        for (name, v) in [
            ("memtables", self.memtables),
            ("tables", self.tables),
            ("promotion_cache", self.promotion_cache),
            ("tracker", self.tracker),
            ("tracker_runs", self.tracker_runs),
        ] {
            if !(v.is_finite() && (0.0..1.0).contains(&v)) {
                return bad(format!("memory_shares.{name} {v} is outside 0..1"));
            }
        }
        if self.memtables <= 0.0 {
            return bad("memory_shares.memtables must be positive".into());
        }
        let used = self.fixed_sum(promotion_active);
        if used >= 1.0 {
            return bad(format!(
                "memory_shares leave nothing for the cache: the other shares add up to {used}"
            ));
        }
        Ok(())
    }

    fn fixed_sum(&self, promotion_active: bool) -> f64 {
        let promo = if promotion_active {
            self.promotion_cache + self.tracker + self.tracker_runs
        } else {
            0.0
        };
        self.memtables + self.tables + promo
    }
}

/// How a memory budget was divided, in bytes. The components add up to `budget` exactly.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MemoryDivision {
    /// The budget.
    pub budget: usize,
    /// All memtables together: `write_buffer_size * (1 + max_immutable_memtables)`.
    pub memtables: usize,
    /// The size of one memtable.
    pub write_buffer_size: usize,
    /// The cache (KV, KP and block components and the ghosts).
    pub cache: usize,
    /// Index and filter blocks of open tables.
    pub tables: usize,
    /// The promotion cache, mutable and frozen tables together (0 without promotion).
    pub promotion_cache: usize,
    /// The hotness tracker (0 without promotion).
    pub tracker: usize,
    /// The hotness tracker's in-memory runs (0 without promotion).
    pub tracker_runs: usize,
}

impl MemoryDivision {
    /// Divides `budget` among `memtable_count` memtables, the tables, the cache and (when
    /// `promotion_active`) the promotion cache and the tracker, by `shares`.
    /// [`MemoryDivision::new`] asks this of a store's options.
    pub fn divide(
        budget: usize,
        shares: &MemoryShares,
        memtable_count: usize,
        promotion_active: bool,
    ) -> Result<MemoryDivision> {
        if budget < MIN_MEMORY_BUDGET {
            return Err(Error::InvalidArgument(format!(
                "memory_budget {budget} is below the minimum of {MIN_MEMORY_BUDGET} bytes"
            )));
        }
        let active = promotion_active;
        shares.validate(active)?;
        let part = |share: f64| (budget as f64 * share).floor() as usize;
        let write_buffer_size = part(shares.memtables) / memtable_count;
        let memtables = write_buffer_size * memtable_count;
        let tables = part(shares.tables);
        let (promotion_cache, tracker, tracker_runs) = if active {
            (
                part(shares.promotion_cache),
                part(shares.tracker),
                part(shares.tracker_runs),
            )
        } else {
            (0, 0, 0)
        };
        // Floors never overshoot: the shares add up to less than 1, so this cannot wrap.
        let cache = budget - memtables - tables - promotion_cache - tracker - tracker_runs;
        let d = MemoryDivision {
            budget,
            memtables,
            write_buffer_size,
            cache,
            tables,
            promotion_cache,
            tracker,
            tracker_runs,
        };
        d.check_minimums(active)?;
        Ok(d)
    }

    /// Every derived size must still be valid on its own.
    fn check_minimums(&self, promotion_active: bool) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidArgument(m));
        if self.write_buffer_size < MIN_WRITE_BUFFER {
            return bad(format!(
                "memory_budget {} gives memtables of {} bytes (below {MIN_WRITE_BUFFER}): \
                 raise the budget or memory_shares.memtables",
                self.budget, self.write_buffer_size
            ));
        }
        if promotion_active {
            if self.promotion_cache < MIN_PROMOTION_CACHE {
                return bad(format!(
                    "memory_budget {} gives the promotion cache {} bytes (below \
                     {MIN_PROMOTION_CACHE}): raise the budget or memory_shares.promotion_cache",
                    self.budget, self.promotion_cache
                ));
            }
            if self.tracker < MIN_TRACKER {
                return bad(format!(
                    "memory_budget {} gives the hotness tracker {} bytes (below {MIN_TRACKER}): \
                     raise the budget or memory_shares.tracker",
                    self.budget, self.tracker
                ));
            }
        }
        Ok(())
    }
}

/// Smallest memtable a budget may derive (a write batch of small records must fit).
const MIN_WRITE_BUFFER: usize = 32 << 10;
/// Smallest promotion cache a budget may derive (a few records per frozen table).
const MIN_PROMOTION_CACHE: usize = 16 << 10;
/// Smallest tracker share: RALT's two buffers need 1 KiB each, and its filters some room.
pub(crate) const MIN_TRACKER: usize = 8 << 10;

/// One component's share of the budget and what it holds now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MemoryComponent {
    /// Its limit in bytes (`None`: unbounded, possible only without a budget).
    pub limit: Option<usize>,
    /// Bytes it holds now.
    pub bytes: usize,
}

/// Memory by component, from [`crate::DbStats::memory`]. With a budget the limits are the
/// division's shares and `total_bytes` stays within `budget` (docs/DESIGN.md invariant 4);
/// without one they are the individual options' limits.
#[derive(Clone, Debug, Default, Serialize)]
pub struct MemoryStats {
    /// The budget (`None`: not set; each component has its own option).
    pub budget: Option<usize>,
    /// The mutable and immutable memtables, and flushed memtables a frozen promotion cache
    /// table still holds for its update check until the checker is done with it.
    pub memtables: MemoryComponent,
    /// The cache: KV, KP and block components and the ghosts' records.
    pub cache: MemoryComponent,
    /// Index and filter blocks of the tables in the table cache.
    pub tables: MemoryComponent,
    /// Of `tables`: the index blocks (one entry per data block).
    pub table_index_bytes: usize,
    /// Of `tables`: the bloom filters.
    pub table_filter_bytes: usize,
    /// The promotion cache (mutable and frozen tables).
    pub promotion_cache: MemoryComponent,
    /// The hotness tracker: RALT's buffers, filters, indexes and in-memory runs (its limit
    /// is the `tracker` and `tracker_runs` shares together), or the bloom cascade's filters
    /// and sample.
    pub tracker: MemoryComponent,
    /// Every component together.
    pub total_bytes: usize,
}

impl MemoryStats {
    /// True when a budget is set and the components together hold more than it.
    pub fn over_budget(&self) -> bool {
        self.budget.is_some_and(|b| self.total_bytes > b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::DeviceProfile;
    use crate::options::Options;
    use crate::options::SlowTier;

    const MIB: usize = 1 << 20;

    fn two_tier() -> Options {
        Options {
            fd_budget: Some(64 << 20),
            slow: Some(SlowTier {
                dir: "/x".into(),
                budget: None,
                device: DeviceProfile::none(),
            }),
            ..Default::default()
        }
    }

    fn sum(d: &MemoryDivision) -> usize {
        d.memtables + d.cache + d.tables + d.promotion_cache + d.tracker + d.tracker_runs
    }

    // Budget division: the shares add up to the budget, with or without promotion.
    #[test]
    fn shares_add_up_to_the_budget() {
        for budget in [MIB, 3 * MIB + 7, 100 * MIB, 3 << 30] {
            for opts in [Options::default(), two_tier()] {
                let d = MemoryDivision::new(budget, &opts).unwrap();
                assert_eq!(sum(&d), budget, "{d:?}");
                assert_eq!(d.memtables, 3 * d.write_buffer_size);
                assert!(d.cache > 0);
            }
        }
        let d = MemoryDivision::new(100 * MIB, &two_tier()).unwrap();
        assert_eq!(d.tables, 20 * MIB);
        assert_eq!(d.promotion_cache, 10 * MIB);
        assert_eq!(d.tracker, 5 * MIB);
        assert_eq!(d.tracker_runs, 3 * MIB);
        assert!(d.memtables <= 20 * MIB && d.memtables > 20 * MIB - 3);
        assert!(d.cache >= 42 * MIB);
        // Without promotion its shares go to the cache.
        let d = MemoryDivision::new(100 * MIB, &Options::default()).unwrap();
        assert_eq!((d.promotion_cache, d.tracker, d.tracker_runs), (0, 0, 0));
        assert!(d.cache >= 60 * MIB);
        // Nor with every level on the fast tier.
        let all_fast = Options {
            all_on_fast: true,
            ..two_tier()
        };
        assert_eq!(
            MemoryDivision::new(100 * MIB, &all_fast)
                .unwrap()
                .promotion_cache,
            0
        );
    }

    // Budget division: every derived size becomes the component's own limit.
    #[test]
    fn apply_derives_every_component_limit() {
        let base = Options {
            write_buffer_size: 7 * MIB,
            ..two_tier()
        };
        let d = MemoryDivision::new(40 * MIB, &base).unwrap();
        let o = d.apply(&base);
        assert_eq!(o.write_buffer_size, d.write_buffer_size);
        assert_eq!(o.cache_size, d.cache);
        assert_eq!(o.table_memory_limit, Some(d.tables));
        assert_eq!(o.promotion.memory_limit, Some(d.promotion_cache));
        assert_eq!(o.promotion.cache_size, Some(d.promotion_cache / 2));
        assert_eq!(o.promotion.ralt.memory_limit, Some(d.tracker as u64));
        assert_eq!(o.promotion.ralt.run_memory_limit, d.tracker_runs as u64);
        assert!(2 * o.promotion.ralt.buffer_bytes < d.tracker);
        o.validate().unwrap();
        // The smallest budget still opens a valid configuration.
        let d = MemoryDivision::new(MIN_MEMORY_BUDGET, &two_tier()).unwrap();
        d.apply(&two_tier()).validate().unwrap();
    }

    // Budget division: minimums and bad shares are clear errors.
    #[test]
    fn tiny_budgets_and_bad_shares_are_refused() {
        let e = MemoryDivision::new(MIN_MEMORY_BUDGET - 1, &Options::default()).unwrap_err();
        assert!(e.to_string().contains("below the minimum"), "{e}");
        let greedy = Options {
            memory_shares: MemoryShares {
                memtables: 0.6,
                tables: 0.4,
                ..Default::default()
            },
            ..Default::default()
        };
        let e = MemoryDivision::new(64 * MIB, &greedy).unwrap_err();
        assert!(e.to_string().contains("nothing for the cache"), "{e}");
        let nan = Options {
            memory_shares: MemoryShares {
                tables: f64::NAN,
                ..Default::default()
            },
            ..Default::default()
        };
        assert!(MemoryDivision::new(64 * MIB, &nan)
            .unwrap_err()
            .to_string()
            .contains("memory_shares.tables"));
        let thin = Options {
            memory_shares: MemoryShares {
                memtables: 0.01,
                ..Default::default()
            },
            ..Default::default()
        };
        let e = MemoryDivision::new(2 * MIB, &thin).unwrap_err();
        assert!(e.to_string().contains("memtables of"), "{e}");
        let no_tracker = Options {
            memory_shares: MemoryShares {
                tracker: 0.0,
                ..Default::default()
            },
            ..two_tier()
        };
        let e = MemoryDivision::new(64 * MIB, &no_tracker).unwrap_err();
        assert!(e.to_string().contains("hotness tracker"), "{e}");
        // The same shares are fine without promotion (no tracker to feed).
        let one_tier = Options {
            slow: None,
            ..no_tracker
        };
        MemoryDivision::new(64 * MIB, &one_tier).unwrap();
        // Options::validate reports the same errors.
        let o = Options {
            memory_budget: Some(1000),
            ..Default::default()
        };
        assert!(o
            .validate()
            .unwrap_err()
            .to_string()
            .contains("memory_budget"));
    }
}

//! HotRAP's decisions at the boundary between the tiers, apart from the mechanisms that
//! carry them out: when the last fast level, full of retained hot data, is not worth
//! compacting (retention saturation), what a compaction from the fast into the slow tier
//! does with hot records (retain them, promote the cached ones, check hotness), and which
//! records of a frozen promotion cache the checker promotes by flush (HotRAP §3.3-3.4).
//!
//! The engine (`db`) asks these questions and carries out the answers (jobs, files,
//! installs, counters); it decides none of them itself. The answers are computed from
//! sizes, options and closures, never from versions or tables, so this module sits below
//! `version` and `compaction` and must not import them.

use super::promotion::{PcRecord, PcTable};
use super::HotTracker;
use crate::error::Result;
use crate::options::PromotionOptions;
use bytes::Bytes;

/// Whether a level holds more than 1.5 times its target (live bytes against the target the
/// picker sets).
pub(crate) fn far_over_target(level_bytes: u64, target: u64) -> bool {
    level_bytes > target / 2 * 3
}

/// Retention's memory of the last compaction into the slow tier: the last fast level's
/// size when such a compaction last kept nearly all of its input in place. Until the level
/// grows past that by a file, picking it again would only rewrite hot data in place.
#[derive(Default)]
pub(crate) struct Retention {
    saturated_at: Option<u64>,
}

impl Retention {
    /// True while the last fast level (`level_bytes`, its `target`) holds (nearly) only
    /// retained hot data and has not grown by a file (`file_size`) since. Never once the
    /// level is far over its target: then the next compaction pushes data down regardless
    /// of hotness, so the fast tier stays within budget (invariant 4, docs/DESIGN.md).
    pub(crate) fn saturated(&self, level_bytes: u64, target: u64, file_size: u64) -> bool {
        self.full_of_hot_data(level_bytes, file_size) && !far_over_target(level_bytes, target)
    }

    /// The last compaction into the slow tier kept nearly all of its input on the level,
    /// and the level has not grown by more than a file since.
    fn full_of_hot_data(&self, level_bytes: u64, file_size: u64) -> bool {
        self.saturated_at
            .is_some_and(|at| level_bytes <= at + file_size)
    }

    /// True when a compaction of the last fast level must push its data down whatever its
    /// hotness: the level is far over its target and still full of retained hot data (the
    /// hot set outgrew the fast tier). A level that grew by more than a file since its last
    /// compaction into the slow tier (an L0 compaction brought it new, unjudged data) gets
    /// a retaining compaction first: forcing it demoted the hot records of the files it
    /// picked along with the new cold ones (medium RW hotspot-5%: the FD hit rate fell
    /// from 94% to 78% for some seconds, docs/bench/hotrap-peer.md).
    pub(crate) fn force_down(&self, level_bytes: u64, target: u64, file_size: u64) -> bool {
        self.full_of_hot_data(level_bytes, file_size) && far_over_target(level_bytes, target)
    }

    /// Records a finished compaction into the slow tier that took `taken` bytes of files
    /// from the fast level and left `stayed` bytes in it (retained or promoted): one that
    /// barely shrank the level marks it saturated at its new size, `level_bytes_after`.
    pub(crate) fn after_compaction(&mut self, stayed: u64, taken: u64, level_bytes_after: u64) {
        self.saturated_at = (stayed * 10 >= taken * 9).then_some(level_bytes_after);
    }
}

/// Which records read from the slow tier may be promoted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PromotionCheck {
    /// Every one (the paper's no-hotness-check ablation).
    Everything,
    /// Those the tracker calls hot.
    Hot,
    /// Those the tracker calls hot, and those whose key the tracker saw judged here lately
    /// (`PromotionOptions::promote_on_repeat`).
    HotOrRepeated,
}

impl PromotionCheck {
    /// The check `promotion`'s switches ask for.
    pub(crate) fn of(promotion: &PromotionOptions) -> PromotionCheck {
        match (promotion.hotness_check, promotion.promote_on_repeat) {
            (false, _) => PromotionCheck::Everything,
            (true, false) => PromotionCheck::Hot,
            (true, true) => PromotionCheck::HotOrRepeated,
        }
    }

    /// Logs the slow-tier read that cached `record` in the tracker (HotRAP: "RALT is
    /// updated later") and says whether the record may be promoted.
    pub(crate) fn admits(
        self,
        tracker: &HotTracker,
        key: &[u8],
        record: &PcRecord,
    ) -> Result<bool> {
        let repeated = self == PromotionCheck::HotOrRepeated && tracker.read_again(key, record);
        tracker.record_cached_read(key, record)?;
        Ok(match self {
            PromotionCheck::Everything => true,
            PromotionCheck::Hot => tracker.is_hot(key),
            PromotionCheck::HotOrRepeated => repeated || tracker.is_hot(key),
        })
    }
}

/// What a compaction from the fast into the slow tier does with hot records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CrossingPlan {
    /// Hot records stay on the last fast level (retention).
    pub retain: bool,
    /// Which promotion-cache records may be promoted.
    pub check: PromotionCheck,
    /// Records the promotion cache holds in the compaction's range are written into the
    /// fast output (promotion by compaction).
    pub promote_cached: bool,
}

/// The plan of a compaction from level `from_level` of the fast tier into the slow tier:
/// only the last fast level retains, and not when `force_down` (see `Retention`).
pub(crate) fn plan_crossing(
    promotion: &PromotionOptions,
    from_last_fast_level: bool,
    force_down: bool,
) -> CrossingPlan {
    CrossingPlan {
        retain: promotion.retention && from_last_fast_level && !force_down,
        check: PromotionCheck::of(promotion),
        promote_cached: promotion.by_compaction,
    }
}

/// The records of a frozen promotion cache table the checker promotes by flush.
#[derive(Default)]
pub(crate) struct FlushPromotion {
    /// Hot records to write to a fast-tier file, in key order.
    pub hot: Vec<(Bytes, PcRecord)>,
    /// Records left out because a newer version of the key exists in the checker's
    /// SuperVersion.
    pub dropped_newer: u64,
}

/// Chooses what the checker promotes from `table` (HotRAP §3.4 steps 5-8): not a record
/// updated since it was cached, nor one expired at `now` (it reads as a deletion), nor
/// one `check` refuses, nor one for which `newer_exists` finds a newer version in the
/// memtables or fast levels (a promoted older version would shadow it). Every record's
/// slow-tier read is logged in the tracker first (HotRAP: "RALT is updated later").
pub(crate) fn select_for_flush(
    table: &PcTable,
    tracker: &HotTracker,
    check: Option<PromotionCheck>,
    now: u64,
    mut newer_exists: impl FnMut(&[u8]) -> Result<bool>,
) -> Result<FlushPromotion> {
    let mut out = FlushPromotion::default();
    for (key, record) in table.records() {
        if table.is_updated(&key) || crate::expiry::is_expired(record.deadline, now) {
            continue;
        }
        // No check: every record the cache holds (a checkpoint's or a close's promotion).
        if let Some(check) = check {
            if !check.admits(tracker, &key, &record)? {
                continue;
            }
        }
        if newer_exists(&key)? {
            out.dropped_newer += 1;
            continue;
        }
        out.hot.push((key, record));
    }
    Ok(out)
}

/// Whether `hot_bytes` of hot records are worth a promotion file now: at least half of
/// one (`file_bytes`, the promotion cache's size); fewer go back into the cache to wait
/// for more.
pub(crate) fn worth_a_file(hot_bytes: usize, file_bytes: usize) -> bool {
    hot_bytes >= file_bytes / 2
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Retention saturation: set by a compaction that kept >= 90% of its input, holds
    /// until the level grows by a file, and never holds (but forces data down) once the
    /// level is over 1.5x its target.
    #[test]
    fn retention_saturates_until_the_level_grows_or_overflows() {
        let mut r = Retention::default();
        assert!(!r.saturated(100, 1000, 10));
        assert!(!r.force_down(2000, 1000, 10), "never saturated");
        r.after_compaction(89, 100, 500);
        assert!(!r.saturated(500, 1000, 10), "89% kept is not saturation");
        r.after_compaction(90, 100, 500);
        assert!(r.saturated(500, 1000, 10));
        assert!(r.saturated(510, 1000, 10));
        assert!(!r.saturated(511, 1000, 10), "grew by more than a file");
        assert!(!r.saturated(505, 300, 10), "far over its target");
        assert!(
            r.force_down(505, 300, 10),
            "saturated and far over its target"
        );
        assert!(!r.force_down(505, 400, 10), "not far over its target");
    }

    /// A saturated level that grew by more than a file since its last compaction into the
    /// slow tier holds data retention has not judged yet: it is not forced down until a
    /// retaining compaction finds it saturated again (invariant 4 still holds: then it is).
    #[test]
    fn a_level_grown_since_saturation_is_retained_before_it_is_forced_down() {
        let mut r = Retention::default();
        r.after_compaction(95, 100, 1400);
        assert!(
            r.force_down(1550, 1000, 200),
            "full of hot data, far over target"
        );
        assert!(
            !r.force_down(1800, 1000, 200),
            "grew by more than a file: judge it first"
        );
        r.after_compaction(50, 100, 1750);
        assert!(
            !r.force_down(1750, 1000, 200),
            "the retaining compaction shed cold data"
        );
        r.after_compaction(92, 100, 1700);
        assert!(r.force_down(1700, 1000, 200), "saturated again: now forced");
    }

    /// Only the last fast level retains, never when forced down; the other switches follow
    /// the options.
    #[test]
    fn a_crossing_retains_only_from_the_last_fast_level_unless_forced_down() {
        let p = PromotionOptions {
            retention: true,
            hotness_check: true,
            by_compaction: false,
            ..PromotionOptions::default()
        };
        let plan = plan_crossing(&p, true, false);
        assert_eq!(
            plan,
            CrossingPlan {
                retain: true,
                check: PromotionCheck::HotOrRepeated,
                promote_cached: false
            }
        );
        assert!(!plan_crossing(&p, false, false).retain);
        assert!(!plan_crossing(&p, true, true).retain);
        let off = PromotionOptions {
            retention: false,
            ..p
        };
        assert!(!plan_crossing(&off, true, false).retain);
    }

    #[test]
    fn half_a_file_is_worth_writing() {
        assert!(!worth_a_file(49, 100));
        assert!(worth_a_file(50, 100));
    }
}

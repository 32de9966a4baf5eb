//! The one interface the engine asks about hotness: RALT (HotRAP's on-disk tracker, the
//! default) or HyperDB's bloom-filter cascade (a cheap alternative kept for comparison),
//! chosen by `PromotionOptions::tracker`.
//!
//! What differs between them is what they can answer: RALT enumerates hot keys
//! ([`HotTracker::hot_keys`]) and sizes hot ranges from its runs; the cascade answers
//! membership only, so retention asks [`HotTracker::is_hot`] for every key of a
//! compaction's merge, and hot range sizes come from a sample (an estimate).

use super::cascade::{BloomCascade, BloomCascadeStats, BloomRangeSizer};
use super::promotion::PcRecord;
use super::ralt::{Ralt, RaltStats, RangeHotSizer};
use crate::error::Result;
pub use crate::options::TrackerKind;

/// Hot keys of a range in key order, each with its value length.
pub type HotKeys = Box<dyn Iterator<Item = Result<(Vec<u8>, u32)>> + Send>;

/// A hotness tracker. (One per store, held behind an `Arc`: the size difference between
/// the variants costs nothing.)
#[allow(clippy::large_enum_variant)]
pub enum HotTracker {
    /// RALT.
    Ralt(Ralt),
    /// The bloom-filter cascade.
    BloomCascade(BloomCascade),
}

/// A snapshot for many `range_hot_size` questions (one compaction pick).
pub enum HotSizer {
    /// RALT's prefix sums.
    Ralt(RangeHotSizer),
    /// The cascade's hot sample.
    BloomCascade(BloomRangeSizer),
}

impl HotSizer {
    /// Estimated key plus value bytes of hot keys in `[lo, hi]`.
    pub fn range_hot_size(&self, lo: &[u8], hi: &[u8]) -> u64 {
        match self {
            HotSizer::Ralt(s) => s.range_hot_size(lo, hi),
            HotSizer::BloomCascade(s) => s.range_hot_size(lo, hi),
        }
    }
}

impl HotTracker {
    /// Logs the slow-tier read that put `record` in the promotion cache, unless an earlier
    /// checker pass did (HotRAP: "RALT is updated later"). Called when the record leaves
    /// the cache: by the checker, or by a compaction that promotes it.
    pub fn record_cached_read(&self, key: &[u8], record: &PcRecord) -> Result<()> {
        if record.recorded {
            return Ok(());
        }
        self.record_access_background(key, record.value.len().min(u32::MAX as usize) as u32)
    }

    /// Records a foreground access (a get). Never does I/O.
    pub fn record_access(&self, key: &[u8], value_len: u32) -> Result<()> {
        match self {
            HotTracker::Ralt(r) => r.record_access(key, value_len),
            HotTracker::BloomCascade(b) => {
                b.record_access(key, value_len);
                Ok(())
            }
        }
    }

    /// Records an access from background work (the checker, a compaction), which may wait.
    pub fn record_access_background(&self, key: &[u8], value_len: u32) -> Result<()> {
        match self {
            HotTracker::Ralt(r) => r.record_access_background(key, value_len),
            HotTracker::BloomCascade(b) => {
                b.record_access(key, value_len);
                Ok(())
            }
        }
    }

    /// Remembers that `record`, cached from the slow tier, is judged for promotion; true
    /// if its key was judged lately too (RALT's repeat stage; the cascade has none). A
    /// record the checker put back was judged at its read already: it is looked up, not
    /// remembered again (counted twice, it would be a repeat of itself, and the stage's
    /// share of repeats sizes its window).
    pub fn read_again(&self, key: &[u8], record: &PcRecord) -> bool {
        match self {
            HotTracker::Ralt(r) if record.recorded => r.remembers(key),
            HotTracker::Ralt(r) => {
                r.read_again(key, record.value.len().min(u32::MAX as usize) as u32)
            }
            HotTracker::BloomCascade(_) => false,
        }
    }

    /// True if `key` is hot.
    pub fn is_hot(&self, key: &[u8]) -> bool {
        match self {
            HotTracker::Ralt(r) => r.is_hot(key),
            HotTracker::BloomCascade(b) => b.is_hot(key),
        }
    }

    /// The hot keys of `[lo, hi]` in key order, or `None` when the tracker cannot list
    /// them (the cascade): the caller then asks `is_hot` key by key.
    pub fn hot_keys(&self, lo: &[u8], hi: &[u8]) -> Result<Option<HotKeys>> {
        match self {
            HotTracker::Ralt(r) => r.hot_keys(lo, hi).map(Some),
            HotTracker::BloomCascade(_) => Ok(None),
        }
    }

    /// A snapshot answering `range_hot_size` (RALT: never below the truth; the cascade:
    /// a sample-based estimate).
    pub fn range_hot_sizer(&self) -> HotSizer {
        match self {
            HotTracker::Ralt(r) => HotSizer::Ralt(r.range_hot_sizer()),
            HotTracker::BloomCascade(b) => HotSizer::BloomCascade(b.range_hot_sizer()),
        }
    }

    /// Background work is waiting (RALT's flushes, compactions, evictions, checkpoints).
    pub fn needs_maintenance(&self) -> bool {
        match self {
            HotTracker::Ralt(r) => r.needs_maintenance(),
            HotTracker::BloomCascade(_) => false,
        }
    }

    /// [`HotTracker::needs_maintenance`] without RALT's checkpoint test: cheap enough for
    /// every access.
    pub fn work_waiting(&self) -> bool {
        match self {
            HotTracker::Ralt(r) => r.work_waiting(),
            HotTracker::BloomCascade(_) => false,
        }
    }

    /// One unit of background work; whether it did anything.
    pub fn maintenance(&self) -> Result<bool> {
        match self {
            HotTracker::Ralt(r) => r.maintenance(),
            HotTracker::BloomCascade(_) => Ok(false),
        }
    }

    /// Persists what survives a restart (RALT; the cascade lives in memory only).
    pub fn flush(&self) -> Result<()> {
        match self {
            HotTracker::Ralt(r) => r.flush(),
            HotTracker::BloomCascade(_) => Ok(()),
        }
    }

    /// Key plus value bytes of the keys called hot now: RALT's hot set. The cascade
    /// answers membership only and reports 0 (sizing from it would take a sample per
    /// call: see `compaction::slow_levels`, which then sizes as without promotion).
    pub fn hot_set_bytes(&self) -> u64 {
        match self {
            HotTracker::Ralt(r) => r.hot_set_bytes(),
            HotTracker::BloomCascade(_) => 0,
        }
    }

    /// RALT's statistics, if this is RALT.
    pub fn ralt_stats(&self) -> Option<RaltStats> {
        match self {
            HotTracker::Ralt(r) => Some(r.stats()),
            HotTracker::BloomCascade(_) => None,
        }
    }

    /// The cascade's statistics, if this is the cascade.
    pub fn bloom_stats(&self) -> Option<BloomCascadeStats> {
        match self {
            HotTracker::Ralt(_) => None,
            HotTracker::BloomCascade(b) => Some(b.stats()),
        }
    }
}

//! The systems under test, as names: what `--systems` accepts, how each system is reported,
//! and the engine switches (cache mode, promotion, compaction) each tierkv variant sets.
//! Plain data below the configuration ([`crate::scale`] lists the systems to run); opening
//! a system's store is [`crate::store`]'s and `rocksdb_peer`'s.

use serde::Serialize;
use std::str::FromStr;

use crate::error::{BenchError, Result};

/// A system the benchmark can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(into = "String")]
pub enum System {
    /// tierkv with hot-record promotion (the default options).
    Tierkv,
    /// tierkv without promotion: the HotRAP paper's "RocksDB-fat" placement.
    TierkvNoPromo,
    /// tierkv with every level on the fast disk: the upper bound.
    TierkvFd,
    /// Ablation: no retention of hot records in compactions into the slow disk.
    TierkvNoRetain,
    /// Ablation: promote every record read from the slow disk (no hotness check).
    TierkvNoHotCheck,
    /// Ablation: no promotion on a repeat (issue 46's repeat stage off: only RALT's
    /// scores admit a record read from the slow disk).
    TierkvNoRepeat,
    /// Ablation: no promotion by compaction.
    TierkvNoByCompaction,
    /// Ablation: no promotion by flush.
    TierkvNoByFlush,
    /// Ablation: RALT keeps its initial limits (hot set 50%, physical 15% of the fast
    /// disk) instead of auto-tuning them (HotRAP §3.7).
    TierkvNoAutoTune,
    /// Ablation: compactions re-encode every block (no block reuse).
    TierkvNoReuse,
    /// Ablation: one file at a time from the fast into the slow tier (no batched demotion).
    TierkvNoBatch,
    /// Ablation: the slow levels keep the layout's targets, each the size ratio times the
    /// one above (not sized from the data they hold).
    TierkvStaticSlow,
    /// tierkv with HyperDB's bloom-filter cascade instead of RALT as the hotness tracker.
    TierkvBloomTracker,
    /// tierkv with the fast disk's record cache on (`Options::record_cache`).
    TierkvRecordCache,
    /// tierkv with the fast disk's record cache off.
    TierkvNoRecordCache,
    /// tierkv with HyperDB's semi-sorted tables on the slow tier (issue 21).
    TierkvSemi,
    /// tierkv with preemptive pushdown into deeper slow levels (HyperDB §3.4).
    TierkvPush,
    /// Semi-sorted slow tier with preemptive pushdown.
    TierkvSemiPush,
    /// Semi-sorted slow tier with HyperDB's overlap-score victim choice (Algorithm 1).
    TierkvSemiScore,
    /// Semi-sorted slow tier with preemptive pushdown and the overlap-score victim.
    TierkvSemiPushScore,
    /// tierkv with the block cache only (RocksDB-like caching, tierkv before AC-Key).
    TierkvBlockOnly,
    /// tierkv with the whole cache budget as a KV cache.
    TierkvKvOnly,
    /// tierkv with the whole cache budget as a KP cache.
    TierkvKpOnly,
    /// tierkv with a fixed split of the cache budget (shares of KV, KP and block).
    TierkvSplit {
        /// KV share.
        kv: u16,
        /// KP share.
        kp: u16,
        /// Block share.
        block: u16,
    },
    /// RocksDB with `db_paths` (fast disk first) and direct I/O.
    RocksdbTiered,
    /// RocksDB with everything on the fast disk.
    RocksdbFd,
}

impl From<System> for String {
    fn from(s: System) -> String {
        s.name().to_string()
    }
}

impl FromStr for System {
    type Err = BenchError;

    fn from_str(s: &str) -> Result<Self> {
        let sys = match s {
            "tierkv" => System::Tierkv,
            "tierkv-nopromo" => System::TierkvNoPromo,
            "tierkv-fd" => System::TierkvFd,
            "tierkv-noretain" => System::TierkvNoRetain,
            "tierkv-nohotcheck" => System::TierkvNoHotCheck,
            "tierkv-norepeat" => System::TierkvNoRepeat,
            "tierkv-nobycompaction" => System::TierkvNoByCompaction,
            "tierkv-nobyflush" => System::TierkvNoByFlush,
            "tierkv-noautotune" => System::TierkvNoAutoTune,
            "tierkv-noreuse" => System::TierkvNoReuse,
            "tierkv-nobatch" => System::TierkvNoBatch,
            "tierkv-staticslow" => System::TierkvStaticSlow,
            "tierkv-semi" => System::TierkvSemi,
            "tierkv-push" => System::TierkvPush,
            "tierkv-semi-push" => System::TierkvSemiPush,
            "tierkv-semi-score" => System::TierkvSemiScore,
            "tierkv-semi-push-score" => System::TierkvSemiPushScore,
            "tierkv-bloomtracker" => System::TierkvBloomTracker,
            "tierkv-rcache" => System::TierkvRecordCache,
            "tierkv-norcache" => System::TierkvNoRecordCache,
            "tierkv-adaptive" => System::Tierkv,
            "tierkv-blockonly" => System::TierkvBlockOnly,
            "tierkv-kvonly" => System::TierkvKvOnly,
            "tierkv-kponly" => System::TierkvKpOnly,
            "rocksdb-tiered" => System::RocksdbTiered,
            "rocksdb-fd" => System::RocksdbFd,
            other => match other.strip_prefix("tierkv-split:") {
                Some(shares) => parse_split(shares)?,
                None => {
                    return Err(BenchError::InvalidArgument(format!(
                        "unknown system {s:?}: expected one of {}, or tierkv-split:KV:KP:BLOCK",
                        System::ALL.map(|s| s.name()).join(", ")
                    )))
                }
            },
        };
        if sys.is_rocksdb() && !cfg!(feature = "rocksdb-peer") {
            return Err(BenchError::InvalidArgument(format!(
                "{s} is a RocksDB baseline, which this build does not include: it needs the \
                 rocksdb-peer feature (cargo run --release -p tierkv-cli --features \
                 tierkv-bench/rocksdb-peer -- bench --systems ...)"
            )));
        }
        Ok(sys)
    }
}

/// `KV:KP:BLOCK` shares of a fixed split (integers, e.g. `8:2:0` or `60:20:20`).
fn parse_split(shares: &str) -> Result<System> {
    let bad = || {
        BenchError::InvalidArgument(format!(
            "tierkv-split:{shares}: expected three integer shares KV:KP:BLOCK, not all zero"
        ))
    };
    let v: Vec<u16> = shares
        .split(':')
        .map(|p| p.trim().parse::<u16>().map_err(|_| bad()))
        .collect::<Result<_>>()?;
    match v[..] {
        [kv, kp, block] if kv as u32 + kp as u32 + block as u32 > 0 => {
            Ok(System::TierkvSplit { kv, kp, block })
        }
        _ => Err(bad()),
    }
}

impl System {
    /// Every system with a fixed name (fixed splits are `tierkv-split:KV:KP:BLOCK`).
    pub const ALL: [System; 25] = [
        System::Tierkv,
        System::TierkvNoPromo,
        System::TierkvFd,
        System::TierkvNoRetain,
        System::TierkvNoHotCheck,
        System::TierkvNoRepeat,
        System::TierkvNoByCompaction,
        System::TierkvNoByFlush,
        System::TierkvNoAutoTune,
        System::TierkvNoReuse,
        System::TierkvNoBatch,
        System::TierkvStaticSlow,
        System::TierkvBloomTracker,
        System::TierkvRecordCache,
        System::TierkvNoRecordCache,
        System::TierkvSemi,
        System::TierkvPush,
        System::TierkvSemiPush,
        System::TierkvSemiScore,
        System::TierkvSemiPushScore,
        System::TierkvBlockOnly,
        System::TierkvKvOnly,
        System::TierkvKpOnly,
        System::RocksdbTiered,
        System::RocksdbFd,
    ];

    /// The name used by `--systems` and in reports.
    pub fn name(self) -> String {
        match self {
            System::TierkvSplit { kv, kp, block } => format!("tierkv-split:{kv}:{kp}:{block}"),
            s => s.fixed_name().to_string(),
        }
    }

    fn fixed_name(self) -> &'static str {
        match self {
            System::TierkvSplit { .. } => "tierkv-split",
            System::Tierkv => "tierkv",
            System::TierkvNoPromo => "tierkv-nopromo",
            System::TierkvFd => "tierkv-fd",
            System::TierkvNoRetain => "tierkv-noretain",
            System::TierkvNoHotCheck => "tierkv-nohotcheck",
            System::TierkvNoRepeat => "tierkv-norepeat",
            System::TierkvNoByCompaction => "tierkv-nobycompaction",
            System::TierkvNoByFlush => "tierkv-nobyflush",
            System::TierkvNoAutoTune => "tierkv-noautotune",
            System::TierkvNoReuse => "tierkv-noreuse",
            System::TierkvNoBatch => "tierkv-nobatch",
            System::TierkvStaticSlow => "tierkv-staticslow",
            System::TierkvBloomTracker => "tierkv-bloomtracker",
            System::TierkvRecordCache => "tierkv-rcache",
            System::TierkvNoRecordCache => "tierkv-norcache",
            System::TierkvSemi => "tierkv-semi",
            System::TierkvPush => "tierkv-push",
            System::TierkvSemiPush => "tierkv-semi-push",
            System::TierkvSemiScore => "tierkv-semi-score",
            System::TierkvSemiPushScore => "tierkv-semi-push-score",
            System::TierkvBlockOnly => "tierkv-blockonly",
            System::TierkvKvOnly => "tierkv-kvonly",
            System::TierkvKpOnly => "tierkv-kponly",
            System::RocksdbTiered => "rocksdb-tiered",
            System::RocksdbFd => "rocksdb-fd",
        }
    }

    /// True for the RocksDB peers.
    pub fn is_rocksdb(self) -> bool {
        matches!(self, System::RocksdbTiered | System::RocksdbFd)
    }

    /// True when every level lives on the fast disk.
    pub fn all_on_fast(self) -> bool {
        matches!(self, System::TierkvFd | System::RocksdbFd)
    }

    /// Systems whose loaded stores are identical share one load (`None`: loads its own).
    /// Promotion does nothing while loading (nothing is read), so every two-tier tierkv
    /// variant starts from the same files.
    pub fn load_class(self) -> Option<&'static str> {
        match self {
            System::TierkvFd => Some("tierkv-all-fast"),
            // Its load's compactions already write the other slow-tier format.
            System::TierkvSemi
            | System::TierkvSemiPush
            | System::TierkvSemiScore
            | System::TierkvSemiPushScore => Some("tierkv-semi"),
            // Its load leaves the slow levels in the layout's shape.
            System::TierkvStaticSlow => Some("tierkv-static-slow"),
            s if s.is_rocksdb() => None,
            _ => Some("tierkv-two-tier"),
        }
    }

    /// The cache mode of a tierkv system (adaptive unless it is a cache-mode system).
    pub fn cache_mode(self) -> tierkv::CacheMode {
        match self {
            System::TierkvBlockOnly => tierkv::CacheMode::BlockOnly,
            System::TierkvKvOnly => tierkv::CacheMode::KvOnly,
            System::TierkvKpOnly => tierkv::CacheMode::KpOnly,
            System::TierkvSplit { kv, kp, block } => tierkv::CacheMode::Split {
                kv: kv as f64,
                kp: kp as f64,
                block: block as f64,
            },
            _ => tierkv::CacheMode::Adaptive,
        }
    }

    /// Whether a tierkv system keeps the fast disk's record cache regardless of
    /// `--record-cache` (`None`: the flag's, or the engine's default).
    pub fn record_cache(self) -> Option<bool> {
        match self {
            System::TierkvRecordCache => Some(true),
            System::TierkvNoRecordCache => Some(false),
            _ => None,
        }
    }

    /// Promotion switches of a tierkv system.
    pub fn promotion(self) -> tierkv::PromotionOptions {
        let on = tierkv::PromotionOptions::default();
        match self {
            System::TierkvNoPromo | System::TierkvFd => tierkv::PromotionOptions::disabled(),
            System::TierkvNoRetain => tierkv::PromotionOptions {
                retention: false,
                ..on
            },
            System::TierkvNoHotCheck => tierkv::PromotionOptions {
                hotness_check: false,
                ..on
            },
            System::TierkvNoRepeat => tierkv::PromotionOptions {
                promote_on_repeat: false,
                ..on
            },
            System::TierkvNoByCompaction => tierkv::PromotionOptions {
                by_compaction: false,
                ..on
            },
            System::TierkvNoByFlush => tierkv::PromotionOptions {
                by_flush: false,
                ..on
            },
            System::TierkvNoAutoTune => {
                let mut p = on;
                p.ralt.auto_tune = false;
                p
            }
            System::TierkvBloomTracker => tierkv::PromotionOptions {
                tracker: tierkv::TrackerKind::BloomCascade,
                ..on
            },
            _ => on,
        }
    }

    /// Compaction switches of a tierkv system (block reuse, batched demotion).
    pub fn compaction(self) -> tierkv::CompactionOptions {
        let on = tierkv::CompactionOptions::default();
        match self {
            System::TierkvNoReuse => tierkv::CompactionOptions {
                block_reuse: false,
                ..on
            },
            System::TierkvNoBatch => tierkv::CompactionOptions {
                batched_demotion: false,
                ..on
            },
            System::TierkvStaticSlow => tierkv::CompactionOptions {
                dynamic_slow_levels: false,
                ..on
            },
            System::TierkvSemi => tierkv::CompactionOptions {
                slow_tier_format: tierkv::SlowTierFormat::SemiSorted,
                ..on
            },
            System::TierkvPush => tierkv::CompactionOptions {
                preemptive_pushdown: true,
                ..on
            },
            System::TierkvSemiPush | System::TierkvSemiScore | System::TierkvSemiPushScore => {
                tierkv::CompactionOptions {
                    slow_tier_format: tierkv::SlowTierFormat::SemiSorted,
                    preemptive_pushdown: self != System::TierkvSemiScore,
                    overlap_score_victim: self != System::TierkvSemiPush,
                    ..on
                }
            }
            _ => on,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for s in System::ALL {
            if s.is_rocksdb() && !cfg!(feature = "rocksdb-peer") {
                assert!(s.name().parse::<System>().is_err());
                continue;
            }
            assert_eq!(s.name().parse::<System>().unwrap(), s);
        }
    }

    /// A RocksDB system in a build without RocksDB is refused with the reason and the
    /// feature that adds it, not as an unknown name.
    #[cfg(not(feature = "rocksdb-peer"))]
    #[test]
    fn rocksdb_systems_without_the_feature_name_it() {
        for name in ["rocksdb-tiered", "rocksdb-fd"] {
            let e = name.parse::<System>().unwrap_err().to_string();
            assert!(
                e.contains("RocksDB baseline") && e.contains("rocksdb-peer"),
                "{e}"
            );
        }
    }

    #[test]
    fn cache_systems_parse_and_configure() {
        let s: System = "tierkv-split:8:2:0".parse().unwrap();
        assert_eq!(s.name(), "tierkv-split:8:2:0");
        assert_eq!(
            s.cache_mode(),
            tierkv::CacheMode::Split {
                kv: 8.0,
                kp: 2.0,
                block: 0.0
            }
        );
        assert_eq!(s.load_class(), System::Tierkv.load_class());
        for bad in [
            "tierkv-split:1:2",
            "tierkv-split:0:0:0",
            "tierkv-split:a:1:1",
        ] {
            assert!(bad.parse::<System>().is_err(), "{bad}");
        }
        assert_eq!(
            "tierkv-kvonly".parse::<System>().unwrap().cache_mode(),
            tierkv::CacheMode::KvOnly
        );
        assert_eq!("tierkv-adaptive".parse::<System>().unwrap(), System::Tierkv);
        assert_eq!(System::Tierkv.cache_mode(), tierkv::CacheMode::Adaptive);
    }

    #[test]
    fn ablations_flip_one_switch() {
        assert!(!System::TierkvNoPromo.promotion().enabled);
        let r = System::TierkvNoRetain.promotion();
        assert!(r.enabled && !r.retention && r.by_flush);
        assert!(!System::TierkvNoHotCheck.promotion().hotness_check);
        let n = System::TierkvNoRepeat.promotion();
        assert!(n.hotness_check && !n.promote_on_repeat);
        assert!(System::Tierkv.promotion().promote_on_repeat);
        assert!(!System::TierkvNoByCompaction.promotion().by_compaction);
        assert!(!System::TierkvNoByFlush.promotion().by_flush);
        assert!(System::Tierkv.promotion().enabled);
        assert!(!System::TierkvNoReuse.compaction().block_reuse);
        assert!(!System::TierkvNoBatch.compaction().batched_demotion);
        assert_eq!(
            System::TierkvSemi.compaction().slow_tier_format,
            tierkv::SlowTierFormat::SemiSorted
        );
        assert!(System::Tierkv.compaction().block_reuse);
        assert_eq!(
            System::TierkvBloomTracker.promotion().tracker,
            tierkv::TrackerKind::BloomCascade
        );
    }
}

//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use tierkv::{Db, Options};

/// Options that make flushes and compactions happen after a few KiB, so small tests
/// exercise every path: many L0 files, several levels, file splits.
pub fn tiny_options() -> Options {
    Options {
        write_buffer_size: 16 * 1024,
        block_size: 1024,
        target_file_size: 16 * 1024,
        max_bytes_for_level_base: 64 * 1024,
        level0_compaction_trigger: 2,
        level0_slowdown_trigger: 8,
        level0_stop_trigger: 12,
        cache_size: 64 * 1024,
        max_open_files: 20,
        num_levels: 5,
        ..Options::default()
    }
}

/// Deterministic key for index `i` in a key space.
pub fn key(i: u64) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// Two tiers with a small fast-tier budget, so data reaches the slow tier after a few
/// hundred KiB, and HotRAP promotion on (or off) with caches small enough that the
/// checker, retention and promotion by compaction all run in small tests.
pub fn two_tier_options(slow_dir: &std::path::Path, fd_budget: u64, promotion: bool) -> Options {
    let mut promo = if promotion {
        tierkv::PromotionOptions::default()
    } else {
        tierkv::PromotionOptions::disabled()
    };
    promo.cache_size = Some(8 * 1024);
    promo.ralt.buffer_bytes = 4 * 1024;
    Options {
        fd_budget: Some(fd_budget),
        slow: Some(tierkv::SlowTier {
            dir: slow_dir.to_path_buf(),
            budget: None,
            device: tierkv::DeviceProfile::none(),
        }),
        use_direct_io: false,
        promotion: promo,
        ..tiny_options()
    }
}

/// A count from the environment variable `name` (the long versions of the torture and
/// stress tests), or `default` when it is unset or not a number.
pub fn env_count(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Every key and value of `db`, at its latest state.
pub fn contents(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut it = db.iter().unwrap();
    it.seek_to_first().unwrap();
    let mut out = BTreeMap::new();
    while it.valid() {
        out.insert(it.key().to_vec(), it.value().to_vec());
        it.next().unwrap();
    }
    out
}

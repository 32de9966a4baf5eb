//! How tables are written ([`TableOptions`], [`Compression`]). Defined here, below the table
//! code, so that `Options` names them without importing `crate::sst`, which applies them.

/// Block compression.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Compression {
    /// Blocks are stored as they are.
    #[default]
    None,
    /// LZ4 (a block is stored compressed only when that saves at least an eighth).
    Lz4,
}

/// How tables are written.
#[derive(Clone, Copy, Debug)]
pub struct TableOptions {
    /// Target uncompressed size of a data block (with `block_records`: the most a block
    /// grows to).
    pub block_size: usize,
    /// Cut a data block once it holds this many entries and at least
    /// [`MIN_RECORD_BLOCK`] bytes (`None`: cut by `block_size` only). See
    /// [`crate::Options::block_records`].
    pub block_records: Option<usize>,
    /// Keys between restart points in a data block.
    pub restart_interval: usize,
    /// Bloom filter bits per key (0: no filter).
    pub bloom_bits_per_key: usize,
    /// A table whose records average fewer bytes than this (keys and values as added) is
    /// written without its filter (0: every table gets one). See [`LastLevelFilters`].
    pub filter_min_record_bytes: u64,
    /// Block compression.
    pub compression: Compression,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            block_size: 16 * 1024,
            block_records: None,
            restart_interval: 16,
            bloom_bits_per_key: 10,
            filter_min_record_bytes: 0,
            compression: Compression::None,
        }
    }
}

impl TableOptions {
    /// Whether a table of `entries` records holding `record_bytes` bytes of keys and values
    /// in all gets a filter.
    pub fn filters(&self, entries: u64, record_bytes: u64) -> bool {
        self.bloom_bits_per_key > 0
            && record_bytes >= entries.saturating_mul(self.filter_min_record_bytes)
    }
}

/// Bloom filters on the tables of the deepest level holding data. That level holds about
/// nine keys in ten, so its filters are most of the filter memory, yet a read that reaches
/// it for a key the store holds reads a data block anyway: only a lookup of a key stored
/// nowhere is saved a block read by them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LastLevelFilters {
    /// Per table, from its records: a filter when it costs at most 1% of the table's record
    /// bytes in memory (at 10 bits per key, records of 125 bytes and more). With F2's
    /// 108-byte records a filter would be 1.2% of the data, about an eighth of a budget of
    /// a tenth of it, and dropping it frees that memory for caching (docs/bench/f2.md);
    /// with 1 KiB records it is 0.12% and stays.
    #[default]
    Auto,
    /// On every table (a lookup of an absent key never reads the deepest level).
    Always,
    /// On none (RocksDB's `optimize_filters_for_hits`).
    Never,
}

impl LastLevelFilters {
    /// `Auto` keeps a filter costing at most 1/`AUTO_SHARE` of its table's record bytes.
    const AUTO_SHARE: u64 = 100;

    /// The `filter_min_record_bytes` the deepest level's tables get at `bits_per_key`.
    pub fn min_record_bytes(self, bits_per_key: usize) -> Option<u64> {
        match self {
            LastLevelFilters::Always => Some(0),
            LastLevelFilters::Never => None,
            LastLevelFilters::Auto => Some((bits_per_key as u64 * Self::AUTO_SHARE).div_ceil(8)),
        }
    }

    /// The name `FromStr` reads back.
    pub fn name(self) -> &'static str {
        match self {
            LastLevelFilters::Auto => "auto",
            LastLevelFilters::Always => "always",
            LastLevelFilters::Never => "never",
        }
    }
}

impl std::str::FromStr for LastLevelFilters {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(LastLevelFilters::Auto),
            "always" => Ok(LastLevelFilters::Always),
            "never" => Ok(LastLevelFilters::Never),
            _ => Err(format!(
                "unknown last-level filter rule {s:?} (auto, always or never)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Auto` keeps a filter costing at most 1% of the record bytes: at 10 bits per key
    /// (1.25 bytes) the line is 125-byte records; `Always` keeps every filter, `Never` none.
    #[test]
    fn the_last_level_rule_draws_its_line_at_one_percent() {
        assert_eq!(LastLevelFilters::Auto.min_record_bytes(10), Some(125));
        assert_eq!(LastLevelFilters::Auto.min_record_bytes(16), Some(200));
        assert_eq!(LastLevelFilters::Always.min_record_bytes(10), Some(0));
        assert_eq!(LastLevelFilters::Never.min_record_bytes(10), None);
        let o = TableOptions {
            filter_min_record_bytes: 125,
            ..TableOptions::default()
        };
        assert!(o.filters(1000, 125_000), "exactly on the line");
        assert!(!o.filters(1000, 124_999), "just under it");
        assert!(
            o.filters(0, 0),
            "an empty table's average is not under the line"
        );
        let none = TableOptions {
            bloom_bits_per_key: 0,
            ..TableOptions::default()
        };
        assert!(!none.filters(1, 1_000_000), "no bits, no filter");
        for rule in [
            LastLevelFilters::Auto,
            LastLevelFilters::Always,
            LastLevelFilters::Never,
        ] {
            assert_eq!(rule.name().parse::<LastLevelFilters>(), Ok(rule));
        }
        assert!("sometimes".parse::<LastLevelFilters>().is_err());
    }
}

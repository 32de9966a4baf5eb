//! What a compaction job is given and what it returns: the types every part of the job
//! (`job`, `merger`, `output`, `reuse`) shares, kept below them all.

use crate::env::{Env, IoCause};
use crate::key::SeqNo;
use crate::options::LastLevelFilters;
use crate::sst::{BlockWrites, TableOptions};
use crate::version::{FileMeta, TableCache, Version, VersionEdit};
use std::sync::Arc;

pub use super::routing::HotRouting;

/// What a finished job produced.
#[derive(Debug, Default)]
pub struct JobOutput {
    /// The edit to install: inputs deleted, outputs added.
    pub edit: VersionEdit,
    /// The single input was re-linked to the output level as it is (a trivial move),
    /// not rewritten.
    pub moved: bool,
    /// Bytes of input tables.
    pub bytes_read: u64,
    /// Bytes of output tables.
    pub bytes_written: u64,
    /// Entries dropped (shadowed versions and obsolete tombstones).
    pub entries_dropped: u64,
    /// Expired records rewritten as tombstones or dropped.
    pub expired_removed: u64,
    /// Key and value bytes kept on the last fast level by retention.
    pub retained_bytes: u64,
    /// Key and value bytes of promotion-cache records written to the last fast level.
    pub promoted_bytes: u64,
    /// Data blocks of the outputs: copied from an input as stored, or encoded anew.
    pub blocks: BlockWrites,
    /// Bytes of output tables written below the output level (preemptive pushdown; in
    /// `bytes_written` too).
    pub pushed_bytes: u64,
    /// A merge into semi-sorted tables: span reads of dirty blocks started, and times
    /// the merge waited for one to come back (fewer than the reads when reads ahead
    /// were in flight together).
    pub dirty_span_reads: u64,
    /// See `dirty_span_reads`.
    pub dirty_span_waits: u64,
    /// Microseconds the merge waited for dirty-block span reads, in all.
    pub dirty_span_wait_micros: u64,
    /// Of `dirty_span_waits`, those that may each last a whole device latency: waits for a
    /// span read started after the last such wait ended (the others wait out the rest of
    /// one). Counted, not timed.
    pub dirty_span_rounds: u64,
    /// The most dirty-block span reads in flight at once.
    pub dirty_spans_in_flight: usize,
}

/// Everything a job needs besides the compaction itself.
pub struct JobContext<'a> {
    /// The environment.
    pub env: &'a Arc<Env>,
    /// Open tables.
    pub tables: &'a Arc<TableCache>,
    /// Table format options.
    pub table_options: TableOptions,
    /// Format of semi-sorted tables (smaller data blocks: `Options::semi_table_options`;
    /// outputs drop the filter on the deepest level as sorted ones do:
    /// `JobContext::semi_table_options_for`).
    pub semi_table_options: TableOptions,
    /// Filters on tables written to the deepest level holding data
    /// (`Options::last_level_filters`).
    pub last_level_filters: LastLevelFilters,
    /// Split outputs at this size.
    pub target_file_size: u64,
    /// The oldest sequence number any live snapshot (or the latest state) reads at.
    pub smallest_snapshot: SeqNo,
    /// The version the compaction was picked from (to know what lies deeper).
    pub version: &'a Version,
    /// Allocates a file number.
    pub new_file_number: &'a (dyn Fn() -> u64 + Sync),
    /// Retention and promotion, for compactions from the last fast level into the slow tier.
    pub hot: Option<HotRouting<'a>>,
    /// The fast disk is full: write every output to the slow tier (a fast level's files may
    /// live there; the fast-tier budget is a soft limit).
    pub spill_to_slow: bool,
    /// Copy untouched data blocks verbatim (see the module comment).
    pub block_reuse: bool,
    /// Write the slow tier's levels as semi-sorted tables: a merge into them appends
    /// generations of new blocks and keeps clean blocks (`crate::SlowTierFormat`).
    pub semi_sorted: bool,
    /// The time of expiry for this job (`Options::clock`, read once at its start): a
    /// record whose deadline is at or before it has expired (`crate::expiry`).
    pub now: u64,
}

impl JobContext<'_> {
    /// The format of new sorted tables of `level`: on the deepest level holding data, the
    /// filter only where `last_level_filters` keeps it (most point reads end there, and they
    /// find their key: a filter only saves the read for keys stored nowhere).
    pub(super) fn table_options_for(&self, level: usize) -> TableOptions {
        self.last_level_filter_rule(self.table_options, level)
    }

    /// The format of semi-sorted generations written to `level` (new tables and appended
    /// generations): the same filter rule as sorted tables. Each generation rebuilds its
    /// filter from its key list, so a table appended to after data lands deeper gets one
    /// back.
    pub(super) fn semi_table_options_for(&self, level: usize) -> TableOptions {
        self.last_level_filter_rule(self.semi_table_options, level)
    }

    /// True when a table moved to `level` as it is would keep a filter that the level's
    /// rule leaves out of it ([`JobContext::table_options_for`], judged by the table's own
    /// records). Such a table is rewritten instead of moved, so that the rule holds for
    /// every table of the level (a moved table's filter would take table memory the rule
    /// means to save). Only such a move opens the table (a trivial move otherwise reads
    /// nothing); a table that cannot be opened is moved as it is, and its error reaches
    /// whoever reads it.
    pub(super) fn move_would_keep_a_filter(&self, table: &Arc<FileMeta>, level: usize) -> bool {
        let rule = self.table_options_for(level);
        let may_leave_out = rule.bloom_bits_per_key == 0 || rule.filter_min_record_bytes > 0;
        self.table_options.bloom_bits_per_key > 0
            && may_leave_out
            && self.tables.get(table, IoCause::Compaction).is_ok_and(|t| {
                let p = t.properties();
                t.filter_bytes() > 0
                    && !rule.filters(p.num_entries, p.raw_key_bytes + p.raw_value_bytes)
            })
    }

    fn last_level_filter_rule(&self, mut o: TableOptions, level: usize) -> TableOptions {
        let deepest = self
            .version
            .levels
            .get(level + 1..)
            .is_none_or(|ls| ls.iter().all(|l| l.is_empty()));
        if deepest {
            match self
                .last_level_filters
                .min_record_bytes(o.bloom_bits_per_key)
            {
                Some(min) => o.filter_min_record_bytes = min,
                None => o.bloom_bits_per_key = 0,
            }
        }
        o
    }
}

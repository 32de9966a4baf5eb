//! RALT's hot stage: the in-memory table where a flush merges the accesses of keys already
//! hot in a run, instead of writing them as new level-0 records.
//!
//! With a skewed workload the same hot keys are accessed in every buffer, so every flush
//! rewrote their records, and every L0 compaction merged those copies again: with 108-byte
//! records most of what RALT wrote after its admission stage (`admit`). A key hot in a run
//! is hot whatever its newer accesses add (a compaction keeps a key hot if any merged
//! record was, and only an eviction re-decides hot bits), so until the next eviction
//! nothing HotRAP decides reads the newer accesses. The stage merges them by the merge
//! rule, one entry per key, and its entries are written out as one sorted level-0 run
//! (`Ralt::write_stage`) before an eviction scans the scores, when the run files need the
//! memory the stage uses, and at close: every access still reaches the disk before a
//! decision reads it, only later and once per key.
//!
//! Its memory is bounded by `max_bytes` and, with a memory limit, by what the run files
//! leave free of their share, so the stage never makes RALT evict.

use super::score::{Meta, Scorer};
use std::collections::HashMap;

/// Approximate memory of one entry: the key's allocation (with the allocator's header),
/// the map's slot at its load factor of 7/8, and its control byte.
pub(crate) fn stage_cost(key_len: usize) -> u64 {
    let slot = std::mem::size_of::<(Box<[u8]>, Meta)>() + 1;
    (key_len + 16 + slot * 8 / 7) as u64
}

/// The hot stage.
#[derive(Default)]
pub(crate) struct Stage {
    entries: HashMap<Box<[u8]>, Meta>,
    bytes: u64,
    /// Records kept off the disk: flushed accesses merged into an entry, or an entry
    /// taking a key's first one (each would have been a record written at its flush).
    merged: u64,
}

impl Stage {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Memory held, by [`stage_cost`].
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn merged(&self) -> u64 {
        self.merged
    }

    /// Merges the flushed record `m` of `key` into its entry, or makes one if the stage
    /// then holds at most `max_bytes`. Returns false (nothing taken) when it is full: the
    /// record is written as before.
    pub fn absorb(&mut self, key: &[u8], m: &Meta, sc: &Scorer, max_bytes: u64) -> bool {
        if let Some(e) = self.entries.get_mut(key) {
            *e = sc.merge(e, m);
            self.merged += 1;
            return true;
        }
        let cost = stage_cost(key.len());
        if self.bytes + cost > max_bytes {
            return false;
        }
        self.entries.insert(key.into(), *m);
        self.bytes += cost;
        self.merged += 1;
        true
    }

    /// Empties the stage, returning its entries in key order.
    pub fn take_sorted(&mut self) -> Vec<(Box<[u8]>, Meta)> {
        let mut v: Vec<_> = std::mem::take(&mut self.entries).into_iter().collect();
        v.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        self.bytes = 0;
        v
    }
}

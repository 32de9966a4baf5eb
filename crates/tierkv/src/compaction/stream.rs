//! The one rule for dropping versions no reader can see, shared by the flush (a memtable
//! into an L0 table) and the compaction merge (as lsm-tree's `CompactionStream` serves
//! both): entries arrive in internal-key order (user key ascending, newest version first),
//! and a version is hidden when a newer version of its key is at or below the oldest
//! sequence number any snapshot (or the latest state) reads at. The newest version of each
//! key is never hidden, so a non-empty input never yields an empty output.
//!
//! A version that reaches the stream twice with the same sequence number (promotion copies
//! records with their numbers, so one merge can see a version from a promoted file and from
//! the slow tier) is hidden too. Tombstones that hide nothing are the compaction's own
//! decision: only it knows what lies deeper.
//!
//! Expiry is the stream's second rule: an expiring record whose deadline is at or before
//! the job's time is `expired`, and the caller writes it as a tombstone at the same
//! sequence number. That changes nothing any reader sees (an expired record already reads
//! as a deletion, at every snapshot, and stays expired), so it needs no snapshot check;
//! the tombstone then goes through the same rules as any other (the compaction drops it
//! where it hides nothing and every snapshot sees it, `Merger::dead_tombstone`), and the
//! versions below it through the shadowing rule above.

use crate::key::{make_internal_key, ParsedKey, SeqNo, ValueKind, MAX_SEQ};

/// The stream's verdict on one entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Step {
    /// The entry is the first (newest) version of its user key seen.
    pub new_user_key: bool,
    /// No reader can see it: drop it.
    pub hidden: bool,
    /// An expired record: write it as a tombstone ([`tombstone_for`]) if it is kept.
    pub expired: bool,
}

/// The tombstone an expired record is rewritten as: its user key and sequence number.
pub(crate) fn tombstone_for(k: &ParsedKey<'_>) -> Vec<u8> {
    make_internal_key(k.user_key, k.seq, ValueKind::Delete)
}

/// The state of the rule: the previous entry's user key and sequence number.
pub(crate) struct VersionStream {
    smallest_snapshot: SeqNo,
    /// The job's time of expiry (ms since the UNIX epoch).
    now: u64,
    last_user_key: Vec<u8>,
    has_last: bool,
    last_seq: SeqNo,
}

impl VersionStream {
    /// A stream for readers no older than `smallest_snapshot`, expiring records whose
    /// deadline is at or before `now`.
    pub fn new(smallest_snapshot: SeqNo, now: u64) -> Self {
        VersionStream {
            smallest_snapshot,
            now,
            last_user_key: Vec::new(),
            has_last: false,
            last_seq: MAX_SEQ,
        }
    }

    /// Whether an entry of kind `kind` with stored value `value` has expired.
    pub fn is_expired(&self, kind: ValueKind, value: &[u8]) -> bool {
        crate::expiry::stored_is_expired(kind, value, self.now)
    }

    /// Takes the next entry of the input (`value`: its stored value).
    pub fn step(&mut self, k: &ParsedKey<'_>, value: &[u8]) -> Step {
        let new_user_key = !self.has_last || k.user_key != self.last_user_key.as_slice();
        if new_user_key {
            self.last_user_key.clear();
            self.last_user_key.extend_from_slice(k.user_key);
            self.has_last = true;
            self.last_seq = MAX_SEQ;
        }
        // A newer version of this key is visible to every snapshot: this one is hidden.
        // (The first version of a key has none, whatever the bound: recovery flushes with
        // no reader at all.)
        let shadowed = !new_user_key && self.last_seq <= self.smallest_snapshot;
        let duplicate = !new_user_key && k.seq == self.last_seq;
        self.last_seq = k.seq;
        Step {
            new_user_key,
            hidden: shadowed || duplicate,
            expired: self.is_expired(k.kind, value),
        }
    }

    /// The input went on past entries the stream did not see (a block copied whole, whose
    /// user keys are all distinct): its last entry was `user_key` at `seq`.
    pub fn skipped_to(&mut self, user_key: &[u8], seq: SeqNo) {
        self.last_user_key.clear();
        self.last_user_key.extend_from_slice(user_key);
        self.has_last = true;
        self.last_seq = seq;
    }

    /// Forgets the previous entry (the input held one the caller could not parse).
    pub fn reset(&mut self) {
        self.has_last = false;
        self.last_seq = MAX_SEQ;
    }

    /// The user key of the last entry taken, if any.
    pub fn last_user_key(&self) -> Option<&[u8]> {
        self.has_last.then_some(self.last_user_key.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::ValueKind;

    fn key(user_key: &[u8], seq: SeqNo) -> ParsedKey<'_> {
        ParsedKey {
            user_key,
            seq,
            kind: ValueKind::Value,
        }
    }

    /// Invariant 1 (docs/DESIGN.md): the newest version of each key survives; an older one
    /// goes only when a newer one is visible to the oldest reader.
    #[test]
    fn hides_only_versions_every_reader_sees_past() {
        let mut s = VersionStream::new(10, 0);
        let steps: Vec<bool> = [
            key(b"a", 12),
            key(b"a", 11), // newer (12) is above the oldest reader: kept
            key(b"a", 9),  // newer (11) is above too: kept
            key(b"a", 5),  // newer (9) is visible to every reader: hidden
            key(b"b", 3),
            key(b"b", 2),
        ]
        .iter()
        .map(|k| s.step(k, b"").hidden)
        .collect();
        assert_eq!(steps, [false, false, false, true, false, true]);
    }

    /// The same version twice (a promoted copy and its original) is kept once.
    #[test]
    fn hides_a_repeated_version() {
        let mut s = VersionStream::new(0, 0);
        assert!(!s.step(&key(b"a", 7), b"").hidden);
        assert!(s.step(&key(b"a", 7), b"").hidden);
        s.skipped_to(b"c", 4);
        assert_eq!(s.last_user_key(), Some(&b"c"[..]));
        assert!(s.step(&key(b"c", 4), b"").hidden);
        assert!(s.step(&key(b"d", 4), b"").new_user_key);
    }

    /// An expiring record whose deadline is at or before the stream's time is expired
    /// whatever the snapshots (expiry is by time); one after it, or a plain value, is not.
    #[test]
    fn expired_records_are_flagged_by_time_alone() {
        let mut s = VersionStream::new(0, 1000);
        let k = |seq| ParsedKey {
            user_key: b"e",
            seq,
            kind: ValueKind::Expiring,
        };
        let at = crate::expiry::encode_expiring(1000, b"v");
        let later = crate::expiry::encode_expiring(1001, b"v");
        assert!(s.step(&k(9), &later).new_user_key);
        let step = s.step(&k(8), &at);
        assert!(
            step.expired && !step.hidden,
            "kept (a snapshot may read it), as a tombstone"
        );
        assert!(
            !s.step(&key(b"f", 3), &at).expired,
            "a plain value never expires"
        );
        assert_eq!(
            crate::key::parse_internal_key(&tombstone_for(&k(8))).map(|p| (p.seq, p.kind)),
            Some((8, ValueKind::Delete))
        );
    }

    /// With no reader at all (recovery's bound is the largest sequence number) every key
    /// still keeps its newest version.
    #[test]
    fn keeps_the_newest_version_under_any_bound() {
        let mut s = VersionStream::new(MAX_SEQ, 0);
        assert!(!s.step(&key(b"a", 3), b"").hidden);
        assert!(s.step(&key(b"a", 2), b"").hidden);
        assert!(!s.step(&key(b"b", MAX_SEQ), b"").hidden);
    }
}

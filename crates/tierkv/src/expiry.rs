//! Key expiry: the time source ([`Clock`]), the public record views that carry a deadline
//! ([`Entry`], [`EntryRef`]), and the one encoding of an expiring record's stored value
//! (`deadline: u64 LE ++ value`, kind [`ValueKind::Expiring`], docs/FORMAT.md).
//!
//! The rule every reader applies: a record whose deadline is `<= now` reads exactly as a
//! deletion at its sequence number (it hides older versions). Expiry is by time, not by
//! sequence number, and time only moves forward, so an expired record stays expired: a
//! flush or compaction may rewrite it as a tombstone at the same sequence number without
//! changing what any reader (any snapshot) sees. Where each path applies the rule:
//! `db::read` (point reads), `iter::user` (iterators), `compaction::stream` (flush and
//! compaction rewrite expired records), `db::promote` and `compaction::merger` (expired
//! records are never promoted nor retained).

use crate::key::ValueKind;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Bytes of the deadline prefix of an expiring record's stored value.
pub const DEADLINE_LEN: usize = 8;

/// Time source for expiry; milliseconds since the UNIX epoch.
///
/// It should not go backwards: a record that expired may already have been rewritten as a
/// tombstone by a flush or compaction, and stays absent if the clock is set back.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current time in milliseconds since the UNIX epoch.
    fn now_ms(&self) -> u64;
}

/// The system's wall clock (the default).
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        // A clock before 1970 reads as the epoch: nothing with a real deadline expires.
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis().min(u64::MAX as u128) as u64)
    }
}

/// A clock that moves only when told to: for tests of expiry.
#[derive(Debug, Default)]
pub struct ManualClock {
    now: AtomicU64,
}

impl ManualClock {
    /// A clock reading `ms`.
    pub fn new(ms: u64) -> Self {
        ManualClock {
            now: AtomicU64::new(ms),
        }
    }

    /// Sets the time to `ms`.
    pub fn set(&self, ms: u64) {
        self.now.store(ms, Ordering::SeqCst);
    }

    /// Moves the time forward by `ms` (saturating).
    pub fn advance(&self, ms: u64) {
        let _ = self
            .now
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| {
                Some(t.saturating_add(ms))
            });
    }

    /// The current time.
    pub fn now_ms(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        ManualClock::now_ms(self)
    }
}

/// A live record: its value and its deadline (`None`: it never expires).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The value.
    pub value: Vec<u8>,
    /// Milliseconds since the UNIX epoch at which the record expires, if it does.
    pub deadline: Option<u64>,
}

/// A borrowed view of a live record (what [`crate::Db::update_entry`] hands its closure).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryRef<'a> {
    /// The value.
    pub value: &'a [u8],
    /// Milliseconds since the UNIX epoch at which the record expires, if it does.
    pub deadline: Option<u64>,
}

/// The stored value of an expiring record: `deadline: u64 LE ++ value`.
pub fn encode_expiring(deadline: u64, value: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(DEADLINE_LEN + value.len());
    v.extend_from_slice(&deadline.to_le_bytes());
    v.extend_from_slice(value);
    v
}

/// Splits a stored value of kind `kind` into the user value and its deadline. `None` for an
/// expiring record shorter than its deadline (a corruption the caller reports with its
/// location). Values and tombstones are returned as they are, with no deadline.
pub fn split_stored(kind: ValueKind, stored: &[u8]) -> Option<(&[u8], Option<u64>)> {
    match kind {
        ValueKind::Expiring => {
            let (d, v) = stored.split_first_chunk::<DEADLINE_LEN>()?;
            Some((v, Some(u64::from_le_bytes(*d))))
        }
        ValueKind::Value | ValueKind::Delete => Some((stored, None)),
    }
}

/// True when a record with `deadline` reads as deleted at time `now`.
pub fn is_expired(deadline: Option<u64>, now: u64) -> bool {
    deadline.is_some_and(|d| d <= now)
}

/// True when a stored entry of `kind` is an expiring record expired at `now` (a malformed
/// one counts as live: the read path reports it).
pub fn stored_is_expired(kind: ValueKind, stored: &[u8], now: u64) -> bool {
    kind == ValueKind::Expiring
        && split_stored(kind, stored).is_some_and(|(_, d)| is_expired(d, now))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_round_trip_and_short_values_are_rejected() {
        let s = encode_expiring(1234, b"v");
        assert_eq!(
            split_stored(ValueKind::Expiring, &s),
            Some((&b"v"[..], Some(1234)))
        );
        assert_eq!(split_stored(ValueKind::Expiring, &s[..7]), None);
        assert_eq!(
            split_stored(ValueKind::Value, b"x"),
            Some((&b"x"[..], None))
        );
        assert!(stored_is_expired(ValueKind::Expiring, &s, 1234));
        assert!(!stored_is_expired(ValueKind::Expiring, &s, 1233));
        assert!(!stored_is_expired(ValueKind::Value, &s, u64::MAX));
    }

    #[test]
    fn manual_clock_moves_only_when_told() {
        let c = ManualClock::new(10);
        c.advance(5);
        assert_eq!(Clock::now_ms(&c), 15);
        c.set(3);
        assert_eq!(c.now_ms(), 3);
        c.advance(u64::MAX);
        assert_eq!(c.now_ms(), u64::MAX);
        assert!(SystemClock.now_ms() > 1_600_000_000_000);
    }
}

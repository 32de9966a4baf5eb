//! Turns a stream of internal versions into what a user sees at one snapshot: for each
//! user key its newest version at or below the snapshot, deletions hidden, within bounds
//! (LevelDB's DBIter). It owns visibility rules only, not where the versions come from.
//! An expiring record whose deadline has passed is a deletion here too (`crate::expiry`);
//! the time is read from the clock at each seek, so one pass sees one instant.
//!
//! A key rewritten many times has as many versions in a memtable (until it is flushed).
//! Stepping over them one by one would make every step past such a key cost as much as
//! its writes so far, so after [`MAX_SEQUENTIAL_SKIP`] versions of one key in a row the
//! iterator seeks past the rest (RocksDB's `max_sequential_skip_in_iterations`).

use super::InternalIterator;
use crate::expiry::{is_expired, split_stored};
use crate::key::{parse_internal_key, seek_key, ParsedKey, SeqNo, ValueKind, MAX_SEQ};
use crate::{
    error::{Error, Result},
    expiry::Clock,
};
use std::sync::Arc;

/// Versions of one user key stepped over in a row before a seek jumps over the rest.
const MAX_SEQUENTIAL_SKIP: usize = 8;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    /// The inner iterator is at the entry currently exposed.
    Forward,
    /// The inner iterator is just before every entry of the exposed user key.
    Reverse,
}

/// A user-level cursor at a snapshot over an internal iterator.
pub struct UserIterator<I> {
    inner: I,
    snapshot: SeqNo,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    direction: Direction,
    valid: bool,
    key: Vec<u8>,
    value: Vec<u8>,
    deadline: Option<u64>,
    /// Where the time of expiry comes from (none: only deadline 0 has passed), and the
    /// time read at the last seek.
    clock: Option<Arc<dyn Clock>>,
    now: u64,
}

fn malformed() -> Error {
    Error::corruption("(iterator)", 0, "malformed internal key")
}

impl<I: InternalIterator> UserIterator<I> {
    /// Reads `inner` at `snapshot`, limited to user keys in `[lower, upper)`.
    pub fn new(inner: I, snapshot: SeqNo, lower: Option<Vec<u8>>, upper: Option<Vec<u8>>) -> Self {
        UserIterator {
            inner,
            snapshot,
            lower,
            upper,
            direction: Direction::Forward,
            valid: false,
            key: Vec::new(),
            value: Vec::new(),
            deadline: None,
            clock: None,
            now: 0,
        }
    }

    /// Reads the time of expiry from `clock` (at each seek).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The current entry's deadline, if it expires. Requires `valid()`.
    pub fn deadline(&self) -> Option<u64> {
        self.deadline
    }

    fn refresh_time(&mut self) {
        if let Some(c) = &self.clock {
            self.now = c.now_ms();
        }
    }

    /// Whether the entry at the inner position is a live value (false: a deletion or an
    /// expired record), checked for a malformed expiring value.
    fn is_live(&self, p: &ParsedKey<'_>) -> Result<bool> {
        Ok(match p.kind {
            ValueKind::Delete => false,
            ValueKind::Value => true,
            ValueKind::Expiring => {
                let (_, d) = split_stored(p.kind, self.inner.value()).ok_or_else(|| {
                    Error::corruption("(iterator)", 0, "expiring value shorter than its deadline")
                })?;
                !is_expired(d, self.now)
            }
        })
    }

    /// Copies the (live) value at the inner position into `value` and `deadline`.
    fn take_value(&mut self, kind: ValueKind) {
        let stored = self.inner.value();
        // `is_live` already refused an expiring value too short for its deadline.
        let (v, d) = split_stored(kind, stored).unwrap_or((stored, None));
        self.value.clear();
        self.value.extend_from_slice(v);
        self.deadline = d;
    }

    /// True when positioned at a key.
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The current user key. Requires `valid()`.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The current value. Requires `valid()`.
    pub fn value(&self) -> &[u8] {
        &self.value
    }

    /// Positions at the first visible key.
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.refresh_time();
        match self.lower.clone() {
            Some(lower) => self.seek(&lower),
            None => self.guard(|s| {
                s.inner.seek_to_first()?;
                s.direction = Direction::Forward;
                s.find_next(None)
            }),
        }
    }

    /// Positions at the last visible key.
    pub fn seek_to_last(&mut self) -> Result<()> {
        self.refresh_time();
        self.guard(|s| {
            match s.upper.clone() {
                Some(upper) => s.position_before(&upper)?,
                None => s.inner.seek_to_last()?,
            }
            s.find_prev()
        })
    }

    /// Positions at the first visible key `>= target`.
    pub fn seek(&mut self, target: &[u8]) -> Result<()> {
        let target = match &self.lower {
            Some(lower) if lower.as_slice() > target => lower.clone(),
            _ => target.to_vec(),
        };
        self.refresh_time();
        self.guard(|s| {
            s.inner.seek(&seek_key(&target, s.snapshot))?;
            s.direction = Direction::Forward;
            s.find_next(None)
        })
    }

    /// Positions at the last visible key `<= target`.
    pub fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.refresh_time();
        self.guard(|s| {
            match s.upper.clone() {
                Some(upper) if target >= upper.as_slice() => s.position_before(&upper)?,
                _ => {
                    // Step past every version of `target` (seeking to its oldest possible
                    // one), then back onto the last one.
                    s.inner.seek(&seek_key(target, 0))?;
                    while s.inner.valid() && user_key_of(s.inner.key())? == target {
                        s.inner.next()?;
                    }
                    s.step_back()?;
                }
            }
            s.find_prev()
        })
    }

    /// Moves to the next visible key.
    // Fallible and positioned (not a std Iterator), like the cursor it wraps.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        self.guard(|s| {
            let current = std::mem::take(&mut s.key);
            if s.direction == Direction::Reverse {
                s.inner.seek(&seek_key(&current, MAX_SEQ))?;
                s.direction = Direction::Forward;
            }
            s.find_next(Some(&current))
        })
    }

    /// Moves to the previous visible key.
    pub fn prev(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        self.guard(|s| {
            if s.direction == Direction::Forward {
                let current = s.key.clone();
                s.position_before(&current)?;
            }
            s.find_prev()
        })
    }

    /// Runs a positioning step; any error leaves the iterator invalid.
    fn guard(&mut self, f: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        let r = f(self);
        if r.is_err() {
            self.valid = false;
        }
        r
    }

    /// Puts the inner iterator on the last entry whose user key is `< key`.
    fn position_before(&mut self, key: &[u8]) -> Result<()> {
        self.inner.seek(&seek_key(key, MAX_SEQ))?;
        self.step_back()
    }

    fn step_back(&mut self) -> Result<()> {
        if self.inner.valid() {
            self.inner.prev()
        } else {
            self.inner.seek_to_last()
        }
    }

    /// From the inner position forward: the first user key (other than `skip`) whose
    /// newest visible version is a value.
    fn find_next(&mut self, skip: Option<&[u8]>) -> Result<()> {
        let mut skip: Option<Vec<u8>> = skip.map(<[u8]>::to_vec);
        self.valid = false;
        // The user key of the entries stepped over just before, and how many in a row.
        let (mut run_key, mut run) = (Vec::new(), 0usize);
        while self.inner.valid() {
            let p = parse_internal_key(self.inner.key()).ok_or_else(malformed)?;
            if self.upper.as_deref().is_some_and(|u| p.user_key >= u) {
                return Ok(());
            }
            let hidden = p.seq > self.snapshot || skip.as_deref() == Some(p.user_key);
            if !hidden {
                if self.is_live(&p)? {
                    self.key.clear();
                    self.key.extend_from_slice(p.user_key);
                    let kind = p.kind;
                    self.take_value(kind);
                    self.valid = true;
                    return Ok(());
                }
                skip = Some(p.user_key.to_vec());
            }
            if p.user_key == run_key.as_slice() {
                run += 1;
            } else {
                run_key.clear();
                run_key.extend_from_slice(p.user_key);
                run = 1;
            }
            if run > MAX_SEQUENTIAL_SKIP {
                // Past the rest of this key's versions when it is skipped (a seek to its
                // oldest possible one), else (versions newer than the snapshot) to its
                // newest visible one.
                let to = match skip.as_deref() == Some(run_key.as_slice()) {
                    true => 0,
                    false => self.snapshot,
                };
                self.inner.seek(&seek_key(&run_key, to))?;
                run = 0;
                continue;
            }
            self.inner.next()?;
        }
        Ok(())
    }

    /// From the inner position backward: the nearest user key whose newest visible
    /// version is a value. Leaves the inner iterator before all of that key's entries.
    fn find_prev(&mut self) -> Result<()> {
        self.direction = Direction::Reverse;
        self.valid = false;
        // Versions of one user key arrive oldest first; the last visible one wins
        // (`Some(true)`: it is a live value).
        let mut saved: Option<bool> = None;
        // The user key of the entries stepped over just before, and how many in a row.
        let (mut run_key, mut run) = (Vec::new(), 0usize);
        while self.inner.valid() {
            let p = parse_internal_key(self.inner.key()).ok_or_else(malformed)?;
            if self.lower.as_deref().is_some_and(|l| p.user_key < l) {
                break;
            }
            if p.user_key == run_key.as_slice() {
                run += 1;
            } else {
                run_key.clear();
                run_key.extend_from_slice(p.user_key);
                run = 1;
            }
            if run > MAX_SEQUENTIAL_SKIP {
                // Many versions of one key: seek to its newest visible one (the one the
                // walk would end on), take it, and go on from before all its entries. A
                // key found already (greater) wins over this one, which then has no
                // visible version (the walk meets the oldest versions first and stops at
                // the first visible one of a smaller key).
                let uk = std::mem::take(&mut run_key);
                run = 0;
                let found = saved == Some(true) && uk.as_slice() < self.key.as_slice();
                if !found {
                    self.inner.seek(&seek_key(&uk, self.snapshot))?;
                    if self.inner.valid() {
                        let p = parse_internal_key(self.inner.key()).ok_or_else(malformed)?;
                        if p.user_key == uk.as_slice() {
                            let live = self.is_live(&p)?;
                            self.key.clear();
                            self.key.extend_from_slice(&uk);
                            self.value.clear();
                            self.deadline = None;
                            if live {
                                let kind = p.kind;
                                self.take_value(kind);
                            }
                            saved = Some(live);
                        }
                    }
                }
                self.position_before(&uk)?;
                continue;
            }
            if p.seq <= self.snapshot {
                if saved == Some(true) && p.user_key < self.key.as_slice() {
                    break;
                }
                let live = self.is_live(&p)?;
                self.key.clear();
                self.key.extend_from_slice(p.user_key);
                self.value.clear();
                self.deadline = None;
                if live {
                    let kind = p.kind;
                    self.take_value(kind);
                }
                saved = Some(live);
            }
            self.inner.prev()?;
        }
        self.valid = saved == Some(true);
        Ok(())
    }
}

fn user_key_of(ikey: &[u8]) -> Result<&[u8]> {
    parse_internal_key(ikey)
        .map(|p| p.user_key)
        .ok_or_else(malformed)
}

//! The internal iterator contract shared by memtables, blocks, tables, levels and the
//! merging iterator. Keys are internal keys (see [`crate::key`]) in [`compare_internal`]
//! order. Positioning calls return `Err` on I/O or corruption; after an error the iterator
//! is invalid. This module owns the trait and the generic iterators built on it: the
//! merging iterator (many sorted sources into one) and the user iterator (internal
//! versions into one visible value per user key at a snapshot).
//!
//! [`compare_internal`]: crate::key::compare_internal

use crate::error::Result;

mod merging;
mod user;

pub use merging::MergingIterator;
pub use user::UserIterator;

/// A bidirectional cursor over internal entries.
pub trait InternalIterator: Send {
    /// True when positioned at an entry.
    fn valid(&self) -> bool;
    /// Positions at the first entry.
    fn seek_to_first(&mut self) -> Result<()>;
    /// Positions at the last entry.
    fn seek_to_last(&mut self) -> Result<()>;
    /// Positions at the first entry whose internal key is `>= target`.
    fn seek(&mut self, target: &[u8]) -> Result<()>;
    /// Adds to `reads` the disk reads a `seek(target)` would start with, so that a caller
    /// seeking several iterators (the merging iterator) can issue them together, in
    /// flight at once, before seeking each: one round of latency instead of one per
    /// table. The seek then takes the bytes read for it (or reads them itself if a read
    /// failed, reporting the error). No data I/O; the default plans nothing.
    fn plan_seek(&mut self, _target: &[u8], _reads: &mut Vec<crate::env::RoundRead>) {}
    /// Advances. Requires `valid()`.
    fn next(&mut self) -> Result<()>;
    /// Steps back. Requires `valid()`.
    fn prev(&mut self) -> Result<()>;
    /// The current internal key. Requires `valid()`.
    fn key(&self) -> &[u8];
    /// The current value. Requires `valid()`.
    fn value(&self) -> &[u8];
}

impl<I: InternalIterator + ?Sized> InternalIterator for Box<I> {
    fn valid(&self) -> bool {
        (**self).valid()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        (**self).seek_to_first()
    }
    fn seek_to_last(&mut self) -> Result<()> {
        (**self).seek_to_last()
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        (**self).seek(target)
    }
    fn plan_seek(&mut self, target: &[u8], reads: &mut Vec<crate::env::RoundRead>) {
        (**self).plan_seek(target, reads)
    }
    fn next(&mut self) -> Result<()> {
        (**self).next()
    }
    fn prev(&mut self) -> Result<()> {
        (**self).prev()
    }
    fn key(&self) -> &[u8] {
        (**self).key()
    }
    fn value(&self) -> &[u8] {
        (**self).value()
    }
}

/// An iterator over a sorted in-memory vector of (internal key, value) pairs.
/// Used by tests and by small in-memory runs.
pub struct VecIterator {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    pos: usize,
}

impl VecIterator {
    /// `entries` must be sorted by [`crate::key::compare_internal`].
    pub fn new(entries: Vec<(Vec<u8>, Vec<u8>)>) -> Self {
        let pos = entries.len();
        VecIterator { entries, pos }
    }
}

impl InternalIterator for VecIterator {
    fn valid(&self) -> bool {
        self.pos < self.entries.len()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.pos = 0;
        Ok(())
    }
    fn seek_to_last(&mut self) -> Result<()> {
        self.pos = if self.entries.is_empty() {
            0
        } else {
            self.entries.len() - 1
        };
        Ok(())
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.pos = self
            .entries
            .partition_point(|(k, _)| crate::key::compare_internal(k, target).is_lt());
        Ok(())
    }
    fn next(&mut self) -> Result<()> {
        self.pos += 1;
        Ok(())
    }
    fn prev(&mut self) -> Result<()> {
        self.pos = if self.pos == 0 {
            self.entries.len()
        } else {
            self.pos - 1
        };
        Ok(())
    }
    fn key(&self) -> &[u8] {
        &self.entries[self.pos].0
    }
    fn value(&self) -> &[u8] {
        &self.entries[self.pos].1
    }
}

#[cfg(test)]
mod tests;

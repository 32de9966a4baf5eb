//! Merges sorted children into one sorted stream, in both directions (LevelDB's
//! MergingIterator). Children are scanned linearly: there are few (memtables, L0 files,
//! one per deeper level), so a heap would not pay for its bookkeeping on direction changes.

use super::InternalIterator;
use crate::error::Result;
use crate::key::compare_internal;
use std::cmp::Ordering;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// The union of several sorted iterators. On equal keys the child with the lower index
/// comes first, so callers list newer sources first.
pub struct MergingIterator {
    children: Vec<Box<dyn InternalIterator>>,
    current: Option<usize>,
    direction: Direction,
}

impl MergingIterator {
    /// Merges `children` (newest source first).
    pub fn new(children: Vec<Box<dyn InternalIterator>>) -> Self {
        MergingIterator {
            children,
            current: None,
            direction: Direction::Forward,
        }
    }

    fn find_smallest(&mut self) {
        let mut best: Option<usize> = None;
        for (i, c) in self.children.iter().enumerate() {
            if c.valid()
                && best.is_none_or(|b| {
                    compare_internal(c.key(), self.children[b].key()) == Ordering::Less
                })
            {
                best = Some(i);
            }
        }
        self.current = best;
    }

    fn find_largest(&mut self) {
        let mut best: Option<usize> = None;
        // Walk from the back: on ties the higher index wins, the exact reverse of forward order.
        for (i, c) in self.children.iter().enumerate().rev() {
            if c.valid()
                && best.is_none_or(|b| {
                    compare_internal(c.key(), self.children[b].key()) == Ordering::Greater
                })
            {
                best = Some(i);
            }
        }
        self.current = best;
    }

    fn invalidate_on_err<T>(&mut self, r: Result<T>) -> Result<T> {
        if r.is_err() {
            self.current = None;
        }
        r
    }
}

impl InternalIterator for MergingIterator {
    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        let r = self.children.iter_mut().try_for_each(|c| c.seek_to_first());
        self.invalidate_on_err(r)?;
        self.direction = Direction::Forward;
        self.find_smallest();
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        let r = self.children.iter_mut().try_for_each(|c| c.seek_to_last());
        self.invalidate_on_err(r)?;
        self.direction = Direction::Reverse;
        self.find_largest();
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let mut reads = Vec::new();
        for c in &mut self.children {
            c.plan_seek(target, &mut reads);
        }
        // One planned read gains nothing from a round: its seek reads it as before.
        if reads.len() > 1 {
            crate::env::read_round(&reads);
        }
        // The children take the bytes read (their own handles to them).
        drop(reads);
        let r = self.children.iter_mut().try_for_each(|c| c.seek(target));
        self.invalidate_on_err(r)?;
        self.direction = Direction::Forward;
        self.find_smallest();
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        let Some(cur) = self.current else {
            return Ok(());
        };
        if self.direction != Direction::Forward {
            // Every other child sits before the current key: move each to the first entry
            // after it, so all children are positioned at keys > current.
            let key = self.children[cur].key().to_vec();
            for i in 0..self.children.len() {
                if i == cur {
                    continue;
                }
                let c = &mut self.children[i];
                let r = c.seek(&key).and_then(|_| {
                    if c.valid() && compare_internal(c.key(), &key) == Ordering::Equal {
                        c.next()
                    } else {
                        Ok(())
                    }
                });
                self.invalidate_on_err(r)?;
            }
            self.direction = Direction::Forward;
        }
        let r = self.children[cur].next();
        self.invalidate_on_err(r)?;
        self.find_smallest();
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        let Some(cur) = self.current else {
            return Ok(());
        };
        if self.direction != Direction::Reverse {
            // Every other child sits after the current key: move each to the last entry
            // before it.
            let key = self.children[cur].key().to_vec();
            for i in 0..self.children.len() {
                if i == cur {
                    continue;
                }
                let c = &mut self.children[i];
                let r = c.seek(&key).and_then(|_| {
                    if c.valid() {
                        c.prev()
                    } else {
                        c.seek_to_last()
                    }
                });
                self.invalidate_on_err(r)?;
            }
            self.direction = Direction::Reverse;
        }
        let r = self.children[cur].prev();
        self.invalidate_on_err(r)?;
        self.find_largest();
        Ok(())
    }

    fn key(&self) -> &[u8] {
        self.current.map_or(&[], |c| self.children[c].key())
    }

    fn value(&self) -> &[u8] {
        self.current.map_or(&[], |c| self.children[c].value())
    }
}

//! Ghost caches (AC-Key §4.3): the metadata of recently evicted entries, so a later miss
//! on one of them tells which component "should have been larger". Owns the FIFO of
//! evicted keys, their virtual size (the bytes the entries took when real), and the memory
//! the ghost itself takes, which the shard charges to the budget.
//!
//! Point ghosts hold 4-byte key fingerprints (false positives only nudge a boundary);
//! the block ghost holds exact block handles (file number, offset). Each record keeps the
//! evicted entry's charge and efficiency E, so a ghost hit moves the boundary by k·E of the
//! entry that was evicted, as E-ARC says. Records are appended at the back; a hit or a
//! re-insert leaves a dead record behind (the index no longer names its position), and
//! dead records are dropped when they reach the front or when they outnumber live ones.

use hashbrown::HashTable;
use std::collections::VecDeque;

/// A key a ghost can hold.
pub(crate) trait GhostKey: Copy + Eq {
    /// Bytes one record of this ghost takes (ring slot plus index slot), charged to the
    /// budget.
    const CHARGE: usize;
    fn ghost_hash(&self) -> u64;
}

/// Point ghosts: the low 32 bits of the key's hash.
impl GhostKey for u32 {
    // Ring: 4 B fingerprint + 4 B charge + 4 B E; index: 4 B fingerprint + 4 B stamp at up
    // to 7/8 load, plus its control byte.
    const CHARGE: usize = 24;
    fn ghost_hash(&self) -> u64 {
        // Fingerprints are hash bits already; spread them over the table's 64 bits.
        (*self as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }
}

/// The block ghost: (file number, offset).
impl GhostKey for (u64, u64) {
    // Ring: 16 B handle + 8 B; index: 16 B handle + 4 B stamp (padded to 24) + control.
    const CHARGE: usize = 56;
    fn ghost_hash(&self) -> u64 {
        super::block_hash(self.0, self.1)
    }
}

/// One ghost cache.
pub(crate) struct Ghost<K: GhostKey> {
    /// Evicted records, oldest first; the record at position `i` has stamp `head + i`.
    ring: VecDeque<(K, u32, f32)>,
    /// Live records: key and stamp.
    index: HashTable<(K, u32)>,
    head: u32,
    /// Sum of the live records' charges (the ghost's virtual size).
    virt: usize,
}

impl<K: GhostKey> Default for Ghost<K> {
    fn default() -> Self {
        Ghost {
            ring: VecDeque::new(),
            index: HashTable::new(),
            head: 0,
            virt: 0,
        }
    }
}

impl<K: GhostKey> Ghost<K> {
    /// The virtual size: bytes the remembered entries took when they were real.
    pub fn virtual_size(&self) -> usize {
        self.virt
    }

    /// Live records.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Bytes the ghost's own records take (dead ring slots included).
    pub fn memory(&self) -> usize {
        self.ring.len() * K::CHARGE
    }

    /// Remembers an evicted entry with its charge and efficiency.
    pub fn insert(&mut self, key: K, charge: u32, e: f32) {
        self.take(&key);
        let stamp = self.head.wrapping_add(self.ring.len() as u32);
        self.ring.push_back((key, charge, e));
        self.index
            .insert_unique(key.ghost_hash(), (key, stamp), |(k, _)| k.ghost_hash());
        self.virt += charge as usize;
    }

    /// Forgets `key` if remembered; returns the evicted entry's (charge, E).
    pub fn take(&mut self, key: &K) -> Option<(u32, f32)> {
        let entry = self
            .index
            .find_entry(key.ghost_hash(), |(k, _)| k == key)
            .ok()?;
        let ((_, stamp), _) = entry.remove();
        let pos = stamp.wrapping_sub(self.head) as usize;
        let &(_, charge, e) = self.ring.get(pos)?;
        self.virt -= charge as usize;
        self.drop_dead_front();
        if self.ring.len() > 64 && self.ring.len() > 2 * self.index.len() {
            self.compact();
        }
        Some((charge, e))
    }

    /// Drops the oldest records until the virtual size is at most `limit`.
    pub fn trim(&mut self, limit: usize) {
        while self.virt > limit {
            let Some((key, charge, _)) = self.ring.pop_front() else {
                break;
            };
            let stamp = self.head;
            self.head = self.head.wrapping_add(1);
            if let Ok(entry) = self
                .index
                .find_entry(key.ghost_hash(), |(k, s)| *k == key && *s == stamp)
            {
                entry.remove();
                self.virt -= charge as usize;
            }
        }
        self.drop_dead_front();
    }

    /// Forgets everything and gives the memory back (ghost turn-off).
    pub fn clear(&mut self) {
        *self = Ghost::default();
    }

    fn is_live(&self, pos: usize) -> bool {
        let Some(&(key, _, _)) = self.ring.get(pos) else {
            return false;
        };
        let stamp = self.head.wrapping_add(pos as u32);
        self.index
            .find(key.ghost_hash(), |(k, s)| *k == key && *s == stamp)
            .is_some()
    }

    fn drop_dead_front(&mut self) {
        while !self.ring.is_empty() && !self.is_live(0) {
            self.ring.pop_front();
            self.head = self.head.wrapping_add(1);
        }
        if self.ring.is_empty() && self.ring.capacity() > 64 {
            self.ring = VecDeque::new();
        }
    }

    /// Rewrites the ring with live records only and renumbers them.
    fn compact(&mut self) {
        let live: VecDeque<(K, u32, f32)> = (0..self.ring.len())
            .filter(|&p| self.is_live(p))
            .map(|p| self.ring[p])
            .collect();
        self.ring = live;
        self.head = 0;
        self.index.clear();
        for (i, (key, _, _)) in self.ring.iter().enumerate() {
            self.index
                .insert_unique(key.ghost_hash(), (*key, i as u32), |(k, _)| k.ghost_hash());
        }
        self.ring.shrink_to_fit();
        self.index.shrink_to_fit(|(k, _)| k.ghost_hash());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_trims_oldest_first_and_forgets_hits() {
        let mut g: Ghost<u32> = Ghost::default();
        for k in 0..10u32 {
            g.insert(k, 100, k as f32);
        }
        assert_eq!((g.len(), g.virtual_size()), (10, 1000));
        assert_eq!(g.take(&3), Some((100, 3.0)));
        assert_eq!(g.take(&3), None);
        assert_eq!(g.virtual_size(), 900);
        // Trimming to 500 bytes drops the oldest live ones (0, 1, 2, 4).
        g.trim(500);
        assert_eq!(g.virtual_size(), 500);
        for k in [0, 1, 2, 4] {
            assert_eq!(g.take(&k), None, "{k}");
        }
        assert_eq!(g.take(&5), Some((100, 5.0)));
        // Re-inserting a key moves it to the back.
        g.insert(6, 50, 0.5);
        g.trim(100);
        assert_eq!(g.take(&6), Some((50, 0.5)));
        g.clear();
        assert_eq!((g.len(), g.virtual_size(), g.memory()), (0, 0, 0));
    }

    #[test]
    fn dead_records_do_not_pile_up() {
        let mut g: Ghost<(u64, u64)> = Ghost::default();
        for i in 0..10_000u64 {
            g.insert((1, i), 10, 1.0);
            if i >= 100 {
                assert!(g.take(&(1, i - 100)).is_some());
            }
        }
        assert_eq!(g.len(), 100);
        assert!(
            g.memory() <= 3 * 100 * <(u64, u64)>::CHARGE,
            "{}",
            g.memory()
        );
    }
}

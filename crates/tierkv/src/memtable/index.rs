//! A hash index from a memtable's user keys to their skiplist nodes, so that a point read
//! or an update of a key the memtable holds costs one probe instead of a search of the
//! list (a dozen or more dependent cache misses in a memtable of a few hundred thousand
//! keys), and a read of a key it does not hold stops at an empty slot.
//!
//! It owns the slots only: it knows a node as an address (a `usize`) and asks its caller,
//! the skiplist, whether an address holds a given key. Open addressing with linear
//! probing; each slot is one `AtomicU64`: the top 16 bits of the key's hash (a tag that
//! settles most mismatches without reading the node) above a 48-bit address, 0 when empty.
//! One writer at a time (the skiplist's insert lock), readers without locks: a slot is
//! written once, with a release store, after the node it names is complete. When the table
//! passes 80% full the writer builds one twice the size and swaps it in (`ArcSwap`: a
//! reader keeps the table it loaded, which holds every key whose insert finished before
//! the swap). An address that does not fit in 48 bits (no Linux address space of today
//! hands one out) turns the index off for good: [`KeyIndex::is_complete`] says so and the
//! skiplist searches instead.

use arc_swap::ArcSwap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// Bits of a slot that hold the address.
const ADDR_BITS: u32 = 48;
const ADDR_MASK: u64 = (1 << ADDR_BITS) - 1;
/// The fewest slots a table has.
const MIN_SLOTS: usize = 64;

/// One generation of slots.
struct Table {
    slots: Box<[AtomicU64]>,
    mask: usize,
}

impl Table {
    fn new(slots: usize) -> Table {
        let slots = slots.max(MIN_SLOTS).next_power_of_two();
        Table {
            slots: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            mask: slots - 1,
        }
    }

    /// Stores `entry` in the first empty slot of `hash`'s probe sequence (writer only).
    fn place(&self, hash: u64, entry: u64) {
        let mut i = hash as usize & self.mask;
        while self.slots[i].load(Ordering::Relaxed) != 0 {
            i = (i + 1) & self.mask;
        }
        self.slots[i].store(entry, Ordering::Release);
    }
}

/// See the module comment.
pub(super) struct KeyIndex {
    table: ArcSwap<Table>,
    /// Entries in the table (written by the writer only).
    len: AtomicUsize,
    complete: AtomicBool,
}

fn tag(hash: u64) -> u64 {
    hash >> ADDR_BITS
}

impl KeyIndex {
    /// An index sized for about `expected_keys` keys before its first growth.
    pub(super) fn with_capacity(expected_keys: usize) -> KeyIndex {
        KeyIndex {
            table: ArcSwap::from_pointee(Table::new(expected_keys.saturating_mul(5) / 4)),
            len: AtomicUsize::new(0),
            complete: AtomicBool::new(true),
        }
    }

    /// False once a key could not be indexed: lookups must then search the list.
    pub(super) fn is_complete(&self) -> bool {
        self.complete.load(Ordering::Acquire)
    }

    /// The address of the node whose key has this `hash` and for which `is_match` holds,
    /// if it is indexed.
    pub(super) fn find(&self, hash: u64, is_match: impl Fn(usize) -> bool) -> Option<usize> {
        let table = self.table.load();
        let mut i = hash as usize & table.mask;
        loop {
            let slot = table.slots[i].load(Ordering::Acquire);
            if slot == 0 {
                return None;
            }
            if slot >> ADDR_BITS == tag(hash) && is_match((slot & ADDR_MASK) as usize) {
                return Some((slot & ADDR_MASK) as usize);
            }
            i = (i + 1) & table.mask;
        }
    }

    /// Where the first slot of `hash`'s probe sequence lies, for a prefetch (the table may
    /// be replaced meanwhile: a prefetch of a freed slot is a wasted hint, never a read).
    pub(super) fn slot_address(&self, hash: u64) -> *const u8 {
        let table = self.table.load();
        table.slots[hash as usize & table.mask]
            .as_ptr()
            .cast_const()
            .cast()
    }

    /// The address in the first slot of `hash`'s probe sequence when its tag is `hash`'s:
    /// most likely the node of the key `hash` is of, unchecked (a prefetch's target).
    pub(super) fn candidate(&self, hash: u64) -> Option<usize> {
        let table = self.table.load();
        let slot = table.slots[hash as usize & table.mask].load(Ordering::Acquire);
        (slot != 0 && slot >> ADDR_BITS == tag(hash)).then_some((slot & ADDR_MASK) as usize)
    }

    /// Indexes a node not indexed yet: `addr`, whose key has this `hash`; false when the
    /// index is off (or this address turned it off). `hash_of` gives the hash of an indexed
    /// node's key, for a growth. The caller serializes inserts and makes the node complete
    /// before this call.
    pub(super) fn insert(&self, hash: u64, addr: usize, hash_of: impl Fn(usize) -> u64) -> bool {
        if !self.is_complete() {
            return false;
        }
        if addr as u64 > ADDR_MASK || addr == 0 {
            self.complete.store(false, Ordering::Release);
            return false;
        }
        let len = self.len.load(Ordering::Relaxed) + 1;
        let table = self.table.load_full();
        let table = if len * 5 > table.slots.len() * 4 {
            let grown = Table::new(table.slots.len() * 2);
            for slot in table.slots.iter() {
                let entry = slot.load(Ordering::Relaxed);
                if entry != 0 {
                    grown.place(hash_of((entry & ADDR_MASK) as usize), entry);
                }
            }
            let grown = std::sync::Arc::new(grown);
            self.table.store(grown.clone());
            grown
        } else {
            table
        };
        table.place(hash, tag(hash) << ADDR_BITS | addr as u64);
        self.len.store(len, Ordering::Relaxed);
        true
    }

    /// Bytes of the current table's slots.
    pub(super) fn memory(&self) -> usize {
        self.table.load().slots.len() * std::mem::size_of::<AtomicU64>()
    }

    /// Turns the index off, as an address past 48 bits would (for tests of the search
    /// fallback).
    #[cfg(test)]
    pub(super) fn disable(&self) {
        self.complete.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Invariant: every inserted address is found under its hash, across growths, also
    /// with hashes that collide in slot and tag; absent hashes are not found.
    #[test]
    fn finds_every_entry_across_growths() {
        let index = KeyIndex::with_capacity(0);
        let start = index.memory();
        // Addresses stand for nodes: entry n is at address 8 * (n + 1), and each four in a
        // row share one hash (slot and tag), so only `is_match` tells them apart.
        let hash_of =
            |addr: usize| (((addr / 8 - 1) / 4) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        for n in 0..5_000usize {
            let addr = 8 * (n + 1);
            assert!(index.insert(hash_of(addr), addr, hash_of));
        }
        assert!(index.memory() >= 5_000 * 5 / 4 * 8 && index.memory() > start);
        for n in 0..5_000usize {
            let addr = 8 * (n + 1);
            assert_eq!(index.find(hash_of(addr), |a| a == addr), Some(addr));
        }
        assert_eq!(index.find(0xdead_beef, |_| true), None);
        assert!(index.is_complete());
        index.disable();
        assert!(!index.is_complete());
    }

    /// An address that does not fit a slot turns the index off instead of being stored
    /// cut short (which would hand readers a wrong node).
    #[test]
    fn an_address_past_48_bits_turns_the_index_off() {
        let index = KeyIndex::with_capacity(16);
        assert!(index.insert(1, 64, |_| 1));
        assert!(index.is_complete());
        assert!(!index.insert(2, 1 << 50, |_| 2));
        assert!(!index.is_complete());
        assert!(!index.insert(3, 128, |_| 3));
    }
}

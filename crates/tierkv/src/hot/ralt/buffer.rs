//! The in-memory side of RALT: the access clock (time slice, counter period, bytes
//! accessed) and the unsorted buffer of recent accesses.
//!
//! The buffer is unsorted as in the paper (no ordering work on the caller's thread), but it
//! keeps one entry per key: a second access to a buffered key is merged into its entry by
//! the usual merge rule, so a buffer never holds duplicates and a key accessed again while
//! buffered is recognisable (the paper's "super hot" key). Entries are found through a
//! hash index keyed by the same xxh3 hash the bloom filters use; each entry keeps that hash
//! for the flush (its filter probes and the admission table), and the keys live in one
//! arena, so an access to a new key allocates nothing on the reader's thread once the
//! buffer is sized (every get records an access) and a flush frees one block, not one per
//! key.

use super::score::{Meta, Scorer};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// RALT's notion of time, advanced by every recorded access.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Clock {
    /// Current time slice t.
    pub tick: u64,
    /// Bytes accessed since the current time slice began.
    pub tick_acc: u64,
    /// Counter periods elapsed (each R accessed bytes).
    pub epoch: u64,
    /// Bytes accessed since the current counter period began.
    pub epoch_acc: u64,
    /// HotRAP bytes accessed in total (the LRU time).
    pub total: u64,
}

impl Clock {
    /// Accounts `bytes` of accessed data.
    pub fn advance(&mut self, bytes: u64, tick_bytes: u64, decay_bytes: u64) {
        self.total = self.total.wrapping_add(bytes);
        self.tick_acc += bytes;
        if self.tick_acc >= tick_bytes {
            self.tick += self.tick_acc / tick_bytes;
            self.tick_acc %= tick_bytes;
        }
        self.epoch_acc += bytes;
        if self.epoch_acc >= decay_bytes {
            self.epoch += self.epoch_acc / decay_bytes;
            self.epoch_acc %= decay_bytes;
        }
    }
}

/// The hash index already holds xxh3 hashes: pass them through.
#[derive(Default)]
pub(crate) struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ b as u64;
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

const NONE: u32 = u32::MAX;

/// A buffered key (its bytes are in the buffer's arena: [`Buffer::key`]).
#[derive(Clone, Debug)]
pub(crate) struct BufEntry {
    /// Offset in the arena: u32 suffices, a buffer's capacity is at most 1 GiB
    /// (`RaltOptions::validate`) and it freezes once past it. Entries stay the size they
    /// were with a boxed key, which the buffer's capacity is counted in.
    key_at: u32,
    key_len: u32,
    /// The key's `filter_hash`.
    pub hash: u64,
    pub meta: Meta,
    /// Accesses merged into this entry while buffered.
    pub count: u32,
    /// Next entry with the same hash.
    next: u32,
}

/// Approximate memory of one entry: the key, the entry and its index slot.
pub(crate) fn entry_cost(key_len: usize) -> usize {
    key_len + std::mem::size_of::<BufEntry>() + 24
}

/// `e`'s key in `keys`, the arena of `e`'s buffer.
fn key_in<'a>(keys: &'a [u8], e: &BufEntry) -> &'a [u8] {
    &keys[e.key_at as usize..][..e.key_len as usize]
}

/// The unsorted buffer.
pub(crate) struct Buffer {
    entries: Vec<BufEntry>,
    /// Every entry's key, end to end.
    keys: Vec<u8>,
    index: HashMap<u64, u32, BuildHasherDefault<PassThrough>>,
    bytes: usize,
    key_bytes: usize,
    /// Accesses that make a buffered key hot (see [`Buffer::is_hot`]).
    hot_count: u32,
}

impl Default for Buffer {
    fn default() -> Buffer {
        Buffer::with_capacity(0, 1, 1)
    }
}

impl Buffer {
    /// An empty buffer sized for `bytes` of entries of `key_len`-byte keys, so filling it
    /// does not reallocate on the foreground's path. `scale` is how many times the
    /// starting buffer size it is (see [`Buffer::is_hot`]).
    pub fn with_capacity(bytes: usize, key_len: usize, scale: u32) -> Buffer {
        let n = bytes / entry_cost(key_len.max(1)) + 1;
        Buffer {
            entries: Vec::with_capacity(n),
            keys: Vec::with_capacity(n.saturating_mul(key_len)),
            index: HashMap::with_capacity_and_hasher(n, Default::default()),
            bytes: 0,
            key_bytes: 0,
            hot_count: 2 * scale.max(1),
        }
    }

    /// A key accessed again while its record is still buffered counts as hot at once
    /// (the paper's "super hot" key); a single buffered access alone never does. A buffer
    /// `scale` times the starting size stays open about that many times longer, so a key
    /// needs `2 * scale` accesses in it: the same access rate as two in a starting buffer.
    pub fn is_hot(&self, e: &BufEntry) -> bool {
        e.count >= self.hot_count
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Memory held, by [`entry_cost`].
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Total length of the buffered keys.
    pub fn key_bytes(&self) -> usize {
        self.key_bytes
    }

    pub fn entries(&self) -> &[BufEntry] {
        &self.entries
    }

    /// The key of `e`, an entry of this buffer.
    pub fn key(&self, e: &BufEntry) -> &[u8] {
        key_in(&self.keys, e)
    }

    /// The entry of `key` (whose filter hash is `hash`).
    pub fn get(&self, hash: u64, key: &[u8]) -> Option<&BufEntry> {
        let mut i = *self.index.get(&hash)?;
        while i != NONE {
            let e = self.entries.get(i as usize)?;
            if self.key(e) == key {
                return Some(e);
            }
            i = e.next;
        }
        None
    }

    /// Merges an access into the key's entry; returns false if the key has none.
    pub fn merge_access(&mut self, hash: u64, key: &[u8], access: &Meta, sc: &Scorer) -> bool {
        let Some(&first) = self.index.get(&hash) else {
            return false;
        };
        let mut i = first;
        while i != NONE {
            let Some(e) = self.entries.get_mut(i as usize) else {
                return false;
            };
            if key_in(&self.keys, e) == key {
                e.meta = sc.merge(&e.meta, access);
                e.count = e.count.saturating_add(1);
                return true;
            }
            i = e.next;
        }
        false
    }

    /// Adds a key that has no entry yet; `earlier` buffered accesses (in the frozen
    /// buffer) count towards its "accessed again while buffered" state.
    pub fn insert(&mut self, hash: u64, key: &[u8], access: Meta, earlier: u32) {
        let idx = self.entries.len() as u32;
        let next = match self.index.insert(hash, idx) {
            Some(prev) => prev,
            None => NONE,
        };
        self.entries.push(BufEntry {
            key_at: self.keys.len() as u32,
            key_len: key.len() as u32,
            hash,
            meta: access,
            count: earlier.saturating_add(1),
            next,
        });
        self.keys.extend_from_slice(key);
        self.bytes += entry_cost(key.len());
        self.key_bytes += key.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::ScoringMethod;

    fn meta(value_len: u32) -> Meta {
        Meta {
            value_len,
            tick: 0,
            score: 1.0,
            epoch: 0,
            counter: 0,
            tag: false,
        }
    }

    /// Keys live in one arena and entries are found by hash, then by the key's bytes
    /// there: keys of 0 to 40 bytes that all share one hash (a chain through every entry),
    /// including keys that are prefixes of each other, are each found and merged into
    /// their own entry, and the arena holds each key exactly once.
    #[test]
    fn keys_sharing_a_hash_resolve_by_their_bytes_in_the_arena() {
        let sc = Scorer::new(ScoringMethod::ExpSmoothing, 0.999, 1.0);
        let mut b = Buffer::with_capacity(4096, 8, 1);
        let keys: Vec<Vec<u8>> = (0..=40usize).map(|n| vec![b'k'; n]).collect();
        for (i, k) in keys.iter().enumerate() {
            assert!(!b.merge_access(7, k, &meta(i as u32), &sc));
            b.insert(7, k, meta(i as u32), 0);
        }
        for (i, k) in keys.iter().enumerate().rev() {
            assert!(b.merge_access(7, k, &meta(i as u32), &sc));
        }
        assert_eq!(b.len(), keys.len());
        assert_eq!(b.key_bytes(), (0..=40).sum::<usize>());
        for (i, k) in keys.iter().enumerate() {
            let e = b.get(7, k).expect("each key is found");
            assert_eq!((b.key(e), e.hash, e.count), (&k[..], 7, 2));
            assert_eq!(e.meta.value_len, i as u32);
        }
        assert!(b.get(7, b"x").is_none());
        assert!(b.get(8, b"k").is_none());
    }
}

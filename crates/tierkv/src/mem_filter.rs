//! A concurrent, insert-only Bloom filter over user keys, for in-memory tables that many
//! lookups miss (the promotion cache's tables: most point reads search them and find
//! nothing; the memtables have their hash index instead). A negative answer skips a
//! search, a dozen dependent cache misses for a table of ten thousand entries, for one
//! cache line read.
//!
//! Blocked: a key's probes all fall in one 64-byte line (8 words), chosen by a remix of the
//! key's [`filter_hash`](crate::sst::filter::filter_hash); the probe bits are the hash's low
//! 54 bits, 9 per probe. Sized once, at creation, from the number of keys the table is
//! expected to hold; more keys only raise the false-positive rate. Owns the bits only: which
//! table a filter guards, and when to ask it, is the table's business.
//!
//! Ordering: a writer sets a key's bits (release) before it makes the key visible, and a
//! reader that is allowed to see the key learned of it through an acquire (the sequence
//! number's publication or a lock) after those bits were set, so a filter never denies a
//! key its reader may see.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bits per expected key: with 6 probes in one cache line, about 1% false positives.
const BITS_PER_KEY: usize = 10;
/// Probes per key.
const PROBES: u32 = 6;
/// Words per block (one 64-byte cache line).
const BLOCK_WORDS: usize = 8;

/// See the module comment.
pub struct MemFilter {
    words: Box<[AtomicU64]>,
    /// Number of blocks (`words.len() / BLOCK_WORDS`), at least 1.
    blocks: u64,
}

impl MemFilter {
    /// A filter for about `expected_keys` keys.
    pub fn with_capacity(expected_keys: usize) -> Self {
        let blocks = (expected_keys.saturating_mul(BITS_PER_KEY) / (BLOCK_WORDS * 64)).max(1);
        MemFilter {
            words: (0..blocks * BLOCK_WORDS)
                .map(|_| AtomicU64::new(0))
                .collect(),
            blocks: blocks as u64,
        }
    }

    /// Bytes of memory the bits take.
    pub fn memory(&self) -> usize {
        self.words.len() * 8
    }

    /// Records the key whose filter hash is `hash`. Call it before the key becomes visible.
    pub fn insert(&self, hash: u64) {
        let base = self.block_base(hash);
        let mut masks = [0u64; BLOCK_WORDS];
        for (word, bit) in probes(hash) {
            masks[word] |= 1 << bit;
        }
        for (i, mask) in masks.into_iter().enumerate() {
            if mask != 0 {
                self.words[base + i].fetch_or(mask, Ordering::Release);
            }
        }
    }

    /// False only when no key with this hash was inserted.
    pub fn may_contain(&self, hash: u64) -> bool {
        let base = self.block_base(hash);
        probes(hash)
            .all(|(word, bit)| self.words[base + word].load(Ordering::Acquire) & (1 << bit) != 0)
    }

    fn block_base(&self, hash: u64) -> usize {
        // A remix, so that the block does not correlate with the probe bits; multiply-shift
        // maps its high half onto [0, blocks) without a division.
        let mixed = hash.rotate_left(23).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32;
        ((mixed * self.blocks) >> 32) as usize * BLOCK_WORDS
    }
}

/// The (word in block, bit in word) pairs of a hash: 9 bits each (3 + 6) from its low 54
/// bits (probes may repeat; that only wastes one of them).
fn probes(hash: u64) -> impl Iterator<Item = (usize, u32)> {
    (0..PROBES).map(move |i| {
        let p = (hash >> (i * 9)) & 0x1ff;
        ((p >> 6) as usize, (p & 63) as u32)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sst::filter::filter_hash;

    fn key(i: u32) -> Vec<u8> {
        format!("key{i:08}").into_bytes()
    }

    /// Invariant: a filter never denies a key inserted into it (no false negatives), at,
    /// below and far above its expected key count.
    #[test]
    fn never_denies_an_inserted_key() {
        for (capacity, n) in [(0, 50), (1_000, 1_000), (1_000, 20_000)] {
            let f = MemFilter::with_capacity(capacity);
            for i in 0..n {
                f.insert(filter_hash(&key(i)));
            }
            for i in 0..n {
                assert!(f.may_contain(filter_hash(&key(i))), "key {i} of {n}");
            }
        }
    }

    /// The false-positive rate at the expected key count stays near the design's 1%
    /// (a filter that answered true for everything, or probed one bit, fails this).
    #[test]
    fn false_positive_rate_near_one_percent() {
        let f = MemFilter::with_capacity(10_000);
        for i in 0..10_000 {
            f.insert(filter_hash(&key(i)));
        }
        let fp = (1_000_000..1_100_000)
            .filter(|&i| f.may_contain(filter_hash(&key(i))))
            .count();
        assert!(fp < 2_500, "{fp} false positives in 100,000");
        assert_eq!(f.memory(), 10_000 * BITS_PER_KEY / 512 * 64);
    }

    /// Inserts from several threads are all kept (the bits are set atomically, not
    /// read-modify-written).
    #[test]
    fn concurrent_inserts_are_all_kept() {
        let f = MemFilter::with_capacity(40_000);
        std::thread::scope(|s| {
            for t in 0..4u32 {
                let f = &f;
                s.spawn(move || {
                    for i in 0..10_000 {
                        f.insert(filter_hash(&key(t * 10_000 + i)));
                    }
                });
            }
        });
        assert!((0..40_000).all(|i| f.may_contain(filter_hash(&key(i)))));
    }
}

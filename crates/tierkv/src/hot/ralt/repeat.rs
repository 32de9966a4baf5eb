//! The repeat stage: keys whose read from the slow tier was judged for promotion lately, so
//! that the next slow-tier read of one of them within a window counts as a repeat (see
//! `PromotionOptions::promote_on_repeat`). RALT's scores see an access only once its
//! buffer is written, and by then a hot key has usually been read several more times from
//! the slow disk; a second slow read within about the hot set's worth of slow reads is
//! already strong evidence: a key of a hotspot is read again well within it, a key of a
//! uniform workload rarely (with probability window / keys).
//!
//! The window is exact, first in first out: a key is remembered for the next `window`
//! keys judged. (A direct-mapped table, which forgets a key after a random number of
//! later keys, kept a hotspot key's first read until its second about as often only with
//! twice the slots, and twice the false repeats under a uniform workload.) A key is
//! remembered by a 32-bit fingerprint of its filter hash; the stage holds nothing RALT's
//! scores use and is never persisted.

use std::collections::{HashMap, VecDeque};

/// Fewest and most keys in the window (the most hold about 5 MiB); a memory cap may
/// lower the window below the fewest.
const MIN_WINDOW: usize = 1 << 10;
const MAX_WINDOW: usize = 1 << 18;
/// Most memory per remembered key, for the cap: its fingerprint in the queue and its map
/// entry (key, count and control byte), each at up to twice the space they fill.
const MAX_BYTES_PER_KEY: u64 = 2 * (4 + 9);

/// The repeat stage's window.
#[derive(Default)]
pub(crate) struct Repeats {
    /// Fingerprints in the order they were remembered.
    order: VecDeque<u32>,
    /// Fingerprint -> its copies in `order`.
    present: HashMap<u32, u32>,
    window: usize,
    /// Key plus value bytes and count of the reads judged, for the mean record size.
    bytes: u64,
    reads: u64,
    /// Reads that were repeats.
    hits: u64,
}

impl Repeats {
    /// Reads judged.
    pub fn reads(&self) -> u64 {
        self.reads
    }

    /// Reads that were repeats.
    pub fn hits(&self) -> u64 {
        self.hits
    }

    /// Memory held, from the collections' capacities.
    pub fn bytes(&self) -> u64 {
        (self.order.capacity() * 4 + self.present.capacity() * 9) as u64
    }

    /// Sizes the window to `window_bytes` (key plus value bytes) of keys at the mean
    /// record size judged so far (1 KiB before any), within `max_memory` bytes.
    pub fn fit(&mut self, window_bytes: u64, max_memory: u64) {
        let mean = self.bytes.checked_div(self.reads).unwrap_or(1024).max(1);
        let cap = usize::try_from(max_memory / MAX_BYTES_PER_KEY).unwrap_or(MAX_WINDOW);
        let window = usize::try_from(window_bytes / mean)
            .unwrap_or(MAX_WINDOW)
            .clamp(MIN_WINDOW, MAX_WINDOW)
            .min(cap);
        let shrunk = window * 2 < self.window;
        self.window = window;
        self.trim();
        if shrunk {
            self.order.shrink_to_fit();
            self.present.shrink_to_fit();
        }
    }

    /// True if the key whose filter hash is `hash` was judged within the window (it stays
    /// remembered: a record judged again after waiting for company keeps its verdict);
    /// otherwise remembers it. `size` is its key plus value bytes.
    pub fn seen_again(&mut self, hash: u64, size: u64) -> bool {
        self.bytes += size;
        self.reads += 1;
        let fp = (hash >> 32) as u32;
        if self.present.contains_key(&fp) {
            self.hits += 1;
            return true;
        }
        self.order.push_back(fp);
        *self.present.entry(fp).or_default() += 1;
        self.trim();
        false
    }

    fn trim(&mut self) {
        while self.order.len() > self.window {
            let Some(fp) = self.order.pop_front() else {
                break;
            };
            if let Some(n) = self.present.get_mut(&fp) {
                *n -= 1;
                if *n == 0 {
                    self.present.remove(&fp);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sst::filter::filter_hash;

    fn h(i: u64) -> u64 {
        filter_hash(&i.to_le_bytes())
    }

    /// A key judged again within the window is a repeat, one judged once is not, and the
    /// window counts keys: the key judged `window` keys ago is still remembered, the one
    /// before it is forgotten. The window is the given bytes at the mean record size.
    #[test]
    fn a_second_read_within_the_window_is_a_repeat() {
        let mut r = Repeats::default();
        r.fit(4 << 20, u64::MAX);
        assert_eq!(r.window, 4096, "4 MiB of 1 KiB records before any read");
        assert!(!r.seen_again(h(1), 1024));
        assert!(!r.seen_again(h(2), 1024));
        assert!(r.seen_again(h(1), 1024));
        assert!(r.seen_again(h(1), 1024), "stays remembered");
        assert_eq!((r.reads(), r.hits()), (4, 2));
        for i in 100..100 + 4094 {
            assert!(!r.seen_again(h(i), 1024));
        }
        // Keys 1, 2 and 100.. fill the window exactly: 1 is the oldest.
        assert!(r.seen_again(h(1), 1024));
        assert!(!r.seen_again(h(5000), 1024));
        assert!(!r.seen_again(h(1), 1024), "pushed out by one more key");
        assert!(r.bytes() <= 4096 * MAX_BYTES_PER_KEY);
        // Smaller records: the same window holds more keys.
        let mut small = Repeats::default();
        small.fit(4 << 20, u64::MAX);
        for i in 0..2000 {
            small.seen_again(h(i), 128);
        }
        small.fit(4 << 20, u64::MAX);
        assert_eq!(small.window, 32768);
        assert_eq!(small.order.len(), 2000);
        small.fit(64 << 10, u64::MAX);
        assert_eq!(
            small.window, MIN_WINDOW,
            "512 keys, raised to the least window"
        );
        assert_eq!(
            small.order.len(),
            MIN_WINDOW,
            "shrinking forgets the oldest"
        );
        assert!(small.seen_again(h(1999), 128) && !small.seen_again(h(0), 128));
        // A memory cap lowers the window below the fewest keys, and the memory held.
        small.fit(4 << 20, 26_000);
        assert_eq!(small.window, 1000);
        assert!(small.bytes() <= 26_000, "{}", small.bytes());
    }
}

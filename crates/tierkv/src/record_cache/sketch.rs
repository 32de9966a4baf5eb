//! How often each key was read from the slow disk lately: a count-min sketch of small
//! counters that halves every counter once it has counted a window's worth of reads
//! (TinyLFU's frequency sketch, Einziger et al.). Owns nothing but its counters; the
//! record cache asks it whether a key has been read often enough to be admitted.

/// Rows of the sketch: each key has one counter per row, its estimate is the smallest.
const ROWS: usize = 4;
/// A counter stops at this (4 bits' worth, as TinyLFU's): admission only asks "at least
/// a few times", and small ceilings make the halving forget old popularity quickly.
const MAX_COUNT: u8 = 15;

/// A count-min sketch with periodic halving.
pub(crate) struct Sketch {
    counters: Vec<u8>,
    /// `width - 1`; the width of a row is a power of two.
    mask: u64,
    /// Reads counted since the last halving, and how many make a window.
    counted: u64,
    window: u64,
}

impl Sketch {
    /// A sketch sized for about `keys` distinct keys in its window, which is ten times
    /// that many reads (TinyLFU's sample size for a cache of `keys` entries).
    pub(crate) fn new(keys: usize) -> Sketch {
        let width = keys.clamp(1 << 10, 1 << 24).next_power_of_two();
        Sketch {
            counters: vec![0; width * ROWS],
            mask: width as u64 - 1,
            counted: 0,
            window: 10 * keys.max(1) as u64,
        }
    }

    /// Bytes of memory the counters take.
    pub(crate) fn memory_usage(&self) -> usize {
        self.counters.len()
    }

    /// The counter of `hash` in `row`: each row mixes the hash with its own odd constant,
    /// so that two keys sharing one row's counter rarely share another's.
    fn slot(&self, hash: u64, row: usize) -> usize {
        const SEEDS: [u64; ROWS] = [
            0x9e37_79b9_7f4a_7c15,
            0xc2b2_ae3d_27d4_eb4f,
            0x1656_67b1_9e37_79f9,
            0x85eb_ca77_c2b2_ae63,
        ];
        let h = hash.wrapping_mul(SEEDS[row]);
        let column = (h >> 32 ^ h) & self.mask;
        row * (self.mask as usize + 1) + column as usize
    }

    /// The key's estimated count.
    pub(crate) fn estimate(&self, hash: u64) -> u8 {
        (0..ROWS)
            .map(|r| self.counters[self.slot(hash, r)])
            .min()
            .unwrap_or(0)
    }

    /// Counts one read of the key and returns its estimate, this read included. Only the
    /// smallest of its counters grow (conservative update), which keeps estimates of rare
    /// keys from riding on popular ones that share a counter.
    pub(crate) fn increment(&mut self, hash: u64) -> u8 {
        let slots: [usize; ROWS] = std::array::from_fn(|r| self.slot(hash, r));
        let least = slots.iter().map(|&s| self.counters[s]).min().unwrap_or(0);
        if least < MAX_COUNT {
            for &s in &slots {
                if self.counters[s] == least {
                    self.counters[s] += 1;
                }
            }
        }
        self.counted += 1;
        if self.counted >= self.window {
            self.halve();
        }
        (least + 1).min(MAX_COUNT)
    }

    /// Ages every count by half: what was popular a window ago counts half as much.
    fn halve(&mut self) {
        for c in &mut self.counters {
            *c >>= 1;
        }
        self.counted = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Admission's input: a key read n times (n small) is estimated at n, never less
    /// (count-min never undercounts within a window).
    #[test]
    fn counts_each_read_and_never_undercounts() {
        let mut s = Sketch::new(1_000);
        for key in 0..500u64 {
            let h = crate::cache::key_hash(&key.to_le_bytes());
            for n in 1..=3u8 {
                assert!(s.increment(h) >= n);
            }
        }
        for key in 0..500u64 {
            assert!(s.estimate(crate::cache::key_hash(&key.to_le_bytes())) >= 3);
        }
        let unseen = crate::cache::key_hash(b"never read");
        assert!(
            s.estimate(unseen) <= 1,
            "a fresh sketch of 500 keys barely collides"
        );
    }

    /// Popularity fades: after a window of other reads a key's count has halved.
    #[test]
    fn a_window_of_other_reads_halves_old_counts() {
        let mut s = Sketch::new(100);
        let h = crate::cache::key_hash(b"once popular");
        for _ in 0..12 {
            s.increment(h);
        }
        assert_eq!(s.estimate(h), 12);
        for key in 0..1_000u64 {
            s.increment(crate::cache::key_hash(&key.to_le_bytes()));
        }
        assert!(s.estimate(h) <= 7, "estimate {}", s.estimate(h));
    }
}

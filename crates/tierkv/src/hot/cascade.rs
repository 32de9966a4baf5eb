//! HyperDB's hotness tracker (ICPP'24 §3.3): a cascade of bloom filters, a cheap
//! alternative to RALT kept for comparison.
//!
//! Every access is inserted into the *open* filter. An insert that sets at least one bit is
//! a new object of the window (the filter counts what it holds by noticing modified bits);
//! once the open filter holds one window of objects (the number of records the fast tier
//! holds) it is *sealed*. At most `filters` (4) sealed filters are kept, oldest dropped
//! first. A key is hot when at least `hot_threshold` (3) sealed filters contain it: it was
//! accessed in 3 of the last 4 windows, i.e. its access interval stayed below the fast
//! tier's capacity. The open filter does not vote (as in the paper), so nothing is hot
//! before 3 windows were sealed.
//!
//! Memory: `bits_per_object` (10) bits per object of each filter, at most `filters + 1`
//! filters, about 6.3 bytes per object the fast tier holds; no disk I/O at all. The state
//! is in memory only: after a reopen the tracker starts cold (RALT persists).
//!
//! What it cannot do: enumerate hot keys (a filter only answers membership), and size the
//! hot part of a key range. For the latter it keeps a bounded sample of keys found hot when
//! accessed (exact while the hot set fits the sample, scaled up otherwise); see
//! [`BloomCascade::range_hot_sizer`].

use crate::error::Result;
pub use crate::options::BloomCascadeOptions;
use crate::sst::filter::filter_hash;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};

/// One bloom filter sized for a window of objects.
struct Filter {
    bits: Vec<u64>,
    nbits: u64,
    probes: u32,
    /// Objects inserted (inserts that set at least one bit).
    objects: u64,
    /// Objects at which the filter is sealed.
    capacity: u64,
}

impl Filter {
    fn new(capacity: u64, bits_per_object: usize) -> Filter {
        let nbits = (capacity.saturating_mul(bits_per_object as u64)).max(64);
        let words = nbits.div_ceil(64);
        Filter {
            bits: vec![0; words as usize],
            nbits: words * 64,
            // k = bits * ln 2 minimises the false-positive rate.
            probes: ((bits_per_object as f64 * 0.69) as u32).clamp(1, 30),
            objects: 0,
            capacity,
        }
    }

    /// Probe positions by double hashing (as the table filters do).
    fn positions(nbits: u64, probes: u32, hash: u64) -> impl Iterator<Item = u64> {
        let delta = hash.rotate_left(32) | 1;
        (0..probes as u64).map(move |i| hash.wrapping_add(i.wrapping_mul(delta)) % nbits)
    }

    /// Inserts; true when a bit changed (a new object, up to false positives).
    fn insert(&mut self, hash: u64) -> bool {
        let mut changed = false;
        for bit in Self::positions(self.nbits, self.probes, hash) {
            let (w, b) = ((bit / 64) as usize, bit % 64);
            changed |= self.bits[w] & (1 << b) == 0;
            self.bits[w] |= 1 << b;
        }
        if changed {
            self.objects += 1;
        }
        changed
    }

    fn contains(&self, hash: u64) -> bool {
        Self::positions(self.nbits, self.probes, hash)
            .all(|bit| self.bits[(bit / 64) as usize] & (1 << (bit % 64)) != 0)
    }

    fn memory(&self) -> u64 {
        self.bits.len() as u64 * 8
    }
}

/// A bounded sample of keys found hot when accessed, for range estimates. Reservoir
/// sampling over hot-key admissions keeps it uniform once it overflows.
#[derive(Default)]
struct HotSample {
    keys: Vec<(Vec<u8>, u32, u64)>,
    index: HashMap<Vec<u8>, usize>,
    /// Distinct hot keys admitted since the last aging (>= `keys.len()`).
    admitted: u64,
    rng: u64,
}

impl HotSample {
    fn next_random(&mut self) -> u64 {
        // xorshift64*: statistics only, never correctness.
        let mut x = self.rng.max(1);
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn note(&mut self, key: &[u8], value_len: u32, window: u64, cap: usize) {
        if let Some(&i) = self.index.get(key) {
            self.keys[i].1 = value_len;
            self.keys[i].2 = window;
            return;
        }
        if cap == 0 {
            return;
        }
        self.admitted += 1;
        if self.keys.len() < cap {
            self.index.insert(key.to_vec(), self.keys.len());
            self.keys.push((key.to_vec(), value_len, window));
            return;
        }
        let r = self.next_random() % self.admitted;
        if (r as usize) < cap {
            let i = r as usize;
            let old = std::mem::replace(&mut self.keys[i], (key.to_vec(), value_len, window));
            self.index.remove(&old.0);
            self.index.insert(key.to_vec(), i);
        }
    }

    /// Drops keys not seen hot since window `oldest`.
    fn age(&mut self, oldest: u64) {
        self.keys.retain(|(_, _, w)| *w >= oldest);
        self.index = self
            .keys
            .iter()
            .enumerate()
            .map(|(i, (k, _, _))| (k.clone(), i))
            .collect();
        // The scale restarts from what is left: an approximation, like the sample itself.
        self.admitted = self.keys.len() as u64;
    }

    fn memory(&self) -> u64 {
        self.keys
            .iter()
            .map(|(k, _, _)| 2 * k.len() as u64 + 64)
            .sum()
    }
}

struct State {
    open: Filter,
    sealed: VecDeque<Filter>,
    seals: u64,
    accesses: u64,
    accessed_bytes: u64,
    sample: HotSample,
}

/// The tracker. `Send + Sync`: one short mutex guards the filters.
pub struct BloomCascade {
    opts: BloomCascadeOptions,
    state: Mutex<State>,
}

/// A snapshot of the tracker's state.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct BloomCascadeStats {
    /// Objects a window holds (the open filter's capacity).
    pub window_objects: u64,
    /// Objects in the open filter so far.
    pub open_objects: u64,
    /// Sealed filters held.
    pub sealed_filters: u64,
    /// Windows sealed since open.
    pub seals: u64,
    /// Accesses recorded.
    pub accesses: u64,
    /// Keys in the hot sample.
    pub sample_keys: u64,
    /// Estimated HotRAP bytes (key plus value) of the hot set, from the sample.
    pub hot_set_size: u64,
    /// Memory of the filters and the sample.
    pub memory_bytes: u64,
}

/// Answers `range_hot_size` from one snapshot of the hot sample.
pub struct BloomRangeSizer {
    keys: Vec<Vec<u8>>,
    prefix: Vec<u64>,
    scale: f64,
}

impl BloomRangeSizer {
    /// Estimated bytes (key plus value) of hot keys in `[lo, hi]`.
    pub fn range_hot_size(&self, lo: &[u8], hi: &[u8]) -> u64 {
        if lo > hi {
            return 0;
        }
        let from = self.keys.partition_point(|k| k.as_slice() < lo);
        let to = self.keys.partition_point(|k| k.as_slice() <= hi);
        ((self.prefix[to] - self.prefix[from]) as f64 * self.scale) as u64
    }
}

impl BloomCascade {
    /// A fresh tracker (nothing is hot until `hot_threshold` windows were sealed).
    pub fn new(opts: BloomCascadeOptions) -> Result<BloomCascade> {
        opts.validate()?;
        let capacity = Self::window(&opts, 0, 0);
        Ok(BloomCascade {
            state: Mutex::new(State {
                open: Filter::new(capacity, opts.bits_per_object),
                sealed: VecDeque::new(),
                seals: 0,
                accesses: 0,
                accessed_bytes: 0,
                sample: HotSample {
                    rng: 0x9e37_79b9_7f4a_7c15,
                    ..Default::default()
                },
            }),
            opts,
        })
    }

    /// Objects of the next window: given, or the fast tier's bytes over the mean record
    /// size seen so far.
    fn window(opts: &BloomCascadeOptions, accesses: u64, bytes: u64) -> u64 {
        if let Some(w) = opts.window_objects {
            return w;
        }
        let mean = bytes
            .checked_div(accesses)
            .map_or(opts.initial_record_size, |m| m.max(1));
        (opts.fd_bytes / mean).max(64)
    }

    /// Records an access to `key` whose value is `value_len` bytes: inserts it into the
    /// open filter, sealing it when it holds a window of objects. No I/O.
    pub fn record_access(&self, key: &[u8], value_len: u32) {
        let hash = filter_hash(key);
        let mut st = self.state.lock();
        st.accesses += 1;
        st.accessed_bytes += key.len() as u64 + value_len as u64;
        st.open.insert(hash);
        if st.open.objects >= st.open.capacity {
            let capacity = Self::window(&self.opts, st.accesses, st.accessed_bytes);
            let full = std::mem::replace(
                &mut st.open,
                Filter::new(capacity, self.opts.bits_per_object),
            );
            st.sealed.push_back(full);
            while st.sealed.len() > self.opts.filters {
                st.sealed.pop_front();
            }
            st.seals += 1;
            let oldest = st.seals.saturating_sub(self.opts.filters as u64);
            st.sample.age(oldest);
        }
        if self.hot_in(&st, hash) {
            let (window, cap) = (st.seals, self.opts.sample_keys);
            st.sample.note(key, value_len, window, cap);
        }
    }

    fn hot_in(&self, st: &State, hash: u64) -> bool {
        let votes = st.sealed.iter().filter(|f| f.contains(hash)).count();
        votes >= self.opts.hot_threshold
    }

    /// True if at least `hot_threshold` sealed filters contain `key`.
    pub fn is_hot(&self, key: &[u8]) -> bool {
        let hash = filter_hash(key);
        let st = self.state.lock();
        self.hot_in(&st, hash)
    }

    /// A snapshot of the hot sample for many `range_hot_size` questions: the estimate of a
    /// range is the bytes of sampled hot keys in it, times (hot keys admitted / sample
    /// size) when the sample overflowed. Keys that stopped being accessed leave the sample
    /// once they are out of every sealed window.
    pub fn range_hot_sizer(&self) -> BloomRangeSizer {
        let st = self.state.lock();
        let mut keys: Vec<(Vec<u8>, u64)> = st
            .sample
            .keys
            .iter()
            .map(|(k, v, _)| (k.clone(), k.len() as u64 + *v as u64))
            .collect();
        let scale = if keys.is_empty() {
            1.0
        } else {
            (st.sample.admitted as f64 / keys.len() as f64).max(1.0)
        };
        drop(st);
        keys.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut prefix = Vec::with_capacity(keys.len() + 1);
        prefix.push(0u64);
        for (_, size) in &keys {
            prefix.push(prefix.last().copied().unwrap_or(0) + size);
        }
        BloomRangeSizer {
            keys: keys.into_iter().map(|(k, _)| k).collect(),
            prefix,
            scale,
        }
    }

    /// Sizes and counters.
    pub fn stats(&self) -> BloomCascadeStats {
        let sizer = self.range_hot_sizer();
        let hot = *sizer.prefix.last().unwrap_or(&0) as f64 * sizer.scale;
        let st = self.state.lock();
        BloomCascadeStats {
            window_objects: st.open.capacity,
            open_objects: st.open.objects,
            sealed_filters: st.sealed.len() as u64,
            seals: st.seals,
            accesses: st.accesses,
            sample_keys: st.sample.keys.len() as u64,
            hot_set_size: hot as u64,
            memory_bytes: st.open.memory()
                + st.sealed.iter().map(Filter::memory).sum::<u64>()
                + st.sample.memory(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracker(window: u64) -> BloomCascade {
        BloomCascade::new(BloomCascadeOptions {
            window_objects: Some(window),
            ..Default::default()
        })
        .unwrap()
    }

    fn key(i: u64) -> Vec<u8> {
        format!("key{i:08}").into_bytes()
    }

    /// Accesses fresh cold keys until the open window seals.
    fn finish_window(t: &BloomCascade, next: &mut u64) {
        let seals = t.stats().seals;
        while t.stats().seals == seals {
            t.record_access(&key(*next), 100);
            *next += 1;
        }
    }

    #[test]
    fn windows_seal_after_their_object_count_and_repeats_do_not_count() {
        let t = tracker(100);
        for _ in 0..10 {
            t.record_access(b"same", 10);
        }
        let s = t.stats();
        assert_eq!((s.open_objects, s.seals), (1, 0));
        let mut next = 0;
        finish_window(&t, &mut next);
        // 99 more objects, plus the rare key whose bits were all set already (a false
        // positive adds no object).
        assert!((99..103).contains(&next), "{next}");
        let s = t.stats();
        assert_eq!((s.seals, s.sealed_filters, s.open_objects), (1, 1, 0));
        // At most 4 sealed filters: the oldest goes first.
        for _ in 0..6 {
            finish_window(&t, &mut next);
        }
        let s = t.stats();
        assert_eq!((s.seals, s.sealed_filters), (7, 4));
        assert_eq!(s.accesses, 10 + next);
    }

    #[test]
    fn hot_needs_three_of_four_windows() {
        let t = tracker(200);
        // (Filters have about 0.7% false positives: a fixed key whose hash happens to hit a
        // window it was not in would make this test fail deterministically.)
        let hot = b"hot".to_vec();
        let mut next = 0;
        // Windows 1 and 2 contain the key: not hot yet (2 votes).
        for _ in 0..2 {
            t.record_access(&hot, 100);
            finish_window(&t, &mut next);
        }
        assert_eq!(t.stats().seals, 2);
        assert!(!t.is_hot(&hot), "2 sealed windows are not enough");
        // Window 3 without the key: still 2 of 3.
        finish_window(&t, &mut next);
        assert!(!t.is_hot(&hot));
        // Window 4 with it: 3 of 4.
        t.record_access(&hot, 100);
        assert!(!t.is_hot(&hot), "the open filter does not vote");
        finish_window(&t, &mut next);
        assert_eq!(t.stats().seals, 4);
        assert!(t.is_hot(&hot));
        // Window 5 without it drops window 1: 2 of 4 again.
        finish_window(&t, &mut next);
        assert!(!t.is_hot(&hot));
        // Keys seen once are hot only by a triple false positive.
        let cold_hot = (0..next).filter(|&i| t.is_hot(&key(i))).count();
        assert!(cold_hot < 3, "{cold_hot} false positives");
    }

    #[test]
    fn window_follows_the_fast_tier_and_the_record_size() {
        let t = BloomCascade::new(BloomCascadeOptions {
            fd_bytes: 1 << 20,
            ..Default::default()
        })
        .unwrap();
        // 1 MiB of 1 KiB records before anything was seen.
        assert_eq!(t.stats().window_objects, 1024);
        let mut i = 0;
        while t.stats().seals == 0 {
            t.record_access(&key(i), 500);
            i += 1;
        }
        // 1024 objects (plus the few keys whose bits were all set already).
        assert!((1024..1040).contains(&i), "{i}");
        // The next window uses the mean size seen (11 + 500 bytes).
        assert_eq!(t.stats().window_objects, (1 << 20) / 511);
        // About 10 bits per object per filter.
        let s = t.stats();
        assert!(s.memory_bytes < 2 * 1024 * 10 / 8 + 4096, "{s:?}");
    }

    #[test]
    fn range_estimate_counts_sampled_hot_keys() {
        let t = tracker(100);
        // Keys 0..10 are accessed in every window; the rest once.
        let mut next = 1000;
        for _ in 0..5 {
            for i in 0..10 {
                t.record_access(&key(i), 88);
            }
            finish_window(&t, &mut next);
        }
        for i in 0..10 {
            assert!(t.is_hot(&key(i)));
            t.record_access(&key(i), 88);
        }
        let sizer = t.range_hot_sizer();
        // 11-byte keys + 88-byte values.
        assert_eq!(sizer.range_hot_size(&key(0), &key(9)), 10 * 99);
        assert_eq!(sizer.range_hot_size(&key(0), &key(4)), 5 * 99);
        assert_eq!(sizer.range_hot_size(&key(100), &key(200)), 0);
        assert_eq!(sizer.range_hot_size(&key(5), &key(1)), 0);
        assert_eq!(t.stats().hot_set_size, 10 * 99);
    }

    #[test]
    fn bad_options_are_refused() {
        for o in [
            BloomCascadeOptions {
                hot_threshold: 5,
                ..Default::default()
            },
            BloomCascadeOptions {
                bits_per_object: 0,
                ..Default::default()
            },
            BloomCascadeOptions {
                window_objects: Some(0),
                ..Default::default()
            },
        ] {
            assert!(BloomCascade::new(o).is_err());
        }
    }
}

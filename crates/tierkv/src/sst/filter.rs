//! Bloom filters: one per table over its user keys, and one per RALT run over its hot keys.
//!
//! Layout: `bits: ceil(n * bits_per_key / 8) bytes | num_probes: u8`. Probes use double
//! hashing over a 64-bit xxh3 hash (Kirsch-Mitzenmacher), so a filter of any size keeps the
//! false-positive rate its bits per key promise. A filter whose probe count byte is above
//! 30 is treated as "may contain everything": a newer encoding never causes a false negative.
//! Owns the filter encoding and probing only; where filters are stored is the caller's.

use xxhash_rust::xxh3::xxh3_64;

/// Hash of a key as the filter uses it. Callers that probe several filters with one key
/// compute it once.
pub fn filter_hash(key: &[u8]) -> u64 {
    xxh3_64(key)
}

/// Collects key hashes and encodes a filter.
#[derive(Debug, Default, Clone)]
pub struct BloomBuilder {
    bits_per_key: usize,
    hashes: Vec<u64>,
}

impl BloomBuilder {
    /// A builder; `bits_per_key` 0 builds empty filters.
    pub fn new(bits_per_key: usize) -> Self {
        BloomBuilder {
            bits_per_key,
            hashes: Vec::new(),
        }
    }

    /// Adds a key.
    pub fn add_key(&mut self, key: &[u8]) {
        self.hashes.push(filter_hash(key));
    }

    /// Adds a key by its [`filter_hash`].
    pub fn add_hash(&mut self, hash: u64) {
        self.hashes.push(hash);
    }

    /// Keys added so far.
    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    /// True when no key was added.
    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// Encodes the filter and resets the builder.
    pub fn finish(&mut self) -> Vec<u8> {
        let hashes = std::mem::take(&mut self.hashes);
        encode(&hashes, self.bits_per_key)
    }
}

fn num_probes(bits_per_key: usize) -> u8 {
    // k = bits_per_key * ln 2 minimises the false-positive rate.
    ((bits_per_key as f64 * 0.69) as usize).clamp(1, 30) as u8
}

fn encode(hashes: &[u64], bits_per_key: usize) -> Vec<u8> {
    let k = num_probes(bits_per_key);
    // Tiny filters have a high false-positive rate: use at least 64 bits.
    let nbits = (hashes.len() * bits_per_key).max(64);
    let nbytes = nbits.div_ceil(8);
    let nbits = (nbytes * 8) as u64;
    let mut out = vec![0u8; nbytes + 1];
    for &h in hashes {
        let (mut pos, delta) = probe_start(h);
        for _ in 0..k {
            let bit = pos % nbits;
            out[(bit / 8) as usize] |= 1 << (bit % 8);
            pos = pos.wrapping_add(delta);
        }
    }
    out[nbytes] = k;
    out
}

fn probe_start(h: u64) -> (u64, u64) {
    // Odd delta, so consecutive probes never repeat before wrapping the whole filter.
    (h, h.rotate_left(32) | 1)
}

/// True if the encoded filter may contain the key whose [`filter_hash`] is `hash`. A
/// malformed (empty) filter answers true: filters only ever save reads.
pub fn may_contain_hash(filter: &[u8], hash: u64) -> bool {
    let Some((&k, bits)) = filter.split_last() else {
        return true;
    };
    if k > 30 || bits.is_empty() {
        return true;
    }
    let nbits = (bits.len() * 8) as u64;
    let (mut pos, delta) = probe_start(hash);
    for _ in 0..k {
        let bit = pos % nbits;
        if bits[(bit / 8) as usize] & (1 << (bit % 8)) == 0 {
            return false;
        }
        pos = pos.wrapping_add(delta);
    }
    true
}

/// True if the encoded filter may contain `key`.
pub fn may_contain(filter: &[u8], key: &[u8]) -> bool {
    may_contain_hash(filter, filter_hash(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u32) -> Vec<u8> {
        format!("key{i:08}").into_bytes()
    }

    #[test]
    fn no_false_negatives_and_low_false_positives() {
        for (bits, max_fpr) in [(10, 0.02), (20, 0.0005)] {
            let mut b = BloomBuilder::new(bits);
            for i in 0..10_000 {
                b.add_key(&key(i));
            }
            let f = b.finish();
            for i in 0..10_000 {
                assert!(may_contain(&f, &key(i)), "false negative for {i}");
            }
            let fp = (10_000..110_000)
                .filter(|&i| may_contain(&f, &key(i)))
                .count();
            let fpr = fp as f64 / 100_000.0;
            assert!(fpr <= max_fpr, "{bits} bits/key: fpr {fpr}");
        }
    }

    #[test]
    fn empty_and_unknown_filters_match_everything() {
        assert!(may_contain(&[], b"x"));
        assert!(may_contain(&[0, 0, 0, 0, 0, 0, 0, 0, 31], b"x"));
        let f = BloomBuilder::new(10).finish();
        assert!(!may_contain(&f, b"x"), "an empty key set contains nothing");
    }
}

//! RALT's admission stage: the in-memory table of keys whose one access was not written.
//!
//! A buffered key seen once, and not hot in any run, is not flushed: its access goes here
//! instead (a hash fingerprint with the access's time slice and counter period, 8 bytes).
//! When the key is seen again while its entry survives, the flush credits that earlier
//! access by the merge rule and writes the key's record, so a key's score on disk lags by
//! at most the one access waiting here. A key seen only once in the table's window never
//! reaches the disk. That is HotRAP's own judgement of such keys: auto-tuning evicts
//! unstable records (never hit again while tracked) before any other, so a single access
//! lived on disk only until the next eviction, about `unstable_window` HotRAP bytes (one
//! fast disk) of new keys later.
//! The table covers at least that window (see [`Admission::target_slots`]); with 108-byte
//! records most tracked keys were such single accesses, and every one was written,
//! compacted and evicted again.
//!
//! The table is direct-mapped and lossy: a newer key's access overwrites an older one in
//! its slot, so the oldest single accesses are forgotten first and memory is fixed.

use super::score::{Meta, ScoreKind, Scorer};

/// Bits of a slot holding the fingerprint; the rest hold the low bits of the time slice
/// and the counter period (their differences from now are exact below 2^24 and 2^16).
const FP_BITS: u32 = 24;
const TICK_BITS: u32 = 24;
const EPOCH_BITS: u32 = 16;
const FP_MASK: u64 = (1 << FP_BITS) - 1;
const TICK_MASK: u64 = (1 << TICK_BITS) - 1;
const EPOCH_MASK: u64 = (1 << EPOCH_BITS) - 1;

/// Smallest table: below this a window is too short to catch any repeat.
pub(crate) const MIN_SLOTS: usize = 1024;

/// The admission table. Slot 0 means empty (fingerprints are never 0).
#[derive(Default)]
pub(crate) struct Admission {
    slots: Vec<u64>,
    /// Accesses parked here instead of written (counted once each).
    parked: u64,
    /// Parked accesses credited to a later record of their key.
    credited: u64,
}

impl Admission {
    /// Slots for a window of `keys` distinct single-access keys, bounded by `max_bytes`
    /// of memory: four times the window (a direct-mapped table keeps a key's entry through
    /// `slots` later insertions with probability 1/e), a power of two.
    pub fn target_slots(keys: u64, max_bytes: u64) -> usize {
        let most = (max_bytes / 8).max(MIN_SLOTS as u64);
        let want = keys.saturating_mul(4).clamp(MIN_SLOTS as u64, most);
        // Round down to a power of two so the bound holds.
        let p = 1u64 << (63 - want.leading_zeros());
        usize::try_from(p).unwrap_or(MIN_SLOTS)
    }

    /// Number of slots.
    #[cfg(test)]
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// Resizes to `slots` when it differs by at least twofold (entries are dropped: the
    /// fingerprint does not hold the bits a new slot index needs).
    pub fn resize(&mut self, slots: usize) {
        let cur = self.slots.len();
        if cur == 0 || slots >= cur * 2 || slots * 2 <= cur {
            self.slots = vec![0; slots.max(1)];
        }
    }

    /// Memory held.
    pub fn bytes(&self) -> u64 {
        (self.slots.len() * 8) as u64
    }

    pub fn parked(&self) -> u64 {
        self.parked
    }

    pub fn credited(&self) -> u64 {
        self.credited
    }

    fn place(&self, hash: u64) -> (usize, u64) {
        let n = self.slots.len().max(1) as u64;
        let fp = ((hash >> (64 - FP_BITS)) & FP_MASK).max(1);
        ((hash % n) as usize, fp)
    }

    /// Parks the single access `m` of the key whose filter hash is `hash`.
    pub fn park(&mut self, hash: u64, m: &Meta) {
        if self.slots.is_empty() {
            return;
        }
        let (i, fp) = self.place(hash);
        self.slots[i] = fp << (TICK_BITS + EPOCH_BITS)
            | (m.tick & TICK_MASK) << EPOCH_BITS
            | (m.epoch & EPOCH_MASK);
        self.parked += 1;
    }

    /// Takes the parked access of `hash`'s key, if its entry survives, and returns `m`
    /// with that earlier access merged in (the merge rule, as if both had been written).
    pub fn take_merged(&mut self, hash: u64, m: &Meta, sc: &Scorer) -> Option<Meta> {
        if self.slots.is_empty() {
            return None;
        }
        let (i, fp) = self.place(hash);
        let s = self.slots[i];
        if s >> (TICK_BITS + EPOCH_BITS) != fp {
            return None;
        }
        self.slots[i] = 0;
        self.credited += 1;
        // Reconstruct the full time slice and period from their low bits: the access was
        // at most 2^24 slices and 2^16 periods before `m`'s.
        let dt = (m.tick & TICK_MASK).wrapping_sub((s >> EPOCH_BITS) & TICK_MASK) & TICK_MASK;
        let de = (m.epoch & EPOCH_MASK).wrapping_sub(s & EPOCH_MASK) & EPOCH_MASK;
        let mut earlier = sc.first_access(m.value_len, m.tick.saturating_sub(dt), 0, 0);
        earlier.epoch = m.epoch.saturating_sub(de);
        // An LRU score is a time: the newer access's stands (the merge takes the larger).
        if let ScoreKind::Time = sc.kind() {
            earlier.score = 0.0;
        }
        Some(sc.merge(&earlier, m))
    }
}

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
//! scores use.
//!
//! The window is saved with RALT's state at close and at checkpoints (`ralt/REPEATS`,
//! docs/FORMAT.md), so a reopened store, or one opened from a checkpoint, judges its first
//! slow-tier reads as the store it came from would have: a key the source read lately is
//! a repeat at its first read in the copy. Without it, the records a source served from
//! its promotion cache's memory (hot by repeats, not yet by RALT's scores) were dropped by
//! the copy's first checker pass.

use crate::coding::{
    decode_fixed32, decode_fixed64, get_varint64, put_fixed32, put_fixed64, put_varint64,
};
use crate::env::{Env, IoCause, Tier};
use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};

/// Fewest and most keys in the window (the most hold about 5 MiB); a memory cap may
/// lower the window below the fewest.
const MIN_WINDOW: usize = 1 << 10;
const MAX_WINDOW: usize = 1 << 18;
/// Bytes of a map bucket: a fingerprint, its count and a control byte.
const BUCKET_BYTES: u64 = 4 + 4 + 1;
/// The window widens (`Repeats::widening`) from 1x while at most this share of the recent
/// judged reads are repeats ...
const WIDEN_FROM: f64 = 0.2;
/// ... to `MOST_WIDENING` times at this share and above.
const WIDEN_TO: f64 = 0.4;
const MOST_WIDENING: f64 = 2.0;

/// The repeat stage's window.
#[derive(Default)]
pub(crate) struct Repeats {
    /// Fingerprints in the order they were remembered.
    order: VecDeque<u32>,
    /// Fingerprint -> its copies in `order`.
    present: HashMap<u32, u32>,
    /// Entries `present` was sized for (`map_reserve`).
    reserved: usize,
    window: usize,
    /// Key plus value bytes and count of the reads judged, for the mean record size.
    bytes: u64,
    reads: u64,
    /// Reads that were repeats.
    hits: u64,
    /// Reads judged and repeats among them lately: both halve once the reads reach twice
    /// the window, so they follow the last few windows of reads.
    recent_reads: f64,
    recent_hits: f64,
    /// `reads` when the window was last saved or loaded (0: never; a stage that judged
    /// nothing writes nothing).
    saved_at: u64,
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

    /// How much wider than the hot-set limit's worth of keys the window is: 1 while at
    /// most a fifth of the recent judged reads are repeats, twice at two fifths and above,
    /// in between linearly. Under a uniform workload the share of repeats is the window over
    /// the keys stored (a fast disk of a tenth of the data: about 5%), so the window stays
    /// as it is and so do the false repeats; while a hotspot is learnt most slow reads go
    /// to its keys and half of them or more are repeats, and a hot key's second read,
    /// about a hotspot's worth of reads after its first, then falls inside a window of
    /// twice the hot-set limit far more often than inside one (docs/bench/hotrap.md, "The
    /// climb").
    pub fn widening(&self) -> f64 {
        if self.recent_reads < MIN_WINDOW as f64 {
            return 1.0;
        }
        let share = self.recent_hits / self.recent_reads;
        1.0 + ((share - WIDEN_FROM) / (WIDEN_TO - WIDEN_FROM)).clamp(0.0, 1.0)
            * (MOST_WIDENING - 1.0)
    }

    /// Memory held, from the collections' capacities (the map's at least as reserved: its
    /// `capacity` leaves out slots holding tombstones).
    pub fn bytes(&self) -> u64 {
        self.order.capacity() as u64 * 4 + map_bytes(self.present.capacity().max(self.reserved))
    }

    /// Sizes the window to `window_bytes` (key plus value bytes) of keys at the mean
    /// record size judged so far (1 KiB before any), such that the stage holds at most
    /// `max_memory` bytes.
    pub fn fit(&mut self, window_bytes: u64, max_memory: u64) {
        let mean = self.bytes.checked_div(self.reads).unwrap_or(1024).max(1);
        let mut window = usize::try_from(window_bytes / mean)
            .unwrap_or(MAX_WINDOW)
            .clamp(MIN_WINDOW, MAX_WINDOW);
        if window_bytes_held(window) > max_memory {
            // The largest window that fits, by bisection (the bytes held grow with it).
            let (mut lo, mut hi) = (0, window);
            while lo < hi {
                let mid = (lo + hi).div_ceil(2);
                if window_bytes_held(mid) <= max_memory {
                    lo = mid;
                } else {
                    hi = mid - 1;
                }
            }
            window = lo;
        }
        if window == self.window {
            return;
        }
        // Memory is given back after a twofold shrink, or to meet a lowered cap.
        let shrunk = window * 2 < self.window || self.bytes() > max_memory;
        self.window = window;
        self.trim();
        let queue = window + 1;
        let map = map_reserve(window);
        if shrunk {
            self.order.shrink_to(queue);
            self.present.shrink_to(map);
        }
        if self.reserved < map || shrunk {
            self.order
                .reserve_exact(queue.saturating_sub(self.order.len()));
            self.present.reserve(map.saturating_sub(self.present.len()));
            self.reserved = map;
        }
    }

    /// True if the key whose filter hash is `hash` was judged within the window (it stays
    /// remembered: a record judged again after waiting for company keeps its verdict);
    /// otherwise remembers it. `size` is its key plus value bytes.
    pub fn seen_again(&mut self, hash: u64, size: u64) -> bool {
        self.bytes += size;
        self.reads += 1;
        self.recent_reads += 1.0;
        if self.recent_reads >= 2.0 * self.window.max(MIN_WINDOW) as f64 {
            self.recent_reads /= 2.0;
            self.recent_hits /= 2.0;
        }
        let fp = (hash >> 32) as u32;
        if self.present.contains_key(&fp) {
            self.hits += 1;
            self.recent_hits += 1.0;
            return true;
        }
        self.order.push_back(fp);
        *self.present.entry(fp).or_default() += 1;
        self.trim();
        false
    }

    /// True if the key whose filter hash is `hash` is in the window (nothing counted).
    pub fn remembers(&self, hash: u64) -> bool {
        self.present.contains_key(&((hash >> 32) as u32))
    }

    /// The window as a file's body (docs/FORMAT.md, "ralt/REPEATS"): the window, the
    /// bytes, reads and repeats counted and the number of fingerprints (varints), the
    /// recent reads and repeats (f64 bits, fixed64), then each fingerprint (fixed32),
    /// oldest first.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.order.len() * 4 + 64);
        let count = self.order.len() as u64;
        for v in [self.window as u64, self.bytes, self.reads, self.hits, count] {
            put_varint64(&mut out, v);
        }
        put_fixed64(&mut out, self.recent_reads.to_bits());
        put_fixed64(&mut out, self.recent_hits.to_bits());
        for &fp in &self.order {
            put_fixed32(&mut out, fp);
        }
        out
    }

    /// The window [`Repeats::encode`] wrote, or why the body is not one. Memory is
    /// reserved by the next [`Repeats::fit`], which also trims a window larger than the
    /// store's limits now allow.
    pub fn decode(body: &[u8]) -> std::result::Result<Repeats, &'static str> {
        let mut p = 0;
        let mut next = || -> std::result::Result<u64, &'static str> {
            let (v, n) = get_varint64(&body[p..]).ok_or("truncated field")?;
            p += n;
            Ok(v)
        };
        let (window, bytes, reads, hits) = (next()?, next()?, next()?, next()?);
        let count = next()?;
        if window > MAX_WINDOW as u64 || count > window || hits > reads {
            return Err("implausible field value");
        }
        let rest = &body[p..];
        if rest.len() as u64 != 16 + count * 4 {
            return Err("length does not match the fingerprints");
        }
        let recent_reads = f64::from_bits(decode_fixed64(rest));
        let recent_hits = f64::from_bits(decode_fixed64(&rest[8..]));
        let plausible = |x: f64| x.is_finite() && x >= 0.0;
        if !plausible(recent_reads) || !plausible(recent_hits) || recent_hits > recent_reads {
            return Err("implausible recent counts");
        }
        let mut r = Repeats {
            window: window as usize,
            bytes,
            reads,
            hits,
            recent_reads,
            recent_hits,
            saved_at: reads,
            ..Repeats::default()
        };
        for fp in rest[16..].chunks_exact(4).map(decode_fixed32) {
            r.order.push_back(fp);
            *r.present.entry(fp).or_default() += 1;
        }
        Ok(r)
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

/// The window's file under the fast tier, and the name it is written under first.
pub(crate) const FILE: &str = "ralt/REPEATS";
const FILE_TMP: &str = "ralt/REPEATS.tmp";
const MAGIC: &[u8; 8] = b"RALTREP1";

/// Replaces the saved window by the stage's, unless no read was judged since the last
/// save (the lock is held only to encode it); returns the bytes written.
pub(crate) fn save(env: &Env, stage: &Mutex<Repeats>) -> Result<u64> {
    let body = {
        let mut r = stage.lock();
        if r.saved_at == r.reads {
            return Ok(0);
        }
        r.saved_at = r.reads;
        r.encode()
    };
    let data = super::manifest::frame(MAGIC, &body);
    super::manifest::replace(env, FILE, FILE_TMP, &data)?;
    Ok(data.len() as u64)
}

/// The saved window, or an empty one when none was saved or the file is damaged (it is a
/// hint: a store that lost it judges its first reads as after an open without it).
pub(crate) fn load(env: &Env) -> Repeats {
    if !env.exists(Tier::Fast, FILE) {
        return Repeats::default();
    }
    let path = env.path(Tier::Fast, FILE);
    let read = env
        .read_all(Tier::Fast, FILE, IoCause::Ralt)
        .and_then(|data| {
            let body = super::manifest::unframe(&data, MAGIC, &path, "RALT repeat window")?;
            Repeats::decode(body)
                .map_err(|why| Error::corruption(&path, 12, format!("RALT repeat window: {why}")))
        });
    read.unwrap_or_else(|e| {
        tracing::warn!("{e}: starting with an empty repeat window");
        Repeats::default()
    })
}

/// Entries the map is reserved for, for a window of `window` keys: twice what it holds at
/// most (the window plus the key pushed before the oldest is dropped). A hashbrown map
/// rehashes in place while at most half its capacity is live and grows otherwise, and the
/// removals of a sliding window leave tombstones that count against its capacity until
/// then; reserved at half full it never grows (reserved at what it holds, it doubled
/// under a sliding window to three and a half times the space its keys fill).
fn map_reserve(window: usize) -> usize {
    2 * (window + 1)
}

/// Bytes of a map with room for `entries`: a power of two of buckets at most seven
/// eighths full, as hashbrown allocates them, plus a group of trailing control bytes.
fn map_bytes(entries: usize) -> u64 {
    let buckets = if entries < 8 {
        if entries < 4 {
            4
        } else {
            8
        }
    } else {
        (entries.saturating_mul(8) / 7).next_power_of_two()
    };
    buckets as u64 * BUCKET_BYTES + 16
}

/// Bytes the stage holds with a window of `window` keys.
fn window_bytes_held(window: usize) -> u64 {
    (window as u64 + 1) * 4 + map_bytes(map_reserve(window))
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
        assert!(r.remembers(h(2)) && !r.remembers(h(3)));
        assert_eq!((r.reads(), r.hits()), (4, 2), "a look-up counts nothing");
        for i in 100..100 + 4094 {
            assert!(!r.seen_again(h(i), 1024));
        }
        // Keys 1, 2 and 100.. fill the window exactly: 1 is the oldest.
        assert!(r.seen_again(h(1), 1024));
        assert!(!r.seen_again(h(5000), 1024));
        assert!(!r.seen_again(h(1), 1024), "pushed out by one more key");
        assert!(r.bytes() <= window_bytes_held(4096), "{}", r.bytes());
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
        assert!(small.window < MIN_WINDOW);
        assert!(window_bytes_held(small.window) <= 26_000);
        assert!(
            window_bytes_held(small.window + 1) > 26_000,
            "the largest that fits"
        );
        assert!(small.bytes() <= 26_000, "{}", small.bytes());
    }

    /// The window widens with the share of recent reads that repeat, not with the
    /// reads alone: keys drawn uniformly from 40 times the window repeat about 2.5% of
    /// the time and leave it as it is; a hotspot of the window's size read round-robin
    /// repeats at nearly every read and doubles it; back to uniform reads, it narrows again
    /// within a few windows.
    #[test]
    fn the_window_widens_only_while_most_reads_repeat() {
        let mut r = Repeats::default();
        r.fit(4 << 20, u64::MAX);
        assert_eq!(r.widening(), 1.0, "no reads yet");
        let mut x = 7u64;
        let mut uniform = |r: &mut Repeats| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            r.seen_again(h((x >> 1) % (40 * 4096)), 1024);
        };
        for _ in 0..40_000 {
            uniform(&mut r);
        }
        assert_eq!(r.widening(), 1.0, "uniform reads: {}", r.widening());
        for i in 0..20_000 {
            r.seen_again(h(1_000_000 + i % 4096), 1024);
        }
        assert_eq!(r.widening(), MOST_WIDENING, "a hotspot's reads");
        for _ in 0..40_000 {
            uniform(&mut r);
        }
        assert_eq!(r.widening(), 1.0, "uniform again: {}", r.widening());
    }

    /// The window saved is the window loaded: the same keys remembered in the same order
    /// (the oldest leaves first), the same widening; a damaged body is refused, not
    /// half-read.
    #[test]
    fn the_window_round_trips_and_a_damaged_one_is_refused() {
        let mut r = Repeats::default();
        r.fit(2 << 20, u64::MAX);
        for i in 0..3000 {
            r.seen_again(h(i % 1500), 1024);
        }
        let body = r.encode();
        let mut back = Repeats::decode(&body).unwrap();
        assert_eq!(back.window, r.window);
        assert_eq!(back.order, r.order);
        assert_eq!((back.reads(), back.hits()), (r.reads(), r.hits()));
        assert_eq!(back.widening(), r.widening());
        back.fit(2 << 20, u64::MAX);
        assert!(back.remembers(h(0)) && !back.remembers(h(1500)));
        for i in 2000..2000 + back.window as u64 - 1500 {
            assert!(!back.seen_again(h(i), 1024));
        }
        assert!(
            back.remembers(h(0)),
            "the window is full, nothing pushed out yet"
        );
        assert!(!back.seen_again(h(99_999), 1024));
        assert!(!back.remembers(h(0)), "the oldest is the first to go");
        for cut in [0, 3, body.len() - 1] {
            assert!(Repeats::decode(&body[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = body.clone();
        longer.extend_from_slice(&[0; 4]);
        assert!(Repeats::decode(&longer).is_err(), "a fingerprint too many");
    }

    /// The memory cap holds while the window slides: a third of the reads repeat a few
    /// hundred keys, the rest are new, so the map removes a key for nearly every key it
    /// adds. (Its tombstones made a map sized to what it held double twice, to 9 KB
    /// under a 6.5 KB cap.)
    #[test]
    fn the_memory_cap_holds_while_the_window_slides() {
        for cap in [6_553, 26_000, 1 << 20] {
            let mut r = Repeats::default();
            let mut x = 1u64;
            for i in 0..100_000u64 {
                r.fit(89_193, cap);
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let key = if i % 3 == 0 { x % 500 } else { x >> 1 };
                r.seen_again(key << 32, 208);
                assert!(
                    r.bytes() <= cap,
                    "cap {cap}: {} bytes at read {i}",
                    r.bytes()
                );
                assert!(
                    map_bytes(r.present.capacity()) <= map_bytes(r.reserved),
                    "cap {cap}: the map grew past its reservation at read {i}"
                );
            }
            assert_eq!(r.order.len(), r.window, "cap {cap}");
        }
    }
}

//! HAC, AC-Key's hierarchical adaptive caching (§4.3): the cache modes, the target sizes of
//! the three components, the E-ARC boundary moves on ghost hits, and ghost turn-off.
//! Owns every global sizing decision; the shards apply the targets to their own share of
//! the budget and report ghost hits here.
//!
//! Targets are kept as fractions so every shard can scale them to its own real capacity
//! (its budget share minus its ghost memory): `point` is the point cache's share of the
//! real capacity (the block cache gets the rest) and `kv` is the KV cache's share of the
//! point target (the KP cache gets the rest). A ghost hit moves a boundary by
//! `delta = k * E` bytes, where E is the efficiency (I/Os saved per byte) of the entry that
//! was evicted: **k is in bytes squared per I/O** (default 100 000, the paper's). An upper
//! move changes `point` only, so the KV and KP targets change in proportion to their
//! current targets, as §4.3.2 says; a lower move changes `kv` only. One move is capped at
//! [`MAX_MOVE_SHARE`] of the budget so a single hit on a tiny, very efficient entry cannot
//! swing the whole cache.
//!
//! Ghost turn-off (§4.3.3): every [`WINDOW`] lookups the hit ratio of each component over the
//! window is compared with the previous window's. When no ratio moved by
//! [`CacheOptions::ghost_turnoff`] or more (an absolute change: 0.05 = 5 percentage points) and the
//! boundaries moved by less than [`SETTLED_SHARE`] of the budget (net, over the window), for
//! [`STABLE_WINDOWS`] windows in a row, the ghosts are turned off and their memory goes back to the
//! real caches (the targets, being fractions of the real capacity, scale up with it); they come
//! back on as soon as one ratio moves by theta or more. The boundary condition is ours: hit ratios
//! settle within a few windows of a phase change while the boundaries are still walking toward
//! their new place, and turning the ghosts off then would freeze a split that has not converged
//! (measured: the get phase of the phase-change benchmark froze at half its best speed). The
//! eviction condition is ours too: a window counts as settled only when every component in use
//! (looked up during the window) with at least [`MIN_INFORMED_SHARE`] of the budget evicted during
//! it. While a component is still filling, its ghost holds nothing, no ghost hit can move its
//! boundary, and a quiet window says nothing about the split (measured: with 108-byte records the
//! ghosts went off while the KV cache was filling, and the split stayed at its starting point for
//! the whole run).

pub use crate::options::{CacheMode, CacheOptions};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// A cache component.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Comp {
    Kv,
    Kp,
    Block,
}

/// Lookups per turn-off window.
pub const WINDOW: u64 = 16 * 1024;

/// Windows in a row that must look settled before the ghosts go off.
pub const STABLE_WINDOWS: u32 = 4;

/// The boundaries count as settled in a window when their net move is less than this share
/// of the budget.
pub const SETTLED_SHARE: f64 = 0.01;

/// A component whose target is below this share of the budget need not evict for a
/// window to count as settled: it may never fill (its boundary moved away from it).
pub const MIN_INFORMED_SHARE: f64 = 0.05;

/// Smallest share of the point cache the KP cache keeps: a first lookup enters KP, and
/// while the ghosts are off a key reaches KV only by a second lookup while it is still
/// there (a KP hit), so KP must not shrink to nothing even when its hits save no I/O.
pub const MIN_KP_SHARE: f64 = 0.05;

/// Largest share of the budget one ghost hit may move a boundary by.
pub const MAX_MOVE_SHARE: f64 = 1.0 / 32.0;

/// Starting share of the point cache, and of KV within it, in adaptive mode. Free space is
/// used by whichever component needs it, so the start only matters once the cache is full.
const INITIAL_POINT: f64 = 0.5;
const INITIAL_KV: f64 = 0.5;

/// A shard's byte targets for each component.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Targets {
    pub kv: f64,
    pub kp: f64,
    pub block: f64,
    pub point: f64,
}

/// Cumulative hit counts, summed over the shards.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct HitCounts {
    pub kv_hits: u64,
    pub kp_hits: u64,
    pub point_lookups: u64,
    pub block_hits: u64,
    pub block_lookups: u64,
    /// Entries evicted from the KV, KP and block caches.
    pub evictions: [u64; 3],
    /// Table accesses on the get path, and those that had to open their table.
    pub table_accesses: u64,
    pub table_opens: u64,
}

impl HitCounts {
    fn ratios_since(&self, earlier: &HitCounts) -> [f64; 3] {
        let r = |h: u64, h0: u64, n: u64, n0: u64| {
            let n = n.saturating_sub(n0);
            if n == 0 {
                0.0
            } else {
                h.saturating_sub(h0) as f64 / n as f64
            }
        };
        [
            r(
                self.kv_hits,
                earlier.kv_hits,
                self.point_lookups,
                earlier.point_lookups,
            ),
            r(
                self.kp_hits,
                earlier.kp_hits,
                self.point_lookups,
                earlier.point_lookups,
            ),
            r(
                self.block_hits,
                earlier.block_hits,
                self.block_lookups,
                earlier.block_lookups,
            ),
        ]
    }
}

#[derive(Default)]
struct Window {
    last: HitCounts,
    prev_ratios: Option<[f64; 3]>,
    prev_fractions: Option<(f64, f64)>,
    stable: u32,
}

/// The global sizing state of one cache.
pub(crate) struct Controller {
    pub mode: CacheMode,
    fixed: Option<[f64; 3]>,
    k: f64,
    theta: f64,
    /// The cache's budget in bytes (f64 bits): what converts a move of k·E bytes into a
    /// change of the fractions. Changed by [`Controller::set_budget`] when the cache is
    /// resized; the fractions themselves need no change, each shard scales them to its
    /// own real capacity.
    budget: AtomicU64,
    /// Bytes of a typical block: the point cache grows into the block cache only when its
    /// target exceeds its size by this much (the paper's hysteresis).
    pub block_unit: usize,
    /// `n0` of f(m): L0 files that trigger a compaction.
    l0_files: usize,
    point: AtomicU64,
    kv: AtomicU64,
    /// The share of get-path table accesses that had to open their table (reading its
    /// index and filter from disk), averaged over windows (f64 bits); see
    /// [`Controller::kp_saved_ios`].
    metadata_miss: AtomicU64,
    ghosts_on: AtomicBool,
    window: Mutex<Window>,
    pub turnoffs: AtomicU64,
    pub turnons: AtomicU64,
}

fn load(a: &AtomicU64) -> f64 {
    f64::from_bits(a.load(Relaxed))
}

impl Controller {
    pub fn new(
        opts: &CacheOptions,
        budget: usize,
        block_unit: usize,
        l0_files: usize,
    ) -> Controller {
        let fixed = opts.mode.fixed_shares();
        Controller {
            mode: opts.mode,
            fixed,
            k: if opts.learning_rate.is_finite() {
                opts.learning_rate.max(0.0)
            } else {
                0.0
            },
            theta: opts.ghost_turnoff,
            budget: AtomicU64::new((budget.max(1) as f64).to_bits()),
            block_unit,
            l0_files: l0_files.max(1),
            point: AtomicU64::new(INITIAL_POINT.to_bits()),
            kv: AtomicU64::new(INITIAL_KV.to_bits()),
            // Until measured, the paper's assumption (and a fresh store does open tables).
            metadata_miss: AtomicU64::new(1.0f64.to_bits()),
            ghosts_on: AtomicBool::new(fixed.is_none()),
            window: Mutex::new(Window::default()),
            turnoffs: AtomicU64::new(0),
            turnons: AtomicU64::new(0),
        }
    }

    /// The cache was resized to `budget` bytes (`Cache::set_capacity`). The targets are
    /// fractions, so they follow by themselves; the budget is the one absolute figure they
    /// depend on (a move of k·E bytes is a smaller share of a larger cache). `k`,
    /// `block_unit` and `l0_files` are in bytes or files, not shares of the budget, and
    /// keep their meaning at any size. In adaptive mode the ghosts come back on: the
    /// split that settled was the best one for the old size, and only the ghosts can
    /// learn the new size's (they go off again once the ratios settle; a fixed split
    /// never uses them).
    pub fn set_budget(&self, budget: usize) {
        self.budget.store((budget.max(1) as f64).to_bits(), Relaxed);
        if self.fixed.is_some() {
            return;
        }
        self.window.lock().stable = 0;
        if !self.ghosts_on.swap(true, Relaxed) {
            self.turnons.fetch_add(1, Relaxed);
        }
    }

    /// Fixed shares (kv, kp, block), or `None` when adaptive.
    pub fn fixed(&self) -> Option<[f64; 3]> {
        self.fixed
    }

    /// True while ghost caches record evictions.
    pub fn ghosts_on(&self) -> bool {
        self.ghosts_on.load(Relaxed)
    }

    /// True when a KP hit moves the key to the KV cache.
    pub fn promotes(&self) -> bool {
        self.fixed.is_none_or(|s| s[0] > 0.0)
    }

    /// The component a key enters on a miss: KV when it is warm (a ghost hit or a stale KP
    /// entry) or when there is no KP cache, else KP. `None`: no point cache.
    pub fn admission(&self, warm: bool) -> Option<Comp> {
        match self.fixed {
            None => Some(if warm { Comp::Kv } else { Comp::Kp }),
            Some([kv, kp, _]) => match (kv > 0.0, kp > 0.0) {
                (true, true) => Some(if warm { Comp::Kv } else { Comp::Kp }),
                (true, false) => Some(Comp::Kv),
                (false, true) => Some(Comp::Kp),
                (false, false) => None,
            },
        }
    }

    /// f(m) = m + 2 I/Os for a key at `level`: m = n0 / 2 filters on L0, l + n0 deeper.
    pub fn f(&self, level: u8) -> f32 {
        let n0 = self.l0_files as f32;
        let m = if level == 0 {
            n0 / 2.0
        } else {
            level as f32 + n0
        };
        m + 2.0
    }

    /// b of a KP pointer: the I/Os its hit saves over a miss. AC-Key counts f(m) - 1 (the
    /// m filter blocks and the index block a lookup reads before its data block). tierkv
    /// keeps an open table's filter and index in memory, so a lookup reads them only when
    /// it has to open the table: b = (f(m) - 1) p, with p the measured share of get-path
    /// table accesses that opened their table. With every table resident p is near 0 and
    /// a KP hit, which reads the same data block a miss reads, earns nothing; when the
    /// table cache thrashes (a small memory budget) p nears 1 and this is the paper's b.
    /// KV entries keep the paper's f(m): the data-block read a KV hit saves is the one
    /// I/O every miss makes, and its weight against blocks is the paper's.
    pub fn kp_saved_ios(&self, level: u8) -> f32 {
        (self.f(level) - 1.0) * load(&self.metadata_miss) as f32
    }

    /// p of [`Controller::kp_saved_ios`].
    pub fn metadata_miss(&self) -> f64 {
        load(&self.metadata_miss)
    }

    /// The fraction targets (point share, KV share of point).
    pub fn fractions(&self) -> (f64, f64) {
        (load(&self.point), load(&self.kv))
    }

    /// Byte targets of a shard whose real capacity is `real`.
    pub fn targets(&self, real: usize) -> Targets {
        let real = real as f64;
        match self.fixed {
            Some([kv, kp, block]) => Targets {
                kv: kv * real,
                kp: kp * real,
                block: block * real,
                point: (kv + kp) * real,
            },
            None => {
                let (p, k) = self.fractions();
                let point = p * real;
                Targets {
                    kv: k * point,
                    kp: (1.0 - k) * point,
                    block: real - point,
                    point,
                }
            }
        }
    }

    fn step(&self, e: f32) -> f64 {
        (self.k * e as f64).min(load(&self.budget) * MAX_MOVE_SHARE)
    }

    /// Lower-level E-ARC: a hit in G_kv (`toward_kv`) grows the KV target by k·E at the
    /// KP target's expense; a hit in G_kp does the opposite.
    pub fn move_lower(&self, toward_kv: bool, e: f32) {
        let delta = self.step(e);
        let point_bytes = load(&self.point) * load(&self.budget);
        if point_bytes <= 0.0 {
            return;
        }
        let d = if toward_kv { delta } else { -delta } / point_bytes;
        let _ = self.kv.fetch_update(Relaxed, Relaxed, |bits| {
            Some(
                (f64::from_bits(bits) + d)
                    .clamp(0.0, 1.0 - MIN_KP_SHARE)
                    .to_bits(),
            )
        });
    }

    /// Upper-level E-ARC: a hit in G_point (`toward_point`) grows the point target by k·E
    /// at the block target's expense; a hit in G_block does the opposite. KV and KP keep
    /// their shares of the point target, so the change is split in proportion.
    pub fn move_upper(&self, toward_point: bool, e: f32) {
        let delta = self.step(e);
        let d = if toward_point { delta } else { -delta } / load(&self.budget);
        let _ = self.point.fetch_update(Relaxed, Relaxed, |bits| {
            Some((f64::from_bits(bits) + d).clamp(0.0, 1.0).to_bits())
        });
    }

    /// Closes a turn-off window given the cumulative counts.
    pub fn end_window(&self, now: HitCounts) {
        let mut w = self.window.lock();
        let accesses = now.table_accesses.saturating_sub(w.last.table_accesses);
        if accesses > 0 {
            let opens = now.table_opens.saturating_sub(w.last.table_opens);
            let p = (load(&self.metadata_miss) + opens as f64 / accesses as f64) / 2.0;
            self.metadata_miss.store(p.min(1.0).to_bits(), Relaxed);
        }
        if self.fixed.is_some() {
            w.last = now;
            return;
        }
        let ratios = now.ratios_since(&w.last);
        let evicted: [u64; 3] =
            std::array::from_fn(|i| now.evictions[i].saturating_sub(w.last.evictions[i]));
        let point_used = now.point_lookups > w.last.point_lookups;
        let used = [
            point_used,
            point_used,
            now.block_lookups > w.last.block_lookups,
        ];
        w.last = now;
        // Net move of the boundaries over the window, as a share of the budget: ghost hits
        // on both sides make them oscillate around a settled split without going anywhere.
        let (p, k) = self.fractions();
        let (p0, k0) = w.prev_fractions.unwrap_or((p, k));
        w.prev_fractions = Some((p, k));
        let moved = (p - p0).abs() + (k * p - k0 * p0).abs();
        let shares = [p * k, p * (1.0 - k), 1.0 - p];
        let informed = (0..3).all(|i| !used[i] || shares[i] < MIN_INFORMED_SHARE || evicted[i] > 0);
        if let Some(prev) = w.prev_ratios {
            let change = ratios
                .iter()
                .zip(prev.iter())
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            if change < self.theta {
                if moved < SETTLED_SHARE && informed {
                    w.stable += 1;
                } else {
                    w.stable = 0;
                }
                if w.stable >= STABLE_WINDOWS && self.ghosts_on.swap(false, Relaxed) {
                    self.turnoffs.fetch_add(1, Relaxed);
                }
            } else {
                w.stable = 0;
                if !self.ghosts_on.swap(true, Relaxed) {
                    self.turnons.fetch_add(1, Relaxed);
                }
            }
        }
        w.prev_ratios = Some(ratios);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctl(budget: usize) -> Controller {
        Controller::new(&CacheOptions::default(), budget, 4096, 4)
    }

    #[test]
    fn modes_parse_and_print() {
        for (s, m) in [
            ("adaptive", CacheMode::Adaptive),
            ("block", CacheMode::BlockOnly),
            ("KV", CacheMode::KvOnly),
            ("kp-only", CacheMode::KpOnly),
            (
                "split:8:2:0",
                CacheMode::Split {
                    kv: 8.0,
                    kp: 2.0,
                    block: 0.0,
                },
            ),
        ] {
            assert_eq!(s.parse::<CacheMode>().unwrap(), m, "{s}");
            assert_eq!(m.to_string().parse::<CacheMode>().unwrap(), m);
        }
        for bad in [
            "",
            "lru",
            "split:1:2",
            "split:a:1:1",
            "split:0:0:0",
            "split:-1:1:1",
        ] {
            assert!(bad.parse::<CacheMode>().is_err(), "{bad}");
        }
        let s = "split:8:2:0".parse::<CacheMode>().unwrap();
        assert_eq!(s.fixed_shares(), Some([0.8, 0.2, 0.0]));
        assert!(s.has_point() && !s.has_block());
        assert!(!CacheMode::BlockOnly.has_point());
        assert!(CacheMode::Adaptive.has_point() && CacheMode::Adaptive.has_block());
    }

    #[test]
    fn f_of_m_follows_the_level() {
        let c = ctl(1 << 20);
        // n0 = 4: L0 -> m = 2, f = 4; L1 -> m = 5, f = 7; L3 -> m = 7, f = 9.
        assert_eq!(c.f(0), 4.0);
        assert_eq!(c.f(1), 7.0);
        assert_eq!(c.f(3), 9.0);
    }

    #[test]
    fn e_arc_moves_by_k_times_e() {
        // Budget 1 MiB, k = 100 000. Start: point 0.5, KV 0.5 of it (256 KiB each).
        let c = ctl(1 << 20);
        let t = c.targets(1 << 20);
        assert_eq!((t.kv, t.kp, t.block), (262_144.0, 262_144.0, 524_288.0));
        // G_kv hit on an entry with E = 0.05 I/O per byte: KV target += 5000 bytes.
        c.move_lower(true, 0.05);
        let t = c.targets(1 << 20);
        assert!((t.kv - 267_144.0).abs() < 1e-2, "{t:?}");
        assert!((t.kp - 257_144.0).abs() < 1e-2, "{t:?}");
        assert_eq!(t.block, 524_288.0);
        // G_block hit on a 4 KiB block (E = 1/4096): point target -= 100000/4096 = 24.4
        // bytes, split between KV and KP in proportion to their targets.
        c.move_upper(false, 1.0 / 4096.0);
        let t2 = c.targets(1 << 20);
        let d = 100_000.0 / 4096.0;
        assert!((t2.point - (524_288.0 - d)).abs() < 1e-6, "{t2:?}");
        assert!((t2.block - (524_288.0 + d)).abs() < 1e-6, "{t2:?}");
        assert!((t2.kv / t2.point - t.kv / t.point).abs() < 1e-12);
        // G_point hit on a KP entry with E = 0.1: point += 10 000 bytes.
        c.move_upper(true, 0.1);
        let t3 = c.targets(1 << 20);
        assert!((t3.point - (t2.point + 10_000.0)).abs() < 1e-2, "{t3:?}");
        // A huge E is capped at 1/32 of the budget per hit.
        c.move_lower(false, 1e9);
        let t4 = c.targets(1 << 20);
        assert!((t4.kv - (t3.kv - 32_768.0)).abs() < 1e-2, "{t4:?}");
        // Boundaries stay inside the cache.
        for _ in 0..1000 {
            c.move_upper(true, 1e9);
        }
        let t5 = c.targets(1 << 20);
        assert_eq!(t5.block, 0.0);
        assert_eq!(t5.point, (1 << 20) as f64);
    }

    /// A resize (`set_budget`) keeps the fractions, converts moves with the new budget
    /// (k·E bytes of a 2 MiB cache, capped at 1/32 of it) and turns the ghosts back on in
    /// adaptive mode only.
    #[test]
    fn a_resize_rescales_moves_and_turns_the_ghosts_back_on() {
        let c = ctl(1 << 20);
        c.ghosts_on.store(false, Relaxed);
        c.set_budget(2 << 20);
        assert!(c.ghosts_on());
        assert_eq!(c.turnons.load(Relaxed), 1);
        let t = c.targets(2 << 20);
        assert_eq!((t.kv, t.kp, t.block), (524_288.0, 524_288.0, 1_048_576.0));
        c.move_lower(true, 0.05);
        let t2 = c.targets(2 << 20);
        assert!((t2.kv - (t.kv + 5000.0)).abs() < 1e-2, "{t2:?}");
        c.move_lower(false, 1e9);
        let t3 = c.targets(2 << 20);
        assert!((t3.kv - (t2.kv - 65_536.0)).abs() < 1e-2, "{t3:?}");
        c.move_upper(false, 1e9);
        let t4 = c.targets(2 << 20);
        assert!((t4.block - (t3.block + 65_536.0)).abs() < 1e-2, "{t4:?}");
        // A fixed split has no ghosts to turn on.
        let opts = CacheOptions {
            mode: "split:1:1:1".parse().unwrap(),
            ..Default::default()
        };
        let f = Controller::new(&opts, 1 << 20, 4096, 4);
        f.set_budget(2 << 20);
        assert!(!f.ghosts_on());
    }

    #[test]
    fn ghosts_turn_off_when_ratios_settle_and_back_on_when_they_move() {
        let c = ctl(1 << 20);
        let mut now = HitCounts::default();
        let mut window = |kv: u64, block: u64| {
            now.kv_hits += kv;
            now.point_lookups += 100;
            now.block_hits += block;
            now.block_lookups += 100;
            now.evictions = now.evictions.map(|n| n + 1);
            c.end_window(now);
            c.ghosts_on()
        };
        assert!(window(50, 10)); // first window: nothing to compare
        assert!(window(52, 12)); // +2 points: stable once
        assert!(window(53, 10));
        assert!(window(51, 11));
        // A boundary moving by over 1% of the budget in a window is not settled.
        c.move_upper(true, 1.0);
        c.move_upper(true, 1.0);
        assert!(window(52, 11));
        assert!(window(53, 10));
        assert!(window(52, 10));
        assert!(window(53, 11));
        assert!(!window(54, 10)); // four settled windows in a row: off
        assert!(!window(55, 11));
        assert!(window(70, 11)); // KV moved 15 points: on again
        assert_eq!(c.turnoffs.load(Relaxed), 1);
        assert_eq!(c.turnons.load(Relaxed), 1);
    }

    /// A window in which a component with a real share evicted nothing is not settled: that
    /// component is still filling and its ghost cannot have learned anything yet.
    #[test]
    fn ghosts_stay_on_while_a_component_is_filling() {
        let c = ctl(1 << 20);
        let mut now = HitCounts::default();
        let mut window = |evicted: [u64; 3]| {
            now.kv_hits += 50;
            now.point_lookups += 100;
            now.block_lookups += 100;
            for (n, e) in now.evictions.iter_mut().zip(evicted) {
                *n += e;
            }
            c.end_window(now);
            c.ghosts_on()
        };
        // KV (a quarter of the budget at the start) has not evicted yet: never settled.
        for _ in 0..20 {
            assert!(window([0, 5, 5]));
        }
        // Every component evicting: off at the fourth settled window.
        for _ in 0..3 {
            assert!(window([1, 5, 5]));
        }
        assert!(!window([1, 5, 5]));
        // A component whose boundary moved below the minimum share need not evict.
        let c = ctl(1 << 20);
        for _ in 0..200 {
            c.move_lower(false, 1e9);
        }
        assert!(c.fractions().1 < MIN_INFORMED_SHARE);
        let mut now = HitCounts::default();
        let mut off = false;
        for _ in 0..6 {
            now.point_lookups += 100;
            now.block_lookups += 100;
            now.evictions[1] += 3;
            now.evictions[2] += 3;
            c.end_window(now);
            off = !c.ghosts_on();
        }
        assert!(off, "an empty KV share must not keep the ghosts on");
        // Nor must a component nobody looks up (no block lookups: its share is idle).
        let c = ctl(1 << 20);
        let mut now = HitCounts::default();
        for _ in 0..5 {
            now.point_lookups += 100;
            now.evictions[0] += 2;
            now.evictions[1] += 2;
            c.end_window(now);
        }
        assert!(!c.ghosts_on());
    }

    /// A KP pointer earns the filter and index reads it saves only as often as lookups
    /// really read them: the paper's f(m) - 1 while every access opens its table, nothing
    /// once every table stays open; KV keeps f(m) either way. KP keeps its floor.
    #[test]
    fn kp_credit_follows_the_measured_metadata_reads() {
        let c = ctl(1 << 20);
        assert_eq!(c.kp_saved_ios(3), c.f(3) - 1.0);
        let mut now = HitCounts::default();
        for _ in 0..30 {
            now.table_accesses += 1000;
            c.end_window(now);
        }
        assert!(c.metadata_miss() < 1e-6, "{}", c.metadata_miss());
        assert!(c.kp_saved_ios(3) < 1e-5);
        assert_eq!(c.f(3), 3.0 + 4.0 + 2.0);
        // Every access opening its table again: back to the paper's credit.
        for _ in 0..30 {
            now.table_accesses += 1000;
            now.table_opens += 1000;
            c.end_window(now);
        }
        assert!((c.kp_saved_ios(3) - (c.f(3) - 1.0)).abs() < 1e-4);
        for _ in 0..1000 {
            c.move_lower(true, 1e9);
        }
        assert!((c.fractions().1 - (1.0 - MIN_KP_SHARE)).abs() < 1e-12);
    }
}

//! Tests of RALT. Each names the paper rule or docs/DESIGN.md invariant it checks.

use super::options::{Params, COUNTER_DC, COUNTER_MAX};
use super::score::{
    decode_record, encode_record, encoded_len, is_stable, real_counter, Meta, Scorer,
};
use super::*;
use crate::env::Env;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::HashSet;

fn key(i: u64) -> Vec<u8> {
    format!("user{i:012}").into_bytes()
}

fn env(dir: &std::path::Path) -> Arc<Env> {
    Env::single(dir, false).unwrap()
}

/// Runs background work until none is due, as the engine's background thread would.
fn drive(r: &Ralt) {
    let mut n = 0;
    while r.needs_maintenance() {
        r.maintenance().unwrap();
        n += 1;
        assert!(n < 100_000, "maintenance never settles");
    }
}

fn access(r: &Ralt, k: u64, vlen: u32) {
    r.record_access(&key(k), vlen).unwrap();
    if r.needs_maintenance() {
        drive(r);
    }
}

/// Hot keys of a hotspot: every `stride`-th key from `offset`, spread over the key space.
struct Hotspot {
    n: u64,
    hot: u64,
    stride: u64,
    offset: u64,
}

impl Hotspot {
    /// `hot` of `n` keys, spread evenly over the key space from `offset`.
    fn spread(n: u64, hot: u64, offset: u64) -> Hotspot {
        Hotspot {
            n,
            hot,
            stride: n / hot,
            offset,
        }
    }
    fn hot_key(&self, i: u64) -> u64 {
        (i * self.stride + self.offset) % self.n
    }
    /// 95% of accesses to the hot keys, 5% to all keys, uniformly.
    fn next(&self, rng: &mut StdRng) -> u64 {
        if rng.gen_bool(0.95) {
            self.hot_key(rng.gen_range(0..self.hot))
        } else {
            rng.gen_range(0..self.n)
        }
    }
    fn hot_set(&self) -> HashSet<u64> {
        (0..self.hot).map(|i| self.hot_key(i)).collect()
    }
}

fn recall(r: &Ralt, keys: &HashSet<u64>) -> f64 {
    keys.iter().filter(|&&k| r.is_hot(&key(k))).count() as f64 / keys.len() as f64
}

const VLEN: u32 = 200;
const HOTRAP: u64 = 16 + VLEN as u64;

// ---------------------------------------------------------------- score arithmetic

/// Paper §3.2: real score = alpha^(t - tick) * score; merge of (tick_i, score_i) and
/// (tick_j, score_j), tick_i < tick_j: score* = alpha^(tick_j - tick_i) * score_i + score_j,
/// tick* = tick_j, whichever record is passed first.
#[test]
fn exp_smoothing_real_score_and_merge_rule() {
    let sc = Scorer::new(ScoringMethod::ExpSmoothing, 0.999, 0.0);
    let m = |tick, score| Meta {
        value_len: 7,
        tick,
        score,
        epoch: 0,
        counter: COUNTER_DC,
        tag: false,
    };
    let a = m(10, 2.0);
    let b = m(12, 1.0);
    let merged = sc.merge(&a, &b);
    assert_eq!(merged.tick, 12);
    // 2 * 0.999^2 + 1 = 2 * 0.998001 + 1
    assert!((merged.score - 2.996002).abs() < 1e-12, "{}", merged.score);
    let swapped = sc.merge(&b, &a);
    assert_eq!(swapped.tick, 12);
    assert!((swapped.score - 2.996002).abs() < 1e-12);
    // Real score three slices later: 2.996002 * 0.999^3.
    let real = sc.real_score(&merged, 15);
    assert!((real - 2.996002 * 0.997002999).abs() < 1e-12, "{real}");
    // Score of accesses in slices 1, 2 and 5, seen at t = 5: 0.999^4 + 0.999^3 + 1.
    let s = [1u64, 2, 5]
        .iter()
        .map(|&t| m(t, 1.0))
        .reduce(|x, y| sc.merge(&x, &y))
        .unwrap();
    let want = 0.999f64.powi(4) + 0.999f64.powi(3) + 1.0;
    assert!((s.score - want).abs() < 1e-12);
    // Ranks order records as real scores do, at any reference time.
    for t in [12u64, 20, 5000] {
        let (x, y) = (m(3, 10.0), m(12, 1.5));
        assert_eq!(
            sc.rank(&x, t) < sc.rank(&y, t),
            sc.real_score(&x, t) < sc.real_score(&y, t)
        );
    }
}

/// Paper §4.7 ablation: LRU keeps the latest access time; multi-bit CLOCK adds accesses,
/// loses one per time slice and saturates at 2^bits - 1.
#[test]
fn lru_and_clock_scoring() {
    let lru = Scorer::new(ScoringMethod::Lru, 0.999, 0.0);
    let a = lru.first_access(1, 3, 0, 1000);
    let b = lru.first_access(1, 4, 0, 5000);
    assert_eq!(lru.merge(&a, &b).score, 5000.0);
    assert_eq!(lru.merge(&b, &a).score, 5000.0);
    assert_eq!(lru.real_score(&a, 100), 1000.0);

    let clock = Scorer::new(ScoringMethod::Clock { bits: 2 }, 0.999, 0.0);
    let mut m = clock.first_access(1, 5, 0, 0);
    m.score = 3.0;
    let n = clock.first_access(1, 7, 0, 0);
    // 3 decays by 2 slices to 1, plus 1 = 2.
    assert_eq!(clock.merge(&m, &n).score, 2.0);
    let n2 = clock.first_access(1, 5, 0, 0);
    // Saturates at 3.
    assert_eq!(clock.merge(&m, &n2).score, 3.0);
    assert_eq!(clock.real_score(&m, 9), 0.0);
}

/// Algorithm 1 with the prototype's increment (dc = cmax = 5): first access c = 5, t = 0;
/// a hit c = min(c + dc, cmax) = 5, t = 1; counters lose 1 every R accessed bytes, never
/// below 0; stable = c > 0 and t = 1.
#[test]
fn auto_tuning_counters_follow_algorithm_1() {
    let sc = Scorer::new(ScoringMethod::ExpSmoothing, 0.999, 0.0);
    let first = sc.first_access(10, 0, 0, 0);
    assert_eq!((first.counter, first.tag), (COUNTER_MAX, false));
    assert!(!is_stable(&first, 0), "a first access is unstable");
    // Hit four periods later: 5 - 4 + 5, capped at 5.
    let hit = sc.merge(&first, &sc.first_access(10, 3, 4, 0));
    assert_eq!((hit.counter, hit.tag, hit.epoch), (COUNTER_MAX, true, 4));
    assert!(is_stable(&hit, 4));
    // Lazy decrement: 5 periods later the counter is 0 and the key unstable.
    assert_eq!(real_counter(&hit, 8), 10);
    assert_eq!(real_counter(&hit, 9), 0);
    assert!(!is_stable(&hit, 9));
    // A hit after the counter ran out: c = dc, t = 1 (stable again).
    let again = sc.merge(&hit, &sc.first_access(10, 9, 12, 0));
    assert_eq!((again.counter, again.tag), (COUNTER_DC, true));
}

/// Invariant 3 (detect, never invent): the record encoding round-trips, its length is the
/// physical size, and damaged bytes do not decode.
#[test]
fn record_encoding_round_trips() {
    let m = Meta {
        value_len: 1000,
        tick: 123_456,
        score: 17.25,
        epoch: 9,
        counter: 42,
        tag: true,
    };
    let mut buf = Vec::new();
    encode_record(&mut buf, b"user12345", &m, true);
    assert_eq!(buf.len(), encoded_len(9, &m));
    let (k, got, hot, used) = decode_record(&buf).unwrap();
    assert_eq!((k, got, hot, used), (&b"user12345"[..], m, true, buf.len()));
    for cut in 0..buf.len() {
        assert!(decode_record(&buf[..cut]).is_none(), "truncated at {cut}");
    }
    let mut bad = buf.clone();
    *bad.last_mut().unwrap() = 0xff;
    assert!(decode_record(&bad).is_none(), "unknown flags");
}

#[test]
fn options_default_and_validation() {
    let o = RaltOptions::default();
    assert_eq!((o.alpha, o.gamma, o.beta), (0.999, 0.1, 0.1));
    assert!(o.auto_tune && o.bloom_bits_per_key == 20);
    o.validate().unwrap();
    let p = Params::new(&RaltOptions {
        fd_budget: 1000,
        ..o.clone()
    });
    // The paper's initial limits and Algorithm 1's constants.
    assert_eq!((p.init_hot_limit, p.init_phys_limit), (500, 150));
    assert_eq!(
        (p.lhs, p.rhs, p.dhs, p.decay_bytes, p.tick_bytes),
        (50, 700, 70, 1000, 100)
    );
    for bad in [
        RaltOptions {
            alpha: 0.0,
            ..o.clone()
        },
        RaltOptions {
            beta: 1.0,
            ..o.clone()
        },
        RaltOptions {
            gamma: -1.0,
            ..o.clone()
        },
        RaltOptions {
            buffer_bytes: 10,
            ..o.clone()
        },
        RaltOptions {
            bloom_bits_per_key: 0,
            ..o.clone()
        },
        RaltOptions {
            hot_set_limit: Some(0),
            ..o.clone()
        },
        RaltOptions {
            recency_weight: -0.1,
            ..o.clone()
        },
        RaltOptions {
            recency_weight: f64::NAN,
            ..o.clone()
        },
        RaltOptions {
            scoring: ScoringMethod::Clock { bits: 0 },
            ..o.clone()
        },
    ] {
        let e = bad.validate().unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    }
    let dir = tempfile::tempdir().unwrap();
    assert!(
        Ralt::open(env(dir.path()), o).is_err(),
        "fd_budget 0 is refused at open"
    );
}

// ---------------------------------------------------------------- buffer and time

/// The paper's tracker: every buffered key is written (`admission` and `stage` off), so
/// these tests see each flushed access in the runs.
fn small_opts(fd: u64) -> RaltOptions {
    RaltOptions {
        fd_budget: fd,
        buffer_bytes: 4096,
        admission: false,
        stage: false,
        ..Default::default()
    }
}

/// Paper §3.2: t advances every gamma * FD accessed bytes. Buffer rule (module doc): a
/// single buffered access is not hot, a second one while buffered is; before any eviction
/// every flushed record is hot; a flushed "super hot" key stays hot.
#[test]
fn clock_and_buffer_hotness() {
    let dir = tempfile::tempdir().unwrap();
    let r = Ralt::open(env(dir.path()), small_opts(100_000)).unwrap();
    // gamma * FD = 10_000 bytes = 46 accesses of 216 bytes per slice.
    for i in 0..47 {
        r.record_access(&key(i), VLEN).unwrap();
    }
    assert_eq!(r.stats().tick, 1);
    assert!(!r.is_hot(&key(1)), "one buffered access is not hot");
    r.record_access(&key(1), VLEN).unwrap();
    assert!(r.is_hot(&key(1)), "accessed again while buffered: hot");
    assert_eq!(r.range_hot_size(&key(0), &key(9)), HOTRAP);
    let hk: Vec<_> = r
        .hot_keys(&key(0), &key(100))
        .unwrap()
        .map(|x| x.unwrap())
        .collect();
    assert_eq!(hk, vec![(key(1), VLEN)]);
    r.flush().unwrap();
    assert!(r.is_hot(&key(1)));
    assert!(
        r.is_hot(&key(2)),
        "no threshold yet: every flushed key is hot"
    );
    assert!(!r.is_hot(&key(999)));
}

/// Invariants 4 and 5: recording never blocks on the background and never grows without
/// bound; with no maintenance, at most two buffers fill and the rest is dropped, counted.
#[test]
fn record_access_drops_when_background_falls_behind() {
    let dir = tempfile::tempdir().unwrap();
    let r = Arc::new(Ralt::open(env(dir.path()), small_opts(1 << 20)).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let r = r.clone();
            std::thread::spawn(move || {
                for i in 0..5000u64 {
                    r.record_access(&key(t * 100_000 + i), VLEN).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let s = r.stats();
    assert!(r.needs_maintenance());
    assert_eq!(s.accesses, 20_000);
    assert!(s.dropped_accesses > 15_000, "{s:?}");
    assert!(s.buffer_bytes <= 2 * 4096 + 256, "{s:?}");
    assert!(r.maintenance().unwrap());
    assert_eq!(r.stats().files, 1);
}

/// Invariant 5 (a read never waits on background bookkeeping): a read's access finds the
/// front lock held, as by a thread the scheduler took off the CPU inside it, and returns
/// at once, its access left for the lock's next holder; that holder merges it before its
/// own, so a second access to the key makes it hot while buffered, as two accesses in a
/// row would. The bound on the wait is for a hang, not a speed.
#[test]
fn an_access_that_finds_the_front_lock_held_is_merged_by_the_next_holder() {
    let dir = tempfile::tempdir().unwrap();
    let r = Arc::new(Ralt::open(env(dir.path()), small_opts(1 << 20)).unwrap());
    let (done_tx, done) = std::sync::mpsc::channel();
    let held = r.front.lock();
    let reader = {
        let r = r.clone();
        std::thread::spawn(move || {
            r.record_access(&key(7), VLEN).unwrap();
            let _ = done_tx.send(());
        })
    };
    let returned = done
        .recv_timeout(std::time::Duration::from_secs(20))
        .is_ok();
    drop(held);
    reader.join().unwrap();
    assert!(returned, "the access waited for the front lock");
    assert!(!r.is_hot(&key(7)), "one access alone is not hot");
    r.record_access(&key(7), VLEN).unwrap();
    assert!(
        r.is_hot(&key(7)),
        "the deferred access was merged before the second"
    );
    assert_eq!(r.stats().accesses, 2);
}

/// `RaltOptions::max_buffer_bytes`: with a recurring key set larger than the buffer every
/// flush wrote the same keys again (RALT wrote 40-75 MiB/s in a read-only cache-hit phase);
/// the buffer grows to absorb them and RALT writes several times less, while accesses to
/// keys that never recur keep the small buffer (invariant 4: the growth is bounded).
#[test]
fn buffer_grows_while_keys_recur_and_only_then() {
    let ralt_writes = |max_buffer_bytes: usize, keys: u64, accesses: u64| {
        let dir = tempfile::tempdir().unwrap();
        let env = env(dir.path());
        let r = Ralt::open(
            env.clone(),
            RaltOptions {
                fd_budget: 64 << 20,
                buffer_bytes: 4096,
                max_buffer_bytes,
                // The buffer's own growth is under test; the hot stage would absorb the
                // recurring keys before any L0 compaction sized the buffer.
                stage: false,
                // Runs on disk: what the run LSM writes is under test.
                run_memory_limit: 0,
                ..Default::default()
            },
        )
        .unwrap();
        let mut rng = StdRng::seed_from_u64(11);
        for _ in 0..accesses {
            access(&r, rng.gen_range(0..keys), VLEN);
        }
        let written = env
            .stats()
            .snapshot()
            .fast
            .cause(crate::env::IoCause::Ralt)
            .write_bytes;
        (written, r.stats())
    };
    // 2000 recurring keys: about 50 buffers of 4 KiB would hold them once.
    let (fixed, s) = ralt_writes(4096, 2000, 200_000);
    assert_eq!(s.buffer_capacity, 4096);
    let (grown, s) = ralt_writes(256 << 10, 2000, 200_000);
    assert_eq!(s.buffer_capacity, 256 << 10, "{s:?}");
    assert!(
        grown * 4 < fixed,
        "a grown buffer writes {grown} bytes of RALT files, the fixed one {fixed}"
    );
    assert!(s.buffer_bytes <= 2 * (256 << 10) + 4096, "{s:?}");
    // Keys that do not recur (10M of them): the buffer stays at its starting size.
    let (_, s) = ralt_writes(256 << 10, 10_000_000, 50_000);
    assert_eq!(s.buffer_capacity, 4096, "{s:?}");
}

// ---------------------------------------------------------------- hotspot behaviour

/// Fixed limits matched to the hotspot, as in the paper's scoring experiment (§4.7).
fn hotspot_opts(hs: &Hotspot, scoring: ScoringMethod) -> RaltOptions {
    let hot_bytes = hs.hot * HOTRAP;
    RaltOptions {
        fd_budget: 4 << 20,
        hot_set_limit: Some(hot_bytes * 11 / 10),
        physical_limit: Some(hs.hot * 3 * 34),
        auto_tune: false,
        buffer_bytes: 64 << 10,
        scoring,
        admission: false,
        stage: false,
        ..Default::default()
    }
}

fn exact_range_hot(r: &Ralt, lo: &[u8], hi: &[u8]) -> u64 {
    r.hot_keys(lo, hi)
        .unwrap()
        .map(|x| {
            let (k, v) = x.unwrap();
            k.len() as u64 + v as u64
        })
        .sum()
}

/// Paper §3.2 on a hotspot-5% stream: >= 95% of the hot keys are hot, the hot set stays
/// within its limit, and range_hot_size is never below the exact hot size of a range
/// nor more than 15% above it (invariant 4: RALT within its limits).
#[test]
fn hotspot_recall_limits_and_range_hot_size() {
    let dir = tempfile::tempdir().unwrap();
    let hs = Hotspot {
        n: 40_000,
        hot: 2000,
        stride: 20,
        offset: 0,
    };
    let r = Ralt::open(
        env(dir.path()),
        hotspot_opts(&hs, ScoringMethod::ExpSmoothing),
    )
    .unwrap();
    let mut rng = StdRng::seed_from_u64(1);
    for _ in 0..200_000 {
        access(&r, hs.next(&mut rng), VLEN);
    }
    drive(&r);
    let s = r.stats();
    let rec = recall(&r, &hs.hot_set());
    assert!(rec >= 0.95, "recall {rec}, {s:?}");
    assert!(s.evictions > 0, "{s:?}");
    assert!(s.hot_set_size <= s.hot_set_limit, "{s:?}");
    assert!(s.physical_size <= s.physical_limit, "{s:?}");
    let cold_hot = (0..hs.n)
        .filter(|k| k % hs.stride != 0 && r.is_hot(&key(*k)))
        .count();
    assert!(cold_hot < 400, "{cold_hot} cold keys are hot");
    for (a, b) in [
        (0, 40_000),
        (0, 10_000),
        (5_000, 15_000),
        (20_000, 30_000),
        (31_000, 40_000),
    ] {
        let (lo, hi) = (key(a), key(b));
        let exact = exact_range_hot(&r, &lo, &hi);
        let est = r.range_hot_size(&lo, &hi);
        assert!(
            est >= exact,
            "[{a}, {b}]: estimate {est} below exact {exact}"
        );
        assert!(
            est as f64 <= exact as f64 * 1.15,
            "[{a}, {b}]: estimate {est} over 15% above exact {exact}"
        );
    }
}

/// Paper §3.2 / §4.6: after the hotspot moves, the new hot keys become hot and the old ones
/// stop being hot within a bounded amount of accessed data. The bound: with FD = 1 MiB a
/// time slice is 0.1 FD and a hot key gets q = 0.23 accesses per slice. After T = 100
/// slices (10 x FD) an old key's score is q(1 - alpha^T)/(1 - alpha) ~ 22; n slices after
/// the move it is 22 alpha^n while a new key's is 230(1 - alpha^n). The means cross at
/// n ~ 90 slices (9 x FD); separating 95% of the keys (Poisson spread of both) takes
/// about twice that, so the test allows 25 x FD of accessed data.
#[test]
fn hotspot_move_is_followed_within_bounded_data() {
    let dir = tempfile::tempdir().unwrap();
    let old = Hotspot {
        n: 40_000,
        hot: 2000,
        stride: 20,
        offset: 0,
    };
    let new = Hotspot { offset: 10, ..old };
    let mut o = hotspot_opts(&old, ScoringMethod::ExpSmoothing);
    o.fd_budget = 1 << 20;
    let r = Ralt::open(env(dir.path()), o).unwrap();
    let mut rng = StdRng::seed_from_u64(2);
    // 10 x FD before the move.
    let per_fd = (1u64 << 20) / HOTRAP;
    for _ in 0..10 * per_fd {
        access(&r, old.next(&mut rng), VLEN);
    }
    assert!(recall(&r, &old.hot_set()) > 0.95);
    let bound = 25 * per_fd;
    let mut moved_at = None;
    for i in 0..bound {
        access(&r, new.next(&mut rng), VLEN);
        if i % 2000 == 1999
            && recall(&r, &new.hot_set()) >= 0.95
            && recall(&r, &old.hot_set()) <= 0.05
        {
            moved_at = Some(i + 1);
            break;
        }
    }
    let s = r.stats();
    let moved_at = moved_at.unwrap_or_else(|| {
        panic!(
            "not moved after {bound} accesses: new {} old {} {s:?}",
            recall(&r, &new.hot_set()),
            recall(&r, &old.hot_set())
        )
    });
    eprintln!(
        "hotspot move followed after {moved_at} accesses ({:.1} x FD)",
        moved_at as f64 / per_fd as f64
    );
}

/// Paper §4.7: the alternative scorers also find a hotspot (the paper ranks them below
/// exponential smoothing, so a lower bar).
#[test]
fn lru_and_clock_find_a_hotspot() {
    for scoring in [ScoringMethod::Lru, ScoringMethod::Clock { bits: 4 }] {
        let dir = tempfile::tempdir().unwrap();
        let hs = Hotspot {
            n: 20_000,
            hot: 1000,
            stride: 20,
            offset: 5,
        };
        let r = Ralt::open(env(dir.path()), hotspot_opts(&hs, scoring)).unwrap();
        let mut rng = StdRng::seed_from_u64(3);
        for _ in 0..60_000 {
            access(&r, hs.next(&mut rng), VLEN);
        }
        drive(&r);
        let s = r.stats();
        let rec = recall(&r, &hs.hot_set());
        assert!(rec >= 0.6, "{scoring:?}: recall {rec} {s:?}");
        assert!(s.hot_set_size <= s.hot_set_limit, "{scoring:?}: {s:?}");
    }
}

// ---------------------------------------------------------------- auto-tuning

/// Algorithm 1 under uniform access: hardly any key becomes stable, so after evictions the
/// hot set limit falls to its floor, max(Lhs, min(stable + Dhs, Rhs)) with stable ~ 0.
/// With the paper's constants Dhs = 0.07 FD exceeds Lhs = 0.05 FD, so the floor reached
/// is Dhs (plus the few stable keys: keys read twice within five counter periods by
/// chance, about 0.03 FD here); the test checks it lands within 0.05 FD of it.
#[test]
fn auto_tuning_uniform_falls_to_lower_bound() {
    let dir = tempfile::tempdir().unwrap();
    let fd = 2u64 << 20;
    let o = RaltOptions {
        fd_budget: fd,
        buffer_bytes: 32 << 10,
        admission: false,
        ..Default::default()
    };
    let p = Params::new(&o);
    let r = Ralt::open(env(dir.path()), o).unwrap();
    assert_eq!(r.stats().hot_set_limit, fd / 2);
    let n = 10 * fd / HOTRAP;
    let mut rng = StdRng::seed_from_u64(4);
    for _ in 0..8 * fd / HOTRAP {
        access(&r, rng.gen_range(0..n), VLEN);
    }
    let s = r.stats();
    let floor = p.lhs.max(p.dhs);
    assert!(s.evictions >= 2, "{s:?}");
    assert!(
        s.hot_set_limit >= floor && s.hot_set_limit <= floor + fd / 20,
        "limit {} not at its floor {floor}: {s:?}",
        s.hot_set_limit
    );
}

/// Algorithm 1 under hotspot-x%: the hot keys become stable, and the hot set limit settles
/// near the hotspot's size (stable size + Dhs, within [size, size + Dhs + 0.05 FD]).
#[test]
fn auto_tuning_hotspot_settles_near_hotspot_size() {
    let dir = tempfile::tempdir().unwrap();
    let fd = 2u64 << 20;
    let n = 10 * fd / HOTRAP;
    // A hotspot of 0.3 FD.
    let hot = 3 * fd / 10 / HOTRAP;
    let hs = Hotspot::spread(n, hot, 3);
    let o = RaltOptions {
        fd_budget: fd,
        buffer_bytes: 32 << 10,
        // The flush granularity the bounds below were set for: a grown buffer flushes, and
        // so evicts and tunes, less often within this short stream.
        max_buffer_bytes: 32 << 10,
        admission: false,
        ..Default::default()
    };
    let p = Params::new(&o);
    let r = Ralt::open(env(dir.path()), o).unwrap();
    let mut rng = StdRng::seed_from_u64(5);
    for _ in 0..12 * fd / HOTRAP {
        access(&r, hs.next(&mut rng), VLEN);
    }
    let s = r.stats();
    let size = hot * HOTRAP;
    assert!(s.evictions >= 2, "{s:?}");
    assert!(
        s.hot_set_limit >= size && s.hot_set_limit <= size + p.dhs + fd / 20,
        "limit {} vs hotspot {size} (Dhs {}): {s:?}",
        s.hot_set_limit,
        p.dhs
    );
    let rec = recall(&r, &hs.hot_set());
    assert!(rec >= 0.9, "recall {rec}");
}

/// Algorithm 1 with the admission stage and the hot stage on (the defaults): RALT's files
/// then stay far below the initial limits (hot set 50% of FD, physical 15%), yet the limits
/// are still tuned, once per counter period, and a hotspot's hot set settles near its size
/// instead of every key seen twice counting as hot until the hot set reaches half of FD
/// (which retained up to half the fast tier and made the cross-tier compaction rewrite it:
/// docs/bench/cross-tier-bisect.md).
#[test]
fn auto_tuning_runs_below_the_initial_limits() {
    let dir = tempfile::tempdir().unwrap();
    let fd = 2u64 << 20;
    let n = 10 * fd / HOTRAP;
    // A hotspot of 0.1 FD: far under the initial hot set limit, and its RALT records far
    // under the initial physical limit.
    let hot = fd / 10 / HOTRAP;
    let hs = Hotspot::spread(n, hot, 7);
    let o = RaltOptions {
        fd_budget: fd,
        buffer_bytes: 32 << 10,
        max_buffer_bytes: 32 << 10,
        ..Default::default()
    };
    assert!(o.admission && o.stage && o.auto_tune);
    let p = Params::new(&o);
    let r = Ralt::open(env(dir.path()), o).unwrap();
    let mut rng = StdRng::seed_from_u64(8);
    for _ in 0..12 * fd / HOTRAP {
        access(&r, hs.next(&mut rng), VLEN);
    }
    let s = r.stats();
    let size = hot * HOTRAP;
    assert!(
        s.physical_size < p.init_phys_limit && s.hot_set_size < p.init_hot_limit,
        "the limits were never passed in this stream: {s:?}"
    );
    assert!(s.evictions >= 2, "no retuning below the limits: {s:?}");
    assert!(
        s.hot_set_limit >= size && s.hot_set_limit <= size + p.dhs + fd / 20,
        "limit {} vs hotspot {size} (Dhs {}): {s:?}",
        s.hot_set_limit,
        p.dhs
    );
    assert!(
        s.hot_set_size <= s.hot_set_limit,
        "hot set {} over its tuned limit {}",
        s.hot_set_size,
        s.hot_set_limit
    );
    let rec = recall(&r, &hs.hot_set());
    assert!(rec >= 0.9, "recall {rec}");
}

/// With auto-tuning a re-tuning (an eviction, where Algorithm 1 sets the limits and the hot
/// threshold) runs once per counter period even when the buffer never fills: a small
/// hotspot whose every access merges into the buffer's entry for its key. Before, the
/// re-tuning waited for a buffer flush, which here never comes, and a moved hotspot's old
/// keys stayed hot until one did (the dynamic bench: 11 re-tunings in 21 periods, none
/// while its 5% hotspot moved). Six fast disks of reads of one hotspot, then six of
/// another: a re-tuning in nearly every period, and at the end the old keys, unread for
/// six periods (their counters ran out after five), are no longer hot.
#[test]
fn auto_tuning_retunes_every_period_while_the_buffer_absorbs_the_reads() {
    let dir = tempfile::tempdir().unwrap();
    let fd = 2u64 << 20;
    let n = 10 * fd / HOTRAP;
    let hot = fd / 20 / HOTRAP;
    let old = Hotspot::spread(n, hot, 3);
    let new = Hotspot::spread(n, hot, 11);
    let o = RaltOptions {
        fd_budget: fd,
        buffer_bytes: 256 << 10,
        ..Default::default()
    };
    assert!(o.auto_tune);
    let r = Ralt::open(env(dir.path()), o).unwrap();
    let per_fd = fd / HOTRAP;
    let mut k = 0;
    for hs in [&old, &new] {
        for _ in 0..6 * per_fd + per_fd / 10 {
            // Every read goes to the hotspot, round-robin: no key is ever read once only.
            access(&r, hs.hot_key(k % hot), VLEN);
            k += 1;
        }
    }
    let s = r.stats();
    assert!(s.counter_period >= 12, "{s:?}");
    assert!(
        s.evictions >= 10,
        "re-tuned {} times in 12 periods: {s:?}",
        s.evictions
    );
    let (now, then) = (recall(&r, &new.hot_set()), recall(&r, &old.hot_set()));
    assert!(
        now >= 0.95 && then <= 0.05,
        "recall of the new hotspot {now}, of the old one {then}: {s:?}"
    );
}

/// `RaltOptions::recency_weight`: when the stable keys do not fit the hot-set limit, the
/// keys read lately are hot, not the ones read more often before. A hotspot of 0.5 FD
/// is read six times per key, then a different one of 0.5 FD three times per key: the
/// old keys stay stable (five counter periods) and outscore the new ones two to one, so
/// ranking by score alone (the paper's, `recency_weight` 0) keeps the old keys hot and
/// most new ones cold, the fast disk then holding the hotspot readers left
/// (docs/bench/hotrap.md, "The moved hotspot").
#[test]
fn a_hot_set_that_does_not_fit_prefers_the_keys_read_lately() {
    let recalls = |recency_weight: f64| {
        let dir = tempfile::tempdir().unwrap();
        let fd = 2u64 << 20;
        let n = 10 * fd / HOTRAP;
        let hot = fd / 2 / HOTRAP;
        let old = Hotspot::spread(n, hot, 3);
        let new = Hotspot::spread(n, hot, 11);
        let o = RaltOptions {
            fd_budget: fd,
            recency_weight,
            ..Default::default()
        };
        let r = Ralt::open(env(dir.path()), o).unwrap();
        for (hs, passes) in [(&old, 6), (&new, 3)] {
            for i in 0..passes * hot {
                access(&r, hs.hot_key(i % hot), VLEN);
            }
        }
        // A last period's reads of the new keys: the re-tuning that follows judges both.
        for i in 0..fd / HOTRAP {
            access(&r, new.hot_key(i % hot), VLEN);
        }
        drive(&r);
        (
            recall(&r, &new.hot_set()),
            recall(&r, &old.hot_set()),
            r.stats(),
        )
    };
    let (now, then, s) = recalls(RaltOptions::default().recency_weight);
    assert!(
        now >= 0.95 && then <= 0.5,
        "recall of the new hotspot {now}, of the old one {then}: {s:?}"
    );
    // The paper's ranking keeps the old hotspot instead: the test can tell them apart.
    let (now, then, s) = recalls(0.0);
    assert!(
        now < 0.7 && then > 0.8,
        "by score alone: recall of the new hotspot {now}, of the old one {then}: {s:?}"
    );
}

/// The prototype's memory for a key seen twice (the HotRAP authors' RALT: every access sets
/// the counter to cmax = 5, and a counter period lasts one fast disk of accessed bytes), and
/// one fast disk of single-access keys remembered while they wait for their second access.
/// A trace of 64 keys, each read twice with half a fast disk of never-repeated keys between
/// the two reads, then four fast disks of such keys: the 64 must still be hot (at least 75%
/// of them: the admission table is direct-mapped, and the never-repeated keys overwrite
/// about one first read in seven). With the
/// paper's Algorithm 1 as written (dc = 2.6, a period of Rhs = 0.7 FD, unstable keys
/// remembered for Dhs = 0.07 FD), the first read of most of them is forgotten before the
/// second, and the counter of the rest runs out within 3.5 fast disks: under zipfian, the
/// hot set then stops at the keys read twice within a tenth of a fast disk (69.7% of reads
/// on the fast disk instead of 74.5%; docs/bench/hotrap.md).
#[test]
fn auto_tuning_remembers_a_key_seen_twice_for_five_fast_disks() {
    let dir = tempfile::tempdir().unwrap();
    let fd = 2u64 << 20;
    let o = RaltOptions {
        fd_budget: fd,
        buffer_bytes: 32 << 10,
        ..Default::default()
    };
    assert!(o.admission && o.stage && o.auto_tune);
    let r = Ralt::open(env(dir.path()), o).unwrap();
    let twice: HashSet<u64> = (0..64).map(|i| 1_000_000_000 + i).collect();
    let mut filler = 0u64;
    let mut fill = |r: &Ralt, bytes: u64| {
        for _ in 0..bytes / HOTRAP {
            filler += 1;
            access(r, filler, VLEN);
        }
    };
    for &k in &twice {
        access(&r, k, VLEN);
    }
    fill(&r, fd / 2);
    for &k in &twice {
        access(&r, k, VLEN);
    }
    fill(&r, 4 * fd);
    let s = r.stats();
    assert!(s.evictions >= 2, "no eviction judged the keys: {s:?}");
    let rec = recall(&r, &twice);
    assert!(rec >= 0.75, "recall {rec} of the keys read twice: {s:?}");
}

/// Runs `rounds` fast disks of hotspot accesses and returns the lowest recall of the hot keys
/// measured after each of the last `judged` rounds.
fn worst_recall_at_every_moment(r: &Ralt, hs: &Hotspot, fd: u64, rounds: u32, judged: u32) -> f64 {
    let mut rng = StdRng::seed_from_u64(11);
    let hot = hs.hot_set();
    let mut worst = 1.0f64;
    for round in 0..rounds {
        for _ in 0..fd / HOTRAP {
            access(r, hs.next(&mut rng), VLEN);
        }
        if round >= rounds - judged {
            worst = worst.min(recall(r, &hot));
        }
    }
    worst
}

/// With auto-tuning every key of a hotspot is hot at every moment once learnt, not just on
/// average: retention asks RALT at arbitrary moments (invariant 5, docs/DESIGN.md: hot
/// records stay on the fast tier). Two hotspots of 11 fast disks of records with every
/// default on: the bench's hotspot-5% (0.55 fast disks), and one of 0.66 fast disks, just
/// under the limit's upper bound (0.7). The hot threshold sits at the hot-set limit (the
/// authors' RALT), not a beta below it: at 90% of the limit (0.63 fast disks) a twentieth of
/// the larger hotspot was below it at any moment, a different one after every eviction,
/// and retention demoted whichever a compaction met. Since an eviction runs in every
/// counter period with the active buffer flushed first (`Ralt::retune_needs_flush`), the
/// worst moment is 0.991 / 0.977 of the two (0.9998 / 0.997 with a re-tuning only after a
/// buffer filled, 5 or 6 of them in these 20 periods against 20): each period's buffer
/// holds about one read of each hotspot key, and a key whose hot bit was lost has its
/// single reads parked by the admission stage rather than written.
#[test]
fn auto_tuning_keeps_a_hotspot_hot_whole_at_every_moment() {
    let fd = 2u64 << 20;
    let n = 11 * fd / HOTRAP;
    for (hot, bound) in [(n / 20, 0.98), (66 * fd / 100 / HOTRAP, 0.97)] {
        let dir = tempfile::tempdir().unwrap();
        let hs = Hotspot::spread(n, hot, 7);
        let o = RaltOptions {
            fd_budget: fd,
            ..Default::default()
        };
        let r = Ralt::open(env(dir.path()), o).unwrap();
        let worst = worst_recall_at_every_moment(&r, &hs, fd, 20, 10);
        let s = r.stats();
        assert!(s.evictions > 0, "no eviction set a threshold: {s:?}");
        assert!(
            worst >= bound,
            "{hot} hot keys: recall fell to {worst}: {s:?}"
        );
    }
}

// ---------------------------------------------------------------- persistence

/// Invariant 2 for RALT's state: after flush and reopen, files, clock, thresholds and
/// limits are as before, and unreferenced files are deleted.
#[test]
fn restart_keeps_state() {
    let dir = tempfile::tempdir().unwrap();
    let hs = Hotspot {
        n: 10_000,
        hot: 500,
        stride: 20,
        offset: 1,
    };
    let o = hotspot_opts(&hs, ScoringMethod::ExpSmoothing);
    let (before, hot_before, keys_before) = {
        let r = Ralt::open(env(dir.path()), o.clone()).unwrap();
        let mut rng = StdRng::seed_from_u64(6);
        for _ in 0..30_000 {
            access(&r, hs.next(&mut rng), VLEN);
        }
        r.flush().unwrap();
        let (hot, keys) = hot_state(&r, hs.n);
        (r.stats(), hot, keys)
    };
    std::fs::write(dir.path().join("ralt/999999.rlt"), b"junk").unwrap();
    let r = Ralt::open(env(dir.path()), o).unwrap();
    let after = r.stats();
    assert!(!dir.path().join("ralt/999999.rlt").exists());
    assert_eq!(
        (
            after.tick,
            after.files,
            after.hot_set_size,
            after.physical_size,
            after.evictions
        ),
        (
            before.tick,
            before.files,
            before.hot_set_size,
            before.physical_size,
            before.evictions
        )
    );
    assert_eq!(hot_state(&r, hs.n), (hot_before, keys_before));
}

/// What a reopen must reproduce exactly: every key's hotness (`is_hot` over keys `0..n`)
/// and the hot keys RALT lists with their sizes.
fn hot_state(r: &Ralt, n: u64) -> (Vec<bool>, Vec<(Vec<u8>, u32)>) {
    let hot = (0..n).map(|k| r.is_hot(&key(k))).collect();
    let keys = r
        .hot_keys(b"", b"\xff")
        .unwrap()
        .map(|x| x.unwrap())
        .collect();
    (hot, keys)
}

fn flip_byte(path: &std::path::Path, offset_from_end: Option<u64>, offset: u64) {
    let mut data = std::fs::read(path).unwrap();
    let at = match offset_from_end {
        Some(e) => data.len() - e as usize,
        None => offset as usize,
    };
    data[at] ^= 0x55;
    std::fs::write(path, data).unwrap();
}

fn run_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir.join("ralt"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rlt"))
        .collect();
    v.sort();
    v
}

/// Invariant 3: a damaged manifest, footer or data block is a clear corruption error that
/// names the file (and never a panic or wrong answer).
#[test]
fn corruption_is_detected_and_named() {
    let make = |dir: &std::path::Path| {
        let r = Ralt::open(env(dir), small_opts(1 << 20)).unwrap();
        for i in 0..400 {
            r.record_access(&key(i), VLEN).unwrap();
        }
        r.flush().unwrap();
    };
    // Manifest.
    let dir = tempfile::tempdir().unwrap();
    make(dir.path());
    flip_byte(&dir.path().join("ralt/MANIFEST"), None, 14);
    let e = Ralt::open(env(dir.path()), small_opts(1 << 20))
        .err()
        .unwrap();
    assert!(
        e.is_corruption() && e.to_string().contains("MANIFEST"),
        "{e}"
    );
    // Footer.
    let dir = tempfile::tempdir().unwrap();
    make(dir.path());
    let f = run_files(dir.path())[0].clone();
    flip_byte(&f, Some(10), 0);
    let e = Ralt::open(env(dir.path()), small_opts(1 << 20))
        .err()
        .unwrap();
    assert!(e.is_corruption() && e.to_string().contains(".rlt"), "{e}");
    // Data block: found when the block is read.
    let dir = tempfile::tempdir().unwrap();
    make(dir.path());
    let f = run_files(dir.path())[0].clone();
    flip_byte(&f, None, 20);
    let r = Ralt::open(env(dir.path()), small_opts(1 << 20)).unwrap();
    let res: Result<Vec<_>> = r.hot_keys(b"", b"\xff").unwrap().collect();
    let e = res.unwrap_err();
    assert!(
        e.is_corruption() && e.to_string().contains(".rlt") && e.to_string().contains("offset 0"),
        "{e}"
    );
    // Missing file.
    let dir = tempfile::tempdir().unwrap();
    make(dir.path());
    std::fs::remove_file(&run_files(dir.path())[0]).unwrap();
    let e = Ralt::open(env(dir.path()), small_opts(1 << 20))
        .err()
        .unwrap();
    assert!(
        e.is_corruption() && e.to_string().contains("missing"),
        "{e}"
    );
}

/// Paper §3.2 (eviction merges step by step to bound temporary space) and invariant 4:
/// an eviction takes several steps, and no step writes (so holds as temporary space)
/// more than a few files' worth.
#[test]
fn eviction_merges_step_by_step_with_bounded_space() {
    let dir = tempfile::tempdir().unwrap();
    let hs = Hotspot {
        n: 40_000,
        hot: 2000,
        stride: 20,
        offset: 2,
    };
    let mut o = hotspot_opts(&hs, ScoringMethod::ExpSmoothing);
    o.physical_limit = Some(200 << 10);
    o.hot_set_limit = Some(1 << 30);
    o.buffer_bytes = 8 << 10;
    // Many small flushes, so an eviction has many files to merge step by step.
    o.max_buffer_bytes = o.buffer_bytes;
    let e = env(dir.path());
    let r = Ralt::open(e.clone(), o).unwrap();
    let written = || {
        e.stats()
            .snapshot()
            .tier(crate::env::Tier::Fast)
            .cause(crate::env::IoCause::Ralt)
            .write_bytes
    };
    let mut rng = StdRng::seed_from_u64(7);
    let file_target = Params::new(&r.opts).file_target;
    let (mut max_step, mut steps) = (0u64, 0u64);
    for _ in 0..150_000 {
        r.record_access(&key(hs.next(&mut rng)), VLEN).unwrap();
        while r.needs_maintenance() {
            let before = written();
            let evicting = r.maint.lock().eviction.is_some();
            r.maintenance().unwrap();
            if evicting {
                steps += 1;
                max_step = max_step.max(written() - before);
            }
        }
    }
    let s = r.stats();
    assert!(
        s.evictions >= 1 && steps > s.evictions,
        "{s:?} steps {steps}"
    );
    let bound = (super::options::EVICT_STEP_FILES as u64 + 4) * file_target;
    assert!(
        max_step <= bound,
        "a step wrote {max_step} bytes (bound {bound})"
    );
    assert!(s.physical_size <= s.physical_limit, "{s:?}");
    eprintln!("{steps} eviction steps, largest wrote {max_step} bytes; {s:?}");
}

/// A tracker under a memory limit of `limit` bytes, with 4 KiB starting buffers.
fn memory_limited(dir: &std::path::Path, limit: u64, admission: bool) -> Ralt {
    Ralt::open(
        env(dir),
        RaltOptions {
            // A large FD budget: the physical limit alone would let RALT grow much further.
            fd_budget: 64 << 20,
            buffer_bytes: 4096,
            memory_limit: Some(limit),
            admission,
            // Runs on disk: with runs in memory each run's struct is 24 bytes smaller, the
            // evictions fall differently, and one ends 178 bytes over the limit (an eviction
            // lowers the physical limit in proportion to memory, which does not bound the
            // filters exactly; the next one needs a new flush).
            run_memory_limit: 0,
            ..Default::default()
        },
    )
    .unwrap()
}

/// Invariant 4 (memory budget): with a memory limit, evictions keep the buffers, the
/// admission table and the run files' filters and indexes within it however many distinct
/// keys are accessed (with the paper's tracker, where every key reaches the runs, and
/// with the admission stage, whose table takes a share of the limit).
#[test]
fn memory_limit_bounds_filters_indexes_and_buffers() {
    for admission in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let limit = 64 << 10;
        let r = memory_limited(dir.path(), limit, admission);
        let mut peak = 0;
        let mut rng = StdRng::seed_from_u64(7);
        for i in 0..30_000u64 {
            // Each key twice in a row with admission, so that every key is admitted.
            let k = rng.gen_range(0..100_000);
            access(&r, k, VLEN);
            if admission {
                access(&r, k, VLEN);
            }
            if i % 500 == 0 {
                peak = peak.max(r.stats().memory_bytes);
            }
        }
        drive(&r);
        let s = r.stats();
        peak = peak.max(s.memory_bytes);
        assert!(s.evictions > 0, "admission {admission}: {s:?}");
        assert!(
            peak <= limit,
            "admission {admission}: peak {peak} > limit {limit}: {s:?}"
        );
        assert_eq!(s.admission_bytes > 0, admission, "{s:?}");
    }
    assert!(
        RaltOptions {
            memory_limit: Some(4096),
            buffer_bytes: 2048,
            ..Default::default()
        }
        .validate()
        .is_err(),
        "two buffers must fit"
    );
}

/// Invariant 4 (budgets hold) for the tracker while its background lags: the foreground
/// fills the buffers between maintenance steps, one step every few accesses, so a flush
/// can put the run files over their part of the limit long before an eviction has made
/// room. The memory limit must hold after every access anyway: the active buffer grows
/// only into the room left beside the files, the stage, the admission table, the repeat
/// window and the frozen buffer, and reads' accesses are dropped (counted) when there is
/// none (found as a flaky `memory_budget::budget_holds_under_a_write_read_mix`).
#[test]
fn memory_limit_holds_while_the_background_lags() {
    for steps_every in [64u64, 256] {
        let dir = tempfile::tempdir().unwrap();
        let limit = 64 << 10;
        let r = memory_limited(dir.path(), limit, true);
        let mut rng = StdRng::seed_from_u64(steps_every);
        let mut peak = 0;
        for i in 0..40_000u64 {
            // A hotspot (recurring keys, so the buffer grows) under a stream of other keys,
            // each read twice so that admission lets it into the files, which fill.
            if rng.gen_bool(0.5) {
                r.record_access(&key(rng.gen_range(0..2_000)), VLEN)
                    .unwrap();
            } else {
                let k = key(rng.gen_range(0..100_000));
                r.record_access(&k, VLEN).unwrap();
                r.record_access(&k, VLEN).unwrap();
            }
            if i % steps_every == 0 && r.needs_maintenance() {
                r.maintenance().unwrap();
            }
            let s = r.stats();
            peak = peak.max(s.memory_bytes);
            assert!(
                s.memory_bytes <= limit,
                "a step every {steps_every} accesses, access {i}: {} > {limit}: {s:?}",
                s.memory_bytes
            );
        }
        // The limit was approached, not left far off: the room check is what held it (the
        // repeat window, empty here, is counted at its cap of an eighth).
        assert!(peak > limit * 3 / 4, "peak {peak}: {:?}", r.stats());
    }
}

// ---------------------------------------------------------------- admission stage

/// The admission stage (module `admit`): a parked access is credited once, by the merge
/// rule, at its own time slice and counter period; a second take finds nothing (no access
/// is counted twice).
#[test]
fn admission_credits_a_parked_access_once_by_the_merge_rule() {
    let sc = Scorer::new(ScoringMethod::ExpSmoothing, 0.999, 0.0);
    let mut a = admit::Admission::default();
    a.resize(admit::Admission::target_slots(100, 1 << 20));
    assert_eq!(a.slots(), 512.max(admit::MIN_SLOTS));
    let first = sc.first_access(VLEN, 10, 3, 0);
    let hash = filter_hash(b"k");
    a.park(hash, &first);
    assert!(a.take_merged(filter_hash(b"other"), &first, &sc).is_none());
    let later = sc.first_access(VLEN, 15, 4, 0);
    let got = a
        .take_merged(hash, &later, &sc)
        .expect("parked access credited");
    assert_eq!(got, sc.merge(&first, &later));
    assert!((got.score - (0.999f64.powi(5) + 1.0)).abs() < 1e-12);
    assert!(
        got.tag,
        "a key seen twice is hit while tracked (Algorithm 1)"
    );
    assert!(a.take_merged(hash, &later, &sc).is_none(), "credited twice");
    assert_eq!((a.parked(), a.credited()), (1, 1));
    // The table's size follows its window and its memory bound.
    assert_eq!(admit::Admission::target_slots(1 << 20, 64 << 10), 8192);
    assert_eq!(admit::Admission::target_slots(0, 1 << 30), admit::MIN_SLOTS);
}

/// Issue 20 ("hotness tracking that costs in proportion to what it decides"): a one-time
/// scan of many cold keys writes no run file with the admission stage (the paper's tracker
/// writes a record for every key), and none of the keys is hot.
#[test]
fn admission_keeps_a_one_time_scan_off_the_disk() {
    let run = |admission: bool| {
        let dir = tempfile::tempdir().unwrap();
        let env = env(dir.path());
        let r = Ralt::open(
            env.clone(),
            RaltOptions {
                fd_budget: 4 << 20,
                buffer_bytes: 16 << 10,
                admission,
                // Runs on disk: what the run LSM writes is under test.
                run_memory_limit: 0,
                ..Default::default()
            },
        )
        .unwrap();
        for k in 0..50_000 {
            access(&r, k, VLEN);
        }
        r.flush().unwrap();
        drive(&r);
        let written = env
            .stats()
            .snapshot()
            .fast
            .cause(crate::env::IoCause::Ralt)
            .write_bytes;
        let hot = (0..50_000).filter(|&k| r.is_hot(&key(k))).count();
        (written, r.stats(), hot)
    };
    let (paper, s, _) = run(false);
    assert!(
        paper > 50_000 * 20,
        "the paper's tracker wrote {paper}: {s:?}"
    );
    let (admitted, s, hot) = run(true);
    assert_eq!(s.files, 0, "{s:?}");
    assert!(
        admitted < 4096,
        "wrote {admitted} bytes (manifest only expected): {s:?}"
    );
    assert_eq!(s.admission_parked, 50_000, "{s:?}");
    assert_eq!(hot, 0);
}

/// The admission stage keeps HotRAP's decisions: a key accessed twice while buffered is
/// hot at its second access, as before; on a hotspot-5% stream the same hot keys are found
/// (recall within 2 points of the paper's tracker, at least 95%) with no more cold keys
/// hot, within the same limits, while RALT writes at least half less.
#[test]
fn admission_keeps_hotspot_decisions_and_writes_less() {
    let dir = tempfile::tempdir().unwrap();
    let r = Ralt::open(
        env(dir.path()),
        RaltOptions {
            admission: true,
            ..small_opts(100_000)
        },
    )
    .unwrap();
    r.record_access(&key(1), VLEN).unwrap();
    assert!(!r.is_hot(&key(1)));
    r.record_access(&key(1), VLEN).unwrap();
    assert!(r.is_hot(&key(1)), "accessed again while buffered: hot");

    let hs = Hotspot {
        n: 40_000,
        hot: 2000,
        stride: 20,
        offset: 0,
    };
    let run = |admission: bool| {
        let dir = tempfile::tempdir().unwrap();
        let env = env(dir.path());
        let o = RaltOptions {
            admission,
            ..hotspot_opts(&hs, ScoringMethod::ExpSmoothing)
        };
        let r = Ralt::open(env.clone(), o).unwrap();
        let mut rng = StdRng::seed_from_u64(1);
        for _ in 0..200_000 {
            access(&r, hs.next(&mut rng), VLEN);
        }
        drive(&r);
        let s = r.stats();
        let rec = recall(&r, &hs.hot_set());
        let cold_hot = (0..hs.n)
            .filter(|k| k % hs.stride != 0 && r.is_hot(&key(*k)))
            .count();
        let written = env
            .stats()
            .snapshot()
            .fast
            .cause(crate::env::IoCause::Ralt)
            .write_bytes;
        assert!(s.hot_set_size <= s.hot_set_limit, "{s:?}");
        assert!(s.physical_size <= s.physical_limit, "{s:?}");
        (rec, cold_hot, written, s)
    };
    let (rec0, cold0, w0, _) = run(false);
    let (rec1, cold1, w1, s) = run(true);
    eprintln!("paper: recall {rec0} cold hot {cold0} wrote {w0}; admission: recall {rec1} cold hot {cold1} wrote {w1}");
    assert!(
        rec1 >= 0.95 && rec1 >= rec0 - 0.02,
        "recall {rec1} vs {rec0}: {s:?}"
    );
    assert!(cold1 <= cold0 + 40, "cold keys hot: {cold1} vs {cold0}");
    assert!(
        w1 * 2 <= w0,
        "admission wrote {w1}, the paper's tracker {w0}: {s:?}"
    );
}

// ---------------------------------------------------------------- hot stage

/// A key's records in every run, folded by the merge rule (what an eviction judges).
fn on_disk(r: &Ralt, k: &[u8]) -> Option<Meta> {
    let v = r.version.load_full();
    let sources = v
        .files()
        .map(|(_, f)| version::Source::files(vec![f.clone()], None, false))
        .collect();
    let mut it = version::MergeIter::new(sources);
    while let Some(group) = it.next_group().unwrap() {
        if group[0].1.key == k {
            return Some(maint::fold(r, group));
        }
    }
    None
}

/// Merges decode each record into one of the group before it (`MergeIter`,
/// `RunCursor::next_reusing`), so a record that held a long key may decode a short one:
/// it must keep nothing of the long one. Keys of 1 to 82 bytes, their lengths shuffled,
/// flushed into many runs and compacted (merges that write what they decode), come back
/// from `hot_keys` (a merge of every run) byte for byte, each with the value length of
/// its newest access.
#[test]
fn merges_that_reuse_records_return_every_key_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let r = Ralt::open(env(dir.path()), small_opts(10_000_000)).unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    let mut expect = std::collections::BTreeMap::new();
    for round in 0..12u32 {
        for _ in 0..200 {
            let id: u32 = rng.gen_range(0..500);
            // A hex id, then as many '~' (not a hex digit) as the id says: unique keys
            // whose lengths jump about in key order.
            let mut k = format!("{id:x}").into_bytes();
            k.resize(k.len() + (id as usize * 37) % 80, b'~');
            let vlen = round * 10 + rng.gen_range(0..10);
            for _ in 0..2 {
                r.record_access(&k, vlen).unwrap();
                if r.needs_maintenance() {
                    drive(&r);
                }
            }
            expect.insert(k, vlen);
        }
        r.flush().unwrap();
        drive(&r);
    }
    let s = r.stats();
    assert_eq!(s.dropped_accesses, 0, "{s:?}");
    assert!(s.files > 1, "several runs merged: {s:?}");
    let v = r.version.load_full();
    assert!(
        v.levels.iter().skip(1).any(|l| !l.is_empty()),
        "a compaction wrote a deeper level"
    );
    assert_eq!(s.evictions, 0, "no key was evicted: {s:?}");
    let got: Vec<(Vec<u8>, u32)> = r
        .hot_keys(b"", &[0xff; 100])
        .unwrap()
        .map(|x| x.unwrap())
        .collect();
    let expect: Vec<(Vec<u8>, u32)> = expect.into_iter().collect();
    assert_eq!(got, expect);
}

/// Issue 20, the hot stage (module `stage`): the accesses of a key hot in a run are
/// merged in memory instead of written at every flush, the key stays hot throughout, and
/// when an eviction starts every staged access is on disk: the key's folded record then
/// equals, by the merge rule, the one the every-flush tracker wrote. Fewer bytes written.
#[test]
fn stage_keeps_hot_keys_hot_and_writes_their_accesses_before_an_eviction() {
    let run = |stage: bool| {
        let dir = tempfile::tempdir().unwrap();
        let env = env(dir.path());
        let r = Ralt::open(
            env.clone(),
            RaltOptions {
                stage,
                admission: true,
                // A fixed buffer: both runs see the same flushes.
                max_buffer_bytes: 4096,
                // Runs on disk: what the run LSM writes is under test.
                run_memory_limit: 0,
                ..small_opts(1 << 20)
            },
        )
        .unwrap();
        for round in 0..40 {
            access(&r, 7, VLEN);
            access(&r, 7, VLEN);
            assert!(r.is_hot(&key(7)), "round {round}: accessed twice, hot");
            // Fill the buffer with keys seen once (parked, never written) until it flushes.
            let mut k = 1000 + round * 1000;
            while !r.needs_maintenance() {
                r.record_access(&key(k), VLEN).unwrap();
                k += 1;
            }
            drive(&r);
            assert!(r.is_hot(&key(7)), "round {round}: hot after the flush");
        }
        let s = r.stats();
        // Force an eviction; stop at its start and read what it judges.
        {
            let mut m = r.maint.lock();
            m.th.phys_limit = 1;
            r.update_pending(&m);
        }
        let judged = loop {
            assert!(r.needs_maintenance(), "{:?}", r.stats());
            r.maintenance().unwrap();
            let m = r.maint.lock();
            if m.eviction.is_some() {
                assert!(
                    m.stage.is_empty(),
                    "the stage is written before an eviction"
                );
                break on_disk(&r, &key(7)).expect("key 7 on disk");
            }
        };
        let written = env
            .stats()
            .snapshot()
            .fast
            .cause(crate::env::IoCause::Ralt)
            .write_bytes;
        eprintln!("stage {stage}: {judged:?} {s:?}");
        (judged, written, s)
    };
    let (paper, w0, _) = run(false);
    let (staged, w1, s) = run(true);
    assert!(s.stage_merged >= 30, "{s:?}");
    assert_eq!(s.staged_keys, 1, "{s:?}");
    assert!(
        s.stage_bytes > 0 && s.memory_bytes >= s.stage_bytes,
        "{s:?}"
    );
    assert_eq!((staged.tick, staged.epoch), (paper.tick, paper.epoch));
    assert!(
        (staged.score - paper.score).abs() <= 1e-9 * paper.score,
        "score {} vs every-flush {}",
        staged.score,
        paper.score
    );
    assert!(staged.score > 75.0, "80 accesses counted: {staged:?}");
    assert_eq!(staged.counter, paper.counter);
    assert!(w1 < w0, "stage wrote {w1}, every flush {w0}");
}

/// Issue 20: with the hot stage on, a hotspot-5% stream finds the same hot keys as the
/// every-flush tracker (recall within 2 points, at least 95%, no more than 40 more cold
/// keys hot), stays within its limits through evictions, and writes less.
#[test]
fn stage_keeps_hotspot_decisions_and_writes_less() {
    let hs = Hotspot {
        n: 40_000,
        hot: 2000,
        stride: 20,
        offset: 0,
    };
    let run = |stage: bool| {
        let dir = tempfile::tempdir().unwrap();
        let env = env(dir.path());
        let o = RaltOptions {
            admission: true,
            stage,
            // Runs on disk: what the run LSM writes is under test.
            run_memory_limit: 0,
            ..hotspot_opts(&hs, ScoringMethod::ExpSmoothing)
        };
        let r = Ralt::open(env.clone(), o).unwrap();
        let mut rng = StdRng::seed_from_u64(1);
        for _ in 0..200_000 {
            access(&r, hs.next(&mut rng), VLEN);
        }
        drive(&r);
        let s = r.stats();
        let rec = recall(&r, &hs.hot_set());
        let cold_hot = (0..hs.n)
            .filter(|k| k % hs.stride != 0 && r.is_hot(&key(*k)))
            .count();
        let written = env
            .stats()
            .snapshot()
            .fast
            .cause(crate::env::IoCause::Ralt)
            .write_bytes;
        assert!(s.hot_set_size <= s.hot_set_limit, "{s:?}");
        assert!(s.physical_size <= s.physical_limit, "{s:?}");
        (rec, cold_hot, written, s)
    };
    let (rec0, cold0, w0, _) = run(false);
    let (rec1, cold1, w1, s) = run(true);
    eprintln!("every flush: recall {rec0} cold hot {cold0} wrote {w0}; stage: recall {rec1} cold hot {cold1} wrote {w1}: {s:?}");
    assert!(s.evictions > 0 && s.stage_merged > 0, "{s:?}");
    assert!(
        rec1 >= 0.95 && rec1 >= rec0 - 0.02,
        "recall {rec1} vs {rec0}: {s:?}"
    );
    assert!(cold1 <= cold0 + 40, "cold keys hot: {cold1} vs {cold0}");
    assert!(w1 < w0, "stage wrote {w1}, every flush {w0}: {s:?}");
}

/// Invariant 4 through a buffer halving: the memory limit holds while the buffer grows on
/// recurring keys and then halves on keys that do not recur (the buffer frozen just before
/// a halving holds up to the old capacity, which the limit must count).
#[test]
fn memory_limit_holds_while_the_buffer_halves() {
    let dir = tempfile::tempdir().unwrap();
    let limit = 256 << 10;
    let r = Ralt::open(
        env(dir.path()),
        RaltOptions {
            fd_budget: 64 << 20,
            buffer_bytes: 4096,
            max_buffer_bytes: 64 << 10,
            memory_limit: Some(limit),
            ..Default::default()
        },
    )
    .unwrap();
    let mut rng = StdRng::seed_from_u64(5);
    let mut peak = 0;
    let mut grown = 0;
    for i in 0..150_000u64 {
        access(&r, rng.gen_range(0..2000), VLEN);
        if i % 100 == 0 {
            grown = grown.max(r.stats().buffer_capacity);
            peak = peak.max(r.stats().memory_bytes);
        }
    }
    assert!(grown > 4 * 4096, "the buffer grew: {:?}", r.stats());
    let mut halved = false;
    for i in 0..150_000u64 {
        // Each key twice in a row (admitted), never again.
        let k = 1_000_000 + i;
        access(&r, k, VLEN);
        access(&r, k, VLEN);
        if i % 50 == 0 {
            let s = r.stats();
            halved |= s.buffer_capacity < grown;
            peak = peak.max(s.memory_bytes);
        }
    }
    let s = r.stats();
    assert!(halved, "the buffer halved: {s:?}");
    assert!(s.evictions > 0, "{s:?}");
    assert!(peak <= limit, "peak {peak} > limit {limit}: {s:?}");
}

// ---------------------------------------------------------------- runs in memory, checkpoints

fn ralt_written(e: &Env) -> u64 {
    e.stats()
        .snapshot()
        .fast
        .cause(crate::env::IoCause::Ralt)
        .write_bytes
}

/// The engine's own writes, as RALT's checkpoint trigger sees them (a flush's file).
fn engine_writes(e: &Env, name: &str, bytes: usize) {
    let mut f = e
        .create_writable(crate::env::Tier::Fast, name, crate::env::IoCause::Flush)
        .unwrap();
    f.append(&vec![7u8; bytes]).unwrap();
    f.sync().unwrap();
}

const HS: Hotspot = Hotspot {
    n: 10_000,
    hot: 500,
    stride: 20,
    offset: 1,
};

/// A hotspot run of `accesses` on a fresh tracker with `run_memory_limit` = `limit`: the
/// tracker, its env, and whether each key is hot at the end.
fn hotspot_run(dir: &std::path::Path, limit: u64, accesses: u64) -> (Ralt, Arc<Env>, Vec<bool>) {
    let e = env(dir);
    let o = RaltOptions {
        run_memory_limit: limit,
        ..hotspot_opts(&HS, ScoringMethod::ExpSmoothing)
    };
    let r = Ralt::open(e.clone(), o).unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    for _ in 0..accesses {
        access(&r, HS.next(&mut rng), VLEN);
    }
    let hot = (0..HS.n).map(|k| r.is_hot(&key(k))).collect();
    (r, e, hot)
}

/// Issue 20 (tracker writes in proportion to what it decides): while its runs fit
/// `run_memory_limit`, a read-only phase (nothing else writes) writes 0 RALT bytes though
/// flushes, compactions and evictions run; the same stream with the runs on disk writes
/// them. Close writes the runs once, as counted by `checkpoint_write_bytes`.
#[test]
fn read_only_phase_under_the_limit_writes_nothing_until_close() {
    let dir = tempfile::tempdir().unwrap();
    let (r, e, _) = hotspot_run(dir.path(), 4 << 20, 60_000);
    let s = r.stats();
    assert!(s.files > 0 && s.evictions > 0, "maintenance ran: {s:?}");
    assert!(s.run_memory_bytes > 0 && s.unpersisted_bytes > 0, "{s:?}");
    assert_eq!(ralt_written(&e), 0, "{s:?}");
    assert_eq!(s.checkpoints, 0, "{s:?}");
    assert!(recall(&r, &HS.hot_set()) >= 0.9, "{s:?}");
    r.flush().unwrap();
    let s = r.stats();
    let w = ralt_written(&e);
    assert!(
        s.checkpoint_write_bytes > 0 && s.unpersisted_bytes == 0,
        "{s:?}"
    );
    // The runs once, plus one manifest.
    assert!(
        w >= s.checkpoint_write_bytes && w < s.checkpoint_write_bytes + 4096,
        "close wrote {w}: {s:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let (r, e, _) = hotspot_run(dir.path(), 0, 60_000);
    let s = r.stats();
    assert!(ralt_written(&e) > 0 && s.run_memory_bytes == 0, "{s:?}");
}

/// Past `run_memory_limit` runs go to disk as without it: with a limit no run fits, the
/// tracker writes exactly what it writes with the option off; with a middle limit some
/// runs are in memory and some on disk, the memory held never passes the limit, and a
/// crash at any point reopens. Hotness decisions do not depend on where runs are.
#[test]
fn over_the_limit_runs_go_to_disk_as_before() {
    let d0 = tempfile::tempdir().unwrap();
    let (r0, e0, hot0) = hotspot_run(d0.path(), 0, 60_000);
    let d1 = tempfile::tempdir().unwrap();
    let (r1, e1, hot1) = hotspot_run(d1.path(), 1, 60_000);
    assert_eq!(ralt_written(&e1), ralt_written(&e0));
    assert_eq!(r1.stats().run_memory_bytes, 0);
    assert_eq!(run_files(d1.path()).len(), run_files(d0.path()).len());
    let d2 = tempfile::tempdir().unwrap();
    let (r2, _, hot2) = hotspot_run(d2.path(), 4 << 20, 60_000);
    assert_eq!(hot2, hot0, "where runs are changes no decision");
    assert_eq!(hot1, hot0);
    assert_eq!(r2.stats().hot_set_size, r0.stats().hot_set_size);
    drop((r0, r1, r2));

    // A middle limit: level 0 files (about 22 KB) fit, level 1 (about 50 KB) does not.
    let limit = 40 << 10;
    let dir = tempfile::tempdir().unwrap();
    let o = RaltOptions {
        run_memory_limit: limit,
        ..hotspot_opts(&HS, ScoringMethod::ExpSmoothing)
    };
    let e = env(dir.path());
    let mut rng = StdRng::seed_from_u64(12);
    let (mut mem_seen, mut disk_seen) = (false, false);
    for round in 0..12 {
        // Each round ends in a crash (drop without close) and a reopen.
        let r =
            Ralt::open(e.clone(), o.clone()).unwrap_or_else(|err| panic!("round {round}: {err}"));
        for i in 0..8_000 {
            access(&r, HS.next(&mut rng), VLEN);
            if i % 200 == 0 {
                let s = r.stats();
                assert!(s.run_memory_bytes <= limit, "{s:?}");
                mem_seen |= s.run_memory_bytes > 0;
                disk_seen |= r.version.load().files().any(|(_, f)| !f.in_memory());
            }
        }
    }
    assert!(
        mem_seen && disk_seen,
        "both kinds of runs were used: {mem_seen} {disk_seen}"
    );
    let r = Ralt::open(e, o).unwrap();
    assert!(recall(&r, &HS.hot_set()) >= 0.8, "{:?}", r.stats());
}

/// Invariant 2 for RALT with runs in memory: a clean close writes them and the manifest,
/// and a reopen resumes exactly (every key's hotness, the hot keys, sizes, clock); the
/// reopened runs are read into memory, and reopening writes nothing.
#[test]
fn clean_close_and_reopen_keep_the_hot_set_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let (before, hot_before, keys_before) = {
        let (r, _, _) = hotspot_run(dir.path(), 4 << 20, 40_000);
        assert!(r.stats().unpersisted_bytes > 0);
        r.flush().unwrap();
        let (hot, keys) = hot_state(&r, HS.n);
        (r.stats(), hot, keys)
    };
    let e = env(dir.path());
    let r = Ralt::open(
        e.clone(),
        RaltOptions {
            run_memory_limit: 4 << 20,
            ..hotspot_opts(&HS, ScoringMethod::ExpSmoothing)
        },
    )
    .unwrap();
    let s = r.stats();
    assert_eq!(
        (
            s.tick,
            s.files,
            s.hot_set_size,
            s.physical_size,
            s.evictions
        ),
        (
            before.tick,
            before.files,
            before.hot_set_size,
            before.physical_size,
            before.evictions
        )
    );
    assert_eq!(
        s.run_memory_bytes, s.file_bytes,
        "reopened runs are in memory"
    );
    assert_eq!(s.unpersisted_bytes, 0);
    assert_eq!(hot_state(&r, HS.n), (hot_before, keys_before));
    assert_eq!(
        r.range_hot_size(b"user000000001000", b"user000000005000"),
        before_range(dir.path())
    );
    assert_eq!(ralt_written(&e), 0);
}

/// `range_hot_size` of the state on disk, from a second open of the same directory.
fn before_range(dir: &std::path::Path) -> u64 {
    let r = Ralt::open(env(dir), hotspot_opts(&HS, ScoringMethod::ExpSmoothing)).unwrap();
    r.range_hot_size(b"user000000001000", b"user000000005000")
}

/// Invariant 2 (crash): a crash (drop without close) after the last checkpoint reopens
/// from it without error, though compactions and evictions since then removed the runs
/// it wrote (their files are kept until the next manifest); the next checkpoint deletes
/// them, leaving exactly the live runs' files.
#[test]
fn crash_reopens_from_the_last_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let o = RaltOptions {
        run_memory_limit: 4 << 20,
        ..hotspot_opts(&HS, ScoringMethod::ExpSmoothing)
    };
    let (at_checkpoint, hot_at_checkpoint) = {
        let (r, e, _) = hotspot_run(dir.path(), 4 << 20, 30_000);
        // The close path (buffers and stage into runs, then a checkpoint), not a close.
        r.flush().unwrap();
        let s = r.stats();
        let hot: Vec<bool> = (0..HS.n).map(|k| r.is_hot(&key(k))).collect();
        let written = ralt_written(&e);
        let mut rng = StdRng::seed_from_u64(99);
        for _ in 0..30_000 {
            access(&r, HS.next(&mut rng), VLEN);
        }
        let later = r.stats();
        assert!(later.evictions > s.evictions, "{later:?}");
        assert_eq!(ralt_written(&e), written, "nothing written since");
        // Files of runs compacted away since the checkpoint are still there.
        assert!(run_files(dir.path()).len() as u64 >= s.files);
        (s, hot)
        // Dropped here without close: the crash.
    };
    let r = Ralt::open(env(dir.path()), o.clone()).unwrap();
    let s = r.stats();
    assert_eq!(
        (s.tick, s.files, s.hot_set_size, s.evictions),
        (
            at_checkpoint.tick,
            at_checkpoint.files,
            at_checkpoint.hot_set_size,
            at_checkpoint.evictions
        )
    );
    let hot: Vec<bool> = (0..HS.n).map(|k| r.is_hot(&key(k))).collect();
    assert_eq!(hot, hot_at_checkpoint);
    let mut rng = StdRng::seed_from_u64(100);
    for _ in 0..30_000 {
        access(&r, HS.next(&mut rng), VLEN);
    }
    r.checkpoint().unwrap();
    assert_eq!(run_files(dir.path()).len() as u64, r.stats().files);
    drop(r);
    Ralt::open(env(dir.path()), o).unwrap();
}

/// The checkpoint trigger: with runs in memory, a checkpoint is due only once the engine's
/// other writes since the last one reach `checkpoint_ratio` times what it would write (the
/// unpersisted runs and a manifest); then maintenance writes exactly those runs, so RALT's
/// writes stay at most 1/`checkpoint_ratio` of the engine's.
#[test]
fn checkpoint_fires_after_the_engine_writes_enough() {
    let dir = tempfile::tempdir().unwrap();
    let (r, e, _) = hotspot_run(dir.path(), 4 << 20, 30_000);
    drive(&r);
    let s = r.stats();
    let ratio = r.opts.checkpoint_ratio;
    let due_at = ratio * (s.unpersisted_bytes + MANIFEST_COST);
    assert!(s.unpersisted_bytes > 0 && !r.needs_maintenance(), "{s:?}");
    engine_writes(&e, "flush-a", (due_at - 1000) as usize);
    assert!(!r.needs_maintenance(), "not due below the ratio");
    engine_writes(&e, "flush-b", 1000);
    assert!(r.needs_maintenance(), "due at the ratio");
    drive(&r);
    let after = r.stats();
    assert_eq!(after.checkpoints, 1, "{after:?}");
    assert_eq!(after.checkpoint_write_bytes, s.unpersisted_bytes);
    assert_eq!(after.unpersisted_bytes, 0);
    let w = ralt_written(&e);
    assert!(
        w * ratio <= due_at + ratio * MANIFEST_COST,
        "RALT wrote {w}"
    );
    // Nothing changed since: no checkpoint however much the engine writes.
    engine_writes(&e, "flush-c", 4 * due_at as usize);
    assert!(!r.needs_maintenance());
    assert_eq!(run_files(dir.path()).len() as u64, after.files);
}

/// The repeat stage resumes after a reopen (issue 46: "the tracker resumes where it
/// stopped"; issue 50: a copy judges as its source): a key judged before a clean close is
/// a repeat at its first read after it, in the store and in a checkpoint's copy; a crash
/// reopens with the window of the last checkpoint; a damaged file leaves an empty window.
#[test]
fn the_repeat_window_survives_close_checkpoint_and_damage() {
    let dir = tempfile::tempdir().unwrap();
    let o = small_opts(1 << 20);
    {
        let r = Ralt::open(env(dir.path()), o.clone()).unwrap();
        assert!(!r.read_again(&key(1), VLEN));
        assert!(r.read_again(&key(1), VLEN));
        assert!(!r.read_again(&key(2), VLEN));
        r.flush().unwrap();
    }
    let r = Ralt::open(env(dir.path()), o.clone()).unwrap();
    assert!(r.remembers(&key(1)) && r.remembers(&key(2)));
    assert!(r.read_again(&key(2), VLEN), "judged before the close");
    assert!(!r.read_again(&key(3), VLEN));
    let copy = dir.path().join("copy");
    r.checkpoint_into(&copy).unwrap();
    assert!(!r.read_again(&key(4), VLEN), "after the checkpoint");
    drop(r); // a crash: the window of the last checkpoint stays
    let r = Ralt::open(env(dir.path()), o.clone()).unwrap();
    assert!(r.remembers(&key(3)) && !r.remembers(&key(4)));
    drop(r);
    let copy_root = dir.path().join("copyroot");
    std::fs::create_dir_all(&copy_root).unwrap();
    std::fs::rename(&copy, copy_root.join("ralt")).unwrap();
    let c = Ralt::open(env(&copy_root), o.clone()).unwrap();
    assert!(c.remembers(&key(1)) && c.remembers(&key(3)) && !c.remembers(&key(4)));
    drop(c);
    let file = copy_root.join(repeat::FILE);
    let mut data = std::fs::read(&file).unwrap();
    let last = data.len() - 1;
    data[last] ^= 1;
    std::fs::write(&file, data).unwrap();
    let c = Ralt::open(env(&copy_root), o).unwrap();
    assert!(!c.remembers(&key(1)), "a damaged window is dropped");
    assert!(!c.read_again(&key(1), VLEN));
}

//! Tests of the cache as a whole: admission and promotion (AC-Key §4.1), ghost hits, the
//! flush updates and the fence (invariant 1), fixed modes, ghost turn-off, and the budget
//! under random mixes of every operation (invariant 4; both in docs/DESIGN.md).

use super::point::POINTER_SIZE;
use super::*;
use crate::sst::block::BlockBuilder;
use crate::sst::format::BlockHandle;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn block(bytes: usize) -> Block {
    let mut b = BlockBuilder::new(16);
    b.add(b"k", &vec![7u8; bytes]);
    Block::new(b.finish().into()).unwrap()
}

fn ptr(file: u64, offset: u64) -> BlockPtr {
    BlockPtr {
        file,
        level: 2,
        handle: BlockHandle { offset, size: 100 },
    }
}

fn cache(capacity: usize, mode: CacheMode) -> Cache {
    let opts = CacheOptions {
        mode,
        ..Default::default()
    };
    Cache::with_options(capacity, &opts, 1024, 4)
}

fn get(c: &Cache, key: &[u8]) -> PointLookup {
    c.lookup_point(key, key_hash(key))
}

fn admit(c: &Cache, key: &[u8], value: &[u8], p: Option<BlockPtr>, warm: bool) {
    c.admit(key, key_hash(key), value, 2, p, warm, c.fence());
}

#[test]
fn first_lookup_goes_to_kp_and_a_kp_hit_to_kv() {
    let c = cache(1 << 20, CacheMode::Adaptive);
    let v = vec![1u8; 100];
    assert_eq!(get(&c, b"a"), PointLookup::Miss { warm: false });
    admit(&c, b"a", &v, Some(ptr(5, 0)), false);
    let st = c.stats();
    assert_eq!((st.kv.entries, st.kp.entries), (0, 1));
    // KP hit: the caller reads the block, then promotes.
    assert_eq!(get(&c, b"a"), PointLookup::Pointer(ptr(5, 0)));
    c.upgrade_to_value(b"a", key_hash(b"a"), &v, ptr(5, 0), c.fence());
    let st = c.stats();
    assert_eq!((st.kv.entries, st.kp.entries, st.promotions), (1, 0, 1));
    assert_eq!(get(&c, b"a"), PointLookup::Value(v.clone()));
    // A promotion with a pointer that is no longer the entry's does nothing.
    admit(&c, b"b", &v, Some(ptr(6, 0)), false);
    c.upgrade_to_value(b"b", key_hash(b"b"), &v, ptr(7, 0), c.fence());
    assert_eq!(get(&c, b"b"), PointLookup::Pointer(ptr(6, 0)));
    // Values no larger than a pointer live in the KP entry and move to KV on their
    // second hit without any block read.
    admit(&c, b"s", b"tiny", Some(ptr(8, 0)), false);
    assert_eq!(c.stats().kp.entries, 2);
    assert_eq!(get(&c, b"s"), PointLookup::Value(b"tiny".to_vec()));
    assert_eq!(c.stats().kv.entries, 2);
    // Warm keys (ghost hits, stale pointers) enter KV directly.
    admit(&c, b"w", &v, Some(ptr(9, 0)), true);
    assert_eq!(get(&c, b"w"), PointLookup::Value(v));
    // A stale pointer is forgotten.
    c.forget(b"b", key_hash(b"b"), ptr(6, 0));
    assert_eq!(get(&c, b"b"), PointLookup::Miss { warm: false });
    assert_eq!(c.stats().stale_pointers, 1);
}

#[test]
fn evicted_keys_come_back_warm_through_the_ghosts() {
    // One shard of 32 KiB holding some blocks and hot KV entries; 200-byte values churn
    // through KP. A ghost's room is what its real cache leaves of its level's size
    // (equations 4 and 5: |G_kp| <= |R_kv|, |G_point| <= S - |R_point|), so the other
    // components must hold something for evictions to be remembered.
    let c = cache(32 << 10, CacheMode::Adaptive);
    assert_eq!(c.slots.len(), 1);
    for off in 0..8 {
        c.insert_block(9, off, block(900));
    }
    let v = vec![3u8; 200];
    for i in 0..20u32 {
        admit(&c, &(100_000 + i).to_be_bytes(), &v, None, true);
    }
    for i in 0..2000u32 {
        let k = i.to_be_bytes();
        if let PointLookup::Miss { warm } = get(&c, &k) {
            admit(&c, &k, &v, Some(ptr(1, i as u64)), warm);
        }
    }
    let st = c.stats();
    assert!(st.kp.evictions > 0, "{st:?}");
    // The first keys were evicted long ago: some are still remembered by G_kp and G_point.
    let mut warm = 0;
    for i in 1700..1900u32 {
        if get(&c, &i.to_be_bytes()) == (PointLookup::Miss { warm: true }) {
            warm += 1;
        }
    }
    let st = c.stats();
    assert!(warm > 0, "{st:?}");
    assert!(st.kp.ghost_hits + st.point_ghost_hits > 0, "{st:?}");
    assert!(st.usage <= st.capacity, "{st:?}");
}

#[test]
fn a_flush_updates_kv_repoints_kp_and_drops_deleted_keys() {
    let c = cache(1 << 20, CacheMode::Adaptive);
    let old = vec![1u8; 100];
    for k in [&b"kv"[..], b"kvdel", b"kp", b"kpdel", b"kpsmall"] {
        admit(&c, k, &old, Some(ptr(3, 0)), k.starts_with(b"kv"));
    }
    let new = vec![2u8; 120];
    let keys = vec![
        FlushedKey {
            key: b"kv",
            value: Some(&new),
        },
        FlushedKey {
            key: b"kvdel",
            value: None,
        },
        FlushedKey {
            key: b"kp",
            value: Some(&new),
        },
        FlushedKey {
            key: b"kpdel",
            value: None,
        },
        FlushedKey {
            key: b"kpsmall",
            value: Some(b"small"),
        },
        FlushedKey {
            key: b"uncached",
            value: Some(b"x"),
        },
    ];
    let before = c.fence();
    c.apply_flush(&keys, 42, |k| {
        assert_eq!(k, b"kp", "only the KP pointer entry needs its block");
        Some(BlockHandle {
            offset: 4096,
            size: 100,
        })
    });
    assert_ne!(c.fence(), before);
    assert_eq!(get(&c, b"kv"), PointLookup::Value(new.clone()));
    assert_eq!(get(&c, b"kvdel"), PointLookup::Miss { warm: false });
    assert_eq!(
        get(&c, b"kp"),
        PointLookup::Pointer(BlockPtr {
            file: 42,
            level: 0,
            handle: BlockHandle {
                offset: 4096,
                size: 100
            }
        })
    );
    assert_eq!(get(&c, b"kpdel"), PointLookup::Miss { warm: false });
    assert_eq!(get(&c, b"kpsmall"), PointLookup::Value(b"small".to_vec()));
    assert_eq!(get(&c, b"uncached"), PointLookup::Miss { warm: false });
    // A KP entry whose block cannot be found in the new table is dropped.
    c.apply_flush(
        &[FlushedKey {
            key: b"kp",
            value: Some(&new),
        }],
        43,
        |_| None,
    );
    assert_eq!(get(&c, b"kp"), PointLookup::Miss { warm: false });
}

#[test]
fn inserts_from_before_a_flush_are_refused() {
    // The race of invariant 1: a reader takes the fence, reads an old version from the
    // levels; a flush of a newer version updates the cache; the reader then inserts.
    let c = cache(1 << 20, CacheMode::Adaptive);
    let fence = c.fence();
    c.apply_flush(
        &[FlushedKey {
            key: b"k",
            value: Some(b"new version"),
        }],
        9,
        |_| None,
    );
    c.admit(b"k", key_hash(b"k"), b"old version", 1, None, true, fence);
    assert_eq!(get(&c, b"k"), PointLookup::Miss { warm: false });
    c.upgrade_to_value(b"k", key_hash(b"k"), b"old", ptr(1, 0), fence);
    assert_eq!(c.stats().inserts_aborted, 2);
    // A reader that started after the flush may insert.
    admit(&c, b"k", b"new version", None, true);
    assert_eq!(get(&c, b"k"), PointLookup::Value(b"new version".to_vec()));
}

#[test]
fn blocks_hit_miss_and_ghost() {
    let c = cache(32 << 10, CacheMode::Adaptive);
    assert!(c.get_block(1, 0).is_none());
    c.insert_block(1, 0, block(900));
    assert!(c.get_block(1, 0).is_some());
    assert_eq!((c.hits(), c.misses()), (1, 1));
    // Point entries hold part of the cache, so G_block has room (|G_block| <= S - |R_block|).
    for i in 0..40u32 {
        admit(&c, &i.to_be_bytes(), &[1u8; 250], None, true);
    }
    // Churn blocks through: evicted ones land in G_block, and a miss on one is a ghost hit
    // that moves the boundary toward the block cache.
    for off in 1..200 {
        c.insert_block(1, off, block(900));
    }
    let (point_before, _) = c.ctl.fractions();
    assert!(c.get_block(1, 150).is_none() || c.get_block(1, 100).is_none());
    let mut ghost_hit = false;
    for off in 100..190 {
        if c.get_block(1, off).is_none() && c.stats().block.ghost_hits > 0 {
            ghost_hit = true;
            break;
        }
    }
    assert!(ghost_hit, "{:?}", c.stats());
    assert!(c.ctl.fractions().0 < point_before);
}

#[test]
fn fixed_modes_keep_their_shares() {
    let v = vec![0u8; 150];
    for mode in [
        CacheMode::BlockOnly,
        CacheMode::KvOnly,
        CacheMode::KpOnly,
        CacheMode::Split {
            kv: 6.0,
            kp: 3.0,
            block: 1.0,
        },
    ] {
        let c = cache(256 << 10, mode);
        let shares = mode.fixed_shares().unwrap();
        for i in 0..5000u32 {
            let k = i.to_be_bytes();
            if c.point_enabled() {
                match get(&c, &k) {
                    PointLookup::Miss { warm } => admit(&c, &k, &v, Some(ptr(1, i as u64)), warm),
                    PointLookup::Pointer(p) => {
                        c.upgrade_to_value(&k, key_hash(&k), &v, p, c.fence())
                    }
                    PointLookup::Value(_) => {}
                }
                let again = (i / 2).to_be_bytes();
                if let PointLookup::Pointer(p) = get(&c, &again) {
                    c.upgrade_to_value(&again, key_hash(&again), &v, p, c.fence());
                }
            }
            if c.get_block(2, i as u64 % 400).is_none() {
                c.insert_block(2, i as u64 % 400, block(900));
            }
        }
        let st = c.stats();
        assert!(st.usage <= st.capacity, "{mode}: {st:?}");
        assert_eq!(st.ghost_bytes, 0, "{mode}: fixed modes keep no ghosts");
        for (comp, share) in [
            (&st.kv, shares[0]),
            (&st.kp, shares[1]),
            (&st.block, shares[2]),
        ] {
            assert!(
                comp.bytes as f64 <= share * st.capacity as f64 + 1.0,
                "{mode}: {comp:?}"
            );
            if share > 0.0 {
                assert!(comp.bytes > 0, "{mode}: {comp:?}");
            } else {
                assert_eq!(comp.entries, 0, "{mode}: {comp:?}");
            }
        }
        if mode == CacheMode::KpOnly {
            assert_eq!(st.promotions, 0);
        }
    }
}

#[test]
fn ghosts_turn_off_on_a_steady_workload_and_give_their_memory_back() {
    let c = cache(128 << 10, CacheMode::Adaptive);
    let v = vec![5u8; 100];
    let mut rng = StdRng::seed_from_u64(3);
    let mut ghost_peak = 0;
    for _ in 0..(16 * WINDOW) {
        // A working set just over the cache's size (so every used component evicts and its
        // ghost learns): ghost hits are rare and the boundaries settle.
        let i: u32 = rng.gen_range(0..600);
        let k = i.to_be_bytes();
        match get(&c, &k) {
            PointLookup::Miss { warm } => admit(&c, &k, &v, Some(ptr(1, i as u64)), warm),
            PointLookup::Pointer(p) => c.upgrade_to_value(&k, key_hash(&k), &v, p, c.fence()),
            PointLookup::Value(_) => {}
        }
        ghost_peak = ghost_peak.max(c.slots[0].shard.lock().ghost_memory());
    }
    let st = c.stats();
    let _ = ghost_peak;
    assert!(!st.ghosts_on && st.ghost_turnoffs >= 1, "{st:?}");
    assert_eq!(st.ghost_bytes, 0, "{st:?}");
    // A new pattern (blocks now) moves the hit ratios: the ghosts come back.
    for i in 0..(3 * WINDOW) {
        let off = i % 50;
        if c.get_block(7, off).is_none() {
            c.insert_block(7, off, block(900));
        }
    }
    let st = c.stats();
    assert!(st.ghost_turnons >= 1, "{st:?}");
}

/// Invariant 4 for a fixed split: a KP entry holding its value inline moves to KV on its
/// second hit, and KV must stay within its own share. The move once let KV pass its share;
/// KP and blocks then refilled theirs and the shard passed its capacity (the budget test
/// below found it with another random sequence).
#[test]
fn inline_kp_hits_keep_a_fixed_split_within_its_shares() {
    let mode = CacheMode::Split {
        kv: 1.0,
        kp: 1.0,
        block: 1.0,
    };
    let c = cache(64 << 10, mode);
    let v = [7u8; POINTER_SIZE]; // small enough to live inline in KP
    for round in 0..4u64 {
        for i in 0..3000u32 {
            let k = (i + round as u32 * 700).to_be_bytes();
            if let PointLookup::Miss { warm } = get(&c, &k) {
                admit(&c, &k, &v, None, warm);
            }
            // The second hit moves it to KV.
            let _ = get(&c, &k);
            if i % 3 == 0 && c.get_block(round, i as u64).is_none() {
                c.insert_block(round, i as u64, block(900));
            }
        }
        for slot in c.slots.iter() {
            let s = slot.shard.lock();
            let share = s.capacity() / 3;
            for comp in [Comp::Kv, Comp::Kp, Comp::Block] {
                assert!(
                    s.bytes(comp) <= share,
                    "round {round}: {comp:?} over its share"
                );
            }
            assert!(s.usage() <= s.capacity(), "round {round}");
        }
    }
    assert!(c.stats().promotions > 0, "no inline KP entry was hit twice");
}

/// Invariant 4: whatever the mix of lookups, admissions, promotions, blocks, flushes and
/// target moves, the cache never charges more than its budget.
#[test]
fn the_budget_holds_under_any_mix() {
    budget_holds_under_any_mix(false);
}

/// Invariant 4 with the budget resized (up and down, `Cache::set_capacity`) every few
/// hundred operations of the same mixes.
#[test]
fn the_budget_holds_under_any_mix_with_resizes() {
    budget_holds_under_any_mix(true);
}

/// The mixes of [`the_budget_holds_under_any_mix`]; with `resizes`, a second generator (so
/// the mixes stay the same) resizes the cache between 4 KiB and 600 KiB now and then.
fn budget_holds_under_any_mix(resizes: bool) {
    for (seed, mode) in [
        (1, CacheMode::Adaptive),
        (2, CacheMode::Adaptive),
        (3, CacheMode::KvOnly),
        (4, CacheMode::KpOnly),
        (5, CacheMode::BlockOnly),
        (
            6,
            CacheMode::Split {
                kv: 1.0,
                kp: 1.0,
                block: 1.0,
            },
        ),
    ] {
        let mut rng = StdRng::seed_from_u64(seed);
        let capacity = rng.gen_range(8 << 10..600 << 10);
        let opts = CacheOptions {
            mode,
            learning_rate: [0.0, 1e3, 1e5, 1e8][rng.gen_range(0..4)],
            ghost_turnoff: [0.0, 0.05, 1.0][rng.gen_range(0..3)],
        };
        let c = Cache::with_options(capacity, &opts, 1024, 4);
        let mut resizer = StdRng::seed_from_u64(seed + 1000);
        for step in 0..40_000 {
            if resizes && resizer.gen_range(0..300) == 0 {
                let to = resizer.gen_range(4 << 10..600 << 10);
                c.set_capacity(to).unwrap();
                let st = c.stats();
                assert_eq!(st.capacity, to);
                assert!(st.usage <= to, "seed {seed} {mode} step {step}: {st:?}");
            }
            let i: u64 = rng.gen_range(0..4000);
            let k = i.to_be_bytes();
            let vlen = match rng.gen_range(0..10) {
                0 => rng.gen_range(0..24),
                1 => rng.gen_range(1000..9000),
                _ => rng.gen_range(24..300),
            };
            let v = vec![i as u8; vlen];
            match rng.gen_range(0..10) {
                0..=4 => match get(&c, &k) {
                    PointLookup::Miss { warm } => {
                        let p = rng.gen_bool(0.9).then(|| ptr(i % 7, i));
                        c.admit(
                            &k,
                            key_hash(&k),
                            &v,
                            rng.gen_range(0..6),
                            p,
                            warm,
                            c.fence(),
                        );
                    }
                    PointLookup::Pointer(p) => {
                        if rng.gen_bool(0.8) {
                            c.upgrade_to_value(&k, key_hash(&k), &v, p, c.fence());
                        } else {
                            c.forget(&k, key_hash(&k), p);
                        }
                    }
                    PointLookup::Value(_) => {}
                },
                5..=8 => {
                    let off = rng.gen_range(0..600);
                    if c.get_block(i % 5, off).is_none() {
                        c.insert_block(i % 5, off, block(rng.gen_range(10..3000)));
                    }
                }
                _ => {
                    let owned: Vec<([u8; 8], Option<Vec<u8>>)> = (0..rng.gen_range(1..50))
                        .map(|_| {
                            let j: u64 = rng.gen_range(0..4000);
                            let len = rng.gen_range(0..2000);
                            (j.to_be_bytes(), rng.gen_bool(0.8).then(|| vec![1u8; len]))
                        })
                        .collect();
                    let keys: Vec<FlushedKey> = owned
                        .iter()
                        .map(|(k, v)| FlushedKey {
                            key: k,
                            value: v.as_deref(),
                        })
                        .collect();
                    let with_handles = rng.gen_bool(0.7);
                    c.apply_flush(&keys, 1000 + step, |_| {
                        with_handles.then_some(BlockHandle {
                            offset: 0,
                            size: 10,
                        })
                    });
                }
            }
            if step % 97 == 0 {
                let st = c.stats();
                assert!(
                    st.usage <= st.capacity,
                    "seed {seed} {mode} step {step}: {st:?}"
                );
            }
            for slot in c.slots.iter() {
                let s = slot.shard.lock();
                assert!(s.usage() <= s.capacity(), "seed {seed} {mode} step {step}");
            }
        }
        let st = c.stats();
        assert!(
            st.usage <= st.capacity && st.usage > 0,
            "seed {seed}: {st:?}"
        );
    }
}

/// Fills `c` with keys `from..to`: each looked up twice (into KP, then KV, or a value read
/// back, which must be the key's) and a 900-byte block per key.
fn fill(c: &Cache, from: u32, to: u32) {
    for i in from..to {
        let k = i.to_be_bytes();
        let v = vec![i as u8; 200];
        for _ in 0..2 {
            match get(c, &k) {
                PointLookup::Miss { warm } => admit(c, &k, &v, Some(ptr(1, i.into())), warm),
                PointLookup::Pointer(p) => c.upgrade_to_value(&k, key_hash(&k), &v, p, c.fence()),
                PointLookup::Value(got) => assert_eq!(got, v, "key {i}"),
            }
        }
        if c.get_block(2, i.into()).is_none() {
            c.insert_block(2, i.into(), block(900));
        }
    }
}

/// Every shard's usage within its capacity, and each capacity the budget's share.
fn assert_shards_within(c: &Cache, per_shard: usize) {
    for slot in c.slots.iter() {
        let s = slot.shard.lock();
        assert_eq!(s.capacity(), per_shard);
        assert!(s.usage() <= per_shard, "{} > {per_shard}", s.usage());
    }
}

/// `Cache::set_capacity`: a shrink evicts down to the new budget before it returns (every
/// shard), a grow lets new entries fill the larger budget, the shard count stays, values
/// read back right throughout, the stats report the new capacity and the adaptive targets
/// cover the new real capacity. 0 and absurd sizes are refused, naming the value.
#[test]
fn resizing_shrinks_at_once_and_grows_into_the_new_budget() {
    const MIB: usize = 1 << 20;
    for mode in [
        CacheMode::Adaptive,
        CacheMode::BlockOnly,
        CacheMode::KvOnly,
        CacheMode::Split {
            kv: 1.0,
            kp: 1.0,
            block: 1.0,
        },
    ] {
        let c = cache(MIB, mode);
        let shards = c.stats().shards;
        assert_eq!(shards, 32, "{mode}");
        fill(&c, 0, 8000);
        let st = c.stats();
        assert!(st.usage > MIB / 2, "{mode}: {st:?}");

        c.set_capacity(MIB / 4).unwrap();
        let st = c.stats();
        assert_eq!((st.capacity, st.shards), (MIB / 4, shards), "{mode}");
        assert!(st.usage <= MIB / 4, "{mode}: {st:?}");
        assert_shards_within(&c, MIB / 4 / shards);
        fill(&c, 8000, 10_000);
        assert!(c.stats().usage <= MIB / 4, "{mode}");

        c.set_capacity(4 * MIB).unwrap();
        fill(&c, 10_000, 40_000);
        let st = c.stats();
        assert_eq!((st.capacity, st.shards), (4 * MIB, shards), "{mode}");
        assert!(
            st.usage > MIB && st.usage <= 4 * MIB,
            "{mode}: new entries must fill the larger budget: {st:?}"
        );
        assert_shards_within(&c, 4 * MIB / shards);
        // Values stay right: the last keys are cached, the first long evicted.
        fill(&c, 39_000, 40_000);
        fill(&c, 0, 100);
        let targets = st.kv.target + st.kp.target + st.block.target;
        if mode == CacheMode::Adaptive {
            let real = st.capacity - st.ghost_bytes;
            assert!(targets.abs_diff(real) <= shards, "{targets} vs {real}");
        } else {
            assert!(targets <= st.capacity && targets + shards >= st.capacity);
        }

        for bad in [0, MAX_CACHE_CAPACITY + 1] {
            match c.set_capacity(bad) {
                Err(crate::error::Error::InvalidArgument(m)) => {
                    assert!(m.contains(&bad.to_string()), "{m}")
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
        assert_eq!(c.capacity(), 4 * MIB);
    }
}

//! Model test for the merging and user iterators: random versions spread over several
//! sources must read, in both directions, with seeks, snapshots and bounds, exactly like a
//! BTreeMap model of the same history (docs/DESIGN.md invariant 1: a read sees exactly the writes
//! ordered before its snapshot).

use super::*;
use crate::key::{make_internal_key, SeqNo, ValueKind};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

type History = Vec<(Vec<u8>, SeqNo, Option<Vec<u8>>)>;

fn model_at(history: &History, snapshot: SeqNo) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut m = BTreeMap::new();
    for (k, seq, v) in history {
        if *seq <= snapshot {
            match v {
                Some(v) => m.insert(k.clone(), v.clone()),
                None => m.remove(k),
            };
        }
    }
    m
}

fn build(history: &History, sources: usize, rng: &mut StdRng) -> MergingIterator {
    let mut parts: Vec<Vec<(Vec<u8>, Vec<u8>)>> = vec![Vec::new(); sources];
    for (k, seq, v) in history {
        let kind = if v.is_some() {
            ValueKind::Value
        } else {
            ValueKind::Delete
        };
        let ikey = make_internal_key(k, *seq, kind);
        parts[rng.gen_range(0..sources)].push((ikey, v.clone().unwrap_or_default()));
    }
    let children = parts
        .into_iter()
        .map(|mut p| {
            p.sort_by(|a, b| crate::key::compare_internal(&a.0, &b.0));
            Box::new(VecIterator::new(p)) as Box<dyn InternalIterator>
        })
        .collect();
    MergingIterator::new(children)
}

fn key(i: u32) -> Vec<u8> {
    format!("k{i:03}").into_bytes()
}

#[test]
fn user_iterator_matches_model_in_every_direction() {
    // Seeds from 40 on write a few keys many times each: their runs of versions, longer
    // than MAX_SEQUENTIAL_SKIP, are jumped over by seeks.
    for seed in 0..80 {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut history = History::new();
        let keys = if seed < 40 { 40 } else { rng.gen_range(1..5) };
        for seq in 1..rng.gen_range(1..300) {
            let k = key(rng.gen_range(0..keys));
            let v = rng.gen_bool(0.7).then(|| format!("v{seq}").into_bytes());
            history.push((k, seq, v));
        }
        let last = history.len() as SeqNo;
        let snapshot = rng.gen_range(0..=last);
        let lower = rng.gen_bool(0.3).then(|| key(rng.gen_range(0..40)));
        let upper = rng.gen_bool(0.3).then(|| key(rng.gen_range(0..40)));
        let model: BTreeMap<_, _> = model_at(&history, snapshot)
            .into_iter()
            .filter(|(k, _)| {
                lower.as_ref().is_none_or(|l| k >= l) && upper.as_ref().is_none_or(|u| k < u)
            })
            .collect();
        let expected: Vec<_> = model.clone().into_iter().collect();
        let merged = build(&history, rng.gen_range(1..5), &mut rng);
        let mut it = UserIterator::new(merged, snapshot, lower.clone(), upper.clone());

        it.seek_to_first().unwrap();
        let mut fwd = Vec::new();
        while it.valid() {
            fwd.push((it.key().to_vec(), it.value().to_vec()));
            it.next().unwrap();
        }
        assert_eq!(fwd, expected, "forward, seed {seed}");

        it.seek_to_last().unwrap();
        let mut back = Vec::new();
        while it.valid() {
            back.push((it.key().to_vec(), it.value().to_vec()));
            it.prev().unwrap();
        }
        back.reverse();
        assert_eq!(back, expected, "backward, seed {seed}");

        // Random walks mixing seeks and direction changes.
        for _ in 0..50 {
            let target = key(rng.gen_range(0..42));
            let mut cursor: Option<Vec<u8>> = if rng.gen_bool(0.5) {
                it.seek(&target).unwrap();
                model.range(target.clone()..).next().map(|(k, _)| k.clone())
            } else {
                it.seek_for_prev(&target).unwrap();
                model
                    .range(..=target.clone())
                    .next_back()
                    .map(|(k, _)| k.clone())
            };
            for _ in 0..6 {
                assert_eq!(it.valid(), cursor.is_some(), "seed {seed}");
                let Some(c) = cursor.clone() else { break };
                assert_eq!(it.key(), c.as_slice());
                assert_eq!(it.value(), model[&c].as_slice());
                if rng.gen_bool(0.5) {
                    it.next().unwrap();
                    cursor = model
                        .range((std::ops::Bound::Excluded(c), std::ops::Bound::Unbounded))
                        .next()
                        .map(|(k, _)| k.clone());
                } else {
                    it.prev().unwrap();
                    cursor = model.range(..c).next_back().map(|(k, _)| k.clone());
                }
            }
        }
    }
}

#[test]
fn merging_iterator_yields_the_sorted_union_both_ways() {
    let mut rng = StdRng::seed_from_u64(9);
    let history: History = (1..200)
        .map(|s| (key(rng.gen_range(0..50)), s, Some(vec![1])))
        .collect();
    let mut all: Vec<Vec<u8>> = history
        .iter()
        .map(|(k, s, _)| make_internal_key(k, *s, ValueKind::Value))
        .collect();
    all.sort_by(|a, b| crate::key::compare_internal(a, b));
    let mut m = build(&history, 4, &mut rng);
    m.seek_to_first().unwrap();
    let mut got = Vec::new();
    while m.valid() {
        got.push(m.key().to_vec());
        m.next().unwrap();
    }
    assert_eq!(got, all);
    // Direction switch in the middle.
    m.seek(&all[100]).unwrap();
    m.prev().unwrap();
    assert_eq!(m.key(), all[99].as_slice());
    m.next().unwrap();
    m.next().unwrap();
    assert_eq!(m.key(), all[101].as_slice());
}

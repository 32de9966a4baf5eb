//! Preemptive pushdown against the version invariants (docs/DESIGN.md): random stores of
//! four levels compacted level by level with pushdown on and off, checked after every
//! compaction for the same visible data (latest state and a snapshot: invariant 1), files
//! of each level disjoint (the manifest's apply refuses an overlapping edit) and, for
//! every key, newer versions never below older ones; plus where single keys land.

use crate::compaction::job::{self, JobContext, JobOutput};
use crate::compaction::{picker, Compaction, RangeClaim};
use crate::env::{Env, IoCause, Tier};
use crate::iter::InternalIterator;
use crate::key::{compare_internal, make_internal_key, parse_internal_key, seek_key, user_key};
use crate::key::{ValueKind, MAX_SEQ};
use crate::sst::{Compression, TableBuilder, TableOptions};
use crate::tiers::LevelLayout;
use crate::version::{
    table_file_name, FileMeta, LevelGet, NewFile, TableCache, Version, VersionEdit, VersionSet,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const LEVELS: usize = 5;

fn ukey(i: u32) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

fn table_options(bloom: bool) -> TableOptions {
    TableOptions {
        block_size: 512,
        restart_interval: 4,
        bloom_bits_per_key: if bloom { 10 } else { 0 },
        filter_min_record_bytes: 0,
        compression: Compression::None,
        block_records: Some(4),
    }
}

/// L0 on the fast tier, L1..L4 on the slow tier (so every compaction merges into it).
fn layout() -> Arc<LevelLayout> {
    let mut tiers = vec![Tier::Slow; LEVELS];
    tiers[0] = Tier::Fast;
    Arc::new(LevelLayout {
        targets: vec![1 << 20; LEVELS],
        tiers,
        last_fast_level: 0,
    })
}

struct Store {
    _dir: tempfile::TempDir,
    env: Arc<Env>,
    tables: Arc<TableCache>,
    vs: VersionSet,
    next: AtomicU64,
    semi: bool,
}

impl Store {
    fn new(semi: bool) -> Store {
        let dir = tempfile::tempdir().unwrap();
        let env = Env::single(dir.path(), false).unwrap();
        let tables = Arc::new(TableCache::new(env.clone(), 1000, None));
        let (vs, _) = VersionSet::open(env.clone(), layout(), true, false).unwrap();
        Store {
            _dir: dir,
            env,
            tables,
            vs,
            next: AtomicU64::new(10_000),
            semi,
        }
    }

    /// Writes `entries` (sorted) as one table of `level`.
    fn table(&self, level: usize, entries: &[(Vec<u8>, Vec<u8>)], bloom: bool) -> NewFile {
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        let file = self
            .env
            .create_writable(Tier::Slow, &table_file_name(number), IoCause::Flush)
            .unwrap();
        let info = if self.semi {
            let mut w = crate::sst::semi::GenerationWriter::new(file, table_options(bloom));
            for (k, v) in entries {
                w.add(k, v).unwrap();
            }
            w.finish().unwrap()
        } else {
            let mut b = TableBuilder::new(file, table_options(bloom));
            for (k, v) in entries {
                b.add(k, v).unwrap();
            }
            b.finish().unwrap()
        };
        NewFile::from_table(level, number, Tier::Slow, info)
    }

    fn install(&mut self, added: Vec<NewFile>) {
        self.vs
            .log_and_apply(VersionEdit {
                added,
                ..Default::default()
            })
            .unwrap();
    }

    /// Runs `c` (pushdown limit as set) and installs its edit; the manifest's apply
    /// refuses an edit that makes two files of a level overlap.
    fn compact(&mut self, c: &Compaction, snapshot: u64, reuse: bool) -> JobOutput {
        let v = self.vs.current();
        let alloc = || self.next.fetch_add(1, Ordering::Relaxed);
        let ctx = JobContext {
            env: &self.env,
            tables: &self.tables,
            table_options: table_options(true),
            semi_table_options: table_options(true),
            last_level_filters: crate::options::LastLevelFilters::Always,
            target_file_size: 4096,
            smallest_snapshot: snapshot,
            version: &v,
            new_file_number: &alloc,
            hot: None,
            spill_to_slow: false,
            block_reuse: reuse,
            semi_sorted: self.semi,
            now: 0,
        };
        let mut out = job::run(c, &ctx).unwrap();
        let edit = std::mem::take(&mut out.edit);
        out.edit = edit.clone();
        self.vs.log_and_apply(edit).unwrap();
        out
    }

    /// Every (user key -> [(level, seq)]) of the current version.
    fn placement(&self) -> BTreeMap<Vec<u8>, Vec<(usize, u64)>> {
        let mut out: BTreeMap<Vec<u8>, Vec<(usize, u64)>> = BTreeMap::new();
        for (level, f) in self.vs.current().all_files() {
            let t = self.tables.get(f, IoCause::Check).unwrap();
            assert_eq!(t.verify(IoCause::Check).unwrap(), f.info.num_entries);
            let mut it = t.iter(IoCause::Check, false);
            it.seek_to_first().unwrap();
            while it.valid() {
                let k = parse_internal_key(it.key()).unwrap();
                out.entry(k.user_key.to_vec())
                    .or_default()
                    .push((level, k.seq));
                it.next().unwrap();
            }
        }
        out
    }
}

fn compaction(v: &Version, level: usize, inputs: Vec<Arc<FileMeta>>) -> Compaction {
    let (lo, hi) = picker::key_range(&inputs).unwrap();
    Compaction {
        level,
        output_level: level + 1,
        output_inputs: v.overlapping(level + 1, Some(&lo), Some(&hi)),
        inputs,
        output_tier: Tier::Slow,
        reason: "test",
        pushdown: None,
    }
}

/// Invariant 1 in the levels: for every key, each level's versions are all newer than
/// every version of a deeper level.
fn check_newer_above_older(p: &BTreeMap<Vec<u8>, Vec<(usize, u64)>>, what: &str) {
    for (k, versions) in p {
        for a in versions {
            for b in versions {
                if a.0 >= 1 && a.0 < b.0 {
                    assert!(
                        a.1 > b.1,
                        "{what}: key {:?} has seq {} at L{} above seq {} at L{}",
                        String::from_utf8_lossy(k),
                        a.1,
                        a.0,
                        b.1,
                        b.0
                    );
                }
            }
        }
    }
}

/// The model: every version written, per key (seq, value; `None` a tombstone).
type Model = BTreeMap<u32, Vec<(u64, Option<Vec<u8>>)>>;

fn expected(model: &Model, k: u32, at: u64) -> Option<Vec<u8>> {
    model
        .get(&k)?
        .iter()
        .filter(|(s, _)| *s <= at)
        .max_by_key(|(s, _)| *s)?
        .1
        .clone()
}

fn check_reads(store: &Store, model: &Model, universe: u32, snapshot: u64, what: &str) {
    let v = store.vs.current();
    for k in 0..universe {
        for at in [MAX_SEQ, snapshot] {
            let hit = v
                .get(
                    &store.tables,
                    &seek_key(&ukey(k), at),
                    0..=LEVELS - 1,
                    IoCause::Check,
                )
                .unwrap();
            let got = match hit.map(|h| h.result) {
                Some(LevelGet::Found(b)) => Some(b.to_vec()),
                _ => None,
            };
            assert_eq!(got, expected(model, k, at), "{what}: key {k} at seq {at}");
        }
    }
}

/// A random store: every level 1..=4 holds a random key set (clusters and sparse spreads,
/// so levels have gaps), older the deeper; some keys have two versions, some tombstones.
fn random_store(rng: &mut StdRng, semi: bool, universe: u32) -> (Store, Model) {
    let mut store = Store::new(semi);
    let mut model = Model::new();
    let mut added = Vec::new();
    for level in (1..LEVELS).rev() {
        let mut keys: Vec<u32> = Vec::new();
        for _ in 0..rng.gen_range(1..=5) {
            let start = rng.gen_range(0..universe);
            let width = rng.gen_range(5..(universe / 4));
            let density = rng.gen_range(0.05..0.6);
            keys.extend((start..(start + width).min(universe)).filter(|_| rng.gen_bool(density)));
        }
        keys.sort_unstable();
        keys.dedup();
        // Sequence numbers grow with height: level 4 holds the oldest versions.
        let mut seq = (LEVELS - level) as u64 * 100_000;
        let mut entries = Vec::new();
        for &k in &keys {
            let versions = rng.gen_range(1..=2);
            for _ in 0..versions {
                seq += 1;
                let tombstone = rng.gen_bool(0.1);
                let value = if tombstone {
                    None
                } else {
                    Some(format!("v{k}-{seq}").into_bytes())
                };
                let kind = if tombstone {
                    ValueKind::Delete
                } else {
                    ValueKind::Value
                };
                entries.push((
                    make_internal_key(&ukey(k), seq, kind),
                    value.clone().unwrap_or_default(),
                ));
                model.entry(k).or_default().push((seq, value));
            }
        }
        entries.sort_by(|a, b| compare_internal(&a.0, &b.0));
        // Files of 20-60 entries, never splitting a user key.
        let mut file: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut limit = rng.gen_range(20..60);
        for e in entries {
            let split = file.len() >= limit
                && file
                    .last()
                    .is_some_and(|l| user_key(&l.0) != user_key(&e.0));
            if split {
                added.push(store.table(level, &file, rng.gen_bool(0.8)));
                file.clear();
                limit = rng.gen_range(20..60);
            }
            file.push(e);
        }
        if !file.is_empty() {
            added.push(store.table(level, &file, rng.gen_bool(0.8)));
        }
    }
    store.install(added);
    (store, model)
}

/// Random compactions (a random file of a random level into the next), with and without
/// pushdown, sorted and semi-sorted: after each, the reads match the model at the latest
/// state and at the oldest snapshot, the levels stay disjoint and newer versions stay
/// above older ones (invariant 1). With pushdown some compactions must push.
#[test]
fn pushdown_keeps_the_visible_data_and_the_level_order() {
    let universe = 1500;
    for semi in [false, true] {
        let mut pushed_total = 0u64;
        for seed in 0..6u64 {
            for push in [false, true] {
                let mut rng = StdRng::seed_from_u64(seed);
                let (mut store, model) = random_store(&mut rng, semi, universe);
                // Versions older than a newer one at or below it may go.
                let snapshot = rng.gen_range(100_000..400_000);
                let what = format!("seed {seed} semi {semi} pushdown {push}");
                check_reads(&store, &model, universe, snapshot, &what);
                for step in 0..30 {
                    let v = store.vs.current();
                    let levels: Vec<usize> = (1..LEVELS - 1)
                        .filter(|&l| !v.levels[l].is_empty())
                        .collect();
                    if levels.is_empty() {
                        break;
                    }
                    let level = levels[rng.gen_range(0..levels.len())];
                    let f = v.levels[level][rng.gen_range(0..v.levels[level].len())].clone();
                    let mut c = compaction(&v, level, vec![f]);
                    if push {
                        c.pushdown = super::limit(&v, &c, &[]);
                    }
                    let out = store.compact(&c, snapshot, rng.gen_bool(0.5));
                    assert!(push || out.pushed_bytes == 0);
                    pushed_total += out.pushed_bytes;
                    for f in &out.edit.added {
                        assert!(
                            f.level == c.output_level || c.pushdown.is_some_and(|d| f.level <= d),
                            "{what} step {step}: output at L{} past the limit",
                            f.level
                        );
                    }
                    let what = format!("{what} step {step}");
                    check_newer_above_older(&store.placement(), &what);
                    check_reads(&store, &model, universe, snapshot, &what);
                }
            }
        }
        assert!(
            pushed_total > 0,
            "semi {semi}: no compaction pushed anything"
        );
    }
}

/// Where single keys land: a run in a gap of every level below goes to the deepest level;
/// a key an intermediate level may hold stays above it; a key that level's filter rules
/// out goes past it. `bloom`: the intermediate level's table has a filter.
fn placement_case(bloom: bool, semi: bool) {
    let mut store = Store::new(semi);
    let entries = |keys: &[u32], seq: u64| -> Vec<(Vec<u8>, Vec<u8>)> {
        keys.iter()
            .enumerate()
            .map(|(i, &k)| {
                (
                    make_internal_key(&ukey(k), seq + i as u64, ValueKind::Value),
                    b"v".to_vec(),
                )
            })
            .collect()
    };
    let range = |a: u32, b: u32| (a..=b).collect::<Vec<u32>>();
    let victim: Vec<u32> = range(100, 110).into_iter().chain(range(500, 510)).collect();
    let added = vec![
        store.table(1, &entries(&victim, 4000), true),
        // L2: one file inside the victim's range (so the merge is not a trivial move)
        // and two outside.
        store.table(2, &entries(&range(0, 50), 3000), true),
        store.table(2, &entries(&range(200, 210), 3100), true),
        store.table(2, &entries(&range(900, 950), 3200), true),
        // L3: one file whose range covers 300..=505, holding 300 and 505.
        store.table(3, &entries(&[300, 505], 2000), bloom),
        // L4: two files leaving 11..=989 a gap.
        store.table(4, &entries(&range(0, 10), 1000), true),
        store.table(4, &entries(&range(990, 999), 1100), true),
    ];
    store.install(added);
    let v = store.vs.current();
    let mut c = compaction(&v, 1, v.levels[1].clone());
    c.pushdown = super::limit(&v, &c, &[]);
    assert_eq!(c.pushdown, Some(4), "L4 is the deepest level holding data");
    let out = store.compact(&c, MAX_SEQ, true);
    assert!(out.pushed_bytes > 0);
    let p = store.placement();
    let level_of = |k: u32| -> Vec<usize> { p[&ukey(k)].iter().map(|(l, _)| *l).collect() };
    for k in range(100, 110).into_iter().chain(range(506, 510)) {
        assert_eq!(
            level_of(k),
            vec![4],
            "key {k} overlaps nothing below: deepest level"
        );
    }
    // 505 has a version in L3: the newer one must stay above it, at the output level.
    let mut l505 = level_of(505);
    l505.sort_unstable();
    assert_eq!(l505, vec![2, 3], "key 505 stays above its older version");
    for k in 500..505 {
        let expect = if bloom { vec![4] } else { vec![2] };
        assert_eq!(
            level_of(k),
            expect,
            "key {k} lies in the range of an L3 file (filter: {bloom})"
        );
    }
    check_newer_above_older(&p, "placement");
}

#[test]
fn a_run_overlapping_nothing_goes_to_the_deepest_level() {
    for semi in [false, true] {
        placement_case(true, semi);
    }
}

#[test]
fn a_key_an_intermediate_level_may_hold_is_not_pushed_past_it() {
    for semi in [false, true] {
        placement_case(false, semi);
    }
}

/// The limit leaves out levels a running compaction writes over the range, and every
/// level below the first of them.
#[test]
fn pushdown_limit_respects_running_claims() {
    let mut store = Store::new(false);
    let e = |k: u32, seq: u64| vec![(make_internal_key(&ukey(k), seq, ValueKind::Value), vec![])];
    let added = vec![
        store.table(1, &e(100, 40), true),
        store.table(2, &e(100, 30), true),
        store.table(3, &e(5, 20), true),
        store.table(4, &e(5, 10), true),
    ];
    store.install(added);
    let v = store.vs.current();
    let c = compaction(&v, 1, v.levels[1].clone());
    assert_eq!(super::limit(&v, &c, &[]), Some(4));
    let claim = |levels: [usize; 2], lo: u32, hi: u32| RangeClaim {
        levels,
        lo: ukey(lo),
        hi: ukey(hi),
    };
    // Elsewhere in the key space: no effect.
    assert_eq!(super::limit(&v, &c, &[claim([4, 4], 500, 600)]), Some(4));
    assert_eq!(super::limit(&v, &c, &[claim([4, 4], 50, 150)]), Some(3));
    assert_eq!(super::limit(&v, &c, &[claim([2, 3], 50, 150)]), None);
    assert_eq!(super::limit(&v, &c, &[claim([3, 3], 100, 100)]), None);
    // The compaction's own claim covers every level it may write.
    let mut c = c;
    c.pushdown = Some(4);
    let own = c.range_claim(&v.layout).unwrap();
    assert_eq!(own.levels, [2, 4]);
    assert!(own.conflicts([3, 3], &ukey(100), &ukey(100)));
}

//! Workloads: what an operation mix ([`crate::mix`]) over a key distribution
//! ([`crate::distribution`]), a trace or F2's key files ([`crate::keyfile`]) generates: record keys and values, and the
//! deterministic operation plan every system replays. Knows nothing of the systems or how
//! the plan is run.
//!
//! The run phase is cut into chunks of [`CHUNK`] operations. Chunk `c` is generated from
//! seeds derived from `(seed, c)` alone, so every system sees exactly the same operations
//! however its client threads interleave, and threads can claim chunks dynamically (no
//! thread idles at the end waiting for a slow sibling). Inserted ids are dense: a prefix sum of
//! the inserts in earlier chunks, computed up front from the operation-type stream, gives
//! each chunk its first new id.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

use crate::distribution::{DistSpec, KeyChooser};
use crate::error::{BenchError, Result};
use crate::keyfile::{key_bytes, KeyFiles};
use crate::mix::{Mix, Workload};
use crate::trace::{Trace, TraceOpKind};

/// Operations per chunk of the plan.
pub const CHUNK: u64 = 16;
/// Bytes of a generated key by default: `user` and 20 digits.
pub const KEY_SIZE: usize = 24;
/// The shortest generated key: the 8-byte hash of the record id.
pub const MIN_KEY_SIZE: usize = 8;
/// Longest scan of workload E (YCSB's `maxscanlength` for E is 100).
pub const MAX_SCAN: u32 = 100;

/// Kind of one generated operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// Point read.
    Read,
    /// Overwrite of an existing record.
    Update,
    /// Write of a new record.
    Insert,
    /// Range scan of `len` records from the key.
    Scan,
    /// Read, then write the same key.
    ReadModifyWrite,
    /// Delete (trace replay only).
    Delete,
}

impl OpKind {
    /// Every kind, in the order reports list them.
    pub const ALL: [OpKind; 6] = [
        OpKind::Read,
        OpKind::Update,
        OpKind::Insert,
        OpKind::ReadModifyWrite,
        OpKind::Scan,
        OpKind::Delete,
    ];

    /// The name reports give the kind (YCSB's).
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Read => "read",
            OpKind::Update => "update",
            OpKind::Insert => "insert",
            OpKind::Scan => "scan",
            OpKind::ReadModifyWrite => "read-modify-write",
            OpKind::Delete => "delete",
        }
    }
}

/// One operation of the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Op {
    /// What to do.
    pub kind: OpKind,
    /// The record (see [`OpPlan::key`]).
    pub id: u64,
    /// Scan length for scans; value size for writes.
    pub len: u32,
    /// Global index of the operation (makes written values differ between versions).
    pub index: u64,
    /// Time to live of a write, in seconds (0: none; only trace writes have one).
    pub ttl_secs: u32,
}

/// Writes the key of synthetic record `id`: `user` followed by 20 digits of a bijective hash
/// of the id, so consecutive ids land far apart in key order (YCSB's hashed inserts).
pub fn synthetic_key(id: u64, out: &mut Vec<u8>) {
    use std::io::Write;
    out.clear();
    // Infallible on a Vec.
    let _ = write!(out, "user{:020}", mix64(id));
}

/// Writes a `size`-byte key of synthetic record `id`: [`synthetic_key`] for the default
/// 24 bytes; otherwise the big-endian 8-byte hash of the id (distinct for distinct ids),
/// padded with zeros (`size` >= [`MIN_KEY_SIZE`]; shorter sizes are treated as 8).
pub fn synthetic_key_sized(id: u64, size: usize, out: &mut Vec<u8>) {
    if size == KEY_SIZE {
        return synthetic_key(id, out);
    }
    out.clear();
    out.extend_from_slice(&mix64(id).to_be_bytes());
    out.resize(size.max(MIN_KEY_SIZE), 0);
}

/// splitmix64's finalizer: a bijection on u64 with good avalanche.
pub fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Value bytes: slices of one random buffer, at offsets that depend on the record and the
/// version, so values are incompressible and differ between writes without generating
/// fresh random bytes per operation.
pub struct ValueSource {
    buf: Vec<u8>,
}

impl ValueSource {
    /// A source for values up to `max_len` bytes.
    pub fn new(seed: u64, max_len: usize) -> ValueSource {
        let len = (2 * max_len).max(1 << 20);
        let mut rng = SmallRng::seed_from_u64(seed ^ 0x5eed_da7a);
        let mut buf = vec![0u8; len];
        rng.fill(&mut buf[..]);
        ValueSource { buf }
    }

    /// The value of record `id` written by operation `version` (`len` bytes).
    pub fn value(&self, id: u64, version: u64, len: usize) -> &[u8] {
        let len = len.min(self.buf.len());
        let room = (self.buf.len() - len) as u64 + 1;
        let off = (mix64(id ^ mix64(version)) % room) as usize;
        &self.buf[off..off + len]
    }
}

/// Where operations come from.
#[derive(Clone, Debug)]
enum Source {
    Synthetic {
        /// The mix of each phase and the operation index where the phase ends.
        mixes: Vec<(u64, Mix)>,
        chooser: KeyChooser,
        value_size: u32,
        key_size: usize,
    },
    Trace(Arc<Trace>),
    /// F2's driver key files: record `id < records` is the load file's key `id`; an
    /// operation's id is `records` plus its position in the run file.
    KeyFiles {
        keys: Arc<KeyFiles>,
        mix: Mix,
        value_size: u32,
    },
}

/// The keys of [`OpPlan::load_keys`].
pub struct LoadKeys<'a>(LoadKeySource<'a>);

enum LoadKeySource<'a> {
    /// Generated or traced keys, by record id.
    Ids { plan: &'a OpPlan, next: u64 },
    /// A key file's, streamed.
    File(crate::keyfile::LoadKeys),
}

impl Iterator for LoadKeys<'_> {
    type Item = Result<Vec<u8>>;

    fn next(&mut self) -> Option<Result<Vec<u8>>> {
        match &mut self.0 {
            LoadKeySource::Ids { plan, next } => {
                if *next >= plan.records {
                    return None;
                }
                let mut key = Vec::new();
                plan.key(*next, &mut key);
                *next += 1;
                Some(Ok(key))
            }
            LoadKeySource::File(keys) => keys.next().map(|k| k.map(|k| key_bytes(k).to_vec())),
        }
    }
}

/// The run phase's operations (and the load phase's records), identical for every system.
#[derive(Clone, Debug)]
pub struct OpPlan {
    source: Source,
    records: u64,
    total_ops: u64,
    seed: u64,
    /// First inserted id of each chunk.
    insert_base: Vec<u64>,
    /// Operation index where each phase ends (exclusive; the last is `total_ops`).
    phase_ends: Vec<u64>,
}

impl OpPlan {
    /// A generated workload over `records` loaded records of `value_size`-byte values.
    pub fn synthetic(
        workload: Workload,
        dist: &DistSpec,
        records: u64,
        total_ops: u64,
        value_size: u32,
        seed: u64,
    ) -> Result<OpPlan> {
        let phase_mixes: Vec<Mix> = match dist {
            DistSpec::Phased(phases) => phases
                .iter()
                .map(|p| p.mix.unwrap_or(workload).mix())
                .collect(),
            _ => vec![workload.mix()],
        };
        let mut mixes: Vec<(u64, Mix)> = dist
            .phase_ends(total_ops)
            .into_iter()
            .zip(phase_mixes)
            .collect();
        // The last phase lasts until the end.
        if let Some(last) = mixes.last_mut() {
            last.0 = u64::MAX;
        }
        let chunks = total_ops.div_ceil(CHUNK);
        let mut insert_base = Vec::with_capacity(chunks as usize);
        let mut next = records;
        for c in 0..chunks {
            insert_base.push(next);
            let mut rng = type_rng(seed, c);
            let n = CHUNK.min(total_ops - c * CHUNK);
            for i in 0..n {
                if pick_kind(mix_at(&mixes, c * CHUNK + i), &mut rng) == OpKind::Insert {
                    next += 1;
                }
            }
        }
        let space = next.max(1);
        let chooser = KeyChooser::new(dist, records, space, total_ops)?;
        Ok(OpPlan {
            source: Source::Synthetic {
                mixes,
                chooser,
                value_size,
                key_size: KEY_SIZE,
            },
            records,
            total_ops,
            seed,
            insert_base,
            phase_ends: {
                let mut ends: Vec<u64> = dist
                    .phase_ends(total_ops)
                    .into_iter()
                    .map(|e| e.min(total_ops))
                    .collect();
                if let Some(last) = ends.last_mut() {
                    *last = total_ops;
                }
                ends.dedup();
                ends
            },
        })
    }

    /// Replays a trace (at most `total_ops` of its operations, all of them when `None`).
    pub fn trace(trace: Arc<Trace>, total_ops: Option<u64>, seed: u64) -> OpPlan {
        let n = trace.ops.len() as u64;
        let total_ops = total_ops.map_or(n, |t| t.min(n));
        OpPlan {
            records: trace.keys.len() as u64,
            source: Source::Trace(trace),
            total_ops,
            seed,
            insert_base: Vec::new(),
            phase_ends: vec![total_ops],
        }
    }

    /// Replays F2's driver key files: the load phase inserts the load file's keys in order,
    /// operation `i` of the run addresses the run file's key `i` (cycling through the file
    /// when `total_ops` is larger; all of it once when `None`), and its type is drawn from
    /// `workload`'s mix with the seeded per-chunk generator every plan uses. Mixes that insert
    /// new records have no keys to insert and are refused.
    pub fn key_files(
        keys: Arc<KeyFiles>,
        workload: Workload,
        total_ops: Option<u64>,
        value_size: u32,
        seed: u64,
    ) -> Result<OpPlan> {
        let mix = workload.mix();
        if mix.insert > 0.0 {
            return Err(BenchError::InvalidArgument(format!(
                "--workload {} inserts new records, which key files cannot name: use a, b, c, f, ro, uh or scan",
                workload.name()
            )));
        }
        if keys.run.is_empty() {
            return Err(BenchError::InvalidArgument(
                "key files must not be empty".into(),
            ));
        }
        let total_ops = total_ops.unwrap_or(keys.run.len() as u64);
        Ok(OpPlan {
            records: keys.load.count(),
            source: Source::KeyFiles {
                keys,
                mix,
                value_size,
            },
            total_ops,
            seed,
            insert_base: Vec::new(),
            phase_ends: vec![total_ops],
        })
    }

    /// The same plan with `size`-byte generated keys (see [`synthetic_key_sized`]); a
    /// trace keeps its own keys.
    pub fn with_key_size(mut self, size: usize) -> OpPlan {
        if let Source::Synthetic { key_size, .. } = &mut self.source {
            *key_size = size.max(MIN_KEY_SIZE);
        }
        self
    }

    /// Operations in the run phase.
    pub fn total_ops(&self) -> u64 {
        self.total_ops
    }

    /// Records written by the load phase.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Records the run phase inserts.
    pub fn inserts(&self) -> u64 {
        match self.insert_base.last() {
            Some(_) => self.space() - self.records,
            None => 0,
        }
    }

    fn space(&self) -> u64 {
        match &self.source {
            Source::Synthetic { mixes, .. } => {
                // Recount the last chunk: insert_base holds only chunk starts.
                let Some(&last) = self.insert_base.last() else {
                    return self.records;
                };
                let c = self.insert_base.len() as u64 - 1;
                let mut rng = type_rng(self.seed, c);
                let n = CHUNK.min(self.total_ops - c * CHUNK);
                last + (0..n)
                    .filter(|&i| {
                        pick_kind(mix_at(mixes, c * CHUNK + i), &mut rng) == OpKind::Insert
                    })
                    .count() as u64
            }
            Source::Trace(t) => t.keys.len() as u64,
            Source::KeyFiles { .. } => self.records,
        }
    }

    /// Chunks in the run phase.
    pub fn chunks(&self) -> u64 {
        self.total_ops.div_ceil(CHUNK)
    }

    /// Operation index where each phase ends (exclusive), the last being the run's end.
    pub fn phase_ends(&self) -> &[u64] {
        &self.phase_ends
    }

    /// Index of the phase (of a phased distribution) operation `index` belongs to.
    pub fn phase_of(&self, index: u64) -> usize {
        match &self.source {
            Source::Synthetic { chooser, .. } => chooser.phase_of(index),
            Source::Trace(_) | Source::KeyFiles { .. } => 0,
        }
    }

    /// Fills `out` with the operations of chunk `c`.
    pub fn chunk_ops(&self, c: u64, out: &mut Vec<Op>) {
        out.clear();
        let start = c * CHUNK;
        if start >= self.total_ops {
            return;
        }
        let n = CHUNK.min(self.total_ops - start);
        match &self.source {
            Source::Synthetic {
                mixes,
                chooser,
                value_size,
                ..
            } => {
                let mut types = type_rng(self.seed, c);
                let mut keys = SmallRng::seed_from_u64(mix64(self.seed ^ mix64(c ^ 0x6b65_7973)));
                let mut next_insert = self.insert_base[c as usize];
                for i in 0..n {
                    let index = start + i;
                    let kind = pick_kind(mix_at(mixes, index), &mut types);
                    let (id, len) = match kind {
                        OpKind::Insert => {
                            next_insert += 1;
                            (next_insert - 1, *value_size)
                        }
                        OpKind::Scan => (
                            chooser.sample(&mut keys, index, next_insert),
                            keys.gen_range(1..=MAX_SCAN),
                        ),
                        _ => (chooser.sample(&mut keys, index, next_insert), *value_size),
                    };
                    out.push(Op {
                        kind,
                        id,
                        len,
                        index,
                        ttl_secs: 0,
                    });
                }
            }
            Source::Trace(t) => {
                for index in start..start + n {
                    let op = t.ops[index as usize];
                    let kind = match op.kind {
                        TraceOpKind::Get => OpKind::Read,
                        TraceOpKind::Set => OpKind::Update,
                        TraceOpKind::Delete => OpKind::Delete,
                    };
                    out.push(Op {
                        kind,
                        id: op.key as u64,
                        len: op.value_size,
                        index,
                        ttl_secs: op.ttl_secs,
                    });
                }
            }
            Source::KeyFiles {
                keys,
                mix,
                value_size,
            } => {
                let mut types = type_rng(self.seed, c);
                let mut lens = SmallRng::seed_from_u64(mix64(self.seed ^ mix64(c ^ 0x6b65_7973)));
                let run = keys.run.len() as u64;
                for index in start..start + n {
                    let kind = pick_kind(mix, &mut types);
                    let len = match kind {
                        OpKind::Scan => lens.gen_range(1..=MAX_SCAN),
                        _ => *value_size,
                    };
                    out.push(Op {
                        kind,
                        id: self.records + index % run,
                        len,
                        index,
                        ttl_secs: 0,
                    });
                }
            }
        }
    }

    /// Writes the key of record `id` into `out`. For key files only the run's ids
    /// (`records()` and up) have keys here: the load file's are read by
    /// [`OpPlan::load_keys`] (`out` is left empty for them).
    pub fn key(&self, id: u64, out: &mut Vec<u8>) {
        match &self.source {
            Source::Synthetic { key_size, .. } => synthetic_key_sized(id, *key_size, out),
            Source::Trace(t) => {
                out.clear();
                if let Some(k) = t.keys.get(id as usize) {
                    out.extend_from_slice(k);
                }
            }
            Source::KeyFiles { keys, .. } => {
                out.clear();
                let k = id
                    .checked_sub(self.records)
                    .and_then(|pos| keys.run.get(pos as usize));
                if let Some(&k) = k {
                    out.extend_from_slice(&key_bytes(k));
                }
            }
        }
    }

    /// The load phase's keys, records `0..records()` in order (a key file's are read from
    /// the file as they are consumed; its read errors end the sequence).
    pub fn load_keys(&self) -> Result<LoadKeys<'_>> {
        Ok(LoadKeys(match &self.source {
            Source::KeyFiles { keys, .. } => LoadKeySource::File(keys.load.keys()?),
            Source::Synthetic { .. } | Source::Trace(_) => LoadKeySource::Ids {
                plan: self,
                next: 0,
            },
        }))
    }

    /// Value size of loaded record `i`.
    pub fn load_value_size(&self, i: u64) -> u32 {
        match &self.source {
            Source::Synthetic { value_size, .. } | Source::KeyFiles { value_size, .. } => {
                *value_size
            }
            Source::Trace(t) => t.load_value_sizes.get(i as usize).copied().unwrap_or(1),
        }
    }

    /// Largest value any operation writes.
    pub fn max_value_size(&self) -> u32 {
        match &self.source {
            Source::Synthetic { value_size, .. } | Source::KeyFiles { value_size, .. } => {
                *value_size
            }
            Source::Trace(t) => t.load_value_sizes.iter().copied().max().unwrap_or(1),
        }
    }
}

/// The mix in force at operation `index`.
fn mix_at(mixes: &[(u64, Mix)], index: u64) -> &Mix {
    let i = mixes.partition_point(|&(end, _)| end <= index);
    &mixes[i.min(mixes.len() - 1)].1
}

fn type_rng(seed: u64, chunk: u64) -> SmallRng {
    SmallRng::seed_from_u64(mix64(seed ^ mix64(chunk ^ 0x7479_7065)))
}

fn pick_kind<R: Rng>(mix: &Mix, rng: &mut R) -> OpKind {
    let u: f64 = rng.gen();
    let mut acc = mix.read;
    if u < acc {
        return OpKind::Read;
    }
    acc += mix.update;
    if u < acc {
        return OpKind::Update;
    }
    acc += mix.insert;
    if u < acc {
        return OpKind::Insert;
    }
    acc += mix.scan;
    if u < acc {
        return OpKind::Scan;
    }
    if mix.rmw > 0.0 {
        OpKind::ReadModifyWrite
    } else {
        // Rounding left a sliver: give it to the most common kind.
        OpKind::Read
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_ops(plan: &OpPlan) -> Vec<Op> {
        let mut all = Vec::new();
        let mut buf = Vec::new();
        for c in 0..plan.chunks() {
            plan.chunk_ops(c, &mut buf);
            all.extend_from_slice(&buf);
        }
        all
    }

    #[test]
    fn sized_keys_are_distinct_and_of_their_size() {
        let mut seen = std::collections::HashSet::new();
        let mut k = Vec::new();
        for id in 0..10_000 {
            synthetic_key_sized(id, 8, &mut k);
            assert_eq!(k.len(), 8);
            assert!(seen.insert(k.clone()));
        }
        synthetic_key_sized(7, 16, &mut k);
        assert_eq!(k.len(), 16);
        let mut d = Vec::new();
        synthetic_key_sized(7, KEY_SIZE, &mut d);
        synthetic_key(7, &mut k);
        assert_eq!(d, k);
        let plan = OpPlan::synthetic(Workload::C, &DistSpec::Uniform, 10, 10, 100, 1)
            .unwrap()
            .with_key_size(8);
        plan.key(3, &mut k);
        assert_eq!(k.len(), 8);
    }

    #[test]
    fn keys_are_24_bytes_and_distinct() {
        let mut seen = std::collections::HashSet::new();
        let mut k = Vec::new();
        for id in 0..10_000 {
            synthetic_key(id, &mut k);
            assert_eq!(k.len(), KEY_SIZE);
            assert!(seen.insert(k.clone()));
        }
        synthetic_key(u64::MAX, &mut k);
        assert_eq!(k.len(), KEY_SIZE);
    }

    #[test]
    fn plan_is_deterministic_and_matches_the_mix() {
        let dist = DistSpec::parse("hotspot-5%").unwrap();
        let p1 = OpPlan::synthetic(Workload::Rw, &dist, 1000, 10_000, 1000, 42).unwrap();
        let p2 = OpPlan::synthetic(Workload::Rw, &dist, 1000, 10_000, 1000, 42).unwrap();
        let (a, b) = (all_ops(&p1), all_ops(&p2));
        assert_eq!(a, b);
        assert_eq!(a.len(), 10_000);
        let inserts: Vec<&Op> = a.iter().filter(|o| o.kind == OpKind::Insert).collect();
        let share = inserts.len() as f64 / a.len() as f64;
        assert!((0.23..0.27).contains(&share), "insert share {share}");
        // Inserted ids are dense and new, in order.
        for (i, op) in inserts.iter().enumerate() {
            assert_eq!(op.id, 1000 + i as u64);
        }
        assert_eq!(p1.inserts(), inserts.len() as u64);
        // Reads address only ids inserted before them.
        let mut max_inserted = 999;
        for op in &a {
            match op.kind {
                OpKind::Insert => max_inserted = op.id,
                _ => assert!(op.id <= max_inserted),
            }
        }
        let other = OpPlan::synthetic(Workload::Rw, &dist, 1000, 10_000, 1000, 43).unwrap();
        assert_ne!(all_ops(&other), a);
    }

    #[test]
    fn every_workload_generates_its_kinds() {
        let dist = DistSpec::Uniform;
        for (w, kinds) in [
            (Workload::Ro, vec![OpKind::Read]),
            (Workload::Uh, vec![OpKind::Read, OpKind::Update]),
            (Workload::E, vec![OpKind::Scan, OpKind::Insert]),
            (Workload::F, vec![OpKind::Read, OpKind::ReadModifyWrite]),
        ] {
            let plan = OpPlan::synthetic(w, &dist, 100, 1000, 100, 1).unwrap();
            let ops = all_ops(&plan);
            for k in &kinds {
                assert!(ops.iter().any(|o| o.kind == *k), "{w:?} lacks {k:?}");
            }
            assert!(ops.iter().all(|o| kinds.contains(&o.kind)), "{w:?}");
            for o in ops.iter().filter(|o| o.kind == OpKind::Scan) {
                assert!((1..=MAX_SCAN).contains(&o.len));
            }
        }
        assert!("x".parse::<Workload>().is_err());
        assert_eq!("RW".parse::<Workload>().unwrap(), Workload::Rw);
    }

    #[test]
    fn phases_can_change_the_mix() {
        // AC-Key's phase change: scans, then gets.
        let dist = crate::distribution::parse_phases(
            "30% hotspot-5% scan\n70% hotspot-5% c\n",
            std::path::Path::new("p"),
        )
        .unwrap();
        let plan = OpPlan::synthetic(Workload::Ro, &dist, 1000, 1000, 100, 5).unwrap();
        assert_eq!(plan.phase_ends(), &[300, 1000]);
        let ops = all_ops(&plan);
        assert!(ops[..300].iter().all(|o| o.kind == OpKind::Scan));
        assert!(ops[300..].iter().all(|o| o.kind == OpKind::Read));
        assert_eq!(plan.phase_of(299), 0);
        assert_eq!(plan.phase_of(300), 1);
        assert!(dist.describe().contains("scan"), "{}", dist.describe());
        assert!(crate::distribution::parse_phases(
            "30% uniform scan extra\n",
            std::path::Path::new("p")
        )
        .is_err());
        assert!(
            crate::distribution::parse_phases("30% uniform nope\n", std::path::Path::new("p"))
                .is_err()
        );
    }

    #[test]
    fn trace_plan_replays_in_order() {
        let t = Trace::parse(
            "0,a,1,10,1,get,0\n1,b,1,20,1,set,60\n2,a,1,0,1,delete,0\n".as_bytes(),
            std::path::Path::new("t"),
            None,
        )
        .unwrap();
        let plan = OpPlan::trace(Arc::new(t), None, 0);
        assert_eq!(plan.records(), 2);
        let ops = all_ops(&plan);
        assert_eq!(
            ops.iter().map(|o| o.kind).collect::<Vec<_>>(),
            vec![OpKind::Read, OpKind::Update, OpKind::Delete]
        );
        // The write keeps its TTL for the runner (put_with_ttl).
        assert_eq!(
            ops.iter().map(|o| o.ttl_secs).collect::<Vec<_>>(),
            vec![0, 60, 0]
        );
        let mut k = Vec::new();
        plan.key(ops[1].id, &mut k);
        assert_eq!(k, b"b");
        assert_eq!(plan.load_value_size(1), 20);
    }

    #[test]
    fn key_file_plan_loads_and_runs_the_files_keys_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str, keys: &[u64]| {
            let path = dir.path().join(name);
            let bytes: Vec<u8> = keys.iter().flat_map(|k| k.to_le_bytes()).collect();
            std::fs::write(&path, bytes).unwrap();
            path
        };
        let keys = Arc::new(
            KeyFiles::read(
                &file("load.dat", &[100, 200, 300]),
                &file("run.dat", &[300, 100, 100, 200, 300]),
            )
            .unwrap(),
        );
        // 12 operations cycle through the 5 run keys.
        let plan = OpPlan::key_files(keys.clone(), Workload::A, Some(12), 100, 7).unwrap();
        assert_eq!(plan.records(), 3);
        assert_eq!(plan.inserts(), 0);
        let loaded: Vec<Vec<u8>> = plan.load_keys().unwrap().map(Result::unwrap).collect();
        let want: Vec<Vec<u8>> = [100u64, 200, 300]
            .iter()
            .map(|k| k.to_le_bytes().to_vec())
            .collect();
        assert_eq!(loaded, want);
        let mut k = Vec::new();
        let ops = all_ops(&plan);
        assert_eq!(ops.len(), 12);
        let run_keys: Vec<u64> = ops
            .iter()
            .map(|o| {
                plan.key(o.id, &mut k);
                u64::from_le_bytes(k[..].try_into().unwrap())
            })
            .collect();
        let want: Vec<u64> = (0..12).map(|i| keys.run[i % 5]).collect();
        assert_eq!(run_keys, want);
        // YCSB A's mix: reads and updates of 100-byte values, the same for the same seed.
        assert!(ops
            .iter()
            .all(|o| matches!(o.kind, OpKind::Read | OpKind::Update) && o.len == 100));
        let again = OpPlan::key_files(keys.clone(), Workload::A, Some(12), 100, 7).unwrap();
        assert_eq!(all_ops(&again), ops);
        // Without --ops, the run file once.
        let once = OpPlan::key_files(keys.clone(), Workload::C, None, 100, 7).unwrap();
        assert_eq!(once.total_ops(), 5);
        // Inserting mixes have no keys to insert.
        let e = OpPlan::key_files(keys, Workload::D, None, 100, 7)
            .unwrap_err()
            .to_string();
        assert!(e.contains("inserts"), "{e}");
    }

    #[test]
    fn values_have_the_requested_size_and_vary() {
        let v = ValueSource::new(1, 1000);
        assert_eq!(v.value(1, 0, 1000).len(), 1000);
        assert_ne!(v.value(1, 0, 1000), v.value(1, 1, 1000));
        assert_eq!(v.value(7, 3, 10 << 20).len(), 1 << 20);
    }
}

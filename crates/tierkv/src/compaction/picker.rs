//! Choosing the next compaction: the level whose size (a semi-sorted table's garbage and
//! key list do not count, see [`level_scores`]) most exceeds its target (L0 also by file
//! count; L0's target grows into whatever of the fast-disk budget the WALs and the other
//! fast levels leave free, see [`level0_target`]), then within it the file with the least overlapping bytes in the next level per
//! byte of its own (RocksDB's "min overlapping ratio"), skipping files already claimed. On a
//! slow level, while the slow tier's space amplification exceeds
//! [`DIRTY_VICTIM_SPACE_AMP`], the file with the most dirty-block bytes goes first instead
//! (HyperDB's victim rule for semi-sorted tables).
//!
//! At the fast-to-slow boundary (the last fast level) the choice is a *batch*, HyperDB's
//! narrow-range demotion within leveled compaction: each candidate file is extended with
//! its neighbours on the level as long as that adds no file of the slow level to rewrite
//! (and the neighbour is at least half cold, and the batch stays within
//! [`MAX_BATCH_FILES`] target files), so slow files are rewritten once for the whole run of
//! fast files that lands in them. Batches are scored by HotRAP's cost-benefit rule
//! `(size - hot) / (size + overlap)` (hot = 0 without promotion); among those scoring within
//! [`SIMILAR_SCORE`] of the best, the one touching the fewest slow files (the narrowest,
//! densest overlap) wins: fewer files claimed and rewritten on the slow disk per compaction,
//! a narrower range taken from the promotion cache, for the same bytes demoted per byte
//! written.
//!
//! The expiry sweep comes last, when no level needs work ([`pick_expired`]): the table
//! whose estimated expired share (`FileExpiry::estimated_expired`, from the count and
//! deadline range the manifest copies from its properties) is highest and at least
//! `CompactionOptions::expired_share_trigger`. Like Redis sampling keys that have a TTL,
//! it never reads the slow tier to find expired data; the compaction's filter
//! (`super::stream`) does the removing.
//!
//! Then two choices driven by what user scans read (LevelDB's seek compaction, with the
//! reads scans spend in place of seeks that missed): L0 compacted into L1 once scans'
//! reads of its overlapping tables pay for it ([`pick_scanned_level0`]), and scan
//! defragmentation ([`pick_fragmented`]): a semi-sorted table whose appended generations
//! have cost scans more extra reads than its rewrite costs is rewritten in place, in key
//! order.

use super::victim::BlockBounds;
use super::{Compaction, RangeClaim};
use crate::env::Tier;
use crate::key::user_key;
use crate::options::Options;
use crate::tiers::LevelLayout;
use crate::version::{FileMeta, Version};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// What the level targets depend on beside the version: what holds the fast tier apart
/// from the levels' own data.
#[derive(Clone, Copy, Debug, Default)]
pub struct Occupancy {
    /// Bytes the live WALs hold on the fast tier (see [`level0_target`]).
    pub wal_bytes: u64,
    /// Hot bytes retention keeps on the last fast level (the tracker's hot set; 0
    /// without retention), which cold data cannot use (see `super::slow_levels`).
    pub hot_bytes: u64,
}

/// Per-level pressure: bytes over target ([`level_targets`]: L0's follows the fast tier's
/// free budget, given the live WALs in `occ`), and for L0 also its file count against
/// twice the trigger (grown by the same factor as its byte target). >= 1 needs work.
///
/// A level's bytes are [`Version::level_sized_bytes`]: a semi-sorted table counts its live
/// bytes less its key list. The garbage it carries (dirty blocks, earlier generations'
/// metadata) is not data the next level needs, and compacting it down would rewrite live
/// records to drop it; the key list (about 10 B per key with small hashed keys) is a
/// per-generation copy of the keys a sorted table does not carry, and counting it filled a
/// semi-sorted level with a tenth less data than a sorted one. Garbage is bounded where it
/// arises instead: a merge rewrites a table whole once it would be
/// more than half garbage (`super::semi_plan`), and past [`DIRTY_VICTIM_SPACE_AMP`] a slow
/// level's victim is its dirtiest file. (Counting file bytes made garbage alone overflow
/// the slow levels into compactions the sorted tier never runs: docs/bench/semi-sorted-tier.md.)
///
/// L0 goes by bytes because an L0 compaction rewrites the L1 files it overlaps (usually
/// all of L1, since every flush spans the key space), whatever L0 holds: what pays for it
/// is the bytes moved. A flush drops the versions its memtable shadows, so under skewed
/// updates a flush can be a fraction of a memtable, and counting files would compact L1
/// as often for much less data (YCSB A zipfian: L0 files of two thirds of a memtable, see
/// docs/BENCHMARKS-LOG.md). The file count still bounds the L0 files a read may consult.
pub fn level_scores(v: &Version, opts: &Options, occ: Occupancy) -> Vec<f64> {
    let targets = level_targets(v, opts, occ);
    (0..v.num_levels() - 1)
        .map(|level| {
            let by_bytes = v.level_sized_bytes(level) as f64 / targets[level].max(1) as f64;
            if level == 0 {
                // The file limit grows with the byte target (see `level0_target`), but
                // never past the slowdown trigger (validated to be at most the stop
                // trigger): a writer stopped by L0's file count must find L0 picked, or
                // it would wait forever.
                let base = 2 * opts.level0_compaction_trigger;
                let grown = targets[0] as f64 / v.layout.targets[0].max(1) as f64;
                let max_files =
                    (base as f64 * grown.max(1.0)).min(opts.level0_slowdown_trigger.max(1) as f64);
                by_bytes.max(v.levels[0].len() as f64 / max_files)
            } else {
                by_bytes
            }
        })
        .collect()
}

/// Every level's target bytes as the picker uses them: the layout's
/// ([`LevelLayout::targets`]), except L0's byte trigger, which is [`level0_target`], and
/// the slow levels' when they are sized from the data
/// (`CompactionOptions::dynamic_slow_levels`, `super::slow_levels`).
pub fn level_targets(v: &Version, opts: &Options, occ: Occupancy) -> Vec<u64> {
    let mut targets = v.layout.targets.clone();
    if let Some(t) = targets.first_mut() {
        *t = level0_target(v, opts, occ.wal_bytes);
    }
    if opts.compaction.dynamic_slow_levels {
        super::slow_levels::size_slow_levels(&mut targets, v, opts.level_size_ratio, occ.hot_bytes);
    }
    targets
}

/// L0's byte trigger: with [`crate::CompactionOptions::fill_fast_budget`] and a slow tier
/// below the fast levels, the fast-disk budget less what the rest of the fast tier holds
/// now (`wal_bytes` of live WALs and the fast levels L1..Lk, file bytes), never below its
/// layout share; otherwise the layout share.
///
/// Why: the layout reserves the WALs of every memtable that may be unflushed and L0's
/// whole share, the most they can hold at once, so with fixed targets the fast tier holds
/// less than its budget most of the time (with 108-byte records a full memtable's WAL is
/// under half its memory charge). L0 is where the room pays most: an L0 compaction rewrites
/// the L1 files its flushes overlap, usually all of L1, so the fewer and larger L0
/// compactions are, the fewer times L1 is rewritten per byte flushed. Giving the room to
/// the last fast level instead was measured worse in F2's setup
/// (docs/bench/fill-fast-budget.md: the cross-tier step fell 2.30 -> 1.42 per user byte but
/// L0 -> L1 rose 2.31 -> 3.54, since
/// every L0 compaction rewrote the larger L1). Tables and WALs together still fill at most
/// the budget (invariant 4): L0 is compacted once it holds what the others leave, and the
/// other levels keep their layout targets.
pub fn level0_target(v: &Version, opts: &Options, wal_bytes: u64) -> u64 {
    let k = v.layout.last_fast_level;
    let fixed = v.layout.targets[0];
    let budget = match opts.fd_budget {
        Some(b) if opts.compaction.fill_fast_budget && is_boundary(&v.layout, k) => b,
        _ => return fixed,
    };
    let others: u64 = (1..=k).map(|l| v.level_bytes(l)).sum();
    budget
        .saturating_sub(wal_bytes)
        .saturating_sub(others)
        .max(fixed)
}

/// The user-key range covered by `files`.
pub fn key_range(files: &[Arc<FileMeta>]) -> Option<(Vec<u8>, Vec<u8>)> {
    let lo = files.iter().map(|f| user_key(f.smallest())).min()?;
    let hi = files.iter().map(|f| user_key(f.largest())).max()?;
    Some((lo.to_vec(), hi.to_vec()))
}

fn claimed(files: &[Arc<FileMeta>]) -> bool {
    files.iter().any(|f| f.being_compacted.load(Relaxed))
}

/// True for the last fast level when a slow level lies below it: its compactions move data
/// into the slow tier.
fn is_boundary(layout: &LevelLayout, level: usize) -> bool {
    level == layout.last_fast_level && layout.tiers.get(level + 1) == Some(&Tier::Slow)
}

/// The levels a compaction out of `level` may write: the next level, and `level` itself at
/// the fast-to-slow boundary, where retention and promotion by compaction keep records.
pub fn written_levels(layout: &LevelLayout, level: usize) -> [usize; 2] {
    [
        level + 1,
        if is_boundary(layout, level) {
            level
        } else {
            level + 1
        },
    ]
}

/// True if a compaction out of `level` over the files `inputs` and `overlap` may run beside
/// the `running` ones (see [`RangeClaim`]).
fn range_free(
    v: &Version,
    running: &[RangeClaim],
    level: usize,
    inputs: &[Arc<FileMeta>],
    overlap: &[Arc<FileMeta>],
) -> bool {
    if running.is_empty() {
        return true;
    }
    let files: Vec<Arc<FileMeta>> = inputs.iter().chain(overlap).cloned().collect();
    let Some((lo, hi)) = key_range(&files) else {
        return true;
    };
    let levels = written_levels(&v.layout, level);
    !running.iter().any(|r| r.conflicts(levels, &lo, &hi))
}

/// A batch may grow to this many target-size files of demoted data.
pub const MAX_BATCH_FILES: u64 = 4;

/// Batches scoring at least this share of the best score count as equally good, and the
/// narrowest of them is taken.
pub const SIMILAR_SCORE: f64 = 0.95;

/// What HotRAP changes in picking at the fast-to-slow boundary.
pub struct HotPicking<'a> {
    /// The last fast level (its compactions go to the slow tier).
    pub level: usize,
    /// Hot bytes in a user-key range (RALT's `range_hot_size`).
    pub hot_size: &'a dyn Fn(&[u8], &[u8]) -> u64,
    /// Do not pick `level` at all: its last compaction kept nearly everything (hot) on the
    /// fast tier, and it has not grown since.
    pub saturated: bool,
}

/// Picks and claims the most urgent compaction, if any level needs one, that can run beside
/// the `running` compactions (every table counted as one block; the store uses
/// [`pick_with`]).
#[cfg(test)]
pub fn pick(
    v: &Version,
    opts: &Options,
    hot: Option<&HotPicking<'_>>,
    running: &[RangeClaim],
) -> Option<Compaction> {
    pick_with(v, opts, hot, running, None, Occupancy::default())
}

/// [`pick`], with the block bounds of open tables for HyperDB's overlap-score victim
/// (`CompactionOptions::overlap_score_victim`; without them every table counts as one
/// block) and what else holds the fast tier (see [`level_targets`]).
pub fn pick_with(
    v: &Version,
    opts: &Options,
    hot: Option<&HotPicking<'_>>,
    running: &[RangeClaim],
    bounds: Option<BlockBounds<'_>>,
    occ: Occupancy,
) -> Option<Compaction> {
    let scores = level_scores(v, opts, occ);
    let mut order: Vec<usize> = (0..scores.len()).filter(|&l| scores[l] >= 1.0).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    // Invariant 4 (docs/DESIGN.md): while the fast tier is over budget, the compaction that moves
    // data down into the slow tier goes first. Under a steady write load L0 and L1 always
    // outscore the last fast level, which would otherwise grow without bound; L0 waiting
    // only slows writers (stalls), it never breaks the budget.
    let last_fast = v.layout.last_fast_level;
    let fast_over_budget = opts
        .fd_budget
        .is_some_and(|budget| v.tier_bytes(Tier::Fast) > budget);
    if fast_over_budget && v.layout.tiers.get(last_fast + 1) == Some(&Tier::Slow) {
        if let Some(i) = order.iter().position(|&l| l == last_fast) {
            order.remove(i);
            order.insert(0, last_fast);
        }
    }
    let urgent = !order.is_empty();
    for level in order {
        let hot_here = hot.filter(|h| h.level == level);
        if hot_here.is_some_and(|h| h.saturated) {
            continue;
        }
        let boundary = is_boundary(&v.layout, level);
        let batch_bytes = if opts.compaction.batched_demotion {
            MAX_BATCH_FILES.saturating_mul(opts.target_file_size)
        } else {
            0
        };
        let picked = if level == 0 {
            pick_level0(v, running)
        } else if let Some(h) = hot_here {
            pick_boundary(v, level, Some(h), batch_bytes, running)
        } else if boundary {
            pick_boundary(v, level, None, batch_bytes, running)
        } else {
            let score = opts.compaction.overlap_score_victim.then_some(bounds);
            pick_level(v, level, running, score)
        };
        if let Some(mut c) = picked {
            if opts.compaction.preemptive_pushdown {
                c.pushdown = super::pushdown::limit(v, &c, running);
            }
            c.claim();
            return Some(c);
        }
    }
    if urgent {
        return None;
    }
    let co = &opts.compaction;
    let c = pick_expired(v, opts, running)
        .or_else(|| {
            co.compact_scanned_level0
                .then(|| pick_scanned_level0(v, running))?
        })
        .or_else(|| co.defragment_scanned.then(|| pick_fragmented(v, running))?)?;
    c.claim();
    Some(c)
}

/// The reason scan defragmentation gives its compactions.
pub const DEFRAGMENT_REASON: &str = "scan defragment";

/// A scan-driven compaction is paid for once scans have spent one read on its inputs per
/// this many bytes of them, on a tier without a device model. LevelDB's seek compaction
/// uses the same figure: a random read costs about what compacting 16 KiB does (on this
/// machine's disk 16 KiB is also where random reads reach its bandwidth, and a compaction
/// reads and writes each byte once, in order).
pub const SCAN_BYTES_PER_READ: u64 = 16 << 10;

/// Bytes of a scan-driven compaction's inputs one scan read pays for, on a tier whose
/// device model gives a read's cost in bytes (`DeviceProfile::read_cost_bytes`): half of
/// it, since the compaction moves each input byte twice (reads it, writes it), so the
/// extra reads scans took cost as much device time as the rewrite once they reach its
/// input bytes over this (the ski-rental rule: rent until rent paid the purchase). Never
/// below [`SCAN_BYTES_PER_READ`]: `gp3-max` 51 KiB, `gp3` 21 KiB, `hdd` 410 KiB.
fn scan_bytes_per_read(read_cost_bytes: Option<u64>) -> u64 {
    read_cost_bytes.map_or(SCAN_BYTES_PER_READ, |c| (c / 2).max(SCAN_BYTES_PER_READ))
}

/// The fewest reads that make a scan-driven compaction worth running, however small its
/// inputs (LevelDB's floor for seek compaction): a few unlucky scans do not rewrite a table.
pub const SCAN_MIN_READS: u64 = 100;

/// The reason scan-triggered L0 compactions carry.
pub const SCANNED_LEVEL0_REASON: &str = "scanned L0";

/// What user scans must have read from a compaction's inputs, on a tier whose reads cost
/// `read_cost_bytes`, for the reads to pay for it: one per [`scan_bytes_per_read`] of its
/// input bytes, at least [`SCAN_MIN_READS`].
fn scan_allowance(input_bytes: u64, read_cost_bytes: Option<u64>) -> u64 {
    (input_bytes / scan_bytes_per_read(read_cost_bytes)).max(SCAN_MIN_READS)
}

/// Scan-triggered L0 compaction: L0's tables overlap each other, so a scan's seek reads a
/// block from each of them. Once the scans' reads of L0's tables
/// ([`crate::sst::ScanReads::reads`]) pass what compacting L0 into L1 costs (the same
/// rule as [`pick_fragmented`], over L0 and the L1 files it overlaps), L0 is compacted,
/// whether or not it has reached its size trigger. Writes alone never trigger it.
pub fn pick_scanned_level0(v: &Version, running: &[RangeClaim]) -> Option<Compaction> {
    let reads: u64 = v.levels[0]
        .iter()
        .map(|f| f.scan_reads.reads.load(Relaxed))
        .sum();
    if reads < SCAN_MIN_READS {
        return None;
    }
    let c = pick_level0(v, running)?;
    let read_cost = c.inputs.first()?.device_profile().read_cost_bytes();
    (reads >= scan_allowance(c.input_bytes(), read_cost)).then_some(Compaction {
        reason: SCANNED_LEVEL0_REASON,
        ..c
    })
}

/// Scan defragmentation: the unclaimed slow-tier table whose extra scan reads
/// (`ScanReads::split`: reads a scan window took because the table's blocks
/// lie in several runs of the file, so never a table in one run) most exceed what its
/// rewrite costs ([`scan_bytes_per_read`], [`SCAN_MIN_READS`]), rewritten in place, so
/// its blocks come to lie in key order again and a scan window is one read. A workload
/// without scans never pays for it; the rewritten table starts counting from zero and
/// lies in one run, so it is not picked again until merges have appended to it.
pub fn pick_fragmented(v: &Version, running: &[RangeClaim]) -> Option<Compaction> {
    let mut best: Option<(f64, usize, Arc<FileMeta>)> = None;
    for (level, f) in v.all_files() {
        if level == 0 || f.tier != Tier::Slow || f.being_compacted.load(Relaxed) {
            continue;
        }
        let reads = f.scan_reads.split.load(Relaxed);
        if reads < SCAN_MIN_READS {
            // Below every allowance; spares the device model's lock, which slow reads take.
            continue;
        }
        let allowance = scan_allowance(f.size(), f.device_profile().read_cost_bytes());
        let over = reads as f64 / allowance as f64;
        if over >= 1.0 && best.as_ref().is_none_or(|(b, _, _)| over > *b) {
            best = Some((over, level, f.clone()));
        }
    }
    let (_, level, f) = best?;
    let c = Compaction {
        level,
        output_level: level,
        inputs: vec![f],
        output_inputs: Vec::new(),
        output_tier: v.layout.tiers[level],
        pushdown: None,
        reason: DEFRAGMENT_REASON,
    };
    unless_running(c, v, running)
}

/// `c`, unless its range claim conflicts with a `running` compaction's.
fn unless_running(c: Compaction, v: &Version, running: &[RangeClaim]) -> Option<Compaction> {
    let claim = c.range_claim(&v.layout)?;
    let free = !running
        .iter()
        .any(|r| r.conflicts(claim.levels, &claim.lo, &claim.hi));
    free.then_some(c)
}

/// The reason the expiry sweep gives its compactions.
pub const EXPIRY_REASON: &str = "expired share";

/// The expiry sweep's choice (see the module comment): the unclaimed table with the
/// highest estimated expired share at or above the trigger. An L0 table takes the usual
/// L0 compaction; a table that overlaps files of the level below goes down one level with
/// them; any other (the last level's, or one with nothing right below) is rewritten in
/// place. Either way its expired records become tombstones, dropped where nothing deeper
/// holds their key and every snapshot sees them.
pub fn pick_expired(v: &Version, opts: &Options, running: &[RangeClaim]) -> Option<Compaction> {
    let trigger = opts.compaction.expired_share_trigger;
    if trigger > 1.0 {
        return None;
    }
    let now = opts.clock.now_ms();
    let mut best: Option<(f64, usize, Arc<FileMeta>)> = None;
    for (level, f) in v.all_files() {
        if f.info.expiry.count == 0 || f.being_compacted.load(Relaxed) {
            continue;
        }
        let share = f.info.expiry.estimated_expired(now) as f64 / f.info.num_entries.max(1) as f64;
        if share > 0.0 && share >= trigger && best.as_ref().is_none_or(|(s, _, _)| share > *s) {
            best = Some((share, level, f.clone()));
        }
    }
    let (_, level, f) = best?;
    if level == 0 {
        return pick_level0(v, running).map(|c| Compaction {
            reason: EXPIRY_REASON,
            ..c
        });
    }
    let (lo, hi) = (user_key(f.smallest()), user_key(f.largest()));
    let below = match v.levels.get(level + 1) {
        Some(_) => v.overlapping(level + 1, Some(lo), Some(hi)),
        None => Vec::new(),
    };
    let inputs = vec![f];
    // Nothing overlapping right below: a move down would be a trivial move that removes
    // nothing, so the table is rewritten in place.
    let (output_level, output_inputs) = if below.is_empty() {
        (level, below)
    } else {
        (level + 1, below)
    };
    if claimed(&output_inputs) {
        return None;
    }
    let c = Compaction {
        level,
        output_level,
        inputs,
        output_inputs,
        output_tier: v.layout.tiers[output_level],
        pushdown: None,
        reason: EXPIRY_REASON,
    };
    unless_running(c, v, running)
}

/// L0 -> L1: every L0 file (they overlap each other) plus the L1 files they overlap.
fn pick_level0(v: &Version, running: &[RangeClaim]) -> Option<Compaction> {
    let inputs = v.levels[0].clone();
    if inputs.is_empty() || claimed(&inputs) {
        return None;
    }
    let (lo, hi) = key_range(&inputs)?;
    let output_inputs = v.overlapping(1, Some(&lo), Some(&hi));
    if claimed(&output_inputs) || !range_free(v, running, 0, &inputs, &output_inputs) {
        return None;
    }
    Some(Compaction {
        level: 0,
        output_level: 1,
        inputs,
        output_inputs,
        output_tier: v.layout.tiers[1],
        pushdown: None,
        reason: "L0 file count",
    })
}

/// Above this slow-tier space amplification (table bytes over valid bytes) a slow level's
/// victim is its file with the most dirty-block bytes (HyperDB §3.4): compacting it down
/// drops its garbage.
pub const DIRTY_VICTIM_SPACE_AMP: f64 = 1.5;

/// True when the slow tier's garbage (dirty blocks and old metadata of semi-sorted
/// tables) makes its space amplification exceed [`DIRTY_VICTIM_SPACE_AMP`].
fn slow_space_pressure(v: &Version) -> bool {
    let (bytes, garbage) = v
        .all_files()
        .filter(|(_, f)| f.tier == Tier::Slow)
        .fold((0u64, 0u64), |(b, g), (_, f)| {
            (b + f.size(), g + f.info.garbage_bytes)
        });
    garbage > 0 && bytes as f64 > DIRTY_VICTIM_SPACE_AMP * bytes.saturating_sub(garbage) as f64
}

/// Ln -> Ln+1: the unclaimed file with the smallest overlap-to-size ratio; on a slow level
/// under space pressure, the one with the most dirty-block bytes; otherwise on a slow level
/// with `score` (`Some(block bounds)`), HyperDB's highest overlap score among 8 random
/// candidates (`super::victim`).
fn pick_level(
    v: &Version,
    level: usize,
    running: &[RangeClaim],
    score: Option<Option<BlockBounds<'_>>>,
) -> Option<Compaction> {
    let slow = v.layout.tiers[level] == Tier::Slow;
    let dirtiest_first = slow && slow_space_pressure(v);
    if let Some(bounds) = score.filter(|_| slow && !dirtiest_first) {
        let mut files = Vec::new();
        let mut overlaps = Vec::new();
        for f in &v.levels[level] {
            if f.being_compacted.load(Relaxed) {
                continue;
            }
            let overlap = v.overlapping(
                level + 1,
                Some(user_key(f.smallest())),
                Some(user_key(f.largest())),
            );
            if claimed(&overlap)
                || !range_free(v, running, level, std::slice::from_ref(f), &overlap)
            {
                continue;
            }
            files.push(f.clone());
            overlaps.push(overlap);
        }
        let i = super::victim::choose(v, level, &files, bounds)?;
        return Some(Compaction {
            level,
            output_level: level + 1,
            inputs: vec![files.swap_remove(i)],
            output_inputs: overlaps.swap_remove(i),
            output_tier: v.layout.tiers[level + 1],
            reason: "overlap score",
            pushdown: None,
        });
    }
    let mut best: Option<(f64, Arc<FileMeta>, Vec<Arc<FileMeta>>)> = None;
    for f in &v.levels[level] {
        if f.being_compacted.load(Relaxed) {
            continue;
        }
        let lo = user_key(f.smallest());
        let hi = user_key(f.largest());
        let overlap = v.overlapping(level + 1, Some(lo), Some(hi));
        if claimed(&overlap) || !range_free(v, running, level, std::slice::from_ref(f), &overlap) {
            continue;
        }
        // Live bytes on both sides: what the merge moves down and what it merges with
        // (garbage in a semi-sorted table below is dropped or kept, never merged).
        let overlap_bytes: u64 = overlap.iter().map(|o| o.valid_bytes()).sum();
        let mut ratio = overlap_bytes as f64 / f.valid_bytes().max(1) as f64;
        if dirtiest_first {
            // Most garbage first; the overlap ratio (below 1e6) breaks ties.
            ratio = ratio.min(1e6) - 1e6 * f.info.garbage_bytes as f64;
        }
        if best.as_ref().is_none_or(|(r, _, _)| ratio < *r) {
            best = Some((ratio, f.clone(), overlap));
        }
    }
    let (_, file, output_inputs) = best?;
    Some(Compaction {
        level,
        output_level: level + 1,
        inputs: vec![file],
        output_inputs,
        output_tier: v.layout.tiers[level + 1],
        pushdown: None,
        reason: "level size",
    })
}

/// A candidate at the fast-to-slow boundary: a run of adjacent files of the level.
struct Batch {
    /// Indexes `from..=to` into the level's files.
    from: usize,
    to: usize,
    overlap: Vec<Arc<FileMeta>>,
    score: f64,
}

/// Ln -> Ln+1 at the fast-to-slow boundary (HotRAP §3.5, HyperDB's batched demotion; see
/// the module comment): the batch with the best cost-benefit score
/// `(size - hot size) / (size + overlapping bytes)` (the benefit is the cold data that
/// leaves the fast tier, hot records being retained; the cost is everything rewritten),
/// the narrowest among those scoring within [`SIMILAR_SCORE`] of the best. When every
/// benefit is zero (the tracker overestimates), the oldest file alone. `batch_bytes` 0
/// disables batching; `hot` `None` counts nothing as hot (no promotion).
fn pick_boundary(
    v: &Version,
    level: usize,
    hot: Option<&HotPicking<'_>>,
    batch_bytes: u64,
    running: &[RangeClaim],
) -> Option<Compaction> {
    let files = &v.levels[level];
    // Hot bytes per file, asked once.
    let hot_of: Vec<u64> = files
        .iter()
        .map(|f| match hot {
            Some(h) => (h.hot_size)(user_key(f.smallest()), user_key(f.largest())),
            None => 0,
        })
        .collect();
    let cold_of = |i: usize| files[i].size().saturating_sub(hot_of[i]);
    let overlap_of = |from: usize, to: usize| {
        v.overlapping(
            level + 1,
            Some(user_key(files[from].smallest())),
            Some(user_key(files[to].largest())),
        )
    };
    // A neighbour joins a batch if it is free, at least half cold, fits, and lands only in
    // slow files the batch rewrites anyway.
    let joins = |i: usize, bytes: u64, overlap: &[Arc<FileMeta>], from: usize, to: usize| {
        let f = &files[i];
        !f.being_compacted.load(Relaxed)
            && cold_of(i) * 2 >= f.size()
            && bytes + f.size() <= batch_bytes
            && overlap_of(from, to).len() == overlap.len()
    };
    let mut candidates: Vec<Batch> = Vec::new();
    let mut oldest: Option<(usize, Vec<Arc<FileMeta>>)> = None;
    for (i, f) in files.iter().enumerate() {
        if f.being_compacted.load(Relaxed) {
            continue;
        }
        let overlap = overlap_of(i, i);
        if claimed(&overlap) || !range_free(v, running, level, &files[i..=i], &overlap) {
            continue;
        }
        if oldest
            .as_ref()
            .is_none_or(|(o, _)| f.number < files[*o].number)
        {
            oldest = Some((i, overlap.clone()));
        }
        if cold_of(i) == 0 {
            continue;
        }
        let (mut from, mut to) = (i, i);
        let mut bytes = f.size();
        if bytes < batch_bytes {
            while to + 1 < files.len()
                && joins(to + 1, bytes, &overlap, from, to + 1)
                && range_free(v, running, level, &files[from..=to + 1], &overlap)
            {
                to += 1;
                bytes += files[to].size();
            }
            while from > 0
                && joins(from - 1, bytes, &overlap, from - 1, to)
                && range_free(v, running, level, &files[from - 1..=to], &overlap)
            {
                from -= 1;
                bytes += files[from].size();
            }
        }
        let cold: u64 = (from..=to).map(cold_of).sum();
        // The slow files' live bytes, as level sizes count them (see `level_scores`).
        let overlap_bytes: u64 = overlap.iter().map(|o| o.valid_bytes()).sum();
        let score = cold as f64 / (bytes + overlap_bytes).max(1) as f64;
        candidates.push(Batch {
            from,
            to,
            overlap,
            score,
        });
    }
    let best = candidates.iter().map(|b| b.score).fold(0.0f64, f64::max);
    let chosen = candidates
        .into_iter()
        .filter(|b| b.score >= best * SIMILAR_SCORE)
        .min_by(|a, b| {
            a.overlap
                .len()
                .cmp(&b.overlap.len())
                .then(b.score.total_cmp(&a.score))
        });
    let (inputs, output_inputs) = match chosen {
        Some(b) => (files[b.from..=b.to].to_vec(), b.overlap),
        None => {
            let (i, overlap) = oldest?;
            (vec![files[i].clone()], overlap)
        }
    };
    Some(Compaction {
        level,
        output_level: level + 1,
        inputs,
        output_inputs,
        output_tier: v.layout.tiers[level + 1],
        pushdown: None,
        reason: if hot.is_some() {
            "level size (hot-aware)"
        } else {
            "level size (fast-to-slow)"
        },
    })
}

/// Claims a compaction of `level`'s files overlapping `[lo, hi]` into the next level
/// (manual compaction). `None` if nothing overlaps or a file is already claimed.
/// The files of `level` (not L0) overlapping `[lo, hi]` that hold an expired record at
/// `now` by their properties, rewritten in place: a manual compaction's last step, so that
/// no expired data stays in the deepest level it leaves untouched otherwise.
pub fn pick_expired_in_place(
    v: &Version,
    level: usize,
    lo: Option<&[u8]>,
    hi: Option<&[u8]>,
    now: u64,
) -> Option<Compaction> {
    if level == 0 {
        return None;
    }
    let inputs: Vec<Arc<FileMeta>> = v
        .overlapping(level, lo, hi)
        .into_iter()
        .filter(|f| f.info.expiry.estimated_expired(now) > 0)
        .collect();
    if inputs.is_empty() || claimed(&inputs) {
        return None;
    }
    let c = Compaction {
        level,
        output_level: level,
        inputs,
        output_inputs: Vec::new(),
        output_tier: v.layout.tiers[level],
        pushdown: None,
        reason: EXPIRY_REASON,
    };
    c.claim();
    Some(c)
}

pub fn pick_range(
    v: &Version,
    level: usize,
    lo: Option<&[u8]>,
    hi: Option<&[u8]>,
) -> Option<Compaction> {
    let inputs = if level == 0 {
        v.levels[0].clone()
    } else {
        v.overlapping(level, lo, hi)
    };
    if inputs.is_empty() || claimed(&inputs) || level + 1 >= v.num_levels() {
        return None;
    }
    let (klo, khi) = key_range(&inputs)?;
    let output_inputs = v.overlapping(level + 1, Some(&klo), Some(&khi));
    if claimed(&output_inputs) {
        return None;
    }
    let c = Compaction {
        level,
        output_level: level + 1,
        inputs,
        output_inputs,
        output_tier: v.layout.tiers[level + 1],
        pushdown: None,
        reason: "manual",
    };
    c.claim();
    Some(c)
}

//! Versions: which table files make up each level at a point in time, and the manifest
//! that records every change to them. A [`Version`] is immutable; readers hold an `Arc` to
//! the version they started with, so files stay alive until no reader needs them.
//!
//! File lifetime: a [`FileMeta`] is shared by every version containing it. When a
//! compaction removes a file, the file is marked obsolete; the file is unlinked when the
//! last version (or iterator) holding it drops its reference. Owns file metadata, level
//! lookups and the manifest; it does not decide what to compact.

mod edit;
mod level_iter;
mod set;
mod table_cache;

pub use edit::{NewFile, VersionEdit};
pub use level_iter::LevelIterator;
pub use set::{write_checkpoint_manifest, VersionSet};
pub use table_cache::{TableCache, TableOpenStats};

use crate::env::{Env, IoCause, Tier};
use crate::error::Result;
use crate::key::{compare_internal, user_key, SeqNo};
use crate::sst::block::Block;
use crate::sst::format::BlockHandle;
use crate::sst::{BlockLookup, ScanReads, Table};
use crate::tiers::LevelLayout;
use std::cmp::Ordering;
use std::sync::atomic::{
    AtomicBool,
    Ordering::{Acquire, Relaxed, Release},
};
use std::sync::{Arc, OnceLock};

/// Name of a table file.
pub fn table_file_name(number: u64) -> String {
    format!("{number:06}.sst")
}

/// Name of a WAL file.
pub fn wal_file_name(number: u64) -> String {
    format!("{number:06}.log")
}

/// Name of a manifest file.
pub fn manifest_file_name(number: u64) -> String {
    format!("MANIFEST-{number:06}")
}

/// Parses the number of a `NNNNNN.ext` file name with the given extension.
pub fn parse_file_number(name: &str, ext: &str) -> Option<u64> {
    name.strip_suffix(ext)?.strip_suffix('.')?.parse().ok()
}

/// A live table file.
pub struct FileMeta {
    /// The recorded metadata.
    pub info: NewFile,
    /// File number (same as `info.number`; kept at top level for brevity).
    pub number: u64,
    /// Tier whose directory holds the file.
    pub tier: Tier,
    /// Claimed by a running compaction.
    pub(crate) being_compacted: AtomicBool,
    /// Removed from the current version; unlink once unreferenced.
    obsolete: AtomicBool,
    /// What user scans read from the table (counted while it is open, kept while it is
    /// closed; the picker's scan-driven choices read it, `compaction::picker`).
    pub(crate) scan_reads: Arc<ScanReads>,
    /// The reader opened for an older version after the table was removed (see
    /// `TableCache::get`): it lives as long as the versions naming the file, no longer.
    pub(crate) late_reader: OnceLock<Arc<Table>>,
    env: Arc<Env>,
}

impl FileMeta {
    pub(crate) fn new(info: NewFile, env: Arc<Env>) -> Self {
        FileMeta {
            number: info.number,
            tier: info.tier,
            info,
            being_compacted: AtomicBool::new(false),
            obsolete: AtomicBool::new(false),
            scan_reads: Arc::default(),
            late_reader: OnceLock::new(),
            env,
        }
    }

    /// The device model of the tier holding the file (none when it is not emulated).
    pub fn device_profile(&self) -> crate::env::DeviceProfile {
        self.env.device_profile(self.tier)
    }

    /// Smallest internal key.
    pub fn smallest(&self) -> &[u8] {
        &self.info.smallest
    }

    /// Largest internal key.
    pub fn largest(&self) -> &[u8] {
        &self.info.largest
    }

    /// File size in bytes.
    pub fn size(&self) -> u64 {
        self.info.size
    }

    /// Live bytes: the file less its garbage (a semi-sorted table's dirty blocks and
    /// earlier generations' metadata, recorded in the manifest; a sorted table has none).
    pub fn valid_bytes(&self) -> u64 {
        self.info.size.saturating_sub(self.info.garbage_bytes)
    }

    /// The bytes level sizes count: the live bytes less a semi-sorted table's key list
    /// (both recorded in the manifest), i.e. about what a sorted table of the same records
    /// would take; a sorted table counts whole. So garbage alone never makes a level
    /// overflow into the next (the semi-sorted rewrite rule bounds it instead), and a
    /// semi-sorted level holds as much data at its target as a sorted one.
    pub fn sized_bytes(&self) -> u64 {
        self.valid_bytes().saturating_sub(self.info.key_list_bytes)
    }

    /// True once a compaction has removed this file from the current version.
    pub fn is_obsolete(&self) -> bool {
        self.obsolete.load(Acquire)
    }

    /// True while a compaction is reading this file or after one removed it.
    pub fn is_being_or_been_compacted(&self) -> bool {
        self.being_compacted.load(Relaxed) || self.is_obsolete()
    }

    pub(crate) fn mark_obsolete(&self) {
        self.obsolete.store(true, Release);
    }

    /// True if the user key lies within the file's key range.
    pub fn contains_user_key(&self, key: &[u8]) -> bool {
        user_key(self.smallest()) <= key && key <= user_key(self.largest())
    }

    /// True if the file's user-key range intersects `[lo, hi]` (None = unbounded).
    pub fn overlaps(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> bool {
        !(hi.is_some_and(|hi| user_key(self.smallest()) > hi)
            || lo.is_some_and(|lo| user_key(self.largest()) < lo))
    }
}

impl Drop for FileMeta {
    fn drop(&mut self) {
        if self.is_obsolete() {
            if let Err(e) = self.env.remove(self.tier, &table_file_name(self.number)) {
                tracing::warn!("could not delete obsolete table: {e}");
            }
        }
    }
}

impl std::fmt::Debug for FileMeta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileMeta")
            .field("number", &self.number)
            .field("tier", &self.tier)
            .field("size", &self.info.size)
            .finish()
    }
}

/// What a version lookup found.
#[derive(Debug, PartialEq, Eq)]
pub enum LevelGet {
    /// A value at this level.
    Found(bytes::Bytes),
    /// A tombstone at this level.
    Deleted,
}

/// Where a version lookup found its answer.
#[derive(Debug)]
pub struct LevelHit {
    /// The value or tombstone.
    pub result: LevelGet,
    /// Level of the file that held it.
    pub level: usize,
    /// Tier the record was read from: its file's, or the fast tier for a slow table's
    /// record served by the fast disk's record cache (`crate::record_cache`).
    pub tier: Tier,
    /// Sequence number of the entry found.
    pub seq: SeqNo,
    /// The deadline of an expiring value (whether it has passed is the reader's call).
    pub deadline: Option<u64>,
    /// Number of the table file that held it.
    pub file: u64,
    /// The data block that held it (what a KP cache entry points at).
    pub block: crate::sst::format::BlockHandle,
}

/// An immutable set of files per level.
pub struct Version {
    /// Files per level: L0 newest first; deeper levels sorted by smallest key, disjoint.
    pub levels: Vec<Vec<Arc<FileMeta>>>,
    /// Level targets and tiers.
    pub layout: Arc<LevelLayout>,
}

impl Version {
    pub(crate) fn empty(layout: Arc<LevelLayout>) -> Self {
        Version {
            levels: vec![Vec::new(); layout.targets.len()],
            layout,
        }
    }

    /// Number of levels.
    pub fn num_levels(&self) -> usize {
        self.levels.len()
    }

    /// Total file bytes of a level (what it occupies on disk, garbage included).
    pub fn level_bytes(&self, level: usize) -> u64 {
        self.levels[level].iter().map(|f| f.size()).sum()
    }

    /// A level's size as level targets measure it ([`FileMeta::sized_bytes`]: live bytes
    /// less semi-sorted key lists; equal to [`Version::level_bytes`] on a level of sorted
    /// tables). Compaction scores, retention's "far over target" and the stats' per-level
    /// size against target use this; disk budgets use file bytes.
    pub fn level_sized_bytes(&self, level: usize) -> u64 {
        self.levels[level].iter().map(|f| f.sized_bytes()).sum()
    }

    /// Total bytes of table files on a tier.
    pub fn tier_bytes(&self, tier: Tier) -> u64 {
        self.levels
            .iter()
            .flatten()
            .filter(|f| f.tier == tier)
            .map(|f| f.size())
            .sum()
    }

    /// Every file, all levels.
    pub fn all_files(&self) -> impl Iterator<Item = (usize, &Arc<FileMeta>)> {
        self.levels
            .iter()
            .enumerate()
            .flat_map(|(l, files)| files.iter().map(move |f| (l, f)))
    }

    /// Files of `level` overlapping the user-key range `[lo, hi]`.
    pub fn overlapping(
        &self,
        level: usize,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
    ) -> Vec<Arc<FileMeta>> {
        self.levels[level]
            .iter()
            .filter(|f| f.overlaps(lo, hi))
            .cloned()
            .collect()
    }

    /// True if no level deeper than `level` holds a file that may contain `key`: a tombstone
    /// written at `level` then hides nothing and may be dropped.
    pub fn is_base_level_for_key(&self, level: usize, key: &[u8]) -> bool {
        self.levels
            .iter()
            .skip(level + 1)
            .all(|files| !files.iter().any(|f| f.contains_user_key(key)))
    }

    /// In a sorted, disjoint level, the index of the first file whose largest key is `>= ikey`.
    pub fn find_file(files: &[Arc<FileMeta>], ikey: &[u8]) -> usize {
        files.partition_point(|f| compare_internal(f.largest(), ikey) == Ordering::Less)
    }

    /// The files of `level` that may hold `seek_key`'s user key by their key ranges (in
    /// L0, which overlaps, all of them in the level's order), as indexes into the level:
    /// appended to `out`.
    fn candidate_files(&self, level: usize, seek_key: &[u8], out: &mut Vec<usize>) {
        let Some(files) = self.levels.get(level) else {
            return;
        };
        let ukey = user_key(seek_key);
        if level == 0 {
            out.extend(
                files
                    .iter()
                    .enumerate()
                    .filter(|(_, f)| f.contains_user_key(ukey))
                    .map(|(i, _)| i),
            );
        } else {
            let i = Version::find_file(files, seek_key);
            if files.get(i).is_some_and(|f| user_key(f.smallest()) <= ukey) {
                out.push(i);
            }
        }
    }

    /// True when a lookup of `seek_key` in `levels` would read no disk (every file it may
    /// look at open, and in each the filter or index ruling the key out or its block
    /// cached), judged without counting or touching anything in the caches. It looks at
    /// every level of the range, where the lookup stops at the first that holds the key, so
    /// it may say false for a lookup that would not read; never true for one that would,
    /// unless a table or block leaves memory meanwhile.
    pub fn get_needs_no_read(
        &self,
        tables: &TableCache,
        seek_key: &[u8],
        levels: std::ops::RangeInclusive<usize>,
    ) -> Result<bool> {
        let mut files = Vec::new();
        for level in levels {
            files.clear();
            self.candidate_files(level, seek_key, &mut files);
            for &i in &files {
                let Some(table) = tables.get_if_open(&self.levels[level][i]) else {
                    return Ok(false);
                };
                if !table.lookup_needs_no_read(seek_key)? {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// Looks `seek_key` (see [`crate::key::seek_key`]) up in the table files, newest level
    /// first, stopping at the first level that holds the user key. `max_level` bounds the
    /// search (levels deeper than it are skipped) so callers can split FD and SD lookups.
    /// Reads the blocks it needs one at a time ([`LevelLookup`] is the same lookup for a
    /// caller that batches the reads).
    pub fn get(
        &self,
        tables: &TableCache,
        seek_key: &[u8],
        levels: std::ops::RangeInclusive<usize>,
        cause: IoCause,
    ) -> Result<Option<LevelHit>> {
        let mut lookup = LevelLookup::new(levels);
        let mut block = None;
        loop {
            match lookup.step(self, tables, seek_key, cause, block.take())? {
                LevelStep::Done(hit) => return Ok(hit),
                LevelStep::Read(table, h) => block = Some(table.read_data_block(h, cause)),
            }
        }
    }
}

/// What a [`LevelLookup`] step ends with.
pub enum LevelStep {
    /// The lookup's answer: the newest version in the levels, if any.
    Done(Option<LevelHit>),
    /// The lookup needs this data block of this table from disk (not in the block cache):
    /// the next step takes its read's result.
    Read(Arc<Table>, BlockHandle),
}

/// [`Version::get`] as a resumable state machine: each [`LevelLookup::step`] runs until
/// the lookup is answered or needs a data block from disk, so that a caller can gather
/// the block reads of many keys' lookups and issue them together (`Db::multi_get`).
/// Everything but those reads (the file choice per level, filters, index, block cache,
/// table opens) happens inside the steps, exactly as a one-key get does.
pub struct LevelLookup {
    /// The next level to visit and the last.
    next: usize,
    end: usize,
    /// The level being visited and its candidate files (indexes into the level), the
    /// next of them to look at.
    level: usize,
    files: Vec<usize>,
    pos: usize,
    /// The newest version found in the level so far (L0's files overlap).
    best: Option<LevelHit>,
    /// The file whose block the last step asked for, with the table and handle.
    waiting: Option<(usize, Arc<Table>, BlockHandle)>,
    /// Offer what a slow table's block read finds to the record cache: only a read of
    /// the latest state may (see `crate::record_cache`).
    offers_records: bool,
}

impl LevelLookup {
    /// A lookup over `levels`.
    pub fn new(levels: std::ops::RangeInclusive<usize>) -> LevelLookup {
        LevelLookup {
            next: *levels.start(),
            end: *levels.end(),
            level: 0,
            files: Vec::new(),
            pos: 0,
            best: None,
            waiting: None,
            offers_records: false,
        }
    }

    /// The same lookup, offering the records its slow-table block reads find to the
    /// fast disk's record cache when `latest` (the read is of the latest state).
    pub fn offering_records(mut self, latest: bool) -> LevelLookup {
        self.offers_records = latest;
        self
    }

    /// Goes on with the lookup of `seek_key` in `version` until it is answered or needs a
    /// block read. `block`: the result of reading the block the previous step asked for
    /// (`None` on the first step). `version` must be the same on every step.
    pub fn step(
        &mut self,
        version: &Version,
        tables: &TableCache,
        seek_key: &[u8],
        cause: IoCause,
        block: Option<Result<Block>>,
    ) -> Result<LevelStep> {
        if let Some((file, table, h)) = self.waiting.take() {
            let Some(block) = block else {
                // Asked for a block and not given it: ask again.
                self.waiting = Some((file, table.clone(), h));
                return Ok(LevelStep::Read(table, h));
            };
            let found = table.search_block(&block?, h, seek_key)?;
            let f = &version.levels[self.level][file];
            if let (true, Some(records), Some((ikey, value))) = (
                self.offers_records && cause == IoCause::UserGet && f.tier == Tier::Slow,
                tables.record_cache(),
                &found,
            ) {
                records.offer(
                    crate::cache::key_hash(user_key(seek_key)),
                    f.number,
                    ikey,
                    value,
                );
            }
            self.consider(version, tables, file, found, h)?;
        }
        loop {
            if self.pos >= self.files.len() {
                if self.best.is_some() || self.next > self.end {
                    return Ok(LevelStep::Done(self.best.take()));
                }
                let level = self.next;
                self.next += 1;
                if level >= version.levels.len() {
                    self.next = self.end + 1;
                    continue;
                }
                self.level = level;
                self.pos = 0;
                self.files.clear();
                version.candidate_files(level, seek_key, &mut self.files);
                continue;
            }
            let file = self.files[self.pos];
            let f = &version.levels[self.level][file];
            // L0 files overlap. They are ordered newest first by largest sequence number,
            // but a promoted file holds old records, so keep looking while a later file
            // could still hold a newer version than the best found.
            if self
                .best
                .as_ref()
                .is_some_and(|b| f.info.largest_seq < b.seq)
            {
                self.pos = self.files.len();
                continue;
            }
            let table = tables.get(f, cause)?;
            match table.locate(seek_key)? {
                BlockLookup::Absent => self.pos += 1,
                BlockLookup::Cached(h, block) => {
                    let found = table.search_block(&block, h, seek_key)?;
                    self.consider(version, tables, file, found, h)?;
                }
                BlockLookup::Read(h) => {
                    if let Some(found) = record_cache_answer(tables, f, seek_key, cause) {
                        let number = f.number;
                        self.consider(version, tables, file, Some(found), h)?;
                        if let Some(b) = self.best.as_mut().filter(|b| b.file == number) {
                            b.tier = Tier::Fast;
                        }
                        continue;
                    }
                    self.waiting = Some((file, table.clone(), h));
                    return Ok(LevelStep::Read(table, h));
                }
            }
        }
    }

    /// Takes what file `file` of the current level held (if anything) into account and
    /// moves to the next candidate.
    fn consider(
        &mut self,
        version: &Version,
        tables: &TableCache,
        file: usize,
        found: Option<(bytes::Bytes, bytes::Bytes)>,
        block: BlockHandle,
    ) -> Result<()> {
        self.pos += 1;
        let Some((ikey, value)) = found else {
            return Ok(());
        };
        let f = &version.levels[self.level][file];
        let parsed = crate::key::parse_internal_key(&ikey).ok_or_else(|| {
            crate::error::Error::corruption(
                tables_path(tables, f),
                0,
                "table returned a malformed internal key",
            )
        })?;
        if self.best.as_ref().is_some_and(|b| b.seq >= parsed.seq) {
            return Ok(());
        }
        let (result, deadline) = match parsed.kind {
            crate::key::ValueKind::Value => (LevelGet::Found(value), None),
            crate::key::ValueKind::Expiring => {
                let (_, deadline) =
                    crate::expiry::split_stored(parsed.kind, &value).ok_or_else(|| {
                        crate::error::Error::corruption(
                            tables_path(tables, f),
                            0,
                            "expiring value shorter than its deadline",
                        )
                    })?;
                let value = value.slice(crate::expiry::DEADLINE_LEN..);
                (LevelGet::Found(value), deadline)
            }
            crate::key::ValueKind::Delete => (LevelGet::Deleted, None),
        };
        self.best = Some(LevelHit {
            result,
            level: self.level,
            tier: f.tier,
            seq: parsed.seq,
            deadline,
            file: f.number,
            block,
        });
        if self.level > 0 {
            self.pos = self.files.len();
        }
        Ok(())
    }
}

/// What the fast disk's record cache holds for a get's key in slow table `f`, instead of
/// reading the table's block (the pair the block's search would return).
fn record_cache_answer(
    tables: &TableCache,
    f: &FileMeta,
    seek_key: &[u8],
    cause: IoCause,
) -> Option<(bytes::Bytes, bytes::Bytes)> {
    if cause != IoCause::UserGet || f.tier != Tier::Slow {
        return None;
    }
    let records = tables.record_cache()?;
    let key = user_key(seek_key);
    let read_seq = crate::key::trailer(seek_key) >> 8;
    records.get(key, crate::cache::key_hash(key), f.number, read_seq)
}

fn tables_path(_tables: &TableCache, f: &FileMeta) -> std::path::PathBuf {
    f.env.path(f.tier, &table_file_name(f.number))
}

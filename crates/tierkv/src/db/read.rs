//! The point-read path, in tier order: the memtables, the point caches (KV values and KP
//! pointers), the fast levels, the promotion cache, the slow levels, and then the work a
//! hit owes the rest of the store (counters, cache admission, hotness, promotion offers).
//! Each stage is one method; [`DbInner::get`] reads them in order, as LevelDB's
//! `DBImpl::Get` does.
//!
//! The stages fall in two halves at the first that may read a disk: `get_inline`
//! (memtables, point-cache lookup) and `get_from_disk` (a KP pointer's block, the levels,
//! the promotion cache). `get` runs both; a `multi_get` batch (`multi_get.rs`) runs the
//! first for every key on the caller's thread and the second on its reader pool.
//!
//! The levels split at the last fast level only while promotion runs (HotRAP's read order:
//! fast levels, promotion cache, slow levels); otherwise every level is read in one pass.
//!
//! Expiry (`crate::expiry`): the read takes the time once (a `multi_get` batch once for
//! all its keys, in its [`ReadPoint`]), and the first version found decides as before,
//! an expired one answering "absent" (it hides older versions). The point caches never
//! hold an expiring record (see [`DbInner::after_level_hit`]), so a cache hit needs no
//! deadline check.

use super::stats::Counters;
use super::{DbInner, SuperVersion};
use crate::cache::{key_hash, BlockPtr, Cache, PointLookup};
use crate::env::{thread_read_count, IoCause, Tier};
use crate::expiry::{is_expired, Entry};
use crate::key::{parse_internal_key, seek_key, SeqNo, ValueKind, MAX_SEQ};
use crate::memtable::MemGet;
use crate::options::ReadOptions;
use crate::version::{LevelGet, LevelHit, Version};
use crate::Result;
use arc_swap::Guard;
use bytes::Bytes;
use std::ops::RangeInclusive;
use std::sync::Arc;

/// A stage's verdict: `Some(answer)` ends the read, `None` goes on to the next stage.
type Verdict = Option<Option<Entry>>;

/// A live record without a deadline.
fn plain(value: Vec<u8>) -> Entry {
    Entry {
        value,
        deadline: None,
    }
}

/// What a read fixes before looking anywhere, besides its SuperVersion: the same for
/// every key of a [`DbInner::multi_get`] batch (one snapshot for the batch).
#[derive(Clone, Copy)]
pub(super) struct ReadPoint {
    /// The sequence number it reads at.
    seq: SeqNo,
    /// The cache's flush fence and the promotion cache's epoch, both taken before the
    /// SuperVersion: an insert into either cache gives up if a flush or compaction it
    /// cannot see ran since.
    fence: u64,
    epoch: u64,
    /// A read of the latest state (no snapshot).
    latest: bool,
    /// The time of the read (`Options::clock`, read once): records with a deadline at or
    /// before it read as deleted.
    now: u64,
}

/// What one read fixed before looking anywhere.
pub(super) struct Read<'a> {
    key: &'a [u8],
    /// The sequence number it reads at and the memtables and version it reads.
    seq: SeqNo,
    sv: &'a SuperVersion,
    /// The point caches, for reads of the latest state only (their entries are the newest
    /// version outside the memtables, which a snapshot may not be allowed to see).
    cache: Option<&'a Arc<Cache>>,
    /// The key's cache hash (0 without a cache).
    hash: u64,
    /// See [`ReadPoint`].
    fence: u64,
    epoch: u64,
    latest: bool,
    /// See [`ReadPoint`].
    now: u64,
    /// Promotion runs (a hotness tracker exists).
    promoting: bool,
    /// The last level read before the promotion cache, and the last level.
    split: usize,
    last: usize,
    /// The point caches remembered the key (a ghost hit or a stale pointer): it enters KV.
    warm: bool,
}

/// How far the stages that never touch a disk (memtables, point caches) got with a key.
pub(super) enum Inline {
    /// They answered.
    Answer(Option<Entry>),
    /// The KP cache names the block that holds the key's newest version.
    Pointer(BlockPtr),
    /// The table levels must be read.
    Levels,
}

/// A key of a [`DbInner::multi_get`] batch that needs the disk-reading stages: what its
/// inline stages learned, so that any thread can go on from there.
pub(super) struct PendingKey {
    /// The key's position in the caller's batch.
    pub index: usize,
    hash: u64,
    warm: bool,
    pointer: Option<BlockPtr>,
}

impl DbInner {
    /// Reads the newest version of `key` visible to `ropts`, with its deadline; an expired
    /// record reads as absent.
    pub(super) fn get(&self, key: &[u8], ropts: &ReadOptions) -> Result<Option<Entry>> {
        Counters::add(&self.counters.gets, 1);
        let (at, sv) = self.start_read(ropts)?;
        let mut r = self.read_at(key, &sv, at);
        match self.get_inline(&mut r) {
            Inline::Answer(answer) => Ok(answer),
            Inline::Pointer(p) => self.get_from_disk(&mut r, Some(p)),
            Inline::Levels => self.get_from_disk(&mut r, None),
        }
    }

    /// Stages 1 and 2 (memtables, point caches), which never read a disk. Counts the get.
    /// `None` with `pending` filled: the key needs [`DbInner::get_pending`].
    pub(super) fn get_inline_for_batch(
        &self,
        index: usize,
        key: &[u8],
        sv: &SuperVersion,
        at: ReadPoint,
    ) -> std::result::Result<Option<Entry>, PendingKey> {
        Counters::add(&self.counters.gets, 1);
        let mut r = self.read_at(key, sv, at);
        let pointer = match self.get_inline(&mut r) {
            Inline::Answer(answer) => return Ok(answer),
            Inline::Pointer(p) => Some(p),
            Inline::Levels => None,
        };
        Err(PendingKey {
            index,
            hash: r.hash,
            warm: r.warm,
            pointer,
        })
    }

    /// The disk-reading stages of a key [`DbInner::get_inline_for_batch`] left pending, on
    /// whichever thread runs it (the counters of disk reads are per thread, and the whole
    /// rest of the key's read runs here).
    pub(super) fn get_pending(
        &self,
        key: &[u8],
        sv: &SuperVersion,
        at: ReadPoint,
        pending: &PendingKey,
    ) -> Result<Option<Entry>> {
        let mut r = self.read_at(key, sv, at);
        r.hash = pending.hash;
        r.warm = pending.warm;
        self.get_from_disk(&mut r, pending.pointer)
    }

    /// Stages 1 and 2 of one read, in order.
    fn get_inline(&self, r: &mut Read<'_>) -> Inline {
        if let Some(answer) = self.get_from_memtables(r) {
            return Inline::Answer(answer);
        }
        self.lookup_point_cache(r)
    }

    /// Stages 2 (a KP pointer's block) to 6: everything that may read a disk.
    fn get_from_disk(&self, r: &mut Read<'_>, pointer: Option<BlockPtr>) -> Result<Option<Entry>> {
        if let Some(p) = pointer {
            if let Some(answer) = self.follow_point_cache_pointer(r, p)? {
                return Ok(answer);
            }
        }
        let reads_before = thread_read_count();
        let mut hit = self.get_from_levels(r, 0..=r.split)?;
        if hit.is_none() && r.promoting {
            if let Some(answer) = self.get_from_promotion_cache(r) {
                return Ok(answer);
            }
        }
        if hit.is_none() && r.split < r.last {
            hit = self.get_from_levels(r, r.split + 1..=r.last)?;
        }
        let Some(hit) = hit else {
            Counters::add(&self.counters.get_not_found, 1);
            return Ok(None);
        };
        self.count_level_hit(&hit, thread_read_count() != reads_before);
        Ok(self.after_level_hit(r, hit))
    }

    /// Takes the cache fence, the promotion epoch and then the sequence number and
    /// SuperVersion, in that order (see `crate::cache` and `hot::promotion`): every write at
    /// or below the sequence is already in a memtable or table this SuperVersion (or a later
    /// one) contains.
    pub(super) fn start_read(
        &self,
        ropts: &ReadOptions,
    ) -> Result<(ReadPoint, Guard<Arc<SuperVersion>>)> {
        let latest = ropts.snapshot.is_none();
        let fence = self
            .point_cache(latest)
            .map_or(0, |c: &Arc<Cache>| c.fence());
        let epoch = self.pc.read_epoch();
        let (seq, sv) = self.read_view(ropts.snapshot)?;
        Ok((
            ReadPoint {
                seq,
                fence,
                epoch,
                latest,
                now: self.opts.clock.now_ms(),
            },
            sv,
        ))
    }

    /// The point caches a read may use: only a read of the latest state.
    fn point_cache(&self, latest: bool) -> Option<&Arc<Cache>> {
        self.tables.cache().filter(|c| latest && c.point_enabled())
    }

    /// One key's read at a fixed point.
    fn read_at<'a>(&'a self, key: &'a [u8], sv: &'a SuperVersion, at: ReadPoint) -> Read<'a> {
        let promoting = self.hot_tracker.is_some();
        let last = sv.version.num_levels() - 1;
        let split = if promoting {
            self.layout.last_fast_level.min(last)
        } else {
            last
        };
        Read {
            key,
            seq: at.seq,
            sv,
            cache: self.point_cache(at.latest),
            hash: 0,
            fence: at.fence,
            epoch: at.epoch,
            latest: at.latest,
            promoting,
            split,
            last,
            warm: false,
            now: at.now,
        }
    }

    /// Stage 1: the mutable memtable, then the immutable ones, newest first.
    fn get_from_memtables(&self, r: &Read<'_>) -> Verdict {
        for mem in std::iter::once(&r.sv.mem).chain(r.sv.imms.iter()) {
            match mem.get(r.key, r.seq) {
                MemGet::Found(v, deadline) => {
                    Counters::add(&self.counters.get_memtable, 1);
                    if is_expired(deadline, r.now) {
                        return Some(None);
                    }
                    // A hot key that is also updated often must keep its score, or it
                    // would not be retained when its older versions move down.
                    self.record_access(r.key, v.len());
                    return Some(Some(Entry {
                        value: v.to_vec(),
                        deadline,
                    }));
                }
                MemGet::Deleted => {
                    Counters::add(&self.counters.get_memtable, 1);
                    return Some(None);
                }
                MemGet::NotFound => {}
            }
        }
        None
    }

    /// Stage 2: the KV cache's value, or the block a KP pointer names (read by
    /// [`DbInner::follow_point_cache_pointer`], as it may need the disk).
    fn lookup_point_cache(&self, r: &mut Read<'_>) -> Inline {
        let Some(c) = r.cache else {
            return Inline::Levels;
        };
        r.hash = key_hash(r.key);
        match c.lookup_point(r.key, r.hash) {
            PointLookup::Value(v) => {
                Counters::add(&self.counters.get_kv_cache, 1);
                if r.promoting {
                    // Hotness must not fade because the cache answers.
                    self.record_access(r.key, v.len());
                }
                Inline::Answer(Some(plain(v)))
            }
            PointLookup::Pointer(p) => Inline::Pointer(p),
            PointLookup::Miss { warm } => {
                r.warm = warm;
                Inline::Levels
            }
        }
    }

    /// Stage 2, a KP pointer: the block it names. A stale pointer is forgotten and the
    /// read goes on to the levels with the key warm.
    fn follow_point_cache_pointer(&self, r: &mut Read<'_>, p: BlockPtr) -> Result<Verdict> {
        let Some(c) = r.cache else {
            return Ok(None);
        };
        let reads_before = thread_read_count();
        let Some((value, found_seq, tier)) = self.read_pointer(&r.sv.version, r.key, &p)? else {
            c.forget(r.key, r.hash, p);
            r.warm = true;
            return Ok(None);
        };
        let counter = match (thread_read_count() != reads_before, tier) {
            (false, _) => &self.counters.get_kp_cache,
            (true, Tier::Fast) => &self.counters.get_fast,
            (true, Tier::Slow) => &self.counters.get_slow,
        };
        Counters::add(counter, 1);
        c.upgrade_to_value(r.key, r.hash, &value, p, r.fence);
        // By level, not tier, as after a level hit.
        if r.promoting {
            if (p.level as usize) <= self.layout.last_fast_level {
                self.record_access(r.key, value.len());
            } else {
                self.offer_for_promotion(r.key, &value, found_seq, None, r.epoch);
            }
        }
        Ok(Some(Some(plain(Vec::from(value)))))
    }

    /// Stages 3 and 5: the table levels in `levels` (the fast ones, or the slow ones).
    fn get_from_levels(
        &self,
        r: &Read<'_>,
        levels: RangeInclusive<usize>,
    ) -> Result<Option<LevelHit>> {
        let lookup = seek_key(r.key, r.seq);
        r.sv.version
            .get(&self.tables, &lookup, levels, IoCause::UserGet)
    }

    /// Stage 4: records read from the slow tier earlier and not yet promoted. A hit enters
    /// the KV cache as a record of the first slow level (its table is there), unless it
    /// expires; an expired one answers "absent" (it is the slow tier's newest version).
    fn get_from_promotion_cache(&self, r: &Read<'_>) -> Verdict {
        let rec = self.pc.get(r.key, r.seq)?;
        Counters::add(&self.counters.get_promotion_cache, 1);
        if is_expired(rec.deadline, r.now) {
            return Some(None);
        }
        self.record_access(r.key, rec.value.len());
        if let (Some(c), None) = (r.cache, rec.deadline) {
            c.admit(
                r.key,
                r.hash,
                &rec.value,
                r.split + 1,
                None,
                r.warm,
                r.fence,
            );
        }
        Some(Some(Entry {
            value: rec.value.to_vec(),
            deadline: rec.deadline,
        }))
    }

    /// Counts where a level hit came from: the block cache when no disk read happened,
    /// otherwise the tier of the file read.
    fn count_level_hit(&self, hit: &LevelHit, touched_disk: bool) {
        let counter = match (touched_disk, hit.tier) {
            (false, _) => &self.counters.get_block_cache,
            (true, Tier::Fast) => &self.counters.get_fast,
            (true, Tier::Slow) => &self.counters.get_slow,
        };
        Counters::add(counter, 1);
    }

    /// Stage 6, after a level hit: a value is admitted to the point caches and its access
    /// recorded (a fast level) or offered for promotion (a slow level). An expired record
    /// is a deletion: nothing is recorded, cached or offered.
    ///
    /// An expiring record never enters the point caches: their entries (a value, or a
    /// block pointer the flush re-points) have no room for a deadline, and a cached
    /// deadline would also have to be re-checked on every hit and by every flush that
    /// updates the entry. Leaving such records out keeps the caches' invariant (an entry
    /// is the newest version outside the memtables, and it is live) without a format
    /// change; what it costs is that records with a TTL are read from their blocks (the
    /// block cache still holds those).
    fn after_level_hit(&self, r: &Read<'_>, hit: LevelHit) -> Option<Entry> {
        let LevelGet::Found(value) = hit.result else {
            return None;
        };
        if is_expired(hit.deadline, r.now) {
            return None;
        }
        if let (Some(c), None) = (r.cache, hit.deadline) {
            let ptr = BlockPtr {
                file: hit.file,
                level: hit.level.min(u8::MAX as usize) as u8,
                handle: hit.block,
            };
            c.admit(r.key, r.hash, &value, hit.level, Some(ptr), r.warm, r.fence);
        }
        // Classified by level, not by the file's tier: a spilled table of a fast level
        // lives on the slow disk but sits above the promotion cache in the read order, and
        // no compaction into the slow tier would ever drain a record cached from it.
        if r.promoting {
            if hit.level <= r.split {
                self.record_access(r.key, value.len());
            } else if r.latest {
                // Only reads of the latest state may cache: a snapshot read may have
                // returned a version that is no longer the newest.
                self.offer_for_promotion(r.key, &value, hit.seq, hit.deadline, r.epoch);
            }
        }
        Some(Entry {
            value: Vec::from(value),
            deadline: hit.deadline,
        })
    }

    /// Follows a KP cache pointer: the newest version of `key` in the block it names, if
    /// that file is still at the pointer's level in `version` and the block holds a value
    /// of the key. `None` (a compaction moved the key, it was deleted, or its newest
    /// version expires: such records are not cached) sends the caller back to the levels.
    fn read_pointer(
        &self,
        version: &Version,
        key: &[u8],
        p: &BlockPtr,
    ) -> Result<Option<(Bytes, SeqNo, Tier)>> {
        let Some(files) = version.levels.get(p.level as usize) else {
            return Ok(None);
        };
        let target = seek_key(key, MAX_SEQ);
        let meta = if p.level == 0 {
            files.iter().find(|f| f.number == p.file)
        } else {
            files
                .get(Version::find_file(files, &target))
                .filter(|f| f.number == p.file)
        };
        let Some(meta) = meta else {
            return Ok(None);
        };
        let table = self.tables.get(meta, IoCause::UserGet)?;
        let Some((ikey, value)) = table.get_in_block(p.handle, &target, IoCause::UserGet)? else {
            return Ok(None);
        };
        Ok(match parse_internal_key(&ikey) {
            Some(k) if k.kind == ValueKind::Value => Some((value, k.seq, meta.tier)),
            _ => None,
        })
    }
}

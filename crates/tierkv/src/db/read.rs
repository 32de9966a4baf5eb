//! The point-read path, in tier order: the memtables, the point caches (KV values and KP
//! pointers), the fast levels, the promotion cache, the slow levels, and then the work a
//! hit owes the rest of the store (counters, cache admission, hotness, promotion offers).
//! Each stage is one method; [`DbInner::get`] reads them in order, as LevelDB's
//! `DBImpl::Get` does.
//!
//! The levels split at the last fast level only while promotion runs (HotRAP's read order:
//! fast levels, promotion cache, slow levels); otherwise every level is read in one pass.
//!
//! Expiry (`crate::expiry`): the read takes the time once, and the first version found
//! decides as before, an expired one answering "absent" (it hides older versions). The
//! point caches never hold an expiring record (see [`DbInner::after_level_hit`]), so a
//! cache hit needs no deadline check.

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

/// What one read fixed before looking anywhere.
struct Read<'a> {
    key: &'a [u8],
    /// The sequence number it reads at and the memtables and version it reads.
    seq: SeqNo,
    sv: Guard<Arc<SuperVersion>>,
    /// The point caches, for reads of the latest state only (their entries are the newest
    /// version outside the memtables, which a snapshot may not be allowed to see).
    cache: Option<&'a Arc<Cache>>,
    /// The key's cache hash (0 without a cache).
    hash: u64,
    /// The cache's flush fence and the promotion cache's epoch, both taken before the
    /// SuperVersion: an insert into either cache gives up if a flush or compaction it
    /// cannot see ran since.
    fence: u64,
    epoch: u64,
    /// A read of the latest state (no snapshot).
    latest: bool,
    /// Promotion runs (a hotness tracker exists).
    promoting: bool,
    /// The last level read before the promotion cache, and the last level.
    split: usize,
    last: usize,
    /// The point caches remembered the key (a ghost hit or a stale pointer): it enters KV.
    warm: bool,
    /// The time of the read (`Options::clock`): records with a deadline at or before it
    /// read as deleted.
    now: u64,
}

impl DbInner {
    /// Reads the newest version of `key` visible to `ropts`, with its deadline; an expired
    /// record reads as absent.
    pub(super) fn get(&self, key: &[u8], ropts: &ReadOptions) -> Result<Option<Entry>> {
        Counters::add(&self.counters.gets, 1);
        let mut r = self.start_read(key, ropts)?;
        if let Some(answer) = self.get_from_memtables(&r) {
            return Ok(answer);
        }
        if let Some(answer) = self.get_from_point_cache(&mut r)? {
            return Ok(answer);
        }
        let reads_before = thread_read_count();
        let mut hit = self.get_from_levels(&r, 0..=r.split)?;
        if hit.is_none() && r.promoting {
            if let Some(answer) = self.get_from_promotion_cache(&r) {
                return Ok(answer);
            }
        }
        if hit.is_none() && r.split < r.last {
            hit = self.get_from_levels(&r, r.split + 1..=r.last)?;
        }
        let Some(hit) = hit else {
            Counters::add(&self.counters.get_not_found, 1);
            return Ok(None);
        };
        self.count_level_hit(&hit, thread_read_count() != reads_before);
        Ok(self.after_level_hit(&r, hit))
    }

    /// Takes the cache fence, the promotion epoch and then the sequence number and
    /// SuperVersion, in that order (see `crate::cache` and `hot::promotion`): every write at
    /// or below the sequence is already in a memtable or table this SuperVersion (or a later
    /// one) contains.
    fn start_read<'a>(&'a self, key: &'a [u8], ropts: &ReadOptions) -> Result<Read<'a>> {
        let latest = ropts.snapshot.is_none();
        let cache = self.tables.cache().filter(|c| latest && c.point_enabled());
        let fence = cache.map_or(0, |c| c.fence());
        let epoch = self.pc.read_epoch();
        let (seq, sv) = self.read_view(ropts.snapshot)?;
        let promoting = self.hot_tracker.is_some();
        let last = sv.version.num_levels() - 1;
        let split = if promoting {
            self.layout.last_fast_level.min(last)
        } else {
            last
        };
        Ok(Read {
            key,
            seq,
            sv,
            cache,
            hash: 0,
            fence,
            epoch,
            latest,
            promoting,
            split,
            last,
            warm: false,
            now: self.opts.clock.now_ms(),
        })
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

    /// Stage 2: the KV cache's value, or the block a KP pointer names. A stale pointer is
    /// forgotten and the read goes on to the levels with the key warm.
    fn get_from_point_cache(&self, r: &mut Read<'_>) -> Result<Verdict> {
        let Some(c) = r.cache else {
            return Ok(None);
        };
        r.hash = key_hash(r.key);
        match c.lookup_point(r.key, r.hash) {
            PointLookup::Value(v) => {
                Counters::add(&self.counters.get_kv_cache, 1);
                if r.promoting {
                    // Hotness must not fade because the cache answers.
                    self.record_access(r.key, v.len());
                }
                Ok(Some(Some(plain(v))))
            }
            PointLookup::Pointer(p) => {
                let reads_before = thread_read_count();
                let Some((value, found_seq, tier)) = self.read_pointer(&r.sv.version, r.key, &p)?
                else {
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
            PointLookup::Miss { warm } => {
                r.warm = warm;
                Ok(None)
            }
        }
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

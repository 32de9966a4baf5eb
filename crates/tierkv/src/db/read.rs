//! The point-read path, in tier order: the memtables, the point caches (KV values and KP
//! pointers), the fast levels, the promotion cache, the slow levels, and then the work a
//! hit owes the rest of the store (counters, cache admission, hotness, promotion offers).
//! Each stage is one method; [`DbInner::get`] reads them in order, as LevelDB's
//! `DBImpl::Get` does.
//!
//! The stages fall in two halves at the first that may read a disk: `get_inline`
//! (memtables, point-cache lookup) and `get_from_disk` (a KP pointer's block, the levels,
//! the promotion cache). `get` runs both; a `multi_get` batch (`multi_get.rs`) runs the
//! first for every key on the caller's thread and the second through io_uring rounds or
//! on its reader pool. The second half is a resumable state machine ([`DiskGet`], driven
//! by [`DbInner::advance`]) that stops at each data block it must read from disk:
//! `get_from_disk` reads each at once, a batch gathers many keys' reads and submits them
//! together. Both run the same stages, so everything after a read is shared.
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
use crate::env::{thread_read_count, IoCause, MemoryOnly, Tier};
use crate::error::{Error, Result};
use crate::expiry::{is_expired, Entry};
use crate::key::{parse_internal_key, seek_key, SeqNo, ValueKind, MAX_SEQ};
use crate::memtable::MemGet;
use crate::options::ReadOptions;
use crate::sst::block::Block;
use crate::sst::format::BlockHandle;
use crate::sst::{BlockLookup, Table};
use crate::version::{FileMeta, LevelGet, LevelHit, LevelLookup, LevelStep, Version};
use arc_swap::Guard;
use bytes::Bytes;
use std::borrow::Cow;
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
    key: Cow<'a, [u8]>,
    /// The sequence number it reads at and the memtables and version it reads.
    seq: SeqNo,
    sv: Pinned<'a>,
    /// The point caches, for reads of the latest state only (their entries are the newest
    /// version outside the memtables, which a snapshot may not be allowed to see).
    cache: Option<&'a Arc<Cache>>,
    /// The key's hash: [`key_hash`], which is also the filters' `filter_hash` (the
    /// memtables' filters and the point caches use it).
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

/// The SuperVersion a read holds: its caller's (a `get`, a `multi_get` batch), or one
/// shared by the keys of one thread's [`DbInner::get_pipelined`] stream that entered
/// while it was current (a key's disk stages outlive the call that started them; an `Rc`
/// of the stream's pin costs no atomic reference count per key).
pub(super) enum Pinned<'a> {
    Borrowed(&'a SuperVersion),
    Shared(StreamPin),
}

/// One thread's share of a pinned SuperVersion: the `Arc` is the pin (taken once per
/// read point), the `Rc` counts the stream's keys holding it without an atomic
/// operation (an `Rc<SuperVersion>` cannot be made from the `ArcSwap`'s `Arc`).
#[allow(
    clippy::redundant_allocation,
    reason = "the Rc is the cheap per-key count over the Arc pin (see above)"
)]
pub(super) type StreamPin = std::rc::Rc<Arc<SuperVersion>>;

impl std::ops::Deref for Pinned<'_> {
    type Target = SuperVersion;
    fn deref(&self) -> &SuperVersion {
        match self {
            Pinned::Borrowed(sv) => sv,
            Pinned::Shared(sv) => sv,
        }
    }
}

impl Read<'_> {
    fn key(&self) -> &[u8] {
        &self.key
    }
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

/// The file a KP pointer names, if `version` still has it where the pointer says (at its
/// level, and in a level past L0 the file whose range holds `target`).
fn pointer_file<'v>(
    version: &'v Version,
    p: &BlockPtr,
    target: &[u8],
) -> Option<&'v Arc<FileMeta>> {
    let files = version.levels.get(p.level as usize)?;
    if p.level == 0 {
        files.iter().find(|f| f.number == p.file)
    } else {
        files
            .get(Version::find_file(files, target))
            .filter(|f| f.number == p.file)
    }
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
            Inline::Pointer(p) => self.get_from_disk(r, Some(p)),
            Inline::Levels => self.get_from_disk(r, None),
        }
    }

    /// [`DbInner::get`] when memory answers it: the memtables, then, when the rest of the
    /// read needs no disk ([`DbInner::needs_no_read`]: the point caches hold the value, or
    /// every block the read may need is cached in an open table), the read proper on this
    /// thread; [`Error::WouldBlock`] for any other key, which is then left as if never
    /// read (the caches are only peeked at, so the caller's retry makes the one lookup
    /// AC-Key counts and learns from). The read proper refuses the disk
    /// ([`MemoryOnly`]), so a table or block that left memory between the peek and the read
    /// also ends in `WouldBlock`: that rare key is then looked up twice (and should another
    /// thread be reopening that table right then, this one waits for its opening).
    pub(super) fn get_in_memory(&self, key: &[u8], ropts: &ReadOptions) -> Result<Option<Entry>> {
        let (at, sv) = self.start_read(ropts)?;
        let mut r = self.read_at(key, &sv, at);
        if let Some(answer) = self.get_from_memtables(&r) {
            Counters::add(&self.counters.gets, 1);
            return Ok(answer);
        }
        if !self.needs_no_read(&r)? {
            return Err(Error::WouldBlock("the key's read needs the disk"));
        }
        let _memory_only = MemoryOnly::enter();
        let answer = match self.lookup_point_cache(&mut r) {
            Inline::Answer(answer) => Ok(answer),
            Inline::Pointer(p) => self.get_from_disk(r, Some(p)),
            Inline::Levels => self.get_from_disk(r, None),
        };
        if answer.is_ok() {
            Counters::add(&self.counters.gets, 1);
        }
        answer
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
        let g = self.disk_get(key, sv, at, pending);
        self.run_disk_get(g)
    }

    /// The disk stages of a pending key as a [`DiskGet`], for a caller that gathers the
    /// block reads of many keys ([`DbInner::advance`]).
    pub(super) fn disk_get<'a>(
        &'a self,
        key: &'a [u8],
        sv: &'a SuperVersion,
        at: ReadPoint,
        pending: &PendingKey,
    ) -> DiskGet<'a> {
        let mut r = self.read_at(key, sv, at);
        r.hash = pending.hash;
        r.warm = pending.warm;
        DiskGet::new(r, pending.pointer)
    }

    /// [`DbInner::disk_get`] for a key that owns its bytes and a share of its stream's
    /// SuperVersion (a key of a stream, whose disk stages outlive the call that started
    /// them).
    pub(super) fn disk_get_owned(
        &self,
        key: Vec<u8>,
        sv: StreamPin,
        at: ReadPoint,
        pending: &PendingKey,
    ) -> DiskGet<'_> {
        let mut r = self.read_pinned(Cow::Owned(key), Pinned::Shared(sv), at);
        r.hash = pending.hash;
        r.warm = pending.warm;
        DiskGet::new(r, pending.pointer)
    }

    /// Stages 1 and 2 of one read, in order.
    fn get_inline(&self, r: &mut Read<'_>) -> Inline {
        if let Some(answer) = self.get_from_memtables(r) {
            return Inline::Answer(answer);
        }
        self.lookup_point_cache(r)
    }

    /// Stages 2 (a KP pointer's block) to 6: everything that may read a disk, reading the
    /// blocks one at a time on this thread.
    fn get_from_disk(&self, r: Read<'_>, pointer: Option<BlockPtr>) -> Result<Option<Entry>> {
        self.run_disk_get(DiskGet::new(r, pointer))
    }

    /// Drives a [`DiskGet`] to its answer, reading each block it asks for at once.
    fn run_disk_get(&self, mut g: DiskGet<'_>) -> Result<Option<Entry>> {
        let mut block = None;
        loop {
            match self.advance(&mut g, block.take())? {
                DiskStep::Answer(answer) => return Ok(answer),
                DiskStep::Read(table, h) => {
                    block = Some(table.read_data_block(h, IoCause::UserGet))
                }
            }
        }
    }

    /// Runs a key's disk stages until it is answered or needs a block from disk.
    /// `block`: the result of reading the block the previous call asked for (`None` on
    /// the first call). The stages are [`DbInner::get_from_disk`]'s, in its order: a KP
    /// pointer's block (stale: forget it, go on warm), the fast levels, the promotion
    /// cache, the slow levels, then the work a hit owes (`count_level_hit`,
    /// `after_level_hit`). Whether a stage touched a disk (for its counter) is whether it
    /// was given a block or its synchronous part (table opens) read one.
    pub(super) fn advance(
        &self,
        g: &mut DiskGet<'_>,
        mut block: Option<Result<Block>>,
    ) -> Result<DiskStep> {
        loop {
            let before = thread_read_count();
            match &mut g.stage {
                Stage::Pointer(p) => {
                    let p = *p;
                    let (tier, found) = match (block.take(), g.pointer_table.take()) {
                        (Some(block), Some((table, tier))) => {
                            g.touched = true;
                            (tier, table.search_block(&block?, p.handle, &g.target)?)
                        }
                        (_, waiting) => {
                            let located = match waiting {
                                // Asked for a block and not given it: look again.
                                Some(t) => Some(t),
                                None => self.pointer_table(&g.r, &p, &g.target)?,
                            };
                            let Some((table, tier)) = located else {
                                self.pointer_is_stale(&mut g.r, p);
                                g.go_to_levels();
                                continue;
                            };
                            let found = match table.locate_block(p.handle) {
                                BlockLookup::Absent => None,
                                BlockLookup::Cached(h, b) => {
                                    table.search_block(&b, h, &g.target)?
                                }
                                BlockLookup::Read(h) => {
                                    g.touched |= thread_read_count() != before;
                                    g.pointer_table = Some((table.clone(), tier));
                                    return Ok(DiskStep::Read(table, h));
                                }
                            };
                            g.touched |= thread_read_count() != before;
                            (tier, found)
                        }
                    };
                    match self.pointer_answer(&mut g.r, p, found, tier, g.touched) {
                        Some(answer) => return Ok(DiskStep::Answer(answer)),
                        None => g.go_to_levels(),
                    }
                }
                Stage::Levels { lookup, slow } => {
                    if block.is_some() {
                        g.touched = true;
                    }
                    let step = lookup.step(
                        &g.r.sv.version,
                        &self.tables,
                        &g.target,
                        IoCause::UserGet,
                        block.take(),
                    );
                    g.touched |= thread_read_count() != before;
                    match step? {
                        LevelStep::Read(table, h) => return Ok(DiskStep::Read(table, h)),
                        LevelStep::Done(Some(hit)) => {
                            self.count_level_hit(&hit, g.touched);
                            return Ok(DiskStep::Answer(self.after_level_hit(&g.r, hit)));
                        }
                        LevelStep::Done(None) => {
                            if !*slow && g.r.promoting {
                                if let Some(answer) = self.get_from_promotion_cache(&g.r) {
                                    return Ok(DiskStep::Answer(answer));
                                }
                            }
                            if !*slow && g.r.split < g.r.last {
                                *lookup = LevelLookup::new(g.r.split + 1..=g.r.last)
                                    .offering_records(g.r.latest);
                                *slow = true;
                                continue;
                            }
                            Counters::add(&self.counters.get_not_found, 1);
                            return Ok(DiskStep::Answer(None));
                        }
                    }
                }
            }
        }
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
        let epoch = self.hot.pc.read_epoch();
        let (seq, sv) = self.reads.read_view(ropts.snapshot)?;
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

    /// [`DbInner::start_read`] for the next key of a stream: the same read point and
    /// SuperVersion as `last` (the stream's previous key's) when nothing they consist of
    /// changed since, else fresh ones (and `last` becomes them). Either way the key gets
    /// exactly what `start_read` would give it now: the fence, the epoch, the sequence
    /// number and the SuperVersion are loaded in `start_read`'s order and compared with
    /// `last`'s; only if all are equal is `last` reused (sharing its pin, so a key costs
    /// no reference count on the SuperVersion shared by every thread). The time of the
    /// read is always taken anew.
    pub(super) fn start_streamed_read(
        &self,
        ropts: &ReadOptions,
        last: &mut Option<(ReadPoint, StreamPin)>,
    ) -> Result<(ReadPoint, StreamPin)> {
        if let Some((at, sv)) = last.as_ref() {
            let latest = ropts.snapshot.is_none();
            let fence = self
                .point_cache(latest)
                .map_or(0, |c: &Arc<Cache>| c.fence());
            let epoch = self.hot.pc.read_epoch();
            let seq = ropts.snapshot.unwrap_or_else(|| {
                self.reads
                    .visible_seq
                    .load(std::sync::atomic::Ordering::Acquire)
            });
            if at.latest == latest
                && at.fence == fence
                && at.epoch == epoch
                && at.seq == seq
                && Arc::ptr_eq(&self.reads.sv.load(), sv)
            {
                let at = ReadPoint {
                    now: self.opts.clock.now_ms(),
                    ..*at
                };
                return Ok((at, sv.clone()));
            }
        }
        let (at, sv) = self.start_read(ropts)?;
        let sv = std::rc::Rc::new(Guard::into_inner(sv));
        *last = Some((at, sv.clone()));
        Ok((at, sv))
    }

    /// The point caches a read may use: only a read of the latest state.
    fn point_cache(&self, latest: bool) -> Option<&Arc<Cache>> {
        self.tables.cache().filter(|c| latest && c.point_enabled())
    }

    /// One key's read at a fixed point.
    fn read_at<'a>(&'a self, key: &'a [u8], sv: &'a SuperVersion, at: ReadPoint) -> Read<'a> {
        self.read_pinned(Cow::Borrowed(key), Pinned::Borrowed(sv), at)
    }

    /// [`DbInner::read_at`] for a key and SuperVersion the read may own.
    fn read_pinned<'a>(&'a self, key: Cow<'a, [u8]>, sv: Pinned<'a>, at: ReadPoint) -> Read<'a> {
        let promoting = self.hot.tracker.is_some();
        let last = sv.version.num_levels() - 1;
        let split = if promoting {
            self.layout.last_fast_level.min(last)
        } else {
            last
        };
        let hash = key_hash(&key);
        Read {
            key,
            seq: at.seq,
            sv,
            cache: self.point_cache(at.latest),
            hash,
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
            match mem.get_hashed(r.key(), r.hash, r.seq) {
                MemGet::Found(v, deadline) => {
                    Counters::add(&self.counters.get_memtable, 1);
                    if is_expired(deadline, r.now) {
                        return Some(None);
                    }
                    // A hot key that is also updated often must keep its score, or it
                    // would not be retained when its older versions move down.
                    self.record_access(r.key(), v.len());
                    return Some(Some(Entry { value: v, deadline }));
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

    /// Stage 2: the KV cache's value, or the block a KP pointer names (read by the disk
    /// stages, [`DbInner::advance`], as it may need the disk).
    fn lookup_point_cache(&self, r: &mut Read<'_>) -> Inline {
        let Some(c) = r.cache else {
            return Inline::Levels;
        };
        match c.lookup_point(r.key(), r.hash) {
            PointLookup::Value(v) => {
                Counters::add(&self.counters.get_kv_cache, 1);
                if r.promoting {
                    // Hotness must not fade because the cache answers.
                    self.record_access(r.key(), v.len());
                }
                Inline::Answer(Some(plain(v)))
            }
            // A pointer into the slow tier while the promotion cache holds the record: the
            // same version (the cache never holds one older than the slow tier's newest,
            // and a pointer names the newest outside the memtables), served from memory
            // instead of a slow-disk block. (A store opened from a checkpoint reads the
            // keys it lists once, which leaves both; every later read followed the pointer.)
            PointLookup::Pointer(p) if r.promoting && p.level as usize > r.split => {
                match self.get_from_promotion_cache(r) {
                    Some(answer) => Inline::Answer(answer),
                    None => Inline::Pointer(p),
                }
            }
            PointLookup::Pointer(p) => Inline::Pointer(p),
            PointLookup::Miss { warm } => {
                r.warm = warm;
                Inline::Levels
            }
        }
    }

    /// Stage 2, a KP pointer: the table it names, if that file is still at the pointer's
    /// level in the read's version (`None`: a compaction moved the key). `target`: the
    /// key's seek key at the newest sequence number.
    fn pointer_table(
        &self,
        r: &Read<'_>,
        p: &BlockPtr,
        target: &[u8],
    ) -> Result<Option<(Arc<Table>, Tier)>> {
        let Some(meta) = pointer_file(&r.sv.version, p, target) else {
            return Ok(None);
        };
        Ok(Some((self.tables.get(meta, IoCause::UserGet)?, meta.tier)))
    }

    /// True when the rest of `r`'s read, past the memtables, needs no disk: the point
    /// caches hold the key's value, or the block its KP pointer names is cached in an open
    /// table (a stale pointer then sends the read on to the levels, which may need the
    /// disk), or every table the levels' lookup may look at is open and rules the key out
    /// or has its block cached ([`Version::get_needs_no_read`]). Judged without counting
    /// or touching anything in the caches, so that a read then made elsewhere is the
    /// key's only one as far as AC-Key and the block cache's recency know.
    fn needs_no_read(&self, r: &Read<'_>) -> Result<bool> {
        let target = seek_key(r.key(), r.seq);
        if let Some(c) = r.cache {
            if c.holds_value(r.key(), r.hash) {
                return Ok(true);
            }
            if let Some(p) = c.peek_pointer(r.key(), r.hash) {
                return Ok(pointer_file(&r.sv.version, &p, &target)
                    .and_then(|meta| self.tables.get_if_open(meta))
                    .is_some_and(|table| table.block_needs_no_read(p.handle)));
            }
        }
        r.sv.version
            .get_needs_no_read(&self.tables, &target, 0..=r.last)
    }

    /// A stale KP pointer is forgotten and the read goes on to the levels with the key
    /// warm.
    fn pointer_is_stale(&self, r: &mut Read<'_>, p: BlockPtr) {
        if let Some(c) = r.cache {
            c.forget(r.key(), r.hash, p);
        }
        r.warm = true;
    }

    /// Stage 2, what the pointer's block held (`found`, in a table on `tier`): the newest
    /// version of the key if it is a value, answered and counted (`touched`: a disk was
    /// read for it), upgraded to a KV entry, and recorded or offered for promotion. `None`
    /// (the block no longer holds a value of the key: it was deleted, or its newest
    /// version expires, and such records are not cached): the pointer was stale.
    fn pointer_answer(
        &self,
        r: &mut Read<'_>,
        p: BlockPtr,
        found: Option<(Bytes, Bytes)>,
        tier: Tier,
        touched: bool,
    ) -> Verdict {
        let c = r.cache?;
        let hit = found.and_then(|(ikey, value)| match parse_internal_key(&ikey) {
            Some(k) if k.kind == ValueKind::Value => Some((value, k.seq)),
            _ => None,
        });
        let Some((value, found_seq)) = hit else {
            self.pointer_is_stale(r, p);
            return None;
        };
        let counter = match (touched, tier) {
            (false, _) => &self.counters.get_kp_cache,
            (true, Tier::Fast) => &self.counters.get_fast,
            (true, Tier::Slow) => &self.counters.get_slow,
        };
        Counters::add(counter, 1);
        c.upgrade_to_value(r.key(), r.hash, &value, p, r.fence);
        // By level, not tier, as after a level hit.
        if r.promoting {
            if (p.level as usize) <= self.layout.last_fast_level {
                self.record_access(r.key(), value.len());
            } else {
                self.offer_for_promotion(r.key(), &value, found_seq, None, r.epoch);
            }
        }
        Some(Some(plain(Vec::from(value))))
    }

    /// Stage 4: records read from the slow tier earlier and not yet promoted. A hit enters
    /// the KV cache as a record of the first slow level (its table is there), unless it
    /// expires; an expired one answers "absent" (it is the slow tier's newest version).
    fn get_from_promotion_cache(&self, r: &Read<'_>) -> Verdict {
        let rec = self.hot.pc.get_hashed(r.key(), r.hash, r.seq)?;
        Counters::add(&self.counters.get_promotion_cache, 1);
        if is_expired(rec.deadline, r.now) {
            return Some(None);
        }
        self.record_access(r.key(), rec.value.len());
        if let (Some(c), None) = (r.cache, rec.deadline) {
            c.admit(
                r.key(),
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
            c.admit(
                r.key(),
                r.hash,
                &value,
                hit.level,
                Some(ptr),
                r.warm,
                r.fence,
            );
        }
        // Classified by level, not by the file's tier: a spilled table of a fast level
        // lives on the slow disk but sits above the promotion cache in the read order, and
        // no compaction into the slow tier would ever drain a record cached from it.
        if r.promoting {
            if hit.level <= r.split {
                self.record_access(r.key(), value.len());
            } else if r.latest {
                // Only reads of the latest state may cache: a snapshot read may have
                // returned a version that is no longer the newest.
                self.offer_for_promotion(r.key(), &value, hit.seq, hit.deadline, r.epoch);
            }
        }
        Some(Entry {
            value: Vec::from(value),
            deadline: hit.deadline,
        })
    }
}

/// The disk stages of one key ([`DbInner::advance`]) between block reads.
pub(super) struct DiskGet<'a> {
    r: Read<'a>,
    stage: Stage,
    /// The key's seek key at the read's sequence number (the levels), or at the newest
    /// (a KP pointer's block: the pointer names the newest version).
    target: Vec<u8>,
    /// The table of the pointer's block being read.
    pointer_table: Option<(Arc<Table>, Tier)>,
    /// The current stage read a disk (its counter says so).
    touched: bool,
}

enum Stage {
    /// A KP pointer's block.
    Pointer(BlockPtr),
    /// The fast levels (all of them when nothing is promoted), or the slow ones.
    Levels { lookup: LevelLookup, slow: bool },
}

/// What a [`DbInner::advance`] call ends with.
pub(super) enum DiskStep {
    /// The key's answer: the read is over.
    Answer(Option<Entry>),
    /// The key needs this block from disk; the next call takes its read's result.
    Read(Arc<Table>, BlockHandle),
}

impl<'a> DiskGet<'a> {
    fn new(r: Read<'a>, pointer: Option<BlockPtr>) -> DiskGet<'a> {
        let mut g = DiskGet {
            target: Vec::new(),
            r,
            stage: Stage::Levels {
                lookup: LevelLookup::new(0..=0),
                slow: false,
            },
            pointer_table: None,
            touched: false,
        };
        match pointer {
            Some(p) if g.r.cache.is_some() => {
                g.target = seek_key(g.r.key(), MAX_SEQ);
                g.stage = Stage::Pointer(p);
            }
            _ => g.go_to_levels(),
        }
        g
    }

    /// On to stage 3 (from the start, or after a stale pointer).
    fn go_to_levels(&mut self) {
        self.target = seek_key(self.r.key(), self.r.seq);
        self.stage = Stage::Levels {
            lookup: LevelLookup::new(0..=self.r.split).offering_records(self.r.latest),
            slow: false,
        };
        self.touched = false;
        self.pointer_table = None;
    }
}

#[cfg(test)]
mod tests {
    use crate::{
        db::Db,
        options::{Options, ReadOptions},
    };
    use std::rc::Rc;
    use std::sync::Arc;

    /// A stream's keys share a read point only while it is what `start_read` would give
    /// them (`DbInner::start_streamed_read`): the same sequence number and SuperVersion
    /// while nothing changed; a write moves the sequence number (a key entering after it
    /// must see it: read-your-writes), a flush installs a new SuperVersion, and each
    /// key entering after either gets the new one. A snapshot read keeps its sequence.
    #[test]
    fn a_stream_shares_its_read_point_only_while_nothing_changed() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::default()).unwrap();
        db.put(b"k", b"v1").unwrap();
        let inner = &db.inner;
        let latest = ReadOptions::new();
        let mut last = None;
        let (a1, sv1) = inner.start_streamed_read(&latest, &mut last).unwrap();
        let (a2, sv2) = inner.start_streamed_read(&latest, &mut last).unwrap();
        assert!(Rc::ptr_eq(&sv1, &sv2), "nothing changed: the pin is shared");
        assert_eq!(a1.seq, a2.seq);

        db.put(b"k", b"v2").unwrap();
        let (a3, sv3) = inner.start_streamed_read(&latest, &mut last).unwrap();
        assert_eq!(a3.seq, a1.seq + 1, "a key entering after a write reads it");
        assert!(!Rc::ptr_eq(&sv1, &sv3), "a new read point takes a new pin");
        let (a4, sv4) = inner.start_streamed_read(&latest, &mut last).unwrap();
        assert!(Rc::ptr_eq(&sv3, &sv4) && a4.seq == a3.seq);

        db.flush().unwrap();
        let (a5, sv5) = inner.start_streamed_read(&latest, &mut last).unwrap();
        assert_eq!(a5.seq, a3.seq, "a flush writes nothing new");
        assert!(
            !Arc::ptr_eq(&sv4, &sv5),
            "a key entering after a flush reads the SuperVersion it installed"
        );
        assert!(Arc::ptr_eq(&inner.reads.sv.load(), &sv5));

        let snap = db.snapshot();
        let at_snap = ReadOptions {
            snapshot: Some(snap.seq()),
            ..ReadOptions::new()
        };
        let mut last = None;
        let (s1, _) = inner.start_streamed_read(&at_snap, &mut last).unwrap();
        db.put(b"k", b"v3").unwrap();
        let (s2, _) = inner.start_streamed_read(&at_snap, &mut last).unwrap();
        assert_eq!((s1.seq, s2.seq), (snap.seq(), snap.seq()));
        assert!(!s1.latest && !s2.latest);
    }
}

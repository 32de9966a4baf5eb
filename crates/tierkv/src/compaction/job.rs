//! Running a compaction: merge the inputs newest-first, drop versions no snapshot can see
//! and tombstones that hide nothing, and write the survivors into new tables of the output
//! level, split at the target file size (never inside one user key's versions, so deeper
//! levels stay disjoint by user key).

use super::Compaction;
use crate::env::{Env, IoCause, Tier};
use crate::hot::promotion::PcRecord;
use crate::hot::ralt::Ralt;
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::{make_internal_key, parse_internal_key, SeqNo, ValueKind, MAX_SEQ};
use crate::sst::{TableBuilder, TableOptions};
use crate::version::{table_file_name, LevelIterator, NewFile, TableCache, Version, VersionEdit};
use crate::{Error, Result};
use std::sync::Arc;

/// What a finished job produced.
#[derive(Debug, Default)]
pub struct JobOutput {
    /// The edit to install: inputs deleted, outputs added.
    pub edit: VersionEdit,
    /// Bytes of input tables.
    pub bytes_read: u64,
    /// Bytes of output tables.
    pub bytes_written: u64,
    /// Entries dropped (shadowed versions and obsolete tombstones).
    pub entries_dropped: u64,
    /// Key and value bytes kept on the last fast level by retention.
    pub retained_bytes: u64,
    /// Key and value bytes of promotion-cache records written to the last fast level.
    pub promoted_bytes: u64,
}

/// HotRAP's part in a compaction from the last fast level into the slow tier.
pub struct HotRouting<'a> {
    /// The hotness tracker.
    pub ralt: &'a Ralt,
    /// Keep hot input records on the fast tier.
    pub retention: bool,
    /// Ask RALT before promoting cache records (off: promote them all).
    pub hotness_check: bool,
    /// Promotion-cache records taken for this compaction, sorted by key.
    pub promote: Vec<(bytes::Bytes, PcRecord)>,
    /// User-key range of the fast-tier inputs: only keys inside it may stay on that level
    /// (the level's other files lie outside it).
    pub lo: Vec<u8>,
    /// Upper end of that range (inclusive).
    pub hi: Vec<u8>,
}

/// Everything a job needs besides the compaction itself.
pub struct JobContext<'a> {
    /// The environment.
    pub env: &'a Arc<Env>,
    /// Open tables.
    pub tables: &'a Arc<TableCache>,
    /// Table format options.
    pub table_options: TableOptions,
    /// Split outputs at this size.
    pub target_file_size: u64,
    /// The oldest sequence number any live snapshot (or the latest state) reads at.
    pub smallest_snapshot: SeqNo,
    /// The version the compaction was picked from (to know what lies deeper).
    pub version: &'a Version,
    /// Allocates a file number.
    pub new_file_number: &'a (dyn Fn() -> u64 + Sync),
    /// Retention and promotion, for compactions from the last fast level into the slow tier.
    pub hot: Option<HotRouting<'a>>,
    /// The fast disk is full: write every output to the slow tier (a fast level's files may
    /// live there; the fast-tier budget is a soft limit).
    pub spill_to_slow: bool,
}

/// Merges the inputs of `c` into new files. On error, files written so far are deleted.
pub fn run(c: &Compaction, ctx: &JobContext<'_>) -> Result<JobOutput> {
    let mut out = JobOutput::default();
    for f in c.all_inputs() {
        out.edit.deleted.push((
            if c.inputs.iter().any(|i| i.number == f.number) {
                c.level
            } else {
                c.output_level
            },
            f.number,
        ));
    }
    out.bytes_read = c.input_bytes();
    if c.is_trivial_move() {
        let f = &c.inputs[0];
        out.edit.added.push(NewFile {
            level: c.output_level,
            ..f.info.clone()
        });
        out.bytes_read = 0;
        return Ok(out);
    }
    let place = |tier: Tier| if ctx.spill_to_slow { Tier::Slow } else { tier };
    let mut down = Sink::new(c.output_level, place(c.output_tier));
    let mut fast = Sink::new(c.level, place(Tier::Fast));
    if let Err(e) = merge(c, ctx, &mut down, &mut fast, &mut out) {
        for sink in [&down, &fast] {
            for &number in &sink.created {
                let _ = ctx.env.remove(sink.tier, &table_file_name(number));
            }
        }
        return Err(e);
    }
    let written: Vec<NewFile> = down.done.into_iter().chain(fast.done).collect();
    out.bytes_written = written.iter().map(|f| f.size).sum();
    out.edit.added = written;
    Ok(out)
}

fn input_iterator(c: &Compaction, ctx: &JobContext<'_>) -> Result<MergingIterator> {
    let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
    if c.level == 0 {
        // L0 files overlap: one iterator each, newest first (they are stored that way).
        for f in &c.inputs {
            let t = ctx.tables.get(f, IoCause::Compaction)?;
            children.push(Box::new(t.iter(IoCause::Compaction, false)));
        }
    } else {
        children.push(Box::new(LevelIterator::new(
            c.inputs.clone(),
            ctx.tables.clone(),
            IoCause::Compaction,
            false,
        )));
    }
    children.push(Box::new(LevelIterator::new(
        c.output_inputs.clone(),
        ctx.tables.clone(),
        IoCause::Compaction,
        false,
    )));
    Ok(MergingIterator::new(children))
}

struct Output {
    builder: TableBuilder,
    number: u64,
}

/// Where one output stream goes: the compaction's output level, or (for retention and
/// promotion by compaction) back to the last fast level.
struct Sink {
    level: usize,
    tier: Tier,
    current: Option<Output>,
    /// Every file number created (finished or not), to delete them all on failure.
    created: Vec<u64>,
    done: Vec<NewFile>,
    bytes_in: u64,
}

impl Sink {
    fn new(level: usize, tier: Tier) -> Self {
        Sink {
            level,
            tier,
            current: None,
            created: Vec::new(),
            done: Vec::new(),
            bytes_in: 0,
        }
    }

    fn add(&mut self, ctx: &JobContext<'_>, ikey: &[u8], value: &[u8]) -> Result<()> {
        if self.current.is_none() {
            let number = (ctx.new_file_number)();
            self.created.push(number);
            let file = ctx.env.create_writable(
                self.tier,
                &table_file_name(number),
                IoCause::Compaction,
            )?;
            self.current = Some(Output {
                builder: TableBuilder::new(file, ctx.table_options),
                number,
            });
        }
        self.bytes_in += (ikey.len() - crate::key::TRAILER_LEN + value.len()) as u64;
        self.current
            .as_mut()
            .expect("created above")
            .builder
            .add(ikey, value)
    }

    /// Finishes the current file if it reached the target size (call between user keys).
    fn maybe_cut(&mut self, ctx: &JobContext<'_>) -> Result<()> {
        if self
            .current
            .as_ref()
            .is_some_and(|o| o.builder.estimated_size() >= ctx.target_file_size)
        {
            self.finish()?;
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        let Some(o) = self.current.take() else {
            return Ok(());
        };
        let info = o.builder.finish()?;
        self.done
            .push(new_file_from(self.level, o.number, self.tier, info));
        Ok(())
    }
}

/// Decides, key by key, what a compaction from the last fast level into the slow tier keeps
/// on the fast tier (HotRAP §3.5): hot keys of the inputs (retention, RALT's hot-key
/// iterator merged with the compaction's), and hot promotion-cache records the inputs do
/// not hold (promotion by compaction).
/// RALT's hot keys of a range, in order, with their value lengths.
type HotKeys = Box<dyn Iterator<Item = Result<(Vec<u8>, u32)>> + Send>;

struct HotRouter<'a> {
    hot: &'a HotRouting<'a>,
    hot_keys: std::iter::Peekable<HotKeys>,
    pending: std::collections::VecDeque<(bytes::Bytes, PcRecord)>,
}

impl<'a> HotRouter<'a> {
    fn new(hot: &'a HotRouting<'a>) -> Result<Self> {
        let hot_keys = if hot.retention {
            hot.ralt.hot_keys(&hot.lo, &hot.hi)?
        } else {
            Box::new(std::iter::empty()) as HotKeys
        };
        Ok(HotRouter {
            hot,
            hot_keys: hot_keys.peekable(),
            pending: hot.promote.iter().cloned().collect(),
        })
    }

    /// True if `ukey` (the next user key of the merge, in order) stays on the fast tier.
    fn retain(&mut self, ukey: &[u8]) -> Result<bool> {
        if ukey < self.hot.lo.as_slice() || ukey > self.hot.hi.as_slice() {
            return Ok(false);
        }
        loop {
            match self.hot_keys.peek() {
                None => return Ok(false),
                Some(Err(_)) => {
                    return Err(self.hot_keys.next().expect("peeked").expect_err("peeked"))
                }
                Some(Ok((k, _))) if k.as_slice() < ukey => {
                    self.hot_keys.next();
                }
                Some(Ok((k, _))) => return Ok(k.as_slice() == ukey),
            }
        }
    }

    /// Promotion-cache records before `ukey` (all of them when `None`) that are hot; a
    /// record for `ukey` itself is dropped: the merge holds that version or a newer one.
    fn promotable_before(&mut self, ukey: Option<&[u8]>) -> Result<Vec<(bytes::Bytes, PcRecord)>> {
        let mut out = Vec::new();
        while let Some((k, _)) = self.pending.front() {
            match ukey {
                Some(u) if k.as_ref() > u => break,
                Some(u) if k.as_ref() == u => {
                    self.pending.pop_front();
                    break;
                }
                _ => {}
            }
            let (k, r) = self.pending.pop_front().expect("peeked");
            let ralt = self.hot.ralt;
            crate::db::record_cached_read(ralt, &k, &r)?;
            if !self.hot.hotness_check || ralt.is_hot(&k) {
                out.push((k, r));
            }
        }
        Ok(out)
    }
}

fn merge(
    c: &Compaction,
    ctx: &JobContext<'_>,
    down: &mut Sink,
    fast: &mut Sink,
    out: &mut JobOutput,
) -> Result<()> {
    let mut iter = input_iterator(c, ctx)?;
    iter.seek_to_first()?;
    let mut router = ctx.hot.as_ref().map(HotRouter::new).transpose()?;
    let mut promoted = 0u64;
    let mut last_user_key: Vec<u8> = Vec::new();
    let mut has_last = false;
    let mut last_seq_for_key = MAX_SEQ;
    let mut keep_on_fast = false;
    while iter.valid() {
        let ikey = iter.key();
        let parsed = parse_internal_key(ikey).ok_or_else(|| {
            Error::corruption(
                ctx.env.dir(c.output_tier),
                0,
                "compaction input holds a malformed internal key",
            )
        })?;
        let new_user_key = !has_last || parsed.user_key != last_user_key.as_slice();
        if new_user_key {
            // Cut outputs only between user keys.
            down.maybe_cut(ctx)?;
            fast.maybe_cut(ctx)?;
            if let Some(r) = router.as_mut() {
                for (k, rec) in r.promotable_before(Some(parsed.user_key))? {
                    fast.add(
                        ctx,
                        &make_internal_key(&k, rec.seq, ValueKind::Value),
                        &rec.value,
                    )?;
                    promoted += (k.len() + rec.value.len()) as u64;
                }
                keep_on_fast = r.retain(parsed.user_key)?;
            }
            last_user_key.clear();
            last_user_key.extend_from_slice(parsed.user_key);
            has_last = true;
            last_seq_for_key = MAX_SEQ;
        }
        // A newer version of this key is visible to every snapshot: this one is hidden.
        let shadowed = last_seq_for_key <= ctx.smallest_snapshot;
        // Promotion copies records with their sequence numbers, so the same version can
        // reach one merge twice (from the promoted file and from the slow tier).
        let duplicate = !new_user_key && parsed.seq == last_seq_for_key;
        // A tombstone every snapshot sees, with nothing deeper to hide, can go.
        let dead_tombstone = parsed.kind == ValueKind::Delete
            && parsed.seq <= ctx.smallest_snapshot
            && ctx
                .version
                .is_base_level_for_key(c.output_level, parsed.user_key);
        last_seq_for_key = parsed.seq;
        if shadowed || dead_tombstone || duplicate {
            out.entries_dropped += 1;
        } else if keep_on_fast {
            fast.add(ctx, ikey, iter.value())?;
        } else {
            down.add(ctx, ikey, iter.value())?;
        }
        iter.next()?;
    }
    if let Some(r) = router.as_mut() {
        for (k, rec) in r.promotable_before(None)? {
            fast.add(
                ctx,
                &make_internal_key(&k, rec.seq, ValueKind::Value),
                &rec.value,
            )?;
            promoted += (k.len() + rec.value.len()) as u64;
        }
    }
    down.finish()?;
    fast.finish()?;
    out.promoted_bytes = promoted;
    out.retained_bytes = fast.bytes_in - promoted;
    Ok(())
}

/// The manifest record of a finished table.
pub fn new_file_from(
    level: usize,
    number: u64,
    tier: crate::env::Tier,
    info: crate::sst::TableInfo,
) -> NewFile {
    NewFile {
        level,
        number,
        tier,
        size: info.file_size,
        smallest: info.smallest.encoded().to_vec(),
        largest: info.largest.encoded().to_vec(),
        smallest_seq: info.props.smallest_seq,
        largest_seq: info.props.largest_seq,
        num_entries: info.props.num_entries,
        num_deletions: info.props.num_deletions,
    }
}

//! **Block reuse** (HyperDB's clean blocks, within the unchanged table format): the merge
//! walks its inputs block by block, and when a data block is reached whose whole key range
//! holds no key of any other input, whose entries are each the only version of their user
//! key, none of them a tombstone the merge would drop, and none routed to the fast tier by
//! retention or interleaved with a promoted record, the block is appended to the output as
//! it is stored (compressed bytes and trailer) instead of being decoded and re-encoded.
//! A block holding an expired record is never copied: the record must become a tombstone
//! or go (`super::stream`).
//! Everything else goes entry by entry exactly as without reuse, through the same
//! decisions (`super::merger::Merger`). A block holding more than twice the output's
//! `block_records` entries, or larger than its read limit (`crate::sst::block_read_limit`),
//! is re-encoded too (it was cut for a larger read unit).

use super::context::JobContext;
use super::merger::Merger;
use super::Compaction;
use crate::env::IoCause;
use crate::error::{Error, Result};
use crate::key::{compare_internal, parse_internal_key, user_key, SeqNo, MAX_SEQ};
use crate::sst::block::BlockIter;
use crate::sst::{block_read_limit, DataBlocks, RawBlock};
use crate::version::{FileMeta, TableCache};
use std::collections::VecDeque;
use std::sync::Arc;

impl Merger<'_, '_> {
    /// Copies `raw` (a block whose first entry is the merge's next entry) to the output
    /// level as stored, if nothing in it would be handled differently entry by entry:
    /// - every key of the merge's other inputs is above its last user key
    ///   (`next_other`: the smallest user key any other input has left), and everything
    ///   already merged is below its first, so no other version of its keys is anywhere
    ///   in the merge;
    /// - its entries have distinct user keys (no version shadows another) and none is a
    ///   tombstone the merge would drop;
    /// - routing sends every key down: none retained, no promoted record inside its range.
    ///
    /// Returns false (and changes nothing the entry path depends on) otherwise.
    pub(super) fn try_reuse(&mut self, raw: &RawBlock, next_other: Option<&[u8]>) -> Result<bool> {
        // With preemptive pushdown each key is routed on its own (a block copied whole
        // would land on one level and could not be cut at that level's gaps).
        if self.push.is_some() {
            return Ok(false);
        }
        // The neighbour checks first: they need only the block's index key and the
        // cursor's position, and they are what most blocks of a dense merge fail.
        let last = user_key(raw.last_key());
        if next_other.is_some_and(|o| o <= last) {
            return Ok(false);
        }
        let mut it = raw.block().iter();
        if it.seek_to_first().is_err() || !it.valid() {
            // The entry path reports the damage with its file and offset.
            return Ok(false);
        }
        let mut keys = std::mem::take(&mut self.block_keys);
        keys.clear();
        let mut bytes_in = 0u64;
        let mut last_seq = MAX_SEQ;
        let mut ok = true;
        let mut last_ikey_matches = false;
        while it.valid() {
            let Some(k) = parse_internal_key(it.key()) else {
                ok = false;
                break;
            };
            if keys.last().is_some_and(|p| p.as_slice() >= k.user_key)
                || self.dead_tombstone(&k)
                || self.versions.is_expired(k.kind, it.value())
            {
                ok = false;
                break;
            }
            bytes_in += (k.user_key.len() + it.value().len()) as u64;
            last_seq = k.seq;
            last_ikey_matches = it.key() == raw.last_key();
            keys.push(k.user_key.to_vec());
            if it.next().is_err() {
                ok = false;
                break;
            }
        }
        // (Its index key must be its last key; a table where it is not is left to the
        // entry path.)
        ok &= last_ikey_matches;
        // A block cut for a larger read unit (written before `block_records` or the read
        // limit, or under a larger setting) is re-encoded, so the output's point reads move
        // what it asks for.
        let opts = &self.ctx.table_options;
        ok &= opts
            .block_records
            .is_none_or(|n| keys.len() <= 2 * n.max(1))
            && raw.stored_len() as usize <= block_read_limit(opts.block_size);
        let reused = ok && self.reuse_checked(raw, &keys, next_other, bytes_in, last_seq)?;
        self.block_keys = keys;
        Ok(reused)
    }

    pub(super) fn reuse_checked(
        &mut self,
        raw: &RawBlock,
        keys: &[Vec<u8>],
        next_other: Option<&[u8]>,
        bytes_in: u64,
        last_seq: SeqNo,
    ) -> Result<bool> {
        let (Some(first), Some(last)) = (keys.first(), keys.last()) else {
            return Ok(false);
        };
        if user_key(raw.last_key()) != last.as_slice() {
            return Ok(false);
        }
        if self
            .versions
            .last_user_key()
            .is_some_and(|l| l >= first.as_slice())
        {
            return Ok(false);
        }
        if next_other.is_some_and(|o| o <= last.as_slice()) {
            return Ok(false);
        }
        // A new user key starts here whatever happens next.
        self.start_user_key(first)?;
        if let Some(r) = self.router.as_mut() {
            if r.touches(first, last, keys)? {
                return Ok(false);
            }
        }
        self.down.add_block(self.ctx, raw, bytes_in)?;
        self.versions.skipped_to(last, last_seq);
        self.keep_on_fast = false;
        Ok(true)
    }
}

/// One sorted input of a block-aware merge (an L0 file, or a level's files in key order),
/// read block by block.
struct BlockSource {
    files: VecDeque<Arc<FileMeta>>,
    blocks: Option<DataBlocks>,
    /// The current block and the cursor in it.
    current: Option<(RawBlock, BlockIter)>,
    /// The cursor is on the block's first entry.
    at_block_start: bool,
    /// The last key this source handed out (or the last key of a block copied whole).
    prev: Option<Vec<u8>>,
}

impl BlockSource {
    fn new(files: Vec<Arc<FileMeta>>) -> BlockSource {
        BlockSource {
            files: files.into(),
            blocks: None,
            current: None,
            at_block_start: false,
            prev: None,
        }
    }

    fn corrupt(&self, offset: u64, reason: &str) -> Error {
        match &self.blocks {
            Some(b) => b.corrupt(offset, reason),
            None => Error::corruption("<compaction input>", offset, reason),
        }
    }

    /// A checksum-valid table can still hold entries out of order (a forged or miswritten
    /// file): that is corruption of that table, never keys handed to the merge out of order.
    fn check_order(&mut self) -> Result<()> {
        let Some((raw, it)) = self.current.as_ref() else {
            return Ok(());
        };
        if self
            .prev
            .as_deref()
            .is_some_and(|p| compare_internal(p, it.key()).is_ge())
        {
            return Err(self.corrupt(raw.offset(), "keys out of order"));
        }
        let prev = self.prev.get_or_insert_with(Vec::new);
        prev.clear();
        prev.extend_from_slice(it.key());
        Ok(())
    }

    /// Moves past the current block, which was copied whole.
    fn skip_block(&mut self, tables: &TableCache) -> Result<()> {
        if let Some((raw, _)) = self.current.as_ref() {
            self.prev = Some(raw.last_key().to_vec());
        }
        self.next_block(tables)
    }

    /// Moves to the first entry of the next non-empty block (of this or a later file).
    fn next_block(&mut self, tables: &TableCache) -> Result<()> {
        self.current = None;
        loop {
            let Some(blocks) = self.blocks.as_mut() else {
                let Some(f) = self.files.pop_front() else {
                    return Ok(());
                };
                let t = tables.get(&f, IoCause::Compaction)?;
                self.blocks = Some(t.data_blocks(IoCause::Compaction));
                continue;
            };
            let Some(raw) = blocks.next_block()? else {
                self.blocks = None;
                continue;
            };
            let mut it = raw.block().iter();
            it.seek_to_first()
                .map_err(|e| blocks.corrupt(raw.offset(), e))?;
            if it.valid() {
                self.current = Some((raw, it));
                self.at_block_start = true;
                return self.check_order();
            }
        }
    }

    fn key(&self) -> Option<&[u8]> {
        self.current.as_ref().map(|(_, it)| it.key())
    }

    fn advance(&mut self, tables: &TableCache) -> Result<()> {
        let Some((raw, it)) = self.current.as_mut() else {
            return Ok(());
        };
        self.at_block_start = false;
        if let Err(e) = it.next() {
            let offset = raw.offset();
            return Err(self.corrupt(offset, e));
        }
        if it.valid() {
            self.check_order()
        } else {
            self.next_block(tables)
        }
    }
}

/// The block-aware merge (block reuse on): picks the input with the smallest next entry;
/// at the start of one of its blocks, tries to copy the whole block.
pub(super) fn merge_blocks(
    c: &Compaction,
    ctx: &JobContext<'_>,
    mut m: Merger<'_, '_>,
) -> Result<()> {
    let mut sources: Vec<BlockSource> = Vec::new();
    if c.level == 0 {
        // L0 files overlap: one source each, newest first (they are stored that way).
        for f in &c.inputs {
            sources.push(BlockSource::new(vec![f.clone()]));
        }
    } else {
        sources.push(BlockSource::new(c.inputs.clone()));
    }
    sources.push(BlockSource::new(c.output_inputs.clone()));
    for s in &mut sources {
        s.next_block(ctx.tables)?;
    }
    loop {
        // The smallest next entry and the runner-up (whose user key is the smallest any
        // other input has left). Ties go to the earlier (newer) source.
        let mut best: Option<usize> = None;
        let mut second: Option<usize> = None;
        for (i, s) in sources.iter().enumerate() {
            let Some(k) = s.key() else { continue };
            let smaller = |j: Option<usize>| {
                j.and_then(|j| sources[j].key())
                    .is_none_or(|kj| compare_internal(k, kj).is_lt())
            };
            if smaller(best) {
                second = best;
                best = Some(i);
            } else if smaller(second) {
                second = Some(i);
            }
        }
        let Some(i) = best else { break };
        if sources[i].at_block_start {
            let next_other = second.and_then(|j| sources[j].key()).map(user_key);
            if let Some((raw, _)) = sources[i].current.as_ref() {
                if m.try_reuse(raw, next_other)? {
                    sources[i].skip_block(ctx.tables)?;
                    continue;
                }
            }
        }
        if let Some((_, it)) = sources[i].current.as_ref() {
            m.add_entry(it.key(), it.value())?;
        }
        sources[i].advance(ctx.tables)?;
    }
    m.finish()
}

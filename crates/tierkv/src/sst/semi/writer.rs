//! Writing one generation of a semi-sorted table: new data blocks (sorted inside, cut
//! between user keys and around the clean blocks carried over, so that valid blocks'
//! ranges never overlap), then the key list, the block index, the filter over every valid
//! user key, the properties, the lookup index and the (version-2) footer; synced before
//! `finish` returns. A first generation starts an empty file; a later one continues a file
//! holding the previous generation's bytes (`super` explains how the file gets there).
//! Owns the write side only.

use super::layout::{encode_index, lookup_index, BlockStats, SemiBlock, SemiFooter, SEMI_VERSION};
use crate::env::WritableFile;
use crate::error::{Error, Result};
use crate::key::{compare_internal, parse_internal_key, user_key, InternalKey, ValueKind};
use crate::sst::block::BlockBuilder;
use crate::sst::filter::BloomBuilder;
use crate::sst::format::{append_block, BlockHandle, BLOCK_TRAILER_LEN};
use crate::sst::{BlockWrites, TableInfo, TableOptions, TableProperties};
use crate::sst::{INDEX_RESTART_INTERVAL, MIN_RECORD_BLOCK};

/// What a generation continues from: the previous generation's blocks (valid and dirty),
/// its valid user keys, and its properties (for the sequence and deadline bounds).
#[derive(Clone, Debug, Default)]
pub struct PriorGeneration {
    /// Every block of the previous generation's index, valid ones first in key order.
    pub blocks: Vec<SemiBlock>,
    /// The valid user keys, in order.
    pub keys: Vec<Vec<u8>>,
    /// The previous generation's properties.
    pub props: TableProperties,
}

impl PriorGeneration {
    /// Bytes of valid blocks.
    pub fn valid_bytes(&self) -> u64 {
        self.blocks
            .iter()
            .filter(|b| b.valid)
            .map(|b| b.stored_len())
            .sum()
    }

    /// Bytes of dirty blocks.
    pub fn dirty_bytes(&self) -> u64 {
        self.blocks
            .iter()
            .filter(|b| !b.valid)
            .map(|b| b.stored_len())
            .sum()
    }
}

/// Writes one generation of a semi-sorted table.
pub struct GenerationWriter {
    file: WritableFile,
    opts: TableOptions,
    offset: u64,
    /// The previous generation's valid blocks, in key order, and whether this merge
    /// dirtied each (the rest are carried over as they are). Marks may arrive while
    /// entries are added ([`GenerationWriter::mark_dirty`]), always before the keys reach
    /// the block.
    prior_valid: Vec<SemiBlock>,
    dirtied: Vec<bool>,
    /// The previous generation's valid user keys, in order.
    prior_keys: Vec<Vec<u8>>,
    prior_props: TableProperties,
    /// Blocks that were garbage already.
    dead: Vec<SemiBlock>,
    /// Blocks written by this generation, in key order, and their user keys.
    built: Vec<SemiBlock>,
    built_keys: Vec<Vec<u8>>,
    /// The first previous valid block not yet passed by the keys added.
    next_kept: usize,
    data: BlockBuilder,
    block_first: Vec<u8>,
    block_stats: BlockStats,
    last_key: Vec<u8>,
    cut_wanted: bool,
    /// Sequence and deadline bounds of the new entries (at the end, those of the previous
    /// generation join them if any block is kept: bounds cannot be subtracted, they stay
    /// conservative).
    bounds: TableProperties,
    writes: BlockWrites,
}

impl GenerationWriter {
    /// The first generation of a new table, written into the empty `file`.
    pub fn new(file: WritableFile, opts: TableOptions) -> Self {
        Self::continuing(file, opts, 0, PriorGeneration::default(), &[])
    }

    /// A generation appended at `base` (the previous generation's size; `file` holds
    /// exactly those bytes) to `prior`, whose valid blocks at positions `dirty` (indexes
    /// into `prior.blocks`) become garbage: the merge rewrites their entries. More blocks
    /// can be marked dirty later with [`GenerationWriter::mark_dirty`].
    pub fn continuing(
        file: WritableFile,
        opts: TableOptions,
        base: u64,
        prior: PriorGeneration,
        dirty: &[usize],
    ) -> Self {
        let mut prior_valid = Vec::new();
        let mut dead = Vec::new();
        for b in prior.blocks {
            if b.valid {
                prior_valid.push(b);
            } else {
                dead.push(b);
            }
        }
        let mut w = GenerationWriter {
            file,
            opts,
            offset: base,
            dirtied: vec![false; prior_valid.len()],
            prior_valid,
            prior_keys: prior.keys,
            prior_props: prior.props,
            dead,
            built: Vec::new(),
            built_keys: Vec::new(),
            next_kept: 0,
            data: BlockBuilder::new(opts.restart_interval),
            block_first: Vec::new(),
            block_stats: BlockStats::default(),
            last_key: Vec::new(),
            cut_wanted: false,
            bounds: TableProperties {
                smallest_seq: u64::MAX,
                ..Default::default()
            },
            writes: BlockWrites::default(),
        };
        // Valid blocks lead the index, so an index into `prior.blocks` below the valid
        // count is the same index into `prior_valid`; anything else names no valid block.
        for &i in dirty {
            if let Some(d) = w.dirtied.get_mut(i) {
                *d = true;
            }
        }
        w
    }

    /// Marks the previous generation's valid block `i` (an index into the prior
    /// generation's blocks; valid ones come first) dirty: the merge rewrites its entries.
    /// Must come before any key at or past the block's first is added.
    pub fn mark_dirty(&mut self, i: usize) -> Result<()> {
        if i >= self.dirtied.len() {
            return Err(self.invalid("marking a block that is not valid"));
        }
        let passed = i < self.next_kept
            || (!self.last_key.is_empty()
                && user_key(&self.last_key) >= self.prior_valid[i].first_user_key());
        if passed && !self.dirtied[i] {
            return Err(self.invalid("a block marked dirty after keys reached it"));
        }
        self.dirtied[i] = true;
        Ok(())
    }

    /// The clean blocks carried over, in key order, and their user keys (the marks are
    /// final by now).
    fn split_prior(&mut self) -> (Vec<SemiBlock>, Vec<Vec<u8>>) {
        let mut kept = Vec::new();
        let mut kept_keys = Vec::new();
        let mut keys = std::mem::take(&mut self.prior_keys).into_iter().peekable();
        let dirtied = std::mem::take(&mut self.dirtied);
        for (mut b, dirty) in std::mem::take(&mut self.prior_valid)
            .into_iter()
            .zip(dirtied)
        {
            // The key list is in key order and valid blocks' ranges are disjoint: this
            // block's keys are the next run of it.
            while keys
                .next_if(|k| k.as_slice() < b.first_user_key())
                .is_some()
            {}
            let mine = std::iter::from_fn(|| keys.next_if(|k| b.covers(k)));
            if dirty {
                mine.for_each(drop);
                b.valid = false;
                self.dead.push(b);
            } else {
                kept_keys.extend(mine);
                kept.push(b);
            }
        }
        if !kept.is_empty() {
            let (b, p) = (&mut self.bounds, &self.prior_props);
            b.smallest_seq = b.smallest_seq.min(p.smallest_seq);
            b.largest_seq = b.largest_seq.max(p.largest_seq);
            if p.num_expiring > 0 {
                if b.num_expiring == 0 {
                    (b.min_deadline, b.max_deadline) = (p.min_deadline, p.max_deadline);
                } else {
                    b.min_deadline = b.min_deadline.min(p.min_deadline);
                    b.max_deadline = b.max_deadline.max(p.max_deadline);
                }
                b.num_expiring = 1;
            }
        }
        (kept, kept_keys)
    }

    fn invalid(&self, what: &str) -> Error {
        Error::InvalidArgument(format!(
            "semi-sorted table writer for {}: {what}",
            self.file.path().display()
        ))
    }

    /// Appends an entry. Internal keys arrive in increasing order, and no user key lies
    /// inside a clean block's range (the merge marked such blocks dirty).
    pub fn add(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let parsed = parse_internal_key(key).ok_or_else(|| self.invalid("malformed key"))?;
        let started = !self.last_key.is_empty();
        if started && compare_internal(&self.last_key, key).is_ge() {
            return Err(self.invalid("keys out of order"));
        }
        let ukey = parsed.user_key;
        let new_user_key = !started || user_key(&self.last_key) != ukey;
        // Clean blocks the keys pass lie between the block in progress and this key: the
        // block closes so that no two valid blocks' ranges overlap.
        while let Some(k) = self.prior_valid.get(self.next_kept) {
            if k.last_user_key() >= ukey {
                break;
            }
            self.cut_wanted |= !self.dirtied[self.next_kept];
            self.next_kept += 1;
        }
        if self
            .prior_valid
            .get(self.next_kept)
            .is_some_and(|k| k.covers(ukey) && !self.dirtied[self.next_kept])
        {
            return Err(self.invalid("a key falls inside a clean block"));
        }
        if self.cut_wanted && new_user_key {
            self.flush_block()?;
        }
        if self.data.is_empty() {
            self.block_first = key.to_vec();
        }
        self.account(parsed.kind, parsed.seq, key, value)?;
        if new_user_key {
            self.built_keys.push(ukey.to_vec());
        }
        self.data.add(key, value);
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        let size = self.data.estimated_size();
        self.cut_wanted |= size >= self.opts.block_size
            || self
                .opts
                .block_records
                .is_some_and(|n| self.data.entries() >= n && size >= MIN_RECORD_BLOCK);
        Ok(())
    }

    fn account(&mut self, kind: ValueKind, seq: u64, key: &[u8], value: &[u8]) -> Result<()> {
        let s = &mut self.block_stats;
        s.entries += 1;
        s.key_bytes += key.len() as u64;
        s.value_bytes += value.len() as u64;
        let b = &mut self.bounds;
        b.smallest_seq = b.smallest_seq.min(seq);
        b.largest_seq = b.largest_seq.max(seq);
        match kind {
            ValueKind::Delete => s.deletions += 1,
            ValueKind::Expiring => {
                s.expiring += 1;
                let (_, d) = crate::expiry::split_stored(kind, value)
                    .ok_or_else(|| self.invalid("expiring value shorter than its deadline"))?;
                let d = d.unwrap_or(0);
                let b = &mut self.bounds;
                if b.num_expiring == 0 {
                    (b.min_deadline, b.max_deadline) = (d, d);
                } else {
                    b.min_deadline = b.min_deadline.min(d);
                    b.max_deadline = b.max_deadline.max(d);
                }
                b.num_expiring = 1;
            }
            ValueKind::Value => {}
        }
        Ok(())
    }

    fn write_block(&mut self, raw: &[u8]) -> Result<BlockHandle> {
        append_block(&mut self.file, &mut self.offset, raw, self.opts.compression)
    }

    fn flush_block(&mut self) -> Result<()> {
        self.cut_wanted = false;
        if self.data.is_empty() {
            return Ok(());
        }
        let raw = self.data.finish();
        let handle = self.write_block(&raw)?;
        self.writes.built_blocks += 1;
        self.writes.built_bytes += handle.size + BLOCK_TRAILER_LEN as u64;
        self.built.push(SemiBlock {
            handle,
            valid: true,
            first: std::mem::take(&mut self.block_first),
            last: self.last_key.clone(),
            stats: std::mem::take(&mut self.block_stats),
        });
        Ok(())
    }

    /// True if the generation would hold no valid block (nothing kept, nothing added).
    pub fn is_empty(&self) -> bool {
        self.dirtied.iter().all(|&d| d) && self.built.is_empty() && self.data.is_empty()
    }

    /// Bytes written by this generation so far (approximately): where to cut a table
    /// written whole.
    pub fn estimated_size(&self) -> u64 {
        self.offset + self.data.estimated_size() as u64
    }

    /// Writes the filter, properties, key list, index and footer, and syncs. Fails on a
    /// generation without a valid block (the caller drops such a table instead).
    pub fn finish(mut self) -> Result<TableInfo> {
        self.flush_block()?;
        // Everything before this generation's metadata that no valid block holds is
        // garbage: dirty blocks and earlier generations' metadata.
        let data_end = self.offset;
        let (kept, kept_keys) = self.split_prior();
        let built = std::mem::take(&mut self.built);
        let valid = merge_by_key(kept, built, |b: &SemiBlock| b.first_user_key().to_vec());
        let keys = merge_by_key(
            kept_keys,
            std::mem::take(&mut self.built_keys),
            |k: &Vec<u8>| k.clone(),
        );
        let (Some(first), Some(last)) = (valid.first(), valid.last()) else {
            return Err(self.invalid("refusing to write a generation without valid blocks"));
        };
        let (smallest, largest) = (first.first.clone(), last.last.clone());
        // The key list and the block index first: opening a table reads the metadata after
        // them in one read and never needs them (merges and verification read them).
        let mut kb = BlockBuilder::new(INDEX_RESTART_INTERVAL);
        keys.iter().for_each(|k| kb.add(k, b""));
        let key_list = self.write_block(&kb.finish())?;
        let garbage_bytes = data_end.saturating_sub(valid.iter().map(|b| b.stored_len()).sum());
        let lookup = lookup_index(&valid);
        let valid_count = valid.len();
        let mut all = valid;
        all.append(&mut self.dead);
        let index = self.write_block(&encode_index(&all))?;
        let valid = &all[..valid_count];
        let mut total = BlockStats::default();
        valid.iter().for_each(|b| total.add(&b.stats));
        let filter = if self
            .opts
            .filters(total.entries, total.key_bytes + total.value_bytes)
        {
            let mut f = BloomBuilder::new(self.opts.bloom_bits_per_key);
            keys.iter().for_each(|k| f.add_key(k));
            self.write_block(&f.finish())?
        } else {
            BlockHandle {
                offset: self.offset,
                size: 0,
            }
        };
        let props = TableProperties {
            num_entries: total.entries,
            num_deletions: total.deletions,
            raw_key_bytes: total.key_bytes,
            raw_value_bytes: total.value_bytes,
            smallest_seq: self.bounds.smallest_seq,
            largest_seq: self.bounds.largest_seq,
            num_data_blocks: valid.len() as u64,
            creation_time: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            num_expiring: total.expiring,
            min_deadline: if total.expiring > 0 {
                self.bounds.min_deadline
            } else {
                0
            },
            max_deadline: if total.expiring > 0 {
                self.bounds.max_deadline
            } else {
                0
            },
        };
        let properties = self.write_block(&props.encode())?;
        let lookup = self.write_block(&lookup)?;
        let footer = SemiFooter {
            filter,
            properties,
            keys: key_list,
            index,
            lookup: Some(lookup),
            version: SEMI_VERSION,
        }
        .encode();
        self.file.append(&footer)?;
        self.offset += footer.len() as u64;
        self.file.sync()?;
        Ok(TableInfo {
            file_size: self.offset,
            smallest: InternalKey(smallest.into()),
            largest: InternalKey(largest.into()),
            props,
            blocks: self.writes,
            garbage_bytes,
            key_list_bytes: key_list.size + BLOCK_TRAILER_LEN as u64,
        })
    }
}

/// Merges two lists each sorted by `key` (their keys are disjoint).
fn merge_by_key<T, K: Ord>(a: Vec<T>, b: Vec<T>, key: impl Fn(&T) -> K) -> Vec<T> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
    loop {
        let take_a = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => key(x) <= key(y),
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return out,
        };
        out.extend(if take_a { a.next() } else { b.next() });
    }
}

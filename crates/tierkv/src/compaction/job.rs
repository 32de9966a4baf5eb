//! Running a compaction: merge the inputs newest-first, drop versions no snapshot can see
//! and tombstones that hide nothing, and write the survivors into new tables of the output
//! level, split at the target file size (never inside one user key's versions, so deeper
//! levels stay disjoint by user key).

use super::Compaction;
use crate::env::{Env, IoCause};
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::{parse_internal_key, SeqNo, ValueKind, MAX_SEQ};
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
    let mut written: Vec<NewFile> = Vec::new();
    let result = merge(c, ctx, &mut written, &mut out);
    if let Err(e) = result {
        for f in &written {
            let _ = ctx.env.remove(c.output_tier, &table_file_name(f.number));
        }
        return Err(e);
    }
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

fn merge(
    c: &Compaction,
    ctx: &JobContext<'_>,
    written: &mut Vec<NewFile>,
    out: &mut JobOutput,
) -> Result<()> {
    let mut iter = input_iterator(c, ctx)?;
    iter.seek_to_first()?;
    let mut current: Option<Output> = None;
    let mut last_user_key: Vec<u8> = Vec::new();
    let mut has_last = false;
    let mut last_seq_for_key = MAX_SEQ;
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
            // Cut the output only between user keys.
            if current
                .as_ref()
                .is_some_and(|o| o.builder.estimated_size() >= ctx.target_file_size)
            {
                finish_output(current.take().expect("checked"), c, written)?;
            }
            last_user_key.clear();
            last_user_key.extend_from_slice(parsed.user_key);
            has_last = true;
            last_seq_for_key = MAX_SEQ;
        }
        // A newer version of this key is visible to every snapshot: this one is hidden.
        let shadowed = last_seq_for_key <= ctx.smallest_snapshot;
        // A tombstone every snapshot sees, with nothing deeper to hide, can go.
        let dead_tombstone = parsed.kind == ValueKind::Delete
            && parsed.seq <= ctx.smallest_snapshot
            && ctx
                .version
                .is_base_level_for_key(c.output_level, parsed.user_key);
        last_seq_for_key = parsed.seq;
        if shadowed || dead_tombstone {
            out.entries_dropped += 1;
        } else {
            if current.is_none() {
                let number = (ctx.new_file_number)();
                let file = ctx.env.create_writable(
                    c.output_tier,
                    &table_file_name(number),
                    IoCause::Compaction,
                )?;
                current = Some(Output {
                    builder: TableBuilder::new(file, ctx.table_options),
                    number,
                });
            }
            current
                .as_mut()
                .expect("created above")
                .builder
                .add(ikey, iter.value())?;
        }
        iter.next()?;
    }
    if let Some(o) = current.take() {
        finish_output(o, c, written)?;
    }
    Ok(())
}

fn finish_output(o: Output, c: &Compaction, written: &mut Vec<NewFile>) -> Result<()> {
    let number = o.number;
    // Record the number first so a failed finish still deletes the file.
    written.push(NewFile {
        level: c.output_level,
        number,
        tier: c.output_tier,
        size: 0,
        smallest: Vec::new(),
        largest: Vec::new(),
        smallest_seq: 0,
        largest_seq: 0,
        num_entries: 0,
        num_deletions: 0,
    });
    let info = o.builder.finish()?;
    let slot = written.last_mut().expect("pushed above");
    *slot = new_file_from(c.output_level, number, c.output_tier, info);
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

//! A compaction's output files: the table being written to each output stream (the output
//! level, or the last fast level for retained and promoted records), and where one file
//! ends and the next begins.

use super::context::JobContext;
use super::semi_sink::{SemiOutputs, SinkLists};
use crate::env::{IoCause, Tier};
use crate::error::Result;
use crate::sst::{BlockWrites, RawBlock, TableBuilder, TableOptions};
use crate::version::{table_file_name, NewFile};

struct Output {
    builder: TableBuilder,
    number: u64,
}

/// Where one output stream goes: the compaction's output level, or (for retention and
/// promotion by compaction) back to the last fast level.
pub(super) struct Sink {
    level: usize,
    pub(super) tier: Tier,
    /// Format of this stream's tables (the output level's may go without filters).
    table_options: TableOptions,
    current: Option<Output>,
    /// Every file number created (finished or not), to delete them all on failure.
    pub(super) created: Vec<u64>,
    pub(super) done: Vec<NewFile>,
    pub(super) bytes_in: u64,
    pub(super) blocks: BlockWrites,
    /// Largest user keys of the files of the level below this sink's, in order: the
    /// boundaries an output may be cut at early (empty: cut at the target size only).
    pub(super) next_level_ends: Vec<Vec<u8>>,
    /// Index of the first of `next_level_ends` at or above the last key seen.
    next_end: usize,
    /// Boundaries passed while the current output was written.
    ends_passed: usize,
    /// Semi-sorted outputs (a merge into the slow tier with the semi-sorted format):
    /// records go there instead of to sorted tables.
    pub(super) semi: Option<SemiOutputs>,
}

impl Sink {
    pub(super) fn new(level: usize, tier: Tier, table_options: TableOptions) -> Self {
        Sink {
            level,
            tier,
            table_options,
            current: None,
            created: Vec::new(),
            done: Vec::new(),
            bytes_in: 0,
            blocks: BlockWrites::default(),
            next_level_ends: Vec::new(),
            next_end: 0,
            ends_passed: 0,
            semi: None,
        }
    }

    /// The semi-sorted outputs and the lists they record into.
    fn semi_parts(&mut self) -> Option<(&mut SemiOutputs, SinkLists<'_>)> {
        let semi = self.semi.as_mut()?;
        Some((
            semi,
            SinkLists {
                level: self.level,
                tier: self.tier,
                created: &mut self.created,
                done: &mut self.done,
                blocks: &mut self.blocks,
            },
        ))
    }

    /// The table being written, created on first use.
    fn builder(&mut self, ctx: &JobContext<'_>) -> Result<&mut TableBuilder> {
        let o = match self.current.take() {
            Some(o) => o,
            None => {
                let number = (ctx.new_file_number)();
                self.created.push(number);
                let file = ctx.env.create_writable(
                    self.tier,
                    &table_file_name(number),
                    IoCause::Compaction,
                )?;
                Output {
                    builder: TableBuilder::new(file, self.table_options),
                    number,
                }
            }
        };
        Ok(&mut self.current.insert(o).builder)
    }

    pub(super) fn add(&mut self, ctx: &JobContext<'_>, ikey: &[u8], value: &[u8]) -> Result<()> {
        self.bytes_in += (ikey.len() - crate::key::TRAILER_LEN + value.len()) as u64;
        if let Some((semi, mut lists)) = self.semi_parts() {
            return semi.add(ctx, &mut lists, ikey, value);
        }
        self.builder(ctx)?.add(ikey, value)
    }

    /// Appends a stored block whose entries hold `bytes_in` key and value bytes.
    pub(super) fn add_block(
        &mut self,
        ctx: &JobContext<'_>,
        raw: &RawBlock,
        bytes_in: u64,
    ) -> Result<()> {
        self.bytes_in += bytes_in;
        self.builder(ctx)?.add_raw_block(raw)
    }

    /// Finishes the current file before user key `next` (call between user keys) if it
    /// reached the target size, or if `next` lies past the end of a file of the level below
    /// and the current file holds at least half the target size. As in RocksDB 11.8
    /// (`CompactionOutputs::ShouldStopBefore`) that threshold rises by 5% of the target per
    /// boundary already passed, up to 90%, so files mostly end near their target size.
    pub(super) fn maybe_cut(&mut self, ctx: &JobContext<'_>, next: &[u8]) -> Result<()> {
        if let Some((semi, mut lists)) = self.semi_parts() {
            return semi.maybe_cut(&mut lists);
        }
        let mut crossed = 0;
        while self
            .next_level_ends
            .get(self.next_end)
            .is_some_and(|end| end.as_slice() < next)
        {
            self.next_end += 1;
            crossed += 1;
        }
        let Some(size) = self.current.as_ref().map(|o| o.builder.estimated_size()) else {
            return Ok(());
        };
        let early = ctx.target_file_size / 100 * (50 + (self.ends_passed as u64 * 5).min(40));
        if size >= ctx.target_file_size || (crossed > 0 && size >= early) {
            self.finish(ctx)?;
        } else {
            self.ends_passed += crossed;
        }
        Ok(())
    }

    pub(super) fn finish(&mut self, ctx: &JobContext<'_>) -> Result<()> {
        if let Some((semi, mut lists)) = self.semi_parts() {
            return semi.finish(ctx, &mut lists);
        }
        let Some(o) = self.current.take() else {
            return Ok(());
        };
        self.ends_passed = 0;
        let info = o.builder.finish()?;
        let b = &mut self.blocks;
        b.copied_blocks += info.blocks.copied_blocks;
        b.copied_bytes += info.blocks.copied_bytes;
        b.built_blocks += info.blocks.built_blocks;
        b.built_bytes += info.blocks.built_bytes;
        self.done
            .push(NewFile::from_table(self.level, o.number, self.tier, info));
        Ok(())
    }
}

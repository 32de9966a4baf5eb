//! Writing a table: entries in internal-key order are cut into data blocks, only between
//! two user keys (every version of a key stays in one block), each indexed by a short
//! user-key separator between its last key and the next block's first, its handle
//! delta-coded (format version 3, docs/FORMAT.md); the bloom filter collects user keys;
//! properties, index and footer close the file, which is synced before `finish` returns
//! (a table the manifest names is always durable). A compaction may also append a data
//! block of another table verbatim ([`TableBuilder::add_raw_block`]): the format is the
//! same either way. Owns the write side of the format only.

use super::block::BlockBuilder;
use super::filter::BloomBuilder;
use super::format::{
    append_block, shortest_separator, BlockHandle, Footer, BLOCK_TRAILER_LEN, FORMAT_VERSION,
};
use super::properties::TableProperties;
use super::table::RawBlock;
use super::{
    block_read_limit, BlockWrites, TableInfo, TableOptions, INDEX_RESTART_INTERVAL,
    MIN_RECORD_BLOCK,
};
use crate::env::{direct_read_span, WritableFile};
use crate::error::{Error, Result};
use crate::key::{compare_internal, parse_internal_key, user_key, InternalKey, ValueKind};

/// Builds one table file.
pub struct TableBuilder {
    file: WritableFile,
    opts: TableOptions,
    data: BlockBuilder,
    index: BlockBuilder,
    filter: Option<BloomBuilder>,
    props: TableProperties,
    smallest: Option<Vec<u8>>,
    last_key: Vec<u8>,
    offset: u64,
    writes: BlockWrites,
    /// The last data block written, whose index entry waits for the next block's first
    /// user key (its separator lies between the two).
    pending: Option<BlockHandle>,
    /// A data block that reached its size, closed before the next user key.
    cut_wanted: bool,
    /// The last internal key of the block `pending` points at.
    pending_last: Vec<u8>,
    /// The format version written: [`FORMAT_VERSION`], or an older one for tests that prove
    /// such tables are still read (1: index keyed by each block's last internal key,
    /// restart interval 1, blocks cut mid-user-key; 2: handles stored whole).
    version: u32,
}

impl TableBuilder {
    /// A builder writing into `file` (which it syncs on `finish`).
    pub fn new(file: WritableFile, opts: TableOptions) -> Self {
        TableBuilder {
            file,
            opts,
            data: BlockBuilder::new(opts.restart_interval),
            index: BlockBuilder::new(INDEX_RESTART_INTERVAL),
            filter: (opts.bloom_bits_per_key > 0)
                .then(|| BloomBuilder::new(opts.bloom_bits_per_key)),
            props: TableProperties {
                smallest_seq: u64::MAX,
                ..Default::default()
            },
            smallest: None,
            last_key: Vec::new(),
            offset: 0,
            writes: BlockWrites::default(),
            pending: None,
            cut_wanted: false,
            pending_last: Vec::new(),
            version: FORMAT_VERSION,
        }
    }

    /// A builder writing table format 1 or 2, as releases before format 3 did (tests only).
    #[cfg(test)]
    pub(crate) fn new_old_format(file: WritableFile, opts: TableOptions, version: u32) -> Self {
        let b = TableBuilder::new(file, opts);
        match version {
            1 => TableBuilder {
                index: BlockBuilder::new(1),
                version,
                ..b
            },
            _ => TableBuilder { version: 2, ..b },
        }
    }

    fn format1(&self) -> bool {
        self.version == 1
    }

    /// Appends an entry; internal keys must arrive in increasing order.
    pub fn add(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        // A full block closes before the next user key, never between two versions of one
        // key: the index can then be keyed by user keys alone.
        if (self.cut_wanted || self.read_would_outgrow(key, value))
            && (self.format1() || user_key(key) != user_key(&self.last_key))
        {
            self.flush_data_block()?;
        }
        if self.pending.is_some() && user_key(key) == self.pending_last_user_key() {
            // Only after a copied block: its last key's older versions must have been in it.
            return Err(Error::InvalidArgument(format!(
                "table builder for {} got a user key that continues a copied block",
                self.file.path().display()
            )));
        }
        self.account(key, value)?;
        self.add_pending_index_entry(user_key(key));
        self.data.add(key, value);
        self.cut_wanted = self.block_full();
        Ok(())
    }

    /// Indexes the last block written, by a separator between its last user key and
    /// `next`, the first user key after it.
    fn add_pending_index_entry(&mut self, next: &[u8]) {
        if let Some(h) = self.pending.take() {
            let sep = shortest_separator(self.pending_last_user_key(), next);
            self.add_index_entry(&sep, h);
        }
    }

    /// The last user key of the block `pending` points at.
    fn pending_last_user_key(&self) -> &[u8] {
        user_key(&self.pending_last)
    }

    fn add_index_entry(&mut self, key: &[u8], h: BlockHandle) {
        if self.version >= 3 {
            self.index.add_handle(key, h);
        } else {
            let mut encoded = Vec::with_capacity(16);
            h.encode_varint(&mut encoded);
            self.index.add(key, &encoded);
        }
    }

    /// Whether adding `key` and `value` would take the read that fetches the data block in
    /// progress (whole 512-byte sectors, trailer included) past `block_size` (rounded up
    /// to sectors: [`block_read_limit`]), while the block already holds an entry. A point read then moves one I/O unit: with 1 KiB
    /// records and 4 KiB blocks, three records (a 3.1 KB block, read in at most 4 KiB)
    /// instead of four (4.2 KB, a 4.5-5 KiB read, which cost 20% more per read on the
    /// benchmark disk: docs/bench/block-read-unit.md).
    fn read_would_outgrow(&self, key: &[u8], value: &[u8]) -> bool {
        if self.data.is_empty() {
            return false;
        }
        let stored = self.data.estimated_size_with(key, value.len()) + BLOCK_TRAILER_LEN;
        direct_read_span(self.offset, stored) > block_read_limit(self.opts.block_size)
    }

    /// Whether the data block in progress is complete: it reached `block_size`, or it holds
    /// `block_records` entries and at least [`MIN_RECORD_BLOCK`] bytes.
    fn block_full(&self) -> bool {
        let size = self.data.estimated_size();
        size >= self.opts.block_size
            || self
                .opts
                .block_records
                .is_some_and(|n| self.data.entries() >= n && size >= MIN_RECORD_BLOCK)
    }

    /// Appends a data block read from another table exactly as it is stored (compressed
    /// bytes and trailer; the checksum was verified when it was read, and the bytes do not
    /// change, so it stays valid). Its keys must all follow the keys added so far. The
    /// block still feeds the filter and the properties: its entries are walked (decoded,
    /// not re-encoded). A data block in progress is closed first, so it may be smaller
    /// than `block_size`.
    pub fn add_raw_block(&mut self, raw: &RawBlock) -> Result<()> {
        self.flush_data_block()?;
        let mut it = raw.block.iter();
        let path = self.file.path().to_path_buf();
        let bad = |reason: &str| {
            Error::corruption(
                &path,
                0,
                format!(
                    "copied block from offset {} of another table: {reason}",
                    raw.offset()
                ),
            )
        };
        it.seek_to_first().map_err(bad)?;
        if !it.valid() {
            return Err(bad("empty data block"));
        }
        if self.smallest.is_some() && user_key(it.key()) == user_key(&self.last_key) {
            // Block reuse copies a block only when nothing merged before it shares a key.
            return Err(bad("its first user key continues the block before it"));
        }
        if let Some(first) = parse_internal_key(it.key()) {
            self.add_pending_index_entry(first.user_key);
        }
        while it.valid() {
            self.account(it.key(), it.value())?;
            it.next().map_err(bad)?;
        }
        if self.last_key.as_slice() != raw.last_key() {
            return Err(bad("index key differs from the block's last key"));
        }
        let stored = raw.framed.len() as u64;
        let handle = BlockHandle {
            offset: self.offset,
            size: stored - BLOCK_TRAILER_LEN as u64,
        };
        self.file.append(&raw.framed)?;
        self.offset += stored;
        if self.format1() {
            let last = self.last_key.clone();
            self.add_index_entry(&last, handle);
        } else {
            self.pending = Some(handle);
            self.pending_last.clone_from(&self.last_key);
        }
        self.props.num_data_blocks += 1;
        self.writes.copied_blocks += 1;
        self.writes.copied_bytes += stored;
        Ok(())
    }

    /// Checks the order of `key` and counts it in the filter and the properties (an
    /// expiring record's deadline too: the expiry sweep reads them).
    fn account(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let value_len = value.len();
        let parsed = parse_internal_key(key).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "table builder for {} got a malformed internal key of {} bytes",
                self.file.path().display(),
                key.len()
            ))
        })?;
        if self.smallest.is_some() && compare_internal(&self.last_key, key).is_ge() {
            return Err(Error::InvalidArgument(format!(
                "table builder for {} got keys out of order",
                self.file.path().display()
            )));
        }
        if let Some(f) = self.filter.as_mut() {
            let new_user_key =
                self.smallest.is_none() || crate::key::user_key(&self.last_key) != parsed.user_key;
            if new_user_key {
                f.add_key(parsed.user_key);
            }
        }
        let p = &mut self.props;
        p.num_entries += 1;
        match parsed.kind {
            ValueKind::Delete => p.num_deletions += 1,
            ValueKind::Expiring => {
                let (_, deadline) =
                    crate::expiry::split_stored(parsed.kind, value).ok_or_else(|| {
                        Error::InvalidArgument(format!(
                            "table builder for {} got an expiring value shorter than its \
                             deadline",
                            self.file.path().display()
                        ))
                    })?;
                let d = deadline.unwrap_or(0);
                if p.num_expiring == 0 {
                    p.min_deadline = d;
                    p.max_deadline = d;
                } else {
                    p.min_deadline = p.min_deadline.min(d);
                    p.max_deadline = p.max_deadline.max(d);
                }
                p.num_expiring += 1;
            }
            ValueKind::Value => {}
        }
        p.raw_key_bytes += key.len() as u64;
        p.raw_value_bytes += value_len as u64;
        p.smallest_seq = p.smallest_seq.min(parsed.seq);
        p.largest_seq = p.largest_seq.max(parsed.seq);
        if self.smallest.is_none() {
            self.smallest = Some(key.to_vec());
        }
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        Ok(())
    }

    fn write_block(&mut self, raw: &[u8]) -> Result<BlockHandle> {
        append_block(&mut self.file, &mut self.offset, raw, self.opts.compression)
    }

    fn flush_data_block(&mut self) -> Result<()> {
        self.cut_wanted = false;
        if self.data.is_empty() {
            return Ok(());
        }
        let raw = self.data.finish();
        let handle = self.write_block(&raw)?;
        if self.format1() {
            let last = self.last_key.clone();
            self.add_index_entry(&last, handle);
        } else {
            self.pending = Some(handle);
            self.pending_last.clone_from(&self.last_key);
        }
        self.props.num_data_blocks += 1;
        self.writes.built_blocks += 1;
        self.writes.built_bytes += handle.size + BLOCK_TRAILER_LEN as u64;
        Ok(())
    }

    /// Bytes the file would have if finished now (approximately).
    pub fn estimated_size(&self) -> u64 {
        self.offset + self.data.estimated_size() as u64 + self.index.estimated_size() as u64
    }

    /// Entries added so far.
    pub fn num_entries(&self) -> u64 {
        self.props.num_entries
    }

    /// Writes the filter, properties, index and footer, and syncs the file.
    pub fn finish(mut self) -> Result<TableInfo> {
        let Some(smallest) = self.smallest.take() else {
            return Err(Error::InvalidArgument(format!(
                "refusing to write the empty table {}",
                self.file.path().display()
            )));
        };
        self.flush_data_block()?;
        // The last block's separator: its own last user key (nothing follows it).
        if let Some(h) = self.pending.take() {
            let last = self.pending_last_user_key().to_vec();
            self.add_index_entry(&last, h);
        }
        let p = &self.props;
        let filtered = self
            .opts
            .filters(p.num_entries, p.raw_key_bytes + p.raw_value_bytes);
        let filter = match self.filter.as_mut().filter(|_| filtered) {
            Some(f) => {
                let encoded = f.finish();
                self.write_block(&encoded)?
            }
            None => BlockHandle {
                offset: self.offset,
                size: 0,
            },
        };
        self.props.creation_time = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let properties = self.write_block(&self.props.encode())?;
        let raw_index = self.index.finish();
        let index = self.write_block(&raw_index)?;
        let footer = Footer {
            filter,
            properties,
            index,
            version: self.version,
        }
        .encode();
        self.file.append(&footer)?;
        self.offset += footer.len() as u64;
        self.file.sync()?;
        Ok(TableInfo {
            file_size: self.offset,
            smallest: InternalKey(smallest.into()),
            largest: InternalKey(std::mem::take(&mut self.last_key).into()),
            props: self.props,
            blocks: self.writes,
            garbage_bytes: 0,
            key_list_bytes: 0,
        })
    }
}

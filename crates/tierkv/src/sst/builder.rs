//! Writing a table: entries in internal-key order are cut into data blocks, each indexed
//! by its last key; the bloom filter collects user keys; properties, index and footer
//! close the file, which is synced before `finish` returns (a table the manifest names is
//! always durable). Owns the write side of the format only.

use super::block::BlockBuilder;
use super::filter::BloomBuilder;
use super::format::{frame_block, BlockHandle, Footer};
use super::properties::TableProperties;
use super::{TableInfo, TableOptions};
use crate::env::WritableFile;
use crate::key::{compare_internal, parse_internal_key, InternalKey, ValueKind};
use crate::{Error, Result};

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
}

impl TableBuilder {
    /// A builder writing into `file` (which it syncs on `finish`).
    pub fn new(file: WritableFile, opts: TableOptions) -> Self {
        TableBuilder {
            file,
            opts,
            data: BlockBuilder::new(opts.restart_interval),
            // Every index entry is a restart point: seeks binary-search the whole index.
            index: BlockBuilder::new(1),
            filter: (opts.bloom_bits_per_key > 0)
                .then(|| BloomBuilder::new(opts.bloom_bits_per_key)),
            props: TableProperties {
                smallest_seq: u64::MAX,
                ..Default::default()
            },
            smallest: None,
            last_key: Vec::new(),
            offset: 0,
        }
    }

    /// Appends an entry; internal keys must arrive in increasing order.
    pub fn add(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
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
        if parsed.kind == ValueKind::Delete {
            p.num_deletions += 1;
        }
        p.raw_key_bytes += key.len() as u64;
        p.raw_value_bytes += value.len() as u64;
        p.smallest_seq = p.smallest_seq.min(parsed.seq);
        p.largest_seq = p.largest_seq.max(parsed.seq);
        if self.smallest.is_none() {
            self.smallest = Some(key.to_vec());
        }
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.data.add(key, value);
        if self.data.estimated_size() >= self.opts.block_size {
            self.flush_data_block()?;
        }
        Ok(())
    }

    fn write_block(&mut self, raw: &[u8]) -> Result<BlockHandle> {
        let (framed, len) = frame_block(raw, self.opts.compression);
        let handle = BlockHandle {
            offset: self.offset,
            size: len as u64,
        };
        self.file.append(&framed)?;
        self.offset += framed.len() as u64;
        Ok(handle)
    }

    fn flush_data_block(&mut self) -> Result<()> {
        if self.data.is_empty() {
            return Ok(());
        }
        let raw = self.data.finish();
        let handle = self.write_block(&raw)?;
        let mut encoded = Vec::with_capacity(16);
        handle.encode_varint(&mut encoded);
        self.index.add(&self.last_key, &encoded);
        self.props.num_data_blocks += 1;
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
        let filter = match self.filter.as_mut() {
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
        })
    }
}

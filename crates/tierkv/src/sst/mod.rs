//! STUB (not committed)
#![allow(missing_docs, unused)]
use crate::env::{IoCause, RandomAccessFile, WritableFile};
use crate::key::InternalKey;
use crate::Result;
use bytes::Bytes;
use std::sync::Arc;
pub mod filter;
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Compression {
    #[default]
    None,
    Lz4,
}
#[derive(Clone, Copy, Debug)]
pub struct TableOptions {
    pub block_size: usize,
    pub restart_interval: usize,
    pub bloom_bits_per_key: usize,
    pub compression: Compression,
}
impl Default for TableOptions {
    fn default() -> Self {
        todo!()
    }
}
pub struct TableBuilder;
impl TableBuilder {
    pub fn new(file: WritableFile, opts: TableOptions) -> Self {
        todo!()
    }
    pub fn add(&mut self, k: &[u8], v: &[u8]) -> Result<()> {
        todo!()
    }
    pub fn estimated_size(&self) -> u64 {
        todo!()
    }
    pub fn num_entries(&self) -> u64 {
        todo!()
    }
    pub fn finish(self) -> Result<TableInfo> {
        todo!()
    }
}
#[derive(Clone, Debug)]
pub struct TableInfo {
    pub file_size: u64,
    pub smallest: InternalKey,
    pub largest: InternalKey,
    pub props: TableProperties,
}
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TableProperties {
    pub num_entries: u64,
    pub num_deletions: u64,
    pub raw_key_bytes: u64,
    pub raw_value_bytes: u64,
    pub smallest_seq: u64,
    pub largest_seq: u64,
    pub num_data_blocks: u64,
    pub creation_time: u64,
}
pub struct Table;
impl Table {
    pub fn open(
        file: RandomAccessFile,
        n: u64,
        c: Option<Arc<crate::cache::BlockCache>>,
        cause: IoCause,
    ) -> Result<Table> {
        todo!()
    }
    pub fn get(&self, k: &[u8], cause: IoCause) -> Result<Option<(Bytes, Bytes)>> {
        todo!()
    }
    pub fn iter(self: &Arc<Self>, cause: IoCause, fill: bool) -> TableIterator {
        todo!()
    }
    pub fn verify(&self, cause: IoCause) -> Result<u64> {
        todo!()
    }
    pub fn memory_usage(&self) -> usize {
        todo!()
    }
}
pub struct TableIterator;
impl crate::iter::InternalIterator for TableIterator {
    fn valid(&self) -> bool {
        todo!()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        todo!()
    }
    fn seek_to_last(&mut self) -> Result<()> {
        todo!()
    }
    fn seek(&mut self, t: &[u8]) -> Result<()> {
        todo!()
    }
    fn next(&mut self) -> Result<()> {
        todo!()
    }
    fn prev(&mut self) -> Result<()> {
        todo!()
    }
    fn key(&self) -> &[u8] {
        todo!()
    }
    fn value(&self) -> &[u8] {
        todo!()
    }
}

//! Decoding entry points for the fuzz targets in `fuzz/` and their regression tests: what
//! recovery does with bytes it reads, reachable from outside the crate where the decoder
//! is private. Not a stable API (hidden from the docs). Tables, logs, version edits and
//! RALT need nothing here: `sst::Table`, `wal::LogReader`, `version::VersionEdit` and
//! `hot::ralt::Ralt` are public.

use crate::batch::DecodedBatch;
use crate::key::SeqNo;
use crate::{BatchEntry, Result};
use std::path::Path;

/// Decodes and validates one WAL record as recovery does: the sequence number of its first
/// entry and its entries. Errors name `path` at `offset`.
pub fn wal_batch<'a>(
    record: &'a [u8],
    path: &Path,
    offset: u64,
) -> Result<(SeqNo, Vec<BatchEntry<'a>>)> {
    let batch = DecodedBatch::decode(record, path, offset)?;
    Ok((batch.seq, batch.entries().collect()))
}

//! The door to tierkv's internals, for the fuzz targets in `fuzz/`, their regression tests
//! and the benches: not a stable API, hidden from the docs like the modules it names.
//!
//! - Decoders recovery runs on bytes it reads, reachable here where the decoder itself is
//!   private: [`wal_batch`].
//! - Internal modules public only for those callers, each `#[doc(hidden)]`: `coding`
//!   (varints, checksums), `iter` (internal iterators), `key` (internal keys), `sst`
//!   (tables), `version` (manifest and versions) and `wal` (log records); `hot::ralt` for
//!   RALT's bench and fuzz target.
//!
//! Everything else internal is `pub(crate)`.

use crate::batch::DecodedBatch;
use crate::key::SeqNo;
use crate::{batch::BatchEntry, error::Result};
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

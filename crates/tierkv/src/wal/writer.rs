//! Appends records to a log file, fragmenting them across blocks.

use super::{FragmentType, BLOCK_SIZE, HEADER_SIZE};
use crate::coding::masked_crc_parts;
use crate::env::WritableFile;
use crate::error::Result;
use std::path::Path;

/// Writes records to a log. Not synchronized: callers serialize appends.
pub struct LogWriter {
    file: WritableFile,
    block_offset: usize,
}

impl LogWriter {
    /// A writer appending to `file` (which may already hold data).
    pub fn new(file: WritableFile) -> Self {
        let block_offset = (file.len() % BLOCK_SIZE as u64) as usize;
        LogWriter { file, block_offset }
    }

    /// Appends one record (buffered; see [`flush`](Self::flush) and [`sync`](Self::sync)).
    pub fn add_record(&mut self, record: impl AsRef<[u8]>) -> Result<()> {
        let mut rest = record.as_ref();
        let mut first = true;
        loop {
            let left_in_block = BLOCK_SIZE - self.block_offset;
            if left_in_block < HEADER_SIZE {
                // Too small for a header: pad with zeros, which readers skip.
                self.file.append(&[0u8; HEADER_SIZE][..left_in_block])?;
                self.block_offset = 0;
                continue;
            }
            let avail = left_in_block - HEADER_SIZE;
            let len = rest.len().min(avail);
            let last = len == rest.len();
            let kind = match (first, last) {
                (true, true) => FragmentType::Full,
                (true, false) => FragmentType::First,
                (false, true) => FragmentType::Last,
                (false, false) => FragmentType::Middle,
            };
            self.emit(kind, &rest[..len])?;
            rest = &rest[len..];
            first = false;
            if last {
                return Ok(());
            }
        }
    }

    fn emit(&mut self, kind: FragmentType, payload: &[u8]) -> Result<()> {
        let t = [kind as u8];
        let crc = masked_crc_parts(&[&t, payload]);
        let mut header = [0u8; HEADER_SIZE];
        header[..4].copy_from_slice(&crc.to_le_bytes());
        header[4..6].copy_from_slice(&(payload.len() as u16).to_le_bytes());
        header[6] = t[0];
        self.file.append(&header)?;
        self.file.append(payload)?;
        self.block_offset += HEADER_SIZE + payload.len();
        Ok(())
    }

    /// Hands appended records to the OS (they survive a process crash).
    pub fn flush(&mut self) -> Result<()> {
        self.file.flush()
    }

    /// Flushes and fsyncs (records survive a power cut).
    pub fn sync(&mut self) -> Result<()> {
        self.file.sync()
    }

    /// Bytes written to the log so far.
    pub fn len(&self) -> u64 {
        self.file.len()
    }

    /// True when nothing was written.
    pub fn is_empty(&self) -> bool {
        self.file.is_empty()
    }

    /// The log file's path.
    pub fn path(&self) -> &Path {
        self.file.path()
    }
}

//! Reads records back from a log held in memory, applying the [`RecoveryMode`] to damage.

use super::{FragmentType, RecoveryMode, BLOCK_SIZE, HEADER_SIZE};
use crate::coding::{decode_fixed32, masked_crc_parts};
use crate::error::{Error, Result};
use std::path::PathBuf;

/// One fragment, or why there is none at a position.
enum Fragment {
    Ok {
        kind: FragmentType,
        start: usize,
        end: usize,
    },
    /// Damage (bad checksum, bad type, length past the block or file).
    Bad(&'static str),
    /// A fragment cut short by the end of the file, as a crash mid-append leaves it.
    Truncated(&'static str),
    Eof,
}

/// Reads the records of a log file.
pub struct LogReader {
    data: Vec<u8>,
    path: PathBuf,
    mode: RecoveryMode,
    pos: usize,
    last_record_offset: u64,
    dropped: Option<(u64, u64)>,
    done: bool,
}

impl LogReader {
    /// A reader over the whole contents of the log at `path`.
    pub fn new(data: Vec<u8>, path: PathBuf, mode: RecoveryMode) -> Self {
        LogReader {
            data,
            path,
            mode,
            pos: 0,
            last_record_offset: 0,
            dropped: None,
            done: false,
        }
    }

    /// The next complete record, `None` at the end of the log (or of its valid prefix).
    pub fn next_record(&mut self) -> Result<Option<Vec<u8>>> {
        if self.done {
            return Ok(None);
        }
        let mut record: Option<(u64, Vec<u8>)> = None;
        loop {
            let at = self.pos;
            match self.read_fragment() {
                Fragment::Eof => {
                    if let Some((start, _)) = record {
                        return self.damaged(
                            start as usize,
                            at,
                            "record truncated at end of log",
                            true,
                        );
                    }
                    self.done = true;
                    return Ok(None);
                }
                Fragment::Bad(why) => {
                    let start = record.map_or(at, |(s, _)| s as usize);
                    return self.damaged(start, at, why, false);
                }
                Fragment::Truncated(why) => {
                    let start = record.map_or(at, |(s, _)| s as usize);
                    return self.damaged(start, at, why, true);
                }
                Fragment::Ok { kind, start, end } => {
                    let payload = &self.data[start..end];
                    match (kind, record.as_mut()) {
                        (FragmentType::Full, None) => {
                            self.last_record_offset = at as u64;
                            return Ok(Some(payload.to_vec()));
                        }
                        (FragmentType::First, None) => record = Some((at as u64, payload.to_vec())),
                        (FragmentType::Middle, Some((_, buf))) => buf.extend_from_slice(payload),
                        (FragmentType::Last, Some((s, buf))) => {
                            buf.extend_from_slice(payload);
                            self.last_record_offset = *s;
                            return Ok(record.take().map(|(_, b)| b));
                        }
                        _ => {
                            let start = record.map_or(at, |(s, _)| s as usize);
                            return self.damaged(start, at, "fragment out of sequence", false);
                        }
                    }
                }
            }
        }
    }

    /// Offset of the first fragment of the record last returned.
    pub fn last_record_offset(&self) -> u64 {
        self.last_record_offset
    }

    /// `(offset, bytes)` of a damaged tail that recovery dropped, if any.
    pub fn dropped_tail(&self) -> Option<(u64, u64)> {
        self.dropped
    }

    /// Applies the recovery mode to damage found at `damage` inside the record that
    /// starts at `offset` (everything from `offset` on is lost if the damage is tolerated).
    /// `truncated`: the damage is a fragment or record cut short by the end of the file.
    fn damaged(
        &mut self,
        offset: usize,
        damage: usize,
        why: &'static str,
        truncated: bool,
    ) -> Result<Option<Vec<u8>>> {
        let corrupt = || Error::corruption(&self.path, offset as u64, why);
        let tolerated = match self.mode {
            RecoveryMode::Strict => false,
            RecoveryMode::PointInTime => true,
            // A crash mid-append cuts the log short; it never damages a complete fragment,
            // never leaves valid data after the cut, and never leaves a whole fragment
            // behind a header whose length field claims more than the file holds.
            RecoveryMode::TolerateTornTail => {
                truncated
                    && !self.valid_fragment_after(damage)
                    && !self.complete_fragment_with_bad_length(damage)
            }
        };
        if !tolerated {
            self.done = true;
            return Err(corrupt());
        }
        self.dropped = Some((offset as u64, (self.data.len() - offset) as u64));
        self.done = true;
        Ok(None)
    }

    /// True when a fragment with a good checksum starts anywhere after `offset`: then the
    /// damage is in the middle of the log, not a torn tail. Every position is tried, since
    /// damage to a length field hides where the next fragment starts (only run on damage).
    fn valid_fragment_after(&self, offset: usize) -> bool {
        (offset + 1..self.data.len()).any(|p| self.checksum_ok_at(p))
    }

    /// True if a well-formed fragment with a good checksum starts at `p`.
    fn checksum_ok_at(&self, p: usize) -> bool {
        let left_in_block = BLOCK_SIZE - p % BLOCK_SIZE;
        let Some(h) = self.data.get(p..p + HEADER_SIZE) else {
            return false;
        };
        let len = u16::from_le_bytes([h[4], h[5]]) as usize;
        if left_in_block < HEADER_SIZE + len || FragmentType::from_u8(h[6]).is_none() {
            return false;
        }
        let Some(payload) = self.data.get(p + HEADER_SIZE..p + HEADER_SIZE + len) else {
            return false;
        };
        decode_fixed32(&h[..4]) == masked_crc_parts(&[&h[6..7], payload])
    }

    /// For a fragment at `p` whose length runs past the end of the file: true if a shorter
    /// length would make its checksum match, i.e. the fragment is whole and its length
    /// field is damaged (a bit flip, not a torn write).
    fn complete_fragment_with_bad_length(&self, p: usize) -> bool {
        let Some(h) = self.data.get(p..p + HEADER_SIZE) else {
            return false;
        };
        let stored = decode_fixed32(&h[..4]);
        let end = self
            .data
            .len()
            .min(p + BLOCK_SIZE - p % BLOCK_SIZE)
            .max(p + HEADER_SIZE);
        let mut crc = crc32c::crc32c(&h[6..7]);
        if crate::coding::mask_crc(crc) == stored {
            return true;
        }
        for &b in &self.data[p + HEADER_SIZE..end] {
            crc = crc32c::crc32c_append(crc, &[b]);
            if crate::coding::mask_crc(crc) == stored {
                return true;
            }
        }
        false
    }

    /// Reads the fragment at `pos`, skipping block trailers and zero padding.
    fn read_fragment(&mut self) -> Fragment {
        loop {
            let left_in_block = BLOCK_SIZE - self.pos % BLOCK_SIZE;
            if left_in_block < HEADER_SIZE {
                self.pos += left_in_block;
                continue;
            }
            let remaining = self.data.len().saturating_sub(self.pos);
            if remaining == 0 {
                return Fragment::Eof;
            }
            if remaining < HEADER_SIZE {
                return Fragment::Truncated("truncated fragment header");
            }
            let h = &self.data[self.pos..self.pos + HEADER_SIZE];
            let len = u16::from_le_bytes([h[4], h[5]]) as usize;
            let type_byte = h[6];
            if type_byte == 0 && len == 0 && h[..4] == [0, 0, 0, 0] {
                // Zeros: a preallocated or padded region. Only valid as trailing padding.
                if self.data[self.pos..].iter().all(|&b| b == 0) {
                    return Fragment::Eof;
                }
                return Fragment::Bad("zeroed fragment header");
            }
            if HEADER_SIZE + len > left_in_block {
                return Fragment::Bad("fragment length crosses its block");
            }
            if HEADER_SIZE + len > remaining {
                return Fragment::Truncated("fragment truncated");
            }
            let start = self.pos + HEADER_SIZE;
            let end = start + len;
            let crc = decode_fixed32(&h[..4]);
            if crc != masked_crc_parts(&[&[type_byte], &self.data[start..end]]) {
                return Fragment::Bad("fragment checksum mismatch");
            }
            let Some(kind) = FragmentType::from_u8(type_byte) else {
                return Fragment::Bad("unknown fragment type");
            };
            self.pos = end;
            return Fragment::Ok { kind, start, end };
        }
    }
}

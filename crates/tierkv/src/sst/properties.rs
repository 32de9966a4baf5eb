//! The properties block: counts and sequence bounds of a table, written by the builder and
//! read back at open. Encoding: pairs `tag: varint | value: varint`; unknown tags are
//! skipped so a newer writer can add properties an older reader ignores.

use crate::coding::{get_varint64, put_varint64};

/// Facts about a table's contents.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableProperties {
    /// Entries, tombstones included.
    pub num_entries: u64,
    /// Tombstones.
    pub num_deletions: u64,
    /// Sum of internal key lengths.
    pub raw_key_bytes: u64,
    /// Sum of value lengths.
    pub raw_value_bytes: u64,
    /// Smallest sequence number inside.
    pub smallest_seq: u64,
    /// Largest sequence number inside.
    pub largest_seq: u64,
    /// Data blocks.
    pub num_data_blocks: u64,
    /// Unix time (seconds) when the table was written.
    pub creation_time: u64,
    /// Expiring records (kind 2; 0 in tables written before expiry existed).
    pub num_expiring: u64,
    /// Earliest deadline of an expiring record (ms since the UNIX epoch; 0 when none).
    pub min_deadline: u64,
    /// Latest deadline of an expiring record (ms since the UNIX epoch; 0 when none).
    pub max_deadline: u64,
}

const TAGS: usize = 11;

impl TableProperties {
    fn fields(&self) -> [u64; TAGS] {
        [
            self.num_entries,
            self.num_deletions,
            self.raw_key_bytes,
            self.raw_value_bytes,
            self.smallest_seq,
            self.largest_seq,
            self.num_data_blocks,
            self.creation_time,
            self.num_expiring,
            self.min_deadline,
            self.max_deadline,
        ]
    }

    fn field_mut(&mut self, tag: u64) -> Option<&mut u64> {
        Some(match tag {
            1 => &mut self.num_entries,
            2 => &mut self.num_deletions,
            3 => &mut self.raw_key_bytes,
            4 => &mut self.raw_value_bytes,
            5 => &mut self.smallest_seq,
            6 => &mut self.largest_seq,
            7 => &mut self.num_data_blocks,
            8 => &mut self.creation_time,
            9 => &mut self.num_expiring,
            10 => &mut self.min_deadline,
            11 => &mut self.max_deadline,
            _ => return None,
        })
    }

    /// Encodes the block contents.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, v) in self.fields().into_iter().enumerate() {
            put_varint64(&mut out, i as u64 + 1);
            put_varint64(&mut out, v);
        }
        out
    }

    /// Decodes block contents; `None` if a varint is malformed.
    pub fn decode(mut src: &[u8]) -> Option<TableProperties> {
        let mut p = TableProperties::default();
        while !src.is_empty() {
            let (tag, n) = get_varint64(src)?;
            let (value, m) = get_varint64(&src[n..])?;
            if let Some(f) = p.field_mut(tag) {
                *f = value;
            }
            src = &src[n + m..];
        }
        Some(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_skip_unknown_tags() {
        let p = TableProperties {
            num_entries: 10,
            num_deletions: 2,
            raw_key_bytes: 300,
            raw_value_bytes: 4000,
            smallest_seq: 5,
            largest_seq: 99,
            num_data_blocks: 3,
            creation_time: 1_700_000_000,
            num_expiring: 4,
            min_deadline: 1_700_000_000_000,
            max_deadline: 1_700_000_000_500,
        };
        let mut enc = p.encode();
        put_varint64(&mut enc, 42);
        put_varint64(&mut enc, 7);
        assert_eq!(TableProperties::decode(&enc), Some(p));
        assert_eq!(TableProperties::decode(&[0x80]), None);
    }
}

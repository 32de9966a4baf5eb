//! Write batches: an ordered list of puts and deletes applied atomically, and their
//! encoding, which is also the payload of every WAL record.
//!
//! Encoding: `seq: u64 LE | count: u32 LE | entries...`, each entry `kind: u8 | key:
//! varint-length-prefixed | value: varint-length-prefixed (puts only)`; an expiring put
//! (kind 2) stores `deadline: u64 LE ++ value` as its value, as tables do (docs/FORMAT.md).
//! Owns the encoding and its validation; it never touches memtables or files.

use crate::coding::{decode_fixed32, decode_fixed64, get_length_prefixed, put_length_prefixed};
use crate::error::{Error, Result};
use crate::key::{SeqNo, ValueKind, MAX_SEQ};
use std::path::Path;

const HEADER: usize = 12;

/// An atomic group of writes. Later entries for the same key win.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteBatch {
    rep: Vec<u8>,
    count: u32,
}

impl Default for WriteBatch {
    fn default() -> Self {
        WriteBatch::new()
    }
}

/// One decoded batch entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchEntry<'a> {
    /// Put, expiring put or delete.
    pub kind: ValueKind,
    /// The user key.
    pub key: &'a [u8],
    /// The value (empty for deletes).
    pub value: &'a [u8],
    /// The deadline of an expiring put (milliseconds since the UNIX epoch).
    pub deadline: Option<u64>,
    /// The value as memtables and tables store it (with the deadline prefix of an
    /// expiring put).
    stored: &'a [u8],
}

impl<'a> BatchEntry<'a> {
    /// The value as memtables and tables store it: for an expiring put, `deadline: u64 LE
    /// ++ value`; otherwise the value.
    pub fn stored_value(&self) -> &'a [u8] {
        self.stored
    }
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        WriteBatch {
            rep: vec![0; HEADER],
            count: 0,
        }
    }

    /// Adds a put.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &mut Self {
        self.rep.push(ValueKind::Value as u8);
        put_length_prefixed(&mut self.rep, key.as_ref());
        put_length_prefixed(&mut self.rep, value.as_ref());
        self.count += 1;
        self
    }

    /// Adds a put that expires at `deadline_ms` (milliseconds since the UNIX epoch, as
    /// [`crate::Clock::now_ms`] reads): from then on the key reads as deleted. A deadline
    /// already past is accepted (the key reads as absent).
    pub fn put_expiring(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        deadline_ms: u64,
    ) -> &mut Self {
        self.rep.push(ValueKind::Expiring as u8);
        put_length_prefixed(&mut self.rep, key.as_ref());
        let value = value.as_ref();
        crate::coding::put_varint64(
            &mut self.rep,
            (crate::expiry::DEADLINE_LEN + value.len()) as u64,
        );
        self.rep.extend_from_slice(&deadline_ms.to_le_bytes());
        self.rep.extend_from_slice(value);
        self.count += 1;
        self
    }

    /// Adds a delete.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> &mut Self {
        self.rep.push(ValueKind::Delete as u8);
        put_length_prefixed(&mut self.rep, key.as_ref());
        self.count += 1;
        self
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// True when the batch holds no entry.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Encoded size in bytes.
    pub fn approximate_size(&self) -> usize {
        self.rep.len()
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        self.rep.truncate(HEADER);
        self.count = 0;
    }

    /// Iterates the entries in insertion order.
    #[allow(
        clippy::expect_used,
        reason = "the batch was built by this type, so its encoding is well-formed"
    )]
    pub fn iter(&self) -> impl Iterator<Item = BatchEntry<'_>> + '_ {
        // The batch was built by this type, so its encoding is well-formed.
        BatchIter {
            data: &self.rep[HEADER..],
        }
        .map(|e| e.expect("self-built batch is well-formed"))
    }

    /// Appends every entry of `other`.
    pub fn append(&mut self, other: &WriteBatch) {
        self.rep.extend_from_slice(&other.rep[HEADER..]);
        self.count += other.count;
    }

    /// The encoding with `seq` stamped as the sequence number of the first entry.
    pub(crate) fn encode_with_seq(&mut self, seq: SeqNo) -> &[u8] {
        self.rep[..8].copy_from_slice(&seq.to_le_bytes());
        self.rep[8..12].copy_from_slice(&self.count.to_le_bytes());
        &self.rep
    }
}

/// A batch decoded from a WAL record, validated entry by entry.
#[derive(Debug)]
pub(crate) struct DecodedBatch<'a> {
    /// Sequence number of the first entry.
    pub seq: SeqNo,
    /// Number of entries the header claims (checked against the body).
    pub count: u32,
    body: &'a [u8],
}

impl DecodedBatch<'_> {
    /// The batch itself: the record's entries copied as they are (already validated).
    pub fn to_batch(&self) -> WriteBatch {
        let mut rep = Vec::with_capacity(HEADER + self.body.len());
        rep.extend_from_slice(&[0; HEADER]);
        rep.extend_from_slice(self.body);
        WriteBatch {
            rep,
            count: self.count,
        }
    }
}

impl<'a> DecodedBatch<'a> {
    /// Parses and fully validates a WAL record; `path`/`offset` name it in errors.
    pub fn decode(rec: &'a [u8], path: &Path, offset: u64) -> Result<Self> {
        if rec.len() < HEADER {
            return Err(Error::corruption(
                path,
                offset,
                "write batch shorter than its header",
            ));
        }
        let batch = DecodedBatch {
            seq: decode_fixed64(rec),
            count: decode_fixed32(&rec[8..]),
            body: &rec[HEADER..],
        };
        let mut n = 0u32;
        for e in (BatchIter { data: batch.body }) {
            if e.is_none() {
                return Err(Error::corruption(
                    path,
                    offset,
                    "malformed write batch entry",
                ));
            }
            n += 1;
        }
        if n != batch.count {
            return Err(Error::corruption(
                path,
                offset,
                format!("write batch claims {} entries but holds {n}", batch.count),
            ));
        }
        // Replay numbers the entries seq, seq + 1, ...: past MAX_SEQ (a damaged or forged
        // record) they would overflow the key trailer and shadow every real version.
        if n > 0
            && batch
                .seq
                .checked_add(n as u64 - 1)
                .is_none_or(|last| last > MAX_SEQ)
        {
            return Err(Error::corruption(
                path,
                offset,
                format!(
                    "write batch sequence numbers {}+{n} run past the maximum {MAX_SEQ}",
                    batch.seq
                ),
            ));
        }
        Ok(batch)
    }

    /// The (already validated) entries.
    pub fn entries(&self) -> impl Iterator<Item = BatchEntry<'a>> + 'a {
        BatchIter { data: self.body }.map_while(|e| e)
    }
}

struct BatchIter<'a> {
    data: &'a [u8],
}

impl<'a> Iterator for BatchIter<'a> {
    /// `Some(None)` marks a malformed entry (and ends the iteration).
    type Item = Option<BatchEntry<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let (&tag, rest) = self.data.split_first()?;
        let parsed = (|| {
            let kind = ValueKind::from_u8(tag)?;
            let (key, n) = get_length_prefixed(rest)?;
            let mut used = n;
            let stored = if kind == ValueKind::Delete {
                &[][..]
            } else {
                let (v, m) = get_length_prefixed(&rest[n..])?;
                used += m;
                v
            };
            // An expiring put shorter than its deadline is malformed.
            let (value, deadline) = crate::expiry::split_stored(kind, stored)?;
            Some((
                BatchEntry {
                    kind,
                    key,
                    value,
                    deadline,
                    stored,
                },
                used,
            ))
        })();
        match parsed {
            Some((entry, used)) => {
                self.data = &rest[used..];
                Some(Some(entry))
            }
            None => {
                self.data = &[];
                Some(None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_round_trip() {
        let mut b = WriteBatch::new();
        b.put(b"a", b"1").delete(b"b").put(b"", b"");
        let enc = b.encode_with_seq(77).to_vec();
        let d = DecodedBatch::decode(&enc, Path::new("x"), 0).unwrap();
        assert_eq!((d.seq, d.count), (77, 3));
        let got: Vec<_> = d.entries().collect();
        assert_eq!(got, b.iter().collect::<Vec<_>>());
        assert_eq!(got[1].kind, ValueKind::Delete);
    }

    /// An expiring put round-trips its value and deadline through the WAL encoding, and
    /// one whose stored value is shorter than a deadline is corruption (invariant 3).
    #[test]
    fn expiring_put_round_trips_and_short_ones_are_corruption() {
        let mut b = WriteBatch::new();
        b.put_expiring(b"k", b"val", 0x0102_0304_0506)
            .put(b"p", b"q");
        let enc = b.encode_with_seq(5).to_vec();
        let d = DecodedBatch::decode(&enc, Path::new("x"), 0).unwrap();
        let got: Vec<_> = d.entries().collect();
        assert_eq!(got[0].kind, ValueKind::Expiring);
        assert_eq!(
            (got[0].value, got[0].deadline),
            (&b"val"[..], Some(0x0102_0304_0506))
        );
        assert_eq!(got[0].stored_value().len(), 11);
        assert_eq!((got[1].value, got[1].deadline), (&b"q"[..], None));
        // kind 2, key "k", a 3-byte stored value: too short for a deadline.
        let mut bad = WriteBatch::new();
        bad.rep.extend_from_slice(&[2, 1, b'k', 3, 1, 2, 3]);
        bad.count = 1;
        let enc = bad.encode_with_seq(1).to_vec();
        assert!(DecodedBatch::decode(&enc, Path::new("x"), 0)
            .unwrap_err()
            .is_corruption());
    }

    /// Every truncation and a wrong count are rejected as corruption (invariant 3, docs/DESIGN.md).
    #[test]
    fn malformed_batches_are_corruption() {
        let mut b = WriteBatch::new();
        b.put(b"key", b"value").delete(b"k2");
        let enc = b.encode_with_seq(1).to_vec();
        for cut in 0..enc.len() {
            assert!(
                DecodedBatch::decode(&enc[..cut], Path::new("x"), 0).is_err(),
                "cut {cut}"
            );
        }
        let mut bad = enc.clone();
        bad[8] = 5;
        assert!(DecodedBatch::decode(&bad, Path::new("x"), 9)
            .unwrap_err()
            .is_corruption());
    }
}

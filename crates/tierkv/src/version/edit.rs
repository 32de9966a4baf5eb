//! Version edits: the records of the manifest. Each edit describes a change from one
//! version to the next (files added and removed, counters advanced). Owns the encoding only.
//!
//! Encoding: a sequence of fields, each `tag: varint` followed by its payload (see
//! docs/FORMAT.md, "Manifest"). Unknown tags are corruption, so an old binary never
//! misreads a newer store silently.

use crate::coding::{get_length_prefixed, get_varint64, put_length_prefixed, put_varint64};
use crate::env::Tier;
use crate::error::{Error, Result};
use crate::key::SeqNo;
use std::path::Path;

const TAG_LOG_NUMBER: u64 = 1;
const TAG_NEXT_FILE: u64 = 2;
const TAG_LAST_SEQ: u64 = 3;
const TAG_DELETED_FILE: u64 = 4;
const TAG_NEW_FILE: u64 = 5;
/// The expiring records of the file added just before (only written when it has some).
const TAG_FILE_EXPIRY: u64 = 6;
/// The dirty-block bytes of the (semi-sorted) file added just before (only written when
/// it has some): what the slow tier's space amplification counts.
const TAG_FILE_GARBAGE: u64 = 7;
/// The key-list bytes of the (semi-sorted) file added just before (only written when
/// non-zero): what level sizes leave out besides the garbage.
const TAG_FILE_KEY_LIST: u64 = 8;

/// A table's expiring records, as its properties record them: how many, and the range of
/// their deadlines (milliseconds since the UNIX epoch). All zero: none (also what a table
/// written before expiry existed reads as).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileExpiry {
    /// Expiring records (kind 2).
    pub count: u64,
    /// Earliest deadline among them.
    pub min_deadline: u64,
    /// Latest deadline among them.
    pub max_deadline: u64,
}

impl FileExpiry {
    /// Estimated records of the file expired at `now`: all of them past the latest
    /// deadline, none before the earliest, and in between in proportion to the time
    /// passed (deadlines taken as spread evenly).
    pub fn estimated_expired(&self, now: u64) -> u64 {
        if self.count == 0 || now < self.min_deadline {
            0
        } else if now >= self.max_deadline {
            self.count
        } else {
            let span = (self.max_deadline - self.min_deadline) as u128;
            let passed = (now - self.min_deadline + 1) as u128;
            (self.count as u128 * passed / (span + 1)) as u64
        }
    }
}

/// A table file as recorded in the manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewFile {
    /// Level the file belongs to.
    pub level: usize,
    /// File number (`NNNNNN.sst`).
    pub number: u64,
    /// Tier whose directory holds the file.
    pub tier: Tier,
    /// File size in bytes.
    pub size: u64,
    /// Smallest internal key.
    pub smallest: Vec<u8>,
    /// Largest internal key.
    pub largest: Vec<u8>,
    /// Smallest sequence number inside.
    pub smallest_seq: SeqNo,
    /// Largest sequence number inside.
    pub largest_seq: SeqNo,
    /// Entries (including tombstones).
    pub num_entries: u64,
    /// Tombstones.
    pub num_deletions: u64,
    /// Expiring records and their deadlines (the expiry sweep's input).
    pub expiry: FileExpiry,
    /// Bytes of dirty blocks inside it (a semi-sorted table's garbage; 0 otherwise).
    pub garbage_bytes: u64,
    /// Bytes of its last generation's key list (a semi-sorted table's; 0 otherwise, and 0
    /// when a manifest written before it was recorded names the file).
    pub key_list_bytes: u64,
}

impl NewFile {
    /// The manifest record of table `number`, just written to `tier` for `level`.
    pub fn from_table(level: usize, number: u64, tier: Tier, info: crate::sst::TableInfo) -> Self {
        NewFile {
            level,
            number,
            tier,
            size: info.file_size,
            smallest: info.smallest.encoded().to_vec(),
            largest: info.largest.encoded().to_vec(),
            smallest_seq: info.props.smallest_seq,
            largest_seq: info.props.largest_seq,
            num_entries: info.props.num_entries,
            num_deletions: info.props.num_deletions,
            expiry: FileExpiry {
                count: info.props.num_expiring,
                min_deadline: info.props.min_deadline,
                max_deadline: info.props.max_deadline,
            },
            garbage_bytes: info.garbage_bytes,
            key_list_bytes: info.key_list_bytes,
        }
    }
}

/// One manifest record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VersionEdit {
    /// WAL files numbered below this are fully flushed.
    pub log_number: Option<u64>,
    /// Next unused file number.
    pub next_file_number: Option<u64>,
    /// Largest sequence number persisted in tables or earlier WALs.
    pub last_sequence: Option<SeqNo>,
    /// Files removed: (level, number).
    pub deleted: Vec<(usize, u64)>,
    /// Files added.
    pub added: Vec<NewFile>,
}

impl VersionEdit {
    /// Encodes the edit.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut field = |tag, v: Option<u64>| {
            if let Some(v) = v {
                put_varint64(&mut out, tag);
                put_varint64(&mut out, v);
            }
        };
        field(TAG_LOG_NUMBER, self.log_number);
        field(TAG_NEXT_FILE, self.next_file_number);
        field(TAG_LAST_SEQ, self.last_sequence);
        for &(level, number) in &self.deleted {
            put_varint64(&mut out, TAG_DELETED_FILE);
            put_varint64(&mut out, level as u64);
            put_varint64(&mut out, number);
        }
        for f in &self.added {
            put_varint64(&mut out, TAG_NEW_FILE);
            put_varint64(&mut out, f.level as u64);
            put_varint64(&mut out, f.number);
            put_varint64(&mut out, f.tier as u64);
            put_varint64(&mut out, f.size);
            put_length_prefixed(&mut out, &f.smallest);
            put_length_prefixed(&mut out, &f.largest);
            put_varint64(&mut out, f.smallest_seq);
            put_varint64(&mut out, f.largest_seq);
            put_varint64(&mut out, f.num_entries);
            put_varint64(&mut out, f.num_deletions);
            if f.expiry.count > 0 {
                put_varint64(&mut out, TAG_FILE_EXPIRY);
                put_varint64(&mut out, f.expiry.count);
                put_varint64(&mut out, f.expiry.min_deadline);
                put_varint64(&mut out, f.expiry.max_deadline);
            }
            if f.garbage_bytes > 0 {
                put_varint64(&mut out, TAG_FILE_GARBAGE);
                put_varint64(&mut out, f.garbage_bytes);
            }
            if f.key_list_bytes > 0 {
                put_varint64(&mut out, TAG_FILE_KEY_LIST);
                put_varint64(&mut out, f.key_list_bytes);
            }
        }
        out
    }

    /// Decodes an edit; `path` and `offset` (of the manifest record) name it in errors.
    pub fn decode(mut src: &[u8], path: &Path, offset: u64) -> Result<Self> {
        let bad = |what: &str| Error::corruption(path, offset, format!("manifest record: {what}"));
        let mut edit = VersionEdit::default();
        let varint = |src: &mut &[u8], what: &str| -> Result<u64> {
            let (v, n) = get_varint64(src).ok_or_else(|| bad(what))?;
            *src = &src[n..];
            Ok(v)
        };
        while !src.is_empty() {
            match varint(&mut src, "tag")? {
                TAG_LOG_NUMBER => edit.log_number = Some(varint(&mut src, "log number")?),
                TAG_NEXT_FILE => edit.next_file_number = Some(varint(&mut src, "next file")?),
                TAG_LAST_SEQ => edit.last_sequence = Some(varint(&mut src, "last sequence")?),
                TAG_DELETED_FILE => {
                    let level = varint(&mut src, "deleted level")? as usize;
                    let number = varint(&mut src, "deleted number")?;
                    edit.deleted.push((level, number));
                }
                TAG_NEW_FILE => {
                    let level = varint(&mut src, "level")? as usize;
                    let number = varint(&mut src, "file number")?;
                    let tier = match varint(&mut src, "tier")? {
                        0 => Tier::Fast,
                        1 => Tier::Slow,
                        t => return Err(bad(&format!("unknown tier {t}"))),
                    };
                    let size = varint(&mut src, "size")?;
                    let key = |src: &mut &[u8], what: &str| -> Result<Vec<u8>> {
                        let (k, n) = get_length_prefixed(src).ok_or_else(|| bad(what))?;
                        let k = k.to_vec();
                        *src = &src[n..];
                        Ok(k)
                    };
                    let smallest = key(&mut src, "smallest key")?;
                    let largest = key(&mut src, "largest key")?;
                    edit.added.push(NewFile {
                        level,
                        number,
                        tier,
                        size,
                        smallest,
                        largest,
                        smallest_seq: varint(&mut src, "smallest seq")?,
                        largest_seq: varint(&mut src, "largest seq")?,
                        num_entries: varint(&mut src, "entries")?,
                        num_deletions: varint(&mut src, "deletions")?,
                        expiry: FileExpiry::default(),
                        garbage_bytes: 0,
                        key_list_bytes: 0,
                    });
                }
                TAG_FILE_EXPIRY => {
                    let expiry = FileExpiry {
                        count: varint(&mut src, "expiring records")?,
                        min_deadline: varint(&mut src, "earliest deadline")?,
                        max_deadline: varint(&mut src, "latest deadline")?,
                    };
                    let f = edit
                        .added
                        .last_mut()
                        .ok_or_else(|| bad("expiry record before any new file"))?;
                    f.expiry = expiry;
                }
                TAG_FILE_GARBAGE => {
                    let bytes = varint(&mut src, "garbage bytes")?;
                    let f = edit
                        .added
                        .last_mut()
                        .ok_or_else(|| bad("garbage record before any new file"))?;
                    f.garbage_bytes = bytes;
                }
                TAG_FILE_KEY_LIST => {
                    let bytes = varint(&mut src, "key list bytes")?;
                    let f = edit
                        .added
                        .last_mut()
                        .ok_or_else(|| bad("key list record before any new file"))?;
                    f.key_list_bytes = bytes;
                }
                t => return Err(bad(&format!("unknown tag {t}"))),
            }
        }
        Ok(edit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> VersionEdit {
        VersionEdit {
            log_number: Some(7),
            next_file_number: Some(99),
            last_sequence: Some(12345),
            deleted: vec![(1, 5), (2, 6)],
            added: vec![NewFile {
                level: 3,
                number: 42,
                tier: Tier::Slow,
                size: 1 << 20,
                smallest: b"a\x01\0\0\0\0\0\0\0".to_vec(),
                largest: b"z\x01\0\0\0\0\0\0\0".to_vec(),
                smallest_seq: 1,
                largest_seq: 100,
                num_entries: 1000,
                num_deletions: 3,
                expiry: FileExpiry {
                    count: 10,
                    min_deadline: 1_700_000_000_000,
                    max_deadline: 1_700_000_100_000,
                },
                garbage_bytes: 4096,
                key_list_bytes: 2048,
            }],
        }
    }

    #[test]
    fn expired_estimate_grows_with_time() {
        let e = FileExpiry {
            count: 100,
            min_deadline: 1000,
            max_deadline: 1999,
        };
        assert_eq!(e.estimated_expired(999), 0);
        assert_eq!(e.estimated_expired(1499), 50);
        assert_eq!(e.estimated_expired(1999), 100);
        assert_eq!(FileExpiry::default().estimated_expired(u64::MAX), 0);
    }

    #[test]
    fn round_trip() {
        let e = sample();
        assert_eq!(
            VersionEdit::decode(&e.encode(), Path::new("m"), 0).unwrap(),
            e
        );
    }

    /// Truncation is corruption or a shorter valid edit, not a panic (docs/DESIGN.md invariant 3).
    #[test]
    fn truncations_never_panic() {
        let enc = sample().encode();
        for cut in 0..enc.len() {
            let _ = VersionEdit::decode(&enc[..cut], Path::new("m"), 0);
        }
        let err = VersionEdit::decode(&[200, 1], Path::new("MANIFEST-1"), 8).unwrap_err();
        assert!(err.to_string().contains("MANIFEST-1"), "{err}");
    }
}

//! The change feed: the store's write batches after a sequence number, read back from its
//! WAL files ([`crate::Db::changes_since`]), so a replica that holds the store as of one
//! sequence (a checkpoint's) can apply what came after, and resume from where it stopped.
//!
//! A WAL is kept while a memtable needs it; with `Options::wal_retention_bytes` the
//! retired ones (every batch of them in a table) are kept too, the oldest removed first
//! beyond that many bytes (as Redis's replication backlog), so a replica that lags or
//! reconnects finds its next batch. Retired WALs are a backlog in memory of nothing: they
//! are only files, read when asked; a restart keeps those within the retention.
//!
//! Owns the reading of WALs for the feed and the pruning of retired ones; the write path
//! and recovery own the live ones.

use super::DbInner;
use crate::batch::{DecodedBatch, WriteBatch};
use crate::env::{IoCause, Tier};
use crate::error::{Error, Result};
use crate::key::ValueKind;
use crate::version::{parse_file_number, wal_file_name};
use crate::wal::LogReader;

/// One write batch of the store's history.
#[derive(Clone, Debug)]
pub struct Change {
    /// The sequence number of its first entry (its entries take consecutive numbers).
    pub sequence: u64,
    /// Its entries, in order.
    pub batch: WriteBatch,
}

impl Change {
    /// The sequence number of its last entry.
    pub fn last_sequence(&self) -> u64 {
        self.sequence + (self.batch.len() as u64).saturating_sub(1)
    }
}

/// Attempts at a consistent listing when WALs are retired under the reader.
const LIST_ATTEMPTS: usize = 8;

pub(super) fn since(inner: &DbInner, sequence: u64, max_bytes: usize) -> Result<Vec<Change>> {
    for _ in 0..LIST_ATTEMPTS {
        match read(inner, sequence, max_bytes) {
            // A WAL listed but removed before it was read: list again.
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
            r => return r,
        }
    }
    read(inner, sequence, max_bytes)
}

fn read(inner: &DbInner, sequence: u64, max_bytes: usize) -> Result<Vec<Change>> {
    let env = &inner.env;
    let mut logs: Vec<u64> = env
        .list(Tier::Fast)?
        .iter()
        .filter_map(|n| parse_file_number(n, "log"))
        .collect();
    logs.sort_unstable();
    let mut out: Vec<Change> = Vec::new();
    let mut bytes = 0usize;
    let mut expected = sequence + 1;
    for number in logs {
        let name = wal_file_name(number);
        let path = env.path(Tier::Fast, &name);
        let data = env.read_all(Tier::Fast, &name, IoCause::Wal)?;
        // The live WAL may end in a record being appended: a torn tail is its end.
        let mut reader = LogReader::new(data, path.clone(), Default::default());
        while let Some(rec) = reader.next_record()? {
            let decoded = DecodedBatch::decode(&rec, &path, reader.last_record_offset())?;
            let first = decoded.seq;
            let last = first + u64::from(decoded.count).saturating_sub(1);
            if last < expected {
                continue;
            }
            if first != expected {
                return Err(if first > expected {
                    Error::ChangesGone {
                        wanted: expected,
                        oldest: first,
                    }
                } else {
                    Error::InvalidArgument(format!(
                        "sequence {sequence} is inside the batch of sequences {first}..={last}: \
                         changes start after a batch"
                    ))
                });
            }
            let mut batch = WriteBatch::new();
            for e in decoded.entries() {
                match (e.kind, e.deadline) {
                    (ValueKind::Delete, _) => batch.delete(e.key),
                    (ValueKind::Expiring, Some(d)) => batch.put_expiring(e.key, e.value, d),
                    _ => batch.put(e.key, e.value),
                };
            }
            bytes += rec.len();
            expected = last + 1;
            out.push(Change {
                sequence: first,
                batch,
            });
            if bytes >= max_bytes {
                return Ok(out);
            }
        }
    }
    if out.is_empty()
        && sequence
            < inner
                .reads
                .visible_seq
                .load(std::sync::atomic::Ordering::Acquire)
    {
        // Later writes exist, but no WAL holds the next one: retired and removed.
        return Err(Error::ChangesGone {
            wanted: expected,
            oldest: 0,
        });
    }
    Ok(out)
}

/// Removes retired WALs (numbers below `live_from`) beyond `retention` bytes, oldest
/// first, and every empty one (all of them when `retention` is 0).
pub(super) fn prune_retired(inner: &DbInner, live_from: u64, retention: u64) -> Result<()> {
    let env = &inner.env;
    let mut retired: Vec<(u64, u64)> = Vec::new();
    for name in env.list(Tier::Fast)? {
        if let Some(n) = parse_file_number(&name, "log").filter(|&n| n < live_from) {
            let size = std::fs::metadata(env.path(Tier::Fast, &name)).map_or(0, |m| m.len());
            retired.push((n, size));
        }
    }
    retired.sort_unstable();
    let mut kept: u64 = retired.iter().map(|(_, s)| s).sum();
    for (n, size) in retired {
        // The oldest go while the rest pass the retention; an empty WAL feeds nothing and
        // goes whatever the retention.
        if kept > retention || size == 0 {
            env.remove(Tier::Fast, &wal_file_name(n))?;
            kept -= size;
        }
    }
    Ok(())
}

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
//! A reader that follows the store closely (a replica's sender, polling every few
//! milliseconds) would read the WAL files again at every call; [`RecentChanges`] keeps
//! the newest batches in memory too, once asked to ([`crate::Db::keep_recent_changes`]),
//! and serves the feed from them while they cover it. The write path appends to it.
//!
//! Owns the reading of WALs for the feed, the in-memory tail and the pruning of retired
//! WALs; the write path and recovery own the live ones.

use super::DbInner;
use crate::batch::{DecodedBatch, WriteBatch};
use crate::env::{IoCause, Tier};
use crate::error::{Error, Result};
use crate::version::{parse_file_number, wal_file_name};
use crate::wal::LogReader;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

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

    /// Its bytes: the WAL record of the batch (docs/FORMAT.md, "Write batch"), which
    /// carries its first sequence number. [`Change::from_bytes`] reads them back.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut batch = self.batch.clone();
        batch.encode_with_seq(self.sequence).to_vec()
    }

    /// Reads a change from [`Change::to_bytes`]'s form, validated entry by entry (a
    /// damaged one is [`Error::Corruption`] naming `source`).
    pub fn from_bytes(bytes: &[u8], source: &Path) -> Result<Change> {
        let decoded = DecodedBatch::decode(bytes, source, 0)?;
        Ok(Change {
            sequence: decoded.seq,
            batch: decoded.to_batch(),
        })
    }
}

/// A change in its byte form ([`Change::to_bytes`]), as the feed keeps it: what a
/// replica's sender forwards without decoding.
#[derive(Clone, Debug)]
pub struct ChangeBytes {
    /// The sequence number of its first entry.
    pub sequence: u64,
    /// The sequence number of its last entry.
    pub last_sequence: u64,
    /// Its WAL record.
    pub bytes: Arc<[u8]>,
}

/// The newest write batches, in memory, as their WAL records (see the module's doc).
/// Off (capacity 0) until asked for; the oldest go beyond the capacity in bytes.
#[derive(Default)]
pub(crate) struct RecentChanges {
    capacity: AtomicUsize,
    ring: Mutex<Ring>,
}

#[derive(Default)]
struct Ring {
    /// (first sequence, last sequence, record), oldest first, consecutive.
    batches: VecDeque<(u64, u64, Arc<[u8]>)>,
    bytes: usize,
}

impl RecentChanges {
    /// Keeps up to `bytes` of the newest batches from the next write on (0: none).
    pub fn set_capacity(&self, bytes: usize) {
        self.capacity.store(bytes, Ordering::Release);
        let mut ring = self.ring.lock();
        ring.trim(bytes);
    }

    /// Remembers the batch `record` (its WAL record) of sequences `first..=last`. Called by
    /// the write path in commit order, holding the commit lock.
    pub fn push(&self, first: u64, last: u64, record: &[u8]) {
        let capacity = self.capacity.load(Ordering::Relaxed);
        if capacity == 0 {
            return;
        }
        let mut ring = self.ring.lock();
        if ring.batches.back().is_some_and(|b| b.1 + 1 != first) {
            // A gap (the capacity was 0 meanwhile): what is kept must be consecutive.
            ring.batches.clear();
            ring.bytes = 0;
        }
        ring.bytes += record.len();
        ring.batches.push_back((first, last, Arc::from(record)));
        ring.trim(capacity);
    }

    /// The batches after `sequence`, if those kept start at or before the next one.
    pub fn since(&self, sequence: u64, max_bytes: usize) -> Option<Result<Vec<ChangeBytes>>> {
        let ring = self.ring.lock();
        let expected = sequence + 1;
        let (first, _, _) = ring.batches.front()?;
        let (_, last, _) = ring.batches.back()?;
        if *first > expected || *last + 1 < expected {
            return None;
        }
        let start = ring.batches.partition_point(|b| b.1 < expected);
        let mut out = Vec::new();
        let mut bytes = 0;
        for (first, last, record) in ring.batches.range(start..) {
            if *first != expected && out.is_empty() {
                // Another store's batches may be cut elsewhere (a replica groups what it
                // applies): the rest of this one.
                match tail(record, expected, Path::new("the change feed's memory")) {
                    Ok(t) => out.push(t),
                    Err(e) => return Some(Err(e)),
                }
            } else {
                out.push(ChangeBytes {
                    sequence: *first,
                    last_sequence: *last,
                    bytes: record.clone(),
                });
            }
            bytes += record.len();
            if bytes >= max_bytes {
                break;
            }
        }
        Some(Ok(out))
    }
}

impl Ring {
    fn trim(&mut self, capacity: usize) {
        while self.bytes > capacity {
            match self.batches.pop_front() {
                Some((_, _, r)) => self.bytes -= r.len(),
                None => break,
            }
        }
    }
}

/// The entries of the batch `record` from sequence `from` on (`from` inside it), as a
/// change of their own.
fn tail(record: &[u8], from: u64, source: &Path) -> Result<ChangeBytes> {
    let decoded = DecodedBatch::decode(record, source, 0)?;
    let skip = from.saturating_sub(decoded.seq) as usize;
    let mut batch = WriteBatch::new();
    for e in decoded.entries().skip(skip) {
        match (e.kind, e.deadline) {
            (crate::key::ValueKind::Delete, _) => batch.delete(e.key),
            (crate::key::ValueKind::Expiring, Some(d)) => batch.put_expiring(e.key, e.value, d),
            _ => batch.put(e.key, e.value),
        };
    }
    let last = from + (batch.len() as u64).saturating_sub(1);
    Ok(ChangeBytes {
        sequence: from,
        last_sequence: last,
        bytes: Arc::from(batch.encode_with_seq(from)),
    })
}

/// Attempts at a consistent listing when WALs are retired under the reader.
const LIST_ATTEMPTS: usize = 8;

pub(super) fn since(inner: &DbInner, sequence: u64, max_bytes: usize) -> Result<Vec<Change>> {
    let source = Path::new("the change feed");
    since_bytes(inner, sequence, max_bytes)?
        .iter()
        .map(|c| Change::from_bytes(&c.bytes, source))
        .collect()
}

pub(super) fn since_bytes(
    inner: &DbInner,
    sequence: u64,
    max_bytes: usize,
) -> Result<Vec<ChangeBytes>> {
    if let Some(r) = inner.recent_changes.since(sequence, max_bytes) {
        return r;
    }
    for _ in 0..LIST_ATTEMPTS {
        match read(inner, sequence, max_bytes) {
            // A WAL listed but removed before it was read: list again.
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
            r => return r,
        }
    }
    read(inner, sequence, max_bytes)
}

fn read(inner: &DbInner, sequence: u64, max_bytes: usize) -> Result<Vec<ChangeBytes>> {
    let env = &inner.env;
    let mut logs: Vec<u64> = env
        .list(Tier::Fast)?
        .iter()
        .filter_map(|n| parse_file_number(n, "log"))
        .collect();
    logs.sort_unstable();
    let mut out: Vec<ChangeBytes> = Vec::new();
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
            if first > expected {
                return Err(Error::ChangesGone {
                    wanted: expected,
                    oldest: first,
                });
            }
            bytes += rec.len();
            out.push(if first < expected {
                // The rest of a batch cut elsewhere by another store (see `tail`).
                tail(&rec, expected, &path)?
            } else {
                ChangeBytes {
                    sequence: first,
                    last_sequence: last,
                    bytes: Arc::from(&rec[..]),
                }
            });
            expected = last + 1;
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

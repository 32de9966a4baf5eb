//! The keys of the slow tier's records a store serves from memory (`PCKEYS` in a fast
//! directory), read back by the store opened there.
//!
//! A running store serves part of its hot set from memory: the promotion cache's records
//! (read from the slow tier lately, on no fast-disk table) and the KV and KP caches'
//! entries of slow-tier records. A copy of its files has neither, nor does the store
//! itself after a restart: it would meet those records on the slow disk. So the keys are
//! listed: in a checkpoint's copy, at a clean close (taken before the close promotes the
//! promotion cache's records, some of which retention may move down again), and every
//! `PromotionOptions::warm_list_interval` while reads happen (the background threads,
//! [`save_due`]), so a store reopened after a kill -9 finds a list at most that old. At
//! every open a thread of its own reads each listed key once (bringing the records into
//! the store's caches, as the source's reads did); no list is written until it is done,
//! so a close while it reads keeps the list whole. The keys are hints: a damaged or
//! missing file only loses them.
//!
//! Owns the file's format (docs/FORMAT.md, "Files in a store"), when it is written and the
//! warming thread; the caches are the promotion path's and `cache`'s.

use super::DbInner;
use crate::coding::{get_length_prefixed, put_length_prefixed};
use crate::env::Tier;
use crate::error::{Error, Result};
use crate::options::ReadOptions;
use parking_lot::Mutex;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// The file's name in a store's fast directory, and the name it is written under first.
pub(crate) const FILE: &str = "PCKEYS";
pub(crate) const FILE_TMP: &str = "PCKEYS.tmp";

/// When the store last listed its keys and its gets then; whether the warming thread
/// still reads the list found at open, and how many keys it read.
pub(crate) struct LastSave {
    last: Mutex<(Instant, u64)>,
    warming: AtomicBool,
    keys_read: AtomicU64,
}

impl LastSave {
    pub(crate) fn now() -> LastSave {
        LastSave {
            last: Mutex::new((Instant::now(), 0)),
            warming: AtomicBool::new(false),
            keys_read: AtomicU64::new(0),
        }
    }

    /// The list found at open is still being read.
    pub(crate) fn warming(&self) -> bool {
        self.warming.load(Ordering::Acquire)
    }

    /// Keys of that list read so far.
    pub(crate) fn keys_read(&self) -> u64 {
        self.keys_read.load(Ordering::Relaxed)
    }
}

/// The keys of the slow tier's records `inner` serves from memory: its promotion cache's
/// and its point caches' entries found below the fast levels, sorted, once each. None
/// without promotion (nothing would read them back).
pub(super) fn served_from_memory(inner: &DbInner) -> Vec<bytes::Bytes> {
    if inner.hot.tracker.is_none() {
        return Vec::new();
    }
    let mut keys = inner.hot.pc.keys();
    if let Some(cache) = inner.tables.cache() {
        keys.extend(cache.point_keys_below(inner.layout.last_fast_level));
    }
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// Writes `keys` as `dir/PCKEYS` (each length-prefixed): written under a temporary name,
/// synced, renamed over the last list.
pub(super) fn write(dir: &Path, keys: &[bytes::Bytes]) -> Result<()> {
    let mut out = Vec::new();
    for k in keys {
        put_length_prefixed(&mut out, k);
    }
    let (tmp, path) = (dir.join(FILE_TMP), dir.join(FILE));
    std::fs::write(&tmp, &out)
        .and_then(|()| std::fs::File::open(&tmp)?.sync_all())
        .map_err(|e| Error::io(&tmp, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))
}

/// Lists the keys served from memory now in the store's own directory ([`save_due`]).
pub(super) fn save(inner: &DbInner) -> Result<()> {
    save_keys(inner, served_from_memory(inner))
}

/// Lists `keys` in the store's own directory, replacing the last list (none when `keys`
/// is empty). Not while the list found at open is still being read: it stays.
pub(super) fn save_keys(inner: &DbInner, keys: Vec<bytes::Bytes>) -> Result<()> {
    if inner.hot.tracker.is_none() || inner.hot.last_listed.warming() {
        return Ok(());
    }
    let dir = inner.env.dir(Tier::Fast);
    if keys.is_empty() {
        return match std::fs::remove_file(dir.join(FILE)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(dir.join(FILE), e)),
            _ => Ok(()),
        };
    }
    write(dir, &keys)
}

/// True (once, for one caller) when `warm_list_interval` passed since the last list and
/// the store served gets since: the background thread that asks then calls [`save`].
pub(super) fn save_due(inner: &DbInner) -> bool {
    let listed = &inner.hot.last_listed;
    if inner.hot.tracker.is_none() || listed.warming() {
        return false;
    }
    let Some(mut last) = listed.last.try_lock() else {
        return false;
    };
    let gets = inner.counters.gets.load(Ordering::Relaxed);
    if last.0.elapsed() < inner.opts.promotion.warm_list_interval || gets == last.1 {
        return false;
    }
    *last = (Instant::now(), gets);
    true
}

/// The keys listed in the store at `dir` (empty when none or damaged).
fn read(dir: &Path) -> Vec<Vec<u8>> {
    let path = dir.join(FILE);
    let Ok(data) = std::fs::read(&path) else {
        return Vec::new();
    };
    let mut keys = Vec::new();
    let mut rest = &data[..];
    while !rest.is_empty() {
        match get_length_prefixed(rest) {
            Some((k, n)) => {
                keys.push(k.to_vec());
                rest = &rest[n..];
            }
            None => {
                tracing::warn!(
                    "{}: damaged after {} keys: the rest is skipped",
                    path.display(),
                    keys.len()
                );
                break;
            }
        }
    }
    keys
}

/// Reads `keys` once each, one at a time, stopping at shutdown; then ends the warming
/// unless stopped by it. (Sixteen at a time read 25K keys in 0.4-0.7 s instead of 1.0-1.1
/// s, but the first 10% of reads after a reopen lost 3 more points to the slow disk: the
/// keys a close promoted were read from the fast disk before the open's first compaction
/// moved the ones RALT does not call hot down again, docs/bench/replication.md.)
fn warm(inner: &DbInner, keys: Vec<Vec<u8>>) {
    let listed = &inner.hot.last_listed;
    let ropts = ReadOptions::new();
    for key in keys {
        if inner.signals.shutting_down.load(Ordering::Acquire) {
            return;
        }
        // A key deleted since reads as absent; a failed read loses a hint.
        let _ = inner.get(&key, &ropts);
        listed.keys_read.fetch_add(1, Ordering::Relaxed);
    }
    listed.warming.store(false, Ordering::Release);
}

/// When the store holds a list, starts the thread that reads its keys (stopping at
/// shutdown).
pub(super) fn start_warming(inner: &Arc<DbInner>) -> Result<Option<std::thread::JoinHandle<()>>> {
    let dir = inner.env.dir(Tier::Fast).to_path_buf();
    if inner.hot.tracker.is_none() || !dir.join(FILE).exists() {
        return Ok(None);
    }
    let listed = &inner.hot.last_listed;
    listed.warming.store(true, Ordering::Release);
    let spawned = std::thread::Builder::new()
        .name("tierkv-warm".into())
        .spawn({
            let inner = inner.clone();
            move || warm(&inner, read(&dir))
        });
    if spawned.is_err() {
        listed.warming.store(false, Ordering::Release);
    }
    spawned
        .map(Some)
        .map_err(|e| Error::io("<spawning the cache-warming thread>", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Invariant: the keys read back as written; a damaged tail loses only the keys after
    /// the damage.
    #[test]
    fn keys_round_trip_and_a_damaged_tail_keeps_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let keys: Vec<bytes::Bytes> = vec!["a".into(), "".into(), "ccc".into()];
        write(dir.path(), &keys).unwrap();
        let back = read(dir.path());
        assert_eq!(back, vec![b"a".to_vec(), vec![], b"ccc".to_vec()]);
        let path = dir.path().join(FILE);
        let mut data = std::fs::read(&path).unwrap();
        data.truncate(data.len() - 1);
        std::fs::write(&path, data).unwrap();
        assert_eq!(read(dir.path()), vec![b"a".to_vec(), vec![]]);
        assert!(read(&dir.path().join("nowhere")).is_empty());
    }
}

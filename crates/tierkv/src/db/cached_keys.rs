//! The keys of the slow tier's records a store serves from memory, carried by a checkpoint
//! (`PCKEYS` in the copy's fast directory), read once by the store opened from it.
//!
//! A running store serves part of its hot set from memory: the promotion cache's records
//! (read from the slow tier lately, on no fast-disk table) and the KV and KP caches'
//! entries of slow-tier records. A copy of its files has neither: a store restored from a
//! checkpoint, or a replica given one, would meet those records on the slow disk. The
//! checkpoint lists their keys; the store opened from it
//! reads each once on a thread of its own (so the reads bring the records into its own
//! cache, as the source's reads did), then removes the file. The keys are hints: a damaged
//! or missing file only loses them.
//!
//! Owns the file's format (docs/FORMAT.md, "Files in a store") and the warming thread;
//! the cache is the promotion path's.

use super::DbInner;
use crate::coding::{get_length_prefixed, put_length_prefixed};
use crate::error::{Error, Result};
use crate::options::ReadOptions;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The file's name in a store's fast directory.
pub(crate) const FILE: &str = "PCKEYS";

/// Writes `keys` as `dir/PCKEYS` (each length-prefixed, synced).
pub(super) fn write(dir: &Path, keys: &[bytes::Bytes]) -> Result<()> {
    let mut out = Vec::new();
    for k in keys {
        put_length_prefixed(&mut out, k);
    }
    let path = dir.join(FILE);
    std::fs::write(&path, &out)
        .and_then(|()| std::fs::File::open(&path)?.sync_all())
        .map_err(|e| Error::io(&path, e))
}

/// The keys a checkpoint left in the store at `dir` (empty when none or damaged).
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

/// When the store holds a checkpoint's `PCKEYS`, starts the thread that reads those keys
/// (stopping at shutdown) and then removes the file.
pub(super) fn start_warming(inner: &Arc<DbInner>) -> Result<Option<std::thread::JoinHandle<()>>> {
    let dir = inner.env.dir(crate::env::Tier::Fast).to_path_buf();
    if inner.hot.tracker.is_none() || !dir.join(FILE).exists() {
        return Ok(None);
    }
    let inner = inner.clone();
    std::thread::Builder::new()
        .name("tierkv-warm".into())
        .spawn(move || {
            let ropts = ReadOptions::new();
            for key in read(&dir) {
                if inner.signals.shutting_down.load(Ordering::Acquire) {
                    return;
                }
                // A key deleted since reads as absent; a failed read loses a hint.
                let _ = inner.get(&key, &ropts);
            }
            let _ = std::fs::remove_file(dir.join(FILE));
        })
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

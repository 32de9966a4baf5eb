//! The access feed: the keys this store's reads touched lately, for a replica that
//! mirrors its hotness ([`crate::Db::watch_accesses`], [`crate::Db::take_accesses`]).
//!
//! A replica receives every write, but its reads are not the primary's: without this,
//! its tracker would know nothing of what the primary's clients read, and after a
//! failover the new primary would relearn its hot set from the slow disk. The feed holds
//! the distinct keys the tracker was told of since it was last taken (bounded: past
//! [`MAX_KEYS`] a key is dropped, which only loses a hint), and nothing while off.
//!
//! Owns that set only; the tracker and the read path are untouched by it.

use parking_lot::Mutex;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};

/// Most distinct keys held between two takes.
pub const MAX_KEYS: usize = 1 << 16;

/// Keys read since the last take (see the module's doc).
#[derive(Default)]
pub struct AccessFeed {
    on: AtomicBool,
    keys: Mutex<HashSet<Vec<u8>>>,
}

impl AccessFeed {
    /// Starts (or stops, dropping what it holds) collecting.
    pub fn set_on(&self, on: bool) {
        self.on.store(on, Ordering::Release);
        if !on {
            self.keys.lock().clear();
        }
    }

    /// Notes a read of `key` (a no-op while off).
    pub fn note(&self, key: &[u8]) {
        if !self.on.load(Ordering::Relaxed) {
            return;
        }
        let mut keys = self.keys.lock();
        if keys.len() < MAX_KEYS && !keys.contains(key) {
            keys.insert(key.to_vec());
        }
    }

    /// The keys noted since the last call, sorted.
    pub fn take(&self) -> Vec<Vec<u8>> {
        let mut keys: Vec<Vec<u8>> = std::mem::take(&mut *self.keys.lock()).into_iter().collect();
        keys.sort_unstable();
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Invariant: the feed holds each key read once, only while on, at most MAX_KEYS.
    #[test]
    fn distinct_keys_while_on_and_bounded() {
        let feed = AccessFeed::default();
        feed.note(b"before");
        feed.set_on(true);
        feed.note(b"b");
        feed.note(b"a");
        feed.note(b"b");
        assert_eq!(feed.take(), vec![b"a".to_vec(), b"b".to_vec()]);
        assert!(feed.take().is_empty());
        for i in 0..MAX_KEYS + 10 {
            feed.note(&(i as u64).to_be_bytes());
        }
        assert_eq!(feed.take().len(), MAX_KEYS);
        feed.note(b"x");
        feed.set_on(false);
        feed.note(b"y");
        assert!(feed.take().is_empty());
    }
}

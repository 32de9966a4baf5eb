//! The store's `LOCK` file: one open store per directory, across processes and within
//! one. It owns acquiring the lock and releasing it; it must not touch any other file.
//!
//! `flock` locks belong to the open file description, not to the fd: a child process
//! that another thread forks holds a copy of every fd until it execs, so merely closing
//! ours could leave the lock held for a moment after `Db::close` returned, and an
//! immediate reopen would fail with `Locked`. Dropping a [`StoreLock`] therefore unlocks
//! the description explicitly (`LOCK_UN` applies to every copy) before closing it.

use crate::error::{Error, Result};
use std::fs::{File, OpenOptions, TryLockError};
use std::path::Path;

/// The held lock of one store; released on drop.
pub(crate) struct StoreLock {
    file: File,
}

impl StoreLock {
    /// Takes the lock at `lock_path` (creating the file) for the store at `store`, or
    /// fails with [`Error::Locked`] when another open store holds it.
    pub(crate) fn acquire(store: &Path, lock_path: &Path) -> Result<Self> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(lock_path)
            .map_err(|e| Error::io(lock_path, e))?;
        match file.try_lock() {
            Ok(()) => Ok(Self { file }),
            Err(TryLockError::WouldBlock) => Err(Error::Locked(store.to_path_buf())),
            Err(TryLockError::Error(e)) => Err(Error::io(lock_path, e)),
        }
    }
}

impl Drop for StoreLock {
    fn drop(&mut self) {
        if let Err(e) = self.file.unlock() {
            tracing::warn!("could not release the store lock: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Invariant: a closed store can be reopened at once, even while another copy of the
    /// lock file's descriptor (a child forked before its exec) is still open.
    #[test]
    fn released_lock_is_free_although_a_copy_of_the_fd_lives_on() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("LOCK");
        let lock = StoreLock::acquire(dir.path(), &path).unwrap();
        let inherited = lock.file.try_clone().unwrap();
        assert!(matches!(
            StoreLock::acquire(dir.path(), &path),
            Err(Error::Locked(_))
        ));
        drop(lock);
        let again = StoreLock::acquire(dir.path(), &path);
        assert!(
            again.is_ok(),
            "still locked after release: {:?}",
            again.err()
        );
        drop(inherited);
    }
}

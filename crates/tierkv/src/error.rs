//! The one error type of tierkv. Every fallible operation returns [`Result`].
//!
//! Errors carry the context a user needs to act on them: the file and offset of
//! a corruption, the size and limit of an oversized key, the tier that is full.

use std::path::PathBuf;
use std::sync::Arc;

/// Result alias used throughout tierkv.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in tierkv.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An operating-system I/O error on a named file or directory.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Stored data failed a checksum or structural check (invariant 3 of docs/DESIGN.md).
    #[error("corruption in {path} at offset {offset}: {reason}")]
    Corruption {
        /// The file that holds the bad bytes.
        path: PathBuf,
        /// Byte offset of the bad record or block inside the file.
        offset: u64,
        /// What check failed.
        reason: String,
    },
    /// A caller passed an argument or option that cannot be honoured.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A key longer than the configured limit.
    #[error("key of {size} bytes exceeds the limit of {limit} bytes")]
    KeyTooLarge {
        /// Size of the offending key.
        size: usize,
        /// Configured limit (`Options::max_key_size`).
        limit: usize,
    },
    /// A value longer than the configured limit.
    #[error("value of {size} bytes exceeds the limit of {limit} bytes")]
    ValueTooLarge {
        /// Size of the offending value.
        size: usize,
        /// Configured limit (`Options::max_value_size`).
        limit: usize,
    },
    /// Both tiers are full: the write cannot be placed anywhere.
    #[error("no space left: {0}")]
    NoSpace(String),
    /// No store exists at the path and `Options::create_if_missing` is off.
    #[error("no tierkv store at {0}")]
    NoStore(PathBuf),
    /// A store (or slow tier) path names something that is not a directory.
    #[error("{0} is not a directory")]
    NotADirectory(PathBuf),
    /// The store records a slow tier (its `TIERS` file) whose directory does not exist
    /// (an unmounted disk, a moved directory).
    #[error("slow-tier directory {dir} of the store at {store} not found")]
    SlowTierNotFound {
        /// The recorded slow-tier directory.
        dir: PathBuf,
        /// The store's (fast tier) directory.
        store: PathBuf,
    },
    /// Creating a store in a directory that already holds other files.
    #[error("directory {0} is not empty and holds no tierkv store")]
    NotAStore(PathBuf),
    /// Another process (or another `Db` in this process) holds the store's lock.
    #[error("store at {0} is in use by another process")]
    Locked(PathBuf),
    /// A background flush or compaction failed; the store refuses writes until reopened.
    #[error("store is read-only after a background error: {0}")]
    Background(Arc<Error>),
    /// A background thread panicked (a bug in tierkv): the store stops its background
    /// work and refuses writes, as after a background error, instead of leaving waiters
    /// blocked on work that never comes.
    #[error("a background thread panicked: {0}")]
    BackgroundPanic(String),
    /// The store is shutting down.
    #[error("store is closed")]
    Closed,
    /// A call that must not wait ([`crate::Db::get_entry_in_memory`],
    /// [`crate::Db::write_now`]) would have had to, for the named reason. Nothing was read
    /// or written: the waiting call ([`crate::Db::get_entry_opt`], [`crate::Db::write`])
    /// does the same work.
    #[error("would block: {0}")]
    WouldBlock(&'static str),
    /// [`crate::Db::changes_since`]: the batch starting at `wanted` is no longer in a WAL
    /// the store keeps (the oldest kept starts at `oldest`; 0: none kept). A replica must
    /// start again from a checkpoint (or raise `Options::wal_retention_bytes`).
    #[error("changes from sequence {wanted} are no longer kept (oldest kept: {oldest})")]
    ChangesGone {
        /// The first sequence number asked for.
        wanted: u64,
        /// The first sequence number of the oldest batch kept.
        oldest: u64,
    },
}

impl Error {
    /// Wraps an `io::Error` with the path it happened on.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// Builds a corruption error.
    pub fn corruption(path: impl Into<PathBuf>, offset: u64, reason: impl Into<String>) -> Self {
        Error::Corruption {
            path: path.into(),
            offset,
            reason: reason.into(),
        }
    }

    /// True for a corruption error (directly or behind a background error).
    pub fn is_corruption(&self) -> bool {
        match self {
            Error::Corruption { .. } => true,
            Error::Background(inner) => inner.is_corruption(),
            _ => false,
        }
    }

    /// True when the error means the disk is full (ENOSPC or [`Error::NoSpace`]).
    pub fn is_no_space(&self) -> bool {
        match self {
            Error::NoSpace(_) => true,
            Error::Io { source, .. } => source.raw_os_error() == Some(libc::ENOSPC),
            Error::Background(inner) => inner.is_no_space(),
            _ => false,
        }
    }
}

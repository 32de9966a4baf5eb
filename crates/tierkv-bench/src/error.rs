//! The benchmark's error type: bad flags and files are reported as clear messages, never
//! panics.

use std::path::PathBuf;

/// Everything that can stop a benchmark run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A flag or a combination of flags is invalid.
    #[error("{0}")]
    InvalidArgument(String),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// A trace or phase file has a malformed line.
    #[error("{path}:{line}: {msg}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        msg: String,
    },
    /// The engine under test failed.
    #[error("{system}: {source}")]
    Engine {
        /// The system being run.
        system: String,
        /// The engine's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Writing a chart failed.
    #[error("chart {path}: {msg}")]
    Chart {
        /// The chart file.
        path: PathBuf,
        /// What went wrong.
        msg: String,
    },
}

impl BenchError {
    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        BenchError::Io {
            path: path.into(),
            source,
        }
    }

    /// Wraps an engine error with the system it came from.
    pub fn engine(
        system: &str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        BenchError::Engine {
            system: system.to_string(),
            source: source.into(),
        }
    }
}

/// Result with [`BenchError`].
pub type Result<T> = std::result::Result<T, BenchError>;

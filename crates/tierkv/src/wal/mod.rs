//! The log format shared by the write-ahead log and the manifest: records split into
//! CRC-framed fragments inside 32 KiB blocks (LevelDB's log format, documented in
//! docs/FORMAT.md). This module owns framing only; what a record means (a write batch, a
//! version edit) belongs to its user.

pub use crate::options::RecoveryMode;
mod reader;
mod writer;

pub use reader::LogReader;
pub use writer::LogWriter;

/// Size of a log block. Fragments never cross a block boundary.
pub const BLOCK_SIZE: usize = 32 * 1024;
/// Fragment header: masked crc32c (4), payload length (2), fragment type (1).
pub const HEADER_SIZE: usize = 7;

/// Fragment types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum FragmentType {
    /// A whole record in one fragment.
    Full = 1,
    /// The first fragment of a split record.
    First = 2,
    /// A fragment strictly inside a split record.
    Middle = 3,
    /// The last fragment of a split record.
    Last = 4,
}

impl FragmentType {
    fn from_u8(b: u8) -> Option<Self> {
        Some(match b {
            1 => FragmentType::Full,
            2 => FragmentType::First,
            3 => FragmentType::Middle,
            4 => FragmentType::Last,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests;

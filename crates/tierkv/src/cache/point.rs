//! Point entries: the KV cache (user key -> value) and the KP cache (user key -> pointer to
//! the data block holding the key's newest version, or the value itself when it is no
//! larger than a pointer). Owns the entry layout, its memory charge and its benefit `b`;
//! which list an entry is on and when it moves is the shard's business.

use super::elru::Entry;
use crate::sst::format::BlockHandle;

/// A pointer's size: file number, block offset and block size (the paper's 24 B). Values
/// up to this size are kept in the KP entry itself: they save the block read at no cost.
pub const POINTER_SIZE: usize = 24;

/// Where the newest version of a key outside the memtables lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockPtr {
    /// Table file number.
    pub file: u64,
    /// Level of that file when the pointer was taken.
    pub level: u8,
    /// The data block.
    pub handle: BlockHandle,
}

/// What a point entry holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// KV cache: the value follows the key in `data`.
    Kv,
    /// KP cache with the value inline (no larger than a pointer).
    KpInline,
    /// KP cache with a pointer.
    KpPtr(BlockPtr),
}

/// One KV or KP entry.
pub(crate) struct PointEntry {
    /// The user key, then the value for `Kv` and `KpInline`.
    pub data: Box<[u8]>,
    pub klen: u32,
    pub hash: u64,
    /// Level the key was found at (drives the benefit).
    pub level: u8,
    pub kind: Kind,
}

/// Memory of an entry beyond its key and value bytes: the slab node, the index slot and
/// the allocation's header.
pub(crate) const POINT_OVERHEAD: usize =
    std::mem::size_of::<Option<super::elru::Node<PointEntry>>>() + 8 + 16;

impl Entry for PointEntry {
    fn hash(&self) -> u64 {
        self.hash
    }
}

impl PointEntry {
    pub fn new(key: &[u8], value: Option<&[u8]>, hash: u64, level: u8, kind: Kind) -> Self {
        let mut data = Vec::with_capacity(key.len() + value.map_or(0, |v| v.len()));
        data.extend_from_slice(key);
        if let Some(v) = value {
            data.extend_from_slice(v);
        }
        PointEntry {
            data: data.into_boxed_slice(),
            klen: key.len() as u32,
            hash,
            level,
            kind,
        }
    }

    pub fn key(&self) -> &[u8] {
        &self.data[..self.klen as usize]
    }

    /// The value, for entries that hold one.
    pub fn value(&self) -> Option<&[u8]> {
        match self.kind {
            Kind::KpPtr(_) => None,
            _ => Some(&self.data[self.klen as usize..]),
        }
    }

    /// Bytes charged to the budget.
    pub fn charge(&self) -> u32 {
        (self.data.len() + POINT_OVERHEAD).min(u32::MAX as usize) as u32
    }
}

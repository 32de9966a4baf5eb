//! The table file's framing: the per-block trailer (compression type and checksum), the
//! footer and its fixed-width block handles, and reading one block back with its checks. See
//! docs/FORMAT.md, "Table files". Owns framing only; what is inside a block belongs to `block`.

pub use super::block::BlockHandle;
use super::block::{Block, ValueCoding};
use super::Compression;
use crate::coding::{decode_fixed32, decode_fixed64, masked_crc, put_fixed32, put_fixed64};
use crate::env::{IoCause, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};
use bytes::Bytes;

/// Bytes after every block: `compression: u8 | masked_crc32c: u32` (over contents + type).
pub const BLOCK_TRAILER_LEN: usize = 5;
/// "tierkvT1" read as a little-endian u64.
pub const TABLE_MAGIC: u64 = u64::from_le_bytes(*b"tierkvT1");
/// Table format version written now: 3, whose index is keyed by user-key separators
/// (see [`Footer::user_key_index`], since 2) and stores its handles delta-coded (see
/// [`Footer::index_coding`]).
pub const FORMAT_VERSION: u32 = 3;
/// The oldest version still read: 1, whose index keys are the blocks' last internal keys.
pub const MIN_FORMAT_VERSION: u32 = 1;
/// Fixed footer size: three handles (16 bytes each), version, checksum, magic.
pub const FOOTER_LEN: usize = 3 * 16 + 4 + 4 + 8;

const COMPRESSION_NONE: u8 = 0;
const COMPRESSION_LZ4: u8 = 1;

/// The footer's fixed-width handles.
impl BlockHandle {
    fn encode_fixed(&self, dst: &mut Vec<u8>) {
        put_fixed64(dst, self.offset);
        put_fixed64(dst, self.size);
    }

    fn decode_fixed(src: &[u8]) -> BlockHandle {
        BlockHandle {
            offset: decode_fixed64(src),
            size: decode_fixed64(&src[8..]),
        }
    }
}

/// The fixed-size end of every table: where the filter, properties and index blocks are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Footer {
    /// The bloom filter block (size 0: no filter).
    pub filter: BlockHandle,
    /// The properties block.
    pub properties: BlockHandle,
    /// The index block.
    pub index: BlockHandle,
    /// The format version ([`MIN_FORMAT_VERSION`]..=[`FORMAT_VERSION`]).
    pub version: u32,
}

impl Footer {
    /// Whether the index is keyed by user keys (version 2): entry `i` holds a separator
    /// `S` with `last user key of block i <= S < first user key of block i + 1`, compared
    /// as bytes, and no user key has versions in two data blocks. Version 1 keys each entry
    /// by its block's last internal key.
    pub fn user_key_index(&self) -> bool {
        self.version >= 2
    }

    /// How the index block stores its handles: delta-coded from version 3
    /// ([`ValueCoding::DeltaHandles`]), each whole with its length before that.
    pub fn index_coding(&self) -> ValueCoding {
        if self.version >= 3 {
            ValueCoding::DeltaHandles
        } else {
            ValueCoding::Plain
        }
    }

    /// Encodes the footer (exactly [`FOOTER_LEN`] bytes).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(FOOTER_LEN);
        self.filter.encode_fixed(&mut out);
        self.properties.encode_fixed(&mut out);
        self.index.encode_fixed(&mut out);
        put_fixed32(&mut out, self.version);
        let crc = masked_crc(&out);
        put_fixed32(&mut out, crc);
        put_fixed64(&mut out, TABLE_MAGIC);
        out
    }

    /// Decodes and checks a footer read from the end of `file`.
    pub fn decode(src: &[u8], file: &RandomAccessFile) -> Result<Footer> {
        let offset = file.size().saturating_sub(FOOTER_LEN as u64);
        let bad = |reason: &str| Error::corruption(file.path(), offset, reason);
        if src.len() != FOOTER_LEN {
            return Err(bad("footer has the wrong length"));
        }
        if decode_fixed64(&src[FOOTER_LEN - 8..]) != TABLE_MAGIC {
            return Err(bad("bad table magic: not a tierkv table"));
        }
        let body = &src[..FOOTER_LEN - 12];
        if decode_fixed32(&src[FOOTER_LEN - 12..]) != masked_crc(body) {
            return Err(bad("footer checksum mismatch"));
        }
        let version = decode_fixed32(&src[48..]);
        if !(MIN_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(bad(&format!("unsupported table format version {version}")));
        }
        let footer = Footer {
            filter: BlockHandle::decode_fixed(&src[0..]),
            properties: BlockHandle::decode_fixed(&src[16..]),
            index: BlockHandle::decode_fixed(&src[32..]),
            version,
        };
        for h in [footer.filter, footer.properties, footer.index] {
            let end = h
                .offset
                .checked_add(h.size)
                .and_then(|e| e.checked_add(BLOCK_TRAILER_LEN as u64));
            if end.is_none_or(|end| end > offset) {
                return Err(bad("footer points past the end of the data"));
            }
        }
        Ok(footer)
    }
}

/// Compresses `raw` if that saves at least 1/8, and appends the trailer. Returns the bytes
/// to write (contents + trailer) and the contents' length.
pub fn frame_block(raw: &[u8], compression: Compression) -> (Vec<u8>, usize) {
    let (mut out, kind) = match compression {
        Compression::Lz4 => {
            let c = lz4_flex::compress_prepend_size(raw);
            if c.len() < raw.len() - raw.len() / 8 {
                (c, COMPRESSION_LZ4)
            } else {
                (raw.to_vec(), COMPRESSION_NONE)
            }
        }
        Compression::None => (raw.to_vec(), COMPRESSION_NONE),
    };
    let len = out.len();
    out.push(kind);
    let crc = masked_crc(&out);
    put_fixed32(&mut out, crc);
    (out, len)
}

/// Checks a framed block (contents + trailer, as read from `offset` of `file`) and returns
/// its decompressed contents.
pub fn unframe_block(framed: &[u8], file: &RandomAccessFile, offset: u64) -> Result<Bytes> {
    let bad = |reason: &str| Error::corruption(file.path(), offset, reason);
    if framed.len() < BLOCK_TRAILER_LEN {
        return Err(bad("block shorter than its trailer"));
    }
    let n = framed.len() - BLOCK_TRAILER_LEN;
    let stored = decode_fixed32(&framed[n + 1..]);
    if stored != masked_crc(&framed[..n + 1]) {
        return Err(bad("block checksum mismatch"));
    }
    match framed[n] {
        COMPRESSION_NONE => Ok(Bytes::copy_from_slice(&framed[..n])),
        COMPRESSION_LZ4 => {
            // The decoder allocates the prepended size up front: a damaged or forged size
            // must not make one small block ask for gigabytes. LZ4 expands at most 255
            // times (one length byte per 255 bytes of match).
            let claimed = framed[..n].get(..4).map_or(0, decode_fixed32) as usize;
            if claimed > n.saturating_mul(255).saturating_add(64) {
                return Err(bad(&format!(
                    "LZ4 block of {n} bytes claims {claimed} bytes uncompressed"
                )));
            }
            lz4_flex::decompress_size_prepended(&framed[..n])
                .map(Bytes::from)
                .map_err(|e| bad(&format!("LZ4 block does not decompress: {e}")))
        }
        t => Err(bad(&format!("unknown compression type {t}"))),
    }
}

/// Reads the raw contents of the block at `h` (checksum verified, decompressed).
pub fn read_block_contents(
    file: &RandomAccessFile,
    h: BlockHandle,
    cause: IoCause,
) -> Result<Bytes> {
    let len = usize::try_from(h.size)
        .ok()
        .and_then(|s| s.checked_add(BLOCK_TRAILER_LEN))
        .ok_or_else(|| Error::corruption(file.path(), h.offset, "block handle size overflows"))?;
    let framed = file.read_at(h.offset, len, cause)?;
    unframe_block(&framed, file, h.offset)
}

/// Parses verified contents as a block of plain values (a data block).
pub fn parse_block(contents: Bytes, file: &RandomAccessFile, offset: u64) -> Result<Block> {
    parse_block_as(contents, ValueCoding::Plain, file, offset)
}

/// Parses verified contents as a block whose values are stored as `coding` says (an index).
pub fn parse_block_as(
    contents: Bytes,
    coding: ValueCoding,
    file: &RandomAccessFile,
    offset: u64,
) -> Result<Block> {
    Block::with_coding(contents, coding)
        .map_err(|reason| Error::corruption(file.path(), offset, reason))
}

/// A short user key `S` with `a <= S < b` (`a < b` bytewise), for an index entry between a
/// block ending with `a` and one starting with `b`: the common prefix, then one byte more
/// than `a`'s where that stays below `b` (LevelDB's `FindShortestSeparator`, plus the case
/// where the first differing bytes are adjacent). Falls back to `a` itself.
pub fn shortest_separator(a: &[u8], b: &[u8]) -> Vec<u8> {
    let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    if common < a.len() && common < b.len() {
        // a[common] < b[common] since a < b.
        if a[common] < 0xff && a[common] + 1 < b[common] {
            let mut s = a[..=common].to_vec();
            s[common] += 1;
            return s;
        }
        // Keep a's byte there (still below b's), then raise the first byte after it that
        // can be raised: the result exceeds a and still sorts below b.
        if let Some(j) = (common + 1..a.len()).find(|&j| a[j] < 0xff) {
            let mut s = a[..=j].to_vec();
            s[j] += 1;
            return s;
        }
    }
    a.to_vec()
}

/// Frames `raw` (compression and trailer), appends it at `offset` of `file` and moves
/// `offset` past it: how every table writer, sorted or semi-sorted, writes a block.
pub(crate) fn append_block(
    file: &mut WritableFile,
    offset: &mut u64,
    raw: &[u8],
    compression: Compression,
) -> Result<BlockHandle> {
    let (framed, len) = frame_block(raw, compression);
    let handle = BlockHandle {
        offset: *offset,
        size: len as u64,
    };
    file.append(&framed)?;
    *offset += framed.len() as u64;
    Ok(handle)
}

#[cfg(test)]
mod tests {
    use super::shortest_separator;

    /// Index separators must lie in `[a, b)`: a seek for any key of the next block must
    /// not stop at this block's entry, nor skip a key of this block.
    #[test]
    fn separators_lie_between_their_keys_and_are_short() {
        let cases: &[(&[u8], &[u8], &[u8])] = &[
            (b"abc1234", b"abe0", b"abd"),
            (b"abc1234", b"abd0", b"abc2"),
            (b"ab\xff\xff", b"ac", b"ab\xff\xff"),
            (b"abc", b"abcd", b"abc"),
            (b"", b"a", b""),
            (b"\x10\x20", b"\x90", b"\x11"),
        ];
        for (a, b, want) in cases {
            assert_eq!(&shortest_separator(a, b)[..], *want, "{a:?} {b:?}");
        }
        let mut x = 0x1234_5678_9abc_def0u64;
        for _ in 0..10_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let y = x.wrapping_add(x >> 40);
            let (a, b) = (x.min(y).to_be_bytes(), x.max(y).to_be_bytes());
            if a == b {
                continue;
            }
            let s = shortest_separator(&a, &b);
            assert!(a.as_slice() <= s.as_slice() && s.as_slice() < b.as_slice());
        }
    }
}

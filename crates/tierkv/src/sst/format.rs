//! The table file's framing: block handles, the per-block trailer (compression type and
//! checksum), the footer, and reading one block back with its checks. See docs/FORMAT.md,
//! "Table files". Owns framing only; what is inside a block belongs to `block`.

use super::block::Block;
use super::Compression;
use crate::coding::{decode_fixed32, decode_fixed64, get_varint64, masked_crc, put_fixed32};
use crate::coding::{put_fixed64, put_varint64};
use crate::env::{IoCause, RandomAccessFile};
use crate::{Error, Result};
use bytes::Bytes;

/// Bytes after every block: `compression: u8 | masked_crc32c: u32` (over contents + type).
pub const BLOCK_TRAILER_LEN: usize = 5;
/// "tierkvT1" read as a little-endian u64.
pub const TABLE_MAGIC: u64 = u64::from_le_bytes(*b"tierkvT1");
/// Current table format version.
pub const FORMAT_VERSION: u32 = 1;
/// Fixed footer size: three handles (16 bytes each), version, checksum, magic.
pub const FOOTER_LEN: usize = 3 * 16 + 4 + 4 + 8;

const COMPRESSION_NONE: u8 = 0;
const COMPRESSION_LZ4: u8 = 1;

/// Where a block lies in the file (its contents, without the trailer).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockHandle {
    /// Offset of the first byte.
    pub offset: u64,
    /// Length of the contents.
    pub size: u64,
}

impl BlockHandle {
    /// Appends the varint encoding (used in index entries).
    pub fn encode_varint(&self, dst: &mut Vec<u8>) {
        put_varint64(dst, self.offset);
        put_varint64(dst, self.size);
    }

    /// Decodes the varint encoding; `None` if malformed or followed by garbage.
    pub fn decode_varint(src: &[u8]) -> Option<BlockHandle> {
        let (offset, n) = get_varint64(src)?;
        let (size, m) = get_varint64(&src[n..])?;
        (n + m == src.len()).then_some(BlockHandle { offset, size })
    }

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
}

impl Footer {
    /// Encodes the footer (exactly [`FOOTER_LEN`] bytes).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(FOOTER_LEN);
        self.filter.encode_fixed(&mut out);
        self.properties.encode_fixed(&mut out);
        self.index.encode_fixed(&mut out);
        put_fixed32(&mut out, FORMAT_VERSION);
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
        if version != FORMAT_VERSION {
            return Err(bad(&format!("unsupported table format version {version}")));
        }
        let footer = Footer {
            filter: BlockHandle::decode_fixed(&src[0..]),
            properties: BlockHandle::decode_fixed(&src[16..]),
            index: BlockHandle::decode_fixed(&src[32..]),
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

/// Parses verified contents as a block.
pub fn parse_block(contents: Bytes, file: &RandomAccessFile, offset: u64) -> Result<Block> {
    Block::new(contents).map_err(|reason| Error::corruption(file.path(), offset, reason))
}

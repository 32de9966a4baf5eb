//! The bytes a semi-sorted generation ends with: the block index (every block's handle,
//! key range, validity and entry counts), the lookup index (version 2: what a reader keeps,
//! one separator and handle per valid block) and the fixed footer that locates the
//! generation's filter, properties, key list and indexes. Owns their encoding and the
//! checks that make a damaged index or footer read as corruption, never as wrong data; the
//! data blocks and the key list are ordinary blocks (`super::super::block`).

use crate::coding::{decode_fixed32, decode_fixed64, get_varint64, masked_crc};
use crate::coding::{put_fixed32, put_fixed64, put_varint64};
use crate::key::{parse_internal_key, user_key};
use crate::sst::block::{Block, BlockBuilder, ValueCoding};
use crate::sst::format::{shortest_separator, BlockHandle, BLOCK_TRAILER_LEN};
use crate::sst::INDEX_RESTART_INTERVAL;
use bytes::Bytes;

/// "tierkvS1" read as a little-endian u64: a semi-sorted table (sorted tables end with
/// "tierkvT1").
pub const SEMI_MAGIC: u64 = u64::from_le_bytes(*b"tierkvS1");
/// Semi-sorted format version written: 3, whose stored lookup index keeps its handles
/// delta-coded ([`ValueCoding::DeltaHandles`], as a sorted table's format-3 index).
pub const SEMI_VERSION: u32 = 3;
/// Version 2 (still read) stores the lookup index a reader keeps, so opening a table never
/// reads the block index (every block's first and last internal key and counts, dirty
/// blocks too: several times the lookup index's size); its handles are stored whole.
pub const SEMI_VERSION_2: u32 = 2;
/// The first version (still read): the footer has no lookup index and opening reads the
/// block index and builds the lookup index from it.
pub const SEMI_VERSION_1: u32 = 1;
/// Footer size of versions 2 and 3: five handles (16 bytes each), version, checksum,
/// magic. The longest semi-sorted footer: a reader reads this many bytes before the
/// logical end.
pub const SEMI_FOOTER_LEN: usize = 5 * 16 + 4 + 4 + 8;
/// Footer size of version 1: four handles, version, checksum, magic.
pub const SEMI_FOOTER_V1_LEN: usize = 4 * 16 + 4 + 4 + 8;

/// What one index entry says about a data block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SemiBlock {
    /// Where its contents lie (without the trailer).
    pub handle: BlockHandle,
    /// Valid (its entries are live) or dirty (garbage: a later generation replaced it).
    pub valid: bool,
    /// Its first internal key.
    pub first: Vec<u8>,
    /// Its last internal key.
    pub last: Vec<u8>,
    /// Entries, tombstones and expiring records, and their key and value bytes: the
    /// table's properties are these summed over the valid blocks.
    pub stats: BlockStats,
}

impl SemiBlock {
    /// Its first user key.
    pub fn first_user_key(&self) -> &[u8] {
        user_key(&self.first)
    }

    /// Its last user key.
    pub fn last_user_key(&self) -> &[u8] {
        user_key(&self.last)
    }

    /// Bytes it occupies in the file, trailer included.
    pub fn stored_len(&self) -> u64 {
        self.handle.size + BLOCK_TRAILER_LEN as u64
    }

    /// True if user key `k` lies within its range.
    pub fn covers(&self, k: &[u8]) -> bool {
        self.first_user_key() <= k && k <= self.last_user_key()
    }
}

/// Counts over one data block's entries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockStats {
    /// Entries.
    pub entries: u64,
    /// Tombstones.
    pub deletions: u64,
    /// Expiring records.
    pub expiring: u64,
    /// Sum of internal key lengths.
    pub key_bytes: u64,
    /// Sum of value lengths.
    pub value_bytes: u64,
}

impl BlockStats {
    fn fields(&self) -> [u64; 5] {
        [
            self.entries,
            self.deletions,
            self.expiring,
            self.key_bytes,
            self.value_bytes,
        ]
    }

    /// Adds another block's counts.
    pub fn add(&mut self, o: &BlockStats) {
        self.entries += o.entries;
        self.deletions += o.deletions;
        self.expiring += o.expiring;
        self.key_bytes += o.key_bytes;
        self.value_bytes += o.value_bytes;
    }
}

/// Encodes the index block contents: `count: varint`, then per block `flags: u8 (bit 0:
/// valid) | offset | size | entries | deletions | expiring | key_bytes | value_bytes`
/// (varints) `| first: varint len + bytes | last: varint len + bytes`.
pub fn encode_index(blocks: &[SemiBlock]) -> Vec<u8> {
    let mut out = Vec::new();
    put_varint64(&mut out, blocks.len() as u64);
    for b in blocks {
        out.push(u8::from(b.valid));
        put_varint64(&mut out, b.handle.offset);
        put_varint64(&mut out, b.handle.size);
        for v in b.stats.fields() {
            put_varint64(&mut out, v);
        }
        for k in [&b.first, &b.last] {
            put_varint64(&mut out, k.len() as u64);
            out.extend_from_slice(k);
        }
    }
    out
}

/// Decodes and checks index block contents against `data_end` (where the generation's
/// metadata starts: every block lies before it). Checks what a lookup trusts: valid
/// blocks come first, in increasing key order, with non-overlapping user-key ranges and
/// well-formed keys, and no two blocks share bytes. `Err` names what is wrong.
pub fn decode_index(mut src: &[u8], data_end: u64) -> Result<Vec<SemiBlock>, String> {
    fn varint(src: &mut &[u8]) -> Result<u64, String> {
        let (v, n) = get_varint64(src).ok_or("malformed varint")?;
        *src = &src[n..];
        Ok(v)
    }
    fn bytes<'a>(src: &mut &'a [u8]) -> Result<&'a [u8], String> {
        let len = usize::try_from(varint(src)?).map_err(|_| "key length overflows")?;
        let b = src.get(..len).ok_or("key runs past the index")?;
        *src = &src[len..];
        Ok(b)
    }
    let count = varint(&mut src)?;
    // Each entry takes at least 10 bytes: a count beyond that is damage, not a reason to
    // reserve memory.
    if count > src.len() as u64 / 10 + 1 {
        return Err(format!(
            "index claims {count} blocks in {} bytes",
            src.len()
        ));
    }
    let mut blocks = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let (&flags, rest) = src.split_first().ok_or("index ends inside an entry")?;
        src = rest;
        if flags > 1 {
            return Err(format!("unknown block flags {flags}"));
        }
        let handle = BlockHandle {
            offset: varint(&mut src)?,
            size: varint(&mut src)?,
        };
        let f: Vec<u64> = (0..5).map(|_| varint(&mut src)).collect::<Result<_, _>>()?;
        let stats = BlockStats {
            entries: f[0],
            deletions: f[1],
            expiring: f[2],
            key_bytes: f[3],
            value_bytes: f[4],
        };
        let first = bytes(&mut src)?.to_vec();
        let last = bytes(&mut src)?.to_vec();
        blocks.push(SemiBlock {
            handle,
            valid: flags == 1,
            first,
            last,
            stats,
        });
    }
    if !src.is_empty() {
        return Err("bytes after the last index entry".into());
    }
    check_blocks(&blocks, data_end)?;
    Ok(blocks)
}

/// The structural rules of an index (see [`decode_index`]).
fn check_blocks(blocks: &[SemiBlock], data_end: u64) -> Result<(), String> {
    let valid = blocks.iter().take_while(|b| b.valid).count();
    if blocks[valid..].iter().any(|b| b.valid) {
        return Err("a valid block is listed after a dirty one".into());
    }
    for (i, b) in blocks.iter().enumerate() {
        let end = b
            .handle
            .offset
            .checked_add(b.stored_len())
            .ok_or("block handle overflows")?;
        if end > data_end {
            return Err(format!("block {i} lies past the data blocks"));
        }
        if b.valid {
            if parse_internal_key(&b.first).is_none() || parse_internal_key(&b.last).is_none() {
                return Err(format!("block {i} has a malformed key"));
            }
            if b.first_user_key() > b.last_user_key() || b.stats.entries == 0 {
                return Err(format!("block {i} has an empty or inverted range"));
            }
        }
    }
    for w in blocks[..valid].windows(2) {
        if w[0].last_user_key() >= w[1].first_user_key() {
            return Err("valid blocks overlap or are out of order".into());
        }
    }
    let mut spans: Vec<(u64, u64)> = blocks
        .iter()
        .map(|b| (b.handle.offset, b.handle.offset + b.stored_len()))
        .collect();
    spans.sort_unstable();
    if spans.windows(2).any(|w| w[0].1 > w[1].0) {
        return Err("two blocks share bytes".into());
    }
    Ok(())
}

/// The lookup index of valid blocks `valid` (in key order, ranges disjoint): one entry per
/// block, a user-key separator `S` with `last user key <= S < next block's first user key`
/// (the last block: its last user key) and the block's handle, delta-coded: the same
/// structure and separators as a sorted table's format-3 index, so a seek by user key
/// lands on the only block that can hold it. Version 3 stores it (version 2 stored it with
/// whole handles); version 1 builds it at open. Blocks in key order may lie anywhere in
/// the file: the gaps are signed.
pub fn lookup_index(valid: &[SemiBlock]) -> Vec<u8> {
    let mut b = BlockBuilder::new(INDEX_RESTART_INTERVAL);
    for (i, blk) in valid.iter().enumerate() {
        let sep = match valid.get(i + 1) {
            Some(next) => shortest_separator(blk.last_user_key(), next.first_user_key()),
            None => blk.last_user_key().to_vec(),
        };
        b.add_handle(&sep, blk.handle);
    }
    b.finish()
}

/// Checks a stored lookup index against the valid blocks of the block index: one entry per
/// valid block, in order, with that block's handle and a separator between it and the
/// next. `Err` names what is wrong.
pub fn check_lookup_index(
    lookup: Bytes,
    coding: ValueCoding,
    valid: &[SemiBlock],
) -> Result<(), String> {
    let block = Block::with_coding(lookup, coding).map_err(|e| format!("lookup index: {e}"))?;
    block
        .check_restarts()
        .map_err(|e| format!("lookup index: {e}"))?;
    let mut it = block.iter();
    it.seek_to_first()
        .map_err(|e| format!("lookup index: {e}"))?;
    for (i, b) in valid.iter().enumerate() {
        if !it.valid() {
            return Err(format!(
                "lookup index has {i} entries for {} valid blocks",
                valid.len()
            ));
        }
        if it.handle() != Some(b.handle) {
            return Err(format!("lookup index entry {i} points at another block"));
        }
        let sep = it.key();
        let below_next = valid.get(i + 1).is_none_or(|n| sep < n.first_user_key());
        if sep < b.last_user_key() || !below_next {
            return Err(format!(
                "lookup index entry {i} does not separate its block"
            ));
        }
        it.next().map_err(|e| format!("lookup index: {e}"))?;
    }
    if it.valid() {
        return Err("lookup index lists more blocks than are valid".into());
    }
    Ok(())
}

/// The fixed end of a semi-sorted generation: its metadata blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SemiFooter {
    /// Bloom filter over the valid user keys (size 0: no filter).
    pub filter: BlockHandle,
    /// Properties of the valid entries.
    pub properties: BlockHandle,
    /// The valid user keys, in order, as a block with empty values.
    pub keys: BlockHandle,
    /// The block index ([`encode_index`]): every block, valid and dirty.
    pub index: BlockHandle,
    /// The lookup index ([`lookup_index`]), versions 2 and 3; `None`: a version-1 footer.
    pub lookup: Option<BlockHandle>,
    /// The format version: [`SEMI_VERSION`], [`SEMI_VERSION_2`], or [`SEMI_VERSION_1`]
    /// (then `lookup` is `None`).
    pub version: u32,
}

impl SemiFooter {
    /// Its encoded length: [`SEMI_FOOTER_LEN`], or [`SEMI_FOOTER_V1_LEN`] without a
    /// lookup index.
    pub fn encoded_len(&self) -> usize {
        if self.lookup.is_some() {
            SEMI_FOOTER_LEN
        } else {
            SEMI_FOOTER_V1_LEN
        }
    }

    fn handles(&self) -> impl Iterator<Item = BlockHandle> {
        [self.filter, self.properties, self.keys, self.index]
            .into_iter()
            .chain(self.lookup)
    }

    /// How the stored lookup index keeps its handles (version 3: delta-coded). A version-1
    /// table has none stored; the one built at open is delta-coded.
    pub fn lookup_coding(&self) -> ValueCoding {
        if self.version == SEMI_VERSION_2 {
            ValueCoding::Plain
        } else {
            ValueCoding::DeltaHandles
        }
    }

    /// Encodes the footer ([`SemiFooter::encoded_len`] bytes).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        for h in self.handles() {
            put_fixed64(&mut out, h.offset);
            put_fixed64(&mut out, h.size);
        }
        put_fixed32(&mut out, self.version);
        let crc = masked_crc(&out);
        put_fixed32(&mut out, crc);
        put_fixed64(&mut out, SEMI_MAGIC);
        out
    }

    /// Decodes the footer at the end of `tail` (the last bytes before the generation's
    /// logical end `footer_end`, at least the footer: its version, at a fixed distance from
    /// the end, says how long it is); `Err` names what is wrong.
    pub fn decode(tail: &[u8], footer_end: u64) -> Result<SemiFooter, String> {
        if tail.len() < SEMI_FOOTER_V1_LEN {
            return Err("semi-sorted footer has the wrong length".into());
        }
        let n = tail.len();
        if decode_fixed64(&tail[n - 8..]) != SEMI_MAGIC {
            return Err("bad semi-sorted table magic".into());
        }
        let version = decode_fixed32(&tail[n - 16..]);
        let len = match version {
            SEMI_VERSION_1 => SEMI_FOOTER_V1_LEN,
            SEMI_VERSION_2 | SEMI_VERSION => SEMI_FOOTER_LEN,
            v => return Err(format!("unsupported semi-sorted format version {v}")),
        };
        let src = tail
            .get(n.saturating_sub(len)..)
            .filter(|s| s.len() == len)
            .ok_or("semi-sorted footer has the wrong length")?;
        let body = &src[..len - 12];
        if decode_fixed32(&src[len - 12..]) != masked_crc(body) {
            return Err("semi-sorted footer checksum mismatch".into());
        }
        let h = |i: usize| BlockHandle {
            offset: decode_fixed64(&src[16 * i..]),
            size: decode_fixed64(&src[16 * i + 8..]),
        };
        let footer = SemiFooter {
            filter: h(0),
            properties: h(1),
            keys: h(2),
            index: h(3),
            lookup: (version != SEMI_VERSION_1).then(|| h(4)),
            version,
        };
        let meta_limit = footer_end.saturating_sub(len as u64);
        for h in footer.handles() {
            let end = h
                .offset
                .checked_add(h.size)
                .and_then(|e| e.checked_add(BLOCK_TRAILER_LEN as u64));
            if end.is_none_or(|end| end > meta_limit) {
                return Err("semi-sorted footer points past the end of the data".into());
            }
        }
        Ok(footer)
    }

    /// Where the generation's metadata starts (everything before is data blocks).
    pub fn meta_start(&self) -> u64 {
        self.handles()
            .filter(|h| h.size > 0)
            .map(|h| h.offset)
            .min()
            .unwrap_or(self.index.offset)
    }

    /// Where the metadata an open reads starts: the filter, properties and the index a
    /// reader keeps (versions 2 and 3: the lookup index; version 1: the block index), which
    /// come after the key list (and the block index) and end at the footer.
    pub fn open_start(&self) -> u64 {
        let kept = self.lookup.unwrap_or(self.index);
        [self.filter, self.properties, kept]
            .iter()
            .filter(|h| h.size > 0)
            .map(|h| h.offset)
            .min()
            .unwrap_or(kept.offset)
    }
}

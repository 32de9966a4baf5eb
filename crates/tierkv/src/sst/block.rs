//! Blocks: sorted key-value entries with prefix compression and restart points, the unit of
//! every table read (data blocks and the index block share this format).
//!
//! Entry: `shared: varint | unshared: varint | value_len: varint | key[shared..] | value`,
//! where `shared` is the length of the prefix this key has in common with the previous key.
//! Every `restart_interval` entries the prefix is reset (`shared = 0`) and the entry's
//! offset is recorded; the block ends with `restarts: u32 * n | n: u32`. Seeks binary-search
//! the restart points, then scan forward. An index block of table format 3 stores its values,
//! block handles, delta-coded instead ([`ValueCoding::DeltaHandles`]). Owns the block
//! encoding and the cursor over one block; checksums and compression belong to `format`.

use crate::coding::{decode_fixed32, get_varint32, get_varint64};
use crate::coding::{put_fixed32, put_varint32, put_varint64, varint_len};
use crate::key::compare_internal;
use bytes::Bytes;
use std::cmp::Ordering;

/// How a block stores its entries' values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueCoding {
    /// A `value_len: varint` in each entry's header, then the value's bytes: data blocks,
    /// and index blocks before table format 3.
    Plain,
    /// Index blocks of table format 3: each value is a block handle and the header has no
    /// `value_len` (the handle is two varints, self-delimiting). An entry at a restart point
    /// stores `offset | size`; any other stores `gap | size`, `gap` a zigzag-coded signed
    /// varint and the entry's offset the previous entry's `offset + size + gap`. Blocks
    /// written back to back have a constant gap (their trailer), so an entry costs the
    /// size and one byte instead of the whole offset, the size and a value length.
    DeltaHandles,
}

/// Where a block lies in a table file (its contents, without the trailer): an index
/// entry's value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockHandle {
    /// Offset of the first byte.
    pub offset: u64,
    /// Length of the contents.
    pub size: u64,
}

impl BlockHandle {
    /// Appends the varint encoding (the value of an index entry before format 3).
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
}

/// A signed gap as an unsigned varint's value: small magnitudes stay small.
fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Accumulates sorted entries into one block.
pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    restart_interval: usize,
    since_restart: usize,
    last_key: Vec<u8>,
    entries: usize,
    /// The last handle added ([`BlockBuilder::add_handle`]): the base of the next gap.
    last_handle: BlockHandle,
}

impl BlockBuilder {
    /// A builder that resets key prefixes every `restart_interval` entries.
    pub fn new(restart_interval: usize) -> Self {
        BlockBuilder {
            buf: Vec::new(),
            restarts: vec![0],
            restart_interval: restart_interval.max(1),
            since_restart: 0,
            last_key: Vec::new(),
            entries: 0,
            last_handle: BlockHandle::default(),
        }
    }

    /// Appends an entry of a [`ValueCoding::Plain`] block. Keys must arrive in increasing
    /// order.
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        let (shared, _) = self.start_entry(key);
        put_varint32(&mut self.buf, value.len() as u32);
        self.buf.extend_from_slice(&key[shared..]);
        self.buf.extend_from_slice(value);
        self.end_entry(key);
    }

    /// Appends an entry of a [`ValueCoding::DeltaHandles`] block (never mixed with
    /// [`BlockBuilder::add`] in one block). Keys must arrive in increasing order; handles
    /// may lie anywhere (a semi-sorted table's blocks in key order jump back and forth)
    /// below 2^63.
    pub fn add_handle(&mut self, key: &[u8], h: BlockHandle) {
        let end = self
            .last_handle
            .offset
            .saturating_add(self.last_handle.size);
        let (shared, restart) = self.start_entry(key);
        self.buf.extend_from_slice(&key[shared..]);
        if restart {
            put_varint64(&mut self.buf, h.offset);
        } else {
            let gap = (h.offset as i64).wrapping_sub(end as i64);
            put_varint64(&mut self.buf, zigzag(gap));
        }
        put_varint64(&mut self.buf, h.size);
        self.last_handle = h;
        self.end_entry(key);
    }

    /// Writes `shared` and `unshared` for `key`, starting a restart point when one is due;
    /// returns `shared` and whether the entry is a restart point.
    fn start_entry(&mut self, key: &[u8]) -> (usize, bool) {
        let (shared, new_restart) = self.next_entry_prefix(key);
        if new_restart {
            self.restarts.push(self.buf.len() as u32);
            self.since_restart = 0;
        }
        let restart = new_restart || self.entries == 0;
        put_varint32(&mut self.buf, shared as u32);
        put_varint32(&mut self.buf, (key.len() - shared) as u32);
        (shared, restart)
    }

    fn end_entry(&mut self, key: &[u8]) {
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.since_restart += 1;
        self.entries += 1;
    }

    /// The bytes `key` would share with the previous key as the next entry, and whether
    /// it would start a new restart point (the first entry's, at offset 0, is already
    /// recorded).
    fn next_entry_prefix(&self, key: &[u8]) -> (usize, bool) {
        if self.entries == 0 {
            (0, false)
        } else if self.since_restart < self.restart_interval {
            let shared = self
                .last_key
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count();
            (shared, false)
        } else {
            (0, true)
        }
    }

    /// Size of the block if finished after [`BlockBuilder::add`] of `key` and a value of
    /// `value_len` bytes (exact: the same prefix sharing and restart point `add` would
    /// choose).
    pub fn estimated_size_with(&self, key: &[u8], value_len: usize) -> usize {
        let (shared, restart) = self.next_entry_prefix(key);
        let unshared = key.len() - shared;
        let entry = varint_len(shared as u64)
            + varint_len(unshared as u64)
            + varint_len(value_len as u64)
            + unshared
            + value_len;
        self.estimated_size() + entry + if restart { 4 } else { 0 }
    }

    /// Size of the block if finished now.
    pub fn estimated_size(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }

    /// Entries added since the last `finish`.
    pub fn entries(&self) -> usize {
        self.entries
    }

    /// True when no entry was added since the last `finish`.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// The last key added.
    pub fn last_key(&self) -> &[u8] {
        &self.last_key
    }

    /// Encodes the block and resets the builder for the next one.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        for &r in &self.restarts {
            put_fixed32(&mut out, r);
        }
        put_fixed32(&mut out, self.restarts.len() as u32);
        self.restarts = vec![0];
        self.since_restart = 0;
        self.last_key.clear();
        self.entries = 0;
        self.last_handle = BlockHandle::default();
        out
    }
}

/// A decoded (checksum-verified, decompressed) block, cheap to clone.
#[derive(Clone, Debug)]
pub struct Block {
    data: Bytes,
    restarts_offset: usize,
    num_restarts: usize,
    coding: ValueCoding,
}

impl Block {
    /// Parses a [`ValueCoding::Plain`] block's restart array; `Err` names what is malformed.
    pub fn new(data: Bytes) -> Result<Block, &'static str> {
        Block::with_coding(data, ValueCoding::Plain)
    }

    /// Parses the restart array of a block whose values are stored as `coding` says.
    pub fn with_coding(data: Bytes, coding: ValueCoding) -> Result<Block, &'static str> {
        if data.len() < 4 {
            return Err("block shorter than its restart count");
        }
        let num_restarts = decode_fixed32(&data[data.len() - 4..]) as usize;
        let restarts_len = num_restarts
            .checked_mul(4)
            .and_then(|n| n.checked_add(4))
            .filter(|&n| n <= data.len())
            .ok_or("restart count exceeds the block")?;
        if num_restarts == 0 {
            return Err("block without restart points");
        }
        let restarts_offset = data.len() - restarts_len;
        let block = Block {
            data,
            restarts_offset,
            num_restarts,
            coding,
        };
        for i in 0..num_restarts {
            if block.restart(i) > restarts_offset {
                return Err("restart point past the entries");
            }
        }
        Ok(block)
    }

    /// Bytes held (what the block cache charges).
    pub fn size(&self) -> usize {
        self.data.len()
    }

    fn restart(&self, i: usize) -> usize {
        decode_fixed32(&self.data[self.restarts_offset + 4 * i..]) as usize
    }

    /// Checks the restart array against the entries: the first restart point is 0 and each
    /// is, in order, the start of an entry that stores its whole key. Seeks and backward
    /// steps start from restart points, which a forward walk over the entries never looks
    /// at, so verification checks them here (not the read path: it trusts the checksum).
    pub fn check_restarts(&self) -> Result<(), &'static str> {
        if self.restart(0) != 0 {
            return Err("first restart point is not the first entry");
        }
        let it = self.iter();
        let (mut at, mut next_restart) = (0, 0);
        while at < self.restarts_offset {
            let h = it.header(at)?;
            if next_restart < self.num_restarts && self.restart(next_restart) == at {
                if h.shared != 0 {
                    return Err("restart entry shares a prefix");
                }
                next_restart += 1;
            } else if next_restart < self.num_restarts && self.restart(next_restart) < at {
                return Err("restart point inside an entry or out of order");
            }
            at = h.value_end;
        }
        // An empty block has the single restart point 0, at its end.
        let empty = self.restarts_offset == 0 && self.num_restarts == 1;
        if next_restart != self.num_restarts && !empty {
            return Err("restart point past the last entry");
        }
        Ok(())
    }

    /// A cursor over the entries.
    pub fn iter(&self) -> BlockIter {
        BlockIter {
            block: self.clone(),
            current: self.restarts_offset,
            next: self.restarts_offset,
            restart_index: 0,
            key: Vec::new(),
            value: (0, 0),
            handle: BlockHandle::default(),
        }
    }
}

/// A decoded entry header: where the key suffix and value lie.
struct EntryHeader {
    shared: usize,
    key_start: usize,
    key_end: usize,
    value_end: usize,
    /// A [`ValueCoding::DeltaHandles`] entry's two varints (offset or gap, and size).
    handle_fields: (u64, u64),
}

/// Cursor over one block. Errors are structural problems in the entries (the block's
/// checksum was fine, so they mean a bug or a forged file): the cursor becomes invalid and
/// the reason is returned for the caller to wrap with the file and offset.
#[derive(Clone)]
pub struct BlockIter {
    block: Block,
    /// Offset of the current entry (`restarts_offset` when invalid).
    current: usize,
    /// Offset just past the current entry.
    next: usize,
    /// Index of the restart block holding `current`.
    restart_index: usize,
    key: Vec<u8>,
    value: (usize, usize),
    /// The current entry's handle, in a [`ValueCoding::DeltaHandles`] block.
    handle: BlockHandle,
}

type BlockResult<T = ()> = std::result::Result<T, &'static str>;

impl BlockIter {
    /// True when positioned at an entry.
    pub fn valid(&self) -> bool {
        self.current < self.block.restarts_offset
    }

    /// The current key.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The current value (in a [`ValueCoding::DeltaHandles`] block, the entry's coded
    /// bytes: read [`BlockIter::handle`] instead).
    pub fn value(&self) -> &[u8] {
        &self.block.data[self.value.0..self.value.1]
    }

    /// The current value as shared bytes (no copy).
    pub fn value_bytes(&self) -> Bytes {
        self.block.data.slice(self.value.0..self.value.1)
    }

    /// The current value read as a block handle (an index block's value, in either
    /// coding); `None` if a plain value is not exactly two varints.
    pub fn handle(&self) -> Option<BlockHandle> {
        match self.block.coding {
            ValueCoding::Plain => BlockHandle::decode_varint(self.value()),
            ValueCoding::DeltaHandles => Some(self.handle),
        }
    }

    fn invalidate(&mut self) {
        self.current = self.block.restarts_offset;
        self.next = self.block.restarts_offset;
        self.key.clear();
    }

    fn header(&self, at: usize) -> BlockResult<EntryHeader> {
        if self.block.coding == ValueCoding::DeltaHandles {
            return self.handle_header(at);
        }
        let data = &self.block.data[..self.block.restarts_offset];
        let (shared, unshared, value_len, p) = match data.get(at..at.saturating_add(3)) {
            // The common case (LevelDB's fast path): all three lengths below 128, one
            // byte each.
            Some(&[a, b, c]) if (a | b | c) < 0x80 => (a as usize, b as usize, c as usize, at + 3),
            _ => {
                let mut p = at;
                let mut field = || -> BlockResult<usize> {
                    let (v, n) =
                        get_varint32(&data[p.min(data.len())..]).ok_or("truncated entry")?;
                    p += n;
                    Ok(v as usize)
                };
                let shared = field()?;
                let unshared = field()?;
                let value_len = field()?;
                (shared, unshared, value_len, p)
            }
        };
        let key_end = p.checked_add(unshared).ok_or("entry overflows")?;
        let value_end = key_end.checked_add(value_len).ok_or("entry overflows")?;
        if value_end > data.len() {
            return Err("entry runs past the block");
        }
        Ok(EntryHeader {
            shared,
            key_start: p,
            key_end,
            value_end,
            handle_fields: (0, 0),
        })
    }

    /// [`BlockIter::header`] of a [`ValueCoding::DeltaHandles`] entry.
    fn handle_header(&self, at: usize) -> BlockResult<EntryHeader> {
        let data = &self.block.data[..self.block.restarts_offset];
        let varint = |p: &mut usize| -> BlockResult<u64> {
            let (v, n) = match data.get(*p) {
                // One byte: shared and unshared lengths and the gap, nearly always.
                Some(&b) if b < 0x80 => (b as u64, 1),
                _ => get_varint64(data.get(*p..).unwrap_or_default()).ok_or("truncated entry")?,
            };
            *p += n;
            Ok(v)
        };
        let mut p = at;
        let shared = usize::try_from(varint(&mut p)?).map_err(|_| "entry overflows")?;
        let unshared = usize::try_from(varint(&mut p)?).map_err(|_| "entry overflows")?;
        let key_start = p;
        let key_end = key_start.checked_add(unshared).ok_or("entry overflows")?;
        if key_end > data.len() {
            return Err("entry runs past the block");
        }
        p = key_end;
        let handle_fields = (varint(&mut p)?, varint(&mut p)?);
        Ok(EntryHeader {
            shared,
            key_start,
            key_end,
            value_end: p,
            handle_fields,
        })
    }

    /// Decodes the entry at `self.next` into the cursor.
    fn parse_next(&mut self) -> BlockResult<bool> {
        self.current = self.next;
        if self.current >= self.block.restarts_offset {
            self.invalidate();
            return Ok(false);
        }
        let h = match self.header(self.current) {
            Ok(h) => h,
            Err(e) => {
                self.invalidate();
                return Err(e);
            }
        };
        if h.shared > self.key.len() {
            self.invalidate();
            return Err("entry shares more bytes than the previous key has");
        }
        self.key.truncate(h.shared);
        self.key
            .extend_from_slice(&self.block.data[h.key_start..h.key_end]);
        self.value = (h.key_end, h.value_end);
        self.next = h.value_end;
        while self.restart_index + 1 < self.block.num_restarts
            && self.block.restart(self.restart_index + 1) <= self.current
        {
            self.restart_index += 1;
        }
        if self.block.coding == ValueCoding::DeltaHandles {
            let (first, size) = h.handle_fields;
            // Cursors enter a block only at restart points, so the previous entry's handle
            // is always the one before this entry.
            let offset = if self.block.restart(self.restart_index) == self.current {
                Some(first)
            } else {
                (self.handle.offset)
                    .checked_add(self.handle.size)
                    .and_then(|end| end.checked_add_signed(unzigzag(first)))
            };
            let Some(offset) = offset else {
                self.invalidate();
                return Err("block handle offset overflows");
            };
            self.handle = BlockHandle { offset, size };
        }
        Ok(true)
    }

    fn seek_to_restart(&mut self, index: usize) {
        self.key.clear();
        self.restart_index = index;
        self.next = self.block.restart(index);
    }

    /// Positions at the first entry.
    pub fn seek_to_first(&mut self) -> BlockResult {
        self.seek_to_restart(0);
        self.parse_next().map(|_| ())
    }

    /// Positions at the last entry.
    pub fn seek_to_last(&mut self) -> BlockResult {
        self.seek_to_restart(self.block.num_restarts - 1);
        while self.parse_next()? && self.next < self.block.restarts_offset {}
        Ok(())
    }

    /// Advances to the next entry. Requires `valid()`.
    // A fallible cursor step, named like `InternalIterator::next`, not an `Iterator`.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> BlockResult {
        self.parse_next().map(|_| ())
    }

    /// Steps back to the previous entry. Requires `valid()`.
    pub fn prev(&mut self) -> BlockResult {
        let original = self.current;
        // Find the restart point before the current entry, then scan up to it.
        let mut index = self.restart_index;
        while self.block.restart(index) >= original {
            if index == 0 {
                self.invalidate();
                return Ok(());
            }
            index -= 1;
        }
        self.seek_to_restart(index);
        loop {
            if !self.parse_next()? {
                return Err("entries do not lead back to the current one");
            }
            if self.next >= original {
                return Ok(());
            }
        }
    }

    /// The key at restart point `i` (restart entries store their key whole).
    fn restart_key(&self, i: usize) -> BlockResult<&[u8]> {
        let h = self.header(self.block.restart(i))?;
        if h.shared != 0 {
            return Err("restart entry shares a prefix");
        }
        Ok(&self.block.data[h.key_start..h.key_end])
    }

    /// Positions at the first entry whose key is `>= target` under `cmp`.
    pub fn seek_by(&mut self, target: &[u8], cmp: fn(&[u8], &[u8]) -> Ordering) -> BlockResult {
        // Binary search for the last restart point whose key is < target.
        let (mut lo, mut hi) = (0, self.block.num_restarts - 1);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            match self.restart_key(mid) {
                Ok(k) if cmp(k, target) == Ordering::Less => lo = mid,
                Ok(_) => hi = mid - 1,
                Err(e) => {
                    self.invalidate();
                    return Err(e);
                }
            }
        }
        self.seek_to_restart(lo);
        while self.parse_next()? {
            if cmp(&self.key, target) != Ordering::Less {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Positions at the first entry whose internal key is `>= target`.
    pub fn seek(&mut self, target: &[u8]) -> BlockResult {
        self.seek_by(target, compare_internal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(keys: &[Vec<u8>], interval: usize) -> Block {
        let mut b = BlockBuilder::new(interval);
        for (i, k) in keys.iter().enumerate() {
            b.add(k, format!("v{i}").as_bytes());
        }
        Block::new(Bytes::from(b.finish())).unwrap()
    }

    fn keys(n: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| format!("key{:05}", i * 3).into_bytes())
            .collect()
    }

    fn bytewise(a: &[u8], b: &[u8]) -> Ordering {
        a.cmp(b)
    }

    #[test]
    fn walks_both_ways_and_seeks() {
        for interval in [1, 3, 16] {
            let ks = keys(100);
            let block = build(&ks, interval);
            let mut it = block.iter();
            it.seek_to_first().unwrap();
            for (i, k) in ks.iter().enumerate() {
                assert!(it.valid());
                assert_eq!(it.key(), k.as_slice());
                assert_eq!(it.value(), format!("v{i}").as_bytes());
                it.next().unwrap();
            }
            assert!(!it.valid());
            it.seek_to_last().unwrap();
            for k in ks.iter().rev() {
                assert_eq!(it.key(), k.as_slice());
                it.prev().unwrap();
            }
            assert!(!it.valid());
            for i in 0..310 {
                let target = format!("key{i:05}").into_bytes();
                it.seek_by(&target, bytewise).unwrap();
                match ks.iter().find(|k| **k >= target) {
                    Some(k) => assert_eq!(it.key(), k.as_slice()),
                    None => assert!(!it.valid()),
                }
            }
        }
    }

    /// Handles with the gaps blocks leave between them (a trailer, a garbage block, none)
    /// and some jumping back.
    fn handles(n: usize) -> Vec<BlockHandle> {
        let mut end = 0u64;
        (0..n)
            .map(|i| {
                let gap = [5, 5, 5, 0, 4_000_000][i % 5];
                let offset = if i % 37 == 36 { end / 2 } else { end + gap };
                let h = BlockHandle {
                    offset,
                    size: 900 + (i as u64 * 7919) % 300,
                };
                end = offset + h.size;
                h
            })
            .collect()
    }

    fn build_handles(keys: &[Vec<u8>], hs: &[BlockHandle], interval: usize) -> Block {
        let mut b = BlockBuilder::new(interval);
        for (k, h) in keys.iter().zip(hs) {
            b.add_handle(k, *h);
        }
        Block::with_coding(Bytes::from(b.finish()), ValueCoding::DeltaHandles).unwrap()
    }

    /// Delta-coded handles read back exactly from every way a cursor reaches an entry:
    /// forward, backward, and by seek (which enters at a restart point).
    #[test]
    fn delta_coded_handles_read_back_from_any_entry() {
        for interval in [1, 3, 16] {
            let ks = keys(200);
            let hs = handles(ks.len());
            let block = build_handles(&ks, &hs, interval);
            block.check_restarts().unwrap();
            let mut it = block.iter();
            it.seek_to_first().unwrap();
            for (k, h) in ks.iter().zip(&hs) {
                assert_eq!((it.key(), it.handle()), (k.as_slice(), Some(*h)));
                it.next().unwrap();
            }
            assert!(!it.valid());
            it.seek_to_last().unwrap();
            for (k, h) in ks.iter().zip(&hs).rev() {
                assert_eq!((it.key(), it.handle()), (k.as_slice(), Some(*h)));
                it.prev().unwrap();
            }
            for (i, k) in ks.iter().enumerate() {
                it.seek_by(k, bytewise).unwrap();
                assert_eq!(it.handle(), Some(hs[i]), "seek {i}, interval {interval}");
            }
        }
        // The same handles stored whole take more room.
        let (ks, hs) = (keys(200), handles(200));
        let mut plain = BlockBuilder::new(16);
        for (k, h) in ks.iter().zip(&hs) {
            let mut v = Vec::new();
            h.encode_varint(&mut v);
            plain.add(k, &v);
        }
        let plain = Block::new(Bytes::from(plain.finish())).unwrap();
        assert!(build_handles(&ks, &hs, 16).size() < plain.size());
        for v in [0, 1, -1, 5, -5, i64::MAX, i64::MIN] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        let mut it = plain.iter();
        it.seek_to_first().unwrap();
        assert_eq!(it.handle(), Some(hs[0]));
    }

    #[test]
    fn malformed_blocks_are_rejected_not_panicked_on() {
        assert!(Block::new(Bytes::from_static(&[1, 2])).is_err());
        assert!(Block::new(Bytes::from_static(&[0, 0, 0, 0])).is_err());
        assert!(Block::new(Bytes::from_static(&[9, 0, 0, 0])).is_err());
        // Every truncation or bit flip of a real block either fails to parse, or its
        // cursor reports an error or walks entries: never a panic.
        let good = {
            let mut b = BlockBuilder::new(2);
            for k in keys(10) {
                b.add(&k, b"value");
            }
            b.finish()
        };
        for i in 0..good.len() {
            for bit in [0x01u8, 0x80] {
                let mut bad = good.clone();
                bad[i] ^= bit;
                if let Ok(block) = Block::new(Bytes::from(bad)) {
                    walk_all_ways(&block);
                }
            }
        }
        let good = build_handles(&keys(10), &handles(10), 2);
        let good = good.data.to_vec();
        for i in 0..good.len() {
            for bit in [0x01u8, 0x80] {
                let mut bad = good.clone();
                bad[i] ^= bit;
                if let Ok(block) = Block::with_coding(Bytes::from(bad), ValueCoding::DeltaHandles) {
                    walk_all_ways(&block);
                }
            }
        }
    }

    /// Walks, seeks and steps back through a block, ignoring errors (they must not panic).
    fn walk_all_ways(block: &Block) {
        let mut it = block.iter();
        let mut steps = 0;
        if it.seek_to_first().is_ok() {
            while it.valid() && steps < 100 && it.next().is_ok() {
                let _ = it.handle();
                steps += 1;
            }
        }
        if it.seek_to_last().is_ok() && it.valid() {
            let _ = it.prev();
        }
        let _ = it.seek_by(b"key00009", bytewise);
        let _ = block.check_restarts();
    }
}

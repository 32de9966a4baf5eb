//! RALT's sorted runs (`ralt/NNNNNN.rlt`): the writer, the in-memory part kept for every
//! live run (block index with hot-size prefix sums, hot-key bloom filter, totals), and a
//! cursor that reads records in key order. A run's bytes are the file's image, kept either
//! in memory (while the runs fit `RaltOptions::run_memory_limit`; a checkpoint writes the
//! image as the file) or in the file on the fast disk. The byte layout is in
//! docs/FORMAT.md, "RALT files". Every block carries a CRC; every check failure is a
//! corruption error naming the file and offset.

use super::options::BLOCK_SIZE;
use super::score::{decode_record, encode_record, encoded_len, Meta};
use crate::coding::{
    decode_fixed32, decode_fixed64, get_length_prefixed, get_varint64, masked_crc, put_fixed32,
    put_fixed64, put_length_prefixed, put_varint64,
};
use crate::env::{Env, IoCause, RandomAccessFile, Tier};
use crate::error::{Error, Result};
use crate::sst::filter::{may_contain_hash, BloomBuilder};
use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

const MAGIC: u64 = 0x544c_4152_766b_7274; // "trkvRALT" little-endian
const FORMAT_VERSION: u32 = 1;
const FOOTER_LEN: usize = 88;
/// Bytes read per I/O when scanning a file sequentially.
const SCAN_CHUNK: usize = 256 << 10;

/// Name of run file `number` relative to the fast tier's directory.
pub(crate) fn file_name(number: u64) -> String {
    format!("ralt/{number:06}.rlt")
}

/// Totals of one file, stored in its footer.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct RunInfo {
    pub records: u64,
    pub hot_records: u64,
    /// HotRAP size (key + value length) of all records.
    pub hotrap_bytes: u64,
    /// HotRAP size of the records with the hot bit.
    pub hot_bytes: u64,
    /// Physical size: encoded length of all records.
    pub record_bytes: u64,
    /// HotRAP size of the hot records whose key was not hot in any deeper (older) file
    /// when this file was written: summed over files it counts each hot key about once.
    pub fresh_hot_bytes: u64,
}

struct BlockHandle {
    first_key: Box<[u8]>,
    offset: u64,
    len: u32,
    /// HotRAP size of hot records in all earlier blocks.
    hot_prefix: u64,
}

/// Bytes of run images RALT holds in memory, and how many it may hold: shared by every
/// writer (which decides memory or disk when a run is complete) and every in-memory run
/// (which gives its bytes back when dropped).
pub(crate) struct MemRuns {
    pub bytes: AtomicU64,
    pub limit: u64,
}

impl MemRuns {
    /// Takes `size` bytes if they fit under the limit. Callers hold the maintenance lock
    /// (or are opening), so the check and the add do not race with another taker.
    fn take(&self, size: u64) -> bool {
        let now = self.bytes.load(Ordering::Relaxed);
        if self.limit == 0 || now.saturating_add(size) > self.limit {
            return false;
        }
        self.bytes.fetch_add(size, Ordering::Relaxed);
        true
    }
}

/// Where a run's bytes are.
enum Data {
    /// The file on the fast disk (boxed: the index memory a run costs counts this struct).
    Disk(Box<RandomAccessFile>),
    /// The file's whole image in memory. `persisted` once a checkpoint (or the open that
    /// loaded it) knows the same bytes are in the file; the file is then deleted by the
    /// checkpoint after the manifest that no longer names it, never on drop.
    Mem {
        image: Vec<u8>,
        persisted: AtomicBool,
        runs: Arc<MemRuns>,
    },
}

/// A live run: its metadata in memory, its data in memory or on the fast disk.
pub(crate) struct RunFile {
    pub number: u64,
    pub size: u64,
    pub smallest: Box<[u8]>,
    pub largest: Box<[u8]>,
    pub info: RunInfo,
    blocks: Vec<BlockHandle>,
    filter: Vec<u8>,
    data: Data,
    env: Arc<Env>,
    obsolete: AtomicBool,
}

impl Drop for RunFile {
    fn drop(&mut self) {
        match &self.data {
            // Deleted only when the last reader lets go, so iterators never lose their file.
            Data::Disk(_) => {
                if self.obsolete.load(Ordering::Acquire) {
                    if let Err(e) = self.env.remove(Tier::Fast, &file_name(self.number)) {
                        tracing::warn!("RALT could not delete an obsolete file: {e}");
                    }
                }
            }
            Data::Mem { image, runs, .. } => {
                runs.bytes.fetch_sub(image.len() as u64, Ordering::Relaxed);
            }
        }
    }
}

fn corrupt(path: &Path, offset: u64, why: &str) -> Error {
    Error::corruption(path, offset, format!("RALT run file: {why}"))
}

impl RunFile {
    /// Marks the file for deletion once no version or reader holds it.
    pub fn mark_obsolete(&self) {
        self.obsolete.store(true, Ordering::Release);
    }

    /// The run's file (on disk, or the name a checkpoint writes it under).
    pub fn path(&self) -> PathBuf {
        self.env.path(Tier::Fast, &file_name(self.number))
    }

    /// `len` bytes at `offset`: one read charged to RALT from the file, a borrow from memory.
    fn read(&self, offset: u64, len: usize) -> Result<Cow<'_, [u8]>> {
        match &self.data {
            Data::Disk(f) => f.read_at(offset, len, IoCause::Ralt).map(Cow::Owned),
            Data::Mem { image, .. } => usize::try_from(offset)
                .ok()
                .and_then(|o| image.get(o..o.checked_add(len)?))
                .map(Cow::Borrowed)
                .ok_or_else(|| corrupt(&self.path(), offset, "read past the end of the run")),
        }
    }

    /// True if the run's bytes are in memory.
    pub fn in_memory(&self) -> bool {
        matches!(self.data, Data::Mem { .. })
    }

    /// True if the run is in memory and its file has not been written (a checkpoint
    /// writes it).
    pub fn unpersisted(&self) -> bool {
        matches!(&self.data, Data::Mem { persisted, .. } if !persisted.load(Ordering::Acquire))
    }

    /// True if the run is in memory and its file exists too (written by a checkpoint or
    /// read at open): the checkpoint after its removal deletes the file.
    pub fn persisted_in_memory(&self) -> bool {
        matches!(&self.data, Data::Mem { persisted, .. } if persisted.load(Ordering::Acquire))
    }

    /// Writes an in-memory run's image as its file and syncs it (a checkpoint; the
    /// manifest written after it names the file). Nothing to do for a run on disk or one
    /// written already. Returns the bytes written.
    pub fn persist(&self) -> Result<u64> {
        let Data::Mem {
            image, persisted, ..
        } = &self.data
        else {
            return Ok(0);
        };
        if persisted.load(Ordering::Acquire) {
            return Ok(0);
        }
        write_file(&self.env, self.number, image)?;
        persisted.store(true, Ordering::Release);
        Ok(image.len() as u64)
    }

    /// Memory held by the filter and the index (and the run's own struct).
    pub fn memory(&self) -> (u64, u64) {
        let index: usize = self
            .blocks
            .iter()
            .map(|b| b.first_key.len() + std::mem::size_of::<BlockHandle>())
            .sum::<usize>()
            + self.smallest.len()
            + self.largest.len()
            + std::mem::size_of::<RunFile>()
            + match self.data {
                Data::Disk(_) => std::mem::size_of::<RandomAccessFile>(),
                // The image itself is counted apart (`RaltStats::run_memory_bytes`).
                Data::Mem { .. } => 0,
            };
        (self.filter.len() as u64, index as u64)
    }

    /// True if the key whose filter hash is `hash` may be a hot key of this file.
    pub fn may_be_hot(&self, hash: u64) -> bool {
        self.info.hot_records > 0 && may_contain_hash(&self.filter, hash)
    }

    pub fn overlaps(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> bool {
        lo.is_none_or(|lo| &*self.largest >= lo) && hi.is_none_or(|hi| &*self.smallest <= hi)
    }

    fn hot_prefix(&self, block: usize) -> u64 {
        self.blocks
            .get(block)
            .map_or(self.info.hot_bytes, |b| b.hot_prefix)
    }

    /// Block holding `key`'s position: the last block whose first key is <= key (0 if none).
    fn block_of(&self, key: &[u8]) -> usize {
        self.blocks
            .partition_point(|b| &*b.first_key <= key)
            .saturating_sub(1)
    }

    /// Hot HotRAP size of the blocks that may hold keys of [lo, hi]: the difference of the
    /// prefix sums at the two edge blocks, both edge blocks counted whole, so the answer
    /// is never below the exact hot size of this file in the range.
    pub fn range_hot_size(&self, lo: &[u8], hi: &[u8]) -> u64 {
        if !self.overlaps(Some(lo), Some(hi)) {
            return 0;
        }
        let (a, b) = (self.block_of(lo), self.block_of(hi));
        self.hot_prefix(b + 1).saturating_sub(self.hot_prefix(a))
    }

    /// Opens and checks a file written earlier: footer, index and filter are read and
    /// kept in memory, and the whole file too when `runs` has room for it.
    pub fn open(env: &Arc<Env>, number: u64, runs: &Arc<MemRuns>) -> Result<RunFile> {
        let name = file_name(number);
        let path = env.path(Tier::Fast, &name);
        let size = env.file_size(Tier::Fast, &name)?;
        let data = if runs.take(size) {
            let image = match env.read_all(Tier::Fast, &name, IoCause::Ralt) {
                Ok(i) if i.len() as u64 == size => i,
                other => {
                    runs.bytes.fetch_sub(size, Ordering::Relaxed);
                    other?;
                    return Err(corrupt(&path, 0, "file changed size while read"));
                }
            };
            Data::Mem {
                image,
                persisted: AtomicBool::new(true),
                runs: runs.clone(),
            }
        } else {
            Data::Disk(Box::new(env.open_random(Tier::Fast, &name)?))
        };
        RunFile::parse(env, number, data, size)
    }

    /// Checks a run's footer, index and filter (read through `data`) and builds the run.
    fn parse(env: &Arc<Env>, number: u64, data: Data, size: u64) -> Result<RunFile> {
        // Built first so that an error path drops it (and gives its memory back).
        let mut run = RunFile {
            number,
            size,
            smallest: Box::default(),
            largest: Box::default(),
            info: RunInfo::default(),
            blocks: Vec::new(),
            filter: Vec::new(),
            data,
            env: env.clone(),
            obsolete: AtomicBool::new(false),
        };
        let path = run.path();
        if size < FOOTER_LEN as u64 {
            return Err(corrupt(&path, 0, "file shorter than its footer"));
        }
        let foot_off = size - FOOTER_LEN as u64;
        let f = run.read(foot_off, FOOTER_LEN)?;
        if masked_crc(&f[..84]) != decode_fixed32(&f[84..]) {
            return Err(corrupt(&path, foot_off, "footer checksum mismatch"));
        }
        if decode_fixed64(&f[76..]) != MAGIC {
            return Err(corrupt(&path, foot_off, "bad magic number"));
        }
        if decode_fixed32(&f[72..]) != FORMAT_VERSION {
            return Err(corrupt(&path, foot_off, "unknown format version"));
        }
        let index_off = decode_fixed64(&f[0..]);
        let index_len = decode_fixed32(&f[8..]) as u64;
        let filter_off = decode_fixed64(&f[12..]);
        let filter_len = decode_fixed32(&f[20..]) as u64;
        let info = RunInfo {
            records: decode_fixed64(&f[24..]),
            hot_records: decode_fixed64(&f[32..]),
            hotrap_bytes: decode_fixed64(&f[40..]),
            hot_bytes: decode_fixed64(&f[48..]),
            record_bytes: decode_fixed64(&f[56..]),
            fresh_hot_bytes: decode_fixed64(&f[64..]),
        };
        // The totals feed sums and limits elsewhere: bound them by what the file can hold,
        // so a damaged or forged footer fails here instead of overflowing a sum later.
        let plausible = info.record_bytes <= index_off
            && info.records <= info.record_bytes
            && info.hot_records <= info.records
            && info.fresh_hot_bytes <= info.hot_bytes
            && info.hot_bytes <= info.hotrap_bytes
            && info.hotrap_bytes
                <= info
                    .records
                    .saturating_mul(u32::MAX as u64)
                    .saturating_add(info.record_bytes);
        if !plausible {
            return Err(corrupt(&path, foot_off, "implausible totals in the footer"));
        }
        let fits = |off: u64, len: u64| {
            off.checked_add(len)
                .and_then(|e| e.checked_add(4))
                .is_some_and(|e| e <= foot_off)
        };
        if !fits(index_off, index_len) || !fits(filter_off, filter_len) {
            return Err(corrupt(&path, foot_off, "footer points outside the file"));
        }
        let read_checked = |off: u64, len: u64, what: &str| -> Result<Vec<u8>> {
            let b = run.read(off, len as usize + 4)?;
            let crc = decode_fixed32(&b[len as usize..]);
            let b = &b[..len as usize];
            if masked_crc(b) != crc {
                return Err(corrupt(&path, off, &format!("{what} checksum mismatch")));
            }
            Ok(b.to_vec())
        };
        let index = read_checked(index_off, index_len, "index block")?;
        let filter = read_checked(filter_off, filter_len, "filter block")?;
        let bad_index = || corrupt(&path, index_off, "malformed index block");
        let (count, mut p) = get_varint64(&index).ok_or_else(bad_index)?;
        if count == 0 || count > index.len() as u64 {
            return Err(bad_index());
        }
        let mut blocks: Vec<BlockHandle> = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let (key, n) = get_length_prefixed(&index[p..]).ok_or_else(bad_index)?;
            p += n;
            let mut vals = [0u64; 3];
            for v in &mut vals {
                let (x, n) = get_varint64(&index[p..]).ok_or_else(bad_index)?;
                *v = x;
                p += n;
            }
            let [offset, len, hot_prefix] = vals;
            let ordered = blocks.last().is_none_or(|b: &BlockHandle| {
                &*b.first_key < key && b.offset + b.len as u64 + 4 == offset
            });
            let in_file = offset
                .checked_add(len + 4)
                .is_some_and(|e| e <= index_off && len <= u32::MAX as u64);
            let prefix_ok = hot_prefix <= info.hot_bytes
                && blocks.last().is_none_or(|b| b.hot_prefix <= hot_prefix);
            if !ordered || !in_file || !prefix_ok || (blocks.is_empty() && offset != 0) {
                return Err(bad_index());
            }
            blocks.push(BlockHandle {
                first_key: key.into(),
                offset,
                len: len as u32,
                hot_prefix,
            });
        }
        let (largest, n) = get_length_prefixed(&index[p..]).ok_or_else(bad_index)?;
        if p + n != index.len() || largest < &*blocks[0].first_key {
            return Err(bad_index());
        }
        run.smallest = blocks[0].first_key.clone();
        run.largest = largest.into();
        run.info = info;
        run.blocks = blocks;
        run.filter = filter;
        Ok(run)
    }
}

/// Writes `image` as run file `number` and syncs it (the directory entry is made durable
/// by the manifest write that follows, which syncs `ralt/`).
fn write_file(env: &Arc<Env>, number: u64, image: &[u8]) -> Result<()> {
    let name = file_name(number);
    let mut file = env.create_writable(Tier::Fast, &name, IoCause::Ralt)?;
    let r = file.append(image).and_then(|_| file.sync());
    if r.is_err() {
        drop(file);
        let _ = env.remove(Tier::Fast, &name);
    }
    r
}

/// A record read back from a run (or copied from the buffer).
#[derive(Clone, Debug)]
pub(crate) struct Rec {
    pub key: Vec<u8>,
    pub meta: Meta,
    pub hot: bool,
}

/// Reads a file's records in key order, from the first record >= `start`. Records are
/// decoded one at a time from the chunk last read, into a record the caller hands back
/// ([`RunCursor::next_reusing`]), so a merge allocates no key per record.
pub(crate) struct RunCursor {
    file: Arc<RunFile>,
    next_block: usize,
    /// The chunk last read (its blocks' checksums verified).
    data: Vec<u8>,
    /// Blocks of `data` not yet decoded: (block index, start, end) in `data`.
    loaded: std::collections::VecDeque<(usize, usize, usize)>,
    /// Decoding position in `data`, inside the first block of `loaded`.
    pos: usize,
    only_hot: bool,
    start: Option<Vec<u8>>,
    /// The last key decoded: keys must rise (meaningless before the first).
    last_key: Vec<u8>,
    decoded_any: bool,
}

impl RunCursor {
    /// `only_hot` skips blocks without hot records and records without the hot bit.
    pub fn new(file: Arc<RunFile>, start: Option<&[u8]>, only_hot: bool) -> RunCursor {
        let next_block = start.map_or(0, |s| file.block_of(s));
        RunCursor {
            file,
            next_block,
            data: Vec::new(),
            loaded: Default::default(),
            pos: 0,
            only_hot,
            start: start.map(|s| s.to_vec()),
            last_key: Vec::new(),
            decoded_any: false,
        }
    }

    /// The next record, decoded into the record `spare` holds if any (taken from it: its
    /// key's allocation is reused; left there when no record is left).
    pub fn next_reusing(&mut self, spare: &mut Option<Rec>) -> Result<Option<Rec>> {
        loop {
            let Some(&(b, start, end)) = self.loaded.front() else {
                if !self.load()? {
                    return Ok(None);
                }
                continue;
            };
            if self.pos >= end {
                self.loaded.pop_front();
                if let Some(&(_, next, _)) = self.loaded.front() {
                    self.pos = next;
                }
                continue;
            }
            let f = &self.file;
            let block = &f.blocks[b];
            let at = block.offset + (self.pos - start) as u64;
            let (key, meta, hot, used) = decode_record(&self.data[self.pos..end])
                .ok_or_else(|| corrupt(&f.path(), at, "malformed record"))?;
            if (self.decoded_any && self.last_key.as_slice() >= key)
                || (self.pos == start && key != &*block.first_key)
                || key > &*f.largest
            {
                return Err(corrupt(&f.path(), at, "keys out of order"));
            }
            self.last_key.clear();
            self.last_key.extend_from_slice(key);
            self.decoded_any = true;
            self.pos += used;
            if (self.only_hot && !hot) || self.start.as_deref().is_some_and(|s| key < s) {
                continue;
            }
            let rec = match spare.take() {
                Some(mut r) => {
                    r.key.clear();
                    r.key.extend_from_slice(key);
                    r.meta = meta;
                    r.hot = hot;
                    r
                }
                None => Rec {
                    key: key.to_vec(),
                    meta,
                    hot,
                },
            };
            return Ok(Some(rec));
        }
    }

    fn block_hot(&self, b: usize) -> u64 {
        self.file.hot_prefix(b + 1) - self.file.hot_prefix(b)
    }

    /// Reads the next run of wanted blocks (one I/O up to [`SCAN_CHUNK`]) and verifies
    /// their checksums.
    fn load(&mut self) -> Result<bool> {
        let f = self.file.clone();
        let n = f.blocks.len();
        if self.only_hot {
            while self.next_block < n && self.block_hot(self.next_block) == 0 {
                self.next_block += 1;
            }
        }
        if self.next_block >= n {
            return Ok(false);
        }
        let first = self.next_block;
        let mut last = first;
        let mut span = f.blocks[first].len as usize + 4;
        while last + 1 < n
            && span + f.blocks[last + 1].len as usize + 4 <= SCAN_CHUNK
            && !(self.only_hot && self.block_hot(last + 1) == 0)
        {
            last += 1;
            span += f.blocks[last].len as usize + 4;
        }
        self.next_block = last + 1;
        let base = f.blocks[first].offset;
        match f.read(base, span)? {
            Cow::Owned(v) => self.data = v,
            Cow::Borrowed(b) => {
                self.data.clear();
                self.data.extend_from_slice(b);
            }
        }
        for (i, b) in f.blocks[first..=last].iter().enumerate() {
            let s = (b.offset - base) as usize;
            let e = s + b.len as usize;
            let crc = self
                .data
                .get(e..e + 4)
                .map(decode_fixed32)
                .ok_or_else(|| corrupt(&f.path(), b.offset, "block past the chunk read"))?;
            if masked_crc(&self.data[s..e]) != crc {
                return Err(corrupt(&f.path(), b.offset, "data block checksum mismatch"));
            }
            self.loaded.push_back((first + i, s, e));
        }
        self.pos = self.loaded.front().map_or(0, |&(_, s, _)| s);
        Ok(true)
    }
}

/// Builds one run's image in memory. Keys must be added in strictly increasing order.
/// When complete the run stays in memory if `MemRuns` has room, else it is written as
/// its file.
pub(crate) struct RunWriter {
    env: Arc<Env>,
    number: u64,
    runs: Arc<MemRuns>,
    image: Vec<u8>,
    block: Vec<u8>,
    block_first: Vec<u8>,
    block_hot_start: u64,
    blocks: Vec<BlockHandle>,
    offset: u64,
    bloom: BloomBuilder,
    info: RunInfo,
    last_key: Vec<u8>,
}

impl RunWriter {
    pub fn create(
        env: &Arc<Env>,
        number: u64,
        bits_per_key: usize,
        runs: &Arc<MemRuns>,
    ) -> Result<RunWriter> {
        Ok(RunWriter {
            env: env.clone(),
            number,
            runs: runs.clone(),
            image: Vec::new(),
            block: Vec::with_capacity(BLOCK_SIZE + 256),
            block_first: Vec::new(),
            block_hot_start: 0,
            blocks: Vec::new(),
            offset: 0,
            bloom: BloomBuilder::new(bits_per_key),
            info: RunInfo::default(),
            last_key: Vec::new(),
        })
    }

    /// Bytes written so far, counting the open block.
    pub fn len(&self) -> u64 {
        self.offset + self.block.len() as u64
    }

    /// Adds a record; `dup` says its key is already hot in a deeper file (see
    /// [`RunInfo::fresh_hot_bytes`]).
    pub fn add(&mut self, key: &[u8], meta: &Meta, hot: bool, dup: bool) -> Result<()> {
        if self.info.records > 0 && key <= self.last_key.as_slice() {
            return Err(Error::InvalidArgument(
                "RALT run keys must be added in increasing order".into(),
            ));
        }
        if self.block.len() >= BLOCK_SIZE {
            self.finish_block()?;
        }
        if self.block.is_empty() {
            self.block_first = key.to_vec();
            self.block_hot_start = self.info.hot_bytes;
        }
        encode_record(&mut self.block, key, meta, hot);
        let hotrap = key.len() as u64 + meta.value_len as u64;
        self.info.records += 1;
        self.info.hotrap_bytes += hotrap;
        self.info.record_bytes += encoded_len(key.len(), meta) as u64;
        if hot {
            self.info.hot_records += 1;
            self.info.hot_bytes += hotrap;
            if !dup {
                self.info.fresh_hot_bytes += hotrap;
            }
            self.bloom.add_key(key);
        }
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        Ok(())
    }

    fn finish_block(&mut self) -> Result<()> {
        let crc = masked_crc(&self.block);
        self.image.extend_from_slice(&self.block);
        put_fixed32(&mut self.image, crc);
        self.blocks.push(BlockHandle {
            first_key: std::mem::take(&mut self.block_first).into(),
            offset: self.offset,
            len: self.block.len() as u32,
            hot_prefix: self.block_hot_start,
        });
        self.offset += self.block.len() as u64 + 4;
        self.block.clear();
        Ok(())
    }

    /// Drops the partly built run (on an error path; nothing is on disk yet).
    pub fn abandon(self) {}

    /// Completes the run: kept in memory if it fits `MemRuns`, else written and synced as
    /// its file and opened for reading; `None` (and no file) when no record was added.
    pub fn finish(mut self) -> Result<Option<RunFile>> {
        if self.info.records == 0 {
            self.abandon();
            return Ok(None);
        }
        if !self.block.is_empty() {
            self.finish_block()?;
        }
        let mut index = Vec::new();
        put_varint64(&mut index, self.blocks.len() as u64);
        for b in &self.blocks {
            put_length_prefixed(&mut index, &b.first_key);
            put_varint64(&mut index, b.offset);
            put_varint64(&mut index, b.len as u64);
            put_varint64(&mut index, b.hot_prefix);
        }
        put_length_prefixed(&mut index, &self.last_key);
        let filter = self.bloom.finish();
        let index_off = self.offset;
        let filter_off = index_off + index.len() as u64 + 4;
        let mut tail = Vec::with_capacity(index.len() + filter.len() + FOOTER_LEN + 8);
        tail.extend_from_slice(&index);
        put_fixed32(&mut tail, masked_crc(&index));
        tail.extend_from_slice(&filter);
        put_fixed32(&mut tail, masked_crc(&filter));
        let mut foot = Vec::with_capacity(FOOTER_LEN);
        put_fixed64(&mut foot, index_off);
        put_fixed32(&mut foot, index.len() as u32);
        put_fixed64(&mut foot, filter_off);
        put_fixed32(&mut foot, filter.len() as u32);
        for v in [
            self.info.records,
            self.info.hot_records,
            self.info.hotrap_bytes,
            self.info.hot_bytes,
            self.info.record_bytes,
            self.info.fresh_hot_bytes,
        ] {
            put_fixed64(&mut foot, v);
        }
        put_fixed32(&mut foot, FORMAT_VERSION);
        put_fixed64(&mut foot, MAGIC);
        let crc = masked_crc(&foot);
        put_fixed32(&mut foot, crc);
        tail.extend_from_slice(&foot);
        self.image.extend_from_slice(&tail);
        let image = std::mem::take(&mut self.image);
        let size = image.len() as u64;
        let name = file_name(self.number);
        let data = if self.runs.take(size) {
            Data::Mem {
                image,
                persisted: AtomicBool::new(false),
                runs: self.runs.clone(),
            }
        } else {
            write_file(&self.env, self.number, &image)?;
            drop(image);
            Data::Disk(Box::new(self.env.open_random(Tier::Fast, &name)?))
        };
        let smallest = self.blocks[0].first_key.clone();
        Ok(Some(RunFile {
            number: self.number,
            size,
            smallest,
            largest: std::mem::take(&mut self.last_key).into(),
            info: self.info,
            blocks: std::mem::take(&mut self.blocks),
            filter,
            data,
            env: self.env.clone(),
            obsolete: AtomicBool::new(false),
        }))
    }
}

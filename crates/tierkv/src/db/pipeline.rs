//! The completion-driven disk stages of many point reads on one thread: the io_uring
//! read path of [`crate::Db::multi_get`] and of the streaming [`crate::Db::get_pipelined`].
//!
//! Each key is a resumable [`DiskGet`] (`read.rs`). A [`Pipeline`] advances a key as far
//! as it goes without I/O; a key that needs a data block waits on that block's read,
//! which starts at once unless the same block (table, offset) is already in flight, in
//! which case the key joins its waiters (a block is never read twice at the same time).
//! Each [`Pipeline::turn`] submits every read started since the last one (one
//! `io_uring_enter`, through `env`'s `ReadSession`), and as reads complete, hands each
//! block to every key waiting on it and advances those keys at once; their next reads
//! go out with the next turn. A turn waits for a completion only when asked to (its
//! caller has nothing else to do). There is no round: a key whose block comes back
//! early is answered (or reads its next block) while slower reads are still in flight.

use super::read::DiskGet;
use super::read::DiskStep;
use super::DbInner;
use crate::env::{HoldsFile, IoCause, RandomAccessFile, ReadSession};
use crate::error::{Error, Result};
use crate::expiry::Entry;
use crate::sst::block::Block;
use crate::sst::format::BlockHandle;
use crate::sst::Table;
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

impl HoldsFile for Arc<Table> {
    fn file(&self) -> &RandomAccessFile {
        Table::file(self)
    }
}

/// Where a key's answer goes: its tag and its answer (a key whose disk stages panicked
/// is answered [`Error::Closed`], as a panicking reader-pool job's key is).
pub(super) type OnAnswer<'f, T> = dyn FnMut(T, Result<Option<Entry>>) + 'f;

/// A key waiting for a block.
struct Waiting<'a, T> {
    tag: T,
    g: DiskGet<'a>,
}

/// A block read in flight and the keys waiting for it: `first`, then `more` (empty, so
/// unallocated, unless keys share the block).
struct BlockRead {
    table: Arc<Table>,
    handle: BlockHandle,
    first: usize,
    more: Vec<usize>,
}

/// Hashes a block's (table number, offset) for [`Pipeline`]'s map of reads in flight:
/// one multiply per word (the map holds at most a window of this thread's own keys, so
/// a keyed hash's flooding resistance buys nothing here, and SipHash was a visible
/// share of a pipelined key's CPU).
#[derive(Default, Clone, Copy)]
struct BlockIdHasher(u64);

impl std::hash::Hasher for BlockIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        // Fibonacci hashing; the rotation moves the product's well-mixed high bits down
        // to where the table takes its bucket index.
        self.0 = (self.0 ^ n)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(26);
    }
}

type BlockIds = HashMap<(u64, u64), usize, std::hash::BuildHasherDefault<BlockIdHasher>>;

/// The keys of one thread's pipelined reads and their block reads in flight.
pub(super) struct Pipeline<'a, T> {
    db: &'a DbInner,
    io: ReadSession<Arc<Table>>,
    keys: Vec<Option<Waiting<'a, T>>>,
    free_keys: Vec<usize>,
    blocks: Vec<Option<BlockRead>>,
    free_blocks: Vec<usize>,
    /// The in-flight read of each block, by (table number, offset).
    by_block: BlockIds,
    done: Vec<(usize, Result<Vec<u8>>)>,
}

impl<'a, T> Pipeline<'a, T> {
    /// An empty pipeline over this thread's ring (without one, each read runs at once).
    pub(super) fn new(db: &'a DbInner) -> Pipeline<'a, T> {
        Pipeline {
            db,
            io: ReadSession::new(),
            keys: Vec::new(),
            free_keys: Vec::new(),
            blocks: Vec::new(),
            free_blocks: Vec::new(),
            by_block: BlockIds::default(),
            done: Vec::new(),
        }
    }

    /// Keys not answered yet.
    pub(super) fn keys_in_flight(&self) -> usize {
        self.keys.len() - self.free_keys.len()
    }

    /// Takes a key's disk stages: advances them at once (answering the key if no block
    /// must be read) and starts the read of the block it needs.
    pub(super) fn add(&mut self, tag: T, g: DiskGet<'a>, on_answer: &mut OnAnswer<'_, T>) {
        self.step(tag, g, None, on_answer);
    }

    /// Submits the reads started since the last turn and goes on with every key whose
    /// block has come back (see the module doc). `wait`: if none has, wait for one.
    pub(super) fn turn(&mut self, wait: bool, on_answer: &mut OnAnswer<'_, T>) {
        let mut done = std::mem::take(&mut self.done);
        let waiting = wait && self.keys_in_flight() > 0;
        self.io.turn(waiting, &mut done);
        if waiting && done.is_empty() && self.io.in_flight() == 0 {
            // A waiting turn delivers something whenever a read is in flight: keys still
            // waiting now wait on nothing (a bug). They fail rather than hang.
            self.orphans(on_answer);
        }
        for (b, data) in done.drain(..) {
            let Some(read) = self.blocks.get_mut(b).and_then(Option::take) else {
                continue;
            };
            self.free_blocks.push(b);
            self.by_block
                .remove(&(read.table.number(), read.handle.offset));
            let block = data.and_then(|framed| read.table.block_from_disk(read.handle, &framed));
            let mut block = Some(block);
            let last = read.more.len();
            let waiters = std::iter::once(read.first).chain(read.more);
            for (i, k) in waiters.enumerate() {
                let Some(w) = self.keys.get_mut(k).and_then(Option::take) else {
                    continue;
                };
                self.free_keys.push(k);
                // Keys sharing a block take copies (a block is a shared buffer); the last
                // takes the original.
                let b = if i == last {
                    block.take().unwrap_or(Err(Error::Closed))
                } else {
                    block.as_ref().map_or(Err(Error::Closed), copy_result)
                };
                self.step(w.tag, w.g, Some(b), on_answer);
            }
        }
        self.done = done;
    }

    /// Answers every waiting key `Error::Closed` and forgets every block read.
    fn orphans(&mut self, on_answer: &mut OnAnswer<'_, T>) {
        tracing::error!("pipelined reads: keys waiting on no read; failing them");
        self.blocks.clear();
        self.free_blocks.clear();
        self.by_block.clear();
        self.free_keys.clear();
        for w in std::mem::take(&mut self.keys).into_iter().flatten() {
            on_answer(w.tag, Err(Error::Closed));
        }
    }

    /// Advances a key with `block` (the result of the read it waited for, if any).
    fn step(
        &mut self,
        tag: T,
        mut g: DiskGet<'a>,
        block: Option<Result<Block>>,
        on_answer: &mut OnAnswer<'_, T>,
    ) {
        let db = self.db;
        let step = catch_unwind(AssertUnwindSafe(|| db.advance(&mut g, block)));
        match step {
            Ok(Ok(DiskStep::Read(table, h))) => self.wait_for(tag, g, table, h),
            Ok(Ok(DiskStep::Answer(answer))) => on_answer(tag, Ok(answer)),
            Ok(Err(e)) => on_answer(tag, Err(e)),
            Err(_) => on_answer(tag, Err(Error::Closed)),
        }
    }

    /// Parks a key on the read of block `h` of `table`, starting that read unless it is
    /// in flight already.
    fn wait_for(&mut self, tag: T, g: DiskGet<'a>, table: Arc<Table>, h: BlockHandle) {
        let k = match self.free_keys.pop() {
            Some(k) => k,
            None => {
                self.keys.push(None);
                self.keys.len() - 1
            }
        };
        self.keys[k] = Some(Waiting { tag, g });
        let id = (table.number(), h.offset);
        if let Some(read) = self
            .by_block
            .get(&id)
            .and_then(|&b| self.blocks[b].as_mut())
        {
            read.more.push(k);
            return;
        }
        let b = match self.free_blocks.pop() {
            Some(b) => b,
            None => {
                self.blocks.push(None);
                self.blocks.len() - 1
            }
        };
        self.by_block.insert(id, b);
        let len = table.framed_len(h);
        self.blocks[b] = Some(BlockRead {
            table: table.clone(),
            handle: h,
            first: k,
            more: Vec::new(),
        });
        match len {
            Ok(len) => self.io.start(table, h.offset, len, IoCause::UserGet, b),
            Err(e) => self.io.fail(b, e),
        }
    }
}

/// A copy of a block read's result for a second key waiting on the same block (`Error`
/// is not `Clone`: an I/O error keeps its path and OS error code, a corruption all of
/// its fields).
pub(super) fn copy_result(r: &Result<Block>) -> Result<Block> {
    match r {
        Ok(b) => Ok(b.clone()),
        Err(Error::Io { path, source }) => Err(Error::io(
            path.clone(),
            match source.raw_os_error() {
                Some(code) => std::io::Error::from_raw_os_error(code),
                None => std::io::Error::new(source.kind(), source.to_string()),
            },
        )),
        Err(Error::Corruption {
            path,
            offset,
            reason,
        }) => Err(Error::corruption(path.clone(), *offset, reason.clone())),
        Err(e) => Err(Error::InvalidArgument(e.to_string())),
    }
}

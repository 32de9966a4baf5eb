//! The memtable's ordered index: a skiplist whose nodes (links, internal key and value in
//! one piece each) are carved from an arena that the list frees in one go when it is
//! dropped, as LevelDB's `db/skiplist.h` over `util/arena.h`.
//!
//! One writer at a time, any number of readers without locks. Inserts take a mutex (the
//! write path already serializes them, so it is never contended); a node is written whole
//! before a release store links it in, and readers follow links with acquire loads, so a
//! reader sees a node complete or not at all. Nodes are never changed (but for their links)
//! or freed while the list lives, so a reader needs no epoch and no reference count: a
//! node it reached lives as long as the list it borrowed. That is what this module buys
//! over `crossbeam_skiplist::SkipMap` (the memtable's index until stop 40): no epoch pin
//! per operation, no allocation per entry, and 144 bytes of memory per entry of an
//! 8-byte key and a 100-byte value instead of about 245, so a memtable of the same size
//! holds 1.7x the entries.
//!
//! It owns the node layout, the arena and the order of publication, and knows keys only as
//! byte strings ordered by [`compare_internal`]: sequence numbers, filters, sizes and
//! flushes are the memtable's. It is one of the two modules with `unsafe` code (every block
//! has its `SAFETY:` comment; docs/ARCHITECTURE.md lists them).

use crate::key::compare_internal;
use parking_lot::Mutex;
use std::alloc::Layout;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// Tallest tower. Each further level comes with probability 1/4, so 12 levels keep a
/// search logarithmic up to 4^12 (16M) entries, far more than a memtable holds.
pub(crate) const MAX_HEIGHT: usize = 12;
/// Bytes before a node's links: `key_len << 8 | height`, then `value_len`.
const HEADER: usize = 16;
/// Bytes per link.
const LINK: usize = std::mem::size_of::<AtomicPtr<Node>>();
/// Node alignment: the links are pointers.
const ALIGN: usize = std::mem::align_of::<AtomicPtr<Node>>();
/// Bytes of an arena chunk, at most: a list's chunks are a 32nd of the size it is expected
/// to reach, between [`MIN_CHUNK`] and this, so that the one chunk a list has allocated but
/// not filled, which [`SkipList::memory`] does not count, stays within about 3% of the
/// list's memory (a memtable of a small memory budget is tens of KiB). A node larger than a
/// quarter of a chunk gets a chunk of its own, so the tail a chunk leaves unused is under a
/// quarter of it (in practice under one node).
const CHUNK: usize = 64 << 10;
/// Bytes of an arena chunk, at least (LevelDB's arena block).
const MIN_CHUNK: usize = 4 << 10;

/// Source of list identities, so that a [`Position`] is only ever read by its own list.
static NEXT_LIST_ID: AtomicU64 = AtomicU64::new(1);

/// Bytes of arena a node of these sizes takes (`key_len` is the whole internal key).
pub(crate) const fn node_size(key_len: usize, value_len: usize, height: usize) -> usize {
    (HEADER + height * LINK + key_len + value_len).next_multiple_of(ALIGN)
}

/// A node's fixed part. The links, the key and the value follow it in the same chunk;
/// they are reached through raw pointers derived from the chunk's allocation, never
/// through a reference to `Node` (whose 16 bytes would not cover them).
#[repr(C)]
struct Node {
    /// `key_len << 8 | height`.
    meta: u64,
    value_len: u64,
}

/// What a node's raw-pointer accessors require of the pointer: it points to a node that
/// `Writer::write_node` wrote whole and that was published (or is the head), in a list
/// that is still alive, and the returned borrows do not outlive that list.
impl Node {
    /// The link at `level` (< the node's height).
    /// SAFETY: see the `impl` comment.
    unsafe fn link<'a>(node: *const Node, level: usize) -> &'a AtomicPtr<Node> {
        // SAFETY: the links start right after the header, in the same allocation, and
        // were initialized as atomics before publication; they are only accessed
        // atomically afterwards.
        unsafe {
            &*node
                .cast::<u8>()
                .add(HEADER + level * LINK)
                .cast::<AtomicPtr<Node>>()
        }
    }

    /// The next node at `level`, or null at the end.
    /// SAFETY: see the `impl` comment.
    unsafe fn next(node: *const Node, level: usize) -> *const Node {
        // SAFETY: as `link`. Acquire pairs with the writer's release store of the link,
        // so the pointed-to node's contents are visible.
        unsafe { Self::link(node, level).load(Ordering::Acquire) }
    }

    /// The node's key and value.
    /// SAFETY: see the `impl` comment.
    unsafe fn entry<'a>(node: *const Node) -> (&'a [u8], &'a [u8]) {
        // SAFETY: key and value were copied in before publication, right after the links,
        // and are never written again while the list lives.
        unsafe {
            let meta = (*node).meta;
            let key_len = (meta >> 8) as usize;
            let key = node
                .cast::<u8>()
                .add(HEADER + (meta & 0xff) as usize * LINK);
            let value_len = (*node).value_len as usize;
            (
                std::slice::from_raw_parts(key, key_len),
                std::slice::from_raw_parts(key.add(key_len), value_len),
            )
        }
    }

    /// The node's key.
    /// SAFETY: see the `impl` comment.
    unsafe fn key<'a>(node: *const Node) -> &'a [u8] {
        // SAFETY: as `entry`.
        unsafe { Self::entry(node).0 }
    }
}

/// The writer's side: the arena and the tower-height generator, behind the list's mutex.
struct Writer {
    /// Bytes of a chunk (see [`CHUNK`]).
    chunk: usize,
    /// Every chunk allocated, freed when the list is dropped.
    chunks: Vec<(NonNull<u8>, Layout)>,
    /// Next free byte of the current chunk, and the bytes left after it.
    free: NonNull<u8>,
    left: usize,
    /// xorshift state for tower heights.
    rng: u64,
}

// SAFETY: the raw pointers are into chunks this `Writer` owns alone (the list's readers
// only read published nodes in them), so moving it to another thread moves that ownership.
unsafe impl Send for Writer {}

impl Writer {
    /// A tower height: 1, and each further level with probability 1/4.
    fn random_height(&mut self) -> usize {
        let mut height = 1;
        while height < MAX_HEIGHT {
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            if self.rng & 3 != 0 {
                break;
            }
            height += 1;
        }
        height
    }

    /// `size` bytes (a multiple of `ALIGN`) of arena, aligned to `ALIGN`.
    fn alloc(&mut self, size: usize) -> NonNull<u8> {
        if size > self.chunk / 4 {
            return self.new_chunk(size);
        }
        if size > self.left {
            self.free = self.new_chunk(self.chunk);
            self.left = self.chunk;
        }
        let p = self.free;
        // SAFETY: `size <= self.left`, so `p + size` is within (or one past) the chunk.
        self.free = unsafe { p.add(size) };
        self.left -= size;
        p
    }

    fn new_chunk(&mut self, size: usize) -> NonNull<u8> {
        let Ok(layout) = Layout::from_size_align(size, ALIGN) else {
            // A node's size is bounded by the key and value limits (16 MiB, 4 GiB), far
            // below `isize::MAX`.
            std::alloc::handle_alloc_error(Layout::new::<u64>())
        };
        // SAFETY: `layout` has a non-zero size (a node has at least its header).
        let p = unsafe { std::alloc::alloc(layout) };
        let Some(chunk) = NonNull::new(p) else {
            std::alloc::handle_alloc_error(layout)
        };
        self.chunks.push((chunk, layout));
        chunk
    }

    /// Writes a node with `height` null links, `key` and `value`, not yet linked in.
    fn write_node(&mut self, key: &[u8], value: &[u8], height: usize) -> NonNull<Node> {
        let size = node_size(key.len(), value.len(), height);
        let chunk = self.alloc(size);
        let p = chunk.as_ptr();
        // SAFETY: `p` is `size` fresh bytes of arena, aligned for `Node` and the links,
        // that no reader can reach before the node is linked in: every write below stays
        // within them (header, `height` links, key, value: `node_size`).
        unsafe {
            let node = p.cast::<Node>();
            ptr::write(
                node,
                Node {
                    meta: (key.len() as u64) << 8 | height as u64,
                    value_len: value.len() as u64,
                },
            );
            let links = p.add(HEADER).cast::<AtomicPtr<Node>>();
            for level in 0..height {
                ptr::write(links.add(level), AtomicPtr::new(ptr::null_mut()));
            }
            let k = p.add(HEADER + height * LINK);
            ptr::copy_nonoverlapping(key.as_ptr(), k, key.len());
            ptr::copy_nonoverlapping(value.as_ptr(), k.add(key.len()), value.len());
        }
        chunk.cast()
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        for (chunk, layout) in self.chunks.drain(..) {
            // SAFETY: allocated by `new_chunk` with this layout, freed once; the list
            // that is being dropped was the last user of its nodes.
            unsafe { std::alloc::dealloc(chunk.as_ptr(), layout) };
        }
    }
}

/// A node of a particular list, as a cursor holds it. Only its own list reads it (each
/// method checks), and the holder keeps that list alive (e.g. through an `Arc`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Position {
    list: u64,
    node: NonNull<Node>,
}

// SAFETY: a position is an address that only its own list dereferences, for readers that
// may be on any thread (the list is `Sync`).
unsafe impl Send for Position {}
// SAFETY: as `Send`: a shared position gives no access of its own.
unsafe impl Sync for Position {}

/// See the module comment.
pub(crate) struct SkipList {
    id: u64,
    /// The head: a node of `MAX_HEIGHT` links and no key, before every entry.
    head: NonNull<Node>,
    /// Height of the tallest tower linked so far: searches start there. Relaxed: a reader
    /// that sees a new height before the links at it finds them null and moves down.
    height: AtomicUsize,
    len: AtomicUsize,
    /// Bytes of the nodes written (the arena's chunks hold them, the unused tails of full
    /// chunks, and at most one chunk more).
    memory: AtomicUsize,
    writer: Mutex<Writer>,
}

// SAFETY: shared state is either atomic (links, counters) or behind the writer's mutex
// (the arena); node contents are written before publication and never after, and are
// freed only when the list is dropped, which no reader can outlive.
unsafe impl Send for SkipList {}
// SAFETY: as `Send`.
unsafe impl Sync for SkipList {}

impl SkipList {
    /// An empty list expected to hold about `expected_bytes` of nodes (it may hold more).
    pub(crate) fn new(expected_bytes: usize) -> Self {
        let id = NEXT_LIST_ID.fetch_add(1, Ordering::Relaxed);
        let mut writer = Writer {
            chunk: (expected_bytes / 32).clamp(MIN_CHUNK, CHUNK) / ALIGN * ALIGN,
            chunks: Vec::new(),
            free: NonNull::dangling(),
            left: 0,
            // Any non-zero seed (xorshift stays at zero); the list's id varies it.
            rng: (0x9E37_79B9_7F4A_7C15 ^ id.wrapping_mul(0xA24B_AED4_963E_E407)) | 1,
        };
        let head = writer.write_node(&[], &[], MAX_HEIGHT);
        SkipList {
            id,
            head,
            height: AtomicUsize::new(1),
            len: AtomicUsize::new(0),
            memory: AtomicUsize::new(0),
            writer: Mutex::new(writer),
        }
    }

    /// Inserts `key` (an encoded internal key, not already present) with `value`.
    pub(crate) fn insert(&self, key: &[u8], value: &[u8]) {
        let mut writer = self.writer.lock();
        // The last node before `key` at each level, as the writer (the only one that
        // links nodes in) sees them under its lock.
        let mut prev = [self.head.as_ptr().cast_const(); MAX_HEIGHT];
        let top = self.height.load(Ordering::Relaxed);
        self.find_recording(key, |level, x| prev[level] = x);
        let height = writer.random_height();
        if height > top {
            self.height.store(height, Ordering::Relaxed);
        }
        let node = writer.write_node(key, value, height).as_ptr();
        for (level, before) in prev.iter().enumerate().take(height) {
            // SAFETY: `node` was written whole by `write_node` with `height` links, and
            // `before` is the head or a node of this list whose tower reaches `level`
            // (it was found at that level). The new node's own link is set before the
            // release store that publishes it at this level.
            unsafe {
                let after = Node::link(*before, level).load(Ordering::Relaxed);
                Node::link(node, level).store(after, Ordering::Relaxed);
                Node::link(*before, level).store(node, Ordering::Release);
            }
        }
        self.memory
            .fetch_add(node_size(key.len(), value.len(), height), Ordering::Relaxed);
        self.len.fetch_add(1, Ordering::Release);
    }

    /// The last node before `target` (the head when none is), and the first at or after it.
    fn find(&self, target: &[u8]) -> (*const Node, *const Node) {
        self.find_recording(target, |_, _| {})
    }

    /// [`SkipList::find`], calling `at_level` with each level (top down) and the last node
    /// before `target` on it (what an insert links its new node after).
    fn find_recording(
        &self,
        target: &[u8],
        mut at_level: impl FnMut(usize, *const Node),
    ) -> (*const Node, *const Node) {
        let mut x = self.head.as_ptr().cast_const();
        let mut level = self.height.load(Ordering::Relaxed);
        loop {
            level -= 1;
            let next = loop {
                // SAFETY: `x` is the head or a node reached by links, in this list.
                let next = unsafe { Node::next(x, level) };
                // SAFETY: as above.
                if !next.is_null() && compare_internal(unsafe { Node::key(next) }, target).is_lt() {
                    x = next;
                } else {
                    break next;
                }
            };
            at_level(level, x);
            if level == 0 {
                // The link read here, not a second load: a node linked in since may lie
                // before `target`.
                return (x, next);
            }
        }
    }

    fn position(&self, node: *const Node) -> Option<Position> {
        if node == self.head.as_ptr().cast_const() {
            return None;
        }
        NonNull::new(node.cast_mut()).map(|node| Position {
            list: self.id,
            node,
        })
    }

    fn node(&self, pos: Position) -> *const Node {
        assert_eq!(pos.list, self.id, "a position read by another list");
        pos.node.as_ptr().cast_const()
    }

    /// The first entry at or after `target`.
    pub(crate) fn seek(&self, target: &[u8]) -> Option<Position> {
        self.position(self.find(target).1)
    }

    /// The last entry before `target`.
    pub(crate) fn seek_before(&self, target: &[u8]) -> Option<Position> {
        self.position(self.find(target).0)
    }

    /// The first entry.
    pub(crate) fn first(&self) -> Option<Position> {
        // SAFETY: the head has `MAX_HEIGHT` links.
        self.position(unsafe { Node::next(self.head.as_ptr(), 0) })
    }

    /// The last entry.
    pub(crate) fn last(&self) -> Option<Position> {
        let mut x = self.head.as_ptr().cast_const();
        let mut level = self.height.load(Ordering::Relaxed);
        while level > 0 {
            level -= 1;
            loop {
                // SAFETY: `x` is the head or a node reached by links, in this list.
                let next = unsafe { Node::next(x, level) };
                if next.is_null() {
                    break;
                }
                x = next;
            }
        }
        self.position(x)
    }

    /// The entry after `pos`.
    pub(crate) fn next(&self, pos: Position) -> Option<Position> {
        // SAFETY: `node` checked that `pos` is of this list, which is alive (borrowed).
        self.position(unsafe { Node::next(self.node(pos), 0) })
    }

    /// The key and value at `pos`, borrowed from the list.
    pub(crate) fn entry(&self, pos: Position) -> (&[u8], &[u8]) {
        // SAFETY: `node` checked that `pos` is of this list; the borrow is the list's.
        unsafe { Node::entry(self.node(pos)) }
    }

    /// Every entry, in order (entries inserted meanwhile may or may not be seen).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        std::iter::successors(self.first(), |p| self.next(*p)).map(|p| self.entry(p))
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// Bytes of the entries' nodes ([`node_size`] each).
    pub(crate) fn memory(&self) -> usize {
        self.memory.load(Ordering::Relaxed)
    }

    /// Bytes of the chunks allocated (for tests of what `memory` leaves out).
    #[cfg(test)]
    fn allocated(&self) -> usize {
        self.writer
            .lock()
            .chunks
            .iter()
            .map(|(_, l)| l.size())
            .sum()
    }

    /// Height of the tallest tower (for tests of the height distribution).
    #[cfg(test)]
    fn height(&self) -> usize {
        self.height.load(Ordering::Relaxed)
    }
}

impl std::fmt::Debug for SkipList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SkipList")
            .field("len", &self.len())
            .field("memory", &self.memory())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{make_internal_key, ValueKind};
    use std::cmp::Ordering as Cmp;
    use std::collections::BTreeMap;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    /// A model key ordered by `compare_internal`, as the list orders its keys.
    #[derive(Clone, PartialEq, Eq, Debug)]
    struct K(Vec<u8>);
    impl Ord for K {
        fn cmp(&self, o: &Self) -> Cmp {
            cmp(&self.0, &o.0)
        }
    }
    impl PartialOrd for K {
        fn partial_cmp(&self, o: &Self) -> Option<Cmp> {
            Some(self.cmp(o))
        }
    }

    fn cmp(a: &[u8], b: &[u8]) -> Cmp {
        compare_internal(a, b)
    }

    fn ikey(user: &[u8], seq: u64) -> Vec<u8> {
        make_internal_key(user, seq, ValueKind::Value)
    }

    /// Invariant: the list answers every positional question (seek, seek_before, first,
    /// last, next, iteration) as a `BTreeMap` ordered by `compare_internal` holding the
    /// same entries, for keys of every length (empty to past a chunk's quarter) and
    /// values up to a chunk of their own.
    #[test]
    fn answers_as_an_ordered_map_would() {
        let list = SkipList::new(0);
        let mut model = BTreeMap::new();
        let mut rng = 0x1234_5678_u64;
        let mut step = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let entries = if cfg!(miri) { 150 } else { 3_000u64 };
        for seq in 1..=entries {
            let r = step();
            let user_len = [0, 1, 3, 8, 8, 8, 24, 100][(r % 8) as usize];
            let user: Vec<u8> = (0..user_len)
                .map(|i| (r >> (i % 8 * 8)) as u8 % 5)
                .collect();
            let value_len = match r % 97 {
                0 => CHUNK / 4 + 1,
                1 => CHUNK * 2,
                n => n as usize,
            };
            let value = vec![(seq % 251) as u8; value_len];
            let k = ikey(&user, seq);
            list.insert(&k, &value);
            model.insert(K(k), value);
        }
        assert_eq!(list.len(), model.len());
        assert!(list.height() > 1 && list.height() <= MAX_HEIGHT);
        let all: Vec<(Vec<u8>, Vec<u8>)> =
            list.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
        let expected: Vec<(Vec<u8>, Vec<u8>)> = model
            .iter()
            .map(|(k, v)| (k.0.clone(), v.clone()))
            .collect();
        assert_eq!(all, expected);
        let key_at = |p: Option<Position>| p.map(|p| list.entry(p).0.to_vec());
        assert_eq!(
            key_at(list.first()),
            model.keys().next().map(|k| k.0.clone())
        );
        assert_eq!(
            key_at(list.last()),
            model.keys().last().map(|k| k.0.clone())
        );
        for _ in 0..entries {
            let r = step();
            let user: Vec<u8> = (0..(r % 9)).map(|i| (r >> (i * 7)) as u8 % 5).collect();
            let target = ikey(&user, r % 4_000);
            let t = K(target.clone());
            let ge = model.range(t.clone()..).next().map(|(k, _)| k.0.clone());
            let lt = model.range(..t).next_back().map(|(k, _)| k.0.clone());
            let at = list.seek(&target);
            assert_eq!(key_at(at), ge);
            assert_eq!(key_at(list.seek_before(&target)), lt);
            if let Some(p) = at {
                let after = model
                    .range((
                        std::ops::Bound::Excluded(K(list.entry(p).0.to_vec())),
                        std::ops::Bound::Unbounded,
                    ))
                    .next()
                    .map(|(k, _)| k.0.clone());
                assert_eq!(key_at(list.next(p)), after);
            }
        }
    }

    #[test]
    fn empty_list_has_no_positions() {
        let list = SkipList::new(1 << 20);
        assert!(list.first().is_none() && list.last().is_none());
        assert!(list.seek(&ikey(b"a", 1)).is_none());
        assert!(list.seek_before(&ikey(b"a", 1)).is_none());
        assert_eq!((list.len(), list.memory(), list.iter().count()), (0, 0, 0));
    }

    /// Invariant: `memory` counts each entry's node, as `node_size` states it, so the
    /// memtable's size (and the write path's room check) tracks the arena.
    #[test]
    fn memory_counts_every_node() {
        let list = SkipList::new(1 << 20);
        list.insert(&ikey(b"12345678", 1), &[7; 100]);
        let one = list.memory();
        assert!(one >= node_size(16, 100, 1) && one <= node_size(16, 100, MAX_HEIGHT));
        list.insert(&ikey(b"big", 2), &vec![1; CHUNK * 3]);
        assert!(list.memory() - one >= CHUNK * 3);
    }

    /// Invariant (budgets hold): what `memory` does not count, the chunk being filled and
    /// the tails of full ones, stays within a chunk of a 32nd of the expected size and a
    /// few percent: a memtable of a small budget is not under-counted by a 64 KiB chunk.
    #[test]
    fn chunks_are_sized_to_the_expected_list() {
        for expected in [0, 100 << 10, 1 << 20, 64 << 20] {
            let list = SkipList::new(expected);
            let chunk = (expected / 32).clamp(MIN_CHUNK, CHUNK);
            for seq in 1..=2_000u64 {
                list.insert(&ikey(&seq.to_be_bytes(), seq), &[3; 100]);
            }
            let (used, allocated) = (list.memory(), list.allocated());
            assert!(allocated >= used + node_size(0, 0, MAX_HEIGHT));
            assert!(
                allocated <= used + used / 20 + chunk + node_size(0, 0, MAX_HEIGHT),
                "expected {expected}: {allocated} allocated for {used} of nodes"
            );
        }
    }

    /// A position can only be read by the list it came from: another list's read would
    /// dereference a node it does not own.
    #[test]
    #[should_panic(expected = "another list")]
    fn a_position_from_another_list_is_refused() {
        let a = SkipList::new(1 << 20);
        let b = SkipList::new(1 << 20);
        a.insert(&ikey(b"k", 1), b"v");
        let p = a.first().unwrap();
        let _ = b.entry(p);
    }

    /// Invariant (lock-free readers): while one thread inserts, readers on other threads
    /// always see a sorted list whose entries are complete (each value is the one its key
    /// was inserted with), and find every entry whose insert finished before they looked.
    #[test]
    fn readers_see_complete_sorted_entries_during_inserts() {
        // Smaller under Miri (`cargo +nightly miri test -p tierkv --lib skiplist`).
        const N: u64 = if cfg!(miri) { 200 } else { 20_000 };
        let list = Arc::new(SkipList::new(0));
        let published = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let key_of = |i: u64| ikey(&(i.wrapping_mul(0x9E37_79B9) % 1_000).to_be_bytes(), i + 1);
        let value_of = |i: u64| (i + 1).to_le_bytes().repeat(1 + (i % 5) as usize);
        let readers: Vec<_> = (0..3)
            .map(|r| {
                let (list, published, done) = (list.clone(), published.clone(), done.clone());
                std::thread::spawn(move || {
                    let mut checks = 0u64;
                    while !done.load(Ordering::Acquire) || checks == 0 {
                        let seen = published.load(Ordering::Acquire);
                        if r == 0 {
                            // A full walk: sorted, complete, at least what was published.
                            let mut n = 0;
                            let mut prev: Option<Vec<u8>> = None;
                            for (k, v) in list.iter() {
                                let seq = crate::key::parse_internal_key(k).unwrap().seq;
                                assert_eq!(v, &value_of(seq - 1)[..]);
                                if let Some(p) = &prev {
                                    assert!(cmp(p, k).is_lt());
                                }
                                prev = Some(k.to_vec());
                                n += 1;
                            }
                            assert!(n >= seen);
                        } else if seen > 0 {
                            // Point lookups of published keys find them.
                            for j in 0..64 {
                                let i = (seen * 7 + j * 131) % seen;
                                let k = key_of(i);
                                let p = list.seek(&k).expect("published key");
                                assert_eq!(list.entry(p), (&k[..], &value_of(i)[..]));
                            }
                        }
                        checks += 1;
                    }
                    checks
                })
            })
            .collect();
        for i in 0..N {
            list.insert(&key_of(i), &value_of(i));
            published.store(i + 1, Ordering::Release);
        }
        done.store(true, Ordering::Release);
        for r in readers {
            assert!(r.join().unwrap() > 0);
        }
        assert_eq!(list.len() as u64, N);
    }
}

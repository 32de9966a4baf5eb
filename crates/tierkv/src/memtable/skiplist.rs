//! The memtable's ordered index: a skiplist with one node per user key, each node holding
//! the key's versions newest first in a chain, all carved from an arena that the list
//! frees in one go when it is dropped (LevelDB's `db/skiplist.h` over `util/arena.h`), and
//! a hash index (`index`) from user keys to their nodes.
//!
//! Why versions hang off one node: a rewrite of a key the memtable holds (most writes of
//! a skewed workload) finds the node through the hash index and prepends a version, so it
//! costs neither a search of the list nor a tower of links, and the list stays as long as
//! the number of distinct keys; a point read probes the index and takes the chain's first
//! version at or below its snapshot. Every version is kept (snapshots and iterators may
//! need any of them; the flush drops those none can see). The price: a read at an old
//! snapshot walks the versions newer than it, and stepping backward through a chain
//! walks it from its head (the memtable's cursor does that once per chain).
//!
//! Why a new key's node waits to be linked: a write of a key new to the memtable indexes
//! its node and leaves it pending, out of the list; the first ordered read after it (a
//! seek, `first`, `last`: an iterator, a flush) sorts the pending nodes and links them in
//! one pass, each search starting where the previous one linked. Point reads and rewrites
//! never need the list, so a write searches nothing, and a flush of a memtable no one
//! iterated builds its list from sorted keys instead of one search from the head per key
//! (about ten cache misses each in a list of a hundred thousand keys). An ordered read sees
//! every node whose insert finished before it began; a node inserted later has a sequence
//! number the reader does not see anyway.
//!
//! One writer at a time, any number of readers without locks. Inserts, and the linking of
//! pending nodes, take a mutex (the write path already serializes inserts, so it is
//! contended only by an ordered read that finds nodes pending); a node or version is
//! written whole before a release store links it in, and readers follow links with
//! acquire loads, so a reader sees one complete or not at all. Nothing is changed (but for
//! links) or freed while the list lives, so a reader needs no epoch and no reference
//! count: what it reached lives as long as the list it borrowed.
//!
//! It owns the node and version layouts, the arena and the order of publication, and
//! knows keys only as byte strings ordered by [`compare_user_keys`] and versions by their
//! trailer (`seq << 8 | kind`, larger first): sequence numbers, sizes and flushes are the
//! memtable's. Keys are hashed with [`filter_hash`], the hash the memtable's callers
//! compute once per lookup. It is one of the two modules with `unsafe` code (every block
//! has its `SAFETY:` comment; docs/ARCHITECTURE.md lists them).

use super::index::KeyIndex;
use crate::key::compare_user_keys;
use crate::sst::filter::filter_hash;
use parking_lot::Mutex;
use std::alloc::Layout;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// Tallest tower. Each further level comes with probability 1/4, so 12 levels keep a
/// search logarithmic up to 4^12 (16M) keys, far more than a memtable holds.
pub(crate) const MAX_HEIGHT: usize = 12;
/// Bytes before a node's links: `key_len << 8 | height`, then the newest version.
const NODE_HEADER: usize = 16;
/// Bytes before a version's value: the next (older) version, the trailer, `value_len`.
const VERSION_HEADER: usize = 24;
/// Bytes per link.
const LINK: usize = std::mem::size_of::<AtomicPtr<Node>>();
/// Node and version alignment: they start with pointers.
const ALIGN: usize = std::mem::align_of::<AtomicPtr<Node>>();
/// Bytes of an arena chunk, at most: a list's chunks are a 32nd of the size it is expected
/// to reach, between [`MIN_CHUNK`] and this, so that the one chunk a list has allocated but
/// not filled, which [`SkipList::memory`] does not count, stays within about 3% of the
/// list's memory (a memtable of a small memory budget is tens of KiB). A piece larger than
/// a quarter of a chunk gets a chunk of its own, so the tail a chunk leaves unused is
/// under a quarter of it (in practice under one piece).
const CHUNK: usize = 64 << 10;
/// Bytes of an arena chunk, at least (LevelDB's arena block).
const MIN_CHUNK: usize = 4 << 10;
/// Bytes of memtable per key the hash index is first sized for: a 64 MiB memtable's index
/// starts at 2 MiB (3%), enough for records of 400 bytes or more; one of 100-byte records
/// grows it twice (each growth rehashes the keys, a few milliseconds under the insert
/// lock at the last).
const BYTES_PER_INDEXED_KEY: usize = 512;

/// Asks the CPU to start loading the cache line at `p` into its caches: a hint, which
/// never faults whatever `p` is (freed, unmapped, null) and changes no memory.
#[inline(always)]
fn prefetch(p: *const u8) {
    // SAFETY: `_mm_prefetch` needs SSE, which every x86-64 CPU has (it is in the target's
    // baseline), and reads nothing the program sees: any address is allowed.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Source of list identities, so that a [`Position`] is only ever read by its own list.
static NEXT_LIST_ID: AtomicU64 = AtomicU64::new(1);

/// Bytes of arena a node of a `key_len`-byte user key and `height` links takes.
pub(crate) const fn node_size(key_len: usize, height: usize) -> usize {
    (NODE_HEADER + height * LINK + key_len).next_multiple_of(ALIGN)
}

/// Bytes of arena a version of a `value_len`-byte value takes.
pub(crate) const fn version_size(value_len: usize) -> usize {
    (VERSION_HEADER + value_len).next_multiple_of(ALIGN)
}

/// Bytes of index slots a key costs, at most (a table at its fullest before growing is
/// 80% full; one growth doubles it).
pub(crate) const INDEX_BYTES_PER_KEY: usize = 16;

/// The first 16 bytes of a user key, zero-padded, as one big-endian integer: keys whose
/// prefixes differ sort as their prefixes do (as `compare_user_keys`'s 8-byte prefix), so
/// sorting pending nodes reads each node's key once, not at every comparison.
fn key_prefix(key: &[u8]) -> u128 {
    let mut buf = [0u8; 16];
    let n = key.len().min(16);
    buf[..n].copy_from_slice(&key[..n]);
    u128::from_be_bytes(buf)
}

/// The node at an address the index holds. The index keeps nodes as integers (an address
/// with a hash tag above it in one atomic word), so a node's address is exposed when it is
/// indexed and its provenance taken back here (Miri: `-Zmiri-permissive-provenance`).
fn node_at(addr: usize) -> *const Node {
    ptr::with_exposed_provenance(addr)
}

/// A node's fixed part. The links and the user key follow it in the same chunk; they are
/// reached through raw pointers derived from the chunk's allocation, never through a
/// reference to `Node` (whose 16 bytes would not cover them).
#[repr(C)]
struct Node {
    /// `key_len << 8 | height`.
    meta: u64,
    /// The newest version (never null once the node is linked in).
    versions: AtomicPtr<Version>,
}

/// A version's fixed part; the value follows it in the same chunk.
#[repr(C)]
struct Version {
    /// The next older version of the same key, or null.
    next: AtomicPtr<Version>,
    trailer: u64,
    value_len: u64,
}

/// What the raw-pointer accessors of `Node` and `Version` require of the pointer: it
/// points to a node (or version) that `Writer` wrote whole and that was published (or is
/// the head), in a list that is still alive, and the returned borrows do not outlive that
/// list.
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
                .add(NODE_HEADER + level * LINK)
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

    /// The node's tower height.
    /// SAFETY: see the `impl` comment.
    unsafe fn height(node: *const Node) -> usize {
        // SAFETY: the header was written before publication and never after.
        unsafe { ((*node).meta & 0xff) as usize }
    }

    /// The node's user key.
    /// SAFETY: see the `impl` comment.
    unsafe fn key<'a>(node: *const Node) -> &'a [u8] {
        // SAFETY: the key was copied in before publication, right after the links, and is
        // never written again while the list lives.
        unsafe {
            let meta = (*node).meta;
            let key = node
                .cast::<u8>()
                .add(NODE_HEADER + (meta & 0xff) as usize * LINK);
            std::slice::from_raw_parts(key, (meta >> 8) as usize)
        }
    }

    /// The newest version.
    /// SAFETY: see the `impl` comment.
    unsafe fn newest(node: *const Node) -> *const Version {
        // SAFETY: the header is the node's first 16 bytes, written before publication;
        // `versions` is only accessed atomically afterwards. Acquire pairs with the
        // writer's release store of a new version.
        unsafe { (*node).versions.load(Ordering::Acquire) }
    }
}

impl Version {
    /// The next older version, or null.
    /// SAFETY: see `Node`'s `impl` comment.
    unsafe fn next(v: *const Version) -> *const Version {
        // SAFETY: as `Node::newest`.
        unsafe { (*v).next.load(Ordering::Acquire) }
    }

    /// The trailer and the value.
    /// SAFETY: see `Node`'s `impl` comment.
    unsafe fn entry<'a>(v: *const Version) -> (u64, &'a [u8]) {
        // SAFETY: header and value were written before publication and never after.
        unsafe {
            let value = v.cast::<u8>().add(VERSION_HEADER);
            (
                (*v).trailer,
                std::slice::from_raw_parts(value, (*v).value_len as usize),
            )
        }
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
    /// The largest trailer inserted: a version above it is its key's newest, linked in
    /// without reading the chain (sequence numbers mostly arrive in order).
    largest_trailer: u64,
    /// The last node indexed but not yet linked into the list (see [`SkipList::settle`]);
    /// each pending node's level-0 link, unused until it is linked, names the one before.
    pending: *mut Node,
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
            // A piece's size is bounded by the key and value limits (16 MiB, 4 GiB), far
            // below `isize::MAX`.
            std::alloc::handle_alloc_error(Layout::new::<u64>())
        };
        // SAFETY: `layout` has a non-zero size (a piece has at least its header).
        let p = unsafe { std::alloc::alloc(layout) };
        let Some(chunk) = NonNull::new(p) else {
            std::alloc::handle_alloc_error(layout)
        };
        self.chunks.push((chunk, layout));
        chunk
    }

    /// Writes a node with `height` null links, `key` and `newest` as its versions, not
    /// yet linked in.
    fn write_node(&mut self, key: &[u8], height: usize, newest: *mut Version) -> NonNull<Node> {
        let size = node_size(key.len(), height);
        let chunk = self.alloc(size);
        let p = chunk.as_ptr();
        // SAFETY: `p` is `size` fresh bytes of arena, aligned for `Node` and the links,
        // that no reader can reach before the node is linked in: every write below stays
        // within them (header, `height` links, key: `node_size`).
        unsafe {
            let node = p.cast::<Node>();
            ptr::write(
                node,
                Node {
                    meta: (key.len() as u64) << 8 | height as u64,
                    versions: AtomicPtr::new(newest),
                },
            );
            let links = p.add(NODE_HEADER).cast::<AtomicPtr<Node>>();
            for level in 0..height {
                ptr::write(links.add(level), AtomicPtr::new(ptr::null_mut()));
            }
            let k = p.add(NODE_HEADER + height * LINK);
            ptr::copy_nonoverlapping(key.as_ptr(), k, key.len());
        }
        chunk.cast()
    }

    /// Writes a version of `trailer` and `value` with no older version, not yet linked in.
    fn write_version(&mut self, trailer: u64, value: &[u8]) -> NonNull<Version> {
        let size = version_size(value.len());
        let chunk = self.alloc(size);
        let p = chunk.as_ptr();
        // SAFETY: as `write_node`: `size` fresh bytes of arena, header then value.
        unsafe {
            ptr::write(
                p.cast::<Version>(),
                Version {
                    next: AtomicPtr::new(ptr::null_mut()),
                    trailer,
                    value_len: value.len() as u64,
                },
            );
            ptr::copy_nonoverlapping(value.as_ptr(), p.add(VERSION_HEADER), value.len());
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

/// A version of a particular list, as a cursor holds it. Only its own list reads it (each
/// method checks), and the holder keeps that list alive (e.g. through an `Arc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Position {
    list: u64,
    node: NonNull<Node>,
    version: NonNull<Version>,
}

// SAFETY: a position is a pair of addresses that only its own list dereferences, for
// readers that may be on any thread (the list is `Sync`).
unsafe impl Send for Position {}
// SAFETY: as `Send`: a shared position gives no access of its own.
unsafe impl Sync for Position {}

/// One version as the list hands it out: the node's user key, the version's trailer and
/// value, borrowed from the list.
pub(crate) type Entry<'a> = (&'a [u8], u64, &'a [u8]);

/// See the module comment.
pub(crate) struct SkipList {
    id: u64,
    /// The head: a node of `MAX_HEIGHT` links and no key, before every entry.
    head: NonNull<Node>,
    /// Height of the tallest tower linked so far: searches start there. Relaxed: a reader
    /// that sees a new height before the links at it finds them null and moves down.
    height: AtomicUsize,
    /// Versions held.
    len: AtomicUsize,
    /// Nodes the writer holds pending (indexed, not linked): an ordered read settles them
    /// first. Release when set, so a reader that sees 0 sees the links that settled them.
    pending: AtomicUsize,
    /// Bytes of the nodes and versions written (the arena's chunks hold them, the unused
    /// tails of full chunks, and at most one chunk more).
    memory: AtomicUsize,
    index: KeyIndex,
    writer: Mutex<Writer>,
}

// SAFETY: shared state is either atomic (links, counters, the index) or behind the
// writer's mutex (the arena); node and version contents are written before publication
// and never after, and are freed only when the list is dropped, which no reader can
// outlive.
unsafe impl Send for SkipList {}
// SAFETY: as `Send`.
unsafe impl Sync for SkipList {}

impl SkipList {
    /// An empty list expected to hold about `expected_bytes` of entries (it may hold more).
    pub(crate) fn new(expected_bytes: usize) -> Self {
        let id = NEXT_LIST_ID.fetch_add(1, Ordering::Relaxed);
        let mut writer = Writer {
            chunk: (expected_bytes / 32).clamp(MIN_CHUNK, CHUNK) / ALIGN * ALIGN,
            chunks: Vec::new(),
            free: NonNull::dangling(),
            left: 0,
            // Any non-zero seed (xorshift stays at zero); the list's id varies it.
            rng: (0x9E37_79B9_7F4A_7C15 ^ id.wrapping_mul(0xA24B_AED4_963E_E407)) | 1,
            largest_trailer: 0,
            pending: ptr::null_mut(),
        };
        let head = writer.write_node(&[], MAX_HEIGHT, ptr::null_mut());
        SkipList {
            id,
            head,
            height: AtomicUsize::new(1),
            len: AtomicUsize::new(0),
            pending: AtomicUsize::new(0),
            memory: AtomicUsize::new(0),
            index: KeyIndex::with_capacity(expected_bytes / BYTES_PER_INDEXED_KEY),
            writer: Mutex::new(writer),
        }
    }

    /// Inserts a version of `key` (whose [`filter_hash`] is `hash`) with `trailer`, not
    /// already present, and `value`: into the key's chain when the key has a node, in a
    /// new node otherwise.
    pub(crate) fn insert(&self, key: &[u8], hash: u64, trailer: u64, value: &[u8]) {
        let mut writer = self.writer.lock();
        let version = writer.write_version(trailer, value).as_ptr();
        let mut added = version_size(value.len());
        if !self.index.is_complete() {
            // The search below must see every node.
            self.settle_locked(&mut writer);
        }
        let node = self.find_node(key, hash);
        let newest = trailer > writer.largest_trailer;
        writer.largest_trailer = writer.largest_trailer.max(trailer);
        if node.is_null() {
            added += self.insert_node(&mut writer, key, hash, version);
        } else {
            // SAFETY: `node` is a published node of this list, and `version` was written
            // whole and is not yet reachable. The writer (the only one that links
            // versions in, under its lock) finds the first older version and links the
            // new one before it: its own link first, then the release store that
            // publishes it, so a reader sees the chain with or without it, newest first.
            unsafe {
                let mut link = &(*node).versions;
                loop {
                    let at = link.load(Ordering::Relaxed);
                    if newest || at.is_null() || (*at).trailer < trailer {
                        (*version).next.store(at, Ordering::Relaxed);
                        link.store(version, Ordering::Release);
                        break;
                    }
                    link = &(*at).next;
                }
            }
        }
        self.memory.fetch_add(added, Ordering::Relaxed);
        self.len.fetch_add(1, Ordering::Release);
    }

    /// Writes a new node of `key` whose versions are `version`, and indexes it; it stays
    /// pending, out of the list, until an ordered read or a flush settles it (so a write of
    /// a key new to the memtable searches nothing), unless the index is off: then it is
    /// linked at once. Returns the bytes it took.
    fn insert_node(
        &self,
        writer: &mut Writer,
        key: &[u8],
        hash: u64,
        version: *mut Version,
    ) -> usize {
        let height = writer.random_height();
        let node = writer.write_node(key, height, version);
        let indexed = self
            .index
            .insert(hash, node.as_ptr().expose_provenance(), |addr| {
                // SAFETY: the index holds only addresses of complete nodes of this list.
                filter_hash(unsafe { Node::key(node_at(addr)) })
            });
        if indexed {
            // SAFETY: `node` is complete, has at least one link and is in no list: no
            // reader follows its links (it is reached only through the index).
            unsafe { Node::link(node.as_ptr(), 0).store(writer.pending, Ordering::Relaxed) };
            writer.pending = node.as_ptr();
            self.pending.fetch_add(1, Ordering::Release);
        } else {
            self.settle_locked(writer);
            self.link_sorted([node]);
        }
        node_size(key.len(), height)
    }

    /// Links the pending nodes into the list, so that positional reads see every node
    /// whose insert finished before this call. Takes the writer's lock only when nodes
    /// are pending.
    fn settle(&self) {
        if self.pending.load(Ordering::Acquire) != 0 {
            self.settle_locked(&mut self.writer.lock());
        }
    }

    /// [`SkipList::settle`] for the writer's lock holder: sorts the pending nodes and
    /// links them in key order.
    fn settle_locked(&self, writer: &mut Writer) {
        if writer.pending.is_null() {
            return;
        }
        let mut nodes: Vec<(u128, NonNull<Node>)> =
            Vec::with_capacity(self.pending.load(Ordering::Relaxed));
        let mut at = std::mem::replace(&mut writer.pending, ptr::null_mut());
        while let Some(node) = NonNull::new(at) {
            // SAFETY: pending nodes are complete nodes of this list, chained through their
            // level-0 links by `insert_node` under the writer's lock, which is held here.
            unsafe {
                nodes.push((key_prefix(Node::key(node.as_ptr())), node));
                at = Node::link(node.as_ptr(), 0).load(Ordering::Relaxed);
            }
        }
        nodes.sort_unstable_by(|(pa, a), (pb, b)| {
            // SAFETY: as above.
            pa.cmp(pb).then_with(|| unsafe {
                compare_user_keys(Node::key(a.as_ptr()), Node::key(b.as_ptr()))
            })
        });
        self.link_sorted(nodes.into_iter().map(|(_, n)| n));
        self.pending.store(0, Ordering::Release);
    }

    /// Links `nodes` (complete, not in the list, in ascending key order, keys not in the
    /// list) into the list. Called by the writer, under its lock. Each search starts, at
    /// each level, from the last node it linked there when that is further along, so
    /// sorted nodes cost about a step per level each, not a search from the head.
    fn link_sorted(&self, nodes: impl IntoIterator<Item = NonNull<Node>>) {
        let head = self.head.as_ptr().cast_const();
        // The last node before the current key at each level.
        let mut prev = [head; MAX_HEIGHT];
        for node in nodes {
            let node = node.as_ptr();
            // SAFETY: `node` is complete and every node reached below is the head or a
            // node of this list (linked, so complete); the writer is the only one that
            // links nodes in. The new node's own link is set before the release store
            // that publishes it at each level.
            unsafe {
                let key = Node::key(node);
                let height = Node::height(node);
                let top = self.height.load(Ordering::Relaxed);
                let mut x = head;
                for level in (0..top).rev() {
                    let p = prev[level];
                    if p != head
                        && (x == head || compare_user_keys(Node::key(p), Node::key(x)).is_gt())
                    {
                        x = p;
                    }
                    loop {
                        let next = Node::next(x, level);
                        if next.is_null() || !compare_user_keys(Node::key(next), key).is_lt() {
                            break;
                        }
                        x = next;
                    }
                    prev[level] = x;
                }
                if height > top {
                    self.height.store(height, Ordering::Relaxed);
                }
                for (level, before) in prev.iter_mut().enumerate().take(height) {
                    let after = Node::link(*before, level).load(Ordering::Relaxed);
                    Node::link(node, level).store(after, Ordering::Relaxed);
                    Node::link(*before, level).store(node, Ordering::Release);
                    *before = node;
                }
            }
        }
    }

    /// Starts loading what inserts or lookups of the keys with these hashes will read:
    /// their first index slots, then the nodes those slots name (a node's header, links
    /// and most keys lie in its first two cache lines). A hint only: nothing is read that
    /// a lookup relies on, and a key the index does not hold costs a wasted load.
    pub(crate) fn prefetch(&self, hashes: &[u64]) {
        if !self.index.is_complete() {
            return;
        }
        for &hash in hashes {
            prefetch(self.index.slot_address(hash));
        }
        for &hash in hashes {
            if let Some(addr) = self.index.candidate(hash) {
                prefetch(node_at(addr).cast());
                prefetch(node_at(addr).cast::<u8>().wrapping_add(64));
            }
        }
    }

    /// The node of `key` (whose [`filter_hash`] is `hash`), or null: through the index,
    /// or a search when the index is off.
    fn find_node(&self, key: &[u8], hash: u64) -> *const Node {
        if self.index.is_complete() {
            // SAFETY: the index holds only addresses of complete nodes of this list.
            let is_key = |addr: usize| unsafe { Node::key(node_at(addr)) } == key;
            return self.index.find(hash, is_key).map_or(ptr::null(), node_at);
        }
        self.settle();
        let (_, at) = self.find(key);
        // SAFETY: `at` is null or a published node of this list.
        if !at.is_null() && unsafe { Node::key(at) } == key {
            at
        } else {
            ptr::null()
        }
    }

    /// The newest version of `key` (whose [`filter_hash`] is `hash`) whose trailer is at
    /// most `max_trailer`: its trailer and value.
    pub(crate) fn get(&self, key: &[u8], hash: u64, max_trailer: u64) -> Option<(u64, &[u8])> {
        let node = self.find_node(key, hash);
        if node.is_null() {
            return None;
        }
        let v = self.newest_at_or_below(node, max_trailer);
        // SAFETY: `v` is null or a version of this list, which is alive (borrowed).
        (!v.is_null()).then(|| unsafe { Version::entry(v) })
    }

    /// The newest version of `node` whose trailer is at most `max_trailer`, or null.
    fn newest_at_or_below(&self, node: *const Node, max_trailer: u64) -> *const Version {
        // SAFETY: `node` is a published node of this list; the versions are reached by
        // acquire loads of its links.
        unsafe {
            let mut v = Node::newest(node);
            while !v.is_null() && (*v).trailer > max_trailer {
                v = Version::next(v);
            }
            v
        }
    }

    /// The last linked node before `target` (the head when none is), and the first at or
    /// after it.
    fn find(&self, target: &[u8]) -> (*const Node, *const Node) {
        let mut x = self.head.as_ptr().cast_const();
        let mut level = self.height.load(Ordering::Relaxed);
        loop {
            level -= 1;
            let next = loop {
                // SAFETY: `x` is the head or a node reached by links, in this list.
                let next = unsafe { Node::next(x, level) };
                // SAFETY: as above.
                if !next.is_null() && compare_user_keys(unsafe { Node::key(next) }, target).is_lt()
                {
                    x = next;
                } else {
                    break next;
                }
            };
            if level == 0 {
                // The link read here, not a second load: a node linked in since may lie
                // before `target`.
                return (x, next);
            }
        }
    }

    /// The position of `version` of `node`, or `None` for the head or a null version.
    fn position(&self, node: *const Node, version: *const Version) -> Option<Position> {
        if node == self.head.as_ptr().cast_const() {
            return None;
        }
        Some(Position {
            list: self.id,
            node: NonNull::new(node.cast_mut())?,
            version: NonNull::new(version.cast_mut())?,
        })
    }

    /// The newest version of `node` (null or the head: none).
    fn newest_of(&self, node: *const Node) -> Option<Position> {
        if node.is_null() {
            return None;
        }
        // SAFETY: `node` is the head or a published node of this list.
        self.position(node, unsafe { Node::newest(node) })
    }

    fn check(&self, pos: Position) -> Position {
        assert_eq!(pos.list, self.id, "a position read by another list");
        pos
    }

    /// Every version of `node`, newest first, up to (not including) `stop`.
    fn chain_until(&self, node: *const Node, stop: *const Version) -> Vec<Position> {
        let mut out = Vec::new();
        // SAFETY: `node` is a published node of this list.
        let mut v = unsafe { Node::newest(node) };
        while !v.is_null() && v != stop {
            out.extend(self.position(node, v));
            // SAFETY: `v` was reached by acquire loads of links of this list.
            v = unsafe { Version::next(v) };
        }
        out
    }

    /// The first version at or after the internal key `key` + `trailer`.
    pub(crate) fn seek(&self, key: &[u8], trailer: u64) -> Option<Position> {
        self.settle();
        let (_, at) = self.find(key);
        // SAFETY: `at` is null or a published node of this list.
        if at.is_null() || unsafe { Node::key(at) } != key {
            return self.newest_of(at);
        }
        let v = self.newest_at_or_below(at, trailer);
        if !v.is_null() {
            return self.position(at, v);
        }
        // SAFETY: `at` is a published node of this list (checked non-null above).
        self.newest_of(unsafe { Node::next(at, 0) })
    }

    /// The first version.
    pub(crate) fn first(&self) -> Option<Position> {
        self.settle();
        // SAFETY: the head has `MAX_HEIGHT` links.
        self.newest_of(unsafe { Node::next(self.head.as_ptr(), 0) })
    }

    /// The last version.
    pub(crate) fn last(&self) -> Option<Position> {
        self.settle();
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
        self.chain_until(x, ptr::null()).pop()
    }

    /// The version after `pos`: the next older one of its key, or the next key's newest.
    pub(crate) fn next(&self, pos: Position) -> Option<Position> {
        let pos = self.check(pos);
        // SAFETY: `check` made sure `pos` is of this list, which is alive (borrowed).
        unsafe {
            let older = Version::next(pos.version.as_ptr());
            if older.is_null() {
                self.newest_of(Node::next(pos.node.as_ptr(), 0))
            } else {
                self.position(pos.node.as_ptr(), older)
            }
        }
    }

    /// The versions before `pos`, the last one nearest: the newer versions of its key, or
    /// when it is its key's newest, every version of the key before it (empty at the
    /// start). A cursor stepping backward keeps this, so a chain is walked once.
    pub(crate) fn before(&self, pos: Position) -> Vec<Position> {
        let pos = self.check(pos);
        let newer = self.chain_until(pos.node.as_ptr(), pos.version.as_ptr());
        if !newer.is_empty() {
            return newer;
        }
        // SAFETY: `check` made sure `pos` is of this list, which is alive (borrowed).
        let (before, _) = self.find(unsafe { Node::key(pos.node.as_ptr()) });
        self.chain_until(before, ptr::null())
    }

    /// The user key, trailer and value at `pos`, borrowed from the list.
    pub(crate) fn entry(&self, pos: Position) -> Entry<'_> {
        let pos = self.check(pos);
        // SAFETY: `check` made sure `pos` is of this list; the borrow is the list's.
        unsafe {
            let (trailer, value) = Version::entry(pos.version.as_ptr());
            (Node::key(pos.node.as_ptr()), trailer, value)
        }
    }

    /// Every version, in order (entries inserted meanwhile may or may not be seen).
    pub(crate) fn iter(&self) -> impl Iterator<Item = Entry<'_>> {
        std::iter::successors(self.first(), |p| self.next(*p)).map(|p| self.entry(p))
    }

    /// Every key's newest version, in key order.
    pub(crate) fn newest_versions(&self) -> impl Iterator<Item = Entry<'_>> {
        std::iter::successors(self.first(), |p| {
            // SAFETY: `p` is of this list, which is alive (borrowed).
            self.newest_of(unsafe { Node::next(p.node.as_ptr(), 0) })
        })
        .map(|p| self.entry(p))
    }

    /// Number of versions.
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// Bytes of the nodes and versions ([`node_size`], [`version_size`] each) and of the
    /// hash index.
    pub(crate) fn memory(&self) -> usize {
        self.memory.load(Ordering::Relaxed) + self.index.memory()
    }

    /// Turns the hash index off, so that lookups search the list (for tests of that path).
    #[cfg(test)]
    pub(crate) fn disable_index(&self) {
        self.index.disable();
    }

    /// Bytes of the nodes and versions alone (for tests of what `memory` leaves out).
    #[cfg(test)]
    fn arena_memory(&self) -> usize {
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
    use crate::key::{compare_internal, make_internal_key, parse_internal_key, ValueKind};
    use std::cmp::Ordering as Cmp;
    use std::collections::BTreeMap;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    /// A model key ordered by `compare_internal`, as the list orders its versions.
    #[derive(Clone, PartialEq, Eq, Debug)]
    struct K(Vec<u8>);
    impl Ord for K {
        fn cmp(&self, o: &Self) -> Cmp {
            compare_internal(&self.0, &o.0)
        }
    }
    impl PartialOrd for K {
        fn partial_cmp(&self, o: &Self) -> Option<Cmp> {
            Some(self.cmp(o))
        }
    }

    fn trailer(seq: u64) -> u64 {
        crate::key::pack_trailer(seq, ValueKind::Value)
    }

    fn ikey(user: &[u8], seq: u64) -> Vec<u8> {
        make_internal_key(user, seq, ValueKind::Value)
    }

    /// The internal key of an entry.
    fn ikey_of((user, trailer, _): Entry<'_>) -> Vec<u8> {
        [user, &trailer.to_le_bytes()[..]].concat()
    }

    fn insert(list: &SkipList, user: &[u8], seq: u64, value: &[u8]) {
        list.insert(user, filter_hash(user), trailer(seq), value);
    }

    /// Invariant: the list answers every positional question (seek, first,
    /// last, next, the versions before a position, iteration) and every point lookup as a
    /// `BTreeMap` ordered by `compare_internal` holding the same versions, for keys of
    /// every length (empty to past a chunk's quarter), values up to a chunk of their own,
    /// versions of one key arriving out of sequence order, with the hash index and without.
    #[test]
    fn answers_as_an_ordered_map_would() {
        for indexed in [true, false] {
            let list = SkipList::new(0);
            if !indexed {
                list.disable_index();
            }
            let mut model = BTreeMap::new();
            let mut rng = 0x1234_5678_u64;
            let mut step = || {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng
            };
            let entries = if cfg!(miri) { 150 } else { 3_000u64 };
            for i in 1..=entries {
                // Distinct sequence numbers in a scrambled order (a prime modulus).
                let seq = i * 2_654_435_761 % 4_294_967_291;
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
                insert(&list, &user, seq, &value);
                model.insert(K(ikey(&user, seq)), value);
                if i % 61 == 0 {
                    // An ordered read between inserts: the nodes pending since the last
                    // one are linked into a list that already holds others.
                    let target: Vec<u8> = (0..(r >> 40) % 9)
                        .map(|j| (r >> (j * 5)) as u8 % 5)
                        .collect();
                    let t = K(ikey(&target, r % 4_294_967_291));
                    let ge = model.range(t..).next().map(|(k, _)| k.0.clone());
                    let got = list.seek(&target, trailer(r % 4_294_967_291));
                    assert_eq!(got.map(|p| ikey_of(list.entry(p))), ge);
                    let last = model.keys().next_back().map(|k| k.0.clone());
                    assert_eq!(list.last().map(|p| ikey_of(list.entry(p))), last);
                }
            }
            assert_eq!(list.len(), model.len());
            assert!(list.height() > 1 && list.height() <= MAX_HEIGHT);
            let all: Vec<(Vec<u8>, Vec<u8>)> =
                list.iter().map(|e| (ikey_of(e), e.2.to_vec())).collect();
            let expected: Vec<(Vec<u8>, Vec<u8>)> = model
                .iter()
                .map(|(k, v)| (k.0.clone(), v.clone()))
                .collect();
            assert_eq!(all, expected);
            let key_at = |p: Option<Position>| p.map(|p| ikey_of(list.entry(p)));
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
                let seq = r % 4_294_967_291;
                let t = K(ikey(&user, seq));
                let ge = model.range(t.clone()..).next().map(|(k, _)| k.0.clone());
                let at = list.seek(&user, trailer(seq));
                assert_eq!(key_at(at), ge);
                // A point lookup: the newest version of `user` at or below `seq`.
                let visible = ge
                    .as_ref()
                    .filter(|k| parse_internal_key(k).unwrap().user_key == user);
                assert_eq!(
                    list.get(&user, filter_hash(&user), trailer(seq))
                        .map(|(t, _)| ikey_of((&user, t, &[][..]))),
                    visible.cloned()
                );
                if let Some(p) = at {
                    let after = model
                        .range((
                            std::ops::Bound::Excluded(K(ikey_of(list.entry(p)))),
                            std::ops::Bound::Unbounded,
                        ))
                        .next()
                        .map(|(k, _)| k.0.clone());
                    assert_eq!(key_at(list.next(p)), after);
                    let before = model
                        .range(..K(ikey_of(list.entry(p))))
                        .next_back()
                        .map(|(k, _)| k.0.clone());
                    assert_eq!(key_at(list.before(p).pop()), before);
                }
            }
        }
    }

    #[test]
    fn empty_list_has_no_positions() {
        let list = SkipList::new(1 << 20);
        assert!(list.first().is_none() && list.last().is_none());
        assert!(list.seek(b"a", trailer(1)).is_none());
        assert!(list.get(b"a", filter_hash(b"a"), u64::MAX).is_none());
        assert_eq!(
            (list.len(), list.arena_memory(), list.iter().count()),
            (0, 0, 0)
        );
    }

    /// Invariant: `memory` counts each key's node and each version, as `node_size` and
    /// `version_size` state them, and the index, so the memtable's size (and the write
    /// path's room check) tracks the arena; a rewrite costs a version, not a node.
    #[test]
    fn memory_counts_every_node_and_version() {
        let list = SkipList::new(1 << 20);
        let index = list.memory();
        insert(&list, b"12345678", 1, &[7; 100]);
        let one = list.memory() - index;
        let first = version_size(100);
        assert!(one >= node_size(8, 1) + first && one <= node_size(8, MAX_HEIGHT) + first);
        insert(&list, b"12345678", 2, &[8; 100]);
        assert_eq!(list.memory() - index, one + first);
        insert(&list, b"big", 3, &vec![1; CHUNK * 3]);
        assert!(list.memory() - index - one - first >= CHUNK * 3);
    }

    /// Invariant (budgets hold): what `memory` does not count, the chunk being filled and
    /// the tails of full ones, stays within a chunk of a 32nd of the expected size and a
    /// few percent: a memtable of a small budget is not under-counted by a 64 KiB chunk.
    #[test]
    fn chunks_are_sized_to_the_expected_list() {
        // Smaller under Miri, which takes minutes to build a 64 MiB list's index.
        let (sizes, writes) = if cfg!(miri) {
            (&[0, 100 << 10][..], 300)
        } else {
            (&[0, 100 << 10, 1 << 20, 64 << 20][..], 2_000u64)
        };
        for &expected in sizes {
            let list = SkipList::new(expected);
            let chunk = (expected / 32).clamp(MIN_CHUNK, CHUNK);
            for seq in 1..=writes {
                // Half the writes rewrite a key.
                insert(&list, &(seq / 2).to_be_bytes(), seq, &[3; 100]);
            }
            let (used, allocated) = (list.arena_memory(), list.allocated());
            assert!(allocated >= used + node_size(0, MAX_HEIGHT));
            assert!(
                allocated <= used + used / 20 + chunk + node_size(0, MAX_HEIGHT),
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
        insert(&a, b"k", 1, b"v");
        let p = a.first().unwrap();
        let _ = b.entry(p);
    }

    /// Invariant (lock-free readers): while one thread inserts (new keys and new versions
    /// of keys held, through the index and, in a second list, without it), readers on
    /// other threads always see a sorted list whose versions are complete (each value is
    /// the one its version was inserted with), and find every version whose insert
    /// finished before they looked, by position and by point lookup.
    #[test]
    fn readers_see_complete_sorted_entries_during_inserts() {
        // Smaller under Miri (docs/TESTING.md has the command).
        const N: u64 = if cfg!(miri) { 200 } else { 20_000 };
        for indexed in [true, false] {
            let list = Arc::new(SkipList::new(0));
            if !indexed {
                list.disable_index();
            }
            let published = Arc::new(AtomicU64::new(0));
            let done = Arc::new(AtomicBool::new(false));
            let user_of = |i: u64| (i.wrapping_mul(0x9E37_79B9) % 1_000).to_be_bytes();
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
                                for e in list.iter() {
                                    let k = ikey_of(e);
                                    let seq = parse_internal_key(&k).unwrap().seq;
                                    assert_eq!(e.2, &value_of(seq - 1)[..]);
                                    if let Some(p) = &prev {
                                        assert!(compare_internal(p, &k).is_lt());
                                    }
                                    prev = Some(k);
                                    n += 1;
                                }
                                assert!(n >= seen);
                            } else if seen > 0 {
                                // Point lookups of published versions find them.
                                for j in 0..64 {
                                    let i = (seen * 7 + j * 131) % seen;
                                    let user = user_of(i);
                                    let p = list.seek(&user, trailer(i + 1)).expect("published");
                                    assert_eq!(
                                        list.entry(p),
                                        (&user[..], trailer(i + 1), &value_of(i)[..])
                                    );
                                    let got = list.get(&user, filter_hash(&user), trailer(i + 1));
                                    assert_eq!(got, Some((trailer(i + 1), &value_of(i)[..])));
                                }
                            }
                            checks += 1;
                        }
                        checks
                    })
                })
                .collect();
            for i in 0..N {
                insert(&list, &user_of(i), i + 1, &value_of(i));
                published.store(i + 1, Ordering::Release);
            }
            done.store(true, Ordering::Release);
            for r in readers {
                assert!(r.join().unwrap() > 0);
            }
            assert_eq!(list.len() as u64, N);
        }
    }
}

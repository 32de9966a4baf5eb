//! E-LRU (AC-Key §4.2): recency lists whose eviction looks at the `a` least recently used
//! entries and takes the one with the smallest caching efficiency factor E, plus the
//! slab-and-hash-table store the lists live in. Owns entry storage, recency order and the
//! victim choice; what an entry is and when to evict belong to `point`, `block` and `shard`.
//!
//! **Normalisation of E for `a = e^v`.** E is "I/Os saved per byte", so its raw standard
//! deviation depends on the unit (bytes or KiB) and is tiny (KV entries are ~0.05 I/O per
//! byte, blocks ~6e-5): `e^v` would always round to 1. We use the coefficient of variation
//! instead (`v = stddev(E) / mean(E)`), which is unit-free: identical entries give `a = 1`
//! (plain LRU), a spread equal to the mean gives `a ≈ 3`. `a` is rounded to the nearest
//! integer and capped at [`MAX_CANDIDATES`] so an eviction never scans far. The moments are
//! kept exactly over every entry of the list (running sums updated on insert and removal),
//! which is the "sample" at no sampling cost.

use hashbrown::HashTable;

/// "No node" in the links.
const NIL: u32 = u32::MAX;

/// Most entries an eviction compares (the cap on `a` the paper asks for).
pub const MAX_CANDIDATES: usize = 16;

/// One cached entry with its links, charge and efficiency.
pub(crate) struct Node<T> {
    pub val: T,
    prev: u32,
    next: u32,
    /// Which list of the store holds the node.
    pub list: u8,
    /// Bytes charged to the budget.
    pub charge: u32,
    /// Caching efficiency factor, I/Os saved per byte.
    pub e: f32,
}

/// What a store keeps: entries that know their own hash.
pub(crate) trait Entry {
    fn hash(&self) -> u64;
}

/// The candidates an E-LRU eviction compares for a given coefficient of variation of E.
pub fn candidates_for(cv: f64) -> usize {
    if !cv.is_finite() || cv <= 0.0 {
        return 1;
    }
    (cv.exp().round() as usize).clamp(1, MAX_CANDIDATES)
}

/// A recency list (most recent at the head) with its byte total and the moments of E.
#[derive(Debug)]
pub(crate) struct List {
    head: u32,
    tail: u32,
    pub bytes: usize,
    pub len: usize,
    sum_e: f64,
    sum_e2: f64,
}

impl Default for List {
    fn default() -> Self {
        List {
            head: NIL,
            tail: NIL,
            bytes: 0,
            len: 0,
            sum_e: 0.0,
            sum_e2: 0.0,
        }
    }
}

impl List {
    fn add_stats(&mut self, charge: u32, e: f32) {
        self.bytes += charge as usize;
        self.len += 1;
        let e = e as f64;
        self.sum_e += e;
        self.sum_e2 += e * e;
    }

    fn sub_stats(&mut self, charge: u32, e: f32) {
        self.bytes -= charge as usize;
        self.len -= 1;
        if self.len == 0 {
            // Reset rather than let rounding leave a residue.
            self.sum_e = 0.0;
            self.sum_e2 = 0.0;
        } else {
            let e = e as f64;
            self.sum_e -= e;
            self.sum_e2 -= e * e;
        }
    }

    /// Coefficient of variation of E over the list's entries (0 when empty or uniform).
    pub fn spread(&self) -> f64 {
        if self.len < 2 || self.sum_e <= 0.0 {
            return 0.0;
        }
        let n = self.len as f64;
        let mean = self.sum_e / n;
        let var = (self.sum_e2 / n - mean * mean).max(0.0);
        var.sqrt() / mean
    }

    /// `a` of E-LRU: how many least recently used entries an eviction compares.
    pub fn candidates(&self) -> usize {
        candidates_for(self.spread())
    }
}

/// Entries in a slab, indexed by hash, threaded on up to `N` recency lists.
pub(crate) struct Store<T, const N: usize> {
    nodes: Vec<Option<Node<T>>>,
    free: Vec<u32>,
    index: HashTable<u32>,
    pub lists: [List; N],
}

impl<T: Entry, const N: usize> Default for Store<T, N> {
    fn default() -> Self {
        Store {
            nodes: Vec::new(),
            free: Vec::new(),
            index: HashTable::new(),
            lists: std::array::from_fn(|_| List::default()),
        }
    }
}

impl<T: Entry, const N: usize> Store<T, N> {
    #[allow(
        clippy::expect_used,
        reason = "indices come from the index or the lists, which hold only live nodes"
    )]
    pub fn node(&self, i: u32) -> &Node<T> {
        // Indices come from the index or the lists, which only hold live nodes.
        self.nodes[i as usize].as_ref().expect("live node")
    }

    #[allow(
        clippy::expect_used,
        reason = "indices come from the index or the lists, which hold only live nodes"
    )]
    fn node_mut(&mut self, i: u32) -> &mut Node<T> {
        self.nodes[i as usize].as_mut().expect("live node")
    }

    /// Every entry held, in no particular order.
    pub fn entries(&self) -> impl Iterator<Item = &T> {
        self.nodes.iter().flatten().map(|n| &n.val)
    }

    /// The node whose entry has `hash` and satisfies `eq`.
    pub fn find(&self, hash: u64, eq: impl Fn(&T) -> bool) -> Option<u32> {
        self.index
            .find(hash, |&i| {
                self.nodes[i as usize].as_ref().is_some_and(|n| eq(&n.val))
            })
            .copied()
    }

    /// Adds an entry at the head (most recent end) of `list`.
    pub fn insert(&mut self, val: T, list: u8, charge: u32, e: f32) -> u32 {
        let hash = val.hash();
        let node = Node {
            val,
            prev: NIL,
            next: NIL,
            list,
            charge,
            e,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = Some(node);
                i
            }
            None => {
                if self.nodes.len() == self.nodes.capacity() {
                    // Grow by an eighth, not by doubling: unused slots are memory that no
                    // entry's charge accounts for (invariant 4, docs/DESIGN.md).
                    self.nodes.reserve_exact((self.nodes.len() / 8).max(16));
                }
                self.nodes.push(Some(node));
                (self.nodes.len() - 1) as u32
            }
        };
        let nodes = &self.nodes;
        self.index.insert_unique(hash, i, |&j| {
            nodes[j as usize].as_ref().map_or(0, |n| n.val.hash())
        });
        self.link_front(i);
        i
    }

    /// Removes an entry and returns it.
    #[allow(
        clippy::expect_used,
        reason = "indices come from the index or the lists, which hold only live nodes"
    )]
    pub fn remove(&mut self, i: u32) -> Node<T> {
        self.unlink(i);
        let hash = self.node(i).val.hash();
        if let Ok(entry) = self.index.find_entry(hash, |&j| j == i) {
            entry.remove();
        }
        let node = self.nodes[i as usize].take().expect("live node");
        self.free.push(i);
        if self.index.is_empty() {
            // Give the memory back when a component empties (e.g. ghosts of a mode switch).
            self.nodes = Vec::new();
            self.free = Vec::new();
        }
        node
    }

    fn link_front(&mut self, i: u32) {
        let (list, charge, e) = {
            let n = self.node(i);
            (n.list as usize, n.charge, n.e)
        };
        let old_head = self.lists[list].head;
        {
            let n = self.node_mut(i);
            n.prev = NIL;
            n.next = old_head;
        }
        if old_head != NIL {
            self.node_mut(old_head).prev = i;
        } else {
            self.lists[list].tail = i;
        }
        let l = &mut self.lists[list];
        l.head = i;
        l.add_stats(charge, e);
    }

    fn unlink(&mut self, i: u32) {
        let (list, prev, next, charge, e) = {
            let n = self.node(i);
            (n.list as usize, n.prev, n.next, n.charge, n.e)
        };
        if prev != NIL {
            self.node_mut(prev).next = next;
        } else {
            self.lists[list].head = next;
        }
        if next != NIL {
            self.node_mut(next).prev = prev;
        } else {
            self.lists[list].tail = prev;
        }
        self.lists[list].sub_stats(charge, e);
    }

    /// Marks an entry most recently used.
    pub fn touch(&mut self, i: u32) {
        if self.lists[self.node(i).list as usize].head != i {
            self.unlink(i);
            self.link_front(i);
        }
    }

    /// Moves an entry to the head of another list, with a new charge and efficiency.
    pub fn relist(&mut self, i: u32, list: u8, charge: u32, e: f32) {
        self.unlink(i);
        let n = self.node_mut(i);
        n.list = list;
        n.charge = charge;
        n.e = e;
        self.link_front(i);
    }

    /// Changes an entry's value in place (same list, same recency position).
    pub fn update(&mut self, i: u32, charge: u32, e: f32, f: impl FnOnce(&mut T)) {
        let (list, old_charge, old_e) = {
            let n = self.node(i);
            (n.list as usize, n.charge, n.e)
        };
        self.lists[list].sub_stats(old_charge, old_e);
        self.lists[list].add_stats(charge, e);
        let n = self.node_mut(i);
        n.charge = charge;
        n.e = e;
        f(&mut n.val);
    }

    /// E-LRU's victim in `list`: among its `a` least recently used entries, the one with
    /// the smallest E (the least recent on ties).
    pub fn victim(&self, list: u8) -> Option<u32> {
        let l = &self.lists[list as usize];
        let a = l.candidates();
        let mut at = l.tail;
        let mut best: Option<(u32, f32)> = None;
        for _ in 0..a {
            if at == NIL {
                break;
            }
            let n = self.node(at);
            if best.is_none_or(|(_, e)| n.e < e) {
                best = Some((at, n.e));
            }
            at = n.prev;
        }
        best.map(|(i, _)| i)
    }

    /// Gives back the slots of a store that shrank (e.g. the point cache lost its bytes to
    /// the block cache): when over half the slots are free, the live nodes move to a dense
    /// slab and every link, list end and index entry is renumbered, in O(slots). The
    /// caller must hold no node index across the call.
    pub fn compact_if_sparse(&mut self) {
        let slots = self.nodes.len();
        if slots < 64 || self.free.len() * 2 <= slots {
            return;
        }
        let mut remap = vec![NIL; slots];
        let mut nodes: Vec<Option<Node<T>>> = Vec::with_capacity(slots - self.free.len());
        for (old, n) in std::mem::take(&mut self.nodes).into_iter().enumerate() {
            if let Some(n) = n {
                remap[old] = nodes.len() as u32;
                nodes.push(Some(n));
            }
        }
        let map = |i: u32| if i == NIL { NIL } else { remap[i as usize] };
        for n in nodes.iter_mut().flatten() {
            n.prev = map(n.prev);
            n.next = map(n.next);
        }
        for l in &mut self.lists {
            l.head = map(l.head);
            l.tail = map(l.tail);
        }
        let mut index = HashTable::with_capacity(nodes.len());
        for (i, n) in nodes.iter().enumerate() {
            if let Some(n) = n {
                index.insert_unique(n.val.hash(), i as u32, |&j| {
                    nodes[j as usize].as_ref().map_or(0, |n| n.val.hash())
                });
            }
        }
        self.nodes = nodes;
        self.free = Vec::new();
        self.index = index;
    }

    /// Slots in the slab (live and free).
    #[cfg(test)]
    pub fn slots(&self) -> usize {
        self.nodes.len()
    }

    /// Live entries.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.index.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct E(u64);
    impl Entry for E {
        fn hash(&self) -> u64 {
            self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15)
        }
    }

    fn store(es: &[f32]) -> Store<E, 1> {
        let mut s = Store::default();
        // Inserted in order: the first is the least recently used.
        for (k, &e) in es.iter().enumerate() {
            s.insert(E(k as u64), 0, 100, e);
        }
        s
    }

    #[test]
    fn a_follows_the_coefficient_of_variation() {
        // Identical E: v = 0, a = 1 (plain LRU).
        assert_eq!(candidates_for(0.0), 1);
        // v = 1 -> e^1 = 2.72 -> 3; v = 0.5 -> 1.65 -> 2; v = 0.4 -> 1.49 -> 1.
        assert_eq!(candidates_for(1.0), 3);
        assert_eq!(candidates_for(0.5), 2);
        assert_eq!(candidates_for(0.4), 1);
        // Capped.
        assert_eq!(candidates_for(10.0), MAX_CANDIDATES);
        // E = {1, 3}: mean 2, population stddev 1, v = 0.5 -> a = 2.
        let s = store(&[1.0, 3.0]);
        assert!((s.lists[0].spread() - 0.5).abs() < 1e-9);
        assert_eq!(s.lists[0].candidates(), 2);
        // The unit of E does not matter.
        let s = store(&[1e-4, 3e-4]);
        assert!((s.lists[0].spread() - 0.5).abs() < 1e-6);
    }

    #[test]
    fn victim_is_the_least_efficient_of_the_a_oldest() {
        // E (oldest first) = 4, 1, 8, 8, 8, 8: mean 6.17, stddev 2.73, v = 0.44 -> a = 2.
        // Candidates are the two oldest (4 and 1): evict the one with E = 1 (key 1).
        let s = store(&[4.0, 1.0, 8.0, 8.0, 8.0, 8.0]);
        assert_eq!(s.lists[0].candidates(), 2);
        let v = s.victim(0).unwrap();
        assert_eq!(s.node(v).val.0, 1);
        // Uniform E: plain LRU, the oldest goes.
        let s = store(&[2.0, 2.0, 2.0]);
        assert_eq!(s.node(s.victim(0).unwrap()).val.0, 0);
        // E = 1, 9 oldest first, then 1: mean 3.67, stddev 3.77, v = 1.03 -> a = 3: the
        // three are compared, the oldest of the two E = 1 entries wins the tie.
        let s = store(&[1.0, 9.0, 1.0]);
        assert_eq!(s.lists[0].candidates(), 3);
        assert_eq!(s.node(s.victim(0).unwrap()).val.0, 0);
    }

    #[test]
    fn touch_remove_and_relist_keep_the_totals() {
        let mut s: Store<E, 2> = Store::default();
        let a = s.insert(E(1), 0, 10, 1.0);
        let b = s.insert(E(2), 0, 20, 2.0);
        let c = s.insert(E(3), 1, 30, 3.0);
        assert_eq!(s.lists[0].bytes, 30);
        s.touch(a);
        // b is now the least recent of list 0.
        assert_eq!(s.lists[0].tail, b);
        s.relist(b, 1, 25, 2.5);
        assert_eq!((s.lists[0].bytes, s.lists[1].bytes), (10, 55));
        assert_eq!(s.find(E(3).hash(), |e| e.0 == 3), Some(c));
        let n = s.remove(c);
        assert_eq!(n.val.0, 3);
        assert_eq!(s.find(E(3).hash(), |e| e.0 == 3), None);
        s.update(a, 40, 4.0, |_| {});
        assert_eq!(s.lists[0].bytes, 40);
        assert_eq!(s.len(), 2);
        s.remove(a);
        s.remove(b);
        assert_eq!((s.lists[0].len, s.lists[1].len, s.len()), (0, 0, 0));
        assert_eq!(s.lists[1].spread(), 0.0);
    }

    // Invariant 4: a store that shrank gives its slots back, keeping order and lookups.
    #[test]
    fn sparse_store_compacts_and_keeps_order_and_index() {
        let mut s: Store<E, 2> = Store::default();
        let ids: Vec<u32> = (0..1000u64)
            .map(|k| s.insert(E(k), (k % 2) as u8, 10, 1.0))
            .collect();
        assert!(
            s.nodes.capacity() <= 1000 + 1000 / 8 + 16,
            "grows by an eighth"
        );
        // Keep every tenth entry.
        for (k, &i) in ids.iter().enumerate() {
            if k % 10 != 0 {
                s.remove(i);
            }
        }
        s.compact_if_sparse();
        assert_eq!((s.slots(), s.len()), (100, 100));
        for k in (0..1000u64).step_by(10) {
            let i = s.find(E(k).hash(), |e| e.0 == k).expect("still indexed");
            assert_eq!(s.node(i).val.0, k);
        }
        // Recency order survives: the least recent of each list is its smallest key.
        assert_eq!(s.node(s.lists[0].tail).val.0, 0);
        // Every kept key is even, so list 1 emptied.
        assert_eq!(
            (s.lists[1].head, s.lists[1].tail, s.lists[1].len),
            (NIL, NIL, 0)
        );
        let mut at = s.lists[0].head;
        let mut seen = Vec::new();
        while at != NIL {
            seen.push(s.node(at).val.0);
            at = s.node(at).next;
        }
        let want: Vec<u64> = (0..100u64).rev().map(|k| 10 * k).collect();
        assert_eq!(seen, want);
        assert_eq!(s.lists[0].bytes + s.lists[1].bytes, 1000);
        let v = s.insert(E(5000), 1, 10, 1.0);
        assert_eq!(s.find(E(5000).hash(), |e| e.0 == 5000), Some(v));
    }
}

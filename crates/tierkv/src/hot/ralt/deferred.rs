//! Accesses a read could not record at once because another thread held RALT's front lock
//! (the active buffer and the clock). Recording an access is bookkeeping that must not
//! make a read wait: with more reading threads than cores, a reader that parks on a
//! contended lock waits for the scheduler to run it again, not for the holder's few
//! hundred nanoseconds (in YCSB C at 8 threads on 2 cores, 0.4% of reads waited 200 us or
//! more there; docs/bench/hyperdb-ycsb.md). So a read that loses the lock's `try_lock`
//! leaves its access here, in one of a few striped lists that threads rarely share, and the
//! next thread that gets the front lock merges them (`Ralt::record`), in arrival order per
//! stripe. Owns only those lists: what an access does to the buffers is `Ralt`'s.

use parking_lot::Mutex;
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Stripes: a few more than the reading threads of a small machine.
const STRIPES: usize = 8;
/// Accesses a stripe holds at most; past that a read waits for the front lock after all
/// (bounds the memory, and the merge a lock holder does, to a few KiB).
const STRIPE_CAPACITY: usize = 64;

/// One access waiting to be merged.
pub(super) struct Access {
    pub hash: u64,
    pub key: Box<[u8]>,
    pub value_len: u32,
}

/// The striped lists of waiting accesses.
pub(super) struct Deferred {
    stripes: [Mutex<Vec<Access>>; STRIPES],
    /// Accesses in all stripes (a hint read without the stripes' locks).
    waiting: AtomicUsize,
}

impl Default for Deferred {
    fn default() -> Self {
        Deferred {
            stripes: std::array::from_fn(|_| Mutex::new(Vec::new())),
            waiting: AtomicUsize::new(0),
        }
    }
}

thread_local! {
    /// This thread's stripe, assigned round-robin at its first deferred access.
    static STRIPE: Cell<Option<usize>> = const { Cell::new(None) };
}

fn my_stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    STRIPE.with(|s| {
        s.get().unwrap_or_else(|| {
            let stripe = NEXT.fetch_add(1, Relaxed) % STRIPES;
            s.set(Some(stripe));
            stripe
        })
    })
}

impl Deferred {
    /// Leaves an access for the next holder of the front lock; false when this thread's
    /// stripe is full or busy (the caller then records it itself, waiting for the lock).
    pub fn push(&self, hash: u64, key: &[u8], value_len: u32) -> bool {
        let access = Access {
            hash,
            key: key.into(),
            value_len,
        };
        let Some(mut stripe) = self.stripes[my_stripe()].try_lock() else {
            return false;
        };
        if stripe.len() >= STRIPE_CAPACITY {
            return false;
        }
        stripe.push(access);
        self.waiting.fetch_add(1, Relaxed);
        true
    }

    /// True if no access is waiting (may miss one pushed a moment ago: it waits for the
    /// next holder).
    pub fn is_empty(&self) -> bool {
        self.waiting.load(Relaxed) == 0
    }

    /// Takes the waiting accesses of every stripe not being pushed to right now.
    pub fn take(&self) -> Vec<Access> {
        let mut all = Vec::new();
        for stripe in &self.stripes {
            if let Some(mut s) = stripe.try_lock() {
                self.waiting.fetch_sub(s.len(), Relaxed);
                all.append(&mut s);
            }
        }
        all
    }
}

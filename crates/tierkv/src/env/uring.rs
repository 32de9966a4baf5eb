//! Batched positional reads through io_uring: the one module of the read path with
//! `unsafe`. It owns a ring per thread (created on the thread's first batch) and one
//! operation, [`read_all`]: submit every read of a batch with one `io_uring_enter` and reap
//! all their completions on the calling thread. What to read, alignment, accounting, the
//! device model and fault injection are `file.rs`'s business.
//!
//! Crate: `io-uring` (tokio-rs), the maintained low-level binding: it exposes the rings and
//! opcodes without a runtime. `tokio-uring` needs its own tokio runtime driving the ring
//! (tierkv's readers are plain threads), and `rio` is unmaintained.
//!
//! The soundness rule: the kernel writes into a read's buffer until the read's completion
//! is reaped, so no buffer may be freed or moved before then. [`read_all`] takes the
//! buffers by value, keeps them in an [`InFlight`] that reaps every submitted read before
//! handing them back, also when unwinding (its `Drop`); if the ring fails so that the
//! remaining completions can never be reaped, their buffers are leaked (never freed) and
//! the ring is retired for the thread.

use io_uring::{opcode, types, IoUring};
use std::cell::RefCell;
use std::io;
use std::os::fd::RawFd;

/// Entries of each thread's ring: a batch's reads go in chunks of this many (one
/// `io_uring_enter` each), far above a typical batch's block reads.
const RING_ENTRIES: u32 = 128;

/// Times a submission that the kernel refuses for now (EAGAIN, EBUSY: out of resources)
/// is retried before the ring is given up.
const BUSY_RETRIES: u32 = 1000;

/// A read's outcome: its buffer and the bytes read, or its error.
type ReadResult = io::Result<(Vec<u8>, usize)>;

/// One read: `len` bytes at `offset` of `fd` into `buf[at..at + len]`.
pub(crate) struct UringRead {
    pub fd: RawFd,
    pub offset: u64,
    pub buf: Vec<u8>,
    pub at: usize,
    pub len: u32,
}

enum RingState {
    Untried,
    // Boxed: a ring is some 300 bytes, the other states none.
    Ready(Box<IoUring>),
    /// Setup failed (seccomp, old kernel, memlock limit) or the ring broke: reads go
    /// another way on this thread.
    Unavailable,
}

thread_local! {
    static RING: RefCell<RingState> = const { RefCell::new(RingState::Untried) };
}

/// True when this thread has (or can set up) a ring.
pub(crate) fn available() -> bool {
    RING.with(|cell| {
        let mut state = cell.borrow_mut();
        ensure_ring(&mut state);
        matches!(*state, RingState::Ready(_))
    })
}

fn ensure_ring(state: &mut RingState) {
    if let RingState::Untried = state {
        *state = match IoUring::new(RING_ENTRIES) {
            Ok(ring) => RingState::Ready(Box::new(ring)),
            Err(e) => {
                tracing::debug!("io_uring unavailable on this thread: {e}");
                RingState::Unavailable
            }
        };
    }
}

/// Runs every read of `reads` and returns, in order, each one's buffer and bytes read (or
/// its error). `Err(reads)`, untouched, when this thread has no ring.
pub(crate) fn read_all(reads: Vec<UringRead>) -> Result<Vec<ReadResult>, Vec<UringRead>> {
    RING.with(|cell| {
        let mut state = cell.borrow_mut();
        ensure_ring(&mut state);
        let RingState::Ready(ring) = &mut *state else {
            return Err(reads);
        };
        let n = reads.len();
        let mut batch = InFlight {
            ring,
            reads: reads.into_iter().map(Some).collect(),
            results: (0..n).map(|_| None).collect(),
            outstanding: 0,
            broken: false,
        };
        let chunk = RING_ENTRIES as usize;
        let mut start = 0;
        while start < n && !batch.broken {
            let end = (start + chunk).min(n);
            batch.run(start..end);
            start = end;
        }
        let broken = batch.broken;
        let results = batch.finish();
        if broken {
            // Completions of leaked buffers may still arrive: the ring must not serve
            // another batch. Forgetting it keeps the kernel's mappings for them too.
            if let RingState::Ready(ring) = std::mem::replace(&mut *state, RingState::Unavailable) {
                std::mem::forget(ring);
            }
            tracing::warn!("io_uring failed; this thread reads without it from now on");
        }
        Ok(results)
    })
}

/// The reads of one [`read_all`] call while any may be in the kernel's hands.
struct InFlight<'r> {
    ring: &'r mut IoUring,
    /// A read's buffer stays here (its heap memory unmoved) until its completion is reaped.
    reads: Vec<Option<UringRead>>,
    results: Vec<Option<ReadResult>>,
    /// Reads pushed to the submission queue whose completion is not reaped yet.
    outstanding: usize,
    /// The ring failed with reads outstanding.
    broken: bool,
}

impl InFlight<'_> {
    /// Pushes the reads of `range`, submits them in one call and reaps them all.
    fn run(&mut self, range: std::ops::Range<usize>) {
        for i in range {
            let Some(r) = self.reads[i].as_mut() else {
                continue;
            };
            let Some(window) = r.buf.get_mut(r.at..r.at + r.len as usize) else {
                self.results[i] = Some(Err(io::Error::other("read window outside its buffer")));
                self.reads[i] = None;
                continue;
            };
            let sqe = opcode::Read::new(types::Fd(r.fd), window.as_mut_ptr(), r.len)
                .offset(r.offset)
                .build()
                .user_data(i as u64);
            // SAFETY: the entry points at `window`, `len` bytes of the heap buffer owned by
            // `self.reads[i]`. That buffer is neither freed nor reallocated until this
            // entry's completion is reaped (`reap` takes it out only then; `Drop` reaps or
            // leaks), so the kernel writes only into live memory we do not touch meanwhile.
            // `fd` is a file the caller keeps open for the whole call.
            let pushed = unsafe { self.ring.submission().push(&sqe) };
            match pushed {
                Ok(()) => self.outstanding += 1,
                Err(_) => {
                    // Cannot happen (a chunk fits the ring, which is empty between chunks);
                    // the read fails alone if it does.
                    self.results[i] = Some(Err(io::Error::other("io_uring submission queue full")));
                }
            }
        }
        self.reap();
    }

    /// Submits what is queued and reaps completions until none is outstanding, or marks
    /// the batch broken when the ring fails.
    fn reap(&mut self) {
        let mut busy = 0;
        while self.outstanding > 0 {
            match self.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e)
                    if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EBUSY))
                        && busy < BUSY_RETRIES =>
                {
                    busy += 1;
                    std::thread::yield_now();
                }
                Err(_) => {
                    self.broken = true;
                    return;
                }
            }
            for cqe in self.ring.completion() {
                let i = cqe.user_data() as usize;
                let Some(read) = self.reads.get_mut(i).and_then(Option::take) else {
                    continue;
                };
                self.outstanding -= 1;
                let res = cqe.result();
                self.results[i] = Some(if res < 0 {
                    Err(io::Error::from_raw_os_error(-res))
                } else {
                    Ok((read.buf, res as usize))
                });
            }
        }
    }

    /// The results in order; a read never answered (a broken ring) fails.
    fn finish(mut self) -> Vec<ReadResult> {
        self.leak_outstanding();
        std::mem::take(&mut self.results)
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(io::Error::other("io_uring failed"))))
            .collect()
    }

    /// Leaks the buffers of reads whose completion will never be reaped: the kernel may
    /// still write into them.
    fn leak_outstanding(&mut self) {
        if self.outstanding == 0 {
            return;
        }
        for (read, result) in self.reads.iter_mut().zip(&self.results) {
            if result.is_none() {
                if let Some(read) = read.take() {
                    std::mem::forget(read.buf);
                }
            }
        }
        self.outstanding = 0;
    }
}

impl Drop for InFlight<'_> {
    /// Unwinding with reads in flight: reap them first, or leak their buffers.
    fn drop(&mut self) {
        if self.outstanding > 0 && !self.broken {
            self.reap();
        }
        self.leak_outstanding();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    /// Every read of a batch (more than one ring's worth) comes back with its own bytes.
    #[test]
    fn reads_a_batch_larger_than_the_ring() {
        if !available() {
            eprintln!("io_uring unavailable here; nothing to test");
            return;
        }
        let mut f = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..300u32 * 16).map(|i| (i % 251) as u8).collect();
        f.write_all(&data).unwrap();
        let reads: Vec<UringRead> = (0..300)
            .map(|i| UringRead {
                fd: f.as_raw_fd(),
                offset: i * 16,
                buf: vec![0; 20],
                at: 2,
                len: 16,
            })
            .collect();
        let results = read_all(reads).ok().unwrap();
        assert_eq!(results.len(), 300);
        for (i, r) in results.into_iter().enumerate() {
            let (buf, n) = r.unwrap();
            assert_eq!(n, 16);
            assert_eq!(&buf[2..18], &data[i * 16..i * 16 + 16]);
        }
    }

    /// A read of a bad descriptor fails alone; the others of its batch succeed.
    #[test]
    fn a_failing_read_fails_alone() {
        if !available() {
            return;
        }
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(b"hello world").unwrap();
        let read = |fd| UringRead {
            fd,
            offset: 0,
            buf: vec![0; 5],
            at: 0,
            len: 5,
        };
        let results = read_all(vec![read(f.as_raw_fd()), read(-1), read(f.as_raw_fd())])
            .ok()
            .unwrap();
        assert_eq!(&results[0].as_ref().unwrap().0[..], b"hello");
        assert!(results[1].is_err());
        assert_eq!(&results[2].as_ref().unwrap().0[..], b"hello");
    }
}

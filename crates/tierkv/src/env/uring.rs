//! Positional reads through io_uring: the one module of the read path with `unsafe`. It
//! owns a ring per thread (created on the thread's first use) and the way to use it: a
//! [`Session`], which holds the thread's ring for one caller that pushes reads, submits
//! them and reaps completions as they come (the pipelined reads of `file.rs`'s
//! `ReadSession`). What to read, alignment, accounting, the device model and fault injection
//! are `file.rs`'s business.
//!
//! Crate: `io-uring` (tokio-rs), the maintained low-level binding: it exposes the rings and
//! opcodes without a runtime. `tokio-uring` needs its own tokio runtime driving the ring
//! (tierkv's readers are plain threads), and `rio` is unmaintained.
//!
//! The soundness rule: the kernel writes into a read's buffer until the read's completion
//! is reaped, so no buffer may be freed or moved before then. A [`Session`] takes each
//! read's buffer by value and keeps it (its heap memory unmoved) until that read's
//! completion is reaped; only then is the buffer handed back. Dropping a session (also
//! when unwinding) reaps every read still outstanding first; if the ring fails so that
//! the remaining completions can never be reaped, their buffers are leaked (never freed)
//! and the ring is retired for the thread (forgotten, so the kernel's mappings stay).
//!
//! At most [`RING_ENTRIES`] reads are outstanding in a session (the submission queue's
//! size; the completion queue is twice that, so it never overflows).

use io_uring::{opcode, types, IoUring};
use std::cell::RefCell;
use std::io;
use std::os::fd::RawFd;

/// Entries of each thread's ring, and the most reads a session keeps outstanding.
pub(crate) const RING_ENTRIES: u32 = 128;

/// Times a submission that the kernel refuses for now (EAGAIN, EBUSY: out of resources)
/// is retried before the ring is given up.
const BUSY_RETRIES: u32 = 1000;

/// A read's outcome: its buffer and the bytes read, or its error.
pub(crate) type ReadResult = io::Result<(Vec<u8>, usize)>;

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
    /// A [`Session`] holds the ring: a nested use on this thread goes without it.
    InUse,
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
        matches!(*state, RingState::Ready(_) | RingState::InUse)
    })
}

/// The thread's ring. Completions are posted cooperatively (`IORING_SETUP_COOP_TASKRUN`,
/// Linux 5.19): by default the kernel interrupts the submitting thread with an
/// inter-processor interrupt for every completion so it runs the completion's task work
/// at once; a `perf` profile of pipelined point reads put 10% of the client threads' CPU
/// in those interrupts and their reschedules. The ring is only ever used by the thread
/// that made it, which enters the kernel for every turn anyway, so the task work can wait
/// for that entry; `IORING_SETUP_TASKRUN_FLAG` tells a turn that submits nothing that task
/// work is pending, so it enters to run it ([`Session::submit_and_reap`]). Older kernels
/// refuse the flags: then the ring is made without them.
fn new_ring() -> io::Result<IoUring> {
    IoUring::builder()
        .setup_coop_taskrun()
        .setup_taskrun_flag()
        .build(RING_ENTRIES)
        .or_else(|_| IoUring::new(RING_ENTRIES))
}

fn ensure_ring(state: &mut RingState) {
    if let RingState::Untried = state {
        *state = match new_ring() {
            Ok(ring) => RingState::Ready(Box::new(ring)),
            Err(e) => {
                tracing::debug!("io_uring unavailable on this thread: {e}");
                RingState::Unavailable
            }
        };
    }
}

/// The thread's ring, held by one caller: reads are pushed ([`Session::push`]), then
/// submitted and reaped as they complete ([`Session::submit_and_reap`]), any number of
/// times. Each pushed read is identified by the id `push` returns until its completion is
/// reaped (ids are reused afterwards).
pub(crate) struct Session {
    /// `None` once the ring broke (it was forgotten: see the module doc).
    ring: Option<Box<IoUring>>,
    /// Slot `id`: the read with that id while it is outstanding. Its buffer stays here
    /// (its heap memory unmoved) until its completion is reaped.
    reads: Vec<Option<UringRead>>,
    free: Vec<usize>,
    /// Reads pushed whose completion is not reaped yet (submitted or not).
    outstanding: usize,
}

impl Session {
    /// Takes the thread's ring for a session; `None` when this thread has none (or a
    /// session already holds it).
    pub(crate) fn begin() -> Option<Session> {
        RING.with(|cell| {
            let mut state = cell.borrow_mut();
            ensure_ring(&mut state);
            if !matches!(*state, RingState::Ready(_)) {
                return None;
            }
            let RingState::Ready(ring) = std::mem::replace(&mut *state, RingState::InUse) else {
                return None;
            };
            Some(Session {
                ring: Some(ring),
                reads: Vec::new(),
                free: Vec::new(),
                outstanding: 0,
            })
        })
    }

    /// True when another read can be pushed now: the ring works and fewer than
    /// [`RING_ENTRIES`] reads are outstanding.
    pub(crate) fn has_room(&self) -> bool {
        self.ring.is_some() && self.outstanding < RING_ENTRIES as usize
    }

    /// Reads pushed whose completion is not reaped yet.
    pub(crate) fn outstanding(&self) -> usize {
        self.outstanding
    }

    /// Queues `read` for the next submission and returns its id; the read comes back
    /// untouched (`Err`) when there is no room ([`Session::has_room`]), the ring broke,
    /// or its window lies outside its buffer: the caller reads it another way.
    pub(crate) fn push(&mut self, read: UringRead) -> Result<usize, UringRead> {
        if !self.has_room() || read.buf.len() < read.at.saturating_add(read.len as usize) {
            return Err(read);
        }
        let Some(ring) = self.ring.as_mut() else {
            return Err(read);
        };
        let mut read = read;
        // The heap memory of `read.buf` stays where it is when `read` moves into its slot.
        let window = &mut read.buf[read.at..read.at + read.len as usize];
        let id = self.free.pop().unwrap_or_else(|| {
            self.reads.push(None);
            self.reads.len() - 1
        });
        let sqe = opcode::Read::new(types::Fd(read.fd), window.as_mut_ptr(), read.len)
            .offset(read.offset)
            .build()
            .user_data(id as u64);
        // SAFETY: the entry points at `window`, `len` bytes of the heap buffer of `read`,
        // which goes into `self.reads[id]` right below (moving the `Vec` does not move its
        // heap memory). That buffer is neither freed, moved nor reallocated until this
        // entry's completion is reaped (`reap_ready` takes it out only then; a broken ring
        // or `Drop` leaks it otherwise), so the kernel writes only into live memory nobody
        // touches meanwhile. `fd` is a file the caller keeps open until the completion.
        let pushed = unsafe { ring.submission().push(&sqe) };
        match pushed {
            Ok(()) => {
                self.reads[id] = Some(read);
                self.outstanding += 1;
                Ok(id)
            }
            Err(_) => {
                // Cannot happen (at most RING_ENTRIES are outstanding, and the queue has
                // that many entries); the read goes another way if it does.
                self.free.push(id);
                Err(read)
            }
        }
    }

    /// One `io_uring_enter` submitting every read pushed since the last call, then reaps
    /// every completion ready into `out` (id, outcome). `wait`: when no completion is
    /// ready, wait for at least one (if any read is outstanding). A ring that fails ends
    /// every outstanding read with an error in `out` (their buffers leaked) and takes no
    /// more reads.
    pub(crate) fn submit_and_reap(&mut self, wait: bool, out: &mut Vec<(usize, ReadResult)>) {
        let start = out.len();
        let mut busy = 0;
        loop {
            let Some(ring) = self.ring.as_mut() else {
                return;
            };
            let (queued, task_work) = {
                let sq = ring.submission();
                (sq.len(), sq.taskrun())
            };
            let must_wait =
                wait && out.len() == start && self.outstanding > 0 && ring.completion().is_empty();
            if queued > 0 || must_wait || task_work {
                match ring.submit_and_wait(usize::from(must_wait)) {
                    Ok(_) => {}
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                    Err(e)
                        if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EBUSY))
                            && busy < BUSY_RETRIES =>
                    {
                        busy += 1;
                        // Completions may be what the kernel waits for us to take.
                        self.reap_ready(out);
                        std::thread::yield_now();
                        continue;
                    }
                    Err(e) => {
                        self.break_ring(&e, out);
                        return;
                    }
                }
            }
            self.reap_ready(out);
            if !wait || out.len() > start || self.outstanding == 0 {
                return;
            }
        }
    }

    /// Takes every completion in the queue.
    fn reap_ready(&mut self, out: &mut Vec<(usize, ReadResult)>) {
        let Some(ring) = self.ring.as_mut() else {
            return;
        };
        for cqe in ring.completion() {
            let id = cqe.user_data() as usize;
            let Some(read) = self.reads.get_mut(id).and_then(Option::take) else {
                continue;
            };
            self.outstanding -= 1;
            self.free.push(id);
            let res = cqe.result();
            out.push((
                id,
                if res < 0 {
                    Err(io::Error::from_raw_os_error(-res))
                } else {
                    Ok((read.buf, res as usize))
                },
            ));
        }
    }

    /// The ring failed: its outstanding completions will never be reaped, so their
    /// buffers are leaked (the kernel may still write into them) and each read ends with
    /// an error; the ring itself is forgotten (its mappings stay) and retired for the
    /// thread when the session ends.
    fn break_ring(&mut self, why: &io::Error, out: &mut Vec<(usize, ReadResult)>) {
        tracing::warn!("io_uring failed ({why}); this thread reads without it from now on");
        for (id, slot) in self.reads.iter_mut().enumerate() {
            if let Some(read) = slot.take() {
                std::mem::forget(read.buf);
                out.push((id, Err(io::Error::other(format!("io_uring failed: {why}")))));
            }
        }
        self.outstanding = 0;
        if let Some(ring) = self.ring.take() {
            std::mem::forget(ring);
        }
    }
}

impl Drop for Session {
    /// Reaps every read still outstanding (a caller that stopped early, or unwinding),
    /// then gives the ring back to the thread, or retires it if it broke.
    fn drop(&mut self) {
        let mut sink = Vec::new();
        while self.outstanding > 0 && self.ring.is_some() {
            self.submit_and_reap(true, &mut sink);
            sink.clear();
        }
        let back = match self.ring.take() {
            Some(ring) => RingState::Ready(ring),
            None => RingState::Unavailable,
        };
        // Outside a thread's teardown the slot is always there; if it is not, the ring
        // is forgotten rather than closed with nothing known about it.
        let _ = RING.try_with(|cell| {
            if let Ok(mut state) = cell.try_borrow_mut() {
                *state = back;
            } else if let RingState::Ready(ring) = back {
                std::mem::forget(ring);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    /// Test helper: runs every read of `reads` and returns, in order, each one's buffer and bytes read (or
    /// its error). `Err(reads)`, untouched, when this thread has no ring. The ring is kept as
    /// full as it allows (up to [`RING_ENTRIES`] reads outstanding).
    fn read_all(reads: Vec<UringRead>) -> Result<Vec<ReadResult>, Vec<UringRead>> {
        let Some(mut session) = Session::begin() else {
            return Err(reads);
        };
        let n = reads.len();
        let mut results: Vec<Option<ReadResult>> = (0..n).map(|_| None).collect();
        // Which read of the batch an outstanding id is.
        let mut index_of: Vec<usize> = Vec::new();
        let mut done = Vec::new();
        let mut next = reads.into_iter().enumerate().peekable();
        loop {
            while session.has_room() {
                let Some((i, read)) = next.next() else {
                    break;
                };
                match session.push(read) {
                    Ok(id) => {
                        if index_of.len() <= id {
                            index_of.resize(id + 1, usize::MAX);
                        }
                        index_of[id] = i;
                    }
                    Err(_) => results[i] = Some(Err(io::Error::other("io_uring refused the read"))),
                }
            }
            if session.outstanding() == 0 && next.peek().is_none() {
                break;
            }
            if session.outstanding() == 0 && !session.has_room() {
                // The ring broke: what is left fails (the caller reads it another way).
                for (i, _) in next.by_ref() {
                    results[i] = Some(Err(io::Error::other("io_uring failed")));
                }
                break;
            }
            session.submit_and_reap(true, &mut done);
            for (id, res) in done.drain(..) {
                if let Some(&i) = index_of.get(id) {
                    results[i] = Some(res);
                }
            }
        }
        Ok(results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(io::Error::other("io_uring failed"))))
            .collect())
    }

    fn data_file(len: u32) -> (std::fs::File, Vec<u8>) {
        let mut f = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        f.write_all(&data).unwrap();
        (f, data)
    }

    /// Every read of a batch (more than one ring's worth) comes back with its own bytes.
    #[test]
    fn reads_a_batch_larger_than_the_ring() {
        if !crate::testing::require_io_uring(
            "env::uring::tests::reads_a_batch_larger_than_the_ring",
        ) {
            return;
        }
        let (f, data) = data_file(300 * 16);
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
        if !crate::testing::require_io_uring("env::uring::tests::a_failing_read_fails_alone") {
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

    /// A session is incremental: reads pushed while earlier ones are outstanding are
    /// submitted and reaped on their own, each with its own bytes; the session keeps at
    /// most RING_ENTRIES outstanding (push refuses more); a nested session on the thread
    /// gets no ring while one holds it, and the ring is back once it ends.
    #[test]
    fn a_session_pushes_while_reads_are_outstanding_and_caps_them() {
        if !crate::testing::require_io_uring(
            "env::uring::tests::a_session_pushes_while_reads_are_outstanding_and_caps_them",
        ) {
            return;
        }
        let (f, data) = data_file(4096);
        let read = |i: u64| UringRead {
            fd: f.as_raw_fd(),
            offset: i * 8,
            buf: vec![0; 8],
            at: 0,
            len: 8,
        };
        let mut s = Session::begin().unwrap();
        assert!(Session::begin().is_none(), "one session holds the ring");
        let mut offsets = std::collections::HashMap::new();
        let mut out = Vec::new();
        let mut seen = 0;
        let mut check =
            |out: &mut Vec<(usize, ReadResult)>,
             offsets: &std::collections::HashMap<usize, usize>| {
                for (id, res) in out.drain(..) {
                    let (buf, n) = res.unwrap();
                    let at = offsets[&id];
                    assert_eq!((n, &buf[..]), (8, &data[at..at + 8]));
                    seen += 1;
                }
            };
        for i in 0..400u64 {
            while !s.has_room() {
                s.submit_and_reap(true, &mut out);
                check(&mut out, &offsets);
            }
            let Ok(id) = s.push(read(i % 500)) else {
                panic!("a session with room refused read {i}");
            };
            offsets.insert(id, (i % 500) as usize * 8);
            if i % 3 == 0 {
                // Submit now: later pushes go while these are outstanding.
                s.submit_and_reap(false, &mut out);
                check(&mut out, &offsets);
            }
        }
        assert!(s.outstanding() <= RING_ENTRIES as usize);
        while s.outstanding() > 0 {
            s.submit_and_reap(true, &mut out);
            check(&mut out, &offsets);
        }
        assert_eq!(seen, 400, "every read reaped once");
        let full = (0..RING_ENTRIES as u64).all(|i| s.push(read(i)).is_ok());
        assert!(full && s.push(read(0)).is_err(), "push past the cap");
        drop(s);
        assert!(
            Session::begin().is_some(),
            "the ring is back after the session"
        );
    }

    /// Unwinding with reads outstanding reaps them before their buffers go (the session's
    /// drop), and the thread keeps a working ring.
    #[test]
    fn a_session_dropped_while_unwinding_reaps_its_reads_and_keeps_the_ring() {
        if !crate::testing::require_io_uring(
            "env::uring::tests::a_session_dropped_while_unwinding_reaps_its_reads_and_keeps_the_ring",
        ) {
            return;
        }
        let (f, data) = data_file(1024);
        let fd = f.as_raw_fd();
        let r = std::panic::catch_unwind(move || {
            let mut s = Session::begin().unwrap();
            for i in 0..64u64 {
                let pushed = s.push(UringRead {
                    fd,
                    offset: i * 16,
                    buf: vec![0; 16],
                    at: 0,
                    len: 16,
                });
                assert!(pushed.is_ok());
            }
            s.submit_and_reap(false, &mut Vec::new());
            panic!("injected panic with reads in flight");
        });
        assert!(r.is_err());
        let results = read_all(vec![UringRead {
            fd: f.as_raw_fd(),
            offset: 16,
            buf: vec![0; 16],
            at: 0,
            len: 16,
        }])
        .ok()
        .expect("the ring survives");
        assert_eq!(&results[0].as_ref().unwrap().0[..], &data[16..32]);
    }
}

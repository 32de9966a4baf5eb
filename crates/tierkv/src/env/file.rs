//! File handles: positional reads (direct I/O with aligned buffers where the filesystem
//! allows it), pipelined reads that many requests keep in flight at once
//! ([`ReadSession`], through `uring.rs` on Linux), and buffered appends. Every syscall is charged to the tier's device model and
//! counters.

use super::{DeviceProfile, FaultOp, IoCause, Tier, TierHandle};
use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// Alignment a direct read starts with: the 512-byte logical sector most disks report
/// (`/sys/block/*/queue/logical_block_size`). Aligning a small block's read to 4 KiB instead
/// would move up to 8 KiB for a 4 KiB block that straddles two pages.
const MIN_DIRECT_ALIGN: usize = 512;
/// Bytes a direct read of `len` bytes at `offset` moves from a disk with 512-byte sectors
/// (whole sectors from the one holding `offset`): what a table writer sizes a data block
/// by, so that the point read of a block stays within one I/O unit.
pub(crate) fn direct_read_span(offset: u64, len: usize) -> usize {
    DirectSpan::new(offset, len, MIN_DIRECT_ALIGN).span
}

/// Alignment a file falls back to when the device refuses 512-byte direct reads (a
/// 4K-sector device answers EINVAL); every common device accepts it. Buffers are always
/// aligned to it.
const MAX_DIRECT_ALIGN: usize = 4096;

static WARNED_NO_DIRECT: AtomicBool = AtomicBool::new(false);

thread_local! {
    static THREAD_READS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    static THREAD_SLOW_READS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    static MEMORY_ONLY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// While alive, the calling thread's file opens for reading and its reads (one at a time
/// or through a `ReadSession`) fail with [`Error::WouldBlock`] instead of touching a
/// disk: a read that was judged answerable from memory (an event loop's, which must never
/// wait on a disk) stops there if a table or block left memory since the judgement.
pub struct MemoryOnly {
    before: bool,
}

impl MemoryOnly {
    /// Refuses disk reads on this thread until the guard is dropped.
    pub fn enter() -> MemoryOnly {
        MemoryOnly {
            before: MEMORY_ONLY.with(|m| m.replace(true)),
        }
    }
}

impl Drop for MemoryOnly {
    fn drop(&mut self) {
        MEMORY_ONLY.with(|m| m.set(self.before));
    }
}

/// `Err(WouldBlock)` inside a [`MemoryOnly`] span.
fn refuse_in_memory_only() -> Result<()> {
    if MEMORY_ONLY.with(|m| m.get()) {
        return Err(Error::WouldBlock("the read needs the disk"));
    }
    Ok(())
}

/// Disk reads issued by the calling thread so far. A caller compares two values to learn
/// whether an operation touched a disk at all (a get served from the block cache did not).
pub fn thread_read_count() -> u64 {
    THREAD_READS.with(|c| c.get())
}

/// Of [`thread_read_count`], the reads of the slow tier's files: a caller (the benchmark)
/// compares two values to learn whether an operation waited on the slow disk.
pub fn thread_slow_read_count() -> u64 {
    THREAD_SLOW_READS.with(|c| c.get())
}

/// Counts one finished read of a file of `tier` for the calling thread.
fn count_thread_read(tier: Tier) {
    THREAD_READS.with(|c| c.set(c.get() + 1));
    if tier == Tier::Slow {
        THREAD_SLOW_READS.with(|c| c.set(c.get() + 1));
    }
}

fn warn_no_direct(path: &Path, why: &std::io::Error) {
    if !WARNED_NO_DIRECT.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            "direct I/O is not supported for {} ({why}); falling back to buffered reads, \
             so the page cache may hide the slow tier",
            path.display()
        );
    }
}

/// A file opened for positional reads.
pub struct RandomAccessFile {
    tier: Arc<TierHandle>,
    path: PathBuf,
    direct: Option<File>,
    /// Buffered handle: always used when direct I/O is off, opened lazily as a fallback
    /// when a direct read is refused.
    buffered: OnceLock<File>,
    /// Alignment of direct reads: [`MIN_DIRECT_ALIGN`] until the device refuses it, then
    /// [`MAX_DIRECT_ALIGN`] (learned per file, so no probe read at open).
    align: AtomicUsize,
    size: u64,
}

impl RandomAccessFile {
    pub(crate) fn open(tier: Arc<TierHandle>, path: PathBuf, want_direct: bool) -> Result<Self> {
        refuse_in_memory_only()?;
        let direct = if want_direct {
            match OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECT)
                .open(&path)
            {
                Ok(f) => Some(f),
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    warn_no_direct(&path, &e);
                    None
                }
                Err(e) => return Err(Error::io(&path, e)),
            }
        } else {
            None
        };
        let buffered = OnceLock::new();
        let size = match &direct {
            Some(f) => f.metadata(),
            None => {
                let f = File::open(&path).map_err(|e| Error::io(&path, e))?;
                let m = f.metadata();
                let _ = buffered.set(f);
                m
            }
        }
        .map_err(|e| Error::io(&path, e))?
        .len();
        Ok(RandomAccessFile {
            tier,
            path,
            direct,
            buffered,
            align: AtomicUsize::new(MIN_DIRECT_ALIGN),
            size,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Size of the file when it was opened.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The device profile of the file's tier (none when the tier is not emulated).
    pub fn device_profile(&self) -> DeviceProfile {
        self.tier.device_profile()
    }

    /// Whether reads bypass the page cache.
    pub fn is_direct(&self) -> bool {
        self.direct.is_some()
    }

    /// The alignment direct reads use now (512 B unless the device refused it; `None`
    /// with buffered reads). A read of `len` bytes moves at most `len + 2 * align - 2`.
    pub fn direct_alignment(&self) -> Option<usize> {
        self.direct
            .as_ref()
            .map(|_| self.align.load(Ordering::Relaxed))
    }

    fn buffered_file(&self) -> Result<&File> {
        if let Some(f) = self.buffered.get() {
            return Ok(f);
        }
        let f = File::open(&self.path).map_err(|e| Error::io(&self.path, e))?;
        Ok(self.buffered.get_or_init(|| f))
    }

    /// Reads exactly `len` bytes at `offset`, as one I/O charged to `cause`. A range past
    /// the end of the file is a corruption (the caller's offsets came from the file itself).
    pub fn read_at(&self, offset: u64, len: usize, cause: IoCause) -> Result<Vec<u8>> {
        refuse_in_memory_only()?;
        self.check_range(offset, len)?;
        self.tier.fault(FaultOp::Read, &self.path)?;
        let data = self
            .tier
            .timed_read(cause, len as u64, || self.read_now(offset, len))?;
        count_thread_read(self.tier.tier);
        Ok(data)
    }

    fn check_range(&self, offset: u64, len: usize) -> Result<()> {
        let end = offset.checked_add(len as u64);
        if end.is_none_or(|end| end > self.size) {
            return Err(Error::corruption(
                &self.path,
                offset,
                format!(
                    "read of {len} bytes past the end of a {}-byte file",
                    self.size
                ),
            ));
        }
        Ok(())
    }

    /// The read itself, on this thread (no fault check, no accounting).
    fn read_now(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        match &self.direct {
            Some(f) => match self.read_direct_adaptive(f, offset, len) {
                Ok(d) => Ok(d),
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    warn_no_direct(&self.path, &e);
                    self.read_buffered(offset, len)
                }
                Err(e) => Err(Error::io(&self.path, e)),
            },
            None => self.read_buffered(offset, len),
        }
    }

    /// Where and how a pipelined read of `len` bytes at `offset` reads: the aligned span of
    /// a direct file, or the exact range of a buffered one.
    fn plan(&self, offset: u64, len: usize) -> Result<ReadPlan> {
        use std::os::fd::AsRawFd;
        let too_long = || {
            Error::io(
                &self.path,
                std::io::Error::other("read too long for one request"),
            )
        };
        Ok(match &self.direct {
            Some(f) => {
                let s = DirectSpan::new(offset, len, self.align.load(Ordering::Relaxed));
                ReadPlan {
                    fd: f.as_raw_fd(),
                    start: s.start,
                    span: u32::try_from(s.span).map_err(|_| too_long())?,
                    from: s.from,
                    direct: true,
                }
            }
            None => ReadPlan {
                fd: self.buffered_file()?.as_raw_fd(),
                start: offset,
                span: u32::try_from(len).map_err(|_| too_long())?,
                from: 0,
                direct: false,
            },
        })
    }

    fn read_buffered(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        self.buffered_file()?
            .read_exact_at(&mut buf, offset)
            .map_err(|e| Error::io(&self.path, e))?;
        Ok(buf)
    }

    /// A direct read at the file's current alignment; a device that refuses 512-byte
    /// alignment (EINVAL) makes the file switch to 4 KiB for this and every later read.
    fn read_direct_adaptive(&self, f: &File, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
        let align = self.align.load(Ordering::Relaxed);
        match self.read_direct(f, offset, len, align) {
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) && align < MAX_DIRECT_ALIGN => {
                self.align.store(MAX_DIRECT_ALIGN, Ordering::Relaxed);
                self.read_direct(f, offset, len, MAX_DIRECT_ALIGN)
            }
            r => r,
        }
    }

    /// O_DIRECT read: widen the range to `align` boundaries, read into an aligned window of
    /// an over-allocated buffer ([`DirectSpan`]), then copy out the requested bytes.
    fn read_direct(
        &self,
        f: &File,
        offset: u64,
        len: usize,
        align: usize,
    ) -> std::io::Result<Vec<u8>> {
        let s = DirectSpan::new(offset, len, align);
        DIRECT_SCRATCH.with_borrow_mut(|raw| {
            s.fit(raw);
            let out = Self::read_direct_into(f, raw, &s, len, align);
            if raw.len() > SCRATCH_KEEP {
                *raw = Vec::new();
            }
            out
        })
    }

    /// The reading part of [`RandomAccessFile::read_direct`], into `raw` (a buffer
    /// [`DirectSpan::fit`] made room in).
    fn read_direct_into(
        f: &File,
        raw: &mut [u8],
        s: &DirectSpan,
        len: usize,
        align: usize,
    ) -> std::io::Result<Vec<u8>> {
        let skew = DirectSpan::skew(raw);
        let window = &mut raw[skew..skew + s.span];
        let mut filled = 0;
        let want = s.from + len;
        while filled < want {
            let n = f.read_at(&mut window[filled..], s.start + filled as u64)?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            filled += n;
            if filled % align != 0 {
                // Short read that is not block-aligned: we hit end of file.
                break;
            }
        }
        if filled < want {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        Ok(window[s.from..s.from + len].to_vec())
    }
}

thread_local! {
    /// The buffer a thread's one-at-a-time direct reads land in before the bytes asked
    /// for are copied out: reusing it spares zeroing a fresh buffer of the span plus the
    /// alignment slack per read (the copy out is needed anyway, the bytes asked for
    /// rarely start at an aligned address).
    static DIRECT_SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Largest scratch buffer a thread keeps between direct reads (a user iterator's
/// largest readahead window, with the alignment slack: memory outside the budget, per
/// thread); a larger read's (a compaction's 1 MiB window) is freed after it.
const SCRATCH_KEEP: usize = (256 << 10) + 2 * MAX_DIRECT_ALIGN;

/// The one place for O_DIRECT alignment: a read of `len` bytes at `offset` widened to
/// `align` boundaries, read into a window of an over-allocated buffer that starts at a
/// [`MAX_DIRECT_ALIGN`] boundary (safe Rust: the aligned sub-slice is picked instead of
/// using a custom allocator). Used by the one-at-a-time reads and the pipelined ones.
struct DirectSpan {
    /// File offset of the span (aligned).
    start: u64,
    /// Bytes of the span (a multiple of the alignment).
    span: usize,
    /// Where the requested bytes start in the span.
    from: usize,
}

impl DirectSpan {
    fn new(offset: u64, len: usize, align: usize) -> DirectSpan {
        let a = align as u64;
        let start = offset / a * a;
        let end = (offset + len as u64).div_ceil(a) * a;
        DirectSpan {
            start,
            span: (end - start) as usize,
            from: (offset - start) as usize,
        }
    }

    /// Grows `buf` (whatever it holds: a read overwrites the window it delivers) to
    /// room for an aligned window of the span.
    fn fit(&self, buf: &mut Vec<u8>) {
        let need = self.span + MAX_DIRECT_ALIGN;
        if buf.len() < need {
            buf.resize(need, 0);
        }
    }

    /// Where the aligned window starts in `buf`.
    fn skew(buf: &[u8]) -> usize {
        buf.as_ptr().align_offset(MAX_DIRECT_ALIGN)
    }
}

/// How one request of a [`ReadSession`] reads: `span` bytes at `start` of `fd` into a buffer from
/// [`ReadPlan::buffer`] at [`ReadPlan::skew`]; the requested bytes start `from` bytes into
/// the span.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
struct ReadPlan {
    fd: std::os::fd::RawFd,
    start: u64,
    span: u32,
    from: usize,
    /// A direct read: the window must start at an aligned address.
    direct: bool,
}

#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
impl ReadPlan {
    /// The bytes a buffer for the read needs.
    fn buffer_len(&self) -> usize {
        if self.direct {
            self.span as usize + MAX_DIRECT_ALIGN
        } else {
            self.span as usize
        }
    }

    /// A buffer for the read: `spare` (a finished read's buffer, whatever it holds: the
    /// read overwrites the window it delivers) if there is one, grown as needed, or a
    /// fresh one. Reusing buffers spares a zeroed allocation of a block plus the
    /// alignment slack per read.
    fn buffer(&self, spare: Option<Vec<u8>>) -> Vec<u8> {
        let need = self.buffer_len();
        match spare {
            Some(mut buf) => {
                if buf.len() < need {
                    buf.resize(need, 0);
                }
                buf
            }
            None => vec![0u8; need],
        }
    }

    /// Where the read's window starts in `buf` (one of [`ReadPlan::buffer`]'s).
    fn skew(&self, buf: &[u8]) -> usize {
        if self.direct {
            DirectSpan::skew(buf)
        } else {
            0
        }
    }
}

/// What keeps a file open while a pipelined read of it is in flight ([`ReadSession`]):
/// the read's descriptor must stay valid until its completion is reaped.
pub(crate) trait HoldsFile {
    /// The file read.
    fn file(&self) -> &RandomAccessFile;
}

/// One read of a round ([`read_round`]): `len` bytes at `offset` of the file its holder
/// keeps open, charged to `cause`. The round puts the bytes read into `into`, or leaves
/// it empty if the read failed: whoever planned the read then reads again on its own and
/// reports the error.
pub struct RoundRead {
    holder: Arc<dyn HoldsFile + Send + Sync>,
    offset: u64,
    len: usize,
    cause: IoCause,
    into: Arc<std::sync::OnceLock<Vec<u8>>>,
}

impl RoundRead {
    pub(crate) fn new(
        holder: Arc<dyn HoldsFile + Send + Sync>,
        offset: u64,
        len: usize,
        cause: IoCause,
        into: Arc<std::sync::OnceLock<Vec<u8>>>,
    ) -> RoundRead {
        RoundRead {
            holder,
            offset,
            len,
            cause,
            into,
        }
    }
}

/// Reads all of `reads` in one round, in flight at once ([`read_together`]).
pub(crate) fn read_round(reads: &[RoundRead]) {
    let outcomes = read_together(reads.iter().map(|r| (&*r.holder, r.offset, r.len, r.cause)));
    for (r, outcome) in reads.iter().zip(outcomes) {
        if let Ok(bytes) = outcome {
            let _ = r.into.set(bytes);
        }
    }
}

/// Reads every `(holder, offset, len, cause)` at once through a [`ReadSession`] (their
/// latencies overlap; a thread without an io_uring ring reads them one after another) and
/// returns each one's bytes or error, in order. Each read is counted as a plain read is.
pub(crate) fn read_together<H: HoldsFile + Copy>(
    reads: impl IntoIterator<Item = (H, u64, usize, IoCause)>,
) -> Vec<Result<Vec<u8>>> {
    let mut session: ReadSession<H> = ReadSession::new();
    let mut out: Vec<Option<Result<Vec<u8>>>> = Vec::new();
    let mut started = Vec::new();
    for (tag, (holder, offset, len, cause)) in reads.into_iter().enumerate() {
        started.push((holder, offset));
        session.start(holder, offset, len, cause, tag);
        out.push(None);
    }
    let mut left = out.len();
    let mut done = Vec::new();
    while left > 0 {
        session.turn(true, &mut done);
        if done.is_empty() && session.in_flight() == 0 {
            // Cannot happen (every started read is delivered once); never spin on it.
            break;
        }
        for (tag, r) in done.drain(..) {
            left -= 1;
            out[tag] = Some(r);
        }
    }
    out.into_iter()
        .zip(started)
        .map(|(r, (holder, offset))| {
            r.unwrap_or_else(|| {
                let path = holder.file().path();
                Err(Error::corruption(
                    path,
                    offset,
                    "a read was never delivered",
                ))
            })
        })
        .collect()
}

impl<T: HoldsFile + ?Sized> HoldsFile for &T {
    fn file(&self) -> &RandomAccessFile {
        (**self).file()
    }
}

/// One request of a [`ReadSession`] from its start to its delivery.
struct SessionRead<H> {
    holder: H,
    tag: usize,
    offset: u64,
    len: usize,
    cause: IoCause,
    plan: ReadPlan,
    /// When the tier's device model says the read is done (`None`: the tier is not
    /// emulated).
    done_at: Option<std::time::Instant>,
}

/// Pipelined reads on one thread: requests start one at a time ([`ReadSession::start`])
/// and finish as the disk completes them ([`ReadSession::turn`]), with no barrier between
/// them, through the thread's io_uring ring while the session lives (reads run one at a
/// time at `start` when the thread has no ring). Each request is served exactly as
/// [`RandomAccessFile::read_at`] would serve it:
///
/// - a range past its file's end, an injected fault (checked once per request, at its
///   start) or a failed read fails only that request; a read io_uring fails or shortens
///   is read again the ordinary way;
/// - direct reads use the file's [`DirectSpan`] alignment;
/// - a successful read is counted (bytes and reads by tier and cause, the thread's read
///   count) once, when it completes;
/// - a tier's device model reserves the request's time when it starts
///   ([`super::DeviceModel::reserve`]) and the request is delivered no earlier than
///   that: the latencies of all requests in flight overlap, as concurrent I/Os' do.
pub(crate) struct ReadSession<H: HoldsFile> {
    #[cfg(target_os = "linux")]
    ring: Option<super::uring::Session>,
    /// Requests started and not delivered, by session id (ids are reused).
    reads: Vec<Option<SessionRead<H>>>,
    free: Vec<usize>,
    /// The session id of each ring id.
    #[cfg(target_os = "linux")]
    by_ring_id: Vec<usize>,
    /// Started requests waiting for room in the ring.
    queued: std::collections::VecDeque<usize>,
    /// Finished requests to deliver, and finished ones held until their device time.
    ready: Vec<(usize, Result<Vec<u8>>)>,
    delayed: Vec<(std::time::Instant, usize, Result<Vec<u8>>)>,
    /// Requests pushed to the ring since the last submission.
    pushed: usize,
    #[cfg(target_os = "linux")]
    completions: Vec<(usize, super::uring::ReadResult)>,
    /// Buffers of reads the ring finished, for the next reads (at most
    /// [`SPARE_BUFFERS`]).
    #[cfg(target_os = "linux")]
    spare: Vec<Vec<u8>>,
}

/// Most finished reads' buffers a [`ReadSession`] keeps for reuse: about one stream
/// window's worth of reads in flight.
#[cfg(target_os = "linux")]
const SPARE_BUFFERS: usize = 128;

/// Most bytes of spare buffers a thread keeps between [`ReadSession`]s (a user
/// iterator's readahead window split into spans, with their alignment slack: memory
/// outside the budget, per thread, as [`SCRATCH_KEEP`] is). A scan reads each window
/// through a session of its own, and without these every span's read zeroed a fresh
/// buffer of its size.
#[cfg(target_os = "linux")]
const SESSION_SPARE_KEEP: usize = 2 * SCRATCH_KEEP;

#[cfg(target_os = "linux")]
thread_local! {
    static SESSION_SPARES: std::cell::RefCell<Vec<Vec<u8>>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

impl<H: HoldsFile> ReadSession<H> {
    /// A session over this thread's ring (or without one).
    pub(crate) fn new() -> ReadSession<H> {
        ReadSession {
            #[cfg(target_os = "linux")]
            ring: super::uring::Session::begin(),
            reads: Vec::new(),
            free: Vec::new(),
            #[cfg(target_os = "linux")]
            by_ring_id: Vec::new(),
            queued: Default::default(),
            ready: Vec::new(),
            delayed: Vec::new(),
            pushed: 0,
            #[cfg(target_os = "linux")]
            completions: Vec::new(),
            #[cfg(target_os = "linux")]
            spare: SESSION_SPARES
                .try_with(|pool| pool.try_borrow_mut().map(|mut p| std::mem::take(&mut *p)))
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default(),
        }
    }

    /// Finished reads' buffers the session holds for its next reads (tests).
    #[cfg(test)]
    pub(crate) fn spare_buffers(&self) -> usize {
        #[cfg(target_os = "linux")]
        return self.spare.len();
        #[cfg(not(target_os = "linux"))]
        0
    }

    /// Requests started and not delivered yet (reading, or finished and held).
    pub(crate) fn in_flight(&self) -> usize {
        self.reads.len() - self.free.len() + self.ready.len() + self.delayed.len()
    }

    /// Starts a read of `len` bytes at `offset` of `holder`'s file, charged to `cause`;
    /// [`ReadSession::turn`] delivers its outcome with `tag`. It is pushed to the ring
    /// now and submitted by the next turn (or read right here without a ring).
    pub(crate) fn start(&mut self, holder: H, offset: u64, len: usize, cause: IoCause, tag: usize) {
        let file = holder.file();
        let plan = refuse_in_memory_only()
            .and_then(|()| file.check_range(offset, len))
            .and_then(|()| file.tier.fault(FaultOp::Read, &file.path))
            .and_then(|()| file.plan(offset, len));
        let plan = match plan {
            Ok(p) => p,
            Err(e) => {
                self.ready.push((tag, Err(e)));
                return;
            }
        };
        let done_at = file.tier.device.reserve(std::iter::once(len as u64));
        let id = self.free.pop().unwrap_or_else(|| {
            self.reads.push(None);
            self.reads.len() - 1
        });
        self.reads[id] = Some(SessionRead {
            holder,
            tag,
            offset,
            len,
            cause,
            plan,
            done_at,
        });
        self.queued.push_back(id);
        self.push_queued();
    }

    /// Delivers `tag` failed with `e` at the next turn (a request that could not even be
    /// started, e.g. its length could not be known).
    pub(crate) fn fail(&mut self, tag: usize, e: Error) {
        self.ready.push((tag, Err(e)));
    }

    /// Pushes queued requests while the ring has room; without a ring (or once it
    /// broke) reads them on this thread.
    fn push_queued(&mut self) {
        while let Some(&id) = self.queued.front() {
            #[cfg(target_os = "linux")]
            if let Some(ring) = self.ring.as_mut() {
                if ring.has_room() {
                    let Some(r) = self.reads[id].as_ref() else {
                        self.queued.pop_front();
                        continue;
                    };
                    let buf = r.plan.buffer(self.spare.pop());
                    let read = super::uring::UringRead {
                        fd: r.plan.fd,
                        offset: r.plan.start,
                        at: r.plan.skew(&buf),
                        buf,
                        len: r.plan.span,
                    };
                    self.queued.pop_front();
                    match ring.push(read) {
                        Ok(ring_id) => {
                            if self.by_ring_id.len() <= ring_id {
                                self.by_ring_id.resize(ring_id + 1, usize::MAX);
                            }
                            self.by_ring_id[ring_id] = id;
                            self.pushed += 1;
                        }
                        Err(_) => self.read_sync(id),
                    }
                    continue;
                }
                if ring.outstanding() > 0 {
                    // Full: the rest wait for completions.
                    return;
                }
                // No room and nothing outstanding: the ring broke.
            }
            self.queued.pop_front();
            self.read_sync(id);
        }
    }

    /// Reads request `id` the ordinary way, on this thread.
    fn read_sync(&mut self, id: usize) {
        let Some(r) = self.reads[id].as_ref() else {
            return;
        };
        let data = r.holder.file().read_now(r.offset, r.len);
        self.finish(id, data);
    }

    /// Request `id` finished with `data`: counted if it succeeded, then delivered now or
    /// held until its device time.
    fn finish(&mut self, id: usize, data: Result<Vec<u8>>) {
        let Some(r) = self.reads[id].take() else {
            return;
        };
        self.free.push(id);
        if data.is_ok() {
            let file = r.holder.file();
            file.tier
                .stats
                .record_read(file.tier.tier, r.cause, r.len as u64);
            count_thread_read(file.tier.tier);
        }
        match r.done_at {
            Some(at) if at > std::time::Instant::now() => self.delayed.push((at, r.tag, data)),
            _ => self.ready.push((r.tag, data)),
        }
    }

    /// One turn: submits every request pushed since the last turn and what waited for
    /// room (one `io_uring_enter`), then delivers into `out` (tag, bytes or error) every
    /// request finished by now. `wait`: when nothing is finished, wait until something is
    /// (a completion, or the device time of a finished request), if anything is in
    /// flight.
    pub(crate) fn turn(&mut self, wait: bool, out: &mut Vec<(usize, Result<Vec<u8>>)>) {
        self.push_queued();
        #[cfg(target_os = "linux")]
        {
            let outstanding = self.ring.as_ref().map_or(0, |r| r.outstanding());
            let must_wait = wait && self.ready.is_empty() && self.due_now() == 0;
            let in_flight = self.in_flight();
            // Wait in the kernel only when no finished request is merely held for its
            // device time (then sleep until that time instead, below).
            let kernel_wait = must_wait && self.delayed.is_empty();
            if let Some(ring) = self.ring.as_mut() {
                if self.pushed > 0 || kernel_wait || outstanding > 0 {
                    record_submission(self.pushed, in_flight - self.pushed, in_flight);
                    self.pushed = 0;
                    let mut done = std::mem::take(&mut self.completions);
                    ring.submit_and_reap(kernel_wait, &mut done);
                    for (ring_id, res) in done.drain(..) {
                        let Some(&id) = self.by_ring_id.get(ring_id) else {
                            continue;
                        };
                        self.complete(id, res);
                    }
                    self.completions = done;
                }
            }
            // Completions made room: push what waited (submitted by the next turn).
            self.push_queued();
        }
        if wait && self.ready.is_empty() && self.due_now() == 0 {
            if let Some(at) = self.delayed.iter().map(|d| d.0).min() {
                super::device::sleep_until(at);
            }
        }
        let now = std::time::Instant::now();
        let mut i = 0;
        while i < self.delayed.len() {
            if self.delayed[i].0 <= now {
                let (_, tag, data) = self.delayed.swap_remove(i);
                self.ready.push((tag, data));
            } else {
                i += 1;
            }
        }
        out.append(&mut self.ready);
    }

    /// Held requests whose device time has come.
    fn due_now(&self) -> usize {
        let now = std::time::Instant::now();
        self.delayed.iter().filter(|d| d.0 <= now).count()
    }

    /// A ring completion of request `id`: its bytes, or (a failure, a short read, or a
    /// device that wants 4 KiB alignment) the ordinary read's answer.
    #[cfg(target_os = "linux")]
    fn complete(&mut self, id: usize, res: super::uring::ReadResult) {
        let Some(r) = self.reads[id].as_ref() else {
            return;
        };
        match res {
            Ok((buf, n)) if n >= r.plan.from + r.len => {
                let at = r.plan.skew(&buf) + r.plan.from;
                let data = buf[at..at + r.len].to_vec();
                if self.spare.len() < SPARE_BUFFERS {
                    self.spare.push(buf);
                }
                self.finish(id, Ok(data));
            }
            _ => self.read_sync(id),
        }
    }
}

#[cfg(target_os = "linux")]
impl<H: HoldsFile> Drop for ReadSession<H> {
    /// Leaves the finished reads' buffers to the thread's next session, up to
    /// [`SESSION_SPARE_KEEP`] bytes (buffers still in the ring stay the ring's).
    fn drop(&mut self) {
        let mut spare = std::mem::take(&mut self.spare);
        let mut kept = 0;
        spare.retain(|b| {
            kept += b.len();
            kept <= SESSION_SPARE_KEEP
        });
        // During the thread's teardown the pool may be gone already: the buffers are
        // then simply freed (`try_with`, where `with` would panic).
        let _ = SESSION_SPARES.try_with(|pool| {
            if let Ok(mut pool) = pool.try_borrow_mut() {
                if pool.is_empty() {
                    *pool = spare;
                }
            }
        });
    }
}

/// What this thread's pipelined reads ([`ReadSession`]) submitted through io_uring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ThreadSubmissions {
    /// Turns that submitted new reads.
    pub submissions: u64,
    /// Of those, the ones made while earlier requests were still in flight (reading, or
    /// held for their device time): none under a round barrier, which delivers every read
    /// of a round before submitting the next.
    pub while_outstanding: u64,
    /// Reads submitted.
    pub reads: u64,
    /// The most requests in flight at a submission.
    pub most_in_flight: usize,
}

thread_local! {
    static THREAD_SUBMISSIONS: std::cell::Cell<ThreadSubmissions> =
        const { std::cell::Cell::new(ThreadSubmissions {
            submissions: 0, while_outstanding: 0, reads: 0, most_in_flight: 0 }) };
}

#[cfg(target_os = "linux")]
fn record_submission(new: usize, earlier: usize, in_flight: usize) {
    if new == 0 {
        return;
    }
    THREAD_SUBMISSIONS.with(|c| {
        let mut s = c.get();
        s.submissions += 1;
        s.while_outstanding += u64::from(earlier > 0);
        s.reads += new as u64;
        s.most_in_flight = s.most_in_flight.max(in_flight);
        c.set(s);
    });
}

/// What the calling thread's pipelined reads submitted so far (tests: reads went to the
/// kernel while others were in flight, and how many at most).
#[allow(dead_code)]
pub(crate) fn thread_submissions() -> ThreadSubmissions {
    THREAD_SUBMISSIONS.with(|c| c.get())
}

/// Appends are buffered up to this many bytes before one `write` syscall.
const WRITE_BUFFER: usize = 256 * 1024;

/// A file opened for appending.
pub struct WritableFile {
    tier: Arc<TierHandle>,
    path: PathBuf,
    file: File,
    cause: IoCause,
    buf: Vec<u8>,
    written: u64,
}

impl WritableFile {
    pub(crate) fn create(tier: Arc<TierHandle>, path: PathBuf, cause: IoCause) -> Result<Self> {
        tier.fault(FaultOp::Create, &path)?;
        let file = tier
            .name_op(super::fault::NameOp::Create(&path), || {
                OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(&path)
            })
            .map_err(|e| Error::io(&path, e))?;
        Ok(WritableFile {
            tier,
            path,
            file,
            cause,
            buf: Vec::with_capacity(WRITE_BUFFER),
            written: 0,
        })
    }

    /// Opens an existing file to append after its first `keep` bytes, cutting off
    /// whatever lies beyond them (a semi-sorted table's next generation: bytes past the
    /// recorded size are a crashed earlier append's). `len()` counts from the file's start.
    pub(crate) fn reopen_at(
        tier: Arc<TierHandle>,
        path: PathBuf,
        keep: u64,
        cause: IoCause,
    ) -> Result<Self> {
        tier.fault(FaultOp::Create, &path)?;
        let file = OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        let len = file.metadata().map_err(|e| Error::io(&path, e))?.len();
        if len < keep {
            return Err(Error::corruption(
                &path,
                len,
                format!("file is shorter than the {keep} bytes to keep"),
            ));
        }
        file.set_len(keep).map_err(|e| Error::io(&path, e))?;
        if let Some(f) = &tier.faults {
            // The kept bytes were durable: the manifest named them.
            f.note_synced(&path, keep);
        }
        Ok(WritableFile {
            tier,
            path,
            file,
            cause,
            buf: Vec::with_capacity(WRITE_BUFFER),
            written: keep,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes appended so far (including buffered ones).
    pub fn len(&self) -> u64 {
        self.written + self.buf.len() as u64
    }

    /// True when nothing was appended.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends bytes (buffered).
    pub fn append(&mut self, data: &[u8]) -> Result<()> {
        if self.buf.len() + data.len() > WRITE_BUFFER {
            self.flush()?;
        }
        if data.len() >= WRITE_BUFFER {
            self.write_out(data)
        } else {
            self.buf.extend_from_slice(data);
            Ok(())
        }
    }

    /// Hands buffered bytes to the OS (survives a process crash, not a power cut).
    pub fn flush(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let buf = std::mem::take(&mut self.buf);
        let r = self.write_out(&buf);
        self.buf = buf;
        self.buf.clear();
        r
    }

    fn write_out(&mut self, data: &[u8]) -> Result<()> {
        use std::io::Write;
        self.tier.fault(FaultOp::Write, &self.path)?;
        if let Some(f) = &self.tier.faults {
            // An emulated full disk: write what fits, then fail as write(2) would.
            if let (fit, Some(e)) = f.take_space(self.tier.tier, data.len() as u64) {
                (&self.file)
                    .write_all(&data[..fit as usize])
                    .map_err(|e| Error::io(&self.path, e))?;
                return Err(Error::io(&self.path, e));
            }
        }
        let (file, path) = (&self.file, &self.path);
        self.tier.timed_write(self.cause, data.len() as u64, || {
            (&*file).write_all(data).map_err(|e| Error::io(path, e))
        })?;
        self.written += data.len() as u64;
        Ok(())
    }

    /// Flushes and fsyncs the data (survives a power cut).
    pub fn sync(&mut self) -> Result<()> {
        self.flush()?;
        self.tier.fault(FaultOp::Sync, &self.path)?;
        self.file
            .sync_data()
            .map_err(|e| Error::io(&self.path, e))?;
        if let Some(f) = &self.tier.faults {
            f.note_synced(&self.path, self.written);
        }
        Ok(())
    }
}

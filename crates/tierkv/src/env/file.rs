//! File handles: positional reads (direct I/O with aligned buffers where the filesystem
//! allows it), batches of them submitted together (`read_batch`, through `uring.rs` on
//! Linux), and buffered appends. Every syscall is charged to the tier's device model and
//! counters.

use super::{FaultOp, IoCause, TierHandle};
use crate::{Error, Result};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// Alignment a direct read starts with: the 512-byte logical sector most disks report
/// (`/sys/block/*/queue/logical_block_size`). Aligning a small block's read to 4 KiB instead
/// would move up to 8 KiB for a 4 KiB block that straddles two pages.
const MIN_DIRECT_ALIGN: usize = 512;
/// Alignment a file falls back to when the device refuses 512-byte direct reads (a
/// 4K-sector device answers EINVAL); every common device accepts it. Buffers are always
/// aligned to it.
const MAX_DIRECT_ALIGN: usize = 4096;

static WARNED_NO_DIRECT: AtomicBool = AtomicBool::new(false);

thread_local! {
    static THREAD_READS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Disk reads issued by the calling thread so far. A caller compares two values to learn
/// whether an operation touched a disk at all (a get served from the block cache did not).
pub fn thread_read_count() -> u64 {
    THREAD_READS.with(|c| c.get())
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
        self.check_range(offset, len)?;
        self.tier.fault(FaultOp::Read, &self.path)?;
        let data = self.read_now(offset, len)?;
        self.tier.charge_read(cause, len as u64);
        THREAD_READS.with(|c| c.set(c.get() + 1));
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

    /// Reads every request of `reads` as one batch, one answer per request in order, each
    /// as [`RandomAccessFile::read_at`] would give it: a request past its file's end, an
    /// injected fault or a failed read fails only that request. With io_uring (Linux,
    /// when this thread has a ring) every read is submitted at once and reaped on this
    /// thread; otherwise they run one after another. A read io_uring fails or shortens
    /// (EINVAL from a device refusing 512-byte alignment, an interrupted read) is read
    /// again the ordinary way, so its answer is exactly `read_at`'s.
    ///
    /// Accounting is `read_at`'s per request (bytes and reads by tier and cause, the
    /// thread's read count); a tier's device model charges the batch's requests together
    /// (see [`super::DeviceModel::reserve`]): they were in the device's queue at once.
    pub(crate) fn read_batch(reads: &[BatchRead<'_>]) -> Vec<Result<Vec<u8>>> {
        let mut out: Vec<Option<Result<Vec<u8>>>> = (0..reads.len()).map(|_| None).collect();
        let mut planned: Vec<(usize, ReadPlan)> = Vec::with_capacity(reads.len());
        for (i, r) in reads.iter().enumerate() {
            let plan = r
                .file
                .check_range(r.offset, r.len)
                .and_then(|()| r.file.tier.fault(FaultOp::Read, &r.file.path))
                .and_then(|()| r.file.plan(r.offset, r.len));
            match plan {
                Ok(p) => planned.push((i, p)),
                Err(e) => out[i] = Some(Err(e)),
            }
        }
        for (i, data) in Self::run_plans(reads, &planned) {
            out[i] = Some(data);
        }
        let mut charged: Vec<(&Arc<TierHandle>, IoCause, u64)> = Vec::new();
        for (r, o) in reads.iter().zip(&out) {
            if let Some(Ok(_)) = o {
                charged.push((&r.file.tier, r.cause, r.len as u64));
            }
        }
        TierHandle::charge_reads(&charged);
        THREAD_READS.with(|c| c.set(c.get() + charged.len() as u64));
        out.into_iter()
            .map(|o| o.unwrap_or(Err(Error::Closed)))
            .collect()
    }

    /// The planned reads' data, through io_uring when this thread has a ring.
    fn run_plans(
        reads: &[BatchRead<'_>],
        planned: &[(usize, ReadPlan)],
    ) -> Vec<(usize, Result<Vec<u8>>)> {
        let sync = |i: usize| {
            let r = &reads[i];
            (i, r.file.read_now(r.offset, r.len))
        };
        #[cfg(target_os = "linux")]
        {
            let ring_reads = planned
                .iter()
                .map(|(_, p)| {
                    let buf = p.buffer();
                    super::uring::UringRead {
                        fd: p.fd,
                        offset: p.start,
                        at: p.skew(&buf),
                        buf,
                        len: p.span,
                    }
                })
                .collect();
            if let Ok(results) = super::uring::read_all(ring_reads) {
                record_batch(planned.len());
                return planned
                    .iter()
                    .zip(results)
                    .map(|((i, p), res)| match res {
                        Ok((buf, n)) if n >= p.from + reads[*i].len => {
                            let at = p.skew(&buf) + p.from;
                            (*i, Ok(buf[at..at + reads[*i].len].to_vec()))
                        }
                        // A failure, a short read, or a device that wants 4 KiB alignment.
                        _ => sync(*i),
                    })
                    .collect();
            }
        }
        planned.iter().map(|(i, _)| sync(*i)).collect()
    }

    /// Where and how a batched read of `len` bytes at `offset` reads: the aligned span of
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
        let mut raw = s.buffer();
        let skew = DirectSpan::skew(&raw);
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

/// The one place for O_DIRECT alignment: a read of `len` bytes at `offset` widened to
/// `align` boundaries, read into a window of an over-allocated buffer that starts at a
/// [`MAX_DIRECT_ALIGN`] boundary (safe Rust: the aligned sub-slice is picked instead of
/// using a custom allocator). Used by the one-at-a-time reads and the batched ones.
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

    /// A buffer with room for an aligned window of the span.
    fn buffer(&self) -> Vec<u8> {
        vec![0u8; self.span + MAX_DIRECT_ALIGN]
    }

    /// Where the aligned window starts in `buf`.
    fn skew(buf: &[u8]) -> usize {
        buf.as_ptr().align_offset(MAX_DIRECT_ALIGN)
    }
}

/// One request of [`RandomAccessFile::read_batch`].
pub(crate) struct BatchRead<'a> {
    /// The file to read.
    pub file: &'a RandomAccessFile,
    /// Where, and how many bytes.
    pub offset: u64,
    pub len: usize,
    /// What the bytes are charged to.
    pub cause: IoCause,
}

/// How one request of a batch reads: `span` bytes at `start` of `fd` into a buffer from
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
    /// A fresh buffer for the read.
    fn buffer(&self) -> Vec<u8> {
        if self.direct {
            vec![0u8; self.span as usize + MAX_DIRECT_ALIGN]
        } else {
            vec![0u8; self.span as usize]
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

/// Batches this thread submitted through io_uring, and the most reads one held.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ThreadBatches {
    pub batches: u64,
    pub largest: usize,
}

thread_local! {
    static THREAD_BATCHES: std::cell::Cell<ThreadBatches> =
        const { std::cell::Cell::new(ThreadBatches { batches: 0, largest: 0 }) };
}

#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn record_batch(reads: usize) {
    THREAD_BATCHES.with(|c| {
        let mut b = c.get();
        b.batches += 1;
        b.largest = b.largest.max(reads);
        c.set(b);
    });
}

/// What the calling thread submitted through io_uring so far (tests: a batch's reads
/// went to the kernel together).
#[allow(dead_code)]
pub(crate) fn thread_batches() -> ThreadBatches {
    THREAD_BATCHES.with(|c| c.get())
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
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        if let Some(f) = &tier.faults {
            f.note_created(&path);
        }
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
        (&self.file)
            .write_all(data)
            .map_err(|e| Error::io(&self.path, e))?;
        self.written += data.len() as u64;
        self.tier.charge_write(self.cause, data.len() as u64);
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

//! File handles: positional reads (direct I/O with aligned buffers where the filesystem
//! allows it) and buffered appends. Every syscall is charged to the tier's device model
//! and counters.

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
        self.tier.fault(FaultOp::Read, &self.path)?;
        let data = match &self.direct {
            Some(f) => match self.read_direct_adaptive(f, offset, len) {
                Ok(d) => d,
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    warn_no_direct(&self.path, &e);
                    self.read_buffered(offset, len)?
                }
                Err(e) => return Err(Error::io(&self.path, e)),
            },
            None => self.read_buffered(offset, len)?,
        };
        self.tier.charge_read(cause, len as u64);
        THREAD_READS.with(|c| c.set(c.get() + 1));
        Ok(data)
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
    /// an over-allocated buffer (safe Rust: we pick the aligned sub-slice instead of using a
    /// custom allocator), then copy out the requested bytes.
    fn read_direct(
        &self,
        f: &File,
        offset: u64,
        len: usize,
        align: usize,
    ) -> std::io::Result<Vec<u8>> {
        let a = align as u64;
        let start = offset / a * a;
        let end = (offset + len as u64).div_ceil(a) * a;
        let span = (end - start) as usize;
        let mut raw = vec![0u8; span + MAX_DIRECT_ALIGN];
        let skew = raw.as_ptr().align_offset(MAX_DIRECT_ALIGN);
        let window = &mut raw[skew..skew + span];
        let mut filled = 0;
        let want = (offset - start) as usize + len;
        while filled < want {
            let n = f.read_at(&mut window[filled..], start + filled as u64)?;
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
        let from = (offset - start) as usize;
        Ok(window[from..from + len].to_vec())
    }
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

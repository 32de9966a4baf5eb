//! The storage environment: the two tier directories, every file the engine opens, direct
//! I/O, batched reads (io_uring on Linux, `uring.rs`), the optional device model of each
//! tier, and I/O accounting by tier and cause.
//!
//! Every byte the engine reads or writes on a tier passes through this module, so it is the
//! one place where slow-disk emulation, accounting and (later) fault injection apply. It owns
//! no file format: callers hand it bytes.

mod device;
mod fault;
mod file;
pub mod kill;
mod stats;
// The engine's only unsafe code (see the module's doc and docs/ARCHITECTURE.md).
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
mod uring;

pub use device::{DeviceModel, DeviceProfile};
pub use fault::{FaultError, FaultInjector, FaultOp, FaultRule, PlantedBug, SyncHook, Trigger};
#[cfg(test)]
pub(crate) use file::thread_submissions;
pub(crate) use file::{
    direct_read_span, read_round, read_together, HoldsFile, RandomAccessFile, ReadSession,
    WritableFile,
};
pub use file::{thread_read_count, thread_slow_read_count, MemoryOnly, RoundRead};
pub use stats::{CauseIo, IoCause, IoStats, IoStatsSnapshot, TierIo};

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// True when the calling thread can read through io_uring (its ring is set up on the
/// first call; a kernel or seccomp policy without io_uring answers false). Always false
/// off Linux.
pub(crate) fn uring_available() -> bool {
    #[cfg(target_os = "linux")]
    {
        uring::available()
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// Descriptors [`open_file_budget`] leaves for everything but table files: the WAL, the
/// manifest, RALT's files, compaction outputs, the application's own.
pub const OPEN_FILE_RESERVE: u64 = 256;

/// Table files a store keeps open when `Options::max_open_files` is 0 (automatic): the
/// process's open-file limit, first raised to its hard limit (best effort), less
/// [`OPEN_FILE_RESERVE`]; at least 10. A count of 1000 (LevelDB's default) reopened the
/// slow tier's tables for most reads once a store had more tables than that (2 GiB of
/// 1.5 MiB tables: 0.84 extra slow-disk reads per slow get, reading footers, indexes and
/// filters again); RocksDB keeps every table open by default.
pub fn open_file_budget() -> usize {
    let soft = rlimit::increase_nofile_limit(u64::MAX)
        .or_else(|_| rlimit::getrlimit(rlimit::Resource::NOFILE).map(|(soft, _)| soft))
        .unwrap_or(1024);
    usize::try_from(soft.saturating_sub(OPEN_FILE_RESERVE).max(10)).unwrap_or(usize::MAX)
}

/// A storage tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Tier {
    /// The fast disk (FD): WAL, manifest, upper levels, RALT.
    Fast = 0,
    /// The slow disk (SD): the larger lower levels.
    Slow = 1,
}

impl Tier {
    /// Both tiers, fast first.
    pub const ALL: [Tier; 2] = [Tier::Fast, Tier::Slow];

    /// Index of the tier in per-tier arrays.
    pub fn index(self) -> usize {
        self as usize
    }

    /// Short lowercase name ("fast" / "slow").
    pub fn name(self) -> &'static str {
        match self {
            Tier::Fast => "fast",
            Tier::Slow => "slow",
        }
    }
}

/// Gives the file `from` a second name `to` (a hard link), or copies it (synced) where the
/// file system cannot link (another device, no links). True when linked. Fails if `to`
/// exists. For checkpoints, which copy files outside the store's directories.
pub fn link_or_copy(from: &Path, to: &Path) -> Result<bool> {
    match std::fs::hard_link(from, to) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(Error::io(to, e)),
        Err(_) => {
            std::fs::copy(from, to).map_err(|e| Error::io(to, e))?;
            std::fs::File::open(to)
                .and_then(|f| f.sync_all())
                .map_err(|e| Error::io(to, e))?;
            Ok(false)
        }
    }
}

/// Per-tier state shared by every file opened on that tier.
pub(crate) struct TierHandle {
    pub(crate) tier: Tier,
    pub(crate) dir: PathBuf,
    /// Always present: a tier's profile may change while the store is open, and a `none`
    /// profile costs its I/O one relaxed load.
    pub(crate) device: DeviceModel,
    pub(crate) stats: Arc<IoStats>,
    pub(crate) faults: Option<Arc<FaultInjector>>,
}

impl TierHandle {
    /// The tier's device profile now (`none` when the tier is not emulated).
    pub(crate) fn device_profile(&self) -> DeviceProfile {
        self.device.profile()
    }

    /// Fails with an injected I/O error if a fault rule says so.
    pub(crate) fn fault(&self, op: FaultOp, path: &Path) -> Result<()> {
        match self
            .faults
            .as_ref()
            .and_then(|f| f.check(self.tier, op, path))
        {
            Some(e) => Err(Error::io(path, e)),
            None => Ok(()),
        }
    }

    /// Runs `f`, a change of directory entries, through the fault injector's bookkeeping
    /// of durable names (power cuts undo what no directory sync made durable).
    pub(crate) fn name_op<T>(
        &self,
        op: fault::NameOp<'_>,
        f: impl FnOnce() -> std::io::Result<T>,
    ) -> std::io::Result<T> {
        match &self.faults {
            Some(faults) => faults.name_op(op, f),
            None => f(),
        }
    }

    /// Runs `read`, one read of `bytes` for `cause`, in the device model's time
    /// ([`DeviceModel::timed`]) and counts it once it succeeded.
    pub(crate) fn timed_read<T>(
        &self,
        cause: IoCause,
        bytes: u64,
        read: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        let out = self.device.timed(bytes, read)?;
        self.stats.record_read(self.tier, cause, bytes);
        Ok(out)
    }

    /// [`TierHandle::timed_read`] for a write.
    pub(crate) fn timed_write<T>(
        &self,
        cause: IoCause,
        bytes: u64,
        write: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        let out = self.device.timed(bytes, write)?;
        self.stats.record_write(self.tier, cause, bytes);
        Ok(out)
    }
}

/// The environment of one open store. Cheap to share behind an `Arc`.
pub struct Env {
    tiers: [Arc<TierHandle>; 2],
    stats: Arc<IoStats>,
    direct_io: bool,
}

impl Env {
    /// Creates the environment, creating both directories if needed. `slow_dir` may equal
    /// `fast_dir` (a single-directory store). `faults` injects I/O errors (tests).
    pub fn new(
        fast_dir: &Path,
        slow_dir: &Path,
        fast_device: DeviceProfile,
        slow_device: DeviceProfile,
        direct_io: bool,
        faults: Option<Arc<FaultInjector>>,
    ) -> Result<Arc<Env>> {
        let stats = Arc::new(IoStats::default());
        for dir in [fast_dir, slow_dir] {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
            if let Some(f) = &faults {
                f.watch_dir(dir);
            }
        }
        let handle = |tier, dir: &Path, profile: DeviceProfile| {
            Arc::new(TierHandle {
                tier,
                dir: dir.to_path_buf(),
                device: DeviceModel::new(profile),
                stats: stats.clone(),
                faults: faults.clone(),
            })
        };
        Ok(Arc::new(Env {
            tiers: [
                handle(Tier::Fast, fast_dir, fast_device),
                handle(Tier::Slow, slow_dir, slow_device),
            ],
            stats: stats.clone(),
            direct_io,
        }))
    }

    /// A single-directory environment without device models (tests, tools).
    pub fn single(dir: &Path, direct_io: bool) -> Result<Arc<Env>> {
        Env::new(
            dir,
            dir,
            DeviceProfile::none(),
            DeviceProfile::none(),
            direct_io,
            None,
        )
    }

    fn tier(&self, tier: Tier) -> &Arc<TierHandle> {
        &self.tiers[tier.index()]
    }

    /// The device profile of a tier now (`none` when the tier is not emulated).
    pub fn device_profile(&self, tier: Tier) -> DeviceProfile {
        self.tier(tier).device_profile()
    }

    /// Makes `tier` behave like a device of `profile` from now on: every file of the tier,
    /// open or not, and every reader of [`Env::device_profile`] sees it at once (see
    /// [`DeviceModel::set_profile`] for I/Os already scheduled).
    pub fn set_device_profile(&self, tier: Tier, profile: DeviceProfile) {
        self.tier(tier).device.set_profile(profile);
    }

    /// The directory of a tier.
    pub fn dir(&self, tier: Tier) -> &Path {
        &self.tier(tier).dir
    }

    /// True when both tiers share one directory.
    pub fn is_single_dir(&self) -> bool {
        self.tiers[0].dir == self.tiers[1].dir
    }

    /// Full path of `name` on `tier`.
    pub fn path(&self, tier: Tier, name: &str) -> PathBuf {
        self.dir(tier).join(name)
    }

    /// True when a test planted `bug` through the fault injector (never otherwise).
    pub(crate) fn planted(&self, bug: PlantedBug) -> bool {
        self.tiers[0]
            .faults
            .as_ref()
            .is_some_and(|f| f.planted() == Some(bug))
    }

    /// I/O counters of this environment.
    pub fn stats(&self) -> &Arc<IoStats> {
        &self.stats
    }

    /// Whether table reads ask for direct I/O.
    pub fn direct_io(&self) -> bool {
        self.direct_io
    }

    /// Opens a file for positional reads (direct I/O when enabled and supported).
    pub fn open_random(&self, tier: Tier, name: &str) -> Result<RandomAccessFile> {
        RandomAccessFile::open(
            self.tier(tier).clone(),
            self.path(tier, name),
            self.direct_io,
        )
    }

    /// Creates (truncating) a file for appending; writes are charged to `cause`.
    pub fn create_writable(&self, tier: Tier, name: &str, cause: IoCause) -> Result<WritableFile> {
        WritableFile::create(self.tier(tier).clone(), self.path(tier, name), cause)
    }

    /// Opens the existing `name` to append after its first `keep` bytes, cutting off the
    /// rest; writes are charged to `cause`.
    pub fn reopen_writable(
        &self,
        tier: Tier,
        name: &str,
        keep: u64,
        cause: IoCause,
    ) -> Result<WritableFile> {
        WritableFile::reopen_at(self.tier(tier).clone(), self.path(tier, name), keep, cause)
    }

    /// Gives the file `from` on `tier` a second name `to` (a hard link: both names reach
    /// the same bytes) and syncs the directory. Fails if `to` exists.
    pub fn link(&self, tier: Tier, from: &str, to: &str) -> Result<()> {
        let (src, dst) = (self.path(tier, from), self.path(tier, to));
        self.tier(tier).fault(FaultOp::Create, &dst)?;
        self.tier(tier)
            .name_op(fault::NameOp::Link(&src, &dst), || {
                std::fs::hard_link(&src, &dst)
            })
            .map_err(|e| Error::io(&dst, e))?;
        self.sync_dir(tier)
    }

    /// Reads a whole file (WAL replay, manifest, CURRENT), charged to `cause`.
    pub fn read_all(&self, tier: Tier, name: &str, cause: IoCause) -> Result<Vec<u8>> {
        let path = self.path(tier, name);
        self.tier(tier).fault(FaultOp::Read, &path)?;
        let data = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        let handle = self.tier(tier);
        handle.device.charge(data.len() as u64);
        handle.stats.record_read(tier, cause, data.len() as u64);
        Ok(data)
    }

    /// True if `name` exists on `tier`.
    pub fn exists(&self, tier: Tier, name: &str) -> bool {
        self.path(tier, name).exists()
    }

    /// Size in bytes of `name` on `tier`.
    pub fn file_size(&self, tier: Tier, name: &str) -> Result<u64> {
        let path = self.path(tier, name);
        std::fs::metadata(&path)
            .map(|m| m.len())
            .map_err(|e| Error::io(&path, e))
    }

    /// Deletes `name` on `tier`. A missing file is not an error.
    pub fn remove(&self, tier: Tier, name: &str) -> Result<()> {
        let path = self.path(tier, name);
        // An emulated full disk gets the file's space back.
        let faults = self.tier(tier).faults.as_ref();
        let len = faults.and_then(|_| std::fs::metadata(&path).ok().map(|m| m.len()));
        match self
            .tier(tier)
            .name_op(fault::NameOp::Remove(&path), || std::fs::remove_file(&path))
        {
            Ok(()) => {
                if let (Some(f), Some(len)) = (faults, len) {
                    f.give_space(tier, len);
                }
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io(&path, e)),
        }
    }

    /// Atomically renames `from` to `to` on `tier` and syncs the directory.
    pub fn rename(&self, tier: Tier, from: &str, to: &str) -> Result<()> {
        let (src, dst) = (self.path(tier, from), self.path(tier, to));
        self.tier(tier).fault(FaultOp::Create, &dst)?;
        self.tier(tier)
            .name_op(fault::NameOp::Rename(&src, &dst), || {
                std::fs::rename(&src, &dst)
            })
            .map_err(|e| Error::io(&src, e))?;
        self.sync_dir(tier)
    }

    /// Fsyncs the tier's directory so created, renamed and deleted names are durable.
    pub fn sync_dir(&self, tier: Tier) -> Result<()> {
        let dir = self.dir(tier);
        self.tier(tier).fault(FaultOp::Sync, dir)?;
        self.tier(tier)
            .name_op(fault::NameOp::SyncDir(dir), || {
                std::fs::File::open(dir).and_then(|f| f.sync_all())
            })
            .map_err(|e| Error::io(dir, e))
    }

    /// Fsyncs an existing file: one an earlier process wrote, whose bytes may still be in
    /// the page cache only (WAL recovery keeps such logs live).
    pub fn sync_file(&self, tier: Tier, name: &str) -> Result<()> {
        let path = self.path(tier, name);
        self.tier(tier).fault(FaultOp::Sync, &path)?;
        let len = std::fs::File::open(&path)
            .and_then(|f| {
                f.sync_all()?;
                f.metadata()
            })
            .map_err(|e| Error::io(&path, e))?
            .len();
        if let Some(f) = &self.tier(tier).faults {
            f.note_synced(&path, len);
        }
        Ok(())
    }

    /// Names of the regular files on `tier`.
    pub fn list(&self, tier: Tier) -> Result<Vec<String>> {
        let dir = self.dir(tier);
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
            let entry = entry.map_err(|e| Error::io(dir, e))?;
            if entry.file_type().map(|t| t.is_file()).unwrap_or(false) {
                if let Some(name) = entry.file_name().to_str() {
                    names.push(name.to_string());
                }
            }
        }
        Ok(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_then_read_back_is_accounted() {
        let dir = tempfile::tempdir().unwrap();
        let env = Env::single(dir.path(), true).unwrap();
        let mut w = env
            .create_writable(Tier::Fast, "f", IoCause::Flush)
            .unwrap();
        let data: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        w.append(&data).unwrap();
        w.sync().unwrap();
        drop(w);
        let r = env.open_random(Tier::Fast, "f").unwrap();
        // An unaligned range must come back exactly, with or without direct I/O.
        let got = r.read_at(4097, 5000, IoCause::UserGet).unwrap();
        assert_eq!(&got[..], &data[4097..9097]);
        let snap = env.stats().snapshot();
        assert_eq!(
            snap.tier(Tier::Fast).cause(IoCause::Flush).write_bytes,
            20_000
        );
        assert_eq!(
            snap.tier(Tier::Fast).cause(IoCause::UserGet).read_bytes,
            5000
        );
        assert_eq!(snap.tier(Tier::Fast).cause(IoCause::UserGet).read_ops, 1);
    }

    /// Direct reads align to 512-byte sectors where the device allows it (falling back to
    /// 4 KiB), and every range comes back exactly: across sector and page boundaries and
    /// up to the end of a file whose size is not a multiple of either.
    #[test]
    fn direct_reads_at_sector_alignment_return_exact_ranges() {
        let dir = tempfile::tempdir().unwrap();
        let env = Env::single(dir.path(), true).unwrap();
        let mut w = env
            .create_writable(Tier::Fast, "f", IoCause::Flush)
            .unwrap();
        let data: Vec<u8> = (0..13_001u32).map(|i| (i * 7 % 253) as u8).collect();
        w.append(&data).unwrap();
        w.sync().unwrap();
        drop(w);
        let r = env.open_random(Tier::Fast, "f").unwrap();
        for (offset, len) in [
            (0, 1),
            (511, 2),
            (512, 512),
            (1000, 3000),
            (4095, 4098),
            (8192, 4809),
            (12_999, 2),
            (0, 13_001),
        ] {
            let got = r.read_at(offset as u64, len, IoCause::UserGet).unwrap();
            assert_eq!(&got[..], &data[offset..offset + len], "{offset}+{len}");
        }
        if r.is_direct() {
            let a = r.direct_alignment().unwrap();
            assert!(a == 512 || a == 4096, "alignment {a}");
        } else {
            assert_eq!(r.direct_alignment(), None);
        }
    }

    /// Pipelined reads deliver each request's own bytes when their buffers are reused:
    /// a session starts with the buffers the thread's last session left (so a scan's
    /// windows stop zeroing fresh ones), whatever file and size they held before, and
    /// every delivered range equals the file's bytes there.
    #[test]
    fn pipelined_reads_through_reused_buffers_return_exact_ranges() {
        struct Holder<'a>(&'a RandomAccessFile);
        impl HoldsFile for Holder<'_> {
            fn file(&self) -> &RandomAccessFile {
                self.0
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let env = Env::single(dir.path(), true).unwrap();
        let write = |name: &str, salt: u32| {
            let mut w = env
                .create_writable(Tier::Fast, name, IoCause::Flush)
                .unwrap();
            let data: Vec<u8> = (0..200_000u32)
                .map(|i| ((i * 7 + salt) % 251) as u8)
                .collect();
            w.append(&data).unwrap();
            w.sync().unwrap();
            data
        };
        let (a, b) = (write("a", 0), write("b", 13));
        let (fa, fb) = (
            env.open_random(Tier::Fast, "a").unwrap(),
            env.open_random(Tier::Fast, "b").unwrap(),
        );
        // Large reads first, then smaller ones at odd offsets (a reused buffer holds the
        // earlier, longer read's bytes past the new window), then larger ones again.
        let ranges = [
            (0usize, 65_536usize),
            (70_001, 40_000),
            (1, 3),
            (4095, 4098),
            (150_000, 2_000),
            (511, 100_000),
            (199_000, 1_000),
        ];
        // Buffers are reused only through the ring: without it that check is left out
        // (and reported), the exact ranges are still checked.
        let uring = crate::testing::require_io_uring(
            "env::tests::pipelined_reads_through_reused_buffers_return_exact_ranges \
             (its buffer reuse check)",
        );
        for (round, (file, data)) in [(&fa, &a), (&fb, &b), (&fa, &a)].into_iter().enumerate() {
            let mut session: ReadSession<Holder<'_>> = ReadSession::new();
            if round > 0 && uring {
                assert!(
                    session.spare_buffers() > 0,
                    "round {round}: no buffers left from the last session"
                );
            }
            for (tag, &(offset, len)) in ranges.iter().enumerate() {
                session.start(Holder(file), offset as u64, len, IoCause::UserScan, tag);
            }
            let mut got = vec![None; ranges.len()];
            let mut out = Vec::new();
            while session.in_flight() > 0 {
                session.turn(true, &mut out);
                for (tag, r) in out.drain(..) {
                    got[tag] = Some(r.unwrap());
                }
            }
            for (tag, &(offset, len)) in ranges.iter().enumerate() {
                let bytes = got[tag].as_deref().expect("delivered");
                assert!(
                    bytes == &data[offset..offset + len],
                    "round {round}: {offset}+{len}"
                );
            }
        }
    }

    #[test]
    fn reading_past_eof_is_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let env = Env::single(dir.path(), true).unwrap();
        let mut w = env
            .create_writable(Tier::Fast, "f", IoCause::Flush)
            .unwrap();
        w.append(b"short").unwrap();
        w.sync().unwrap();
        let r = env.open_random(Tier::Fast, "f").unwrap();
        let err = r.read_at(2, 100, IoCause::UserGet).unwrap_err();
        assert!(err.is_corruption(), "{err}");
    }
}

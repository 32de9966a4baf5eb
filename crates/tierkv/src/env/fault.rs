//! Fault injection: makes chosen I/O operations fail the way real disks do (EIO, ENOSPC),
//! and emulates a power cut by dropping every byte that was written but not synced.
//!
//! A [`FaultInjector`] is handed to the store through `Options::fault_injector`; every file
//! operation of the environment asks it first. Rules match a tier, an operation kind and
//! optionally a file-name fragment, and fire after a number of matching operations or at
//! random with a seeded probability. Owns the rules and the synced-length bookkeeping; it
//! never touches data itself except to truncate files in [`FaultInjector::drop_unsynced_data`].
//!
//! A power cut ([`FaultInjector::drop_unsynced_data`]) also undoes the directory changes
//! that no directory sync made durable, as LevelDB's and RocksDB's fault environments do: a
//! file created (or a name hard-linked) after the last sync of its directory disappears; a
//! rename reverts (the new name disappears, the old name comes back, and a file the rename
//! replaced comes back under its name); a file deleted after that sync comes back with the
//! bytes it had synced. To bring deleted and replaced files back, the injector keeps a hard
//! link to each durable name's file from the moment the name goes until the directory is
//! synced, in a hidden `.faults-kept` folder inside the directory (removed when empty). A
//! directory's entries count as durable when the injector first sees it (when a store opens
//! with it); the tier directories themselves are assumed durable. Names changed outside
//! the environment are not tracked.
//!
//! A full disk can also be emulated by its free space: [`FaultInjector::set_free_space`]
//! gives a tier (or both, as one disk) a number of bytes that appends use up and deleted
//! files give back; an append that does not fit writes what fits and fails with ENOSPC, as
//! `write(2)` does.

use super::Tier;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// The kind of file operation a rule matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultOp {
    /// Reads (table blocks, whole-file reads).
    Read,
    /// Appends reaching the OS.
    Write,
    /// fsync of a file or directory.
    Sync,
    /// Creating or renaming a file.
    Create,
}

/// The error an injected fault produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultError {
    /// EIO: a failing device.
    Io,
    /// ENOSPC: a full device.
    NoSpace,
}

impl FaultError {
    fn to_io(self) -> std::io::Error {
        let code = match self {
            FaultError::Io => libc::EIO,
            FaultError::NoSpace => libc::ENOSPC,
        };
        std::io::Error::from_raw_os_error(code)
    }
}

/// When a rule fires.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Trigger {
    /// Every matching operation after the first `n` succeeds fails.
    After(u64),
    /// Each matching operation fails with this probability (deterministic for a seed).
    Random {
        /// Probability in `[0, 1]`.
        probability: f64,
        /// Seed of the rule's random stream.
        seed: u64,
    },
}

/// One way to fail.
#[derive(Clone, Debug)]
pub struct FaultRule {
    /// Tier to fail on (`None`: both).
    pub tier: Option<Tier>,
    /// Operation to fail.
    pub op: FaultOp,
    /// Only files whose name contains this (e.g. ".sst", ".log", "MANIFEST").
    pub name_contains: Option<String>,
    /// The error produced.
    pub error: FaultError,
    /// When it fires.
    pub trigger: Trigger,
}

struct ActiveRule {
    rule: FaultRule,
    seen: u64,
    rng: u64,
}

impl ActiveRule {
    fn fires(&mut self) -> bool {
        self.seen += 1;
        match self.rule.trigger {
            Trigger::After(n) => self.seen > n,
            Trigger::Random { probability, .. } => {
                // xorshift64*: a tiny deterministic stream, so a failing seed replays.
                self.rng ^= self.rng >> 12;
                self.rng ^= self.rng << 25;
                self.rng ^= self.rng >> 27;
                let x = self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d);
                ((x >> 11) as f64 / (1u64 << 53) as f64) < probability
            }
        }
    }
}

/// A bug planted on purpose, so that a test proves it would see it (`tests/stress.rs`):
/// the engine asks [`crate::env::Env::planted`] where the bug goes and skips a step it
/// must not skip. Only a store given a [`FaultInjector`] that [`FaultInjector::plant`]ed
/// one can have it.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlantedBug {
    /// A `sync = true` write group is acknowledged without syncing the WAL.
    SkipWalSync,
    /// New tables and WALs are not made durable in their directory before the manifest
    /// names them or synced writes go to them (the directory syncs of issue 44 skipped).
    SkipNewFileDirSync,
}

/// Injects faults into one store's I/O. Share it through `Options::fault_injector`.
#[derive(Default)]
pub struct FaultInjector {
    rules: Mutex<Vec<ActiveRule>>,
    /// Every operation fails (the machine is "down" between a crash and the restart).
    all_fail: AtomicBool,
    injected: AtomicU64,
    /// Bytes of each written file known to be durable (synced).
    synced: Mutex<HashMap<PathBuf, u64>>,
    /// Free space left: per tier, or (`None`) one disk holding both.
    space: Mutex<Vec<(Option<Tier>, u64)>>,
    /// Hooks run before a sync of a file whose name contains the fragment.
    sync_hooks: Mutex<Vec<(String, SyncHook)>>,
    /// Directory entries as of each directory's last sync.
    names: Mutex<Names>,
    /// Names removed or put back by power cuts.
    undone: AtomicU64,
    /// The bug planted, if any.
    planted: Mutex<Option<PlantedBug>>,
}

/// A file's identity: device and inode.
type FileId = (u64, u64);

/// The durable directory entries of every directory the injector has seen.
#[derive(Default)]
struct Names {
    dirs: HashMap<PathBuf, DirState>,
    /// Numbers the kept links.
    kept_seq: u64,
}

struct DirState {
    /// The names durable in the directory (as of its last sync) and the file each names.
    durable: HashMap<OsString, FileId>,
    /// Durable names whose file was removed or replaced since that sync: a hard link to
    /// the durable file, put back by a power cut.
    kept: HashMap<OsString, PathBuf>,
}

/// The folder (inside a directory) holding the kept links of its removed durable names.
const KEPT_DIR: &str = ".faults-kept";

/// A change of directory entries the environment is about to make (see
/// [`FaultInjector::name_op`]).
pub(crate) enum NameOp<'a> {
    /// Creating (or truncating) a file.
    Create(&'a Path),
    /// Giving the file `from` a second name `to`.
    Link(&'a Path, &'a Path),
    /// Removing a name.
    Remove(&'a Path),
    /// Renaming `from` to `to`, replacing `to` if it exists.
    Rename(&'a Path, &'a Path),
    /// Syncing a directory: its entries become durable.
    SyncDir(&'a Path),
}

fn file_id(path: &Path) -> Option<FileId> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .filter(|m| m.is_file())
        .map(|m| (m.dev(), m.ino()))
}

/// The regular files of `dir` and the file each names (the kept folder is not a file).
fn entries(dir: &Path) -> HashMap<OsString, FileId> {
    let Ok(list) = std::fs::read_dir(dir) else {
        return HashMap::new();
    };
    list.filter_map(|e| e.ok())
        .filter_map(|e| Some((e.file_name(), file_id(&e.path())?)))
        .collect()
}

fn split(path: &Path) -> Option<(&Path, OsString)> {
    Some((path.parent()?, path.file_name()?.to_os_string()))
}

/// A test's code run before a sync (see [`FaultInjector::before_sync`]).
pub type SyncHook = std::sync::Arc<dyn Fn(&Path) + Send + Sync>;

impl std::fmt::Debug for FaultInjector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultInjector")
            .field("rules", &self.rules.lock().len())
            .field("injected", &self.injected())
            .finish()
    }
}

impl FaultInjector {
    /// An injector with no rules (every operation succeeds).
    pub fn new() -> std::sync::Arc<Self> {
        std::sync::Arc::new(FaultInjector::default())
    }

    /// Plants `bug` in the store this injector is given to (tests proving they fail).
    #[doc(hidden)]
    pub fn plant(&self, bug: PlantedBug) {
        *self.planted.lock() = Some(bug);
    }

    /// The bug planted, if any.
    pub(crate) fn planted(&self) -> Option<PlantedBug> {
        *self.planted.lock()
    }

    /// Adds a rule.
    pub fn add(&self, rule: FaultRule) {
        let seed = match rule.trigger {
            Trigger::Random { seed, .. } => seed,
            Trigger::After(_) => 0,
        };
        self.rules.lock().push(ActiveRule {
            rule,
            seen: 0,
            rng: seed | 1,
        });
    }

    /// Removes every rule and free-space limit and lets operations through again.
    pub fn clear(&self) {
        self.rules.lock().clear();
        self.space.lock().clear();
        self.all_fail.store(false, Relaxed);
    }

    /// Emulates a disk with `bytes` of free space left on `tier` (`None`: one disk holding
    /// both tiers), replacing an earlier limit of the same scope; `bytes = None` lifts it.
    /// Appends use the space up and deleting a file gives its bytes back; an append that
    /// does not fit writes the bytes that do and fails with ENOSPC.
    pub fn set_free_space(&self, tier: Option<Tier>, bytes: Option<u64>) {
        let mut space = self.space.lock();
        space.retain(|(t, _)| *t != tier);
        if let Some(b) = bytes {
            space.push((tier, b));
        }
    }

    /// Free space left on `tier` under the tightest limit that applies (`None`: no limit).
    pub fn free_space(&self, tier: Tier) -> Option<u64> {
        self.space
            .lock()
            .iter()
            .filter(|(t, _)| t.is_none_or(|t| t == tier))
            .map(|(_, b)| *b)
            .min()
    }

    /// Takes room for an append of `len` bytes on `tier`: returns how many bytes fit, and
    /// an ENOSPC error when not all of them do (the bytes that fit are taken).
    pub(crate) fn take_space(&self, tier: Tier, len: u64) -> (u64, Option<std::io::Error>) {
        let mut space = self.space.lock();
        let fit = space
            .iter()
            .filter(|(t, _)| t.is_none_or(|t| t == tier))
            .map(|(_, b)| *b)
            .min()
            .map_or(len, |free| free.min(len));
        for (_, b) in space
            .iter_mut()
            .filter(|(t, _)| t.is_none_or(|t| t == tier))
        {
            *b -= fit;
        }
        if fit < len {
            self.injected.fetch_add(1, Relaxed);
            (fit, Some(FaultError::NoSpace.to_io()))
        } else {
            (fit, None)
        }
    }

    /// Gives back the space of a deleted file of `len` bytes on `tier`.
    pub(crate) fn give_space(&self, tier: Tier, len: u64) {
        for (_, b) in self
            .space
            .lock()
            .iter_mut()
            .filter(|(t, _)| t.is_none_or(|t| t == tier))
        {
            *b = b.saturating_add(len);
        }
    }

    /// Faults injected so far.
    pub fn injected(&self) -> u64 {
        self.injected.load(Relaxed)
    }

    /// Emulates the moment of a crash: from now on every operation fails with EIO, so
    /// nothing more reaches the disk, until [`FaultInjector::clear`].
    pub fn crash(&self) {
        self.all_fail.store(true, Relaxed);
    }

    /// Emulates losing power: undoes the directory changes no directory sync made durable
    /// (see the module's documentation), then truncates every file written through this
    /// injector to the length it had at its last sync. Call after [`FaultInjector::crash`]
    /// and after the store is dropped. Files created but never synced lose all their
    /// data. Names hard-linked to one file share its bytes: the file keeps what any of
    /// its names synced. Returns the bytes dropped.
    pub fn drop_unsynced_data(&self) -> std::io::Result<u64> {
        use std::os::unix::fs::MetadataExt;
        self.undo_unsynced_names()?;
        let mut dropped = 0;
        let synced = self.synced.lock();
        let mut durable: HashMap<(u64, u64), u64> = HashMap::new();
        for (path, &len) in synced.iter() {
            if let Ok(m) = std::fs::metadata(path) {
                let d = durable.entry((m.dev(), m.ino())).or_insert(0);
                *d = (*d).max(len);
            }
        }
        for (path, &own) in synced.iter() {
            let keep = |m: &std::fs::Metadata| durable.get(&(m.dev(), m.ino())).map_or(own, |d| *d);
            match std::fs::metadata(path) {
                Ok(m) if m.len() > keep(&m) => {
                    let synced = keep(&m);
                    dropped += m.len() - synced;
                    std::fs::OpenOptions::new()
                        .write(true)
                        .open(path)?
                        .set_len(synced)?;
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(dropped)
    }

    /// Runs `hook` before every sync of a file whose name contains `name_contains`, on the
    /// syncing thread (e.g. to hold a manifest sync until a test has seen what the engine
    /// does meanwhile).
    pub fn before_sync(&self, name_contains: &str, hook: SyncHook) {
        self.sync_hooks
            .lock()
            .push((name_contains.to_string(), hook));
    }

    /// Starts tracking the entries of `dir`: those it holds now count as durable. Nothing
    /// changes for a directory already tracked (a store reopened with the same injector).
    pub(crate) fn watch_dir(&self, dir: &Path) {
        self.names
            .lock()
            .dirs
            .entry(dir.to_path_buf())
            .or_insert_with(|| DirState {
                durable: entries(dir),
                kept: HashMap::new(),
            });
    }

    /// Runs `f`, which changes directory entries as `op` says, and records the change for
    /// power cuts: before it, a hard link keeps the file of every durable name it removes
    /// or replaces; after it, a synced directory's entries become durable and synced
    /// lengths follow renamed and linked names. Serialised with every other such change
    /// of this injector, so a directory sync sees each one whole or not at all.
    pub(crate) fn name_op<T>(
        &self,
        op: NameOp<'_>,
        f: impl FnOnce() -> std::io::Result<T>,
    ) -> std::io::Result<T> {
        let mut names = self.names.lock();
        match op {
            NameOp::Remove(path) => self.keep(&mut names, path),
            NameOp::Rename(from, to) => {
                self.keep(&mut names, from);
                self.keep(&mut names, to);
            }
            NameOp::Create(_) | NameOp::Link(..) | NameOp::SyncDir(_) => {}
        }
        let r = f()?;
        match op {
            NameOp::Create(path) => self.note_created(path),
            NameOp::Link(from, to) => self.note_linked(from, to),
            NameOp::Rename(from, to) => {
                let mut synced = self.synced.lock();
                if let Some(len) = synced.remove(from) {
                    synced.insert(to.to_path_buf(), len);
                } else {
                    synced.remove(to);
                }
            }
            NameOp::SyncDir(dir) => {
                if let Some(d) = names.dirs.get_mut(dir) {
                    d.durable = entries(dir);
                    let mut synced = self.synced.lock();
                    for (_, link) in d.kept.drain() {
                        synced.remove(&link);
                        let _ = std::fs::remove_file(&link);
                    }
                    let _ = std::fs::remove_dir(dir.join(KEPT_DIR));
                }
            }
            NameOp::Remove(_) => {}
        }
        Ok(r)
    }

    /// Before `path` is removed or replaced: if it is a durable name still naming its
    /// durable file, keeps a hard link to that file (once per name between syncs).
    fn keep(&self, names: &mut Names, path: &Path) {
        let Some((dir, name)) = split(path) else {
            return;
        };
        let Some(d) = names.dirs.get_mut(dir) else {
            return;
        };
        if d.kept.contains_key(&name) || d.durable.get(&name) != file_id(path).as_ref() {
            return;
        }
        names.kept_seq += 1;
        let kept_dir = dir.join(KEPT_DIR);
        let link = kept_dir.join(names.kept_seq.to_string());
        let made = std::fs::create_dir_all(&kept_dir).and_then(|_| std::fs::hard_link(path, &link));
        if made.is_ok() {
            let mut synced = self.synced.lock();
            if let Some(len) = synced.get(path).copied() {
                synced.insert(link.clone(), len);
            }
            d.kept.insert(name, link);
        }
    }

    /// Names removed or put back by power cuts so far.
    pub fn undone_entries(&self) -> u64 {
        self.undone.load(Relaxed)
    }

    /// Undoes every directory change no sync made durable (see the module's
    /// documentation): removes names that are not durable, puts durable names back.
    fn undo_unsynced_names(&self) -> std::io::Result<()> {
        let mut names = self.names.lock();
        let mut synced = self.synced.lock();
        for (dir, d) in names.dirs.iter_mut() {
            for (name, id) in entries(dir) {
                if d.durable.get(&name) != Some(&id) {
                    std::fs::remove_file(dir.join(&name))?;
                    self.undone.fetch_add(1, Relaxed);
                }
            }
            for (name, link) in d.kept.drain() {
                let path = dir.join(&name);
                if file_id(&path).is_none() {
                    std::fs::rename(&link, &path)?;
                    if let Some(len) = synced.remove(&link) {
                        synced.insert(path, len);
                    } else {
                        synced.remove(&path);
                    }
                    self.undone.fetch_add(1, Relaxed);
                } else {
                    synced.remove(&link);
                    std::fs::remove_file(&link)?;
                }
            }
            let _ = std::fs::remove_dir(dir.join(KEPT_DIR));
        }
        Ok(())
    }

    /// Asks whether `op` on `path` of `tier` fails; `Some(error)` when a rule fires.
    pub(crate) fn check(&self, tier: Tier, op: FaultOp, path: &Path) -> Option<std::io::Error> {
        if op == FaultOp::Sync {
            self.run_sync_hooks(path);
        }
        if self.all_fail.load(Relaxed) {
            self.injected.fetch_add(1, Relaxed);
            return Some(FaultError::Io.to_io());
        }
        let mut rules = self.rules.lock();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        for r in rules.iter_mut() {
            let matches = r.rule.op == op
                && r.rule.tier.is_none_or(|t| t == tier)
                && r.rule
                    .name_contains
                    .as_deref()
                    .is_none_or(|frag| name.contains(frag));
            if matches && r.fires() {
                self.injected.fetch_add(1, Relaxed);
                return Some(r.rule.error.to_io());
            }
        }
        None
    }

    fn run_sync_hooks(&self, path: &Path) {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        // Cloned out: a hook may block, and must not hold the list's lock while it does.
        let hooks: Vec<SyncHook> = self
            .sync_hooks
            .lock()
            .iter()
            .filter(|(frag, _)| name.contains(frag.as_str()))
            .map(|(_, h)| h.clone())
            .collect();
        for hook in hooks {
            hook(path);
        }
    }

    /// Records that `to` is a new name of `from`: its bytes are as durable as `from`'s
    /// (a file not written through the injector counts as durable whole).
    pub(crate) fn note_linked(&self, from: &Path, to: &Path) {
        let mut synced = self.synced.lock();
        let len = synced
            .get(from)
            .copied()
            .or_else(|| std::fs::metadata(from).ok().map(|m| m.len()));
        if let Some(len) = len {
            synced.insert(to.to_path_buf(), len);
        }
    }

    /// Records that `path` was created empty (nothing of it is durable yet).
    pub(crate) fn note_created(&self, path: &Path) {
        self.synced.lock().insert(path.to_path_buf(), 0);
    }

    /// Records that the first `len` bytes of `path` are durable.
    pub(crate) fn note_synced(&self, path: &Path, len: u64) {
        self.synced.lock().insert(path.to_path_buf(), len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(trigger: Trigger) -> FaultRule {
        FaultRule {
            tier: Some(Tier::Fast),
            op: FaultOp::Write,
            name_contains: Some(".sst".into()),
            error: FaultError::NoSpace,
            trigger,
        }
    }

    #[test]
    fn rules_match_tier_op_and_name_and_fire_as_told() {
        let f = FaultInjector::new();
        f.add(rule(Trigger::After(2)));
        let sst = Path::new("/d/000001.sst");
        for _ in 0..2 {
            assert!(f.check(Tier::Fast, FaultOp::Write, sst).is_none());
        }
        let e = f.check(Tier::Fast, FaultOp::Write, sst).unwrap();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        assert!(f.check(Tier::Slow, FaultOp::Write, sst).is_none());
        assert!(f.check(Tier::Fast, FaultOp::Sync, sst).is_none());
        assert!(f
            .check(Tier::Fast, FaultOp::Write, Path::new("/d/000002.log"))
            .is_none());
        assert_eq!(f.injected(), 1);
        f.clear();
        assert!(f.check(Tier::Fast, FaultOp::Write, sst).is_none());
    }

    #[test]
    fn free_space_is_used_up_by_appends_and_given_back() {
        let f = FaultInjector::new();
        f.set_free_space(None, Some(100));
        f.set_free_space(Some(Tier::Slow), Some(1000));
        let (fit, e) = f.take_space(Tier::Fast, 60);
        assert!(fit == 60 && e.is_none());
        // The shared limit is the tighter one for the slow tier too.
        let (fit, e) = f.take_space(Tier::Slow, 60);
        assert_eq!(fit, 40);
        assert_eq!(e.unwrap().raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(f.free_space(Tier::Fast), Some(0));
        assert_eq!(f.free_space(Tier::Slow), Some(0));
        f.give_space(Tier::Fast, 30);
        assert_eq!(f.free_space(Tier::Fast), Some(30));
        f.set_free_space(None, None);
        assert_eq!(f.free_space(Tier::Fast), None);
        assert_eq!(f.free_space(Tier::Slow), Some(1000 - 40));
        f.clear();
        let (fit, e) = f.take_space(Tier::Slow, 5000);
        assert!(fit == 5000 && e.is_none());
    }

    /// A store's directory with the injector: files written through `env` and synced.
    fn power_cut_env() -> (
        tempfile::TempDir,
        std::sync::Arc<FaultInjector>,
        std::sync::Arc<crate::env::Env>,
    ) {
        use crate::env::{DeviceProfile, Env};
        let dir = tempfile::tempdir().unwrap();
        let f = FaultInjector::new();
        let env = Env::new(
            dir.path(),
            dir.path(),
            DeviceProfile::none(),
            DeviceProfile::none(),
            false,
            Some(f.clone()),
        )
        .unwrap();
        (dir, f, env)
    }

    fn write_synced(env: &crate::env::Env, name: &str, data: &[u8]) {
        let mut w = env
            .create_writable(Tier::Fast, name, crate::env::IoCause::Flush)
            .unwrap();
        w.append(data).unwrap();
        w.sync().unwrap();
    }

    fn read(env: &crate::env::Env, name: &str) -> Option<Vec<u8>> {
        std::fs::read(env.path(Tier::Fast, name)).ok()
    }

    fn power_cut(f: &FaultInjector) {
        f.crash();
        f.drop_unsynced_data().unwrap();
        f.clear();
    }

    /// Invariant 2's emulation: a file created after the last sync of its directory is
    /// gone after a power cut, even with its data synced; after a directory sync it stays
    /// with its synced bytes, and bytes appended unsynced after that are dropped.
    #[test]
    fn a_created_file_needs_a_directory_sync_to_survive_a_power_cut() {
        let (_dir, f, env) = power_cut_env();
        write_synced(&env, "a", b"synced data");
        power_cut(&f);
        assert_eq!(read(&env, "a"), None);
        assert_eq!(f.undone_entries(), 1);

        write_synced(&env, "b", b"synced");
        env.sync_dir(Tier::Fast).unwrap();
        let mut w = env
            .reopen_writable(Tier::Fast, "b", 6, crate::env::IoCause::Flush)
            .unwrap();
        w.append(b" and not").unwrap();
        w.flush().unwrap();
        power_cut(&f);
        assert_eq!(read(&env, "b").as_deref(), Some(&b"synced"[..]));
        // Nothing is left of the kept links' folder.
        assert_eq!(env.list(Tier::Fast).unwrap(), vec!["b".to_string()]);
        assert!(!env.path(Tier::Fast, KEPT_DIR).exists());
    }

    /// A rename whose directory sync failed reverts at a power cut: the new name goes, the
    /// old one comes back with its bytes, and so does the durable file the rename
    /// replaced (`CURRENT.tmp` over `CURRENT`); after a directory sync the rename stays.
    #[test]
    fn a_rename_before_its_directory_sync_reverts() {
        let (_dir, f, env) = power_cut_env();
        write_synced(&env, "CURRENT", b"MANIFEST-1");
        write_synced(&env, "CURRENT.tmp", b"MANIFEST-2");
        env.sync_dir(Tier::Fast).unwrap();
        f.add(FaultRule {
            tier: None,
            op: FaultOp::Sync,
            name_contains: None,
            error: FaultError::Io,
            trigger: Trigger::After(0),
        });
        // The rename happens; the directory sync after it fails.
        assert!(env.rename(Tier::Fast, "CURRENT.tmp", "CURRENT").is_err());
        assert_eq!(read(&env, "CURRENT").as_deref(), Some(&b"MANIFEST-2"[..]));
        assert_eq!(read(&env, "CURRENT.tmp"), None);
        power_cut(&f);
        assert_eq!(read(&env, "CURRENT").as_deref(), Some(&b"MANIFEST-1"[..]));
        assert_eq!(
            read(&env, "CURRENT.tmp").as_deref(),
            Some(&b"MANIFEST-2"[..])
        );

        env.rename(Tier::Fast, "CURRENT.tmp", "CURRENT").unwrap();
        power_cut(&f);
        assert_eq!(read(&env, "CURRENT").as_deref(), Some(&b"MANIFEST-2"[..]));
        assert_eq!(read(&env, "CURRENT.tmp"), None);
    }

    /// A durable file deleted after the last directory sync comes back at a power cut with
    /// its synced bytes; one deleted before a directory sync stays deleted, as does one
    /// that was never durable; a hard link made without a sync goes.
    #[test]
    fn deletes_and_links_before_a_directory_sync_are_undone() {
        let (_dir, f, env) = power_cut_env();
        write_synced(&env, "kept", b"durable");
        write_synced(&env, "gone", b"durable too");
        write_synced(&env, "linked", b"abc");
        env.sync_dir(Tier::Fast).unwrap();
        env.remove(Tier::Fast, "gone").unwrap();
        env.sync_dir(Tier::Fast).unwrap();
        env.remove(Tier::Fast, "kept").unwrap();
        write_synced(&env, "new", b"never durable");
        env.remove(Tier::Fast, "new").unwrap();
        // A link whose directory sync fails.
        f.add(FaultRule {
            tier: None,
            op: FaultOp::Sync,
            name_contains: None,
            error: FaultError::Io,
            trigger: Trigger::After(0),
        });
        assert!(env.link(Tier::Fast, "linked", "linked2").is_err());
        assert!(read(&env, "linked2").is_some());
        power_cut(&f);
        assert_eq!(read(&env, "kept").as_deref(), Some(&b"durable"[..]));
        assert_eq!(read(&env, "gone"), None);
        assert_eq!(read(&env, "new"), None);
        assert_eq!(read(&env, "linked").as_deref(), Some(&b"abc"[..]));
        assert_eq!(read(&env, "linked2"), None);
        let mut names = env.list(Tier::Fast).unwrap();
        names.sort();
        assert_eq!(names, vec!["kept".to_string(), "linked".to_string()]);
    }

    #[test]
    fn random_rules_are_deterministic_and_near_their_probability() {
        let count = |seed| {
            let f = FaultInjector::new();
            f.add(rule(Trigger::Random {
                probability: 0.1,
                seed,
            }));
            (0..10_000)
                .filter(|_| {
                    f.check(Tier::Fast, FaultOp::Write, Path::new("x.sst"))
                        .is_some()
                })
                .count()
        };
        assert_eq!(count(3), count(3));
        assert!((800..1200).contains(&count(3)), "{}", count(3));
    }
}

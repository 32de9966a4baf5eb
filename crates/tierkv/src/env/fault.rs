//! Fault injection: makes chosen I/O operations fail the way real disks do (EIO, ENOSPC),
//! and emulates a power cut by dropping every byte that was written but not synced.
//!
//! A [`FaultInjector`] is handed to the store through `Options::fault_injector`; every file
//! operation of the environment asks it first. Rules match a tier, an operation kind and
//! optionally a file-name fragment, and fire after a number of matching operations or at
//! random with a seeded probability. Owns the rules and the synced-length bookkeeping; it
//! never touches data itself except to truncate files in [`FaultInjector::drop_unsynced_data`].
//!
//! A full disk can also be emulated by its free space: [`FaultInjector::set_free_space`]
//! gives a tier (or both, as one disk) a number of bytes that appends use up and deleted
//! files give back; an append that does not fit writes what fits and fails with ENOSPC, as
//! `write(2)` does.

use super::Tier;
use parking_lot::Mutex;
use std::collections::HashMap;
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

    /// Emulates losing power: truncates every file written through this injector to the
    /// length it had at its last sync. Call after [`FaultInjector::crash`] and after the
    /// store is dropped. Files created but never synced lose all their data.
    /// Names hard-linked to one file share its bytes: the file keeps what any of its
    /// names synced.
    pub fn drop_unsynced_data(&self) -> std::io::Result<u64> {
        use std::os::unix::fs::MetadataExt;
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

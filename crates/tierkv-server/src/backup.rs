//! Checkpoints of the running store for BGSAVE and SAVE (`Db::checkpoint`: every write up
//! to one point, both tiers, the hotness tracker's state): where they go, which are kept,
//! and the state INFO persistence and LASTSAVE report. A checkpoint goes to
//! `checkpoint-<unix ms>` under the checkpoint directory (`tierkv-checkpoint-dir`, by
//! default `<store dir>.checkpoints` beside the store; a two-tier store's slow tables under
//! `<slow dir>.checkpoints`, on the slow disk, so they can be hard links), and the newest
//! `tierkv-checkpoint-keep` are kept. Restoring is opening one (docs/DEPLOYMENT.md,
//! "Backups").

use crate::config::ServerConfig;
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use tierkv::{Db, Tier};

/// What INFO persistence and LASTSAVE report, and the one-at-a-time guard.
#[derive(Default)]
pub(crate) struct Saves {
    running: AtomicBool,
    /// BGSAVE SCHEDULE while one ran: another starts when it ends.
    scheduled: AtomicBool,
    /// Unix seconds of the last successful checkpoint (the server's start before any).
    pub last_ok: AtomicU64,
    /// The last checkpoint failed.
    pub last_failed: AtomicBool,
    /// Checkpoints completed.
    pub done: AtomicU64,
    /// Where the last successful one is.
    pub last_dir: Mutex<Option<PathBuf>>,
}

impl Saves {
    /// No checkpoint yet: LASTSAVE answers `started` (unix seconds), as Redis answers its
    /// start before a first save.
    pub fn starting_at(started: u64) -> Saves {
        Saves {
            last_ok: AtomicU64::new(started),
            ..Saves::default()
        }
    }

    pub fn in_progress(&self) -> bool {
        self.running.load(Relaxed)
    }

    /// Claims the one checkpoint slot; false when one runs.
    pub fn start(&self) -> bool {
        !self.running.swap(true, Relaxed)
    }

    /// Releases the slot.
    pub fn finish(&self) {
        self.running.store(false, Relaxed);
    }

    /// Asks for another checkpoint after the running one.
    pub fn schedule(&self) {
        self.scheduled.store(true, Relaxed);
    }

    /// Takes the request for another checkpoint, if any.
    pub fn take_scheduled(&self) -> bool {
        self.scheduled.swap(false, Relaxed)
    }
}

/// The directories checkpoints go under: the configured one, or `<dir>.checkpoints`
/// beside each tier's directory.
fn roots(db: &Db, config: &ServerConfig) -> (PathBuf, Option<PathBuf>) {
    let beside = |dir: &Path| {
        let mut name = dir.file_name().unwrap_or_default().to_os_string();
        name.push(".checkpoints");
        dir.with_file_name(name)
    };
    let fast = db.tier_dir(Tier::Fast);
    let slow = db.tier_dir(Tier::Slow);
    let two_tiers = fast != slow;
    match &config.checkpoint_dir {
        Some(root) => (
            root.clone(),
            two_tiers.then(|| {
                config
                    .checkpoint_slow_dir
                    .clone()
                    .unwrap_or_else(|| beside(slow))
            }),
        ),
        None => (beside(fast), two_tiers.then(|| beside(slow))),
    }
}

/// Makes one checkpoint and drops the oldest beyond `keep`; returns its directory.
pub(crate) fn checkpoint(db: &Db, config: &ServerConfig) -> Result<PathBuf, String> {
    let (root, slow_root) = roots(db, config);
    for r in std::iter::once(&root).chain(slow_root.as_ref()) {
        std::fs::create_dir_all(r).map_err(|e| format!("{}: {e}", r.display()))?;
    }
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let mut name = format!("checkpoint-{ms}");
    let mut n = 1;
    while root.join(&name).exists() || slow_root.as_ref().is_some_and(|s| s.join(&name).exists()) {
        n += 1;
        name = format!("checkpoint-{ms}-{n}");
    }
    let to = root.join(&name);
    let slow_to = slow_root.as_ref().map(|s| s.join(&name));
    db.checkpoint(&to, slow_to.as_deref())
        .map_err(|e| e.to_string())?;
    prune(&root, slow_root.as_deref(), config.checkpoint_keep);
    Ok(to)
}

/// Removes the oldest checkpoints under `root` (and `slow_root`) beyond the newest `keep`.
fn prune(root: &Path, slow_root: Option<&Path>, keep: usize) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("checkpoint-") && !n.ends_with(".checkpoint-tmp"))
        .collect();
    // Unix ms of equal width for centuries: the names sort by age.
    names.sort();
    let old = names.len().saturating_sub(keep.max(1));
    for n in &names[..old] {
        for r in std::iter::once(root).chain(slow_root) {
            let dir = r.join(n);
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!("removing old checkpoint {}: {e}", dir.display());
                }
            }
        }
    }
}

pub(crate) fn record(saves: &Saves, r: &Result<PathBuf, String>) {
    match r {
        Ok(dir) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            saves.last_ok.store(now, Relaxed);
            saves.last_failed.store(false, Relaxed);
            saves.done.fetch_add(1, Relaxed);
            *saves.last_dir.lock() = Some(dir.clone());
            tracing::info!("checkpoint written to {}", dir.display());
        }
        Err(e) => {
            saves.last_failed.store(true, Relaxed);
            tracing::warn!("checkpoint failed: {e}");
        }
    }
}

//! Checkpoints: a consistent, openable copy of a running store ([`crate::Db::checkpoint`]).
//!
//! The memtables are flushed, then the current version is taken (holding it keeps its
//! tables on disk) and each table gets a second name in the copy's directory of its tier (a
//! hard link; a copy where the file system cannot link, and always for a semi-sorted
//! table, which is appended to in place). A new manifest describes exactly
//! those tables, with no WAL, so the copy holds every write up to one point of the store's
//! history: the memtables are flushed in order, so a version's tables hold a prefix of the
//! writes (the copy's [`Checkpoint::sequence`]). The copy also gets the tier record
//! (naming its own slow directory), the hotness tracker's state and the keys of the
//! promotion cache's records (`cached_keys`), so a store opened from it finds its hot set
//! where it was: on the fast disk, in the tracker, and read back into its cache.
//!
//! The copy is built under `<to>.checkpoint-tmp` (and `<slow_to>.checkpoint-tmp`) and
//! renamed into place when complete, the slow directory first: a crash during a checkpoint
//! leaves no `<to>`, only the temporary directories, which the next checkpoint to the same
//! place removes. Owns nothing the store reads; reads the version set and the tracker
//! under their own locks.

use super::stored_tiers::StoredTiers;
use super::DbInner;
use crate::env::kill::kill_point;
use crate::env::{link_or_copy, DeviceProfile, Env, Tier};
use crate::error::{Error, Result};
use crate::hot::HotTracker;
use crate::options::SlowTierFormat;
use crate::version::{table_file_name, write_checkpoint_manifest};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

/// What a checkpoint copied.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Checkpoint {
    /// Every write with a sequence number up to this one is in the copy, and none after it.
    pub sequence: u64,
    /// Tables in the copy.
    pub tables: usize,
    /// Their bytes.
    pub table_bytes: u64,
    /// Files given a second name (hard links), and files copied (where linking failed).
    pub linked: usize,
    /// Files copied.
    pub copied: usize,
}

/// The temporary directory a checkpoint to `dir` is built in.
fn staging(dir: &Path) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(".checkpoint-tmp");
    dir.with_file_name(name)
}

fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(dir, e))
}

/// Copies the first `len` bytes of `from` to the new file `to`, synced.
fn copy_prefix(from: &Path, to: &Path, len: u64) -> Result<()> {
    use std::io::{Read, Write};
    let src = std::fs::File::open(from).map_err(|e| Error::io(from, e))?;
    let mut dst = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(to)
        .map_err(|e| Error::io(to, e))?;
    let copied = std::io::copy(&mut src.take(len), &mut dst).map_err(|e| Error::io(to, e))?;
    if copied != len {
        return Err(Error::corruption(
            from,
            copied,
            format!("table shorter than its recorded {len} bytes"),
        ));
    }
    dst.flush()
        .and_then(|()| dst.sync_all())
        .map_err(|e| Error::io(to, e))
}

/// The parent directory of `dir` (`.` for a bare name).
fn parent(dir: &Path) -> &Path {
    match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

pub(super) fn make(
    inner: &std::sync::Arc<DbInner>,
    to: &Path,
    slow_to: Option<&Path>,
) -> Result<Checkpoint> {
    let env = &inner.env;
    let two_tiers = !env.is_single_dir();
    match (two_tiers, slow_to) {
        (true, None) => {
            return Err(Error::InvalidArgument(
                "a checkpoint of a two-tier store needs a directory for its slow tier".into(),
            ))
        }
        (false, Some(d)) => {
            return Err(Error::InvalidArgument(format!(
                "a checkpoint of a one-directory store has no slow tier to put in {}",
                d.display()
            )))
        }
        _ => {}
    }
    let targets: Vec<&Path> = std::iter::once(to).chain(slow_to).collect();
    if targets.len() == 2 && targets[0] == targets[1] {
        return Err(Error::InvalidArgument(
            "a checkpoint's fast and slow directories must differ".into(),
        ));
    }
    for d in &targets {
        if d.exists() {
            return Err(Error::InvalidArgument(format!(
                "checkpoint target {} exists: a checkpoint goes to a new directory",
                d.display()
            )));
        }
    }
    let stages: Vec<PathBuf> = targets.iter().map(|d| staging(d)).collect();
    for s in &stages {
        if s.exists() {
            // Left by a checkpoint interrupted before it completed.
            std::fs::remove_dir_all(s).map_err(|e| Error::io(s, e))?;
        }
        std::fs::create_dir_all(s).map_err(|e| Error::io(s, e))?;
    }
    let (fast_stage, slow_stage) = (&stages[0], stages.get(1));
    kill_point("checkpoint.started");

    inner.flush_and_wait()?;
    let (version, mut edit, manifest, through) = {
        // Loaded before the memtables are looked at: every write up to it is in a table
        // or a memtable.
        let visible = inner.reads.visible_seq.load(Ordering::Acquire);
        let st = inner.state.lock();
        let (version, edit, manifest) = st.tree.versions.checkpoint_snapshot();
        (version, edit, manifest, st.tree.flushed_through(visible))
    };
    // The copy holds exactly the writes up to `through`, and says so: a store opened from
    // it continues at the next sequence (a replica's next change).
    edit.last_sequence = Some(through);
    let mut done = Checkpoint {
        sequence: through,
        ..Default::default()
    };
    let semi_sorted = inner.opts.compaction.slow_tier_format == SlowTierFormat::SemiSorted;
    for f in &edit.added {
        let dir = match (f.tier, slow_stage) {
            (Tier::Slow, Some(slow)) => slow,
            _ => fast_stage,
        };
        let name = table_file_name(f.number);
        let (from, to) = (env.path(f.tier, &name), dir.join(&name));
        // A semi-sorted table is continued in place (its next generation is appended to
        // a linked copy, cut back to its recorded size first): a second name would let
        // the store and the copy write over each other's generations. Its recorded bytes
        // are copied instead.
        let appendable = f.tier == Tier::Slow && (semi_sorted || f.key_list_bytes > 0);
        if appendable {
            copy_prefix(&from, &to, f.size)?;
            done.copied += 1;
        } else if link_or_copy(&from, &to)? {
            done.linked += 1;
        } else {
            done.copied += 1;
        }
        done.tables += 1;
        done.table_bytes += f.size;
    }
    kill_point("checkpoint.tables_linked");
    // The version's tables have their second names: the store may drop them now.
    drop(version);

    let copy_env = Env::new(
        fast_stage,
        slow_stage.unwrap_or(fast_stage),
        DeviceProfile::none(),
        DeviceProfile::none(),
        false,
        None,
    )?;
    write_checkpoint_manifest(&copy_env, manifest, &edit)?;
    if let Some(slow_to) = slow_to {
        let stored = StoredTiers::read(env.dir(Tier::Fast))?.ok_or_else(|| {
            Error::InvalidArgument("a two-tier store without its tier record".into())
        })?;
        let slow_dir = std::path::absolute(slow_to).map_err(|e| Error::io(slow_to, e))?;
        StoredTiers { slow_dir, ..stored }.write(fast_stage)?;
    }
    if let Some(HotTracker::Ralt(ralt)) = inner.hot.tracker.as_deref() {
        let (linked, copied) = ralt.checkpoint_into(&fast_stage.join("ralt"))?;
        done.linked += linked;
        done.copied += copied;
    }
    if inner.hot.tracker.is_some() {
        // The slow tier's records this store serves from memory, its promotion cache's and
        // its point caches': the store opened from the copy reads them (`cached_keys`).
        let keys = super::cached_keys::served_from_memory(inner);
        super::cached_keys::write(fast_stage, &keys)?;
    }
    for s in &stages {
        sync_dir(s)?;
    }
    kill_point("checkpoint.staged");

    // The slow directory first: the copy is a store only once its fast directory (with
    // CURRENT) has its name.
    for (stage, target) in stages.iter().zip(&targets).rev() {
        std::fs::rename(stage, target).map_err(|e| Error::io(target, e))?;
        sync_dir(parent(target))?;
        kill_point("checkpoint.renamed");
    }
    Ok(done)
}

//! The version set: the current [`Version`], the manifest log that makes every change
//! durable, the `CURRENT` pointer, and the counters persisted with them (next file
//! number, last sequence, oldest live WAL).
//!
//! Installing a change is atomic: the edit is appended and fsynced to the manifest before
//! the new version becomes current; a torn manifest tail is dropped at recovery, so a crash
//! mid-install leaves the previous version in force.

use super::{manifest_file_name, table_file_name, FileMeta, NewFile, Version, VersionEdit};
use crate::env::kill::kill_point;
use crate::env::{Env, IoCause, PlantedBug, Tier};
use crate::error::{Error, Result};
use crate::key::{compare_internal, SeqNo, MAX_SEQ};
use crate::tiers::LevelLayout;
use crate::wal::{LogReader, LogWriter, RecoveryMode};
use std::collections::BTreeMap;
use std::sync::Arc;

const CURRENT: &str = "CURRENT";
/// A manifest larger than this is rewritten as a fresh snapshot.
const MAX_MANIFEST_BYTES: u64 = 64 << 20;

/// The current version plus the manifest that records how it came to be.
pub struct VersionSet {
    env: Arc<Env>,
    layout: Arc<LevelLayout>,
    current: Arc<Version>,
    manifest: Option<LogWriter>,
    manifest_number: u64,
    /// Next unused file number (tables, WALs, manifests share the space).
    pub next_file_number: u64,
    /// Largest sequence number known to be persisted in tables or WALs.
    pub last_sequence: SeqNo,
    /// WALs numbered below this are fully flushed and may be deleted.
    pub log_number: u64,
}

/// File numbers above this are corruption: far beyond any real store, and low enough that
/// counting up from one never overflows.
const MAX_FILE_NUMBER: u64 = 1 << 62;

impl VersionSet {
    /// Opens the version set of the store in `env`: recovers it from `CURRENT` and the
    /// manifest, or creates an empty one. Returns whether the store was created.
    pub fn open(
        env: Arc<Env>,
        layout: Arc<LevelLayout>,
        create_if_missing: bool,
        error_if_exists: bool,
    ) -> Result<(VersionSet, bool)> {
        let fast_dir = env.dir(Tier::Fast).to_path_buf();
        if env.exists(Tier::Fast, CURRENT) {
            if error_if_exists {
                return Err(Error::InvalidArgument(format!(
                    "store at {} already exists (error_if_exists is set)",
                    fast_dir.display()
                )));
            }
            let vs = Self::recover(env, layout)?;
            vs.check_files_present()?;
            Ok((vs, false))
        } else {
            if !create_if_missing {
                return Err(Error::NoStore(fast_dir));
            }
            let mut vs = VersionSet {
                current: Arc::new(Version::empty(layout.clone())),
                env,
                layout,
                manifest: None,
                manifest_number: 0,
                next_file_number: 1,
                last_sequence: 0,
                log_number: 0,
            };
            vs.write_new_manifest()?;
            Ok((vs, true))
        }
    }

    fn recover(env: Arc<Env>, layout: Arc<LevelLayout>) -> Result<VersionSet> {
        let current_path = env.path(Tier::Fast, CURRENT);
        let raw = env.read_all(Tier::Fast, CURRENT, IoCause::Manifest)?;
        let name = std::str::from_utf8(&raw)
            .ok()
            .and_then(|s| s.strip_suffix('\n'))
            .filter(|s| s.starts_with("MANIFEST-"))
            .ok_or_else(|| Error::corruption(&current_path, 0, "CURRENT does not name a manifest"))?
            .to_string();
        let manifest_number: u64 = name["MANIFEST-".len()..]
            .parse()
            .ok()
            .filter(|&n| n <= MAX_FILE_NUMBER)
            .ok_or_else(|| Error::corruption(&current_path, 0, "bad manifest number in CURRENT"))?;
        let path = env.path(Tier::Fast, &name);
        let data = env.read_all(Tier::Fast, &name, IoCause::Manifest)?;
        let mut reader = LogReader::new(data, path.clone(), RecoveryMode::TolerateTornTail);
        let num_levels = layout.targets.len();
        let mut levels: Vec<BTreeMap<u64, NewFile>> = vec![BTreeMap::new(); num_levels];
        let (mut next_file, mut last_seq, mut log_number) = (None, None, None);
        while let Some(rec) = reader.next_record()? {
            let offset = reader.last_record_offset();
            let edit = VersionEdit::decode(&rec, &path, offset)?;
            let bad = |what: String| Error::corruption(&path, offset, what);
            for (level, number) in edit.deleted {
                let removed = levels.get_mut(level).and_then(|l| l.remove(&number));
                if removed.is_none() {
                    return Err(bad(format!(
                        "deletes unknown file {number} from level {level}"
                    )));
                }
            }
            for f in edit.added {
                if f.number > MAX_FILE_NUMBER {
                    return Err(bad(format!("file number {} out of range", f.number)));
                }
                if f.level >= num_levels {
                    return Err(bad(format!(
                        "file {} is at level {} but the store is opened with {num_levels} levels",
                        f.number, f.level
                    )));
                }
                levels[f.level].insert(f.number, f);
            }
            next_file = edit.next_file_number.or(next_file);
            last_seq = edit.last_sequence.or(last_seq);
            log_number = edit.log_number.or(log_number);
        }
        let (Some(next_file_number), Some(last_sequence)) = (next_file, last_seq) else {
            return Err(Error::corruption(
                &path,
                0,
                "manifest lacks the next file number or last sequence",
            ));
        };
        // Counters past these bounds (a damaged or forged manifest) would overflow as the
        // store counts up: new writes would get sequence numbers no key trailer can hold.
        if last_sequence > MAX_SEQ || next_file_number > MAX_FILE_NUMBER {
            return Err(Error::corruption(
                &path,
                0,
                format!(
                    "manifest counters out of range: last sequence {last_sequence}, next file {next_file_number}"
                ),
            ));
        }
        let mut version = Version::empty(layout.clone());
        for (level, files) in levels.into_iter().enumerate() {
            version.levels[level] = files
                .into_values()
                .map(|f| Arc::new(FileMeta::new(f, env.clone())))
                .collect();
        }
        sort_and_check(&mut version).map_err(|why| Error::corruption(&path, 0, why))?;
        let max_number = version
            .all_files()
            .map(|(_, f)| f.number)
            .max()
            .unwrap_or(0);
        let mut vs = VersionSet {
            env,
            layout,
            current: Arc::new(version),
            manifest: None,
            manifest_number,
            next_file_number: next_file_number
                .max(max_number + 1)
                .max(manifest_number + 1),
            last_sequence,
            log_number: log_number.unwrap_or(0),
        };
        // Start a fresh manifest: it compacts the old one and drops any torn tail for good.
        vs.write_new_manifest()?;
        Ok(vs)
    }

    /// Every live file must be where the manifest says, with at least the recorded size: a
    /// store reopened with another fast or slow directory fails here, clearly. A file may
    /// be longer: a semi-sorted table's next generation is appended to a linked copy of
    /// it, and a crash before the manifest edit leaves those bytes past the recorded size,
    /// where readers never look (they find the footer at the recorded size).
    fn check_files_present(&self) -> Result<()> {
        for (level, f) in self.current.all_files() {
            let name = table_file_name(f.number);
            match self.env.file_size(f.tier, &name) {
                Ok(size) if size >= f.size() => {}
                Ok(size) => {
                    return Err(Error::corruption(
                        self.env.path(f.tier, &name),
                        size,
                        format!(
                            "table of level {level} has {size} bytes, manifest says at least {}",
                            f.size()
                        ),
                    ))
                }
                Err(_) => {
                    let other = match f.tier {
                        Tier::Fast => Tier::Slow,
                        Tier::Slow => Tier::Fast,
                    };
                    let hint = if self.env.exists(other, &name) {
                        format!(
                            "; it is in the {} tier directory {} instead: was the store opened with its tier directories swapped or changed?",
                            other.name(),
                            self.env.dir(other).display()
                        )
                    } else {
                        "; was the store opened with a different tier directory?".to_string()
                    };
                    return Err(Error::corruption(
                        self.env.path(f.tier, &name),
                        0,
                        format!(
                            "table of level {level} is missing from the {} tier directory{hint}",
                            f.tier.name()
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The current version.
    pub fn current(&self) -> Arc<Version> {
        self.current.clone()
    }

    /// The level layout.
    pub fn layout(&self) -> &Arc<LevelLayout> {
        &self.layout
    }

    /// Allocates a file number.
    pub fn new_file_number(&mut self) -> u64 {
        let n = self.next_file_number;
        self.next_file_number += 1;
        n
    }

    /// Number of the manifest being appended to.
    pub fn manifest_number(&self) -> u64 {
        self.manifest_number
    }

    /// Makes `edit` durable in the manifest, then installs the resulting version. Files the
    /// edit deletes are marked obsolete (unlinked when no reader holds them). The three
    /// steps of [`VersionSet::begin_install`] in one, for callers that hold no lock others
    /// wait on (open, tests).
    ///
    /// On error nothing changes in memory: in particular the log number and last sequence
    /// stay as they were, so a later edit can never make a failed flush's WAL look flushed.
    /// The edit may still have reached the disk (a failed sync), so callers must not delete
    /// the files it adds; the next open removes whatever the manifest does not reference.
    pub fn log_and_apply(&mut self, edit: VersionEdit) -> Result<Arc<Version>> {
        let mut install = self.begin_install(edit)?;
        let written = install.write();
        self.finish_install(install, written)
    }

    /// The first step of an install, under the lock that guards this set: fills in the
    /// edit's counters, computes the resulting version and takes the manifest writer (or
    /// plans a new manifest holding that version, when there is none or it has grown
    /// past its limit). [`Install::write`] then needs no lock, and
    /// [`VersionSet::finish_install`] ends it. One install at a time (the writer travels
    /// with it): the engine serializes them with its install lock; until it finishes,
    /// `current` stays the version before it.
    pub fn begin_install(&mut self, mut edit: VersionEdit) -> Result<Install> {
        let previous = (self.log_number, self.last_sequence);
        if let Some(n) = edit.log_number {
            self.log_number = self.log_number.max(n);
        }
        if let Some(s) = edit.last_sequence {
            self.last_sequence = self.last_sequence.max(s);
        }
        edit.log_number = Some(self.log_number);
        edit.next_file_number = Some(self.next_file_number);
        edit.last_sequence = Some(self.last_sequence);
        let version = match self.apply(&edit) {
            Ok(v) => v,
            Err(e) => {
                (self.log_number, self.last_sequence) = previous;
                return Err(e);
            }
        };
        let removed: Vec<Arc<FileMeta>> = edit
            .deleted
            .iter()
            .filter_map(|&(level, number)| {
                self.current
                    .levels
                    .get(level)?
                    .iter()
                    .find(|f| f.number == number)
                    .cloned()
            })
            .collect();
        let manifest = match self.manifest.take() {
            Some(m) if m.len() <= MAX_MANIFEST_BYTES => ManifestWrite::Append(m),
            // The snapshot written by a new manifest must already include this edit.
            _ => {
                let number = self.new_file_number();
                ManifestWrite::Rotate {
                    number,
                    old: self.manifest_number,
                    snapshot: self.snapshot_of(&version),
                    written: None,
                }
            }
        };
        Ok(Install {
            env: self.env.clone(),
            edit,
            version,
            removed,
            previous,
            manifest,
        })
    }

    /// The last step of an install, under the lock again: on success the install's version
    /// becomes current and the files it deleted are marked obsolete; on failure (`written`)
    /// nothing changes in memory but the manifest, which the next install starts anew (it
    /// may end in a partial record).
    pub fn finish_install(
        &mut self,
        install: Install,
        written: Result<()>,
    ) -> Result<Arc<Version>> {
        let writer = match (written, install.manifest) {
            (Ok(()), ManifestWrite::Append(m)) => m,
            (
                Ok(()),
                ManifestWrite::Rotate {
                    number,
                    written: Some(m),
                    ..
                },
            ) => {
                self.manifest_number = number;
                m
            }
            (r, _) => {
                (self.log_number, self.last_sequence) = install.previous;
                self.manifest = None;
                return Err(r.err().unwrap_or_else(|| {
                    Error::InvalidArgument("an install finished before its write".into())
                }));
            }
        };
        self.manifest = Some(writer);
        self.current = Arc::new(install.version);
        // A file moved between levels (deleted and re-added) stays live.
        for f in install.removed {
            if !install.edit.added.iter().any(|a| a.number == f.number) {
                f.mark_obsolete();
            }
        }
        Ok(self.current.clone())
    }

    /// The version that results from applying `edit` to the current one.
    fn apply(&self, edit: &VersionEdit) -> Result<Version> {
        let mut v = Version::empty(self.layout.clone());
        for (level, files) in self.current.levels.iter().enumerate() {
            v.levels[level] = files
                .iter()
                .filter(|f| !edit.deleted.contains(&(level, f.number)))
                .cloned()
                .collect();
        }
        for f in &edit.added {
            // A trivially moved file keeps its FileMeta, so every version shares one
            // lifetime (and one being-compacted flag) for it.
            let moved = edit
                .deleted
                .iter()
                .find(|d| d.1 == f.number)
                .and_then(|&(l, n)| {
                    self.current
                        .levels
                        .get(l)?
                        .iter()
                        .find(|m| m.number == n)
                        .cloned()
                });
            let meta =
                moved.unwrap_or_else(|| Arc::new(FileMeta::new(f.clone(), self.env.clone())));
            v.levels[f.level].push(meta);
        }
        sort_and_check(&mut v).map_err(|why| {
            Error::InvalidArgument(format!(
                "internal error: version edit would break the LSM shape: {why}"
            ))
        })?;
        Ok(v)
    }

    /// Writes a new manifest holding a snapshot of the current state, then points CURRENT at it.
    /// A manifest's first record: every file of `version` and the counters.
    fn snapshot_of(&self, version: &Version) -> VersionEdit {
        VersionEdit {
            log_number: Some(self.log_number),
            next_file_number: Some(self.next_file_number),
            last_sequence: Some(self.last_sequence),
            deleted: Vec::new(),
            added: version
                .all_files()
                .map(|(level, f)| NewFile {
                    level,
                    ..f.info.clone()
                })
                .collect(),
        }
    }

    /// What a checkpoint copies: the current version (its files stay on disk while the
    /// caller holds it) and a manifest's first record describing it, numbered as a new
    /// store would need (returned with the manifest's number): no WAL (the log number is
    /// above every file), the sequence counter where the store's is.
    pub fn checkpoint_snapshot(&self) -> (Arc<Version>, VersionEdit, u64) {
        let version = self.current.clone();
        let mut edit = self.snapshot_of(&version);
        let manifest = self.next_file_number;
        edit.log_number = Some(manifest + 1);
        edit.next_file_number = Some(manifest + 2);
        (version, edit, manifest)
    }

    /// Starts a new manifest holding the current version (at open).
    fn write_new_manifest(&mut self) -> Result<()> {
        let number = self.new_file_number();
        let snapshot = self.snapshot_of(&self.current);
        let writer = write_manifest(&self.env, number, self.manifest_number, &snapshot)?;
        self.manifest_number = number;
        self.manifest = Some(writer);
        Ok(())
    }
}

/// An edit on its way into the manifest (see [`VersionSet::begin_install`]).
pub struct Install {
    env: Arc<Env>,
    edit: VersionEdit,
    version: Version,
    removed: Vec<Arc<FileMeta>>,
    /// The set's log number and last sequence before the edit, restored if it fails.
    previous: (u64, SeqNo),
    manifest: ManifestWrite,
}

/// How an install reaches the manifest.
enum ManifestWrite {
    /// One more record in the manifest being appended to.
    Append(LogWriter),
    /// A new manifest, `number`, whose first record `snapshot` already holds the edit;
    /// `old` is removed once `CURRENT` names the new one.
    Rotate {
        number: u64,
        old: u64,
        snapshot: VersionEdit,
        written: Option<LogWriter>,
    },
}

impl Install {
    /// The install's durable step, with no lock held: appends the edit to the manifest
    /// and syncs it, or writes a new manifest and points `CURRENT` at it.
    pub fn write(&mut self) -> Result<()> {
        sync_new_files_dirs(&self.env, &self.edit)?;
        match &mut self.manifest {
            ManifestWrite::Append(m) => {
                m.add_record(self.edit.encode())?;
                kill_point("manifest.edit_appended");
                m.sync()
            }
            ManifestWrite::Rotate {
                number,
                old,
                snapshot,
                written,
            } => {
                *written = Some(write_manifest(&self.env, *number, *old, snapshot)?);
                Ok(())
            }
        }
    }
}

/// Makes the directory entries of the files `edit` adds durable before the edit names
/// them: a table's own sync covers its bytes, not its name, and without this a power
/// cut could leave the manifest naming a table that is gone (invariant 2; found by the
/// power-cut stress test, issue 44). One sync per tier directory; a file moved between
/// levels, or linked by `Env::link` (which syncs), costs a redundant sync only.
fn sync_new_files_dirs(env: &Env, edit: &VersionEdit) -> Result<()> {
    if env.planted(PlantedBug::SkipNewFileDirSync) {
        return Ok(());
    }
    let mut tiers: Vec<Tier> = edit
        .added
        .iter()
        .filter(|f| !edit.deleted.iter().any(|d| d.1 == f.number))
        .map(|f| f.tier)
        .collect();
    if env.is_single_dir() {
        tiers.iter_mut().for_each(|t| *t = Tier::Fast);
    }
    tiers.sort();
    tiers.dedup();
    for tier in tiers {
        env.sync_dir(tier)?;
    }
    Ok(())
}

/// Writes manifest `number` holding `snapshot` and `CURRENT` naming it in `env`'s fast
/// directory (a checkpoint's).
pub fn write_checkpoint_manifest(env: &Env, number: u64, snapshot: &VersionEdit) -> Result<()> {
    write_manifest(env, number, 0, snapshot).map(drop)
}

/// Writes manifest `number` holding `snapshot`, points `CURRENT` at it and removes manifest
/// `old` (0: none). Returns the writer for later edits.
fn write_manifest(env: &Env, number: u64, old: u64, snapshot: &VersionEdit) -> Result<LogWriter> {
    let name = manifest_file_name(number);
    let file = env.create_writable(Tier::Fast, &name, IoCause::Manifest)?;
    let mut writer = LogWriter::new(file);
    writer.add_record(snapshot.encode())?;
    writer.sync()?;
    kill_point("manifest.created");
    let tmp = "CURRENT.tmp";
    let mut cur = env.create_writable(Tier::Fast, tmp, IoCause::Manifest)?;
    cur.append(format!("{name}\n").as_bytes())?;
    cur.sync()?;
    drop(cur);
    kill_point("manifest.current_written");
    env.rename(Tier::Fast, tmp, CURRENT)?;
    kill_point("manifest.switched");
    if old != 0 && old != number {
        env.remove(Tier::Fast, &manifest_file_name(old))?;
    }
    Ok(writer)
}

/// Sorts L0 newest first and deeper levels by key; checks that deeper levels are disjoint.
fn sort_and_check(v: &mut Version) -> std::result::Result<(), String> {
    for (level, files) in v.levels.iter_mut().enumerate() {
        if level == 0 {
            files.sort_by(|a, b| {
                (b.info.largest_seq, b.number).cmp(&(a.info.largest_seq, a.number))
            });
            continue;
        }
        files.sort_by(|a, b| compare_internal(a.smallest(), b.smallest()));
        for pair in files.windows(2) {
            if compare_internal(pair[0].largest(), pair[1].smallest()).is_ge() {
                return Err(format!(
                    "files {} and {} of level {level} overlap",
                    pair[0].number, pair[1].number
                ));
            }
        }
    }
    Ok(())
}

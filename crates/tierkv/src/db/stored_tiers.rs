//! The tier layout a store remembers: the `TIERS` file in the fast directory (format in
//! docs/FORMAT.md). A two-tier store records its slow directory, fast-disk budget, slow-tier
//! budget and slow device profile there, so that a reopen without them finds its tiers
//! (instead of reporting the slow tier's tables as missing), and a reopen with different
//! ones is refused before anything is read or written in the wrong place.
//!
//! Only the slow directory and the fast-disk budget are fixed once recorded: they decide
//! where files live and how the levels are sized. The slow budget and device profile
//! given with an explicit slow tier replace the recorded ones (a bench loads without the
//! device model and runs with it).

use crate::coding::{get_length_prefixed, get_varint64, masked_crc, put_fixed32, put_varint64};
use crate::env::DeviceProfile;
use crate::error::{Error, Result};
use crate::options::{Options, SlowTier};
use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// File name of the record, in the fast directory.
pub(crate) const TIERS: &str = "TIERS";
const TIERS_TMP: &str = "TIERS.tmp";
const MAGIC: &[u8; 8] = b"TKVTIER1";

/// The tier layout recorded in a two-tier store (see [`crate::Db::stored_tiers`]).
#[derive(Clone, Debug, PartialEq)]
pub struct StoredTiers {
    /// The slow tier's directory, absolute as it was given when recorded.
    pub slow_dir: PathBuf,
    /// The fast-disk budget ([`Options::fd_budget`]).
    pub fd_budget: u64,
    /// The slow tier's budget (`None`: unlimited).
    pub slow_budget: Option<u64>,
    /// The slow tier's device profile.
    pub slow_device: DeviceProfile,
}

impl StoredTiers {
    /// Reads the record of the store at `path`; `None` when it has none (a single-directory
    /// store, no store, or one created before tiers were recorded).
    pub fn read(path: &Path) -> Result<Option<StoredTiers>> {
        let file = path.join(TIERS);
        match std::fs::read(&file) {
            Ok(bytes) => decode(&bytes, &file).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => Ok(None),
            Err(e) => Err(Error::io(&file, e)),
        }
    }

    fn from_slow(slow: &SlowTier, fd_budget: u64, dir: PathBuf) -> StoredTiers {
        StoredTiers {
            slow_dir: dir,
            fd_budget,
            slow_budget: slow.budget,
            slow_device: slow.device,
        }
    }

    fn encode(&self) -> Vec<u8> {
        let mut body = Vec::new();
        put_varint64(&mut body, self.fd_budget);
        let dir = self.slow_dir.as_os_str().as_bytes();
        put_varint64(&mut body, dir.len() as u64);
        body.extend_from_slice(dir);
        put_varint64(&mut body, self.slow_budget.unwrap_or(0));
        let d = &self.slow_device;
        put_varint64(&mut body, d.iops.unwrap_or(0));
        put_varint64(&mut body, d.bandwidth.unwrap_or(0));
        put_varint64(&mut body, d.latency_us);
        let mut out = MAGIC.to_vec();
        put_fixed32(&mut out, body.len() as u32);
        out.extend_from_slice(&body);
        put_fixed32(&mut out, masked_crc(&body));
        out
    }

    /// Writes the record atomically: a temporary file, fsynced, renamed over `TIERS`, and
    /// the directory fsynced, so a crash leaves the old record or the new one.
    pub(super) fn write(&self, path: &Path) -> Result<()> {
        let tmp = path.join(TIERS_TMP);
        let mut f = std::fs::File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        f.write_all(&self.encode())
            .and_then(|()| f.sync_all())
            .map_err(|e| Error::io(&tmp, e))?;
        drop(f);
        let file = path.join(TIERS);
        std::fs::rename(&tmp, &file).map_err(|e| Error::io(&file, e))?;
        std::fs::File::open(path)
            .and_then(|d| d.sync_all())
            .map_err(|e| Error::io(path, e))
    }
}

fn decode(bytes: &[u8], file: &Path) -> Result<StoredTiers> {
    let bad = |offset: usize, why: &str| {
        Error::corruption(file, offset as u64, format!("damaged tier record: {why}"))
    };
    if bytes.len() < 16 || &bytes[..8] != MAGIC {
        return Err(bad(0, "bad magic or too short"));
    }
    let len = crate::coding::decode_fixed32(&bytes[8..12]) as usize;
    if bytes.len() != 12 + len + 4 {
        return Err(bad(8, "length does not match the file size"));
    }
    let body = &bytes[12..12 + len];
    if crate::coding::decode_fixed32(&bytes[12 + len..]) != masked_crc(body) {
        return Err(bad(12, "checksum mismatch"));
    }
    let mut pos = 0;
    let varint = |pos: &mut usize| {
        let (v, n) = get_varint64(&body[*pos..]).ok_or_else(|| bad(12 + *pos, "bad varint"))?;
        *pos += n;
        Ok::<u64, Error>(v)
    };
    let fd_budget = varint(&mut pos)?;
    let (dir, n) = get_length_prefixed(&body[pos..]).ok_or_else(|| bad(12 + pos, "bad dir"))?;
    let slow_dir = PathBuf::from(OsStr::from_bytes(dir));
    pos += n;
    let slow_budget = varint(&mut pos)?;
    let iops = varint(&mut pos)?;
    let bandwidth = varint(&mut pos)?;
    let latency_us = varint(&mut pos)?;
    if pos != body.len() || fd_budget == 0 || slow_dir.as_os_str().is_empty() {
        return Err(bad(12 + pos, "bad fields"));
    }
    Ok(StoredTiers {
        slow_dir,
        fd_budget,
        slow_budget: (slow_budget > 0).then_some(slow_budget),
        slow_device: DeviceProfile {
            iops: (iops > 0).then_some(iops),
            bandwidth: (bandwidth > 0).then_some(bandwidth),
            latency_us,
        },
    })
}

/// Completes `opts` from the record of the store at `path`: no slow tier (or no fast-disk
/// budget) takes the recorded one; a different slow directory or budget is refused naming
/// both values; a recorded slow directory that does not exist is
/// [`Error::SlowTierNotFound`]. Returns the record read.
pub(super) fn apply(path: &Path, opts: &mut Options) -> Result<Option<StoredTiers>> {
    let Some(st) = StoredTiers::read(path)? else {
        return Ok(None);
    };
    match opts.fd_budget {
        Some(fd) if fd != st.fd_budget => {
            return Err(Error::InvalidArgument(format!(
                "fast-disk budget {fd} differs from the budget {} recorded in the store at {} \
                 (its levels are sized to it; open without a budget to use the recorded one)",
                st.fd_budget,
                path.display()
            )))
        }
        _ => opts.fd_budget = Some(st.fd_budget),
    }
    match &opts.slow {
        Some(s) if !same_dir(&s.dir, &st.slow_dir) => {
            return Err(Error::InvalidArgument(format!(
                "slow-tier directory {} differs from the slow-tier directory {} recorded in \
                 the store at {} (open without one to use the recorded one; to move the slow \
                 tier, move its files, delete {} and open with the new directory)",
                s.dir.display(),
                st.slow_dir.display(),
                path.display(),
                path.join(TIERS).display()
            )))
        }
        Some(_) => {}
        None => {
            opts.slow = Some(SlowTier {
                dir: st.slow_dir.clone(),
                budget: st.slow_budget,
                device: st.slow_device,
            })
        }
    }
    if !st.slow_dir.is_dir() {
        return Err(Error::SlowTierNotFound {
            dir: st.slow_dir.clone(),
            store: path.to_path_buf(),
        });
    }
    Ok(Some(st))
}

/// Records the tiers `opts` uses in the store at `path` when they differ from `stored`
/// (the first two-tier open of a store, or a new slow budget or device profile).
pub(super) fn record(path: &Path, opts: &Options, stored: Option<&StoredTiers>) -> Result<()> {
    let (Some(slow), Some(fd)) = (&opts.slow, opts.fd_budget) else {
        return Ok(());
    };
    let dir = match stored {
        Some(st) => st.slow_dir.clone(),
        None => std::path::absolute(&slow.dir).map_err(|e| Error::io(&slow.dir, e))?,
    };
    let want = StoredTiers::from_slow(slow, fd, dir);
    if stored == Some(&want) {
        return Ok(());
    }
    want.write(path)
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => match (std::path::absolute(a), std::path::absolute(b)) {
            (Ok(a), Ok(b)) => a == b,
            _ => a == b,
        },
    }
}

/// True for a name a store (or its interrupted creation) leaves in its fast directory.
pub(super) fn is_store_file(name: &str) -> bool {
    matches!(
        name,
        "LOCK"
            | "CURRENT"
            | "CURRENT.tmp"
            | "ralt"
            | TIERS
            | TIERS_TMP
            | super::cached_keys::FILE
            | super::cached_keys::FILE_TMP
    ) || name.starts_with("MANIFEST-")
        || crate::version::parse_file_number(name, "log").is_some()
        || crate::version::parse_file_number(name, "sst").is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trips_and_damage_is_corruption() {
        let st = StoredTiers {
            slow_dir: "/mnt/slow/db".into(),
            fd_budget: 1 << 30,
            slow_budget: None,
            slow_device: DeviceProfile::gp3(),
        };
        let bytes = st.encode();
        assert_eq!(decode(&bytes, Path::new("TIERS")).unwrap(), st);
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x01;
            assert!(decode(&b, Path::new("TIERS")).unwrap_err().is_corruption());
        }
        assert!(decode(&bytes[..bytes.len() - 1], Path::new("TIERS")).is_err());
    }
}

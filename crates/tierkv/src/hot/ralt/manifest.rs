//! RALT's manifest (`ralt/MANIFEST`): a snapshot of everything RALT needs to resume, the
//! live files by level, the clock, the hot threshold, the limits and counters. Rewritten
//! whole and atomically (tmp file, fsync, rename, directory fsync) after every change of
//! the file set, so a crash leaves either the old or the new state.

use super::buffer::Clock;
use crate::coding::{decode_fixed32, get_varint64, masked_crc, put_fixed32, put_varint64};
use crate::env::{Env, IoCause, Tier};
use crate::error::{Error, Result};

pub(crate) const DIR: &str = "ralt";
pub(crate) const MANIFEST: &str = "ralt/MANIFEST";
const MANIFEST_TMP: &str = "ralt/MANIFEST.tmp";
const MAGIC: &[u8; 8] = b"RALTMAN1";

/// What eviction decides and maintenance keeps (`maint::Maint` holds the live copy under
/// the maintenance lock; the manifest saves it): the hot threshold, the limits and the
/// eviction counters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Thresholds {
    /// Records whose rank at `thr_tick` is at least this are hot.
    pub hot_rank: f64,
    pub thr_tick: u64,
    pub hot_limit: u64,
    pub phys_limit: u64,
    pub evictions: u64,
    pub evicted_keys: u64,
}

/// The persisted state.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct State {
    pub next_file: u64,
    pub clock: Clock,
    pub th: Thresholds,
    pub scoring: (u8, u8),
    /// Live files as (level, number); level 0 newest first.
    pub files: Vec<(u32, u64)>,
}

impl State {
    pub fn encode(&self) -> Vec<u8> {
        let mut body = Vec::new();
        let c = &self.clock;
        for v in [
            self.next_file,
            c.tick,
            c.tick_acc,
            c.epoch,
            c.epoch_acc,
            c.total,
            self.th.hot_rank.to_bits(),
            self.th.thr_tick,
            self.th.hot_limit,
            self.th.phys_limit,
            self.th.evictions,
            self.th.evicted_keys,
            self.scoring.0 as u64,
            self.scoring.1 as u64,
            self.files.len() as u64,
        ] {
            put_varint64(&mut body, v);
        }
        for &(level, number) in &self.files {
            put_varint64(&mut body, level as u64);
            put_varint64(&mut body, number);
        }
        frame(MAGIC, &body)
    }

    pub fn decode(data: &[u8], path: &std::path::Path) -> Result<State> {
        let bad = |off: usize, why: &str| {
            Error::corruption(path, off as u64, format!("RALT manifest: {why}"))
        };
        let body = unframe(data, MAGIC, path, "RALT manifest")?;
        let mut p = 0;
        let mut next = || -> Result<u64> {
            let (v, n) = get_varint64(&body[p..]).ok_or_else(|| bad(12 + p, "truncated field"))?;
            p += n;
            Ok(v)
        };
        let mut v = [0u64; 15];
        for x in &mut v {
            *x = next()?;
        }
        let [next_file, tick, tick_acc, epoch, epoch_acc, total, hot_rank, thr_tick, hot_limit, phys_limit, evictions, evicted_keys, s0, s1, nfiles] =
            v;
        if nfiles > body.len() as u64 || s0 > 255 || s1 > 255 {
            return Err(bad(12, "implausible field value"));
        }
        let mut files = Vec::with_capacity(nfiles as usize);
        for _ in 0..nfiles {
            let level = next()?;
            let number = next()?;
            if level > super::options::MAX_LEVEL as u64 || number >= next_file {
                return Err(bad(12, "bad file entry"));
            }
            files.push((level as u32, number));
        }
        if p != body.len() {
            return Err(bad(12 + p, "trailing bytes"));
        }
        let hot_rank = f64::from_bits(hot_rank);
        if hot_rank.is_nan() {
            return Err(bad(12, "hot threshold is not a number"));
        }
        Ok(State {
            next_file,
            clock: Clock {
                tick,
                tick_acc,
                epoch,
                epoch_acc,
                total,
            },
            th: Thresholds {
                hot_rank,
                thr_tick,
                hot_limit,
                phys_limit,
                evictions,
                evicted_keys,
            },
            scoring: (s0 as u8, s1 as u8),
            files,
        })
    }
}

/// Reads the manifest, `None` if RALT has never saved one.
pub(crate) fn read(env: &Env) -> Result<Option<State>> {
    if !env.exists(Tier::Fast, MANIFEST) {
        return Ok(None);
    }
    let data = env.read_all(Tier::Fast, MANIFEST, IoCause::Ralt)?;
    State::decode(&data, &env.path(Tier::Fast, MANIFEST)).map(Some)
}

/// Fsyncs the `ralt/` directory so file creations, renames and deletions in it are durable.
pub(crate) fn sync_ralt_dir(env: &Env) -> Result<()> {
    let dir = env.path(Tier::Fast, DIR);
    std::fs::File::open(&dir)
        .and_then(|f| f.sync_all())
        .map_err(|e| Error::io(&dir, e))
}

/// Replaces the manifest atomically.
pub(crate) fn write(env: &Env, state: &State) -> Result<()> {
    replace(env, MANIFEST, MANIFEST_TMP, &state.encode())
}

/// Replaces the file `name` of the fast tier by `data` atomically: written to `tmp`,
/// synced, renamed over `name`, the directory synced.
pub(crate) fn replace(env: &Env, name: &str, tmp: &str, data: &[u8]) -> Result<()> {
    let mut f = env.create_writable(Tier::Fast, tmp, IoCause::Ralt)?;
    f.append(data)?;
    f.sync()?;
    drop(f);
    env.rename(Tier::Fast, tmp, name)?;
    sync_ralt_dir(env)
}

/// The framing of RALT's state files: `magic` (8 bytes), the body's length (fixed32), the
/// body, its masked CRC-32C (fixed32).
pub(crate) fn frame(magic: &[u8; 8], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 16);
    out.extend_from_slice(magic);
    put_fixed32(&mut out, body.len() as u32);
    out.extend_from_slice(body);
    put_fixed32(&mut out, masked_crc(body));
    out
}

/// The body of a file framed by [`frame`] with `magic`; `what` names the file in errors.
pub(crate) fn unframe<'a>(
    data: &'a [u8],
    magic: &[u8; 8],
    path: &std::path::Path,
    what: &str,
) -> Result<&'a [u8]> {
    let bad = |off: u64, why: &str| Error::corruption(path, off, format!("{what}: {why}"));
    if data.len() < 16 || &data[..8] != magic {
        return Err(bad(0, "bad magic or truncated header"));
    }
    let len = decode_fixed32(&data[8..]) as usize;
    if data.len() != 12 + len + 4 {
        return Err(bad(8, "length does not match the file size"));
    }
    let body = &data[12..12 + len];
    if masked_crc(body) != decode_fixed32(&data[12 + len..]) {
        return Err(bad(12, "checksum mismatch"));
    }
    Ok(body)
}

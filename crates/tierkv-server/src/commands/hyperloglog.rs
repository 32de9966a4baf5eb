//! HyperLogLog: PFADD, PFCOUNT, PFMERGE, as Redis 7.0 computes them (the same hash,
//! MurmurHash64A with Redis's seed, 16,384 six-bit registers, and Redis's estimator, so a
//! count agrees with Redis's for the same elements), stored as a string value in Redis's
//! dense layout (`HYLL`, an encoding byte, three unused bytes, an eight-byte cached count
//! left marked invalid, then the 12,288 bytes of registers). Redis's sparse encoding of
//! small HyperLogLogs is not used: every one takes 12 KiB.
//!
//! A write is one read-modify-write of the string (`strings::modify_string`).

use super::hashes::replace_key;
use super::strings::modify_string;
use super::{CmdError, CmdResult, Ctx, Flow};
use crate::keyspace::{self as ks, Rec};
use bytes::Bytes;
use tierkv::ReadOptions;

const P: u32 = 14;
const REGISTERS: usize = 1 << P;
const BITS: usize = 6;
const MAX: u8 = (1 << BITS) - 1;
const Q: u32 = 64 - P;
const HEADER: usize = 16;
const DENSE: usize = HEADER + (REGISTERS * BITS).div_ceil(8);
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

fn not_hll() -> CmdError {
    CmdError("WRONGTYPE Key is not a valid HyperLogLog string value.".into())
}

/// Redis's MurmurHash64A (seed 0xadc83b19), little-endian reads as on x86.
fn murmur64a(key: &[u8]) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h: u64 = 0xadc8_3b19 ^ (key.len() as u64).wrapping_mul(M);
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        let mut k = u64::from_le_bytes(c.try_into().unwrap_or_default());
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        for (i, b) in rest.iter().enumerate() {
            h ^= u64::from(*b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element lands in and the run length it brings.
fn position(element: &[u8]) -> (usize, u8) {
    let hash = murmur64a(element);
    let index = (hash as usize) & (REGISTERS - 1);
    let rest = (hash >> P) | (1 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

fn get(regs: &[u8], i: usize) -> u8 {
    let byte = i * BITS / 8;
    let fb = (i * BITS) & 7;
    let b0 = u16::from(regs[byte]);
    let b1 = u16::from(regs.get(byte + 1).copied().unwrap_or(0));
    (((b0 >> fb) | (b1 << (8 - fb))) as u8) & MAX
}

fn set(regs: &mut [u8], i: usize, v: u8) {
    let byte = i * BITS / 8;
    let fb = (i * BITS) & 7;
    let v16 = u16::from(v);
    regs[byte] &= !((u16::from(MAX) << fb) as u8);
    regs[byte] |= (v16 << fb) as u8;
    if let Some(next) = regs.get_mut(byte + 1) {
        *next &= !((u16::from(MAX) >> (8 - fb)) as u8);
        *next |= (v16 >> (8 - fb)) as u8;
    }
}

/// A new, empty HyperLogLog value.
fn empty() -> Vec<u8> {
    let mut v = vec![0u8; DENSE];
    v[..4].copy_from_slice(b"HYLL");
    // The cached count is marked invalid (the high bit of its last byte).
    v[15] = 0x80;
    v
}

/// The registers of a stored value, or not a HyperLogLog.
fn registers(v: &[u8]) -> Result<&[u8], CmdError> {
    if v.len() != DENSE || &v[..4] != b"HYLL" || v[4] != 0 {
        return Err(not_hll());
    }
    Ok(&v[HEADER..])
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let (mut y, mut z) = (1.0, 1.0 - x);
    loop {
        x = x.sqrt();
        let prev = z;
        y *= 0.5;
        z -= (1.0 - x).powi(2) * y;
        if prev == z {
            return z / 3.0;
        }
    }
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let (mut y, mut z) = (1.0, x);
    loop {
        x *= x;
        let prev = z;
        z += x * y;
        y += y;
        if prev == z {
            return z;
        }
    }
}

/// Redis's estimator (Ertl's) over the register histogram.
fn count(regs: &[u8]) -> u64 {
    let mut histo = [0u32; 64];
    for i in 0..REGISTERS {
        histo[get(regs, i) as usize] += 1;
    }
    let m = REGISTERS as f64;
    let mut z = m * tau((m - f64::from(histo[Q as usize + 1])) / m);
    for j in (1..=Q as usize).rev() {
        z += f64::from(histo[j]);
        z *= 0.5;
    }
    z += m * sigma(f64::from(histo[0]) / m);
    (ALPHA_INF * m * m / z).round() as u64
}

/// The stored HyperLogLog of `key` (None: absent), an error for another type or a string
/// that is not one.
fn load(ctx: &Ctx<'_>, key: &[u8]) -> Result<Option<Vec<u8>>, CmdError> {
    let rec: Option<Rec> = ks::get(&ctx.shared.db(), key, &ReadOptions::new())?;
    match rec {
        None => Ok(None),
        Some(r) => {
            let s = r.string()?;
            registers(s)?;
            Ok(Some(s.to_vec()))
        }
    }
}

/// PFADD key [element ...]: 1 when a register changed (or the key was created), else 0.
pub(super) fn pfadd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let mut changed = false;
    let mut err = None;
    modify_string(ctx, &args[1], |cur| {
        err = None;
        changed = false;
        let mut v = match cur {
            Some(s) => {
                if let Err(e) = registers(s) {
                    err = Some(e);
                    return None;
                }
                s.to_vec()
            }
            None => {
                changed = true;
                empty()
            }
        };
        for e in &args[2..] {
            let (i, run) = position(e);
            let regs = &mut v[HEADER..];
            if get(regs, i) < run {
                set(regs, i, run);
                changed = true;
            }
        }
        v[15] |= 0x80;
        changed.then_some(v)
    })?;
    if let Some(e) = err {
        return Err(e);
    }
    ctx.out.int(changed as i64);
    Ok(Flow::Continue)
}

/// The union of the HyperLogLogs of `keys` (absent keys are empty).
fn union(ctx: &Ctx<'_>, keys: &[Bytes]) -> Result<Vec<u8>, CmdError> {
    let mut acc = empty();
    for k in keys {
        if let Some(v) = load(ctx, k)? {
            let (regs, into) = (registers(&v)?, &mut acc[HEADER..]);
            for i in 0..REGISTERS {
                let r = get(regs, i);
                if r > get(into, i) {
                    set(into, i, r);
                }
            }
        }
    }
    Ok(acc)
}

/// PFCOUNT key [key ...]: the estimated number of distinct elements of their union.
pub(super) fn pfcount(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let u = union(ctx, &args[1..])?;
    ctx.out.int(count(&u[HEADER..]) as i64);
    Ok(Flow::Continue)
}

/// PFMERGE destkey [sourcekey ...]: the union of the destination and the sources, stored
/// in the destination.
pub(super) fn pfmerge(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let u = union(ctx, &args[1..])?;
    replace_key(ctx, &args[1], |_, _| Some(ks::str_value(&u)))?;
    ctx.out.ok();
    Ok(Flow::Continue)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_round_trip_at_every_bit_position() {
        let mut regs = vec![0u8; DENSE - HEADER];
        for i in 0..REGISTERS {
            set(&mut regs, i, (i % 64) as u8);
        }
        for i in 0..REGISTERS {
            assert_eq!(get(&regs, i), (i % 64) as u8, "register {i}");
        }
    }

    #[test]
    fn counts_are_close_to_the_truth() {
        for n in [0u64, 1, 3, 100, 10_000, 200_000] {
            let mut v = empty();
            for e in 0..n {
                let (i, run) = position(e.to_string().as_bytes());
                let regs = &mut v[HEADER..];
                if get(regs, i) < run {
                    set(regs, i, run);
                }
            }
            let c = count(&v[HEADER..]) as f64;
            let err = if n == 0 {
                c
            } else {
                (c - n as f64).abs() / n as f64
            };
            assert!(err <= 0.02, "{n}: estimated {c}");
        }
    }
}

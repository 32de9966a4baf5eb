//! Bitmap commands on string values: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD and
//! BITFIELD_RO, with Redis 7.0's semantics (bit 0 is the most significant bit of byte 0; ranges in bytes or, with
//! `BIT`, in bits; negative indexes from the end). SETBIT is one read-modify-write of the
//! string (`strings::modify_string`), zero-padding it as SETRANGE does and bounded by the
//! largest value the server accepts; BITOP writes its result as one string, replacing the
//! destination whatever its type.

use super::hashes::replace_key;
use super::strings::{modify_string, TOO_BIG};
use super::{int_arg, CmdError, CmdResult, Ctx, Flow, SYNTAX};
use crate::keyspace::{self as ks, Rec};
use bytes::Bytes;
use tierkv::ReadOptions;

fn bit_offset(a: &[u8]) -> Result<u64, CmdError> {
    crate::resp::parse_int(a)
        .filter(|n| (0..1i64 << 32).contains(n))
        .map(|n| n as u64)
        .ok_or_else(|| CmdError::err("bit offset is not an integer or out of range"))
}

/// The string at `key` (empty when absent), WRONGTYPE for another type.
fn string_of(ctx: &Ctx<'_>, key: &[u8]) -> Result<Vec<u8>, CmdError> {
    let rec: Option<Rec> = ks::get(&ctx.shared.db(), key, &ReadOptions::new())?;
    Ok(match rec {
        Some(r) => r.string()?.to_vec(),
        None => Vec::new(),
    })
}

fn bit_at(s: &[u8], i: u64) -> u8 {
    s.get((i / 8) as usize)
        .map_or(0, |b| (b >> (7 - (i % 8))) & 1)
}

/// SETBIT key offset 0|1: the bit's old value.
pub(super) fn setbit(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let offset = bit_offset(&args[2])?;
    let on = match args[3].as_ref() {
        b"1" => true,
        b"0" => false,
        _ => return Err(CmdError::err("bit is not an integer or out of range")),
    };
    let byte = (offset / 8) as usize;
    if byte as u64 + 1 > ctx.shared.config.load().limits.max_bulk as u64 {
        return Err(CmdError::err(TOO_BIG));
    }
    let mut old = 0;
    modify_string(ctx, &args[1], |cur| {
        let mut v = cur.unwrap_or_default().to_vec();
        old = bit_at(&v, offset);
        if v.len() <= byte {
            v.resize(byte + 1, 0);
        }
        let mask = 1u8 << (7 - (offset % 8));
        if on {
            v[byte] |= mask;
        } else {
            v[byte] &= !mask;
        }
        // Setting a bit of an absent key to 0 still creates it (zeros), as in Redis.
        Some(v)
    })?;
    ctx.out.int(old as i64);
    Ok(Flow::Continue)
}

/// GETBIT key offset.
pub(super) fn getbit(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let offset = bit_offset(&args[2])?;
    let s = string_of(ctx, &args[1])?;
    ctx.out.int(bit_at(&s, offset) as i64);
    Ok(Flow::Continue)
}

/// A range's unit.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Unit {
    Byte,
    Bit,
}

fn unit_arg(a: Option<&Bytes>) -> Result<Unit, CmdError> {
    match a.map(|a| a.to_ascii_uppercase()) {
        None => Ok(Unit::Byte),
        Some(u) if u == b"BYTE" => Ok(Unit::Byte),
        Some(u) if u == b"BIT" => Ok(Unit::Bit),
        Some(_) => Err(CmdError::err(SYNTAX)),
    }
}

/// `[start, end]` of a string of `len` units, with Redis's negative indexes and clamping;
/// None when empty.
fn clamp(start: i64, end: i64, len: i64) -> Option<(i64, i64)> {
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let end = if end < 0 { (len + end).max(0) } else { end }.min(len - 1);
    (len > 0 && start <= end).then_some((start, end))
}

/// BITCOUNT key [start end [BYTE|BIT]].
pub(super) fn bitcount(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let range = match args.len() {
        2 => None,
        4 | 5 => Some((
            int_arg(&args[2])?,
            int_arg(&args[3])?,
            unit_arg(args.get(4))?,
        )),
        _ => return Err(CmdError::err(SYNTAX)),
    };
    let s = string_of(ctx, &args[1])?;
    let n: u64 = match range {
        None => s.iter().map(|b| b.count_ones() as u64).sum(),
        Some((start, end, Unit::Byte)) => match clamp(start, end, s.len() as i64) {
            Some((a, b)) => s[a as usize..=b as usize]
                .iter()
                .map(|b| b.count_ones() as u64)
                .sum(),
            None => 0,
        },
        Some((start, end, Unit::Bit)) => match clamp(start, end, s.len() as i64 * 8) {
            Some((a, b)) => (a as u64..=b as u64).map(|i| bit_at(&s, i) as u64).sum(),
            None => 0,
        },
    };
    ctx.out.int(n as i64);
    Ok(Flow::Continue)
}

/// BITPOS key 0|1 [start [end [BYTE|BIT]]]: the first position of the bit, or -1. Looking
/// for 0 without an end in a string of ones answers the first bit past the string, as
/// Redis does (the string is taken as padded with zeros to the right).
pub(super) fn bitpos(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let want = match args[2].as_ref() {
        b"1" => 1u8,
        b"0" => 0u8,
        _ => return Err(CmdError::err("The bit argument must be 1 or 0.")),
    };
    if args.len() > 6 {
        return Err(CmdError::err(SYNTAX));
    }
    let unit = unit_arg(args.get(5))?;
    let start = args.get(3).map(|a| int_arg(a)).transpose()?.unwrap_or(0);
    let end_given = args.len() >= 5;
    let s = string_of(ctx, &args[1])?;
    if s.is_empty() {
        ctx.out.int(if want == 1 { -1 } else { 0 });
        return Ok(Flow::Continue);
    }
    let bits = s.len() as i64 * 8;
    let len = if unit == Unit::Bit {
        bits
    } else {
        s.len() as i64
    };
    let end = if end_given {
        int_arg(&args[4])?
    } else {
        len - 1
    };
    let Some((a, b)) = clamp(start, end, len) else {
        ctx.out.int(-1);
        return Ok(Flow::Continue);
    };
    let (from, to) = match unit {
        Unit::Bit => (a as u64, b as u64),
        Unit::Byte => (a as u64 * 8, b as u64 * 8 + 7),
    };
    let found = (from..=to).find(|&i| bit_at(&s, i) == want);
    let pos = match found {
        Some(i) => i as i64,
        // No 0 in range without an end given: the first bit past the string.
        None if want == 0 && !end_given => (to + 1) as i64,
        None => -1,
    };
    ctx.out.int(pos);
    Ok(Flow::Continue)
}

/// BITOP AND|OR|XOR|NOT destkey key...: the result's length; stored as a string (the
/// shorter inputs padded with zeros), the destination deleted when it is empty.
pub(super) fn bitop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let op = args[1].to_ascii_uppercase();
    let srcs = &args[3..];
    if op == b"NOT" && srcs.len() != 1 {
        return Err(CmdError::err(
            "BITOP NOT must be called with a single source key.",
        ));
    }
    let mut inputs = Vec::with_capacity(srcs.len());
    for k in srcs {
        inputs.push(string_of(ctx, k)?);
    }
    let len = inputs.iter().map(Vec::len).max().unwrap_or(0);
    let at = |v: &Vec<u8>, i: usize| v.get(i).copied().unwrap_or(0);
    let result: Vec<u8> = match op.as_slice() {
        b"NOT" => inputs[0].iter().map(|b| !b).collect(),
        b"AND" => (0..len)
            .map(|i| inputs.iter().fold(0xff, |acc, v| acc & at(v, i)))
            .collect(),
        b"OR" => (0..len)
            .map(|i| inputs.iter().fold(0, |acc, v| acc | at(v, i)))
            .collect(),
        b"XOR" => (0..len)
            .map(|i| inputs.iter().fold(0, |acc, v| acc ^ at(v, i)))
            .collect(),
        _ => return Err(CmdError::err(SYNTAX)),
    };
    replace_key(ctx, &args[2], |_, _| {
        (!result.is_empty()).then(|| ks::str_value(&result))
    })?;
    ctx.out.int(result.len() as i64);
    Ok(Flow::Continue)
}

/// A BITFIELD integer type: signed or not, and its width in bits.
#[derive(Clone, Copy)]
struct Field {
    signed: bool,
    bits: u32,
}

impl Field {
    fn parse(a: &[u8]) -> Result<Field, CmdError> {
        let bad = || {
            CmdError::err(
                "Invalid bitfield type. Use something like i16 u8. Note that u64 is not \
                 supported but i64 is.",
            )
        };
        let (signed, digits) = match a.first().map(u8::to_ascii_lowercase) {
            Some(b'i') => (true, &a[1..]),
            Some(b'u') => (false, &a[1..]),
            _ => return Err(bad()),
        };
        let bits: u32 = std::str::from_utf8(digits)
            .ok()
            .and_then(|d| d.parse().ok())
            .ok_or_else(bad)?;
        if bits == 0 || bits > 64 || (!signed && bits == 64) {
            return Err(bad());
        }
        Ok(Field { signed, bits })
    }

    /// An offset argument: bits, or with `#` a multiple of the type's width.
    fn offset(self, a: &[u8]) -> Result<u64, CmdError> {
        let bad = || CmdError::err("bit offset is not an integer or out of range");
        let (mul, digits) = match a.strip_prefix(b"#") {
            Some(rest) => (u64::from(self.bits), rest),
            None => (1, a),
        };
        let n = crate::resp::parse_int(digits)
            .filter(|n| *n >= 0)
            .ok_or_else(bad)? as u64;
        n.checked_mul(mul)
            .filter(|o| o.saturating_add(u64::from(self.bits)) <= 1 << 32)
            .ok_or_else(bad)
    }

    fn min(self) -> i128 {
        if self.signed {
            -(1i128 << (self.bits - 1))
        } else {
            0
        }
    }

    fn max(self) -> i128 {
        if self.signed {
            (1i128 << (self.bits - 1)) - 1
        } else {
            (1i128 << self.bits) - 1
        }
    }

    /// The field's value from its raw bits.
    fn value(self, raw: u64) -> i128 {
        if self.signed && self.bits < 64 && raw >> (self.bits - 1) & 1 == 1 {
            raw as i128 - (1i128 << self.bits)
        } else if self.signed && self.bits == 64 {
            raw as i64 as i128
        } else {
            raw as i128
        }
    }
}

fn read_bits(s: &[u8], offset: u64, bits: u32) -> u64 {
    (0..u64::from(bits)).fold(0u64, |acc, i| (acc << 1) | u64::from(bit_at(s, offset + i)))
}

fn write_bits(v: &mut Vec<u8>, offset: u64, bits: u32, raw: u64) {
    let end_byte = ((offset + u64::from(bits) - 1) / 8) as usize;
    if v.len() <= end_byte {
        v.resize(end_byte + 1, 0);
    }
    for i in 0..u64::from(bits) {
        let bit = (raw >> (u64::from(bits) - 1 - i)) & 1;
        let at = offset + i;
        let mask = 1u8 << (7 - (at % 8));
        let byte = &mut v[(at / 8) as usize];
        if bit == 1 {
            *byte |= mask;
        } else {
            *byte &= !mask;
        }
    }
}

/// What BITFIELD does when a SET or INCRBY leaves the type's range.
#[derive(Clone, Copy)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

/// One BITFIELD operation.
enum Op {
    Get(Field, u64),
    Set(Field, u64, i128, Overflow),
    Incr(Field, u64, i128, Overflow),
}

fn parse_ops(args: &[Bytes], read_only: bool) -> Result<Vec<Op>, CmdError> {
    let mut ops = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut i = 2;
    let need = |i: usize, n: usize| {
        if i + n < args.len() {
            Ok(())
        } else {
            Err(CmdError::err(SYNTAX))
        }
    };
    while i < args.len() {
        match args[i].to_ascii_uppercase().as_slice() {
            b"GET" => {
                need(i, 2)?;
                let f = Field::parse(&args[i + 1])?;
                ops.push(Op::Get(f, f.offset(&args[i + 2])?));
                i += 3;
            }
            b"SET" | b"INCRBY" if !read_only => {
                need(i, 3)?;
                let f = Field::parse(&args[i + 1])?;
                let offset = f.offset(&args[i + 2])?;
                let n = i128::from(int_arg(&args[i + 3])?);
                ops.push(if args[i].eq_ignore_ascii_case(b"set") {
                    Op::Set(f, offset, n, overflow)
                } else {
                    Op::Incr(f, offset, n, overflow)
                });
                i += 4;
            }
            b"OVERFLOW" if !read_only => {
                need(i, 1)?;
                overflow = match args[i + 1].to_ascii_uppercase().as_slice() {
                    b"WRAP" => Overflow::Wrap,
                    b"SAT" => Overflow::Sat,
                    b"FAIL" => Overflow::Fail,
                    _ => return Err(CmdError::err("Invalid OVERFLOW type specified")),
                };
                i += 2;
            }
            b"SET" | b"INCRBY" | b"OVERFLOW" => {
                return Err(CmdError::err(
                    "BITFIELD_RO only supports the GET subcommand",
                ))
            }
            _ => return Err(CmdError::err(SYNTAX)),
        }
    }
    Ok(ops)
}

/// `n` brought into `f`'s range by `overflow`; None when FAIL refuses it.
fn fit(f: Field, n: i128, overflow: Overflow) -> Option<i128> {
    if (f.min()..=f.max()).contains(&n) {
        return Some(n);
    }
    match overflow {
        Overflow::Fail => None,
        Overflow::Sat => Some(n.clamp(f.min(), f.max())),
        Overflow::Wrap => {
            let m = 1i128 << f.bits;
            let wrapped = n.rem_euclid(m);
            Some(if f.signed && wrapped > f.max() {
                wrapped - m
            } else {
                wrapped
            })
        }
    }
}

/// BITFIELD key [GET type offset] [SET type offset value] [INCRBY type offset increment]
/// [OVERFLOW WRAP|SAT|FAIL] ... and BITFIELD_RO key [GET type offset] ...: one reply per
/// GET, SET (the old value) and INCRBY (the new one; nil where OVERFLOW FAIL refused),
/// the writes applied in one read-modify-write.
pub(super) fn bitfield(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let read_only = args[0].eq_ignore_ascii_case(b"bitfield_ro");
    let ops = parse_ops(args, read_only)?;
    let max = ctx.shared.config.load().limits.max_bulk as u64;
    let writes = ops.iter().any(|o| !matches!(o, Op::Get(..)));
    for o in &ops {
        if let Op::Set(f, off, ..) | Op::Incr(f, off, ..) = o {
            if (off + u64::from(f.bits)).div_ceil(8) > max {
                return Err(CmdError::err(TOO_BIG));
            }
        }
    }
    let mut replies: Vec<Option<i128>> = Vec::new();
    let mut run = |cur: &[u8]| -> Option<Vec<u8>> {
        replies.clear();
        let mut v = cur.to_vec();
        let mut changed = false;
        for o in &ops {
            match *o {
                Op::Get(f, off) => replies.push(Some(f.value(read_bits(&v, off, f.bits)))),
                Op::Set(f, off, n, ovf) => {
                    let old = f.value(read_bits(&v, off, f.bits));
                    match fit(f, n, ovf) {
                        Some(n) => {
                            write_bits(&mut v, off, f.bits, n as u64);
                            changed = true;
                            replies.push(Some(old));
                        }
                        None => replies.push(None),
                    }
                }
                Op::Incr(f, off, n, ovf) => {
                    let old = f.value(read_bits(&v, off, f.bits));
                    match fit(f, old + n, ovf) {
                        Some(new) => {
                            write_bits(&mut v, off, f.bits, new as u64);
                            changed = true;
                            replies.push(Some(new));
                        }
                        None => replies.push(None),
                    }
                }
            }
        }
        changed.then_some(v)
    };
    if writes {
        modify_string(ctx, &args[1], |cur| run(cur.unwrap_or_default()))?;
    } else {
        let s = string_of(ctx, &args[1])?;
        run(&s);
    }
    ctx.out.array(replies.len());
    for r in replies {
        match r {
            Some(n) => ctx.out.int(n as i64),
            None => ctx.out.null(),
        }
    }
    Ok(Flow::Continue)
}

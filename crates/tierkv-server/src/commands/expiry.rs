//! Key expiry commands: EXPIRE/PEXPIRE/EXPIREAT/PEXPIREAT (NX, XX, GT, LT), TTL, PTTL,
//! EXPIRETIME, PEXPIRETIME, PERSIST, and the expiry-option parsing SET, SETEX, PSETEX and
//! GETEX share.
//!
//! A key's deadline is the engine deadline of its top-level record (for a hash, its
//! metadata record: the fields become unreachable with it). The engine hides a record past
//! its deadline from every read, so an expired key is absent to every command at once.
//! Time is the store's clock (`tierkv::Options::clock`), in milliseconds since the epoch.

use super::{CmdError, CmdResult, Ctx, Flow};
use crate::keyspace as ks;
use crate::state::Shared;
use bytes::Bytes;
use tierkv::WriteBatch;

/// The current time of the store's clock, in milliseconds since the epoch.
pub(crate) fn now_ms(shared: &Shared) -> u64 {
    shared.db().options().clock.now_ms()
}

/// An expiry option of SET / GETEX.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ExpireOpt {
    Ex,
    Px,
    ExAt,
    PxAt,
}

impl ExpireOpt {
    /// The option an upper-cased argument names.
    pub fn parse(upper: &[u8]) -> Option<ExpireOpt> {
        Some(match upper {
            b"EX" => ExpireOpt::Ex,
            b"PX" => ExpireOpt::Px,
            b"EXAT" => ExpireOpt::ExAt,
            b"PXAT" => ExpireOpt::PxAt,
            _ => return None,
        })
    }
}

fn invalid(cmd: &str) -> CmdError {
    CmdError::err(format!("invalid expire time in '{cmd}' command"))
}

/// The deadline (ms) an expiry option's argument gives, with Redis's errors: not an integer,
/// zero or negative, or past the largest time Redis represents.
pub(crate) fn parse_expire_option(
    opt: ExpireOpt,
    arg: &[u8],
    now: u64,
    cmd: &str,
) -> Result<u64, CmdError> {
    let v = super::int_arg(arg)?;
    if v <= 0 {
        return Err(invalid(cmd));
    }
    let ms = match opt {
        ExpireOpt::Ex | ExpireOpt::ExAt => v.checked_mul(1000).ok_or_else(|| invalid(cmd))?,
        ExpireOpt::Px | ExpireOpt::PxAt => v,
    };
    let at = match opt {
        ExpireOpt::Ex | ExpireOpt::Px => ms.checked_add(now as i64).ok_or_else(|| invalid(cmd))?,
        ExpireOpt::ExAt | ExpireOpt::PxAt => ms,
    };
    Ok(at as u64)
}

/// EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT with NX | XX | GT | LT.
pub(super) fn expire(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let name = args[0].to_ascii_lowercase();
    let (seconds, relative) = match name.as_slice() {
        b"expire" => (true, true),
        b"pexpire" => (false, true),
        b"expireat" => (true, false),
        _ => (false, false),
    };
    let cmd = String::from_utf8_lossy(&name).into_owned();
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for a in &args[3..] {
        match a.to_ascii_uppercase().as_slice() {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"GT" => gt = true,
            b"LT" => lt = true,
            _ => {
                return Err(CmdError::err(format!(
                    "Unsupported option {}",
                    super::quote_arg(a)
                )))
            }
        }
    }
    if nx && (xx || gt || lt) {
        return Err(CmdError::err(
            "NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if gt && lt {
        return Err(CmdError::err(
            "GT and LT options at the same time are not compatible",
        ));
    }
    let mut when = super::int_arg(&args[2])?;
    if seconds {
        when = when.checked_mul(1000).ok_or_else(|| invalid(&cmd))?;
    }
    let now = now_ms(ctx.shared);
    if relative {
        when = when.checked_add(now as i64).ok_or_else(|| invalid(&cmd))?;
    }
    let key = &args[1];
    let mk = ks::meta_key(key);
    let db = &ctx.shared.db();
    let wopts = ctx.wopts();
    let mut set = false;
    let mut leftover = None;
    let mut err = None;
    ks::transact(db, &wopts, &[&mk], |cur| {
        set = false;
        leftover = None;
        err = None;
        let r = cur[0].as_ref()?;
        let current = r.deadline.map(|d| d as i64);
        let refused = (nx && current.is_some())
            || (xx && current.is_none())
            || (gt && current.is_none_or(|c| when <= c))
            || (lt && current.is_some_and(|c| when >= c));
        if refused {
            return None;
        }
        set = true;
        let mut b = WriteBatch::new();
        if when <= now as i64 {
            // Already past: the key is deleted now, as in Redis.
            match ks::delete_value(db, &mut b, key, r) {
                Ok(l) => leftover = l,
                Err(e) => {
                    err = Some(e);
                    return None;
                }
            }
        } else {
            ks::put(&mut b, &mk, &r.raw, Some(when as u64));
        }
        Some(b)
    })?;
    if let Some(e) = err {
        return Err(e);
    }
    if let Some(v) = leftover {
        ks::drop_fields(db, &wopts, key, v)?;
    }
    ctx.out.int(set as i64);
    Ok(Flow::Continue)
}

/// TTL, PTTL, EXPIRETIME, PEXPIRETIME: -2 for a missing key, -1 for one without expiry.
pub(super) fn ttl(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let name = args[0].to_ascii_lowercase();
    let rec = ks::get(&ctx.shared.db(), &args[1], &tierkv::ReadOptions::new())?;
    let Some(rec) = rec else {
        ctx.out.int(-2);
        return Ok(Flow::Continue);
    };
    let Some(deadline) = rec.deadline else {
        ctx.out.int(-1);
        return Ok(Flow::Continue);
    };
    let deadline = deadline.min(i64::MAX as u64) as i64;
    let left = deadline.saturating_sub(now_ms(ctx.shared) as i64).max(0);
    let n = match name.as_slice() {
        b"ttl" => (left + 500) / 1000,
        b"pttl" => left,
        b"expiretime" => deadline / 1000,
        _ => deadline,
    };
    ctx.out.int(n);
    Ok(Flow::Continue)
}

/// PERSIST: 1 when a deadline was removed.
pub(super) fn persist(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let mk = ks::meta_key(&args[1]);
    let mut done = false;
    ks::transact(&ctx.shared.db(), &ctx.wopts(), &[&mk], |cur| {
        done = false;
        let r = cur[0].as_ref()?;
        r.deadline?;
        done = true;
        let mut b = WriteBatch::new();
        ks::put(&mut b, &mk, &r.raw, None);
        Some(b)
    })?;
    ctx.out.int(done as i64);
    Ok(Flow::Continue)
}

#[cfg(test)]
mod tests {
    use super::super::NOT_INT;
    use super::*;

    #[test]
    fn expire_options_follow_redis() {
        let now = 1_000_000;
        let p = |o, a: &str| parse_expire_option(o, a.as_bytes(), now, "set").map_err(|e| e.0);
        assert_eq!(p(ExpireOpt::Ex, "10"), Ok(now + 10_000));
        assert_eq!(p(ExpireOpt::Px, "10"), Ok(now + 10));
        assert_eq!(p(ExpireOpt::ExAt, "5"), Ok(5000));
        assert_eq!(p(ExpireOpt::PxAt, "5"), Ok(5));
        let invalid = Err("ERR invalid expire time in 'set' command".to_string());
        assert_eq!(p(ExpireOpt::Ex, "0"), invalid);
        assert_eq!(p(ExpireOpt::Px, "-1"), invalid);
        assert_eq!(p(ExpireOpt::Ex, "9223372036854775807"), invalid);
        assert_eq!(p(ExpireOpt::Px, "9223372036854775807"), invalid);
        assert_eq!(p(ExpireOpt::Ex, "x"), Err(format!("ERR {NOT_INT}")));
    }
}

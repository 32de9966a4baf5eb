//! Merge operators: associative updates (counters, appends) expressed as an operand that is
//! combined with the current value, in the style of RocksDB's merge operator.
//!
//! `Db::merge` applies the operator atomically through read-modify-write (`Db::update`),
//! so the result is visible at once and concurrent merges never lose an update; operands
//! are not stored unmerged. Owns the operator trait and the built-in operators only.

use std::fmt::Debug;

/// Combines an operand with the current value of a key.
pub trait MergeOperator: Send + Sync + Debug {
    /// A stable name, for logs and stats.
    fn name(&self) -> &'static str;

    /// The new value of `key` given its current value (`None`: absent) and `operand`.
    /// `Err(reason)` rejects the merge (e.g. a value that is not a number) and leaves the
    /// key unchanged; the reason reaches the caller as an `InvalidArgument` error.
    fn merge(&self, key: &[u8], existing: Option<&[u8]>, operand: &[u8])
        -> Result<Vec<u8>, String>;
}

/// Adds signed 64-bit integers kept as decimal text (`"42"`), the way Redis's INCRBY does:
/// an absent key counts as 0; an operand or value that is not an integer, or an overflow,
/// is rejected.
#[derive(Clone, Copy, Debug, Default)]
pub struct AddI64;

fn parse_i64(what: &str, bytes: &[u8]) -> Result<i64, String> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or_else(|| format!("{what} is not a decimal 64-bit integer"))
}

impl MergeOperator for AddI64 {
    fn name(&self) -> &'static str {
        "add-i64"
    }

    fn merge(
        &self,
        _key: &[u8],
        existing: Option<&[u8]>,
        operand: &[u8],
    ) -> Result<Vec<u8>, String> {
        let base = existing.map_or(Ok(0), |v| parse_i64("the current value", v))?;
        let delta = parse_i64("the operand", operand)?;
        let sum = base
            .checked_add(delta)
            .ok_or_else(|| "the sum overflows a 64-bit integer".to_string())?;
        Ok(sum.to_string().into_bytes())
    }
}

/// Appends the operand to the current value (an absent key starts empty).
#[derive(Clone, Copy, Debug, Default)]
pub struct Append;

impl MergeOperator for Append {
    fn name(&self) -> &'static str {
        "append"
    }

    fn merge(
        &self,
        _key: &[u8],
        existing: Option<&[u8]>,
        operand: &[u8],
    ) -> Result<Vec<u8>, String> {
        let mut v = existing.unwrap_or_default().to_vec();
        v.extend_from_slice(operand);
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_i64_adds_and_rejects_garbage_and_overflow() {
        let op = AddI64;
        assert_eq!(op.merge(b"k", None, b"5").unwrap(), b"5");
        assert_eq!(op.merge(b"k", Some(b"40"), b"2").unwrap(), b"42");
        assert_eq!(op.merge(b"k", Some(b"1"), b"-3").unwrap(), b"-2");
        assert!(op.merge(b"k", Some(b"x"), b"1").is_err());
        assert!(op.merge(b"k", None, b"1.5").is_err());
        let max = i64::MAX.to_string();
        assert!(op.merge(b"k", Some(max.as_bytes()), b"1").is_err());
    }

    #[test]
    fn append_concatenates() {
        assert_eq!(Append.merge(b"k", Some(b"ab"), b"cd").unwrap(), b"abcd");
        assert_eq!(Append.merge(b"k", None, b"cd").unwrap(), b"cd");
    }
}

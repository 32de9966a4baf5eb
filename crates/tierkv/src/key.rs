//! Internal keys: a user key tagged with a sequence number and a kind.
//!
//! Encoding (used in memtables, SSTables and iterators): `user_key ++ trailer`, where the
//! trailer is 8 little-endian bytes of `(seq << 8) | kind`. Ordering: user key ascending
//! (bytewise), then trailer **descending**, so the newest version of a key comes first
//! (docs/DESIGN.md invariant 1 rests on it). This module owns the encoding and the order only.

use std::cmp::Ordering;

/// Sequence number of a write. Only the low 56 bits are usable.
pub type SeqNo = u64;

/// Largest sequence number that fits the trailer.
pub const MAX_SEQ: SeqNo = (1 << 56) - 1;

/// Bytes of the trailer appended to every user key.
pub const TRAILER_LEN: usize = 8;

/// What an internal entry records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ValueKind {
    /// A tombstone: the key was deleted at this sequence number.
    Delete = 0,
    /// A value.
    Value = 1,
    /// A value with a deadline: the stored value is `deadline: u64 LE ++ value` (see
    /// `crate::expiry`). Reads as a deletion once the deadline has passed.
    Expiring = 2,
}

impl ValueKind {
    /// Decodes a kind byte; `None` for an unknown kind (a corruption).
    pub fn from_u8(b: u8) -> Option<ValueKind> {
        match b {
            0 => Some(ValueKind::Delete),
            1 => Some(ValueKind::Value),
            2 => Some(ValueKind::Expiring),
            _ => None,
        }
    }
}

/// The kind byte used to build seek keys: the largest kind, so that a seek key with
/// sequence `s` sorts before every entry of the same user key with sequence `<= s`.
pub(crate) const KIND_FOR_SEEK: u8 = ValueKind::Expiring as u8;

/// Packs a sequence number and kind into a trailer value.
pub fn pack_trailer(seq: SeqNo, kind: ValueKind) -> u64 {
    debug_assert!(seq <= MAX_SEQ);
    (seq << 8) | kind as u64
}

/// Builds an internal key.
pub fn make_internal_key(user_key: &[u8], seq: SeqNo, kind: ValueKind) -> Vec<u8> {
    let mut k = Vec::with_capacity(user_key.len() + TRAILER_LEN);
    append_internal_key(&mut k, user_key, seq, kind);
    k
}

/// Appends an internal key to `dst`.
pub fn append_internal_key(dst: &mut Vec<u8>, user_key: &[u8], seq: SeqNo, kind: ValueKind) {
    dst.extend_from_slice(user_key);
    dst.extend_from_slice(&pack_trailer(seq, kind).to_le_bytes());
}

/// The internal key to seek to for reading `user_key` as of snapshot `seq`: the first entry
/// at or after it is the newest version of `user_key` visible at `seq` (if any).
pub fn seek_key(user_key: &[u8], seq: SeqNo) -> Vec<u8> {
    let mut k = Vec::with_capacity(user_key.len() + TRAILER_LEN);
    k.extend_from_slice(user_key);
    k.extend_from_slice(&((seq << 8) | KIND_FOR_SEEK as u64).to_le_bytes());
    k
}

/// A decoded view of an internal key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParsedKey<'a> {
    /// The user key.
    pub user_key: &'a [u8],
    /// Sequence number of the write.
    pub seq: SeqNo,
    /// Value, expiring value or tombstone.
    pub kind: ValueKind,
}

/// Parses an internal key; `None` if it is shorter than a trailer or its kind is unknown.
pub fn parse_internal_key(ikey: &[u8]) -> Option<ParsedKey<'_>> {
    if ikey.len() < TRAILER_LEN {
        return None;
    }
    let split = ikey.len() - TRAILER_LEN;
    let trailer = u64::from_le_bytes(ikey[split..].try_into().ok()?);
    Some(ParsedKey {
        user_key: &ikey[..split],
        seq: trailer >> 8,
        kind: ValueKind::from_u8(trailer as u8)?,
    })
}

/// The user-key part of an internal key (the whole slice if it is too short to hold a trailer).
pub fn user_key(ikey: &[u8]) -> &[u8] {
    &ikey[..ikey.len().saturating_sub(TRAILER_LEN)]
}

/// The trailer (`seq << 8 | kind`) of an encoded internal key; 0 for a key shorter than one.
pub(crate) fn trailer(ikey: &[u8]) -> u64 {
    if ikey.len() < TRAILER_LEN {
        return 0;
    }
    let split = ikey.len() - TRAILER_LEN;
    crate::coding::decode_fixed64(&ikey[split..])
}

/// The total order on internal keys: user key ascending, then trailer descending.
pub fn compare_internal(a: &[u8], b: &[u8]) -> Ordering {
    match compare_user_keys(user_key(a), user_key(b)) {
        Ordering::Equal => trailer(b).cmp(&trailer(a)),
        o => o,
    }
}

/// Bytewise order of two user keys (`a.cmp(b)`), with the first 8 bytes of each compared
/// as one big-endian integer: the skiplist and block searches compare keys millions of
/// times a second, and for short keys a `memcmp` call costs more than the comparison.
///
/// Why it is the same order: each key's first 8 bytes, zero-padded, are read as a
/// big-endian integer. If the integers differ, so do the keys at the first differing
/// byte, and it decides both orders the same way (a padding zero against a real byte
/// only differs when the byte is not zero, and then the shorter key, a prefix up to
/// there, sorts first either way). If they are equal and either key has at most 8
/// bytes, that key is a prefix of the other, so the shorter sorts first; otherwise the
/// first 8 bytes are equal and the rests decide.
#[inline]
pub fn compare_user_keys(a: &[u8], b: &[u8]) -> Ordering {
    match prefix_u64(a).cmp(&prefix_u64(b)) {
        Ordering::Equal if a.len() <= 8 || b.len() <= 8 => a.len().cmp(&b.len()),
        Ordering::Equal => a[8..].cmp(&b[8..]),
        o => o,
    }
}

/// The first 8 bytes of `s`, zero-padded, as a big-endian integer.
#[inline]
fn prefix_u64(s: &[u8]) -> u64 {
    if let Some(head) = s.first_chunk::<8>() {
        return u64::from_be_bytes(*head);
    }
    let mut buf = [0u8; 8];
    buf[..s.len()].copy_from_slice(s);
    u64::from_be_bytes(buf)
}

/// An owned internal key whose `Ord` is [`compare_internal`]; used as the memtable's key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InternalKey(pub bytes::Bytes);

impl InternalKey {
    /// Builds an owned internal key.
    pub fn new(user_key: &[u8], seq: SeqNo, kind: ValueKind) -> Self {
        InternalKey(make_internal_key(user_key, seq, kind).into())
    }

    /// The encoded bytes.
    pub fn encoded(&self) -> &[u8] {
        &self.0
    }

    /// The user-key part.
    pub fn user_key(&self) -> &[u8] {
        user_key(&self.0)
    }
}

impl Ord for InternalKey {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_internal(&self.0, &other.0)
    }
}

impl PartialOrd for InternalKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A byte string held inline when short (up to [`ShortBytes::INLINE`] bytes) and on the
/// heap otherwise: a skiplist node holding it inline needs no second allocation, and a
/// search comparing it reads the node's own memory instead of following a pointer to a
/// separate heap block. The inline form is 32 bytes with its length and tag, as a `Bytes`.
#[derive(Clone, Debug)]
pub(crate) enum ShortBytes {
    Inline {
        len: u8,
        buf: [u8; ShortBytes::INLINE],
    },
    Heap(Box<[u8]>),
}

impl ShortBytes {
    /// The longest string held inline.
    pub(crate) const INLINE: usize = 30;

    /// A copy of `bytes`.
    pub(crate) fn new(bytes: &[u8]) -> Self {
        Self::concat(bytes, &[])
    }

    /// A copy of `a` followed by `b`.
    pub(crate) fn concat(a: &[u8], b: &[u8]) -> Self {
        let len = a.len() + b.len();
        if len <= Self::INLINE {
            let mut buf = [0u8; Self::INLINE];
            buf[..a.len()].copy_from_slice(a);
            buf[a.len()..len].copy_from_slice(b);
            // `len <= INLINE` (30) fits a byte.
            ShortBytes::Inline {
                len: len as u8,
                buf,
            }
        } else {
            let mut v = Vec::with_capacity(len);
            v.extend_from_slice(a);
            v.extend_from_slice(b);
            ShortBytes::Heap(v.into_boxed_slice())
        }
    }

    /// The bytes.
    #[inline]
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            ShortBytes::Inline { len, buf } => &buf[..*len as usize],
            ShortBytes::Heap(b) => b,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `compare_user_keys` is exactly the bytewise order, on keys built to hit its cases:
    /// lengths around 8, shared prefixes, zero bytes (padding's value) and 0xff.
    #[test]
    fn the_short_key_comparison_is_the_bytewise_order() {
        let alphabet = [0u8, 1, b'a', 0x7f, 0x80, 0xff];
        let mut keys: Vec<Vec<u8>> = vec![Vec::new()];
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..3000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let len = (state % 13) as usize;
            let key: Vec<u8> = (0..len)
                .map(|i| alphabet[((state >> (i * 3 + 4)) % alphabet.len() as u64) as usize])
                .collect();
            keys.push(key);
        }
        // Near misses of each other: every prefix of a few keys, and keys with a zero
        // byte appended (equal once zero-padded).
        for k in keys.clone().iter().take(200) {
            for n in 0..k.len() {
                keys.push(k[..n].to_vec());
            }
            let mut z = k.clone();
            z.push(0);
            keys.push(z);
        }
        for a in keys.iter().step_by(7) {
            for b in &keys {
                assert_eq!(
                    compare_user_keys(a, b),
                    a.as_slice().cmp(b.as_slice()),
                    "{a:?} vs {b:?}"
                );
            }
        }
    }

    #[test]
    fn newer_versions_sort_first() {
        let a1 = make_internal_key(b"a", 1, ValueKind::Value);
        let a2 = make_internal_key(b"a", 2, ValueKind::Value);
        let b1 = make_internal_key(b"b", 1, ValueKind::Value);
        assert_eq!(compare_internal(&a2, &a1), Ordering::Less);
        assert_eq!(compare_internal(&a1, &b1), Ordering::Less);
        // "a\xff" with a trailer must still sort after "a" with any trailer.
        let aff = make_internal_key(b"a\xff", 0, ValueKind::Delete);
        assert_eq!(compare_internal(&a1, &aff), Ordering::Less);
    }

    #[test]
    fn seek_key_precedes_visible_versions() {
        let seek = seek_key(b"k", 5);
        for seq in 0..=5 {
            for kind in [ValueKind::Delete, ValueKind::Value, ValueKind::Expiring] {
                let k = make_internal_key(b"k", seq, kind);
                assert_ne!(compare_internal(&seek, &k), Ordering::Greater, "seq {seq}");
            }
        }
        let newer = make_internal_key(b"k", 6, ValueKind::Delete);
        assert_eq!(compare_internal(&newer, &seek), Ordering::Less);
    }

    #[test]
    fn short_bytes_hold_any_length_inline_or_not() {
        assert_eq!(std::mem::size_of::<ShortBytes>(), 32, "as small as a Bytes");
        for len in [0usize, 1, 8, 16, 29, 30, 31, 64] {
            let v: Vec<u8> = (0..len as u8).collect();
            let s = ShortBytes::new(&v);
            assert_eq!(s.as_slice(), &v[..]);
            assert_eq!(
                matches!(s, ShortBytes::Inline { .. }),
                len <= ShortBytes::INLINE
            );
            let (a, b) = v.split_at(len / 2);
            assert_eq!(ShortBytes::concat(a, b).as_slice(), &v[..]);
        }
    }

    #[test]
    fn parse_round_trip_and_rejects_garbage() {
        let k = make_internal_key(b"key", 42, ValueKind::Delete);
        let p = parse_internal_key(&k).unwrap();
        assert_eq!(
            (p.user_key, p.seq, p.kind),
            (&b"key"[..], 42, ValueKind::Delete)
        );
        assert!(parse_internal_key(b"short").is_none());
        let mut bad = k.clone();
        let n = bad.len();
        bad[n - 8] = 7; // unknown kind
        assert!(parse_internal_key(&bad).is_none());
    }
}

//! Little-endian fixed-width and varint encodings shared by every on-disk format,
//! and the masked CRC32C used by every checksum. Owns no format of its own.

/// Appends `v` as 4 little-endian bytes.
pub fn put_fixed32(dst: &mut Vec<u8>, v: u32) {
    dst.extend_from_slice(&v.to_le_bytes());
}

/// Appends `v` as 8 little-endian bytes.
pub fn put_fixed64(dst: &mut Vec<u8>, v: u64) {
    dst.extend_from_slice(&v.to_le_bytes());
}

/// Reads 4 little-endian bytes. Panics if `src` is shorter: callers check lengths first.
pub fn decode_fixed32(src: &[u8]) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&src[..4]);
    u32::from_le_bytes(b)
}

/// Reads 8 little-endian bytes. Panics if `src` is shorter: callers check lengths first.
pub fn decode_fixed64(src: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&src[..8]);
    u64::from_le_bytes(b)
}

/// Appends `v` as a LEB128 varint (1..=10 bytes).
pub fn put_varint64(dst: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        dst.push((v as u8) | 0x80);
        v >>= 7;
    }
    dst.push(v as u8);
}

/// Bytes `v` takes as a LEB128 varint.
pub fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Appends `v` as a LEB128 varint (1..=5 bytes).
pub fn put_varint32(dst: &mut Vec<u8>, v: u32) {
    put_varint64(dst, v as u64)
}

/// Decodes a varint from the front of `src`; returns the value and the bytes consumed,
/// or `None` if `src` ends early or the varint is longer than 10 bytes.
pub fn get_varint64(src: &[u8]) -> Option<(u64, usize)> {
    let mut result = 0u64;
    for (i, &b) in src.iter().enumerate().take(10) {
        result |= ((b & 0x7f) as u64) << (7 * i);
        if b & 0x80 == 0 {
            return Some((result, i + 1));
        }
    }
    None
}

/// Decodes a varint that must fit in 32 bits.
pub fn get_varint32(src: &[u8]) -> Option<(u32, usize)> {
    let (v, n) = get_varint64(src)?;
    u32::try_from(v).ok().map(|v| (v, n))
}

/// Appends a varint length followed by the bytes.
pub fn put_length_prefixed(dst: &mut Vec<u8>, data: &[u8]) {
    put_varint64(dst, data.len() as u64);
    dst.extend_from_slice(data);
}

/// Decodes a length-prefixed slice from the front of `src`; returns it and the bytes consumed.
pub fn get_length_prefixed(src: &[u8]) -> Option<(&[u8], usize)> {
    let (len, n) = get_varint64(src)?;
    let len = usize::try_from(len).ok()?;
    let end = n.checked_add(len)?;
    if end > src.len() {
        return None;
    }
    Some((&src[n..end], end))
}

const MASK_DELTA: u32 = 0xa282_ead8;

/// CRC32C of `data`, masked as LevelDB does so that a CRC stored inside
/// checksummed data does not checksum to a fixed point.
pub fn masked_crc(data: &[u8]) -> u32 {
    mask_crc(crc32c::crc32c(data))
}

/// CRC32C of the concatenation of `parts`, masked.
pub fn masked_crc_parts(parts: &[&[u8]]) -> u32 {
    let mut crc = 0;
    for p in parts {
        crc = crc32c::crc32c_append(crc, p);
    }
    mask_crc(crc)
}

/// Masks a raw CRC32C (for callers that compute it incrementally).
pub fn mask_crc(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_round_trip() {
        for v in [
            0u64,
            1,
            127,
            128,
            300,
            16383,
            16384,
            u32::MAX as u64,
            u64::MAX,
        ] {
            let mut buf = Vec::new();
            put_varint64(&mut buf, v);
            assert_eq!(get_varint64(&buf), Some((v, buf.len())));
            assert_eq!(
                get_varint64(&buf[..buf.len() - 1]),
                None,
                "truncated varint must fail"
            );
        }
    }

    #[test]
    fn varint32_rejects_overflow() {
        let mut buf = Vec::new();
        put_varint64(&mut buf, u32::MAX as u64 + 1);
        assert_eq!(get_varint32(&buf), None);
    }

    #[test]
    fn length_prefixed_rejects_overrun() {
        let mut buf = Vec::new();
        put_length_prefixed(&mut buf, b"hello");
        assert_eq!(get_length_prefixed(&buf), Some((&b"hello"[..], 6)));
        assert_eq!(get_length_prefixed(&buf[..5]), None);
    }

    #[test]
    fn crc_parts_equals_whole() {
        assert_eq!(
            masked_crc(b"helloworld"),
            masked_crc_parts(&[b"hello", b"world"])
        );
        assert_ne!(masked_crc(b"a"), masked_crc(b"b"));
    }
}

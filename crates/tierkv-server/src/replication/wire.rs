//! The replication stream's frames (docs/FORMAT.md, "Replication stream"): what a
//! primary sends a replica after `PSYNC`'s reply (its checkpoint's files, then its
//! changes, its readers' keys and pings) and what a replica sends back (acknowledgements).
//!
//! A frame is a kind byte, the payload's length as 4 bytes little-endian, and the
//! payload. Owns the encoding and decoding only; the sockets are the caller's.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Largest payload accepted (a bigger length is a damaged or hostile stream).
pub const MAX_PAYLOAD: usize = 1 << 30;
/// Bytes of a file sent per data frame.
pub const FILE_CHUNK: usize = 1 << 20;

/// A file of the checkpoint follows: tier byte (`f` fast, `s` slow), size (8 bytes LE),
/// then its path relative to the tier's directory (UTF-8, `/`-separated).
pub const FILE: u8 = b'F';
/// The next bytes of the current file.
pub const DATA: u8 = b'D';
/// The checkpoint is complete; payload: its sequence (8 bytes LE).
pub const END: u8 = b'E';
/// A write batch: its WAL record (`tierkv::Change::to_bytes`).
pub const CHANGE: u8 = b'C';
/// Keys the primary's readers touched: each a 4-byte LE length and the key.
pub const HOT: u8 = b'H';
/// The primary is alive; payload: its latest sequence (8 bytes LE).
pub const PING: u8 = b'P';
/// From the replica: everything up to this sequence (8 bytes LE) is applied.
pub const ACK: u8 = b'A';

/// Appends one frame to `out`.
pub fn frame(out: &mut Vec<u8>, kind: u8, payload: &[u8]) {
    out.push(kind);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(payload);
}

/// Writes one frame.
pub async fn write_frame<W: AsyncWrite + Unpin>(
    w: &mut W,
    kind: u8,
    payload: &[u8],
) -> std::io::Result<()> {
    let mut head = [0u8; 5];
    head[0] = kind;
    head[1..].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    w.write_all(&head).await?;
    w.write_all(payload).await
}

/// Reads one frame: `None` at a clean end of the stream (between frames).
pub async fn read_frame<R: AsyncRead + Unpin>(r: &mut R) -> std::io::Result<Option<(u8, Vec<u8>)>> {
    let mut head = [0u8; 5];
    match r.read_exact(&mut head[..1]).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    r.read_exact(&mut head[1..]).await?;
    let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
    if len > MAX_PAYLOAD {
        return Err(invalid(format!(
            "replication frame of {len} bytes (kind {:?}) is past the limit of {MAX_PAYLOAD}",
            head[0] as char
        )));
    }
    let mut payload = vec![0u8; len];
    r.read_exact(&mut payload).await?;
    Ok(Some((head[0], payload)))
}

/// An I/O error of kind `InvalidData` (a malformed stream).
pub fn invalid(msg: impl Into<String>) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, msg.into())
}

/// A frame's 8-byte little-endian number.
pub fn number(payload: &[u8]) -> std::io::Result<u64> {
    let b: [u8; 8] = payload
        .get(..8)
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| invalid("replication frame shorter than its number"))?;
    Ok(u64::from_le_bytes(b))
}

/// A [`FILE`] frame's payload.
pub fn file_header(tier: u8, size: u64, path: &str) -> Vec<u8> {
    let mut p = Vec::with_capacity(9 + path.len());
    p.push(tier);
    p.extend_from_slice(&size.to_le_bytes());
    p.extend_from_slice(path.as_bytes());
    p
}

/// Reads a [`FILE`] frame's payload: tier byte, size, relative path (checked to stay
/// inside the tier's directory: plain names only, no `..`, no root).
pub fn parse_file_header(payload: &[u8]) -> std::io::Result<(u8, u64, std::path::PathBuf)> {
    let (&tier, rest) = payload
        .split_first()
        .ok_or_else(|| invalid("empty file frame"))?;
    let size = number(rest)?;
    let name = std::str::from_utf8(&rest[8..]).map_err(|_| invalid("file name is not UTF-8"))?;
    let path = std::path::PathBuf::from(name);
    let plain = !name.is_empty()
        && path
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
    if !plain || !matches!(tier, b'f' | b's') {
        return Err(invalid(format!(
            "file frame names {name:?} on tier {:?}: not a file inside a tier",
            tier as char
        )));
    }
    Ok((tier, size, path))
}

/// A [`HOT`] frame's payload for `keys` (as many as fit in `max_bytes`; the rest is
/// returned for the next frame).
pub fn hot_payload(keys: &[Vec<u8>], max_bytes: usize) -> (Vec<u8>, usize) {
    let mut p = Vec::new();
    let mut n = 0;
    for k in keys {
        if !p.is_empty() && p.len() + 4 + k.len() > max_bytes {
            break;
        }
        p.extend_from_slice(&(k.len() as u32).to_le_bytes());
        p.extend_from_slice(k);
        n += 1;
    }
    (p, n)
}

/// Reads a [`HOT`] frame's keys.
pub fn parse_hot(mut payload: &[u8]) -> std::io::Result<Vec<Vec<u8>>> {
    let mut keys = Vec::new();
    while !payload.is_empty() {
        let len = payload
            .get(..4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
            .ok_or_else(|| invalid("hot-keys frame cut inside a length"))?;
        let key = payload
            .get(4..4 + len)
            .ok_or_else(|| invalid("hot-keys frame cut inside a key"))?;
        keys.push(key.to_vec());
        payload = &payload[4 + len..];
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Invariant: frames read back as written; a damaged stream is an error, never a
    /// panic or a huge allocation; a file frame cannot name a path outside its tier.
    #[tokio::test]
    async fn frames_round_trip_and_damage_is_refused() {
        let mut buf = Vec::new();
        frame(&mut buf, PING, &7u64.to_le_bytes());
        let (hot, n) = hot_payload(&[b"a".to_vec(), b"bc".to_vec()], 1024);
        assert_eq!(n, 2);
        frame(&mut buf, HOT, &hot);
        frame(&mut buf, FILE, &file_header(b's', 3, "ralt/000001.sst"));
        let mut r = &buf[..];
        let (k, p) = read_frame(&mut r).await.unwrap().unwrap();
        assert_eq!((k, number(&p).unwrap()), (PING, 7));
        let (_, p) = read_frame(&mut r).await.unwrap().unwrap();
        assert_eq!(parse_hot(&p).unwrap(), vec![b"a".to_vec(), b"bc".to_vec()]);
        let (_, p) = read_frame(&mut r).await.unwrap().unwrap();
        let (tier, size, path) = parse_file_header(&p).unwrap();
        assert_eq!(
            (tier, size, path.to_str().unwrap()),
            (b's', 3, "ralt/000001.sst")
        );
        assert!(read_frame(&mut r).await.unwrap().is_none(), "clean end");
        for bad in ["../x", "/etc/passwd", "", "a/../../b"] {
            assert!(
                parse_file_header(&file_header(b'f', 1, bad)).is_err(),
                "{bad}"
            );
        }
        assert!(parse_file_header(&file_header(b'x', 1, "a")).is_err());
        let huge = [CHANGE, 0xff, 0xff, 0xff, 0xff];
        assert!(read_frame(&mut &huge[..]).await.is_err());
        let cut = [CHANGE, 9, 0, 0, 0, 1];
        assert!(read_frame(&mut &cut[..]).await.is_err());
        assert!(parse_hot(&[5, 0, 0, 0, b'a']).is_err());
    }
}

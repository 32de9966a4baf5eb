//! The check behind the `resp` fuzz target: tierkv-server's request parser fed arbitrary
//! bytes. It never panics or hangs, answers the same whether the bytes arrive at once or
//! in pieces (TCP may split a request anywhere), and its helpers agree with their
//! definitions: `split_args` reads back what it split once re-quoted, `parse_int` is
//! Redis's `string2ll`.
//!
//! Also compiled into `crates/tierkv-server/tests/resp_fuzz_regressions.rs`, which runs the
//! committed seeds and every crash input through this check in `cargo test`: keep it free
//! of dependencies other than `tierkv-server`, `bytes` and `std`.

use bytes::BytesMut;
use tierkv_server::resp::{parse_int, split_args, Args, Parser};
use tierkv_server::Limits;

/// Commands parsed until more input is needed, then the error that ended parsing, if any.
type Outcome = (Vec<Args>, Option<String>);

fn drain(p: &mut Parser, buf: &mut BytesMut, out: &mut Vec<Args>) -> Option<String> {
    loop {
        let before = buf.len();
        match p.next(buf) {
            Ok(Some(args)) => {
                assert!(buf.len() < before, "a command was parsed from no input");
                out.push(args);
            }
            Ok(None) => return None,
            Err(e) => return Some(e.0),
        }
    }
}

fn parse(stream: &[u8], limits: &Limits, authed: bool, chunk: usize) -> Outcome {
    let mut p = Parser::new(*limits, authed);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for piece in stream.chunks(chunk.max(1)) {
        buf.extend_from_slice(piece);
        if let Some(e) = drain(&mut p, &mut buf, &mut out) {
            return (out, Some(e));
        }
    }
    (out, None)
}

/// Redis's `string2ll`, written from its definition: an optional `-`, then digits without
/// a leading zero (a lone `0` excepted, `-0` refused), within `i64`.
fn reference_parse_int(s: &[u8]) -> Option<i64> {
    let t = std::str::from_utf8(s).ok()?;
    if t == "0" {
        return Some(0);
    }
    let digits = t.strip_prefix('-').unwrap_or(t);
    if digits.is_empty() || digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse().ok()
}

/// Quotes `args` so that `split_args` must give them back: every byte as a `\xHH` escape.
fn quote(args: &[Vec<u8>]) -> Vec<u8> {
    let mut line = Vec::new();
    for a in args {
        line.push(b'"');
        for b in a {
            line.extend_from_slice(format!("\\x{b:02x}").as_bytes());
        }
        line.extend_from_slice(b"\" ");
    }
    line
}

/// First byte: bits 0-5 the chunk size minus one, bit 6 authenticated, bit 7 small limits
/// (so the limit checks fire on small inputs). The rest is the byte stream.
pub fn resp(data: &[u8]) {
    let Some((&cfg, stream)) = data.split_first() else {
        return;
    };
    let chunk = (cfg & 0x3f) as usize + 1;
    let authed = cfg & 0x40 != 0;
    let limits = if cfg & 0x80 != 0 {
        Limits {
            max_bulk: 64,
            max_key: 64,
            max_args: 8,
            max_query: 256,
        }
    } else {
        Limits::default()
    };
    let whole = parse(stream, &limits, authed, stream.len());
    let pieces = parse(stream, &limits, authed, chunk);
    assert_eq!(whole, pieces, "parsing depends on how the input is split");
    for args in &whole.0 {
        assert!(!args.is_empty(), "an empty command was returned");
        assert!(
            args.len() <= limits.max_args,
            "more arguments than max_args"
        );
    }
    let line = stream.split(|&b| b == b'\n').next().unwrap_or_default();
    if let Some(args) = split_args(line) {
        assert_eq!(
            split_args(&quote(&args)),
            Some(args),
            "split_args round trip"
        );
    }
    let num = &stream[..stream.len().min(24)];
    assert_eq!(
        parse_int(num),
        reference_parse_int(num),
        "parse_int({num:?})"
    );
}

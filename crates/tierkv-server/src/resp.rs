//! The RESP wire format: an incremental request parser (multibulk and inline commands, with
//! size limits) and a reply writer that speaks RESP2 or RESP3.
//!
//! The parser is a state machine over a `BytesMut` read buffer: it consumes bytes as soon as
//! an argument is complete, so a slow client sending a large multibulk request costs linear
//! time, and memory is bounded by the configured limits rather than by what the client
//! claims it will send. Error texts follow Redis (`Protocol error: ...`) so tools recognise
//! them; after a protocol error the connection must be closed, because the stream position
//! is lost.

use bytes::{Buf, Bytes, BytesMut};
use std::fmt;

/// Longest inline command, or multibulk/bulk header line, accepted (Redis: 64 KiB).
pub const MAX_INLINE: usize = 64 * 1024;

/// Before AUTH, a client may send at most this many arguments per command (as Redis does),
/// so an unauthenticated peer cannot make the server buffer much.
pub const UNAUTH_MAX_ARGS: usize = 10;
/// Before AUTH, the largest bulk string accepted.
pub const UNAUTH_MAX_BULK: usize = 16 * 1024;

/// Limits applied to every request, each checked at the header that announces a size,
/// before the bytes it announces are read.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest bulk string (Redis `proto-max-bulk-len`); default the engine's largest value
    /// (`tierkv::Options::max_value_size`), since a larger one would be received only to be
    /// refused.
    pub max_bulk: usize,
    /// Largest bulk string in a key position of a known command (see
    /// [`Parser::with_key_positions`]); default the engine's `max_key_size`.
    pub max_key: usize,
    /// Most arguments in one command (multibulk length).
    pub max_args: usize,
    /// Most bytes one command may occupy while it is being received (Redis
    /// `client-query-buffer-limit`).
    pub max_query: usize,
}

impl Default for Limits {
    fn default() -> Self {
        let engine = tierkv::Options::default();
        Limits {
            max_bulk: engine.max_value_size,
            max_key: engine.max_key_size,
            max_args: 1024 * 1024,
            max_query: 1024 * 1024 * 1024,
        }
    }
}

/// Where a command's keys are: `(first, last, step)` in Redis's COMMAND convention (`last`
/// negative counts from the end), `None` for an unknown command.
pub type KeyPositions = fn(&[u8]) -> Option<(i32, i32, i32)>;

/// A request the parser cannot make sense of. The text is the reply's message (without the
/// leading `-ERR `); the connection is closed after sending it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ProtocolError {}

fn perr(msg: impl Into<String>) -> ProtocolError {
    ProtocolError(format!("Protocol error: {}", msg.into()))
}

/// One command: its name and arguments, as sent.
pub type Args = Vec<Bytes>;

#[derive(Debug)]
enum State {
    /// Between commands.
    Idle,
    /// Inside a multibulk request: `remaining` bulk strings still to come.
    Array {
        remaining: usize,
        args: Args,
        /// Bytes of the completed arguments, counted against `max_query`.
        bytes: usize,
        /// Length of the bulk string whose header was read, awaiting its payload.
        bulk: Option<usize>,
        /// Key positions of the command, known once its name has arrived.
        keys: Option<(i32, i32, i32)>,
    },
}

/// An incremental RESP request parser for one connection.
#[derive(Debug)]
pub struct Parser {
    rules: Rules,
    state: State,
}

/// What a request may be: the limits, whether the pre-AUTH ones apply, and where known
/// commands' keys are. Apart from the parser's [`State`], so that a header can be checked
/// while the command it belongs to is held in the state.
#[derive(Debug)]
struct Rules {
    limits: Limits,
    authenticated: bool,
    key_positions: Option<KeyPositions>,
}

impl Rules {
    fn max_args(&self) -> usize {
        if self.authenticated {
            self.limits.max_args
        } else {
            self.limits.max_args.min(UNAUTH_MAX_ARGS)
        }
    }

    /// The argument count of a `*N` header line; `None` for an empty command.
    fn multibulk_len(&self, line: &[u8]) -> Result<Option<usize>, ProtocolError> {
        let n = parse_int(&line[1..])
            .filter(|n| *n <= i32::MAX as i64)
            .ok_or_else(|| perr("invalid multibulk length"))?;
        if n <= 0 {
            return Ok(None);
        }
        let n = n as usize;
        if n > self.max_args() {
            return Err(if self.authenticated {
                perr(format!(
                    "invalid multibulk length ({n} arguments, max-args is {})",
                    self.limits.max_args
                ))
            } else {
                perr("unauthenticated multibulk length")
            });
        }
        Ok(Some(n))
    }

    /// Reads the `$len` header of argument `index` of a `total`-argument command and
    /// checks `len` against the limits (a key's against `max_key`, by `keys`), adding the
    /// header and the payload to `bytes`, the command's size so far. `Ok(None)`: the
    /// header is not complete yet.
    fn bulk_header(
        &self,
        buf: &mut BytesMut,
        (index, total): (usize, usize),
        keys: Option<(i32, i32, i32)>,
        bytes: &mut usize,
    ) -> Result<Option<usize>, ProtocolError> {
        if buf.is_empty() {
            return Ok(None);
        }
        if buf[0] != b'$' {
            return Err(perr(format!("expected '$', got '{}'", printable(buf[0]))));
        }
        let Some(line) = take_line(buf, b'$', "too big bulk count string")? else {
            return Ok(None);
        };
        let max = if self.authenticated {
            self.limits.max_bulk
        } else {
            self.limits.max_bulk.min(UNAUTH_MAX_BULK)
        };
        let len = parse_int(&line[1..])
            .filter(|n| *n >= 0)
            .ok_or_else(|| perr("invalid bulk length"))?;
        if len as u64 > max as u64 {
            return Err(if self.authenticated {
                perr(format!(
                    "invalid bulk length ({len} bytes, max-bulk is {max})"
                ))
            } else {
                perr("unauthenticated bulk length")
            });
        }
        let len = len as usize;
        if self.authenticated && len > self.limits.max_key && is_key_position(keys, index, total) {
            return Err(perr(format!(
                "invalid key length ({len} bytes, max-key is {})",
                self.limits.max_key
            )));
        }
        *bytes = bytes.saturating_add(line.len()).saturating_add(len);
        if *bytes > self.limits.max_query {
            return Err(perr(format!(
                "query buffer limit exceeded ({} bytes)",
                self.limits.max_query
            )));
        }
        Ok(Some(len))
    }
}

impl Parser {
    /// A parser enforcing `limits`. `authenticated` false applies Redis's tighter
    /// pre-AUTH limits (at most 10 arguments of at most 16 KiB each).
    pub fn new(limits: Limits, authenticated: bool) -> Self {
        Parser {
            rules: Rules {
                limits,
                authenticated,
                key_positions: None,
            },
            state: State::Idle,
        }
    }

    /// Applies `Limits::max_key` to the arguments `positions` says are keys (without it,
    /// only `max_bulk` applies to every argument).
    pub fn with_key_positions(mut self, positions: KeyPositions) -> Self {
        self.rules.key_positions = Some(positions);
        self
    }

    /// Lifts (or restores) the pre-AUTH limits.
    pub fn set_authenticated(&mut self, yes: bool) {
        self.rules.authenticated = yes;
    }

    /// True when a command has been partly received.
    pub fn in_progress(&self) -> bool {
        !matches!(self.state, State::Idle)
    }

    /// How many more bytes the command in progress needs at least, when known (a bulk
    /// payload): lets the reader grow its buffer in one step instead of many.
    pub fn wanted(&self, buf: &BytesMut) -> Option<usize> {
        match &self.state {
            State::Array {
                bulk: Some(len), ..
            } => Some((len + 2).saturating_sub(buf.len())),
            _ => None,
        }
    }

    /// Parses the next complete command out of `buf`, consuming its bytes. `Ok(None)` means
    /// more input is needed (whatever was consumed is kept in the parser's state). Empty
    /// commands (`*0`, blank inline lines) are skipped.
    pub fn next(&mut self, buf: &mut BytesMut) -> Result<Option<Args>, ProtocolError> {
        loop {
            match &mut self.state {
                State::Idle => {
                    if buf.is_empty() {
                        return Ok(None);
                    }
                    if buf[0] != b'*' {
                        match self.inline(buf)? {
                            None => return Ok(None),
                            Some(args) if args.is_empty() => continue,
                            Some(args) => return Ok(Some(args)),
                        }
                    }
                    let Some(line) = take_line(buf, b'*', "too big mbulk count string")? else {
                        return Ok(None);
                    };
                    let Some(n) = self.rules.multibulk_len(&line)? else {
                        continue;
                    };
                    self.state = State::Array {
                        remaining: n,
                        // Never trust the header for an allocation size.
                        args: Vec::with_capacity(n.min(64)),
                        bytes: line.len(),
                        bulk: None,
                        keys: None,
                    };
                }
                State::Array {
                    remaining,
                    args,
                    bytes,
                    bulk,
                    keys,
                } => {
                    let len = match *bulk {
                        Some(len) => len,
                        None => {
                            let at = (args.len(), args.len() + *remaining);
                            let Some(len) = self.rules.bulk_header(buf, at, *keys, bytes)? else {
                                return Ok(None);
                            };
                            *bulk = Some(len);
                            len
                        }
                    };
                    if buf.len() < len + 2 {
                        return Ok(None);
                    }
                    if &buf[len..len + 2] != b"\r\n" {
                        return Err(perr("expected CRLF after bulk string"));
                    }
                    let arg = buf.split_to(len).freeze();
                    buf.advance(2);
                    if args.is_empty() {
                        *keys = self.rules.key_positions.and_then(|f| f(&arg));
                    }
                    args.push(arg);
                    *bulk = None;
                    *remaining -= 1;
                    if *remaining == 0 {
                        let args = std::mem::take(args);
                        self.state = State::Idle;
                        return Ok(Some(args));
                    }
                }
            }
        }
    }

    /// An inline command: one line, split like `redis-cli` input (quotes and escapes).
    fn inline(&mut self, buf: &mut BytesMut) -> Result<Option<Args>, ProtocolError> {
        let Some(nl) = memchr(b'\n', buf) else {
            if buf.len() > MAX_INLINE {
                return Err(perr("too big inline request"));
            }
            return Ok(None);
        };
        if nl > MAX_INLINE {
            return Err(perr("too big inline request"));
        }
        let line = buf.split_to(nl + 1);
        let mut line = &line[..nl];
        if line.last() == Some(&b'\r') {
            line = &line[..line.len() - 1];
        }
        let args = split_args(line).ok_or_else(|| perr("unbalanced quotes in request"))?;
        if args.len() > self.rules.max_args() {
            return Err(if self.rules.authenticated {
                perr("too many arguments in inline request")
            } else {
                perr("unauthenticated multibulk length")
            });
        }
        Ok(Some(args.into_iter().map(Bytes::from).collect()))
    }
}

/// True when argument `index` (0 is the command name) of a `total`-argument command is a
/// key, by the command's `(first, last, step)`.
fn is_key_position(keys: Option<(i32, i32, i32)>, index: usize, total: usize) -> bool {
    let Some((first, last, step)) = keys else {
        return false;
    };
    if first <= 0 || step <= 0 {
        return false;
    }
    let (i, total) = (index as i64, total as i64);
    let (first, step) = (first as i64, step as i64);
    let last = if last < 0 {
        total + last as i64
    } else {
        last as i64
    };
    i >= first && i <= last && (i - first) % step == 0
}

fn memchr(b: u8, s: &[u8]) -> Option<usize> {
    s.iter().position(|&c| c == b)
}

/// Takes one `\r\n`-terminated header line (returned without the CRLF), or `None` if it is
/// not complete yet.
fn take_line(
    buf: &mut BytesMut,
    _kind: u8,
    too_big: &str,
) -> Result<Option<BytesMut>, ProtocolError> {
    let Some(cr) = memchr(b'\r', &buf[..buf.len().min(MAX_INLINE + 1)]) else {
        if buf.len() > MAX_INLINE {
            return Err(perr(too_big.to_string()));
        }
        return Ok(None);
    };
    if buf.len() < cr + 2 {
        return Ok(None);
    }
    if buf[cr + 1] != b'\n' {
        return Err(perr("expected LF after CR"));
    }
    let line = buf.split_to(cr);
    buf.advance(2);
    Ok(Some(line))
}

fn printable(b: u8) -> String {
    if b.is_ascii_graphic() || b == b' ' {
        (b as char).to_string()
    } else {
        format!("\\x{b:02x}")
    }
}

/// Parses a decimal integer the way Redis's `string2ll` does: optional `-`, no `+`, no
/// leading zeros, no spaces, within `i64`.
pub fn parse_int(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (neg, digits) = match s[0] {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || digits[0] == b'0' || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        v = v.checked_mul(10)?.checked_add((d - b'0') as u64)?;
    }
    if neg {
        if v <= i64::MAX as u64 + 1 {
            Some((v as i64).wrapping_neg())
        } else {
            None
        }
    } else {
        i64::try_from(v).ok()
    }
}

fn hex_val(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\n' | b'\r' | b'\t' | 0x0b | 0x0c)
}

/// Splits an inline command line like Redis's `sdssplitargs`: whitespace-separated words,
/// double quotes with `\n \r \t \b \a \\ \" \xHH` escapes, single quotes with `\'`. `None`
/// for unbalanced quotes (or a closing quote not followed by a space).
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        while i < line.len() && is_space(line[i]) {
            i += 1;
        }
        if i >= line.len() {
            return Some(out);
        }
        let mut cur = Vec::new();
        let mut inq = false; // inside "double quotes"
        let mut insq = false; // inside 'single quotes'
        loop {
            if inq {
                let c = *line.get(i)?; // end of line inside quotes: unbalanced
                if c == b'\\'
                    && line.get(i + 1) == Some(&b'x')
                    && line.get(i + 2).and_then(|&c| hex_val(c)).is_some()
                    && line.get(i + 3).and_then(|&c| hex_val(c)).is_some()
                {
                    let hi = hex_val(line[i + 2])?;
                    let lo = hex_val(line[i + 3])?;
                    cur.push(hi * 16 + lo);
                    i += 3;
                } else if c == b'\\' && i + 1 < line.len() {
                    i += 1;
                    cur.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                } else if c == b'"' {
                    // The closing quote must be followed by a space or the end.
                    if i + 1 < line.len() && !is_space(line[i + 1]) {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else if insq {
                let c = *line.get(i)?;
                if c == b'\\' && line.get(i + 1) == Some(&b'\'') {
                    i += 1;
                    cur.push(b'\'');
                } else if c == b'\'' {
                    if i + 1 < line.len() && !is_space(line[i + 1]) {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else {
                match line.get(i) {
                    None => break,
                    Some(&c) if is_space(c) => break,
                    Some(b'"') => inq = true,
                    Some(b'\'') => insq = true,
                    Some(&c) => cur.push(c),
                }
            }
            i += 1;
        }
        out.push(cur);
    }
}

/// The protocol version a connection speaks (chosen with HELLO).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proto {
    /// RESP2, the default.
    Resp2,
    /// RESP3: maps and a distinct null type.
    Resp3,
}

impl Proto {
    /// 2 or 3.
    pub fn number(self) -> i64 {
        match self {
            Proto::Resp2 => 2,
            Proto::Resp3 => 3,
        }
    }
}

/// Values at least this large are kept as their own segment instead of being copied into
/// the output buffer (a large GET then holds its value once, not twice).
const OWN_SEGMENT: usize = 64 * 1024;

/// Appends replies to a connection's pending output in its protocol version, within a hard
/// byte limit. Error and simple-string texts are sanitised (CR/LF become spaces) so a reply
/// can never break the framing, whatever a client put into a key name that an error
/// message echoes.
///
/// The output is a list of segments: small replies are encoded into a growing buffer, a
/// large value becomes a segment of its own without a copy. When an append would take the
/// pending bytes past the limit, everything pending is dropped and the writer reports
/// [`ReplyWriter::overflowed`]: the connection must then be closed, since a reply is lost.
pub struct ReplyWriter {
    segs: Vec<Bytes>,
    cur: Vec<u8>,
    len: usize,
    limit: usize,
    overflowed: bool,
    /// The protocol the replies are encoded in.
    pub proto: Proto,
}

impl ReplyWriter {
    /// An empty writer without a limit.
    pub fn new(proto: Proto) -> Self {
        Self::with_limit(proto, usize::MAX)
    }

    /// An empty writer holding at most `limit` pending bytes.
    pub fn with_limit(proto: Proto, limit: usize) -> Self {
        ReplyWriter {
            segs: Vec::new(),
            cur: Vec::with_capacity(4096),
            len: 0,
            limit,
            overflowed: false,
            proto,
        }
    }

    /// Makes room for `n` more bytes, or records the overflow (and frees what is pending).
    fn admit(&mut self, n: usize) -> bool {
        if self.overflowed {
            return false;
        }
        if self.len.saturating_add(n) > self.limit {
            self.overflowed = true;
            self.segs = Vec::new();
            self.cur = Vec::new();
            self.len = 0;
            return false;
        }
        self.len += n;
        true
    }

    fn put(&mut self, b: &[u8]) {
        if self.admit(b.len()) {
            self.cur.extend_from_slice(b);
        }
    }

    fn line(&mut self, prefix: u8, s: &[u8]) {
        if !self.admit(s.len() + 3) {
            return;
        }
        self.cur.push(prefix);
        self.cur.extend(
            s.iter()
                .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c }),
        );
        self.cur.extend_from_slice(b"\r\n");
    }

    fn header(&mut self, prefix: u8, n: i64) {
        let digits = n.to_string();
        if !self.admit(digits.len() + 3) {
            return;
        }
        self.cur.push(prefix);
        self.cur.extend_from_slice(digits.as_bytes());
        self.cur.extend_from_slice(b"\r\n");
    }

    /// `+OK`-style status reply.
    pub fn simple(&mut self, s: &str) {
        self.line(b'+', s.as_bytes());
    }

    /// `+OK`.
    pub fn ok(&mut self) {
        self.put(b"+OK\r\n");
    }

    /// An error reply; `msg` starts with its code (`ERR ...`, `NOAUTH ...`).
    pub fn error(&mut self, msg: &str) {
        self.line(b'-', msg.as_bytes());
    }

    /// An integer reply.
    pub fn int(&mut self, n: i64) {
        self.header(b':', n);
    }

    /// A bulk string.
    pub fn bulk(&mut self, s: &[u8]) {
        self.header(b'$', s.len() as i64);
        self.put(s);
        self.put(b"\r\n");
    }

    /// A bulk string the writer may keep without copying (a value read from the store).
    pub fn bulk_owned(&mut self, v: Vec<u8>) {
        self.bulk_owned_from(v, 0);
    }

    /// The bulk string `v[from..]`, kept without copying when large (a stored value after
    /// its encoding's prefix). `from` past the end gives the empty string.
    pub fn bulk_owned_from(&mut self, v: Vec<u8>, from: usize) {
        let from = from.min(v.len());
        let len = v.len() - from;
        if len < OWN_SEGMENT {
            return self.bulk(&v[from..]);
        }
        self.header(b'$', len as i64);
        if !self.admit(len) {
            return;
        }
        if !self.cur.is_empty() {
            let cur = std::mem::take(&mut self.cur);
            self.segs.push(Bytes::from(cur));
        }
        self.segs.push(Bytes::from(v).slice(from..));
        self.put(b"\r\n");
    }

    /// A bulk string, or the null reply for `None`.
    pub fn opt_bulk(&mut self, s: Option<&[u8]>) {
        match s {
            Some(s) => self.bulk(s),
            None => self.null(),
        }
    }

    /// An owned bulk string, or the null reply for `None`.
    pub fn opt_bulk_owned(&mut self, s: Option<Vec<u8>>) {
        match s {
            Some(s) => self.bulk_owned(s),
            None => self.null(),
        }
    }

    /// The null reply (`$-1` in RESP2, `_` in RESP3).
    pub fn null(&mut self) {
        match self.proto {
            Proto::Resp2 => self.put(b"$-1\r\n"),
            Proto::Resp3 => self.put(b"_\r\n"),
        }
    }

    /// The null array (`*-1` in RESP2, `_` in RESP3): an aborted EXEC.
    pub fn null_array(&mut self) {
        match self.proto {
            Proto::Resp2 => self.put(b"*-1\r\n"),
            Proto::Resp3 => self.put(b"_\r\n"),
        }
    }

    /// The header of a RESP3 push of `n` elements (which follow): an out-of-band message
    /// such as a pub/sub delivery (an array in RESP2).
    pub fn push(&mut self, n: usize) {
        match self.proto {
            Proto::Resp2 => self.header(b'*', n as i64),
            Proto::Resp3 => self.header(b'>', n as i64),
        }
    }

    /// The header of an array of `n` elements (which follow).
    pub fn array(&mut self, n: usize) {
        self.header(b'*', n as i64);
    }

    /// The header of a map of `n` key-value pairs (which follow as 2n elements): a flat
    /// array in RESP2.
    pub fn map(&mut self, n: usize) {
        match self.proto {
            Proto::Resp2 => self.header(b'*', 2 * n as i64),
            Proto::Resp3 => self.header(b'%', n as i64),
        }
    }

    /// A double, given as its text (`1.5`, `inf`, `-inf`): a RESP3 double, a bulk string
    /// in RESP2 (as Redis replies a sorted set's scores).
    pub fn double(&mut self, text: &str) {
        match self.proto {
            Proto::Resp2 => self.bulk(text.as_bytes()),
            Proto::Resp3 => self.line(b',', text.as_bytes()),
        }
    }

    /// Bytes pending.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True when an append passed the limit (and what was pending was dropped).
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// The hard limit.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Takes the pending output, in order, leaving the writer empty.
    pub fn take(&mut self) -> Vec<Bytes> {
        let mut segs = std::mem::take(&mut self.segs);
        if !self.cur.is_empty() {
            let cur = std::mem::replace(&mut self.cur, Vec::with_capacity(4096));
            segs.push(Bytes::from(cur));
        }
        self.len = 0;
        segs
    }

    /// The pending output as one byte string (tests, small replies).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len);
        for s in &self.segs {
            v.extend_from_slice(s);
        }
        v.extend_from_slice(&self.cur);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse_all(p: &mut Parser, input: &[u8]) -> Result<Vec<Vec<Vec<u8>>>, ProtocolError> {
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        while let Some(args) = p.next(&mut buf)? {
            out.push(args.iter().map(|a| a.to_vec()).collect());
        }
        Ok(out)
    }

    fn authed() -> Parser {
        Parser::new(Limits::default(), true)
    }

    fn cmd(parts: &[&str]) -> Vec<Vec<u8>> {
        parts.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn multibulk_and_pipelining() {
        let mut p = authed();
        let got = parse_all(
            &mut p,
            b"*1\r\n$4\r\nPING\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n",
        )
        .unwrap();
        assert_eq!(got, vec![cmd(&["PING"]), cmd(&["SET", "k", ""])]);
        assert!(!p.in_progress());
    }

    #[test]
    fn byte_at_a_time() {
        let input = b"*2\r\n$3\r\nGET\r\n$5\r\nhello\r\nPING\r\n";
        let mut p = authed();
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for &b in input.iter() {
            buf.extend_from_slice(&[b]);
            while let Some(a) = p.next(&mut buf).unwrap() {
                got.push(a.iter().map(|a| a.to_vec()).collect::<Vec<_>>());
            }
        }
        assert_eq!(got, vec![cmd(&["GET", "hello"]), cmd(&["PING"])]);
    }

    #[test]
    fn empty_multibulk_is_skipped() {
        let mut p = authed();
        let got = parse_all(&mut p, b"*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n").unwrap();
        assert_eq!(got, vec![cmd(&["PING"])]);
    }

    #[test]
    fn inline_commands() {
        let mut p = authed();
        let got = parse_all(&mut p, b"SET k \"a b\\x41\\n\"\r\n\r\n  get   'it''s'\n");
        assert!(got.is_err(), "closing quote followed by a quote");
        let mut p = authed();
        let got = parse_all(&mut p, b"SET k \"a b\\x41\\n\"\r\n\r\n  get 'it\\'s'\n").unwrap();
        assert_eq!(
            got,
            vec![
                vec![b"SET".to_vec(), b"k".to_vec(), b"a bA\n".to_vec()],
                cmd(&["get", "it's"])
            ]
        );
    }

    #[test]
    fn inline_unbalanced_quotes() {
        let mut p = authed();
        let e = parse_all(&mut p, b"SET k \"abc\r\n").unwrap_err();
        assert_eq!(e.0, "Protocol error: unbalanced quotes in request");
    }

    #[test]
    fn errors_have_redis_texts() {
        let cases: &[(&[u8], &str)] = &[
            (b"*x\r\n", "Protocol error: invalid multibulk length"),
            (b"*1\r\nPING\r\n", "Protocol error: expected '$', got 'P'"),
            (b"*1\r\n$-5\r\n", "Protocol error: invalid bulk length"),
            (b"*1\r\n$abc\r\n", "Protocol error: invalid bulk length"),
            (
                b"*1\r\n$2\r\nabcd\r\n",
                "Protocol error: expected CRLF after bulk string",
            ),
        ];
        for (input, want) in cases {
            let mut p = authed();
            assert_eq!(&parse_all(&mut p, input).unwrap_err().0, want, "{input:?}");
        }
    }

    #[test]
    fn limits_are_enforced_before_the_payload_arrives() {
        let limits = Limits {
            max_bulk: 10,
            max_key: 10,
            max_args: 3,
            max_query: 25,
        };
        let mut p = Parser::new(limits, true);
        let e = parse_all(&mut p, b"*1\r\n$11\r\n").unwrap_err();
        assert!(
            e.0.starts_with("Protocol error: invalid bulk length"),
            "{e}"
        );
        let mut p = Parser::new(limits, true);
        let e = parse_all(&mut p, b"*4\r\n").unwrap_err();
        assert!(
            e.0.starts_with("Protocol error: invalid multibulk length"),
            "{e}"
        );
        let mut p = Parser::new(limits, true);
        let e = parse_all(&mut p, b"*3\r\n$10\r\n0123456789\r\n$10\r\n").unwrap_err();
        assert!(e.0.contains("query buffer limit"), "{e}");
        let mut p = Parser::new(limits, true);
        let e = parse_all(&mut p, &vec![b'a'; MAX_INLINE + 10]).unwrap_err();
        assert_eq!(e.0, "Protocol error: too big inline request");
        let mut p = Parser::new(limits, true);
        let mut big = b"*".to_vec();
        big.extend(vec![b'1'; MAX_INLINE + 10]);
        let e = parse_all(&mut p, &big).unwrap_err();
        assert_eq!(e.0, "Protocol error: too big mbulk count string");
    }

    #[test]
    fn key_limit_applies_at_the_header_of_key_arguments_only() {
        let limits = Limits {
            max_bulk: 100,
            max_key: 4,
            max_args: 10,
            max_query: 1000,
        };
        // SET's key is argument 1; MSET's keys are 1, 3, 5...
        fn keys(name: &[u8]) -> Option<(i32, i32, i32)> {
            if name.eq_ignore_ascii_case(b"set") {
                Some((1, 1, 1))
            } else if name.eq_ignore_ascii_case(b"mset") {
                Some((1, -1, 2))
            } else {
                None
            }
        }
        let parser = || Parser::new(limits, true).with_key_positions(keys);
        let e = parse_all(&mut parser(), b"*3\r\n$3\r\nSET\r\n$5\r\n").unwrap_err();
        assert_eq!(
            e.0,
            "Protocol error: invalid key length (5 bytes, max-key is 4)"
        );
        let ok = parse_all(
            &mut parser(),
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n",
        );
        assert_eq!(ok.unwrap().len(), 1, "a long value is not a key");
        let e = parse_all(
            &mut parser(),
            b"*5\r\n$4\r\nMSET\r\n$1\r\na\r\n$5\r\nvalue\r\n$5\r\n",
        )
        .unwrap_err();
        assert!(e.0.contains("invalid key length"), "{e}");
        let ok = parse_all(&mut parser(), b"*2\r\n$4\r\nECHO\r\n$5\r\nhello\r\n");
        assert_eq!(
            ok.unwrap().len(),
            1,
            "unknown positions: only max-bulk applies"
        );
    }

    #[test]
    fn writer_limit_drops_the_output_and_reports_it() {
        let mut w = ReplyWriter::with_limit(Proto::Resp2, 100);
        w.bulk(&[b'x'; 50]);
        assert_eq!(w.len(), 57);
        w.bulk_owned(vec![b'y'; 70 * 1024]);
        assert!(w.overflowed());
        assert_eq!(w.len(), 0, "pending output is freed");
        let mut w = ReplyWriter::new(Proto::Resp2);
        w.simple("A");
        w.bulk_owned(vec![b'z'; 70 * 1024]);
        w.int(1);
        let mut want = b"+A\r\n$71680\r\n".to_vec();
        want.extend(vec![b'z'; 70 * 1024]);
        want.extend_from_slice(b"\r\n:1\r\n");
        assert_eq!(w.to_vec(), want);
        assert_eq!(w.len(), want.len());
        let segs = w.take();
        assert_eq!(segs.len(), 3, "the large value is its own segment");
        assert_eq!(segs.concat(), want);
        assert!(w.is_empty());
    }

    #[test]
    fn unauthenticated_limits() {
        let mut p = Parser::new(Limits::default(), false);
        let e = parse_all(&mut p, b"*11\r\n").unwrap_err();
        assert_eq!(e.0, "Protocol error: unauthenticated multibulk length");
        let mut p = Parser::new(Limits::default(), false);
        let e = parse_all(&mut p, b"*2\r\n$4\r\nAUTH\r\n$20000\r\n").unwrap_err();
        assert_eq!(e.0, "Protocol error: unauthenticated bulk length");
        p = Parser::new(Limits::default(), false);
        p.set_authenticated(true);
        assert!(parse_all(&mut p, b"*11\r\n").unwrap().is_empty());
    }

    #[test]
    fn parse_int_matches_string2ll() {
        assert_eq!(parse_int(b"0"), Some(0));
        assert_eq!(parse_int(b"-1"), Some(-1));
        assert_eq!(parse_int(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_int(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"+1",
            b"01",
            b"-0",
            b" 1",
            b"1 ",
            b"9223372036854775808",
            b"-9223372036854775809",
            b"1.5",
            b"99999999999999999999999",
        ] {
            assert_eq!(parse_int(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn writer_encodes_both_protocols() {
        let mut w = ReplyWriter::new(Proto::Resp2);
        w.null();
        w.map(1);
        w.error("ERR bad\r\nthing");
        assert_eq!(w.to_vec(), b"$-1\r\n*2\r\n-ERR bad  thing\r\n");
        let mut w = ReplyWriter::new(Proto::Resp3);
        w.null();
        w.map(1);
        assert_eq!(w.to_vec(), b"_\r\n%1\r\n");
    }

    fn encode(cmds: &[Vec<Vec<u8>>]) -> Vec<u8> {
        let mut out = Vec::new();
        for c in cmds {
            out.extend(format!("*{}\r\n", c.len()).bytes());
            for a in c {
                out.extend(format!("${}\r\n", a.len()).bytes());
                out.extend(a);
                out.extend(b"\r\n");
            }
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Garbage never panics, and the parser always either needs more input, yields
        /// commands, or reports an error.
        #[test]
        fn garbage_never_panics(data in proptest::collection::vec(any::<u8>(), 0..512),
                                authed in any::<bool>(), split in 0usize..512) {
            let limits = Limits { max_bulk: 64, max_key: 64, max_args: 8, max_query: 256 };
            let mut p = Parser::new(limits, authed);
            let split = split.min(data.len());
            let mut buf = BytesMut::from(&data[..split]);
            let mut ok = true;
            while ok {
                match p.next(&mut buf) { Ok(Some(_)) => {}, Ok(None) => break, Err(_) => ok = false }
            }
            if ok {
                buf.extend_from_slice(&data[split..]);
                while let Ok(Some(_)) = p.next(&mut buf) {}
            }
        }

        /// Garbage built from protocol-looking tokens (more likely to reach deep states).
        #[test]
        fn token_soup_never_panics(tokens in proptest::collection::vec(
            prop_oneof![
                Just(b"*".to_vec()), Just(b"$".to_vec()), Just(b"\r\n".to_vec()),
                Just(b"\r".to_vec()), Just(b"\n".to_vec()), Just(b"-1".to_vec()),
                Just(b"0".to_vec()), Just(b"3".to_vec()), Just(b"99999999999999999999".to_vec()),
                Just(b"\"".to_vec()), Just(b"'".to_vec()), Just(b"\\x".to_vec()),
                Just(b"PING".to_vec()), Just(b" ".to_vec()),
            ], 0..64)) {
            let data: Vec<u8> = tokens.concat();
            let mut p = Parser::new(Limits { max_bulk: 64, max_key: 64, max_args: 8, max_query: 256 }, true);
            let mut buf = BytesMut::new();
            for chunk in data.chunks(3) {
                buf.extend_from_slice(chunk);
                loop {
                    match p.next(&mut buf) { Ok(Some(_)) => {}, Ok(None) => break, Err(_) => return Ok(()) }
                }
            }
        }

        /// Well-formed pipelines round-trip whatever the read boundaries.
        #[test]
        fn roundtrip(cmds in proptest::collection::vec(
                         proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..6), 1..8),
                     chunk in 1usize..64) {
            let wire = encode(&cmds);
            let mut p = authed();
            let mut buf = BytesMut::new();
            let mut got = Vec::new();
            for c in wire.chunks(chunk) {
                buf.extend_from_slice(c);
                while let Some(a) = p.next(&mut buf).unwrap() {
                    got.push(a.iter().map(|a| a.to_vec()).collect::<Vec<_>>());
                }
            }
            prop_assert_eq!(got, cmds);
            prop_assert!(buf.is_empty());
        }

        #[test]
        fn split_args_never_panics(line in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = split_args(&line);
        }
    }
}

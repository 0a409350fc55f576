//! Framing: cutting the connection's read buffer into requests.
//!
//! A request is either a RESP array of bulk strings (what every client
//! library sends) or an inline command, a plain line such as `PING` typed into
//! telnet or nc, which redis-protocol does not parse. For arrays this module
//! first walks the headers itself, because redis-protocol enforces none of
//! Redis's limits: it checks `proto-max-bulk-len` and the multibulk count
//! before any data is buffered, and it learns how long the frame is so an
//! incomplete frame is never re-decoded on every read (which would make a
//! large value quadratic). Once the whole frame is in the buffer,
//! redis-protocol decodes it into ranges of the buffer, and the arguments are
//! zero-copy slices of it.
//!
//! A protocol error is answered with redis-server's text and the connection
//! is closed, as redis-server does: after garbage, nothing that follows on
//! the stream can be trusted to be framed right.

use std::ops::Range;

use bytes::{Buf, Bytes, BytesMut};
use redis_protocol::resp2::decode::decode_range;
use redis_protocol::resp2::types::RangeFrame;

/// Requests shorter than this have their arguments copied out of the read
/// buffer; longer ones share it.
pub const COPY_ARGS_BELOW: usize = 1024;

/// The longest header or inline line Redis buffers before giving up.
const MAX_INLINE: usize = 64 * 1024;

/// Size limits the framer enforces.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// `proto-max-bulk-len`: the largest bulk string a client may send.
    pub max_bulk_len: usize,
    /// Whether the client has authenticated (unauthenticated clients get
    /// Redis's much smaller limits, so a stranger cannot make us buffer
    /// gigabytes).
    pub authenticated: bool,
}

/// A malformed request stream. The texts are redis-server's.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ProtocolError {
    /// A `*` count that is not a number or is too large.
    #[error("ERR Protocol error: invalid multibulk length")]
    InvalidMultibulkLength,
    /// A `$` length that is not a number, negative, or over the limit.
    #[error("ERR Protocol error: invalid bulk length")]
    InvalidBulkLength,
    /// Array count over 10 before AUTH.
    #[error("ERR Protocol error: unauthenticated multibulk length")]
    UnauthenticatedMultibulkLength,
    /// Bulk over 16 KiB before AUTH.
    #[error("ERR Protocol error: unauthenticated bulk length")]
    UnauthenticatedBulkLength,
    /// An array element that is not a bulk string.
    #[error("ERR Protocol error: expected '$', got '{0}'")]
    ExpectedDollar(char),
    /// A `*` header line over 64 KiB.
    #[error("ERR Protocol error: too big mbulk count string")]
    TooBigMultibulkCount,
    /// A `$` header line over 64 KiB.
    #[error("ERR Protocol error: too big bulk count string")]
    TooBigBulkCount,
    /// An inline line over 64 KiB.
    #[error("ERR Protocol error: too big inline request")]
    TooBigInline,
    /// An inline command with an unclosed quote.
    #[error("ERR Protocol error: unbalanced quotes in request")]
    UnbalancedQuotes,
    /// The frame did not decode (bad terminator and the like).
    #[error("ERR Protocol error: {0}")]
    Malformed(String),
}

/// A complete request at the front of the read buffer.
#[derive(Debug)]
pub enum Frame {
    /// Already taken off the buffer: an inline command (or an empty
    /// request, which Redis skips).
    Taken(Vec<Bytes>),
    /// A RESP array still in the buffer: its length and the ranges of its
    /// arguments, so a caller can look at them before copying anything.
    Array {
        /// Bytes the whole frame takes.
        len: usize,
        /// Where each argument is, from the start of the buffer.
        args: Vec<Range<usize>>,
    },
}

impl Frame {
    /// The arguments, taking the frame off the buffer.
    pub fn take_args(self, buf: &mut BytesMut) -> Vec<Bytes> {
        let (len, ranges) = match self {
            Frame::Taken(args) => return args,
            Frame::Array { len, args } => (len, args),
        };
        if len <= COPY_ARGS_BELOW {
            // A small request's arguments are copied out, and the buffer
            // stays uniquely owned: sharing it would cost an atomic
            // reference count update per argument clone and drop, which for
            // short commands costs more than the copies (a fifth of a GET
            // pipeline's time).
            let args = ranges
                .into_iter()
                .map(|r| Bytes::copy_from_slice(&buf[r]))
                .collect();
            buf.advance(len);
            return args;
        }
        // Large values are not copied: the arguments are slices of the frame.
        let bytes = buf.split_to(len).freeze();
        ranges.into_iter().map(|r| bytes.slice(r)).collect()
    }
}

/// The framer of one connection. It remembers how far it walked the
/// headers of a multibulk request that has not fully arrived, so each read
/// of a slowly sent request walks only the new bytes: a request of two
/// million arguments dripped in a few bytes at a time costs linear time, not
/// a walk over every header seen so far on every read. The read buffer only
/// grows at its end until the frame is taken off its front, so positions
/// into it stay valid between calls.
#[derive(Debug, Default)]
pub struct Framer {
    /// The walk of the multibulk at the front of the buffer, if one is
    /// under way.
    partial: Option<Partial>,
}

/// A multibulk whose element headers are walked up to `pos`.
#[derive(Debug)]
struct Partial {
    /// Elements the `*` header announced.
    count: usize,
    /// Elements walked so far (header and data in the buffer).
    walked: usize,
    /// Where the next element header starts, from the front of the buffer.
    pos: usize,
}

impl Framer {
    /// Finds the next complete request at the front of `buf`. `Ok(None)`
    /// means more bytes are needed; the next call resumes where this one
    /// stopped, so `buf` must keep its front until a frame is returned.
    pub fn next_frame(
        &mut self,
        buf: &mut BytesMut,
        limits: Limits,
    ) -> Result<Option<Frame>, ProtocolError> {
        if buf.is_empty() {
            self.partial = None;
            return Ok(None);
        }
        if buf[0] != b'*' {
            self.partial = None;
            return Ok(inline(buf)?.map(Frame::Taken));
        }
        let result = self.multibulk(buf, limits);
        if !matches!(result, Ok(None)) {
            self.partial = None;
        }
        result
    }

    fn multibulk(
        &mut self,
        buf: &mut BytesMut,
        limits: Limits,
    ) -> Result<Option<Frame>, ProtocolError> {
        let mut partial = match self.partial.take() {
            Some(p) => p,
            None => {
                let Some(end) = find_crlf(buf, 1) else {
                    return if buf.len() > MAX_INLINE {
                        Err(ProtocolError::TooBigMultibulkCount)
                    } else {
                        Ok(None)
                    };
                };
                let count = parse_len(&buf[1..end]).ok_or(ProtocolError::InvalidMultibulkLength)?;
                if count > i32::MAX as i64 {
                    return Err(ProtocolError::InvalidMultibulkLength);
                }
                if count > 10 && !limits.authenticated {
                    return Err(ProtocolError::UnauthenticatedMultibulkLength);
                }
                if count <= 0 {
                    let _ = buf.split_to(end + 2);
                    return Ok(Some(Frame::Taken(Vec::new())));
                }
                Partial {
                    count: count as usize,
                    walked: 0,
                    pos: end + 2,
                }
            }
        };
        // Walk the element headers to find where the frame ends, from where
        // the last call stopped.
        while partial.walked < partial.count {
            let pos = partial.pos;
            if pos >= buf.len() {
                self.partial = Some(partial);
                return Ok(None);
            }
            if buf[pos] != b'$' {
                return Err(ProtocolError::ExpectedDollar(buf[pos] as char));
            }
            let Some(hend) = find_crlf(buf, pos + 1) else {
                if buf.len() - pos > MAX_INLINE {
                    return Err(ProtocolError::TooBigBulkCount);
                }
                self.partial = Some(partial);
                return Ok(None);
            };
            let len = parse_len(&buf[pos + 1..hend]).ok_or(ProtocolError::InvalidBulkLength)?;
            if len < 0 || len as u64 > limits.max_bulk_len as u64 {
                return Err(ProtocolError::InvalidBulkLength);
            }
            if len > 16384 && !limits.authenticated {
                return Err(ProtocolError::UnauthenticatedBulkLength);
            }
            let next = hend + 2 + len as usize + 2;
            if next > buf.len() {
                // The header is checked; wait for the data, and come back
                // to this header (cheap) rather than past it.
                self.partial = Some(partial);
                return Ok(None);
            }
            partial.pos = next;
            partial.walked += 1;
        }
        let pos = partial.pos;
        // The whole frame is here: let redis-protocol decode it.
        let frame = match decode_range(&buf[..pos]) {
            Ok(Some((frame, used))) if used == pos => frame,
            Ok(_) => return Err(ProtocolError::Malformed("incomplete frame".into())),
            Err(e) => return Err(ProtocolError::Malformed(e.details().to_string())),
        };
        let RangeFrame::Array(items) = frame else {
            return Err(ProtocolError::Malformed("expected an array".into()));
        };
        let args = items
            .into_iter()
            .map(|item| match item {
                RangeFrame::BulkString((start, end)) => Ok(start..end),
                _ => Err(ProtocolError::Malformed("expected a bulk string".into())),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(Frame::Array { len: pos, args }))
    }
}

/// Finds the next complete request at the front of `buf`, with a fresh
/// [`Framer`] (for callers that see whole requests: tests, fuzzing).
pub fn next_frame(buf: &mut BytesMut, limits: Limits) -> Result<Option<Frame>, ProtocolError> {
    Framer::default().next_frame(buf, limits)
}

/// Takes the next complete request off the front of `buf`. `Ok(None)` means
/// more bytes are needed; an empty vector is a request with no arguments
/// (`*0`, a blank line), which Redis silently skips.
pub fn next_request(
    buf: &mut BytesMut,
    limits: Limits,
) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    Ok(next_frame(buf, limits)?.map(|f| f.take_args(buf)))
}

/// Finds `\r\n` at or after `from`; returns the index of the `\r`.
fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    // Headers (`*3`, `$5`) are a few bytes: a plain loop finds their end
    // before a SIMD search would have started.
    let near = buf.get(from..)?.iter().take(24).position(|&b| b == b'\r');
    if let Some(i) = near {
        if buf.get(from + i + 1) == Some(&b'\n') {
            return Some(from + i);
        }
    }
    let mut at = from;
    // Long lines (and a `\r` not followed by `\n`): memchr with SIMD.
    while let Some(i) = memchr::memchr(b'\r', buf.get(at..)?) {
        let r = at + i;
        if buf.get(r + 1) == Some(&b'\n') {
            return Some(r);
        }
        at = r + 1;
    }
    None
}

/// Parses a decimal integer strictly, as Redis's `string2ll` does: an
/// optional `-`, then `0` alone or digits not starting with `0`; no `+`,
/// no leading zeros, no `-0`, no spaces, nothing empty, no overflow.
fn parse_len(digits: &[u8]) -> Option<i64> {
    let (negative, body) = match digits.split_first()? {
        (b'-', rest) => (true, rest),
        _ => (false, digits),
    };
    match body {
        [b'0'] if !negative => return Some(0),
        [b'1'..=b'9', rest @ ..] if rest.iter().all(u8::is_ascii_digit) => {}
        _ => return None,
    }
    // The shape is right: the only way left to fail is overflow (and
    // `i64::MIN` parses, as in C).
    std::str::from_utf8(digits).ok()?.parse().ok()
}

fn inline(buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    // redis-server looks for the newline with `strchr`, which stops at a
    // NUL byte: a line with a NUL before its newline is never complete, and
    // the client waits until 64 KiB have piled up and it is told "too big
    // inline request". Doing the same keeps the two byte-for-byte alike (and
    // no NUL ever reaches `split_args`).
    let end = memchr::memchr2(b'\n', 0, buf);
    let Some(nl) = end.filter(|&i| buf[i] == b'\n') else {
        return if buf.len() > MAX_INLINE {
            Err(ProtocolError::TooBigInline)
        } else {
            Ok(None)
        };
    };
    let line = buf.split_to(nl + 1);
    let mut text = &line[..nl];
    if text.last() == Some(&b'\r') {
        text = &text[..text.len() - 1];
    }
    split_args(text).map(|args| Some(args.into_iter().map(Bytes::from).collect()))
}

/// C's `isspace`, which `sdssplitargs` uses: Rust's `is_ascii_whitespace`
/// leaves out the vertical tab.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Splits an inline command line the way Redis's `sdssplitargs` does:
/// whitespace separates arguments; "double quotes" take `\n \r \t \b \a \\
/// \" \xHH` escapes; 'single quotes' take `\'`; a closing quote must be
/// followed by whitespace or the end of the line.
pub fn split_args(line: &[u8]) -> Result<Vec<Vec<u8>>, ProtocolError> {
    let mut args = Vec::new();
    let mut i = 0;
    // A C string ends at its first NUL, and so does the line for Redis.
    let n = line.iter().position(|&b| b == 0).unwrap_or(line.len());
    loop {
        while i < n && is_c_space(line[i]) {
            i += 1;
        }
        if i >= n {
            return Ok(args);
        }
        let mut cur = Vec::new();
        let mut in_dq = false;
        let mut in_sq = false;
        loop {
            if in_dq {
                if i >= n {
                    return Err(ProtocolError::UnbalancedQuotes);
                }
                let c = line[i];
                if c == b'\\'
                    && i + 3 < n
                    && line[i + 1] == b'x'
                    && line[i + 2].is_ascii_hexdigit()
                    && line[i + 3].is_ascii_hexdigit()
                {
                    let hex = |b: u8| (b as char).to_digit(16).unwrap_or(0) as u8;
                    cur.push(hex(line[i + 2]) * 16 + hex(line[i + 3]));
                    i += 3;
                } else if c == b'\\' && i + 1 < n {
                    i += 1;
                    cur.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                } else if c == b'"' {
                    if i + 1 < n && !is_c_space(line[i + 1]) {
                        return Err(ProtocolError::UnbalancedQuotes);
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else if in_sq {
                if i >= n {
                    return Err(ProtocolError::UnbalancedQuotes);
                }
                let c = line[i];
                if c == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    i += 1;
                    cur.push(b'\'');
                } else if c == b'\'' {
                    if i + 1 < n && !is_c_space(line[i + 1]) {
                        return Err(ProtocolError::UnbalancedQuotes);
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else {
                if i >= n {
                    break;
                }
                match line[i] {
                    b' ' | b'\n' | b'\r' | b'\t' | b'\0' => break,
                    b'"' => in_dq = true,
                    b'\'' => in_sq = true,
                    c => cur.push(c),
                }
            }
            i += 1;
        }
        args.push(cur);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AUTHED: Limits = Limits {
        max_bulk_len: 512 * 1024 * 1024,
        authenticated: true,
    };

    fn parse(input: &[u8]) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        next_request(&mut BytesMut::from(input), AUTHED)
    }

    #[test]
    fn frames() {
        let got = parse(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n").unwrap().unwrap();
        assert_eq!(got, vec![Bytes::from("GET"), Bytes::from("k")]);
        assert_eq!(parse(b"*2\r\n$3\r\nGET\r\n$1\r\n").unwrap(), None);
        assert_eq!(
            parse(b"*1\r\n$99999999999\r\n"),
            Err(ProtocolError::InvalidBulkLength)
        );
        assert_eq!(parse(b"*x\r\n"), Err(ProtocolError::InvalidMultibulkLength));
        assert_eq!(
            parse(b"*1\r\n:1\r\n"),
            Err(ProtocolError::ExpectedDollar(':'))
        );
        assert_eq!(
            parse(b"PING\r\n").unwrap().unwrap(),
            vec![Bytes::from("PING")]
        );
    }

    #[test]
    fn inline_quoting() {
        assert_eq!(
            split_args(b"set \"a b\" 'c\\'d' \"\\x41\\n\"").unwrap(),
            vec![
                b"set".to_vec(),
                b"a b".to_vec(),
                b"c'd".to_vec(),
                b"A\n".to_vec()
            ]
        );
        assert_eq!(
            split_args(b"get \"abc"),
            Err(ProtocolError::UnbalancedQuotes)
        );
        assert_eq!(
            split_args(b"get \"a\"b"),
            Err(ProtocolError::UnbalancedQuotes)
        );
        assert!(split_args(b"   ").unwrap().is_empty());
    }

    #[test]
    fn inline_nul_and_c_whitespace_as_redis() {
        // A NUL ended the line (this once looped forever, pushing empty
        // arguments until the process ran out of memory).
        assert_eq!(
            split_args(b"set a\0b c").unwrap(),
            vec![b"set".to_vec(), b"a".to_vec()]
        );
        assert_eq!(split_args(b"\0 x").unwrap(), Vec::<Vec<u8>>::new());
        assert_eq!(
            split_args(b"get \"a\0b\""),
            Err(ProtocolError::UnbalancedQuotes)
        );
        // The vertical tab is whitespace between arguments and after a
        // closing quote, but part of an unquoted argument.
        assert_eq!(split_args(b"\x0bping").unwrap(), vec![b"ping".to_vec()]);
        assert_eq!(
            split_args(b"echo \"x\"\x0b").unwrap(),
            vec![b"echo".to_vec(), b"x".to_vec()]
        );
        assert_eq!(
            split_args(b"echo a\x0bb").unwrap(),
            vec![b"echo".to_vec(), b"a\x0bb".to_vec()]
        );
        // Before the newline, a NUL makes the line incomplete, as redis-server's
        // strchr sees it; past 64 KiB that is "too big inline request".
        assert_eq!(parse(b"SET a\0b c\r\nPING\r\n"), Ok(None));
        let mut big = b"x\0".to_vec();
        big.resize(MAX_INLINE + 10, b'y');
        assert_eq!(parse(&big), Err(ProtocolError::TooBigInline));
    }

    #[test]
    fn lengths_parse_as_string2ll() {
        for bad in [
            &b"*+1\r\n"[..],
            b"*01\r\n",
            b"*-0\r\n",
            b"* 1\r\n",
            b"*\r\n",
            b"*1 \r\n",
            b"*-\r\n",
            b"*99999999999999999999\r\n",
        ] {
            assert_eq!(
                parse(bad),
                Err(ProtocolError::InvalidMultibulkLength),
                "{bad:?}"
            );
        }
        for bad in [
            &b"*1\r\n$+4\r\nPING\r\n"[..],
            b"*1\r\n$04\r\nPING\r\n",
            b"*1\r\n$-0\r\n",
            b"*1\r\n$-1\r\n",
            b"*1\r\n$\r\n",
        ] {
            assert_eq!(parse(bad), Err(ProtocolError::InvalidBulkLength), "{bad:?}");
        }
        // What string2ll takes: 0 alone, negatives (a count <= 0 is an
        // empty request), i64::MIN.
        assert_eq!(parse(b"*0\r\n"), Ok(Some(vec![])));
        assert_eq!(parse(b"*-1\r\n"), Ok(Some(vec![])));
        assert_eq!(parse(b"*-9223372036854775808\r\n"), Ok(Some(vec![])));
        assert_eq!(parse(b"*1\r\n$0\r\n\r\n"), Ok(Some(vec![Bytes::new()])));
        assert_eq!(parse_len(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_len(b"9223372036854775808"), None);
    }

    /// A request fed a few bytes at a time gives the same arguments as one
    /// fed whole, and each call walks on from where the last one stopped:
    /// the count of walked elements never goes back while the frame is
    /// incomplete.
    #[test]
    fn partial_multibulk_resumes() {
        let n = 5_000;
        let mut whole = format!("*{n}\r\n").into_bytes();
        for i in 0..n {
            let arg = format!("a{i}");
            whole.extend_from_slice(format!("${}\r\n{arg}\r\n", arg.len()).as_bytes());
        }
        whole.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
        let mut framer = Framer::default();
        let mut buf = BytesMut::new();
        let mut walked = 0;
        let mut got = None;
        for chunk in whole.chunks(7) {
            buf.extend_from_slice(chunk);
            if got.is_none() {
                match framer.next_frame(&mut buf, AUTHED).unwrap() {
                    None => {
                        let now = framer.partial.as_ref().map_or(0, |p| p.walked);
                        assert!(now >= walked, "walk went back: {now} < {walked}");
                        walked = now;
                    }
                    Some(frame) => got = Some(frame.take_args(&mut buf)),
                }
            }
        }
        let args = got.unwrap();
        assert_eq!(args.len(), n);
        assert_eq!(args[n - 1], Bytes::from(format!("a{}", n - 1)));
        assert!(walked > n - 10);
        // The framer starts afresh on the next request.
        let ping = framer.next_frame(&mut buf, AUTHED).unwrap().unwrap();
        assert_eq!(ping.take_args(&mut buf), vec![Bytes::from("PING")]);
        assert!(buf.is_empty());
    }

    /// Random bytes, and valid requests with random damage, fed to the
    /// framer the way the connection loop does: every call must either take
    /// a request off the front, ask for more bytes, or fail, and a request
    /// never has more arguments than its bytes could hold.
    #[test]
    fn framing_always_makes_progress() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let pieces: [&[u8]; 10] = [
            b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
            b"*",
            b"$",
            b"\r\n",
            b"\n",
            b"\0",
            b"\"",
            b"'",
            b"-1",
            b"PING ",
        ];
        for _ in 0..20_000 {
            let mut input = Vec::new();
            for _ in 0..next() % 12 {
                match next() % 3 {
                    0 => input.push(next() as u8),
                    _ => input.extend_from_slice(pieces[(next() % 10) as usize]),
                }
            }
            let mut buf = BytesMut::from(&input[..]);
            for _ in 0..=input.len() {
                let before = buf.len();
                match next_request(&mut buf, AUTHED) {
                    Ok(Some(args)) => {
                        assert!(buf.len() < before, "no progress on {input:?}");
                        assert!(args.len() <= before, "{input:?}");
                    }
                    Ok(None) | Err(_) => break,
                }
            }
        }
    }
}

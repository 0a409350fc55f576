//! A minimal RESP2/RESP3 reply scanner.
//!
//! The load generator reads replies far more often than it looks inside them:
//! in the common case it only needs to know where a reply ends and whether it
//! is an error. The `redis-protocol` crate decodes every reply into an owned
//! frame tree (allocating for aggregates), which is the right tool for a
//! client library but needless work here: for an `LRANGE 0 999` reply it would
//! build a thousand frames only for us to drop them. This scanner walks the
//! bytes in place, borrows bulk payloads from the read buffer (so `--verify`
//! can compare values without copying) and skips aggregates with a single
//! counter of outstanding elements, no recursion and no allocation. It is
//! about forty lines of logic, which is a fair price for keeping the reader
//! off the profile.

use memchr::memchr;

/// What a complete reply turned out to be. Bulk and simple payloads borrow
/// from the caller's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply<'a> {
    /// `+...`: a status such as `OK`.
    Simple(&'a [u8]),
    /// `-...` or a RESP3 blob error `!`: the message, without the type byte.
    Error(&'a [u8]),
    /// `:...`
    Int(i64),
    /// `$...` or a RESP3 verbatim string `=` (its `txt:` prefix removed).
    Bulk(&'a [u8]),
    /// RESP3 `_`, or a RESP2 null bulk string or null array.
    Nil,
    /// An array, map or set with this many top-level elements (skipped).
    Aggregate(usize),
    /// A RESP3 out-of-band push; not a reply to any request.
    Push,
    /// Booleans, doubles, big numbers: valid, but never inspected.
    Other,
}

impl Reply<'_> {
    /// The message of an error reply, owned so it can outlive the receive
    /// buffer in an `Error`; `None` for any other reply.
    pub fn error_message(&self) -> Option<String> {
        match self {
            Reply::Error(e) => Some(String::from_utf8_lossy(e).into_owned()),
            _ => None,
        }
    }
}

/// Why some bytes are not RESP. Any of these ends the run: after one bad
/// reply the stream cannot be resynchronised.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtoError {
    /// A reply started with a byte that is no RESP2 or RESP3 type.
    #[error("unexpected type byte {0:#04x}")]
    Type(u8),
    /// A length or integer was empty, not decimal, or overflowed `i64`.
    #[error("malformed length or integer")]
    Number,
    /// A bulk payload was not followed by CRLF: its length was a lie.
    #[error("missing CRLF after bulk payload")]
    Terminator,
}

/// Parses a RESP integer or length, by hand because `str::parse` would
/// first need the bytes checked as UTF-8.
fn parse_int(s: &[u8]) -> Result<i64, ProtoError> {
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 19 {
        return Err(ProtoError::Number);
    }
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return Err(ProtoError::Number);
        }
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(i64::from(d - b'0')))
            .ok_or(ProtoError::Number)?;
    }
    Ok(if neg { -v } else { v })
}

/// Finds the line starting at `pos` (after the type byte). Returns the line
/// content range end and the position after CRLF.
#[inline]
fn line(buf: &[u8], pos: usize) -> Option<(usize, usize)> {
    let mut from = pos;
    loop {
        let i = from + memchr(b'\r', buf.get(from..)?)?;
        if i + 1 >= buf.len() {
            return None;
        }
        if buf[i + 1] == b'\n' {
            return Some((i, i + 2));
        }
        from = i + 1;
    }
}

/// A non-negative length as `usize` (0 if it does not fit, which no real
/// reply reaches).
fn count(n: i64) -> usize {
    usize::try_from(n).unwrap_or(0)
}

/// One header: the frame kind, where it ends (for scalars) and how many
/// nested elements follow it (for aggregates).
struct Header<'a> {
    reply: Reply<'a>,
    /// Where the next frame starts: after the payload for scalars, after
    /// the header line for aggregates.
    next: usize,
    /// Frames nested directly inside this one (twice the entries of a map).
    children: usize,
}

/// Reads the frame header at `pos`; `Ok(None)` when it is not all there yet.
#[inline]
fn header(buf: &[u8], pos: usize) -> Result<Option<Header<'_>>, ProtoError> {
    let Some(&t) = buf.get(pos) else {
        return Ok(None);
    };
    let Some((end, next)) = line(buf, pos + 1) else {
        return Ok(None);
    };
    let body = &buf[pos + 1..end];
    let h = |reply, next, children| {
        Ok(Some(Header {
            reply,
            next,
            children,
        }))
    };
    match t {
        b'+' => h(Reply::Simple(body), next, 0),
        b'-' => h(Reply::Error(body), next, 0),
        b':' => h(Reply::Int(parse_int(body)?), next, 0),
        b'_' => h(Reply::Nil, next, 0),
        b'#' | b',' | b'(' => h(Reply::Other, next, 0),
        b'$' | b'!' | b'=' => {
            let len = parse_int(body)?;
            if len < 0 {
                return h(Reply::Nil, next, 0);
            }
            let len = count(len);
            let stop = next + len;
            if buf.len() < stop + 2 {
                return Ok(None);
            }
            if &buf[stop..stop + 2] != b"\r\n" {
                return Err(ProtoError::Terminator);
            }
            let payload = &buf[next..stop];
            let reply = match t {
                b'$' => Reply::Bulk(payload),
                b'!' => Reply::Error(payload),
                // Verbatim strings carry a "txt:" format prefix.
                _ => Reply::Bulk(payload.get(4..).unwrap_or_default()),
            };
            h(reply, stop + 2, 0)
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let n = parse_int(body)?;
            if n < 0 {
                return h(Reply::Nil, next, 0);
            }
            let n = count(n);
            let children = if matches!(t, b'%' | b'|') { n * 2 } else { n };
            let reply = if t == b'>' {
                Reply::Push
            } else {
                Reply::Aggregate(n)
            };
            h(reply, next, children)
        }
        other => Err(ProtoError::Type(other)),
    }
}

/// Parses one complete reply at the start of `buf`. Returns `Ok(None)` when
/// more bytes are needed, else the reply and its encoded length.
pub fn parse(buf: &[u8]) -> Result<Option<(Reply<'_>, usize)>, ProtoError> {
    let mut pos = 0;
    // RESP3 attributes annotate the reply that follows them: skip them.
    loop {
        let Some(first) = header(buf, pos)? else {
            return Ok(None);
        };
        let is_attr = buf[pos] == b'|';
        let mut remaining = first.children;
        let mut p = first.next;
        while remaining > 0 {
            let Some(hd) = header(buf, p)? else {
                return Ok(None);
            };
            remaining = remaining - 1 + hd.children;
            p = hd.next;
        }
        if is_attr {
            pos = p;
            continue;
        }
        return Ok(Some((first.reply, p)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_and_partials() {
        assert_eq!(parse(b"+OK\r\n").unwrap(), Some((Reply::Simple(b"OK"), 5)));
        assert_eq!(parse(b":-12\r\n").unwrap(), Some((Reply::Int(-12), 6)));
        assert_eq!(
            parse(b"$3\r\nabc\r\n").unwrap(),
            Some((Reply::Bulk(b"abc"), 9))
        );
        assert_eq!(parse(b"$-1\r\n").unwrap(), Some((Reply::Nil, 5)));
        assert_eq!(parse(b"_\r\n").unwrap(), Some((Reply::Nil, 3)));
        assert_eq!(parse(b"$3\r\nab").unwrap(), None);
        assert_eq!(parse(b"+O").unwrap(), None);
        assert!(parse(b"?x\r\n").is_err());
    }

    #[test]
    fn aggregates_are_skipped_whole() {
        let b = b"*2\r\n$1\r\na\r\n*1\r\n:1\r\n+next\r\n";
        assert_eq!(parse(b).unwrap(), Some((Reply::Aggregate(2), 19)));
        assert_eq!(parse(&b[..17]).unwrap(), None);
        let m = b"%1\r\n+k\r\n+v\r\n";
        assert_eq!(parse(m).unwrap(), Some((Reply::Aggregate(1), m.len())));
        let a = b"|1\r\n+a\r\n+b\r\n:7\r\n";
        assert_eq!(parse(a).unwrap(), Some((Reply::Int(7), a.len())));
    }
}

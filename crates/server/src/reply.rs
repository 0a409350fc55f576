//! Replies, and their encoding into RESP2 or RESP3.
//!
//! Commands build a [`Reply`]; the connection loop encodes every reply of one
//! read straight into its single output buffer and writes that buffer once.
//! The encoder is a few lines written here rather than redis-protocol's
//! frame encoders: those want the reply first converted into their frame
//! types (an allocation per element) and represent a RESP3 map as a hash map,
//! which would lose the field order replies like HELLO and CONFIG GET have.
//! Decoding requests, where the crate's careful parsing pays, uses
//! redis-protocol (see `request.rs`).

use bytes::{BufMut, Bytes, BytesMut};

/// A reply to one command.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `+OK`.
    Ok,
    /// A status line, `+PONG`.
    Simple(&'static str),
    /// A status line built at run time (TYPE, CLIENT GETNAME's peers).
    Status(String),
    /// An error line; the text starts with its code (`ERR`, `WRONGTYPE`).
    /// Bytes, not a `String`: Redis echoes a client's bytes in some errors
    /// (an unknown command's arguments) exactly as sent.
    Error(Bytes),
    /// An integer.
    Int(i64),
    /// A bulk string.
    Bulk(Bytes),
    /// The null bulk string (`$-1` in RESP2, `_` in RESP3).
    Nil,
    /// The null array (`*-1` in RESP2, `_` in RESP3).
    NilArray,
    /// An array.
    Array(Vec<Reply>),
    /// A map: RESP3 `%`, a flat array in RESP2.
    Map(Vec<(Reply, Reply)>),
    /// A set: RESP3 `~`, an array in RESP2.
    Set(Vec<Reply>),
    /// A double: RESP3 `,`, a bulk string in RESP2.
    Double(f64),
    /// A double already formatted (GEOPOS's coordinates, in redis's
    /// `%.17Lf` "human" form): RESP3 `,`, a bulk string in RESP2.
    DoubleText(String),
    /// Verbatim text (INFO, CLIENT LIST): RESP3 `=txt:`, a bulk string in
    /// RESP2.
    Verbatim(String),
    /// No reply at all: a command's answer while CLIENT REPLY OFF or SKIP
    /// silences it (encodes to nothing).
    Silent,
    /// A boolean: RESP3 `#t`/`#f`, the integer 1 or 0 in RESP2.
    Bool(bool),
    /// A big number's digits: RESP3 `(`, a bulk string in RESP2.
    BigNum(String),
    /// RESP3 attributes (`|`) before a reply; in RESP2 only the reply.
    Attribute(Vec<(Reply, Reply)>, Box<Reply>),
    /// A RESP3 push message (`>`) sent just before a command's reply (DEBUG
    /// PROTOCOL push); only meaningful in RESP3.
    Pushed(Vec<Reply>, Box<Reply>),
    /// A push frame: RESP3 `>`, an array in RESP2 (pub/sub confirmations
    /// and messages).
    Push(Vec<Reply>),
    /// Several replies in a row, one command's answer (SUBSCRIBE to three
    /// channels answers three confirmations).
    Several(Vec<Reply>),
}

impl Reply {
    /// An error reply from its text.
    pub fn error(text: impl Into<String>) -> Reply {
        Reply::Error(Bytes::from(text.into()))
    }

    /// A bulk string from anything byte-like.
    pub fn bulk(data: impl Into<Bytes>) -> Reply {
        Reply::Bulk(data.into())
    }

    /// A bulk string or nil.
    pub fn bulk_or_nil(data: Option<Vec<u8>>) -> Reply {
        data.map_or(Reply::Nil, |d| Reply::Bulk(Bytes::from(d)))
    }

    /// What CLIENT REPLY OFF or SKIP leaves of the reply: its push frames,
    /// which redis sends whatever the reply mode (pub/sub confirmations).
    pub fn pushes_only(self) -> Reply {
        match self {
            Reply::Push(items) => Reply::Push(items),
            Reply::Several(replies) => {
                Reply::Several(replies.into_iter().map(Reply::pushes_only).collect())
            }
            _ => Reply::Silent,
        }
    }

    /// Encodes the reply at the end of `out` for the given protocol version
    /// (2 or 3).
    pub fn encode(&self, out: &mut BytesMut, resp3: bool) {
        match self {
            Reply::Ok => out.put_slice(b"+OK\r\n"),
            Reply::Silent => {}
            Reply::Simple(s) => line(out, b'+', s.as_bytes()),
            Reply::Status(s) => line(out, b'+', s.as_bytes()),
            Reply::Error(e) => {
                // An error line must not contain a line break.
                out.put_u8(b'-');
                out.extend(
                    e.iter()
                        .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
                );
                out.put_slice(b"\r\n");
            }
            Reply::Int(n) => {
                out.put_u8(b':');
                put_int(out, *n);
                out.put_slice(b"\r\n");
            }
            Reply::Bulk(b) => bulk(out, b),
            Reply::Nil => out.put_slice(if resp3 { b"_\r\n" } else { b"$-1\r\n" }),
            Reply::NilArray => out.put_slice(if resp3 { b"_\r\n" } else { b"*-1\r\n" }),
            Reply::Array(items) => {
                header(out, b'*', items.len());
                for item in items {
                    item.encode(out, resp3);
                }
            }
            Reply::Set(items) => {
                header(out, if resp3 { b'~' } else { b'*' }, items.len());
                for item in items {
                    item.encode(out, resp3);
                }
            }
            Reply::Map(pairs) => {
                if resp3 {
                    header(out, b'%', pairs.len());
                } else {
                    header(out, b'*', pairs.len() * 2);
                }
                for (k, v) in pairs {
                    k.encode(out, resp3);
                    v.encode(out, resp3);
                }
            }
            Reply::Double(d) => {
                let text = format_double(*d);
                if resp3 {
                    line(out, b',', text.as_bytes());
                } else {
                    bulk(out, text.as_bytes());
                }
            }
            Reply::DoubleText(text) => {
                if resp3 {
                    line(out, b',', text.as_bytes());
                } else {
                    bulk(out, text.as_bytes());
                }
            }
            Reply::Bool(on) => match (resp3, on) {
                (true, true) => out.put_slice(b"#t\r\n"),
                (true, false) => out.put_slice(b"#f\r\n"),
                (false, true) => out.put_slice(b":1\r\n"),
                (false, false) => out.put_slice(b":0\r\n"),
            },
            Reply::BigNum(digits) => {
                if resp3 {
                    line(out, b'(', digits.as_bytes());
                } else {
                    bulk(out, digits.as_bytes());
                }
            }
            Reply::Attribute(pairs, reply) => {
                if resp3 {
                    header(out, b'|', pairs.len());
                    for (k, v) in pairs {
                        k.encode(out, resp3);
                        v.encode(out, resp3);
                    }
                }
                reply.encode(out, resp3);
            }
            Reply::Pushed(items, reply) => {
                header(out, if resp3 { b'>' } else { b'*' }, items.len());
                for item in items {
                    item.encode(out, resp3);
                }
                reply.encode(out, resp3);
            }
            Reply::Push(items) => {
                header(out, if resp3 { b'>' } else { b'*' }, items.len());
                for item in items {
                    item.encode(out, resp3);
                }
            }
            Reply::Several(replies) => {
                for r in replies {
                    r.encode(out, resp3);
                }
            }
            Reply::Verbatim(text) => {
                if resp3 {
                    header(out, b'=', text.len() + 4);
                    out.put_slice(b"txt:");
                    out.put_slice(text.as_bytes());
                    out.put_slice(b"\r\n");
                } else {
                    bulk(out, text.as_bytes());
                }
            }
        }
    }
}

/// Formats a double as redis-server 7.0's `addReplyDouble` does: C's
/// `%.17g` (17 significant digits, trailing zeros dropped, an exponent
/// below 1e-4 or from 1e17 on: `0.10000000000000001`, `1e+100`), and
/// `inf`/`-inf`. Sorted-set scores are the doubles replied.
pub fn format_double(d: f64) -> String {
    if d.is_infinite() {
        return if d > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if d.is_nan() {
        return "nan".into();
    }
    if d == 0.0 {
        return if d.is_sign_negative() { "-0" } else { "0" }.into();
    }
    // Whole scores (the common case: counts, timestamps) below 1e17 print
    // as the integer, which is what 17 significant digits show of them;
    // the general path below is ten times slower.
    if d.fract() == 0.0 && d.abs() < 1e17 {
        return (d as i64).to_string();
    }
    // Rounded to 17 significant digits first: `%g` picks its style by the
    // exponent after rounding.
    let sci = format!("{d:.16e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if !(-4..17).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{}e{sign}{:02}", trim(mantissa), exp.unsigned_abs());
    }
    // The same 17 digits with the point moved (formatting again costs as
    // much as the first time).
    let (neg, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let mut out = String::with_capacity(24);
    if neg {
        out.push('-');
    }
    if exp >= 0 {
        let point = (exp + 1) as usize;
        out.push_str(&digits[..point]);
        out.push('.');
        out.push_str(&digits[point..]);
    } else {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-exp - 1) as usize));
        out.push_str(&digits);
    }
    trim(&out)
}

fn put_int(out: &mut BytesMut, n: i64) {
    let mut buf = itoa_buf(n);
    out.put_slice(buf.as_bytes_mut());
}

/// Small stack formatting of an integer, without going through `fmt`.
fn itoa_buf(n: i64) -> ItoaBuf {
    let mut b = ItoaBuf {
        data: [0; 20],
        start: 20,
    };
    let neg = n < 0;
    let mut v = n.unsigned_abs();
    loop {
        b.start -= 1;
        b.data[b.start] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    if neg {
        b.start -= 1;
        b.data[b.start] = b'-';
    }
    b
}

struct ItoaBuf {
    data: [u8; 20],
    start: usize,
}

impl ItoaBuf {
    fn as_bytes_mut(&mut self) -> &[u8] {
        &self.data[self.start..]
    }
}

fn header(out: &mut BytesMut, kind: u8, len: usize) {
    out.put_u8(kind);
    put_int(out, len as i64);
    out.put_slice(b"\r\n");
}

fn line(out: &mut BytesMut, kind: u8, text: &[u8]) {
    out.put_u8(kind);
    out.put_slice(text);
    out.put_slice(b"\r\n");
}

/// Appends a bulk string: `$<len>\r\n<data>\r\n`.
pub(crate) fn bulk(out: &mut BytesMut, data: &[u8]) {
    header(out, b'$', data.len());
    out.put_slice(data);
    out.put_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(r: Reply, resp3: bool) -> Vec<u8> {
        let mut b = BytesMut::new();
        r.encode(&mut b, resp3);
        b.to_vec()
    }

    /// What redis-server 7.0.15 prints (checked with redis-cli).
    #[test]
    fn doubles_print_as_percent_17g() {
        for (d, text) in [
            (0.1, "0.10000000000000001"),
            (0.3, "0.29999999999999999"),
            (1e100, "1e+100"),
            (3.0, "3"),
            (-2.5, "-2.5"),
            (1e-5, "1.0000000000000001e-05"),
            (1.5e17, "1.5e+17"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (1e16, "10000000000000000"),
            (0.0001, "0.0001"),
            (-0.0, "-0"),
            (f64::INFINITY, "inf"),
            (f64::MAX, "1.7976931348623157e+308"),
            (5e-324, "4.9406564584124654e-324"),
            // From C's printf("%.17g"): the point moved within the digits.
            (12345.678, "12345.678"),
            (-0.00012345, "-0.00012344999999999999"),
            (1234567890123456.8, "1234567890123456.8"),
            (99999999999999999.0, "1e+17"),
            (9007199254740994.0, "9007199254740994"),
            (-123.0, "-123"),
            (0.00030000000000000003, "0.00030000000000000003"),
            (7.25, "7.25"),
            (1000000000000000.5, "1000000000000000.5"),
        ] {
            assert_eq!(format_double(d), text, "{d:e}");
        }
    }

    #[test]
    fn resp2_and_resp3_encodings() {
        assert_eq!(enc(Reply::Int(-42), false), b":-42\r\n");
        assert_eq!(
            enc(Reply::Int(i64::MIN), false),
            b":-9223372036854775808\r\n"
        );
        assert_eq!(enc(Reply::Nil, false), b"$-1\r\n");
        assert_eq!(enc(Reply::Nil, true), b"_\r\n");
        assert_eq!(enc(Reply::bulk("hi"), false), b"$2\r\nhi\r\n");
        let m = Reply::Map(vec![(Reply::bulk("a"), Reply::Int(1))]);
        assert_eq!(enc(m.clone(), false), b"*2\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(enc(m, true), b"%1\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(enc(Reply::Double(1.5), true), b",1.5\r\n");
        assert_eq!(enc(Reply::Double(3.0), false), b"$1\r\n3\r\n");
        assert_eq!(enc(Reply::Double(f64::NEG_INFINITY), true), b",-inf\r\n");
        assert_eq!(enc(Reply::error("ERR a\r\nb"), false), b"-ERR a  b\r\n");
    }
}

//! The RDB wire format's primitives, shared by the object codecs
//! (`object.rs`) and the stream codec (`stream.rs`): the byte source with
//! its running CRC-64 and its length and string readers, and the length and
//! string writers.

use std::io::Read;

use crate::{lzf, Crc64, Error};

/// Collections reserve at most this many slots from a declared count; the
/// rest grows as elements actually arrive.
const MAX_RESERVE: u64 = 4096;

pub(crate) fn reserve(n: u64) -> usize {
    n.min(MAX_RESERVE) as usize
}

pub(crate) const TRUNCATED: Error = Error::BadData("unexpected end of data");

/// A length, or the special string encoding a length byte can announce.
pub(crate) enum Len {
    Plain(u64),
    Encoded(u8),
}

/// A byte source that keeps the CRC-64 of what it hands out, if asked to.
pub(crate) struct Input<R> {
    inner: R,
    crc: Option<Crc64>,
}

impl<R: Read> Input<R> {
    pub(crate) fn new(inner: R, checksum: bool) -> Self {
        Input {
            inner,
            crc: checksum.then(Crc64::new),
        }
    }

    /// The checksum of everything read so far (0 when not kept).
    pub(crate) fn crc(&self) -> u64 {
        self.crc.map_or(0, |c| c.value())
    }

    #[cfg(test)]
    pub(crate) fn into_inner(self) -> R {
        self.inner
    }

    fn fill(&mut self, buf: &mut [u8]) -> Result<(), Error> {
        match self.inner.read_exact(buf) {
            Ok(()) => {
                if let Some(c) = &mut self.crc {
                    c.update(buf);
                }
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(TRUNCATED),
            Err(e) => Err(Error::Io(e)),
        }
    }

    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        let mut buf = [0u8; N];
        self.fill(&mut buf)?;
        Ok(buf)
    }

    pub(crate) fn byte(&mut self) -> Result<u8, Error> {
        Ok(self.array::<1>()?[0])
    }

    /// Exactly `len` bytes. The buffer grows as the bytes arrive, so a
    /// declared length larger than the input costs nothing.
    pub(crate) fn bytes(&mut self, len: u64) -> Result<Vec<u8>, Error> {
        let mut v = Vec::with_capacity(len.min(64 * 1024) as usize);
        let got = (&mut self.inner).take(len).read_to_end(&mut v)?;
        if got as u64 != len {
            return Err(TRUNCATED);
        }
        if let Some(c) = &mut self.crc {
            c.update(&v);
        }
        Ok(v)
    }

    pub(crate) fn len_or_encoding(&mut self) -> Result<Len, Error> {
        let b = self.byte()?;
        Ok(match b >> 6 {
            0 => Len::Plain(u64::from(b & 0x3f)),
            1 => Len::Plain((u64::from(b & 0x3f) << 8) | u64::from(self.byte()?)),
            2 => match b {
                0x80 => Len::Plain(u64::from(u32::from_be_bytes(self.array()?))),
                0x81 => Len::Plain(u64::from_be_bytes(self.array()?)),
                _ => return Err(Error::BadData("unknown length encoding")),
            },
            _ => Len::Encoded(b & 0x3f),
        })
    }

    /// A length (an element count, a database number, a time).
    pub(crate) fn len(&mut self) -> Result<u64, Error> {
        match self.len_or_encoding()? {
            Len::Plain(n) => Ok(n),
            Len::Encoded(_) => Err(Error::BadData("encoded value where a length belongs")),
        }
    }

    /// A string in any of its encodings.
    pub(crate) fn string(&mut self) -> Result<Vec<u8>, Error> {
        match self.len_or_encoding()? {
            Len::Plain(n) => self.bytes(n),
            Len::Encoded(0) => Ok((self.byte()? as i8).to_string().into_bytes()),
            Len::Encoded(1) => Ok(i16::from_le_bytes(self.array()?).to_string().into_bytes()),
            Len::Encoded(2) => Ok(i32::from_le_bytes(self.array()?).to_string().into_bytes()),
            Len::Encoded(3) => {
                let clen = self.len()?;
                let len = self.len()?;
                let compressed = self.bytes(clen)?;
                let len = usize::try_from(len).map_err(|_| Error::BadData("LZF length"))?;
                lzf::decompress(&compressed, len).ok_or(Error::BadData("invalid LZF data"))
            }
            Len::Encoded(_) => Err(Error::BadData("unknown string encoding")),
        }
    }

    /// A score in the text form of type 3 sorted sets.
    pub(crate) fn text_double(&mut self) -> Result<f64, Error> {
        match self.byte()? {
            255 => Ok(f64::NEG_INFINITY),
            254 => Ok(f64::INFINITY),
            253 => Ok(f64::NAN),
            n => {
                let raw = self.bytes(u64::from(n))?;
                parse_double(&raw).ok_or(Error::BadData("invalid double"))
            }
        }
    }

    pub(crate) fn binary_double(&mut self) -> Result<f64, Error> {
        Ok(f64::from_le_bytes(self.array()?))
    }
}

/// Appends an RDB length.
pub(crate) fn put_len(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.push(0x40 | (n >> 8) as u8);
        out.push(n as u8);
    } else if n <= u64::from(u32::MAX) {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// The integer `s` spells, if it is the canonical decimal form of one
/// (what Redis's `string2ll` and `ll2string` agree on).
fn canonical_int(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let v: i64 = std::str::from_utf8(s).ok()?.parse().ok()?;
    (v.to_string().as_bytes() == s).then_some(v)
}

/// Appends a string: integer-encoded when it is a canonical integer that
/// fits 32 bits, LZF-compressed when it is over 20 bytes and compresses by
/// more than 4, plain otherwise (Redis's `rdbSaveRawString`).
pub(crate) fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    if s.len() <= 11 {
        if let Some(v) = canonical_int(s) {
            if let Ok(v) = i8::try_from(v) {
                out.extend_from_slice(&[0xc0, v as u8]);
                return;
            } else if let Ok(v) = i16::try_from(v) {
                out.push(0xc1);
                out.extend_from_slice(&v.to_le_bytes());
                return;
            } else if let Ok(v) = i32::try_from(v) {
                out.push(0xc2);
                out.extend_from_slice(&v.to_le_bytes());
                return;
            }
        }
    }
    if s.len() > 20 {
        if let Some(c) = lzf::compress(s, s.len() - 4) {
            out.push(0xc3);
            put_len(out, c.len() as u64);
            put_len(out, s.len() as u64);
            out.extend_from_slice(&c);
            return;
        }
    }
    put_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// A double as C's `strtod` reads Redis's renderings of one ("inf",
/// "-inf", "nan", decimal and exponent forms).
pub(crate) fn parse_double(raw: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(raw).ok()?;
    s.trim_start().parse::<f64>().ok()
}

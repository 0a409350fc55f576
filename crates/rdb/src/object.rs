//! One serialized value: the RDB object encodings, read from any byte
//! source and written to a buffer.
//!
//! An object is a type byte followed by a body built from two primitives.
//! A *length* takes one byte (six bits), two (fourteen bits), or a marker
//! byte and a big-endian 32- or 64-bit number; a first byte with both top
//! bits set marks instead a *special string encoding* in its low six bits.
//! A *string* is a length and that many bytes, or one of the special
//! encodings: an 8-, 16- or 32-bit little-endian integer (the string is its
//! decimal form), or an LZF-compressed string (compressed length, full
//! length, compressed bytes). The plain types are sequences of strings
//! (with scores for sorted sets); the compact types are one string holding
//! a packed structure (see `packed`).

use std::io::Read;

use hashbrown::HashSet;

use crate::packed::{self, Elem};
use crate::{lzf, Crc64, Error, Value};

pub(crate) const TYPE_STRING: u8 = 0;
pub(crate) const TYPE_LIST: u8 = 1;
pub(crate) const TYPE_SET: u8 = 2;
pub(crate) const TYPE_ZSET: u8 = 3;
pub(crate) const TYPE_HASH: u8 = 4;
pub(crate) const TYPE_ZSET_2: u8 = 5;
pub(crate) const TYPE_MODULE: u8 = 6;
pub(crate) const TYPE_MODULE_2: u8 = 7;
pub(crate) const TYPE_HASH_ZIPMAP: u8 = 9;
pub(crate) const TYPE_LIST_ZIPLIST: u8 = 10;
pub(crate) const TYPE_SET_INTSET: u8 = 11;
pub(crate) const TYPE_ZSET_ZIPLIST: u8 = 12;
pub(crate) const TYPE_HASH_ZIPLIST: u8 = 13;
pub(crate) const TYPE_LIST_QUICKLIST: u8 = 14;
pub(crate) const TYPE_STREAM_LISTPACKS: u8 = 15;
pub(crate) const TYPE_HASH_LISTPACK: u8 = 16;
pub(crate) const TYPE_ZSET_LISTPACK: u8 = 17;
pub(crate) const TYPE_LIST_QUICKLIST_2: u8 = 18;
pub(crate) const TYPE_STREAM_LISTPACKS_2: u8 = 19;

/// Whether Redis 7.0 knows `t` as a value type (`rdbIsObjectType`).
pub(crate) fn is_object_type(t: u8) -> bool {
    t <= 7 || (9..=19).contains(&t)
}

/// Collections reserve at most this many slots from a declared count; the
/// rest grows as elements actually arrive.
const MAX_RESERVE: u64 = 4096;

fn reserve(n: u64) -> usize {
    n.min(MAX_RESERVE) as usize
}

const TRUNCATED: Error = Error::BadData("unexpected end of data");

/// A length, or the special string encoding a length byte can announce.
enum Len {
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

    fn len_or_encoding(&mut self) -> Result<Len, Error> {
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
    fn text_double(&mut self) -> Result<f64, Error> {
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

    fn binary_double(&mut self) -> Result<f64, Error> {
        Ok(f64::from_le_bytes(self.array()?))
    }
}

/// A double as C's `strtod` reads Redis's renderings of one ("inf",
/// "-inf", "nan", decimal and exponent forms).
fn parse_double(raw: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(raw).ok()?;
    s.trim_start().parse::<f64>().ok()
}

/// A hash field and its value.
type Pair = (Vec<u8>, Vec<u8>);

/// What one object decoded to: a value, or a module value that was
/// skipped (by its module type name).
pub(crate) enum Decoded {
    Value(Value),
    Module(String),
}

fn dedup_check<'a>(members: impl Iterator<Item = &'a [u8]>, n: usize) -> Result<(), Error> {
    let mut seen: HashSet<&[u8], foldhash::fast::RandomState> =
        HashSet::with_capacity_and_hasher(n, Default::default());
    for m in members {
        if !seen.insert(m) {
            return Err(Error::BadData("duplicate member"));
        }
    }
    Ok(())
}

fn non_empty<T>(v: Vec<T>) -> Result<Vec<T>, Error> {
    if v.is_empty() {
        Err(Error::EmptyKey)
    } else {
        Ok(v)
    }
}

fn pairs(elems: Vec<Elem<'_>>) -> Result<Vec<Pair>, Error> {
    if !elems.len().is_multiple_of(2) {
        return Err(Error::BadData("odd number of elements in a pair encoding"));
    }
    Ok(elems
        .chunks_exact(2)
        .map(|c| (c[0].to_bytes(), c[1].to_bytes()))
        .collect())
}

fn zset_pairs(elems: Vec<Elem<'_>>) -> Result<Vec<(Vec<u8>, f64)>, Error> {
    if !elems.len().is_multiple_of(2) {
        return Err(Error::BadData("odd number of elements in a pair encoding"));
    }
    elems
        .chunks_exact(2)
        .map(|c| {
            let score = match c[1] {
                Elem::Int(i) => i as f64,
                Elem::Str(s) => parse_double(s).ok_or(Error::BadData("invalid zset score"))?,
            };
            if score.is_nan() {
                return Err(Error::BadData("NaN zset score"));
            }
            Ok((c[0].to_bytes(), score))
        })
        .collect()
}

fn hash_value(h: Vec<Pair>) -> Result<Decoded, Error> {
    let h = non_empty(h)?;
    dedup_check(h.iter().map(|(f, _)| f.as_slice()), h.len())?;
    Ok(Decoded::Value(Value::Hash(h)))
}

fn zset_value(z: Vec<(Vec<u8>, f64)>) -> Result<Decoded, Error> {
    let z = non_empty(z)?;
    dedup_check(z.iter().map(|(m, _)| m.as_slice()), z.len())?;
    Ok(Decoded::Value(Value::ZSet(z)))
}

/// The name Redis gives a module type from the 54 high bits of its id.
pub(crate) fn module_type_name(id: u64) -> String {
    const CHARSET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut id = id >> 10;
    let mut name = [0u8; 9];
    for slot in name.iter_mut().rev() {
        *slot = CHARSET[(id & 63) as usize];
        id >>= 6;
    }
    String::from_utf8_lossy(&name).into_owned()
}

/// Reads the body of an object of RDB type `t`.
pub(crate) fn read_object<R: Read>(inp: &mut Input<R>, t: u8) -> Result<Decoded, Error> {
    let value = match t {
        TYPE_STRING => Value::String(inp.string()?),
        TYPE_LIST => {
            let n = inp.len()?;
            let mut v = Vec::with_capacity(reserve(n));
            for _ in 0..n {
                v.push(inp.string()?);
            }
            Value::List(non_empty(v)?)
        }
        TYPE_SET => {
            let n = inp.len()?;
            let mut v = Vec::with_capacity(reserve(n));
            for _ in 0..n {
                v.push(inp.string()?);
            }
            let v = non_empty(v)?;
            dedup_check(v.iter().map(Vec::as_slice), v.len())?;
            Value::Set(v)
        }
        TYPE_ZSET | TYPE_ZSET_2 => {
            let n = inp.len()?;
            let mut v = Vec::with_capacity(reserve(n));
            for _ in 0..n {
                let member = inp.string()?;
                let score = if t == TYPE_ZSET_2 {
                    inp.binary_double()?
                } else {
                    inp.text_double()?
                };
                if score.is_nan() {
                    return Err(Error::BadData("NaN zset score"));
                }
                v.push((member, score));
            }
            return zset_value(v);
        }
        TYPE_HASH => {
            let n = inp.len()?;
            let mut v = Vec::with_capacity(reserve(n));
            for _ in 0..n {
                let field = inp.string()?;
                let value = inp.string()?;
                v.push((field, value));
            }
            return hash_value(v);
        }
        TYPE_LIST_QUICKLIST | TYPE_LIST_QUICKLIST_2 => {
            let nodes = inp.len()?;
            let mut v = Vec::new();
            for _ in 0..nodes {
                let plain = if t == TYPE_LIST_QUICKLIST_2 {
                    match inp.len()? {
                        1 => true,
                        2 => false,
                        _ => return Err(Error::BadData("quicklist container")),
                    }
                } else {
                    false
                };
                let data = inp.string()?;
                if data.is_empty() {
                    return Err(Error::BadData("empty quicklist node"));
                }
                if plain {
                    v.push(data);
                } else {
                    let elems = if t == TYPE_LIST_QUICKLIST_2 {
                        packed::listpack(&data)?
                    } else {
                        packed::ziplist(&data)?
                    };
                    v.extend(elems.into_iter().map(Elem::to_bytes));
                }
            }
            Value::List(non_empty(v)?)
        }
        TYPE_LIST_ZIPLIST => {
            let data = inp.string()?;
            let elems = packed::ziplist(&data)?;
            Value::List(non_empty(elems.into_iter().map(Elem::to_bytes).collect())?)
        }
        TYPE_SET_INTSET => {
            let data = inp.string()?;
            let ints = non_empty(packed::intset(&data)?)?;
            Value::Set(
                ints.into_iter()
                    .map(|i| i.to_string().into_bytes())
                    .collect(),
            )
        }
        TYPE_HASH_ZIPMAP => {
            let data = inp.string()?;
            let h = packed::zipmap(&data)?
                .into_iter()
                .map(|(f, v)| (f.to_vec(), v.to_vec()))
                .collect();
            return hash_value(h);
        }
        TYPE_HASH_ZIPLIST | TYPE_HASH_LISTPACK => {
            let data = inp.string()?;
            let elems = if t == TYPE_HASH_LISTPACK {
                packed::listpack(&data)?
            } else {
                packed::ziplist(&data)?
            };
            return hash_value(pairs(elems)?);
        }
        TYPE_ZSET_ZIPLIST | TYPE_ZSET_LISTPACK => {
            let data = inp.string()?;
            let elems = if t == TYPE_ZSET_LISTPACK {
                packed::listpack(&data)?
            } else {
                packed::ziplist(&data)?
            };
            return zset_value(zset_pairs(elems)?);
        }
        TYPE_MODULE_2 => {
            let id = inp.len()?;
            skip_module_value(inp)?;
            return Ok(Decoded::Module(module_type_name(id)));
        }
        TYPE_STREAM_LISTPACKS | TYPE_STREAM_LISTPACKS_2 => Value::Stream(Box::new(
            crate::stream::read_stream(inp, t == TYPE_STREAM_LISTPACKS_2)?,
        )),
        TYPE_MODULE => return Err(Error::Unsupported(t)),
        _ => return Err(Error::BadData("unknown RDB type")),
    };
    Ok(Decoded::Value(value))
}

/// Walks a self-describing (type 7) module value to its end marker.
pub(crate) fn skip_module_value<R: Read>(inp: &mut Input<R>) -> Result<(), Error> {
    loop {
        match inp.len()? {
            0 => return Ok(()),
            1 | 2 => {
                inp.len_or_encoding()?;
            }
            3 => {
                inp.array::<4>()?;
            }
            4 => {
                inp.array::<8>()?;
            }
            5 => {
                inp.string()?;
            }
            _ => return Err(Error::BadData("unknown module opcode")),
        }
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

/// The RDB type byte `v` is written with (the plain encodings).
pub(crate) fn type_of(v: &Value) -> u8 {
    match v {
        Value::String(_) => TYPE_STRING,
        Value::List(_) => TYPE_LIST,
        Value::Set(_) => TYPE_SET,
        Value::Hash(_) => TYPE_HASH,
        Value::ZSet(_) => TYPE_ZSET_2,
        Value::Stream(_) => TYPE_STREAM_LISTPACKS_2,
    }
}

/// Appends the body of `v` (everything after the type byte).
pub(crate) fn put_body(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::String(s) => put_string(out, s),
        Value::List(items) | Value::Set(items) => {
            put_len(out, items.len() as u64);
            for i in items {
                put_string(out, i);
            }
        }
        Value::Hash(pairs) => {
            put_len(out, pairs.len() as u64);
            for (f, val) in pairs {
                put_string(out, f);
                put_string(out, val);
            }
        }
        Value::ZSet(pairs) => {
            put_len(out, pairs.len() as u64);
            for (m, score) in pairs {
                put_string(out, m);
                out.extend_from_slice(&score.to_le_bytes());
            }
        }
        Value::Stream(s) => crate::stream::put_stream(out, s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_round_trip() {
        for n in [
            0u64,
            1,
            63,
            64,
            16383,
            16384,
            u32::MAX as u64,
            u32::MAX as u64 + 1,
            u64::MAX,
        ] {
            let mut b = Vec::new();
            put_len(&mut b, n);
            let mut inp = Input::new(&b[..], false);
            assert_eq!(inp.len().unwrap(), n);
        }
    }

    #[test]
    fn strings_round_trip() {
        let cases: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"0".to_vec(),
            b"-128".to_vec(),
            b"127".to_vec(),
            b"-32768".to_vec(),
            b"2147483647".to_vec(),
            b"-2147483648".to_vec(),
            b"2147483648".to_vec(),
            b"007".to_vec(),
            b"-0".to_vec(),
            b"+1".to_vec(),
            b"x".repeat(100),
            (0..300u32).map(|i| i as u8).collect(),
        ];
        for s in cases {
            let mut b = Vec::new();
            put_string(&mut b, &s);
            let mut inp = Input::new(&b[..], false);
            assert_eq!(inp.string().unwrap(), s);
            assert!(inp.into_inner().is_empty());
        }
    }

    #[test]
    fn huge_declared_length_allocates_nothing_large() {
        // A 64-bit length of 2^62 followed by three bytes.
        let mut b = vec![0x81];
        b.extend_from_slice(&(1u64 << 62).to_be_bytes());
        b.extend_from_slice(b"abc");
        assert!(Input::new(&b[..], false).string().is_err());
        // A list claiming 2^62 elements.
        let mut b = vec![0x81];
        b.extend_from_slice(&(1u64 << 62).to_be_bytes());
        assert!(read_object(&mut Input::new(&b[..], false), TYPE_LIST).is_err());
    }

    #[test]
    fn module_names() {
        // Redis's own example: "mytype-AB" style names round-trip through
        // the 9x6-bit packing.
        let charset = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let name = b"MyType-Ab";
        let mut id = 0u64;
        for c in name {
            id = (id << 6) | charset.iter().position(|x| x == c).unwrap() as u64;
        }
        assert_eq!(module_type_name((id << 10) | 3), "MyType-Ab");
    }
}

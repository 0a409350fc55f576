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
use crate::wire::{parse_double, put_len, put_string, reserve, Input};
use crate::{Error, Value};

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

//! Redis's packed encodings, as they appear inside RDB strings: listpack,
//! ziplist, intset and zipmap.
//!
//! Each decoder takes the whole blob (already read, so its size is known
//! and bounded by the input) and returns its elements in order, integers
//! rendered as decimal the way Redis renders them. Every header field is
//! checked against the blob: the declared total size must be the blob's
//! size, every entry must fit before the terminator, a listpack entry's
//! back-length and a ziplist entry's previous-length must agree with the
//! entry they describe, an intset must be sorted without duplicates, and a
//! declared element count (where it is not the "unknown" marker) must match
//! what was found. That is Redis's deep integrity validation
//! (`sanitize-dump-payload yes`), done always: a payload that passes cannot
//! surprise the code that stores it.

use crate::Error;

/// One element of a packed blob: a string slice or an integer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Elem<'a> {
    Str(&'a [u8]),
    Int(i64),
}

impl Elem<'_> {
    /// The element as Redis returns it to a client: integers in decimal.
    pub(crate) fn to_bytes(self) -> Vec<u8> {
        match self {
            Elem::Str(s) => s.to_vec(),
            Elem::Int(i) => i.to_string().into_bytes(),
        }
    }
}

fn bad(what: &'static str) -> Error {
    Error::BadData(what)
}

fn le_u32(b: &[u8], at: usize) -> Result<u32, Error> {
    let s = b.get(at..at + 4).ok_or(bad("short header"))?;
    Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

fn le_u16(b: &[u8], at: usize) -> Result<u16, Error> {
    let s = b.get(at..at + 2).ok_or(bad("short header"))?;
    Ok(u16::from_le_bytes([s[0], s[1]]))
}

/// Sign-extends the low `bits` bits of `v`.
fn sign_extend(v: u64, bits: u32) -> i64 {
    let shift = 64 - bits;
    ((v << shift) as i64) >> shift
}

/// Little-endian unsigned integer of `b`'s bytes.
fn le_uint(b: &[u8]) -> u64 {
    b.iter()
        .rev()
        .fold(0u64, |acc, &x| (acc << 8) | u64::from(x))
}

/// The bytes a listpack back-length takes for an entry of `len` bytes
/// (Redis's `lpEncodeBacklen` boundaries, which are one short of the
/// powers of 128).
fn backlen_size(len: usize) -> usize {
    match len {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    }
}

/// Decodes a listpack: a 6-byte header (total bytes, element count or
/// 65535 for "unknown"), the entries each followed by its back-length, and
/// the 0xFF terminator.
pub(crate) fn listpack(b: &[u8]) -> Result<Vec<Elem<'_>>, Error> {
    const HDR: usize = 6;
    if b.len() < HDR + 1 {
        return Err(bad("listpack too short"));
    }
    if le_u32(b, 0)? as usize != b.len() {
        return Err(bad("listpack size mismatch"));
    }
    let declared = le_u16(b, 4)?;
    if b[b.len() - 1] != 0xff {
        return Err(bad("listpack without terminator"));
    }
    let end = b.len() - 1;
    let mut out = Vec::with_capacity(usize::from(declared).min(end / 2));
    let mut p = HDR;
    while p < end {
        let e = b[p];
        let (hdr, elem) = if e & 0x80 == 0 {
            (1, Elem::Int(i64::from(e & 0x7f)))
        } else if e & 0xc0 == 0x80 {
            let n = usize::from(e & 0x3f);
            (
                1 + n,
                Elem::Str(b.get(p + 1..p + 1 + n).ok_or(bad("listpack entry"))?),
            )
        } else if e & 0xe0 == 0xc0 {
            let lo = *b.get(p + 1).ok_or(bad("listpack entry"))?;
            let v = (u64::from(e & 0x1f) << 8) | u64::from(lo);
            (2, Elem::Int(sign_extend(v, 13)))
        } else if e & 0xf0 == 0xe0 {
            let lo = *b.get(p + 1).ok_or(bad("listpack entry"))?;
            let n = (usize::from(e & 0x0f) << 8) | usize::from(lo);
            (
                2 + n,
                Elem::Str(b.get(p + 2..p + 2 + n).ok_or(bad("listpack entry"))?),
            )
        } else {
            match e {
                0xf0 => {
                    let n = le_u32(b, p + 1)? as usize;
                    let s = p
                        .checked_add(5 + n)
                        .and_then(|stop| b.get(p + 5..stop))
                        .ok_or(bad("listpack entry"))?;
                    (5 + n, Elem::Str(s))
                }
                0xf1..=0xf4 => {
                    let width = match e {
                        0xf1 => 2,
                        0xf2 => 3,
                        0xf3 => 4,
                        _ => 8,
                    };
                    let raw = b.get(p + 1..p + 1 + width).ok_or(bad("listpack entry"))?;
                    (
                        1 + width,
                        Elem::Int(sign_extend(le_uint(raw), 8 * width as u32)),
                    )
                }
                _ => return Err(bad("listpack encoding")),
            }
        };
        // The back-length: the entry's size, 7 bits a byte, read from the
        // right; its first byte (the least significant group) has no
        // continuation bit, the others do.
        let bl = backlen_size(hdr);
        let back = b
            .get(p + hdr..p + hdr + bl)
            .ok_or(bad("listpack back-length"))?;
        let mut v = 0usize;
        for (i, &x) in back.iter().enumerate() {
            let cont = x & 0x80 != 0;
            if cont != (i != 0) {
                return Err(bad("listpack back-length"));
            }
            v = (v << 7) | usize::from(x & 0x7f);
        }
        if v != hdr {
            return Err(bad("listpack back-length"));
        }
        p += hdr + bl;
        if p > end {
            return Err(bad("listpack entry past the end"));
        }
        out.push(elem);
    }
    if declared != u16::MAX && usize::from(declared) != out.len() {
        return Err(bad("listpack count mismatch"));
    }
    Ok(out)
}

/// Builds a listpack, entry by entry, in the encodings Redis's
/// `lpAppend` chooses: integers in the narrowest integer encoding, strings
/// by length.
pub(crate) struct ListpackWriter {
    buf: Vec<u8>,
    count: usize,
}

impl ListpackWriter {
    pub(crate) fn new() -> Self {
        ListpackWriter {
            buf: vec![0; 6],
            count: 0,
        }
    }

    fn backlen(&mut self, l: usize) {
        let n = backlen_size(l);
        for i in (0..n).rev() {
            let group = ((l >> (7 * i)) & 0x7f) as u8;
            self.buf.push(if i == n - 1 { group } else { group | 0x80 });
        }
        self.count += 1;
    }

    pub(crate) fn int(&mut self, v: i64) {
        let start = self.buf.len();
        if (0..=127).contains(&v) {
            self.buf.push(v as u8);
        } else if (-4096..=4095).contains(&v) {
            let u = (v as u64) & 0x1fff;
            self.buf.push(0xc0 | (u >> 8) as u8);
            self.buf.push(u as u8);
        } else if let Ok(v) = i16::try_from(v) {
            self.buf.push(0xf1);
            self.buf.extend_from_slice(&v.to_le_bytes());
        } else if (-(1 << 23)..(1 << 23)).contains(&v) {
            self.buf.push(0xf2);
            self.buf.extend_from_slice(&v.to_le_bytes()[..3]);
        } else if let Ok(v) = i32::try_from(v) {
            self.buf.push(0xf3);
            self.buf.extend_from_slice(&v.to_le_bytes());
        } else {
            self.buf.push(0xf4);
            self.buf.extend_from_slice(&v.to_le_bytes());
        }
        let l = self.buf.len() - start;
        self.backlen(l);
    }

    pub(crate) fn string(&mut self, s: &[u8]) {
        let start = self.buf.len();
        let n = s.len();
        if n < 64 {
            self.buf.push(0x80 | n as u8);
        } else if n < 4096 {
            self.buf.push(0xe0 | (n >> 8) as u8);
            self.buf.push(n as u8);
        } else {
            self.buf.push(0xf0);
            self.buf.extend_from_slice(&(n as u32).to_le_bytes());
        }
        self.buf.extend_from_slice(s);
        let l = self.buf.len() - start;
        self.backlen(l);
    }

    pub(crate) fn finish(mut self) -> Vec<u8> {
        self.buf.push(0xff);
        let total = self.buf.len() as u32;
        self.buf[..4].copy_from_slice(&total.to_le_bytes());
        let count = self.count.min(usize::from(u16::MAX)) as u16;
        self.buf[4..6].copy_from_slice(&count.to_le_bytes());
        self.buf
    }
}

/// Decodes a ziplist: a 10-byte header (total bytes, offset of the last
/// entry, element count or 65535), entries each led by the previous
/// entry's length and an encoding, and the 0xFF terminator.
pub(crate) fn ziplist(b: &[u8]) -> Result<Vec<Elem<'_>>, Error> {
    const HDR: usize = 10;
    if b.len() < HDR + 1 {
        return Err(bad("ziplist too short"));
    }
    if le_u32(b, 0)? as usize != b.len() {
        return Err(bad("ziplist size mismatch"));
    }
    let tail = le_u32(b, 4)? as usize;
    let declared = le_u16(b, 8)?;
    if b[b.len() - 1] != 0xff {
        return Err(bad("ziplist without terminator"));
    }
    let end = b.len() - 1;
    let mut out = Vec::with_capacity(usize::from(declared).min(end / 2));
    let mut p = HDR;
    let mut prev_len = 0usize;
    let mut last = HDR;
    while p < end {
        let start = p;
        // Previous entry's length: one byte below 254, else 0xFE and four.
        let first = b[p];
        let (pl, plsize) = if first < 254 {
            (usize::from(first), 1)
        } else if first == 254 {
            (le_u32(b, p + 1)? as usize, 5)
        } else {
            return Err(bad("ziplist prevlen"));
        };
        if pl != prev_len {
            return Err(bad("ziplist prevlen mismatch"));
        }
        p += plsize;
        let e = *b.get(p).ok_or(bad("ziplist entry"))?;
        let (hdr, data) = match e >> 6 {
            0 => (1, usize::from(e & 0x3f)),
            1 => {
                let lo = *b.get(p + 1).ok_or(bad("ziplist entry"))?;
                (2, (usize::from(e & 0x3f) << 8) | usize::from(lo))
            }
            2 => {
                if e != 0x80 {
                    return Err(bad("ziplist encoding"));
                }
                let s = b.get(p + 1..p + 5).ok_or(bad("ziplist entry"))?;
                (5, u32::from_be_bytes([s[0], s[1], s[2], s[3]]) as usize)
            }
            _ => (1, 0),
        };
        let elem = if e >> 6 != 3 {
            let s = p
                .checked_add(hdr + data)
                .and_then(|stop| b.get(p + hdr..stop))
                .ok_or(bad("ziplist entry"))?;
            p += hdr + data;
            Elem::Str(s)
        } else {
            let (width, imm) = match e {
                0xc0 => (2, None),
                0xd0 => (4, None),
                0xe0 => (8, None),
                0xf0 => (3, None),
                0xfe => (1, None),
                0xf1..=0xfd => (0, Some(i64::from(e & 0x0f) - 1)),
                _ => return Err(bad("ziplist encoding")),
            };
            let v = match imm {
                Some(v) => v,
                None => {
                    let raw = b.get(p + 1..p + 1 + width).ok_or(bad("ziplist entry"))?;
                    sign_extend(le_uint(raw), 8 * width as u32)
                }
            };
            p += 1 + width;
            Elem::Int(v)
        };
        if p > end {
            return Err(bad("ziplist entry past the end"));
        }
        prev_len = p - start;
        last = start;
        out.push(elem);
    }
    if (out.is_empty() && tail != HDR) || (!out.is_empty() && tail != last) {
        return Err(bad("ziplist tail offset"));
    }
    if declared != u16::MAX && usize::from(declared) != out.len() {
        return Err(bad("ziplist count mismatch"));
    }
    Ok(out)
}

/// Decodes an intset: encoding width (2, 4 or 8), count, and the sorted
/// little-endian integers.
pub(crate) fn intset(b: &[u8]) -> Result<Vec<i64>, Error> {
    let width = le_u32(b, 0)? as usize;
    let count = le_u32(b, 4)? as usize;
    if !matches!(width, 2 | 4 | 8) {
        return Err(bad("intset encoding"));
    }
    if count.checked_mul(width).and_then(|n| n.checked_add(8)) != Some(b.len()) {
        return Err(bad("intset size mismatch"));
    }
    let mut out = Vec::with_capacity(count);
    for chunk in b[8..].chunks_exact(width) {
        let v = sign_extend(le_uint(chunk), 8 * width as u32);
        if out.last().is_some_and(|&prev| prev >= v) {
            return Err(bad("intset not sorted"));
        }
        out.push(v);
    }
    Ok(out)
}

/// A zipmap's field and value.
pub(crate) type FieldValue<'a> = (&'a [u8], &'a [u8]);

/// Decodes a zipmap (hashes of Redis 2.4 and older): a count byte, then
/// field length, field, value length, a "free" byte, value, free bytes,
/// and 0xFF. Lengths are one byte below 254, else 254 and four bytes.
pub(crate) fn zipmap(b: &[u8]) -> Result<Vec<FieldValue<'_>>, Error> {
    fn len(b: &[u8], p: &mut usize) -> Result<Option<usize>, Error> {
        let first = *b.get(*p).ok_or(bad("zipmap entry"))?;
        match first {
            255 => {
                *p += 1;
                Ok(None)
            }
            254 => {
                let n = le_u32(b, *p + 1)? as usize;
                *p += 5;
                Ok(Some(n))
            }
            n => {
                *p += 1;
                Ok(Some(usize::from(n)))
            }
        }
    }
    fn take<'a>(b: &'a [u8], p: &mut usize, n: usize) -> Result<&'a [u8], Error> {
        let s = p
            .checked_add(n)
            .and_then(|stop| b.get(*p..stop))
            .ok_or(bad("zipmap entry"))?;
        *p += n;
        Ok(s)
    }
    if b.is_empty() {
        return Err(bad("zipmap too short"));
    }
    let mut p = 1;
    let mut out = Vec::new();
    while let Some(flen) = len(b, &mut p)? {
        let field = take(b, &mut p, flen)?;
        let vlen = len(b, &mut p)?.ok_or(bad("zipmap entry"))?;
        let free = usize::from(*b.get(p).ok_or(bad("zipmap entry"))?);
        p += 1;
        let value = take(b, &mut p, vlen)?;
        take(b, &mut p, free)?;
        out.push((field, value));
    }
    if p != b.len() {
        return Err(bad("zipmap trailing bytes"));
    }
    if b[0] < 254 && usize::from(b[0]) != out.len() {
        return Err(bad("zipmap count mismatch"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listpack_entries() {
        // "a", 5, -1 (13-bit), 1000 (13-bit), 100000 (int24).
        let mut body = vec![0x81, b'a', 0x02, 0x05, 0x01];
        body.extend_from_slice(&[0xdf, 0xff, 0x02]);
        body.extend_from_slice(&[0xc3, 0xe8, 0x02]);
        body.extend_from_slice(&[0xf2, 0xa0, 0x86, 0x01, 0x04]);
        let total = 6 + body.len() + 1;
        let mut lp = (total as u32).to_le_bytes().to_vec();
        lp.extend_from_slice(&5u16.to_le_bytes());
        lp.extend_from_slice(&body);
        lp.push(0xff);
        let got = listpack(&lp).unwrap();
        assert_eq!(
            got,
            vec![
                Elem::Str(b"a"),
                Elem::Int(5),
                Elem::Int(-1),
                Elem::Int(1000),
                Elem::Int(100000)
            ]
        );
        for cut in 0..lp.len() {
            assert!(listpack(&lp[..cut]).is_err());
        }
    }

    #[test]
    fn intset_checks() {
        let mut b = 2u32.to_le_bytes().to_vec();
        b.extend_from_slice(&2u32.to_le_bytes());
        b.extend_from_slice(&(-3i16).to_le_bytes());
        b.extend_from_slice(&7i16.to_le_bytes());
        assert_eq!(intset(&b).unwrap(), vec![-3, 7]);
        b[8..10].copy_from_slice(&9i16.to_le_bytes());
        assert!(intset(&b).is_err());
    }
}

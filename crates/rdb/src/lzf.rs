//! LZF decompression, for the strings Redis stores compressed
//! (`rdbcompression yes`, strings over 20 bytes that shrink).
//!
//! An LZF stream is a sequence of chunks, each led by a control byte: below
//! 32 it announces a literal run of `ctrl + 1` bytes that follow; otherwise
//! its top three bits are a match length (7 meaning "add the next byte"),
//! its low five bits and the next byte a distance back into what was
//! already produced, and `length + 2` bytes are copied from there, possibly
//! overlapping the bytes being written. The output's length is declared
//! beside the stream; every run and every back reference is checked against
//! the input left and the output so far, and the output never grows past
//! the declared length, so a hostile stream can neither read out of bounds
//! nor make us allocate more than it could honestly expand to.

/// Decompresses `input`, which must expand to exactly `expected` bytes.
/// `None` for any malformed stream or a length that does not match.
pub fn decompress(input: &[u8], expected: usize) -> Option<Vec<u8>> {
    // LZF expands at most 264 bytes per 2 input bytes; never reserve more
    // than the input could produce, whatever length was declared.
    let bound = input.len().saturating_mul(132).saturating_add(1);
    let mut out: Vec<u8> = Vec::with_capacity(expected.min(bound));
    let mut ip = 0;
    while ip < input.len() {
        let ctrl = usize::from(input[ip]);
        ip += 1;
        if ctrl < 32 {
            let run = ctrl + 1;
            let lit = input.get(ip..ip + run)?;
            if out.len() + run > expected {
                return None;
            }
            out.extend_from_slice(lit);
            ip += run;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += usize::from(*input.get(ip)?);
                ip += 1;
            }
            let low = usize::from(*input.get(ip)?);
            ip += 1;
            let back = ((ctrl & 0x1f) << 8) + low + 1;
            let len = len + 2;
            if back > out.len() || out.len() + len > expected {
                return None;
            }
            let start = out.len() - back;
            if back >= len {
                out.extend_from_within(start..start + len);
            } else {
                for i in 0..len {
                    let b = out[start + i];
                    out.push(b);
                }
            }
        }
    }
    (out.len() == expected).then_some(out)
}

/// Compresses `input` with LZF. `None` when the result would not be
/// shorter than `max_out` bytes (Redis stores such strings plain).
pub fn compress(input: &[u8], max_out: usize) -> Option<Vec<u8>> {
    const HLOG: u32 = 14;
    const MAX_LIT: usize = 32;
    const MAX_OFF: usize = 1 << 13;
    const MAX_REF: usize = (1 << 8) + (1 << 3);
    let mut table = vec![0usize; 1 << HLOG];
    let hash = |p: &[u8]| -> usize {
        let v = (u32::from(p[0]) << 16) | (u32::from(p[1]) << 8) | u32::from(p[2]);
        (v.wrapping_mul(2654435761) >> (32 - HLOG)) as usize
    };
    let mut out = Vec::with_capacity(max_out);
    let mut lit_start = 0usize;
    let mut ip = 0usize;
    let flush = |out: &mut Vec<u8>, from: usize, to: usize| {
        let mut s = from;
        while s < to {
            let n = (to - s).min(MAX_LIT);
            out.push((n - 1) as u8);
            out.extend_from_slice(&input[s..s + n]);
            s += n;
        }
    };
    while ip + 2 < input.len() {
        let h = hash(&input[ip..]);
        // Table entries hold position + 1, so 0 means "empty".
        let cand = table[h];
        table[h] = ip + 1;
        if cand > 0 {
            let r = cand - 1;
            let off = ip - r - 1;
            if off < MAX_OFF && input[r..r + 3] == input[ip..ip + 3] {
                let maxlen = (input.len() - ip).min(MAX_REF);
                let mut len = 3;
                while len < maxlen && input[r + len] == input[ip + len] {
                    len += 1;
                }
                flush(&mut out, lit_start, ip);
                let l = len - 2;
                if l < 7 {
                    out.push(((l << 5) | (off >> 8)) as u8);
                } else {
                    out.push(((7 << 5) | (off >> 8)) as u8);
                    out.push((l - 7) as u8);
                }
                out.push((off & 0xff) as u8);
                ip += len;
                lit_start = ip;
                if out.len() >= max_out {
                    return None;
                }
                continue;
            }
        }
        ip += 1;
    }
    flush(&mut out, lit_start, input.len());
    (out.len() < max_out).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let inputs: Vec<Vec<u8>> = vec![
            b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".to_vec(),
            b"abcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcxyz".repeat(40),
            (0..5000u32).map(|i| (i % 251) as u8).collect(),
            (0..5000u32).map(|i| ((i * i) >> 3) as u8).collect(),
        ];
        for inp in inputs {
            if let Some(c) = compress(&inp, inp.len()) {
                assert_eq!(decompress(&c, inp.len()).as_deref(), Some(&inp[..]));
            }
        }
        assert!(compress(&b"a".repeat(1000), 1000).is_some());
    }

    #[test]
    fn hostile() {
        assert_eq!(decompress(&[0x20, 0x00], 10), None); // reference before start
        assert_eq!(decompress(&[0x05, b'a'], 6), None); // literal past the end
        assert_eq!(decompress(&[0x00, b'a', 0xe0], 300), None); // truncated match
        assert_eq!(decompress(&[0x00, b'a', 0xe0, 0xff, 0x00], 10), None); // too long
        assert_eq!(decompress(&[0x00, b'a'], usize::MAX).map(|v| v.len()), None);
        assert_eq!(
            decompress(&[0x00, b'a', 0x40, 0x00], 5).as_deref(),
            Some(&b"aaaaa"[..])
        );
    }
}

//! Bytes as redis shows them to a person: `sdscatrepr`'s quoting, which
//! MONITOR's lines and redis-cli's output use (`"a\x00b\n"`), so that a
//! key or value of any bytes reads as one printable token. Used where
//! respite names a key in a line meant to be read (MONITOR, the RDB
//! import's errors).

/// redis's `sdscatrepr`: a quoted string with `\\`, `\"`, `\n`, `\r`, `\t`,
/// `\a`, `\b` escaped and other unprintable bytes as `\xHH`. Runs of plain
/// bytes are copied at once.
pub fn repr(out: &mut Vec<u8>, s: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let mut plain = 0;
    for (i, &b) in s.iter().enumerate() {
        let escaped: &[u8] = match b {
            b'\\' => b"\\\\",
            b'"' => b"\\\"",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x07 => b"\\a",
            0x08 => b"\\b",
            // isprint: 0x20 to 0x7e.
            0x20..=0x7e => continue,
            _ => {
                out.extend_from_slice(&s[plain..i]);
                plain = i + 1;
                out.extend_from_slice(&[
                    b'\\',
                    b'x',
                    HEX[usize::from(b >> 4)],
                    HEX[usize::from(b & 15)],
                ]);
                continue;
            }
        };
        out.extend_from_slice(&s[plain..i]);
        plain = i + 1;
        out.extend_from_slice(escaped);
    }
    out.extend_from_slice(&s[plain..]);
    out.push(b'"');
}

/// [`repr`] as a `String` (its output is always ASCII).
pub fn repr_string(s: &[u8]) -> String {
    let mut out = Vec::with_capacity(s.len() + 2);
    repr(&mut out, s);
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::repr_string;

    #[test]
    fn quotes_as_sdscatrepr() {
        assert_eq!(repr_string(b"plain key"), "\"plain key\"");
        assert_eq!(
            repr_string(b"a\"b\\c\n\r\t\x07\x08\x00\xff~"),
            "\"a\\\"b\\\\c\\n\\r\\t\\a\\b\\x00\\xff~\""
        );
    }
}

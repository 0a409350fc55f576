//! INCRBYFLOAT's arithmetic, digit for digit as redis-server on x86-64 does
//! it: both numbers parsed by glibc's `strtold` into an x87 80-bit
//! `long double` (64-bit significand), added by the FPU, and printed with
//! `%.17Lf` minus trailing zeros (Redis's `ld2string` "human" mode). An
//! `f64` gets many sums right but not all (`5.6 + 1.5e3` is
//! `1505.59999999999999998` in Redis, `1e308 + 1e308` is a 309-digit
//! number rather than an overflow), so the format is emulated exactly:
//! every step is done on exact big integers and rounded once, to nearest,
//! ties to even, as the hardware and glibc do.
use std::cmp::Ordering;

/// Significand bits of the x87 extended format.
const PRECISION: i64 = 64;
/// Largest exponent of the leading bit.
const MAX_EXP: i64 = 16383;
/// Smallest exponent of the leading bit of a normal number; below it
/// the significand loses bits (subnormals).
const MIN_EXP: i64 = -16382;
/// Redis's `MAX_LONG_DOUBLE_CHARS`: longer inputs are not floats.
const MAX_CHARS: usize = 5 * 1024;

/// A finite or infinite `long double`: `mant * 2^exp`, negated if `neg`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LongDouble {
    neg: bool,
    mant: u64,
    exp: i64,
    inf: bool,
}

impl LongDouble {
    /// Zero, the value of a missing key.
    pub const ZERO: LongDouble = LongDouble {
        neg: false,
        mant: 0,
        exp: 0,
        inf: false,
    };

    /// Whether this is an infinity (`inf` parses; Redis refuses it as an
    /// increment in some commands).
    pub fn is_infinite(&self) -> bool {
        self.inf
    }

    /// About the nearest `f64` (blocking timeouts need no more precision).
    pub fn to_f64(&self) -> f64 {
        let magnitude = if self.inf {
            f64::INFINITY
        } else if self.mant == 0 {
            0.0
        } else {
            // In two steps, so a tiny value (5e-324) becomes a subnormal
            // instead of 2^exp underflowing to 0 first.
            let exp = self.exp.clamp(-4000, 4000) as i32;
            self.mant as f64 * 2f64.powi(exp / 2) * 2f64.powi(exp - exp / 2)
        };
        if self.neg {
            -magnitude
        } else {
            magnitude
        }
    }
}

/// An unsigned big integer, little-endian 32-bit limbs, no zero limb on
/// top.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Big(Vec<u32>);

impl Big {
    fn from_u128(mut v: u128) -> Big {
        let mut limbs = Vec::new();
        while v > 0 {
            limbs.push(v as u32);
            v >>= 32;
        }
        Big(limbs)
    }

    fn is_zero(&self) -> bool {
        self.0.is_empty()
    }

    fn bits(&self) -> i64 {
        self.0.last().map_or(0, |top| {
            (self.0.len() as i64 - 1) * 32 + 32 - i64::from(top.leading_zeros())
        })
    }

    fn bit(&self, i: u64) -> bool {
        let limb = (i / 32) as usize;
        limb < self.0.len() && self.0[limb] >> (i % 32) & 1 == 1
    }

    /// Is any bit below `i` set?
    fn any_below(&self, i: u64) -> bool {
        let limb = (i / 32) as usize;
        if self.0[..limb.min(self.0.len())].iter().any(|&l| l != 0) {
            return true;
        }
        limb < self.0.len() && self.0[limb] & ((1u32 << (i % 32)) - 1) != 0
    }

    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    /// `self = self * m + a`.
    fn mul_add_small(&mut self, m: u32, a: u32) {
        let mut carry = u64::from(a);
        for limb in &mut self.0 {
            let v = u64::from(*limb) * u64::from(m) + carry;
            *limb = v as u32;
            carry = v >> 32;
        }
        if carry > 0 {
            self.0.push(carry as u32);
        }
    }

    /// `self *= 10^n`.
    fn mul_pow10(&mut self, mut n: u64) {
        while n > 0 {
            let step = n.min(9) as u32;
            self.mul_add_small(10u32.pow(step), 0);
            n -= u64::from(step);
        }
    }

    /// Divides in place by a small number; returns the remainder.
    fn div_small(&mut self, d: u32) -> u32 {
        let mut rem = 0u64;
        for limb in self.0.iter_mut().rev() {
            let v = (rem << 32) | u64::from(*limb);
            *limb = (v / u64::from(d)) as u32;
            rem = v % u64::from(d);
        }
        self.trim();
        rem as u32
    }

    fn shl(&self, n: u64) -> Big {
        let (limbs, bits) = ((n / 32) as usize, (n % 32) as u32);
        let mut out = vec![0u32; limbs];
        let mut carry = 0u32;
        for &l in &self.0 {
            if bits == 0 {
                out.push(l);
            } else {
                out.push((l << bits) | carry);
                carry = l >> (32 - bits);
            }
        }
        if carry > 0 {
            out.push(carry);
        }
        let mut b = Big(out);
        b.trim();
        b
    }

    fn shr(&self, n: u64) -> Big {
        let (limbs, bits) = ((n / 32) as usize, (n % 32) as u32);
        if limbs >= self.0.len() {
            return Big(Vec::new());
        }
        let src = &self.0[limbs..];
        let mut out = Vec::with_capacity(src.len());
        for (i, &l) in src.iter().enumerate() {
            let high = src.get(i + 1).copied().unwrap_or(0);
            out.push(if bits == 0 {
                l
            } else {
                (l >> bits) | (high << (32 - bits))
            });
        }
        let mut b = Big(out);
        b.trim();
        b
    }

    fn cmp(&self, other: &Big) -> Ordering {
        self.0
            .len()
            .cmp(&other.0.len())
            .then_with(|| self.0.iter().rev().cmp(other.0.iter().rev()))
    }

    fn add(&self, other: &Big) -> Big {
        let mut out = Vec::with_capacity(self.0.len().max(other.0.len()) + 1);
        let mut carry = 0u64;
        for i in 0..self.0.len().max(other.0.len()) {
            let v = u64::from(self.0.get(i).copied().unwrap_or(0))
                + u64::from(other.0.get(i).copied().unwrap_or(0))
                + carry;
            out.push(v as u32);
            carry = v >> 32;
        }
        if carry > 0 {
            out.push(carry as u32);
        }
        Big(out)
    }

    /// `self -= other`, which must not be larger.
    fn sub_assign(&mut self, other: &Big) {
        let mut borrow = 0i64;
        for i in 0..self.0.len() {
            let v = i64::from(self.0[i]) - i64::from(other.0.get(i).copied().unwrap_or(0)) - borrow;
            self.0[i] = v.rem_euclid(1 << 32) as u32;
            borrow = i64::from(v < 0);
        }
        self.trim();
    }

    fn to_decimal(&self) -> String {
        let mut n = self.clone();
        let mut chunks = Vec::new();
        while !n.is_zero() {
            chunks.push(n.div_small(1_000_000_000));
        }
        let mut out = chunks.pop().map_or("0".to_string(), |c| c.to_string());
        for c in chunks.iter().rev() {
            out.push_str(&format!("{c:09}"));
        }
        out
    }
}

/// Rounds `num / den * 2^scale` (nonzero) to the extended format.
/// `None` on overflow (an infinity) or underflow to zero, the two cases
/// `strtold` flags with ERANGE and Redis refuses.
fn round(num: &Big, den: &Big, scale: i64, neg: bool) -> Option<LongDouble> {
    // Scale so that the quotient has 66 or 67 bits: 64 kept, a rounding
    // bit and more, the remainder being the sticky rest.
    let shift = 66 - (num.bits() - den.bits());
    let (mut rem, den) = if shift >= 0 {
        (num.shl(shift as u64), den.clone())
    } else {
        (num.clone(), den.shl(shift.unsigned_abs()))
    };
    let mut q: u128 = 0;
    for i in (0..68u64).rev() {
        let part = den.shl(i);
        if rem.cmp(&part) != Ordering::Less {
            rem.sub_assign(&part);
            q |= 1u128 << i;
        }
    }
    let sticky = !rem.is_zero();
    let qbits = 128 - i64::from(q.leading_zeros());
    let lsb = scale - shift;
    let lead = lsb + qbits - 1;
    let keep = if lead < MIN_EXP {
        PRECISION - (MIN_EXP - lead)
    } else {
        PRECISION
    };
    if keep < 0 {
        return None;
    }
    let drop = qbits - keep;
    let mut kept = q >> drop;
    let rest = q & ((1u128 << drop) - 1);
    let half = 1u128 << (drop - 1);
    if rest > half || (rest == half && (sticky || kept & 1 == 1)) {
        kept += 1;
    }
    let mut exp = lsb + drop;
    if kept >> PRECISION != 0 {
        kept >>= 1;
        exp += 1;
    }
    if kept == 0 {
        return None;
    }
    if exp + 127 - i64::from(kept.leading_zeros()) > MAX_EXP {
        return None;
    }
    Some(LongDouble {
        neg,
        mant: kept as u64,
        exp,
        inf: false,
    })
}

/// Digits of `s` in `radix` (and where they stop).
fn digits(s: &[u8], radix: u32) -> usize {
    s.iter()
        .take_while(|c| (**c as char).is_digit(radix))
        .count()
}

/// An exponent's digits, saturated far outside any meaningful range.
fn exponent(s: &[u8]) -> Option<i64> {
    let (neg, body) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if body.is_empty() || digits(body, 10) != body.len() {
        return None;
    }
    let mut v: i64 = 0;
    for &c in body {
        v = (v * 10 + i64::from(c - b'0')).min(1 << 40);
    }
    Some(if neg { -v } else { v })
}

/// Splits `int[.frac][marker exp]` into the significand's digits, the
/// number of fraction digits and the exponent; `None` unless the whole
/// string is that.
fn split(s: &[u8], radix: u32, marker: u8) -> Option<(Vec<u8>, i64, i64)> {
    let int = digits(s, radix);
    let mut rest = &s[int..];
    let mut all = s[..int].to_vec();
    let mut frac = 0;
    if rest.first() == Some(&b'.') {
        frac = digits(&rest[1..], radix);
        all.extend_from_slice(&rest[1..1 + frac]);
        rest = &rest[1 + frac..];
    }
    if all.is_empty() {
        return None;
    }
    let exp = match rest.split_first() {
        None => 0,
        Some((&c, e)) if c == marker => exponent(e)?,
        Some(_) => return None,
    };
    Some((all, frac as i64, exp))
}

fn big_from_digits(ds: &[u8], radix: u32) -> Big {
    let mut b = Big(Vec::new());
    for &c in ds {
        b.mul_add_small(radix, (c as char).to_digit(radix).unwrap_or(0));
    }
    b
}

/// Parses a float as Redis's `string2ld` does (glibc `strtold` on the
/// whole string): decimal or `0x` hexadecimal, `inf`/`infinity`, no
/// spaces, no NaN, and neither overflow nor underflow to zero.
pub fn parse(s: &[u8]) -> Option<LongDouble> {
    if s.is_empty() || s.len() >= MAX_CHARS {
        return None;
    }
    let (neg, body) = match s[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let body = body.to_ascii_lowercase();
    if body == b"inf" || body == b"infinity" {
        return Some(LongDouble {
            neg,
            inf: true,
            ..LongDouble::ZERO
        });
    }
    let (num, den, scale) = if let Some(hex) = body.strip_prefix(b"0x") {
        let (ds, frac, exp) = split(hex, 16, b'p')?;
        let num = big_from_digits(&ds, 16);
        (num, Big::from_u128(1), exp - 4 * frac)
    } else {
        let (ds, frac, exp) = split(&body, 10, b'e')?;
        let num = big_from_digits(&ds, 10);
        let exp10 = exp - frac;
        // Far outside the format: no need for the big numbers.
        let magnitude = exp10 + num.to_decimal().len() as i64;
        if !num.is_zero() && magnitude > 5000 {
            return None;
        }
        if !num.is_zero() && magnitude < -5000 {
            return None;
        }
        if exp10 >= 0 {
            let mut num = num;
            num.mul_pow10(exp10 as u64);
            (num, Big::from_u128(1), 0)
        } else {
            let mut den = Big::from_u128(1);
            den.mul_pow10(exp10.unsigned_abs());
            (num, den, 0)
        }
    };
    if num.is_zero() {
        return Some(LongDouble {
            neg,
            ..LongDouble::ZERO
        });
    }
    round(&num, &den, scale, neg)
}

/// `a + b`, rounded; `None` when the sum is an infinity or NaN.
pub fn add(a: LongDouble, b: LongDouble) -> Option<LongDouble> {
    if a.inf || b.inf {
        return None;
    }
    if a.mant == 0 {
        return Some(b);
    }
    if b.mant == 0 {
        return Some(a);
    }
    let low = a.exp.min(b.exp);
    let big_a = Big::from_u128(u128::from(a.mant)).shl((a.exp - low) as u64);
    let big_b = Big::from_u128(u128::from(b.mant)).shl((b.exp - low) as u64);
    let (sum, neg) = if a.neg == b.neg {
        (big_a.add(&big_b), a.neg)
    } else {
        match big_a.cmp(&big_b) {
            Ordering::Equal => return Some(LongDouble::ZERO),
            Ordering::Greater => {
                let mut d = big_a;
                d.sub_assign(&big_b);
                (d, a.neg)
            }
            Ordering::Less => {
                let mut d = big_b;
                d.sub_assign(&big_a);
                (d, b.neg)
            }
        }
    };
    round(&sum, &Big::from_u128(1), low, neg)
}

/// Formats a finite value as `%.17Lf` with the trailing zeros (and a
/// bare point) removed, and `-0` written `0`.
pub fn format(v: LongDouble) -> String {
    // The value times 10^17, rounded to an integer, ties to even.
    let mut scaled = Big::from_u128(u128::from(v.mant));
    scaled.mul_pow10(17);
    let scaled = if v.exp >= 0 {
        scaled.shl(v.exp as u64)
    } else {
        let k = v.exp.unsigned_abs();
        let mut q = scaled.shr(k);
        let half = scaled.bit(k - 1);
        let more = scaled.any_below(k - 1);
        if half && (more || q.bit(0)) {
            q = q.add(&Big::from_u128(1));
        }
        q
    };
    let digits = format!("{:0>18}", scaled.to_decimal());
    let (int, frac) = digits.split_at(digits.len() - 17);
    let frac = frac.trim_end_matches('0');
    let mut out = String::new();
    if v.neg {
        out.push('-');
    }
    out.push_str(int);
    if !frac.is_empty() {
        out.push('.');
        out.push_str(frac);
    }
    if out == "-0" {
        out = "0".into();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{add, format, parse};

    /// `INCRBYFLOAT` of `base` by `delta`, as text.
    fn incr(base: &str, delta: &str) -> Option<String> {
        let a = parse(base.as_bytes())?;
        let b = parse(delta.as_bytes())?;
        add(a, b).map(format)
    }

    #[test]
    fn matches_redis_on_x86_64() {
        // Replies recorded from redis-server 7.0.15 on x86-64.
        assert_eq!(incr("10.5", "0.1").as_deref(), Some("10.6"));
        assert_eq!(incr("0", "3.0e3").as_deref(), Some("3000"));
        assert_eq!(
            incr("5.6", "1.5e3").as_deref(),
            Some("1505.59999999999999998")
        );
        assert_eq!(incr("1", "-1").as_deref(), Some("0"));
        assert!(parse(b"abc").is_none());
        assert!(parse(b" 1").is_none());
    }
}

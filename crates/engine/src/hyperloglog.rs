//! HyperLogLog: redis-server 7.0's cardinality estimator, on redis's own
//! bytes.
//!
//! An HLL is a plain string value. Its layout is redis's (`hyperloglog.c`),
//! byte for byte, so a value copied with GET and SET, DUMP and RESTORE, or
//! an RDB file works the same on respite and on redis-server:
//!
//! ```text
//! +------+---+-----+----------+--------------------------------+
//! | HYLL | E | N/U | Cardin.  | registers ...                  |
//! +------+---+-----+----------+--------------------------------+
//!   4      1   3     8 (LE)
//! ```
//!
//! `E` is the encoding (0 dense, 1 sparse), `N/U` three unused bytes, and
//! the cardinality the last PFCOUNT computed, little endian, whose top bit
//! set means "stale: recompute". There are 16384 registers, each the
//! longest run of zeros (plus one) seen among the hashes that address it.
//!
//! - **Dense**: 16384 six-bit registers packed into 12288 bytes, least
//!   significant bits first.
//! - **Sparse**: a run-length code of three opcodes: `ZERO` (`00xxxxxx`,
//!   1 to 64 zero registers), `XZERO` (`01xxxxxx yyyyyyyy`, 1 to 16384
//!   zero registers) and `VAL` (`1vvvvvxx`, 1 to 4 registers of value 1 to
//!   32). A new HLL is sparse; it becomes dense for good when a register
//!   needs a value over 32 or an update would take the sparse form past
//!   `hll-sparse-max-bytes`.
//!
//! Elements are hashed with MurmurHash64A (seed `0xadc83b19`, read little
//! endian whatever the machine, as redis does); the low 14 bits pick the
//! register and the run of zeros in the other 50 (plus a stop bit) is the
//! count. The estimate is redis 7's `hllCount`: Otmar Ertl's improved
//! estimator over the register histogram, with the same floating-point
//! steps, so PFCOUNT answers the same number redis does.
//!
//! Everything here is the algorithm alone: the commands read and write the
//! value through the string operations (`string.rs`). A malformed value is
//! never trusted: every read of an opcode is bounds-checked, a byte past
//! the end reads as the zero redis finds after its strings, and a sparse
//! form that does not cover exactly 16384 registers is reported as
//! corrupt ([`Corrupt`]), never a panic.

/// Bits of the hash that pick the register.
pub const P: u32 = 14;
/// Bits left for the run of zeros.
const Q: u32 = 64 - P;
/// How many registers.
pub const REGISTERS: usize = 1 << P;
/// The most a dense register can hold.
const REGISTER_MAX: u8 = 63;
/// The header's size.
pub const HDR_SIZE: usize = 16;
/// A dense HLL's exact size.
pub const DENSE_SIZE: usize = HDR_SIZE + (REGISTERS * 6).div_ceil(8);
/// Encoding byte of the dense form.
const DENSE: u8 = 0;
/// Encoding byte of the sparse form.
const SPARSE: u8 = 1;
/// The largest value a sparse `VAL` opcode holds.
const SPARSE_VAL_MAX_VALUE: u8 = 32;
/// The longest run a `VAL` opcode covers.
const SPARSE_VAL_MAX_LEN: usize = 4;
/// The longest run a `ZERO` opcode covers.
const SPARSE_ZERO_MAX_LEN: usize = 64;
/// The longest run an `XZERO` opcode covers.
const SPARSE_XZERO_MAX_LEN: usize = 16384;
/// `0.5 / ln(2)`, the estimator's constant.
#[allow(clippy::excessive_precision)]
const ALPHA_INF: f64 = 0.721347520444481703680;
/// `hll-sparse-max-bytes`'s default.
pub const DEFAULT_SPARSE_MAX_BYTES: usize = 3000;

/// The string is not an HLL at all (wrong magic, encoding or size):
/// redis's `WRONGTYPE Key is not a valid HyperLogLog string value.`
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotHll;

/// The string looks like an HLL but its sparse form is broken: redis's
/// `INVALIDOBJ Corrupted HLL object detected`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupt;

/// The text of redis's error for [`NotHll`].
pub const NOT_HLL_ERROR: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
/// The text of redis's error for [`Corrupt`].
pub const CORRUPT_ERROR: &str = "INVALIDOBJ Corrupted HLL object detected";

/// MurmurHash2, 64-bit version, as redis uses it (`MurmurHash64A`): the
/// 8-byte blocks read little endian on every machine.
pub fn murmur64a(key: &[u8], seed: u32) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h: u64 = u64::from(seed) ^ (key.len() as u64).wrapping_mul(M);
    let mut blocks = key.chunks_exact(8);
    for block in &mut blocks {
        let mut k = u64::from_le_bytes(block.try_into().unwrap_or([0; 8]));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate().rev() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element addresses and the length of its `000..1`
/// pattern (redis's `hllPatLen`): 1 to 51.
pub fn pattern(element: &[u8]) -> (usize, u8) {
    let hash = murmur64a(element, 0xadc8_3b19);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    // The stop bit makes the count at most Q + 1.
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// A dense register (`HLL_DENSE_GET_REGISTER`); the byte after the last
/// one reads as zero, as redis's string terminator does.
fn dense_get(regs: &[u8], index: usize) -> u8 {
    window_get(regs.get(index * 6 / 8..).unwrap_or(&[]), index)
}

/// Sets a dense register (`HLL_DENSE_SET_REGISTER`), `value` at most 63.
fn dense_put(regs: &mut [u8], index: usize, value: u8) {
    if let Some(window) = regs.get_mut(index * 6 / 8..) {
        window_put(window, index, value);
    }
}

/// Where register `index` of a dense HLL value starts: the offset (from
/// the value's start, header included) of the first of the one or two
/// bytes it is on. [`raise_in_window`] works on those bytes.
pub fn dense_offset(index: usize) -> usize {
    HDR_SIZE + index * 6 / 8
}

/// Register `index` read from its window: the bytes of the registers from
/// the one it starts in (a missing second byte reads as zero).
fn window_get(window: &[u8], index: usize) -> u8 {
    let fb = (index * 6) & 7;
    let b0 = u16::from(window.first().copied().unwrap_or(0));
    let b1 = u16::from(window.get(1).copied().unwrap_or(0));
    (((b0 >> fb) | (b1 << (8 - fb))) & u16::from(REGISTER_MAX)) as u8
}

/// Register `index` set in its window (see [`window_get`]).
fn window_put(window: &mut [u8], index: usize, value: u8) {
    let fb = (index * 6) & 7;
    let v = u16::from(value);
    let max = u16::from(REGISTER_MAX);
    if let Some(b) = window.get_mut(0) {
        *b &= !((max << fb) as u8);
        *b |= (v << fb) as u8;
    }
    // Past the last register this byte is redis's terminator, and the
    // masks leave it as it is.
    if let Some(b) = window.get_mut(1) {
        *b &= !((max >> (8 - fb)) as u8);
        *b |= (v >> (8 - fb)) as u8;
    }
}

/// Raises register `index` to `count` in its window (the two bytes of a
/// dense value at [`dense_offset`], the second zero past the end): true
/// if it changed, as `hllDenseSet`. For a PFADD that reads and writes
/// only the bytes of the registers it changes.
pub fn raise_in_window(window: &mut [u8; 2], index: usize, count: u8) -> bool {
    if count > window_get(window, index) {
        window_put(window, index, count);
        true
    } else {
        false
    }
}

/// Whether a value's 16-byte header is a dense HLL's, for a value of
/// `len` bytes (the checks of [`Hll::from_bytes`]).
pub fn is_dense_header(header: &[u8; HDR_SIZE], len: usize) -> bool {
    &header[..4] == b"HYLL" && header[4] == DENSE && len == DENSE_SIZE
}

/// The cached cardinality in a value's header, read without the rest of
/// it: `head` is the value's first bytes (at least [`HDR_SIZE`] unless
/// the value is shorter) and `len` its full length. Checks the value as
/// [`Hll::from_bytes`] does; `Ok(None)` when the cache is stale, as
/// [`Hll::cached_count`]. PFCOUNT of one key with a valid cache answers
/// from this alone, as redis's does (it checks only the header and the
/// dense size before returning the cached value).
pub fn header_cached_count(head: &[u8], len: usize) -> Result<Option<u64>, NotHll> {
    if len < HDR_SIZE || head.len() < HDR_SIZE || &head[..4] != b"HYLL" || head[4] > SPARSE {
        return Err(NotHll);
    }
    if head[4] == DENSE && len != DENSE_SIZE {
        return Err(NotHll);
    }
    let mut card = [0u8; 8];
    card.copy_from_slice(&head[8..16]);
    Ok((card[7] & 0x80 == 0).then(|| u64::from_le_bytes(card)))
}

/// Raises a dense register to `count`; true if it changed (`hllDenseSet`).
fn dense_set(regs: &mut [u8], index: usize, count: u8) -> bool {
    if count > dense_get(regs, index) {
        dense_put(regs, index, count);
        true
    } else {
        false
    }
}

/// One sparse opcode.
#[derive(Clone, Copy)]
enum Op {
    /// `ZERO` or `XZERO`: a run of zero registers.
    Zero { len: usize, xzero: bool },
    /// `VAL`: a run of registers of one value.
    Val { value: u8, len: usize },
}

impl Op {
    /// The opcode at `p` (`p` inside `bytes`), and its size in bytes.
    fn at(bytes: &[u8], p: usize) -> (Op, usize) {
        let b = bytes[p];
        if b & 0xc0 == 0 {
            (
                Op::Zero {
                    len: usize::from(b & 0x3f) + 1,
                    xzero: false,
                },
                1,
            )
        } else if b & 0x80 == 0 {
            let low = usize::from(bytes.get(p + 1).copied().unwrap_or(0));
            (
                Op::Zero {
                    len: ((usize::from(b & 0x3f) << 8) | low) + 1,
                    xzero: true,
                },
                2,
            )
        } else {
            (
                Op::Val {
                    value: ((b >> 2) & 0x1f) + 1,
                    len: usize::from(b & 0x3) + 1,
                },
                1,
            )
        }
    }

    fn span(self) -> usize {
        match self {
            Op::Zero { len, .. } | Op::Val { len, .. } => len,
        }
    }
}

/// The `VAL` opcode byte (`HLL_SPARSE_VAL_SET`).
fn val_byte(value: u8, len: usize) -> u8 {
    ((value.wrapping_sub(1) << 2) | ((len as u8).wrapping_sub(1) & 0x3)) | 0x80
}

/// Appends a `ZERO` or, past 64, an `XZERO` run to `out`.
fn push_zeros(out: &mut Vec<u8>, len: usize) {
    if len > SPARSE_ZERO_MAX_LEN {
        let l = len - 1;
        out.push(((l >> 8) as u8) | 0x40);
        out.push((l & 0xff) as u8);
    } else {
        out.push((len - 1) as u8);
    }
}

/// Which of the two encodings an HLL is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// 16384 packed six-bit registers.
    Dense,
    /// Run-length opcodes.
    Sparse,
}

/// An HLL value that passed redis's checks (`isHLLObjectOrReply`): the
/// magic, a known encoding, and the exact size if dense. Its sparse form
/// may still turn out corrupt when it is walked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hll {
    bytes: Vec<u8>,
}

impl Default for Hll {
    fn default() -> Self {
        Hll::new()
    }
}

impl Hll {
    /// An empty HLL, sparse, as PFADD creates it (`createHLLObject`): the
    /// header and one `XZERO` opcode of 16384 registers, cached
    /// cardinality 0 and valid.
    pub fn new() -> Hll {
        let mut bytes = Vec::with_capacity(HDR_SIZE + 2);
        bytes.extend_from_slice(b"HYLL");
        bytes.push(SPARSE);
        bytes.extend_from_slice(&[0; 11]);
        let mut left = REGISTERS;
        while left > 0 {
            let run = left.min(SPARSE_XZERO_MAX_LEN);
            push_zeros(&mut bytes, run);
            left -= run;
        }
        Hll { bytes }
    }

    /// Takes a string value as an HLL, if redis would.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Hll, NotHll> {
        if bytes.len() < HDR_SIZE || &bytes[..4] != b"HYLL" || bytes[4] > SPARSE {
            return Err(NotHll);
        }
        if bytes[4] == DENSE && bytes.len() != DENSE_SIZE {
            return Err(NotHll);
        }
        Ok(Hll { bytes })
    }

    /// The value's bytes, for storing.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The value's bytes, for storing.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// The encoding.
    pub fn encoding(&self) -> Encoding {
        if self.bytes[4] == DENSE {
            Encoding::Dense
        } else {
            Encoding::Sparse
        }
    }

    /// The cached cardinality, if it is valid.
    pub fn cached_count(&self) -> Option<u64> {
        let mut card = [0u8; 8];
        card.copy_from_slice(&self.bytes[8..16]);
        (card[7] & 0x80 == 0).then(|| u64::from_le_bytes(card))
    }

    /// Stores `count` as the cached cardinality (valid).
    pub fn set_cached_count(&mut self, count: u64) {
        self.bytes[8..16].copy_from_slice(&count.to_le_bytes());
    }

    /// Marks the cached cardinality stale (`HLL_INVALIDATE_CACHE`): only
    /// the top bit changes.
    pub fn invalidate_cache(&mut self) {
        self.bytes[15] |= 0x80;
    }

    /// Adds an element (`hllAdd`): true if a register changed. May make
    /// the HLL dense (see the module docs).
    pub fn add(&mut self, element: &[u8], sparse_max_bytes: usize) -> Result<bool, Corrupt> {
        let (index, count) = pattern(element);
        self.set(index, count, sparse_max_bytes)
    }

    /// Raises register `index` to `count` if it is lower: true if it
    /// changed.
    pub fn set(
        &mut self,
        index: usize,
        count: u8,
        sparse_max_bytes: usize,
    ) -> Result<bool, Corrupt> {
        match self.encoding() {
            Encoding::Dense => Ok(dense_set(&mut self.bytes[HDR_SIZE..], index, count)),
            Encoding::Sparse => self.sparse_set(index, count, sparse_max_bytes),
        }
    }

    /// `hllSparseSet`: finds the opcode covering the register and, if the
    /// register must grow, rewrites that opcode as up to three (a run
    /// before, the register, a run after), merges equal neighbouring
    /// `VAL`s, and invalidates the cache; promotes to dense when the value
    /// does not fit a `VAL` or the string would pass `sparse_max_bytes`.
    fn sparse_set(
        &mut self,
        index: usize,
        count: u8,
        sparse_max_bytes: usize,
    ) -> Result<bool, Corrupt> {
        if count > SPARSE_VAL_MAX_VALUE {
            return self.promote(index, count);
        }
        // Step 1: the opcode covering `index`.
        let end = self.bytes.len();
        let mut p = HDR_SIZE;
        let mut first = 0usize;
        let mut prev: Option<usize> = None;
        let mut found: Option<(Op, usize)> = None;
        while p < end {
            let (op, oplen) = Op::at(&self.bytes, p);
            if index < first + op.span() {
                found = Some((op, oplen));
                break;
            }
            prev = Some(p);
            p += oplen;
            first += op.span();
        }
        let Some((op, oplen)) = found else {
            return Err(Corrupt);
        };
        let has_next = p + oplen < end;

        // Step 2: the trivial cases, changed in place.
        let mut in_place = false;
        match op {
            Op::Val { value, .. } if value >= count => return Ok(false),
            Op::Val { len: 1, .. }
            | Op::Zero {
                len: 1,
                xzero: false,
            } => {
                self.bytes[p] = val_byte(count, 1);
                in_place = true;
            }
            _ => {}
        }

        if !in_place {
            // The general case: split the opcode.
            let last = first + op.span() - 1;
            let mut seq: Vec<u8> = Vec::with_capacity(5);
            match op {
                Op::Zero { .. } => {
                    if index != first {
                        push_zeros(&mut seq, index - first);
                    }
                    seq.push(val_byte(count, 1));
                    if index != last {
                        push_zeros(&mut seq, last - index);
                    }
                }
                Op::Val { value, .. } => {
                    if index != first {
                        seq.push(val_byte(value, index - first));
                    }
                    seq.push(val_byte(count, 1));
                    if index != last {
                        seq.push(val_byte(value, last - index));
                    }
                }
            }
            // Step 3: put the sequence in the opcode's place.
            let old_len = match op {
                Op::Zero { xzero: true, .. } => 2,
                _ => 1,
            };
            let delta = seq.len() as isize - old_len as isize;
            if delta > 0 && (end as isize + delta) as usize > sparse_max_bytes {
                return self.promote(index, count);
            }
            let new_len = (end as isize + delta) as usize;
            if has_next {
                self.bytes.splice(p..p + old_len, seq);
            } else {
                // The opcode was the last one (an `XZERO` cut short by the
                // string's end included): redis writes the sequence over
                // it and keeps the length the size change gives.
                self.bytes.truncate(p);
                self.bytes.extend_from_slice(&seq);
                self.bytes.resize(new_len, 0);
            }
        }

        // Step 4: merge adjacent VAL opcodes of one value, scanning up to
        // five opcodes from the one before the change.
        let mut p = prev.unwrap_or(HDR_SIZE);
        let mut scan = 5;
        while p < self.bytes.len() {
            if scan == 0 {
                break;
            }
            scan -= 1;
            let b = self.bytes[p];
            if b & 0xc0 == 0x40 {
                p += 2;
                continue;
            }
            if b & 0xc0 == 0 {
                p += 1;
                continue;
            }
            if let Some(&n) = self.bytes.get(p + 1) {
                if n & 0x80 != 0 {
                    let v1 = ((b >> 2) & 0x1f) + 1;
                    let v2 = ((n >> 2) & 0x1f) + 1;
                    if v1 == v2 {
                        let len = usize::from(b & 3) + 1 + usize::from(n & 3) + 1;
                        if len <= SPARSE_VAL_MAX_LEN {
                            self.bytes[p + 1] = val_byte(v1, len);
                            self.bytes.remove(p);
                            continue;
                        }
                    }
                }
            }
            p += 1;
        }
        self.invalidate_cache();
        Ok(true)
    }

    /// Makes the HLL dense, then sets the register there.
    fn promote(&mut self, index: usize, count: u8) -> Result<bool, Corrupt> {
        self.to_dense()?;
        Ok(dense_set(&mut self.bytes[HDR_SIZE..], index, count))
    }

    /// Converts a sparse HLL to dense (`hllSparseToDense`), keeping the
    /// header's other bytes (the cached cardinality too); false if it was
    /// dense already.
    pub fn to_dense(&mut self) -> Result<bool, Corrupt> {
        if self.encoding() == Encoding::Dense {
            return Ok(false);
        }
        let mut dense = vec![0u8; DENSE_SIZE];
        dense[..HDR_SIZE].copy_from_slice(&self.bytes[..HDR_SIZE]);
        dense[4] = DENSE;
        let regs = &mut dense[HDR_SIZE..];
        let mut idx = 0usize;
        let mut p = HDR_SIZE;
        while p < self.bytes.len() {
            let (op, oplen) = Op::at(&self.bytes, p);
            match op {
                Op::Zero { len, .. } => idx += len,
                Op::Val { value, len } => {
                    // A run past the last register: corrupt (redis
                    // 7.0.15 breaks out here and then checks the total;
                    // its fix for CVE-2025-32023, in the redis-server
                    // this is compared with, refuses at once).
                    if idx + len > REGISTERS {
                        return Err(Corrupt);
                    }
                    for i in idx..idx + len {
                        dense_put(regs, i, value);
                    }
                    idx += len;
                }
            }
            p += oplen;
        }
        if idx != REGISTERS {
            return Err(Corrupt);
        }
        self.bytes = dense;
        Ok(true)
    }

    /// Every register, one byte each (PFDEBUG GETREG on a dense HLL, and
    /// the dense side of the merge).
    pub fn dense_registers(&self) -> Option<Vec<u8>> {
        (self.encoding() == Encoding::Dense).then(|| {
            let regs = &self.bytes[HDR_SIZE..];
            (0..REGISTERS).map(|i| dense_get(regs, i)).collect()
        })
    }

    /// Raises each of `max`'s registers to this HLL's (`hllMerge`).
    pub fn merge_into(&self, max: &mut [u8; REGISTERS]) -> Result<(), Corrupt> {
        match self.encoding() {
            Encoding::Dense => {
                let regs = &self.bytes[HDR_SIZE..];
                for (i, m) in max.iter_mut().enumerate() {
                    *m = (*m).max(dense_get(regs, i));
                }
                Ok(())
            }
            Encoding::Sparse => {
                let mut i = 0usize;
                let mut p = HDR_SIZE;
                while p < self.bytes.len() {
                    let (op, oplen) = Op::at(&self.bytes, p);
                    match op {
                        Op::Zero { len, .. } => i += len,
                        Op::Val { value, len } => {
                            // As in `to_dense`.
                            if i + len > REGISTERS {
                                return Err(Corrupt);
                            }
                            for m in &mut max[i..i + len] {
                                *m = (*m).max(value);
                            }
                            i += len;
                        }
                    }
                    p += oplen;
                }
                if i != REGISTERS {
                    return Err(Corrupt);
                }
                Ok(())
            }
        }
    }

    /// The estimated cardinality (`hllCount`); for a sparse form that does
    /// not cover exactly 16384 registers, [`Corrupt`].
    pub fn count(&self) -> Result<u64, Corrupt> {
        let mut histo = [0i64; 64];
        match self.encoding() {
            Encoding::Dense => {
                let regs = &self.bytes[HDR_SIZE..];
                for i in 0..REGISTERS {
                    histo[usize::from(dense_get(regs, i))] += 1;
                }
            }
            Encoding::Sparse => {
                let mut idx = 0usize;
                let mut p = HDR_SIZE;
                while p < self.bytes.len() {
                    let (op, oplen) = Op::at(&self.bytes, p);
                    match op {
                        Op::Zero { len, .. } => histo[0] += len as i64,
                        Op::Val { value, len } => histo[usize::from(value)] += len as i64,
                    }
                    idx += op.span();
                    p += oplen;
                }
                if idx != REGISTERS {
                    return Err(Corrupt);
                }
            }
        }
        Ok(estimate(&histo))
    }

    /// PFDEBUG DECODE's text: each opcode as `z:len`, `Z:len` or
    /// `v:value,len`, space separated; `None` for a dense HLL.
    pub fn decode(&self) -> Option<String> {
        if self.encoding() != Encoding::Sparse {
            return None;
        }
        let mut out = String::new();
        let mut p = HDR_SIZE;
        while p < self.bytes.len() {
            let (op, oplen) = Op::at(&self.bytes, p);
            let text = match op {
                Op::Zero { len, xzero: false } => format!("z:{len} "),
                Op::Zero { len, xzero: true } => format!("Z:{len} "),
                Op::Val { value, len } => format!("v:{value},{len} "),
            };
            out.push_str(&text);
            p += oplen;
        }
        Some(out.trim_matches(' ').to_string())
    }
}

/// The cardinality of registers held one per byte (the union PFCOUNT of
/// several keys builds).
pub fn count_registers(registers: &[u8; REGISTERS]) -> u64 {
    let mut histo = [0i64; 64];
    for &r in registers {
        histo[usize::from(r & 63)] += 1;
    }
    estimate(&histo)
}

/// Ertl's `sigma`.
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let z_prime = z;
        z += x * y;
        y += y;
        if z_prime == z {
            return z;
        }
    }
}

/// Ertl's `tau`.
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let z_prime = z;
        y *= 0.5;
        let d = 1.0 - x;
        z -= d * d * y;
        if z_prime == z {
            return z / 3.0;
        }
    }
}

/// The estimate from the register histogram, as redis 7.0 computes it.
fn estimate(histo: &[i64; 64]) -> u64 {
    let m = REGISTERS as f64;
    let q = Q as usize;
    let mut z = m * tau((m - histo[q + 1] as f64) / m);
    for j in (1..=q).rev() {
        z += histo[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(histo[0] as f64 / m);
    // llroundl: halves away from zero, as f64::round.
    (ALPHA_INF * m * m / z).round() as u64
}

/// A small xorshift generator for the self test's random registers and
/// seed (redis uses `rand()`; any values do).
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

/// PFSELFTEST (`pfselftestCommand`): the dense register accessors keep
/// every value without touching their neighbours, and over ten million
/// elements a sparse and a dense HLL agree and stay within six standard
/// errors. `Err` is the failure's text (without the `TESTFAILED` prefix's
/// error code).
pub fn self_test(sparse_max_bytes: usize, seed: u64) -> Result<(), String> {
    let mut rng = XorShift(seed | 1);
    let mut dense = vec![0u8; DENSE_SIZE];
    let mut bytes = [0u8; REGISTERS];
    for _ in 0..1000 {
        for (i, b) in bytes.iter_mut().enumerate() {
            let r = (rng.next() & u64::from(REGISTER_MAX)) as u8;
            *b = r;
            dense_put(&mut dense[HDR_SIZE..], i, r);
        }
        for (i, &b) in bytes.iter().enumerate() {
            let v = dense_get(&dense[HDR_SIZE..], i);
            if v != b {
                return Err(format!("TESTFAILED Register {i} should be {b} but is {v}"));
            }
        }
    }

    let mut dense = Hll {
        bytes: {
            let mut d = vec![0u8; DENSE_SIZE];
            d[..4].copy_from_slice(b"HYLL");
            d
        },
    };
    let mut hll = Hll::new();
    let relerr = 1.04 / (REGISTERS as f64).sqrt();
    let mut checkpoint: i64 = 1;
    let seed = rng.next();
    for j in 1..=10_000_000u64 {
        let ele = (j ^ seed).to_le_bytes();
        let (index, count) = pattern(&ele);
        dense_set(&mut dense.bytes[HDR_SIZE..], index, count);
        hll.set(index, count, sparse_max_bytes)
            .map_err(|_| "TESTFAILED corrupted sparse HLL".to_string())?;
        if j as i64 != checkpoint {
            continue;
        }
        if (j as usize) < sparse_max_bytes / 2 && hll.encoding() != Encoding::Sparse {
            return Err("TESTFAILED sparse encoding not used".into());
        }
        let d = dense.count().unwrap_or(0);
        if Ok(d) != hll.count() {
            return Err("TESTFAILED dense/sparse disagree".into());
        }
        let abserr = (checkpoint - d as i64).abs();
        let maxerr = if j == 10 {
            1
        } else {
            (relerr * 6.0 * checkpoint as f64).ceil() as i64
        };
        if abserr > maxerr {
            return Err(format!(
                "TESTFAILED Too big error. card:{checkpoint} abserr:{abserr}"
            ));
        }
        checkpoint *= 10;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_hll_is_redis_empty_sparse() {
        let h = Hll::new();
        assert_eq!(
            h.as_bytes(),
            b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x7f\xff"
        );
        assert_eq!(h.count(), Ok(0));
        assert_eq!(h.cached_count(), Some(0));
    }

    #[test]
    fn patterns_match_redis() {
        // Register and count of each element as redis-server 7.0 stores
        // them (PFADD, then PFDEBUG DECODE), covering every tail length
        // class: empty, short, one whole block, a block and a tail.
        assert_eq!(pattern(b"a"), (12711, 2));
        assert_eq!(pattern(b"hello"), (9216, 1));
        assert_eq!(pattern(b""), (5938, 2));
        assert_eq!(pattern(b"12345678"), (10579, 3));
        assert_eq!(pattern(b"123456789abcdefgh"), (1958, 3));
        let mut h = Hll::new();
        for e in [&b"a"[..], b"b", b"c"] {
            h.add(e, 3000).unwrap();
        }
        h.invalidate_cache();
        assert_eq!(
            h.as_bytes(),
            b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x60\xf3\x80\x50\xb1\x84\x4b\xfb\x80\x42\x5a"
        );
        assert_eq!(h.decode().as_deref().map(|s| s.split(' ').count()), Some(7));
    }

    #[test]
    fn sparse_and_dense_agree() {
        let mut sparse = Hll::new();
        let mut dense = Hll::new();
        dense.to_dense().unwrap();
        for i in 0..2000u32 {
            let e = i.to_string();
            sparse.add(e.as_bytes(), 3000).unwrap();
            dense.add(e.as_bytes(), 3000).unwrap();
            assert_eq!(sparse.count(), dense.count(), "after {i}");
        }
        let mut s = sparse.clone();
        s.to_dense().unwrap();
        assert_eq!(s.dense_registers(), dense.dense_registers());
    }

    #[test]
    fn corrupt_sparse_is_reported_not_panicking() {
        let mut h = Hll::new();
        h.add(b"a", 3000).unwrap();
        let mut bytes = h.into_bytes();
        bytes.extend_from_slice(b"hello");
        let h = Hll::from_bytes(bytes).unwrap();
        assert_eq!(h.count(), Err(Corrupt));
        for cut in HDR_SIZE..h.as_bytes().len() {
            let mut b = h.as_bytes().to_vec();
            b.truncate(cut);
            let mut x = Hll::from_bytes(b).unwrap();
            let _ = x.count();
            let _ = x.add(b"zz", 3000);
            let _ = x.to_dense();
        }
    }

    #[test]
    fn windows_change_what_the_whole_value_changes() {
        let mut whole = Hll::new();
        whole.to_dense().unwrap();
        let mut patched = whole.as_bytes().to_vec();
        for i in 0..5000u32 {
            let e = format!("w{i}");
            let (index, count) = pattern(e.as_bytes());
            let changed = whole.add(e.as_bytes(), 3000).unwrap();
            let at = dense_offset(index);
            let mut window = [0u8; 2];
            window[0] = patched[at];
            window[1] = patched.get(at + 1).copied().unwrap_or(0);
            assert_eq!(raise_in_window(&mut window, index, count), changed);
            patched[at] = window[0];
            if let Some(b) = patched.get_mut(at + 1) {
                *b = window[1];
            }
        }
        // The last register's window ends the value.
        let mut window = [0u8; 2];
        assert!(raise_in_window(&mut window, REGISTERS - 1, 63));
        assert_eq!(dense_offset(REGISTERS - 1) + 1, DENSE_SIZE);
        assert_eq!(patched, whole.as_bytes());
        let mut header = [0u8; HDR_SIZE];
        header.copy_from_slice(&patched[..HDR_SIZE]);
        assert!(is_dense_header(&header, patched.len()));
        assert!(!is_dense_header(&header, patched.len() - 1));
    }

    #[test]
    fn self_test_passes() {
        assert_eq!(self_test(3000, 12345), Ok(()));
    }
}

//! Bit commands on strings: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP,
//! BITFIELD and BITFIELD_RO.
//!
//! A bitmap is a string: bit 0 is the most significant bit of byte 0, and
//! a string is an endless run of zero bits past its end. Reads run on the
//! read pool; writes read the string, change it and store it whole on the
//! writer (keeping its TTL), as one atomic step. Every argument check,
//! reply and error follows redis-server 7.0's `bitops.c`, including its
//! order: BITCOUNT and BITPOS look the key up before they read their range
//! arguments, so a missing key answers 0 (or BITPOS's -1/0) whatever
//! follows.

use bytes::Bytes;
use respite_engine::{EngineError, Kind, Txn, View};

use crate::args::{parse_i64, upper, Args};
use crate::command::Ctx;
use crate::command::{ReadCommand, WriteCommand};
use crate::error::CommandError;
use crate::reply::Reply;

fn offset_error() -> CommandError {
    CommandError::Other("bit offset is not an integer or out of range".into())
}

/// A bit offset (Redis's `getBitOffsetFromArgument`): non-negative, inside
/// `proto-max-bulk-len` bytes; with `bits`, `#n` means `n * bits`.
fn bit_offset(arg: &[u8], bits: Option<u64>, max_len: usize) -> Result<u64, CommandError> {
    let (hash, digits) = match (arg.first(), bits) {
        (Some(b'#'), Some(_)) => (true, &arg[1..]),
        _ => (false, arg),
    };
    let mut n = parse_i64(digits).ok_or_else(offset_error)?;
    if hash {
        n = n.wrapping_mul(bits.unwrap_or(1) as i64);
    }
    if n < 0 || (n >> 3) as u64 >= max_len as u64 {
        return Err(offset_error());
    }
    Ok(n as u64)
}

fn max_len(s: &Ctx<'_>) -> usize {
    s.max_bulk_len()
}

fn bit_at(value: &[u8], offset: u64) -> bool {
    let byte = (offset >> 3) as usize;
    byte < value.len() && value[byte] & (0x80 >> (offset & 7)) != 0
}

/// `SETBIT key offset value`: replies with the bit's old value.
pub struct SetBit {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The bit.
    offset: u64,
    /// Its new value.
    on: bool,
}

impl WriteCommand for SetBit {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let key = args.next()?;
        let offset = bit_offset(&args.next()?, None, max_len(s))?;
        let bit_error = || CommandError::Other("bit is not an integer or out of range".into());
        let on = match parse_i64(&args.next()?).ok_or_else(bit_error)? {
            0 => false,
            1 => true,
            _ => return Err(bit_error()),
        };
        Ok(SetBit {
            db: s.db,
            key,
            offset,
            on,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let entry = txn.string_entry(self.db, &self.key)?;
        let existed = entry.is_some();
        let (mut value, expire_at) = entry.unwrap_or_default();
        let byte = (self.offset >> 3) as usize;
        let grew = value.len() <= byte;
        if grew {
            value.resize(byte + 1, 0);
        }
        let old = bit_at(&value, self.offset);
        if !existed || grew || old != self.on {
            let mask = 0x80 >> (self.offset & 7);
            if self.on {
                value[byte] |= mask;
            } else {
                value[byte] &= !mask;
            }
            txn.put_string(self.db, &self.key, &value, expire_at)?;
        }
        Ok(Reply::Int(old as i64))
    }
}

/// `GETBIT key offset`
pub struct GetBit {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The bit.
    offset: u64,
}

impl ReadCommand for GetBit {
    const QUICK: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let key = args.next()?;
        let offset = bit_offset(&args.next()?, None, max_len(s))?;
        Ok(GetBit {
            db: s.db,
            key,
            offset,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let value = view.get_string(self.db, &self.key)?.unwrap_or_default();
        Ok(Reply::Int(bit_at(&value, self.offset) as i64))
    }
}

/// A BITCOUNT or BITPOS range, as given.
#[derive(Clone, Copy)]
struct Range {
    start: i64,
    end: Option<i64>,
    bits: bool,
}

/// Resolves a range over a string of `len` bytes to inclusive bit
/// positions, as Redis does (negative indexes count from the end, then
/// both are clamped); `None` when empty.
fn resolve(range: Range, len: usize) -> Option<(u64, u64)> {
    let total = if range.bits {
        len as i128 * 8
    } else {
        len as i128
    };
    let mut start = range.start as i128;
    let mut end = range.end.map_or(total - 1, |e| e as i128);
    if start < 0 {
        start += total;
    }
    if end < 0 {
        end += total;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= total {
        end = total - 1;
    }
    if start > end {
        return None;
    }
    Some(if range.bits {
        (start as u64, end as u64)
    } else {
        (start as u64 * 8, end as u64 * 8 + 7)
    })
}

/// Reads `BYTE` or `BIT`.
fn unit(arg: &[u8]) -> Result<bool, CommandError> {
    match upper(arg).as_str() {
        "BIT" => Ok(true),
        "BYTE" => Ok(false),
        _ => Err(CommandError::Syntax),
    }
}

/// `BITCOUNT key [start end [BYTE | BIT]]`
pub struct BitCount {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The range, or the error its arguments make (answered only when the
    /// key exists, as in Redis).
    range: Result<Option<Range>, CommandError>,
}

impl ReadCommand for BitCount {
    const QUICK: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let key = args.next()?;
        let rest = args.rest();
        let range = (|| match rest.len() {
            0 => Ok(None),
            2 | 3 => {
                let start = parse_i64(&rest[0]).ok_or(CommandError::NotInteger)?;
                let end = parse_i64(&rest[1]).ok_or(CommandError::NotInteger)?;
                let bits = match rest.get(2) {
                    Some(u) if !(start < 0 && end < 0 && start > end) => unit(u)?,
                    _ => false,
                };
                Ok(Some(Range {
                    start,
                    end: Some(end),
                    bits,
                }))
            }
            _ => Err(CommandError::Syntax),
        })();
        Ok(BitCount {
            db: s.db,
            key,
            range,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let Some(value) = view.get_string(self.db, &self.key)? else {
            return Ok(Reply::Int(0));
        };
        let range = self.range?.unwrap_or(Range {
            start: 0,
            end: None,
            bits: false,
        });
        if let Some(end) = range.end {
            if range.start < 0 && end < 0 && range.start > end {
                return Ok(Reply::Int(0));
            }
        }
        let Some((first, last)) = resolve(range, value.len()) else {
            return Ok(Reply::Int(0));
        };
        let n = (first..=last).filter(|&b| bit_at(&value, b)).count();
        Ok(Reply::Int(n as i64))
    }
}

/// `BITPOS key bit [start [end [BYTE | BIT]]]`
pub struct BitPos {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The bit looked for.
    bit: bool,
    /// The range, or the error its arguments make (answered only when the
    /// key exists, as in Redis).
    range: Result<Option<Range>, CommandError>,
}

impl ReadCommand for BitPos {
    const QUICK: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let key = args.next()?;
        let bit = match parse_i64(&args.next()?).ok_or(CommandError::NotInteger)? {
            0 => false,
            1 => true,
            _ => {
                return Err(CommandError::Other(
                    "The bit argument must be 1 or 0.".into(),
                ))
            }
        };
        let rest = args.rest();
        let range = (|| {
            if rest.is_empty() {
                return Ok(None);
            }
            if rest.len() > 3 {
                return Err(CommandError::Syntax);
            }
            let start = parse_i64(&rest[0]).ok_or(CommandError::NotInteger)?;
            let bits = match rest.get(2) {
                Some(u) => unit(u)?,
                None => false,
            };
            let end = match rest.get(1) {
                Some(e) => Some(parse_i64(e).ok_or(CommandError::NotInteger)?),
                None => None,
            };
            Ok(Some(Range { start, end, bits }))
        })();
        Ok(BitPos {
            db: s.db,
            key,
            bit,
            range,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let Some(value) = view.get_string(self.db, &self.key)? else {
            return Ok(Reply::Int(if self.bit { -1 } else { 0 }));
        };
        let range = self.range?;
        let end_given = range.is_some_and(|r| r.end.is_some());
        let range = range.unwrap_or(Range {
            start: 0,
            end: None,
            bits: false,
        });
        let Some((first, last)) = resolve(range, value.len()) else {
            return Ok(Reply::Int(-1));
        };
        if let Some(pos) = (first..=last).find(|&b| bit_at(&value, b) == self.bit) {
            return Ok(Reply::Int(pos as i64));
        }
        // No such bit in the range. Looking for a 0 without an end: the
        // string goes on with zeros right after it.
        Ok(Reply::Int(if !self.bit && !end_given {
            last as i64 + 1
        } else {
            -1
        }))
    }
}

/// BITOP's operations.
#[derive(Clone, Copy, PartialEq)]
enum BitOpKind {
    And,
    Or,
    Xor,
    Not,
}

/// `BITOP AND | OR | XOR | NOT destkey key [key ...]`: replies with the
/// result's length; an empty result deletes the destination.
pub struct BitOp {
    /// Selected database.
    db: u32,
    /// The operation.
    op: BitOpKind,
    /// The destination.
    dest: Bytes,
    /// The sources.
    keys: Vec<Bytes>,
}

impl WriteCommand for BitOp {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let op = match upper(&args.next()?).as_str() {
            "AND" => BitOpKind::And,
            "OR" => BitOpKind::Or,
            "XOR" => BitOpKind::Xor,
            "NOT" => BitOpKind::Not,
            _ => return Err(CommandError::Syntax),
        };
        let dest = args.next()?;
        let keys = args.rest();
        if op == BitOpKind::Not && keys.len() != 1 {
            return Err(CommandError::Other(
                "BITOP NOT must be called with a single source key.".into(),
            ));
        }
        Ok(BitOp {
            db: s.db,
            op,
            dest,
            keys,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let mut sources = Vec::with_capacity(self.keys.len());
        for key in &self.keys {
            sources.push(txn.get_string(self.db, key)?.unwrap_or_default());
        }
        let max = sources.iter().map(Vec::len).max().unwrap_or(0);
        if max == 0 {
            txn.delete(self.db, &self.dest)?;
            return Ok(Reply::Int(0));
        }
        let byte = |s: &Vec<u8>, i: usize| s.get(i).copied().unwrap_or(0);
        let result: Vec<u8> = (0..max)
            .map(|i| {
                let first = byte(&sources[0], i);
                sources[1..].iter().fold(
                    if self.op == BitOpKind::Not {
                        !first
                    } else {
                        first
                    },
                    |acc, s| match self.op {
                        BitOpKind::And => acc & byte(s, i),
                        BitOpKind::Or => acc | byte(s, i),
                        BitOpKind::Xor => acc ^ byte(s, i),
                        BitOpKind::Not => acc,
                    },
                )
            })
            .collect();
        txn.put_string(self.db, &self.dest, &result, None)?;
        Ok(Reply::Int(max as i64))
    }
}

/// What BITFIELD does when a value does not fit.
#[derive(Clone, Copy, PartialEq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

/// One BITFIELD operation.
#[derive(Clone, Copy)]
struct FieldOp {
    /// GET (None), SET or INCRBY (`Some((value, incr))`).
    write: Option<(i64, bool)>,
    signed: bool,
    bits: u32,
    offset: u64,
    overflow: Overflow,
}

fn type_error() -> CommandError {
    CommandError::Other(
        "Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is."
            .into(),
    )
}

/// Parses the operations of BITFIELD (`read_only` for BITFIELD_RO).
fn parse_field_ops(args: &mut Args, s: &Ctx<'_>) -> Result<Vec<FieldOp>, CommandError> {
    let max = max_len(s);
    let mut ops = Vec::new();
    let mut overflow = Overflow::Wrap;
    while let Some(sub) = args.next_opt() {
        let name = upper(&sub);
        let remaining = args.remaining();
        let write = match name.as_str() {
            "GET" if remaining >= 2 => false,
            "SET" | "INCRBY" if remaining >= 3 => true,
            "OVERFLOW" if remaining >= 1 => {
                overflow = match upper(&args.next()?).as_str() {
                    "WRAP" => Overflow::Wrap,
                    "SAT" => Overflow::Sat,
                    "FAIL" => Overflow::Fail,
                    _ => {
                        return Err(CommandError::Other(
                            "Invalid OVERFLOW type specified".into(),
                        ))
                    }
                };
                continue;
            }
            _ => return Err(CommandError::Syntax),
        };
        let ty = args.next()?;
        let signed = match ty.first() {
            Some(b'i') => true,
            Some(b'u') => false,
            _ => return Err(type_error()),
        };
        let bits = parse_i64(&ty[1..]).ok_or_else(type_error)?;
        if bits < 1 || (signed && bits > 64) || (!signed && bits > 63) {
            return Err(type_error());
        }
        let offset = bit_offset(&args.next()?, Some(bits as u64), max)?;
        let write = if write {
            let value = parse_i64(&args.next()?).ok_or(CommandError::NotInteger)?;
            Some((value, name == "INCRBY"))
        } else {
            None
        };
        ops.push(FieldOp {
            write,
            signed,
            bits: bits as u32,
            offset,
            overflow,
        });
    }
    Ok(ops)
}

fn get_unsigned(p: &[u8], offset: u64, bits: u32) -> u64 {
    (0..bits as u64).fold(0u64, |v, j| (v << 1) | bit_at(p, offset + j) as u64)
}

fn get_signed(p: &[u8], offset: u64, bits: u32) -> i64 {
    let mut v = get_unsigned(p, offset, bits);
    if bits < 64 && v & (1u64 << (bits - 1)) != 0 {
        v |= u64::MAX << bits;
    }
    v as i64
}

fn set_unsigned(p: &mut [u8], offset: u64, bits: u32, value: u64) {
    for j in 0..bits as u64 {
        let on = value & (1u64 << (bits as u64 - 1 - j)) != 0;
        let at = offset + j;
        let mask = 0x80u8 >> (at & 7);
        let byte = &mut p[(at >> 3) as usize];
        if on {
            *byte |= mask;
        } else {
            *byte &= !mask;
        }
    }
}

/// Redis's `checkUnsignedBitfieldOverflow`: `Some(limit)` on overflow,
/// with the value to store (for WRAP and SAT).
fn unsigned_overflow(value: u64, incr: i64, bits: u32, ow: Overflow) -> Option<u64> {
    let max = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let max_incr = max.wrapping_sub(value) as i64;
    let min_incr = value.wrapping_neg() as i64;
    let wrap = || value.wrapping_add(incr as u64) & !(u64::MAX << bits);
    if value > max || (incr > 0 && incr > max_incr) {
        Some(match ow {
            Overflow::Wrap => wrap(),
            _ => max,
        })
    } else if incr < 0 && incr < min_incr {
        Some(match ow {
            Overflow::Wrap => wrap(),
            _ => 0,
        })
    } else {
        None
    }
}

/// Redis's `checkSignedBitfieldOverflow`.
fn signed_overflow(value: i64, incr: i64, bits: u32, ow: Overflow) -> Option<i64> {
    let max = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let max_incr = (max as u64).wrapping_sub(value as u64) as i64;
    let min_incr = min.wrapping_sub(value);
    let wrap = || {
        let mut c = (value as u64).wrapping_add(incr as u64);
        if bits < 64 {
            let mask = u64::MAX << bits;
            if c & (1u64 << (bits - 1)) != 0 {
                c |= mask;
            } else {
                c &= !mask;
            }
        }
        c as i64
    };
    if value > max || (bits != 64 && incr > max_incr) || (value >= 0 && incr > 0 && incr > max_incr)
    {
        Some(match ow {
            Overflow::Wrap => wrap(),
            _ => max,
        })
    } else if value < min
        || (bits != 64 && incr < min_incr)
        || (value < 0 && incr < 0 && incr < min_incr)
    {
        Some(match ow {
            Overflow::Wrap => wrap(),
            _ => min,
        })
    } else {
        None
    }
}

/// Runs the operations on `p` (grown to hold every written bit); returns
/// the replies and whether anything changed.
fn run_field_ops(p: &mut [u8], ops: &[FieldOp]) -> (Vec<Reply>, bool) {
    let mut replies = Vec::with_capacity(ops.len());
    let mut changed = false;
    for op in ops {
        let Some((arg, incr)) = op.write else {
            replies.push(Reply::Int(if op.signed {
                get_signed(p, op.offset, op.bits)
            } else {
                get_unsigned(p, op.offset, op.bits) as i64
            }));
            continue;
        };
        let (reply, new, old, failed) = if op.signed {
            let old = get_signed(p, op.offset, op.bits);
            let (new, over) = if incr {
                match signed_overflow(old, arg, op.bits, op.overflow) {
                    Some(limit) => (limit, true),
                    None => (old.wrapping_add(arg), false),
                }
            } else {
                match signed_overflow(arg, 0, op.bits, op.overflow) {
                    Some(limit) => (limit, true),
                    None => (arg, false),
                }
            };
            let reply = if incr { new } else { old };
            (
                reply,
                new as u64,
                old as u64,
                over && op.overflow == Overflow::Fail,
            )
        } else {
            let old = get_unsigned(p, op.offset, op.bits);
            let (new, over) = if incr {
                match unsigned_overflow(old, arg, op.bits, op.overflow) {
                    Some(limit) => (limit, true),
                    None => (old.wrapping_add(arg as u64), false),
                }
            } else {
                match unsigned_overflow(arg as u64, 0, op.bits, op.overflow) {
                    Some(limit) => (limit, true),
                    None => (arg as u64, false),
                }
            };
            let reply = if incr { new as i64 } else { old as i64 };
            (reply, new, old, over && op.overflow == Overflow::Fail)
        };
        if failed {
            replies.push(Reply::Nil);
            continue;
        }
        replies.push(Reply::Int(reply));
        set_unsigned(p, op.offset, op.bits, new);
        changed |= new != old;
    }
    (replies, changed)
}

/// `BITFIELD key [GET type offset | SET type offset value | INCRBY type
/// offset increment | OVERFLOW WRAP | SAT | FAIL ...]`
pub struct BitField {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The operations, in order.
    ops: Vec<FieldOp>,
}

impl WriteCommand for BitField {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let key = args.next()?;
        let ops = parse_field_ops(args, s)?;
        Ok(BitField { db: s.db, key, ops })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let writes = self.ops.iter().any(|op| op.write.is_some());
        let entry = txn.string_entry(self.db, &self.key)?;
        if !writes {
            let value = entry.map(|(v, _)| v).unwrap_or_default();
            let mut padded = value;
            let (replies, _) = run_field_ops(&mut padded, &self.ops);
            return Ok(Reply::Array(replies));
        }
        let existed = entry.is_some();
        let (mut value, expire_at) = entry.unwrap_or_default();
        let highest = self
            .ops
            .iter()
            .filter(|op| op.write.is_some())
            .map(|op| op.offset + op.bits as u64 - 1)
            .max()
            .unwrap_or(0);
        let needed = (highest >> 3) as usize + 1;
        let grew = value.len() < needed;
        if grew {
            value.resize(needed, 0);
        }
        // GETs past the end read zeros.
        let read_end = self
            .ops
            .iter()
            .map(|op| ((op.offset + op.bits as u64 + 7) >> 3) as usize)
            .max()
            .unwrap_or(0);
        let len = value.len();
        let mut work = value;
        if work.len() < read_end {
            work.resize(read_end, 0);
        }
        let (replies, changed) = run_field_ops(&mut work, &self.ops);
        work.truncate(len);
        if !existed || grew || changed {
            txn.put_string(self.db, &self.key, &work, expire_at)?;
        }
        Ok(Reply::Array(replies))
    }
}

/// `BITFIELD_RO key [GET type offset ...]`
pub struct BitFieldRo {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The GETs.
    ops: Vec<FieldOp>,
}

impl ReadCommand for BitFieldRo {
    const QUICK: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let key = args.next()?;
        let ops = parse_field_ops(args, s)?;
        // Refused before the key is looked up, as in Redis.
        if ops.iter().any(|op| op.write.is_some()) {
            return Err(CommandError::Other(
                "BITFIELD_RO only supports the GET subcommand".into(),
            ));
        }
        Ok(BitFieldRo { db: s.db, key, ops })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let value = match view.entry(self.db, &self.key)? {
            Some(e) if e.kind != Kind::String => return Err(EngineError::WrongType.into()),
            Some(_) => view.get_string(self.db, &self.key)?.unwrap_or_default(),
            None => Vec::new(),
        };
        let mut padded = value;
        let end = self
            .ops
            .iter()
            .map(|op| ((op.offset + op.bits as u64 + 7) >> 3) as usize)
            .max()
            .unwrap_or(0);
        if padded.len() < end {
            padded.resize(end, 0);
        }
        Ok(Reply::Array(run_field_ops(&mut padded, &self.ops).0))
    }
}

/// This family's rows of the command table (see [`crate::command::TABLE`]).
#[rustfmt::skip]
pub(crate) fn commands() -> Vec<crate::command::Spec> {
    use crate::command::Spec;
    vec![
        Spec::read::<BitCount>("bitcount"),
        Spec::write::<BitField>("bitfield"),
        Spec::read::<BitFieldRo>("bitfield_ro"),
        Spec::write::<BitOp>("bitop"),
        Spec::read::<BitPos>("bitpos"),
        Spec::read::<GetBit>("getbit"),
        Spec::write::<SetBit>("setbit"),
    ]
}

//! String commands: GET, SET and its family, counters, ranges.
//!
//! Reads (GET, MGET, STRLEN, GETRANGE) run on the read pool. Everything that
//! writes, including the commands that read first (INCR, APPEND, SET ... GET,
//! GETDEL, GETEX, SETNX), runs on the writer inside the group commit, so the
//! read and the write are one atomic step and see every earlier write.

use bytes::Bytes;
use respite_engine::{EngineError, Txn, View};

use super::keys::{absolute_expire, ExpireUnit};
use super::{ReadCommand, Session, WriteCommand};
use crate::args::{parse_i64, upper, Args};
use crate::error::CommandError;
use crate::reply::Reply;

/// `GET key`
pub struct Get {
    /// Selected database.
    db: u32,
    /// The key to read.
    key: Bytes,
}

impl ReadCommand for Get {
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        Ok(Get {
            db: s.db,
            key: args.next()?,
        })
    }
    fn apply(self, view: &View<'_>) -> Result<Reply, CommandError> {
        Ok(Reply::bulk_or_nil(view.get_string(self.db, &self.key)?))
    }
}

/// `MGET key [key ...]`: a key that is missing or not a string is nil.
pub struct MGet {
    /// Selected database.
    db: u32,
    /// The keys, in reply order.
    keys: Vec<Bytes>,
}

impl ReadCommand for MGet {
    const MULTI_STATEMENT: bool = true;
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        Ok(MGet {
            db: s.db,
            keys: args.rest(),
        })
    }
    fn apply(self, view: &View<'_>) -> Result<Reply, CommandError> {
        let mut out = Vec::with_capacity(self.keys.len());
        for key in &self.keys {
            out.push(match view.get_string(self.db, key) {
                Ok(v) => Reply::bulk_or_nil(v),
                Err(EngineError::WrongType) => Reply::Nil,
                Err(e) => return Err(e.into()),
            });
        }
        Ok(Reply::Array(out))
    }
}

/// `STRLEN key`
pub struct StrLen {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
}

impl ReadCommand for StrLen {
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        Ok(StrLen {
            db: s.db,
            key: args.next()?,
        })
    }
    fn apply(self, view: &View<'_>) -> Result<Reply, CommandError> {
        let len = view.get_string(self.db, &self.key)?.map_or(0, |v| v.len());
        Ok(Reply::Int(len as i64))
    }
}

/// `GETRANGE key start end`: inclusive, negative offsets count from the end.
pub struct GetRange {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// First byte offset.
    start: i64,
    /// Last byte offset (inclusive).
    end: i64,
}

impl ReadCommand for GetRange {
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        Ok(GetRange {
            db: s.db,
            key: args.next()?,
            start: args.next_i64()?,
            end: args.next_i64()?,
        })
    }
    fn apply(self, view: &View<'_>) -> Result<Reply, CommandError> {
        let value = view.get_string(self.db, &self.key)?.unwrap_or_default();
        Ok(Reply::bulk(
            substring(&value, self.start, self.end).to_vec(),
        ))
    }
}

/// Redis's GETRANGE index arithmetic.
fn substring(value: &[u8], start: i64, end: i64) -> &[u8] {
    let len = value.len() as i64;
    if start < 0 && end < 0 && start > end {
        return b"";
    }
    let mut start = if start < 0 { len + start } else { start };
    let mut end = if end < 0 { len + end } else { end };
    start = start.max(0);
    end = end.max(0);
    if end >= len {
        end = len - 1;
    }
    if len == 0 || start > end {
        return b"";
    }
    &value[start as usize..=end as usize]
}

/// The expiry clause of SET and GETEX, once its value is checked.
#[derive(Clone, Copy, PartialEq)]
enum ExpireOpt {
    /// No clause: SET clears any TTL, GETEX leaves it.
    None,
    /// EX/PX/EXAT/PXAT, already turned into absolute Unix milliseconds.
    At(i64),
    /// SET KEEPTTL.
    Keep,
    /// GETEX PERSIST.
    Persist,
}

/// The expiry clause as written, its value not yet checked: Redis validates
/// the number only after every option parsed (so a conflicting option is a
/// syntax error whatever the number), and GETEX only once it found the key.
#[derive(Clone)]
enum Clause {
    /// No clause.
    None,
    /// KEEPTTL (SET only).
    Keep,
    /// PERSIST (GETEX only).
    Persist,
    /// EX/PX/EXAT/PXAT and its argument.
    Expire(ExpireUnit, Bytes),
}

/// The options of SET (`set`) or GETEX (`!set`), parsed exactly as Redis's
/// `parseExtendedStringArgumentsOrReply` does: an option may repeat (the
/// last value wins), but NX/XX and the expiry kinds exclude each other.
struct Extended {
    nx: bool,
    xx: bool,
    get: bool,
    clause: Clause,
}

fn parse_extended(args: &mut Args, set: bool) -> Result<Extended, CommandError> {
    let mut ext = Extended {
        nx: false,
        xx: false,
        get: false,
        clause: Clause::None,
    };
    while let Some(opt) = args.next_opt() {
        let word = upper(&opt);
        let unit = match word.as_str() {
            "EX" => Some(ExpireUnit::Seconds),
            "PX" => Some(ExpireUnit::Millis),
            "EXAT" => Some(ExpireUnit::UnixSeconds),
            "PXAT" => Some(ExpireUnit::UnixMillis),
            _ => None,
        };
        if let Some(unit) = unit {
            // EX/PX/EXAT/PXAT: again the same kind is fine, another is not.
            let fits = match &ext.clause {
                Clause::None => true,
                Clause::Expire(current, _) => *current == unit,
                Clause::Keep | Clause::Persist => false,
            };
            if !fits || args.remaining() == 0 {
                return Err(CommandError::Syntax);
            }
            ext.clause = Clause::Expire(unit, args.next()?);
            continue;
        }
        match (word.as_str(), &ext.clause) {
            ("NX", _) if set && !ext.xx => ext.nx = true,
            ("XX", _) if set && !ext.nx => ext.xx = true,
            ("GET", _) if set => ext.get = true,
            ("KEEPTTL", Clause::None | Clause::Keep) if set => ext.clause = Clause::Keep,
            ("PERSIST", Clause::None | Clause::Persist) if !set => ext.clause = Clause::Persist,
            _ => return Err(CommandError::Syntax),
        }
    }
    Ok(ext)
}

fn unit_value(value: &[u8], unit: ExpireUnit, cmd: &'static str) -> Result<i64, CommandError> {
    let n = parse_i64(value).ok_or(CommandError::NotInteger)?;
    if n <= 0 {
        return Err(CommandError::InvalidExpire(cmd));
    }
    absolute_expire(n, unit).ok_or(CommandError::InvalidExpire(cmd))
}

impl Clause {
    /// Checks the clause's value (Redis's `getExpireMillisecondsOrReply`).
    fn resolve(&self, cmd: &'static str) -> Result<ExpireOpt, CommandError> {
        Ok(match self {
            Clause::None => ExpireOpt::None,
            Clause::Keep => ExpireOpt::Keep,
            Clause::Persist => ExpireOpt::Persist,
            Clause::Expire(unit, value) => ExpireOpt::At(unit_value(value, *unit, cmd)?),
        })
    }
}

/// `SET key value [NX | XX] [GET] [EX seconds | PX milliseconds |
/// EXAT unix-time-seconds | PXAT unix-time-milliseconds | KEEPTTL]`
pub struct Set {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The new value.
    value: Bytes,
    /// NX: only if the key does not exist.
    nx: bool,
    /// XX: only if the key exists.
    xx: bool,
    /// GET: reply with the old value.
    get: bool,
    /// The expiry clause.
    expire: ExpireOpt,
}

impl WriteCommand for Set {
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        let key = args.next()?;
        let value = args.next()?;
        let ext = parse_extended(args, true)?;
        Ok(Set {
            db: s.db,
            key,
            value,
            nx: ext.nx,
            xx: ext.xx,
            get: ext.get,
            expire: ext.clause.resolve("set")?,
        })
    }

    fn apply(self, txn: &mut Txn<'_>) -> Result<Reply, EngineError> {
        let db = self.db;
        let old = if self.get || self.expire == ExpireOpt::Keep {
            txn.string_entry(db, &self.key).or_else(|e| match e {
                // Only GET cares that the old value is a string.
                EngineError::WrongType if !self.get => Ok(None),
                e => Err(e),
            })?
        } else {
            None
        };
        let exists = if self.nx || self.xx {
            if old.is_some() {
                true
            } else {
                txn.exists(db, &self.key)?
            }
        } else {
            false
        };
        let abort = (self.nx && exists) || (self.xx && !exists);
        if !abort {
            let expire_at = match self.expire {
                ExpireOpt::At(at) => Some(at),
                ExpireOpt::Keep => match &old {
                    Some((_, at)) => *at,
                    None => txn.entry(db, &self.key)?.and_then(|e| e.expire_at),
                },
                ExpireOpt::None | ExpireOpt::Persist => None,
            };
            txn.put_string(db, &self.key, &self.value, expire_at)?;
        }
        Ok(if self.get {
            Reply::bulk_or_nil(old.map(|(v, _)| v))
        } else if abort {
            Reply::Nil
        } else {
            Reply::Ok
        })
    }
}

/// `SETNX key value`: 1 if set, 0 if the key existed.
pub struct SetNx {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The value.
    value: Bytes,
}

impl WriteCommand for SetNx {
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        Ok(SetNx {
            db: s.db,
            key: args.next()?,
            value: args.next()?,
        })
    }
    fn apply(self, txn: &mut Txn<'_>) -> Result<Reply, EngineError> {
        if txn.exists(self.db, &self.key)? {
            return Ok(Reply::Int(0));
        }
        txn.put_string(self.db, &self.key, &self.value, None)?;
        Ok(Reply::Int(1))
    }
}

/// `SETEX key seconds value` and `PSETEX key milliseconds value`.
pub struct SetWithExpire<const MILLIS: bool> {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// Absolute expiry, Unix milliseconds.
    expire_at: i64,
    /// The value.
    value: Bytes,
}

/// `SETEX key seconds value`
pub type SetEx = SetWithExpire<false>;
/// `PSETEX key milliseconds value`
pub type PSetEx = SetWithExpire<true>;

impl<const MILLIS: bool> WriteCommand for SetWithExpire<MILLIS> {
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        let key = args.next()?;
        let ttl = args.next()?;
        let value = args.next()?;
        let (unit, name) = if MILLIS {
            (ExpireUnit::Millis, "psetex")
        } else {
            (ExpireUnit::Seconds, "setex")
        };
        Ok(SetWithExpire {
            db: s.db,
            key,
            expire_at: unit_value(&ttl, unit, name)?,
            value,
        })
    }
    fn apply(self, txn: &mut Txn<'_>) -> Result<Reply, EngineError> {
        txn.put_string(self.db, &self.key, &self.value, Some(self.expire_at))?;
        Ok(Reply::Ok)
    }
}

/// `GETSET key value`: SET that replies with the old value (and clears the
/// TTL).
pub struct GetSet {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The new value.
    value: Bytes,
}

impl WriteCommand for GetSet {
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        Ok(GetSet {
            db: s.db,
            key: args.next()?,
            value: args.next()?,
        })
    }
    fn apply(self, txn: &mut Txn<'_>) -> Result<Reply, EngineError> {
        let old = txn.get_string(self.db, &self.key)?;
        txn.put_string(self.db, &self.key, &self.value, None)?;
        Ok(Reply::bulk_or_nil(old))
    }
}

/// `GETDEL key`
pub struct GetDel {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
}

impl WriteCommand for GetDel {
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        Ok(GetDel {
            db: s.db,
            key: args.next()?,
        })
    }
    fn apply(self, txn: &mut Txn<'_>) -> Result<Reply, EngineError> {
        let old = txn.get_string(self.db, &self.key)?;
        if old.is_some() {
            txn.delete(self.db, &self.key)?;
        }
        Ok(Reply::bulk_or_nil(old))
    }
}

/// `GETEX key [EX seconds | PX milliseconds | EXAT unix-time-seconds |
/// PXAT unix-time-milliseconds | PERSIST]`
pub struct GetEx {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// What to do to the TTL, its value checked only once the key is
    /// found (as Redis does: `GETEX missing EX 0` is nil, not an error).
    clause: Clause,
}

impl WriteCommand for GetEx {
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        let key = args.next()?;
        let ext = parse_extended(args, false)?;
        Ok(GetEx {
            db: s.db,
            key,
            clause: ext.clause,
        })
    }
    fn apply(self, txn: &mut Txn<'_>) -> Result<Reply, EngineError> {
        let Some((value, _)) = txn.string_entry(self.db, &self.key)? else {
            return Ok(Reply::Nil);
        };
        let expire = match self.clause.resolve("getex") {
            Ok(expire) => expire,
            Err(e) => return Ok(e.into()),
        };
        match expire {
            ExpireOpt::At(at) => {
                txn.set_expire(self.db, &self.key, Some(at))?;
            }
            ExpireOpt::Persist => {
                txn.set_expire(self.db, &self.key, None)?;
            }
            ExpireOpt::None | ExpireOpt::Keep => {}
        }
        Ok(Reply::bulk(value))
    }
}

/// `MSET key value [key value ...]`
pub struct MSet {
    /// Selected database.
    db: u32,
    /// Key/value pairs in argument order (a later pair wins).
    pairs: Vec<(Bytes, Bytes)>,
}

fn parse_pairs(args: &mut Args, name: &str) -> Result<Vec<(Bytes, Bytes)>, CommandError> {
    if args.remaining() % 2 == 1 {
        return Err(CommandError::WrongArity(name.into()));
    }
    let rest = args.rest();
    Ok(rest
        .chunks_exact(2)
        .map(|kv| (kv[0].clone(), kv[1].clone()))
        .collect())
}

impl WriteCommand for MSet {
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        Ok(MSet {
            db: s.db,
            pairs: parse_pairs(args, "mset")?,
        })
    }
    fn apply(self, txn: &mut Txn<'_>) -> Result<Reply, EngineError> {
        for (k, v) in &self.pairs {
            txn.put_string(self.db, k, v, None)?;
        }
        Ok(Reply::Ok)
    }
}

/// `MSETNX key value [key value ...]`: all or nothing.
pub struct MSetNx {
    /// Selected database.
    db: u32,
    /// Key/value pairs.
    pairs: Vec<(Bytes, Bytes)>,
}

impl WriteCommand for MSetNx {
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        Ok(MSetNx {
            db: s.db,
            pairs: parse_pairs(args, "msetnx")?,
        })
    }
    fn apply(self, txn: &mut Txn<'_>) -> Result<Reply, EngineError> {
        for (k, _) in &self.pairs {
            if txn.exists(self.db, k)? {
                return Ok(Reply::Int(0));
            }
        }
        for (k, v) in &self.pairs {
            txn.put_string(self.db, k, v, None)?;
        }
        Ok(Reply::Int(1))
    }
}

/// Adds `delta` to the integer in a string key, keeping its TTL. The shared
/// step of INCR, DECR, INCRBY, DECRBY.
fn incr_by(txn: &mut Txn<'_>, db: u32, key: &[u8], delta: i64) -> Result<Reply, EngineError> {
    let (current, expire_at) = match txn.string_entry(db, key)? {
        Some((v, at)) => (parse_i64(&v).ok_or(EngineError::NotInteger)?, at),
        None => (0, None),
    };
    let next = current.checked_add(delta).ok_or(EngineError::Overflow)?;
    txn.put_string(db, key, next.to_string().as_bytes(), expire_at)?;
    Ok(Reply::Int(next))
}

/// `INCR key`
pub struct Incr {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
}

impl WriteCommand for Incr {
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        Ok(Incr {
            db: s.db,
            key: args.next()?,
        })
    }
    fn apply(self, txn: &mut Txn<'_>) -> Result<Reply, EngineError> {
        incr_by(txn, self.db, &self.key, 1)
    }
}

/// `DECR key`
pub struct Decr {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
}

impl WriteCommand for Decr {
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        Ok(Decr {
            db: s.db,
            key: args.next()?,
        })
    }
    fn apply(self, txn: &mut Txn<'_>) -> Result<Reply, EngineError> {
        incr_by(txn, self.db, &self.key, -1)
    }
}

/// `INCRBY key increment`
pub struct IncrBy {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The increment.
    delta: i64,
}

impl WriteCommand for IncrBy {
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        Ok(IncrBy {
            db: s.db,
            key: args.next()?,
            delta: args.next_i64()?,
        })
    }
    fn apply(self, txn: &mut Txn<'_>) -> Result<Reply, EngineError> {
        incr_by(txn, self.db, &self.key, self.delta)
    }
}

/// `DECRBY key decrement`
pub struct DecrBy {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The decrement, already negated.
    delta: i64,
}

impl WriteCommand for DecrBy {
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        let key = args.next()?;
        let n = args.next_i64()?;
        // Redis refuses to negate i64::MIN.
        let delta = n
            .checked_neg()
            .ok_or_else(|| CommandError::Other("decrement would overflow".into()))?;
        Ok(DecrBy {
            db: s.db,
            key,
            delta,
        })
    }
    fn apply(self, txn: &mut Txn<'_>) -> Result<Reply, EngineError> {
        incr_by(txn, self.db, &self.key, self.delta)
    }
}

/// `INCRBYFLOAT key increment`
pub struct IncrByFloat {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The increment, as sent: Redis parses it only after the stored value.
    delta: Bytes,
}

impl WriteCommand for IncrByFloat {
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        Ok(IncrByFloat {
            db: s.db,
            key: args.next()?,
            delta: args.next()?,
        })
    }
    fn apply(self, txn: &mut Txn<'_>) -> Result<Reply, EngineError> {
        let (current, expire_at) = match txn.string_entry(self.db, &self.key)? {
            Some((v, at)) => (long_double::parse(&v).ok_or(EngineError::NotFloat)?, at),
            None => (long_double::LongDouble::ZERO, None),
        };
        let delta = long_double::parse(&self.delta).ok_or(EngineError::NotFloat)?;
        let next = long_double::add(current, delta).ok_or(EngineError::NanOrInfinity)?;
        let text = long_double::format(next);
        txn.put_string(self.db, &self.key, text.as_bytes(), expire_at)?;
        Ok(Reply::bulk(text))
    }
}

/// `APPEND key value`: replies with the new length.
pub struct Append {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// Bytes to append.
    value: Bytes,
    /// `proto-max-bulk-len`: the longest string allowed.
    max_len: usize,
}

impl WriteCommand for Append {
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        Ok(Append {
            db: s.db,
            key: args.next()?,
            value: args.next()?,
            max_len: s.shared.engine.config().max_string_len,
        })
    }
    fn apply(self, txn: &mut Txn<'_>) -> Result<Reply, EngineError> {
        let (mut current, expire_at) = txn.string_entry(self.db, &self.key)?.unwrap_or_default();
        if current.len() + self.value.len() > self.max_len {
            return Err(EngineError::StringTooLong);
        }
        current.extend_from_slice(&self.value);
        txn.put_string(self.db, &self.key, &current, expire_at)?;
        Ok(Reply::Int(current.len() as i64))
    }
}

/// `SETRANGE key offset value`: overwrites from `offset`, zero-padding.
pub struct SetRange {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// Byte offset.
    offset: usize,
    /// Bytes to write.
    value: Bytes,
    /// `proto-max-bulk-len`.
    max_len: usize,
}

impl WriteCommand for SetRange {
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        let key = args.next()?;
        let offset = args.next_i64()?;
        if offset < 0 {
            return Err(CommandError::Other("offset is out of range".into()));
        }
        let value = args.next()?;
        let max_len = s.shared.engine.config().max_string_len;
        if !value.is_empty() && offset as u64 + value.len() as u64 > max_len as u64 {
            return Err(CommandError::Engine(EngineError::StringTooLong));
        }
        Ok(SetRange {
            db: s.db,
            key,
            offset: offset as usize,
            value,
            max_len,
        })
    }
    fn apply(self, txn: &mut Txn<'_>) -> Result<Reply, EngineError> {
        let entry = txn.string_entry(self.db, &self.key)?;
        let Some((mut current, expire_at)) = entry else {
            if self.value.is_empty() {
                return Ok(Reply::Int(0));
            }
            let mut fresh = vec![0u8; self.offset];
            fresh.extend_from_slice(&self.value);
            txn.put_string(self.db, &self.key, &fresh, None)?;
            return Ok(Reply::Int(fresh.len() as i64));
        };
        if self.value.is_empty() {
            return Ok(Reply::Int(current.len() as i64));
        }
        let end = self.offset + self.value.len();
        if end > self.max_len {
            return Err(EngineError::StringTooLong);
        }
        if current.len() < end {
            current.resize(end, 0);
        }
        current[self.offset..end].copy_from_slice(&self.value);
        txn.put_string(self.db, &self.key, &current, expire_at)?;
        Ok(Reply::Int(current.len() as i64))
    }
}

/// INCRBYFLOAT's arithmetic, digit for digit as redis-server on x86-64 does
/// it: both numbers parsed by glibc's `strtold` into an x87 80-bit
/// `long double` (64-bit significand), added by the FPU, and printed with
/// `%.17Lf` minus trailing zeros (Redis's `ld2string` "human" mode). An
/// `f64` gets many sums right but not all (`5.6 + 1.5e3` is
/// `1505.59999999999999998` in Redis, `1e308 + 1e308` is a 309-digit
/// number rather than an overflow), so the format is emulated exactly:
/// every step is done on exact big integers and rounded once, to nearest,
/// ties to even, as the hardware and glibc do.
mod long_double {
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
                let v =
                    i64::from(self.0[i]) - i64::from(other.0.get(i).copied().unwrap_or(0)) - borrow;
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
}

#[cfg(test)]
mod tests {
    use super::substring;

    #[test]
    fn getrange_arithmetic() {
        let v = b"This is a string";
        assert_eq!(substring(v, 0, 3), b"This");
        assert_eq!(substring(v, -3, -1), b"ing");
        assert_eq!(substring(v, 0, -1), v);
        assert_eq!(substring(v, 10, 100), b"string");
        assert_eq!(substring(v, -1, -5), b"");
        assert_eq!(substring(b"", 0, -1), b"");
        assert_eq!(substring(v, 5, 3), b"");
    }
}

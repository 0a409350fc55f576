//! Hash commands: HSET and its family, field reads, counters, random
//! fields and HSCAN.
//!
//! Field reads (HGET, HMGET, HGETALL, HLEN...) run on the read pool, each in
//! one snapshot where it reads the key row and then its fields. Everything
//! that writes, including HINCRBY's read-then-write, runs on the writer
//! through the engine's write gate (`respite_engine::keyspace`), which
//! checks the type, drops an expired key first, notes the change for the
//! value cache and WATCH, and deletes the key with its last field.
//!
//! Replies follow redis-server 7.0 in RESP2 and RESP3 (HGETALL is a map in
//! RESP3; HRANDFIELD ... WITHVALUES an array of pairs). Fields come back in
//! byte order, where redis-server gives insertion order for small hashes and
//! hash order for big ones: an order Redis does not promise either.

use bytes::Bytes;
use respite_engine::{EngineError, KeyRow, Kind, Txn, View};

use super::common::{parse_cursor, parse_random_count, scan_reply, ScanOptions};
use crate::args::{parse_i64, Args};
use crate::command::Ctx;
use crate::command::{ReadCommand, WriteCommand};
use crate::error::CommandError;
use crate::long_double;
use crate::reply::Reply;

/// The live hash under `key`, `None` if there is none (WRONGTYPE if the key
/// holds another type).
fn hash(view: &View<'_, '_>, db: u32, key: &[u8]) -> Result<Option<KeyRow>, CommandError> {
    Ok(view.live(db, key, Kind::Hash)?)
}

/// Reads `field value [field value ...]`, refusing an odd count with the
/// arity error of `name`.
fn parse_pairs(args: &mut Args, name: &str) -> Result<Vec<(Bytes, Bytes)>, CommandError> {
    if args.remaining() == 0 || args.remaining() % 2 == 1 {
        return Err(CommandError::WrongArity(name.into()));
    }
    let rest = args.rest();
    Ok(rest
        .chunks_exact(2)
        .map(|kv| (kv[0].clone(), kv[1].clone()))
        .collect())
}

/// `HSET key field value [field value ...]`: replies with the number of new
/// fields. `HMSET` is the same command replying `+OK`.
pub struct HSetGeneric<const OK_REPLY: bool> {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// Field/value pairs in argument order (a later pair wins).
    pairs: Vec<(Bytes, Bytes)>,
}

/// `HSET key field value [field value ...]`
pub type HSet = HSetGeneric<false>;
/// `HMSET key field value [field value ...]`
pub type HMSet = HSetGeneric<true>;

impl<const OK_REPLY: bool> WriteCommand for HSetGeneric<OK_REPLY> {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let key = args.next()?;
        let name = if OK_REPLY { "hmset" } else { "hset" };
        Ok(HSetGeneric {
            db: s.db,
            key,
            pairs: parse_pairs(args, name)?,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let mut slot = txn.open(self.db, &self.key, Kind::Hash)?;
        let added = txn.hash_set(&mut slot, &self.pairs, false)?;
        Ok(if OK_REPLY {
            Reply::Ok
        } else {
            Reply::Int(added)
        })
    }
}

/// `HSETNX key field value`: sets the field only if it is new.
pub struct HSetNx {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The field.
    field: Bytes,
    /// Its value.
    value: Bytes,
}

impl WriteCommand for HSetNx {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(HSetNx {
            db: s.db,
            key: args.next()?,
            field: args.next()?,
            value: args.next()?,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let mut slot = txn.open(self.db, &self.key, Kind::Hash)?;
        if let Some(row) = slot.row() {
            if txn.hash_field(row.id, &self.field)?.is_some() {
                return Ok(Reply::Int(0));
            }
        }
        let added = txn.hash_set(&mut slot, &[(self.field, self.value)], true)?;
        Ok(Reply::Int(added))
    }
}

/// `HGET key field`
pub struct HGet {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The field.
    field: Bytes,
}

impl ReadCommand for HGet {
    const QUICK: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(HGet {
            db: s.db,
            key: args.next()?,
            field: args.next()?,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        Ok(Reply::bulk_or_nil(view.hash_get(
            self.db,
            &self.key,
            &self.field,
        )?))
    }
}

/// `HMGET key field [field ...]`: nil for each missing field.
pub struct HMGet {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The fields, in reply order.
    fields: Vec<Bytes>,
}

impl ReadCommand for HMGet {
    const QUICK: bool = true;
    const MULTI_STATEMENT: bool = true;
    fn is_quick(&self) -> bool {
        self.fields.len() <= crate::command::QUICK_READ_LIMIT
    }
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(HMGet {
            db: s.db,
            key: args.next()?,
            fields: args.rest(),
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let row = hash(view, self.db, &self.key)?;
        let mut out = Vec::with_capacity(self.fields.len());
        for field in &self.fields {
            out.push(match row {
                Some(row) => Reply::bulk_or_nil(view.hash_field(row.id, field)?),
                None => Reply::Nil,
            });
        }
        Ok(Reply::Array(out))
    }
}

/// What of each field HGETALL, HKEYS and HVALS reply with.
#[derive(Clone, Copy, PartialEq)]
pub enum Part {
    /// Fields and values (HGETALL, a map in RESP3).
    Both,
    /// Fields (HKEYS).
    Fields,
    /// Values (HVALS).
    Values,
}

/// `HGETALL key` (`PART` 0), `HKEYS key` (1), `HVALS key` (2).
pub struct HGetAllGeneric<const PART: u8> {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
}

/// `HGETALL key`
pub type HGetAll = HGetAllGeneric<0>;
/// `HKEYS key`
pub type HKeys = HGetAllGeneric<1>;
/// `HVALS key`
pub type HVals = HGetAllGeneric<2>;

impl<const PART: u8> ReadCommand for HGetAllGeneric<PART> {
    const MULTI_STATEMENT: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(HGetAllGeneric {
            db: s.db,
            key: args.next()?,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let part = match PART {
            0 => Part::Both,
            1 => Part::Fields,
            _ => Part::Values,
        };
        let pairs = match hash(view, self.db, &self.key)? {
            Some(row) => view.hash_all(row.id)?,
            None => Vec::new(),
        };
        Ok(match part {
            Part::Both => Reply::Map(
                pairs
                    .into_iter()
                    .map(|(f, v)| (Reply::bulk(f), Reply::bulk(v)))
                    .collect(),
            ),
            Part::Fields => Reply::Array(pairs.into_iter().map(|(f, _)| Reply::bulk(f)).collect()),
            Part::Values => Reply::Array(pairs.into_iter().map(|(_, v)| Reply::bulk(v)).collect()),
        })
    }
}

/// `HDEL key field [field ...]`: the number of fields removed; the key goes
/// with its last field.
pub struct HDel {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The fields.
    fields: Vec<Bytes>,
}

impl WriteCommand for HDel {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(HDel {
            db: s.db,
            key: args.next()?,
            fields: args.rest(),
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let mut slot = txn.open(self.db, &self.key, Kind::Hash)?;
        Ok(Reply::Int(txn.hash_delete(&mut slot, &self.fields)?))
    }
}

/// `HEXISTS key field` (`LEN` false) and `HSTRLEN key field` (`LEN` true).
pub struct HFieldInfo<const LEN: bool> {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The field.
    field: Bytes,
}

/// `HEXISTS key field`
pub type HExists = HFieldInfo<false>;
/// `HSTRLEN key field`
pub type HStrLen = HFieldInfo<true>;

impl<const LEN: bool> ReadCommand for HFieldInfo<LEN> {
    const QUICK: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(HFieldInfo {
            db: s.db,
            key: args.next()?,
            field: args.next()?,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let value = view.hash_get(self.db, &self.key, &self.field)?;
        Ok(Reply::Int(match (LEN, value) {
            (_, None) => 0,
            (false, Some(_)) => 1,
            (true, Some(v)) => v.len() as i64,
        }))
    }
}

/// `HLEN key`: read from the key row, never counted.
pub struct HLen {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
}

impl ReadCommand for HLen {
    const QUICK: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(HLen {
            db: s.db,
            key: args.next()?,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        Ok(Reply::Int(
            hash(view, self.db, &self.key)?.map_or(0, |r| r.count),
        ))
    }
}

/// `HINCRBY key field increment`
pub struct HIncrBy {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The field.
    field: Bytes,
    /// The increment.
    delta: i64,
}

impl WriteCommand for HIncrBy {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(HIncrBy {
            db: s.db,
            key: args.next()?,
            field: args.next()?,
            delta: args.next_i64()?,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let mut slot = txn.open(self.db, &self.key, Kind::Hash)?;
        let current = match slot.row() {
            Some(row) => txn.hash_field(row.id, &self.field)?,
            None => None,
        };
        let current = match current {
            Some(v) => parse_i64(&v).ok_or(EngineError::HashNotInteger)?,
            None => 0,
        };
        let next = current
            .checked_add(self.delta)
            .ok_or(EngineError::Overflow)?;
        txn.hash_set(
            &mut slot,
            &[(&self.field[..], next.to_string().as_bytes())],
            false,
        )?;
        Ok(Reply::Int(next))
    }
}

/// `HINCRBYFLOAT key field increment`
pub struct HIncrByFloat {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The field.
    field: Bytes,
    /// The increment, checked finite.
    delta: long_double::LongDouble,
}

impl WriteCommand for HIncrByFloat {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let key = args.next()?;
        let field = args.next()?;
        let delta = long_double::parse(&args.next()?).ok_or(CommandError::NotFloat)?;
        if delta.is_infinite() {
            return Err(CommandError::Other("value is NaN or Infinity".into()));
        }
        Ok(HIncrByFloat {
            db: s.db,
            key,
            field,
            delta,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let mut slot = txn.open(self.db, &self.key, Kind::Hash)?;
        let current = match slot.row() {
            Some(row) => txn.hash_field(row.id, &self.field)?,
            None => None,
        };
        let current = match current {
            Some(v) => long_double::parse(&v).ok_or(EngineError::HashNotFloat)?,
            None => long_double::LongDouble::ZERO,
        };
        let next = long_double::add(current, self.delta).ok_or(EngineError::NanOrInfinity)?;
        let text = long_double::format(next);
        txn.hash_set(&mut slot, &[(&self.field[..], text.as_bytes())], false)?;
        Ok(Reply::bulk(text))
    }
}

/// `HRANDFIELD key [count [WITHVALUES]]`
pub struct HRandField {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The count, if given: negative allows repeats.
    count: Option<i64>,
    /// WITHVALUES.
    with_values: bool,
    /// Speaking RESP3: pairs are nested arrays.
    resp3: bool,
}

impl ReadCommand for HRandField {
    const MULTI_STATEMENT: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let key = args.next()?;
        let (count, with_values) = parse_random_count(args, "WITHVALUES")?;
        Ok(HRandField {
            db: s.db,
            key,
            count,
            with_values,
            resp3: s.resp3,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let row = hash(view, self.db, &self.key)?;
        let Some(count) = self.count else {
            let Some(row) = row else {
                return Ok(Reply::Nil);
            };
            let pick = rand::random_range(0..row.count.max(1));
            return Ok(Reply::bulk_or_nil(
                view.hash_nth(row.id, pick)?.map(|(f, _)| f),
            ));
        };
        let Some(row) = row else {
            return Ok(Reply::Array(Vec::new()));
        };
        let all = view.hash_all(row.id)?;
        let picked = super::common::sample(&all, count);
        let mut out = Vec::new();
        for (f, v) in picked {
            let (f, v) = (Reply::bulk(f.clone()), Reply::bulk(v.clone()));
            match (self.with_values, self.resp3) {
                (false, _) => out.push(f),
                (true, false) => out.extend([f, v]),
                (true, true) => out.push(Reply::Array(vec![f, v])),
            }
        }
        Ok(Reply::Array(out))
    }
}

/// `HSCAN key cursor [MATCH pattern] [COUNT count] [NOVALUES]`
///
/// A hash redis-server would keep as a listpack comes back whole with
/// cursor 0, as redis-server answers; a bigger one a page at a time. The
/// cursor is a position in field order (see `respite_engine::keyspace`):
/// any number is accepted and nothing is kept between calls.
pub struct HScan {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// Where to go on from.
    cursor: u64,
    /// The options, or the error they make (answered only if the key
    /// exists, as in Redis).
    options: Result<ScanOptions, CommandError>,
}

impl ReadCommand for HScan {
    const MULTI_STATEMENT: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let key = args.next()?;
        let cursor = parse_cursor(&args.next()?)?;
        Ok(HScan {
            db: s.db,
            key,
            cursor,
            options: ScanOptions::parse(args, true),
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let Some(row) = hash(view, self.db, &self.key)? else {
            return Ok(scan_reply(0, Vec::new()));
        };
        let options = self.options?;
        let (pairs, cursor) = view.hash_scan(&row, self.cursor, options.count)?;
        let mut out = Vec::new();
        for (f, v) in pairs {
            if options.matches(&f) {
                out.push(Reply::bulk(f));
                if !options.no_values {
                    out.push(Reply::bulk(v));
                }
            }
        }
        Ok(scan_reply(cursor, out))
    }
}

/// This family's rows of the command table (see [`crate::command::TABLE`]).
#[rustfmt::skip]
pub(crate) fn commands() -> Vec<crate::command::Spec> {
    use crate::command::Spec;
    vec![
        Spec::write::<HDel>("hdel"),
        Spec::read::<HExists>("hexists"),
        Spec::read::<HGet>("hget"),
        Spec::read::<HGetAll>("hgetall"),
        Spec::write::<HIncrBy>("hincrby"),
        Spec::write::<HIncrByFloat>("hincrbyfloat"),
        Spec::read::<HKeys>("hkeys"),
        Spec::read::<HLen>("hlen"),
        Spec::read::<HMGet>("hmget"),
        Spec::write::<HMSet>("hmset"),
        Spec::read::<HRandField>("hrandfield"),
        Spec::read::<HScan>("hscan"),
        Spec::write::<HSet>("hset"),
        Spec::write::<HSetNx>("hsetnx"),
        Spec::read::<HStrLen>("hstrlen"),
        Spec::read::<HVals>("hvals"),
    ]
}

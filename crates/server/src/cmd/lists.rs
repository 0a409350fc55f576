//! List commands: pushes and pops at both ends, ranges and indexes, the
//! scans (LREM, LPOS, LINSERT), moves between lists, and the blocking pops.
//!
//! Reads (LLEN, LRANGE, LINDEX, LPOS) run on the read pool; writes on the
//! writer through the engine's write gate (`respite_engine::keyspace`),
//! with the storage in `respite_engine::list`. Each command checks what
//! Redis checks in the order Redis checks it, so the same bad input gets the
//! same error: LPOP parses its count before it looks at the key, LINDEX and
//! LSET look at the key before they parse the index.
//!
//! The blocking commands (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP) are
//! [`Blocker`]s: a try that pops what is there, which the connection sends
//! first and the writer repeats when a push readies a key the client waits
//! on (see `crate::blocking`). Inside MULTI they try once and answer like a
//! timeout, as in Redis. A blocked BLPOP served from a key that now holds
//! another type stays blocked, as in redis-server 7.0.

use std::time::Duration;

use bytes::Bytes;
use respite_engine::list::{End, Seek};
use respite_engine::notify::{GENERIC, LIST};
use respite_engine::{KeyRow, Kind, Txn, View};

use crate::args::{parse_i64, upper, Args};
use crate::blocking::{parse_timeout, Blocker};
use crate::command::Ctx;
use crate::command::{BlockingCommand, ReadCommand, WriteCommand};
use crate::error::CommandError;
use crate::reply::Reply;

/// The live list under `key`, `None` if there is none (WRONGTYPE if the
/// key holds another type).
fn list(view: &View<'_, '_>, db: u32, key: &[u8]) -> Result<Option<KeyRow>, CommandError> {
    Ok(view.live(db, key, Kind::List)?)
}

fn bulks(values: Vec<Vec<u8>>) -> Reply {
    Reply::Array(values.into_iter().map(Reply::bulk).collect())
}

/// `LEFT` or `RIGHT`, as LMOVE and LMPOP spell an end.
fn parse_end(arg: &[u8]) -> Result<End, CommandError> {
    match upper(arg).as_str() {
        "LEFT" => Ok(End::Left),
        "RIGHT" => Ok(End::Right),
        _ => Err(CommandError::Syntax),
    }
}

/// A count Redis reads with `getRangeLongFromObjectOrReply(1, LONG_MAX,
/// msg)`: anything but a positive integer answers `msg`.
fn positive(arg: &[u8], msg: &str) -> Result<i64, CommandError> {
    match parse_i64(arg) {
        Some(n) if n >= 1 => Ok(n),
        _ => Err(CommandError::Other(msg.into())),
    }
}

/// A count Redis reads with `getPositiveLongFromObjectOrReply`: 0 or
/// more, anything else answers `msg`.
fn non_negative(arg: &[u8], msg: &str) -> Result<i64, CommandError> {
    match parse_i64(arg) {
        Some(n) if n >= 0 => Ok(n),
        _ => Err(CommandError::Other(msg.into())),
    }
}

/// redis's `listElementsRemoved`: the pop's event, then `del` when the
/// list went with its last element.
fn popped(txn: &mut Txn<'_, '_>, db: u32, key: &[u8], end: End, gone: bool) {
    let event = match end {
        End::Left => "lpop",
        End::Right => "rpop",
    };
    txn.notify(LIST, event, db, key);
    if gone {
        txn.notify(GENERIC, "del", db, key);
    }
}

/// The event of a push to `end`.
fn pushed(end: End) -> &'static str {
    match end {
        End::Left => "lpush",
        End::Right => "rpush",
    }
}

/// `LPUSH`, `RPUSH`, `LPUSHX` and `RPUSHX`: `key element [element ...]`.
/// Answers the list's new length (0 for an X form on a missing key).
pub struct Push<const LEFT: bool, const EXISTING: bool> {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The elements, pushed one after the other.
    values: Vec<Bytes>,
}

impl<const LEFT: bool, const EXISTING: bool> WriteCommand for Push<LEFT, EXISTING> {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(Push {
            db: s.db,
            key: args.next()?,
            values: args.rest(),
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let mut slot = txn.open_list(self.db, &self.key)?;
        if EXISTING && slot.is_empty() {
            return Ok(Reply::Int(0));
        }
        let end = if LEFT { End::Left } else { End::Right };
        let len = txn.list_push(&mut slot, &self.values, end)?;
        txn.notify(LIST, pushed(end), self.db, &self.key);
        Ok(Reply::Int(len))
    }
}

/// `LPOP key [count]` and `RPOP key [count]`: one element as a bulk
/// string, or with a count an array of up to `count`.
pub struct Pop<const LEFT: bool> {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The count, when given.
    count: Option<i64>,
}

impl<const LEFT: bool> WriteCommand for Pop<LEFT> {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let key = args.next()?;
        if args.remaining() > 1 {
            let name = if LEFT { "lpop" } else { "rpop" };
            return Err(CommandError::WrongArity(name.into()));
        }
        let count = match args.next_opt() {
            Some(c) => Some(non_negative(&c, "value is out of range, must be positive")?),
            None => None,
        };
        Ok(Pop {
            db: s.db,
            key,
            count,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        if txn.live_list(self.db, &self.key)?.is_none() {
            return Ok(match self.count {
                Some(_) => Reply::NilArray,
                None => Reply::Nil,
            });
        }
        let end = if LEFT { End::Left } else { End::Right };
        let mut slot = txn.open_list(self.db, &self.key)?;
        match self.count {
            Some(0) => Ok(Reply::Array(Vec::new())),
            Some(n) => {
                let values = txn.list_pop(&mut slot, end, n)?;
                popped(txn, self.db, &self.key, end, slot.is_empty());
                Ok(bulks(values))
            }
            None => {
                let value = txn.list_pop(&mut slot, end, 1)?.pop();
                popped(txn, self.db, &self.key, end, slot.is_empty());
                Ok(value.map_or(Reply::Nil, Reply::bulk))
            }
        }
    }
}

/// `LLEN key`: read from the key row, never counted.
pub struct LLen {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
}

impl ReadCommand for LLen {
    const QUICK: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(LLen {
            db: s.db,
            key: args.next()?,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        Ok(Reply::Int(
            list(view, self.db, &self.key)?.map_or(0, |r| r.count),
        ))
    }
}

/// `LRANGE key start stop`
pub struct LRange {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// First index (negative counts from the tail).
    start: i64,
    /// Last index, inclusive.
    stop: i64,
}

impl LRange {
    /// An LRANGE of `start..=stop` on key `l` of database 0 (for tests of
    /// [`ReadCommand::is_quick`]).
    #[cfg(test)]
    pub(crate) fn probe(start: i64, stop: i64) -> LRange {
        LRange {
            db: 0,
            key: Bytes::from_static(b"l"),
            start,
            stop,
        }
    }
}

impl ReadCommand for LRange {
    const QUICK: bool = true;
    const MULTI_STATEMENT: bool = true;
    /// Quick when the range is short by its indexes alone (both from the
    /// head or both from the tail); `0 -1` may be a whole list.
    fn is_quick(&self) -> bool {
        (self.start >= 0) == (self.stop >= 0)
            && self.stop.saturating_sub(self.start) < crate::command::QUICK_READ_LIMIT as i64
    }
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(LRange {
            db: s.db,
            key: args.next()?,
            start: args.next_i64()?,
            stop: args.next_i64()?,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let Some(row) = list(view, self.db, &self.key)? else {
            return Ok(Reply::Array(Vec::new()));
        };
        Ok(bulks(view.list_range(&row, self.start, self.stop)?))
    }
}

/// `LINDEX key index`: the key is looked at before the index is parsed
/// (a missing key answers nil whatever the index), as in Redis.
pub struct LIndex {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The index, unparsed.
    index: Bytes,
}

impl ReadCommand for LIndex {
    const QUICK: bool = true;
    const MULTI_STATEMENT: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(LIndex {
            db: s.db,
            key: args.next()?,
            index: args.next()?,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let Some(row) = list(view, self.db, &self.key)? else {
            return Ok(Reply::Nil);
        };
        let index = parse_i64(&self.index).ok_or(CommandError::NotInteger)?;
        Ok(view
            .list_index(&row, index)?
            .map_or(Reply::Nil, Reply::bulk))
    }
}

/// `LSET key index element`
pub struct LSet {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The index, unparsed (the key is looked at first).
    index: Bytes,
    /// The new element.
    value: Bytes,
}

impl WriteCommand for LSet {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(LSet {
            db: s.db,
            key: args.next()?,
            index: args.next()?,
            value: args.next()?,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        if txn.live(self.db, &self.key, Kind::List)?.is_none() {
            return Err(CommandError::Other("no such key".into()));
        }
        let index = parse_i64(&self.index).ok_or(CommandError::NotInteger)?;
        let mut slot = txn.open(self.db, &self.key, Kind::List)?;
        if txn.list_set(&mut slot, index, &self.value)? {
            txn.notify(LIST, "lset", self.db, &self.key);
            Ok(Reply::Ok)
        } else {
            Err(CommandError::Other("index out of range".into()))
        }
    }
}

/// `LTRIM key start stop`
pub struct LTrim {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// First index kept.
    start: i64,
    /// Last index kept.
    stop: i64,
}

impl WriteCommand for LTrim {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(LTrim {
            db: s.db,
            key: args.next()?,
            start: args.next_i64()?,
            stop: args.next_i64()?,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let mut slot = txn.open(self.db, &self.key, Kind::List)?;
        if slot.is_empty() {
            return Ok(Reply::Ok);
        }
        txn.list_trim(&mut slot, self.start, self.stop)?;
        txn.notify(LIST, "ltrim", self.db, &self.key);
        if slot.is_empty() {
            txn.notify(GENERIC, "del", self.db, &self.key);
        }
        Ok(Reply::Ok)
    }
}

/// `LREM key count element`: how many were removed.
pub struct LRem {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// How many, and from which end (see `Txn::list_remove`).
    count: i64,
    /// The element to remove.
    value: Bytes,
}

impl WriteCommand for LRem {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(LRem {
            db: s.db,
            key: args.next()?,
            count: args.next_i64()?,
            value: args.next()?,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let mut slot = txn.open(self.db, &self.key, Kind::List)?;
        let removed = txn.list_remove(&mut slot, self.count, &self.value)?;
        if removed > 0 {
            txn.notify(LIST, "lrem", self.db, &self.key);
            if slot.is_empty() {
                txn.notify(GENERIC, "del", self.db, &self.key);
            }
        }
        Ok(Reply::Int(removed))
    }
}

/// `LINSERT key BEFORE|AFTER pivot element`: the new length, -1 without
/// the pivot, 0 without the key.
pub struct LInsert {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// BEFORE (true) or AFTER.
    before: bool,
    /// The element to insert next to.
    pivot: Bytes,
    /// The element inserted.
    value: Bytes,
}

impl WriteCommand for LInsert {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let key = args.next()?;
        let before = match args.next_upper()?.as_str() {
            "BEFORE" => true,
            "AFTER" => false,
            _ => return Err(CommandError::Syntax),
        };
        Ok(LInsert {
            db: s.db,
            key,
            before,
            pivot: args.next()?,
            value: args.next()?,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let mut slot = txn.open(self.db, &self.key, Kind::List)?;
        let len = txn.list_insert(&mut slot, self.before, &self.pivot, &self.value)?;
        if len > 0 {
            txn.notify(LIST, "linsert", self.db, &self.key);
        }
        Ok(Reply::Int(len))
    }
}

/// `LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]`
pub struct LPos {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The element looked for.
    element: Bytes,
    /// Rank and limits.
    seek: Seek,
    /// COUNT was given: the reply is an array.
    with_count: bool,
}

impl ReadCommand for LPos {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let key = args.next()?;
        let element = args.next()?;
        let mut seek = Seek {
            rank: 1,
            count: 0,
            maxlen: 0,
        };
        let mut with_count = false;
        while let Some(opt) = args.next_opt() {
            let opt = upper(&opt);
            if args.remaining() == 0 {
                return Err(CommandError::Syntax);
            }
            let value = args.next()?;
            match opt.as_str() {
                "RANK" => {
                    seek.rank = parse_i64(&value).ok_or(CommandError::NotInteger)?;
                    if seek.rank == 0 {
                        return Err(CommandError::Other("RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list".into()));
                    }
                }
                "COUNT" => {
                    seek.count = non_negative(&value, "COUNT can't be negative")?;
                    with_count = true;
                }
                "MAXLEN" => seek.maxlen = non_negative(&value, "MAXLEN can't be negative")?,
                _ => return Err(CommandError::Syntax),
            }
        }
        Ok(LPos {
            db: s.db,
            key,
            element,
            seek,
            with_count,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let Some(row) = list(view, self.db, &self.key)? else {
            return Ok(if self.with_count {
                Reply::Array(Vec::new())
            } else {
                Reply::Nil
            });
        };
        let seek = Seek {
            count: if self.with_count { self.seek.count } else { 1 },
            ..self.seek
        };
        let found = view.list_positions(&row, &self.element, seek)?;
        Ok(if self.with_count {
            Reply::Array(found.into_iter().map(Reply::Int).collect())
        } else {
            found.first().map_or(Reply::Nil, |&i| Reply::Int(i))
        })
    }
}

/// Pops one element from `src` and pushes it onto `dst` (LMOVE and its
/// relatives). `None` when `src` is empty. Both types are checked before
/// anything is written, so a WRONGTYPE changes nothing.
fn move_one(
    txn: &mut Txn<'_, '_>,
    db: u32,
    src: &[u8],
    dst: &[u8],
    from: End,
    to: End,
) -> Result<Option<Vec<u8>>, CommandError> {
    if txn.live_list(db, src)?.is_none() {
        return Ok(None);
    }
    txn.live_list(db, dst)?;
    let mut s = txn.open_list(db, src)?;
    let Some(value) = txn.list_pop(&mut s, from, 1)?.pop() else {
        return Ok(None);
    };
    let mut d = txn.open_list(db, dst)?;
    txn.list_push(&mut d, &[&value], to)?;
    // redis's order: the push (lmoveHandlePush), then the pop.
    txn.notify(LIST, pushed(to), db, dst);
    popped(txn, db, src, from, s.is_empty() && src != dst);
    Ok(Some(value))
}

/// `LMOVE source destination LEFT|RIGHT LEFT|RIGHT` and `RPOPLPUSH
/// source destination`: the element moved, or nil.
pub struct LMove {
    /// Selected database.
    db: u32,
    /// The list popped from.
    src: Bytes,
    /// The list pushed onto.
    dst: Bytes,
    /// The end popped.
    from: End,
    /// The end pushed.
    to: End,
}

impl LMove {
    fn parse_lmove(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(LMove {
            db: s.db,
            src: args.next()?,
            dst: args.next()?,
            from: parse_end(&args.next()?)?,
            to: parse_end(&args.next()?)?,
        })
    }
}

impl WriteCommand for LMove {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        LMove::parse_lmove(args, s)
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let moved = move_one(txn, self.db, &self.src, &self.dst, self.from, self.to)?;
        Ok(moved.map_or(Reply::Nil, Reply::bulk))
    }
}

/// `RPOPLPUSH source destination`: LMOVE RIGHT LEFT.
pub struct RPopLPush(LMove);

impl WriteCommand for RPopLPush {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(RPopLPush(LMove {
            db: s.db,
            src: args.next()?,
            dst: args.next()?,
            from: End::Right,
            to: End::Left,
        }))
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        self.0.apply(txn)
    }
}

/// What LMPOP and BLMPOP share: `numkeys key [key ...] LEFT|RIGHT [COUNT
/// count]`.
#[derive(Clone)]
struct MPop {
    /// Selected database.
    db: u32,
    /// The keys, tried in order.
    keys: Vec<Bytes>,
    /// The end popped.
    end: End,
    /// Up to how many elements.
    count: i64,
}

impl MPop {
    /// Parses from `numkeys` on, as Redis's `lmpopGenericCommand` does.
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<MPop, CommandError> {
        let numkeys = positive(&args.next()?, "numkeys should be greater than 0")?;
        if numkeys as u64 >= args.remaining() as u64 {
            return Err(CommandError::Syntax);
        }
        let keys: Vec<Bytes> = (0..numkeys)
            .map(|_| args.next())
            .collect::<Result<_, _>>()?;
        let end = parse_end(&args.next()?)?;
        let mut count = None;
        while let Some(opt) = args.next_opt() {
            if count.is_none() && upper(&opt) == "COUNT" && args.remaining() > 0 {
                count = Some(positive(&args.next()?, "count should be greater than 0")?);
            } else {
                return Err(CommandError::Syntax);
            }
        }
        Ok(MPop {
            db: s.db,
            keys,
            end,
            count: count.unwrap_or(1),
        })
    }

    /// Pops from `key` if it is a non-empty list: `[key, [elements]]`.
    fn pop_from(&self, txn: &mut Txn<'_, '_>, key: &[u8]) -> Result<Option<Reply>, CommandError> {
        if txn.live_list(self.db, key)?.is_none() {
            return Ok(None);
        }
        let mut slot = txn.open_list(self.db, key)?;
        let values = txn.list_pop(&mut slot, self.end, self.count)?;
        popped(txn, self.db, key, self.end, slot.is_empty());
        Ok(Some(Reply::Array(vec![
            Reply::bulk(key.to_vec()),
            bulks(values),
        ])))
    }

    /// The first non-empty list's elements, in key order.
    fn pop_first(&self, txn: &mut Txn<'_, '_>) -> Result<Option<Reply>, CommandError> {
        for key in &self.keys {
            if let Some(reply) = self.pop_from(txn, key)? {
                return Ok(Some(reply));
            }
        }
        Ok(None)
    }
}

/// `LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]`
pub struct LMPop(MPop);

impl WriteCommand for LMPop {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(LMPop(MPop::parse(args, s)?))
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        Ok(self.0.pop_first(txn)?.unwrap_or(Reply::NilArray))
    }
}

/// `BLPOP key [key ...] timeout` and `BRPOP key [key ...] timeout`:
/// `[key, element]` from the first non-empty list, or nil on a timeout.
pub struct BPop<const LEFT: bool> {
    /// Selected database.
    db: u32,
    /// The keys, tried in order.
    keys: Vec<Bytes>,
    /// How long to wait.
    timeout: Option<Duration>,
}

impl<const LEFT: bool> BPop<LEFT> {
    fn pop_from(&self, txn: &mut Txn<'_, '_>, key: &[u8]) -> Result<Option<Reply>, CommandError> {
        let end = if LEFT { End::Left } else { End::Right };
        let mut slot = txn.open_list(self.db, key)?;
        let value = txn.list_pop(&mut slot, end, 1)?.pop();
        if value.is_some() {
            popped(txn, self.db, key, end, slot.is_empty());
        }
        Ok(value.map(|v| Reply::Array(vec![Reply::bulk(key.to_vec()), Reply::bulk(v)])))
    }
}

impl<const LEFT: bool> BlockingCommand for BPop<LEFT> {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let mut keys = args.rest();
        let timeout = keys.pop().ok_or(CommandError::Syntax)?;
        Ok(BPop {
            db: s.db,
            keys,
            timeout: parse_timeout(&timeout)?,
        })
    }
}

impl<const LEFT: bool> Blocker for BPop<LEFT> {
    fn keys(&self) -> Vec<(u32, Bytes)> {
        self.keys.iter().map(|k| (self.db, k.clone())).collect()
    }
    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }
    fn try_pop(
        &self,
        txn: &mut Txn<'_, '_>,
        ready: Option<(u32, &[u8])>,
    ) -> Result<Option<Reply>, CommandError> {
        if let Some((_, key)) = ready {
            return match txn.live_list(self.db, key) {
                Ok(Some(_)) => self.pop_from(txn, key),
                Ok(None) | Err(respite_engine::EngineError::WrongType) => Ok(None),
                Err(e) => Err(e.into()),
            };
        }
        for key in &self.keys {
            // WRONGTYPE on the first key that is not a list, as in Redis.
            if txn.live_list(self.db, key)?.is_some() {
                return self.pop_from(txn, key);
            }
        }
        Ok(None)
    }
}

/// `BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout` and
/// `BRPOPLPUSH source destination timeout`.
pub struct BLMove {
    /// The move.
    mv: LMove,
    /// How long to wait.
    timeout: Option<Duration>,
}

impl BlockingCommand for BLMove {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let mv = LMove::parse_lmove(args, s)?;
        Ok(BLMove {
            mv,
            timeout: parse_timeout(&args.next()?)?,
        })
    }
}

/// `BRPOPLPUSH source destination timeout`
pub struct BRPopLPush(BLMove);

impl BlockingCommand for BRPopLPush {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let RPopLPush(mv) = <RPopLPush as WriteCommand>::parse(args, s)?;
        Ok(BRPopLPush(BLMove {
            mv,
            timeout: parse_timeout(&args.next()?)?,
        }))
    }
}

impl Blocker for BLMove {
    fn keys(&self) -> Vec<(u32, Bytes)> {
        vec![(self.mv.db, self.mv.src.clone())]
    }
    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }
    fn try_pop(
        &self,
        txn: &mut Txn<'_, '_>,
        ready: Option<(u32, &[u8])>,
    ) -> Result<Option<Reply>, CommandError> {
        let m = &self.mv;
        if ready.is_some() {
            match txn.live_list(m.db, &m.src) {
                Ok(Some(_)) => {}
                Ok(None) | Err(respite_engine::EngineError::WrongType) => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(move_one(txn, m.db, &m.src, &m.dst, m.from, m.to)?.map(Reply::bulk))
    }
    fn empty_reply(&self) -> Reply {
        Reply::Nil
    }
}

impl Blocker for BRPopLPush {
    fn keys(&self) -> Vec<(u32, Bytes)> {
        self.0.keys()
    }
    fn timeout(&self) -> Option<Duration> {
        self.0.timeout()
    }
    fn try_pop(
        &self,
        txn: &mut Txn<'_, '_>,
        ready: Option<(u32, &[u8])>,
    ) -> Result<Option<Reply>, CommandError> {
        self.0.try_pop(txn, ready)
    }
    fn empty_reply(&self) -> Reply {
        Reply::Nil
    }
}

/// `BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]`
pub struct BLMPop {
    /// The pop.
    pop: MPop,
    /// How long to wait.
    timeout: Option<Duration>,
}

impl BlockingCommand for BLMPop {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        // Redis parses the timeout last, after the keys and options.
        let timeout = args.next()?;
        let pop = MPop::parse(args, s)?;
        Ok(BLMPop {
            pop,
            timeout: parse_timeout(&timeout)?,
        })
    }
}

impl Blocker for BLMPop {
    fn keys(&self) -> Vec<(u32, Bytes)> {
        self.pop
            .keys
            .iter()
            .map(|k| (self.pop.db, k.clone()))
            .collect()
    }
    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }
    fn try_pop(
        &self,
        txn: &mut Txn<'_, '_>,
        ready: Option<(u32, &[u8])>,
    ) -> Result<Option<Reply>, CommandError> {
        match ready {
            Some((_, key)) => match txn.live_list(self.pop.db, key) {
                Ok(Some(_)) => self.pop.pop_from(txn, key),
                Ok(None) | Err(respite_engine::EngineError::WrongType) => Ok(None),
                Err(e) => Err(e.into()),
            },
            None => self.pop.pop_first(txn),
        }
    }
}

/// This family's rows of the command table (see [`crate::command::table`]).
#[rustfmt::skip]
pub(crate) fn commands() -> Vec<crate::command::Spec> {
    use crate::command::Spec;
    vec![
        Spec::blocking::<BLMove>("blmove"),
        Spec::blocking::<BLMPop>("blmpop"),
        Spec::blocking::<BPop<true>>("blpop"),
        Spec::blocking::<BPop<false>>("brpop"),
        Spec::blocking::<BRPopLPush>("brpoplpush"),
        Spec::read::<LIndex>("lindex"),
        Spec::write::<LInsert>("linsert"),
        Spec::read::<LLen>("llen"),
        Spec::write::<LMove>("lmove"),
        Spec::write::<LMPop>("lmpop"),
        Spec::write::<Pop<true>>("lpop"),
        Spec::read::<LPos>("lpos"),
        Spec::write::<Push<true, false>>("lpush"),
        Spec::write::<Push<true, true>>("lpushx"),
        Spec::read::<LRange>("lrange"),
        Spec::write::<LRem>("lrem"),
        Spec::write::<LSet>("lset"),
        Spec::write::<LTrim>("ltrim"),
        Spec::write::<Pop<false>>("rpop"),
        Spec::write::<RPopLPush>("rpoplpush"),
        Spec::write::<Push<false, false>>("rpush"),
        Spec::write::<Push<false, true>>("rpushx"),
    ]
}

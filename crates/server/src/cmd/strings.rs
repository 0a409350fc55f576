//! String commands: GET, SET and its family, counters, ranges.
//!
//! Reads (GET, MGET, STRLEN, GETRANGE) run on the read pool, except a GET
//! or MGET the engine's value cache can answer: the connection answers that
//! itself (see [`Cached`]). Everything that
//! writes, including the commands that read first (INCR, APPEND, SET ... GET,
//! GETDEL, GETEX, SETNX), runs on the writer inside the group commit, so the
//! read and the write are one atomic step and see every earlier write.

use bytes::Bytes;
use respite_engine::notify::{GENERIC, STRING};
use respite_engine::{now_ms, Access, EngineError, Txn, ValueCache, View};

use super::keys::{Deadline, ExpireUnit};
use crate::args::{parse_i64, upper, Args};
use crate::command::Ctx;
use crate::command::{
    parse_all, CachedRead, Plan, ReadCommand, ReadFn, ReadNeeds, Session, WriteCommand,
};
use crate::error::CommandError;
use crate::long_double;
use crate::reply::Reply;

/// `GET key`
pub struct Get {
    /// Selected database.
    db: u32,
    /// The key to read.
    key: Bytes,
    /// Whether the read counts as an access (not in CLIENT NO-TOUCH mode).
    touches: bool,
}

impl ReadCommand for Get {
    const QUICK: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(Get {
            db: s.db,
            key: args.next()?,
            touches: s.touches,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        // The shared form offers the value to the cache on its way out.
        let value = view.get_string_shared(self.db, &self.key)?;
        Ok(value.map_or(Reply::Nil, Reply::Bulk))
    }
}

impl Get {
    /// A GET of `key` in database `db` by a client that `touches` (for
    /// the connection's fast path, which has checked the arguments itself).
    pub fn new(db: u32, key: Bytes, touches: bool) -> Get {
        Get { db, key, touches }
    }

    /// The reply, if the value cache holds the key. Only a string is ever
    /// cached, so a hit is the same reply `apply` would give; a miss (the
    /// key absent, of another type, expired, or just not cached) goes to the
    /// read pool. The caller must have no write of its own in flight. A hit
    /// is a keyspace hit and an access, noted in `access`.
    pub fn cached_reply(&self, cache: &ValueCache, access: &Access) -> Option<Reply> {
        let value = cache.get(self.db, &self.key, now_ms)?;
        access.read(self.db, &self.key, true, self.touches);
        Some(Reply::Bulk(value))
    }
}

/// A read the value cache may answer on the connection thread.
pub enum Cached {
    /// `GET key`
    Get(Get),
    /// `MGET key [key ...]`
    MGet(MGet),
}

impl Cached {
    /// The reply, if the value cache can give it: a hit is the same reply
    /// `apply` would give, since only strings are cached; a miss (a key
    /// absent, of another type, expired, or just not cached) goes to the read
    /// pool. The caller must have no write of its own in flight.
    pub fn cached_reply(&self, cache: &ValueCache, access: &Access) -> Option<Reply> {
        match self {
            Cached::Get(get) => get.cached_reply(cache, access),
            Cached::MGet(mget) => {
                let values = cache.get_all(mget.db, &mget.keys, now_ms)?;
                for key in &mget.keys {
                    access.read(mget.db, key, true, mget.touches);
                }
                Some(Reply::Array(values.into_iter().map(Reply::Bulk).collect()))
            }
        }
    }

    /// The read for the pool, when the cache could not answer.
    pub fn into_read(self) -> (ReadFn, ReadNeeds) {
        match self {
            Cached::Get(get) => {
                let touches = get.touches;
                crate::command::read_job_touching(get, touches)
            }
            Cached::MGet(mget) => {
                let touches = mget.touches;
                crate::command::read_job_touching(mget, touches)
            }
        }
    }
}

impl CachedRead for Cached {
    fn cached_reply(&self, cache: &ValueCache, access: &Access) -> Option<Reply> {
        Cached::cached_reply(self, cache, access)
    }
    fn into_read(self: Box<Self>) -> (ReadFn, ReadNeeds) {
        Cached::into_read(*self)
    }
}

/// GET's plan: answered from the value cache when it can be (see
/// [`Cached`]).
fn plan_get(s: &mut Session, args: Args) -> Result<Plan, CommandError> {
    let get = parse_all(args, &s.ctx(), Get::parse)?;
    Ok(Plan::Cached(Box::new(Cached::Get(get))))
}

/// MGET's plan, as GET's.
fn plan_mget(s: &mut Session, args: Args) -> Result<Plan, CommandError> {
    let mget = parse_all(args, &s.ctx(), MGet::parse)?;
    Ok(Plan::Cached(Box::new(Cached::MGet(mget))))
}

/// `MGET key [key ...]`: a key that is missing or not a string is nil.
pub struct MGet {
    /// Selected database.
    db: u32,
    /// The keys, in reply order.
    keys: Vec<Bytes>,
    /// Whether the reads count as accesses (not in CLIENT NO-TOUCH mode).
    touches: bool,
}

impl ReadCommand for MGet {
    const QUICK: bool = true;
    const MULTI_STATEMENT: bool = true;
    fn is_quick(&self) -> bool {
        self.keys.len() <= crate::command::QUICK_READ_LIMIT
    }
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(MGet {
            db: s.db,
            keys: args.rest(),
            touches: s.touches,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let mut out = Vec::with_capacity(self.keys.len());
        for key in &self.keys {
            out.push(match view.get_string_shared(self.db, key) {
                Ok(v) => v.map_or(Reply::Nil, Reply::Bulk),
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
    const QUICK: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(StrLen {
            db: s.db,
            key: args.next()?,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
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
    const QUICK: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(GetRange {
            db: s.db,
            key: args.next()?,
            start: args.next_i64()?,
            end: args.next_i64()?,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
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
    /// EX/PX/EXAT/PXAT, checked.
    At(Deadline),
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
    /// NX: only set a key that does not exist.
    nx: bool,
    /// XX: only set a key that exists.
    xx: bool,
    /// GET: reply with the old value.
    get: bool,
    /// The expiry clause, its value still unchecked.
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

fn unit_value(value: &[u8], unit: ExpireUnit, cmd: &'static str) -> Result<Deadline, CommandError> {
    let n = parse_i64(value).ok_or(CommandError::NotInteger)?;
    if n <= 0 {
        return Err(CommandError::InvalidExpire(cmd));
    }
    Deadline::parse(n, unit).ok_or(CommandError::InvalidExpire(cmd))
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

impl Set {
    /// A plain `SET key value` in database `db`, no options (for the
    /// connection's fast path, which has checked the arguments itself).
    pub fn plain(db: u32, key: Bytes, value: Bytes) -> Set {
        Set {
            db,
            key,
            value,
            nx: false,
            xx: false,
            get: false,
            expire: ExpireOpt::None,
        }
    }
}

impl WriteCommand for Set {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
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

    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
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
                ExpireOpt::At(at) => Some(at.at(txn.now())),
                ExpireOpt::Keep => match &old {
                    Some((_, at)) => *at,
                    None => txn.entry(db, &self.key)?.and_then(|e| e.expire_at),
                },
                ExpireOpt::None | ExpireOpt::Persist => None,
            };
            txn.put_string_shared(db, &self.key, self.value, expire_at)?;
            txn.notify(STRING, "set", db, &self.key);
            if let ExpireOpt::At(_) = self.expire {
                txn.notify(GENERIC, "expire", db, &self.key);
            }
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
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(SetNx {
            db: s.db,
            key: args.next()?,
            value: args.next()?,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        if txn.exists(self.db, &self.key)? {
            return Ok(Reply::Int(0));
        }
        txn.put_string_shared(self.db, &self.key, self.value, None)?;
        txn.notify(STRING, "set", self.db, &self.key);
        Ok(Reply::Int(1))
    }
}

/// `SETEX key seconds value` and `PSETEX key milliseconds value`.
pub struct SetWithExpire<const MILLIS: bool> {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The expiry.
    expire_at: Deadline,
    /// The value.
    value: Bytes,
}

/// `SETEX key seconds value`
pub type SetEx = SetWithExpire<false>;
/// `PSETEX key milliseconds value`
pub type PSetEx = SetWithExpire<true>;

impl<const MILLIS: bool> WriteCommand for SetWithExpire<MILLIS> {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
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
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let at = self.expire_at.at(txn.now());
        txn.put_string_shared(self.db, &self.key, self.value, Some(at))?;
        txn.notify(STRING, "set", self.db, &self.key);
        txn.notify(GENERIC, "expire", self.db, &self.key);
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
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(GetSet {
            db: s.db,
            key: args.next()?,
            value: args.next()?,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let old = txn.get_string(self.db, &self.key)?;
        txn.put_string_shared(self.db, &self.key, self.value, None)?;
        txn.notify(STRING, "set", self.db, &self.key);
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
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(GetDel {
            db: s.db,
            key: args.next()?,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let old = txn.get_string(self.db, &self.key)?;
        if old.is_some() {
            txn.delete(self.db, &self.key)?;
            txn.notify(GENERIC, "del", self.db, &self.key);
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
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let key = args.next()?;
        let ext = parse_extended(args, false)?;
        Ok(GetEx {
            db: s.db,
            key,
            clause: ext.clause,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let Some((value, expire_at)) = txn.string_entry(self.db, &self.key)? else {
            return Ok(Reply::Nil);
        };
        let expire = match self.clause.resolve("getex") {
            Ok(expire) => expire,
            Err(e) => return Ok(e.into()),
        };
        match expire {
            ExpireOpt::At(at) => {
                let at = at.at(txn.now());
                txn.set_expire(self.db, &self.key, Some(at))?;
                // A time already past deletes the key.
                let event = if at <= txn.now() { "del" } else { "expire" };
                txn.notify(GENERIC, event, self.db, &self.key);
            }
            // Only a TTL that is there is removed (and only that counts as
            // a change, for WATCH).
            ExpireOpt::Persist if expire_at.is_some() => {
                txn.set_expire(self.db, &self.key, None)?;
                txn.notify(GENERIC, "persist", self.db, &self.key);
            }
            ExpireOpt::Persist => {}
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
    /// The arguments in their order, repeats included: with keyspace
    /// notifications on, the pairs are written in this order, each key's
    /// events as redis gives them.
    given: Vec<Bytes>,
}

/// Writes the pairs of MSET and MSETNX: in key order (see
/// [`parse_pairs`]), or, when keyspace events are wanted, in argument
/// order with each key's `set` after it (and its `new` before), as redis.
fn put_pairs(
    txn: &mut Txn<'_, '_>,
    db: u32,
    pairs: Vec<(Bytes, Bytes)>,
    given: &[Bytes],
) -> Result<(), CommandError> {
    // In argument order when that order is seen (keyspace events, CLIENT
    // TRACKING's invalidations), as redis writes them.
    if txn.order_seen() {
        for kv in given.chunks_exact(2) {
            txn.put_string_shared(db, &kv[0], kv[1].clone(), None)?;
            txn.notify(STRING, "set", db, &kv[0]);
        }
    } else {
        for (k, v) in pairs {
            txn.put_string_shared(db, &k, v, None)?;
        }
    }
    Ok(())
}

fn parse_pairs(args: &mut Args, name: &str) -> Result<Vec<(Bytes, Bytes)>, CommandError> {
    if args.remaining() % 2 == 1 {
        return Err(CommandError::WrongArity(name.into()));
    }
    let rest = args.rest();
    let mut pairs: Vec<(Bytes, Bytes)> = rest
        .chunks_exact(2)
        .map(|kv| (kv[0].clone(), kv[1].clone()))
        .collect();
    // In key order, once each, keeping the last value of a repeated key
    // (Redis's "a later pair wins"): writing walks the keys' b-tree from
    // one end to the other, each page visited once, where argument order
    // may jump back and forth and have the writer read evicted pages again.
    // The result is the same; the sort runs here, on the connection's
    // thread, not the writer's.
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    pairs.dedup_by(|later, kept| {
        if later.0 != kept.0 {
            return false;
        }
        std::mem::swap(&mut later.1, &mut kept.1);
        true
    });
    Ok(pairs)
}

impl WriteCommand for MSet {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let given = args.peek_rest().to_vec();
        Ok(MSet {
            db: s.db,
            pairs: parse_pairs(args, "mset")?,
            given,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        put_pairs(txn, self.db, self.pairs, &self.given)?;
        Ok(Reply::Ok)
    }
}

/// `MSETNX key value [key value ...]`: all or nothing.
pub struct MSetNx {
    /// Selected database.
    db: u32,
    /// Key/value pairs.
    pairs: Vec<(Bytes, Bytes)>,
    /// The arguments in their order (see [`MSet`]).
    given: Vec<Bytes>,
}

impl WriteCommand for MSetNx {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let given = args.peek_rest().to_vec();
        Ok(MSetNx {
            db: s.db,
            pairs: parse_pairs(args, "msetnx")?,
            given,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        for (k, _) in &self.pairs {
            if txn.exists(self.db, k)? {
                return Ok(Reply::Int(0));
            }
        }
        put_pairs(txn, self.db, self.pairs, &self.given)?;
        Ok(Reply::Int(1))
    }
}

/// Adds `delta` to the integer in a string key, keeping its TTL. The shared
/// step of INCR, DECR, INCRBY, DECRBY.
fn incr_by(txn: &mut Txn<'_, '_>, db: u32, key: &[u8], delta: i64) -> Result<Reply, CommandError> {
    let (current, expire_at) = match txn.string_entry(db, key)? {
        Some((v, at)) => (parse_i64(&v).ok_or(EngineError::NotInteger)?, at),
        None => (0, None),
    };
    let next = current.checked_add(delta).ok_or(EngineError::Overflow)?;
    txn.put_string_shared(db, key, Bytes::from(next.to_string()), expire_at)?;
    txn.notify(STRING, "incrby", db, key);
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
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(Incr {
            db: s.db,
            key: args.next()?,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
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
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(Decr {
            db: s.db,
            key: args.next()?,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
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
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(IncrBy {
            db: s.db,
            key: args.next()?,
            delta: args.next_i64()?,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
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
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
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
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
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
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(IncrByFloat {
            db: s.db,
            key: args.next()?,
            delta: args.next()?,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let (current, expire_at) = match txn.string_entry(self.db, &self.key)? {
            Some((v, at)) => (long_double::parse(&v).ok_or(EngineError::NotFloat)?, at),
            None => (long_double::LongDouble::ZERO, None),
        };
        let delta = long_double::parse(&self.delta).ok_or(EngineError::NotFloat)?;
        let next = long_double::add(current, delta).ok_or(EngineError::NanOrInfinity)?;
        let text = Bytes::from(long_double::format(next));
        txn.put_string_shared(self.db, &self.key, text.clone(), expire_at)?;
        txn.notify(STRING, "incrbyfloat", self.db, &self.key);
        Ok(Reply::Bulk(text))
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
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(Append {
            db: s.db,
            key: args.next()?,
            value: args.next()?,
            max_len: s.max_bulk_len(),
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let (mut current, expire_at) = txn.string_entry(self.db, &self.key)?.unwrap_or_default();
        if current.len() + self.value.len() > self.max_len {
            return Err(EngineError::StringTooLong.into());
        }
        current.extend_from_slice(&self.value);
        txn.put_string(self.db, &self.key, &current, expire_at)?;
        txn.notify(STRING, "append", self.db, &self.key);
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
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let key = args.next()?;
        let offset = args.next_i64()?;
        if offset < 0 {
            return Err(CommandError::Other("offset is out of range".into()));
        }
        let value = args.next()?;
        let max_len = s.max_bulk_len();
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
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let entry = txn.string_entry(self.db, &self.key)?;
        let Some((mut current, expire_at)) = entry else {
            if self.value.is_empty() {
                return Ok(Reply::Int(0));
            }
            let mut fresh = vec![0u8; self.offset];
            fresh.extend_from_slice(&self.value);
            txn.put_string(self.db, &self.key, &fresh, None)?;
            txn.notify(STRING, "setrange", self.db, &self.key);
            return Ok(Reply::Int(fresh.len() as i64));
        };
        if self.value.is_empty() {
            return Ok(Reply::Int(current.len() as i64));
        }
        let end = self.offset + self.value.len();
        if end > self.max_len {
            return Err(EngineError::StringTooLong.into());
        }
        if current.len() < end {
            current.resize(end, 0);
        }
        current[self.offset..end].copy_from_slice(&self.value);
        txn.put_string(self.db, &self.key, &current, expire_at)?;
        txn.notify(STRING, "setrange", self.db, &self.key);
        Ok(Reply::Int(current.len() as i64))
    }
}

/// `LCS key1 key2 [LEN] [IDX] [MINMATCHLEN min-match-len] [WITHMATCHLEN]`:
/// the longest common subsequence of two strings, by Redis's own dynamic
/// programming (so where several are equally long, the same one), its
/// length (LEN), or the matching ranges (IDX, a map in RESP3).
pub struct Lcs {
    /// Selected database.
    db: u32,
    /// The two keys.
    keys: [Bytes; 2],
    /// The options, or the error they make (answered after the keys'
    /// types are checked, as in Redis).
    options: Result<LcsOptions, CommandError>,
    /// `proto-max-bulk-len`: the most memory the table may take.
    max_len: usize,
}

/// LCS's options.
struct LcsOptions {
    len: bool,
    idx: bool,
    min_match_len: u64,
    with_match_len: bool,
}

impl ReadCommand for Lcs {
    const MULTI_STATEMENT: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let keys = [args.next()?, args.next()?];
        let rest = args.rest();
        let options = (|| {
            let mut o = LcsOptions {
                len: false,
                idx: false,
                min_match_len: 0,
                with_match_len: false,
            };
            let mut i = 0;
            while i < rest.len() {
                match upper(&rest[i]).as_str() {
                    "IDX" => o.idx = true,
                    "LEN" => o.len = true,
                    "WITHMATCHLEN" => o.with_match_len = true,
                    "MINMATCHLEN" if i + 1 < rest.len() => {
                        i += 1;
                        let n = parse_i64(&rest[i]).ok_or(CommandError::NotInteger)?;
                        o.min_match_len = n.max(0) as u64;
                    }
                    _ => return Err(CommandError::Syntax),
                }
                i += 1;
            }
            if o.len && o.idx {
                return Err(CommandError::Other(
                    "If you want both the length and indexes, please just use IDX.".into(),
                ));
            }
            Ok(o)
        })();
        Ok(Lcs {
            db: s.db,
            keys,
            options,
            max_len: s.max_bulk_len(),
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let mut values = Vec::with_capacity(2);
        for key in &self.keys {
            values.push(match view.get_string(self.db, key) {
                Ok(v) => v.unwrap_or_default(),
                Err(EngineError::WrongType) => {
                    return Err(CommandError::Other(
                        "The specified keys must contain string values".into(),
                    ))
                }
                Err(e) => return Err(e.into()),
            });
        }
        let o = self.options?;
        let (a, b) = (&values[0], &values[1]);
        let cells = (a.len() as u64 + 1) * (b.len() as u64 + 1);
        if cells.saturating_mul(4) > self.max_len as u64 {
            return Err(CommandError::Other(
                "Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len".into(),
            ));
        }
        let w = b.len() + 1;
        let mut t = vec![0u32; cells as usize];
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                t[i * w + j] = if a[i - 1] == b[j - 1] {
                    t[(i - 1) * w + j - 1] + 1
                } else {
                    t[(i - 1) * w + j].max(t[i * w + j - 1])
                };
            }
        }
        let total = t[a.len() * w + b.len()];
        if o.len && !o.idx {
            return Ok(Reply::Int(total as i64));
        }
        // Walk back as Redis does, collecting the string and the ranges.
        let mut result = vec![0u8; total as usize];
        let mut idx = total as usize;
        let mut matches = Vec::new();
        let (mut i, mut j) = (a.len(), b.len());
        let unset = a.len();
        let (mut a_start, mut a_end, mut b_start, mut b_end) = (unset, 0, 0, 0);
        while i > 0 && j > 0 {
            let mut emit = false;
            if a[i - 1] == b[j - 1] {
                result[idx - 1] = a[i - 1];
                if a_start == unset {
                    (a_start, a_end, b_start, b_end) = (i - 1, i - 1, j - 1, j - 1);
                } else if a_start == i && b_start == j {
                    a_start -= 1;
                    b_start -= 1;
                } else {
                    emit = true;
                }
                if a_start == 0 || b_start == 0 {
                    emit = true;
                }
                idx -= 1;
                i -= 1;
                j -= 1;
            } else {
                if t[(i - 1) * w + j] > t[i * w + j - 1] {
                    i -= 1;
                } else {
                    j -= 1;
                }
                if a_start != unset {
                    emit = true;
                }
            }
            let match_len = (a_end as i64 - a_start as i64 + 1) as u64;
            if emit {
                if o.min_match_len == 0 || match_len >= o.min_match_len {
                    let mut entry = vec![
                        Reply::Array(vec![Reply::Int(a_start as i64), Reply::Int(a_end as i64)]),
                        Reply::Array(vec![Reply::Int(b_start as i64), Reply::Int(b_end as i64)]),
                    ];
                    if o.with_match_len {
                        entry.push(Reply::Int(match_len as i64));
                    }
                    matches.push(Reply::Array(entry));
                }
                a_start = unset;
            }
        }
        if o.idx {
            return Ok(Reply::Map(vec![
                (Reply::bulk("matches"), Reply::Array(matches)),
                (Reply::bulk("len"), Reply::Int(total as i64)),
            ]));
        }
        Ok(Reply::bulk(result))
    }
}

/// This family's rows of the command table (see [`crate::command::table`]).
#[rustfmt::skip]
pub(crate) fn commands() -> Vec<crate::command::Spec> {
    use crate::command::Spec;
    vec![
        Spec::write::<Append>("append"),
        Spec::write::<Decr>("decr"),
        Spec::write::<DecrBy>("decrby"),
        Spec::read::<Get>("get").planned_by(plan_get),
        Spec::write::<GetDel>("getdel"),
        Spec::write::<GetEx>("getex"),
        Spec::read::<GetRange>("getrange"),
        Spec::write::<GetSet>("getset"),
        Spec::write::<Incr>("incr"),
        Spec::write::<IncrBy>("incrby"),
        Spec::write::<IncrByFloat>("incrbyfloat"),
        Spec::read::<MGet>("mget").planned_by(plan_mget),
        Spec::write::<MSet>("mset"),
        Spec::write::<MSetNx>("msetnx"),
        Spec::write::<PSetEx>("psetex"),
        Spec::write::<Set>("set"),
        Spec::write::<SetEx>("setex"),
        Spec::write::<SetNx>("setnx"),
        Spec::write::<SetRange>("setrange"),
        Spec::read::<GetRange>("substr"),
        Spec::read::<Lcs>("lcs"),
        Spec::read::<StrLen>("strlen"),
    ]
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

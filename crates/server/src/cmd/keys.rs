//! Generic key commands: existence, deletion, expiry, renaming, iteration.

use bytes::Bytes;
use respite_engine::schema::KINDS;
use std::sync::Arc;

use respite_engine::notify::{EXPIRED, GENERIC};
use respite_engine::{now_ms, Access, Kind, Txn, View};

use crate::args::{upper, Args};
use crate::command::Ctx;
use crate::command::{ReadCommand, Touching, WriteCommand};
use crate::error::{CommandError, Lossy};
use crate::reply::Reply;

/// How an expiry argument is meant.
#[derive(Clone, Copy, PartialEq)]
pub enum ExpireUnit {
    /// Relative seconds (EX, EXPIRE).
    Seconds,
    /// Relative milliseconds (PX, PEXPIRE).
    Millis,
    /// Absolute Unix seconds (EXAT, EXPIREAT).
    UnixSeconds,
    /// Absolute Unix milliseconds (PXAT, PEXPIREAT).
    UnixMillis,
}

/// An expiry as a command gives it. A relative one (EX, PX, EXPIRE,
/// SETEX...) is turned into a time only when the command runs on the
/// writer ([`View::now`] of its `Txn`), not when the connection parsed it:
/// the time a write waits in the queue is not taken from its TTL, and a
/// PTTL in the same MULTI/EXEC answers exactly what was set. (The time
/// from there to the commit's end still is: a TTL can never read higher
/// than it was set, which a clock set ahead by an estimate of the commit
/// could not promise on a loaded machine.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deadline {
    /// Absolute Unix milliseconds (EXAT, PXAT, EXPIREAT, PEXPIREAT).
    At(i64),
    /// This many milliseconds after the command runs.
    After(i64),
}

impl Deadline {
    /// The expiry argument `n` in `unit`; `None` on overflow (Redis's
    /// "invalid expire time"), judged against the clock now: the command
    /// runs a few milliseconds later at most.
    pub fn parse(n: i64, unit: ExpireUnit) -> Option<Deadline> {
        let deadline = match unit {
            ExpireUnit::Seconds => Deadline::After(n.checked_mul(1000)?),
            ExpireUnit::Millis => Deadline::After(n),
            ExpireUnit::UnixSeconds => Deadline::At(n.checked_mul(1000)?),
            ExpireUnit::UnixMillis => Deadline::At(n),
        };
        if let Deadline::After(ms) = deadline {
            ms.checked_add(now_ms())?;
        }
        Some(deadline)
    }

    /// Absolute Unix milliseconds, for a command running at `now`.
    pub fn at(self, now: i64) -> i64 {
        match self {
            Deadline::At(at) => at,
            Deadline::After(ms) => now.saturating_add(ms),
        }
    }
}

/// `DEL key [key ...]` and `UNLINK key [key ...]`: the number deleted.
pub struct Del {
    /// Selected database.
    db: u32,
    /// Keys to delete.
    keys: Vec<Bytes>,
    /// The keys in argument order, when there are several: with keyspace
    /// notifications on they are deleted in this order, as redis announces
    /// them.
    order: Vec<Bytes>,
}

impl WriteCommand for Del {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        // In key order, once each: deleting walks the keys' b-tree from
        // one end to the other, each page visited once, where argument
        // order may jump back and forth and have the writer read evicted
        // pages again (a million keys right after their MSET: 3.4 to 5.8 s
        // of writer CPU in argument order, 1.5 to 2.0 s sorted).
        // The sort runs here, on the connection's thread, not the writer's;
        // the reply is the same, a repeated key is deleted only once.
        let mut keys = args.rest();
        let order = if keys.len() > 1 {
            keys.clone()
        } else {
            Vec::new()
        };
        keys.sort_unstable();
        keys.dedup();
        Ok(Del {
            db: s.db,
            keys,
            order,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let mut n = 0;
        let keys = if !self.order.is_empty() && txn.notifying(GENERIC | EXPIRED) {
            &self.order
        } else {
            &self.keys
        };
        for key in keys {
            if txn.delete(self.db, key)? {
                txn.notify(GENERIC, "del", self.db, key);
                n += 1;
            }
        }
        Ok(Reply::Int(n))
    }
}

/// `EXISTS key [key ...]` (TOUCH = false) and `TOUCH key [key ...]`
/// (TOUCH = true): counts a key once per mention. EXISTS looks without
/// using (redis's `LOOKUP_NOTOUCH`); TOUCH uses every key it finds, even
/// for a client in CLIENT NO-TOUCH mode.
pub struct ExistsGeneric<const TOUCH: bool> {
    /// Selected database.
    db: u32,
    /// Keys to test.
    keys: Vec<Bytes>,
}

/// `EXISTS key [key ...]`
pub type Exists = ExistsGeneric<false>;

/// `TOUCH key [key ...]`: the number of existing keys, each now last
/// used (OBJECT IDLETIME 0).
pub type Touch = ExistsGeneric<true>;

impl<const TOUCH: bool> ReadCommand for ExistsGeneric<TOUCH> {
    const QUICK: bool = true;
    const MULTI_STATEMENT: bool = true;
    const TOUCHING: Touching = if TOUCH {
        Touching::Always
    } else {
        Touching::Never
    };
    fn is_quick(&self) -> bool {
        self.keys.len() <= crate::command::QUICK_READ_LIMIT
    }
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(ExistsGeneric {
            db: s.db,
            keys: args.rest(),
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let n = view.count_existing(self.db, &self.keys)?;
        Ok(Reply::Int(i64::try_from(n).unwrap_or(i64::MAX)))
    }
}

/// `TYPE key`
pub struct Type {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
}

impl ReadCommand for Type {
    const QUICK: bool = true;
    const TOUCHING: Touching = Touching::Never;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(Type {
            db: s.db,
            key: args.next()?,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        Ok(Reply::Simple(
            view.kind(self.db, &self.key)?.map_or("none", Kind::name),
        ))
    }
}

/// The NX/XX/GT/LT conditions of the EXPIRE family. XX combines with GT
/// or LT (both must hold); NX combines with nothing, nor GT with LT.
#[derive(Clone, Copy, Default)]
struct Condition {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

impl Condition {
    /// Parses the options as Redis's `parseExtendedExpireArgumentsOrReply`:
    /// repeats are allowed, an unknown option is named as sent, and the
    /// combinations are checked after all were read.
    fn parse(args: &mut Args) -> Result<Condition, CommandError> {
        let mut c = Condition::default();
        while let Some(opt) = args.next_opt() {
            match upper(&opt).as_str() {
                "NX" => c.nx = true,
                "XX" => c.xx = true,
                "GT" => c.gt = true,
                "LT" => c.lt = true,
                _ => {
                    return Err(CommandError::Quoted {
                        before: "ERR Unsupported option ",
                        arg: Lossy(opt.to_vec()),
                        after: "",
                    })
                }
            }
        }
        if c.nx && (c.xx || c.gt || c.lt) {
            return Err(CommandError::Other(
                "NX and XX, GT or LT options at the same time are not compatible".into(),
            ));
        }
        if c.gt && c.lt {
            return Err(CommandError::Other(
                "GT and LT options at the same time are not compatible".into(),
            ));
        }
        Ok(c)
    }

    /// May a key whose expiry is `current` get the expiry `at`? No expiry
    /// counts as an infinite one.
    fn allows(&self, current: Option<i64>, at: i64) -> bool {
        if self.nx && current.is_some() {
            return false;
        }
        if self.xx && current.is_none() {
            return false;
        }
        if self.gt && current.is_none_or(|cur| at <= cur) {
            return false;
        }
        if self.lt && current.is_some_and(|cur| at >= cur) {
            return false;
        }
        true
    }
}

/// `EXPIRE key seconds [NX | XX | GT | LT]` and its three siblings, which
/// differ only in the unit.
pub struct ExpireGeneric<const UNIT: u8> {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The new expiry.
    at: Deadline,
    /// When to apply it.
    condition: Condition,
}

/// `EXPIRE key seconds [NX | XX | GT | LT]`
pub type Expire = ExpireGeneric<0>;
/// `PEXPIRE key milliseconds [NX | XX | GT | LT]`
pub type PExpire = ExpireGeneric<1>;
/// `EXPIREAT key unix-time-seconds [NX | XX | GT | LT]`
pub type ExpireAt = ExpireGeneric<2>;
/// `PEXPIREAT key unix-time-milliseconds [NX | XX | GT | LT]`
pub type PExpireAt = ExpireGeneric<3>;

impl<const UNIT: u8> WriteCommand for ExpireGeneric<UNIT> {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let (unit, name) = match UNIT {
            0 => (ExpireUnit::Seconds, "expire"),
            1 => (ExpireUnit::Millis, "pexpire"),
            2 => (ExpireUnit::UnixSeconds, "expireat"),
            _ => (ExpireUnit::UnixMillis, "pexpireat"),
        };
        let key = args.next()?;
        let value = args.next()?;
        // Redis reads the options before the number.
        let condition = Condition::parse(args)?;
        let n = crate::args::parse_i64(&value).ok_or(CommandError::NotInteger)?;
        let at = Deadline::parse(n, unit).ok_or(CommandError::InvalidExpire(name))?;
        Ok(ExpireGeneric {
            db: s.db,
            key,
            at,
            condition,
        })
    }

    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let Some(entry) = txn.entry(self.db, &self.key)? else {
            return Ok(Reply::Int(0));
        };
        let at = self.at.at(txn.now());
        if !self.condition.allows(entry.expire_at, at) {
            return Ok(Reply::Int(0));
        }
        txn.set_expire(self.db, &self.key, Some(at))?;
        // A time already past deletes the key (redis's checkAlreadyExpired).
        let event = if at <= txn.now() { "del" } else { "expire" };
        txn.notify(GENERIC, event, self.db, &self.key);
        Ok(Reply::Int(1))
    }
}

/// `PERSIST key`: 1 if a TTL was removed.
pub struct Persist {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
}

impl WriteCommand for Persist {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(Persist {
            db: s.db,
            key: args.next()?,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        match txn.entry(self.db, &self.key)? {
            Some(e) if e.expire_at.is_some() => {
                txn.set_expire(self.db, &self.key, None)?;
                txn.notify(GENERIC, "persist", self.db, &self.key);
                Ok(Reply::Int(1))
            }
            _ => Ok(Reply::Int(0)),
        }
    }
}

/// The four TTL readers: `TTL`, `PTTL`, `EXPIRETIME`, `PEXPIRETIME`. -2 for
/// a missing key, -1 for a key without expiry.
pub struct TtlGeneric<const KIND: u8> {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
}

/// `TTL key`: remaining seconds, rounded.
pub type Ttl = TtlGeneric<0>;
/// `PTTL key`: remaining milliseconds.
pub type PTtl = TtlGeneric<1>;
/// `EXPIRETIME key`: absolute Unix seconds.
pub type ExpireTime = TtlGeneric<2>;
/// `PEXPIRETIME key`: absolute Unix milliseconds.
pub type PExpireTime = TtlGeneric<3>;

impl<const KIND: u8> ReadCommand for TtlGeneric<KIND> {
    const QUICK: bool = true;
    const TOUCHING: Touching = Touching::Never;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(TtlGeneric {
            db: s.db,
            key: args.next()?,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let Some(entry) = view.entry(self.db, &self.key)? else {
            return Ok(Reply::Int(-2));
        };
        let Some(at) = entry.expire_at else {
            return Ok(Reply::Int(-1));
        };
        let left = (at - view.now()).max(0);
        Ok(Reply::Int(match KIND {
            0 => (left + 500) / 1000,
            1 => left,
            2 => at / 1000,
            _ => at,
        }))
    }
}

/// `RENAME key newkey` (NX = false) and `RENAMENX key newkey` (NX = true).
pub struct RenameGeneric<const NX: bool> {
    /// Selected database.
    db: u32,
    /// The key.
    from: Bytes,
    /// Its new name.
    to: Bytes,
}

/// `RENAME key newkey`
pub type Rename = RenameGeneric<false>;
/// `RENAMENX key newkey`
pub type RenameNx = RenameGeneric<true>;

impl<const NX: bool> WriteCommand for RenameGeneric<NX> {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(RenameGeneric {
            db: s.db,
            from: args.next()?,
            to: args.next()?,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let moved = txn.rename(self.db, &self.from, &self.to, NX)?;
        if moved && self.from != self.to {
            txn.notify(GENERIC, "rename_from", self.db, &self.from);
            txn.notify(GENERIC, "rename_to", self.db, &self.to);
        }
        Ok(if NX {
            Reply::Int(moved as i64)
        } else {
            Reply::Ok
        })
    }
}

/// `COPY source destination [DB destination-db] [REPLACE]`
pub struct Copy {
    /// Selected database.
    db: u32,
    /// Source key.
    from: Bytes,
    /// Destination key.
    to: Bytes,
    /// Destination database.
    dst_db: u32,
    /// Overwrite an existing destination.
    replace: bool,
}

impl WriteCommand for Copy {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let from = args.next()?;
        let to = args.next()?;
        let mut cmd = Copy {
            db: s.db,
            from,
            to,
            dst_db: s.db,
            replace: false,
        };
        while args.remaining() > 0 {
            match args.next_upper()?.as_str() {
                "REPLACE" => cmd.replace = true,
                "DB" => {
                    let n = args.next_i32()?;
                    if n < 0 || n as u32 >= s.databases() {
                        return Err(CommandError::DbIndexOutOfRange);
                    }
                    cmd.dst_db = n as u32;
                }
                _ => return Err(CommandError::Syntax),
            }
        }
        if cmd.dst_db == cmd.db && cmd.from == cmd.to {
            return Err(CommandError::Other(
                "source and destination objects are the same".into(),
            ));
        }
        Ok(cmd)
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let copied = txn.copy(self.db, &self.from, self.dst_db, &self.to, self.replace)?;
        if copied {
            txn.notify(GENERIC, "copy_to", self.dst_db, &self.to);
        }
        Ok(Reply::Int(copied as i64))
    }
}

/// `MOVE key db`
pub struct Move {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// Destination database.
    dst_db: u32,
}

impl WriteCommand for Move {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let key = args.next()?;
        let n = args.next_i32()?;
        if n < 0 || n as u32 >= s.databases() {
            return Err(CommandError::DbIndexOutOfRange);
        }
        if n as u32 == s.db {
            return Err(CommandError::Other(
                "source and destination objects are the same".into(),
            ));
        }
        Ok(Move {
            db: s.db,
            key,
            dst_db: n as u32,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let moved = txn.move_key(self.db, &self.key, self.dst_db)?;
        if moved {
            txn.notify(GENERIC, "move_from", self.db, &self.key);
            txn.notify(GENERIC, "move_to", self.dst_db, &self.key);
        }
        Ok(Reply::Int(moved as i64))
    }
}

/// `KEYS pattern`
pub struct Keys {
    /// Selected database.
    db: u32,
    /// Glob pattern.
    pattern: Bytes,
}

impl ReadCommand for Keys {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(Keys {
            db: s.db,
            pattern: args.next()?,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let keys = view.keys(self.db, &self.pattern)?;
        Ok(Reply::Array(keys.into_iter().map(Reply::bulk).collect()))
    }
}

/// `SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]`
///
/// Cursor 0 starts a scan; any other number is a position in key order
/// written into the cursor itself (see `respite_engine::keyspace`), so the
/// server keeps nothing between calls and no cursor a client sends is
/// refused. Every key present for the whole scan is returned.
pub struct Scan {
    /// Selected database.
    db: u32,
    /// Where to go on from.
    cursor: u64,
    /// MATCH pattern.
    pattern: Option<Bytes>,
    /// COUNT: keys examined per call.
    count: usize,
    /// TYPE filter; `Some(None)` is a type name that matches nothing.
    kind: Option<Option<Kind>>,
}

impl ReadCommand for Scan {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let cursor = super::common::parse_cursor(&args.next()?)?;
        let mut cmd = Scan {
            db: s.db,
            cursor,
            pattern: None,
            count: 10,
            kind: None,
        };
        while args.remaining() > 0 {
            match args.next_upper()?.as_str() {
                "MATCH" => cmd.pattern = Some(args.next()?),
                "COUNT" => {
                    let n = args.next_i64()?;
                    if n < 1 {
                        return Err(CommandError::Syntax);
                    }
                    cmd.count = n.min(1_000_000) as usize;
                }
                "TYPE" => {
                    let name = upper(&args.next()?).to_ascii_lowercase();
                    let kind = KINDS.into_iter().find(|k| k.name() == name);
                    cmd.kind = Some(kind);
                }
                _ => return Err(CommandError::Syntax),
            }
        }
        Ok(cmd)
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let page = view.scan(
            self.db,
            self.cursor,
            self.count,
            self.pattern.as_deref(),
            self.kind.flatten(),
        )?;
        let keys = match self.kind {
            Some(None) => Vec::new(),
            _ => page.keys,
        };
        Ok(Reply::Array(vec![
            Reply::bulk(page.cursor.to_string()),
            Reply::Array(keys.into_iter().map(Reply::bulk).collect()),
        ]))
    }
}

/// `OBJECT ENCODING | REFCOUNT | IDLETIME | FREQ key`, `OBJECT HELP`
///
/// ENCODING answers what redis-server 7.0 would use for the same value by
/// its default thresholds: `int`, `embstr` (up to 44 bytes) or `raw` for a
/// string; `listpack` or `hashtable` for a hash; `intset` or `hashtable`
/// for a set. IDLETIME and FREQ come from the engine's access table
/// (`respite_engine::access`): seconds since the key was last used, and
/// redis's logarithmic access counter. respite shares no values between
/// keys: REFCOUNT answers 1.
pub struct Object {
    /// Selected database.
    db: u32,
    /// The subcommand.
    sub: ObjectSub,
    /// The key (not for HELP).
    key: Bytes,
    /// `maxmemory-policy` is an LFU one: FREQ answers, IDLETIME refuses
    /// (redis's rule; respite keeps both figures whatever the policy).
    lfu: bool,
    /// redis shares the integers 0..9999 between string values (REFCOUNT
    /// then reports its OBJ_SHARED_REFCOUNT), unless `maxmemory` is set
    /// with an LRU or LFU policy, which needs an object per value.
    shared_integers: bool,
    /// Where IDLETIME and FREQ are read.
    access: Arc<Access>,
    /// For DEBUG OBJECT, which reads redis's dictionary directly: the
    /// lookup counts no keyspace hit or miss.
    quiet: bool,
}

/// OBJECT's subcommands.
#[derive(Clone, Copy, PartialEq)]
enum ObjectSub {
    Encoding,
    RefCount,
    IdleTime,
    Freq,
    Help,
}

/// The encoding redis-server 7.0 gives a string value.
fn string_encoding(value: &[u8]) -> &'static str {
    if value.len() <= 20 && crate::args::parse_i64(value).is_some() {
        "int"
    } else if value.len() <= 44 {
        "embstr"
    } else {
        "raw"
    }
}

impl Object {
    /// OBJECT parsed from `args` for database `db`, for another command
    /// that reports what OBJECT would (DEBUG OBJECT).
    pub(crate) fn probe(
        args: &mut Args,
        db: u32,
        access: Arc<Access>,
        shared_integers: bool,
    ) -> Result<Object, CommandError> {
        let sub = crate::args::subcommand(args)?;
        let kind = match sub.name.as_str() {
            "ENCODING" => ObjectSub::Encoding,
            "REFCOUNT" => ObjectSub::RefCount,
            _ => return Err(sub.unknown("OBJECT")),
        };
        Ok(Object {
            db,
            sub: kind,
            key: args.next()?,
            lfu: false,
            shared_integers,
            access,
            quiet: true,
        })
    }
}

impl ReadCommand for Object {
    const QUICK: bool = true;
    const TOUCHING: Touching = Touching::Never;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let sub = crate::args::subcommand(args)?;
        let (kind, name) = match sub.name.as_str() {
            "ENCODING" => (ObjectSub::Encoding, "object|encoding"),
            "REFCOUNT" => (ObjectSub::RefCount, "object|refcount"),
            "IDLETIME" => (ObjectSub::IdleTime, "object|idletime"),
            "FREQ" => (ObjectSub::Freq, "object|freq"),
            "HELP" => (ObjectSub::Help, "object|help"),
            _ => return Err(sub.unknown("OBJECT")),
        };
        let wanted = if kind == ObjectSub::Help { 0 } else { 1 };
        if args.remaining() != wanted {
            return Err(CommandError::WrongArity(name.into()));
        }
        let key = args.next_opt().unwrap_or_default();
        Ok(Object {
            db: s.db,
            sub: kind,
            key,
            lfu: s.lfu(),
            shared_integers: s.shares_integers(),
            access: s.access().clone(),
            quiet: false,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        if self.sub == ObjectSub::Help {
            let lines = [
                "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "ENCODING <key>",
                "    Return the kind of internal representation used in order to store the value",
                "    associated with a <key>.",
                "FREQ <key>",
                "    Return the access frequency index of the <key>. The returned integer is",
                "    proportional to the logarithm of the recent access frequency of the key.",
                "IDLETIME <key>",
                "    Return the idle time of the <key>, that is the approximated number of",
                "    seconds elapsed since the last access to the key.",
                "REFCOUNT <key>",
                "    Return the number of references of the value associated with the specified",
                "    <key>.",
                "HELP",
                "    Prints this help.",
            ];
            return Ok(Reply::Array(
                lines
                    .iter()
                    .map(|l| Reply::Status((*l).to_string()))
                    .collect(),
            ));
        }
        let entry = if self.quiet {
            view.peek_entry(self.db, &self.key)?
        } else {
            view.entry(self.db, &self.key)?
        };
        let Some(entry) = entry else {
            return Ok(Reply::Nil);
        };
        let big = entry.flags & respite_engine::schema::ENC_BIG != 0;
        Ok(match self.sub {
            ObjectSub::Encoding => Reply::bulk(match entry.kind {
                Kind::String => {
                    // Looked up already, just above.
                    let value = view.peek_string(self.db, &self.key)?.unwrap_or_default();
                    string_encoding(&value)
                }
                Kind::Hash if big => "hashtable",
                Kind::Hash => "listpack",
                Kind::Set if big => "hashtable",
                Kind::Set => "intset",
                Kind::List => "quicklist",
                Kind::ZSet if big => "skiplist",
                Kind::ZSet => "listpack",
                Kind::Stream => "stream",
            }),
            ObjectSub::RefCount => {
                // A string holding one of redis's shared integers (judged
                // by the value, as ENCODING is: see `string_encoding`).
                let shared = self.shared_integers
                    && entry.kind == Kind::String
                    && view
                        .peek_string(self.db, &self.key)?
                        .filter(|v| v.len() <= 20)
                        .and_then(|v| crate::args::parse_i64(&v))
                        .is_some_and(|n| (0..10_000).contains(&n));
                Reply::Int(if shared { i64::from(i32::MAX) } else { 1 })
            }
            ObjectSub::IdleTime if self.lfu => {
                return Err(CommandError::Other("An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.".into()))
            }
            ObjectSub::IdleTime => {
                Reply::Int(self.access.figures(self.db, &self.key).idle_secs as i64)
            }
            ObjectSub::Freq if self.lfu => {
                Reply::Int(i64::from(self.access.figures(self.db, &self.key).freq))
            }
            ObjectSub::Freq => {
                return Err(CommandError::Other("An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.".into()))
            }
            ObjectSub::Help => Reply::Nil,
        })
    }
}

/// `RANDOMKEY`
pub struct RandomKey {
    /// Selected database.
    db: u32,
}

impl ReadCommand for RandomKey {
    const MULTI_STATEMENT: bool = true;
    fn parse(_args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(RandomKey { db: s.db })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        Ok(Reply::bulk_or_nil(
            view.random_key(self.db, rand::random())?,
        ))
    }
}

/// This family's rows of the command table (see [`crate::command::table`]).
#[rustfmt::skip]
pub(crate) fn commands() -> Vec<crate::command::Spec> {
    use crate::command::Spec;
    vec![
        Spec::write::<Copy>("copy"),
        Spec::write::<Del>("del"),
        Spec::read::<Exists>("exists"),
        Spec::write::<Expire>("expire"),
        Spec::write::<ExpireAt>("expireat"),
        Spec::read::<ExpireTime>("expiretime"),
        Spec::read::<Keys>("keys"),
        Spec::write::<Move>("move"),
        Spec::write::<Persist>("persist"),
        Spec::write::<PExpire>("pexpire"),
        Spec::write::<PExpireAt>("pexpireat"),
        Spec::read::<PExpireTime>("pexpiretime"),
        Spec::read::<PTtl>("pttl"),
        Spec::read::<Object>("object").with_keys([2, 2, 1])
            .with_subcommands("OBJECT", &["encoding", "freq", "help", "idletime", "refcount"]),
        Spec::read::<RandomKey>("randomkey"),
        Spec::write::<Rename>("rename"),
        Spec::write::<RenameNx>("renamenx"),
        Spec::read::<Scan>("scan"),
        Spec::read::<Touch>("touch"),
        Spec::read::<Ttl>("ttl"),
        Spec::read::<Type>("type"),
        Spec::write::<Del>("unlink"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expire_arithmetic_overflows_to_none() {
        assert_eq!(Deadline::parse(i64::MAX, ExpireUnit::Seconds), None);
        assert_eq!(Deadline::parse(i64::MAX - 5, ExpireUnit::Millis), None);
        assert_eq!(
            Deadline::parse(5, ExpireUnit::UnixSeconds),
            Some(Deadline::At(5000))
        );
        assert_eq!(
            Deadline::parse(5, ExpireUnit::Seconds).map(|d| d.at(100)),
            Some(5100)
        );
    }

    #[test]
    fn a_long_exists_or_lrange_is_not_a_quick_read() {
        let keys = |n: usize| vec![Bytes::from_static(b"k"); n];
        let limit = crate::command::QUICK_READ_LIMIT;
        assert!(Exists {
            db: 0,
            keys: keys(limit)
        }
        .is_quick());
        assert!(!Exists {
            db: 0,
            keys: keys(limit + 1)
        }
        .is_quick());
        assert!(!Touch {
            db: 0,
            keys: keys(1_000_000)
        }
        .is_quick());
        let range = |start, stop| crate::cmd::lists::LRange::probe(start, stop).is_quick();
        assert!(range(0, 9));
        assert!(range(-10, -1));
        assert!(!range(0, -1));
        assert!(!range(0, 1_000));
        assert!(!range(-5, 3));
    }
}

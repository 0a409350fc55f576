//! Generic key commands: existence, deletion, expiry, renaming, iteration.

use bytes::Bytes;
use respite_engine::{now_ms, EngineError, Kind, Txn, View};

use super::{ReadCommand, Session, WriteCommand};
use crate::args::{upper, Args};
use crate::error::{CommandError, Lossy};
use crate::reply::Reply;
use crate::state::{lock, Shared};
use std::sync::Arc;

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

/// Turns an expiry argument into absolute Unix milliseconds; `None` on
/// overflow (Redis's "invalid expire time").
pub fn absolute_expire(n: i64, unit: ExpireUnit) -> Option<i64> {
    match unit {
        ExpireUnit::Seconds => n.checked_mul(1000)?.checked_add(now_ms()),
        ExpireUnit::Millis => n.checked_add(now_ms()),
        ExpireUnit::UnixSeconds => n.checked_mul(1000),
        ExpireUnit::UnixMillis => Some(n),
    }
}

/// `DEL key [key ...]` and `UNLINK key [key ...]`: the number deleted.
pub struct Del {
    /// Selected database.
    db: u32,
    /// Keys to delete.
    keys: Vec<Bytes>,
}

impl WriteCommand for Del {
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        Ok(Del {
            db: s.db,
            keys: args.rest(),
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, EngineError> {
        let mut n = 0;
        for key in &self.keys {
            if txn.delete(self.db, key)? {
                n += 1;
            }
        }
        Ok(Reply::Int(n))
    }
}

/// `EXISTS key [key ...]`: counts a key once per mention.
pub struct Exists {
    /// Selected database.
    db: u32,
    /// Keys to test.
    keys: Vec<Bytes>,
}

impl ReadCommand for Exists {
    const QUICK: bool = true;
    const MULTI_STATEMENT: bool = true;
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        Ok(Exists {
            db: s.db,
            keys: args.rest(),
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let mut n = 0;
        for key in &self.keys {
            if view.exists(self.db, key)? {
                n += 1;
            }
        }
        Ok(Reply::Int(n))
    }
}

/// `TOUCH key [key ...]`: the number of existing keys. respite keeps no
/// access times, so this only counts.
pub type Touch = Exists;

/// `TYPE key`
pub struct Type {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
}

impl ReadCommand for Type {
    const QUICK: bool = true;
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
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
    /// The new expiry, absolute Unix milliseconds.
    at: i64,
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
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
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
        let at = absolute_expire(n, unit).ok_or(CommandError::InvalidExpire(name))?;
        Ok(ExpireGeneric {
            db: s.db,
            key,
            at,
            condition,
        })
    }

    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, EngineError> {
        let Some(entry) = txn.entry(self.db, &self.key)? else {
            return Ok(Reply::Int(0));
        };
        if !self.condition.allows(entry.expire_at, self.at) {
            return Ok(Reply::Int(0));
        }
        txn.set_expire(self.db, &self.key, Some(self.at))?;
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
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        Ok(Persist {
            db: s.db,
            key: args.next()?,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, EngineError> {
        match txn.entry(self.db, &self.key)? {
            Some(e) if e.expire_at.is_some() => {
                txn.set_expire(self.db, &self.key, None)?;
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
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
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
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        Ok(RenameGeneric {
            db: s.db,
            from: args.next()?,
            to: args.next()?,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, EngineError> {
        let moved = txn.rename(self.db, &self.from, &self.to, NX)?;
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
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
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
                    if n < 0 || n as u32 >= s.shared.config.databases {
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
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, EngineError> {
        let copied = txn.copy(self.db, &self.from, self.dst_db, &self.to, self.replace)?;
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
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        let key = args.next()?;
        let n = args.next_i32()?;
        if n < 0 || n as u32 >= s.shared.config.databases {
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
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, EngineError> {
        Ok(Reply::Int(
            txn.move_key(self.db, &self.key, self.dst_db)? as i64
        ))
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
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
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
/// Cursor 0 starts a scan; every other cursor is a number this server handed
/// out, standing for "continue after key K" (kept in [`crate::state::Cursors`]).
/// Walking keys in order guarantees that a key present for the whole scan is
/// returned exactly once.
pub struct Scan {
    /// Selected database.
    db: u32,
    /// Where to continue: `None` from the start.
    after: Option<Vec<u8>>,
    /// MATCH pattern.
    pattern: Option<Bytes>,
    /// COUNT: keys examined per call.
    count: usize,
    /// TYPE filter; `Some(None)` is a type name that matches nothing.
    kind: Option<Option<Kind>>,
    /// For saving the next cursor.
    shared: Arc<Shared>,
}

impl ReadCommand for Scan {
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        let cursor_arg = args.next()?;
        let cursor = std::str::from_utf8(&cursor_arg)
            .ok()
            .and_then(|t| t.parse::<u64>().ok())
            .ok_or(CommandError::Engine(EngineError::InvalidCursor))?;
        let after = if cursor == 0 {
            None
        } else {
            Some(
                lock(&s.shared.cursors)
                    .get(s.db, cursor)
                    .ok_or(CommandError::Engine(EngineError::InvalidCursor))?,
            )
        };
        let mut cmd = Scan {
            db: s.db,
            after,
            pattern: None,
            count: 10,
            kind: None,
            shared: s.shared.clone(),
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
                    let kind = [Kind::String, Kind::Hash, Kind::List, Kind::Set, Kind::ZSet]
                        .into_iter()
                        .find(|k| k.name() == name);
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
            self.after.as_deref(),
            self.count,
            self.pattern.as_deref(),
            self.kind.flatten(),
        )?;
        let keys = match self.kind {
            Some(None) => Vec::new(),
            _ => page.keys,
        };
        let next = match page.resume_after {
            Some(after) => lock(&self.shared.cursors).save(self.db, after),
            None => 0,
        };
        Ok(Reply::Array(vec![
            Reply::bulk(next.to_string()),
            Reply::Array(keys.into_iter().map(Reply::bulk).collect()),
        ]))
    }
}

/// `RANDOMKEY`
pub struct RandomKey {
    /// Selected database.
    db: u32,
}

impl ReadCommand for RandomKey {
    const MULTI_STATEMENT: bool = true;
    fn parse(_args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        Ok(RandomKey { db: s.db })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        Ok(Reply::bulk_or_nil(
            view.random_key(self.db, rand::random())?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expire_arithmetic_overflows_to_none() {
        assert_eq!(absolute_expire(i64::MAX, ExpireUnit::Seconds), None);
        assert_eq!(absolute_expire(5, ExpireUnit::UnixSeconds), Some(5000));
    }
}

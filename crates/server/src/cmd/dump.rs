//! DUMP and RESTORE: a value in Redis's own serialization (see the
//! `respite-rdb` crate), so keys move between redis-server and respite.
//!
//! DUMP reads the whole value in one snapshot and writes it in the plain
//! encodings redis-server 7.0's RESTORE accepts (streams as type 19, with
//! their consumer groups). RESTORE decodes and checks the payload when it
//! is parsed, on the connection's thread, so the writer only ever stores
//! a value that is whole and valid; the key is then written in the one
//! operation, inside the writer's transaction, so no client sees it half
//! written. The order of RESTORE's checks is redis's `restoreCommand`:
//! the options, then BUSYKEY, then the TTL, then the payload.
//!
//! [`read_value`] and [`write_value`] (in `crate::value`) are the two
//! halves any whole-value move uses (MIGRATE, an RDB import, replication).

use bytes::Bytes;
use respite_engine::{Txn, View};
use respite_rdb::Value as RdbValue;

use crate::args::{parse_i64, Args};
use crate::command::{Ctx, ReadCommand, WriteCommand};
use crate::error::CommandError;
use crate::reply::Reply;
pub use crate::value::{read_value, write_value};

/// redis's `shared.busykeyerr`.
pub const BUSYKEY: &str = "BUSYKEY Target key name already exists.";

/// `DUMP key`: the value serialized as redis-server 7.0 serializes it, or
/// nil.
pub struct Dump {
    db: u32,
    key: Bytes,
}

impl ReadCommand for Dump {
    const MULTI_STATEMENT: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(Dump {
            db: s.db,
            key: args.next()?,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        Ok(match read_value(view, self.db, &self.key)? {
            Some((value, _)) => Reply::Bulk(respite_rdb::encode_dump(&value).into()),
            None => Reply::Nil,
        })
    }
}

/// `RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds]
/// [FREQ frequency]`
pub struct Restore {
    db: u32,
    key: Bytes,
    /// The TTL argument, or the error it gets (checked after BUSYKEY).
    ttl: Result<i64, CommandError>,
    /// The decoded payload, or the error it gets (checked after the TTL).
    value: Result<RdbValue, &'static str>,
    replace: bool,
    absttl: bool,
    idle: Option<u64>,
    freq: Option<u8>,
    /// The access table, when IDLETIME or FREQ is given.
    access: Option<std::sync::Arc<respite_engine::Access>>,
}

impl WriteCommand for Restore {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let key = args.next()?;
        let ttl_arg = args.next()?;
        let payload = args.next()?;
        let mut replace = false;
        let mut absttl = false;
        let mut idle: Option<u64> = None;
        let mut freq: Option<u8> = None;
        while args.remaining() > 0 {
            let opt = args.next_upper()?;
            let more = args.remaining() >= 1;
            match opt.as_str() {
                "REPLACE" => replace = true,
                "ABSTTL" => absttl = true,
                "IDLETIME" if more && freq.is_none() => {
                    let n = args.next_i64()?;
                    if n < 0 {
                        return Err(CommandError::Other(
                            "Invalid IDLETIME value, must be >= 0".into(),
                        ));
                    }
                    idle = Some(n as u64);
                }
                "FREQ" if more && idle.is_none() => {
                    let n = args.next_i64()?;
                    if !(0..=255).contains(&n) {
                        return Err(CommandError::Other(
                            "Invalid FREQ value, must be >= 0 and <= 255".into(),
                        ));
                    }
                    freq = Some(n as u8);
                }
                _ => return Err(CommandError::Syntax),
            }
        }
        let ttl = match parse_i64(&ttl_arg) {
            None => Err(CommandError::NotInteger),
            Some(n) if n < 0 => Err(CommandError::Other(
                "Invalid TTL value, must be >= 0".into(),
            )),
            Some(n) => Ok(n),
        };
        let value = respite_rdb::decode_dump(&payload).map_err(|e| e.restore_message());
        Ok(Restore {
            db: s.db,
            key,
            ttl,
            value,
            replace,
            absttl,
            idle,
            freq,
            access: (idle.is_some() || freq.is_some()).then(|| s.access().clone()),
        })
    }

    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        if !self.replace && txn.exists(self.db, &self.key)? {
            return Err(CommandError::Raw(BUSYKEY.into()));
        }
        let ttl = self.ttl?;
        let value = self.value.map_err(|m| CommandError::Other(m.into()))?;
        if self.replace {
            txn.delete(self.db, &self.key)?;
        }
        let now = txn.now();
        let expire_at = match ttl {
            0 => None,
            t if self.absttl => Some(t),
            t => Some(now.saturating_add(t)),
        };
        if expire_at.is_some_and(|at| at <= now) {
            return Ok(Reply::Ok);
        }
        write_value(txn, self.db, &self.key, &value, expire_at)?;
        if let Some(access) = &self.access {
            access.restore_figures(self.db, &self.key, self.idle, self.freq);
        }
        Ok(Reply::Ok)
    }
}

/// This family's rows of the command table (see [`crate::command::table`]).
#[rustfmt::skip]
pub(crate) fn commands() -> Vec<crate::command::Spec> {
    use crate::command::Spec;
    vec![
        Spec::read::<Dump>("dump"),
        Spec::write::<Restore>("restore"),
    ]
}

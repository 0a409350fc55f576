//! Set commands: membership, random members, moves, and the algebra
//! (SINTER, SUNION, SDIFF, their STORE forms, SINTERCARD).
//!
//! Reads run on the read pool, each in one snapshot; writes (the STORE
//! forms too) on the writer through the engine's write gate
//! (`respite_engine::keyspace`), which checks the type, drops an expired key
//! first, notes the change for the value cache and WATCH, and deletes the
//! key with its last member.
//!
//! Replies follow redis-server 7.0 in RESP2 and RESP3: SMEMBERS, SINTER,
//! SUNION, SDIFF and SPOP with a count are sets (`~`) in RESP3,
//! SRANDMEMBER with a count an array. Members come back in byte order, an
//! order Redis does not promise either. The random commands pick uniformly,
//! as Redis does.

use bytes::Bytes;
use respite_engine::{KeyRow, Kind, Txn, View};

use super::common::{parse_cursor, range_error, sample, scan_reply, ScanOptions, MAX_REPEATED};
use crate::args::{parse_i64, upper, Args};
use crate::command::Ctx;
use crate::command::{ReadCommand, WriteCommand};
use crate::error::CommandError;
use crate::reply::Reply;

/// The live set under `key`, `None` if there is none (WRONGTYPE if the key
/// holds another type).
fn set(view: &View<'_, '_>, db: u32, key: &[u8]) -> Result<Option<KeyRow>, CommandError> {
    Ok(view.live(db, key, Kind::Set)?)
}

fn bulks(members: impl IntoIterator<Item = Vec<u8>>) -> Vec<Reply> {
    members.into_iter().map(Reply::bulk).collect()
}

/// `SADD key member [member ...]`: the number of new members.
pub struct SAdd {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The members.
    members: Vec<Bytes>,
}

impl WriteCommand for SAdd {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(SAdd {
            db: s.db,
            key: args.next()?,
            members: args.rest(),
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let mut slot = txn.open(self.db, &self.key, Kind::Set)?;
        Ok(Reply::Int(txn.set_add(&mut slot, &self.members)?))
    }
}

/// `SREM key member [member ...]`: the number removed; the key goes with
/// its last member.
pub struct SRem {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The members.
    members: Vec<Bytes>,
}

impl WriteCommand for SRem {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(SRem {
            db: s.db,
            key: args.next()?,
            members: args.rest(),
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let mut slot = txn.open(self.db, &self.key, Kind::Set)?;
        Ok(Reply::Int(txn.set_remove(&mut slot, &self.members)?))
    }
}

/// `SMEMBERS key`
pub struct SMembers {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
}

impl ReadCommand for SMembers {
    const MULTI_STATEMENT: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(SMembers {
            db: s.db,
            key: args.next()?,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        Ok(Reply::Set(bulks(view.set_members_of(self.db, &self.key)?)))
    }
}

/// `SISMEMBER key member`
pub struct SIsMember {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The member.
    member: Bytes,
}

impl ReadCommand for SIsMember {
    const QUICK: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(SIsMember {
            db: s.db,
            key: args.next()?,
            member: args.next()?,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        Ok(Reply::Int(
            view.set_contains(self.db, &self.key, &self.member)? as i64,
        ))
    }
}

/// `SMISMEMBER key member [member ...]`: 1 or 0 for each.
pub struct SMIsMember {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The members.
    members: Vec<Bytes>,
}

impl ReadCommand for SMIsMember {
    const QUICK: bool = true;
    const MULTI_STATEMENT: bool = true;
    fn is_quick(&self) -> bool {
        self.members.len() <= crate::command::QUICK_READ_LIMIT
    }
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(SMIsMember {
            db: s.db,
            key: args.next()?,
            members: args.rest(),
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let row = set(view, self.db, &self.key)?;
        let mut out = Vec::with_capacity(self.members.len());
        for m in &self.members {
            let found = match row {
                Some(row) => view.set_has(row.id, m)?,
                None => false,
            };
            out.push(Reply::Int(found as i64));
        }
        Ok(Reply::Array(out))
    }
}

/// `SCARD key`: read from the key row, never counted.
pub struct SCard {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
}

impl ReadCommand for SCard {
    const QUICK: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(SCard {
            db: s.db,
            key: args.next()?,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        Ok(Reply::Int(
            set(view, self.db, &self.key)?.map_or(0, |r| r.count),
        ))
    }
}

/// `SPOP key [count]`: removes and returns random members.
pub struct SPop {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The count, if given (never negative).
    count: Option<u64>,
}

impl WriteCommand for SPop {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let key = args.next()?;
        if args.remaining() > 1 {
            return Err(CommandError::Syntax);
        }
        let count = match args.next_opt() {
            None => None,
            Some(c) => {
                let positive =
                    || CommandError::Other("value is out of range, must be positive".into());
                let n = parse_i64(&c).ok_or_else(positive)?;
                if n < 0 {
                    return Err(positive());
                }
                Some(n as u64)
            }
        };
        if args.remaining() > 0 {
            return Err(CommandError::Syntax);
        }
        Ok(SPop {
            db: s.db,
            key,
            count,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let mut slot = txn.open(self.db, &self.key, Kind::Set)?;
        let Some(row) = slot.row() else {
            return Ok(match self.count {
                None => Reply::Nil,
                Some(_) => Reply::Set(Vec::new()),
            });
        };
        let members = txn.set_members(row.id)?;
        let wanted = self.count.unwrap_or(1).min(i64::MAX as u64) as i64;
        let picked: Vec<Vec<u8>> = sample(&members, wanted).into_iter().cloned().collect();
        txn.set_remove(&mut slot, &picked)?;
        Ok(match self.count {
            None => Reply::bulk_or_nil(picked.into_iter().next()),
            Some(_) => Reply::Set(bulks(picked)),
        })
    }
}

/// `SRANDMEMBER key [count]`: random members; a negative count allows
/// repeats.
pub struct SRandMember {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The count, if given.
    count: Option<i64>,
}

impl ReadCommand for SRandMember {
    const MULTI_STATEMENT: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let key = args.next()?;
        if args.remaining() > 1 {
            return Err(CommandError::Syntax);
        }
        let count = match args.next_opt() {
            None => None,
            Some(c) => {
                let n = parse_i64(&c).ok_or(CommandError::NotInteger)?;
                if n == i64::MIN {
                    return Err(range_error());
                }
                if n < 0 && n.unsigned_abs() > MAX_REPEATED {
                    return Err(CommandError::Other("value is out of range".into()));
                }
                Some(n)
            }
        };
        if args.remaining() > 0 {
            return Err(CommandError::Syntax);
        }
        Ok(SRandMember {
            db: s.db,
            key,
            count,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let row = set(view, self.db, &self.key)?;
        let Some(count) = self.count else {
            let Some(row) = row else {
                return Ok(Reply::Nil);
            };
            let pick = rand::random_range(0..row.count.max(1));
            return Ok(Reply::bulk_or_nil(view.set_nth(row.id, pick)?));
        };
        let Some(row) = row else {
            return Ok(Reply::Array(Vec::new()));
        };
        let members = view.set_members(row.id)?;
        Ok(Reply::Array(bulks(
            sample(&members, count).into_iter().cloned(),
        )))
    }
}

/// `SMOVE source destination member`
pub struct SMove {
    /// Selected database.
    db: u32,
    /// The source key.
    from: Bytes,
    /// The destination key.
    to: Bytes,
    /// The member.
    member: Bytes,
}

impl WriteCommand for SMove {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(SMove {
            db: s.db,
            from: args.next()?,
            to: args.next()?,
            member: args.next()?,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        // Redis looks both keys up before anything: a missing source is 0
        // whatever the destination holds; then both types are checked.
        let Some(src) = txn.entry(self.db, &self.from)? else {
            return Ok(Reply::Int(0));
        };
        if src.kind != Kind::Set {
            return Err(respite_engine::EngineError::WrongType.into());
        }
        if let Some(dst) = txn.entry(self.db, &self.to)? {
            if dst.kind != Kind::Set {
                return Err(respite_engine::EngineError::WrongType.into());
            }
        }
        let mut source = txn.open(self.db, &self.from, Kind::Set)?;
        if self.from == self.to {
            let found = match source.row() {
                Some(row) => txn.set_has(row.id, &self.member)?,
                None => false,
            };
            return Ok(Reply::Int(found as i64));
        }
        if txn.set_remove(&mut source, &[&self.member])? == 0 {
            return Ok(Reply::Int(0));
        }
        let mut dest = txn.open(self.db, &self.to, Kind::Set)?;
        txn.set_add(&mut dest, &[&self.member])?;
        Ok(Reply::Int(1))
    }
}

/// Which algebra a command computes.
#[derive(Clone, Copy, PartialEq)]
enum Op {
    Inter,
    Union,
    Diff,
}

/// The members of every key (checking every type first, as Redis does:
/// WRONGTYPE wins over a missing key); `None` for a missing key.
fn load(
    view: &View<'_, '_>,
    db: u32,
    keys: &[Bytes],
) -> Result<Vec<Option<Vec<Vec<u8>>>>, CommandError> {
    let rows = keys
        .iter()
        .map(|k| set(view, db, k))
        .collect::<Result<Vec<_>, _>>()?;
    rows.into_iter()
        .map(|row| match row {
            Some(row) => Ok(Some(view.set_members(row.id)?)),
            None => Ok(None),
        })
        .collect()
}

/// The result of `op` over the loaded sets, in member order.
fn compute(op: Op, sets: Vec<Option<Vec<Vec<u8>>>>) -> Vec<Vec<u8>> {
    use std::collections::BTreeSet;
    let mut sets = sets.into_iter();
    match op {
        Op::Inter => {
            let all: Option<Vec<Vec<Vec<u8>>>> = sets.collect();
            let Some(mut all) = all else {
                return Vec::new();
            };
            all.sort_by_key(Vec::len);
            let mut it = all.into_iter();
            let Some(first) = it.next() else {
                return Vec::new();
            };
            let rest: Vec<BTreeSet<Vec<u8>>> = it.map(|s| s.into_iter().collect()).collect();
            first
                .into_iter()
                .filter(|m| rest.iter().all(|s| s.contains(m)))
                .collect()
        }
        Op::Union => {
            let all: BTreeSet<Vec<u8>> = sets.flatten().flatten().collect();
            all.into_iter().collect()
        }
        Op::Diff => {
            let first: BTreeSet<Vec<u8>> = sets
                .next()
                .flatten()
                .unwrap_or_default()
                .into_iter()
                .collect();
            let mut result = first;
            for s in sets.flatten() {
                for m in s {
                    result.remove(&m);
                }
            }
            result.into_iter().collect()
        }
    }
}

/// `SINTER key [key ...]` (`OP` 0), `SUNION key [key ...]` (1),
/// `SDIFF key [key ...]` (2).
pub struct SetAlgebra<const OP: u8> {
    /// Selected database.
    db: u32,
    /// The keys.
    keys: Vec<Bytes>,
}

/// `SINTER key [key ...]`
pub type SInter = SetAlgebra<0>;
/// `SUNION key [key ...]`
pub type SUnion = SetAlgebra<1>;
/// `SDIFF key [key ...]`
pub type SDiff = SetAlgebra<2>;

fn op_of(code: u8) -> Op {
    match code {
        0 => Op::Inter,
        1 => Op::Union,
        _ => Op::Diff,
    }
}

impl<const OP: u8> ReadCommand for SetAlgebra<OP> {
    const MULTI_STATEMENT: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(SetAlgebra {
            db: s.db,
            keys: args.rest(),
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let sets = load(view, self.db, &self.keys)?;
        Ok(Reply::Set(bulks(compute(op_of(OP), sets))))
    }
}

/// `SINTERSTORE destination key [key ...]` and the SUNION and SDIFF forms:
/// replaces the destination with the result (deleting it when the result
/// is empty) and replies with its size.
pub struct SetAlgebraStore<const OP: u8> {
    /// Selected database.
    db: u32,
    /// The destination key.
    dest: Bytes,
    /// The source keys.
    keys: Vec<Bytes>,
}

/// `SINTERSTORE destination key [key ...]`
pub type SInterStore = SetAlgebraStore<0>;
/// `SUNIONSTORE destination key [key ...]`
pub type SUnionStore = SetAlgebraStore<1>;
/// `SDIFFSTORE destination key [key ...]`
pub type SDiffStore = SetAlgebraStore<2>;

impl<const OP: u8> WriteCommand for SetAlgebraStore<OP> {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(SetAlgebraStore {
            db: s.db,
            dest: args.next()?,
            keys: args.rest(),
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let sets = load(txn, self.db, &self.keys)?;
        let result = compute(op_of(OP), sets);
        Ok(Reply::Int(txn.set_store(self.db, &self.dest, &result)?))
    }
}

/// `SINTERCARD numkeys key [key ...] [LIMIT limit]`
pub struct SInterCard {
    /// Selected database.
    db: u32,
    /// The keys.
    keys: Vec<Bytes>,
    /// Stop counting here (0: no limit).
    limit: u64,
}

impl ReadCommand for SInterCard {
    const MULTI_STATEMENT: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let numkeys_error = || CommandError::Other("numkeys should be greater than 0".into());
        let numkeys = parse_i64(&args.next()?).ok_or_else(numkeys_error)?;
        if numkeys < 1 {
            return Err(numkeys_error());
        }
        if numkeys as u64 > args.remaining() as u64 {
            return Err(CommandError::Other(
                "Number of keys can't be greater than number of args".into(),
            ));
        }
        let keys: Vec<Bytes> = (0..numkeys)
            .map(|_| args.next())
            .collect::<Result<_, _>>()?;
        let mut limit = 0;
        while let Some(opt) = args.next_opt() {
            if upper(&opt) == "LIMIT" && args.remaining() > 0 {
                let negative = || CommandError::Other("LIMIT can't be negative".into());
                let n = parse_i64(&args.next()?).ok_or_else(negative)?;
                if n < 0 {
                    return Err(negative());
                }
                limit = n as u64;
            } else {
                return Err(CommandError::Syntax);
            }
        }
        Ok(SInterCard {
            db: s.db,
            keys,
            limit,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let sets = load(view, self.db, &self.keys)?;
        let n = compute(Op::Inter, sets).len() as u64;
        let n = if self.limit > 0 { n.min(self.limit) } else { n };
        Ok(Reply::Int(n as i64))
    }
}

/// `SSCAN key cursor [MATCH pattern] [COUNT count]`
///
/// A set redis-server would keep as an intset comes back whole with cursor
/// 0, as redis-server answers; a bigger one a page at a time. The cursor is
/// a position in member order (see `respite_engine::keyspace`): any number
/// is accepted and nothing is kept between calls.
pub struct SScan {
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

impl ReadCommand for SScan {
    const MULTI_STATEMENT: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let key = args.next()?;
        let cursor = parse_cursor(&args.next()?)?;
        Ok(SScan {
            db: s.db,
            key,
            cursor,
            options: ScanOptions::parse(args, false),
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let Some(row) = set(view, self.db, &self.key)? else {
            return Ok(scan_reply(0, Vec::new()));
        };
        let options = self.options?;
        let (members, cursor) = view.set_scan(&row, self.cursor, options.count)?;
        let out = members
            .into_iter()
            .filter(|m| options.matches(m))
            .map(Reply::bulk)
            .collect();
        Ok(scan_reply(cursor, out))
    }
}

/// This family's rows of the command table (see [`crate::command::TABLE`]).
#[rustfmt::skip]
pub(crate) fn commands() -> Vec<crate::command::Spec> {
    use crate::command::Spec;
    vec![
        Spec::write::<SAdd>("sadd"),
        Spec::read::<SCard>("scard"),
        Spec::read::<SDiff>("sdiff"),
        Spec::write::<SDiffStore>("sdiffstore"),
        Spec::read::<SInter>("sinter"),
        Spec::read::<SInterCard>("sintercard"),
        Spec::write::<SInterStore>("sinterstore"),
        Spec::read::<SIsMember>("sismember"),
        Spec::read::<SMembers>("smembers"),
        Spec::read::<SMIsMember>("smismember"),
        Spec::write::<SMove>("smove"),
        Spec::write::<SPop>("spop"),
        Spec::read::<SRandMember>("srandmember"),
        Spec::write::<SRem>("srem"),
        Spec::read::<SScan>("sscan"),
        Spec::read::<SUnion>("sunion"),
        Spec::write::<SUnionStore>("sunionstore"),
    ]
}

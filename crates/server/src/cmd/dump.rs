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
//! [`read_value`] and [`write_value`] are the two halves any whole-value
//! move uses (MIGRATE, an RDB import).

use bytes::Bytes;
use respite_engine::list::End;
use respite_engine::stream::{Consumer, Group, Nack, StreamId};
use respite_engine::zset::AddFlags;
use respite_engine::{Kind, Txn, View};
use respite_rdb::{
    Stream, StreamConsumer, StreamEntry, StreamGroup, StreamNack, Value as RdbValue,
};

use crate::args::{parse_i64, Args};
use crate::command::{Ctx, ReadCommand, WriteCommand};
use crate::error::CommandError;
use crate::reply::Reply;

/// redis's `shared.busykeyerr`.
pub const BUSYKEY: &str = "BUSYKEY Target key name already exists.";

fn sid(id: StreamId) -> respite_rdb::StreamId {
    (id.ms, id.seq)
}

fn eid(id: respite_rdb::StreamId) -> StreamId {
    StreamId::new(id.0, id.1)
}

/// The live key's whole value and its expiry (Unix ms), or `None`.
pub fn read_value(
    view: &View<'_, '_>,
    db: u32,
    key: &[u8],
) -> Result<Option<(RdbValue, Option<i64>)>, CommandError> {
    // One lookup noted (a keyspace hit or miss), as redis's DUMP makes.
    let Some(entry) = view.entry(db, key)? else {
        return Ok(None);
    };
    if entry.kind == Kind::String {
        return Ok(view
            .peek_string(db, key)?
            .map(|v| (RdbValue::String(v), entry.expire_at)));
    }
    let Some(row) = view.live_row(db, key, entry.kind, false)? else {
        return Ok(None);
    };
    let value = match entry.kind {
        Kind::String => unreachable!("strings are read above"),
        Kind::List => RdbValue::List(view.list_all(row.id)?),
        Kind::Hash => RdbValue::Hash(view.hash_all(row.id)?),
        Kind::Set => RdbValue::Set(view.set_members(row.id)?),
        Kind::ZSet => RdbValue::ZSet(view.zset_all(row.id)?),
        Kind::Stream => {
            let state = view.stream_state(&row)?;
            let entries = view
                .stream_range(row.id, StreamId::MIN, StreamId::MAX, 0, false)?
                .into_iter()
                .map(|(id, fields)| StreamEntry {
                    id: sid(id),
                    fields,
                })
                .collect();
            let mut groups = Vec::new();
            for g in view.stream_groups(row.id)? {
                let pending = view
                    .stream_pending(row.id, &g.name, StreamId::MIN, StreamId::MAX, 0, None)?
                    .into_iter()
                    .map(|n| StreamNack {
                        id: sid(n.id),
                        consumer: n.consumer,
                        delivery_time: n.delivered,
                        delivery_count: n.count.max(0) as u64,
                    })
                    .collect();
                let consumers = view
                    .stream_consumers(row.id, &g.name)?
                    .into_iter()
                    .map(|c| StreamConsumer {
                        name: c.name,
                        seen_time: c.seen,
                    })
                    .collect();
                groups.push(StreamGroup {
                    name: g.name,
                    last_id: sid(g.last_id),
                    entries_read: g.entries_read,
                    pending,
                    consumers,
                });
            }
            RdbValue::Stream(Box::new(Stream {
                entries,
                last_id: sid(state.last_id),
                first_id: sid(state.first_id),
                max_deleted: sid(state.max_deleted),
                entries_added: state.entries_added.max(0) as u64,
                groups,
            }))
        }
    };
    Ok(Some((value, entry.expire_at)))
}

/// Writes `value` under `key` with the expiry `expire_at` (Unix ms),
/// replacing whatever the key held. The value must be one `respite-rdb`
/// decoded (or read by [`read_value`]): no duplicate members, stream IDs
/// in order. The caller runs it inside one writer operation.
pub fn write_value(
    txn: &mut Txn<'_, '_>,
    db: u32,
    key: &[u8],
    value: &RdbValue,
    expire_at: Option<i64>,
) -> Result<(), CommandError> {
    txn.delete(db, key)?;
    match value {
        RdbValue::String(s) => {
            txn.put_string(db, key, s, expire_at)?;
            return Ok(());
        }
        RdbValue::List(items) => {
            let mut slot = txn.open(db, key, Kind::List)?;
            txn.list_push(&mut slot, items, End::Right)?;
        }
        RdbValue::Hash(pairs) => {
            let mut slot = txn.open(db, key, Kind::Hash)?;
            txn.hash_set(&mut slot, pairs, false)?;
        }
        RdbValue::Set(members) => {
            let mut slot = txn.open(db, key, Kind::Set)?;
            txn.set_add(&mut slot, members)?;
        }
        RdbValue::ZSet(pairs) => {
            let items: Vec<(f64, &[u8])> = pairs.iter().map(|(m, s)| (*s, m.as_slice())).collect();
            let mut slot = txn.open(db, key, Kind::ZSet)?;
            txn.zset_add(&mut slot, &items, AddFlags::default())?;
        }
        RdbValue::Stream(s) => {
            write_stream(txn, db, key, s)?;
        }
        _ => return Err(CommandError::Other("Bad data format".into())),
    }
    if expire_at.is_some() {
        txn.set_expire(db, key, expire_at)?;
    }
    Ok(())
}

fn write_stream(
    txn: &mut Txn<'_, '_>,
    db: u32,
    key: &[u8],
    s: &Stream,
) -> Result<(), CommandError> {
    let mut slot = txn.open(db, key, Kind::Stream)?;
    txn.stream_create(&mut slot)?;
    let row = slot
        .row()
        .ok_or_else(|| CommandError::Other("stream not created".into()))?;
    let mut state = txn.stream_state(&row)?;
    let limits = txn.stream_node_limits();
    for e in &s.entries {
        let fields: Vec<(&[u8], &[u8])> = e
            .fields
            .iter()
            .map(|(f, v)| (f.as_slice(), v.as_slice()))
            .collect();
        txn.stream_append(&mut slot, &mut state, eid(e.id), &fields, limits)?;
    }
    state.last_id = eid(s.last_id);
    state.max_deleted = eid(s.max_deleted);
    state.entries_added = i64::try_from(s.entries_added).unwrap_or(i64::MAX);
    txn.stream_set_state(&mut slot, &state)?;
    for g in &s.groups {
        txn.stream_put_group(
            &mut slot,
            &Group {
                name: g.name.clone(),
                last_id: eid(g.last_id),
                entries_read: g.entries_read,
            },
        )?;
        for c in &g.consumers {
            txn.stream_put_consumer(
                &mut slot,
                &g.name,
                &Consumer {
                    name: c.name.clone(),
                    seen: c.seen_time,
                    pending: 0,
                },
            )?;
        }
        for n in &g.pending {
            txn.stream_put_nack(
                &mut slot,
                &g.name,
                &Nack {
                    id: eid(n.id),
                    consumer: n.consumer.clone(),
                    delivered: n.delivery_time,
                    count: i64::try_from(n.delivery_count).unwrap_or(i64::MAX),
                },
            )?;
        }
    }
    Ok(())
}

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

//! A key's whole value as `respite-rdb`'s [`Value`](RdbValue): read from a
//! reader's view in one snapshot ([`read_value`]: DUMP, MIGRATE, and the
//! state replication sends for a changed key) and written into the
//! writer's transaction in one operation ([`write_value`]: RESTORE and an
//! RDB import). It knows the engine and the format, and nothing of
//! commands or connections, so every whole-value move shares it.

use respite_engine::list::End;
use respite_engine::stream::{Consumer, Group, Nack, StreamId};
use respite_engine::zset::AddFlags;
use respite_engine::{Kind, Txn, View};
use respite_rdb::{
    Stream, StreamConsumer, StreamEntry, StreamGroup, StreamNack, Value as RdbValue,
};

use crate::error::CommandError;

fn sid(id: StreamId) -> respite_rdb::StreamId {
    (id.ms, id.seq)
}

pub(crate) fn eid(id: respite_rdb::StreamId) -> StreamId {
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

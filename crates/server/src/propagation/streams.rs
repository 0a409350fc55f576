//! What the consumer-group commands send: redis 7.0's `XCLAIM ... FORCE
//! JUSTID LASTID`, `XGROUP SETID ... ENTRIESREAD` and `XGROUP
//! CREATECONSUMER` (`streamPropagateXCLAIM`, `streamPropagateGroupID`,
//! `streamPropagateConsumerCreation` in t_stream.c), never the command
//! itself, whose result depends on the time and on the group's state.
//!
//! Each pending entry a command delivered or claimed goes as
//!
//! ```text
//! XCLAIM key group consumer 0 id TIME ms RETRYCOUNT n FORCE JUSTID LASTID group-last-id
//! ```
//!
//! with the entry's consumer, delivery time and count as the command left
//! them, read in the transaction right after it ran; an entry a claim
//! found deleted goes the same way with the values it had before (the
//! replica's XCLAIM of a missing entry drops it from the pending list),
//! which [`before`] reads before the command runs. XREADGROUP with NOACK
//! moves the group's last ID without a pending entry: that goes as `XGROUP
//! SETID`, preceded by `XGROUP CREATECONSUMER` if it created the consumer.
//! A read of a consumer's history is not sent at all, as in redis.

use bytes::Bytes;
use respite_engine::stream::{Nack, StreamId};
use respite_engine::{Kind, View};

use crate::reply::Reply;
use crate::stream_id::{start_id, strict_id};

/// What a consumer-group command's propagation needs from before it ran.
#[derive(Default)]
pub(crate) struct Before {
    /// The pending entries it may drop (a claim of a deleted entry).
    nacks: Vec<Nack>,
    /// The group's last ID (XCLAIM's LASTID may move it).
    last_id: Option<StreamId>,
    /// XREADGROUP: whether each stream's group already had the consumer.
    consumers: Vec<bool>,
}

fn b(s: &'static str) -> Bytes {
    Bytes::from_static(s.as_bytes())
}

fn text(n: impl ToString) -> Bytes {
    Bytes::from(n.to_string())
}

/// Reads what [`xclaim`], [`xautoclaim`] and [`xreadgroup`] will need,
/// before the command `name` runs; nothing for any other command.
pub(crate) fn before(view: &View<'_, '_>, name: &str, db: u32, request: &[Bytes]) -> Before {
    let mut out = Before::default();
    let row = |key: &[u8]| view.live(db, key, Kind::Stream).ok().flatten();
    match name {
        "xclaim" | "xautoclaim" => {
            let (Some(key), Some(group)) = (request.get(1), request.get(2)) else {
                return out;
            };
            let Some(row) = row(key) else { return out };
            out.last_id = view
                .stream_group(row.id, group)
                .ok()
                .flatten()
                .map(|g| g.last_id);
            if name == "xclaim" {
                for arg in request.iter().skip(5) {
                    let Ok(id) = strict_id(arg) else { break };
                    if let Ok(Some(nack)) = view.stream_nack(row.id, group, id) {
                        out.nacks.push(nack);
                    }
                }
            } else {
                // The entries XAUTOCLAIM may visit: COUNT times redis's
                // attempts factor (10) from its start.
                let start = request.get(5).and_then(|a| start_id(a).ok());
                let count = option_value(request, 6, "COUNT").unwrap_or(100);
                if let Some(start) = start {
                    let limit = usize::try_from(count.saturating_mul(10)).unwrap_or(usize::MAX);
                    out.nacks = view
                        .stream_pending(row.id, group, start, StreamId::MAX, limit, None)
                        .unwrap_or_default();
                }
            }
        }
        "xreadgroup" => {
            let Some(read) = ReadGroup::of(request) else {
                return out;
            };
            if read.noack {
                out.consumers = read
                    .keys
                    .iter()
                    .map(|key| {
                        row(key).is_some_and(|r| {
                            view.stream_consumer_exists(r.id, read.group, read.consumer)
                                .unwrap_or(false)
                        })
                    })
                    .collect();
            }
        }
        _ => {}
    }
    out
}

/// The numeric value after the option `name` among `request[from..]`.
fn option_value(request: &[Bytes], from: usize, name: &str) -> Option<i64> {
    let at = request
        .iter()
        .skip(from)
        .position(|a| a.eq_ignore_ascii_case(name.as_bytes()))?;
    std::str::from_utf8(request.get(from + at + 1)?)
        .ok()?
        .parse()
        .ok()
}

/// `XCLAIM key group consumer 0 id TIME ms RETRYCOUNT n FORCE JUSTID
/// LASTID last`, as `streamPropagateXCLAIM` builds it.
fn xclaim_of(key: &Bytes, group: &Bytes, id: Bytes, nack: &Nack, last: StreamId) -> Vec<Bytes> {
    vec![
        b("XCLAIM"),
        key.clone(),
        group.clone(),
        Bytes::copy_from_slice(&nack.consumer),
        b("0"),
        id,
        b("TIME"),
        text(nack.delivered),
        b("RETRYCOUNT"),
        text(nack.count),
        b("FORCE"),
        b("JUSTID"),
        b("LASTID"),
        text(last),
    ]
}

/// `XGROUP SETID key group last ENTRIESREAD n` for the group as it is now.
fn setid_of(view: &View<'_, '_>, id: i64, key: &Bytes, group: &Bytes) -> Option<Vec<Bytes>> {
    let g = view.stream_group(id, group).ok()??;
    Some(vec![
        b("XGROUP"),
        b("SETID"),
        key.clone(),
        group.clone(),
        text(g.last_id),
        b("ENTRIESREAD"),
        text(g.entries_read),
    ])
}

/// The ID of an entry of a reply: `id` (JUSTID) or `[id, fields]`.
fn entry_id(item: &Reply) -> Option<StreamId> {
    let id = match item {
        Reply::Bulk(id) => id,
        Reply::Array(pair) => match pair.first()? {
            Reply::Bulk(id) => id,
            _ => return None,
        },
        _ => return None,
    };
    strict_id(id).ok()
}

fn entry_ids(reply: Option<&Reply>) -> Vec<StreamId> {
    match reply {
        Some(Reply::Array(items)) => items.iter().filter_map(entry_id).collect(),
        _ => Vec::new(),
    }
}

/// `XCLAIM key group consumer min-idle-time id [id ...] [options]`: an
/// XCLAIM per entry claimed or found deleted, in the order given (each ID
/// as the client wrote it); with none, `XGROUP SETID` if LASTID moved the
/// group on.
pub(crate) fn xclaim(
    request: &[Bytes],
    reply: &Reply,
    view: &View<'_, '_>,
    db: u32,
    before: &Before,
) -> Option<Vec<Vec<Bytes>>> {
    let (key, group) = (request.get(1)?, request.get(2)?);
    let row = view.live(db, key, Kind::Stream).ok()??;
    let last = view.stream_group(row.id, group).ok()??.last_id;
    let claimed = entry_ids(Some(reply));
    let mut next = claimed.iter().peekable();
    let mut dropped: Vec<&Nack> = before.nacks.iter().collect();
    let mut out = Vec::new();
    for arg in request.iter().skip(5) {
        let Ok(id) = strict_id(arg) else { break };
        if next.peek() == Some(&&id) {
            next.next();
            let nack = view.stream_nack(row.id, group, id).ok()??;
            out.push(xclaim_of(key, group, arg.clone(), &nack, last));
        } else if view.stream_entry(row.id, id).ok()?.is_none() {
            if let Some(at) = dropped.iter().position(|n| n.id == id) {
                let nack = dropped.remove(at);
                out.push(xclaim_of(key, group, arg.clone(), nack, last));
            }
        }
    }
    if out.is_empty() && before.last_id.is_some_and(|was| last > was) {
        out.extend(setid_of(view, row.id, key, group));
    }
    Some(out)
}

/// `XAUTOCLAIM key group consumer min-idle-time start [COUNT n] [JUSTID]`:
/// an XCLAIM per entry claimed and per deleted entry it dropped, in the
/// order it met them (the pending list's).
pub(crate) fn xautoclaim(
    request: &[Bytes],
    reply: &Reply,
    view: &View<'_, '_>,
    db: u32,
    before: &Before,
) -> Option<Vec<Vec<Bytes>>> {
    let (key, group) = (request.get(1)?, request.get(2)?);
    let Reply::Array(parts) = reply else {
        return None;
    };
    let row = view.live(db, key, Kind::Stream).ok()??;
    let last = view.stream_group(row.id, group).ok()??.last_id;
    let mut met: Vec<(StreamId, bool)> = entry_ids(parts.get(1))
        .into_iter()
        .map(|id| (id, true))
        .chain(entry_ids(parts.get(2)).into_iter().map(|id| (id, false)))
        .collect();
    met.sort_by_key(|(id, _)| *id);
    let mut out = Vec::with_capacity(met.len());
    for (id, claimed) in met {
        let nack = if claimed {
            view.stream_nack(row.id, group, id).ok()??
        } else {
            before.nacks.iter().find(|n| n.id == id)?.clone()
        };
        out.push(xclaim_of(key, group, text(id), &nack, last));
    }
    Some(out)
}

/// XREADGROUP's arguments, as propagation reads them.
struct ReadGroup<'r> {
    group: &'r Bytes,
    consumer: &'r Bytes,
    noack: bool,
    keys: &'r [Bytes],
    ids: &'r [Bytes],
}

impl<'r> ReadGroup<'r> {
    /// `XREADGROUP GROUP group consumer [COUNT n] [BLOCK ms] [NOACK]
    /// STREAMS key [key ...] id [id ...]`, already checked by its parse.
    fn of(request: &'r [Bytes]) -> Option<ReadGroup<'r>> {
        let (group, consumer) = (request.get(2)?, request.get(3)?);
        let mut noack = false;
        let mut i = 4;
        loop {
            let a = request.get(i)?;
            if a.eq_ignore_ascii_case(b"STREAMS") {
                break;
            }
            if a.eq_ignore_ascii_case(b"NOACK") {
                noack = true;
                i += 1;
            } else {
                i += 2;
            }
        }
        let rest = &request[i + 1..];
        let (keys, ids) = rest.split_at(rest.len() / 2);
        Some(ReadGroup {
            group,
            consumer,
            noack,
            keys,
            ids,
        })
    }
}

/// The entries XREADGROUP served from `key`, from its reply (an array of
/// `[key, entries]`, or a RESP3 map).
fn served<'r>(reply: &'r Reply, key: &[u8]) -> Option<&'r Reply> {
    match reply {
        Reply::Array(items) => items.iter().find_map(|item| match item {
            Reply::Array(pair) if matches!(pair.first(), Some(Reply::Bulk(k)) if k.as_ref() == key) => {
                pair.get(1)
            }
            _ => None,
        }),
        Reply::Map(pairs) => pairs.iter().find_map(|(k, v)| match k {
            Reply::Bulk(k) if k.as_ref() == key => Some(v),
            _ => None,
        }),
        _ => None,
    }
}

/// `XREADGROUP`: for each stream it served new entries from (`>`), an
/// XCLAIM per entry delivered (its LASTID the entry's own ID, the group's
/// last ID as each delivery left it), or with NOACK the consumer's
/// creation and the group's new last ID; nothing for a history read.
pub(crate) fn xreadgroup(
    request: &[Bytes],
    reply: &Reply,
    view: &View<'_, '_>,
    db: u32,
    before: &Before,
) -> Option<Vec<Vec<Bytes>>> {
    let read = ReadGroup::of(request)?;
    let mut out = Vec::new();
    for (i, (key, from)) in read.keys.iter().zip(read.ids).enumerate() {
        let Some(entries) = served(reply, key) else {
            continue;
        };
        let Some(row) = view.live(db, key, Kind::Stream).ok()? else {
            continue;
        };
        if read.noack
            && !before.consumers.get(i).copied().unwrap_or(true)
            && view
                .stream_consumer_exists(row.id, read.group, read.consumer)
                .ok()?
        {
            out.push(vec![
                b("XGROUP"),
                b("CREATECONSUMER"),
                key.clone(),
                read.group.clone(),
                read.consumer.clone(),
            ]);
        }
        if from.as_ref() != b">" {
            continue;
        }
        let ids = entry_ids(Some(entries));
        if read.noack {
            if !ids.is_empty() {
                out.extend(setid_of(view, row.id, key, read.group));
            }
            continue;
        }
        for id in ids {
            let nack = view.stream_nack(row.id, read.group, id).ok()??;
            out.push(xclaim_of(key, read.group, text(id), &nack, id));
        }
    }
    Some(out)
}

//! What a write command sends to the replicas: the command itself where
//! replaying it gives the same result, redis 7.0's rewrite of it where it
//! would not, and the new state of the keys it changed where neither is
//! known to be safe.
//!
//! Redis propagates a write command after it ran, as its client sent it,
//! unless the command rewrote itself (`rewriteClientCommandVector`,
//! `alsoPropagate`): a relative expiry becomes an absolute one, a random
//! pop the removal of what it popped, a float increment the value it
//! produced. A replica that applies the stream then ends exactly where the
//! master is, because it starts from the same state and runs commands that
//! do not depend on when or where they run. respite does the same through
//! [`note`]: right after a command ran on the writer, while its changes
//! are still in the open transaction, it reads what it needs (the reply,
//! the key's new expiry) and notes on the [`Txn`] the commands that
//! reproduce it, over the keys it changed (see the engine's
//! `propagate.rs`, which hands them on once the group commits). A command
//! that changed nothing notes nothing, so it is not propagated, as in
//! redis.
//!
//! Which commands go as themselves is a list ([`forms`]): the ones whose
//! result depends only on the data and their arguments. The rewrites are
//! redis 7.0's:
//!
//! | command | sent as |
//! |---|---|
//! | SET with EX, PX, EXAT or PXAT; SETEX, PSETEX | `SET key value PXAT ms` |
//! | EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT | `PEXPIREAT key ms [flags]`, or `DEL key` if that time has passed |
//! | GETEX | `PEXPIREAT key ms`, `PERSIST key` or `DEL key` |
//! | GETDEL | `DEL key` |
//! | GETSET | `SET key value` |
//! | INCRBYFLOAT | `SET key new-value KEEPTTL` |
//! | HINCRBYFLOAT | `HSET key field new-value` |
//! | RESTORE with a relative TTL | `RESTORE key ms payload ... ABSTTL` |
//! | SPOP | `SREM key member` per member, or `DEL key` if it took them all |
//! | LMPOP, BLMPOP; ZMPOP, BZMPOP | `LPOP`/`RPOP key n`; `ZPOPMIN`/`ZPOPMAX key n` |
//! | BLPOP, BRPOP; BZPOPMIN, BZPOPMAX | `LPOP`/`RPOP key`; `ZPOPMIN`/`ZPOPMAX key` |
//! | BLMOVE, BRPOPLPUSH | `LMOVE ...`, `RPOPLPUSH ...` |
//! | XADD with `*` or `ms-*` | XADD with the ID it chose |
//! | XADD, XTRIM with `MAXLEN ~ n` / `MINID ~ id` | `MAXLEN = <length left>` / `MINID = <first ID left>` |
//! | XREADGROUP, XCLAIM, XAUTOCLAIM | `XCLAIM ... FORCE JUSTID LASTID` per entry; `XGROUP SETID`, `XGROUP CREATECONSUMER` (see `propagation/streams.rs`) |
//! | GEOADD | `zadd key [NX\|XX] [CH] score member ...` |
//! | PUBLISH, SPUBLISH | themselves, though they change no key |
//!
//! Every other write (the GEO STORE forms with ANY, MIGRATE, DEBUG, PFDEBUG)
//! is sent as the state of each key it changed, read inside the
//! transaction right after it ran: `SET key value [PXAT ms]` for a string,
//! `RESTORE key ms payload REPLACE ABSTTL` for another type, `DEL key` for
//! a key that is gone. That is correct for any command, only not small for
//! a big collection.
//!
//! A write that finds its key expired (the sweep has not deleted it yet)
//! treats it as missing; a replica, which never expires keys itself, still
//! holds it, so a `DEL key` goes first, as redis's lookup propagates one.
//!
//! The commands of a MULTI/EXEC and a script's calls are noted one by one
//! (dispatch plans each queued command, `command::call` runs each call),
//! and an operation that sent more than one command reaches the replicas
//! wrapped in MULTI/EXEC (see `repl.rs`); EXEC, EVAL and FCALL themselves
//! are not sent.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use respite_engine::propagate::{Command, StepMark};
use respite_engine::{Txn, View, WriteOp};
use respite_rdb::Value as RdbValue;

use crate::blocking::Blocker;
use crate::error::CommandError;
use crate::reply::Reply;

mod streams;

pub(crate) use streams::Before;

/// What the command `name` needs read before it runs for its propagation
/// to be written after it (see `streams.rs`): nothing unless replicas are
/// fed.
pub(crate) fn before(txn: &Txn<'_, '_>, name: &str, db: u32, request: &[Bytes]) -> Before {
    if !txn.propagating() {
        return Before::default();
    }
    streams::before(txn, name, db, request)
}

/// `op` (the command `name`, sent as `request`, name first, in database
/// `db`), noting what it did once it ran.
pub(crate) fn noting_op(
    op: WriteOp<Reply>,
    name: &'static str,
    db: u32,
    request: Vec<Bytes>,
) -> WriteOp<Reply> {
    Box::new(move |txn| {
        let mark = txn.step_mark();
        let before = before(txn, name, db, &request);
        let result = op(txn);
        if let Ok(reply) = &result {
            note(txn, mark, db, name, &request, reply, &before);
        }
        result
    })
}

/// A blocking command that notes what each of its pops did (its first
/// try, a serve once a key is pushed to, its one try inside EXEC).
pub(crate) fn noting_blocker(
    blocker: Arc<dyn Blocker>,
    name: &'static str,
    db: u32,
    request: Vec<Bytes>,
) -> Arc<dyn Blocker> {
    Arc::new(Noting {
        inner: blocker,
        name,
        db,
        request,
    })
}

struct Noting {
    inner: Arc<dyn Blocker>,
    name: &'static str,
    db: u32,
    request: Vec<Bytes>,
}

impl Blocker for Noting {
    fn keys(&self) -> Vec<(u32, Bytes)> {
        self.inner.keys()
    }

    fn timeout(&self) -> Option<Duration> {
        self.inner.timeout()
    }

    fn try_pop(
        &self,
        txn: &mut Txn<'_, '_>,
        ready: Option<(u32, &[u8])>,
    ) -> Result<Option<Reply>, CommandError> {
        let mark = txn.step_mark();
        let before = before(txn, self.name, self.db, &self.request);
        let result = self.inner.try_pop(txn, ready);
        if let Ok(Some(reply)) = &result {
            note(txn, mark, self.db, self.name, &self.request, reply, &before);
        }
        result
    }

    fn timeout_reply(&self) -> Reply {
        self.inner.timeout_reply()
    }

    fn empty_reply(&self) -> Reply {
        self.inner.empty_reply()
    }
}

/// Notes on `txn` the commands that reproduce what the command `name`
/// (sent as `request`, name first, in database `db`) did since `mark`,
/// with `reply` its reply and `before` what [`before`] read before it
/// ran (see the module docs). Nothing when replicas are not fed or it
/// changed nothing (but PUBLISH and SPUBLISH, which change no key and are
/// sent all the same, as redis forces their propagation).
pub(crate) fn note(
    txn: &mut Txn<'_, '_>,
    mark: StepMark,
    db: u32,
    name: &str,
    request: &[Bytes],
    reply: &Reply,
    before: &Before,
) {
    let always = matches!(name, "publish" | "spublish");
    if !txn.propagating() || !(always || txn.changed_since(mark)) {
        return;
    }
    let mut commands: Vec<Command> = txn
        .expired_since(mark)
        .iter()
        .map(|(db, key)| Command {
            db: Some(*db),
            args: vec![Bytes::from_static(b"DEL"), key.clone()],
        })
        .collect();
    match forms(name, request, reply, txn, db, before) {
        Some(list) => commands.extend(list.into_iter().map(|args| Command { db: Some(db), args })),
        None => {
            let mut seen = HashSet::new();
            let keys = txn.keys_since(mark).to_vec();
            for (db, key) in keys {
                if seen.insert((db, key.clone())) {
                    commands.extend(key_state(txn, db, &key));
                }
            }
        }
    }
    txn.note_step(mark, commands);
}

fn b(s: &'static str) -> Bytes {
    Bytes::from_static(s.as_bytes())
}

fn num(n: i64) -> Bytes {
    Bytes::from(n.to_string())
}

/// The key's absolute expiry, if it is live and has one; `Err(())` if it
/// is gone.
fn expiry(view: &View<'_, '_>, db: u32, key: &[u8]) -> Result<Option<i64>, ()> {
    match view.peek_entry(db, key) {
        Ok(Some(entry)) => Ok(entry.expire_at),
        _ => Err(()),
    }
}

fn is_one_of(arg: &[u8], options: &[&str]) -> bool {
    options
        .iter()
        .any(|o| arg.eq_ignore_ascii_case(o.as_bytes()))
}

/// `SET key value PXAT ms` for the string just written with an expiry,
/// or `DEL key` if it is already gone; `None` if it has no expiry.
fn set_pxat(view: &View<'_, '_>, db: u32, key: &Bytes, value: &Bytes) -> Option<Vec<Vec<Bytes>>> {
    Some(vec![match expiry(view, db, key) {
        Ok(Some(at)) => vec![b("SET"), key.clone(), value.clone(), b("PXAT"), num(at)],
        Ok(None) => return None,
        Err(()) => vec![b("DEL"), key.clone()],
    }])
}

/// The elements of a reply that lists them (an array, or a RESP3 set).
fn items(reply: &Reply) -> Option<&[Reply]> {
    match reply {
        Reply::Array(a) | Reply::Set(a) => Some(a),
        _ => None,
    }
}

fn bulk(reply: &Reply) -> Option<Bytes> {
    match reply {
        Reply::Bulk(b) => Some(b.clone()),
        _ => None,
    }
}

/// An xMPOP's reply, `[key, [popped...]]`: the key and how many.
fn mpop_reply(reply: &Reply) -> Option<(Bytes, i64)> {
    let pair = items(reply)?;
    let key = bulk(pair.first()?)?;
    let popped = match pair.get(1)? {
        Reply::Array(a) | Reply::Set(a) => a.len(),
        Reply::Map(m) => m.len(),
        _ => return None,
    };
    Some((key, popped as i64))
}

/// The direction argument of an xMPOP whose `numkeys` is at `at`.
fn mpop_direction(request: &[Bytes], at: usize) -> Option<&Bytes> {
    let n: usize = std::str::from_utf8(request.get(at)?).ok()?.parse().ok()?;
    request.get(at + 1 + n)
}

/// The commands that reproduce the command, or `None` where its keys'
/// state must be sent (see the module docs).
fn forms(
    name: &str,
    request: &[Bytes],
    reply: &Reply,
    view: &View<'_, '_>,
    db: u32,
    before: &Before,
) -> Option<Vec<Vec<Bytes>>> {
    let arg = |i: usize| request.get(i).cloned().unwrap_or_default();
    let key = arg(1);
    let verbatim = Some(vec![request.to_vec()]);
    match name {
        // The result depends only on the data and the arguments.
        "append" | "decr" | "decrby" | "incr" | "incrby" | "mset" | "msetnx" | "setnx"
        | "setrange" | "setbit" | "bitfield" | "bitop" | "del" | "unlink" | "persist"
        | "rename" | "renamenx" | "copy" | "move" | "flushdb" | "flushall" | "swapdb" | "hset"
        | "hmset" | "hsetnx" | "hdel" | "hincrby" | "lpush" | "rpush" | "lpushx" | "rpushx"
        | "linsert" | "lset" | "lrem" | "ltrim" | "lpop" | "rpop" | "lmove" | "rpoplpush"
        | "sadd" | "srem" | "smove" | "sinterstore" | "sunionstore" | "sdiffstore" | "zadd"
        | "zincrby" | "zrem" | "zremrangebyscore" | "zremrangebyrank" | "zremrangebylex"
        | "zunionstore" | "zinterstore" | "zdiffstore" | "zrangestore" | "zpopmin" | "zpopmax"
        | "xdel" | "xack" | "xsetid" | "pfadd" | "pfmerge" | "pfcount" | "sort" | "publish"
        | "spublish" => verbatim,
        // The members found with ANY depend on the order the search
        // visits them, which is respite's own.
        "georadius" | "georadiusbymember" | "geosearchstore" => {
            (!request.iter().skip(2).any(|a| is_one_of(a, &["ANY"])))
                .then(|| vec![request.to_vec()])
        }
        "xgroup" => {
            let sub = request.get(1)?;
            is_one_of(
                sub,
                &[
                    "create",
                    "setid",
                    "destroy",
                    "createconsumer",
                    "delconsumer",
                ],
            )
            .then(|| vec![request.to_vec()])
        }
        "xtrim" => {
            let mut args = request.to_vec();
            exact_trim(&mut args, 2, view, db)?;
            Some(vec![args])
        }
        "xadd" => xadd(request, reply, view, db),
        "geoadd" => geoadd(request),
        "xreadgroup" => streams::xreadgroup(request, reply, view, db, before),
        "xclaim" => streams::xclaim(request, reply, view, db, before),
        "xautoclaim" => streams::xautoclaim(request, reply, view, db, before),
        "function" => {
            let sub = request.get(1)?;
            is_one_of(sub, &["load", "delete", "flush", "restore"]).then(|| vec![request.to_vec()])
        }
        "set" => {
            let timed = request
                .iter()
                .skip(3)
                .any(|a| is_one_of(a, &["EX", "PX", "EXAT", "PXAT"]));
            if timed {
                set_pxat(view, db, &key, &arg(2))
            } else {
                verbatim
            }
        }
        "setex" | "psetex" => set_pxat(view, db, &key, &arg(3)),
        "getex" => {
            if request.iter().skip(2).any(|a| is_one_of(a, &["PERSIST"])) {
                return Some(vec![vec![b("PERSIST"), key]]);
            }
            Some(vec![match expiry(view, db, &key) {
                Ok(Some(at)) => vec![b("PEXPIREAT"), key, num(at)],
                Ok(None) => return None,
                Err(()) => vec![b("DEL"), key],
            }])
        }
        "getdel" => Some(vec![vec![b("DEL"), key]]),
        "getset" => Some(vec![vec![b("SET"), key, arg(2)]]),
        "incrbyfloat" => Some(vec![vec![b("SET"), key, bulk(reply)?, b("KEEPTTL")]]),
        "hincrbyfloat" => Some(vec![vec![b("HSET"), key, arg(2), bulk(reply)?]]),
        "expire" | "pexpire" | "expireat" | "pexpireat" => {
            Some(vec![match expiry(view, db, &key) {
                Ok(Some(at)) => {
                    let mut args = vec![b("PEXPIREAT"), key, num(at)];
                    args.extend(request.iter().skip(3).cloned());
                    args
                }
                Ok(None) => return None,
                Err(()) => vec![b("DEL"), key],
            }])
        }
        "restore" => {
            let absolute = request.iter().skip(4).any(|a| is_one_of(a, &["ABSTTL"]));
            if absolute || arg(2).as_ref() == b"0" {
                return verbatim;
            }
            Some(vec![match expiry(view, db, &key) {
                Ok(Some(at)) => {
                    let mut args = request.to_vec();
                    args[2] = num(at);
                    args.push(b("ABSTTL"));
                    args
                }
                Ok(None) => return None,
                Err(()) => vec![b("DEL"), key],
            }])
        }
        "spop" => {
            if let Some(member) = bulk(reply) {
                return Some(vec![vec![b("SREM"), key, member]]);
            }
            let popped = items(reply)?;
            if expiry(view, db, &key).is_err() {
                return Some(vec![vec![b("DEL"), key]]);
            }
            popped
                .iter()
                .map(|m| Some(vec![b("SREM"), key.clone(), bulk(m)?]))
                .collect()
        }
        "lmpop" | "blmpop" | "zmpop" | "bzmpop" => {
            let at = if name.starts_with('b') { 2 } else { 1 };
            let (key, n) = mpop_reply(reply)?;
            let dir = mpop_direction(request, at)?;
            let pop = match (name.ends_with("zmpop"), is_one_of(dir, &["LEFT", "MIN"])) {
                (false, true) => "LPOP",
                (false, false) => "RPOP",
                (true, true) => "ZPOPMIN",
                (true, false) => "ZPOPMAX",
            };
            Some(vec![vec![b(pop), key, num(n)]])
        }
        "blpop" | "brpop" | "bzpopmin" | "bzpopmax" => {
            let key = bulk(items(reply)?.first()?)?;
            let pop = match name {
                "blpop" => "LPOP",
                "brpop" => "RPOP",
                "bzpopmin" => "ZPOPMIN",
                _ => "ZPOPMAX",
            };
            Some(vec![vec![b(pop), key]])
        }
        "brpoplpush" => Some(vec![vec![b("RPOPLPUSH"), key, arg(2)]]),
        "blmove" => Some(vec![vec![b("LMOVE"), key, arg(2), arg(3), arg(4)]]),
        _ => None,
    }
}

/// GEOADD as the ZADD it is, each point's longitude and latitude replaced
/// by its geohash score, as redis's `geoaddCommand` rewrites it.
fn geoadd(request: &[Bytes]) -> Option<Vec<Vec<Bytes>>> {
    let mut args = vec![b("zadd"), request.get(1)?.clone()];
    let mut i = 2;
    while i < request.len() && is_one_of(&request[i], &["NX", "XX", "CH"]) {
        args.push(request[i].clone());
        i += 1;
    }
    for point in request[i..].chunks_exact(3) {
        // The command took these, so they are numbers in range; a form
        // only C's strtod reads (hexadecimal) sends the key's state.
        let coordinate = |text: &[u8]| -> Option<f64> {
            std::str::from_utf8(crate::error::c_str(text))
                .ok()?
                .parse()
                .ok()
        };
        let (lon, lat) = (coordinate(&point[0])?, coordinate(&point[1])?);
        let score = respite_engine::geo::score_of(lon, lat)?;
        args.push(Bytes::from(score.to_string()));
        args.push(point[2].clone());
    }
    Some(vec![args])
}

/// XADD with the ID it chose in place of `*` (or `ms-*`), as redis sends
/// it, its approximate trim made exact ([`exact_trim`]).
fn xadd(request: &[Bytes], reply: &Reply, view: &View<'_, '_>, db: u32) -> Option<Vec<Vec<Bytes>>> {
    let mut args = request.to_vec();
    let mut i = 2;
    while i < args.len() {
        let a = &args[i];
        if is_one_of(a, &["NOMKSTREAM"]) {
            i += 1;
        } else if is_one_of(a, &["MAXLEN", "MINID"]) {
            let next = args.get(i + 1)?.clone();
            exact_trim(&mut args, i, view, db)?;
            i += if matches!(next.as_ref(), b"=" | b"~") {
                3
            } else {
                2
            };
        } else if is_one_of(a, &["LIMIT"]) {
            i += 2;
        } else {
            break;
        }
    }
    let id = args.get_mut(i)?;
    if id.ends_with(b"*") {
        *id = bulk(reply)?;
    }
    Some(vec![args])
}

/// redis's `streamRewriteApproxSpecifier` and `streamRewriteTrimArgument`:
/// `MAXLEN ~ n` (or `MINID ~ id`) at `at` becomes `MAXLEN = <length now>`
/// (`MINID = <first ID now>`), so the replica trims to exactly where this
/// trim, whose reach depends on how the entries are stored, stopped. A
/// LIMIT stays; a replica ignores it in its master's stream. `None` if the
/// stream cannot be read.
fn exact_trim(args: &mut [Bytes], at: usize, view: &View<'_, '_>, db: u32) -> Option<()> {
    if args.get(at + 1).map(|a| a.as_ref()) != Some(b"~") {
        return Some(());
    }
    let key = args.get(1)?.clone();
    let (length, first) = match view.live(db, &key, respite_engine::Kind::Stream).ok()? {
        Some(row) => {
            let state = view.stream_state(&row).ok()?;
            (state.length, state.first_id)
        }
        None => (0, respite_engine::stream::StreamId::MIN),
    };
    let value = if is_one_of(&args[at], &["MAXLEN"]) {
        num(length)
    } else if length == 0 {
        // redis's `streamGetEdgeID` of an empty stream.
        Bytes::from(respite_engine::stream::StreamId::MAX.to_string())
    } else {
        Bytes::from(first.to_string())
    };
    args[at + 1] = b("=");
    *args.get_mut(at + 2)? = value;
    Some(())
}

/// The command that gives `key` its state in `view` (see the module
/// docs); `None` if it cannot be read.
pub(crate) fn key_state(view: &View<'_, '_>, db: u32, key: &Bytes) -> Option<Command> {
    let state = match crate::value::read_value(view, db, key) {
        Ok(state) => state,
        Err(e) => {
            tracing::error!(error = %e, "replication could not read a changed key");
            return None;
        }
    };
    let args = match state {
        None => vec![Bytes::from_static(b"DEL"), key.clone()],
        Some((RdbValue::String(value), expire_at)) => {
            let mut args = vec![Bytes::from_static(b"SET"), key.clone(), Bytes::from(value)];
            if let Some(at) = expire_at {
                args.push(Bytes::from_static(b"PXAT"));
                args.push(Bytes::from(at.to_string()));
            }
            args
        }
        Some((value, expire_at)) => vec![
            Bytes::from_static(b"RESTORE"),
            key.clone(),
            Bytes::from(expire_at.unwrap_or(0).to_string()),
            Bytes::from(respite_rdb::encode_dump(&value)),
            Bytes::from_static(b"REPLACE"),
            Bytes::from_static(b"ABSTTL"),
        ],
    };
    Some(Command { db: Some(db), args })
}

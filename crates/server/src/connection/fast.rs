//! The fast paths: a plain GET and a plain SET taken straight from the
//! read buffer, without the command table (see `crate::connection`).

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::turn::{Slot, Turn};
use crate::cmd::strings::{Cached, Get};
use crate::command::CachedRead;
use crate::command::{Plan, Session};
use crate::reply::Reply;
use crate::state::Shared;

/// A plain `SET key value` planned without the command table, from the
/// frame's argument ranges (only the key and the value are copied): the
/// other common command of write-heavy pipelines. Anything else, options
/// included, goes the general way.
pub(super) fn fast_set(
    session: &Session,
    input: &[u8],
    len: usize,
    args: &[std::ops::Range<usize>],
) -> Option<Plan> {
    // Large values are shared with the read buffer by the general path
    // rather than copied.
    if len > crate::request::COPY_ARGS_BELOW
        || args.len() != 3
        || !input[args[0].clone()].eq_ignore_ascii_case(b"SET")
        || !session.authenticated
        || !session.acl.fast_allowed(
            &session.shared.acl,
            crate::command::TABLE.set.map(|i| crate::command::TABLE[i].meta),
            &input[args[1].clone()],
            true,
        )
        || session.multi.is_some()
        || !fast_path_open(session)
        // Over maxmemory or maxdisk or on a full disk, with min-replicas-to-write
        // set, or on a replica: the general path refuses it.
        || session.shared.engine.refusal().is_some()
        || session.shared.wants_replicas.load(Ordering::Relaxed)
        || session.shared.upstream.is_replica()
    {
        return None;
    }
    let index = crate::command::TABLE.set?;
    session.client.last_cmd.store(index, Ordering::Relaxed);
    // CLIENT CACHING counts for one command (see `crate::command::dispatch`).
    if session.client.tracking.is_on() {
        session.client.tracking.command_done();
    }
    let monitors = &session.shared.monitors;
    if monitors.active() {
        let [name, key, value] = [0, 1, 2].map(|i| &input[args[i].clone()]);
        monitors.feed(
            session.db(),
            &session.client.state.monitor,
            &[name, key, value],
        );
    }
    let key = Bytes::copy_from_slice(&input[args[1].clone()]);
    let value = Bytes::copy_from_slice(&input[args[2].clone()]);
    let argv = crate::command::track::Tracking::slowlog_on(session).then(|| {
        vec![
            name_bytes(&input[args[0].clone()]),
            key.clone(),
            value.clone(),
        ]
    });
    let set = crate::cmd::strings::Set::plain(session.db(), key, value);
    let plan = Plan::Write(crate::command::write_op(set));
    let tracking = crate::command::track::Tracking::fast(session, index, argv);
    Some(crate::command::track::track(
        plan,
        std::time::Instant::now(),
        tracking,
    ))
}

/// Whether the fast paths (plain GET and SET without the command table)
/// may take a command: not while CLIENT REPLY silences this client or
/// CLIENT PAUSE holds commands back, nor while a script runs (BUSY: the
/// general path handles them all). They stay open while someone MONITORs:
/// they feed the monitors themselves.
fn fast_path_open(session: &Session) -> bool {
    session.client.state.replies_on()
        && !session.shared.pause.active()
        && !crate::cmd::scripting::script_running()
}

impl Turn {
    /// GET without the command table, for the common pipeline of GETs:
    /// looked at on the frame's argument ranges, before anything is copied.
    /// `None`: not a plain GET this path can take (the general path then
    /// handles it). `Some(None)`: answered from the value cache (the reply
    /// is in the slots). `Some(Some(plan))`: a cache miss, to be read from
    /// the pool.
    pub(super) fn fast_get(
        &mut self,
        session: &Session,
        shared: &Shared,
        input: &[u8],
        args: &[std::ops::Range<usize>],
    ) -> Option<Option<Plan>> {
        if args.len() != 2
            || !input[args[0].clone()].eq_ignore_ascii_case(b"GET")
            || !session.authenticated
            || !session.acl.fast_allowed(
                &shared.acl,
                crate::command::TABLE
                    .get
                    .map(|i| crate::command::TABLE[i].meta),
                &input[args[1].clone()],
                false,
            )
            || session.multi.is_some()
            || !fast_path_open(session)
        {
            return None;
        }
        let cache = shared.engine.cache();
        if !self.cache_usable(cache) {
            return None;
        }
        let index = crate::command::TABLE.get?;
        session.client.last_cmd.store(index, Ordering::Relaxed);
        let started = std::time::Instant::now();
        let key = &input[args[1].clone()];
        if session.client.tracking.is_on() {
            // CLIENT TRACKING: the key is remembered before the value
            // cache or the read pool is looked at, as the general path
            // does (see `crate::tracking`), and CLIENT CACHING's one
            // command is this one.
            shared.tracking.remember(
                session.client.as_ref(),
                std::iter::once(Bytes::copy_from_slice(key)),
            );
            shared.tracking.limit(shared);
            session.client.tracking.command_done();
        }
        let name = &input[args[0].clone()];
        if shared.monitors.active() {
            shared
                .monitors
                .feed(session.db(), &session.client.state.monitor, &[name, key]);
        }
        match cache.get(session.db(), key, respite_engine::now_ms) {
            Some(value) => {
                shared
                    .engine
                    .access()
                    .read(session.db(), key, true, session.touches());
                self.held += value.len();
                self.slots.push(Slot::Ready(Reply::Bulk(value), self.resp3));
                crate::command::track::cache_hit(session, index, started, || {
                    vec![name_bytes(name), Bytes::copy_from_slice(key)]
                });
                Some(None)
            }
            None => {
                let key = Bytes::copy_from_slice(key);
                let argv = crate::command::track::Tracking::slowlog_on(session)
                    .then(|| vec![name_bytes(name), key.clone()]);
                let tracking = crate::command::track::Tracking::fast(session, index, argv);
                let (f, needs) =
                    Cached::Get(Get::new(session.db(), key, session.touches())).into_read();
                let plan = crate::command::track::track(Plan::Read(f, needs), started, tracking);
                Some(Some(plan))
            }
        }
    }

    /// A GET's or MGET's reply from the value cache, when it may be used
    /// (see `cache_usable`): a pipelined `SET k v` then `GET k` must return
    /// `v`. (Once a write is acknowledged its keys are out of the cache or
    /// hold its value, so settled writes need no care.)
    pub(super) fn try_cache(&self, read: &dyn CachedRead, shared: &Shared) -> Option<Reply> {
        let cache = shared.engine.cache();
        let access = shared.engine.access();
        self.cache_usable(cache)
            .then(|| read.cached_reply(cache, access))?
    }

    /// Whether this turn may answer from the value cache: it is on, and no
    /// write or read of this connection is gathered or in flight. Not after
    /// a write: the cache shows committed values only. Not after a read
    /// still to run on the pool: the cache answers with the state of now,
    /// the pool with a later one, and an earlier command must not show a
    /// newer state than a later one (a key would go back in time within one
    /// pipeline).
    pub(super) fn cache_usable(&self, cache: &respite_engine::ValueCache) -> bool {
        cache.enabled()
            && self.writes.is_empty()
            && self.open_writes == 0
            && self.reads.is_empty()
            && self.open_reads == 0
    }
}

/// A fast path's command name as sent, for the slow log: the common
/// spellings without a copy.
fn name_bytes(name: &[u8]) -> Bytes {
    match name {
        b"GET" => Bytes::from_static(b"GET"),
        b"get" => Bytes::from_static(b"get"),
        b"SET" => Bytes::from_static(b"SET"),
        b"set" => Bytes::from_static(b"set"),
        other => Bytes::copy_from_slice(other),
    }
}

//! The RESP connection loop: one task per client.
//!
//! Each turn of the loop reads what the socket has, then cuts every complete
//! request out of the buffer and plans it (parse, arity, auth) in order.
//! Consecutive writes are gathered into one item for the writer's queue, so
//! a pipeline of writes joins one group commit; consecutive reads are
//! gathered into one job for the read pool, run in one snapshot. Before a
//! run of reads is sent, the task waits for the replies to every earlier
//! write of this connection: that is what makes a pipelined `SET k v` then
//! `GET k` return `v`. Replies are encoded in request order into one buffer
//! and written with one flush per read (a pipeline of 16 costs one write
//! syscall, not 16).
//!
//! Two commands skip the command table: a plain GET, looked up in the value
//! cache straight from the read buffer (`Turn::fast_get`), and a plain SET
//! (`fast_set`), which copies only its key and value. Everything else is
//! planned by `cmd::dispatch`. A GET or MGET is answered from the value
//! cache only while the connection has no write and no pool read gathered or
//! in flight (`Turn::cache_usable`), so no reply shows an older state than
//! the replies before it.
//!
//! A command error is just a reply; the connection goes on. A protocol
//! error (a malformed frame) is answered and the connection closed, as
//! redis-server does. Waiting for the engine happens on channels, so a
//! connection task never blocks a runtime thread.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use respite_engine::{EngineError, WriteItem, WriteOp};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::oneshot;

use crate::blocking::{attempt, Blocker, Cancel, Outcome, Ticket};
use crate::cmd::strings::{Cached, Get};
use crate::command::CachedRead;
use crate::command::{dispatch, Plan, ReadFn, Session};
use crate::output::{Abandoned, Sender, STREAM_AT};
use crate::reply::Reply;
use crate::request::{Frame, Framer, Limits};
use crate::state::{ClientHandle, Shared};
use crate::sync::lock;

/// Replies already encoded, with how many of them are errors (for INFO).
struct Encoded {
    bytes: Bytes,
    errors: u64,
}

impl Encoded {
    /// Encodes `replies` in the given protocol.
    fn from_replies<'r>(replies: impl IntoIterator<Item = &'r Reply>, resp3: bool) -> Encoded {
        let mut buf = BytesMut::new();
        let mut errors = 0;
        for r in replies {
            if matches!(r, Reply::Error(_)) {
                errors += 1;
            }
            r.encode(&mut buf, resp3);
        }
        Encoded {
            bytes: buf.freeze(),
            errors,
        }
    }
}

/// A reply position in the current turn, in request order. Each slot
/// remembers the protocol its replies are encoded in: HELLO in the middle
/// of a pipeline switches it for the commands after it only.
enum Slot {
    /// Known now.
    Ready(Reply, bool),
    /// The replies of a group of writes, once the writer has committed them.
    Writes(
        oneshot::Receiver<Vec<Result<Reply, EngineError>>>,
        usize,
        bool,
    ),
    /// The replies of a group of reads, encoded by the reader thread that
    /// ran them (so the values are built, encoded and freed on one thread,
    /// and this task only copies bytes).
    Reads(oneshot::Receiver<Encoded>, usize, bool),
    /// A group already awaited.
    Done(Encoded),
}

/// The per-turn work list.
struct Turn {
    slots: Vec<Slot>,
    /// The protocol of the replies being gathered (RESP3 after HELLO 3).
    resp3: bool,
    writes: Vec<WriteOp<Reply>>,
    reads: Vec<ReadFn>,
    /// Whether a gathered read needs a multi-statement snapshot.
    reads_need_snapshot: bool,
    /// Whether a gathered read may take long (KEYS, SCAN...): the job is
    /// then not quick (see `ReadNeeds::quick`).
    reads_may_be_slow: bool,
    /// `Slot::Writes` / `Slot::Reads` not awaited yet, and where in `slots`
    /// the next settle must start looking for them: with these, a pipeline
    /// of thousands of commands never rescans the slots before it (which
    /// would make a long pipeline quadratic).
    open_writes: usize,
    open_reads: usize,
    writes_from: usize,
    reads_from: usize,
    /// Bytes of replies this turn already holds (settled reads, values
    /// from the cache): past [`TURN_HELD_BYTES`] the turn ends early and
    /// its replies go out before more requests are taken from the buffer.
    held: usize,
}

/// Most commands one turn takes from the read buffer before its replies
/// are written: a client pipelining a million commands without reading
/// is answered in parts, and its replies never pile up all at once.
const TURN_COMMANDS: usize = 1024;

/// Most reply bytes one turn holds before its replies are written.
const TURN_HELD_BYTES: usize = 4 * 1024 * 1024;

/// A plain `SET key value` planned without the command table, from the
/// frame's argument ranges (only the key and the value are copied): the
/// other common command of write-heavy pipelines. Anything else, options
/// included, goes the general way.
fn fast_set(
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
            &session.shared,
            crate::command::TABLE.set,
            &input[args[1].clone()],
            true,
        )
        || session.multi.is_some()
        || !fast_path_open(session)
        // Over maxdisk or on a full disk, or with min-replicas-to-write
        // set: the general path refuses it.
        || session.shared.engine.disk().refusal().is_some()
        || session.shared.wants_replicas.load(Ordering::Relaxed)
    {
        return None;
    }
    let index = crate::command::TABLE.set?;
    session.client.last_cmd.store(index, Ordering::Relaxed);
    let monitors = &session.shared.monitors;
    if monitors.active() {
        let [name, key, value] = [0, 1, 2].map(|i| &input[args[i].clone()]);
        monitors.feed(session.db, &session.client, &[name, key, value]);
    }
    let key = Bytes::copy_from_slice(&input[args[1].clone()]);
    let value = Bytes::copy_from_slice(&input[args[2].clone()]);
    let argv = crate::stats::Tracking::slowlog_on(session).then(|| {
        vec![
            name_bytes(&input[args[0].clone()]),
            key.clone(),
            value.clone(),
        ]
    });
    let set = crate::cmd::strings::Set::plain(session.db, key, value);
    let plan = Plan::Write(crate::command::write_op(set));
    let tracking = crate::stats::Tracking::fast(session, index, argv);
    Some(crate::stats::track(
        plan,
        std::time::Instant::now(),
        tracking,
    ))
}

/// Whether the fast paths (plain GET and SET without the command table)
/// may take a command: not while CLIENT REPLY silences this client or
/// CLIENT PAUSE holds commands back (the general path handles both). They
/// stay open while someone MONITORs: they feed the monitors themselves.
fn fast_path_open(session: &Session) -> bool {
    session.client.state.replies_on() && !session.shared.pause.active()
}

/// Runs one command's step; a panic (a bug) becomes that command's error
/// reply instead of taking the connection, or a reader thread, down.
fn guarded<T>(f: impl FnOnce() -> T, on_panic: impl FnOnce(Reply) -> T) -> T {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let msg = respite_engine::panic_message(&*payload);
        tracing::error!(panic = %msg, "a command panicked");
        on_panic(Reply::from(EngineError::Internal(msg)))
    })
}

/// `n` replies saying the server is shutting down.
fn shutting_down(n: usize) -> Vec<Reply> {
    (0..n)
        .map(|_| Reply::from(EngineError::ShuttingDown))
        .collect()
}

fn read_results(
    results: Result<Encoded, oneshot::error::RecvError>,
    n: usize,
    resp3: bool,
) -> Encoded {
    results.unwrap_or_else(|_| Encoded::from_replies(&shutting_down(n), resp3))
}

fn write_results(
    results: Result<Vec<Result<Reply, EngineError>>, oneshot::error::RecvError>,
    n: usize,
) -> Vec<Reply> {
    match results {
        Ok(rs) => rs
            .into_iter()
            .map(|r| r.unwrap_or_else(Reply::from))
            .collect(),
        Err(_) => shutting_down(n),
    }
}

/// Runs one planned command by itself and returns its encoded reply, and
/// whether the connection must close after it: for a connection that is
/// not in the usual loop (a monitoring client's own commands, see
/// `cmd::monitor`).
pub(crate) async fn run_alone(plan: Plan, shared: &Shared, resp3: bool) -> (Vec<u8>, bool) {
    let mut turn = Turn::new(resp3);
    let open = turn.add(plan, shared, resp3).await;
    turn.flush(shared).await;
    let mut out = BytesMut::new();
    for slot in turn.slots.drain(..) {
        match slot {
            Slot::Ready(r, resp3) => r.encode(&mut out, resp3),
            Slot::Done(e) => out.extend_from_slice(&e.bytes),
            Slot::Writes(rx, n, resp3) => {
                for r in write_results(rx.await, n) {
                    r.encode(&mut out, resp3);
                }
            }
            Slot::Reads(rx, n, resp3) => {
                out.extend_from_slice(&read_results(rx.await, n, resp3).bytes)
            }
        }
    }
    (out.to_vec(), !open)
}

impl Turn {
    fn new(resp3: bool) -> Turn {
        Turn {
            slots: Vec::new(),
            writes: Vec::new(),
            reads: Vec::new(),
            reads_need_snapshot: false,
            reads_may_be_slow: false,
            resp3,
            open_writes: 0,
            open_reads: 0,
            writes_from: 0,
            reads_from: 0,
            held: 0,
        }
    }

    /// Sends the gathered writes to the writer. Every operation queued or
    /// being applied holds one permit of the `write_queue_depth` semaphore,
    /// so the queue never holds more operations than that; a pipeline longer
    /// than the depth goes in several items, each waiting for room.
    async fn flush_writes(&mut self, shared: &Shared) {
        let depth = shared.config.write_queue_depth.max(1);
        let mut ops = std::mem::take(&mut self.writes);
        while !ops.is_empty() {
            let rest = ops.split_off(ops.len().min(depth));
            let chunk = std::mem::replace(&mut ops, rest);
            self.submit_writes(chunk, shared).await;
        }
    }

    /// Queues one item of at most `write_queue_depth` operations.
    async fn submit_writes(&mut self, ops: Vec<WriteOp<Reply>>, shared: &Shared) {
        let n = ops.len();
        let permits = u32::try_from(n).unwrap_or(u32::MAX);
        let Ok(permit) = shared
            .write_permits
            .clone()
            .acquire_many_owned(permits)
            .await
        else {
            self.push_replies(&shutting_down(n));
            return;
        };
        let (tx, rx) = oneshot::channel();
        let item = WriteItem {
            ops,
            done: Box::new(move |results| {
                drop(permit);
                let _ = tx.send(results);
            }),
        };
        match shared.engine.submit_write(item) {
            Ok(()) => {
                self.slots.push(Slot::Writes(rx, n, self.resp3));
                self.open_writes += 1;
            }
            Err(_) => self.push_replies(&shutting_down(n)),
        }
    }

    /// Waits for every write sent so far on this connection.
    async fn settle_writes(&mut self) {
        if self.open_writes > 0 {
            for slot in self.slots[self.writes_from..].iter_mut() {
                if let Slot::Writes(rx, n, resp3) = slot {
                    let (n, resp3) = (*n, *resp3);
                    let replies = write_results(rx.await, n);
                    *slot = Slot::Done(Encoded::from_replies(&replies, resp3));
                }
            }
            self.open_writes = 0;
        }
        self.writes_from = self.slots.len();
    }

    /// Adds replies known now, in the current protocol.
    fn push_replies(&mut self, replies: &[Reply]) {
        self.slots
            .push(Slot::Done(Encoded::from_replies(replies, self.resp3)));
    }

    /// Waits for every read sent so far on this connection, so that a write
    /// that follows them in the pipeline cannot commit before they ran.
    async fn settle_reads(&mut self) {
        if self.open_reads > 0 {
            for slot in self.slots[self.reads_from..].iter_mut() {
                if let Slot::Reads(rx, n, resp3) = slot {
                    let (n, resp3) = (*n, *resp3);
                    let encoded = read_results(rx.await, n, resp3);
                    self.held += encoded.bytes.len();
                    *slot = Slot::Done(encoded);
                }
            }
            self.open_reads = 0;
        }
        self.reads_from = self.slots.len();
    }

    /// Sends the gathered reads to the read pool as one job, after this
    /// connection's earlier writes are committed.
    async fn flush_reads(&mut self, shared: &Shared) {
        if self.reads.is_empty() {
            return;
        }
        self.settle_writes().await;
        let fns = std::mem::take(&mut self.reads);
        let n = fns.len();
        let snapshot = n > 1 || std::mem::take(&mut self.reads_need_snapshot);
        let quick =
            !std::mem::take(&mut self.reads_may_be_slow) && n <= crate::command::QUICK_READ_LIMIT;
        let (tx, rx) = oneshot::channel();
        let resp3 = self.resp3;
        let job = Box::new(move |view: &respite_engine::View<'_, '_>| {
            let replies: Vec<Reply> = fns
                .into_iter()
                .map(|f| guarded(|| f(view), |e| e))
                .collect();
            let encoded = Encoded::from_replies(&replies, resp3);
            let done: respite_engine::ReadDone = Box::new(move || {
                let _ = tx.send(encoded);
            });
            done
        });
        match shared
            .engine
            .submit_read(job, crate::command::ReadNeeds { snapshot, quick })
        {
            Ok(()) => {
                self.slots.push(Slot::Reads(rx, n, resp3));
                self.open_reads += 1;
            }
            Err(_) => self.push_replies(&shutting_down(n)),
        }
    }

    async fn flush(&mut self, shared: &Shared) {
        self.flush_writes(shared).await;
        self.flush_reads(shared).await;
    }

    /// Gathers a read for the pool, after this connection's gathered
    /// writes are sent.
    async fn add_read(
        &mut self,
        f: crate::command::ReadFn,
        needs: crate::command::ReadNeeds,
        shared: &Shared,
    ) {
        self.flush_writes(shared).await;
        self.reads.push(f);
        self.reads_need_snapshot |= needs.snapshot;
        self.reads_may_be_slow |= !needs.quick;
        // A long run of reads goes to the pool in jobs of a bounded size,
        // each waited for before the next is sent: jobs of one connection
        // running side by side could take their snapshots out of order
        // (a later command seeing an older state), and one job for the
        // whole run would hold every reply at once.
        if self.reads.len() >= crate::command::QUICK_READ_LIMIT {
            self.flush_reads(shared).await;
            self.settle_reads().await;
        }
    }

    /// Whether the turn holds enough that its replies should go out
    /// before more requests are taken.
    fn full(&self, commands: usize) -> bool {
        commands >= TURN_COMMANDS || self.held >= TURN_HELD_BYTES
    }

    /// Adds one planned command. Returns false when the connection must
    /// close after this turn.
    /// `resp3` is the protocol after the command ran (HELLO's own reply is
    /// in the protocol it switched to).
    async fn add(&mut self, plan: Plan, shared: &Shared, resp3: bool) -> bool {
        match plan {
            Plan::Write(op) => {
                // A write planned under a protocol switch (HELLO inside
                // EXEC) is answered in the new protocol; the writes before
                // it keep theirs.
                if resp3 != self.resp3 {
                    self.flush_writes(shared).await;
                    self.resp3 = resp3;
                }
                // Reads earlier in the pipeline must not see this write.
                if !self.reads.is_empty() || self.open_reads > 0 {
                    self.flush_reads(shared).await;
                    self.settle_reads().await;
                }
                self.writes.push(op);
            }
            Plan::Read(f, needs) => self.add_read(f, needs, shared).await,
            Plan::Cached(read) => match self.try_cache(&*read, shared) {
                Some(reply) => {
                    self.held += held_len(&reply);
                    self.slots.push(Slot::Ready(reply, self.resp3));
                }
                None => {
                    let (f, needs) = read.into_read();
                    self.add_read(f, needs, shared).await;
                }
            },
            Plan::Reply(r) => {
                self.flush(shared).await;
                self.resp3 = resp3;
                self.slots.push(Slot::Ready(r, resp3));
            }
            Plan::ReplyAndClose(r) => {
                self.flush(shared).await;
                self.resp3 = resp3;
                self.slots.push(Slot::Ready(r, resp3));
                return false;
            }
            Plan::Close => {
                self.flush(shared).await;
                return false;
            }
            // The connection loop takes blocking commands itself (it must
            // wait on the socket too); one that got here runs once.
            Plan::Block(blocker) => {
                let op = crate::blocking::once(blocker);
                return Box::pin(self.add(Plan::Write(op), shared, resp3)).await;
            }
        }
        true
    }

    /// GET without the command table, for the common pipeline of GETs:
    /// looked at on the frame's argument ranges, before anything is copied.
    /// `None`: not a plain GET this path can take (the general path then
    /// handles it). `Some(None)`: answered from the value cache (the reply
    /// is in the slots). `Some(Some(plan))`: a cache miss, to be read from
    /// the pool.
    fn fast_get(
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
                shared,
                crate::command::TABLE.get,
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
        let name = &input[args[0].clone()];
        if shared.monitors.active() {
            shared
                .monitors
                .feed(session.db, &session.client, &[name, key]);
        }
        match cache.get(session.db, key, respite_engine::now_ms) {
            Some(value) => {
                shared
                    .engine
                    .access()
                    .read(session.db, key, true, session.touches());
                self.held += value.len();
                self.slots.push(Slot::Ready(Reply::Bulk(value), self.resp3));
                crate::stats::cache_hit(session, index, started, || {
                    vec![name_bytes(name), Bytes::copy_from_slice(key)]
                });
                Some(None)
            }
            None => {
                let key = Bytes::copy_from_slice(key);
                let argv = crate::stats::Tracking::slowlog_on(session)
                    .then(|| vec![name_bytes(name), key.clone()]);
                let tracking = crate::stats::Tracking::fast(session, index, argv);
                let (f, needs) =
                    Cached::Get(Get::new(session.db, key, session.touches())).into_read();
                let plan = crate::stats::track(Plan::Read(f, needs), started, tracking);
                Some(Some(plan))
            }
        }
    }

    /// A GET's or MGET's reply from the value cache, when it may be used
    /// (see `cache_usable`): a pipelined `SET k v` then `GET k` must return
    /// `v`. (Once a write is acknowledged its keys are out of the cache or
    /// hold its value, so settled writes need no care.)
    fn try_cache(&self, read: &dyn CachedRead, shared: &Shared) -> Option<Reply> {
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
    fn cache_usable(&self, cache: &respite_engine::ValueCache) -> bool {
        cache.enabled()
            && self.writes.is_empty()
            && self.open_writes == 0
            && self.reads.is_empty()
            && self.open_reads == 0
    }

    /// Waits for every reply and writes them to the client in order: small
    /// ones gathered in `out` and written together, large ones streamed as
    /// they come (see `crate::output`). An error means the connection must
    /// close (the client went away, was killed, or went over its output
    /// limit).
    async fn finish<S, K>(
        &mut self,
        shared: &Shared,
        out: &mut BytesMut,
        sender: &mut Sender<'_, S, K>,
    ) -> Result<(), Abandoned>
    where
        S: AsyncWrite + Unpin,
        K: Future,
    {
        self.flush(shared).await;
        let mut errors = 0;
        (self.open_writes, self.open_reads) = (0, 0);
        (self.writes_from, self.reads_from) = (0, 0);
        self.held = 0;
        let mut result = Ok(());
        // The most of the reply buffer this turn used (CLIENT LIST `rbp`).
        let mut peak = 0;
        for slot in self.slots.drain(..) {
            let encoded = match slot {
                Slot::Ready(r, resp3) => {
                    errors += u64::from(matches!(r, Reply::Error(_)));
                    r.encode(out, resp3);
                    None
                }
                Slot::Done(e) => Some(e),
                Slot::Writes(rx, n, resp3) => {
                    // Straight into the output buffer: no intermediate copy.
                    for r in write_results(rx.await, n) {
                        errors += u64::from(matches!(r, Reply::Error(_)));
                        r.encode(out, resp3);
                    }
                    None
                }
                Slot::Reads(rx, n, resp3) => Some(read_results(rx.await, n, resp3)),
            };
            if let Some(encoded) = encoded {
                errors += encoded.errors;
                if encoded.bytes.len() >= STREAM_AT {
                    // Already encoded by the reader: written as it is,
                    // after what is gathered before it.
                    peak = peak.max(out.len());
                    result = sender.send(out, encoded.bytes.len(), true).await;
                    out.clear();
                    if result.is_ok() {
                        result = sender.send(&encoded.bytes, 0, false).await;
                    }
                } else {
                    out.extend_from_slice(&encoded.bytes);
                }
            }
            if result.is_ok() && out.len() >= STREAM_AT {
                peak = peak.max(out.len());
                result = sender.send(out, 0, true).await;
                out.clear();
            }
            if result.is_err() {
                break;
            }
        }
        if errors > 0 {
            shared
                .counters
                .error_replies
                .fetch_add(errors, Ordering::Relaxed);
        }
        result?;
        peak = peak.max(out.len());
        if !out.is_empty() {
            let sent = sender.send(out, 0, true).await;
            out.clear();
            sent?;
        }
        let client = sender.client;
        client.state.buffers.reply_buffer(
            out.capacity(),
            peak,
            client.last_active_ms.load(Ordering::Relaxed),
        );
        Ok(())
    }
}

/// The bytes a reply holds, as far as a turn's budget cares: the values.
fn held_len(reply: &Reply) -> usize {
    match reply {
        Reply::Bulk(b) => b.len(),
        Reply::Array(items) => items.iter().map(held_len).sum(),
        _ => 0,
    }
}

/// Runs one blocking command for the connection loop: the first try on the
/// writer, then, if the client blocks, the wait for a push, its timeout,
/// CLIENT UNBLOCK, CLIENT KILL, shutdown or the peer closing, whichever
/// comes first (see `crate::blocking`). Bytes the client sends meanwhile
/// are kept in `input` for after. Returns the reply, or `None` when the
/// connection must close.
async fn block<S, K, T>(
    blocker: Arc<dyn Blocker>,
    shared: &Shared,
    client: &ClientHandle,
    stream: &mut S,
    input: &mut BytesMut,
    mut killed: Pin<&mut K>,
    mut stopping: Pin<&mut T>,
) -> Option<Reply>
where
    S: AsyncRead + Unpin,
    K: Future,
    T: Future,
{
    let ticket = Ticket::new(blocker.clone(), shared.engine.blocking());
    let Ok(permit) = shared.write_permits.clone().acquire_owned().await else {
        return Some(Reply::from(EngineError::ShuttingDown));
    };
    let (tx, rx) = oneshot::channel();
    let item = WriteItem {
        ops: vec![attempt(ticket.clone())],
        done: Box::new(move |results| {
            drop(permit);
            let _ = tx.send(results);
        }),
    };
    if shared.engine.submit_write(item).is_err() {
        return Some(Reply::from(EngineError::ShuttingDown));
    }
    let first = match rx.await {
        Ok(mut results) => results.pop().unwrap_or(Err(EngineError::ShuttingDown)),
        Err(_) => Err(EngineError::ShuttingDown),
    };
    match first {
        Err(e) => {
            ticket.cancel(Cancel::Gone);
            return Some(Reply::from(e));
        }
        Ok(reply) if !ticket.blocked() => return Some(reply),
        Ok(_) => {}
    }
    *lock(&client.blocked) = Some(ticket.clone());
    let deadline = blocker.timeout().map(|d| tokio::time::Instant::now() + d);
    let limit = shared
        .settings
        .client_query_buffer_limit
        .load(Ordering::Relaxed);
    let mut timed_out = false;
    let outcome = loop {
        match ticket.outcome() {
            Outcome::Reply(reply) => break Some(reply),
            Outcome::Gone => break None,
            Outcome::Pending => {}
        }
        let timer = async {
            match deadline {
                Some(at) if !timed_out => tokio::time::sleep_until(at).await,
                _ => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = ticket.notify.notified() => {}
            _ = timer => {
                // Fails only if a pop for it is being committed: then
                // that reply is on its way and is the answer.
                timed_out = true;
                ticket.cancel(Cancel::Timeout);
            }
            read = stream.read_buf(input) => {
                if !matches!(read, Ok(n) if n > 0) || input.len() > limit {
                    ticket.cancel(Cancel::Gone);
                    break None;
                }
            }
            _ = killed.as_mut() => {
                ticket.cancel(Cancel::Gone);
                break None;
            }
            _ = stopping.as_mut() => {
                ticket.cancel(Cancel::Gone);
                break None;
            }
        }
    };
    *lock(&client.blocked) = None;
    outcome
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

/// Counts one read from or write to a client, for INFO stats.
pub(crate) fn count_io(
    bytes: &std::sync::atomic::AtomicU64,
    calls: &std::sync::atomic::AtomicU64,
    n: usize,
) {
    bytes.fetch_add(n as u64, Ordering::Relaxed);
    calls.fetch_add(1, Ordering::Relaxed);
}

/// Serves one client until it disconnects, is killed, or the server shuts
/// down.
pub async fn serve<S>(mut stream: S, shared: Arc<Shared>, client: Arc<ClientHandle>)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut session = Session::new(shared.clone(), client.clone());
    let mut input = BytesMut::with_capacity(16 * 1024);
    let mut framer = Framer::default();
    let mut out = BytesMut::with_capacity(16 * 1024);
    client.state.buffers.reply_buffer(out.capacity(), 0, 0);
    client.state.buffers.input(input.len(), input.capacity());
    let mut shutdown = shared.shutdown.subscribe();
    let mut turn = Turn::new(false);
    // See `crate::output`: when the pending output went over the soft
    // limit, kept across turns.
    let mut over_soft_since = None;
    // The last turn stopped early (see `Turn::full`) with requests still in
    // the buffer: take them before reading more.
    let mut more_buffered = false;
    // Made once and kept across turns: a fresh `notified()` or `wait_for`
    // each turn would register and unregister a waiter (a lock each) for
    // every request.
    let killed = client.kill_notify.notified();
    tokio::pin!(killed);
    let stopping = shutdown.wait_for(|down| *down);
    tokio::pin!(stopping);
    // Writes every reply gathered so far (see `Turn::finish`): at the end
    // of each turn, and before a command that waits (a pause, a blocking
    // pop), whose client may be waiting for those replies meanwhile.
    macro_rules! answer_gathered {
        () => {{
            // MONITOR: this turn's commands, as one batch (a relaxed load
            // when there is none).
            shared.monitors.publish(&client);
            let mut sender = Sender {
                stream: &mut stream,
                killed: killed.as_mut(),
                client: &client,
                shared: &shared,
                over_soft_since: &mut over_soft_since,
            };
            turn.finish(&shared, &mut out, &mut sender).await
        }};
    }
    'conn: loop {
        if !std::mem::take(&mut more_buffered) {
            let read = tokio::select! {
                // Polled in order: no random number per read, and data first.
                biased;
                r = stream.read_buf(&mut input) => r,
                _ = &mut killed => break,
                _ = &mut stopping => break,
            };
            match read {
                Ok(0) | Err(_) => break,
                Ok(n) => count_io(
                    &shared.counters.net_input_bytes,
                    &shared.counters.reads_processed,
                    n,
                ),
            }
        }
        if input.len()
            > shared
                .settings
                .client_query_buffer_limit
                .load(Ordering::Relaxed)
        {
            tracing::warn!(
                client = client.id,
                "closing client that reached max query buffer length"
            );
            break;
        }
        client.last_active_ms.store(
            client.created.elapsed().as_millis() as u64,
            Ordering::Relaxed,
        );
        // CLIENT LIST `qbuf`: what this read brought, commands about to
        // run included (a client's own CLIENT INFO counts itself, as in
        // redis); what is left is published after the turn.
        let figures = &client.state.buffers;
        figures.input(input.len(), input.capacity());
        let mut keep_open = true;
        let mut processed = 0u64;
        loop {
            let limits = Limits {
                max_bulk_len: shared.settings.proto_max_bulk_len.load(Ordering::Relaxed),
                authenticated: session.authenticated,
            };
            match framer.next_frame(&mut input, limits) {
                Ok(Some(frame)) => {
                    if let Frame::Array { len, args } = &frame {
                        if let Some(plan) = fast_set(&session, &input, *len, args) {
                            let len = *len;
                            input.advance(len);
                            processed += 1;
                            turn.add(plan, &shared, session.resp3).await;
                            if turn.full(processed as usize) {
                                more_buffered = true;
                                break;
                            }
                            continue;
                        }
                        if let Some(fast) = turn.fast_get(&session, &shared, &input, args) {
                            let len = *len;
                            input.advance(len);
                            processed += 1;
                            if let Some(plan) = fast {
                                turn.add(plan, &shared, session.resp3).await;
                            }
                            if turn.full(processed as usize) {
                                more_buffered = true;
                                break;
                            }
                            continue;
                        }
                    }
                    let request = frame.take_args(&mut input);
                    if request.is_empty() {
                        continue;
                    }
                    // Kept for CLIENT LIST `argv-mem` should the command
                    // block (a sum on the stack: published only then).
                    let argv_len: usize = request.iter().map(|a| a.len()).sum();
                    processed += 1;
                    if shared.pause.holds(&session, &request) {
                        // CLIENT PAUSE: what came before is answered, then
                        // this command waits for the pause to end.
                        if answer_gathered!().is_err() {
                            break 'conn;
                        }
                        tokio::select! {
                            _ = shared.pause.wait() => {}
                            _ = killed.as_mut() => break 'conn,
                            _ = stopping.as_mut() => break 'conn,
                        }
                    }
                    let plan = guarded(|| dispatch(&mut session, request), Plan::Reply);
                    if let Plan::Block(blocker) = plan {
                        // What came before is answered first: the client
                        // may be waiting for those replies while it blocks.
                        if answer_gathered!().is_err() {
                            break 'conn;
                        }
                        figures.argv(argv_len);
                        let waited = block(
                            blocker,
                            &shared,
                            &client,
                            &mut stream,
                            &mut input,
                            killed.as_mut(),
                            stopping.as_mut(),
                        )
                        .await;
                        figures.argv(0);
                        match waited {
                            Some(reply) => {
                                turn.add(Plan::Reply(reply), &shared, session.resp3).await;
                                continue;
                            }
                            None => break 'conn,
                        }
                    }
                    if !turn.add(plan, &shared, session.resp3).await {
                        keep_open = false;
                        break;
                    }
                    // CLIENT KILL of this very connection: its reply is the
                    // last one, as in Redis; the rest of the pipeline is
                    // not run.
                    if client.killed.load(Ordering::Relaxed) {
                        keep_open = false;
                        break;
                    }
                    // MONITOR: the commands after it, in this read or
                    // later ones, are the monitoring loop's (a monitor may
                    // not touch the keyspace).
                    if client.state.monitoring.load(Ordering::Relaxed) {
                        break;
                    }
                    if turn.full(processed as usize) {
                        more_buffered = true;
                        break;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    shared
                        .counters
                        .protocol_errors
                        .fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(client = client.id, error = %e, "protocol error");
                    turn.add(
                        Plan::ReplyAndClose(Reply::error(e.to_string())),
                        &shared,
                        session.resp3,
                    )
                    .await;
                    keep_open = false;
                    break;
                }
            }
        }
        shared
            .counters
            .commands_processed
            .fetch_add(processed, Ordering::Relaxed);
        figures.input(input.len(), input.capacity());
        if answer_gathered!().is_err() {
            break 'conn;
        }
        // Give back memory a large reply left behind.
        if out.capacity() > 1024 * 1024 {
            out = BytesMut::with_capacity(16 * 1024);
        }
        if client.state.monitoring.load(Ordering::Relaxed) {
            // MONITOR: this connection now streams what others run.
            let ended = crate::cmd::monitor::run(
                &mut session,
                &mut stream,
                &mut input,
                killed.as_mut(),
                stopping.as_mut(),
            )
            .await;
            if matches!(ended, crate::cmd::monitor::Ended::Close) {
                break;
            }
            // RESET: what the client sent after it is taken before reading
            // more.
            more_buffered = true;
        }
        // After a kill or once shutdown began, the turn just answered is
        // the last one, however eagerly the client keeps sending.
        if !keep_open
            || client.killed.load(Ordering::Relaxed)
            || shared.shutting_down.load(Ordering::Relaxed)
        {
            break;
        }
        // Give back memory a large request left behind.
        if input.is_empty() && input.capacity() > 1024 * 1024 {
            input = BytesMut::with_capacity(16 * 1024);
        }
    }
    let _ = stream.shutdown().await;
    if let Some(op) = session.end_watches(Reply::Ok) {
        // Nobody waits for this reply.
        let item = WriteItem {
            ops: vec![op],
            done: Box::new(|_| {}),
        };
        let _ = shared.engine.submit_write(item);
    }
    lock(&shared.clients).remove(&client.id);
}

//! One turn of a connection: the commands taken from the read buffer in
//! one go, gathered into write items and read jobs, and their replies
//! written in request order (see the module documentation of
//! `crate::connection`).

use std::future::Future;
use std::sync::atomic::Ordering;

use bytes::{Bytes, BytesMut};
use respite_engine::{EngineError, WriteItem, WriteOp};
use tokio::io::AsyncWrite;
use tokio::sync::oneshot;

use crate::command::{Plan, ReadFn};
use crate::output::{Abandoned, Sender, STREAM_AT};
use crate::reply::Reply;
use crate::state::Shared;

/// Replies already encoded, with how many of them are errors (for INFO).
pub(super) struct Encoded {
    pub(super) bytes: Bytes,
    pub(super) errors: u64,
}

impl Encoded {
    /// Encodes `replies` in the given protocol.
    pub(super) fn from_replies<'r>(
        replies: impl IntoIterator<Item = &'r Reply>,
        resp3: bool,
    ) -> Encoded {
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
pub(super) enum Slot {
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
pub(super) struct Turn {
    pub(super) slots: Vec<Slot>,
    /// The protocol of the replies being gathered (RESP3 after HELLO 3).
    pub(super) resp3: bool,
    pub(super) writes: Vec<WriteOp<Reply>>,
    pub(super) reads: Vec<ReadFn>,
    /// Whether a gathered read needs a multi-statement snapshot.
    pub(super) reads_need_snapshot: bool,
    /// Whether a gathered read may take long (KEYS, SCAN...): the job is
    /// then not quick (see `ReadNeeds::quick`).
    pub(super) reads_may_be_slow: bool,
    /// `Slot::Writes` / `Slot::Reads` not awaited yet, and where in `slots`
    /// the next settle must start looking for them: with these, a pipeline
    /// of thousands of commands never rescans the slots before it (which
    /// would make a long pipeline quadratic).
    pub(super) open_writes: usize,
    pub(super) open_reads: usize,
    pub(super) writes_from: usize,
    pub(super) reads_from: usize,
    /// Bytes of replies this turn already holds (settled reads, values
    /// from the cache): past [`TURN_HELD_BYTES`] the turn ends early and
    /// its replies go out before more requests are taken from the buffer.
    pub(super) held: usize,
}

/// Most commands one turn takes from the read buffer before its replies
/// are written: a client pipelining a million commands without reading
/// is answered in parts, and its replies never pile up all at once.
pub(super) const TURN_COMMANDS: usize = 1024;

/// Most reply bytes one turn holds before its replies are written.
pub(super) const TURN_HELD_BYTES: usize = 4 * 1024 * 1024;

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

impl Turn {
    pub(super) fn new(resp3: bool) -> Turn {
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

    /// Adds a [`Plan::After`]: waits for this connection's earlier writes
    /// (and reads), runs its write if any, then its step; `pushes` gives
    /// what the step pushed to this very connection (a PUBLISH to a
    /// channel it is subscribed to), which redis sends before the reply.
    pub(super) async fn add_after(
        &mut self,
        write: Option<WriteOp<Reply>>,
        then: crate::command::AfterFn,
        shared: &Shared,
        resp3: bool,
        pushes: impl FnOnce(bool) -> Bytes,
    ) {
        self.flush(shared).await;
        self.settle_reads().await;
        let reply = match write {
            Some(op) => Some(self.run_write(op, shared).await),
            None => None,
        };
        self.settle_writes().await;
        let reply = then(reply);
        let pushed = pushes(resp3);
        if !pushed.is_empty() {
            self.slots.push(Slot::Done(Encoded {
                bytes: pushed,
                errors: 0,
            }));
        }
        self.resp3 = resp3;
        self.slots.push(Slot::Ready(reply, resp3));
    }

    /// Runs one write by itself and waits for its reply (it is committed
    /// then, and so is every write this connection sent before it).
    async fn run_write(&mut self, op: WriteOp<Reply>, shared: &Shared) -> Reply {
        let Ok(permit) = shared.write_permits.clone().acquire_owned().await else {
            return Reply::from(EngineError::ShuttingDown);
        };
        let (tx, rx) = oneshot::channel();
        let item = WriteItem {
            ops: vec![op],
            done: Box::new(move |results| {
                drop(permit);
                let _ = tx.send(results);
            }),
        };
        if shared.engine.submit_write(item).is_err() {
            return Reply::from(EngineError::ShuttingDown);
        }
        write_results(rx.await, 1)
            .pop()
            .unwrap_or_else(|| Reply::from(EngineError::ShuttingDown))
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

    /// Adds pushes (already encoded) after every reply gathered so far:
    /// the gathered writes and reads are sent first, so the pushes cannot
    /// come before their replies.
    pub(super) async fn push_encoded(&mut self, bytes: Bytes, shared: &Shared) {
        if bytes.is_empty() {
            return;
        }
        self.flush(shared).await;
        self.slots.push(Slot::Done(Encoded { bytes, errors: 0 }));
    }

    /// Adds replies known now, in the current protocol.
    pub(super) fn push_replies(&mut self, replies: &[Reply]) {
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
    pub(super) async fn add_read(
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
    pub(super) fn full(&self, commands: usize) -> bool {
        commands >= TURN_COMMANDS || self.held >= TURN_HELD_BYTES
    }

    /// Adds one planned command. Returns false when the connection must
    /// close after this turn.
    /// `resp3` is the protocol after the command ran (HELLO's own reply is
    /// in the protocol it switched to).
    pub(super) async fn add(&mut self, plan: Plan, shared: &Shared, resp3: bool) -> bool {
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
            Plan::After(write, then) => {
                self.add_after(write, then, shared, resp3, |_| Bytes::new())
                    .await
            }
            // The connection loop takes blocking commands itself (it must
            // wait on the socket too); one that got here runs once.
            Plan::Block(blocker) => {
                let op = crate::blocking::once(blocker);
                return Box::pin(self.add(Plan::Write(op), shared, resp3)).await;
            }
            Plan::ReadOrWrite(f) => {
                if let Some(op) = self.read_or_write(f, shared, resp3).await {
                    return Box::pin(self.add(Plan::Write(op), shared, resp3)).await;
                }
            }
        }
        true
    }

    /// Runs a [`Plan::ReadOrWrite`]'s read by itself, after everything
    /// before it, and adds its reply; or gives back the write it asks
    /// for, to be added in its place (so in request order).
    async fn read_or_write(
        &mut self,
        f: crate::command::ReadOrWriteFn,
        shared: &Shared,
        resp3: bool,
    ) -> Option<WriteOp<Reply>> {
        // The read must see this connection's earlier writes committed.
        self.flush(shared).await;
        self.settle_reads().await;
        self.settle_writes().await;
        self.resp3 = resp3;
        let (tx, rx) = oneshot::channel();
        let job = Box::new(move |view: &respite_engine::View<'_, '_>| {
            let result = guarded(|| f(view), Ok);
            let done: respite_engine::ReadDone = Box::new(move || {
                let _ = tx.send(result);
            });
            done
        });
        let needs = crate::command::ReadNeeds {
            snapshot: false,
            quick: true,
        };
        let result = match shared.engine.submit_read(job, needs) {
            Ok(()) => rx.await.ok(),
            Err(_) => None,
        };
        match result {
            Some(Ok(reply)) => {
                self.held += held_len(&reply);
                self.slots.push(Slot::Ready(reply, resp3));
                None
            }
            Some(Err(op)) => Some(op),
            None => {
                self.push_replies(&shutting_down(1));
                None
            }
        }
    }

    /// Waits for every reply and writes them to the client in order: small
    /// ones gathered in `out` and written together, large ones streamed as
    /// they come (see `crate::output`). An error means the connection must
    /// close (the client went away, was killed, or went over its output
    /// limit).
    pub(super) async fn finish<S, K>(
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
pub(super) fn held_len(reply: &Reply) -> usize {
    match reply {
        Reply::Bulk(b) => b.len(),
        Reply::Array(items) => items.iter().map(held_len).sum(),
        _ => 0,
    }
}

/// Runs one command's step; a panic (a bug) becomes that command's error
/// reply instead of taking the connection, or a reader thread, down.
pub(super) fn guarded<T>(f: impl FnOnce() -> T, on_panic: impl FnOnce(Reply) -> T) -> T {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let msg = respite_engine::panic_message(&*payload);
        tracing::error!(panic = %msg, "a command panicked");
        on_panic(Reply::from(EngineError::Internal(msg)))
    })
}

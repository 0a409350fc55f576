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
//! planned by `command::dispatch`. A GET or MGET is answered from the value
//! cache only while the connection has no write and no pool read gathered or
//! in flight (`Turn::cache_usable`), so no reply shows an older state than
//! the replies before it.
//!
//! A command error is just a reply; the connection goes on. A protocol
//! error (a malformed frame) is answered and the connection closed, as
//! redis-server does. Waiting for the engine happens on channels, so a
//! connection task never blocks a runtime thread.

mod blocking;
mod fast;
mod mode;
mod turn;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{Buf, BytesMut};
use respite_engine::WriteItem;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::clients::ClientHandle;
use crate::command::{dispatch, Plan, Session};
use crate::output::{count_io, Sender};
use crate::reply::Reply;
use crate::request::{Frame, Framer, Limits};
use crate::state::Shared;
use crate::sync::lock;
use blocking::block;
use fast::fast_set;
use mode::Mode;
use turn::{guarded, Turn};

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
    // MONITOR and the other modes (see `mode`).
    let mut mode = Mode::default();
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
    // Another client's CLIENT TRACKING REDIRECT may give this connection a
    // push queue while it is idle (it fires at most once that matters).
    let queue_made = client.pubsub.made.notified();
    tokio::pin!(queue_made);
    // Writes every reply gathered so far (see `Turn::finish`): at the end
    // of each turn, and before a command that waits (a pause, a blocking
    // pop), whose client may be waiting for those replies meanwhile.
    macro_rules! answer_gathered {
        () => {{
            // MONITOR: this turn's commands, as one batch (a relaxed load
            // when there is none).
            shared
                .monitors
                .publish(&client.state.monitor, || client.peer.monitor_addr());
            let mut sender = Sender {
                stream: &mut stream,
                killed: killed.as_mut(),
                client: &client,
                limit: &shared.settings.output_limit,
                counters: &shared.counters,
                over_soft_since: &mut over_soft_since,
            };
            let sent = turn.finish(&shared, &mut out, &mut sender).await;
            if sent.is_ok() {
                mode.written(&client);
            }
            sent
        }};
    }
    'conn: loop {
        if !std::mem::take(&mut more_buffered) {
            let listens = mode.listens();
            let read = tokio::select! {
                // Polled in order: no random number per read, and data first.
                biased;
                r = stream.read_buf(&mut input) => Some(r),
                woken = mode.next(), if listens => match woken {
                    mode::Woken::Push => None,
                    mode::Woken::Closed => break,
                },
                _ = &mut queue_made, if !listens => {
                    mode.adopt_queue(&client);
                    None
                }
                _ = &mut killed => break,
                _ = &mut stopping => break,
            };
            match read {
                // A push while idle: sent as a turn of its own.
                None => {}
                Some(Ok(0) | Err(_)) => break,
                Some(Ok(n)) => count_io(
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
                    // Pushes that came before this command go out before
                    // its reply.
                    if mode.listens() {
                        turn.push_encoded(mode.drain(session.resp3()), &shared)
                            .await;
                    }
                    if let (Frame::Array { len, args }, true) = (&frame, mode.plain(&session)) {
                        if let Some(plan) = fast_set(&session, &input, *len, args) {
                            let len = *len;
                            input.advance(len);
                            processed += 1;
                            turn.add(plan, &shared, session.resp3()).await;
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
                                turn.add(plan, &shared, session.resp3()).await;
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
                    if shared.pause.holds(|| {
                        crate::command::dispatch::held_under_write_pause(&session, &request)
                    }) {
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
                    if let Some(refusal) = mode.refuse(&mut session, &request) {
                        turn.add(Plan::Reply(refusal), &shared, session.resp3())
                            .await;
                        continue;
                    }
                    let is_reset = request[0].eq_ignore_ascii_case(b"reset");
                    let plan = guarded(|| dispatch(&mut session, request), Plan::Reply);
                    mode.after(&session, is_reset);
                    if let Some(sync) = shared.repl.take_sync(client.id) {
                        // PSYNC or SYNC: this connection is a replica's link
                        // from now on (see `crate::repl`).
                        if answer_gathered!().is_err() {
                            break 'conn;
                        }
                        let handles = crate::repl::Handles {
                            engine: &shared.engine,
                            permits: &shared.write_permits,
                            replid: shared.stats.replid(),
                            shutdown: shared.shutdown.subscribe(),
                            master: &shared.repl,
                        };
                        crate::repl::serve_replica(
                            &mut stream,
                            &mut input,
                            &handles,
                            &client,
                            sync,
                            killed.as_mut(),
                            stopping.as_mut(),
                        )
                        .await;
                        break 'conn;
                    }
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
                                if let Reply::Error(e) = &reply {
                                    let row = client.state.last_row.load(Ordering::Relaxed);
                                    shared.stats.blocked_failed(row, e);
                                }
                                turn.add(Plan::Reply(reply), &shared, session.resp3()).await;
                                continue;
                            }
                            None => break 'conn,
                        }
                    }
                    let open = match plan {
                        Plan::After(write, then) => {
                            let drain = |resp3| mode.drain(resp3);
                            turn.add_after(write, then, &shared, session.resp3(), drain)
                                .await;
                            true
                        }
                        plan => turn.add(plan, &shared, session.resp3()).await,
                    };
                    if !open {
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
                        session.resp3(),
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
        // (A connection about to close sends no more pushes: not even its
        // own QUIT's MONITOR line.)
        if mode.listens() && keep_open {
            turn.push_encoded(mode.drain(session.resp3()), &shared)
                .await;
        }
        if answer_gathered!().is_err() {
            break 'conn;
        }
        // Give back memory a large reply left behind.
        if out.capacity() > 1024 * 1024 {
            out = BytesMut::with_capacity(16 * 1024);
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
    mode.end(&shared, &client);
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

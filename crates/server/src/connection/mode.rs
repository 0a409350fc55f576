//! Connection modes: what else a connection streams besides its replies,
//! and which of its own commands it may still run.
//!
//! A plain connection answers its commands and nothing else. A connection
//! in a mode also carries a push source, which the serve loop waits on in
//! the same `select!` as the socket, and a filter on its own commands:
//!
//! - MONITOR: the source is the monitors' broadcast channel (one batch of
//!   lines per turn of every other connection, see `crate::monitor`); the
//!   filter is redis's rule for a replica-flagged client, which refuses
//!   whatever could read or write the keyspace.
//! - Subscribed (SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE): the source is the
//!   client's own queue of messages (see `crate::pubsub`); in RESP2, while
//!   it has any subscription, the filter allows only redis's few commands
//!   (the (P|S)(UN)SUBSCRIBE family, PING, QUIT, RESET); in RESP3 every
//!   command runs, and messages are `>` push frames.
//!
//! Pushes are only ever placed between whole replies: the serve loop
//! drains the source before each command of a turn (so what was pushed
//! before a command arrived goes out before its reply, as in redis) and at
//! the end of the turn, into the turn's list of replies, and when it is
//! idle it wakes for a push and writes it out as a turn of its own, after
//! letting every other ready task run (so one write carries all that the
//! ready publishers sent, see [`Mode::next`]). A
//! command's own MONITOR line is published right after it is planned, so
//! the monitoring client sees its reply first, then its line, as redis
//! shows it.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::sync::{broadcast, mpsc};

use crate::command::Session;
use crate::monitor::Batch;
use crate::pubsub::Push;
use crate::reply::Reply;
use crate::state::Shared;

/// The refusal a monitoring client's keyspace commands get.
const MONITOR_REFUSAL: &str = "ERR Replica can't interact with the keyspace";

/// The modes a connection is in (none: a plain connection).
#[derive(Default)]
pub(super) struct Mode {
    /// MONITOR: the batches of commands every connection runs.
    monitor: Option<broadcast::Receiver<Arc<Batch>>>,
    /// A batch received while the loop waited, not yet written.
    first_batch: Option<Arc<Batch>>,
    /// Pub/sub: this client's queue of messages, once it subscribed.
    pushes: Option<mpsc::UnboundedReceiver<Push>>,
    /// A push received while the loop waited, not yet written.
    first_push: Option<Push>,
    /// What the pushes drained and not yet written cost (see
    /// `crate::pubsub`'s limits).
    unsent: u64,
}

/// The commands a RESP2 client may run while subscribed.
const SUBSCRIBED_ALLOWED: [&str; 9] = [
    "ping",
    "subscribe",
    "ssubscribe",
    "unsubscribe",
    "sunsubscribe",
    "psubscribe",
    "punsubscribe",
    "quit",
    "reset",
];

/// What woke an idle connection's push source.
pub(super) enum Woken {
    /// Something to send: drain it.
    Push,
    /// The source is gone (the server stops): close.
    Closed,
}

impl Mode {
    /// Whether no filter applies to this connection's commands, so the
    /// fast paths (plain GET and SET) may take them (a tracking client's
    /// too: they remember its keys themselves).
    pub(super) fn plain(&self, session: &Session) -> bool {
        self.monitor.is_none() && !self.subscribed_resp2(session)
    }

    /// RESP2 subscribed mode: only a few commands run.
    fn subscribed_resp2(&self, session: &Session) -> bool {
        self.pushes.is_some() && !session.resp3() && session.client.pubsub.active()
    }

    /// Whether the connection has a push source to wait on.
    pub(super) fn listens(&self) -> bool {
        self.monitor.is_some() || self.pushes.is_some()
    }

    /// Waits for the next push (only called when [`Mode::listens`]); what
    /// it received is kept for [`Mode::drain`].
    pub(super) async fn next(&mut self) -> Woken {
        let monitor = async {
            let Some(rx) = self.monitor.as_mut() else {
                return std::future::pending().await;
            };
            loop {
                match rx.recv().await {
                    Ok(batch) => return Some(batch),
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        };
        let pushes = async {
            match self.pushes.as_mut() {
                Some(rx) => rx.recv().await,
                None => std::future::pending().await,
            }
        };
        let woken = tokio::select! {
            batch = monitor => match batch {
                Some(batch) => {
                    self.first_batch = Some(batch);
                    Woken::Push
                }
                None => Woken::Closed,
            },
            push = pushes => match push {
                Some(push) => {
                    self.first_push = Some(push);
                    Woken::Push
                }
                None => Woken::Closed,
            },
        };
        if let Woken::Push = woken {
            // Let every other task that is ready run first: the publishers
            // whose PUBLISH woke this one, and the others the same poll of
            // the sockets found, so that one drain and one write carry all
            // they published (redis writes a client's buffer once per
            // event-loop pass the same way). Without this the runtime runs
            // a woken task right after its waker, and a subscriber would
            // write, and wake its own reader, once per message.
            tokio::task::yield_now().await;
        }
        woken
    }

    /// Every push waiting, encoded in the connection's protocol; empty
    /// when there is none.
    pub(super) fn drain(&mut self, resp3: bool) -> Bytes {
        let mut lines = Vec::new();
        if let Some(rx) = self.monitor.as_mut() {
            if let Some(batch) = self.first_batch.take() {
                crate::monitor::format_batch(&batch, &mut lines);
            }
            loop {
                match rx.try_recv() {
                    Ok(batch) => crate::monitor::format_batch(&batch, &mut lines),
                    Err(broadcast::error::TryRecvError::Lagged(_)) => {}
                    Err(_) => break,
                }
            }
        }
        let Some(rx) = self.pushes.as_mut() else {
            return Bytes::from(lines);
        };
        let mut out = BytesMut::from(&lines[..]);
        let first = self.first_push.take();
        for push in first
            .into_iter()
            .chain(std::iter::from_fn(|| rx.try_recv().ok()))
        {
            self.unsent += push.cost();
            push.encode(&mut out, resp3);
        }
        out.freeze()
    }

    /// The pushes drained so far were written.
    pub(super) fn written(&mut self, client: &crate::clients::ClientHandle) {
        client.pubsub.written(std::mem::take(&mut self.unsent));
    }

    /// The filter: a command the mode refuses gets this reply instead of
    /// running. Refusals come after the checks every client gets (known,
    /// arity, authentication, ACL), as in redis; a command those refuse is
    /// left to the usual path, which gives their error. Inside MULTI a
    /// refusal dooms the transaction, as any command refused before it is
    /// queued does.
    pub(super) fn refuse(&self, session: &mut Session, request: &[Bytes]) -> Option<Reply> {
        let subscribed = self.subscribed_resp2(session);
        if self.monitor.is_none() && !subscribed {
            return None;
        }
        let index = crate::command::lookup_index(&request[0])?;
        let stats = &session.shared.stats;
        let row =
            stats.row_of(crate::command::TABLE[index].described(request.get(1).map(|b| &b[..])));
        let fullname = stats.row_name(row);
        let name = crate::command::TABLE[index].name;
        let refusal = if subscribed && !SUBSCRIBED_ALLOWED.contains(&name) {
            format!(
                "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
                fullname.as_deref().unwrap_or(name)
            )
        } else if self.monitor.is_some() && crate::monitor::touches_keyspace(fullname.as_deref()) {
            MONITOR_REFUSAL.to_string()
        } else {
            return None;
        };
        // The usual checks' errors win: the usual path gives them (a
        // command the mode would refuse and the ACL denies is checked
        // twice, so its ACL LOG entry counts 2).
        crate::command::check(session, request, Some(index)).ok()?;
        stats.rejected(row);
        stats.error(refusal.as_bytes());
        if let Some(q) = session.multi.as_mut() {
            q.doom();
        }
        Some(Reply::error(refusal))
    }

    /// After a command was planned: enters MONITOR if it asked, leaves it
    /// on RESET, and publishes a monitoring connection's own line (after
    /// its reply, as redis shows it).
    pub(super) fn after(&mut self, session: &Session, request_was_reset: bool) {
        let client = &session.client;
        let shared = &session.shared;
        if self.monitor.is_some() {
            shared
                .monitors
                .publish(&client.state.monitor, || client.peer.monitor_addr());
            if request_was_reset {
                self.end(shared, client);
            }
        } else if client.state.monitor.is_monitoring() {
            self.monitor = shared.monitors.take(&client.state.monitor);
        }
        self.adopt_queue(client);
        if request_was_reset {
            shared.pubsub.forget(client.as_ref());
            shared
                .tracking
                .disable(shared.engine.notifier(), client.as_ref());
        }
    }

    /// Takes the client's push queue once it exists (a subscription, or
    /// CLIENT TRACKING: its own, or another client's redirect to it).
    pub(super) fn adopt_queue(&mut self, client: &crate::clients::ClientHandle) {
        if self.pushes.is_none() && client.pubsub.queued() {
            self.pushes = client.pubsub.take_queue();
        }
    }

    /// Leaves every mode (RESET, or the connection ends).
    pub(super) fn end(&mut self, shared: &Shared, client: &crate::clients::ClientHandle) {
        if self.monitor.take().is_some() {
            self.first_batch = None;
            shared.monitors.stop(&client.state.monitor);
        }
        shared.pubsub.forget(client);
        shared.tracking.disable(shared.engine.notifier(), client);
    }
}

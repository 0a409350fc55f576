//! A blocking command (BLPOP and its kin) as the connection loop runs it.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::BytesMut;
use respite_engine::{EngineError, WriteItem};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::oneshot;

use crate::blocking::{attempt, Blocker, Cancel, Outcome, Ticket};
use crate::clients::ClientHandle;
use crate::reply::Reply;
use crate::state::Shared;
use crate::sync::lock;

/// Runs one blocking command for the connection loop: the first try on the
/// writer, then, if the client blocks, the wait for a push, its timeout,
/// CLIENT UNBLOCK, CLIENT KILL, shutdown or the peer closing, whichever
/// comes first (see `crate::blocking`). Bytes the client sends meanwhile
/// are kept in `input` for after. Returns the reply, or `None` when the
/// connection must close.
pub(super) async fn block<S, K, T>(
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

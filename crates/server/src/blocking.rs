//! Blocking commands (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP and the
//! sorted-set pops) on the server side: the ticket a blocked client waits
//! on, and the operations that try to serve it.
//!
//! A blocking command is a [`Blocker`]: it knows its keys, its timeout, and
//! how to try its pop inside a writer transaction. The connection sends a
//! first try to the writer ([`attempt`]); if that finds nothing, the same
//! operation registers the client's [`Ticket`] in the engine's registry
//! (`respite_engine::blocking`), so no push can slip in between. From then
//! on the writer serves the ticket right after a write readies one of its
//! keys, in that write's transaction, and the ticket's reply is released
//! when the transaction commits. Meanwhile the connection waits on the
//! ticket, a timer, the socket, CLIENT KILL and shutdown at once (see
//! `connection.rs`): a blocked client holds no thread and no lock, and
//! costs no CPU until one of them fires.
//!
//! The ticket's state decides every race between the writer and the
//! connection under one small lock: a timeout, CLIENT UNBLOCK or a
//! disconnect cancels a ticket only while it still waits; once the writer
//! has popped for it, the pop's reply is on its way and the client gets it
//! (an element is never popped for a client that then answers "timed
//! out"). Inside MULTI/EXEC a blocking command does not block: it tries
//! once and answers as on a timeout ([`once`]), as in Redis.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use respite_engine::{Blocking, EngineError, Txn, Waiter, WriteOp};
use tokio::sync::Notify;

use crate::error::command_result;
use crate::error::CommandError;
use crate::reply::Reply;
use crate::sync::lock;

/// A command that may block.
pub trait Blocker: Send + Sync + 'static {
    /// The keys it waits on, with their database. None by default: such a
    /// blocker (WAIT) is woken only by its own signal or its timeout.
    fn keys(&self) -> Vec<(u32, Bytes)> {
        Vec::new()
    }
    /// How long it waits; `None` forever (a timeout of 0).
    fn timeout(&self) -> Option<Duration>;
    /// Tries to pop. `ready` is the key a write has just changed (serve
    /// from it only; stay blocked if it holds another type); `None` is the
    /// first try, over every key in order. `Ok(None)`: nothing to pop.
    fn try_pop(
        &self,
        txn: &mut Txn<'_, '_>,
        ready: Option<(u32, &[u8])>,
    ) -> Result<Option<Reply>, CommandError>;
    /// The reply on a timeout: a null array for every blocking command
    /// (redis-server's `replyToBlockedClientTimedOut`).
    fn timeout_reply(&self) -> Reply {
        Reply::NilArray
    }
    /// The reply where it may not block and there is nothing (inside
    /// MULTI): the timeout's, except for BLMOVE and BRPOPLPUSH (a null
    /// bulk string, as from LMOVE).
    fn empty_reply(&self) -> Reply {
        self.timeout_reply()
    }
}

/// Parses a blocking timeout as Redis does: decimal seconds, rounded up
/// to whole milliseconds; 0 waits forever.
///
/// A job queue's consumers send the same timeout with every BRPOP, and
/// reading it as redis does (`strtold`, exact big-number arithmetic) costs
/// more than the rest of the command's parse: each thread keeps its last
/// valid timeout's text and value, and the same text again is a compare.
pub fn parse_timeout(arg: &[u8]) -> Result<Option<Duration>, CommandError> {
    thread_local! {
        static LAST: std::cell::RefCell<(Vec<u8>, Option<Duration>)> =
            const { std::cell::RefCell::new((Vec::new(), None)) };
    }
    /// Longer texts are not kept (a timeout is a few characters).
    const KEPT: usize = 32;
    if let Some(hit) = LAST.with(|last| {
        let last = last.borrow();
        (!last.0.is_empty() && last.0 == arg).then_some(last.1)
    }) {
        return Ok(hit);
    }
    let parsed = parse_timeout_text(arg)?;
    if arg.len() <= KEPT {
        LAST.with(|last| {
            let mut last = last.borrow_mut();
            last.0.clear();
            last.0.extend_from_slice(arg);
            last.1 = parsed;
        });
    }
    Ok(parsed)
}

/// [`parse_timeout`] without the thread's last text.
fn parse_timeout_text(arg: &[u8]) -> Result<Option<Duration>, CommandError> {
    let secs = crate::long_double::parse(arg)
        .map(|v| v.to_f64())
        .ok_or_else(|| CommandError::Other("timeout is not a float or out of range".into()))?;
    let ms = (secs * 1000.0).ceil();
    // redis-server converts to a `long long`; past its range (or NaN) the
    // x86 conversion gives LLONG_MIN, which it then calls negative.
    if ms < 0.0 || ms.is_nan() || ms >= i64::MAX as f64 {
        return Err(CommandError::Other("timeout is negative".into()));
    }
    if ms == 0.0 {
        return Ok(None);
    }
    // Past a few centuries it is forever in practice.
    Ok(Duration::try_from_secs_f64(ms / 1000.0)
        .ok()
        .filter(|d| d.as_secs() < 1 << 40))
}

/// Why a wait ended without a pop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancel {
    /// The timeout passed, or CLIENT UNBLOCK ... TIMEOUT.
    Timeout,
    /// CLIENT UNBLOCK ... ERROR.
    Error,
    /// The client went away (disconnect, CLIENT KILL, shutdown).
    Gone,
}

enum State {
    /// The first try is queued or running.
    Trying,
    /// Registered under this id, waiting for a push.
    Waiting(u64),
    /// Popped for, in a transaction not yet committed.
    Serving(Reply),
    /// The reply is ready.
    Done(Reply),
    /// Ended without a pop.
    Cancelled(Cancel),
}

/// What the connection learns from a ticket.
pub enum Outcome {
    /// The reply to send.
    Reply(Reply),
    /// Still waiting (or being served).
    Pending,
    /// Cancelled because the client is gone: nothing to send.
    Gone,
}

/// One blocked command of one client.
pub struct Ticket {
    blocker: Arc<dyn Blocker>,
    blocking: Arc<Blocking>,
    state: Mutex<State>,
    /// Wakes the connection when the state changes.
    pub notify: Notify,
}

impl Ticket {
    /// A ticket for `blocker`, before its first try.
    pub fn new(blocker: Arc<dyn Blocker>, blocking: Arc<Blocking>) -> Arc<Ticket> {
        Arc::new(Ticket {
            blocker,
            blocking,
            state: Mutex::new(State::Trying),
            notify: Notify::new(),
        })
    }

    /// Whether the first try registered the ticket (the client blocks).
    pub fn blocked(&self) -> bool {
        !matches!(*lock(&self.state), State::Trying)
    }

    /// Ends the wait without a pop, if it still waits (or has not been
    /// tried yet). Returns whether it did.
    pub fn cancel(&self, why: Cancel) -> bool {
        let mut st = lock(&self.state);
        let id = match *st {
            State::Trying => None,
            State::Waiting(id) => Some(id),
            _ => return false,
        };
        *st = State::Cancelled(why);
        drop(st);
        if let Some(id) = id {
            self.blocking.remove(id);
        }
        self.notify.notify_one();
        true
    }

    /// CLIENT UNBLOCK: cancels only a registered wait.
    pub fn unblock(&self, why: Cancel) -> bool {
        if !matches!(*lock(&self.state), State::Waiting(_)) {
            return false;
        }
        self.cancel(why)
    }

    /// Where the wait stands; takes the reply when there is one.
    pub fn outcome(&self) -> Outcome {
        let mut st = lock(&self.state);
        match &*st {
            State::Done(_) => match std::mem::replace(&mut *st, State::Cancelled(Cancel::Gone)) {
                State::Done(r) => Outcome::Reply(r),
                _ => Outcome::Pending,
            },
            State::Cancelled(Cancel::Timeout) => Outcome::Reply(self.blocker.timeout_reply()),
            State::Cancelled(Cancel::Error) => Outcome::Reply(Reply::error(
                "UNBLOCKED client unblocked via CLIENT UNBLOCK",
            )),
            State::Cancelled(Cancel::Gone) => Outcome::Gone,
            State::Trying | State::Waiting(_) | State::Serving(_) => Outcome::Pending,
        }
    }
}

impl Waiter for Ticket {
    fn serve(&self, txn: &mut Txn<'_, '_>, db: u32, key: &[u8]) -> respite_engine::Result<bool> {
        let mut st = lock(&self.state);
        if !matches!(*st, State::Waiting(_)) {
            return Ok(false);
        }
        let reply = match self.blocker.try_pop(txn, Some((db, key))) {
            Ok(None) => return Ok(false),
            Ok(Some(reply)) => reply,
            // What it wrote cannot be taken back alone: the writer rolls
            // the group back (the element stays in the list).
            Err(CommandError::Engine(e)) if txn.wrote() => return Err(e),
            Err(e) if txn.wrote() => return Err(EngineError::Internal(e.to_string())),
            // Found before any write (BLMOVE's destination holds another
            // type): that is the client's answer, as in Redis.
            Err(e) => Reply::from(e),
        };
        *st = State::Serving(reply);
        Ok(true)
    }

    fn finish(&self, outcome: respite_engine::Result<()>) {
        let mut st = lock(&self.state);
        let reply = match std::mem::replace(&mut *st, State::Cancelled(Cancel::Gone)) {
            State::Serving(reply) => match outcome {
                Ok(()) => reply,
                Err(e) => Reply::from(e),
            },
            other => {
                *st = other;
                return;
            }
        };
        *st = State::Done(reply);
        drop(st);
        self.notify.notify_one();
    }

    fn waiting(&self) -> bool {
        matches!(*lock(&self.state), State::Waiting(_))
    }
}

/// The first try of a blocking command, for the writer: its reply if it
/// can pop now; otherwise it registers the ticket, in the same operation,
/// and its reply is a placeholder (the connection then waits on the
/// ticket).
pub fn attempt(ticket: Arc<Ticket>) -> WriteOp<Reply> {
    Box::new(move |txn: &mut Txn<'_, '_>| {
        let mut st = lock(&ticket.state);
        if !matches!(*st, State::Trying) {
            // Cancelled before it ran (the client went away).
            return Ok(Reply::Nil);
        }
        let before = txn.changes();
        let tried = ticket.blocker.try_pop(txn, None);
        match tried {
            Ok(None) => {
                let waiter: Arc<dyn Waiter> = ticket.clone();
                let id = ticket.blocking.register(ticket.blocker.keys(), waiter);
                *st = State::Waiting(id);
                Ok(Reply::Nil)
            }
            other => command_result(other.map(|r| r.unwrap_or(Reply::Nil)), txn, before),
        }
    })
}

/// A blocking command run where it may not block (inside EXEC): one try,
/// the timeout's reply if there is nothing.
pub fn once(blocker: Arc<dyn Blocker>) -> WriteOp<Reply> {
    Box::new(move |txn: &mut Txn<'_, '_>| {
        let before = txn.changes();
        let tried = try_once(&*blocker, txn);
        command_result(tried, txn, before)
    })
}

/// The one try of a blocking command that may not block (inside EXEC, or
/// called from a script): its pop, or its reply for nothing to pop.
pub fn try_once(blocker: &dyn Blocker, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
    blocker
        .try_pop(txn, None)
        .map(|r| r.unwrap_or_else(|| blocker.empty_reply()))
}

#[cfg(test)]
mod tests {
    use super::parse_timeout;
    use std::time::Duration;

    #[test]
    fn a_repeated_timeout_reads_as_the_first() {
        for text in [&b"0.2"[..], b"0", b"1.5", b"5e-324", b"-1", b"abc", b"0.2"] {
            let first = parse_timeout(text).ok();
            assert_eq!(parse_timeout(text).ok(), first);
            assert_eq!(super::parse_timeout_text(text).ok(), first);
        }
        assert_eq!(
            parse_timeout(b"0.2").unwrap(),
            Some(Duration::from_millis(200))
        );
    }

    #[test]
    fn timeouts_read_as_redis_reads_them() {
        assert_eq!(parse_timeout(b"0").unwrap(), None);
        assert_eq!(
            parse_timeout(b"1.5").unwrap(),
            Some(Duration::from_millis(1500))
        );
        // Rounded up to a millisecond, never down to "forever".
        assert_eq!(
            parse_timeout(b"5e-324").unwrap(),
            Some(Duration::from_millis(1))
        );
        assert_eq!(
            parse_timeout(b"0.0001").unwrap(),
            Some(Duration::from_millis(1))
        );
        assert!(parse_timeout(b"-1").is_err());
        assert!(parse_timeout(b"abc").is_err());
        assert!(parse_timeout(b"9223372036854775807").is_err());
    }
}

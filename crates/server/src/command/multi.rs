//! A connection's transaction state: the commands queued since MULTI, and
//! the keys it WATCHes. The commands that use them (MULTI, EXEC, WATCH...)
//! are in `cmd::transactions`; queueing is part of dispatch.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use respite_engine::{EngineError, Txn, Watches};

use super::dispatch::{check, try_dispatch};
use super::{lookup_index, Plan, Session, TABLE};
use crate::error::CommandError;
use crate::reply::Reply;

/// The commands queued since MULTI.
#[derive(Default)]
pub struct Queue {
    /// Each queued request, name first, as sent.
    pub(crate) requests: Vec<Vec<Bytes>>,
    /// A command was refused while queueing: EXEC must not run anything.
    pub(crate) doomed: bool,
    /// The queued commands' memory, as CLIENT LIST's `multi-mem` shows it.
    mem: usize,
}

impl Queue {
    /// How many commands are queued (CLIENT LIST's `multi`).
    pub fn len(&self) -> usize {
        self.requests.len()
    }

    /// The queued commands' argument bytes plus one `Bytes` handle per
    /// argument (CLIENT LIST's `multi-mem`).
    pub fn mem(&self) -> usize {
        self.mem
    }

    /// Makes EXEC refuse to run anything (a command was refused while the
    /// transaction was open).
    pub(crate) fn doom(&mut self) {
        self.doomed = true;
    }

    /// The queued requests, name first (CLIENT PAUSE WRITE holds an EXEC
    /// whose queue writes).
    pub fn requests(&self) -> &[Vec<Bytes>] {
        &self.requests
    }

    /// Whether nothing is queued yet.
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }
}

/// EXEC refused before it runs (no authentication, a NOPERM, an arity
/// error): Redis answers with the reason behind EXECABORT, inside MULTI or
/// not.
pub(crate) fn exec_abort(e: CommandError) -> CommandError {
    // Redis formats the bare reason here: an arity error without its ERR.
    let text = e.to_string();
    let reason = text.strip_prefix("ERR ").unwrap_or(&text);
    CommandError::Raw(format!(
        "EXECABORT Transaction discarded because of: {reason}"
    ))
}

/// What the connection does with a request while a transaction is open.
pub(crate) fn queue(session: &mut Session, request: Vec<Bytes>) -> Result<Plan, CommandError> {
    let index = lookup_index(&request[0]);
    // Redis refuses here what it can tell without running the command:
    // unknown names, wrong arity, no authentication.
    if let Err(e) = check(session, &request, index) {
        if index.is_some_and(|i| TABLE[i].name == "exec") {
            // EXEC itself refused (a NOPERM, an arity error): Redis
            // discards the transaction and says why.
            session.multi = None;
            let abort = Reply::from(exec_abort(e));
            return Ok(session.reply_ending_watches(abort));
        }
        if let Some(q) = session.multi.as_mut() {
            q.doomed = true;
        }
        return Err(e);
    }
    if index.is_some_and(|i| TABLE[i].has_flag("no_multi")) {
        // SHUTDOWN: refused, and the transaction with it, as in Redis.
        if let Some(q) = session.multi.as_mut() {
            q.doomed = true;
        }
        return Err(CommandError::Other(
            "Command not allowed inside a transaction".into(),
        ));
    }
    match index.map(|i| TABLE[i].name) {
        // These act at once, even inside a transaction.
        Some("exec" | "discard" | "multi" | "quit" | "reset") => try_dispatch(session, request),
        Some("watch") => Err(CommandError::Other(
            "WATCH inside MULTI is not allowed".into(),
        )),
        _ => {
            if let Some(q) = session.multi.as_mut() {
                q.mem += request
                    .iter()
                    .map(|a| a.len() + std::mem::size_of::<Bytes>())
                    .sum::<usize>();
                q.requests.push(request);
            }
            Ok(Plan::Reply(Reply::Simple("QUEUED")))
        }
    }
}

/// The keys a connection watches, each with the version it saw. Filled and
/// emptied only by operations on the writer thread, so every change to the
/// list is ordered with every write: a WATCH registers after all writes
/// queued before it (and is acknowledged only once they are committed, so
/// the GET that follows it sees them), and anything written after it moves
/// the version EXEC compares.
#[derive(Default)]
pub struct WatchList {
    /// The keys, shared with the operations on the writer that fill and
    /// read them.
    pub(crate) keys: Arc<Mutex<WatchedKeys>>,
    /// A WATCH was sent and no UNWATCH/EXEC/DISCARD/RESET since: ending the
    /// watches needs a trip to the writer.
    pub(crate) active: bool,
}

/// A connection's watched keys, by database and name: watching a key again
/// is a lookup, so WATCH of 100,000 keys costs linear time (a list scanned
/// for each key made it quadratic: a 9.6 s stall of the writer).
pub(crate) type WatchedKeys = std::collections::HashMap<(u32, Bytes), WatchedKey>;

/// What WATCH learned of one key.
pub(crate) struct WatchedKey {
    /// Its version when WATCH ran.
    pub(crate) version: u64,
    /// It existed when WATCH ran: if it has expired since, EXEC fails,
    /// even before the expiry sweep deletes it (Redis's rule).
    pub(crate) live: bool,
}

pub(crate) fn lock_keys(keys: &Mutex<WatchedKeys>) -> std::sync::MutexGuard<'_, WatchedKeys> {
    keys.lock().unwrap_or_else(|e| e.into_inner())
}

/// Ends every watch of the list (on the writer).
pub(crate) fn unwatch(watches: &Watches, keys: &Mutex<WatchedKeys>) {
    for ((db, key), _) in lock_keys(keys).drain() {
        watches.unwatch(db, &key);
    }
}

/// Whether any watched key was written since it was watched.
pub(crate) fn broken(watches: &Watches, keys: &Mutex<WatchedKeys>) -> bool {
    lock_keys(keys)
        .iter()
        .any(|((db, key), w)| watches.changed(*db, key, w.version))
}

/// Whether a key that existed when it was watched is gone without a write:
/// it expired (a deletion would have moved its version).
pub(crate) fn expired(txn: &Txn<'_, '_>, keys: &Mutex<WatchedKeys>) -> Result<bool, EngineError> {
    for ((db, key), _) in lock_keys(keys).iter().filter(|(_, w)| w.live) {
        if !txn.exists(*db, key)? {
            return Ok(true);
        }
    }
    Ok(false)
}

impl Session {
    /// An operation for the writer that ends this connection's watches and
    /// then answers `reply`; `None` when nothing is watched.
    pub fn end_watches(&mut self, reply: Reply) -> Option<respite_engine::WriteOp<Reply>> {
        if !std::mem::take(&mut self.watched.active) {
            return None;
        }
        let watches = self.shared.engine.watches();
        // The ended watches go with the operation that ends them; a WATCH
        // after this one fills a new list. Sharing one list let an EXEC's
        // early check (below) read entries of watches already ended by an
        // operation still queued for the writer: a pipeline `WATCH k;
        // <write k>; DISCARD; WATCH k; MULTI; EXEC` could then fail its EXEC
        // on a loaded server (found by the random pipeline test, seed 38).
        let keys = std::mem::take(&mut self.watched.keys);
        Some(Box::new(move |_: &mut Txn<'_, '_>| {
            unwatch(&watches, &keys);
            Ok(reply)
        }))
    }

    /// `reply`, after ending the watches if there are any.
    pub(crate) fn reply_ending_watches(&mut self, reply: Reply) -> Plan {
        match self.end_watches(reply.clone()) {
            Some(op) => Plan::Write(op),
            None => Plan::Reply(reply),
        }
    }
}

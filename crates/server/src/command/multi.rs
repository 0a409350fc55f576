//! A connection's transaction state: the commands queued since MULTI, and
//! the keys it WATCHes. The commands that use them (MULTI, EXEC, WATCH...)
//! are in `cmd::transactions`; queueing is part of dispatch. This module
//! knows neither: it is the data they share.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use respite_engine::{EngineError, Txn, Watches};

use crate::error::CommandError;

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
    /// Queues `request`.
    pub(crate) fn push(&mut self, request: Vec<Bytes>) {
        self.mem += request
            .iter()
            .map(|a| a.len() + std::mem::size_of::<Bytes>())
            .sum::<usize>();
        self.requests.push(request);
    }

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

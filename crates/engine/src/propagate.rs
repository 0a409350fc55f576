//! Replication's feed: what each committed operation did, as commands a
//! replica can apply, handed on after the commit in commit order.
//!
//! Redis propagates each write command once it has run (`propagate`), and
//! rewrites the ones a replica could not replay to the same result (a
//! relative expiry becomes an absolute one, a random pop the removal of
//! what it popped, an expiry a DEL). Here an operation runs inside a
//! group's transaction that may still roll back, so nothing is sent while
//! it runs. Each command of an operation that changed something notes on
//! its [`crate::Txn`], right after it ran, the commands that reproduce it
//! ([`crate::Txn::note_step`], a [`Step`] over the keys it changed since
//! its [`StepMark`]): the server knows which commands replay exactly and
//! how redis rewrites the others (respite-server's `propagation.rs`). The
//! writer gathers an operation's steps (and those of the blocked clients
//! it served, each an operation of its own, as redis serves them after
//! the command); any key none of them stands for (a key a read found
//! expired and deleted, a command that noted nothing) goes to the
//! [`Propagator`], which reads its new state from the writer's own view,
//! inside the transaction. The writer keeps the commands with the open
//! transaction, drops them if the group rolls back, and hands them on once
//! it commits, before any reply of the group goes out (as keyspace
//! notifications are, see `notify.rs`). What a replica receives is
//! therefore exactly what was committed, in the order the writer applied
//! it.
//!
//! The writer's own work (the expiry sweep, eviction) runs no command: its
//! keys go as their state, which for a deleted key is `DEL key`, as redis
//! propagates expirations and evictions.
//!
//! Wholesale changes that name no key (FLUSHDB, FLUSHALL, SWAPDB) are
//! noted on the [`crate::Txn`] as [`Whole`] and sent as themselves, before
//! the keys of the same operation.
//!
//! Cost: nothing while no replica ever attached (one load per operation,
//! and no command notes anything); afterwards, a copy of each write's
//! arguments, and a read of a key only where a rewrite needs its expiry or
//! a command is sent as its keys' state.
//!
//! A full synchronization needs a snapshot that is exactly the state the
//! stream continues from. [`crate::Txn::pin_read`], called inside a write
//! operation on the writer thread, opens a read transaction on a new
//! read-only connection: it sees the last commit, and nothing of the open
//! group, whose operations' commands are handed on only after the group
//! commits, i.e. after the point the snapshot was taken.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use bytes::Bytes;
use rusqlite::Connection;

use crate::error::Result;
use crate::stmt_cache::Statements;
use crate::view::View;

/// A change that names no key, sent as its command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Whole {
    /// FLUSHDB of this database.
    FlushDb(u32),
    /// FLUSHALL.
    FlushAll,
    /// SWAPDB of these two databases.
    SwapDb(u32, u32),
}

/// One command for the replicas: its arguments, and the database it must
/// run in (`None`: any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// The database to SELECT first, if it matters.
    pub db: Option<u32>,
    /// The command and its arguments.
    pub args: Vec<Bytes>,
}

/// Where a command's changes start in its operation's [`crate::Txn`]:
/// taken before the command runs ([`crate::Txn::step_mark`]), handed back
/// with the commands that reproduce it ([`crate::Txn::note_step`]).
#[derive(Debug, Clone, Copy)]
pub struct StepMark {
    pub(crate) keys: usize,
    pub(crate) whole: usize,
    pub(crate) expired: usize,
    pub(crate) changes: u64,
}

/// What one command of an operation did, as the commands a replica runs
/// to do the same: they stand for the keys at `keys` in the operation's
/// list of changed keys (which are then not read back as their state).
#[derive(Debug)]
pub(crate) struct Step {
    pub(crate) keys: std::ops::Range<usize>,
    pub(crate) commands: Vec<Command>,
    /// Sent as an operation of its own (a blocked client served after
    /// the command that pushed: never inside that command's MULTI/EXEC).
    pub(crate) alone: bool,
}

/// Turns operations into commands and takes the committed ones.
pub trait Propagator: Send + Sync {
    /// The commands that reproduce one operation: `whole` are its
    /// wholesale changes in order, `keys` the keys it changed (repeats
    /// possible), whose state `view` reads as the operation left them.
    fn effects(&self, view: &View<'_, '_>, keys: &[(u32, Bytes)], whole: &[Whole]) -> Vec<Command>;
    /// The operations of one committed transaction, in order, each as the
    /// commands [`Propagator::effects`] made (never empty).
    fn committed(&self, ops: Vec<Vec<Command>>);
}

/// Whether operations are propagated, and to whom.
#[derive(Default)]
pub struct Propagation {
    active: AtomicBool,
    sink: OnceLock<Box<dyn Propagator>>,
}

impl Propagation {
    /// Installs the propagator (once; later calls are ignored).
    pub fn set_sink(&self, sink: Box<dyn Propagator>) {
        let _ = self.sink.set(sink);
    }

    /// Starts propagating from the next operation the writer runs. An
    /// operation already running, or in a group already open, may not be
    /// propagated: a caller that needs a clean start (a full
    /// synchronization) waits for a write queued after this call to be
    /// answered before it pins its snapshot.
    pub fn activate(&self) {
        self.active.store(true, Ordering::Release);
    }

    /// Whether operations are being propagated.
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// The propagator, while propagation is on.
    pub(crate) fn sink(&self) -> Option<&dyn Propagator> {
        if !self.active.load(Ordering::Relaxed) {
            return None;
        }
        self.sink.get().map(|s| &**s)
    }
}

/// A read transaction held open on its own connection: one consistent
/// view of the database as of the commit before it was pinned.
pub struct PinnedRead {
    conn: Connection,
}

impl PinnedRead {
    /// Opens a read-only connection to `path` and starts a read
    /// transaction whose snapshot is fixed now (a first read fixes it).
    pub(crate) fn open(path: &std::path::Path) -> Result<Self> {
        let conn = crate::schema::open_reader(path)?;
        conn.execute_batch("BEGIN")?;
        conn.query_row("SELECT count(*) FROM meta", [], |r| r.get::<_, i64>(0))?;
        Ok(PinnedRead { conn })
    }

    /// Runs `f` with a view of the pinned snapshot, whose clock reads now.
    pub fn with_view<T>(&self, f: impl FnOnce(&View<'_, '_>) -> T) -> T {
        let stmts = Statements::new(&self.conn);
        let view = View::at(&stmts, crate::view::now_ms());
        f(&view)
    }
}

impl Drop for PinnedRead {
    fn drop(&mut self) {
        let _ = self.conn.execute_batch("COMMIT");
    }
}

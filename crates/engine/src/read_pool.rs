//! The read pool: read-only WAL connections, each owned by a thread, that
//! serve every read command without ever waiting for the writer.
//!
//! In WAL mode a reader sees the database as of the moment its transaction
//! starts, and the writer never blocks it. Each job runs in a fresh, short
//! read transaction, started after the job was queued; since the writer
//! acknowledges a write only after its commit, every write acknowledged before
//! a read was submitted is visible to that read. No connection keeps a
//! snapshot open between jobs, which also lets the writer's TRUNCATE
//! checkpoints finish.
//!
//! A job is a closure over a [`View`], so the caller decides what a job
//! reads (one GET, or a whole run of pipelined reads in one snapshot); it
//! returns a [`ReadDone`] that sends the result on its way (the server's
//! completes a tokio oneshot channel). The threads are plain OS threads:
//! SQLite calls block, and they must never block an async runtime's workers.
//!
//! ## Handing results back in groups
//!
//! Completing a job wakes whoever waits for it, and on a small machine the
//! woken thread often shares the reader's core and preempts it at once: one
//! context switch per read, twice (the request wakes the reader, the result
//! wakes the caller). So a reader that finds more jobs queued runs them
//! before handing anything back, and hands back all their [`ReadDone`]s in
//! one call of [`DeliverReads`]: one wake for the group. Only *quick* jobs
//! are held back like this (the caller says which: a few keys by name, not
//! KEYS or SCAN), so a result never waits behind a long scan: before a job
//! that is not quick, the reader hands back what it holds.

use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};

pub use crate::completion::{complete_read, ReadDone};
use rusqlite::Connection;

use crate::access::Access;
use crate::cache::ValueCache;
use crate::error::Result;
use crate::schema::open_reader;
use crate::stmt_cache::Statements;
use crate::view::View;

/// Work for the read pool: runs once against the current state of the
/// database, and returns what hands its result back.
pub type ReadJob = Box<dyn FnOnce(&View<'_, '_>) -> ReadDone + Send>;

/// How readers hand back the results of the jobs they ran in a row, in the
/// order they ran: all at once, so that a server can wake its connections
/// with one signal (see [`deliver_reads_inline`] for the plain way).
pub type DeliverReads = Arc<dyn Fn(Vec<ReadDone>) + Send + Sync>;

/// Calls every job's [`ReadDone`] on the reader thread.
pub fn deliver_reads_inline() -> DeliverReads {
    Arc::new(|done| done.into_iter().for_each(complete_read))
}

/// The most quick jobs a reader runs before handing their results back.
const MAX_HELD: usize = 64;

/// What a read job needs of the pool: the one description of a read that
/// travels from the command that plans it to the reader that runs it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadNeeds {
    /// Whether the job needs one snapshot across several statements. A
    /// single SQL statement always reads one consistent state, so a lone GET
    /// skips the explicit BEGIN/COMMIT pair; a pipeline of reads, an MGET or
    /// an HGETALL (the key row, then its fields) gets one transaction so its
    /// reads agree with each other.
    pub snapshot: bool,
    /// Whether the job reads a bounded amount (some keys by name), so its
    /// own result, and others', may wait for it (see the module docs); KEYS,
    /// SCAN, DBSIZE or SMEMBERS may take long and are not.
    pub quick: bool,
}

/// A read job and how to run it.
pub(crate) struct ReadRequest {
    pub(crate) job: ReadJob,
    pub(crate) needs: ReadNeeds,
}

/// Handle to the pool's threads; dropping every sender ends them.
pub(crate) struct ReadPool {
    pub(crate) tx: Sender<ReadRequest>,
    pub(crate) threads: Vec<JoinHandle<()>>,
}

impl ReadPool {
    /// Opens `size` read-only connections and starts a thread for each.
    pub(crate) fn start(
        path: &Path,
        size: usize,
        cache: Arc<ValueCache>,
        access: Arc<Access>,
        deliver: DeliverReads,
        replica: bool,
    ) -> Result<ReadPool> {
        let (tx, rx) = crossbeam_channel::unbounded::<ReadRequest>();
        let mut threads = Vec::new();
        for i in 0..size.max(1) {
            let conn = open_reader(path)?;
            let rx = rx.clone();
            let cache = cache.clone();
            let access = access.clone();
            let deliver = deliver.clone();
            let handle = std::thread::Builder::new()
                .name(format!("respite-reader-{i}"))
                .stack_size(crate::SCRIPT_STACK)
                .spawn(move || reader_loop(conn, rx, cache, access, deliver, replica))
                .map_err(crate::EngineError::Thread)?;
            threads.push(handle);
        }
        Ok(ReadPool { tx, threads })
    }
}

fn reader_loop(
    conn: Connection,
    rx: Receiver<ReadRequest>,
    cache: Arc<ValueCache>,
    access: Arc<Access>,
    deliver: DeliverReads,
    replica: bool,
) {
    let stmts = Statements::new(&conn);
    // Results of quick jobs run in a row, not handed back yet.
    let mut held: Vec<ReadDone> = Vec::new();
    let hand_back = |held: &mut Vec<ReadDone>| {
        if !held.is_empty() {
            deliver(std::mem::take(held));
        }
    };
    let mut next = rx.recv().ok();
    while let Some(request) = next {
        let quick = request.needs.quick;
        if !quick {
            // Nothing waits behind a job that may take long.
            hand_back(&mut held);
        }
        if let Some(done) = run(&stmts, &cache, &access, request, replica) {
            held.push(done);
        }
        if !quick || held.len() >= MAX_HELD {
            hand_back(&mut held);
        }
        next = match rx.try_recv() {
            Ok(request) => Some(request),
            Err(_) => {
                // The queue is empty: hand back before waiting.
                hand_back(&mut held);
                rx.recv().ok()
            }
        };
    }
    hand_back(&mut held);
}

/// Runs one job in its own read transaction (or statement). `None` if the
/// job panicked: its caller sees its result channel dropped.
fn run(
    stmts: &Statements<'_>,
    cache: &ValueCache,
    access: &Access,
    request: ReadRequest,
    replica: bool,
) -> Option<ReadDone> {
    let ReadRequest { job, needs } = request;
    // On a read replica every job gets its own transaction: see below.
    let snapshot = needs.snapshot || replica;
    // Taken before the snapshot starts: a value read here may enter the
    // value cache only if no commit began since (see cache.rs).
    let since = cache.read_started();
    // One snapshot per job when it runs several statements, so its reads
    // agree with each other.
    let began = snapshot && stmts.get("BEGIN").and_then(|mut s| s.execute([])).is_ok();
    if began && !replica && cache.enabled() {
        // The snapshot starts here, not at the job's first SQLite read: a
        // string the job then finds in the value cache (see
        // `View::get_string_shared`) is one this snapshot holds, and a
        // later read cannot see a commit made after it.
        let started = stmts
            .get("PRAGMA schema_version")
            .and_then(|mut s| s.query_row([], |_| Ok(())));
        if let Err(e) = started {
            tracing::warn!(error = %e, "starting a read snapshot failed");
        }
    }
    if began && replica {
        // Another process changes a replica's file by writing pages into
        // it (see `replica.rs`), and SQLite keeps a page it cached unless
        // the file's change counter moved, which the follower only
        // changes when it rewrites page 1. So: take the shared lock first
        // (the follower waits for it to go before writing), then drop
        // every cached page, and read only what the file holds now.
        // (Pages within the memory map are read from the file anyway.)
        let locked = stmts
            .get("SELECT count(*) FROM sqlite_schema")
            .and_then(|mut s| s.query_row([], |_| Ok(())));
        let dropped = locked.and_then(|()| {
            stmts
                .get("PRAGMA shrink_memory")
                .and_then(|mut s| s.execute([]).map(|_| ()))
        });
        if let Err(e) = dropped {
            tracing::warn!(error = %e, "starting a replica's read transaction failed");
        }
    }
    // A panicking job (a bug in a command) must not take the thread with
    // it: the pool would shrink with every such bug.
    let view = View::filling(stmts, cache, since, access);
    let done = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(&view))) {
        Ok(done) => Some(done),
        Err(payload) => {
            tracing::error!(panic = %crate::panic_message(&*payload), "a read job panicked");
            None
        }
    };
    if began {
        if let Err(e) = stmts.get("COMMIT").and_then(|mut s| s.execute([])) {
            tracing::warn!(error = %e, "ending a read transaction failed");
        }
    }
    // Before the result goes back: the job's `keymiss` events; or the keys
    // it found expired go to the writer, which hands the result back once
    // it has deleted them (see `view.rs`).
    view.hand_on(done)
}

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
//! reads (one GET, or a whole run of pipelined reads in one snapshot) and how
//! the result travels back (the server uses a tokio oneshot channel). The
//! threads are plain OS threads: SQLite calls block, and they must never block
//! an async runtime's workers.

use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};
use rusqlite::Connection;

use crate::cache::ValueCache;
use crate::error::Result;
use crate::schema::open_reader;
use crate::stmt_cache::Statements;
use crate::view::View;

/// Work for the read pool: runs once against the current state of the
/// database.
pub type ReadJob = Box<dyn FnOnce(&View<'_, '_>) + Send>;

/// A read job and whether it needs one snapshot across several
/// statements. A single SQL statement always reads one consistent state, so
/// a lone GET skips the explicit BEGIN/COMMIT pair; a pipeline of reads, or
/// an MGET, gets one transaction so its reads agree with each other.
pub(crate) struct ReadRequest {
    pub(crate) job: ReadJob,
    pub(crate) snapshot: bool,
}

/// Handle to the pool's threads; dropping every sender ends them.
pub(crate) struct ReadPool {
    pub(crate) tx: Sender<ReadRequest>,
    pub(crate) threads: Vec<JoinHandle<()>>,
}

impl ReadPool {
    /// Opens `size` read-only connections and starts a thread for each.
    pub(crate) fn start(path: &Path, size: usize, cache: Arc<ValueCache>) -> Result<ReadPool> {
        let (tx, rx) = crossbeam_channel::unbounded::<ReadRequest>();
        let mut threads = Vec::new();
        for i in 0..size.max(1) {
            let conn = open_reader(path)?;
            let rx = rx.clone();
            let cache = cache.clone();
            let handle = std::thread::Builder::new()
                .name(format!("respite-reader-{i}"))
                .spawn(move || reader_loop(conn, rx, cache))
                .map_err(crate::EngineError::Thread)?;
            threads.push(handle);
        }
        Ok(ReadPool { tx, threads })
    }
}

fn reader_loop(conn: Connection, rx: Receiver<ReadRequest>, cache: Arc<ValueCache>) {
    let stmts = Statements::new(&conn);
    while let Ok(ReadRequest { job, snapshot }) = rx.recv() {
        // Taken before the snapshot starts: a value read here may enter the
        // value cache only if no commit began since (see cache.rs).
        let since = cache.read_started();
        // One snapshot per job when it runs several statements, so its reads
        // agree with each other.
        let began = snapshot && stmts.get("BEGIN").and_then(|mut s| s.execute([])).is_ok();
        // A panicking job (a bug in a command) must not take the thread
        // with it: the pool would shrink with every such bug.
        let view = View::filling(&stmts, &cache, since);
        if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(&view)))
        {
            tracing::error!(panic = %crate::panic_message(&*payload), "a read job panicked");
        }
        if began {
            if let Err(e) = stmts.get("COMMIT").and_then(|mut s| s.execute([])) {
                tracing::warn!(error = %e, "ending a read transaction failed");
            }
        }
    }
}

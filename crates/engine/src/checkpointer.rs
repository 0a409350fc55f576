//! The checkpointer thread: copies the WAL back into the database file off
//! the write path.
//!
//! In WAL mode every commit appends to the `-wal` file, and a checkpoint
//! copies those pages into the database so the WAL can start over. Run on
//! the writer thread, a checkpoint of tens of megabytes stalls every write
//! queued behind it (measured under a TTL-churn load: p99.9 of 70 ms with a
//! 64 MiB threshold). A PASSIVE checkpoint, though, may run on another
//! connection *while* the writer appends: it never takes the write lock and
//! never waits for readers. So the writer only nudges this thread after its
//! commits, and this thread copies the WAL with PASSIVE checkpoints, often.
//!
//! Under constant writes a PASSIVE checkpoint never *completes* (new frames
//! arrive while it copies), so the WAL would never start over and would grow
//! until the writer's hard bound, whose TRUNCATE then stalled writes for
//! ~50 ms (most of it the `ftruncate` freeing the file's blocks). Starting
//! the WAL over needs the write lock, which the writer holds nearly all the
//! time under load, so this thread cannot do it itself (a RESTART from here
//! only waited and gave up). Instead, once the WAL holds [`RESTART_FRAMES`]
//! frames, it raises a flag, and the writer, between two batches, runs a
//! RESTART checkpoint: with nearly every frame already copied here, that
//! takes a millisecond or two, and the WAL starts over from its beginning
//! without being truncated. The writer keeps the hard bound (TRUNCATE past
//! `wal_checkpoint_bytes`) for when this thread cannot keep up.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use rusqlite::Connection;

use crate::config::AppendFsync;
use crate::error::Result;

/// WAL frames (pages) after which the WAL is restarted: 4 MiB of 4 KiB
/// pages, SQLite's own default checkpoint size.
const RESTART_FRAMES: i64 = 1024;

/// The shortest pause between two checkpoints: enough for the writer to
/// add a worthwhile amount, short enough that the WAL stays a few MiB.
const MIN_INTERVAL: Duration = Duration::from_millis(20);

/// Handle to the checkpointer thread.
pub(crate) struct Checkpointer {
    nudge: Sender<()>,
    /// Raised here, taken by the writer: the WAL is long and mostly copied,
    /// time to start it over.
    pub(crate) restart_due: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Opens a connection for checkpoints and starts the thread.
    pub(crate) fn start(path: &Path, fsync: AppendFsync) -> Result<Self> {
        let conn = Connection::open(path)?;
        // The checkpoint writes the database file; with `always` it must
        // reach the disk before the WAL is reused.
        let sync = match fsync {
            AppendFsync::Always => "FULL",
            AppendFsync::Everysec | AppendFsync::No => "NORMAL",
        };
        conn.pragma_update(None, "synchronous", sync)?;
        conn.pragma_update(None, "wal_autocheckpoint", 0)?;
        // At most one nudge waits: many commits during one checkpoint ask
        // for one more checkpoint, not many.
        let (nudge, rx) = crossbeam_channel::bounded(1);
        let restart_due = Arc::new(AtomicBool::new(false));
        let flag = restart_due.clone();
        let thread = std::thread::Builder::new()
            .name("respite-checkpointer".into())
            .spawn(move || run(conn, rx, flag))
            .map_err(crate::EngineError::Thread)?;
        Ok(Checkpointer {
            nudge,
            restart_due,
            thread: Some(thread),
        })
    }

    /// Asks for a checkpoint soon; never blocks.
    pub(crate) fn nudge(&self) {
        // Full: a checkpoint is already asked for. Disconnected: shutting
        // down. Neither needs anything done.
        let _ = self.nudge.try_send(());
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        // Closing the channel ends the thread after its current checkpoint.
        let (dead, _) = crossbeam_channel::bounded(1);
        self.nudge = dead;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(conn: Connection, rx: Receiver<()>, restart_due: Arc<AtomicBool>) {
    while rx.recv().is_ok() {
        match conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get::<_, i64>(1)) {
            Ok(frames) if frames >= RESTART_FRAMES => restart_due.store(true, Ordering::Relaxed),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "background checkpoint failed"),
        }
        std::thread::sleep(MIN_INTERVAL);
    }
}

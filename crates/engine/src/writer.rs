//! The writer thread: every write in the process goes through here, and it
//! commits them in groups.
//!
//! SQLite allows one writer at a time, and with `synchronous=FULL` every
//! commit costs an fsync. A server that commits once per write is therefore
//! bounded by fsyncs per second, and one that lets many threads write fights
//! over the lock and gets slower as clients are added (Redlite measured 16x
//! slower at 16 threads). respite instead funnels every write through one
//! queue to this one thread, which:
//!
//! 1. blocks until the first item arrives (an idle server does not spin, and
//!    no write waits for a timer);
//! 2. drains whatever else is already queued, up to `max_batch` operations;
//! 3. runs all of it in one `BEGIN IMMEDIATE` transaction; a command that
//!    fails has checked its inputs before writing anything, so it fails
//!    alone and the others still commit (see `txn.rs`);
//! 4. commits once (one fsync for the whole group);
//! 5. only then hands each operation's result back to its connection.
//!
//! The more clients write at once, the more each batch holds and the less each
//! write pays for its fsync: throughput grows with concurrency instead of
//! collapsing. The queue itself is unbounded: the server bounds it by
//! making connections take permits (one per operation) from an async
//! semaphore before they queue, so a flood waits without blocking a thread.
//! If the commit itself fails (disk full, I/O error), every
//! operation of the batch is answered with an error and nothing of it is
//! applied; the thread goes on with the next batch.
//!
//! Between batches the writer also does the housekeeping that must not race
//! with writes: deleting expired keys in bounded chunks, bounding the WAL
//! (checkpoints run on their own thread, see `checkpointer.rs`; the writer
//! starts the WAL over once it is copied, and waits for the copy when the
//! WAL reaches its bound), and (for `appendfsync everysec`) fsyncing the
//! WAL once a second.

use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use rusqlite::Connection;

use crate::blocking::{Blocking, Waiter};
use crate::cache::{Touched, ValueCache};
use crate::config::AppendFsync;
use crate::error::{EngineError, Result};
use crate::stats::Stats;
use crate::stmt_cache::Statements;
use crate::txn::Txn;
use crate::watch::Watches;

/// One operation: runs inside the batch's transaction and produces the
/// caller's reply value, or an error that rolls back only this operation.
pub type WriteOp<R> = Box<dyn FnOnce(&mut Txn<'_, '_>) -> Result<R> + Send>;

/// Called once with the results of all of an item's operations, in order,
/// after the transaction(s) holding them have committed (or failed).
pub type WriteDone<R> = Box<dyn FnOnce(Vec<Result<R>>) + Send>;

/// An item whose operations have all run (committed or failed), with its
/// results, on its way back to its connection.
pub struct Finished<R> {
    done: WriteDone<R>,
    results: Vec<Result<R>>,
}

impl<R> Finished<R> {
    /// Calls the item's completion callback with its results. A callback
    /// that panics (a bug) loses its own reply only, not the rest of its
    /// group, nor the thread or task delivering it.
    pub fn complete(self) {
        let call = std::panic::AssertUnwindSafe(|| (self.done)(self.results));
        if let Err(payload) = std::panic::catch_unwind(call) {
            tracing::error!(panic = %crate::panic_message(&*payload), "a write completion panicked");
        }
    }
}

/// How the writer hands back the items one commit finished, in queue order:
/// all of them at once, so that a server can wake its connections with one
/// signal per commit instead of one per item (see [`deliver_inline`] for the
/// plain way).
pub type Deliver<R> = Box<dyn Fn(Vec<Finished<R>>) + Send>;

/// Completes every finished item right on the writer thread. Fine for an
/// embedded engine; a server whose callbacks wake tasks of an async runtime
/// does better handing the whole batch over (respite-server's `delivery`):
/// waking a task from this thread once per item lets the woken thread
/// preempt the writer once per item when both share a core.
pub fn deliver_inline<R>() -> Deliver<R> {
    Box::new(|batch| {
        for finished in batch {
            finished.complete();
        }
    })
}

/// What a connection puts on the write queue: the consecutive writes of one
/// pipeline, answered together.
pub struct WriteItem<R> {
    /// The operations, applied in order.
    pub ops: Vec<WriteOp<R>>,
    /// Receives their results.
    pub done: WriteDone<R>,
}

/// Messages on the write queue.
pub(crate) enum Msg<R> {
    /// Operations to apply.
    Write(WriteItem<R>),
    /// Switch durability between batches (CONFIG SET appendfsync).
    SetFsync(AppendFsync),
    /// Keys a read found expired, to delete if they still are, with the
    /// read's keyspace events (see `view.rs`).
    Found(crate::notify::Found),
    /// Apply everything already queued, checkpoint, and stop; then call the
    /// callback.
    Shutdown(Box<dyn FnOnce() + Send>),
}

/// Settings the writer reads.
pub(crate) struct WriterSettings {
    pub checkpointer: crate::checkpointer::Checkpointer,
    pub wal_path: PathBuf,
    pub fsync: AppendFsync,
    pub max_batch: Arc<AtomicUsize>,
    /// Whether expired keys are swept (DEBUG SET-ACTIVE-EXPIRE).
    pub active_expire: Arc<std::sync::atomic::AtomicBool>,
    /// Until when the sweep waits (CLIENT PAUSE).
    pub expiry_paused_until: Arc<std::sync::Mutex<Option<Instant>>>,
    pub wal_checkpoint_bytes: u64,
    pub expire_chunk: usize,
    pub cache: Arc<ValueCache>,
    /// Told of the keys each commit changed (see `access.rs`).
    pub access: Arc<crate::access::Access>,
    /// Counts the keys each commit changed (INFO's
    /// `rdb_changes_since_last_save`).
    pub snapshots: Arc<crate::snapshot::Snapshots>,
    pub watches: Arc<Watches>,
    /// The encoding thresholds (see `encoding.rs`).
    pub thresholds: Arc<crate::encoding::Thresholds>,
    pub blocking: Arc<Blocking>,
    /// Keyspace notifications: the classes wanted, and where a committed
    /// group's events go (see `notify.rs`).
    pub notifier: Arc<crate::notify::Notifier>,
    /// Replication's feed (see `propagate.rs`).
    pub propagation: Arc<crate::propagate::Propagation>,
    /// Raised at every operation and every turn of the loop (see
    /// `Engine::writer_progress`).
    pub progress: Arc<std::sync::atomic::AtomicU64>,
    /// The disk budget and reserve (see `disk.rs`).
    pub disk: Arc<crate::disk::Disk>,
    /// `maxmemory` and its policy (see `evict.rs`).
    pub memory: Arc<crate::evict::Memory>,
    /// The database's page size, for measuring its live pages.
    pub page_size: u64,
    /// Whether another process checkpoints the WAL (`checkpoint =
    /// "external"`): then the writer never checkpoints, restarts or
    /// truncates it, and only watches it (see `Writer::watch_wal`).
    pub external: bool,
}

/// Where one operation's touched keys start in its transaction's
/// [`Touched`], who ran it and whether it flushed.
struct Mark {
    start: usize,
    origin: u64,
    flushed: bool,
    /// The keys are ones a read of this client found expired (0: not so).
    reader: u64,
}

impl Mark {
    /// An operation's mark, its keys starting at `start` (noted before
    /// they are absorbed into the transaction's).
    fn of(start: usize, txn: &Txn) -> Mark {
        Mark {
            start,
            origin: txn.origin,
            flushed: txn.flushed,
            reader: 0,
        }
    }
}

/// CLIENT TRACKING's changes of a committed transaction: each operation's
/// keys in order, or one flush for an operation that flushed (its touched
/// keys are only WATCH's).
fn changes_of(
    touched: &Touched,
    marks: &[Mark],
    remembers: Remembers,
) -> Vec<crate::notify::Change> {
    use crate::notify::Change;
    let keys = touched.keys();
    let mut out = Vec::new();
    // Reads inside EXEC, each at its place among the keys.
    let mut remembers = remembers.into_iter().peekable();
    let mut remember_until = |at: usize, out: &mut Vec<Change>| {
        while let Some((_, client, keys)) = remembers.next_if(|r| r.0 <= at) {
            out.push(Change::Remember { client, keys });
        }
    };
    for (i, m) in marks.iter().enumerate() {
        let end = marks.get(i + 1).map_or(keys.len(), |n| n.start);
        if m.flushed {
            remember_until(m.start, &mut out);
            out.push(Change::Flush { origin: m.origin });
            remember_until(end.saturating_sub(1).max(m.start), &mut out);
            continue;
        }
        let start = m.start.min(end);
        for (at, (_, key)) in keys.iter().enumerate().take(end).skip(start) {
            remember_until(at, &mut out);
            let key = key.clone();
            out.push(if m.reader != 0 {
                Change::Expired {
                    reader: m.reader,
                    key,
                }
            } else {
                Change::Key {
                    origin: m.origin,
                    key,
                }
            });
        }
    }
    remember_until(usize::MAX, &mut out);
    out
}

/// The reads inside EXEC whose keys CLIENT TRACKING remembers: (place in
/// the transaction's touched keys, client, keys).
type Remembers = Vec<(usize, u64, Vec<bytes::Bytes>)>;

/// A `Txn` for one operation, with the keyspace event classes wanted now.
fn new_txn<'a, 'c>(stmts: &'a Statements<'c>, settings: &'a WriterSettings) -> Txn<'a, 'c> {
    let mut txn = Txn::new(stmts, &settings.watches, &settings.thresholds);
    let mask = settings.notifier.mask();
    txn.set_notify(
        mask,
        settings.notifier.lazy_expiry(mask),
        settings.notifier.tracking(),
    );
    txn.propagating = settings.propagation.is_active();
    txn
}

/// A failure to write the list waiting in memory (see `elide.rs`) fails
/// the open transaction, as any failure after a write does.
fn note_elided_failure(stmts: &Statements<'_>, poisoned: &mut Option<String>) {
    if let Some(e) = stmts.elided_failure() {
        poisoned.get_or_insert_with(|| format!("writing a list's elements failed: {e}"));
    }
}

/// A wait for the write lock longer than this is logged.
const LONG_LOCK_WAIT: Duration = Duration::from_millis(100);

/// In external mode, how often the log repeats that the WAL is past its
/// warning threshold.
const WAL_WARN_EVERY: Duration = Duration::from_secs(60);

/// Whether an error is SQLite's "the lock is taken" (after the busy
/// timeout ran out).
fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _)
        if f.code == rusqlite::ErrorCode::DatabaseBusy)
}

/// How often the writer looks for expired keys and everysec work when idle.
const TICK: Duration = Duration::from_millis(100);

/// The WAL file's header, before its first frame.
const WAL_HEADER_BYTES: u64 = 32;

/// How long the writer must have had no write to apply before it asks the
/// checkpointer to copy whatever waits and start the WAL over (see
/// `checkpointer.rs`): long enough that a steady stream of writes with
/// gaps between its groups does not count as stopped.
const QUIET: Duration = Duration::from_millis(200);

/// The longest the writer waits between two groups for the checkpointer,
/// once the WAL has reached its bound (see `Writer::bound_wal`).
const CATCH_UP_WAIT: Duration = Duration::from_millis(10);

/// The same, once the WAL is past twice its bound.
const CATCH_UP_WAIT_FAR: Duration = Duration::from_millis(40);

/// While commits are this fast, groups are cut at [`OVERLAP_GROUP`]
/// operations (see [`group_cap`]).
const FAST_COMMIT_MICROS: u64 = 100;

/// The group size that lets the connections answer one group while the
/// writer applies the next, when commits are fast.
const OVERLAP_GROUP: usize = 256;

/// The most operations the next commit may hold. With a fast fsync (a disk
/// with a power-safe write cache, or this project's benchmark VM at 45 µs)
/// a smaller group lets the connection threads answer one group while the
/// writer applies the next: with 800 pipelined SETs in flight, groups of 256
/// beat groups of 1024 by 10-20%. With a slow fsync the opposite holds:
/// every extra commit costs a whole fsync, and at 0.5-2 ms per fsync groups
/// of 256 did 1.8-2.5x worse than 1024. So groups are cut at 256 only while
/// the last commit took under 100 µs; otherwise they take up to `max_batch`.
fn group_cap(max_batch: usize, last_commit_micros: u64) -> usize {
    if last_commit_micros < FAST_COMMIT_MICROS {
        max_batch.min(OVERLAP_GROUP)
    } else {
        max_batch
    }
}

/// A result slot of one queued item, while its operations are being applied.
struct Pending<R> {
    done: WriteDone<R>,
    total: usize,
    results: Vec<Result<R>>,
}

struct Writer<'s, 'c, R> {
    /// The writer's connection and its prepared statements.
    stmts: &'s Statements<'c>,
    /// Hands finished items back to their connections.
    deliver: Deliver<R>,
    stats: Arc<Stats>,
    settings: WriterSettings,
    /// Items taken off the queue and not answered yet.
    pending: Vec<Pending<R>>,
    /// Indexes `(item, op)` of the operations in the open transaction.
    in_txn: Vec<(usize, usize)>,
    /// Failed operations in the open transaction (for the stats).
    failed_in_txn: u64,
    /// Set when an operation failed after it had started writing: the open
    /// transaction can no longer be committed and is rolled back whole.
    poisoned: Option<String>,
    /// Keys the open transaction changed, dropped from the value cache
    /// just before it commits.
    touched: Touched,
    last_sweep: Instant,
    sweep_again: bool,
    last_sync: Instant,
    unsynced: bool,
    /// How long the last commit took, in µs (see [`group_cap`]).
    last_commit_micros: u64,
    /// When the disk was last measured (see `measure_disk`).
    last_measure: Instant,
    /// The WAL index, for the frames not yet copied (see `measure_disk`).
    wal_index: crate::checkpointer::WalIndex,
    /// Blocked clients served in the open transaction, told once it ends.
    served: Vec<Arc<dyn Waiter>>,
    /// The keyspace events of the open transaction, in the order its
    /// operations produced them; published once it commits.
    events: Vec<crate::notify::Event>,
    /// Where each operation's keys start in `touched`, with its client
    /// and whether it flushed: what CLIENT TRACKING's changes are made of
    /// once the transaction commits.
    marks: Vec<Mark>,
    /// Reads inside EXEC in the open transaction, whose keys CLIENT
    /// TRACKING remembers at their place (see `changes_of`).
    remembers: Remembers,
    /// The changes of the transaction just committed, for CLIENT TRACKING
    /// (made only while a client tracks; see `notify.rs`).
    changes: Vec<crate::notify::Change>,
    /// The open transaction's operations as commands for the replicas,
    /// handed on once it commits (see `propagate.rs`).
    propagated: Vec<Vec<crate::propagate::Command>>,
    /// The commands the running operation's commands noted, over their
    /// keys in `touched` (see `propagate.rs`).
    steps: Vec<crate::propagate::Step>,
    /// The WAL index's counters when last looked at, to notice a
    /// checkpoint another process ran (external mode).
    last_frames: Option<crate::checkpointer::WalFrames>,
    /// The most frames the WAL has been seen to hold (see `note_wal_size`).
    wal_peak_frames: u64,
    /// A commit since the checkpointer was last told of one.
    nudge_due: bool,
    /// When the log last said the WAL is past its threshold.
    last_wal_warning: Option<Instant>,
    /// Eviction's pool of candidates (see `evict.rs`).
    evictor: crate::evict::Evictor,
    /// The last eviction step stopped over the limit with more to evict:
    /// the next one runs at the next pause, without waiting for a tick.
    evict_again: bool,
    /// When the last eviction step ran.
    last_evict: Instant,
    /// Gives free pages back to the file system (see `vacuum.rs`).
    vacuum: crate::vacuum::Vacuum,
    /// When the last group of writes committed.
    last_write: Instant,
    /// Whether the checkpointer was asked for its round since then.
    quiet_asked: bool,
}

/// The writer thread's body. Returns when the queue is closed or a shutdown
/// message has been handled.
pub(crate) fn run<R: Send + 'static>(
    conn: Connection,
    rx: Receiver<Msg<R>>,
    settings: WriterSettings,
    stats: Arc<Stats>,
    deliver: Deliver<R>,
) {
    if settings.external {
        // An external checkpointer takes the write lock around its own
        // checkpoints; Litestream asks for at least 5 s.
        if let Err(e) = conn.busy_timeout(Duration::from_secs(5)) {
            tracing::warn!(error = %e, "could not set the writer's busy timeout");
        }
        // Nor does closing it checkpoint and delete the WAL, which SQLite
        // does when the last connection to a database closes (Litestream
        // stopped first).
        if let Err(e) = conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
            true,
        ) {
            tracing::warn!(error = %e, "could not turn off the checkpoint on close");
        }
    }
    let vacuum =
        crate::vacuum::Vacuum::new(!settings.external && crate::vacuum::incremental(&conn));
    let stmts = Statements::new(&conn);
    // `<db>-wal` -> `<db>-shm`.
    let shm_path = {
        use std::os::unix::ffi::{OsStrExt, OsStringExt};
        let mut bytes = settings.wal_path.as_os_str().as_bytes().to_vec();
        bytes.truncate(bytes.len().saturating_sub(3));
        bytes.extend_from_slice(b"shm");
        std::path::PathBuf::from(std::ffi::OsString::from_vec(bytes))
    };
    let mut w = Writer {
        stmts: &stmts,
        deliver,
        stats,
        settings,
        pending: Vec::new(),
        in_txn: Vec::new(),
        failed_in_txn: 0,
        poisoned: None,
        touched: Touched::default(),
        last_sweep: Instant::now(),
        sweep_again: false,
        last_sync: Instant::now(),
        unsynced: false,
        last_commit_micros: 0,
        served: Vec::new(),
        events: Vec::new(),
        marks: Vec::new(),
        remembers: Vec::new(),
        changes: Vec::new(),
        propagated: Vec::new(),
        steps: Vec::new(),
        last_measure: Instant::now(),
        wal_index: crate::checkpointer::WalIndex::new(shm_path),
        last_frames: None,
        wal_peak_frames: 0,
        nudge_due: false,
        last_wal_warning: None,
        evictor: crate::evict::Evictor::default(),
        evict_again: false,
        last_evict: Instant::now(),
        vacuum,
        last_write: Instant::now(),
        quiet_asked: false,
    };
    w.measure_disk();
    loop {
        w.settings.progress.fetch_add(1, Ordering::Relaxed);
        w.settings.access.tick();
        // While eviction has more to do, it goes on as soon as the queue
        // is empty instead of a tick later.
        let wait = if w.evict_again { Duration::ZERO } else { TICK };
        let first = match rx.recv_timeout(wait) {
            Ok(msg) => msg,
            Err(RecvTimeoutError::Timeout) => {
                w.housekeeping();
                w.when_quiet();
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let mut shutdown = None;
        let mut queued_ops = 0usize;
        let mut next = Some(first);
        // Drain what is already queued, without waiting for more.
        while let Some(msg) = next.take() {
            match msg {
                Msg::Write(item) => {
                    queued_ops += item.ops.len();
                    w.apply(item);
                }
                Msg::SetFsync(mode) => {
                    w.finish_txn();
                    w.set_fsync(mode);
                }
                // In queue order: a write the same client sent after the
                // read comes after the deletion.
                Msg::Found(f) => {
                    w.finish_txn();
                    w.expire_reported(vec![f]);
                }
                Msg::Shutdown(ack) => {
                    shutdown = Some(ack);
                    break;
                }
            }
            if queued_ops < w.group_cap() {
                next = rx.try_recv().ok();
            }
        }
        w.finish_txn();
        w.housekeeping();
        if let Some(ack) = shutdown {
            // Whatever was accepted before the shutdown still gets applied.
            while let Ok(msg) = rx.try_recv() {
                if let Msg::Write(item) = msg {
                    w.apply(item);
                }
            }
            w.finish_txn();
            w.checkpoint_at_stop();
            // Closed before the acknowledgement: from the moment the caller
            // of `shutdown` goes on, every later write is refused at once
            // rather than queued for nobody.
            drop(rx);
            ack();
            return;
        }
    }
    w.finish_txn();
    w.checkpoint_at_stop();
}

impl<'s, 'c, R> Writer<'s, 'c, R> {
    fn max_batch(&self) -> usize {
        self.settings.max_batch.load(Ordering::Relaxed).max(1)
    }

    /// The most operations the open or next commit may hold.
    fn group_cap(&self) -> usize {
        group_cap(self.max_batch(), self.last_commit_micros)
    }

    fn conn(&self) -> &'c Connection {
        self.stmts.conn()
    }

    fn exec(&self, sql: &'static str) -> rusqlite::Result<()> {
        self.stmts.get(sql)?.execute([])?;
        Ok(())
    }

    /// Opens the group's transaction. The write lock may be held by
    /// another process (an external checkpointer such as Litestream takes
    /// it around its checkpoints): SQLite's busy handler waits for it, and
    /// when the busy timeout runs out this tries again, for as long as it
    /// takes: a client's write waits, it never fails for a lock. A wait is
    /// counted for INFO (a BEGIN that took over a millisecond waited: an
    /// uncontended one takes microseconds), and a long one is logged.
    fn begin(&self) -> rusqlite::Result<()> {
        let started = Instant::now();
        let mut tries = 0u32;
        let result = loop {
            match self.exec("BEGIN IMMEDIATE") {
                Err(e) if is_busy(&e) => {
                    tries += 1;
                    self.settings.progress.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        ms = started.elapsed().as_millis() as u64,
                        "the write lock is still held by another process; waiting on"
                    );
                }
                other => break other,
            }
        };
        self.note_lock_wait(started, tries);
        result
    }

    /// Counts and logs a wait for the write lock (see [`Self::begin`]).
    fn note_lock_wait(&self, started: Instant, tries: u32) {
        let waited = started.elapsed();
        if tries > 0 || waited >= Duration::from_millis(1) {
            self.stats.record_lock_wait(waited.as_micros() as u64);
        }
        if waited >= LONG_LOCK_WAIT {
            tracing::info!(
                ms = waited.as_millis() as u64,
                "waited for the write lock (held by another process, e.g. an external checkpointer)"
            );
        }
    }

    /// Runs every operation of `item`, committing whenever the open
    /// transaction reaches `max_batch` operations.
    fn apply(&mut self, item: WriteItem<R>) {
        self.pending.push(Pending {
            done: item.done,
            total: item.ops.len(),
            results: Vec::with_capacity(item.ops.len()),
        });
        for (op_index, op) in item.ops.into_iter().enumerate() {
            // This item is the last pending one until its last op has run,
            // but not always at the same index: a commit in the middle of
            // it (below) answers and removes the items queued before it.
            let index = self.pending.len() - 1;
            if self.in_txn.is_empty() {
                if let Err(e) = self.begin() {
                    self.settings.disk.storage_failed(&e);
                    // Nothing can be applied now; answer this op and go on.
                    self.pending[index]
                        .results
                        .push(Err(EngineError::CommitFailed(e.to_string())));
                    self.stats.record_commit(1, 1, 0, false);
                    continue;
                }
            }
            let result = self.run_op(op);
            self.settings.progress.fetch_add(1, Ordering::Relaxed);
            if result.is_err() {
                self.failed_in_txn += 1;
            }
            self.pending[index].results.push(result);
            self.in_txn.push((index, op_index));
            if self.poisoned.is_some() || self.in_txn.len() >= self.group_cap() {
                self.finish_txn();
            }
        }
        self.deliver_ready();
    }

    /// Runs one operation in the open transaction. An operation that fails
    /// before writing has changed nothing; one that fails after writing
    /// poisons the transaction, which is then rolled back whole.
    fn run_op(&mut self, op: WriteOp<R>) -> Result<R> {
        // Where this operation's keys start in the transaction's list.
        let first_key = self.touched.keys().len();
        let mut txn = new_txn(self.stmts, &self.settings);
        // A panicking operation (a bug in a command) fails alone, and takes
        // its transaction down like a failure after writing: what it did
        // before panicking is unknown.
        let result = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| op(&mut txn))) {
            Ok(result) => result,
            Err(payload) => {
                let msg = crate::panic_message(&*payload);
                tracing::error!(panic = %msg, "a write operation panicked");
                self.poisoned = Some(format!("internal error: {msg}"));
                return Err(EngineError::Internal(msg));
            }
        };
        if let Err(EngineError::Storage(e)) = &result {
            self.settings.disk.storage_failed(e);
        }
        note_elided_failure(self.stmts, &mut self.poisoned);
        self.steps = txn.take_steps(first_key);
        let mut touched = txn.take_touched();
        self.marks.push(Mark::of(self.touched.keys().len(), &txn));
        if result.is_ok() && !txn.remembers.is_empty() {
            let base = self.touched.keys().len();
            self.remembers.extend(
                std::mem::take(&mut txn.remembers)
                    .into_iter()
                    .map(|(at, client, keys)| (base + at, client, keys)),
            );
        }
        // Keys its read commands found expired go now, in its transaction,
        // as redis deletes them at the lookup (see `view.rs`), but not
        // while a CLIENT PAUSE holds expiry. The server deletes them, not
        // the client (redis's `signalModifiedKey` with no client): NOLOOP
        // does not hide them from CLIENT TRACKING.
        let result = match result {
            Ok(r) if txn.view_found_expired() && !self.expiry_paused() => {
                match txn.expire_found() {
                    Ok(n) => {
                        self.stats.record_expired(n as u64);
                        let expired = txn.take_touched();
                        self.marks.push(Mark {
                            start: self.touched.keys().len() + touched.keys().len(),
                            origin: 0,
                            flushed: false,
                            reader: txn.origin,
                        });
                        touched.absorb(expired);
                        Ok(r)
                    }
                    Err(e) => {
                        if let EngineError::Storage(se) = &e {
                            self.settings.disk.storage_failed(se);
                        }
                        Err(e)
                    }
                }
            }
            other => other,
        };
        let whole = std::mem::take(&mut txn.whole);
        // WATCH and EXEC run on this thread too, so raising the versions
        // here, as the write happens, orders them exactly (see `watch.rs`).
        self.settings.watches.touch(&touched);
        match &result {
            Err(e) if txn.wrote() => self.poisoned = Some(e.to_string()),
            // Failed before writing: it changed nothing, so no event.
            Err(_) => {}
            Ok(_) => self.events.append(&mut txn.take_events()),
        }
        if !self.settings.blocking.is_empty() && self.poisoned.is_none() {
            let ready = self.settings.blocking.ready_keys(&touched);
            self.touched.absorb(touched);
            if !ready.is_empty() {
                // What serving them does is propagated after the operation,
                // as redis serves blocked clients after the command.
                let served_from = self.steps.len();
                self.serve_blocked(ready.into());
                for step in &mut self.steps[served_from..] {
                    step.alone = true;
                }
            }
        } else {
            self.touched.absorb(touched);
        }
        if result.is_ok() && self.poisoned.is_none() {
            self.propagate(first_key, &whole);
        } else {
            self.steps.clear();
        }
        result
    }

    /// Notes, for the replicas, what the operation that changed the keys
    /// from `first_key` on (and the `whole` changes) did; a small, separate
    /// step after each operation (see `propagate.rs`).
    ///
    /// The commands its commands noted ([`Txn::note_step`]) go first, in
    /// order; the keys none of them stands for (a key a read found
    /// expired, a command that noted nothing) follow as their state.
    fn propagate(&mut self, first_key: usize, whole: &[crate::propagate::Whole]) {
        let steps = std::mem::take(&mut self.steps);
        let Some(sink) = self.settings.propagation.sink() else {
            return;
        };
        let first_key = first_key.min(self.touched.keys().len());
        let keys = &self.touched.keys()[first_key..];
        if keys.is_empty() && whole.is_empty() && steps.is_empty() {
            return;
        }
        let mut covered = vec![false; keys.len()];
        let mut commands = Vec::new();
        let mut alone = Vec::new();
        for step in steps {
            for i in step.keys {
                if let Some(c) = i.checked_sub(first_key).and_then(|i| covered.get_mut(i)) {
                    *c = true;
                }
            }
            if step.alone {
                alone.push(step.commands);
            } else {
                commands.extend(step.commands);
            }
        }
        let rest: Vec<(u32, bytes::Bytes)> = keys
            .iter()
            .zip(&covered)
            .filter(|(_, c)| !**c)
            .map(|(k, _)| k.clone())
            .collect();
        if !rest.is_empty() || !whole.is_empty() {
            let view = crate::view::View::at(self.stmts, crate::view::now_ms());
            commands.extend(sink.effects(&view, &rest, whole));
        }
        if !commands.is_empty() {
            self.propagated.push(commands);
        }
        self.propagated
            .extend(alone.into_iter().filter(|c| !c.is_empty()));
    }

    /// Hands the committed transaction's commands to the replicas.
    /// Commits a transaction of the writer's own work (the expiry sweep,
    /// an eviction step): its keys go to the replicas and to CLIENT
    /// TRACKING only once the commit succeeded; a failed commit sends
    /// nothing.
    fn commit_own_work(&mut self) -> rusqlite::Result<()> {
        // Each key's command on its own, never wrapped in MULTI/EXEC: redis
        // propagates each expiration and eviction as it happens.
        let before = self.propagated.len();
        self.propagate(0, &[]);
        if self.propagated.len() > before {
            let work = self.propagated.split_off(before);
            self.propagated
                .extend(work.into_iter().flatten().map(|c| vec![c]));
        }
        if let Err(e) = self.commit() {
            self.propagated.clear();
            return Err(e);
        }
        self.propagate_committed();
        let changes = std::mem::take(&mut self.changes);
        self.settings.notifier.publish_changes(changes);
        Ok(())
    }

    fn propagate_committed(&mut self) {
        let ops = std::mem::take(&mut self.propagated);
        if ops.is_empty() {
            return;
        }
        if let Some(sink) = self.settings.propagation.sink() {
            sink.committed(ops);
        }
    }

    /// Serves the clients blocked on the `ready` keys, which a write just
    /// changed, in the open transaction (see `blocking.rs`): each key's
    /// waiters in the order they blocked, while the key lasts. Keys a serve
    /// changes (BLMOVE's destination) are served after.
    fn serve_blocked(&mut self, mut ready: std::collections::VecDeque<(u32, bytes::Bytes)>) {
        let blocking = self.settings.blocking.clone();
        while let Some((db, key)) = ready.pop_front() {
            for (id, waiter) in blocking.queue(db, &key) {
                if !waiter.waiting() {
                    blocking.remove(id);
                    continue;
                }
                let mut txn = new_txn(self.stmts, &self.settings);
                let attempt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    waiter.serve(&mut txn, db, &key)
                }));
                let mut steps = txn.take_steps(self.touched.keys().len());
                self.steps.append(&mut steps);
                let touched = txn.take_touched();
                self.marks.push(Mark::of(self.touched.keys().len(), &txn));
                self.settings.watches.touch(&touched);
                let more = blocking.ready_keys(&touched);
                self.touched.absorb(touched);
                let served = match attempt {
                    Ok(Ok(served)) => {
                        self.events.append(&mut txn.take_events());
                        served
                    }
                    Ok(Err(e)) => {
                        if txn.wrote() {
                            self.poisoned = Some(e.to_string());
                            return;
                        }
                        false
                    }
                    Err(payload) => {
                        let msg = crate::panic_message(&*payload);
                        tracing::error!(panic = %msg, "serving a blocked client panicked");
                        self.poisoned = Some(format!("internal error: {msg}"));
                        return;
                    }
                };
                if served {
                    blocking.remove(id);
                    self.served.push(waiter);
                    for k in more {
                        if !ready.contains(&k) {
                            ready.push_back(k);
                        }
                    }
                }
                // Once the key is gone, nobody else can be served from it.
                if !matches!(txn.exists_elided(db, &key), Ok(true)) {
                    break;
                }
            }
        }
    }

    /// Commits the open transaction, if any, and answers the items that are
    /// now complete.
    fn finish_txn(&mut self) {
        if self.in_txn.is_empty() {
            return;
        }
        // A list still waiting in memory is written before the commit, or
        // dropped with a group that is rolled back (see `elide.rs`).
        if self.poisoned.is_none() {
            let _ = self.stmts.write_elided();
        }
        note_elided_failure(self.stmts, &mut self.poisoned);
        self.stmts.discard_elided();
        let started = Instant::now();
        let commit = match self.poisoned.take() {
            None => self.commit().map_err(|e| {
                self.settings.disk.storage_failed(&e);
                e.to_string()
            }),
            Some(cause) => {
                self.touched = Touched::default();
                self.marks.clear();
                self.remembers.clear();
                Err(format!(
                    "a command in the same transaction failed while writing ({cause})"
                ))
            }
        };
        let micros = started.elapsed().as_micros() as u64;
        self.last_commit_micros = micros;
        let ops = self.in_txn.len() as u64;
        let served = std::mem::take(&mut self.served);
        let events = std::mem::take(&mut self.events);
        let changes = std::mem::take(&mut self.changes);
        match commit {
            Ok(()) => {
                self.stats
                    .record_commit(ops, self.failed_in_txn, micros, true);
                self.propagate_committed();
                // Before any reply of the group goes out, and only now
                // that the commit is visible to every new read (see
                // `notify.rs`).
                self.settings.notifier.publish_changes(changes);
                self.settings.notifier.publish(events);
                self.unsynced = true;
                self.last_write = Instant::now();
                self.quiet_asked = false;
                self.nudge_due = true;
                // With a budget or a limit, every commit is measured: the
                // refusal and eviction must follow the data closely.
                if self.settings.disk.maxdisk() > 0 || self.settings.memory.maxmemory() > 0 {
                    self.measure_disk();
                }
                for waiter in served {
                    waiter.finish(Ok(()));
                }
            }
            Err(e) => {
                self.propagated.clear();
                tracing::error!(error = %e, ops, "commit failed; the whole batch is answered with errors");
                let _ = self.exec("ROLLBACK");
                let msg = e.to_string();
                for &(item, op) in &self.in_txn {
                    self.pending[item].results[op] = Err(EngineError::CommitFailed(msg.clone()));
                }
                for waiter in served {
                    waiter.finish(Err(EngineError::CommitFailed(msg.clone())));
                }
                self.stats.record_commit(ops, ops, micros, false);
            }
        }
        self.in_txn.clear();
        self.failed_in_txn = 0;
        self.deliver_ready();
    }

    /// Answers, in queue order, every item whose operations all ran and are
    /// no longer in an open transaction: one hand-over for all of them.
    fn deliver_ready(&mut self) {
        let first_open = self.in_txn.first().map(|&(item, _)| item);
        let ready = self
            .pending
            .iter()
            .enumerate()
            .take_while(|(i, p)| p.results.len() == p.total && first_open.is_none_or(|o| *i < o))
            .count();
        if ready == 0 {
            return;
        }
        let finished = self
            .pending
            .drain(..ready)
            .map(|p| Finished {
                done: p.done,
                results: p.results,
            })
            .collect();
        (self.deliver)(finished);
        // Indexes into `pending` moved down by `ready`.
        for entry in &mut self.in_txn {
            entry.0 -= ready;
        }
    }

    /// Commits the open transaction. The keys it changed leave the value
    /// cache first, and no reader may fill the cache until the commit is
    /// over (see `cache.rs`): from the moment the new values are visible in
    /// SQLite, the cache holds nothing older. Once committed, the new
    /// values of cached keys that SET and the like stored go back in.
    fn commit(&mut self) -> rusqlite::Result<()> {
        let touched = std::mem::take(&mut self.touched);
        let cache = &self.settings.cache;
        let was_cached = cache.commit_started(&touched);
        // A COMMIT that comes back busy leaves the transaction open and
        // may be tried again (SQLite's documented behaviour); in WAL mode
        // the writer already holds the write lock, so this is a safety net.
        let started = Instant::now();
        let mut tries = 0u32;
        let result = loop {
            match self.exec("COMMIT") {
                Err(e) if is_busy(&e) => {
                    tries += 1;
                    self.settings.progress.fetch_add(1, Ordering::Relaxed);
                }
                other => break other,
            }
        };
        if tries > 0 {
            self.note_lock_wait(started, tries);
        }
        cache.commit_done();
        let marks = std::mem::take(&mut self.marks);
        let remembers = std::mem::take(&mut self.remembers);
        // Read only now that the commit is visible: a client that tracks a
        // key set the flag before it registered the key, and registered
        // it before its read began (see `notify.rs`).
        if result.is_ok() && self.settings.notifier.tracking() {
            self.changes = changes_of(&touched, &marks, remembers);
        }
        if result.is_ok() {
            cache.write_through(&touched, &was_cached);
            self.settings.access.committed(&touched);
            self.settings
                .snapshots
                .changes
                .fetch_add(touched.changed_keys(), Ordering::Relaxed);
        }
        result
    }

    fn set_fsync(&mut self, mode: AppendFsync) {
        let sync = match mode {
            AppendFsync::Always => "FULL",
            AppendFsync::Everysec | AppendFsync::No => "NORMAL",
        };
        match self.conn().pragma_update(None, "synchronous", sync) {
            Ok(()) => {
                crate::wal_gather::set_gathering(self.conn(), mode == AppendFsync::Always);
                self.settings.fsync = mode;
            }
            Err(e) => tracing::error!(error = %e, "could not change appendfsync"),
        }
    }

    /// Measures the database's live pages plus the WAL frames not yet
    /// copied into it, for `maxdisk` and INFO (two page-count reads from
    /// the database header and one read of the WAL index's header). The WAL
    /// file's own size is not counted: once copied, its frames are written
    /// over, and its size is bounded by the checkpoint settings.
    fn measure_disk(&mut self) {
        self.last_measure = Instant::now();
        let count = |pragma: &'static str| {
            self.stmts
                .get(pragma)
                .and_then(|mut s| s.query_row([], |r| r.get::<_, i64>(0)))
                .unwrap_or(0)
                .max(0) as u64
        };
        let free = count("PRAGMA freelist_count");
        let live = count("PRAGMA page_count").saturating_sub(free);
        let pending = self
            .wal_index
            .frames()
            .map_or(0, |f| f.last.saturating_sub(f.backfilled));
        let frame = self.settings.page_size + 24;
        self.settings.disk.set_used(
            live * self.settings.page_size + pending * frame,
            free * self.settings.page_size,
        );
        self.settings
            .memory
            .set_used(live * self.settings.page_size);
    }

    /// Work done between batches: expiry sweep, WAL fsync for everysec, and
    /// checkpointing.
    fn housekeeping(&mut self) {
        if self.last_measure.elapsed() >= Duration::from_secs(1) {
            self.measure_disk();
            // A full disk: the WAL is copied and truncated (its file is
            // what the deletions grew), then, if the file system has room,
            // the reserve comes back and writes are taken (see `disk.rs`).
            if self.settings.disk.is_full() {
                if !self.settings.external {
                    self.checkpoint();
                }
                self.settings.disk.try_recover();
            } else {
                self.settings.disk.top_up_reserve();
            }
        }
        // A CLIENT PAUSE holds the sweep; looked at only when one is due.
        if (self.sweep_again || self.last_sweep.elapsed() >= TICK)
            && self.settings.active_expire.load(Ordering::Relaxed)
            && !self.expiry_paused()
        {
            self.sweep_expired();
        }
        if self.settings.memory.take_changed() {
            self.measure_disk();
            self.evictor.clear();
            self.evict_again = false;
        }
        self.evict();
        self.vacuum_step();
        if self.settings.fsync == AppendFsync::Everysec
            && self.unsynced
            && self.last_sync.elapsed() >= Duration::from_secs(1)
        {
            self.sync_wal();
        }
        self.bound_wal();
    }

    /// Keeps the WAL within `wal_checkpoint_bytes` of frames without
    /// copying it on the write path: the checkpointer copies it (see
    /// checkpointer.rs), and the writer starts it over once it is copied.
    /// When the copy falls behind and the WAL reaches its bound, the writer
    /// waits for it between groups, a few milliseconds at a time and at
    /// most [`CATCH_UP_WAIT`] per group ([`CATCH_UP_WAIT_FAR`] past twice the
    /// bound): writes slow down to the pace of the copy instead of the WAL
    /// growing, and no commit waits behind a copy of the whole WAL.
    fn bound_wal(&mut self) {
        let frames = self.wal_index.frames();
        self.note_wal_size(frames);
        if std::mem::take(&mut self.nudge_due) {
            self.settings.checkpointer.committed(frames);
        }
        if self.settings.external {
            self.watch_wal();
            return;
        }
        let restart_due = self
            .settings
            .checkpointer
            .restart_due
            .swap(false, Ordering::Relaxed);
        let bound = self.settings.wal_checkpoint_bytes;
        let frame = self.settings.page_size + 24;
        let over = bound > 0 && frames.is_some_and(|f| f.last.saturating_mul(frame) > bound);
        if !over && !restart_due {
            return;
        }
        let started = Instant::now();
        if over {
            let far =
                frames.is_some_and(|f| f.last.saturating_mul(frame) > bound.saturating_mul(2));
            let budget = if far {
                CATCH_UP_WAIT_FAR
            } else {
                CATCH_UP_WAIT
            };
            while let Some(f) = self.wal_index.frames() {
                if f.last.saturating_sub(f.backfilled) <= crate::checkpointer::RESTART_TAIL_FRAMES {
                    self.restart_wal();
                    break;
                }
                if started.elapsed() >= budget {
                    break;
                }
                self.settings.checkpointer.nudge();
                std::thread::sleep(Duration::from_millis(1));
            }
        } else {
            self.restart_wal();
        }
        self.stats
            .record_wal_pause(started.elapsed().as_micros() as u64);
    }

    /// Once no write has come for [`QUIET`], asks the checkpointer, once, to
    /// copy whatever the WAL holds and have it started over (the restart
    /// itself runs in `bound_wal` at a later pause), so the next burst of
    /// writes finds an empty WAL instead of the last burst's frames.
    fn when_quiet(&mut self) {
        if self.settings.external || self.quiet_asked || self.last_write.elapsed() < QUIET {
            return;
        }
        self.quiet_asked = true;
        self.settings.checkpointer.copy_when_quiet();
    }

    /// External mode: notices the checkpoints another process runs (the
    /// WAL index shows more frames copied, or the WAL started over), for
    /// INFO, and warns, once a minute, while the WAL holds more than
    /// `wal_checkpoint_bytes` of frames: the external checkpointer has
    /// stopped or fallen behind, and the WAL grows with every write.
    fn watch_wal(&mut self) {
        let Some(now) = self.wal_index.frames() else {
            return;
        };
        if let Some(before) = self.last_frames {
            if now.backfilled > before.backfilled || now.last < before.last {
                self.stats.record_checkpoint_seen();
            }
        }
        self.last_frames = Some(now);
        let bound = self.settings.wal_checkpoint_bytes;
        let frames_bytes = now.last.saturating_mul(self.settings.page_size + 24);
        if bound > 0
            && frames_bytes > bound
            && self
                .last_wal_warning
                .is_none_or(|t| t.elapsed() >= WAL_WARN_EVERY)
        {
            self.last_wal_warning = Some(Instant::now());
            tracing::warn!(
                wal_bytes = frames_bytes,
                threshold = bound,
                "the WAL keeps growing: checkpoint is external, and the external checkpointer (Litestream?) has not started it over; is it running?"
            );
        }
    }

    /// Starts the WAL over once the checkpointer has copied nearly all of
    /// it (see checkpointer.rs). Waits at most a few milliseconds for the
    /// checkpointer or a reader; if they are busy, tries again later.
    fn restart_wal(&mut self) {
        let conn = self.conn();
        let _ = conn.busy_timeout(Duration::from_millis(5));
        let started = Instant::now();
        let result = conn.query_row("PRAGMA wal_checkpoint(RESTART)", [], |r| r.get::<_, i64>(0));
        self.stats
            .record_wal_restart(started.elapsed().as_micros() as u64);
        let _ = conn.busy_timeout(Duration::from_secs(2));
        match result {
            Ok(0) => self.stats.record_checkpoint(),
            Ok(_) => self
                .settings
                .checkpointer
                .restart_due
                .store(true, Ordering::Relaxed),
            Err(e) => tracing::warn!(error = %e, "WAL restart failed"),
        }
    }

    /// Deletes one bounded chunk of expired keys, and frees one chunk of
    /// dropped keys' elements, in its own transaction. A full chunk of
    /// either means more may be waiting, so the next pause sweeps again
    /// instead of waiting a whole tick.
    fn sweep_expired(&mut self) {
        self.last_sweep = Instant::now();
        let chunk = self.settings.expire_chunk.max(1);
        let result = (|| -> Result<crate::keyspace::Sweep> {
            // DEFERRED: a sweep that finds nothing takes no write lock and
            // costs no fsync.
            self.exec("BEGIN")?;
            let mut txn = new_txn(self.stmts, &self.settings);
            let n = match txn.expire_due(chunk) {
                Ok(n) => n,
                Err(e) => {
                    let _ = self.exec("ROLLBACK");
                    return Err(e);
                }
            };
            self.touched = txn.take_touched();
            self.marks.clear();
            self.marks.push(Mark::of(0, &txn));
            let events = txn.take_events();
            self.commit_own_work()?;
            self.settings.notifier.publish(events);
            Ok(n)
        })();
        match result {
            Ok(sweep) => {
                let n = sweep.expired;
                if n > 0 {
                    self.stats.record_expired(n as u64);
                    self.unsynced = true;
                }
                self.sweep_again = n >= chunk || sweep.more_to_free;
            }
            Err(e) => {
                let _ = self.exec("ROLLBACK");
                if let EngineError::Storage(e) = &e {
                    self.settings.disk.storage_failed(e);
                }
                tracing::warn!(error = %e, "expiry sweep failed");
                self.sweep_again = false;
            }
        }
    }

    /// Whether a CLIENT PAUSE holds expiry now.
    fn expiry_paused(&self) -> bool {
        self.settings
            .expiry_paused_until
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some_and(|until| Instant::now() < until)
    }

    /// Deletes the keys reads on the read pool found expired, if they still
    /// are, in a transaction of its own between groups (as the sweep), and
    /// publishes each read's events after the commit, its `expired` events
    /// where the read met the keys (see `view.rs`). A key a write replaced
    /// or the sweep deleted meanwhile is left alone, so each expired key is
    /// announced once. Under a CLIENT PAUSE nothing is deleted (redis
    /// 7.0's `expireIfNeeded` keeps the key then) and only the events go.
    fn expire_reported(&mut self, found: Vec<crate::notify::Found>) {
        if found.is_empty() {
            return;
        }
        let mut dones = Vec::new();
        let found: Vec<_> = found
            .into_iter()
            .map(|mut f| {
                dones.extend(f.done.take());
                f
            })
            .collect();
        // The results go back once the events are out, whatever happened.
        let hand_back = |dones: Vec<crate::read_pool::ReadDone>| {
            dones.into_iter().for_each(crate::read_pool::complete_read)
        };
        if self.expiry_paused() {
            for f in found {
                self.settings.notifier.publish(f.events);
            }
            hand_back(dones);
            return;
        }
        let mut published: Vec<crate::notify::Event> = Vec::new();
        let originals: Vec<Vec<crate::notify::Event>> =
            found.iter().map(|f| f.events.clone()).collect();
        let result = (|| -> Result<usize> {
            // DEFERRED: when every key is gone already, no write lock.
            self.exec("BEGIN")?;
            let mut txn = new_txn(self.stmts, &self.settings);
            let mut n = 0;
            let mut marks = Vec::new();
            for f in found {
                marks.push(Mark {
                    start: txn.touched.keys().len(),
                    origin: 0,
                    flushed: false,
                    reader: f.reader,
                });
                let mut events = f.events;
                match txn.expire_reported(f.expired, &mut events) {
                    Ok(k) => n += k,
                    Err(e) => {
                        let _ = self.exec("ROLLBACK");
                        return Err(e);
                    }
                }
                published.append(&mut events);
            }
            self.touched = txn.take_touched();
            self.marks = marks;
            self.commit_own_work()?;
            Ok(n)
        })();
        match result {
            Ok(n) => {
                if n > 0 {
                    self.stats.record_expired(n as u64);
                    self.unsynced = true;
                }
                self.settings.notifier.publish(published);
            }
            Err(e) => {
                let _ = self.exec("ROLLBACK");
                self.touched = Touched::default();
                self.marks.clear();
                if let EngineError::Storage(e) = &e {
                    self.settings.disk.storage_failed(e);
                }
                tracing::warn!(error = %e, "deleting keys reads found expired failed");
                // The reads' own events still go; the sweep deletes the
                // keys and announces them.
                for events in originals {
                    self.settings.notifier.publish(events);
                }
            }
        }
        hand_back(dones);
    }

    /// One bounded eviction step (see `evict.rs`), in its own transaction,
    /// while the live bytes are over `maxmemory` under a policy that
    /// evicts. A step that found nothing to evict makes the limit refuse
    /// `denyoom` commands, and is tried again once a tick.
    fn evict(&mut self) {
        use crate::evict::Policy;
        let memory = self.settings.memory.clone();
        if !memory.over() || memory.policy() == Policy::NoEviction {
            self.evict_again = false;
            return;
        }
        if !self.evict_again && self.last_evict.elapsed() < TICK && memory.refusal().is_some() {
            return;
        }
        self.last_evict = Instant::now();
        let started = Instant::now();
        let watches = self.settings.watches.clone();
        let thresholds = self.settings.thresholds.clone();
        let access = self.settings.access.clone();
        let page_size = self.settings.page_size;
        let result = (|| -> Result<crate::evict::Step> {
            // DEFERRED: a step that finds nothing takes no write lock.
            self.exec("BEGIN")?;
            let mut txn = Txn::new(self.stmts, &watches, &thresholds);
            let step = match self.evictor.step(
                &mut txn,
                &memory,
                &access,
                page_size,
                crate::evict::STEP_BUDGET,
            ) {
                Ok(step) => step,
                Err(e) => {
                    let _ = self.exec("ROLLBACK");
                    return Err(e);
                }
            };
            let touched = txn.take_touched();
            // An evicted key counts as changed for WATCH, as in Redis.
            watches.touch(&touched);
            self.touched = touched;
            self.marks.clear();
            self.marks.push(Mark::of(0, &txn));
            self.commit_own_work()?;
            Ok(step)
        })();
        match result {
            Ok(step) => {
                let n = step.evicted.len() as u64;
                self.stats
                    .record_evict_step(started.elapsed().as_micros() as u64);
                if n > 0 {
                    memory.count_evicted(n);
                    self.unsynced = true;
                    self.settings.checkpointer.nudge();
                    self.published_evictions(&step.evicted);
                }
                self.measure_disk();
                memory.set_failing(step.nothing_left && memory.over());
                self.evict_again = !step.under && !step.nothing_left && memory.over();
            }
            Err(e) => {
                let _ = self.exec("ROLLBACK");
                if let EngineError::Storage(e) = &e {
                    self.settings.disk.storage_failed(e);
                }
                tracing::warn!(error = %e, "eviction step failed");
                self.evict_again = false;
            }
        }
    }

    /// Publishes the `evicted` keyspace event of each key an eviction
    /// step evicted, once it has committed, in order (redis's
    /// `notifyKeyspaceEvent(NOTIFY_EVICTED, "evicted", key, db)` after
    /// each key it evicts).
    fn published_evictions(&self, evicted: &[(u32, Vec<u8>)]) {
        let notifier = &self.settings.notifier;
        if notifier.mask() & crate::notify::EVICTED == 0 {
            return;
        }
        let events = evicted
            .iter()
            .map(|(db, key)| crate::notify::Event {
                class: crate::notify::EVICTED,
                event: "evicted",
                db: *db,
                key: bytes::Bytes::copy_from_slice(key),
            })
            .collect();
        notifier.publish(events);
    }

    /// One step of the incremental vacuum, when one is due (see
    /// `vacuum.rs`): a small transaction of its own between two groups.
    fn vacuum_step(&mut self) {
        let stmts = self.stmts;
        let count = |pragma: &'static str| {
            stmts
                .get(pragma)
                .and_then(|mut s| s.query_row([], |r| r.get::<_, i64>(0)))
                .unwrap_or(0)
                .max(0) as u64
        };
        let counts = || (count("PRAGMA freelist_count"), count("PRAGMA page_count"));
        match self
            .vacuum
            .maybe_step(self.conn(), self.settings.page_size, counts)
        {
            Ok(Some(step)) => {
                self.unsynced = true;
                self.stats
                    .record_vacuum(step.pages, step.took.as_micros() as u64);
            }
            Ok(None) => {}
            // A full disk (the step's WAL frames did not fit) or a lock
            // held by another process: tried again in 30 s (vacuum.rs).
            Err(e) => tracing::warn!(error = %e, "incremental vacuum step failed"),
        }
    }

    /// Keeps INFO's peak WAL size, without a `stat` of the file per group:
    /// the file grows only by frames written past its end, so it is looked
    /// at only when the WAL holds more frames than ever before (or when the
    /// index cannot be read); otherwise its frames' own length is counted,
    /// which after CONFIG RESETSTAT brings the peak back as they refill.
    fn note_wal_size(&mut self, frames: Option<crate::checkpointer::WalFrames>) {
        let bytes = match frames {
            Some(f) if f.last <= self.wal_peak_frames => {
                WAL_HEADER_BYTES + f.last * (self.settings.page_size + 24)
            }
            Some(f) => {
                self.wal_peak_frames = f.last;
                self.wal_size()
            }
            None => self.wal_size(),
        };
        self.stats.record_wal_size(bytes);
    }

    fn wal_size(&self) -> u64 {
        std::fs::metadata(&self.settings.wal_path)
            .map(|m| m.len())
            .unwrap_or(0)
    }

    /// Makes the WAL durable now (everysec): fsync of the WAL file, the
    /// same effect as `synchronous=FULL` at one commit.
    fn sync_wal(&mut self) {
        match File::open(&self.settings.wal_path).and_then(|f| f.sync_data()) {
            Ok(()) => {
                self.unsynced = false;
                self.last_sync = Instant::now();
            }
            Err(e) => tracing::warn!(error = %e, "fsync of the WAL failed"),
        }
    }

    /// A clean stop: the checkpointer is stopped (a checkpoint of its own
    /// under way would make this one fail at once), then the WAL is copied
    /// into the database and truncated to nothing, so the next start finds
    /// no WAL to recover. A reader still finishing a read can hold the
    /// truncation up; it is tried again for a few seconds.
    fn checkpoint_at_stop(&mut self) {
        self.settings.checkpointer.stop();
        if self.settings.external {
            // The WAL belongs to the external checkpointer, which has not
            // replicated its last frames yet, perhaps.
            tracing::info!(
                wal_bytes = self.wal_size(),
                "checkpoint is external: the WAL is left for the external checkpointer"
            );
            return;
        }
        let started = Instant::now();
        let deadline = started + Duration::from_secs(5);
        loop {
            let result = self
                .conn()
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                    Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?))
                });
            match result {
                Ok((0, _)) => {
                    self.stats.record_checkpoint();
                    tracing::info!(
                        ms = started.elapsed().as_millis() as u64,
                        "copied the WAL into the database and emptied it"
                    );
                    return;
                }
                Ok(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Ok(_) => {
                    tracing::warn!(
                        wal_bytes = self.wal_size(),
                        "the WAL could not be emptied at the stop (busy); the next start copies it"
                    );
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the WAL could not be emptied at the stop; the next start copies it");
                    return;
                }
            }
        }
    }

    /// Copies the WAL into the database and truncates it, on a full disk
    /// (the WAL's file is what the deletions grew). TRUNCATE waits, within
    /// the busy timeout, for readers to move off the old WAL, so it cannot
    /// starve while reads never stop. Read transactions here are short.
    fn checkpoint(&mut self) {
        let result = self
            .conn()
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                r.get::<_, i64>(0)
            });
        match result {
            Ok(0) => {
                self.stats.record_checkpoint();
                self.unsynced = false;
            }
            Ok(_) => tracing::debug!("checkpoint busy; will retry after the next batch"),
            Err(e) => tracing::warn!(error = %e, "checkpoint failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::group_cap;

    #[test]
    fn groups_are_cut_short_only_while_commits_are_fast() {
        // Fast commits: overlap with the connections in groups of 256.
        assert_eq!(group_cap(1024, 40), 256);
        // A slow fsync: every commit counts, take all that is allowed.
        assert_eq!(group_cap(1024, 2_000), 1024);
        // The configured cap always wins, and 1 is batching off.
        assert_eq!(group_cap(100, 40), 100);
        assert_eq!(group_cap(1, 40), 1);
        assert_eq!(group_cap(1, 2_000), 1);
    }
}

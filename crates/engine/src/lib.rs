//! respite-engine: a Redis keyspace kept in SQLite, durable by default, and
//! fast under concurrent writes because it commits them in groups.
//!
//! The engine owns everything that touches SQL; the server above it speaks
//! RESP and never writes a query. It is plain threads and channels, no async
//! runtime, so it can be embedded in any program.
//!
//! There are two ways in:
//!
//! - **Writes** go through [`Engine::submit_write`] onto one queue
//!   consumed by one writer thread ([`writer`]). The writer drains whatever
//!   has queued up, applies it in one transaction, commits once (one fsync for
//!   the whole group) and only then calls each item's completion callback.
//!   A write operation is a closure over a [`Txn`], so commands that read
//!   before they write (INCR, APPEND, SET ... GET) see every earlier write.
//! - **Reads** go through [`Engine::submit_read`] to a pool of read-only WAL
//!   connections ([`read_pool`]), each job in a fresh snapshot, never waiting
//!   for the writer.
//!
//! - Hot **string reads** can skip the pool: [`Engine::cache`] is a bounded
//!   in-memory [`cache`] of values the readers found, which the writer empties
//!   of every key a transaction changes just before committing it.
//!
//! The keyspace layout is in [`schema`]. The typed operations are organised
//! by data type: [`keyspace`] (key rows, expiry, renaming, iteration, and
//! the one gate every collection write goes through), [`string`], [`hash`],
//! [`set`], [`list`], [`zset`] (whose rank blocks keep ZRANK off a
//! scan) and [`stream`] (with its consumer groups), each with its reads (on a [`View`], expiry-aware) and its writes
//! (on a [`Txn`]) and their SQL side by side; no SQL lives outside
//! this crate. [`glob`] is Redis's pattern matching, and [`stats`] the
//! group-commit figures INFO reports. [`blocking`] keeps the clients
//! blocked on keys (BLPOP...), which the writer serves right after the
//! write that readies their key, in the same transaction.
//! What each `appendfsync` setting survives is written down in
//! `docs/durability.md`.

#![warn(missing_docs)]

pub mod access;
pub mod blocking;
pub mod c_heap;
pub mod cache;
pub mod checkpointer;
pub mod completion;
pub mod config;
pub mod disk;
pub mod encoding;
pub mod error;
pub mod evict;
pub mod function;
pub mod geo;
pub mod glob;
pub mod hash;
pub mod hyperloglog;
pub mod keyspace;
pub mod list;
pub mod load;
pub mod notify;
pub mod owner;
pub mod page_cache;
pub mod propagate;
pub mod read_advice;
pub mod read_pool;
pub mod replica;
pub mod repr;
pub mod schema;
pub mod set;
pub mod snapshot;
pub mod stats;
pub mod stmt_cache;
pub mod stream;
pub mod string;
pub mod txn;
pub mod upstream;
pub mod vacuum;
pub mod view;
pub mod wal_gather;
pub mod watch;
pub mod writer;
pub mod zset;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crossbeam_channel::Sender;

/// The longest string (or key, field, member, element) respite stores.
/// SQLite is built with its largest `SQLITE_MAX_LENGTH`, 2^31-1 bytes (see
/// `.cargo/config.toml`), and the longest row holds a key and a value (or a
/// field and a value) side by side: two of these and a row's few bytes of
/// header stay under it, so no write within this bound fails inside
/// SQLite. Redis's own largest string, 512 MiB, is well inside; the server
/// refuses a `proto-max-bulk-len` above this.
pub const MAX_STRING_LEN: usize = (i32::MAX as usize) / 2 - 64 * 1024;

pub use access::Access;
pub use blocking::{Blocking, Waiter};
pub use cache::{CacheStats, ValueCache};
pub use config::{AppendFsync, Checkpoint, EngineConfig};
pub use disk::Disk;
pub use error::{EngineError, Result};
pub use evict::{Memory, Policy};
pub use function::StoredLibrary;
pub use keyspace::{DbCounts, Entry, KeyRow, ScanPage, Slot};
pub use owner::{OwnerError, OwnerLock};
pub use read_pool::{
    complete_read, deliver_reads_inline, DeliverReads, ReadDone, ReadJob, ReadNeeds,
};
pub use schema::Kind;
pub use snapshot::{SnapshotError, SnapshotStatus, Snapshots};
pub use stats::StatsSnapshot;

pub use txn::Txn;
pub use view::{now_ms, View};
pub use watch::Watches;

/// The message of a caught panic, for logs and error replies.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_string()
    }
}
pub use writer::{deliver_inline, Deliver, Finished, WriteDone, WriteItem, WriteOp};

use stats::Stats;
use writer::Msg;

/// Bytes written to storage, from [`Engine::disk_writes`].
#[derive(Debug, Clone, Copy)]
pub struct DiskWrites {
    /// Bytes since the statistics were last reset.
    pub bytes: u64,
    /// Those bytes per write operation applied (0 before the first).
    pub per_op: u64,
}

/// This process's `write_bytes` from /proc/self/io: what the kernel counted
/// as sent to storage on its behalf, at the time pages are dirtied.
fn process_write_bytes() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    io.lines()
        .find_map(|l| l.strip_prefix("write_bytes:"))
        .and_then(|v| v.trim().parse().ok())
}

/// What a WAL file held when the engine found it, before SQLite opened it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct WalFound {
    /// The file's size in bytes.
    bytes: u64,
    /// The page size its header names (0 if the header is short or bad).
    page_size: u32,
    /// Whole frames the file holds after its 32-byte header. An upper
    /// bound on what recovery keeps: a WAL that was started over after a
    /// checkpoint keeps the older frames behind the new ones until it is
    /// overwritten, and recovery stops at the first frame whose checksum
    /// or salt does not follow on (the end of the last complete commit).
    frames: u64,
}

impl WalFound {
    /// Reads the size and header of the WAL at `path` (None: no file or
    /// an empty one, which is what a clean stop leaves).
    fn read(path: &std::path::Path) -> Option<WalFound> {
        use std::io::Read;
        let mut file = std::fs::File::open(path).ok()?;
        let bytes = file.metadata().ok()?.len();
        if bytes == 0 {
            return None;
        }
        let mut header = [0u8; 32];
        let page_size = match file.read_exact(&mut header) {
            // The WAL format (sqlite.org/fileformat.html, "WAL File
            // Format"): a big-endian magic number, the format version, then
            // the page size at offset 8.
            Ok(()) => u32::from_be_bytes([header[8], header[9], header[10], header[11]]),
            Err(_) => 0,
        };
        Some(WalFound::from_header(bytes, page_size))
    }

    fn from_header(bytes: u64, page_size: u32) -> WalFound {
        // A valid page size is a power of two from 512 to 65536; anything
        // else is a torn or foreign header, and SQLite will ignore the file.
        let valid = page_size.is_power_of_two() && (512..=65536).contains(&page_size);
        let frames = if valid {
            bytes.saturating_sub(32) / (u64::from(page_size) + 24)
        } else {
            0
        };
        WalFound {
            bytes,
            page_size: if valid { page_size } else { 0 },
            frames,
        }
    }
}

/// After an unclean stop: SQLite's own recovery rebuilds the WAL index from
/// the WAL's checksummed frames when the file is first read (a commit is in
/// the WAL whole or not at all; frames of a commit that never finished are
/// ignored), and nothing else in respite's layout needs rebuilding. This
/// copies the recovered commits into the database and empties the WAL
/// before any client connects, and says so in the log: what the file held
/// (`found`), the frames SQLite kept as committed, and how long the open,
/// recovery and copy took together (`started` is taken before the open,
/// since SQLite recovers the WAL on the open's first read).
fn recover(conn: &rusqlite::Connection, found: WalFound, started: std::time::Instant) {
    tracing::warn!(
        wal_bytes = found.bytes,
        wal_frames = found.frames,
        wal_page_size = found.page_size,
        "the last run did not stop cleanly: recovering the commits in its WAL"
    );
    // A PASSIVE checkpoint first, for the counts: it reports the frames
    // recovery kept and how many it copied, where a TRUNCATE reports the
    // emptied WAL (0 and 0). With no reader yet it copies everything, and
    // the TRUNCATE after it only empties the file.
    let checkpoint = |mode: &str| {
        conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
            ))
        })
    };
    let copied = checkpoint("PASSIVE").and_then(|(_, frames, copied)| {
        let (busy, _, _) = checkpoint("TRUNCATE")?;
        Ok((busy, frames, copied))
    });
    match copied {
        Ok((busy, frames, copied)) => tracing::info!(
            frames,
            copied,
            complete = busy == 0,
            ms = started.elapsed().as_millis() as u64,
            "recovered the WAL into the database"
        ),
        // The commits are safe in the WAL (SQLite has already rebuilt its
        // index to open the schema); copying them can wait for the
        // checkpointer, e.g. once a full disk has room again.
        Err(e) => tracing::warn!(
            error = %e,
            ms = started.elapsed().as_millis() as u64,
            "the recovered WAL could not be copied into the database yet; serving from the WAL"
        ),
    }
}

/// How the engine hands finished work back: the writer, each commit's
/// finished items at once; the readers, the results of the jobs each ran in
/// a row. Grouping lets a server wake its connections once per group.
pub struct Delivery<R> {
    /// For the writer's finished items.
    pub writes: Deliver<R>,
    /// For the readers' results.
    pub reads: DeliverReads,
}

impl<R: Send + 'static> Delivery<R> {
    /// Completes everything on the thread that finished it.
    pub fn inline() -> Self {
        Delivery {
            writes: deliver_inline(),
            reads: deliver_reads_inline(),
        }
    }
}

/// A running engine: the writer thread, the read pool, and their queues.
/// `R` is the type write operations produce (the server's reply type).
pub struct Engine<R: Send + 'static> {
    write_tx: Sender<Msg<R>>,
    /// The writer's queue as the readers reach it (see `view.rs`): they
    /// hold it weakly.
    _found_tx: Option<Arc<Sender<Msg<R>>>>,
    read_tx: Sender<read_pool::ReadRequest>,
    stats: Arc<Stats>,
    max_batch: Arc<AtomicUsize>,
    /// Whether the writer sweeps expired keys (DEBUG SET-ACTIVE-EXPIRE).
    active_expire: Arc<std::sync::atomic::AtomicBool>,
    /// Until when the sweep waits (CLIENT PAUSE).
    expiry_paused_until: Arc<Mutex<Option<std::time::Instant>>>,
    wal_path: PathBuf,
    db_path: PathBuf,
    /// The database's page size, read once at open.
    page_size: u32,
    /// Who checkpoints the WAL.
    checkpoint: Checkpoint,
    /// `write_bytes` of /proc/self/io when the statistics were last reset.
    io_base: std::sync::atomic::AtomicU64,
    copy_threshold: Arc<std::sync::atomic::AtomicU64>,
    cache: Arc<ValueCache>,
    /// Last access and frequency per key, keyspace hits and misses.
    access: Arc<Access>,
    watches: Arc<Watches>,
    /// The encoding thresholds (see `encoding.rs`).
    thresholds: Arc<encoding::Thresholds>,
    blocking: Arc<Blocking>,
    /// Keyspace notifications (see `notify.rs`).
    notifier: Arc<notify::Notifier>,
    propagation: Arc<propagate::Propagation>,
    snapshots: Arc<Snapshots>,
    snapshot_path: PathBuf,
    /// Goes up every time the writer finishes an operation or goes round
    /// its loop (at least every 100 ms while idle): a watchdog that sees it
    /// stand still knows the writer is stuck.
    progress: Arc<AtomicU64>,
    /// The disk budget, the reserve, and storage errors (see `disk.rs`).
    disk: Arc<Disk>,
    /// `maxmemory`, its policy and the keys evicted (see `evict.rs`).
    memory: Arc<Memory>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// A read replica (see [`replica`]).
    replica: bool,
    /// Released last, after every thread using the file has stopped.
    _owner: OwnerLock,
}

impl<R: Send + 'static> Engine<R> {
    /// Opens (creating if needed) the database at `config.path` and starts
    /// the writer thread and the read pool. Completions run on the thread
    /// that finished the work ([`Delivery::inline`]).
    pub fn open(config: EngineConfig) -> Result<Self> {
        Self::open_with_delivery(config, Delivery::inline())
    }

    /// Like [`Engine::open`], with finished work handed back in groups
    /// through `delivery` (which must complete every item it is given).
    /// Claims the database first ([`OwnerLock`]): a file another process
    /// serves is refused with [`EngineError::Owner`].
    pub fn open_with_delivery(config: EngineConfig, delivery: Delivery<R>) -> Result<Self> {
        let owner = OwnerLock::acquire(&config.path)?;
        Self::open_owned(config, delivery, owner)
    }

    /// Like [`Engine::open_with_delivery`], with the database already
    /// claimed by the caller (the daemon claims it before binding its
    /// listeners, so that a second daemon is told who owns the file rather
    /// than that the port is taken, and never touches the first one's Unix
    /// socket). `owner` must be the lock of `config.path`.
    pub fn open_owned(
        config: EngineConfig,
        delivery: Delivery<R>,
        owner: OwnerLock,
    ) -> Result<Self> {
        if config.replica {
            return Self::open_replica(config, delivery, owner);
        }
        let Delivery {
            writes: deliver,
            reads: deliver_reads,
        } = delivery;
        // A clean stop checkpoints the WAL and leaves it empty; one that
        // still holds frames means the last run did not stop cleanly.
        let mut wal = config.path.clone().into_os_string();
        wal.push("-wal");
        let wal_path = PathBuf::from(wal);
        let unclean_wal = WalFound::read(&wal_path);
        let opening = std::time::Instant::now();
        let conn = schema::open_writer(
            &config.path,
            config.appendfsync,
            config.journal_size_limit,
            config.page_size,
        )?;
        let page_size: u32 = conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
        let external = config.checkpoint == Checkpoint::External;
        if !external && schema::has_litestream_tables(&conn)? {
            return Err(EngineError::LitestreamAttached);
        }
        match unclean_wal {
            // A clean stop in external mode leaves the WAL, by design, to
            // the external checkpointer: it cannot tell a crash, and needs
            // no telling (SQLite recovers the WAL's committed frames
            // either way, and copying them is that checkpointer's job).
            Some(found) if external => tracing::info!(
                wal_bytes = found.bytes,
                wal_frames = found.frames,
                "checkpoint is external: the WAL found at the start is left to the external checkpointer"
            ),
            Some(found) => recover(&conn, found, opening),
            None => {}
        }
        let stats = Arc::new(Stats::new());
        let max_batch = Arc::new(AtomicUsize::new(config.max_batch.max(1)));
        let active_expire = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let expiry_paused_until = Arc::new(Mutex::new(None));
        let cache = Arc::new(ValueCache::new(config.read_cache_bytes));
        let access = Arc::new(Access::new());
        let snapshots = Arc::new(Snapshots::new(&config.path, &config.snapshot_path()));
        let watches = Arc::new(Watches::default());
        let thresholds = Arc::new(encoding::Thresholds::default());
        let blocking = Arc::new(Blocking::default());
        let notifier = notify::Notifier::new();
        access.notify_misses_to(notifier.clone());
        let propagation = Arc::new(propagate::Propagation::default());
        let progress = Arc::new(AtomicU64::new(0));
        let disk = Arc::new(Disk::new(
            &config.path,
            config.disk_reserve_bytes,
            config.maxdisk,
        ));
        let memory = Arc::new(Memory::default());
        let pool = read_pool::ReadPool::start(
            &config.path,
            config.readers,
            cache.clone(),
            access.clone(),
            deliver_reads,
            false,
        )?;
        // Unbounded here: the server bounds operations in flight with an
        // async semaphore, so connection tasks wait without blocking a thread.
        let (write_tx, write_rx) = crossbeam_channel::unbounded();
        // Reads hand the keys they found expired to the writer (see
        // `view.rs`) through a weak handle: the queue still closes when the
        // engine goes.
        let found_tx = Arc::new(write_tx.clone());
        let weak_tx = Arc::downgrade(&found_tx);
        notifier.set_found_sink(Box::new(move |found| {
            if let Some(tx) = weak_tx.upgrade() {
                let _ = tx.send(Msg::Found(found));
            }
        }));
        let checkpointer = if external {
            checkpointer::Checkpointer::disabled()
        } else {
            checkpointer::Checkpointer::start(
                &config.path,
                config.appendfsync,
                config.checkpoint_wal_bytes,
                config.checkpoint_wal_percent,
                config.wal_checkpoint_bytes,
            )?
        };
        let copy_threshold = checkpointer.copy_threshold.clone();
        let settings = writer::WriterSettings {
            checkpointer,
            wal_path: wal_path.clone(),
            fsync: config.appendfsync,
            max_batch: max_batch.clone(),
            active_expire: active_expire.clone(),
            expiry_paused_until: expiry_paused_until.clone(),
            wal_checkpoint_bytes: config.wal_checkpoint_bytes,
            expire_chunk: config.expire_chunk,
            cache: cache.clone(),
            access: access.clone(),
            snapshots: snapshots.clone(),
            watches: watches.clone(),
            thresholds: thresholds.clone(),
            blocking: blocking.clone(),
            notifier: notifier.clone(),
            propagation: propagation.clone(),
            progress: progress.clone(),
            disk: disk.clone(),
            memory: memory.clone(),
            page_size: u64::from(page_size),
            external,
        };
        let writer_stats = stats.clone();
        let writer = std::thread::Builder::new()
            .name("respite-writer".into())
            .stack_size(SCRIPT_STACK)
            .spawn(move || {
                let run = std::panic::AssertUnwindSafe(|| {
                    writer::run(conn, write_rx, settings, writer_stats, deliver)
                });
                if let Err(payload) = std::panic::catch_unwind(run) {
                    // A panic inside an operation is caught in `run_op`;
                    // one here is in the writer's own bookkeeping, which
                    // cannot be trusted any more. Without a writer no write
                    // can ever be answered, so stop the whole process and
                    // let the service manager restart it: every
                    // acknowledged write is already in the database.
                    tracing::error!(
                        panic = %panic_message(&*payload),
                        "the writer thread failed; aborting"
                    );
                    std::process::abort();
                }
            })
            .map_err(crate::EngineError::Thread)?;
        let mut threads = pool.threads;
        threads.push(writer);
        Ok(Engine {
            write_tx,
            _found_tx: Some(found_tx),
            read_tx: pool.tx,
            stats,
            max_batch,
            active_expire,
            expiry_paused_until,
            wal_path,
            db_path: config.path.clone(),
            page_size,
            checkpoint: config.checkpoint,
            io_base: std::sync::atomic::AtomicU64::new(process_write_bytes().unwrap_or(0)),
            copy_threshold,
            cache,
            access,
            watches,
            thresholds,
            blocking,
            notifier,
            propagation,
            snapshots,
            snapshot_path: config.snapshot_path(),
            progress,
            disk,
            memory,
            threads: Mutex::new(threads),
            replica: false,
            _owner: owner,
        })
    }

    /// Opens `config.path` as a read replica (see [`replica`]): the read
    /// pool over the file, and in the writer's place a thread that refuses
    /// every write.
    fn open_replica(config: EngineConfig, delivery: Delivery<R>, owner: OwnerLock) -> Result<Self> {
        let page_size = replica::prepare(&config.path)?;
        let mut wal = config.path.clone().into_os_string();
        wal.push("-wal");
        let cache = Arc::new(ValueCache::new(0));
        let access = Arc::new(Access::new());
        let pool = read_pool::ReadPool::start(
            &config.path,
            config.readers,
            cache.clone(),
            access.clone(),
            delivery.reads,
            true,
        )?;
        let (write_tx, write_rx) = crossbeam_channel::unbounded();
        let progress = Arc::new(AtomicU64::new(0));
        let refuser_progress = progress.clone();
        let refuser = std::thread::Builder::new()
            .name("respite-replica".into())
            .spawn(move || replica::refuse_writes::<R>(write_rx, refuser_progress))
            .map_err(crate::EngineError::Thread)?;
        let mut threads = pool.threads;
        threads.push(refuser);
        tracing::info!(
            path = %config.path.display(),
            "serving the file as a read replica: every write is refused"
        );
        Ok(Engine {
            write_tx,
            _found_tx: None,
            read_tx: pool.tx,
            stats: Arc::new(Stats::new()),
            max_batch: Arc::new(AtomicUsize::new(config.max_batch.max(1))),
            active_expire: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            expiry_paused_until: Arc::new(Mutex::new(None)),
            wal_path: PathBuf::from(wal),
            db_path: config.path.clone(),
            page_size,
            checkpoint: Checkpoint::External,
            io_base: std::sync::atomic::AtomicU64::new(process_write_bytes().unwrap_or(0)),
            copy_threshold: Arc::new(AtomicU64::new(0)),
            cache,
            access,
            watches: Arc::new(Watches::default()),
            thresholds: Arc::new(encoding::Thresholds::default()),
            blocking: Arc::new(Blocking::default()),
            notifier: notify::Notifier::new(),
            propagation: Arc::new(propagate::Propagation::default()),
            snapshots: Arc::new(Snapshots::new(&config.path, &config.snapshot_path())),
            snapshot_path: config.snapshot_path(),
            progress,
            disk: Arc::new(Disk::new(&config.path, 0, 0)),
            // A replica refuses every write; its limit is never over.
            memory: Arc::new(Memory::default()),
            threads: Mutex::new(threads),
            replica: true,
            _owner: owner,
        })
    }

    /// Whether this engine serves a read replica (see [`replica`]): every
    /// write is refused.
    pub fn is_replica(&self) -> bool {
        self.replica
    }

    /// Queues writes for the writer. [`EngineError::ShuttingDown`] if the
    /// engine has shut down: the item is then dropped unanswered (its
    /// completion is never called), and the caller answers for it.
    pub fn submit_write(&self, item: WriteItem<R>) -> Result<()> {
        self.write_tx
            .send(Msg::Write(item))
            .map_err(|_| EngineError::ShuttingDown)
    }

    /// Queues a read job for the read pool, with what it needs of the pool
    /// (see [`ReadNeeds`]). Gives the job back if the pool is gone.
    pub fn submit_read(&self, job: ReadJob, needs: ReadNeeds) -> std::result::Result<(), ReadJob> {
        self.read_tx
            .send(read_pool::ReadRequest { job, needs })
            .map_err(|e| e.0.job)
    }

    /// The value cache: a string read can be answered from it, without the
    /// read pool, when it holds the key (see [`cache`]).
    pub fn cache(&self) -> &ValueCache {
        &self.cache
    }

    /// The access table: OBJECT IDLETIME and FREQ, keyspace hits and
    /// misses (see [`access`]).
    pub fn access(&self) -> &Arc<Access> {
        &self.access
    }

    /// The disk budget, the reserve and storage-error counts (see
    /// [`disk`]).
    pub fn disk(&self) -> &Disk {
        &self.disk
    }

    /// `maxmemory`, its policy and eviction's figures (see [`evict`]).
    pub fn memory(&self) -> &Memory {
        &self.memory
    }

    /// Why a command that may add data (Redis's `denyoom`) must be refused
    /// now, if it must: the disk is full, the live bytes are over
    /// `maxmemory` (under `noeviction`, or with nothing left to evict), or
    /// the database is over `maxdisk`.
    pub fn refusal(&self) -> Option<EngineError> {
        if self.disk.is_full() {
            return Some(EngineError::DiskFull);
        }
        self.memory.refusal().or_else(|| self.disk.refusal())
    }

    /// The registry of WATCHed keys (see [`watch`]).
    pub fn watches(&self) -> Arc<Watches> {
        self.watches.clone()
    }

    /// Keyspace notifications: their classes, and where committed events
    /// go (see `notify.rs`).
    pub fn notifier(&self) -> &Arc<notify::Notifier> {
        &self.notifier
    }

    /// Replication's feed of committed operations (see [`propagate`]).
    pub fn propagation(&self) -> &Arc<propagate::Propagation> {
        &self.propagation
    }

    /// The encoding thresholds writes follow (CONFIG SET
    /// `hash-max-listpack-entries` and friends change them).
    pub fn thresholds(&self) -> &encoding::Thresholds {
        &self.thresholds
    }

    /// The registry of clients blocked on keys (see [`blocking`]).
    pub fn blocking(&self) -> Arc<Blocking> {
        self.blocking.clone()
    }

    /// A counter the writer raises at every operation and every turn of
    /// its loop, idle or not (see `writer.rs`): if it stands still for
    /// long, the writer is stuck.
    pub fn writer_progress(&self) -> u64 {
        self.progress.load(Ordering::Relaxed)
    }

    /// Raises the writer's progress counter from inside a long operation
    /// that is still making progress (a Lua script checking back).
    pub fn note_progress(&self) {
        self.progress.fetch_add(1, Ordering::Relaxed);
    }

    /// Snapshot bookkeeping (SAVE, BGSAVE, LASTSAVE, INFO persistence).
    pub fn snapshots(&self) -> &Arc<Snapshots> {
        &self.snapshots
    }

    /// Where SAVE and BGSAVE write.
    pub fn snapshot_path(&self) -> &std::path::Path {
        &self.snapshot_path
    }

    /// Messages waiting for the writer.
    pub fn write_queue_len(&self) -> usize {
        self.write_tx.len()
    }

    /// Group-commit statistics.
    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }

    /// Zeroes the group-commit statistics and the value cache's hit and
    /// miss counters (CONFIG RESETSTAT).
    pub fn reset_stats(&self) {
        self.stats.reset();
        self.cache.reset_stats();
        self.access.reset_stats();
        self.memory.reset_stats();
        self.io_base
            .store(process_write_bytes().unwrap_or(0), Ordering::Relaxed);
    }

    /// What the storage write path costs: bytes this process has sent to
    /// storage (the kernel's `write_bytes` in /proc/self/io: the WAL, the
    /// checkpoints into the database file, anything else) since the
    /// statistics were last reset, and per write operation applied. `None`
    /// where /proc is not there.
    pub fn disk_writes(&self) -> Option<DiskWrites> {
        let bytes = process_write_bytes()?.saturating_sub(self.io_base.load(Ordering::Relaxed));
        let ops = self.stats.snapshot().ops;
        Some(DiskWrites {
            bytes,
            per_op: bytes.checked_div(ops).unwrap_or(0),
        })
    }

    /// The database's page size in bytes.
    pub fn page_size(&self) -> u32 {
        self.page_size
    }

    /// The database file.
    pub fn db_path(&self) -> &std::path::Path {
        &self.db_path
    }

    /// The database file's current size in bytes.
    pub fn db_size(&self) -> u64 {
        std::fs::metadata(&self.db_path)
            .map(|m| m.len())
            .unwrap_or(0)
    }

    /// Bytes of the database file in the OS page cache, counted once (the
    /// readers and the writer map the file, so the kernel counts these
    /// pages in the process's resident size once per connection that
    /// touched them). 0 where it cannot be measured.
    pub fn db_page_cache_bytes(&self) -> u64 {
        disk::cached_bytes(&self.db_path).unwrap_or(0)
    }

    /// Who checkpoints the WAL (`checkpoint` in the config).
    pub fn checkpoint_mode(&self) -> Checkpoint {
        self.checkpoint
    }

    /// How many bytes of WAL the checkpointer lets pile up before copying
    /// it into the database (see `checkpointer.rs`).
    pub fn checkpoint_threshold(&self) -> u64 {
        self.copy_threshold.load(Ordering::Relaxed)
    }

    /// The WAL file's current size in bytes.
    pub fn wal_size(&self) -> u64 {
        std::fs::metadata(&self.wal_path)
            .map(|m| m.len())
            .unwrap_or(0)
    }

    /// The current cap on operations per commit.
    pub fn max_batch(&self) -> usize {
        self.max_batch.load(Ordering::Relaxed)
    }

    /// Changes the cap on operations per commit (1 turns batching off).
    pub fn set_max_batch(&self, n: usize) {
        self.max_batch.store(n.max(1), Ordering::Relaxed);
    }

    /// Turns the writer's sweep of expired keys on or off (redis's DEBUG
    /// SET-ACTIVE-EXPIRE, which tests use to see expired keys still
    /// stored). Reads never show an expired key either way.
    pub fn set_active_expire(&self, on: bool) {
        self.active_expire.store(on, Ordering::Relaxed);
        // Then reads delete the expired keys they find, as in redis.
        self.notifier.set_sweep_off(!on);
    }

    /// Stops the writer's sweep of expired keys until `until` (CLIENT
    /// PAUSE), or lets it go on (`None`, CLIENT UNPAUSE). Expired keys stay
    /// invisible to every command meanwhile; only their deletion waits.
    pub fn pause_expiry(&self, until: Option<std::time::Instant>) {
        *self
            .expiry_paused_until
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = until;
    }

    /// Changes durability from the next batch on.
    pub fn set_appendfsync(&self, mode: AppendFsync) {
        let _ = self.write_tx.send(Msg::SetFsync(mode));
    }

    /// Applies everything already queued, checkpoints, and stops the writer;
    /// blocks until it has. Later writes are refused.
    pub fn shutdown(&self) {
        let (tx, rx) = crossbeam_channel::bounded::<()>(1);
        let sent = self.write_tx.send(Msg::Shutdown(Box::new(move || {
            let _ = tx.send(());
        })));
        if sent.is_ok() {
            let _ = rx.recv();
        }
    }
}

impl<R: Send + 'static> Drop for Engine<R> {
    fn drop(&mut self) {
        self.shutdown();
        // Closing the read queue ends the reader threads; the writer has
        // already returned.
        let (dead_tx, _) = crossbeam_channel::unbounded();
        self.read_tx = dead_tx;
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|e| e.into_inner()));
        for t in threads {
            let _ = t.join();
        }
    }
}

/// The stack of the threads that run Lua scripts (the writer and the
/// readers). Redis's Lua libraries and a script's reply recurse as deep as
/// Lua's own stack limit lets them (8,000 slots: `cmsgpack.unpack` of 4,000
/// nested arrays before its "stack overflow" error, a returned table nested
/// some 8,000 deep before "reached lua stack limit"), no deeper. At those
/// bounds a thread of a release build touches at most 3.6 MiB of stack
/// (measured from the threads' resident stack pages after the scripts of
/// `hostile_nesting_meets_redis_bounds_differential`): 16 MiB leaves four
/// times that, where a thread's default 2 MiB would not do. A debug
/// build's frames are several times larger (about 20 MiB at those
/// bounds), so it keeps 64 MiB. Only the pages a thread touches are
/// committed.
pub(crate) const SCRIPT_STACK: usize = if cfg!(debug_assertions) {
    64 << 20
} else {
    16 << 20
};

#[cfg(test)]
mod tests {
    use super::WalFound;

    #[test]
    fn wal_frames_are_counted_from_the_header_page_size() {
        // 32-byte header, then frames of a 24-byte header and one page.
        let found = WalFound::from_header(32 + 3 * (512 + 24), 512);
        assert_eq!(found.frames, 3);
        assert_eq!(found.page_size, 512);
        // A frame cut short by the crash is not counted.
        assert_eq!(WalFound::from_header(32 + 2 * 4120 + 100, 4096).frames, 2);
        // A header that names no valid page size counts nothing.
        assert_eq!(WalFound::from_header(10_000, 1000).frames, 0);
        assert_eq!(WalFound::from_header(10_000, 0).page_size, 0);
        assert_eq!(WalFound::from_header(20, 512).frames, 0);
    }

    #[test]
    fn a_missing_or_empty_wal_is_not_found() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.db-wal");
        assert_eq!(WalFound::read(&path), None);
        std::fs::write(&path, b"").expect("write");
        assert_eq!(WalFound::read(&path), None);
        let mut header = vec![0u8; 32];
        header[8..12].copy_from_slice(&1024u32.to_be_bytes());
        header.extend(std::iter::repeat_n(0u8, 2 * (1024 + 24)));
        std::fs::write(&path, &header).expect("write");
        let found = WalFound::read(&path).expect("found");
        assert_eq!((found.bytes, found.frames), (32 + 2 * 1048, 2));
    }
}

//! Snapshots of the running database: what SAVE and BGSAVE write.
//!
//! A snapshot is a plain SQLite file holding the whole keyspace as it was
//! at one commit, made with `VACUUM INTO` on a connection of its own. That
//! connection reads inside one WAL read transaction, so the copy is exactly
//! one committed state, and in WAL mode a reader never blocks the writer:
//! writes go on committing while the copy runs (they only keep the
//! checkpointer from recycling the WAL past the snapshot's start until it
//! ends). `VACUUM INTO` rather than the backup API because it copies in one
//! pass without restarting when a write lands mid-copy (the backup API
//! starts over after every commit on another connection, which under
//! steady writes may never finish), and because the copy comes out
//! compact.
//!
//! The file is written under a temporary name beside its destination,
//! fsynced, renamed into place and the directory fsynced, so the path
//! always holds either the previous complete snapshot or the new one,
//! never half a file, even across a crash.
//!
//! Restoring is copying the snapshot over the database file while the
//! daemon is stopped (and removing the `-wal` and `-shm` files beside it);
//! `docs/operations.md` has the steps. The snapshot carries the layout
//! version, so a newer respited migrates it like any older file.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OpenFlags};

/// Why a snapshot was not taken.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// Another snapshot is being written (Redis's wording).
    #[error("Background save already in progress")]
    InProgress,
    /// SQLite failed to read the database or write the copy.
    #[error("snapshot to {path} failed: {source}")]
    Sqlite {
        /// The destination.
        path: PathBuf,
        /// What SQLite said.
        source: rusqlite::Error,
    },
    /// Syncing or renaming the copy failed.
    #[error("snapshot to {path} failed: {source}")]
    Io {
        /// The destination.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The background thread could not be started.
    #[error("cannot start the snapshot thread: {0}")]
    Thread(std::io::Error),
}

/// What INFO persistence and LASTSAVE report.
#[derive(Debug, Clone)]
pub struct SnapshotStatus {
    /// A snapshot is being written now.
    pub in_progress: bool,
    /// Seconds the current one has run (-1 if none runs).
    pub current_secs: i64,
    /// Unix time of the last successful snapshot (see [`Snapshots::new`]
    /// for the value before the first).
    pub last_save_unix: u64,
    /// Whether the last attempt succeeded (true before any).
    pub last_ok: bool,
    /// Seconds the last attempt took (-1 before any).
    pub last_secs: i64,
    /// Size of the last successful snapshot in bytes.
    pub last_bytes: u64,
    /// Successful snapshots since start.
    pub saves: u64,
    /// The error of the last failed attempt, if the last one failed.
    pub last_error: Option<String>,
    /// Keys changed since the last successful snapshot began (INFO's
    /// `rdb_changes_since_last_save`): every change is on disk already,
    /// this says how far the snapshot file is behind the database.
    pub changes_since: u64,
}

struct State {
    started: Option<Instant>,
    /// The change count when the snapshot running now began.
    changes_at_start: u64,
    /// The change count when the last successful snapshot began.
    changes_saved: u64,
    last_save_unix: u64,
    last_ok: bool,
    last_secs: i64,
    last_bytes: u64,
    saves: u64,
    last_error: Option<String>,
}

/// The snapshot bookkeeping of one engine: at most one snapshot at a time.
pub struct Snapshots {
    db: PathBuf,
    /// Keys changed since start, counted by the writer at each commit.
    pub(crate) changes: AtomicU64,
    busy: AtomicBool,
    state: Mutex<State>,
}

/// Releases the one-at-a-time flag however the snapshot ends.
struct Busy<'a>(&'a AtomicBool);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Snapshots {
    /// Bookkeeping for the database at `db`. Before the first snapshot of
    /// this run, LASTSAVE reports the modification time of the snapshot
    /// already at `dest` if there is one (the last backup that exists),
    /// else the start time, as redis-server does after loading.
    pub fn new(db: &Path, dest: &Path) -> Snapshots {
        let last = std::fs::metadata(dest)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or_else(unix_now, |d| d.as_secs());
        Snapshots {
            db: db.to_path_buf(),
            changes: AtomicU64::new(0),
            busy: AtomicBool::new(false),
            state: Mutex::new(State {
                started: None,
                changes_at_start: 0,
                changes_saved: 0,
                last_save_unix: last,
                last_ok: true,
                last_secs: -1,
                last_bytes: 0,
                saves: 0,
                last_error: None,
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The figures for INFO and LASTSAVE.
    pub fn status(&self) -> SnapshotStatus {
        let s = self.state();
        SnapshotStatus {
            in_progress: s.started.is_some(),
            current_secs: s.started.map_or(-1, |t| t.elapsed().as_secs() as i64),
            last_save_unix: s.last_save_unix,
            last_ok: s.last_ok,
            last_secs: s.last_secs,
            last_bytes: s.last_bytes,
            saves: s.saves,
            last_error: s.last_error.clone(),
            changes_since: self
                .changes
                .load(Ordering::Relaxed)
                .saturating_sub(s.changes_saved),
        }
    }

    fn claim(&self) -> Result<Busy<'_>, SnapshotError> {
        if self
            .busy
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(SnapshotError::InProgress);
        }
        let mut s = self.state();
        s.started = Some(Instant::now());
        s.changes_at_start = self.changes.load(Ordering::Relaxed);
        Ok(Busy(&self.busy))
    }

    /// Writes a snapshot to `dest` on the calling thread (SAVE); returns
    /// its size in bytes.
    pub fn save(&self, dest: &Path) -> Result<u64, SnapshotError> {
        let _busy = self.claim()?;
        self.run(dest)
    }

    /// Starts writing a snapshot to `dest` on a thread of its own
    /// (BGSAVE); the outcome shows in [`Snapshots::status`].
    pub fn save_in_background(self: &Arc<Self>, dest: &Path) -> Result<(), SnapshotError> {
        // Claimed here, so a second BGSAVE right after is refused even
        // before the thread starts.
        let busy = self.claim()?;
        std::mem::forget(busy);
        let me = self.clone();
        let dest = dest.to_path_buf();
        let spawned = std::thread::Builder::new()
            .name("respite-bgsave".into())
            .spawn(move || {
                let _busy = Busy(&me.busy);
                let _ = me.run(&dest);
            });
        match spawned {
            Ok(_) => Ok(()),
            Err(e) => {
                self.state().started = None;
                self.busy.store(false, Ordering::Release);
                Err(SnapshotError::Thread(e))
            }
        }
    }

    /// Writes the snapshot and records the outcome.
    fn run(&self, dest: &Path) -> Result<u64, SnapshotError> {
        let started = Instant::now();
        let result = write_snapshot(&self.db, dest);
        let secs = started.elapsed().as_secs() as i64;
        let mut s = self.state();
        s.started = None;
        s.last_secs = secs;
        match &result {
            Ok(bytes) => {
                s.last_ok = true;
                s.last_error = None;
                s.changes_saved = s.changes_at_start;
                s.last_save_unix = unix_now();
                s.last_bytes = *bytes;
                s.saves += 1;
                tracing::info!(path = %dest.display(), bytes, secs, "snapshot written");
            }
            Err(e) => {
                s.last_ok = false;
                s.last_error = Some(e.to_string());
                tracing::error!("{e}");
            }
        }
        result
    }
}

/// `VACUUM INTO` a temporary file beside `dest`, fsync, rename, fsync the
/// directory.
fn write_snapshot(db: &Path, dest: &Path) -> Result<u64, SnapshotError> {
    let io = |source| SnapshotError::Io {
        path: dest.to_path_buf(),
        source,
    };
    let sql = |source| SnapshotError::Sqlite {
        path: dest.to_path_buf(),
        source,
    };
    let mut tmp = dest.as_os_str().to_owned();
    tmp.push(format!(".tmp-{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    // VACUUM INTO refuses to overwrite; a leftover from a crash mid-copy
    // is garbage.
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(e)),
        _ => {}
    }
    let result = (|| {
        // Its own connection: the writer's must not pause, and a reader of
        // the pool must not be held for the length of a copy. Read-write
        // flags because the copy is written through this connection, but
        // it never writes to the database itself.
        let conn = Connection::open_with_flags(
            db,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(sql)?;
        conn.busy_timeout(Duration::from_secs(5)).map_err(sql)?;
        let target = tmp.to_str().ok_or_else(|| {
            io(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the snapshot path is not valid UTF-8",
            ))
        })?;
        conn.execute("VACUUM INTO ?1", [target]).map_err(sql)?;
        drop(conn);
        let file = std::fs::File::open(&tmp).map_err(io)?;
        file.sync_all().map_err(io)?;
        let bytes = file.metadata().map_err(io)?.len();
        std::fs::rename(&tmp, dest).map_err(io)?;
        let parent = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        std::fs::File::open(parent)
            .and_then(|d| d.sync_all())
            .map_err(io)?;
        Ok(bytes)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

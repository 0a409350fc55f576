//! A read replica: serving a database file another process keeps up to date.
//!
//! Litestream's follow mode (`litestream restore -f -o FILE REPLICA`)
//! restores a database from its replica and then keeps applying each new
//! piece of the primary's history to that file, a second or so behind the
//! primary. A respite opened on such a file with `replica = true` serves it
//! read-only: the read pool reads it as usual, and nothing in this process
//! ever writes to it.
//!
//! What that takes:
//!
//! - **No writer.** The write queue is served by a thread that refuses
//!   every operation with Redis's `READONLY You can't write against a read
//!   only replica.` (the server refuses write commands before they get
//!   here; this is the backstop for any path that does not ask), and keeps
//!   the progress counter moving so a watchdog sees a live process. There
//!   is no checkpointer, no expiry sweep (expired keys stay in the file
//!   until the primary deletes them, and every read hides them, as a Redis
//!   replica does), no disk reserve, no schema migration.
//! - **Consistent reads while the file changes.** The follower writes whole
//!   pages into the database file while holding SQLite's own exclusive lock
//!   (the POSIX locks SQLite uses, on the pending byte and the shared
//!   range), and marks the file as a rollback-journal database (its first
//!   restore leaves the primary's WAL mark, which [`prepare`] changes the
//!   same way at start, under SQLite's locks: the one change respite makes
//!   to the file). So the read pool's connections read it in rollback
//!   mode: a read transaction holds a shared lock, the follower waits for
//!   it to end before applying the next piece, and a reader arriving while
//!   a piece is applied waits (the readers' busy timeout) rather than read
//!   half of it. Every read job runs in one transaction, so a reply never
//!   mixes two states of the primary, and drops SQLite's cached pages once
//!   it holds the lock (see `read_pool.rs`): the follower changes the
//!   file's change counter, which is what makes SQLite drop them itself,
//!   only when it rewrites page 1.
//! - **No value cache.** The cache of hot strings is kept exact by watching
//!   this process's writes go by; a replica's writes come from elsewhere,
//!   so the cache is off.
//! - **A position to report.** The follower records the last transaction it
//!   applied in `FILE-txid` (a hexadecimal Litestream TXID, written
//!   atomically); INFO replication reports it and how long ago it changed.
//!
//! The file must already exist and have this build's layout: a replica
//! cannot migrate a file it may not write, so a primary on an older build
//! is upgraded first, and a replica on an older build refuses a newer file.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crossbeam_channel::{Receiver, RecvTimeoutError};

use crate::error::{EngineError, Result};
use crate::writer::Msg;

/// Checks that `path` is a database a replica can serve, marks it a
/// rollback-journal database if the restore left it marked WAL, and
/// answers its page size.
pub(crate) fn prepare(path: &Path) -> Result<u32> {
    if !path.exists() {
        return Err(EngineError::ReplicaMissing(path.to_path_buf()));
    }
    let conn = rusqlite::Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if version != crate::schema::VERSION {
        return Err(EngineError::ReplicaLayout(version, crate::schema::VERSION));
    }
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
    if mode.eq_ignore_ascii_case("wal") {
        // The follower's first restore copies the primary's header, which
        // says WAL; its updates then write pages straight into the file
        // and set the header to rollback mode, which readers opened in WAL
        // mode would never notice (they look for changes in the WAL index).
        // So the header is set to rollback mode now, under SQLite's locks:
        // the same two bytes the follower sets with every update.
        let _: String = conn.query_row("PRAGMA journal_mode = DELETE", [], |r| r.get(0))?;
        tracing::info!(path = %path.display(), "the replica's file is read in rollback-journal mode");
    }
    let page_size: i64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    Ok(u32::try_from(page_size).unwrap_or(0))
}

/// Serves a replica's write queue: refuses every write, answers a
/// shutdown, and raises `progress` at least every 100 ms.
pub(crate) fn refuse_writes<R: Send + 'static>(rx: Receiver<Msg<R>>, progress: Arc<AtomicU64>) {
    loop {
        progress.fetch_add(1, Ordering::Relaxed);
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(Msg::Write(item)) => {
                let results = item
                    .ops
                    .iter()
                    .map(|_| Err(EngineError::ReadOnlyReplica))
                    .collect();
                (item.done)(results);
            }
            Ok(Msg::SetFsync(_) | Msg::Found(_)) => {}
            Ok(Msg::Shutdown(done)) => {
                done();
                return;
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// Where the follower records its position: `FILE-txid`.
pub fn position_path(db: &Path) -> PathBuf {
    let mut p = db.as_os_str().to_owned();
    p.push("-txid");
    PathBuf::from(p)
}

/// The follower's position: the last transaction it applied, and when it
/// recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    /// Litestream's TXID, as it writes it (16 hexadecimal digits).
    pub txid: String,
    /// The position file's modification time.
    pub at: SystemTime,
}

impl Position {
    /// Reads the position file beside `db`; `None` if there is none (yet)
    /// or it does not hold a TXID.
    pub fn read(db: &Path) -> Option<Position> {
        let path = position_path(db);
        let text = std::fs::read_to_string(&path).ok()?;
        let txid = text.trim();
        if txid.is_empty() || !txid.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let at = std::fs::metadata(&path).and_then(|m| m.modified()).ok()?;
        Some(Position {
            txid: txid.to_string(),
            at,
        })
    }

    /// The TXID as a number (Redis's offsets are integers).
    pub fn offset(&self) -> u64 {
        u64::from_str_radix(&self.txid, 16).unwrap_or(0)
    }

    /// Whole seconds since the follower last applied something.
    pub fn age_secs(&self) -> u64 {
        SystemTime::now()
            .duration_since(self.at)
            .map(|d| d.as_secs())
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_position_is_read_from_the_txid_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("r.db");
        assert_eq!(Position::read(&db), None);
        std::fs::write(position_path(&db), "00000000000000ff\n").expect("write");
        let pos = Position::read(&db).expect("position");
        assert_eq!(pos.txid, "00000000000000ff");
        assert_eq!(pos.offset(), 255);
        assert!(pos.age_secs() < 5);
        std::fs::write(position_path(&db), "not a txid\n").expect("write");
        assert_eq!(Position::read(&db), None);
    }

    #[test]
    fn a_missing_file_or_another_layout_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("r.db");
        assert!(matches!(prepare(&db), Err(EngineError::ReplicaMissing(_))));
        let conn = rusqlite::Connection::open(&db).expect("open");
        conn.pragma_update(None, "user_version", 1)
            .expect("version");
        drop(conn);
        assert!(matches!(
            prepare(&db),
            Err(EngineError::ReplicaLayout(1, _))
        ));
    }
}

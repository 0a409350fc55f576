//! The on-disk layout, and how connections to it are opened.
//!
//! One table, `keys`, holds every key of every logical database with its
//! type and expiry. A string's value lives in its key's row, so a plain SET
//! writes exactly one row in one b-tree (the table is `WITHOUT ROWID`, keyed
//! by `(db, key)`): the peers that keep a key row and a separate value row pay
//! for two. The other types keep their elements in a table each (`hashes`,
//! `lists`, `sets`, `zsets`), keyed by the owning `(db, key)`; their key row
//! carries the type and the expiry.
//!
//! Expiry times are absolute milliseconds since the Unix epoch. A partial
//! index holds only the keys that have one, so keys without a TTL cost nothing
//! there and the writer's active-expiry sweep finds due keys by an index range
//! scan.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::config::AppendFsync;
use crate::error::Result;

/// The data type a key holds, as stored in `keys.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A binary-safe string (the value is in the key row).
    String,
    /// A hash: rows in `hashes`.
    Hash,
    /// A list: rows in `lists`.
    List,
    /// A set: rows in `sets`.
    Set,
    /// A sorted set: rows in `zsets`.
    ZSet,
}

impl Kind {
    /// The integer stored in `keys.type`.
    pub fn code(self) -> i64 {
        match self {
            Kind::String => 0,
            Kind::Hash => 1,
            Kind::List => 2,
            Kind::Set => 3,
            Kind::ZSet => 4,
        }
    }

    /// The inverse of [`Kind::code`]; an unknown code is treated as a string
    /// so a newer file opened by an older build still reads.
    pub fn from_code(code: i64) -> Kind {
        match code {
            1 => Kind::Hash,
            2 => Kind::List,
            3 => Kind::Set,
            4 => Kind::ZSet,
            _ => Kind::String,
        }
    }

    /// The name TYPE replies with.
    pub fn name(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::Hash => "hash",
            Kind::List => "list",
            Kind::Set => "set",
            Kind::ZSet => "zset",
        }
    }

    /// The element table of a non-string type.
    pub(crate) fn element_table(self) -> Option<&'static str> {
        match self {
            Kind::String => None,
            Kind::Hash => Some("hashes"),
            Kind::List => Some("lists"),
            Kind::Set => Some("sets"),
            Kind::ZSet => Some("zsets"),
        }
    }
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS keys (
    db        INTEGER NOT NULL,
    key       BLOB    NOT NULL,
    type      INTEGER NOT NULL,
    value     BLOB,
    expire_at INTEGER,
    PRIMARY KEY (db, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS keys_by_expiry ON keys (expire_at) WHERE expire_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS hashes (
    db INTEGER NOT NULL, key BLOB NOT NULL, field BLOB NOT NULL, value BLOB NOT NULL,
    PRIMARY KEY (db, key, field)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS lists (
    db INTEGER NOT NULL, key BLOB NOT NULL, pos INTEGER NOT NULL, value BLOB NOT NULL,
    PRIMARY KEY (db, key, pos)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sets (
    db INTEGER NOT NULL, key BLOB NOT NULL, member BLOB NOT NULL,
    PRIMARY KEY (db, key, member)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS zsets (
    db INTEGER NOT NULL, key BLOB NOT NULL, member BLOB NOT NULL, score REAL NOT NULL,
    PRIMARY KEY (db, key, member)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS zsets_by_score ON zsets (db, key, score, member);
";

/// How much of the database file connections map into memory. Pages
/// outside SQLite's own cache are then read straight from the OS page cache,
/// without a `pread` and a copy each (a fifth of the writer's time on random
/// keys over a database larger than its cache).
const MMAP_BYTES: i64 = 1 << 40;

/// Opens the single read-write connection the writer thread owns, creating
/// the file and schema if needed.
pub(crate) fn open_writer(
    path: &Path,
    fsync: AppendFsync,
    journal_size_limit: i64,
    page_size: u32,
) -> Result<Connection> {
    let conn = Connection::open(path)?;
    // Only takes effect on a new, empty file, and only before it turns to
    // WAL mode: an existing database keeps the page size it was made with.
    conn.pragma_update(None, "page_size", page_size)?;
    // WAL lets the read pool read while the writer writes.
    conn.pragma_update(None, "journal_mode", "WAL")?;
    // FULL in WAL mode fsyncs the WAL at every commit: that is `always`.
    // NORMAL syncs only at checkpoints; `everysec` adds its own WAL fsync.
    let sync = match fsync {
        AppendFsync::Always => "FULL",
        AppendFsync::Everysec | AppendFsync::No => "NORMAL",
    };
    conn.pragma_update(None, "synchronous", sync)?;
    // The writer checkpoints on its own schedule (see writer.rs): SQLite's
    // automatic PASSIVE checkpoints starve while readers never stop.
    conn.pragma_update(None, "wal_autocheckpoint", 0)?;
    conn.pragma_update(None, "journal_size_limit", journal_size_limit)?;
    conn.pragma_update(None, "cache_size", -64_000)?;
    conn.pragma_update(None, "mmap_size", MMAP_BYTES)?;
    // A TRUNCATE checkpoint waits this long for readers to finish.
    conn.busy_timeout(Duration::from_secs(2))?;
    conn.set_prepared_statement_cache_capacity(128);
    conn.execute_batch(SCHEMA)?;
    Ok(conn)
}

/// Opens one read-only connection for the read pool.
pub(crate) fn open_reader(path: &Path) -> Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI,
    )?;
    conn.pragma_update(None, "cache_size", -32_000)?;
    conn.pragma_update(None, "mmap_size", MMAP_BYTES)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.set_prepared_statement_cache_capacity(128);
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setting(conn: &Connection, name: &str) -> String {
        conn.pragma_query_value(None, name, |r| r.get::<_, rusqlite::types::Value>(0))
            .map(|v| format!("{v:?}"))
            .unwrap_or_default()
    }

    #[test]
    fn bundled_sqlite_has_the_build_flags() {
        let conn = Connection::open_in_memory().unwrap();
        let mut stmt = conn.prepare("PRAGMA compile_options").unwrap();
        let opts: Vec<String> = stmt
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        // .cargo/config.toml's LIBSQLITE3_FLAGS reached the build.
        assert!(opts.iter().any(|o| o == "THREADSAFE=2"), "{opts:?}");
        assert!(opts.iter().any(|o| o == "DEFAULT_MEMSTATUS=0"), "{opts:?}");
        assert!(
            !opts.iter().any(|o| o == "ENABLE_MEMORY_MANAGEMENT"),
            "{opts:?}"
        );
    }

    #[test]
    fn writer_connection_settings_follow_appendfsync() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let conn = open_writer(&path, AppendFsync::Always, 1 << 20, 1024).unwrap();
        assert_eq!(setting(&conn, "journal_mode"), "Text(\"wal\")");
        // 2 = FULL: the WAL is fsynced at every commit.
        assert_eq!(setting(&conn, "synchronous"), "Integer(2)");
        assert_eq!(setting(&conn, "page_size"), "Integer(1024)");
        drop(conn);
        // Reopened with another page size: the file keeps its own.
        let conn = open_writer(&path, AppendFsync::Everysec, 1 << 20, 4096).unwrap();
        assert_eq!(setting(&conn, "synchronous"), "Integer(1)");
        assert_eq!(setting(&conn, "page_size"), "Integer(1024)");
    }
}

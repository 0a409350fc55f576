//! The on-disk layout, how connections to it are opened, and how an older
//! layout is brought up to date.
//!
//! One table, `keys`, holds every key of every logical database with its
//! type and expiry. A short string's value lives in its key's row, so a
//! plain SET writes exactly one row in one b-tree (the table is `WITHOUT
//! ROWID`, keyed by `(db, key)`): the peers that keep a key row and a
//! separate value row pay for two. A value too long for the row to stay
//! within its page ([`inline_value_max`]) goes to `strings`, keyed by an
//! id the row carries, so that searches of `keys` never read it; two
//! triggers free it with its row.
//!
//! The other types keep their elements in a table each (`hashes`, `sets`,
//! `lists`, `zsets`; a big sorted set also has rank blocks in `zblocks`; a
//! stream has its entries in `streams` and a few tables of state beside
//! them: see `stream.rs`),
//! keyed by an integer **key id** that the key
//! row carries, never by the key's name. So RENAME and MOVE change one row
//! whatever the size of the key, and a deleted key's elements can be freed
//! later, a chunk at a time (they are unreachable the moment the key row is
//! gone, since ids are never reused: `meta.next_id` only grows). The key row
//! of a hash or set also keeps its element `count` (HLEN and SCARD read one
//! row) and, in `value`, a few flag bits about its elements (see
//! [`ENC_BIG`]). A dropped key's id waits in `dropped` until the writer has
//! deleted its elements (see `keyspace.rs`).
//!
//! Expiry times are absolute milliseconds since the Unix epoch. A partial
//! index holds only the keys that have one, so keys without a TTL cost nothing
//! there and the writer's active-expiry sweep finds due keys by an index range
//! scan.
//!
//! The layout's version is `PRAGMA user_version` ([`VERSION`]). A file
//! without one was written before hashes and sets existed, when only
//! strings could be stored: it is migrated in place when opened (the key
//! table gains its two columns; the old, necessarily empty, element tables
//! are replaced).

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::config::AppendFsync;
use crate::error::{EngineError, Result};

/// The data type a key holds, as stored in `keys.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A binary-safe string (the value is in the key row).
    String,
    /// A hash: rows in `hashes`.
    Hash,
    /// A list: rows in `lists`, ordered by position.
    List,
    /// A set: rows in `sets`.
    Set,
    /// A sorted set: rows in `zsets`, indexed by score.
    ZSet,
    /// A stream: entries in `streams`, its state in `stream_meta`, its
    /// nodes in `stream_nodes`, consumer groups in `stream_groups`,
    /// `stream_consumers` and `stream_pel` (see `stream.rs`).
    Stream,
}

/// Every kind, in code order (SCAN TYPE looks names up here).
pub const KINDS: [Kind; 6] = [
    Kind::String,
    Kind::Hash,
    Kind::List,
    Kind::Set,
    Kind::ZSet,
    Kind::Stream,
];

impl Kind {
    /// The integer stored in `keys.type`.
    pub fn code(self) -> i64 {
        match self {
            Kind::String => 0,
            Kind::Hash => 1,
            Kind::List => 2,
            Kind::Set => 3,
            Kind::ZSet => 4,
            Kind::Stream => 5,
        }
    }

    /// The inverse of [`Kind::code`]. An unknown code (a file written by a
    /// newer build) is an error: reading it as a string would answer with
    /// garbage and let a write destroy data this build cannot see.
    pub fn from_code(code: i64) -> Result<Kind> {
        match code {
            0 => Ok(Kind::String),
            1 => Ok(Kind::Hash),
            2 => Ok(Kind::List),
            3 => Ok(Kind::Set),
            4 => Ok(Kind::ZSet),
            5 => Ok(Kind::Stream),
            _ => Err(EngineError::UnknownType(code)),
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
            Kind::Stream => "stream",
        }
    }
}

/// The layout version this build writes (`PRAGMA user_version`): 1 added
/// key ids with hashes and sets, 2 the tables of lists and sorted sets (a
/// build that knows only version 1 would not see their elements, so it must
/// refuse the file), 3 the `strings` table of values kept out of their key
/// rows (see [`inline_value_max`]; an older build would read such a key as
/// empty), 4 the tables of streams (an older build would refuse a stream
/// key's type code anyway, but must not open the file and drop them), 5
/// `function_libraries` (an older build would start without the
/// libraries FUNCTION LOAD stored, and a FUNCTION FLUSH there would leave
/// them to come back), 6 `upstream`, a replica's point in its master's
/// stream (an older build would take writes and leave the point behind,
/// and a later replica would continue from a point its data has left: see
/// `upstream.rs`).
pub const VERSION: i64 = 6;

/// The longest key plus value a string's key row holds itself, for pages
/// of `page_size` bytes; a longer value goes to the `strings` table, keyed
/// by the row's id.
///
/// The `keys` table is `WITHOUT ROWID`: a b-tree ordered by `(db, key)`
/// whose cells are whole rows. When a cell is longer than what a page
/// keeps in place (SQLite's `maxLocal`, `(usable - 12) * 64 / 255 - 23`
/// bytes: 102 on respite's 512-byte pages, 1,002 on 4 KiB ones) the rest
/// goes to overflow pages, and SQLite's search then reads the *whole* cell
/// into memory to compare a key with it (`sqlite3BtreeIndexMoveto`), for
/// every such cell it passes on its way down. One 50 MB value made every
/// lookup of its neighbours take 40 ms. Kept out of the row, a value is
/// read only when its own key is: the key rows stay small, so a search
/// never touches a long value.
///
/// A row a little over the page's share still does better in place: its
/// comparison reads one overflow page, cheaper than a second row to write
/// and to look up. Measured with memtier (fresh values, SET/GET 1:1, 100,000
/// keys, 512-byte pages; docs/benchmarks.md, "Long string values out of
/// their key rows"): kept out of the row, 300- and 450-byte values ran at
/// 0.83-0.84x of keeping them in, 600-, 1,000- and 2,000-byte values at
/// 1.35x, 1.18x and 1.43x, and 20 KB values at 127x. So a row stays whole
/// up to [`INLINE_FLOOR`] bytes of key and value, or what fits in its page
/// if that is more: the page's `maxLocal` less 17 bytes, the most the
/// row's other parts take (a 10-byte record header, the database number,
/// an expiry).
pub fn inline_value_max(page_size: u32) -> usize {
    let usable = page_size as usize;
    let fits = ((usable - 12) * 64 / 255).saturating_sub(23 + 17);
    fits.max(INLINE_FLOOR)
}

/// The longest key and value kept in their row whatever the page size
/// (see [`inline_value_max`]).
pub const INLINE_FLOOR: usize = 512;

/// A flag bit in the `value` column of a hash's or set's key row: the key
/// has outgrown Redis's compact encoding (a hash with more than 512 fields
/// or a field or value over 64 bytes; a set with a member that is not an
/// integer or more than 512 members). Like Redis, a key never goes back,
/// so OBJECT ENCODING answers what redis-server would.
pub const ENC_BIG: i64 = 1;

/// A flag bit in the `value` column of a sorted set's key row: the set is
/// big enough to have its rank blocks in `zblocks` (see `zset.rs`), which
/// every write of its elements then keeps counted. Set once, like
/// [`ENC_BIG`], and kept until the key goes.
pub const ZBLOCKS: i64 = 2;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS keys (
    db        INTEGER NOT NULL,
    key       BLOB    NOT NULL,
    type      INTEGER NOT NULL,
    expire_at INTEGER,
    id        INTEGER,
    count     INTEGER,
    value     BLOB,
    PRIMARY KEY (db, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS keys_by_expiry ON keys (expire_at) WHERE expire_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS strings (id INTEGER PRIMARY KEY, value BLOB NOT NULL);
CREATE TRIGGER IF NOT EXISTS strings_freed_on_delete AFTER DELETE ON keys
    WHEN old.type = 0 AND old.id IS NOT NULL
    BEGIN DELETE FROM strings WHERE id = old.id; END;
CREATE TRIGGER IF NOT EXISTS strings_freed_on_update AFTER UPDATE OF id ON keys
    WHEN old.type = 0 AND old.id IS NOT NULL AND new.id IS NOT old.id
    BEGIN DELETE FROM strings WHERE id = old.id; END;
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
INSERT OR IGNORE INTO meta (name, value) VALUES ('next_id', 1);
CREATE TABLE IF NOT EXISTS hashes (
    id INTEGER NOT NULL, field BLOB NOT NULL, value BLOB NOT NULL,
    PRIMARY KEY (id, field)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sets (
    id INTEGER NOT NULL, member BLOB NOT NULL,
    PRIMARY KEY (id, member)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS lists (
    id INTEGER NOT NULL, pos INTEGER NOT NULL, value BLOB NOT NULL,
    PRIMARY KEY (id, pos)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS zsets (
    id INTEGER NOT NULL, member BLOB NOT NULL, score REAL NOT NULL,
    PRIMARY KEY (id, member)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS zsets_by_score ON zsets (id, score, member);
CREATE TABLE IF NOT EXISTS zblocks (
    id INTEGER NOT NULL, score REAL NOT NULL, member BLOB NOT NULL, count INTEGER NOT NULL,
    PRIMARY KEY (id, score, member)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS dropped (id INTEGER PRIMARY KEY, type INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS streams (
    id INTEGER NOT NULL, ms INTEGER NOT NULL, seq INTEGER NOT NULL, fields BLOB NOT NULL,
    PRIMARY KEY (id, ms, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS stream_meta (
    id INTEGER PRIMARY KEY,
    last_ms INTEGER NOT NULL, last_seq INTEGER NOT NULL,
    del_ms INTEGER NOT NULL, del_seq INTEGER NOT NULL,
    added INTEGER NOT NULL, nodes INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS stream_nodes (
    id INTEGER NOT NULL, ms INTEGER NOT NULL, seq INTEGER NOT NULL,
    last_ms INTEGER NOT NULL, last_seq INTEGER NOT NULL,
    live INTEGER NOT NULL, deleted INTEGER NOT NULL, bytes INTEGER NOT NULL,
    master BLOB NOT NULL,
    PRIMARY KEY (id, ms, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS stream_groups (
    id INTEGER NOT NULL, name BLOB NOT NULL,
    last_ms INTEGER NOT NULL, last_seq INTEGER NOT NULL, entries_read INTEGER NOT NULL,
    PRIMARY KEY (id, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS stream_consumers (
    id INTEGER NOT NULL, grp BLOB NOT NULL, name BLOB NOT NULL, seen INTEGER NOT NULL,
    PRIMARY KEY (id, grp, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS stream_pel (
    id INTEGER NOT NULL, grp BLOB NOT NULL, ms INTEGER NOT NULL, seq INTEGER NOT NULL,
    consumer BLOB NOT NULL, delivered INTEGER NOT NULL, count INTEGER NOT NULL,
    PRIMARY KEY (id, grp, ms, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS stream_pel_by_consumer ON stream_pel (id, grp, consumer, ms, seq);
CREATE TABLE IF NOT EXISTS function_libraries (
    seq INTEGER PRIMARY KEY, name BLOB NOT NULL UNIQUE, code BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS upstream (
    id INTEGER PRIMARY KEY CHECK (id = 1), replid TEXT NOT NULL, offset INTEGER NOT NULL,
    db INTEGER NOT NULL
);
";

/// The writer's page cache, in KiB: small on purpose. When a b-tree page
/// splits, SQLite moves a page to the pending-byte page number for a moment
/// (1 GiB into the file: page 2,097,153 with 512-byte pages), and its page
/// cache remembers that number as the highest it holds; at the end of the
/// transaction it then drops "every page past the end of the database" by
/// walking its whole hash table, one bucket per cached page. With a 64 MB
/// cache of 512-byte pages that walk (130,000 buckets, each a cache miss)
/// took 50-70% of the writer's time and cut SET to a third (9,200 against
/// 29,400/s, 1M keys, redis-benchmark -c 50; 2 MB: 28,000-29,000/s, 16 MB
/// 26,500/s). Reads lose nothing: pages outside the WAL come from the
/// memory map and the OS page cache, not from this cache.
///
/// `page_cache.rs` now skips that walk, and a larger cache still does not
/// pay: at 16 and 32 MB (random SET, LPUSH and ZADD over 100,000 keys) the
/// `pread`s of pages whose newest copy is in the WAL went, but the cache's
/// own hash lookups (`pcache1Fetch`, one memory miss per page of every
/// descent) took their place, within the run-to-run spread. Measured again
/// at 2, 8 and 32 MB over 100,000 and 1,000,000 keys (docs/benchmarks.md,
/// "The writer's page cache"): at 32 MB the writer's `pread`s per SET fall
/// from 0.76 to 0.04, and its CPU per SET, LPUSH and RPOP stays the same.
pub(crate) const WRITER_CACHE_KIB: i64 = 2_000;

/// Settings every connection gets. The query planner stability guarantee
/// keeps SQLite from planning with the values bound to a statement: without
/// it the planner peeks at some of them (a LIMIT's, a range's), marks the
/// statement, and prepares it again whenever they change, which was every
/// ZRANGEBYSCORE (parsing and planning at each call, found with gdb on
/// `sqlite3Reprepare`). respite's statements have one good plan each.
fn common_settings(conn: &Connection) -> Result<()> {
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )?;
    // No connection ever checkpoints on its own: respite's checkpointer
    // does, or (`checkpoint = "external"`) another process such as
    // Litestream, which loses its place in the WAL if anyone else does.
    conn.pragma_update(None, "wal_autocheckpoint", 0)?;
    Ok(())
}

/// Whether Litestream's tables are in the file: Litestream creates them
/// when it starts replicating a database.
pub(crate) fn has_litestream_tables(conn: &Connection) -> Result<bool> {
    Ok(conn.query_row(
        "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table'
           AND name IN ('_litestream_seq', '_litestream_lock')",
        [],
        |r| r.get(0),
    )?)
}

/// How much of the database file connections map into memory. Pages
/// outside SQLite's own cache are then read straight from the OS page cache,
/// without a `pread` and a copy each (a fifth of the writer's time on random
/// keys over a database larger than its cache).
const MMAP_BYTES: i64 = 1 << 40;

/// Makes every file SQLite opens, and every map of one, read at random (see
/// `read_advice.rs`), before the first connection maps it.
fn advise_maps() {
    // Before anything initialises SQLite (see `page_cache.rs`).
    if !crate::page_cache::install() {
        tracing::debug!("SQLite keeps its default page cache");
    }
    if !crate::read_advice::install() {
        tracing::debug!("the database map keeps the kernel's read-around");
    }
}

/// The old layout's element tables, keyed by `(db, key)`. Only strings
/// could be written to a file of that layout, so they are empty.
const OLD_ELEMENT_TABLES: &str = "
DROP TABLE IF EXISTS hashes;
DROP TABLE IF EXISTS lists;
DROP TABLE IF EXISTS sets;
DROP TABLE IF EXISTS zsets;
ALTER TABLE keys ADD COLUMN id INTEGER;
ALTER TABLE keys ADD COLUMN count INTEGER;
";

/// Creates the layout in a new file, migrates a file of the old layout, and
/// refuses one newer than this build.
pub(crate) fn prepare(conn: &Connection) -> Result<()> {
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if version > VERSION {
        return Err(EngineError::NewerLayout(version));
    }
    if version == VERSION {
        conn.execute_batch(SCHEMA)?;
        return Ok(());
    }
    let has_keys: bool = conn.query_row(
        "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'keys'",
        [],
        |r| r.get(0),
    )?;
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let mut moved = 0;
    let result = (|| -> Result<()> {
        // Versions 1 to 5 only lack tables (version 2 also the triggers
        // of `strings`; version 3 the tables of streams; version 4
        // `function_libraries`; version 5 `upstream`), which SCHEMA
        // creates.
        if has_keys && version == 0 {
            conn.execute_batch(OLD_ELEMENT_TABLES)?;
        }
        conn.execute_batch(SCHEMA)?;
        if has_keys && version < 3 {
            moved = move_long_values(conn)?;
        }
        conn.pragma_update(None, "user_version", VERSION)?;
        Ok(())
    })();
    match result {
        Ok(()) => conn.execute_batch("COMMIT")?,
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            return Err(e);
        }
    }
    if has_keys && version == 0 {
        tracing::info!(
            from = version,
            to = VERSION,
            "migrated the database file to the layout with key ids"
        );
    }
    if has_keys && version < 3 {
        tracing::info!(
            from = version,
            to = VERSION,
            long_values_moved = moved,
            "migrated the database file to the layout with long values out of their key rows"
        );
    }
    Ok(())
}

/// Moves the long string values of a file from before layout 3 out of
/// their key rows into `strings` (see [`inline_value_max`]), each under a
/// new id; returns how many. Its cost is the size of those values, once.
fn move_long_values(conn: &Connection) -> Result<usize> {
    let page_size: u32 = conn.pragma_query_value(None, "page_size", |r| r.get(0))?;
    let limit = inline_value_max(page_size) as i64;
    conn.execute(
        "CREATE TEMP TABLE moving AS
         SELECT db, key,
                (SELECT value FROM meta WHERE name = 'next_id') + row_number() OVER () - 1 AS id
         FROM keys
         WHERE type = 0 AND id IS NULL AND length(key) + length(value) > ?1",
        [limit],
    )?;
    let moved = conn.execute(
        "INSERT INTO strings (id, value)
         SELECT m.id, k.value FROM moving m JOIN keys k ON k.db = m.db AND k.key = m.key",
        [],
    )?;
    conn.execute_batch(
        "UPDATE keys SET
             id = (SELECT m.id FROM moving m WHERE m.db = keys.db AND m.key = keys.key),
             value = NULL
         WHERE (db, key) IN (SELECT db, key FROM moving);
         UPDATE meta SET value = value + (SELECT count(*) FROM moving) WHERE name = 'next_id';
         DROP TABLE moving;",
    )?;
    Ok(moved)
}

/// Opens the single read-write connection the writer thread owns, creating
/// the file and schema if needed.
pub(crate) fn open_writer(
    path: &Path,
    fsync: AppendFsync,
    journal_size_limit: i64,
    page_size: u32,
) -> Result<Connection> {
    advise_maps();
    crate::c_heap::keep();
    // Through the WAL-gathering VFS: a commit's frames in one write (see
    // `wal_gather.rs`).
    let conn = if crate::wal_gather::register() {
        Connection::open_with_flags_and_vfs(
            path,
            OpenFlags::default(),
            crate::wal_gather::vfs_name(),
        )?
    } else {
        Connection::open(path)?
    };
    common_settings(&conn)?;
    // A file from a newer build is refused before anything is written to
    // it, not even the switch to WAL mode below.
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if version > VERSION {
        return Err(EngineError::NewerLayout(version));
    }
    // Only takes effect on a new, empty file, and only before it turns to
    // WAL mode: an existing database keeps the page size it was made with.
    conn.pragma_update(None, "page_size", page_size)?;
    // Likewise only on a new file: pages can then be moved, so the writer
    // can give the free pages of deleted keys back a step at a time (see
    // vacuum.rs). Set only while the file has no table: on a file that has
    // some, setting it would change nothing (without auto_vacuum) or write
    // the header again, one WAL frame at every start (with it), before a
    // WAL left by a crash is recovered.
    let tables: i64 = conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))?;
    if tables == 0 {
        conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
    }
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
    conn.pragma_update(None, "cache_size", -WRITER_CACHE_KIB)?;
    conn.pragma_update(None, "mmap_size", MMAP_BYTES)?;
    // A TRUNCATE checkpoint waits this long for readers to finish.
    conn.busy_timeout(Duration::from_secs(2))?;
    conn.set_prepared_statement_cache_capacity(128);
    prepare(&conn)?;
    crate::wal_gather::set_gathering(&conn, fsync == AppendFsync::Always);
    Ok(conn)
}

/// Opens one read-only connection for the read pool.
pub(crate) fn open_reader(path: &Path) -> Result<Connection> {
    advise_maps();
    crate::c_heap::keep();
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI,
    )?;
    common_settings(&conn)?;
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
        // Rows as long as two of the longest strings fit (zeroblob checks
        // the length limit without allocating).
        let len = 2 * crate::MAX_STRING_LEN as i64 + 1024;
        let got: i64 = conn
            .query_row("SELECT length(zeroblob(?1))", [len], |r| r.get(0))
            .unwrap();
        assert_eq!(got, len);
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

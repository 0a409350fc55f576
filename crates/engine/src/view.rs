//! Typed read operations on the keyspace.
//!
//! A [`View`] is a connection plus a clock reading. Every query here hides
//! expired keys (`expire_at <= now`), so an expired key is invisible to every
//! command whether or not the writer has deleted its row yet. The read pool
//! hands a `View` over a read-only connection to read commands; the writer
//! hands a [`crate::Txn`], which dereferences to a `View` over the writer's
//! connection, to write commands, so a command that reads before it writes
//! uses exactly the same reads.

use bytes::Bytes;
use rusqlite::{params, OptionalExtension};

use crate::cache::ValueCache;
use crate::error::Result;
use crate::glob::glob_match;
use crate::schema::Kind;
use crate::stmt_cache::{CachedStmt, Statements};

/// A live key's row: its type, a string's value, and its expiry.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The data type.
    pub kind: Kind,
    /// Absolute expiry in Unix milliseconds, if any.
    pub expire_at: Option<i64>,
}

/// Per-database key counts, for INFO's keyspace section.
#[derive(Debug, Clone, Copy)]
pub struct DbCounts {
    /// The logical database index.
    pub db: u32,
    /// Live keys.
    pub keys: u64,
    /// Live keys with an expiry.
    pub expires: u64,
}

/// One page of a SCAN.
#[derive(Debug, Clone)]
pub struct ScanPage {
    /// Keys of this page that passed the MATCH and TYPE filters.
    pub keys: Vec<Vec<u8>>,
    /// The last key examined, to continue after; `None` when the scan is done.
    pub resume_after: Option<Vec<u8>>,
}

/// Read access to the keyspace at one instant.
pub struct View<'s, 'c> {
    pub(crate) stmts: &'s Statements<'c>,
    pub(crate) now: i64,
    /// On a read-pool view: the value cache, and its sequence number taken
    /// before this view's first read, for [`View::get_string_shared`] to
    /// fill it. `None` on the writer's view, whose reads include
    /// uncommitted writes.
    fill: Option<(&'s ValueCache, u64)>,
}

/// The current wall-clock time in Unix milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl<'s, 'c> View<'s, 'c> {
    /// A view over `conn` at the current time.
    pub(crate) fn new(stmts: &'s Statements<'c>) -> Self {
        View {
            stmts,
            now: now_ms(),
            fill: None,
        }
    }

    /// A read-pool view that offers the strings it reads to `cache`;
    /// `since` is [`ValueCache::read_started`], taken before any read.
    pub(crate) fn filling(stmts: &'s Statements<'c>, cache: &'s ValueCache, since: u64) -> Self {
        View {
            stmts,
            now: now_ms(),
            fill: Some((cache, since)),
        }
    }

    /// A cached statement for fixed SQL.
    pub(crate) fn stmt(&self, sql: &'static str) -> rusqlite::Result<CachedStmt<'s, 'c>> {
        self.stmts.get(sql)
    }

    /// The clock reading this view judges expiry by (Unix milliseconds).
    pub fn now(&self) -> i64 {
        self.now
    }

    /// The live key's type and expiry, or `None` if it does not exist.
    pub fn entry(&self, db: u32, key: &[u8]) -> Result<Option<Entry>> {
        let mut stmt = self.stmt(
            "SELECT type, expire_at FROM keys
             WHERE db = ?1 AND key = ?2 AND (expire_at IS NULL OR expire_at > ?3)",
        )?;
        let row = stmt
            .query_row(params![db, key, self.now], |r| {
                Ok(Entry {
                    kind: Kind::from_code(r.get(0)?),
                    expire_at: r.get(1)?,
                })
            })
            .optional()?;
        Ok(row)
    }

    /// The type of a live key.
    pub fn kind(&self, db: u32, key: &[u8]) -> Result<Option<Kind>> {
        Ok(self.entry(db, key)?.map(|e| e.kind))
    }

    /// Does the live key exist?
    pub fn exists(&self, db: u32, key: &[u8]) -> Result<bool> {
        Ok(self.entry(db, key)?.is_some())
    }

    /// A string key's value with its expiry; `Ok(None)` if the key does not
    /// exist, [`crate::EngineError::WrongType`] if it holds another type.
    pub fn string_entry(&self, db: u32, key: &[u8]) -> Result<Option<(Vec<u8>, Option<i64>)>> {
        let mut stmt = self.stmt(
            "SELECT type, value, expire_at FROM keys
             WHERE db = ?1 AND key = ?2 AND (expire_at IS NULL OR expire_at > ?3)",
        )?;
        let row = stmt
            .query_row(params![db, key, self.now], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, Option<Vec<u8>>>(1)?,
                    r.get::<_, Option<i64>>(2)?,
                ))
            })
            .optional()?;
        match row {
            None => Ok(None),
            Some((code, value, expire_at)) => {
                if Kind::from_code(code) != Kind::String {
                    return Err(crate::EngineError::WrongType);
                }
                Ok(Some((value.unwrap_or_default(), expire_at)))
            }
        }
    }

    /// A string key's value (GET).
    pub fn get_string(&self, db: u32, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.string_entry(db, key)?.map(|(v, _)| v))
    }

    /// A string key's value (GET), as shared bytes; on a read-pool view
    /// the value is also offered to the value cache.
    pub fn get_string_shared(&self, db: u32, key: &[u8]) -> Result<Option<Bytes>> {
        let Some((value, expire_at)) = self.string_entry(db, key)? else {
            return Ok(None);
        };
        let value = Bytes::from(value);
        if let Some((cache, since)) = self.fill {
            cache.fill(since, db, key, &value, expire_at);
        }
        Ok(Some(value))
    }

    /// Number of live keys in `db` (DBSIZE).
    pub fn dbsize(&self, db: u32) -> Result<u64> {
        let mut stmt = self.stmt(
            "SELECT count(*) FROM keys WHERE db = ?1 AND (expire_at IS NULL OR expire_at > ?2)",
        )?;
        let n: i64 = stmt.query_row(params![db, self.now], |r| r.get(0))?;
        Ok(n as u64)
    }

    /// Every live key of `db` matching the glob `pattern` (KEYS).
    pub fn keys(&self, db: u32, pattern: &[u8]) -> Result<Vec<Vec<u8>>> {
        let mut stmt = self.stmt(
            "SELECT key FROM keys WHERE db = ?1 AND (expire_at IS NULL OR expire_at > ?2)
             ORDER BY key",
        )?;
        let all_match = pattern == b"*";
        let mut out = Vec::new();
        let mut rows = stmt.query(params![db, self.now])?;
        while let Some(row) = rows.next()? {
            let key: Vec<u8> = row.get(0)?;
            if all_match || glob_match(pattern, &key) {
                out.push(key);
            }
        }
        Ok(out)
    }

    /// Examines up to `count` live keys of `db` in key order, starting after
    /// `after`, and returns those that pass the filters (SCAN). Because the
    /// scan walks the primary key in order, every key that exists for the
    /// whole scan is returned exactly once, as Redis guarantees.
    pub fn scan(
        &self,
        db: u32,
        after: Option<&[u8]>,
        count: usize,
        pattern: Option<&[u8]>,
        kind: Option<Kind>,
    ) -> Result<ScanPage> {
        let mut stmt = self.stmt(
            "SELECT key, type FROM keys
             WHERE db = ?1 AND key > ?2 AND (expire_at IS NULL OR expire_at > ?3)
             ORDER BY key LIMIT ?4",
        )?;
        let after = after.unwrap_or(b"");
        let count = count.max(1);
        let mut keys = Vec::new();
        let mut last = None;
        let mut examined = 0usize;
        let mut rows = stmt.query(params![db, after, self.now, count as i64])?;
        while let Some(row) = rows.next()? {
            examined += 1;
            let key: Vec<u8> = row.get(0)?;
            let k = Kind::from_code(row.get(1)?);
            let pass = pattern.is_none_or(|p| glob_match(p, &key)) && kind.is_none_or(|t| t == k);
            if pass {
                keys.push(key.clone());
            }
            last = Some(key);
        }
        // A short page means the end of the keyspace.
        let resume_after = if examined < count { None } else { last };
        Ok(ScanPage { keys, resume_after })
    }

    /// A live key of `db` chosen by `pick` (RANDOMKEY passes a random
    /// number): the `pick mod dbsize`-th key in key order. Linear in the
    /// number of keys, which RANDOMKEY's rare use can afford; it makes every
    /// key equally likely whatever the keys look like.
    pub fn random_key(&self, db: u32, pick: u64) -> Result<Option<Vec<u8>>> {
        let n = self.dbsize(db)?;
        if n == 0 {
            return Ok(None);
        }
        let mut stmt = self.stmt(
            "SELECT key FROM keys WHERE db = ?1 AND (expire_at IS NULL OR expire_at > ?2)
             ORDER BY key LIMIT 1 OFFSET ?3",
        )?;
        Ok(stmt
            .query_row(params![db, self.now, (pick % n) as i64], |r| r.get(0))
            .optional()?)
    }

    /// Key and expiry counts of every non-empty database (INFO keyspace).
    pub fn keyspace(&self) -> Result<Vec<DbCounts>> {
        let mut stmt = self.stmt(
            "SELECT db, count(*), count(expire_at) FROM keys
             WHERE expire_at IS NULL OR expire_at > ?1 GROUP BY db ORDER BY db",
        )?;
        let rows = stmt.query_map(params![self.now], |r| {
            Ok(DbCounts {
                db: r.get(0)?,
                keys: r.get::<_, i64>(1)? as u64,
                expires: r.get::<_, i64>(2)? as u64,
            })
        })?;
        Ok(rows.collect::<std::result::Result<Vec<_>, _>>()?)
    }
}

//! Typed write operations, run by the writer thread inside a batch's
//! transaction.
//!
//! A [`Txn`] is only ever seen inside a write operation's closure, inside
//! the batch's open transaction. Commands check everything that can make
//! them fail (wrong type, not an integer, overflow, missing key) *before*
//! their first write, so a failing command has changed nothing and the rest
//! of its batch commits. The `Txn` records whether the operation wrote: if
//! an operation fails after writing (only a storage error can do that), the
//! writer rolls the whole transaction back and answers every operation in it
//! with an error, as for a failed commit. Either way nothing half-applied is
//! ever committed, and no per-command savepoint is paid for on the hot path
//! (a savepoint and its release were a sixth of the writer's time).
//!
//! Every method that changes a key also records it in the `Txn`'s
//! [`Touched`] list, which the writer uses to drop those keys from the value
//! cache just before it commits (see `cache.rs`) and to tell WATCH that
//! they changed (see `watch.rs`).
//!
//! Writes treat an expired row exactly like a missing key: they overwrite it
//! (clearing its old expiry and its elements), never revive it.

use std::ops::Deref;

use bytes::Bytes;
use rusqlite::{params, Connection};

use crate::cache::Touched;
use crate::error::{EngineError, Result};
use crate::schema::Kind;
use crate::stmt_cache::Statements;
use crate::view::View;
use crate::watch::Watches;

/// Write access to the keyspace inside the current batch.
pub struct Txn<'s, 'c> {
    view: View<'s, 'c>,
    /// Set by every write method before it changes anything.
    wrote: bool,
    /// The keys this operation changed.
    touched: Touched,
    /// The WATCH registry, for the flushes (see `flush_db`).
    watches: &'s Watches,
}

impl<'s, 'c> Deref for Txn<'s, 'c> {
    type Target = View<'s, 'c>;
    fn deref(&self) -> &View<'s, 'c> {
        &self.view
    }
}

impl<'s, 'c> Txn<'s, 'c> {
    pub(crate) fn new(stmts: &'s Statements<'c>, watches: &'s Watches) -> Self {
        Txn {
            view: View::new(stmts),
            wrote: false,
            touched: Touched::default(),
            watches,
        }
    }

    /// Before a flush: notes the watched keys that exist and so change.
    fn touch_watched_in(&mut self, db: Option<u32>) -> Result<()> {
        for (d, key) in self.watches.keys_in(db) {
            if self.exists(d, &key)? {
                self.touch(d, &key);
            }
        }
        Ok(())
    }

    /// The keys this operation changed, for the writer.
    pub(crate) fn take_touched(&mut self) -> Touched {
        std::mem::take(&mut self.touched)
    }

    /// Notes that the key's row or elements change.
    fn touch(&mut self, db: u32, key: &[u8]) {
        self.touched.key(db, key);
    }

    /// Whether this operation has started changing the database.
    pub(crate) fn wrote(&self) -> bool {
        self.wrote
    }

    /// For SQL built at run time (table names), which goes through
    /// rusqlite's own cache.
    fn conn(&self) -> &'c Connection {
        self.view.stmts.conn()
    }

    /// The type of the row stored under the key, expired or not.
    fn stored_kind(&self, db: u32, key: &[u8]) -> Result<Option<Kind>> {
        use rusqlite::OptionalExtension;
        let mut stmt = self.stmt("SELECT type FROM keys WHERE db = ?1 AND key = ?2")?;
        Ok(stmt
            .query_row(params![db, key], |r| r.get::<_, i64>(0))
            .optional()?
            .map(Kind::from_code))
    }

    /// Deletes the element rows of a non-string key.
    fn delete_elements(&self, db: u32, key: &[u8], kind: Kind) -> Result<()> {
        if let Some(table) = kind.element_table() {
            let sql = format!("DELETE FROM {table} WHERE db = ?1 AND key = ?2");
            self.conn()
                .prepare_cached(&sql)?
                .execute(params![db, key])?;
        }
        Ok(())
    }

    /// Removes the row and elements stored under the key, live or expired.
    /// Returns the type that was stored.
    fn purge(&mut self, db: u32, key: &[u8]) -> Result<Option<Kind>> {
        let kind = self.stored_kind(db, key)?;
        if let Some(kind) = kind {
            // Only a key that was there changes (WATCH must not see a DEL
            // of a missing key as a write).
            self.touch(db, key);
            self.delete_elements(db, key, kind)?;
            self.stmt("DELETE FROM keys WHERE db = ?1 AND key = ?2")?
                .execute(params![db, key])?;
        }
        Ok(kind)
    }

    /// Stores a string value under the key, replacing whatever was there
    /// (of any type), with the given absolute expiry (SET and friends). The
    /// common case, a string over a string or a new key, is one lookup and
    /// one row written.
    pub fn put_string(
        &mut self,
        db: u32,
        key: &[u8],
        value: &[u8],
        expire_at: Option<i64>,
    ) -> Result<()> {
        self.touch(db, key);
        self.store_string(db, key, value, expire_at)
    }

    /// [`Txn::put_string`] with a value the caller hands over as `Bytes`:
    /// if the key is in the value cache, the committed value goes straight
    /// back into it (see `cache.rs`), so a key that is read and rewritten
    /// stays cached.
    pub fn put_string_shared(
        &mut self,
        db: u32,
        key: &[u8],
        value: Bytes,
        expire_at: Option<i64>,
    ) -> Result<()> {
        self.store_string(db, key, &value, expire_at)?;
        self.touched.put(db, key, value, expire_at);
        Ok(())
    }

    /// The row write shared by [`Txn::put_string`] and
    /// [`Txn::put_string_shared`] (which note the key themselves).
    fn store_string(
        &mut self,
        db: u32,
        key: &[u8],
        value: &[u8],
        expire_at: Option<i64>,
    ) -> Result<()> {
        self.wrote = true;
        // One statement for the common cases: a new key is inserted, a
        // string is overwritten. Over another type the conflict update is
        // skipped (no row changes), and the slow path below clears the old
        // elements first.
        let changed = self
            .stmt(
                "INSERT INTO keys(db,key,type,value,expire_at) VALUES(?1,?2,0,?3,?4) \
                 ON CONFLICT(db,key) DO UPDATE SET value=excluded.value, \
                 expire_at=excluded.expire_at WHERE type=0",
            )?
            .execute(params![db, key, value, expire_at])?;
        if changed == 1 {
            return Ok(());
        }
        if let Some(kind) = self.stored_kind(db, key)? {
            self.delete_elements(db, key, kind)?;
        }
        self.stmt("UPDATE keys SET type=0, value=?3, expire_at=?4 WHERE db=?1 AND key=?2")?
            .execute(params![db, key, value, expire_at])?;
        Ok(())
    }

    /// Deletes a live key (DEL). Returns whether it existed.
    pub fn delete(&mut self, db: u32, key: &[u8]) -> Result<bool> {
        self.wrote = true;
        let live = self.exists(db, key)?;
        // An expired row is removed too, but does not count as deleted.
        self.purge(db, key)?;
        Ok(live)
    }

    /// Sets (`Some`) or removes (`None`) a live key's expiry. Returns whether
    /// the key exists. An expiry at or before now deletes the key, as Redis
    /// does.
    pub fn set_expire(&mut self, db: u32, key: &[u8], expire_at: Option<i64>) -> Result<bool> {
        self.wrote = true;
        if !self.exists(db, key)? {
            return Ok(false);
        }
        if let Some(at) = expire_at {
            if at <= self.now() {
                self.purge(db, key)?;
                return Ok(true);
            }
        }
        self.touch(db, key);
        self.stmt("UPDATE keys SET expire_at = ?3 WHERE db = ?1 AND key = ?2")?
            .execute(params![db, key, expire_at])?;
        Ok(true)
    }

    /// Moves a live key to a new name in the same database, replacing the
    /// destination (RENAME) or only if it does not exist (RENAMENX, `nx`).
    /// Returns whether the key was moved; errors with `NoSuchKey` when the
    /// source does not exist.
    pub fn rename(&mut self, db: u32, from: &[u8], to: &[u8], nx: bool) -> Result<bool> {
        let Some(entry) = self.entry(db, from)? else {
            return Err(EngineError::NoSuchKey);
        };
        if from == to {
            return Ok(!nx);
        }
        if nx && self.exists(db, to)? {
            return Ok(false);
        }
        self.wrote = true;
        self.touch(db, from);
        self.touch(db, to);
        self.purge(db, to)?;
        self.stmt("UPDATE keys SET key = ?3 WHERE db = ?1 AND key = ?2")?
            .execute(params![db, from, to])?;
        if let Some(table) = entry.kind.element_table() {
            let sql = format!("UPDATE {table} SET key = ?3 WHERE db = ?1 AND key = ?2");
            self.conn()
                .prepare_cached(&sql)?
                .execute(params![db, from, to])?;
        }
        Ok(true)
    }

    /// Copies a live key, with its expiry, to `to` in `dst_db` (COPY).
    /// Returns false when the source is missing, or the destination exists
    /// and `replace` is not set.
    pub fn copy(
        &mut self,
        db: u32,
        from: &[u8],
        dst_db: u32,
        to: &[u8],
        replace: bool,
    ) -> Result<bool> {
        self.wrote = true;
        let Some(entry) = self.entry(db, from)? else {
            return Ok(false);
        };
        if db == dst_db && from == to {
            return Ok(false);
        }
        if self.exists(dst_db, to)? && !replace {
            return Ok(false);
        }
        self.touch(dst_db, to);
        self.purge(dst_db, to)?;
        self.stmt(
            "INSERT INTO keys (db, key, type, value, expire_at)
                 SELECT ?3, ?4, type, value, expire_at FROM keys WHERE db = ?1 AND key = ?2",
        )?
        .execute(params![db, from, dst_db, to])?;
        if let Some(table) = entry.kind.element_table() {
            let cols = match entry.kind {
                Kind::Hash => "field, value",
                Kind::List => "pos, value",
                Kind::Set => "member",
                Kind::ZSet => "member, score",
                Kind::String => "",
            };
            let sql = format!(
                "INSERT INTO {table} (db, key, {cols})
                 SELECT ?3, ?4, {cols} FROM {table} WHERE db = ?1 AND key = ?2"
            );
            self.conn()
                .prepare_cached(&sql)?
                .execute(params![db, from, dst_db, to])?;
        }
        Ok(true)
    }

    /// Moves a live key to another database if it is not there (MOVE).
    pub fn move_key(&mut self, db: u32, key: &[u8], dst_db: u32) -> Result<bool> {
        self.wrote = true;
        if db == dst_db || !self.exists(db, key)? || self.exists(dst_db, key)? {
            return Ok(false);
        }
        self.touch(db, key);
        self.touch(dst_db, key);
        self.purge(dst_db, key)?;
        self.stmt("UPDATE keys SET db = ?3 WHERE db = ?1 AND key = ?2")?
            .execute(params![db, key, dst_db])?;
        for table in ["hashes", "lists", "sets", "zsets"] {
            let sql = format!("UPDATE {table} SET db = ?3 WHERE db = ?1 AND key = ?2");
            self.conn()
                .prepare_cached(&sql)?
                .execute(params![db, key, dst_db])?;
        }
        Ok(true)
    }

    /// Empties one database (FLUSHDB).
    pub fn flush_db(&mut self, db: u32) -> Result<()> {
        self.touch_watched_in(Some(db))?;
        self.wrote = true;
        self.touched.all();
        for table in ["keys", "hashes", "lists", "sets", "zsets"] {
            let sql = format!("DELETE FROM {table} WHERE db = ?1");
            self.conn().prepare_cached(&sql)?.execute(params![db])?;
        }
        Ok(())
    }

    /// Empties every database (FLUSHALL).
    pub fn flush_all(&mut self) -> Result<()> {
        self.touch_watched_in(None)?;
        self.wrote = true;
        self.touched.all();
        self.conn()
            .execute_batch("DELETE FROM keys; DELETE FROM hashes; DELETE FROM lists; DELETE FROM sets; DELETE FROM zsets;")?;
        Ok(())
    }

    /// Deletes up to `limit` keys whose expiry has passed, oldest expiry
    /// first. Returns how many were deleted. The writer calls this between
    /// batches so TTL churn cannot grow the file without bound.
    pub(crate) fn expire_due(&mut self, limit: usize) -> Result<usize> {
        self.wrote = true;
        let due: Vec<(u32, Vec<u8>, i64)> = {
            let mut stmt = self.stmt(
                "SELECT db, key, type FROM keys
                 WHERE expire_at IS NOT NULL AND expire_at <= ?1
                 ORDER BY expire_at LIMIT ?2",
            )?;
            let rows = stmt.query_map(params![self.now(), limit as i64], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?;
            rows.collect::<std::result::Result<_, _>>()?
        };
        for (db, key, code) in &due {
            self.touch(*db, key);
            self.delete_elements(*db, key, Kind::from_code(*code))?;
            self.stmt("DELETE FROM keys WHERE db = ?1 AND key = ?2")?
                .execute(params![db, key])?;
        }
        Ok(due.len())
    }
}

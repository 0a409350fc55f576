//! Strings: a short value lives in the key row, so a read is one row and a
//! SET is one row written in one b-tree.
//!
//! A long value ([`crate::schema::inline_value_max`]: over 512 bytes of
//! key and value on 512-byte pages) is kept in the `strings` table under a new id, which
//! the key row carries: SQLite reads every long cell whole when a search
//! compares a key with it, so long rows in `keys` would slow every lookup
//! that passes them. Two triggers in the schema free a value whose key row
//! is deleted or given another id, so no write path has to.
//!
//! SET overwrites a key of any type. Its common case (a new key, or a string
//! over a string) is one `INSERT ... ON CONFLICT DO UPDATE ... WHERE
//! type = 0` statement (two for a long value: the value, then the row);
//! only over another type does it look further, to drop the old key's
//! elements first (see `keyspace.rs`).

use bytes::Bytes;
use rusqlite::{params, OptionalExtension};

use crate::error::{EngineError, Result};
use crate::schema::Kind;
use crate::txn::Txn;
use crate::view::View;

impl View<'_, '_> {
    /// A string key's value with its expiry; `Ok(None)` if the key does not
    /// exist, [`EngineError::WrongType`] if it holds another type.
    pub fn string_entry(&self, db: u32, key: &[u8]) -> Result<Option<(Vec<u8>, Option<i64>)>> {
        self.string_row(db, key, true)
    }

    /// A string key's value, not noted as a lookup (see `access.rs`): for
    /// a command that looked the key up already, or that looks without
    /// using (DEBUG OBJECT).
    pub fn peek_string(&self, db: u32, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.string_row(db, key, false)?.map(|(v, _)| v))
    }

    /// [`View::string_entry`], noted as a lookup when `seen`.
    fn string_row(
        &self,
        db: u32,
        key: &[u8],
        seen: bool,
    ) -> Result<Option<(Vec<u8>, Option<i64>)>> {
        let mut stmt = self.stmt(
            "SELECT k.type,
                    CASE WHEN k.type = 0 AND k.id IS NOT NULL
                         THEN (SELECT s.value FROM strings s WHERE s.id = k.id)
                         ELSE k.value END,
                    k.expire_at
             FROM keys k
             WHERE k.db = ?1 AND k.key = ?2 AND (k.expire_at IS NULL OR k.expire_at > ?3)",
        )?;
        // The value column of a hash or set row holds its flags, not
        // bytes: it is read only once the type says string.
        let row = stmt
            .query_row(params![db, key, self.now], |r| {
                let code = r.get::<_, i64>(0)?;
                let value = if code == Kind::String.code() {
                    r.get::<_, Option<Vec<u8>>>(1)?
                } else {
                    None
                };
                Ok((code, value, r.get::<_, Option<i64>>(2)?))
            })
            .optional()?;
        if seen {
            self.seen(db, key, row.is_some());
        }
        match row {
            None => Ok(None),
            Some((code, value, expire_at)) => {
                if Kind::from_code(code)? != Kind::String {
                    return Err(EngineError::WrongType);
                }
                Ok(Some((value.unwrap_or_default(), expire_at)))
            }
        }
    }

    /// A string key's first `n` bytes (all of a shorter value) with its
    /// full length, noted as a lookup; `Ok(None)` if the key does not
    /// exist, [`EngineError::WrongType`] if it holds another type. A long
    /// value is read in place (incremental blob I/O), so only the page
    /// its head is on is read, not its overflow chain: PFCOUNT's cached
    /// count is in a 12 KB HLL's first 16 bytes. The key row's statement
    /// stays open while the value is read, so both reads are one read
    /// transaction (one snapshot, one lock of the WAL) even on a view
    /// without an explicit one.
    pub fn string_head(&self, db: u32, key: &[u8], n: usize) -> Result<Option<(Vec<u8>, usize)>> {
        let mut stmt = self.stmt(
            "SELECT type, CASE WHEN type = 0 AND id IS NULL THEN value END, id FROM keys
             WHERE db = ?1 AND key = ?2 AND (expire_at IS NULL OR expire_at > ?3)",
        )?;
        let mut rows = stmt.query(params![db, key, self.now])?;
        let Some(r) = rows.next()? else {
            drop(rows);
            self.seen(db, key, false);
            return Ok(None);
        };
        let code: i64 = r.get(0)?;
        let head = if Kind::from_code(code)? != Kind::String {
            None
        } else if let Some(id) = r.get::<_, Option<i64>>(2)? {
            let blob =
                self.stmts
                    .conn()
                    .blob_open(rusqlite::MAIN_DB, c"strings", c"value", id, true)?;
            let len = blob.len();
            let mut head = vec![0; n.min(len)];
            blob.read_at_exact(&mut head, 0)?;
            Some((head, len))
        } else {
            let mut value = r.get::<_, Option<Vec<u8>>>(1)?.unwrap_or_default();
            let len = value.len();
            value.truncate(n);
            Some((value, len))
        };
        drop(rows);
        self.seen(db, key, true);
        head.map(Some).ok_or(EngineError::WrongType)
    }

    /// A string key's value (GET).
    pub fn get_string(&self, db: u32, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.string_entry(db, key)?.map(|(v, _)| v))
    }

    /// A string key's value (GET), as shared bytes; on a read-pool view
    /// the value is also offered to the value cache.
    pub fn get_string_shared(&self, db: u32, key: &[u8]) -> Result<Option<Bytes>> {
        // A read-pool view answers from the cache what its snapshot holds
        // (a script's GETs, a pipeline's, which the connection's own cache
        // lookup does not reach).
        if let Some((cache, since)) = self.fill {
            if let Some(value) = cache.get_since(since, db, key, self.now) {
                self.seen(db, key, true);
                return Ok(Some(value));
            }
        }
        let Some((value, expire_at)) = self.string_entry(db, key)? else {
            return Ok(None);
        };
        let value = Bytes::from(value);
        if let Some((cache, since)) = self.fill {
            cache.fill(since, db, key, &value, expire_at);
        }
        Ok(Some(value))
    }
}

impl<'c> Txn<'_, 'c> {
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
        self.changing(db, key);
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
        self.changes += 1;
        self.store_string(db, key, &value, expire_at)?;
        self.touched.put(db, key, value, expire_at);
        Ok(())
    }

    /// Stores `new` under a string key whose value is `old` now (read by
    /// the caller in this operation, the expiry unchanged), writing only
    /// the bytes that differ where the storage allows: a long value of the
    /// same length is patched in place in its `strings` row (SQLite's
    /// incremental blob writes dirty only the pages of the overflow chain
    /// the changed bytes are on), so a PFADD to a dense HyperLogLog writes
    /// the few pages its registers are on rather than all 12 KB. A value
    /// that changes length, or lives in its key row, is stored whole
    /// ([`Txn::put_string`]).
    pub fn patch_string(
        &mut self,
        db: u32,
        key: &[u8],
        old: &[u8],
        new: &[u8],
        expire_at: Option<i64>,
    ) -> Result<()> {
        if old.len() == new.len() {
            let id = self
                .stmt("SELECT id FROM keys WHERE db = ?1 AND key = ?2 AND type = 0")?
                .query_row(params![db, key], |r| r.get::<_, Option<i64>>(0))
                .optional()?
                .flatten();
            if let Some(id) = id {
                let mut blob =
                    self.conn()
                        .blob_open(rusqlite::MAIN_DB, c"strings", c"value", id, false)?;
                if blob.len() == new.len() {
                    self.changing(db, key);
                    for (start, end) in changed_runs(old, new) {
                        blob.write_at(&new[start..end], start)?;
                    }
                    return Ok(());
                }
            }
        }
        self.put_string(db, key, new, expire_at)
    }

    /// The live string at `key` when its value is a long one (kept in
    /// `strings`), opened for reading and patching in place without
    /// reading it whole; `None` when the key is missing, expired, of
    /// another type, or short (in its key row): the caller then reads it
    /// the usual way, which reports those cases. The lookup is not noted
    /// (see `access.rs`): a caller that goes on with the value calls
    /// [`Txn::note_found`], one that falls back to the usual read leaves
    /// it to that read.
    pub fn open_long_string(&mut self, db: u32, key: &[u8]) -> Result<Option<LongString<'c>>> {
        let row = self
            .stmt(
                "SELECT id, expire_at FROM keys WHERE db = ?1 AND key = ?2 AND type = 0 \
                 AND id IS NOT NULL AND (expire_at IS NULL OR expire_at > ?3)",
            )?
            .query_row(params![db, key, self.now()], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, Option<i64>>(1)?))
            })
            .optional()?;
        let Some((id, expire_at)) = row else {
            return Ok(None);
        };
        let blob = self
            .conn()
            .blob_open(rusqlite::MAIN_DB, c"strings", c"value", id, false)?;
        Ok(Some(LongString {
            blob,
            db,
            key: key.to_vec(),
            expire_at,
        }))
    }

    /// Notes the lookup of a long string opened by
    /// [`Txn::open_long_string`], as a read of the value would.
    pub fn note_found(&self, value: &LongString<'c>) {
        self.seen(value.db, &value.key, true);
    }

    /// Writes `data` at `offset` of a long string opened by
    /// [`Txn::open_long_string`] (inside its length), noting the key as
    /// changed.
    pub fn write_long_string(
        &mut self,
        value: &mut LongString<'c>,
        offset: usize,
        data: &[u8],
    ) -> Result<()> {
        self.changing(value.db, &value.key);
        value.blob.write_at(data, offset)?;
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
        // Only with `x` or `n` wanted, or replicas fed: the row as it was,
        // for `expired` (an expired row this write replaces; a replica
        // deletes it first) and `new`.
        if self.notifying(crate::notify::EXPIRED | crate::notify::NEW) || self.propagating {
            let stored = self.stored(db, key)?;
            let now = self.now();
            let expired = stored.is_some_and(|s| s.expire_at.is_some_and(|at| at <= now));
            if expired {
                self.dropped_expired(db, key);
            }
            if stored.is_none() || expired {
                self.notify(crate::notify::NEW, "new", db, key);
            }
        }
        // A long value goes to `strings` first, under a new id; the row
        // then holds the id instead of the bytes (see the module docs).
        let inline =
            key.len() + value.len() <= crate::schema::inline_value_max(self.stmts.page_size()?);
        let (value, id) = if inline {
            (Some(value), None)
        } else {
            let id = self.new_id()?;
            self.stmt("INSERT INTO strings (id, value) VALUES (?1, ?2)")?
                .execute(params![id, value])?;
            (None, Some(id))
        };
        // One statement for the common cases: a new key is inserted, a
        // string is overwritten (a long value it had is freed by the
        // schema's trigger when `id` changes). Over another type the
        // conflict update is skipped (no row changes), and the slow path
        // below drops the old key first.
        let changed = self
            .stmt(
                "INSERT INTO keys(db,key,type,value,expire_at,id) VALUES(?1,?2,0,?3,?4,?5) \
                 ON CONFLICT(db,key) DO UPDATE SET value=excluded.value, \
                 expire_at=excluded.expire_at, id=excluded.id WHERE type=0",
            )?
            .execute(params![db, key, value, expire_at, id])?;
        if changed == 1 {
            return Ok(());
        }
        self.purge(db, key)?;
        self.stmt("INSERT INTO keys(db,key,type,value,expire_at,id) VALUES(?1,?2,0,?3,?4,?5)")?
            .execute(params![db, key, value, expire_at, id])?;
        Ok(())
    }
}

/// A long string value open in place (see [`Txn::open_long_string`]):
/// reads of a few bytes touch only the pages they are on, and writes
/// ([`Txn::write_long_string`]) dirty only those.
pub struct LongString<'c> {
    blob: rusqlite::blob::Blob<'c>,
    db: u32,
    key: Vec<u8>,
    expire_at: Option<i64>,
}

impl LongString<'_> {
    /// The value's length in bytes.
    pub fn len(&self) -> usize {
        self.blob.len()
    }

    /// Whether the value is empty (a long value never is).
    pub fn is_empty(&self) -> bool {
        self.blob.is_empty()
    }

    /// The key's expiry (Unix milliseconds).
    pub fn expire_at(&self) -> Option<i64> {
        self.expire_at
    }

    /// Fills `buf` from `offset`; the bytes past the value's end read as
    /// zero (what redis finds after its strings).
    pub fn read_at(&self, buf: &mut [u8], offset: usize) -> Result<()> {
        buf.fill(0);
        let end = (offset + buf.len()).min(self.len());
        if offset < end {
            self.blob.read_at_exact(&mut buf[..end - offset], offset)?;
        }
        Ok(())
    }
}

/// The byte ranges where `new` differs from `old` (of one length), runs
/// closer than a few bytes joined into one write. The slices are compared
/// a block at a time (a `memcmp`), so a 12 KB value with ten changed bytes
/// costs about a microsecond.
fn changed_runs(old: &[u8], new: &[u8]) -> Vec<(usize, usize)> {
    /// Equal bytes between two changes that still make one write.
    const GAP: usize = 16;
    /// Bytes compared at once.
    const BLOCK: usize = 64;
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < new.len() {
        let end = (i + BLOCK).min(new.len());
        if old[i..end] != new[i..end] {
            for j in i..end {
                if old[j] != new[j] {
                    match runs.last_mut() {
                        Some(run) if j - run.1 < GAP => run.1 = j + 1,
                        _ => runs.push((j, j + 1)),
                    }
                }
            }
        }
        i = end;
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::changed_runs;

    #[test]
    fn changed_runs_cover_every_difference() {
        let old = vec![0u8; 200];
        let mut new = old.clone();
        assert!(changed_runs(&old, &new).is_empty());
        for i in [0, 5, 40, 100, 199] {
            new[i] = 1;
        }
        let runs = changed_runs(&old, &new);
        assert_eq!(runs, vec![(0, 6), (40, 41), (100, 101), (199, 200)]);
        let mut patched = old.clone();
        for (a, b) in runs {
            patched[a..b].copy_from_slice(&new[a..b]);
        }
        assert_eq!(patched, new);
    }
}

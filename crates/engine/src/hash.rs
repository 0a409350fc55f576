//! Hashes: one row per field in `hashes`, keyed by `(key id, field)`.
//!
//! HGET and HSET of one field touch one element row (plus the key row, which
//! a lookup reads anyway and a new field's count update writes); HLEN reads
//! the count kept in the key row; HGETALL reads the key's rows in field
//! order and nothing else. Writes open the key through the gate in
//! `keyspace.rs`, which also deletes the key when HDEL removes its last
//! field.

use rusqlite::{params, OptionalExtension};

use crate::error::{EngineError, Result};
use crate::keyspace::{page, scan_start, KeyRow, Slot};
use crate::schema::{Kind, ENC_BIG};
use crate::txn::Txn;
use crate::view::View;

/// A field/value pair.
pub type Pair = (Vec<u8>, Vec<u8>);

impl View<'_, '_> {
    /// One field's value (HGET): one statement, the key row and one element
    /// row. WRONGTYPE if the key holds another type.
    pub fn hash_get(&self, db: u32, key: &[u8], field: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut stmt = self.stmt(
            "SELECT k.type, h.value FROM keys k
             LEFT JOIN hashes h ON h.id = k.id AND h.field = ?3
             WHERE k.db = ?1 AND k.key = ?2 AND (k.expire_at IS NULL OR k.expire_at > ?4)",
        )?;
        let row = stmt
            .query_row(params![db, key, field, self.now], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, Option<Vec<u8>>>(1)?))
            })
            .optional()?;
        self.seen(db, key, row.is_some());
        match row {
            None => Ok(None),
            Some((code, value)) => {
                if Kind::from_code(code)? != Kind::Hash {
                    return Err(EngineError::WrongType);
                }
                Ok(value)
            }
        }
    }

    /// A field's value in the hash stored under `id`.
    pub fn hash_field(&self, id: i64, field: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self
            .stmt("SELECT value FROM hashes WHERE id = ?1 AND field = ?2")?
            .query_row(params![id, field], |r| r.get(0))
            .optional()?)
    }

    /// Every field and value of the hash stored under `id`, in field order.
    pub fn hash_all(&self, id: i64) -> Result<Vec<Pair>> {
        let mut stmt = self.stmt("SELECT field, value FROM hashes WHERE id = ?1 ORDER BY field")?;
        let rows = stmt.query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<std::result::Result<_, _>>()?)
    }

    /// The `n`-th field (in field order) of the hash under `id`, with its
    /// value.
    pub fn hash_nth(&self, id: i64, n: i64) -> Result<Option<Pair>> {
        Ok(self
            .stmt("SELECT field, value FROM hashes WHERE id = ?1 ORDER BY field LIMIT 1 OFFSET ?2")?
            .query_row(params![id, n], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?)
    }

    /// One HSCAN page of the hash `row`: a compact hash (as redis-server
    /// would store it as a listpack) whole with cursor 0, as redis-server
    /// answers; a big one about `count` fields from `cursor` (see
    /// `keyspace.rs` for the cursor).
    pub fn hash_scan(&self, row: &KeyRow, cursor: u64, count: usize) -> Result<(Vec<Pair>, u64)> {
        if row.flags & ENC_BIG == 0 {
            return Ok((self.hash_all(row.id)?, 0));
        }
        let mut stmt = self
            .stmt("SELECT field, value FROM hashes WHERE id = ?1 AND field >= ?2 ORDER BY field")?;
        let mut rows = stmt.query(params![row.id, scan_start(cursor)])?;
        let (pairs, cursor) = page(&mut rows, count.max(1), |r| {
            Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, Vec<u8>>(1)?))
        })?;
        Ok((pairs, cursor))
    }
}

/// The flag bits a hash gets from storing this pair.
pub(crate) fn pair_flags(field: &[u8], value: &[u8], max: usize) -> i64 {
    if field.len() > max || value.len() > max {
        ENC_BIG
    } else {
        0
    }
}

impl Txn<'_, '_> {
    /// Sets fields of an opened hash (HSET, HMSET, HSETNX with `only_new`,
    /// HINCRBY). Returns how many fields were new.
    pub fn hash_set<F, V>(
        &mut self,
        slot: &mut Slot<'_>,
        pairs: &[(F, V)],
        only_new: bool,
    ) -> Result<i64>
    where
        F: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        let id = self.slot_id(slot)?;
        // Into an existing hash most fields are usually there already:
        // try the UPDATE first, one b-tree descent for a field that exists
        // (INSERT OR IGNORE then UPDATE took two, and a 1000-field HSET over
        // existing fields spent its time there). Into a new hash, INSERT
        // first.
        let update_first = !only_new && !slot.is_empty();
        let mut added = 0;
        let mut flags = 0;
        for (field, value) in pairs {
            let (field, value) = (field.as_ref(), value.as_ref());
            if update_first {
                let updated = self
                    .stmt("UPDATE hashes SET value = ?3 WHERE id = ?1 AND field = ?2")?
                    .execute(params![id, field, value])?;
                if updated == 0 {
                    self.stmt("INSERT INTO hashes (id, field, value) VALUES (?1, ?2, ?3)")?
                        .execute(params![id, field, value])?;
                    added += 1;
                }
                flags |= pair_flags(field, value, self.thresholds.hash_value());
                continue;
            }
            let inserted = self
                .stmt("INSERT OR IGNORE INTO hashes (id, field, value) VALUES (?1, ?2, ?3)")?
                .execute(params![id, field, value])?;
            if inserted == 1 {
                added += 1;
            } else if !only_new {
                self.stmt("UPDATE hashes SET value = ?3 WHERE id = ?1 AND field = ?2")?
                    .execute(params![id, field, value])?;
            } else {
                continue;
            }
            flags |= pair_flags(field, value, self.thresholds.hash_value());
        }
        if slot.len() + added > self.thresholds.hash_entries() {
            flags |= ENC_BIG;
        }
        self.settle(slot, added, flags)?;
        Ok(added)
    }

    /// Deletes fields of an opened hash (HDEL); the key goes with its last
    /// field. Returns how many existed.
    pub fn hash_delete<F: AsRef<[u8]>>(
        &mut self,
        slot: &mut Slot<'_>,
        fields: &[F],
    ) -> Result<i64> {
        let Some(row) = slot.row() else {
            return Ok(0);
        };
        let mut removed = 0;
        for field in fields {
            let n = self
                .stmt("DELETE FROM hashes WHERE id = ?1 AND field = ?2")?
                .execute(params![row.id, field.as_ref()])?;
            if n > 0 && removed == 0 {
                self.changing(slot.db, slot.key);
            }
            removed += n as i64;
        }
        self.settle(slot, -removed, 0)?;
        Ok(removed)
    }
}

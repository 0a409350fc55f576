//! Sets: one row per member in `sets`, keyed by `(key id, member)`.
//!
//! SADD and SISMEMBER touch one element row per member; SCARD reads the
//! count kept in the key row; SMEMBERS reads the key's rows and nothing
//! else. Writes open the key through the gate in `keyspace.rs`, which also
//! deletes the key when its last member goes.

use rusqlite::{params, OptionalExtension};

use crate::error::{EngineError, Result};
use crate::keyspace::{page, scan_start, KeyRow, Slot};
use crate::schema::{Kind, ENC_BIG};
use crate::txn::Txn;
use crate::view::View;

/// Whether redis-server would keep `member` in an intset: it is the
/// canonical decimal form of a 64-bit signed integer (Redis's
/// `string2ll`: no sign but a leading `-`, no leading zeros, no spaces).
pub fn is_intset_member(member: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(member) else {
        return false;
    };
    match text.parse::<i64>() {
        Ok(n) => n.to_string() == text,
        Err(_) => false,
    }
}

impl View<'_, '_> {
    /// Whether `member` is in the set (SISMEMBER): one statement, the key
    /// row and one element row. WRONGTYPE if the key holds another type.
    pub fn set_contains(&self, db: u32, key: &[u8], member: &[u8]) -> Result<bool> {
        let mut stmt = self.stmt(
            "SELECT k.type, s.member IS NOT NULL FROM keys k
             LEFT JOIN sets s ON s.id = k.id AND s.member = ?3
             WHERE k.db = ?1 AND k.key = ?2 AND (k.expire_at IS NULL OR k.expire_at > ?4)",
        )?;
        let row = stmt
            .query_row(params![db, key, member, self.now], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, bool>(1)?))
            })
            .optional()?;
        self.seen(db, key, row.is_some());
        match row {
            None => Ok(false),
            Some((code, found)) => {
                if Kind::from_code(code)? != Kind::Set {
                    return Err(EngineError::WrongType);
                }
                Ok(found)
            }
        }
    }

    /// Whether `member` is in the set stored under `id`.
    pub fn set_has(&self, id: i64, member: &[u8]) -> Result<bool> {
        Ok(self
            .stmt("SELECT 1 FROM sets WHERE id = ?1 AND member = ?2")?
            .query_row(params![id, member], |_| Ok(()))
            .optional()?
            .is_some())
    }

    /// Every member of the set stored under `id`, in member order.
    pub fn set_members(&self, id: i64) -> Result<Vec<Vec<u8>>> {
        let mut stmt = self.stmt("SELECT member FROM sets WHERE id = ?1 ORDER BY member")?;
        let rows = stmt.query_map([id], |r| r.get(0))?;
        Ok(rows.collect::<std::result::Result<_, _>>()?)
    }

    /// The members of a live set key, empty if it does not exist; an
    /// intset's in numeric order, as redis-server lists them.
    pub fn set_members_of(&self, db: u32, key: &[u8]) -> Result<Vec<Vec<u8>>> {
        match self.live(db, key, Kind::Set)? {
            Some(row) => self.set_members_listed(&row),
            None => Ok(Vec::new()),
        }
    }

    /// Every member of the set `row`; an intset's in numeric order, as
    /// redis-server lists them, others in byte order.
    pub fn set_members_listed(&self, row: &KeyRow) -> Result<Vec<Vec<u8>>> {
        let mut members = self.set_members(row.id)?;
        if row.flags & ENC_BIG == 0 {
            members.sort_by_key(|m| {
                std::str::from_utf8(m)
                    .ok()
                    .and_then(|t| t.parse::<i64>().ok())
                    .unwrap_or(0)
            });
        }
        Ok(members)
    }

    /// The `n`-th member (in member order) of the set under `id`.
    pub fn set_nth(&self, id: i64, n: i64) -> Result<Option<Vec<u8>>> {
        Ok(self
            .stmt("SELECT member FROM sets WHERE id = ?1 ORDER BY member LIMIT 1 OFFSET ?2")?
            .query_row(params![id, n], |r| r.get(0))
            .optional()?)
    }

    /// One SSCAN page of the set `row`: an intset whole with cursor 0, as
    /// redis-server answers; a big one about `count` members from `cursor`
    /// (see `keyspace.rs` for the cursor).
    pub fn set_scan(&self, row: &KeyRow, cursor: u64, count: usize) -> Result<(Vec<Vec<u8>>, u64)> {
        if row.flags & ENC_BIG == 0 {
            return Ok((self.set_members_listed(row)?, 0));
        }
        let mut stmt =
            self.stmt("SELECT member FROM sets WHERE id = ?1 AND member >= ?2 ORDER BY member")?;
        let mut rows = stmt.query(params![row.id, scan_start(cursor)])?;
        let (members, cursor) = page(&mut rows, count.max(1), |r| {
            Ok((r.get::<_, Vec<u8>>(0)?, ()))
        })?;
        Ok((members.into_iter().map(|(m, ())| m).collect(), cursor))
    }
}

impl Txn<'_, '_> {
    /// Adds members to an opened set (SADD). Returns how many were new.
    pub fn set_add<M: AsRef<[u8]>>(&mut self, slot: &mut Slot<'_>, members: &[M]) -> Result<i64> {
        // Into an existing set, the key counts as changed only once a
        // member is new: SADD of members already there is no change to
        // Redis, and must not break a WATCH.
        let id = match slot.row() {
            Some(row) => row.id,
            None => self.slot_id(slot)?,
        };
        let mut added = 0;
        let mut flags = 0;
        for member in members {
            let member = member.as_ref();
            let n = self
                .stmt("INSERT OR IGNORE INTO sets (id, member) VALUES (?1, ?2)")?
                .execute(params![id, member])?;
            if n == 1 {
                if added == 0 {
                    self.changing(slot.db, slot.key);
                }
                added += 1;
                if !is_intset_member(member) {
                    flags |= ENC_BIG;
                }
            }
        }
        if slot.len() + added > self.thresholds.set_entries() {
            flags |= ENC_BIG;
        }
        self.settle(slot, added, flags)?;
        Ok(added)
    }

    /// Removes members of an opened set (SREM, SPOP, SMOVE); the key goes
    /// with its last member. Returns how many were there.
    pub fn set_remove<M: AsRef<[u8]>>(
        &mut self,
        slot: &mut Slot<'_>,
        members: &[M],
    ) -> Result<i64> {
        let Some(row) = slot.row() else {
            return Ok(0);
        };
        let mut removed = 0;
        for member in members {
            let n = self
                .stmt("DELETE FROM sets WHERE id = ?1 AND member = ?2")?
                .execute(params![row.id, member.as_ref()])?;
            if n > 0 && removed == 0 {
                self.changing(slot.db, slot.key);
            }
            removed += n as i64;
        }
        self.settle(slot, -removed, 0)?;
        Ok(removed)
    }

    /// Replaces whatever is stored under the key with a set of `members`
    /// (the STORE forms); an empty result deletes the key. Returns the new
    /// size.
    pub fn set_store<M: AsRef<[u8]>>(&mut self, db: u32, key: &[u8], members: &[M]) -> Result<i64> {
        let live = self.replace(db, key)?;
        if members.is_empty() {
            return Ok(0);
        }
        let mut slot = self.open(db, key, Kind::Set)?;
        let n = self.set_add(&mut slot, members)?;
        if live {
            self.not_new(db, key);
        }
        Ok(n)
    }
}

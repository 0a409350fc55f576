//! Lists: one row per element in `lists`, keyed by `(key id, position)`.
//!
//! A list is its elements in position order. Positions are integers spaced
//! [`STEP`] apart, so both ends grow without touching what is already
//! there: LPUSH writes its element at the head's position minus `STEP`,
//! RPUSH at the tail's plus `STEP`, and LPOP/RPOP delete the first or last
//! rows. Each of those finds its end with one descent of the primary key's
//! b-tree, however long the list, and the count kept in the key row makes
//! LLEN one row read. LINDEX, LSET and LRANGE walk from whichever end is
//! nearer (O(distance), as a Redis quicklist does).
//!
//! LINSERT puts its element halfway between the pivot and its neighbour.
//! When two neighbours have no integer left between them (twenty inserts
//! at one spot), or a push would run past [`LIMIT`] (trillions of pushes
//! at one end), the list is renumbered: read, deleted and written back
//! with fresh spacing, O(n) once, which is LINSERT's own complexity and
//! amortises to nothing for pushes. LREM and LPOS scan, as in Redis; LTRIM
//! deletes the trimmed ends by position range.
//!
//! Every write opens the key through the gate in `keyspace.rs`, which also
//! deletes the key when its last element goes.

use rusqlite::{params, OptionalExtension};

use crate::error::Result;
use crate::keyspace::{KeyRow, Slot};
use crate::txn::Txn;
use crate::view::View;

/// The distance between neighbouring positions when they are written by a
/// push or a renumbering.
pub const STEP: i64 = 1 << 20;

/// Positions stay within `-LIMIT..=LIMIT`, so the difference of two never
/// overflows.
pub const LIMIT: i64 = 1 << 61;

/// Which end of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The head (LEFT, index 0).
    Left,
    /// The tail (RIGHT, index -1).
    Right,
}

/// Redis's reading of a `start stop` range over `len` elements (LRANGE,
/// LTRIM): negative indexes count from the end, and the result is the
/// inclusive index range, or `None` when it is empty.
pub fn range_indexes(len: i64, start: i64, stop: i64) -> Option<(i64, i64)> {
    let mut start = if start < 0 { len + start } else { start };
    let mut stop = if stop < 0 { len + stop } else { stop };
    if start < 0 {
        start = 0;
    }
    if start > stop || start >= len {
        return None;
    }
    if stop >= len {
        stop = len - 1;
    }
    Some((start, stop))
}

/// Where LPOS looks and what it collects.
#[derive(Debug, Clone, Copy)]
pub struct Seek {
    /// The match to start from: 1 the first, -1 the first from the tail.
    pub rank: i64,
    /// How many matches to collect (0: all).
    pub count: i64,
    /// How many elements to examine at most (0: all).
    pub maxlen: i64,
}

impl View<'_, '_> {
    /// The position and value of the element at index `i` (0-based, within
    /// `0..len`), walking from the nearer end.
    fn list_at(&self, id: i64, len: i64, i: i64) -> Result<Option<(i64, Vec<u8>)>> {
        let (sql, offset) = if i <= len - 1 - i {
            (
                "SELECT pos, value FROM lists WHERE id = ?1 ORDER BY pos LIMIT 1 OFFSET ?2",
                i,
            )
        } else {
            (
                "SELECT pos, value FROM lists WHERE id = ?1 ORDER BY pos DESC LIMIT 1 OFFSET ?2",
                len - 1 - i,
            )
        };
        Ok(self
            .stmt(sql)?
            .query_row(params![id, offset], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?)
    }

    /// The element at `index` (LINDEX; negative counts from the tail).
    pub fn list_index(&self, row: &KeyRow, index: i64) -> Result<Option<Vec<u8>>> {
        let i = if index < 0 {
            row.count.checked_add(index).unwrap_or(-1)
        } else {
            index
        };
        if i < 0 || i >= row.count {
            return Ok(None);
        }
        Ok(self.list_at(row.id, row.count, i)?.map(|(_, v)| v))
    }

    /// The elements from `start` to `stop` inclusive, Redis's way (LRANGE),
    /// read from the nearer end.
    pub fn list_range(&self, row: &KeyRow, start: i64, stop: i64) -> Result<Vec<Vec<u8>>> {
        let Some((start, stop)) = range_indexes(row.count, start, stop) else {
            return Ok(Vec::new());
        };
        let n = stop - start + 1;
        if start <= row.count - 1 - stop {
            let mut stmt =
                self.stmt("SELECT value FROM lists WHERE id = ?1 ORDER BY pos LIMIT ?3 OFFSET ?2")?;
            let rows = stmt.query_map(params![row.id, start, n], |r| r.get(0))?;
            Ok(rows.collect::<std::result::Result<_, _>>()?)
        } else {
            let mut stmt = self.stmt(
                "SELECT value FROM lists WHERE id = ?1 ORDER BY pos DESC LIMIT ?3 OFFSET ?2",
            )?;
            let rows = stmt.query_map(params![row.id, row.count - 1 - stop, n], |r| r.get(0))?;
            let mut out: Vec<Vec<u8>> = rows.collect::<std::result::Result<_, _>>()?;
            out.reverse();
            Ok(out)
        }
    }

    /// Every element, head first (SORT).
    pub fn list_all(&self, id: i64) -> Result<Vec<Vec<u8>>> {
        let mut stmt = self.stmt("SELECT value FROM lists WHERE id = ?1 ORDER BY pos")?;
        let rows = stmt.query_map([id], |r| r.get(0))?;
        Ok(rows.collect::<std::result::Result<_, _>>()?)
    }

    /// The indexes of `element` as LPOS finds them: from the head for a
    /// positive rank, from the tail for a negative one, skipping the first
    /// `|rank| - 1` matches, examining at most `maxlen` elements.
    pub fn list_positions(&self, row: &KeyRow, element: &[u8], seek: Seek) -> Result<Vec<i64>> {
        let from_tail = seek.rank < 0;
        let rank = seek.rank.unsigned_abs();
        let sql = if from_tail {
            "SELECT value = ?2 FROM lists WHERE id = ?1 ORDER BY pos DESC"
        } else {
            "SELECT value = ?2 FROM lists WHERE id = ?1 ORDER BY pos"
        };
        let mut stmt = self.stmt(sql)?;
        let mut rows = stmt.query(params![row.id, element])?;
        let mut out = Vec::new();
        let (mut index, mut matches) = (0i64, 0u64);
        while let Some(r) = rows.next()? {
            if seek.maxlen != 0 && index >= seek.maxlen {
                break;
            }
            if r.get::<_, bool>(0)? {
                matches += 1;
                if matches >= rank {
                    out.push(if from_tail {
                        row.count - index - 1
                    } else {
                        index
                    });
                    if seek.count != 0 && out.len() as i64 >= seek.count {
                        break;
                    }
                }
            }
            index += 1;
        }
        Ok(out)
    }
}

impl Txn<'_, '_> {
    /// The position of the head or tail element of the list under `id`.
    fn list_end(&self, id: i64, end: End) -> Result<Option<i64>> {
        let sql = match end {
            End::Left => "SELECT pos FROM lists WHERE id = ?1 ORDER BY pos LIMIT 1",
            End::Right => "SELECT pos FROM lists WHERE id = ?1 ORDER BY pos DESC LIMIT 1",
        };
        Ok(self.stmt(sql)?.query_row([id], |r| r.get(0)).optional()?)
    }

    /// Writes the list under `id` back with fresh spacing, centred on 0.
    fn list_renumber(&mut self, id: i64) -> Result<()> {
        let values = self.list_all(id)?;
        self.stmt("DELETE FROM lists WHERE id = ?1")?
            .execute([id])?;
        let first = -(values.len() as i64 / 2) * STEP;
        for (i, v) in values.iter().enumerate() {
            self.stmt("INSERT INTO lists (id, pos, value) VALUES (?1, ?2, ?3)")?
                .execute(params![id, first + i as i64 * STEP, v])?;
        }
        Ok(())
    }

    /// Pushes `values` one after the other at `end` of an opened list
    /// (LPUSH, RPUSH, and the push half of LMOVE), creating the key if
    /// needed. Returns the new length.
    pub fn list_push<V: AsRef<[u8]>>(
        &mut self,
        slot: &mut Slot<'_>,
        values: &[V],
        end: End,
    ) -> Result<i64> {
        if values.is_empty() {
            return Ok(slot.len());
        }
        // A new list waits in memory (see `elide.rs`).
        if slot.elide {
            if let Some(len) = self.elided_push(slot, values, end)? {
                return Ok(len);
            }
        }
        let existed = !slot.is_empty();
        let id = self.slot_id_deferred(slot)?;
        let n = values.len() as i64;
        let dir = match end {
            End::Left => -1,
            End::Right => 1,
        };
        // The end is read by one statement and the element written by
        // another: an `INSERT ... SELECT` from the list's own table, or a
        // `RETURNING` clause, would each build a temporary b-tree (a pager
        // and a page cache opened and closed per push), which costs more
        // than the second statement. A new list has no end to read.
        let mut last = if existed {
            self.list_end(id, end)?
        } else {
            None
        };
        if let Some(p) = last {
            // Room for every new position inside the limit?
            if (dir < 0 && p - n.saturating_mul(STEP) < -LIMIT)
                || (dir > 0 && p + n.saturating_mul(STEP) > LIMIT)
            {
                self.list_renumber(id)?;
                last = self.list_end(id, end)?;
            }
        }
        let mut pos = match last {
            Some(p) => p + dir * STEP,
            None => 0,
        };
        for v in values {
            self.stmt("INSERT INTO lists (id, pos, value) VALUES (?1, ?2, ?3)")?
                .execute(params![id, pos, v.as_ref()])?;
            pos += dir * STEP;
        }
        self.settle(slot, n, 0)?;
        Ok(slot.len())
    }

    /// Removes up to `count` elements from `end` of an opened list (LPOP,
    /// RPOP, and the pops of LMOVE, LMPOP and the blocking commands), in
    /// the order they leave. The key goes with its last element.
    pub fn list_pop(&mut self, slot: &mut Slot<'_>, end: End, count: i64) -> Result<Vec<Vec<u8>>> {
        if slot.is_empty() || count <= 0 {
            return Ok(Vec::new());
        }
        // The list waiting in memory (see `elide.rs`).
        if slot.elide {
            if let Some(values) = self.elided_pop(slot, end, count)? {
                return Ok(values);
            }
        }
        let Some(row) = slot.row() else {
            return Ok(Vec::new());
        };
        if count == 1 {
            // The common pop: the end element read by one descent, then
            // deleted by its key (a `DELETE ... RETURNING` would build a
            // temporary b-tree for its one row; see `list_push`).
            let sql = match end {
                End::Left => "SELECT pos, value FROM lists WHERE id = ?1 ORDER BY pos LIMIT 1",
                End::Right => {
                    "SELECT pos, value FROM lists WHERE id = ?1 ORDER BY pos DESC LIMIT 1"
                }
            };
            let found: Option<(i64, Vec<u8>)> = self
                .stmt(sql)?
                .query_row([row.id], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            let Some((pos, value)) = found else {
                return Ok(Vec::new());
            };
            self.changing(slot.db, slot.key);
            self.stmt("DELETE FROM lists WHERE id = ?1 AND pos = ?2")?
                .execute(params![row.id, pos])?;
            self.settle(slot, -1, 0)?;
            return Ok(vec![value]);
        }
        let sql = match end {
            End::Left => "SELECT pos, value FROM lists WHERE id = ?1 ORDER BY pos LIMIT ?2",
            End::Right => "SELECT pos, value FROM lists WHERE id = ?1 ORDER BY pos DESC LIMIT ?2",
        };
        let rows: Vec<(i64, Vec<u8>)> = {
            let mut stmt = self.stmt(sql)?;
            let rows = stmt.query_map(params![row.id, count], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect::<std::result::Result<_, _>>()?
        };
        let Some(&(boundary, _)) = rows.last() else {
            return Ok(Vec::new());
        };
        self.changing(slot.db, slot.key);
        let delete = match end {
            End::Left => "DELETE FROM lists WHERE id = ?1 AND pos <= ?2",
            End::Right => "DELETE FROM lists WHERE id = ?1 AND pos >= ?2",
        };
        self.stmt(delete)?.execute(params![row.id, boundary])?;
        self.settle(slot, -(rows.len() as i64), 0)?;
        Ok(rows.into_iter().map(|(_, v)| v).collect())
    }

    /// Replaces the element at `index` (LSET). Returns false when the index
    /// is out of range.
    pub fn list_set(&mut self, slot: &mut Slot<'_>, index: i64, value: &[u8]) -> Result<bool> {
        let Some(row) = slot.row() else {
            return Ok(false);
        };
        let i = if index < 0 {
            row.count.checked_add(index).unwrap_or(-1)
        } else {
            index
        };
        if i < 0 || i >= row.count {
            return Ok(false);
        }
        let Some((pos, _)) = self.list_at(row.id, row.count, i)? else {
            return Ok(false);
        };
        self.changing(slot.db, slot.key);
        self.stmt("UPDATE lists SET value = ?3 WHERE id = ?1 AND pos = ?2")?
            .execute(params![row.id, pos, value])?;
        Ok(true)
    }

    /// Keeps only the elements from `start` to `stop` (LTRIM).
    pub fn list_trim(&mut self, slot: &mut Slot<'_>, start: i64, stop: i64) -> Result<()> {
        let Some(row) = slot.row() else {
            return Ok(());
        };
        let Some((start, stop)) = range_indexes(row.count, start, stop) else {
            self.changing(slot.db, slot.key);
            self.stmt("DELETE FROM lists WHERE id = ?1")?
                .execute([row.id])?;
            return self.settle(slot, -row.count, 0);
        };
        let (ltrim, rtrim) = (start, row.count - 1 - stop);
        // Redis signals the key as modified even when nothing is trimmed
        // (a WATCH on it breaks), so this does too.
        self.changing(slot.db, slot.key);
        if ltrim == 0 && rtrim == 0 {
            return Ok(());
        }
        // Both boundaries are found before either end is deleted: `list_at`
        // counts from the nearer end of the list as it stands, and once the
        // head is trimmed the index `stop` no longer names the same element
        // from the head (the tail's trim then kept elements it should have
        // deleted).
        let first_kept = if ltrim > 0 {
            self.list_at(row.id, row.count, start)?
        } else {
            None
        };
        let last_kept = if rtrim > 0 {
            self.list_at(row.id, row.count, stop)?
        } else {
            None
        };
        if let Some((first_kept, _)) = first_kept {
            self.stmt("DELETE FROM lists WHERE id = ?1 AND pos < ?2")?
                .execute(params![row.id, first_kept])?;
        }
        if let Some((last_kept, _)) = last_kept {
            self.stmt("DELETE FROM lists WHERE id = ?1 AND pos > ?2")?
                .execute(params![row.id, last_kept])?;
        }
        self.settle(slot, -(ltrim + rtrim), 0)
    }

    /// Removes elements equal to `value` (LREM): the first `count` from the
    /// head for a positive count, from the tail for a negative one, all of
    /// them for 0. Returns how many went.
    pub fn list_remove(&mut self, slot: &mut Slot<'_>, count: i64, value: &[u8]) -> Result<i64> {
        let Some(row) = slot.row() else {
            return Ok(0);
        };
        let removed = if count == 0 {
            let n = self
                .stmt("DELETE FROM lists WHERE id = ?1 AND value = ?2")?
                .execute(params![row.id, value])? as i64;
            if n > 0 {
                self.changing(slot.db, slot.key);
            }
            n
        } else {
            let sql = if count > 0 {
                "SELECT pos FROM lists WHERE id = ?1 AND value = ?2 ORDER BY pos LIMIT ?3"
            } else {
                "SELECT pos FROM lists WHERE id = ?1 AND value = ?2 ORDER BY pos DESC LIMIT ?3"
            };
            let positions: Vec<i64> = {
                let mut stmt = self.stmt(sql)?;
                let rows = stmt.query_map(
                    params![
                        row.id,
                        value,
                        count.unsigned_abs().min(i64::MAX as u64) as i64
                    ],
                    |r| r.get(0),
                )?;
                rows.collect::<std::result::Result<_, _>>()?
            };
            if !positions.is_empty() {
                self.changing(slot.db, slot.key);
            }
            for pos in &positions {
                self.stmt("DELETE FROM lists WHERE id = ?1 AND pos = ?2")?
                    .execute(params![row.id, pos])?;
            }
            positions.len() as i64
        };
        self.settle(slot, -removed, 0)?;
        Ok(removed)
    }

    /// Inserts `value` before or after the first element equal to `pivot`
    /// (LINSERT). Returns the new length, or -1 when there is no such
    /// element (0 when the key does not exist).
    pub fn list_insert(
        &mut self,
        slot: &mut Slot<'_>,
        before: bool,
        pivot: &[u8],
        value: &[u8],
    ) -> Result<i64> {
        let Some(row) = slot.row() else {
            return Ok(0);
        };
        // At most two rounds: a renumbering always leaves room.
        for _ in 0..2 {
            let found: Option<i64> = self
                .stmt("SELECT pos FROM lists WHERE id = ?1 AND value = ?2 ORDER BY pos LIMIT 1")?
                .query_row(params![row.id, pivot], |r| r.get(0))
                .optional()?;
            let Some(p) = found else {
                return Ok(-1);
            };
            let neighbour: Option<i64> = if before {
                self.stmt("SELECT max(pos) FROM lists WHERE id = ?1 AND pos < ?2")?
                    .query_row(params![row.id, p], |r| r.get(0))?
            } else {
                self.stmt("SELECT min(pos) FROM lists WHERE id = ?1 AND pos > ?2")?
                    .query_row(params![row.id, p], |r| r.get(0))?
            };
            let pos = match neighbour {
                Some(q) if (q - p).abs() >= 2 => Some(p + (q - p) / 2),
                Some(_) => None,
                None if before && p - STEP >= -LIMIT => Some(p - STEP),
                None if !before && p + STEP <= LIMIT => Some(p + STEP),
                None => None,
            };
            let Some(pos) = pos else {
                self.changing(slot.db, slot.key);
                self.list_renumber(row.id)?;
                continue;
            };
            self.changing(slot.db, slot.key);
            self.stmt("INSERT INTO lists (id, pos, value) VALUES (?1, ?2, ?3)")?
                .execute(params![row.id, pos, value])?;
            self.settle(slot, 1, 0)?;
            return Ok(slot.len());
        }
        Err(crate::error::EngineError::Internal(
            "list positions exhausted after renumbering".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::range_indexes;

    #[test]
    fn ranges_read_as_redis_reads_them() {
        assert_eq!(range_indexes(5, 0, -1), Some((0, 4)));
        assert_eq!(range_indexes(5, -100, 100), Some((0, 4)));
        assert_eq!(range_indexes(5, 3, 1), None);
        assert_eq!(range_indexes(5, 5, 10), None);
        assert_eq!(range_indexes(5, -2, -1), Some((3, 4)));
        assert_eq!(range_indexes(0, 0, -1), None);
        assert_eq!(range_indexes(5, i64::MIN, i64::MAX), Some((0, 4)));
    }
}

#[cfg(test)]
mod cost {
    use rusqlite::Connection;

    use super::End;
    use crate::schema::Kind;
    use crate::stmt_cache::Statements;
    use crate::txn::Txn;
    use crate::watch::Watches;

    /// The SQLite VM steps of one push, pop and end read on a list of `n`
    /// elements (rows touched, not time).
    fn steps_at_the_ends(n: usize) -> Vec<i64> {
        let conn = Connection::open_in_memory().unwrap();
        crate::schema::prepare(&conn).unwrap();
        let stmts = Statements::new(&conn);
        let watches = Watches::default();
        let thresholds = crate::encoding::Thresholds::default();
        let mut txn = Txn::new(&stmts, &watches, &thresholds);
        let values: Vec<Vec<u8>> = (0..n).map(|i| format!("v{i}").into_bytes()).collect();
        for chunk in values.chunks(10_000) {
            let mut slot = txn.open(0, b"l", Kind::List).unwrap();
            txn.list_push(&mut slot, chunk, End::Right).unwrap();
        }
        let mut out = Vec::new();
        let mut measure = |f: &mut dyn FnMut(&mut Txn<'_, '_>)| {
            stmts.take_vm_steps();
            f(&mut txn);
            out.push(stmts.take_vm_steps());
        };
        measure(&mut |t| {
            let mut slot = t.open(0, b"l", Kind::List).unwrap();
            t.list_push(&mut slot, &[b"x"], End::Left).unwrap();
        });
        measure(&mut |t| {
            let mut slot = t.open(0, b"l", Kind::List).unwrap();
            t.list_push(&mut slot, &[b"y"], End::Right).unwrap();
        });
        measure(&mut |t| {
            let mut slot = t.open(0, b"l", Kind::List).unwrap();
            assert_eq!(t.list_pop(&mut slot, End::Left, 1).unwrap(), [b"x"]);
        });
        measure(&mut |t| {
            let mut slot = t.open(0, b"l", Kind::List).unwrap();
            assert_eq!(t.list_pop(&mut slot, End::Right, 1).unwrap(), [b"y"]);
        });
        measure(&mut |t| {
            let row = t.live(0, b"l", Kind::List).unwrap().unwrap();
            assert_eq!(t.list_index(&row, -1).unwrap(), Some(values[n - 1].clone()));
            assert_eq!(t.list_index(&row, 0).unwrap(), Some(values[0].clone()));
            assert_eq!(
                t.list_range(&row, -3, -1).unwrap(),
                values[n - 3..].to_vec()
            );
        });
        out
    }

    /// LPUSH, RPUSH, LPOP, RPOP and LINDEX/LRANGE at either end cost the
    /// same on a list of 100,000 elements as on one of 10.
    #[test]
    fn the_ends_cost_the_same_however_long_the_list() {
        let short = steps_at_the_ends(10);
        let long = steps_at_the_ends(100_000);
        eprintln!("VM steps at the ends, 10 elements: {short:?}; 100,000: {long:?}");
        for (s, l) in short.iter().zip(&long) {
            assert!(*l <= s + 20, "10 elements: {short:?}, 100,000: {long:?}");
        }
    }

    /// An insert in the middle, repeated at one spot until the gap runs
    /// out, renumbers and keeps the order.
    #[test]
    fn inserts_at_one_spot_keep_their_order() {
        let conn = Connection::open_in_memory().unwrap();
        crate::schema::prepare(&conn).unwrap();
        let stmts = Statements::new(&conn);
        let watches = Watches::default();
        let thresholds = crate::encoding::Thresholds::default();
        let mut txn = Txn::new(&stmts, &watches, &thresholds);
        let mut slot = txn.open(0, b"l", Kind::List).unwrap();
        txn.list_push(&mut slot, &[b"a", b"z"], End::Right).unwrap();
        let mut expected: Vec<Vec<u8>> = vec![b"a".to_vec()];
        let mut after: Vec<Vec<u8>> = Vec::new();
        for i in 0..60 {
            let v = format!("m{i}").into_bytes();
            let mut slot = txn.open(0, b"l", Kind::List).unwrap();
            // Always right before z: the gap before z halves every time.
            txn.list_insert(&mut slot, true, b"z", &v).unwrap();
            after.push(v);
        }
        expected.extend(after);
        expected.push(b"z".to_vec());
        let row = txn.live(0, b"l", Kind::List).unwrap().unwrap();
        assert_eq!(txn.list_range(&row, 0, -1).unwrap(), expected);
        assert_eq!(row.count, 62);
    }
}

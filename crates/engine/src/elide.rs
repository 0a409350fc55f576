//! A list's pushes and pops within one group, kept in memory, and the
//! elements pushed and popped again never written.
//!
//! A job queue moves most of its jobs through one list: producers push at
//! one end, consumers pop at the other, and the writer runs dozens of both
//! in each group commit. Written as they happen, each push reads the key
//! row and the list's end, inserts the element and writes the count back,
//! each pop reads the key row and the end, deletes the element and writes
//! the count back; and a job that is pushed and popped within the group
//! (a consumer waiting in BRPOP is served by the push itself, see
//! `blocking.rs`) is inserted and deleted again, its key row too when the
//! queue had run empty, none of which the committed state contains.
//!
//! So the first push or pop of a list in a group makes it the list that
//! waits in memory (`Waiting`, with the writer connection's
//! [`Statements`]): what follows on that key, pushes onto either end and
//! pops from either end, is applied there. A pop takes the element the
//! list's order says: one pushed at its end in the group, else a stored
//! element (read and deleted right away), else one pushed at the other end.
//! An element pushed and popped in the group is never written, and a list
//! created and emptied in it never has a key row; the count is written
//! once. Only the commands that use nothing but a list's ends go this way
//! (LPUSH, RPUSH and their X forms, LPOP, RPOP, LMPOP, LMOVE, RPOPLPUSH and
//! the blocking pops); they open the key with [`Txn::open_list`] and look it
//! up with [`Txn::live_list`]. A list with an expiry is not kept (its
//! expiry must be looked at on every access).
//!
//! Everything else sees the list exactly as if every push and pop had been
//! written, because the list is written the moment any other statement
//! runs on the writer's connection: [`Statements::get`], which every
//! statement goes through, writes it first (the pushed elements at their
//! ends, the count, or the new key row). That one gate covers every other
//! command on the key (LRANGE, LLEN and LINDEX inside MULTI or a script,
//! TYPE, DEL, RENAME, EXPIRE, OBJECT...), a command on any other key (it may
//! read the keyspace as a whole: SCAN, KEYS, DBSIZE, FLUSHALL, DEBUG
//! DIGEST), the replication feed's reads of a key's state, and the group's
//! COMMIT, before which the writer writes it explicitly (`writer.rs`). At
//! most one list waits at a time: opening any other key is a statement,
//! which writes it.
//!
//! What the commands report does not change: they note the same changes
//! (WATCH, CLIENT TRACKING, the value cache and the replicas see the key
//! touched, created and deleted as before), the same keyspace events, the
//! same replies, and every reply still goes out only after the group's
//! commit. Readers on the read pool see committed state only, which never
//! held the elements pushed and popped in between. A group that is rolled
//! back drops the waiting list with the rest (`Statements::discard_elided`),
//! and a failure while writing it fails the group, as any failure after a
//! write does.

use std::collections::VecDeque;

use rusqlite::params;

use crate::keyspace::{KeyRow, Slot};
use crate::list::{End, LIMIT, STEP};
use crate::schema::Kind;
use crate::stmt_cache::{Elided, Statements, Waiting};
use crate::txn::Txn;

/// The id a waiting list's slot carries: no stored key has it (ids start
/// at 1), and the commands that see it never use it.
pub(crate) const ELIDED_ID: i64 = -1;

/// The statements that read and write a waiting list, run without writing
/// it first ([`Statements::get_raw`]).
const NEXT_ID: &str = "UPDATE meta SET value = value + 1 WHERE name = 'next_id'";
const NEW_ID: &str = "SELECT value - 1 FROM meta WHERE name = 'next_id'";
const INSERT_KEY_ROW: &str = "INSERT INTO keys (db, key, type, value, expire_at, id, count)
     VALUES (?1, ?2, ?3, ?4, NULL, ?5, ?6)";
const UPDATE_COUNT: &str = "UPDATE keys SET count = ?3 WHERE db = ?1 AND key = ?2";
const DELETE_KEY_ROW: &str = "DELETE FROM keys WHERE db = ?1 AND key = ?2";
const INSERT_ELEMENT: &str = "INSERT INTO lists (id, pos, value) VALUES (?1, ?2, ?3)";
const HEAD: &str = "SELECT pos FROM lists WHERE id = ?1 ORDER BY pos LIMIT 1";
const TAIL: &str = "SELECT pos FROM lists WHERE id = ?1 ORDER BY pos DESC LIMIT 1";
const ALL: &str = "SELECT value FROM lists WHERE id = ?1 ORDER BY pos";
const DELETE_ALL: &str = "DELETE FROM lists WHERE id = ?1";
const FIRST_N: &str = "SELECT pos, value FROM lists WHERE id = ?1 ORDER BY pos LIMIT ?2";
const LAST_N: &str = "SELECT pos, value FROM lists WHERE id = ?1 ORDER BY pos DESC LIMIT ?2";
const DELETE_TO: &str = "DELETE FROM lists WHERE id = ?1 AND pos <= ?2";
const DELETE_FROM: &str = "DELETE FROM lists WHERE id = ?1 AND pos >= ?2";

impl Elided {
    /// Whether `key` of `db` is the list waiting in memory; its length.
    fn len_of(&self, db: u32, key: &[u8]) -> Option<i64> {
        if !self.any.get() {
            return None;
        }
        let list = self.list.borrow();
        list.as_ref()
            .filter(|w| w.db == db && w.key == key)
            .map(Waiting::len)
    }
}

/// A waiting list's slot.
fn placeholder(count: i64) -> Option<KeyRow> {
    Some(KeyRow {
        id: ELIDED_ID,
        count,
        flags: 0,
        expire_at: None,
    })
}

impl Statements<'_> {
    /// Writes the list waiting in memory, if any (see the module docs). A
    /// failure is also kept for the writer, which then rolls the group
    /// back.
    pub(crate) fn write_elided(&self) -> rusqlite::Result<()> {
        if !self.elided.any.get() {
            return Ok(());
        }
        self.elided.any.set(false);
        let Some(w) = self.elided.list.borrow_mut().take() else {
            return Ok(());
        };
        let result = self.write_waiting(&w);
        if let Err(e) = &result {
            *self.elided.failed.borrow_mut() = Some(e.to_string());
        }
        result
    }

    fn write_waiting(&self, w: &Waiting) -> rusqlite::Result<()> {
        let total = w.len();
        let Some((id, stored)) = w.stored else {
            // A new list: its key row under a new id, then its elements.
            self.get_raw(NEXT_ID)?.execute([])?;
            let id: i64 = self.get_raw(NEW_ID)?.query_row([], |r| r.get(0))?;
            self.get_raw(INSERT_KEY_ROW)?.execute(params![
                w.db,
                w.key,
                Kind::List.code(),
                0i64,
                id,
                total
            ])?;
            return self.write_fresh(id, w.left.iter().chain(&w.right), total);
        };
        self.get_raw(UPDATE_COUNT)?
            .execute(params![w.db, w.key, total])?;
        if w.left.is_empty() && w.right.is_empty() {
            return Ok(());
        }
        if stored == 0 {
            // Every stored element was popped: the pushed ones alone.
            return self.write_fresh(id, w.left.iter().chain(&w.right), total);
        }
        // The ends the pushes go to, each read only if something goes there.
        let end = |sql, pushed: &VecDeque<Vec<u8>>| -> rusqlite::Result<i64> {
            if pushed.is_empty() {
                return Ok(0);
            }
            self.get_raw(sql)?.query_row([id], |r| r.get(0))
        };
        let (head, tail) = (end(HEAD, &w.left)?, end(TAIL, &w.right)?);
        let room = |n: usize| (n as i64).saturating_mul(STEP);
        if head - room(w.left.len()) < -LIMIT || tail + room(w.right.len()) > LIMIT {
            // No room at an end (trillions of pushes there): the whole
            // list is written again with fresh spacing, as `list.rs` does.
            let mut values: VecDeque<Vec<u8>> = {
                let mut s = self.get_raw(ALL)?;
                let rows = s.query_map([id], |r| r.get(0))?;
                rows.collect::<rusqlite::Result<_>>()?
            };
            debug_assert_eq!(values.len() as i64, stored);
            self.get_raw(DELETE_ALL)?.execute([id])?;
            for v in w.left.iter().rev() {
                values.push_front(v.clone());
            }
            values.extend(w.right.iter().cloned());
            return self.write_fresh(id, values.iter(), total);
        }
        // The elements pushed at the head, nearest the stored ones first.
        for (i, v) in w.left.iter().rev().enumerate() {
            self.get_raw(INSERT_ELEMENT)?
                .execute(params![id, head - (i as i64 + 1) * STEP, v])?;
        }
        for (i, v) in w.right.iter().enumerate() {
            self.get_raw(INSERT_ELEMENT)?
                .execute(params![id, tail + (i as i64 + 1) * STEP, v])?;
        }
        Ok(())
    }

    /// Writes `values` as the whole of the list under `id`, spaced
    /// [`STEP`] apart and centred on 0.
    fn write_fresh<'v>(
        &self,
        id: i64,
        values: impl Iterator<Item = &'v Vec<u8>>,
        n: i64,
    ) -> rusqlite::Result<()> {
        let mut pos = -(n / 2) * STEP;
        for v in values {
            self.get_raw(INSERT_ELEMENT)?.execute(params![id, pos, v])?;
            pos += STEP;
        }
        Ok(())
    }

    /// Drops the list waiting in memory (its group is rolled back).
    pub(crate) fn discard_elided(&self) {
        self.elided.any.set(false);
        self.elided.list.borrow_mut().take();
    }

    /// Why writing the waiting list failed, once.
    pub(crate) fn elided_failure(&self) -> Option<String> {
        self.elided.failed.borrow_mut().take()
    }
}

impl Txn<'_, '_> {
    /// [`crate::View::live`] of a list, for the commands that use only its
    /// ends: the list waiting in memory is found there (see the module
    /// docs).
    pub fn live_list(&self, db: u32, key: &[u8]) -> crate::Result<Option<KeyRow>> {
        match self.stmts.elided.len_of(db, key) {
            Some(count) => {
                self.seen(db, key, true);
                Ok(placeholder(count))
            }
            None => self.live(db, key, Kind::List),
        }
    }

    /// [`Txn::open`] of a list, for the commands that use only its ends
    /// ([`Txn::list_push`], [`Txn::list_pop`]): its pushes and pops may
    /// be kept in memory (see the module docs).
    pub fn open_list<'k>(&mut self, db: u32, key: &'k [u8]) -> crate::Result<Slot<'k>> {
        if let Some(count) = self.stmts.elided.len_of(db, key) {
            return Ok(Slot {
                db,
                key,
                kind: Kind::List,
                row: placeholder(count),
                unborn: false,
                elide: true,
            });
        }
        let mut slot = self.open(db, key, Kind::List)?;
        slot.elide = true;
        Ok(slot)
    }

    /// Whether the key still exists, the list waiting in memory included
    /// (the writer's check between two blocked clients served from it).
    pub(crate) fn exists_elided(&self, db: u32, key: &[u8]) -> crate::Result<bool> {
        if self.stmts.elided.len_of(db, key).is_some() {
            self.seen(db, key, true);
            return Ok(true);
        }
        self.exists(db, key)
    }

    /// A slot of the waiting list whose list was written meanwhile (a
    /// statement ran between its opening and its use): its stored row.
    fn reload(&mut self, slot: &mut Slot<'_>) -> crate::Result<()> {
        if slot.row.is_some_and(|r| r.id == ELIDED_ID)
            && self.stmts.elided.len_of(slot.db, slot.key).is_none()
        {
            slot.row = self.stored(slot.db, slot.key)?.and_then(|s| {
                s.id.map(|id| KeyRow {
                    id,
                    count: s.count,
                    flags: s.flags,
                    expire_at: s.expire_at,
                })
            });
        }
        Ok(())
    }

    /// Makes the slot's list the one waiting in memory, if it may be (it
    /// is, or its key is a list without an expiry, or no key at all when
    /// `create`). Returns whether it waits now.
    fn make_waiting(&mut self, slot: &mut Slot<'_>, create: bool) -> crate::Result<bool> {
        self.reload(slot)?;
        if self.stmts.elided.len_of(slot.db, slot.key).is_some() {
            return Ok(true);
        }
        let stored = match slot.row {
            None if create => None,
            Some(r) if r.id != ELIDED_ID && r.expire_at.is_none() => Some((r.id, r.count)),
            _ => return Ok(false),
        };
        // Another list still waiting (a slot opened before it began) is
        // written first: at most one waits.
        self.stmts.write_elided()?;
        *self.stmts.elided.list.borrow_mut() = Some(Waiting {
            db: slot.db,
            key: slot.key.to_vec(),
            stored,
            left: VecDeque::new(),
            right: VecDeque::new(),
        });
        self.stmts.elided.any.set(true);
        self.stmts
            .elided
            .write
            .set(Some(|stmts: &Statements<'_>| stmts.write_elided()));
        Ok(true)
    }

    /// [`Txn::list_push`] in memory. `None`: the push is the database's.
    /// The changes noted are those of the written push, in its order.
    pub(crate) fn elided_push<V: AsRef<[u8]>>(
        &mut self,
        slot: &mut Slot<'_>,
        values: &[V],
        end: End,
    ) -> crate::Result<Option<i64>> {
        let new = slot.row.is_none();
        if !self.make_waiting(slot, true)? {
            return Ok(None);
        }
        // `slot_id_deferred`, then `settle`.
        self.changing(slot.db, slot.key);
        if new {
            self.notify(crate::notify::NEW, "new", slot.db, slot.key);
        }
        self.changing(slot.db, slot.key);
        let count = {
            let mut list = self.stmts.elided.list.borrow_mut();
            let Some(w) = list.as_mut() else {
                return Ok(None);
            };
            for v in values {
                match end {
                    End::Left => w.left.push_front(v.as_ref().to_vec()),
                    End::Right => w.right.push_back(v.as_ref().to_vec()),
                }
            }
            w.len()
        };
        slot.row = placeholder(count);
        Ok(Some(count))
    }

    /// [`Txn::list_pop`] in memory (`count` at least 1): the elements
    /// pushed at `end` in the group first, then stored ones (deleted now),
    /// then those pushed at the other end. `None`: the pop is the
    /// database's. The changes noted are those of the written pop, in its
    /// order.
    pub(crate) fn elided_pop(
        &mut self,
        slot: &mut Slot<'_>,
        end: End,
        count: i64,
    ) -> crate::Result<Option<Vec<Vec<u8>>>> {
        if !self.make_waiting(slot, false)? {
            return Ok(None);
        }
        // The pop's change, before anything is deleted.
        self.changing(slot.db, slot.key);
        let mut list = self.stmts.elided.list.borrow_mut();
        let Some(w) = list.as_mut() else {
            return Ok(None);
        };
        let want = count.clamp(0, w.len()) as usize;
        let mut out: Vec<Vec<u8>> = Vec::with_capacity(want);
        let (near, far) = match end {
            End::Left => (&mut w.left, &mut w.right),
            End::Right => (&mut w.right, &mut w.left),
        };
        let take = |from: &mut VecDeque<Vec<u8>>, out: &mut Vec<Vec<u8>>, front: bool| {
            while out.len() < want {
                let v = if front {
                    from.pop_front()
                } else {
                    from.pop_back()
                };
                match v {
                    Some(v) => out.push(v),
                    None => break,
                }
            }
        };
        take(near, &mut out, end == End::Left);
        if let Some((id, stored)) = w.stored.as_mut() {
            let k = (want - out.len()).min(*stored as usize) as i64;
            if k > 0 {
                let (select, delete) = match end {
                    End::Left => (FIRST_N, DELETE_TO),
                    End::Right => (LAST_N, DELETE_FROM),
                };
                let rows: Vec<(i64, Vec<u8>)> = {
                    let mut s = self.stmts.get_raw(select)?;
                    let rows = s.query_map(params![*id, k], |r| Ok((r.get(0)?, r.get(1)?)))?;
                    rows.collect::<rusqlite::Result<_>>()?
                };
                if let Some(&(boundary, _)) = rows.last() {
                    self.stmts
                        .get_raw(delete)?
                        .execute(params![*id, boundary])?;
                }
                *stored -= rows.len() as i64;
                out.extend(rows.into_iter().map(|(_, v)| v));
            }
        }
        take(far, &mut out, end == End::Left);
        let left = w.len();
        let had_row = w.stored.is_some();
        if left == 0 {
            *list = None;
            self.stmts.elided.any.set(false);
        }
        drop(list);
        // `settle`'s change; the key goes with its last element.
        self.changing(slot.db, slot.key);
        if left == 0 {
            self.touched.gone();
            if had_row {
                self.stmts
                    .get_raw(DELETE_KEY_ROW)?
                    .execute(params![slot.db, slot.key])?;
            }
            slot.row = None;
        } else {
            slot.row = placeholder(left);
        }
        Ok(Some(out))
    }
}

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use crate::list::End;
    use crate::schema::Kind;
    use crate::stmt_cache::Statements;
    use crate::txn::Txn;
    use crate::watch::Watches;

    fn database() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        crate::schema::prepare(&conn).unwrap();
        conn
    }

    /// Rows inserted, updated or deleted on `conn` so far.
    fn rows_changed(conn: &Connection) -> i64 {
        conn.query_row("SELECT total_changes()", [], |r| r.get(0))
            .unwrap()
    }

    /// Pushes and pops of a new list, as separate operations of one group
    /// (a `Txn` each), change no row; the changes they note are the
    /// written ones'.
    #[test]
    fn a_list_pushed_and_popped_in_one_group_is_never_written() {
        let conn = database();
        let stmts = Statements::new(&conn);
        let watches = Watches::default();
        let thresholds = crate::encoding::Thresholds::default();
        let before = rows_changed(&conn);
        for _ in 0..3 {
            let mut txn = Txn::new(&stmts, &watches, &thresholds);
            let mut slot = txn.open_list(0, b"q").unwrap();
            assert_eq!(
                txn.list_push(&mut slot, &[b"a", b"b"], End::Left).unwrap(),
                2
            );
            assert_eq!(txn.changes(), 2);
            let mut txn = Txn::new(&stmts, &watches, &thresholds);
            assert_eq!(txn.live_list(0, b"q").unwrap().map(|r| r.count), Some(2));
            let mut slot = txn.open_list(0, b"q").unwrap();
            assert_eq!(txn.list_pop(&mut slot, End::Right, 1).unwrap(), [b"a"]);
            let mut slot = txn.open_list(0, b"q").unwrap();
            assert_eq!(txn.list_push(&mut slot, &[b"c"], End::Right).unwrap(), 2);
            let mut slot = txn.open_list(0, b"q").unwrap();
            assert_eq!(
                txn.list_pop(&mut slot, End::Left, 5).unwrap(),
                [b"b".to_vec(), b"c".to_vec()]
            );
            assert!(slot.is_empty());
            assert!(txn
                .take_touched()
                .keys()
                .iter()
                .all(|(_, k)| &k[..] == b"q"));
            assert!(!stmts.elided.any.get());
            assert!(!txn.exists(0, b"q").unwrap());
        }
        assert_eq!(rows_changed(&conn), before);
    }

    /// Any other statement writes the waiting list first, as it stands.
    #[test]
    fn the_next_statement_writes_the_waiting_list() {
        let conn = database();
        let stmts = Statements::new(&conn);
        let watches = Watches::default();
        let thresholds = crate::encoding::Thresholds::default();
        let mut txn = Txn::new(&stmts, &watches, &thresholds);
        let mut slot = txn.open_list(0, b"q").unwrap();
        txn.list_push(&mut slot, &[b"a", b"b", b"c"], End::Left)
            .unwrap();
        txn.list_pop(&mut slot, End::Right, 1).unwrap();
        let before = rows_changed(&conn);
        let row = txn.live(0, b"q", Kind::List).unwrap().unwrap();
        assert_eq!(row.count, 2);
        assert!(row.id > 0);
        assert_eq!(
            txn.list_range(&row, 0, -1).unwrap(),
            [b"c".to_vec(), b"b".to_vec()]
        );
        // The meta counter, the key row, two elements.
        assert_eq!(rows_changed(&conn), before + 4);
        // A slot opened while the list waited, used after it was written.
        let mut slot = txn.open_list(0, b"q").unwrap();
        let mut other = txn.open_list(0, b"r").unwrap();
        txn.list_push(&mut other, &[b"x"], End::Left).unwrap();
        assert!(stmts.elided.any.get());
        txn.list_push(&mut slot, &[b"d"], End::Right).unwrap();
        let _ = txn.exists(0, b"r").unwrap();
        let row = txn.live(0, b"q", Kind::List).unwrap().unwrap();
        assert_eq!(
            txn.list_range(&row, 0, -1).unwrap(),
            [b"c".to_vec(), b"b".to_vec(), b"d".to_vec()]
        );
        let row = txn.live(0, b"r", Kind::List).unwrap().unwrap();
        assert_eq!(txn.list_range(&row, 0, -1).unwrap(), [b"x".to_vec()]);
    }

    /// A rolled-back group drops the waiting list.
    #[test]
    fn a_discarded_list_is_never_written() {
        let conn = database();
        let stmts = Statements::new(&conn);
        let watches = Watches::default();
        let thresholds = crate::encoding::Thresholds::default();
        let mut txn = Txn::new(&stmts, &watches, &thresholds);
        let mut slot = txn.open_list(0, b"q").unwrap();
        txn.list_push(&mut slot, &[b"a"], End::Left).unwrap();
        let before = rows_changed(&conn);
        stmts.discard_elided();
        assert!(!txn.exists(0, b"q").unwrap());
        assert_eq!(rows_changed(&conn), before);
    }

    /// A stored list waits too: pops take the pushed elements or the
    /// stored ones in the list's order, the stored ones deleted as they
    /// go, and what is left is written with one count.
    #[test]
    fn a_stored_list_waits_with_its_pushes_and_pops() {
        let conn = database();
        let stmts = Statements::new(&conn);
        let watches = Watches::default();
        let thresholds = crate::encoding::Thresholds::default();
        let mut txn = Txn::new(&stmts, &watches, &thresholds);
        let mut slot = txn.open(0, b"q", Kind::List).unwrap();
        txn.list_push(&mut slot, &[b"a", b"b", b"c"], End::Right)
            .unwrap();
        let before = rows_changed(&conn);
        let mut txn = Txn::new(&stmts, &watches, &thresholds);
        let mut slot = txn.open_list(0, b"q").unwrap();
        assert_eq!(txn.list_push(&mut slot, &[b"x"], End::Left).unwrap(), 4);
        let mut slot = txn.open_list(0, b"q").unwrap();
        assert_eq!(
            txn.list_pop(&mut slot, End::Right, 2).unwrap(),
            [b"c".to_vec(), b"b".to_vec()]
        );
        let mut slot = txn.open_list(0, b"q").unwrap();
        assert_eq!(txn.list_push(&mut slot, &[b"y"], End::Right).unwrap(), 3);
        let mut slot = txn.open_list(0, b"q").unwrap();
        assert_eq!(txn.list_pop(&mut slot, End::Left, 1).unwrap(), [b"x"]);
        assert_eq!(txn.changes(), 8);
        // Two stored elements deleted so far, nothing else.
        assert_eq!(rows_changed(&conn), before + 2);
        let row = txn.live(0, b"q", Kind::List).unwrap().unwrap();
        assert_eq!(row.count, 2);
        assert_eq!(
            txn.list_range(&row, 0, -1).unwrap(),
            [b"a".to_vec(), b"y".to_vec()]
        );
        // The count and one element.
        assert_eq!(rows_changed(&conn), before + 4);
        // Emptied through the stored elements: the key goes.
        let mut slot = txn.open_list(0, b"q").unwrap();
        txn.list_push(&mut slot, &[b"z"], End::Left).unwrap();
        let mut slot = txn.open_list(0, b"q").unwrap();
        assert_eq!(
            txn.list_pop(&mut slot, End::Left, 9).unwrap(),
            [b"z".to_vec(), b"a".to_vec(), b"y".to_vec()]
        );
        assert!(slot.is_empty());
        assert!(!stmts.elided.any.get());
        assert!(!txn.exists(0, b"q").unwrap());
        let left: i64 = conn
            .query_row("SELECT count(*) FROM lists", [], |r| r.get(0))
            .unwrap();
        assert_eq!(left, 0);
    }

    /// A list with an expiry is not kept in memory.
    #[test]
    fn a_list_with_an_expiry_is_written_as_it_goes() {
        let conn = database();
        let stmts = Statements::new(&conn);
        let watches = Watches::default();
        let thresholds = crate::encoding::Thresholds::default();
        let mut txn = Txn::new(&stmts, &watches, &thresholds);
        let mut slot = txn.open(0, b"q", Kind::List).unwrap();
        txn.list_push(&mut slot, &[b"a"], End::Right).unwrap();
        txn.set_expire(0, b"q", Some(crate::view::now_ms() + 100_000))
            .unwrap();
        let mut slot = txn.open_list(0, b"q").unwrap();
        txn.list_push(&mut slot, &[b"b"], End::Right).unwrap();
        assert!(!stmts.elided.any.get());
        let mut slot = txn.open_list(0, b"q").unwrap();
        assert_eq!(txn.list_pop(&mut slot, End::Left, 1).unwrap(), [b"a"]);
        assert!(!stmts.elided.any.get());
    }
}

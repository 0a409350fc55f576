//! A list pushed and popped within one group, kept out of the database.
//!
//! A job queue moves most of its jobs through a list that is empty when
//! they arrive: consumers wait in BRPOP, a producer's LPUSH readies the
//! key, and the writer serves a waiter from it in the same operation (see
//! `blocking.rs`). Written as it happens, that is a key row and an element
//! row inserted and both deleted again, four b-tree changes in the group's
//! transaction whose committed state contains none of them. The same holds
//! for an LPUSH followed by an RPOP of the same new list within a group.
//!
//! So a push that creates a list does not write it: its elements wait in
//! the writer's memory (`Elided`, held by the writer connection's
//! [`Statements`]), and the pushes and pops that follow on that key take
//! from and add to them there. A list that empties in memory was never
//! written at all. Only the commands that use nothing but a list's ends go
//! this way (LPUSH, RPUSH and their X forms, LPOP, RPOP, LMPOP, LMOVE,
//! RPOPLPUSH and the blocking pops); they open the key with
//! [`Txn::open_list`] and look it up with [`Txn::live_list`].
//!
//! Everything else still sees the list exactly as if it had been written,
//! because the elements are written the moment any other statement runs on
//! the writer's connection: [`Statements::get`], which every statement
//! goes through, writes them first (the key row, with a fresh id, and the
//! elements in order). That one gate covers every other command on the key
//! (LRANGE, LLEN and LINDEX inside MULTI or a script, TYPE, DEL, RENAME,
//! EXPIRE, OBJECT...), a command on any other key (it may read the keyspace
//! as a whole: SCAN, KEYS, DBSIZE, FLUSHALL, DEBUG DIGEST), the replication
//! feed's reads of a key's state, and the group's COMMIT, before which the
//! writer writes them explicitly (`writer.rs`). At most one list waits at a
//! time: opening any other key is a statement, which writes it.
//!
//! What the commands report does not change: they note the same changes
//! (WATCH, CLIENT TRACKING, the value cache and the replicas see the key
//! touched, created and deleted as before), the same keyspace events, the
//! same replies, and every reply still goes out only after the group's
//! commit. Readers on the read pool see committed state only, which never
//! held these elements unless they were still there at the commit. A group
//! that is rolled back drops them with the rest (`Statements::discard_elided`),
//! and a failure while writing them fails the group, as any failure after a
//! write does.

use std::collections::VecDeque;

use rusqlite::params;

use crate::keyspace::{KeyRow, Slot};
use crate::list::{End, STEP};
use crate::schema::Kind;
use crate::stmt_cache::{Elided, Statements, Waiting};
use crate::txn::Txn;

/// The id a waiting list's slot carries: no stored key has it (ids start
/// at 1), and the commands that see it never use it.
pub(crate) const ELIDED_ID: i64 = -1;

/// The statements that write a waiting list.
const NEXT_ID: &str = "UPDATE meta SET value = value + 1 WHERE name = 'next_id'";
const NEW_ID: &str = "SELECT value - 1 FROM meta WHERE name = 'next_id'";
const INSERT_KEY_ROW: &str = "INSERT INTO keys (db, key, type, value, expire_at, id, count)
     VALUES (?1, ?2, ?3, ?4, NULL, ?5, ?6)";
const INSERT_ELEMENT: &str = "INSERT INTO lists (id, pos, value) VALUES (?1, ?2, ?3)";

impl Elided {
    /// Whether `key` of `db` is the list waiting in memory; its length.
    fn len_of(&self, db: u32, key: &[u8]) -> Option<i64> {
        if !self.any.get() {
            return None;
        }
        let list = self.list.borrow();
        list.as_ref()
            .filter(|w| w.db == db && w.key == key)
            .map(|w| w.values.len() as i64)
    }
}

impl Statements<'_> {
    /// Writes the list waiting in memory, if any: its key row under a new
    /// id, then its elements in order. A failure is also kept for the
    /// writer, which then rolls the group back.
    pub(crate) fn write_elided(&self) -> rusqlite::Result<()> {
        if !self.elided.any.get() {
            return Ok(());
        }
        self.elided.any.set(false);
        let Some(w) = self.elided.list.borrow_mut().take() else {
            return Ok(());
        };
        let result = (|| -> rusqlite::Result<()> {
            self.get_raw(NEXT_ID)?.execute([])?;
            let id: i64 = self.get_raw(NEW_ID)?.query_row([], |r| r.get(0))?;
            self.get_raw(INSERT_KEY_ROW)?.execute(params![
                w.db,
                w.key,
                Kind::List.code(),
                0i64,
                id,
                w.values.len() as i64
            ])?;
            let mut pos = -(w.values.len() as i64 / 2) * STEP;
            for v in &w.values {
                self.get_raw(INSERT_ELEMENT)?.execute(params![id, pos, v])?;
                pos += STEP;
            }
            Ok(())
        })();
        if let Err(e) = &result {
            *self.elided.failed.borrow_mut() = Some(e.to_string());
        }
        result
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
                Ok(Some(KeyRow {
                    id: ELIDED_ID,
                    count,
                    flags: 0,
                    expire_at: None,
                }))
            }
            None => self.live(db, key, Kind::List),
        }
    }

    /// [`Txn::open`] of a list, for the commands that use only its ends
    /// ([`Txn::list_push`], [`Txn::list_pop`]): a list it creates waits in
    /// memory (see the module docs).
    pub fn open_list<'k>(&mut self, db: u32, key: &'k [u8]) -> crate::Result<Slot<'k>> {
        if let Some(count) = self.stmts.elided.len_of(db, key) {
            return Ok(Slot {
                db,
                key,
                kind: Kind::List,
                row: Some(KeyRow {
                    id: ELIDED_ID,
                    count,
                    flags: 0,
                    expire_at: None,
                }),
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

    /// A slot of the waiting list whose elements were written meanwhile
    /// (a statement ran between its opening and its use): its stored row.
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

    /// [`Txn::list_push`] in memory: onto the waiting list, or creating it
    /// when the key does not exist. `None`: the push is the database's.
    /// The changes noted are those of the written push, in its order.
    pub(crate) fn elided_push<V: AsRef<[u8]>>(
        &mut self,
        slot: &mut Slot<'_>,
        values: &[V],
        end: End,
    ) -> crate::Result<Option<i64>> {
        self.reload(slot)?;
        let waiting = self.stmts.elided.len_of(slot.db, slot.key).is_some();
        if !waiting && slot.row.is_some() {
            return Ok(None);
        }
        if !waiting {
            // Another list still waiting (a slot opened before it began)
            // is written first: at most one waits.
            self.stmts.write_elided()?;
        }
        // `slot_id_deferred`, then `settle`.
        self.changing(slot.db, slot.key);
        if !waiting {
            self.notify(crate::notify::NEW, "new", slot.db, slot.key);
        }
        self.changing(slot.db, slot.key);
        let mut list = self.stmts.elided.list.borrow_mut();
        let w = list.get_or_insert_with(|| Waiting {
            db: slot.db,
            key: slot.key.to_vec(),
            values: VecDeque::new(),
        });
        for v in values {
            match end {
                End::Left => w.values.push_front(v.as_ref().to_vec()),
                End::Right => w.values.push_back(v.as_ref().to_vec()),
            }
        }
        let count = w.values.len() as i64;
        drop(list);
        self.stmts.elided.any.set(true);
        self.stmts
            .elided
            .write
            .set(Some(|stmts: &Statements<'_>| stmts.write_elided()));
        slot.row = Some(KeyRow {
            id: ELIDED_ID,
            count,
            flags: 0,
            expire_at: None,
        });
        Ok(Some(count))
    }

    /// [`Txn::list_pop`] from the waiting list (`count` at least 1).
    /// `None`: the key is not the waiting list. The changes noted are
    /// those of the written pop, in its order.
    pub(crate) fn elided_pop(
        &mut self,
        slot: &mut Slot<'_>,
        end: End,
        count: i64,
    ) -> crate::Result<Option<Vec<Vec<u8>>>> {
        self.reload(slot)?;
        if self.stmts.elided.len_of(slot.db, slot.key).is_none() {
            return Ok(None);
        }
        let (out, left) = {
            let mut list = self.stmts.elided.list.borrow_mut();
            let Some(w) = list.as_mut() else {
                return Ok(None);
            };
            let n = (count.max(0) as u64).min(w.values.len() as u64) as usize;
            let out: Vec<Vec<u8>> = match end {
                End::Left => w.values.drain(..n).collect(),
                End::Right => (0..n).filter_map(|_| w.values.pop_back()).collect(),
            };
            (out, w.values.len() as i64)
        };
        if out.is_empty() {
            return Ok(Some(out));
        }
        // The pop's change, then `settle`'s.
        self.changing(slot.db, slot.key);
        self.changing(slot.db, slot.key);
        if left == 0 {
            self.touched.gone();
            self.stmts.discard_elided();
            slot.row = None;
        } else if let Some(row) = slot.row.as_mut() {
            row.count = left;
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
}

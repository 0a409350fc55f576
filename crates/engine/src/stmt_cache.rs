//! Prepared statements, kept per connection and found by the address of
//! their SQL text.
//!
//! Every command runs a handful of fixed statements. rusqlite's own
//! `prepare_cached` hashes the SQL text on every use and allocates a key
//! when it puts the statement back; at hundreds of thousands of commands a
//! second that was a tenth of the time of a GET. The SQL respite runs on the
//! hot paths is `&'static str`, so its address identifies it: a lookup is a
//! pointer comparison over a short list. SQL built at run time still goes
//! through rusqlite's cache.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::ops::{Deref, DerefMut};

use rusqlite::{Connection, Statement};

/// The statements of one connection. Not `Send`: it lives and dies on the
/// thread that owns the connection.
pub struct Statements<'c> {
    conn: &'c Connection,
    idle: RefCell<Vec<(*const u8, Statement<'c>)>>,
    /// The database's page size, read once (0 until then).
    page_size: std::cell::Cell<u32>,
    /// A list pushed in the open group and not written yet (the writer's
    /// connection only; see `elide.rs`).
    pub(crate) elided: Elided,
}

/// A list the writer keeps in memory rather than writing it: its state,
/// which lives with the connection since every statement must write it
/// first. What it is for, and the code that fills, empties and writes it,
/// is in `elide.rs`.
#[derive(Default)]
pub(crate) struct Elided {
    pub(crate) list: RefCell<Option<Waiting>>,
    /// Whether `list` holds one: the check every statement makes.
    pub(crate) any: Cell<bool>,
    /// Writing it failed: the group must be rolled back.
    pub(crate) failed: RefCell<Option<String>>,
    /// What writes it, set with it.
    #[allow(clippy::type_complexity)]
    pub(crate) write: Cell<Option<fn(&Statements<'_>) -> rusqlite::Result<()>>>,
}

/// The list waiting in memory: its key, the stored list it continues (if
/// its key has a row), and the elements pushed at either end since, head
/// first. The list is `left`, then the stored elements, then `right`.
pub(crate) struct Waiting {
    pub(crate) db: u32,
    pub(crate) key: Vec<u8>,
    /// The key's id and how many of its stored elements are left.
    pub(crate) stored: Option<(i64, i64)>,
    pub(crate) left: VecDeque<Vec<u8>>,
    pub(crate) right: VecDeque<Vec<u8>>,
}

impl Waiting {
    /// Its length.
    pub(crate) fn len(&self) -> i64 {
        self.left.len() as i64 + self.stored.map_or(0, |s| s.1) + self.right.len() as i64
    }
}

impl<'c> Statements<'c> {
    /// The database's page size in bytes (fixed once the file exists).
    pub(crate) fn page_size(&self) -> rusqlite::Result<u32> {
        if self.page_size.get() == 0 {
            let size: u32 = self
                .conn
                .pragma_query_value(None, "page_size", |r| r.get(0))?;
            self.page_size.set(size);
        }
        Ok(self.page_size.get())
    }

    /// An empty cache over `conn`.
    pub fn new(conn: &'c Connection) -> Self {
        Statements {
            conn,
            idle: RefCell::new(Vec::new()),
            page_size: std::cell::Cell::new(0),
            elided: Default::default(),
        }
    }

    /// The connection.
    pub fn conn(&self) -> &'c Connection {
        self.conn
    }

    /// The prepared statement for `sql`, prepared on first use. It returns
    /// to the cache when the guard is dropped (rusqlite has reset it by
    /// then: `execute` and dropped `Rows` reset their statement). A list
    /// waiting in memory is written first, so that no statement ever sees
    /// the database without it (see `elide.rs`).
    pub fn get(&self, sql: &'static str) -> rusqlite::Result<CachedStmt<'_, 'c>> {
        if self.elided.any.get() {
            if let Some(write) = self.elided.write.get() {
                write(self)?;
            }
        }
        self.get_raw(sql)
    }

    /// [`Statements::get`] without writing the waiting list first: for
    /// the statements that write it.
    pub(crate) fn get_raw(&self, sql: &'static str) -> rusqlite::Result<CachedStmt<'_, 'c>> {
        let key = sql.as_ptr();
        let found = {
            let mut idle = self.idle.borrow_mut();
            // From the end: a statement goes back to the end when it is
            // dropped, so the hot ones (SET's, GET's) are found first
            // among the many the other types prepare.
            idle.iter()
                .rposition(|(k, _)| *k == key)
                .map(|i| idle.remove(i).1)
        };
        let stmt = match found {
            Some(s) => s,
            None => self.conn.prepare(sql)?,
        };
        Ok(CachedStmt {
            home: self,
            key,
            stmt: Some(stmt),
        })
    }
}

#[cfg(test)]
impl Statements<'_> {
    /// The SQLite VM steps every cached statement has run since the last
    /// call: how tests measure rows touched rather than time.
    pub(crate) fn take_vm_steps(&self) -> i64 {
        self.idle
            .borrow()
            .iter()
            .map(|(_, s)| s.reset_status(rusqlite::StatementStatus::VmStep) as i64)
            .sum()
    }
}

/// A statement borrowed from [`Statements`].
pub struct CachedStmt<'a, 'c> {
    home: &'a Statements<'c>,
    key: *const u8,
    stmt: Option<Statement<'c>>,
}

impl<'c> Deref for CachedStmt<'_, 'c> {
    type Target = Statement<'c>;
    fn deref(&self) -> &Statement<'c> {
        self.stmt.as_ref().expect("present until drop")
    }
}

impl<'c> DerefMut for CachedStmt<'_, 'c> {
    fn deref_mut(&mut self) -> &mut Statement<'c> {
        self.stmt.as_mut().expect("present until drop")
    }
}

impl Drop for CachedStmt<'_, '_> {
    fn drop(&mut self) {
        if let Some(stmt) = self.stmt.take() {
            self.home.idle.borrow_mut().push((self.key, stmt));
        }
    }
}

//! Function libraries (`FUNCTION LOAD`): each library's name and its whole
//! code, header line included, in `function_libraries`, so they survive a
//! restart as redis keeps them in its RDB and AOF files.
//!
//! The engine stores libraries and nothing more: what a library's code
//! registers is found by running it in Lua, which the server does when
//! the library is loaded and again when it reads them back at start-up.
//! Libraries are not keys: FLUSHALL leaves them (as in redis), and a
//! change to one touches no key, so it breaks no WATCH and drops nothing
//! from the value cache. It still counts as a write ([`Txn::changes`]),
//! so the group commit makes it durable before `FUNCTION LOAD` answers.

use crate::error::Result;
use crate::txn::Txn;
use crate::view::View;

/// A stored library: its name and its code (header line included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredLibrary {
    /// The library's name.
    pub name: Vec<u8>,
    /// Its code, header line included.
    pub code: Vec<u8>,
}

impl View<'_, '_> {
    /// Every stored library, in the order they were first stored.
    pub fn function_libraries(&self) -> Result<Vec<StoredLibrary>> {
        let mut stmt = self.stmt("SELECT name, code FROM function_libraries ORDER BY seq")?;
        let rows = stmt.query_map([], |r| {
            Ok(StoredLibrary {
                name: r.get(0)?,
                code: r.get(1)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// The libraries' generation: a number every change to them raises,
    /// in the same transaction, so a copy of the libraries known to be of
    /// this generation is the stored set (a change whose group was rolled
    /// back leaves the number where it was). 0 before the first change.
    pub fn function_generation(&self) -> Result<i64> {
        let mut stmt = self.stmt("SELECT value FROM meta WHERE name = 'function_generation'")?;
        let mut rows = stmt.query([])?;
        Ok(match rows.next()? {
            Some(row) => row.get(0)?,
            None => 0,
        })
    }
}

impl Txn<'_, '_> {
    /// Raises the generation (see [`View::function_generation`]).
    fn function_changed(&mut self) -> Result<()> {
        self.changes += 1;
        self.stmt(
            "INSERT INTO meta (name, value) VALUES ('function_generation', 1)
             ON CONFLICT (name) DO UPDATE SET value = value + 1",
        )?
        .execute([])?;
        Ok(())
    }

    /// Stores a library, replacing one of the same name (which keeps its
    /// place in the order).
    pub fn function_put(&mut self, name: &[u8], code: &[u8]) -> Result<()> {
        self.function_changed()?;
        self.stmt(
            "INSERT INTO function_libraries (name, code) VALUES (?1, ?2)
             ON CONFLICT (name) DO UPDATE SET code = excluded.code",
        )?
        .execute(rusqlite::params![name, code])?;
        Ok(())
    }

    /// Deletes a library; whether there was one.
    pub fn function_delete(&mut self, name: &[u8]) -> Result<bool> {
        self.function_changed()?;
        let n = self
            .stmt("DELETE FROM function_libraries WHERE name = ?1")?
            .execute([name])?;
        Ok(n > 0)
    }

    /// Deletes every library (FUNCTION FLUSH, FUNCTION RESTORE FLUSH).
    pub fn function_clear(&mut self) -> Result<()> {
        self.function_changed()?;
        self.stmt("DELETE FROM function_libraries")?.execute([])?;
        Ok(())
    }
}

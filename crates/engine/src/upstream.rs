//! Where this database stands in a master's replication stream, when
//! respite is a replica of a redis-server (or of another respite).
//!
//! Redis names a point of its replication history by a replication ID and
//! a byte offset into the stream under that ID. A replica that knows the
//! point its data corresponds to can ask the master to continue from there
//! (`PSYNC <replid> <offset+1>`) instead of sending everything again. For
//! that to be safe the point must describe the data exactly: it is kept in
//! one row of the `upstream` table and written in the same transaction as
//! the commands that brought the data to it, so the two can never
//! disagree, whatever crashes when. A full synchronization clears the row
//! in the transaction that empties the database and writes it again in
//! the one that stores the last key, so a synchronization cut short leaves
//! no point behind and the next one is full again. Promotion (`REPLICAOF NO
//! ONE`) clears it too: once the data takes writes of its own it is no
//! longer any point of the master's history.

use rusqlite::OptionalExtension;

use crate::error::Result;
use crate::txn::Txn;
use crate::view::View;

/// A point in a master's replication stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    /// The master's replication ID (40 characters).
    pub replid: String,
    /// The offset of the last byte applied.
    pub offset: i64,
    /// The database the stream had selected at that byte (a stream
    /// continued there goes on in it without a new SELECT).
    pub db: u32,
}

impl View<'_, '_> {
    /// The point of the master's stream the data corresponds to, if any.
    pub fn upstream(&self) -> Result<Option<Position>> {
        let mut stmt = self.stmt("SELECT replid, offset, db FROM upstream WHERE id = 1")?;
        let row = stmt
            .query_row([], |r| {
                Ok(Position {
                    replid: r.get(0)?,
                    offset: r.get(1)?,
                    db: r.get(2)?,
                })
            })
            .optional()?;
        Ok(row)
    }
}

impl Txn<'_, '_> {
    /// Records the point the data now corresponds to, or forgets it.
    pub fn set_upstream(&mut self, position: Option<&Position>) -> Result<()> {
        self.changes += 1;
        match position {
            Some(p) => {
                self.stmt(
                    "INSERT INTO upstream (id, replid, offset, db) VALUES (1, ?1, ?2, ?3)
                     ON CONFLICT (id) DO UPDATE SET replid = excluded.replid,
                     offset = excluded.offset, db = excluded.db",
                )?
                .execute(rusqlite::params![p.replid, p.offset, p.db])?;
            }
            None => {
                self.stmt("DELETE FROM upstream")?.execute([])?;
            }
        }
        Ok(())
    }
}

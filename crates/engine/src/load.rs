//! Loading many whole values at once into keys that do not exist yet: the
//! bulk path of an RDB import.
//!
//! A command's write is built for a key that may exist: it looks the key
//! row up, inserts or updates it, writes each element with a statement
//! that tolerates one already there, then updates the row's count, flags
//! and expiry: four to eleven statements for a five-field hash. A string's
//! `INSERT ... ON CONFLICT DO UPDATE` also fires the `strings` trigger, so
//! SQLite keeps a statement journal for it, and a journal that has once
//! outgrown its memory stays a temporary file, written at every statement
//! (a fifth of an import's time went there).
//!
//! A load into keys known to be absent needs none of that. Each key is one
//! `INSERT` of its finished row (type, count, encoding flags and expiry in
//! place) and one `INSERT` per element; the ids a batch needs are taken
//! from `meta.next_id` in one step; and a batch's keys go in in key order,
//! so that consecutive inserts land on neighbouring pages of `keys`. The
//! rows are the ones the commands write (the same flags, list positions
//! and canonical scores), so nothing downstream can tell a loaded key from
//! one a client wrote. A sorted set big enough to need rank blocks (see
//! `zset.rs`) goes through `zset_add`, which builds them.
//!
//! A key that exists makes the load fail with [`EngineError::KeyExists`],
//! which names it (the caller's transaction is then rolled back whole);
//! the caller checks
//! that the database is empty first, or writes through the commands'
//! path. Instead of listing every key it creates, a load notes that any
//! key may have changed (the value cache is emptied and CLIENT TRACKING
//! told to flush, as after FLUSHALL), so its bookkeeping does not grow
//! with the number of keys; keys someone WATCHes, and every key while
//! replicas are fed, are still noted one by one.

use rusqlite::params;

use crate::error::{EngineError, Result};
use crate::schema::{inline_value_max, Kind, ENC_BIG};
use crate::txn::Txn;
use crate::zset::{AddFlags, BLOCKS_FROM};

/// A whole value to load, borrowed from the caller.
#[derive(Debug, Clone, Copy)]
pub enum Fresh<'a> {
    /// A string.
    String(&'a [u8]),
    /// A list's elements, head first.
    List(&'a [Vec<u8>]),
    /// A set's members, distinct.
    Set(&'a [Vec<u8>]),
    /// A hash's fields and values, the fields distinct.
    Hash(&'a [(Vec<u8>, Vec<u8>)]),
    /// A sorted set's members and scores, the members distinct.
    ZSet(&'a [(Vec<u8>, f64)]),
}

impl Fresh<'_> {
    /// A collection without elements (not stored: such a key does not
    /// exist).
    fn is_empty(&self) -> bool {
        match self {
            Fresh::String(_) => false,
            Fresh::List(v) | Fresh::Set(v) => v.is_empty(),
            Fresh::Hash(v) => v.is_empty(),
            Fresh::ZSet(v) => v.is_empty(),
        }
    }
}

/// One key of a load.
#[derive(Debug, Clone, Copy)]
pub struct FreshKey<'a> {
    /// Its database.
    pub db: u32,
    /// Its name.
    pub key: &'a [u8],
    /// Its value.
    pub value: Fresh<'a>,
    /// Its expiry (Unix ms), which must be in the future.
    pub expire_at: Option<i64>,
}

impl Txn<'_, '_> {
    /// Gives the writer's connection a page cache of `bytes` for a load
    /// (`Some`), or its own small one back (`None`; see `schema.rs`, whose
    /// reasons for a small one are about many small commits). A load of
    /// random keys into a cache smaller than the tables it grows reads
    /// back, and writes again, the pages it pushed out; a cache as big as
    /// the tables writes each page once, at the commit. The cache is a
    /// bound, not an allocation: it takes memory only as pages fill it.
    pub fn load_cache(&mut self, bytes: Option<usize>) -> Result<()> {
        let kib = match bytes {
            Some(b) => (b / 1024) as i64,
            None => crate::schema::WRITER_CACHE_KIB,
        };
        self.conn().pragma_update(None, "cache_size", -kib)?;
        Ok(())
    }

    /// Writes every key of `keys`, none of which may exist (see the module
    /// docs). An empty collection is skipped. Fails with
    /// [`EngineError::KeyExists`] on a key that exists (or comes twice),
    /// with a storage error (a constraint) on a duplicate element.
    pub fn load_fresh(&mut self, keys: &[FreshKey<'_>]) -> Result<()> {
        let inline_max = inline_value_max(self.stmts.page_size()?);
        let big_zset =
            |k: &FreshKey<'_>| matches!(k.value, Fresh::ZSet(v) if v.len() as i64 > BLOCKS_FROM);
        let mut order: Vec<usize> = (0..keys.len())
            .filter(|&i| !keys[i].value.is_empty())
            .collect();
        order.sort_unstable_by(|&a, &b| (keys[a].db, keys[a].key).cmp(&(keys[b].db, keys[b].key)));
        // Ids for every collection and long string (big sorted sets take
        // their own through `zset_add`), in the order they are used.
        let needs_id = |k: &FreshKey<'_>| match k.value {
            Fresh::String(v) => k.key.len() + v.len() > inline_max,
            _ => !big_zset(k),
        };
        let ids = order.iter().filter(|&&i| needs_id(&keys[i])).count() as i64;
        let mut next_id: i64 = if ids > 0 {
            self.stmt(
                "UPDATE meta SET value = value + ?1 WHERE name = 'next_id' RETURNING value - ?1",
            )?
            .query_row([ids], |r| r.get(0))?
        } else {
            0
        };
        let one_by_one = self.keys_needed_one_by_one();
        if !one_by_one {
            self.changing_all();
            self.flushed = true;
        }
        let notify_new = self.notifying(crate::notify::NEW);
        let hash_value = self.thresholds.hash_value();
        let hash_entries = self.thresholds.hash_entries();
        let set_entries = self.thresholds.set_entries();
        let zset_value = self.thresholds.zset_value();
        let zset_entries = self.thresholds.zset_entries();
        for &i in &order {
            let k = &keys[i];
            let (db, key, expire_at) = (k.db, k.key, k.expire_at);
            if big_zset(k) {
                self.load_big_zset(k)?;
                continue;
            }
            if one_by_one {
                self.changing(db, key);
            }
            if notify_new {
                self.notify(crate::notify::NEW, "new", db, key);
            }
            let mut take_id = || {
                next_id += 1;
                next_id - 1
            };
            match k.value {
                Fresh::String(value) if key.len() + value.len() <= inline_max => {
                    self.stmt(
                        "INSERT INTO keys (db, key, type, value, expire_at) VALUES (?1, ?2, 0, ?3, ?4)",
                    )?
                    .execute(params![db, key, value, expire_at])
                    .map_err(|e| key_exists(k, e))?;
                }
                Fresh::String(value) => {
                    let id = take_id();
                    self.stmt("INSERT INTO strings (id, value) VALUES (?1, ?2)")?
                        .execute(params![id, value])?;
                    self.stmt(
                        "INSERT INTO keys (db, key, type, expire_at, id) VALUES (?1, ?2, 0, ?3, ?4)",
                    )?
                    .execute(params![db, key, expire_at, id])
                    .map_err(|e| key_exists(k, e))?;
                }
                Fresh::Hash(pairs) => {
                    let id = take_id();
                    let mut flags = 0;
                    let mut stmt =
                        self.stmt("INSERT INTO hashes (id, field, value) VALUES (?1, ?2, ?3)")?;
                    for (field, value) in pairs {
                        stmt.execute(params![id, field, value])?;
                        flags |= crate::hash::pair_flags(field, value, hash_value);
                    }
                    drop(stmt);
                    if pairs.len() as i64 > hash_entries {
                        flags |= ENC_BIG;
                    }
                    self.insert_row(k, Kind::Hash, id, pairs.len(), flags)?;
                }
                Fresh::Set(members) => {
                    let id = take_id();
                    let mut flags = 0;
                    let mut stmt = self.stmt("INSERT INTO sets (id, member) VALUES (?1, ?2)")?;
                    for member in members {
                        stmt.execute(params![id, member])?;
                        if !crate::set::is_intset_member(member) {
                            flags |= ENC_BIG;
                        }
                    }
                    drop(stmt);
                    if members.len() as i64 > set_entries {
                        flags |= ENC_BIG;
                    }
                    self.insert_row(k, Kind::Set, id, members.len(), flags)?;
                }
                Fresh::List(values) => {
                    // Positions as a push onto an empty list gives them.
                    let id = take_id();
                    let mut stmt =
                        self.stmt("INSERT INTO lists (id, pos, value) VALUES (?1, ?2, ?3)")?;
                    let mut pos = 0i64;
                    for value in values {
                        stmt.execute(params![id, pos, value])?;
                        pos += crate::list::STEP;
                    }
                    drop(stmt);
                    self.insert_row(k, Kind::List, id, values.len(), 0)?;
                }
                Fresh::ZSet(pairs) => {
                    let id = take_id();
                    let mut flags = 0;
                    let mut stmt =
                        self.stmt("INSERT INTO zsets (id, member, score) VALUES (?1, ?2, ?3)")?;
                    for (member, score) in pairs {
                        stmt.execute(params![id, member, crate::zset::canonical(*score)])?;
                        if member.len() > zset_value {
                            flags |= ENC_BIG;
                        }
                    }
                    drop(stmt);
                    if pairs.len() as i64 > zset_entries {
                        flags |= ENC_BIG;
                    }
                    self.insert_row(k, Kind::ZSet, id, pairs.len(), flags)?;
                }
            }
        }
        Ok(())
    }

    /// Whether the keys an operation changes must be noted one by one:
    /// while keys are WATCHed (a watched key the load creates must break
    /// its EXEC) or replicas are fed (each key is sent).
    fn keys_needed_one_by_one(&self) -> bool {
        self.propagating || !self.watches.keys_in(None).is_empty()
    }

    /// Forgets the keys this operation has noted one by one and notes
    /// instead that any key may have changed, as [`Txn::load_fresh`] does:
    /// for an operation that writes more keys than are worth listing (an
    /// import over existing keys, through the commands' path), so that
    /// what it keeps stays bounded. Nothing is forgotten while the keys
    /// are needed one by one (see `keys_needed_one_by_one`).
    pub fn note_any_key_changed(&mut self) {
        if !self.keys_needed_one_by_one() {
            self.touched.collapse();
            self.changing_all();
            self.flushed = true;
        }
    }

    /// The key row of a loaded collection.
    fn insert_row(
        &mut self,
        k: &FreshKey<'_>,
        kind: Kind,
        id: i64,
        count: usize,
        flags: i64,
    ) -> Result<()> {
        self.stmt(
            "INSERT INTO keys (db, key, type, value, expire_at, id, count)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )?
        .execute(params![
            k.db,
            k.key,
            kind.code(),
            flags,
            k.expire_at,
            id,
            count as i64
        ])
        .map_err(|e| key_exists(k, e))?;
        Ok(())
    }

    /// A sorted set with rank blocks, through the command's path (which
    /// notes the key itself).
    fn load_big_zset(&mut self, k: &FreshKey<'_>) -> Result<()> {
        let Fresh::ZSet(pairs) = k.value else {
            return Err(EngineError::Internal("not a sorted set".into()));
        };
        let items: Vec<(f64, &[u8])> = pairs.iter().map(|(m, s)| (*s, m.as_slice())).collect();
        let mut slot = self.open(k.db, k.key, Kind::ZSet)?;
        if slot.row().is_some() {
            // `open` found the key: a load never replaces one.
            return Err(EngineError::KeyExists {
                db: k.db,
                key: k.key.to_vec(),
            });
        }
        self.zset_add(&mut slot, &items, AddFlags::default())?;
        if k.expire_at.is_some() {
            self.set_expire(k.db, k.key, k.expire_at)?;
        }
        Ok(())
    }
}

/// The error of a failed insert of `k`'s row into `keys`: the table's
/// primary key refused it, so the key exists; otherwise SQLite's error.
fn key_exists(k: &FreshKey<'_>, e: rusqlite::Error) -> EngineError {
    match e {
        rusqlite::Error::SqliteFailure(f, _)
            if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY =>
        {
            EngineError::KeyExists {
                db: k.db,
                key: k.key.to_vec(),
            }
        }
        e => EngineError::Storage(e),
    }
}

//! Keys, whatever they hold: their rows, the write gate, expiry, renaming,
//! iteration and the freeing of dropped keys.
//!
//! ## The key row
//!
//! Every key has one row in `keys` (see `schema.rs`): its type, its expiry,
//! and either a string's value or, for the collection types, the id of its
//! elements and their count. Reading a key starts with that row; a row whose
//! expiry has passed is treated as absent everywhere.
//!
//! ## One gate for every write
//!
//! A command that changes a hash or a set first opens the key with
//! [`Txn::open`]. That one function looks the row up, drops it if it has
//! expired (a write, noted as one), refuses a key of another type with
//! WRONGTYPE, and returns a [`Slot`]. Every change to the key's elements
//! then goes through the slot: [`Txn::slot_id`] creates the key row when the
//! key is new and notes the change (which marks the operation as written and
//! records the key as touched, which is what drops it from the value cache
//! and tells WATCH), and [`Txn::settle`] writes back the new element count,
//! deleting the key when its last element is gone, as Redis does. A command
//! that opens a key and changes nothing (HDEL of a missing field) writes
//! nothing and touches nothing.
//!
//! Strings keep their own single-statement path (`string.rs`), since SET
//! overwrites any type and must stay one row write; it notes its change with
//! the same [`Txn::changing`].
//!
//! ## Dropping big keys
//!
//! Deleting a key deletes its row; its elements are unreachable from that
//! moment (reads go through the row's id, and ids are never reused). A
//! small key's elements are deleted right away; a big one's id goes to the
//! `dropped` table, and the writer frees its elements a chunk at a time
//! between groups ([`Txn::expire_due`]), so a DEL of a million-field hash
//! costs the writer one row, not a million.
//!
//! ## Cursors
//!
//! SCAN, HSCAN and SSCAN walk their rows in key order, and a cursor is the
//! position to go on from, written into the 64-bit number itself: the first
//! seven bytes of the next key to examine and their length. So the server
//! keeps nothing per scan, and any number a client sends is a valid
//! position. A page always ends where those seven bytes change (it reads
//! on past COUNT to get there), so every key present for the whole scan is
//! returned exactly once; the price is that keys sharing a long prefix come
//! back in larger pages than COUNT asked for.

use rusqlite::{params, OptionalExtension};

use crate::error::{EngineError, Result};
use crate::glob::glob_match;
use crate::notify;
use crate::schema::Kind;
use crate::txn::Txn;
use crate::view::View;

/// A live key's row: its type, expiry and (for collections) element count.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The data type.
    pub kind: Kind,
    /// Absolute expiry in Unix milliseconds, if any.
    pub expire_at: Option<i64>,
    /// Elements of a hash or set (0 for a string).
    pub count: i64,
    /// The flag bits of a hash or set (see [`crate::schema::ENC_BIG`]).
    pub flags: i64,
}

/// Per-database key counts, for INFO's keyspace section.
#[derive(Debug, Clone, Copy)]
pub struct DbCounts {
    /// The logical database index.
    pub db: u32,
    /// Live keys.
    pub keys: u64,
    /// Live keys with an expiry.
    pub expires: u64,
}

/// One page of a SCAN.
#[derive(Debug, Clone)]
pub struct ScanPage {
    /// Keys of this page that passed the MATCH and TYPE filters.
    pub keys: Vec<Vec<u8>>,
    /// The cursor to go on with; 0 when the scan is done.
    pub cursor: u64,
}

/// The row of a live hash or set key.
#[derive(Debug, Clone, Copy)]
pub struct KeyRow {
    /// The id its elements are stored under.
    pub id: i64,
    /// How many elements it has.
    pub count: i64,
    /// Flag bits (see [`crate::schema::ENC_BIG`]).
    pub flags: i64,
    /// Absolute expiry in Unix milliseconds, if any.
    pub expire_at: Option<i64>,
}

/// A key opened for writing by [`Txn::open`]: its name, type, and row while
/// it exists.
#[derive(Debug)]
pub struct Slot<'k> {
    pub(crate) db: u32,
    pub(crate) key: &'k [u8],
    pub(crate) kind: Kind,
    pub(crate) row: Option<KeyRow>,
    /// The key is new in this operation and its row not written yet
    /// ([`Txn::slot_id_deferred`]): [`Txn::settle`] inserts it.
    pub(crate) unborn: bool,
    /// Opened by [`Txn::open_list`]: its pushes and pops may be kept in
    /// memory (see `elide.rs`).
    pub(crate) elide: bool,
}

impl Slot<'_> {
    /// The key's row, `None` while the key does not exist.
    pub fn row(&self) -> Option<KeyRow> {
        self.row
    }

    /// Its number of elements (0 when it does not exist).
    pub fn len(&self) -> i64 {
        self.row.map_or(0, |r| r.count)
    }

    /// Whether the key does not exist (has no elements).
    pub fn is_empty(&self) -> bool {
        self.row.is_none()
    }
}

/// A stored key row, live or expired, as the writer sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stored {
    pub(crate) kind: Kind,
    pub(crate) id: Option<i64>,
    pub(crate) count: i64,
    pub(crate) flags: i64,
    pub(crate) expire_at: Option<i64>,
}

/// The most rounds of `expire_chunk` keys one expiry sweep deletes (see
/// [`Txn::expire_due`]): 16 x 256 keys while a backlog lasts, a few
/// milliseconds of the writer's time in release (a DEL of a million keys
/// costs it about 1.6 us a key).
const SWEEP_ROUNDS: usize = 16;

/// Keys with at most this many elements have them deleted with the key;
/// bigger ones are freed later, in chunks.
const FREE_INLINE: i64 = 64;

/// The most element rows freed in one housekeeping pass. A pass is its own
/// transaction between two groups, so this bounds how long a write can wait
/// behind it: 10,000 rows held writes up to 67 ms (512-byte pages, a DEL of
/// a 500,000-member set); 1,000 keep a pass to a few milliseconds, and a
/// full pass makes the writer free the next chunk at its next pause rather
/// than a tick later.
const FREE_CHUNK: i64 = 1_000;

/// What one sweep between groups did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sweep {
    /// Keys deleted because their expiry passed.
    pub(crate) expired: usize,
    /// Whether elements of dropped keys are left to free.
    pub(crate) more_to_free: bool,
}

/// The SQL that handles a collection's elements as a whole, whatever the
/// type: each statement takes the key id as `?1`. A type may keep more
/// than one table per key (a big sorted set's rank blocks), so each job is
/// a list of statements, run in order.
struct Elements {
    /// Deletes every element.
    delete: &'static [&'static str],
    /// Copies every element to the id `?2`.
    copy: &'static [&'static str],
    /// Each deletes at most `?2` rows; the key is freed when together they
    /// delete fewer rows than they were allowed.
    free_chunk: &'static [&'static str],
}

/// The element statements of `kind`; `None` for a string, whose value is
/// in its key row.
fn elements(kind: Kind) -> Option<&'static Elements> {
    const HASH: Elements = Elements {
        delete: &["DELETE FROM hashes WHERE id = ?1"],
        copy: &["INSERT INTO hashes (id, field, value) SELECT ?2, field, value FROM hashes WHERE id = ?1"],
        free_chunk: &["DELETE FROM hashes WHERE id = ?1 AND field IN
                       (SELECT field FROM hashes WHERE id = ?1 LIMIT ?2)"],
    };
    const SET: Elements = Elements {
        delete: &["DELETE FROM sets WHERE id = ?1"],
        copy: &["INSERT INTO sets (id, member) SELECT ?2, member FROM sets WHERE id = ?1"],
        free_chunk: &["DELETE FROM sets WHERE id = ?1 AND member IN
                       (SELECT member FROM sets WHERE id = ?1 LIMIT ?2)"],
    };
    const LIST: Elements = Elements {
        delete: &["DELETE FROM lists WHERE id = ?1"],
        copy: &[
            "INSERT INTO lists (id, pos, value) SELECT ?2, pos, value FROM lists WHERE id = ?1",
        ],
        free_chunk: &["DELETE FROM lists WHERE id = ?1 AND pos IN
                       (SELECT pos FROM lists WHERE id = ?1 LIMIT ?2)"],
    };
    // The rank blocks (`zset.rs`) go with the members: a copy gets its own
    // (the key row's ZBLOCKS flag is copied with the count), and a dropped
    // key's blocks are freed with its first chunks.
    const ZSET: Elements = Elements {
        delete: &[
            "DELETE FROM zsets WHERE id = ?1",
            "DELETE FROM zblocks WHERE id = ?1",
        ],
        copy: &[
            "INSERT INTO zsets (id, member, score) SELECT ?2, member, score FROM zsets WHERE id = ?1",
            "INSERT INTO zblocks (id, score, member, count)
             SELECT ?2, score, member, count FROM zblocks WHERE id = ?1",
        ],
        free_chunk: &[
            "DELETE FROM zblocks WHERE id = ?1 AND (score, member) IN
             (SELECT score, member FROM zblocks WHERE id = ?1 LIMIT ?2)",
            "DELETE FROM zsets WHERE id = ?1 AND member IN
             (SELECT member FROM zsets WHERE id = ?1 LIMIT ?2)",
        ],
    };
    // A stream's entries, its state, its nodes and its consumer groups
    // (`stream.rs`), all under its id.
    const STREAM: Elements = Elements {
        delete: &[
            "DELETE FROM streams WHERE id = ?1",
            "DELETE FROM stream_meta WHERE id = ?1",
            "DELETE FROM stream_nodes WHERE id = ?1",
            "DELETE FROM stream_groups WHERE id = ?1",
            "DELETE FROM stream_consumers WHERE id = ?1",
            "DELETE FROM stream_pel WHERE id = ?1",
        ],
        copy: &[
            "INSERT INTO streams (id, ms, seq, fields) SELECT ?2, ms, seq, fields FROM streams WHERE id = ?1",
            "INSERT INTO stream_meta (id, last_ms, last_seq, del_ms, del_seq, added, nodes)
             SELECT ?2, last_ms, last_seq, del_ms, del_seq, added, nodes FROM stream_meta WHERE id = ?1",
            "INSERT INTO stream_nodes (id, ms, seq, last_ms, last_seq, live, deleted, bytes, master)
             SELECT ?2, ms, seq, last_ms, last_seq, live, deleted, bytes, master
             FROM stream_nodes WHERE id = ?1",
            "INSERT INTO stream_groups (id, name, last_ms, last_seq, entries_read)
             SELECT ?2, name, last_ms, last_seq, entries_read FROM stream_groups WHERE id = ?1",
            "INSERT INTO stream_consumers (id, grp, name, seen)
             SELECT ?2, grp, name, seen FROM stream_consumers WHERE id = ?1",
            "INSERT INTO stream_pel (id, grp, ms, seq, consumer, delivered, count)
             SELECT ?2, grp, ms, seq, consumer, delivered, count FROM stream_pel WHERE id = ?1",
        ],
        free_chunk: &[
            "DELETE FROM stream_pel WHERE id = ?1 AND (grp, ms, seq) IN
             (SELECT grp, ms, seq FROM stream_pel WHERE id = ?1 LIMIT ?2)",
            "DELETE FROM stream_consumers WHERE id = ?1 AND (grp, name) IN
             (SELECT grp, name FROM stream_consumers WHERE id = ?1 LIMIT ?2)",
            "DELETE FROM stream_groups WHERE id = ?1 AND name IN
             (SELECT name FROM stream_groups WHERE id = ?1 LIMIT ?2)",
            "DELETE FROM stream_nodes WHERE id = ?1 AND (ms, seq) IN
             (SELECT ms, seq FROM stream_nodes WHERE id = ?1 LIMIT ?2)",
            "DELETE FROM streams WHERE id = ?1 AND (ms, seq) IN
             (SELECT ms, seq FROM streams WHERE id = ?1 LIMIT ?2)",
            "DELETE FROM stream_meta WHERE id = ?1 AND ?2 > 0",
        ],
    };
    match kind {
        Kind::String => None,
        Kind::Hash => Some(&HASH),
        Kind::Set => Some(&SET),
        Kind::List => Some(&LIST),
        Kind::ZSet => Some(&ZSET),
        Kind::Stream => Some(&STREAM),
    }
}

/// The bytes of a key that a cursor holds.
const CURSOR_BYTES: usize = 7;

/// The columns `type, id, count, value, expire_at` of a key row, as read
/// by [`View::live`] and [`View::stored`]: `value` is a string's bytes or an
/// aggregate's encoding flags, so only an integer there is kept.
type KeyColumns = (i64, Option<i64>, Option<i64>, Option<i64>, Option<i64>);

fn key_columns(r: &rusqlite::Row<'_>) -> rusqlite::Result<KeyColumns> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get_ref(3)?.as_i64().ok(),
        r.get(4)?,
    ))
}

/// The cursor that resumes a scan at `next` (never 0: `next` follows an
/// examined key, so it is not empty).
fn encode_cursor(next: &[u8]) -> u64 {
    let n = next.len().min(CURSOR_BYTES);
    let mut c = (n as u64) << 56;
    for (i, b) in next[..n].iter().enumerate() {
        c |= (*b as u64) << (8 * (6 - i));
    }
    c
}

/// Where a cursor resumes: the keys at or after the returned bytes. Any
/// number is a position (a length byte of 0 is the start, one above 7 is
/// read as 7).
fn decode_cursor(cursor: u64) -> Vec<u8> {
    let n = ((cursor >> 56) as usize).min(CURSOR_BYTES);
    (0..n).map(|i| (cursor >> (8 * (6 - i))) as u8).collect()
}

fn cursor_prefix(key: &[u8]) -> &[u8] {
    &key[..key.len().min(CURSOR_BYTES)]
}

/// Rows of one scan page, each with its sort key.
pub(crate) type Page<T> = Vec<(Vec<u8>, T)>;

/// Reads one page from rows in key order: at least `count` rows, then on
/// until the cursor prefix changes. Returns the rows read and the cursor
/// (0 when the rows ran out).
pub(crate) fn page<T>(
    rows: &mut rusqlite::Rows<'_>,
    count: usize,
    mut read: impl FnMut(&rusqlite::Row<'_>) -> Result<(Vec<u8>, T)>,
) -> Result<(Page<T>, u64)> {
    let mut out: Page<T> = Vec::new();
    while let Some(row) = rows.next()? {
        let (key, item) = read(row)?;
        if let Some((last, _)) = out.last() {
            if out.len() >= count && cursor_prefix(last) != cursor_prefix(&key) {
                return Ok((out, encode_cursor(&key)));
            }
        }
        out.push((key, item));
    }
    Ok((out, 0))
}

/// Where a scan starts for `cursor` (see the module docs).
pub(crate) fn scan_start(cursor: u64) -> Vec<u8> {
    if cursor == 0 {
        Vec::new()
    } else {
        decode_cursor(cursor)
    }
}

/// How many rows nobody asked for [`View::count_existing`]'s scan steps
/// over before it starts again at the next key wanted: a handful of rows
/// share a leaf page, and stepping within a page is far cheaper than a
/// search from the root.
const EXISTS_SCAN_SLACK: u32 = 8;

impl View<'_, '_> {
    /// The live key's type, expiry and size, or `None` if it does not exist.
    pub fn entry(&self, db: u32, key: &[u8]) -> Result<Option<Entry>> {
        self.entry_row(db, key, true)
    }

    /// [`View::entry`], not noted as a lookup (see `access.rs`): for a
    /// command that looks without using (DEBUG OBJECT).
    pub fn peek_entry(&self, db: u32, key: &[u8]) -> Result<Option<Entry>> {
        self.entry_row(db, key, false)
    }

    fn entry_row(&self, db: u32, key: &[u8], seen: bool) -> Result<Option<Entry>> {
        let mut stmt = self.stmt(
            "SELECT type, expire_at, count, value FROM keys
             WHERE db = ?1 AND key = ?2 AND (expire_at IS NULL OR expire_at > ?3)",
        )?;
        let row = stmt
            .query_row(params![db, key, self.now], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, Option<i64>>(1)?,
                    r.get::<_, Option<i64>>(2)?,
                    r.get_ref(3)?.as_i64().ok(),
                ))
            })
            .optional()?;
        if seen {
            self.seen(db, key, row.is_some());
        }
        let Some((code, expire_at, count, flags)) = row else {
            return Ok(None);
        };
        let kind = Kind::from_code(code)?;
        let (count, flags) = match kind {
            Kind::String => (0, 0),
            _ => (count.unwrap_or(0), flags.unwrap_or(0)),
        };
        Ok(Some(Entry {
            kind,
            expire_at,
            count,
            flags,
        }))
    }

    /// The type of a live key.
    pub fn kind(&self, db: u32, key: &[u8]) -> Result<Option<Kind>> {
        Ok(self.entry(db, key)?.map(|e| e.kind))
    }

    /// Does the live key exist?
    pub fn exists(&self, db: u32, key: &[u8]) -> Result<bool> {
        Ok(self.entry(db, key)?.is_some())
    }

    /// How many of `keys` are live keys, a key named twice counted twice
    /// (EXISTS, TOUCH).
    ///
    /// One key is one point lookup. Many are sorted and walked together
    /// with the table in key order, by one scan that starts at the first
    /// key wanted and is started again further on only when it has stepped
    /// past [`EXISTS_SCAN_SLACK`] rows nobody asked for. Each lookup of
    /// its own would descend the b-tree from the root, and with the
    /// database mapped in memory SQLite first looks every page it touches
    /// up in the WAL's index (`walFindFrame`, whose cost grows with the
    /// WAL) even when the page is cached: a million keys named as clients
    /// name them (`k0`, `k1`, ...: far apart in key order) were millions of
    /// such searches, and most of EXISTS's time. A scan reads each leaf
    /// page once, and moves from row to row within a page without a
    /// search; keys far apart cost one restart each, about what a lookup
    /// costs.
    pub fn count_existing<K: AsRef<[u8]>>(&self, db: u32, keys: &[K]) -> Result<u64> {
        if let [key] = keys {
            let mut stmt = self.stmt(
                "SELECT 1 FROM keys
                 WHERE db = ?1 AND key = ?2 AND (expire_at IS NULL OR expire_at > ?3)",
            )?;
            let found = stmt.exists(params![db, key.as_ref(), self.now])?;
            self.seen(db, key.as_ref(), found);
            return Ok(u64::from(found));
        }
        // SQLite orders BLOB keys as slices order: bytewise, a prefix
        // first. Each distinct key once, with how often it was named.
        let mut sorted: Vec<&[u8]> = keys.iter().map(AsRef::as_ref).collect();
        sorted.sort_unstable();
        let wanted: Vec<(&[u8], u64)> = sorted
            .chunk_by(|a, b| a == b)
            .map(|run| (run[0], run.len() as u64))
            .collect();
        let mut stmt =
            self.stmt("SELECT key, expire_at FROM keys WHERE db = ?1 AND key >= ?2 ORDER BY key")?;
        let (mut n, mut i) = (0u64, 0usize);
        // Which wanted keys are live, for the access table.
        let mut live = vec![false; wanted.len()];
        'scan: while i < wanted.len() {
            let mut rows = stmt.query(params![db, wanted[i].0])?;
            let mut slack = 0;
            loop {
                let Some(row) = rows.next()? else {
                    // Past the last key of the database: the rest are not
                    // there.
                    break 'scan;
                };
                let key = match row.get_ref(0)? {
                    rusqlite::types::ValueRef::Blob(b) | rusqlite::types::ValueRef::Text(b) => b,
                    other => {
                        return Err(EngineError::Internal(format!(
                            "a key stored as {:?}",
                            other.data_type()
                        )))
                    }
                };
                // Wanted keys the scan went past are not there.
                while i < wanted.len() && wanted[i].0 < key {
                    i += 1;
                }
                let Some(&(next, times)) = wanted.get(i) else {
                    break 'scan;
                };
                if next == key {
                    let expire_at: Option<i64> = row.get(1)?;
                    if expire_at.is_none_or(|at| at > self.now) {
                        n += times;
                        live[i] = true;
                    }
                    i += 1;
                    slack = 0;
                } else {
                    // A row nobody asked for; far from the next wanted
                    // key, a new scan starting there is cheaper.
                    slack += 1;
                    if slack > EXISTS_SCAN_SLACK {
                        break;
                    }
                }
            }
        }
        // Each mention is a lookup for redis (keyspace hits and misses,
        // TOUCH's access).
        for (&(key, times), &found) in wanted.iter().zip(&live) {
            for _ in 0..times {
                self.seen(db, key, found);
            }
        }
        Ok(n)
    }

    /// The row of a live key of type `kind`: `None` if it does not exist,
    /// WRONGTYPE if it holds another type. The read side's gate.
    pub fn live(&self, db: u32, key: &[u8], kind: Kind) -> Result<Option<KeyRow>> {
        self.live_row(db, key, kind, true)
    }

    /// [`View::live`], noted as a lookup (see `access.rs`) when `seen`:
    /// not when the command has looked the key up already.
    pub fn live_row(&self, db: u32, key: &[u8], kind: Kind, seen: bool) -> Result<Option<KeyRow>> {
        let mut stmt = self.stmt(
            "SELECT type, id, count, value, expire_at FROM keys
             WHERE db = ?1 AND key = ?2 AND (expire_at IS NULL OR expire_at > ?3)",
        )?;
        let row = stmt
            .query_row(params![db, key, self.now], key_columns)
            .optional()?;
        if seen {
            self.seen(db, key, row.is_some());
        }
        let Some((code, id, count, flags, expire_at)) = row else {
            return Ok(None);
        };
        if Kind::from_code(code)? != kind {
            return Err(EngineError::WrongType);
        }
        Ok(id.map(|id| KeyRow {
            id,
            count: count.unwrap_or(0),
            flags: flags.unwrap_or(0),
            expire_at,
        }))
    }

    /// Number of keys stored in `db` (DBSIZE), as redis counts them: keys
    /// that have expired but that the expiry sweep has not deleted yet are
    /// counted (redis's `dictSize` of the database). Every read hides such
    /// a key; the sweep deletes it within 100 ms of its expiry, unless a
    /// CLIENT PAUSE or DEBUG SET-ACTIVE-EXPIRE 0 holds the sweep.
    pub fn dbsize(&self, db: u32) -> Result<u64> {
        let mut stmt = self.stmt("SELECT count(*) FROM keys WHERE db = ?1")?;
        let n: i64 = stmt.query_row(params![db], |r| r.get(0))?;
        Ok(n as u64)
    }

    /// Number of live keys in `db`.
    fn live_count(&self, db: u32) -> Result<u64> {
        let mut stmt = self.stmt(
            "SELECT count(*) FROM keys WHERE db = ?1 AND (expire_at IS NULL OR expire_at > ?2)",
        )?;
        let n: i64 = stmt.query_row(params![db, self.now], |r| r.get(0))?;
        Ok(n as u64)
    }

    /// Every live key of `db` matching the glob `pattern` (KEYS).
    pub fn keys(&self, db: u32, pattern: &[u8]) -> Result<Vec<Vec<u8>>> {
        let mut stmt = self.stmt(
            "SELECT key FROM keys WHERE db = ?1 AND (expire_at IS NULL OR expire_at > ?2)
             ORDER BY key",
        )?;
        let all_match = pattern == b"*";
        let mut out = Vec::new();
        let mut rows = stmt.query(params![db, self.now])?;
        while let Some(row) = rows.next()? {
            let key: Vec<u8> = row.get(0)?;
            if all_match || glob_match(pattern, &key) {
                out.push(key);
            }
        }
        Ok(out)
    }

    /// One page of a SCAN of `db` from `cursor`: about `count` keys examined
    /// in key order, those passing the filters returned (see the module
    /// docs for the cursor).
    pub fn scan(
        &self,
        db: u32,
        cursor: u64,
        count: usize,
        pattern: Option<&[u8]>,
        kind: Option<Kind>,
    ) -> Result<ScanPage> {
        let mut stmt = self.stmt(
            "SELECT key, type FROM keys
             WHERE db = ?1 AND key >= ?2 AND (expire_at IS NULL OR expire_at > ?3)
             ORDER BY key",
        )?;
        let start = scan_start(cursor);
        let mut rows = stmt.query(params![db, start, self.now])?;
        let (read, cursor) = page(&mut rows, count.max(1), |row| {
            Ok((row.get::<_, Vec<u8>>(0)?, row.get::<_, i64>(1)?))
        })?;
        let mut keys = Vec::new();
        for (key, code) in read {
            let k = Kind::from_code(code)?;
            if pattern.is_none_or(|p| glob_match(p, &key)) && kind.is_none_or(|t| t == k) {
                keys.push(key);
            }
        }
        Ok(ScanPage { keys, cursor })
    }

    /// A live key of `db` chosen by `pick` (RANDOMKEY passes a random
    /// number): the `pick mod dbsize`-th key in key order. Linear in the
    /// number of keys, which RANDOMKEY's rare use can afford; it makes every
    /// key equally likely whatever the keys look like.
    pub fn random_key(&self, db: u32, pick: u64) -> Result<Option<Vec<u8>>> {
        let n = self.live_count(db)?;
        if n == 0 {
            return Ok(None);
        }
        let mut stmt = self.stmt(
            "SELECT key FROM keys WHERE db = ?1 AND (expire_at IS NULL OR expire_at > ?2)
             ORDER BY key LIMIT 1 OFFSET ?3",
        )?;
        Ok(stmt
            .query_row(params![db, self.now, (pick % n) as i64], |r| r.get(0))
            .optional()?)
    }

    /// Key and expiry counts of every non-empty database (INFO keyspace),
    /// counted as [`View::dbsize`] counts: keys expired but not yet swept
    /// included, as in redis.
    pub fn keyspace(&self) -> Result<Vec<DbCounts>> {
        let mut stmt =
            self.stmt("SELECT db, count(*), count(expire_at) FROM keys GROUP BY db ORDER BY db")?;
        let rows = stmt.query_map([], |r| {
            Ok(DbCounts {
                db: r.get(0)?,
                keys: r.get::<_, i64>(1)? as u64,
                expires: r.get::<_, i64>(2)? as u64,
            })
        })?;
        Ok(rows.collect::<std::result::Result<Vec<_>, _>>()?)
    }
}

impl<'s, 'c> Txn<'s, 'c> {
    /// The row stored under the key, expired or not.
    pub(crate) fn stored(&self, db: u32, key: &[u8]) -> Result<Option<Stored>> {
        let mut stmt = self.stmt(
            "SELECT type, id, count, value, expire_at FROM keys WHERE db = ?1 AND key = ?2",
        )?;
        let row = stmt.query_row(params![db, key], key_columns).optional()?;
        let Some((code, id, count, flags, expire_at)) = row else {
            return Ok(None);
        };
        Ok(Some(Stored {
            kind: Kind::from_code(code)?,
            id,
            count: count.unwrap_or(0),
            flags: flags.unwrap_or(0),
            expire_at,
        }))
    }

    /// **The write gate.** Opens a key for a change of its elements: looks
    /// its row up, drops it if it has expired, and refuses a key of another
    /// type with WRONGTYPE. Nothing is marked written or touched until
    /// [`Txn::slot_id`] (or the drop of an expired row, which is a write).
    pub fn open<'k>(&mut self, db: u32, key: &'k [u8], kind: Kind) -> Result<Slot<'k>> {
        let stored = self.stored(db, key)?;
        let row = match stored {
            None => None,
            Some(s) if s.expire_at.is_some_and(|at| at <= self.now()) => {
                self.drop_stored(db, key, &s)?;
                self.dropped_expired(db, key);
                None
            }
            Some(s) if s.kind != kind => return Err(EngineError::WrongType),
            Some(s) => s.id.map(|id| KeyRow {
                id,
                count: s.count,
                flags: s.flags,
                expire_at: s.expire_at,
            }),
        };
        Ok(Slot {
            db,
            key,
            kind,
            row,
            unborn: false,
            elide: false,
        })
    }

    /// The id of the slot's elements, creating the key (with no elements
    /// yet) if it does not exist; notes the key as changed. Call it before
    /// changing the elements, then [`Txn::settle`].
    pub fn slot_id(&mut self, slot: &mut Slot<'_>) -> Result<i64> {
        self.changing(slot.db, slot.key);
        if let Some(row) = slot.row {
            return Ok(row.id);
        }
        let id = self.new_id()?;
        self.stmt(
            "INSERT INTO keys (db, key, type, value, expire_at, id, count)
             VALUES (?1, ?2, ?3, 0, NULL, ?4, 0)",
        )?
        .execute(params![slot.db, slot.key, slot.kind.code(), id])?;
        self.notify(notify::NEW, "new", slot.db, slot.key);
        slot.row = Some(KeyRow {
            id,
            count: 0,
            flags: 0,
            expire_at: None,
        });
        Ok(id)
    }

    /// [`Txn::slot_id`] for a command that calls [`Txn::settle`] once its
    /// elements are written, with nothing in between that reads the key
    /// row: a new key's row is then written once, by `settle`, with its
    /// count and flags, instead of inserted here and updated there (a
    /// statement and a descent of `keys` less per new key).
    pub fn slot_id_deferred(&mut self, slot: &mut Slot<'_>) -> Result<i64> {
        self.changing(slot.db, slot.key);
        if let Some(row) = slot.row {
            return Ok(row.id);
        }
        let id = self.new_id()?;
        self.notify(notify::NEW, "new", slot.db, slot.key);
        slot.row = Some(KeyRow {
            id,
            count: 0,
            flags: 0,
            expire_at: None,
        });
        slot.unborn = true;
        Ok(id)
    }

    /// A new key id (ids are never reused: see the schema's docs).
    pub(crate) fn new_id(&mut self) -> Result<i64> {
        // Two statements rather than one with `RETURNING`, which would
        // build a temporary b-tree for its one row.
        self.stmt("UPDATE meta SET value = value + 1 WHERE name = 'next_id'")?
            .execute([])?;
        Ok(self
            .stmt("SELECT value - 1 FROM meta WHERE name = 'next_id'")?
            .query_row([], |r| r.get(0))?)
    }

    /// Records a change of `delta` elements and the flag bits `flags` in
    /// the slot's key row; a key left without elements is deleted.
    pub fn settle(&mut self, slot: &mut Slot<'_>, delta: i64, flags: i64) -> Result<()> {
        let Some(row) = slot.row.as_mut() else {
            return Ok(());
        };
        if slot.unborn {
            slot.unborn = false;
            self.changing(slot.db, slot.key);
            row.count += delta;
            row.flags |= flags;
            if row.count <= 0 && slot.kind != Kind::Stream {
                // Nothing was added: the key never came to be.
                self.touched.gone();
                slot.row = None;
                return Ok(());
            }
            self.stmt(
                "INSERT INTO keys (db, key, type, value, expire_at, id, count)
                 VALUES (?1, ?2, ?3, ?4, NULL, ?5, ?6)",
            )?
            .execute(params![
                slot.db,
                slot.key,
                slot.kind.code(),
                row.flags,
                row.id,
                row.count
            ])?;
            return Ok(());
        }
        if delta == 0 && flags & !row.flags == 0 && row.count > 0 {
            return Ok(());
        }
        self.changing(slot.db, slot.key);
        row.count += delta;
        row.flags |= flags;
        // A stream outlives its last entry (its groups and IDs stay), as
        // in redis; every other type goes with its last element.
        if row.count <= 0 && slot.kind != Kind::Stream {
            // Its elements are all gone already.
            self.touched.gone();
            self.stmt("DELETE FROM keys WHERE db = ?1 AND key = ?2")?
                .execute(params![slot.db, slot.key])?;
            slot.row = None;
        } else {
            self.stmt("UPDATE keys SET count = ?3, value = ?4 WHERE db = ?1 AND key = ?2")?
                .execute(params![slot.db, slot.key, row.count, row.flags])?;
        }
        Ok(())
    }

    /// Deletes a stored row (live or expired) and frees, or queues for
    /// freeing, its elements.
    pub(crate) fn drop_stored(&mut self, db: u32, key: &[u8], stored: &Stored) -> Result<()> {
        self.changing(db, key);
        self.touched.gone();
        self.stmt("DELETE FROM keys WHERE db = ?1 AND key = ?2")?
            .execute(params![db, key])?;
        if let Some(id) = stored.id {
            self.free_elements(id, stored.kind, stored.count)?;
        }
        Ok(())
    }

    /// Frees the elements stored under `id`: now if there are few, else by
    /// the writer's housekeeping, a chunk at a time.
    fn free_elements(&mut self, id: i64, kind: Kind, count: i64) -> Result<()> {
        if count > FREE_INLINE {
            self.stmt("INSERT OR IGNORE INTO dropped (id, type) VALUES (?1, ?2)")?
                .execute(params![id, kind.code()])?;
            return Ok(());
        }
        for sql in elements(kind).map_or(&[][..], |e| e.delete) {
            self.stmt(sql)?.execute([id])?;
        }
        Ok(())
    }

    /// Removes the row and elements stored under the key, live or expired.
    /// Returns the type that was stored.
    pub(crate) fn purge(&mut self, db: u32, key: &[u8]) -> Result<Option<Kind>> {
        let Some(stored) = self.stored(db, key)? else {
            return Ok(None);
        };
        self.drop_stored(db, key, &stored)?;
        Ok(Some(stored.kind))
    }

    /// Before a STORE form replaces a key: removes what is stored there,
    /// live or expired (an expired one is announced as `expired`), and
    /// answers whether a live key was there.
    pub(crate) fn replace(&mut self, db: u32, key: &[u8]) -> Result<bool> {
        let Some(stored) = self.stored(db, key)? else {
            return Ok(false);
        };
        let live = stored.expire_at.is_none_or(|at| at > self.now());
        self.drop_stored(db, key, &stored)?;
        if !live {
            self.dropped_expired(db, key);
        }
        Ok(live)
    }

    /// Takes back the `new` event of a key that replaced a live one (a
    /// STORE over an existing key overwrites it, as redis's `setKey`).
    pub fn not_new(&mut self, db: u32, key: &[u8]) {
        if self.notifying(notify::NEW) {
            let events = self.events_mut();
            let at = events
                .iter()
                .rposition(|e| e.event == "new" && e.db == db && e.key == key);
            if let Some(i) = at {
                events.remove(i);
            }
        }
    }

    /// Deletes a live key of any type (DEL, UNLINK). Returns whether it
    /// existed; a big collection's elements are freed later.
    pub fn delete(&mut self, db: u32, key: &[u8]) -> Result<bool> {
        let Some(stored) = self.stored(db, key)? else {
            return Ok(false);
        };
        let live = stored.expire_at.is_none_or(|at| at > self.now());
        // An expired row is removed too, but does not count as deleted.
        self.drop_stored(db, key, &stored)?;
        if !live {
            self.dropped_expired(db, key);
        }
        Ok(live)
    }

    /// Sets (`Some`) or removes (`None`) a live key's expiry. Returns whether
    /// the key exists. An expiry at or before now deletes the key, as Redis
    /// does.
    pub fn set_expire(&mut self, db: u32, key: &[u8], expire_at: Option<i64>) -> Result<bool> {
        if !self.exists(db, key)? {
            return Ok(false);
        }
        if let Some(at) = expire_at {
            if at <= self.now() {
                self.purge(db, key)?;
                return Ok(true);
            }
        }
        self.changing(db, key);
        self.stmt("UPDATE keys SET expire_at = ?3 WHERE db = ?1 AND key = ?2")?
            .execute(params![db, key, expire_at])?;
        Ok(true)
    }

    /// Moves a live key to a new name in the same database, replacing the
    /// destination (RENAME) or only if it does not exist (RENAMENX, `nx`).
    /// Returns whether the key was moved; errors with `NoSuchKey` when the
    /// source does not exist. Only the key row changes, whatever its size.
    pub fn rename(&mut self, db: u32, from: &[u8], to: &[u8], nx: bool) -> Result<bool> {
        if !self.exists(db, from)? {
            return Err(EngineError::NoSuchKey);
        }
        if from == to {
            return Ok(!nx);
        }
        if nx && self.exists(db, to)? {
            return Ok(false);
        }
        self.changing(db, from);
        self.touched.gone();
        self.purge(db, to)?;
        self.changing(db, to);
        self.stmt("UPDATE keys SET key = ?3 WHERE db = ?1 AND key = ?2")?
            .execute(params![db, from, to])?;
        self.notify(notify::NEW, "new", db, to);
        Ok(true)
    }

    /// Copies a live key, with its expiry, to `to` in `dst_db` (COPY).
    /// Returns false when the source is missing, or the destination exists
    /// and `replace` is not set. A collection's elements are copied under a
    /// new id.
    pub fn copy(
        &mut self,
        db: u32,
        from: &[u8],
        dst_db: u32,
        to: &[u8],
        replace: bool,
    ) -> Result<bool> {
        let Some(entry) = self.entry(db, from)? else {
            return Ok(false);
        };
        if db == dst_db && from == to {
            return Ok(false);
        }
        if self.exists(dst_db, to)? && !replace {
            return Ok(false);
        }
        self.purge(dst_db, to)?;
        self.changing(dst_db, to);
        if entry.kind == Kind::String {
            // A long value (kept in `strings`) gets a copy of its own.
            let src_id: Option<i64> = self
                .stmt("SELECT id FROM keys WHERE db = ?1 AND key = ?2")?
                .query_row(params![db, from], |r| r.get(0))?;
            let id = match src_id {
                None => None,
                Some(src_id) => {
                    let id = self.new_id()?;
                    self.stmt("INSERT INTO strings (id, value) SELECT ?1, value FROM strings WHERE id = ?2")?
                        .execute(params![id, src_id])?;
                    Some(id)
                }
            };
            self.stmt(
                "INSERT INTO keys (db, key, type, value, expire_at, id)
                 SELECT ?3, ?4, type, value, expire_at, ?5 FROM keys WHERE db = ?1 AND key = ?2",
            )?
            .execute(params![db, from, dst_db, to, id])?;
            self.notify(notify::NEW, "new", dst_db, to);
            return Ok(true);
        }
        let Some(src) = self.live(db, from, entry.kind)? else {
            return Ok(false);
        };
        let mut slot = Slot {
            db: dst_db,
            key: to,
            kind: entry.kind,
            row: None,
            unborn: false,
            elide: false,
        };
        let id = self.slot_id(&mut slot)?;
        for sql in elements(entry.kind).map_or(&[][..], |e| e.copy) {
            self.stmt(sql)?.execute(params![src.id, id])?;
        }
        self.settle(&mut slot, src.count, src.flags)?;
        if let Some(at) = src.expire_at {
            self.stmt("UPDATE keys SET expire_at = ?3 WHERE db = ?1 AND key = ?2")?
                .execute(params![dst_db, to, at])?;
        }
        Ok(true)
    }

    /// Moves a live key to another database if it is not there (MOVE).
    /// Only the key row changes.
    pub fn move_key(&mut self, db: u32, key: &[u8], dst_db: u32) -> Result<bool> {
        if db == dst_db || !self.exists(db, key)? || self.exists(dst_db, key)? {
            return Ok(false);
        }
        self.changing(db, key);
        self.touched.gone();
        // An expired row may still sit at the destination.
        self.purge(dst_db, key)?;
        self.changing(dst_db, key);
        self.stmt("UPDATE keys SET db = ?3 WHERE db = ?1 AND key = ?2")?
            .execute(params![db, key, dst_db])?;
        self.notify(notify::NEW, "new", dst_db, key);
        Ok(true)
    }

    /// Before a flush or swap: notes the watched keys of `db` (or of every
    /// database) that exist and so change.
    fn touch_watched_in(&mut self, db: Option<u32>) -> Result<()> {
        for (d, key) in self.watches.keys_in(db) {
            if self.exists(d, &key)? {
                self.changing(d, &key);
            }
        }
        Ok(())
    }

    /// Empties one database (FLUSHDB); the elements of its collections are
    /// freed later.
    pub fn flush_db(&mut self, db: u32) -> Result<()> {
        self.touch_watched_in(Some(db))?;
        self.changing_all();
        self.flushed = true;
        self.whole.push(crate::propagate::Whole::FlushDb(db));
        self.stmt(
            "INSERT OR IGNORE INTO dropped (id, type)
             SELECT id, type FROM keys WHERE db = ?1 AND id IS NOT NULL AND type != 0",
        )?
        .execute([db])?;
        self.stmt("DELETE FROM keys WHERE db = ?1")?.execute([db])?;
        Ok(())
    }

    /// Empties every database (FLUSHALL).
    pub fn flush_all(&mut self) -> Result<()> {
        self.touch_watched_in(None)?;
        self.changing_all();
        self.flushed = true;
        self.whole.push(crate::propagate::Whole::FlushAll);
        self.conn().execute_batch(
            "DELETE FROM strings; DELETE FROM keys; DELETE FROM hashes; DELETE FROM sets;
             DELETE FROM lists; DELETE FROM zsets; DELETE FROM zblocks; DELETE FROM dropped;
             DELETE FROM streams; DELETE FROM stream_meta; DELETE FROM stream_nodes;
             DELETE FROM stream_groups; DELETE FROM stream_consumers; DELETE FROM stream_pel;",
        )?;
        Ok(())
    }

    /// Exchanges two databases (SWAPDB): every key row of one gets the
    /// other's number; elements stay where they are.
    pub fn swap_db(&mut self, a: u32, b: u32) -> Result<()> {
        if a == b {
            return Ok(());
        }
        // Watched keys that exist in either database before or after.
        self.touch_watched_in(Some(a))?;
        self.touch_watched_in(Some(b))?;
        for (d, key) in self.watches.keys_in(Some(a)) {
            if self.exists(b, &key)? {
                self.changing(d, &key);
            }
        }
        for (d, key) in self.watches.keys_in(Some(b)) {
            if self.exists(a, &key)? {
                self.changing(d, &key);
            }
        }
        self.changing_all();
        self.whole.push(crate::propagate::Whole::SwapDb(a, b));
        // Through a number no database has, so no primary key collides.
        self.stmt("UPDATE keys SET db = -1 WHERE db = ?1")?
            .execute([a])?;
        self.stmt("UPDATE keys SET db = ?1 WHERE db = ?2")?
            .execute([a, b])?;
        self.stmt("UPDATE keys SET db = ?1 WHERE db = -1")?
            .execute([b])?;
        Ok(())
    }

    /// Deletes keys whose expiry has passed, oldest expiry first, `limit`
    /// at a time: another round follows while the last one came back full,
    /// up to [`SWEEP_ROUNDS`] rounds; then frees one chunk of the elements
    /// of dropped keys. The writer calls this between groups, so TTL churn
    /// cannot grow the file without bound and a dropped key's elements go
    /// away without holding up any write for long.
    ///
    /// Why rounds: every sweep is a transaction with its own commit (an
    /// fsync under `appendfsync always`), one per pause between groups. At
    /// one chunk of 256 per sweep that was about 10,500 deletions a second
    /// on the test VM, against 16,800 `SET ... EX 1` a second of TTL
    /// churn: expired rows piled up and the file and WAL grew for as long
    /// as the churn lasted (docs/durability.md). Rounds that continue only
    /// while a backlog exists make the sweep keep pace, in the manner of
    /// Redis's active expiry (which goes on while more than a quarter of
    /// its sample was expired), and cost nothing extra when there is none.
    pub(crate) fn expire_due(&mut self, limit: usize) -> Result<Sweep> {
        let mut expired = 0;
        for _ in 0..SWEEP_ROUNDS {
            let due: Vec<(u32, Vec<u8>)> = {
                let mut stmt = self.stmt(
                    "SELECT db, key FROM keys
                     WHERE expire_at IS NOT NULL AND expire_at <= ?1
                     ORDER BY expire_at LIMIT ?2",
                )?;
                let rows = stmt.query_map(params![self.now(), limit as i64], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })?;
                rows.collect::<std::result::Result<_, _>>()?
            };
            for (db, key) in &due {
                self.purge(*db, key)?;
                self.notify(notify::EXPIRED, "expired", *db, key);
            }
            expired += due.len();
            if due.len() < limit {
                break;
            }
        }
        let freed = self.free_dropped(FREE_CHUNK)?;
        Ok(Sweep {
            expired,
            more_to_free: freed >= FREE_CHUNK,
        })
    }

    /// Deletes each key in `found` that is still expired (a key a read
    /// found expired, which a write may have replaced since, or the sweep
    /// deleted), and puts its `expired` event into `events` at the place
    /// given with it (redis's `expireIfNeeded` on a read's lookup). Returns
    /// how many it deleted.
    pub(crate) fn expire_reported(
        &mut self,
        found: Vec<(usize, u32, bytes::Bytes)>,
        events: &mut Vec<notify::Event>,
    ) -> Result<usize> {
        let mut n = 0;
        // Last first, so that the places of the earlier ones still hold.
        for (at, db, key) in found.into_iter().rev() {
            let Some(stored) = self.stored(db, &key)? else {
                continue;
            };
            if stored.expire_at.is_none_or(|t| t > self.now()) {
                continue;
            }
            self.drop_stored(db, &key, &stored)?;
            n += 1;
            if self.notifying(notify::EXPIRED) {
                events.insert(
                    at.min(events.len()),
                    notify::Event {
                        class: notify::EXPIRED,
                        event: "expired",
                        db,
                        key,
                    },
                );
            }
        }
        Ok(n)
    }

    /// Deletes up to `limit` element rows of dropped keys. Returns how many.
    pub(crate) fn free_dropped(&mut self, limit: i64) -> Result<i64> {
        let mut freed = 0;
        while freed < limit {
            let next = self
                .stmt("SELECT id, type FROM dropped LIMIT 1")?
                .query_row([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))
                .optional()?;
            let Some((id, code)) = next else {
                break;
            };
            self.changes += 1;
            let room = limit - freed;
            let mut n = 0;
            for sql in elements(Kind::from_code(code)?).map_or(&[][..], |e| e.free_chunk) {
                if n < room {
                    n += self.stmt(sql)?.execute(params![id, room - n])? as i64;
                }
            }
            freed += n;
            if n < room {
                self.stmt("DELETE FROM dropped WHERE id = ?1")?
                    .execute([id])?;
            }
        }
        Ok(freed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_any_number_is_a_position() {
        for key in [&b"a"[..], b"user:1234567", b"\x00\x00", b"abcdefg"] {
            let c = encode_cursor(key);
            assert_ne!(c, 0);
            assert_eq!(decode_cursor(c), cursor_prefix(key));
        }
        assert_eq!(decode_cursor(17), b"");
        assert_eq!(decode_cursor(u64::MAX).len(), 7);
    }
}

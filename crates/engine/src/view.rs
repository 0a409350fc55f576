//! Read access to the keyspace at one instant.
//!
//! A [`View`] is a connection plus a clock reading. Every read hides expired
//! keys (`expire_at <= now`), so an expired key is invisible to every command
//! whether or not the writer has deleted its row yet. The read pool hands a
//! `View` over a read-only connection to read commands; the writer hands a
//! [`crate::Txn`], which dereferences to a `View` over the writer's
//! connection, to write commands, so a command that reads before it writes
//! uses exactly the same reads.
//!
//! The reads themselves live with their type: key-level reads (TYPE, TTL,
//! SCAN, DBSIZE) in `keyspace.rs`, string reads in `string.rs`, hash and set
//! reads in `hash.rs` and `set.rs`. This file holds what they share.

use std::cell::Cell;

use crate::access::Access;
use crate::cache::ValueCache;
use crate::stmt_cache::{CachedStmt, Statements};

/// Read access to the keyspace at one instant.
pub struct View<'s, 'c> {
    pub(crate) stmts: &'s Statements<'c>,
    pub(crate) now: i64,
    /// On a read-pool view: the value cache, and its sequence number taken
    /// before this view's first read, for [`View::get_string_shared`] to
    /// fill it. `None` on the writer's view, whose reads include
    /// uncommitted writes.
    pub(crate) fill: Option<(&'s ValueCache, u64)>,
    /// On a read-pool view: the access table its key lookups count hits
    /// and misses in and touch (see `access.rs`). `None` on the writer's
    /// view: a write's keys are noted once it commits.
    access: Option<&'s Access>,
    /// Whether a lookup of an existing key counts as an access: off for
    /// redis's `LOOKUP_NOTOUCH` commands (TYPE, TTL...) and for a client
    /// in CLIENT NO-TOUCH mode. Set by the command before it reads.
    touch: Cell<bool>,
}

/// The current wall-clock time in Unix milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl<'s, 'c> View<'s, 'c> {
    /// A view over `conn` whose clock reads `now` (Unix milliseconds).
    pub(crate) fn at(stmts: &'s Statements<'c>, now: i64) -> Self {
        View {
            stmts,
            now,
            fill: None,
            access: None,
            touch: Cell::new(true),
        }
    }

    /// A read-pool view that offers the strings it reads to `cache`
    /// (`since` is [`ValueCache::read_started`], taken before any read)
    /// and notes its lookups in `access`.
    pub(crate) fn filling(
        stmts: &'s Statements<'c>,
        cache: &'s ValueCache,
        since: u64,
        access: &'s Access,
    ) -> Self {
        View {
            stmts,
            now: now_ms(),
            fill: Some((cache, since)),
            access: Some(access),
            touch: Cell::new(true),
        }
    }

    /// Whether this view's lookups of existing keys count as accesses
    /// from now on (see the field).
    pub fn set_touch(&self, on: bool) {
        self.touch.set(on);
    }

    /// Notes a read command's lookup of a key, `found` or not: redis's
    /// keyspace hit or miss, and an access (see `access.rs`).
    pub(crate) fn seen(&self, db: u32, key: &[u8], found: bool) {
        if let Some(access) = self.access {
            access.read(db, key, found, self.touch.get());
        }
    }

    /// A cached statement for fixed SQL.
    pub(crate) fn stmt(&self, sql: &'static str) -> rusqlite::Result<CachedStmt<'s, 'c>> {
        self.stmts.get(sql)
    }

    /// The clock reading this view judges expiry by (Unix milliseconds).
    pub fn now(&self) -> i64 {
        self.now
    }
}

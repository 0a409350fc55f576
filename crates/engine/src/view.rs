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
}

/// The current wall-clock time in Unix milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl<'s, 'c> View<'s, 'c> {
    /// A view over `conn` at the current time.
    pub(crate) fn new(stmts: &'s Statements<'c>) -> Self {
        View {
            stmts,
            now: now_ms(),
            fill: None,
        }
    }

    /// A read-pool view that offers the strings it reads to `cache`;
    /// `since` is [`ValueCache::read_started`], taken before any read.
    pub(crate) fn filling(stmts: &'s Statements<'c>, cache: &'s ValueCache, since: u64) -> Self {
        View {
            stmts,
            now: now_ms(),
            fill: Some((cache, since)),
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

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
//!
//! ## What a read command's lookup announces
//!
//! redis's `lookupKeyRead` does two things a keyspace subscriber hears of:
//! a lookup that finds the key expired deletes it and publishes `expired`
//! (lazy expiry), and a lookup that finds nothing publishes `keymiss`. A
//! view notes both in the order the command met them ([`View::seen`]):
//! `keymiss` while someone listens for it (the mask it was given), an
//! expired key while someone would hear of its deletion (`expired` events,
//! a CLIENT TRACKING client) or the sweep is off (see
//! `Notifier::lazy_expiry`; otherwise the sweep deletes it within its
//! period), so with none of those a miss costs nothing more. A read on the
//! read pool cannot delete anything: its view reports the keys it found
//! expired, with its events, once the job is over
//! ([`View::hand_on`]), and the writer deletes each one that is still
//! expired, puts its `expired` event where the read met it, and publishes
//! the lot after its commit (`Writer::expire_reported`); a read without
//! such a key publishes its `keymiss` events at once. A read command run
//! on the writer (inside EXEC, or called by a script) notes them among
//! the operation's own events, and the writer deletes the keys it found
//! expired in the same transaction (`Writer::run_op`).

use std::cell::{Cell, RefCell};

use bytes::Bytes;

use crate::notify::{Event, KEY_MISS};

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
    /// The keyspace event classes wanted (0: none; see `notify.rs`).
    pub(crate) notify: u32,
    /// Whether a read command is running on this view, so that its
    /// lookups announce misses and expired keys (a write command's own
    /// lookups do not, as redis's `lookupKeyWrite`). Always on for a
    /// read-pool view.
    reading: Cell<bool>,
    /// The keyspace events noted so far, in order: on the writer's view,
    /// the operation's (see [`crate::Txn::notify`]); on a read-pool view,
    /// the job's `keymiss` events.
    pub(crate) events: RefCell<Vec<Event>>,
    /// Whether a read's lookup that misses looks for an expired row to
    /// delete (see `Notifier::lazy_expiry`).
    pub(crate) find_expired: bool,
    /// The keys read lookups found expired but not yet deleted, each with
    /// the place in `events` where its `expired` event belongs.
    pub(crate) found_expired: RefCell<Vec<(usize, u32, Bytes)>>,
    /// Where a read-pool view hands its events and expired keys on.
    notifier: Option<&'s crate::notify::Notifier>,
    /// The client whose read runs on a read-pool view (0: none known), for
    /// CLIENT TRACKING (see `notify::Change::Expired`).
    origin: Cell<u64>,
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
            notify: 0,
            find_expired: false,
            reading: Cell::new(false),
            events: RefCell::new(Vec::new()),
            found_expired: RefCell::new(Vec::new()),
            notifier: None,
            origin: Cell::new(0),
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
        let notifier = access.notifier();
        let notify = notifier.map_or(0, |n| n.mask());
        View {
            stmts,
            now: now_ms(),
            fill: Some((cache, since)),
            access: Some(access),
            touch: Cell::new(true),
            notify,
            find_expired: notifier.is_some_and(|n| n.lazy_expiry(notify)),
            reading: Cell::new(true),
            events: RefCell::new(Vec::new()),
            found_expired: RefCell::new(Vec::new()),
            notifier,
            origin: Cell::new(0),
        }
    }

    /// Whether this view's lookups of existing keys count as accesses
    /// from now on (see the field).
    pub fn set_touch(&self, on: bool) {
        self.touch.set(on);
    }

    /// Names the client whose read runs on this view (the server sets it
    /// before the read).
    pub fn set_origin(&self, client: u64) {
        self.origin.set(client);
    }

    /// Runs `read`, a read command, on this view: its lookups count as
    /// accesses when `touch` says so, and announce misses and expired keys
    /// (see the module docs), also when the view is the writer's.
    pub fn read_command<T>(&self, touch: bool, read: impl FnOnce() -> T) -> T {
        self.touch.set(touch);
        let was = self.reading.replace(true);
        let out = read();
        self.reading.set(was);
        out
    }

    /// Notes a read command's lookup of a key, `found` or not: redis's
    /// keyspace hit or miss, and an access (see `access.rs`); a miss is
    /// announced as the module docs say.
    pub(crate) fn seen(&self, db: u32, key: &[u8], found: bool) {
        if let Some(access) = self.access {
            access.read(db, key, found, self.touch.get());
        }
        if found || (self.notify & KEY_MISS == 0 && !self.find_expired) || !self.reading.get() {
            return;
        }
        self.missed(db, key);
    }

    /// A read command's lookup found no live key: if a row is there,
    /// expired, its deletion is due (and its `expired` event), then the
    /// `keymiss` event.
    #[cold]
    fn missed(&self, db: u32, key: &[u8]) {
        if self.find_expired {
            let expired = self
                .stmt(
                    "SELECT 1 FROM keys
                     WHERE db = ?1 AND key = ?2 AND expire_at IS NOT NULL AND expire_at <= ?3",
                )
                .and_then(|mut stmt| stmt.exists(rusqlite::params![db, key, self.now]));
            // A failed look is a lookup that found nothing expired: the
            // sweep deletes the key (and announces it) in its time.
            if expired.unwrap_or(false) {
                let at = self.events.borrow().len();
                self.found_expired
                    .borrow_mut()
                    .push((at, db, Bytes::copy_from_slice(key)));
            }
        }
        if self.notify & KEY_MISS != 0 {
            self.events.borrow_mut().push(Event {
                class: KEY_MISS,
                event: "keymiss",
                db,
                key: Bytes::copy_from_slice(key),
            });
        }
    }

    /// On a read-pool view, once its job is over: publishes the job's
    /// `keymiss` events and gives its result back, or, when a lookup found
    /// a key expired, hands the keys, the events and the result to the
    /// writer, which deletes the keys, publishes everything after its
    /// commit, then hands the result back (see the module docs).
    pub(crate) fn hand_on(
        &self,
        done: Option<crate::completion::ReadDone>,
    ) -> Option<crate::completion::ReadDone> {
        let Some(notifier) = self.notifier else {
            return done;
        };
        let events = self.events.take();
        let expired = self.found_expired.take();
        if expired.is_empty() {
            notifier.publish(events);
            return done;
        }
        notifier.report_expired(crate::notify::Found {
            events,
            expired,
            reader: self.origin.get(),
            done,
        });
        None
    }

    /// A cached statement for fixed SQL.
    pub(crate) fn stmt(&self, sql: &'static str) -> rusqlite::Result<CachedStmt<'s, 'c>> {
        self.stmts.get(sql)
    }

    /// The clock reading this view judges expiry by (Unix milliseconds).
    pub fn now(&self) -> i64 {
        self.now
    }

    /// A view of the same connection whose clock stands before every
    /// expiry time: it still sees a key past its expiry whose row is not
    /// deleted yet, as redis's lookups straight in its dictionary do
    /// (DEBUG OBJECT). Its reads note nothing: no access, no keyspace hit
    /// or miss, no event, no value offered to the cache.
    pub fn ignoring_expiry(&self) -> View<'s, 'c> {
        View::at(self.stmts, i64::MIN)
    }
}

//! Write access to the keyspace, run by the writer thread inside a group's
//! transaction.
//!
//! A [`Txn`] is only ever seen inside a write operation's closure, inside
//! the group's open transaction. Commands check everything that can make
//! them fail (wrong type, not an integer, overflow, missing key) *before*
//! their first write, so a failing command has changed nothing and the rest
//! of its group commits. The `Txn` records whether the operation wrote: if
//! an operation fails after writing (only a storage error can do that), the
//! writer rolls the whole transaction back and answers every operation in it
//! with an error, as for a failed commit. Either way nothing half-applied is
//! ever committed, and no per-command savepoint is paid for on the hot path
//! (a savepoint and its release were a sixth of the writer's time).
//!
//! Every change goes through [`Txn::changing`], which marks the operation
//! as written and records the key in its [`Touched`] list; the writer uses
//! that list to drop those keys from the value cache just before it commits
//! (see `cache.rs`) and to tell WATCH that they changed (see `watch.rs`).
//! The write operations themselves live with their type (`keyspace.rs`
//! holds the gate every collection write goes through, `string.rs`,
//! `hash.rs`, `set.rs`).
//!
//! Writes treat an expired row exactly like a missing key: they overwrite it
//! (clearing its old expiry and its elements), never revive it.

use std::ops::Deref;

use rusqlite::Connection;

use crate::cache::Touched;
use crate::stmt_cache::Statements;
use crate::view::View;
use crate::watch::Watches;

/// Write access to the keyspace inside the current group.
pub struct Txn<'s, 'c> {
    view: View<'s, 'c>,
    /// Counted up by every write before it changes anything.
    pub(crate) changes: u64,
    /// The keys this operation changed.
    pub(crate) touched: Touched,
    /// The WATCH registry, for the flushes (see `keyspace.rs`).
    pub(crate) watches: &'s Watches,
    /// The encoding thresholds (see `encoding.rs`).
    pub(crate) thresholds: &'s crate::encoding::Thresholds,
    /// The client whose command this is (0: the server's own work), for
    /// CLIENT TRACKING's NOLOOP: the server sets it before running it.
    pub origin: u64,
    /// FLUSHDB or FLUSHALL ran in this operation (CLIENT TRACKING then
    /// invalidates every key instead of the keys touched).
    pub(crate) flushed: bool,
    /// Its changes that name no key, for replication (see `propagate.rs`).
    pub(crate) whole: Vec<crate::propagate::Whole>,
    /// A client tracks keys (see [`Txn::order_seen`]).
    tracking: bool,
    /// Reads whose keys CLIENT TRACKING remembers, each at its place in
    /// `touched` (see [`Txn::remember`]).
    pub(crate) remembers: Vec<(usize, u64, Vec<bytes::Bytes>)>,
    /// Replicas are fed: commands note what they did (see `propagate.rs`).
    pub(crate) propagating: bool,
    /// The commands noted for replication, each over its keys in `touched`.
    pub(crate) steps: Vec<crate::propagate::Step>,
    /// Expired rows a write dropped before treating the key as new (a
    /// replica, which does not expire keys itself, is sent a DEL first).
    pub(crate) expired_dropped: Vec<(u32, bytes::Bytes)>,
}

impl<'s, 'c> Deref for Txn<'s, 'c> {
    type Target = View<'s, 'c>;
    fn deref(&self) -> &View<'s, 'c> {
        &self.view
    }
}

impl<'s, 'c> Txn<'s, 'c> {
    /// A `Txn` whose clock reads the time now: the moment the operation
    /// runs, which relative expiries count from.
    pub(crate) fn new(
        stmts: &'s Statements<'c>,
        watches: &'s Watches,
        thresholds: &'s crate::encoding::Thresholds,
    ) -> Self {
        Txn {
            view: View::at(stmts, crate::view::now_ms()),
            changes: 0,
            touched: Touched::default(),
            watches,
            thresholds,
            origin: 0,
            flushed: false,
            whole: Vec::new(),
            tracking: false,
            remembers: Vec::new(),
            propagating: false,
            steps: Vec::new(),
            expired_dropped: Vec::new(),
        }
    }

    /// Whether replicas are fed, so that a command should say what it did
    /// ([`Txn::note_step`]).
    pub fn propagating(&self) -> bool {
        self.propagating
    }

    /// Where the next command's changes start (see [`Txn::note_step`]).
    pub fn step_mark(&self) -> crate::propagate::StepMark {
        crate::propagate::StepMark {
            keys: self.touched.keys().len(),
            whole: self.whole.len(),
            expired: self.expired_dropped.len(),
            changes: self.changes,
        }
    }

    /// Whether anything changed since `mark`.
    pub fn changed_since(&self, mark: crate::propagate::StepMark) -> bool {
        self.changes != mark.changes
            || self.touched.keys().len() != mark.keys
            || self.whole.len() != mark.whole
    }

    /// The keys changed since `mark`, in order (repeats possible).
    pub fn keys_since(&self, mark: crate::propagate::StepMark) -> &[(u32, bytes::Bytes)] {
        &self.touched.keys()[mark.keys.min(self.touched.keys().len())..]
    }

    /// The expired rows writes dropped since `mark` (each key a replica
    /// must first see deleted).
    pub fn expired_since(&self, mark: crate::propagate::StepMark) -> &[(u32, bytes::Bytes)] {
        &self.expired_dropped[mark.expired.min(self.expired_dropped.len())..]
    }

    /// Notes the commands that reproduce, on a replica, what was done
    /// since `mark`: they stand for the keys changed since then, and for
    /// the wholesale changes (FLUSHALL...) made since.
    pub fn note_step(
        &mut self,
        mark: crate::propagate::StepMark,
        commands: Vec<crate::propagate::Command>,
    ) {
        self.whole.truncate(mark.whole);
        self.steps.push(crate::propagate::Step {
            keys: mark.keys..self.touched.keys().len(),
            commands,
            alone: false,
        });
    }

    /// The noted steps, their key ranges moved up by `base` (where this
    /// operation's keys start in the transaction's), for the writer.
    pub(crate) fn take_steps(&mut self, base: usize) -> Vec<crate::propagate::Step> {
        let mut steps = std::mem::take(&mut self.steps);
        for s in &mut steps {
            s.keys = s.keys.start + base..s.keys.end + base;
        }
        steps
    }

    /// Notes that a write dropped the key's expired row (its `expired`
    /// event, and the DEL a replica needs before the write).
    pub(crate) fn dropped_expired(&mut self, db: u32, key: &[u8]) {
        self.notify(crate::notify::EXPIRED, "expired", db, key);
        if self.propagating {
            self.expired_dropped
                .push((db, bytes::Bytes::copy_from_slice(key)));
        }
    }

    /// Whether events of `class` are wanted: a command whose event needs
    /// work to find out (a lookup) asks first.
    pub fn notifying(&self, class: u32) -> bool {
        self.view.notify & class != 0
    }

    /// Notes a keyspace event (redis's `notifyKeyspaceEvent`), published
    /// once the group commits; nothing at all when its class is not wanted.
    pub fn notify(&mut self, class: u32, event: &'static str, db: u32, key: &[u8]) {
        if self.view.notify & class != 0 {
            self.view.events.get_mut().push(crate::notify::Event {
                class,
                event,
                db,
                key: bytes::Bytes::copy_from_slice(key),
            });
        }
    }

    /// The events this operation produced, for the writer.
    pub(crate) fn take_events(&mut self) -> Vec<crate::notify::Event> {
        std::mem::take(self.view.events.get_mut())
    }

    /// The events noted so far, to take one back (see `Txn::not_new`).
    pub(crate) fn events_mut(&mut self) -> &mut Vec<crate::notify::Event> {
        self.view.events.get_mut()
    }

    /// Sets the keyspace event classes wanted (see `notify.rs`), whether
    /// read commands' lookups look for expired keys (see `view.rs`), and
    /// whether a client tracks keys.
    pub(crate) fn set_notify(&mut self, mask: u32, find_expired: bool, tracking: bool) {
        self.view.notify = mask;
        self.view.find_expired = find_expired;
        self.tracking = tracking;
    }

    /// Notes that `client` read `keys` here, among this operation's
    /// changes, for CLIENT TRACKING (`notify::Change::Remember`): only
    /// while a client tracks keys.
    pub fn remember(&mut self, client: u64, keys: Vec<bytes::Bytes>) {
        if self.tracking {
            self.remembers
                .push((self.touched.keys().len(), client, keys));
        }
    }

    /// Whether the order in which this operation changes keys can be seen
    /// outside: keyspace events are wanted, or a client tracks keys
    /// (CLIENT TRACKING hears of them in that order). A command that would
    /// rather write its keys in another order (MSET, in key order) keeps
    /// redis's order then.
    pub fn order_seen(&self) -> bool {
        self.view.notify != 0 || self.tracking
    }

    /// Whether this operation's read commands found a key expired.
    pub(crate) fn view_found_expired(&self) -> bool {
        !self.view.found_expired.borrow().is_empty()
    }

    /// Deletes the keys this operation's read commands found expired, if
    /// they still are, each `expired` event going where the read met the
    /// key (redis's lazy expiry; see `view.rs`). Returns how many it
    /// deleted.
    pub(crate) fn expire_found(&mut self) -> crate::Result<usize> {
        let found = std::mem::take(self.view.found_expired.get_mut());
        let mut events = self.take_events();
        let n = self.expire_reported(found, &mut events);
        *self.view.events.get_mut() = events;
        n
    }

    /// The keys this operation changed, for the writer.
    pub(crate) fn take_touched(&mut self) -> Touched {
        std::mem::take(&mut self.touched)
    }

    /// Notes, before it happens, that the key's row or elements change:
    /// the operation has written (a failure now rolls back its group), the
    /// value cache must forget the key, and WATCH must see it.
    pub(crate) fn changing(&mut self, db: u32, key: &[u8]) {
        self.changes += 1;
        self.touched.key(db, key);
    }

    /// Notes that any key may change (FLUSHDB, FLUSHALL, SWAPDB).
    pub(crate) fn changing_all(&mut self) {
        self.changes += 1;
        self.touched.all();
    }

    /// Whether this operation has started changing the database.
    pub fn wrote(&self) -> bool {
        self.changes > 0
    }

    /// How many changes this operation has noted so far. The commands of
    /// one EXEC share an operation, so a command there compares this
    /// before and after itself to know whether *it* wrote (an error before
    /// its first write is its own reply, not a reason to roll back).
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// A read transaction on a new connection, pinned to the last commit:
    /// the state before the open group (see `propagate.rs`).
    pub fn pin_read(&self) -> crate::Result<crate::propagate::PinnedRead> {
        let path = self.conn().path().unwrap_or_default().to_owned();
        crate::propagate::PinnedRead::open(std::path::Path::new(&path))
    }

    /// For batches of fixed SQL run once (FLUSHALL). A list waiting in
    /// memory is written first, as before any statement (a failure is
    /// kept for the writer: see `elide.rs`).
    pub(crate) fn conn(&self) -> &'c Connection {
        let _ = self.view.stmts.write_elided();
        self.view.stmts.conn()
    }
}

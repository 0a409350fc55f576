//! Keyspace notifications: the events a write produces, gathered while it
//! runs and handed on only once its transaction has committed.
//!
//! Redis publishes an event the moment a command changes a key
//! (`notifyKeyspaceEvent`). Here a command runs inside a group's
//! transaction, which may still roll back, so a command notes its events
//! on its [`crate::Txn`] ([`crate::Txn::notify`]) in the order it makes its
//! changes; the writer collects them across the group, in the order it
//! applied the commands, drops those of a group that did not commit, and
//! hands the rest to the [`Notifier`]'s sink right after the commit and
//! before any of the group's replies go out. The sink (the server's pub/sub
//! registry) turns each into the `__keyspace@<db>__:<key>` and
//! `__keyevent@<db>__:<event>` messages. Messages never touch SQLite.
//!
//! The classes are redis's bits (`NOTIFY_*` in redis's `server.h`), so the
//! flags `notify-keyspace-events` parses to are the same number.
//!
//! Cost: the writer gives each operation's `Txn` a mask, the configured
//! classes when notifications are on and someone may be listening, else 0;
//! [`crate::Txn::notify`] tests the mask before anything else, so with
//! notifications off (or nobody subscribed) a write formats and allocates
//! nothing for them. An event produced while nobody is subscribed would
//! reach nobody in redis either.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;

/// `K`: publish on `__keyspace@<db>__:<key>`.
pub const KEYSPACE: u32 = 1 << 0;
/// `E`: publish on `__keyevent@<db>__:<event>`.
pub const KEYEVENT: u32 = 1 << 1;
/// `g`: generic commands (DEL, EXPIRE, RENAME, ...).
pub const GENERIC: u32 = 1 << 2;
/// `$`: string commands.
pub const STRING: u32 = 1 << 3;
/// `l`: list commands.
pub const LIST: u32 = 1 << 4;
/// `s`: set commands.
pub const SET: u32 = 1 << 5;
/// `h`: hash commands.
pub const HASH: u32 = 1 << 6;
/// `z`: sorted set commands.
pub const ZSET: u32 = 1 << 7;
/// `x`: a key removed because it expired.
pub const EXPIRED: u32 = 1 << 8;
/// `e`: a key evicted for `maxmemory`.
pub const EVICTED: u32 = 1 << 9;
/// `t`: stream commands.
pub const STREAM: u32 = 1 << 10;
/// `m`: a read of a missing key (not part of `A`).
pub const KEY_MISS: u32 = 1 << 11;
/// `d`: module events (there are no modules; parsed and shown only).
pub const MODULE: u32 = 1 << 13;
/// `n`: a key created (not part of `A`).
pub const NEW: u32 = 1 << 14;
/// `A`: `g$lshzxetd`.
pub const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// Parses redis's class letters (`keyspaceEventsStringToFlags`); `None` for
/// a character that names no class.
pub fn parse_classes(text: &str) -> Option<u32> {
    let mut flags = 0;
    for c in text.chars() {
        flags |= match c {
            'A' => ALL,
            'g' => GENERIC,
            '$' => STRING,
            'l' => LIST,
            's' => SET,
            'h' => HASH,
            'z' => ZSET,
            'x' => EXPIRED,
            'e' => EVICTED,
            'K' => KEYSPACE,
            'E' => KEYEVENT,
            't' => STREAM,
            'm' => KEY_MISS,
            'd' => MODULE,
            'n' => NEW,
            _ => return None,
        };
    }
    Some(flags)
}

/// The letters of `flags` as redis shows them (`keyspaceEventsFlagsToString`):
/// `A` standing for all its classes (and then hiding `n`), then `K`, `E`, `m`.
pub fn format_classes(flags: u32) -> String {
    let mut out = String::new();
    if flags & ALL == ALL {
        out.push('A');
    } else {
        for (bit, c) in [
            (GENERIC, 'g'),
            (STRING, '$'),
            (LIST, 'l'),
            (SET, 's'),
            (HASH, 'h'),
            (ZSET, 'z'),
            (EXPIRED, 'x'),
            (EVICTED, 'e'),
            (STREAM, 't'),
            (MODULE, 'd'),
            (NEW, 'n'),
        ] {
            if flags & bit != 0 {
                out.push(c);
            }
        }
    }
    for (bit, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if flags & bit != 0 {
            out.push(c);
        }
    }
    out
}

/// One keyspace event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Its class (one of the constants above).
    pub class: u32,
    /// The event's name (`set`, `del`, `expired`, ...).
    pub event: &'static str,
    /// The database of the key.
    pub db: u32,
    /// The key.
    pub key: Bytes,
}

/// Receives the events of each committed group, in order.
pub type Sink = Box<dyn Fn(Vec<Event>) + Send + Sync>;

/// A change client-side caching must hear of (redis's `signalModifiedKey`
/// and `signalFlushedDb`), once its transaction has committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A key was modified (or deleted, expired, evicted) by the client
    /// `origin` (0: by the server itself). Tracking ignores databases, as
    /// redis does.
    Key {
        /// The client whose command changed it (for NOLOOP).
        origin: u64,
        /// The key.
        key: Bytes,
    },
    /// A key deleted because a read command of the client `reader` found
    /// it expired (redis's lazy expiry): a change by the server (NOLOOP
    /// hides it from nobody), except that the reader itself is not told
    /// and stays registered, as in redis, which deletes the key before the
    /// read and remembers the read's keys after it (the read's reply shows
    /// the key gone).
    Expired {
        /// The client whose read found it expired.
        reader: u64,
        /// The key.
        key: Bytes,
    },
    /// A read the transaction ran for `client` (inside EXEC): CLIENT
    /// TRACKING remembers its keys here, after the changes before it and
    /// before those after it, as redis remembers a read's keys when it
    /// has run.
    Remember {
        /// The client that read.
        client: u64,
        /// The keys it read.
        keys: Vec<Bytes>,
    },
    /// FLUSHDB or FLUSHALL by the client `origin`: every key is invalid.
    Flush {
        /// The client whose command flushed.
        origin: u64,
    },
}

/// Receives the changes of each committed group, in order.
pub type ChangeSink = Box<dyn Fn(Vec<Change>) + Send + Sync>;

/// What one read on the read pool met that the writer must finish: keys
/// its lookups found expired, which only the writer can delete, and the
/// read's keyspace events (its `keymiss`es), which follow the deletions.
pub(crate) struct Found {
    /// The read's events, in order.
    pub(crate) events: Vec<Event>,
    /// Each key found expired, with the place in `events` where its
    /// `expired` event belongs.
    pub(crate) expired: Vec<(usize, u32, Bytes)>,
    /// The client whose read it is (0: none known).
    pub(crate) reader: u64,
    /// The read's result, handed back once the events are out: as in
    /// redis, whoever reads next sees the key gone and hears of it first.
    pub(crate) done: Option<crate::completion::ReadDone>,
}

/// Takes a read's [`Found`] to the writer.
pub(crate) type FoundSink = Box<dyn Fn(Found) + Send + Sync>;

/// The notification settings the writer reads, and where events go.
#[derive(Default)]
pub struct Notifier {
    /// The configured classes (`notify-keyspace-events`).
    flags: AtomicU32,
    /// Whether anyone may be listening (a pattern, or a channel that could
    /// be an event's, is subscribed): the server keeps it.
    listening: AtomicBool,
    sink: OnceLock<Sink>,
    /// Whether some client tracks keys (CLIENT TRACKING): only then does
    /// the writer gather [`Change`]s.
    tracking: AtomicBool,
    change_sink: OnceLock<ChangeSink>,
    /// Where a read's expired keys go: the writer's queue.
    found_sink: OnceLock<FoundSink>,
    /// The active sweep is off (DEBUG SET-ACTIVE-EXPIRE 0).
    sweep_off: AtomicBool,
}

impl Notifier {
    /// A notifier with nothing configured.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Sets the classes (CONFIG SET notify-keyspace-events).
    pub fn set_flags(&self, flags: u32) {
        self.flags.store(flags, Ordering::Relaxed);
    }

    /// The classes configured.
    pub fn flags(&self) -> u32 {
        self.flags.load(Ordering::Relaxed)
    }

    /// Tells whether any subscriber could receive an event.
    pub fn set_listening(&self, on: bool) {
        self.listening.store(on, Ordering::Relaxed);
    }

    /// Installs where committed events go (once; later calls are ignored).
    pub fn set_sink(&self, sink: Sink) {
        let _ = self.sink.set(sink);
    }

    /// The mask a write's `Txn` gets: the classes wanted now, or 0 when
    /// nothing would be published (no K nor E, nobody listening, no sink).
    pub(crate) fn mask(&self) -> u32 {
        let flags = self.flags();
        if flags & (KEYSPACE | KEYEVENT) == 0
            || !self.listening.load(Ordering::Relaxed)
            || self.sink.get().is_none()
        {
            return 0;
        }
        flags
    }

    /// Tells whether any client tracks keys.
    pub fn set_tracking(&self, on: bool) {
        self.tracking.store(on, Ordering::SeqCst);
    }

    /// Installs where committed changes go (once).
    pub fn set_change_sink(&self, sink: ChangeSink) {
        let _ = self.change_sink.set(sink);
    }

    /// Whether the writer should gather changes.
    pub(crate) fn tracking(&self) -> bool {
        self.tracking.load(Ordering::SeqCst) && self.change_sink.get().is_some()
    }

    /// Hands a committed group's changes on.
    pub(crate) fn publish_changes(&self, changes: Vec<Change>) {
        if changes.is_empty() {
            return;
        }
        if let Some(sink) = self.change_sink.get() {
            let call = std::panic::AssertUnwindSafe(|| sink(changes));
            if let Err(payload) = std::panic::catch_unwind(call) {
                tracing::error!(panic = %crate::panic_message(&*payload), "invalidating tracked keys panicked");
            }
        }
    }

    /// Tells whether the active expiry sweep is off.
    pub(crate) fn set_sweep_off(&self, off: bool) {
        self.sweep_off.store(off, Ordering::Relaxed);
    }

    /// Whether a read command's lookup that finds a key expired has it
    /// deleted at once (redis's lazy expiry), given the event mask: while
    /// someone would hear of it (`expired` events, a CLIENT TRACKING
    /// client) or the sweep is off. Otherwise the sweep deletes it within
    /// its period, and reads spare the look for an expired row.
    pub(crate) fn lazy_expiry(&self, mask: u32) -> bool {
        mask & EXPIRED != 0 || self.tracking() || self.sweep_off.load(Ordering::Relaxed)
    }

    /// Installs where the keys reads found expired go (the writer's queue;
    /// once).
    pub(crate) fn set_found_sink(&self, sink: FoundSink) {
        let _ = self.found_sink.set(sink);
    }

    /// Hands a read's expired keys and events to the writer (see
    /// [`Found`]); without a writer (a read replica), publishes the events.
    pub(crate) fn report_expired(&self, found: Found) {
        match self.found_sink.get() {
            Some(sink) => sink(found),
            None => {
                self.publish(found.events);
                if let Some(done) = found.done {
                    crate::completion::complete_read(done);
                }
            }
        }
    }

    /// Hands a committed group's events on.
    pub(crate) fn publish(&self, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        if let Some(sink) = self.sink.get() {
            let call = std::panic::AssertUnwindSafe(|| sink(events));
            if let Err(payload) = std::panic::catch_unwind(call) {
                tracing::error!(panic = %crate::panic_message(&*payload), "publishing keyspace events panicked");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letters_round_trip_as_redis_shows_them() {
        let show = |s: &str| format_classes(parse_classes(s).unwrap());
        assert_eq!(show("KEA"), "AKE");
        assert_eq!(show("gKE"), "gKE");
        assert_eq!(show("$lshzxeKE"), "$lshzxeKE");
        assert_eq!(show("KA"), "AK");
        assert_eq!(show("EA"), "AE");
        assert_eq!(show("An"), "A");
        assert_eq!(show("g$lshzxetn"), "g$lshzxetn");
        assert_eq!(show("mEd"), "dEm");
        assert_eq!(show(""), "");
        assert_eq!(parse_classes("KEw"), None);
    }
}

//! Client-side caching: CLIENT TRACKING's table of who may cache which
//! key, and the invalidation messages that tell them a key changed.
//!
//! As in redis (`tracking.c`), a client in the default mode has every key
//! of its read-only commands remembered in one table, key → client ids
//! (databases are not told apart); when a committed write changes a key,
//! each client remembered for it gets one `invalidate` message and the
//! key leaves the table, so a client must read a key again to hear of its
//! next change. A client in BCAST mode remembers nothing: it names
//! prefixes, and after each committed group it gets, per prefix, every
//! key of the group under that prefix in one message (sorted, as redis's
//! radix tree gives them). FLUSHDB and FLUSHALL send every tracking client
//! one null invalidation and empty the table. OPTIN and OPTOUT make the
//! remembering depend on CLIENT CACHING YES/NO for the next command (or
//! the next transaction); NOLOOP leaves out the keys the client changed
//! itself.
//!
//! Messages go where redis sends them: to the client itself as a RESP3
//! `>` push, or, with REDIRECT, to the other client: as a push if it
//! speaks RESP3, else as a `message` on `__redis__:invalidate` if it is
//! subscribed to anything; a redirect to a client that is gone marks the
//! tracker `broken_redirect` and tells it so (RESP3). Every message goes
//! through the receiver's push queue (`crate::pubsub`), so it is written
//! between whole replies, bounded by its output limit.
//!
//! **Never a stale cache.** Reads run on the read pool against a
//! snapshot, and the changes come from the writer, so the order of three
//! events decides: the key's registration, the read's snapshot, the
//! commit. Two rules make a stale entry impossible:
//!
//! 1. A read-only command registers its keys on the connection, when it
//!    is planned, before its read is handed to the pool (or answered from
//!    the value cache): registration comes before the snapshot.
//! 2. The writer hands a group's changed keys to the table only after its
//!    `COMMIT` returned (`respite_engine::notify::Change`), and looks at
//!    the table only then.
//!
//! So a read whose snapshot is older than a commit registered before that
//! commit's look-up, and gets the commit's invalidation; a read that
//! registered after the look-up has its snapshot after the commit and
//! shows the new value. On the client's own connection the invalidation
//! is written after the reply of every command planned before it arrived
//! (pushes are drained between commands, into the turn's order), so a
//! client that gets a stale value gets the invalidation after it, which is
//! redis's contract; with REDIRECT the two connections are not ordered,
//! as in redis, and a client uses redis's documented placeholder
//! technique. Both sides are tested by `tests/tracking.rs`.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use respite_engine::notify::{Change, Notifier};

use crate::pubsub::Invalidation as Payload;
use crate::sync::lock;

/// What the table needs of a client (the registry's entry implements it).
pub trait Tracker: Send + Sync {
    /// The client id.
    fn tracker_id(&self) -> u64;
    /// Its tracking state.
    fn tracking(&self) -> &ClientTracking;
    /// Whether it speaks RESP3.
    fn resp3(&self) -> bool;
    /// Whether it is subscribed to anything (a RESP2 redirect target gets
    /// messages only then).
    fn subscribed(&self) -> bool;
}

/// Where the table reaches clients (the server's state implements it).
pub trait Clients {
    /// A client as the registry holds it.
    type Client: Tracker;
    /// The connected client with this id.
    fn find(&self, id: u64) -> Option<Arc<Self::Client>>;
    /// Every connected client that tracks, by id.
    fn tracking_clients(&self) -> Vec<Arc<Self::Client>>;
    /// Queues a message on a client's push queue.
    fn push(&self, to: &Arc<Self::Client>, message: Payload);
}

/// The redirect channel of RESP2 invalidation messages.
pub const CHANNEL: &[u8] = b"__redis__:invalidate";

/// One client's tracking settings (redis's `CLIENT_TRACKING*` flags).
#[derive(Default, Clone)]
pub struct Settings {
    /// CLIENT TRACKING ON.
    pub on: bool,
    /// BCAST.
    pub bcast: bool,
    /// OPTIN.
    pub optin: bool,
    /// OPTOUT.
    pub optout: bool,
    /// NOLOOP.
    pub noloop: bool,
    /// The client it redirects to (0: none).
    pub redirect: u64,
    /// The redirect target was gone when a message was to be sent.
    pub broken: bool,
    /// BCAST's prefixes.
    pub prefixes: BTreeSet<Bytes>,
}

/// A client's tracking state, in its registry entry.
#[derive(Default)]
pub struct ClientTracking {
    /// A copy of `settings.on`, read on every request.
    on: AtomicBool,
    /// CLIENT CACHING YES/NO given for the next command.
    caching: AtomicBool,
    settings: Mutex<Settings>,
}

impl ClientTracking {
    /// Whether the client tracks keys.
    pub fn is_on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// A copy of the settings.
    pub fn settings(&self) -> Settings {
        lock(&self.settings).clone()
    }

    /// Whether CLIENT CACHING was given for the next command.
    pub fn caching(&self) -> bool {
        self.caching.load(Ordering::Relaxed)
    }

    /// CLIENT CACHING YES|NO.
    pub fn set_caching(&self) {
        self.caching.store(true, Ordering::Relaxed);
    }

    /// After a command (outside MULTI, and not CLIENT): CACHING's effect
    /// is over.
    pub fn command_done(&self) {
        if self.caching.load(Ordering::Relaxed) {
            self.caching.store(false, Ordering::Relaxed);
        }
    }

    /// CLIENT LIST's tracking flags (`t`, `R`, `B`) and `redir=`.
    pub fn list_flags(&self) -> (String, i64) {
        if !self.is_on() {
            return (String::new(), -1);
        }
        let s = lock(&self.settings);
        let mut flags = String::from("t");
        if s.broken {
            flags.push('R');
        }
        if s.bcast {
            flags.push('B');
        }
        (flags, s.redirect as i64)
    }
}

/// A BCAST prefix: its clients, and the keys changed in the group being
/// published, with the client that changed each last (for NOLOOP).
#[derive(Default)]
struct Bcast {
    clients: BTreeSet<u64>,
    keys: BTreeMap<Bytes, u64>,
}

#[derive(Default)]
struct Table {
    /// Key → the clients that may cache it.
    keys: HashMap<Bytes, HashSet<u64>>,
    /// Client ids in `keys`, all keys counted (`tracking_total_items`).
    items: u64,
    prefixes: BTreeMap<Bytes, Bcast>,
}

/// The server's tracking table (see the module documentation).
pub struct Tracking {
    table: Mutex<Table>,
    /// `tracking_clients`.
    clients: AtomicUsize,
    /// `tracking-table-max-keys` (0: no bound).
    max_keys: AtomicU64,
    /// How many times in a row the bound was still passed after a round
    /// of forgetting (redis's `timeout_counter`: each round tries harder).
    over_rounds: AtomicU64,
}

impl Default for Tracking {
    fn default() -> Self {
        Tracking {
            table: Mutex::default(),
            clients: AtomicUsize::new(0),
            max_keys: AtomicU64::new(1_000_000),
            over_rounds: AtomicU64::new(0),
        }
    }
}

/// Why CLIENT TRACKING ON refused its options (redis's texts).
pub fn overlap_error(prefixes: &[Bytes], existing: &BTreeSet<Bytes>) -> Option<String> {
    let overlaps = |a: &[u8], b: &[u8]| {
        let n = a.len().min(b.len());
        a[..n] == b[..n]
    };
    for (i, p) in prefixes.iter().enumerate() {
        if let Some(e) = existing.iter().find(|e| overlaps(e, p)) {
            return Some(format!(
                "Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                String::from_utf8_lossy(crate::error::c_str(p)),
                String::from_utf8_lossy(crate::error::c_str(e)),
            ));
        }
        if let Some(q) = prefixes[i + 1..].iter().find(|q| overlaps(p, q)) {
            return Some(format!(
                "Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                String::from_utf8_lossy(crate::error::c_str(p)),
                String::from_utf8_lossy(crate::error::c_str(q)),
            ));
        }
    }
    None
}

impl Tracking {
    /// CONFIG SET tracking-table-max-keys.
    pub fn set_max_keys(&self, n: u64) {
        self.max_keys.store(n, Ordering::Relaxed);
    }

    /// Keeps the table within `tracking-table-max-keys` (redis's
    /// `trackingLimitUsedSlots`): while it holds more keys, forgets keys
    /// (arbitrary ones: the map's order), telling their clients as if the
    /// keys had changed, in rounds of 100 keys more than the last round
    /// that ended over the bound, until it is within.
    pub fn limit<C: Clients>(&self, clients: &C) {
        while self.limit_round(clients) {}
    }

    /// One round of [`Tracking::limit`]; answers whether more remain.
    fn limit_round<C: Clients>(&self, clients: &C) -> bool {
        let max = self.max_keys.load(Ordering::Relaxed) as usize;
        if max == 0 {
            return false;
        }
        let victims: Vec<Bytes> = {
            let table = lock(&self.table);
            if table.keys.len() <= max {
                self.over_rounds.store(0, Ordering::Relaxed);
                return false;
            }
            let effort = 100 * (self.over_rounds.load(Ordering::Relaxed) as usize + 1);
            let n = (table.keys.len() - max).min(effort);
            if n < table.keys.len() - max {
                self.over_rounds.fetch_add(1, Ordering::Relaxed);
            } else {
                self.over_rounds.store(0, Ordering::Relaxed);
            }
            table.keys.keys().take(n).cloned().collect()
        };
        // Not a change: BCAST clients hear nothing of it (redis passes
        // `bcast` 0), hence no prefix is given the keys.
        let changes = victims
            .into_iter()
            .map(|key| Change::Key { origin: 0, key })
            .collect();
        self.invalidate_keys(clients, changes, false);
        true
    }

    /// INFO's `tracking_clients`.
    pub fn clients(&self) -> usize {
        self.clients.load(Ordering::Relaxed)
    }

    /// INFO's `tracking_total_keys`, `tracking_total_items`,
    /// `tracking_total_prefixes`.
    pub fn sizes(&self) -> (usize, u64, usize) {
        let t = lock(&self.table);
        (t.keys.len(), t.items, t.prefixes.len())
    }

    /// CLIENT TRACKING ON with checked options (redis's `enableTracking`):
    /// a client already on keeps its BCAST prefixes and adds these.
    pub fn enable(&self, notifier: &Notifier, client: &impl Tracker, options: Settings) {
        let Settings {
            redirect,
            bcast,
            optin,
            optout,
            noloop,
            prefixes,
            ..
        } = options;
        let mut table = lock(&self.table);
        let mut s = lock(&client.tracking().settings);
        if !s.on {
            self.clients.fetch_add(1, Ordering::SeqCst);
        }
        // From now on the writer gathers what each commit changes: set
        // before any key is registered (see the module documentation),
        // under the table's lock so that a concurrent last disable cannot
        // clear it after.
        notifier.set_tracking(true);
        s.on = true;
        s.broken = false;
        s.bcast = bcast;
        s.optin = optin;
        s.optout = optout;
        s.noloop = noloop;
        s.redirect = redirect;
        if bcast {
            let prefixes = if prefixes.is_empty() {
                BTreeSet::from([Bytes::new()])
            } else {
                prefixes
            };
            for p in prefixes {
                let entry = table.prefixes.entry(p.clone()).or_default();
                if entry.clients.insert(client.tracker_id()) {
                    s.prefixes.insert(p);
                }
            }
        }
        client.tracking().on.store(true, Ordering::Relaxed);
        drop(s);
        drop(table);
    }

    /// CLIENT TRACKING OFF, RESET, or the connection closed (redis's
    /// `disableTracking`). Its keys stay in the table until they change,
    /// as in redis; they are skipped then.
    pub fn disable(&self, notifier: &Notifier, client: &impl Tracker) {
        if !client.tracking().is_on() {
            return;
        }
        let mut table = lock(&self.table);
        let mut s = lock(&client.tracking().settings);
        for p in std::mem::take(&mut s.prefixes) {
            if let Some(b) = table.prefixes.get_mut(&p) {
                b.clients.remove(&client.tracker_id());
                if b.clients.is_empty() {
                    table.prefixes.remove(&p);
                }
            }
        }
        *s = Settings::default();
        client.tracking().on.store(false, Ordering::Relaxed);
        client.tracking().caching.store(false, Ordering::Relaxed);
        // Still under the table's lock (see `enable`). Keys some client
        // read stay in the table, as in redis, until they change or a
        // flush empties it (INFO's `tracking_total_keys` counts them):
        // the writer goes on telling the table of changes until then.
        if self.clients.fetch_sub(1, Ordering::SeqCst) == 1 && table.keys.is_empty() {
            notifier.set_tracking(false);
        }
        drop(s);
        drop(table);
    }

    /// After a read-only command was checked and before it runs: remembers
    /// its keys for `client` (redis's `trackingRememberKeys`), unless the
    /// client is in BCAST mode or OPTIN/OPTOUT and CACHING say no.
    /// `keys` are the command's key arguments.
    pub fn remember(&self, client: &impl Tracker, keys: impl Iterator<Item = Bytes>) {
        if !self.would_remember(client) {
            return;
        }
        let mut table = lock(&self.table);
        for key in keys {
            if table
                .keys
                .entry(key)
                .or_default()
                .insert(client.tracker_id())
            {
                table.items += 1;
            }
        }
    }

    /// Whether a read of `client` now has its keys remembered: tracking
    /// on, not BCAST, and OPTIN or OPTOUT as CLIENT CACHING says.
    pub fn would_remember(&self, client: &impl Tracker) -> bool {
        let s = lock(&client.tracking().settings);
        if !s.on || s.bcast {
            return false;
        }
        let caching = client.tracking().caching();
        !((s.optin && !caching) || (s.optout && caching))
    }

    /// A committed group's changes (the writer's sink): each changed key's
    /// remembered clients are told and the key forgotten; a flush tells
    /// every tracking client and empties the table; then each BCAST
    /// prefix's clients get the group's keys under it.
    pub fn invalidate<C: Clients>(&self, clients: &C, changes: Vec<Change>) {
        self.invalidate_keys(clients, changes, true);
    }

    /// [`Tracking::invalidate`]; `bcast`: whether BCAST prefixes hear of
    /// the keys (not when the table is only trimmed).
    fn invalidate_keys<C: Clients>(&self, clients: &C, changes: Vec<Change>, bcast: bool) {
        let mut out: Vec<Out> = Vec::new();
        let mut remembered = false;
        {
            let mut table = lock(&self.table);
            let bcasting = bcast && !table.prefixes.is_empty();
            for change in changes {
                match change {
                    Change::Key { .. } | Change::Expired { .. } => {
                        // A key a read found expired is the server's change;
                        // its reader stays registered, untold.
                        let (origin, reader, key) = match change {
                            Change::Key { origin, key } => (origin, 0, key),
                            Change::Expired { reader, key } => (0, reader, key),
                            Change::Flush { .. } | Change::Remember { .. } => continue,
                        };
                        if bcasting {
                            for (p, b) in table.prefixes.iter_mut() {
                                if key.starts_with(p) {
                                    b.keys.insert(key.clone(), origin);
                                }
                            }
                        }
                        if let Some(mut ids) = table.keys.remove(&key) {
                            let kept = reader != 0 && ids.remove(&reader);
                            table.items -= ids.len() as u64;
                            let keys: Arc<[Bytes]> = Arc::from(vec![key.clone()]);
                            let mut ids: Vec<u64> = ids.into_iter().collect();
                            ids.sort_unstable();
                            for id in ids {
                                out.push(Out::Key(id, origin, keys.clone()));
                            }
                            if kept {
                                table.keys.insert(key, HashSet::from([reader]));
                            }
                        }
                    }
                    Change::Flush { .. } => {
                        table.keys.clear();
                        table.items = 0;
                        out.push(Out::Flush);
                    }
                    Change::Remember { client, keys } => {
                        for key in keys {
                            if table.keys.entry(key).or_default().insert(client) {
                                table.items += 1;
                            }
                        }
                        remembered = true;
                    }
                }
            }
            if bcasting {
                for b in table.prefixes.values_mut() {
                    if b.keys.is_empty() {
                        continue;
                    }
                    let keys = Arc::new(std::mem::take(&mut b.keys));
                    let all: Arc<[Bytes]> = keys.keys().cloned().collect::<Vec<_>>().into();
                    for &id in &b.clients {
                        out.push(Out::Bcast(id, all.clone(), keys.clone()));
                    }
                }
            }
        }
        for o in out {
            match o {
                Out::Key(id, origin, keys) => {
                    let Some(c) = clients.find(id) else { continue };
                    let (on, bcast, noloop) = {
                        let s = lock(&c.tracking().settings);
                        (s.on, s.bcast, s.noloop)
                    };
                    if !on || bcast || (noloop && origin == id) {
                        continue;
                    }
                    self.send(clients, &c, Payload::Keys(keys));
                }
                Out::Flush => {
                    for c in clients.tracking_clients() {
                        let resp3 = c.resp3();
                        self.send(clients, &c, Payload::Null(resp3));
                    }
                }
                Out::Bcast(id, all, keys) => {
                    let Some(c) = clients.find(id) else { continue };
                    let (on, bcast, noloop) = {
                        let s = lock(&c.tracking().settings);
                        (s.on, s.bcast, s.noloop)
                    };
                    if !on || !bcast {
                        continue;
                    }
                    let payload = if noloop && keys.values().any(|o| *o == id) {
                        let own: Vec<Bytes> = keys
                            .iter()
                            .filter(|(_, o)| **o != id)
                            .map(|(k, _)| k.clone())
                            .collect();
                        if own.is_empty() {
                            continue;
                        }
                        Payload::Keys(own.into())
                    } else {
                        Payload::Keys(all)
                    };
                    self.send(clients, &c, payload);
                }
            }
        }
        if remembered {
            self.limit(clients);
        }
    }

    /// Sends one message for `tracker` (redis's `sendTrackingMessage`).
    fn send<C: Clients>(&self, clients: &C, tracker: &Arc<C::Client>, payload: Payload) {
        let redirect = lock(&tracker.tracking().settings).redirect;
        let target = if redirect != 0 {
            match clients.find(redirect) {
                Some(t) => t,
                None => {
                    lock(&tracker.tracking().settings).broken = true;
                    if tracker.resp3() {
                        clients.push(tracker, Payload::RedirBroken(redirect));
                    }
                    return;
                }
            }
        } else {
            tracker.clone()
        };
        // RESP3 gets a push; RESP2 only a redirect target that is
        // subscribed (a `message` on `__redis__:invalidate`).
        let reachable = target.resp3() || (redirect != 0 && target.subscribed());
        if !reachable {
            return;
        }
        clients.push(&target, payload);
    }
}

/// One message [`Tracking::invalidate`] is to send, decided once the
/// table's lock is released.
enum Out {
    /// A key changed by `origin`, to client `id`.
    Key(u64, u64, Arc<[Bytes]>),
    /// A flush: every tracking client.
    Flush,
    /// A BCAST prefix's keys, to client `id`, with who changed each.
    Bcast(u64, Arc<[Bytes]>, Arc<BTreeMap<Bytes, u64>>),
}

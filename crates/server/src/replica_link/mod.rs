//! respite as a replica of a redis-server: the link to the master.
//!
//! `REPLICAOF host port` (or `replicaof` in the configuration) makes
//! respite follow a master the way a redis replica does, which is the way
//! in without downtime: point respite at the running Redis, wait for the
//! link to be up and the offsets to match, move the clients, promote it
//! with `REPLICAOF NO ONE`.
//!
//! **The link** is one tokio task (`run.rs`). It connects, makes redis's
//! handshake (`PING`, `AUTH` with `masteruser`/`masterauth`, `REPLCONF
//! listening-port`, `REPLCONF capa eof capa psync2`) and asks `PSYNC
//! <replid> <offset+1>` when the database knows its point in the master's
//! stream (`respite_engine::upstream`), else `PSYNC ? -1`.
//!
//! **A full synchronization** (`+FULLRESYNC <replid> <offset>`) receives
//! the RDB, disk-based (`$<len>`) or diskless (`$EOF:<mark>`, the end found
//! by its 40-byte mark), into a file beside the database, then loads it
//! with `respite-rdb`'s reader through the writer in large transactions
//! (`load.rs`): the first empties the database and forgets the point, the
//! last stores the point of the `+FULLRESYNC`. Clients get redis's
//! `-LOADING` meanwhile, and the master a newline every second, as a redis
//! replica sends while it loads.
//!
//! **The stream** (after the load, or after `+CONTINUE`) is parsed as a
//! redis replica parses it, and applied through the writer in group
//! commits (`apply.rs`): everything that arrived together is one writer
//! operation, each command run by `crate::command::call` without a
//! connection, as scripts run theirs, with the point it reaches stored in
//! the same transaction. `SELECT` is followed by the link; `MULTI ...
//! EXEC` is applied whole, never split across two transactions; `PING`
//! only moves the offset; `REPLCONF GETACK` is answered once everything
//! before it is committed. The offset counts every byte of the stream,
//! exactly as redis's `reploff` does, and `REPLCONF ACK <offset>` goes to
//! the master every second. An error a command answers (the master's data
//! is not ours to judge) is logged and the stream goes on, as in redis; a
//! malformed stream, a failed commit or silence longer than `repl-timeout`
//! ends the link, which is retried a second later with `PSYNC` from the
//! last committed point, so nothing is applied twice or half.
//!
//! This file holds the link's state as INFO, ROLE and the write check see
//! it; it takes nothing of the server but what it is given.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::sync::lock;

pub(crate) mod apply;
pub(crate) mod load;
pub(crate) mod run;

/// The link's state, as redis's `repl_state` names them for ROLE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum State {
    /// Waiting to connect (first try, or a retry after a failure).
    Connect = 0,
    /// Connecting.
    Connecting = 1,
    /// Making the handshake (up to PSYNC's reply).
    Handshake = 2,
    /// Receiving or loading the RDB of a full synchronization.
    Sync = 3,
    /// Following the stream.
    Connected = 4,
}

impl State {
    fn from_u8(v: u8) -> State {
        match v {
            1 => State::Connecting,
            2 => State::Handshake,
            3 => State::Sync,
            4 => State::Connected,
            _ => State::Connect,
        }
    }

    /// ROLE's word for it.
    pub fn role_word(self) -> &'static str {
        match self {
            State::Connect => "connect",
            State::Connecting => "connecting",
            State::Handshake => "handshake",
            State::Sync => "sync",
            State::Connected => "connected",
        }
    }
}

/// Where the link points and how far it got.
#[derive(Default)]
struct Target {
    /// The master, while this is a replica.
    master: Option<(String, u16)>,
    /// The master's replication ID the data follows ("" before a first
    /// synchronization).
    replid: String,
    /// Raised by every REPLICAOF: a link of an older generation stops.
    generation: u64,
}

/// The link's state (see the module docs).
#[derive(Default)]
pub struct Link {
    target: Mutex<Target>,
    /// This server is a replica (writes from clients are refused).
    replica: AtomicBool,
    /// A full synchronization is loading (clients get LOADING).
    loading: AtomicBool,
    state: AtomicU8,
    /// Bytes of the stream read (`slave_read_repl_offset`).
    read_offset: AtomicI64,
    /// Bytes of the stream applied and committed (`slave_repl_offset`).
    offset: AtomicI64,
    /// Unix seconds of the last byte from the master.
    last_io: AtomicU64,
    /// Unix seconds since when the link is down (0: not lost since it
    /// last came up, or never up).
    down_since: AtomicU64,
    /// The RDB being received: its size (-1: diskless, unknown) and the
    /// bytes read so far.
    transfer_size: AtomicI64,
    transfer_read: AtomicU64,
    /// Full synchronizations and continuations this link made.
    pub(crate) full_syncs: AtomicU64,
    pub(crate) partial_syncs: AtomicU64,
}

/// Now, in Unix seconds.
pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Link {
    /// Whether this server is a replica of a master.
    pub fn is_replica(&self) -> bool {
        self.replica.load(Ordering::Acquire)
    }

    /// Whether a full synchronization is loading.
    pub fn is_loading(&self) -> bool {
        self.loading.load(Ordering::Acquire)
    }

    /// The master, while a replica.
    pub fn master(&self) -> Option<(String, u16)> {
        lock(&self.target).master.clone()
    }

    /// The master's replication ID the data follows.
    pub fn replid(&self) -> String {
        lock(&self.target).replid.clone()
    }

    /// The link's state.
    pub fn state(&self) -> State {
        State::from_u8(self.state.load(Ordering::Relaxed))
    }

    /// Bytes of the stream applied (`slave_repl_offset`).
    pub fn offset(&self) -> i64 {
        self.offset.load(Ordering::Acquire)
    }

    /// Bytes of the stream read (`slave_read_repl_offset`).
    pub fn read_offset(&self) -> i64 {
        self.read_offset.load(Ordering::Relaxed)
    }

    /// Seconds since the master last sent something; -1 while the link
    /// is not up.
    pub fn last_io_secs(&self) -> i64 {
        if self.state() != State::Connected {
            return -1;
        }
        unix_now().saturating_sub(self.last_io.load(Ordering::Relaxed)) as i64
    }

    /// Seconds the link has been down; -1 if it was never up.
    pub fn down_secs(&self) -> i64 {
        match self.down_since.load(Ordering::Relaxed) {
            0 => -1,
            at => unix_now().saturating_sub(at) as i64,
        }
    }

    /// The RDB transfer under way: size (-1 unknown), bytes read, and
    /// seconds since the last of them arrived.
    pub fn transfer(&self) -> (i64, u64, i64) {
        (
            self.transfer_size.load(Ordering::Relaxed),
            self.transfer_read.load(Ordering::Relaxed),
            unix_now().saturating_sub(self.last_io.load(Ordering::Relaxed)) as i64,
        )
    }

    /// Points the link at `master` (None: promotion), answering the new
    /// generation; a link of an older one stops at its next step.
    pub(crate) fn retarget(&self, master: Option<(String, u16)>) -> u64 {
        let mut t = lock(&self.target);
        t.generation += 1;
        self.replica.store(master.is_some(), Ordering::Release);
        if master.is_none() {
            self.loading.store(false, Ordering::Release);
        }
        if t.master.is_some() && master.is_none() {
            self.down_since.store(0, Ordering::Relaxed);
        }
        t.master = master;
        self.state.store(State::Connect as u8, Ordering::Relaxed);
        t.generation
    }

    /// Whether `generation` is still the current one.
    pub(crate) fn is_current(&self, generation: u64) -> bool {
        lock(&self.target).generation == generation
    }

    /// Runs `f` (a submission to the writer) only if `generation` is still
    /// current, under the lock [`Link::retarget`] takes: nothing of a
    /// link is queued after a promotion answered.
    pub(crate) fn while_current<T>(&self, generation: u64, f: impl FnOnce() -> T) -> Option<T> {
        let t = lock(&self.target);
        (t.generation == generation).then(f)
    }

    /// Sets the point the data is at (from the database, or a
    /// synchronization).
    pub(crate) fn set_position(&self, replid: &str, offset: i64) {
        lock(&self.target).replid = replid.to_string();
        self.offset.store(offset, Ordering::Release);
        self.read_offset.store(offset, Ordering::Relaxed);
    }

    /// Forgets the point (promotion, or a full synchronization begun).
    pub(crate) fn forget_position(&self) {
        lock(&self.target).replid.clear();
        self.offset.store(0, Ordering::Release);
        self.read_offset.store(0, Ordering::Relaxed);
    }

    /// Everything up to `offset` is committed.
    pub(crate) fn committed(&self, offset: i64) {
        self.offset.fetch_max(offset, Ordering::AcqRel);
    }

    /// `n` more bytes of the stream were read.
    pub(crate) fn read_bytes(&self, n: usize) {
        self.read_offset.fetch_add(n as i64, Ordering::Relaxed);
        self.touch();
    }

    /// The master sent something.
    pub(crate) fn touch(&self) {
        self.last_io.store(unix_now(), Ordering::Relaxed);
    }

    pub(crate) fn set_state(&self, state: State) {
        let was = self.state.swap(state as u8, Ordering::Relaxed);
        if state == State::Connected {
            self.down_since.store(0, Ordering::Relaxed);
        } else if was == State::Connected as u8 {
            // redis's `repl_down_since`: set when an up link is lost, so
            // -1 until the link was up once.
            self.down_since.store(unix_now(), Ordering::Relaxed);
        }
    }

    pub(crate) fn set_loading(&self, on: bool) {
        self.loading.store(on, Ordering::Release);
    }

    pub(crate) fn set_transfer(&self, size: i64, read: u64) {
        self.transfer_size.store(size, Ordering::Relaxed);
        self.transfer_read.store(read, Ordering::Relaxed);
    }
}

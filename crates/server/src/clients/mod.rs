//! The client registry's entries: what the server knows about each
//! connected client, for CLIENT LIST, CLIENT KILL, INFO clients, the ACL
//! log and MONITOR's lines.
//!
//! A [`ClientHandle`] is made when a connection is admitted and kept in
//! `Shared::clients` until it closes. Its connection task writes it (the
//! database, the protocol, the user, the last command, the buffers'
//! figures, with relaxed stores); everyone else only reads it. What the
//! CLIENT command sets for a client (SETINFO, REPLY, NO-EVICT, NO-TOUCH)
//! and MONITOR's per-client feed are in its [`ClientState`]. The
//! server-wide CLIENT PAUSE is [`Pause`] ([`pause`]). The commands that
//! show and steer clients are in `cmd/client.rs`; this module imports no
//! command.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicI64, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::Notify;

use crate::sync::lock;

pub mod pause;

pub use pause::Pause;

/// CLIENT REPLY ON: replies are sent.
pub const REPLY_ON: u8 = 0;
/// CLIENT REPLY OFF: no reply is sent until ON.
pub const REPLY_OFF: u8 = 1;
/// CLIENT REPLY SKIP: the next command's reply is not sent.
pub const REPLY_SKIP: u8 = 2;

/// Connected clients by id: the registry the listener adds to, a
/// connection removes itself from, and CLIENT LIST, CLIENT KILL and INFO
/// read.
pub type Registry = Mutex<HashMap<u64, Arc<ClientHandle>>>;

/// Where a client is connected from.
#[derive(Debug, Clone)]
pub enum Peer {
    /// A TCP client: its address and ours.
    Tcp(SocketAddr, SocketAddr),
    /// A Unix-socket client, and the socket path.
    Unix(String),
}

impl Peer {
    /// The address as MONITOR's lines show it (`127.0.0.1:6000`,
    /// `unix:/path`).
    pub fn monitor_addr(&self) -> Arc<str> {
        match self {
            Peer::Unix(path) => format!("unix:{path}").into(),
            Peer::Tcp(peer, _) => peer.to_string().into(),
        }
    }
}

/// What the registry knows about one connected client (CLIENT LIST, KILL).
pub struct ClientHandle {
    /// The client id (CLIENT ID), unique for the server's life.
    pub id: u64,
    /// Where it connected from.
    pub peer: Peer,
    /// CLIENT SETNAME.
    pub name: Mutex<Option<String>>,
    /// The selected database.
    pub db: AtomicU32,
    /// RESP version, 2 or 3.
    pub resp: AtomicU32,
    /// The last command's row in the command table (`usize::MAX`: none
    /// yet). An atomic, not a lock: it is written for every command.
    pub last_cmd: AtomicUsize,
    /// When it connected.
    pub created: Instant,
    /// Milliseconds since `created` at its last command.
    pub last_active_ms: AtomicU64,
    /// Set by CLIENT KILL; the connection loop wakes on `kill_notify` and
    /// closes.
    pub killed: AtomicBool,
    /// Wakes the connection loop for a kill.
    pub kill_notify: Notify,
    /// The ACL user it is logged in as (CLIENT LIST `user=`, CLIENT KILL
    /// USER).
    pub user: Mutex<String>,
    /// Reply bytes encoded and not yet taken by the socket (`omem`).
    pub output_bytes: AtomicU64,
    /// The blocking command it waits in (BLPOP...), for CLIENT UNBLOCK
    /// and CLIENT LIST's `b` flag.
    pub blocked: Mutex<Option<Arc<crate::blocking::Ticket>>>,
    /// What CLIENT keeps for it (SETINFO, REPLY, NO-EVICT, its fd...).
    pub state: ClientState,
    /// Its pub/sub subscriptions.
    pub pubsub: crate::pubsub::Subscriptions,
    /// CLIENT TRACKING's settings for it.
    pub tracking: crate::tracking::ClientTracking,
}

impl crate::tracking::Tracker for ClientHandle {
    fn tracker_id(&self) -> u64 {
        self.id
    }

    fn tracking(&self) -> &crate::tracking::ClientTracking {
        &self.tracking
    }

    fn resp3(&self) -> bool {
        self.resp.load(Ordering::Relaxed) == 3
    }

    fn subscribed(&self) -> bool {
        self.pubsub.active()
    }
}

impl ClientHandle {
    /// A client just connected from `peer`, logged in as `default`, in
    /// database 0, speaking RESP2 (the listener, tests and the fuzzers make
    /// theirs here, so a new field is added in one place).
    pub fn new(id: u64, peer: Peer) -> ClientHandle {
        ClientHandle {
            id,
            peer,
            name: Mutex::new(None),
            db: Default::default(),
            resp: 2.into(),
            last_cmd: usize::MAX.into(),
            created: Instant::now(),
            last_active_ms: Default::default(),
            killed: Default::default(),
            kill_notify: Default::default(),
            output_bytes: Default::default(),
            blocked: Mutex::new(None),
            user: Mutex::new("default".into()),
            state: Default::default(),
            pubsub: Default::default(),
            tracking: Default::default(),
        }
    }

    /// `addr` as CLIENT LIST prints it.
    pub fn addr(&self) -> String {
        match &self.peer {
            Peer::Tcp(peer, _) => peer.to_string(),
            Peer::Unix(path) => format!("{path}:0"),
        }
    }

    /// `laddr` as CLIENT LIST prints it.
    pub fn laddr(&self) -> String {
        match &self.peer {
            Peer::Tcp(_, local) => local.to_string(),
            Peer::Unix(path) => format!("{path}:0"),
        }
    }

    /// Seconds since its last command.
    pub fn idle_secs(&self) -> u64 {
        (self.created.elapsed().as_millis() as u64)
            .saturating_sub(self.last_active_ms.load(Ordering::Relaxed))
            / 1000
    }
}

impl crate::pubsub::Member for ClientHandle {
    fn member_id(&self) -> u64 {
        self.id
    }

    fn subscriptions(&self) -> &crate::pubsub::Subscriptions {
        &self.pubsub
    }

    fn mark_closing(&self) -> bool {
        !self.killed.swap(true, Ordering::Relaxed)
    }

    fn wake(&self) {
        self.kill_notify.notify_one();
    }

    fn peer_addr(&self) -> String {
        self.addr()
    }
}

/// What CLIENT keeps for one client (SETINFO, REPLY, NO-EVICT, its fd, its
/// buffers' figures, MONITOR's feed).
pub struct ClientState {
    /// The socket's file descriptor (-1 until known).
    pub fd: AtomicI32,
    /// CLIENT SETINFO LIB-NAME.
    pub lib_name: Mutex<Option<String>>,
    /// CLIENT SETINFO LIB-VER.
    pub lib_ver: Mutex<Option<String>>,
    /// CLIENT NO-EVICT (kept and shown: respite evicts no client).
    pub no_evict: AtomicBool,
    /// CLIENT NO-TOUCH (kept and shown).
    pub no_touch: AtomicBool,
    /// CLIENT REPLY's mode.
    reply: AtomicU8,
    /// The statistics row of the last command (its full name, for
    /// `cmd=`), `usize::MAX` before the first.
    pub last_row: AtomicUsize,
    /// Commands queued in an open MULTI (-1: none open), for `multi=`.
    multi: AtomicI64,
    /// What MONITOR keeps for it: whether it monitors, and the commands
    /// it ran since its last turn ended, for the monitoring clients (see
    /// [`crate::monitor`]).
    pub monitor: crate::monitor::ClientFeed,
    /// The memory figures of CLIENT LIST, published by the connection loop.
    pub buffers: Buffers,
    /// A replication link: [`LINK_MASTER`] for this replica's master,
    /// [`LINK_REPLICA`] for a replica of this server (0: neither).
    pub link: AtomicU8,
}

/// [`ClientState::link`] of the connection to this replica's master
/// (flag `M`, type `master`).
pub const LINK_MASTER: u8 = 1;
/// [`ClientState::link`] of a replica's connection (flag `S`, type
/// `replica`).
pub const LINK_REPLICA: u8 = 2;

/// The figures CLIENT LIST shows about a connection's buffers, published
/// by its loop with relaxed stores once per read or per turn (never per
/// command: the hot path pays a handful of stores per syscall, and CLIENT
/// LIST reads whatever was last published). Their meaning in respite:
///
/// - `qbuf`: bytes read from the socket and not yet executed. Published
///   after each read (so a client's own CLIENT INFO counts itself, as in
///   redis) and after each turn (what is left: the part of a command that
///   has not fully arrived, or commands held back by a pause). respite
///   keeps a command whole in this buffer until its last byte arrives, so
///   a partial command's first arguments count here, not in `argv-mem`.
/// - `qbuf-free`: the read buffer's spare capacity.
/// - `argv-mem`: bytes of the arguments of the command being run: the
///   caller's own CLIENT LIST or INFO, or a blocking command waiting; 0
///   between commands.
/// - `multi-mem`: the commands queued since MULTI, their argument bytes
///   plus one `Bytes` handle per argument (redis counts a pointer per
///   argument the same way).
/// - `rbs`: the capacity of the reply buffer, where a turn's replies are
///   gathered before they are written (16 KiB, as redis's `buf`, until a
///   large reply grows it; shrunk again after a turn over 1 MiB).
/// - `rbp`: the most of that buffer a turn used in the last 5 seconds.
/// - `obl`: bytes of the reply buffer not yet taken by the socket.
/// - `oll`: reply blocks waiting besides the reply buffer: large replies
///   encoded by a reader thread are written as they are, not copied into
///   the buffer, and each counts as one block until written.
/// - `omem`: every reply byte encoded and not yet taken by the socket (the
///   reply buffer's and the blocks'), the figure `client-output-buffer-limit`
///   applies to.
/// - `tot-mem`: the connection's fixed structures, the read buffer's
///   capacity, the reply buffer's capacity, the pending blocks, `argv-mem`
///   and `multi-mem`.
#[derive(Default)]
pub struct Buffers {
    qbuf: AtomicU64,
    qbuf_free: AtomicU64,
    argv_mem: AtomicU64,
    multi_mem: AtomicU64,
    rbs: AtomicU64,
    rbp: AtomicU64,
    /// When the current `rbp` window began, in milliseconds since the
    /// client connected.
    rbp_since_ms: AtomicU64,
    obl: AtomicU64,
    oll: AtomicU64,
}

/// How long a reply-buffer peak is remembered (redis resets its `buf_peak`
/// every 5 seconds too).
const PEAK_WINDOW_MS: u64 = 5000;

impl Buffers {
    /// The read buffer's capacity as last published (INFO's
    /// `client_recent_max_input_buffer` takes the largest).
    pub fn input_capacity(&self) -> u64 {
        self.qbuf.load(Ordering::Relaxed) + self.qbuf_free.load(Ordering::Relaxed)
    }

    /// Publishes the read buffer: `len` bytes waiting, `capacity` in all.
    pub fn input(&self, len: usize, capacity: usize) {
        self.qbuf.store(len as u64, Ordering::Relaxed);
        self.qbuf_free
            .store(capacity.saturating_sub(len) as u64, Ordering::Relaxed);
    }

    /// Publishes the reply buffer after a turn: its capacity, and the most
    /// of it the turn used; `now_ms` is milliseconds since the client
    /// connected.
    pub fn reply_buffer(&self, capacity: usize, peak: usize, now_ms: u64) {
        self.rbs.store(capacity as u64, Ordering::Relaxed);
        let peak = peak as u64;
        let since = self.rbp_since_ms.load(Ordering::Relaxed);
        if now_ms.saturating_sub(since) >= PEAK_WINDOW_MS {
            self.rbp.store(peak, Ordering::Relaxed);
            self.rbp_since_ms.store(now_ms, Ordering::Relaxed);
        } else if peak > self.rbp.load(Ordering::Relaxed) {
            self.rbp.store(peak, Ordering::Relaxed);
        }
    }

    /// Publishes what waits for the socket: `obl` bytes of the reply
    /// buffer and `oll` other blocks.
    pub fn pending(&self, obl: usize, oll: usize) {
        self.obl.store(obl as u64, Ordering::Relaxed);
        self.oll.store(oll as u64, Ordering::Relaxed);
    }

    /// Publishes the arguments of a command that waits (a blocking pop),
    /// 0 once it is answered.
    pub fn argv(&self, bytes: usize) {
        self.argv_mem.store(bytes as u64, Ordering::Relaxed);
    }
}

impl Default for ClientState {
    fn default() -> Self {
        ClientState {
            fd: AtomicI32::new(-1),
            lib_name: Mutex::new(None),
            lib_ver: Mutex::new(None),
            no_evict: AtomicBool::new(false),
            no_touch: AtomicBool::new(false),
            reply: AtomicU8::new(REPLY_ON),
            last_row: AtomicUsize::new(usize::MAX),
            multi: AtomicI64::new(-1),
            monitor: Default::default(),
            buffers: Buffers::default(),
            link: AtomicU8::new(0),
        }
    }
}

impl ClientState {
    /// Whether replies are sent as usual (the fast paths check this: a
    /// silenced client goes the general way).
    pub fn replies_on(&self) -> bool {
        self.reply.load(Ordering::Relaxed) == REPLY_ON
    }

    /// CLIENT REPLY's mode now (read before a command is planned).
    pub fn reply_mode(&self) -> u8 {
        self.reply.load(Ordering::Relaxed)
    }

    /// Sets CLIENT REPLY's mode.
    pub fn set_reply_mode(&self, mode: u8) {
        self.reply.store(mode, Ordering::Relaxed);
    }

    /// Records whether a MULTI is open, how many commands it holds and
    /// their memory (`multi-mem`).
    pub fn note_multi(&self, queued: Option<(usize, usize)>) {
        let (n, mem) = queued.map_or((-1, 0), |(n, mem)| (n as i64, mem as u64));
        if self.multi.load(Ordering::Relaxed) != n {
            self.multi.store(n, Ordering::Relaxed);
            self.buffers.multi_mem.store(mem, Ordering::Relaxed);
        }
    }
}

/// One line of CLIENT LIST / CLIENT INFO, redis 7.2's fields in order.
/// `cmd` is the last command's name (`NULL` before the first);
/// `session_bytes` what a connection's own state takes besides this entry
/// (counted in `tot-mem`); `own_argv`, when `c` is the caller, the bytes of
/// its own CLIENT command (its `argv-mem`, as redis shows it).
pub fn info_line(
    c: &ClientHandle,
    cmd: &str,
    session_bytes: usize,
    own_argv: Option<u64>,
) -> String {
    let st = &c.state;
    let b = &st.buffers;
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let (qbuf, qbuf_free) = (load(&b.qbuf), load(&b.qbuf_free));
    let argv_mem = own_argv.unwrap_or_else(|| load(&b.argv_mem));
    let multi_mem = load(&b.multi_mem);
    let (rbs, obl) = (load(&b.rbs), load(&b.obl));
    let omem = c.output_bytes.load(Ordering::Relaxed);
    // What every connection holds whatever it does: its registry entry and
    // its session (redis counts `sizeof(client)` the same way).
    let fixed = (std::mem::size_of::<ClientHandle>() + session_bytes) as u64;
    let tot_mem = fixed + qbuf + qbuf_free + rbs + omem.saturating_sub(obl) + argv_mem + multi_mem;
    let (sub, psub, ssub) = c.pubsub.counts();
    let mut flags = String::new();
    let multi = st.multi.load(Ordering::Relaxed);
    if multi >= 0 {
        flags.push('x');
    }
    if lock(&c.blocked).is_some() {
        flags.push('b');
    }
    let (tracking_flags, redir) = c.tracking.list_flags();
    flags.push_str(&tracking_flags);
    if matches!(c.peer, Peer::Unix(_)) {
        flags.push('U');
    }
    if st.no_evict.load(Ordering::Relaxed) {
        flags.push('e');
    }
    if st.no_touch.load(Ordering::Relaxed) {
        flags.push('T');
    }
    if c.pubsub.active() {
        flags.insert(0, 'P');
    }
    let link = st.link.load(Ordering::Relaxed);
    if link == LINK_MASTER {
        flags.insert(0, 'M');
    }
    if st.monitor.is_monitoring() {
        flags.insert(0, 'O');
    } else if link == LINK_REPLICA {
        flags.insert(0, 'S');
    }
    if flags.is_empty() {
        flags.push('N');
    }
    format!(
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={flags} db={} sub={sub} psub={psub} ssub={ssub} multi={multi} qbuf={qbuf} qbuf-free={qbuf_free} argv-mem={argv_mem} multi-mem={multi_mem} rbs={rbs} rbp={} obl={obl} oll={} omem={omem} tot-mem={tot_mem} events=r cmd={cmd} user={} redir={redir} resp={} lib-name={} lib-ver={}",
        c.id,
        c.addr(),
        c.laddr(),
        st.fd.load(Ordering::Relaxed),
        lock(&c.name).clone().unwrap_or_default(),
        c.created.elapsed().as_secs(),
        c.idle_secs(),
        c.db.load(Ordering::Relaxed),
        load(&b.rbp),
        load(&b.oll),
        lock(&c.user),
        c.resp.load(Ordering::Relaxed),
        lock(&st.lib_name).clone().unwrap_or_default(),
        lock(&st.lib_ver).clone().unwrap_or_default(),
    )
}

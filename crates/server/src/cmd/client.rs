//! CLIENT: the connected clients, as tools see and steer them.
//!
//! `CLIENT LIST` and `CLIENT INFO` print redis's fields in redis's order,
//! with redis 7.2's `lib-name` and `lib-ver` (set by CLIENT SETINFO, which
//! client libraries send on connect) at the end. `CLIENT KILL` takes every
//! filter redis has. `CLIENT PAUSE` holds commands back (every command, or
//! only writes) until its deadline or CLIENT UNPAUSE, as redis does: a
//! paused command waits before it is planned, on its connection, after the
//! replies to what came before it have been sent. `CLIENT REPLY OFF|SKIP`
//! silences replies: the plan of a silenced command answers with
//! [`Reply::Silent`], which encodes to nothing, wherever it runs.
//!
//! What this module keeps per client lives in [`ClientState`], one field of
//! the registry's `ClientHandle`; the server-wide pause in [`Pause`].

use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicI64, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::common::help;
use crate::args::subcommand;
use crate::args::{upper, Args};
use crate::blocking::Blocker;
use crate::command::{LocalCommand, Plan, Session, TABLE};
use crate::error::CommandError;
use crate::reply::Reply;
use crate::state::{ClientHandle, Peer, Shared};
use crate::sync::lock;

/// CLIENT REPLY's modes.
const REPLY_ON: u8 = 0;
const REPLY_OFF: u8 = 1;
const REPLY_SKIP: u8 = 2;

/// What CLIENT keeps for one client.
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
    /// Set by MONITOR: the connection switches to monitoring after this
    /// turn (see `cmd::monitor`).
    pub monitoring: AtomicBool,
    /// MONITOR's subscription, taken by the monitoring loop.
    pub monitor: Mutex<Option<tokio::sync::broadcast::Receiver<Arc<super::monitor::Batch>>>>,
    /// The commands this connection ran since its last turn ended, for the
    /// monitoring clients (see `cmd::monitor`).
    pub feed: Mutex<super::monitor::Feed>,
    /// Something is in `feed`: one relaxed load per turn says whether
    /// there is anything to publish.
    pub fed: AtomicBool,
    /// The memory figures of CLIENT LIST, published by the connection loop.
    pub buffers: Buffers,
}

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
            monitoring: AtomicBool::new(false),
            monitor: Mutex::new(None),
            feed: Mutex::default(),
            fed: AtomicBool::new(false),
            buffers: Buffers::default(),
        }
    }
}

impl ClientState {
    /// Whether replies are sent as usual (the fast paths check this: a
    /// silenced client goes the general way).
    pub fn replies_on(&self) -> bool {
        self.reply.load(Ordering::Relaxed) == REPLY_ON
    }
}

/// Applies CLIENT REPLY to a planned command: `before` is the mode when
/// the command arrived. OFF silences every reply from the command that set
/// it on; SKIP silences its own reply and the next command's; ON's own
/// reply is sent.
pub fn silence_if_asked(state: &ClientState, before: u8, plan: Plan) -> Plan {
    let after = state.reply.load(Ordering::Relaxed);
    let silent = match (before, after) {
        (_, REPLY_OFF) => true,
        (REPLY_SKIP, REPLY_SKIP) => {
            // This is the command after SKIP: silenced, then replies
            // resume.
            state.reply.store(REPLY_ON, Ordering::Relaxed);
            true
        }
        (_, REPLY_SKIP) => true,
        _ => false,
    };
    if silent {
        silenced(plan)
    } else {
        plan
    }
}

/// Records whether a MULTI is open, how many commands it holds and their
/// memory (`multi-mem`).
pub fn note_multi(state: &ClientState, queued: Option<(usize, usize)>) {
    let (n, mem) = queued.map_or((-1, 0), |(n, mem)| (n as i64, mem as u64));
    if state.multi.load(Ordering::Relaxed) != n {
        state.multi.store(n, Ordering::Relaxed);
        state.buffers.multi_mem.store(mem, Ordering::Relaxed);
    }
}

/// The reply mode now (read before a command is planned).
pub fn reply_mode(state: &ClientState) -> u8 {
    state.reply.load(Ordering::Relaxed)
}

/// A plan whose reply encodes to nothing, wherever it runs.
fn silenced(plan: Plan) -> Plan {
    match plan {
        Plan::Reply(r) => Plan::Reply(r.pushes_only()),
        Plan::ReplyAndClose(_) => Plan::ReplyAndClose(Reply::Silent),
        Plan::Close => Plan::Close,
        Plan::Write(op) => Plan::Write(silenced_write(op)),
        Plan::Read(f, needs) => Plan::Read(
            Box::new(move |view| {
                f(view);
                Reply::Silent
            }),
            needs,
        ),
        Plan::Cached(read) => {
            let (f, needs) = read.into_read();
            silenced(Plan::Read(f, needs))
        }
        Plan::Block(blocker) => Plan::Block(Arc::new(Silent(blocker))),
        Plan::After(write, then) => Plan::After(write, Box::new(|r| then(r).pushes_only())),
        Plan::ReadOrWrite(f) => Plan::ReadOrWrite(Box::new(move |view| match f(view) {
            Ok(_) => Ok(Reply::Silent),
            Err(op) => Err(silenced_write(op)),
        })),
    }
}

/// A write whose reply encodes to nothing. An error the writer would
/// answer is silenced too; one that must take the group back (a failed
/// write, storage) still does.
fn silenced_write(op: respite_engine::WriteOp<Reply>) -> respite_engine::WriteOp<Reply> {
    Box::new(move |txn| {
        let before = txn.changes();
        match op(txn) {
            Ok(_) => Ok(Reply::Silent),
            Err(respite_engine::EngineError::Storage(e)) => {
                Err(respite_engine::EngineError::Storage(e))
            }
            Err(_) if txn.changes() == before => Ok(Reply::Silent),
            Err(e) => Err(e),
        }
    })
}

/// A blocking command whose reply is not sent.
struct Silent(Arc<dyn Blocker>);

impl Blocker for Silent {
    fn keys(&self) -> Vec<(u32, Bytes)> {
        self.0.keys()
    }
    fn timeout(&self) -> Option<Duration> {
        self.0.timeout()
    }
    fn try_pop(
        &self,
        txn: &mut respite_engine::Txn<'_, '_>,
        ready: Option<(u32, &[u8])>,
    ) -> Result<Option<Reply>, CommandError> {
        Ok(self.0.try_pop(txn, ready)?.map(|_| Reply::Silent))
    }
    fn timeout_reply(&self) -> Reply {
        Reply::Silent
    }
}

/// The server-wide CLIENT PAUSE.
#[derive(Default)]
pub struct Pause {
    /// Until when, and whether every command (ALL) or only writes wait.
    state: Mutex<Option<(Instant, bool)>>,
    /// A quick check for every command: a pause is (or was) set.
    active: AtomicBool,
    /// Wakes waiting connections at CLIENT UNPAUSE.
    notify: tokio::sync::Notify,
    /// Connections waiting for the pause to end (INFO counts them among
    /// `blocked_clients`, as redis does).
    waiting: std::sync::atomic::AtomicUsize,
}

/// Counts a connection as waiting on a pause while it lives.
struct Waiting<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Pause {
    /// Whether a command must wait now; ends an expired pause. Under
    /// WRITE, as in redis 7.0, what waits is a command flagged `write` or
    /// `may_replicate` (a subcommand by its own flags), and an EXEC whose
    /// queue holds one; reads, and an EXEC of reads only, go on.
    pub fn holds(&self, session: &Session, request: &[Bytes]) -> bool {
        if !self.active.load(Ordering::Relaxed) {
            return false;
        }
        let mut st = lock(&self.state);
        match *st {
            Some((until, _)) if Instant::now() >= until => {
                *st = None;
                self.active.store(false, Ordering::Relaxed);
                false
            }
            Some((_, true)) => true,
            Some((_, false)) => {
                drop(st);
                let Some(spec) = crate::command::lookup(&request[0]) else {
                    return false;
                };
                if spec.name == "exec" {
                    return session
                        .multi
                        .as_ref()
                        .is_some_and(|q| q.requests().iter().any(|r| writes(r)));
                }
                writes(request)
            }
            None => false,
        }
    }

    /// Whether any pause is set (the fast paths go the general way then).
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// Connections waiting for the pause to end now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Waits until the pause ends (its deadline or CLIENT UNPAUSE).
    pub async fn wait(&self) {
        self.waiting.fetch_add(1, Ordering::Relaxed);
        // Dropped however the wait ends (the connection may be killed).
        let _waiting = Waiting(&self.waiting);
        loop {
            let until = match *lock(&self.state) {
                Some((until, _)) => until,
                None => return,
            };
            let woken = self.notify.notified();
            tokio::select! {
                _ = tokio::time::sleep_until(until.into()) => {}
                _ = woken => {}
            }
            let mut st = lock(&self.state);
            if st.is_some_and(|(u, _)| Instant::now() >= u) {
                *st = None;
                self.active.store(false, Ordering::Relaxed);
            }
        }
    }

    /// Pauses until `until` (or the later end of a pause in force), and
    /// returns when the pause ends.
    fn pause(&self, until: Instant, all: bool) -> Instant {
        let mut st = lock(&self.state);
        // A pause never shortens one already in force, nor weakens it
        // (redis keeps the later end and the stronger type).
        let (until, all) = match *st {
            Some((u, a)) => (u.max(until), a || all),
            None => (until, all),
        };
        *st = Some((until, all));
        self.active.store(true, Ordering::Relaxed);
        self.notify.notify_waiters();
        until
    }

    fn unpause(&self) {
        *lock(&self.state) = None;
        self.active.store(false, Ordering::Relaxed);
        self.notify.notify_waiters();
    }
}

/// Whether a request is a command redis holds under CLIENT PAUSE WRITE:
/// flagged `write` or `may_replicate`, a container's subcommand by its own
/// flags.
fn writes(request: &[Bytes]) -> bool {
    let Some(spec) = crate::command::lookup(&request[0]) else {
        return false;
    };
    let flagged = |m: &crate::meta::Meta| m.has_flag("write") || m.has_flag("may_replicate");
    match (spec.subcommands, request.get(1)) {
        (Some(_), Some(sub)) => {
            let mut full = format!("{}|", spec.name).into_bytes();
            full.extend(sub.iter().map(u8::to_ascii_lowercase));
            crate::meta::find_full(&full).is_some_and(flagged)
        }
        _ => spec.has_flag("write") || spec.has_flag("may_replicate"),
    }
}

/// One line of CLIENT LIST / CLIENT INFO, redis 7.2's fields in order.
pub fn info_line(c: &ClientHandle, shared: Option<&Shared>) -> String {
    line_of(c, shared, None)
}

/// [`info_line`]; `own_argv`: when `c` is the caller, the bytes of its own CLIENT command
/// (its `argv-mem`, as redis shows it).
fn line_of(c: &ClientHandle, shared: Option<&Shared>, own_argv: Option<u64>) -> String {
    let st = &c.state;
    let b = &st.buffers;
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let (qbuf, qbuf_free) = (load(&b.qbuf), load(&b.qbuf_free));
    let argv_mem = own_argv.unwrap_or_else(|| load(&b.argv_mem));
    let multi_mem = load(&b.multi_mem);
    let (rbs, obl) = (load(&b.rbs), load(&b.obl));
    let omem = c.output_bytes.load(Ordering::Relaxed);
    let tot_mem = FIXED_CLIENT_BYTES
        + qbuf
        + qbuf_free
        + rbs
        + omem.saturating_sub(obl)
        + argv_mem
        + multi_mem;
    let (sub, psub, ssub) = c.pubsub.counts();
    let mut flags = String::new();
    let multi = st.multi.load(Ordering::Relaxed);
    if multi >= 0 {
        flags.push('x');
    }
    if lock(&c.blocked).is_some() {
        flags.push('b');
    }
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
    if st.monitoring.load(Ordering::Relaxed) {
        flags.insert(0, 'O');
    }
    if flags.is_empty() {
        flags.push('N');
    }
    let cmd = shared
        .and_then(|sh| sh.stats.row_name(st.last_row.load(Ordering::Relaxed)))
        .or_else(|| {
            TABLE
                .get(c.last_cmd.load(Ordering::Relaxed))
                .map(|s| s.name.to_string())
        })
        .unwrap_or_else(|| "NULL".into());
    format!(
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={flags} db={} sub={sub} psub={psub} ssub={ssub} multi={multi} qbuf={qbuf} qbuf-free={qbuf_free} argv-mem={argv_mem} multi-mem={multi_mem} rbs={rbs} rbp={} obl={obl} oll={} omem={omem} tot-mem={tot_mem} events=r cmd={cmd} user={} redir=-1 resp={} lib-name={} lib-ver={}",
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

/// What every connection holds whatever it does: its registry entry and
/// its session (redis counts `sizeof(client)` the same way).
const FIXED_CLIENT_BYTES: u64 =
    (std::mem::size_of::<ClientHandle>() + std::mem::size_of::<Session>()) as u64;

/// Client types as CLIENT LIST and KILL take them; every respite client
/// is `normal`.
fn client_type(t: &[u8]) -> Result<bool, CommandError> {
    match upper(t).as_str() {
        "NORMAL" => Ok(true),
        "MASTER" | "REPLICA" | "SLAVE" | "PUBSUB" => Ok(false),
        _ => Err(CommandError::Other(format!(
            "Unknown client type '{}'",
            String::from_utf8_lossy(t)
        ))),
    }
}

/// Which clients CLIENT KILL targets.
pub struct KillFilter {
    id: Option<u64>,
    addr: Option<String>,
    laddr: Option<String>,
    skipme: bool,
    /// `TYPE`: false when it names a type no client here has.
    type_matches: bool,
    /// `USER`: only that user's clients.
    user: Option<String>,
    max_age: Option<u64>,
    /// The old one-argument form answers OK or an error, not a count.
    old_form: bool,
}

/// `CLIENT ID | INFO | LIST [TYPE type] [ID id ...] | SETNAME name |
/// GETNAME | SETINFO LIB-NAME|LIB-VER value | KILL ... | UNBLOCK id
/// [TIMEOUT|ERROR] | PAUSE timeout [WRITE|ALL] | UNPAUSE | REPLY
/// ON|OFF|SKIP | NO-EVICT ON|OFF | NO-TOUCH ON|OFF | GETREDIR | HELP`
pub enum Client {
    /// CLIENT ID
    Id,
    /// CLIENT SETNAME name
    SetName(Bytes),
    /// CLIENT GETNAME
    GetName,
    /// CLIENT LIST, optionally only these ids; `false` when a TYPE was
    /// given that no client here has; the bytes of this command's
    /// arguments (the caller's `argv-mem`).
    List(Option<Vec<u64>>, bool, u64),
    /// CLIENT INFO, with the bytes of its arguments.
    Info(u64),
    /// CLIENT KILL with its filters.
    Kill(KillFilter),
    /// CLIENT SETINFO: which attribute (true: lib-name), and the value.
    SetInfo(bool, String),
    /// CLIENT UNBLOCK id [TIMEOUT|ERROR]
    Unblock(u64, crate::blocking::Cancel),
    /// CLIENT PAUSE: for how long, and whether every command waits.
    Pause(Duration, bool),
    /// CLIENT UNPAUSE
    Unpause,
    /// CLIENT REPLY: the new mode.
    Reply(u8),
    /// CLIENT NO-EVICT on/off
    NoEvict(bool),
    /// CLIENT NO-TOUCH on/off
    NoTouch(bool),
    /// CLIENT GETREDIR (no tracking: -1)
    GetRedir,
    /// CLIENT HELP
    Help,
}

fn on_off(arg: &[u8]) -> Result<bool, CommandError> {
    match upper(arg).as_str() {
        "ON" => Ok(true),
        "OFF" => Ok(false),
        _ => Err(CommandError::Syntax),
    }
}

impl LocalCommand for Client {
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        // Names and arities were checked with the table's subcommand list.
        // "client" and every argument after it: the caller's `argv-mem`.
        let own_argv = (b"client".len() + args.bytes_left()) as u64;
        let sub = subcommand(args)?;
        Ok(match sub.name.as_str() {
            "ID" => Client::Id,
            "GETNAME" => Client::GetName,
            "INFO" => Client::Info(own_argv),
            "HELP" => Client::Help,
            "GETREDIR" => Client::GetRedir,
            "UNPAUSE" => Client::Unpause,
            "SETNAME" => Client::SetName(args.next()?),
            "SETINFO" => {
                let attr = args.next()?;
                let value = args.next()?;
                let lib_name = match upper(&attr).as_str() {
                    "LIB-NAME" => true,
                    "LIB-VER" => false,
                    _ => {
                        return Err(CommandError::Other(format!(
                            "Unrecognized option '{}'",
                            String::from_utf8_lossy(&attr)
                        )))
                    }
                };
                if value.iter().any(|&b| !(b'!'..=b'~').contains(&b)) {
                    return Err(CommandError::Other(format!(
                        "{} cannot contain spaces, newlines or special characters.",
                        String::from_utf8_lossy(&attr)
                    )));
                }
                Client::SetInfo(lib_name, String::from_utf8_lossy(&value).into_owned())
            }
            "LIST" => {
                let mut ids = None;
                let mut type_matches = true;
                while args.remaining() > 0 {
                    match args.next_upper()?.as_str() {
                        "TYPE" if args.remaining() >= 1 => {
                            type_matches = client_type(&args.next()?)?;
                        }
                        "ID" if args.remaining() >= 1 => {
                            let mut v = Vec::new();
                            while args.remaining() > 0 {
                                let id = crate::args::parse_i64(&args.next()?)
                                    .filter(|i| *i > 0)
                                    .ok_or_else(|| {
                                    CommandError::Other("Invalid client ID".into())
                                })?;
                                v.push(id as u64);
                            }
                            ids = Some(v);
                        }
                        _ => return Err(CommandError::Syntax),
                    }
                }
                Client::List(ids, type_matches, own_argv)
            }
            "KILL" => Client::Kill(parse_kill(args, &s.shared)?),
            "UNBLOCK" => {
                let id = args.next()?;
                let why = match args.next_opt().map(|r| upper(&r)) {
                    None => crate::blocking::Cancel::Timeout,
                    Some(r) if r == "TIMEOUT" => crate::blocking::Cancel::Timeout,
                    Some(r) if r == "ERROR" => crate::blocking::Cancel::Error,
                    Some(_) => {
                        return Err(CommandError::Other(
                            "CLIENT UNBLOCK reason should be TIMEOUT or ERROR".into(),
                        ))
                    }
                };
                let id = crate::args::parse_i64(&id).ok_or(CommandError::NotInteger)?;
                Client::Unblock(id as u64, why)
            }
            "PAUSE" => {
                let ms = args.next()?;
                let all = match args.next_opt() {
                    None => true,
                    Some(m) => match upper(&m).as_str() {
                        "ALL" => true,
                        "WRITE" => false,
                        _ => {
                            return Err(CommandError::Other(
                                "CLIENT PAUSE mode must be WRITE or ALL".into(),
                            ))
                        }
                    },
                };
                if args.remaining() > 0 {
                    return Err(sub.syntax("CLIENT"));
                }
                let ms = crate::args::parse_i64(&ms).ok_or_else(|| {
                    CommandError::Other("timeout is not an integer or out of range".into())
                })?;
                if ms < 0 {
                    return Err(CommandError::Other("timeout is negative".into()));
                }
                Client::Pause(Duration::from_millis(ms as u64), all)
            }
            "REPLY" => Client::Reply(match args.next_upper()?.as_str() {
                "ON" => REPLY_ON,
                "OFF" => REPLY_OFF,
                "SKIP" => REPLY_SKIP,
                _ => return Err(CommandError::Syntax),
            }),
            "NO-EVICT" => Client::NoEvict(on_off(&args.next()?)?),
            "NO-TOUCH" => Client::NoTouch(on_off(&args.next()?)?),
            _ => return Err(sub.unknown("CLIENT")),
        })
    }

    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        let st = &s.client.state;
        let reply = match self {
            Client::Id => Reply::Int(s.client.id as i64),
            Client::SetName(name) => {
                super::connection::set_name(s, &name)?;
                Reply::Ok
            }
            Client::GetName => match lock(&s.client.name).clone() {
                Some(n) => Reply::bulk(n),
                None => Reply::Nil,
            },
            Client::Info(own) => Reply::Verbatim(format!(
                "{}\n",
                line_of(&s.client, Some(&s.shared), Some(own))
            )),
            Client::List(_, false, _) => Reply::Verbatim(String::new()),
            Client::List(ids, true, own) => {
                let mut handles: Vec<_> = lock(&s.shared.clients).values().cloned().collect();
                handles.sort_by_key(|c| c.id);
                let mut out = String::new();
                for c in handles {
                    if ids.as_ref().is_some_and(|ids| !ids.contains(&c.id)) {
                        continue;
                    }
                    let own = (c.id == s.client.id).then_some(own);
                    out.push_str(&line_of(&c, Some(&s.shared), own));
                    out.push('\n');
                }
                Reply::Verbatim(out)
            }
            Client::SetInfo(lib_name, value) => {
                let slot = if lib_name { &st.lib_name } else { &st.lib_ver };
                *lock(slot) = Some(value).filter(|v| !v.is_empty());
                Reply::Ok
            }
            Client::Unblock(id, why) => {
                let target = lock(&s.shared.clients).get(&id).cloned();
                let ticket = target.and_then(|c| lock(&c.blocked).clone());
                Reply::Int(ticket.is_some_and(|t| t.unblock(why)) as i64)
            }
            Client::Kill(f) => return kill(s, &f).map(Plan::Reply),
            Client::Pause(d, all) => {
                let until = s.shared.pause.pause(Instant::now() + d, all);
                // Both kinds of pause stop the expiry of keys too, as in
                // redis: nothing in the file changes until the pause ends.
                s.shared.engine.pause_expiry(Some(until));
                Reply::Ok
            }
            Client::Unpause => {
                s.shared.pause.unpause();
                s.shared.engine.pause_expiry(None);
                Reply::Ok
            }
            Client::Reply(mode) => {
                st.reply.store(mode, Ordering::Relaxed);
                Reply::Ok
            }
            Client::NoEvict(on) => {
                st.no_evict.store(on, Ordering::Relaxed);
                Reply::Ok
            }
            Client::NoTouch(on) => {
                st.no_touch.store(on, Ordering::Relaxed);
                Reply::Ok
            }
            Client::GetRedir => Reply::Int(-1),
            Client::Help => help(
                "CLIENT",
                &[
                    "CACHING (YES|NO)",
                    "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
                    "GETREDIR",
                    "    Return the client ID we are redirecting to when tracking is enabled.",
                    "GETNAME",
                    "    Return the name of the current connection.",
                    "ID",
                    "    Return the ID of the current connection.",
                    "INFO",
                    "    Return information about the current client connection.",
                    "KILL <ip:port>",
                    "    Kill connection made from <ip:port>.",
                    "KILL <option> <value> [<option> <value> [...]]",
                    "    Kill connections. Options are:",
                    "    * ADDR (<ip:port>|<unixsocket>:0)",
                    "      Kill connections made from the specified address",
                    "    * LADDR (<ip:port>|<unixsocket>:0)",
                    "      Kill connections made to specified local address",
                    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
                    "      Kill connections by type.",
                    "    * USER <username>",
                    "      Kill connections authenticated by <username>.",
                    "    * SKIPME (YES|NO)",
                    "      Skip killing current connection (default: yes).",
                    "    * ID <client-id>",
                    "      Kill connections by client id.",
                    "    * MAXAGE <maxage>",
                    "      Kill connections older than the specified age.",
                    "LIST [options ...]",
                    "    Return information about client connections. Options:",
                    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
                    "      Return clients of specified type.",
                    "UNPAUSE",
                    "    Stop the current client pause, resuming traffic.",
                    "PAUSE <timeout> [WRITE|ALL]",
                    "    Suspend all, or just write, clients for <timeout> milliseconds.",
                    "REPLY (ON|OFF|SKIP)",
                    "    Control the replies sent to the current connection.",
                    "SETNAME <name>",
                    "    Assign the name <name> to the current connection.",
                    "SETINFO <option> <value>",
                    "    Set client meta attr. Options are:",
                    "    * LIB-NAME: the client lib name.",
                    "    * LIB-VER: the client lib version.",
                    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
                    "    Unblock the specified blocked client.",
                    "NO-EVICT (ON|OFF)",
                    "    Protect current client connection from eviction.",
                    "NO-TOUCH (ON|OFF)",
                    "    Will not touch LRU/LFU stats when this mode is on.",
                ],
            ),
        };
        Ok(Plan::Reply(reply))
    }
}

fn parse_kill(args: &mut Args, shared: &Shared) -> Result<KillFilter, CommandError> {
    let mut f = KillFilter {
        id: None,
        addr: None,
        laddr: None,
        skipme: true,
        type_matches: true,
        user: None,
        max_age: None,
        old_form: false,
    };
    let n = args.remaining();
    if n == 1 {
        // The old form, which may kill the caller itself.
        f.addr = Some(String::from_utf8_lossy(&args.next()?).into_owned());
        f.old_form = true;
        f.skipme = false;
        return Ok(f);
    }
    if n % 2 == 1 {
        return Err(CommandError::Syntax);
    }
    while args.remaining() > 0 {
        let opt = args.next_upper()?;
        let val = args.next()?;
        let text = String::from_utf8_lossy(&val).into_owned();
        match opt.as_str() {
            "ID" => {
                let id = crate::args::parse_i64(&val)
                    .filter(|i| *i > 0)
                    .ok_or_else(|| {
                        CommandError::Other("client-id should be greater than 0".into())
                    })?;
                f.id = Some(id as u64);
            }
            "ADDR" => f.addr = Some(text),
            "LADDR" => f.laddr = Some(text),
            "SKIPME" => match text.to_ascii_lowercase().as_str() {
                "yes" => f.skipme = true,
                "no" => f.skipme = false,
                _ => return Err(CommandError::Syntax),
            },
            "TYPE" => f.type_matches = client_type(&val)?,
            "USER" => {
                if shared.acl.user(&text).is_none() {
                    return Err(CommandError::Other(format!("No such user '{text}'")));
                }
                f.user = Some(text);
            }
            // Redis 7.4's filter: clients at least this many seconds old.
            "MAXAGE" => {
                let age = crate::args::parse_i64(&val).ok_or_else(|| {
                    CommandError::Other("maxage is not an integer or out of range".into())
                })?;
                if age <= 0 {
                    return Err(CommandError::Other(
                        "maxage should be greater than 0".into(),
                    ));
                }
                f.max_age = Some(age as u64);
            }
            _ => return Err(CommandError::Syntax),
        }
    }
    Ok(f)
}

fn kill(s: &Session, f: &KillFilter) -> Result<Reply, CommandError> {
    let clients: Vec<Arc<ClientHandle>> = lock(&s.shared.clients).values().cloned().collect();
    let mut killed = 0;
    for c in clients {
        if f.skipme && c.id == s.client.id {
            continue;
        }
        if !f.type_matches
            || f.user.as_ref().is_some_and(|u| *u != *lock(&c.user))
            || f.max_age
                .is_some_and(|age| c.created.elapsed().as_secs() < age)
            || f.id.is_some_and(|id| id != c.id)
            || f.addr.as_ref().is_some_and(|a| *a != c.addr())
            || f.laddr.as_ref().is_some_and(|a| *a != c.laddr())
        {
            continue;
        }
        c.killed.store(true, Ordering::SeqCst);
        c.kill_notify.notify_one();
        killed += 1;
    }
    if f.old_form {
        if killed == 0 {
            return Err(CommandError::Other("No such client".into()));
        }
        return Ok(Reply::Ok);
    }
    Ok(Reply::Int(killed))
}

/// This family's rows of the command table (see [`crate::command::table`]).
#[rustfmt::skip]
pub(crate) fn commands() -> Vec<crate::command::Spec> {
    use crate::command::Spec;
    vec![
        Spec::local::<Client>("client", -2, &[], [0, 0, 0], "connection", "A container for client connection commands.")
            .with_subcommands("CLIENT", &[("getname", 2), ("getredir", 2), ("help", 2), ("id", 2), ("info", 2), ("kill", -3), ("list", -2), ("no-evict", 3), ("no-touch", 3), ("pause", -3), ("reply", 3), ("setinfo", 4), ("setname", 3), ("unblock", -3), ("unpause", 2)]),
    ]
}

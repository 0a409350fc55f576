//! MONITOR: every command the server runs, streamed to the clients that
//! asked.
//!
//! A command is shown once it is planned, in redis's format: `+` Unix time
//! with microseconds, `[db address]`, then every argument quoted as
//! redis's `sdscatrepr` quotes it. Like redis, commands flagged `admin` or
//! `skip_monitor` are not shown (CONFIG, DEBUG, MONITOR itself), AUTH's and
//! HELLO's passwords read `(redacted)`, and a command refused before it
//! runs (wrong arity, unknown) is not shown; commands inside MULTI are
//! shown when EXEC runs them, before EXEC itself.
//!
//! What a monitored connection pays is kept as small as the design
//! allows, since every other client pays it while someone monitors. Its
//! task formats nothing: for each command it appends the time, the
//! database and the raw arguments to its own [`Feed`] (a buffer behind a
//! lock nobody else takes; the plain GET/SET fast paths copy them straight
//! from the read buffer, and stay open). Once per turn (a pipeline's worth
//! of commands) the feed goes out as one [`Batch`] on one broadcast
//! channel: one send per turn, not one per command. The monitoring
//! clients' tasks turn batches into redis's lines and write every batch
//! waiting in one write. While no client monitors, the cost is one atomic
//! load per command ([`Monitors::active`]) and one per turn. A monitoring
//! client that falls more than the channel's capacity (in batches) behind
//! loses the oldest rather than holding anyone up (redis would instead
//! buffer them until its output-buffer limit closes the client).
//!
//! From the command after MONITOR on (pipelined in the same read or not),
//! the connection's loop is [`run`]'s: lines out, and its own commands
//! under redis's rule for a replica-flagged client: whatever could read or
//! write the keyspace (flagged `readonly`, `write`, `may_replicate`) is
//! refused with `Replica can't interact with the keyspace` (inside MULTI
//! that dooms the transaction), the rest runs (PING, ECHO, INFO, CLIENT,
//! SELECT, MULTI/EXEC...), each reply placed among the lines where redis
//! places it; MONITOR again gets no reply; RESET ends monitoring and QUIT
//! closes, as in redis.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::broadcast;

use crate::args::Args;
use crate::command::{LocalCommand, Plan, Session};
use crate::error::CommandError;
use crate::reply::Reply;
use crate::state::{ClientHandle, Peer, Shared};
use crate::sync::lock;

/// Batches (one per turn of a connection) a monitoring client may fall
/// behind before it loses some.
const CAPACITY: usize = 4096;

/// One turn's commands of one connection, as [`Feed`] recorded them: the
/// monitoring clients format them.
pub struct Batch {
    /// The connection's address as a line shows it (`127.0.0.1:6000`,
    /// `unix:/path`).
    addr: Arc<str>,
    /// Entries, each: the time in microseconds since the Unix epoch (u64),
    /// the database (u32), the argument count (u32), then every argument
    /// as its length (u32) and its bytes; little-endian.
    data: Vec<u8>,
}

/// The monitoring clients' channel.
pub struct Monitors {
    tx: broadcast::Sender<Arc<Batch>>,
    count: AtomicUsize,
}

impl Default for Monitors {
    fn default() -> Self {
        Monitors {
            tx: broadcast::Sender::new(CAPACITY),
            count: AtomicUsize::new(0),
        }
    }
}

/// What a connection has run since its last [`Monitors::publish`], for the
/// monitoring clients; kept in its `ClientState` and touched only by its
/// own task (the lock is never contended).
#[derive(Default)]
pub struct Feed {
    data: Vec<u8>,
    addr: Option<Arc<str>>,
}

/// Microseconds since the Unix epoch.
fn now_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// Appends `args` in [`Batch`]'s encoding (count, then length and bytes of
/// each).
pub fn encode_args<'a>(out: &mut Vec<u8>, args: impl ExactSizeIterator<Item = &'a [u8]>) {
    out.extend_from_slice(&(args.len() as u32).to_le_bytes());
    for a in args {
        out.extend_from_slice(&(a.len() as u32).to_le_bytes());
        out.extend_from_slice(a);
    }
}

impl Monitors {
    /// Whether anyone monitors (checked for every command).
    pub fn active(&self) -> bool {
        self.count.load(Ordering::Relaxed) > 0
    }

    /// Records one command of `client`, its arguments already encoded by
    /// [`encode_args`]. Nothing is formatted here: the monitoring clients'
    /// tasks do that, off the connection's hot path.
    pub fn feed_encoded(&self, db: u32, client: &ClientHandle, args: &[u8]) {
        let mut feed = lock(&client.state.feed);
        feed.data.extend_from_slice(&now_micros().to_le_bytes());
        feed.data.extend_from_slice(&db.to_le_bytes());
        feed.data.extend_from_slice(args);
        client.state.fed.store(true, Ordering::Relaxed);
    }

    /// Records one command of `client` from its arguments (the fast paths:
    /// slices of the read buffer, copied once).
    pub fn feed(&self, db: u32, client: &ClientHandle, args: &[&[u8]]) {
        let mut feed = lock(&client.state.feed);
        feed.data.extend_from_slice(&now_micros().to_le_bytes());
        feed.data.extend_from_slice(&db.to_le_bytes());
        encode_args(&mut feed.data, args.iter().copied());
        client.state.fed.store(true, Ordering::Relaxed);
    }

    /// Sends what `client` recorded since the last call to the monitoring
    /// clients, as one batch: once per turn of the connection, so a
    /// pipeline of commands costs one send, not one per command.
    pub fn publish(&self, client: &ClientHandle) {
        if !client.state.fed.load(Ordering::Relaxed) {
            return;
        }
        client.state.fed.store(false, Ordering::Relaxed);
        let mut feed = lock(&client.state.feed);
        if !self.active() {
            feed.data = Vec::new();
            return;
        }
        // The next turn's buffer starts at this one's size (up to 4 KiB:
        // an idle connection must not keep a large value's worth): one
        // allocation per turn rather than a run of doublings.
        let size = feed.data.len().min(4 * 1024);
        let data = std::mem::replace(&mut feed.data, Vec::with_capacity(size));
        let addr = feed
            .addr
            .get_or_insert_with(|| match &client.peer {
                Peer::Unix(path) => format!("unix:{path}").into(),
                Peer::Tcp(peer, _) => peer.to_string().into(),
            })
            .clone();
        drop(feed);
        let _ = self.tx.send(Arc::new(Batch { addr, data }));
    }
}

/// Formats a batch's lines as redis's `replicationFeedMonitors` does:
/// `+<seconds>.<microseconds> [<db> <address>] "arg" ...`.
fn format_batch(batch: &Batch, out: &mut Vec<u8>) {
    let mut data = &batch.data[..];
    let mut take = |n: usize| -> Option<&[u8]> {
        let (head, rest) = data.split_at_checked(n)?;
        data = rest;
        Some(head)
    };
    let u32_of = |b: &[u8]| u32::from_le_bytes(b.try_into().unwrap_or_default());
    loop {
        let Some(time) = take(8) else { return };
        let micros = u64::from_le_bytes(time.try_into().unwrap_or_default());
        let (Some(db), Some(argc)) = (take(4).map(u32_of), take(4).map(u32_of)) else {
            return;
        };
        out.push(b'+');
        push_number(out, micros / 1_000_000);
        out.push(b'.');
        let frac = micros % 1_000_000;
        // Six digits, zero-padded.
        let mut digits = [b'0'; 6];
        let mut f = frac;
        for d in digits.iter_mut().rev() {
            *d = b'0' + (f % 10) as u8;
            f /= 10;
        }
        out.extend_from_slice(&digits);
        out.extend_from_slice(b" [");
        push_number(out, u64::from(db));
        out.push(b' ');
        out.extend_from_slice(batch.addr.as_bytes());
        out.push(b']');
        for _ in 0..argc {
            let Some(len) = take(4).map(u32_of) else {
                return;
            };
            let Some(arg) = take(len as usize) else {
                return;
            };
            out.push(b' ');
            repr(out, arg);
        }
        out.extend_from_slice(b"\r\n");
    }
}

/// A number in decimal.
fn push_number(out: &mut Vec<u8>, n: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut n = n;
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// redis's `sdscatrepr`: a quoted string with `\\`, `\"`, `\n`, `\r`, `\t`,
/// `\a`, `\b` escaped and other unprintable bytes as `\xHH`. Runs of plain
/// bytes are copied at once.
fn repr(out: &mut Vec<u8>, s: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let mut plain = 0;
    for (i, &b) in s.iter().enumerate() {
        let escaped: &[u8] = match b {
            b'\\' => b"\\\\",
            b'"' => b"\\\"",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x07 => b"\\a",
            0x08 => b"\\b",
            // isprint: 0x20 to 0x7e.
            0x20..=0x7e => continue,
            _ => {
                out.extend_from_slice(&s[plain..i]);
                plain = i + 1;
                out.extend_from_slice(&[
                    b'\\',
                    b'x',
                    HEX[usize::from(b >> 4)],
                    HEX[usize::from(b & 15)],
                ]);
                continue;
            }
        };
        out.extend_from_slice(&s[plain..i]);
        plain = i + 1;
        out.extend_from_slice(escaped);
    }
    out.extend_from_slice(&s[plain..]);
    out.push(b'"');
}

/// `MONITOR`
pub struct Monitor;

impl LocalCommand for Monitor {
    fn parse(_args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        Ok(Monitor)
    }
    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        // In MULTI, and inside EXEC (a client waiting for one reply per
        // command cannot switch to a stream).
        if s.multi.is_some() || s.acl.in_exec {
            return Err(CommandError::Other(
                "MONITOR isn't allowed for DENY BLOCKING client".into(),
            ));
        }
        if s.client.state.monitoring.load(Ordering::Relaxed) {
            // Already monitoring: redis ignores it, without a reply.
            return Ok(Plan::Reply(Reply::Silent));
        }
        let mut slot = lock(&s.client.state.monitor);
        if slot.is_none() {
            // Subscribed now: every command after this one's OK is shown.
            *slot = Some(s.shared.monitors.tx.subscribe());
            s.shared.monitors.count.fetch_add(1, Ordering::Relaxed);
            s.client.state.monitoring.store(true, Ordering::Relaxed);
        }
        Ok(Plan::Reply(Reply::Ok))
    }
}

/// What [`run`] decided.
pub enum Ended {
    /// RESET: back to a normal connection.
    Reset,
    /// Close the connection.
    Close,
}

/// The monitoring client's loop (see the module documentation). `input`
/// holds what the client sent and the connection has not run yet: the
/// commands pipelined after MONITOR in the same read are this loop's too.
pub async fn run<S, K, T>(
    session: &mut Session,
    stream: &mut S,
    input: &mut BytesMut,
    mut killed: Pin<&mut K>,
    mut stopping: Pin<&mut T>,
) -> Ended
where
    S: AsyncRead + AsyncWrite + Unpin,
    K: Future,
    T: Future,
{
    let Some(mut rx) = lock(&session.client.state.monitor).take() else {
        return Ended::Reset;
    };
    let shared = session.shared.clone();
    let mut out = Vec::new();
    let ended = 'monitor: loop {
        // The client's own commands already received, each reply placed
        // among the lines as redis places it: after the lines of what ran
        // before it, before the line of the command itself.
        loop {
            drain(&mut rx, &mut out);
            match answer_own(session, &shared, input).await {
                Own::Nothing => break,
                Own::Reply(bytes, then) => {
                    out.extend_from_slice(&bytes);
                    if let Some(end) = then {
                        if stream.write_all(&out).await.is_err() {
                            break 'monitor Ended::Close;
                        }
                        break 'monitor end;
                    }
                }
            }
        }
        if !out.is_empty() {
            if stream.write_all(&out).await.is_err() {
                break Ended::Close;
            }
            shared
                .counters
                .net_output_bytes
                .fetch_add(out.len() as u64, Ordering::Relaxed);
            out.clear();
        }
        // The branches' outputs are dropped here: the shutdown watch's
        // guard must not live across an await.
        let event = tokio::select! {
            line = rx.recv() => Event::Line(line),
            read = stream.read_buf(input) => Event::Read(matches!(read, Ok(n) if n > 0)),
            _ = killed.as_mut() => Event::Stop,
            _ = stopping.as_mut() => Event::Stop,
        };
        match event {
            Event::Line(Ok(batch)) => {
                format_batch(&batch, &mut out);
                // Everything else already there goes in the same write.
                drain(&mut rx, &mut out);
            }
            Event::Line(Err(broadcast::error::RecvError::Lagged(_))) => {}
            Event::Line(Err(broadcast::error::RecvError::Closed)) => break Ended::Close,
            Event::Read(true) => {}
            Event::Read(false) | Event::Stop => break Ended::Close,
        }
    };
    shared.monitors.count.fetch_sub(1, Ordering::Relaxed);
    session
        .client
        .state
        .monitoring
        .store(false, Ordering::Relaxed);
    ended
}

/// Appends the lines of every batch already in the channel to `out`.
fn drain(rx: &mut broadcast::Receiver<Arc<Batch>>, out: &mut Vec<u8>) {
    loop {
        match rx.try_recv() {
            Ok(batch) => format_batch(&batch, out),
            Err(broadcast::error::TryRecvError::Lagged(_)) => {}
            Err(_) => return,
        }
    }
}

/// What woke the monitoring loop.
enum Event {
    /// A batch of lines to send, or the channel's news.
    Line(Result<Arc<Batch>, broadcast::error::RecvError>),
    /// The client sent something (false: it closed).
    Read(bool),
    /// Killed, or the server stops.
    Stop,
}

/// What the monitoring client's own commands got.
enum Own {
    /// No complete command waiting.
    Nothing,
    /// These reply bytes, then perhaps the end of monitoring.
    Reply(Vec<u8>, Option<Ended>),
}

/// Runs the next command the monitoring client sent, with redis's rule for
/// a client flagged as a replica: once a command passes the checks every
/// client gets (known, arity, authentication, ACL), it is refused if it
/// could read or write the keyspace (flagged `readonly`, `write` or
/// `may_replicate`: GET, SET, DBSIZE, PUBLISH...). Everything else (PING,
/// ECHO, INFO, CLIENT, SELECT, MULTI/EXEC, RESET, QUIT) runs as usual.
/// MONITOR again is answered with nothing (see [`Monitor`]).
async fn answer_own(session: &mut Session, shared: &Shared, input: &mut BytesMut) -> Own {
    let limits = crate::request::Limits {
        max_bulk_len: shared.settings.proto_max_bulk_len.load(Ordering::Relaxed),
        authenticated: session.authenticated,
    };
    let request = match crate::request::next_frame(input, limits) {
        Ok(Some(frame)) => frame.take_args(input),
        Ok(None) => return Own::Nothing,
        Err(e) => {
            let mut out = BytesMut::new();
            Reply::error(e.to_string()).encode(&mut out, session.resp3);
            return Own::Reply(out.to_vec(), Some(Ended::Close));
        }
    };
    if request.is_empty() {
        return Own::Reply(Vec::new(), None);
    }
    let found = crate::command::lookup_index(&request[0]);
    if let Ok((index, _)) = crate::command::check(session, &request, found) {
        let stats = &shared.stats;
        let row = stats.row_of(index, request.get(1).map(|b| &b[..]));
        if touches_keyspace(stats.row_name(row).as_deref()) {
            const REFUSAL: &str = "ERR Replica can't interact with the keyspace";
            stats.rejected(row);
            stats.error(REFUSAL.as_bytes());
            // Inside MULTI the refusal dooms the transaction, as any
            // command refused before it is queued does.
            if let Some(q) = session.multi.as_mut() {
                q.doom();
            }
            let mut out = BytesMut::new();
            Reply::error(REFUSAL).encode(&mut out, session.resp3);
            return Own::Reply(out.to_vec(), None);
        }
    }
    let is_reset = request[0].eq_ignore_ascii_case(b"reset");
    let plan = crate::command::dispatch(session, request);
    // Its own line, if shown, goes after its reply.
    shared.monitors.publish(&session.client);
    let (out, close) = crate::connection::run_alone(plan, shared, session.resp3).await;
    let then = if close {
        Some(Ended::Close)
    } else {
        is_reset.then_some(Ended::Reset)
    };
    Own::Reply(out, then)
}

/// Whether a command (by its full name, `container|sub` for a subcommand)
/// may read or write the keyspace: redis refuses those from a replica or a
/// monitor, and holds them back under CLIENT PAUSE WRITE (`write` and
/// `may_replicate` only).
fn touches_keyspace(fullname: Option<&str>) -> bool {
    fullname
        .and_then(|n| crate::meta::find_full(n.as_bytes()))
        .is_some_and(|m| {
            m.has_flag("readonly") || m.has_flag("write") || m.has_flag("may_replicate")
        })
}

/// Whether a command's row is shown (not `admin`, not `skip_monitor`), by
/// its full name.
pub fn shown(fullname: &str) -> bool {
    crate::meta::find_full(fullname.as_bytes())
        .is_none_or(|m| !m.has_flag("admin") && !m.has_flag("skip_monitor"))
}

/// This family's rows of the command table (see [`crate::command::table`]).
#[rustfmt::skip]
pub(crate) fn commands() -> Vec<crate::command::Spec> {
    use crate::command::Spec;
    vec![
        Spec::local::<Monitor>("monitor", 1, &["admin", "noscript", "loading", "stale"], [0, 0, 0], "server", "Listens for all requests received by the server in real-time."),
    ]
}

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
//! The lines go through one broadcast channel. Nothing is formatted while
//! no client monitors (one atomic load per command: [`Monitors::active`]),
//! so MONITOR costs the other clients nothing until someone uses it. A
//! monitoring client that falls more than the channel's capacity behind
//! loses the oldest lines rather than holding anyone up (redis would
//! instead buffer them until its output-buffer limit closes the client).
//!
//! While a connection monitors, its loop is [`run`]'s: lines out, and of its
//! own commands only those that do not touch the keyspace (QUIT, RESET,
//! PING...) are answered; RESET ends monitoring, as in redis.

use std::fmt::Write as _;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::broadcast;

use super::{LocalCommand, Plan, Session};
use crate::args::Args;
use crate::error::CommandError;
use crate::reply::Reply;
use crate::state::{lock, ClientHandle, Peer, Shared};

/// Lines a monitoring client may fall behind before it loses some.
const CAPACITY: usize = 16 * 1024;

/// The monitoring clients' channel.
pub struct Monitors {
    tx: broadcast::Sender<Bytes>,
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

impl Monitors {
    /// Whether anyone monitors (checked for every command).
    pub fn active(&self) -> bool {
        self.count.load(Ordering::Relaxed) > 0
    }

    /// Sends one command's line.
    pub fn feed(&self, db: u32, client: &ClientHandle, argv: &[Bytes]) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let mut line = Vec::with_capacity(64 + argv.iter().map(|a| a.len() + 3).sum::<usize>());
        let mut head = String::new();
        let _ = write!(head, "+{}.{:06} ", now.as_secs(), now.subsec_micros());
        match &client.peer {
            Peer::Unix(path) => {
                let _ = write!(head, "[{db} unix:{path}] ");
            }
            Peer::Tcp(peer, _) => {
                let _ = write!(head, "[{db} {peer}] ");
            }
        }
        line.extend_from_slice(head.as_bytes());
        for (i, a) in argv.iter().enumerate() {
            if i > 0 {
                line.push(b' ');
            }
            repr(&mut line, a);
        }
        line.extend_from_slice(b"\r\n");
        let _ = self.tx.send(Bytes::from(line));
    }
}

/// redis's `sdscatrepr`: a quoted string with `\\`, `\"`, `\n`, `\r`, `\t`,
/// `\a`, `\b` escaped and other unprintable bytes as `\xHH`.
fn repr(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &b in s {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            // isprint: 0x20 to 0x7e.
            0x20..=0x7e => out.push(b),
            _ => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

/// `MONITOR`
pub struct Monitor;

impl LocalCommand for Monitor {
    fn parse(_args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        Ok(Monitor)
    }
    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        if s.multi.is_some() {
            return Err(CommandError::Other(
                "MONITOR isn't allowed for DENY BLOCKING client".into(),
            ));
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
/// holds what the client sent and the connection has not read yet.
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
    let ended = loop {
        // Commands already received are answered first.
        match answer_own(session, &shared, input) {
            Own::Nothing => {}
            Own::Reply(bytes, then) => {
                if stream.write_all(&bytes).await.is_err() {
                    break Ended::Close;
                }
                if let Some(end) = then {
                    break end;
                }
                continue;
            }
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
            Event::Line(Ok(line)) => {
                if stream.write_all(&line).await.is_err() {
                    break Ended::Close;
                }
                shared
                    .counters
                    .net_output_bytes
                    .fetch_add(line.len() as u64, Ordering::Relaxed);
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

/// What woke the monitoring loop.
enum Event {
    /// A line to send, or the channel's news.
    Line(Result<Bytes, broadcast::error::RecvError>),
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

/// Answers the commands a monitoring client sent: those answered on the
/// connection are run; anything that would touch the keyspace gets redis's
/// refusal for a replica-flagged client.
fn answer_own(session: &mut Session, shared: &Shared, input: &mut BytesMut) -> Own {
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
    let is_reset = request[0].eq_ignore_ascii_case(b"reset");
    let plan = super::dispatch(session, request);
    let mut out = BytesMut::new();
    let then = match plan {
        Plan::Reply(r) => {
            r.encode(&mut out, session.resp3);
            is_reset.then_some(Ended::Reset)
        }
        Plan::ReplyAndClose(r) => {
            r.encode(&mut out, session.resp3);
            Some(Ended::Close)
        }
        Plan::Close => Some(Ended::Close),
        _ => {
            Reply::error("ERR Replica can't interact with the keyspace")
                .encode(&mut out, session.resp3);
            None
        }
    };
    Own::Reply(out.to_vec(), then)
}

/// Whether a command's row is shown (not `admin`, not `skip_monitor`), by
/// its full name.
pub fn shown(fullname: &str) -> bool {
    super::meta::find_full(fullname.as_bytes())
        .is_none_or(|m| !m.has_flag("admin") && !m.has_flag("skip_monitor"))
}

/// This family's rows of the command table (see [`super::table`]).
#[rustfmt::skip]
pub(super) fn commands() -> Vec<super::Spec> {
    use super::Spec;
    vec![
        Spec::local::<Monitor>("monitor", 1, &["admin", "noscript", "loading", "stale"], [0, 0, 0], "server", "Listens for all requests received by the server in real-time."),
    ]
}

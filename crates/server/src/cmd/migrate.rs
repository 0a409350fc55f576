//! MIGRATE: DUMP here, RESTORE there, then DEL here, as redis's
//! `migrateCommand` does, to a redis-server or another respite.
//!
//! redis runs the whole command on its one thread, blocking the server for
//! the network round trip. Here the three steps are split so nothing
//! blocks the writer on the network: the keys are read in one operation on
//! the writer (one consistent state, as redis sees it), the RESTOREs go out
//! and their replies come back on the client's connection (its worker
//! thread handed to the runtime's other tasks meanwhile), and the keys the
//! target accepted are then deleted in one more writer operation, unless
//! COPY. A key changed by another client between the read and the delete
//! (its value or expiry no longer what was sent) is not deleted: it then
//! exists on both sides, rather than a write being lost.
//!
//! Each MIGRATE opens its own connection to the target (redis caches one
//! per target for ten seconds), so the target always gets a SELECT.
//! Replies and errors are redis's: `+NOKEY` when no key exists, `-IOERR
//! error or timeout connecting to the client`, `-IOERR error or timeout
//! writing|reading to target instance`, `ERR Target instance replied with
//! error: ...`; a failure to write or to read the first reply is tried
//! once more on a new connection, unless it was a timeout.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use respite_engine::{EngineError, WriteItem, WriteOp};

use crate::args::{parse_i64, Args};
use crate::cmd::dump::read_value;
use crate::command::{LocalCommand, Plan, Session};
use crate::error::CommandError;
use crate::reply::Reply;
use crate::state::Shared;

/// `MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE]
/// [AUTH password | AUTH2 username password] [KEYS key [key ...]]`
pub struct Migrate {
    host: Bytes,
    port: Bytes,
    keys: Vec<Bytes>,
    dbid: i64,
    timeout: Duration,
    copy: bool,
    replace: bool,
    /// AUTH's (username, password).
    auth: Option<(Option<Bytes>, Bytes)>,
}

/// A key as it was read and sent: its name, its payload and expiry.
struct Sent {
    key: Bytes,
    payload: Vec<u8>,
    expire_at: Option<i64>,
}

/// C's `atoi`: leading blanks, a sign, the digits up to the first other
/// byte; 0 when there are none.
fn atoi(b: &[u8]) -> i64 {
    let s = std::str::from_utf8(b).unwrap_or("").trim_start();
    let (neg, rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let n = digits.parse::<i64>().unwrap_or(0);
    if neg {
        -n
    } else {
        n
    }
}

fn bulk(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

fn array(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(format!("*{n}\r\n").as_bytes());
}

/// How a transfer ended.
enum Outcome {
    /// Every reply read: the keys the target accepted, and the first
    /// error it sent, if any.
    Done(Vec<usize>, Option<String>),
    /// The connection failed: `connecting`, or while `writing` or reading
    /// (after `accepted` keys were restored), and whether by a timeout.
    Failed {
        connecting: bool,
        writing: bool,
        accepted: Vec<usize>,
        replies: usize,
        timeout: bool,
    },
}

/// Why [`Migrate::connect`] failed.
enum ConnectError {
    Connect,
    Write,
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
    )
}

impl Migrate {
    /// Connects as redis's `connBlockingConnect` does: an address that
    /// does not resolve, or no answer within the timeout, is a failure to
    /// connect (`Err(Connect)`); a refusal shows only when redis writes to
    /// the socket, so it is a failure to write (`Err(Write)`).
    fn connect(&self) -> Result<TcpStream, ConnectError> {
        let host = String::from_utf8_lossy(&self.host).into_owned();
        let port = u16::try_from(atoi(&self.port)).map_err(|_| ConnectError::Connect)?;
        let addrs = (host.as_str(), port)
            .to_socket_addrs()
            .map_err(|_| ConnectError::Connect)?;
        let mut failure = ConnectError::Connect;
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, self.timeout) {
                Ok(s) => {
                    s.set_read_timeout(Some(self.timeout))
                        .and_then(|()| s.set_write_timeout(Some(self.timeout)))
                        .map_err(|_| ConnectError::Write)?;
                    let _ = s.set_nodelay(true);
                    return Ok(s);
                }
                Err(e) if is_timeout(&e) => failure = ConnectError::Connect,
                Err(_) => failure = ConnectError::Write,
            }
        }
        Err(failure)
    }

    /// One attempt: connect, send AUTH, SELECT and the RESTOREs, read the
    /// replies.
    fn transfer(&self, sent: &[Sent], now: i64) -> Outcome {
        let failed = |connecting, writing, accepted, replies, timeout| Outcome::Failed {
            connecting,
            writing,
            accepted,
            replies,
            timeout,
        };
        let stream = match self.connect() {
            Ok(s) => s,
            Err(ConnectError::Connect) => return failed(true, false, Vec::new(), 0, true),
            Err(ConnectError::Write) => return failed(false, true, Vec::new(), 0, false),
        };
        let mut cmd = Vec::new();
        if let Some((user, pass)) = &self.auth {
            array(&mut cmd, if user.is_some() { 3 } else { 2 });
            bulk(&mut cmd, b"AUTH");
            if let Some(u) = user {
                bulk(&mut cmd, u);
            }
            bulk(&mut cmd, pass);
        }
        array(&mut cmd, 2);
        bulk(&mut cmd, b"SELECT");
        bulk(&mut cmd, self.dbid.to_string().as_bytes());
        for s in sent {
            let ttl = s.expire_at.map_or(0, |at| (at - now).max(1));
            array(&mut cmd, if self.replace { 5 } else { 4 });
            bulk(&mut cmd, b"RESTORE");
            bulk(&mut cmd, &s.key);
            bulk(&mut cmd, ttl.to_string().as_bytes());
            bulk(&mut cmd, &s.payload);
            if self.replace {
                bulk(&mut cmd, b"REPLACE");
            }
        }
        let mut writer = &stream;
        if let Err(e) = writer.write_all(&cmd).and_then(|()| writer.flush()) {
            return failed(false, true, Vec::new(), 0, is_timeout(&e));
        }
        let mut reader = BufReader::new(&stream);
        let mut line = String::new();
        let mut read_line = |line: &mut String| -> Result<(), bool> {
            line.clear();
            let mut raw = Vec::new();
            match reader.read_until(b'\n', &mut raw) {
                Ok(0) => Err(false),
                Ok(_) => {
                    *line = String::from_utf8_lossy(&raw)
                        .trim_end_matches(['\r', '\n'])
                        .to_string();
                    Ok(())
                }
                Err(e) => Err(is_timeout(&e)),
            }
        };
        let mut first_error: Option<String> = None;
        let mut pre_error: Option<String> = None;
        let preludes = usize::from(self.auth.is_some()) + 1;
        for _ in 0..preludes {
            if let Err(timeout) = read_line(&mut line) {
                return failed(false, false, Vec::new(), 0, timeout);
            }
            if line.starts_with('-') && pre_error.is_none() {
                pre_error = Some(line[1..].to_string());
            }
        }
        let mut accepted = Vec::new();
        for (i, _) in sent.iter().enumerate() {
            if let Err(timeout) = read_line(&mut line) {
                return failed(false, false, accepted, i, timeout);
            }
            if pre_error.is_some() || line.starts_with('-') {
                if first_error.is_none() {
                    first_error = Some(
                        pre_error
                            .clone()
                            .unwrap_or_else(|| line.get(1..).unwrap_or("").to_string()),
                    );
                }
            } else {
                accepted.push(i);
            }
        }
        Outcome::Done(accepted, first_error)
    }

    /// Deletes the keys the target accepted, each only if it still holds
    /// what was sent; waits for the commit.
    fn delete_sent(shared: &Shared, db: u32, gone: Vec<Sent>) {
        if gone.is_empty() {
            return;
        }
        let op: WriteOp<Reply> = Box::new(move |txn| {
            for s in &gone {
                let now = read_value(txn, db, &s.key).map_err(engine_error)?;
                if let Some((value, expire_at)) = now {
                    if expire_at == s.expire_at && respite_rdb::encode_dump(&value) == s.payload {
                        txn.delete(db, &s.key)?;
                    }
                }
            }
            Ok(Reply::Ok)
        });
        let (tx, rx) = std::sync::mpsc::channel();
        let item = WriteItem {
            ops: vec![op],
            done: Box::new(move |results| {
                let _ = tx.send(results);
            }),
        };
        if shared.engine.submit_write(item).is_ok() {
            let _ = rx.recv();
        }
    }

    /// Runs the transfer (with redis's one retry) and the deletes; the
    /// reply.
    fn finish(self, shared: &Shared, db: u32, sent: Vec<Sent>) -> Reply {
        let mut retried = false;
        loop {
            let now = respite_engine::now_ms();
            let outcome = self.transfer(&sent, now);
            let (accepted, reply) = match outcome {
                Outcome::Done(accepted, None) => (accepted, Reply::Ok),
                Outcome::Done(accepted, Some(e)) => (
                    accepted,
                    Reply::from(CommandError::Other(format!(
                        "Target instance replied with error: {e}"
                    ))),
                ),
                Outcome::Failed {
                    connecting: true, ..
                } => {
                    return Reply::Error(Bytes::from_static(
                        b"IOERR error or timeout connecting to the client",
                    ))
                }
                Outcome::Failed {
                    writing,
                    accepted,
                    replies,
                    timeout,
                    ..
                } => {
                    if replies == 0 && !timeout && !retried {
                        retried = true;
                        continue;
                    }
                    let text = format!(
                        "IOERR error or timeout {} to target instance",
                        if writing { "writing" } else { "reading" }
                    );
                    (accepted, Reply::Error(Bytes::from(text)))
                }
            };
            if !self.copy {
                let mut sent = sent;
                let gone: Vec<Sent> = accepted
                    .iter()
                    .rev()
                    .map(|&i| sent.swap_remove(i))
                    .collect();
                Self::delete_sent(shared, db, gone);
            }
            return reply;
        }
    }
}

fn engine_error(e: CommandError) -> EngineError {
    match e {
        CommandError::Engine(e) => e,
        other => EngineError::Internal(other.to_string()),
    }
}

impl LocalCommand for Migrate {
    fn parse(args: &mut Args, _session: &Session) -> Result<Self, CommandError> {
        let host = args.next()?;
        let port = args.next()?;
        let key = args.next()?;
        let db_arg = args.next()?;
        let timeout_arg = args.next()?;
        let mut copy = false;
        let mut replace = false;
        let mut auth = None;
        let mut keys = None;
        while args.remaining() > 0 {
            match args.next_upper()?.as_str() {
                "COPY" => copy = true,
                "REPLACE" => replace = true,
                "AUTH" => {
                    if args.remaining() < 1 {
                        return Err(CommandError::Syntax);
                    }
                    auth = Some((None, args.next()?));
                }
                "AUTH2" => {
                    if args.remaining() < 2 {
                        return Err(CommandError::Syntax);
                    }
                    let user = args.next()?;
                    auth = Some((Some(user), args.next()?));
                }
                "KEYS" => {
                    if !key.is_empty() {
                        return Err(CommandError::Other("When using MIGRATE KEYS option, the key argument must be set to the empty string".into()));
                    }
                    keys = Some(args.rest());
                }
                _ => return Err(CommandError::Syntax),
            }
        }
        let timeout = parse_i64(&timeout_arg).ok_or(CommandError::NotInteger)?;
        let dbid = parse_i64(&db_arg).ok_or(CommandError::NotInteger)?;
        let timeout = if timeout <= 0 { 1000 } else { timeout };
        Ok(Migrate {
            host,
            port,
            keys: keys.unwrap_or_else(|| vec![key]),
            dbid,
            timeout: Duration::from_millis(timeout as u64),
            copy,
            replace,
            auth,
        })
    }

    fn apply(self, session: &mut Session) -> Result<Plan, CommandError> {
        let db = session.db();
        let shared = session.shared.clone();
        let read: Arc<Mutex<Vec<Sent>>> = Arc::default();
        let keys = self.keys.clone();
        let into = read.clone();
        // Every key in one state: read on the writer, between two writes.
        let op: WriteOp<Reply> = Box::new(move |txn| {
            let mut sent = Vec::new();
            for key in keys {
                if let Some((value, expire_at)) = read_value(txn, db, &key).map_err(engine_error)? {
                    sent.push(Sent {
                        key,
                        payload: respite_rdb::encode_dump(&value),
                        expire_at,
                    });
                }
            }
            if let Ok(mut slot) = into.lock() {
                *slot = sent;
            }
            Ok(Reply::Ok)
        });
        let then: crate::command::AfterFn = Box::new(move |reply| {
            if let Some(Reply::Error(e)) = reply {
                return Reply::Error(e);
            }
            let sent = read
                .lock()
                .map(|mut s| std::mem::take(&mut *s))
                .unwrap_or_default();
            if sent.is_empty() {
                return Reply::Simple("NOKEY");
            }
            tokio::task::block_in_place(|| self.finish(&shared, db, sent))
        });
        Ok(Plan::After(Some(op), then))
    }
}

/// This family's rows of the command table (see [`crate::command::table`]).
#[rustfmt::skip]
pub(crate) fn commands() -> Vec<crate::command::Spec> {
    use crate::command::Spec;
    vec![
        Spec::local::<Migrate>("migrate"),
    ]
}

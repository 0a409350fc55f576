//! Connections: dialing, the handshake, and the receive buffer.
//!
//! A connection is split into a read half and a write half from the start,
//! because the open-loop mode writes on schedule while it reads replies
//! concurrently; the closed loop simply uses both halves in turn. Both TCP
//! and Unix sockets are boxed behind the same trait objects: the dynamic
//! call costs nothing next to the syscall it wraps, and it keeps every
//! runner generic over the transport.
//!
//! The handshake runs before any measurement: `HELLO 3` (with `AUTH` folded
//! in) for RESP3, otherwise `AUTH`, then `SELECT` when a database is given.

use std::io;
use std::pin::Pin;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};
use tokio::time::Sleep;

use crate::error::Error;
use crate::keys::push_u64;
use crate::resp::{self, Reply};
use crate::target::{Addr, Target};

/// The read half of a connection, whatever the transport.
pub type Rd = Box<dyn AsyncRead + Unpin + Send>;
/// The write half of a connection, whatever the transport.
pub type Wr = Box<dyn AsyncWrite + Unpin + Send>;

/// A growable receive buffer that is compacted rather than reallocated, so
/// steady-state reading never allocates.
pub struct RecvBuf {
    /// The storage; only ever grows, and only for a reply larger than it.
    buf: Vec<u8>,
    /// Start of the bytes not yet consumed.
    start: usize,
    /// End of the bytes read so far.
    end: usize,
}

impl RecvBuf {
    /// An empty buffer, sized so that a typical pipeline's replies arrive in
    /// one read.
    pub fn new() -> RecvBuf {
        RecvBuf {
            buf: vec![0; 64 * 1024],
            start: 0,
            end: 0,
        }
    }
    /// The bytes read but not yet consumed, starting at a reply boundary.
    #[inline]
    pub fn data(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }
    /// Drops the first `n` bytes of `data()` once a reply has been handled.
    #[inline]
    pub fn consume(&mut self, n: usize) {
        self.start += n;
        // Rewinding when empty keeps the common case (every reply consumed)
        // from ever needing the copy in `fill`.
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }
    /// Reads more bytes; returns 0 at end of stream.
    pub async fn fill(&mut self, rd: &mut Rd) -> io::Result<usize> {
        if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else {
                // A single reply larger than the buffer: grow.
                let n = self.buf.len() * 2;
                self.buf.resize(n, 0);
            }
        }
        let n = rd.read(&mut self.buf[self.end..]).await?;
        self.end += n;
        Ok(n)
    }
}

/// How every connection of a run is set up, taken from the command line.
#[derive(Debug, Clone)]
pub struct ConnOpts {
    /// Negotiate RESP3 with `HELLO 3`.
    pub resp3: bool,
    /// ACL user; only used together with `password`.
    pub user: Option<String>,
    /// Password for `AUTH` (or `HELLO ... AUTH`); none means no `AUTH`.
    pub password: Option<String>,
    /// Database to `SELECT`; 0, the server's default, sends nothing.
    pub db: u32,
    /// How long to wait for a reply before failing the run.
    pub timeout: Duration,
}

/// The read half with its buffer; owned separately so that the open loop can
/// read while it writes.
pub struct Reader {
    /// The socket's read half.
    pub rd: Rd,
    /// Bytes received and not yet parsed into replies.
    pub rbuf: RecvBuf,
    /// The target's name, for error messages.
    pub target: String,
    /// How long a read may wait before the run fails with `Error::Timeout`.
    pub timeout: Duration,
    /// The read timeout, one timer per connection re-armed before each read
    /// (see `fill`).
    deadline: Pin<Box<Sleep>>,
}

/// One connection to a target, handshake done and ready for requests.
pub struct Conn {
    /// The read half and its buffer.
    pub reader: Reader,
    /// The socket's write half.
    pub wr: Wr,
    /// The target's name, for error messages.
    pub target: String,
}

/// Encodes a command given as plain arguments (used off the hot path).
pub fn encode_args(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.push(b'*');
    push_u64(out, args.len() as u64);
    out.extend_from_slice(b"\r\n");
    for a in args {
        out.push(b'$');
        push_u64(out, a.len() as u64);
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

impl Conn {
    /// Dials `target` and performs the handshake `opts` asks for.
    pub async fn connect(target: &Target, opts: &ConnOpts) -> Result<Conn, Error> {
        let name = target.name.clone();
        let cerr = |source| Error::Connect {
            target: name.clone(),
            source,
        };
        let (rd, wr): (Rd, Wr) = match &target.addr {
            Addr::Tcp { host, port } => {
                let s = TcpStream::connect((host.as_str(), *port))
                    .await
                    .map_err(cerr)?;
                // Pipelines are written whole; Nagle would only add delay.
                s.set_nodelay(true).map_err(cerr)?;
                let (r, w) = s.into_split();
                (Box::new(r), Box::new(w))
            }
            Addr::Unix(p) => {
                let s = UnixStream::connect(p).await.map_err(cerr)?;
                let (r, w) = s.into_split();
                (Box::new(r), Box::new(w))
            }
        };
        let mut c = Conn {
            reader: Reader {
                rd,
                rbuf: RecvBuf::new(),
                target: target.name.clone(),
                timeout: opts.timeout,
                deadline: Box::pin(tokio::time::sleep(opts.timeout)),
            },
            wr,
            target: target.name.clone(),
        };
        c.handshake(opts).await?;
        Ok(c)
    }

    /// Sends `HELLO`/`AUTH`/`SELECT` one at a time, failing on the first
    /// error reply. This runs once per connection, so clarity wins over
    /// pipelining.
    async fn handshake(&mut self, o: &ConnOpts) -> Result<(), Error> {
        let user = o.user.as_deref().unwrap_or("default").as_bytes();
        let mut cmds: Vec<Vec<&[u8]>> = Vec::new();
        if o.resp3 {
            let mut hello: Vec<&[u8]> = vec![b"HELLO", b"3"];
            if let Some(p) = &o.password {
                hello.extend([b"AUTH" as &[u8], user, p.as_bytes()]);
            }
            cmds.push(hello);
        } else if let Some(p) = &o.password {
            match &o.user {
                Some(u) => cmds.push(vec![b"AUTH", u.as_bytes(), p.as_bytes()]),
                None => cmds.push(vec![b"AUTH", p.as_bytes()]),
            }
        }
        let db = o.db.to_string();
        if o.db != 0 {
            cmds.push(vec![b"SELECT", db.as_bytes()]);
        }
        for cmd in cmds {
            let mut buf = Vec::new();
            encode_args(&mut buf, &cmd);
            self.send(&buf).await?;
            if let Some(err) = self.reader.read_reply(|r| r.error_message()).await? {
                return Err(Error::Handshake {
                    target: self.target.clone(),
                    reply: err,
                });
            }
        }
        Ok(())
    }

    /// Checks that the server accepts commands on this connection and asks
    /// who it is, once per target before any measurement.
    ///
    /// `PING` must succeed: a server that wants a password nobody gave
    /// answers every request `-NOAUTH`, and failing here names the cause
    /// at once instead of measuring a run of refusals. `INFO server` may
    /// fail (not every RESP server has it); its `*_version` fields are
    /// returned for the report's settings.
    pub async fn probe(&mut self) -> Result<Vec<(String, String)>, Error> {
        let mut buf = Vec::new();
        encode_args(&mut buf, &[b"PING"]);
        encode_args(&mut buf, &[b"INFO", b"server"]);
        self.send(&buf).await?;
        if let Some(mut err) = self.reader.read_reply(|r| r.error_message()).await? {
            if err.starts_with("NOAUTH") {
                err.push_str(" (give the password with -a/--password)");
            }
            return Err(Error::Handshake {
                target: self.target.clone(),
                reply: err,
            });
        }
        let info = self
            .reader
            .read_reply(|r| match r {
                Reply::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
                _ => String::new(),
            })
            .await?;
        Ok(info
            .lines()
            .filter_map(|l| l.trim().split_once(':'))
            // gcc_version is how the server was built, not what it is.
            .filter(|(k, _)| k.ends_with("_version") && *k != "gcc_version")
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect())
    }

    /// Writes all of `buf` (typically a whole pipeline) to the server.
    pub async fn send(&mut self, buf: &[u8]) -> Result<(), Error> {
        self.wr.write_all(buf).await.map_err(|source| Error::Io {
            target: self.target.clone(),
            source,
        })
    }
}

impl Reader {
    /// Reads more bytes into the receive buffer, failing on EOF or timeout.
    ///
    /// The timeout re-arms this connection's own timer instead of wrapping
    /// each read in `tokio::time::timeout`: that registered and, on drop,
    /// unregistered a timer-wheel entry (taking the driver lock) on every
    /// read, which showed up in profiles of pipelined runs. Moving an
    /// armed timer's deadline later only records the new deadline; tokio
    /// re-checks it when the old one fires.
    pub async fn fill(&mut self) -> Result<(), Error> {
        self.deadline
            .as_mut()
            .reset(tokio::time::Instant::now() + self.timeout);
        let res = tokio::select! {
            biased;
            r = self.rbuf.fill(&mut self.rd) => r,
            () = self.deadline.as_mut() => {
                return Err(Error::Timeout {
                    target: self.target.clone(),
                    secs: self.timeout.as_secs(),
                })
            }
        };
        match res {
            Err(source) => Err(Error::Io {
                target: self.target.clone(),
                source,
            }),
            Ok(0) => Err(Error::Closed {
                target: self.target.clone(),
            }),
            Ok(_) => Ok(()),
        }
    }

    /// Reads one reply (skipping pushes) and maps it with `f`.
    pub async fn read_reply<T>(&mut self, f: impl Fn(&Reply<'_>) -> T) -> Result<T, Error> {
        loop {
            let parsed = resp::parse(self.rbuf.data()).map_err(|source| Error::Protocol {
                target: self.target.clone(),
                source,
            })?;
            match parsed {
                Some((Reply::Push, n)) => self.rbuf.consume(n),
                Some((r, n)) => {
                    let out = f(&r);
                    self.rbuf.consume(n);
                    return Ok(out);
                }
                None => self.fill().await?,
            }
        }
    }
}

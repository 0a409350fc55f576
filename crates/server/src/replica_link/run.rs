//! The link's task: connect, handshake, synchronize, follow the stream;
//! on any failure, wait a second and start again (see the module docs of
//! `crate::replica_link`).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use respite_engine::upstream::Position;
use respite_engine::{EngineError, WriteItem, WriteOp};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

use super::apply::{self, Batch, Parser};
use super::{unix_now, State};
use crate::reply::Reply;
use crate::state::Shared;
use crate::sync::lock;

/// Batches applied at once: one committing, one queued behind it.
const IN_FLIGHT: usize = 2;

/// A batch this large stops reading until one in flight is done.
const BATCH_MAX_CMDS: usize = 50_000;
const BATCH_MAX_BYTES: usize = 64 << 20;

/// Points the server at `master` (or, `None`, makes it a master again) and
/// starts the link's task for it; a link already running stops at its
/// next step, having queued nothing more.
pub(crate) fn replicate(shared: &Arc<Shared>, master: Option<(String, u16)>) {
    let generation = shared.upstream.retarget(master.clone());
    let Some((host, port)) = master else {
        return;
    };
    tracing::info!(master = %format!("{host}:{port}"), "replicating from a master");
    let shared = shared.clone();
    tokio::spawn(async move {
        link_loop(shared, generation, host, port).await;
    });
}

/// The stored point is forgotten on promotion: the data takes writes of
/// its own from now on, and is no point of the master's history any more.
pub(crate) fn forget_op() -> WriteOp<Reply> {
    Box::new(|txn| {
        txn.set_upstream(None)?;
        Ok(Reply::Ok)
    })
}

/// Starts the link of the configuration's `replicaof`, if any.
pub(crate) fn start_configured(shared: &Arc<Shared>) {
    if let Some(master) = shared.config.replicaof_master() {
        replicate(shared, Some(master));
    }
}

async fn link_loop(shared: Arc<Shared>, generation: u64, host: String, port: u16) {
    let link = &shared.upstream;
    loop {
        if !link.is_current(generation) || shared.is_shutting_down() {
            return;
        }
        link.set_state(State::Connecting);
        let result = session(&shared, generation, &host, port).await;
        link.set_loading(false);
        link.set_transfer(0, 0);
        if !link.is_current(generation) {
            return;
        }
        link.set_state(State::Connect);
        match result {
            Ok(()) => return,
            Err(e) => {
                tracing::warn!(master = %format!("{host}:{port}"), error = %e, "replication link lost; retrying in a second")
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = shared.wait_for_shutdown() => return,
        }
    }
}

/// Runs one operation on the writer; its result.
async fn on_writer(shared: &Shared, op: WriteOp<Reply>) -> Result<Reply, EngineError> {
    let (tx, rx) = oneshot::channel();
    let item = WriteItem {
        ops: vec![op],
        done: Box::new(move |mut results| {
            let _ = tx.send(results.pop().unwrap_or(Err(EngineError::ShuttingDown)));
        }),
    };
    shared.engine.submit_write(item)?;
    rx.await.unwrap_or(Err(EngineError::ShuttingDown))
}

/// The point stored with the data. Read through the writer, so every batch
/// submitted before is committed or rolled back by then.
async fn stored_position(shared: &Shared) -> Result<Option<Position>, String> {
    let slot: Arc<Mutex<Option<Position>>> = Arc::default();
    let filled = slot.clone();
    on_writer(
        shared,
        Box::new(move |txn| {
            *lock(&filled) = txn.upstream()?;
            Ok(Reply::Ok)
        }),
    )
    .await
    .map_err(|e| e.to_string())?;
    let position = lock(&slot).take();
    Ok(position)
}

/// The master's connection: the socket and what was read and not yet
/// consumed.
struct Conn {
    stream: TcpStream,
    input: BytesMut,
    timeout: Duration,
}

impl Conn {
    /// Reads more bytes; an error at the end of the stream or after
    /// `timeout` of silence.
    async fn fill(&mut self) -> Result<usize, String> {
        let read = tokio::time::timeout(self.timeout, self.stream.read_buf(&mut self.input)).await;
        match read {
            Err(_) => Err("timeout talking to the master".into()),
            Ok(Err(e)) => Err(format!("reading from the master: {e}")),
            Ok(Ok(0)) => Err("the master closed the connection".into()),
            Ok(Ok(n)) => Ok(n),
        }
    }

    /// One reply line (without its CRLF).
    async fn line(&mut self) -> Result<String, String> {
        loop {
            if let Some(at) = memchr::memchr(b'\n', &self.input) {
                let line = self.input.split_to(at + 1);
                let text = String::from_utf8_lossy(&line[..at]);
                return Ok(text.trim_end_matches('\r').to_string());
            }
            if self.input.len() > 64 * 1024 {
                return Err("the master sent a line too long".into());
            }
            self.fill().await?;
        }
    }

    /// One reply line that is not a keep-alive newline.
    async fn reply(&mut self) -> Result<String, String> {
        loop {
            let line = self.line().await?;
            if !line.is_empty() {
                return Ok(line);
            }
        }
    }

    async fn send(&mut self, args: &[&[u8]]) -> Result<(), String> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        self.stream
            .write_all(&out)
            .await
            .map_err(|e| format!("writing to the master: {e}"))
    }

    /// A command whose reply must not be an error.
    async fn ask(&mut self, args: &[&[u8]]) -> Result<String, String> {
        self.send(args).await?;
        self.reply().await
    }

    async fn ack(&mut self, offset: i64) -> Result<(), String> {
        self.send(&[b"REPLCONF", b"ACK", offset.to_string().as_bytes()])
            .await
    }
}

/// One connection to the master, until it fails or the link is stopped
/// (`Ok`).
async fn session(
    shared: &Arc<Shared>,
    generation: u64,
    host: &str,
    port: u16,
) -> Result<(), String> {
    let link = &shared.upstream;
    let timeout = Duration::from_secs(
        shared
            .params
            .get("repl-timeout")
            .parse::<u64>()
            .unwrap_or(60)
            .max(1),
    );
    let stream = tokio::time::timeout(timeout, TcpStream::connect((host, port)))
        .await
        .map_err(|_| "timeout connecting to the master".to_string())?
        .map_err(|e| format!("connecting to the master: {e}"))?;
    let _ = stream.set_nodelay(true);
    let mut conn = Conn {
        stream,
        input: BytesMut::with_capacity(64 * 1024),
        timeout,
    };
    link.set_state(State::Handshake);
    link.touch();
    // redis's handshake (`syncWithMaster`).
    let pong = conn.ask(&[b"PING"]).await?;
    if pong.starts_with('-')
        && !pong.starts_with("-NOAUTH")
        && !pong.starts_with("-NOPERM")
        && !pong.starts_with("-ERR operation not permitted")
    {
        return Err(format!("error reply to PING from master: '{pong}'"));
    }
    let auth = shared.params.get("masterauth");
    if !auth.is_empty() {
        let user = shared.params.get("masteruser");
        let reply = if user.is_empty() {
            conn.ask(&[b"AUTH", auth.as_bytes()]).await?
        } else {
            conn.ask(&[b"AUTH", user.as_bytes(), auth.as_bytes()])
                .await?
        };
        if reply.starts_with('-') {
            return Err(format!("unable to AUTH to MASTER: {reply}"));
        }
    }
    let my_port = shared.tcp_port.load(Ordering::Relaxed).to_string();
    let reply = conn
        .ask(&[b"REPLCONF", b"listening-port", my_port.as_bytes()])
        .await?;
    if reply.starts_with('-') {
        tracing::info!(reply, "the master refused REPLCONF listening-port");
    }
    let reply = conn
        .ask(&[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"])
        .await?;
    if reply.starts_with('-') {
        tracing::info!(reply, "the master refused REPLCONF capa");
    }
    // Where the data stands, read after every batch of an earlier link
    // settled.
    let stored = stored_position(shared).await?;
    let reply = match &stored {
        Some(p) => {
            let next = (p.offset + 1).to_string();
            conn.ask(&[b"PSYNC", p.replid.as_bytes(), next.as_bytes()])
                .await?
        }
        None => conn.ask(&[b"PSYNC", b"?", b"-1"]).await?,
    };
    let (replid, offset, db) = if let Some(rest) = reply.strip_prefix("+FULLRESYNC ") {
        let mut words = rest.split_whitespace();
        let replid = words.next().unwrap_or_default().to_string();
        let offset = words.next().and_then(|o| o.parse::<i64>().ok());
        let (Some(offset), 40) = (offset, replid.len()) else {
            return Err(format!("bad +FULLRESYNC reply from the master: '{reply}'"));
        };
        tracing::info!(replid, offset, "full resynchronization from the master");
        let db = full_sync(shared, &mut conn, generation, &replid, offset).await?;
        link.full_syncs.fetch_add(1, Ordering::Relaxed);
        (replid, offset, db)
    } else if let Some(rest) = reply.strip_prefix("+CONTINUE") {
        let Some(p) = stored else {
            return Err("the master continued a stream this server has no point in".into());
        };
        let new_id = rest.trim();
        let replid = if new_id.len() == 40 {
            new_id.to_string()
        } else {
            p.replid.clone()
        };
        tracing::info!(
            replid,
            offset = p.offset,
            "partial resynchronization from the master (+CONTINUE)"
        );
        link.partial_syncs.fetch_add(1, Ordering::Relaxed);
        (replid, p.offset, p.db)
    } else {
        return Err(format!(
            "unexpected reply to PSYNC from the master: '{reply}'"
        ));
    };
    link.set_position(&replid, offset);
    follow(shared, &mut conn, generation, replid, offset, db).await
}

/// Receives the RDB of a full synchronization and loads it; the stream's
/// database after it.
async fn full_sync(
    shared: &Arc<Shared>,
    conn: &mut Conn,
    generation: u64,
    replid: &str,
    offset: i64,
) -> Result<u32, String> {
    let link = &shared.upstream;
    link.set_state(State::Sync);
    let path = {
        let mut p = shared.engine.db_path().as_os_str().to_owned();
        p.push(".replica-sync.rdb");
        PathBuf::from(p)
    };
    let received = receive_rdb(shared, conn, &path).await;
    let result = match received {
        Ok(diskless) => {
            let loaded = load_rdb(shared, conn, generation, &path, replid, offset).await;
            if diskless && loaded.is_ok() {
                // A diskless master starts the stream on the first ACK.
                conn.ack(offset).await?;
            }
            loaded
        }
        Err(e) => Err(e),
    };
    let _ = std::fs::remove_file(&path);
    result
}

/// Reads the bulk RDB into `path`; whether it came diskless (`$EOF:`).
async fn receive_rdb(shared: &Shared, conn: &mut Conn, path: &PathBuf) -> Result<bool, String> {
    let link = &shared.upstream;
    let header = conn.reply().await?;
    if header.starts_with('-') {
        return Err(format!(
            "MASTER aborted replication with an error: {header}"
        ));
    }
    let Some(size) = header.strip_prefix('$') else {
        return Err(format!(
            "bad protocol from MASTER, the first byte is not '$' (we received '{header}')"
        ));
    };
    let mark: Option<Vec<u8>> = size
        .strip_prefix("EOF:")
        .map(|m| m.as_bytes().to_vec())
        .filter(|m| m.len() == 40);
    let mut left = match &mark {
        Some(_) => None,
        None => Some(
            size.parse::<u64>()
                .map_err(|_| format!("bad RDB length from the master: '{header}'"))?,
        ),
    };
    if size.starts_with("EOF:") && mark.is_none() {
        return Err(format!("bad EOF mark from the master: '{header}'"));
    }
    link.set_transfer(left.map_or(-1, |n| n as i64), 0);
    // A local file written through a large buffer: page-cache writes,
    // which do not hold the runtime's thread up noticeably.
    let file =
        std::fs::File::create(path).map_err(|e| format!("creating {}: {e}", path.display()))?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    let io = |e: std::io::Error| format!("writing the RDB: {e}");
    let mut read: u64 = 0;
    // Diskless: the last 40 bytes are held back until more arrive, so the
    // file never holds the mark.
    let mut held: Vec<u8> = Vec::new();
    loop {
        if conn.input.is_empty() {
            conn.fill().await?;
        }
        let chunk = match left {
            Some(n) => {
                let take = (n as usize).min(conn.input.len());
                conn.input.split_to(take)
            }
            None => conn.input.split(),
        };
        read += chunk.len() as u64;
        link.set_transfer(link.transfer().0, read);
        link.touch();
        match (&mark, &mut left) {
            (None, Some(n)) => {
                std::io::Write::write_all(&mut out, &chunk).map_err(io)?;
                *n -= chunk.len() as u64;
                if *n == 0 {
                    break;
                }
            }
            (Some(mark), _) => {
                held.extend_from_slice(&chunk);
                if held.ends_with(mark) {
                    let keep = held.len() - mark.len();
                    std::io::Write::write_all(&mut out, &held[..keep]).map_err(io)?;
                    break;
                }
                if held.len() > mark.len() {
                    let flush = held.len() - mark.len();
                    std::io::Write::write_all(&mut out, &held[..flush]).map_err(io)?;
                    held.drain(..flush);
                }
            }
            (None, None) => unreachable!("a length or a mark"),
        }
    }
    std::io::Write::flush(&mut out).map_err(io)?;
    tracing::info!(bytes = read, "received the master's RDB");
    Ok(mark.is_some())
}

/// Loads the received RDB on a blocking thread, sending the master a
/// newline every second meanwhile (redis's keep-alive of a loading
/// replica); the stream's database after it.
async fn load_rdb(
    shared: &Arc<Shared>,
    conn: &mut Conn,
    generation: u64,
    path: &std::path::Path,
    replid: &str,
    offset: i64,
) -> Result<u32, String> {
    let link = &shared.upstream;
    link.forget_position();
    link.set_loading(true);
    let job_shared = shared.clone();
    let job_path = path.to_path_buf();
    let position = Position {
        replid: replid.to_string(),
        offset,
        db: 0,
    };
    let started = std::time::Instant::now();
    let mut job = tokio::task::spawn_blocking(move || {
        super::load::load(&job_shared, &job_path, position, generation)
    });
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    let loaded = loop {
        tokio::select! {
            done = &mut job => break done.map_err(|e| e.to_string()).and_then(|r| r),
            _ = tick.tick() => {
                if conn.stream.write_all(b"\n").await.is_err() {
                    // The load goes on; the link's failure shows next.
                }
            }
        }
    };
    link.set_loading(false);
    let loaded = loaded?;
    tracing::info!(
        keys = loaded.keys,
        secs = format!("{:.1}", started.elapsed().as_secs_f64()),
        "loaded the master's RDB"
    );
    Ok(loaded.db)
}

/// A batch handed to the writer: what it reaches, and its result.
struct Flight {
    end: i64,
    acks: Vec<i64>,
    done: oneshot::Receiver<Result<(), String>>,
}

/// Follows the stream from `offset` until the link fails or is stopped.
async fn follow(
    shared: &Arc<Shared>,
    conn: &mut Conn,
    generation: u64,
    replid: String,
    offset: i64,
    db: u32,
) -> Result<(), String> {
    let link = &shared.upstream;
    link.set_state(State::Connected);
    link.touch();
    tracing::info!(offset, "MASTER <-> REPLICA sync: the link is up");
    // The link is a client while it is up (redis's master client): CLIENT
    // LIST shows it, CLIENT KILL (TYPE master, its ID or ADDR) ends it,
    // and the link reconnects and continues with PSYNC.
    let master = MasterClient::register(shared, &conn.stream);
    let mut parser = Parser::new(offset, db, shared.config.databases);
    let mut flights: VecDeque<Flight> = VecDeque::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut shutdown = shared.shutdown.subscribe();
    // What was read before the stream began (after the RDB) is the
    // stream's first bytes.
    let mut broken: Option<String> = None;
    let first = conn.input.len();
    if first > 0 {
        link.read_bytes(first);
        if let Err(e) = parser.feed(&mut conn.input) {
            broken = Some(format!("protocol error from the master: {e}"));
        }
    }
    loop {
        // Hand the writer what is whole, while fewer than IN_FLIGHT
        // batches are out.
        while flights.len() < IN_FLIGHT && !parser.batch().is_empty() {
            let batch = parser.take_batch();
            match submit(shared, generation, &replid, batch) {
                Some(flight) => flights.push_back(flight),
                None => return Ok(()), // stopped by REPLICAOF
            }
        }
        if let Some(why) = broken.take() {
            // The batches already out settle first, so the next link
            // continues from what was committed.
            settle(link, conn, &mut flights).await;
            return Err(why);
        }
        let full =
            parser.batch().cmds.len() >= BATCH_MAX_CMDS || parser.batch().bytes >= BATCH_MAX_BYTES;
        // Room for a large read: the stream comes in bulk.
        if conn.input.capacity() - conn.input.len() < 16 * 1024 {
            conn.input.reserve(256 * 1024);
        }
        /// What woke the link, taken out of the `select!` before
        /// anything else borrows the connection or the flights.
        enum Event {
            Done(Result<(), String>),
            Read(std::io::Result<usize>),
            Tick,
            Stop,
            Killed,
        }
        let event = {
            let front = async {
                match flights.front_mut() {
                    Some(f) => (&mut f.done)
                        .await
                        .unwrap_or(Err("the writer stopped".into())),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                done = front => Event::Done(done),
                read = conn.stream.read_buf(&mut conn.input), if !full => Event::Read(read),
                _ = tick.tick() => Event::Tick,
                stop = shutdown.wait_for(|down| *down) => {
                    drop(stop);
                    Event::Stop
                }
                _ = master.handle.kill_notify.notified() => Event::Killed,
            }
        };
        match event {
            Event::Done(done) => {
                let Some(flight) = flights.pop_front() else {
                    continue;
                };
                if let Err(e) = done {
                    settle(link, conn, &mut flights).await;
                    return Err(format!("applying the master's commands: {e}"));
                }
                link.committed(flight.end);
                for at in flight.acks {
                    conn.ack(at).await?;
                }
            }
            Event::Read(Ok(0)) => broken = Some("the master closed the connection".into()),
            Event::Read(Err(e)) => broken = Some(format!("reading from the master: {e}")),
            Event::Read(Ok(n)) => {
                link.read_bytes(n);
                if let Err(e) = parser.feed(&mut conn.input) {
                    broken = Some(format!("protocol error from the master: {e}"));
                }
                master.saw(parser.take_last());
            }
            Event::Killed => {
                if master.handle.killed.load(Ordering::SeqCst) {
                    broken = Some("the master's client was killed (CLIENT KILL)".into());
                }
            }
            Event::Tick => {
                if !link.is_current(generation) {
                    settle(link, conn, &mut flights).await;
                    return Ok(());
                }
                conn.ack(link.offset()).await?;
                let silent = unix_now().saturating_sub(link.last_io.load(Ordering::Relaxed));
                if silent > conn.timeout.as_secs() {
                    broken = Some("timeout: no data from the master".into());
                }
            }
            Event::Stop => {
                settle(link, conn, &mut flights).await;
                return Ok(());
            }
        }
    }
}

/// The master link as a client in the registry (flag `M`), removed when
/// the link ends.
struct MasterClient {
    shared: Arc<Shared>,
    handle: Arc<crate::clients::ClientHandle>,
}

impl MasterClient {
    fn register(shared: &Arc<Shared>, stream: &TcpStream) -> MasterClient {
        use std::os::fd::AsRawFd;
        let unspecified = std::net::SocketAddr::from(([0, 0, 0, 0], 0));
        let peer = crate::clients::Peer::Tcp(
            stream.peer_addr().unwrap_or(unspecified),
            stream.local_addr().unwrap_or(unspecified),
        );
        let id = shared.next_client_id.fetch_add(1, Ordering::Relaxed);
        let handle = Arc::new(crate::clients::ClientHandle::new(id, peer));
        // redis's master client has no ACL user.
        *lock(&handle.user) = "(superuser)".into();
        handle
            .state
            .link
            .store(crate::clients::LINK_MASTER, Ordering::Relaxed);
        handle.state.fd.store(stream.as_raw_fd(), Ordering::Relaxed);
        lock(&shared.clients).insert(id, handle.clone());
        MasterClient {
            shared: shared.clone(),
            handle,
        }
    }

    /// Notes the master's last command and the database it selected.
    fn saw(&self, last: Option<(Vec<u8>, u32)>) {
        let Some((name, db)) = last else { return };
        let h = &self.handle;
        if let Some(index) = crate::command::lookup_index(&name) {
            h.last_cmd.store(index, Ordering::Relaxed);
        }
        h.state.last_row.store(usize::MAX, Ordering::Relaxed);
        h.db.store(db, Ordering::Relaxed);
        let ms = h.created.elapsed().as_millis() as u64;
        h.last_active_ms.store(ms, Ordering::Relaxed);
    }
}

impl Drop for MasterClient {
    fn drop(&mut self) {
        lock(&self.shared.clients).remove(&self.handle.id);
    }
}

/// Waits for the batches out to be committed or refused.
async fn settle(link: &super::Link, conn: &mut Conn, flights: &mut VecDeque<Flight>) {
    while let Some(flight) = flights.pop_front() {
        if let Ok(Ok(())) = flight.done.await {
            link.committed(flight.end);
            for at in flight.acks {
                let _ = conn.ack(at).await;
            }
        }
    }
}

/// Hands `batch` to the writer, unless the link is no longer current.
fn submit(shared: &Arc<Shared>, generation: u64, replid: &str, batch: Batch) -> Option<Flight> {
    let (tx, rx) = oneshot::channel();
    let end = batch.end;
    let acks = batch.acks.clone();
    let after: Arc<Mutex<apply::AfterCommit>> = Arc::default();
    let op = apply::op(shared.clone(), batch, replid.to_string(), after.clone());
    let delivery = shared.clone();
    let item = WriteItem {
        ops: vec![op],
        done: Box::new(move |mut results| {
            let result = results.pop().unwrap_or(Err(EngineError::ShuttingDown));
            if result.is_ok() {
                let after = std::mem::take(&mut *lock(&after));
                for change in after.functions {
                    change.publish();
                }
                if !after.published.is_empty() {
                    crate::command::Ctx::deliver(&delivery, after.published);
                }
            }
            let _ = tx.send(result.map(|_| ()).map_err(|e| e.to_string()));
        }),
    };
    let submitted = shared
        .upstream
        .while_current(generation, || shared.engine.submit_write(item))?;
    match submitted {
        Ok(()) => Some(Flight {
            end,
            acks,
            done: rx,
        }),
        Err(_) => None,
    }
}

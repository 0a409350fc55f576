//! respite as a replication master: redis's protocol, served to a
//! redis-server replica (`replicaof` pointed at respite) or to
//! `redis-cli --rdb`.
//!
//! **The stream.** The writer hands every committed operation over as
//! commands (`respite_engine::propagate`): each write command as itself
//! or as redis 7.0 rewrites it (`SET key value PXAT ms` for a relative
//! expiry, `SREM` for SPOP, `DEL` for GETDEL...), or, for the commands not
//! known to replay exactly, each key it changed as its new state (`SET`,
//! `RESTORE key ms payload REPLACE ABSTTL`, `DEL`; see
//! `crate::propagation`); expirations and evictions as `DEL`; FLUSHDB,
//! FLUSHALL and SWAPDB as themselves. [`Master::committed`] encodes them
//! as RESP, with a SELECT whenever the database changes and MULTI/EXEC
//! around an operation of more than one command (an EXEC or a script with
//! more than one write that took effect, an SPOP of several members), the
//! SELECT before MULTI, as redis orders them; appends them to the backlog
//! and to each replica's queue, and counts the bytes in
//! `master_repl_offset` exactly as redis counts them. A PING goes into the
//! stream every 10 seconds while replicas are attached (redis's
//! `repl-ping-replica-period`), and `REPLCONF GETACK *` when WAIT asks.
//!
//! **A full synchronization** (`PSYNC ? -1`, `SYNC`, or a PSYNC the backlog
//! cannot continue): propagation is switched on, and a write queued after
//! that is waited for, so every operation of the next group is
//! propagated. Then one writer operation pins a read snapshot on its own
//! connection (the last commit) and registers the replica's queue at the
//! offset of that same commit: the snapshot is exactly the state the queue
//! continues from. `+FULLRESYNC <replid> <offset>` is answered, the
//! snapshot is written as an RDB file on a blocking thread (newlines keep
//! the link alive meanwhile, as redis sends them), sent as
//! `$<len>\r\n<rdb>`, and then the queue, which has held everything
//! committed since. The writer never waits for any of it.
//!
//! **A partial one** (`PSYNC <replid> <offset>` within the 1 MB backlog,
//! after a broken link): `+CONTINUE <replid>` and the backlog from that
//! offset, then the live queue, registered under the same lock as the
//! backlog is read. The backlog lives in memory: after a restart of
//! respite a replica resynchronizes in full.
//!
//! **Acknowledgements.** A replica sends `REPLCONF ACK <offset>` every
//! second and when asked; WAIT counts the replicas whose acknowledged
//! offset reached the master's offset when WAIT ran.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use respite_engine::propagate::{Command, Propagator, Whole};
use respite_engine::{Engine, EngineError, View, WriteItem};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, Semaphore};

use crate::clients::{ClientHandle, Peer};
use crate::reply::Reply;
use crate::sync::lock;

/// The backlog kept for partial resynchronization (redis's default
/// `repl-backlog-size`).
pub const BACKLOG_SIZE: usize = 1024 * 1024;

/// A replica whose queue holds more than this is dropped (redis's
/// `client-output-buffer-limit replica 256mb`).
const QUEUE_LIMIT: u64 = 256 * 1024 * 1024;

/// How often a PING goes into the stream (`repl-ping-replica-period`).
const PING_PERIOD: Duration = Duration::from_secs(10);

/// A replica's state as INFO shows it.
const WAIT_BGSAVE: u8 = 0;
const SEND_BULK: u8 = 1;
const ONLINE: u8 = 2;

/// What a replica announced and acknowledged.
pub struct ReplicaInfo {
    /// The client id of its connection.
    pub id: u64,
    /// Its address.
    pub ip: String,
    /// The port it listens on (`REPLCONF listening-port`).
    pub port: u16,
    state: AtomicU8,
    /// The offset it acknowledged last.
    pub ack: AtomicU64,
    /// When it acknowledged last (ms since the master started).
    last_ack: AtomicU64,
    /// Bytes queued for it and not yet written.
    queued: AtomicU64,
}

impl ReplicaInfo {
    /// Its state as INFO names it.
    pub fn state(&self) -> &'static str {
        match self.state.load(Ordering::Relaxed) {
            WAIT_BGSAVE => "wait_bgsave",
            SEND_BULK => "send_bulk",
            _ => "online",
        }
    }
}

/// One attached replica's queue.
struct Feed {
    info: Arc<ReplicaInfo>,
    tx: mpsc::UnboundedSender<Bytes>,
}

/// A client in WAIT, woken once enough replicas acknowledged.
struct AckWaiter {
    client: Weak<ClientHandle>,
    target: u64,
    replicas: usize,
    until: Option<Instant>,
}

/// What a client announced with REPLCONF before PSYNC.
#[derive(Default, Clone)]
struct Handshake {
    port: u16,
    ip: Option<String>,
    rdb_only: bool,
}

/// A synchronization asked for by PSYNC or SYNC, which the connection
/// loop then serves.
pub struct SyncRequest {
    /// `PSYNC`'s replication id and offset; `None` for SYNC.
    psync: Option<(Bytes, i64)>,
}

#[derive(Default)]
struct Inner {
    /// Bytes ever fed: `master_repl_offset`.
    offset: u64,
    /// The last [`BACKLOG_SIZE`] bytes fed.
    backlog: VecDeque<u8>,
    /// The database the stream last selected.
    seldb: Option<u32>,
    replicas: Vec<Feed>,
    waiters: Vec<AckWaiter>,
}

/// INFO stats' synchronization counters.
#[derive(Default)]
pub struct SyncCounters {
    /// Full synchronizations served (`sync_full`).
    pub full: AtomicU64,
    /// PSYNCs continued from the backlog (`sync_partial_ok`).
    pub partial_ok: AtomicU64,
    /// PSYNCs that asked to continue and could not (`sync_partial_err`).
    pub partial_err: AtomicU64,
}

/// The master side of replication (see the module docs).
#[derive(Default)]
pub struct Master {
    /// INFO stats' synchronization counters.
    pub counters: SyncCounters,
    inner: Mutex<Inner>,
    handshakes: Mutex<HashMap<u64, Handshake>>,
    syncs: Mutex<HashMap<u64, SyncRequest>>,
    /// A backlog exists (a replica attached once).
    active: AtomicBool,
    /// The PING task runs.
    pinging: AtomicBool,
    started: std::sync::OnceLock<Instant>,
}

fn encode_command(out: &mut BytesMut, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

impl Master {
    fn now_ms(&self) -> u64 {
        self.started.get_or_init(Instant::now).elapsed().as_millis() as u64
    }

    /// `master_repl_offset`.
    pub fn offset(&self) -> u64 {
        lock(&self.inner).offset
    }

    /// Whether a backlog exists.
    pub fn backlog_active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// The backlog's first byte's offset and its length.
    pub fn backlog_range(&self) -> (u64, u64) {
        let inner = lock(&self.inner);
        let len = inner.backlog.len() as u64;
        (inner.offset + 1 - len, len)
    }

    /// The attached replicas.
    pub fn replicas(&self) -> Vec<Arc<ReplicaInfo>> {
        lock(&self.inner)
            .replicas
            .iter()
            .map(|f| f.info.clone())
            .collect()
    }

    /// Seconds since the replica last acknowledged.
    pub fn lag_secs(&self, info: &ReplicaInfo) -> u64 {
        self.now_ms()
            .saturating_sub(info.last_ack.load(Ordering::Relaxed))
            / 1000
    }

    /// Appends encoded commands to the stream.
    fn feed(&self, inner: &mut Inner, bytes: Bytes) {
        inner.offset += bytes.len() as u64;
        inner.backlog.extend(bytes.iter());
        let excess = inner.backlog.len().saturating_sub(BACKLOG_SIZE);
        inner.backlog.drain(..excess);
        inner.replicas.retain(|f| {
            let queued = f
                .info
                .queued
                .fetch_add(bytes.len() as u64, Ordering::Relaxed);
            if queued > QUEUE_LIMIT {
                tracing::warn!(
                    replica = %format!("{}:{}", f.info.ip, f.info.port),
                    "dropping a replica that reached its output limit"
                );
                return false;
            }
            f.tx.send(bytes.clone()).is_ok()
        });
    }

    /// Feeds the committed operations of one transaction (see the module
    /// docs).
    fn committed(&self, ops: Vec<Vec<Command>>) {
        let mut inner = lock(&self.inner);
        let mut out = BytesMut::new();
        for op in ops {
            let wrap = op.len() > 1;
            let select = |out: &mut BytesMut, inner: &mut Inner, db: Option<u32>| {
                if let Some(db) = db {
                    if inner.seldb != Some(db) {
                        encode_command(out, &[b"SELECT", db.to_string().as_bytes()]);
                        inner.seldb = Some(db);
                    }
                }
            };
            if wrap {
                if let Some(db) = op.iter().find_map(|c| c.db) {
                    select(&mut out, &mut inner, Some(db));
                }
                encode_command(&mut out, &[b"MULTI"]);
            }
            for cmd in &op {
                select(&mut out, &mut inner, cmd.db);
                let args: Vec<&[u8]> = cmd.args.iter().map(|a| a.as_ref()).collect();
                encode_command(&mut out, &args);
            }
            if wrap {
                encode_command(&mut out, &[b"EXEC"]);
            }
        }
        if !out.is_empty() {
            self.feed(&mut inner, out.freeze());
        }
    }

    /// Puts one command that needs no database into the stream (PING,
    /// REPLCONF GETACK).
    fn feed_plain(&self, args: &[&[u8]]) {
        let mut out = BytesMut::new();
        encode_command(&mut out, args);
        let mut inner = lock(&self.inner);
        self.feed(&mut inner, out.freeze());
    }

    /// Registers a replica's queue at the current offset (on the writer
    /// thread, between commits, for a full synchronization). The next
    /// command fed is preceded by a SELECT.
    fn attach_full(&self, info: Arc<ReplicaInfo>) -> (u64, mpsc::UnboundedReceiver<Bytes>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut inner = lock(&self.inner);
        inner.seldb = None;
        inner.replicas.push(Feed { info, tx });
        (inner.offset, rx)
    }

    /// Registers a replica's queue for a partial resynchronization from
    /// `from` (the offset of the first byte it wants), with the backlog's
    /// bytes from there; `None` when the backlog does not reach back.
    fn attach_partial(
        &self,
        info: Arc<ReplicaInfo>,
        from: u64,
    ) -> Option<(Bytes, mpsc::UnboundedReceiver<Bytes>)> {
        let mut inner = lock(&self.inner);
        if !self.backlog_active() {
            return None;
        }
        let first = inner.offset + 1 - inner.backlog.len() as u64;
        if from < first || from > inner.offset + 1 {
            return None;
        }
        let skip = (from - first) as usize;
        let tail: Vec<u8> = inner.backlog.iter().skip(skip).copied().collect();
        let (tx, rx) = mpsc::unbounded_channel();
        inner.replicas.push(Feed { info, tx });
        Some((Bytes::from(tail), rx))
    }

    fn detach(&self, id: u64) {
        lock(&self.inner).replicas.retain(|f| f.info.id != id);
    }

    /// How many replicas acknowledged `target` or beyond.
    pub fn acked(&self, target: u64) -> usize {
        lock(&self.inner)
            .replicas
            .iter()
            .filter(|f| f.info.ack.load(Ordering::Relaxed) >= target)
            .count()
    }

    /// Asks every replica for an acknowledgement (WAIT).
    pub fn request_ack(&self) {
        if !lock(&self.inner).replicas.is_empty() {
            self.feed_plain(&[b"REPLCONF", b"GETACK", b"*"]);
        }
    }

    /// Wakes `client`, blocked in WAIT, once `replicas` replicas
    /// acknowledged `target`.
    pub fn wait_for(
        &self,
        client: &Arc<ClientHandle>,
        target: u64,
        replicas: usize,
        timeout: Option<Duration>,
    ) {
        lock(&self.inner).waiters.push(AckWaiter {
            client: Arc::downgrade(client),
            target,
            replicas,
            until: timeout.map(|t| Instant::now() + t + Duration::from_secs(1)),
        });
    }

    /// A replica acknowledged: wakes the WAITs now satisfied.
    fn acknowledged(&self, info: &ReplicaInfo, offset: u64) {
        info.ack.fetch_max(offset, Ordering::Relaxed);
        info.last_ack.store(self.now_ms(), Ordering::Relaxed);
        let mut inner = lock(&self.inner);
        if inner.waiters.is_empty() {
            return;
        }
        let acks: Vec<u64> = inner
            .replicas
            .iter()
            .map(|f| f.info.ack.load(Ordering::Relaxed))
            .collect();
        let now = Instant::now();
        inner.waiters.retain(|w| {
            let Some(client) = w.client.upgrade() else {
                return false;
            };
            if w.until.is_some_and(|u| u < now) {
                return false;
            }
            if acks.iter().filter(|&&a| a >= w.target).count() < w.replicas {
                return true;
            }
            // Not blocked yet (its first try is still on the writer): kept
            // for the next acknowledgement, a second away at most.
            let ticket = lock(&client.blocked).clone();
            !ticket.is_some_and(|t| t.unblock(crate::blocking::Cancel::Timeout))
        });
    }

    /// REPLCONF from a client before its PSYNC.
    pub fn handshake(
        &self,
        id: u64,
        port: Option<u16>,
        ip: Option<String>,
        rdb_only: Option<bool>,
    ) {
        let mut all = lock(&self.handshakes);
        let h = all.entry(id).or_default();
        if let Some(p) = port {
            h.port = p;
        }
        if ip.is_some() {
            h.ip = ip;
        }
        if let Some(r) = rdb_only {
            h.rdb_only = r;
        }
    }

    /// Notes a PSYNC or SYNC, for the connection loop to serve.
    pub fn request_sync(&self, id: u64, psync: Option<(Bytes, i64)>) {
        lock(&self.syncs).insert(id, SyncRequest { psync });
    }

    /// The synchronization this client asked for, if any.
    pub fn take_sync(&self, id: u64) -> Option<SyncRequest> {
        let mut syncs = lock(&self.syncs);
        if syncs.is_empty() {
            return None;
        }
        syncs.remove(&id)
    }

    /// Forgets what a closed connection announced.
    fn forget(&self, id: u64) {
        lock(&self.handshakes).remove(&id);
        lock(&self.syncs).remove(&id);
    }
}

/// The writer's propagator: operations as commands (see the module docs).
struct Feeder {
    master: Arc<Master>,
}

fn db_arg(db: u32) -> Bytes {
    Bytes::from(db.to_string())
}

impl Propagator for Feeder {
    fn effects(&self, view: &View<'_, '_>, keys: &[(u32, Bytes)], whole: &[Whole]) -> Vec<Command> {
        let mut out = Vec::new();
        let mut swaps = Vec::new();
        for w in whole {
            out.push(match *w {
                Whole::FlushDb(db) => Command {
                    db: Some(db),
                    args: vec![Bytes::from_static(b"FLUSHDB")],
                },
                Whole::FlushAll => Command {
                    db: None,
                    args: vec![Bytes::from_static(b"FLUSHALL")],
                },
                Whole::SwapDb(a, b) => {
                    swaps.push((a, b));
                    Command {
                        db: None,
                        args: vec![Bytes::from_static(b"SWAPDB"), db_arg(a), db_arg(b)],
                    }
                }
            });
        }
        // Each key once, in the order first changed; after a SWAPDB in the
        // same operation, a key's twin in the other database too (what was
        // written before the swap now lives there).
        let mut seen = std::collections::HashSet::new();
        let mut list: Vec<(u32, Bytes)> = Vec::new();
        for (db, key) in keys {
            let mut add = |db: u32| {
                if seen.insert((db, key.clone())) {
                    list.push((db, key.clone()));
                }
            };
            add(*db);
            for &(a, b) in &swaps {
                if *db == a {
                    add(b);
                } else if *db == b {
                    add(a);
                }
            }
        }
        out.extend(
            list.iter()
                .filter_map(|(db, key)| crate::propagation::key_state(view, *db, key)),
        );
        out
    }

    fn committed(&self, ops: Vec<Vec<Command>>) {
        self.master.committed(ops);
    }
}

/// What the master's side needs of the server, handed in by its caller
/// (the connection loop builds it from the shared state), so that this
/// module takes nothing else of it.
pub struct Handles<'a> {
    /// The engine: propagation, the writer, the database's path.
    pub engine: &'a Engine<Reply>,
    /// The permits every writer operation takes (backpressure).
    pub permits: &'a Arc<Semaphore>,
    /// This server's replication ID.
    pub replid: String,
    /// Flips to true when shutdown begins.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    /// The master's state.
    pub master: &'a Arc<Master>,
}

/// Installs `master`'s propagator on the engine (propagation itself
/// starts with the first replica).
pub fn install(engine: &Engine<Reply>, master: &Arc<Master>) {
    engine.propagation().set_sink(Box::new(Feeder {
        master: master.clone(),
    }));
}

/// Runs one operation on the writer and waits for its reply.
async fn on_writer(
    h: &Handles<'_>,
    op: respite_engine::WriteOp<Reply>,
) -> Result<Reply, EngineError> {
    let Ok(permit) = h.permits.clone().acquire_owned().await else {
        return Err(EngineError::ShuttingDown);
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    let item = WriteItem {
        ops: vec![op],
        done: Box::new(move |mut results| {
            drop(permit);
            let _ = tx.send(results.pop().unwrap_or(Err(EngineError::ShuttingDown)));
        }),
    };
    if h.engine.submit_write(item).is_err() {
        return Err(EngineError::ShuttingDown);
    }
    rx.await.unwrap_or(Err(EngineError::ShuttingDown))
}

/// Writes the snapshot as an RDB file at `path`; its length.
fn write_rdb(
    pinned: &respite_engine::propagate::PinnedRead,
    path: &std::path::Path,
) -> Result<u64, String> {
    let file = std::fs::File::create(path).map_err(|e| e.to_string())?;
    let out = std::io::BufWriter::with_capacity(256 * 1024, file);
    pinned.with_view(|view| -> Result<(), String> {
        let ctime = (respite_engine::now_ms() / 1000).to_string();
        let aux: [(&[u8], &[u8]); 6] = [
            (b"redis-ver", b"7.0.15"),
            (b"redis-bits", b"64"),
            (b"ctime", ctime.as_bytes()),
            (b"used-mem", b"0"),
            (b"repl-stream-db", b"0"),
            (b"aof-base", b"0"),
        ];
        let mut w = respite_rdb::RdbWriter::new(out, &aux).map_err(|e| e.to_string())?;
        for lib in view.function_libraries().map_err(|e| e.to_string())? {
            w.function(&lib.code).map_err(|e| e.to_string())?;
        }
        for counts in view.keyspace().map_err(|e| e.to_string())? {
            let db = counts.db;
            w.select_db(u64::from(db), counts.keys, counts.expires)
                .map_err(|e| e.to_string())?;
            for key in view.keys(db, b"*").map_err(|e| e.to_string())? {
                let found = crate::value::read_value(view, db, &key).map_err(|e| e.to_string())?;
                if let Some((value, expire_at)) = found {
                    w.entry(u64::from(db), &key, &value, expire_at)
                        .map_err(|e| e.to_string())?;
                }
            }
        }
        w.finish().map_err(|e| e.to_string())?;
        Ok(())
    })?;
    std::fs::metadata(path)
        .map(|m| m.len())
        .map_err(|e| e.to_string())
}

/// Starts the stream's PING, once.
fn start_pinging(h: &Handles<'_>) {
    if h.master.pinging.swap(true, Ordering::Relaxed) {
        return;
    }
    let master = h.master.clone();
    let mut shutdown = h.shutdown.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(PING_PERIOD);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = shutdown.wait_for(|down| *down) => return,
            }
            if !lock(&master.inner).replicas.is_empty() {
                master.feed_plain(&[b"PING"]);
            }
        }
    });
}

/// Serves a replica on this connection after its PSYNC or SYNC, until it
/// goes, is killed or the server stops; the connection then closes.
pub(crate) async fn serve_replica<S, K, T>(
    stream: &mut S,
    input: &mut BytesMut,
    h: &Handles<'_>,
    client: &Arc<ClientHandle>,
    sync: SyncRequest,
    mut killed: std::pin::Pin<&mut K>,
    mut stopping: std::pin::Pin<&mut T>,
) where
    S: AsyncRead + AsyncWrite + Unpin,
    K: std::future::Future,
    T: std::future::Future,
{
    let master = h.master.clone();
    let handshake = lock(&master.handshakes)
        .get(&client.id)
        .cloned()
        .unwrap_or_default();
    let ip = handshake.ip.clone().unwrap_or_else(|| match &client.peer {
        Peer::Tcp(peer, _) => peer.ip().to_string(),
        Peer::Unix(_) => "127.0.0.1".to_string(),
    });
    let info = Arc::new(ReplicaInfo {
        id: client.id,
        ip,
        port: handshake.port,
        state: AtomicU8::new(WAIT_BGSAVE),
        ack: AtomicU64::new(0),
        last_ack: AtomicU64::new(master.now_ms()),
        queued: AtomicU64::new(0),
    });
    let served = serve(
        stream,
        input,
        h,
        &master,
        info,
        &handshake,
        sync,
        killed.as_mut(),
        stopping.as_mut(),
    )
    .await;
    if let Err(e) = served {
        tracing::info!(client = client.id, error = %e, "replica link closed");
    }
    master.detach(client.id);
    master.forget(client.id);
}

#[allow(clippy::too_many_arguments)]
async fn serve<S, K, T>(
    stream: &mut S,
    input: &mut BytesMut,
    h: &Handles<'_>,
    master: &Arc<Master>,
    info: Arc<ReplicaInfo>,
    handshake: &Handshake,
    sync: SyncRequest,
    mut killed: std::pin::Pin<&mut K>,
    mut stopping: std::pin::Pin<&mut T>,
) -> Result<(), String>
where
    S: AsyncRead + AsyncWrite + Unpin,
    K: std::future::Future,
    T: std::future::Future,
{
    let replid = h.replid.clone();
    let io = |e: std::io::Error| e.to_string();
    // A partial resynchronization, where the backlog reaches back.
    let mut partial = None;
    if let Some((id, offset)) = &sync.psync {
        if id.as_ref() == replid.as_bytes() && *offset > 0 {
            partial = master.attach_partial(info.clone(), *offset as u64);
        }
    }
    let counters = &master.counters;
    if partial.is_some() {
        counters.partial_ok.fetch_add(1, Ordering::Relaxed);
    } else {
        if sync
            .psync
            .as_ref()
            .is_some_and(|(id, _)| id.as_ref() != b"?")
        {
            counters.partial_err.fetch_add(1, Ordering::Relaxed);
        }
        counters.full.fetch_add(1, Ordering::Relaxed);
    }
    let mut rx = match partial {
        Some((tail, rx)) => {
            info.state.store(ONLINE, Ordering::Relaxed);
            stream
                .write_all(format!("+CONTINUE {replid}\r\n").as_bytes())
                .await
                .map_err(io)?;
            stream.write_all(&tail).await.map_err(io)?;
            rx
        }
        None => {
            let (offset, rx, pinned) = full_sync_start(h, master, info.clone()).await?;
            if sync.psync.is_some() {
                stream
                    .write_all(format!("+FULLRESYNC {replid} {offset}\r\n").as_bytes())
                    .await
                    .map_err(io)?;
            }
            let path = {
                let mut p = h.engine.db_path().as_os_str().to_owned();
                p.push(format!(".sync-{}.rdb", info.id));
                std::path::PathBuf::from(p)
            };
            let job_path = path.clone();
            let mut job = tokio::task::spawn_blocking(move || write_rdb(&pinned, &job_path));
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.tick().await;
            let written = loop {
                tokio::select! {
                    done = &mut job => break done.map_err(|e| e.to_string()).and_then(|r| r),
                    _ = tick.tick() => {
                        // redis's keep-alive while the snapshot is made.
                        if let Err(e) = stream.write_all(b"\n").await {
                            let _ = (&mut job).await;
                            let _ = std::fs::remove_file(&path);
                            return Err(e.to_string());
                        }
                    }
                }
            };
            let sent = async {
                let len = written?;
                info.state.store(SEND_BULK, Ordering::Relaxed);
                stream
                    .write_all(format!("${len}\r\n").as_bytes())
                    .await
                    .map_err(io)?;
                // A local file, read in large chunks: page-cache reads.
                let mut file = std::fs::File::open(&path).map_err(io)?;
                let mut buf = vec![0u8; 256 * 1024];
                loop {
                    let n = std::io::Read::read(&mut file, &mut buf).map_err(io)?;
                    if n == 0 {
                        break;
                    }
                    stream.write_all(&buf[..n]).await.map_err(io)?;
                }
                stream.flush().await.map_err(io)?;
                Ok::<(), String>(())
            }
            .await;
            let _ = std::fs::remove_file(&path);
            sent?;
            if handshake.rdb_only {
                return Ok(());
            }
            info.state.store(ONLINE, Ordering::Relaxed);
            rx
        }
    };
    start_pinging(h);
    let mut framer = crate::request::Framer::default();
    /// What woke the link.
    enum Woken {
        Stream(Option<Bytes>),
        Read(std::io::Result<usize>),
        Stop,
    }
    loop {
        // The event is taken out of the `select!` before anything awaits.
        let woken = tokio::select! {
            biased;
            bytes = rx.recv() => Woken::Stream(bytes),
            read = stream.read_buf(input) => Woken::Read(read),
            _ = killed.as_mut() => Woken::Stop,
            _ = stopping.as_mut() => Woken::Stop,
        };
        match woken {
            Woken::Stop => return Ok(()),
            Woken::Stream(None) => return Err("dropped by the master".into()),
            Woken::Stream(Some(bytes)) => {
                let mut chunk = BytesMut::from(&bytes[..]);
                // Whatever else is queued goes in the same write.
                while chunk.len() < 1024 * 1024 {
                    match rx.try_recv() {
                        Ok(more) => chunk.extend_from_slice(&more),
                        Err(_) => break,
                    }
                }
                stream.write_all(&chunk).await.map_err(io)?;
                info.queued.fetch_sub(chunk.len() as u64, Ordering::Relaxed);
            }
            Woken::Read(Ok(0)) => return Ok(()),
            Woken::Read(Err(e)) => return Err(e.to_string()),
            Woken::Read(Ok(_)) => {
                let limits = crate::request::Limits {
                    max_bulk_len: 1 << 20,
                    authenticated: true,
                };
                while let Some(frame) = framer
                    .next_frame(input, limits)
                    .map_err(|e| e.to_string())?
                {
                    let args = frame.take_args(input);
                    // REPLCONF ACK <offset> [FACK <offset>]; nothing else
                    // a replica sends is answered.
                    if args.len() >= 3
                        && args[0].eq_ignore_ascii_case(b"replconf")
                        && args[1].eq_ignore_ascii_case(b"ack")
                    {
                        if let Some(offset) = std::str::from_utf8(&args[2])
                            .ok()
                            .and_then(|s| s.parse::<u64>().ok())
                        {
                            master.acknowledged(&info, offset);
                        }
                    }
                }
            }
        }
    }
}

type FullStart = (
    u64,
    mpsc::UnboundedReceiver<Bytes>,
    respite_engine::propagate::PinnedRead,
);

/// Switches propagation on (waiting for a write queued after it, so the
/// next group is propagated whole), then pins the snapshot and registers
/// the replica's queue in one writer operation.
async fn full_sync_start(
    h: &Handles<'_>,
    master: &Arc<Master>,
    info: Arc<ReplicaInfo>,
) -> Result<FullStart, String> {
    if h.engine.is_replica() {
        return Err("a file replica cannot serve replicas".into());
    }
    let propagation = h.engine.propagation();
    if !propagation.is_active() {
        propagation.activate();
        master.active.store(true, Ordering::Relaxed);
        on_writer(h, Box::new(|_txn| Ok(Reply::Ok)))
            .await
            .map_err(|e| e.to_string())?;
    }
    let slot: Arc<Mutex<Option<FullStart>>> = Arc::default();
    let filled = slot.clone();
    let m = master.clone();
    on_writer(
        h,
        Box::new(move |txn| {
            let pinned = txn.pin_read()?;
            let (offset, rx) = m.attach_full(info);
            *lock(&filled) = Some((offset, rx, pinned));
            Ok(Reply::Ok)
        }),
    )
    .await
    .map_err(|e| e.to_string())?;
    let taken = lock(&slot).take();
    taken.ok_or_else(|| "the snapshot was not taken".to_string())
}

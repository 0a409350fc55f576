//! Listeners: TCP and a Unix socket, both at once, with `maxclients`.

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use std::future::Future;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::task::JoinSet;

use crate::config::parse_perm;
use crate::connection;
use crate::state::{lock, ClientHandle, Peer, Shared};

/// How long shutdown waits for open connections to finish their turn.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Sockets bound, before accepting starts.
pub struct Listeners {
    tcp: Option<TcpListener>,
    unix: Option<(UnixListener, String)>,
}

impl Listeners {
    /// Binds what the configuration asks for. The TCP port actually bound
    /// (port 0 resolved) is logged and recorded for INFO.
    pub async fn bind(shared: &Shared) -> std::io::Result<Listeners> {
        let c = &shared.config;
        let tcp = if c.bind.is_empty() {
            None
        } else {
            let l = TcpListener::bind((c.bind.as_str(), c.port)).await?;
            let addr = l.local_addr()?;
            shared.tcp_port.store(addr.port() as u32, Ordering::Relaxed);
            tracing::info!("listening on tcp {addr}");
            Some(l)
        };
        let unix = match &c.unixsocket {
            None => None,
            Some(path) => {
                // A socket file left by a previous run would make bind fail.
                if path.exists() {
                    std::fs::remove_file(path)?;
                }
                // Bound under a temporary name and renamed into place once
                // its permissions are set, so no client can connect while
                // the socket still has the default mode.
                let mut staging = path.clone().into_os_string();
                staging.push(format!(".{}.tmp", std::process::id()));
                let staging = std::path::PathBuf::from(staging);
                let _ = std::fs::remove_file(&staging);
                let l = UnixListener::bind(&staging)?;
                if let Some(perm) = &c.unixsocketperm {
                    let mode = parse_perm(perm).map_err(|e| {
                        std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string())
                    })?;
                    std::fs::set_permissions(&staging, std::fs::Permissions::from_mode(mode))?;
                }
                std::fs::rename(&staging, path)?;
                tracing::info!("listening on unix {}", path.display());
                Some((l, path.display().to_string()))
            }
        };
        if tcp.is_none() && unix.is_none() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "neither a TCP address nor a Unix socket is configured",
            ));
        }
        Ok(Listeners { tcp, unix })
    }

    /// Accepts clients until shutdown begins, then waits for the open
    /// connections to finish what they had read.
    pub async fn run(self, shared: Arc<Shared>) {
        let tasks = Arc::new(Mutex::new(JoinSet::new()));
        let mut accept_loops = JoinSet::new();
        if let Some(l) = self.tcp {
            accept_loops.spawn(accept_loop(l, shared.clone(), tasks.clone()));
        }
        if let Some((l, path)) = self.unix {
            let (shared, tasks) = (shared.clone(), tasks.clone());
            accept_loops.spawn(async move {
                accept_loop((l, path.clone()), shared, tasks).await;
                let _ = std::fs::remove_file(&path);
            });
        }
        while accept_loops.join_next().await.is_some() {}
        // Connections see the shutdown flag and close after their current
        // turn; wait for them, but not forever: a client that never reads
        // its replies must not hold the shutdown up. Writes it had queued
        // are still applied by the writer's final drain.
        let mut set = std::mem::take(&mut *lock(&tasks));
        let drain = async { while set.join_next().await.is_some() {} };
        if tokio::time::timeout(SHUTDOWN_GRACE, drain).await.is_err() {
            tracing::warn!("connections still open after {SHUTDOWN_GRACE:?}; closing them");
            set.abort_all();
        }
    }
}

/// A listening socket: TCP, or Unix with its path.
trait Accept: Send + 'static {
    /// The connection type.
    type Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    /// Waits for the next client.
    fn accept_peer(&self) -> impl Future<Output = std::io::Result<(Self::Stream, Peer)>> + Send;
}

impl Accept for TcpListener {
    type Stream = TcpStream;
    async fn accept_peer(&self) -> std::io::Result<(TcpStream, Peer)> {
        let (stream, peer) = self.accept().await?;
        // Replies are written once per turn; waiting to coalesce them
        // further only adds latency.
        let _ = stream.set_nodelay(true);
        let local = stream
            .local_addr()
            .unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0)));
        Ok((stream, Peer::Tcp(peer, local)))
    }
}

impl Accept for (UnixListener, String) {
    type Stream = UnixStream;
    async fn accept_peer(&self) -> std::io::Result<(UnixStream, Peer)> {
        let (stream, _) = self.0.accept().await?;
        Ok((stream, Peer::Unix(self.1.clone())))
    }
}

/// Accepts clients on one listener until shutdown begins.
async fn accept_loop<L: Accept>(listener: L, shared: Arc<Shared>, tasks: Arc<Mutex<JoinSet<()>>>) {
    loop {
        let accepted = tokio::select! {
            a = listener.accept_peer() => a,
            _ = shared.wait_for_shutdown() => break,
        };
        match accepted {
            Ok((stream, peer)) => admit(stream, peer, &shared, &tasks).await,
            Err(e) => accept_failed(e).await,
        }
    }
}

/// Logs a failed accept and pauses, so running out of file descriptors
/// does not turn the accept loop into a busy spin.
async fn accept_failed(e: std::io::Error) {
    tracing::warn!(error = %e, "accept failed; pausing 100 ms");
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
}

/// Registers and starts a connection, or refuses it for `maxclients`.
async fn admit<S>(mut stream: S, peer: Peer, shared: &Arc<Shared>, tasks: &Arc<Mutex<JoinSet<()>>>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    shared
        .counters
        .connections_received
        .fetch_add(1, Ordering::Relaxed);
    let max = shared.settings.maxclients.load(Ordering::Relaxed);
    let client = {
        let mut clients = lock(&shared.clients);
        if clients.len() >= max {
            None
        } else {
            let id = shared.next_client_id.fetch_add(1, Ordering::Relaxed);
            let handle = Arc::new(ClientHandle {
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
                blocked: Mutex::new(None),
            });
            clients.insert(id, handle.clone());
            Some(handle)
        }
    };
    match client {
        Some(client) => {
            let shared = shared.clone();
            let mut set = lock(tasks);
            // Reap finished tasks so the set does not grow without bound.
            while set.try_join_next().is_some() {}
            set.spawn(connection::serve(stream, shared, client));
        }
        None => {
            shared
                .counters
                .rejected_connections
                .fetch_add(1, Ordering::Relaxed);
            let _ = stream
                .write_all(b"-ERR max number of clients reached\r\n")
                .await;
        }
    }
}

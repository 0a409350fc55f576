//! Listeners: TCP and Unix sockets, bound by respited or handed over by
//! systemd (socket activation), with `maxclients`.
//!
//! Under socket activation systemd binds the sockets of `respited.socket`
//! and passes them as descriptors 3, 4, ... (`LISTEN_FDS`, `LISTEN_PID`,
//! `LISTEN_FDNAMES`, read through the `sd-notify` crate). Each one is
//! recognised by asking the kernel for its address: an IP address makes it
//! a TCP listener, a path a Unix one. They are served beside the
//! listeners the configuration asks for, except where an activated socket
//! already has the configured address (the usual case: the .socket unit
//! and respite.toml both say 127.0.0.1:6379), which respited then does not
//! bind again. An activated Unix socket belongs to systemd: respited never
//! removes its file.

use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use std::future::Future;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::task::JoinSet;

use crate::binding::{bind_addresses, bind_tcp, set_backlog};
use crate::clients::{ClientHandle, Peer};
use crate::config::{parse_perm, Config};
use crate::connection;
use crate::state::Shared;
use crate::sync::lock;

/// How long shutdown waits for open connections to finish their turn.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Why the listeners could not be set up. Every variant names the address
/// or descriptor, so "address in use" says which address.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// A TCP address could not be bound.
    #[error("cannot listen on tcp {addr}: {source}")]
    Tcp {
        /// The address as configured (`bind:port`).
        addr: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A Unix socket could not be bound.
    #[error("cannot listen on unix {path}: {source}")]
    Unix {
        /// The socket path.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A descriptor passed by the service manager is unusable.
    #[error("socket activation: descriptor {fd} ({name}): {source}")]
    Activated {
        /// The descriptor number.
        fd: RawFd,
        /// Its LISTEN_FDNAMES entry.
        name: String,
        /// What went wrong.
        source: std::io::Error,
    },
    /// LISTEN_FDS and friends could not be read.
    #[error("socket activation: {0}")]
    Environment(std::io::Error),
    /// The TLS settings do not make a configuration.
    #[error("{0}")]
    Tls(#[from] crate::tls::TlsError),
    /// Nothing to listen on.
    #[error("neither a TCP address nor a Unix socket is configured, and no socket was passed by systemd")]
    Nothing,
}

/// A socket handed over by the service manager.
pub enum Activated {
    /// A TCP listener and its address.
    Tcp(std::net::TcpListener, SocketAddr, String),
    /// A Unix listener and its path.
    Unix(std::os::unix::net::UnixListener, PathBuf, String),
}

/// Takes the listening sockets systemd passed, if any (none when
/// `LISTEN_PID` is not this process). Call once: the descriptors are
/// owned by what it returns.
pub fn take_activated() -> Result<Vec<Activated>, ListenError> {
    let fds = sd_notify::listen_fds_with_names().map_err(ListenError::Environment)?;
    let mut out = Vec::new();
    for (fd, name) in fds {
        let fail = |source| ListenError::Activated {
            fd,
            name: name.clone(),
            source,
        };
        // SAFETY: LISTEN_PID names this process, so systemd's protocol
        // gives us descriptors 3..3+LISTEN_FDS, open and owned by nobody
        // else in the process; each is wrapped exactly once, here.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        let tcp = std::net::TcpListener::from(owned);
        let activated = match tcp.local_addr() {
            Ok(addr) => Activated::Tcp(tcp, addr, name.clone()),
            Err(_) => {
                let unix = std::os::unix::net::UnixListener::from(OwnedFd::from(tcp));
                let addr = unix.local_addr().map_err(|_| {
                    fail(std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        "not a TCP or Unix stream socket",
                    ))
                })?;
                let path = addr.as_pathname().map(Path::to_path_buf).ok_or_else(|| {
                    fail(std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        "an unnamed or abstract Unix socket",
                    ))
                })?;
                Activated::Unix(unix, path, name.clone())
            }
        };
        out.push(activated);
    }
    Ok(out)
}

/// A bound Unix listener: the socket, its path, and whether respited made
/// the file (and so removes it at exit).
struct UnixBound {
    listener: UnixListener,
    path: String,
    ours: bool,
}

/// Sockets bound, before accepting starts.
pub struct Listeners {
    /// TCP sockets systemd passed beyond the configured address.
    tcp: Vec<TcpListener>,
    /// The listeners of `bind` and `port` (see [`crate::binding::Binding`]).
    configured: Vec<Arc<TcpListener>>,
    unix: Vec<UnixBound>,
    /// The first TCP port, for INFO and CONFIG GET port.
    tcp_port: Option<u16>,
    /// The TLS listener (`tls_port`), if any.
    tls: Option<TcpListener>,
    /// Its configuration, read at bind time.
    tls_config: Option<Arc<rustls::ServerConfig>>,
}

impl Listeners {
    /// Binds what the configuration asks for, beside the sockets systemd
    /// passed. The TCP port actually bound (port 0 resolved) is logged.
    pub async fn bind(c: &Config, activated: Vec<Activated>) -> Result<Listeners, ListenError> {
        let mut tcp = Vec::new();
        let mut unix = Vec::new();
        let mut tcp_port = None;
        for a in activated {
            match a {
                Activated::Tcp(l, addr, name) => {
                    let fail = |source| ListenError::Activated {
                        fd: -1,
                        name: name.clone(),
                        source,
                    };
                    l.set_nonblocking(true).map_err(fail)?;
                    let l = TcpListener::from_std(l).map_err(fail)?;
                    tracing::info!(name = %name, "socket from systemd: tcp {addr}");
                    tracing::info!("listening on tcp {addr}");
                    tcp.push(l);
                }
                Activated::Unix(l, path, name) => {
                    let fail = |source| ListenError::Activated {
                        fd: -1,
                        name: name.clone(),
                        source,
                    };
                    l.set_nonblocking(true).map_err(fail)?;
                    let l = UnixListener::from_std(l).map_err(fail)?;
                    tracing::info!(name = %name, "socket from systemd: unix {}", path.display());
                    tracing::info!("listening on unix {}", path.display());
                    unix.push(UnixBound {
                        listener: l,
                        path: path.display().to_string(),
                        ours: false,
                    });
                }
            }
        }
        // The listeners of `bind` and `port`, which CONFIG SET may replace:
        // an activated socket with that address serves it, else respited
        // binds its own.
        let mut configured = Vec::new();
        let mut covered = Vec::new();
        for addr in bind_addresses(&c.bind) {
            let ip: Option<std::net::IpAddr> = addr.parse().ok();
            let passed = tcp.iter().position(|l: &TcpListener| {
                l.local_addr()
                    .is_ok_and(|a| a.port() == c.port && ip == Some(a.ip()))
            });
            match passed {
                Some(at) => configured.push(Arc::new(tcp.remove(at))),
                None => covered.push(addr),
            }
        }
        if !covered.is_empty() {
            let own = bind_tcp(&covered.join(" "), c.port, c.tcp_backlog, &[]).map_err(
                |(addr, source)| ListenError::Tcp {
                    addr: format!("{addr}:{}", c.port),
                    source,
                },
            )?;
            for l in &own {
                if let Ok(local) = l.local_addr() {
                    tracing::info!("listening on tcp {local}");
                }
            }
            configured.extend(own);
        }
        for l in configured.iter().map(|l| &**l).chain(tcp.iter()) {
            if let Ok(a) = l.local_addr() {
                tcp_port.get_or_insert(a.port());
            }
        }
        let tls_config = crate::tls::server_config(c)?;
        let mut tls = None;
        if let (Some(port), Some(_)) = (c.tls_port, &tls_config) {
            let addr = format!("{}:{port}", c.bind);
            let fail = |source| ListenError::Tcp {
                addr: addr.clone(),
                source,
            };
            // On the first address of `bind`.
            let host = bind_addresses(&c.bind)
                .into_iter()
                .next()
                .unwrap_or_default();
            let l = TcpListener::bind((host.as_str(), port))
                .await
                .map_err(fail)?;
            let local = l.local_addr().map_err(fail)?;
            tracing::info!("listening on tls {local}");
            tls = Some(l);
        }
        if let Some(path) = &c.unixsocket {
            let covered = unix.iter().any(|u| Path::new(&u.path) == path);
            if !covered {
                let fail = |source| ListenError::Unix {
                    path: path.clone(),
                    source,
                };
                let l = bind_unix(path, c.unixsocketperm.as_deref()).map_err(fail)?;
                set_backlog(&l, c.tcp_backlog).map_err(fail)?;
                tracing::info!("listening on unix {}", path.display());
                unix.push(UnixBound {
                    listener: l,
                    path: path.display().to_string(),
                    ours: true,
                });
            }
        }
        if tcp.is_empty() && configured.is_empty() && unix.is_empty() && tls.is_none() {
            return Err(ListenError::Nothing);
        }
        Ok(Listeners {
            tcp,
            configured,
            unix,
            tcp_port,
            tls,
            tls_config,
        })
    }

    /// The TLS configuration read at bind time (`None`: no TLS listener).
    pub fn tls_config(&self) -> Option<Arc<rustls::ServerConfig>> {
        self.tls_config.clone()
    }

    /// The first TCP listener's port (port 0 resolved), if there is one.
    pub fn tcp_port(&self) -> Option<u16> {
        self.tcp_port
    }

    /// Removes the Unix socket files respited made (for a start-up that
    /// fails after binding, so it leaves nothing behind).
    pub fn remove_socket_files(&self) {
        for u in self.unix.iter().filter(|u| u.ours) {
            let _ = std::fs::remove_file(&u.path);
        }
    }

    /// Accepts clients until shutdown begins, then waits for the open
    /// connections to finish what they had read.
    pub async fn run(self, shared: Arc<Shared>) {
        let tasks = Arc::new(Mutex::new(JoinSet::new()));
        let mut accept_loops = JoinSet::new();
        for l in self.tcp {
            accept_loops.spawn(accept_loop(l, shared.clone(), tasks.clone()));
        }
        shared.binding.publish(self.configured);
        accept_loops.spawn(configured_loop(shared.clone(), tasks.clone()));
        if let Some(l) = self.tls {
            accept_loops.spawn(tls_accept_loop(l, shared.clone(), tasks.clone()));
        }
        for u in self.unix {
            let (shared, tasks) = (shared.clone(), tasks.clone());
            accept_loops.spawn(async move {
                let UnixBound {
                    listener,
                    path,
                    ours,
                } = u;
                accept_loop((listener, path.clone()), shared, tasks).await;
                // An activated socket's file is systemd's, and stays.
                if ours {
                    let _ = std::fs::remove_file(&path);
                }
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

/// Accepts on the listeners of [`crate::binding::Binding`], starting again on the new set
/// each time CONFIG SET replaces it, until shutdown begins.
async fn configured_loop(shared: Arc<Shared>, tasks: Arc<Mutex<JoinSet<()>>>) {
    let mut rx = shared.binding.listeners.subscribe();
    loop {
        let current = rx.borrow_and_update().clone();
        let mut loops = JoinSet::new();
        for l in current {
            loops.spawn(accept_loop(l, shared.clone(), tasks.clone()));
        }
        tokio::select! {
            changed = rx.changed() => {
                // Accepting is cancel-safe: a connection not yet accepted
                // waits in the backlog of a socket that stays open if it is
                // reused, or is refused as the old socket closes.
                loops.abort_all();
                while loops.join_next().await.is_some() {}
                if changed.is_err() {
                    break;
                }
            }
            _ = shared.wait_for_shutdown() => {
                while loops.join_next().await.is_some() {}
                break;
            }
        }
    }
}

/// Binds a Unix socket at `path` with the mode `perm`. A socket file left
/// by a previous run would make bind fail, so it is removed first (the
/// database's owner lock is held by then: no live respited on the same
/// database can be using it). The socket is bound under a temporary name
/// and renamed into place once its permissions are set, so no client can
/// connect while it still has the default mode.
fn bind_unix(path: &Path, perm: Option<&str>) -> std::io::Result<UnixListener> {
    if path.exists() {
        std::fs::remove_file(path)?;
    }
    let mut staging = path.to_path_buf().into_os_string();
    staging.push(format!(".{}.tmp", std::process::id()));
    let staging = PathBuf::from(staging);
    let _ = std::fs::remove_file(&staging);
    let l = UnixListener::bind(&staging)?;
    let placed = (|| {
        if let Some(perm) = perm {
            let mode = parse_perm(perm).map_err(|e| {
                std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string())
            })?;
            std::fs::set_permissions(&staging, std::fs::Permissions::from_mode(mode))?;
        }
        std::fs::rename(&staging, path)
    })();
    if placed.is_err() {
        let _ = std::fs::remove_file(&staging);
    }
    placed.map(|()| l)
}

/// A listening socket: TCP, or Unix with its path.
trait Accept: Send + 'static {
    /// The connection type.
    type Stream: AsyncRead + AsyncWrite + AsFd + AsRawFd + Unpin + Send + 'static;
    /// Whether the socket is bound beyond loopback (where protected mode
    /// applies; see `crate::protected`).
    fn exposed(&self) -> bool;
    /// Waits for the next client.
    fn accept_peer(&self) -> impl Future<Output = std::io::Result<(Self::Stream, Peer)>> + Send;
}

impl Accept for TcpListener {
    type Stream = TcpStream;
    fn exposed(&self) -> bool {
        self.local_addr().is_ok_and(|a| !a.ip().is_loopback())
    }
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

impl Accept for Arc<TcpListener> {
    type Stream = TcpStream;
    fn exposed(&self) -> bool {
        (**self).exposed()
    }
    async fn accept_peer(&self) -> std::io::Result<(TcpStream, Peer)> {
        (**self).accept_peer().await
    }
}

impl Accept for (UnixListener, String) {
    type Stream = UnixStream;
    fn exposed(&self) -> bool {
        false
    }
    async fn accept_peer(&self) -> std::io::Result<(UnixStream, Peer)> {
        let (stream, _) = self.0.accept().await?;
        Ok((stream, Peer::Unix(self.1.clone())))
    }
}

/// Accepts clients on one listener until shutdown begins.
async fn accept_loop<L: Accept>(listener: L, shared: Arc<Shared>, tasks: Arc<Mutex<JoinSet<()>>>) {
    let exposed = listener.exposed();
    loop {
        let accepted = tokio::select! {
            a = listener.accept_peer() => a,
            _ = shared.wait_for_shutdown() => break,
        };
        match accepted {
            Ok((stream, peer)) => {
                if matches!(peer, Peer::Tcp(..)) {
                    keepalive(&stream, &shared);
                }
                admit(stream, peer, exposed, &shared, &tasks).await
            }
            Err(e) => accept_failed(e).await,
        }
    }
}

/// Accepts TLS clients until shutdown begins. Each handshake runs in the
/// client's own task, with the configuration in force when it connected,
/// under [`crate::tls::HANDSHAKE_TIMEOUT`]; only a finished handshake
/// makes a client (so protected mode and `maxclients` answer over TLS, as
/// in Redis).
async fn tls_accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    tasks: Arc<Mutex<JoinSet<()>>>,
) {
    let exposed = listener.exposed();
    loop {
        let accepted = tokio::select! {
            a = listener.accept_peer() => a,
            _ = shared.wait_for_shutdown() => break,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                accept_failed(e).await;
                continue;
            }
        };
        keepalive(&stream, &shared);
        let Some(config) = shared.tls.current() else {
            continue;
        };
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        let (shared, tasks2) = (shared.clone(), tasks.clone());
        let mut set = lock(&tasks);
        while set.try_join_next().is_some() {}
        set.spawn(async move {
            let handshake =
                tokio::time::timeout(crate::tls::HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await;
            match handshake {
                Ok(Ok(tls)) => admit(tls, peer, exposed, &shared, &tasks2).await,
                Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                Err(_) => tracing::debug!("TLS handshake timed out"),
            }
        });
    }
}

/// Logs a failed accept and pauses, so running out of file descriptors
/// does not turn the accept loop into a busy spin.
async fn accept_failed(e: std::io::Error) {
    tracing::warn!(error = %e, "accept failed; pausing 100 ms");
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
}

/// `tcp-keepalive`, as redis's `anetKeepAlive` sets it: probes after
/// `secs` idle, every third of that, three of them (0: the kernel's
/// default, no keepalive).
fn keepalive(stream: &impl AsFd, shared: &Shared) {
    let secs: u64 = shared.params.get("tcp-keepalive").parse().unwrap_or(0);
    if secs == 0 {
        return;
    }
    let params = socket2::TcpKeepalive::new()
        .with_time(std::time::Duration::from_secs(secs))
        .with_interval(std::time::Duration::from_secs((secs / 3).max(1)))
        .with_retries(3);
    if let Err(e) = socket2::SockRef::from(stream).set_tcp_keepalive(&params) {
        tracing::debug!(error = %e, "could not set TCP keepalive");
    }
}

/// Registers and starts a connection, or refuses it for protected mode
/// (`exposed`: the listener is bound beyond loopback) or `maxclients`.
async fn admit<S>(
    mut stream: S,
    peer: Peer,
    exposed: bool,
    shared: &Arc<Shared>,
    tasks: &Arc<Mutex<JoinSet<()>>>,
) where
    S: AsyncRead + AsyncWrite + AsRawFd + Unpin + Send + 'static,
{
    // For CLIENT LIST's `fd`.
    let fd = stream.as_raw_fd();
    shared
        .counters
        .connections_received
        .fetch_add(1, Ordering::Relaxed);
    let guard = crate::protected::Guard {
        enabled: shared.settings.protected_mode.load(Ordering::Relaxed),
        acl: &shared.acl,
        rejected: &shared.counters.rejected_connections,
        log: &shared.protected_log,
    };
    if crate::protected::refuses(guard, &peer, exposed) {
        let _ = stream.write_all(crate::protected::DENIED).await;
        let _ = stream.shutdown().await;
        return;
    }
    let max = shared.settings.maxclients.load(Ordering::Relaxed);
    let client = {
        let mut clients = lock(&shared.clients);
        if clients.len() >= max {
            None
        } else {
            let id = shared.next_client_id.fetch_add(1, Ordering::Relaxed);
            let handle = Arc::new(ClientHandle::new(id, peer));
            handle.state.fd.store(fd, Ordering::Relaxed);
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

//! The TCP listeners of `bind` and `port`, which CONFIG SET replaces
//! while the server runs ([`Binding`]), and the binding of addresses both
//! it and the start-up use. It knows nothing of connections: the accept
//! loops in [`crate::listener`] follow the listeners it publishes.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use tokio::net::TcpListener;

use crate::config::Config;
use crate::sync::lock;

/// Sets the listen backlog to `tcp-backlog` (redis.conf's name; Redis uses
/// it for its Unix socket too). tokio and std listen with a fixed backlog
/// (128 for a Unix socket): a burst of a few hundred connects then waited a
/// second for SYN retries. On Linux, `listen` on a socket already listening
/// changes its backlog, which the kernel caps at `net.core.somaxconn`.
pub(crate) fn set_backlog<S: std::os::fd::AsFd>(listener: &S, backlog: u32) -> std::io::Result<()> {
    let backlog = i32::try_from(backlog).unwrap_or(i32::MAX);
    socket2::SockRef::from(listener).listen(backlog)
}

/// The addresses of a `bind` value: redis's list of addresses separated by
/// spaces, `*` for every IPv4 address and `::*` for every IPv6 one. An
/// address may start with `-`, redis's mark for one that may be absent
/// (see [`bind_tcp`]).
pub(crate) fn bind_addresses(bind: &str) -> Vec<String> {
    bind.split_whitespace().map(str::to_string).collect()
}

/// Binds `port` on each address of `bind` (none for an empty `bind`),
/// reusing the listener of `current` that already has an address (so
/// setting the value in force, or adding an address, keeps the sockets
/// that are open). All or nothing: the first address that cannot be bound
/// is returned with the OS's error, and the sockets bound before it close.
/// An address marked `-` that does not exist on this host is skipped, as in
/// redis.
pub(crate) fn bind_tcp(
    bind: &str,
    port: u16,
    backlog: u32,
    current: &[Arc<TcpListener>],
) -> Result<Vec<Arc<TcpListener>>, (String, std::io::Error)> {
    let mut out = Vec::new();
    for addr in bind_addresses(bind) {
        let (optional, host) = match addr.strip_prefix('-') {
            Some(h) => (true, h),
            None => (false, addr.as_str()),
        };
        let host = match host {
            "*" => "0.0.0.0",
            "::*" => "::",
            h => h,
        };
        let fail = |e| (addr.clone(), e);
        if port != 0 {
            if let Ok(ip) = host.parse::<std::net::IpAddr>() {
                let wanted = SocketAddr::new(ip, port);
                if let Some(l) = current
                    .iter()
                    .find(|l| l.local_addr().is_ok_and(|a| a == wanted))
                {
                    out.push(l.clone());
                    continue;
                }
            }
        }
        let l = match std::net::TcpListener::bind((host, port)) {
            Ok(l) => l,
            Err(e) if optional && e.kind() == std::io::ErrorKind::AddrNotAvailable => continue,
            Err(e) => return Err(fail(e)),
        };
        l.set_nonblocking(true).map_err(fail)?;
        set_backlog(&l, backlog).map_err(fail)?;
        out.push(Arc::new(TcpListener::from_std(l).map_err(fail)?));
    }
    Ok(out)
}

/// The TCP listeners of `bind` and `port`. CONFIG SET of either binds the
/// new sockets first and swaps them in only once all are bound, so a
/// failure (a busy port, an address this host does not have) leaves the
/// old ones serving; the accept loop of [`Listeners::run`] follows the
/// swap, and connections accepted before it stay open, as in redis.
pub struct Binding {
    /// `bind` as last set.
    bind: Mutex<String>,
    /// The listeners in force; the accept loop watches it.
    pub(crate) listeners: tokio::sync::watch::Sender<Vec<Arc<TcpListener>>>,
}

/// Why CONFIG SET bind/port could not listen.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on tcp {addr}:{port}: {source}")]
pub struct RebindError {
    addr: String,
    port: u16,
    source: std::io::Error,
}

impl Binding {
    /// The binding of a configuration, before any socket is published.
    pub fn new(config: &Config) -> Binding {
        Binding {
            bind: Mutex::new(config.bind.clone()),
            listeners: tokio::sync::watch::Sender::new(Vec::new()),
        }
    }

    /// `bind` as CONFIG GET shows it.
    pub fn bind(&self) -> String {
        lock(&self.bind).clone()
    }

    pub(crate) fn publish(&self, listeners: Vec<Arc<TcpListener>>) {
        self.listeners.send_replace(listeners);
    }

    /// Listens on `port` at each address of `bind` in place of the current
    /// listeners; on failure nothing changes. Returns the port bound (port
    /// 0 resolved, as at start-up: respite's 0 asks for a free port).
    /// `backlog` is `tcp-backlog`; the port bound is also stored in
    /// `tcp_port` (INFO's).
    pub fn rebind(
        &self,
        backlog: u32,
        tcp_port: &AtomicU32,
        bind: &str,
        port: u16,
    ) -> Result<u16, RebindError> {
        let current = self.listeners.borrow().clone();
        let fail = |(addr, source)| RebindError { addr, port, source };
        // Outside a runtime (an embedder calling the command table
        // directly) there is no reactor to register sockets with.
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(fail((
                bind.to_string(),
                std::io::Error::other("no runtime to listen in"),
            )));
        }
        let new = bind_tcp(bind, port, backlog, &current).map_err(fail)?;
        let bound = new
            .first()
            .and_then(|l| l.local_addr().ok())
            .map_or(port, |a| a.port());
        for l in &new {
            if !current.iter().any(|c| Arc::ptr_eq(c, l)) {
                if let Ok(local) = l.local_addr() {
                    tracing::info!("listening on tcp {local} (CONFIG SET)");
                }
            }
        }
        *lock(&self.bind) = bind.to_string();
        tcp_port.store(u32::from(bound), Ordering::Relaxed);
        self.publish(new);
        Ok(bound)
    }
}

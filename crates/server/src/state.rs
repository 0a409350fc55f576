//! State shared by every connection: the engine, the settings that CONFIG
//! SET can change, the client registry, counters for INFO, and the shutdown
//! signal.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use respite_engine::{AppendFsync, Engine};
use tokio::sync::Semaphore;

use crate::clients::{ClientHandle, Pause};
use crate::config::Config;
use crate::reply::Reply;
use crate::sync::lock;

/// The settings CONFIG SET may change while the server runs.
pub struct Settings {
    /// `maxclients`.
    pub maxclients: AtomicUsize,
    /// `proto-max-bulk-len`.
    pub proto_max_bulk_len: AtomicUsize,
    /// `client-query-buffer-limit`.
    pub client_query_buffer_limit: AtomicUsize,
    /// `requirepass`; `None` means no authentication.
    pub requirepass: RwLock<Option<String>>,
    /// `protected-mode`.
    pub protected_mode: AtomicBool,
    /// `appendfsync`, as last set.
    pub appendfsync: Mutex<AppendFsync>,
    /// The log filter in force (changed by a reload).
    pub log_level: Mutex<String>,
    /// `client-output-buffer-limit` of every class, as CONFIG GET shows it.
    pub output_limits: Mutex<[crate::limits::ClassLimit; 3]>,
    /// The normal class's limit, which the connection loops apply.
    pub output_limit: crate::limits::NormalLimit,
}

/// Swaps the process's log filter (tracing's `EnvFilter` syntax).
pub type LogFilter = Arc<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

/// Everything connections share: the composition root, which holds one of
/// each service and hands each caller the part it needs. Its fields are
/// the crate's own; an embedder (the daemon) reaches only the
/// configuration, the ACL users, the TLS state and the log filter.
pub struct Shared {
    /// The storage engine.
    pub(crate) engine: Engine<Reply>,
    /// The configuration the server started with.
    pub config: Config,
    /// Settings changeable at run time.
    pub(crate) settings: Settings,
    /// Connected clients by id.
    pub(crate) clients: crate::clients::Registry,
    /// Next client id.
    pub(crate) next_client_id: AtomicU64,
    /// Write operations allowed in flight (backpressure).
    pub(crate) write_permits: Arc<Semaphore>,
    /// INFO counters.
    pub(crate) counters: crate::stats::Counters,
    /// Per-command statistics, the slow log and latency events.
    pub(crate) stats: crate::stats::CommandStats,
    /// CONFIG's stored parameters.
    pub(crate) params: crate::params::Params,
    /// Swaps the log filter (set by the daemon once logging is up; CONFIG
    /// SET loglevel uses it, as SIGHUP does for `log_level`).
    pub log_filter: std::sync::OnceLock<LogFilter>,
    /// `timeout`: seconds a client may stay idle (0: forever).
    pub(crate) idle_timeout_secs: AtomicU64,
    /// CLIENT PAUSE.
    pub(crate) pause: Pause,
    /// MONITOR's channel.
    pub(crate) monitors: crate::monitor::Monitors,
    /// Pub/sub channels and patterns.
    pub(crate) pubsub: crate::pubsub::Registry,
    /// CLIENT TRACKING's table.
    pub(crate) tracking: crate::tracking::Tracking,
    /// When the server started.
    pub(crate) started: Instant,
    /// Resident memory once the engine was open (INFO's
    /// `used_memory_startup`).
    pub(crate) startup_rss: u64,
    /// `min-replicas-to-write` and `min-replicas-max-lag` are both above
    /// 0: with no replicas, every write is refused (NOREPLICAS).
    pub(crate) wants_replicas: AtomicBool,
    /// Set once shutdown begins: a lock-free copy of the `shutdown` watch
    /// value, read by every connection after every turn.
    pub(crate) shutting_down: AtomicBool,
    /// Flips to true once, when shutdown begins; listeners and the daemon's
    /// main wait on it.
    pub(crate) shutdown: tokio::sync::watch::Sender<bool>,
    /// The TCP address actually bound (port 0 resolved), for INFO.
    pub(crate) tcp_port: AtomicU32,
    /// The listeners of `bind` and `port`, for CONFIG SET.
    pub(crate) binding: crate::binding::Binding,
    /// When protected mode last logged a refusal, per source address.
    pub(crate) protected_log: crate::protected::RefusalLog,
    /// The ACL users, log and counters.
    pub acl: crate::acl::Acl,
    /// The TLS configuration new handshakes use (reloaded on SIGHUP).
    pub tls: crate::tls::TlsState,
    /// Replication, as a master (see `repl.rs`).
    pub repl: Arc<crate::repl::Master>,
}

impl Shared {
    /// Builds the shared state around an opened engine.
    pub fn new(engine: Engine<Reply>, config: Config) -> Shared {
        let shared = Shared {
            engine,
            settings: Settings {
                maxclients: AtomicUsize::new(config.maxclients),
                proto_max_bulk_len: AtomicUsize::new(config.proto_max_bulk_len),
                client_query_buffer_limit: AtomicUsize::new(config.client_query_buffer_limit),
                requirepass: RwLock::new(config.requirepass.clone()),
                protected_mode: AtomicBool::new(config.protected_mode),
                appendfsync: Mutex::new(config.appendfsync),
                log_level: Mutex::new(config.log_level.clone()),
                output_limits: Mutex::new(config.output_limits().unwrap_or_default()),
                output_limit: Default::default(),
            },
            clients: Mutex::new(HashMap::new()),
            next_client_id: AtomicU64::new(1),
            write_permits: Arc::new(Semaphore::new(config.write_queue_depth)),
            counters: Default::default(),
            stats: crate::stats::CommandStats::new(),
            params: Default::default(),
            log_filter: std::sync::OnceLock::new(),
            idle_timeout_secs: AtomicU64::new(0),
            pause: Default::default(),
            monitors: Default::default(),
            pubsub: Default::default(),
            tracking: Default::default(),
            started: Instant::now(),
            startup_rss: crate::process::resident_bytes(),
            wants_replicas: AtomicBool::new(false),
            shutting_down: AtomicBool::new(false),
            shutdown: tokio::sync::watch::Sender::new(false),
            tcp_port: AtomicU32::new(config.port as u32),
            binding: crate::binding::Binding::new(&config),
            protected_log: Default::default(),
            tls: Default::default(),
            repl: Default::default(),
            acl: crate::acl::Acl::new(config.requirepass.as_deref()),
            config,
        };
        let limits = *lock(&shared.settings.output_limits);
        shared.settings.output_limit.store(limits[0]);
        shared
    }

    /// The configured password, if any.
    pub fn requirepass(&self) -> Option<String> {
        self.settings
            .requirepass
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Starts a clean shutdown: listeners stop accepting and the daemon's
    /// main drains and closes the engine. The service manager hears
    /// STOPPING=1 at once, whoever asked (a signal or SHUTDOWN).
    pub fn begin_shutdown(&self) {
        if !self.shutting_down.swap(true, Ordering::SeqCst) {
            if let Err(e) = sd_notify::notify(&[sd_notify::NotifyState::Stopping]) {
                tracing::debug!(error = %e, "cannot notify the service manager");
            }
        }
        self.shutdown.send_replace(true);
    }

    /// The engine, for a harness that runs its own writer items (the
    /// fuzz targets); the server's own code reaches it as a field.
    pub fn engine(&self) -> &Engine<Reply> {
        &self.engine
    }

    /// Whether a clean shutdown has begun.
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }
}

impl Shared {
    /// Resolves once shutdown has begun.
    pub async fn wait_for_shutdown(&self) {
        let mut rx = self.shutdown.subscribe();
        let _ = rx.wait_for(|down| *down).await;
    }
}

/// Connects keyspace notifications to the pub/sub registry: the engine's
/// writer hands each committed group's events to
/// [`crate::pubsub::Registry::publish_events`], and the registry keeps the
/// engine told whether anyone is subscribed, so that nobody listening
/// costs a write nothing (see `respite_engine::notify`).
pub fn install_notifications(shared: &Arc<Shared>) {
    let notifier = shared.engine.notifier().clone();
    shared.pubsub.attach(notifier.clone());
    // Weak: the engine (inside `Shared`) holds the sink. The writer only
    // publishes before it acknowledges its shutdown, while `Shared` lives.
    let weak = Arc::downgrade(shared);
    notifier.set_sink(Box::new(move |events| {
        if let Some(sh) = weak.upgrade() {
            let flags = sh.engine.notifier().flags();
            let limit = lock(&sh.settings.output_limits)[2];
            sh.pubsub
                .publish_events(events, flags, limit, &sh.counters.output_limit_closes);
        }
    }));
}

/// Connects the writer's committed changes to CLIENT TRACKING's table
/// (see `respite_engine::notify::Change`).
pub fn install_tracking(shared: &Arc<Shared>) {
    // Weak, as for the keyspace events.
    let weak = Arc::downgrade(shared);
    shared
        .engine
        .notifier()
        .set_change_sink(Box::new(move |changes| {
            if let Some(sh) = weak.upgrade() {
                sh.tracking.invalidate(sh.as_ref(), changes);
            }
        }));
}

/// CLIENT TRACKING reaches clients through the registry and their push
/// queues.
impl crate::tracking::Clients for Shared {
    type Client = ClientHandle;

    fn find(&self, id: u64) -> Option<Arc<ClientHandle>> {
        lock(&self.clients).get(&id).cloned()
    }

    fn tracking_clients(&self) -> Vec<Arc<ClientHandle>> {
        let mut all: Vec<Arc<ClientHandle>> = lock(&self.clients)
            .values()
            .filter(|c| c.tracking.is_on())
            .cloned()
            .collect();
        all.sort_by_key(|c| c.id);
        all
    }

    fn push(&self, to: &Arc<ClientHandle>, message: crate::pubsub::Invalidation) {
        let limits = *lock(&self.settings.output_limits);
        let limit = if to.pubsub.active() {
            limits[2]
        } else {
            limits[0]
        };
        self.pubsub.push_to(
            to,
            crate::pubsub::Push::Tracking(message),
            limit,
            &self.counters.output_limit_closes,
        );
    }
}

/// The server's clock work: samples the counters for INFO's rates every
/// 100 ms, and closes clients idle longer than `timeout` (once a second,
/// as redis's `clientsCron` does; clients blocked in BLPOP and friends are
/// waiting, not idle, and are left alone).
pub async fn clock(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut n: u64 = 0;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shared.wait_for_shutdown() => return,
        }
        shared.stats.sample(&shared.counters);
        n += 1;
        if n.is_multiple_of(10) {
            crate::process::sample_memory();
        }
        let timeout = shared.idle_timeout_secs.load(Ordering::Relaxed);
        if timeout > 0 && n.is_multiple_of(10) {
            let idle: Vec<_> = lock(&shared.clients)
                .values()
                .filter(|c| lock(&c.blocked).is_none() && c.idle_secs() > timeout)
                .cloned()
                .collect();
            for c in idle {
                tracing::debug!(client = c.id, "closing idle client (timeout)");
                c.killed.store(true, Ordering::SeqCst);
                c.kill_notify.notify_one();
            }
        }
    }
}

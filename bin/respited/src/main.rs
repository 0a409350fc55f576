//! `respited`: the respite daemon.
//!
//! A thin main: read the command line and the optional TOML file, set up
//! logging, claim the database, open the engine, bind the listeners (or
//! take systemd's), serve until SIGTERM, SIGINT, SIGQUIT or SHUTDOWN
//! (reloading the file on SIGHUP), then drain the writer, checkpoint and
//! exit 0. A start that fails on the way removes what it created. The
//! pieces live in respite-engine and respite-server.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use mimalloc::MiMalloc;
use respite_engine::{AppendFsync, Engine, OwnerLock};
use respite_server::{listener, Config, Shared};
use tokio::signal::unix::{signal, Signal, SignalKind};

mod import;
mod logging;

/// Buffers cross threads on every command (a connection task allocates a
/// request, the writer or a reader frees it; a reader allocates a value,
/// the connection frees it). glibc's allocator spent a quarter of a
/// pipelined GET's CPU on exactly that; mimalloc frees to the owning
/// thread's heap without a lock.
#[global_allocator]
static GLOBAL: MiMalloc = MiMalloc;

/// mimalloc's `mi_option_purge_delay` (its position in `mi_option_e`, the
/// same in mimalloc 2 and 3; libmimalloc-sys names no constant for it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Memory freed by a connection (a large reply it wrote, a large request
/// it read) goes back to the system at once. mimalloc's default delays the
/// purge by 10 ms and then only does it on a later allocation or free in
/// the same thread: a runtime thread that goes idle after serving a client
/// that read a few hundred 1 MB values kept 270 MB it no longer used.
/// Purging at once measured no different in throughput (SET and GET with
/// redis-benchmark -P 16, within run-to-run noise).
fn purge_freed_memory_at_once() {
    // SAFETY: sets one of mimalloc's tuning options; valid at any time.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
}

/// INFO's `mem_allocator`: the mimalloc linked in, with its version, as
/// redis names jemalloc's (`jemalloc-5.2.1`). `mi_version` answers
/// `MI_MALLOC_VERSION`: major, two digits of minor and two of patch
/// (30302 for 3.3.2); releases before 2.1 used one digit each (212).
fn name_allocator() {
    // SAFETY: mi_version only returns a constant.
    let v = unsafe { libmimalloc_sys::mi_version() };
    let (major, minor, patch) = if v >= 10_000 {
        (v / 10_000, v / 100 % 100, v % 100)
    } else {
        (v / 100, v / 10 % 10, v % 10)
    };
    respite_server::cmd::info::set_mem_allocator(format!("mimalloc-{major}.{minor}.{patch}"));
}

/// Raises the open files limit toward what `maxclients` needs, as
/// redis-server does at start (see `respite_server::fdlimit`). When the
/// system will not go that far the start goes on and says so, so the
/// operator can raise `LimitNOFILE` or `ulimit -n`. Unlike Redis,
/// `maxclients` is left as set: connections past the limit fail in
/// `accept`, which the listener logs and survives. (CONFIG SET maxclients
/// is refused instead, as in Redis.)
fn raise_open_files_limit(maxclients: usize) {
    use respite_server::fdlimit::{raise_for, Raised};
    match raise_for(maxclients as u64) {
        Ok(Raised::Enough) => {}
        Ok(Raised::Raised { from, to }) => tracing::info!(
            from,
            to,
            maxclients,
            "raised the open files limit (RLIMIT_NOFILE)"
        ),
        Err(e) => tracing::warn!(
            limit = e.limit,
            maxclients,
            wanted = e.wanted,
            cause = e.cause.as_ref().map(|c| c.to_string()),
            "the open files limit (hard RLIMIT_NOFILE) is below what maxclients needs: \
             raise 'ulimit -n' or LimitNOFILE, or lower maxclients"
        ),
    }
}

/// A Redis-protocol server that keeps its data in SQLite, durable by
/// default.
#[derive(Parser, Debug, Clone)]
#[command(name = "respited", version, about)]
struct Cli {
    /// TOML configuration file (see configs/respite.toml for every key).
    #[arg(long, short = 'c')]
    config: Option<PathBuf>,
    /// TCP address to listen on ("" disables TCP).
    #[arg(long)]
    bind: Option<String>,
    /// TCP port (0 picks a free one; the chosen port is logged).
    #[arg(long)]
    port: Option<u16>,
    /// Unix socket path to listen on as well.
    #[arg(long)]
    unixsocket: Option<PathBuf>,
    /// Permissions of the Unix socket, octal (e.g. 770).
    #[arg(long)]
    unixsocketperm: Option<String>,
    /// SQLite database file.
    #[arg(long)]
    db: Option<PathBuf>,
    /// always (fsync every batch), everysec, or no.
    #[arg(long)]
    appendfsync: Option<AppendFsync>,
    /// Most operations per group commit; 1 turns batching off.
    #[arg(long)]
    max_batch: Option<usize>,
    /// Read-only connections in the read pool.
    #[arg(long)]
    readers: Option<usize>,
    /// Memory for the cache of hot string values, in bytes; 0 turns it off.
    #[arg(long)]
    read_cache_bytes: Option<usize>,
    /// SQLite page size of a new database file (512 to 65536).
    #[arg(long)]
    page_size: Option<u32>,
    /// Copy the WAL into the database once it holds this many new bytes...
    #[arg(long)]
    checkpoint_wal_bytes: Option<u64>,
    /// ... or this percentage of the database file's size, if more.
    #[arg(long)]
    checkpoint_wal_percent: Option<u64>,
    /// The WAL's bound in bytes: past it, the writer waits between groups
    /// for the background copy to catch up.
    #[arg(long)]
    wal_checkpoint_bytes: Option<u64>,
    /// Who checkpoints the WAL: auto (respite) or external (Litestream,
    /// which must then be the only one to; see docs/operations.md).
    #[arg(long)]
    checkpoint: Option<respite_engine::Checkpoint>,
    /// Serve this file read-only, as a replica that `litestream restore
    /// -f -o FILE REPLICA` keeps up to date (in place of --db): every write
    /// is refused, INFO replication reports the follower's position.
    #[arg(long)]
    replica_of_file: Option<PathBuf>,
    /// Follow a redis-server master, "host port" (redis's replicaof):
    /// clients' writes are refused until REPLICAOF NO ONE.
    #[arg(long)]
    replicaof: Option<String>,
    /// Password clients must AUTH with.
    #[arg(long)]
    requirepass: Option<String>,
    /// Protected mode (yes or no): refuse clients from beyond loopback
    /// while the default user needs no password.
    #[arg(long, value_parser = yes_no)]
    protected_mode: Option<bool>,
    /// Most simultaneous clients.
    #[arg(long)]
    maxclients: Option<usize>,
    /// ACL file: users loaded at start and by ACL LOAD, written by ACL SAVE.
    #[arg(long)]
    aclfile: Option<PathBuf>,
    /// Port of the TLS listener (0 picks a free one); TLS is off without it.
    #[arg(long)]
    tls_port: Option<u16>,
    /// The server's certificate chain (PEM).
    #[arg(long)]
    tls_cert_file: Option<PathBuf>,
    /// The server's private key (PEM).
    #[arg(long)]
    tls_key_file: Option<PathBuf>,
    /// The CA that signs client certificates (PEM).
    #[arg(long)]
    tls_ca_cert_file: Option<PathBuf>,
    /// Whether TLS clients must present a certificate: yes, optional, no.
    #[arg(long)]
    tls_auth_clients: Option<respite_server::tls::AuthClients>,
    /// Log filter, e.g. info or debug.
    #[arg(long)]
    log_level: Option<String>,
    /// Instead of serving, run a one-off task on the database.
    #[command(subcommand)]
    task: Option<Task>,
}

/// One-off tasks on the database, run with the daemon stopped.
#[derive(clap::Subcommand, Debug, Clone)]
enum Task {
    /// Load every database of a redis-server RDB file (SAVE, BGSAVE,
    /// redis-cli --rdb; Redis 7.0 and older) into the database, then exit.
    Import {
        /// The RDB file.
        file: PathBuf,
        /// Import into a database that already holds keys (keys of the
        /// same names are replaced).
        #[arg(long)]
        force: bool,
    },
}

/// Parses redis.conf's yes/no.
fn yes_no(text: &str) -> Result<bool, String> {
    match text.to_ascii_lowercase().as_str() {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err(format!("'{text}' is not yes or no")),
    }
}

impl Cli {
    /// The file's settings (or the defaults) with the flags on top. Called
    /// at start and again at every SIGHUP, so flags keep winning over a
    /// reloaded file.
    fn load(&self) -> Result<Config, String> {
        let mut c = match &self.config {
            Some(path) => Config::from_file(path).map_err(|e| e.to_string())?,
            None => Config::default(),
        };
        macro_rules! over {
            ($($field:ident),*) => { $( if let Some(v) = &self.$field { c.$field = v.clone().into(); } )* };
        }
        over!(
            bind,
            port,
            db,
            appendfsync,
            max_batch,
            readers,
            read_cache_bytes,
            page_size,
            checkpoint_wal_bytes,
            checkpoint_wal_percent,
            wal_checkpoint_bytes,
            checkpoint,
            maxclients,
            protected_mode,
            log_level
        );
        if let Some(p) = &self.unixsocket {
            c.unixsocket = Some(p.clone());
        }
        if let Some(p) = &self.unixsocketperm {
            c.unixsocketperm = Some(p.clone());
        }
        if let Some(p) = &self.aclfile {
            c.aclfile = Some(p.clone());
        }
        if let Some(p) = self.tls_port {
            c.tls_port = Some(p);
        }
        for (flag, field) in [
            (&self.tls_cert_file, &mut c.tls_cert_file),
            (&self.tls_key_file, &mut c.tls_key_file),
            (&self.tls_ca_cert_file, &mut c.tls_ca_cert_file),
        ] {
            if let Some(p) = flag {
                *field = Some(p.clone());
            }
        }
        if let Some(a) = self.tls_auth_clients {
            c.tls_auth_clients = a;
        }
        if let Some(p) = &self.requirepass {
            c.requirepass = Some(p.clone());
        }
        if let Some(p) = &self.replica_of_file {
            c.replica_of_file = Some(p.clone());
        }
        if let Some(m) = &self.replicaof {
            c.replicaof = Some(m.clone());
        }
        // A replica serves its file in place of `db`.
        if let Some(p) = &c.replica_of_file {
            c.db = p.clone();
        }
        c.validate().map_err(|e| e.to_string())?;
        Ok(c)
    }
}

/// The files a start-up may create, and which of them were already
/// there: a start that fails removes the ones it made, so a failed start
/// (port taken, database refused) leaves the disk as it found it.
struct Leftovers(Vec<(PathBuf, bool)>);

impl Leftovers {
    fn note(config: &Config) -> Leftovers {
        let mut paths = vec![config.db.clone()];
        for suffix in ["-wal", "-shm", "-journal", ".reserve"] {
            let mut p = config.db.clone().into_os_string();
            p.push(suffix);
            paths.push(p.into());
        }
        Leftovers(paths.into_iter().map(|p| (p.clone(), p.exists())).collect())
    }

    /// Removes what did not exist at [`Leftovers::note`].
    fn remove_new(&self) {
        for (path, existed) in &self.0 {
            if !existed {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// Why start-up failed, and with which exit status.
enum StartError {
    /// The command line or the file (status 2: the unit does not restart).
    Config(String),
    /// Anything else (status 1).
    Other(String),
}

fn main() -> ExitCode {
    purge_freed_memory_at_once();
    name_allocator();
    let cli = Cli::parse();
    let config = match cli.load() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("respited: {e}");
            return ExitCode::from(2);
        }
    };
    let set_log_level: respite_server::state::LogFilter =
        Arc::from(logging::init(&config.log_level));
    if let Some(Task::Import { file, force }) = &cli.task {
        return match import::run(&config, file, *force, u64::from(config.databases)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("respited import: {e}");
                ExitCode::FAILURE
            }
        };
    }
    match serve(&cli, config, &set_log_level) {
        Ok(()) => {
            tracing::info!("respited stopped cleanly");
            ExitCode::SUCCESS
        }
        Err(StartError::Config(e)) => {
            tracing::error!("{e}");
            ExitCode::from(2)
        }
        Err(StartError::Other(e)) => {
            tracing::error!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// Claims the database, opens the engine, binds the listeners, serves
/// until a stop, and drains. What it created is removed again if a step
/// before serving fails.
fn serve(
    cli: &Cli,
    config: Config,
    set_log_level: &respite_server::state::LogFilter,
) -> Result<(), StartError> {
    let leftovers = Leftovers::note(&config);
    raise_open_files_limit(config.maxclients);
    // First, so a second daemon on the same database is told who owns it
    // (rather than that the port is taken), and never touches the owner's
    // Unix socket.
    let owner = OwnerLock::acquire(&config.db).map_err(|e| StartError::Other(e.to_string()))?;
    let lock_path = owner.created().then(|| owner.path().to_path_buf());
    let undo = |owner: Option<OwnerLock>| {
        drop(owner);
        if let Some(p) = &lock_path {
            let _ = std::fs::remove_file(p);
        }
        leftovers.remove_new();
    };
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all();
    // Connection tasks get half the cores by default: the writer thread and
    // the read pool do the storage work and need the other half (measured on
    // 2 cores: one I/O thread beat two under redis-benchmark).
    let io_threads = match config.io_threads {
        0 => std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1)),
        n => n,
    };
    runtime.worker_threads(io_threads);
    // A script's reply may nest arrays some 8,000 deep, as redis's does
    // (up to Lua's stack limit), and a connection encodes and drops it
    // recursively: under 1 MiB of stack in a release build, so 8 MiB (the
    // usual main-thread stack) leaves room; a debug build's larger frames
    // keep 64 MiB. Only the pages a thread touches are committed.
    runtime.thread_stack_size(if cfg!(debug_assertions) {
        64 << 20
    } else {
        8 << 20
    });
    let runtime = match runtime.build() {
        Ok(r) => r,
        Err(e) => {
            undo(Some(owner));
            return Err(StartError::Other(format!("cannot start the runtime: {e}")));
        }
    };
    let signals = {
        let _context = runtime.enter();
        Signals::install()
    };
    // The database before the sockets, as it always was: a crashed run's
    // WAL is recovered (and logged) before "listening on", and a client
    // that connects early waits in the backlog rather than finding a
    // server without a database.
    let (deliver, dispatcher) = respite_server::delivery::channel();
    let engine = match Engine::open_owned(config.engine(), deliver, owner) {
        Ok(e) => e,
        Err(e) => {
            undo(None);
            return Err(StartError::Other(format!(
                "cannot open {}: {e}",
                config.db.display()
            )));
        }
    };
    tracing::info!(
        db = %config.db.display(),
        appendfsync = config.appendfsync.as_str(),
        max_batch = config.max_batch,
        page_size = engine.page_size(),
        "respited {} starting",
        env!("CARGO_PKG_VERSION")
    );
    let listeners = match runtime.block_on(async {
        let activated = listener::take_activated()?;
        listener::Listeners::bind(&config, activated).await
    }) {
        Ok(l) => l,
        Err(e) => {
            // Closing the engine checkpoints and lets SQLite remove its
            // -wal and -shm files; the lock goes with it.
            drop(engine);
            undo(None);
            return Err(match e {
                listener::ListenError::Nothing => StartError::Config(e.to_string()),
                e => StartError::Other(e.to_string()),
            });
        }
    };
    let shared = Arc::new(Shared::new(engine, config));
    // CONFIG SET loglevel swaps the filter as SIGHUP does.
    let _ = shared.log_filter.set(set_log_level.clone());
    if let Some(path) = &shared.config.aclfile {
        if let Err(e) = shared.acl.load(path) {
            listeners.remove_socket_files();
            drop(shared);
            undo(None);
            return Err(StartError::Config(format!("cannot load the ACL file: {e}")));
        }
        tracing::info!(file = %path.display(), users = shared.acl.users().len(), "ACL file loaded");
    }
    runtime.block_on(async {
        tokio::spawn(dispatcher.run());
        let server = tokio::spawn(respite_server::run(shared.clone(), listeners));
        signals.run(cli, &shared, &**set_log_level, server).await;
    });
    Ok(())
}

/// The signals respited handles, installed before anything is bound: from
/// the first "listening on" line on, no signal takes the default action of
/// ending the process silently. SIGHUP reloads the configuration;
/// SIGTERM, SIGINT and SIGQUIT stop cleanly; the other signals whose
/// default would end the process are logged and ignored, so no signal
/// ends respited without a line in the log (except SIGKILL, which nothing
/// can catch).
struct Signals {
    term: Option<Signal>,
    int: Option<Signal>,
    quit: Option<Signal>,
    hup: Option<Signal>,
    usr1: Option<Signal>,
    usr2: Option<Signal>,
    alrm: Option<Signal>,
    io: Option<Signal>,
}

/// Waits for one delivery of `s` (forever if it could not be installed).
async fn recv(s: &mut Option<Signal>) {
    match s {
        Some(s) => {
            if s.recv().await.is_none() {
                std::future::pending::<()>().await
            }
        }
        None => std::future::pending().await,
    }
}

impl Signals {
    /// Installs the handlers; must run inside the runtime's context.
    fn install() -> Signals {
        let listen = |kind: SignalKind, name: &str| match signal(kind) {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!(error = %e, "cannot handle {name}");
                None
            }
        };
        Signals {
            term: listen(SignalKind::terminate(), "SIGTERM"),
            int: listen(SignalKind::interrupt(), "SIGINT"),
            quit: listen(SignalKind::quit(), "SIGQUIT"),
            hup: listen(SignalKind::hangup(), "SIGHUP"),
            usr1: listen(SignalKind::user_defined1(), "SIGUSR1"),
            usr2: listen(SignalKind::user_defined2(), "SIGUSR2"),
            alrm: listen(SignalKind::alarm(), "SIGALRM"),
            io: listen(SignalKind::io(), "SIGIO"),
        }
    }

    /// Handles signals until the server has stopped.
    async fn run(
        mut self,
        cli: &Cli,
        shared: &Arc<Shared>,
        set_log_level: &(dyn Fn(&str) -> Result<(), String> + Sync),
        server: tokio::task::JoinHandle<()>,
    ) {
        tokio::pin!(server);
        let stop = |name: &str| {
            if shared.is_shutting_down() {
                tracing::info!("{name} received; already stopping");
            } else {
                tracing::info!("{name} received, shutting down");
                shared.begin_shutdown();
            }
        };
        loop {
            tokio::select! {
                _ = &mut server => return,
                _ = recv(&mut self.term) => stop("SIGTERM"),
                _ = recv(&mut self.int) => stop("SIGINT"),
                _ = recv(&mut self.quit) => stop("SIGQUIT"),
                _ = recv(&mut self.hup) => reload(cli, shared, set_log_level),
                _ = recv(&mut self.usr1) => tracing::warn!("SIGUSR1 received; ignored"),
                _ = recv(&mut self.usr2) => tracing::warn!("SIGUSR2 received; ignored"),
                _ = recv(&mut self.alrm) => tracing::warn!("SIGALRM received; ignored"),
                _ = recv(&mut self.io) => tracing::warn!("SIGIO received; ignored"),
            }
        }
    }
}

/// SIGHUP: re-reads the configuration file (with the command line's flags
/// on top again) and applies what can change at run time; a file that
/// does not load changes nothing. Framed by RELOADING=1 and READY=1.
fn reload(cli: &Cli, shared: &Shared, set_log_level: &(dyn Fn(&str) -> Result<(), String> + Sync)) {
    use respite_server::service::{notify, NotifyState};
    let mut states = vec![NotifyState::Reloading];
    // systemd's Type=notify-reload wants the time of the request with it.
    if let Ok(now) = NotifyState::monotonic_usec_now() {
        states.push(now);
    }
    notify(&states);
    let Some(path) = &cli.config else {
        // Certificates are files of their own, renewed whether or not
        // there is a configuration file.
        match respite_server::tls::reload(&shared.tls, &shared.config) {
            Some(Ok(())) => tracing::info!("SIGHUP received: TLS certificates re-read"),
            Some(Err(e)) => tracing::error!(
                "SIGHUP received: TLS certificates not reloaded, the old ones stay: {e}"
            ),
            None => tracing::warn!(
                "SIGHUP received, but respited was started without --config: nothing to reload"
            ),
        }
        notify(&[NotifyState::Ready]);
        return;
    };
    tracing::info!(file = %path.display(), "SIGHUP received, reloading the configuration");
    match cli.load() {
        Err(e) => {
            tracing::error!("reload refused, the running settings stay: {e}");
            let status = format!("reload refused: {e}");
            notify(&[NotifyState::Ready, NotifyState::Status(&status)]);
        }
        Ok(new) => {
            let outcome = respite_server::service::reload(shared, &new, set_log_level);
            if outcome.applied.is_empty() {
                tracing::info!("configuration reloaded: nothing to change");
            } else {
                tracing::info!(
                    "configuration reloaded, applied: {}",
                    outcome.applied.join(", ")
                );
            }
            if !outcome.need_restart.is_empty() {
                tracing::warn!(
                    "changed in the file but only applied by a restart: {}",
                    outcome.need_restart.join(", ")
                );
            }
            notify(&[NotifyState::Ready]);
        }
    }
}

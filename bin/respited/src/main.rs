//! `respited`: the respite daemon.
//!
//! A thin main: read the command line and the optional TOML file, set up
//! logging, open the engine, serve until SIGINT, SIGTERM or SHUTDOWN, then
//! drain the writer, checkpoint and exit 0. Everything else lives in
//! respite-engine and respite-server.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use mimalloc::MiMalloc;
use respite_engine::{AppendFsync, Engine};
use respite_server::{Config, Shared};

/// Buffers cross threads on every command (a connection task allocates a
/// request, the writer or a reader frees it; a reader allocates a value,
/// the connection frees it). glibc's allocator spent a quarter of a
/// pipelined GET's CPU on exactly that; mimalloc frees to the owning
/// thread's heap without a lock.
#[global_allocator]
static GLOBAL: MiMalloc = MiMalloc;

/// A Redis-protocol server that keeps its data in SQLite, durable by
/// default.
#[derive(Parser, Debug)]
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
    /// Checkpoint and truncate the WAL on the writer once it passes this
    /// many bytes (the hard bound).
    #[arg(long)]
    wal_checkpoint_bytes: Option<u64>,
    /// Password clients must AUTH with.
    #[arg(long)]
    requirepass: Option<String>,
    /// Most simultaneous clients.
    #[arg(long)]
    maxclients: Option<usize>,
    /// Log filter, e.g. info or debug.
    #[arg(long)]
    log_level: Option<String>,
}

impl Cli {
    /// The file's settings (or the defaults) with the flags on top.
    fn into_config(self) -> Result<Config, String> {
        let mut c = match &self.config {
            Some(path) => Config::from_file(path).map_err(|e| e.to_string())?,
            None => Config::default(),
        };
        macro_rules! over {
            ($($field:ident),*) => { $( if let Some(v) = self.$field { c.$field = v.into(); } )* };
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
            maxclients,
            log_level
        );
        if let Some(p) = self.unixsocket {
            c.unixsocket = Some(p);
        }
        if let Some(p) = self.unixsocketperm {
            c.unixsocketperm = Some(p);
        }
        if let Some(p) = self.requirepass {
            c.requirepass = Some(p);
        }
        c.validate().map_err(|e| e.to_string())?;
        Ok(c)
    }
}

fn main() -> ExitCode {
    let config = match Cli::parse().into_config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("respited: {e}");
            return ExitCode::from(2);
        }
    };
    let filter = tracing_subscriber::EnvFilter::try_new(&config.log_level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();

    let (deliver, dispatcher) = respite_server::delivery::channel();
    let engine = match Engine::open_with_delivery(config.engine(), deliver) {
        Ok(e) => e,
        Err(e) => {
            tracing::error!("cannot open {}: {e}", config.db.display());
            return ExitCode::FAILURE;
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
    let runtime = match runtime.build() {
        Ok(r) => r,
        Err(e) => {
            tracing::error!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let shared = Arc::new(Shared::new(engine, config));
    let result = runtime.block_on(async {
        tokio::spawn(dispatcher.run());
        let signals = shared.clone();
        tokio::spawn(async move {
            wait_for_signal().await;
            tracing::info!("signal received, shutting down");
            signals.begin_shutdown();
        });
        respite_server::run(shared.clone()).await
    });
    match result {
        Ok(()) => {
            tracing::info!("respited stopped cleanly");
            ExitCode::SUCCESS
        }
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// Resolves on SIGINT or SIGTERM.
async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

//! respite-server: the Redis protocol in front of respite-engine.
//!
//! This crate is what a Redis client talks to. It accepts connections on TCP
//! and a Unix socket ([`listener`]), runs one task per client that cuts the
//! byte stream into requests ([`request`]) and answers them in order
//! ([`connection`]), and knows every command by name ([`command`] the
//! framework and table, [`cmd`] the families, [`meta`] redis's description
//! of each): its arity, its flags, how to parse it, and whether it reads,
//! writes or only concerns the connection. It never speaks SQL; data goes through the engine's two
//! doors, the writer queue for writes and the read pool for reads.
//!
//! The aim is to be indistinguishable from redis-server for the commands it
//! has: the same replies, the same reply types, the same error texts, byte
//! for byte, so that existing clients, redis-cli and redis-benchmark work
//! unchanged. The difference is underneath: every acknowledged write is
//! already on disk (with the default `appendfsync always`).

#![warn(missing_docs)]

pub mod acl;
pub mod args;
pub mod binding;
pub mod blocking;
pub mod clients;
pub mod cmd;
pub mod command;
pub mod config;
pub mod connection;
pub mod delivery;
pub mod error;
pub mod fdlimit;
pub mod limits;
pub mod listener;
pub mod lolwut;
pub mod long_double;
pub mod meta;
pub mod monitor;
pub mod output;
pub mod params;
pub mod process;
pub mod propagation;
pub mod protected;
pub mod pubsub;
pub mod repl;
pub mod replica_link;
pub mod reply;
pub mod request;
pub mod service;
pub mod sparkline;
pub mod state;
pub mod stats;
pub mod stream_id;
pub mod sync;
pub mod tls;
pub mod tracking;
pub mod value;

use std::sync::Arc;

pub use config::Config;
pub use reply::Reply;
pub use state::Shared;

/// Applies the configuration file's `[redis]` table, then serves on
/// `listeners` until shutdown begins (SHUTDOWN, or
/// [`Shared::begin_shutdown`] from a signal handler); then waits for open
/// connections, drains the writer and checkpoints. The service manager is
/// told READY=1 as accepting starts (the database is open and every
/// listener bound by then), and its stop timeout is extended while the
/// drain runs (see [`service`]).
pub async fn run(shared: Arc<Shared>, listeners: listener::Listeners) {
    // Checked by `Config::validate` already: this cannot fail.
    if let Err(e) = params::apply_file(&shared) {
        tracing::warn!("configuration [redis] table: {e}");
    }
    state::install_notifications(&shared);
    state::install_tracking(&shared);
    repl::install(&shared.engine, &shared.repl);
    shared.tls.set(listeners.tls_config());
    if let Some(port) = listeners.tcp_port() {
        shared
            .tcp_port
            .store(port as u32, std::sync::atomic::Ordering::Relaxed);
    }
    cmd::functions::restore_at_start(&shared).await;
    service::ready(&shared);
    replica_link::run::start_configured(&shared);
    tokio::spawn(service::monitor(shared.clone()));
    tokio::spawn(state::clock(shared.clone()));
    let serving = listeners.run(shared.clone());
    tokio::pin!(serving);
    // The listeners also end on their own once shutdown begins, so either
    // branch may win; a finished `serving` must not be awaited again.
    let served = tokio::select! {
        _ = &mut serving => true,
        _ = shared.wait_for_shutdown() => false,
    };
    let engine_shared = shared.clone();
    service::stopping(async move {
        // Connections finish their turn (bounded by the listeners' grace
        // period), then the writer drains and checkpoints.
        if !served {
            serving.await;
        }
        // Draining the writer blocks; do it off the runtime's workers.
        let _ = tokio::task::spawn_blocking(move || engine_shared.engine.shutdown()).await;
    })
    .await;
}

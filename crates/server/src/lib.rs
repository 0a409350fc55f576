//! respite-server: the Redis protocol in front of respite-engine.
//!
//! This crate is what a Redis client talks to. It accepts connections on TCP
//! and a Unix socket ([`listener`]), runs one task per client that cuts the
//! byte stream into requests ([`request`]) and answers them in order
//! ([`connection`]), and knows every command by name ([`cmd`]): its arity, its
//! flags, how to parse it, and whether it reads, writes or only concerns the
//! connection. It never speaks SQL; data goes through the engine's two
//! doors, the writer queue for writes and the read pool for reads.
//!
//! The aim is to be indistinguishable from redis-server for the commands it
//! has: the same replies, the same reply types, the same error texts, byte
//! for byte, so that existing clients, redis-cli and redis-benchmark work
//! unchanged. The difference is underneath: every acknowledged write is
//! already on disk (with the default `appendfsync always`).

#![warn(missing_docs)]

pub mod args;
pub mod blocking;
pub mod cmd;
pub mod config;
pub mod connection;
pub mod delivery;
pub mod error;
pub mod listener;
pub mod long_double;
pub mod reply;
pub mod request;
pub mod state;

use std::sync::Arc;

pub use config::Config;
pub use reply::Reply;
pub use state::Shared;

/// Opens the engine, binds the listeners and serves until shutdown begins
/// (SHUTDOWN, or [`Shared::begin_shutdown`] from a signal handler); then
/// waits for open connections, drains the writer and checkpoints.
pub async fn run(shared: Arc<Shared>) -> std::io::Result<()> {
    let listeners = listener::Listeners::bind(&shared).await?;
    listeners.run(shared.clone()).await;
    let engine_shared = shared.clone();
    // Draining the writer blocks; do it off the runtime's workers.
    let _ = tokio::task::spawn_blocking(move || engine_shared.engine.shutdown()).await;
    Ok(())
}

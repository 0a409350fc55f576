//! Error types.
//!
//! A load generator fails in a handful of distinct ways: the command line is
//! wrong, a target cannot be reached or refuses the handshake, the network
//! breaks mid-run, the server speaks something that is not RESP, or a report
//! file cannot be written. Each gets its own variant so that `main` can print
//! a precise message and tests can match on the kind of failure instead of on
//! the wording.

use std::io;
use std::path::PathBuf;

use crate::resp::ProtoError;

/// Problems with the command line that clap itself cannot detect.
#[derive(Debug, thiserror::Error)]
pub enum ArgError {
    /// A `--duration`, `--warmup` or `--timeout` that is not a number with
    /// an optional `ms`/`us`/`s`/`m`/`h` unit.
    #[error("invalid duration {0:?} (use e.g. 30s, 500ms, 2m or a plain number of seconds)")]
    Duration(String),
    /// A `--data-size-range` or `--expire-range` that is not `MIN-MAX`.
    #[error("invalid range {0:?} (expected MIN-MAX with MIN <= MAX)")]
    Range(String),
    /// A `--ratio` that is not `SET:GET` with at least one non-zero weight.
    #[error("invalid --ratio {0:?} (expected SET:GET, e.g. 1:10)")]
    Ratio(String),
    /// A `--key-pattern` that is neither a name nor memtier's `X:X`.
    #[error("invalid --key-pattern {0:?} (expected uniform, sequential, gaussian, zipf, or memtier's R:R, S:S, P:P, G:G)")]
    KeyPattern(String),
    /// A `--target` in none of the accepted address forms.
    #[error("invalid --target {0:?} (expected [NAME=]HOST:PORT or [NAME=]unix:PATH)")]
    Target(String),
    /// A `--command` template, with the reason it was rejected.
    #[error("invalid --command {0:?}: {1}")]
    Template(String, &'static str),
    /// Flags that are each valid but cannot be combined, or a value out of
    /// range; the message says which.
    #[error("{0}")]
    Conflict(&'static str),
}

/// Everything that can stop a run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The command line was rejected before anything was sent.
    #[error(transparent)]
    Arg(#[from] ArgError),
    /// Dialing the target failed (or setting `TCP_NODELAY` on the socket).
    #[error("cannot connect to {target}: {source}")]
    Connect { target: String, source: io::Error },
    /// `HELLO`, `AUTH` or `SELECT` answered with an error.
    #[error("handshake with {target} failed: {reply}")]
    Handshake { target: String, reply: String },
    /// Reading or writing an established connection failed.
    #[error("I/O error talking to {target}: {source}")]
    Io { target: String, source: io::Error },
    /// The server closed a connection while replies were still owed.
    #[error("{target} closed the connection")]
    Closed { target: String },
    /// No byte arrived within `--timeout` while a reply was awaited.
    #[error("no reply from {target} within {secs}s")]
    Timeout { target: String, secs: u64 },
    /// The server sent bytes that are not RESP.
    #[error("protocol error from {target}: {source}")]
    Protocol { target: String, source: ProtoError },
    /// A command of a phase's preparation (preload, list or hash building)
    /// answered with an error, so the measurement would be meaningless.
    #[error("preparing keys on {target} failed: {reply}")]
    Prepare { target: String, reply: String },
    /// A worker thread or its tokio runtime could not be created.
    #[error("cannot start worker thread: {0}")]
    Runtime(io::Error),
    /// A worker thread or task panicked; its figures are lost, so the run is
    /// abandoned rather than reported short.
    #[error("a worker thread panicked")]
    WorkerPanic,
    /// A report file could not be created or written.
    #[error("cannot write {path}: {source}")]
    Output { path: PathBuf, source: io::Error },
    /// The HdrHistogram interval log could not be encoded.
    #[error("cannot encode the HdrHistogram log {path}: {msg}")]
    HdrLog { path: PathBuf, msg: String },
}

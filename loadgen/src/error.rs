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
    #[error("invalid duration {0:?} (use e.g. 30s, 500ms, 2m or a plain number of seconds)")]
    Duration(String),
    #[error("invalid range {0:?} (expected MIN-MAX with MIN <= MAX)")]
    Range(String),
    #[error("invalid --ratio {0:?} (expected SET:GET, e.g. 1:10)")]
    Ratio(String),
    #[error("invalid --target {0:?} (expected [NAME=]HOST:PORT or [NAME=]unix:PATH)")]
    Target(String),
    #[error("invalid --command {0:?}: {1}")]
    Template(String, &'static str),
    #[error("{0}")]
    Conflict(&'static str),
}

/// Everything that can stop a run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Arg(#[from] ArgError),
    #[error("cannot connect to {target}: {source}")]
    Connect { target: String, source: io::Error },
    #[error("handshake with {target} failed: {reply}")]
    Handshake { target: String, reply: String },
    #[error("I/O error talking to {target}: {source}")]
    Io { target: String, source: io::Error },
    #[error("{target} closed the connection")]
    Closed { target: String },
    #[error("no reply from {target} within {secs}s")]
    Timeout { target: String, secs: u64 },
    #[error("protocol error from {target}: {source}")]
    Protocol { target: String, source: ProtoError },
    #[error("preparing keys on {target} failed: {reply}")]
    Prepare { target: String, reply: String },
    #[error("cannot start worker thread: {0}")]
    Runtime(io::Error),
    #[error("a worker thread panicked")]
    WorkerPanic,
    #[error("cannot write {path}: {source}")]
    Output { path: PathBuf, source: io::Error },
    #[error("cannot encode the HdrHistogram log {path}: {msg}")]
    HdrLog { path: PathBuf, msg: String },
}

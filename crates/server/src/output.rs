//! The reply side of a connection: how encoded replies reach the socket,
//! and what happens to a client that does not read them.
//!
//! Replies are encoded in request order into one buffer and written once
//! per turn, so a pipeline of small commands costs one write syscall. A
//! turn with large replies does not wait until the whole of it is encoded:
//! once the buffer holds [`STREAM_AT`] bytes it is written out, and a read
//! job's replies, encoded by the reader thread, go to the socket as they
//! are rather than being copied into the buffer first. A turn's memory is
//! therefore about one chunk plus the replies still being computed, not
//! the whole pipeline's replies two or three times over.
//!
//! A client that stops reading leaves its replies in that buffer while the
//! socket is full. Redis bounds this with `client-output-buffer-limit`; so
//! does respite, for the normal class of clients (the only class it has
//! until pub/sub lands; the other classes are kept for CONFIG GET): over
//! the hard limit the client is closed at once, over the soft limit for
//! longer than its seconds it is closed too. The pending bytes are those
//! encoded and not yet taken by the kernel, as `omem` in CLIENT LIST. While
//! a write waits, CLIENT KILL still takes effect at once, and the
//! connection's memory is released when its task ends.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::time::Instant;

use crate::clients::ClientHandle;
use crate::state::Shared;

/// Once a turn's encoded replies reach this many bytes they are written out
/// before more are encoded.
pub const STREAM_AT: usize = 64 * 1024;

/// One class's `client-output-buffer-limit`: bytes and seconds, 0 for no
/// limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClassLimit {
    /// Close the client as soon as its pending output is over this.
    pub hard: u64,
    /// Close the client when its pending output stays over this ...
    pub soft: u64,
    /// ... for this many seconds.
    pub soft_seconds: u64,
}

/// The classes Redis names, in the order CONFIG GET prints them.
pub const CLASSES: [&str; 3] = ["normal", "slave", "pubsub"];

/// `client-output-buffer-limit` as Redis parses it: one or more
/// `<class> <hard> <soft> <soft seconds>` groups, sizes with Redis's memory
/// units (`32mb`), class `replica` as another name of `slave`.
pub fn parse_limits(text: &str, current: [ClassLimit; 3]) -> Result<[ClassLimit; 3], &'static str> {
    let words: Vec<&str> = text.split_whitespace().collect();
    if !words.len().is_multiple_of(4) {
        return Err("Wrong number of arguments in buffer limit configuration.");
    }
    let mut limits = current;
    for group in words.chunks(4) {
        let class = match group[0].to_ascii_lowercase().as_str() {
            "normal" => 0,
            "slave" | "replica" => 1,
            "pubsub" => 2,
            _ => return Err("Invalid client class specified in buffer limit configuration."),
        };
        let memory = |s: &str| crate::params::parse_memory(s);
        let (Some(hard), Some(soft)) = (memory(group[1]), memory(group[2])) else {
            return Err(
                "Error in hard, soft or soft_seconds setting in buffer limit configuration.",
            );
        };
        let Ok(soft_seconds) = group[3].parse::<u64>() else {
            return Err(
                "Error in hard, soft or soft_seconds setting in buffer limit configuration.",
            );
        };
        limits[class] = ClassLimit {
            hard,
            soft,
            soft_seconds,
        };
    }
    Ok(limits)
}

/// The limits as CONFIG GET prints them (`normal 0 0 0 slave ...`).
pub fn format_limits(limits: &[ClassLimit; 3]) -> String {
    CLASSES
        .iter()
        .zip(limits)
        .map(|(class, l)| format!("{class} {} {} {}", l.hard, l.soft, l.soft_seconds))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Redis's defaults: no limit for normal clients, 256mb/64mb/60 for
/// replicas, 32mb/8mb/60 for pub/sub.
pub const DEFAULT_LIMITS: &str =
    "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60";

/// The normal class's limit, as the connection loops read it: atomics, so
/// CONFIG SET takes effect on the next write of every client.
#[derive(Debug, Default)]
pub struct NormalLimit {
    hard: AtomicU64,
    soft: AtomicU64,
    soft_seconds: AtomicU64,
}

impl NormalLimit {
    /// Sets the limit.
    pub fn store(&self, l: ClassLimit) {
        self.hard.store(l.hard, Ordering::Relaxed);
        self.soft.store(l.soft, Ordering::Relaxed);
        self.soft_seconds.store(l.soft_seconds, Ordering::Relaxed);
    }

    /// The limit in force.
    pub fn load(&self) -> ClassLimit {
        ClassLimit {
            hard: self.hard.load(Ordering::Relaxed),
            soft: self.soft.load(Ordering::Relaxed),
            soft_seconds: self.soft_seconds.load(Ordering::Relaxed),
        }
    }
}

/// Why a write to the client was given up: the connection closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Abandoned {
    /// The peer went away or the socket failed.
    Gone,
    /// CLIENT KILL.
    Killed,
    /// Its pending output went over `client-output-buffer-limit`.
    OverLimit,
}

/// Writes a connection's replies, minding CLIENT KILL and the output
/// limits. Made for each turn from the connection's parts.
pub struct Sender<'a, S, K> {
    /// The socket.
    pub stream: &'a mut S,
    /// Completes when the client is killed (the connection loop's own
    /// future, registered since the connection began, so no kill is missed).
    pub killed: Pin<&'a mut K>,
    /// The client, for `omem`.
    pub client: &'a ClientHandle,
    /// The server, for the limits.
    pub shared: &'a Shared,
    /// Since when the pending output has been over the soft limit; kept by
    /// the connection across turns, as Redis keeps it per client.
    pub over_soft_since: &'a mut Option<Instant>,
}

impl<S, K> Sender<'_, S, K>
where
    S: AsyncWrite + Unpin,
    K: Future,
{
    /// Writes `bytes`, with `queued` more bytes encoded behind them (they
    /// count towards the limits too, and are one block of CLIENT LIST's
    /// `oll`). `from_buffer`: `bytes` is the connection's reply buffer
    /// (CLIENT LIST's `obl`), not a block encoded elsewhere. Fails, and
    /// the connection must close, if the client is killed, goes over its
    /// output limit, or the socket fails.
    pub async fn send(
        &mut self,
        bytes: &[u8],
        queued: usize,
        from_buffer: bool,
    ) -> Result<(), Abandoned> {
        let mut written = 0;
        let client = self.client;
        let figures = &client.state.buffers;
        let behind = usize::from(queued > 0);
        while written < bytes.len() {
            let left = bytes.len() - written;
            let pending = (left + queued) as u64;
            self.client.output_bytes.store(pending, Ordering::Relaxed);
            if from_buffer {
                figures.pending(left, behind);
            } else {
                figures.pending(0, 1 + behind);
            }
            let deadline = self.check_limits(pending)?;
            let timer = async {
                match deadline {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                // The write first: a client that reads never pays for the
                // other branches.
                biased;
                r = self.stream.write(&bytes[written..]) => match r {
                    Ok(0) | Err(_) => return Err(self.abandon(Abandoned::Gone)),
                    Ok(n) => {
                        written += n;
                        crate::connection::count_io(
                            &self.shared.counters.net_output_bytes,
                            &self.shared.counters.writes_processed,
                            n,
                        );
                    }
                },
                _ = self.killed.as_mut() => return Err(self.abandon(Abandoned::Killed)),
                // The soft limit's time ran out while the socket was full:
                // the next round of the loop closes the client.
                _ = timer => {}
            }
        }
        let pending = queued as u64;
        self.client.output_bytes.store(pending, Ordering::Relaxed);
        figures.pending(0, behind);
        if pending == 0 {
            *self.over_soft_since = None;
        }
        Ok(())
    }

    /// Applies the limits to `pending` bytes. `Ok(Some(at))`: over the soft
    /// limit, which closes the client at `at` if still over then.
    fn check_limits(&mut self, pending: u64) -> Result<Option<Instant>, Abandoned> {
        let limit = self.shared.settings.output_limit.load();
        if limit.hard > 0 && pending > limit.hard {
            return Err(self.abandon(Abandoned::OverLimit));
        }
        if limit.soft == 0 || pending <= limit.soft {
            *self.over_soft_since = None;
            return Ok(None);
        }
        let since = *self.over_soft_since.get_or_insert_with(Instant::now);
        let at = since + Duration::from_secs(limit.soft_seconds);
        if Instant::now() >= at {
            return Err(self.abandon(Abandoned::OverLimit));
        }
        Ok(Some(at))
    }

    /// Logs and counts why the write was given up.
    fn abandon(&self, why: Abandoned) -> Abandoned {
        if why == Abandoned::OverLimit {
            let limit = self.shared.settings.output_limit.load();
            tracing::warn!(
                client = self.client.id,
                addr = %self.client.addr(),
                omem = self.client.output_bytes.load(Ordering::Relaxed),
                "client scheduled to be closed ASAP for overcoming of output buffer limits \
                 (normal {} {} {})",
                limit.hard,
                limit.soft,
                limit.soft_seconds,
            );
            self.shared
                .counters
                .output_limit_closes
                .fetch_add(1, Ordering::Relaxed);
        }
        self.client.output_bytes.store(0, Ordering::Relaxed);
        self.client.state.buffers.pending(0, 0);
        why
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse_as_redis() {
        let defaults = parse_limits(DEFAULT_LIMITS, [ClassLimit::default(); 3]).unwrap();
        assert_eq!(format_limits(&defaults), DEFAULT_LIMITS);
        let set = parse_limits("normal 10mb 1mb 5 replica 0 0 0", defaults).unwrap();
        assert_eq!(
            set[0],
            ClassLimit {
                hard: 10 << 20,
                soft: 1 << 20,
                soft_seconds: 5
            }
        );
        assert_eq!(set[1], ClassLimit::default());
        assert_eq!(set[2], defaults[2]);
        assert!(parse_limits("normal 1 2", defaults).is_err());
        assert!(parse_limits("master 1 2 3", defaults).is_err());
        assert!(parse_limits("normal x 2 3", defaults).is_err());
        assert!(parse_limits("normal 1 2 -3", defaults).is_err());
    }
}

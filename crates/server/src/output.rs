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
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::time::Instant;

use crate::clients::ClientHandle;
use crate::limits::NormalLimit;
use crate::stats::Counters;

/// Once a turn's encoded replies reach this many bytes they are written out
/// before more are encoded.
pub const STREAM_AT: usize = 64 * 1024;

/// Counts one read from or write to a client, for INFO stats.
pub(crate) fn count_io(
    bytes: &std::sync::atomic::AtomicU64,
    calls: &std::sync::atomic::AtomicU64,
    n: usize,
) {
    bytes.fetch_add(n as u64, Ordering::Relaxed);
    calls.fetch_add(1, Ordering::Relaxed);
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
    /// The normal class's output limit in force.
    pub limit: &'a NormalLimit,
    /// The server's counters (bytes written, writes, closes for the limit).
    pub counters: &'a Counters,
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
                        count_io(
                            &self.counters.net_output_bytes,
                            &self.counters.writes_processed,
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
        let limit = self.limit.load();
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
            let limit = self.limit.load();
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
            self.counters
                .output_limit_closes
                .fetch_add(1, Ordering::Relaxed);
        }
        self.client.output_bytes.store(0, Ordering::Relaxed);
        self.client.state.buffers.pending(0, 0);
        why
    }
}

//! The MONITOR feed: every command the server runs, streamed to the
//! clients that asked (the MONITOR command itself is in `cmd/monitor.rs`).
//!
//! A command is shown once it is planned, in redis's format: `+` Unix time
//! with microseconds, `[db address]`, then every argument quoted as
//! redis's `sdscatrepr` quotes it. Like redis, commands flagged `admin` or
//! `skip_monitor` are not shown (CONFIG, DEBUG, MONITOR itself), AUTH's and
//! HELLO's passwords read `(redacted)`, and a command refused before it
//! runs (wrong arity, unknown) is not shown; commands inside MULTI are
//! shown when EXEC runs them, before EXEC itself.
//!
//! What a monitored connection pays is kept as small as the design
//! allows, since every other client pays it while someone monitors. Its
//! task formats nothing: for each command it appends the time, the
//! database and the raw arguments to its own [`Feed`] (a buffer behind a
//! lock nobody else takes; the plain GET/SET fast paths copy them straight
//! from the read buffer, and stay open). Once per turn (a pipeline's worth
//! of commands) the feed goes out as one [`Batch`] on one broadcast
//! channel: one send per turn, not one per command. The monitoring
//! clients' tasks turn batches into redis's lines and write every batch
//! waiting in one write. While no client monitors, the cost is one atomic
//! load per command ([`Monitors::active`]) and one per turn. A monitoring
//! client that falls more than the channel's capacity (in batches) behind
//! loses the oldest rather than holding anyone up (redis would instead
//! buffer them until its output-buffer limit closes the client).
//!
//! From the command after MONITOR on (pipelined in the same read or not),
//! the connection is in monitor mode (see `crate::connection`'s modes):
//! lines out, and its own commands under redis's rule for a
//! replica-flagged client: whatever could read or write the keyspace
//! (flagged `readonly`, `write`, `may_replicate`) is refused with `Replica
//! can't interact with the keyspace` (inside MULTI that dooms the
//! transaction), the rest runs (PING, ECHO, INFO, CLIENT, SELECT,
//! MULTI/EXEC...), each reply placed among the lines where redis places
//! it; MONITOR again gets no reply; RESET ends monitoring and QUIT
//! closes, as in redis.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;

use crate::sync::lock;

/// Batches (one per turn of a connection) a monitoring client may fall
/// behind before it loses some.
const CAPACITY: usize = 4096;

/// One turn's commands of one connection, as [`Feed`] recorded them: the
/// monitoring clients format them.
pub struct Batch {
    /// The connection's address as a line shows it (`127.0.0.1:6000`,
    /// `unix:/path`).
    addr: Arc<str>,
    /// Entries, each: the time in microseconds since the Unix epoch (u64),
    /// the database (u32), the argument count (u32), then every argument
    /// as its length (u32) and its bytes; little-endian.
    data: Vec<u8>,
}

/// The monitoring clients' channel.
pub struct Monitors {
    tx: broadcast::Sender<Arc<Batch>>,
    count: AtomicUsize,
}

impl Default for Monitors {
    fn default() -> Self {
        Monitors {
            tx: broadcast::Sender::new(CAPACITY),
            count: AtomicUsize::new(0),
        }
    }
}

/// What a connection has run since its last [`Monitors::publish`], for the
/// monitoring clients; touched only by its own task (the lock is never
/// contended).
#[derive(Default)]
struct Feed {
    data: Vec<u8>,
    addr: Option<Arc<str>>,
}

/// What MONITOR keeps for one client (in its registry entry's
/// `ClientState`): whether it monitors, its subscription, and its feed.
#[derive(Default)]
pub struct ClientFeed {
    /// Set by MONITOR: the connection switches to monitoring after this
    /// turn.
    monitoring: AtomicBool,
    /// MONITOR's subscription, taken by the monitoring loop.
    subscription: Mutex<Option<broadcast::Receiver<Arc<Batch>>>>,
    /// The commands this connection ran since its last turn ended.
    feed: Mutex<Feed>,
    /// Something is in `feed`: one relaxed load per turn says whether
    /// there is anything to publish.
    fed: AtomicBool,
}

impl ClientFeed {
    /// Whether this client monitors (CLIENT LIST's `O` flag).
    pub fn is_monitoring(&self) -> bool {
        self.monitoring.load(Ordering::Relaxed)
    }
}

/// Microseconds since the Unix epoch.
fn now_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// Appends `args` in [`Batch`]'s encoding (count, then length and bytes of
/// each).
pub fn encode_args<'a>(out: &mut Vec<u8>, args: impl ExactSizeIterator<Item = &'a [u8]>) {
    out.extend_from_slice(&(args.len() as u32).to_le_bytes());
    for a in args {
        out.extend_from_slice(&(a.len() as u32).to_le_bytes());
        out.extend_from_slice(a);
    }
}

/// Appends one entry in [`Batch`]'s encoding, timed now, its arguments
/// already encoded by [`encode_args`]: what a script's call adds to the
/// MONITOR lines its context keeps (see `Monitors::publish_lua`).
pub fn push_entry(out: &mut Vec<u8>, db: u32, args: &[u8]) {
    out.extend_from_slice(&now_micros().to_le_bytes());
    out.extend_from_slice(&db.to_le_bytes());
    out.extend_from_slice(args);
}

impl Monitors {
    /// Whether anyone monitors (checked for every command).
    pub fn active(&self) -> bool {
        self.count.load(Ordering::Relaxed) > 0
    }

    /// Records one command of `client`, its arguments already encoded by
    /// [`encode_args`]. Nothing is formatted here: the monitoring clients'
    /// tasks do that, off the connection's hot path.
    pub fn feed_encoded(&self, db: u32, client: &ClientFeed, args: &[u8]) {
        let mut feed = lock(&client.feed);
        feed.data.extend_from_slice(&now_micros().to_le_bytes());
        feed.data.extend_from_slice(&db.to_le_bytes());
        feed.data.extend_from_slice(args);
        client.fed.store(true, Ordering::Relaxed);
    }

    /// Records one command of `client` from its arguments (the fast paths:
    /// slices of the read buffer, copied once).
    pub fn feed(&self, db: u32, client: &ClientFeed, args: &[&[u8]]) {
        let mut feed = lock(&client.feed);
        feed.data.extend_from_slice(&now_micros().to_le_bytes());
        feed.data.extend_from_slice(&db.to_le_bytes());
        encode_args(&mut feed.data, args.iter().copied());
        client.fed.store(true, Ordering::Relaxed);
    }

    /// Sends what `client` recorded since the last call to the monitoring
    /// clients, as one batch: once per turn of the connection, so a
    /// pipeline of commands costs one send, not one per command. `addr`
    /// gives the client's address as the lines show it (asked once per
    /// connection).
    pub fn publish(&self, client: &ClientFeed, addr: impl FnOnce() -> Arc<str>) {
        if !client.fed.load(Ordering::Relaxed) {
            return;
        }
        client.fed.store(false, Ordering::Relaxed);
        let mut feed = lock(&client.feed);
        if !self.active() {
            feed.data = Vec::new();
            return;
        }
        // The next turn's buffer starts at this one's size (up to 4 KiB:
        // an idle connection must not keep a large value's worth): one
        // allocation per turn rather than a run of doublings.
        let size = feed.data.len().min(4 * 1024);
        let data = std::mem::replace(&mut feed.data, Vec::with_capacity(size));
        let addr = feed.addr.get_or_insert_with(addr).clone();
        drop(feed);
        let _ = self.tx.send(Arc::new(Batch { addr, data }));
    }
}

impl Monitors {
    /// Sends the calls a script made (entries of [`encode_entry`]) as one
    /// batch, their lines showing `lua` for the address, as redis's lines
    /// of a script's calls do (`[0 lua] "set" ...`). Sent when the script
    /// ends, on the thread that ran it; its own EVAL or FCALL line went out
    /// when it was planned (see `crate::command::track`), so before these.
    pub fn publish_lua(&self, data: Vec<u8>) {
        if self.active() {
            let _ = self.tx.send(Arc::new(Batch {
                addr: Arc::from("lua"),
                data,
            }));
        }
    }

    /// The subscription MONITOR made for `client`, for its connection to
    /// stream from (see `crate::connection`'s modes).
    pub fn take(&self, client: &ClientFeed) -> Option<broadcast::Receiver<Arc<Batch>>> {
        lock(&client.subscription).take()
    }

    /// `client` stops monitoring (RESET, or it went away).
    pub fn stop(&self, client: &ClientFeed) {
        self.count.fetch_sub(1, Ordering::Relaxed);
        client.monitoring.store(false, Ordering::Relaxed);
    }

    /// MONITOR: `client` is subscribed (unless it was already), and every
    /// command after this one is shown to it.
    pub fn start(&self, client: &ClientFeed) {
        let mut slot = lock(&client.subscription);
        if slot.is_none() {
            *slot = Some(self.tx.subscribe());
            self.count.fetch_add(1, Ordering::Relaxed);
            client.monitoring.store(true, Ordering::Relaxed);
        }
    }
}

/// Formats a batch's lines as redis's `replicationFeedMonitors` does:
/// `+<seconds>.<microseconds> [<db> <address>] "arg" ...`.
pub fn format_batch(batch: &Batch, out: &mut Vec<u8>) {
    let mut data = &batch.data[..];
    let mut take = |n: usize| -> Option<&[u8]> {
        let (head, rest) = data.split_at_checked(n)?;
        data = rest;
        Some(head)
    };
    let u32_of = |b: &[u8]| u32::from_le_bytes(b.try_into().unwrap_or_default());
    loop {
        let Some(time) = take(8) else { return };
        let micros = u64::from_le_bytes(time.try_into().unwrap_or_default());
        let (Some(db), Some(argc)) = (take(4).map(u32_of), take(4).map(u32_of)) else {
            return;
        };
        out.push(b'+');
        push_number(out, micros / 1_000_000);
        out.push(b'.');
        let frac = micros % 1_000_000;
        // Six digits, zero-padded.
        let mut digits = [b'0'; 6];
        let mut f = frac;
        for d in digits.iter_mut().rev() {
            *d = b'0' + (f % 10) as u8;
            f /= 10;
        }
        out.extend_from_slice(&digits);
        out.extend_from_slice(b" [");
        push_number(out, u64::from(db));
        out.push(b' ');
        out.extend_from_slice(batch.addr.as_bytes());
        out.push(b']');
        for _ in 0..argc {
            let Some(len) = take(4).map(u32_of) else {
                return;
            };
            let Some(arg) = take(len as usize) else {
                return;
            };
            out.push(b' ');
            respite_engine::repr::repr(out, arg);
        }
        out.extend_from_slice(b"\r\n");
    }
}

/// A number in decimal.
fn push_number(out: &mut Vec<u8>, n: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut n = n;
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// Whether a command (by its full name, `container|sub` for a subcommand)
/// may read or write the keyspace: redis refuses those from a replica or a
/// monitor, and holds them back under CLIENT PAUSE WRITE (`write` and
/// `may_replicate` only).
pub fn touches_keyspace(fullname: Option<&str>) -> bool {
    fullname
        .and_then(|n| crate::meta::find_full(n.as_bytes()))
        .is_some_and(|m| {
            m.has_flag("readonly") || m.has_flag("write") || m.has_flag("may_replicate")
        })
}

/// Whether a command's row is shown (not `admin`, not `skip_monitor`), by
/// its full name.
pub fn shown(fullname: &str) -> bool {
    crate::meta::find_full(fullname.as_bytes())
        .is_none_or(|m| !m.has_flag("admin") && !m.has_flag("skip_monitor"))
}

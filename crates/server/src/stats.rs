//! What each command cost: the figures of INFO commandstats, errorstats and
//! latencystats, the slow log, and the latency monitor's events.
//!
//! redis-server times a command around its `call()`: the time it spends
//! running, not the time it waits to be read or for its reply to be
//! written. respite times the same thing wherever the command runs: a read
//! is timed on the read-pool thread that runs it, a write on the writer
//! thread inside its group commit (the commit's fsync, shared by the whole
//! group, is not any one command's; INFO persistence reports it), and a
//! connection command where it is planned. To do that, [`track`] wraps the
//! plan's closure once, in `command::dispatch`; nothing else in the command path
//! knows about statistics.
//!
//! The counters are atomics in one row per command and per subcommand
//! (`client|list` is counted apart from `client|kill`, as redis does), so
//! recording a call takes no lock. Latency percentiles come from an
//! HdrHistogram per row behind a mutex, made on the row's first call: rows
//! of commands nobody calls cost nothing. A thread that finds the row's
//! histogram busy (another thread recording the same command that instant)
//! skips its sample rather than wait: the percentiles come from nearly
//! every call, and a hot command never queues on the lock. Errors are counted by their code
//! (the first word, `ERR`, `WRONGTYPE`), as errorstats lists them.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use hdrhistogram::Histogram;

use crate::sync::lock;

/// The most distinct error codes errorstats keeps, as redis's
/// `ERROR_STATS_NUMBER`: past it new codes are not counted (a client
/// cannot grow the table without bound with made-up error codes).
const MAX_ERROR_CODES: usize = 128;

/// Latency histogram bounds, as redis's: 1 ns to 1 s, two significant
/// digits.
const HIST_MAX_NS: u64 = 1_000_000_000;

/// One command's (or subcommand's) counters.
pub struct Row {
    /// `get`, `client|list`.
    pub name: String,
    calls: AtomicU64,
    nanos: AtomicU64,
    failed: AtomicU64,
    rejected: AtomicU64,
    hist: Mutex<Option<Histogram<u64>>>,
    /// Whether the command is `fast` (its latency events go to
    /// `fast-command` rather than `command`).
    fast: bool,
    /// Whether MONITOR shows it (not `admin`, not `skip_monitor`).
    shown: bool,
}

/// A copy of one row's counters.
#[derive(Debug, Clone)]
pub struct RowSnapshot {
    /// The command's full name.
    pub name: String,
    /// Times it ran.
    pub calls: u64,
    /// Microseconds spent running it.
    pub usec: u64,
    /// Runs that answered an error.
    pub failed: u64,
    /// Times it was refused before running (arity, authentication).
    pub rejected: u64,
}

/// One slow-log entry.
#[derive(Debug, Clone)]
pub struct SlowEntry {
    /// Its id, increasing.
    pub id: u64,
    /// Unix time it was logged, seconds.
    pub time: u64,
    /// How long it ran, microseconds.
    pub micros: u64,
    /// The arguments, trimmed as redis trims them.
    pub argv: Vec<Bytes>,
    /// The client's address.
    pub addr: String,
    /// The client's name.
    pub name: String,
}

/// A latency monitor event's samples (redis's `latencyTimeSeries`).
#[derive(Debug, Clone, Default)]
pub struct LatencyEvent {
    /// (unix seconds, milliseconds), oldest first, at most 160, one per
    /// second (the worst of that second).
    pub samples: Vec<(u64, u64)>,
    /// The worst ever seen.
    pub max: u64,
}

/// The slow log, and its settings.
struct SlowLog {
    entries: std::collections::VecDeque<SlowEntry>,
    next_id: u64,
}

/// Who ran a command, for the slow log.
pub type Caller = std::sync::Arc<crate::clients::ClientHandle>;

/// Every per-command statistic of the server.
pub struct CommandStats {
    /// One row per command and subcommand of [`crate::meta::all`], at
    /// the same position.
    rows: Vec<Row>,
    errors: Mutex<BTreeMap<String, u64>>,
    slowlog: Mutex<SlowLog>,
    events: Mutex<BTreeMap<&'static str, LatencyEvent>>,
    /// `slowlog-log-slower-than`, microseconds; negative turns it off.
    pub slowlog_slower_than: AtomicI64,
    /// `slowlog-max-len`.
    pub slowlog_max_len: AtomicUsize,
    /// `latency-tracking`: whether the per-command histograms are kept.
    pub latency_tracking: AtomicBool,
    /// `latency-monitor-threshold`, milliseconds (0: off).
    pub latency_monitor_threshold: AtomicU64,
    /// `latency-tracking-info-percentiles`.
    pub percentiles: Mutex<Vec<f64>>,
    /// INFO's `run_id`: 40 random hex digits, new at every start.
    pub run_id: String,
    /// INFO's `master_replid` (DEBUG CHANGE-REPL-ID makes a new one).
    replid: Mutex<String>,
    /// The last samples of the counters INFO's `instantaneous_*` fields
    /// average, one every 100 ms (see [`crate::state::clock`]).
    samples: Mutex<std::collections::VecDeque<Sample>>,
}

/// One reading of the cumulative counters, for rates.
#[derive(Clone, Copy)]
struct Sample {
    at: Instant,
    commands: u64,
    input: u64,
    output: u64,
}

/// Rates over the last couple of seconds (INFO's `instantaneous_*`).
#[derive(Debug, Default, Clone, Copy)]
pub struct Rates {
    /// Commands per second.
    pub ops_per_sec: u64,
    /// Kilobytes read per second.
    pub input_kbps: f64,
    /// Kilobytes written per second.
    pub output_kbps: f64,
}

/// 40 random hex digits (a run id or replication id).
fn random_id() -> String {
    (0..40)
        .map(|_| char::from_digit(rand::random::<u32>() % 16, 16).unwrap_or('0'))
        .collect()
}

impl Default for CommandStats {
    fn default() -> Self {
        Self::new()
    }
}

impl CommandStats {
    /// A row for every command and subcommand redis 7.0 describes
    /// ([`crate::meta`]), in its order: those never called cost a few
    /// words each and show nowhere.
    pub fn new() -> CommandStats {
        let rows = crate::meta::all()
            .iter()
            .map(|m| Row {
                fast: m.has_flag("fast"),
                shown: crate::monitor::shown(m.name),
                name: m.name.to_string(),
                calls: AtomicU64::new(0),
                nanos: AtomicU64::new(0),
                failed: AtomicU64::new(0),
                rejected: AtomicU64::new(0),
                hist: Mutex::new(None),
            })
            .collect();
        CommandStats {
            rows,
            errors: Mutex::new(BTreeMap::new()),
            slowlog: Mutex::new(SlowLog {
                entries: Default::default(),
                next_id: 0,
            }),
            events: Mutex::new(BTreeMap::new()),
            slowlog_slower_than: AtomicI64::new(10_000),
            slowlog_max_len: AtomicUsize::new(128),
            latency_tracking: AtomicBool::new(true),
            latency_monitor_threshold: AtomicU64::new(0),
            percentiles: Mutex::new(vec![50.0, 99.0, 99.9]),
            run_id: random_id(),
            replid: Mutex::new(random_id()),
            samples: Mutex::new(Default::default()),
        }
    }

    /// INFO's `master_replid`.
    pub fn replid(&self) -> String {
        lock(&self.replid).clone()
    }

    /// DEBUG CHANGE-REPL-ID: a new replication id.
    pub fn change_replid(&self) {
        *lock(&self.replid) = random_id();
    }

    /// Takes one sample of the cumulative counters (every 100 ms).
    pub fn sample(&self, counters: &Counters) {
        let mut samples = lock(&self.samples);
        if samples.len() == 16 {
            samples.pop_front();
        }
        samples.push_back(Sample {
            at: Instant::now(),
            commands: counters.commands_processed.load(Ordering::Relaxed),
            input: counters.net_input_bytes.load(Ordering::Relaxed),
            output: counters.net_output_bytes.load(Ordering::Relaxed),
        });
    }

    /// The rates between the oldest and newest samples kept (about the
    /// last 1.6 s, as redis averages its 16 samples).
    pub fn instantaneous(&self) -> Rates {
        let samples = lock(&self.samples);
        let (Some(first), Some(last)) = (samples.front(), samples.back()) else {
            return Rates::default();
        };
        let secs = last.at.duration_since(first.at).as_secs_f64();
        if secs <= 0.0 {
            return Rates::default();
        }
        let rate = |a: u64, b: u64| b.saturating_sub(a) as f64 / secs;
        Rates {
            ops_per_sec: rate(first.commands, last.commands).round() as u64,
            input_kbps: rate(first.input, last.input) / 1024.0,
            output_kbps: rate(first.output, last.output) / 1024.0,
        }
    }

    /// The row of a command or subcommand, by its description.
    pub fn row_of(&self, described: &'static crate::meta::Meta) -> usize {
        crate::meta::position(described)
    }

    /// Whether MONITOR shows the row's command.
    pub fn shown(&self, row: usize) -> bool {
        self.rows[row].shown
    }

    /// A row's full name (`client|list`).
    pub fn row_name(&self, row: usize) -> Option<String> {
        self.rows.get(row).map(|r| r.name.clone())
    }

    /// Counts a call of a row that ran for `elapsed` and answered an error
    /// or not.
    pub fn record(&self, row: usize, elapsed: Duration, failed: bool) {
        let r = &self.rows[row];
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        r.calls.fetch_add(1, Ordering::Relaxed);
        r.nanos.fetch_add(nanos, Ordering::Relaxed);
        if failed {
            r.failed.fetch_add(1, Ordering::Relaxed);
        }
        if self.latency_tracking.load(Ordering::Relaxed) {
            // Never wait for another thread recording the same command: its
            // sample is skipped instead (the counters above stay exact), so
            // a hot command run on every thread at once pays no lock wait.
            let hist = match r.hist.try_lock() {
                Ok(guard) => Some(guard),
                Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => None,
            };
            if let Some(mut hist) = hist {
                let h = hist.get_or_insert_with(|| {
                    Histogram::new_with_bounds(1, HIST_MAX_NS, 2).expect("static histogram bounds")
                });
                h.saturating_record(nanos.max(1));
            }
        }
        let threshold = self.latency_monitor_threshold.load(Ordering::Relaxed);
        let ms = nanos / 1_000_000;
        if threshold > 0 && ms >= threshold {
            let event = if r.fast { "fast-command" } else { "command" };
            self.latency_sample(event, ms);
        }
    }

    /// Counts the error a blocking command of `row` finally answered (a
    /// first try that failed, CLIENT UNBLOCK ... ERROR, a group deleted
    /// while it waited): its call was counted when it was planned.
    pub fn blocked_failed(&self, row: usize, text: &[u8]) {
        self.error(text);
        if let Some(r) = self.rows.get(row) {
            r.failed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts a call refused before it ran.
    pub fn rejected(&self, row: usize) {
        self.rows[row].rejected.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an error reply by its code.
    pub fn error(&self, text: &[u8]) {
        let code = text.split(|&b| b == b' ').next().unwrap_or_default();
        let code = String::from_utf8_lossy(code).into_owned();
        let mut errors = lock(&self.errors);
        if let Some(n) = errors.get_mut(&code) {
            *n += 1;
        } else if errors.len() < MAX_ERROR_CODES {
            errors.insert(code, 1);
        }
    }

    /// Adds a latency monitor sample (milliseconds) to an event.
    pub fn latency_sample(&self, event: &'static str, ms: u64) {
        let now = unix_secs();
        let mut events = lock(&self.events);
        let e = events.entry(event).or_default();
        e.max = e.max.max(ms);
        match e.samples.last_mut() {
            Some((t, worst)) if *t == now => *worst = (*worst).max(ms),
            _ => {
                if e.samples.len() == 160 {
                    e.samples.remove(0);
                }
                e.samples.push((now, ms));
            }
        }
    }

    /// The latency monitor's events, by name.
    pub fn latency_events(&self) -> BTreeMap<&'static str, LatencyEvent> {
        lock(&self.events).clone()
    }

    /// Forgets the named events (all when `None`); returns how many there
    /// were.
    pub fn latency_reset(&self, names: Option<&[String]>) -> usize {
        let mut events = lock(&self.events);
        match names {
            None => {
                let n = events.len();
                events.clear();
                n
            }
            Some(names) => names
                .iter()
                .filter(|n| events.remove(n.as_str()).is_some())
                .count(),
        }
    }

    /// Logs a command that ran for `micros` if it was slow enough.
    /// `argc` is how many arguments the command had (`argv` holds at most
    /// the first 32).
    pub fn maybe_slowlog(&self, micros: u64, argv: &[Bytes], argc: usize, caller: &Caller) {
        if self.slow_enough(micros) {
            let name = lock(&caller.name).clone().unwrap_or_default();
            self.push_slowlog(micros, argv, argc, caller.addr(), name);
        }
    }

    /// Logs a call a script made, if it was slow enough: redis logs those
    /// too, from its script client, which has no address (`?:0`) and no
    /// name.
    pub fn maybe_slowlog_script_call(&self, micros: u64, argv: &[Bytes], argc: usize) {
        if self.slow_enough(micros) {
            self.push_slowlog(micros, argv, argc, "?:0".into(), String::new());
        }
    }

    fn slow_enough(&self, micros: u64) -> bool {
        let threshold = self.slowlog_slower_than.load(Ordering::Relaxed);
        threshold >= 0 && micros >= threshold as u64
    }

    fn push_slowlog(&self, micros: u64, argv: &[Bytes], argc: usize, addr: String, name: String) {
        let max = self.slowlog_max_len.load(Ordering::Relaxed);
        let mut log = lock(&self.slowlog);
        let id = log.next_id;
        log.next_id += 1;
        log.entries.push_front(SlowEntry {
            id,
            time: unix_secs(),
            micros,
            argv: slowlog_argv(argv, argc),
            addr,
            name,
        });
        log.entries.truncate(max);
    }

    /// The newest `count` slow-log entries (all when `None`), newest first.
    pub fn slowlog(&self, count: Option<usize>) -> Vec<SlowEntry> {
        let log = lock(&self.slowlog);
        let n = count.unwrap_or(log.entries.len());
        log.entries.iter().take(n).cloned().collect()
    }

    /// Entries in the slow log.
    pub fn slowlog_len(&self) -> usize {
        lock(&self.slowlog).entries.len()
    }

    /// SLOWLOG RESET.
    pub fn slowlog_reset(&self) {
        lock(&self.slowlog).entries.clear();
    }

    /// Trims the slow log to a new `slowlog-max-len`.
    pub fn slowlog_trim(&self) {
        let max = self.slowlog_max_len.load(Ordering::Relaxed);
        lock(&self.slowlog).entries.truncate(max);
    }

    /// Every row that was called or refused, in table order.
    pub fn rows(&self) -> Vec<RowSnapshot> {
        self.rows
            .iter()
            .map(|r| RowSnapshot {
                name: r.name.clone(),
                calls: r.calls.load(Ordering::Relaxed),
                usec: r.nanos.load(Ordering::Relaxed) / 1000,
                failed: r.failed.load(Ordering::Relaxed),
                rejected: r.rejected.load(Ordering::Relaxed),
            })
            .filter(|r| r.calls > 0 || r.rejected > 0)
            .collect()
    }

    /// The configured percentiles of a row's latency, in microseconds
    /// (`None` when it has no samples).
    pub fn percentiles(&self, row_name: &str) -> Option<Vec<(f64, f64)>> {
        let r = self.rows.iter().find(|r| r.name == row_name)?;
        let hist = lock(&r.hist);
        let h = hist.as_ref().filter(|h| !h.is_empty())?;
        let ps = lock(&self.percentiles).clone();
        Some(
            ps.into_iter()
                .map(|p| (p, h.value_at_percentile(p) as f64 / 1000.0))
                .collect(),
        )
    }

    /// A row's latency histogram as LATENCY HISTOGRAM reports it: calls,
    /// and for each power-of-two bucket from 1 us that adds samples, its
    /// upper bound in microseconds and the count of calls up to it
    /// (cumulative), as redis's `fillCommandCDF` walks its histogram.
    pub fn histogram(&self, row_name: &str) -> Option<(u64, Vec<(u64, u64)>)> {
        let r = self.rows.iter().find(|r| r.name == row_name)?;
        let hist = lock(&r.hist);
        let h = hist.as_ref().filter(|h| !h.is_empty())?;
        let mut out = Vec::new();
        let mut cumulative = 0;
        for step in h.iter_log(1024, 2.0) {
            let before = cumulative;
            cumulative += step.count_since_last_iteration();
            if cumulative > before {
                out.push((step.value_iterated_to() / 1000, cumulative));
            }
        }
        Some((h.len(), out))
    }

    /// Error counts by code.
    pub fn errors(&self) -> BTreeMap<String, u64> {
        lock(&self.errors).clone()
    }

    /// CONFIG RESETSTAT: every counter, histogram and error count back to
    /// zero. (The slow log and latency events have their own RESET.)
    pub fn reset(&self) {
        for r in &self.rows {
            for c in [&r.calls, &r.nanos, &r.failed, &r.rejected] {
                c.store(0, Ordering::Relaxed);
            }
            *lock(&r.hist) = None;
        }
        lock(&self.errors).clear();
    }
}

/// The arguments as the slow log keeps them: at most 32 (the last saying
/// how many more there were), each at most 128 bytes (then saying how many
/// more bytes it had), as redis's `slowlogCreateEntry`.
fn slowlog_argv(argv: &[Bytes], argc: usize) -> Vec<Bytes> {
    const MAX_STRING: usize = 128;
    let shown = if argc > SLOWLOG_MAX_ARGC {
        SLOWLOG_MAX_ARGC - 1
    } else {
        argc
    }
    .min(argv.len());
    let mut out: Vec<Bytes> = argv[..shown]
        .iter()
        .map(|a| {
            if a.len() > MAX_STRING {
                let mut s = a[..MAX_STRING].to_vec();
                s.extend_from_slice(
                    format!("... ({} more bytes)", a.len() - MAX_STRING).as_bytes(),
                );
                Bytes::from(s)
            } else {
                a.clone()
            }
        })
        .collect();
    if argc > SLOWLOG_MAX_ARGC {
        out.push(Bytes::from(format!(
            "... ({} more arguments)",
            argc - SLOWLOG_MAX_ARGC + 1
        )));
    }
    out
}

fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The most arguments a slow-log entry shows (redis's
/// `SLOWLOG_ENTRY_MAX_ARGC`).
pub const SLOWLOG_MAX_ARGC: usize = 32;

/// Counters INFO stats reports.
#[derive(Default)]
pub struct Counters {
    /// Connections accepted.
    pub connections_received: AtomicU64,
    /// Connections refused for `maxclients`.
    pub rejected_connections: AtomicU64,
    /// Commands processed.
    pub commands_processed: AtomicU64,
    /// Protocol errors (connections closed for malformed input).
    pub protocol_errors: AtomicU64,
    /// Error replies sent.
    pub error_replies: AtomicU64,
    /// Bytes read from clients.
    pub net_input_bytes: AtomicU64,
    /// Bytes written to clients.
    pub net_output_bytes: AtomicU64,
    /// Reads from client sockets that returned data.
    pub reads_processed: AtomicU64,
    /// Writes to client sockets.
    pub writes_processed: AtomicU64,
    /// Clients closed for going over `client-output-buffer-limit`.
    pub output_limit_closes: AtomicU64,
}

impl Counters {
    /// CONFIG RESETSTAT.
    pub fn reset(&self) {
        for c in [
            &self.connections_received,
            &self.rejected_connections,
            &self.commands_processed,
            &self.protocol_errors,
            &self.error_replies,
            &self.net_input_bytes,
            &self.net_output_bytes,
            &self.reads_processed,
            &self.writes_processed,
            &self.output_limit_closes,
        ] {
            c.store(0, Ordering::Relaxed);
        }
    }
}

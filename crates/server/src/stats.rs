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

use crate::command::{Plan, Spec, TABLE};
use crate::reply::Reply;
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
    rows: Vec<Row>,
    /// Row of each command-table entry (its subcommands follow it).
    first_row: Vec<usize>,
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
    /// average, one every 100 ms (see [`sampler`]).
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
    /// A row for every command of the table and every subcommand it has.
    pub fn new() -> CommandStats {
        let mut rows = Vec::new();
        let mut first_row = Vec::with_capacity(TABLE.len());
        let fast = |name: &str| {
            crate::meta::find_full(name.as_bytes()).is_some_and(|m| m.has_flag("fast"))
        };
        let row = |name: String| Row {
            fast: fast(&name),
            shown: crate::monitor::shown(&name),
            name,
            calls: AtomicU64::new(0),
            nanos: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            hist: Mutex::new(None),
        };
        for spec in TABLE.iter() {
            first_row.push(rows.len());
            rows.push(row(spec.name.to_string()));
            if let Some((_, subs)) = spec.subcommands {
                for (sub, _) in subs {
                    rows.push(row(format!("{}|{sub}", spec.name)));
                }
            }
        }
        CommandStats {
            rows,
            first_row,
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
    fn sample(&self, counters: &crate::state::Counters) {
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

    /// The row of a command-table entry, or of its subcommand when it is
    /// a container and `sub` names one of its subcommands.
    pub fn row_of(&self, index: usize, sub: Option<&[u8]>) -> usize {
        let base = self.first_row[index];
        if let (Some((_, subs)), Some(sub)) = (TABLE[index].subcommands, sub) {
            if let Some(pos) = subs
                .iter()
                .position(|(n, _)| n.as_bytes().eq_ignore_ascii_case(sub))
            {
                return base + 1 + pos;
            }
        }
        base
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
        let threshold = self.slowlog_slower_than.load(Ordering::Relaxed);
        if threshold < 0 || micros < threshold as u64 {
            return;
        }
        let max = self.slowlog_max_len.load(Ordering::Relaxed);
        let mut log = lock(&self.slowlog);
        let id = log.next_id;
        log.next_id += 1;
        log.entries.push_front(SlowEntry {
            id,
            time: unix_secs(),
            micros,
            argv: slowlog_argv(argv, argc),
            addr: caller.addr(),
            name: lock(&caller.name).clone().unwrap_or_default(),
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
const SLOWLOG_MAX_ARGC: usize = 32;

/// The server's clock work: samples the counters for INFO's rates every
/// 100 ms, and closes clients idle longer than `timeout` (once a second,
/// as redis's `clientsCron` does; clients blocked in BLPOP and friends are
/// waiting, not idle, and are left alone).
pub async fn sampler(shared: std::sync::Arc<crate::state::Shared>) {
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut n: u64 = 0;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shared.wait_for_shutdown() => return,
        }
        shared.stats.sample(&shared.counters);
        n += 1;
        if n.is_multiple_of(10) {
            crate::process::sample_memory();
        }
        let timeout = shared.idle_timeout_secs.load(Ordering::Relaxed);
        if timeout > 0 && n.is_multiple_of(10) {
            let idle: Vec<_> = lock(&shared.clients)
                .values()
                .filter(|c| lock(&c.blocked).is_none() && c.idle_secs() > timeout)
                .cloned()
                .collect();
            for c in idle {
                tracing::debug!(client = c.id, "closing idle client (timeout)");
                c.killed.store(true, Ordering::SeqCst);
                c.kill_notify.notify_one();
            }
        }
    }
}

/// What a tracked plan needs to record its call.
pub struct Tracking {
    /// The server, whose `stats` count the call.
    shared: std::sync::Arc<crate::state::Shared>,
    /// The command's row.
    row: usize,
    /// The first arguments, kept for the slow log (`None`: the slow log is
    /// off, or the fast path did not keep them), and how many there were.
    argv: Option<(Vec<Bytes>, usize)>,
    /// Who sent it.
    caller: Caller,
    /// The selected database, for MONITOR.
    db: u32,
    /// The whole command, encoded for MONITOR (`None`: nobody monitors,
    /// or it is not shown): one buffer, not a handle per argument.
    monitor: Option<Vec<u8>>,
}

impl Tracking {
    /// Tracking for a command of the table (`index`) about to be planned
    /// from `request` (its name first).
    pub fn new(session: &crate::command::Session, index: usize, request: &[Bytes]) -> Tracking {
        let shared = &session.shared;
        let spec = &TABLE[index];
        let argv = keep_argv(shared, spec).then(|| {
            let mut argv: Vec<Bytes> = request[..request.len().min(SLOWLOG_MAX_ARGC)].to_vec();
            redact(spec.name, &mut argv);
            (argv, request.len())
        });
        let row = shared.stats.row_of(index, request.get(1).map(|b| &b[..]));
        session.client.state.last_row.store(row, Ordering::Relaxed);
        let monitor = (shared.monitors.active() && shared.stats.rows[row].shown).then(|| {
            let mut encoded =
                Vec::with_capacity(request.iter().map(|a| a.len() + 4).sum::<usize>() + 4);
            if matches!(spec.name, "auth" | "hello" | "acl" | "config") {
                let mut all = request.to_vec();
                redact(spec.name, &mut all);
                crate::monitor::encode_args(&mut encoded, all.iter().map(|a| &a[..]));
            } else {
                crate::monitor::encode_args(&mut encoded, request.iter().map(|a| &a[..]));
            }
            encoded
        });
        Tracking {
            row,
            shared: shared.clone(),
            argv,
            caller: session.client.clone(),
            db: session.db,
            monitor,
        }
    }

    /// Tracking for a fast-path command (plain GET or SET, planned
    /// without the command table). `argv` is the command as sent, for the
    /// slow log, made of the `Bytes` the fast path made anyway (a
    /// reference count each, no copy); `None` when the slow log is off.
    pub fn fast(
        session: &crate::command::Session,
        index: usize,
        argv: Option<Vec<Bytes>>,
    ) -> Tracking {
        let argv = argv.map(|a| {
            let n = a.len();
            (a, n)
        });
        let row = session.shared.stats.row_of(index, None);
        session.client.state.last_row.store(row, Ordering::Relaxed);
        Tracking {
            row,
            shared: session.shared.clone(),
            argv,
            caller: session.client.clone(),
            db: session.db,
            // The fast paths feed MONITOR themselves.
            monitor: None,
        }
    }

    /// Whether the slow log is on (so a fast path keeps its arguments).
    pub fn slowlog_on(session: &crate::command::Session) -> bool {
        session
            .shared
            .stats
            .slowlog_slower_than
            .load(Ordering::Relaxed)
            >= 0
    }

    /// The database MONITOR shows the command in.
    pub fn set_db(&mut self, db: u32) {
        self.db = db;
    }

    fn finish(self, elapsed: Duration, reply: Option<&Reply>) {
        let error = match reply {
            Some(Reply::Error(e)) => Some(&e[..]),
            _ => None,
        };
        self.finish_with(elapsed, error);
    }

    /// Records the call; `error` is the error reply's text, if it failed.
    fn finish_with(self, elapsed: Duration, error: Option<&[u8]>) {
        let st = &self.shared.stats;
        if let Some(e) = error {
            st.error(e);
        }
        st.record(self.row, elapsed, error.is_some());
        if let Some((argv, argc)) = &self.argv {
            let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
            st.maybe_slowlog(micros, argv, *argc, &self.caller);
        }
    }
}

/// Counts a plain GET answered from the value cache: the hot path, so no
/// tracking state is built (no reference counts taken, nothing allocated);
/// `argv` makes its arguments, called only if the call was slow enough for
/// the slow log.
pub fn cache_hit(
    session: &crate::command::Session,
    index: usize,
    started: Instant,
    argv: impl FnOnce() -> Vec<Bytes>,
) {
    let st = &session.shared.stats;
    let row = st.first_row[index];
    session.client.state.last_row.store(row, Ordering::Relaxed);
    let elapsed = started.elapsed();
    st.record(row, elapsed, false);
    let threshold = st.slowlog_slower_than.load(Ordering::Relaxed);
    if threshold >= 0 && elapsed.as_micros() >= threshold as u128 {
        let a = argv();
        let n = a.len();
        st.maybe_slowlog(elapsed.as_micros() as u64, &a, n, &session.client);
    }
}

/// Hides passwords from the slow log and MONITOR, as redis's
/// `redactClientCommandArgument` does: every argument of AUTH, the two
/// after HELLO's AUTH, ACL SETUSER's name and rules, the value of CONFIG
/// SET requirepass.
fn redact(name: &str, argv: &mut [Bytes]) {
    const REDACTED: Bytes = Bytes::from_static(b"(redacted)");
    match name {
        "auth" => argv.iter_mut().skip(1).for_each(|a| *a = REDACTED),
        // ACL SETUSER: the user's name and every rule (passwords among
        // them).
        "acl"
            if argv
                .get(1)
                .is_some_and(|a| a.eq_ignore_ascii_case(b"setuser")) =>
        {
            argv.iter_mut().skip(2).for_each(|a| *a = REDACTED)
        }
        "hello" => {
            if let Some(at) = argv.iter().position(|a| a.eq_ignore_ascii_case(b"auth")) {
                argv.iter_mut()
                    .skip(at + 1)
                    .take(2)
                    .for_each(|a| *a = REDACTED);
            }
        }
        "config" if argv.get(1).is_some_and(|a| a.eq_ignore_ascii_case(b"set")) => {
            for pair in argv[2..].chunks_mut(2) {
                if let [name, value] = pair {
                    if name.eq_ignore_ascii_case(b"requirepass")
                        || name.eq_ignore_ascii_case(b"masterauth")
                    {
                        *value = REDACTED;
                    }
                }
            }
        }
        _ => {}
    }
}

/// Whether a command's arguments must be kept for the slow log.
pub fn keep_argv(shared: &crate::state::Shared, spec: &Spec) -> bool {
    shared.stats.slowlog_slower_than.load(Ordering::Relaxed) >= 0 && !spec.has_flag("skip_slowlog")
}

/// Wraps a plan so that its call is counted where it runs (see the module
/// documentation). `started` is when the command's planning began: for a
/// command answered on the connection, planning is the run.
pub fn track(plan: Plan, started: Instant, mut t: Tracking) -> Plan {
    if let Some(args) = t.monitor.take() {
        t.shared
            .monitors
            .feed_encoded(t.db, &t.caller.state.monitor, &args);
    }
    match plan {
        Plan::Reply(r) => {
            t.finish(started.elapsed(), Some(&r));
            Plan::Reply(r)
        }
        Plan::ReplyAndClose(r) => {
            t.finish(started.elapsed(), Some(&r));
            Plan::ReplyAndClose(r)
        }
        Plan::Write(op) => Plan::Write(Box::new(move |txn| {
            let began = Instant::now();
            let result = op(txn);
            match &result {
                Ok(r) => t.finish(began.elapsed(), Some(r)),
                // The writer answers it with the error's text (or takes the
                // group back).
                Err(e) => t.finish_with(began.elapsed(), Some(e.to_string().as_bytes())),
            }
            result
        })),
        Plan::Read(f, needs) => Plan::Read(
            Box::new(move |view| {
                let began = Instant::now();
                let reply = f(view);
                t.finish(began.elapsed(), Some(&reply));
                reply
            }),
            needs,
        ),
        // A blocking command's run is its first try and the push that
        // serves it, both on the writer; counting it here counts the call
        // without the time it waited, which redis does not count either.
        // Cached reads are answered from memory in the time it took to plan
        // them (or go to the pool as a plain read, uncounted a second time).
        other => {
            t.finish(started.elapsed(), None);
            other
        }
    }
}

//! Counting a command's call where it runs: [`track`] wraps a plan's
//! closure once, in `dispatch` (or a fast path), so that a read is timed
//! on the reader that runs it, a write on the writer inside its group
//! commit, and a connection command where it is planned; the counters
//! themselves, the slow log and the latency events are
//! [`crate::stats`]'s. [`Tracking`] also carries the command to MONITOR's
//! feed and its first arguments to the slow log (passwords redacted).

use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::{Plan, Session, Spec, TABLE};
use crate::clients::ClientHandle;
use crate::reply::Reply;
use crate::state::Shared;
use crate::stats::{Caller, SLOWLOG_MAX_ARGC};

/// What a tracked plan needs to record its call.
pub struct Tracking {
    /// The server, whose `stats` count the call.
    shared: std::sync::Arc<Shared>,
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
    /// A script or function call (EVAL, FCALL...): its MONITOR line goes
    /// out as soon as it is planned, ahead of the lines of the calls it
    /// makes (see `Monitors::publish_lua`).
    script: bool,
}

thread_local! {
    /// Set by a script's command as its reply is made, on the thread that
    /// runs it: its errors are counted already, and whether the call
    /// counts as failed (see [`errors_accounted`]).
    static ACCOUNTED: Cell<Option<bool>> = const { Cell::new(None) };
}

/// A script or function has counted the errors of its reply itself, as
/// redis does: an error a `redis.call` met was counted when the call
/// failed and is not counted again when the script passes it on, and an
/// error nested in the reply counts too. `failed` says whether the call
/// counts as failed (its reply holds an error). Read by the tracking of
/// the command running on this thread once it returns.
pub(crate) fn errors_accounted(failed: bool) {
    ACCOUNTED.set(Some(failed));
}

impl Tracking {
    /// Tracking for a command of the table (`index`) about to be planned
    /// from `request` (its name first).
    pub fn new(session: &Session, spec: &'static Spec, request: &[Bytes]) -> Tracking {
        let shared = &session.shared;
        let argv = keep_argv(shared, spec).then(|| {
            let mut argv: Vec<Bytes> = request[..request.len().min(SLOWLOG_MAX_ARGC)].to_vec();
            redact(spec.name, &mut argv);
            (argv, request.len())
        });
        let row = shared
            .stats
            .row_of(spec.described(request.get(1).map(|b| &b[..])));
        session.client.state.last_row.store(row, Ordering::Relaxed);
        // The script commands are flagged `skip_monitor`, yet redis shows
        // them: each feeds MONITOR itself as it starts, so that the calls
        // of the script come after it.
        let script = matches!(
            spec.name,
            "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro"
        );
        let monitor =
            (shared.monitors.active() && (script || shared.stats.shown(row))).then(|| {
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
            db: session.db(),
            monitor,
            script,
        }
    }

    /// Tracking for a fast-path command (plain GET or SET, planned
    /// without the command table). `argv` is the command as sent, for the
    /// slow log, made of the `Bytes` the fast path made anyway (a
    /// reference count each, no copy); `None` when the slow log is off.
    pub fn fast(session: &Session, index: usize, argv: Option<Vec<Bytes>>) -> Tracking {
        let argv = argv.map(|a| {
            let n = a.len();
            (a, n)
        });
        let row = session.shared.stats.row_of(TABLE[index].meta);
        session.client.state.last_row.store(row, Ordering::Relaxed);
        Tracking {
            row,
            shared: session.shared.clone(),
            argv,
            caller: session.client.clone(),
            db: session.db(),
            // The fast paths feed MONITOR themselves.
            monitor: None,
            script: false,
        }
    }

    /// Whether the slow log is on (so a fast path keeps its arguments).
    pub fn slowlog_on(session: &Session) -> bool {
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
        let failed = match ACCOUNTED.take() {
            Some(failed) => failed,
            None => {
                if let Some(e) = error {
                    st.error(e);
                }
                error.is_some()
            }
        };
        st.record(self.row, elapsed, failed);
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
    session: &Session,
    index: usize,
    started: Instant,
    argv: impl FnOnce() -> Vec<Bytes>,
) {
    let st = &session.shared.stats;
    let row = st.row_of(TABLE[index].meta);
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
pub fn keep_argv(shared: &Shared, spec: &Spec) -> bool {
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
        if t.script {
            let caller = &t.caller;
            t.shared
                .monitors
                .publish(&caller.state.monitor, || caller.peer.monitor_addr());
        }
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
            // Whose change it is, for CLIENT TRACKING's NOLOOP.
            txn.origin = t.caller.id;
            ACCOUNTED.set(None);
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
                // Whose read it is, for CLIENT TRACKING (see
                // `respite_engine::notify::Change::Expired`).
                view.set_origin(t.caller.id);
                ACCOUNTED.set(None);
                let began = Instant::now();
                let reply = f(view);
                t.finish(began.elapsed(), Some(&reply));
                reply
            }),
            needs,
        ),
        // Counted once the step after the write has made the reply: its
        // time is the write's (a script's run) and the step's (PUBLISH's
        // delivery, MIGRATE's transfer), its errors the final reply's.
        Plan::After(op, then) => {
            let ran: Arc<Mutex<(Duration, Option<bool>)>> = Arc::default();
            let op = op.map(|op| {
                let (ran, origin) = (ran.clone(), t.caller.id);
                Box::new(move |txn: &mut respite_engine::Txn<'_, '_>| {
                    txn.origin = origin;
                    ACCOUNTED.set(None);
                    let began = Instant::now();
                    let result = op(txn);
                    *ran.lock().unwrap_or_else(|p| p.into_inner()) =
                        (began.elapsed(), ACCOUNTED.take());
                    result
                }) as respite_engine::WriteOp<Reply>
            });
            Plan::After(
                op,
                Box::new(move |written| {
                    let began = Instant::now();
                    let reply = then(written);
                    let (write_time, accounted) = *ran.lock().unwrap_or_else(|p| p.into_inner());
                    ACCOUNTED.set(accounted);
                    t.finish(write_time + began.elapsed(), Some(&reply));
                    reply
                }),
            )
        }
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

/// One line of CLIENT LIST / CLIENT INFO (and the ACL log's
/// `client-info`) for `c`: its last command named by the statistics row
/// where `shared` is given, else by the table row; `own_argv`, when `c` is
/// the caller, the bytes of its own CLIENT command.
pub fn client_line(c: &ClientHandle, shared: Option<&Shared>, own_argv: Option<u64>) -> String {
    let load = |a: &std::sync::atomic::AtomicUsize| a.load(std::sync::atomic::Ordering::Relaxed);
    let cmd = shared
        .and_then(|sh| sh.stats.row_name(load(&c.state.last_row)))
        .or_else(|| TABLE.get(load(&c.last_cmd)).map(|s| s.name.to_string()))
        .unwrap_or_else(|| "NULL".into());
    crate::clients::info_line(c, &cmd, std::mem::size_of::<Session>(), own_argv)
}

//! Lua scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT, as
//! redis-server 7.0 runs them, over the interpreter in `respite-script`.
//!
//! A script that may write runs on the writer thread as one write
//! operation, inside the group commit, exactly like an EXEC: no other
//! client's command lands between its calls, its calls see its own
//! writes, and its writes commit with the group, so its reply is sent only
//! once they are durable. A script that fails half-way keeps what it wrote
//! before the error (redis does not roll a script back either). Each
//! `redis.call` goes through [`crate::command::call`], the same command
//! table and checks a client's command meets, with redis's script-only
//! refusals and the calling client's ACL check ([`ScriptAcl`]).
//!
//! A read-only script (EVAL_RO, EVALSHA_RO, or `#!lua flags=no-writes`)
//! runs on the read pool instead, as a read job in one snapshot, calling
//! through [`crate::command::call_read`], which refuses writes with
//! redis's text: it never waits for the writer nor holds it up.
//!
//! PUBLISH and SPUBLISH from a script are held in its context and sent
//! once its group has committed ([`Launch::plan`]).
//!
//! The interpreter lives in a thread-local on the thread that runs the
//! script (the writer, or a reader), created on first use; the script
//! cache (bodies by SHA1, as SCRIPT LOAD and EVAL fill it) is shared by
//! every connection and lost on restart, as in redis. SCRIPT FLUSH
//! empties the cache and makes every interpreter start afresh (redis
//! recreates its Lua state too).
//!
//! SCRIPT KILL stops a script that has not written (the interpreter checks
//! back every 100,000 instructions), answers UNKILLABLE once it has, and
//! NOTBUSY when none runs. Past `busy-reply-threshold`, a script on the
//! writer makes other clients' commands BUSY (see `busy`).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::{Bytes, BytesMut};
use respite_engine::{EngineError, Txn, View};
use respite_script::{Engine, Host, Interrupt, LogLevel, RunOptions, Script, Value};

use super::common::help;
use crate::args::{subcommand, upper, Args};
use crate::command::call::Target;
use crate::command::{
    call, call_read, is_fatal, Ctx, LocalCommand, Plan, Published, ScriptAcl, Session,
};
use crate::error::CommandError;
use crate::reply::Reply;

/// Every script EVAL or SCRIPT LOAD has seen, by lowercase SHA1.
fn cache() -> &'static Mutex<HashMap<String, Arc<Script>>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<Script>>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

fn lock_cache() -> std::sync::MutexGuard<'static, HashMap<String, Arc<Script>>> {
    cache().lock().unwrap_or_else(|p| p.into_inner())
}

/// Bumped by SCRIPT FLUSH: an interpreter of an older generation is
/// replaced before its next run.
static GENERATION: AtomicU64 = AtomicU64::new(0);
/// A script is running on the writer.
static RUNNING: AtomicBool = AtomicBool::new(false);
/// The running script has written.
static WROTE: AtomicBool = AtomicBool::new(false);
/// SCRIPT KILL asked the running script to stop.
static KILL: AtomicBool = AtomicBool::new(false);

/// What runs on the writer now: an EVAL script, or a function (its name,
/// the FCALL that called it), since when.
struct RunInfo {
    eval: bool,
    name: String,
    command: Vec<Bytes>,
    start: std::time::Instant,
}

fn run_info() -> std::sync::MutexGuard<'static, Option<RunInfo>> {
    static INFO: Mutex<Option<RunInfo>> = Mutex::new(None);
    INFO.lock().unwrap_or_else(|p| p.into_inner())
}

/// When the running script started, in milliseconds since [`epoch`]
/// plus one; 0 when none runs. Read by every command's dispatch (see
/// [`busy`]), so an atomic rather than [`RunInfo`]'s lock.
static RUN_STARTED: AtomicU64 = AtomicU64::new(0);
/// The running script is an EVAL one (not a function).
static RUN_EVAL: AtomicBool = AtomicBool::new(false);

fn epoch() -> std::time::Instant {
    static EPOCH: OnceLock<std::time::Instant> = OnceLock::new();
    *EPOCH.get_or_init(std::time::Instant::now)
}

/// Whether a script or function is running on the writer.
pub(crate) fn script_running() -> bool {
    RUN_STARTED.load(Ordering::Acquire) != 0
}

/// The BUSY reply for a command that does not have the `allow_busy`
/// flag, while a script has been running for `threshold_ms` or more
/// (`busy-reply-threshold`; 0: never), as redis answers other clients
/// then.
pub(crate) fn busy(threshold_ms: u64) -> Option<&'static str> {
    let started = RUN_STARTED.load(Ordering::Acquire);
    if started == 0 || threshold_ms == 0 {
        return None;
    }
    let now = epoch().elapsed().as_millis() as u64 + 1;
    if now.saturating_sub(started) < threshold_ms {
        return None;
    }
    Some(if RUN_EVAL.load(Ordering::Acquire) {
        BUSY_SCRIPT
    } else {
        BUSY_FUNCTION
    })
}

/// Marks a script (`eval`) or function `name` called by `command` as
/// running, until [`end_run`].
pub(crate) fn begin_run(eval: bool, name: String, command: Vec<Bytes>) {
    RUN_ID.fetch_add(1, Ordering::AcqRel);
    *run_info() = Some(RunInfo {
        eval,
        name,
        command,
        start: std::time::Instant::now(),
    });
    RUN_EVAL.store(eval, Ordering::Release);
    RUN_STARTED.store(epoch().elapsed().as_millis() as u64 + 1, Ordering::Release);
    KILL.store(false, Ordering::Release);
    WROTE.store(false, Ordering::Release);
    RUNNING.store(true, Ordering::Release);
}

/// Each run on the writer's number, counted up by [`begin_run`].
static RUN_ID: AtomicU64 = AtomicU64::new(0);

/// The last runs on the writer: their number, how long they ran (ms),
/// and whether they were EVAL scripts.
fn finished_runs() -> std::sync::MutexGuard<'static, std::collections::VecDeque<(u64, u64, bool)>> {
    static RUNS: Mutex<std::collections::VecDeque<(u64, u64, bool)>> =
        Mutex::new(std::collections::VecDeque::new());
    RUNS.lock().unwrap_or_else(|p| p.into_inner())
}

/// A write planned while a script runs on the writer waits in the
/// writer's queue behind it. Redis reads such a command only once the
/// script passes `busy-reply-threshold` (and answers BUSY) or has ended
/// (and runs it): so the write is wrapped to answer BUSY if the script
/// that was running when it was planned ran past the threshold. Commands
/// redis flags `allow-busy`, and plans that are not writes, are left as
/// they are.
pub(crate) fn busy_if_late(s: &Session, spec: &crate::command::Spec, plan: Plan) -> Plan {
    if !script_running() || !matches!(plan, Plan::Write(_)) {
        return plan;
    }
    if crate::meta::find(spec.name.as_bytes(), None).is_some_and(|m| m.has_flag("allow_busy")) {
        return plan;
    }
    let Plan::Write(op) = plan else {
        return plan;
    };
    let threshold: u64 = s
        .shared
        .params
        .get("busy-reply-threshold")
        .parse()
        .unwrap_or(5000);
    let running = RUN_ID.load(Ordering::Acquire);
    Plan::Write(Box::new(move |txn: &mut Txn<'_, '_>| {
        let late = finished_runs()
            .iter()
            .find(|(id, _, _)| *id == running)
            .filter(|(_, ms, _)| threshold > 0 && *ms >= threshold)
            .map(|(_, _, eval)| *eval);
        match late {
            Some(eval) => Ok(Reply::error(if eval { BUSY_SCRIPT } else { BUSY_FUNCTION })),
            None => op(txn),
        }
    }))
}

/// Marks the running script or function finished.
pub(crate) fn end_run() {
    let ran = run_info()
        .as_ref()
        .map(|info| (info.start.elapsed().as_millis() as u64, info.eval));
    if let Some((ms, eval)) = ran {
        let mut runs = finished_runs();
        if runs.len() == 8 {
            runs.pop_front();
        }
        runs.push_back((RUN_ID.load(Ordering::Acquire), ms, eval));
    }
    RUN_STARTED.store(0, Ordering::Release);
    RUNNING.store(false, Ordering::Release);
    KILL.store(false, Ordering::Release);
    *run_info() = None;
}

/// The running function, for FUNCTION STATS: `Err(())` while an EVAL
/// script runs, else its name, its FCALL and how long it has run (ms).
#[allow(clippy::result_unit_err)]
pub(crate) fn running_function() -> Result<Option<(String, Vec<Bytes>, u64)>, ()> {
    match run_info().as_ref() {
        None => match reader_runs().iter().min_by_key(|r| r.start) {
            None => Ok(None),
            Some(r) if r.eval => Err(()),
            Some(r) => Ok(Some((
                r.name.clone(),
                r.command.clone(),
                r.start.elapsed().as_millis() as u64,
            ))),
        },
        Some(info) if info.eval => Err(()),
        Some(info) => Ok(Some((
            info.name.clone(),
            info.command.clone(),
            info.start.elapsed().as_millis() as u64,
        ))),
    }
}

/// redis's BUSY replies: while a script runs, and while a function does.
pub(crate) const BUSY_SCRIPT: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
pub(crate) const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";

/// SCRIPT KILL (`eval`) or FUNCTION KILL (`scriptKill`).
///
/// The writer's script is the one killed; with none there, the longest
/// running read-only script on the read pool (which never writes, so it
/// can always be killed).
pub(crate) fn kill(eval: bool) -> Result<Reply, CommandError> {
    let info = run_info();
    let Some(running) = info.as_ref().filter(|_| RUNNING.load(Ordering::Acquire)) else {
        drop(info);
        let readers = reader_runs();
        let Some(oldest) = readers.iter().min_by_key(|r| r.start) else {
            return Err(CommandError::Raw(
                "NOTBUSY No scripts in execution right now.".into(),
            ));
        };
        if eval != oldest.eval {
            return Err(CommandError::Raw(
                if oldest.eval {
                    BUSY_SCRIPT
                } else {
                    BUSY_FUNCTION
                }
                .into(),
            ));
        }
        oldest.kill.store(true, Ordering::Release);
        return Ok(Reply::Ok);
    };
    if WROTE.load(Ordering::Acquire) {
        return Err(CommandError::Raw(
            "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.".into(),
        ));
    }
    if eval && !running.eval {
        return Err(CommandError::Raw(BUSY_FUNCTION.into()));
    }
    if !eval && running.eval {
        return Err(CommandError::Raw(BUSY_SCRIPT.into()));
    }
    KILL.store(true, Ordering::Release);
    Ok(Reply::Ok)
}

thread_local! {
    static ENGINE: RefCell<Option<(u64, Engine)>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's interpreter, set up on first use (or after
/// a SCRIPT FLUSH).
fn with_engine<R>(f: impl FnOnce(&mut Engine) -> R) -> Result<R, CommandError> {
    let result = ENGINE.with(|cell| {
        let mut slot = cell.borrow_mut();
        let generation = GENERATION.load(Ordering::Acquire);
        if slot.as_ref().is_none_or(|(g, _)| *g != generation) {
            let engine = Engine::new().map_err(|e| CommandError::Other(e.to_string()))?;
            *slot = Some((generation, engine));
        }
        match slot.as_mut() {
            Some((_, engine)) => {
                let r = bounded(engine, f);
                VM_BYTES.store(engine.used_memory() as u64, Ordering::Relaxed);
                Ok(r)
            }
            None => Err(CommandError::Other("Lua interpreter unavailable".into())),
        }
    });
    result
}

/// `lua-memory-limit` as last read (0: none): the most memory one Lua
/// interpreter may hold. An allocation past it fails, and the script gets
/// Lua's "not enough memory" error; the server is unharmed.
static MEMORY_LIMIT: AtomicU64 = AtomicU64::new(DEFAULT_MEMORY_LIMIT);

/// `lua-memory-limit`'s default: 512 MiB.
const DEFAULT_MEMORY_LIMIT: u64 = 512 << 20;

/// Reads `lua-memory-limit` for the scripts planned next.
pub(crate) fn refresh_memory_limit(shared: &crate::Shared) {
    let limit = shared
        .params
        .get("lua-memory-limit")
        .parse()
        .unwrap_or(DEFAULT_MEMORY_LIMIT);
    MEMORY_LIMIT.store(limit, Ordering::Relaxed);
}

/// Runs `f` on `engine` under the memory limit; collects the garbage
/// after a run that left the interpreter holding over half of it (Lua 5.1
/// does not collect when an allocation fails, so the next script would
/// start short).
pub(crate) fn bounded<R>(engine: &mut Engine, f: impl FnOnce(&mut Engine) -> R) -> R {
    let limit = MEMORY_LIMIT.load(Ordering::Relaxed);
    // A field store: cheap enough to make before every run.
    engine.set_memory_limit(limit as usize);
    let r = f(engine);
    if limit > 0 && engine.used_memory() as u64 > limit / 2 {
        engine.collect_garbage();
    }
    r
}

/// The EVAL interpreter's memory after its last use (INFO
/// `used_memory_lua`, `used_memory_vm_eval`).
static VM_BYTES: AtomicU64 = AtomicU64::new(0);

/// INFO's figures of EVAL scripts: the interpreter's memory, the number
/// of cached scripts and the bytes of their bodies.
pub(crate) fn eval_memory() -> (u64, usize, usize) {
    let cache = lock_cache();
    (
        VM_BYTES.load(Ordering::Relaxed),
        cache.len(),
        cache.values().map(|s| s.body.len() + s.sha.len()).sum(),
    )
}

/// Reads a script body (its shebang) and compiles it, then keeps it in the
/// cache: what SCRIPT LOAD does, and EVAL for a script it has not seen.
fn load(body: Bytes) -> Result<Arc<Script>, CommandError> {
    let sha = respite_script::sha1hex(&body);
    if let Some(s) = lock_cache().get(&sha) {
        return Ok(s.clone());
    }
    let script = Script::new(body.to_vec()).map_err(CommandError::Other)?;
    with_engine(|e| e.compile(&script))?.map_err(CommandError::Raw)?;
    let script = Arc::new(script);
    lock_cache().insert(script.sha.clone(), script.clone());
    Ok(script)
}

/// The server side of a running script: its `redis.call`s run against the
/// writer's transaction, or a reader's view for a read-only script.
pub(crate) struct ServerHost<'a, 't, 's, 'c> {
    pub(crate) ctx: Ctx<'a>,
    pub(crate) target: Target<'t, 's, 'c>,
    /// The caller's ACL check (`None`: an unrestricted user).
    pub(crate) acl: Option<&'a ScriptAcl>,
    /// Writes are refused even on the writer (a function that became
    /// `no-writes` after it was planned).
    pub(crate) read_only: bool,
    /// The kill switch of a script on the read pool (`None`: on the
    /// writer, where [`KILL`] is).
    pub(crate) reader_kill: Option<Arc<AtomicBool>>,
    /// A storage failure inside a call: the whole group is taken back.
    pub(crate) fatal: Option<EngineError>,
}

impl<'a, 't, 's, 'c> ServerHost<'a, 't, 's, 'c> {
    /// A host for a script the client of `ctx` runs against `target`.
    pub(crate) fn new(
        ctx: Ctx<'a>,
        target: Target<'t, 's, 'c>,
        acl: Option<&'a ScriptAcl>,
        authorize: Option<&'a crate::command::Authorize<'a>>,
    ) -> Self {
        let mut ctx = ctx;
        ctx.authorize = authorize;
        ServerHost {
            ctx,
            target,
            acl,
            read_only: false,
            reader_kill: None,
            fatal: None,
        }
    }
}

impl Host for ServerHost<'_, '_, '_, '_> {
    fn call(&mut self, argv: Vec<Vec<u8>>, resp: u8) -> Result<Vec<u8>, Vec<u8>> {
        if self.fatal.is_some() {
            return Err(b"-ERR the script's transaction failed".to_vec());
        }
        self.ctx.resp3 = resp == 3;
        let request: Vec<Bytes> = argv.into_iter().map(Bytes::from).collect();
        let result = match &mut self.target {
            Target::Writer(txn) if self.read_only => call_read(&mut self.ctx, request, txn),
            Target::Writer(txn) => call(&mut self.ctx, request, txn),
            Target::Reader(view) => call_read(&mut self.ctx, request, view),
        };
        if self.ctx.wrote && self.reader_kill.is_none() {
            WROTE.store(true, Ordering::Release);
        }
        let reply = match result {
            Ok(reply) => reply,
            Err(e) if is_fatal(&e) => {
                let text = format!("-{e}").into_bytes();
                if let CommandError::Engine(engine) = e {
                    self.fatal = Some(engine);
                }
                return Err(text);
            }
            Err(e) => Reply::from(e),
        };
        let mut out = BytesMut::new();
        reply.encode(&mut out, resp == 3);
        Ok(out.to_vec())
    }

    fn acl_check(&mut self, argv: &[Vec<u8>]) -> Option<bool> {
        let request: Vec<Bytes> = argv.iter().map(|a| Bytes::copy_from_slice(a)).collect();
        let row = crate::command::call::resolve(&request)?;
        Some(self.acl.is_none_or(|acl| acl.allows(row, &request)))
    }

    fn log(&mut self, level: LogLevel, message: &[u8]) {
        let message = String::from_utf8_lossy(message);
        match level {
            LogLevel::Debug => tracing::debug!(target: "script", "{message}"),
            LogLevel::Verbose => tracing::info!(target: "script", "{message}"),
            LogLevel::Notice => tracing::info!(target: "script", "{message}"),
            LogLevel::Warning => tracing::warn!(target: "script", "{message}"),
        }
    }

    fn interrupt(&mut self) -> Interrupt {
        if let Some(kill) = &self.reader_kill {
            return if kill.load(Ordering::Acquire) {
                Interrupt::Kill
            } else {
                Interrupt::Continue
            };
        }
        // A script that runs long is progress, for the watchdog: only a
        // writer stuck outside Lua (in a disk call) must get the daemon
        // restarted.
        self.ctx.note_progress();
        if KILL.load(Ordering::Acquire) {
            Interrupt::Kill
        } else {
            Interrupt::Continue
        }
    }
}

impl ServerHost<'_, '_, '_, '_> {
    /// The script's reply as the server's reply, its errors counted as
    /// redis counts them (see [`account_errors`]).
    pub(crate) fn reply(&self, v: Value) -> Reply {
        let mut failed = false;
        account_errors(&v, true, &self.ctx, &mut failed);
        crate::command::track::errors_accounted(failed);
        to_reply(v)
    }
}

/// Counts the errors of a script's reply as redis 7.0 does when it writes
/// the reply (`luaReplyToRedisReply`): each error the script made (an
/// `{err=}` table, `redis.error_reply`, a raised error) in the error
/// statistics and `total_error_replies`, nested ones included; an error a
/// call met ([`Value::CalledError`]) not again, since the call counted it.
/// Either makes the script's call count as failed. The reply's own
/// top-level error is counted in `total_error_replies` by the connection
/// that sends it, so here it is counted only in the error statistics, or,
/// for a call's error, taken back from that total.
fn account_errors(v: &Value, top: bool, ctx: &Ctx<'_>, failed: &mut bool) {
    match v {
        Value::Error(text) => {
            *failed = true;
            if top {
                ctx.count_error_stat(text);
            } else {
                ctx.count_error(text);
            }
        }
        Value::CalledError(_) => {
            *failed = true;
            if top {
                ctx.uncount_reply_error();
            }
        }
        Value::Array(items) | Value::Set(items) => {
            for item in items {
                account_errors(item, false, ctx, failed);
            }
        }
        Value::Map(pairs) => {
            for (k, item) in pairs {
                account_errors(k, false, ctx, failed);
                account_errors(item, false, ctx, failed);
            }
        }
        _ => {}
    }
}

/// A script's reply as the server's reply.
pub(crate) fn to_reply(v: Value) -> Reply {
    match v {
        Value::Status(s) => Reply::Status(String::from_utf8_lossy(&s).into_owned()),
        Value::Error(e) | Value::CalledError(e) => Reply::Error(Bytes::from(e)),
        Value::Int(n) => Reply::Int(n),
        Value::Bulk(b) => Reply::Bulk(Bytes::from(b)),
        Value::Null => Reply::Nil,
        Value::Array(items) => Reply::Array(items.into_iter().map(to_reply).collect()),
        Value::Set(items) => Reply::Set(items.into_iter().map(to_reply).collect()),
        Value::Map(pairs) => Reply::Map(
            pairs
                .into_iter()
                .map(|(k, v)| (to_reply(k), to_reply(v)))
                .collect(),
        ),
        Value::Double(d) => Reply::Double(d),
        Value::Bool(b) => Reply::Bool(b),
        Value::BigNumber(n) => Reply::BigNum(String::from_utf8_lossy(&n).into_owned()),
        Value::Verbatim(_, text) => Reply::Verbatim(String::from_utf8_lossy(&text).into_owned()),
    }
}

/// `EVAL script numkeys [key ...] [arg ...]`, `EVALSHA sha1 numkeys ...`,
/// and their `_RO` forms.
pub struct Eval {
    script: Result<Arc<Script>, CommandError>,
    keys: Vec<Bytes>,
    args: Vec<Bytes>,
    read_only: bool,
}

fn parse_eval(args: &mut Args, by_sha: bool, ro: bool) -> Result<Eval, CommandError> {
    let first = args.next()?;
    let numkeys = crate::args::parse_i64(&args.next()?).ok_or(CommandError::NotInteger)?;
    let rest = args.rest();
    if numkeys > rest.len() as i64 {
        return Err(CommandError::Other(
            "Number of keys can't be greater than number of args".into(),
        ));
    } else if numkeys < 0 {
        return Err(CommandError::Other(
            "Number of keys can't be negative".into(),
        ));
    }
    let script = if by_sha {
        let sha = String::from_utf8_lossy(&first).to_ascii_lowercase();
        lock_cache().get(&sha).cloned().ok_or_else(|| {
            CommandError::Raw("NOSCRIPT No matching script. Please use EVAL.".into())
        })
    } else {
        load(first)
    };
    let mut rest = rest;
    let argv = rest.split_off(numkeys as usize);
    Ok(Eval {
        script,
        keys: rest,
        args: argv,
        read_only: ro,
    })
}

impl Eval {
    fn plan(self, s: &mut Session) -> Result<Plan, CommandError> {
        let script = self.script?;
        let flags = script.flags;
        refuse_before_run(s, &flags)?;
        if self.read_only && !flags.compat && !flags.no_writes {
            return Err(CommandError::Other(
                "Can not execute a script with write flag using *_ro command.".into(),
            ));
        }
        let launch = Launch {
            eval: true,
            name: script.sha.clone(),
            command: Vec::new(),
            read_only: self.read_only || (!flags.compat && flags.no_writes),
            may_publish: may_publish(&script.body),
            keys: self.keys.clone(),
        };
        let (keys, args) = (self.keys, self.args);
        let allow_oom = !flags.compat && flags.allow_oom;
        Ok(launch.plan(s, move |host| {
            host.ctx.allow_oom = allow_oom;
            let keys: Vec<&[u8]> = keys.iter().map(|k| k.as_ref()).collect();
            let args: Vec<&[u8]> = args.iter().map(|a| a.as_ref()).collect();
            let value = with_engine(|engine| {
                engine.run(&script, &keys, &args, host, RunOptions::default())
            })?;
            Ok(host.reply(value))
        }))
    }
}

/// The refusals redis makes before it runs a script that declares its
/// flags (a shebang, or a function), in redis's order: `processCommand`'s,
/// with the script's flags standing in for the command's
/// (`scriptFlagsToCmdFlags`: a script is `denyoom` unless `allow-oom` or
/// `no-writes`, a write unless `no-writes`). Over `maxmemory` (or
/// `maxdisk`, or on a full disk) such a script is refused whole, whatever
/// it would call; without the replicas `min-replicas-to-write` asks for,
/// NOREPLICAS; on a read replica, READONLY. A script in compatibility
/// mode (no shebang) has EVAL's flags: only its calls are checked.
pub(crate) fn refuse_before_run(
    s: &Session,
    flags: &respite_script::Flags,
) -> Result<(), CommandError> {
    if flags.compat {
        return Ok(());
    }
    if !flags.allow_oom && !flags.no_writes {
        if let Some(refusal) = s.shared.engine.refusal() {
            return Err(CommandError::Engine(refusal));
        }
    }
    if !flags.no_writes {
        if s.shared.wants_replicas.load(Ordering::Relaxed) {
            return Err(CommandError::NoReplicas);
        }
        if s.shared.engine.is_replica() || s.shared.upstream.is_replica() {
            return Err(CommandError::Engine(EngineError::ReadOnlyReplica));
        }
    }
    Ok(())
}

/// Whether a script's code may publish (names PUBLISH or SPUBLISH, in any
/// case): its messages are then held until its group has committed, and
/// its reply waits for them. A script that publishes through a command
/// name it builds at run time has its messages delivered by the writer as
/// it runs instead, before its group commits.
pub(crate) fn may_publish(code: &[u8]) -> bool {
    code.windows(7).any(|w| w.eq_ignore_ascii_case(b"publish"))
}

/// Where and how a script or function runs, decided when it is planned.
pub(crate) struct Launch {
    /// An EVAL script (not a function).
    pub(crate) eval: bool,
    /// Its SHA1 or the function's name.
    pub(crate) name: String,
    /// The FCALL that called the function (empty for EVAL).
    pub(crate) command: Vec<Bytes>,
    /// EVAL_RO, EVALSHA_RO, FCALL_RO or a `no-writes` script: runs on the
    /// read pool.
    pub(crate) read_only: bool,
    /// See [`may_publish`].
    pub(crate) may_publish: bool,
    /// The keys the call declares: CLIENT TRACKING remembers them for a
    /// tracking caller whose script called a read command (redis's `call`
    /// remembers the caller's command's keys).
    pub(crate) keys: Vec<Bytes>,
}

/// What runs the script once its host is set up: its reply, or an error
/// found before it ran.
pub(crate) type RunFn = Box<
    dyn for<'h, 'a, 't, 's, 'c> FnOnce(
            &'h mut ServerHost<'a, 't, 's, 'c>,
        ) -> Result<Reply, CommandError>
        + Send,
>;

/// Whether a reply is the writer's "commit failed" error: the group the
/// script ran in was taken back, and so are its messages.
fn rolled_back(reply: &Reply) -> bool {
    matches!(reply, Reply::Error(text) if text.starts_with(b"ERR commit failed"))
}

impl Launch {
    /// The plan of a script the client of `s` runs: a read-only one on the
    /// read pool, in one snapshot, with an interpreter per reader thread;
    /// any other on the writer, inside the group commit, with its
    /// messages delivered once the group has committed. Its `redis.call`s
    /// are checked against the client's ACL user.
    pub(crate) fn plan(
        self,
        s: &Session,
        run: impl for<'h, 'a, 't, 's2, 'c> FnOnce(
                &'h mut ServerHost<'a, 't, 's2, 'c>,
            ) -> Result<Reply, CommandError>
            + Send
            + 'static,
    ) -> Plan {
        self.plan_boxed(s, Box::new(run))
    }

    fn plan_boxed(self, s: &Session, run: RunFn) -> Plan {
        let shared = s.shared.clone();
        refresh_memory_limit(&shared);
        let caller = s.client.clone();
        let tracked = self.keys;
        let (db, resp3, touches) = (s.db(), s.resp3(), s.touches());
        let acl = ScriptAcl::of(s);
        if self.read_only {
            let read: crate::command::ReadFn = Box::new(move |view: &View<'_, '_>| {
                let check = acl
                    .as_ref()
                    .map(|a| move |row: usize, req: &[Bytes]| a.check(row, req));
                let authorize = check.as_ref().map(|c| c as &crate::command::Authorize<'_>);
                let ctx = Ctx::new(&shared, db, resp3, touches);
                let mut host = ServerHost::new(ctx, Target::Reader(view), acl.as_ref(), authorize);
                let (id, kill) = begin_reader_run(self.eval, self.name, self.command);
                host.reader_kill = Some(kill);
                host.ctx.monitor_calls();
                let result = run(&mut host);
                host.ctx.publish_monitored();
                end_reader_run(id);
                if host.ctx.read && caller.tracking.is_on() {
                    shared
                        .tracking
                        .remember(caller.as_ref(), tracked.iter().cloned());
                    shared.tracking.limit(shared.as_ref());
                }
                result.unwrap_or_else(Reply::from)
            });
            let needs = crate::command::ReadNeeds {
                snapshot: true,
                quick: false,
            };
            return Plan::Read(read, needs);
        }
        let held: Arc<Mutex<Vec<Published>>> = Arc::default();
        let mine = held.clone();
        let may_publish = self.may_publish;
        let deliverer = shared.clone();
        let op: respite_engine::WriteOp<Reply> = Box::new(move |txn: &mut Txn<'_, '_>| {
            let before = txn.changes();
            let (result, fatal, published) = {
                let check = acl
                    .as_ref()
                    .map(|a| move |row: usize, req: &[Bytes]| a.check(row, req));
                let authorize = check.as_ref().map(|c| c as &crate::command::Authorize<'_>);
                let ctx = Ctx::new(&shared, db, resp3, touches);
                let mut host = ServerHost::new(ctx, Target::Writer(txn), acl.as_ref(), authorize);
                begin_run(self.eval, self.name, self.command);
                host.ctx.monitor_calls();
                let result = run(&mut host);
                host.ctx.publish_monitored();
                end_run();
                // CLIENT TRACKING: here on the writer, before the group
                // that ran the script commits.
                if host.ctx.read && caller.tracking.is_on() {
                    shared
                        .tracking
                        .remember(caller.as_ref(), tracked.iter().cloned());
                    shared.tracking.limit(shared.as_ref());
                }
                let published = std::mem::take(&mut host.ctx.published);
                (result, host.fatal.take(), published)
            };
            if let Some(e) = fatal {
                return Err(e);
            }
            if !published.is_empty() {
                if may_publish {
                    *mine.lock().unwrap_or_else(|p| p.into_inner()) = published;
                } else {
                    Ctx::deliver(&shared, published);
                }
            }
            crate::command::command_result(result, txn, before)
        });
        if !may_publish {
            return Plan::Write(op);
        }
        Plan::After(
            Some(op),
            Box::new(move |reply| {
                let reply = reply.unwrap_or(Reply::Nil);
                let published =
                    std::mem::take(&mut *held.lock().unwrap_or_else(|p| p.into_inner()));
                if !rolled_back(&reply) {
                    Ctx::deliver(&deliverer, published);
                }
                reply
            }),
        )
    }
}

/// A read-only script or function running on the read pool.
struct ReaderRun {
    id: u64,
    eval: bool,
    name: String,
    command: Vec<Bytes>,
    start: std::time::Instant,
    kill: Arc<AtomicBool>,
}

fn reader_runs() -> std::sync::MutexGuard<'static, Vec<ReaderRun>> {
    static RUNS: Mutex<Vec<ReaderRun>> = Mutex::new(Vec::new());
    RUNS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Marks a read-only script running on a reader: its id, and the switch
/// SCRIPT KILL or FUNCTION KILL turns to stop it.
fn begin_reader_run(eval: bool, name: String, command: Vec<Bytes>) -> (u64, Arc<AtomicBool>) {
    static IDS: AtomicU64 = AtomicU64::new(0);
    let id = IDS.fetch_add(1, Ordering::Relaxed);
    let kill = Arc::new(AtomicBool::new(false));
    reader_runs().push(ReaderRun {
        id,
        eval,
        name,
        command,
        start: std::time::Instant::now(),
        kill: kill.clone(),
    });
    (id, kill)
}

fn end_reader_run(id: u64) {
    reader_runs().retain(|r| r.id != id);
}

macro_rules! eval_command {
    ($name:ident, $by_sha:expr, $ro:expr, $doc:literal) => {
        #[doc = $doc]
        pub struct $name(Eval);

        impl LocalCommand for $name {
            fn parse(args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
                parse_eval(args, $by_sha, $ro).map($name)
            }
            fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
                self.0.plan(s)
            }
        }
    };
}

eval_command!(
    EvalCmd,
    false,
    false,
    "`EVAL script numkeys [key ...] [arg ...]`"
);
eval_command!(
    EvalShaCmd,
    true,
    false,
    "`EVALSHA sha1 numkeys [key ...] [arg ...]`"
);
eval_command!(
    EvalRoCmd,
    false,
    true,
    "`EVAL_RO script numkeys [key ...] [arg ...]`"
);
eval_command!(
    EvalShaRoCmd,
    true,
    true,
    "`EVALSHA_RO sha1 numkeys [key ...] [arg ...]`"
);

/// `SCRIPT LOAD script` | `SCRIPT EXISTS sha1 [sha1 ...]` |
/// `SCRIPT FLUSH [ASYNC|SYNC]` | `SCRIPT KILL` | `SCRIPT HELP`
pub enum ScriptCmd {
    /// Compile and cache a body; answers its SHA1.
    Load(Bytes),
    /// 1 or 0 per SHA1.
    Exists(Vec<Bytes>),
    /// Empty the cache (SYNC and ASYNC alike).
    Flush,
    /// Stop the running script if it has not written.
    Kill,
    /// The subcommands.
    Help,
}

impl LocalCommand for ScriptCmd {
    fn parse(args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        let sub = subcommand(args)?;
        Ok(match sub.name.as_str() {
            "LOAD" => ScriptCmd::Load(args.next()?),
            "EXISTS" => ScriptCmd::Exists(args.rest()),
            "FLUSH" => {
                let mode = args.rest();
                match mode.as_slice() {
                    [] => {}
                    [m] if matches!(upper(m).as_str(), "SYNC" | "ASYNC") => {}
                    _ => {
                        return Err(CommandError::Other(
                            "SCRIPT FLUSH only support SYNC|ASYNC option".into(),
                        ))
                    }
                }
                ScriptCmd::Flush
            }
            "KILL" => ScriptCmd::Kill,
            "HELP" => ScriptCmd::Help,
            _ => return Err(sub.unknown("SCRIPT")),
        })
    }

    fn apply(self, _s: &mut Session) -> Result<Plan, CommandError> {
        Ok(Plan::Reply(match self {
            ScriptCmd::Load(body) => Reply::bulk(load(body)?.sha.clone()),
            ScriptCmd::Exists(shas) => {
                let cache = lock_cache();
                Reply::Array(
                    shas.iter()
                        .map(|sha| {
                            let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
                            Reply::Int(cache.contains_key(&sha) as i64)
                        })
                        .collect(),
                )
            }
            ScriptCmd::Flush => {
                lock_cache().clear();
                GENERATION.fetch_add(1, Ordering::AcqRel);
                Reply::Ok
            }
            ScriptCmd::Kill => kill(true)?,
            ScriptCmd::Help => help(
                "SCRIPT",
                &[
                    "DEBUG (YES|SYNC|NO)",
                    "    Set the debug mode for subsequent scripts executed.",
                    "EXISTS <sha1> [<sha1> ...]",
                    "    Return information about the existence of the scripts in the script cache.",
                    "FLUSH [ASYNC|SYNC]",
                    "    Flush the Lua scripts cache. Very dangerous on replicas.",
                    "    When called without the optional mode argument, the behavior is determined by the",
                    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
                    "    * ASYNC: Asynchronously flush the scripts cache.",
                    "    * SYNC: Synchronously flush the scripts cache.",
                    "KILL",
                    "    Kill the currently executing Lua script.",
                    "LOAD <script>",
                    "    Load a script into the scripts cache without executing it.",
                ],
            ),
        }))
    }
}

/// This family's rows of the command table (see [`crate::command::table`]).
#[rustfmt::skip]
pub(crate) fn commands() -> Vec<crate::command::Spec> {
    use crate::command::Spec;
    vec![
        Spec::local::<EvalCmd>("eval"),
        Spec::local::<EvalShaCmd>("evalsha"),
        Spec::local::<EvalRoCmd>("eval_ro"),
        Spec::local::<EvalShaRoCmd>("evalsha_ro"),
        Spec::local::<ScriptCmd>("script")
            .with_subcommands("SCRIPT", &["exists", "flush", "help", "kill", "load"]),
    ]
}

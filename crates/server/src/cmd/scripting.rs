//! Lua scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT, as
//! redis-server 7.0 runs them, over the interpreter in `respite-script`.
//!
//! A script runs on the writer thread as one write operation, inside the
//! group commit, exactly like an EXEC: no other client's command lands
//! between its calls, its calls see its own writes, and its writes commit
//! with the group, so its reply is sent only once they are durable. A
//! script that fails half-way keeps what it wrote before the error (redis
//! does not roll a script back either). Each `redis.call` goes through
//! [`crate::command::call`], the same command table and checks a client's
//! command meets, with redis's script-only refusals; a read-only script
//! (EVAL_RO, EVALSHA_RO, or `#!lua flags=no-writes`) calls through
//! [`crate::command::call_read`], which refuses writes with redis's text.
//!
//! The interpreter lives in a thread-local on the thread that runs the
//! script (the writer), created on first use; the script cache (bodies by
//! SHA1, as SCRIPT LOAD and EVAL fill it) is shared by every connection and
//! lost on restart, as in redis. SCRIPT FLUSH empties the cache and makes
//! every interpreter start afresh (redis recreates its Lua state too).
//!
//! SCRIPT KILL stops a script that has not written (the interpreter checks
//! back every 100,000 instructions), answers UNKILLABLE once it has, and
//! NOTBUSY when none runs. Not done yet: other clients get no `-BUSY` while
//! a script runs (their commands wait for the writer), `redis.call` is not
//! checked against the caller's ACL permissions, and read-only scripts run
//! on the writer rather than the read pool.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::{Bytes, BytesMut};
use respite_engine::{EngineError, Txn};
use respite_script::{Engine, Host, Interrupt, LogLevel, RunOptions, Script, Value};

use super::common::help;
use crate::args::{subcommand, upper, Args};
use crate::command::{call, call_read, is_fatal, Ctx, LocalCommand, Plan, Session};
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

/// Marks the running script or function finished.
pub(crate) fn end_run() {
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
        None => Ok(None),
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
pub(crate) fn kill(eval: bool) -> Result<Reply, CommandError> {
    let info = run_info();
    let Some(running) = info.as_ref().filter(|_| RUNNING.load(Ordering::Acquire)) else {
        return Err(CommandError::Raw(
            "NOTBUSY No scripts in execution right now.".into(),
        ));
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
                let r = f(engine);
                VM_BYTES.store(engine.used_memory() as u64, Ordering::Relaxed);
                Ok(r)
            }
            None => Err(CommandError::Other("Lua interpreter unavailable".into())),
        }
    });
    result
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
/// writer's transaction.
pub(crate) struct ServerHost<'a, 't, 's, 'c> {
    pub(crate) ctx: Ctx<'a>,
    pub(crate) txn: &'t mut Txn<'s, 'c>,
    pub(crate) read_only: bool,
    /// A storage failure inside a call: the whole group is taken back.
    pub(crate) fatal: Option<EngineError>,
}

impl Host for ServerHost<'_, '_, '_, '_> {
    fn call(&mut self, argv: Vec<Vec<u8>>, resp: u8) -> Result<Vec<u8>, Vec<u8>> {
        if self.fatal.is_some() {
            return Err(b"-ERR the script's transaction failed".to_vec());
        }
        self.ctx.resp3 = resp == 3;
        let request: Vec<Bytes> = argv.into_iter().map(Bytes::from).collect();
        let result = if self.read_only {
            call_read(&mut self.ctx, request, self.txn)
        } else {
            call(&mut self.ctx, request, self.txn)
        };
        if self.ctx.wrote {
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
        crate::command::lookup_index(argv.first()?).map(|_| true)
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

/// A script's reply as the server's reply.
pub(crate) fn to_reply(v: Value) -> Reply {
    match v {
        Value::Status(s) => Reply::Status(String::from_utf8_lossy(&s).into_owned()),
        Value::Error(e) => Reply::Error(Bytes::from(e)),
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
        if self.read_only && !flags.compat && !flags.no_writes {
            return Err(CommandError::Other(
                "Can not execute a script with write flag using *_ro command.".into(),
            ));
        }
        let read_only = self.read_only || (!flags.compat && flags.no_writes);
        let shared = s.shared.clone();
        let caller = s.client.clone();
        let (db, resp3, touches) = (s.db(), s.resp3(), s.touches());
        let (keys, args) = (self.keys, self.args);
        Ok(Plan::Write(Box::new(move |txn: &mut Txn<'_, '_>| {
            let mut host = ServerHost {
                ctx: Ctx::new(&shared, db, resp3, touches),
                txn,
                read_only,
                fatal: None,
            };
            let keys: Vec<&[u8]> = keys.iter().map(|k| k.as_ref()).collect();
            let args: Vec<&[u8]> = args.iter().map(|a| a.as_ref()).collect();
            begin_run(true, script.sha.clone(), Vec::new());
            let value = with_engine(|engine| {
                engine.run(&script, &keys, &args, &mut host, RunOptions::default())
            });
            end_run();
            // CLIENT TRACKING: a script that called a read command has its
            // declared keys remembered for its caller (redis's `call`
            // remembers the caller's command's keys), here on the writer,
            // before the group that ran it commits.
            if host.ctx.read && caller.tracking.is_on() {
                shared.tracking.remember(
                    caller.as_ref(),
                    keys.iter().map(|k| Bytes::copy_from_slice(k)),
                );
                shared.tracking.limit(shared.as_ref());
            }
            if let Some(e) = host.fatal.take() {
                return Err(e);
            }
            Ok(match value {
                Ok(v) => to_reply(v),
                Err(e) => Reply::from(e),
            })
        })))
    }
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
            .with_subcommands("SCRIPT", &[("exists", -3), ("flush", -2), ("help", 2), ("kill", 2), ("load", 3)]),
    ]
}

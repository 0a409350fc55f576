//! Redis 7.0's functions: FUNCTION LOAD, DELETE, FLUSH, LIST, DUMP,
//! RESTORE, STATS, KILL and HELP, and FCALL and FCALL_RO, over the
//! function engine of `respite-script`.
//!
//! A library is its code, whose first line names it (`#!lua
//! name=mylib`); running the code registers its functions. The engine
//! crate stores each library's code in the database file
//! (`function_libraries`), so libraries survive a restart, and every
//! change to them is a write operation on the writer thread: FUNCTION
//! LOAD answers only once the library is durable, like any write.
//!
//! Two copies of the set of libraries (a [`Registry`]: the libraries with
//! their functions' names, flags and descriptions) are kept in memory:
//!
//! - the writer's, the libraries as of the writer's last change, which
//!   each change checks against (a library of that name, a function of
//!   that name in another library) and replaces;
//! - the published one, which FUNCTION LIST, DUMP and STATS answer from,
//!   replaced once a change has committed (by the step the connection
//!   runs after the commit), so a client never sees a library that is not
//!   yet durable. Changes carry a sequence number so that two commits'
//!   steps running out of order still publish the newer.
//!
//! Each change first reads the stored libraries back in its transaction,
//! so it checks against what is really in the file (a group whose commit
//! failed leaves no trace there), reusing the writer's registry for the
//! functions of libraries whose code it already knows. Every change also
//! raises the libraries' generation, stored with them in the same
//! transaction; each registry knows its generation. FCALL (on the writer,
//! or FCALL_RO and `no-writes` functions on a reader) reads the stored
//! generation where it runs and uses the registry of that generation,
//! reading the libraries back when neither copy is (after a rolled-back
//! change, or in a reader's older snapshot).
//!
//! A library's code runs in a fresh function engine to be checked (its
//! header, then its code: redis's errors in redis's order); each thread's
//! own function engine, which FCALL uses, is rebuilt when the registry it
//! calls through changes. At start-up the stored libraries are read
//! and loaded (with no time limit, as redis loads them from its RDB).

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use respite_engine::{Txn, View};
use respite_script::{Engine, Function, RunOptions};

use super::common::help;
use super::scripting::{kill, running_function, Launch, ServerHost};
use crate::args::{subcommand, upper, Args};
use crate::command::call::Target;
use crate::command::{LocalCommand, Plan, Session};
use crate::error::CommandError;
use crate::reply::Reply;

/// How long FUNCTION LOAD lets a library's code run (redis's
/// `LOAD_TIMEOUT_MS`).
const LOAD_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(500);

/// redis's one engine.
const ENGINE: &str = "LUA";

/// One library: its name, its code (header included) and what it
/// registered.
#[derive(Debug, Clone)]
pub(crate) struct Library {
    name: String,
    code: Bytes,
    functions: Vec<Function>,
}

/// A set of libraries, in the order they were first loaded.
#[derive(Debug, Clone, Default)]
pub(crate) struct Registry {
    libraries: Vec<Library>,
    /// The stored libraries' generation this set is (see
    /// `View::function_generation`).
    generation: i64,
}

impl Registry {
    fn library(&self, name: &[u8]) -> Option<&Library> {
        self.libraries.iter().find(|l| l.name.as_bytes() == name)
    }

    /// The function `name` (matched without regard to case, as redis's
    /// function dictionary does) and its library.
    fn function(&self, name: &[u8]) -> Option<(&Library, &Function)> {
        self.libraries.iter().find_map(|l| {
            l.functions
                .iter()
                .find(|f| f.name.as_bytes().eq_ignore_ascii_case(name))
                .map(|f| (l, f))
        })
    }

    /// Number of functions across the libraries.
    fn function_count(&self) -> usize {
        self.libraries.iter().map(|l| l.functions.len()).sum()
    }

    /// The first of `functions` that a library other than `except` has
    /// (redis's "Function %s already exists").
    fn collision<'a>(&self, functions: &'a [Function], except: &[u8]) -> Option<&'a Function> {
        functions.iter().find(|f| {
            self.libraries
                .iter()
                .filter(|l| l.name.as_bytes() != except)
                .flat_map(|l| &l.functions)
                .any(|g| g.name.eq_ignore_ascii_case(&f.name))
        })
    }
}

/// The two registries (see the module's doc).
struct Registries {
    /// The writer's: the libraries as of the last change the writer made
    /// (which a failed commit may have taken back: its generation says).
    writer: Arc<Registry>,
    /// The published one, and the sequence number of the change that made
    /// it.
    published: Arc<Registry>,
    published_seq: u64,
}

fn registries() -> MutexGuard<'static, Registries> {
    static R: std::sync::LazyLock<Mutex<Registries>> = std::sync::LazyLock::new(|| {
        Mutex::new(Registries {
            writer: Arc::default(),
            published: Arc::default(),
            published_seq: 0,
        })
    });
    R.lock().unwrap_or_else(|p| p.into_inner())
}

/// Hands out the sequence numbers of changes (on the writer thread, so
/// in commit order).
static SEQ: AtomicU64 = AtomicU64::new(0);

/// The published libraries.
pub(crate) fn published() -> Arc<Registry> {
    registries().published.clone()
}

/// How many libraries and functions are published.
pub(crate) fn counts() -> (usize, usize) {
    let r = published();
    (r.libraries.len(), r.function_count())
}

/// The function engine's memory after its last use (INFO
/// `used_memory_vm_functions`).
static VM_BYTES: AtomicU64 = AtomicU64::new(0);

/// INFO's figures of functions: the function engine's memory, the
/// number of functions and libraries, and the bytes of the libraries'
/// code and names.
pub(crate) fn memory() -> (u64, usize, usize, usize) {
    let r = published();
    (
        VM_BYTES.load(Ordering::Relaxed),
        r.function_count(),
        r.libraries.len(),
        r.libraries
            .iter()
            .map(|l| {
                l.code.len()
                    + l.name.len()
                    + l.functions.iter().map(|f| f.name.len()).sum::<usize>()
            })
            .sum(),
    )
}

thread_local! {
    /// This thread's function engine (the writer's, or a reader's for
    /// FCALL_RO), and the registry it holds.
    static FUNCTIONS: RefCell<Option<(Arc<Registry>, Engine)>> = const { RefCell::new(None) };
}

/// A fresh function engine holding `registry`'s libraries.
fn build_engine(registry: &Registry) -> Result<Engine, String> {
    let mut engine = Engine::new_functions().map_err(|e| e.to_string())?;
    for lib in &registry.libraries {
        let header = respite_script::library_header(&lib.code)?;
        engine.load_library(&lib.code[header.code_start..], None)?;
    }
    Ok(engine)
}

/// Loads library code as FUNCTION LOAD checks it, into a fresh engine:
/// its header (name, engine), then its code; the error is redis's text
/// (without "ERR "). `timeout`: FUNCTION LOAD's limit, or none.
fn check_library(
    code: &[u8],
    timeout: Option<std::time::Duration>,
    existing: impl FnOnce(&[u8]) -> Option<String>,
) -> Result<Library, String> {
    let header = respite_script::library_header(code)?;
    if !respite_script::valid_name(&header.name) {
        return Err("Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".into());
    }
    if !header.engine.eq_ignore_ascii_case(ENGINE.as_bytes()) {
        return Err(format!(
            "Engine '{}' not found",
            String::from_utf8_lossy(&header.engine)
        ));
    }
    if let Some(e) = existing(&header.name) {
        return Err(e);
    }
    let mut engine = Engine::new_functions().map_err(|e| e.to_string())?;
    let functions = super::scripting::bounded(&mut engine, |engine| {
        engine.load_library(&code[header.code_start..], timeout)
    })?;
    if functions.is_empty() {
        return Err("No functions registered".into());
    }
    Ok(Library {
        // Checked: letters, digits and underscores.
        name: String::from_utf8_lossy(&header.name).into_owned(),
        code: Bytes::copy_from_slice(code),
        functions,
    })
}

/// The libraries stored in the file, as a registry: each library's
/// functions taken from `known` when it has the same code, else found by
/// loading the code.
fn registry_from(stored: Vec<respite_engine::StoredLibrary>, known: &Registry) -> Registry {
    let mut libraries = Vec::with_capacity(stored.len());
    for lib in stored {
        if let Some(k) = known
            .library(&lib.name)
            .filter(|k| k.code.as_ref() == lib.code.as_slice())
        {
            libraries.push(k.clone());
            continue;
        }
        match check_library(&lib.code, None, |_| None) {
            Ok(l) => libraries.push(l),
            Err(e) => tracing::warn!(
                library = %String::from_utf8_lossy(&lib.name),
                error = %e,
                "a stored function library does not load; it is left out"
            ),
        }
    }
    Registry {
        libraries,
        generation: 0,
    }
}

/// The writer's registry as of this transaction.
fn writer_registry(txn: &Txn<'_, '_>) -> Result<Registry, CommandError> {
    let stored = txn.function_libraries()?;
    let known = registries().writer.clone();
    Ok(registry_from(stored, &known))
}

/// A change to the libraries, as the writer made it: installs `registry`
/// as the writer's and hands back what the after-commit step publishes.
fn changed(registry: Registry) -> (u64, Arc<Registry>) {
    let registry = Arc::new(registry);
    let seq = SEQ.fetch_add(1, Ordering::AcqRel) + 1;
    registries().writer = registry.clone();
    (seq, registry)
}

/// The libraries as of `view` (the writer's transaction, or a reader's
/// snapshot): the writer's or the published registry when its generation
/// is the stored one, else read back from the view (after a group whose
/// change was rolled back, or on a reader whose snapshot is older than
/// the writer's registry). On the writer (`writer`), what is read back
/// becomes the writer's registry.
fn registry_at(view: &View<'_, '_>, writer: bool) -> Result<Arc<Registry>, CommandError> {
    let generation = view.function_generation()?;
    let (current, published) = {
        let r = registries();
        (r.writer.clone(), r.published.clone())
    };
    if current.generation == generation {
        return Ok(current);
    }
    if published.generation == generation {
        return Ok(published);
    }
    let mut registry = registry_from(view.function_libraries()?, &current);
    registry.generation = generation;
    let registry = Arc::new(registry);
    if writer {
        registries().writer = registry.clone();
    }
    Ok(registry)
}

/// Publishes a committed change (unless a newer one already is).
fn publish(seq: u64, registry: Arc<Registry>) {
    let mut r = registries();
    if seq > r.published_seq {
        r.published_seq = seq;
        r.published = registry;
    }
}

/// What a change made: its sequence number and the registry it leaves.
type Made = Option<(u64, Arc<Registry>)>;

/// A change's plan: `op` runs on the writer and leaves in its slot the
/// registry it made (if it changed anything); once it has committed, that
/// registry is published.
fn change_plan(op: ChangeFn) -> Plan {
    let slot: Arc<Mutex<Made>> = Arc::new(Mutex::new(None));
    let mine = slot.clone();
    let write: respite_engine::WriteOp<Reply> = Box::new(move |txn| {
        let before = txn.changes();
        match op(txn) {
            Ok((reply, registry)) => {
                if let Some(mut registry) = registry {
                    registry.generation = txn.function_generation()?;
                    *mine.lock().unwrap_or_else(|p| p.into_inner()) = Some(changed(registry));
                }
                Ok(reply)
            }
            Err(e) => crate::command::command_result(Err(e), txn, before),
        }
    });
    Plan::After(
        Some(write),
        Box::new(move |reply| {
            let reply = reply.unwrap_or(Reply::Nil);
            let made = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let (Some((seq, registry)), false) = (made, matches!(reply, Reply::Error(_))) {
                publish(seq, registry);
            }
            reply
        }),
    )
}

/// Reads the stored libraries at start-up and loads them (no time limit):
/// the writer's and the published registries start from them.
pub(crate) async fn restore_at_start(shared: &crate::Shared) {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job: respite_engine::ReadJob = Box::new(move |view: &View<'_, '_>| {
        let stored = view
            .function_libraries()
            .and_then(|l| Ok((l, view.function_generation()?)));
        Box::new(move || {
            let _ = tx.send(stored);
        })
    });
    let needs = respite_engine::ReadNeeds {
        snapshot: false,
        quick: false,
    };
    if shared.engine.submit_read(job, needs).is_err() {
        return;
    }
    let (stored, generation) = match rx.await {
        Ok(Ok(stored)) => stored,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "could not read the stored function libraries");
            return;
        }
        Err(_) => return,
    };
    if stored.is_empty() {
        return;
    }
    let mut registry =
        tokio::task::spawn_blocking(move || registry_from(stored, &Registry::default()))
            .await
            .unwrap_or_default();
    registry.generation = generation;
    tracing::info!(
        libraries = registry.libraries.len(),
        functions = registry.function_count(),
        "function libraries loaded"
    );
    let (seq, registry) = changed(registry);
    publish(seq, registry);
}

/// `FUNCTION LOAD [REPLACE] code` | `FUNCTION DELETE library` |
/// `FUNCTION FLUSH [ASYNC|SYNC]` | `FUNCTION LIST [LIBRARYNAME pattern]
/// [WITHCODE]` | `FUNCTION DUMP` | `FUNCTION RESTORE payload
/// [FLUSH|APPEND|REPLACE]` | `FUNCTION STATS` | `FUNCTION KILL` |
/// `FUNCTION HELP`
///
/// Errors redis answers when the command runs (not when it is queued in
/// a MULTI) are kept for `apply`.
pub enum FunctionCmd {
    /// Check, store and publish a library.
    Load {
        /// Whether a library of the same name is replaced.
        replace: bool,
        /// The code (with its header).
        code: Result<Bytes, CommandError>,
    },
    /// Delete a library by name.
    Delete(Bytes),
    /// Delete every library.
    Flush(Result<(), CommandError>),
    /// WITHCODE, and the LIBRARYNAME pattern.
    List(Result<(bool, Option<Bytes>), CommandError>),
    /// Every library as a payload for RESTORE.
    Dump,
    /// A DUMP payload and the policy for libraries already there.
    Restore(Result<(Bytes, Policy), CommandError>),
    /// The running function and the counts.
    Stats,
    /// Stop the running function if it has not written.
    Kill,
    /// The subcommands.
    Help,
}

/// FUNCTION RESTORE's policy for libraries already there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Add the payload's libraries; a name already there is an error.
    Append,
    /// Add them, replacing libraries of the same name.
    Replace,
    /// Delete every library first.
    Flush,
}

fn parse_load(args: &mut Args) -> (bool, Result<Bytes, CommandError>) {
    let mut rest = args.rest();
    let mut replace = false;
    let code = rest.pop();
    for option in &rest {
        if upper(option) == "REPLACE" {
            replace = true;
            continue;
        }
        return (
            replace,
            Err(CommandError::Other(format!(
                "Unknown option given: {}",
                String::from_utf8_lossy(option)
            ))),
        );
    }
    (
        replace,
        code.ok_or_else(|| CommandError::Other("Function code is missing".into())),
    )
}

fn parse_list(args: &mut Args) -> Result<(bool, Option<Bytes>), CommandError> {
    let rest = args.rest();
    let mut with_code = false;
    let mut pattern = None;
    let mut i = 0;
    while i < rest.len() {
        let arg = upper(&rest[i]);
        if !with_code && arg == "WITHCODE" {
            with_code = true;
        } else if pattern.is_none() && arg == "LIBRARYNAME" {
            i += 1;
            match rest.get(i) {
                Some(p) => pattern = Some(p.clone()),
                None => {
                    return Err(CommandError::Other(
                        "library name argument was not given".into(),
                    ))
                }
            }
        } else {
            return Err(CommandError::Other(format!(
                "Unknown argument {}",
                String::from_utf8_lossy(&rest[i])
            )));
        }
        i += 1;
    }
    Ok((with_code, pattern))
}

impl FunctionCmd {
    /// The subcommand and its arguments (FUNCTION's name already read).
    fn parse_sub(args: &mut Args) -> Result<Self, CommandError> {
        let sub = subcommand(args)?;
        Ok(match sub.name.as_str() {
            "LOAD" => {
                let (replace, code) = parse_load(args);
                FunctionCmd::Load { replace, code }
            }
            "DELETE" => FunctionCmd::Delete(args.next()?),
            "FLUSH" => {
                let rest = args.rest();
                FunctionCmd::Flush(match rest.as_slice() {
                    [] => Ok(()),
                    [m] if matches!(upper(m).as_str(), "SYNC" | "ASYNC") => Ok(()),
                    [_] => Err(CommandError::Other(
                        "FUNCTION FLUSH only supports SYNC|ASYNC option".into(),
                    )),
                    _ => Err(sub.syntax("FUNCTION")),
                })
            }
            "LIST" => FunctionCmd::List(parse_list(args)),
            "DUMP" => FunctionCmd::Dump,
            "RESTORE" => {
                let rest = args.rest();
                FunctionCmd::Restore(match rest.as_slice() {
                    [payload] => Ok((payload.clone(), Policy::Append)),
                    [payload, policy] => match upper(policy).as_str() {
                        "APPEND" => Ok((payload.clone(), Policy::Append)),
                        "REPLACE" => Ok((payload.clone(), Policy::Replace)),
                        "FLUSH" => Ok((payload.clone(), Policy::Flush)),
                        _ => Err(CommandError::Other(
                            "Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.".into(),
                        )),
                    },
                    _ => Err(sub.syntax("FUNCTION")),
                })
            }
            "STATS" => FunctionCmd::Stats,
            "KILL" => FunctionCmd::Kill,
            "HELP" => FunctionCmd::Help,
            _ => return Err(sub.unknown("FUNCTION")),
        })
    }
}

impl LocalCommand for FunctionCmd {
    fn parse(args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        FunctionCmd::parse_sub(args)
    }

    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        // LOAD and RESTORE are redis's `denyoom` subcommands: refused over
        // `maxmemory` (or `maxdisk`, or on a full disk) before they run.
        if matches!(self, FunctionCmd::Load { .. } | FunctionCmd::Restore(_)) {
            if let Some(refusal) = s.shared.engine.refusal() {
                return Err(CommandError::Engine(refusal));
            }
        }
        if matches!(self, FunctionCmd::Load { .. }) {
            super::scripting::refresh_memory_limit(&s.shared);
        }
        Ok(match self.into_change()? {
            Ok(change) => change_plan(change),
            Err(FunctionCmd::List(options)) => {
                let (with_code, pattern) = options?;
                Plan::Reply(list(&published(), with_code, pattern.as_deref()))
            }
            Err(FunctionCmd::Dump) => {
                let registry = published();
                Plan::Reply(Reply::Bulk(Bytes::from(respite_rdb::encode_functions(
                    registry.libraries.iter().map(|l| l.code.as_ref()),
                ))))
            }
            Err(FunctionCmd::Stats) => Plan::Reply(stats()?),
            Err(FunctionCmd::Kill) => Plan::Reply(kill(false)?),
            Err(FunctionCmd::Help) => Plan::Reply(help("FUNCTION", HELP)),
            // LOAD, DELETE, FLUSH and RESTORE are changes, planned above.
            Err(_) => {
                return Err(CommandError::Other(
                    "internal error: a change unplanned".into(),
                ))
            }
        })
    }
}

/// What LOAD, DELETE, FLUSH and RESTORE do on the writer: the reply, and
/// the registry the change leaves (see [`change_plan`]).
type ChangeFn =
    Box<dyn FnOnce(&mut Txn<'_, '_>) -> Result<(Reply, Option<Registry>), CommandError> + Send>;

impl FunctionCmd {
    /// The change a subcommand makes on the writer (`Ok`), or the
    /// subcommand itself if it changes nothing (`Err`); an argument error
    /// the parse kept for this point.
    fn into_change(self) -> Result<Result<ChangeFn, FunctionCmd>, CommandError> {
        Ok(Ok(match self {
            FunctionCmd::Load { replace, code } => {
                let code = code?;
                Box::new(move |txn| load(txn, code, replace))
            }
            FunctionCmd::Delete(name) => Box::new(move |txn| {
                let mut registry = writer_registry(txn)?;
                let Some(i) = registry
                    .libraries
                    .iter()
                    .position(|l| l.name.as_bytes() == name.as_ref())
                else {
                    return Err(CommandError::Other("Library not found".into()));
                };
                registry.libraries.remove(i);
                txn.function_delete(&name)?;
                Ok((Reply::Ok, Some(registry)))
            }),
            FunctionCmd::Flush(mode) => {
                mode?;
                Box::new(|txn| {
                    txn.function_clear()?;
                    Ok((Reply::Ok, Some(Registry::default())))
                })
            }
            FunctionCmd::Restore(args) => {
                let (payload, policy) = args?;
                Box::new(move |txn| restore(txn, &payload, policy))
            }
            other => return Ok(Err(other)),
        }))
    }
}

/// A change to the libraries made on the writer, to publish once its
/// transaction has committed (FUNCTION LIST, DUMP and STATS see it then).
pub(crate) struct Change(u64, Arc<Registry>);

impl Change {
    /// Publishes the change: call only once its transaction committed.
    pub(crate) fn publish(self) {
        publish(self.0, self.1);
    }
}

/// Runs, in the writer's `txn`, a FUNCTION LOAD, DELETE, FLUSH or RESTORE
/// that came in this replica's master's stream (`request`, FUNCTION
/// first), as a client's would run: stored with the data, durable with the
/// batch; the [`Change`] is to publish once the batch has committed.
/// Other subcommands change nothing and are answered as errors (a master
/// sends none).
pub(crate) fn from_master(
    txn: &mut Txn<'_, '_>,
    request: Vec<Bytes>,
) -> Result<(Reply, Option<Change>), CommandError> {
    let mut args = Args::after_name(request);
    let Ok(change) = FunctionCmd::parse_sub(&mut args)?.into_change()? else {
        return Err(CommandError::Other(
            "FUNCTION subcommand that changes nothing".into(),
        ));
    };
    let (reply, registry) = change(txn)?;
    let made = match registry {
        Some(mut registry) => {
            registry.generation = txn.function_generation()?;
            let (seq, registry) = changed(registry);
            Some(Change(seq, registry))
        }
        None => None,
    };
    Ok((reply, made))
}

/// Loads a full synchronization's libraries (each library's code, from
/// the master's RDB) in place of this server's, on the writer.
pub(crate) fn load_from_master(
    txn: &mut Txn<'_, '_>,
    codes: &[Vec<u8>],
) -> Result<Option<Change>, CommandError> {
    let payload = respite_rdb::encode_functions(codes.iter().map(|c| c.as_slice()));
    let (_, registry) = restore(txn, &payload, Policy::Flush)?;
    match registry {
        Some(mut registry) => {
            registry.generation = txn.function_generation()?;
            let (seq, registry) = changed(registry);
            Ok(Some(Change(seq, registry)))
        }
        None => Ok(None),
    }
}

/// FUNCTION LOAD on the writer.
fn load(
    txn: &mut Txn<'_, '_>,
    code: Bytes,
    replace: bool,
) -> Result<(Reply, Option<Registry>), CommandError> {
    let mut registry = writer_registry(txn)?;
    let checked = check_library(&code, Some(LOAD_TIMEOUT), |name| {
        (registry.library(name).is_some() && !replace)
            .then(|| format!("Library '{}' already exists", String::from_utf8_lossy(name)))
    });
    let library = checked.map_err(CommandError::Other)?;
    if let Some(f) = registry.collision(&library.functions, library.name.as_bytes()) {
        return Err(CommandError::Other(format!(
            "Function {} already exists",
            f.name
        )));
    }
    txn.function_put(library.name.as_bytes(), &library.code)?;
    let name = library.name.clone();
    match registry
        .libraries
        .iter()
        .position(|l| l.name == library.name)
    {
        Some(i) => registry.libraries[i] = library,
        None => registry.libraries.push(library),
    }
    Ok((Reply::bulk(name), Some(registry)))
}

/// FUNCTION RESTORE on the writer.
fn restore(
    txn: &mut Txn<'_, '_>,
    payload: &[u8],
    policy: Policy,
) -> Result<(Reply, Option<Registry>), CommandError> {
    let codes =
        respite_rdb::decode_functions(payload).map_err(|e| CommandError::Other(e.to_string()))?;
    // The payload's libraries, checked among themselves first.
    let mut incoming = Registry::default();
    for code in codes {
        let library = check_library(&code, None, |name| {
            incoming
                .library(name)
                .map(|_| format!("Library '{}' already exists", String::from_utf8_lossy(name)))
        })
        .map_err(CommandError::Other)?;
        if let Some(f) = incoming.collision(&library.functions, library.name.as_bytes()) {
            return Err(CommandError::Other(format!(
                "Function {} already exists",
                f.name
            )));
        }
        incoming.libraries.push(library);
    }
    let mut registry = writer_registry(txn)?;
    if policy == Policy::Flush {
        registry = Registry::default();
    } else {
        for lib in &incoming.libraries {
            if registry.library(lib.name.as_bytes()).is_some() {
                if policy == Policy::Append {
                    return Err(CommandError::Other(format!(
                        "Library {} already exists",
                        lib.name
                    )));
                }
                registry.libraries.retain(|l| l.name != lib.name);
            }
        }
        for lib in &incoming.libraries {
            if let Some(f) = registry.collision(&lib.functions, b"") {
                return Err(CommandError::Other(format!(
                    "Function {} already exists",
                    f.name
                )));
            }
        }
    }
    if policy == Policy::Flush {
        txn.function_clear()?;
    }
    for lib in incoming.libraries {
        txn.function_put(lib.name.as_bytes(), &lib.code)?;
        registry.libraries.retain(|l| l.name != lib.name);
        registry.libraries.push(lib);
    }
    // A library replaced here keeps its place in the file's order; the
    // registry follows the file.
    let stored = txn.function_libraries()?;
    let registry = registry_from(stored, &registry);
    Ok((Reply::Ok, Some(registry)))
}

/// FUNCTION LIST's reply.
fn list(registry: &Registry, with_code: bool, pattern: Option<&[u8]>) -> Reply {
    let pattern = pattern.map(|p| p.to_ascii_lowercase());
    Reply::Array(
        registry
            .libraries
            .iter()
            .filter(|l| {
                pattern.as_ref().is_none_or(|p| {
                    respite_engine::glob::glob_match(p, &l.name.to_ascii_lowercase().into_bytes())
                })
            })
            .map(|l| {
                let mut fields = vec![
                    (Reply::bulk("library_name"), Reply::bulk(l.name.clone())),
                    (Reply::bulk("engine"), Reply::bulk(ENGINE)),
                    (
                        Reply::bulk("functions"),
                        Reply::Array(
                            l.functions
                                .iter()
                                .map(|f| {
                                    Reply::Map(vec![
                                        (Reply::bulk("name"), Reply::bulk(f.name.clone())),
                                        (
                                            Reply::bulk("description"),
                                            f.description
                                                .as_ref()
                                                .map_or(Reply::Nil, |d| Reply::bulk(d.clone())),
                                        ),
                                        (Reply::bulk("flags"), flags_reply(f)),
                                    ])
                                })
                                .collect(),
                        ),
                    ),
                ];
                if with_code {
                    fields.push((Reply::bulk("library_code"), Reply::Bulk(l.code.clone())));
                }
                Reply::Map(fields)
            })
            .collect(),
    )
}

/// A function's flags as FUNCTION LIST gives them: a set of statuses,
/// in redis's order.
fn flags_reply(f: &Function) -> Reply {
    let flags = f.flags;
    let names = [
        (flags.no_writes, "no-writes"),
        (flags.allow_oom, "allow-oom"),
        (flags.allow_stale, "allow-stale"),
        (flags.no_cluster, "no-cluster"),
        (flags.allow_cross_slot_keys, "allow-cross-slot-keys"),
    ];
    Reply::Set(
        names
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, n)| Reply::Simple(n))
            .collect(),
    )
}

/// FUNCTION STATS's reply.
fn stats() -> Result<Reply, CommandError> {
    let running =
        running_function().map_err(|()| CommandError::Raw(super::scripting::BUSY_SCRIPT.into()))?;
    let running = match running {
        None => Reply::Nil,
        Some((name, command, ms)) => Reply::Map(vec![
            (Reply::bulk("name"), Reply::bulk(name)),
            (
                Reply::bulk("command"),
                Reply::Array(command.into_iter().map(Reply::Bulk).collect()),
            ),
            (Reply::bulk("duration_ms"), Reply::Int(ms as i64)),
        ]),
    };
    let (libraries, functions) = counts();
    Ok(Reply::Map(vec![
        (Reply::bulk("running_script"), running),
        (
            Reply::bulk("engines"),
            Reply::Map(vec![(
                Reply::bulk(ENGINE),
                Reply::Map(vec![
                    (Reply::bulk("libraries_count"), Reply::Int(libraries as i64)),
                    (Reply::bulk("functions_count"), Reply::Int(functions as i64)),
                ]),
            )]),
        ),
    ]))
}

const HELP: &[&str] = &[
    "LOAD [REPLACE] <FUNCTION CODE>",
    "    Create a new library with the given library name and code.",
    "DELETE <LIBRARY NAME>",
    "    Delete the given library.",
    "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
    "    Return general information on all the libraries:",
    "    * Library name",
    "    * The engine used to run the Library",
    "    * Library description",
    "    * Functions list",
    "    * Library code (if WITHCODE is given)",
    "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
    "STATS",
    "    Return information about the current function running:",
    "    * Function name",
    "    * Command used to run the function",
    "    * Duration in MS that the function is running",
    "    If no function is running, return nil",
    "    In addition, returns a list of available engines.",
    "KILL",
    "    Kill the current running function.",
    "FLUSH [ASYNC|SYNC]",
    "    Delete all the libraries.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the libraries.",
    "    * SYNC: Synchronously flush the libraries.",
    "DUMP",
    "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
    "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
    "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
    "    control how to handle existing libraries (default APPEND):",
    "    * FLUSH: delete all existing libraries.",
    "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
    "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
    "      libraries with the new libraries (notice that even on this option there is a chance of failure",
    "      in case of functions name collision with another library).",
];

/// `FCALL function numkeys [key ...] [arg ...]` and `FCALL_RO`.
pub struct Fcall {
    command: Vec<Bytes>,
    read_only: bool,
}

impl Fcall {
    /// Plans the call where the function runs: FCALL_RO and a
    /// `no-writes` function on the read pool, any other on the writer
    /// (the function's flags and code as the writer's registry has them
    /// now; the call itself finds the function again where it runs).
    fn plan(self, s: &mut Session) -> Plan {
        let ro = self.read_only;
        let command = self.command;
        let (no_writes, publishes, name) = {
            let registry = registries().writer.clone();
            match command.get(1).and_then(|n| registry.function(n)) {
                Some((library, function)) => {
                    if let Err(e) = super::scripting::refuse_before_run(s, &function.flags) {
                        return Plan::Reply(e.into());
                    }
                    (
                        function.flags.no_writes,
                        super::scripting::may_publish(&library.code),
                        function.name.clone(),
                    )
                }
                None => (false, false, String::new()),
            }
        };
        let keys = command
            .get(2)
            .and_then(|n| std::str::from_utf8(n).ok()?.parse::<usize>().ok())
            .and_then(|n| command.get(3..3usize.checked_add(n)?))
            .map(<[Bytes]>::to_vec)
            .unwrap_or_default();
        let launch = Launch {
            eval: false,
            name,
            command: command.clone(),
            read_only: ro || no_writes,
            may_publish: publishes,
            keys,
        };
        launch.plan(s, move |host| fcall(host, command, ro))
    }
}

/// FCALL where it runs (the writer, or a reader for a read-only call):
/// finds the function in the libraries as of there (redis's checks in
/// redis's order), then runs it in this thread's function engine.
fn fcall(
    host: &mut ServerHost<'_, '_, '_, '_>,
    command: Vec<Bytes>,
    ro: bool,
) -> Result<Reply, CommandError> {
    let registry = match &host.target {
        Target::Writer(txn) => registry_at(txn, true)?,
        Target::Reader(view) => registry_at(view, false)?,
    };
    let Some((_, function)) = registry.function(&command[1]) else {
        return Err(CommandError::Other("Function not found".into()));
    };
    let numkeys = crate::args::parse_i64(&command[2])
        .ok_or_else(|| CommandError::Other("Bad number of keys provided".into()))?;
    let given = command.len() as i64 - 3;
    if numkeys > given {
        return Err(CommandError::Other(
            "Number of keys can't be greater than number of args".into(),
        ));
    } else if numkeys < 0 {
        return Err(CommandError::Other(
            "Number of keys can't be negative".into(),
        ));
    }
    if ro && !function.flags.no_writes {
        return Err(CommandError::Other(
            "Can not execute a script with write flag using *_ro command.".into(),
        ));
    }
    if matches!(host.target, Target::Writer(_)) && function.flags.no_writes {
        // Planned for the writer before the library changed: run it as the
        // read-only function it now is.
        host.read_only = true;
    }
    host.ctx.allow_oom = function.flags.allow_oom;
    let name = function.name.clone();
    let split = 3 + numkeys as usize;
    let keys: Vec<&[u8]> = command[3..split].iter().map(|k| k.as_ref()).collect();
    let args: Vec<&[u8]> = command[split..].iter().map(|a| a.as_ref()).collect();
    let value = FUNCTIONS.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot
            .as_ref()
            .is_none_or(|(r, _)| !Arc::ptr_eq(r, &registry))
        {
            *slot = Some((registry.clone(), build_engine(&registry)?));
        }
        match slot.as_mut() {
            Some((_, engine)) => {
                let v = super::scripting::bounded(engine, |engine| {
                    engine.call_function(&name, &keys, &args, host, RunOptions::default())
                });
                VM_BYTES.store(engine.used_memory() as u64, Ordering::Relaxed);
                Ok(v)
            }
            None => Err("function engine unavailable".to_string()),
        }
    });
    match value {
        Ok(v) => Ok(host.reply(v)),
        Err(e) => Err(CommandError::Other(e)),
    }
}

macro_rules! fcall_command {
    ($name:ident, $ro:expr, $doc:literal) => {
        #[doc = $doc]
        pub struct $name(Fcall);

        impl LocalCommand for $name {
            fn parse(args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
                let name = args.name();
                let mut command = vec![if name.is_empty() {
                    Bytes::from_static(if $ro { b"fcall_ro" } else { b"fcall" })
                } else {
                    Bytes::copy_from_slice(name)
                }];
                command.extend(args.rest());
                Ok($name(Fcall {
                    command,
                    read_only: $ro,
                }))
            }
            fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
                Ok(self.0.plan(s))
            }
        }
    };
}

fcall_command!(
    FcallCmd,
    false,
    "`FCALL function numkeys [key ...] [arg ...]`"
);
fcall_command!(
    FcallRoCmd,
    true,
    "`FCALL_RO function numkeys [key ...] [arg ...]`"
);

/// This family's rows of the command table (see [`crate::command::table`]).
#[rustfmt::skip]
pub(crate) fn commands() -> Vec<crate::command::Spec> {
    use crate::command::Spec;
    vec![
        Spec::local::<FcallCmd>("fcall"),
        Spec::local::<FcallRoCmd>("fcall_ro"),
        Spec::local::<FunctionCmd>("function")
            .with_subcommands("FUNCTION", &["delete", "dump", "flush", "help", "kill", "list", "load", "restore", "stats"]),
    ]
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use respite_engine::{EngineError, Txn, WriteItem, WriteOp};

    use super::*;

    /// Runs `ops` as one group on the writer; answers each one's result
    /// as the writer delivered it.
    fn group(session: &Session, ops: Vec<WriteOp<Reply>>) -> Vec<Result<Reply, String>> {
        let (tx, rx) = mpsc::channel();
        let item = WriteItem {
            ops,
            done: Box::new(move |results| {
                let _ = tx.send(
                    results
                        .into_iter()
                        .map(|r| r.map_err(|e| e.to_string()))
                        .collect::<Vec<_>>(),
                );
            }),
        };
        assert!(session.shared.engine.submit_write(item).is_ok());
        rx.recv().expect("the group ran")
    }

    /// A FUNCTION LOAD whose group is rolled back leaves no trace where
    /// FCALL looks (the writer's registry is checked against the stored
    /// generation), while one that commits is found.
    #[test]
    fn a_rolled_back_load_is_not_called() {
        let dir = tempfile::tempdir().expect("tempdir");
        let session = crate::command::session::test_session(dir.path());
        let load_op = |code: &'static str| {
            let Plan::After(Some(op), _) = change_plan(Box::new(move |txn| {
                load(txn, Bytes::from_static(code.as_bytes()), false)
            })) else {
                panic!("FUNCTION LOAD plans a write");
            };
            op
        };
        let poison: WriteOp<Reply> = Box::new(|txn: &mut Txn<'_, '_>| {
            txn.function_put(b"other", b"#!lua name=other\n")?;
            Err(EngineError::Internal("fails after writing".into()))
        });
        let results = group(
            &session,
            vec![
                load_op("#!lua name=gone\nredis.register_function('f1', function() return 1 end)"),
                poison,
            ],
        );
        assert!(
            results.iter().all(|r| r.is_err()),
            "the group rolls back: {results:?}"
        );
        let find = |name: &'static str| -> WriteOp<Reply> {
            Box::new(move |txn: &mut Txn<'_, '_>| {
                let registry =
                    registry_at(txn, true).map_err(|e| EngineError::Internal(e.to_string()))?;
                Ok(Reply::Int(
                    registry.function(name.as_bytes()).is_some() as i64
                ))
            })
        };
        assert_eq!(group(&session, vec![find("f1")]), vec![Ok(Reply::Int(0))]);
        let results = group(
            &session,
            vec![
                load_op("#!lua name=kept\nredis.register_function('f2', function() return 2 end)"),
                find("f2"),
            ],
        );
        assert_eq!(results[1], Ok(Reply::Int(1)));
        assert_eq!(group(&session, vec![find("f2")]), vec![Ok(Reply::Int(1))]);
        assert_eq!(group(&session, vec![find("f1")]), vec![Ok(Reply::Int(0))]);
    }
}

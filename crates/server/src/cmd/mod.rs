//! The command table, and how a parsed command becomes work.
//!
//! Every command is a struct with a doc comment giving its Redis syntax, a
//! `parse` step that turns the arguments into the struct (all syntax and
//! argument errors are found here, on the connection's task, before anything
//! is queued), and an `apply` step. Which trait a command implements says
//! where `apply` runs:
//!
//! - [`ReadCommand`]: on the read pool, against a fresh read-only snapshot;
//! - [`WriteCommand`]: on the writer thread, inside the current group commit
//!   (so commands that read before they write see every earlier write);
//! - [`LocalCommand`]: right on the connection, for commands about the
//!   connection or server rather than the data (PING, SELECT, CLIENT, CONFIG).
//!
//! Both data traits answer with the same error enum, [`CommandError`]
//! (which carries the engine's [`EngineError`]), so a command's failures
//! read the same whichever side it runs on.
//!
//! The families live one per file: [`strings`], [`bitmaps`], [`hashes`],
//! [`sets`], [`lists`], [`zsets`], [`sort`], [`keys`], [`connection`], [`server`],
//! [`client`], [`introspection`], [`config`], [`info`], [`slowlog`],
//! [`memory`], [`monitor`], [`replication`], [`transactions`]; [`meta`] holds redis's description of
//! every command (COMMAND INFO and DOCS, ACL categories). Each exports its own rows of the command table
//! (`commands()`), next to the code they name; [`TABLE`] gathers them
//! once, at start-up, and sorts them by name
//! for lookups. A row is made by the trait's own constructor
//! ([`Spec::read`], [`Spec::write`], [`Spec::local`]), so whether a command
//! reads or writes (its `readonly` or `write` flag, and where it runs) is
//! never written down twice.

pub mod acl;
pub mod bitmaps;
pub mod client;
pub mod config;
pub mod connection;
pub mod hashes;
pub mod info;
pub mod introspection;
pub mod keys;
pub mod lists;
pub mod memory;
pub mod meta;
pub mod monitor;
pub mod pubsub;
pub mod replication;
pub mod server;
pub mod sets;
pub mod slowlog;
pub mod sort;
pub mod strings;
pub mod transactions;
pub mod zsets;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use respite_engine::{EngineError, Txn, View, WriteOp};

use crate::args::{upper, Args};
use crate::error::{c_str, CommandError, Lossy};
use crate::reply::Reply;
use crate::state::{ClientHandle, Shared};

/// A read, to run on the read pool.
pub type ReadFn = Box<dyn FnOnce(&View<'_, '_>) -> Reply + Send>;

/// What the connection loop does with a parsed command.
pub enum Plan {
    /// Already answered.
    Reply(Reply),
    /// Answer, then close the connection (QUIT).
    ReplyAndClose(Reply),
    /// Close the connection without a reply (SHUTDOWN).
    Close,
    /// Run on the read pool.
    Read(ReadFn, ReadNeeds),
    /// Run on the writer.
    Write(WriteOp<Reply>),
    /// A blocking command (BLPOP...): tried on the writer, then waited on
    /// until a push serves it or it times out (see `crate::blocking`).
    Block(std::sync::Arc<dyn crate::blocking::Blocker>),
    /// A GET or MGET: answered from the engine's value cache when it holds
    /// the keys and this connection has no write in flight, else run on the
    /// read pool like any read.
    Cached(strings::Cached),
    /// A step run on the connection once this connection's earlier writes
    /// (and the write given, if any) have committed; it gets that write's
    /// reply. PUBLISH, so that a subscriber reading on receipt sees what
    /// was written before it; EXEC holding a PUBLISH, whose messages go
    /// out once the transaction has committed.
    After(Option<WriteOp<Reply>>, AfterFn),
}

/// What [`Plan::After`] runs.
pub type AfterFn = Box<dyn FnOnce(Option<Reply>) -> Reply + Send>;

/// The most commands (or MGET keys) a read job may hold and still count as
/// quick: a reader may hold a quick job's result back while it runs up to
/// 63 more, so each must be short.
pub const QUICK_READ_LIMIT: usize = 64;

/// What a read asks of the read pool (the engine's type, end to end).
pub use respite_engine::ReadNeeds;

/// Per-connection state commands can see and change.
pub struct Session {
    /// Shared server state.
    pub shared: Arc<Shared>,
    /// This client's registry entry.
    pub client: Arc<ClientHandle>,
    /// Selected database.
    pub db: u32,
    /// Speaking RESP3 (after HELLO 3)?
    pub resp3: bool,
    /// Passed AUTH (always true when no password is set).
    pub authenticated: bool,
    /// The commands queued since MULTI, while a transaction is open.
    pub multi: Option<transactions::Queue>,
    /// The keys this connection WATCHes.
    pub watched: transactions::WatchList,
    /// The ACL user it runs as.
    pub acl: crate::acl::SessionAcl,
}

impl Session {
    /// Whether this client's reads count as accesses: not in CLIENT
    /// NO-TOUCH mode.
    pub fn touches(&self) -> bool {
        !self
            .client
            .state
            .no_touch
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// A new connection's session: database 0, RESP2, no transaction, the
    /// `default` user; authenticated unless that user needs a password.
    pub fn new(shared: Arc<Shared>, client: Arc<ClientHandle>) -> Session {
        Session {
            authenticated: shared.acl.default_user_open(),
            acl: crate::acl::SessionAcl::default_user(&shared),
            shared,
            client,
            db: 0,
            resp3: false,
            multi: None,
            watched: Default::default(),
        }
    }
}

/// Whether a read command's lookups of existing keys count as accesses
/// (OBJECT IDLETIME and FREQ; see the engine's `access.rs`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Touching {
    /// They do, unless the client is in CLIENT NO-TOUCH mode.
    Yes,
    /// Never: redis's `LOOKUP_NOTOUCH` commands (TYPE, EXISTS, TTL and
    /// its kin, OBJECT), which look at a key without using it.
    Never,
    /// Always, even in NO-TOUCH mode: TOUCH, whose whole point it is.
    Always,
}

/// A command whose `apply` reads the keyspace on the read pool.
pub trait ReadCommand: Sized + Send + 'static {
    /// Whether `apply` runs more than one statement and needs them to see
    /// one snapshot (MGET, EXISTS with several keys).
    const MULTI_STATEMENT: bool = false;
    /// Whether it reads a bounded amount: some keys by name, not the whole
    /// keyspace (see [`ReadNeeds::quick`]).
    const QUICK: bool = false;
    /// Whether its lookups count as accesses.
    const TOUCHING: Touching = Touching::Yes;
    /// Whether this command, as parsed, reads a bounded amount: `QUICK`,
    /// unless its arguments make it long (an EXISTS of a million keys, an
    /// LRANGE of a whole list). A quick job's result may wait for the
    /// quick jobs after it (see [`ReadNeeds::quick`]), so a long one must
    /// not pass for quick.
    fn is_quick(&self) -> bool {
        Self::QUICK
    }
    /// Parses the arguments (after the command name).
    fn parse(args: &mut Args, session: &Session) -> Result<Self, CommandError>;
    /// Runs against a read snapshot.
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError>;
}

/// A command whose `apply` changes the keyspace on the writer thread.
pub trait WriteCommand: Sized + Send + 'static {
    /// Parses the arguments (after the command name).
    fn parse(args: &mut Args, session: &Session) -> Result<Self, CommandError>;
    /// Runs inside the current group commit. An error found before the
    /// first write is this command's reply alone; one after it (only a
    /// storage failure) takes the whole group back (see the engine's
    /// `txn.rs`).
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError>;
}

/// A command that may block the client (BLPOP and friends): parsed like
/// any command, then blocked on by the connection (see `crate::blocking`)
/// or, inside EXEC, tried once.
pub trait BlockingCommand: crate::blocking::Blocker + Sized {
    /// Parses the arguments (after the command name).
    fn parse(args: &mut Args, session: &Session) -> Result<Self, CommandError>;
}

/// A command answered on the connection itself.
pub trait LocalCommand: Sized {
    /// Parses the arguments (after the command name).
    fn parse(args: &mut Args, session: &Session) -> Result<Self, CommandError>;
    /// Runs, possibly changing the session.
    fn apply(self, session: &mut Session) -> Result<Plan, CommandError>;
}

/// Parses the whole argument list, refusing leftovers.
fn parse_all<C>(
    mut args: Args,
    session: &Session,
    parse: impl FnOnce(&mut Args, &Session) -> Result<C, CommandError>,
) -> Result<C, CommandError> {
    let cmd = parse(&mut args, session)?;
    if args.remaining() > 0 {
        return Err(CommandError::Syntax);
    }
    Ok(cmd)
}

/// A parsed read command as a job for the read pool, with what it needs,
/// for the client of `session`.
pub(crate) fn read_job<C: ReadCommand>(cmd: C, session: &Session) -> (ReadFn, ReadNeeds) {
    read_job_touching(cmd, session.touches())
}

/// [`read_job`] for a client that is (`touches`) or is not in CLIENT
/// NO-TOUCH mode.
pub(crate) fn read_job_touching<C: ReadCommand>(cmd: C, touches: bool) -> (ReadFn, ReadNeeds) {
    let needs = ReadNeeds {
        snapshot: C::MULTI_STATEMENT,
        quick: cmd.is_quick(),
    };
    let touch = match C::TOUCHING {
        Touching::Yes => touches,
        Touching::Never => false,
        Touching::Always => true,
    };
    (
        Box::new(move |view| {
            view.set_touch(touch);
            cmd.apply(view).unwrap_or_else(Reply::from)
        }),
        needs,
    )
}

fn plan_read<C: ReadCommand>(s: &mut Session, args: Args) -> Result<Plan, CommandError> {
    let cmd = parse_all(args, s, C::parse)?;
    let (f, needs) = read_job(cmd, s);
    Ok(Plan::Read(f, needs))
}

fn plan_get(s: &mut Session, args: Args) -> Result<Plan, CommandError> {
    let get = parse_all(args, s, strings::Get::parse)?;
    Ok(Plan::Cached(strings::Cached::Get(get)))
}

fn plan_mget(s: &mut Session, args: Args) -> Result<Plan, CommandError> {
    let mget = parse_all(args, s, strings::MGet::parse)?;
    Ok(Plan::Cached(strings::Cached::MGet(mget)))
}

fn plan_write<C: WriteCommand>(s: &mut Session, args: Args) -> Result<Plan, CommandError> {
    let cmd = parse_all(args, s, C::parse)?;
    Ok(Plan::Write(write_op(cmd)))
}

/// A parsed write command as an operation for the writer. The writer needs
/// to know of failures (a failure after the first write rolls the group
/// back); a command's own error before it wrote is just its reply.
pub(crate) fn write_op<C: WriteCommand>(cmd: C) -> WriteOp<Reply> {
    Box::new(move |txn| {
        let before = txn.changes();
        let result = cmd.apply(txn);
        command_result(result, txn, before)
    })
}

/// A command's result as the writer takes it. An engine error goes back
/// as one: the writer (or EXEC) answers it, and takes the group back if
/// the operation wrote. Any other error is the command's reply if the
/// command changed nothing since `before` (its [`Txn::changes`] when it
/// started; inside EXEC earlier commands may have written), else the group
/// cannot be trusted and goes back.
pub(crate) fn command_result(
    result: Result<Reply, CommandError>,
    txn: &Txn<'_, '_>,
    before: u64,
) -> respite_engine::Result<Reply> {
    match result {
        Ok(reply) => Ok(reply),
        Err(CommandError::Engine(e)) => Err(e),
        Err(e) if txn.changes() == before => Ok(Reply::from(e)),
        Err(e) => Err(EngineError::Internal(e.to_string())),
    }
}

fn plan_block<C: BlockingCommand>(s: &mut Session, args: Args) -> Result<Plan, CommandError> {
    let cmd = parse_all(args, s, C::parse)?;
    Ok(Plan::Block(std::sync::Arc::new(cmd)))
}

fn plan_local<C: LocalCommand>(s: &mut Session, args: Args) -> Result<Plan, CommandError> {
    let cmd = parse_all(args, s, C::parse)?;
    cmd.apply(s)
}

/// A row's plan: parse, then say where the command runs (or run it, for a
/// local command).
type PlanFn = fn(&mut Session, Args) -> Result<Plan, CommandError>;

/// The parse step of a row alone: what [`parse_only`] runs. A local
/// command's plan runs it at once (CONFIG SET, SHUTDOWN), so the parse
/// needs a way in of its own; the others get one for uniformity.
type ParseFn = fn(&Session, Args) -> Result<(), CommandError>;

fn parse_read<C: ReadCommand>(s: &Session, args: Args) -> Result<(), CommandError> {
    parse_all(args, s, C::parse).map(drop)
}

fn parse_write<C: WriteCommand>(s: &Session, args: Args) -> Result<(), CommandError> {
    parse_all(args, s, C::parse).map(drop)
}

fn parse_block<C: BlockingCommand>(s: &Session, args: Args) -> Result<(), CommandError> {
    parse_all(args, s, C::parse).map(drop)
}

fn parse_local<C: LocalCommand>(s: &Session, args: Args) -> Result<(), CommandError> {
    parse_all(args, s, C::parse).map(drop)
}

/// Where a command's `apply` runs, as the trait it implements says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// A [`ReadCommand`]: on the read pool (flag `readonly`).
    Read,
    /// A [`WriteCommand`]: on the writer (flag `write`).
    Write,
    /// A [`LocalCommand`]: on the connection.
    Local,
}

/// One row of the command table.
pub struct Spec {
    /// Lower-case name.
    pub name: &'static str,
    /// Redis arity: exact count including the name if positive, minimum if
    /// negative.
    pub arity: i32,
    /// Which trait the command implements.
    pub access: Access,
    /// COMMAND INFO flags besides `readonly`/`write` (which come from
    /// `access`).
    pub extra_flags: &'static [&'static str],
    /// Position of the first key argument (0: none).
    pub first_key: i32,
    /// Position of the last key (-1: the last argument).
    pub last_key: i32,
    /// Step between keys.
    pub step: i32,
    /// ACL category / COMMAND DOCS group.
    pub group: &'static str,
    /// One-line summary for COMMAND DOCS.
    pub summary: &'static str,
    /// Parses and plans the command.
    pub plan: fn(&mut Session, Args) -> Result<Plan, CommandError>,
    /// Only parses it (see [`parse_only`]).
    parse: ParseFn,
    /// For a container command whose subcommands Redis checks before
    /// queueing (OBJECT): its upper-case name and each subcommand's arity.
    pub subcommands: Option<(&'static str, &'static [(&'static str, i32)])>,
}

impl Spec {
    // One argument per column of the row: the table reads best this way.
    #[allow(clippy::too_many_arguments)]
    fn row(
        name: &'static str,
        arity: i32,
        access: Access,
        extra_flags: &'static [&'static str],
        keys: [i32; 3],
        group: &'static str,
        summary: &'static str,
        (plan, parse): (PlanFn, ParseFn),
    ) -> Spec {
        Spec {
            name,
            arity,
            access,
            extra_flags,
            first_key: keys[0],
            last_key: keys[1],
            step: keys[2],
            group,
            summary,
            plan,
            parse,
            subcommands: None,
        }
    }

    /// The same row, with subcommands whose names and arities are checked
    /// with the command's own (so inside MULTI too, as in Redis).
    pub(crate) fn with_subcommands(
        self,
        upper: &'static str,
        subs: &'static [(&'static str, i32)],
    ) -> Spec {
        Spec {
            subcommands: Some((upper, subs)),
            ..self
        }
    }

    /// The row of a [`ReadCommand`]: `keys` is first key, last key, step.
    pub(crate) fn read<C: ReadCommand>(
        name: &'static str,
        arity: i32,
        flags: &'static [&'static str],
        keys: [i32; 3],
        group: &'static str,
        summary: &'static str,
    ) -> Spec {
        Spec::row(
            name,
            arity,
            Access::Read,
            flags,
            keys,
            group,
            summary,
            (plan_read::<C>, parse_read::<C>),
        )
    }

    /// The row of a [`WriteCommand`].
    pub(crate) fn write<C: WriteCommand>(
        name: &'static str,
        arity: i32,
        flags: &'static [&'static str],
        keys: [i32; 3],
        group: &'static str,
        summary: &'static str,
    ) -> Spec {
        Spec::row(
            name,
            arity,
            Access::Write,
            flags,
            keys,
            group,
            summary,
            (plan_write::<C>, parse_write::<C>),
        )
    }

    /// The row of a [`BlockingCommand`]: a write that may block.
    pub(crate) fn blocking<C: BlockingCommand>(
        name: &'static str,
        arity: i32,
        flags: &'static [&'static str],
        keys: [i32; 3],
        group: &'static str,
        summary: &'static str,
    ) -> Spec {
        Spec::row(
            name,
            arity,
            Access::Write,
            flags,
            keys,
            group,
            summary,
            (plan_block::<C>, parse_block::<C>),
        )
    }

    /// The row of a [`LocalCommand`].
    pub(crate) fn local<C: LocalCommand>(
        name: &'static str,
        arity: i32,
        flags: &'static [&'static str],
        keys: [i32; 3],
        group: &'static str,
        summary: &'static str,
    ) -> Spec {
        Spec::row(
            name,
            arity,
            Access::Local,
            flags,
            keys,
            group,
            summary,
            (plan_local::<C>, parse_local::<C>),
        )
    }

    /// The same row, planned by `plan` (GET and MGET, which may be answered
    /// from the value cache).
    pub(crate) fn planned_by(
        self,
        plan: fn(&mut Session, Args) -> Result<Plan, CommandError>,
    ) -> Spec {
        Spec { plan, ..self }
    }

    /// Every COMMAND INFO flag, `readonly` or `write` first.
    pub fn flags(&self) -> impl Iterator<Item = &'static str> + '_ {
        let access = match self.access {
            Access::Read => Some("readonly"),
            Access::Write => Some("write"),
            Access::Local => None,
        };
        access.into_iter().chain(self.extra_flags.iter().copied())
    }

    /// Whether the command has the flag.
    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags().any(|f| f == flag)
    }
}

/// The command table: every family's rows, sorted by name once at
/// start-up, with the rows the connection's fast paths use.
pub struct Table {
    specs: Vec<Spec>,
    /// GET's row, for the fast path.
    pub get: Option<usize>,
    /// SET's row, for the fast path.
    pub set: Option<usize>,
}

impl Table {
    fn build() -> Table {
        let mut specs: Vec<Spec> = [
            acl::commands(),
            bitmaps::commands(),
            client::commands(),
            config::commands(),
            connection::commands(),
            hashes::commands(),
            info::commands(),
            introspection::commands(),
            keys::commands(),
            lists::commands(),
            memory::commands(),
            monitor::commands(),
            pubsub::commands(),
            replication::commands(),
            server::commands(),
            sets::commands(),
            slowlog::commands(),
            sort::commands(),
            strings::commands(),
            transactions::commands(),
            zsets::commands(),
        ]
        .into_iter()
        .flatten()
        .collect();
        specs.sort_by_key(|s| s.name);
        let position = |name: &str| specs.iter().position(|s| s.name == name);
        let (get, set) = (position("get"), position("set"));
        Table { specs, get, set }
    }
}

impl std::ops::Deref for Table {
    type Target = [Spec];
    fn deref(&self) -> &[Spec] {
        &self.specs
    }
}

/// Every command respite knows, in alphabetical order.
pub static TABLE: std::sync::LazyLock<Table> = std::sync::LazyLock::new(Table::build);

/// Finds a command by name, case-insensitively.
pub fn lookup(name: &[u8]) -> Option<&'static Spec> {
    lookup_index(name).map(|i| &TABLE[i])
}

/// The command's row number in [`TABLE`]. Compares case-insensitively
/// without allocating: this runs for every request.
pub fn lookup_index(name: &[u8]) -> Option<usize> {
    TABLE
        .binary_search_by(|s| {
            let lower = name.iter().map(u8::to_ascii_lowercase);
            s.name.as_bytes().iter().copied().cmp(lower)
        })
        .ok()
}

/// Redis's "unknown command" error, quoting at most 128 bytes of arguments.
/// Formatted as Redis's `'%.*s'` does, so each name and argument stops at
/// a NUL byte.
fn unknown_command(request: &[Bytes]) -> CommandError {
    let name = c_str(&request[0]);
    let name = name[..name.len().min(128)].to_vec();
    let mut args = Vec::new();
    for a in &request[1..] {
        if args.len() >= 128 {
            break;
        }
        let room = 128 - args.len();
        let a = c_str(a);
        args.push(b'\'');
        args.extend_from_slice(&a[..a.len().min(room)]);
        args.extend_from_slice(b"' ");
    }
    CommandError::UnknownCommand {
        name: Lossy(name),
        args: Lossy(args),
    }
}

/// Turns one request into a plan: looks the command up, checks arity and
/// authentication, and parses it.
pub fn dispatch(session: &mut Session, request: Vec<Bytes>) -> Plan {
    session.acl.refresh(&session.shared);
    let reply_mode = client::reply_mode(&session.client.state);
    let plan = dispatch_inner(session, request);
    client::note_multi(
        &session.client.state,
        session.multi.as_ref().map(|q| (q.len(), q.mem())),
    );
    if reply_mode == 0 && session.client.state.replies_on() {
        return plan;
    }
    // CLIENT REPLY OFF or SKIP is (or was just) in force.
    client::silence_if_asked(&session.client.state, reply_mode, plan)
}

fn dispatch_inner(session: &mut Session, request: Vec<Bytes>) -> Plan {
    let planned = if session.multi.is_some() {
        transactions::queue(session, request)
    } else {
        try_dispatch(session, request)
    };
    match planned {
        Ok(plan) => plan,
        Err(e) => {
            let reply = Reply::from(e);
            if let Reply::Error(text) = &reply {
                session.shared.stats.error(text);
            }
            Plan::Reply(reply)
        }
    }
}

/// Checks and plans a command; its call is counted where it runs (see
/// `crate::stats`), a refusal by `check` against the command at once.
fn try_dispatch(session: &mut Session, request: Vec<Bytes>) -> Result<Plan, CommandError> {
    let found = lookup_index(&request[0]);
    let (index, spec) = check(session, &request, found)
        .inspect_err(|e| {
            if let (Some(index), false) =
                (found, matches!(e, CommandError::UnknownSubcommand { .. }))
            {
                let stats = &session.shared.stats;
                stats.rejected(stats.row_of(index, request.get(1).map(|b| &b[..])));
            }
        })
        .map_err(|e| match found {
            Some(i) if TABLE[i].name == "exec" => transactions::exec_abort(e),
            _ => e,
        })?;
    session.client.last_cmd.store(index, Ordering::Relaxed);
    let mut tracking = crate::stats::Tracking::new(session, index, &request);
    let started = std::time::Instant::now();
    let mut args = request.into_iter();
    args.next();
    let plan = (spec.plan)(session, Args::new(args)).unwrap_or_else(|e| Plan::Reply(e.into()));
    // MONITOR shows the database as it is after the command (SELECT's).
    tracking.set_db(session.db);
    Ok(crate::stats::track(plan, started, tracking))
}

/// What can be refused without running the command: an unknown name, no
/// authentication, a wrong number of arguments, an ACL refusal. (Inside MULTI these doom
/// the transaction; everything else is found when it runs.)
pub(crate) fn check(
    session: &Session,
    request: &[Bytes],
    found: Option<usize>,
) -> Result<(usize, &'static Spec), CommandError> {
    let Some(index) = found else {
        if !session.authenticated {
            return Err(CommandError::NoAuth);
        }
        return Err(unknown_command(request));
    };
    let spec = &TABLE[index];
    let argc = request.len() as i32;
    if !session.authenticated && !spec.has_flag("no_auth") {
        return Err(CommandError::NoAuth);
    }
    if (spec.arity > 0 && argc != spec.arity) || argc < -spec.arity {
        return Err(CommandError::WrongArity(spec.name.to_string()));
    }
    if let (Some((upper, subs)), Some(sub)) = (spec.subcommands, request.get(1)) {
        let Some((name, arity)) = subs
            .iter()
            .find(|(n, _)| n.as_bytes().eq_ignore_ascii_case(sub))
        else {
            return Err(CommandError::UnknownSubcommand {
                cmd: upper,
                sub: Lossy(sub.to_vec()),
            });
        };
        if (*arity > 0 && argc != *arity) || argc < -arity {
            return Err(CommandError::WrongArity(format!("{}|{name}", spec.name)));
        }
    }
    // Last, so a refusal is counted and logged only for a command that
    // could have run (as in Redis).
    crate::acl::authorize(session, index, request)?;
    // Over `maxdisk` or on a full disk, what may add data is refused (Redis
    // refuses its `denyoom` commands over maxmemory, after the ACL check);
    // deletions and reads go on (see `respite_engine::disk`).
    if let Some(refusal) = session.shared.engine.disk().refusal() {
        if spec.has_flag("denyoom") {
            return Err(CommandError::Engine(refusal));
        }
    }
    // `min-replicas-to-write` (with `min-replicas-max-lag` not 0) asks for
    // that many replicas in sync before a write: respite has none, so
    // writes are refused, as redis refuses them without enough replicas.
    if session
        .shared
        .wants_replicas
        .load(std::sync::atomic::Ordering::Relaxed)
        && spec.has_flag("write")
    {
        return Err(CommandError::NoReplicas);
    }
    Ok((index, spec))
}

/// Checks and parses a request as [`dispatch`] does (lookup, arity,
/// authentication, ACL, then the command's own parse), without planning or
/// running it; answers the command's name. For fuzzing every command's
/// parser against arbitrary arguments (fuzz/).
pub fn parse_only(session: &Session, request: Vec<Bytes>) -> Result<&'static str, CommandError> {
    if request.is_empty() {
        return Err(CommandError::Syntax);
    }
    let found = lookup_index(&request[0]);
    let (_, spec) = check(session, &request, found)?;
    let mut args = request.into_iter();
    args.next();
    (spec.parse)(session, Args::new(args))?;
    Ok(spec.name)
}

/// Parses a subcommand name for container commands (CLIENT, CONFIG,
/// COMMAND).
pub(crate) fn subcommand(args: &mut Args) -> Result<Sub, CommandError> {
    let raw = args.next()?;
    Ok(Sub {
        name: upper(&raw),
        raw,
    })
}

/// A subcommand: upper case for matching, and as sent, for the error that
/// names an unknown one (Redis quotes it as the client wrote it).
pub(crate) struct Sub {
    /// Upper case.
    pub name: String,
    /// As sent.
    raw: Bytes,
}

impl Sub {
    /// `ERR unknown subcommand or wrong number of arguments for '...'. Try
    /// CMD HELP.` (redis's `addReplySubcommandSyntaxError`).
    pub(crate) fn syntax(&self, cmd: &'static str) -> CommandError {
        CommandError::Other(format!(
            "unknown subcommand or wrong number of arguments for '{}'. Try {cmd} HELP.",
            String::from_utf8_lossy(&self.raw)
        ))
    }

    /// The subcommand as sent.
    pub(crate) fn raw_bytes(&self) -> &[u8] {
        &self.raw
    }

    /// `ERR unknown subcommand '...'. Try CMD HELP.`
    pub(crate) fn unknown(&self, cmd: &'static str) -> CommandError {
        CommandError::UnknownSubcommand {
            cmd,
            sub: Lossy(self.raw.to_vec()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_unique_and_finds_every_name() {
        for pair in TABLE.windows(2) {
            assert!(
                pair[0].name < pair[1].name,
                "{} {}",
                pair[0].name,
                pair[1].name
            );
        }
        for (i, spec) in TABLE.iter().enumerate() {
            assert_eq!(lookup_index(spec.name.as_bytes()), Some(i));
            assert_eq!(lookup_index(spec.name.to_uppercase().as_bytes()), Some(i));
        }
        assert_eq!(TABLE.get.map(|i| TABLE[i].name), Some("get"));
        assert_eq!(TABLE.set.map(|i| TABLE[i].name), Some("set"));
    }

    #[test]
    fn read_and_write_flags_come_from_the_trait() {
        for spec in TABLE.iter() {
            let flags: Vec<&str> = spec.flags().collect();
            assert_eq!(
                flags.contains(&"write"),
                spec.access == Access::Write,
                "{}",
                spec.name
            );
            assert_eq!(
                flags.contains(&"readonly"),
                spec.access == Access::Read,
                "{}",
                spec.name
            );
            assert!(
                !spec.extra_flags.contains(&"write") && !spec.extra_flags.contains(&"readonly")
            );
        }
    }

    /// A session on a fresh engine, as the fuzz target builds one.
    pub(crate) fn session(dir: &std::path::Path) -> Session {
        let config = crate::Config {
            db: dir.join("t.db"),
            readers: 1,
            ..crate::Config::default()
        };
        let engine = respite_engine::Engine::<Reply>::open(config.engine()).expect("engine");
        let shared = Arc::new(Shared::new(engine, config));
        let client = Arc::new(ClientHandle::new(
            1,
            crate::state::Peer::Unix("test".into()),
        ));
        Session::new(shared, client)
    }

    fn request(args: &[&str]) -> Vec<Bytes> {
        args.iter()
            .map(|a| Bytes::copy_from_slice(a.as_bytes()))
            .collect()
    }

    #[test]
    fn parse_only_checks_and_parses_without_running() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = session(dir.path());
        let parse = |args: &[&str]| parse_only(&s, request(args));
        assert!(matches!(parse(&["set", "k", "v", "EX", "10"]), Ok("set")));
        assert!(matches!(
            parse(&["SET", "k", "v", "EX", "x"]),
            Err(CommandError::NotInteger)
        ));
        assert!(matches!(parse(&["get"]), Err(CommandError::WrongArity(n)) if n == "get"));
        assert!(matches!(
            parse(&["nosuch", "a"]),
            Err(CommandError::UnknownCommand { .. })
        ));
        assert!(matches!(parse(&[]), Err(CommandError::Syntax)));
        // A local command is parsed, not run: the setting stays, and the
        // server does not begin to stop.
        let before = s.shared.settings.maxclients.load(Ordering::Relaxed);
        assert!(matches!(
            parse(&["config", "set", "maxclients", "5"]),
            Ok("config")
        ));
        assert_eq!(s.shared.settings.maxclients.load(Ordering::Relaxed), before);
        assert!(matches!(parse(&["shutdown", "nosave"]), Ok("shutdown")));
        assert!(!s.shared.shutting_down.load(Ordering::Relaxed));
        assert!(matches!(
            parse(&["shutdown", "later"]),
            Err(CommandError::Syntax)
        ));
    }

    /// docs/commands.md lists exactly the commands of the table, each once.
    #[test]
    fn commands_md_lists_exactly_the_table() {
        let doc = include_str!("../../../../docs/commands.md");
        let mut listed: Vec<String> = doc
            .lines()
            .filter_map(|line| {
                let mut cells = line.split('|').map(str::trim);
                cells.next()?;
                let name = cells.next()?;
                let syntax = cells.next()?;
                let is_command = !name.is_empty()
                    && name.chars().all(|c| c.is_ascii_uppercase() || c == '_')
                    && syntax.starts_with('`');
                is_command.then(|| name.to_ascii_lowercase())
            })
            .collect();
        let count = listed.len();
        listed.sort();
        listed.dedup();
        assert_eq!(listed.len(), count, "a command is listed twice");
        let table: Vec<String> = TABLE.iter().map(|s| s.name.to_string()).collect();
        assert_eq!(listed, table);
        let count_line = format!("respite implements the {} commands below", TABLE.len());
        assert!(
            doc.contains(&count_line),
            "docs/commands.md should say: {count_line}"
        );
    }
}

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
//! The families live one per file: [`strings`], [`keys`], [`connection`],
//! [`server`], [`transactions`]. [`TABLE`] lists every command with its
//! arity, flags and key positions, as COMMAND reports them.

pub mod connection;
pub mod keys;
pub mod server;
pub mod strings;
pub mod transactions;

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
    /// A GET or MGET: answered from the engine's value cache when it holds
    /// the keys and this connection has no write in flight, else run on the
    /// read pool like any read.
    Cached(strings::Cached),
}

/// The most commands (or MGET keys) a read job may hold and still count as
/// quick: a reader may hold a quick job's result back while it runs up to
/// 63 more, so each must be short.
pub const QUICK_READ_LIMIT: usize = 64;

/// What a read asks of the read pool.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReadNeeds {
    /// It runs more than one statement and needs them in one snapshot.
    pub snapshot: bool,
    /// It reads a bounded amount (some keys by name), so its result may
    /// wait a moment to be handed back with others' (see the engine's
    /// `read_pool`); KEYS, SCAN, DBSIZE or INFO may take long and are not.
    pub quick: bool,
}

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
}

/// A command whose `apply` reads the keyspace on the read pool.
pub trait ReadCommand: Sized + Send + 'static {
    /// Whether `apply` runs more than one statement and needs them to see
    /// one snapshot (MGET, EXISTS with several keys).
    const MULTI_STATEMENT: bool = false;
    /// Whether it reads a bounded amount: some keys by name, not the whole
    /// keyspace (see [`ReadNeeds::quick`]).
    const QUICK: bool = false;
    /// Parses the arguments (after the command name).
    fn parse(args: &mut Args, session: &Session) -> Result<Self, CommandError>;
    /// Runs against a read snapshot.
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError>;
}

/// A command whose `apply` changes the keyspace on the writer thread.
pub trait WriteCommand: Sized + Send + 'static {
    /// Parses the arguments (after the command name).
    fn parse(args: &mut Args, session: &Session) -> Result<Self, CommandError>;
    /// Runs inside the current group commit. An error rolls back this
    /// command alone.
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, EngineError>;
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

/// A parsed read command as a job for the read pool, with what it needs.
pub(crate) fn read_job<C: ReadCommand>(cmd: C) -> (ReadFn, ReadNeeds) {
    let needs = ReadNeeds {
        snapshot: C::MULTI_STATEMENT,
        quick: C::QUICK,
    };
    (
        Box::new(move |view| cmd.apply(view).unwrap_or_else(Reply::from)),
        needs,
    )
}

fn plan_read<C: ReadCommand>(s: &mut Session, args: Args) -> Result<Plan, CommandError> {
    let (f, needs) = read_job(parse_all(args, s, C::parse)?);
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
    Ok(Plan::Write(Box::new(move |txn| cmd.apply(txn))))
}

fn plan_local<C: LocalCommand>(s: &mut Session, args: Args) -> Result<Plan, CommandError> {
    let cmd = parse_all(args, s, C::parse)?;
    cmd.apply(s)
}

/// One row of the command table.
pub struct Spec {
    /// Lower-case name.
    pub name: &'static str,
    /// Redis arity: exact count including the name if positive, minimum if
    /// negative.
    pub arity: i32,
    /// COMMAND INFO flags.
    pub flags: &'static [&'static str],
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
}

macro_rules! spec {
    ($name:literal, $arity:expr, [$($flag:literal),*], $first:expr, $last:expr, $step:expr, $group:literal, $summary:literal, $plan:expr) => {
        Spec {
            name: $name,
            arity: $arity,
            flags: &[$($flag),*],
            first_key: $first,
            last_key: $last,
            step: $step,
            group: $group,
            summary: $summary,
            plan: $plan,
        }
    };
}

use connection as c;
use keys as k;
use server as sv;
use strings as st;
use transactions as tx;

/// Every command respite knows, in alphabetical order.
pub static TABLE: &[Spec] = &[
    spec!("append", 3, ["write", "denyoom", "fast"], 1, 1, 1, "string", "Appends a string to the value of a key. Creates the key if it doesn't exist.", plan_write::<st::Append>),
    spec!("auth", -2, ["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"], 0, 0, 0, "connection", "Authenticates the connection.", plan_local::<c::Auth>),
    spec!("client", -2, [], 0, 0, 0, "connection", "A container for client connection commands.", plan_local::<c::Client>),
    spec!("command", -1, ["loading", "stale"], 0, 0, 0, "server", "Returns detailed information about all commands.", plan_local::<sv::Command>),
    spec!("config", -2, [], 0, 0, 0, "server", "A container for server configuration commands.", plan_local::<sv::Config>),
    spec!("copy", -3, ["write", "denyoom"], 1, 2, 1, "generic", "Copies the value of a key to a new key.", plan_write::<k::Copy>),
    spec!("dbsize", 1, ["readonly", "fast"], 0, 0, 0, "server", "Returns the number of keys in the database.", plan_read::<sv::DbSize>),
    spec!("decr", 2, ["write", "denyoom", "fast"], 1, 1, 1, "string", "Decrements the integer value of a key by one.", plan_write::<st::Decr>),
    spec!("decrby", 3, ["write", "denyoom", "fast"], 1, 1, 1, "string", "Decrements a number from the integer value of a key.", plan_write::<st::DecrBy>),
    spec!("del", -2, ["write"], 1, -1, 1, "generic", "Deletes one or more keys.", plan_write::<k::Del>),
    spec!("discard", 1, ["noscript", "loading", "stale", "fast", "allow_busy"], 0, 0, 0, "transactions", "Discards a transaction.", plan_local::<tx::Discard>),
    spec!("echo", 2, ["fast"], 0, 0, 0, "connection", "Returns the given string.", plan_local::<c::Echo>),
    spec!("exec", 1, ["noscript", "loading", "stale", "skip_slowlog"], 0, 0, 0, "transactions", "Executes all commands in a transaction.", plan_local::<tx::Exec>),
    spec!("exists", -2, ["readonly", "fast"], 1, -1, 1, "generic", "Determines whether one or more keys exist.", plan_read::<k::Exists>),
    spec!("expire", -3, ["write", "fast"], 1, 1, 1, "generic", "Sets the expiration time of a key in seconds.", plan_write::<k::Expire>),
    spec!("expireat", -3, ["write", "fast"], 1, 1, 1, "generic", "Sets the expiration time of a key to a Unix timestamp.", plan_write::<k::ExpireAt>),
    spec!("expiretime", 2, ["readonly", "fast"], 1, 1, 1, "generic", "Returns the expiration time of a key as a Unix timestamp.", plan_read::<k::ExpireTime>),
    spec!("flushall", -1, ["write"], 0, 0, 0, "server", "Removes all keys from all databases.", plan_write::<sv::FlushAll>),
    spec!("flushdb", -1, ["write"], 0, 0, 0, "server", "Remove all keys from the current database.", plan_write::<sv::FlushDb>),
    spec!("get", 2, ["readonly", "fast"], 1, 1, 1, "string", "Returns the string value of a key.", plan_get),
    spec!("getdel", 2, ["write", "fast"], 1, 1, 1, "string", "Returns the string value of a key after deleting the key.", plan_write::<st::GetDel>),
    spec!("getex", -2, ["write", "fast"], 1, 1, 1, "string", "Returns the string value of a key after setting its expiration time.", plan_write::<st::GetEx>),
    spec!("getrange", 4, ["readonly"], 1, 1, 1, "string", "Returns a substring of the string stored at a key.", plan_read::<st::GetRange>),
    spec!("getset", 3, ["write", "denyoom", "fast"], 1, 1, 1, "string", "Returns the previous string value of a key after setting it to a new value.", plan_write::<st::GetSet>),
    spec!("hello", -1, ["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"], 0, 0, 0, "connection", "Handshakes with the Redis server.", plan_local::<c::Hello>),
    spec!("incr", 2, ["write", "denyoom", "fast"], 1, 1, 1, "string", "Increments the integer value of a key by one.", plan_write::<st::Incr>),
    spec!("incrby", 3, ["write", "denyoom", "fast"], 1, 1, 1, "string", "Increments the integer value of a key by a number.", plan_write::<st::IncrBy>),
    spec!("incrbyfloat", 3, ["write", "denyoom", "fast"], 1, 1, 1, "string", "Increment the floating point value of a key by a number.", plan_write::<st::IncrByFloat>),
    spec!("info", -1, ["loading", "stale"], 0, 0, 0, "server", "Returns information and statistics about the server.", plan_read::<sv::Info>),
    spec!("keys", 2, ["readonly"], 0, 0, 0, "generic", "Returns all key names that match a pattern.", plan_read::<k::Keys>),
    spec!("mget", -2, ["readonly", "fast"], 1, -1, 1, "string", "Atomically returns the string values of one or more keys.", plan_mget),
    spec!("move", 3, ["write", "fast"], 1, 1, 1, "generic", "Moves a key to another database.", plan_write::<k::Move>),
    spec!("mset", -3, ["write", "denyoom"], 1, -1, 2, "string", "Atomically creates or modifies the string values of one or more keys.", plan_write::<st::MSet>),
    spec!("msetnx", -3, ["write", "denyoom"], 1, -1, 2, "string", "Atomically modifies the string values of one or more keys only when all keys don't exist.", plan_write::<st::MSetNx>),
    spec!("multi", 1, ["noscript", "loading", "stale", "fast", "allow_busy"], 0, 0, 0, "transactions", "Starts a transaction.", plan_local::<tx::Multi>),
    spec!("persist", 2, ["write", "fast"], 1, 1, 1, "generic", "Removes the expiration time of a key.", plan_write::<k::Persist>),
    spec!("pexpire", -3, ["write", "fast"], 1, 1, 1, "generic", "Sets the expiration time of a key in milliseconds.", plan_write::<k::PExpire>),
    spec!("pexpireat", -3, ["write", "fast"], 1, 1, 1, "generic", "Sets the expiration time of a key to a Unix milliseconds timestamp.", plan_write::<k::PExpireAt>),
    spec!("pexpiretime", 2, ["readonly", "fast"], 1, 1, 1, "generic", "Returns the expiration time of a key as a Unix milliseconds timestamp.", plan_read::<k::PExpireTime>),
    spec!("ping", -1, ["fast"], 0, 0, 0, "connection", "Returns the server's liveliness response.", plan_local::<c::Ping>),
    spec!("psetex", 4, ["write", "denyoom"], 1, 1, 1, "string", "Sets both string value and expiration time in milliseconds of a key.", plan_write::<st::PSetEx>),
    spec!("pttl", 2, ["readonly", "fast"], 1, 1, 1, "generic", "Returns the expiration time in milliseconds of a key.", plan_read::<k::PTtl>),
    spec!("quit", -1, ["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"], 0, 0, 0, "connection", "Closes the connection.", plan_local::<c::Quit>),
    spec!("randomkey", 1, ["readonly"], 0, 0, 0, "generic", "Returns a random key name from the database.", plan_read::<k::RandomKey>),
    spec!("rename", 3, ["write"], 1, 2, 1, "generic", "Renames a key and overwrites the destination.", plan_write::<k::Rename>),
    spec!("renamenx", 3, ["write", "fast"], 1, 2, 1, "generic", "Renames a key only when the target key name doesn't exist.", plan_write::<k::RenameNx>),
    spec!("reset", 1, ["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"], 0, 0, 0, "connection", "Resets the connection.", plan_local::<c::Reset>),
    spec!("scan", -2, ["readonly"], 0, 0, 0, "generic", "Iterates over the key names in the database.", plan_read::<k::Scan>),
    spec!("select", 2, ["loading", "stale", "fast"], 0, 0, 0, "connection", "Changes the selected database.", plan_local::<c::Select>),
    spec!("set", -3, ["write", "denyoom"], 1, 1, 1, "string", "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist.", plan_write::<st::Set>),
    spec!("setex", 4, ["write", "denyoom"], 1, 1, 1, "string", "Sets the string value and expiration time of a key. Creates the key if it doesn't exist.", plan_write::<st::SetEx>),
    spec!("setnx", 3, ["write", "denyoom", "fast"], 1, 1, 1, "string", "Set the string value of a key only when the key doesn't exist.", plan_write::<st::SetNx>),
    spec!("setrange", 4, ["write", "denyoom"], 1, 1, 1, "string", "Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist.", plan_write::<st::SetRange>),
    spec!("shutdown", -1, ["admin", "noscript", "loading", "stale", "no_multi", "allow_busy"], 0, 0, 0, "server", "Synchronously saves the database(s) to disk and shuts down the Redis server.", plan_local::<sv::Shutdown>),
    spec!("strlen", 2, ["readonly", "fast"], 1, 1, 1, "string", "Returns the length of a string value.", plan_read::<st::StrLen>),
    spec!("time", 1, ["loading", "stale", "fast"], 0, 0, 0, "server", "Returns the server time.", plan_local::<sv::Time>),
    spec!("touch", -2, ["readonly", "fast"], 1, -1, 1, "generic", "Returns the number of existing keys out of those specified after updating the time they were last accessed.", plan_read::<k::Touch>),
    spec!("ttl", 2, ["readonly", "fast"], 1, 1, 1, "generic", "Returns the expiration time in seconds of a key.", plan_read::<k::Ttl>),
    spec!("type", 2, ["readonly", "fast"], 1, 1, 1, "generic", "Determines the type of value stored at a key.", plan_read::<k::Type>),
    spec!("unlink", -2, ["write", "fast"], 1, -1, 1, "generic", "Asynchronously deletes one or more keys.", plan_write::<k::Del>),
    spec!("unwatch", 1, ["noscript", "loading", "stale", "fast", "allow_busy"], 0, 0, 0, "transactions", "Forgets about watched keys of a transaction.", plan_local::<tx::Unwatch>),
    spec!("watch", -2, ["noscript", "loading", "stale", "fast", "allow_busy"], 1, -1, 1, "transactions", "Monitors changes to keys to determine the execution of a transaction.", plan_local::<tx::Watch>),
];

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
    let planned = if session.multi.is_some() {
        transactions::queue(session, request)
    } else {
        try_dispatch(session, request)
    };
    match planned {
        Ok(plan) => plan,
        Err(e) => Plan::Reply(e.into()),
    }
}

fn try_dispatch(session: &mut Session, request: Vec<Bytes>) -> Result<Plan, CommandError> {
    let found = lookup_index(&request[0]);
    check(session, &request, found)?;
    let Some(index) = found else {
        unreachable!("check refuses unknown commands");
    };
    let spec = &TABLE[index];
    session.client.last_cmd.store(index, Ordering::Relaxed);
    let mut args = request.into_iter();
    args.next();
    (spec.plan)(session, Args::new(args))
}

/// What can be refused without running the command: an unknown name, no
/// authentication, a wrong number of arguments. (Inside MULTI these doom
/// the transaction; everything else is found when it runs.)
fn check(session: &Session, request: &[Bytes], found: Option<usize>) -> Result<(), CommandError> {
    let Some(index) = found else {
        if !session.authenticated {
            return Err(CommandError::NoAuth);
        }
        return Err(unknown_command(request));
    };
    let spec = &TABLE[index];
    let argc = request.len() as i32;
    if !session.authenticated && !spec.flags.contains(&"no_auth") {
        return Err(CommandError::NoAuth);
    }
    if (spec.arity > 0 && argc != spec.arity) || argc < -spec.arity {
        return Err(CommandError::WrongArity(spec.name.to_string()));
    }
    Ok(())
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
    /// `ERR unknown subcommand '...'. Try CMD HELP.`
    pub(crate) fn unknown(&self, cmd: &'static str) -> CommandError {
        CommandError::UnknownSubcommand {
            cmd,
            sub: Lossy(self.raw.to_vec()),
        }
    }
}

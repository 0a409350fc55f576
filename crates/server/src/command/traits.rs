//! The kinds of command, one trait each: which trait a command implements
//! says where its `apply` runs.

use respite_engine::{Txn, View};

use super::{Ctx, Plan, Session};
use crate::args::Args;
use crate::error::CommandError;
use crate::reply::Reply;

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
    fn parse(args: &mut Args, ctx: &Ctx<'_>) -> Result<Self, CommandError>;
    /// Runs against a read snapshot.
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError>;
}

/// A command whose `apply` changes the keyspace on the writer thread.
pub trait WriteCommand: Sized + Send + 'static {
    /// Parses the arguments (after the command name).
    fn parse(args: &mut Args, ctx: &Ctx<'_>) -> Result<Self, CommandError>;
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
    fn parse(args: &mut Args, ctx: &Ctx<'_>) -> Result<Self, CommandError>;
}

/// A command about the connection or the server that needs nothing of the
/// connection but its [`Ctx`] (PING, ECHO, SELECT, TIME, LASTSAVE): run on
/// the connection like a [`LocalCommand`], and callable from a script
/// (see [`crate::command::call`]).
pub trait ContextCommand: Sized {
    /// Parses the arguments (after the command name).
    fn parse(args: &mut Args, ctx: &Ctx<'_>) -> Result<Self, CommandError>;
    /// Runs, possibly changing the context's database (SELECT).
    fn apply(self, ctx: &mut Ctx<'_>) -> Result<Reply, CommandError>;
}

/// A command answered on the connection itself.
pub trait LocalCommand: Sized {
    /// Parses the arguments (after the command name).
    fn parse(args: &mut Args, session: &Session) -> Result<Self, CommandError>;
    /// Runs, possibly changing the session.
    fn apply(self, session: &mut Session) -> Result<Plan, CommandError>;
}

/// Parses the whole argument list, refusing leftovers.
pub(crate) fn parse_all<X: ?Sized, C>(
    mut args: Args,
    context: &X,
    parse: impl FnOnce(&mut Args, &X) -> Result<C, CommandError>,
) -> Result<C, CommandError> {
    let cmd = parse(&mut args, context)?;
    if args.remaining() > 0 {
        return Err(CommandError::Syntax);
    }
    Ok(cmd)
}

/// Whether a read command's lookups count as accesses, for a client that
/// is (`touches`) or is not in CLIENT NO-TOUCH mode.
pub(crate) fn touch<C: ReadCommand>(touches: bool) -> bool {
    match C::TOUCHING {
        Touching::Yes => touches,
        Touching::Never => false,
        Touching::Always => true,
    }
}

//! One row of the command table ([`Spec`]): a command's name and the trait
//! it implements, which say how it is planned, parsed alone and called
//! without a connection; its arity, flags and keys come from redis's
//! description of it ([`crate::meta`]) when the table is built.

use respite_engine::{EngineError, Txn, View, WriteOp};

use super::plan::{ReadFn, ReadNeeds};
use super::traits::{
    parse_all, touch, BlockingCommand, ContextCommand, LocalCommand, ReadCommand, WriteCommand,
};
use super::{Ctx, Plan, Session};
use crate::args::Args;
use crate::error::{command_result, CommandError};
use crate::meta::{self, Meta};
use crate::reply::Reply;

fn plan_read<C: ReadCommand>(s: &mut Session, args: Args) -> Result<Plan, CommandError> {
    let cmd = parse_all(args, &s.ctx(), C::parse)?;
    let (f, needs) = read_job(cmd, s);
    Ok(Plan::Read(f, needs))
}

fn plan_write<C: WriteCommand>(s: &mut Session, args: Args) -> Result<Plan, CommandError> {
    let cmd = parse_all(args, &s.ctx(), C::parse)?;
    Ok(Plan::Write(write_op(cmd)))
}

fn plan_block<C: BlockingCommand>(s: &mut Session, args: Args) -> Result<Plan, CommandError> {
    let cmd = parse_all(args, &s.ctx(), C::parse)?;
    Ok(Plan::Block(std::sync::Arc::new(cmd)))
}

fn plan_local<C: LocalCommand>(s: &mut Session, args: Args) -> Result<Plan, CommandError> {
    let cmd = parse_all(args, s, C::parse)?;
    cmd.apply(s)
}

fn plan_context<C: ContextCommand>(s: &mut Session, args: Args) -> Result<Plan, CommandError> {
    let mut ctx = s.ctx();
    let cmd = parse_all(args, &ctx, C::parse)?;
    let reply = cmd.apply(&mut ctx)?;
    let db = ctx.db;
    s.select(db);
    Ok(Plan::Reply(reply))
}

/// A row's plan: parse, then say where the command runs (or run it, for a
/// local command).
pub(crate) type PlanFn = fn(&mut Session, Args) -> Result<Plan, CommandError>;

/// The parse step of a row alone: what [`parse_only`] runs. A local
/// command's plan runs it at once (CONFIG SET, SHUTDOWN), so the parse
/// needs a way in of its own; the others get one for uniformity.
pub(crate) type ParseFn = fn(&Session, Args) -> Result<(), CommandError>;

fn parse_read<C: ReadCommand>(s: &Session, args: Args) -> Result<(), CommandError> {
    parse_all(args, &s.ctx(), C::parse).map(drop)
}

fn parse_write<C: WriteCommand>(s: &Session, args: Args) -> Result<(), CommandError> {
    parse_all(args, &s.ctx(), C::parse).map(drop)
}

fn parse_block<C: BlockingCommand>(s: &Session, args: Args) -> Result<(), CommandError> {
    parse_all(args, &s.ctx(), C::parse).map(drop)
}

fn parse_local<C: LocalCommand>(s: &Session, args: Args) -> Result<(), CommandError> {
    parse_all(args, s, C::parse).map(drop)
}

fn parse_context<C: ContextCommand>(s: &Session, args: Args) -> Result<(), CommandError> {
    parse_all(args, &s.ctx(), C::parse).map(drop)
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

/// One row of the command table: the command's name and the trait it
/// implements, with redis's description of it ([`Meta`]), which gives the
/// arity, the flags and the key range.
pub struct Spec {
    /// Lower-case name.
    pub name: &'static str,
    /// redis 7.0's description of the command.
    pub meta: &'static Meta,
    /// Redis arity (the description's): exact count including the name if
    /// positive, minimum if negative. Kept here for the check every
    /// request makes.
    pub arity: i32,
    /// Which trait the command implements.
    pub access: Access,
    /// Position of the first key argument (0: none).
    pub first_key: i32,
    /// Position of the last key (-1: the last argument).
    pub last_key: i32,
    /// Step between keys.
    pub step: i32,
    /// Parses and plans the command.
    pub plan: fn(&mut Session, Args) -> Result<Plan, CommandError>,
    /// Only parses it (see [`parse_only`]).
    pub(crate) parse: ParseFn,
    /// Runs it without a connection (see [`crate::command::call`]).
    pub(crate) call: CallFn,
    /// For a container command whose subcommands Redis checks before
    /// queueing (OBJECT): its upper-case name and the subcommands respite
    /// has (each one's arity is redis's, from [`crate::meta`]).
    pub subcommands: Option<(&'static str, &'static [&'static str])>,
}

impl Spec {
    /// The one way a row is made: the name, where it runs and how, and the
    /// rest from redis's description. Every name in the table has one (a
    /// unit test checks it), so a missing one is a mistake in a family's
    /// rows, found when the table is first built.
    fn new(
        name: &'static str,
        access: Access,
        (plan, parse, call): (PlanFn, ParseFn, CallFn),
    ) -> Spec {
        let meta = meta::find(name.as_bytes(), None)
            .unwrap_or_else(|| panic!("command table: redis 7.0 does not describe {name:?}"));
        Spec {
            name,
            meta,
            arity: meta.arity,
            access,
            first_key: meta.first_key,
            last_key: meta.last_key,
            step: meta.step,
            plan,
            parse,
            call,
            subcommands: None,
        }
    }

    /// The row of a [`ReadCommand`].
    pub(crate) fn read<C: ReadCommand>(name: &'static str) -> Spec {
        Spec::new(
            name,
            Access::Read,
            (plan_read::<C>, parse_read::<C>, run_read::<C>),
        )
    }

    /// The row of a [`WriteCommand`].
    pub(crate) fn write<C: WriteCommand>(name: &'static str) -> Spec {
        Spec::new(
            name,
            Access::Write,
            (plan_write::<C>, parse_write::<C>, run_write::<C>),
        )
    }

    /// The row of a [`BlockingCommand`]: a write that may block.
    pub(crate) fn blocking<C: BlockingCommand>(name: &'static str) -> Spec {
        Spec::new(
            name,
            Access::Write,
            (plan_block::<C>, parse_block::<C>, run_blocking::<C>),
        )
    }

    /// The row of a [`LocalCommand`].
    pub(crate) fn local<C: LocalCommand>(name: &'static str) -> Spec {
        Spec::new(
            name,
            Access::Local,
            (plan_local::<C>, parse_local::<C>, run_unsupported),
        )
    }

    /// The row of a [`ContextCommand`].
    pub(crate) fn context<C: ContextCommand>(name: &'static str) -> Spec {
        Spec::new(
            name,
            Access::Local,
            (plan_context::<C>, parse_context::<C>, run_context::<C>),
        )
    }

    /// The same row, run from a script by `call` instead of refused as a
    /// connection command (PUBLISH, PUBSUB).
    pub(crate) fn with_call(self, call: CallFn) -> Spec {
        Spec { call, ..self }
    }

    /// The same row, with the subcommands it has, whose names and arities
    /// (redis's, from [`crate::meta`]) are checked with the command's own
    /// (so inside MULTI too, as in Redis).
    pub(crate) fn with_subcommands(
        self,
        upper: &'static str,
        subs: &'static [&'static str],
    ) -> Spec {
        Spec {
            subcommands: Some((upper, subs)),
            ..self
        }
    }

    /// The same row with its keys at `keys` (first, last, step) where
    /// redis's description of a container has none of its own: OBJECT,
    /// XINFO and XGROUP name their key after the subcommand, and the ACL
    /// key check reads it there.
    pub(crate) fn with_keys(self, [first_key, last_key, step]: [i32; 3]) -> Spec {
        Spec {
            first_key,
            last_key,
            step,
            ..self
        }
    }

    /// The same row, planned by `plan` (GET and MGET, which may be answered
    /// from the value cache).
    pub(crate) fn planned_by(
        self,
        plan: fn(&mut Session, Args) -> Result<Plan, CommandError>,
    ) -> Spec {
        Spec { plan, ..self }
    }

    /// Every COMMAND INFO flag, `readonly` or `write` first: the one the
    /// trait gives, then redis's others. A local command keeps redis's
    /// `readonly` (EVAL_RO: its script refuses writes).
    pub fn flags(&self) -> impl Iterator<Item = &'static str> + '_ {
        let access = match self.access {
            Access::Read => Some("readonly"),
            Access::Write => Some("write"),
            Access::Local => None,
        };
        access.into_iter().chain(self.extra_flags())
    }

    /// The flags besides the `readonly` or `write` the trait gives.
    pub fn extra_flags(&self) -> impl Iterator<Item = &'static str> + '_ {
        let local = self.access == Access::Local;
        self.meta
            .flags
            .iter()
            .copied()
            .filter(move |f| local || !matches!(*f, "readonly" | "write"))
    }

    /// The description a request of this row runs as: its subcommand's,
    /// when the row is a container and `sub` names one of the subcommands
    /// it has; else the row's own.
    pub fn described(&self, sub: Option<&[u8]>) -> &'static Meta {
        if let (Some((_, subs)), Some(sub)) = (self.subcommands, sub) {
            if let Some(name) = subs.iter().find(|n| n.as_bytes().eq_ignore_ascii_case(sub)) {
                return meta::find(self.name.as_bytes(), Some(name.as_bytes()))
                    .unwrap_or(self.meta);
            }
        }
        self.meta
    }

    /// The request as the ACL check sees it (see [`crate::acl::Request`]).
    pub fn acl_request<'a>(&self, args: &'a [bytes::Bytes]) -> crate::acl::Request<'a> {
        crate::acl::Request {
            command: self.meta,
            keys: [self.first_key, self.last_key, self.step],
            writes: self.access == Access::Write,
            args,
        }
    }

    /// Whether the command has the flag.
    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags().any(|f| f == flag)
    }
}

/// Where a called command runs: inside the writer's transaction, or
/// against a read-only view.
pub enum Target<'t, 's, 'c> {
    /// The writer's transaction: reads see its writes.
    Writer(&'t mut Txn<'s, 'c>),
    /// A read-only view (a read-only script on the read pool).
    Reader(&'t View<'s, 'c>),
}

impl<'s, 'c> Target<'_, 's, 'c> {
    fn view(&self) -> &View<'s, 'c> {
        match self {
            Target::Writer(txn) => txn,
            Target::Reader(view) => view,
        }
    }
}

/// How a table row runs its command for [`call`]: parse from the context
/// (refusing leftovers), then apply against the target.
pub(crate) type CallFn = fn(&mut Ctx<'_>, Args, Target<'_, '_, '_>) -> Result<Reply, CommandError>;

/// A write's error after it wrote cannot be its reply alone: the
/// transaction is no longer whole (see [`crate::command::command_result`]).
fn after(
    result: Result<Reply, CommandError>,
    txn: &Txn<'_, '_>,
    before: u64,
) -> Result<Reply, CommandError> {
    match result {
        Err(e) if !matches!(e, CommandError::Engine(_)) && txn.changes() != before => {
            Err(CommandError::Engine(EngineError::Internal(e.to_string())))
        }
        other => other,
    }
}

/// A read: against the view, its lookups counted as the command counts
/// them.
pub(crate) fn run_read<C: ReadCommand>(
    ctx: &mut Ctx<'_>,
    args: Args,
    target: Target<'_, '_, '_>,
) -> Result<Reply, CommandError> {
    let cmd = parse_all(args, ctx, C::parse)?;
    let view = target.view();
    view.read_command(super::traits::touch::<C>(ctx.touches), || cmd.apply(view))
}

/// A write: against the writer's transaction.
pub(crate) fn run_write<C: WriteCommand>(
    ctx: &mut Ctx<'_>,
    args: Args,
    target: Target<'_, '_, '_>,
) -> Result<Reply, CommandError> {
    let cmd = parse_all(args, ctx, C::parse)?;
    let Target::Writer(txn) = target else {
        return Err(script_error(
            "Write commands are not allowed from read-only scripts.",
        ));
    };
    let before = txn.changes();
    let result = cmd.apply(txn);
    after(result, txn, before)
}

/// A blocking command: one try, as inside EXEC.
pub(crate) fn run_blocking<C: BlockingCommand>(
    ctx: &mut Ctx<'_>,
    args: Args,
    target: Target<'_, '_, '_>,
) -> Result<Reply, CommandError> {
    let cmd = parse_all(args, ctx, C::parse)?;
    let Target::Writer(txn) = target else {
        return Err(script_error(
            "Write commands are not allowed from read-only scripts.",
        ));
    };
    let before = txn.changes();
    let result = crate::blocking::try_once(&cmd, txn);
    after(result, txn, before)
}

/// A connection command that needs no connection.
pub(crate) fn run_context<C: ContextCommand>(
    ctx: &mut Ctx<'_>,
    args: Args,
    _target: Target<'_, '_, '_>,
) -> Result<Reply, CommandError> {
    let cmd = parse_all(args, ctx, C::parse)?;
    cmd.apply(ctx)
}

/// A connection command that needs its connection.
pub(crate) fn run_unsupported(
    _ctx: &mut Ctx<'_>,
    _args: Args,
    _target: Target<'_, '_, '_>,
) -> Result<Reply, CommandError> {
    Err(script_error(
        "This Redis command is not supported from script",
    ))
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
    let touch = touch::<C>(touches);
    (
        Box::new(move |view| {
            view.read_command(touch, || cmd.apply(view))
                .unwrap_or_else(Reply::from)
        }),
        needs,
    )
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

pub(super) fn script_error(text: &str) -> CommandError {
    CommandError::Other(text.into())
}

//! One row of the command table ([`Spec`]): a command's name, arity,
//! flags and keys, and how it is planned, parsed alone and called without
//! a connection, made by the constructor of the trait the command
//! implements.

use std::sync::atomic::Ordering;

use super::call::{run_blocking, run_context, run_read, run_unsupported, run_write, CallFn};
use super::plan::{read_job, write_op};
use super::traits::{
    parse_all, BlockingCommand, ContextCommand, LocalCommand, ReadCommand, WriteCommand,
};
use super::{Plan, Session};
use crate::args::Args;
use crate::error::CommandError;

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
    if db != s.db {
        s.db = db;
        s.client.db.store(db, Ordering::Relaxed);
    }
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
    pub(crate) parse: ParseFn,
    /// Runs it without a connection (see [`crate::command::call`]).
    pub(crate) call: CallFn,
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
        (plan, parse, call): (PlanFn, ParseFn, CallFn),
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
            call,
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
            (plan_read::<C>, parse_read::<C>, run_read::<C>),
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
            (plan_write::<C>, parse_write::<C>, run_write::<C>),
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
            (plan_block::<C>, parse_block::<C>, run_blocking::<C>),
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
            (plan_local::<C>, parse_local::<C>, run_unsupported),
        )
    }

    /// The row of a [`ContextCommand`].
    pub(crate) fn context<C: ContextCommand>(
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
            (plan_context::<C>, parse_context::<C>, run_context::<C>),
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

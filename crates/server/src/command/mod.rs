//! The command framework: what a command is, how a request becomes one,
//! and where it runs. The families themselves live in [`crate::cmd`], one
//! file each; none of them is part of this module, and this module names
//! them in one place only, the table.
//!
//! Every command is a struct with a doc comment giving its Redis syntax, a
//! `parse` step that turns the arguments into the struct (all syntax and
//! argument errors are found here, on the connection's task, before anything
//! is queued), and an `apply` step. Which trait a command implements
//! ([`traits`]) says where `apply` runs:
//!
//! - [`ReadCommand`]: on the read pool, against a fresh read-only snapshot;
//! - [`WriteCommand`]: on the writer thread, inside the current group commit
//!   (so commands that read before they write see every earlier write);
//! - [`BlockingCommand`]: a write that may wait for a push (BLPOP);
//! - [`ContextCommand`]: right on the connection, needing nothing of it but
//!   the [`Ctx`] (PING, ECHO, SELECT, TIME, LASTSAVE);
//! - [`LocalCommand`]: right on the connection, for commands about the
//!   connection or the server rather than the data (CLIENT, CONFIG, AUTH).
//!
//! The data commands and the context commands are parsed from a [`Ctx`]
//! (database, protocol, NO-TOUCH, a few server facts), never from the
//! connection, so [`call`] can run them without one: from a Lua script on
//! the writer thread, or a replication stream.
//!
//! The path of a request: [`dispatch`] looks it up in the [`TABLE`]
//! ([`table`]), makes the checks that need no parsing, and calls the row's
//! plan ([`spec`]), which parses the command and turns it into a [`Plan`]
//! ([`plan`]): a reply, a read for the pool, an operation for the writer,
//! or a blocking wait. The connection carries the plan out. Inside MULTI
//! the request is queued instead ([`multi`]); EXEC plans the queue at once.
//! A row is one line naming the command's type, made by the constructor
//! of the trait it implements (`Spec::write::<HDel>("hdel")`; also
//! [`Spec::read`], [`Spec::blocking`], [`Spec::context`], [`Spec::local`]),
//! so whether a command reads or writes (its `readonly` or `write` flag,
//! and where it runs) is never written down twice; its arity, its other
//! flags and its keys come from redis's description ([`crate::meta`]).

mod authorize;
pub mod call;
mod ctx;
pub mod dispatch;
pub mod multi;
pub mod plan;
pub mod session;
mod silence;
pub mod spec;
pub mod table;
pub mod track;
pub mod traits;

pub(crate) use crate::error::command_result;
pub use call::{call, call_read, is_fatal};
pub use ctx::{Authorize, Ctx};
pub(crate) use dispatch::{check, try_dispatch};
pub use dispatch::{dispatch, parse_only};
pub use plan::{AfterFn, CachedRead, Plan, ReadFn, ReadNeeds, ReadOrWriteFn, QUICK_READ_LIMIT};
pub use session::Session;
pub(crate) use spec::{read_job, read_job_touching, write_op};
pub use spec::{Access, Spec};
pub use table::{lookup, lookup_index, TABLE};
pub(crate) use traits::{parse_all, touch};
pub use traits::{
    BlockingCommand, ContextCommand, LocalCommand, ReadCommand, Touching, WriteCommand,
};

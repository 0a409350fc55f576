//! Transactions: MULTI, EXEC, DISCARD.
//!
//! Between MULTI and EXEC a connection's commands are not run but queued:
//! each is only looked up and its arity checked (what redis-server checks
//! at that point), and answered `+QUEUED`. An unknown command or a wrong
//! number of arguments is answered with its error and dooms the
//! transaction: EXEC then answers `EXECABORT` and runs nothing. Every other
//! error (a bad option, WRONGTYPE) belongs to EXEC's reply, at the place of
//! the command that made it, as in Redis.
//!
//! EXEC parses the queued commands in order (so a queued SELECT changes the
//! database of the commands after it, and nothing before EXEC) and hands
//! them to the writer as **one operation**: reads and writes alike run on
//! the writer thread, one after the other, inside one group commit. No other
//! client's write can come between them, every read sees the writes before
//! it, and the whole transaction commits or, if the commit fails, none of it
//! does. A command that fails (WRONGTYPE, not an integer) fails alone and
//! the others still apply, which is Redis's rule too: it checks before it
//! writes (see `respite_engine::txn`). A storage error in the middle takes
//! the whole transaction back.
//!
//! WATCH is not supported (it is an unknown command); inside MULTI it is
//! refused with Redis's text, without dooming the transaction, as Redis
//! does.

use bytes::Bytes;
use respite_engine::{EngineError, Txn};

use super::{lookup_index, try_dispatch, LocalCommand, Plan, ReadFn, Session, TABLE};
use crate::args::Args;
use crate::error::CommandError;
use crate::reply::Reply;

/// The commands queued since MULTI.
#[derive(Default)]
pub struct Queue {
    /// Each queued request, name first, as sent.
    requests: Vec<Vec<Bytes>>,
    /// A command was refused while queueing: EXEC must not run anything.
    doomed: bool,
}

/// What the connection does with a request while a transaction is open.
pub(super) fn queue(session: &mut Session, request: Vec<Bytes>) -> Result<Plan, CommandError> {
    let index = lookup_index(&request[0]);
    let name = index.map(|i| TABLE[i].name);
    match name {
        // These act at once, even inside a transaction.
        Some("exec" | "discard" | "multi" | "quit" | "reset") => {
            return try_dispatch(session, request)
        }
        None if request[0].eq_ignore_ascii_case(b"watch") => {
            return Err(CommandError::Other(
                "WATCH inside MULTI is not allowed".into(),
            ))
        }
        _ => {}
    }
    // Redis refuses here what it can tell without running the command:
    // unknown names, wrong arity, no authentication.
    if let Err(e) = super::check(session, &request, index) {
        if let Some(q) = session.multi.as_mut() {
            q.doomed = true;
        }
        return Err(e);
    }
    if let Some(q) = session.multi.as_mut() {
        q.requests.push(request);
    }
    Ok(Plan::Reply(Reply::Simple("QUEUED")))
}

/// `MULTI`
pub struct Multi;

impl LocalCommand for Multi {
    fn parse(_args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        Ok(Multi)
    }
    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        if s.multi.is_some() {
            return Err(CommandError::Other("MULTI calls can not be nested".into()));
        }
        s.multi = Some(Queue::default());
        Ok(Plan::Reply(Reply::Ok))
    }
}

/// `DISCARD`
pub struct Discard;

impl LocalCommand for Discard {
    fn parse(_args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        Ok(Discard)
    }
    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        match s.multi.take() {
            Some(_) => Ok(Plan::Reply(Reply::Ok)),
            None => Err(CommandError::Other("DISCARD without MULTI".into())),
        }
    }
}

/// One queued command, planned at EXEC.
enum Step {
    /// Answered while planning (PING, SELECT, an option error...).
    Reply(Reply),
    /// A read, run on the writer's view of the data.
    Read(ReadFn),
    /// A write.
    Write(respite_engine::WriteOp<Reply>),
}

/// `EXEC`
pub struct Exec;

impl LocalCommand for Exec {
    fn parse(_args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        Ok(Exec)
    }
    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        let Some(queue) = s.multi.take() else {
            return Err(CommandError::Other("EXEC without MULTI".into()));
        };
        if queue.doomed {
            return Ok(Plan::Reply(Reply::Error(Bytes::from_static(
                b"EXECABORT Transaction discarded because of previous errors.",
            ))));
        }
        let steps: Vec<Step> = queue
            .requests
            .into_iter()
            .map(|request| match try_dispatch(s, request) {
                Ok(Plan::Reply(r) | Plan::ReplyAndClose(r)) => Step::Reply(r),
                Ok(Plan::Read(f, _)) => Step::Read(f),
                Ok(Plan::Get(get)) => Step::Read(Box::new(move |view| {
                    use super::ReadCommand;
                    get.apply(view).unwrap_or_else(Reply::from)
                })),
                Ok(Plan::Write(op)) => Step::Write(op),
                Ok(Plan::Close) => {
                    Step::Reply(Reply::error("ERR SHUTDOWN is not supported inside MULTI"))
                }
                Err(e) => Step::Reply(e.into()),
            })
            .collect();
        if steps.iter().all(|st| matches!(st, Step::Reply(_))) {
            // Nothing touches the data: no need to wait for the writer.
            let replies = steps
                .into_iter()
                .map(|st| match st {
                    Step::Reply(r) => r,
                    _ => unreachable!("all replies"),
                })
                .collect();
            return Ok(Plan::Reply(Reply::Array(replies)));
        }
        Ok(Plan::Write(Box::new(move |txn: &mut Txn<'_, '_>| {
            let mut replies = Vec::with_capacity(steps.len());
            for step in steps {
                replies.push(match step {
                    Step::Reply(r) => r,
                    Step::Read(f) => f(txn),
                    Step::Write(op) => match op(txn) {
                        Ok(r) => r,
                        // SQLite failed: the transaction cannot be trusted
                        // to be whole, so it is taken back entirely.
                        Err(e @ (EngineError::Storage(_) | EngineError::Internal(_))) => {
                            return Err(e)
                        }
                        Err(e) => Reply::from(e),
                    },
                });
            }
            Ok(Reply::Array(replies))
        })))
    }
}

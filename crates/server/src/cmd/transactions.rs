//! Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH.
//!
//! Between MULTI and EXEC a connection's commands are not run but queued:
//! each is only looked up and its arity checked (what redis-server checks
//! at that point), and answered `+QUEUED`. An unknown command, a wrong
//! number of arguments or a command not allowed in a transaction (SHUTDOWN)
//! is answered with its error and dooms the transaction: EXEC then answers `EXECABORT` and runs nothing. Every other
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
//! WATCH makes EXEC answer a nil array, and run nothing, when one of the
//! watched keys was written since (optimistic locking). The engine keeps a
//! version per watched key (`respite_engine::watch`). WATCH itself runs on
//! the writer, so it is ordered with every write: it registers after all
//! writes queued before it and is answered once they are committed; EXEC
//! compares the versions on the writer right before it runs the
//! transaction, so no write can slip in between. After EXEC, DISCARD,
//! UNWATCH or RESET, and when the connection closes, every key is unwatched
//! (also on the writer). A watched key that existed at WATCH and has
//! expired by EXEC fails it too, swept yet or not, as in Redis.

use bytes::Bytes;
use respite_engine::{EngineError, Txn};

use crate::args::Args;
use crate::command::multi::{broken, expired, lock_keys, unwatch, Queue, WatchedKey};
use crate::command::{try_dispatch, AfterFn, LocalCommand, Plan, ReadFn, Session};
use crate::error::CommandError;
use crate::reply::Reply;

/// `WATCH key [key ...]`
pub struct Watch {
    /// The selected database.
    db: u32,
    /// The keys.
    keys: Vec<Bytes>,
}

impl LocalCommand for Watch {
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        Ok(Watch {
            db: s.db(),
            keys: args.rest(),
        })
    }
    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        s.watched.active = true;
        let watches = s.shared.engine.watches();
        let list = s.watched.keys.clone();
        let db = self.db;
        Ok(Plan::Write(Box::new(move |txn: &mut Txn<'_, '_>| {
            let mut list = lock_keys(&list);
            for key in self.keys {
                // Watching a key twice is watching it once.
                if let std::collections::hash_map::Entry::Vacant(slot) = list.entry((db, key)) {
                    let key = &slot.key().1;
                    let live = txn.exists(db, key)?;
                    let version = watches.watch(db, key);
                    slot.insert(WatchedKey { version, live });
                }
            }
            Ok(Reply::Ok)
        })))
    }
}

/// `UNWATCH`
pub struct Unwatch;

impl LocalCommand for Unwatch {
    fn parse(_args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        Ok(Unwatch)
    }
    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        Ok(s.reply_ending_watches(Reply::Ok))
    }
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
            Some(_) => Ok(s.reply_ending_watches(Reply::Ok)),
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

/// A step of a transaction on a read replica: nothing but reads.
enum ReadStep {
    Reply(Reply),
    Read(ReadFn),
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
            return Ok(s.reply_ending_watches(Reply::Error(Bytes::from_static(
                b"EXECABORT Transaction discarded because of previous errors.",
            ))));
        }
        // EXEC ends every watch, whatever happens next; a later WATCH fills
        // a new list (see `end_watches`).
        let watching = std::mem::take(&mut s.watched.active);
        let watches = s.shared.engine.watches();
        let list = std::mem::take(&mut s.watched.keys);
        // A version never goes back: a watch already broken is broken on
        // the writer too, and then nothing queued (not even CLIENT SETNAME)
        // runs. (The list holds only this transaction's watches, those
        // whose WATCH has already run on the writer.)
        if watching && broken(&watches, &list) {
            s.watched.keys = list;
            s.watched.active = true;
            return Ok(s.reply_ending_watches(Reply::NilArray));
        }
        // Permissions are checked again as each queued command is planned
        // (they may have changed since it was queued), with Redis's
        // EXEC-time refusal text.
        s.acl.in_exec = true;
        let mut afters: Vec<(usize, AfterFn)> = Vec::new();
        let steps: Vec<Step> = queue
            .requests
            .into_iter()
            .enumerate()
            .map(|(i, request)| match try_dispatch(s, request) {
                Ok(Plan::Reply(r) | Plan::ReplyAndClose(r)) => Step::Reply(r),
                Ok(Plan::Read(f, _)) => Step::Read(f),
                Ok(Plan::Cached(read)) => Step::Read(read.into_read().0),
                Ok(Plan::Write(op)) => Step::Write(op),
                // On the writer the read and its write are one step.
                Ok(Plan::ReadOrWrite(f)) => Step::Write(Box::new(move |txn| match f(txn) {
                    Ok(reply) => Ok(reply),
                    Err(op) => op(txn),
                })),
                // Inside a transaction nothing blocks: one try (Redis's rule).
                Ok(Plan::Block(blocker)) => Step::Write(crate::blocking::once(blocker)),
                // PUBLISH: a placeholder now (or its write), the step once
                // the transaction has committed.
                Ok(Plan::After(write, then)) => {
                    afters.push((i, then));
                    match write {
                        Some(op) => Step::Write(op),
                        None => Step::Reply(Reply::Nil),
                    }
                }
                // SHUTDOWN, the one command that closes without a reply,
                // is refused while queueing (`no_multi`); should another
                // appear, it must not stop the server from inside EXEC.
                Ok(Plan::Close) => {
                    Step::Reply(Reply::error("ERR Command not allowed inside a transaction"))
                }
                Err(e) => Step::Reply(e.into()),
            })
            .collect();
        s.acl.in_exec = false;
        if !watching {
            // Nothing touches the data: no need to wait for the writer.
            let answered: Option<Vec<Reply>> = steps
                .iter()
                .map(|st| match st {
                    Step::Reply(r) => Some(r.clone()),
                    Step::Read(_) | Step::Write(_) => None,
                })
                .collect();
            if let Some(replies) = answered {
                return Ok(after_commit(None, Reply::Array(replies), afters));
            }
        }
        // A read replica has no writer (its writes were refused while
        // queueing): a transaction of reads runs on the read pool, in one
        // read transaction, so its replies agree with each other.
        if s.shared.engine.is_replica() && afters.is_empty() {
            let reads: Option<Vec<ReadStep>> = steps
                .into_iter()
                .map(|st| match st {
                    Step::Reply(r) => Some(ReadStep::Reply(r)),
                    Step::Read(f) => Some(ReadStep::Read(f)),
                    Step::Write(_) => None,
                })
                .collect();
            let Some(reads) = reads else {
                return Err(CommandError::Engine(EngineError::ReadOnlyReplica));
            };
            if watching {
                unwatch(&watches, &list);
            }
            let needs = crate::command::ReadNeeds {
                snapshot: true,
                quick: false,
            };
            return Ok(Plan::Read(
                Box::new(move |view| {
                    Reply::Array(
                        reads
                            .into_iter()
                            .map(|st| match st {
                                ReadStep::Reply(r) => r,
                                ReadStep::Read(f) => f(view),
                            })
                            .collect(),
                    )
                }),
                needs,
            ));
        }
        let op: respite_engine::WriteOp<Reply> = Box::new(move |txn: &mut Txn<'_, '_>| {
            // On the writer, after every earlier write: the check that
            // counts. The watches end here either way.
            if watching {
                let written = broken(&watches, &list);
                let gone = if written {
                    Ok(false)
                } else {
                    expired(txn, &list)
                };
                unwatch(&watches, &list);
                let broken = written || gone?;
                if broken {
                    return Ok(Reply::NilArray);
                }
            }
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
        });
        Ok(after_commit(Some(op), Reply::Nil, afters))
    }
}

/// EXEC's plan: its write (or its replies, when nothing touches the data),
/// then, if it queued steps that run after the commit (PUBLISH), those
/// steps, each putting its reply in its place. A transaction that did not
/// run (a watch broke) runs none of them.
fn after_commit(
    op: Option<respite_engine::WriteOp<Reply>>,
    replies: Reply,
    afters: Vec<(usize, AfterFn)>,
) -> Plan {
    if afters.is_empty() {
        return match op {
            Some(op) => Plan::Write(op),
            None => Plan::Reply(replies),
        };
    }
    let then: AfterFn = Box::new(move |written| {
        let mut reply = written.unwrap_or(replies);
        if let Reply::Array(items) = &mut reply {
            for (i, then) in afters {
                if let Some(slot) = items.get_mut(i) {
                    let placeholder = std::mem::replace(slot, Reply::Nil);
                    *slot = then(Some(placeholder));
                }
            }
        }
        reply
    });
    Plan::After(op, then)
}

/// This family's rows of the command table (see [`crate::command::table`]).
#[rustfmt::skip]
pub(crate) fn commands() -> Vec<crate::command::Spec> {
    use crate::command::Spec;
    vec![
        Spec::local::<Discard>("discard"),
        Spec::local::<Exec>("exec"),
        Spec::local::<Multi>("multi"),
        Spec::local::<Unwatch>("unwatch"),
        Spec::local::<Watch>("watch"),
    ]
}

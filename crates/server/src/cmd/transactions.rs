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

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use respite_engine::{EngineError, Txn, Watches};

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
    /// The queued commands' memory, as CLIENT LIST's `multi-mem` shows it.
    mem: usize,
}

impl Queue {
    /// How many commands are queued (CLIENT LIST's `multi`).
    pub fn len(&self) -> usize {
        self.requests.len()
    }

    /// The queued commands' argument bytes plus one `Bytes` handle per
    /// argument (CLIENT LIST's `multi-mem`).
    pub fn mem(&self) -> usize {
        self.mem
    }

    /// Makes EXEC refuse to run anything (a command was refused while the
    /// transaction was open).
    pub(crate) fn doom(&mut self) {
        self.doomed = true;
    }

    /// The queued requests, name first (CLIENT PAUSE WRITE holds an EXEC
    /// whose queue writes).
    pub fn requests(&self) -> &[Vec<Bytes>] {
        &self.requests
    }

    /// Whether nothing is queued yet.
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }
}

/// EXEC refused before it runs (no authentication, a NOPERM, an arity
/// error): Redis answers with the reason behind EXECABORT, inside MULTI or
/// not.
pub(super) fn exec_abort(e: CommandError) -> CommandError {
    // Redis formats the bare reason here: an arity error without its ERR.
    let text = e.to_string();
    let reason = text.strip_prefix("ERR ").unwrap_or(&text);
    CommandError::Raw(format!(
        "EXECABORT Transaction discarded because of: {reason}"
    ))
}

/// What the connection does with a request while a transaction is open.
pub(super) fn queue(session: &mut Session, request: Vec<Bytes>) -> Result<Plan, CommandError> {
    let index = lookup_index(&request[0]);
    // Redis refuses here what it can tell without running the command:
    // unknown names, wrong arity, no authentication.
    if let Err(e) = super::check(session, &request, index) {
        if index.is_some_and(|i| TABLE[i].name == "exec") {
            // EXEC itself refused (a NOPERM, an arity error): Redis
            // discards the transaction and says why.
            session.multi = None;
            let abort = Reply::from(exec_abort(e));
            return Ok(session.reply_ending_watches(abort));
        }
        if let Some(q) = session.multi.as_mut() {
            q.doomed = true;
        }
        return Err(e);
    }
    if index.is_some_and(|i| TABLE[i].has_flag("no_multi")) {
        // SHUTDOWN: refused, and the transaction with it, as in Redis.
        if let Some(q) = session.multi.as_mut() {
            q.doomed = true;
        }
        return Err(CommandError::Other(
            "Command not allowed inside a transaction".into(),
        ));
    }
    match index.map(|i| TABLE[i].name) {
        // These act at once, even inside a transaction.
        Some("exec" | "discard" | "multi" | "quit" | "reset") => try_dispatch(session, request),
        Some("watch") => Err(CommandError::Other(
            "WATCH inside MULTI is not allowed".into(),
        )),
        _ => {
            if let Some(q) = session.multi.as_mut() {
                q.mem += request
                    .iter()
                    .map(|a| a.len() + std::mem::size_of::<Bytes>())
                    .sum::<usize>();
                q.requests.push(request);
            }
            Ok(Plan::Reply(Reply::Simple("QUEUED")))
        }
    }
}

/// The keys a connection watches, each with the version it saw. Filled and
/// emptied only by operations on the writer thread, so every change to the
/// list is ordered with every write: a WATCH registers after all writes
/// queued before it (and is acknowledged only once they are committed, so
/// the GET that follows it sees them), and anything written after it moves
/// the version EXEC compares.
#[derive(Default)]
pub struct WatchList {
    keys: Arc<Mutex<WatchedKeys>>,
    /// A WATCH was sent and no UNWATCH/EXEC/DISCARD/RESET since: ending the
    /// watches needs a trip to the writer.
    active: bool,
}

/// A connection's watched keys, by database and name: watching a key again
/// is a lookup, so WATCH of 100,000 keys costs linear time (a list scanned
/// for each key made it quadratic: a 9.6 s stall of the writer).
type WatchedKeys = std::collections::HashMap<(u32, Bytes), WatchedKey>;

/// What WATCH learned of one key.
struct WatchedKey {
    /// Its version when WATCH ran.
    version: u64,
    /// It existed when WATCH ran: if it has expired since, EXEC fails,
    /// even before the expiry sweep deletes it (Redis's rule).
    live: bool,
}

fn lock_keys(keys: &Mutex<WatchedKeys>) -> std::sync::MutexGuard<'_, WatchedKeys> {
    keys.lock().unwrap_or_else(|e| e.into_inner())
}

/// Ends every watch of the list (on the writer).
fn unwatch(watches: &Watches, keys: &Mutex<WatchedKeys>) {
    for ((db, key), _) in lock_keys(keys).drain() {
        watches.unwatch(db, &key);
    }
}

/// Whether any watched key was written since it was watched.
fn broken(watches: &Watches, keys: &Mutex<WatchedKeys>) -> bool {
    lock_keys(keys)
        .iter()
        .any(|((db, key), w)| watches.changed(*db, key, w.version))
}

/// Whether a key that existed when it was watched is gone without a write:
/// it expired (a deletion would have moved its version).
fn expired(txn: &Txn<'_, '_>, keys: &Mutex<WatchedKeys>) -> Result<bool, EngineError> {
    for ((db, key), _) in lock_keys(keys).iter().filter(|(_, w)| w.live) {
        if !txn.exists(*db, key)? {
            return Ok(true);
        }
    }
    Ok(false)
}

impl Session {
    /// An operation for the writer that ends this connection's watches and
    /// then answers `reply`; `None` when nothing is watched.
    pub fn end_watches(&mut self, reply: Reply) -> Option<respite_engine::WriteOp<Reply>> {
        if !std::mem::take(&mut self.watched.active) {
            return None;
        }
        let watches = self.shared.engine.watches();
        // The ended watches go with the operation that ends them; a WATCH
        // after this one fills a new list. Sharing one list let an EXEC's
        // early check (below) read entries of watches already ended by an
        // operation still queued for the writer: a pipeline `WATCH k;
        // <write k>; DISCARD; WATCH k; MULTI; EXEC` could then fail its EXEC
        // on a loaded server (found by the random pipeline test, seed 38).
        let keys = std::mem::take(&mut self.watched.keys);
        Some(Box::new(move |_: &mut Txn<'_, '_>| {
            unwatch(&watches, &keys);
            Ok(reply)
        }))
    }

    /// `reply`, after ending the watches if there are any.
    pub(crate) fn reply_ending_watches(&mut self, reply: Reply) -> Plan {
        match self.end_watches(reply.clone()) {
            Some(op) => Plan::Write(op),
            None => Plan::Reply(reply),
        }
    }
}

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
            db: s.db,
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
        let mut afters: Vec<(usize, super::AfterFn)> = Vec::new();
        let steps: Vec<Step> = queue
            .requests
            .into_iter()
            .enumerate()
            .map(|(i, request)| match try_dispatch(s, request) {
                Ok(Plan::Reply(r) | Plan::ReplyAndClose(r)) => Step::Reply(r),
                Ok(Plan::Read(f, _)) => Step::Read(f),
                Ok(Plan::Cached(read)) => Step::Read(read.into_read().0),
                Ok(Plan::Write(op)) => Step::Write(op),
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
    afters: Vec<(usize, super::AfterFn)>,
) -> Plan {
    if afters.is_empty() {
        return match op {
            Some(op) => Plan::Write(op),
            None => Plan::Reply(replies),
        };
    }
    let then: super::AfterFn = Box::new(move |written| {
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

/// This family's rows of the command table (see [`super::table`]).
#[rustfmt::skip]
pub(super) fn commands() -> Vec<super::Spec> {
    use super::Spec;
    vec![
        Spec::local::<Discard>("discard", 1, &["noscript", "loading", "stale", "fast", "allow_busy"], [0, 0, 0], "transactions", "Discards a transaction."),
        Spec::local::<Exec>("exec", 1, &["noscript", "loading", "stale", "skip_slowlog"], [0, 0, 0], "transactions", "Executes all commands in a transaction."),
        Spec::local::<Multi>("multi", 1, &["noscript", "loading", "stale", "fast", "allow_busy"], [0, 0, 0], "transactions", "Starts a transaction."),
        Spec::local::<Unwatch>("unwatch", 1, &["noscript", "loading", "stale", "fast", "allow_busy"], [0, 0, 0], "transactions", "Forgets about watched keys of a transaction."),
        Spec::local::<Watch>("watch", -2, &["noscript", "loading", "stale", "fast", "allow_busy"], [1, -1, 1], "transactions", "Monitors changes to keys to determine the execution of a transaction."),
    ]
}

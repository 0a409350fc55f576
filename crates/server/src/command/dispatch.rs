//! From a request to a plan: look the command up, check what can be
//! refused without running it (name, authentication, arity, ACL, a full
//! disk, missing replicas), queue it inside MULTI, or parse and plan it.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use respite_engine::EngineError;

use super::multi::exec_abort;
use super::{lookup_index, Plan, Session, Spec, TABLE};
use crate::args::Args;
use crate::error::{c_str, CommandError, Lossy};
use crate::reply::Reply;

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
    session.acl.refresh(&session.shared.acl);
    let reply_mode = session.client.state.reply_mode();
    let is_client = request[0].eq_ignore_ascii_case(b"client");
    let plan = dispatch_inner(session, request);
    // CLIENT CACHING counts for the next command, or the next transaction
    // (redis's `resetClient`).
    if session.multi.is_none() && !is_client {
        session.client.tracking.command_done();
    }
    session
        .client
        .state
        .note_multi(session.multi.as_ref().map(|q| (q.len(), q.mem())));
    if reply_mode == 0 && session.client.state.replies_on() {
        return plan;
    }
    // CLIENT REPLY OFF or SKIP is (or was just) in force.
    super::silence::silence_if_asked(&session.client.state, reply_mode, plan)
}

fn dispatch_inner(session: &mut Session, request: Vec<Bytes>) -> Plan {
    let planned = if session.multi.is_some() {
        queue(session, request)
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
pub(crate) fn try_dispatch(
    session: &mut Session,
    request: Vec<Bytes>,
) -> Result<Plan, CommandError> {
    let found = lookup_index(&request[0]);
    let (index, spec) = check(session, &request, found)
        .inspect_err(|e| {
            if let (Some(index), false) =
                (found, matches!(e, CommandError::UnknownSubcommand { .. }))
            {
                let stats = &session.shared.stats;
                stats
                    .rejected(stats.row_of(TABLE[index].described(request.get(1).map(|b| &b[..]))));
            }
        })
        .map_err(|e| match found {
            Some(i) if TABLE[i].name == "exec" => exec_abort(e),
            _ => e,
        })?;
    session.client.last_cmd.store(index, Ordering::Relaxed);
    // Inside EXEC a read runs on the writer, among the transaction's
    // writes: its keys are remembered there, in order with them (see
    // `remember_in_exec`).
    let in_exec = session.acl.in_exec && !session.shared.engine.is_replica();
    let mut deferred = None;
    if session.client.tracking.is_on() {
        if in_exec {
            deferred = keys_to_remember(session, spec, &request).filter(|_| {
                session
                    .shared
                    .tracking
                    .would_remember(session.client.as_ref())
            });
        } else {
            remember_keys(session, spec, &request);
        }
    }
    let mut tracking = super::track::Tracking::new(session, spec, &request);
    let noted = propagated(session, spec).then(|| (session.db(), request.clone()));
    let started = std::time::Instant::now();
    let plan =
        (spec.plan)(session, Args::after_name(request)).unwrap_or_else(|e| Plan::Reply(e.into()));
    let plan = match noted {
        Some((db, request)) => noting(plan, spec.name, db, request),
        None => plan,
    };
    let plan = match (deferred, plan) {
        (Some(keys), Plan::Read(f, _)) => remember_in_exec(session.client.id, keys, f),
        (Some(keys), Plan::Cached(read)) => {
            remember_in_exec(session.client.id, keys, read.into_read().0)
        }
        (_, plan) => plan,
    };
    // A write queued behind a running script gets BUSY if that script
    // runs past the threshold (see `scripting::busy_if_late`).
    let plan = crate::cmd::scripting::busy_if_late(session, spec, plan);
    // MONITOR shows the database as it is after the command (SELECT's).
    tracking.set_db(session.db());
    Ok(super::track::track(plan, started, tracking))
}

/// Whether the command's plan notes what it did for the replicas (see
/// `crate::propagation`): a write, FUNCTION, PUBLISH and SPUBLISH, and
/// PFCOUNT when it writes its cached count, while replicas are fed.
/// EXEC, EVAL and FCALL are not writes here: the commands they run note
/// themselves.
fn propagated(session: &Session, spec: &Spec) -> bool {
    (spec.access == super::Access::Write
        || matches!(spec.name, "function" | "publish" | "spublish" | "pfcount"))
        && session.shared.engine.propagation().is_active()
}

/// The plan of the command `name`, sent as `request` in database `db`,
/// noting what it did once it ran.
fn noting(plan: Plan, name: &'static str, db: u32, request: Vec<Bytes>) -> Plan {
    use crate::propagation::{noting_blocker, noting_op};
    match plan {
        Plan::Write(op) => Plan::Write(noting_op(op, name, db, request)),
        Plan::Block(blocker) => Plan::Block(noting_blocker(blocker, name, db, request)),
        // PUBLISH's step on the writer (see `cmd::pubsub`).
        Plan::After(Some(op), then) => Plan::After(Some(noting_op(op, name, db, request)), then),
        // PFCOUNT's write of its cached count.
        Plan::ReadOrWrite(f) => Plan::ReadOrWrite(Box::new(move |view| {
            f(view).map_err(|op| noting_op(op, name, db, request))
        })),
        other => other,
    }
}

/// CLIENT TRACKING: a read-only command's keys are remembered for its
/// client before it is planned, so before its read starts (see
/// `crate::tracking`), as redis's `call` remembers them after running it.
/// EVAL_RO and its kin do not count themselves (the commands their
/// scripts run would), nor do pub/sub commands.
fn remember_keys(session: &Session, spec: &Spec, request: &[Bytes]) {
    let Some(keys) = keys_to_remember(session, spec, request) else {
        return;
    };
    session
        .shared
        .tracking
        .remember(session.client.as_ref(), keys.into_iter());
    session.shared.tracking.limit(session.shared.as_ref());
}

/// The keys CLIENT TRACKING remembers for a read-only command, if any.
fn keys_to_remember(_session: &Session, spec: &Spec, request: &[Bytes]) -> Option<Vec<Bytes>> {
    let meta = spec.described(request.get(1).map(|b| &b[..]));
    if !meta.flags.contains(&"readonly")
        || meta.flags.contains(&"pubsub")
        || matches!(meta.name, "eval_ro" | "evalsha_ro" | "fcall_ro")
    {
        return None;
    }
    let keys: Vec<Bytes> = crate::cmd::introspection::find_keys(meta, request)?
        .into_iter()
        .filter_map(|(at, _)| request.get(at).cloned())
        .collect();
    (!keys.is_empty()).then_some(keys)
}

/// A read queued in MULTI, as EXEC runs it on the writer: its keys are
/// remembered for `client` at its place among the transaction's changes
/// (`Txn::remember`), so that, as in redis, a key the transaction wrote
/// before this read does not invalidate it, and one it writes after does.
/// (Whether the client remembers them at all, OPTIN and OPTOUT with CLIENT
/// CACHING, was decided when EXEC planned it.) It writes nothing.
fn remember_in_exec(client: u64, keys: Vec<Bytes>, read: super::ReadFn) -> Plan {
    Plan::Write(Box::new(move |txn| {
        txn.remember(client, keys);
        Ok(read(txn))
    }))
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
        let Some(name) = subs.iter().find(|n| n.as_bytes().eq_ignore_ascii_case(sub)) else {
            return Err(CommandError::UnknownSubcommand {
                cmd: upper,
                sub: Lossy(sub.to_vec()),
            });
        };
        // Every subcommand a row names has redis's description (a test of
        // `meta` checks it).
        let arity =
            crate::meta::find(spec.name.as_bytes(), Some(name.as_bytes())).map_or(-2, |m| m.arity);
        if (arity > 0 && argc != arity) || argc < -arity {
            return Err(CommandError::WrongArity(format!("{}|{name}", spec.name)));
        }
    }
    // Last, so a refusal is counted and logged only for a command that
    // could have run (as in Redis).
    super::authorize::authorize(session, index, request)?;
    // While a script has run past `busy-reply-threshold`, only the
    // commands redis flags `allow-busy` run (SCRIPT KILL, FUNCTION KILL
    // and STATS, SHUTDOWN...); the rest get redis's BUSY.
    if let Some(busy) = busy_now(session) {
        let sub = spec.subcommands.and(request.get(1)).map(|s| &s[..]);
        let allowed =
            crate::meta::find(spec.name.as_bytes(), sub).is_some_and(|m| m.has_flag("allow_busy"));
        if !allowed {
            return Err(CommandError::Raw(busy.into()));
        }
    }
    // Over `maxmemory` (see `respite_engine::evict`), over `maxdisk` or on
    // a full disk, what may add data is refused, after the ACL check, as
    // Redis refuses its `denyoom` commands over maxmemory; deletions and
    // reads go on (see `respite_engine::disk`).
    if let Some(refusal) = session.shared.engine.refusal() {
        if refused_for_room(session, spec, &refusal) {
            return Err(CommandError::Engine(refusal));
        }
    }
    // The two refusals of writes below refuse EXEC if it queued a write;
    // inside EXEC nothing is checked again (a REPLICAOF queued before a
    // write makes the server a replica, and the write still runs, as in
    // redis).
    let upstream = &session.shared.upstream;
    let writes = spec.has_flag("write")
        || (spec.name == "exec"
            && session.multi.as_ref().is_some_and(|q| {
                q.requests
                    .iter()
                    .any(|r| lookup_index(&r[0]).is_some_and(|i| TABLE[i].has_flag("write")))
            }));
    // `min-replicas-to-write` (with `min-replicas-max-lag` not 0) asks for
    // that many replicas in sync before a write: respite has none, so
    // writes are refused, as redis refuses them without enough replicas.
    if session
        .shared
        .wants_replicas
        .load(std::sync::atomic::Ordering::Relaxed)
        && writes
        && !session.acl.in_exec
    {
        return Err(CommandError::NoReplicas);
    }
    // A read replica takes no writes (Redis's `READONLY`, checked after
    // min-replicas as in Redis; see `respite_engine::replica` and
    // `crate::replica_link`).
    if writes
        && !session.acl.in_exec
        && (session.shared.engine.is_replica() || upstream.is_replica())
    {
        return Err(CommandError::Engine(
            respite_engine::EngineError::ReadOnlyReplica,
        ));
    }
    // A replica whose link is down with `replica-serve-stale-data no`
    // runs only the commands redis flags `stale` (EXEC only if it queued
    // nothing else).
    if upstream.is_replica()
        && !session.acl.in_exec
        && upstream.state() != crate::replica_link::State::Connected
        && session.shared.params.get("replica-serve-stale-data") == "no"
    {
        let stale = |spec: &Spec| spec.has_flag("stale");
        let denied = !stale(spec)
            || (spec.name == "exec"
                && session.multi.as_ref().is_some_and(|q| {
                    q.requests
                        .iter()
                        .any(|r| lookup_index(&r[0]).is_some_and(|i| !stale(&TABLE[i])))
                }));
        if denied {
            return Err(CommandError::Raw(
                "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."
                    .into(),
            ));
        }
    }
    // While a replica loads its master's data, only the commands redis
    // flags `loading` run.
    if upstream.is_loading() && !spec.has_flag("loading") {
        return Err(CommandError::Raw(
            "LOADING Redis is loading the dataset in memory".into(),
        ));
    }
    Ok((index, spec))
}

/// Whether `refusal` (no room for data) refuses the command `spec`, by
/// Redis's rules (`processCommand`): a `denyoom` command; an EXEC whose
/// queue holds one (it is refused whole, `EXECABORT`); and over
/// `maxmemory`, any command queued inside MULTI but EXEC, DISCARD, QUIT and
/// RESET, since queueing takes memory in Redis (not on a full disk or over
/// `maxdisk`, where a queued DEL must stay possible).
fn refused_for_room(session: &Session, spec: &Spec, refusal: &EngineError) -> bool {
    if spec.has_flag("denyoom") {
        return true;
    }
    let Some(queue) = session.multi.as_ref() else {
        return false;
    };
    if spec.name == "exec" {
        return queue
            .requests
            .iter()
            .any(|r| lookup_index(&r[0]).is_some_and(|i| TABLE[i].has_flag("denyoom")));
    }
    matches!(refusal, EngineError::OverMaxMemory)
        && !matches!(spec.name, "discard" | "quit" | "reset")
}

/// The BUSY reply when a script has run past `busy-reply-threshold`.
fn busy_now(session: &Session) -> Option<&'static str> {
    // The threshold is read only while a script runs.
    if !crate::cmd::scripting::script_running() {
        return None;
    }
    let threshold = session
        .shared
        .params
        .get("busy-reply-threshold")
        .parse()
        .unwrap_or(5000);
    crate::cmd::scripting::busy(threshold)
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
    (spec.parse)(session, Args::after_name(request))?;
    Ok(spec.name)
}

/// Whether a request waits under CLIENT PAUSE WRITE, as in redis 7.0: a
/// command flagged `write` or `may_replicate` (a subcommand by its own
/// flags), and an EXEC whose queue holds one; reads, and an EXEC of reads
/// only, go on.
pub fn held_under_write_pause(session: &Session, request: &[Bytes]) -> bool {
    let Some(spec) = super::lookup(&request[0]) else {
        return false;
    };
    if spec.name == "exec" {
        return session
            .multi
            .as_ref()
            .is_some_and(|q| q.requests().iter().any(|r| writes(r)));
    }
    writes(request)
}

/// Whether a request is a command redis holds under CLIENT PAUSE WRITE:
/// flagged `write` or `may_replicate`, a container's subcommand by its own
/// flags.
fn writes(request: &[Bytes]) -> bool {
    let Some(spec) = crate::command::lookup(&request[0]) else {
        return false;
    };
    let flagged = |m: &crate::meta::Meta| m.has_flag("write") || m.has_flag("may_replicate");
    match (spec.subcommands, request.get(1)) {
        (Some(_), Some(sub)) => {
            let mut full = format!("{}|", spec.name).into_bytes();
            full.extend(sub.iter().map(u8::to_ascii_lowercase));
            crate::meta::find_full(&full).is_some_and(flagged)
        }
        _ => spec.has_flag("write") || spec.has_flag("may_replicate"),
    }
}

/// What the connection does with a request while a transaction is open.
pub(crate) fn queue(session: &mut Session, request: Vec<Bytes>) -> Result<Plan, CommandError> {
    let index = lookup_index(&request[0]);
    // Redis refuses here what it can tell without running the command:
    // unknown names, wrong arity, no authentication.
    if let Err(e) = check(session, &request, index) {
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
                q.push(request);
            }
            Ok(Plan::Reply(Reply::Simple("QUEUED")))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use bytes::Bytes;

    use super::parse_only;
    use crate::command::session::test_session as session;
    use crate::error::CommandError;

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
}

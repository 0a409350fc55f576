//! Running a command without a connection: what a Lua script's
//! `redis.call` does, on the writer thread inside the writer's
//! transaction (or, for a read-only script, against a reader's view).
//!
//! [`call`] looks the command up, makes redis 7.0's checks for a command
//! called from a script (`scriptCall` in redis's `script.c`: the name, the
//! arity, the `noscript` flag, a write from a read-only script, the ACL
//! check the caller hands in, and before the script's first write,
//! NOREPLICAS and the full-disk refusal), then parses the command from the
//! [`Ctx`] and applies it: a read against the transaction's view, a write
//! against the transaction, a blocking command as its non-blocking form
//! (one try, the timeout's reply if there is nothing: what it does inside
//! EXEC, through the same [`blocking::try_once`](crate::blocking::try_once)),
//! and the few connection commands that need no connection (PING, ECHO,
//! SELECT, TIME, LASTSAVE) from the context alone. Each call is counted in
//! the command statistics as redis counts a script's calls: run, failed,
//! or rejected by those checks; an error it meets (a refusal included)
//! counts in the error statistics at once, caught by the script or not;
//! a call that ran is offered to the slow log (from a client with no
//! address, `?:0`) and, while someone monitors, noted for MONITOR's
//! `[db lua]` lines (see `Ctx::publish_monitored`).

use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use respite_engine::{EngineError, Txn, View};

use super::spec::script_error;
pub use super::spec::Target;
use super::Ctx;
use crate::args::Args;
use crate::error::CommandError;
use crate::meta;
use crate::reply::Reply;

/// Runs one command, as redis's `redis.call` does from a script, inside
/// the writer's transaction `txn`.
///
/// `request` is the command as a client would send it, name first. The
/// context says the database, the protocol, whether reads count as
/// accesses, and the ACL check to make (build it with [`Ctx::new`] from
/// the calling client's state; keep the same `Ctx` for every call of one
/// script, so a SELECT holds for the calls after it and the first write is
/// noticed).
///
/// ```ignore
/// // On the writer thread, inside a WriteOp:
/// let mut ctx = Ctx::new(&shared, db, resp3, touches);
/// let reply = respite_server::command::call(&mut ctx, vec![b"SET".into(), k, v], txn);
/// ```
///
/// `Ok(reply)` is what a client would have been answered (shaped for RESP3
/// if `ctx.resp3`). `Err(e)` is the command's error: its reply is
/// `Reply::from(e)`. The script-only refusals are redis 7.0's
/// texts: `ERR Unknown Redis command called from script`, `ERR Wrong
/// number of args calling Redis command from script`, `ERR This Redis
/// command is not allowed from script`, `ERR Write commands are not
/// allowed from read-only scripts.`; a connection command that needs a
/// connection (CLIENT, CONFIG, INFO...) answers `ERR This Redis command is
/// not supported from script`. When [`is_fatal`] says so of the error, the
/// transaction can no longer be trusted to be whole (SQLite failed, or a
/// command failed after it wrote): return it from the write operation, as
/// EXEC does, so the group is taken back.
pub fn call(
    ctx: &mut Ctx<'_>,
    request: Vec<Bytes>,
    txn: &mut Txn<'_, '_>,
) -> Result<Reply, CommandError> {
    run(ctx, request, Target::Writer(txn))
}

/// [`call`] for a read-only script, against a read-only `view` (a reader's
/// snapshot; a `&Txn` derefs to one too): a command with the `write` or
/// `may_replicate` flag is refused with `ERR Write commands are not
/// allowed from read-only scripts.`, as in redis.
pub fn call_read(
    ctx: &mut Ctx<'_>,
    request: Vec<Bytes>,
    view: &View<'_, '_>,
) -> Result<Reply, CommandError> {
    run(ctx, request, Target::Reader(view))
}

/// Whether an error from [`call`] means the writer's transaction cannot be
/// trusted to be whole: a storage failure, or a command that failed after
/// it wrote. Return such an error from the write operation.
pub fn is_fatal(e: &CommandError) -> bool {
    matches!(
        e,
        CommandError::Engine(EngineError::Storage(_) | EngineError::Internal(_))
    )
}

/// The table row of `request` as redis's `lookupCommand` finds it for
/// `redis.acl_check_cmd`: `None` for an unknown command, or an unknown
/// subcommand of a container.
pub fn resolve(request: &[Bytes]) -> Option<usize> {
    let index = crate::command::lookup_index(request.first()?)?;
    let spec = &crate::command::TABLE[index];
    let described = meta::find(spec.name.as_bytes(), None)?;
    if let Some(sub) = request.get(1) {
        if !described.subcommands().is_empty() {
            meta::find(spec.name.as_bytes(), Some(sub))?;
        }
    }
    Some(index)
}

/// DEBUG SET-DISABLE-DENY-SCRIPTS: scripts may call the commands redis
/// flags `noscript` (redis's test suite calls DEBUG from scripts so).
static DENY_SCRIPTS_DISABLED: AtomicBool = AtomicBool::new(false);

/// Turns the `noscript` refusal off (`true`) or back on.
pub(crate) fn disable_deny_scripts(disabled: bool) {
    DENY_SCRIPTS_DISABLED.store(disabled, Ordering::Relaxed);
}

/// redis's checks of a command called from a script that come before the
/// command runs, in redis's order: a container's subcommand is looked up
/// with the command (an unknown one is an unknown command), then the
/// arity and the `noscript` flag of the subcommand, if any. Answers the
/// description checked.
fn script_checks(
    described: &'static meta::Meta,
    request: &[Bytes],
) -> Result<&'static meta::Meta, CommandError> {
    let mut described = described;
    if let Some(sub) = request.get(1) {
        if !described.subcommands().is_empty() {
            described = meta::find(described.command.as_bytes(), Some(sub))
                .ok_or_else(|| script_error("Unknown Redis command called from script"))?;
        }
    }
    let argc = request.len() as i32;
    let arity = described.arity;
    if (arity > 0 && argc != arity) || argc < -arity {
        return Err(script_error(
            "Wrong number of args calling Redis command from script",
        ));
    }
    if described.has_flag("noscript") && !DENY_SCRIPTS_DISABLED.load(Ordering::Relaxed) {
        return Err(script_error(
            "This Redis command is not allowed from script",
        ));
    }
    Ok(described)
}

/// XREAD and XREADGROUP refuse BLOCK from a script (other blocking
/// commands run as their non-blocking form): redis's error, named as the
/// script spelled the command, when its option scan reaches BLOCK, which
/// it does before it parses the streams (an option it does not know ends
/// the scan, and the command's own parse then answers its error).
fn xread_block_refused(request: &[Bytes]) -> Result<(), CommandError> {
    let group = request[0].eq_ignore_ascii_case(b"xreadgroup");
    let mut i = 1;
    while i < request.len() {
        let more = request.len() - i - 1;
        let option = &request[i];
        if option.eq_ignore_ascii_case(b"BLOCK") && more > 0 {
            return Err(CommandError::Other(format!(
                "{} command is not allowed with BLOCK option from scripts",
                String::from_utf8_lossy(&request[0])
            )));
        } else if option.eq_ignore_ascii_case(b"COUNT")
            && more > 0
            && crate::args::parse_i64(&request[i + 1]).is_some()
        {
            i += 2;
        } else if group && option.eq_ignore_ascii_case(b"GROUP") && more >= 2 {
            i += 3;
        } else if group && option.eq_ignore_ascii_case(b"NOACK") {
            i += 1;
        } else {
            break;
        }
    }
    Ok(())
}

fn run(
    ctx: &mut Ctx<'_>,
    request: Vec<Bytes>,
    target: Target<'_, '_, '_>,
) -> Result<Reply, CommandError> {
    let stats = ctx.stats();
    match checked(ctx, request, target) {
        Outcome::Refused(described, e) => {
            if let Some(described) = described {
                stats.rejected(stats.row_of(described));
            }
            ctx.count_error(e.to_string().as_bytes());
            Err(e)
        }
        Outcome::Ran(described, elapsed, result) => {
            match &result {
                Ok(Reply::Error(text)) => ctx.count_error(text),
                Err(e) => ctx.count_error(e.to_string().as_bytes()),
                Ok(_) => {}
            }
            let failed = matches!(result, Err(_) | Ok(Reply::Error(_)));
            stats.record(stats.row_of(described), elapsed, failed);
            result
        }
    }
}

/// How a call ended, for the command statistics, as redis counts a
/// script's calls: refused before it ran (`rejected_calls`; nothing for
/// an unknown command), or run for so long (`calls`, `failed_calls`).
enum Outcome {
    Refused(Option<&'static meta::Meta>, CommandError),
    Ran(
        &'static meta::Meta,
        std::time::Duration,
        Result<Reply, CommandError>,
    ),
}

fn checked(ctx: &mut Ctx<'_>, request: Vec<Bytes>, target: Target<'_, '_, '_>) -> Outcome {
    let Some(name) = request.first() else {
        return Outcome::Refused(
            None,
            script_error("Please specify at least one argument for this redis lib call"),
        );
    };
    let unknown = || script_error("Unknown Redis command called from script");
    let Some(index) = crate::command::lookup_index(name) else {
        // A command redis has and respite does not (CLUSTER, FAILOVER...)
        // gets redis's refusals first: most are `noscript`.
        let Some(described) = meta::find(name, None) else {
            return Outcome::Refused(None, unknown());
        };
        return match script_checks(described, &request) {
            Ok(_) => Outcome::Refused(None, unknown()),
            Err(e) => Outcome::Refused(Some(described), e),
        };
    };
    let spec = &crate::command::TABLE[index];
    let Some(described) = meta::find(spec.name.as_bytes(), None) else {
        return Outcome::Refused(None, unknown());
    };
    let described = match script_checks(described, &request) {
        Ok(d) => d,
        Err(e) => return Outcome::Refused(Some(described), e),
    };
    let refused = |e| Outcome::Refused(Some(described), e);
    if let Some(authorize) = ctx.authorize {
        if let Err(e) = authorize(index, &request) {
            return refused(e);
        }
    }
    let write = described.has_flag("write");
    // redis's `may_replicate` commands (COMMAND INFO does not show the
    // flag): of those a script may call, PFCOUNT, PUBLISH and SPUBLISH.
    let may_replicate = matches!(spec.name, "pfcount" | "publish" | "spublish");
    if matches!(target, Target::Reader(_)) && (write || may_replicate) {
        return refused(script_error(
            "Write commands are not allowed from read-only scripts.",
        ));
    }
    if write && !ctx.master && ctx.read_only_replica() {
        return refused(CommandError::Engine(EngineError::ReadOnlyReplica));
    }
    if write && !ctx.wrote {
        // Refused only before the script's first write: once it has
        // written it runs to its end (redis's rule).
        if ctx.wants_replicas() {
            return refused(CommandError::NoReplicas);
        }
        let denyoom = described.has_flag("denyoom") && !ctx.allow_oom;
        if let Some(refusal) = ctx.disk_refusal().filter(|_| denyoom) {
            return refused(CommandError::Engine(refusal));
        }
    }
    if write {
        ctx.wrote = true;
    }
    if described.has_flag("readonly") {
        ctx.read = true;
    }
    // The slow log keeps the call's arguments (reference counts, no
    // copy), as redis's `call` logs a script's calls.
    let logged = (!described.has_flag("skip_slowlog")
        && ctx.stats().slowlog_slower_than.load(Ordering::Relaxed) >= 0)
        .then(|| request[..request.len().min(crate::stats::SLOWLOG_MAX_ARGC)].to_vec())
        .map(|argv| (argv, request.len()));
    // MONITOR's line, encoded before the arguments are handed over and
    // noted once the call ran, with the database it left selected.
    let shown = ctx.monitored.is_some()
        && !described.has_flag("admin")
        && !described.has_flag("skip_monitor");
    let line = shown.then(|| {
        let mut args = Vec::new();
        crate::monitor::encode_args(&mut args, request.iter().map(|a| &a[..]));
        args
    });
    let started = std::time::Instant::now();
    let checked = if matches!(spec.name, "xread" | "xreadgroup") {
        xread_block_refused(&request)
    } else {
        Ok(())
    };
    let result = match target {
        // A write notes what it did for the replicas (see
        // `crate::propagation`).
        // PUBLISH and SPUBLISH too: redis forces their propagation.
        Target::Writer(txn)
            if (write || matches!(spec.name, "publish" | "spublish")) && txn.propagating() =>
        {
            let (db, mark) = (ctx.db, txn.step_mark());
            let noted = request.clone();
            let before = crate::propagation::before(txn, spec.name, db, &noted);
            let result = checked.and_then(|()| {
                (spec.call)(ctx, Args::after_name(request), Target::Writer(&mut *txn))
            });
            if let Ok(reply) = &result {
                crate::propagation::note(txn, mark, db, spec.name, &noted, reply, &before);
            }
            result
        }
        target => checked.and_then(|()| (spec.call)(ctx, Args::after_name(request), target)),
    };
    let elapsed = started.elapsed();
    let db = ctx.db;
    if let (Some(args), Some(out)) = (line, ctx.monitored.as_mut()) {
        crate::monitor::push_entry(out, db, &args);
    }
    if let Some((argv, argc)) = logged {
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        ctx.stats().maybe_slowlog_script_call(micros, &argv, argc);
    }
    Outcome::Ran(described, elapsed, result)
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use bytes::Bytes;
    use respite_engine::{Txn, WriteItem, WriteOp};

    use super::{call, call_read, Ctx};
    use crate::error::CommandError;
    use crate::reply::Reply;

    fn request(args: &[&str]) -> Vec<Bytes> {
        args.iter()
            .map(|a| Bytes::copy_from_slice(a.as_bytes()))
            .collect()
    }

    /// Runs `script` (calls, in order, with one context, as one script
    /// does) inside one operation on the writer; answers each call's reply
    /// or error text, and the context's database at the end.
    fn on_writer(script: &[&[&str]], read_only: bool) -> (Vec<Result<Reply, String>>, u32) {
        let dir = tempfile::tempdir().expect("tempdir");
        let session = crate::command::session::test_session(dir.path());
        let shared = session.shared.clone();
        let script: Vec<Vec<Bytes>> = script.iter().map(|r| request(r)).collect();
        let (tx, rx) = mpsc::channel();
        let op: WriteOp<Reply> = Box::new(move |txn: &mut Txn<'_, '_>| {
            let mut ctx = Ctx::new(&shared, 0, false, true);
            let mut out = Vec::new();
            for r in script {
                let result = if read_only {
                    call_read(&mut ctx, r, txn)
                } else {
                    call(&mut ctx, r, txn)
                };
                out.push(result.map_err(|e| match Reply::from(e) {
                    Reply::Error(text) => String::from_utf8_lossy(&text).into_owned(),
                    other => panic!("{other:?}"),
                }));
            }
            let _ = tx.send((out, ctx.db));
            Ok(Reply::Ok)
        });
        let item = WriteItem {
            ops: vec![op],
            done: Box::new(|_| {}),
        };
        assert!(session.shared.engine.submit_write(item).is_ok());
        rx.recv().expect("the operation ran")
    }

    fn bulk(s: &str) -> Reply {
        Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()))
    }

    #[test]
    fn data_commands_run_in_the_writers_transaction() {
        let (replies, db) = on_writer(
            &[
                &["SET", "k", "v"],
                &["get", "k"],
                &["HSET", "h", "f", "1"],
                &["HGET", "h", "f"],
                &["RPUSH", "l", "a", "b"],
                // Blocking commands do not block: one try.
                &["BLMPOP", "0", "1", "l", "LEFT"],
                &["BLMPOP", "0", "1", "nothing", "LEFT"],
                &["GET", "h"],
                &["SELECT", "1"],
                &["GET", "k"],
                &["PING"],
                &["ECHO", "hi"],
            ],
            false,
        );
        assert_eq!(
            replies,
            vec![
                Ok(Reply::Ok),
                Ok(bulk("v")),
                Ok(Reply::Int(1)),
                Ok(bulk("1")),
                Ok(Reply::Int(2)),
                Ok(Reply::Array(vec![bulk("l"), Reply::Array(vec![bulk("a")])])),
                Ok(Reply::NilArray),
                Err("WRONGTYPE Operation against a key holding the wrong kind of value".into()),
                Ok(Reply::Ok),
                Ok(Reply::Nil),
                Ok(Reply::Simple("PONG")),
                Ok(bulk("hi")),
            ]
        );
        assert_eq!(db, 1);
    }

    #[test]
    fn refusals_have_redis_script_texts() {
        let (replies, db) = on_writer(
            &[
                &["NOSUCH", "a"],
                &["get"],
                &["OBJECT", "nosuch", "k"],
                &["BLPOP", "l", "0"],
                &["MULTI"],
                &["CLIENT", "LIST"],
                &["INFO"],
                &["SELECT", "99"],
                &["SET", "k", "v", "EX", "x"],
            ],
            false,
        );
        let errors: Vec<String> = replies.into_iter().map(|r| r.unwrap_err()).collect();
        assert_eq!(
            errors,
            [
                "ERR Unknown Redis command called from script",
                "ERR Wrong number of args calling Redis command from script",
                "ERR Unknown Redis command called from script",
                "ERR This Redis command is not allowed from script",
                "ERR This Redis command is not allowed from script",
                "ERR This Redis command is not allowed from script",
                "ERR This Redis command is not supported from script",
                "ERR DB index is out of range",
                "ERR value is not an integer or out of range",
            ]
        );
        assert_eq!(db, 0);
    }

    #[test]
    fn a_read_only_call_refuses_writes() {
        let (replies, _) = on_writer(&[&["SET", "k", "v"], &["GET", "k"], &["TIME"]], true);
        assert_eq!(
            replies[0],
            Err("ERR Write commands are not allowed from read-only scripts.".into())
        );
        assert_eq!(replies[1], Ok(Reply::Nil));
        assert!(matches!(&replies[2], Ok(Reply::Array(a)) if a.len() == 2));
    }

    #[test]
    fn a_command_error_is_not_fatal() {
        assert!(!super::is_fatal(&CommandError::Syntax));
        assert!(super::is_fatal(&CommandError::Engine(
            respite_engine::EngineError::Internal("x".into())
        )));
    }
}

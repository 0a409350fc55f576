//! Server commands: DBSIZE, FLUSHDB, FLUSHALL, TIME,
//! SHUTDOWN, SAVE, BGSAVE, LASTSAVE, DEBUG, LOLWUT.

use std::sync::Arc;

use bytes::Bytes;
use respite_engine::{Txn, View};

use crate::args::{upper, Args};
use crate::command::Ctx;
use crate::command::{ContextCommand, LocalCommand, Plan, ReadCommand, Session, WriteCommand};
use crate::error::CommandError;
use crate::reply::Reply;
use crate::state::Shared;

/// `DBSIZE`
pub struct DbSize {
    /// Selected database.
    db: u32,
}

impl ReadCommand for DbSize {
    fn parse(_args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(DbSize { db: s.db })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        Ok(Reply::Int(view.dbsize(self.db)? as i64))
    }
}

/// Parses the optional ASYNC/SYNC of FLUSHDB and FLUSHALL (both mean the
/// same here: the flush is one transaction either way).
fn flush_mode(args: &mut Args) -> Result<(), CommandError> {
    if args.remaining() > 1 {
        return Err(CommandError::Syntax);
    }
    if let Some(mode) = args.next_opt() {
        let m = upper(&mode);
        if m != "ASYNC" && m != "SYNC" {
            return Err(CommandError::Syntax);
        }
    }
    Ok(())
}

/// `FLUSHDB [ASYNC | SYNC]`
pub struct FlushDb {
    /// Selected database.
    db: u32,
}

impl WriteCommand for FlushDb {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        flush_mode(args)?;
        Ok(FlushDb { db: s.db })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        txn.flush_db(self.db)?;
        Ok(Reply::Ok)
    }
}

/// `FLUSHALL [ASYNC | SYNC]`
pub struct FlushAll;

impl WriteCommand for FlushAll {
    fn parse(args: &mut Args, _s: &Ctx<'_>) -> Result<Self, CommandError> {
        flush_mode(args)?;
        Ok(FlushAll)
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        txn.flush_all()?;
        Ok(Reply::Ok)
    }
}

/// `SWAPDB index1 index2`: exchanges two databases. Only their key rows
/// change (each gets the other's number); clients that selected one see
/// the other's data from then on, as in Redis.
pub struct SwapDb {
    /// The first database.
    a: u32,
    /// The second.
    b: u32,
}

impl WriteCommand for SwapDb {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let mut index = |msg: &str| -> Result<i64, CommandError> {
            let n = crate::args::parse_i64(&args.next()?)
                .filter(|n| i32::try_from(*n).is_ok())
                .ok_or_else(|| CommandError::Other(msg.into()))?;
            Ok(n)
        };
        let a = index("invalid first DB index")?;
        let b = index("invalid second DB index")?;
        let databases = s.databases() as i64;
        if !(0..databases).contains(&a) || !(0..databases).contains(&b) {
            return Err(CommandError::DbIndexOutOfRange);
        }
        Ok(SwapDb {
            a: a as u32,
            b: b as u32,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        txn.swap_db(self.a, self.b)?;
        Ok(Reply::Ok)
    }
}

/// `TIME`: seconds and microseconds, as two bulk strings.
pub struct Time;

impl ContextCommand for Time {
    fn parse(_args: &mut Args, _ctx: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(Time)
    }
    fn apply(self, _ctx: &mut Ctx<'_>) -> Result<Reply, CommandError> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Ok(Reply::Array(vec![
            Reply::bulk(now.as_secs().to_string()),
            Reply::bulk(now.subsec_micros().to_string()),
        ]))
    }
}

/// `SHUTDOWN [NOSAVE | SAVE] [NOW] [FORCE] [ABORT]`: stops accepting,
/// commits what was accepted, checkpoints, exits. Every option means the
/// same here (the data is always on disk), except ABORT, which has nothing
/// to abort.
pub struct Shutdown {
    /// SHUTDOWN ABORT.
    abort: bool,
}

impl LocalCommand for Shutdown {
    fn parse(args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        let mut abort = false;
        while args.remaining() > 0 {
            match args.next_upper()?.as_str() {
                "NOSAVE" | "SAVE" | "NOW" | "FORCE" => {}
                "ABORT" => abort = true,
                _ => return Err(CommandError::Syntax),
            }
        }
        Ok(Shutdown { abort })
    }
    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        if self.abort {
            return Err(CommandError::Other("No shutdown in progress.".into()));
        }
        tracing::info!(client = s.client.id, "SHUTDOWN requested");
        s.shared.begin_shutdown();
        Ok(Plan::Close)
    }
}

/// `SAVE`: writes a snapshot of the database to `snapshot_file` and
/// answers once it is on disk. Unlike redis-server's SAVE it blocks only
/// the client that sent it (and one reader thread): writes and other
/// reads go on meanwhile (see respite-engine's `snapshot.rs`).
pub struct Save {
    shared: Arc<Shared>,
}

impl LocalCommand for Save {
    fn parse(_args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        Ok(Save {
            shared: s.shared.clone(),
        })
    }
    fn apply(self, _s: &mut Session) -> Result<Plan, CommandError> {
        let shared = self.shared;
        // On the read pool, as a slow read: the copy takes as long as the
        // database is big, and no connection task may block that long.
        Ok(Plan::Read(
            Box::new(move |_view| {
                let path = shared.engine.snapshot_path().to_path_buf();
                match shared.engine.snapshots().save(&path) {
                    Ok(_) => Reply::Ok,
                    Err(e) => Reply::error(format!("ERR {e}")),
                }
            }),
            respite_engine::ReadNeeds {
                snapshot: false,
                quick: false,
            },
        ))
    }
}

/// `BGSAVE [SCHEDULE]`: starts writing a snapshot on a thread of its own
/// and answers at once; INFO persistence and LASTSAVE tell when it is done.
pub struct BgSave;

impl LocalCommand for BgSave {
    fn parse(args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        match args.next_opt() {
            None => Ok(BgSave),
            Some(a) if upper(&a) == "SCHEDULE" && args.remaining() == 0 => Ok(BgSave),
            Some(_) => Err(CommandError::Syntax),
        }
    }
    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        let engine = &s.shared.engine;
        match engine
            .snapshots()
            .save_in_background(engine.snapshot_path())
        {
            Ok(()) => Ok(Plan::Reply(Reply::Status(
                "Background saving started".into(),
            ))),
            Err(e) => Err(CommandError::Other(e.to_string())),
        }
    }
}

/// `LASTSAVE`: Unix time of the last successful snapshot.
pub struct LastSave;

impl ContextCommand for LastSave {
    fn parse(_args: &mut Args, _ctx: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(LastSave)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> Result<Reply, CommandError> {
        Ok(Reply::Int(ctx.last_save_unix() as i64))
    }
}

/// `DEBUG SLEEP seconds | SET-ACTIVE-EXPIRE 0|1 | OBJECT key | RELOAD |
/// CHANGE-REPL-ID | DIGEST | DIGEST-VALUE key [key ...] | PROTOCOL type |
/// SET-DISABLE-DENY-SCRIPTS 0|1 | HELP`: the subset of redis's DEBUG that test suites
/// use. Only with `enable_debug_command` set, as in Redis 7.
pub enum Debug {
    /// Stalls the writer thread for that long, as a write operation (so
    /// every write behind it waits, and the systemd watchdog stops being
    /// fed: the way to test it).
    Sleep(f64),
    /// Turns the writer's expiry sweep on or off.
    SetActiveExpire(bool),
    /// redis's one-line description of a key's value.
    Object(Bytes),
    /// redis saves and reloads its dataset; respite's is always on disk and
    /// every read comes from it, so this only waits for every write queued
    /// before it (then a reload would change nothing).
    Reload,
    /// A new replication id (INFO's `master_replid`).
    ChangeReplId,
    /// DEBUG DIGEST: redis's digest of the whole dataset.
    Digest,
    /// DEBUG PROTOCOL type: a sample reply of each RESP type.
    Protocol(Reply),
    /// DEBUG DIGEST-VALUE key ...: redis's digest of each key's value.
    DigestValue(Vec<Bytes>),
    /// DEBUG SET-DISABLE-DENY-SCRIPTS 0|1: lets scripts call the commands
    /// redis flags `noscript` (DEBUG among them).
    SetDisableDenyScripts(bool),
    /// DEBUG HELP.
    Help,
}

impl LocalCommand for Debug {
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        use crate::clients::Peer;
        use crate::config::DebugCommand;
        let allowed = match s.shared.config.enable_debug_command {
            DebugCommand::Yes => true,
            DebugCommand::No => false,
            DebugCommand::Local => match &s.client.peer {
                Peer::Unix(_) => true,
                Peer::Tcp(peer, _) => peer.ip().is_loopback(),
            },
        };
        if !allowed {
            return Err(CommandError::Other(
                "DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.".into(),
            ));
        }
        let sub = crate::args::subcommand(args)?;
        let n = args.remaining();
        Ok(match (sub.name.as_str(), n) {
            ("SLEEP", 1) => {
                let seconds = sleep_seconds(&args.next()?)?;
                Debug::Sleep(seconds)
            }
            ("SET-ACTIVE-EXPIRE", 1) => Debug::SetActiveExpire(args.next_i64()? != 0),
            ("OBJECT", 1) => Debug::Object(args.next()?),
            ("RELOAD", _) => {
                // Its options (MERGE, NOFLUSH, NOSAVE) change nothing here.
                let _ = args.rest();
                Debug::Reload
            }
            ("CHANGE-REPL-ID", 0) => Debug::ChangeReplId,
            ("DIGEST", 0) => Debug::Digest,
            ("PROTOCOL", 1) => Debug::Protocol(protocol_sample(&args.next()?, s.resp3())?),
            ("DIGEST-VALUE", _) => Debug::DigestValue(args.rest()),
            ("SET-DISABLE-DENY-SCRIPTS", 1) => Debug::SetDisableDenyScripts(args.next_i64()? != 0),
            ("HELP", 0) => Debug::Help,
            _ => return Err(sub.syntax("DEBUG")),
        })
    }
    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        match self {
            Debug::Sleep(seconds) => Ok(Plan::Write(Box::new(move |_txn| {
                tracing::warn!(seconds, "DEBUG SLEEP: stalling the writer thread");
                std::thread::sleep(std::time::Duration::from_secs_f64(seconds));
                Ok(Reply::Ok)
            }))),
            Debug::SetActiveExpire(on) => {
                s.shared.engine.set_active_expire(on);
                Ok(Plan::Reply(Reply::Ok))
            }
            Debug::Object(key) => {
                let db = s.db();
                let access = s.shared.engine.access().clone();
                let shared_integers = s.ctx().shares_integers();
                Ok(Plan::Read(
                    Box::new(move |view| {
                        // DEBUG OBJECT looks without using, and finds a
                        // key past its expiry until it is deleted (redis
                        // reads the dictionary directly).
                        let view = view.ignoring_expiry();
                        debug_object(&view, db, key, &access, shared_integers).unwrap_or_else(Reply::from)
                    }),
                    respite_engine::ReadNeeds {
                        snapshot: true,
                        quick: true,
                    },
                ))
            }
            // An empty operation on the writer: answered once every write
            // queued before it is committed.
            Debug::Reload => Ok(Plan::Write(Box::new(|_txn| Ok(Reply::Ok)))),
            Debug::ChangeReplId => {
                s.shared.stats.change_replid();
                Ok(Plan::Reply(Reply::Ok))
            }
            Debug::Protocol(reply) => Ok(Plan::Reply(reply)),
            Debug::SetDisableDenyScripts(disabled) => {
                crate::command::call::disable_deny_scripts(disabled);
                Ok(Plan::Reply(Reply::Ok))
            }
            Debug::Digest => {
                let databases = s.shared.config.databases;
                Ok(Plan::Read(
                    Box::new(move |view| {
                        view.set_touch(false);
                        dataset_digest(view, databases)
                            .map(|d| Reply::Status(hex(&d)))
                            .unwrap_or_else(Reply::from)
                    }),
                    respite_engine::ReadNeeds {
                        snapshot: true,
                        quick: false,
                    },
                ))
            }
            Debug::DigestValue(keys) => {
                let db = s.db();
                Ok(Plan::Read(
                    Box::new(move |view| {
                        view.set_touch(false);
                        let digests: Result<Vec<Reply>, CommandError> = keys
                            .iter()
                            .map(|key| {
                                let mut d = [0u8; 20];
                                value_digest(view, db, key, &mut d)?;
                                Ok(Reply::Status(hex(&d)))
                            })
                            .collect();
                        digests.map(Reply::Array).unwrap_or_else(Reply::from)
                    }),
                    respite_engine::ReadNeeds {
                        snapshot: true,
                        quick: false,
                    },
                ))
            }
            Debug::Help => Ok(Plan::Reply(super::common::help(
                "DEBUG",
                &[
                    "CHANGE-REPL-ID",
                    "    Change the replication IDs of the instance.",
                    "    Dangerous: should be used only for testing the replication subsystem.",
                    "DIGEST",
                    "    Output a hex signature representing the current DB content.",
                    "DIGEST-VALUE <key> [<key> ...]",
                    "    Output a hex signature of the values of all the specified keys.",
                    "OBJECT <key>",
                    "    Show low level info about `key` and associated value.",
                    "PROTOCOL <type>",
                    "    Reply with a test value of the specified type. <type> can be: string,",
                    "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
                    "    true, false.",
                    "RELOAD [option ...]",
                    "    Save the RDB on disk and reload it back to memory. Here: wait for every",
                    "    earlier write (the data is always on disk); the options change nothing.",
                    "SET-ACTIVE-EXPIRE <0|1>",
                    "    Setting it to 0 disables expiring keys in background when they are not",
                    "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
                    "    default.",
                    "SLEEP <seconds>",
                    "    Stop the server for <seconds>. Decimals allowed.",
                ],
            ))),
        }
    }
}

/// DEBUG PROTOCOL's sample of a RESP type, redis's values (debug.c).
/// DEBUG called from a script (once DEBUG SET-DISABLE-DENY-SCRIPTS lets
/// it): PROTOCOL's sample replies, and SLEEP, which stalls the script
/// where it runs; the subcommands that need a connection are refused as
/// other connection commands are.
fn script_debug(
    ctx: &mut crate::command::Ctx<'_>,
    mut args: Args,
    _target: crate::command::call::Target<'_, '_, '_>,
) -> Result<Reply, CommandError> {
    let sub = crate::args::subcommand(&mut args)?;
    match (sub.name.as_str(), args.remaining()) {
        ("PROTOCOL", 1) => protocol_sample(&args.next()?, ctx.resp3),
        ("SLEEP", 1) => {
            let seconds = sleep_seconds(&args.next()?)?;
            std::thread::sleep(std::time::Duration::from_secs_f64(seconds));
            Ok(Reply::Ok)
        }
        _ => Err(CommandError::Other(
            "This Redis command is not supported from script".into(),
        )),
    }
}

fn protocol_sample(name: &[u8], resp3: bool) -> Result<Reply, CommandError> {
    let ints = || (0..3).map(Reply::Int).collect::<Vec<_>>();
    Ok(match name.to_ascii_lowercase().as_slice() {
        b"string" => Reply::bulk("Hello World"),
        b"integer" => Reply::Int(12345),
        // redis's literal, not π.
        #[allow(clippy::approx_constant)]
        b"double" => Reply::Double(3.141),
        b"bignum" => Reply::BigNum("1234567999999999999999999999999999999".into()),
        b"null" => Reply::Nil,
        b"array" => Reply::Array(ints()),
        b"set" => Reply::Set(ints()),
        b"map" => Reply::Map((0..3).map(|j| (Reply::Int(j), Reply::Bool(j == 1))).collect()),
        b"attrib" => Reply::Attribute(
            vec![(
                Reply::bulk("key-popularity"),
                Reply::Array(vec![Reply::bulk("key:123"), Reply::Int(90)]),
            )],
            Box::new(Reply::bulk("Some real reply following the attribute")),
        ),
        b"push" if !resp3 => {
            return Err(CommandError::Other(
                "RESP2 is not supported by this command".into(),
            ))
        }
        b"push" => Reply::Pushed(
            vec![Reply::bulk("server-cpu-usage"), Reply::Int(42)],
            Box::new(Reply::bulk("Some real reply following the push reply")),
        ),
        b"true" => Reply::Bool(true),
        b"false" => Reply::Bool(false),
        b"verbatim" => Reply::Verbatim("This is a verbatim\nstring".into()),
        _ => return Err(CommandError::Other("Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false".into())),
    })
}

/// redis's `xorDigest` (debug.c): the SHA1 of `data` xored into `digest`,
/// so the order of the elements added this way does not matter.
fn xor_digest(digest: &mut [u8; 20], data: &[u8]) {
    use sha1::Digest;
    let hash = sha1::Sha1::digest(data);
    for (d, h) in digest.iter_mut().zip(hash) {
        *d ^= h;
    }
}

/// redis's `mixDigest`: `SHA1(digest xor SHA1(data))`, so the order of the
/// elements added this way does matter.
fn mix_digest(digest: &mut [u8; 20], data: &[u8]) {
    use sha1::Digest;
    xor_digest(digest, data);
    *digest = sha1::Sha1::digest(&digest[..]).into();
}

fn hex(digest: &[u8; 20]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// redis's `xorObjectDigest`: the value of `key` mixed into `digest`, by
/// the same steps over the same bytes (so the digests equal redis's for
/// the same data): the type code, then a string's bytes, a list's elements
/// in order, a set's members, a hash's field-value pairs and a sorted set's
/// member-score pairs (the score as `%.17g`) each xored in, whatever
/// their order; and a mark if the key has a TTL. Nothing for a missing key.
fn value_digest(
    view: &View<'_, '_>,
    db: u32,
    key: &[u8],
    digest: &mut [u8; 20],
) -> Result<(), CommandError> {
    use respite_engine::schema::Kind;
    let Some(entry) = view.peek_entry(db, key)? else {
        return Ok(());
    };
    // redis's OBJ_STRING .. OBJ_HASH.
    let code: u32 = match entry.kind {
        Kind::String => 0,
        Kind::List => 1,
        Kind::Set => 2,
        Kind::ZSet => 3,
        Kind::Hash => 4,
        Kind::Stream => 6,
    };
    mix_digest(digest, &code.to_be_bytes());
    let row = view.live(db, key, entry.kind)?;
    match (entry.kind, row) {
        (Kind::String, _) => {
            let value = view.peek_string(db, key)?.unwrap_or_default();
            mix_digest(digest, &value);
        }
        (Kind::List, Some(row)) => {
            for e in view.list_range(&row, 0, -1)? {
                mix_digest(digest, &e);
            }
        }
        (Kind::Set, Some(row)) => {
            for m in view.set_members(row.id)? {
                xor_digest(digest, &m);
            }
        }
        (Kind::ZSet, Some(row)) => {
            for (member, score) in view.zset_all(row.id)? {
                let mut e = [0u8; 20];
                mix_digest(&mut e, &member);
                mix_digest(&mut e, crate::reply::format_double(score).as_bytes());
                xor_digest(digest, &e);
            }
        }
        (Kind::Hash, Some(row)) => {
            for (field, value) in view.hash_all(row.id)? {
                let mut e = [0u8; 20];
                mix_digest(&mut e, &field);
                mix_digest(&mut e, &value);
                xor_digest(digest, &e);
            }
        }
        (Kind::Stream, Some(row)) => {
            use respite_engine::stream::StreamId;
            for (id, fields) in view.stream_range(row.id, StreamId::MIN, StreamId::MAX, 0, false)? {
                mix_digest(digest, format!("{}.{}", id.ms, id.seq).as_bytes());
                for (field, value) in fields {
                    mix_digest(digest, &field);
                    mix_digest(digest, &value);
                }
            }
        }
        _ => {}
    }
    if entry.expire_at.is_some() {
        xor_digest(digest, b"!!expire!!");
    }
    Ok(())
}

/// redis's `computeDatasetDigest`: for each non-empty database its number,
/// then each key's digest (the key mixed, then its value) xored in. Forty
/// zeros for an empty dataset.
fn dataset_digest(view: &View<'_, '_>, databases: u32) -> Result<[u8; 20], CommandError> {
    let mut out = [0u8; 20];
    for db in 0..databases {
        let keys = view.keys(db, b"*")?;
        if keys.is_empty() {
            continue;
        }
        mix_digest(&mut out, &db.to_be_bytes());
        for key in keys {
            let mut d = [0u8; 20];
            mix_digest(&mut d, &key);
            value_digest(view, db, &key, &mut d)?;
            xor_digest(&mut out, &d);
        }
    }
    Ok(out)
}

/// DEBUG OBJECT's line: redis's fields, with the encoding OBJECT ENCODING
/// reports and the value's size for `serializedlength`. `view` sees keys
/// past their expiry (see [`View::ignoring_expiry`]).
fn debug_object(
    view: &View<'_, '_>,
    db: u32,
    key: Bytes,
    access: &std::sync::Arc<respite_engine::Access>,
    shared_integers: bool,
) -> Result<Reply, CommandError> {
    let Some(entry) = view.peek_entry(db, &key)? else {
        return Err(CommandError::Other("no such key".into()));
    };
    // What OBJECT ENCODING and OBJECT REFCOUNT answer.
    let object = |sub: &'static [u8]| {
        let mut args = Args::new(vec![Bytes::from_static(sub), key.clone()].into_iter());
        super::keys::Object::probe(&mut args, db, access.clone(), shared_integers)?.apply(view)
    };
    let encoding = match object(b"ENCODING")? {
        Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
        _ => "unknown".into(),
    };
    let refcount = match object(b"REFCOUNT")? {
        Reply::Int(n) => n,
        _ => 1,
    };
    let length = match entry.kind {
        respite_engine::Kind::String => view.peek_string(db, &key)?.map_or(0, |v| v.len() as i64),
        _ => entry.count,
    };
    let seen = access.figures(db, &key);
    Ok(Reply::Status(format!(
        "Value at:0x0 refcount:{refcount} encoding:{encoding} serializedlength:{length} lru:{} lru_seconds_idle:{}",
        seen.lru, seen.idle_secs
    )))
}

/// DEBUG SLEEP's argument: seconds, 0 to 3600, fractions allowed.
fn sleep_seconds(arg: &[u8]) -> Result<f64, CommandError> {
    String::from_utf8_lossy(arg)
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0 && *s <= 3600.0)
        .ok_or_else(|| CommandError::Other("value is out of range".into()))
}

/// This family's rows of the command table (see [`crate::command::table`]).
#[rustfmt::skip]
pub(crate) fn commands() -> Vec<crate::command::Spec> {
    use crate::command::Spec;
    vec![
        Spec::read::<DbSize>("dbsize"),
        Spec::write::<FlushAll>("flushall"),
        Spec::write::<FlushDb>("flushdb"),
        Spec::local::<Shutdown>("shutdown"),
        Spec::local::<Save>("save"),
        Spec::local::<BgSave>("bgsave"),
        Spec::context::<LastSave>("lastsave"),
        Spec::local::<Debug>("debug").with_call(script_debug),
        Spec::read::<crate::lolwut::Lolwut>("lolwut"),
        Spec::write::<SwapDb>("swapdb"),
        Spec::context::<Time>("time"),
    ]
}

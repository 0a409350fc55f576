//! Server commands: CONFIG, INFO, DBSIZE, FLUSHDB, FLUSHALL, TIME,
//! SHUTDOWN, SAVE, BGSAVE, LASTSAVE, DEBUG.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use respite_engine::{glob::glob_match, AppendFsync, Txn, View};

use super::{subcommand, LocalCommand, Plan, ReadCommand, Session, WriteCommand};
use crate::args::{upper, Args};
use crate::error::{CommandError, Lossy};
use crate::reply::Reply;
use crate::state::{lock, Shared};

/// `DBSIZE`
pub struct DbSize {
    /// Selected database.
    db: u32,
}

impl ReadCommand for DbSize {
    fn parse(_args: &mut Args, s: &Session) -> Result<Self, CommandError> {
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
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
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
    fn parse(args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
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
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        let mut index = |msg: &str| -> Result<i64, CommandError> {
            let n = crate::args::parse_i64(&args.next()?)
                .filter(|n| i32::try_from(*n).is_ok())
                .ok_or_else(|| CommandError::Other(msg.into()))?;
            Ok(n)
        };
        let a = index("invalid first DB index")?;
        let b = index("invalid second DB index")?;
        let databases = s.shared.config.databases as i64;
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

impl LocalCommand for Time {
    fn parse(_args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        Ok(Time)
    }
    fn apply(self, _s: &mut Session) -> Result<Plan, CommandError> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Ok(Plan::Reply(Reply::Array(vec![
            Reply::bulk(now.as_secs().to_string()),
            Reply::bulk(now.subsec_micros().to_string()),
        ])))
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

impl LocalCommand for LastSave {
    fn parse(_args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        Ok(LastSave)
    }
    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        let status = s.shared.engine.snapshots().status();
        Ok(Plan::Reply(Reply::Int(status.last_save_unix as i64)))
    }
}

/// `DEBUG SLEEP seconds`: stalls the writer thread for that long, as a
/// write operation (so every write behind it waits, and the systemd
/// watchdog stops being fed: the way to test it). Only with
/// `enable_debug_command` set, as in Redis 7.
pub struct Debug {
    seconds: f64,
}

impl LocalCommand for Debug {
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        use crate::config::DebugCommand;
        use crate::state::Peer;
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
        let sub = args.next_upper()?;
        if sub != "SLEEP" || args.remaining() != 1 {
            return Err(CommandError::Other(
                "DEBUG here knows only SLEEP <seconds>".into(),
            ));
        }
        let seconds = String::from_utf8_lossy(&args.next()?)
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s >= 0.0 && *s <= 3600.0)
            .ok_or_else(|| CommandError::Other("value is out of range".into()))?;
        Ok(Debug { seconds })
    }
    fn apply(self, _s: &mut Session) -> Result<Plan, CommandError> {
        let seconds = self.seconds;
        Ok(Plan::Write(Box::new(move |_txn| {
            tracing::warn!(seconds, "DEBUG SLEEP: stalling the writer thread");
            std::thread::sleep(std::time::Duration::from_secs_f64(seconds));
            Ok(Reply::Ok)
        })))
    }
}

/// `INFO [section ...]`
pub struct Info {
    /// Requested sections, lower case; empty means the default set.
    sections: Vec<String>,
    /// For the figures.
    shared: Arc<Shared>,
}

impl ReadCommand for Info {
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        let sections = args
            .rest()
            .iter()
            .map(|b| String::from_utf8_lossy(b).to_ascii_lowercase())
            .collect();
        Ok(Info {
            sections,
            shared: s.shared.clone(),
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let want = |name: &str| {
            self.sections.is_empty()
                || self
                    .sections
                    .iter()
                    .any(|s| s == name || s == "all" || s == "default" || s == "everything")
        };
        let sh = &self.shared;
        let mut out = String::new();
        if want("server") {
            let uptime = sh.started.elapsed().as_secs();
            let _ = write!(
                out,
                "# Server\r\nredis_version:7.0.0\r\nrespite_version:{}\r\nredis_mode:standalone\r\nos:{} {}\r\narch_bits:64\r\nprocess_id:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{}\r\nuptime_in_days:{}\r\n\r\n",
                env!("CARGO_PKG_VERSION"),
                std::env::consts::OS,
                std::env::consts::ARCH,
                std::process::id(),
                sh.tcp_port.load(Ordering::Relaxed),
                uptime,
                uptime / 86400,
            );
        }
        if want("clients") {
            let _ = write!(
                out,
                "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\nblocked_clients:{}\r\n\r\n",
                lock(&sh.clients).len(),
                sh.settings.maxclients.load(Ordering::Relaxed),
                sh.engine.blocking().len(),
            );
        }
        if want("memory") {
            // The process's resident memory: respite has no allocator-level
            // count like Redis's `used_memory`, and the RSS is what an
            // operator (and `redis-cli --stat`) wants to watch.
            let rss = resident_bytes();
            let cache = sh.engine.cache().stats();
            let _ = write!(
                out,
                "# Memory\r\nused_memory:{rss}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\nused_memory_rss_human:{}\r\nmaxmemory:0\r\nmaxmemory_human:0B\r\nmaxmemory_policy:noeviction\r\nread_cache_used_bytes:{}\r\nread_cache_max_bytes:{}\r\n\r\n",
                bytes_to_human(rss),
                bytes_to_human(rss),
                cache.bytes,
                cache.budget,
            );
        }
        let stats = sh.engine.stats();
        if want("stats") {
            let c = &sh.counters;
            let cache = sh.engine.cache().stats();
            let _ = write!(
                out,
                "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\nrejected_connections:{}\r\nexpired_keys:{}\r\ntotal_error_replies:{}\r\nprotocol_errors:{}\r\nread_cache_hits:{}\r\nread_cache_misses:{}\r\nread_cache_entries:{}\r\nread_cache_used_bytes:{}\r\nread_cache_max_bytes:{}\r\n\r\n",
                c.connections_received.load(Ordering::Relaxed),
                c.commands_processed.load(Ordering::Relaxed),
                c.rejected_connections.load(Ordering::Relaxed),
                stats.expired_keys,
                c.error_replies.load(Ordering::Relaxed),
                c.protocol_errors.load(Ordering::Relaxed),
                cache.hits,
                cache.misses,
                cache.entries,
                cache.bytes,
                cache.budget,
            );
        }
        if want("persistence") {
            let disk = sh.engine.disk_writes();
            let snap = sh.engine.snapshots().status();
            let _ = write!(
                out,
                "# Persistence\r\nloading:0\r\nrdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:{}\r\nrdb_last_bgsave_time_sec:{}\r\nrdb_current_bgsave_time_sec:{}\r\nrdb_saves:{}\r\nrdb_last_snapshot_bytes:{}\r\nsnapshot_file:{}\r\n",
                snap.in_progress as u8,
                snap.last_save_unix,
                if snap.last_ok { "ok" } else { "err" },
                snap.last_secs,
                snap.current_secs,
                snap.saves,
                snap.last_bytes,
                sh.engine.snapshot_path().display(),
            );
            let _ = write!(
                out,
                "aof_enabled:1\r\nappendfsync:{}\r\ngroup_commit_max_batch:{}\r\ngroup_commit_batches:{}\r\ngroup_commit_ops:{}\r\ngroup_commit_failed_ops:{}\r\ngroup_commit_failed_commits:{}\r\ngroup_commit_ops_per_batch_mean:{:.2}\r\ngroup_commit_ops_per_batch_p50:{}\r\ngroup_commit_ops_per_batch_p99:{}\r\ngroup_commit_ops_per_batch_max:{}\r\ngroup_commit_commit_latency_p50_us:{}\r\ngroup_commit_commit_latency_p99_us:{}\r\ngroup_commit_queue_depth:{}\r\nwal_size_bytes:{}\r\nwal_checkpoints:{}\r\nwal_checkpoint_threshold_bytes:{}\r\ndb_size_bytes:{}\r\npage_size:{}\r\ndisk_write_bytes:{}\r\nwrite_bytes_per_op:{}\r\n\r\n",
                lock(&sh.settings.appendfsync).as_str(),
                sh.engine.max_batch(),
                stats.batches,
                stats.ops,
                stats.failed_ops,
                stats.failed_commits,
                stats.ops_per_batch_mean,
                stats.ops_per_batch_p50,
                stats.ops_per_batch_p99,
                stats.ops_per_batch_max,
                stats.commit_us_p50,
                stats.commit_us_p99,
                sh.engine.write_queue_len(),
                sh.engine.wal_size(),
                stats.checkpoints,
                sh.engine.checkpoint_threshold(),
                sh.engine.db_size(),
                sh.engine.page_size(),
                disk.map_or(0, |d| d.bytes),
                disk.map_or(0, |d| d.per_op),
            );
        }
        if want("keyspace") {
            out.push_str("# Keyspace\r\n");
            for db in view.keyspace()? {
                let _ = write!(
                    out,
                    "db{}:keys={},expires={},avg_ttl=0\r\n",
                    db.db, db.keys, db.expires
                );
            }
            out.push_str("\r\n");
        }
        // Redis ends the text without the final blank line.
        while out.ends_with("\r\n\r\n") {
            out.truncate(out.len() - 2);
        }
        Ok(Reply::Verbatim(out))
    }
}

/// Resident set size of this process in bytes (0 where /proc is absent).
fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
            let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kb * 1024)
        })
        .unwrap_or(0)
}

/// Redis's `bytesToHuman`: `512B`, `1.50K`, `23.45M`, `1.00G`.
fn bytes_to_human(n: u64) -> String {
    const UNITS: [(u64, &str); 5] = [
        (1 << 50, "P"),
        (1 << 40, "T"),
        (1 << 30, "G"),
        (1 << 20, "M"),
        (1 << 10, "K"),
    ];
    for (size, unit) in UNITS {
        if n >= size {
            return format!("{:.2}{unit}", n as f64 / size as f64);
        }
    }
    format!("{n}B")
}

/// Parses a size with Redis's memory units (`1gb`, `512mb`, `100k`).
fn parse_memory(text: &str) -> Option<usize> {
    let t = text.to_ascii_lowercase();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: usize = num.parse().ok()?;
    let mul = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    n.checked_mul(mul)
}

/// The parameters CONFIG GET knows, in the order it lists them.
const PARAMS: &[&str] = &[
    "bind",
    "port",
    "unixsocket",
    "unixsocketperm",
    "dbfilename",
    "databases",
    "appendonly",
    "appendfsync",
    "save",
    "maxclients",
    "requirepass",
    "proto-max-bulk-len",
    "client-query-buffer-limit",
    "max-batch",
    "write-queue-depth",
    "readers",
    "wal-checkpoint-bytes",
    "page-size",
    "checkpoint-wal-bytes",
    "checkpoint-wal-percent",
    "journal-size-limit",
    "expire-chunk",
    "read-cache-bytes",
];

fn param_value(sh: &Shared, name: &str) -> String {
    let c = &sh.config;
    match name {
        "bind" => c.bind.clone(),
        "port" => sh.tcp_port.load(Ordering::Relaxed).to_string(),
        "unixsocket" => c
            .unixsocket
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        "unixsocketperm" => c.unixsocketperm.clone().unwrap_or_else(|| "0".into()),
        "dbfilename" => c.db.display().to_string(),
        "databases" => c.databases.to_string(),
        "appendonly" => "yes".into(),
        "appendfsync" => lock(&sh.settings.appendfsync).as_str().into(),
        "save" => String::new(),
        "maxclients" => sh.settings.maxclients.load(Ordering::Relaxed).to_string(),
        "requirepass" => sh.requirepass().unwrap_or_default(),
        "proto-max-bulk-len" => sh
            .settings
            .proto_max_bulk_len
            .load(Ordering::Relaxed)
            .to_string(),
        "client-query-buffer-limit" => sh
            .settings
            .client_query_buffer_limit
            .load(Ordering::Relaxed)
            .to_string(),
        "max-batch" => sh.engine.max_batch().to_string(),
        "write-queue-depth" => c.write_queue_depth.to_string(),
        "readers" => c.readers.to_string(),
        "wal-checkpoint-bytes" => c.wal_checkpoint_bytes.to_string(),
        "page-size" => sh.engine.page_size().to_string(),
        "checkpoint-wal-bytes" => c.checkpoint_wal_bytes.to_string(),
        "checkpoint-wal-percent" => c.checkpoint_wal_percent.to_string(),
        "journal-size-limit" => c.journal_size_limit.to_string(),
        "expire-chunk" => c.expire_chunk.to_string(),
        "read-cache-bytes" => c.read_cache_bytes.to_string(),
        _ => String::new(),
    }
}

fn set_failed(name: &str, why: &str) -> CommandError {
    CommandError::Other(format!(
        "CONFIG SET failed (possibly related to argument '{name}') - {why}"
    ))
}

/// A validated CONFIG SET change, applied only once every pair of the
/// command has validated (Redis applies all or none).
pub(crate) enum Change {
    MaxClients(usize),
    ProtoMaxBulkLen(usize),
    QueryBufferLimit(usize),
    MaxBatch(usize),
    RequirePass(Option<String>),
    AppendFsync(AppendFsync),
}

/// Checks one CONFIG SET pair.
fn validate_param(name: &str, value: &str) -> Result<Change, CommandError> {
    let number = || {
        parse_memory(value)
            .ok_or_else(|| set_failed(name, "argument couldn't be parsed into an integer"))
    };
    let at_least = |n: usize, min: usize, why: &str| {
        if n < min {
            Err(set_failed(name, why))
        } else {
            Ok(n)
        }
    };
    const MEMORY_MIN: &str = "argument must be a memory value bigger than 1048576";
    Ok(match name {
        "maxclients" => Change::MaxClients(at_least(
            number()?,
            1,
            "argument must be between 1 and 4294967295 inclusive",
        )?),
        "proto-max-bulk-len" => {
            Change::ProtoMaxBulkLen(at_least(number()?, 1024 * 1024, MEMORY_MIN)?)
        }
        "client-query-buffer-limit" => {
            Change::QueryBufferLimit(at_least(number()?, 1024 * 1024, MEMORY_MIN)?)
        }
        "max-batch" => Change::MaxBatch(at_least(number()?, 1, "argument must be at least 1")?),
        "requirepass" => Change::RequirePass(if value.is_empty() {
            None
        } else {
            Some(value.to_string())
        }),
        "appendfsync" => Change::AppendFsync(value.parse().map_err(|_| {
            set_failed(
                name,
                "argument(s) must be one of the following: always, everysec, no",
            )
        })?),
        _ => return Err(set_failed(name, "can't set immutable config")),
    })
}

/// Applies a validated change.
pub(crate) fn apply_change(sh: &Shared, change: Change) {
    match change {
        Change::MaxClients(n) => sh.settings.maxclients.store(n, Ordering::Relaxed),
        Change::ProtoMaxBulkLen(n) => sh.settings.proto_max_bulk_len.store(n, Ordering::Relaxed),
        Change::QueryBufferLimit(n) => sh
            .settings
            .client_query_buffer_limit
            .store(n, Ordering::Relaxed),
        Change::MaxBatch(n) => sh.engine.set_max_batch(n),
        Change::RequirePass(p) => {
            *sh.settings
                .requirepass
                .write()
                .unwrap_or_else(|e| e.into_inner()) = p;
        }
        Change::AppendFsync(mode) => {
            sh.engine.set_appendfsync(mode);
            *lock(&sh.settings.appendfsync) = mode;
        }
    }
}

/// `CONFIG GET parameter [parameter ...] | SET parameter value [parameter
/// value ...] | RESETSTAT | HELP`
pub enum Config {
    /// CONFIG GET with glob patterns.
    Get(Vec<Bytes>),
    /// CONFIG SET pairs.
    Set(Vec<(String, String)>),
    /// CONFIG RESETSTAT.
    ResetStat,
    /// CONFIG HELP.
    Help,
}

/// A HELP reply: one status line per entry.
fn help_reply(lines: &[&str]) -> Reply {
    Reply::Array(
        lines
            .iter()
            .map(|l| Reply::Status((*l).to_string()))
            .collect(),
    )
}

impl LocalCommand for Config {
    fn parse(args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        let sub = subcommand(args)?;
        match sub.name.as_str() {
            "GET" => {
                if args.remaining() == 0 {
                    return Err(CommandError::WrongArity("config|get".into()));
                }
                Ok(Config::Get(args.rest()))
            }
            "SET" => {
                if args.remaining() == 0 || args.remaining() % 2 == 1 {
                    return Err(CommandError::WrongArity("config|set".into()));
                }
                let rest = args.rest();
                let mut pairs = Vec::new();
                for kv in rest.chunks_exact(2) {
                    let name = String::from_utf8_lossy(&kv[0]).to_ascii_lowercase();
                    if !PARAMS.contains(&name.as_str()) {
                        return Err(CommandError::Quoted {
                            before: "ERR Unknown option or number of arguments for CONFIG SET - '",
                            arg: Lossy(kv[0].to_vec()),
                            after: "'",
                        });
                    }
                    pairs.push((name, String::from_utf8_lossy(&kv[1]).into_owned()));
                }
                Ok(Config::Set(pairs))
            }
            "RESETSTAT" if args.remaining() == 0 => Ok(Config::ResetStat),
            "HELP" if args.remaining() == 0 => Ok(Config::Help),
            _ => Err(sub.unknown("CONFIG")),
        }
    }
    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        let sh = s.shared.clone();
        let reply = match self {
            Config::Get(patterns) => {
                let mut pairs = Vec::new();
                for name in PARAMS {
                    if patterns
                        .iter()
                        .any(|p| glob_match(&p.to_ascii_lowercase(), name.as_bytes()))
                    {
                        pairs.push((Reply::bulk(*name), Reply::bulk(param_value(&sh, name))));
                    }
                }
                Reply::Map(pairs)
            }
            Config::Set(pairs) => {
                let changes = pairs
                    .iter()
                    .map(|(name, value)| validate_param(name, value))
                    .collect::<Result<Vec<_>, _>>()?;
                for change in changes {
                    apply_change(&sh, change);
                }
                Reply::Ok
            }
            Config::ResetStat => {
                sh.counters.reset();
                sh.engine.reset_stats();
                Reply::Ok
            }
            Config::Help => help_reply(&[
                "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "GET <pattern>",
                "    Return parameters matching the glob-like <pattern> and their values.",
                "SET <directive> <value>",
                "    Set the configuration <directive> to <value>.",
                "RESETSTAT",
                "    Reset statistics reported by the INFO command.",
                "HELP",
                "    Print this help.",
            ]),
        };
        Ok(Plan::Reply(reply))
    }
}

/// This family's rows of the command table (see [`super::table`]).
#[rustfmt::skip]
pub(super) fn commands() -> Vec<super::Spec> {
    use super::Spec;
    vec![
        Spec::local::<Config>("config", -2, &[], [0, 0, 0], "server", "A container for server configuration commands.")
            .with_subcommands("CONFIG", &[("get", -3), ("help", 2), ("resetstat", 2), ("set", -4)]),
        Spec::read::<DbSize>("dbsize", 1, &["fast"], [0, 0, 0], "server", "Returns the number of keys in the database."),
        Spec::write::<FlushAll>("flushall", -1, &[], [0, 0, 0], "server", "Removes all keys from all databases."),
        Spec::write::<FlushDb>("flushdb", -1, &[], [0, 0, 0], "server", "Remove all keys from the current database."),
        Spec::read::<Info>("info", -1, &["loading", "stale"], [0, 0, 0], "server", "Returns information and statistics about the server."),
        Spec::local::<Shutdown>("shutdown", -1, &["admin", "noscript", "loading", "stale", "no_multi", "allow_busy"], [0, 0, 0], "server", "Synchronously saves the database(s) to disk and shuts down the Redis server."),
        Spec::local::<Save>("save", 1, &["admin", "noscript", "no_async_loading", "no_multi"], [0, 0, 0], "server", "Synchronously saves the database(s) to disk."),
        Spec::local::<BgSave>("bgsave", -1, &["admin", "noscript", "no_async_loading"], [0, 0, 0], "server", "Asynchronously saves the database(s) to disk."),
        Spec::local::<LastSave>("lastsave", 1, &["loading", "stale", "fast"], [0, 0, 0], "server", "Returns the Unix timestamp of the last successful save to disk."),
        Spec::local::<Debug>("debug", -2, &["admin", "noscript", "loading", "stale"], [0, 0, 0], "server", "A container for debugging commands."),
        Spec::write::<SwapDb>("swapdb", 3, &["fast"], [0, 0, 0], "server", "Swaps two Redis databases."),
        Spec::local::<Time>("time", 1, &["loading", "stale", "fast"], [0, 0, 0], "server", "Returns the server time."),
    ]
}

//! The server's parameters under their redis.conf names: what CONFIG GET,
//! CONFIG SET and CONFIG REWRITE read and write (the command itself is
//! `cmd::config`), and what the configuration file's `[redis]` table sets.
//!
//! Tools and client libraries read and set parameters by redis's names
//! (`CONFIG GET maxmemory`, `CONFIG SET slowlog-log-slower-than 0`), and test
//! suites set them to provoke behaviour. Every parameter of [`PARAMS`] has
//! redis-server 7.0's name (and alias, where redis has one: `CONFIG GET
//! *ziplist*` finds the old names too), its type, its validation and error
//! texts, and its default. A parameter is one of three things here:
//!
//! - **live**: read from and written to the running server's own settings
//!   (`appendfsync`, `maxclients`, `requirepass`, `port`, respite's
//!   `max-batch`...), as before;
//! - **acted on**: stored here and obeyed (`slowlog-*`, `latency-*`,
//!   `timeout`, `tcp-keepalive`, `notify-keyspace-events`);
//! - **stored**: validated and kept, so a tool that sets and reads it back
//!   sees what it set, with a documented meaning for a disk-backed store
//!   (`maxmemory-clients`: respite evicts no client, see docs/commands.md).
//!
//! The encoding thresholds OBJECT ENCODING reports (`hash-max-listpack-*`,
//! `set-max-intset-entries`, `zset-max-listpack-*`) are acted on: the
//! engine's writes follow them (see `respite_engine::encoding`).
//!
//! The configuration file is TOML (see `crate::config`). CONFIG REWRITE
//! writes the live parameters back under their TOML keys (`max_batch`,
//! `appendfsync`...) and the stored ones into the file's `[redis]` table
//! under their redis names, editing the file line by line so its comments
//! stay where they were; the file is re-read and checked before it replaces
//! the old one.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::RwLock;

use bytes::Bytes;
use respite_engine::glob::glob_match;
use respite_engine::AppendFsync;

use crate::error::{CommandError, Lossy};
use crate::limits::parse_memory;
use crate::reply::Reply;
use crate::state::Shared;
use crate::sync::lock;

/// How a parameter's value is checked and shown.
#[derive(Clone, Copy)]
enum Kind {
    /// `yes` / `no`.
    Bool,
    /// A signed integer within bounds.
    Int(i64, i64),
    /// An unsigned integer within bounds (printed unsigned).
    UInt(u64, u64),
    /// A byte count with redis's units (`1gb`), within bounds.
    Memory(u64, u64),
    /// A byte count, or a percentage (`10%`, up to the first bound's
    /// magnitude) kept as redis keeps it, negative (`maxmemory-clients`).
    MemoryPercent(i64, i64),
    /// One of these words.
    Enum(&'static [&'static str]),
    /// Any string.
    Str,
    /// `save`: pairs of seconds and changes.
    Save,
    /// `notify-keyspace-events`: redis's event class letters.
    Notify,
    /// `latency-tracking-info-percentiles`: numbers from 0 to 100.
    Percentiles,
    /// An octal permission (`unixsocketperm`).
    Octal,
    /// `client-output-buffer-limit`: `<class> <hard> <soft> <seconds>`
    /// groups (see `crate::output`).
    OutputLimits,
    /// `shutdown-on-sigint` / `-sigterm`: `default` or flags.
    ShutdownFlags,
    /// `oom-score-adj-values`: three integers from -2000 to 2000.
    OomValues,
    /// `replicaof`: `<host> <port>` or `no one` (shown empty).
    ReplicaOf,
    /// `bind`: up to 16 addresses.
    Bind,
}

/// Who may change a parameter.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    /// CONFIG SET may.
    Mutable,
    /// Only the configuration file, at start.
    Immutable,
    /// Changeable in redis, decided by what respite is here (the encoding
    /// thresholds, `appendonly`, respite's own start-up settings): CONFIG
    /// SET of the value in force succeeds and changes nothing, so a tool
    /// that writes back what it read works; any other value is refused as
    /// immutable.
    Fixed,
    /// redis's protected configs (`dir`, `dbfilename`): refused, as redis
    /// refuses them unless `enable-protected-configs` is set.
    Protected,
}

/// Where a parameter's value lives.
#[derive(Clone, Copy)]
enum Source {
    /// Kept in [`Params`].
    Stored,
    /// Read from the running server.
    Live(fn(&Shared) -> String),
}

/// One parameter.
struct Param {
    name: &'static str,
    alias: Option<&'static str>,
    /// redis's HIDDEN_CONFIG: left out of pattern matches (`CONFIG GET
    /// *`), answered by its exact name.
    hidden: bool,
    kind: Kind,
    access: Access,
    default: &'static str,
    source: Source,
}

const INT_MAX: i64 = i32::MAX as i64;
const LONG_MAX: i64 = i64::MAX;

const fn stored(name: &'static str, kind: Kind, default: &'static str) -> Param {
    Param {
        name,
        alias: None,
        hidden: false,
        kind,
        access: Access::Mutable,
        default,
        source: Source::Stored,
    }
}

const fn fixed(name: &'static str, kind: Kind, default: &'static str) -> Param {
    Param {
        name,
        alias: None,
        hidden: false,
        kind,
        access: Access::Immutable,
        default,
        source: Source::Stored,
    }
}

const fn live(name: &'static str, kind: Kind, access: Access, get: fn(&Shared) -> String) -> Param {
    Param {
        name,
        alias: None,
        hidden: false,
        kind,
        access,
        default: "",
        source: Source::Live(get),
    }
}

const fn hidden(p: Param) -> Param {
    Param { hidden: true, ..p }
}

const fn alias(p: Param, alias: &'static str) -> Param {
    Param {
        alias: Some(alias),
        ..p
    }
}

const MAXMEMORY_POLICIES: &[&str] = &[
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "noeviction",
];

/// Every parameter CONFIG knows, in CONFIG GET's order.
static PARAMS: &[Param] = &[
    // The running server's own settings.
    // CONFIG SET rebinds the listener (see `crate::listener::Binding`).
    live("bind", Kind::Bind, Access::Mutable, |s| s.binding.bind()),
    live("port", Kind::Int(0, 65535), Access::Mutable, |s| {
        s.tcp_port.load(Ordering::Relaxed).to_string()
    }),
    live("unixsocket", Kind::Str, Access::Immutable, |s| {
        s.config
            .unixsocket
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    }),
    live("unixsocketperm", Kind::Octal, Access::Immutable, |s| {
        s.config
            .unixsocketperm
            .clone()
            .unwrap_or_else(|| "0".into())
    }),
    live("dbfilename", Kind::Str, Access::Protected, |s| {
        s.config.db.display().to_string()
    }),
    live("dir", Kind::Str, Access::Protected, |_| {
        std::env::current_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_default()
    }),
    live("databases", Kind::Int(1, INT_MAX), Access::Immutable, |s| {
        s.config.databases.to_string()
    }),
    live("appendonly", Kind::Bool, Access::Fixed, |_| "yes".into()),
    live(
        "appendfsync",
        Kind::Enum(&["always", "everysec", "no"]),
        Access::Mutable,
        |s| lock(&s.settings.appendfsync).as_str().into(),
    ),
    live(
        "maxclients",
        Kind::UInt(1, u32::MAX as u64),
        Access::Mutable,
        |s| s.settings.maxclients.load(Ordering::Relaxed).to_string(),
    ),
    live("requirepass", Kind::Str, Access::Mutable, |s| {
        s.requirepass().unwrap_or_default()
    }),
    live("aclfile", Kind::Str, Access::Immutable, |s| {
        s.config
            .aclfile
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    }),
    live("protected-mode", Kind::Bool, Access::Mutable, |s| {
        if s.settings.protected_mode.load(Ordering::Relaxed) {
            "yes".into()
        } else {
            "no".into()
        }
    }),
    // Redis allows up to LONG_MAX; respite up to what one SQLite row holds
    // (`respite_engine::MAX_STRING_LEN`), so a string a client may build
    // can always be stored.
    live(
        "proto-max-bulk-len",
        Kind::Memory(1024 * 1024, respite_engine::MAX_STRING_LEN as u64),
        Access::Mutable,
        |s| {
            s.settings
                .proto_max_bulk_len
                .load(Ordering::Relaxed)
                .to_string()
        },
    ),
    // respite's own: a budget for the database's live pages plus its WAL
    // (see `respite_engine::disk`); 0 is none.
    live(
        "maxdisk",
        Kind::Memory(0, LONG_MAX as u64),
        Access::Mutable,
        |s| s.engine.disk().maxdisk().to_string(),
    ),
    live(
        "client-query-buffer-limit",
        Kind::Memory(1024 * 1024, LONG_MAX as u64),
        Access::Mutable,
        |s| {
            s.settings
                .client_query_buffer_limit
                .load(Ordering::Relaxed)
                .to_string()
        },
    ),
    live(
        "client-output-buffer-limit",
        Kind::OutputLimits,
        Access::Mutable,
        |s| crate::limits::format_limits(&lock(&s.settings.output_limits)),
    ),
    live(
        "tcp-backlog",
        Kind::Int(0, INT_MAX),
        Access::Immutable,
        |s| s.config.tcp_backlog.to_string(),
    ),
    live(
        "enable-debug-command",
        Kind::Enum(&["no", "yes", "local"]),
        Access::Immutable,
        |s| {
            match s.config.enable_debug_command {
                crate::config::DebugCommand::No => "no",
                crate::config::DebugCommand::Yes => "yes",
                crate::config::DebugCommand::Local => "local",
            }
            .into()
        },
    ),
    live("io-threads", Kind::Int(1, 128), Access::Immutable, |s| {
        s.config.io_threads.max(1).to_string()
    }),
    // Acted on.
    stored("timeout", Kind::Int(0, INT_MAX), "0"),
    stored("slowlog-log-slower-than", Kind::Int(-1, LONG_MAX), "10000"),
    stored("slowlog-max-len", Kind::UInt(0, LONG_MAX as u64), "128"),
    stored("latency-tracking", Kind::Bool, "yes"),
    stored(
        "latency-tracking-info-percentiles",
        Kind::Percentiles,
        "50 99 99.9",
    ),
    stored("latency-monitor-threshold", Kind::Int(0, LONG_MAX), "0"),
    // Read by the listener for each new TCP connection.
    stored("tcp-keepalive", Kind::Int(0, INT_MAX), "300"),
    // Acted on: the limit on the database's live bytes, and eviction
    // (see `respite_engine::evict`).
    stored("maxmemory", Kind::Memory(0, u64::MAX), "0"),
    stored(
        "maxmemory-policy",
        Kind::Enum(MAXMEMORY_POLICIES),
        "noeviction",
    ),
    stored("maxmemory-samples", Kind::Int(1, INT_MAX), "5"),
    // Stored, with the meaning docs/commands.md gives them.
    stored(
        "maxmemory-clients",
        Kind::MemoryPercent(-100, LONG_MAX),
        "0",
    ),
    stored("notify-keyspace-events", Kind::Notify, ""),
    stored("hz", Kind::Int(0, INT_MAX), "10"),
    stored("dynamic-hz", Kind::Bool, "yes"),
    stored(
        "loglevel",
        Kind::Enum(&["debug", "verbose", "notice", "warning", "nothing"]),
        "notice",
    ),
    alias(
        stored("busy-reply-threshold", Kind::Int(0, LONG_MAX), "5000"),
        "lua-time-limit",
    ),
    // respite's own: the most memory one Lua interpreter may hold (0: no
    // limit; see `cmd::scripting`).
    stored(
        "lua-memory-limit",
        Kind::Memory(0, LONG_MAX as u64),
        "536870912",
    ),
    stored("save", Kind::Save, ""),
    stored("activerehashing", Kind::Bool, "yes"),
    stored("active-expire-effort", Kind::Int(1, 10), "1"),
    stored("lazyfree-lazy-eviction", Kind::Bool, "no"),
    stored("lazyfree-lazy-expire", Kind::Bool, "no"),
    stored("lazyfree-lazy-server-del", Kind::Bool, "no"),
    stored("lazyfree-lazy-user-del", Kind::Bool, "no"),
    stored("lazyfree-lazy-user-flush", Kind::Bool, "no"),
    stored("lfu-log-factor", Kind::Int(0, INT_MAX), "10"),
    stored("lfu-decay-time", Kind::Int(0, INT_MAX), "1"),
    alias(
        stored("replica-read-only", Kind::Bool, "yes"),
        "slave-read-only",
    ),
    stored("acllog-max-len", Kind::UInt(0, LONG_MAX as u64), "128"),
    stored("list-compress-depth", Kind::Int(0, INT_MAX), "0"),
    stored(
        "stream-node-max-bytes",
        Kind::Memory(0, LONG_MAX as u64),
        "4096",
    ),
    stored("stream-node-max-entries", Kind::Int(0, LONG_MAX), "100"),
    // Stored and shown, with no effect: respite has no replication, AOF
    // rewrite, RDB file, active defragmentation, cluster bus or OOM score
    // to act on. Tools and clients set them (a replica's `masterauth`,
    // `repl-backlog-size`, `min-replicas-to-write`...) and read them back;
    // docs/commands.md lists them.
    stored("masterauth", Kind::Str, ""),
    stored("masteruser", Kind::Str, ""),
    alias(fixed("replicaof", Kind::ReplicaOf, ""), "slaveof"),
    stored(
        "repl-backlog-size",
        Kind::Memory(1, LONG_MAX as u64),
        "1048576",
    ),
    stored("repl-backlog-ttl", Kind::Int(0, LONG_MAX), "3600"),
    stored("repl-timeout", Kind::Int(1, INT_MAX), "60"),
    alias(
        stored("repl-ping-replica-period", Kind::Int(1, INT_MAX), "10"),
        "repl-ping-slave-period",
    ),
    stored("repl-disable-tcp-nodelay", Kind::Bool, "no"),
    stored("repl-diskless-sync", Kind::Bool, "yes"),
    stored("repl-diskless-sync-delay", Kind::Int(0, INT_MAX), "5"),
    stored(
        "repl-diskless-sync-max-replicas",
        Kind::Int(0, INT_MAX),
        "0",
    ),
    stored(
        "repl-diskless-load",
        Kind::Enum(&["disabled", "on-empty-db", "swapdb"]),
        "disabled",
    ),
    alias(
        stored("replica-serve-stale-data", Kind::Bool, "yes"),
        "slave-serve-stale-data",
    ),
    alias(
        stored("replica-lazy-flush", Kind::Bool, "no"),
        "slave-lazy-flush",
    ),
    alias(
        stored("replica-ignore-maxmemory", Kind::Bool, "yes"),
        "slave-ignore-maxmemory",
    ),
    stored("replica-ignore-disk-write-errors", Kind::Bool, "no"),
    alias(
        stored("replica-priority", Kind::Int(0, INT_MAX), "100"),
        "slave-priority",
    ),
    alias(
        stored("replica-announce-ip", Kind::Str, ""),
        "slave-announce-ip",
    ),
    alias(
        stored("replica-announce-port", Kind::Int(0, 65535), "0"),
        "slave-announce-port",
    ),
    stored("replica-announced", Kind::Bool, "yes"),
    alias(
        stored("min-replicas-to-write", Kind::Int(0, INT_MAX), "0"),
        "min-slaves-to-write",
    ),
    alias(
        stored("min-replicas-max-lag", Kind::Int(0, INT_MAX), "10"),
        "min-slaves-max-lag",
    ),
    stored(
        "propagation-error-behavior",
        Kind::Enum(&["ignore", "panic", "panic-on-replicas"]),
        "ignore",
    ),
    stored("stop-writes-on-bgsave-error", Kind::Bool, "yes"),
    stored("rdbcompression", Kind::Bool, "yes"),
    stored("rdb-del-sync-files", Kind::Bool, "no"),
    stored("rdb-save-incremental-fsync", Kind::Bool, "yes"),
    stored("aof-rewrite-incremental-fsync", Kind::Bool, "yes"),
    stored("aof-load-truncated", Kind::Bool, "yes"),
    stored("aof-use-rdb-preamble", Kind::Bool, "yes"),
    stored("aof-timestamp-enabled", Kind::Bool, "no"),
    stored("aof-disable-auto-gc", Kind::Bool, "no"),
    stored("no-appendfsync-on-rewrite", Kind::Bool, "no"),
    stored("auto-aof-rewrite-percentage", Kind::Int(0, INT_MAX), "100"),
    stored(
        "auto-aof-rewrite-min-size",
        Kind::Memory(0, LONG_MAX as u64),
        "67108864",
    ),
    stored("activedefrag", Kind::Bool, "no"),
    stored("active-defrag-cycle-min", Kind::Int(1, 99), "1"),
    stored("active-defrag-cycle-max", Kind::Int(1, 99), "25"),
    stored("active-defrag-threshold-lower", Kind::Int(0, 1000), "10"),
    stored("active-defrag-threshold-upper", Kind::Int(0, 1000), "100"),
    stored(
        "active-defrag-ignore-bytes",
        Kind::Memory(1, LONG_MAX as u64),
        "104857600",
    ),
    stored(
        "active-defrag-max-scan-fields",
        Kind::UInt(1, LONG_MAX as u64),
        "1000",
    ),
    stored("jemalloc-bg-thread", Kind::Bool, "yes"),
    stored("maxmemory-eviction-tenacity", Kind::Int(0, 100), "10"),
    stored(
        "hll-sparse-max-bytes",
        Kind::Memory(0, LONG_MAX as u64),
        "3000",
    ),
    stored(
        "tracking-table-max-keys",
        Kind::UInt(0, LONG_MAX as u64),
        "1000000",
    ),
    stored(
        "acl-pubsub-default",
        Kind::Enum(&["allchannels", "resetchannels"]),
        "resetchannels",
    ),
    stored(
        "sanitize-dump-payload",
        Kind::Enum(&["no", "yes", "clients"]),
        "no",
    ),
    stored(
        "oom-score-adj",
        Kind::Enum(&["no", "yes", "relative", "absolute"]),
        "no",
    ),
    stored("oom-score-adj-values", Kind::OomValues, "0 200 800"),
    stored("crash-log-enabled", Kind::Bool, "yes"),
    stored("crash-memcheck-enabled", Kind::Bool, "yes"),
    stored("shutdown-timeout", Kind::Int(0, INT_MAX), "10"),
    stored("shutdown-on-sigint", Kind::ShutdownFlags, "default"),
    stored("shutdown-on-sigterm", Kind::ShutdownFlags, "default"),
    stored("bind-source-addr", Kind::Str, ""),
    stored("ignore-warnings", Kind::Str, ""),
    stored(
        "proc-title-template",
        Kind::Str,
        "{title} {listen-addr} {server-mode}",
    ),
    // redis's hidden test hooks: answered by exact name only.
    hidden(stored(
        "key-load-delay",
        Kind::Int(i32::MIN as i64, INT_MAX),
        "0",
    )),
    hidden(stored(
        "rdb-key-save-delay",
        Kind::Int(i32::MIN as i64, INT_MAX),
        "0",
    )),
    hidden(stored(
        "loading-process-events-interval-bytes",
        Kind::Int(1024, INT_MAX),
        "2097152",
    )),
    hidden(stored("watchdog-period", Kind::Int(0, INT_MAX), "0")),
    hidden(stored("use-exit-on-panic", Kind::Bool, "no")),
    // The encoding thresholds, acted on by the engine's writes (OBJECT
    // ENCODING, and the HSCAN/SSCAN/ZSCAN of a compact collection: see
    // `respite_engine::encoding`). Lists are always `quicklist`, as in
    // redis 7.0, whatever `list-max-listpack-size` says.
    alias(
        stored(
            "list-max-listpack-size",
            Kind::Int(i32::MIN as i64, INT_MAX),
            "-2",
        ),
        "list-max-ziplist-size",
    ),
    alias(
        stored(
            "hash-max-listpack-entries",
            Kind::UInt(0, LONG_MAX as u64),
            "512",
        ),
        "hash-max-ziplist-entries",
    ),
    alias(
        stored(
            "hash-max-listpack-value",
            Kind::Memory(0, LONG_MAX as u64),
            "64",
        ),
        "hash-max-ziplist-value",
    ),
    stored(
        "set-max-intset-entries",
        Kind::UInt(0, LONG_MAX as u64),
        "512",
    ),
    alias(
        stored(
            "zset-max-listpack-entries",
            Kind::UInt(0, LONG_MAX as u64),
            "128",
        ),
        "zset-max-ziplist-entries",
    ),
    alias(
        stored(
            "zset-max-listpack-value",
            Kind::Memory(0, LONG_MAX as u64),
            "64",
        ),
        "zset-max-ziplist-value",
    ),
    fixed("daemonize", Kind::Bool, "no"),
    fixed(
        "supervised",
        Kind::Enum(&["upstart", "systemd", "auto", "no"]),
        "no",
    ),
    fixed("pidfile", Kind::Str, ""),
    fixed("logfile", Kind::Str, ""),
    fixed("cluster-enabled", Kind::Bool, "no"),
    fixed("rdbchecksum", Kind::Bool, "yes"),
    fixed("always-show-logo", Kind::Bool, "no"),
    fixed("set-proc-title", Kind::Bool, "yes"),
    fixed("disable-thp", Kind::Bool, "yes"),
    fixed("io-threads-do-reads", Kind::Bool, "no"),
    fixed("syslog-enabled", Kind::Bool, "no"),
    fixed("syslog-ident", Kind::Str, "redis"),
    fixed(
        "syslog-facility",
        Kind::Enum(&[
            "user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7",
        ]),
        "local0",
    ),
    fixed("appendfilename", Kind::Str, "appendonly.aof"),
    fixed("appenddirname", Kind::Str, "appendonlydir"),
    fixed(
        "enable-protected-configs",
        Kind::Enum(&["no", "yes", "local"]),
        "no",
    ),
    fixed(
        "enable-module-command",
        Kind::Enum(&["no", "yes", "local"]),
        "no",
    ),
    fixed("socket-mark-id", Kind::UInt(0, u32::MAX as u64), "0"),
    fixed("server_cpulist", Kind::Str, ""),
    fixed("bio_cpulist", Kind::Str, ""),
    fixed("aof_rewrite_cpulist", Kind::Str, ""),
    fixed("bgsave_cpulist", Kind::Str, ""),
    // respite's own, under the TOML names with dashes.
    live(
        "max-batch",
        Kind::UInt(1, u32::MAX as u64),
        Access::Mutable,
        |s| s.engine.max_batch().to_string(),
    ),
    live("write-queue-depth", Kind::Str, Access::Fixed, |s| {
        s.config.write_queue_depth.to_string()
    }),
    live("readers", Kind::Str, Access::Fixed, |s| {
        s.config.readers.to_string()
    }),
    live("wal-checkpoint-bytes", Kind::Str, Access::Fixed, |s| {
        s.config.wal_checkpoint_bytes.to_string()
    }),
    live("page-size", Kind::Str, Access::Fixed, |s| {
        s.engine.page_size().to_string()
    }),
    live("checkpoint-wal-bytes", Kind::Str, Access::Fixed, |s| {
        s.config.checkpoint_wal_bytes.to_string()
    }),
    live("checkpoint-wal-percent", Kind::Str, Access::Fixed, |s| {
        s.config.checkpoint_wal_percent.to_string()
    }),
    live("checkpoint", Kind::Str, Access::Fixed, |s| {
        s.engine.checkpoint_mode().as_str().to_string()
    }),
    live("journal-size-limit", Kind::Str, Access::Fixed, |s| {
        s.config.journal_size_limit.to_string()
    }),
    live("expire-chunk", Kind::Str, Access::Fixed, |s| {
        s.config.expire_chunk.to_string()
    }),
    live("read-cache-bytes", Kind::Str, Access::Fixed, |s| {
        s.config.read_cache_bytes.to_string()
    }),
    live("disk-reserve-bytes", Kind::Str, Access::Fixed, |s| {
        s.config.disk_reserve_bytes.to_string()
    }),
];

/// The live parameters CONFIG REWRITE writes at their own TOML keys.
const TOML_KEYS: &[(&str, &str)] = &[
    ("protected-mode", "protected_mode"),
    ("appendfsync", "appendfsync"),
    ("maxclients", "maxclients"),
    ("requirepass", "requirepass"),
    ("proto-max-bulk-len", "proto_max_bulk_len"),
    ("client-query-buffer-limit", "client_query_buffer_limit"),
    ("client-output-buffer-limit", "client_output_buffer_limit"),
    ("max-batch", "max_batch"),
    ("maxdisk", "maxdisk"),
];

fn find(name: &[u8]) -> Option<&'static Param> {
    PARAMS.iter().find(|p| {
        p.name.as_bytes().eq_ignore_ascii_case(name)
            || p.alias
                .is_some_and(|a| a.as_bytes().eq_ignore_ascii_case(name))
    })
}

/// The values of the stored parameters.
pub struct Params {
    values: RwLock<HashMap<&'static str, String>>,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            values: RwLock::new(
                PARAMS
                    .iter()
                    .filter(|p| matches!(p.source, Source::Stored))
                    .map(|p| (p.name, p.default.to_string()))
                    .collect(),
            ),
        }
    }
}

impl Params {
    /// A stored parameter's value ("" for an unknown name).
    pub fn get(&self, name: &str) -> String {
        self.values
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
            .unwrap_or_default()
    }

    fn set(&self, name: &'static str, value: String) {
        self.values
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name, value);
    }
}

/// A parameter's value as CONFIG GET shows it.
pub fn value(sh: &Shared, name: &str) -> String {
    match find(name.as_bytes()) {
        Some(p) => match p.source {
            Source::Stored if matches!(p.kind, Kind::Notify) => {
                let kept = sh.params.get(p.name);
                let flags = respite_engine::notify::parse_classes(&kept).unwrap_or(0);
                respite_engine::notify::format_classes(flags)
            }
            Source::Stored => sh.params.get(p.name),
            Source::Live(get) => get(sh),
        },
        None => String::new(),
    }
}

/// Formats a percentile as redis's `%f` then trimmed (`99.9`, `50`).
fn trim_double(p: f64) -> String {
    let s = format!("{p:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// Validates a value for a parameter; the value CONFIG GET will show, or
/// redis's reason.
fn validate(p: &Param, raw: &str) -> Result<String, String> {
    let between =
        |lo: String, hi: String| format!("argument must be between {lo} and {hi} inclusive");
    match p.kind {
        Kind::Bool => match raw.to_ascii_lowercase().as_str() {
            v @ ("yes" | "no") => Ok(v.to_string()),
            _ => Err("argument must be 'yes' or 'no'".into()),
        },
        Kind::Int(lo, hi) => {
            let n = crate::args::parse_i64(raw.as_bytes())
                .ok_or("argument couldn't be parsed into an integer")?;
            if n < lo || n > hi {
                return Err(between(lo.to_string(), hi.to_string()));
            }
            Ok(n.to_string())
        }
        Kind::UInt(lo, hi) => {
            let n = crate::args::parse_i64(raw.as_bytes())
                .ok_or("argument couldn't be parsed into an integer")?;
            // redis reads it as a long long and compares unsigned.
            let n = n as u64;
            if n < lo || n > hi {
                return Err(between(lo.to_string(), hi.to_string()));
            }
            Ok(n.to_string())
        }
        Kind::Memory(lo, hi) => {
            let n = parse_memory(raw).ok_or("argument must be a memory value")?;
            if n < lo || n > hi {
                return Err(between(lo.to_string(), hi.to_string()));
            }
            Ok(n.to_string())
        }
        Kind::Enum(words) => {
            let v = raw.to_ascii_lowercase();
            if words.contains(&v.as_str()) {
                Ok(v)
            } else {
                Err(format!(
                    "argument(s) must be one of the following: {}",
                    words.join(", ")
                ))
            }
        }
        Kind::MemoryPercent(lo, hi) => {
            // redis tries a memory value first, then `N%`, kept negative.
            let n = match parse_memory(raw) {
                Some(n) => i64::try_from(n).unwrap_or(i64::MAX),
                None => raw
                    .strip_suffix('%')
                    .filter(|d| !d.is_empty())
                    .and_then(|d| crate::args::parse_i64(d.as_bytes()))
                    .filter(|n| *n >= 0)
                    .map(|n| -n)
                    .ok_or("argument must be a memory or percent value")?,
            };
            if n < 0 {
                if n < lo {
                    return Err(format!(
                        "percentage argument must be less or equal to {}",
                        -lo
                    ));
                }
                return Ok(format!("{}%", -n));
            }
            if n > hi {
                return Err(between(lo.to_string(), hi.to_string()));
            }
            Ok(n.to_string())
        }
        Kind::Str => Ok(raw.to_string()),
        Kind::Bind => {
            // redis's CONFIG_BINDADDR_MAX.
            if raw.split_whitespace().count() > 16 {
                return Err("Too many bind addresses specified.".into());
            }
            Ok(raw.split_whitespace().collect::<Vec<_>>().join(" "))
        }
        Kind::ReplicaOf => {
            let words: Vec<&str> = raw.split_whitespace().collect();
            let [host, port] = words[..] else {
                return Err("wrong number of arguments".into());
            };
            if host.eq_ignore_ascii_case("no") && port.eq_ignore_ascii_case("one") {
                return Ok(String::new());
            }
            match port.parse::<i64>() {
                Ok(p) if (0..=65535).contains(&p) => Ok(format!("{host} {p}")),
                _ => Err("Invalid master port".into()),
            }
        }
        Kind::ShutdownFlags => {
            const FLAGS: [&str; 4] = ["save", "nosave", "now", "force"];
            let mut set = [false; 4];
            for w in raw.split_whitespace() {
                let w = w.to_ascii_lowercase();
                if w == "default" {
                    continue;
                }
                match FLAGS.iter().position(|f| *f == w) {
                    Some(i) => set[i] = true,
                    None => {
                        return Err("argument(s) must be one of the following: default, save, nosave, now, force".into())
                    }
                }
            }
            if set[0] && set[1] {
                return Err("shutdown options SAVE and NOSAVE can't be used simultaneously".into());
            }
            let shown: Vec<&str> = FLAGS
                .iter()
                .zip(set)
                .filter(|(_, on)| *on)
                .map(|(f, _)| *f)
                .collect();
            if shown.is_empty() {
                Ok("default".into())
            } else {
                Ok(shown.join(" "))
            }
        }
        Kind::OomValues => {
            let words: Vec<&str> = raw.split_whitespace().collect();
            if words.len() != 3 {
                return Err("wrong number of arguments".into());
            }
            let mut out = Vec::new();
            for w in words {
                match w.parse::<i64>() {
                    Ok(v) if (-2000..=2000).contains(&v) => out.push(v.to_string()),
                    _ => return Err(
                        "Invalid oom-score-adj-values, elements must be between -2000 and 2000."
                            .into(),
                    ),
                }
            }
            Ok(out.join(" "))
        }
        Kind::Octal => u32::from_str_radix(raw, 8)
            .ok()
            .filter(|n| *n <= 0o777)
            .map(|n| format!("{n:o}"))
            .ok_or_else(|| "argument couldn't be parsed as an octal number".into()),
        Kind::Save => {
            let words: Vec<&str> = raw.split_whitespace().collect();
            let ok = words.len().is_multiple_of(2)
                && words.iter().enumerate().all(|(i, w)| {
                    w.parse::<i64>()
                        .is_ok_and(|v| if i % 2 == 0 { v >= 1 } else { v >= 0 })
                });
            if !ok {
                return Err("Invalid save parameters".into());
            }
            Ok(words.join(" "))
        }
        // Kept as redis shows it, except that `n` stays after an `A`
        // (which redis's display hides, though the class is on): CONFIG
        // GET shows it through `format_classes` again (see `value`).
        Kind::Notify => match respite_engine::notify::parse_classes(raw) {
            Some(flags) => {
                use respite_engine::notify::{format_classes, ALL, NEW};
                let mut kept = format_classes(flags);
                if flags & ALL == ALL && flags & NEW != 0 {
                    kept.insert(1, 'n');
                }
                Ok(kept)
            }
            None => Err("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".into()),
        },
        Kind::OutputLimits => {
            // Over redis's defaults; CONFIG SET parses it again over the
            // limits in force (a group not named keeps its value).
            let defaults =
                crate::limits::parse_limits(crate::limits::DEFAULT_LIMITS, Default::default())?;
            let limits = crate::limits::parse_limits(raw, defaults)?;
            Ok(crate::limits::format_limits(&limits))
        }
        Kind::Percentiles => {
            let mut out = Vec::new();
            for w in raw.split_whitespace() {
                let v: f64 = w.parse().map_err(|_| {
                    "Invalid latency-tracking-info-percentiles parameters".to_string()
                })?;
                if !(0.0..=100.0).contains(&v) {
                    return Err(
                        "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]"
                            .into(),
                    );
                }
                out.push(trim_double(v));
            }
            Ok(out.join(" "))
        }
    }
}

fn set_failed(name: &str, why: &str) -> CommandError {
    CommandError::Other(format!(
        "CONFIG SET failed (possibly related to argument '{name}') - {why}"
    ))
}

/// A validated CONFIG SET change of a live setting, applied only once every
/// pair of the command has validated (redis applies all or none). A SIGHUP
/// reload applies its changes the same way (see `crate::service`).
pub(crate) enum Change {
    MaxClients(usize),
    ProtoMaxBulkLen(usize),
    QueryBufferLimit(usize),
    OutputLimits([crate::limits::ClassLimit; 3]),
    MaxBatch(usize),
    RequirePass(Option<String>),
    ProtectedMode(bool),
    MaxDisk(u64),
    AppendFsync(AppendFsync),
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
        Change::OutputLimits(limits) => {
            *lock(&sh.settings.output_limits) = limits;
            sh.settings.output_limit.store(limits[0]);
        }
        Change::ProtectedMode(on) => sh.settings.protected_mode.store(on, Ordering::Relaxed),
        Change::MaxDisk(bytes) => sh.engine.disk().set_maxdisk(bytes),
        Change::RequirePass(p) => {
            sh.acl.set_requirepass(p.as_deref());
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

/// Sets a parameter already validated (`value` in CONFIG GET's form), and
/// makes the server act on it.
fn apply(sh: &Shared, p: &'static Param, value: String) {
    let num = || value.parse::<u64>().unwrap_or(0);
    match p.source {
        Source::Live(_) => {
            let n = num() as usize;
            let change = match p.name {
                "maxclients" => Change::MaxClients(n),
                "proto-max-bulk-len" => Change::ProtoMaxBulkLen(n),
                "client-query-buffer-limit" => Change::QueryBufferLimit(n),
                "max-batch" => Change::MaxBatch(n),
                "requirepass" => Change::RequirePass(Some(value.clone()).filter(|v| !v.is_empty())),
                "protected-mode" => Change::ProtectedMode(value == "yes"),
                "maxdisk" => Change::MaxDisk(num()),
                "client-output-buffer-limit" => {
                    let current = *lock(&sh.settings.output_limits);
                    match crate::limits::parse_limits(&value, current) {
                        Ok(limits) => Change::OutputLimits(limits),
                        Err(_) => return,
                    }
                }
                "appendfsync" => match value.parse() {
                    Ok(mode) => Change::AppendFsync(mode),
                    Err(_) => return,
                },
                _ => return,
            };
            apply_change(sh, change);
        }
        Source::Stored => {
            acted_on(sh, p.name, &value);
            sh.params.set(p.name, value);
        }
    }
}

/// Hands a stored parameter to the part of the server that obeys it.
fn acted_on(sh: &Shared, name: &str, value: &str) {
    let st = &sh.stats;
    match name {
        "slowlog-log-slower-than" => st
            .slowlog_slower_than
            .store(value.parse().unwrap_or(10_000), Ordering::Relaxed),
        "slowlog-max-len" => {
            st.slowlog_max_len
                .store(value.parse().unwrap_or(128), Ordering::Relaxed);
            st.slowlog_trim();
        }
        "latency-tracking" => st.latency_tracking.store(value == "yes", Ordering::Relaxed),
        "tracking-table-max-keys" => {
            sh.tracking.set_max_keys(value.parse().unwrap_or(1_000_000));
            sh.tracking.limit(sh);
        }
        "latency-monitor-threshold" => st
            .latency_monitor_threshold
            .store(value.parse().unwrap_or(0), Ordering::Relaxed),
        "latency-tracking-info-percentiles" => {
            *lock(&st.percentiles) = value
                .split_whitespace()
                .filter_map(|w| w.parse().ok())
                .collect();
        }
        // redis's levels on tracing's filters (the file's `log_level`);
        // from the next log line on. A SIGHUP puts the file's back.
        "loglevel" => {
            let filter = match value {
                "debug" | "verbose" => "debug",
                "notice" => "info",
                "warning" => "warn",
                _ => "off",
            };
            if let Some(set) = sh.log_filter.get() {
                if set(filter).is_ok() {
                    *lock(&sh.settings.log_level) = filter.into();
                }
            }
        }
        "hash-max-listpack-entries"
        | "hash-max-listpack-value"
        | "set-max-intset-entries"
        | "zset-max-listpack-entries"
        | "zset-max-listpack-value" => {
            let t = sh.engine.thresholds();
            let n: u64 = value.parse().unwrap_or(0);
            let entries = i64::try_from(n).unwrap_or(i64::MAX);
            let bytes = usize::try_from(n).unwrap_or(usize::MAX);
            match name {
                "hash-max-listpack-entries" => t.hash_entries.store(entries, Ordering::Relaxed),
                "hash-max-listpack-value" => t.hash_value.store(bytes, Ordering::Relaxed),
                "set-max-intset-entries" => t.set_entries.store(entries, Ordering::Relaxed),
                "zset-max-listpack-entries" => t.zset_entries.store(entries, Ordering::Relaxed),
                _ => t.zset_value.store(bytes, Ordering::Relaxed),
            }
        }
        "stream-node-max-entries" | "stream-node-max-bytes" => {
            let t = sh.engine.thresholds();
            let n: i64 = value.parse().unwrap_or(0);
            match name {
                "stream-node-max-entries" => t.stream_node_entries.store(n, Ordering::Relaxed),
                _ => t.stream_node_bytes.store(n, Ordering::Relaxed),
            }
        }
        "notify-keyspace-events" => sh
            .engine
            .notifier()
            .set_flags(respite_engine::notify::parse_classes(value).unwrap_or(0)),
        "timeout" => sh
            .idle_timeout_secs
            .store(value.parse().unwrap_or(0), Ordering::Relaxed),
        "min-replicas-to-write" | "min-replicas-max-lag" => {
            let set = |n| paired(sh, name, value, n).parse::<i64>().unwrap_or(0) > 0;
            let wants = set("min-replicas-to-write") && set("min-replicas-max-lag");
            sh.wants_replicas.store(wants, Ordering::Relaxed);
        }
        "maxmemory" => sh.engine.memory().set_maxmemory(value.parse().unwrap_or(0)),
        "maxmemory-policy" => {
            if let Some(policy) = respite_engine::Policy::parse(value) {
                sh.engine.memory().set_policy(policy);
            }
        }
        "maxmemory-samples" => sh.engine.memory().set_samples(value.parse().unwrap_or(5)),
        "lfu-log-factor" | "lfu-decay-time" => {
            let get = |n, default| paired(sh, name, value, n).parse().unwrap_or(default);
            sh.engine
                .access()
                .set_lfu(get("lfu-log-factor", 10), get("lfu-decay-time", 1));
        }
        _ => {}
    }
}

/// For a parameter acted on together with another: `wanted`'s value, the
/// one being set (`name` to `value`, not stored yet) or the stored one.
fn paired(sh: &Shared, name: &str, value: &str, wanted: &str) -> String {
    if wanted == name {
        value.to_string()
    } else {
        sh.params.get(wanted)
    }
}

/// Applies the `[redis]` table of the configuration file at start-up (each
/// pair as CONFIG SET would take it).
pub fn apply_file(sh: &Shared) -> Result<(), String> {
    apply_table(sh, &sh.config.redis).map(|_| ())
}

/// Applies a `[redis]` table (at start, and from a file reloaded by
/// SIGHUP); returns `name old -> new` for each parameter it changed.
pub fn apply_table(
    sh: &Shared,
    table: &std::collections::BTreeMap<String, toml::Value>,
) -> Result<Vec<String>, String> {
    let mut changed = Vec::new();
    for (name, raw) in table {
        let text = toml_text(raw);
        let p =
            find(name.as_bytes()).ok_or_else(|| format!("[redis] {name}: unknown parameter"))?;
        let v = validate(p, &text).map_err(|why| format!("[redis] {name}: {why}"))?;
        let old = value(sh, p.name);
        if old != v {
            changed.push(format!("{} {old} -> {v}", p.name));
            apply(sh, p, v);
        }
    }
    Ok(changed)
}

/// Checks the `[redis]` table of a configuration (for `Config::validate`).
pub fn check_file_table(
    table: &std::collections::BTreeMap<String, toml::Value>,
) -> Result<(), String> {
    for (name, raw) in table {
        let p =
            find(name.as_bytes()).ok_or_else(|| format!("[redis] {name}: unknown parameter"))?;
        if p.access != Access::Mutable || !matches!(p.source, Source::Stored) {
            return Err(format!(
                "[redis] {name}: set it with its own key, not in [redis]"
            ));
        }
        validate(p, &toml_text(raw)).map_err(|why| format!("[redis] {name}: {why}"))?;
    }
    Ok(())
}

/// A TOML value as CONFIG SET text: strings as they are, booleans as
/// yes/no, numbers as numbers.
fn toml_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Boolean(b) => if *b { "yes" } else { "no" }.into(),
        other => other.to_string(),
    }
}

/// CONFIG GET, as redis's: a name and each of its aliases are separate
/// entries (`CONFIG GET *of` finds `replicaof` and `slaveof`); an exact
/// name answers under the name as asked, hidden parameters included; a
/// pattern matches names and aliases without regard to case, hidden ones
/// left out. Each entry once, compared without regard to case.
pub(crate) fn config_get(sh: &Shared, patterns: &[Bytes]) -> Reply {
    let mut seen: Vec<Vec<u8>> = Vec::new();
    let mut pairs = Vec::new();
    for pattern in patterns {
        let is_glob = pattern.iter().any(|b| b"[*?".contains(b));
        if !is_glob {
            let key = pattern.to_ascii_lowercase();
            if let Some(p) = find(pattern) {
                if !seen.contains(&key) {
                    seen.push(key);
                    pairs.push((Reply::Bulk(pattern.clone()), Reply::bulk(value(sh, p.name))));
                }
            }
            continue;
        }
        let lower = pattern.to_ascii_lowercase();
        for p in PARAMS.iter().filter(|p| !p.hidden) {
            for name in std::iter::once(p.name).chain(p.alias) {
                if !seen.iter().any(|k| k == name.as_bytes()) && glob_match(&lower, name.as_bytes())
                {
                    seen.push(name.as_bytes().to_vec());
                    pairs.push((Reply::bulk(name), Reply::bulk(value(sh, p.name))));
                }
            }
        }
    }
    Reply::Map(pairs)
}

/// CONFIG SET: every pair validated before any is applied, with redis's
/// errors in redis's order of precedence.
pub(crate) fn config_set(sh: &Shared, pairs: &[(Bytes, Bytes)]) -> Result<(), CommandError> {
    let mut found: Vec<&'static Param> = Vec::new();
    let mut first_error: Option<CommandError> = None;
    for (name, _) in pairs {
        let Some(p) = find(name) else {
            return Err(CommandError::Quoted {
                before: "ERR Unknown option or number of arguments for CONFIG SET - '",
                arg: Lossy(name.to_vec()),
                after: "'",
            });
        };
        if first_error.is_none() {
            let shown = String::from_utf8_lossy(name);
            if p.access == Access::Immutable {
                first_error = Some(set_failed(&shown, "can't set immutable config"));
            } else if p.access == Access::Protected {
                first_error = Some(set_failed(&shown, "can't set protected config"));
            } else if found.iter().any(|f| std::ptr::eq(*f, p)) {
                first_error = Some(set_failed(&shown, "duplicate parameter"));
            }
        }
        found.push(p);
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    let mut values = Vec::with_capacity(pairs.len());
    for (p, (_, raw)) in found.iter().zip(pairs) {
        let raw = String::from_utf8_lossy(raw);
        let v = match p.kind {
            // Groups not named keep the limits in force.
            Kind::OutputLimits => {
                crate::limits::parse_limits(&raw, *lock(&sh.settings.output_limits))
                    .map(|l| crate::limits::format_limits(&l))
                    .map_err(String::from)
            }
            _ => validate(p, &raw),
        }
        .map_err(|why| set_failed(p.name, &why))?;
        if p.access == Access::Fixed && v != value(sh, p.name) {
            return Err(set_failed(p.name, "can't set immutable config"));
        }
        values.push(v);
    }
    // A larger maxclients needs a larger open files limit: raised now, or
    // the whole CONFIG SET refused in redis's words (`updateMaxclients`)
    // before anything is applied. Raising it and then failing another
    // pair is harmless, and cannot happen: every pair has validated.
    for (p, v) in found.iter().zip(&values) {
        if p.name == "maxclients" {
            let n = v.parse::<u64>().unwrap_or(0);
            if let Err(e) = crate::fdlimit::raise_for(n) {
                return Err(set_failed(
                    p.name,
                    &format!(
                        "The operating system is not able to handle the specified number of clients, try with {}",
                        e.clients()
                    ),
                ));
            }
        }
    }
    // Listening on a new address or port is the one change that can fail
    // once validated (a busy port): it is made before any other is
    // applied, and on failure the old listeners stay and nothing changes,
    // which is redis's rollback. The first of the two in the command takes
    // the blame, as redis calls their apply functions in that order.
    let listen = found
        .iter()
        .zip(&values)
        .filter(|(p, _)| p.name == "bind" || p.name == "port");
    let mut blamed = None;
    let mut bind = sh.binding.bind();
    let mut port = sh.tcp_port.load(Ordering::Relaxed) as u16;
    for (p, v) in listen {
        blamed.get_or_insert(p.name);
        if p.name == "bind" {
            bind = v.clone();
        } else {
            port = v.parse().unwrap_or(port);
        }
    }
    if let Some(name) = blamed {
        if let Err(e) = sh
            .binding
            .rebind(sh.config.tcp_backlog, &sh.tcp_port, &bind, port)
        {
            tracing::warn!("CONFIG SET {name}: {e}");
            let why = if name == "port" {
                "Unable to listen on this port. Check server logs."
            } else {
                "Failed to bind to specified addresses."
            };
            return Err(set_failed(name, why));
        }
    }
    for (p, v) in found.into_iter().zip(values) {
        apply(sh, p, v);
    }
    Ok(())
}

/// Where a `key = value` line's comment starts, if it has one (a `#`
/// outside quotes).
fn comment_start(line: &str) -> Option<usize> {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        match quote {
            Some('"') if escaped => escaped = false,
            Some('"') if c == '\\' => escaped = true,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == '#' => return Some(i),
            None => {}
        }
    }
    None
}

/// The key of a `key = value` line, if it is one.
fn line_key(line: &str) -> Option<&str> {
    let t = line.trim_start();
    if t.starts_with('#') || t.starts_with('[') {
        return None;
    }
    let (k, _) = t.split_once('=')?;
    Some(k.trim().trim_matches('"'))
}

/// Sets `key = value` in the lines of one table (`section`: `None` for the
/// top level), keeping the line's comment, or adds it at the table's end.
fn set_line(lines: &mut Vec<String>, section: Option<&str>, key: &str, value: &str) {
    let mut current: Option<String> = None;
    let mut table_end = None;
    let mut table_found = section.is_none();
    #[allow(clippy::needless_range_loop)] // the loop replaces lines[i]
    for i in 0..lines.len() {
        let t = lines[i].trim();
        if t.starts_with('[') {
            if current.as_deref() == section && table_found {
                table_end.get_or_insert(i);
            }
            current = Some(t.trim_matches(|c| c == '[' || c == ']').trim().to_string());
            if current.as_deref() == section {
                table_found = true;
                table_end = None;
            }
            continue;
        }
        if current.as_deref() == section && line_key(&lines[i]) == Some(key) {
            let comment = comment_start(&lines[i]).map(|at| lines[i][at..].to_string());
            let indent: String = lines[i].chars().take_while(|c| c.is_whitespace()).collect();
            lines[i] = match comment {
                Some(c) => format!("{indent}{key} = {value} {c}"),
                None => format!("{indent}{key} = {value}"),
            };
            return;
        }
    }
    let new = format!("{key} = {value}");
    if !table_found {
        if lines.last().is_some_and(|l| !l.trim().is_empty()) {
            lines.push(String::new());
        }
        lines.push(format!("[{}]", section.unwrap_or_default()));
        lines.push(new);
        return;
    }
    // The end of the table: before the next header, after its last
    // non-blank line.
    let mut at = table_end.unwrap_or(lines.len());
    if section.is_none() {
        // Top-level keys must come before the first table header.
        at = lines
            .iter()
            .position(|l| l.trim().starts_with('['))
            .unwrap_or(lines.len());
    }
    while at > 0 && lines[at - 1].trim().is_empty() {
        at -= 1;
    }
    lines.insert(at, new);
}

/// A TOML literal for a value (strings quoted, numbers as numbers).
fn toml_literal(v: &str, numeric: bool) -> String {
    if numeric && v.parse::<i64>().is_ok() {
        v.to_string()
    } else {
        toml::Value::String(v.to_string()).to_string()
    }
}

/// CONFIG REWRITE: the running settings into the configuration file,
/// comments kept.
pub(crate) fn rewrite(sh: &Shared) -> Result<(), String> {
    let Some(path) = &sh.config.config_file else {
        return Err("The server is running without a config file".into());
    };
    let text = std::fs::read_to_string(path).map_err(|e| format!("Rewriting config file: {e}"))?;
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for (name, key) in TOML_KEYS {
        let v = value(sh, name);
        if *name == "requirepass" && v.is_empty() {
            // No password: the key goes (an empty one would mean a
            // password of "").
            lines.retain(|l| line_key(l) != Some(key) || l.trim_start().starts_with('#'));
            continue;
        }
        let literal = match *name {
            // A TOML boolean.
            "protected-mode" => (v == "yes").to_string(),
            "requirepass" | "appendfsync" | "client-output-buffer-limit" => toml_literal(&v, false),
            _ => toml_literal(&v, true),
        };
        set_line(&mut lines, None, key, &literal);
    }
    for p in PARAMS {
        if !matches!(p.source, Source::Stored) || p.access != Access::Mutable {
            continue;
        }
        let v = sh.params.get(p.name);
        let in_file = sh.config.redis.contains_key(p.name) || lines_have(&lines, "redis", p.name);
        if v != p.default || in_file {
            set_line(&mut lines, Some("redis"), p.name, &toml_literal(&v, false));
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    // The result must load: a rewrite never leaves a file respited refuses.
    let parsed: crate::config::Config =
        toml::from_str(&out).map_err(|e| format!("Rewriting config file: {}", e.message()))?;
    parsed
        .validate()
        .map_err(|e| format!("Rewriting config file: {e}"))?;
    let tmp = path.with_extension("rewrite.tmp");
    std::fs::write(&tmp, &out)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| format!("Rewriting config file: {e}"))?;
    Ok(())
}

fn lines_have(lines: &[String], section: &str, key: &str) -> bool {
    let mut current = None;
    for l in lines {
        let t = l.trim();
        if t.starts_with('[') {
            current = Some(t.trim_matches(|c| c == '[' || c == ']').trim().to_string());
        } else if current.as_deref() == Some(section) && line_key(l) == Some(key) {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_matches_redis() {
        let p = |n: &str| find(n.as_bytes()).unwrap();
        assert_eq!(validate(p("maxmemory"), "1gb").unwrap(), "1073741824");
        assert_eq!(
            validate(p("maxmemory"), "1x").unwrap_err(),
            "argument must be a memory value"
        );
        assert_eq!(
            validate(p("timeout"), "-1").unwrap_err(),
            "argument must be between 0 and 2147483647 inclusive"
        );
        assert_eq!(validate(p("notify-keyspace-events"), "KEA").unwrap(), "AKE");
        assert_eq!(validate(p("notify-keyspace-events"), "Elg").unwrap(), "glE");
        assert_eq!(validate(p("latency-tracking"), "YES").unwrap(), "yes");
        assert_eq!(
            validate(p("latency-tracking-info-percentiles"), "50 99.90 100").unwrap(),
            "50 99.9 100"
        );
        assert_eq!(
            validate(p("save"), "3600 1  300 100").unwrap(),
            "3600 1 300 100"
        );
        assert!(validate(p("save"), "0 1").is_err());
        assert!(std::ptr::eq(p("lua-time-limit"), p("busy-reply-threshold")));
    }

    #[test]
    fn rewrite_keeps_comments_and_places_keys() {
        let mut lines: Vec<String> =
            "# top\nport = 6379 # the port\nmax_batch = 10\n\n[other]\nx = 1\n"
                .lines()
                .map(str::to_string)
                .collect();
        set_line(&mut lines, None, "max_batch", "20");
        set_line(&mut lines, None, "maxclients", "5");
        set_line(&mut lines, Some("redis"), "hz", "\"20\"");
        set_line(&mut lines, Some("redis"), "hz", "\"30\"");
        set_line(&mut lines, None, "port", "7000");
        let text = lines.join("\n");
        assert_eq!(
            text,
            "# top\nport = 7000 # the port\nmax_batch = 20\nmaxclients = 5\n\n[other]\nx = 1\n\n[redis]\nhz = \"30\""
        );
    }
}

//! The table of every parameter CONFIG knows, under redis-server 7.0's
//! names and aliases, with each one's type, who may change it, its
//! default and where its value lives; and the validation that turns what a
//! client or the configuration file wrote into the form CONFIG GET shows,
//! with redis's error texts. Nothing here reads the running server: the
//! table says a parameter is live, `live` reads it.

use crate::limits::parse_memory;

/// How a parameter's value is checked and shown.
#[derive(Clone, Copy)]
pub(super) enum Kind {
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
pub(super) enum Access {
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
pub(super) enum Source {
    /// Kept in [`Params`].
    Stored,
    /// Read from the running server (see `live`).
    Live,
}

/// One parameter.
pub(super) struct Param {
    pub(super) name: &'static str,
    pub(super) alias: Option<&'static str>,
    /// redis's HIDDEN_CONFIG: left out of pattern matches (`CONFIG GET
    /// *`), answered by its exact name.
    pub(super) hidden: bool,
    pub(super) kind: Kind,
    pub(super) access: Access,
    pub(super) default: &'static str,
    pub(super) source: Source,
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

const fn live(name: &'static str, kind: Kind, access: Access) -> Param {
    Param {
        name,
        alias: None,
        hidden: false,
        kind,
        access,
        default: "",
        source: Source::Live,
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
pub(super) static PARAMS: &[Param] = &[
    // The running server's own settings.
    // CONFIG SET rebinds the listener (see `crate::listener::Binding`).
    live("bind", Kind::Bind, Access::Mutable),
    live("port", Kind::Int(0, 65535), Access::Mutable),
    live("unixsocket", Kind::Str, Access::Immutable),
    live("unixsocketperm", Kind::Octal, Access::Immutable),
    live("dbfilename", Kind::Str, Access::Protected),
    live("dir", Kind::Str, Access::Protected),
    live("databases", Kind::Int(1, INT_MAX), Access::Immutable),
    live("appendonly", Kind::Bool, Access::Fixed),
    live(
        "appendfsync",
        Kind::Enum(&["always", "everysec", "no"]),
        Access::Mutable,
    ),
    live(
        "maxclients",
        Kind::UInt(1, u32::MAX as u64),
        Access::Mutable,
    ),
    live("requirepass", Kind::Str, Access::Mutable),
    live("aclfile", Kind::Str, Access::Immutable),
    live("protected-mode", Kind::Bool, Access::Mutable),
    // Redis allows up to LONG_MAX; respite up to what one SQLite row holds
    // (`respite_engine::MAX_STRING_LEN`), so a string a client may build
    // can always be stored.
    live(
        "proto-max-bulk-len",
        Kind::Memory(1024 * 1024, respite_engine::MAX_STRING_LEN as u64),
        Access::Mutable,
    ),
    // respite's own: a budget for the database's live pages plus its WAL
    // (see `respite_engine::disk`); 0 is none.
    live("maxdisk", Kind::Memory(0, LONG_MAX as u64), Access::Mutable),
    live(
        "client-query-buffer-limit",
        Kind::Memory(1024 * 1024, LONG_MAX as u64),
        Access::Mutable,
    ),
    live(
        "client-output-buffer-limit",
        Kind::OutputLimits,
        Access::Mutable,
    ),
    live("tcp-backlog", Kind::Int(0, INT_MAX), Access::Immutable),
    live(
        "enable-debug-command",
        Kind::Enum(&["no", "yes", "local"]),
        Access::Immutable,
    ),
    live("io-threads", Kind::Int(1, 128), Access::Immutable),
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
    live("max-batch", Kind::UInt(1, u32::MAX as u64), Access::Mutable),
    live("write-queue-depth", Kind::Str, Access::Fixed),
    live("readers", Kind::Str, Access::Fixed),
    live("wal-checkpoint-bytes", Kind::Str, Access::Fixed),
    live("page-size", Kind::Str, Access::Fixed),
    live("checkpoint-wal-bytes", Kind::Str, Access::Fixed),
    live("checkpoint-wal-percent", Kind::Str, Access::Fixed),
    live("checkpoint", Kind::Str, Access::Fixed),
    live("journal-size-limit", Kind::Str, Access::Fixed),
    live("expire-chunk", Kind::Str, Access::Fixed),
    live("read-cache-bytes", Kind::Str, Access::Fixed),
    live("disk-reserve-bytes", Kind::Str, Access::Fixed),
];

/// The live parameters CONFIG REWRITE writes at their own TOML keys.
pub(super) const TOML_KEYS: &[(&str, &str)] = &[
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

pub(super) fn find(name: &[u8]) -> Option<&'static Param> {
    PARAMS.iter().find(|p| {
        p.name.as_bytes().eq_ignore_ascii_case(name)
            || p.alias
                .is_some_and(|a| a.as_bytes().eq_ignore_ascii_case(name))
    })
}

/// Formats a percentile as redis's `%f` then trimmed (`99.9`, `50`).
fn trim_double(p: f64) -> String {
    let s = format!("{p:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// Validates a value for a parameter; the value CONFIG GET will show, or
/// redis's reason.
pub(super) fn validate(p: &Param, raw: &str) -> Result<String, String> {
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
pub(super) fn toml_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Boolean(b) => if *b { "yes" } else { "no" }.into(),
        other => other.to_string(),
    }
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
}

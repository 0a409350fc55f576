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
//!
//! The table and its validation (`table`) read nothing of the running
//! server, so the configuration file is checked with them before a server
//! exists; the stored values (`store`) are a plain map the server state
//! holds; this module and `live` and `rewrite` are where the table meets
//! the running server.

mod live;
mod rewrite;
mod store;
mod table;

use std::sync::atomic::Ordering;

use bytes::Bytes;
use respite_engine::glob::glob_match;
use respite_engine::AppendFsync;

use crate::error::{CommandError, Lossy};
use crate::reply::Reply;
use crate::state::Shared;
use crate::sync::lock;

pub use live::value;
pub use store::Params;
pub use table::check_file_table;

use table::{find, toml_text, validate, Access, Kind, Param, Source, PARAMS};

/// CONFIG REWRITE (see `rewrite`).
pub(crate) fn rewrite(sh: &Shared) -> Result<(), String> {
    rewrite::rewrite(sh)
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
        Source::Live => {
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

//! INFO: the server's figures, section by section, as redis-server 7.0
//! prints them.
//!
//! Monitoring agents, client libraries and redis-cli read INFO by field
//! name, and some fail outright when a field they expect is missing (a
//! client that reads `cluster_enabled` before deciding how to connect).
//! So every section and every field of redis-server 7.0's INFO is here,
//! in redis's order, with respite's figure where it has one and the value
//! a redis-server without that feature prints where it has none (no
//! replicas: `connected_slaves:0`; no forks: `latest_fork_usec:0`; no Lua:
//! `used_memory_lua:...`). docs/commands.md says which fields are real.
//! respite's own figures (the group commit, the WAL, the read cache) follow
//! redis's in the sections they belong to.
//!
//! Plain INFO prints redis's default sections; `INFO all` adds commandstats
//! and latencystats; `everything` is the same here (there are no module
//! sections); any other words name sections, case-insensitively.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use respite_engine::View;

use crate::args::Args;
use crate::command::{LocalCommand, Plan, Session};
use crate::error::CommandError;
use crate::process::{peak_memory, proc_status_bytes, sample_memory};
use crate::reply::Reply;
use crate::state::Shared;
use crate::sync::lock;

/// The redis version INFO (and HELLO) report: the redis-server whose
/// commands respite describes (see `cmd::meta`).
pub const REDIS_VERSION: &str = "7.0.15";

/// Sections in redis's order, and whether plain INFO prints them.
const SECTIONS: &[(&str, bool)] = &[
    ("server", true),
    ("clients", true),
    ("memory", true),
    ("persistence", true),
    ("stats", true),
    ("replication", true),
    ("cpu", true),
    ("modules", true),
    ("commandstats", false),
    ("errorstats", true),
    ("latencystats", false),
    ("cluster", true),
    ("keyspace", true),
];

/// `INFO [section [section ...]]`
pub struct Info {
    /// The sections to print.
    sections: Vec<&'static str>,
}

impl LocalCommand for Info {
    fn parse(args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        let words: Vec<String> = args
            .rest()
            .iter()
            .map(|b| String::from_utf8_lossy(b).to_ascii_lowercase())
            .collect();
        let wants = |name: &str, default: bool| {
            if words.is_empty() {
                return default;
            }
            words.iter().any(|w| match w.as_str() {
                "all" | "everything" => true,
                "default" => default,
                w => w == name,
            })
        };
        Ok(Info {
            sections: SECTIONS
                .iter()
                .filter(|(name, default)| wants(name, *default))
                .map(|(name, _)| *name)
                .collect(),
        })
    }

    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        let shared = s.shared.clone();
        if !self.sections.contains(&"keyspace") {
            return Ok(Plan::Reply(Reply::Verbatim(render(
                &shared,
                &self.sections,
                None,
            ))));
        }
        // The keyspace counts come from a read snapshot: the rest is
        // written there too, so the text is put together in one place.
        Ok(Plan::Read(
            Box::new(move |view: &View<'_, '_>| {
                Reply::Verbatim(render(&shared, &self.sections, Some(view)))
            }),
            respite_engine::ReadNeeds {
                snapshot: false,
                quick: true,
            },
        ))
    }
}

/// Appends `name:value\r\n` lines.
macro_rules! fields {
    ($out:expr, $($name:literal => $value:expr),* $(,)?) => {
        $( let _ = write!($out, concat!($name, ":{}\r\n"), $value); )*
    };
}

fn render(sh: &Arc<Shared>, sections: &[&str], view: Option<&View<'_, '_>>) -> String {
    let mut out = String::new();
    for (i, section) in sections.iter().enumerate() {
        if i > 0 {
            out.push_str("\r\n");
        }
        match *section {
            "server" => server(sh, &mut out),
            "clients" => clients(sh, &mut out),
            "memory" => memory(sh, &mut out),
            "persistence" => persistence(sh, &mut out),
            "stats" => stats(sh, &mut out),
            "replication" => replication(sh, &mut out),
            "cpu" => cpu(&mut out),
            "modules" => out.push_str("# Modules\r\n"),
            "commandstats" => commandstats(sh, &mut out),
            "errorstats" => errorstats(sh, &mut out),
            "latencystats" => latencystats(sh, &mut out),
            "cluster" => out.push_str("# Cluster\r\ncluster_enabled:0\r\n"),
            "keyspace" => keyspace(view, &mut out),
            _ => {}
        }
    }
    out
}

/// The kernel's name, release and machine, as `uname -srm` (redis's `os`).
fn os() -> String {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    let release = read("/proc/sys/kernel/osrelease");
    let name = match read("/proc/sys/kernel/ostype") {
        n if n.is_empty() => std::env::consts::OS.to_string(),
        n => n,
    };
    format!("{name} {release} {}", std::env::consts::ARCH)
}

fn unix_now() -> std::time::Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
}

fn server(sh: &Shared, out: &mut String) {
    let uptime = sh.started.elapsed().as_secs();
    let now = unix_now();
    let supervised = if std::env::var_os("NOTIFY_SOCKET").is_some() {
        "systemd"
    } else {
        "no"
    };
    out.push_str("# Server\r\n");
    fields!(out,
        "redis_version" => REDIS_VERSION,
        "redis_git_sha1" => "00000000",
        "redis_git_dirty" => 0,
        "redis_build_id" => &sh.stats.run_id[..16],
        "redis_mode" => "standalone",
        "os" => os(),
        "arch_bits" => usize::BITS,
        "monotonic_clock" => "POSIX clock_gettime",
        "multiplexing_api" => "epoll",
        "atomicvar_api" => "c11-builtin",
        "gcc_version" => "0.0.0",
        "process_id" => std::process::id(),
        "process_supervised" => supervised,
        "run_id" => &sh.stats.run_id,
        "tcp_port" => sh.tcp_port.load(Ordering::Relaxed),
        "server_time_usec" => now.as_micros(),
        "uptime_in_seconds" => uptime,
        "uptime_in_days" => uptime / 86400,
        "hz" => sh.params.get("hz"),
        "configured_hz" => sh.params.get("hz"),
        "lru_clock" => now.as_secs() & ((1 << 24) - 1),
        "executable" => std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default(),
        "config_file" => sh.config.config_file.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
        "io_threads_active" => 0,
        "respite_version" => env!("CARGO_PKG_VERSION"),
    );
}

fn clients(sh: &Shared, out: &mut String) {
    use respite_engine::Waiter as _;
    // Clients whose wait is registered and known to their connection: the
    // ones CLIENT UNBLOCK can reach (a wait the writer has registered but
    // whose connection has not yet heard of it is not counted yet).
    let blocked = lock(&sh.clients)
        .values()
        .filter(|c| lock(&c.blocked).as_ref().is_some_and(|t| t.waiting()))
        .count();
    // redis keeps each client's largest buffers of the last 8 seconds;
    // respite reports the largest now (a read buffer's capacity, a
    // client's unsent replies).
    let (max_input, max_output) = lock(&sh.clients).values().fold((0, 0), |(i, o), c| {
        (
            i.max(c.state.buffers.input_capacity()),
            o.max(c.output_bytes.load(Ordering::Relaxed)),
        )
    });
    out.push_str("# Clients\r\n");
    fields!(out,
        "connected_clients" => lock(&sh.clients).len(),
        "cluster_connections" => 0,
        "maxclients" => sh.settings.maxclients.load(Ordering::Relaxed),
        "client_recent_max_input_buffer" => max_input,
        "client_recent_max_output_buffer" => max_output,
        "blocked_clients" => blocked + sh.pause.waiting(),
        "tracking_clients" => sh.tracking.clients(),
        "clients_in_timeout_table" => blocked,
    );
}

/// Total memory of the machine, from /proc/meminfo.
fn total_system_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            let line = m.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kb * 1024)
        })
        .unwrap_or(0)
}

/// Redis's `bytesToHuman`: `512B`, `1.50K`, `23.45M`, `1.00G`.
pub fn bytes_to_human(n: u64) -> String {
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

/// The allocator the process runs on, as redis's `mem_allocator` names it
/// (`libc`, `jemalloc-5.2.1`): the program that links one other than the C
/// library's says so at start ([`set_mem_allocator`]).
static MEM_ALLOCATOR: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Names the global allocator for INFO's `mem_allocator` (respited: its
/// mimalloc and version); once, at start.
pub fn set_mem_allocator(name: String) {
    let _ = MEM_ALLOCATOR.set(name);
}

fn mem_allocator() -> &'static str {
    MEM_ALLOCATOR.get().map_or("libc", String::as_str)
}

fn memory(sh: &Shared, out: &mut String) {
    // respite has no allocator-level count like redis's `used_memory`: the
    // memory the process holds (anonymous and shared, not the database's
    // file pages it maps) is what an operator, `redis-cli --stat` and a
    // maxmemory alert want to watch. docs/operations.md lists the figures.
    let rss = sample_memory();
    let peak = peak_memory().max(rss);
    let cache = sh.engine.cache().stats();
    let system = total_system_memory();
    let maxmemory: u64 = sh.params.get("maxmemory").parse().unwrap_or(0);
    let dataset = cache.bytes;
    let (vm_eval, cached_scripts, scripts_eval) = super::scripting::eval_memory();
    let (vm_functions, functions, libraries, functions_bytes) = super::functions::memory();
    let scripts_eval = scripts_eval as u64;
    let functions_bytes = functions_bytes as u64;
    out.push_str("# Memory\r\n");
    fields!(out,
        "used_memory" => rss,
        "used_memory_human" => bytes_to_human(rss),
        "used_memory_rss" => rss,
        "used_memory_rss_human" => bytes_to_human(rss),
        "used_memory_peak" => peak,
        "used_memory_peak_human" => bytes_to_human(peak),
        "used_memory_peak_perc" => format!("{:.2}%", rss as f64 * 100.0 / peak.max(1) as f64),
        "used_memory_overhead" => rss.saturating_sub(dataset),
        "used_memory_startup" => sh.startup_rss,
        "used_memory_dataset" => dataset,
        "used_memory_dataset_perc" => format!("{:.2}%", dataset as f64 * 100.0 / rss.max(1) as f64),
        "allocator_allocated" => rss,
        "allocator_active" => rss,
        "allocator_resident" => rss,
        "total_system_memory" => system,
        "total_system_memory_human" => bytes_to_human(system),
        "used_memory_lua" => vm_eval,
        "used_memory_vm_eval" => vm_eval,
        "used_memory_lua_human" => bytes_to_human(vm_eval),
        "used_memory_scripts_eval" => scripts_eval,
        "number_of_cached_scripts" => cached_scripts,
        "number_of_functions" => functions,
        "number_of_libraries" => libraries,
        "used_memory_vm_functions" => vm_functions,
        "used_memory_vm_total" => vm_eval + vm_functions,
        "used_memory_vm_total_human" => bytes_to_human(vm_eval + vm_functions),
        "used_memory_functions" => functions_bytes,
        "used_memory_scripts" => scripts_eval + functions_bytes,
        "used_memory_scripts_human" => bytes_to_human(scripts_eval + functions_bytes),
        "maxmemory" => maxmemory,
        "maxmemory_human" => bytes_to_human(maxmemory),
        "maxmemory_policy" => sh.params.get("maxmemory-policy"),
        "allocator_frag_ratio" => "1.00",
        "allocator_frag_bytes" => 0,
        "allocator_rss_ratio" => "1.00",
        "allocator_rss_bytes" => 0,
        "rss_overhead_ratio" => "1.00",
        "rss_overhead_bytes" => 0,
        "mem_fragmentation_ratio" => "1.00",
        "mem_fragmentation_bytes" => 0,
        "mem_not_counted_for_evict" => 0,
        "mem_replication_backlog" => 0,
        "mem_total_replication_buffers" => 0,
        "mem_clients_slaves" => 0,
        "mem_clients_normal" => 0,
        "mem_cluster_links" => 0,
        "mem_aof_buffer" => 0,
        "mem_allocator" => mem_allocator(),
        "active_defrag_running" => 0,
        "lazyfree_pending_objects" => 0,
        "lazyfreed_objects" => 0,
        "read_cache_used_bytes" => cache.bytes,
        "read_cache_max_bytes" => cache.budget,
        "used_memory_db_page_cache" => sh.engine.db_page_cache_bytes(),
        "used_memory_db_live" => sh.engine.memory().used(),
        "used_memory_mapped_file" => proc_status_bytes("RssFile:"),
        "used_memory_vm_rss" => proc_status_bytes("VmRSS:"),
        "db_size_bytes" => sh.engine.db_size(),
        "wal_size_bytes" => sh.engine.wal_size(),
    );
}

fn persistence(sh: &Shared, out: &mut String) {
    let stats = sh.engine.stats();
    let disk = sh.engine.disk_writes();
    let snap = sh.engine.snapshots().status();
    out.push_str("# Persistence\r\n");
    fields!(out,
        "loading" => 0,
        "async_loading" => 0,
        "current_cow_peak" => 0,
        "current_cow_size" => 0,
        "current_cow_size_age" => 0,
        "current_fork_perc" => "0.00",
        "current_save_keys_processed" => 0,
        "current_save_keys_total" => 0,
        // Every acknowledged write is already on disk.
        "rdb_changes_since_last_save" => snap.changes_since,
        "rdb_bgsave_in_progress" => u8::from(snap.in_progress),
        "rdb_last_save_time" => snap.last_save_unix,
        "rdb_last_bgsave_status" => if snap.last_ok { "ok" } else { "err" },
        "rdb_last_bgsave_time_sec" => snap.last_secs,
        "rdb_current_bgsave_time_sec" => snap.current_secs,
        "rdb_saves" => snap.saves,
        "rdb_last_cow_size" => 0,
        "rdb_last_load_keys_expired" => 0,
        "rdb_last_load_keys_loaded" => 0,
        "aof_enabled" => 1,
        "aof_rewrite_in_progress" => 0,
        "aof_rewrite_scheduled" => 0,
        "aof_last_rewrite_time_sec" => -1,
        "aof_current_rewrite_time_sec" => -1,
        "aof_last_bgrewrite_status" => "ok",
        "aof_rewrites" => 0,
        "aof_rewrites_consecutive_failures" => 0,
        "aof_last_write_status" => if stats.failed_commits == 0 { "ok" } else { "err" },
        "aof_last_cow_size" => 0,
        "module_fork_in_progress" => 0,
        "module_fork_last_cow_size" => 0,
        "rdb_last_snapshot_bytes" => snap.last_bytes,
        "snapshot_file" => sh.engine.snapshot_path().display(),
        "appendfsync" => lock(&sh.settings.appendfsync).as_str(),
        "group_commit_max_batch" => sh.engine.max_batch(),
        "group_commit_batches" => stats.batches,
        "group_commit_ops" => stats.ops,
        "group_commit_failed_ops" => stats.failed_ops,
        "group_commit_failed_commits" => stats.failed_commits,
        "group_commit_ops_per_batch_mean" => format!("{:.2}", stats.ops_per_batch_mean),
        "group_commit_ops_per_batch_p50" => stats.ops_per_batch_p50,
        "group_commit_ops_per_batch_p99" => stats.ops_per_batch_p99,
        "group_commit_ops_per_batch_max" => stats.ops_per_batch_max,
        "group_commit_commit_latency_p50_us" => stats.commit_us_p50,
        "group_commit_commit_latency_p99_us" => stats.commit_us_p99,
        "group_commit_commit_latency_max_us" => stats.commit_us_max,
        "group_commit_queue_depth" => sh.engine.write_queue_len(),
        "wal_size_bytes" => sh.engine.wal_size(),
        "wal_size_peak_bytes" => stats.wal_peak_bytes,
        "wal_pause_max_us" => stats.wal_pause_us_max,
        "wal_restart_max_us" => stats.wal_restart_us_max,
        "wal_checkpoints" => stats.checkpoints,
        "wal_checkpoint_threshold_bytes" => sh.engine.checkpoint_threshold(),
        "checkpoint_mode" => sh.engine.checkpoint_mode().as_str(),
        "checkpoint_last_seen_secs" => stats.checkpoint_seen_ago.map_or(-1, |d| d.as_secs() as i64),
        "write_lock_waits" => stats.lock_waits,
        "write_lock_wait_max_us" => stats.lock_wait_us_max,
        "db_size_bytes" => sh.engine.db_size(),
        "page_size" => sh.engine.page_size(),
        "disk_write_bytes" => disk.map_or(0, |d| d.bytes),
        "write_bytes_per_op" => disk.map_or(0, |d| d.per_op),
        // The disk guard (see respite_engine::disk): live pages plus WAL,
        // the budget, whether the disk filled up, and storage failures.
        "disk_used_bytes" => sh.engine.disk().used(),
        "disk_free_pages_bytes" => sh.engine.disk().free_pages_bytes(),
        "vacuum_freed_pages" => stats.vacuum_pages,
        "vacuum_step_max_us" => stats.vacuum_step_us_max,
        "evict_step_max_us" => stats.evict_step_us_max,
        "maxdisk" => sh.engine.disk().maxdisk(),
        "disk_full" => u8::from(sh.engine.disk().is_full()),
        "disk_full_events" => sh.engine.disk().full_events(),
        "storage_errors" => sh.engine.disk().io_errors(),
    );
}

fn stats(sh: &Shared, out: &mut String) {
    let c = &sh.counters;
    let engine = sh.engine.stats();
    let cache = sh.engine.cache().stats();
    let (hits, misses) = sh.engine.access().hits_misses();
    let rates = sh.stats.instantaneous();
    let pubsub = sh.pubsub.sizes();
    out.push_str("# Stats\r\n");
    fields!(out,
        "total_connections_received" => c.connections_received.load(Ordering::Relaxed),
        "total_commands_processed" => c.commands_processed.load(Ordering::Relaxed),
        "instantaneous_ops_per_sec" => rates.ops_per_sec,
        "total_net_input_bytes" => c.net_input_bytes.load(Ordering::Relaxed),
        "total_net_output_bytes" => c.net_output_bytes.load(Ordering::Relaxed),
        "total_net_repl_input_bytes" => 0,
        "total_net_repl_output_bytes" => 0,
        "instantaneous_input_kbps" => format!("{:.2}", rates.input_kbps),
        "instantaneous_output_kbps" => format!("{:.2}", rates.output_kbps),
        "instantaneous_input_repl_kbps" => "0.00",
        "instantaneous_output_repl_kbps" => "0.00",
        "rejected_connections" => c.rejected_connections.load(Ordering::Relaxed),
        "sync_full" => sh.repl.counters.full.load(std::sync::atomic::Ordering::Relaxed),
        "sync_partial_ok" => sh.repl.counters.partial_ok.load(std::sync::atomic::Ordering::Relaxed),
        "sync_partial_err" => sh.repl.counters.partial_err.load(std::sync::atomic::Ordering::Relaxed),
        "expired_keys" => engine.expired_keys,
        "expired_stale_perc" => "0.00",
        "expired_time_cap_reached_count" => 0,
        "expire_cycle_cpu_milliseconds" => 0,
        "evicted_keys" => sh.engine.memory().evicted(),
        "evicted_clients" => 0,
        "total_eviction_exceeded_time" => 0,
        "current_eviction_exceeded_time" => 0,
        "keyspace_hits" => hits,
        "keyspace_misses" => misses,
        "pubsub_channels" => pubsub.0,
        "pubsub_patterns" => pubsub.1,
        "pubsubshard_channels" => pubsub.2,
        "latest_fork_usec" => 0,
        "total_forks" => 0,
        "migrate_cached_sockets" => 0,
        "slave_expires_tracked_keys" => 0,
        "active_defrag_hits" => 0,
        "active_defrag_misses" => 0,
        "active_defrag_key_hits" => 0,
        "active_defrag_key_misses" => 0,
        "total_active_defrag_time" => 0,
        "current_active_defrag_time" => 0,
        "tracking_total_keys" => sh.tracking.sizes().0,
        "tracking_total_items" => sh.tracking.sizes().1,
        "tracking_total_prefixes" => sh.tracking.sizes().2,
        "unexpected_error_replies" => 0,
        "total_error_replies" => c.error_replies.load(Ordering::Relaxed),
        "dump_payload_sanitizations" => 0,
        "total_reads_processed" => c.reads_processed.load(Ordering::Relaxed),
        "total_writes_processed" => c.writes_processed.load(Ordering::Relaxed),
        "io_threaded_reads_processed" => 0,
        "io_threaded_writes_processed" => 0,
        "reply_buffer_shrinks" => 0,
        "reply_buffer_expands" => 0,
        // redis 7.2's names: failed logins and ACL refusals.
        "acl_access_denied_auth" => sh.acl.denied.auth.load(Ordering::Relaxed),
        "acl_access_denied_cmd" => sh.acl.denied.cmd.load(Ordering::Relaxed),
        "acl_access_denied_key" => sh.acl.denied.key.load(Ordering::Relaxed),
        "acl_access_denied_channel" => sh.acl.denied.channel.load(Ordering::Relaxed),
        "protocol_errors" => c.protocol_errors.load(Ordering::Relaxed),
        // redis 7.4's name for it.
        "client_output_buffer_limit_disconnections" => c.output_limit_closes.load(Ordering::Relaxed),
        "read_cache_hits" => cache.hits,
        "read_cache_misses" => cache.misses,
        "read_cache_entries" => cache.entries,
        "read_cache_used_bytes" => cache.bytes,
        "read_cache_max_bytes" => cache.budget,
    );
}

fn replication(sh: &Shared, out: &mut String) {
    out.push_str("# Replication\r\n");
    let mut offset = 0;
    if sh.engine.is_replica() {
        // A file replica (respite_engine::replica): Redis's replica fields,
        // with the follower's position as the offset; no master to name.
        let position = respite_engine::replica::Position::read(sh.engine.db_path());
        offset = position.as_ref().map_or(0, |p| p.offset());
        fields!(out,
            "role" => "slave",
            "master_host" => "",
            "master_port" => 0,
            "master_link_status" => if position.is_some() { "up" } else { "down" },
            "master_last_io_seconds_ago" => position.as_ref().map_or(-1, |p| p.age_secs() as i64),
            "master_sync_in_progress" => 0,
            "slave_read_repl_offset" => offset,
            "slave_repl_offset" => offset,
            "slave_priority" => 100,
            "slave_read_only" => 1,
            "replica_announced" => 1,
            "replica_of_file" => sh.engine.db_path().display(),
            "replica_txid" => position.as_ref().map_or("", |p| p.txid.as_str()),
            "replica_last_applied_seconds_ago" => position.as_ref().map_or(-1, |p| p.age_secs() as i64),
        );
    } else if let Some((host, port)) = sh.upstream.master() {
        replica_fields(sh, &host, port, out);
    } else {
        fields!(out, "role" => "master");
    }
    let master = &sh.repl;
    let replicas = master.replicas();
    fields!(out, "connected_slaves" => replicas.len());
    for (i, r) in replicas.iter().enumerate() {
        out.push_str(&format!(
            "slave{i}:ip={},port={},state={},offset={},lag={}\r\n",
            r.ip,
            r.port,
            r.state(),
            r.ack.load(std::sync::atomic::Ordering::Relaxed),
            master.lag_secs(r),
        ));
    }
    let (first, histlen) = if master.backlog_active() {
        offset = master.offset();
        master.backlog_range()
    } else {
        (0, 0)
    };
    // A replica shows its master's history: its ID and the offset
    // applied, as redis's replica adopts them.
    let upstream_id = sh.upstream.replid();
    let followed = sh.upstream.is_replica() && !upstream_id.is_empty();
    if followed {
        offset = sh.upstream.offset().max(0) as u64;
    }
    fields!(out,
        "master_failover_state" => "no-failover",
        "master_replid" => if followed { upstream_id } else { sh.stats.replid() },
        "master_replid2" => "0000000000000000000000000000000000000000",
        "master_repl_offset" => offset,
        "second_repl_offset" => -1,
        "repl_backlog_active" => i32::from(master.backlog_active()),
        "repl_backlog_size" => crate::repl::BACKLOG_SIZE,
        "repl_backlog_first_byte_offset" => first,
        "repl_backlog_histlen" => histlen,
    );
}

/// INFO replication's fields of a replica of `host:port`, as redis 7.0
/// prints them (`crate::replica_link`).
fn replica_fields(sh: &Shared, host: &str, port: u16, out: &mut String) {
    use crate::replica_link::State;
    let link = &sh.upstream;
    let state = link.state();
    fields!(out,
        "role" => "slave",
        "master_host" => host,
        "master_port" => port,
        "master_link_status" => if state == State::Connected { "up" } else { "down" },
        "master_last_io_seconds_ago" => link.last_io_secs(),
        "master_sync_in_progress" => i32::from(state == State::Sync),
        // 1 before the first synchronization, as redis prints it.
        "slave_read_repl_offset" => if link.replid().is_empty() { 1 } else { link.read_offset() },
        "slave_repl_offset" => if link.replid().is_empty() { 1 } else { link.offset() },
    );
    if state == State::Sync {
        let (size, read, idle) = link.transfer();
        let perc = if size > 0 {
            read as f64 / size as f64 * 100.0
        } else {
            0.0
        };
        fields!(out,
            "master_sync_total_bytes" => size,
            "master_sync_read_bytes" => read,
            "master_sync_left_bytes" => size - read as i64,
            "master_sync_perc" => format!("{perc:.2}"),
            "master_sync_last_io_seconds_ago" => idle,
        );
    }
    if state != State::Connected {
        fields!(out, "master_link_down_since_seconds" => link.down_secs());
    }
    fields!(out,
        "slave_priority" => 100,
        "slave_read_only" => 1,
        "replica_announced" => 1,
    );
}

/// User and system CPU seconds from a /proc `stat` file (fields 14 and 15,
/// and 16 and 17 for waited-for children), in clock ticks of 1/100 s.
fn cpu_times(path: &str) -> [f64; 4] {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    // The command name may hold spaces: fields count from after its ')'.
    let rest = text.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|w| w.parse().unwrap_or(0.0))
        .collect();
    let at = |i: usize| f.get(i).copied().unwrap_or(0.0) / 100.0;
    // After ')': state is field 3, so field n is at index n - 3.
    [at(11), at(12), at(13), at(14)]
}

fn cpu(out: &mut String) {
    let [user, sys, cuser, csys] = cpu_times("/proc/self/stat");
    let [muser, msys, _, _] = cpu_times(&format!("/proc/self/task/{}/stat", std::process::id()));
    out.push_str("# CPU\r\n");
    fields!(out,
        "used_cpu_sys" => format!("{sys:.6}"),
        "used_cpu_user" => format!("{user:.6}"),
        "used_cpu_sys_children" => format!("{csys:.6}"),
        "used_cpu_user_children" => format!("{cuser:.6}"),
        "used_cpu_sys_main_thread" => format!("{msys:.6}"),
        "used_cpu_user_main_thread" => format!("{muser:.6}"),
    );
}

fn commandstats(sh: &Shared, out: &mut String) {
    out.push_str("# Commandstats\r\n");
    for r in sh.stats.rows() {
        let per_call = if r.calls == 0 {
            0.0
        } else {
            r.usec as f64 / r.calls as f64
        };
        let _ = write!(
            out,
            "cmdstat_{}:calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}\r\n",
            r.name, r.calls, r.usec, r.rejected, r.failed
        );
    }
}

fn errorstats(sh: &Shared, out: &mut String) {
    out.push_str("# Errorstats\r\n");
    for (code, count) in sh.stats.errors() {
        let _ = write!(out, "errorstat_{code}:count={count}\r\n");
    }
}

fn latencystats(sh: &Shared, out: &mut String) {
    out.push_str("# Latencystats\r\n");
    for r in sh.stats.rows() {
        let Some(ps) = sh.stats.percentiles(&r.name) else {
            continue;
        };
        let shown: Vec<String> = ps
            .iter()
            .map(|(p, us)| format!("p{}={us:.3}", trim_percentile(*p)))
            .collect();
        let _ = write!(
            out,
            "latency_percentiles_usec_{}:{}\r\n",
            r.name,
            shown.join(",")
        );
    }
}

/// A percentile as redis's `%f` then trimmed (`99.9`, `50`).
fn trim_percentile(p: f64) -> String {
    let s = format!("{p:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn keyspace(view: Option<&View<'_, '_>>, out: &mut String) {
    out.push_str("# Keyspace\r\n");
    let Some(view) = view else { return };
    match view.keyspace() {
        Ok(dbs) => {
            for db in dbs {
                let _ = write!(
                    out,
                    "db{}:keys={},expires={},avg_ttl=0\r\n",
                    db.db, db.keys, db.expires
                );
            }
        }
        Err(e) => tracing::warn!(error = %e, "INFO keyspace could not be read"),
    }
}

/// This family's rows of the command table (see [`crate::command::table`]).
#[rustfmt::skip]
pub(crate) fn commands() -> Vec<crate::command::Spec> {
    use crate::command::Spec;
    vec![
        Spec::local::<Info>("info"),
    ]
}

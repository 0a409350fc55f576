//! The parameters read from the running server itself rather than kept in
//! the parameter store: the bound port, the engine's settings, the
//! limits connections apply. [`get`] answers for each parameter the table
//! marks live, by name; [`value`] answers for any parameter, live or
//! stored.

use std::sync::atomic::Ordering;

use crate::state::Shared;
use crate::sync::lock;

use super::table::{find, Kind, Source};

/// A live parameter's value as CONFIG GET shows it (`None` for a name the
/// table does not mark live).
pub(super) fn get(s: &Shared, name: &str) -> Option<String> {
    Some(match name {
        "bind" => s.binding.bind(),
        "port" => s.tcp_port.load(Ordering::Relaxed).to_string(),
        "unixsocket" => s
            .config
            .unixsocket
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        "unixsocketperm" => s
            .config
            .unixsocketperm
            .clone()
            .unwrap_or_else(|| "0".into()),
        "dbfilename" => s.config.db.display().to_string(),
        "dir" => std::env::current_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_default(),
        "databases" => s.config.databases.to_string(),
        "appendonly" => "yes".into(),
        "appendfsync" => lock(&s.settings.appendfsync).as_str().into(),
        "maxclients" => s.settings.maxclients.load(Ordering::Relaxed).to_string(),
        "requirepass" => s.requirepass().unwrap_or_default(),
        "aclfile" => s
            .config
            .aclfile
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        "protected-mode" => {
            if s.settings.protected_mode.load(Ordering::Relaxed) {
                "yes".into()
            } else {
                "no".into()
            }
        }
        "proto-max-bulk-len" => s
            .settings
            .proto_max_bulk_len
            .load(Ordering::Relaxed)
            .to_string(),
        "maxdisk" => s.engine.disk().maxdisk().to_string(),
        "client-query-buffer-limit" => s
            .settings
            .client_query_buffer_limit
            .load(Ordering::Relaxed)
            .to_string(),
        "client-output-buffer-limit" => {
            crate::limits::format_limits(&lock(&s.settings.output_limits))
        }
        "tcp-backlog" => s.config.tcp_backlog.to_string(),
        "enable-debug-command" => match s.config.enable_debug_command {
            crate::config::DebugCommand::No => "no",
            crate::config::DebugCommand::Yes => "yes",
            crate::config::DebugCommand::Local => "local",
        }
        .into(),
        "io-threads" => s.config.io_threads.max(1).to_string(),
        "max-batch" => s.engine.max_batch().to_string(),
        "write-queue-depth" => s.config.write_queue_depth.to_string(),
        "readers" => s.config.readers.to_string(),
        "wal-checkpoint-bytes" => s.config.wal_checkpoint_bytes.to_string(),
        "page-size" => s.engine.page_size().to_string(),
        "checkpoint-wal-bytes" => s.config.checkpoint_wal_bytes.to_string(),
        "checkpoint-wal-percent" => s.config.checkpoint_wal_percent.to_string(),
        "checkpoint" => s.engine.checkpoint_mode().as_str().to_string(),
        "journal-size-limit" => s.config.journal_size_limit.to_string(),
        "expire-chunk" => s.config.expire_chunk.to_string(),
        "read-cache-bytes" => s.config.read_cache_bytes.to_string(),
        "disk-reserve-bytes" => s.config.disk_reserve_bytes.to_string(),
        _ => return None,
    })
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
            Source::Live => get(sh, p.name).unwrap_or_default(),
        },
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::table::{Source, PARAMS};

    /// Every parameter the table marks live is answered here, and nothing
    /// else is.
    #[test]
    fn every_live_parameter_has_a_reader() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let session = crate::command::session::test_session(dir.path());
        for p in PARAMS {
            let answered = super::get(&session.shared, p.name).is_some();
            assert_eq!(answered, matches!(p.source, Source::Live), "{}", p.name);
        }
    }
}

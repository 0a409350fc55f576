//! The daemon's configuration: one TOML file, every key optional.
//!
//! Names follow redis.conf where Redis has the same setting (`port`, `bind`,
//! `unixsocket`, `maxclients`, `appendfsync`, ...), spelled with underscores
//! as TOML likes. `configs/respite.toml` lists every key with its default.
//! Zero configuration works: the defaults serve 127.0.0.1:6379 from
//! `respite.db` in the working directory.

use std::path::{Path, PathBuf};

use respite_engine::{AppendFsync, EngineConfig};
use serde::{Deserialize, Serialize};

/// Who may run DEBUG (`enable_debug_command`, as in redis.conf).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DebugCommand {
    /// Nobody (the default).
    #[default]
    No,
    /// Every client.
    Yes,
    /// Clients on the Unix socket or a loopback address.
    Local,
}

/// Everything `respited` can be told.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// TCP addresses to listen on, separated by spaces (redis's `bind`;
    /// see `listener::Binding`); an empty string turns TCP off.
    pub bind: String,
    /// TCP port; 0 asks the OS for a free one (the chosen port is logged).
    pub port: u16,
    /// Unix socket path; unset means no Unix socket.
    pub unixsocket: Option<PathBuf>,
    /// Permissions of the Unix socket, octal as in redis.conf (`"700"`).
    pub unixsocketperm: Option<String>,
    /// The SQLite database file.
    pub db: PathBuf,
    /// Durability: `always`, `everysec` or `no`.
    pub appendfsync: AppendFsync,
    /// Most operations per group commit; 1 turns batching off.
    pub max_batch: usize,
    /// Write operations queued or in flight before connections wait.
    pub write_queue_depth: usize,
    /// Read-only connections (and threads) in the read pool.
    pub readers: usize,
    /// Number of logical databases.
    pub databases: u32,
    /// Most simultaneous clients.
    pub maxclients: usize,
    /// Password for AUTH; unset means no authentication.
    pub requirepass: Option<String>,
    /// Refuse TCP clients from anything but 127.0.0.1 and ::1 on a
    /// listener bound beyond loopback while the default user needs no
    /// password (redis.conf's `protected-mode`; see `protected.rs`).
    pub protected_mode: bool,
    /// Largest bulk string a client may send, in bytes.
    pub proto_max_bulk_len: usize,
    /// Largest unprocessed input one client may have buffered, in bytes.
    pub client_query_buffer_limit: usize,
    /// Redis's `client-output-buffer-limit`: `<class> <hard> <soft>
    /// <seconds>` groups; respite applies the `normal` class.
    pub client_output_buffer_limit: String,
    /// A budget in bytes for the database's live pages plus its WAL: over
    /// it, commands that may add data get an OOM error (0: no budget).
    pub maxdisk: u64,
    /// Bytes set aside beside the database and released when the disk
    /// fills up, so deletions can still be written (0: no reserve).
    pub disk_reserve_bytes: u64,
    /// Pending connections the kernel queues for `listen` (redis.conf's
    /// `tcp-backlog`; the kernel caps it at `net.core.somaxconn`).
    pub tcp_backlog: u32,
    /// SQLite page size of a new database file.
    pub page_size: u32,
    /// Copy the WAL into the database once it holds this many new bytes.
    pub checkpoint_wal_bytes: u64,
    /// ... or this percentage of the database file's size, if more.
    pub checkpoint_wal_percent: u64,
    /// The WAL's bound: past it, the writer waits for the copy between groups.
    pub wal_checkpoint_bytes: u64,
    /// Who checkpoints the WAL: `auto` (respite) or `external` (Litestream).
    pub checkpoint: respite_engine::Checkpoint,
    /// Serve this file read-only, as a replica Litestream's follow mode
    /// (`litestream restore -f -o FILE REPLICA`) keeps up to date, instead
    /// of `db`: every write is refused with `READONLY`, and INFO
    /// replication reports `role:slave` and the follower's position (see
    /// `respite_engine::replica`).
    pub replica_of_file: Option<PathBuf>,
    /// Follow a redis-server master, `"host port"` (redis's `replicaof`;
    /// see `crate::replica_link`): the data becomes the master's, kept up
    /// to date by its replication stream, and clients' writes are refused
    /// with `READONLY` until `REPLICAOF NO ONE`. `masterauth` and
    /// `masteruser` go in `[redis]`.
    pub replicaof: Option<String>,
    /// What SQLite keeps of the WAL file after a checkpoint, in bytes.
    pub journal_size_limit: i64,
    /// Most expired keys deleted in one sweep between batches.
    pub expire_chunk: usize,
    /// Memory for the cache of hot string values, in bytes; 0 turns it off.
    pub read_cache_bytes: usize,
    /// Tokio worker threads for connections; 0 means half the cores (at
    /// least one), leaving the rest to the writer and the read pool.
    pub io_threads: usize,
    /// Log filter (tracing's `EnvFilter` syntax), e.g. `info` or `respite=debug`.
    pub log_level: String,
    /// Where SAVE and BGSAVE write their snapshot; unset means
    /// `<db>.snapshot` beside the database.
    pub snapshot_file: Option<PathBuf>,
    /// Who may run DEBUG (DEBUG SLEEP stalls the writer, for testing the
    /// watchdog).
    pub enable_debug_command: DebugCommand,
    /// The ACL file: users loaded at start and by ACL LOAD, written by ACL
    /// SAVE (Redis's `aclfile`; fixed for the server's life).
    pub aclfile: Option<PathBuf>,
    /// TCP port of the TLS listener (on `bind`); unset means no TLS, 0
    /// asks the OS for a free one (see `tls.rs`).
    pub tls_port: Option<u16>,
    /// The server's certificate chain, PEM.
    pub tls_cert_file: Option<PathBuf>,
    /// The server's private key, PEM.
    pub tls_key_file: Option<PathBuf>,
    /// The CA that signs client certificates, PEM.
    pub tls_ca_cert_file: Option<PathBuf>,
    /// Whether TLS clients must present a certificate: yes, optional, no.
    pub tls_auth_clients: AuthClients,
    /// Redis parameters without a key of their own, under their
    /// redis.conf names (`slowlog-log-slower-than = 0`), as CONFIG SET
    /// takes them; CONFIG REWRITE writes here (see `crate::params`).
    pub redis: std::collections::BTreeMap<String, toml::Value>,
    /// The file this configuration was read from (CONFIG REWRITE writes
    /// it; INFO shows it as `config_file`).
    #[serde(skip)]
    pub config_file: Option<PathBuf>,
}

/// The settings a running server takes from a reloaded file (SIGHUP);
/// every other key needs a restart.
pub const RELOADABLE: &[&str] = &[
    "log_level",
    "requirepass",
    "protected_mode",
    "maxclients",
    "max_batch",
    "appendfsync",
    "proto_max_bulk_len",
    "client_query_buffer_limit",
    "tls_cert_file",
    "tls_key_file",
    "tls_ca_cert_file",
    "tls_auth_clients",
    "client_output_buffer_limit",
    "redis",
];

impl Config {
    /// The master of `replicaof`, if it is set and well formed.
    pub fn replicaof_master(&self) -> Option<(String, u16)> {
        let mut words = self.replicaof.as_deref()?.split_whitespace();
        let host = words.next()?;
        let port = words.next()?.parse::<u16>().ok()?;
        words.next().is_none().then(|| (host.to_string(), port))
    }
}

impl Default for Config {
    fn default() -> Self {
        let engine = EngineConfig::default();
        Config {
            bind: "127.0.0.1".into(),
            port: 6379,
            unixsocket: None,
            unixsocketperm: None,
            db: engine.path,
            appendfsync: engine.appendfsync,
            max_batch: engine.max_batch,
            write_queue_depth: 65536,
            readers: engine.readers,
            databases: engine.databases,
            maxclients: 10000,
            requirepass: None,
            protected_mode: true,
            proto_max_bulk_len: 512 * 1024 * 1024,
            client_query_buffer_limit: 1024 * 1024 * 1024,
            client_output_buffer_limit: crate::limits::DEFAULT_LIMITS.into(),
            tcp_backlog: 511,
            maxdisk: 0,
            disk_reserve_bytes: engine.disk_reserve_bytes,
            page_size: engine.page_size,
            checkpoint_wal_bytes: engine.checkpoint_wal_bytes,
            checkpoint_wal_percent: engine.checkpoint_wal_percent,
            wal_checkpoint_bytes: engine.wal_checkpoint_bytes,
            checkpoint: engine.checkpoint,
            replica_of_file: None,
            replicaof: None,
            journal_size_limit: engine.journal_size_limit,
            expire_chunk: engine.expire_chunk,
            read_cache_bytes: engine.read_cache_bytes,
            io_threads: 0,
            log_level: "info".into(),
            snapshot_file: None,
            enable_debug_command: DebugCommand::No,
            aclfile: None,
            tls_port: None,
            tls_cert_file: None,
            tls_key_file: None,
            tls_ca_cert_file: None,
            tls_auth_clients: Default::default(),
            redis: Default::default(),
            config_file: None,
        }
    }
}

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid TOML for this schema.
    #[error("invalid config file {path}, line {line}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The line the error is on (1-based; 0 if toml gave no place).
        line: usize,
        /// What toml said, on one line.
        message: String,
    },
    /// A value out of its range.
    #[error("invalid setting {0}")]
    Invalid(String),
}

impl Config {
    /// Reads a TOML file; keys it does not set keep their defaults.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.into(),
            source,
        })?;
        let mut config: Config = toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: path.into(),
            // One line with its number: toml's own rendering spans several
            // lines with a snippet, which the journal would cut apart.
            line: e
                .span()
                .and_then(|s| text.get(..s.start))
                .map_or(0, |before| before.matches('\n').count() + 1),
            message: e.message().replace('\n', " "),
        })?;
        config.validate()?;
        config.config_file = Some(path.to_path_buf());
        Ok(config)
    }

    /// The keys that differ between `self` (the running configuration)
    /// and `new` among those that only a restart applies, as
    /// `name old -> new` (secrets are not printed: there are none among
    /// them).
    pub fn restart_only_differences(&self, new: &Config) -> Vec<String> {
        let table = |c: &Config| match toml::Value::try_from(c) {
            Ok(toml::Value::Table(t)) => t,
            _ => toml::Table::new(),
        };
        let (old, new) = (table(self), table(new));
        let mut keys: Vec<&String> = old.keys().chain(new.keys()).collect();
        keys.sort();
        keys.dedup();
        let show =
            |v: Option<&toml::Value>| v.map_or_else(|| "(unset)".to_string(), |v| v.to_string());
        keys.into_iter()
            .filter(|k| !RELOADABLE.contains(&k.as_str()))
            .filter(|k| old.get(*k) != new.get(*k))
            .map(|k| format!("{k} {} -> {}", show(old.get(k)), show(new.get(k))))
            .collect()
    }

    /// Checks ranges the types do not.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(spec) = &self.replicaof {
            if self.replicaof_master().is_none() {
                return Err(ConfigError::Invalid(format!(
                    "replicaof {spec:?} is not \"host port\""
                )));
            }
            if self.replica_of_file.is_some() {
                return Err(ConfigError::Invalid(
                    "replicaof and replica_of_file cannot both be set".into(),
                ));
            }
        }
        if self.databases == 0 {
            return Err(ConfigError::Invalid("databases must be at least 1".into()));
        }
        if self.max_batch == 0 {
            return Err(ConfigError::Invalid("max_batch must be at least 1".into()));
        }
        if self.write_queue_depth == 0 {
            return Err(ConfigError::Invalid(
                "write_queue_depth must be at least 1".into(),
            ));
        }
        if self.maxclients == 0 {
            return Err(ConfigError::Invalid("maxclients must be at least 1".into()));
        }
        if !(512..=65536).contains(&self.page_size) || !self.page_size.is_power_of_two() {
            return Err(ConfigError::Invalid(format!(
                "page_size {} is not a power of two from 512 to 65536",
                self.page_size
            )));
        }
        if let Some(perm) = &self.unixsocketperm {
            parse_perm(perm)?;
        }
        if !(1024 * 1024..=respite_engine::MAX_STRING_LEN).contains(&self.proto_max_bulk_len) {
            return Err(ConfigError::Invalid(format!(
                "proto_max_bulk_len must be between 1048576 and {} (the longest string SQLite \
                 stores beside its key)",
                respite_engine::MAX_STRING_LEN
            )));
        }
        self.output_limits()?;
        crate::params::check_file_table(&self.redis).map_err(ConfigError::Invalid)?;
        Ok(())
    }

    /// `client_output_buffer_limit`, parsed over Redis's defaults.
    pub fn output_limits(&self) -> Result<[crate::limits::ClassLimit; 3], ConfigError> {
        let defaults =
            crate::limits::parse_limits(crate::limits::DEFAULT_LIMITS, Default::default())
                .map_err(|e| ConfigError::Invalid(e.into()))?;
        crate::limits::parse_limits(&self.client_output_buffer_limit, defaults)
            .map_err(|e| ConfigError::Invalid(format!("client_output_buffer_limit: {e}")))
    }

    /// The engine's part of the configuration.
    pub fn engine(&self) -> EngineConfig {
        EngineConfig {
            path: self
                .replica_of_file
                .clone()
                .unwrap_or_else(|| self.db.clone()),
            appendfsync: self.appendfsync,
            max_batch: self.max_batch,
            readers: self.readers,
            databases: self.databases,
            page_size: self.page_size,
            checkpoint_wal_bytes: self.checkpoint_wal_bytes,
            checkpoint_wal_percent: self.checkpoint_wal_percent,
            wal_checkpoint_bytes: self.wal_checkpoint_bytes,
            checkpoint: self.checkpoint,
            journal_size_limit: self.journal_size_limit,
            expire_chunk: self.expire_chunk,
            read_cache_bytes: self.read_cache_bytes,
            snapshot: self.snapshot_file.clone(),
            maxdisk: self.maxdisk,
            disk_reserve_bytes: self.disk_reserve_bytes,
            replica: self.replica_of_file.is_some(),
        }
    }
}

/// Parses an octal permission string such as `"770"`.
pub fn parse_perm(text: &str) -> Result<u32, ConfigError> {
    u32::from_str_radix(text, 8)
        .ok()
        .filter(|p| *p <= 0o777)
        .ok_or_else(|| {
            ConfigError::Invalid(format!("unixsocketperm '{text}' is not an octal mode"))
        })
}

/// Whether clients must present a certificate (`tls_auth_clients`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthClients {
    /// A certificate signed by the CA is required (Redis's default).
    #[default]
    Yes,
    /// Not required; one that is sent must verify.
    Optional,
    /// Not asked for.
    No,
}

impl std::str::FromStr for AuthClients {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "yes" => Ok(AuthClients::Yes),
            "optional" => Ok(AuthClients::Optional),
            "no" => Ok(AuthClients::No),
            _ => Err(format!("'{s}' is not yes, optional or no")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_config_file_parses_and_matches_the_defaults() {
        let text = include_str!("../../../configs/respite.toml");
        let parsed: Config = toml::from_str(text).expect("configs/respite.toml parses");
        parsed.validate().expect("and validates");
        let default = Config::default();
        // The file sets every key to its default, except where it points
        // at the packaged paths.
        assert_eq!(parsed.port, default.port);
        assert_eq!(parsed.bind, default.bind);
        assert_eq!(parsed.appendfsync, default.appendfsync);
        assert_eq!(parsed.max_batch, default.max_batch);
        assert_eq!(parsed.maxclients, default.maxclients);
        assert_eq!(parsed.proto_max_bulk_len, default.proto_max_bulk_len);
        assert_eq!(
            parsed.client_query_buffer_limit,
            default.client_query_buffer_limit
        );
        assert_eq!(parsed.write_queue_depth, default.write_queue_depth);
        assert_eq!(parsed.readers, default.readers);
        assert_eq!(parsed.databases, default.databases);
        assert_eq!(parsed.read_cache_bytes, default.read_cache_bytes);
        assert_eq!(parsed.page_size, default.page_size);
        assert_eq!(parsed.checkpoint_wal_bytes, default.checkpoint_wal_bytes);
        assert_eq!(
            parsed.checkpoint_wal_percent,
            default.checkpoint_wal_percent
        );
        assert_eq!(parsed.wal_checkpoint_bytes, default.wal_checkpoint_bytes);
        assert_eq!(parsed.journal_size_limit, default.journal_size_limit);
        assert!(toml::from_str::<Config>("page_size = 1000")
            .unwrap()
            .validate()
            .is_err());
    }

    #[test]
    fn unknown_keys_are_refused() {
        assert!(toml::from_str::<Config>("no_such_key = 1").is_err());
        assert!(parse_perm("777").is_ok());
        assert!(parse_perm("999").is_err());
    }
}

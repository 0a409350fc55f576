//! Settings the engine needs, with their defaults.
//!
//! The daemon builds this from its flat TOML file and command line (see
//! respite-server's `Config::engine`); an embedding program builds an
//! [`EngineConfig`] directly.

use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// When a committed batch reaches the disk, named as Redis's `appendfsync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum AppendFsync {
    /// Every batch is fsynced before any of its writes is acknowledged
    /// (`PRAGMA synchronous=FULL` in WAL mode). Survives power loss.
    #[default]
    Always,
    /// Commits do not wait for the disk; the writer fsyncs the WAL at least
    /// once a second. Survives a process crash; a power loss can lose up to
    /// about one second of acknowledged writes.
    Everysec,
    /// Commits never wait for the disk; the OS writes the WAL back when it
    /// likes. Survives a process crash; a power loss can lose whatever the OS
    /// had not written yet.
    No,
}

impl AppendFsync {
    /// The name used in the config file, `CONFIG GET` and `INFO`.
    pub fn as_str(self) -> &'static str {
        match self {
            AppendFsync::Always => "always",
            AppendFsync::Everysec => "everysec",
            AppendFsync::No => "no",
        }
    }
}

impl FromStr for AppendFsync {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "always" => Ok(AppendFsync::Always),
            "everysec" => Ok(AppendFsync::Everysec),
            "no" => Ok(AppendFsync::No),
            other => Err(format!(
                "invalid appendfsync '{other}' (always, everysec or no)"
            )),
        }
    }
}

/// Who copies the WAL back into the database and starts it over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Checkpoint {
    /// respite does (the checkpointer thread's copies, the writer's WAL
    /// restarts and its bound, a TRUNCATE at a clean stop).
    #[default]
    Auto,
    /// Another process does, typically Litestream, which must own the WAL
    /// to replicate it: respite never checkpoints, never restarts or
    /// truncates the WAL, and waits out the write lock that process takes
    /// around its own checkpoints (see `docs/operations.md`).
    External,
}

impl Checkpoint {
    /// The name used in the config file, on the command line and in INFO.
    pub fn as_str(self) -> &'static str {
        match self {
            Checkpoint::Auto => "auto",
            Checkpoint::External => "external",
        }
    }
}

impl FromStr for Checkpoint {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(Checkpoint::Auto),
            "external" => Ok(Checkpoint::External),
            other => Err(format!("invalid checkpoint '{other}' (auto or external)")),
        }
    }
}

/// Everything the engine needs to open a database and start its threads.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// The SQLite database file (its `-wal` and `-shm` files live beside it).
    pub path: PathBuf,
    /// Durability of acknowledged writes.
    pub appendfsync: AppendFsync,
    /// The most operations one group commit may hold; 1 turns batching off.
    /// (While commits are fast the writer cuts groups at 256 anyway; see
    /// `writer::group_cap`.)
    pub max_batch: usize,
    /// Number of read-only connections (and threads) in the read pool.
    pub readers: usize,
    /// Number of logical databases (`SELECT 0..databases-1`).
    pub databases: u32,
    /// SQLite page size for a new database file (512 to 65536, a power of
    /// two; 1,024 by default). Every write to a random key rewrites one
    /// whole leaf page in the WAL, so this is the floor of the bytes a write
    /// costs; and a row longer than about a fifth of a page spills into an
    /// overflow page of its own, which is what makes 512-byte pages cost 4x
    /// the space for 100-byte values (see `docs/storage.md`). An existing
    /// file keeps the size it was made with.
    pub page_size: u32,
    /// The background checkpointer copies the WAL into the database once it
    /// holds this many bytes not yet copied (or
    /// [`Self::checkpoint_wal_percent`] of the database file's size, if that
    /// is set and more). A page written many times in that stretch is copied
    /// once, so a longer stretch means fewer bytes written per write; but
    /// every page a reader or the writer fetches is first looked up among
    /// the WAL frames not yet copied (SQLite's `walFindFrame` searches one
    /// hash table per 4,096 of them), so a longer stretch also makes every
    /// lookup slower. Never more than half of
    /// [`Self::wal_checkpoint_bytes`], nor a quarter of the file system's
    /// free space. 0 copies after every commit.
    pub checkpoint_wal_bytes: u64,
    /// The copy threshold as a percentage of the database file's size, if
    /// that is more than [`Self::checkpoint_wal_bytes`] (like Redis's
    /// `auto-aof-rewrite-percentage`); 0, the default, leaves the threshold
    /// absolute. It is capped like the absolute one, so it cannot make the
    /// WAL grow with the database.
    pub checkpoint_wal_percent: u64,
    /// The WAL's bound, in bytes of frames: when the background copy falls
    /// behind and the WAL reaches it, the writer waits a few milliseconds
    /// between groups (at most 10 per group, 40 past twice the bound) for
    /// the copy to catch up, then starts the WAL over; it never copies the
    /// WAL itself on the write path. 0: no bound.
    pub wal_checkpoint_bytes: u64,
    /// Who checkpoints the WAL. With [`Checkpoint::External`] the copy
    /// thresholds above are not used and [`Self::wal_checkpoint_bytes`] is
    /// only a warning threshold: past it, the log says once a minute that
    /// the external checkpointer seems to have stopped.
    pub checkpoint: Checkpoint,
    /// `PRAGMA journal_size_limit`: what SQLite leaves of the WAL file when
    /// it starts it over; -1 keeps the file at its size (truncating and
    /// regrowing a long WAL at every restart costs the writer an
    /// `ftruncate` each time).
    pub journal_size_limit: i64,
    /// Expired keys the writer deletes per round of a sweep between
    /// batches (a sweep runs up to 16 rounds while they come back full).
    pub expire_chunk: usize,
    /// Bytes of memory the value cache of hot strings may use; 0 turns it
    /// off (every GET then goes to the read pool).
    pub read_cache_bytes: usize,
    /// Where SAVE and BGSAVE write their snapshot; `None` means beside the
    /// database, as `<path>.snapshot` (see [`EngineConfig::snapshot_path`]).
    pub snapshot: Option<PathBuf>,
    /// A budget in bytes for the database's live pages plus its WAL; over
    /// it, writes that add data are refused (see `disk.rs`). 0: none.
    pub maxdisk: u64,
    /// Bytes set aside beside the database, released when the disk fills
    /// up so that deletions can still be written (see `disk.rs`).
    pub disk_reserve_bytes: u64,
    /// Serve the file read-only, as a replica another process (Litestream's
    /// follow mode) keeps up to date: no writer, no checkpoints, no value
    /// cache; every write is refused (see `replica.rs`).
    pub replica: bool,
}

impl EngineConfig {
    /// The snapshot file SAVE and BGSAVE write.
    pub fn snapshot_path(&self) -> PathBuf {
        self.snapshot.clone().unwrap_or_else(|| {
            let mut p = self.path.clone().into_os_string();
            p.push(".snapshot");
            PathBuf::from(p)
        })
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            path: PathBuf::from("respite.db"),
            appendfsync: AppendFsync::Always,
            max_batch: 1024,
            readers: 4,
            databases: 16,
            page_size: 1024,
            checkpoint_wal_bytes: 32 * 1024 * 1024,
            checkpoint_wal_percent: 0,
            wal_checkpoint_bytes: 128 * 1024 * 1024,
            checkpoint: Checkpoint::Auto,
            journal_size_limit: -1,
            expire_chunk: 256,
            read_cache_bytes: 64 * 1024 * 1024,
            snapshot: None,
            maxdisk: 0,
            disk_reserve_bytes: 16 * 1024 * 1024,
            replica: false,
        }
    }
}

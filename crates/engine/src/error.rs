//! The engine's error type.
//!
//! Every way a command can fail inside the engine is a variant here. The
//! `Display` text of each variant is exactly the error line redis-server sends
//! for the same failure, so the server can put it on the wire unchanged and a
//! client library that matches on Redis error prefixes (`WRONGTYPE`, `ERR`)
//! behaves the same against respite as against Redis.

/// A failure of one engine operation.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The key exists but holds another data type.
    #[error("WRONGTYPE Operation against a key holding the wrong kind of value")]
    WrongType,
    /// A stored value (or an argument) is not a 64-bit signed integer.
    #[error("ERR value is not an integer or out of range")]
    NotInteger,
    /// INCRBY and friends would leave the `i64` range.
    #[error("ERR increment or decrement would overflow")]
    Overflow,
    /// A stored value is not a float (INCRBYFLOAT).
    #[error("ERR value is not a valid float")]
    NotFloat,
    /// INCRBYFLOAT would produce NaN or an infinity.
    #[error("ERR increment would produce NaN or Infinity")]
    NanOrInfinity,
    /// ZADD INCR or ZINCRBY would give a member a NaN score (`+inf` plus
    /// `-inf`).
    #[error("ERR resulting score is not a number (NaN)")]
    ScoreNaN,
    /// RENAME and friends on a key that does not exist.
    #[error("ERR no such key")]
    NoSuchKey,
    /// A string would grow past `proto-max-bulk-len` (APPEND, SETRANGE).
    #[error("ERR string exceeds maximum allowed size (proto-max-bulk-len)")]
    StringTooLong,
    /// A SCAN cursor that is not a number.
    #[error("ERR invalid cursor")]
    InvalidCursor,
    /// HINCRBY on a field whose value is not a 64-bit signed integer.
    #[error("ERR hash value is not an integer")]
    HashNotInteger,
    /// HINCRBYFLOAT on a field whose value is not a float.
    #[error("ERR hash value is not a float")]
    HashNotFloat,
    /// A key row carries a type code this build does not know: the file
    /// was written by a newer build. Nothing is read or written as if it
    /// were a string.
    #[error("ERR the key holds a type this server does not know (code {0}); was the file written by a newer respite?")]
    UnknownType(i64),
    /// The file's layout version is newer than this build's.
    #[error("ERR the database file has layout version {0}, newer than this server knows")]
    NewerLayout(i64),
    /// SQLite failed while running this one operation. If it had started
    /// writing, its whole transaction is rolled back (see `txn.rs`); either
    /// way nothing of it is visible.
    #[error("ERR storage error: {0}")]
    Storage(#[from] rusqlite::Error),
    /// The batch this operation belonged to could not be committed (disk full,
    /// I/O error). Nothing of the batch was applied.
    #[error("ERR commit failed, nothing of this command was applied: {0}")]
    CommitFailed(String),
    /// A write that may add data, refused because the database is over its
    /// `maxdisk` budget (Redis's OOM error, worded for disk).
    #[error("OOM command not allowed when used disk > 'maxdisk'.")]
    OverMaxDisk,
    /// A write that may add data, refused because the database's live
    /// bytes are over `maxmemory` under `noeviction`, or with nothing left
    /// to evict (Redis's OOM error, word for word; see `evict.rs`).
    #[error("OOM command not allowed when used memory > 'maxmemory'.")]
    OverMaxMemory,
    /// A write that may add data, refused because the disk filled up (see
    /// `disk.rs`): deletions still run.
    #[error("OOM command not allowed when the disk is full.")]
    DiskFull,
    /// A writer, reader or checkpointer thread could not be started.
    #[error("ERR cannot start a thread: {0}")]
    Thread(#[source] std::io::Error),
    /// Another process owns the database file (see `owner.rs`).
    #[error("{0}")]
    Owner(#[from] crate::owner::OwnerError),
    /// Litestream's tables are in the file while respite is set to
    /// checkpoint the WAL itself: both checkpointing would make Litestream
    /// lose its place in the WAL and respite's writes stall.
    #[error("the database file holds Litestream's tables (_litestream_seq, _litestream_lock): it is replicated by Litestream, which must be the only one to checkpoint its WAL; start respite with checkpoint = \"external\" (--checkpoint external), or drop those tables if Litestream no longer replicates this file")]
    LitestreamAttached,
    /// A write on a read replica (see `replica.rs`): Redis's text for a
    /// write sent to a read-only replica.
    #[error("READONLY You can't write against a read only replica.")]
    ReadOnlyReplica,
    /// A replica was started on a file that does not exist (yet).
    #[error("the replica's database file {} does not exist; start the follower first (litestream restore -f -o FILE REPLICA)", .0.display())]
    ReplicaMissing(std::path::PathBuf),
    /// A replica's file has another layout version (the first) than this
    /// build's (the second): a replica cannot migrate a file it may not
    /// write.
    #[error("the replica's database file has layout version {0}, and this build serves only version {1}: run the same respite version on the primary and the replica")]
    ReplicaLayout(i64, i64),
    /// A bulk load ([`crate::Txn::load_fresh`]) met a key that exists
    /// already: the database was not empty, or the load holds the key
    /// twice. The key is shown quoted as redis-cli shows it.
    #[error("ERR the key {} of db {db} exists already", crate::repr::repr_string(.key))]
    KeyExists {
        /// The key's database.
        db: u32,
        /// The key.
        key: Vec<u8>,
    },
    /// The engine is shutting down and takes no more work.
    #[error("ERR server is shutting down")]
    ShuttingDown,
    /// The operation panicked: a bug. Its transaction is rolled back and the
    /// server goes on; the message says where.
    #[error("ERR internal error: {0}")]
    Internal(String),
}

/// Result alias used throughout the engine.
pub type Result<T, E = EngineError> = std::result::Result<T, E>;

//! A full synchronization's RDB, loaded into the database through the
//! writer (on a blocking thread, as `respited import` loads a file).
//!
//! The file is read one key at a time by `respite-rdb`'s reader; keys go
//! to the writer in chunks of [`CHUNK_KEYS`] keys or [`CHUNK_BYTES`] of
//! values, each one writer operation (one transaction), at most two in
//! flight, so memory stays bounded whatever the file's size. The first
//! operation empties every database and forgets the stored point in the
//! master's stream; the last stores the point of the `+FULLRESYNC`. A load
//! cut short (a corrupt file: its checksum is checked at its end; a
//! promotion meanwhile) therefore leaves no point behind, and the next
//! synchronization is full again; a failed load also empties the
//! database again, so nothing half-loaded stays.
//!
//! As redis does when it loads its master's RDB, keys already expired are
//! loaded too (the master sends their DEL), function libraries and module
//! values are skipped and named in the log, and so are keys of databases
//! this server does not have.

use std::io::BufReader;
use std::path::Path;
use std::sync::{mpsc, Arc};

use respite_engine::upstream::Position;
use respite_engine::{EngineError, WriteItem, WriteOp};
use respite_rdb::{Entry, RdbReader};

use crate::reply::Reply;
use crate::state::Shared;

/// Keys per writer operation.
const CHUNK_KEYS: usize = 20_000;

/// Bytes of values per writer operation, whichever limit comes first.
const CHUNK_BYTES: usize = 32 << 20;

/// What a load did.
#[derive(Debug, Default)]
pub(crate) struct Loaded {
    /// Keys stored.
    pub keys: u64,
    /// The stream's database at the RDB (its `repl-stream-db`).
    pub db: u32,
}

type Pending = mpsc::Receiver<Result<Reply, EngineError>>;

/// Submits one operation, unless the link of `generation` was stopped
/// (REPLICAOF) meanwhile: the check and the submission are one step under
/// the link's lock, so nothing of a stopped load reaches the writer after
/// a promotion was answered. The receiver yields the operation's result.
fn submit(shared: &Shared, generation: u64, op: WriteOp<Reply>) -> Result<Pending, String> {
    let (tx, rx) = mpsc::channel();
    let item = WriteItem {
        ops: vec![op],
        done: Box::new(move |mut results| {
            let _ = tx.send(results.pop().unwrap_or(Err(EngineError::ShuttingDown)));
        }),
    };
    shared
        .upstream
        .while_current(generation, || shared.engine.submit_write(item))
        .ok_or_else(|| "the load was stopped by REPLICAOF".to_string())?
        .map_err(|e| e.to_string())?;
    Ok(rx)
}

fn wait(rx: Pending) -> Result<(), String> {
    match rx.recv() {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("the writer stopped".into()),
    }
}

fn chunk_op(chunk: Vec<Entry>) -> WriteOp<Reply> {
    Box::new(move |txn| {
        for e in &chunk {
            crate::value::write_value(txn, e.db as u32, &e.key, &e.value, e.expire_ms).map_err(
                |e| match e {
                    crate::error::CommandError::Engine(e) => e,
                    other => EngineError::Internal(other.to_string()),
                },
            )?;
        }
        Ok(Reply::Ok)
    })
}

/// Loads the RDB at `path` as the data of the master's point `position`
/// (its database is set from the file), for the link of `generation`; a
/// load stops when that link is no longer the current one.
pub(crate) fn load(
    shared: &Arc<Shared>,
    path: &Path,
    mut position: Position,
    generation: u64,
) -> Result<Loaded, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("opening the RDB: {e}"))?;
    let mut reader = RdbReader::new(BufReader::with_capacity(1 << 20, file))
        .map_err(|e| format!("reading the RDB: {e}"))?;
    wait(submit(
        shared,
        generation,
        Box::new(|txn| {
            txn.flush_all()?;
            txn.set_upstream(None)?;
            Ok(Reply::Ok)
        }),
    )?)?;
    let result = load_keys(shared, &mut reader, generation);
    let loaded = match result {
        Ok(keys) => keys,
        Err(e) => {
            // Nothing half-loaded stays: the database is emptied again.
            let undone = submit(
                shared,
                generation,
                Box::new(|txn| {
                    txn.flush_all()?;
                    Ok(Reply::Ok)
                }),
            )
            .and_then(wait);
            return Err(match undone {
                Ok(()) => e,
                Err(u) => format!("{e}; emptying the database failed too: {u}"),
            });
        }
    };
    let stats = reader.stats();
    let db = stats
        .aux
        .iter()
        .find(|(k, _)| k == b"repl-stream-db")
        .and_then(|(_, v)| std::str::from_utf8(v).ok()?.parse::<u32>().ok())
        .filter(|&db| db < shared.config.databases)
        .unwrap_or(0);
    for (db, key, module) in &stats.skipped_modules {
        tracing::warn!(db, key = %String::from_utf8_lossy(key), module, "the master's key of a module type was not loaded");
    }
    position.db = db;
    // The master's function libraries replace this server's, in the
    // transaction that stores the point: stored with the data, as a
    // client's FUNCTION RESTORE ... FLUSH would.
    let codes = stats.functions.clone();
    let change = Arc::new(std::sync::Mutex::new(None));
    let made = change.clone();
    wait(submit(
        shared,
        generation,
        Box::new(move |txn| {
            match crate::cmd::functions::load_from_master(txn, &codes) {
                Ok(c) => *crate::sync::lock(&made) = c,
                Err(crate::error::CommandError::Engine(e)) => return Err(e),
                // A library this server cannot load (redis would refuse
                // the whole file): the others are not loaded either.
                Err(e) => tracing::warn!(
                    error = %e,
                    libraries = codes.len(),
                    "the master's function libraries were not loaded"
                ),
            }
            txn.set_upstream(Some(&position))?;
            Ok(Reply::Ok)
        }),
    )?)?;
    if let Some(c) = crate::sync::lock(&change).take() {
        c.publish();
    }
    Ok(Loaded { keys: loaded, db })
}

fn load_keys<R: std::io::Read>(
    shared: &Arc<Shared>,
    reader: &mut RdbReader<R>,
    generation: u64,
) -> Result<u64, String> {
    let databases = u64::from(shared.config.databases);
    let mut chunk = Vec::new();
    let mut bytes = 0usize;
    let mut keys = 0u64;
    let mut skipped = 0u64;
    let mut in_flight: std::collections::VecDeque<Pending> = Default::default();
    for entry in reader.by_ref() {
        let entry = entry.map_err(|e| format!("reading the RDB: {e}"))?;
        if entry.db >= databases {
            skipped += 1;
            continue;
        }
        keys += 1;
        bytes += entry.value.approx_size() + entry.key.len();
        chunk.push(entry);
        if chunk.len() >= CHUNK_KEYS || bytes >= CHUNK_BYTES {
            if in_flight.len() >= 2 {
                if let Some(rx) = in_flight.pop_front() {
                    wait(rx)?;
                }
            }
            in_flight.push_back(submit(
                shared,
                generation,
                chunk_op(std::mem::take(&mut chunk)),
            )?);
            bytes = 0;
        }
    }
    if !chunk.is_empty() {
        in_flight.push_back(submit(shared, generation, chunk_op(chunk))?);
    }
    for rx in in_flight {
        wait(rx)?;
    }
    if skipped > 0 {
        tracing::warn!(
            keys = skipped,
            databases = shared.config.databases,
            "keys of the master's databases beyond 'databases' were not loaded"
        );
    }
    Ok(keys)
}

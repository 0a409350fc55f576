//! `respited import FILE.rdb`: loads every database of a redis-server RDB
//! file (what `SAVE` or `BGSAVE` writes, RDB versions up to 10: Redis 7.0,
//! 6.x and older) into respite's database, with the daemon not running.
//!
//! The whole import is one writer operation, and so one transaction: all
//! of the file or nothing. The file is read as a stream, one key at a time
//! (`respite-rdb`'s `RdbReader`), on this thread, and handed in chunks of
//! [`CHUNK_KEYS`] keys (or [`CHUNK_BYTES`] of values) to the operation on
//! the writer's thread, [`READ_AHEAD`] chunks ahead at most, so reading and
//! writing run side by side on two cores and the values held at once stay
//! bounded whatever the file's size. The writer's page cache is raised to
//! [`LOAD_CACHE_BYTES`] for the import (pages past it spill into the WAL,
//! uncommitted). Keys whose expiry has passed are skipped, as
//! redis-server skips them when it loads a file; so are module values (by
//! name), function libraries and empty collections, and the report lists
//! what was skipped.
//!
//! Into an empty database the keys go through the engine's bulk path
//! (`Txn::load_fresh`: one insert per row, no lookup, each chunk in key
//! order); streams, which it does not take, through RESTORE's. It refuses a
//! database that already holds keys unless `--force`, and then each key of
//! the file replaces its namesake through RESTORE's path.
//!
//! Nothing is committed before the file has been read to its end and its
//! checksum checked: a corrupt file, a full disk, or the process killed
//! midway all leave the database as it was before the import (a kill
//! leaves uncommitted frames in the WAL, which the next open discards),
//! and the import can simply be run again. The commit is the import's
//! one sync of the WAL; the engine's stop then copies the WAL into the
//! database, and the time reported includes that.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Instant;

use respite_engine::load::{Fresh, FreshKey};
use respite_engine::{Engine, EngineError, WriteItem, WriteOp};
use respite_rdb::{Entry, RdbReader, Value};
use respite_server::cmd::dump::write_value;
use respite_server::reply::Reply;

/// Keys per chunk handed from the file's reader to the writer.
const CHUNK_KEYS: usize = 20_000;

/// Bytes of values per chunk, whichever limit comes first.
const CHUNK_BYTES: usize = 8 << 20;

/// Chunks read ahead of the writer: with the one the writer loads and the
/// one being read, the most values the import holds at once is about four
/// chunks.
const READ_AHEAD: usize = 2;

/// The writer's page cache during the import (see `Txn::load_cache`).
const LOAD_CACHE_BYTES: usize = 256 << 20;

/// Counts input bytes as the reader consumes them, for the progress line.
struct Counting<R> {
    inner: R,
    read: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// What the import did, for the report.
#[derive(Default)]
struct Report {
    by_type: [u64; 6],
    per_db: std::collections::BTreeMap<u64, u64>,
    expired: u64,
    out_of_range: u64,
}

const TYPE_NAMES: [&str; 6] = ["string", "list", "set", "hash", "zset", "stream"];

fn type_index(v: &Value) -> usize {
    match v {
        Value::String(_) => 0,
        Value::List(_) => 1,
        Value::Set(_) => 2,
        Value::Hash(_) => 3,
        Value::ZSet(_) => 4,
        _ => 5,
    }
}

fn engine_error(e: respite_server::error::CommandError) -> EngineError {
    match e {
        respite_server::error::CommandError::Engine(e) => e,
        other => EngineError::Internal(other.to_string()),
    }
}

/// Runs one operation on the writer; the receiver yields its result.
fn submit(
    engine: &Engine<Reply>,
    op: WriteOp<Reply>,
) -> Result<mpsc::Receiver<Result<Reply, EngineError>>, String> {
    let (tx, rx) = mpsc::channel();
    let item = WriteItem {
        ops: vec![op],
        done: Box::new(move |mut results| {
            let _ = tx.send(results.pop().unwrap_or(Err(EngineError::ShuttingDown)));
        }),
    };
    engine.submit_write(item).map_err(|e| e.to_string())?;
    Ok(rx)
}

fn wait(rx: mpsc::Receiver<Result<Reply, EngineError>>) -> Result<(), String> {
    match rx.recv() {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("the writer stopped".into()),
    }
}

/// What the loading operation is sent: the keys of the file a chunk at a
/// time, then whether the file read to its end intact.
enum Msg {
    Chunk(Vec<Entry>),
    Done,
    Abort,
}

/// The whole import as one writer operation, and so one transaction: it
/// takes chunks from `rx` until the file is read (`Done`), or fails
/// (`Abort`, or the reader gone), and the writer then rolls everything
/// back. Into an empty database (`fresh`) keys are loaded through the
/// engine's bulk path; otherwise each replaces its namesake, as RESTORE
/// REPLACE does. Why it failed, it also puts in `cause` (the writer
/// answers a failed write with its own, wider error).
fn load_op(
    rx: mpsc::Receiver<Msg>,
    fresh: bool,
    cause: Arc<Mutex<Option<String>>>,
) -> WriteOp<Reply> {
    Box::new(move |txn| {
        txn.load_cache(Some(LOAD_CACHE_BYTES))?;
        let result = (|| {
            while let Ok(msg) = rx.recv() {
                match msg {
                    Msg::Chunk(chunk) if fresh => load_chunk(txn, &chunk)?,
                    Msg::Chunk(chunk) => {
                        for e in &chunk {
                            write_value(txn, e.db as u32, &e.key, &e.value, e.expire_ms)
                                .map_err(engine_error)?;
                        }
                        // The keys it noted, forgotten as the bulk path
                        // forgets them: memory stays bounded by the chunk.
                        txn.note_any_key_changed();
                    }
                    Msg::Done => return Ok(()),
                    Msg::Abort => break,
                }
            }
            Err(EngineError::Internal("the import stopped".into()))
        })();
        let restored = txn.load_cache(None);
        if let Err(e) = &result {
            let why = match e {
                // Only the load into an empty database fails so: the key
                // came earlier in the file (redis-server refuses such a
                // file too: "Duplicated key found in RDB file").
                EngineError::KeyExists { db, key } => format!(
                    "the file holds the key {} of db {db} twice",
                    respite_engine::repr::repr_string(key)
                ),
                e => e.to_string(),
            };
            if let Ok(mut cause) = cause.lock() {
                *cause = Some(why);
            }
        }
        result?;
        restored?;
        Ok(Reply::Ok)
    })
}

/// One chunk into an empty database: every value the bulk path takes at
/// once, a stream (which it does not take) through RESTORE's path.
fn load_chunk(txn: &mut respite_engine::Txn<'_, '_>, chunk: &[Entry]) -> Result<(), EngineError> {
    let mut streams = Vec::new();
    let keys: Vec<FreshKey<'_>> = chunk
        .iter()
        .filter_map(|e| {
            let value = match &e.value {
                Value::String(s) => Fresh::String(s),
                Value::List(v) => Fresh::List(v),
                Value::Set(v) => Fresh::Set(v),
                Value::Hash(v) => Fresh::Hash(v),
                Value::ZSet(v) => Fresh::ZSet(v),
                _ => {
                    streams.push(e);
                    return None;
                }
            };
            Some(FreshKey {
                db: e.db as u32,
                key: &e.key,
                value,
                expire_at: e.expire_ms,
            })
        })
        .collect();
    txn.load_fresh(&keys)?;
    for e in streams {
        // RESTORE's path would replace a key loaded before: the bulk
        // path's refusal, for a stream.
        let db = e.db as u32;
        if txn.ignoring_expiry().peek_entry(db, &e.key)?.is_some() {
            return Err(EngineError::KeyExists {
                db,
                key: e.key.clone(),
            });
        }
        write_value(txn, db, &e.key, &e.value, e.expire_ms).map_err(engine_error)?;
    }
    Ok(())
}

/// Imports `file` into the database of `config`; `force` allows a
/// non-empty database. Prints a progress line and the report on stderr.
pub fn run(
    config: &respite_server::Config,
    file: &Path,
    force: bool,
    databases: u64,
) -> Result<(), String> {
    let engine: Engine<Reply> =
        Engine::open_with_delivery(config.engine(), respite_engine::Delivery::inline())
            .map_err(|e| format!("cannot open {}: {e}", config.db.display()))?;
    let existing: u64 = {
        let (tx, rx) = mpsc::channel();
        let op: WriteOp<Reply> = Box::new(move |txn| {
            let n = txn.keyspace()?.iter().map(|c| c.keys).sum::<u64>();
            let _ = tx.send(n);
            Ok(Reply::Ok)
        });
        wait(submit(&engine, op)?)?;
        rx.recv().map_err(|_| "the writer stopped".to_string())?
    };
    if existing > 0 && !force {
        return Err(format!(
            "{} already holds {existing} keys: import into an empty database, or pass --force \
             to add the file's keys to them (keys of the same names are replaced)",
            config.db.display()
        ));
    }
    let f = File::open(file).map_err(|e| format!("cannot open {}: {e}", file.display()))?;
    let total = f.metadata().map(|m| m.len()).unwrap_or(0);
    let read = Arc::new(AtomicU64::new(0));
    let input = BufReader::with_capacity(
        1 << 20,
        Counting {
            inner: f,
            read: read.clone(),
        },
    );
    let started = Instant::now();
    let fresh = existing == 0;
    let result = load(&engine, input, fresh, databases, &read, total, started);
    // The engine's stop copies the WAL into the database (a checkpoint,
    // synced): part of the import's time.
    drop(engine);
    let secs = started.elapsed().as_secs_f64();
    match result {
        Ok((report, stats, version)) => {
            let keys: u64 = report.by_type.iter().sum();
            eprintln!(
                "\rimported {keys} keys from {} (RDB version {version}) in {secs:.1} s ({:.0} keys/s)",
                file.display(),
                keys as f64 / secs.max(1e-9)
            );
            for (name, n) in TYPE_NAMES.iter().zip(report.by_type) {
                if n > 0 {
                    eprintln!("  {name}: {n}");
                }
            }
            for (db, n) in &report.per_db {
                eprintln!("  db{db}: {n} keys");
            }
            if report.expired > 0 {
                eprintln!("  skipped {} keys already expired", report.expired);
            }
            if stats.empty_skipped > 0 {
                eprintln!("  skipped {} empty collections", stats.empty_skipped);
            }
            if report.out_of_range > 0 {
                eprintln!(
                    "  skipped {} keys of databases beyond 'databases' ({databases})",
                    report.out_of_range
                );
            }
            for (db, key, module) in &stats.skipped_modules {
                eprintln!(
                    "  skipped key {:?} in db{db}: a value of module type {module}",
                    String::from_utf8_lossy(key)
                );
            }
            for module in &stats.skipped_module_aux {
                eprintln!("  skipped auxiliary data of module type {module}");
            }
            if !stats.functions.is_empty() {
                eprintln!(
                    "  skipped {} function libraries (FUNCTION is not supported)",
                    stats.functions.len()
                );
            }
            Ok(())
        }
        Err(e) => Err(format!(
            "{e}; nothing was imported (the database is as it was before)"
        )),
    }
}

type Loaded = (Report, respite_rdb::ReaderStats, u32);

/// Reads the file on this thread and hands its keys, a chunk at a time,
/// to the one writer operation that loads them all (see [`load_op`]).
fn load<R: Read>(
    engine: &Engine<Reply>,
    input: R,
    fresh: bool,
    databases: u64,
    read: &AtomicU64,
    total: u64,
    started: Instant,
) -> Result<Loaded, String> {
    let (tx, rx) = mpsc::sync_channel(READ_AHEAD);
    let cause = Arc::new(Mutex::new(None));
    let loading = submit(engine, load_op(rx, fresh, cause.clone()))?;
    let parsed = read_file(&tx, input, databases, read, total, started);
    // Whatever happened, the writer is told: everything, or nothing.
    let _ = tx.send(if parsed.is_ok() {
        Msg::Done
    } else {
        Msg::Abort
    });
    drop(tx);
    let written = wait(loading).map_err(|e| match cause.lock() {
        Ok(mut cause) => cause.take().unwrap_or(e),
        Err(_) => e,
    });
    // A failure of the writer stops the reader too (its channel closes):
    // then the writer's error is the cause; otherwise the reader's is.
    match (parsed, written) {
        (Ok(loaded), Ok(())) => Ok(loaded),
        (Err(ReadError::WriterStopped), Err(e)) | (Ok(_), Err(e)) => Err(e),
        (Err(ReadError::WriterStopped), Ok(())) => Err("the writer stopped".into()),
        (Err(ReadError::File(e)), _) => Err(e),
    }
}

/// Why reading the file stopped.
enum ReadError {
    /// The file is unreadable, corrupt or truncated.
    File(String),
    /// The loading operation stopped taking chunks (it failed).
    WriterStopped,
}

fn read_file<R: Read>(
    tx: &mpsc::SyncSender<Msg>,
    input: R,
    databases: u64,
    read: &AtomicU64,
    total: u64,
    started: Instant,
) -> Result<Loaded, ReadError> {
    let mut reader = RdbReader::new(input).map_err(|e| ReadError::File(e.to_string()))?;
    let version = reader.version();
    let mut report = Report::default();
    let mut chunk = Vec::new();
    let mut bytes = 0usize;
    let mut last_progress = Instant::now();
    let now = respite_engine::now_ms();
    let send = |chunk: Vec<Entry>| {
        tx.send(Msg::Chunk(chunk))
            .map_err(|_| ReadError::WriterStopped)
    };
    for entry in reader.by_ref() {
        let entry = entry.map_err(|e| ReadError::File(format!("reading the file: {e}")))?;
        if entry.db >= databases {
            report.out_of_range += 1;
            continue;
        }
        if entry.expire_ms.is_some_and(|at| at <= now) {
            report.expired += 1;
            continue;
        }
        report.by_type[type_index(&entry.value)] += 1;
        *report.per_db.entry(entry.db).or_default() += 1;
        bytes += entry.value.approx_size() + entry.key.len();
        chunk.push(entry);
        if chunk.len() >= CHUNK_KEYS || bytes >= CHUNK_BYTES {
            send(std::mem::replace(
                &mut chunk,
                Vec::with_capacity(CHUNK_KEYS),
            ))?;
            bytes = 0;
            if last_progress.elapsed().as_secs() >= 1 {
                last_progress = Instant::now();
                let keys: u64 = report.by_type.iter().sum();
                let done = read.load(Ordering::Relaxed);
                eprint!(
                    "\rimporting: {keys} keys, {} of {} MB read, {:.0} keys/s   ",
                    done >> 20,
                    total >> 20,
                    keys as f64 / started.elapsed().as_secs_f64().max(1e-9)
                );
            }
        }
    }
    if !chunk.is_empty() {
        send(chunk)?;
    }
    Ok((report, reader.stats().clone(), version))
}

//! `respited import FILE.rdb`: loads every database of a redis-server RDB
//! file (what `SAVE` or `BGSAVE` writes, RDB versions up to 10: Redis 7.0,
//! 6.x and older) into respite's database, with the daemon not running.
//!
//! The file is read as a stream, one key at a time (`respite-rdb`'s
//! `RdbReader`), on this thread, while the engine's writer stores the
//! previous chunk: keys go to the writer in chunks of [`CHUNK_KEYS`] keys
//! (or [`CHUNK_BYTES`] of values), each one writer operation and so one
//! transaction, with at most two chunks in flight. Memory stays bounded by
//! that, whatever the file's size. Keys whose expiry has passed are
//! skipped, as redis-server skips them when it loads a file; so are
//! module values (by name), function libraries and empty collections, and
//! the report lists what was skipped.
//!
//! It refuses a database that already holds keys unless `--force`, and
//! then the keys of the file replace the keys of the same names. The
//! file's checksum is checked only at its end, after the keys have been
//! written; if the file turns out corrupt (or anything else fails) and the
//! database was empty when the import began, it is emptied again, so a
//! failed import leaves nothing half loaded.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Instant;

use respite_engine::{Engine, EngineError, WriteItem, WriteOp};
use respite_rdb::{Entry, RdbReader, Value};
use respite_server::cmd::dump::write_value;
use respite_server::reply::Reply;

/// Keys per writer operation (one transaction).
const CHUNK_KEYS: usize = 20_000;

/// Bytes of values per writer operation, whichever limit comes first.
const CHUNK_BYTES: usize = 32 << 20;

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

fn chunk_op(chunk: Vec<Entry>) -> WriteOp<Reply> {
    Box::new(move |txn| {
        for e in &chunk {
            write_value(txn, e.db as u32, &e.key, &e.value, e.expire_ms).map_err(engine_error)?;
        }
        Ok(Reply::Ok)
    })
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
    let result = load(&engine, input, databases, &read, total, started);
    match result {
        Ok((report, stats, version)) => {
            let secs = started.elapsed().as_secs_f64();
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
        Err(e) => {
            if existing == 0 {
                let op: WriteOp<Reply> = Box::new(|txn| {
                    txn.flush_all()?;
                    Ok(Reply::Ok)
                });
                let undone = submit(&engine, op).and_then(wait);
                return Err(match undone {
                    Ok(()) => format!("{e}; the database was emptied again"),
                    Err(u) => format!("{e}; emptying the database failed too: {u}"),
                });
            }
            Err(format!(
                "{e}; the keys written before the failure stay (the database was not empty, --force)"
            ))
        }
    }
}

type Loaded = (Report, respite_rdb::ReaderStats, u32);

fn load<R: Read>(
    engine: &Engine<Reply>,
    input: R,
    databases: u64,
    read: &AtomicU64,
    total: u64,
    started: Instant,
) -> Result<Loaded, String> {
    let mut reader = RdbReader::new(input).map_err(|e| e.to_string())?;
    let version = reader.version();
    let mut report = Report::default();
    let mut chunk = Vec::new();
    let mut bytes = 0usize;
    let mut in_flight: std::collections::VecDeque<mpsc::Receiver<_>> = Default::default();
    let mut last_progress = Instant::now();
    let now = respite_engine::now_ms();
    for entry in reader.by_ref() {
        let entry = entry.map_err(|e| format!("reading the file: {e}"))?;
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
            if in_flight.len() >= 2 {
                if let Some(rx) = in_flight.pop_front() {
                    wait(rx)?;
                }
            }
            in_flight.push_back(submit(engine, chunk_op(std::mem::take(&mut chunk)))?);
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
        in_flight.push_back(submit(engine, chunk_op(chunk))?);
    }
    for rx in in_flight {
        wait(rx)?;
    }
    Ok((report, reader.stats().clone(), version))
}

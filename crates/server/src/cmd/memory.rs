//! MEMORY: what a key, and the server, take.
//!
//! redis answers in bytes of its own memory; respite's data lives in the
//! SQLite file, with hot strings also in the value cache. So `MEMORY USAGE`
//! estimates the bytes a key takes in the database file (its name, its
//! elements, and a fixed overhead per row, as `docs/storage.md` measures
//! them) plus what the value cache holds for it; for a collection it
//! samples elements as redis does (`SAMPLES`, default 5, 0 for all) and
//! scales up. `MEMORY STATS` gives redis's fields from the process's and the
//! database's figures; `MEMORY DOCTOR` and `MALLOC-STATS` answer as a
//! redis-server without jemalloc would.

use bytes::Bytes;
use respite_engine::{Kind, View};

use super::common::help;
use crate::args::subcommand;
use crate::args::Args;
use crate::command::{LocalCommand, Plan, Session};
use crate::error::CommandError;
use crate::reply::Reply;

/// Bytes a key row takes besides its name (the row's header and index
/// entries; see docs/storage.md).
const KEY_OVERHEAD: u64 = 48;
/// Bytes an element row takes besides its own data.
const ELEMENT_OVERHEAD: u64 = 16;

/// `MEMORY USAGE key [SAMPLES count] | STATS | DOCTOR | MALLOC-STATS |
/// PURGE | HELP`
pub enum Memory {
    /// The estimate for one key, sampling `samples` elements (0: all).
    Usage(u32, Bytes, usize),
    /// MEMORY STATS.
    Stats,
    /// MEMORY DOCTOR.
    Doctor,
    /// MEMORY MALLOC-STATS.
    MallocStats,
    /// MEMORY PURGE.
    Purge,
    /// MEMORY HELP.
    Help,
}

impl LocalCommand for Memory {
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        let sub = subcommand(args)?;
        Ok(match sub.name.as_str() {
            "USAGE" => {
                let key = args.next()?;
                let mut samples = 5;
                while args.remaining() > 0 {
                    let opt = args.next_upper()?;
                    if opt == "SAMPLES" && args.remaining() > 0 {
                        let n = args.next_i64()?;
                        if n < 0 {
                            return Err(CommandError::Syntax);
                        }
                        samples = usize::try_from(n).unwrap_or(usize::MAX);
                    } else {
                        return Err(CommandError::Syntax);
                    }
                }
                Memory::Usage(s.db(), key, samples)
            }
            "STATS" => Memory::Stats,
            "DOCTOR" => Memory::Doctor,
            "MALLOC-STATS" => Memory::MallocStats,
            "PURGE" => Memory::Purge,
            "HELP" => Memory::Help,
            _ => return Err(sub.unknown("MEMORY")),
        })
    }

    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        let shared = s.shared.clone();
        let read = |f: Box<dyn FnOnce(&View<'_, '_>) -> Reply + Send>| {
            Plan::Read(
                f,
                respite_engine::ReadNeeds {
                    snapshot: true,
                    quick: false,
                },
            )
        };
        Ok(match self {
            Memory::Usage(db, key, samples) => read(Box::new(move |view| {
                let cached = shared
                    .engine
                    .cache()
                    .get(db, &key, respite_engine::now_ms)
                    .map_or(0, |v| (v.len() + key.len()) as u64 + KEY_OVERHEAD);
                match usage(view, db, &key, samples) {
                    Ok(Some(bytes)) => Reply::Int((bytes + cached) as i64),
                    Ok(None) => Reply::Nil,
                    Err(e) => Reply::from(e),
                }
            })),
            Memory::Stats => read(Box::new(move |view| stats(&shared, view))),
            Memory::Doctor => {
                let text = if shared.engine.db_size() < 5 * 1024 * 1024 {
                    "Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and I will be back to our programming as soon as I finished rebooting."
                } else {
                    "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base."
                };
                Plan::Reply(Reply::Verbatim(text.into()))
            }
            Memory::MallocStats => {
                Plan::Reply(Reply::bulk("Stats not supported for the current allocator"))
            }
            Memory::Purge => Plan::Reply(Reply::Ok),
            Memory::Help => Plan::Reply(help(
                "MEMORY",
                &[
                    "DOCTOR",
                    "    Return memory problems reports.",
                    "MALLOC-STATS",
                    "    Return internal statistics report from the memory allocator.",
                    "PURGE",
                    "    Attempt to purge dirty pages for reclamation by the allocator.",
                    "STATS",
                    "    Return information about the memory usage of the server.",
                    "USAGE <key> [SAMPLES <count>]",
                    "    Return memory in bytes used by <key> and its value. Nested values are",
                    "    sampled up to <count> times (default: 5, 0 means sample all).",
                ],
            )),
        })
    }
}

/// The estimate of the bytes `key` takes in the database file; `None`
/// when it does not exist.
fn usage(
    view: &View<'_, '_>,
    db: u32,
    key: &[u8],
    samples: usize,
) -> Result<Option<u64>, CommandError> {
    let Some(entry) = view.entry(db, key)? else {
        return Ok(None);
    };
    let base = key.len() as u64 + KEY_OVERHEAD;
    let count = entry.count.max(0) as u64;
    let want = if samples == 0 { usize::MAX } else { samples };
    // Element sizes of a sample of the elements.
    let sizes: Vec<u64> = match entry.kind {
        Kind::String => {
            let len = view.get_string(db, key)?.map_or(0, |v| v.len() as u64);
            return Ok(Some(base + len));
        }
        Kind::Stream => match view.live(db, key, Kind::Stream)? {
            Some(row) => {
                let n = if samples == 0 { 0 } else { samples };
                let id = respite_engine::stream::StreamId::MIN;
                let max = respite_engine::stream::StreamId::MAX;
                view.stream_range(row.id, id, max, n, false)?
                    .iter()
                    .map(|(_, f)| {
                        16 + f
                            .iter()
                            .map(|(a, b)| (a.len() + b.len()) as u64)
                            .sum::<u64>()
                    })
                    .collect()
            }
            None => Vec::new(),
        },
        Kind::List => match view.live(db, key, Kind::List)? {
            Some(row) => {
                let stop = if samples == 0 { -1 } else { samples as i64 - 1 };
                view.list_range(&row, 0, stop)?
                    .iter()
                    .map(|e| e.len() as u64)
                    .collect()
            }
            None => Vec::new(),
        },
        Kind::Hash => match view.live(db, key, Kind::Hash)? {
            Some(row) => sample(want, |c, n| {
                let (page, next) = view.hash_scan(&row, c, n)?;
                Ok((
                    page.iter()
                        .map(|(f, v)| (f.len() + v.len()) as u64)
                        .collect(),
                    next,
                ))
            })?,
            None => Vec::new(),
        },
        Kind::Set => match view.live(db, key, Kind::Set)? {
            Some(row) => sample(want, |c, n| {
                let (page, next) = view.set_scan(&row, c, n)?;
                Ok((page.iter().map(|m| m.len() as u64).collect(), next))
            })?,
            None => Vec::new(),
        },
        Kind::ZSet => match view.live(db, key, Kind::ZSet)? {
            Some(row) => sample(want, |c, n| {
                let (page, next) = view.zset_scan(&row, c, n)?;
                Ok((page.iter().map(|(m, _)| m.len() as u64 + 8).collect(), next))
            })?,
            None => Vec::new(),
        },
    };
    // A list's count is its length; the sampled mean scales to it.
    let count = if entry.kind == Kind::List {
        view.live(db, key, Kind::List)?
            .map_or(0, |r| r.count.max(0) as u64)
    } else {
        count
    };
    if sizes.is_empty() {
        return Ok(Some(base));
    }
    let mean = sizes.iter().sum::<u64>() as f64 / sizes.len() as f64;
    Ok(Some(
        base + (count as f64 * (mean + ELEMENT_OVERHEAD as f64)) as u64,
    ))
}

/// Up to `want` element sizes from a scan that pages with a cursor.
fn sample(
    want: usize,
    mut page: impl FnMut(u64, usize) -> respite_engine::Result<(Vec<u64>, u64)>,
) -> Result<Vec<u64>, CommandError> {
    let mut out = Vec::new();
    let mut cursor = 0;
    loop {
        let n = want.saturating_sub(out.len()).clamp(1, 1000);
        let (sizes, next) = page(cursor, n)?;
        out.extend(sizes);
        if next == 0 || out.len() >= want {
            break;
        }
        cursor = next;
    }
    out.truncate(want);
    Ok(out)
}

/// MEMORY STATS: redis's fields, in its order.
fn stats(sh: &crate::state::Shared, view: &View<'_, '_>) -> Reply {
    let rss = crate::process::resident_bytes();
    let cache = sh.engine.cache().stats();
    let dataset = sh.engine.db_size() + cache.bytes;
    let dbs = match view.keyspace() {
        Ok(dbs) => dbs,
        Err(e) => return Reply::from(CommandError::from(e)),
    };
    let keys: u64 = dbs.iter().map(|d| d.keys).sum();
    let int = |n: u64| Reply::Int(i64::try_from(n).unwrap_or(i64::MAX));
    let mut fields = vec![
        ("peak.allocated", int(rss)),
        ("total.allocated", int(rss)),
        ("startup.allocated", int(0)),
        ("replication.backlog", int(0)),
        ("clients.slaves", int(0)),
        ("clients.normal", int(0)),
        ("cluster.links", int(0)),
        ("aof.buffer", int(0)),
        ("lua.caches", int(0)),
        ("functions.caches", int(0)),
    ];
    let mut out: Vec<(Reply, Reply)> = fields.drain(..).map(|(k, v)| (Reply::bulk(k), v)).collect();
    for db in &dbs {
        out.push((
            Reply::bulk(format!("db.{}", db.db)),
            Reply::Map(vec![
                (
                    Reply::bulk("overhead.hashtable.main"),
                    int(db.keys * KEY_OVERHEAD),
                ),
                (
                    Reply::bulk("overhead.hashtable.expires"),
                    int(db.expires * 8),
                ),
                (Reply::bulk("overhead.hashtable.slot-to-keys"), int(0)),
            ]),
        ));
    }
    let overhead = rss.saturating_sub(dataset);
    let percent = |part: u64, whole: u64| Reply::Double(part as f64 * 100.0 / whole.max(1) as f64);
    let rest = vec![
        ("overhead.total", int(overhead)),
        ("keys.count", int(keys)),
        (
            "keys.bytes-per-key",
            int(dataset.checked_div(keys).unwrap_or(0)),
        ),
        ("dataset.bytes", int(dataset)),
        ("dataset.percentage", percent(dataset, rss.max(dataset))),
        ("peak.percentage", Reply::Double(100.0)),
        ("allocator.allocated", int(rss)),
        ("allocator.active", int(rss)),
        ("allocator.resident", int(rss)),
        ("allocator-fragmentation.ratio", Reply::Double(1.0)),
        ("allocator-fragmentation.bytes", int(0)),
        ("allocator-rss.ratio", Reply::Double(1.0)),
        ("allocator-rss.bytes", int(0)),
        ("rss-overhead.ratio", Reply::Double(1.0)),
        ("rss-overhead.bytes", int(0)),
        ("fragmentation", Reply::Double(1.0)),
        ("fragmentation.bytes", int(0)),
    ];
    out.extend(rest.into_iter().map(|(k, v)| (Reply::bulk(k), v)));
    Reply::Map(out)
}

/// This family's rows of the command table (see [`crate::command::table`]).
#[rustfmt::skip]
pub(crate) fn commands() -> Vec<crate::command::Spec> {
    use crate::command::Spec;
    vec![
        Spec::local::<Memory>("memory")
            .with_subcommands("MEMORY", &[("doctor", 2), ("help", 2), ("malloc-stats", 2), ("purge", 2), ("stats", 2), ("usage", -3)]),
    ]
}

//! `maxmemory` for a store whose data lives on disk: what it bounds, and
//! how keys are evicted to stay within it.
//!
//! **What is counted.** Redis bounds the memory its dataset takes. respite's
//! dataset is the database file, so `maxmemory` bounds the file's *live*
//! bytes: `(page_count - freelist_count) x page_size`, the pages that hold
//! rows (and the schema's few pages), not the pages SQLite keeps on its
//! freelist for reuse, nor the WAL (that is `maxdisk`'s business, see
//! `disk.rs`). The writer reads both counts from the database header after
//! every commit while a limit is set (two `PRAGMA`s, a few microseconds),
//! and inside an eviction's own transaction after every key it deletes.
//!
//! The unit is a page. A deletion frees a leaf page only once the page is
//! empty or SQLite's rebalancing merges it into its neighbours (when it is
//! less than a third full), so evicting a few random small keys frees no
//! page at all: eviction deletes keys until pages come free, which can be
//! more keys than the bytes over the limit would suggest. New writes fill
//! the room the deletions left inside pages before they take new pages, so
//! under a steady load of writes the live bytes stay at the limit
//! (docs/storage.md, "maxmemory", has the measurements).
//!
//! **Policies** are Redis's: `noeviction` refuses the commands Redis flags
//! `denyoom` while the live bytes are over the limit (the server checks
//! [`Memory::refusal`] at the door); the others evict. Candidates come in
//! samples of `maxmemory-samples` keys, as in Redis, ranked through the
//! access table respite keeps for OBJECT IDLETIME and FREQ (`access.rs`:
//! the second of the last access, and the LFU counter), and the best 16
//! so far are kept in a pool (Redis's `EvictionPool`); each eviction takes
//! the best of the pool that still exists:
//!
//! - `allkeys-lru` and `allkeys-lfu` sample by sweeping the `keys` table
//!   in key order, `maxmemory-samples` keys at a time, from a random first
//!   key, round and round; `volatile-lru` and `volatile-lfu` sweep the
//!   expiry index `keys_by_expiry` the same way, so only keys with a TTL
//!   are candidates. SQLite cannot pick a uniformly random row of a b-tree
//!   without counting it, and seeks to random points land after gaps in the
//!   key space far more often than inside dense runs; a sweep offers every
//!   key to the pool equally often, so the pool holds the idlest (or least
//!   used) keys of the stretch it has passed (a CLOCK-like approximation,
//!   where Redis's is random sampling over the whole keyspace); as many
//!   keys from a random point (below) join each sample, so that a stretch
//!   of keys all used recently does not leave the pool without better
//!   candidates;
//! - `volatile-ttl` needs no sample: the index is in expiry order, so the
//!   key that expires soonest is evicted first, exactly (Redis approximates
//!   this from samples);
//! - `allkeys-random` and `volatile-random` evict one key of a sample taken
//!   at a random point: a random key between the first and last of a
//!   database (found by descending the key prefixes byte by byte, a few
//!   index seeks) and the keys after it, or a random expiry time between
//!   the soonest and the latest and the keys after it.
//!
//! **Where it runs.** On the writer, between groups, in its own transaction
//! (one fsync for every key the step evicts), for at most
//! [`STEP_BUDGET`]: the commits queued behind it wait at most that long. A
//! step that stopped over the limit runs again at the writer's next pause,
//! so eviction keeps up with writes in bounded steps, and writes go on
//! meanwhile (Redis, too, lets commands run while its eviction time proc
//! catches up). A step that finds nothing to evict (an empty database, or
//! `volatile-*` with no key that has a TTL) marks the limit as failing:
//! then, as in Redis, `denyoom` commands are refused with the OOM error
//! until the live bytes fall under the limit or a later step evicts again.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, Instant};

use rusqlite::{params, OptionalExtension};

use crate::access::Access;
use crate::error::{EngineError, Result};
use crate::txn::Txn;

/// The longest one eviction step holds the writer.
pub const STEP_BUDGET: Duration = Duration::from_millis(5);

/// Candidates kept between samples (Redis's `EVPOOL_SIZE`).
const POOL_SIZE: usize = 16;

/// How many prefix bytes the random seek descends before it takes the next
/// key in order.
const DESCENT_DEPTH: usize = 4;

/// Redis's `maxmemory-policy` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Refuse `denyoom` commands over the limit.
    NoEviction,
    /// The least recently used of a sample of all keys.
    AllKeysLru,
    /// The least frequently used of a sample of all keys.
    AllKeysLfu,
    /// A random key.
    AllKeysRandom,
    /// The least recently used of a sample of keys with a TTL.
    VolatileLru,
    /// The least frequently used of a sample of keys with a TTL.
    VolatileLfu,
    /// A random key with a TTL.
    VolatileRandom,
    /// The key with the soonest expiry.
    VolatileTtl,
}

impl Policy {
    const ALL: [Policy; 8] = [
        Policy::NoEviction,
        Policy::AllKeysLru,
        Policy::AllKeysLfu,
        Policy::AllKeysRandom,
        Policy::VolatileLru,
        Policy::VolatileLfu,
        Policy::VolatileRandom,
        Policy::VolatileTtl,
    ];

    /// The policy's name in redis.conf.
    pub fn name(self) -> &'static str {
        match self {
            Policy::NoEviction => "noeviction",
            Policy::AllKeysLru => "allkeys-lru",
            Policy::AllKeysLfu => "allkeys-lfu",
            Policy::AllKeysRandom => "allkeys-random",
            Policy::VolatileLru => "volatile-lru",
            Policy::VolatileLfu => "volatile-lfu",
            Policy::VolatileRandom => "volatile-random",
            Policy::VolatileTtl => "volatile-ttl",
        }
    }

    /// The policy named `name` (as CONFIG SET takes it, any case).
    pub fn parse(name: &str) -> Option<Policy> {
        Policy::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(name))
    }

    fn code(self) -> u8 {
        Policy::ALL.iter().position(|p| *p == self).unwrap_or(0) as u8
    }

    fn from_code(code: u8) -> Policy {
        Policy::ALL
            .get(usize::from(code))
            .copied()
            .unwrap_or(Policy::NoEviction)
    }

    /// Whether only keys with a TTL are candidates.
    fn volatile(self) -> bool {
        matches!(
            self,
            Policy::VolatileLru
                | Policy::VolatileLfu
                | Policy::VolatileRandom
                | Policy::VolatileTtl
        )
    }
}

/// The limit, the policy, and what the writer measured and evicted: shared
/// by the writer (which measures and evicts) and the server (which refuses
/// at the door and reports in INFO).
#[derive(Debug)]
pub struct Memory {
    maxmemory: AtomicU64,
    policy: AtomicU8,
    samples: AtomicU32,
    /// Live bytes of the database at the last measurement.
    used: AtomicU64,
    /// The last eviction step found nothing to evict while over the limit.
    failing: AtomicBool,
    /// Keys evicted since the start or CONFIG RESETSTAT.
    evicted: AtomicU64,
    /// The limit or the policy changed: the writer measures and evicts at
    /// its next pause rather than after its next commit.
    changed: AtomicBool,
}

impl Default for Memory {
    fn default() -> Self {
        Memory {
            maxmemory: AtomicU64::new(0),
            policy: AtomicU8::new(Policy::NoEviction.code()),
            samples: AtomicU32::new(5),
            used: AtomicU64::new(0),
            failing: AtomicBool::new(false),
            evicted: AtomicU64::new(0),
            changed: AtomicBool::new(false),
        }
    }
}

impl Memory {
    /// `maxmemory` in bytes; 0: no limit.
    pub fn maxmemory(&self) -> u64 {
        self.maxmemory.load(Ordering::Relaxed)
    }

    /// The policy in force.
    pub fn policy(&self) -> Policy {
        Policy::from_code(self.policy.load(Ordering::Relaxed))
    }

    /// `maxmemory-samples`.
    pub fn samples(&self) -> u32 {
        self.samples.load(Ordering::Relaxed).max(1)
    }

    /// Sets `maxmemory` (CONFIG SET); the writer measures and evicts at its
    /// next pause (at most 100 ms away), as Redis evicts at once.
    pub fn set_maxmemory(&self, bytes: u64) {
        self.maxmemory.store(bytes, Ordering::Relaxed);
        self.changed.store(true, Ordering::Relaxed);
    }

    /// Sets `maxmemory-policy`.
    pub fn set_policy(&self, policy: Policy) {
        self.policy.store(policy.code(), Ordering::Relaxed);
        self.failing.store(false, Ordering::Relaxed);
        self.changed.store(true, Ordering::Relaxed);
    }

    /// Sets `maxmemory-samples` (at least 1).
    pub fn set_samples(&self, n: u32) {
        self.samples.store(n.max(1), Ordering::Relaxed);
    }

    /// The database's live bytes at the last measurement: what `maxmemory`
    /// bounds.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Whether the live bytes are over a limit.
    pub fn over(&self) -> bool {
        let max = self.maxmemory();
        max > 0 && self.used() > max
    }

    /// Keys evicted since the start or the last reset (INFO
    /// `evicted_keys`).
    pub fn evicted(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }

    /// Zeroes `evicted_keys` (CONFIG RESETSTAT).
    pub fn reset_stats(&self) {
        self.evicted.store(0, Ordering::Relaxed);
    }

    /// Why a command Redis flags `denyoom` must be refused now: over the
    /// limit under `noeviction`, or over it with nothing left to evict.
    pub fn refusal(&self) -> Option<EngineError> {
        if !self.over() {
            return None;
        }
        let refuse = self.policy() == Policy::NoEviction || self.failing.load(Ordering::Relaxed);
        refuse.then_some(EngineError::OverMaxMemory)
    }

    pub(crate) fn set_used(&self, bytes: u64) {
        self.used.store(bytes, Ordering::Relaxed);
        if bytes <= self.maxmemory() || self.maxmemory() == 0 {
            self.failing.store(false, Ordering::Relaxed);
        }
    }

    pub(crate) fn take_changed(&self) -> bool {
        self.changed.swap(false, Ordering::Relaxed)
    }

    pub(crate) fn set_failing(&self, on: bool) {
        self.failing.store(on, Ordering::Relaxed);
    }

    pub(crate) fn count_evicted(&self, n: u64) {
        self.evicted.fetch_add(n, Ordering::Relaxed);
    }
}

/// How an eviction step ended.
#[derive(Debug, Default)]
pub(crate) struct Step {
    /// The keys it evicted, `(db, key)`, in order.
    pub evicted: Vec<(u32, Vec<u8>)>,
    /// It got under the limit.
    pub under: bool,
    /// It found nothing more to evict while over the limit.
    pub nothing_left: bool,
}

/// A candidate in the pool: the higher the score, the sooner evicted.
#[derive(Debug, Clone)]
struct Candidate {
    score: u64,
    db: u32,
    key: Vec<u8>,
}

/// The writer's side: the pool of candidates, the sampling cursors, and a
/// random source.
pub(crate) struct Evictor {
    pool: Vec<Candidate>,
    /// Where the LRU and LFU samples of all keys go on from: `(db, key)`.
    keys_cursor: Option<(u32, Vec<u8>)>,
    /// The same for keys with a TTL: `(expire_at, db, key)`.
    ttl_cursor: Option<(i64, u32, Vec<u8>)>,
    rng: u64,
}

impl Default for Evictor {
    fn default() -> Self {
        use std::hash::{BuildHasher, RandomState};
        Evictor {
            pool: Vec::with_capacity(POOL_SIZE + 1),
            keys_cursor: None,
            ttl_cursor: None,
            rng: RandomState::new().hash_one(0u8) | 1,
        }
    }
}

/// Live bytes of the database as the open transaction sees them.
pub(crate) fn live_bytes(txn: &Txn<'_, '_>, page_size: u64) -> Result<u64> {
    let count = |sql: &'static str| -> Result<u64> {
        let n: i64 = txn.stmt(sql)?.query_row([], |r| r.get(0))?;
        Ok(n.max(0) as u64)
    };
    let pages = count("PRAGMA page_count")?;
    let free = count("PRAGMA freelist_count")?;
    Ok(pages.saturating_sub(free) * page_size)
}

impl Evictor {
    fn next_u64(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (`n` > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// Forgets every candidate and where the sweeps were (the limit or the
    /// policy changed).
    pub(crate) fn clear(&mut self) {
        self.pool.clear();
        self.keys_cursor = None;
        self.ttl_cursor = None;
    }

    /// Evicts keys under `policy` until the live bytes are at most `max`,
    /// nothing is left to evict, or `budget` has passed.
    pub(crate) fn step(
        &mut self,
        txn: &mut Txn<'_, '_>,
        memory: &Memory,
        access: &Access,
        page_size: u64,
        budget: Duration,
    ) -> Result<Step> {
        let started = Instant::now();
        let policy = memory.policy();
        let max = memory.maxmemory();
        let mut step = Step::default();
        loop {
            if max == 0 || live_bytes(txn, page_size)? <= max {
                step.under = true;
                return Ok(step);
            }
            if started.elapsed() >= budget {
                return Ok(step);
            }
            let Some((db, key)) = self.victim(txn, policy, memory.samples(), access)? else {
                step.nothing_left = true;
                return Ok(step);
            };
            if txn.purge(db, &key)?.is_some() {
                step.evicted.push((db, key));
            }
            // A big collection's elements are freed in chunks after its key
            // goes; freeing one chunk here lets the measurement see them.
            txn.free_dropped(1_000)?;
        }
    }

    /// The next key to evict, or `None` if there is no candidate.
    fn victim(
        &mut self,
        txn: &Txn<'_, '_>,
        policy: Policy,
        samples: u32,
        access: &Access,
    ) -> Result<Option<(u32, Vec<u8>)>> {
        let n = i64::from(samples);
        match policy {
            Policy::NoEviction => Ok(None),
            Policy::VolatileTtl => {
                // The index is in expiry order: the soonest is the answer.
                let mut stmt = txn.stmt(
                    "SELECT db, key FROM keys WHERE expire_at IS NOT NULL
                     ORDER BY expire_at LIMIT 1",
                )?;
                Ok(stmt
                    .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()?)
            }
            Policy::AllKeysRandom | Policy::VolatileRandom => {
                let sample = self.sample(txn, policy, n)?;
                if sample.is_empty() {
                    return Ok(None);
                }
                let pick = self.below(sample.len() as u64) as usize;
                Ok(sample.into_iter().nth(pick))
            }
            Policy::AllKeysLru | Policy::AllKeysLfu | Policy::VolatileLru | Policy::VolatileLfu => {
                let lfu = matches!(policy, Policy::AllKeysLfu | Policy::VolatileLfu);
                // The sweep's next keys, and as many from a random point:
                // the sweep offers every key in turn, the random point
                // brings candidates from elsewhere while the sweep crosses
                // a stretch of keys all used recently.
                let mut offered = self.sweep(txn, policy, n)?;
                offered.extend(self.sample(txn, policy, n)?);
                for (db, key) in offered {
                    let f = access.figures(db, &key);
                    let score = if lfu {
                        255 - u64::from(f.freq)
                    } else {
                        f.idle_secs
                    };
                    self.offer(Candidate { score, db, key });
                }
                // The best candidate that is still there (and, for
                // volatile-*, still has a TTL): a key deleted or persisted
                // since it was sampled is dropped from the pool.
                while let Some(best) = self.pool.pop() {
                    let ok = match txn.stored(best.db, &best.key)? {
                        Some(s) => !policy.volatile() || s.expire_at.is_some(),
                        None => false,
                    };
                    if ok {
                        return Ok(Some((best.db, best.key)));
                    }
                }
                Ok(None)
            }
        }
    }

    /// Puts a candidate in the pool, kept sorted by score (best last) and
    /// at most [`POOL_SIZE`] long, each key once.
    fn offer(&mut self, c: Candidate) {
        if let Some(i) = self
            .pool
            .iter()
            .position(|p| p.db == c.db && p.key == c.key)
        {
            self.pool.remove(i);
        }
        if self.pool.len() >= POOL_SIZE && self.pool.first().is_some_and(|w| w.score >= c.score) {
            return;
        }
        let at = self.pool.partition_point(|p| p.score <= c.score);
        self.pool.insert(at, c);
        if self.pool.len() > POOL_SIZE {
            self.pool.remove(0);
        }
    }

    /// The next `n` keys after the cursor (keys in `(db, key)` order for
    /// `allkeys-*`, keys with a TTL in expiry order for `volatile-*`),
    /// going on from the first after the last; the cursor starts at a
    /// random point. A sweep, unlike a random seek (see
    /// [`Evictor::random_point`]), offers every key to the pool equally
    /// often whatever the keys' names look like, so the pool finds the
    /// idlest (or least used) keys of each stretch it passes.
    fn sweep(&mut self, txn: &Txn<'_, '_>, policy: Policy, n: i64) -> Result<Vec<(u32, Vec<u8>)>> {
        let mut out: Vec<(u32, Vec<u8>)> = Vec::new();
        if policy.volatile() {
            if self.ttl_cursor.is_none() {
                let start = self.sample(txn, policy, 1)?;
                let Some((db, key)) = start.into_iter().next() else {
                    return Ok(out);
                };
                let at = txn
                    .stored(db, &key)?
                    .and_then(|s| s.expire_at)
                    .unwrap_or(i64::MIN);
                // Just before the key found, so that it is the first taken.
                self.ttl_cursor = Some((at, db, Vec::new()));
            }
            let (at, db, key) = self.ttl_cursor.clone().unwrap_or((i64::MIN, 0, Vec::new()));
            let mut stmt = txn.stmt(
                "SELECT expire_at, db, key FROM keys
                 WHERE expire_at IS NOT NULL AND (expire_at, db, key) > (?1, ?2, ?3)
                 ORDER BY expire_at, db, key LIMIT ?4",
            )?;
            let mut rows: Vec<(i64, u32, Vec<u8>)> = stmt
                .query_map(params![at, db, key, n], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })?
                .collect::<std::result::Result<_, _>>()?;
            if (rows.len() as i64) < n {
                let more: Vec<(i64, u32, Vec<u8>)> = stmt
                    .query_map(
                        params![i64::MIN, 0, Vec::<u8>::new(), n - rows.len() as i64],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                    )?
                    .collect::<std::result::Result<_, _>>()?;
                rows.extend(more);
            }
            self.ttl_cursor = rows.last().cloned();
            let mut seen = HashSet::new();
            for (_, db, key) in rows {
                if seen.insert((db, key.clone())) {
                    out.push((db, key));
                }
            }
            return Ok(out);
        }
        if self.keys_cursor.is_none() {
            let start = self.sample(txn, policy, 1)?;
            let Some((db, key)) = start.into_iter().next() else {
                return Ok(out);
            };
            // Just before the key found.
            self.keys_cursor = Some((db, key[..key.len().saturating_sub(1)].to_vec()));
        }
        let (db, key) = self.keys_cursor.clone().unwrap_or((0, Vec::new()));
        let mut stmt = txn.stmt(
            "SELECT db, key FROM keys WHERE (db, key) > (?1, ?2) ORDER BY db, key LIMIT ?3",
        )?;
        out = stmt
            .query_map(params![db, key, n], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<std::result::Result<_, _>>()?;
        if (out.len() as i64) < n {
            let more: Vec<(u32, Vec<u8>)> = stmt
                .query_map(params![-1, Vec::<u8>::new(), n - out.len() as i64], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })?
                .collect::<std::result::Result<_, _>>()?;
            for k in more {
                if !out.contains(&k) {
                    out.push(k);
                }
            }
        }
        self.keys_cursor = out.last().cloned();
        Ok(out)
    }

    /// About `n` candidate keys for `policy`: for `allkeys-*`, from each
    /// database that has keys, the keys following a random point; for
    /// `volatile-*`, the keys with a TTL following a random expiry time.
    fn sample(&mut self, txn: &Txn<'_, '_>, policy: Policy, n: i64) -> Result<Vec<(u32, Vec<u8>)>> {
        let mut out = Vec::new();
        if policy.volatile() {
            let bounds: Option<(Option<i64>, Option<i64>)> = txn
                .stmt(
                    "SELECT min(expire_at), max(expire_at) FROM keys WHERE expire_at IS NOT NULL",
                )?
                .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            let Some((Some(lo), Some(hi))) = bounds else {
                return Ok(out);
            };
            let span = (hi - lo) as u64;
            let from = lo + (self.below(span.saturating_add(1)) as i64);
            let mut stmt = txn.stmt(
                "SELECT db, key FROM keys WHERE expire_at IS NOT NULL AND expire_at >= ?1
                 ORDER BY expire_at LIMIT ?2",
            )?;
            let rows = stmt.query_map(params![from, n], |r| Ok((r.get(0)?, r.get(1)?)))?;
            for row in rows {
                out.push(row?);
            }
            if (out.len() as i64) < n {
                let rows = stmt.query_map(params![lo, n - out.len() as i64], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })?;
                let seen: HashSet<(u32, Vec<u8>)> = out.iter().cloned().collect();
                for row in rows {
                    let row = row?;
                    if !seen.contains(&row) {
                        out.push(row);
                    }
                }
            }
            return Ok(out);
        }
        for db in databases(txn)? {
            let from = self.random_point(txn, db)?;
            let mut stmt =
                txn.stmt("SELECT key FROM keys WHERE db = ?1 AND key >= ?2 ORDER BY key LIMIT ?3")?;
            let mut got: Vec<Vec<u8>> = stmt
                .query_map(params![db, from, n], |r| r.get(0))?
                .collect::<std::result::Result<_, _>>()?;
            if (got.len() as i64) < n {
                // Past the last key: go on from the first.
                let mut stmt = txn.stmt(
                    "SELECT key FROM keys WHERE db = ?1 AND key < ?2 ORDER BY key LIMIT ?3",
                )?;
                let more: Vec<Vec<u8>> = stmt
                    .query_map(params![db, from, n - got.len() as i64], |r| r.get(0))?
                    .collect::<std::result::Result<_, _>>()?;
                got.extend(more);
            }
            out.extend(got.into_iter().map(|k| (db, k)));
        }
        Ok(out)
    }

    /// A random point among the keys of `db`: between its first and last
    /// key, one byte at a time, each byte drawn between the smallest and the
    /// largest next byte of the keys under the prefix drawn so far.
    fn random_point(&mut self, txn: &Txn<'_, '_>, db: u32) -> Result<Vec<u8>> {
        let mut prefix: Vec<u8> = Vec::new();
        for _ in 0..DESCENT_DEPTH {
            let (Some(first), Some(last)) = (
                key_at_or_after(txn, db, &prefix)?,
                last_with_prefix(txn, db, &prefix)?,
            ) else {
                break;
            };
            if !first.starts_with(&prefix) || first == last {
                break;
            }
            let i = prefix.len();
            let lo = first.get(i).copied().map_or(0u64, u64::from);
            let Some(&hi) = last.get(i) else {
                break;
            };
            let b = lo + self.below(u64::from(hi) - lo + 1);
            prefix.push(b as u8);
        }
        Ok(prefix)
    }
}

/// The first key of `db` at or after `from`.
fn key_at_or_after(txn: &Txn<'_, '_>, db: u32, from: &[u8]) -> Result<Option<Vec<u8>>> {
    Ok(txn
        .stmt("SELECT key FROM keys WHERE db = ?1 AND key >= ?2 ORDER BY key LIMIT 1")?
        .query_row(params![db, from], |r| r.get(0))
        .optional()?)
}

/// The last key of `db` that starts with `prefix` (the last of all for an
/// empty prefix).
fn last_with_prefix(txn: &Txn<'_, '_>, db: u32, prefix: &[u8]) -> Result<Option<Vec<u8>>> {
    // The first key past every key with this prefix: the prefix with its
    // last byte below 0xff raised by one, the bytes after it dropped.
    let mut end = prefix.to_vec();
    while end.last() == Some(&0xff) {
        end.pop();
    }
    let found = if let Some(b) = end.last_mut() {
        *b += 1;
        txn.stmt("SELECT key FROM keys WHERE db = ?1 AND key < ?2 ORDER BY key DESC LIMIT 1")?
            .query_row(params![db, end], |r| r.get::<_, Vec<u8>>(0))
            .optional()?
    } else {
        txn.stmt("SELECT key FROM keys WHERE db = ?1 ORDER BY key DESC LIMIT 1")?
            .query_row(params![db], |r| r.get::<_, Vec<u8>>(0))
            .optional()?
    };
    Ok(found.filter(|k| k.starts_with(prefix)))
}

/// The databases that hold keys, found by skipping from one to the next
/// (one index seek each, not a scan).
fn databases(txn: &Txn<'_, '_>) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    let mut next: i64 = -1;
    loop {
        let db: Option<i64> = txn
            .stmt("SELECT db FROM keys WHERE db > ?1 ORDER BY db LIMIT 1")?
            .query_row([next], |r| r.get(0))
            .optional()?;
        match db {
            Some(db) => {
                out.push(db as u32);
                next = db;
            }
            None => return Ok(out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_by_name_in_any_case() {
        for p in Policy::ALL {
            assert_eq!(Policy::parse(p.name()), Some(p));
            assert_eq!(Policy::from_code(p.code()), p);
        }
        assert_eq!(Policy::parse("ALLKEYS-LRU"), Some(Policy::AllKeysLru));
        assert_eq!(Policy::parse("lru"), None);
    }

    #[test]
    fn the_pool_keeps_the_best_sixteen_each_key_once() {
        let mut e = Evictor::default();
        for i in 0..40u64 {
            e.offer(Candidate {
                score: i,
                db: 0,
                key: format!("k{i}").into_bytes(),
            });
        }
        assert_eq!(e.pool.len(), POOL_SIZE);
        assert_eq!(e.pool.last().map(|c| c.score), Some(39));
        assert_eq!(e.pool.first().map(|c| c.score), Some(24));
        // Offered again with a new score: moved, not doubled.
        e.offer(Candidate {
            score: 100,
            db: 0,
            key: b"k30".to_vec(),
        });
        assert_eq!(e.pool.len(), POOL_SIZE);
        assert_eq!(e.pool.last().map(|c| c.key.clone()), Some(b"k30".to_vec()));
        // A worse candidate than all of a full pool stays out.
        e.offer(Candidate {
            score: 1,
            db: 0,
            key: b"low".to_vec(),
        });
        assert!(e.pool.iter().all(|c| c.key != b"low"));
    }

    #[test]
    fn the_memory_refuses_only_over_the_limit_and_by_policy() {
        let m = Memory::default();
        m.set_used(10_000);
        assert!(m.refusal().is_none());
        m.set_maxmemory(1);
        assert_eq!(
            m.refusal().map(|e| e.to_string()),
            Some("OOM command not allowed when used memory > 'maxmemory'.".into())
        );
        m.set_policy(Policy::AllKeysLru);
        assert!(m.refusal().is_none());
        m.set_failing(true);
        assert!(m.refusal().is_some());
        // Under the limit again: the failure is over.
        m.set_maxmemory(20_000);
        m.set_used(10_000);
        assert!(m.refusal().is_none());
        m.set_maxmemory(1);
        assert!(m.refusal().is_none());
    }
}

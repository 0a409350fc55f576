//! The value cache: recently read string values, kept in memory so that a
//! hot GET is answered without a trip to the read pool.
//!
//! Every GET that reaches SQLite costs two thread hand-offs (connection task
//! to reader thread and back) and a B-tree lookup, where redis-server pays a
//! hash lookup. For the keys a workload reads over and over, that is most of
//! the work; this cache lets the connection task answer them itself. It is
//! bounded in bytes (`read_cache_bytes`; 0 turns it off) and holds only
//! strings, with their expiry.
//!
//! The cache must never answer with a value older than a write that was
//! already acknowledged, nor let one client see a value that SQLite no
//! longer holds after another saw the new one. Two rules give that, and a
//! third keeps a rewritten key cached:
//!
//! - **The writer invalidates before it commits.** Every key a transaction
//!   touched is removed from the cache just before `COMMIT`, and the write
//!   is acknowledged only after. Until the commit, SQLite and the cache both
//!   still hold the old value; from the commit on, the cache holds nothing
//!   for that key.
//! - **A reader may fill only across a quiet interval.** A sequence number
//!   is odd while the writer is committing and moves at every commit. A
//!   reader notes it (even) before its SQLite read and inserts what it read
//!   only if the number is still the same, checked under the shard lock the
//!   writer's invalidation also takes. So a filled value was read with no
//!   commit in between: it is the newest committed value, and the next
//!   commit that touches the key removes it again.
//!
//! - **A committed value may go back in.** Once a commit is over, a key
//!   that was cached before it and whose last change stored a whole known
//!   string (SET, SETEX, MSET, GETSET, INCR...) is put back with its new
//!   value ([`ValueCache::write_through`]). That is a fill with nothing to
//!   race: the writer is the only one who commits, so no commit can fall
//!   between its SQLite write and its insert. Without it, every write to a
//!   key being read sent the next GET to the read pool; with it, a key read
//!   and rewritten stays cached. Keys nobody read are not added.
//!
//! Eviction drops an arbitrary eighth of a shard when it passes its share of
//! the budget (like Redis's `allkeys-random`); expired entries are dropped
//! when met.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;
use hashbrown::HashTable;

/// Shards, so the connection tasks and the readers rarely meet on a lock.
const SHARDS: usize = 16;

/// Bytes counted per entry on top of its key and value (table slot, `Bytes`
/// headers, allocation rounding).
const ENTRY_OVERHEAD: usize = 96;

/// The keys a transaction changed, for the writer to invalidate before it
/// commits.
#[derive(Debug, Default)]
pub struct Touched {
    /// `(db, key)` of each key written (for FLUSHDB/FLUSHALL, the watched
    /// keys that existed), in the order of the writes.
    keys: Vec<(u32, Bytes)>,
    /// Whole databases were emptied (FLUSHDB, FLUSHALL): the cache drops
    /// everything.
    all: bool,
    /// Indexes into `keys` of the entries that deleted their key (for the
    /// access table, `access.rs`), in order.
    gone: Vec<usize>,
    /// The writes among `keys` that stored a whole string whose value is
    /// known (SET, INCR...), in order: candidates for
    /// [`ValueCache::write_through`].
    puts: Vec<Put>,
}

/// A string write whose committed value is known.
#[derive(Debug)]
struct Put {
    /// Its entry in `Touched::keys`.
    at: usize,
    value: Bytes,
    expire_at: Option<i64>,
}

impl Touched {
    /// Records one key.
    pub(crate) fn key(&mut self, db: u32, key: &[u8]) {
        self.keys.push((db, Bytes::copy_from_slice(key)));
    }

    /// Marks the key recorded last as deleted by its change.
    pub(crate) fn gone(&mut self) {
        if let Some(last) = self.keys.len().checked_sub(1) {
            if self.gone.last() != Some(&last) {
                self.gone.push(last);
            }
        }
    }

    /// Each key recorded, in order, with whether that change deleted it.
    pub(crate) fn events(&self) -> impl Iterator<Item = (u32, &[u8], bool)> + '_ {
        let mut gone = self.gone.iter().peekable();
        self.keys.iter().enumerate().map(move |(i, (db, key))| {
            let deleted = gone.next_if(|&&g| g == i).is_some();
            (*db, key.as_ref(), deleted)
        })
    }

    /// How many keys were changed: each run of changes to one key counts
    /// once (a command notes its key more than once), a flush once.
    pub(crate) fn changed_keys(&self) -> u64 {
        let mut n = u64::from(self.all);
        let mut last: Option<&(u32, Bytes)> = None;
        for k in &self.keys {
            if last != Some(k) {
                n += 1;
            }
            last = Some(k);
        }
        n
    }

    /// Records a key set to a whole string value with an expiry.
    pub(crate) fn put(&mut self, db: u32, key: &[u8], value: Bytes, expire_at: Option<i64>) {
        self.puts.push(Put {
            at: self.keys.len(),
            value,
            expire_at,
        });
        self.key(db, key);
    }

    /// Records that any key may have changed.
    pub(crate) fn all(&mut self) {
        self.all = true;
    }

    /// Records that any key may have changed, forgetting the keys
    /// recorded (a bulk load, which changes more keys than are worth
    /// listing).
    pub(crate) fn collapse(&mut self) {
        self.all = true;
        self.keys.clear();
        self.gone.clear();
        self.puts.clear();
    }

    /// Whether any key may have changed (a flush or swap).
    pub(crate) fn is_all(&self) -> bool {
        self.all
    }

    /// The keys recorded.
    pub(crate) fn keys(&self) -> &[(u32, Bytes)] {
        &self.keys
    }

    /// Adds what another operation touched.
    pub(crate) fn absorb(&mut self, other: Touched) {
        self.all |= other.all;
        let base = self.keys.len();
        self.gone.extend(other.gone.into_iter().map(|g| g + base));
        self.puts.extend(other.puts.into_iter().map(|p| Put {
            at: p.at + base,
            ..p
        }));
        self.keys.extend(other.keys);
    }
}

/// A cached string: its key, value and absolute expiry (Unix ms).
struct Cached {
    db: u32,
    key: Bytes,
    value: Bytes,
    expire_at: Option<i64>,
}

impl Cached {
    fn size(&self) -> usize {
        self.key.len() + self.value.len() + ENTRY_OVERHEAD
    }
}

/// One shard: a table addressed by a hash computed once per call (it also
/// picks the shard), so a lookup hashes the key once and clones nothing.
#[derive(Default)]
struct Shard {
    table: HashTable<Cached>,
    bytes: usize,
}

impl Shard {
    fn find(&self, hash: u64, db: u32, key: &[u8]) -> Option<&Cached> {
        self.table.find(hash, |e| e.db == db && e.key == key)
    }

    /// Drops the key's entry; whether there was one.
    fn remove(&mut self, hash: u64, db: u32, key: &[u8]) -> bool {
        match self.table.find_entry(hash, |e| e.db == db && e.key == key) {
            Ok(entry) => {
                let (old, _) = entry.remove();
                self.bytes -= old.size();
                true
            }
            Err(_) => false,
        }
    }

    /// Drops entries, in the table's arbitrary order, until the shard is at
    /// seven eighths of `budget`.
    fn evict(&mut self, budget: usize) {
        let target = budget - budget / 8;
        let mut bytes = self.bytes;
        self.table.retain(|e| {
            if bytes <= target {
                return true;
            }
            bytes -= e.size();
            false
        });
        self.bytes = bytes;
    }
}

/// Counters for INFO.
#[derive(Debug, Clone, Copy, Default)]
pub struct CacheStats {
    /// GETs answered from the cache.
    pub hits: u64,
    /// GETs that had to go to the read pool.
    pub misses: u64,
    /// Entries held.
    pub entries: u64,
    /// Bytes held (keys, values and per-entry overhead).
    pub bytes: u64,
    /// The budget in bytes (0: off).
    pub budget: u64,
}

/// The value cache. Shared by the connection tasks (lookups), the readers
/// (fills) and the writer (invalidation).
pub struct ValueCache {
    shards: Box<[Mutex<Shard>]>,
    /// Seeded per process, so keys a client picks cannot be aimed at one
    /// slot chain.
    hasher: foldhash::quality::RandomState,
    /// Odd while the writer is committing; moves by two per commit.
    seq: AtomicU64,
    /// Each shard's share of the budget; 0 when the cache is off.
    shard_budget: usize,
    /// Values larger than this are not cached, so one big value cannot
    /// wipe a shard.
    max_entry: usize,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl ValueCache {
    /// A cache holding at most about `budget` bytes (0: off).
    pub fn new(budget: usize) -> ValueCache {
        let shard_budget = budget / SHARDS;
        ValueCache {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            hasher: foldhash::quality::RandomState::default(),
            seq: AtomicU64::new(0),
            shard_budget,
            max_entry: shard_budget / 8,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// Whether the cache holds anything at all.
    pub fn enabled(&self) -> bool {
        self.shard_budget > 0
    }

    /// The key's hash and its shard, locked.
    fn shard(&self, db: u32, key: &[u8]) -> (u64, MutexGuard<'_, Shard>) {
        let hash = self.hasher.hash_one((db, key));
        // The table uses the low bits to pick a slot and the top seven as a
        // tag; bits from the middle pick the shard.
        let i = (hash >> 32) as usize % SHARDS;
        // A panic while holding a shard lock cannot leave a half-made entry
        // (every change is one table call), so a poisoned lock is still good.
        (
            hash,
            self.shards[i].lock().unwrap_or_else(|e| e.into_inner()),
        )
    }

    /// The live value cached for `key`, if any; `now` gives the time (Unix
    /// ms) to judge an expiry by, read only for a key that has one. Counts
    /// a hit or a miss.
    pub fn get(&self, db: u32, key: &[u8], now: impl FnOnce() -> i64) -> Option<Bytes> {
        if !self.enabled() {
            return None;
        }
        let found = {
            let (hash, mut shard) = self.shard(db, key);
            match shard.find(hash, db, key) {
                None => None,
                Some(e) => match e.expire_at {
                    Some(at) if at <= now() => {
                        shard.remove(hash, db, key);
                        None
                    }
                    _ => Some(e.value.clone()),
                },
            }
        };
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// The live values of all `keys`, if the cache holds every one and no
    /// commit started while they were looked up, so that they are one
    /// committed state (what MGET promises). Counts every key as a hit, or,
    /// when the caller must go to the read pool, every key as a miss.
    pub fn get_all(&self, db: u32, keys: &[Bytes], now: impl Fn() -> i64) -> Option<Vec<Bytes>> {
        if !self.enabled() {
            return None;
        }
        let seq = self.seq.load(Ordering::SeqCst);
        let mut now_ms = None;
        let mut values = Vec::with_capacity(keys.len());
        if seq.is_multiple_of(2) {
            for key in keys {
                let (hash, shard) = self.shard(db, key);
                let Some(e) = shard.find(hash, db, key) else {
                    break;
                };
                if e.expire_at
                    .is_some_and(|at| at <= *now_ms.get_or_insert_with(&now))
                {
                    break;
                }
                values.push(e.value.clone());
            }
        }
        // A commit that started meanwhile may have changed some of the keys
        // after others were read.
        let whole = values.len() == keys.len() && self.seq.load(Ordering::SeqCst) == seq;
        let counter = if whole { &self.hits } else { &self.misses };
        counter.fetch_add(keys.len() as u64, Ordering::Relaxed);
        whole.then_some(values)
    }

    /// The live value cached for `key`, for a read-pool view whose
    /// snapshot began after `since` (its [`ValueCache::read_started`]):
    /// only while no commit has started since then, checked under the
    /// shard lock the writer's invalidation takes, so the cached value is
    /// the one that snapshot holds (the rule [`ValueCache::fill`] keeps,
    /// the other way round). `now` is the view's clock. Counts neither a
    /// hit nor a miss: those count the lookups made for a request before
    /// it goes to the read pool (INFO's `read_cache_hits`).
    pub(crate) fn get_since(&self, since: u64, db: u32, key: &[u8], now: i64) -> Option<Bytes> {
        if !self.enabled() || since % 2 == 1 {
            return None;
        }
        let (hash, shard) = self.shard(db, key);
        if self.seq.load(Ordering::SeqCst) != since {
            return None;
        }
        let e = shard.find(hash, db, key)?;
        if e.expire_at.is_some_and(|at| at <= now) {
            return None;
        }
        Some(e.value.clone())
    }

    /// Called by a reader before its SQLite read; the value returned is
    /// passed to [`ValueCache::fill`].
    pub(crate) fn read_started(&self) -> u64 {
        self.seq.load(Ordering::SeqCst)
    }

    /// Offers a string a reader found, read after `since` was taken. Kept
    /// only if no commit started since then (see the module docs).
    pub(crate) fn fill(
        &self,
        since: u64,
        db: u32,
        key: &[u8],
        value: &Bytes,
        expire_at: Option<i64>,
    ) {
        if !self.enabled() || since % 2 == 1 || key.len() + value.len() > self.max_entry {
            return;
        }
        let entry = Cached {
            db,
            key: Bytes::copy_from_slice(key),
            value: value.clone(),
            expire_at,
        };
        let (hash, mut shard) = self.shard(db, key);
        if self.seq.load(Ordering::SeqCst) != since {
            return;
        }
        self.insert(hash, &mut shard, entry);
    }

    /// Puts `entry` in its locked shard, replacing the key's old entry.
    fn insert(&self, hash: u64, shard: &mut Shard, entry: Cached) {
        shard.remove(hash, entry.db, &entry.key);
        shard.bytes += entry.size();
        let hasher = &self.hasher;
        shard
            .table
            .insert_unique(hash, entry, |e| hasher.hash_one((e.db, &e.key[..])));
        if shard.bytes > self.shard_budget {
            shard.evict(self.shard_budget);
        }
    }

    /// The writer is about to commit a transaction that changed `touched`:
    /// stop fills and drop those keys. Must be followed by
    /// [`ValueCache::commit_done`] whatever the commit's outcome. Returns
    /// the indexes in `touched` of the keys that were cached, when it has
    /// string writes that [`ValueCache::write_through`] may put back.
    pub(crate) fn commit_started(&self, touched: &Touched) -> Vec<usize> {
        self.seq.fetch_add(1, Ordering::SeqCst);
        let mut was_cached = Vec::new();
        if !self.enabled() {
            return was_cached;
        }
        if touched.all {
            for shard in self.shards.iter() {
                let mut s = shard.lock().unwrap_or_else(|e| e.into_inner());
                s.table = HashTable::new();
                s.bytes = 0;
            }
            return was_cached;
        }
        let note = !touched.puts.is_empty();
        for (i, (db, key)) in touched.keys.iter().enumerate() {
            let (hash, mut shard) = self.shard(*db, key);
            if shard.remove(hash, *db, key) && note {
                was_cached.push(i);
            }
        }
        was_cached
    }

    /// After a successful commit: the new value of each key that was cached
    /// before it (`was_cached`, from [`ValueCache::commit_started`]) and
    /// whose last change in the transaction stored a known string goes
    /// straight back into the cache. A key that is read and rewritten so
    /// stays cached; keys that are only written do not crowd the cache.
    ///
    /// Exactness is that of a fill: the value is the one SQLite now holds
    /// (the commit is over), no other commit can start before this returns
    /// (commits happen on this thread), and a reader that read the old value
    /// cannot put it back (the sequence number moved).
    pub(crate) fn write_through(&self, touched: &Touched, was_cached: &[usize]) {
        if !self.enabled() || touched.all || was_cached.is_empty() {
            return;
        }
        let key_at = |i: usize| (touched.keys[i].0, &touched.keys[i].1[..]);
        let cached: hashbrown::HashSet<(u32, &[u8]), foldhash::fast::RandomState> =
            was_cached.iter().map(|&i| key_at(i)).collect();
        // Walk the writes backwards: the first time a key is met is its
        // last change, and only that one may decide what is cached.
        let mut decided: hashbrown::HashSet<(u32, &[u8]), foldhash::fast::RandomState> =
            hashbrown::HashSet::default();
        let mut puts = touched.puts.iter().rev().peekable();
        for i in (0..touched.keys.len()).rev() {
            let put = puts.next_if(|p| p.at == i);
            let key = key_at(i);
            if !decided.insert(key) || !cached.contains(&key) {
                continue;
            }
            let Some(put) = put else { continue };
            let (db, key) = (touched.keys[i].0, &touched.keys[i].1);
            if key.len() + put.value.len() > self.max_entry {
                continue;
            }
            let entry = Cached {
                db,
                key: key.clone(),
                // A copy: a large value may be a slice of a connection's
                // read buffer, which the cache must not keep alive.
                value: Bytes::copy_from_slice(&put.value),
                expire_at: put.expire_at,
            };
            let (hash, mut shard) = self.shard(db, key);
            self.insert(hash, &mut shard, entry);
        }
    }

    /// The commit announced by [`ValueCache::commit_started`] is over.
    pub(crate) fn commit_done(&self) {
        self.seq.fetch_add(1, Ordering::SeqCst);
    }

    /// Hit, miss and size figures.
    pub fn stats(&self) -> CacheStats {
        let mut entries = 0;
        let mut bytes = 0;
        for shard in self.shards.iter() {
            let s = shard.lock().unwrap_or_else(|e| e.into_inner());
            entries += s.table.len() as u64;
            bytes += s.bytes as u64;
        }
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            entries,
            bytes,
            budget: (self.shard_budget * SHARDS) as u64,
        }
    }

    /// Zeroes the hit and miss counters (CONFIG RESETSTAT).
    pub fn reset_stats(&self) {
        self.hits.store(0, Ordering::Relaxed);
        self.misses.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn fill_then_hit() {
        let c = ValueCache::new(1 << 20);
        let since = c.read_started();
        c.fill(since, 0, b"k", &b("v"), None);
        assert_eq!(c.get(0, &b("k"), || 0), Some(b("v")));
        assert_eq!(c.get(1, b"k", || 0), None, "databases are separate");
        let s = c.stats();
        assert_eq!((s.hits, s.misses, s.entries), (1, 1, 1));
    }

    #[test]
    fn a_commit_between_read_and_fill_refuses_the_fill() {
        let c = ValueCache::new(1 << 20);
        let since = c.read_started();
        c.commit_started(&Touched::default());
        c.fill(since, 0, b"k", &b("old"), None);
        c.commit_done();
        c.fill(since, 0, b"k", &b("old"), None);
        assert_eq!(c.get(0, b"k", || 0), None);
        // A read that started during a commit cannot fill either.
        c.commit_started(&Touched::default());
        let during = c.read_started();
        c.fill(during, 0, b"k", &b("old"), None);
        c.commit_done();
        assert_eq!(c.get(0, b"k", || 0), None);
    }

    /// One commit of `t`, with the write-through a successful one does.
    fn commit(c: &ValueCache, t: &Touched) {
        let was_cached = c.commit_started(t);
        c.commit_done();
        c.write_through(t, &was_cached);
    }

    #[test]
    fn get_all_answers_only_whole_and_from_one_state() {
        let c = ValueCache::new(1 << 20);
        for k in ["a", "b"] {
            c.fill(c.read_started(), 0, k.as_bytes(), &b("v"), None);
        }
        assert_eq!(
            c.get_all(0, &[b("a"), b("b")], || 0),
            Some(vec![b("v"), b("v")])
        );
        // One key missing: the caller reads them all from the pool.
        assert_eq!(c.get_all(0, &[b("a"), b("c")], || 0), None);
        // Expired counts as missing.
        c.fill(c.read_started(), 0, b"e", &b("v"), Some(5));
        assert_eq!(c.get_all(0, &[b("a"), b("e")], || 10), None);
        // During a commit nothing is answered.
        let t = Touched::default();
        c.commit_started(&t);
        assert_eq!(c.get_all(0, &[b("a")], || 0), None);
        c.commit_done();
        assert_eq!(c.get_all(0, &[b("a")], || 0), Some(vec![b("v")]));
        assert_eq!(c.stats().hits, 3);
        assert_eq!(c.stats().misses, 5);
    }

    #[test]
    fn a_snapshot_reads_the_cache_only_while_no_commit_began() {
        let c = ValueCache::new(1 << 20);
        c.fill(c.read_started(), 0, b"k", &b("v"), Some(50));
        let since = c.read_started();
        assert_eq!(c.get_since(since, 0, b"k", 10), Some(b("v")));
        assert_eq!(c.get_since(since, 0, b"k", 50), None, "expired");
        assert_eq!(c.get_since(since, 0, b"other", 10), None);
        // A commit began after the snapshot's `since`: the cache may hold
        // a newer state than the snapshot, so it is not asked.
        let mut t = Touched::default();
        t.put(0, b"elsewhere", b("x"), None);
        c.commit_started(&t);
        assert_eq!(c.get_since(since, 0, b"k", 10), None);
        let during = c.read_started();
        assert_eq!(c.get_since(during, 0, b"k", 10), None);
        c.commit_done();
        assert_eq!(c.get_since(since, 0, b"k", 10), None);
        assert_eq!(c.get_since(c.read_started(), 0, b"k", 10), Some(b("v")));
    }

    #[test]
    fn a_cached_key_rewritten_with_a_known_value_stays_cached() {
        let c = ValueCache::new(1 << 20);
        c.fill(c.read_started(), 0, b"hot", &b("old"), None);
        let mut t = Touched::default();
        t.put(0, b"hot", b("new"), Some(99));
        // A key nobody read is not added.
        t.put(0, b"cold", b("new"), None);
        commit(&c, &t);
        assert_eq!(c.get(0, b"hot", || 0), Some(b("new")));
        assert_eq!(c.get(0, b"hot", || 100), None, "the new expiry is kept");
        assert_eq!(c.get(0, b"cold", || 0), None);
    }

    #[test]
    fn only_a_keys_last_change_decides() {
        let c = ValueCache::new(1 << 20);
        for k in ["a", "b", "c"] {
            c.fill(c.read_started(), 0, k.as_bytes(), &b("v0"), None);
        }
        let mut first = Touched::default();
        // a: SET then APPEND (value unknown here): must not be cached.
        first.put(0, b"a", b("v1"), None);
        // b: two SETs: the second value.
        first.put(0, b"b", b("v1"), None);
        let mut second = Touched::default();
        second.key(0, b"a");
        second.put(0, b"b", b("v2"), None);
        // c: APPEND then SET: the SET's value.
        second.key(0, b"c");
        second.put(0, b"c", b("v3"), None);
        first.absorb(second);
        commit(&c, &first);
        assert_eq!(c.get(0, b"a", || 0), None);
        assert_eq!(c.get(0, b"b", || 0), Some(b("v2")));
        assert_eq!(c.get(0, b"c", || 0), Some(b("v3")));
        // A flush in the transaction: nothing is put back.
        let mut t = Touched::default();
        t.put(0, b"b", b("v4"), None);
        t.all();
        commit(&c, &t);
        assert_eq!(c.stats().entries, 0);
    }

    #[test]
    fn commit_drops_touched_keys_and_flush_drops_all() {
        let c = ValueCache::new(1 << 20);
        for k in ["a", "b", "c"] {
            c.fill(c.read_started(), 0, k.as_bytes(), &b("v"), None);
        }
        let mut t = Touched::default();
        t.key(0, b"a");
        c.commit_started(&t);
        c.commit_done();
        assert_eq!(c.get(0, b"a", || 0), None);
        assert_eq!(c.get(0, &b("b"), || 0), Some(b("v")));
        let mut t = Touched::default();
        t.key(0, b"b");
        t.all();
        t.key(0, b"x");
        c.commit_started(&t);
        c.commit_done();
        assert_eq!(c.get(0, b"b", || 0), None);
        assert_eq!(c.get(0, b"c", || 0), None);
        assert_eq!(c.stats().bytes, 0);
    }

    #[test]
    fn expired_entries_are_not_returned() {
        let c = ValueCache::new(1 << 20);
        c.fill(c.read_started(), 0, b"k", &b("v"), Some(1000));
        assert_eq!(c.get(0, b"k", || 999), Some(b("v")));
        assert_eq!(c.get(0, b"k", || 1000), None);
        assert_eq!(c.stats().entries, 0);
    }

    #[test]
    fn stays_within_budget() {
        let budget = 64 * 1024;
        let c = ValueCache::new(budget);
        let value = Bytes::from(vec![b'x'; 100]);
        for i in 0..10_000 {
            c.fill(
                c.read_started(),
                0,
                format!("key:{i}").as_bytes(),
                &value,
                None,
            );
        }
        let s = c.stats();
        assert!(s.bytes <= budget as u64, "{s:?}");
        assert!(s.entries > 100, "{s:?}");
        // Too big for a shard's eighth: not cached.
        c.fill(
            c.read_started(),
            0,
            b"big",
            &Bytes::from(vec![0; budget]),
            None,
        );
        assert_eq!(c.get(0, b"big", || 0), None);
        // Off means off.
        let off = ValueCache::new(0);
        off.fill(off.read_started(), 0, b"k", &value, None);
        assert_eq!(off.get(0, b"k", || 0), None);
    }
}

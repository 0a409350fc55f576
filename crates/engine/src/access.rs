//! When each key was last used, and how often: what OBJECT IDLETIME,
//! OBJECT FREQ and DEBUG OBJECT report, and INFO's keyspace hits and misses.
//!
//! redis-server keeps 24 bits beside every value in memory: the second of
//! its last access (for LRU eviction) or, under an LFU `maxmemory-policy`,
//! a logarithmic access counter and the minute it was last decayed. respite
//! keeps its values on disk, and writing an access time into a key's row on
//! every read would turn every GET into a write. So the figures live here,
//! in memory, in a table of fixed size: one 64-bit slot per key, chosen by a
//! hash of the database and the key, holding a 16-bit fingerprint of the
//! key, the second of its last access (redis's 24-bit LRU clock, Unix
//! seconds modulo 2^24), the minute of its last LFU decay (16 bits) and its
//! LFU counter (8 bits, redis's `LFULogIncr`/`LFUDecrAndReturn` with
//! `lfu-log-factor` and `lfu-decay-time`). Both figures are kept whatever
//! the policy, so changing the policy needs no time to adjust.
//!
//! The table is an approximation, as redis's own eviction is: two keys that
//! share a slot take turns, and a key whose slot another key took (or that
//! has not been used since the server started) reads as last used when the
//! server started, with the counter a new key starts with: what
//! redis-server reports for a key it has just loaded from disk. With
//! [`SLOTS`] slots that stays rare below a few hundred thousand keys in use.
//!
//! Who touches what follows redis's `lookupKey`: a read command's lookup of
//! a key that exists touches it (the read pool's views call [`Access::read`]
//! unless the command is one of redis's `LOOKUP_NOTOUCH` ones, TYPE, EXISTS,
//! TTL and friends, OBJECT, or the client asked for CLIENT NO-TOUCH), and
//! counts a keyspace hit or miss. A write touches the keys it changed once
//! it is committed ([`Access::committed`]): a key it created starts afresh,
//! a key it deleted leaves the table.
//!
//! Every update is a relaxed load and store of one slot: two threads
//! touching one key at once may lose one of the two updates, which costs a
//! counter step, never a wrong key. A cached GET pays for this on its
//! hot path, so the clock is read from an atomic the writer thread sets
//! every time round its loop (at least every 100 ms, as redis's
//! `serverCron` refreshes its LRU clock), the LFU coin is a thread-local
//! xorshift, and a slot that would not change is not written.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

use crate::cache::Touched;

/// Slots in the table (8 bytes each: 4 MiB).
pub const SLOTS: usize = 1 << 19;

/// The counter a new key starts with (redis's `LFU_INIT_VAL`).
pub const LFU_INIT_VAL: u8 = 5;

/// redis's `LRU_CLOCK_MAX`: the LRU clock is Unix seconds in 24 bits.
const LRU_CLOCK_MAX: u64 = (1 << 24) - 1;

/// Stripes of the hit and miss counters, so threads counting at once do
/// not fight over one cache line.
const STRIPES: usize = 8;

/// A key's figures, as read from its slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Figures {
    /// redis's LRU clock at the last access (Unix seconds modulo 2^24).
    pub lru: u32,
    /// Seconds since the last access.
    pub idle_secs: u64,
    /// The LFU counter after decay (OBJECT FREQ).
    pub freq: u8,
}

/// Figures RESTORE gave a key: (db, key, idle seconds, LFU counter).
type Restored = (u32, Vec<u8>, Option<u64>, Option<u8>);

/// The access table and the keyspace hit and miss counters.
pub struct Access {
    slots: Box<[AtomicU64]>,
    hasher: foldhash::quality::RandomState,
    /// Unix seconds when the table started: what an unknown key reports.
    started_secs: u64,
    /// The clock, in Unix seconds, set by [`Access::tick`].
    clock: AtomicU64,
    /// `lfu-log-factor`.
    log_factor: AtomicU32,
    /// `lfu-decay-time`, in minutes.
    decay_minutes: AtomicU32,
    hits: Box<[CachePadded<AtomicU64>]>,
    misses: Box<[CachePadded<AtomicU64>]>,
    /// Figures RESTORE gave keys (IDLETIME, FREQ), set once the write
    /// that created them commits: (db, key, idle seconds, counter).
    restored: std::sync::Mutex<Vec<Restored>>,
    /// Where a read's misses and expired keys are announced (`keymiss`,
    /// `expired`: see `view.rs`).
    misses_to: std::sync::OnceLock<std::sync::Arc<crate::notify::Notifier>>,
}

impl Default for Access {
    fn default() -> Self {
        Access::new()
    }
}

/// The current Unix time in seconds.
fn unix_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A slot's word: fingerprint 16 | lru 24 | decay minute 16 | counter 8.
fn pack(tag: u16, lru: u64, ldt: u64, counter: u8) -> u64 {
    (u64::from(tag) << 48)
        | ((lru & LRU_CLOCK_MAX) << 24)
        | ((ldt & 0xffff) << 8)
        | u64::from(counter)
}

fn tag_of(word: u64) -> u16 {
    (word >> 48) as u16
}

fn lru_of(word: u64) -> u64 {
    (word >> 24) & LRU_CLOCK_MAX
}

fn ldt_of(word: u64) -> u64 {
    (word >> 8) & 0xffff
}

fn counter_of(word: u64) -> u8 {
    word as u8
}

/// redis's `estimateObjectIdleTime`, in seconds: the LRU clock wraps
/// every 194 days.
fn idle_secs(now_lru: u64, lru: u64) -> u64 {
    if now_lru >= lru {
        now_lru - lru
    } else {
        now_lru + (LRU_CLOCK_MAX - lru)
    }
}

/// redis's `LFUTimeElapsed`: minutes since `ldt`, on a 16-bit clock.
fn minutes_since(now_min: u64, ldt: u64) -> u64 {
    if now_min >= ldt {
        now_min - ldt
    } else {
        65535 - ldt + now_min
    }
}

impl Access {
    /// An empty table, with redis's default LFU settings.
    pub fn new() -> Access {
        Access {
            slots: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
            hasher: foldhash::quality::RandomState::default(),
            started_secs: unix_secs(),
            clock: AtomicU64::new(unix_secs()),
            log_factor: AtomicU32::new(10),
            decay_minutes: AtomicU32::new(1),
            hits: (0..STRIPES)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            misses: (0..STRIPES)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            restored: std::sync::Mutex::new(Vec::new()),
            misses_to: std::sync::OnceLock::new(),
        }
    }

    /// Announces each miss as a `keymiss` keyspace event through
    /// `notifier` (when that class is on and someone listens).
    pub fn notify_misses_to(&self, notifier: std::sync::Arc<crate::notify::Notifier>) {
        let _ = self.misses_to.set(notifier);
    }

    /// Where a read-pool view announces what its lookups met.
    pub(crate) fn notifier(&self) -> Option<&crate::notify::Notifier> {
        self.misses_to.get().map(|n| &**n)
    }

    /// Gives a key RESTORE writes the idle time (`IDLETIME`) or the LFU
    /// counter (`FREQ`) it came with, once the write commits (redis's
    /// `objectSetLRUOrLFU`). Called from the writer thread, inside the
    /// write.
    pub fn restore_figures(&self, db: u32, key: &[u8], idle_secs: Option<u64>, freq: Option<u8>) {
        if let Ok(mut pending) = self.restored.lock() {
            pending.push((db, key.to_vec(), idle_secs, freq));
        }
    }

    /// Applies the figures [`Access::restore_figures`] queued.
    fn apply_restored(&self) {
        let Ok(mut pending) = self.restored.try_lock() else {
            return;
        };
        if pending.is_empty() {
            return;
        }
        let now = self.now_secs();
        for (db, key, idle, freq) in pending.drain(..) {
            let (slot, tag) = self.locate(db, &key);
            let lru = now.saturating_sub(idle.unwrap_or(0));
            let counter = freq.unwrap_or(LFU_INIT_VAL);
            slot.store(pack(tag, lru, now / 60, counter), Ordering::Relaxed);
        }
    }

    /// Reads the time into the table's clock (the writer calls it every
    /// time round its loop).
    pub(crate) fn tick(&self) {
        self.clock.store(unix_secs(), Ordering::Relaxed);
    }

    /// The table's clock, Unix seconds.
    fn now_secs(&self) -> u64 {
        self.clock.load(Ordering::Relaxed)
    }

    /// Sets `lfu-log-factor` and `lfu-decay-time` (minutes).
    pub fn set_lfu(&self, log_factor: u32, decay_minutes: u32) {
        self.log_factor.store(log_factor, Ordering::Relaxed);
        self.decay_minutes.store(decay_minutes, Ordering::Relaxed);
    }

    /// The key's pair of slots (two neighbours, one cache line) and its
    /// fingerprint (never 0: 0 marks an empty slot).
    fn pair(&self, db: u32, key: &[u8]) -> (&[AtomicU64], u16) {
        let hash = self.hasher.hash_one((db, key));
        let first = (hash as usize) & (SLOTS - 1) & !1;
        let tag = ((hash >> 48) as u16).max(1);
        (&self.slots[first..first + 2], tag)
    }

    /// The slot holding the key, if one does; else the one to give it:
    /// an empty one, or the one whose key was used least recently. Two
    /// places per key make a key lose its figures to another only when
    /// both neighbours are taken by keys used since: eviction reads a key
    /// that lost them as idle since the start, and a hot key that did was
    /// evicted one time in a few hundred with one place per key.
    fn locate(&self, db: u32, key: &[u8]) -> (&AtomicU64, u16) {
        let (pair, tag) = self.pair(db, key);
        let (a, b) = (
            pair[0].load(Ordering::Relaxed),
            pair[1].load(Ordering::Relaxed),
        );
        let slot = if tag_of(a) == tag {
            &pair[0]
        } else if tag_of(b) == tag {
            &pair[1]
        } else if a == 0 {
            &pair[0]
        } else if b == 0 {
            &pair[1]
        } else {
            // The older of the two, on the wrapping LRU clock.
            let now = self.now_secs() & LRU_CLOCK_MAX;
            if idle_secs(now, lru_of(a)) >= idle_secs(now, lru_of(b)) {
                &pair[0]
            } else {
                &pair[1]
            }
        };
        (slot, tag)
    }

    /// redis's `LFUDecrAndReturn`: the counter less one for every
    /// `lfu-decay-time` minutes since it was last decayed.
    fn decayed(&self, word: u64, now_min: u64) -> u8 {
        let now_min = now_min & 0xffff;
        let counter = counter_of(word);
        let period = u64::from(self.decay_minutes.load(Ordering::Relaxed));
        if period == 0 {
            return counter;
        }
        let periods = minutes_since(now_min, ldt_of(word)) / period;
        counter.saturating_sub(periods.min(255) as u8)
    }

    /// redis's `LFULogIncr`: one more access, less and less likely to count
    /// the higher the counter.
    fn log_incr(&self, counter: u8) -> u8 {
        if counter == 255 {
            return 255;
        }
        let base = counter.saturating_sub(LFU_INIT_VAL) as f64;
        let p = 1.0 / (base * f64::from(self.log_factor.load(Ordering::Relaxed)) + 1.0);
        if p >= 1.0 || coin() < p {
            counter + 1
        } else {
            counter
        }
    }

    /// What a key this table does not know reports: last used when the
    /// table started, with a new key's counter (decayed since then).
    fn unknown(&self, tag: u16) -> u64 {
        pack(tag, self.started_secs, self.started_secs / 60, LFU_INIT_VAL)
    }

    /// The key's slot, fingerprint, and its figures as a slot word: the
    /// slot's if it holds this key, else an unknown key's.
    fn word(&self, db: u32, key: &[u8]) -> (&AtomicU64, u16, u64) {
        let (slot, tag) = self.locate(db, key);
        let word = slot.load(Ordering::Relaxed);
        if tag_of(word) == tag {
            (slot, tag, word)
        } else {
            (slot, tag, self.unknown(tag))
        }
    }

    /// One access to an existing key (redis's `updateLFU` and LRU clock
    /// update together).
    fn touch(&self, db: u32, key: &[u8], now_secs: u64) {
        let (slot, tag, word) = self.word(db, key);
        let now_min = now_secs / 60;
        let counter = self.log_incr(self.decayed(word, now_min));
        let next = pack(tag, now_secs, now_min, counter);
        // A hot key read many times a second mostly changes nothing: no
        // store then, so threads reading it share the cache line.
        if next != word {
            slot.store(next, Ordering::Relaxed);
        }
    }

    /// A read command's lookup of a key: counts a hit or a miss, and
    /// touches a key that exists when `touch` says so.
    pub fn read(&self, db: u32, key: &[u8], found: bool, touch: bool) {
        let stripe = stripe();
        if found {
            self.hits[stripe].fetch_add(1, Ordering::Relaxed);
            if touch {
                self.touch(db, key, self.now_secs());
            }
        } else {
            self.misses[stripe].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Notes the keys a committed group of writes changed: a key written
    /// is touched, one the group created (or deleted and wrote again)
    /// starts afresh, one it deleted is forgotten. A flush forgets every
    /// key.
    pub(crate) fn committed(&self, touched: &Touched) {
        if touched.is_all() {
            for slot in self.slots.iter() {
                slot.store(0, Ordering::Relaxed);
            }
        }
        let now_secs = self.now_secs();
        let mut last: Option<(u32, &[u8], bool)> = None;
        for (db, key, gone) in touched.events() {
            // One command notes a key more than once (the row, then its
            // count): one access, as in redis.
            if last == Some((db, key, gone)) {
                continue;
            }
            let fresh = matches!(last, Some((d, k, true)) if d == db && k == key);
            last = Some((db, key, gone));
            let (slot, tag) = self.locate(db, key);
            if gone {
                if tag_of(slot.load(Ordering::Relaxed)) == tag {
                    slot.store(0, Ordering::Relaxed);
                }
            } else if fresh || tag_of(slot.load(Ordering::Relaxed)) != tag {
                slot.store(
                    pack(tag, now_secs, now_secs / 60, LFU_INIT_VAL),
                    Ordering::Relaxed,
                );
            } else {
                self.touch(db, key, now_secs);
            }
        }
        self.apply_restored();
    }

    /// A key's figures now (OBJECT IDLETIME and FREQ, DEBUG OBJECT). The
    /// caller has checked that the key exists.
    pub fn figures(&self, db: u32, key: &[u8]) -> Figures {
        let (_, _, word) = self.word(db, key);
        let now = self.now_secs();
        Figures {
            lru: lru_of(word) as u32,
            idle_secs: idle_secs(now & LRU_CLOCK_MAX, lru_of(word)),
            freq: self.decayed(word, now / 60),
        }
    }

    /// Keyspace hits and misses since the start or the last reset.
    pub fn hits_misses(&self) -> (u64, u64) {
        let sum = |c: &[CachePadded<AtomicU64>]| c.iter().map(|a| a.load(Ordering::Relaxed)).sum();
        (sum(&self.hits), sum(&self.misses))
    }

    /// Zeroes the hit and miss counters (CONFIG RESETSTAT).
    pub fn reset_stats(&self) {
        for c in self.hits.iter().chain(self.misses.iter()) {
            c.store(0, Ordering::Relaxed);
        }
    }
}

/// A number in [0, 1) for the LFU counter's coin: xorshift64* per thread,
/// seeded from the standard library's per-thread random hasher keys.
fn coin() -> f64 {
    use std::cell::Cell;
    use std::hash::{BuildHasher, RandomState};
    thread_local! {
        static STATE: Cell<u64> = Cell::new(RandomState::new().hash_one(0u8) | 1);
    }
    STATE.with(|s| {
        let mut x = s.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        s.set(x);
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    })
}

/// This thread's stripe of the counters.
fn stripe() -> usize {
    thread_local! {
        static STRIPE: usize = {
            use std::sync::atomic::AtomicUsize;
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES
        };
    }
    STRIPE.with(|s| *s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_key_starts_at_the_initial_counter_and_one_read_raises_it() {
        let a = Access::new();
        let mut t = Touched::default();
        t.key(0, b"k");
        a.committed(&t);
        assert_eq!(a.figures(0, b"k").freq, LFU_INIT_VAL);
        assert_eq!(a.figures(0, b"k").idle_secs, 0);
        // At the initial value the next access always counts (p = 1).
        a.read(0, b"k", true, true);
        assert_eq!(a.figures(0, b"k").freq, LFU_INIT_VAL + 1);
        assert_eq!(a.hits_misses(), (1, 0));
        a.read(0, b"nosuch", false, true);
        assert_eq!(a.hits_misses(), (1, 1));
        a.reset_stats();
        assert_eq!(a.hits_misses(), (0, 0));
    }

    #[test]
    fn a_command_noting_a_key_twice_is_one_access_and_a_delete_forgets() {
        let a = Access::new();
        let mut t = Touched::default();
        t.key(0, b"h");
        t.key(0, b"h");
        a.committed(&t);
        assert_eq!(a.figures(0, b"h").freq, LFU_INIT_VAL);
        // Deleted, then written again in one group: a new key.
        a.read(0, b"h", true, true);
        let mut t = Touched::default();
        t.key(0, b"h");
        t.gone();
        t.key(0, b"h");
        a.committed(&t);
        assert_eq!(a.figures(0, b"h").freq, LFU_INIT_VAL);
    }

    #[test]
    fn the_counter_grows_logarithmically_and_decays_by_the_minute() {
        let a = Access::new();
        for _ in 0..100_000 {
            a.read(0, b"hot", true, true);
        }
        let hot = a.figures(0, b"hot").freq;
        // redis's table for lfu-log-factor 10: 100K hits reach about 255
        // only at factor 1; at 10 they end near 142.
        assert!((100..=200).contains(&hot), "{hot}");
        let (slot, tag) = a.locate(0, b"hot");
        let word = slot.load(Ordering::Relaxed);
        let now_min = unix_secs() / 60;
        // Ten minutes ago: ten decay periods of one minute.
        slot.store(
            pack(tag, lru_of(word), (now_min - 10) & 0xffff, counter_of(word)),
            Ordering::Relaxed,
        );
        assert_eq!(a.figures(0, b"hot").freq, hot - 10);
        a.set_lfu(10, 0);
        assert_eq!(a.figures(0, b"hot").freq, hot);
    }

    #[test]
    fn idle_time_wraps_with_the_24_bit_clock() {
        assert_eq!(idle_secs(10, 5), 5);
        assert_eq!(idle_secs(3, LRU_CLOCK_MAX - 2), 5);
        assert_eq!(minutes_since(2, 65534), 3);
    }
}

//! Crash safety: respited killed with SIGKILL at random moments while
//! clients write, restarted on the same files, and checked.
//!
//! docs/durability.md promises that a process crash loses no acknowledged
//! write under any `appendfsync` setting (a commit is in the WAL, in the
//! kernel's page cache, before its reply is sent, and the page cache
//! outlives the process), that a MULTI/EXEC is applied whole or not at
//! all, and that the database is never corrupted. This test holds respited
//! to exactly that, cycle after cycle on one set of files:
//!
//! 1. respited starts on the files the last cycle left (with `always`,
//!    `everysec` or `no` in turn, and every other cycle with checkpoint
//!    thresholds small enough that kills land in WAL copies and
//!    truncations);
//! 2. its start-up log must report the recovery of the WAL the kill left,
//!    with the size and frame count this test read from the file, and the
//!    time the recovery took;
//! 3. everything acknowledged so far is read back: unique SETs (small and
//!    1 MB values), an INCR counter, MULTI/EXEC transactions over five
//!    types, EVAL scripts making the same five writes (applied whole or
//!    not at all), RPUSH lists (every element, in order), HSET fields and ZADD
//!    members. A write sent but not acknowledged when the server died is
//!    "in doubt": it may be there or not, but nothing beyond it may be;
//! 4. several writer clients, each on its own keys, write and record every
//!    reply, until respited is SIGKILLed after a random delay;
//! 5. the files the dead process left are copied aside and opened with
//!    SQLite, which must recover them and pass `PRAGMA integrity_check`.
//!
//! Now and then the restarted process is also killed during its own start-up
//! (in the middle of recovering), before the real restart.
//!
//! CI runs [`CI_CYCLES`] cycles in a debug build. `just crash N` runs N
//! cycles in a release build (`RESPITE_CRASH_CYCLES`, and
//! `RESPITE_CRASH_FSYNC=always|everysec|no|mixed`, `RESPITE_CRASH_SEED` to
//! replay a run); the counts it prints are the ones docs/durability.md
//! records.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::Respited;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Cycles of the CI run (`cargo test`).
const CI_CYCLES: usize = 21;
/// Writer clients, each with its own keys.
const WRITERS: usize = 5;
/// The script the crash run's EVALs run: the five writes of its MULTI/EXEC
/// (SET, INCR, RPUSH, HSET, ZADD), answering the INCR.
const FIVE_WRITES: &str = "local r = ARGV[1] \
    redis.call('set', KEYS[1], r) \
    local n = redis.call('incr', KEYS[2]) \
    redis.call('rpush', KEYS[3], r) \
    redis.call('hset', KEYS[4], 'f' .. r, r) \
    redis.call('zadd', KEYS[5], r, 'm' .. r) \
    return n";
/// The size of a large value.
const BIG: usize = 1024 * 1024;
/// Slots of large values per writer: each large SET overwrites one, so the
/// file stays a few MB whatever the number of cycles.
const BIG_SLOTS: u64 = 3;

/// A small unique value: its writer and number, then filler of a length
/// that varies with the number (up to 3 KB, so values span overflow pages).
fn small_value(w: usize, n: u64) -> Vec<u8> {
    let mut v = format!("{w}:{n}:").into_bytes();
    let len = (n.wrapping_mul(7919) % 3000) as usize;
    v.extend((0..len).map(|i| b'a' + ((i as u64 + n) % 26) as u8));
    v
}

/// A 1 MB value: its number in a header, then pseudo-random bytes seeded by
/// writer and number, so a torn or mixed-up value cannot pass for it.
fn big_value(w: usize, k: u64) -> Vec<u8> {
    let mut v = format!("big:{w}:{k:012}:").into_bytes();
    let mut x = (w as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ k.wrapping_add(1);
    while v.len() < BIG {
        // xorshift64
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(BIG);
    v
}

/// What one writer has had acknowledged, and what it sent without an
/// answer. Counters are "how many": every write of a kind is numbered in
/// order, and the writer waits for each reply before sending the next, so
/// at most one write (the last) is in doubt.
#[derive(Default, Clone)]
struct Model {
    w: usize,
    /// Unique SETs: `s:{w}:{n}` = `small_value(w, n)` for every n below
    /// `set_next` except those in `set_absent` (sent, unanswered, and found
    /// missing after the restart: allowed).
    set_next: u64,
    set_absent: HashSet<u64>,
    set_doubt: Option<u64>,
    /// The first number of the current cycle (checked in full every cycle;
    /// older ones by sample).
    set_cycle_start: u64,
    /// Large SETs: `big:{w}:{k % BIG_SLOTS}` = `big_value(w, k)`, the last
    /// acknowledged `k` of each slot.
    big_next: u64,
    big_acked: [Option<u64>; BIG_SLOTS as usize],
    big_doubt: Option<u64>,
    /// INCR `c:{w}`: the last reply, and whether one more was sent.
    incr_acked: i64,
    incr_doubt: bool,
    /// MULTI/EXEC transactions applied (each: SET, INCR, RPUSH, HSET, ZADD
    /// on `m:{w}:*`, which must agree with one another).
    multi_acked: u64,
    multi_doubt: bool,
    /// Scripts run (each an EVAL of the same five writes on `e:{w}:*`, which
    /// must agree with one another: a script is applied whole or not at
    /// all).
    script_acked: u64,
    script_doubt: bool,
    /// RPUSH `l:{w}` of "0", "1", ...: elements acknowledged.
    list_acked: u64,
    list_doubt: bool,
    /// HSET `h:{w}` f{n} v{n}: fields acknowledged.
    hash_acked: u64,
    hash_doubt: bool,
    /// ZADD `z:{w}` n m{n}: members acknowledged.
    zset_acked: u64,
    zset_doubt: bool,
    /// Totals for the report.
    stats: Counts,
}

/// What a run did, for the report (and docs/durability.md).
#[derive(Default, Clone, Copy, Debug)]
struct Counts {
    acked: u64,
    big_acked: u64,
    multi_acked: u64,
    in_doubt: u64,
    in_doubt_applied: u64,
}

impl Counts {
    fn add(&mut self, o: Counts) {
        self.acked += o.acked;
        self.big_acked += o.big_acked;
        self.multi_acked += o.multi_acked;
        self.in_doubt += o.in_doubt;
        self.in_doubt_applied += o.in_doubt_applied;
    }
}

/// A write failed: that must be the server dying, not an error reply
/// (which would mean the server refused a write this test expects to
/// succeed, and a check that passes for the wrong reason).
fn died(e: redis::RedisError) {
    assert!(
        e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal(),
        "a write failed with something other than the server's death: {e}"
    );
}

/// The five keys one writer's MULTI/EXEC transactions write: the string,
/// the counter, the list, the hash, the sorted set.
type MultiKeys = (
    Option<u64>,
    Option<u64>,
    Vec<u64>,
    Vec<(String, u64)>,
    Vec<(String, u64)>,
);

/// One kind of write.
#[derive(Clone, Copy)]
enum Op {
    Set,
    Big,
    Incr,
    Multi,
    Script,
    Push,
    Hset,
    Zadd,
}

fn pick(rng: &mut StdRng, big_chance: f64) -> Op {
    if rng.random_bool(big_chance) {
        return Op::Big;
    }
    match rng.random_range(0..100) {
        0..30 => Op::Set,
        30..45 => Op::Incr,
        45..52 => Op::Multi,
        52..58 => Op::Script,
        58..73 => Op::Push,
        73..87 => Op::Hset,
        _ => Op::Zadd,
    }
}

impl Model {
    /// Writes until the connection fails (the server was killed), recording
    /// every reply.
    fn write(&mut self, port: u16, seed: u64, big_chance: f64) {
        let mut rng = StdRng::seed_from_u64(seed);
        let Ok(client) = redis::Client::open(format!("redis://127.0.0.1:{port}/")) else {
            return;
        };
        let Ok(mut con) = client.get_connection() else {
            return; // killed before this writer got going
        };
        // A dead server resets the socket at once; the timeout is only a
        // guard against a test that hangs instead of failing.
        let _ = con.set_read_timeout(Some(Duration::from_secs(30)));
        let w = self.w;
        loop {
            let op = pick(&mut rng, big_chance);
            let ok = match op {
                Op::Set => {
                    let n = self.set_next;
                    self.set_next += 1;
                    let r: redis::RedisResult<String> = redis::cmd("SET")
                        .arg(format!("s:{w}:{n}"))
                        .arg(small_value(w, n))
                        .query(&mut con);
                    match r {
                        Ok(ok) => {
                            assert_eq!(ok, "OK");
                            true
                        }
                        Err(e) => {
                            died(e);
                            self.set_doubt = Some(n);
                            false
                        }
                    }
                }
                Op::Big => {
                    let k = self.big_next;
                    self.big_next += 1;
                    let r: redis::RedisResult<String> = redis::cmd("SET")
                        .arg(format!("big:{w}:{}", k % BIG_SLOTS))
                        .arg(big_value(w, k))
                        .query(&mut con);
                    match r {
                        Ok(ok) => {
                            assert_eq!(ok, "OK");
                            self.big_acked[(k % BIG_SLOTS) as usize] = Some(k);
                            self.stats.big_acked += 1;
                            true
                        }
                        Err(e) => {
                            died(e);
                            self.big_doubt = Some(k);
                            false
                        }
                    }
                }
                Op::Incr => {
                    let r: redis::RedisResult<i64> =
                        redis::cmd("INCR").arg(format!("c:{w}")).query(&mut con);
                    match r {
                        Ok(v) => {
                            assert_eq!(v, self.incr_acked + 1, "INCR c:{w}");
                            self.incr_acked = v;
                            true
                        }
                        Err(e) => {
                            died(e);
                            self.incr_doubt = true;
                            false
                        }
                    }
                }
                Op::Multi => {
                    let r = self.multi_acked;
                    let got: redis::RedisResult<(String, i64, i64, i64, i64)> = redis::pipe()
                        .atomic()
                        .cmd("SET")
                        .arg(format!("m:{w}:s"))
                        .arg(r)
                        .cmd("INCR")
                        .arg(format!("m:{w}:n"))
                        .cmd("RPUSH")
                        .arg(format!("m:{w}:l"))
                        .arg(r)
                        .cmd("HSET")
                        .arg(format!("m:{w}:h"))
                        .arg(format!("f{r}"))
                        .arg(r)
                        .cmd("ZADD")
                        .arg(format!("m:{w}:z"))
                        .arg(r)
                        .arg(format!("m{r}"))
                        .query(&mut con);
                    match got {
                        Ok(reply) => {
                            let n = r as i64 + 1;
                            assert_eq!(reply, ("OK".to_string(), n, n, 1, 1), "EXEC of {w}");
                            self.multi_acked += 1;
                            self.stats.multi_acked += 1;
                            true
                        }
                        Err(e) => {
                            died(e);
                            self.multi_doubt = true;
                            false
                        }
                    }
                }
                Op::Script => {
                    let r = self.script_acked;
                    let got: redis::RedisResult<i64> = redis::cmd("EVAL")
                        .arg(FIVE_WRITES)
                        .arg(5)
                        .arg(format!("e:{w}:s"))
                        .arg(format!("e:{w}:n"))
                        .arg(format!("e:{w}:l"))
                        .arg(format!("e:{w}:h"))
                        .arg(format!("e:{w}:z"))
                        .arg(r)
                        .query(&mut con);
                    match got {
                        Ok(n) => {
                            assert_eq!(n, r as i64 + 1, "EVAL of {w}");
                            self.script_acked += 1;
                            true
                        }
                        Err(e) => {
                            died(e);
                            self.script_doubt = true;
                            false
                        }
                    }
                }
                Op::Push => {
                    let n = self.list_acked;
                    let r: redis::RedisResult<u64> = redis::cmd("RPUSH")
                        .arg(format!("l:{w}"))
                        .arg(n)
                        .query(&mut con);
                    match r {
                        Ok(len) => {
                            assert_eq!(len, n + 1, "RPUSH l:{w}");
                            self.list_acked += 1;
                            true
                        }
                        Err(e) => {
                            died(e);
                            self.list_doubt = true;
                            false
                        }
                    }
                }
                Op::Hset => {
                    let n = self.hash_acked;
                    let r: redis::RedisResult<i64> = redis::cmd("HSET")
                        .arg(format!("h:{w}"))
                        .arg(format!("f{n}"))
                        .arg(format!("v{n}"))
                        .query(&mut con);
                    match r {
                        Ok(added) => {
                            assert_eq!(added, 1, "HSET h:{w} f{n}");
                            self.hash_acked += 1;
                            true
                        }
                        Err(e) => {
                            died(e);
                            self.hash_doubt = true;
                            false
                        }
                    }
                }
                Op::Zadd => {
                    let n = self.zset_acked;
                    let r: redis::RedisResult<i64> = redis::cmd("ZADD")
                        .arg(format!("z:{w}"))
                        .arg(n)
                        .arg(format!("m{n}"))
                        .query(&mut con);
                    match r {
                        Ok(added) => {
                            assert_eq!(added, 1, "ZADD z:{w} m{n}");
                            self.zset_acked += 1;
                            true
                        }
                        Err(e) => {
                            died(e);
                            self.zset_doubt = true;
                            false
                        }
                    }
                }
            };
            if !ok {
                self.stats.in_doubt += 1;
                return;
            }
            self.stats.acked += 1;
        }
    }

    /// Checks everything acknowledged against the restarted server, then
    /// settles what was in doubt to what the server holds.
    fn verify(&mut self, con: &mut redis::Connection, rng: &mut StdRng, full: bool) {
        let w = self.w;
        let mut doubt_applied = 0;

        // Unique SETs: the in-doubt one first, so it is known to be there
        // or not.
        if let Some(n) = self.set_doubt.take() {
            let got: Option<Vec<u8>> = redis::cmd("GET")
                .arg(format!("s:{w}:{n}"))
                .query(con)
                .expect("GET");
            match got {
                Some(v) => {
                    assert_eq!(
                        v,
                        small_value(w, n),
                        "in-doubt s:{w}:{n} holds a wrong value"
                    );
                    doubt_applied += 1;
                }
                None => {
                    self.set_absent.insert(n);
                }
            }
        }
        let mut numbers: Vec<u64> = if full {
            (0..self.set_next).collect()
        } else {
            // This cycle's writes in full, and a sample of the older ones.
            let mut v: Vec<u64> = (self.set_cycle_start..self.set_next).collect();
            if self.set_cycle_start > 0 {
                for _ in 0..500 {
                    v.push(rng.random_range(0..self.set_cycle_start));
                }
            }
            v
        };
        numbers.retain(|n| !self.set_absent.contains(n));
        for chunk in numbers.chunks(256) {
            let keys: Vec<String> = chunk.iter().map(|n| format!("s:{w}:{n}")).collect();
            let got: Vec<Option<Vec<u8>>> = redis::cmd("MGET").arg(&keys).query(con).expect("MGET");
            for (n, v) in chunk.iter().zip(got) {
                assert_eq!(
                    v.as_deref(),
                    Some(&small_value(w, *n)[..]),
                    "acknowledged SET s:{w}:{n} lost or wrong"
                );
            }
        }
        self.set_cycle_start = self.set_next;

        // Large values: each slot holds its last acknowledged value, or the
        // in-doubt one if it fell in that slot.
        let doubt = self.big_doubt.take();
        for slot in 0..BIG_SLOTS {
            let acked = self.big_acked[slot as usize];
            let doubt_here = doubt.filter(|k| k % BIG_SLOTS == slot);
            if acked.is_none() && doubt_here.is_none() {
                continue;
            }
            let got: Option<Vec<u8>> = redis::cmd("GET")
                .arg(format!("big:{w}:{slot}"))
                .query(con)
                .expect("GET big");
            if let Some(k) = doubt_here {
                if got.as_deref() == Some(&big_value(w, k)[..]) {
                    self.big_acked[slot as usize] = Some(k);
                    doubt_applied += 1;
                    continue;
                }
            }
            match acked {
                Some(k) => assert!(
                    got.as_deref() == Some(&big_value(w, k)[..]),
                    "acknowledged 1 MB SET big:{w}:{slot} #{k} lost or wrong: found {:?}",
                    got.map(|v| String::from_utf8_lossy(&v[..v.len().min(30)]).into_owned())
                ),
                None => assert_eq!(got, None, "big:{w}:{slot} holds something never sent"),
            }
        }

        // INCR: at least every acknowledged increment, at most one more.
        let v: Option<i64> = redis::cmd("GET")
            .arg(format!("c:{w}"))
            .query(con)
            .expect("GET counter");
        let v = v.unwrap_or(0);
        let most = self.incr_acked + i64::from(self.incr_doubt);
        assert!(
            (self.incr_acked..=most).contains(&v),
            "counter c:{w} is {v}, acknowledged {}, sent {most}",
            self.incr_acked
        );
        doubt_applied += u64::from(v > self.incr_acked);
        self.incr_acked = v;
        self.incr_doubt = false;

        // MULTI/EXEC: the five keys agree on how many transactions applied,
        // and that is every acknowledged one, plus perhaps the one in doubt.
        let (s, n, l, h, z): MultiKeys = redis::pipe()
            .cmd("GET")
            .arg(format!("m:{w}:s"))
            .cmd("GET")
            .arg(format!("m:{w}:n"))
            .cmd("LRANGE")
            .arg(format!("m:{w}:l"))
            .arg(0)
            .arg(-1)
            .cmd("HGETALL")
            .arg(format!("m:{w}:h"))
            .cmd("ZRANGE")
            .arg(format!("m:{w}:z"))
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query(con)
            .expect("read the MULTI keys");
        let k = n.unwrap_or(0);
        let most = self.multi_acked + u64::from(self.multi_doubt);
        assert!(
            (self.multi_acked..=most).contains(&k),
            "{k} transactions of writer {w} applied, acknowledged {}, sent {most}",
            self.multi_acked
        );
        assert_eq!(s, k.checked_sub(1), "MULTI torn: m:{w}:s vs {k} applied");
        assert_eq!(l, (0..k).collect::<Vec<_>>(), "MULTI torn: m:{w}:l");
        let mut h = h;
        h.sort_by_key(|(_, v)| *v);
        let want_h: Vec<(String, u64)> = (0..k).map(|r| (format!("f{r}"), r)).collect();
        assert_eq!(h, want_h, "MULTI torn: m:{w}:h");
        let want_z: Vec<(String, u64)> = (0..k).map(|r| (format!("m{r}"), r)).collect();
        assert_eq!(z, want_z, "MULTI torn: m:{w}:z");
        doubt_applied += u64::from(k > self.multi_acked);
        self.multi_acked = k;
        self.multi_doubt = false;

        // Scripts: as MULTI/EXEC, on `e:{w}:*`.
        let (s, n, l, h, z): MultiKeys = redis::pipe()
            .cmd("GET")
            .arg(format!("e:{w}:s"))
            .cmd("GET")
            .arg(format!("e:{w}:n"))
            .cmd("LRANGE")
            .arg(format!("e:{w}:l"))
            .arg(0)
            .arg(-1)
            .cmd("HGETALL")
            .arg(format!("e:{w}:h"))
            .cmd("ZRANGE")
            .arg(format!("e:{w}:z"))
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query(con)
            .expect("read the script's keys");
        let k = n.unwrap_or(0);
        let most = self.script_acked + u64::from(self.script_doubt);
        assert!(
            (self.script_acked..=most).contains(&k),
            "{k} scripts of writer {w} applied, acknowledged {}, sent {most}",
            self.script_acked
        );
        assert_eq!(s, k.checked_sub(1), "script torn: e:{w}:s vs {k} applied");
        assert_eq!(l, (0..k).collect::<Vec<_>>(), "script torn: e:{w}:l");
        let mut h = h;
        h.sort_by_key(|(_, v)| *v);
        let want_h: Vec<(String, u64)> = (0..k).map(|r| (format!("f{r}"), r)).collect();
        assert_eq!(h, want_h, "script torn: e:{w}:h");
        let want_z: Vec<(String, u64)> = (0..k).map(|r| (format!("m{r}"), r)).collect();
        assert_eq!(z, want_z, "script torn: e:{w}:z");
        doubt_applied += u64::from(k > self.script_acked);
        self.script_acked = k;
        self.script_doubt = false;

        // RPUSH: every acknowledged element, in order, nothing else.
        let l: Vec<u64> = redis::cmd("LRANGE")
            .arg(format!("l:{w}"))
            .arg(0)
            .arg(-1)
            .query(con)
            .expect("LRANGE");
        let k = l.len() as u64;
        let most = self.list_acked + u64::from(self.list_doubt);
        assert!(
            (self.list_acked..=most).contains(&k),
            "list l:{w} has {k} elements, acknowledged {}, sent {most}",
            self.list_acked
        );
        assert_eq!(l, (0..k).collect::<Vec<_>>(), "list l:{w} out of order");
        doubt_applied += u64::from(k > self.list_acked);
        self.list_acked = k;
        self.list_doubt = false;

        // HSET: every acknowledged field with its value.
        let mut h: Vec<(String, String)> = redis::cmd("HGETALL")
            .arg(format!("h:{w}"))
            .query(con)
            .expect("HGETALL");
        let k = h.len() as u64;
        let most = self.hash_acked + u64::from(self.hash_doubt);
        assert!(
            (self.hash_acked..=most).contains(&k),
            "hash h:{w} has {k} fields, acknowledged {}, sent {most}",
            self.hash_acked
        );
        h.sort_by_key(|(f, _)| f[1..].parse::<u64>().unwrap_or(u64::MAX));
        let want: Vec<(String, String)> =
            (0..k).map(|n| (format!("f{n}"), format!("v{n}"))).collect();
        assert_eq!(h, want, "hash h:{w}");
        doubt_applied += u64::from(k > self.hash_acked);
        self.hash_acked = k;
        self.hash_doubt = false;

        // ZADD: every acknowledged member with its score.
        let z: Vec<(String, u64)> = redis::cmd("ZRANGE")
            .arg(format!("z:{w}"))
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query(con)
            .expect("ZRANGE");
        let k = z.len() as u64;
        let most = self.zset_acked + u64::from(self.zset_doubt);
        assert!(
            (self.zset_acked..=most).contains(&k),
            "sorted set z:{w} has {k} members, acknowledged {}, sent {most}",
            self.zset_acked
        );
        let want: Vec<(String, u64)> = (0..k).map(|n| (format!("m{n}"), n)).collect();
        assert_eq!(z, want, "sorted set z:{w}");
        doubt_applied += u64::from(k > self.zset_acked);
        self.zset_acked = k;
        self.zset_doubt = false;

        self.stats.in_doubt_applied += doubt_applied;
    }
}

/// The WAL a killed process left: its size and whole frames (the WAL
/// header's page size at offset 8, then frames of 24 bytes plus a page).
fn wal_left(db: &Path) -> (u64, u64) {
    use std::io::Read;
    let wal = db.with_file_name("respite.db-wal");
    let Ok(mut file) = std::fs::File::open(&wal) else {
        return (0, 0);
    };
    let len = file.metadata().map_or(0, |m| m.len());
    let mut header = [0u8; 32];
    if file.read_exact(&mut header).is_err() {
        return (len, 0);
    }
    let page = u32::from_be_bytes([header[8], header[9], header[10], header[11]]) as u64;
    (len, (len - 32) / (page + 24))
}

/// Copies the database and WAL a killed process left into `scratch` and
/// has SQLite recover and check the copy (the originals are left for
/// respited to recover itself).
fn integrity_check(dir: &Path, scratch: &Path) {
    let _ = std::fs::remove_file(scratch.join("copy.db-wal"));
    let _ = std::fs::remove_file(scratch.join("copy.db-shm"));
    std::fs::copy(dir.join("respite.db"), scratch.join("copy.db")).expect("copy db");
    if dir.join("respite.db-wal").exists() {
        std::fs::copy(dir.join("respite.db-wal"), scratch.join("copy.db-wal")).expect("copy wal");
    }
    let conn = rusqlite::Connection::open(scratch.join("copy.db")).expect("open the copy");
    let mut stmt = conn.prepare("PRAGMA integrity_check").expect("prepare");
    let rows: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .expect("integrity_check")
        .collect::<Result<_, _>>()
        .expect("rows");
    assert_eq!(rows, ["ok"], "integrity_check after the kill");
}

/// A `key=value` field of a log line.
fn log_field(line: &str, key: &str) -> Option<u64> {
    let at = line.find(&format!(" {key}="))? + key.len() + 2;
    let rest = &line[at..];
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// Starts respited on `dir` and kills it after `delay`, most likely in the
/// middle of its start-up (recovering the WAL).
fn kill_during_startup(dir: &Path, flags: &[&str], delay: Duration) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_respited"))
        .arg("--port")
        .arg("0")
        .arg("--db")
        .arg(dir.join("respite.db"))
        .arg("--unixsocket")
        .arg(dir.join("respite.sock"))
        .args(flags)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn respited");
    std::thread::sleep(delay);
    let _ = child.kill();
    let _ = child.wait();
}

/// The settings of one run.
struct Run {
    cycles: usize,
    /// `always`, `everysec`, `no`, or `mixed` (each in turn).
    fsync: String,
    seed: u64,
    /// How long the writers write before the kill, at most.
    max_run: Duration,
    big_chance: f64,
}

impl Run {
    fn from_env(default_cycles: usize) -> Run {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        Run {
            cycles: var("RESPITE_CRASH_CYCLES")
                .and_then(|v| v.parse().ok())
                .unwrap_or(default_cycles),
            fsync: var("RESPITE_CRASH_FSYNC").unwrap_or_else(|| "mixed".into()),
            seed: var("RESPITE_CRASH_SEED")
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(rand::random),
            max_run: Duration::from_millis(
                var("RESPITE_CRASH_MAX_MS")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(900),
            ),
            big_chance: 0.01,
        }
    }

    fn fsync_of(&self, cycle: usize) -> &str {
        match self.fsync.as_str() {
            "mixed" => ["always", "everysec", "no"][cycle % 3],
            other => other,
        }
    }

    fn go(&self) {
        eprintln!(
            "crash run: {} cycles, appendfsync {}, seed {} (RESPITE_CRASH_SEED replays it)",
            self.cycles, self.fsync, self.seed
        );
        let mut rng = StdRng::seed_from_u64(self.seed);
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("data");
        let scratch = tmp.path().join("scratch");
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::create_dir_all(&scratch).expect("mkdir");
        let mut models: Vec<Model> = (0..WRITERS)
            .map(|w| Model {
                w,
                ..Model::default()
            })
            .collect();
        let started = Instant::now();
        let mut left = (0u64, 0u64);
        let (mut recoveries, mut startup_kills) = (0u64, 0u64);
        let (mut max_recovery_ms, mut max_wal, mut frames_recovered) = (0u64, 0u64, 0u64);
        for cycle in 0..=self.cycles {
            let fsync = self.fsync_of(cycle).to_string();
            let small_checkpoints = cycle % 2 == 1;
            let mut flags = vec!["--appendfsync", fsync.as_str()];
            if small_checkpoints {
                // Copies after 64 KiB of WAL and truncations past 1 MiB:
                // many kills land in a checkpoint.
                flags.extend([
                    "--checkpoint-wal-bytes",
                    "65536",
                    "--wal-checkpoint-bytes",
                    "1048576",
                ]);
            }
            if cycle > 0 && rng.random_bool(0.2) {
                kill_during_startup(&dir, &flags, Duration::from_millis(rng.random_range(0..60)));
                startup_kills += 1;
                left = wal_left(&dir.join("respite.db"));
            }
            let mut server = Respited::start_in(&dir, &flags);
            // The start-up log reports the WAL the kill left.
            let recovering = server
                .startup_log
                .iter()
                .find(|l| l.contains("did not stop cleanly"));
            if left.0 > 0 {
                let line = recovering.unwrap_or_else(|| {
                    panic!(
                        "cycle {cycle}: a {} byte WAL was left and the log does not say so: {:?}",
                        left.0, server.startup_log
                    )
                });
                assert_eq!(log_field(line, "wal_bytes"), Some(left.0), "{line}");
                assert_eq!(log_field(line, "wal_frames"), Some(left.1), "{line}");
                let done = server
                    .startup_log
                    .iter()
                    .find(|l| l.contains("recovered the WAL into the database"))
                    .unwrap_or_else(|| panic!("no recovery line: {:?}", server.startup_log));
                let frames = log_field(done, "frames").expect("frames in the recovery line");
                assert!(
                    frames <= left.1,
                    "{frames} frames recovered of {}: {done}",
                    left.1
                );
                if done.contains("complete=true") {
                    assert_eq!(log_field(done, "copied"), Some(frames), "{done}");
                }
                frames_recovered += frames;
                let ms = log_field(done, "ms").expect("ms in the recovery line");
                max_recovery_ms = max_recovery_ms.max(ms);
                max_wal = max_wal.max(left.0);
                recoveries += 1;
            } else {
                assert!(recovering.is_none(), "cycle {cycle}: {recovering:?}");
            }
            let mut con = server.client();
            let last = cycle == self.cycles;
            for m in &mut models {
                m.verify(&mut con, &mut rng, last);
            }
            if last {
                // The end: a clean stop, which leaves nothing to recover,
                // and the file it leaves passes the check.
                drop(con);
                let status = server.terminate();
                assert!(status.success(), "{status:?}");
                assert_eq!(wal_left(&dir.join("respite.db")).0, 0);
                integrity_check(&dir, &scratch);
                break;
            }
            drop(con);
            // Write, and kill the server at a random moment.
            let port = server.port;
            let big_chance = self.big_chance;
            let writers: Vec<_> = models
                .drain(..)
                .map(|mut m| {
                    let seed = rng.random();
                    std::thread::spawn(move || {
                        m.write(port, seed, big_chance);
                        m
                    })
                })
                .collect();
            let run = rng.random_range(20..self.max_run.as_millis() as u64);
            std::thread::sleep(Duration::from_millis(run));
            server.kill();
            models = writers
                .into_iter()
                .map(|h| h.join().expect("writer thread"))
                .collect();
            left = wal_left(&dir.join("respite.db"));
            integrity_check(&dir, &scratch);
        }
        let mut total = Counts::default();
        for m in &models {
            total.add(m.stats);
        }
        eprintln!(
            "crash run done: {} cycles (appendfsync {}) in {:.1} s; {} writes acknowledged \
             ({} of 1 MB, {} MULTI/EXEC), all present; {} in doubt at a kill, {} of them applied; \
             {} recoveries of a WAL left by a kill ({} committed frames in all, largest WAL {} bytes, \
             slowest {} ms); \
             {} kills during start-up; integrity_check ok after every kill",
            self.cycles,
            self.fsync,
            started.elapsed().as_secs_f64(),
            total.acked,
            total.big_acked,
            total.multi_acked,
            total.in_doubt,
            total.in_doubt_applied,
            recoveries,
            frames_recovered,
            max_wal,
            max_recovery_ms,
            startup_kills,
        );
        assert!(total.acked > 0, "no write was acknowledged");
        assert!(recoveries > 0, "no kill left a WAL to recover");
        assert!(frames_recovered > 0, "no recovery found a committed frame");
    }
}

#[test]
fn acknowledged_writes_survive_sigkill_at_random_moments() {
    Run::from_env(CI_CYCLES).go();
}

/// A stream entry ID, as its two halves (ordered as the server orders
/// them).
type Sid = (u64, u64);

fn sid(text: &str) -> Sid {
    let (ms, seq) = text.split_once('-').expect("an ID is ms-seq");
    (
        ms.parse().expect("ms of an ID"),
        seq.parse().expect("seq of an ID"),
    )
}

fn sid_text(id: Sid) -> String {
    format!("{}-{}", id.0, id.1)
}

/// The producer of the consumer-group scenario: the IDs its XADDs got
/// back, in order, and whether one more was sent without an answer.
#[derive(Default)]
struct Producer {
    produced: Vec<Sid>,
    doubt: bool,
}

/// One consumer-group write sent without an answer when the server died.
#[derive(Debug)]
enum GroupOp {
    /// XREADGROUP ... COUNT count STREAMS s >
    Read { consumer: String, count: usize },
    /// XACK of these IDs.
    Ack(Vec<Sid>),
    /// XCLAIM of these IDs (all pending) to `consumer`, min-idle 0.
    Claim { consumer: String, ids: Vec<Sid> },
}

/// What the consumers have had acknowledged: the group's pending entries
/// list (owner and delivery count per ID) and its last-delivered ID.
#[derive(Default)]
struct Group {
    pending: BTreeMap<Sid, (String, i64)>,
    last_delivered: Sid,
    doubt: Option<GroupOp>,
    reads: u64,
    delivered: u64,
    acks: u64,
    claims: u64,
    in_doubt: u64,
}

const STREAM: &str = "events";
const GROUP: &str = "workers";

impl Producer {
    fn write(&mut self, port: u16) {
        let Ok(mut con) = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .and_then(|c| c.get_connection())
        else {
            return;
        };
        for n in 0u64.. {
            self.doubt = true;
            match redis::cmd("XADD")
                .arg(STREAM)
                .arg("*")
                .arg("n")
                .arg(n)
                .query::<String>(&mut con)
            {
                Ok(id) => {
                    self.produced.push(sid(&id));
                    self.doubt = false;
                }
                Err(e) => return died(e),
            }
        }
    }

    /// Every acknowledged XADD is in the stream, in order, and at most the
    /// one in doubt after them; returns the stream's IDs.
    fn verify(&mut self, con: &mut redis::Connection) -> Vec<Sid> {
        let entries: Vec<(String, Vec<String>)> = redis::cmd("XRANGE")
            .arg(STREAM)
            .arg("-")
            .arg("+")
            .query(con)
            .expect("XRANGE");
        let ids: Vec<Sid> = entries.iter().map(|(id, _)| sid(id)).collect();
        let n = self.produced.len();
        assert!(ids.len() >= n, "{} entries of {n} acknowledged", ids.len());
        assert_eq!(ids[..n], self.produced[..], "the acknowledged entries");
        let extra = ids.len() - n;
        assert!(
            extra <= usize::from(self.doubt),
            "{extra} entries nobody acknowledged (one in doubt: {})",
            self.doubt
        );
        self.produced = ids.clone();
        self.doubt = false;
        ids
    }
}

impl Group {
    fn write(&mut self, port: u16, seed: u64) {
        let mut rng = StdRng::seed_from_u64(seed);
        let Ok(mut con) = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .and_then(|c| c.get_connection())
        else {
            return;
        };
        let consumer = |rng: &mut StdRng| format!("c{}", rng.random_range(0..3));
        loop {
            let roll = rng.random_range(0..100);
            if roll < 50 || self.pending.is_empty() {
                let (who, count) = (consumer(&mut rng), rng.random_range(1..=5usize));
                let mut cmd = redis::cmd("XREADGROUP");
                cmd.arg("GROUP")
                    .arg(GROUP)
                    .arg(&who)
                    .arg("COUNT")
                    .arg(count);
                if rng.random_bool(0.3) {
                    cmd.arg("BLOCK").arg(20);
                }
                cmd.arg("STREAMS").arg(STREAM).arg(">");
                self.doubt = Some(GroupOp::Read {
                    consumer: who.clone(),
                    count,
                });
                type Read = Option<Vec<(String, Vec<(String, Vec<String>)>)>>;
                let got = match cmd.query::<Read>(&mut con) {
                    Ok(got) => got,
                    Err(e) => return died(e),
                };
                self.doubt = None;
                self.reads += 1;
                for (_, entries) in got.unwrap_or_default() {
                    assert!(entries.len() <= count);
                    for (id, _) in entries {
                        let id = sid(&id);
                        assert!(id > self.last_delivered, "{id:?} delivered twice as new");
                        self.pending.insert(id, (who.clone(), 1));
                        self.last_delivered = id;
                        self.delivered += 1;
                    }
                }
                continue;
            }
            let keys: Vec<Sid> = self.pending.keys().copied().collect();
            let mut ids: Vec<Sid> = (0..rng.random_range(1..=3))
                .map(|_| keys[rng.random_range(0..keys.len())])
                .collect();
            ids.sort_unstable();
            ids.dedup();
            let texts: Vec<String> = ids.iter().map(|&id| sid_text(id)).collect();
            if roll < 75 {
                self.doubt = Some(GroupOp::Ack(ids.clone()));
                let n = match redis::cmd("XACK")
                    .arg(STREAM)
                    .arg(GROUP)
                    .arg(&texts)
                    .query::<usize>(&mut con)
                {
                    Ok(n) => n,
                    Err(e) => return died(e),
                };
                self.doubt = None;
                assert_eq!(n, ids.len(), "XACK of pending {ids:?}");
                for id in &ids {
                    self.pending.remove(id);
                }
                self.acks += 1;
            } else {
                let who = consumer(&mut rng);
                self.doubt = Some(GroupOp::Claim {
                    consumer: who.clone(),
                    ids: ids.clone(),
                });
                let got = match redis::cmd("XCLAIM")
                    .arg(STREAM)
                    .arg(GROUP)
                    .arg(&who)
                    .arg(0)
                    .arg(&texts)
                    .query::<Vec<(String, Vec<String>)>>(&mut con)
                {
                    Ok(got) => got,
                    Err(e) => return died(e),
                };
                self.doubt = None;
                let claimed: Vec<Sid> = got.iter().map(|(id, _)| sid(id)).collect();
                assert_eq!(claimed, ids, "XCLAIM of pending entries");
                for id in &ids {
                    let entry = self.pending.get_mut(id).expect("pending");
                    *entry = (who.clone(), entry.1 + 1);
                }
                self.claims += 1;
            }
        }
    }

    /// The server's pending list is exactly the acknowledged one, but for
    /// the one write in doubt, which is there whole or not at all; then the
    /// model takes the server's state (the doubt resolved).
    fn verify(&mut self, con: &mut redis::Connection, ids: &[Sid]) {
        let rows: Vec<(String, String, i64, i64)> = redis::cmd("XPENDING")
            .arg(STREAM)
            .arg(GROUP)
            .arg("-")
            .arg("+")
            .arg(u32::MAX)
            .query(con)
            .expect("XPENDING");
        let found: BTreeMap<Sid, (String, i64)> = rows
            .into_iter()
            .map(|(id, who, _idle, count)| (sid(&id), (who, count)))
            .collect();
        let groups: Vec<Vec<redis::Value>> = redis::cmd("XINFO")
            .arg("GROUPS")
            .arg(STREAM)
            .query(con)
            .expect("XINFO GROUPS");
        let field = groups[0]
            .iter()
            .position(|v| matches!(v, redis::Value::BulkString(b) if b == b"last-delivered-id"))
            .expect("last-delivered-id");
        let redis::Value::BulkString(ld) = &groups[0][field + 1] else {
            panic!("last-delivered-id: {:?}", groups[0][field + 1]);
        };
        let last_delivered = sid(std::str::from_utf8(ld).expect("an ID"));
        for id in found.keys() {
            assert!(ids.contains(id), "{id:?} is pending but not in the stream");
        }
        let doubt = self.doubt.take();
        if doubt.is_some() {
            self.in_doubt += 1;
        }
        let before = &self.pending;
        let unchanged = found == *before && last_delivered == self.last_delivered;
        match &doubt {
            None => assert!(
                unchanged,
                "pending list or last-delivered ID differs: {last_delivered:?} vs {:?}",
                self.last_delivered
            ),
            Some(GroupOp::Read { consumer, count }) if !unchanged => {
                let new: Vec<Sid> = ids
                    .iter()
                    .copied()
                    .filter(|&id| id > self.last_delivered && id <= last_delivered)
                    .collect();
                assert!(
                    !new.is_empty() && new.len() <= *count,
                    "the read in doubt moved the group from {:?} to {last_delivered:?}",
                    self.last_delivered
                );
                let mut expected = before.clone();
                for id in new {
                    expected.insert(id, (consumer.clone(), 1));
                }
                assert_eq!(found, expected, "after the read in doubt {doubt:?}");
            }
            Some(GroupOp::Ack(acked)) if !unchanged => {
                let mut expected = before.clone();
                for id in acked {
                    expected.remove(id);
                }
                assert_eq!(found, expected, "after the XACK in doubt {acked:?}");
                assert_eq!(last_delivered, self.last_delivered);
            }
            Some(GroupOp::Claim { consumer, ids }) if !unchanged => {
                let mut expected = before.clone();
                for id in ids {
                    let entry = expected.get_mut(id).expect("pending");
                    *entry = (consumer.clone(), entry.1 + 1);
                }
                assert_eq!(found, expected, "after the XCLAIM in doubt {ids:?}");
                assert_eq!(last_delivered, self.last_delivered);
            }
            Some(_) => {}
        }
        self.pending = found;
        self.last_delivered = last_delivered;
    }
}

/// XREADGROUP's delivery is durable: a producer XADDs and a consumer
/// side reads with XREADGROUP (some blocked), XACKs and XCLAIMs between
/// three consumers, each write's answer recorded, until SIGKILL. After
/// every restart the stream holds every acknowledged XADD; the group's
/// pending list holds exactly every delivered and unacknowledged entry,
/// with its owner and delivery count (so no count goes backwards), and
/// its last-delivered ID is the last delivery's; the one write in doubt
/// at the kill is there whole or not at all.
#[test]
fn stream_pending_lists_survive_sigkill() {
    let cycles: usize = std::env::var("RESPITE_CRASH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(9);
    let seed: u64 = std::env::var("RESPITE_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("stream crash run: {cycles} cycles, seed {seed} (RESPITE_CRASH_SEED replays it)");
    let mut rng = StdRng::seed_from_u64(seed);
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("data");
    let scratch = tmp.path().join("scratch");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::create_dir_all(&scratch).expect("mkdir");
    let mut producer = Producer::default();
    let mut group = Group::default();
    for cycle in 0..=cycles {
        let fsync = ["always", "everysec", "no"][cycle % 3];
        let mut server = Respited::start_in(&dir, &["--appendfsync", fsync]);
        let mut con = server.client();
        if cycle == 0 {
            let _: () = redis::cmd("XGROUP")
                .arg("CREATE")
                .arg(STREAM)
                .arg(GROUP)
                .arg("$")
                .arg("MKSTREAM")
                .query(&mut con)
                .expect("XGROUP CREATE");
        }
        let ids = producer.verify(&mut con);
        group.verify(&mut con, &ids);
        drop(con);
        if cycle == cycles {
            let status = server.terminate();
            assert!(status.success(), "{status:?}");
            break;
        }
        let port = server.port;
        let seed = rng.random();
        let (mut p, mut g) = (std::mem::take(&mut producer), std::mem::take(&mut group));
        let producing = std::thread::spawn(move || {
            p.write(port);
            p
        });
        let consuming = std::thread::spawn(move || {
            g.write(port, seed);
            g
        });
        std::thread::sleep(Duration::from_millis(rng.random_range(20..600)));
        server.kill();
        producer = producing.join().expect("producer thread");
        group = consuming.join().expect("consumer thread");
        integrity_check(&dir, &scratch);
    }
    eprintln!(
        "stream crash run done: {} entries added, {} XREADGROUPs delivering {}, {} XACKs, \
         {} XCLAIMs acknowledged, {} group writes in doubt at a kill; {} still pending",
        producer.produced.len(),
        group.reads,
        group.delivered,
        group.acks,
        group.claims,
        group.in_doubt,
        group.pending.len()
    );
    assert!(group.delivered > 0 && group.acks > 0 && group.claims > 0);
}

/// The job queue of the crash run: producers LPUSH unique jobs, consumers
/// BRPOP them (most served the moment a push readies the list, in the
/// push's own group, so that respite never writes the job at all: see the
/// engine's `elide.rs`), and one client pipelines pushes and pops of a list
/// of its own within one group.
#[derive(Default)]
struct Queue {
    /// Every job whose LPUSH was acknowledged.
    acked: HashSet<String>,
    /// Jobs sent without an answer when the server died.
    doubt: HashSet<String>,
    /// Every job a consumer received, each once.
    received: HashSet<String>,
    /// BRPOPs sent without an answer when the server died: each may have
    /// taken a job nobody will ever receive.
    pops_in_doubt: usize,
    /// The pipelining client's rounds acknowledged, and whether one more
    /// was sent.
    rounds: u64,
    round_doubt: bool,
}

const JOBS: &str = "jobs";
const OWN_LIST: &str = "own";

impl Queue {
    /// Pushes `p{producer}:{n}` until the server dies; returns what was
    /// acknowledged and what is in doubt.
    fn produce(port: u16, producer: usize, first: u64) -> (Vec<String>, Option<String>) {
        let mut acked = Vec::new();
        let Ok(mut con) = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .and_then(|c| c.get_connection())
        else {
            return (acked, None);
        };
        for n in first.. {
            let job = format!("p{producer}:{n}");
            match redis::cmd("LPUSH")
                .arg(JOBS)
                .arg(&job)
                .query::<i64>(&mut con)
            {
                Ok(len) => {
                    assert!(len >= 1, "LPUSH answered {len}");
                    acked.push(job);
                }
                Err(e) => {
                    died(e);
                    return (acked, Some(job));
                }
            }
        }
        unreachable!()
    }

    /// BRPOPs until the server dies; returns the jobs received and whether
    /// a BRPOP was in doubt.
    fn consume(port: u16) -> (Vec<String>, bool) {
        let mut got = Vec::new();
        let Ok(mut con) = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .and_then(|c| c.get_connection())
        else {
            return (got, false);
        };
        loop {
            match redis::cmd("BRPOP")
                .arg(JOBS)
                .arg(1)
                .query::<Option<(String, String)>>(&mut con)
            {
                Ok(Some((_, job))) => got.push(job),
                Ok(None) => {}
                Err(e) => {
                    died(e);
                    return (got, true);
                }
            }
        }
    }

    /// Rounds of one pipeline on its own list, which holds `r{k}` (the last
    /// round's) or nothing before each: pop that, push two jobs, pop one,
    /// push `r{round}`, pop the other. All but the pop of the old element
    /// happen to a list created in the group.
    fn pipeline(port: u16, first: u64) -> (u64, bool) {
        let Ok(mut con) = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .and_then(|c| c.get_connection())
        else {
            return (0, false);
        };
        let mut done = 0;
        for round in first.. {
            let got: redis::RedisResult<(Option<String>, i64, String, i64, String)> = redis::pipe()
                .cmd("RPOP")
                .arg(OWN_LIST)
                .cmd("LPUSH")
                .arg(OWN_LIST)
                .arg(format!("a{round}"))
                .arg(format!("b{round}"))
                .cmd("RPOP")
                .arg(OWN_LIST)
                .cmd("LPUSH")
                .arg(OWN_LIST)
                .arg(format!("r{round}"))
                .cmd("RPOP")
                .arg(OWN_LIST)
                .query(&mut con);
            match got {
                Ok((old, two, a, two_again, b)) => {
                    let want_old = round.checked_sub(1).map(|k| format!("r{k}"));
                    assert_eq!(old, want_old, "round {round}: the last round's element");
                    assert_eq!((two, two_again), (2, 2), "round {round}: lengths");
                    assert_eq!((a, b), (format!("a{round}"), format!("b{round}")));
                    done += 1;
                }
                Err(e) => {
                    died(e);
                    return (done, true);
                }
            }
        }
        unreachable!()
    }

    /// Checks the queue against what was acknowledged, then settles what
    /// was in doubt to what the server holds.
    fn verify(&mut self, con: &mut redis::Connection) {
        let left: Vec<String> = redis::cmd("LRANGE")
            .arg(JOBS)
            .arg(0)
            .arg(-1)
            .query(con)
            .expect("LRANGE jobs");
        let mut seen = HashSet::new();
        for job in &left {
            assert!(seen.insert(job.clone()), "job {job} queued twice");
            assert!(
                !self.received.contains(job),
                "job {job} was received and is queued again"
            );
            assert!(
                self.acked.contains(job) || self.doubt.contains(job),
                "job {job} was never sent"
            );
        }
        // Each producer's jobs in the queue, newest first.
        let mut last: BTreeMap<String, u64> = BTreeMap::new();
        for job in &left {
            let (p, n) = job.split_once(':').expect("p:n");
            let n: u64 = n.parse().expect("n");
            if let Some(&newer) = last.get(p) {
                assert!(n < newer, "{job} queued after p{p}:{newer}: out of order");
            }
            last.insert(p.to_string(), n);
        }
        for job in self.doubt.drain() {
            if seen.contains(&job) {
                self.acked.insert(job);
            }
        }
        let missing = self
            .acked
            .iter()
            .filter(|j| !seen.contains(*j) && !self.received.contains(*j))
            .count();
        assert!(
            missing <= self.pops_in_doubt,
            "{missing} acknowledged jobs neither queued nor received; {} BRPOPs were in doubt",
            self.pops_in_doubt
        );
        // The pipelining client's list: the last round's element.
        let own: Vec<String> = redis::cmd("LRANGE")
            .arg(OWN_LIST)
            .arg(0)
            .arg(-1)
            .query(con)
            .expect("LRANGE own");
        let doubt_applied = self.round_doubt && own == [format!("r{}", self.rounds)];
        if doubt_applied {
            self.rounds += 1;
        }
        let want: Vec<String> = self
            .rounds
            .checked_sub(1)
            .map(|k| format!("r{k}"))
            .into_iter()
            .collect();
        assert_eq!(own, want, "{} rounds acknowledged", self.rounds);
        self.round_doubt = false;
    }
}

/// A job queue under SIGKILL: after every restart, no acknowledged job is
/// lost (it is queued or was received, but for as many as there were
/// BRPOPs in doubt at the kill), no job is queued twice or again after it
/// was received, each producer's jobs keep their order, and a list pushed
/// and popped within each group holds exactly what the acknowledged
/// rounds left.
#[test]
fn a_job_queue_survives_sigkill() {
    let cycles: usize = std::env::var("RESPITE_CRASH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(9);
    let seed: u64 = std::env::var("RESPITE_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("queue crash run: {cycles} cycles, seed {seed} (RESPITE_CRASH_SEED replays it)");
    let mut rng = StdRng::seed_from_u64(seed);
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("data");
    let scratch = tmp.path().join("scratch");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::create_dir_all(&scratch).expect("mkdir");
    const PRODUCERS: usize = 3;
    const CONSUMERS: usize = 3;
    let mut queue = Queue::default();
    let mut next = [0u64; PRODUCERS];
    for cycle in 0..=cycles {
        let fsync = ["always", "everysec", "no"][cycle % 3];
        let mut server = Respited::start_in(&dir, &["--appendfsync", fsync]);
        let mut con = server.client();
        queue.verify(&mut con);
        drop(con);
        if cycle == cycles {
            let status = server.terminate();
            assert!(status.success(), "{status:?}");
            break;
        }
        let port = server.port;
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let first = next[p];
                std::thread::spawn(move || Queue::produce(port, p, first))
            })
            .collect();
        let consumers: Vec<_> = (0..CONSUMERS)
            .map(|_| std::thread::spawn(move || Queue::consume(port)))
            .collect();
        let first = queue.rounds;
        let piping = std::thread::spawn(move || Queue::pipeline(port, first));
        std::thread::sleep(Duration::from_millis(rng.random_range(20..600)));
        server.kill();
        for (p, t) in producers.into_iter().enumerate() {
            let (acked, doubt) = t.join().expect("producer thread");
            next[p] += acked.len() as u64 + u64::from(doubt.is_some());
            queue.acked.extend(acked);
            queue.doubt.extend(doubt);
        }
        for t in consumers {
            let (got, doubt) = t.join().expect("consumer thread");
            for job in got {
                assert!(
                    queue.received.insert(job.clone()),
                    "job {job} received twice"
                );
            }
            queue.pops_in_doubt += usize::from(doubt);
        }
        let (rounds, doubt) = piping.join().expect("pipelining thread");
        queue.rounds += rounds;
        queue.round_doubt = doubt;
        integrity_check(&dir, &scratch);
    }
    eprintln!(
        "queue crash run done: {} jobs acknowledged, {} received, {} BRPOPs in doubt, \
         {} pipelined rounds",
        queue.acked.len(),
        queue.received.len(),
        queue.pops_in_doubt,
        queue.rounds
    );
    assert!(!queue.received.is_empty() && queue.rounds > 0);
}

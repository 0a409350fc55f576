//! The value cache's promises: a GET answered from memory is never older
//! than a write acknowledged before it, a client's reads never go back in
//! time, a pipelined write is seen by the GET after it, expiry holds, and
//! the cache stays within its budget (or off when told).
//!
//! The differential suite (`cached_reads_follow_every_write`) checks every
//! write command against redis-server with warm cache entries; these tests
//! need no redis-server and attack the races instead.

mod common;

use std::io::Write;
use std::time::Duration;

use common::{encode, exchange, info_field, Respited};

fn get(con: &mut redis::Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(con).expect("GET")
}

#[test]
fn a_cached_value_never_outlives_an_acknowledged_write() {
    let server = Respited::start(&[]);
    let mut writer = server.client();
    let mut reader = server.client();
    for i in 0..1000 {
        let _: () = redis::cmd("SET")
            .arg("k")
            .arg(i)
            .query(&mut writer)
            .unwrap();
        // The first GET may fill the cache, the second is then a hit: both
        // must show the write acknowledged just before.
        assert_eq!(get(&mut reader, "k"), Some(i.to_string()));
        assert_eq!(get(&mut reader, "k"), Some(i.to_string()));
    }
    let hits = info_field(&mut reader, "stats", "read_cache_hits");
    assert!(hits >= 500.0, "the cache answered only {hits} GETs");
}

#[test]
fn a_key_read_and_rewritten_stays_cached_with_its_new_value() {
    let server = Respited::start(&[]);
    let mut writer = server.client();
    let mut reader = server.client();
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query(&mut writer)
        .unwrap();
    let _: i64 = redis::cmd("INCR").arg("n").query(&mut writer).unwrap();
    // Read once each, so both are cached.
    assert_eq!(get(&mut reader, "k"), Some("v".into()));
    assert_eq!(get(&mut reader, "n"), Some("1".into()));
    let misses = info_field(&mut reader, "stats", "read_cache_misses");
    for i in 0..100 {
        let _: () = redis::cmd("SET")
            .arg("k")
            .arg(i)
            .query(&mut writer)
            .unwrap();
        let n: i64 = redis::cmd("INCR").arg("n").query(&mut writer).unwrap();
        assert_eq!(get(&mut reader, "k"), Some(i.to_string()));
        assert_eq!(get(&mut reader, "n"), Some(n.to_string()));
    }
    // The commits put the new values in the cache: no GET had to go to
    // the read pool.
    assert_eq!(
        info_field(&mut reader, "stats", "read_cache_misses"),
        misses
    );
    // A change whose result the writer does not hand to the cache (APPEND)
    // drops the key instead; the next GET reads it from SQLite.
    let _: i64 = redis::cmd("APPEND")
        .arg("k")
        .arg("x")
        .query(&mut writer)
        .unwrap();
    assert_eq!(get(&mut reader, "k"), Some("99x".into()));
    assert_eq!(
        info_field(&mut reader, "stats", "read_cache_misses"),
        misses + 1.0
    );
    // The expiry a SET gives is the cached one's too.
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("brief")
        .arg("PX")
        .arg(300)
        .query(&mut writer)
        .unwrap();
    assert_eq!(get(&mut reader, "k"), Some("brief".into()));
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(get(&mut reader, "k"), None);
}

/// Sets `a` and `b` to 0 and reads them, so both are cached.
fn cache_a_and_b(con: &mut redis::Connection) {
    let _: () = redis::cmd("MSET")
        .arg(&["a", "0", "b", "0"])
        .query(con)
        .unwrap();
    assert_eq!(get(con, "a"), Some("0".into()));
    assert_eq!(get(con, "b"), Some("0".into()));
}

/// Writes `a` and `b` together (MSET a i b i), 600 times: no reader may
/// ever see them differ.
fn mset_a_and_b(port: u16) {
    let mut con = common::client_for(port);
    for i in 1..=600 {
        let _: () = redis::cmd("MSET")
            .arg("a")
            .arg(i)
            .arg("b")
            .arg(i)
            .query(&mut con)
            .unwrap();
    }
}

#[test]
fn mget_is_answered_from_the_cache_only_whole_and_never_torn() {
    let server = Respited::start(&[]);
    let mut con = server.client();
    cache_a_and_b(&mut con);
    let hits = info_field(&mut con, "stats", "read_cache_hits");
    let both: Vec<Option<String>> = redis::cmd("MGET").arg(&["a", "b"]).query(&mut con).unwrap();
    assert_eq!(both, vec![Some("0".into()), Some("0".into())]);
    assert_eq!(info_field(&mut con, "stats", "read_cache_hits"), hits + 2.0);
    // A key the cache does not hold sends the whole MGET to the pool.
    let some: Vec<Option<String>> = redis::cmd("MGET")
        .arg(&["a", "nosuch"])
        .query(&mut con)
        .unwrap();
    assert_eq!(some, vec![Some("0".into()), None]);
    assert_eq!(info_field(&mut con, "stats", "read_cache_hits"), hits + 2.0);
    // MSET writes both keys at once; MGET must never see one new and one
    // old, whether it is answered by the cache or by the pool.
    let read = |con: &mut redis::Connection, last: &mut i64| {
        let (a, b): (i64, i64) = redis::cmd("MGET").arg(&["a", "b"]).query(con).unwrap();
        assert_eq!(a, b, "MGET saw a torn MSET");
        assert!(a >= *last, "read {a} after {last}");
        *last = a;
    };
    common::race(server.port, 1, mset_a_and_b, 3, read);
    let hits_after = info_field(&mut con, "stats", "read_cache_hits");
    assert!(
        hits_after > hits + 2.0,
        "no MGET was answered from the cache"
    );
}

#[test]
fn a_pipeline_never_sees_a_key_go_back_in_time() {
    // Found in review: a cache hit answered at once, after a read still to
    // run on the read pool, showed an older state than the read before it.
    let server = Respited::start(&[]);
    let mut con = server.client();
    cache_a_and_b(&mut con);
    let read = |con: &mut redis::Connection, last: &mut i64| {
        // `nosuch` sends the first MGET to the pool; the second could be a
        // cache hit; then a plain GET.
        let (first, second, third): ((i64, Option<i64>), (i64, i64), i64) = redis::pipe()
            .cmd("MGET")
            .arg(&["b", "nosuch"])
            .cmd("MGET")
            .arg(&["a", "b"])
            .cmd("GET")
            .arg("a")
            .query(con)
            .unwrap();
        let seen = [*last, first.0, second.0, second.1, third];
        assert!(
            seen.windows(2).all(|w| w[0] <= w[1]),
            "went back in time: {seen:?} (last, b, a, b, a)"
        );
        *last = third;
    };
    common::race(server.port, 1, mset_a_and_b, 3, read);
}

#[test]
fn reads_never_go_back_in_time_under_concurrent_writes() {
    let server = Respited::start(&[]);
    const WRITERS: usize = 4;
    const PER_WRITER: usize = 300;
    let write = |port| {
        let mut con = common::client_for(port);
        let mut other = common::client_for(port);
        for _ in 0..PER_WRITER {
            let n: i64 = redis::cmd("INCR").arg("n").query(&mut con).unwrap();
            // Acknowledged, so any client reading now sees at least this
            // value.
            let seen: i64 = redis::cmd("GET").arg("n").query(&mut other).unwrap();
            assert!(seen >= n, "GET returned {seen} after INCR returned {n}");
        }
    };
    let read = |con: &mut redis::Connection, last: &mut i64| {
        let v: Option<i64> = redis::cmd("GET").arg("n").query(con).unwrap();
        let v = v.unwrap_or(0);
        assert!(v >= *last, "read {v} after {last}");
        *last = v;
    };
    common::race(server.port, WRITERS, write, 3, read);
    let mut con = server.client();
    assert_eq!(get(&mut con, "n"), Some((WRITERS * PER_WRITER).to_string()));
}

#[test]
fn a_pipelined_write_is_seen_by_the_get_after_it() {
    let server = Respited::start(&[]);
    let mut raw = server.raw();
    assert_eq!(
        exchange(&mut raw, &encode(&["SET", "k", "old"]), 5),
        b"+OK\r\n"
    );
    // A GET in its own turn fills the cache; the next ones are hits.
    for _ in 0..3 {
        let reply = exchange(&mut raw, &encode(&["GET", "k"]), 9);
        assert_eq!(reply, b"$3\r\nold\r\n");
    }
    let mut con = server.client();
    assert!(info_field(&mut con, "stats", "read_cache_hits") >= 1.0);
    // One write to the socket: the GET must not be answered from the
    // cache entry the SET is about to replace.
    let mut pipeline = encode(&["SET", "k", "new"]);
    pipeline.extend(encode(&["GET", "k"]));
    pipeline.extend(encode(&["APPEND", "k", "er"]));
    pipeline.extend(encode(&["GET", "k"]));
    raw.write_all(&pipeline).unwrap();
    let reply = exchange(&mut raw, b"", 5 + 9 + 4 + 11);
    assert_eq!(reply, b"+OK\r\n$3\r\nnew\r\n:5\r\n$5\r\nnewer\r\n");
}

#[test]
fn cached_values_expire_on_time() {
    let server = Respited::start(&[]);
    let mut con = server.client();
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .arg("PX")
        .arg(300)
        .query(&mut con)
        .unwrap();
    assert_eq!(get(&mut con, "k"), Some("v".into()));
    assert_eq!(get(&mut con, "k"), Some("v".into()));
    assert!(info_field(&mut con, "stats", "read_cache_hits") >= 1.0);
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(get(&mut con, "k"), None);
    assert_eq!(get(&mut con, "k"), None);
}

#[test]
fn the_cache_stays_within_its_budget() {
    // 1 MiB in all: values over 8 KiB are never cached.
    let server = Respited::start(&["--read-cache-bytes", "1048576"]);
    let mut con = server.client();
    let big = "x".repeat(20_000);
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg(&big)
        .query(&mut con)
        .unwrap();
    assert_eq!(get(&mut con, "big").as_deref(), Some(big.as_str()));
    assert_eq!(get(&mut con, "big").as_deref(), Some(big.as_str()));
    assert_eq!(info_field(&mut con, "stats", "read_cache_entries"), 0.0);
    let value = "v".repeat(1000);
    for i in 0..3000 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(&value)
            .query(&mut con)
            .unwrap();
    }
    for i in 0..3000 {
        assert_eq!(
            get(&mut con, &format!("k{i}")).as_deref(),
            Some(value.as_str())
        );
    }
    let used = info_field(&mut con, "stats", "read_cache_used_bytes");
    let max = info_field(&mut con, "stats", "read_cache_max_bytes");
    let entries = info_field(&mut con, "stats", "read_cache_entries");
    assert_eq!(max, 1048576.0);
    assert!(used <= max, "cache holds {used} bytes, budget {max}");
    assert!(entries > 100.0 && entries < 3000.0, "{entries} entries");
}

#[test]
fn the_cache_can_be_turned_off() {
    let server = Respited::start(&["--read-cache-bytes", "0"]);
    let mut con = server.client();
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut con).unwrap();
    for _ in 0..10 {
        assert_eq!(get(&mut con, "k"), Some("v".into()));
    }
    assert_eq!(info_field(&mut con, "stats", "read_cache_hits"), 0.0);
    assert_eq!(info_field(&mut con, "stats", "read_cache_max_bytes"), 0.0);
    let value: String = redis::cmd("CONFIG")
        .arg("GET")
        .arg("read-cache-bytes")
        .query::<Vec<String>>(&mut con)
        .unwrap()
        .pop()
        .unwrap();
    assert_eq!(value, "0");
}

#[test]
fn config_resetstat_zeroes_cache_and_group_commit_figures() {
    let server = Respited::start(&[]);
    let mut con = server.client();
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut con).unwrap();
    for _ in 0..3 {
        assert_eq!(get(&mut con, "k"), Some("v".into()));
    }
    assert!(info_field(&mut con, "stats", "read_cache_hits") >= 1.0);
    assert!(info_field(&mut con, "persistence", "group_commit_batches") >= 1.0);
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut con)
        .unwrap();
    assert_eq!(info_field(&mut con, "stats", "read_cache_hits"), 0.0);
    assert_eq!(info_field(&mut con, "stats", "read_cache_misses"), 0.0);
    assert_eq!(
        info_field(&mut con, "persistence", "group_commit_batches"),
        0.0
    );
    assert_eq!(info_field(&mut con, "persistence", "group_commit_ops"), 0.0);
    // The cached value itself stays.
    assert_eq!(get(&mut con, "k"), Some("v".into()));
    assert_eq!(info_field(&mut con, "stats", "read_cache_hits"), 1.0);
}

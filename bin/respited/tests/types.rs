//! Hashes and sets against a real respited: what the differential suite
//! cannot compare byte for byte (random picks, judged by their properties),
//! and what it cannot see (the cache, WATCH and expiry on the new types, the
//! chunked freeing of a big key's elements, keys that are renamed without
//! touching their elements, and a file of the old layout being migrated).

mod common;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::{Duration, Instant};

use common::{encode, exchange, Respited};

fn cmd(con: &mut redis::Connection, args: &[&str]) -> redis::Value {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(con).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn int(con: &mut redis::Connection, args: &[&str]) -> i64 {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(con).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn strings(con: &mut redis::Connection, args: &[&str]) -> Vec<String> {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(con).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Opens the server's database file read-only, to look at what the
/// protocol cannot show (element rows).
fn open_db(server: &Respited) -> rusqlite::Connection {
    let path = server.dir.join("respite.db");
    rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .expect("open the database file")
}

fn count(db: &rusqlite::Connection, sql: &str) -> i64 {
    db.query_row(sql, [], |r| r.get(0)).expect(sql)
}

#[test]
fn random_picks_have_the_promised_properties() {
    let server = Respited::start(&[]);
    let mut con = server.client();
    let members: Vec<String> = (0..20).map(|i| format!("m{i}")).collect();
    let mut sadd = vec!["SADD", "s"];
    sadd.extend(members.iter().map(String::as_str));
    assert_eq!(int(&mut con, &sadd), 20);
    let all: HashSet<String> = members.iter().cloned().collect();
    for _ in 0..50 {
        let picked = strings(&mut con, &["SRANDMEMBER", "s", "7"]);
        assert_eq!(picked.len(), 7);
        assert_eq!(picked.iter().collect::<HashSet<_>>().len(), 7, "distinct");
        assert!(picked.iter().all(|m| all.contains(m)));
        let repeated = strings(&mut con, &["SRANDMEMBER", "s", "-40"]);
        assert_eq!(repeated.len(), 40);
        assert!(repeated.iter().all(|m| all.contains(m)));
    }
    let whole = strings(&mut con, &["SRANDMEMBER", "s", "100"]);
    assert_eq!(whole.into_iter().collect::<HashSet<_>>(), all);
    // Over many single picks every member shows up: the pick is uniform
    // enough not to favour one end of the member order.
    let mut seen = HashSet::new();
    for _ in 0..400 {
        let one: String = redis::cmd("SRANDMEMBER").arg("s").query(&mut con).unwrap();
        seen.insert(one);
    }
    assert_eq!(seen, all);

    // SPOP removes exactly what it returns.
    let popped = strings(&mut con, &["SPOP", "s", "5"]);
    assert_eq!(popped.iter().collect::<HashSet<_>>().len(), 5);
    assert_eq!(int(&mut con, &["SCARD", "s"]), 15);
    for m in &popped {
        assert_eq!(int(&mut con, &["SISMEMBER", "s", m]), 0);
    }
    let rest = strings(&mut con, &["SPOP", "s", "100"]);
    assert_eq!(rest.len(), 15);
    assert_eq!(
        int(&mut con, &["EXISTS", "s"]),
        0,
        "the set went with its last member"
    );

    let mut hset = vec!["HSET".to_string(), "h".to_string()];
    for i in 0..10 {
        hset.extend([format!("f{i}"), format!("v{i}")]);
    }
    let hset: Vec<&str> = hset.iter().map(String::as_str).collect();
    assert_eq!(int(&mut con, &hset), 10);
    for _ in 0..30 {
        let pairs = strings(&mut con, &["HRANDFIELD", "h", "4", "WITHVALUES"]);
        assert_eq!(pairs.len(), 8);
        let fields: HashSet<&String> = pairs.iter().step_by(2).collect();
        assert_eq!(fields.len(), 4, "distinct fields");
        for p in pairs.chunks(2) {
            assert_eq!(
                p[1],
                format!("v{}", &p[0][1..]),
                "a field comes with its own value"
            );
        }
        let repeated = strings(&mut con, &["HRANDFIELD", "h", "-15", "WITHVALUES"]);
        assert_eq!(repeated.len(), 30);
        for p in repeated.chunks(2) {
            assert_eq!(p[1], format!("v{}", &p[0][1..]));
        }
    }
}

#[test]
fn a_watched_hash_changed_by_hset_fails_exec() {
    let server = Respited::start(&[]);
    let mut a = server.client();
    let mut b = server.client();
    cmd(&mut a, &["HSET", "h", "f", "1"]);
    cmd(&mut a, &["WATCH", "h"]);
    cmd(&mut b, &["HSET", "h", "f", "2"]);
    cmd(&mut a, &["MULTI"]);
    cmd(&mut a, &["HGET", "h", "f"]);
    let exec = cmd(&mut a, &["EXEC"]);
    assert_eq!(exec, redis::Value::Nil, "EXEC after a watched hash changed");

    // A write that changes nothing (HDEL of a missing field, SREM of a
    // missing member) does not break the watch; one that does, does.
    cmd(&mut a, &["SADD", "s", "x"]);
    cmd(&mut a, &["WATCH", "h", "s"]);
    cmd(&mut b, &["HDEL", "h", "nosuch"]);
    cmd(&mut b, &["SREM", "s", "nosuch"]);
    cmd(&mut a, &["MULTI"]);
    cmd(&mut a, &["SCARD", "s"]);
    let exec = cmd(&mut a, &["EXEC"]);
    assert_eq!(exec, redis::Value::Array(vec![redis::Value::Int(1)]));
    cmd(&mut a, &["WATCH", "s"]);
    cmd(&mut b, &["SREM", "s", "x"]);
    cmd(&mut a, &["MULTI"]);
    cmd(&mut a, &["SCARD", "s"]);
    assert_eq!(
        cmd(&mut a, &["EXEC"]),
        redis::Value::Nil,
        "the last member removed"
    );
}

#[test]
fn an_expired_set_or_hash_is_invisible() {
    let server = Respited::start(&[]);
    let mut con = server.client();
    cmd(&mut con, &["SADD", "s", "a", "b"]);
    cmd(&mut con, &["HSET", "h", "f", "v"]);
    cmd(&mut con, &["PEXPIRE", "s", "30"]);
    cmd(&mut con, &["PEXPIRE", "h", "30"]);
    std::thread::sleep(Duration::from_millis(60));
    assert_eq!(int(&mut con, &["SISMEMBER", "s", "a"]), 0);
    assert_eq!(int(&mut con, &["SCARD", "s"]), 0);
    assert_eq!(int(&mut con, &["HLEN", "h"]), 0);
    assert_eq!(cmd(&mut con, &["HGET", "h", "f"]), redis::Value::Nil);
    assert_eq!(int(&mut con, &["EXISTS", "s", "h"]), 0);
    // A write to an expired key starts a fresh one, without the old
    // members or TTL.
    assert_eq!(int(&mut con, &["SADD", "s", "c"]), 1);
    assert_eq!(strings(&mut con, &["SMEMBERS", "s"]), vec!["c"]);
    assert_eq!(int(&mut con, &["TTL", "s"]), -1);
    // A string cached before it expired is not served either.
    cmd(&mut con, &["SET", "str", "v", "PX", "30"]);
    let _: Option<String> = redis::cmd("GET").arg("str").query(&mut con).unwrap();
    std::thread::sleep(Duration::from_millis(60));
    let got: Option<String> = redis::cmd("GET").arg("str").query(&mut con).unwrap();
    assert_eq!(got, None);
}

#[test]
fn nothing_stale_comes_from_the_value_cache_when_a_string_becomes_a_hash() {
    let server = Respited::start(&[]);
    let mut con = server.client();
    let mut other = server.client();
    for round in 0..50 {
        cmd(&mut con, &["SET", "k", "v"]);
        // Read twice: the second GET is answered from the cache.
        for _ in 0..2 {
            let v: Option<String> = redis::cmd("GET").arg("k").query(&mut con).unwrap();
            assert_eq!(v.as_deref(), Some("v"));
        }
        // DEL and HSET in one pipeline, then GET in the same pipeline.
        let mut raw = server.raw();
        raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut request = encode(&["DEL", "k"]);
        request.extend(encode(&["HSET", "k", "f", "v"]));
        request.extend(encode(&["GET", "k"]));
        let wrongtype = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
        let expected = format!(":1\r\n:1\r\n{wrongtype}");
        let got = exchange(&mut raw, &request, expected.len());
        assert_eq!(String::from_utf8_lossy(&got), expected, "round {round}");
        // And on another connection, twice (a hit would be the second).
        for _ in 0..2 {
            let err = redis::cmd("GET")
                .arg("k")
                .query::<Option<String>>(&mut other)
                .expect_err("GET of a hash");
            assert!(err.to_string().contains("WRONGTYPE"), "{err}");
        }
        // Back to a string: the hash's fields are gone.
        cmd(&mut con, &["SET", "k", "w"]);
        let v: Option<String> = redis::cmd("GET").arg("k").query(&mut other).unwrap();
        assert_eq!(v.as_deref(), Some("w"));
        cmd(&mut con, &["DEL", "k"]);
        assert_eq!(int(&mut con, &["HLEN", "k"]), 0);
    }
}

/// Fills `key` with `n` fields (`00000-field`...), 1000 per HSET.
fn big_hash(con: &mut redis::Connection, key: &str, n: usize) {
    for start in (0..n).step_by(1000) {
        let mut c = redis::cmd("HSET");
        c.arg(key);
        for i in start..(start + 1000).min(n) {
            c.arg(format!("{i:05}-field")).arg(i);
        }
        let _: i64 = c.query(con).unwrap();
    }
}

#[test]
fn a_big_key_is_gone_at_once_and_its_elements_are_freed_in_chunks() {
    let server = Respited::start(&[]);
    let mut con = server.client();
    let n = 60_000;
    big_hash(&mut con, "big", n);
    assert_eq!(int(&mut con, &["HLEN", "big"]), n as i64);
    let db = open_db(&server);
    assert_eq!(count(&db, "SELECT count(*) FROM hashes"), n as i64);

    assert_eq!(int(&mut con, &["DEL", "big"]), 1);
    // Gone for every client the moment DEL is answered.
    let mut other = server.client();
    assert_eq!(int(&mut other, &["EXISTS", "big"]), 0);
    assert_eq!(int(&mut other, &["HLEN", "big"]), 0);
    assert_eq!(
        cmd(&mut other, &["HGET", "big", "00001-field"]),
        redis::Value::Nil
    );
    // A new key of the same name starts empty.
    assert_eq!(int(&mut other, &["HSET", "big", "x", "y"]), 1);
    assert_eq!(int(&mut other, &["HLEN", "big"]), 1);

    // The old elements go away within a few housekeeping passes.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = count(&db, "SELECT count(*) FROM hashes");
        let queued = count(&db, "SELECT count(*) FROM dropped");
        if left == 1 && queued == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{left} element rows, {queued} dropped keys still there"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(int(&mut con, &["HLEN", "big"]), 1);
}

#[test]
fn rename_and_move_keep_the_elements_where_they_are() {
    let server = Respited::start(&[]);
    let mut con = server.client();
    big_hash(&mut con, "h", 3000);
    let db = open_db(&server);
    let id_of = |db: &rusqlite::Connection, d: i64, key: &str| -> i64 {
        db.query_row(
            "SELECT id FROM keys WHERE db = ?1 AND key = ?2",
            rusqlite::params![d, key.as_bytes()],
            |r| r.get(0),
        )
        .expect("key row")
    };
    let id = id_of(&db, 0, "h");
    cmd(&mut con, &["RENAME", "h", "h2"]);
    assert_eq!(id_of(&db, 0, "h2"), id, "the same id under the new name");
    cmd(&mut con, &["MOVE", "h2", "3"]);
    assert_eq!(id_of(&db, 3, "h2"), id);
    assert_eq!(
        count(&db, &format!("SELECT count(*) FROM hashes WHERE id = {id}")),
        3000
    );
    cmd(&mut con, &["SELECT", "3"]);
    assert_eq!(int(&mut con, &["HLEN", "h2"]), 3000);
    let v: String = redis::cmd("HGET")
        .arg("h2")
        .arg("02999-field")
        .query(&mut con)
        .unwrap();
    assert_eq!(v, "2999");
    // COPY gets its own elements: changing the copy leaves the original.
    cmd(&mut con, &["COPY", "h2", "h3"]);
    cmd(&mut con, &["HDEL", "h3", "00000-field"]);
    assert_eq!(int(&mut con, &["HLEN", "h2"]), 3000);
    assert_eq!(int(&mut con, &["HLEN", "h3"]), 2999);
}

#[test]
fn scans_of_a_big_hash_and_set_return_everything_from_any_cursor() {
    let server = Respited::start(&[]);
    let mut con = server.client();
    big_hash(&mut con, "h", 2000);
    let mut sadd = redis::cmd("SADD");
    sadd.arg("s");
    for i in 0..1500 {
        sadd.arg(format!("{i}-member"));
    }
    let _: i64 = sadd.query(&mut con).unwrap();
    for (command, key, expected) in [("HSCAN", "h", 2000usize), ("SSCAN", "s", 1500)] {
        let mut cursor = "0".to_string();
        let mut seen = HashMap::new();
        let mut calls = 0;
        loop {
            let (next, items): (String, Vec<String>) = redis::cmd(command)
                .arg(key)
                .arg(&cursor)
                .arg("COUNT")
                .arg(100)
                .query(&mut con)
                .unwrap();
            calls += 1;
            let step = if command == "HSCAN" { 2 } else { 1 };
            for item in items.iter().step_by(step) {
                *seen.entry(item.clone()).or_insert(0) += 1;
            }
            cursor = next;
            if cursor == "0" {
                break;
            }
        }
        assert_eq!(seen.len(), expected, "{command}");
        assert!(
            seen.values().all(|&n| n == 1),
            "{command}: each element once"
        );
        assert!(calls > 5, "{command} paged ({calls} calls)");
    }
    // Any number is a cursor: it never errors, and a scan resumed from it
    // finishes.
    for cursor in ["1", "12345", "18446744073709551615", "72057594037927936"] {
        let (_, _items): (String, Vec<String>) = redis::cmd("HSCAN")
            .arg("h")
            .arg(cursor)
            .query(&mut con)
            .unwrap();
        let (_, _keys): (String, Vec<String>) =
            redis::cmd("SCAN").arg(cursor).query(&mut con).unwrap();
    }
}

/// The layout before key ids: `keys` without `id` and `count`, element
/// tables keyed by `(db, key)`, no `user_version`.
fn write_old_layout(path: &Path) {
    let db = rusqlite::Connection::open(path).unwrap();
    db.execute_batch(
        "PRAGMA journal_mode=WAL;
         CREATE TABLE keys (db INTEGER NOT NULL, key BLOB NOT NULL, type INTEGER NOT NULL,
             value BLOB, expire_at INTEGER, PRIMARY KEY (db, key)) WITHOUT ROWID;
         CREATE INDEX keys_by_expiry ON keys (expire_at) WHERE expire_at IS NOT NULL;
         CREATE TABLE hashes (db INTEGER NOT NULL, key BLOB NOT NULL, field BLOB NOT NULL,
             value BLOB NOT NULL, PRIMARY KEY (db, key, field)) WITHOUT ROWID;
         CREATE TABLE lists (db INTEGER NOT NULL, key BLOB NOT NULL, pos INTEGER NOT NULL,
             value BLOB NOT NULL, PRIMARY KEY (db, key, pos)) WITHOUT ROWID;
         CREATE TABLE sets (db INTEGER NOT NULL, key BLOB NOT NULL, member BLOB NOT NULL,
             PRIMARY KEY (db, key, member)) WITHOUT ROWID;
         CREATE TABLE zsets (db INTEGER NOT NULL, key BLOB NOT NULL, member BLOB NOT NULL,
             score REAL NOT NULL, PRIMARY KEY (db, key, member)) WITHOUT ROWID;
         INSERT INTO keys VALUES (0, CAST('old' AS BLOB), 0, CAST('value' AS BLOB), NULL);
         INSERT INTO keys VALUES (2, CAST('other' AS BLOB), 0, CAST('42' AS BLOB), 4102444800000);",
    )
    .unwrap();
}

#[test]
fn a_file_of_the_old_layout_is_migrated_when_opened() {
    let dir = tempfile::tempdir().unwrap();
    write_old_layout(&dir.path().join("respite.db"));
    let mut server = Respited::start_in(dir.path(), &[]);
    let mut con = server.client();
    let v: String = redis::cmd("GET").arg("old").query(&mut con).unwrap();
    assert_eq!(v, "value");
    cmd(&mut con, &["SELECT", "2"]);
    assert_eq!(int(&mut con, &["EXPIRETIME", "other"]), 4102444800);
    assert_eq!(int(&mut con, &["HSET", "h", "f", "v"]), 1);
    assert_eq!(int(&mut con, &["SADD", "s", "m"]), 1);
    let migrated = server
        .startup_log
        .iter()
        .any(|line| line.contains("migrated the database file"));
    assert!(
        migrated,
        "the migration is logged: {:?}",
        server.startup_log
    );
    server.terminate();
    // Opened again, the file is of the current layout and keeps its data.
    let server = Respited::start_in(dir.path(), &[]);
    let mut con = server.client();
    cmd(&mut con, &["SELECT", "2"]);
    let v: String = redis::cmd("HGET")
        .arg("h")
        .arg("f")
        .query(&mut con)
        .unwrap();
    assert_eq!(v, "v");
    let db = open_db(&server);
    assert_eq!(
        count(&db, "PRAGMA user_version"),
        respite_engine::schema::VERSION
    );
}

#[test]
fn a_type_code_this_build_does_not_know_is_an_error_not_a_string() {
    let server = Respited::start(&[]);
    let mut con = server.client();
    cmd(&mut con, &["SET", "k", "v"]);
    drop(con);
    let mut server = server;
    server.terminate();
    {
        let db = rusqlite::Connection::open(server.dir.join("respite.db")).unwrap();
        let n = db
            .execute(
                "UPDATE keys SET type = 99 WHERE key = CAST('k' AS BLOB)",
                [],
            )
            .unwrap();
        assert_eq!(n, 1);
    }
    let server = Respited::start_in(&server.dir.clone(), &[]);
    let mut con = server.client();
    for args in [
        &["GET", "k"][..],
        &["TYPE", "k"],
        &["HGET", "k", "f"],
        &["SADD", "k", "m"],
    ] {
        let mut c = redis::cmd(args[0]);
        for a in &args[1..] {
            c.arg(*a);
        }
        let err = c.query::<redis::Value>(&mut con).expect_err("unknown type");
        assert!(err.to_string().contains("does not know"), "{args:?}: {err}");
    }
}

/// Sorted sets: ZRANDMEMBER's picks have the promised properties and are
/// spread over the whole set; OBJECT ENCODING turns from listpack to
/// skiplist at redis-server's thresholds (129 members, a member over 64
/// bytes) and never back; a big set's rank blocks are in the file, count
/// exactly its members, and ZRANK/ZRANGE by rank agree with the order.
#[test]
fn zsets_random_picks_encodings_and_rank_blocks() {
    let server = Respited::start(&[]);
    let mut con = server.client();
    let mut zadd = vec!["ZADD".to_string(), "z".to_string()];
    for i in 0..20 {
        zadd.extend([i.to_string(), format!("m{i}")]);
    }
    let zadd: Vec<&str> = zadd.iter().map(String::as_str).collect();
    assert_eq!(int(&mut con, &zadd), 20);
    let all: HashSet<String> = (0..20).map(|i| format!("m{i}")).collect();
    for _ in 0..50 {
        let picked = strings(&mut con, &["ZRANDMEMBER", "z", "7", "WITHSCORES"]);
        assert_eq!(picked.len(), 14);
        let members: HashSet<&String> = picked.iter().step_by(2).collect();
        assert_eq!(members.len(), 7, "distinct");
        for p in picked.chunks(2) {
            assert!(all.contains(&p[0]));
            assert_eq!(p[1], p[0][1..], "a member comes with its own score");
        }
        let repeated = strings(&mut con, &["ZRANDMEMBER", "z", "-40"]);
        assert_eq!(repeated.len(), 40);
        assert!(repeated.iter().all(|m| all.contains(m)));
    }
    // Single picks: every member shows up, and neither end of the order
    // is favoured (20 members, 2,000 picks: each about 100 times).
    let mut seen: HashMap<String, u32> = HashMap::new();
    for _ in 0..2_000 {
        let one: String = redis::cmd("ZRANDMEMBER").arg("z").query(&mut con).unwrap();
        *seen.entry(one).or_default() += 1;
    }
    assert_eq!(seen.keys().cloned().collect::<HashSet<_>>(), all);
    assert!(seen.values().all(|&n| (40..=200).contains(&n)), "{seen:?}");

    // Encodings.
    let encoding = |con: &mut redis::Connection, key: &str| -> String {
        redis::cmd("OBJECT")
            .arg("ENCODING")
            .arg(key)
            .query(con)
            .unwrap()
    };
    let mut zadd = vec!["ZADD".to_string(), "e".to_string()];
    for i in 0..128 {
        zadd.extend(["1".to_string(), format!("m{i:03}")]);
    }
    let zadd: Vec<&str> = zadd.iter().map(String::as_str).collect();
    assert_eq!(int(&mut con, &zadd), 128);
    assert_eq!(encoding(&mut con, "e"), "listpack");
    cmd(&mut con, &["ZADD", "e", "1", "m128"]);
    assert_eq!(encoding(&mut con, "e"), "skiplist");
    cmd(&mut con, &["ZREM", "e", "m128", "m127", "m126"]);
    assert_eq!(encoding(&mut con, "e"), "skiplist", "never goes back");
    let long = "x".repeat(65);
    cmd(&mut con, &["ZADD", "l", "1", &long[..64]]);
    assert_eq!(encoding(&mut con, "l"), "listpack");
    cmd(&mut con, &["ZADD", "l", "2", &long]);
    assert_eq!(encoding(&mut con, "l"), "skiplist");

    // A set big enough for rank blocks.
    let n = 5_000;
    for chunk in (0..n).collect::<Vec<_>>().chunks(1_000) {
        let mut zadd = vec!["ZADD".to_string(), "big".to_string()];
        for i in chunk {
            zadd.extend([((i * 7919) % 1_000).to_string(), format!("m{i:05}")]);
        }
        let zadd: Vec<&str> = zadd.iter().map(String::as_str).collect();
        int(&mut con, &zadd);
    }
    assert_eq!(int(&mut con, &["ZCARD", "big"]), n);
    let db = open_db(&server);
    assert!(count(&db, "SELECT count(*) FROM zblocks") >= 3);
    assert_eq!(count(&db, "SELECT sum(count) FROM zblocks"), n);
    let ordered = strings(&mut con, &["ZRANGE", "big", "0", "-1"]);
    assert_eq!(ordered.len() as i64, n);
    for i in (0..n as usize).step_by(251) {
        assert_eq!(int(&mut con, &["ZRANK", "big", &ordered[i]]), i as i64);
        assert_eq!(
            int(&mut con, &["ZREVRANK", "big", &ordered[i]]),
            n - 1 - i as i64
        );
        let at = strings(&mut con, &["ZRANGE", "big", &i.to_string(), &i.to_string()]);
        assert_eq!(at, vec![ordered[i].clone()]);
    }
    // A copy gets its own blocks.
    assert_eq!(int(&mut con, &["COPY", "big", "copy"]), 1);
    let copy_id = count(&db, "SELECT id FROM keys WHERE key = CAST('copy' AS BLOB)");
    assert_eq!(
        count(
            &db,
            &format!("SELECT sum(count) FROM zblocks WHERE id = {copy_id}")
        ),
        n
    );
    cmd(&mut con, &["ZREM", "copy", &ordered[0]]);
    assert_eq!(
        int(&mut con, &["ZRANK", "copy", &ordered[n as usize - 1]]),
        n - 2
    );
    assert_eq!(
        int(&mut con, &["ZRANK", "big", &ordered[n as usize - 1]]),
        n - 1
    );
    // Deleted, its members and blocks are freed (a chunk at a time).
    let id = count(&db, "SELECT id FROM keys WHERE key = CAST('big' AS BLOB)");
    let left = format!(
        "SELECT (SELECT count(*) FROM zblocks WHERE id = {id}) + (SELECT count(*) FROM zsets WHERE id = {id})"
    );
    assert!(count(&db, &left) > n);
    cmd(&mut con, &["DEL", "big"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while count(&db, &left) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(count(&db, &left), 0);
}

//! `respited import FILE.rdb`: redis-server 7.0 fills several databases
//! with every type (streams with groups included), expiries and a key
//! already expired, SAVEs, and the file is imported; then respite and
//! redis are compared key by key, database by database (value, TTL and
//! DEBUG DIGEST-VALUE), once for the bulk path into an empty database and
//! once for `--force` over existing keys (the commands' path), which must
//! also agree with each other on OBJECT ENCODING. A database that holds
//! keys is refused without `--force`; a corrupt file fails and leaves the
//! database as it was; so does an import killed midway, which can then
//! simply be run again. A file that holds a key twice (redis-server
//! refuses to load one) fails and names the key, quoted as redis-cli
//! quotes it.

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{RedisServer, Respited};
use redis::{Connection, Value};

fn ok(c: &mut Connection, args: &[&str]) -> Value {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        other => format!("{other:?}"),
    }
}

fn import(db: &Path, file: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_respited"))
        .arg("--db")
        .arg(db)
        .arg("import")
        .arg(file)
        .args(extra)
        .output()
        .expect("run respited import")
}

/// Everything a client sees of `key`, canonically.
fn snapshot(c: &mut Connection, key: &str) -> String {
    let t = text(&ok(c, &["TYPE", key]));
    let v = match t.as_str() {
        "string" => text(&ok(c, &["GET", key])),
        "list" => format!("{:?}", ok(c, &["LRANGE", key, "0", "-1"])),
        "set" => format!("{:?}", ok(c, &["SORT", key, "ALPHA"])),
        "hash" => {
            let mut f: Vec<Vec<u8>> = redis::cmd("HGETALL").arg(key).query(c).unwrap();
            let mut pairs: Vec<Vec<Vec<u8>>> = f.chunks(2).map(|p| p.to_vec()).collect();
            pairs.sort();
            f.clear();
            format!("{pairs:?}")
        }
        "zset" => format!("{:?}", ok(c, &["ZRANGE", key, "0", "-1", "WITHSCORES"])),
        "stream" => format!(
            "{:?} {:?} {:?}",
            ok(c, &["XRANGE", key, "-", "+"]),
            ok(c, &["XINFO", "GROUPS", key]),
            ok(c, &["XPENDING", key, "g"])
        ),
        other => panic!("{other}"),
    };
    let ttl = match ok(c, &["PTTL", key]) {
        Value::Int(-1) => "no ttl".to_string(),
        Value::Int(ms) => format!("ttl ~{}", (ms + 5000) / 10_000),
        other => format!("{other:?}"),
    };
    format!("{t} {v} {ttl}")
}

fn fill(c: &mut Connection) -> usize {
    let mut n = 0;
    for db in ["0", "1", "5"] {
        ok(c, &["SELECT", db]);
        for i in 0..300 {
            let k = format!("str:{i}");
            ok(c, &["SET", &k, &format!("value {i} in db {db}")]);
            n += 1;
        }
        ok(c, &["SET", "int", "42"]);
        ok(c, &["SET", "ttl", "soon", "EX", "50000"]);
        ok(c, &["RPUSH", "list", "a", "b", "c"]);
        for i in 0..1000 {
            ok(c, &["RPUSH", "biglist", &format!("item {i}")]);
        }
        ok(c, &["HSET", "hash", "f", "v", "g", "w"]);
        for i in 0..600 {
            ok(c, &["HSET", "bighash", &format!("f{i}"), &i.to_string()]);
        }
        ok(c, &["SADD", "intset", "1", "2", "3"]);
        ok(c, &["SADD", "set", "a", "b"]);
        ok(c, &["ZADD", "zset", "1", "a", "2", "b"]);
        for i in 0..300 {
            ok(c, &["ZADD", "bigzset", &i.to_string(), &format!("m{i}")]);
        }
        // Big enough for rank blocks (more than 2,048 members).
        let mut zadd = vec!["ZADD".to_string(), "hugezset".to_string()];
        for i in 0..2500 {
            zadd.push((i % 97).to_string());
            zadd.push(format!("member {i}"));
        }
        let zadd: Vec<&str> = zadd.iter().map(String::as_str).collect();
        ok(c, &zadd);
        ok(c, &["SET", "long", &"x".repeat(3000)]);
        ok(c, &["XADD", "stream", "1-1", "f", "v"]);
        ok(c, &["XADD", "stream", "2-1", "f", "w"]);
        ok(c, &["XGROUP", "CREATE", "stream", "g", "0"]);
        ok(
            c,
            &[
                "XREADGROUP",
                "GROUP",
                "g",
                "alice",
                "COUNT",
                "1",
                "STREAMS",
                "stream",
                ">",
            ],
        );
        n += 13;
        // Saved, but already expired when the file is loaded.
        ok(c, &["SET", "gone", "x", "PX", "1"]);
    }
    std::thread::sleep(Duration::from_millis(20));
    n
}

fn save(c: &mut Connection) -> PathBuf {
    ok(c, &["SAVE"]);
    let dir: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("dir").query(c).unwrap();
    let name: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("dbfilename")
        .query(c)
        .unwrap();
    Path::new(&dir[1]).join(&name[1])
}

#[test]
fn a_redis_save_imports_key_for_key() {
    let Some(redis) = RedisServer::start_with(&["--enable-debug-command", "yes"]) else {
        return;
    };
    let mut theirs = redis.client();
    ok(&mut theirs, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    let expected_keys = fill(&mut theirs);
    let rdb = save(&mut theirs);
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("respite.db");
    let out = import(&db, &rdb, &[]);
    let report = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{report}");
    assert!(
        report.contains(&format!("imported {expected_keys} keys")),
        "{report}"
    );
    assert!(
        report.contains("skipped 3 keys already expired"),
        "{report}"
    );
    assert!(report.contains("stream: 3"), "{report}");
    assert!(report.contains("db5: "), "{report}");

    let conf = tmp.path().join("respite.toml");
    std::fs::write(&conf, "enable_debug_command = \"yes\"\n").unwrap();
    let flags = ["--config", conf.to_str().unwrap()];
    let bulk = {
        let server = Respited::start_in(tmp.path(), &flags);
        compare(&mut server.client(), &mut theirs)
    };

    // Refused into a database with keys; accepted with --force.
    let again = import(&db, &rdb, &[]);
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("--force"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let forced = import(&db, &rdb, &["--force"]);
    assert!(
        forced.status.success(),
        "{}",
        String::from_utf8_lossy(&forced.stderr)
    );
    let replaced = {
        let server = Respited::start_in(tmp.path(), &flags);
        compare(&mut server.client(), &mut theirs)
    };
    assert_eq!(bulk, replaced);
}

/// Compares every key of databases 0, 1 and 5 with redis (value, TTL,
/// DEBUG DIGEST-VALUE); returns respite's OBJECT ENCODING of each.
fn compare(ours: &mut Connection, theirs: &mut Connection) -> Vec<String> {
    let mut encodings = Vec::new();
    for db in ["0", "1", "5"] {
        ok(theirs, &["SELECT", db]);
        ok(ours, &["SELECT", db]);
        let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(theirs).unwrap();
        keys.retain(|k| k != "gone");
        keys.sort();
        let mut ours_keys: Vec<String> = redis::cmd("KEYS").arg("*").query(ours).unwrap();
        ours_keys.sort();
        assert_eq!(ours_keys, keys, "db{db}");
        for k in &keys {
            assert_eq!(snapshot(ours, k), snapshot(theirs, k), "db{db} {k}");
            let digest = |c: &mut Connection| text(&ok(c, &["DEBUG", "DIGEST-VALUE", k]));
            assert_eq!(digest(ours), digest(theirs), "db{db} {k}");
            encodings.push(format!(
                "db{db} {k} {}",
                text(&ok(ours, &["OBJECT", "ENCODING", k]))
            ));
        }
    }
    encodings
}

/// Runs an import and kills it (SIGKILL) once its progress line shows
/// it under way; panics if it ends first.
fn kill_midway(db: &Path, file: &Path, extra: &[&str]) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_respited"))
        .arg("--db")
        .arg(db)
        .arg("import")
        .arg(file)
        .args(extra)
        .stderr(Stdio::piped())
        .spawn()
        .expect("run respited import");
    let mut stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stderr.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !String::from_utf8_lossy(&seen).contains("importing:") {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(bytes) => seen.extend(bytes),
            Err(_) => panic!(
                "no progress line before the import ended: {}",
                String::from_utf8_lossy(&seen)
            ),
        }
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    while let Ok(bytes) = rx.recv_timeout(Duration::from_secs(5)) {
        seen.extend(bytes);
    }
    let seen = String::from_utf8_lossy(&seen);
    assert!(!status.success(), "{seen}");
    assert!(!seen.contains("imported "), "it finished first: {seen}");
}

/// An import is one transaction: killed midway, it leaves the database
/// as it was (empty, or with its keys untouched under `--force`), the
/// daemon starts on it as usual, and the import can be run again.
#[test]
fn a_killed_import_leaves_the_database_as_it_was() {
    let Some(redis) = RedisServer::start_with(&["--enable-debug-command", "yes"]) else {
        return;
    };
    let mut theirs = redis.client();
    ok(&mut theirs, &["DEBUG", "POPULATE", "600000", "key", "100"]);
    let rdb = save(&mut theirs);
    let first = rdb.with_file_name("first.rdb");
    std::fs::rename(&rdb, &first).unwrap();
    // The second file: other values under the same names, and one more key.
    ok(&mut theirs, &["FLUSHALL"]);
    ok(&mut theirs, &["DEBUG", "POPULATE", "600000", "key", "20"]);
    ok(&mut theirs, &["SET", "marker", "second file"]);
    let second = save(&mut theirs);

    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("respite.db");
    kill_midway(&db, &first, &[]);
    {
        let server = Respited::start_in(tmp.path(), &[]);
        assert_eq!(ok(&mut server.client(), &["DBSIZE"]), Value::Int(0));
    }
    // Run again, without --force: the database is empty.
    let out = import(&db, &first, &[]);
    let report = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{report}");
    assert!(report.contains("imported 600000 keys"), "{report}");

    // Killed while replacing keys: none replaced, none added.
    kill_midway(&db, &second, &["--force"]);
    let server = Respited::start_in(tmp.path(), &[]);
    let mut ours = server.client();
    assert_eq!(ok(&mut ours, &["DBSIZE"]), Value::Int(600000));
    assert_eq!(ok(&mut ours, &["EXISTS", "marker"]), Value::Int(0));
    assert_eq!(ok(&mut ours, &["STRLEN", "key:12345"]), Value::Int(100));
}

#[test]
fn a_corrupt_file_leaves_the_database_as_it_was() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let mut theirs = redis.client();
    for i in 0..50_000 {
        ok(&mut theirs, &["SET", &format!("k{i}"), "v"]);
    }
    let rdb = save(&mut theirs);
    let mut bytes = std::fs::read(&rdb).unwrap();
    let n = bytes.len();
    bytes[n - 3] ^= 0xff; // the checksum
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("bad.rdb");
    std::fs::write(&bad, &bytes).unwrap();
    let db = tmp.path().join("respite.db");
    let out = import(&db, &bad, &[]);
    let report = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{report}");
    assert!(report.contains("checksum"), "{report}");
    assert!(report.contains("nothing was imported"), "{report}");
    let server = Respited::start_in(tmp.path(), &[]);
    assert_eq!(ok(&mut server.client(), &["DBSIZE"]), Value::Int(0));
    // A truncated file likewise.
    drop(server);
    std::fs::write(&bad, &bytes[..n / 2]).unwrap();
    let out = import(&db, &bad, &[]);
    assert!(!out.status.success());
}

/// A file (written with respite's RDB writer: redis-server never writes
/// one) holding `key` twice in db 0, first as `first`, then, after
/// `between` other keys, as `second`.
fn with_duplicate(
    path: &Path,
    key: &[u8],
    first: respite_rdb::Value,
    between: usize,
    second: respite_rdb::Value,
) {
    use respite_rdb::{RdbWriter, Value as V};
    let mut w = RdbWriter::new(std::fs::File::create(path).unwrap(), &[]).unwrap();
    w.select_db(0, between as u64 + 2, 0).unwrap();
    w.entry(0, key, &first, None).unwrap();
    for i in 0..between {
        w.entry(
            0,
            format!("k{i}").as_bytes(),
            &V::String(b"v".to_vec()),
            None,
        )
        .unwrap();
    }
    w.entry(0, key, &second, None).unwrap();
    w.finish().unwrap();
}

#[test]
fn a_duplicated_key_fails_and_is_named() {
    use respite_rdb::{Stream, StreamEntry, Value as V};
    let stream = || {
        V::Stream(Box::new(Stream {
            entries: vec![StreamEntry {
                id: (1, 0),
                fields: vec![(b"f".to_vec(), b"v".to_vec())],
            }],
            last_id: (1, 0),
            first_id: (1, 0),
            max_deleted: (0, 0),
            entries_added: 1,
            groups: Vec::new(),
        }))
    };
    let string = || V::String(b"x".to_vec());
    let hash = || V::Hash(vec![(b"f".to_vec(), b"v".to_vec())]);
    let key: &[u8] = b"dup \"key\"\n\x00\xff";
    let named = r#"the file holds the key "dup \"key\"\n\x00\xff" of db 0 twice"#;
    // In one chunk or two (20,000 keys each); by the bulk path or, for a
    // stream, RESTORE's.
    for (first, between, second) in [
        (string(), 0, hash()),
        (hash(), 25_000, string()),
        (string(), 0, string()),
        (string(), 10, stream()),
        (stream(), 25_000, hash()),
        (stream(), 0, stream()),
    ] {
        let what = format!(
            "{} then {} after {between}",
            first.type_name(),
            second.type_name()
        );
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("dup.rdb");
        with_duplicate(&file, key, first, between, second);
        let db = tmp.path().join("respite.db");
        let out = import(&db, &file, &[]);
        let report = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success(), "{what}: {report}");
        assert!(report.contains(named), "{what}: {report}");
        assert!(report.contains("nothing was imported"), "{what}: {report}");
        let server = Respited::start_in(tmp.path(), &[]);
        assert_eq!(
            ok(&mut server.client(), &["DBSIZE"]),
            Value::Int(0),
            "{what}"
        );
    }
}

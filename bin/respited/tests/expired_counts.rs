//! DBSIZE and INFO keyspace count keys that have expired but are not yet
//! deleted, as redis-server 7.0 counts them (its `dictSize`), and DEBUG
//! OBJECT still finds them, compared with a real redis-server while neither
//! deletes them (DEBUG SET-ACTIVE-EXPIRE 0, and no read of the keys).

mod common;

use std::time::{Duration, Instant};

use common::{RedisServer, Respited};

fn counts(con: &mut redis::Connection) -> (u64, String) {
    let dbsize: u64 = redis::cmd("DBSIZE").query(con).unwrap();
    let info: String = redis::cmd("INFO").arg("keyspace").query(con).unwrap();
    let db0 = info
        .lines()
        .find(|l| l.starts_with("db0:"))
        .map(|l| l.split(",avg_ttl").next().unwrap_or(l).to_string())
        .unwrap_or_default();
    (dbsize, db0)
}

#[test]
fn dbsize_and_keyspace_count_expired_keys_until_they_are_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("respite.toml");
    std::fs::write(&conf, "enable_debug_command = \"yes\"\n").unwrap();
    let server = Respited::start_in(dir.path(), &["--config", conf.to_str().unwrap()]);
    let Some(redis) = RedisServer::start_with(&["--enable-debug-command", "yes"]) else {
        return;
    };
    let mut ours = server.client();
    let mut theirs = redis.client();
    for con in [&mut ours, &mut theirs] {
        let _: () = redis::cmd("DEBUG")
            .arg("SET-ACTIVE-EXPIRE")
            .arg(0)
            .query(con)
            .unwrap();
        for k in ["key1", "key2", "key3"] {
            let _: () = redis::cmd("PSETEX")
                .arg(k)
                .arg(100)
                .arg("a")
                .query(con)
                .unwrap();
        }
        let _: () = redis::cmd("SET").arg("stays").arg("b").query(con).unwrap();
    }
    std::thread::sleep(Duration::from_millis(300));
    // Expired, not deleted: counted by both.
    let (size, db0) = counts(&mut ours);
    assert_eq!((size, db0.clone()), counts(&mut theirs));
    assert_eq!((size, db0.as_str()), (4, "db0:keys=4,expires=3"));
    // Hidden from every read all the same.
    let exists: i64 = redis::cmd("EXISTS")
        .arg("key1")
        .arg("key2")
        .query(&mut ours)
        .unwrap();
    assert_eq!(exists, 0);
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut ours).unwrap();
    assert_eq!(keys, vec!["stays".to_string()]);
    // Once the sweep runs again, they are deleted and no longer counted.
    let _: () = redis::cmd("DEBUG")
        .arg("SET-ACTIVE-EXPIRE")
        .arg(1)
        .query(&mut ours)
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while counts(&mut ours).0 != 1 {
        assert!(Instant::now() < deadline, "expired keys never swept");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(counts(&mut ours).1, "db0:keys=1,expires=0");
}

/// DEBUG OBJECT's reply with what differs by nature taken out: the
/// address (`Value at:`), `serializedlength` (redis's RDB size, respite's
/// value size) and the access clock; refcount and encoding stay.
fn debug_object(con: &mut redis::Connection, key: &str) -> Result<String, String> {
    match redis::cmd("DEBUG")
        .arg("OBJECT")
        .arg(key)
        .query::<String>(con)
    {
        Ok(line) => Ok(line
            .split(' ')
            .filter(|f| f.starts_with("refcount:") || f.starts_with("encoding:"))
            .collect::<Vec<_>>()
            .join(" ")),
        Err(e) => Err(format!("{:?} {}", e.code(), e.detail().unwrap_or(""))),
    }
}

#[test]
fn debug_object_finds_an_expired_key_until_a_read_deletes_it() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("respite.toml");
    std::fs::write(&conf, "enable_debug_command = \"yes\"\n").unwrap();
    let server = Respited::start_in(dir.path(), &["--config", conf.to_str().unwrap()]);
    let Some(redis) = RedisServer::start_with(&["--enable-debug-command", "yes"]) else {
        return;
    };
    let mut ours = server.client();
    let mut theirs = redis.client();
    let keys = ["str", "int", "hash", "by_script"];
    for con in [&mut ours, &mut theirs] {
        let _: () = redis::cmd("DEBUG")
            .arg("SET-ACTIVE-EXPIRE")
            .arg(0)
            .query(con)
            .unwrap();
        let _: () = redis::cmd("SET")
            .arg("str")
            .arg("value")
            .arg("PX")
            .arg(1)
            .query(con)
            .unwrap();
        let _: () = redis::cmd("SET")
            .arg("int")
            .arg("12345")
            .arg("PX")
            .arg(1)
            .query(con)
            .unwrap();
        let _: () = redis::cmd("HSET")
            .arg("hash")
            .arg("f")
            .arg("v")
            .query(con)
            .unwrap();
        let _: () = redis::cmd("PEXPIRE").arg("hash").arg(1).query(con).unwrap();
        let _: () = redis::cmd("SET")
            .arg("by_script")
            .arg("v")
            .arg("PX")
            .arg(1)
            .query(con)
            .unwrap();
    }
    std::thread::sleep(Duration::from_millis(50));
    // Past their expiry, not deleted: DEBUG OBJECT finds each one.
    for key in keys {
        let line = debug_object(&mut ours, key);
        assert!(line.is_ok(), "{key}: {line:?}");
        assert_eq!(line, debug_object(&mut theirs, key), "{key}");
    }
    // A read (on its own, or a script's) finds it expired and deletes it.
    for con in [&mut ours, &mut theirs] {
        let exists: i64 = redis::cmd("EXISTS")
            .arg("str")
            .arg("hash")
            .query(con)
            .unwrap();
        assert_eq!(exists, 0);
        let int: Option<String> = redis::cmd("GET").arg("int").query(con).unwrap();
        assert_eq!(int, None);
        let exists: i64 = redis::cmd("EVAL")
            .arg("return redis.call('EXISTS', KEYS[1])")
            .arg(1)
            .arg("by_script")
            .query(con)
            .unwrap();
        assert_eq!(exists, 0);
    }
    for key in keys {
        let line = debug_object(&mut ours, key);
        assert_eq!(line, Err("Some(\"ERR\") no such key".into()), "{key}");
        assert_eq!(line, debug_object(&mut theirs, key), "{key}");
    }
}

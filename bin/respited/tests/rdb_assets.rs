//! Real RDB files of older redis versions (RDB 3, 4, 7, 8 and 9: redis
//! 2.x to 6.2; see `tests/data/redis-rdb/README.md`), imported with
//! `respited import` and compared key by key (DEBUG DIGEST-VALUE and the
//! absolute expiry) with redis-server 7.0 loading the same file; the
//! corrupt ones refused as redis refuses them.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{RedisServer, Respited};
use redis::Connection;

fn asset(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/redis-rdb")
        .join(name)
}

fn keys(c: &mut Connection, db: u32) -> Vec<Vec<u8>> {
    let _: () = redis::cmd("SELECT").arg(db).query(c).unwrap();
    let mut k: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(c).unwrap();
    k.sort();
    k
}

fn state(c: &mut Connection, key: &[u8]) -> (Vec<String>, i64, String) {
    let digest: Vec<String> = redis::cmd("DEBUG")
        .arg("DIGEST-VALUE")
        .arg(key)
        .query(c)
        .unwrap();
    let at: i64 = redis::cmd("PEXPIRETIME").arg(key).query(c).unwrap();
    let kind: String = redis::cmd("TYPE").arg(key).query(c).unwrap();
    (digest, at, kind)
}

/// Imports `name` into a fresh database and compares it with
/// redis-server loading it; the number of keys.
fn compare(name: &str) -> usize {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(asset(name), dir.path().join("dump.rdb")).unwrap();
    let Some(redis) = RedisServer::start_with(&[
        "--dir",
        dir.path().to_str().unwrap(),
        "--dbfilename",
        "dump.rdb",
        "--enable-debug-command",
        "yes",
    ]) else {
        return 0;
    };
    let ours_dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_respited"))
        .arg("--db")
        .arg(ours_dir.path().join("respite.db"))
        .arg("import")
        .arg(asset(name))
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{name}: {report}");
    let conf = ours_dir.path().join("respite.toml");
    std::fs::write(&conf, "enable_debug_command = \"yes\"\n").unwrap();
    let server = Respited::start_in(ours_dir.path(), &["--config", conf.to_str().unwrap()]);
    let mut ours = server.client();
    let mut theirs = redis.client();
    let mut n = 0;
    for db in 0..16 {
        let ours_keys = keys(&mut ours, db);
        let their_keys = keys(&mut theirs, db);
        assert_eq!(ours_keys, their_keys, "{name}: the keys of db{db}");
        for key in &their_keys {
            assert_eq!(
                state(&mut ours, key),
                state(&mut theirs, key),
                "{name}: db{db} {:?}",
                String::from_utf8_lossy(key)
            );
        }
        n += their_keys.len();
    }
    n
}

#[test]
fn older_rdb_versions_import_as_redis_loads_them() {
    if RedisServer::start().is_none() {
        return;
    }
    // RDB 4: every encoding of redis 2.x (intsets, zipmaps, ziplists,
    // integer-encoded strings, LZF).
    assert_eq!(compare("encodings.rdb"), 13);
    // RDB 3: a zipmap hash.
    assert_eq!(compare("hash-zipmap.rdb"), 1);
    // RDB 8: a quicklist of ziplists (redis 3.2 to 5).
    assert_eq!(compare("list-quicklist.rdb"), 2);
    // RDB 9 (redis 5.0 to 6.2): a ziplist hash.
    assert_eq!(compare("hash-ziplist.rdb"), 1);
    // RDB 10: a listpack sorted set; empty collections, which redis
    // 7.0 skips on load too; a Lua script in an AUX field, ignored.
    assert_eq!(compare("zset-ziplist.rdb"), 1);
    assert_eq!(compare("corrupt_empty_keys.rdb"), 0);
    assert_eq!(compare("scriptbackup.rdb"), 0);
}

#[test]
fn a_corrupt_ziplist_is_refused_and_nothing_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_respited"))
        .arg("--db")
        .arg(dir.path().join("respite.db"))
        .arg("import")
        .arg(asset("corrupt_ziplist.rdb"))
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{report}");
    assert!(report.contains("Bad data format"), "{report}");
    let server = Respited::start_in(dir.path(), &[]);
    let n: i64 = redis::cmd("DBSIZE").query(&mut server.client()).unwrap();
    assert_eq!(n, 0);
}

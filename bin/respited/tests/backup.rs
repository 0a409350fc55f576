//! Snapshots while running (SAVE, BGSAVE, LASTSAVE, INFO persistence) and
//! the restore that docs/operations.md describes: snapshot, more writes,
//! stop, copy the snapshot over the database, start: the snapshot's state
//! is what is served.

mod common;

use std::time::Duration;

use common::{info_field, Respited};

fn info_text(con: &mut redis::Connection) -> String {
    redis::cmd("INFO").arg("persistence").query(con).unwrap()
}

#[test]
fn save_bgsave_lastsave_and_a_restore() {
    let tmp = tempfile::tempdir().unwrap();
    let mut server = Respited::start_in(tmp.path(), &[]);
    let mut con = server.client();
    for i in 0..200 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg("before")
            .query(&mut con)
            .unwrap();
    }
    let _: () = redis::cmd("HSET")
        .arg("h")
        .arg("f")
        .arg("1")
        .query(&mut con)
        .unwrap();
    let text = info_text(&mut con);
    assert!(text.contains("rdb_bgsave_in_progress:0"), "{text}");
    assert!(text.contains("rdb_last_bgsave_status:ok"), "{text}");

    let ok: String = redis::cmd("SAVE").query(&mut con).unwrap();
    assert_eq!(ok, "OK");
    let snapshot = tmp.path().join("respite.db.snapshot");
    assert!(snapshot.exists());
    let lastsave: i64 = redis::cmd("LASTSAVE").query(&mut con).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!((now - lastsave).abs() <= 5, "{lastsave} vs {now}");
    assert_eq!(info_field(&mut con, "persistence", "rdb_saves"), 1.0);

    // BGSAVE answers at once; writes go on while it runs (whether one
    // sent meanwhile is in the snapshot depends on when its read began).
    let _: () = redis::cmd("SET")
        .arg("pre")
        .arg("bgsave")
        .query(&mut con)
        .unwrap();
    let started: String = redis::cmd("BGSAVE").query(&mut con).unwrap();
    assert_eq!(started, "Background saving started");
    let _: () = redis::cmd("SET")
        .arg("during")
        .arg("bgsave")
        .query(&mut con)
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while info_field(&mut con, "persistence", "rdb_saves") < 2.0 {
        assert!(
            std::time::Instant::now() < deadline,
            "BGSAVE never finished"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let text = info_text(&mut con);
    assert!(text.contains("rdb_last_bgsave_status:ok"), "{text}");
    assert!(text.contains("rdb_bgsave_in_progress:0"), "{text}");
    let bytes = info_field(&mut con, "persistence", "rdb_last_snapshot_bytes");
    assert!(bytes > 0.0);
    let err = redis::cmd("BGSAVE")
        .arg("NOW")
        .query::<String>(&mut con)
        .unwrap_err();
    assert!(err.to_string().contains("syntax"), "{err}");

    // After the snapshot: more writes, then a stop.
    let _: () = redis::cmd("SET")
        .arg("k0")
        .arg("after")
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("new")
        .arg("after")
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("DEL").arg("h").query(&mut con).unwrap();
    assert_eq!(server.terminate().code(), Some(0));

    // Restore: the snapshot replaces the database, its -wal/-shm go.
    let db = tmp.path().join("respite.db");
    std::fs::copy(&snapshot, &db).unwrap();
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(tmp.path().join(format!("respite.db{suffix}")));
    }
    let restored = Respited::start_in(tmp.path(), &[]);
    let mut con = restored.client();
    let v: String = redis::cmd("GET").arg("k0").query(&mut con).unwrap();
    assert_eq!(v, "before");
    let pre: String = redis::cmd("GET").arg("pre").query(&mut con).unwrap();
    assert_eq!(pre, "bgsave", "the BGSAVE snapshot holds what preceded it");
    let during: Option<String> = redis::cmd("GET").arg("during").query(&mut con).unwrap();
    let gone: Option<String> = redis::cmd("GET").arg("new").query(&mut con).unwrap();
    assert_eq!(gone, None);
    let f: String = redis::cmd("HGET")
        .arg("h")
        .arg("f")
        .query(&mut con)
        .unwrap();
    assert_eq!(f, "1");
    let n: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(n, 202 + i64::from(during.is_some()));
}

/// INFO's `rdb_changes_since_last_save` counts changed keys as redis-server
/// counts its `dirty`: SET one, MSET one per key, DEL one per key deleted,
/// and SAVE starts it again from 0.
#[test]
fn changes_since_last_save_count_as_redis() {
    let Some(redis) = common::RedisServer::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = Respited::start_in(dir.path(), &[]);
    let mut ours = server.client();
    let mut theirs = redis.client();
    let field = |con: &mut redis::Connection| {
        common::info_field(con, "persistence", "rdb_changes_since_last_save")
    };
    let script: &[&[&str]] = &[
        &["SET", "a", "1"],
        &["MSET", "b", "1", "c", "2", "d", "3"],
        &["DEL", "a", "nosuch", "b"],
        &["INCR", "c"],
        &["HSET", "h", "f", "v"],
        &["GET", "c"],
    ];
    for con in [&mut ours, &mut theirs] {
        assert_eq!(field(con), 0.0);
        for args in script {
            let mut cmd = redis::cmd(args[0]);
            for a in &args[1..] {
                cmd.arg(*a);
            }
            let _: redis::Value = cmd.query(con).unwrap();
        }
    }
    assert_eq!(field(&mut ours), 8.0);
    assert_eq!(field(&mut ours), field(&mut theirs));
    for con in [&mut ours, &mut theirs] {
        let _: () = redis::cmd("SAVE").query(con).unwrap();
        assert_eq!(field(con), 0.0);
        let _: () = redis::cmd("SET").arg("e").arg("1").query(con).unwrap();
        assert_eq!(field(con), 1.0);
    }
    assert!(common::info_field(&mut ours, "memory", "used_memory_startup") > 0.0);
}

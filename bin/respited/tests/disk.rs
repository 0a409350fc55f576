//! The disk under the database: a `maxdisk` budget, and a disk that really
//! fills up (a small tmpfs in a mount namespace). In both, commands that
//! may add data get an OOM error while deletions and reads keep working,
//! nothing of a failed group is visible, and writes come back once there
//! is room.

mod common;

use std::time::{Duration, Instant};

use common::{encode, info_field, Respited};

/// Sends one command as raw RESP and returns the reply line(s).
fn raw(server: &Respited, args: &[&str]) -> String {
    let mut s = common::raw_for(server.port);
    let got = common::exchange(&mut s, &encode(args), 3);
    String::from_utf8_lossy(&got).into_owned()
}

fn wait_for(timeout: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn config_file(text: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("respite.toml");
    std::fs::write(&path, text).unwrap();
    let path = path.display().to_string();
    (dir, path)
}

#[test]
fn maxdisk_refuses_what_adds_data_and_deletion_makes_room() {
    // A small copy threshold: the WAL's frames are copied soon, so what is
    // measured is mostly the live pages.
    let (_conf_dir, conf) =
        config_file("checkpoint_wal_bytes = 65536\ncheckpoint_wal_percent = 0\n");
    let server = Respited::start(&["--config", &conf]);
    let mut con = server.client();
    let value = vec![b'v'; 20_000];
    for i in 0..100 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(&value)
            .query(&mut con)
            .unwrap();
    }
    wait_for(Duration::from_secs(10), "the measurement", || {
        info_field(&mut con, "persistence", "disk_used_bytes") > 1_500_000.0
    });
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxdisk")
        .arg("1mb")
        .query(&mut con)
        .unwrap();
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxdisk")
        .query(&mut con)
        .unwrap();
    assert_eq!(got, vec!["maxdisk", "1048576"]);
    // Writes that add data: refused, with Redis's OOM error worded for disk.
    let oom = "-OOM command not allowed when used disk > 'maxdisk'.\r\n";
    assert_eq!(raw(&server, &["SET", "new", "x"]), oom);
    assert_eq!(raw(&server, &["SET", "k1", "smaller"]), oom);
    assert_eq!(raw(&server, &["RPUSH", "list", "x"]), oom);
    assert_eq!(raw(&server, &["HSET", "h", "f", "v"]), oom);
    // Inside MULTI the refusal dooms the transaction, as Redis's OOM does.
    let mut s = common::raw_for(server.port);
    let mut req = encode(&["MULTI"]);
    req.extend_from_slice(&encode(&["SET", "new", "x"]));
    req.extend_from_slice(&encode(&["EXEC"]));
    let got = common::exchange(&mut s, &req, 200);
    assert_eq!(
        String::from_utf8_lossy(&got),
        format!("+OK\r\n{oom}-EXECABORT Transaction discarded because of previous errors.\r\n")
    );
    // Reads and what frees space go on.
    let got: Vec<u8> = redis::cmd("GET").arg("k1").query(&mut con).unwrap();
    assert_eq!(got.len(), 20_000);
    let _: () = redis::cmd("EXPIRE")
        .arg("k0")
        .arg(100)
        .query(&mut con)
        .unwrap();
    let keys: Vec<String> = (0..90).map(|i| format!("k{i}")).collect();
    let deleted: i64 = redis::cmd("DEL").arg(&keys).query(&mut con).unwrap();
    assert_eq!(deleted, 90);
    // Freed pages are room at once (they are reused), so writes come back.
    wait_for(Duration::from_secs(10), "room after DEL", || {
        raw(&server, &["SET", "new", "x"]) == "+OK\r\n"
    });
    assert!(info_field(&mut con, "persistence", "disk_used_bytes") < 1_048_576.0);
    // 0 is no budget.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxdisk")
        .arg(0)
        .query(&mut con)
        .unwrap();
    assert_eq!(raw(&server, &["SET", "k1", "again"]), "+OK\r\n");
}

#[test]
fn a_full_disk_keeps_deletions_working_and_recovers() {
    // 8 MiB of disk, 1 MiB of it set aside; the WAL is copied early.
    let (_conf_dir, conf) = config_file(
        "disk_reserve_bytes = 1048576\ncheckpoint_wal_bytes = 262144\ncheckpoint_wal_percent = 0\nwal_checkpoint_bytes = 1048576\n",
    );
    // 2 MiB of it taken by a ballast file, which an operator later deletes.
    let Some(server) = Respited::start_on_tmpfs(
        "8m",
        "dd if=/dev/zero of=ballast bs=1M count=2 status=none",
        &["--config", &conf],
    ) else {
        return;
    };
    let mut con = server.client();
    let value = vec![b'd'; 16_000];
    let mut stored = Vec::new();
    let mut failure = None;
    for i in 0..2000 {
        let key = format!("fill{i}");
        match redis::cmd("SET")
            .arg(&key)
            .arg(&value)
            .query::<()>(&mut con)
        {
            Ok(()) => stored.push(key),
            Err(e) => {
                failure = Some((key, e.to_string()));
                break;
            }
        }
    }
    let (failed_key, error) = failure.expect("8 MiB never filled up");
    assert!(
        error.contains("commit failed") || error.contains("storage error") || error.contains("OOM"),
        "{error}"
    );
    // Nothing of the failed write is visible; what was acknowledged is.
    let got: Option<Vec<u8>> = redis::cmd("GET").arg(&failed_key).query(&mut con).unwrap();
    assert_eq!(got, None);
    let got: Vec<u8> = redis::cmd("GET").arg(&stored[0]).query(&mut con).unwrap();
    assert_eq!(got, value);
    assert_eq!(info_field(&mut con, "persistence", "disk_full"), 1.0);
    assert!(info_field(&mut con, "persistence", "storage_errors") >= 1.0);
    // Writes that add data are refused with a clear error; deleting works
    // in the space of the released reserve.
    assert_eq!(
        raw(&server, &["SET", "more", "x"]),
        "-OOM command not allowed when the disk is full.\r\n"
    );
    let half = &stored[..stored.len() / 2];
    let deleted: i64 = redis::cmd("DEL").arg(half).query(&mut con).unwrap();
    assert_eq!(deleted, half.len() as i64);
    let _: () = redis::cmd("FLUSHALL").query(&mut con).unwrap();
    // The database keeps its freed pages for new data; the file system
    // needs room for the reserve and the WAL's growth too. The operator
    // frees some (the ballast, seen from inside the server's mount
    // namespace); at the next check the WAL is truncated, the reserve is
    // back and writes are taken again.
    let ballast = server.dir.join("ballast");
    let removed = ["--mount", "--user --mount"].iter().any(|ns| {
        std::process::Command::new("nsenter")
            .arg("--target")
            .arg(server.pid().to_string())
            .args(ns.split(' '))
            .arg("rm")
            .arg(&ballast)
            .status()
            .is_ok_and(|s| s.success())
    });
    assert!(
        removed,
        "could not delete the ballast in the server's namespace"
    );
    wait_for(
        Duration::from_secs(20),
        "the disk to have room again",
        || info_field(&mut con, "persistence", "disk_full") == 0.0,
    );
    assert_eq!(raw(&server, &["SET", "more", "x"]), "+OK\r\n");
    common::assert_still_serves(&mut con);
}

#[test]
fn a_small_full_disk_takes_writes_again_once_deletions_free_pages() {
    // The default settings (a 16 MiB reserve) on a 24 MiB disk: the data
    // gets what the reserve leaves.
    let Some(server) = Respited::start_on_tmpfs("24m", "true", &[]) else {
        return;
    };
    let mut con = server.client();
    let value = vec![b'f'; 100 * 1024];
    let mut stored = Vec::new();
    let mut failure = None;
    for i in 0..1000 {
        let key = format!("big{i}");
        match redis::cmd("SET")
            .arg(&key)
            .arg(&value)
            .query::<()>(&mut con)
        {
            Ok(()) => stored.push(key),
            Err(e) => {
                failure = Some(e.to_string());
                break;
            }
        }
    }
    let error = failure.expect("24 MiB never filled up");
    assert!(stored.len() > 20, "only {} values fitted", stored.len());
    assert!(
        error.contains("commit failed") || error.contains("OOM"),
        "{error}"
    );
    // Refused with the clear error from then on; reads go on.
    assert_eq!(
        raw(&server, &["SET", "more", "x"]),
        "-OOM command not allowed when the disk is full.\r\n"
    );
    let got: Vec<u8> = redis::cmd("GET").arg(&stored[0]).query(&mut con).unwrap();
    assert_eq!(got, value);
    // DEL of 20 keys and FLUSHDB, both answered.
    let deleted: i64 = redis::cmd("DEL")
        .arg(&stored[..20])
        .query(&mut con)
        .unwrap();
    assert_eq!(deleted, 20);
    let _: () = redis::cmd("FLUSHDB").query(&mut con).unwrap();
    // The freed pages stay inside the database file; they are room for new
    // data, and writes are taken again within seconds.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = String::new();
    while Instant::now() < deadline {
        let mut s = common::raw_for(server.port);
        let req = encode(&[b"SET".as_slice(), b"again", &value[..]]);
        let got = common::exchange(&mut s, &req, 3);
        last = String::from_utf8_lossy(&got).into_owned();
        if last == "+OK\r\n" {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(last, "+OK\r\n", "SET still refused after deletions");
    assert_eq!(info_field(&mut con, "persistence", "disk_full"), 0.0);
    // And about as much as before fits again, in the freed pages and the
    // room the smaller reserve leaves.
    let mut again = 1;
    for i in 0..stored.len() {
        if redis::cmd("SET")
            .arg(format!("refill{i}"))
            .arg(&value)
            .query::<()>(&mut con)
            .is_err()
        {
            break;
        }
        again += 1;
    }
    assert!(
        again * 2 >= stored.len(),
        "{again} values fitted after the deletions, {} before",
        stored.len()
    );
    let got: Vec<u8> = redis::cmd("GET").arg("refill0").query(&mut con).unwrap();
    assert_eq!(got, value);
}

//! As the data grows: the WAL stays within its bound however many keys are
//! written, a clean stop leaves no WAL for the next start to recover, and
//! INFO's memory figures count the memory the process holds, not the
//! database's file pages that every connection maps.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{info_field, Respited};

/// The size of the WAL beside the database in `dir` (0 when absent).
fn wal_bytes(dir: &std::path::Path) -> u64 {
    std::fs::metadata(dir.join("respite.db-wal")).map_or(0, |m| m.len())
}

/// Writes `keys` keys of `value_len` bytes from `clients` connections in
/// pipelines of 100, `prefix` in front of each key.
fn load(server: &Respited, clients: usize, keys: usize, value_len: usize, prefix: &str) {
    let per = keys / clients;
    let threads: Vec<_> = (0..clients)
        .map(|c| {
            let port = server.port;
            let prefix = prefix.to_string();
            std::thread::spawn(move || {
                let mut con = common::client_for(port);
                let value = vec![b'v'; value_len];
                for start in (0..per).step_by(100) {
                    let mut pipe = redis::pipe();
                    for i in start..(start + 100).min(per) {
                        pipe.cmd("SET")
                            .arg(format!("{prefix}:{c}:{i:08}"))
                            .arg(&value)
                            .ignore();
                    }
                    let _: () = pipe.query(&mut con).expect("pipelined SETs");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("loader thread");
    }
}

#[test]
fn the_wal_stays_within_its_bound_as_keys_pile_up() {
    // A 1 MiB bound, copies from 256 KiB on: the load below sends about
    // 40 MB of WAL frames through it, with `appendfsync always`.
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let conf = tmp.path().join("respite.toml");
    std::fs::write(
        &conf,
        "checkpoint_wal_bytes = 262144\nwal_checkpoint_bytes = 1048576\n",
    )
    .unwrap();
    let server = Respited::start_in(tmp.path(), &["--config", conf.to_str().unwrap()]);
    let dir = tmp.path().to_path_buf();
    // The WAL file's size, sampled every millisecond while the keys go in.
    let done = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (done, peak, dir) = (done.clone(), peak.clone(), dir.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(wal_bytes(&dir), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let keys = 60_000;
    let started = Instant::now();
    load(&server, 4, keys, 100, "grow");
    let elapsed = started.elapsed();
    done.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    let mut con = server.client();
    // Every write was applied.
    let n: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(n, keys as i64);
    let written = info_field(&mut con, "persistence", "disk_write_bytes");
    let peak = peak.load(Ordering::Relaxed) as f64;
    let reported_peak = info_field(&mut con, "persistence", "wal_size_peak_bytes");
    let pause = info_field(&mut con, "persistence", "wal_pause_max_us");
    let checkpoints = info_field(&mut con, "persistence", "wal_checkpoints");
    eprintln!(
        "{keys} keys in {elapsed:?}: WAL peak {peak} bytes (INFO {reported_peak}), \
         {written} bytes written, longest WAL pause {pause} us, {checkpoints} restarts"
    );
    // The load went through the WAL many times over...
    assert!(written > 20.0 * 1048576.0, "{written}");
    assert!(checkpoints >= 5.0, "{checkpoints}");
    // ...and the WAL never grew far past its bound: the writer waits for
    // the copy instead (a group's frames can land past the bound).
    assert!(peak <= 3.0 * 1048576.0, "WAL peak {peak} bytes");
    assert!(reported_peak <= 3.0 * 1048576.0, "{reported_peak}");
    // The writer's waits stay short: a few ms each, 40 at the most past
    // twice the bound (100 allows for a loaded machine's scheduling).
    assert!(pause < 100_000.0, "longest WAL pause {pause} us");
    common::assert_still_serves(&mut con);
}

/// Stops a server that holds a WAL of several MB with `stop`, then starts
/// it again and checks that nothing was left to recover.
fn a_stop_leaves_no_wal(stop: impl FnOnce(&mut Respited)) {
    let tmp = tempfile::tempdir().unwrap();
    let mut server = Respited::start_in(tmp.path(), &[]);
    load(&server, 2, 20_000, 200, "stop");
    // Far below the copy threshold: these frames wait in the WAL.
    assert!(
        wal_bytes(tmp.path()) > 2_000_000,
        "{}",
        wal_bytes(tmp.path())
    );
    stop(&mut server);
    assert_eq!(wal_bytes(tmp.path()), 0, "the stop left a WAL behind");
    drop(server);
    let server = Respited::start_in(tmp.path(), &[]);
    let log = server.startup_log.join("\n");
    assert!(!log.contains("recover"), "{log}");
    assert!(!log.contains("did not stop cleanly"), "{log}");
    let mut con = server.client();
    let n: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(n, 20_000);
    let v: Vec<u8> = redis::cmd("GET")
        .arg("stop:1:00009999")
        .query(&mut con)
        .unwrap();
    assert_eq!(v, vec![b'v'; 200]);
}

#[test]
fn shutdown_empties_the_wal() {
    a_stop_leaves_no_wal(|server| {
        let mut con = server.client();
        let _ = redis::cmd("SHUTDOWN").query::<()>(&mut con);
        let status = server.wait(Duration::from_secs(30));
        assert!(status.success(), "{status:?}");
    });
}

#[test]
fn sigterm_empties_the_wal() {
    a_stop_leaves_no_wal(|server| {
        let status = server.terminate();
        assert!(status.success(), "{status:?}");
    });
}

/// A figure of /proc/PID/status, in bytes.
fn proc_status(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in {status}"));
    let kb: f64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024.0
}

#[test]
fn info_memory_counts_what_the_process_holds() {
    // On the build's disk: the database file's pages then sit in the page
    // cache, not in shared memory as on a tmpfs.
    // The WAL is copied from 1 MiB on, so that the data is in the file.
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let conf = tmp.path().join("respite.toml");
    std::fs::write(&conf, "checkpoint_wal_bytes = 1048576\n").unwrap();
    let server = Respited::start_in(tmp.path(), &["--config", conf.to_str().unwrap()]);
    // About 20 MB of data, then every key read back from four connections,
    // so that several readers map (and the kernel counts) its pages.
    load(&server, 2, 20_000, 1000, "mem");
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let port = server.port;
            std::thread::spawn(move || {
                let mut con = common::client_for(port);
                for c in 0..2 {
                    for start in (0..10_000).step_by(500) {
                        let mut pipe = redis::pipe();
                        for i in start..start + 500 {
                            pipe.cmd("GET").arg(format!("mem:{c}:{i:08}"));
                        }
                        let got: Vec<Vec<u8>> = pipe.query(&mut con).unwrap();
                        assert!(got.iter().all(|v| v.len() == 1000));
                    }
                }
            })
        })
        .collect();
    for r in readers {
        r.join().unwrap();
    }
    let mut con = server.client();
    let pid = server.pid();
    let held_before = proc_status(pid, "RssAnon:") + proc_status(pid, "RssShmem:");
    let used = info_field(&mut con, "memory", "used_memory");
    let rss = info_field(&mut con, "memory", "used_memory_rss");
    let held_after = proc_status(pid, "RssAnon:") + proc_status(pid, "RssShmem:");
    let vm_rss = proc_status(pid, "VmRSS:");
    let file = proc_status(pid, "RssFile:");
    let page_cache = info_field(&mut con, "memory", "used_memory_db_page_cache");
    let db_size = info_field(&mut con, "memory", "db_size_bytes");
    let peak = info_field(&mut con, "memory", "used_memory_peak");
    eprintln!(
        "used_memory {used}, used_memory_rss {rss}, RssAnon+RssShmem {held_before}..{held_after}, \
         VmRSS {vm_rss}, RssFile {file}, db page cache {page_cache} of {db_size}"
    );
    // used_memory and used_memory_rss are the anonymous and shared memory
    // the kernel counts for the process (give or take what moved between
    // the reads).
    let slack = 4.0 * 1048576.0;
    for figure in [used, rss] {
        assert!(
            figure >= held_before.min(held_after) - slack
                && figure <= held_before.max(held_after) + slack,
            "{figure} against {held_before}..{held_after}"
        );
    }
    // Not the file pages the connections map: VmRSS counts them on top.
    assert!(vm_rss >= used, "{vm_rss} < {used}");
    assert!(info_field(&mut con, "memory", "used_memory_vm_rss") >= used);
    assert!(peak >= used - slack, "peak {peak} below {used}");
    // The database's pages in the page cache are reported apart, counted
    // once: at most the file, and most of it after writing and reading it.
    assert!(db_size > 10_000_000.0, "{db_size}");
    assert!(page_cache <= db_size, "{page_cache} > {db_size}");
    assert!(page_cache >= db_size / 2.0, "{page_cache} of {db_size}");
    // MEMORY STATS counts the same.
    let stats: Vec<redis::Value> = redis::cmd("MEMORY").arg("STATS").query(&mut con).unwrap();
    let at = stats
        .iter()
        .position(|v| matches!(v, redis::Value::BulkString(b) if b == b"total.allocated"))
        .expect("total.allocated");
    let redis::Value::Int(total) = stats[at + 1] else {
        panic!("{:?}", stats[at + 1]);
    };
    // Both read the process's resident memory, moments apart: the
    // allocator may give pages back in between, so the figure is checked
    // against INFO's before and after it.
    let used_after = info_field(&mut con, "memory", "used_memory");
    let total = total as f64;
    assert!(
        total >= used.min(used_after) - slack && total <= used.max(used_after) + slack,
        "{total} against {used}..{used_after}"
    );
}

/// The database file's size in `dir`.
fn db_bytes(dir: &std::path::Path) -> u64 {
    std::fs::metadata(dir.join("respite.db")).map_or(0, |m| m.len())
}

/// DEL of keys `prefix:c:i` for `i` in `range`, `c` in `0..clients`, in
/// pipelines of 500.
fn delete(
    con: &mut redis::Connection,
    clients: usize,
    range: std::ops::Range<usize>,
    prefix: &str,
) {
    for c in 0..clients {
        let keys: Vec<String> = range
            .clone()
            .map(|i| format!("{prefix}:{c}:{i:08}"))
            .collect();
        for chunk in keys.chunks(500) {
            let mut pipe = redis::pipe();
            for k in chunk {
                pipe.cmd("DEL").arg(k).ignore();
            }
            let _: () = pipe.query(con).expect("pipelined DELs");
        }
    }
}

#[test]
fn deleting_keys_gives_their_space_back_to_the_file_system() {
    // The WAL is copied from 256 KiB on, so that the file follows the
    // deletions while the server runs (SQLite cuts the file's tail when a
    // copy takes in the transactions that freed it).
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let conf = tmp.path().join("respite.toml");
    std::fs::write(&conf, "checkpoint_wal_bytes = 262144\n").unwrap();
    let mut server = Respited::start_in(tmp.path(), &["--config", conf.to_str().unwrap()]);
    let dir = tmp.path().to_path_buf();
    load(&server, 2, 40_000, 200, "shrink");
    let mut con = server.client();
    // Everything copied into the file: a copy is due at every 256 KiB.
    let filler = vec![b'f'; 1000];
    for i in 0..300 {
        let _: () = redis::cmd("SET")
            .arg(format!("filler:{i}"))
            .arg(&filler)
            .query(&mut con)
            .unwrap();
    }
    let full = db_bytes(&dir);
    assert!(full > 8_000_000, "{full}");
    // Three quarters of the keys go.
    delete(&mut con, 2, 0..15_000, "shrink");
    let n: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(n, 10_300);
    // The writer gives the free pages back a step at a time; each copy of
    // the WAL cuts the file. A few writes keep the copies coming.
    let started = Instant::now();
    let mut i = 0;
    while db_bytes(&dir) > full / 2 && started.elapsed() < Duration::from_secs(30) {
        let _: () = redis::cmd("SET")
            .arg(format!("poke:{}", i % 50))
            .arg(&filler)
            .query(&mut con)
            .unwrap();
        i += 1;
        std::thread::sleep(Duration::from_millis(5));
    }
    let shrunk = db_bytes(&dir);
    let freed = info_field(&mut con, "persistence", "vacuum_freed_pages");
    let step = info_field(&mut con, "persistence", "vacuum_step_max_us");
    eprintln!(
        "file {full} -> {shrunk} bytes in {:?}, {freed} pages freed, longest step {step} us",
        started.elapsed()
    );
    assert!(shrunk <= full / 2, "{full} -> {shrunk}");
    assert!(freed > 0.0);
    // The steps are small: a loaded test machine may stretch one, but not
    // into a long stall.
    assert!(step < 50_000.0, "longest vacuum step {step} us");
    // The keys left are all there, whole.
    for c in 0..2 {
        for i in (15_000..20_000).step_by(97) {
            let v: Vec<u8> = redis::cmd("GET")
                .arg(format!("shrink:{c}:{i:08}"))
                .query(&mut con)
                .unwrap();
            assert_eq!(v, vec![b'v'; 200]);
        }
    }
    let gone: Option<Vec<u8>> = redis::cmd("GET")
        .arg("shrink:0:00000001")
        .query(&mut con)
        .unwrap();
    assert_eq!(gone, None);
    drop(con);
    let status = server.terminate();
    assert!(status.success(), "{status:?}");
    let conn = rusqlite::Connection::open(dir.join("respite.db")).unwrap();
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
}

#[test]
fn a_file_made_before_the_defaults_changed_keeps_its_layout() {
    // A file of 512-byte pages without auto_vacuum: what earlier builds
    // made (turned into one by a VACUUM with auto_vacuum off).
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dir = tmp.path().to_path_buf();
    let mut server = Respited::start_in(&dir, &["--page-size", "512"]);
    load(&server, 2, 10_000, 100, "old");
    assert!(server.terminate().success());
    {
        let conn = rusqlite::Connection::open(dir.join("respite.db")).unwrap();
        conn.execute_batch("PRAGMA auto_vacuum = NONE; VACUUM;")
            .unwrap();
        let mode: i64 = conn
            .query_row("PRAGMA auto_vacuum", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, 0);
    }
    // Opened with the defaults (1,024-byte pages for new files).
    let mut server = Respited::start_in(&dir, &[]);
    let mut con = server.client();
    assert_eq!(info_field(&mut con, "persistence", "page_size"), 512.0);
    let n: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(n, 10_000);
    let v: Vec<u8> = redis::cmd("GET")
        .arg("old:1:00004999")
        .query(&mut con)
        .unwrap();
    assert_eq!(v, vec![b'v'; 100]);
    // Its free pages are reused, never moved: the file has no pointer map.
    delete(&mut con, 2, 0..4_000, "old");
    let _: () = redis::cmd("SET")
        .arg("new")
        .arg("value")
        .query(&mut con)
        .unwrap();
    std::thread::sleep(Duration::from_millis(1200));
    assert_eq!(
        info_field(&mut con, "persistence", "vacuum_freed_pages"),
        0.0
    );
    common::assert_still_serves(&mut con);
    drop(con);
    assert!(server.terminate().success());
    let conn = rusqlite::Connection::open(dir.join("respite.db")).unwrap();
    let mode: i64 = conn
        .query_row("PRAGMA auto_vacuum", [], |r| r.get(0))
        .unwrap();
    let page: i64 = conn
        .query_row("PRAGMA page_size", [], |r| r.get(0))
        .unwrap();
    assert_eq!((mode, page), (0, 512));
}

#[test]
fn a_new_file_gets_the_default_layout() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut server = Respited::start_in(tmp.path(), &[]);
    let mut con = server.client();
    assert_eq!(info_field(&mut con, "persistence", "page_size"), 1024.0);
    drop(con);
    assert!(server.terminate().success());
    let conn = rusqlite::Connection::open(tmp.path().join("respite.db")).unwrap();
    let mode: i64 = conn
        .query_row("PRAGMA auto_vacuum", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, 2, "auto_vacuum = INCREMENTAL");
}

//! respite as a replication master, followed by a real redis-server 7.0
//! replica (`--replicaof` respite): the full synchronization of a
//! populated database, the live stream under a concurrent write load of
//! every type (scripts, transactions, relative expiries, random pops,
//! blocked clients served, keys expiring, flushes), WAIT counting the
//! replica's acknowledgements, a broken link continued from the backlog
//! (partial resynchronization), a restarted replica synchronized again in
//! full, and the two datasets compared with DEBUG DIGEST (and key by key
//! with DEBUG DIGEST-VALUE where they differ). The protocol's bytes are
//! checked on a raw PSYNC: `+FULLRESYNC`, the `$<len>` RDB, the stream
//! with its SELECT, and offsets counted as redis counts them.

mod common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::replication::{
    assert_same, con_db, debug_server, info_text, populate, run_load, wait_link_up,
};
use common::{free_port, info_field, RedisServer};
use redis::Connection;

/// Lets the master's sweep delete what expired, then waits until the
/// replica acknowledged everything.
fn settle(master: &mut Connection) {
    std::thread::sleep(Duration::from_millis(600));
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(10_000).query(master).unwrap();
    assert_eq!(acked, 1, "WAIT 1 10000 on the master");
}

#[test]
fn a_redis_replica_follows_a_respite_master_under_load() {
    let (_dir, server) = debug_server();
    let Some(_probe) = RedisServer::start() else {
        return;
    };
    drop(_probe);
    populate(server.port, 300);
    let mut master = server.client();
    // Blocked clients served by pushes replicate as the pops' effects.
    let blocked: Vec<_> = (0..4)
        .map(|i| {
            let port = server.port;
            std::thread::spawn(move || {
                let mut c = con_db(port, 0);
                let _: redis::Value = redis::cmd("BLPOP")
                    .arg(format!("q:{i}"))
                    .arg(30)
                    .query(&mut c)
                    .unwrap();
            })
        })
        .collect();
    let master_port = server.port.to_string();
    let mut replica_srv = None;
    // The replica attaches while the load runs: its snapshot is taken
    // between commits of a busy writer.
    let ops = run_load(server.port, 6, 4, || {
        std::thread::sleep(Duration::from_millis(300));
        replica_srv = RedisServer::start_with(&[
            "--replicaof",
            "127.0.0.1",
            &master_port,
            "--enable-debug-command",
            "yes",
        ]);
    });
    let replica_srv = replica_srv.expect("redis-server");
    assert!(ops > 1000, "the load ran {ops} operations");
    for i in 0..4 {
        let _: i64 = redis::cmd("RPUSH")
            .arg(format!("q:{i}"))
            .arg("a")
            .arg("b")
            .query(&mut master)
            .unwrap();
    }
    for b in blocked {
        b.join().unwrap();
    }
    let mut replica = replica_srv.client();
    wait_link_up(&mut replica, Duration::from_secs(20));
    settle(&mut master);
    assert_same(server.port, replica_srv.port);

    // The master's view of its replica.
    let text = info_text(&mut master, "replication");
    assert!(text.contains("role:master"), "{text}");
    assert!(text.contains("connected_slaves:1"), "{text}");
    let line = format!(
        "slave0:ip=127.0.0.1,port={},state=online,offset=",
        replica_srv.port
    );
    assert!(text.contains(&line), "{text}");
    let offset = info_field(&mut master, "replication", "master_repl_offset");
    let replica_offset = info_field(&mut replica, "replication", "master_repl_offset");
    assert_eq!(offset, replica_offset, "both count the stream alike");
    let role: redis::Value = redis::cmd("ROLE").query(&mut master).unwrap();
    assert!(
        format!("{role:?}").contains(&replica_srv.port.to_string()),
        "{role:?}"
    );

    // A broken link continues from the backlog, under load.
    run_load(server.port, 3, 2, || {
        let _: redis::Value = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("master")
            .query(&mut replica)
            .unwrap();
    });
    wait_link_up(&mut replica, Duration::from_secs(20));
    settle(&mut master);
    assert_same(server.port, replica_srv.port);
    let partial = info_field(&mut master, "stats", "sync_partial_ok");
    assert!(partial >= 1.0, "sync_partial_ok {partial}");

    // FLUSHDB and SWAPDB travel as themselves.
    let _: () = redis::cmd("SWAPDB")
        .arg(0)
        .arg(2)
        .query(&mut master)
        .unwrap();
    let _: () = redis::cmd("FLUSHDB")
        .query(&mut con_db(server.port, 5))
        .unwrap();
    settle(&mut master);
    assert_same(server.port, replica_srv.port);
}

#[test]
fn a_restarted_replica_synchronizes_again_in_full() {
    let (_dir, server) = debug_server();
    populate(server.port, 100);
    let port = free_port();
    // The replica writes the RDB it receives into its directory.
    let dir = tempfile::tempdir().unwrap();
    let spawn = || {
        std::process::Command::new("redis-server")
            .arg("--dir")
            .arg(dir.path())
            .args([
                "--port",
                &port.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
                "--enable-debug-command",
                "yes",
                "--replicaof",
                "127.0.0.1",
                &server.port.to_string(),
            ])
            .stdout(std::process::Stdio::null())
            .spawn()
    };
    let Ok(mut child) = spawn() else {
        common::skip_unless_required("redis-server not found", "RESPITE_REQUIRE_REDIS");
        return;
    };
    let mut master = server.client();
    let connect = || {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(c) = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                .and_then(|c| c.get_connection())
            {
                return c;
            }
            assert!(Instant::now() < deadline, "the replica did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let mut replica = connect();
    wait_link_up(&mut replica, Duration::from_secs(20));
    settle(&mut master);
    assert_same(server.port, port);
    let _ = child.kill();
    let _ = child.wait();
    // Writes while it is away.
    let _: () = redis::cmd("SET")
        .arg("while-away")
        .arg(1)
        .query(&mut master)
        .unwrap();
    let _: () = redis::cmd("DEL").arg("s:1").query(&mut master).unwrap();
    let mut child = spawn().expect("redis-server");
    let mut replica = connect();
    wait_link_up(&mut replica, Duration::from_secs(20));
    settle(&mut master);
    assert_same(server.port, port);
    let full = info_field(&mut master, "stats", "sync_full");
    assert!(full >= 2.0, "sync_full {full}");
    let _ = child.kill();
    let _ = child.wait();
}

/// Reads from `s` until `buf` holds at least `n` bytes.
fn read_at_least(s: &mut std::net::TcpStream, buf: &mut Vec<u8>, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut chunk = [0u8; 65536];
    while buf.len() < n {
        assert!(
            Instant::now() < deadline,
            "only {} of {n} bytes came",
            buf.len()
        );
        match s.read(&mut chunk) {
            Ok(0) => panic!("closed after {} bytes", buf.len()),
            Ok(k) => buf.extend_from_slice(&chunk[..k]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn psync_speaks_redis_protocol_byte_for_byte() {
    let (_dir, server) = debug_server();
    let mut c = server.client();
    let _: () = redis::cmd("SET")
        .arg("before")
        .arg("1")
        .query(&mut c)
        .unwrap();
    let mut raw = server.raw();
    raw.write_all(
        b"REPLCONF listening-port 4444\r\nREPLCONF capa eof capa psync2\r\nPSYNC ? -1\r\n",
    )
    .unwrap();
    let mut buf = Vec::new();
    read_at_least(&mut raw, &mut buf, 10);
    // +OK twice, then +FULLRESYNC <40 hex> <offset>.
    let text = String::from_utf8_lossy(&buf).into_owned();
    assert!(text.starts_with("+OK\r\n+OK\r\n"), "{text:?}");
    while !buf.windows(2).skip(10).any(|w| w == b"\r\n") {
        let want = buf.len() + 1;
        read_at_least(&mut raw, &mut buf, want);
    }
    let line_end = 10 + buf[10..].windows(2).position(|w| w == b"\r\n").unwrap();
    let line = String::from_utf8_lossy(&buf[10..line_end]).into_owned();
    let parts: Vec<&str> = line.split(' ').collect();
    assert_eq!(parts[0], "+FULLRESYNC", "{line}");
    assert_eq!(parts[1].len(), 40);
    let start: u64 = parts[2].parse().unwrap();
    let replid: String = {
        let text = info_text(&mut c, "replication");
        text.lines()
            .find_map(|l| l.strip_prefix("master_replid:"))
            .unwrap()
            .trim()
            .to_string()
    };
    assert_eq!(parts[1], replid);
    // Newlines may come first while the snapshot is written; then $<len>.
    let mut at = line_end + 2;
    loop {
        read_at_least(&mut raw, &mut buf, at + 1);
        if buf[at] == b'\n' {
            at += 1;
            continue;
        }
        break;
    }
    while !buf[at..].windows(2).any(|w| w == b"\r\n") {
        let want = buf.len() + 1;
        read_at_least(&mut raw, &mut buf, want);
    }
    assert_eq!(buf[at], b'$');
    let end = at + buf[at..].windows(2).position(|w| w == b"\r\n").unwrap();
    let len: usize = std::str::from_utf8(&buf[at + 1..end])
        .unwrap()
        .parse()
        .unwrap();
    let rdb_start = end + 2;
    read_at_least(&mut raw, &mut buf, rdb_start + len);
    let rdb = &buf[rdb_start..rdb_start + len];
    assert!(rdb.starts_with(b"REDIS0010"), "{:?}", &rdb[..9]);
    assert!(rdb.windows(6).any(|w| w == b"before"));
    // The stream: SELECT, then the write, counted in the offset.
    let after = rdb_start + len;
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
    let expected = b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n";
    read_at_least(&mut raw, &mut buf, after + expected.len());
    assert_eq!(
        String::from_utf8_lossy(&buf[after..after + expected.len()]),
        String::from_utf8_lossy(expected)
    );
    let offset = info_field(&mut c, "replication", "master_repl_offset") as u64;
    assert_eq!(offset, start + expected.len() as u64);
    // A relative expiry arrives absolute.
    let _: () = redis::cmd("SET")
        .arg("t")
        .arg("v")
        .arg("EX")
        .arg(100)
        .query(&mut c)
        .unwrap();
    let from = after + expected.len();
    read_at_least(&mut raw, &mut buf, from + 20);
    let text = String::from_utf8_lossy(&buf[from..]).into_owned();
    assert!(text.contains("PXAT"), "{text:?}");
    // The replica's acknowledgement, and WAIT counting it.
    raw.write_all(
        format!(
            "*3\r\n$8\r\nREPLCONF\r\n$3\r\nACK\r\n${}\r\n{:020}\r\n",
            20, 0
        )
        .as_bytes(),
    )
    .unwrap();
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(100).query(&mut c).unwrap();
    assert_eq!(acked, 0, "an acknowledgement of offset 0 covers nothing");
    let now = info_field(&mut c, "replication", "master_repl_offset") as u64;
    let ack = now.to_string();
    raw.write_all(
        format!(
            "*3\r\n$8\r\nREPLCONF\r\n$3\r\nACK\r\n${}\r\n{ack}\r\n",
            ack.len()
        )
        .as_bytes(),
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(1000).query(&mut c).unwrap();
    assert_eq!(acked, 1);
    let text = info_text(&mut c, "replication");
    assert!(
        text.contains("slave0:ip=127.0.0.1,port=4444,state=online"),
        "{text}"
    );
}

#[test]
fn redis_cli_rdb_gets_a_file_redis_server_loads() {
    if !common::have_tool("redis-cli") {
        common::skip_unless_required("redis-cli not found", "RESPITE_REQUIRE_REDIS");
        return;
    }
    let (_dir, server) = debug_server();
    populate(server.port, 50);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("dump.rdb");
    let out = std::process::Command::new("redis-cli")
        .args(["-p", &server.port.to_string(), "--rdb"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let Some(redis) = RedisServer::start_with(&[
        "--dir",
        dir.path().to_str().unwrap(),
        "--dbfilename",
        "dump.rdb",
        "--enable-debug-command",
        "yes",
    ]) else {
        return;
    };
    assert_same(server.port, redis.port);
}

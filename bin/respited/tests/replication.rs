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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{free_port, info_field, RedisServer, Respited};
use redis::Connection;

/// Databases the load writes to.
const DBS: [u32; 3] = [0, 2, 5];

/// A respited that allows DEBUG (DIGEST, DIGEST-VALUE), with its directory.
fn debug_server() -> (tempfile::TempDir, Respited) {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("respite.toml");
    std::fs::write(&conf, "enable_debug_command = \"yes\"\n").unwrap();
    let server = Respited::start_in(dir.path(), &["--config", conf.to_str().unwrap()]);
    (dir, server)
}

fn con_db(port: u16, db: u32) -> Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/{db}"))
        .expect("client")
        .get_connection()
        .expect("connect")
}

fn info_text(con: &mut Connection, section: &str) -> String {
    redis::cmd("INFO").arg(section).query(con).expect("INFO")
}

/// Waits until the replica's link is up and it has synchronized.
fn wait_link_up(replica: &mut Connection, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let text = info_text(replica, "replication");
        if text.contains("master_link_status:up") && text.contains("master_sync_in_progress:0") {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the replica's link did not come up: {text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Fills every type, with and without expiries, in several databases.
fn populate(port: u16, n: usize) {
    for db in DBS {
        let mut c = con_db(port, db);
        let mut pipe = redis::pipe();
        for i in 0..n {
            pipe.cmd("SET")
                .arg(format!("s:{i}"))
                .arg(format!("v{i}"))
                .ignore();
            pipe.cmd("HSET")
                .arg(format!("h:{}", i % 50))
                .arg(format!("f{i}"))
                .arg(i)
                .ignore();
            pipe.cmd("RPUSH")
                .arg(format!("l:{}", i % 40))
                .arg(i)
                .ignore();
            pipe.cmd("SADD")
                .arg(format!("set:{}", i % 30))
                .arg(i)
                .ignore();
            pipe.cmd("ZADD")
                .arg(format!("z:{}", i % 20))
                .arg(i as f64 / 3.0)
                .arg(format!("m{i}"))
                .ignore();
            if i % 7 == 0 {
                pipe.cmd("SET")
                    .arg(format!("ttl:{i}"))
                    .arg(i)
                    .arg("EX")
                    .arg(1000)
                    .ignore();
            }
        }
        pipe.cmd("XADD")
            .arg("stream")
            .arg("*")
            .arg("a")
            .arg(1)
            .ignore();
        pipe.cmd("XGROUP")
            .arg("CREATE")
            .arg("stream")
            .arg("g")
            .arg("0")
            .ignore();
        pipe.cmd("PFADD")
            .arg("hll")
            .arg("a")
            .arg("b")
            .arg("c")
            .ignore();
        pipe.query::<()>(&mut c).expect("populate");
    }
}

/// One client's share of the load: every kind of write, until `stop`.
fn load(port: u16, seed: u64, stop: Arc<AtomicBool>) -> u64 {
    let mut cons: Vec<Connection> = DBS.iter().map(|&db| con_db(port, db)).collect();
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut ops = 0;
    while !stop.load(Ordering::Relaxed) {
        let r = next();
        let c = &mut cons[(r % DBS.len() as u64) as usize];
        let k = next() % 60;
        let v = next() % 1000;
        let mut cmd = |args: &[&str]| {
            let mut cmd = redis::cmd(args[0]);
            for a in &args[1..] {
                cmd.arg(*a);
            }
            // Errors (WRONGTYPE between kinds of the same key) are part
            // of the load: they must replicate nothing.
            let _: redis::RedisResult<redis::Value> = cmd.query(c);
        };
        let key = |p: &str| format!("{p}:{k}");
        match next() % 26 {
            0 => cmd(&["SET", &key("s"), &v.to_string()]),
            1 => cmd(&["INCRBY", &key("n"), &v.to_string()]),
            2 => cmd(&["INCRBYFLOAT", &key("f"), "1.5"]),
            3 => cmd(&["APPEND", &key("s"), "x"]),
            4 => cmd(&["HSET", &key("h"), &format!("f{v}"), &v.to_string()]),
            5 => cmd(&["HINCRBYFLOAT", &key("h"), "fl", "0.25"]),
            6 => cmd(&["LPUSH", &key("l"), &v.to_string()]),
            7 => cmd(&["RPOP", &key("l")]),
            8 => cmd(&["SADD", &key("set"), &v.to_string()]),
            9 => cmd(&["SPOP", &key("set")]),
            10 => cmd(&["ZADD", &key("z"), &v.to_string(), &format!("m{v}")]),
            11 => cmd(&["ZINCRBY", &key("z"), "2", &format!("m{}", v % 10)]),
            12 => cmd(&["EXPIRE", &key("s"), "1000"]),
            13 => cmd(&["SET", &key("short"), "x", "PX", &(20 + v % 200).to_string()]),
            14 => cmd(&["DEL", &key("s")]),
            15 => cmd(&["RENAME", &key("l"), &format!("l:{}", (k + 1) % 60)]),
            16 => cmd(&["XADD", "stream", "*", "v", &v.to_string()]),
            17 => cmd(&[
                "EVAL",
                "redis.call('INCR', KEYS[1]); redis.call('SADD', KEYS[2], ARGV[1]); return redis.call('SRANDMEMBER', KEYS[2])",
                "2",
                &key("n"),
                &key("set"),
                &v.to_string(),
            ]),
            18 => {
                let _: redis::RedisResult<()> = redis::pipe()
                    .atomic()
                    .cmd("SET")
                    .arg(key("s"))
                    .arg(v)
                    .cmd("LPUSH")
                    .arg(key("l"))
                    .arg(v)
                    .cmd("HDEL")
                    .arg(key("h"))
                    .arg(format!("f{}", v % 10))
                    .query(c);
            }
            19 => cmd(&["MSET", &key("s"), "1", &format!("s:{}", (k + 7) % 60), "2"]),
            20 => cmd(&["LMOVE", &key("l"), &format!("l:{}", (k + 3) % 60), "LEFT", "RIGHT"]),
            21 => cmd(&["GETEX", &key("s"), "PX", "100000"]),
            22 => cmd(&["PFADD", "hll", &v.to_string()]),
            23 => cmd(&["SETRANGE", &key("s"), "2", "ab"]),
            24 => cmd(&["ZPOPMIN", &key("z")]),
            _ => cmd(&["PERSIST", &key("s")]),
        }
        ops += 1;
    }
    ops
}

/// Both datasets, compared: DBSIZE of each database, DEBUG DIGEST, and
/// key by key where the digests differ.
fn assert_same(master: u16, replica: u16) {
    for db in 0..16 {
        let mut m = con_db(master, db);
        let mut r = con_db(replica, db);
        let mk: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(&mut m).unwrap();
        let mut mk = mk;
        let mut rk: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(&mut r).unwrap();
        mk.sort();
        rk.sort();
        let show = |v: &[Vec<u8>]| {
            v.iter()
                .map(|k| String::from_utf8_lossy(k).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(show(&mk), show(&rk), "the keys of database {db} differ");
        for key in &mk {
            let a: Vec<String> = redis::cmd("DEBUG")
                .arg("DIGEST-VALUE")
                .arg(key)
                .query(&mut m)
                .unwrap();
            let b: Vec<String> = redis::cmd("DEBUG")
                .arg("DIGEST-VALUE")
                .arg(key)
                .query(&mut r)
                .unwrap();
            let pm: i64 = redis::cmd("PEXPIRETIME").arg(key).query(&mut m).unwrap();
            let pr: i64 = redis::cmd("PEXPIRETIME").arg(key).query(&mut r).unwrap();
            assert_eq!(
                (a, pm),
                (b, pr),
                "key {:?} of database {db} differs",
                String::from_utf8_lossy(key)
            );
        }
    }
    let dm: String = redis::cmd("DEBUG")
        .arg("DIGEST")
        .query(&mut con_db(master, 0))
        .unwrap();
    let dr: String = redis::cmd("DEBUG")
        .arg("DIGEST")
        .query(&mut con_db(replica, 0))
        .unwrap();
    assert_eq!(dm, dr, "DEBUG DIGEST differs");
}

/// Lets the master's sweep delete what expired, then waits until the
/// replica acknowledged everything.
fn settle(master: &mut Connection) {
    std::thread::sleep(Duration::from_millis(600));
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(10_000).query(master).unwrap();
    assert_eq!(acked, 1, "WAIT 1 10000 on the master");
}

fn run_load(port: u16, clients: u64, secs: u64, during: impl FnOnce()) -> u64 {
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..clients)
        .map(|i| {
            let stop = stop.clone();
            std::thread::spawn(move || load(port, i + 1, stop))
        })
        .collect();
    during();
    std::thread::sleep(Duration::from_secs(secs));
    stop.store(true, Ordering::Relaxed);
    handles.into_iter().map(|h| h.join().unwrap()).sum()
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

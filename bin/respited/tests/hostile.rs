//! Hostile clients beside well-behaved ones: a client that never reads
//! its replies, one that is killed while the server is stuck writing to
//! it, one that kills itself mid-pipeline, one that drips a huge request.
//! Each runs against a real respited over real sockets while a normal
//! client keeps getting correct replies; the server's memory stays under a
//! stated bound and comes back when the hostile client goes.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{encode, read_until_quiet, Respited};

/// The server's resident memory, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmRSS")
        * 1024
}

/// The ids in CLIENT LIST.
fn client_ids(con: &mut redis::Connection) -> Vec<u64> {
    let list: String = redis::cmd("CLIENT").arg("LIST").query(con).unwrap();
    list.lines()
        .filter_map(|l| l.strip_prefix("id="))
        .filter_map(|l| l.split(' ').next()?.parse().ok())
        .collect()
}

/// Polls `f` until it holds or `timeout` passes.
fn eventually(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    f()
}

/// A client that sends `count` GETs of a 1 MB value and never reads: a
/// small receive buffer, so the server is soon stuck writing to it.
fn greedy_reader(port: u16, count: usize) -> (TcpStream, u64) {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    sock.connect(&std::net::SocketAddr::from(([127, 0, 0, 1], port)).into())
        .unwrap();
    let mut s: TcpStream = sock.into();
    let mut id = Vec::new();
    s.write_all(&encode(&["CLIENT", "ID"])).unwrap();
    let mut buf = [0u8; 64];
    while !id.ends_with(b"\r\n") {
        let n = std::io::Read::read(&mut s, &mut buf).unwrap();
        id.extend_from_slice(&buf[..n]);
    }
    let id: u64 = std::str::from_utf8(&id[1..id.len() - 2])
        .unwrap()
        .parse()
        .unwrap();
    let mut req = Vec::new();
    for _ in 0..count {
        req.extend_from_slice(&encode(&["GET", "big"]));
    }
    s.write_all(&req).unwrap();
    (s, id)
}

fn set_big(con: &mut redis::Connection) {
    let value = vec![b'v'; 1 << 20];
    let _: () = redis::cmd("SET").arg("big").arg(value).query(con).unwrap();
}

/// Redis's `client-output-buffer-limit` for normal clients: a client whose
/// unread replies pass the hard limit is closed, and its memory returns;
/// the others never notice.
#[test]
fn output_buffer_limit_closes_a_client_that_does_not_read() {
    let server = Respited::start(&[]);
    let mut con = server.client();
    set_big(&mut con);
    let limit: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("client-output-buffer-limit")
        .query(&mut con)
        .unwrap();
    assert_eq!(
        limit[1],
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
    );
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("client-output-buffer-limit")
        .arg("normal 8mb 0 0")
        .query(&mut con)
        .unwrap();
    let limit: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("client-output-buffer-limit")
        .query(&mut con)
        .unwrap();
    assert_eq!(
        limit[1],
        "normal 8388608 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
    );
    let (_greedy, id) = greedy_reader(server.port, 300);
    assert!(
        eventually(Duration::from_secs(20), || !client_ids(&mut con)
            .contains(&id)),
        "the client over its limit is still connected"
    );
    common::assert_still_serves(&mut con);
    assert!(
        server
            .wait_log("output buffer limits", Duration::from_secs(5))
            .contains("normal 8388608 0 0"),
        "the close is logged with the limit"
    );
    // A bad value is refused with Redis's text and changes nothing.
    let mut raw = common::raw_for(server.port);
    let got = common::exchange(
        &mut raw,
        &encode(&["CONFIG", "SET", "client-output-buffer-limit", "normal 1 2"]),
        10,
    );
    let got = String::from_utf8_lossy(&got);
    assert_eq!(
        got,
        "-ERR CONFIG SET failed (possibly related to argument 'client-output-buffer-limit') - Wrong number of arguments in buffer limit configuration.\r\n"
    );
    let limit: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("client-output-buffer-limit")
        .query(&mut con)
        .unwrap();
    assert!(limit[1].starts_with("normal 8388608 0 0 "));
}

/// The soft limit closes a client that stays over it for its seconds.
#[test]
fn soft_output_limit_closes_after_its_time() {
    let server = Respited::start(&[]);
    let mut con = server.client();
    set_big(&mut con);
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("client-output-buffer-limit")
        .arg("normal 0 1mb 1")
        .query(&mut con)
        .unwrap();
    let (_greedy, id) = greedy_reader(server.port, 50);
    std::thread::sleep(Duration::from_millis(300));
    assert!(client_ids(&mut con).contains(&id), "closed before its time");
    assert!(
        eventually(Duration::from_secs(10), || !client_ids(&mut con)
            .contains(&id)),
        "still connected after the soft limit's seconds"
    );
}

/// With no limit (Redis's default for normal clients), a client that never
/// reads holds the server's memory only a turn's worth at a time, CLIENT
/// KILL takes effect at once though the server is stuck writing to it, and
/// the memory returns when it goes.
#[test]
fn a_client_that_never_reads_is_bounded_and_killable() {
    let server = Respited::start(&[]);
    let pid = server.pid();
    let mut con = server.client();
    set_big(&mut con);
    let before = rss(pid);
    let (_greedy, id) = greedy_reader(server.port, 1000);
    // Let the server take the requests and get stuck on the socket.
    assert!(eventually(Duration::from_secs(10), || {
        let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut con).unwrap();
        list.lines()
            .any(|l| l.starts_with(&format!("id={id} ")) && !l.contains(" omem=0 "))
    }));
    std::thread::sleep(Duration::from_millis(500));
    let held = rss(pid);
    // 1000 replies of 1 MB are 1 GB; redis-server holds all of them. The
    // bound: a turn's worth (64 replies) a few times over.
    assert!(
        held < before + 400 * 1024 * 1024,
        "RSS grew from {before} to {held}"
    );
    common::assert_still_serves(&mut con);
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(id)
        .query(&mut con)
        .unwrap();
    assert_eq!(killed, 1);
    assert!(
        eventually(Duration::from_secs(2), || !client_ids(&mut con)
            .contains(&id)),
        "a killed client stuck in a write stays listed"
    );
    assert!(
        eventually(Duration::from_secs(5), || rss(pid)
            < before + 64 * 1024 * 1024),
        "memory not returned after the kill: {} -> {}",
        before,
        rss(pid)
    );
}

/// CLIENT KILL of the connection itself ends its pipeline: the reply to the
/// kill is the last one and nothing after it runs, as in redis-server.
#[test]
fn client_kill_of_itself_ends_the_pipeline() {
    let redis = common::RedisServer::start();
    let server = Respited::start(&[]);
    let mut ports = vec![server.port];
    ports.extend(redis.as_ref().map(|r| r.port));
    let mut answers = Vec::new();
    for port in ports {
        let mut s = common::raw_for(port);
        let id = common::exchange(&mut s, &encode(&["CLIENT", "ID"]), 3);
        let id = String::from_utf8_lossy(&id[1..id.len() - 2]).into_owned();
        let mut req = encode(&["CLIENT", "KILL", "ID", &id, "SKIPME", "no"]);
        req.extend_from_slice(&encode(&["SET", "after-kill", "1"]));
        req.extend_from_slice(&encode(&["PING"]));
        s.write_all(&req).unwrap();
        let (got, closed) = read_until_quiet(&mut s, Duration::from_secs(2));
        assert!(closed, "the connection stays open");
        let mut con = common::client_for(port);
        let after: Option<String> = redis::cmd("GET").arg("after-kill").query(&mut con).unwrap();
        answers.push((String::from_utf8_lossy(&got).into_owned(), after));
    }
    assert_eq!(answers[0], (":1\r\n".to_string(), None));
    if answers.len() == 2 {
        assert_eq!(answers[0], answers[1], "respite vs redis-server");
    }
}

/// A request of 600,000 arguments sent a little at a time is framed in
/// linear time: the server's CPU for it stays a small multiple of what the
/// bytes cost, and a well-behaved client is served meanwhile.
#[test]
fn a_huge_request_dripped_slowly_costs_linear_cpu() {
    let server = Respited::start(&[]);
    let pid = server.pid();
    let mut con = server.client();
    let n = 300_000;
    let mut req = format!("*{}\r\n$4\r\nMSET\r\n", n * 2 + 1).into_bytes();
    for i in 0..n {
        let k = format!("k{i}");
        req.extend_from_slice(format!("${}\r\n{k}\r\n$1\r\nv\r\n", k.len()).as_bytes());
    }
    let cpu = || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let fields: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap()
            .split_whitespace()
            .collect();
        // utime and stime, in clock ticks (fields 14 and 15 of stat).
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    };
    let start = cpu();
    let mut s = common::raw_for(server.port);
    // 2,000 writes with a pause between them: each arrives as its own read.
    for chunk in req.chunks(req.len() / 2000 + 1) {
        s.write_all(chunk).unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    // The MSET itself is 300,000 inserts on the writer: generous time.
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let mut reply = [0u8; 5];
    std::io::Read::read_exact(&mut s, &mut reply).unwrap();
    assert_eq!(&reply, b"+OK\r\n");
    // Walking every header again on each of 2,000 reads would cost about
    // 1,000 times the frame's parsing; linear framing costs a few seconds
    // of CPU at most even in a debug build (ticks are 1/100 s).
    let used = cpu() - start;
    assert!(used < 6000, "{used} ticks of CPU for one dripped request");
    common::assert_still_serves(&mut con);
    let v: String = redis::cmd("GET").arg("k299999").query(&mut con).unwrap();
    assert_eq!(v, "v");
}

/// The listen backlog is `tcp_backlog` (511 by default, as redis.conf's
/// `tcp-backlog`), capped by the kernel's somaxconn, on TCP and the Unix
/// socket alike: `ss` shows a listening socket's backlog as its Send-Q.
#[test]
fn listen_backlog_is_tcp_backlog() {
    if !common::have_tool("ss") {
        return;
    }
    let somaxconn: u32 = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let backlog = |server: &Respited| {
        let out = std::process::Command::new("ss")
            .args(["-ltnH", &format!("sport = :{}", server.port)])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let tcp: u32 = text.split_whitespace().nth(2).unwrap().parse().unwrap();
        // The socket is bound under a temporary name and renamed into
        // place, and ss shows the name it was bound under.
        let out = std::process::Command::new("ss")
            .arg("-lxH")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let path = server.socket.display().to_string();
        let line = text
            .lines()
            .find(|l| {
                l.split_whitespace()
                    .nth(4)
                    .is_some_and(|p| p.starts_with(&path))
            })
            .unwrap();
        let unix: u32 = line.split_whitespace().nth(3).unwrap().parse().unwrap();
        (tcp, unix)
    };
    let server = Respited::start(&[]);
    let want = 511.min(somaxconn);
    assert_eq!(backlog(&server), (want, want));
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("respite.toml");
    std::fs::write(&conf, "tcp_backlog = 1000\n").unwrap();
    let server = Respited::start(&["--config", conf.to_str().unwrap()]);
    let want = 1000.min(somaxconn);
    assert_eq!(backlog(&server), (want, want));
}

/// `proto-max-bulk-len` stops at the longest string SQLite stores beside
/// its key (Redis allows up to LONG_MAX, and then aborts on a huge
/// SETRANGE): past it CONFIG SET is refused, so a string a client may
/// build can always be stored and no huge allocation is attempted.
#[test]
fn proto_max_bulk_len_is_bounded_by_what_can_be_stored() {
    let server = Respited::start(&[]);
    let mut raw = common::raw_for(server.port);
    let max = respite_engine::MAX_STRING_LEN;
    for (value, want) in [
        (
            "9223372036854775807".to_string(),
            format!("-ERR CONFIG SET failed (possibly related to argument 'proto-max-bulk-len') - argument must be between 1048576 and {max} inclusive\r\n"),
        ),
        (
            "100".to_string(),
            format!("-ERR CONFIG SET failed (possibly related to argument 'proto-max-bulk-len') - argument must be between 1048576 and {max} inclusive\r\n"),
        ),
        (max.to_string(), "+OK\r\n".to_string()),
    ] {
        let got = common::exchange(
            &mut raw,
            &encode(&["CONFIG", "SET", "proto-max-bulk-len", &value]),
            want.len(),
        );
        assert_eq!(String::from_utf8_lossy(&got), want, "{value}");
    }
    // Past the limit: Redis's error, before anything is allocated.
    let offset = (max as u64 + 10).to_string();
    let got = common::exchange(&mut raw, &encode(&["SETRANGE", "k", &offset, "x"]), 10);
    assert_eq!(
        String::from_utf8_lossy(&got),
        "-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n"
    );
    let mut con = server.client();
    common::assert_still_serves(&mut con);
}

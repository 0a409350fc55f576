//! Hostile clients beside well-behaved ones: a client that never reads
//! its replies, one that is killed while the server is stuck writing to
//! it, one that kills itself mid-pipeline, one that drips a huge request;
//! negative, absurd and over-limit lengths, multibulk counts of 2^31 and
//! 2^63, frames that never end, binary garbage, inline lines past 64 KB,
//! a slowloris sending a byte every 100 ms, 5,000 idle connections,
//! connect/disconnect churn, a request of a million arguments.
//!
//! Each runs against a real respited over real sockets while a
//! [`Watchdog`] client keeps writing and reading back its own keys: every
//! reply must be correct and come within [`LATENCY_BOUND`], the server's
//! resident memory must stay within a bound stated in each test above what
//! it held before, and the server must still be serving at the end. Where
//! redis-server answers the same input (error texts, whether the
//! connection closes), the expected bytes are Redis's, checked against a
//! real redis-server when one is installed.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
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

/// The longest a well-behaved client's SET or GET may take while a hostile
/// one does its worst. What it catches is the multi-second stalls of issue
/// 13 (a writer held 9.6 s by one WATCH, a runtime thread busy re-parsing
/// a dripped request for 26 s). A debug build on a loaded 2-core machine
/// needs room: a request of a million arguments that arrives at once is
/// framed and split into arguments in one go on its connection's runtime
/// thread (as redis-server does on its only one), which took up to 3.8 s
/// there (in release a probe client waited at most 57 ms for ECHO and
/// 123 ms for EXISTS of a million arguments, see docs/durability.md), and
/// the test process builds its own 14 MB requests meanwhile.
const LATENCY_BOUND: Duration = if cfg!(debug_assertions) {
    Duration::from_secs(8)
} else {
    Duration::from_secs(1)
};

const MB: u64 = 1024 * 1024;

/// A well-behaved client on its own connection: SET a fresh value, GET it
/// back, again and again, until stopped. Every reply is checked, and the
/// slowest round trip is kept.
struct Watchdog {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<(u64, Duration)>,
}

impl Watchdog {
    fn start(port: u16) -> Watchdog {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut con = common::client_for(port);
            let key = format!("watchdog:{}", std::process::id());
            let (mut rounds, mut slowest) = (0u64, Duration::ZERO);
            let started = Instant::now();
            while !flag.load(Ordering::Relaxed) {
                let t = Instant::now();
                let _: () = redis::cmd("SET")
                    .arg(&key)
                    .arg(rounds)
                    .query(&mut con)
                    .expect("watchdog SET");
                let got: u64 = redis::cmd("GET")
                    .arg(&key)
                    .query(&mut con)
                    .expect("watchdog GET");
                assert_eq!(got, rounds, "the watchdog read another value back");
                let took = t.elapsed();
                if took > Duration::from_millis(500) {
                    eprintln!(
                        "watchdog: a round took {took:?}, {:?} after the start",
                        started.elapsed()
                    );
                }
                slowest = slowest.max(took);
                rounds += 1;
                std::thread::sleep(Duration::from_millis(5));
            }
            (rounds, slowest)
        });
        Watchdog { stop, thread }
    }

    /// Stops it and asserts it was served, correctly and in time.
    fn finish(self, case: &str) {
        self.stop.store(true, Ordering::Relaxed);
        let (rounds, slowest) = self.thread.join().expect("watchdog thread");
        assert!(rounds > 0, "{case}: the watchdog was never served");
        assert!(
            slowest < LATENCY_BOUND,
            "{case}: a well-behaved client waited {slowest:?} ({rounds} rounds)"
        );
        eprintln!("{case}: watchdog {rounds} rounds, slowest {slowest:?}");
    }
}

/// Asserts the server's RSS is within `bound` bytes of `before`.
fn assert_rss_within(pid: u32, before: u64, bound: u64, case: &str) {
    let now = rss(pid);
    eprintln!(
        "{case}: RSS {} MB -> {} MB (bound +{} MB)",
        before / MB,
        now / MB,
        bound / MB
    );
    assert!(
        now < before + bound,
        "{case}: RSS grew from {before} to {now}, past the bound of {bound}"
    );
}

/// Raises this process's soft open-files limit to its hard limit (the
/// tests open thousands of sockets).
fn raise_own_fd_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read or write one struct we own.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
        lim.rlim_cur = lim.rlim_max;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &lim), 0);
    }
    lim.rlim_cur
}

/// The soft and hard open-files limits of a process, from /proc.
fn fd_limits(pid: u32) -> (u64, u64) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("limits");
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("Max open files");
    let nums: Vec<u64> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    (nums[0], nums[1])
}

/// Inputs a client may send on a fresh connection, and what redis-server
/// 7.0 answers to each: its reply bytes, and whether it then closes the
/// connection (`false`: it is still waiting for the rest of the frame, or
/// answered and waits for more).
fn hostile_frames() -> Vec<(Vec<u8>, &'static str, bool)> {
    let invalid_mbulk = "-ERR Protocol error: invalid multibulk length\r\n";
    let invalid_bulk = "-ERR Protocol error: invalid bulk length\r\n";
    let mut frames: Vec<(Vec<u8>, &'static str, bool)> = vec![
        // A negative count is an empty frame, skipped.
        (b"*-5\r\n*1\r\n$4\r\nPING\r\n".to_vec(), "+PONG\r\n", false),
        // Counts of 2^31 and more are refused; 2^31 - 1 is accepted and
        // waited on (nothing may be allocated for it up front).
        (b"*2147483648\r\n".to_vec(), invalid_mbulk, true),
        (b"*2147483647\r\n".to_vec(), "", false),
        (b"*9223372036854775807\r\n".to_vec(), invalid_mbulk, true),
        (b"*9223372036854775808\r\n".to_vec(), invalid_mbulk, true),
        (b"*18446744073709551616\r\n".to_vec(), invalid_mbulk, true),
        (b"*-9223372036854775809\r\n".to_vec(), invalid_mbulk, true),
        // Bulk lengths: negative, past proto-max-bulk-len (512 MB), past
        // 2^31, past 2^63. Exactly 512 MB is accepted and waited on.
        (b"*1\r\n$-1\r\n".to_vec(), invalid_bulk, true),
        (b"*1\r\n$-5\r\n".to_vec(), invalid_bulk, true),
        (b"*1\r\n$536870913\r\n".to_vec(), invalid_bulk, true),
        (b"*1\r\n$536870912\r\n".to_vec(), "", false),
        (b"*1\r\n$2147483648\r\n".to_vec(), invalid_bulk, true),
        (
            b"*1\r\n$9223372036854775807\r\n".to_vec(),
            invalid_bulk,
            true,
        ),
        (
            b"*1\r\n$9223372036854775808\r\n".to_vec(),
            invalid_bulk,
            true,
        ),
        // Unterminated frames: waited on, nothing answered.
        (b"*3\r\n$3\r\nSET\r\n$1\r\nk".to_vec(), "", false),
        (b"*1\r\n$4\r\nPI".to_vec(), "", false),
        (b"*1\r\n$4\r\nPING".to_vec(), "", false),
        (b"PING".to_vec(), "", false),
        // A bulk followed by two bytes other than CRLF: Redis skips them.
        (b"*1\r\n$4\r\nPINGxx\r\n".to_vec(), "+PONG\r\n", false),
        // Empty lines between frames are skipped.
        (b"\r\n\r\n*1\r\n$4\r\nPING\r\n".to_vec(), "+PONG\r\n", false),
        // Binary garbage as an inline line with a NUL before its end:
        // Redis looks for the end with strchr, which stops at the NUL, so
        // it waits. (In a multibulk header, `*1\r\n\x00\x01\r\n`, Redis
        // waits too; respite answers "expected '$', got '\0'" and closes,
        // which is left as it is.)
        (b"\x00\xff\xfe garbage\r\n".to_vec(), "", false),
    ];
    // Lines past 64 KB with no end in sight.
    frames.push((
        vec![b'x'; 70_000],
        "-ERR Protocol error: too big inline request\r\n",
        true,
    ));
    let mut count = b"*".to_vec();
    count.extend(vec![b'1'; 70_000]);
    frames.push((
        count,
        "-ERR Protocol error: too big mbulk count string\r\n",
        true,
    ));
    let mut bulk = b"*1\r\n$".to_vec();
    bulk.extend(vec![b'1'; 70_000]);
    frames.push((
        bulk,
        "-ERR Protocol error: too big bulk count string\r\n",
        true,
    ));
    frames
}

/// Every frame of [`hostile_frames`], each on its own connection, all
/// held open together: the server answers each as redis-server does, the
/// watchdog is served meanwhile, and the frames that announce huge sizes
/// (2^31 - 1 arguments, a 512 MB bulk) cost no memory up front.
#[test]
fn absurd_lengths_unterminated_frames_and_garbage() {
    let redis = common::RedisServer::start();
    let server = Respited::start(&[]);
    let pid = server.pid();
    let before = rss(pid);
    let watchdog = Watchdog::start(server.port);
    let mut held = Vec::new();
    for (input, want, closes) in hostile_frames() {
        let mut ports = vec![server.port];
        ports.extend(redis.as_ref().map(|r| r.port));
        for port in ports {
            let mut s = common::raw_for(port);
            s.write_all(&input).unwrap();
            let (got, closed) = read_until_quiet(&mut s, Duration::from_millis(300));
            let shown = String::from_utf8_lossy(&input[..input.len().min(40)]).into_owned();
            let who = if port == server.port {
                "respite"
            } else {
                "redis-server"
            };
            assert_eq!(
                (String::from_utf8_lossy(&got).as_ref(), closed),
                (want, closes),
                "{who}, input {shown:?} ({} bytes)",
                input.len()
            );
            if port == server.port && !closed {
                held.push(s);
            }
        }
    }
    // Random binary garbage in big pieces, on connections of its own.
    let mut rng = rand::rng();
    for _ in 0..20 {
        let len = rand::Rng::random_range(&mut rng, 1..200_000);
        let junk: Vec<u8> = (0..len).map(|_| rand::Rng::random(&mut rng)).collect();
        let mut s = common::raw_for(server.port);
        // The server may close on the first bad byte: a failed write is
        // the garbage refused, not a test failure.
        let _ = s.write_all(&junk);
        held.push(s);
    }
    std::thread::sleep(Duration::from_millis(300));
    // 2^31 - 1 argument slots or a 512 MB buffer allocated up front would
    // be gigabytes; what the held connections may cost is their buffers.
    assert_rss_within(pid, before, 64 * MB, "absurd lengths");
    watchdog.finish("absurd lengths");
    let mut con = server.client();
    common::assert_still_serves(&mut con);
    drop(held);
}

/// A slowloris: clients that each send a command one byte every 100 ms.
/// They are answered correctly once their command is whole, and nobody
/// else waits for them. CI sends a short command (3 s); set
/// `RESPITE_SLOWLORIS_SECS` for a longer run (the value is padded out to
/// take that long).
#[test]
fn slowloris_one_byte_per_100ms() {
    let secs: usize = std::env::var("RESPITE_SLOWLORIS_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let server = Respited::start(&[]);
    let pid = server.pid();
    let before = rss(pid);
    let watchdog = Watchdog::start(server.port);
    let clients = 50;
    // The command's bytes, padded so that it takes `secs` to send.
    let value_len = (secs * 10).saturating_sub(40).max(1);
    let value = "v".repeat(value_len);
    let mut slow: Vec<(TcpStream, Vec<u8>)> = (0..clients)
        .map(|i| {
            let s = common::raw_for(server.port);
            (s, encode(&["SET", &format!("slow:{i:02}"), &value]))
        })
        .collect();
    let len = slow[0].1.len();
    for at in 0..len {
        for (s, req) in &mut slow {
            s.write_all(&req[at..at + 1]).unwrap();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    for (s, _) in &mut slow {
        let got = common::exchange(s, b"", 5);
        assert_eq!(got, b"+OK\r\n");
    }
    assert_rss_within(pid, before, 32 * MB, "slowloris");
    watchdog.finish("slowloris");
    let mut con = server.client();
    let got: String = redis::cmd("GET").arg("slow:49").query(&mut con).unwrap();
    assert_eq!(got, value);
}

/// CONFIG SET maxclients raises the open files limit as redis-server's
/// `updateMaxclients` does, and refuses a number the system cannot hold in
/// redis's words, naming the most it can, and leaving the setting as it
/// was. (No process may pass the kernel's `fs.nr_open`, privileged or
/// not, so asking for that many clients is refused everywhere.) The
/// refusal is compared with redis-server's under the same limit, numbers
/// aside: redis reserves 32 descriptors, respite 64.
#[test]
fn config_set_maxclients_raises_the_open_files_limit() {
    let server = Respited::start_under_shell("ulimit -Sn 256", &["--maxclients", "100"]);
    let pid = server.pid();
    let (soft, hard) = fd_limits(pid);
    assert_eq!(soft, 256, "enough for 100 clients: left as it was");
    let mut con = server.client();
    let set = |con: &mut redis::Connection, n: u64| {
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxclients")
            .arg(n)
            .query::<()>(con)
            .map_err(|e| format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or("")))
    };
    let get = |con: &mut redis::Connection| -> Vec<String> {
        redis::cmd("CONFIG")
            .arg("GET")
            .arg("maxclients")
            .query(con)
            .unwrap()
    };
    if hard >= 1000 + 64 {
        set(&mut con, 1000).unwrap();
        assert_eq!(fd_limits(pid).0, 1064, "raised to maxclients + 64");
        // Past the old limit of 256, connections are accepted.
        let many: Vec<TcpStream> = (0..300).map(|_| common::raw_for(server.port)).collect();
        let mut last = many.last().unwrap().try_clone().unwrap();
        assert_eq!(
            common::exchange(&mut last, &encode(&["PING"]), 7),
            b"+PONG\r\n"
        );
    } else {
        eprintln!("hard limit {hard}: the raise to 1064 is not checked");
    }
    let soft = fd_limits(pid).0;
    set(&mut con, 50).unwrap();
    assert_eq!(
        fd_limits(pid).0,
        soft,
        "a lower maxclients leaves the limit"
    );
    let nr_open: u64 = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .expect("fs.nr_open")
        .trim()
        .parse()
        .unwrap();
    let err = set(&mut con, nr_open).unwrap_err();
    let limit = fd_limits(pid).0;
    assert_eq!(
        err,
        format!(
            "ERR CONFIG SET failed (possibly related to argument 'maxclients') - The operating \
             system is not able to handle the specified number of clients, try with {}",
            limit - 64
        )
    );
    assert_eq!(get(&mut con), ["maxclients", "50"], "refused: unchanged");
    // The number it named is accepted.
    set(&mut con, limit - 64).unwrap();
    assert_eq!(get(&mut con)[1], (limit - 64).to_string());

    // redis-server under the same soft limit refuses in the same words.
    let found = std::process::Command::new("redis-server")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        common::skip_unless_required("redis-server not found", "RESPITE_REQUIRE_REDIS");
        return;
    }
    let port = common::free_port();
    let dir = tempfile::tempdir().unwrap();
    let mut redis = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -Sn 256; exec redis-server --port {port} --bind 127.0.0.1 --save '' \
             --appendonly no --maxclients 100 --dir '{}'",
            dir.path().display()
        ))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("redis-server");
    assert!(
        eventually(Duration::from_secs(10), || TcpStream::connect((
            "127.0.0.1",
            port
        ))
        .is_ok()),
        "redis-server did not start"
    );
    let mut theirs = common::client_for(port);
    let digits = |s: &str| {
        s.chars()
            .filter(|c| !c.is_ascii_digit())
            .collect::<String>()
    };
    let theirs_err = set(&mut theirs, nr_open).unwrap_err();
    let _ = redis.kill();
    let _ = redis.wait();
    assert_eq!(digits(&theirs_err), digits(&err), "{theirs_err}");
}

/// 5,000 idle connections: respited raises its own open-files limit at
/// start (as redis-server does for `maxclients`), holds them all at a
/// bounded cost each, serves them and the watchdog, and lets them go.
#[test]
fn five_thousand_idle_connections() {
    let limit = raise_own_fd_limit();
    let n = 5000;
    if limit < n + 200 {
        eprintln!("skipping: this process may open only {limit} files");
        return;
    }
    // Started with a soft limit of 1024, as from a login shell: it raises
    // its own toward the hard limit and says so.
    let server = Respited::start_under_shell("ulimit -Sn 1024", &[]);
    let pid = server.pid();
    let (soft, hard) = fd_limits(pid);
    assert_eq!(
        soft,
        hard.min(10_000 + 64),
        "soft limit raised toward the hard"
    );
    assert!(
        server
            .startup_log
            .iter()
            .any(|l| l.contains("raised the open files limit") && l.contains("from=1024")),
        "the raise is logged: {:?}",
        server.startup_log
    );
    let before = rss(pid);
    let watchdog = Watchdog::start(server.port);
    let idle: Vec<TcpStream> = (0..n).map(|_| common::raw_for(server.port)).collect();
    let mut con = server.client();
    assert!(
        eventually(Duration::from_secs(20), || common::info_field(
            &mut con,
            "clients",
            "connected_clients"
        ) as u64
            >= n + 2),
        "not every idle connection was accepted"
    );
    // Every one of them is still a working connection.
    for s in idle.iter().step_by(50) {
        let mut s = s.try_clone().unwrap();
        assert_eq!(
            common::exchange(&mut s, &encode(&["PING"]), 7),
            b"+PONG\r\n"
        );
    }
    // What an idle connection costs: its task and small buffers.
    assert_rss_within(pid, before, 200 * MB, "5000 idle connections");
    watchdog.finish("5000 idle connections");
    drop(idle);
    assert!(
        eventually(Duration::from_secs(20), || common::info_field(
            &mut con,
            "clients",
            "connected_clients"
        ) == 1.0),
        "closed connections still counted"
    );
}

/// Connect/disconnect churn: threads that connect and close at once, send
/// half a command and close, or run one PING and close, thousands of
/// times. The watchdog is served throughout, the server's client count
/// returns to where it was, and its memory does not grow with the churn.
#[test]
fn connect_disconnect_churn() {
    let server = Respited::start(&[]);
    let pid = server.pid();
    let before = rss(pid);
    let watchdog = Watchdog::start(server.port);
    let port = server.port;
    let churners: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                for i in 0..750 {
                    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
                    match (i + t) % 3 {
                        0 => {}
                        1 => {
                            let _ = s.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$10\r\nabc");
                        }
                        _ => {
                            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                            assert_eq!(
                                common::exchange(&mut s, &encode(&["PING"]), 7),
                                b"+PONG\r\n"
                            );
                        }
                    }
                }
            })
        })
        .collect();
    for c in churners {
        c.join().expect("churn thread");
    }
    let mut con = server.client();
    assert!(
        eventually(Duration::from_secs(10), || common::info_field(
            &mut con,
            "clients",
            "connected_clients"
        ) == 2.0),
        "churned connections still counted"
    );
    let received = common::info_field(&mut con, "stats", "total_connections_received");
    assert!(received >= 3000.0, "{received} connections received");
    assert_rss_within(pid, before, 48 * MB, "churn");
    watchdog.finish("churn");
    // The half-sent SETs never ran.
    let k: Option<String> = redis::cmd("GET").arg("k").query(&mut con).unwrap();
    assert_eq!(k, None);
}

/// A request of a million arguments on its own connection: read whole,
/// answered as redis-server answers it (ECHO's arity error), its memory
/// returned, and nobody else waits for it; then a million-key EXISTS, read
/// on the pool while the watchdog writes.
#[test]
fn a_million_arguments() {
    let redis = common::RedisServer::start();
    let server = Respited::start(&[]);
    let pid = server.pid();
    let before = rss(pid);
    let watchdog = Watchdog::start(server.port);
    let n = 1_000_000;
    let mut echo = format!("*{}\r\n$4\r\nECHO\r\n", n + 1).into_bytes();
    let mut exists = format!("*{}\r\n$6\r\nEXISTS\r\n", n + 1).into_bytes();
    for i in 0..n {
        let arg = format!("${}\r\nk{i}\r\n", format!("k{i}").len());
        echo.extend_from_slice(arg.as_bytes());
        exists.extend_from_slice(arg.as_bytes());
    }
    let want = "-ERR wrong number of arguments for 'echo' command\r\n";
    let mut ports = vec![server.port];
    ports.extend(redis.as_ref().map(|r| r.port));
    for port in ports {
        let mut s = common::raw_for(port);
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let got = common::exchange(&mut s, &echo, want.len());
        assert_eq!(String::from_utf8_lossy(&got), want, "port {port}");
    }
    let mut s = common::raw_for(server.port);
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let got = common::exchange(&mut s, &exists, 4);
    assert_eq!(got, b":0\r\n");
    // The request is 14 MB on the wire; its parsed arguments a few times
    // that while it runs.
    assert_rss_within(pid, before, 300 * MB, "a million arguments");
    watchdog.finish("a million arguments");
    let mut con = server.client();
    common::assert_still_serves(&mut con);
}

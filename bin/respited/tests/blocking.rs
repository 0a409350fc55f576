//! Blocking pops (BLPOP, BRPOP, BLMOVE, BLMPOP...) with real clients on real
//! connections, each blocked client on its own thread.
//!
//! The scenarios whose outcome Redis defines (who is served first, from
//! which key, what a transaction's pushes wake, what a timeout answers) run
//! against respited and, where it is installed, a real redis-server, and
//! must give the same, stated results on both. The crash tests (SIGKILL
//! while clients are blocked, and a producer/consumer queue across a
//! SIGKILL and restart) are respite's own.

mod common;

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{client_for, encode, info_field, raw_for, RedisServer, Respited};

/// The servers a shared scenario runs on: respited, and redis-server when
/// it is installed (kept alive by the returned guards).
fn servers() -> (Respited, Option<RedisServer>, Vec<(&'static str, u16)>) {
    let respite = Respited::start(&[]);
    let redis = RedisServer::start();
    let mut ports = vec![("respite", respite.port)];
    if let Some(r) = &redis {
        ports.push(("redis-server", r.port));
    }
    (respite, redis, ports)
}

/// Waits until `n` clients are blocked on the server at `port`.
fn wait_blocked(port: u16, n: f64) {
    let mut con = client_for(port);
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_field(&mut con, "clients", "blocked_clients") != n {
        assert!(Instant::now() < deadline, "never saw {n} blocked clients");
        thread::sleep(Duration::from_millis(5));
    }
}

/// Runs `args` on a new connection on its own thread (it may block).
fn spawn_cmd(port: u16, args: &[&str]) -> thread::JoinHandle<redis::Value> {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    thread::spawn(move || {
        let mut con = client_for(port);
        let mut cmd = redis::cmd(&args[0]);
        for a in &args[1..] {
            cmd.arg(a);
        }
        cmd.query::<redis::Value>(&mut con)
            .expect("blocking command")
    })
}

fn run(port: u16, args: &[&str]) -> redis::Value {
    let mut con = client_for(port);
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(&mut con).expect("command")
}

fn text(v: &redis::Value) -> String {
    match v {
        redis::Value::Nil => "nil".into(),
        redis::Value::Int(n) => n.to_string(),
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        redis::Value::Okay => "OK".into(),
        redis::Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(text).collect();
            format!("[{}]", inner.join(" "))
        }
        other => format!("{other:?}"),
    }
}

#[test]
fn blocked_clients_are_served_in_the_order_they_blocked() {
    let (_r, _s, ports) = servers();
    for (name, port) in ports {
        let mut waiters = Vec::new();
        for i in 0..3 {
            waiters.push(spawn_cmd(port, &["BLPOP", "q", "0"]));
            wait_blocked(port, (i + 1) as f64);
        }
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query(&mut client_for(port))
            .expect("CLIENT LIST");
        assert_eq!(list.matches("flags=b").count(), 3, "{name}: {list}");
        assert_eq!(text(&run(port, &["RPUSH", "q", "a", "b", "c", "d"])), "4");
        let got: Vec<String> = waiters
            .into_iter()
            .map(|h| text(&h.join().expect("waiter")))
            .collect();
        assert_eq!(got, ["[q a]", "[q b]", "[q c]"], "{name}");
        assert_eq!(
            text(&run(port, &["LRANGE", "q", "0", "-1"])),
            "[d]",
            "{name}"
        );
        wait_blocked(port, 0.0);
    }
}

#[test]
fn several_keys_and_a_transaction_wake_as_in_redis() {
    let (_r, _s, ports) = servers();
    for (name, port) in ports {
        // Served from the key that became ready, whatever its place.
        let w = spawn_cmd(port, &["BRPOP", "k1", "k2", "k3", "0"]);
        wait_blocked(port, 1.0);
        run(port, &["RPUSH", "k3", "x", "y"]);
        assert_eq!(text(&w.join().expect("waiter")), "[k3 y]", "{name}");

        // A transaction's pushes wake only once it is over, from the key
        // readied first.
        let w = spawn_cmd(port, &["BLPOP", "t1", "t2", "0"]);
        wait_blocked(port, 1.0);
        let mut con = client_for(port);
        let replies: Vec<redis::Value> = redis::pipe()
            .atomic()
            .cmd("RPUSH")
            .arg("t2")
            .arg("a")
            .cmd("RPUSH")
            .arg("t1")
            .arg("b")
            .cmd("LLEN")
            .arg("t2")
            .query(&mut con)
            .expect("EXEC");
        // Inside the transaction nobody has popped yet.
        assert_eq!(text(&replies[2]), "1", "{name}");
        assert_eq!(text(&w.join().expect("waiter")), "[t2 a]", "{name}");

        // A transaction that pushes and deletes leaves the client blocked.
        let w = spawn_cmd(port, &["BLPOP", "gone", "0"]);
        wait_blocked(port, 1.0);
        let _: Vec<redis::Value> = redis::pipe()
            .atomic()
            .cmd("RPUSH")
            .arg("gone")
            .arg("x")
            .cmd("DEL")
            .arg("gone")
            .query(&mut con)
            .expect("EXEC");
        thread::sleep(Duration::from_millis(100));
        assert_eq!(info_field(&mut con, "clients", "blocked_clients"), 1.0);
        run(port, &["RPUSH", "gone", "later"]);
        assert_eq!(text(&w.join().expect("waiter")), "[gone later]", "{name}");

        // Inside MULTI a blocking command does not block.
        let replies: Vec<redis::Value> = redis::pipe()
            .atomic()
            .cmd("BLPOP")
            .arg("empty")
            .arg(0)
            .cmd("BLMOVE")
            .arg("empty")
            .arg("x")
            .arg("LEFT")
            .arg("LEFT")
            .arg(0)
            .query(&mut con)
            .expect("EXEC");
        assert_eq!(text(&replies[0]), "nil", "{name}");
        assert_eq!(text(&replies[1]), "nil", "{name}");
    }
}

#[test]
fn renames_and_moves_that_create_a_list_wake_waiters() {
    let (_r, _s, ports) = servers();
    for (name, port) in ports {
        let w = spawn_cmd(port, &["BLPOP", "q", "0"]);
        wait_blocked(port, 1.0);
        run(port, &["RPUSH", "tmp", "r1"]);
        run(port, &["RENAME", "tmp", "q"]);
        assert_eq!(text(&w.join().expect("waiter")), "[q r1]", "{name}");

        let w = spawn_cmd(port, &["BLPOP", "q", "0"]);
        wait_blocked(port, 1.0);
        run(port, &["RPUSH", "src", "m1"]);
        run(port, &["LMOVE", "src", "q", "LEFT", "RIGHT"]);
        assert_eq!(text(&w.join().expect("waiter")), "[q m1]", "{name}");

        // A chain: A moves q1 -> q2 where B waits.
        let a = spawn_cmd(port, &["BLMOVE", "q1", "q2", "RIGHT", "LEFT", "0"]);
        wait_blocked(port, 1.0);
        let b = spawn_cmd(port, &["BLPOP", "q2", "0"]);
        wait_blocked(port, 2.0);
        run(port, &["RPUSH", "q1", "x"]);
        assert_eq!(text(&a.join().expect("A")), "x", "{name}");
        assert_eq!(text(&b.join().expect("B")), "[q2 x]", "{name}");
        assert_eq!(text(&run(port, &["EXISTS", "q1", "q2"])), "0", "{name}");

        // Sorted sets: the lowest score first, BZMPOP with a count.
        let a = spawn_cmd(port, &["BZPOPMIN", "zq", "0"]);
        wait_blocked(port, 1.0);
        let b = spawn_cmd(port, &["BZMPOP", "0", "1", "zq", "MAX", "COUNT", "5"]);
        wait_blocked(port, 2.0);
        run(port, &["ZADD", "zq", "2", "b", "1", "a", "3", "c"]);
        assert_eq!(text(&a.join().expect("A")), "[zq a 1]", "{name}");
        assert_eq!(text(&b.join().expect("B")), "[zq [[c 3] [b 2]]]", "{name}");

        // BLMPOP with a count.
        let w = spawn_cmd(
            port,
            &["BLMPOP", "0", "2", "m1", "m2", "RIGHT", "COUNT", "2"],
        );
        wait_blocked(port, 1.0);
        run(port, &["RPUSH", "m2", "a", "b", "c"]);
        assert_eq!(text(&w.join().expect("waiter")), "[m2 [c b]]", "{name}");
    }
}

#[test]
fn timeouts_and_client_unblock() {
    let (_r, _s, ports) = servers();
    for (name, port) in ports {
        let started = Instant::now();
        assert_eq!(text(&run(port, &["BLPOP", "none", "0.3"])), "nil", "{name}");
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(290), "{name}: {took:?}");
        assert!(took < Duration::from_secs(3), "{name}: {took:?}");
        assert_eq!(
            text(&run(port, &["BLMOVE", "none", "x", "LEFT", "LEFT", "0.05"])),
            "nil"
        );

        let mut con = client_for(port);
        let mut blocked = client_for(port);
        let id: i64 = redis::cmd("CLIENT")
            .arg("ID")
            .query(&mut blocked)
            .expect("ID");
        let h = thread::spawn(move || {
            let first = redis::cmd("BLPOP")
                .arg("u")
                .arg(0)
                .query::<redis::Value>(&mut blocked);
            let second = redis::cmd("BLPOP")
                .arg("u")
                .arg(0)
                .query::<redis::Value>(&mut blocked);
            (first.map(|v| text(&v)), second.map_err(|e| e.to_string()))
        });
        wait_blocked(port, 1.0);
        let unblocked: i64 = redis::cmd("CLIENT")
            .arg("UNBLOCK")
            .arg(id)
            .query(&mut con)
            .expect("UNBLOCK");
        assert_eq!(unblocked, 1, "{name}");
        wait_blocked(port, 1.0);
        let unblocked: i64 = redis::cmd("CLIENT")
            .arg("UNBLOCK")
            .arg(id)
            .arg("ERROR")
            .query(&mut con)
            .expect("UNBLOCK ERROR");
        assert_eq!(unblocked, 1, "{name}");
        let (first, second) = h.join().expect("blocked client");
        assert_eq!(first.expect("first"), "nil", "{name}");
        let err = second.expect_err("UNBLOCK ERROR answers an error");
        assert!(
            err.contains("client unblocked via CLIENT UNBLOCK"),
            "{name}: {err}"
        );
        // Not blocked now.
        let unblocked: i64 = redis::cmd("CLIENT")
            .arg("UNBLOCK")
            .arg(id)
            .query(&mut con)
            .expect("UNBLOCK");
        assert_eq!(unblocked, 0, "{name}");
    }
}

#[test]
fn a_blocked_client_that_goes_away_takes_nothing() {
    let (_r, _s, ports) = servers();
    for (name, port) in ports {
        let mut raw = raw_for(port);
        raw.write_all(&encode(&["BLPOP", "q", "0"])).expect("send");
        wait_blocked(port, 1.0);
        drop(raw);
        wait_blocked(port, 0.0);
        run(port, &["RPUSH", "q", "kept"]);
        assert_eq!(
            text(&run(port, &["LRANGE", "q", "0", "-1"])),
            "[kept]",
            "{name}"
        );

        // CLIENT KILL ends a wait at once.
        let mut raw = raw_for(port);
        raw.write_all(&encode(&["CLIENT", "ID"])).expect("send");
        let mut buf = [0u8; 64];
        let n = raw.read(&mut buf).expect("id");
        let id = String::from_utf8_lossy(&buf[1..n]).trim().to_string();
        raw.write_all(&encode(&["BLPOP", "q2", "0"])).expect("send");
        wait_blocked(port, 1.0);
        assert_eq!(text(&run(port, &["CLIENT", "KILL", "ID", &id])), "1");
        wait_blocked(port, 0.0);
        let n = raw.read(&mut buf).unwrap_or(0);
        assert_eq!(n, 0, "{name}: the killed client's connection is closed");
    }
}

/// Many blocked clients cost nothing while they wait and do not hold up
/// the writer or other clients.
#[test]
fn a_thousand_blocked_clients_do_not_hold_anything_up() {
    // A thousand, unless the open-file limit (which the server inherits
    // too, and other tests share in this process) is too low for it.
    let limit: usize = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|l| {
            l.lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3)?.parse().ok())
        })
        .unwrap_or(1024);
    let n = 1000.min(limit.saturating_sub(400) / 2).max(100);
    let server = Respited::start(&[]);
    let mut streams = Vec::new();
    for i in 0..n {
        let mut raw = raw_for(server.port);
        raw.write_all(&encode(&["BLPOP", &format!("idle{i}"), "0"]))
            .expect("send");
        streams.push(raw);
    }
    wait_blocked(server.port, n as f64);
    let mut con = server.client();
    for i in 0..200 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(i)
            .query(&mut con)
            .expect("SET");
    }
    let got: i64 = redis::cmd("GET").arg("k199").query(&mut con).expect("GET");
    assert_eq!(got, 199);
    // Idle: the process sleeps (its CPU time barely moves in a second).
    let cpu = |pid: u32| -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
        let fields: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .collect();
        fields[11].parse::<u64>().unwrap_or(0) + fields[12].parse::<u64>().unwrap_or(0)
    };
    let before = cpu(server.pid());
    thread::sleep(Duration::from_secs(1));
    let ticks = cpu(server.pid()) - before;
    assert!(
        ticks <= 10,
        "{ticks} CPU ticks in an idle second with 1000 blocked clients"
    );
    let _: i64 = redis::cmd("RPUSH")
        .arg("idle50")
        .arg("v")
        .query(&mut con)
        .expect("RPUSH");
    let mut buf = Vec::new();
    streams[50]
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut chunk = [0u8; 256];
    while !buf.ends_with(b"v\r\n") {
        let got = streams[50].read(&mut chunk).expect("served");
        assert!(got > 0);
        buf.extend_from_slice(&chunk[..got]);
    }
    assert_eq!(buf, b"*2\r\n$6\r\nidle50\r\n$1\r\nv\r\n");
}

/// SIGKILL while clients are blocked: what was pushed and acknowledged is
/// there after a restart, and nothing was popped for a blocked client that
/// never got it.
#[test]
fn sigkill_while_clients_are_blocked_loses_nothing() {
    let mut server = Respited::start(&[]);
    let dir = server.dir.clone();
    let mut streams = Vec::new();
    for _ in 0..5 {
        let mut raw = raw_for(server.port);
        raw.write_all(&encode(&["BLPOP", "jobs", "0"]))
            .expect("send");
        streams.push(raw);
    }
    wait_blocked(server.port, 5.0);
    let mut con = server.client();
    let _: i64 = redis::cmd("RPUSH")
        .arg("other")
        .arg("a")
        .arg("b")
        .query(&mut con)
        .expect("RPUSH");
    server.kill();
    // The blocked clients see their connections close, with no reply.
    for mut s in streams {
        let mut buf = [0u8; 16];
        assert_eq!(s.read(&mut buf).unwrap_or(0), 0);
    }
    let server = Respited::start_in(&dir, &[]);
    let mut con = server.client();
    let other: Vec<String> = redis::cmd("LRANGE")
        .arg("other")
        .arg(0)
        .arg(-1)
        .query(&mut con)
        .expect("LRANGE");
    assert_eq!(other, ["a", "b"]);
    assert_eq!(info_field(&mut con, "clients", "blocked_clients"), 0.0);
}

/// The queue a user would build: 50 producers LPUSH jobs, 50 consumers
/// BRPOP them, and respited is SIGKILLed and restarted in the middle.
/// Every acknowledged push survives, and no job is delivered twice. A job
/// may be missing only where a consumer's BRPOP was cut by the crash: its
/// pop may have committed with the reply still unsent (the same window
/// redis-server has with AOF always); at most one per such consumer.
#[test]
fn a_job_queue_delivers_every_job_at_most_once_across_a_sigkill() {
    const PRODUCERS: usize = 50;
    const CONSUMERS: usize = 50;
    const JOBS: usize = 40;
    let mut server = Respited::start(&[]);
    let dir = server.dir.clone();
    let port = Arc::new(AtomicU16::new(server.port));
    let acked = Arc::new(Mutex::new(HashSet::<String>::new()));
    let delivered = Arc::new(Mutex::new(Vec::<String>::new()));
    let producing = Arc::new(AtomicBool::new(true));
    let interrupted = Arc::new(Mutex::new(0usize));

    let connect = |port: &AtomicU16| -> redis::Connection {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let p = port.load(Ordering::SeqCst);
            if let Ok(c) = redis::Client::open(format!("redis://127.0.0.1:{p}/"))
                .and_then(|c| c.get_connection())
            {
                return c;
            }
            assert!(Instant::now() < deadline, "could not reconnect");
            thread::sleep(Duration::from_millis(20));
        }
    };

    let mut producers = Vec::new();
    for p in 0..PRODUCERS {
        let (port, acked) = (port.clone(), acked.clone());
        producers.push(thread::spawn(move || {
            let mut con = connect(&port);
            for j in 0..JOBS {
                let job = format!("p{p}-j{j}");
                match redis::cmd("LPUSH")
                    .arg("jobs")
                    .arg(&job)
                    .query::<i64>(&mut con)
                {
                    Ok(_) => {
                        acked.lock().expect("acked").insert(job);
                    }
                    // Unacknowledged: it may or may not be in the list.
                    Err(_) => con = connect(&port),
                }
                thread::sleep(Duration::from_millis(2));
            }
        }));
    }
    let mut consumers = Vec::new();
    for _ in 0..CONSUMERS {
        let (port, delivered, producing, interrupted) = (
            port.clone(),
            delivered.clone(),
            producing.clone(),
            interrupted.clone(),
        );
        consumers.push(thread::spawn(move || {
            let mut con = connect(&port);
            loop {
                let got: redis::RedisResult<Option<(String, String)>> =
                    redis::cmd("BRPOP").arg("jobs").arg(0.2).query(&mut con);
                match got {
                    Ok(Some((_, job))) => delivered.lock().expect("delivered").push(job),
                    Ok(None) => {
                        if !producing.load(Ordering::SeqCst) {
                            return;
                        }
                    }
                    Err(_) => {
                        *interrupted.lock().expect("interrupted") += 1;
                        con = connect(&port);
                    }
                }
            }
        }));
    }
    thread::sleep(Duration::from_millis(60));
    server.kill();
    let restarted = Respited::start_in(&dir, &[]);
    port.store(restarted.port, Ordering::SeqCst);
    for p in producers {
        p.join().expect("producer");
    }
    // Let the consumers drain the list, then stop them.
    let mut con = restarted.client();
    let deadline = Instant::now() + Duration::from_secs(30);
    while redis::cmd("LLEN")
        .arg("jobs")
        .query::<i64>(&mut con)
        .expect("LLEN")
        > 0
    {
        assert!(
            Instant::now() < deadline,
            "the consumers did not drain the queue"
        );
        thread::sleep(Duration::from_millis(20));
    }
    producing.store(false, Ordering::SeqCst);
    for c in consumers {
        c.join().expect("consumer");
    }
    let delivered = delivered.lock().expect("delivered").clone();
    let mut seen = HashMap::new();
    for job in &delivered {
        *seen.entry(job.clone()).or_insert(0) += 1;
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "delivered twice: {twice:?}");
    let acked = acked.lock().expect("acked").clone();
    let missing: Vec<_> = acked.iter().filter(|j| !seen.contains_key(*j)).collect();
    let interrupted = *interrupted.lock().expect("interrupted");
    eprintln!(
        "queue: {} pushes acknowledged, {} jobs delivered, {} consumers cut by the crash, {} acknowledged jobs missing",
        acked.len(),
        delivered.len(),
        interrupted,
        missing.len()
    );
    assert!(
        missing.len() <= interrupted,
        "{} acknowledged jobs lost, {interrupted} consumers cut by the crash: {missing:?}",
        missing.len()
    );
    assert!(
        acked.len() > PRODUCERS * JOBS / 2,
        "too few pushes acknowledged: {}",
        acked.len()
    );
}

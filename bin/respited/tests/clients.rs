//! CLIENT LIST's memory figures (`qbuf`, `argv-mem`, `multi-mem`, `rbs`,
//! `obl`, `oll`, `omem`, `tot-mem`) measured on real connections, each
//! scene played against respite and against a real redis-server: what the
//! figures must show (a partial command in the query buffer, a MULTI's
//! queue, replies a client does not read) is what redis shows.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{info_field, RedisServer, Respited};

/// One field of a CLIENT LIST line.
fn field(line: &str, name: &str) -> String {
    line.trim()
        .split(' ')
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("{name} in {line}"))
        .to_string()
}

fn number(line: &str, name: &str) -> u64 {
    field(line, name)
        .parse()
        .unwrap_or_else(|_| panic!("{name} in {line}"))
}

/// The field names of a line, in order.
fn names(line: &str) -> Vec<String> {
    line.trim()
        .split(' ')
        .map(|kv| kv.split('=').next().unwrap_or_default().to_string())
        .collect()
}

/// A raw connection and its client id.
fn raw_with_id(port: u16) -> (TcpStream, String) {
    let mut s = common::raw_for(port);
    let got = common::exchange(&mut s, b"CLIENT ID\r\n", 3);
    let text = String::from_utf8_lossy(&got);
    (s, text.trim().trim_start_matches(':').to_string())
}

/// CLIENT LIST ID `id`, as seen by another client.
fn line_of(port: u16, id: &str) -> String {
    let mut con = common::client_for(port);
    redis::cmd("CLIENT")
        .arg("LIST")
        .arg("ID")
        .arg(id)
        .query(&mut con)
        .expect("CLIENT LIST")
}

/// Polls CLIENT LIST of `id` until `ok` holds (the figures are published
/// by the other connection's loop as it gets to them).
fn wait_for(port: u16, id: &str, ok: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let line = line_of(port, id);
        if ok(&line) || Instant::now() > deadline {
            return line;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The ports of respite and, when installed, redis-server.
fn servers() -> (Respited, Option<RedisServer>) {
    (Respited::start(&[]), RedisServer::start())
}

#[test]
fn a_partial_command_shows_in_qbuf() {
    let (ours, redis) = servers();
    let ports = [Some(ours.port), redis.as_ref().map(|r| r.port)];
    for port in ports.into_iter().flatten() {
        let (mut a, id) = raw_with_id(port);
        // SET k <100000 bytes>, of which 50000 sent.
        a.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100000\r\n")
            .unwrap();
        a.write_all(&[b'x'; 50_000]).unwrap();
        let line = wait_for(port, &id, |l| number(l, "qbuf") >= 50_000);
        assert!(number(&line, "qbuf") >= 50_000, "{port}: {line}");
        assert!(
            number(&line, "tot-mem") > number(&line, "qbuf"),
            "{port}: {line}"
        );
        // The rest arrives: the command runs, the buffer is empty again.
        let mut rest = vec![b'x'; 50_000];
        rest.extend_from_slice(b"\r\n");
        let got = common::exchange(&mut a, &rest, 5);
        assert_eq!(got, b"+OK\r\n");
        let line = wait_for(port, &id, |l| number(l, "qbuf") == 0);
        assert_eq!(number(&line, "qbuf"), 0, "{port}: {line}");
        assert_eq!(field(&line, "cmd"), "set", "{port}: {line}");
    }
}

#[test]
fn a_client_that_does_not_read_shows_pending_output() {
    let (ours, redis) = servers();
    let ports = [Some(ours.port), redis.as_ref().map(|r| r.port)];
    let big = vec![b'v'; 1 << 20];
    for port in ports.into_iter().flatten() {
        let mut con = common::client_for(port);
        let _: () = redis::cmd("SET")
            .arg("big")
            .arg(&big[..])
            .query(&mut con)
            .unwrap();
        let (mut a, id) = raw_with_id(port);
        // 64 MiB of replies, far more than the socket buffers take, and
        // never read.
        a.write_all(&b"GET big\r\n".repeat(64)).unwrap();
        let line = wait_for(port, &id, |l| number(l, "omem") > 0);
        assert!(number(&line, "omem") > 0, "{port}: {line}");
        assert!(
            number(&line, "obl") + number(&line, "oll") > 0,
            "{port}: {line}"
        );
        assert!(
            number(&line, "tot-mem") >= number(&line, "omem"),
            "{port}: {line}"
        );
        drop(a);
    }
    // respite's own split: a pooled read's replies are one block (`oll`),
    // replies from the value cache gather in the reply buffer (`obl`).
    let mut con = ours.client();
    let _: () = redis::cmd("SET")
        .arg("small")
        .arg(&big[..16 * 1024])
        .query(&mut con)
        .unwrap();
    let (a, id) = raw_with_id(ours.port);
    let mut echo = Vec::new();
    for _ in 0..1000 {
        echo.extend_from_slice(&common::encode(&[&b"ECHO"[..], &big[..16 * 1024]]));
    }
    // Written from a thread: the server stops reading while its replies
    // wait, so this write would never finish here.
    let mut writer = a.try_clone().unwrap();
    std::thread::spawn(move || writer.write_all(&echo));
    let line = wait_for(ours.port, &id, |l| number(l, "obl") > 0);
    assert!(number(&line, "obl") > 0, "{line}");
    assert!(number(&line, "omem") >= number(&line, "obl"), "{line}");
    assert!(number(&line, "rbs") >= 16 * 1024, "{line}");
}

#[test]
fn a_queued_multi_shows_in_multi_mem_and_the_caller_in_argv_mem() {
    let (ours, redis) = servers();
    let ports = [Some(ours.port), redis.as_ref().map(|r| r.port)];
    let mut field_names = Vec::new();
    for port in ports.into_iter().flatten() {
        let (mut a, id) = raw_with_id(port);
        let got = common::exchange(&mut a, b"MULTI\r\nSET a 1\r\nSET b 22\r\n", 23);
        assert_eq!(got, b"+OK\r\n+QUEUED\r\n+QUEUED\r\n");
        let line = line_of(port, &id);
        assert!(number(&line, "multi-mem") > 0, "{port}: {line}");
        assert_eq!(field(&line, "multi"), "2", "{port}: {line}");
        let one = number(&line, "multi-mem");
        common::exchange(&mut a, b"SET c 333\r\n", 9);
        let line = line_of(port, &id);
        assert!(number(&line, "multi-mem") > one, "{port}: {line}");
        common::exchange(&mut a, b"DISCARD\r\n", 5);
        let line = line_of(port, &id);
        assert_eq!(number(&line, "multi-mem"), 0, "{port}: {line}");
        // A client's own CLIENT INFO: its arguments ("client" "info") and
        // the request in its query buffer, as redis counts them.
        let got = common::exchange(&mut a, b"CLIENT INFO\r\n", 100);
        let text = String::from_utf8_lossy(&got).into_owned();
        // Past the bulk string's header.
        let text = text.split_once("\r\n").map(|(_, t)| t.to_string()).unwrap();
        assert_eq!(number(&text, "argv-mem"), 10, "{port}: {text}");
        assert_eq!(number(&text, "qbuf"), 13, "{port}: {text}");
        assert!(number(&text, "qbuf-free") > 0, "{port}: {text}");
        assert!(number(&text, "rbs") > 0, "{port}: {text}");
        field_names.push(names(&text));
    }
    if let [ours, theirs] = &field_names[..] {
        // redis 7.0's fields in its order, then 7.2's lib-name, lib-ver.
        let mut want = theirs.clone();
        want.extend(["lib-name".to_string(), "lib-ver".to_string()]);
        assert_eq!(ours, &want);
    }
}

/// A monitor line's variable parts masked: `+<time> [<db> <addr>]` becomes
/// `+T [<db> A]`; and CLIENT ID's number becomes `:ID`.
fn mask(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::new();
    for line in text.split_inclusive("\r\n") {
        if let Some(rest) = line.strip_prefix('+') {
            if let Some((time, after)) = rest.split_once(" [") {
                if time.contains('.') && time.chars().all(|c| c.is_ascii_digit() || c == '.') {
                    let (db, after) = after.split_once(' ').unwrap();
                    let (_, after) = after.split_once(']').unwrap();
                    out.push_str(&format!("+T [{db} A]{after}"));
                    continue;
                }
            }
        }
        if line.starts_with(':') {
            out.push_str(":ID\r\n");
            continue;
        }
        out.push_str(line);
    }
    out
}

/// Sends each chunk as one write, collecting what comes back after each
/// (`|` between chunks, `<EOF>` when the server closed).
fn play(port: u16, chunks: &[&[u8]]) -> String {
    let mut s = common::raw_for(port);
    let mut all = String::new();
    for chunk in chunks {
        s.write_all(chunk).unwrap();
        let (got, closed) = common::read_until_quiet(&mut s, Duration::from_millis(250));
        all.push_str(&mask(&got));
        if closed {
            all.push_str("<EOF>");
            break;
        }
        all.push_str(" | ");
    }
    all
}

#[test]
fn a_monitoring_client_s_own_commands_are_answered_as_redis_answers_them() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let ours = Respited::start(&[]);
    let scenes: &[&[&[u8]]] = &[
        // Pipelined in the same read as MONITOR, then in later reads.
        &[b"MONITOR\r\nGET k\r\nSET k v\r\nPING\r\nECHO hi\r\n"],
        &[
            b"MONITOR\r\n",
            b"GET k\r\n",
            b"SET k v\r\n",
            b"PING\r\n",
            b"ECHO hi\r\n",
        ],
        // MONITOR again: no reply at all.
        &[b"MONITOR\r\nMONITOR\r\nPING\r\n"],
        &[b"MONITOR\r\n", b"MONITOR\r\n", b"PING\r\n"],
        // RESET ends monitoring; QUIT closes.
        &[b"MONITOR\r\nRESET\r\nGET k\r\n"],
        &[b"MONITOR\r\n", b"RESET\r\n", b"GET k\r\n"],
        &[b"MONITOR\r\nQUIT\r\nPING\r\n"],
        &[b"MONITOR\r\n", b"QUIT\r\n"],
        // What a monitor may run: no keyspace (INFO yes, DBSIZE no);
        // errors before the keyspace check win.
        &[
            b"MONITOR\r\n",
            b"CLIENT ID\r\n",
            b"SELECT 1\r\n",
            b"MULTI\r\n",
            b"EXEC\r\n",
            b"INFO keyspace\r\n",
            b"DBSIZE\r\n",
            b"FOO\r\n",
            b"GET\r\n",
        ],
        // A refused command inside MULTI dooms it.
        &[b"MONITOR\r\nMULTI\r\nGET k\r\nPING\r\nEXEC\r\n"],
        &[b"SET k v\r\nMONITOR\r\nGET k\r\n"],
        // MONITOR queued and run by EXEC is refused.
        &[b"MULTI\r\nMONITOR\r\nEXEC\r\n"],
    ];
    for scene in scenes {
        let theirs = play(redis.port, scene);
        let got = play(ours.port, scene);
        assert_eq!(got, theirs, "{scene:?}");
    }
}

/// Runs a command, any reply.
fn run(con: &mut redis::Connection, args: &[&str]) -> redis::Value {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(con).expect("command")
}

#[test]
fn client_pause_write_holds_an_exec_that_writes_until_unpause() {
    let (ours, redis) = servers();
    let ports = [Some(ours.port), redis.as_ref().map(|r| r.port)];
    for port in ports.into_iter().flatten() {
        let mut admin = common::client_for(port);
        let mut reader = common::client_for(port);
        let mut writer = common::client_for(port);
        run(&mut admin, &["DEL", "k"]);
        run(&mut writer, &["MULTI"]);
        run(&mut writer, &["SET", "k", "1"]);
        run(&mut admin, &["CLIENT", "PAUSE", "60000", "WRITE"]);
        let (tx, rx) = std::sync::mpsc::channel();
        let held = std::thread::spawn(move || {
            let reply = run(&mut writer, &["EXEC"]);
            let _ = tx.send(reply);
            writer
        });
        // Reads, and an EXEC of reads only, are answered meanwhile.
        std::thread::sleep(Duration::from_millis(300));
        assert!(rx.try_recv().is_err(), "{port}: EXEC ran while paused");
        let got: Option<String> = redis::cmd("GET").arg("k").query(&mut reader).unwrap();
        assert_eq!(got, None, "{port}");
        let (got,): (Option<String>,) = redis::pipe()
            .atomic()
            .cmd("GET")
            .arg("k")
            .query(&mut reader)
            .unwrap();
        assert_eq!(got, None, "{port}");
        assert!(rx.try_recv().is_err(), "{port}: EXEC ran while paused");
        // UNPAUSE: the transaction runs, and its write is there.
        run(&mut admin, &["CLIENT", "UNPAUSE"]);
        let reply = rx.recv_timeout(Duration::from_secs(10)).expect("EXEC");
        assert_eq!(
            reply,
            redis::Value::Array(vec![redis::Value::Okay]),
            "{port}"
        );
        let got: Option<String> = redis::cmd("GET").arg("k").query(&mut reader).unwrap();
        assert_eq!(got.as_deref(), Some("1"), "{port}");
        let mut writer = held.join().unwrap();

        // A pause that ends by itself lets the held EXEC run then.
        run(&mut writer, &["MULTI"]);
        run(&mut writer, &["INCR", "k"]);
        run(&mut admin, &["CLIENT", "PAUSE", "500", "WRITE"]);
        let started = Instant::now();
        let reply = run(&mut writer, &["EXEC"]);
        assert!(started.elapsed() >= Duration::from_millis(300), "{port}");
        assert_eq!(
            reply,
            redis::Value::Array(vec![redis::Value::Int(2)]),
            "{port}"
        );
    }
}

#[test]
fn monitor_shows_every_command_of_a_pipeline_in_order_as_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let ours = Respited::start(&[]);
    let mut seen = Vec::new();
    for port in [ours.port, redis.port] {
        let mut mon = common::raw_for(port);
        assert_eq!(common::exchange(&mut mon, b"MONITOR\r\n", 5), b"+OK\r\n");
        let mut con = common::raw_for(port);
        // Plain SETs and GETs (respite's fast paths, open while someone
        // monitors), a binary key, and commands of the general path.
        let mut pipeline = Vec::new();
        for i in 0..300 {
            pipeline.extend(common::encode(&[
                "SET",
                &format!("k{i}"),
                &format!("v\"{i}"),
            ]));
            let mut key = format!("k{i}").into_bytes();
            key.extend([0, 0xff]);
            pipeline.extend(common::encode(&[&b"GET"[..], &key[..]]));
            pipeline.extend(common::encode(&["INCR", "n"]));
        }
        con.write_all(&pipeline).unwrap();
        let (replies, _) = common::read_until_quiet(&mut con, Duration::from_millis(500));
        assert!(replies.ends_with(b":300\r\n"), "{port}");
        let (text, _) = common::read_until_quiet(&mut mon, Duration::from_millis(500));
        let lines: Vec<String> = mask(&text)
            .split("\r\n")
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect();
        assert_eq!(lines.len(), 900, "{port}");
        seen.push(lines);
    }
    assert_eq!(seen[0], seen[1]);
    assert_eq!(seen[0][1], r#"+T [0 A] "GET" "k0\x00\xff""#);
}

/// CLIENT PAUSE (WRITE as ALL) stops the expiry of keys, as in redis: a key
/// that expires during the pause is invisible but not deleted (INFO's
/// expired_keys stays put) until the pause ends.
#[test]
fn a_pause_holds_the_expiry_of_keys_until_it_ends() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let server = Respited::start(&[]);
    for port in [server.port, redis.port] {
        let mut con = common::client_for(port);
        let expired = |con: &mut redis::Connection| info_field(con, "stats", "expired_keys");
        let _: () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query(&mut con)
            .unwrap();
        let _: () = redis::cmd("SET")
            .arg("k")
            .arg("v")
            .arg("PX")
            .arg(100)
            .query(&mut con)
            .unwrap();
        let _: () = redis::cmd("CLIENT")
            .arg("PAUSE")
            .arg(5_000)
            .arg("WRITE")
            .query(&mut con)
            .unwrap();
        std::thread::sleep(Duration::from_millis(700));
        let v: Option<String> = redis::cmd("GET").arg("k").query(&mut con).unwrap();
        assert_eq!(v, None, "port {port}");
        assert_eq!(expired(&mut con), 0.0, "port {port}");
        let _: () = redis::cmd("CLIENT").arg("UNPAUSE").query(&mut con).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while expired(&mut con) < 1.0 {
            assert!(Instant::now() < deadline, "port {port}: never swept");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A client held by CLIENT PAUSE counts in INFO's blocked_clients, as in
/// redis, until the pause ends.
#[test]
fn clients_held_by_a_pause_count_as_blocked() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let server = Respited::start(&[]);
    for port in [server.port, redis.port] {
        let mut con = common::client_for(port);
        let blocked = |con: &mut redis::Connection| info_field(con, "clients", "blocked_clients");
        let _: () = redis::cmd("CLIENT")
            .arg("PAUSE")
            .arg(10_000)
            .arg("WRITE")
            .query(&mut con)
            .unwrap();
        let mut held = TcpStream::connect(("127.0.0.1", port)).unwrap();
        held.write_all(&common::encode(&["SET", "k", "v"])).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while blocked(&mut con) < 1.0 {
            assert!(Instant::now() < deadline, "port {port}: not counted");
            std::thread::sleep(Duration::from_millis(20));
        }
        let _: () = redis::cmd("CLIENT").arg("UNPAUSE").query(&mut con).unwrap();
        let mut reply = [0u8; 5];
        std::io::Read::read_exact(&mut held, &mut reply).unwrap();
        assert_eq!(&reply, b"+OK\r\n", "port {port}");
        assert_eq!(blocked(&mut con), 0.0, "port {port}");
    }
}

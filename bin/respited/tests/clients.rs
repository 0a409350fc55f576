//! CLIENT LIST's memory figures (`qbuf`, `argv-mem`, `multi-mem`, `rbs`,
//! `obl`, `oll`, `omem`, `tot-mem`) measured on real connections, each
//! scene played against respite and against a real redis-server: what the
//! figures must show (a partial command in the query buffer, a MULTI's
//! queue, replies a client does not read) is what redis shows.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{RedisServer, Respited};

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

//! Smoke test of the harness: the daemon starts on port 0 and a Unix socket
//! and answers over both.

mod common;

use common::Respited;

#[test]
fn answers_over_tcp_and_unix_socket() {
    let server = Respited::start(&[]);
    let mut con = server.client();
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut con).unwrap();

    let client = redis::Client::open(format!("unix://{}", server.socket.display())).unwrap();
    let mut ucon = client.get_connection().unwrap();
    let v: String = redis::cmd("GET").arg("k").query(&mut ucon).unwrap();
    assert_eq!(v, "v");
}

#[test]
fn info_memory_reports_resident_memory() {
    // redis-cli --stat and monitoring read used_memory; without it they
    // print nonsense.
    let server = Respited::start(&[]);
    let mut con = server.client();
    let text: String = redis::cmd("INFO").arg("memory").query(&mut con).unwrap();
    assert!(text.starts_with("# Memory\r\n"), "{text}");
    let field = |name: &str| -> String {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .unwrap_or_else(|| panic!("no {name} in {text}"))
            .to_string()
    };
    let used: u64 = field("used_memory").parse().unwrap();
    assert!(used > 1 << 20 && used < 1 << 34, "used_memory {used}");
    let human = field("used_memory_human");
    assert!(human.ends_with('M') || human.ends_with('K'), "{human}");
    assert_eq!(field("maxmemory"), "0");
    // The default INFO includes it, between clients and persistence.
    let all: String = redis::cmd("INFO").query(&mut con).unwrap();
    let (c, m, p) = (
        all.find("# Clients").unwrap(),
        all.find("# Memory").unwrap(),
        all.find("# Persistence").unwrap(),
    );
    assert!(c < m && m < p, "{all}");
}

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

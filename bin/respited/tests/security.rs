//! Protected mode and TLS, against a real respited over real sockets.
//!
//! Protected mode is tried from 127.0.0.2: on Linux the whole 127/8 range
//! is loopback, so a test can connect from a second source address that
//! Redis's rule does not call local, without a second machine.

mod common;

use std::io::Read;
use std::net::TcpStream;
use std::time::Duration;

use common::*;

/// A TCP connection to 127.0.0.1:`port` from 127.0.0.2.
fn connect_from_127_0_0_2(port: u16) -> TcpStream {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let stream = rt.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket
            .bind("127.0.0.2:0".parse().unwrap())
            .expect("bind 127.0.0.2");
        socket
            .connect(([127, 0, 0, 1], port).into())
            .await
            .expect("connect")
    });
    let stream = stream.into_std().expect("into std");
    stream.set_nonblocking(false).expect("blocking");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    stream
}

/// Everything the server sends before it closes the connection.
fn read_to_close(mut stream: TcpStream) -> String {
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn protected_mode_refuses_a_non_loopback_client_when_no_password_is_set() {
    let server = Respited::start(&["--bind", "0.0.0.0"]);
    let mut con = server.client();
    let stream = connect_from_127_0_0_2(server.port);
    let reply = read_to_close(stream);
    assert!(
        reply.starts_with("-DENIED respite is running in protected mode because protected mode is enabled and no password is set for the default user."),
        "{reply}"
    );
    assert!(reply.ends_with("from the outside.\r\n"), "{reply}");
    let line = server.wait_log(
        "protected mode: refused a client from 127.0.0.2",
        Duration::from_secs(5),
    );
    assert!(line.contains("WARN"), "{line}");
    // A local client is served, and sees the refusal counted.
    assert_eq!(info_field(&mut con, "stats", "rejected_connections"), 1.0);
    // A second refusal is counted too.
    let reply = read_to_close(connect_from_127_0_0_2(server.port));
    assert!(reply.starts_with("-DENIED"), "{reply}");
    assert_eq!(info_field(&mut con, "stats", "rejected_connections"), 2.0);
    // CONFIG SET protected-mode no lets the same source in.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("protected-mode")
        .arg("no")
        .query(&mut con)
        .unwrap();
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("protected-mode")
        .query(&mut con)
        .unwrap();
    assert_eq!(got, ["protected-mode", "no"]);
    let mut stream = connect_from_127_0_0_2(server.port);
    assert_eq!(exchange(&mut stream, b"PING\r\n", 7), b"+PONG\r\n");
    let err = redis::cmd("CONFIG")
        .arg("SET")
        .arg("protected-mode")
        .arg("maybe")
        .query::<()>(&mut con)
        .unwrap_err();
    assert_eq!(
        err.detail(),
        Some("CONFIG SET failed (possibly related to argument 'protected-mode') - argument must be 'yes' or 'no'")
    );
}

#[test]
fn protected_mode_admits_a_non_loopback_client_once_a_password_is_set() {
    let server = Respited::start(&["--bind", "0.0.0.0", "--requirepass", "s3cret"]);
    let mut stream = connect_from_127_0_0_2(server.port);
    assert_eq!(
        exchange(&mut stream, b"PING\r\n", 34),
        b"-NOAUTH Authentication required.\r\n"
    );
    assert_eq!(
        exchange(&mut stream, &encode(&["AUTH", "s3cret"]), 5),
        b"+OK\r\n"
    );
    assert_eq!(exchange(&mut stream, b"PING\r\n", 7), b"+PONG\r\n");
}

#[test]
fn protected_mode_leaves_a_loopback_listener_and_the_file_setting_alone() {
    // Bound to 127.0.0.1: only this host can reach it, 127.0.0.2 included.
    let server = Respited::start(&[]);
    let mut stream = connect_from_127_0_0_2(server.port);
    assert_eq!(exchange(&mut stream, b"PING\r\n", 7), b"+PONG\r\n");
    // Turned off on the command line.
    let server = Respited::start(&["--bind", "0.0.0.0", "--protected-mode", "no"]);
    let mut stream = connect_from_127_0_0_2(server.port);
    assert_eq!(exchange(&mut stream, b"PING\r\n", 7), b"+PONG\r\n");
}

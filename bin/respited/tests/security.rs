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

/// A CA, and certificates it signed, written as PEM files into `dir`.
struct Pki {
    ca: std::path::PathBuf,
    server_cert: std::path::PathBuf,
    server_key: std::path::PathBuf,
    client_cert: Vec<u8>,
    client_key: Vec<u8>,
    ca_pem: Vec<u8>,
}

/// A CA named `name`, with a server certificate for 127.0.0.1 and
/// localhost and a client certificate, in `dir` (files prefixed `name`).
fn make_pki(dir: &std::path::Path, name: &str) -> Pki {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
        KeyUsagePurpose,
    };
    let ca_key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, format!("{name} test CA"));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = params.self_signed(&ca_key).unwrap();
    let leaf = |names: Vec<String>, usage: ExtendedKeyUsagePurpose, cn: &str| {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(names).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
        (cert.pem(), key.serialize_pem())
    };
    let (server_cert, server_key) = leaf(
        vec!["localhost".into(), "127.0.0.1".into()],
        ExtendedKeyUsagePurpose::ServerAuth,
        "respited",
    );
    let (client_cert, client_key) = leaf(Vec::new(), ExtendedKeyUsagePurpose::ClientAuth, "client");
    let write = |file: &str, text: &str| {
        let path = dir.join(format!("{name}-{file}"));
        std::fs::write(&path, text).unwrap();
        path
    };
    write("client.pem", &client_cert);
    write("client.key", &client_key);
    Pki {
        ca: write("ca.pem", &ca.pem()),
        server_cert: write("server.pem", &server_cert),
        server_key: write("server.key", &server_key),
        client_cert: client_cert.into_bytes(),
        client_key: client_key.into_bytes(),
        ca_pem: ca.pem().into_bytes(),
    }
}

/// The TLS port respited logged at start.
fn tls_port(server: &Respited) -> u16 {
    server
        .startup_log
        .iter()
        .find_map(|l| l.split("listening on tls ").nth(1))
        .and_then(|a| a.trim().rsplit(':').next()?.parse().ok())
        .expect("a 'listening on tls' line")
}

/// A `redis` crate client over TLS, trusting `ca_pem`, with a client
/// certificate when given.
fn tls_client(
    port: u16,
    ca_pem: &[u8],
    client: Option<(&[u8], &[u8])>,
) -> redis::RedisResult<redis::Connection> {
    let certs = redis::TlsCertificates {
        client_tls: client.map(|(cert, key)| redis::ClientTlsConfig {
            client_cert: cert.to_vec(),
            client_key: key.to_vec(),
        }),
        root_cert: Some(ca_pem.to_vec()),
    };
    let client = redis::Client::build_with_tls(format!("rediss://127.0.0.1:{port}/"), certs)?;
    let mut con = client.get_connection_with_timeout(Duration::from_secs(5))?;
    // With TLS 1.3 a refused client certificate is only reported on the
    // first read, so the connection is proven by a command.
    redis::cmd("PING").query::<String>(&mut con)?;
    Ok(con)
}

fn tls_args(pki: &Pki) -> Vec<String> {
    vec![
        "--tls-port".into(),
        "0".into(),
        "--tls-cert-file".into(),
        pki.server_cert.display().to_string(),
        "--tls-key-file".into(),
        pki.server_key.display().to_string(),
        "--tls-ca-cert-file".into(),
        pki.ca.display().to_string(),
    ]
}

fn start_tls(pki: &Pki, extra: &[&str]) -> Respited {
    let mut args = tls_args(pki);
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Respited::start(&args)
}

#[test]
fn tls_serves_beside_plain_tcp_and_requires_a_client_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let pki = make_pki(dir.path(), "good");
    let other = make_pki(dir.path(), "other");
    let server = start_tls(&pki, &[]);
    let port = tls_port(&server);
    let mut tls = tls_client(port, &pki.ca_pem, Some((&pki.client_cert, &pki.client_key)))
        .expect("a client with a certificate from the CA connects");
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("over tls")
        .query(&mut tls)
        .unwrap();
    // The plain port serves the same data beside it.
    let mut plain = server.client();
    let v: String = redis::cmd("GET").arg("k").query(&mut plain).unwrap();
    assert_eq!(v, "over tls");
    // No client certificate: refused (tls_auth_clients defaults to yes).
    assert!(tls_client(port, &pki.ca_pem, None).is_err());
    // A client certificate from another CA: refused.
    assert!(tls_client(
        port,
        &pki.ca_pem,
        Some((&other.client_cert, &other.client_key))
    )
    .is_err());
    // A client that trusts another CA refuses the server.
    assert!(tls_client(
        port,
        &other.ca_pem,
        Some((&pki.client_cert, &pki.client_key))
    )
    .is_err());
    // A plain-text client on the TLS port gets nothing it can use.
    let mut raw = raw_for(port);
    let got = exchange(&mut raw, b"PING\r\n", 7);
    assert_ne!(got, b"+PONG\r\n");
    // The server still serves after all that.
    let v: String = redis::cmd("GET").arg("k").query(&mut tls).unwrap();
    assert_eq!(v, "over tls");
}

#[test]
fn tls_auth_clients_no_and_optional_admit_a_client_without_a_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let pki = make_pki(dir.path(), "good");
    let other = make_pki(dir.path(), "other");
    for mode in ["no", "optional"] {
        let server = start_tls(&pki, &["--tls-auth-clients", mode]);
        let port = tls_port(&server);
        tls_client(port, &pki.ca_pem, None).expect("no certificate needed");
        if mode == "optional" {
            // One that is sent must still verify.
            assert!(tls_client(
                port,
                &pki.ca_pem,
                Some((&other.client_cert, &other.client_key))
            )
            .is_err());
            tls_client(port, &pki.ca_pem, Some((&pki.client_cert, &pki.client_key)))
                .expect("a good certificate is fine");
        }
    }
}

#[test]
fn redis_cli_connects_over_tls_with_a_client_certificate() {
    if !have_tool("redis-cli") {
        eprintln!("skipping: redis-cli not found");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pki = make_pki(dir.path(), "good");
    let server = start_tls(&pki, &[]);
    let port = tls_port(&server).to_string();
    let cli = |extra: &[&str]| {
        let out = std::process::Command::new("redis-cli")
            .args(["--tls", "--cacert"])
            .arg(&pki.ca)
            .args(["-h", "127.0.0.1", "-p", &port])
            .args(extra)
            .output()
            .expect("redis-cli");
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    };
    let cert = dir.path().join("good-client.pem").display().to_string();
    let key = dir.path().join("good-client.key").display().to_string();
    assert_eq!(
        cli(&["--cert", &cert, "--key", &key, "PING"]).trim(),
        "PONG"
    );
    assert_eq!(
        cli(&["--cert", &cert, "--key", &key, "SET", "a", "1"]).trim(),
        "OK"
    );
    let without = cli(&["PING"]);
    assert_ne!(without.trim(), "PONG", "{without}");
}

#[test]
fn sighup_rereads_the_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let first = make_pki(dir.path(), "first");
    let second = make_pki(dir.path(), "second");
    let server = start_tls(&first, &[]);
    let port = tls_port(&server);
    tls_client(
        port,
        &first.ca_pem,
        Some((&first.client_cert, &first.client_key)),
    )
    .unwrap();
    // The files are replaced by the second CA's, as a renewal would.
    for (from, to) in [
        (&second.server_cert, &first.server_cert),
        (&second.server_key, &first.server_key),
        (&second.ca, &first.ca),
    ] {
        std::fs::copy(from, to).unwrap();
    }
    // Until the signal, the old certificates serve.
    tls_client(
        port,
        &first.ca_pem,
        Some((&first.client_cert, &first.client_key)),
    )
    .unwrap();
    signal(server.pid(), "HUP");
    server.wait_log("TLS certificates re-read", Duration::from_secs(10));
    tls_client(
        port,
        &second.ca_pem,
        Some((&second.client_cert, &second.client_key)),
    )
    .expect("the new certificates serve after SIGHUP");
    assert!(tls_client(
        port,
        &first.ca_pem,
        Some((&first.client_cert, &first.client_key))
    )
    .is_err());
    // A broken file is refused and the certificates in force stay.
    std::fs::write(&first.server_key, "not a key").unwrap();
    signal(server.pid(), "HUP");
    server.wait_log("TLS certificates not reloaded", Duration::from_secs(10));
    tls_client(
        port,
        &second.ca_pem,
        Some((&second.client_cert, &second.client_key)),
    )
    .expect("still served with the certificates in force");
}

#[test]
fn protected_mode_follows_the_default_users_password_set_through_acl() {
    let server = Respited::start(&["--bind", "0.0.0.0"]);
    let mut con = server.client();
    assert!(read_to_close(connect_from_127_0_0_2(server.port)).starts_with("-DENIED"));
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("default")
        .arg(">pw")
        .query(&mut con)
        .unwrap();
    let mut stream = connect_from_127_0_0_2(server.port);
    assert_eq!(
        exchange(&mut stream, &encode(&["AUTH", "pw"]), 5),
        b"+OK\r\n"
    );
    // Back to nopass: refused again.
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("default")
        .arg("nopass")
        .query(&mut con)
        .unwrap();
    assert!(read_to_close(connect_from_127_0_0_2(server.port)).starts_with("-DENIED"));
}

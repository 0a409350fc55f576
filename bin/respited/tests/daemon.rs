//! The daemon as an operator sees it: command line, config file, Unix
//! socket permissions, durability settings, and backpressure.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use common::{info_field, Respited};

#[test]
fn version_and_help() {
    let out = Command::new(env!("CARGO_BIN_EXE_respited"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("respited "), "{text}");
    let out = Command::new(env!("CARGO_BIN_EXE_respited"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--config",
        "--port",
        "--bind",
        "--unixsocket",
        "--db",
        "--appendfsync",
        "--max-batch",
    ] {
        assert!(text.contains(flag), "--help lacks {flag}");
    }
}

#[test]
fn bad_configuration_is_refused_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bad.toml");
    std::fs::write(&config, "no_such_setting = 1\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_respited"))
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no_such_setting"));
    let out = Command::new(env!("CARGO_BIN_EXE_respited"))
        .args(["--appendfsync", "sometimes"])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

#[test]
fn unix_socket_gets_the_configured_permissions() {
    let server = Respited::start(&["--unixsocketperm", "700"]);
    let mode = std::fs::metadata(&server.socket)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
}

#[test]
fn appendfsync_can_change_at_run_time() {
    let server = Respited::start(&["--appendfsync", "everysec"]);
    let mut con = server.client();
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("appendfsync")
        .query(&mut con)
        .unwrap();
    assert_eq!(got, vec!["appendfsync".to_string(), "everysec".to_string()]);
    for i in 0..50 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(i)
            .query(&mut con)
            .unwrap();
    }
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("appendfsync")
        .arg("always")
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("after")
        .arg("1")
        .query(&mut con)
        .unwrap();
    let text: String = redis::cmd("INFO")
        .arg("persistence")
        .query(&mut con)
        .unwrap();
    assert!(text.contains("appendfsync:always"), "{text}");
    let err = redis::cmd("CONFIG")
        .arg("SET")
        .arg("appendfsync")
        .arg("sometimes")
        .query::<()>(&mut con)
        .unwrap_err();
    assert!(
        err.to_string().contains("must be one of the following"),
        "{err}"
    );
    let n: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(n, 51);
}

#[test]
fn a_tiny_write_queue_applies_backpressure_without_losing_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("respite.toml");
    std::fs::write(&config, "write_queue_depth = 2\nappendfsync = \"no\"\n").unwrap();
    let server = Respited::start_in(tmp.path(), &["--config", config.to_str().unwrap()]);
    let handles: Vec<_> = (0..8)
        .map(|c| {
            let port = server.port;
            std::thread::spawn(move || {
                let mut con = common::client_for(port);
                let mut pipe = redis::pipe();
                for i in 0..100 {
                    pipe.cmd("INCR").arg("shared").ignore();
                    pipe.cmd("SET").arg(format!("c{c}:{i}")).arg(i).ignore();
                }
                let _: () = pipe.query(&mut con).unwrap();
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let mut con = server.client();
    let total: i64 = redis::cmd("GET").arg("shared").query(&mut con).unwrap();
    assert_eq!(total, 800);
    let n: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(n, 801);
    // With two permits, no batch can hold more than two operations.
    assert!(info_field(&mut con, "persistence", "group_commit_ops_per_batch_max") <= 2.0);
}

//! Shared helpers for the integration tests: a throwaway redis-server and a
//! way to run the real binary and read its JSON report.

#![allow(dead_code)]

// The examples' helpers: what reads a server's pid is written once.
#[path = "../../examples/common/mod.rs"]
mod measure;

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_respite-loadgen");

/// A redis-server on a free loopback port, killed on drop.
pub struct Redis {
    pub port: u16,
    pub child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.child.id().to_string()])
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `bin --version` runs and succeeds (a missing or broken install
/// both count as absent), as the daemon's test harness decides too.
fn runs(bin: &str) -> bool {
    Command::new(bin)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Starts redis-server, or returns None (after saying so) when it is not
/// installed, unless RESPITE_REQUIRE_REDIS=1 demands it.
pub fn redis() -> Option<Redis> {
    redis_with(&[])
}

/// `redis()` with extra configuration, e.g. `["--requirepass", "x"]`.
pub fn redis_with(extra: &[&str]) -> Option<Redis> {
    if !runs("redis-server") {
        if std::env::var("RESPITE_REQUIRE_REDIS").as_deref() == Ok("1") {
            panic!("redis-server not found but RESPITE_REQUIRE_REDIS=1");
        }
        eprintln!("skipping: redis-server not found");
        return None;
    }
    // A free port can be taken by a parallel test's server between the
    // choice and the bind: then this server exits, and another one answers
    // on the port. Only a server that reports our child's pid is ours.
    for _ in 0..5 {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let dir = tempfile::tempdir().expect("tempdir");
        let child = Command::new("redis-server")
            .args(["--save", "", "--appendonly", "no", "--bind", "127.0.0.1"])
            .args(["--port", &port.to_string(), "--daemonize", "no"])
            .args(extra)
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        let mut r = Redis {
            port,
            child,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if r.child.try_wait().ok().flatten().is_some() {
                break; // exited: the port was taken
            }
            let password = extra
                .iter()
                .position(|a| *a == "--requirepass")
                .and_then(|i| extra.get(i + 1).copied());
            if let Some(pid) = server_pid(port, password) {
                if pid == r.child.id() {
                    return Some(r);
                }
                break;
            }
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    panic!("could not start redis-server on a free port");
}

/// The `process_id` of the server answering on `port`, if one does (the
/// password sent first when one is configured).
fn server_pid(port: u16, password: Option<&str>) -> Option<u32> {
    measure::server_pid_with(&format!("127.0.0.1:{port}"), password).ok()
}

/// A command encoded as RESP.
pub fn resp(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    out
}

/// Sends one command to the server on `port` and returns the raw reply
/// (read until the server has been quiet briefly: enough for tests).
pub fn command(port: u16, args: &[&str]) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.write_all(&resp(args)).expect("send");
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Runs the binary with `args` plus `--json <tmp>`; returns output and JSON.
pub fn run_json(args: &[&str]) -> (Output, serde_json::Value) {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("out.json");
    let out = Command::new(BIN)
        .args(args)
        .arg("--json")
        .arg(&json)
        .output()
        .expect("run respite-loadgen");
    let v = read_json(&json, &out);
    (out, v)
}

pub fn read_json(path: &Path, out: &Output) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!(
            "no JSON at {}: {e}\nstdout:\n{}\nstderr:\n{}",
            path.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    serde_json::from_str(&text).expect("valid JSON")
}

/// Checks one summary object for sane, monotone figures.
pub fn assert_sane(name: &str, s: &serde_json::Value) {
    let f = |k: &str| {
        s[k].as_f64()
            .unwrap_or_else(|| panic!("{name}: missing {k} in {s}"))
    };
    assert!(f("ops") > 0.0, "{name}: no ops");
    assert!(f("ops_per_sec") > 0.0, "{name}: zero throughput");
    assert!(f("bytes_per_sec") > 0.0, "{name}: zero bytes");
    let ps = [
        "p50_us", "p90_us", "p99_us", "p999_us", "p9999_us", "max_us",
    ];
    for w in ps.windows(2) {
        assert!(f(w[0]) <= f(w[1]), "{name}: {} > {} in {s}", w[0], w[1]);
    }
    assert!(f("p50_us") >= 1.0 && f("mean_us") > 0.0, "{name}: {s}");
    assert!(f("max_us") < 10_000_000.0, "{name}: absurd max in {s}");
}

//! The test harness: real `respited` processes, real `redis-server`
//! processes, real sockets.
//!
//! Every integration test starts the daemon binary that cargo built, on
//! 127.0.0.1 with port 0 (the port it picked is read from its log) and on a
//! Unix socket in a fresh temporary directory, and talks to it with the
//! `redis` crate or raw bytes. Tests that compare with Redis start a real
//! `redis-server` too; where none is installed they skip, unless
//! `RESPITE_REQUIRE_REDIS=1` (set by `.ci/run`) makes that a failure.

#![allow(dead_code)]

pub mod replication;
pub mod resp_conn;

// Each test file uses a part of this harness (as `dead_code` above).
#[allow(unused_imports)]
pub use resp_conn::encode;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A running respited.
pub struct Respited {
    child: Child,
    /// The TCP port it listens on.
    pub port: u16,
    /// Its Unix socket.
    pub socket: PathBuf,
    /// Its data directory (kept alive as long as the server).
    pub dir: PathBuf,
    _tmp: Option<tempfile::TempDir>,
    /// Log lines, as they arrive (after those in `startup_log`).
    pub log: mpsc::Receiver<String>,
    /// The log lines up to the server's readiness.
    pub startup_log: Vec<String>,
}

impl Respited {
    /// Starts a fresh server in a new temporary directory.
    pub fn start(extra: &[&str]) -> Respited {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().to_path_buf();
        let mut s = Respited::start_in(&dir, extra);
        s._tmp = Some(tmp);
        s
    }

    /// Starts a server on the database in `dir` (to test restarts).
    pub fn start_in(dir: &Path, extra: &[&str]) -> Respited {
        Respited::start_with(Command::new(env!("CARGO_BIN_EXE_respited")), dir, extra)
    }

    /// Starts a server on the database in `dir` with extra environment
    /// variables (NOTIFY_SOCKET, WATCHDOG_USEC, ...).
    pub fn start_in_env(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Respited {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_respited"));
        cmd.envs(env.iter().copied());
        Respited::start_with(cmd, dir, extra)
    }

    /// Waits for a log line containing `needle`, returning it.
    pub fn wait_log(&self, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.log.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) => {}
                Err(_) => panic!("no log line containing {needle:?} within {timeout:?}"),
            }
        }
    }

    /// Starts a server through `sh -c "<setup>; exec respited ..."`, for
    /// tests that need the process started with a shell's limits or signal
    /// dispositions (which `exec` keeps).
    pub fn start_under_shell(setup: &str, extra: &[&str]) -> Respited {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(format!("{setup}; exec \"$0\" \"$@\""))
            .arg(env!("CARGO_BIN_EXE_respited"));
        let mut s = Respited::start_with(cmd, tmp.path(), extra);
        s._tmp = Some(tmp);
        s
    }

    /// Starts a server whose directory is a tmpfs of `size` (`8m`) in its
    /// own mount namespace: a small disk that really fills up. `setup`
    /// runs in that directory first (`true` for nothing). `None`
    /// (printing why) where no mount namespace can be made (neither as
    /// root nor through a user namespace), unless
    /// `RESPITE_REQUIRE_SYSTEMD_TOOLS=1` (CI) makes that a failure.
    pub fn start_on_tmpfs(size: &str, setup: &str, extra: &[&str]) -> Option<Respited> {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().to_path_buf();
        let mount = format!("mount -t tmpfs -o size={size} tmpfs '{}'", dir.display());
        let unshare = [
            vec!["--mount"],
            vec!["--user", "--map-root-user", "--mount"],
        ]
        .into_iter()
        .find(|flags| {
            Command::new("unshare")
                .args(flags)
                .args(["sh", "-c", &mount])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        });
        let Some(flags) = unshare else {
            skip_unless_required(
                "cannot mount a tmpfs in a mount namespace (unshare)",
                "RESPITE_REQUIRE_SYSTEMD_TOOLS",
            );
            return None;
        };
        let mut cmd = Command::new("unshare");
        cmd.args(flags)
            .args([
                "sh",
                "-c",
                &format!(
                    "{mount} && cd '{}' && {setup} && exec \"$0\" \"$@\"",
                    dir.display()
                ),
            ])
            .arg(env!("CARGO_BIN_EXE_respited"));
        let mut s = Respited::start_with(cmd, &dir, extra);
        s._tmp = Some(tmp);
        Some(s)
    }

    fn start_with(mut command: Command, dir: &Path, extra: &[&str]) -> Respited {
        let socket = dir.join("respite.sock");
        let mut child = command
            .arg("--port")
            .arg("0")
            .arg("--db")
            .arg(dir.join("respite.db"))
            .arg("--unixsocket")
            .arg(&socket)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn respited");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut startup_log = Vec::new();
        let port = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx
                .recv_timeout(left)
                .expect("respited did not report its TCP port in time");
            startup_log.push(line.clone());
            if let Some(rest) = line.split("listening on tcp ").nth(1) {
                let addr = rest.trim();
                let port = addr.rsplit(':').next().and_then(|p| p.parse().ok());
                break port.expect("port in log line");
            }
        };
        // The Unix listener is bound (and its permissions set) right after
        // TCP, and logged once it is ready.
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx
                .recv_timeout(left)
                .expect("respited did not report its Unix socket in time");
            startup_log.push(line.clone());
            if line.contains("listening on unix ") {
                break;
            }
        }
        Respited {
            child,
            port,
            socket,
            dir: dir.to_path_buf(),
            _tmp: None,
            log: rx,
            startup_log,
        }
    }

    /// A `redis` crate client over TCP.
    pub fn client(&self) -> redis::Connection {
        client_for(self.port)
    }

    /// A raw TCP stream with a read timeout.
    pub fn raw(&self) -> TcpStream {
        raw_for(self.port)
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn terminate(&mut self) -> ExitStatus {
        signal(self.child.id(), "TERM");
        self.wait(Duration::from_secs(30))
    }

    /// Sends SIGKILL (a crash) and waits.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits for the process to exit.
    pub fn wait(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("respited did not exit within {timeout:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Respited {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends a signal by name with the `kill` utility.
pub fn signal(pid: u32, name: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status();
}

/// A test that needs something this machine lacks: skipped (saying why),
/// unless `require_var=1` (set by `.ci/run`) makes that a failure.
pub fn skip_unless_required(why: &str, require_var: &str) {
    if std::env::var(require_var).is_ok_and(|v| v == "1") {
        panic!("{why} but {require_var}=1");
    }
    eprintln!("skipping: {why}");
}

/// Whether a systemd tool (systemd-socket-activate, systemd-analyze,
/// dpkg-deb) is installed. Where it is not, the test skips, unless
/// `RESPITE_REQUIRE_SYSTEMD_TOOLS=1` (set by `.ci/run`, which installs
/// them) makes that a failure.
pub fn have_tool(name: &str) -> bool {
    let found = Command::new(name)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        skip_unless_required(
            &format!("{name} not found"),
            "RESPITE_REQUIRE_SYSTEMD_TOOLS",
        );
    }
    found
}

/// A `redis` crate client for a port on 127.0.0.1.
pub fn client_for(port: u16) -> redis::Connection {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("client");
    client.get_connection().expect("connect")
}

/// A raw TCP stream to 127.0.0.1:port with a read timeout.
pub fn raw_for(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s.set_nodelay(true).expect("nodelay");
    s
}

/// Writes `request`, then reads until `expected` bytes arrived or the peer
/// closed; returns what was read.
pub fn exchange(stream: &mut TcpStream, request: &[u8], expected: usize) -> Vec<u8> {
    stream.write_all(request).expect("write");
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    while got.len() < expected {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                break
            }
            Err(_) => break,
        }
    }
    got
}

/// Reads whatever arrives until the peer closes or goes quiet for `quiet`.
pub fn read_until_quiet(stream: &mut TcpStream, quiet: Duration) -> (Vec<u8>, bool) {
    stream.set_read_timeout(Some(quiet)).expect("timeout");
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return (got, true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(_) => return (got, false),
        }
    }
}

/// Runs `writers` threads of `write(port)` while `readers` threads call
/// `read` in a loop, each on its own connection and with a number it keeps
/// between calls; stops the readers once the writers are done, and checks
/// that every reader got to read.
pub fn race(
    port: u16,
    writers: usize,
    write: fn(u16),
    readers: usize,
    read: fn(&mut redis::Connection, &mut i64),
) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let done = Arc::new(AtomicBool::new(false));
    let reading: Vec<_> = (0..readers)
        .map(|_| {
            let done = done.clone();
            std::thread::spawn(move || {
                let mut con = client_for(port);
                let mut state = 0;
                let mut reads = 0u64;
                while !done.load(Ordering::Relaxed) {
                    read(&mut con, &mut state);
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    let writing: Vec<_> = (0..writers)
        .map(|_| std::thread::spawn(move || write(port)))
        .collect();
    for w in writing {
        w.join().expect("writer thread");
    }
    done.store(true, Ordering::Relaxed);
    for r in reading {
        assert!(r.join().expect("reader thread") > 0, "a reader never read");
    }
}

/// Asserts the server still takes a write and reads it back.
pub fn assert_still_serves(con: &mut redis::Connection) {
    let _: () = redis::cmd("SET")
        .arg("after")
        .arg("ok")
        .query(con)
        .expect("SET after");
    let got: String = redis::cmd("GET")
        .arg("after")
        .query(con)
        .expect("GET after");
    assert_eq!(got, "ok");
}

/// Reads one `INFO` field as a number.
pub fn info_field(con: &mut redis::Connection, section: &str, field: &str) -> f64 {
    let text: String = redis::cmd("INFO").arg(section).query(con).expect("INFO");
    for line in text.lines() {
        if let Some(v) = line.strip_prefix(&format!("{field}:")) {
            return v.trim().parse().expect("numeric INFO field");
        }
    }
    panic!("INFO {section} has no {field}: {text}");
}

/// A real redis-server on a free port, in a temporary directory, with no
/// persistence. `None` when redis-server is not installed (and the tests
/// are not required to have it).
pub struct RedisServer {
    child: Child,
    /// Its port.
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl RedisServer {
    /// Starts redis-server, or returns `None` (printing why) when it is not
    /// installed and `RESPITE_REQUIRE_REDIS` is not set.
    pub fn start() -> Option<RedisServer> {
        RedisServer::start_with(&[])
    }

    /// [`RedisServer::start`] with more arguments (`--enable-debug-command
    /// yes`...).
    pub fn start_with(extra: &[&str]) -> Option<RedisServer> {
        let found = Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            skip_unless_required("redis-server not found", "RESPITE_REQUIRE_REDIS");
            return None;
        }
        // A free port can be taken by a parallel test's server between the
        // choice and the bind: then this server exits and another answers
        // on the port. Only a server that reports our child's pid is ours.
        for _ in 0..5 {
            let dir = tempfile::tempdir().expect("tempdir");
            let port = free_port();
            let child = Command::new("redis-server")
                .args([
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ])
                .arg("--dir")
                .arg(dir.path())
                .args(extra)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn redis-server");
            let mut server = RedisServer {
                child,
                port,
                _dir: dir,
            };
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                if server.child.try_wait().ok().flatten().is_some() {
                    break; // exited: the port was taken
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    // Another process's listener on the port (bound between
                    // the choice and ours) may take the connection and go
                    // again: then try another port.
                    let Ok(mut con) = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                        .and_then(|c| c.get_connection())
                    else {
                        break;
                    };
                    let pid = info_field(&mut con, "server", "process_id");
                    if pid as u32 == server.child.id() {
                        return Some(server);
                    }
                    break;
                }
                assert!(Instant::now() < deadline, "redis-server did not start");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        panic!("could not start redis-server on a free port");
    }

    /// A `redis` crate client.
    pub fn client(&self) -> redis::Connection {
        client_for(self.port)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

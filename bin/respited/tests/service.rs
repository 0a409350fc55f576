//! respited as a systemd service, with the test playing systemd's part:
//! a datagram NOTIFY_SOCKET that collects READY/STATUS/WATCHDOG/RELOADING/
//! STOPPING, SIGHUP reloads, the owner lock, start-ups that fail without
//! leaving files behind, socket activation (through Debian's
//! `systemd-socket-activate` and through descriptors this test passes
//! itself), journal-style logs, and a stop under load.

mod common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use common::{client_for, free_port, have_tool, signal, Respited};

/// The manager's end of NOTIFY_SOCKET.
struct Manager {
    sock: UnixDatagram,
    path: PathBuf,
}

impl Manager {
    fn new(dir: &Path) -> Manager {
        let path = dir.join("notify.sock");
        let sock = UnixDatagram::bind(&path).unwrap();
        Manager { sock, path }
    }

    /// The next datagram's lines, with when it arrived.
    fn next(&self, timeout: Duration) -> Option<(Instant, Vec<String>)> {
        self.sock.set_read_timeout(Some(timeout)).unwrap();
        let mut buf = [0u8; 4096];
        let n = self.sock.recv(&mut buf).ok()?;
        let text = String::from_utf8_lossy(&buf[..n]).into_owned();
        Some((Instant::now(), text.lines().map(str::to_string).collect()))
    }

    /// Reads datagrams until one has a line starting with `prefix`;
    /// returns that line and every line seen before it.
    fn wait_for(&self, prefix: &str, timeout: Duration) -> (String, Vec<String>) {
        let deadline = Instant::now() + timeout;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some((_, lines)) = self.next(left.max(Duration::from_millis(1))) else {
                panic!("no {prefix} within {timeout:?}; got {seen:?}");
            };
            for l in lines {
                if l.starts_with(prefix) {
                    return (l, seen);
                }
                seen.push(l);
            }
        }
    }
}

fn env_of(m: &Manager) -> String {
    m.path.display().to_string()
}

/// Starts respited in `dir` on `port` under `manager` (NOTIFY_SOCKET),
/// with DEBUG allowed from loopback so a test can stall the writer, and
/// the extra environment `env`.
fn start_managed(dir: &Path, manager: &Manager, port: u16, env: &[(&str, &str)]) -> Child {
    let config = write_config(dir, "enable_debug_command = \"local\"\n");
    Command::new(env!("CARGO_BIN_EXE_respited"))
        .arg("--config")
        .arg(&config)
        .args(["--port", &port.to_string()])
        .arg("--db")
        .arg(dir.join("respite.db"))
        .env("NOTIFY_SOCKET", env_of(manager))
        .envs(env.iter().copied())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn write_config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("respite.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn readiness_status_watchdog_reload_and_stop_are_told_to_the_manager() {
    let tmp = tempfile::tempdir().unwrap();
    let manager = Manager::new(tmp.path());
    // The port is chosen here so the test can try it the moment READY=1
    // arrives.
    let port = free_port();
    let mut child = start_managed(tmp.path(), &manager, port, &[("WATCHDOG_USEC", "1000000")]);

    // READY=1 comes first (nothing else before it), and with it the port
    // already accepts.
    let (_, first) = manager.next(Duration::from_secs(30)).expect("READY=1");
    assert_eq!(first[0], "READY=1", "{first:?}");
    let mut con = client_for(port);
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
    assert!(
        first
            .iter()
            .any(|l| l.starts_with("STATUS=") && l.contains("clients")),
        "{first:?}"
    );
    // STATUS= keeps coming, with the figures.
    let (status, _) = manager.wait_for("STATUS=", Duration::from_secs(5));
    assert!(
        status.contains("ops/s") && status.contains("writes/commit"),
        "{status}"
    );

    // WATCHDOG=1 every quarter period (250 ms) while the writer is fine.
    let mut pings = 0;
    let until = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < until {
        if let Some((_, lines)) = manager.next(Duration::from_millis(500)) {
            pings += lines.iter().filter(|l| *l == "WATCHDOG=1").count();
        }
    }
    assert!(pings >= 3, "only {pings} watchdog pings in 1.5 s");

    // Stall the writer for 3 s: the pings stop (after half the period
    // without progress), then resume once it is free again.
    let stall = std::thread::spawn(move || {
        let mut con = client_for(port);
        let started = Instant::now();
        let ok: String = redis::cmd("DEBUG")
            .arg("SLEEP")
            .arg(3)
            .query(&mut con)
            .unwrap();
        assert_eq!(ok, "OK");
        started.elapsed()
    });
    let mut times = vec![Instant::now()];
    let until = Instant::now() + Duration::from_millis(4500);
    while Instant::now() < until {
        if let Some((at, lines)) = manager.next(Duration::from_millis(200)) {
            if lines.iter().any(|l| l == "WATCHDOG=1") {
                times.push(at);
            }
        }
    }
    let slept = stall.join().unwrap();
    assert!(slept >= Duration::from_secs(3));
    let longest = times
        .windows(2)
        .map(|w| w[1].duration_since(w[0]))
        .max()
        .unwrap_or_default();
    assert!(
        longest >= Duration::from_millis(1800),
        "the pings went on while the writer was stalled (longest gap {longest:?})"
    );
    // ... and come back.
    manager.wait_for("WATCHDOG=1", Duration::from_secs(2));

    // SIGHUP: RELOADING=1, then READY=1.
    signal(child.id(), "HUP");
    let (_, before) = manager.wait_for("RELOADING=1", Duration::from_secs(5));
    assert!(!before.iter().any(|l| l == "READY=1"));
    manager.wait_for("READY=1", Duration::from_secs(5));

    // SIGTERM: STOPPING=1, then a clean exit.
    signal(child.id(), "TERM");
    manager.wait_for("STOPPING=1", Duration::from_secs(5));
    let status = wait_exit(&mut child, Duration::from_secs(30));
    assert_eq!(status.code(), Some(0));
}

fn wait_exit(child: &mut Child, timeout: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("did not exit within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn config_get(con: &mut redis::Connection, name: &str) -> String {
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg(name)
        .query(con)
        .unwrap();
    got[1].clone()
}

#[test]
fn sighup_applies_requirepass_and_maxclients_and_a_broken_file_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), "requirepass = \"one\"\nmaxclients = 100\n");
    let server = Respited::start_in(tmp.path(), &["--config", config.to_str().unwrap()]);
    let auth = |pass: &str| -> redis::RedisResult<String> {
        let mut con = client_for(server.port);
        redis::cmd("AUTH").arg(pass).query(&mut con)
    };
    assert!(auth("one").is_ok());

    std::fs::write(
        &config,
        "requirepass = \"two\"\nmaxclients = 5\nreaders = 2\n",
    )
    .unwrap();
    signal(server.pid(), "HUP");
    let applied = server.wait_log("configuration reloaded", Duration::from_secs(10));
    assert!(applied.contains("maxclients 100 -> 5"), "{applied}");
    assert!(applied.contains("requirepass changed"), "{applied}");
    assert!(
        !applied.contains("two"),
        "the password must not be logged: {applied}"
    );
    let restart = server.wait_log("only applied by a restart", Duration::from_secs(5));
    assert!(restart.contains("readers 4 -> 2"), "{restart}");
    assert!(auth("one").is_err());
    assert!(auth("two").is_ok());
    let mut con = client_for(server.port);
    let _: String = redis::cmd("AUTH").arg("two").query(&mut con).unwrap();
    assert_eq!(config_get(&mut con, "maxclients"), "5");

    // A broken file: refused with its line number; nothing changes.
    std::fs::write(
        &config,
        "requirepass = \"three\"\nmaxclients = 7\nmax_batch = [oops\n",
    )
    .unwrap();
    signal(server.pid(), "HUP");
    let refused = server.wait_log("reload refused", Duration::from_secs(10));
    assert!(refused.contains("line 3"), "{refused}");
    assert!(auth("two").is_ok());
    assert!(auth("three").is_err());
    assert_eq!(config_get(&mut con, "maxclients"), "5");

    // A value out of range is refused the same way.
    std::fs::write(&config, "requirepass = \"three\"\nmaxclients = 0\n").unwrap();
    signal(server.pid(), "HUP");
    let refused = server.wait_log("reload refused", Duration::from_secs(10));
    assert!(refused.contains("maxclients"), "{refused}");
    assert_eq!(config_get(&mut con, "maxclients"), "5");
    assert!(auth("two").is_ok());
}

#[test]
fn other_signals_are_logged() {
    let mut server = Respited::start(&[]);
    signal(server.pid(), "USR1");
    server.wait_log("SIGUSR1 received; ignored", Duration::from_secs(10));
    let mut con = server.client();
    common::assert_still_serves(&mut con);
    signal(server.pid(), "QUIT");
    server.wait_log("SIGQUIT received, shutting down", Duration::from_secs(10));
    assert_eq!(server.wait(Duration::from_secs(30)).code(), Some(0));
}

/// The file names in a directory.
fn listing(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// Runs respited to completion (it is expected to refuse to start).
fn run_refused(args: &[&str]) -> (i32, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_respited"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait_exit(&mut child, Duration::from_secs(30));
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status.code().unwrap_or(-1), err)
}

#[test]
fn a_second_daemon_on_the_same_database_is_refused_and_a_killed_owner_does_not_block() {
    let tmp = tempfile::tempdir().unwrap();
    let mut first = Respited::start_in(tmp.path(), &[]);
    let mut con = first.client();
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut con).unwrap();
    let before = listing(tmp.path());

    let db = tmp.path().join("respite.db");
    let other_sock = tmp.path().join("other.sock");
    let (code, err) = run_refused(&[
        "--port",
        "0",
        "--db",
        db.to_str().unwrap(),
        "--unixsocket",
        other_sock.to_str().unwrap(),
    ]);
    assert_ne!(code, 0);
    assert!(err.contains(db.to_str().unwrap()), "{err}");
    assert!(err.contains(&format!("pid {}", first.pid())), "{err}");
    assert_eq!(
        listing(tmp.path()),
        before,
        "the refused start created files"
    );
    // The first one still serves, its socket untouched.
    common::assert_still_serves(&mut con);
    assert!(UnixStream::connect(&first.socket).is_ok());

    // SIGKILL leaves the lock file, but not the lock: a restart succeeds
    // at once.
    first.kill();
    let second = Respited::start_in(tmp.path(), &[]);
    let mut con = second.client();
    let got: String = redis::cmd("GET").arg("k").query(&mut con).unwrap();
    assert_eq!(got, "v");
}

#[test]
fn a_failed_start_creates_nothing_and_a_taken_port_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("respite.db");
    let sock = tmp.path().join("respite.sock");

    // A bad configuration file.
    let bad = tmp.path().join("bad.toml");
    std::fs::write(&bad, "port = 6379\nno_such_key = 1\n").unwrap();
    let before = listing(tmp.path());
    let (code, err) = run_refused(&[
        "--config",
        bad.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("line 2") && err.contains("no_such_key"),
        "{err}"
    );
    assert_eq!(listing(tmp.path()), before);

    // A port in use: the message names the address.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let (code, err) = run_refused(&[
        "--port",
        &port.to_string(),
        "--db",
        db.to_str().unwrap(),
        "--unixsocket",
        sock.to_str().unwrap(),
    ]);
    assert_ne!(code, 0);
    assert!(
        err.contains(&format!("127.0.0.1:{port}")) && err.contains("in use"),
        "{err}"
    );
    assert_eq!(listing(tmp.path()), before, "files left by a failed start");

    // A database from a newer respite: refused, untouched, nothing else
    // created.
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch("CREATE TABLE keys (x); PRAGMA user_version = 99;")
            .unwrap();
    }
    let before = listing(tmp.path());
    let (code, err) = run_refused(&["--port", "0", "--db", db.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(err.contains("layout version 99"), "{err}");
    assert_eq!(listing(tmp.path()), before);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let v: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, 99);
}

/// Spawns `command`, collecting its stderr lines.
fn spawn_logged(mut command: Command) -> (Child, mpsc::Receiver<String>) {
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

fn ping_unix(path: &Path) -> String {
    let mut s = UnixStream::connect(path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// The activated daemon's pid, from INFO.
fn daemon_pid(port: u16) -> u32 {
    let mut con = client_for(port);
    common::info_field(&mut con, "server", "process_id") as u32
}

/// Whether `pid` runs (a zombie waiting for its parent counts as gone).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit(')')
                .next()
                .map(|r| r.trim_start().starts_with('Z'))
        })
        .is_some_and(|zombie| !zombie)
}

#[test]
fn socket_activation_through_systemd_socket_activate() {
    if !have_tool("systemd-socket-activate") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let port = free_port();
    let sock = tmp.path().join("activated.sock");
    let mut cmd = Command::new("systemd-socket-activate");
    cmd.arg("-l")
        .arg(format!("127.0.0.1:{port}"))
        .arg("-l")
        .arg(&sock)
        .arg("--fdname=tcp:unix")
        .arg(env!("CARGO_BIN_EXE_respited"))
        // No listener of its own: only the passed sockets.
        .args(["--bind", ""])
        .arg("--db")
        .arg(tmp.path().join("respite.db"));
    let (mut activator, _log) = spawn_logged(cmd);
    // systemd-socket-activate starts respited on the first connection;
    // the kernel queues it meanwhile.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !sock.exists() {
        assert!(
            Instant::now() < deadline,
            "no socket from systemd-socket-activate"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut con = client_for(port);
    let _: () = redis::cmd("SET")
        .arg("via")
        .arg("tcp")
        .query(&mut con)
        .unwrap();
    assert_eq!(ping_unix(&sock), "+PONG\r\n");
    let pid = daemon_pid(port);
    let text: String = redis::cmd("INFO").arg("server").query(&mut con).unwrap();
    assert!(text.contains(&format!("tcp_port:{port}")), "{text}");
    drop(con);
    signal(pid, "TERM");
    if pid == activator.id() {
        // systemd-socket-activate exec'd respited in its own place.
        let status = wait_exit(&mut activator, Duration::from_secs(30));
        assert!(status.success(), "{status:?}");
    } else {
        let deadline = Instant::now() + Duration::from_secs(30);
        while alive(pid) {
            assert!(Instant::now() < deadline, "respited did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = activator.kill();
        let _ = activator.wait();
    }
    // The Unix socket is systemd's (here, the activator's): respited did
    // not remove it.
    assert!(sock.exists());
}

#[test]
fn socket_activation_with_descriptors_passed_by_the_test() {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let tmp = tempfile::tempdir().unwrap();
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    let path = tmp.path().join("passed.sock");
    let unix = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let (tcp_fd, unix_fd) = (tcp.as_raw_fd(), unix.as_raw_fd());
    // Its own configured listener too: a Unix socket beside the passed
    // ones, while the configured TCP address is the passed one (so it is
    // not bound twice).
    let own = tmp.path().join("own.sock");
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg("export LISTEN_PID=$$; exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_respited"))
        .args(["--port", &port.to_string()])
        .arg("--unixsocket")
        .arg(&own)
        .arg("--db")
        .arg(tmp.path().join("respite.db"))
        .env("LISTEN_FDS", "2")
        .env("LISTEN_FDNAMES", "tcp:unix");
    // SAFETY: between fork and exec only async-signal-safe calls (fcntl,
    // dup2) on descriptors this process owns.
    unsafe {
        cmd.pre_exec(move || {
            // Out of the way first, in case either is already 3 or 4.
            let a = libc::fcntl(tcp_fd, libc::F_DUPFD, 10);
            let b = libc::fcntl(unix_fd, libc::F_DUPFD, 10);
            if a < 0 || b < 0 || libc::dup2(a, 3) < 0 || libc::dup2(b, 4) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let (mut child, log) = spawn_logged(cmd);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut lines = Vec::new();
    while !lines
        .iter()
        .any(|l: &String| l.contains("listening on unix") && l.contains("own.sock"))
    {
        let left = deadline.saturating_duration_since(Instant::now());
        lines.push(log.recv_timeout(left).expect("respited did not start"));
    }
    drop((tcp, unix));
    assert!(
        lines
            .iter()
            .any(|l| l.contains("socket from systemd") && l.contains("tcp")),
        "{lines:?}"
    );
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.contains("listening on tcp"))
            .count(),
        1,
        "the configured TCP address was bound again: {lines:?}"
    );
    let mut con = client_for(port);
    let _: () = redis::cmd("SET").arg("k").arg("1").query(&mut con).unwrap();
    assert_eq!(ping_unix(&path), "+PONG\r\n");
    assert_eq!(ping_unix(&own), "+PONG\r\n");
    signal(child.id(), "TERM");
    assert_eq!(
        wait_exit(&mut child, Duration::from_secs(30)).code(),
        Some(0)
    );
    // Its own socket file is removed at exit; the passed one is not.
    assert!(!own.exists());
    assert!(path.exists());
}

#[test]
fn under_a_journal_stream_lines_carry_priorities_and_no_timestamps() {
    use std::os::unix::fs::MetadataExt;
    let tmp = tempfile::tempdir().unwrap();
    let log_path = tmp.path().join("stderr.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let meta = log.metadata().unwrap();
    let stream = format!("{}:{}", meta.dev(), meta.ino());
    let mut child = Command::new(env!("CARGO_BIN_EXE_respited"))
        .args(["--port", "0"])
        .arg("--db")
        .arg(tmp.path().join("respite.db"))
        .env("JOURNAL_STREAM", &stream)
        .stderr(log)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(&log_path)
        .unwrap()
        .contains("listening on tcp")
    {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(20));
    }
    signal(child.id(), "USR2");
    signal(child.id(), "TERM");
    assert_eq!(
        wait_exit(&mut child, Duration::from_secs(30)).code(),
        Some(0)
    );
    let text = std::fs::read_to_string(&log_path).unwrap();
    for line in text.lines() {
        assert!(
            line.starts_with("<6>") || line.starts_with("<4>") || line.starts_with("<3>"),
            "{line}"
        );
        assert!(
            !line[3..].starts_with(|c: char| c.is_ascii_digit()),
            "a timestamp: {line}"
        );
    }
    assert!(
        text.lines()
            .any(|l| l.starts_with("<4>") && l.contains("SIGUSR2")),
        "{text}"
    );
    assert!(
        text.contains("<6>") && text.contains("stopped cleanly"),
        "{text}"
    );
}

#[test]
fn sigterm_under_load_keeps_every_acknowledged_write() {
    let tmp = tempfile::tempdir().unwrap();
    let mut server = Respited::start_in(tmp.path(), &[]);
    let port = server.port;
    let acked = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..16)
        .map(|c| {
            let (acked, stop) = (acked.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut con = client_for(port);
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let key = format!("c{c}:{i}");
                    let r: redis::RedisResult<()> =
                        redis::cmd("SET").arg(&key).arg(i).query(&mut con);
                    match r {
                        Ok(()) => acked.lock().unwrap().push(key),
                        Err(_) => break,
                    }
                    i += 1;
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(700));
    let status = server.terminate();
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    assert_eq!(status.code(), Some(0));
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.len() > 100,
        "only {} writes before the stop",
        acked.len()
    );
    {
        let conn = rusqlite::Connection::open(tmp.path().join("respite.db")).unwrap();
        let ok: String = conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(ok, "ok");
    }
    let again = Respited::start_in(tmp.path(), &[]);
    let mut con = again.client();
    for chunk in acked.chunks(500) {
        let n: i64 = redis::cmd("EXISTS").arg(chunk).query(&mut con).unwrap();
        assert_eq!(n as usize, chunk.len(), "an acknowledged write is missing");
    }
}

/// A stop that has to wait (here for a writer stalled by `DEBUG SLEEP`, as
/// a long final drain or checkpoint would) asks the manager for more time
/// with EXTEND_TIMEOUT_USEC after STOPPING=1, and still exits cleanly.
#[test]
fn a_slow_stop_extends_the_managers_timeout() {
    let tmp = tempfile::tempdir().unwrap();
    let manager = Manager::new(tmp.path());
    let port = free_port();
    let mut child = start_managed(tmp.path(), &manager, port, &[]);
    manager.wait_for("READY=1", Duration::from_secs(30));
    // The writer sleeps 3 s; the stop queued behind it waits that long.
    let stall = std::thread::spawn(move || {
        let mut con = client_for(port);
        redis::cmd("DEBUG")
            .arg("SLEEP")
            .arg(3)
            .query::<String>(&mut con)
    });
    std::thread::sleep(Duration::from_millis(300));
    signal(child.id(), "TERM");
    let (_, before) = manager.wait_for("EXTEND_TIMEOUT_USEC=", Duration::from_secs(5));
    assert!(
        before.iter().any(|l| l == "STOPPING=1"),
        "STOPPING=1 comes first: {before:?}"
    );
    let status = wait_exit(&mut child, Duration::from_secs(30));
    assert_eq!(status.code(), Some(0));
    let _ = stall.join();
}

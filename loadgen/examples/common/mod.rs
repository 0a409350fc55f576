//! What the examples share: RESP requests written by hand, the medians of
//! rounds, and the server's own accounting of a measured window.
//!
//! The examples measure a server that runs on this machine, so beside the
//! client-side figures each reports what the server's process spent: its
//! CPU time (`utime` + `stime` of `/proc/PID/stat`, in clock ticks) and its
//! threads' context switches (`voluntary_ctxt_switches` and
//! `nonvoluntary_ctxt_switches` of every `/proc/PID/task/*/status`), read
//! before and after the window. The PID comes from INFO's `process_id`, so
//! the same code measures respite and redis-server.

// Each example uses its own part of this module.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;

/// Appends one request, a RESP array of bulk strings, to `out`.
pub fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// One request as a buffer of its own.
pub fn request(args: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    encode(&mut out, args);
    out
}

/// The median of the rounds' figures (the upper one of an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The server's pid, from INFO's `process_id`.
pub fn server_pid(addr: &str) -> std::io::Result<u32> {
    server_pid_with(addr, None)
}

/// [`server_pid`] of a server that wants `password` (sent first, as
/// AUTH). An error reply, or no answer within 5 s, is an error. The
/// integration tests use it too, to know that the server on a port is
/// the one they started.
pub fn server_pid_with(addr: &str, password: Option<&str>) -> std::io::Result<u32> {
    let failed = |what: String| std::io::Error::other(format!("{addr}: {what}"));
    let s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
    let mut replies = BufReader::new(&s);
    let mut line = String::new();
    if let Some(p) = password {
        (&s).write_all(&request(&[b"AUTH", p.as_bytes()]))?;
        replies.read_line(&mut line)?;
        if !line.starts_with('+') {
            return Err(failed(format!("AUTH answered {}", line.trim_end())));
        }
    }
    (&s).write_all(&request(&[b"INFO", b"server"]))?;
    loop {
        line.clear();
        if replies.read_line(&mut line)? == 0 {
            break;
        }
        if line.starts_with('-') {
            return Err(failed(format!("INFO answered {}", line.trim_end())));
        }
        if let Some(v) = line.strip_prefix("process_id:") {
            return v
                .trim()
                .parse()
                .map_err(|_| failed(format!("process_id {v:?}")));
        }
    }
    Err(failed("no process_id in INFO server".into()))
}

/// Clock ticks per second of `/proc`'s CPU times (USER_HZ).
pub fn clock_ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// The bytes the process has written to storage so far (`write_bytes`
/// of `/proc/PID/io`: WAL or AOF, checkpoints).
pub fn written_bytes(pid: u32) -> Option<u64> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    io.lines()
        .find_map(|l| l.strip_prefix("write_bytes: "))?
        .trim()
        .parse()
        .ok()
}

/// A process's CPU time and context switches so far.
#[derive(Clone, Copy, Default)]
pub struct Proc {
    pub cpu_ticks: u64,
    pub switches: u64,
}

impl Proc {
    pub fn read(pid: u32) -> std::io::Result<Proc> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
        // Fields after the command's closing parenthesis: utime is the
        // 14th field of the line, stime the 15th.
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let f: Vec<&str> = rest.split_whitespace().collect();
        let tick = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        let cpu_ticks = tick(11) + tick(12);
        let mut switches = 0;
        for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
            let Ok(status) = std::fs::read_to_string(task?.path().join("status")) else {
                continue; // a thread that ended meanwhile
            };
            for l in status.lines() {
                if let Some(v) = l
                    .strip_prefix("voluntary_ctxt_switches:")
                    .or_else(|| l.strip_prefix("nonvoluntary_ctxt_switches:"))
                {
                    switches += v.trim().parse::<u64>().unwrap_or(0);
                }
            }
        }
        Ok(Proc {
            cpu_ticks,
            switches,
        })
    }

    /// CPU microseconds per operation from `before` to `self`.
    pub fn cpu_us_per(&self, before: &Proc, ops: f64, hz: f64) -> f64 {
        self.cpu_ticks.saturating_sub(before.cpu_ticks) as f64 / hz * 1e6 / ops.max(1.0)
    }

    /// Context switches per operation from `before` to `self`.
    pub fn switches_per(&self, before: &Proc, ops: f64) -> f64 {
        self.switches.saturating_sub(before.switches) as f64 / ops.max(1.0)
    }
}

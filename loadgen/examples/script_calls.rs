//! Scripts under load: a read-modify-write of one random key done as an
//! EVALSHA of a three-call script, as an FCALL of the same function, and
//! as the same three commands in a MULTI/EXEC, and a read-only script of
//! three GETs done as EVALSHA_RO; each against any number of servers,
//! taken in turn within each round.
//!
//! ```text
//! cargo run --release -p respite-loadgen --example script_calls -- \
//!     --cell respite-evalsha=127.0.0.1:7661=evalsha \
//!     --cell redis-evalsha=127.0.0.1:7662=evalsha \
//!     --clients 50 --keys 100000 --seconds 10 --rounds 3
//! ```
//!
//! A cell is NAME=HOST:PORT=MODE, the mode one of:
//! - `evalsha`: `EVALSHA <sha> 1 key` of `GET key; INCR key; EXPIRE key
//!   3600` (the script returns INCR's result);
//! - `fcall`: `FCALL rmw 1 key` of the same body as a function;
//! - `multi`: `MULTI`, `GET key`, `INCR key`, `EXPIRE key 3600`, `EXEC`,
//!   sent as one buffer (as a client library's transaction pipeline sends
//!   them), five replies read;
//! - `evalsha_ro`: `EVALSHA_RO <sha> 1 key` of a script returning `GET
//!   key`, `GET key:a`, `GET key:b` (all three are set before the runs).
//!
//! Each client is a thread with a blocking socket and one call in flight,
//! the way an application's worker calls a script; the key is uniform over
//! `key:1..=KEYS`. The rate counts calls completed in the measured window
//! (after a second of warm-up); beside it, the server's CPU microseconds
//! per call, whole process (utime + stime of /proc/PID/stat over the
//! window, the PID from INFO's `process_id`, so the server must run on this
//! machine). Any error reply stops the run: a broken script must not be
//! measured as a fast one. The last line of each cell is the median of its
//! rounds.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;
use common::{clock_ticks_per_second, encode, median, server_pid, Proc};

const RMW: &str = "redis.call('get', KEYS[1]); local n = redis.call('incr', KEYS[1]); \
redis.call('expire', KEYS[1], 3600); return n";
const RO: &str = "return {redis.call('get', KEYS[1]), redis.call('get', KEYS[1] .. ':a'), \
redis.call('get', KEYS[1] .. ':b')}";
const LIBRARY: &str = "#!lua name=script_calls\n\
redis.register_function('rmw', function(keys) redis.call('get', keys[1]); \
local n = redis.call('incr', keys[1]); redis.call('expire', keys[1], 3600); return n end)";

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    EvalSha,
    Fcall,
    Multi,
    EvalShaRo,
}

struct Cell {
    name: String,
    addr: String,
    mode: Mode,
}

struct Options {
    cells: Vec<Cell>,
    clients: usize,
    keys: u64,
    seconds: u64,
    rounds: usize,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        cells: Vec::new(),
        clients: 50,
        keys: 100_000,
        seconds: 10,
        rounds: 3,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        let number = |v: String| v.parse::<u64>().map_err(|e| format!("{a}: {e}"));
        match a.as_str() {
            "--cell" => {
                let v = value()?;
                let parts: Vec<&str> = v.split('=').collect();
                let [name, addr, mode] = parts[..] else {
                    return Err(format!("a cell is NAME=HOST:PORT=MODE, not {v}"));
                };
                let mode = match mode {
                    "evalsha" => Mode::EvalSha,
                    "fcall" => Mode::Fcall,
                    "multi" => Mode::Multi,
                    "evalsha_ro" => Mode::EvalShaRo,
                    m => return Err(format!("unknown mode {m}")),
                };
                o.cells.push(Cell {
                    name: name.into(),
                    addr: addr.into(),
                    mode,
                });
            }
            "--clients" => o.clients = number(value()?)? as usize,
            "--keys" => o.keys = number(value()?)?.max(1),
            "--seconds" => o.seconds = number(value()?)?,
            "--rounds" => o.rounds = number(value()?)?.max(1) as usize,
            other => return Err(format!("unknown option {other}")),
        }
    }
    if o.cells.is_empty() {
        return Err("give at least one --cell NAME=HOST:PORT=MODE".into());
    }
    Ok(o)
}

/// A RESP2 reply, kept only as far as this needs: a status or bulk's
/// text, an error's text as `Err`, anything else as empty.
fn read_reply(r: &mut impl BufRead) -> std::io::Result<Result<Vec<u8>, String>> {
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line)?;
    if line.len() < 3 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    let body = &line[1..line.len() - 2];
    let n = || -> i64 {
        std::str::from_utf8(body)
            .ok()
            .and_then(|t| t.parse().ok())
            .unwrap_or(-1)
    };
    Ok(match line[0] {
        b'-' => Err(String::from_utf8_lossy(body).into_owned()),
        b'$' if n() >= 0 => {
            let mut buf = vec![0u8; n() as usize + 2];
            r.read_exact(&mut buf)?;
            buf.truncate(buf.len() - 2);
            Ok(buf)
        }
        b'*' => {
            for _ in 0..n().max(0) {
                if let Err(e) = read_reply(r)? {
                    return Ok(Err(e));
                }
            }
            Ok(Vec::new())
        }
        _ => Ok(body.to_vec()),
    })
}

/// One request on a fresh connection; its reply's text.
fn request(addr: &str, args: &[&[u8]]) -> Result<Vec<u8>, String> {
    let s = TcpStream::connect(addr).map_err(|e| format!("{addr}: {e}"))?;
    let mut out = Vec::new();
    encode(&mut out, args);
    (&s).write_all(&out).map_err(|e| e.to_string())?;
    read_reply(&mut BufReader::new(s)).map_err(|e| e.to_string())?
}

/// Loads the script or function a cell calls; the request's fixed head
/// (the command and what names the script).
fn prepare(cell: &Cell, keys: u64) -> Result<Vec<Vec<u8>>, String> {
    Ok(match cell.mode {
        Mode::EvalSha => {
            let sha = request(&cell.addr, &[b"SCRIPT", b"LOAD", RMW.as_bytes()])?;
            vec![b"EVALSHA".to_vec(), sha, b"1".to_vec()]
        }
        Mode::Fcall => {
            request(
                &cell.addr,
                &[b"FUNCTION", b"LOAD", b"REPLACE", LIBRARY.as_bytes()],
            )?;
            vec![b"FCALL".to_vec(), b"rmw".to_vec(), b"1".to_vec()]
        }
        Mode::Multi => Vec::new(),
        Mode::EvalShaRo => {
            preload(&cell.addr, keys)?;
            let sha = request(&cell.addr, &[b"SCRIPT", b"LOAD", RO.as_bytes()])?;
            vec![b"EVALSHA_RO".to_vec(), sha, b"1".to_vec()]
        }
    })
}

/// Sets every key the read-only script reads, 1,000 to a pipeline.
fn preload(addr: &str, keys: u64) -> Result<(), String> {
    let s = TcpStream::connect(addr).map_err(|e| format!("{addr}: {e}"))?;
    let mut r = BufReader::new(s.try_clone().map_err(|e| e.to_string())?);
    let mut i = 1;
    while i <= keys {
        let end = (i + 1000).min(keys + 1);
        let mut out = Vec::new();
        for k in i..end {
            for suffix in ["", ":a", ":b"] {
                let key = format!("key:{k}{suffix}");
                encode(&mut out, &[b"SET", key.as_bytes(), b"12345"]);
            }
        }
        (&s).write_all(&out).map_err(|e| e.to_string())?;
        for _ in 0..(end - i) * 3 {
            read_reply(&mut r).map_err(|e| e.to_string())??;
        }
        i = end;
    }
    Ok(())
}

struct Outcome {
    calls_per_sec: f64,
    cpu_us_per_call: f64,
}

fn run_once(cell: &Cell, head: &[Vec<u8>], o: &Options, hz: f64) -> Result<Outcome, String> {
    let pid = server_pid(&cell.addr).map_err(|e| e.to_string())?;
    let stop = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for c in 0..o.clients {
        let (stop, calls, addr, head, mode, keys) = (
            stop.clone(),
            calls.clone(),
            cell.addr.clone(),
            head.to_vec(),
            cell.mode,
            o.keys,
        );
        threads.push(std::thread::spawn(move || -> Result<(), String> {
            let s = TcpStream::connect(&addr).map_err(|e| e.to_string())?;
            s.set_nodelay(true).map_err(|e| e.to_string())?;
            let mut r = BufReader::new(s.try_clone().map_err(|e| e.to_string())?);
            // xorshift64*, seeded apart for every client.
            let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ ((c as u64 + 1) << 17);
            let mut out = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                x ^= x >> 12;
                x ^= x << 25;
                x ^= x >> 27;
                let k = x.wrapping_mul(0x2545_F491_4F6C_DD1D) % keys + 1;
                let key = format!("key:{k}");
                out.clear();
                let replies = if mode == Mode::Multi {
                    encode(&mut out, &[b"MULTI"]);
                    encode(&mut out, &[b"GET", key.as_bytes()]);
                    encode(&mut out, &[b"INCR", key.as_bytes()]);
                    encode(&mut out, &[b"EXPIRE", key.as_bytes(), b"3600"]);
                    encode(&mut out, &[b"EXEC"]);
                    5
                } else {
                    let mut args: Vec<&[u8]> = head.iter().map(|a| a.as_slice()).collect();
                    args.push(key.as_bytes());
                    encode(&mut out, &args);
                    1
                };
                (&s).write_all(&out).map_err(|e| e.to_string())?;
                for _ in 0..replies {
                    read_reply(&mut r)
                        .map_err(|e| e.to_string())?
                        .map_err(|e| format!("{addr}: error reply: {e}"))?;
                }
                calls.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        }));
    }
    std::thread::sleep(Duration::from_secs(1));
    let (c0, t0, started) = (
        calls.load(Ordering::Relaxed),
        Proc::read(pid).map_err(|e| e.to_string())?,
        Instant::now(),
    );
    std::thread::sleep(Duration::from_secs(o.seconds));
    let (c1, t1, window) = (
        calls.load(Ordering::Relaxed),
        Proc::read(pid).map_err(|e| e.to_string())?,
        started.elapsed().as_secs_f64(),
    );
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join()
            .map_err(|_| "a client thread panicked".to_string())??;
    }
    let n = (c1 - c0).max(1) as f64;
    Ok(Outcome {
        calls_per_sec: n / window,
        cpu_us_per_call: t1.cpu_us_per(&t0, n, hz),
    })
}

fn main() {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("script_calls: {e}");
            std::process::exit(2);
        }
    };
    let hz = clock_ticks_per_second();
    let mut heads = Vec::new();
    for cell in &o.cells {
        match prepare(cell, o.keys) {
            Ok(h) => heads.push(h),
            Err(e) => {
                eprintln!("script_calls: {}: {e}", cell.name);
                std::process::exit(1);
            }
        }
    }
    let mut results: Vec<Vec<Outcome>> = o.cells.iter().map(|_| Vec::new()).collect();
    for round in 1..=o.rounds {
        for (i, cell) in o.cells.iter().enumerate() {
            match run_once(cell, &heads[i], &o, hz) {
                Ok(r) => {
                    println!(
                        "round {round} {}: {:.0} calls/s, {:.1} µs CPU/call",
                        cell.name, r.calls_per_sec, r.cpu_us_per_call
                    );
                    results[i].push(r);
                }
                Err(e) => {
                    eprintln!("script_calls: {}: {e}", cell.name);
                    std::process::exit(1);
                }
            }
        }
    }
    println!(
        "median of {} x {}s, {} clients, keys uniform over {}:",
        o.rounds, o.seconds, o.clients, o.keys
    );
    for (cell, r) in o.cells.iter().zip(&results) {
        println!(
            "{}: {:.0} calls/s, {:.1} µs CPU/call",
            cell.name,
            median(r.iter().map(|x| x.calls_per_sec).collect()),
            median(r.iter().map(|x| x.cpu_us_per_call).collect())
        );
    }
}

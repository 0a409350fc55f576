//! A job queue under load: producers LPUSH jobs, consumers BRPOP them, and
//! every job carries the time it was pushed, so the consumer that gets it
//! measures push-to-pop latency. The shape of a Redis-backed work queue
//! (Sidekiq, RQ, Celery's Redis broker), run against each target in turn.
//!
//! ```text
//! cargo run --release -p respite-loadgen --example queue -- \
//!     --target respite=127.0.0.1:6379 --target redis=127.0.0.1:6380 \
//!     --producers 50 --consumers 50 --seconds 10 --rounds 3
//! ```
//!
//! Each client is a thread with a blocking socket, one request in flight,
//! as the usual client libraries run a queue worker. Jobs per second count
//! the pops in the measured window; latency is from the LPUSH being sent to
//! the BRPOP reply being read, in HdrHistogram percentiles. Beside them,
//! the server's CPU time and context switches per job over the window
//! (the server must run on this machine: its PID comes from INFO).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

mod common;
use common::{median, request, server_pid, Proc};

struct Options {
    targets: Vec<(String, String)>,
    producers: usize,
    consumers: usize,
    seconds: u64,
    rounds: usize,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        targets: Vec::new(),
        producers: 50,
        consumers: 50,
        seconds: 10,
        rounds: 1,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--target" => {
                let v = value()?;
                let (name, addr) = v.split_once('=').unwrap_or((&v, &v));
                o.targets.push((name.to_string(), addr.to_string()));
            }
            "--producers" => o.producers = value()?.parse().map_err(|e| format!("{e}"))?,
            "--consumers" => o.consumers = value()?.parse().map_err(|e| format!("{e}"))?,
            "--seconds" => o.seconds = value()?.parse().map_err(|e| format!("{e}"))?,
            "--rounds" => o.rounds = value()?.parse().map_err(|e| format!("{e}"))?,
            other => return Err(format!("unknown option {other}")),
        }
    }
    if o.targets.is_empty() {
        return Err("give at least one --target name=host:port".into());
    }
    Ok(o)
}

/// One RESP2 reply, as far as this needs: the second bulk of an array
/// (BRPOP's element), `None` for a null array or anything else.
fn read_reply(r: &mut BufReader<TcpStream>) -> std::io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line)?;
    if line.is_empty() {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    match line[0] {
        b'*' if line.starts_with(b"*-1") => Ok(None),
        b'*' => {
            let n: usize = std::str::from_utf8(&line[1..line.len() - 2])
                .ok()
                .and_then(|t| t.parse().ok())
                .unwrap_or(0);
            let mut last = None;
            for _ in 0..n {
                last = read_bulk(r)?;
            }
            Ok(last)
        }
        b'-' => Err(std::io::Error::other(
            String::from_utf8_lossy(&line).trim().to_string(),
        )),
        _ => Ok(None),
    }
}

fn read_bulk(r: &mut BufReader<TcpStream>) -> std::io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line)?;
    let n: i64 = std::str::from_utf8(&line[1..line.len().saturating_sub(2)])
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(-1);
    if n < 0 {
        return Ok(None);
    }
    let mut buf = vec![0u8; n as usize + 2];
    std::io::Read::read_exact(r, &mut buf)?;
    buf.truncate(n as usize);
    Ok(Some(buf))
}

struct Result1 {
    jobs_per_sec: f64,
    p50_us: u64,
    p99_us: u64,
    p999_us: u64,
    /// The server's CPU microseconds and context switches per job.
    cpu_us: f64,
    switches: f64,
}

fn run_once(addr: &str, o: &Options, key: &str) -> std::io::Result<Result1> {
    let pid = server_pid(addr)?;
    let origin = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let measuring = Arc::new(AtomicBool::new(false));
    let pops = Arc::new(AtomicU64::new(0));
    let hist = Arc::new(Mutex::new(
        Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).map_err(std::io::Error::other)?,
    ));
    let mut threads = Vec::new();
    for p in 0..o.producers {
        let (stop, addr, key) = (stop.clone(), addr.to_string(), key.to_string());
        threads.push(std::thread::spawn(move || -> std::io::Result<()> {
            let s = TcpStream::connect(&addr)?;
            s.set_nodelay(true)?;
            let mut w = s.try_clone()?;
            let mut r = BufReader::new(s);
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let now = origin.elapsed().as_nanos() as u64;
                // 64 bytes: the timestamp, then the producer and a count.
                let job = format!("{now:020}:{p:04}:{n:038}");
                w.write_all(&request(&[b"LPUSH", key.as_bytes(), job.as_bytes()]))?;
                let mut line = Vec::new();
                r.read_until(b'\n', &mut line)?;
                n += 1;
            }
            Ok(())
        }));
    }
    for _ in 0..o.consumers {
        let (stop, measuring, pops, hist, addr, key) = (
            stop.clone(),
            measuring.clone(),
            pops.clone(),
            hist.clone(),
            addr.to_string(),
            key.to_string(),
        );
        threads.push(std::thread::spawn(move || -> std::io::Result<()> {
            let s = TcpStream::connect(&addr)?;
            s.set_nodelay(true)?;
            let mut w = s.try_clone()?;
            let mut r = BufReader::new(s);
            let mut local = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)
                .map_err(std::io::Error::other)?;
            loop {
                w.write_all(&request(&[b"BRPOP", key.as_bytes(), b"0.2"]))?;
                match read_reply(&mut r)? {
                    Some(job) => {
                        let now = origin.elapsed().as_nanos() as u64;
                        let pushed: u64 = std::str::from_utf8(&job[..20.min(job.len())])
                            .ok()
                            .and_then(|t| t.parse().ok())
                            .unwrap_or(now);
                        if measuring.load(Ordering::Relaxed) {
                            pops.fetch_add(1, Ordering::Relaxed);
                            let _ = local.record((now.saturating_sub(pushed) / 1000).max(1));
                        }
                    }
                    None if stop.load(Ordering::Relaxed) => break,
                    None => {}
                }
            }
            if let Ok(mut h) = hist.lock() {
                let _ = h.add(&local);
            }
            Ok(())
        }));
    }
    // A second of warm-up, then the measured window.
    std::thread::sleep(Duration::from_secs(1));
    let before = Proc::read(pid)?;
    measuring.store(true, Ordering::Relaxed);
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs(o.seconds));
    measuring.store(false, Ordering::Relaxed);
    let window = started.elapsed().as_secs_f64();
    let after = Proc::read(pid)?;
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join()
            .map_err(|_| std::io::Error::other("a client thread panicked"))??;
    }
    let h = hist
        .lock()
        .map_err(|_| std::io::Error::other("histogram lock"))?;
    let jobs = pops.load(Ordering::Relaxed) as f64;
    let hz = common::clock_ticks_per_second();
    Ok(Result1 {
        jobs_per_sec: jobs / window,
        p50_us: h.value_at_quantile(0.5),
        p99_us: h.value_at_quantile(0.99),
        p999_us: h.value_at_quantile(0.999),
        cpu_us: after.cpu_us_per(&before, jobs, hz),
        switches: after.switches_per(&before, jobs),
    })
}

fn main() {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("queue: {e}");
            std::process::exit(2);
        }
    };
    let mut rows: Vec<Vec<Result1>> = o.targets.iter().map(|_| Vec::new()).collect();
    for round in 0..o.rounds {
        for (i, (name, addr)) in o.targets.iter().enumerate() {
            match run_once(addr, &o, &format!("queue:{round}")) {
                Ok(r) => rows[i].push(r),
                Err(e) => {
                    eprintln!("queue: {name} ({addr}): {e}");
                    std::process::exit(1);
                }
            }
        }
    }
    println!(
        "| {} producers LPUSH, {} consumers BRPOP, {} s x {} rounds (medians) | jobs/s | p50 push-to-pop | p99 | p99.9 | server CPU µs/job | context switches/job |",
        o.producers, o.consumers, o.seconds, o.rounds
    );
    println!("|---|---|---|---|---|---|---|");
    for (i, (name, _)) in o.targets.iter().enumerate() {
        let r = &rows[i];
        let jobs = median(r.iter().map(|x| x.jobs_per_sec).collect());
        let p = |f: fn(&Result1) -> u64| median(r.iter().map(|x| f(x) as f64).collect()) / 1000.0;
        println!(
            "| {name} | {jobs:.0} | {:.2} ms | {:.2} ms | {:.2} ms | {:.1} | {:.2} |",
            p(|x| x.p50_us),
            p(|x| x.p99_us),
            p(|x| x.p999_us),
            median(r.iter().map(|x| x.cpu_us).collect()),
            median(r.iter().map(|x| x.switches).collect()),
        );
    }
}

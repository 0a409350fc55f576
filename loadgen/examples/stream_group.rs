//! Consumers of one stream's consumer group under load: the stream is
//! filled first, then every consumer runs the loop of a stream worker,
//! `XREADGROUP GROUP g <its name> COUNT n STREAMS s >` and one `XACK` of
//! the IDs it got, until the stream runs dry or the time is up. The shape
//! of a group of workers sharing a stream (BullMQ's and Celery's stream
//! transports, redis-py's consumer examples), run against each target in
//! turn.
//!
//! ```text
//! cargo run --release -p respite-loadgen --example stream_group -- \
//!     --target respite=127.0.0.1:6379 --pid respite=1234 \
//!     --target redis=127.0.0.1:6380 --pid redis=5678 \
//!     --consumers 50 --count 1 --entries 200000 --seconds 10 --rounds 3
//! ```
//!
//! Each consumer is a thread with a blocking socket and one request in
//! flight. The rate counts entries acknowledged per second in the measured
//! window; the latency is one round of the loop (XREADGROUP sent to XACK's
//! reply read), in HdrHistogram percentiles; with `--pid NAME=PID` the
//! server's CPU (utime + stime from `/proc/PID/stat`) over the window is
//! divided by the entries acknowledged, and so are the bytes it wrote
//! (`write_bytes` of `/proc/PID/io`, read a second after the window).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

mod common;
use common::{clock_ticks_per_second, encode, written_bytes, Proc};

struct Options {
    targets: Vec<(String, String)>,
    pids: Vec<(String, u32)>,
    consumers: usize,
    count: usize,
    entries: usize,
    seconds: u64,
    rounds: usize,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        targets: Vec::new(),
        pids: Vec::new(),
        consumers: 50,
        count: 1,
        entries: 200_000,
        seconds: 10,
        rounds: 1,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        let num = |v: String| v.parse::<u64>().map_err(|e| format!("{a}: {e}"));
        match a.as_str() {
            "--target" => {
                let v = value()?;
                let (name, addr) = v.split_once('=').unwrap_or((&v, &v));
                o.targets.push((name.to_string(), addr.to_string()));
            }
            "--pid" => {
                let v = value()?;
                let (name, pid) = v.split_once('=').ok_or("--pid takes NAME=PID")?;
                let pid = pid.parse().map_err(|e| format!("--pid: {e}"))?;
                o.pids.push((name.to_string(), pid));
            }
            "--consumers" => o.consumers = num(value()?)? as usize,
            "--count" => o.count = num(value()?)?.max(1) as usize,
            "--entries" => o.entries = num(value()?)? as usize,
            "--seconds" => o.seconds = num(value()?)?,
            "--rounds" => o.rounds = num(value()?)? as usize,
            other => return Err(format!("unknown option {other}")),
        }
    }
    if o.targets.is_empty() {
        return Err("give at least one --target name=host:port".into());
    }
    Ok(o)
}

/// A RESP2 reply, as far as this needs.
enum Value {
    Bulk(Vec<u8>),
    Array(Vec<Value>),
    Nil,
    Other,
}

fn io_err(what: String) -> std::io::Error {
    std::io::Error::other(what)
}

fn read_value(r: &mut BufReader<TcpStream>) -> std::io::Result<Value> {
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line)?;
    if line.len() < 3 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    let body = &line[1..line.len() - 2];
    let n = || -> std::io::Result<i64> {
        std::str::from_utf8(body)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| io_err(format!("bad length {:?}", String::from_utf8_lossy(body))))
    };
    match line[0] {
        b'$' => {
            let len = n()?;
            if len < 0 {
                return Ok(Value::Nil);
            }
            let mut buf = vec![0; len as usize + 2];
            r.read_exact(&mut buf)?;
            buf.truncate(len as usize);
            Ok(Value::Bulk(buf))
        }
        b'*' => {
            let len = n()?;
            if len < 0 {
                return Ok(Value::Nil);
            }
            let mut items = Vec::with_capacity(len as usize);
            for _ in 0..len {
                items.push(read_value(r)?);
            }
            Ok(Value::Array(items))
        }
        b'-' => Err(io_err(String::from_utf8_lossy(body).into_owned())),
        _ => Ok(Value::Other),
    }
}

/// The entry IDs of an XREADGROUP reply for one stream.
fn entry_ids(v: Value) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let Value::Array(streams) = v else {
        return out;
    };
    for s in streams {
        let Value::Array(mut kv) = s else { continue };
        let Some(Value::Array(entries)) = kv.pop() else {
            continue;
        };
        for e in entries {
            if let Value::Array(mut parts) = e {
                if let Some(Value::Bulk(id)) = parts.drain(..).next() {
                    out.push(id);
                }
            }
        }
    }
    out
}

fn connect(addr: &str) -> std::io::Result<(TcpStream, BufReader<TcpStream>)> {
    let s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    let r = BufReader::new(s.try_clone()?);
    Ok((s, r))
}

/// The stream `s` anew with `n` entries (one field, a 64-byte value) and
/// the group `g` at its start.
fn fill(addr: &str, n: usize) -> std::io::Result<()> {
    let (mut w, mut r) = connect(addr)?;
    let mut out = Vec::new();
    encode(&mut out, &[b"DEL", b"s"]);
    encode(
        &mut out,
        &[b"XGROUP", b"CREATE", b"s", b"g", b"0", b"MKSTREAM"],
    );
    w.write_all(&out)?;
    read_value(&mut r)?;
    read_value(&mut r)?;
    let value = [b'v'; 64];
    let mut done = 0;
    while done < n {
        let batch = (n - done).min(1000);
        out.clear();
        for _ in 0..batch {
            encode(&mut out, &[b"XADD", b"s", b"*", b"f", &value]);
        }
        w.write_all(&out)?;
        for _ in 0..batch {
            read_value(&mut r)?;
        }
        done += batch;
    }
    Ok(())
}

struct Outcome {
    acked: u64,
    secs: f64,
    hist: Histogram<u64>,
    cpu_us: Option<f64>,
    /// Bytes written per entry acknowledged, the fsyncs and a checkpoint
    /// the run set off given a second to finish.
    bytes: Option<f64>,
}

fn run(o: &Options, name: &str, addr: &str) -> std::io::Result<Outcome> {
    fill(addr, o.entries)?;
    let pid = o.pids.iter().find(|(n, _)| n == name).map(|(_, p)| *p);
    let acked = Arc::new(AtomicU64::new(0));
    let hist = Arc::new(Mutex::new(
        Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).map_err(|e| io_err(e.to_string()))?,
    ));
    let deadline = Instant::now() + Duration::from_secs(o.seconds);
    let t0 = pid.and_then(|p| Proc::read(p).ok());
    let w0 = pid.and_then(written_bytes);
    let started = Instant::now();
    let mut threads = Vec::new();
    for c in 0..o.consumers {
        let (addr, acked, hist, count) = (addr.to_string(), acked.clone(), hist.clone(), o.count);
        threads.push(std::thread::spawn(move || -> std::io::Result<()> {
            let (mut w, mut r) = connect(&addr)?;
            let consumer = format!("c{c}");
            let count = count.to_string();
            let mut local = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)
                .map_err(|e| io_err(e.to_string()))?;
            let mut out = Vec::new();
            while Instant::now() < deadline {
                let sent = Instant::now();
                out.clear();
                encode(
                    &mut out,
                    &[
                        b"XREADGROUP",
                        b"GROUP",
                        b"g",
                        consumer.as_bytes(),
                        b"COUNT",
                        count.as_bytes(),
                        b"STREAMS",
                        b"s",
                        b">",
                    ],
                );
                w.write_all(&out)?;
                let ids = entry_ids(read_value(&mut r)?);
                if ids.is_empty() {
                    break;
                }
                out.clear();
                let mut args: Vec<&[u8]> = vec![b"XACK", b"s", b"g"];
                args.extend(ids.iter().map(|i| &i[..]));
                encode(&mut out, &args);
                w.write_all(&out)?;
                read_value(&mut r)?;
                acked.fetch_add(ids.len() as u64, Ordering::Relaxed);
                let _ = local.record(sent.elapsed().as_micros() as u64);
            }
            if let Ok(mut h) = hist.lock() {
                let _ = h.add(&local);
            }
            Ok(())
        }));
    }
    for t in threads {
        t.join()
            .map_err(|_| io_err("a consumer panicked".into()))??;
    }
    let secs = started.elapsed().as_secs_f64();
    let t1 = pid.and_then(|p| Proc::read(p).ok());
    let acked = acked.load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_secs(1));
    let w1 = pid.and_then(written_bytes);
    let bytes = w0
        .zip(w1)
        .map(|(a, b)| b.saturating_sub(a) as f64 / acked.max(1) as f64);
    let hz = clock_ticks_per_second();
    let cpu_us = t0.zip(t1).map(|(a, b)| b.cpu_us_per(&a, acked as f64, hz));
    let hist = hist
        .lock()
        .map(|h| h.clone())
        .unwrap_or_else(|e| e.into_inner().clone());
    Ok(Outcome {
        acked,
        secs,
        hist,
        cpu_us,
        bytes,
    })
}

fn main() {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("stream_group: {e}");
            std::process::exit(2);
        }
    };
    println!(
        "{} consumers, COUNT {}, {} entries, {} s, {} round(s)",
        o.consumers, o.count, o.entries, o.seconds, o.rounds
    );
    println!(
        "| round | target | entries/s | loop p50 µs | loop p99 µs | server CPU µs/entry | bytes written/entry |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    for round in 1..=o.rounds {
        for (name, addr) in &o.targets {
            match run(&o, name, addr) {
                Ok(out) => println!(
                    "| {round} | {name} | {:.0} | {} | {} | {} | {} |",
                    out.acked as f64 / out.secs,
                    out.hist.value_at_quantile(0.5),
                    out.hist.value_at_quantile(0.99),
                    out.cpu_us.map_or("-".to_string(), |c| format!("{c:.1}")),
                    out.bytes.map_or("-".to_string(), |b| format!("{b:.0}")),
                ),
                Err(e) => println!("| {round} | {name} | error: {e} | | | | |"),
            }
        }
    }
}

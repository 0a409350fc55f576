//! PUBLISH under load, measured where it ends: at the subscribers. Each
//! publisher sends `PUBLISH <channel> <payload>` with one request in
//! flight, the payload carrying the time it was sent, its publisher and
//! its sequence number; each subscriber reads the messages as they come,
//! counts them, checks every publisher's messages arrive in the order they
//! were published, and records publish-to-receipt latency. The targets are
//! run in turn, with the same subscribers and publishers.
//!
//! ```text
//! cargo run --release -p respite-loadgen --example pubsub -- \
//!     --target respite=127.0.0.1:6379 --target redis=127.0.0.1:6380 \
//!     --publishers 50 --subscribers 1 --seconds 10 --rounds 3
//! ```
//!
//! The publishers share one thread and the subscribers another (each a
//! single-threaded runtime, as memtier_benchmark's `-t 1` runs its
//! connections), so the load generator's own cost stays two threads
//! however many connections it has. Messages per second count the
//! messages subscribers received in the measured window (after a second of
//! warm-up). Beside them, from the server's process (its `process_id` in
//! INFO, read in `/proc`) over the same window: CPU microseconds (user plus
//! system, every thread) per delivered message, write syscalls per
//! delivered message (`syscw` of `/proc/PID/io`), and context switches
//! (voluntary and involuntary, summed over its threads) per PUBLISH.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

mod common;
use common::{encode, median, server_pid, Proc};

struct Options {
    targets: Vec<(String, String)>,
    publishers: usize,
    subscribers: usize,
    seconds: u64,
    rounds: usize,
    size: usize,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        targets: Vec::new(),
        publishers: 50,
        subscribers: 1,
        seconds: 10,
        rounds: 1,
        size: 64,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        let num = |v: String| v.parse::<usize>().map_err(|e| format!("{a}: {e}"));
        match a.as_str() {
            "--target" => {
                let v = value()?;
                let (name, addr) = v.split_once('=').unwrap_or((&v, &v));
                o.targets.push((name.to_string(), addr.to_string()));
            }
            "--publishers" => o.publishers = num(value()?)?,
            "--subscribers" => o.subscribers = num(value()?)?,
            "--seconds" => o.seconds = num(value()?)? as u64,
            "--rounds" => o.rounds = num(value()?)?,
            "--size" => o.size = num(value()?)?,
            other => return Err(format!("unknown option {other}")),
        }
    }
    if o.targets.is_empty() {
        return Err("give at least one --target name=host:port".into());
    }
    if o.size < PAYLOAD_HEAD {
        return Err(format!("--size must be at least {PAYLOAD_HEAD}"));
    }
    if o.publishers == 0 || o.subscribers == 0 || o.rounds == 0 {
        return Err("--publishers, --subscribers and --rounds must be at least 1".into());
    }
    Ok(o)
}

/// The payload starts with the send time (20 digits of ns since the run's
/// origin), `:`, the publisher (5 digits), `:`, its sequence number (20
/// digits); the rest is padding.
const PAYLOAD_HEAD: usize = 20 + 1 + 5 + 1 + 20;

fn digits(b: &[u8]) -> Option<u64> {
    let mut n = 0u64;
    for &c in b {
        if !c.is_ascii_digit() {
            return None;
        }
        n = n * 10 + u64::from(c - b'0');
    }
    Some(n)
}

/// The write syscalls of a process over a window, counted by `perf stat`.
/// The counts are scaled to the measured window (perf's own window is a
/// little longer: from its start to its interruption).
struct WriteCount(Option<std::process::Child>, Instant);

const WRITE_EVENTS: &str = "syscalls:sys_enter_write,syscalls:sys_enter_writev,\
syscalls:sys_enter_sendto,syscalls:sys_enter_sendmsg";

impl WriteCount {
    fn start(pid: u32) -> WriteCount {
        let child = std::process::Command::new("perf")
            .args(["stat", "-x,", "-e", WRITE_EVENTS, "-p", &pid.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .ok();
        // perf attaches to the process's threads before it counts.
        std::thread::sleep(Duration::from_millis(300));
        WriteCount(child, Instant::now())
    }

    /// Stops counting: the sum of the events per second, if perf counted
    /// them.
    fn stop(self) -> Option<f64> {
        let child = self.0?;
        let elapsed = self.1.elapsed().as_secs_f64();
        let _ = std::process::Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status();
        let out = child.wait_with_output().ok()?;
        let text = String::from_utf8_lossy(&out.stderr);
        let counts: Vec<u64> = text
            .lines()
            .filter(|l| l.contains("sys_enter_"))
            .filter_map(|l| l.split(',').next()?.parse().ok())
            .collect();
        (counts.len() == 4).then(|| counts.iter().sum::<u64>() as f64 / elapsed)
    }
}

struct Round {
    publishes_per_sec: f64,
    delivered_per_sec: f64,
    p50_us: u64,
    p99_us: u64,
    p999_us: u64,
    cpu_us_per_message: f64,
    writes_per_message: f64,
    switches_per_publish: f64,
}

struct Shared {
    origin: Instant,
    stop: AtomicBool,
    measuring: AtomicBool,
    published: AtomicU64,
    delivered: AtomicU64,
    hist: Mutex<Histogram<u64>>,
}

async fn publisher(
    addr: String,
    channel: String,
    id: usize,
    size: usize,
    shared: Arc<Shared>,
) -> std::io::Result<()> {
    let s = TcpStream::connect(&addr).await?;
    s.set_nodelay(true)?;
    let (r, mut w) = s.into_split();
    let mut r = BufReader::new(r);
    let mut payload = vec![b'x'; size];
    let mut request = Vec::with_capacity(size + 64);
    let mut line = Vec::new();
    let mut n = 0u64;
    while !shared.stop.load(Ordering::Relaxed) {
        let now = shared.origin.elapsed().as_nanos() as u64;
        let head = format!("{now:020}:{id:05}:{n:020}");
        payload[..PAYLOAD_HEAD].copy_from_slice(head.as_bytes());
        request.clear();
        encode(&mut request, &[b"PUBLISH", channel.as_bytes(), &payload]);
        w.write_all(&request).await?;
        line.clear();
        r.read_until(b'\n', &mut line).await?;
        if line.first() != Some(&b':') {
            return Err(std::io::Error::other(format!(
                "PUBLISH answered {}",
                String::from_utf8_lossy(&line).trim()
            )));
        }
        if shared.measuring.load(Ordering::Relaxed) {
            shared.published.fetch_add(1, Ordering::Relaxed);
        }
        n += 1;
    }
    Ok(())
}

async fn subscriber(
    addr: String,
    channel: String,
    publishers: usize,
    size: usize,
    shared: Arc<Shared>,
    ready: Arc<AtomicU64>,
) -> std::io::Result<()> {
    let mut s = TcpStream::connect(&addr).await?;
    let mut out = Vec::new();
    encode(&mut out, &[b"SUBSCRIBE", channel.as_bytes()]);
    s.write_all(&out).await?;
    // The confirmation: `*3 $9 subscribe $<len> <channel> :1`.
    let confirmation = format!(
        "*3\r\n$9\r\nsubscribe\r\n${}\r\n{channel}\r\n:1\r\n",
        channel.len()
    );
    let mut buf = vec![0u8; confirmation.len()];
    s.read_exact(&mut buf).await?;
    if buf != confirmation.as_bytes() {
        return Err(std::io::Error::other(format!(
            "SUBSCRIBE answered {}",
            String::from_utf8_lossy(&buf)
        )));
    }
    ready.fetch_add(1, Ordering::Relaxed);
    // Every message is the same length, its payload at the end.
    let head = format!(
        "*3\r\n$7\r\nmessage\r\n${}\r\n{channel}\r\n${size}\r\n",
        channel.len()
    );
    let frame = head.len() + size + 2;
    let mut next = vec![0u64; publishers];
    let mut local =
        Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).map_err(std::io::Error::other)?;
    let mut received = 0u64;
    let mut input = Vec::with_capacity(256 * 1024);
    let mut chunk = vec![0u8; 256 * 1024];
    loop {
        let n = match tokio::time::timeout(Duration::from_millis(200), s.read(&mut chunk)).await {
            Ok(r) => r?,
            Err(_) if shared.stop.load(Ordering::Relaxed) => break,
            Err(_) => continue,
        };
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        input.extend_from_slice(&chunk[..n]);
        let now = shared.origin.elapsed().as_nanos() as u64;
        let measuring = shared.measuring.load(Ordering::Relaxed);
        let mut at = 0;
        while input.len() - at >= frame {
            let f = &input[at..at + frame];
            if !f.starts_with(head.as_bytes()) || !f.ends_with(b"\r\n") {
                return Err(std::io::Error::other(format!(
                    "unexpected push: {}",
                    String::from_utf8_lossy(&f[..f.len().min(80)])
                )));
            }
            let p = &f[head.len()..head.len() + PAYLOAD_HEAD];
            let (Some(sent), Some(id), Some(seq)) =
                (digits(&p[..20]), digits(&p[21..26]), digits(&p[27..47]))
            else {
                return Err(std::io::Error::other("a payload this did not send"));
            };
            let id = id as usize;
            if id >= publishers || seq < next[id] {
                return Err(std::io::Error::other(format!(
                    "publisher {id}'s message {seq} came after its message {}",
                    next[id].saturating_sub(1)
                )));
            }
            next[id] = seq + 1;
            if measuring {
                received += 1;
                let _ = local.record((now.saturating_sub(sent) / 1000).max(1));
            }
            at += frame;
        }
        input.drain(..at);
    }
    shared.delivered.fetch_add(received, Ordering::Relaxed);
    if let Ok(mut h) = shared.hist.lock() {
        let _ = h.add(&local);
    }
    Ok(())
}

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

fn run_once(addr: &str, o: &Options, channel: &str) -> std::io::Result<Round> {
    let pid = server_pid(addr)?;
    let shared = Arc::new(Shared {
        origin: Instant::now(),
        stop: AtomicBool::new(false),
        measuring: AtomicBool::new(false),
        published: AtomicU64::new(0),
        delivered: AtomicU64::new(0),
        hist: Mutex::new(
            Histogram::new_with_bounds(1, 60_000_000, 3).map_err(std::io::Error::other)?,
        ),
    });
    let ready = Arc::new(AtomicU64::new(0));
    let subs = {
        let (shared, ready, addr, channel) = (
            shared.clone(),
            ready.clone(),
            addr.to_string(),
            channel.to_string(),
        );
        let (n, publishers, size) = (o.subscribers, o.publishers, o.size);
        std::thread::spawn(move || -> std::io::Result<()> {
            runtime()?.block_on(async move {
                let tasks: Vec<_> = (0..n)
                    .map(|_| {
                        tokio::spawn(subscriber(
                            addr.clone(),
                            channel.clone(),
                            publishers,
                            size,
                            shared.clone(),
                            ready.clone(),
                        ))
                    })
                    .collect();
                for t in tasks {
                    t.await.map_err(std::io::Error::other)??;
                }
                Ok(())
            })
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while ready.load(Ordering::Relaxed) < o.subscribers as u64 {
        if subs.is_finished() || Instant::now() > deadline {
            shared.stop.store(true, Ordering::Relaxed);
            subs.join()
                .map_err(|_| std::io::Error::other("subscribers panicked"))??;
            return Err(std::io::Error::other(
                "the subscribers did not all subscribe",
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let pubs = {
        let (shared, addr, channel) = (shared.clone(), addr.to_string(), channel.to_string());
        let (n, size) = (o.publishers, o.size);
        std::thread::spawn(move || -> std::io::Result<()> {
            runtime()?.block_on(async move {
                let tasks: Vec<_> = (0..n)
                    .map(|id| {
                        tokio::spawn(publisher(
                            addr.clone(),
                            channel.clone(),
                            id,
                            size,
                            shared.clone(),
                        ))
                    })
                    .collect();
                for t in tasks {
                    t.await.map_err(std::io::Error::other)??;
                }
                Ok(())
            })
        })
    };
    // A second of warm-up, then the measured window.
    std::thread::sleep(Duration::from_secs(1));
    let writes = WriteCount::start(pid);
    let before = Proc::read(pid)?;
    shared.measuring.store(true, Ordering::Relaxed);
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs(o.seconds));
    shared.measuring.store(false, Ordering::Relaxed);
    let window = started.elapsed().as_secs_f64();
    let after = Proc::read(pid)?;
    let writes = writes.stop();
    shared.stop.store(true, Ordering::Relaxed);
    let published = pubs
        .join()
        .map_err(|_| std::io::Error::other("publishers panicked"));
    let subscribed = subs
        .join()
        .map_err(|_| std::io::Error::other("subscribers panicked"));
    published??;
    subscribed??;
    let h = shared
        .hist
        .lock()
        .map_err(|_| std::io::Error::other("histogram lock"))?;
    let delivered = shared.delivered.load(Ordering::Relaxed).max(1) as f64;
    let publishes = shared.published.load(Ordering::Relaxed).max(1) as f64;
    let hz = common::clock_ticks_per_second();
    Ok(Round {
        publishes_per_sec: publishes / window,
        delivered_per_sec: delivered / window,
        p50_us: h.value_at_quantile(0.5),
        p99_us: h.value_at_quantile(0.99),
        p999_us: h.value_at_quantile(0.999),
        cpu_us_per_message: after.cpu_us_per(&before, delivered, hz),
        writes_per_message: writes.map_or(f64::NAN, |w| w * window / delivered),
        switches_per_publish: after.switches_per(&before, publishes),
    })
}

fn main() {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("pubsub: {e}");
            std::process::exit(2);
        }
    };
    let mut rows: Vec<Vec<Round>> = o.targets.iter().map(|_| Vec::new()).collect();
    for round in 0..o.rounds {
        for (i, (name, addr)) in o.targets.iter().enumerate() {
            match run_once(addr, &o, &format!("bench:{round}")) {
                Ok(r) => rows[i].push(r),
                Err(e) => {
                    eprintln!("pubsub: {name} ({addr}): {e}");
                    std::process::exit(1);
                }
            }
        }
    }
    println!(
        "{} publishers, {} subscriber(s), {}-byte payloads, {} s x {} rounds (medians)",
        o.publishers, o.subscribers, o.size, o.seconds, o.rounds
    );
    println!();
    println!("| target | PUBLISH/s | messages delivered/s | vs first | p50 ms | p99 ms | p99.9 ms | µs CPU/message | write syscalls/message | context switches/PUBLISH |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let first = median(rows[0].iter().map(|x| x.delivered_per_sec).collect());
    for (i, (name, _)) in o.targets.iter().enumerate() {
        let r = &rows[i];
        let m = |f: fn(&Round) -> f64| median(r.iter().map(f).collect());
        let delivered = m(|x| x.delivered_per_sec);
        println!(
            "| {name} | {:.0} | {delivered:.0} | {:.2}x | {:.3} | {:.3} | {:.3} | {:.2} | {:.3} | {:.2} |",
            m(|x| x.publishes_per_sec),
            delivered / first,
            m(|x| x.p50_us as f64) / 1000.0,
            m(|x| x.p99_us as f64) / 1000.0,
            m(|x| x.p999_us as f64) / 1000.0,
            m(|x| x.cpu_us_per_message),
            m(|x| x.writes_per_message),
            m(|x| x.switches_per_publish),
        );
    }
}

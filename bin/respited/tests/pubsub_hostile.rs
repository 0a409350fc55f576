//! Pub/sub under hostile use: subscriptions churned by the thousand,
//! glob patterns built to make a backtracking matcher explode, a
//! subscriber that never reads while a publisher floods, one client with
//! ten thousand channels. Each time the server must keep answering other
//! clients; the latency bounds are loose (seconds, on a loaded CI machine),
//! there to catch a stall, not to measure.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{RedisServer, Respited};

/// Pings the server from its own connection until `stop`, answering the
/// slowest round trip.
fn watchdog(port: u16, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Duration> {
    std::thread::spawn(move || {
        let mut con = common::client_for(port);
        let mut worst = Duration::ZERO;
        while !stop.load(Ordering::Relaxed) {
            let t = Instant::now();
            let _: String = redis::cmd("PING").query(&mut con).unwrap();
            worst = worst.max(t.elapsed());
            std::thread::sleep(Duration::from_millis(5));
        }
        worst
    })
}

/// Reads until `want` bytes arrived.
fn read_exactly(s: &mut TcpStream, want: usize) -> Vec<u8> {
    let mut got = vec![0u8; want];
    s.read_exact(&mut got).expect("read");
    got
}

fn confirmation(word: &str, name: &str, count: usize) -> Vec<u8> {
    format!(
        "*3\r\n${}\r\n{word}\r\n${}\r\n{name}\r\n:{count}\r\n",
        word.len(),
        name.len()
    )
    .into_bytes()
}

#[test]
fn thousands_of_subscribe_cycles_leave_nothing_behind() {
    let server = Respited::start(&[]);
    let port = server.port;
    let stop = Arc::new(AtomicBool::new(false));
    let dog = watchdog(port, stop.clone());
    let mut sub = common::raw_for(port);
    let started = Instant::now();
    for round in 0..50 {
        // 100 channels and 20 patterns subscribed, then dropped, per round:
        // 5,000 channel and 1,000 pattern cycles in all.
        let channels: Vec<String> = (0..100).map(|i| format!("ch:{round}:{i}")).collect();
        let patterns: Vec<String> = (0..20).map(|i| format!("p:{round}:{i}:*")).collect();
        let mut req = Vec::new();
        for c in &channels {
            req.extend(common::encode(&["SUBSCRIBE", c]));
        }
        for p in &patterns {
            req.extend(common::encode(&["PSUBSCRIBE", p]));
        }
        for c in &channels {
            req.extend(common::encode(&["UNSUBSCRIBE", c]));
        }
        for p in &patterns {
            req.extend(common::encode(&["PUNSUBSCRIBE", p]));
        }
        sub.write_all(&req).unwrap();
        let mut want = Vec::new();
        for (i, c) in channels.iter().enumerate() {
            want.extend(confirmation("subscribe", c, i + 1));
        }
        for (i, p) in patterns.iter().enumerate() {
            want.extend(confirmation("psubscribe", p, 101 + i));
        }
        for (i, c) in channels.iter().enumerate() {
            want.extend(confirmation("unsubscribe", c, 119 - i));
        }
        for (i, p) in patterns.iter().enumerate() {
            want.extend(confirmation("punsubscribe", p, 19 - i));
        }
        let got = read_exactly(&mut sub, want.len());
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want)
        );
    }
    let churn = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let worst = dog.join().unwrap();
    let mut con = common::client_for(port);
    let numpat: i64 = redis::cmd("PUBSUB").arg("NUMPAT").query(&mut con).unwrap();
    let channels: Vec<String> = redis::cmd("PUBSUB")
        .arg("CHANNELS")
        .query(&mut con)
        .unwrap();
    assert_eq!((numpat, channels.len()), (0, 0));
    assert_eq!(
        common::info_field(&mut con, "stats", "pubsub_channels"),
        0.0
    );
    // No longer subscribed: an ordinary command runs in RESP2.
    sub.write_all(&common::encode(&["GET", "x"])).unwrap();
    assert_eq!(read_exactly(&mut sub, 5), b"$-1\r\n");
    assert!(
        churn < Duration::from_secs(60),
        "6,000 cycles took {churn:?}"
    );
    assert!(worst < Duration::from_secs(2), "a PING waited {worst:?}");
}

/// Patterns that make a naive backtracking matcher exponential, against
/// long channel names: answered as redis-server answers them (PUBLISH's
/// receiver count, PUBSUB CHANNELS's match), each in well under a second,
/// while another client is served.
#[test]
fn pathological_glob_patterns_match_as_redis_and_never_stall() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let ours = Respited::start(&[]);
    let stars = |n: usize| format!("{}b", "*a".repeat(n));
    let patterns = [
        stars(30),
        stars(200),
        format!("{}*", "a*".repeat(100)),
        format!("{}[ab]*?b", "*?".repeat(50)),
        format!("*{}*", "[a-z]".repeat(40)),
        "\\*a*".to_string(),
    ];
    let channels = [
        "a".repeat(10_000),
        format!("{}b", "a".repeat(5_000)),
        format!("*{}", "a".repeat(3_000)),
        "ab".repeat(2_000),
    ];
    let run = |port: u16| -> Vec<String> {
        let stop = Arc::new(AtomicBool::new(false));
        let dog = watchdog(port, stop.clone());
        let mut sub = common::raw_for(port);
        let mut req = Vec::new();
        for p in &patterns {
            req.extend(common::encode(&["PSUBSCRIBE", p]));
        }
        sub.write_all(&req).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        common::read_until_quiet(&mut sub, Duration::from_millis(100));
        let mut con = common::client_for(port);
        let mut out = Vec::new();
        for c in &channels {
            let t = Instant::now();
            let n: i64 = redis::cmd("PUBLISH")
                .arg(c)
                .arg("m")
                .query(&mut con)
                .unwrap();
            assert!(
                t.elapsed() < Duration::from_secs(1),
                "PUBLISH took {:?}",
                t.elapsed()
            );
            out.push(format!("{} chars -> {n}", c.len()));
        }
        stop.store(true, Ordering::Relaxed);
        let worst = dog.join().unwrap();
        assert!(worst < Duration::from_secs(2), "a PING waited {worst:?}");
        out
    };
    assert_eq!(run(ours.port), run(redis.port));
}

/// A subscriber that never reads, flooded by a publisher: closed at the
/// pubsub hard limit; the publisher never waits, and other clients'
/// commands keep being answered meanwhile.
#[test]
fn a_flooded_subscriber_is_cut_off_and_others_are_served() {
    let server = Respited::start(&[]);
    let port = server.port;
    let mut con = common::client_for(port);
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("client-output-buffer-limit")
        .arg("pubsub 4mb 1mb 1")
        .query(&mut con)
        .unwrap();
    let mut lazy = common::raw_for(port);
    lazy.write_all(&common::encode(&["SUBSCRIBE", "flood"]))
        .unwrap();
    let mut reader = common::raw_for(port);
    reader
        .write_all(&common::encode(&["SUBSCRIBE", "flood"]))
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let reading = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        let mut total = 0usize;
        reader
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            total += n;
        }
        total
    });
    let stop = Arc::new(AtomicBool::new(false));
    let dog = watchdog(port, stop.clone());
    let payload = "x".repeat(32 * 1024);
    let started = Instant::now();
    let mut receivers = Vec::new();
    for _ in 0..1000 {
        let n: i64 = redis::cmd("PUBLISH")
            .arg("flood")
            .arg(&payload)
            .query(&mut con)
            .unwrap();
        receivers.push(n);
    }
    let flood = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let worst = dog.join().unwrap();
    // The reader keeps up and stays; the lazy one goes once past 4 MB.
    assert_eq!(receivers[0], 2);
    assert_eq!(
        *receivers.last().unwrap(),
        1,
        "the lazy subscriber was never closed"
    );
    let total = reading.join().unwrap();
    assert!(
        total >= 1000 * 32 * 1024,
        "the reading subscriber got {total} bytes"
    );
    assert_eq!(
        common::info_field(
            &mut con,
            "stats",
            "client_output_buffer_limit_disconnections"
        ),
        1.0
    );
    assert!(
        flood < Duration::from_secs(30),
        "1,000 publishes took {flood:?}"
    );
    assert!(worst < Duration::from_secs(2), "a PING waited {worst:?}");
}

#[test]
fn ten_thousand_channels_on_one_client() {
    let server = Respited::start(&[]);
    let port = server.port;
    let mut sub = common::raw_for(port);
    let n = 10_000;
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        let mut cmd = vec!["SUBSCRIBE".to_string()];
        cmd.extend(chunk.iter().map(|i| format!("many:{i}")));
        sub.write_all(&common::encode(&cmd)).unwrap();
        let mut want = Vec::new();
        for &i in chunk {
            want.extend(confirmation("subscribe", &format!("many:{i}"), i + 1));
        }
        assert_eq!(read_exactly(&mut sub, want.len()), want);
    }
    let mut con = common::client_for(port);
    let t = Instant::now();
    let got: i64 = redis::cmd("PUBLISH")
        .arg("many:4242")
        .arg("hi")
        .query(&mut con)
        .unwrap();
    assert_eq!(got, 1);
    assert!(t.elapsed() < Duration::from_secs(1));
    let msg = b"*3\r\n$7\r\nmessage\r\n$9\r\nmany:4242\r\n$2\r\nhi\r\n";
    assert_eq!(read_exactly(&mut sub, msg.len()), msg);
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut con).unwrap();
    assert!(list.contains(&format!("sub={n} ")), "{list}");
    assert_eq!(
        common::info_field(&mut con, "stats", "pubsub_channels"),
        n as f64
    );
    // UNSUBSCRIBE with no argument: one confirmation per channel, the
    // count going down to 0.
    sub.write_all(&common::encode(&["UNSUBSCRIBE"])).unwrap();
    let mut seen = 0;
    let mut buf = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while seen < n {
        assert!(Instant::now() < deadline, "only {seen} confirmations");
        let mut chunk = [0u8; 65536];
        let k = sub.read(&mut chunk).unwrap();
        buf.extend_from_slice(&chunk[..k]);
        seen = String::from_utf8_lossy(&buf).matches("unsubscribe").count();
    }
    assert!(String::from_utf8_lossy(&buf).ends_with(":0\r\n"));
    assert_eq!(
        common::info_field(&mut con, "stats", "pubsub_channels"),
        0.0
    );
}

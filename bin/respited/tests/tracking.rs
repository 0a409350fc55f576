//! CLIENT TRACKING against a real redis-server 7.0, byte for byte: scenes
//! of commands on several connections (trackers in RESP3 and RESP2, a
//! redirect target, writers) run on both servers, and every byte each
//! connection received after each step compared (client ids replaced by
//! the connection's name, since the two servers number clients apart).
//! Then the never-stale property under load: many tracking clients
//! caching while writers change the keys, every cache checked against the
//! server once the writers' acknowledgements and the invalidations are in.

mod common;

use std::collections::HashMap;
use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{RedisServer, Respited};

/// One step of a scene: on connection `conn`, send `cmd` (`$ID<n>` is
/// replaced by connection n's client id; `CLOSE` closes the connection),
/// then wait `sleep_ms`; `compare`: whether its reply is compared (HELLO's
/// is not: the servers describe themselves).
struct Step<'a> {
    conn: usize,
    cmd: &'a [&'a str],
    sleep_ms: u64,
    compare: bool,
}

const fn on<'a>(conn: usize, cmd: &'a [&'a str]) -> Step<'a> {
    Step {
        conn,
        cmd,
        sleep_ms: 0,
        compare: true,
    }
}

const fn hello3(conn: usize) -> Step<'static> {
    Step {
        conn,
        cmd: &["HELLO", "3"],
        sleep_ms: 0,
        compare: false,
    }
}

const fn sleep<'a>(conn: usize, cmd: &'a [&'a str], ms: u64) -> Step<'a> {
    Step {
        conn,
        cmd,
        sleep_ms: ms,
        compare: true,
    }
}

/// Runs a scene on the server at `port` with `conns` connections; answers
/// what each step brought each connection, ids replaced by `ID<n>`.
fn play(port: u16, conns: usize, steps: &[Step<'_>]) -> Vec<String> {
    // Client ids well above the small integers replies carry, so that
    // replacing them cannot touch anything else.
    for _ in 0..40 {
        drop(common::raw_for(port));
    }
    let mut streams: Vec<Option<TcpStream>> =
        (0..conns).map(|_| Some(common::raw_for(port))).collect();
    let mut ids = Vec::new();
    for s in streams.iter_mut() {
        let s = s.as_mut().unwrap();
        let reply = common::exchange(s, &common::encode(&["CLIENT", "ID"]), 1);
        let text = String::from_utf8_lossy(&reply);
        let id: u64 = text
            .trim()
            .trim_start_matches(':')
            .parse()
            .expect("client id");
        ids.push(id);
    }
    let quiet = Duration::from_millis(60);
    let mut out = Vec::new();
    for (n, step) in steps.iter().enumerate() {
        if step.cmd == ["CLOSE"] {
            streams[step.conn] = None;
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        let args: Vec<String> = step
            .cmd
            .iter()
            .map(|a| match a.strip_prefix("$ID") {
                Some(i) => ids[i.parse::<usize>().unwrap()].to_string(),
                None => a.to_string(),
            })
            .collect();
        let stream = streams[step.conn].as_mut().expect("open connection");
        stream.write_all(&common::encode(&args)).unwrap();
        std::thread::sleep(Duration::from_millis(step.sleep_ms));
        // Every command is answered: wait for the first byte of the reply
        // before reading every connection until it is quiet, since a commit
        // can take longer than the quiet period (an fsync queued behind
        // other writes to the disk).
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let _ = stream.peek(&mut [0u8; 1]);
        for (c, s) in streams.iter_mut().enumerate() {
            let Some(s) = s.as_mut() else { continue };
            let (got, _) = common::read_until_quiet(s, quiet);
            if c == step.conn && !step.compare {
                continue;
            }
            if got.is_empty() {
                continue;
            }
            let mut text = String::from_utf8_lossy(&got).into_owned();
            for (i, id) in ids.iter().enumerate() {
                text = text.replace(&format!(":{id}\r\n"), &format!(":ID{i}\r\n"));
                text = text.replace(&format!("redir={id} "), &format!("redir=ID{i} "));
            }
            out.push(format!("step {n} {:?} -> conn {c}: {text:?}", step.cmd));
        }
    }
    out
}

fn servers() -> Option<(Respited, RedisServer)> {
    let redis = RedisServer::start()?;
    let ours = Respited::start(&[]);
    Some((ours, redis))
}

/// Plays `steps` on both servers and compares them step by step.
fn compare(conns: usize, steps: &[Step<'_>]) {
    let Some((ours, redis)) = servers() else {
        return;
    };
    let theirs = play(redis.port, conns, steps);
    let got = play(ours.port, conns, steps);
    if std::env::var_os("TRACKING_SHOW").is_some() {
        eprintln!("{}", got.join("\n"));
    }
    for (a, b) in got.iter().zip(theirs.iter()) {
        assert_eq!(
            a,
            b,
            "\nrespite:\n{}\nredis:\n{}",
            got.join("\n"),
            theirs.join("\n")
        );
    }
    assert_eq!(
        got.len(),
        theirs.len(),
        "\nrespite:\n{}\nredis:\n{}",
        got.join("\n"),
        theirs.join("\n")
    );
}

#[test]
fn default_mode_invalidates_what_was_read_once() {
    compare(
        2,
        &[
            hello3(0),
            on(0, &["CLIENT", "TRACKING", "on"]),
            on(1, &["SET", "a", "1"]),
            on(0, &["GET", "a"]),
            on(1, &["SET", "a", "2"]),
            on(1, &["SET", "a", "3"]),
            on(0, &["MGET", "a", "b", "c"]),
            on(1, &["MSET", "a", "1", "b", "2"]),
            on(0, &["HGET", "h", "f"]),
            on(0, &["EXISTS", "h", "s"]),
            on(1, &["HSET", "h", "f", "v"]),
            on(1, &["SADD", "s", "m"]),
            on(0, &["GET", "a"]),
            // Its own write: the invalidation after the reply.
            on(0, &["SET", "a", "x"]),
            on(0, &["GET", "a"]),
            on(1, &["DEL", "a"]),
            on(0, &["STRLEN", "nope"]),
            on(0, &["LRANGE", "l", "0", "-1"]),
            on(1, &["RPUSH", "l", "1"]),
            on(
                1,
                &[
                    "EVAL",
                    "redis.call('set', KEYS[1], 'x') return 1",
                    "1",
                    "nope",
                ],
            ),
            on(0, &["GET", "m"]),
            on(1, &["MULTI"]),
            on(1, &["SET", "m", "1"]),
            on(1, &["INCR", "m"]),
            on(1, &["EXEC"]),
            on(0, &["CLIENT", "GETREDIR"]),
            on(0, &["CLIENT", "TRACKINGINFO"]),
            on(0, &["GET", "a"]),
            on(0, &["GET", "b"]),
            on(1, &["FLUSHALL"]),
            on(1, &["SET", "a", "1"]),
            on(0, &["CLIENT", "TRACKING", "off"]),
            on(0, &["GET", "a"]),
            on(1, &["SET", "a", "2"]),
            on(0, &["CLIENT", "TRACKINGINFO"]),
            on(0, &["CLIENT", "GETREDIR"]),
        ],
    );
}

#[test]
fn noloop_and_the_own_writes() {
    compare(
        2,
        &[
            hello3(0),
            on(0, &["CLIENT", "TRACKING", "on", "NOLOOP"]),
            on(0, &["GET", "a"]),
            on(0, &["GET", "b"]),
            on(0, &["SET", "a", "1"]),
            on(1, &["SET", "b", "1"]),
            on(0, &["CLIENT", "TRACKINGINFO"]),
            on(0, &["GET", "a"]),
            // A script's writes are its caller's own, whether or not the
            // script publishes (its reply then waits for its messages).
            on(0, &["EVAL", "redis.call('set', 'a', '2') return 1", "0"]),
            on(0, &["GET", "a"]),
            on(
                0,
                &[
                    "EVAL",
                    "redis.call('set', 'a', '3') redis.call('publish', 'ch', 'm') return 1",
                    "0",
                ],
            ),
            on(0, &["FLUSHDB"]),
        ],
    );
}

#[test]
fn optin_and_optout_follow_client_caching() {
    compare(
        2,
        &[
            hello3(0),
            on(0, &["CLIENT", "CACHING", "yes"]),
            on(0, &["CLIENT", "TRACKING", "on", "OPTIN"]),
            on(0, &["GET", "x"]),
            on(0, &["CLIENT", "CACHING", "yes"]),
            on(0, &["CLIENT", "TRACKINGINFO"]),
            on(0, &["GET", "y"]),
            on(0, &["CLIENT", "TRACKINGINFO"]),
            on(1, &["SET", "x", "1"]),
            on(1, &["SET", "y", "1"]),
            on(0, &["CLIENT", "CACHING", "no"]),
            on(0, &["CLIENT", "CACHING", "maybe"]),
            on(0, &["CLIENT", "CACHING", "yes"]),
            on(0, &["MULTI"]),
            on(0, &["GET", "x"]),
            on(0, &["GET", "y"]),
            on(0, &["EXEC"]),
            on(1, &["MSET", "x", "2", "y", "2"]),
            on(0, &["CLIENT", "TRACKING", "on", "OPTOUT"]),
            on(0, &["CLIENT", "TRACKING", "off"]),
            on(0, &["CLIENT", "TRACKING", "on", "OPTOUT"]),
            on(0, &["GET", "x"]),
            on(0, &["CLIENT", "CACHING", "no"]),
            on(0, &["GET", "y"]),
            on(0, &["CLIENT", "CACHING", "yes"]),
            on(1, &["MSET", "x", "3", "y", "3"]),
            on(0, &["CLIENT", "TRACKINGINFO"]),
        ],
    );
}

#[test]
fn bcast_sends_each_prefix_its_keys() {
    compare(
        3,
        &[
            hello3(0),
            on(
                0,
                &[
                    "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a", "PREFIX", "b",
                ],
            ),
            on(0, &["CLIENT", "TRACKINGINFO"]),
            on(1, &["MSET", "a1", "1", "b1", "2", "c1", "3", "a0", "4"]),
            on(1, &["SET", "c", "1"]),
            on(1, &["DEL", "a1", "a0", "zz"]),
            on(0, &["SET", "b2", "x"]),
            on(
                0,
                &["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "c", "NOLOOP"],
            ),
            on(0, &["CLIENT", "TRACKINGINFO"]),
            on(0, &["MSET", "a5", "1", "c5", "1"]),
            on(1, &["MSET", "a6", "1", "c6", "1"]),
            hello3(2),
            on(2, &["CLIENT", "TRACKING", "on", "BCAST"]),
            on(1, &["SET", "zz", "1"]),
            on(1, &["FLUSHALL"]),
            on(0, &["CLIENT", "TRACKING", "off"]),
            on(1, &["SET", "a7", "1"]),
        ],
    );
}

#[test]
fn redirect_to_a_resp2_subscriber_and_a_broken_redirect() {
    compare(
        4,
        &[
            on(1, &["SUBSCRIBE", "__redis__:invalidate"]),
            on(0, &["CLIENT", "TRACKING", "on", "REDIRECT", "$ID1"]),
            on(0, &["GET", "k"]),
            on(0, &["CLIENT", "GETREDIR"]),
            on(2, &["SET", "k", "1"]),
            on(0, &["GET", "k"]),
            on(2, &["FLUSHDB"]),
            // A RESP3 tracker redirecting to a RESP3 client that never
            // subscribed.
            hello3(3),
            on(0, &["CLIENT", "TRACKING", "on", "REDIRECT", "$ID3"]),
            on(0, &["GET", "k"]),
            on(2, &["SET", "k", "2"]),
            hello3(0),
            on(0, &["CLIENT", "TRACKING", "on", "REDIRECT", "$ID1"]),
            on(0, &["GET", "k"]),
            on(1, &["CLOSE"]),
            on(2, &["SET", "k", "3"]),
            on(0, &["CLIENT", "TRACKINGINFO"]),
            on(0, &["GET", "k"]),
            on(2, &["SET", "k", "4"]),
        ],
    );
}

#[test]
fn tracking_errors_are_redis_errors() {
    compare(
        2,
        &[
            on(0, &["CLIENT", "TRACKING", "on", "PREFIX", "a"]),
            on(0, &["CLIENT", "TRACKING", "on", "OPTIN", "OPTOUT"]),
            on(0, &["CLIENT", "TRACKING", "on", "BCAST", "OPTIN"]),
            on(0, &["CLIENT", "TRACKING", "on", "REDIRECT", "999999"]),
            on(0, &["CLIENT", "TRACKING", "on", "REDIRECT", "x"]),
            on(
                0,
                &[
                    "CLIENT", "TRACKING", "on", "REDIRECT", "$ID1", "REDIRECT", "$ID1",
                ],
            ),
            on(
                0,
                &[
                    "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "ab", "PREFIX", "a",
                ],
            ),
            on(0, &["CLIENT", "TRACKING", "on", "NOPE"]),
            on(0, &["CLIENT", "TRACKING", "maybe"]),
            on(0, &["CLIENT", "TRACKING", "on", "PREFIX"]),
            on(0, &["CLIENT", "TRACKING"]),
            on(0, &["CLIENT", "CACHING", "yes"]),
            on(0, &["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "ab"]),
            on(0, &["CLIENT", "TRACKING", "on"]),
            on(0, &["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a"]),
            on(0, &["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "abc"]),
            on(0, &["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "x"]),
            on(0, &["CLIENT", "TRACKINGINFO"]),
            on(0, &["CLIENT", "CACHING", "yes"]),
            on(0, &["CLIENT", "TRACKING", "off"]),
            on(0, &["CLIENT", "TRACKING", "on", "OPTIN"]),
            on(0, &["CLIENT", "TRACKING", "on", "OPTOUT"]),
            on(0, &["CLIENT", "CACHING", "no"]),
            on(0, &["CLIENT", "TRACKINGINFO", "x"]),
            on(0, &["CLIENT", "GETREDIR", "x"]),
        ],
    );
}

#[test]
fn expired_keys_are_invalidated() {
    compare(
        2,
        &[
            hello3(0),
            on(0, &["CLIENT", "TRACKING", "on"]),
            on(1, &["SET", "e", "1", "PX", "100"]),
            on(0, &["GET", "e"]),
            sleep(1, &["PING"], 600),
            on(0, &["CLIENT", "TRACKING", "off"]),
        ],
    );
}

/// The INFO fields and CLIENT LIST's flags and `redir=`.
fn tracking_figures(port: u16) -> Vec<String> {
    let mut a = common::raw_for(port);
    let mut b = common::raw_for(port);
    let mut c = common::raw_for(port);
    let send = |s: &mut TcpStream, cmd: &[&str]| {
        let r = common::exchange(s, &common::encode(cmd), 1);
        std::thread::sleep(Duration::from_millis(30));
        let (more, _) = common::read_until_quiet(s, Duration::from_millis(30));
        [r, more].concat()
    };
    let id = |s: &mut TcpStream| {
        String::from_utf8_lossy(&send(s, &["CLIENT", "ID"]))
            .trim()
            .trim_start_matches(':')
            .to_string()
    };
    let id_c = id(&mut c);
    let mut out = Vec::new();
    let figures = |s: &mut TcpStream, out: &mut Vec<String>| {
        let info = String::from_utf8_lossy(&send(s, &["INFO"])).into_owned();
        for line in info.lines() {
            if line.starts_with("tracking_") {
                out.push(line.to_string());
            }
        }
        let list = String::from_utf8_lossy(&send(s, &["CLIENT", "LIST"])).into_owned();
        for line in list.lines().filter(|l| l.contains("id=")) {
            let field = |name: &str| {
                line.split(' ')
                    .find_map(|f| f.strip_prefix(name))
                    .unwrap_or("")
                    .to_string()
            };
            let redir = field("redir=");
            let redir = if redir == id_c {
                "C".to_string()
            } else {
                redir
            };
            out.push(format!("flags={} redir={redir}", field("flags=")));
        }
    };
    send(&mut a, &["HELLO", "3"]);
    send(&mut a, &["CLIENT", "TRACKING", "on"]);
    send(&mut a, &["MGET", "k1", "k2", "k3"]);
    send(&mut b, &["CLIENT", "TRACKING", "on", "REDIRECT", &id_c]);
    send(&mut b, &["MGET", "k1", "k2"]);
    figures(&mut a, &mut out);
    send(
        &mut a,
        &["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "p"],
    );
    send(&mut c, &["SET", "k1", "x"]);
    figures(&mut a, &mut out);
    send(&mut a, &["CLIENT", "TRACKING", "off"]);
    send(
        &mut a,
        &[
            "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "p", "PREFIX", "q",
        ],
    );
    drop(c);
    std::thread::sleep(Duration::from_millis(100));
    send(&mut a, &["SET", "k2", "y"]);
    figures(&mut a, &mut out);
    out
}

#[test]
fn info_fields_and_client_list_flags_are_redis() {
    let Some((ours, redis)) = servers() else {
        return;
    };
    assert_eq!(tracking_figures(ours.port), tracking_figures(redis.port));
}

/// A tracking client's local cache, kept by redis's rules: a value read
/// is cached unless an invalidation of its key arrived meanwhile.
struct Cache {
    values: HashMap<String, Option<String>>,
}

/// Reads one RESP3 value from `buf` at `at`; answers it and the next
/// position, or `None` when it is incomplete.
fn parse(buf: &[u8], at: usize) -> Option<(Value, usize)> {
    let end = buf[at..].windows(2).position(|w| w == b"\r\n")? + at;
    let line = std::str::from_utf8(&buf[at + 1..end]).ok()?;
    let next = end + 2;
    match buf[at] {
        b'+' | b':' => Some((Value::Str(Some(line.to_string())), next)),
        b'_' => Some((Value::Str(None), next)),
        b'$' => {
            let n: i64 = line.parse().ok()?;
            if n < 0 {
                return Some((Value::Str(None), next));
            }
            let n = n as usize;
            if buf.len() < next + n + 2 {
                return None;
            }
            let s = String::from_utf8_lossy(&buf[next..next + n]).into_owned();
            Some((Value::Str(Some(s)), next + n + 2))
        }
        b'*' | b'>' => {
            let n: i64 = line.parse().ok()?;
            let mut items = Vec::new();
            let mut pos = next;
            for _ in 0..n.max(0) {
                let (v, p) = parse(buf, pos)?;
                items.push(v);
                pos = p;
            }
            if buf[at] == b'>' {
                Some((Value::Push(items), pos))
            } else {
                Some((Value::Array(items), pos))
            }
        }
        other => panic!("unexpected RESP type {}", other as char),
    }
}

#[derive(Debug)]
enum Value {
    Str(Option<String>),
    Array(Vec<Value>),
    Push(Vec<Value>),
}

/// One caching client: HELLO 3, CLIENT TRACKING on; then reads random
/// keys, serving from its cache when it can, caching what it reads and
/// dropping what it is told is invalid. At the end it checks every
/// cached entry against the server.
fn caching_client(port: u16, keys: usize, stop: Arc<AtomicBool>, seed: u64) -> (u64, u64) {
    let mut s = common::raw_for(port);
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&common::encode(&["HELLO", "3"])).unwrap();
    s.write_all(&common::encode(&["CLIENT", "TRACKING", "on"]))
        .unwrap();
    let mut buf = Vec::new();
    let mut pending;
    let mut cache = Cache {
        values: HashMap::new(),
    };
    let mut rng = seed;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    // The key of each GET in flight, in order, and whether its reply is
    // to be cached. Invalidations are applied in the order they arrive,
    // replies cached as they arrive, with no placeholder: on one RESP3
    // connection redis never sends an invalidation before the reply of a
    // read that shows the older value, and neither may respite.
    let mut inflight: std::collections::VecDeque<(String, bool)> = Default::default();
    let mut hits = 0u64;
    let mut reads = 0u64;
    let read_more = |s: &mut TcpStream, buf: &mut Vec<u8>| {
        let mut chunk = [0u8; 65536];
        let n = std::io::Read::read(s, &mut chunk).expect("read");
        assert!(n > 0, "server closed");
        buf.extend_from_slice(&chunk[..n]);
    };
    let handle = |v: Value,
                  cache: &mut Cache,
                  inflight: &mut std::collections::VecDeque<(String, bool)>,
                  pending: &mut usize| {
        match v {
            Value::Push(items) => {
                let mut it = items.into_iter();
                match (it.next(), it.next()) {
                    (Some(Value::Str(Some(kind))), Some(payload)) if kind == "invalidate" => {
                        match payload {
                            Value::Str(None) => cache.values.clear(),
                            Value::Array(keys) => {
                                for k in keys {
                                    if let Value::Str(Some(k)) = k {
                                        cache.values.remove(&k);
                                    }
                                }
                            }
                            other => panic!("bad invalidation {other:?}"),
                        }
                    }
                    other => panic!("unexpected push {other:?}"),
                }
            }
            Value::Str(v) => {
                *pending -= 1;
                if let Some((key, keep)) = inflight.pop_front() {
                    if keep {
                        cache.values.insert(key, v);
                    }
                }
            }
            Value::Array(_) => {
                *pending -= 1;
            }
        }
    };
    let pump = |s: &mut TcpStream,
                buf: &mut Vec<u8>,
                cache: &mut Cache,
                inflight: &mut std::collections::VecDeque<(String, bool)>,
                pending: &mut usize,
                until_zero: bool| {
        loop {
            while let Some((v, used)) = if buf.is_empty() { None } else { parse(buf, 0) } {
                buf.drain(..used);
                handle(v, cache, inflight, pending);
            }
            if !until_zero || *pending == 0 {
                return;
            }
            read_more(s, buf);
        }
    };
    // The HELLO and TRACKING replies (HELLO's is a map: skip it raw).
    {
        let mut got = Vec::new();
        while !got.windows(5).any(|w| w == b"+OK\r\n") {
            read_more(&mut s, &mut got);
        }
    }
    pending = 0;
    while !stop.load(Ordering::Relaxed) {
        let key = format!("k{}", next() % keys as u64);
        reads += 1;
        if cache.values.contains_key(&key) {
            hits += 1;
            // A cached read: nothing to send. Drain what arrived.
            s.set_nonblocking(true).unwrap();
            let mut chunk = [0u8; 65536];
            if let Ok(n) = std::io::Read::read(&mut s, &mut chunk) {
                buf.extend_from_slice(&chunk[..n]);
            }
            s.set_nonblocking(false).unwrap();
            pump(
                &mut s,
                &mut buf,
                &mut cache,
                &mut inflight,
                &mut pending,
                false,
            );
            continue;
        }
        s.write_all(&common::encode(&["GET", &key])).unwrap();
        inflight.push_back((key, true));
        pending += 1;
        pump(
            &mut s,
            &mut buf,
            &mut cache,
            &mut inflight,
            &mut pending,
            true,
        );
    }
    // The writers are done and acknowledged; a PING's reply comes after
    // every invalidation already queued for this connection.
    std::thread::sleep(Duration::from_millis(200));
    s.write_all(&common::encode(&["PING"])).unwrap();
    pending += 1;
    inflight.push_back(("__ping".into(), false));
    pump(
        &mut s,
        &mut buf,
        &mut cache,
        &mut inflight,
        &mut pending,
        true,
    );
    // Every cached value must be the server's.
    let mut stale = Vec::new();
    let entries: Vec<_> = cache.values.clone().into_iter().collect();
    let mut check = common::raw_for(port);
    for (k, v) in entries {
        let reply = common::exchange(&mut check, &common::encode(&["GET", &k]), 1);
        let (now, _) = parse(&reply, 0).expect("reply");
        let now = match now {
            Value::Str(s) => s,
            other => panic!("{other:?}"),
        };
        if now != v {
            stale.push(format!("{k}: cached {v:?}, server {now:?}"));
        }
    }
    assert!(stale.is_empty(), "stale cache entries: {stale:?}");
    (reads, hits)
}

#[test]
fn a_tracking_cache_is_never_stale_under_concurrent_writes() {
    let ours = Respited::start(&[]);
    let port = ours.port;
    let keys = 40;
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..6)
        .map(|i| {
            let stop = stop.clone();
            std::thread::spawn(move || caching_client(port, keys, stop, 0x9E37_79B9 + i * 7919))
        })
        .collect();
    let writers: Vec<_> = (0..3)
        .map(|w| {
            std::thread::spawn(move || {
                let mut con = common::client_for(port);
                for i in 0..1500u64 {
                    let k = format!("k{}", (i * 7 + w * 13) % keys as u64);
                    match i % 5 {
                        0 => redis::cmd("DEL").arg(&k).query::<i64>(&mut con).unwrap() as u64,
                        1 => {
                            let mut p = redis::pipe();
                            p.cmd("SET").arg(&k).arg(format!("{w}-{i}")).ignore();
                            p.cmd("INCR")
                                .arg(format!("k{}", (i + 1) % keys as u64))
                                .ignore();
                            let _: redis::RedisResult<()> = p.query(&mut con);
                            0
                        }
                        _ => {
                            redis::cmd("SET")
                                .arg(&k)
                                .arg(format!("{w}-{i}"))
                                .query::<()>(&mut con)
                                .unwrap();
                            0
                        }
                    };
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let mut reads = 0;
    let mut hits = 0;
    for r in readers {
        let (n, h) = r.join().unwrap();
        reads += n;
        hits += h;
    }
    assert!(reads > 1000 && hits > 0, "reads {reads}, cache hits {hits}");
}

#[test]
fn a_script_that_reads_tracks_its_declared_keys() {
    compare(
        2,
        &[
            hello3(0),
            on(0, &["CLIENT", "TRACKING", "on"]),
            on(
                0,
                &[
                    "EVAL",
                    "redis.call('set', 's3', 'bar') return 1",
                    "2",
                    "s1",
                    "s2",
                ],
            ),
            on(1, &["MSET", "s1", "1", "s2", "1"]),
            on(
                0,
                &["EVAL", "redis.call('get', 's3') return 1", "2", "s1", "s2"],
            ),
            on(1, &["MSET", "s1", "2", "s2", "2"]),
            on(
                0,
                &["EVAL_RO", "redis.call('ping') return 1", "2", "s1", "s2"],
            ),
            on(1, &["MSET", "s1", "3", "s2", "3"]),
            on(
                0,
                &["EVAL_RO", "return redis.call('get', 's1')", "2", "s1", "s2"],
            ),
            on(1, &["MSET", "s1", "4", "s2", "4"]),
            on(0, &["CLIENT", "TRACKING", "on", "NOLOOP"]),
            on(0, &["GET", "s1"]),
            on(
                0,
                &["EVAL", "return redis.call('set', KEYS[1], '2')", "1", "s1"],
            ),
            on(0, &["GET", "s1"]),
        ],
    );
}

#[test]
fn a_read_that_finds_a_key_expired_invalidates_it_before_nothing_else() {
    // With the sweep off only the read's lookup can find the key expired:
    // redis deletes it then, so the tracking client hears of it right
    // after the read's reply (tracking.tcl's "not interleaved with
    // multiple keys response"); and a BCAST NOLOOP client hears of a key
    // its own transaction's read found expired, since the server deleted
    // it, not the client.
    let Some(redis) = RedisServer::start_with(&["--enable-debug-command", "yes"]) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("respite.toml");
    std::fs::write(&conf, "enable_debug_command = \"yes\"\n").unwrap();
    let ours = Respited::start_in(dir.path(), &["--config", conf.to_str().unwrap()]);
    let steps = [
        hello3(0),
        on(0, &["CLIENT", "TRACKING", "on"]),
        on(1, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]),
        on(1, &["MSET", "x", "1", "y", "2"]),
        on(1, &["PEXPIRE", "y", "100"]),
        on(0, &["GET", "y"]),
        sleep(1, &["PING"], 150),
        on(0, &["MGET", "x", "y"]),
        on(0, &["MGET", "x", "y"]),
        on(
            2,
            &[
                "CLIENT", "TRACKING", "on", "BCAST", "REDIRECT", "$ID1", "NOLOOP",
            ],
        ),
        on(1, &["SUBSCRIBE", "__redis__:invalidate"]),
        on(2, &["MULTI"]),
        on(2, &["SET", "k", "v", "PX", "1"]),
        on(2, &["SET", "other", "v"]),
        on(2, &["DEBUG", "SLEEP", "0.1"]),
        on(2, &["GET", "k"]),
        on(2, &["EXEC"]),
        on(0, &["CLIENT", "TRACKING", "off"]),
        on(2, &["CLIENT", "TRACKING", "off"]),
        on(2, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]),
    ];
    let theirs = play(redis.port, 3, &steps);
    let got = play(ours.port, 3, &steps);
    assert_eq!(
        got,
        theirs,
        "\nrespite:\n{}\nredis:\n{}",
        got.join("\n"),
        theirs.join("\n")
    );
}

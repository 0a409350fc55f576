//! EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT against a real
//! redis-server, reply by reply in RESP2 and RESP3 (the same commands sent
//! to both, raw replies compared), plus what only a durable server must
//! show: a script's writes before its error are kept and survive a SIGKILL
//! right after the reply, and scripts run by many clients at once are
//! atomic.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{RedisServer, Respited};

struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    fn open(port: u16, resp: u8) -> Conn {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        let mut c = Conn {
            stream,
            buf: Vec::new(),
        };
        if resp == 3 {
            c.command(&["HELLO", "3"]);
        }
        c
    }

    fn command<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Vec<u8> {
        self.stream.write_all(&common::encode(args)).expect("write");
        loop {
            if let Some(n) = frame_len(&self.buf, 0) {
                let reply = self.buf[..n].to_vec();
                self.buf.drain(..n);
                return reply;
            }
            let mut chunk = [0u8; 65536];
            let n = self.stream.read(&mut chunk).expect("read");
            assert!(n > 0, "connection closed");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

fn frame_len(b: &[u8], at: usize) -> Option<usize> {
    let line_end = at + b.get(at..)?.windows(2).position(|w| w == b"\r\n")?;
    let line = std::str::from_utf8(&b[at + 1..line_end]).ok()?;
    let after = line_end + 2;
    match b[at] {
        b'$' | b'=' | b'!' => {
            let n: i64 = line.parse().ok()?;
            if n < 0 {
                return Some(after - at);
            }
            let end = after + n as usize + 2;
            (b.len() >= end).then_some(end - at)
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let n: i64 = line.parse().ok()?;
            let items = if n < 0 {
                0
            } else if matches!(b[at], b'%' | b'|') {
                2 * n as usize
            } else {
                n as usize
            };
            let mut p = after;
            for _ in 0..items {
                p += frame_len(b, p)?;
            }
            Some(p - at)
        }
        _ => Some(after - at),
    }
}

/// Each line: a command, its words separated by " | " (so scripts may hold
/// spaces).
const SESSION: &[&str] = &[
    "SCRIPT | FLUSH",
    "EVAL | return 1 | 0",
    "EVAL | return {1, 'two', {3.9, true, false, nil, 4}} | 0",
    "EVAL | return redis.call('set', KEYS[1], ARGV[1]) | 1 | k | v",
    "EVAL | return redis.call('get', KEYS[1]) | 1 | k",
    "EVAL | return redis.call('get', 'missing') | 0",
    "EVAL | redis.setresp(3); return redis.call('get', 'missing') | 0",
    "EVAL | redis.call('hset', 'h', 'f', '1'); return redis.call('hgetall', 'h') | 0",
    "EVAL | redis.setresp(3); return redis.call('hgetall', 'h') | 0",
    "EVAL | redis.setresp(3); redis.call('zadd', 'z', '1.5', 'm'); return redis.call('zscore', 'z', 'm') | 0",
    "EVAL | return redis.call('incr', 'k') | 0",
    "EVAL | return redis.pcall('incr', 'k') | 0",
    "EVAL | return redis.pcall('lpush', 'k', 'x') | 0",
    "EVAL | return redis.call('nosuchcommand') | 0",
    "EVAL | return redis.call('get') | 0",
    "EVAL | return redis.call('eval', 'return 1', '0') | 0",
    "EVAL | return redis.call('multi') | 0",
    "EVAL | return redis.call('blpop', 'nolist', '0') | 0",
    "EVAL | return redis.call('select', '1') | 0",
    "EVAL | redis.call('select', '1'); redis.call('set', 'in1', 'x'); return redis.call('dbsize') | 0",
    "EVAL | return redis.call('dbsize') | 0",
    "EVAL | return redis.call('ping') | 0",
    "EVAL | return 1 | -1",
    "EVAL | return 1 | 3 | a",
    "EVAL | return 1 | x",
    "EVAL | return 1",
    "EVAL | return {err = 'MY error'} | 0",
    "EVAL | return redis.error_reply('MY error') | 0",
    "EVAL | return redis.status_reply('FINE') | 0",
    "EVAL | error('boom') | 0",
    "EVAL | return x | 0",
    "EVAL | x = 1 | 0",
    "EVAL | return syntax error | 0",
    "EVAL | #!lua flags=no-writes\nreturn redis.call('set', 'a', 'b') | 0",
    "EVAL | #!lua flags=no-writes\nreturn redis.call('get', 'k') | 0",
    "EVAL | #!lua flags=bad\nreturn 1 | 0",
    "EVAL | #!luax\nreturn 1 | 0",
    "EVAL_RO | return redis.call('get', 'k') | 0",
    "EVAL_RO | return redis.call('set', 'k', 'v') | 0",
    "EVAL_RO | #!lua\nreturn 1 | 0",
    "EVAL_RO | #!lua flags=no-writes\nreturn 1 | 0",
    "SCRIPT | LOAD | return 'loaded'",
    "SCRIPT | LOAD | return syntax error",
    "SCRIPT | LOAD | #!lua flags=bad\nreturn 1",
    "EVALSHA | 0b1d9e64aeb37c9d1ba45fcd22e7b4a09066a3e5 | 0",
    "EVALSHA | 0B1D9E64AEB37C9D1BA45FCD22E7B4A09066A3E5 | 0",
    "EVALSHA_RO | 0b1d9e64aeb37c9d1ba45fcd22e7b4a09066a3e5 | 0",
    "EVALSHA | ffffffffffffffffffffffffffffffffffffffff | 0",
    "EVALSHA | short | 0",
    "SCRIPT | EXISTS | 0b1d9e64aeb37c9d1ba45fcd22e7b4a09066a3e5 | ffffffffffffffffffffffffffffffffffffffff | 0B1D9E64AEB37C9D1BA45FCD22E7B4A09066A3E5",
    "SCRIPT | EXISTS",
    "SCRIPT | KILL",
    "SCRIPT | FLUSH | BAD",
    "SCRIPT | FLUSH | ASYNC",
    "EVALSHA | 0b1d9e64aeb37c9d1ba45fcd22e7b4a09066a3e5 | 0",
    "SCRIPT | EXISTS | 0b1d9e64aeb37c9d1ba45fcd22e7b4a09066a3e5",
    "SCRIPT | NOPE",
    "SCRIPT | HELP",
    "MULTI",
    "EVAL | return redis.call('incr', 'counter') | 0",
    "EVAL | return redis.call('incr', 'counter') | 0",
    "EXEC",
    "EVAL | redis.call('set', 'before', '1'); redis.call('incr', 'k'); redis.call('set', 'after', '1') | 0",
    "EXISTS | before | after",
];

#[test]
fn differential_session() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let respite = Respited::start(&[]);
    let mut failures = Vec::new();
    for resp in [2u8, 3] {
        let mut theirs = Conn::open(redis.port, resp);
        let mut ours = Conn::open(respite.port, resp);
        theirs.command(&["FLUSHALL"]);
        ours.command(&["FLUSHALL"]);
        for line in SESSION {
            let args: Vec<String> = line.split(" | ").map(|w| w.replace("\\n", "\n")).collect();
            let expected = theirs.command(&args);
            let got = ours.command(&args);
            if expected != got {
                failures.push(format!(
                    "RESP{resp} {line}\n  redis:   {:?}\n  respite: {:?}",
                    String::from_utf8_lossy(&expected),
                    String::from_utf8_lossy(&got)
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// 50 clients each run a read-modify-write script 40 times on one counter:
/// no update is lost.
#[test]
fn scripts_are_atomic() {
    let respite = Respited::start(&[]);
    let script = "local v = tonumber(redis.call('get', KEYS[1]) or '0'); redis.call('set', KEYS[1], v + 1); return v + 1";
    let threads: Vec<_> = (0..50)
        .map(|_| {
            let port = respite.port;
            std::thread::spawn(move || {
                let mut c = Conn::open(port, 2);
                for _ in 0..40 {
                    let r = c.command(&["EVAL", script, "1", "counter"]);
                    assert_eq!(r[0], b':', "{}", String::from_utf8_lossy(&r));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("client thread");
    }
    let mut c = Conn::open(respite.port, 2);
    assert_eq!(c.command(&["GET", "counter"]), b"$4\r\n2000\r\n");
}

/// A script that writes and then fails keeps its writes (redis does not
/// roll back), and they are durable once the error is answered: a SIGKILL
/// right after the reply loses nothing.
#[test]
fn writes_before_an_error_survive_sigkill() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut respite = Respited::start_in(dir.path(), &[]);
    let mut c = Conn::open(respite.port, 2);
    let reply = c.command(&[
        "EVAL",
        "redis.call('set', 'a', '1'); redis.call('rpush', 'l', 'x', 'y'); error('late')",
        "0",
    ]);
    assert_eq!(reply[0], b'-', "{}", String::from_utf8_lossy(&reply));
    respite.kill();
    let respite = Respited::start_in(dir.path(), &[]);
    let mut c = Conn::open(respite.port, 2);
    assert_eq!(c.command(&["GET", "a"]), b"$1\r\n1\r\n");
    assert_eq!(c.command(&["LLEN", "l"]), b":2\r\n");
    // Scripts loaded with SCRIPT LOAD are not kept across a restart.
    assert_eq!(
        c.command(&["EVALSHA", "0b1d9e64aeb37c9d1ba45fcd22e7b4a09066a3e5", "0"]),
        b"-NOSCRIPT No matching script. Please use EVAL.\r\n"
    );
}

/// SCRIPT KILL stops a looping script that has not written; the killed
/// script's caller gets redis's error, and the server serves again.
#[test]
fn script_kill() {
    let respite = Respited::start(&[]);
    let port = respite.port;
    let looping = std::thread::spawn(move || {
        let mut c = Conn::open(port, 2);
        c.command(&["EVAL", "while true do end", "0"])
    });
    let mut c = Conn::open(port, 2);
    let mut killed = false;
    for _ in 0..200 {
        std::thread::sleep(Duration::from_millis(25));
        let r = c.command(&["SCRIPT", "KILL"]);
        if r == b"+OK\r\n" {
            killed = true;
            break;
        }
        assert_eq!(r, b"-NOTBUSY No scripts in execution right now.\r\n");
    }
    assert!(killed, "SCRIPT KILL never found the script running");
    let reply = looping.join().expect("script thread");
    let text = String::from_utf8_lossy(&reply);
    assert!(
        text.starts_with("-ERR Script killed by user with SCRIPT KILL... script: "),
        "{text}"
    );
    assert_eq!(c.command(&["PING"]), b"+PONG\r\n");
}

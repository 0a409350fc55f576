//! The wire, byte for byte: pipelines, inline commands, malformed frames,
//! size limits, arity and unknown-command errors, RESP3, AUTH, maxclients.
//! Every test drives a real respited over a real socket.

mod common;

use std::time::Duration;

use common::{exchange, info_field, read_until_quiet, Respited};

/// A command as RESP bytes (byte-string literals of any length).
fn resp(args: &[&[u8]]) -> Vec<u8> {
    common::encode(args)
}

#[test]
fn pipelined_replies_keep_order_and_read_your_writes() {
    let server = Respited::start(&[]);
    let mut s = server.raw();
    let mut req = Vec::new();
    let mut expected = Vec::new();
    for i in 0..200 {
        let key = format!("k{i}");
        let val = format!("v{i}");
        req.extend(resp(&[b"SET", key.as_bytes(), val.as_bytes()]));
        req.extend(resp(&[b"GET", key.as_bytes()]));
        req.extend(resp(&[b"INCR", b"counter"]));
        expected.extend_from_slice(b"+OK\r\n");
        expected.extend_from_slice(format!("${}\r\n{val}\r\n", val.len()).as_bytes());
        expected.extend_from_slice(format!(":{}\r\n", i + 1).as_bytes());
    }
    let got = exchange(&mut s, &req, expected.len());
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&expected)
    );
}

#[test]
fn inline_commands_work_like_redis() {
    let server = Respited::start(&[]);
    let mut s = server.raw();
    let got = exchange(
        &mut s,
        b"PING\r\nset greeting \"hello world\"\r\nget greeting\r\n\r\n",
        30,
    );
    assert_eq!(got, b"+PONG\r\n+OK\r\n$11\r\nhello world\r\n");
    let got = exchange(&mut s, b"echo \"a\\x41\\n\"\n", 7);
    assert_eq!(got, b"$3\r\naA\n\r\n");
    let got = exchange(&mut s, b"get \"unbalanced\r\n", 100);
    assert_eq!(
        got,
        b"-ERR Protocol error: unbalanced quotes in request\r\n"
    );
}

#[test]
fn command_errors_keep_the_connection_open() {
    let server = Respited::start(&[]);
    let mut s = server.raw();
    let mut req = resp(&[b"GET"]);
    req.extend(resp(&[b"NOSUCH", b"a", b"b"]));
    req.extend(resp(&[b"SET", b"k", b"v", b"EX", b"0"]));
    req.extend(resp(&[b"SET", b"k", b"v", b"NX", b"XX"]));
    req.extend(resp(&[b"SET", b"s", b"abc"]));
    req.extend(resp(&[b"INCR", b"s"]));
    req.extend(resp(&[b"PING"]));
    let expected = "-ERR wrong number of arguments for 'get' command\r\n\
                    -ERR unknown command 'NOSUCH', with args beginning with: 'a' 'b' \r\n\
                    -ERR invalid expire time in 'set' command\r\n\
                    -ERR syntax error\r\n\
                    +OK\r\n\
                    -ERR value is not an integer or out of range\r\n\
                    +PONG\r\n";
    let got = exchange(&mut s, &req, expected.len());
    assert_eq!(String::from_utf8_lossy(&got), expected);
}

#[test]
fn malformed_frames_get_a_protocol_error_and_close() {
    let server = Respited::start(&[]);
    for (input, error) in [
        (
            &b"*1\r\n:1\r\n"[..],
            "-ERR Protocol error: expected '$', got ':'\r\n",
        ),
        (
            b"*x\r\n",
            "-ERR Protocol error: invalid multibulk length\r\n",
        ),
        (
            b"*1\r\n$-5\r\n",
            "-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"*1\r\n$600000000\r\n",
            "-ERR Protocol error: invalid bulk length\r\n",
        ),
    ] {
        let mut s = server.raw();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        std::io::Write::write_all(&mut s, input).unwrap();
        let (got, closed) = read_until_quiet(&mut s, Duration::from_secs(5));
        assert_eq!(String::from_utf8_lossy(&got), error, "input {input:?}");
        assert!(closed, "connection should close after {input:?}");
    }
    // The server itself is still fine.
    let mut con = server.client();
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
}

/// Length fields are parsed exactly as redis-server's `string2ll` does: no
/// `+`, no leading zeros, no `-0`. Each input goes to both servers on a
/// fresh connection; the reply bytes and whether the connection closed
/// must agree.
#[test]
fn length_fields_parse_like_redis() {
    let Some(redis) = common::RedisServer::start() else {
        return;
    };
    let server = Respited::start(&[]);
    let inputs: [&[u8]; 10] = [
        b"*+1\r\n$4\r\nPING\r\n",
        b"*01\r\n$4\r\nPING\r\n",
        b"*-0\r\n*1\r\n$4\r\nPING\r\n",
        b"*1\r\n$+4\r\nPING\r\n",
        b"*1\r\n$04\r\nPING\r\n",
        b"*1\r\n$-0\r\n",
        b"* 1\r\n$4\r\nPING\r\n",
        b"*1\r\n$4 \r\nPING\r\n",
        b"*-1\r\n*1\r\n$4\r\nPING\r\n",
        b"*0\r\n*1\r\n$4\r\nPING\r\n",
    ];
    for input in inputs {
        let mut answers = Vec::new();
        for port in [server.port, redis.port] {
            let mut s = common::raw_for(port);
            std::io::Write::write_all(&mut s, input).unwrap();
            answers.push(read_until_quiet(&mut s, Duration::from_millis(500)));
        }
        let show =
            |(b, closed): &(Vec<u8>, bool)| (String::from_utf8_lossy(b).into_owned(), *closed);
        assert_eq!(show(&answers[0]), show(&answers[1]), "input {input:?}");
    }
}

#[test]
fn configured_limits_are_enforced() {
    let server = Respited::start(&[]);
    let mut con = server.client();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("proto-max-bulk-len")
        .arg("1mb")
        .query(&mut con)
        .unwrap();
    let mut s = server.raw();
    let (got, closed) = {
        std::io::Write::write_all(&mut s, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2000000\r\n").unwrap();
        read_until_quiet(&mut s, Duration::from_secs(5))
    };
    assert_eq!(got, b"-ERR Protocol error: invalid bulk length\r\n");
    assert!(closed);

    // A client whose unprocessed input passes client-query-buffer-limit is
    // dropped.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("proto-max-bulk-len")
        .arg("512mb")
        .arg("client-query-buffer-limit")
        .arg("1mb")
        .query(&mut con)
        .unwrap();
    let mut s = server.raw();
    let mut req = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3000000\r\n".to_vec();
    req.extend(vec![b'x'; 1_500_000]);
    let _ = std::io::Write::write_all(&mut s, &req);
    let (got, closed) = read_until_quiet(&mut s, Duration::from_secs(5));
    assert!(
        got.is_empty() && closed,
        "over-limit client should be closed"
    );
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
}

#[test]
fn resp3_after_hello_3() {
    let server = Respited::start(&[]);
    let mut s = server.raw();
    let got = exchange(&mut s, &resp(&[b"HELLO", b"3"]), 20);
    assert!(
        got.starts_with(b"%7\r\n"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    let (_, _) = read_until_quiet(&mut s, Duration::from_millis(200));
    let mut req = resp(&[b"GET", b"missing"]);
    req.extend(resp(&[b"CONFIG", b"GET", b"maxclients"]));
    let got = exchange(&mut s, &req, 100);
    assert_eq!(got, b"_\r\n%1\r\n$10\r\nmaxclients\r\n$5\r\n10000\r\n");
    let got = exchange(&mut s, &resp(&[b"HELLO", b"4"]), 37);
    assert_eq!(got, b"-NOPROTO unsupported protocol version\r\n");
}

#[test]
fn requirepass_gates_every_command_but_auth() {
    let server = Respited::start(&["--requirepass", "s3cret"]);
    let mut s = server.raw();
    let mut req = resp(&[b"GET", b"k"]);
    req.extend(resp(&[b"AUTH", b"wrong"]));
    req.extend(resp(&[b"AUTH", b"s3cret"]));
    req.extend(resp(&[b"GET", b"k"]));
    let expected = "-NOAUTH Authentication required.\r\n\
                    -WRONGPASS invalid username-password pair or user is disabled.\r\n\
                    +OK\r\n\
                    $-1\r\n";
    let got = exchange(&mut s, &req, expected.len());
    assert_eq!(String::from_utf8_lossy(&got), expected);
}

#[test]
fn maxclients_refuses_with_redis_error() {
    let server = Respited::start(&["--maxclients", "2"]);
    let mut a = server.client();
    let mut b = server.client();
    let _: String = redis::cmd("PING").query(&mut a).unwrap();
    let _: String = redis::cmd("PING").query(&mut b).unwrap();
    let mut c = server.raw();
    let (got, closed) = read_until_quiet(&mut c, Duration::from_secs(5));
    assert_eq!(got, b"-ERR max number of clients reached\r\n");
    assert!(closed);
    drop(a);
    // Once a client leaves, a new one is admitted.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut d = server.raw();
        let got = exchange(&mut d, &resp(&[b"PING"]), 7);
        if got == b"+PONG\r\n" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "slot never freed");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn databases_are_separate_and_select_checks_range() {
    let server = Respited::start(&[]);
    let mut s = server.raw();
    let mut req = resp(&[b"SET", b"k", b"zero"]);
    req.extend(resp(&[b"SELECT", b"3"]));
    req.extend(resp(&[b"GET", b"k"]));
    req.extend(resp(&[b"SET", b"k", b"three"]));
    req.extend(resp(&[b"SELECT", b"16"]));
    req.extend(resp(&[b"SELECT", b"0"]));
    req.extend(resp(&[b"GET", b"k"]));
    let expected =
        "+OK\r\n+OK\r\n$-1\r\n+OK\r\n-ERR DB index is out of range\r\n+OK\r\n$4\r\nzero\r\n";
    let got = exchange(&mut s, &req, expected.len());
    assert_eq!(String::from_utf8_lossy(&got), expected);
}

#[test]
fn client_commands() {
    let server = Respited::start(&[]);
    let mut a = server.client();
    let mut b = server.client();
    let _: () = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg("alpha")
        .query(&mut a)
        .unwrap();
    let name: String = redis::cmd("CLIENT").arg("GETNAME").query(&mut a).unwrap();
    assert_eq!(name, "alpha");
    let id_a: i64 = redis::cmd("CLIENT").arg("ID").query(&mut a).unwrap();
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut b).unwrap();
    assert!(
        list.contains(&format!("id={id_a} ")) && list.contains("name=alpha"),
        "{list}"
    );
    let err = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg("has space")
        .query::<()>(&mut a)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("Client names cannot contain spaces"),
        "{err}"
    );
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(id_a)
        .query(&mut b)
        .unwrap();
    assert_eq!(killed, 1);
    assert!(
        redis::cmd("PING").query::<String>(&mut a).is_err(),
        "killed client still served"
    );
}

#[test]
fn quit_replies_then_closes() {
    let server = Respited::start(&[]);
    let mut s = server.raw();
    std::io::Write::write_all(&mut s, &resp(&[b"QUIT"])).unwrap();
    let (got, closed) = read_until_quiet(&mut s, Duration::from_secs(5));
    assert_eq!(got, b"+OK\r\n");
    assert!(closed);
}

#[test]
fn reads_in_a_pipeline_never_see_later_writes() {
    let server = Respited::start(&["--readers", "1"]);
    let mut s = server.raw();
    let mut req = resp(&[b"SET", b"k", b"0"]);
    let mut expected = b"+OK\r\n".to_vec();
    for i in 1..300 {
        let prev = (i - 1).to_string();
        let cur = i.to_string();
        // A slow read first keeps the single reader busy.
        req.extend(resp(&[b"KEYS", b"*"]));
        req.extend(resp(&[b"GET", b"k"]));
        req.extend(resp(&[b"SET", b"k", cur.as_bytes()]));
        expected.extend_from_slice(b"*1\r\n$1\r\nk\r\n");
        expected.extend_from_slice(format!("${}\r\n{prev}\r\n+OK\r\n", prev.len()).as_bytes());
    }
    let got = exchange(&mut s, &req, expected.len());
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&expected)
    );
}

#[test]
fn hello_in_a_pipeline_switches_protocol_from_its_own_reply_on() {
    let server = Respited::start(&[]);
    let mut s = server.raw();
    let mut req = resp(&[b"GET", b"missing"]);
    req.extend(resp(&[b"HELLO", b"3"]));
    req.extend(resp(&[b"GET", b"missing"]));
    std::io::Write::write_all(&mut s, &req).unwrap();
    let (got, _) = read_until_quiet(&mut s, Duration::from_millis(500));
    // RESP2 nil, then HELLO's reply as a RESP3 map, then a RESP3 null.
    assert!(
        got.starts_with(b"$-1\r\n%7\r\n"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    assert!(got.ends_with(b"_\r\n"), "{}", String::from_utf8_lossy(&got));
}

/// One request-like blob: random bytes, or a valid command with something
/// broken in it (a flipped byte, a wrong length, a cut), or a valid one.
fn garbage(rng: &mut impl rand::Rng) -> Vec<u8> {
    let commands: [&[&[u8]]; 6] = [
        &[b"SET", b"k", b"value"],
        &[b"GET", b"k"],
        &[b"INCRBY", b"n", b"3"],
        &[b"MSET", b"a", b"1", b"b", b"2"],
        &[b"EXPIRE", b"k", b"100"],
        &[b"SCAN", b"0", b"COUNT", b"5"],
    ];
    let mut blob = Vec::new();
    for _ in 0..rng.random_range(1..6) {
        let mut req = resp(commands[rng.random_range(0..commands.len())]);
        match rng.random_range(0..6) {
            0 => {
                let i = rng.random_range(0..req.len());
                req[i] = rng.random();
            }
            1 => req.truncate(rng.random_range(0..req.len())),
            2 => {
                // A length or count made huge, negative or not a number.
                if let Some(i) = req.iter().position(|&b| b == b'$' || b == b'*') {
                    let bad: &[u8] =
                        [&b"99999999999"[..], b"-5", b"x1", b""][rng.random_range(0..4)];
                    req.splice(i + 1..i + 2, bad.iter().copied());
                }
            }
            3 => {
                req = (0..rng.random_range(1..200))
                    .map(|_| rng.random())
                    .collect()
            }
            4 => req = b"SET \"unbalanced k v\r\n".to_vec(),
            _ => {}
        }
        blob.extend(req);
    }
    blob
}

#[test]
fn random_garbage_never_takes_the_server_down() {
    use rand::SeedableRng;
    let server = Respited::start(&[]);
    let handles: Vec<_> = (0..4u64)
        .map(|t| {
            let port = server.port;
            std::thread::spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed + t);
                for _ in 0..60 {
                    let mut s = common::raw_for(port);
                    let _ = std::io::Write::write_all(&mut s, &garbage(&mut rng));
                    // Whatever comes back (replies, an error, a close), the
                    // server must answer the next client.
                    let _ = read_until_quiet(&mut s, Duration::from_millis(20));
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let mut con = server.client();
    common::assert_still_serves(&mut con);
    assert!(info_field(&mut con, "stats", "protocol_errors") > 0.0);
}

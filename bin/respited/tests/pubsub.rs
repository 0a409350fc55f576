//! Pub/sub against a real redis-server 7.0, byte for byte over raw
//! sockets in RESP2 and RESP3: confirmations and their counts, subscribed
//! mode's rules, messages and their order, PUBSUB's introspection, CLIENT
//! REPLY OFF; then the properties redis's bytes cannot show: a write
//! pipelined before a PUBLISH is visible to a subscriber on receipt, and
//! a subscriber that never reads is closed at its output limit while the
//! publisher goes on.

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::{RedisServer, Respited};

/// One step of a scene: a command of the subscribing connection (none
/// when empty), then commands of a second connection.
type Step<'a> = (&'a [&'a str], &'a [&'a [&'a str]]);

/// Sends each step on one connection, `others` on a second connection
/// after it, and gathers what the first connection received after each.
fn play(port: u16, steps: &[Step<'_>]) -> Vec<Vec<u8>> {
    let mut sub = common::raw_for(port);
    let mut other = common::raw_for(port);
    let mut seen = Vec::new();
    for (mine, others) in steps {
        if !mine.is_empty() {
            sub.write_all(&common::encode(mine)).unwrap();
            // Let it run before the other connection acts.
            let (got, _) = common::read_until_quiet(&mut sub, Duration::from_millis(150));
            // HELLO names the server and the client id: not compared.
            if !mine[0].eq_ignore_ascii_case("HELLO") {
                seen.push(got);
            }
        }
        for cmd in *others {
            let got = common::exchange(&mut other, &common::encode(cmd), 1);
            seen.push(got);
            let (got, _) = common::read_until_quiet(&mut sub, Duration::from_millis(150));
            seen.push(got);
        }
    }
    seen
}

/// Both servers, or none when redis-server is missing (the test then
/// passes trivially unless RESPITE_REQUIRE_REDIS is set).
fn servers() -> Option<(Respited, RedisServer)> {
    let redis = RedisServer::start()?;
    Some((Respited::start(&[]), redis))
}

fn compare(scenes: &[&[Step<'_>]]) {
    let Some((ours, redis)) = servers() else {
        return;
    };
    for scene in scenes {
        let theirs = play(redis.port, scene);
        let got = play(ours.port, scene);
        let show = |v: &[Vec<u8>]| {
            v.iter()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(show(&got), show(&theirs), "{scene:?}");
    }
}

#[test]
fn subscribe_publish_and_their_counts_match_redis_in_resp2() {
    compare(&[
        &[
            (&["SUBSCRIBE", "a", "b", "a"], &[&["PUBLISH", "a", "hi"]]),
            (&["PING"], &[]),
            (&["PING", "x"], &[]),
            (&["GET", "k"], &[]),
            (&["CLIENT", "ID"], &[]),
            (&["NOSUCH"], &[]),
            (&["GET"], &[]),
            (
                &["UNSUBSCRIBE", "a"],
                &[&["PUBLISH", "a", "x"], &["PUBLISH", "b", "y"]],
            ),
            (&["UNSUBSCRIBE", "b"], &[]),
            (&["UNSUBSCRIBE"], &[]),
            (&["PING"], &[]),
        ],
        &[
            (
                &["PSUBSCRIBE", "f*", "b?r", "h[ae]llo"],
                &[
                    &["PUBLISH", "foo", "1"],
                    &["PUBLISH", "bar", "2"],
                    &["PUBLISH", "hello", "3"],
                    &["PUBLISH", "hillo", "4"],
                    &["PUBSUB", "NUMPAT"],
                ],
            ),
            (&["PUNSUBSCRIBE", "f*", "zz"], &[&["PUBLISH", "foo", "5"]]),
            (&["PUNSUBSCRIBE", "b?r"], &[]),
            (&["PUNSUBSCRIBE", "h[ae]llo"], &[]),
            (&["PUNSUBSCRIBE"], &[]),
        ],
        // Exact-channel subscribers before pattern subscribers.
        &[
            (&["SUBSCRIBE", "news.x"], &[]),
            (&["PSUBSCRIBE", "news.*"], &[&["PUBLISH", "news.x", "m"]]),
            (&["UNSUBSCRIBE", "nope"], &[]),
        ],
        &[
            (&["UNSUBSCRIBE"], &[]),
            (&["PUNSUBSCRIBE"], &[]),
            (&["SUNSUBSCRIBE"], &[]),
            (&["UNSUBSCRIBE", "x", "y"], &[]),
        ],
        &[
            (
                &["SSUBSCRIBE", "s1"],
                &[
                    &["SPUBLISH", "s1", "m"],
                    &["PUBLISH", "s1", "n"],
                    &["PUBSUB", "SHARDCHANNELS"],
                    &["PUBSUB", "SHARDNUMSUB", "s1", "s2"],
                    &["PUBSUB", "NUMSUB", "s1"],
                ],
            ),
            (&["SUBSCRIBE", "c"], &[]),
            (&["SUNSUBSCRIBE", "s1"], &[]),
            (&["UNSUBSCRIBE"], &[]),
        ],
        &[
            (
                &["SUBSCRIBE", "one"],
                &[
                    &["PUBSUB", "CHANNELS"],
                    &["PUBSUB", "CHANNELS", "o*"],
                    &["PUBSUB", "CHANNELS", "x*"],
                    &["PUBSUB", "NUMSUB", "one", "two"],
                    &["PUBSUB", "NUMSUB"],
                    &["PUBSUB", "NUMPAT"],
                    &["PUBSUB", "HELP"],
                    &["PUBSUB", "FOO"],
                    &["PUBSUB", "NUMPAT", "x"],
                    &["PUBSUB", "CHANNELS", "a", "b"],
                    &["PUBSUB"],
                ],
            ),
            (&["RESET"], &[&["PUBSUB", "NUMSUB", "one"]]),
            (&["GET", "x"], &[]),
        ],
        // Inside MULTI: a command refused in subscribed mode dooms the
        // transaction; SUBSCRIBE queued and run by EXEC is allowed,
        // SSUBSCRIBE is not.
        &[
            (&["SUBSCRIBE", "a"], &[]),
            (&["MULTI"], &[]),
            (&["PING"], &[]),
        ],
        &[
            (&["MULTI"], &[]),
            (&["SUBSCRIBE", "x"], &[]),
            (&["EXEC"], &[&["PUBLISH", "x", "y"]]),
        ],
        &[
            (&["MULTI"], &[]),
            (&["SSUBSCRIBE", "x"], &[]),
            (&["EXEC"], &[]),
        ],
        &[(&["SUBSCRIBE", "q"], &[]), (&["QUIT"], &[])],
    ]);
}

#[test]
fn resp3_subscribers_get_push_frames_and_keep_every_command() {
    compare(&[
        &[
            (&["HELLO", "3", "SETNAME", "x"], &[]),
            (&["SUBSCRIBE", "a"], &[&["PUBLISH", "a", "hi"]]),
            (&["PUBLISH", "a", "self"], &[]),
            (&["SET", "k", "v"], &[]),
            (&["GET", "k"], &[]),
            (&["PING"], &[]),
            (&["PSUBSCRIBE", "a*"], &[&["PUBLISH", "a", "both"]]),
            (&["UNSUBSCRIBE", "a"], &[&["PUBLISH", "a", "x"]]),
            (&["PUNSUBSCRIBE"], &[]),
            (&["SSUBSCRIBE", "s"], &[&["SPUBLISH", "s", "m"]]),
            (&["SUNSUBSCRIBE"], &[]),
        ],
        // CLIENT REPLY OFF silences replies, not pushes.
        &[
            (&["HELLO", "3", "SETNAME", "x"], &[]),
            (&["CLIENT", "REPLY", "OFF"], &[]),
            (&["SUBSCRIBE", "c"], &[]),
            (&["PSUBSCRIBE", "c*"], &[&["PUBLISH", "c", "m"]]),
            (&["PING"], &[]),
            (&["UNSUBSCRIBE", "c"], &[]),
            (&["PUNSUBSCRIBE", "c*"], &[]),
            (&["CLIENT", "REPLY", "ON"], &[]),
        ],
        // In RESP2 too.
        &[
            (&["CLIENT", "REPLY", "OFF"], &[]),
            (&["SUBSCRIBE", "c"], &[&["PUBLISH", "c", "m"]]),
            (&["UNSUBSCRIBE"], &[]),
        ],
    ]);
}

/// CLIENT LIST's `sub`, `psub`, `ssub` and flag `P`, and INFO's counts.
#[test]
fn client_list_and_info_show_subscriptions() {
    let server = Respited::start(&[]);
    let mut sub = common::raw_for(server.port);
    sub.write_all(b"SUBSCRIBE a b\r\nPSUBSCRIBE p*\r\nSSUBSCRIBE s\r\n")
        .unwrap();
    let (_, _) = common::read_until_quiet(&mut sub, Duration::from_millis(200));
    let mut con = common::client_for(server.port);
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut con).unwrap();
    let line = list
        .lines()
        .find(|l| l.contains("sub=2"))
        .unwrap_or_else(|| panic!("{list}"));
    assert!(line.contains(" flags=P "), "{line}");
    assert!(line.contains(" sub=2 psub=1 ssub=1 "), "{line}");
    let info: String = redis::cmd("INFO").arg("stats").query(&mut con).unwrap();
    for field in [
        "pubsub_channels:2",
        "pubsub_patterns:1",
        "pubsubshard_channels:1",
    ] {
        assert!(info.contains(field), "{field} in {info}");
    }
    drop(sub);
    // The connection's subscriptions go with it.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let n: Vec<redis::Value> = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg("a")
            .query(&mut con)
            .unwrap();
        if n.get(1) == Some(&redis::Value::Int(0)) {
            break;
        }
        assert!(Instant::now() < deadline, "still subscribed: {n:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// CLIENT KILL and CLIENT LIST select a subscribed client by `TYPE
/// pubsub`, and `TYPE normal` leaves it out (redis's `getClientType`).
#[test]
fn client_type_pubsub_selects_subscribers() {
    compare(&[&[(
        &["SUBSCRIBE", "a"],
        &[
            &["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"],
            &["CLIENT", "KILL", "TYPE", "master"],
            &["CLIENT", "KILL", "TYPE", "pubsub"],
        ],
    )]]);
    let server = Respited::start(&[]);
    let mut sub = common::raw_for(server.port);
    sub.write_all(b"SUBSCRIBE a\r\n").unwrap();
    let (_, _) = common::read_until_quiet(&mut sub, Duration::from_millis(200));
    let mut con = common::client_for(server.port);
    let list = |con: &mut redis::Connection, kind: &str| -> String {
        redis::cmd("CLIENT")
            .arg("LIST")
            .arg("TYPE")
            .arg(kind)
            .query(con)
            .unwrap()
    };
    let pubsub = list(&mut con, "pubsub");
    assert_eq!(pubsub.lines().count(), 1, "{pubsub}");
    assert!(pubsub.contains(" sub=1 "), "{pubsub}");
    let normal = list(&mut con, "normal");
    assert_eq!(normal.lines().count(), 1, "{normal}");
    assert!(normal.contains(" sub=0 "), "{normal}");
}

/// Celery's result backend pipelines `SETEX key` then `PUBLISH channel
/// key`; the subscriber GETs the key as soon as the message arrives and
/// must find it, every time.
#[test]
fn a_write_pipelined_before_publish_is_visible_on_receipt() {
    let server = Respited::start(&[]);
    let mut sub = common::raw_for(server.port);
    assert_eq!(
        common::exchange(&mut sub, b"SUBSCRIBE results\r\n", 1),
        b"*3\r\n$9\r\nsubscribe\r\n$7\r\nresults\r\n:1\r\n"
    );
    let mut reader = common::client_for(server.port);
    let mut publisher = common::raw_for(server.port);
    for round in 0..1000 {
        let key = format!("celery-task-meta-{round}");
        let mut pipeline = common::encode(&["SETEX", &key, "60", "done"]);
        pipeline.extend(common::encode(&["PUBLISH", "results", &key]));
        publisher.write_all(&pipeline).unwrap();
        let expected = format!(
            "*3\r\n$7\r\nmessage\r\n$7\r\nresults\r\n${}\r\n{key}\r\n",
            key.len()
        );
        let got = read_exactly(&mut sub, expected.len());
        assert_eq!(String::from_utf8_lossy(&got), expected);
        let value: Option<String> = redis::cmd("GET").arg(&key).query(&mut reader).unwrap();
        assert_eq!(value.as_deref(), Some("done"), "round {round}");
        assert_eq!(read_exactly(&mut publisher, 9), b"+OK\r\n:1\r\n");
    }
}

fn read_exactly(s: &mut std::net::TcpStream, n: usize) -> Vec<u8> {
    use std::io::Read;
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = vec![0; n];
    s.read_exact(&mut buf).expect("read");
    buf
}

/// A subscriber that never reads is closed at the pubsub class's hard
/// limit; the publisher is never held up, and INFO counts the close.
#[test]
fn a_subscriber_that_never_reads_is_closed_at_its_output_limit() {
    let server = Respited::start(&[]);
    let mut con = common::client_for(server.port);
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("client-output-buffer-limit")
        .arg("pubsub 1mb 0 0")
        .query(&mut con)
        .unwrap();
    let mut sub = common::raw_for(server.port);
    sub.write_all(b"SUBSCRIBE flood\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let payload = "x".repeat(16 * 1024);
    let started = Instant::now();
    let mut delivered_to_none = false;
    for _ in 0..2000 {
        let n: i64 = redis::cmd("PUBLISH")
            .arg("flood")
            .arg(&payload)
            .query(&mut con)
            .unwrap();
        if n == 0 {
            delivered_to_none = true;
            break;
        }
    }
    assert!(delivered_to_none, "the subscriber was never closed");
    assert!(started.elapsed() < Duration::from_secs(20));
    let info: String = redis::cmd("INFO").arg("stats").query(&mut con).unwrap();
    assert!(
        info.contains("client_output_buffer_limit_disconnections:1"),
        "{info}"
    );
}

//! Keyspace notifications against a real redis-server 7.0, byte for byte:
//! a subscriber with `PSUBSCRIBE __key*__:*` on each server, the same
//! commands of every family run on another connection, and the pushes the
//! subscriber got compared exactly, in RESP2 and RESP3; then the
//! `notify-keyspace-events` flags as CONFIG GET echoes them, class masks,
//! `expired` from the active sweep, blocked clients served, MULTI/EXEC
//! and scripts.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use common::{RedisServer, Respited};

type Cmd<'a> = &'a [&'a str];

/// Sends one command and reads its reply (small replies: one read).
fn send(stream: &mut TcpStream, cmd: Cmd<'_>) -> Vec<u8> {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    common::exchange(stream, &common::encode(cmd), 1)
}

/// What a `PSUBSCRIBE __key*__:*` subscriber (RESP3 when `resp3`) gets
/// while `cmds` run on another connection, after `setup` ran with
/// notifications already set to `flags`; and the replies to `cmds`.
fn observe(
    port: u16,
    flags: &str,
    resp3: bool,
    setup: &[Cmd<'_>],
    cmds: &[Cmd<'_>],
    wait: Duration,
) -> (Vec<u8>, Vec<Vec<u8>>) {
    let mut ctl = common::raw_for(port);
    send(&mut ctl, &["FLUSHALL"]);
    send(
        &mut ctl,
        &["CONFIG", "SET", "notify-keyspace-events", flags],
    );
    for cmd in setup {
        send(&mut ctl, cmd);
    }
    let mut sub = common::raw_for(port);
    if resp3 {
        sub.write_all(&common::encode(&["HELLO", "3"])).unwrap();
        common::read_until_quiet(&mut sub, Duration::from_millis(100));
    }
    sub.write_all(&common::encode(&["PSUBSCRIBE", "__key*__:*"]))
        .unwrap();
    let (confirm, _) = common::read_until_quiet(&mut sub, Duration::from_millis(100));
    assert!(!confirm.is_empty(), "no PSUBSCRIBE confirmation");
    let replies = cmds.iter().map(|c| send(&mut ctl, c)).collect();
    std::thread::sleep(wait);
    let (pushes, _) = common::read_until_quiet(&mut sub, Duration::from_millis(250));
    send(&mut ctl, &["CONFIG", "SET", "notify-keyspace-events", ""]);
    (pushes, replies)
}

/// The pushes one per line, for a readable failure.
fn lines(bytes: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(bytes);
    let mut out = Vec::new();
    let mut cur = String::new();
    for part in text.split("\r\n") {
        if (part.starts_with('*') || part.starts_with('>')) && !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
        if !part.starts_with('$') {
            cur.push_str(part);
            cur.push(' ');
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur);
    }
    out.iter().map(|l| l.trim().to_string()).collect()
}

/// Both servers, with DEBUG allowed (or none without redis-server).
fn servers() -> Option<(Respited, RedisServer, tempfile::TempDir)> {
    let redis = RedisServer::start_with(&["--enable-debug-command", "yes"])?;
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("respite.toml");
    std::fs::write(&conf, "enable_debug_command = \"yes\"\n").unwrap();
    let ours = Respited::start_in(dir.path(), &["--config", conf.to_str().unwrap()]);
    Some((ours, redis, dir))
}

/// Runs each scene on both servers with each of `modes` (flags, RESP3)
/// and compares the pushes and the replies.
fn compare(scenes: &[(&[Cmd<'_>], &[Cmd<'_>])], modes: &[(&str, bool)]) {
    let Some((ours, redis, _dir)) = servers() else {
        return;
    };
    for &(flags, resp3) in modes {
        for (setup, cmds) in scenes {
            let wait = Duration::from_millis(50);
            let (theirs, their_replies) = observe(redis.port, flags, resp3, setup, cmds, wait);
            let (got, replies) = observe(ours.port, flags, resp3, setup, cmds, wait);
            assert!(
                !theirs.is_empty() || cmds.is_empty(),
                "redis sent no event for {cmds:?}"
            );
            let show = |v: &[Vec<u8>]| {
                v.iter()
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .collect::<Vec<_>>()
            };
            assert_eq!(
                show(&replies),
                show(&their_replies),
                "replies of {cmds:?} ({flags}, resp3 {resp3})"
            );
            assert_eq!(
                lines(&got),
                lines(&theirs),
                "events of {cmds:?} ({flags}, resp3 {resp3})"
            );
            assert_eq!(got, theirs, "bytes of the events of {cmds:?}");
        }
    }
}

const MODES: &[(&str, bool)] = &[("KEA", false), ("AKEn", true)];

#[test]
fn string_commands_emit_what_redis_emits() {
    compare(
        &[(
            &[],
            &[
                &["SET", "a", "1"],
                &["SET", "a", "2", "EX", "100"],
                &["SET", "a", "3", "KEEPTTL"],
                &["SET", "b", "1", "NX"],
                &["SET", "b", "2", "NX"],
                &["SET", "b", "3", "XX"],
                &["SET", "nob", "3", "XX"],
                &["SET", "c", "1", "GET"],
                &["SET", "c", "2", "PXAT", "99999999999999"],
                &["SETNX", "d", "1"],
                &["SETNX", "d", "2"],
                &["SETEX", "e", "100", "v"],
                &["PSETEX", "f", "100000", "v"],
                &["GETSET", "a", "x"],
                &["GETDEL", "a"],
                &["GETDEL", "a"],
                &["GETEX", "b", "EX", "100"],
                &["GETEX", "b", "PERSIST"],
                &["GETEX", "b", "PERSIST"],
                &["GETEX", "b"],
                &["GETEX", "b", "PXAT", "1"],
                &["MSET", "m1", "1", "m2", "2", "m1", "3"],
                &["MSETNX", "n2", "1", "n1", "2"],
                &["MSETNX", "n1", "1", "n3", "3"],
                &["INCR", "i"],
                &["DECR", "i"],
                &["INCRBY", "i", "5"],
                &["DECRBY", "i", "2"],
                &["INCRBYFLOAT", "fl", "1.5"],
                &["INCR", "fl"],
                &["APPEND", "ap", "x"],
                &["APPEND", "ap", "y"],
                &["SETRANGE", "sr", "3", "ab"],
                &["SETRANGE", "sr", "0", ""],
                &["SETRANGE", "none", "0", ""],
                &["SETBIT", "bits", "7", "1"],
                &["SETBIT", "bits", "7", "1"],
                &[
                    "BITFIELD", "bits", "SET", "u8", "0", "255", "GET", "u8", "0",
                ],
                &["BITFIELD", "bits", "GET", "u8", "0"],
                &[
                    "BITFIELD", "bits", "OVERFLOW", "FAIL", "INCRBY", "u8", "0", "1",
                ],
                &["BITOP", "OR", "dst", "bits", "i"],
                &["BITOP", "AND", "dst", "nope1", "nope2"],
                &["BITOP", "AND", "dst", "nope1", "nope2"],
            ],
        )],
        MODES,
    );
}

#[test]
fn generic_commands_emit_what_redis_emits() {
    compare(
        &[(
            &[],
            &[
                &["SET", "k", "1"],
                &["EXPIRE", "k", "100"],
                &["EXPIRE", "k", "100", "NX"],
                &["PEXPIRE", "k", "100000", "XX"],
                &["EXPIRE", "nokey", "100"],
                &["EXPIREAT", "k", "1"],
                &["SET", "k", "1"],
                &["PEXPIREAT", "k", "99999999999999"],
                &["PERSIST", "k"],
                &["PERSIST", "k"],
                &["RENAME", "k", "k2"],
                &["SET", "x", "1"],
                &["RENAMENX", "x", "k2"],
                &["RENAMENX", "x", "x3"],
                &["RENAME", "x3", "x3"],
                &["RENAME", "x3", "k2"],
                &["SET", "x3", "v"],
                &["COPY", "x3", "c1"],
                &["COPY", "x3", "c1"],
                &["COPY", "x3", "c1", "REPLACE"],
                &["COPY", "x3", "c2", "DB", "2"],
                &["RPUSH", "list", "a", "b"],
                &["COPY", "list", "list2"],
                &["MOVE", "c1", "1"],
                &["MOVE", "nokey", "1"],
                &["DEL", "c1", "x3", "nokey", "list"],
                &["UNLINK", "k2", "list2"],
                &["SELECT", "3"],
                &["SET", "in3", "v"],
                &["DEL", "in3"],
                &["SELECT", "0"],
                &["FLUSHDB"],
            ],
        )],
        MODES,
    );
}

#[test]
fn list_commands_emit_what_redis_emits() {
    compare(
        &[(
            &[],
            &[
                &["RPUSH", "l", "a", "b", "c"],
                &["LPUSH", "l", "z"],
                &["LPUSHX", "nol", "a"],
                &["RPUSHX", "l", "d"],
                &["LPOP", "l"],
                &["RPOP", "l", "2"],
                &["LPOP", "l", "0"],
                &["LPOP", "nol"],
                &["LSET", "l", "0", "q"],
                &["LINSERT", "l", "BEFORE", "q", "p"],
                &["LINSERT", "l", "BEFORE", "nope", "x"],
                &["LREM", "l", "0", "p"],
                &["LREM", "l", "0", "nope"],
                &["RPUSH", "l", "r"],
                &["LTRIM", "l", "0", "0"],
                &["LTRIM", "nol", "0", "0"],
                &["LTRIM", "l", "1", "0"],
                &["RPUSH", "s", "1", "2"],
                &["LMOVE", "s", "d", "LEFT", "RIGHT"],
                &["RPOPLPUSH", "s", "d"],
                &["LMOVE", "d", "d", "LEFT", "RIGHT"],
                &["LMPOP", "2", "nope", "d", "LEFT", "COUNT", "1"],
                &["LMPOP", "2", "nope", "d", "RIGHT", "COUNT", "5"],
                &["RPUSH", "one", "x"],
                &["RPOP", "one"],
                &["SORT", "nope", "STORE", "out"],
                &["RPUSH", "sl", "3", "1", "2"],
                &["SORT", "sl", "STORE", "out"],
                &["SORT", "sl", "STORE", "out"],
                &["SORT", "nope", "STORE", "out"],
            ],
        )],
        MODES,
    );
}

#[test]
fn hash_and_set_commands_emit_what_redis_emits() {
    compare(
        &[
            (
                &[],
                &[
                    &["HSET", "h", "a", "1", "b", "2"],
                    &["HMSET", "h", "c", "3"],
                    &["HSETNX", "h", "a", "9"],
                    &["HSETNX", "h", "z", "9"],
                    &["HINCRBY", "h", "a", "1"],
                    &["HINCRBYFLOAT", "h", "b", "0.5"],
                    &["HDEL", "h", "nope"],
                    &["HDEL", "nope", "a"],
                    &["HDEL", "h", "a", "b", "c", "z"],
                ],
            ),
            (
                &[],
                &[
                    &["SADD", "s", "a", "b", "c"],
                    &["SADD", "s", "a"],
                    &["SREM", "s", "x"],
                    &["SREM", "s", "a"],
                    &["SMOVE", "s", "t", "b"],
                    &["SMOVE", "s", "t", "nope"],
                    &["SMOVE", "t", "t", "b"],
                    &["SPOP", "s"],
                    &["SPOP", "s"],
                    &["SADD", "u", "1", "2", "3"],
                    &["SADD", "v", "3", "4"],
                    &["SINTERSTORE", "dst", "u", "v"],
                    &["SUNIONSTORE", "dst", "u", "v"],
                    &["SDIFFSTORE", "dst", "u", "u"],
                    &["SDIFFSTORE", "dst", "u", "u"],
                    &["SINTERSTORE", "dst", "u", "nope"],
                    &["SPOP", "v", "0"],
                    &["SPOP", "u", "10"],
                ],
            ),
        ],
        MODES,
    );
}

#[test]
fn sorted_set_commands_emit_what_redis_emits() {
    compare(
        &[(
            &[],
            &[
                &["ZADD", "z", "1", "a", "2", "b"],
                &["ZADD", "z", "1", "a"],
                &["ZADD", "z", "XX", "CH", "5", "a"],
                &["ZINCRBY", "z", "1", "b"],
                &["ZADD", "z", "INCR", "1", "a"],
                &["ZADD", "z", "NX", "INCR", "1", "a"],
                &["ZREM", "z", "nope"],
                &["ZREM", "z", "a"],
                &["ZADD", "z", "3", "c", "4", "d", "5", "e"],
                &["ZREMRANGEBYRANK", "z", "0", "0"],
                &["ZREMRANGEBYSCORE", "z", "4", "4"],
                &["ZREMRANGEBYSCORE", "z", "40", "40"],
                &["ZREMRANGEBYLEX", "z", "-", "+"],
                &["ZADD", "z", "1", "a", "2", "b", "3", "c"],
                &["ZPOPMIN", "z"],
                &["ZPOPMAX", "z", "5"],
                &["ZPOPMAX", "z"],
                &["ZADD", "y", "1", "a", "2", "b"],
                &["ZADD", "x", "2", "b", "3", "c"],
                &["ZUNIONSTORE", "out", "2", "x", "y"],
                &["ZINTERSTORE", "out", "2", "x", "y"],
                &["ZDIFFSTORE", "out", "1", "nope"],
                &["ZDIFFSTORE", "out", "1", "nope"],
                &["ZRANGESTORE", "out2", "y", "0", "-1"],
                &["ZRANGESTORE", "out2", "nope", "0", "-1"],
                &["ZMPOP", "2", "nope", "x", "MIN", "COUNT", "10"],
            ],
        )],
        MODES,
    );
}

#[test]
fn stream_commands_emit_what_redis_emits() {
    compare(
        &[(
            &[],
            &[
                &["XADD", "st", "1-1", "f", "v"],
                &["XADD", "st", "2-1", "f", "v"],
                &["XADD", "st", "MAXLEN", "1", "3-1", "f", "v"],
                &["XADD", "st", "MAXLEN", "5", "4-1", "f", "v"],
                &["XTRIM", "st", "MAXLEN", "0"],
                &["XTRIM", "st", "MAXLEN", "0"],
                &["XADD", "st", "5-1", "f", "v"],
                &["XDEL", "st", "5-1"],
                &["XDEL", "st", "5-1"],
                &["XSETID", "st", "10-1"],
                &["XGROUP", "CREATE", "st", "g", "$"],
                &["XGROUP", "CREATE", "st2", "g", "$", "MKSTREAM"],
                &["XGROUP", "CREATECONSUMER", "st", "g", "c1"],
                &["XGROUP", "CREATECONSUMER", "st", "g", "c1"],
                &["XADD", "st", "11-1", "f", "v"],
                &["XREADGROUP", "GROUP", "g", "c2", "STREAMS", "st", ">"],
                &["XCLAIM", "st", "g", "c3", "0", "11-1"],
                &["XAUTOCLAIM", "st", "g", "c3", "0", "0"],
                &["XAUTOCLAIM", "st", "g", "c4", "0", "0"],
                &["XACK", "st", "g", "11-1"],
                &["XGROUP", "DELCONSUMER", "st", "g", "nope"],
                &["XGROUP", "DELCONSUMER", "st", "g", "c1"],
                &["XGROUP", "SETID", "st", "g", "0"],
                &["XGROUP", "DESTROY", "st", "g"],
                &["XGROUP", "DESTROY", "st", "g"],
                &["XADD", "nost", "NOMKSTREAM", "*", "f", "v"],
            ],
        )],
        MODES,
    );
}

#[test]
fn geo_and_hyperloglog_commands_emit_what_redis_emits() {
    compare(
        &[
            (
                &[],
                &[
                    &["GEOADD", "g", "13.361389", "38.115556", "Palermo"],
                    &["GEOADD", "g", "13.361389", "38.115556", "Palermo"],
                    &["GEOADD", "g", "XX", "15.087269", "37.502669", "Catania"],
                    &["GEOADD", "g", "NX", "15.087269", "37.502669", "Catania"],
                    &["GEOADD", "g", "NX", "15", "37", "Catania"],
                    &["GEOADD", "g", "CH", "XX", "15.1", "37.5", "Catania"],
                    &["GEOADD", "g", "91", "0", "bad"],
                    &[
                        "GEOSEARCHSTORE",
                        "d",
                        "g",
                        "FROMLONLAT",
                        "15",
                        "37",
                        "BYRADIUS",
                        "200",
                        "km",
                    ],
                    &[
                        "GEOSEARCHSTORE",
                        "d",
                        "g",
                        "FROMLONLAT",
                        "0",
                        "0",
                        "BYRADIUS",
                        "1",
                        "m",
                    ],
                    &[
                        "GEOSEARCHSTORE",
                        "d",
                        "g",
                        "FROMLONLAT",
                        "0",
                        "0",
                        "BYRADIUS",
                        "1",
                        "m",
                    ],
                    &[
                        "GEOSEARCHSTORE",
                        "d",
                        "g",
                        "FROMMEMBER",
                        "Palermo",
                        "BYBOX",
                        "400",
                        "400",
                        "km",
                        "STOREDIST",
                    ],
                    &[
                        "GEOSEARCHSTORE",
                        "d",
                        "nokey",
                        "FROMLONLAT",
                        "0",
                        "0",
                        "BYRADIUS",
                        "1",
                        "m",
                    ],
                    &["GEORADIUS", "g", "15", "37", "200", "km", "STORE", "r"],
                    &[
                        "GEORADIUSBYMEMBER",
                        "g",
                        "Palermo",
                        "200",
                        "km",
                        "STOREDIST",
                        "r",
                    ],
                    &["GEORADIUS", "g", "0", "0", "1", "m", "STORE", "r"],
                    &["GEORADIUS", "nokey", "0", "0", "1", "m", "STORE", "g"],
                    &[
                        "GEOSEARCH",
                        "g",
                        "FROMLONLAT",
                        "0",
                        "0",
                        "BYRADIUS",
                        "1",
                        "m",
                    ],
                ],
            ),
            (
                &[&["SET", "s", "text"]],
                &[
                    &["PFADD", "h", "a", "b", "c"],
                    &["PFADD", "h", "a", "b"],
                    &["PFADD", "h"],
                    &["PFADD", "h2"],
                    &["PFADD", "h2", "z"],
                    &["PFCOUNT", "h"],
                    &["PFCOUNT", "h", "h2"],
                    &["PFMERGE", "h3", "h", "h2"],
                    &["PFMERGE", "h3", "h", "h2"],
                    &["PFMERGE", "h"],
                    &["PFMERGE", "h4"],
                    &["PFMERGE", "h", "s"],
                    &["PFADD", "s", "x"],
                    &["PFDEBUG", "TODENSE", "h"],
                    &["PFADD", "h", "d"],
                ],
            ),
        ],
        MODES,
    );
}

#[test]
fn transactions_and_scripts_emit_in_order_after_they_commit() {
    compare(
        &[
            (
                &[],
                &[
                    &["MULTI"],
                    &["SET", "a", "1"],
                    &["LPUSH", "l", "x"],
                    &["INCR", "a"],
                    &["DEL", "a", "l"],
                    &["EXEC"],
                    &["MULTI"],
                    &["SET", "b", "1"],
                    &["DISCARD"],
                    &["EVAL", "redis.call('set','a','1'); redis.call('rpush','l','x','y'); redis.call('del','a'); return 1", "0"],
                    &["EVAL", "redis.call('set','a','1'); return redis.call('incr','l')", "0"],
                ],
            ),
            // A transaction whose WATCH fired does nothing, so says nothing.
            (
                &[&["SET", "w", "1"]],
                &[
                    &["WATCH", "w"],
                    &["SET", "w", "2"],
                    &["MULTI"],
                    &["SET", "z", "1"],
                    &["EXEC"],
                ],
            ),
        ],
        MODES,
    );
}

#[test]
fn classes_mask_events_as_in_redis() {
    let cmds: &[Cmd<'_>] = &[
        &["SET", "a", "1", "EX", "100"],
        &["LPUSH", "l", "x"],
        &["SADD", "s", "x"],
        &["HSET", "h", "f", "v"],
        &["ZADD", "z", "1", "m"],
        &["XADD", "st", "1-1", "f", "v"],
        &["DEL", "a", "l", "s", "h", "z", "st"],
        &["SET", "n", "1"],
    ];
    compare(
        &[(&[], cmds)],
        &[
            ("Kl", false),
            ("El", false),
            ("Eg", true),
            ("K$", false),
            ("Ks", false),
            ("Kh", false),
            ("Kz", false),
            ("Kt", false),
            ("En", false),
            ("KEgn", false),
        ],
    );
    // No K nor E: nothing at all, whatever the classes.
    let Some((ours, _redis, _dir)) = servers() else {
        return;
    };
    let (got, _) = observe(ours.port, "A", false, &[], cmds, Duration::from_millis(50));
    assert!(got.is_empty(), "{:?}", lines(&got));
}

#[test]
fn flags_are_parsed_and_shown_as_redis_shows_them() {
    let Some((ours, redis, _dir)) = servers() else {
        return;
    };
    let mut theirs = redis.client();
    let mut mine = ours.client();
    for flags in [
        "",
        "KEA",
        "gKE",
        "$lshzxeKE",
        "KA",
        "EA",
        "An",
        "Anm",
        "g$lshzxetn",
        "mEd",
        "AAAA",
        "KEw",
        "x",
        "KEA ",
        "nK",
    ] {
        let set = |c: &mut redis::Connection| {
            redis::cmd("CONFIG")
                .arg("SET")
                .arg("notify-keyspace-events")
                .arg(flags)
                .query::<redis::Value>(c)
                .map_err(|e| e.to_string())
        };
        let get = |c: &mut redis::Connection| {
            redis::cmd("CONFIG")
                .arg("GET")
                .arg("notify-keyspace-events")
                .query::<Vec<String>>(c)
                .unwrap()
        };
        let (a, b) = (set(&mut mine), set(&mut theirs));
        assert_eq!(a.is_ok(), b.is_ok(), "{flags}: {a:?} vs {b:?}");
        assert_eq!(get(&mut mine), get(&mut theirs), "{flags}");
    }
}

#[test]
fn expired_keys_are_announced_by_the_sweep_and_by_writes() {
    let Some((ours, redis, _dir)) = servers() else {
        return;
    };
    for port in [ours.port, redis.port] {
        // Nobody reads the key: the active sweep removes it and says so.
        let (got, _) = observe(
            port,
            "Ex",
            false,
            &[],
            &[&["SET", "foo", "bar", "PX", "100"]],
            Duration::from_millis(600),
        );
        assert_eq!(
            lines(&got),
            ["*4 pmessage __key*__:* __keyevent@0__:expired foo"],
            "port {port}"
        );
    }
    // With the sweep off, the write that finds the key expired removes it.
    for port in [ours.port, redis.port] {
        let (got, _) = observe(
            port,
            "KEA",
            false,
            &[&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]],
            &[
                &["SET", "foo", "bar", "PX", "20"],
                &["DEBUG", "SLEEP", "0.1"],
                &["LPUSH", "foo", "x"],
                &["DEBUG", "SET-ACTIVE-EXPIRE", "1"],
            ],
            Duration::from_millis(50),
        );
        let got = lines(&got);
        assert_eq!(
            got[4..],
            [
                "*4 pmessage __key*__:* __keyspace@0__:foo expired",
                "*4 pmessage __key*__:* __keyevent@0__:expired foo",
                "*4 pmessage __key*__:* __keyspace@0__:foo lpush",
                "*4 pmessage __key*__:* __keyevent@0__:lpush foo",
            ],
            "port {port}: {got:?}"
        );
    }
}

#[test]
fn a_blocked_client_served_by_a_push_emits_redis_events() {
    let Some((ours, redis, _dir)) = servers() else {
        return;
    };
    let mut all = Vec::new();
    for port in [redis.port, ours.port] {
        let mut blocked = common::raw_for(port);
        let mut blocked2 = common::raw_for(port);
        let mut ctl = common::raw_for(port);
        send(&mut ctl, &["FLUSHALL"]);
        send(
            &mut ctl,
            &["CONFIG", "SET", "notify-keyspace-events", "KEA"],
        );
        let mut sub = common::raw_for(port);
        sub.write_all(&common::encode(&["PSUBSCRIBE", "__key*__:*"]))
            .unwrap();
        common::read_until_quiet(&mut sub, Duration::from_millis(100));
        blocked
            .write_all(&common::encode(&["BLPOP", "bl", "0"]))
            .unwrap();
        blocked2
            .write_all(&common::encode(&[
                "BLMOVE", "bm", "dst", "LEFT", "RIGHT", "0",
            ]))
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        send(&mut ctl, &["RPUSH", "bl", "x"]);
        send(&mut ctl, &["RPUSH", "bm", "y", "z"]);
        std::thread::sleep(Duration::from_millis(50));
        let (got, _) = common::read_until_quiet(&mut sub, Duration::from_millis(250));
        send(&mut ctl, &["CONFIG", "SET", "notify-keyspace-events", ""]);
        all.push(lines(&got));
    }
    assert_eq!(all[1], all[0]);
}

/// Splits pushes into their RESP bulk strings, one entry per push.
fn messages(bytes: &[u8]) -> Vec<Vec<String>> {
    lines(bytes)
        .into_iter()
        .map(|l| l.split(' ').skip(1).map(str::to_string).collect())
        .collect()
}

#[test]
fn eviction_emits_evicted_events_and_invalidates_tracked_keys() {
    let Some((ours, redis, _dir)) = servers() else {
        return;
    };
    let keys: Vec<String> = (0..50).map(|i| format!("ev:{i}")).collect();
    let mut seen = Vec::new();
    for port in [redis.port, ours.port] {
        let mut ctl = common::raw_for(port);
        send(&mut ctl, &["FLUSHALL"]);
        send(
            &mut ctl,
            &["CONFIG", "SET", "notify-keyspace-events", "KEe"],
        );
        for k in &keys {
            send(&mut ctl, &["SET", k, "v"]);
        }
        let mut sub = common::raw_for(port);
        sub.write_all(&common::encode(&["PSUBSCRIBE", "__key*__:*"]))
            .unwrap();
        common::read_until_quiet(&mut sub, Duration::from_millis(100));
        let mut tracker = common::raw_for(port);
        send(&mut tracker, &["HELLO", "3"]);
        common::read_until_quiet(&mut tracker, Duration::from_millis(50));
        send(&mut tracker, &["CLIENT", "TRACKING", "on"]);
        for k in &keys {
            send(&mut tracker, &["GET", k]);
        }
        send(
            &mut ctl,
            &["CONFIG", "SET", "maxmemory-policy", "allkeys-random"],
        );
        send(&mut ctl, &["CONFIG", "SET", "maxmemory", "1"]);
        std::thread::sleep(Duration::from_millis(500));
        send(&mut ctl, &["PING"]);
        std::thread::sleep(Duration::from_millis(300));
        let (events, _) = common::read_until_quiet(&mut sub, Duration::from_millis(250));
        let (invalidations, _) = common::read_until_quiet(&mut tracker, Duration::from_millis(100));
        send(&mut ctl, &["CONFIG", "SET", "maxmemory", "0"]);
        send(&mut ctl, &["CONFIG", "SET", "notify-keyspace-events", ""]);
        let events = messages(&events);
        // Redis's order per key: the keyspace message, then the keyevent
        // one; the keys themselves go in a random order.
        let mut pairs = Vec::new();
        for pair in events.chunks(2) {
            assert_eq!(pair.len(), 2, "an unpaired event: {events:?}");
            let (space, event) = (&pair[0], &pair[1]);
            assert_eq!(space[0], "pmessage");
            assert_eq!(space[3], "evicted", "{space:?}");
            assert_eq!(event[2], "__keyevent@0__:evicted", "{event:?}");
            assert_eq!(space[2], format!("__keyspace@0__:{}", event[3]));
            pairs.push(event[3].clone());
        }
        pairs.sort();
        // `>2 invalidate [key]` each.
        let text = String::from_utf8_lossy(&invalidations).into_owned();
        let mut invalidated: Vec<String> = text
            .split(">2\r\n$10\r\ninvalidate\r\n")
            .skip(1)
            .map(|m| {
                let parts: Vec<&str> = m.split("\r\n").collect();
                assert_eq!(parts[0], "*1", "{m:?}");
                parts[2].to_string()
            })
            .collect();
        invalidated.sort();
        seen.push((pairs, invalidated));
    }
    let mut all = keys.clone();
    all.sort();
    assert_eq!(seen[0].0, all, "redis evicted every key with its events");
    assert_eq!(seen[1], seen[0]);
}

#[test]
fn read_misses_emit_keymiss_as_redis_does() {
    compare(
        &[(
            &[
                &["SET", "here", "1"],
                &["HSET", "h", "f", "v"],
                &["RPUSH", "l", "a"],
            ],
            &[
                &["GET", "nokey"],
                &["GET", "here"],
                &["MGET", "here", "m1", "m2"],
                &["HGET", "h", "f"],
                &["HGET", "nohash", "f"],
                &["HGETALL", "nohash"],
                &["LRANGE", "nolist", "0", "-1"],
                &["LLEN", "l"],
                &["SCARD", "noset"],
                &["ZSCORE", "nozset", "m"],
                &["STRLEN", "nokey"],
                &["EXISTS", "here", "nokey"],
                &["TYPE", "nokey"],
                &["TTL", "nokey"],
                &["SET", "nokey2", "x"],
            ],
        )],
        &[("KEm", false), ("Km", true), ("Em", false)],
    );
}

#[test]
fn reads_in_transactions_and_scripts_emit_keymiss_in_order() {
    compare(
        &[(
            &[&["SET", "here", "1"]],
            &[
                &["MULTI"],
                &["GET", "nokey"],
                &["SET", "a", "1"],
                &["MGET", "a", "m1", "here"],
                &["HGET", "noh", "f"],
                &["DEL", "a"],
                &["EXEC"],
                &[
                    "EVAL",
                    "redis.call('get','x'); redis.call('set','y','1'); return redis.call('llen','z')",
                    "0",
                ],
                &["EVAL_RO", "return redis.call('get', KEYS[1])", "1", "nokey"],
                &["EVAL", "return redis.call('exists', KEYS[1])", "1", "nokey"],
            ],
        )],
        &[("KEAm", false), ("Km", true), ("Em", false)],
    );
}

#[test]
fn a_read_that_finds_a_key_expired_announces_it_as_redis_does() {
    // With the sweep off, only the reads' lookups can find the keys
    // expired: redis deletes each then (`expired`), before the `keymiss`
    // of the same lookup; a read on the read pool, a read inside EXEC and
    // a script's read alike.
    let scene: &[Cmd<'_>] = &[
        &["SET", "foo", "bar", "PX", "20"],
        &["SET", "k2", "v", "PX", "20"],
        &["RPUSH", "l", "a"],
        &["PEXPIRE", "l", "20"],
        &["SET", "t", "v", "PX", "20"],
        &["SET", "s", "v", "PX", "20"],
        &["DEBUG", "SLEEP", "0.1"],
        &["GET", "foo"],
        &["GET", "foo"],
        &["MGET", "nokey", "k2", "nokey"],
        &["MULTI"],
        &["LRANGE", "l", "0", "-1"],
        &["SET", "n", "1"],
        &["GET", "t"],
        &["EXEC"],
        &["EVAL", "return redis.call('get', KEYS[1])", "1", "s"],
        &["SET", "foo", "again"],
        &["DEBUG", "SET-ACTIVE-EXPIRE", "1"],
    ];
    compare(
        &[(&[&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]], scene)],
        &[("KEA", false), ("Exm", true), ("KEAm", false)],
    );
}

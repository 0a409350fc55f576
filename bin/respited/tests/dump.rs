//! DUMP and RESTORE against a real redis-server 7.0: every type, in every
//! encoding redis picks for it (listpack, quicklist, hashtable, intset,
//! skiplist, int/embstr/raw/LZF strings, streams with consumer groups and
//! pending entries), DUMPed by redis and RESTOREd into respite and the
//! other way round, the values compared as both servers answer for them,
//! over RESP2 and RESP3; RESTORE's options, TTL rules and errors (corrupt
//! and truncated payloads, BUSYKEY, bad TTL/IDLETIME/FREQ) compared reply
//! for reply.

mod common;

use std::time::Duration;

use common::{RedisServer, Respited};
use redis::{Connection, Value};

fn con(port: u16, resp3: bool) -> Connection {
    let url = if resp3 {
        format!("redis://127.0.0.1:{port}/?protocol=resp3")
    } else {
        format!("redis://127.0.0.1:{port}/")
    };
    redis::Client::open(url)
        .expect("client")
        .get_connection()
        .expect("connect")
}

fn q(c: &mut Connection, args: &[&[u8]]) -> redis::RedisResult<Value> {
    let mut cmd = redis::cmd(std::str::from_utf8(args[0]).unwrap());
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c)
}

fn ok(c: &mut Connection, args: &[&[u8]]) -> Value {
    q(c, args).unwrap_or_else(|e| panic!("{:?}: {e}", String::from_utf8_lossy(args[0])))
}

fn bytes(v: &Value) -> Vec<u8> {
    match v {
        Value::BulkString(b) => b.clone(),
        Value::SimpleString(s) => s.clone().into_bytes(),
        Value::Int(i) => i.to_string().into_bytes(),
        Value::Double(d) => d.to_string().into_bytes(),
        other => format!("{other:?}").into_bytes(),
    }
}

fn flat(v: Value) -> Vec<Vec<u8>> {
    match v {
        Value::Array(a) | Value::Set(a) => a.iter().map(bytes).collect(),
        Value::Map(m) => m.iter().flat_map(|(k, v)| [bytes(k), bytes(v)]).collect(),
        other => vec![bytes(&other)],
    }
}

/// A stream's state as XINFO STREAM FULL gives it, in a form that does
/// not depend on the protocol, without the node layout.
fn describe(v: &Value) -> String {
    match v {
        Value::Array(a) | Value::Set(a) => {
            let parts: Vec<String> = a.iter().map(describe).collect();
            format!("[{}]", parts.join(","))
        }
        Value::Map(m) => {
            let parts: Vec<String> = m
                .iter()
                .flat_map(|(k, v)| [describe(k), describe(v)])
                .collect();
            format!("[{}]", parts.join(","))
        }
        Value::Nil => "nil".into(),
        other => String::from_utf8_lossy(&bytes(other)).into_owned(),
    }
}

/// Everything a client can see of `key`'s value, canonically ordered.
fn snapshot(c: &mut Connection, key: &[u8]) -> String {
    let t = String::from_utf8(bytes(&ok(c, &[b"TYPE", key]))).unwrap();
    let body = match t.as_str() {
        "none" => String::new(),
        "string" => format!("{:?}", bytes(&ok(c, &[b"GET", key]))),
        "list" => format!("{:?}", flat(ok(c, &[b"LRANGE", key, b"0", b"-1"]))),
        "set" => {
            let mut m = flat(ok(c, &[b"SMEMBERS", key]));
            m.sort();
            format!("{m:?}")
        }
        "hash" => {
            let f = flat(ok(c, &[b"HGETALL", key]));
            let mut pairs: Vec<_> = f.chunks(2).map(|p| p.to_vec()).collect();
            pairs.sort();
            format!("{pairs:?}")
        }
        "zset" => {
            let r = ok(c, &[b"ZRANGE", key, b"0", b"-1", b"WITHSCORES"]);
            describe(&r)
        }
        "stream" => {
            let entries = describe(&ok(c, &[b"XRANGE", key, b"-", b"+"]));
            let full = ok(c, &[b"XINFO", b"STREAM", key, b"FULL"]);
            let pairs: Vec<(Value, Value)> = match full {
                Value::Map(m) => m,
                Value::Array(a) => a.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect(),
                other => panic!("XINFO: {other:?}"),
            };
            let facts: Vec<String> = pairs
                .iter()
                .filter(|(k, _)| {
                    !matches!(
                        bytes(k).as_slice(),
                        b"radix-tree-keys" | b"radix-tree-nodes" | b"entries"
                    )
                })
                .map(|(k, v)| format!("{}={}", describe(k), describe(v)))
                .collect();
            format!("{entries} {}", facts.join(" "))
        }
        other => panic!("type {other}"),
    };
    format!("{t}: {body}")
}

fn encoding(c: &mut Connection, key: &[u8]) -> String {
    String::from_utf8(bytes(&ok(c, &[b"OBJECT", b"ENCODING", key]))).unwrap()
}

/// Fills redis with one key per type and encoding; returns (key, the
/// encoding redis must have picked).
fn populate(c: &mut Connection) -> Vec<(Vec<u8>, &'static str)> {
    let mut keys = Vec::new();
    let mut add = |c: &mut Connection, key: &str, enc: &'static str| {
        assert_eq!(encoding(c, key.as_bytes()), enc, "{key}");
        keys.push((key.as_bytes().to_vec(), enc));
    };
    ok(c, &[b"SET", b"str:int", b"12345"]);
    add(c, "str:int", "int");
    ok(c, &[b"SET", b"str:neg", b"-9000000000"]);
    add(c, "str:neg", "int");
    ok(c, &[b"SET", b"str:short", b"hello\x00world"]);
    add(c, "str:short", "embstr");
    let long = "abc".repeat(400);
    ok(c, &[b"SET", b"str:lzf", long.as_bytes()]);
    add(c, "str:lzf", "raw");
    let noise: Vec<u8> = (0..3000u32).map(|i| (i * 7919 % 251) as u8).collect();
    ok(c, &[b"SET", b"str:raw", &noise]);
    add(c, "str:raw", "raw");
    ok(c, &[b"SET", b"str:empty", b""]);
    add(c, "str:empty", "embstr");

    ok(c, &[b"RPUSH", b"list:small", b"a", b"1", b"-7", b"b\r\nc"]);
    add(c, "list:small", "quicklist");
    for i in 0..2000 {
        let v = format!("element-{i}-{}", "x".repeat(i % 50));
        ok(c, &[b"RPUSH", b"list:big", v.as_bytes()]);
    }
    add(c, "list:big", "quicklist");

    ok(
        c,
        &[
            b"SADD",
            b"set:ints",
            b"1",
            b"-5",
            b"300",
            b"70000",
            b"5000000000",
        ],
    );
    add(c, "set:ints", "intset");
    ok(c, &[b"SADD", b"set:strs", b"a", b"b", b"c"]);
    add(c, "set:strs", "hashtable");
    for i in 0..600 {
        ok(c, &[b"SADD", b"set:bigints", i.to_string().as_bytes()]);
    }
    add(c, "set:bigints", "hashtable");

    ok(
        c,
        &[
            b"HSET",
            b"hash:small",
            b"f1",
            b"v1",
            b"f2",
            b"22",
            b"",
            b"empty",
        ],
    );
    add(c, "hash:small", "listpack");
    for i in 0..600 {
        let f = format!("field{i}");
        ok(
            c,
            &[b"HSET", b"hash:big", f.as_bytes(), i.to_string().as_bytes()],
        );
    }
    add(c, "hash:big", "hashtable");

    ok(
        c,
        &[
            b"ZADD",
            b"zset:small",
            b"1",
            b"a",
            b"2.5",
            b"b",
            b"-inf",
            b"c",
            b"inf",
            b"d",
        ],
    );
    add(c, "zset:small", "listpack");
    for i in 0..600 {
        let m = format!("member{i}");
        let s = format!("{}", i as f64 / 3.0);
        ok(c, &[b"ZADD", b"zset:big", s.as_bytes(), m.as_bytes()]);
    }
    add(c, "zset:big", "skiplist");

    for i in 0..250u32 {
        let id = format!("{}-{}", 1_700_000_000_000u64 + u64::from(i / 3), i % 3);
        let v = i.to_string();
        if i % 9 == 0 {
            ok(
                c,
                &[b"XADD", b"stream", id.as_bytes(), b"other", v.as_bytes()],
            );
        } else {
            ok(
                c,
                &[
                    b"XADD",
                    b"stream",
                    id.as_bytes(),
                    b"a",
                    v.as_bytes(),
                    b"b",
                    b"x",
                ],
            );
        }
    }
    ok(
        c,
        &[b"XDEL", b"stream", b"1700000000001-0", b"1700000000010-1"],
    );
    ok(c, &[b"XGROUP", b"CREATE", b"stream", b"g1", b"0"]);
    ok(c, &[b"XGROUP", b"CREATE", b"stream", b"g2", b"$"]);
    ok(
        c,
        &[
            b"XREADGROUP",
            b"GROUP",
            b"g1",
            b"alice",
            b"COUNT",
            b"20",
            b"STREAMS",
            b"stream",
            b">",
        ],
    );
    ok(
        c,
        &[
            b"XREADGROUP",
            b"GROUP",
            b"g1",
            b"bob",
            b"COUNT",
            b"3",
            b"STREAMS",
            b"stream",
            b">",
        ],
    );
    ok(c, &[b"XACK", b"stream", b"g1", b"1700000000000-1"]);
    ok(
        c,
        &[b"XGROUP", b"CREATECONSUMER", b"stream", b"g2", b"carol"],
    );
    add(c, "stream", "stream");
    ok(c, &[b"XADD", b"stream:empty", b"5-5", b"f", b"v"]);
    ok(c, &[b"XDEL", b"stream:empty", b"5-5"]);
    add(c, "stream:empty", "stream");
    keys
}

fn round_trips(resp3: bool) {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let server = Respited::start(&[]);
    let mut theirs = con(redis.port, resp3);
    let mut ours = con(server.port, resp3);
    let keys = populate(&mut theirs);
    for (key, enc) in &keys {
        let name = format!("{} ({enc})", String::from_utf8_lossy(key));
        let expected = snapshot(&mut theirs, key);

        // redis → respite.
        let payload = bytes(&ok(&mut theirs, &[b"DUMP", key]));
        assert_eq!(
            ok(&mut ours, &[b"RESTORE", key, b"0", &payload]),
            Value::Okay,
            "{name}"
        );
        assert_eq!(
            snapshot(&mut ours, key),
            expected,
            "redis → respite: {name}"
        );

        // respite → redis, under another name.
        let ours_payload = bytes(&ok(&mut ours, &[b"DUMP", key]));
        let mut copy = b"back:".to_vec();
        copy.extend_from_slice(key);
        assert_eq!(
            ok(&mut theirs, &[b"RESTORE", &copy, b"0", &ours_payload]),
            Value::Okay,
            "{name}"
        );
        assert_eq!(
            snapshot(&mut theirs, &copy),
            expected,
            "respite → redis: {name}"
        );

        // respite → respite.
        assert_eq!(
            ok(&mut ours, &[b"RESTORE", &copy, b"0", &ours_payload]),
            Value::Okay
        );
        assert_eq!(
            snapshot(&mut ours, &copy),
            expected,
            "respite → respite: {name}"
        );
    }
}

#[test]
fn every_type_round_trips_with_redis_resp2() {
    round_trips(false);
}

#[test]
fn every_type_round_trips_with_redis_resp3() {
    round_trips(true);
}

/// The same command on both servers: the replies (or error texts) equal.
fn same(ours: &mut Connection, theirs: &mut Connection, args: &[&[u8]]) -> Value {
    let a = q(ours, args);
    let b = q(theirs, args);
    let show = |r: &redis::RedisResult<Value>| match r {
        Ok(v) => format!("{v:?}"),
        Err(e) => format!("ERR {:?} {:?}", e.code(), e.detail()),
    };
    assert_eq!(
        show(&a),
        show(&b),
        "{:?}",
        args.iter()
            .map(|a| String::from_utf8_lossy(&a[..a.len().min(40)]).into_owned())
            .collect::<Vec<_>>()
    );
    a.unwrap_or(Value::Nil)
}

fn with_footer(body: &[u8]) -> Vec<u8> {
    let mut p = body.to_vec();
    p.extend_from_slice(&10u16.to_le_bytes());
    let crc = respite_rdb::crc64(&p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
}

#[test]
fn restore_options_ttls_and_errors_match_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let server = Respited::start(&[]);
    for resp3 in [false, true] {
        let mut theirs = con(redis.port, resp3);
        let mut ours = con(server.port, resp3);
        same(&mut ours, &mut theirs, &[b"FLUSHALL"]);
        let good = respite_rdb::encode_dump(&respite_rdb::Value::String(b"v".to_vec()));
        let list = bytes(&{
            ok(&mut theirs, &[b"RPUSH", b"l", b"a", b"b"]);
            ok(&mut theirs, &[b"DUMP", b"l"])
        });
        ok(&mut theirs, &[b"DEL", b"l"]);
        let mut bad_crc = good.clone();
        let n = bad_crc.len();
        bad_crc[n - 3] ^= 0x10;
        let newer =
            respite_rdb::encode_dump_with_version(&respite_rdb::Value::String(b"v".to_vec()), 11);
        let fixed: Vec<Vec<u8>> = [
            &b"\x08\x01x"[..],
            &b"\x00\x3fxyz"[..],
            &b"\x01\x00"[..],
            &b"\x02\x02\x01a\x01a"[..],
            &b"\x0f\x00\x01\x00\x00"[..],
            &b"\x06\x01"[..],
        ]
        .iter()
        .map(|b| with_footer(b))
        .collect();
        let cases: Vec<Vec<&[u8]>> = vec![
            vec![b"DUMP", b"missing"],
            vec![b"RESTORE", b"k", b"0"],
            vec![b"RESTORE", b"k", b"0", &good],
            vec![b"GET", b"k"],
            vec![b"RESTORE", b"k", b"0", &good],
            vec![b"RESTORE", b"k", b"abc", &good],
            vec![b"RESTORE", b"k", b"-1", &bad_crc],
            vec![b"RESTORE", b"k2", b"abc", &good],
            vec![b"RESTORE", b"k2", b"-1", &good],
            vec![b"RESTORE", b"k2", b"0", &bad_crc],
            vec![b"RESTORE", b"k2", b"0", &newer],
            vec![b"RESTORE", b"k2", b"0", b"short"],
            vec![b"RESTORE", b"k2", b"0", b""],
            vec![b"RESTORE", b"k2", b"0", &list[..list.len() - 11]],
            vec![b"RESTORE", b"k2", b"0", &fixed[0]],
            vec![b"RESTORE", b"k2", b"0", &fixed[1]],
            vec![b"RESTORE", b"k2", b"0", &fixed[2]],
            vec![b"RESTORE", b"k2", b"0", &fixed[3]],
            vec![b"RESTORE", b"k2", b"0", &fixed[4]],
            vec![b"RESTORE", b"k2", b"0", &fixed[5]],
            vec![b"RESTORE", b"k2", b"0", &good, b"IDLETIME"],
            vec![b"RESTORE", b"k2", b"0", &good, b"IDLETIME", b"-1"],
            vec![b"RESTORE", b"k2", b"0", &good, b"IDLETIME", b"x"],
            vec![b"RESTORE", b"k2", b"0", &good, b"FREQ", b"256"],
            vec![b"RESTORE", b"k2", b"0", &good, b"FREQ", b"-1"],
            vec![
                b"RESTORE",
                b"k2",
                b"0",
                &good,
                b"IDLETIME",
                b"5",
                b"FREQ",
                b"5",
            ],
            vec![
                b"RESTORE",
                b"k2",
                b"0",
                &good,
                b"FREQ",
                b"5",
                b"IDLETIME",
                b"5",
            ],
            vec![b"RESTORE", b"k2", b"0", &good, b"NOPE"],
            vec![b"RESTORE", b"k", b"0", &good, b"NOPE"],
            vec![b"EXISTS", b"k2"],
            vec![b"RESTORE", b"k", b"0", &list, b"REPLACE"],
            vec![b"LRANGE", b"k", b"0", b"-1"],
            // A TTL in the past: OK, and the key is gone (REPLACE deleted
            // it) or never written.
            vec![b"RESTORE", b"k", b"1", &good, b"REPLACE", b"ABSTTL"],
            vec![b"EXISTS", b"k"],
            vec![b"RESTORE", b"k3", b"1000", &good, b"ABSTTL"],
            vec![b"EXISTS", b"k3"],
            vec![b"RESTORE", b"k4", b"4102444800000", &good, b"ABSTTL"],
            vec![b"PEXPIRETIME", b"k4"],
            vec![
                b"RESTORE",
                b"k5",
                b"0",
                &good,
                b"ABSTTL",
                b"REPLACE",
                b"IDLETIME",
                b"100",
            ],
            vec![b"TTL", b"k5"],
            vec![b"DUMP", b"k5"],
            vec![b"RESTORE", b"k6", b"0", &good, b"FREQ", b"100"],
            vec![b"SET", b"wrong", b"x"],
            vec![b"RESTORE", b"wrong", b"0", &list, b"REPLACE"],
            vec![b"TYPE", b"wrong"],
        ];
        for case in &cases {
            same(&mut ours, &mut theirs, case);
        }
        // A relative TTL.
        for c in [&mut ours, &mut theirs] {
            ok(c, &[b"RESTORE", b"t", b"5000", &good, b"REPLACE"]);
            let Value::Int(pttl) = ok(c, &[b"PTTL", b"t"]) else {
                panic!("PTTL")
            };
            assert!((4000..=5000).contains(&pttl), "{pttl}");
        }
    }
}

#[test]
fn restore_sets_idle_time_and_frequency() {
    let server = Respited::start(&[]);
    let mut c = con(server.port, false);
    let good = respite_rdb::encode_dump(&respite_rdb::Value::String(b"v".to_vec()));
    ok(
        &mut c,
        &[b"RESTORE", b"idle", b"0", &good, b"IDLETIME", b"1000"],
    );
    let Value::Int(idle) = ok(&mut c, &[b"OBJECT", b"IDLETIME", b"idle"]) else {
        panic!()
    };
    assert!((1000..=1002).contains(&idle), "{idle}");
    ok(
        &mut c,
        &[b"CONFIG", b"SET", b"maxmemory-policy", b"allkeys-lfu"],
    );
    ok(&mut c, &[b"RESTORE", b"freq", b"0", &good, b"FREQ", b"77"]);
    assert_eq!(ok(&mut c, &[b"OBJECT", b"FREQ", b"freq"]), Value::Int(77));
}

#[test]
fn restore_of_a_big_value_is_all_or_nothing_to_readers() {
    // A reader polling while a 200,000-element list is restored sees the
    // key absent or whole, never part of it.
    let server = Respited::start(&[]);
    let items: Vec<Vec<u8>> = (0..200_000).map(|i| format!("e{i}").into_bytes()).collect();
    let payload = respite_rdb::encode_dump(&respite_rdb::Value::List(items));
    let port = server.port;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut c = con(port, false);
            let mut seen = std::collections::BTreeSet::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Value::Int(n) = ok(&mut c, &[b"LLEN", b"big"]) {
                    seen.insert(n);
                }
            }
            seen
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    let mut c = con(port, false);
    ok(&mut c, &[b"RESTORE", b"big", b"0", &payload]);
    std::thread::sleep(Duration::from_millis(50));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let seen = watcher.join().unwrap();
    assert!(seen.iter().all(|&n| n == 0 || n == 200_000), "{seen:?}");
    assert!(seen.contains(&200_000));
}

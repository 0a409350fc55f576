//! MIGRATE between respite and redis-server 7.0, both ways, and between
//! two respites: single key and KEYS forms, COPY, REPLACE, AUTH, AUTH2, the
//! destination database, TTLs, NOKEY, and the error replies (a target's
//! error, a target that does not answer) compared with redis-server's own
//! MIGRATE in the same situation.

mod common;

use common::{free_port, RedisServer, Respited};
use redis::{Connection, Value};

fn q(c: &mut Connection, args: &[&str]) -> redis::RedisResult<Value> {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c)
}

fn show(r: redis::RedisResult<Value>) -> String {
    match r {
        Ok(v) => format!("{v:?}"),
        Err(e) => format!("ERR {:?} {:?}", e.code(), e.detail()),
    }
}

fn ok(c: &mut Connection, args: &[&str]) -> Value {
    q(c, args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Fills a source with one key of each type.
fn fill(c: &mut Connection) {
    ok(c, &["FLUSHALL"]);
    ok(c, &["SET", "s", "hello"]);
    ok(c, &["RPUSH", "l", "a", "b", "c"]);
    ok(c, &["HSET", "h", "f", "v", "g", "w"]);
    ok(c, &["SADD", "set", "1", "2", "x"]);
    ok(c, &["ZADD", "z", "1", "a", "2.5", "b"]);
    ok(c, &["XADD", "x", "1-1", "f", "v"]);
    ok(c, &["XGROUP", "CREATE", "x", "g", "0"]);
    ok(c, &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "x", ">"]);
    ok(c, &["SET", "ttl", "v", "PX", "100000"]);
}

const KEYS: [&str; 7] = ["s", "l", "h", "set", "z", "x", "ttl"];

fn dump(c: &mut Connection, key: &str) -> String {
    // The value as the type's own reads give it (DUMP bytes differ
    // between the servers by design).
    let t = show(q(c, &["TYPE", key]));
    let v = match t.as_str() {
        "Okay" => String::new(),
        _ if t.contains("string") => show(q(c, &["GET", key])),
        _ if t.contains("list") => show(q(c, &["LRANGE", key, "0", "-1"])),
        _ if t.contains("hash") => show(q(c, &["HGETALL", key])),
        _ if t.contains("zset") => show(q(c, &["ZRANGE", key, "0", "-1", "WITHSCORES"])),
        _ if t.contains("set") => show(q(c, &["SORT", key, "ALPHA"])),
        _ if t.contains("stream") => format!(
            "{} {}",
            show(q(c, &["XRANGE", key, "-", "+"])),
            show(q(c, &["XINFO", "GROUPS", key]))
        ),
        _ => String::new(),
    };
    format!("{t} {v}")
}

/// Runs the same MIGRATE scenario from `src` to `dst`, returning the
/// replies and what each side then holds.
fn scenario(src: &mut Connection, dst: &mut Connection, dst_port: u16) -> Vec<String> {
    let port = dst_port.to_string();
    let mut out = Vec::new();
    fill(src);
    ok(dst, &["FLUSHALL"]);
    let mut run = |src: &mut Connection, args: &[&str]| {
        let mut full = vec!["MIGRATE", "127.0.0.1", &port];
        full.extend_from_slice(args);
        out.push(show(q(src, &full)));
    };
    run(src, &["s", "0", "5000"]);
    run(src, &["missing", "0", "5000"]);
    run(src, &["", "0", "5000", "KEYS", "l", "missing", "h"]);
    run(src, &["", "0", "5000", "KEYS", "nope", "nada"]);
    run(src, &["set", "3", "5000", "COPY"]);
    run(src, &["set", "3", "5000", "COPY"]);
    run(src, &["set", "3", "5000", "COPY", "REPLACE"]);
    run(src, &["", "0", "5000", "REPLACE", "KEYS", "z", "x", "ttl"]);
    run(src, &["s", "0", "5000", "KEYS", "l"]);
    run(src, &["s", "0", "5000", "AUTH"]);
    run(src, &["s", "0", "5000", "AUTH2", "u"]);
    run(src, &["s", "0", "5000", "BOGUS"]);
    run(src, &["s", "x", "5000"]);
    run(src, &["s", "0", "x"]);
    // The target needs no password: AUTH fails there.
    ok(src, &["SET", "again", "1"]);
    run(src, &["again", "0", "5000", "AUTH", "secret"]);
    run(src, &["again", "0", "5000", "AUTH2", "default", "secret"]);
    for key in KEYS.iter().chain(&["again"]) {
        out.push(format!("src {key}: {}", dump(src, key)));
    }
    for key in KEYS.iter().chain(&["again"]) {
        out.push(format!("dst {key}: {}", dump(dst, key)));
    }
    ok(dst, &["SELECT", "3"]);
    out.push(format!("dst db3 set: {}", dump(dst, "set")));
    ok(dst, &["SELECT", "0"]);
    let Value::Int(pttl) = ok(dst, &["PTTL", "ttl"]) else {
        panic!("PTTL")
    };
    assert!((90_000..=100_000).contains(&pttl), "{pttl}");
    out
}

#[test]
fn migrate_behaves_as_redis_in_every_direction() {
    let Some(redis_a) = RedisServer::start() else {
        return;
    };
    let Some(redis_b) = RedisServer::start() else {
        return;
    };
    let ours_a = Respited::start(&[]);
    let ours_b = Respited::start(&[]);
    let expected = scenario(&mut redis_a.client(), &mut redis_b.client(), redis_b.port);
    let to_redis = scenario(&mut ours_a.client(), &mut redis_b.client(), redis_b.port);
    assert_eq!(to_redis, expected, "respite → redis");
    let from_redis = scenario(&mut redis_a.client(), &mut ours_b.client(), ours_b.port);
    assert_eq!(from_redis, expected, "redis → respite");
    let between = scenario(&mut ours_a.client(), &mut ours_b.client(), ours_b.port);
    assert_eq!(between, expected, "respite → respite");
    let to_itself = {
        let mut c = ours_a.client();
        ok(&mut c, &["SET", "self", "v"]);
        let port = ours_a.port.to_string();
        show(q(
            &mut c,
            &["MIGRATE", "127.0.0.1", &port, "self", "1", "5000"],
        ))
    };
    assert_eq!(to_itself, format!("{:?}", Value::Okay));
}

#[test]
fn migrate_authenticates_with_auth_and_auth2() {
    let Some(target) = RedisServer::start() else {
        return;
    };
    ok(
        &mut target.client(),
        &["CONFIG", "SET", "requirepass", "pw"],
    );
    let ours = Respited::start(&[]);
    let mut c = ours.client();
    let port = target.port.to_string();
    ok(&mut c, &["SET", "a", "1"]);
    ok(&mut c, &["SET", "b", "2"]);
    ok(&mut c, &["SET", "c", "3"]);
    let no_auth = show(q(
        &mut c,
        &["MIGRATE", "127.0.0.1", &port, "a", "0", "5000"],
    ));
    assert_eq!(
        no_auth,
        "ERR Some(\"ERR\") Some(\"Target instance replied with error: NOAUTH Authentication required.\")"
    );
    assert_eq!(ok(&mut c, &["EXISTS", "a"]), Value::Int(1));
    let wrong = show(q(
        &mut c,
        &[
            "MIGRATE",
            "127.0.0.1",
            &port,
            "a",
            "0",
            "5000",
            "AUTH",
            "nope",
        ],
    ));
    assert!(
        wrong.contains("Target instance replied with error: WRONGPASS"),
        "{wrong}"
    );
    assert_eq!(
        ok(
            &mut c,
            &[
                "MIGRATE",
                "127.0.0.1",
                &port,
                "a",
                "0",
                "5000",
                "AUTH",
                "pw"
            ]
        ),
        Value::Okay
    );
    assert_eq!(
        ok(
            &mut c,
            &[
                "MIGRATE",
                "127.0.0.1",
                &port,
                "",
                "0",
                "5000",
                "AUTH2",
                "default",
                "pw",
                "KEYS",
                "b",
                "c"
            ]
        ),
        Value::Okay
    );
    assert_eq!(ok(&mut c, &["DBSIZE"]), Value::Int(0));
    let mut t = target.client();
    ok(&mut t, &["AUTH", "pw"]);
    let got: Vec<String> = redis::cmd("MGET")
        .arg(&["a", "b", "c"])
        .query(&mut t)
        .unwrap();
    assert_eq!(got, ["1", "2", "3"]);
}

#[test]
fn migrate_to_nowhere_is_an_ioerr_as_in_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let ours = Respited::start(&[]);
    let dead = free_port().to_string();
    let mut replies = Vec::new();
    for mut c in [redis.client(), ours.client()] {
        ok(&mut c, &["SET", "k", "v"]);
        replies.push(show(q(
            &mut c,
            &["MIGRATE", "127.0.0.1", &dead, "k", "0", "200"],
        )));
        replies.push(show(q(&mut c, &["EXISTS", "k"])));
    }
    assert_eq!(replies[0], replies[2]);
    assert_eq!(replies[1], replies[3]);
    assert!(replies[2].contains("IOERR"), "{replies:?}");
}

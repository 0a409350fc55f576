//! Streams with real clients on real connections: the patterns job queues
//! use (a result written with XADD inside MULTI and read back with
//! XREVRANGE and XREAD BLOCK, as python-rq does; an event log capped with
//! `MAXLEN ~` and followed with `XREAD BLOCK $`, as BullMQ does), blocked
//! XREADGROUP consumers woken, and errored when their stream or group
//! goes, on respited and (where installed) redis-server alike; and a
//! consumer group's deliveries across a SIGKILL, respite's own.

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::{client_for, info_field, RedisServer, Respited};
use redis::Value;

fn servers() -> (Respited, Option<RedisServer>, Vec<(&'static str, u16)>) {
    let respite = Respited::start(&[]);
    let redis = RedisServer::start();
    let mut ports = vec![("respite", respite.port)];
    if let Some(r) = &redis {
        ports.push(("redis-server", r.port));
    }
    (respite, redis, ports)
}

fn wait_blocked(port: u16, n: f64) {
    let mut con = client_for(port);
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_field(&mut con, "clients", "blocked_clients") != n {
        assert!(Instant::now() < deadline, "never saw {n} blocked clients");
        thread::sleep(Duration::from_millis(5));
    }
}

fn run(port: u16, args: &[&str]) -> redis::RedisResult<Value> {
    let mut con = client_for(port);
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query::<Value>(&mut con)
}

fn spawn(port: u16, args: &[&str]) -> thread::JoinHandle<redis::RedisResult<Value>> {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    thread::spawn(move || {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        run(port, &refs)
    })
}

/// An XREAD or XREADGROUP reply: each stream with its entries.
type Read = Vec<(String, Vec<(String, Vec<String>)>)>;

fn text(v: &Value) -> String {
    format!("{v:?}")
}

/// python-rq's job result: XADD inside the job-finishing MULTI with an
/// EXPIRE, read back with XREVRANGE COUNT 1, and a waiter in XREAD BLOCK
/// woken by the next result.
#[test]
fn job_results_in_multi_and_blocking_reads() {
    let (_respite, _redis, ports) = servers();
    for (name, port) in ports {
        let mut con = client_for(port);
        let (id,): (String,) = redis::pipe()
            .atomic()
            .cmd("XADD")
            .arg("rq:results:j1")
            .arg("*")
            .arg("type")
            .arg("1")
            .arg("return_value")
            .arg("42")
            .cmd("EXPIRE")
            .arg("rq:results:j1")
            .arg(500)
            .ignore()
            .query(&mut con)
            .expect(name);
        let last: Vec<(String, Vec<String>)> = redis::cmd("XREVRANGE")
            .arg("rq:results:j1")
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(1)
            .query(&mut con)
            .expect(name);
        assert_eq!(last[0].0, id, "{name}");
        assert_eq!(last[0].1, vec!["type", "1", "return_value", "42"], "{name}");
        let waiter = spawn(
            port,
            &["XREAD", "BLOCK", "5000", "STREAMS", "rq:results:j1", &id],
        );
        wait_blocked(port, 1.0);
        let _: String = redis::cmd("XADD")
            .arg("rq:results:j1")
            .arg("*")
            .arg("type")
            .arg("2")
            .query(&mut con)
            .expect(name);
        let got = text(&waiter.join().expect("waiter").expect(name));
        assert!(
            got.contains("rq:results:j1") && got.contains("\"2\""),
            "{name}: {got}"
        );
        // A timeout answers a null array.
        let t = run(
            port,
            &["XREAD", "BLOCK", "50", "STREAMS", "rq:results:j1", "$"],
        );
        assert_eq!(t.expect(name), Value::Nil, "{name}");
    }
}

/// BullMQ's event log: XADD with `MAXLEN ~` from many writes, followed
/// by a listener in `XREAD BLOCK ... $`; the approximate cap leaves the
/// same length on both servers.
#[test]
fn capped_event_log_and_dollar_listener() {
    let (_respite, _redis, ports) = servers();
    let mut lengths = Vec::new();
    for (name, port) in ports {
        let mut con = client_for(port);
        let listener = spawn(
            port,
            &["XREAD", "BLOCK", "0", "STREAMS", "bull:q:events", "$"],
        );
        wait_blocked(port, 1.0);
        for i in 0..1000 {
            let _: String = redis::cmd("XADD")
                .arg("bull:q:events")
                .arg("MAXLEN")
                .arg("~")
                .arg(100)
                .arg("*")
                .arg("event")
                .arg("added")
                .arg("jobId")
                .arg(i)
                .query(&mut con)
                .expect(name);
        }
        let got = text(&listener.join().expect("listener").expect(name));
        assert!(
            got.contains("\"added\"") && got.contains("\"0\""),
            "{name}: {got}"
        );
        let len: i64 = redis::cmd("XLEN")
            .arg("bull:q:events")
            .query(&mut con)
            .unwrap();
        lengths.push(len);
    }
    assert!(lengths.iter().all(|l| *l == lengths[0]), "{lengths:?}");
    assert_eq!(lengths[0], 100);
}

/// A blocked XREADGROUP is served by the next XADD (and the entry is then
/// pending for it), and is answered with an error when its group is
/// destroyed or its stream deleted; CLIENT UNBLOCK ends a wait.
#[test]
fn blocked_group_readers() {
    let (_respite, _redis, ports) = servers();
    for (name, port) in ports {
        let mut con = client_for(port);
        let _: String = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg("s")
            .arg("g")
            .arg("$")
            .arg("MKSTREAM")
            .query(&mut con)
            .unwrap();
        let reader = spawn(
            port,
            &[
                "XREADGROUP",
                "GROUP",
                "g",
                "alice",
                "BLOCK",
                "0",
                "STREAMS",
                "s",
                ">",
            ],
        );
        wait_blocked(port, 1.0);
        let _: String = redis::cmd("XADD")
            .arg("s")
            .arg("7-0")
            .arg("f")
            .arg("v")
            .query(&mut con)
            .unwrap();
        let got = text(&reader.join().unwrap().expect(name));
        assert!(got.contains("7-0"), "{name}: {got}");
        let pending = text(&run(port, &["XPENDING", "s", "g"]).unwrap());
        assert!(pending.contains("alice"), "{name}: {pending}");

        let reader = spawn(
            port,
            &[
                "XREADGROUP",
                "GROUP",
                "g",
                "bob",
                "BLOCK",
                "0",
                "STREAMS",
                "s",
                ">",
            ],
        );
        wait_blocked(port, 1.0);
        let _: i64 = redis::cmd("XGROUP")
            .arg("DESTROY")
            .arg("s")
            .arg("g")
            .query(&mut con)
            .unwrap();
        let e = reader.join().unwrap().expect_err(name);
        assert!(e.to_string().contains("NOGROUP"), "{name}: {e}");

        let _: String = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg("s")
            .arg("g")
            .arg("$")
            .query(&mut con)
            .unwrap();
        let reader = spawn(
            port,
            &[
                "XREADGROUP",
                "GROUP",
                "g",
                "bob",
                "BLOCK",
                "0",
                "STREAMS",
                "s",
                ">",
            ],
        );
        wait_blocked(port, 1.0);
        let _: i64 = redis::cmd("DEL").arg("s").query(&mut con).unwrap();
        let e = reader.join().unwrap().expect_err(name);
        assert!(e.to_string().contains("no longer exists"), "{name}: {e}");

        // XREAD on a deleted stream keeps waiting, until CLIENT UNBLOCK.
        let mut waiter_con = client_for(port);
        let id: i64 = redis::cmd("CLIENT")
            .arg("ID")
            .query(&mut waiter_con)
            .unwrap();
        let waiter = thread::spawn(move || {
            redis::cmd("XREAD")
                .arg("BLOCK")
                .arg(0)
                .arg("STREAMS")
                .arg("x")
                .arg("$")
                .query::<Value>(&mut waiter_con)
        });
        wait_blocked(port, 1.0);
        let _: i64 = redis::cmd("DEL").arg("x").query(&mut con).unwrap();
        let _: i64 = redis::cmd("CLIENT")
            .arg("UNBLOCK")
            .arg(id)
            .query(&mut con)
            .unwrap();
        assert_eq!(waiter.join().unwrap().expect(name), Value::Nil, "{name}");
    }
}

/// Deliveries are durable: every entry XREADGROUP handed out before a
/// SIGKILL is, after the restart, either acknowledged or in the pending
/// list of the consumer it went to, and never delivered again as new.
#[test]
fn group_deliveries_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let mut respite = Respited::start_in(dir.path(), &[]);
    let mut con = respite.client();
    let _: String = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("q")
        .arg("g")
        .arg("0")
        .arg("MKSTREAM")
        .query(&mut con)
        .unwrap();
    for i in 0..200 {
        let _: String = redis::cmd("XADD")
            .arg("q")
            .arg("*")
            .arg("n")
            .arg(i)
            .query(&mut con)
            .unwrap();
    }
    let mut delivered = Vec::new();
    let mut acked = Vec::new();
    for _ in 0..50 {
        let got: Read = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg("g")
            .arg("c")
            .arg("COUNT")
            .arg(3)
            .arg("STREAMS")
            .arg("q")
            .arg(">")
            .query(&mut con)
            .unwrap();
        for (id, _) in &got[0].1 {
            delivered.push(id.clone());
        }
        let first = got[0].1[0].0.clone();
        let n: i64 = redis::cmd("XACK")
            .arg("q")
            .arg("g")
            .arg(&first)
            .query(&mut con)
            .unwrap();
        assert_eq!(n, 1);
        acked.push(first);
    }
    respite.kill();
    let respite = Respited::start_in(dir.path(), &[]);
    let mut con = respite.client();
    let pending: Vec<(String, String, i64, i64)> = redis::cmd("XPENDING")
        .arg("q")
        .arg("g")
        .arg("-")
        .arg("+")
        .arg(1000)
        .query(&mut con)
        .unwrap();
    let pending: Vec<String> = pending.into_iter().map(|p| p.0).collect();
    assert_eq!(pending.len() + acked.len(), delivered.len());
    for id in &delivered {
        assert!(
            pending.contains(id) != acked.contains(id),
            "{id} is neither pending nor acknowledged (or both)"
        );
    }
    // The next new entry is the first never delivered.
    let next: Read = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg("g")
        .arg("c")
        .arg("COUNT")
        .arg(1)
        .arg("STREAMS")
        .arg("q")
        .arg(">")
        .query(&mut con)
        .unwrap();
    assert!(!delivered.contains(&next[0].1[0].0));
    assert_eq!(next[0].1[0].1, vec!["n".to_string(), "150".to_string()]);
}

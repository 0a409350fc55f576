//! respite as a replica of a real redis-server 7.0 master: the full
//! synchronization of a populated master (disk-based and diskless, with
//! `masteruser`/`masterauth`), the live stream under a write load of every
//! type (scripts' effects, transactions, expiries, pops), the link broken
//! on the master (`CLIENT KILL TYPE replica`) and continued with `PSYNC`
//! (`+CONTINUE`, counted in the master's `sync_partial_ok`), respite
//! restarted and continued from the point stored with its data, the
//! replica's refusals (`READONLY`), INFO replication and ROLE, and the
//! promotion (`REPLICAOF NO ONE`); both datasets compared key by key with
//! DEBUG DIGEST-VALUE and PEXPIRETIME, and whole with DEBUG DIGEST. A fake
//! master sending garbage in the middle of a MULTI checks that the error
//! is clear, nothing of the broken transaction is applied, and the link
//! continues from the last whole command.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use common::replication::{assert_same, con_db, info_text, populate, run_load, wait_link_up};
use common::{info_field, RedisServer, Respited};
use redis::Connection;

/// A redis-server master that allows DEBUG, with a backlog large enough
/// for a restart of respite under load.
fn master(extra: &[&str]) -> Option<RedisServer> {
    let mut args = vec![
        "--enable-debug-command",
        "yes",
        "--repl-backlog-size",
        "64mb",
    ];
    args.extend_from_slice(extra);
    RedisServer::start_with(&args)
}

/// A respite configuration in `dir` with DEBUG allowed and `more`.
fn config(dir: &std::path::Path, more: &str) -> String {
    let conf = dir.join("respite.toml");
    std::fs::write(&conf, format!("enable_debug_command = \"yes\"\n{more}")).unwrap();
    conf.to_str().unwrap().to_string()
}

/// Lets the master's sweep delete what expired, then waits until respite
/// applied everything the master sent: its `slave_repl_offset` reaches
/// the master's `master_repl_offset`. (WAIT on the master would not do:
/// redis waits for the offset of the asking client's own last write.)
fn settle(master: &mut Connection, replica: &mut Connection) {
    std::thread::sleep(Duration::from_millis(600));
    let target = info_field(master, "replication", "master_repl_offset");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let applied = info_field(replica, "replication", "slave_repl_offset");
        if applied >= target {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "respite applied {applied} of the master's {target} bytes"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One request on a raw socket, its reply's first line.
fn raw_line(port: u16, request: &[u8]) -> String {
    let mut s = common::raw_for(port);
    s.write_all(request).unwrap();
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).unwrap();
    line
}

#[test]
fn respite_follows_a_redis_master_through_breaks_and_restarts_then_takes_over() {
    let Some(master) = master(&["--repl-diskless-sync", "no"]) else {
        return;
    };
    populate(master.port, 300);
    let dir = tempfile::tempdir().unwrap();
    let conf = config(
        dir.path(),
        &format!("replicaof = \"127.0.0.1 {}\"\n", master.port),
    );
    let mut replica = Respited::start_in(dir.path(), &["--config", &conf]);
    let mut r = replica.client();
    let text = wait_link_up(&mut r, Duration::from_secs(60));
    for field in [
        "role:slave",
        &format!("master_host:127.0.0.1\r\nmaster_port:{}", master.port),
        "master_last_io_seconds_ago:",
        "slave_read_repl_offset:",
        "slave_repl_offset:",
        "slave_read_only:1",
    ] {
        assert!(
            text.contains(field),
            "INFO replication lacks {field:?}: {text}"
        );
    }
    let mut m = master.client();
    settle(&mut m, &mut r);
    assert_same(master.port, replica.port);
    assert_eq!(info_field(&mut m, "stats", "sync_full"), 1.0);
    // The master's history is the replica's: same ID, same offset.
    let m_text = info_text(&mut m, "replication");
    let r_text = info_text(&mut r, "replication");
    let field = |text: &str, name: &str| -> String {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    assert_eq!(
        field(&m_text, "master_replid"),
        field(&r_text, "master_replid")
    );
    assert_eq!(
        field(&m_text, "master_repl_offset"),
        field(&r_text, "slave_repl_offset")
    );
    // A replica refuses clients' writes with redis's text, scripts' too.
    assert_eq!(
        raw_line(replica.port, b"SET x 1\r\n"),
        "-READONLY You can't write against a read only replica.\r\n"
    );
    assert_eq!(
        raw_line(
            replica.port,
            b"EVAL \"return redis.call('SET','x','1')\" 0\r\n"
        ),
        "-READONLY You can't write against a read only replica. script: \
         131b5f2ed4a6e4f431cc21897ae043d687859f08, on @user_script:1.\r\n"
    );
    let role: redis::Value = redis::cmd("ROLE").query(&mut r).unwrap();
    let role = format!("{role:?}");
    assert!(
        role.contains("slave")
            && role.contains("connected")
            && role.contains(&master.port.to_string()),
        "ROLE: {role}"
    );

    // The link broken on the master while writes go on: continued.
    let master_port = master.port;
    let ops = run_load(master.port, 3, 4, || {
        std::thread::sleep(Duration::from_millis(1500));
        let mut m = con_db(master_port, 0);
        let killed: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("replica")
            .query(&mut m)
            .unwrap();
        assert_eq!(killed, 1);
    });
    assert!(ops > 1000, "the load ran ({ops} operations)");
    wait_link_up(&mut r, Duration::from_secs(30));
    settle(&mut m, &mut r);
    assert_same(master.port, replica.port);
    assert_eq!(info_field(&mut m, "stats", "sync_partial_ok"), 1.0);
    assert_eq!(info_field(&mut m, "stats", "sync_full"), 1.0);

    // respite restarted while writes go on: it continues from the point
    // stored with its data.
    let dir_path = dir.path().to_path_buf();
    let conf2 = conf.clone();
    let mut restarted = None;
    run_load(master.port, 3, 3, || {
        std::thread::sleep(Duration::from_millis(1000));
        assert!(replica.terminate().success());
        std::thread::sleep(Duration::from_millis(500));
        restarted = Some(Respited::start_in(&dir_path, &["--config", &conf2]));
    });
    let replica = restarted.unwrap();
    replica.wait_log("partial resynchronization", Duration::from_secs(30));
    let mut r = replica.client();
    wait_link_up(&mut r, Duration::from_secs(30));
    settle(&mut m, &mut r);
    assert_same(master.port, replica.port);
    assert_eq!(info_field(&mut m, "stats", "sync_partial_ok"), 2.0);
    assert_eq!(info_field(&mut m, "stats", "sync_full"), 1.0);

    // Promotion: the data stays, writes are taken, ROLE and INFO say
    // master, and the master's later writes no longer arrive.
    let ok: String = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut r)
        .unwrap();
    assert_eq!(ok, "OK");
    let _: () = redis::cmd("SET")
        .arg("after")
        .arg("1")
        .query(&mut m)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("mine")
        .arg("1")
        .query(&mut r)
        .unwrap();
    let role: redis::Value = redis::cmd("ROLE").query(&mut r).unwrap();
    assert!(format!("{role:?}").contains("master"), "ROLE: {role:?}");
    assert!(info_text(&mut r, "replication").contains("role:master"));
    std::thread::sleep(Duration::from_millis(300));
    let after: Option<String> = redis::cmd("GET").arg("after").query(&mut r).unwrap();
    assert_eq!(after, None);
    let _: () = redis::cmd("DEL").arg("mine").query(&mut r).unwrap();
    let _: () = redis::cmd("DEL").arg("after").query(&mut m).unwrap();
    assert_same(master.port, replica.port);
}

#[test]
fn a_diskless_master_with_an_acl_user_replaces_what_respite_held() {
    let Some(master) = master(&[
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
    ]) else {
        return;
    };
    populate(master.port, 200);
    let mut m = master.client();
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("repl")
        .arg("on")
        .arg(">s3cret")
        .arg("+@all")
        .arg("~*")
        .query(&mut m)
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let conf = config(dir.path(), "");
    let replica = Respited::start_in(dir.path(), &["--config", &conf]);
    let mut r = replica.client();
    // What respite held before is replaced by the master's data.
    let _: () = redis::cmd("SET")
        .arg("local-only")
        .arg("1")
        .query(&mut r)
        .unwrap();
    // A wrong password: the link does not come up, the log says why.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("masteruser")
        .arg("repl")
        .query(&mut r)
        .unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("masterauth")
        .arg("wrong")
        .query(&mut r)
        .unwrap();
    let ok: String = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(master.port)
        .query(&mut r)
        .unwrap();
    assert_eq!(ok, "OK");
    replica.wait_log("unable to AUTH to MASTER", Duration::from_secs(20));
    let role: redis::Value = redis::cmd("ROLE").query(&mut r).unwrap();
    assert!(format!("{role:?}").contains("slave"), "ROLE: {role:?}");
    assert!(info_text(&mut r, "replication").contains("master_link_status:down"));
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("masterauth")
        .arg("s3cret")
        .query(&mut r)
        .unwrap();
    assert_eq!(
        raw_line(
            replica.port,
            format!("REPLICAOF 127.0.0.1 {}\r\n", master.port).as_bytes()
        ),
        "+OK Already connected to specified master\r\n"
    );
    wait_link_up(&mut r, Duration::from_secs(60));
    settle(&mut m, &mut r);
    assert_same(master.port, replica.port);
    let gone: Option<String> = redis::cmd("GET").arg("local-only").query(&mut r).unwrap();
    assert_eq!(gone, None);
    // And the stream after a diskless sync.
    run_load(master.port, 2, 2, || {});
    settle(&mut m, &mut r);
    assert_same(master.port, replica.port);
    assert_eq!(
        raw_line(replica.port, b"REPLICAOF 127.0.0.1 notaport\r\n"),
        "-ERR Invalid master port\r\n"
    );
}

/// A fake master: answers the handshake, sends `rdb` after
/// `+FULLRESYNC`, or continues; the test then writes the stream.
struct FakeMaster {
    listener: TcpListener,
}

const REPLID: &str = "0123456789abcdef0123456789abcdef01234567";

impl FakeMaster {
    /// Accepts a link and reads its handshake up to PSYNC; answers
    /// everything before PSYNC with +PONG / +OK, and returns the socket
    /// and PSYNC's arguments.
    fn accept(&self) -> (TcpStream, Vec<String>) {
        let (s, _) = self.listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut reader = BufReader::new(s.try_clone().unwrap());
        let mut out = s.try_clone().unwrap();
        loop {
            let args = read_command(&mut reader);
            match args[0].to_ascii_uppercase().as_str() {
                "PING" => out.write_all(b"+PONG\r\n").unwrap(),
                "PSYNC" => return (s, args[1..].to_vec()),
                _ => out.write_all(b"+OK\r\n").unwrap(),
            }
        }
    }
}

fn read_command(reader: &mut impl BufRead) -> Vec<String> {
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let n: usize = line.trim()[1..].parse().expect("a multibulk");
    (0..n)
        .map(|_| {
            let mut len = String::new();
            reader.read_line(&mut len).unwrap();
            let len: usize = len.trim()[1..].parse().unwrap();
            let mut buf = vec![0; len + 2];
            reader.read_exact(&mut buf).unwrap();
            String::from_utf8_lossy(&buf[..len]).into_owned()
        })
        .collect()
}

fn cmd(args: &[&str]) -> Vec<u8> {
    common::encode(args)
}

#[test]
fn a_master_sending_garbage_mid_stream_leaves_nothing_half_applied() {
    let fake = FakeMaster {
        listener: TcpListener::bind("127.0.0.1:0").unwrap(),
    };
    let port = fake.listener.local_addr().unwrap().port();
    let replica = Respited::start(&["--replicaof", &format!("127.0.0.1 {port}")]);
    let (mut s, psync) = fake.accept();
    assert_eq!(psync, ["?", "-1"]);
    // An RDB holding one key, sent disk-based.
    let mut rdb = respite_rdb::RdbWriter::new(Vec::new(), &[]).unwrap();
    rdb.select_db(0, 1, 0).unwrap();
    rdb.entry(
        0,
        b"loaded",
        &respite_rdb::Value::String(b"yes".to_vec()),
        None,
    )
    .unwrap();
    let rdb = rdb.finish().unwrap();
    s.write_all(format!("+FULLRESYNC {REPLID} 1000\r\n${}\r\n", rdb.len()).as_bytes())
        .unwrap();
    s.write_all(&rdb).unwrap();
    let first = [cmd(&["SELECT", "0"]), cmd(&["SET", "a", "1"])].concat();
    s.write_all(&first).unwrap();
    // A transaction cut by garbage: none of it may be applied.
    s.write_all(&cmd(&["MULTI"])).unwrap();
    s.write_all(&cmd(&["SET", "b", "2"])).unwrap();
    s.write_all(b"*2\r\n+garbage\r\n").unwrap();
    replica.wait_log("protocol error from the master", Duration::from_secs(20));
    // The link comes back asking for what follows the last whole command.
    let (mut s, psync) = fake.accept();
    let expected = 1000 + first.len() as i64;
    assert_eq!(psync, [REPLID.to_string(), (expected + 1).to_string()]);
    let mut r = replica.client();
    let a: Option<String> = redis::cmd("GET").arg("a").query(&mut r).unwrap();
    let b: Option<String> = redis::cmd("GET").arg("b").query(&mut r).unwrap();
    let loaded: Option<String> = redis::cmd("GET").arg("loaded").query(&mut r).unwrap();
    assert_eq!(
        (a.as_deref(), b, loaded.as_deref()),
        (Some("1"), None, Some("yes"))
    );
    // Continued: the whole transaction, then an acknowledgement asked for.
    s.write_all(b"+CONTINUE\r\n").unwrap();
    let tx = [
        cmd(&["MULTI"]),
        cmd(&["SET", "b", "2"]),
        cmd(&["INCR", "a"]),
        cmd(&["EXEC"]),
    ]
    .concat();
    s.write_all(&tx).unwrap();
    s.write_all(&cmd(&["REPLCONF", "GETACK", "*"])).unwrap();
    let mut reader = BufReader::new(s.try_clone().unwrap());
    let want = (expected + tx.len() as i64).to_string();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let ack = read_command(&mut reader);
        assert_eq!(&ack[..2], ["REPLCONF", "ACK"]);
        if ack[2] == want {
            break;
        }
        assert!(Instant::now() < deadline, "no ACK of {want}: {ack:?}");
    }
    let a: Option<String> = redis::cmd("GET").arg("a").query(&mut r).unwrap();
    let b: Option<String> = redis::cmd("GET").arg("b").query(&mut r).unwrap();
    assert_eq!((a.as_deref(), b.as_deref()), (Some("2"), Some("2")));
    let text = info_text(&mut r, "replication");
    assert!(text.contains(&format!("master_replid:{REPLID}")), "{text}");
}

fn q<T: redis::FromRedisValue>(c: &mut Connection, args: &[&str]) -> T {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

const LIB1: &str = "#!lua name=lib1\nredis.register_function{function_name='get1', callback=function(keys) return redis.call('get', keys[1]) end, flags={'no-writes'}}";
const LIB2: &str = "#!lua name=lib2\nredis.register_function('incr2', function(keys) return redis.call('incr', keys[1]) end)\nredis.register_function{function_name='ro2', callback=function() return 'two' end, flags={'no-writes'}}";
const LIB3: &str = "#!lua name=lib3\nredis.register_function{function_name='ro3', callback=function() return 'three' end, flags={'no-writes'}}";

/// FUNCTION LIST WITHCODE's libraries, each its name and code, in name
/// order (redis lists libraries and functions in its hash tables' order).
fn functions(c: &mut Connection) -> Vec<(String, String)> {
    let v: Vec<Vec<redis::Value>> = q(c, &["FUNCTION", "LIST", "WITHCODE"]);
    let text = |v: &redis::Value| match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        other => format!("{other:?}"),
    };
    let field = |lib: &[redis::Value], name: &str| {
        lib.chunks(2)
            .find(|kv| text(&kv[0]) == name)
            .map(|kv| text(&kv[1]))
            .unwrap_or_default()
    };
    let mut libs: Vec<(String, String)> = v
        .iter()
        .map(|lib| (field(lib, "library_name"), field(lib, "library_code")))
        .collect();
    libs.sort();
    libs
}

#[test]
fn functions_streams_and_messages_of_a_redis_master_are_applied_durably() {
    let Some(master) = master(&[]) else {
        return;
    };
    let mut m = master.client();
    // In the RDB of the full synchronization.
    let _: String = q(&mut m, &["FUNCTION", "LOAD", LIB1]);
    let _: () = q(&mut m, &["SET", "k", "v"]);
    let dir = tempfile::tempdir().unwrap();
    let conf = config(
        dir.path(),
        &format!("replicaof = \"127.0.0.1 {}\"\n", master.port),
    );
    let mut replica = Respited::start_in(dir.path(), &["--config", &conf]);
    let mut r = replica.client();
    wait_link_up(&mut r, Duration::from_secs(60));
    settle(&mut m, &mut r);
    assert_eq!(functions(&mut r), functions(&mut m));
    let got: String = q(&mut r, &["FCALL_RO", "get1", "1", "k"]);
    assert_eq!(got, "v");

    // A subscriber of respite hears the master's PUBLISH.
    let mut sub = replica.client();
    sub.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut ps = sub.as_pubsub();
    ps.subscribe("news").unwrap();

    // In the stream: LOAD, a function's effects, DELETE, RESTORE, FLUSH.
    let _: String = q(&mut m, &["FUNCTION", "LOAD", LIB2]);
    let n: i64 = q(&mut m, &["FCALL", "incr2", "1", "counter"]);
    assert_eq!(n, 1);
    let _: () = q(&mut m, &["FUNCTION", "DELETE", "lib1"]);
    let dump: Vec<u8> = q(&mut m, &["FUNCTION", "DUMP"]);
    let _: () = q(&mut m, &["FUNCTION", "FLUSH"]);
    let _: String = q(&mut m, &["FUNCTION", "LOAD", LIB3]);
    let _: () = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&dump)
        .query(&mut m)
        .unwrap();
    // Streams: approximate trims arrive as `=` with redis's LIMIT kept,
    // consumer groups as XCLAIM.
    for i in 1..=300 {
        let id = format!("1-{i}");
        let _: String = q(
            &mut m,
            &[
                "XADD", "s", "MAXLEN", "~", "10", "LIMIT", "100", &id, "f", "v",
            ],
        );
    }
    let _: () = q(&mut m, &["XGROUP", "CREATE", "s", "g", "0"]);
    let _: redis::Value = q(
        &mut m,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "COUNT",
            "3",
            "STREAMS",
            "s",
            ">",
        ],
    );
    let _: redis::Value = q(
        &mut m,
        &["XAUTOCLAIM", "s", "g", "d", "0", "0", "COUNT", "1"],
    );
    let _: i64 = q(&mut m, &["PUBLISH", "news", "from-the-master"]);
    let msg = ps.get_message().unwrap();
    assert_eq!(msg.get_payload::<String>().unwrap(), "from-the-master");
    drop(ps);
    settle(&mut m, &mut r);
    let stream_state = |c: &mut Connection| {
        let v: redis::Value = q(c, &["XPENDING", "s", "g", "-", "+", "10"]);
        let len: i64 = q(c, &["XLEN", "s"]);
        // The idle times differ; the IDs, consumers and counts do not.
        let text = format!("{v:?}");
        (
            len,
            text.matches("BulkString").count(),
            text.contains("\"d\""),
        )
    };
    assert_eq!(stream_state(&mut r), stream_state(&mut m));
    assert_eq!(functions(&mut r), functions(&mut m));
    let two: String = q(&mut r, &["FCALL_RO", "ro2", "0"]);
    assert_eq!(two, "two");
    let three: String = q(&mut r, &["FCALL_RO", "ro3", "0"]);
    assert_eq!(three, "three");
    assert_same(master.port, replica.port);

    // Stored with the data: a restart keeps them, and continues.
    assert!(replica.terminate().success());
    let replica = Respited::start_in(dir.path(), &["--config", &conf]);
    replica.wait_log("partial resynchronization", Duration::from_secs(30));
    let mut r = replica.client();
    assert_eq!(functions(&mut r), functions(&mut m));
    let _: () = q(&mut m, &["FUNCTION", "DELETE", "lib3"]);
    wait_link_up(&mut r, Duration::from_secs(30));
    settle(&mut m, &mut r);
    assert_eq!(functions(&mut r), functions(&mut m));
}

/// The fields of CLIENT LIST's lines that do not depend on the moment or
/// on which server answers: `flags`, `db`, `user`, and the address's host.
fn link_fields(c: &mut Connection, kind: &str) -> Vec<String> {
    let list: String = q(c, &["CLIENT", "LIST", "TYPE", kind]);
    list.lines()
        .map(|line| {
            line.split(' ')
                .filter(|f| {
                    ["flags=", "db=", "user=", "addr="]
                        .iter()
                        .any(|p| f.starts_with(p))
                })
                .map(|f| match f.strip_prefix("addr=") {
                    Some(a) => format!("host={}", a.rsplit_once(':').map_or(a, |(h, _)| h)),
                    None => f.to_string(),
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

#[test]
fn the_master_link_is_a_client_that_client_kill_ends_and_psync_continues() {
    let Some(master) = master(&[]) else {
        return;
    };
    let mut m = master.client();
    let _: () = q(&mut m, &["SET", "before", "1"]);
    let dir = tempfile::tempdir().unwrap();
    let conf = config(
        dir.path(),
        &format!("replicaof = \"127.0.0.1 {}\"\n", master.port),
    );
    let replica = Respited::start_in(dir.path(), &["--config", &conf]);
    let mut r = replica.client();
    wait_link_up(&mut r, Duration::from_secs(60));
    // A redis-server replica of the same master, to compare with.
    let port = master.port.to_string();
    let theirs = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port]).unwrap();
    let mut t = theirs.client();
    wait_link_up(&mut t, Duration::from_secs(30));
    let _: () = q(&mut m, &["SELECT", "3"]);
    let _: () = q(&mut m, &["SET", "in3", "1"]);
    settle(&mut m, &mut r);
    let ours = link_fields(&mut r, "master");
    assert_eq!(ours.len(), 1, "{ours:?}");
    assert_eq!(ours, link_fields(&mut t, "master"));
    assert_eq!(ours[0], "host=127.0.0.1 flags=M db=3 user=(superuser)");
    // The link's address is the master's.
    let list: String = q(&mut r, &["CLIENT", "LIST", "TYPE", "master"]);
    assert!(
        list.contains(&format!("addr=127.0.0.1:{} ", master.port)),
        "{list}"
    );
    assert!(link_fields(&mut r, "normal")
        .iter()
        .all(|l| !l.contains("flags=M")));

    // CLIENT KILL TYPE master ends the link; it comes back and continues.
    let killed: i64 = q(&mut r, &["CLIENT", "KILL", "TYPE", "master"]);
    assert_eq!(killed, 1);
    let theirs_killed: i64 = q(&mut t, &["CLIENT", "KILL", "TYPE", "master"]);
    assert_eq!(theirs_killed, 1);
    let _: () = q(&mut m, &["SELECT", "0"]);
    let _: () = q(&mut m, &["SET", "after-kill", "1"]);
    wait_link_up(&mut r, Duration::from_secs(30));
    settle(&mut m, &mut r);
    let got: Option<String> = q(&mut r, &["GET", "after-kill"]);
    assert_eq!(got.as_deref(), Some("1"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_field(&mut m, "stats", "sync_partial_ok") < 2.0 {
        assert!(Instant::now() < deadline, "no partial resynchronization");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(info_field(&mut m, "stats", "sync_full"), 2.0);

    // By its ID too.
    let list: String = q(&mut r, &["CLIENT", "LIST", "TYPE", "master"]);
    let id = list
        .split(' ')
        .find_map(|f| f.strip_prefix("id="))
        .unwrap()
        .to_string();
    let killed: i64 = q(&mut r, &["CLIENT", "KILL", "ID", &id]);
    assert_eq!(killed, 1);
    wait_link_up(&mut r, Duration::from_secs(30));
    settle(&mut m, &mut r);
    assert_same(master.port, replica.port);
}

//! Round trips against a real redis-server 7.0: every type in every
//! encoding Redis picks is DUMPed by Redis and decoded here, and encoded
//! here and RESTOREd into Redis, and the values compared with what Redis
//! answers for the keys; the encodings Redis no longer writes (ziplists,
//! zipmaps, text scores, quicklists of ziplists) are built by hand and
//! both Redis and this crate must read them the same; a whole RDB file
//! saved by Redis is read back, and one written here is loaded by Redis.
//!
//! The tests skip where redis-server is not installed, unless
//! `RESPITE_REQUIRE_REDIS=1`.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis::Connection;
use respite_rdb::{
    decode_dump, encode_dump, encode_dump_with_version, Error, RdbReader, RdbWriter, Value,
};

struct Redis {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Redis {
    /// Starts redis-server in a fresh directory, loading `rdb` if given.
    fn start(rdb: Option<&Path>) -> Option<Redis> {
        let found = Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            if std::env::var("RESPITE_REQUIRE_REDIS").is_ok_and(|v| v == "1") {
                panic!("redis-server not found but RESPITE_REQUIRE_REDIS=1");
            }
            eprintln!("skipping: redis-server not found");
            return None;
        }
        for _ in 0..5 {
            let dir = tempfile::tempdir().expect("tempdir");
            if let Some(src) = rdb {
                std::fs::copy(src, dir.path().join("dump.rdb")).expect("copy rdb");
            }
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .expect("free port");
            let child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args([
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dbfilename",
                    "dump.rdb",
                ])
                .args(["--enable-debug-command", "yes"])
                .args([
                    "--hash-max-listpack-entries",
                    "128",
                    "--zset-max-listpack-entries",
                    "128",
                ])
                .args([
                    "--set-max-intset-entries",
                    "512",
                    "--list-max-listpack-size",
                    "-2",
                ])
                .arg("--dir")
                .arg(dir.path())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn redis-server");
            let mut r = Redis { child, port, dir };
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                if r.child.try_wait().ok().flatten().is_some() {
                    break;
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    let mut c = r.con();
                    // Loading a file: wait until it is done.
                    let info: String = redis::cmd("INFO").arg("server").query(&mut c).unwrap();
                    let pid = format!("process_id:{}", r.child.id());
                    if info.lines().any(|l| l.trim() == pid) {
                        return Some(r);
                    }
                    break;
                }
                assert!(Instant::now() < deadline, "redis-server did not start");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        panic!("could not start redis-server");
    }

    fn con(&self) -> Connection {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match client.get_connection() {
                Ok(mut c) => {
                    if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                        return c;
                    }
                }
                Err(e) => assert!(Instant::now() < deadline, "connect: {e}"),
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn rdb_path(&self) -> PathBuf {
        self.dir.path().join("dump.rdb")
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn q<T: redis::FromRedisValue>(c: &mut Connection, args: &[&[u8]]) -> T {
    let mut cmd = redis::cmd(std::str::from_utf8(args[0]).unwrap());
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c)
        .unwrap_or_else(|e| panic!("{:?}: {e}", String::from_utf8_lossy(args[0])))
}

/// The value of `key` as Redis answers for it, in a canonical order
/// (sets and hashes sorted; sorted sets as ZRANGE gives them).
fn read_key(c: &mut Connection, key: &[u8]) -> Value {
    let t: String = q(c, &[b"TYPE", key]);
    match t.as_str() {
        "string" => Value::String(q(c, &[b"GET", key])),
        "list" => Value::List(q(c, &[b"LRANGE", key, b"0", b"-1"])),
        "set" => {
            let mut m: Vec<Vec<u8>> = q(c, &[b"SMEMBERS", key]);
            m.sort();
            Value::Set(m)
        }
        "hash" => {
            let flat: Vec<Vec<u8>> = q(c, &[b"HGETALL", key]);
            let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = flat
                .chunks(2)
                .map(|p| (p[0].clone(), p[1].clone()))
                .collect();
            pairs.sort();
            Value::Hash(pairs)
        }
        "zset" => {
            let flat: Vec<Vec<u8>> = q(c, &[b"ZRANGE", key, b"0", b"-1", b"WITHSCORES"]);
            Value::ZSet(
                flat.chunks(2)
                    .map(|p| (p[0].clone(), parse_score(&p[1])))
                    .collect(),
            )
        }
        other => panic!("unexpected type {other}"),
    }
}

fn parse_score(s: &[u8]) -> f64 {
    match s {
        b"inf" => f64::INFINITY,
        b"-inf" => f64::NEG_INFINITY,
        _ => std::str::from_utf8(s).unwrap().parse().unwrap(),
    }
}

/// `v` in the canonical order of [`read_key`].
fn canonical(v: &Value) -> Value {
    match v {
        Value::Set(m) => {
            let mut m = m.clone();
            m.sort();
            Value::Set(m)
        }
        Value::Hash(p) => {
            let mut p = p.clone();
            p.sort();
            Value::Hash(p)
        }
        Value::ZSet(p) => {
            let mut p = p.clone();
            p.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap().then_with(|| a.0.cmp(&b.0)));
            Value::ZSet(p)
        }
        other => other.clone(),
    }
}

fn encoding(c: &mut Connection, key: &[u8]) -> String {
    q(c, &[b"OBJECT", b"ENCODING", key])
}

fn dump(c: &mut Connection, key: &[u8]) -> Vec<u8> {
    let d: Option<Vec<u8>> = q(c, &[b"DUMP", key]);
    d.expect("key exists")
}

/// Fills `c` with one key per type and encoding; returns (key, expected
/// OBJECT ENCODING) for each.
fn populate(c: &mut Connection) -> Vec<(Vec<u8>, &'static str)> {
    let mut keys = Vec::new();
    let mut set = |c: &mut Connection, key: &str, enc: &'static str, cmds: Vec<Vec<Vec<u8>>>| {
        for cmd in cmds {
            let args: Vec<&[u8]> = cmd.iter().map(Vec::as_slice).collect();
            let _: redis::Value = q(c, &args);
        }
        assert_eq!(encoding(c, key.as_bytes()), enc, "encoding of {key}");
        keys.push((key.as_bytes().to_vec(), enc));
    };
    let b = |s: &str| s.as_bytes().to_vec();
    let cmd = |parts: &[&[u8]]| parts.iter().map(|p| p.to_vec()).collect::<Vec<_>>();

    // Strings.
    set(
        c,
        "s:emb",
        "embstr",
        vec![cmd(&[b"SET", b"s:emb", b"hello"])],
    );
    set(
        c,
        "s:empty",
        "embstr",
        vec![cmd(&[b"SET", b"s:empty", b""])],
    );
    for (k, v) in [
        ("s:i8", "-7"),
        ("s:i16", "3000"),
        ("s:i32", "-2000000000"),
        ("s:i64", "9223372036854775807"),
    ] {
        set(
            c,
            k,
            "int",
            vec![cmd(&[b"SET", k.as_bytes(), v.as_bytes()])],
        );
    }
    set(
        c,
        "s:lead0",
        "embstr",
        vec![cmd(&[b"SET", b"s:lead0", b"0012"])],
    );
    set(
        c,
        "s:lzf",
        "raw",
        vec![cmd(&[b"SET", b"s:lzf", "abcdefgh".repeat(500).as_bytes()])],
    );
    let noise: Vec<u8> = (0..3000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    set(
        c,
        "s:noise",
        "raw",
        vec![cmd(&[b"SET", b"s:noise", &noise])],
    );

    // Lists: one listpack node, many nodes, LZF-compressed nodes, plain
    // nodes, integers of every listpack width.
    let ints: Vec<Vec<u8>> = [
        0i64,
        127,
        128,
        -1,
        4095,
        -4096,
        4096,
        32767,
        -32768,
        32768,
        8388607,
        -8388608,
        8388608,
        2147483647,
        -2147483648,
        2147483648,
        i64::MAX,
        i64::MIN,
    ]
    .iter()
    .map(|i| i.to_string().into_bytes())
    .collect();
    let mut push = vec![b("RPUSH"), b("l:small")];
    push.extend(ints.iter().cloned());
    push.push(b("text"));
    push.push(vec![b'x'; 100]);
    push.push(vec![b'y'; 5000]);
    set(c, "l:small", "quicklist", vec![push]);
    let mut big = vec![b("RPUSH"), b("l:big")];
    big.extend((0..20000).map(|i| format!("element-{i}").into_bytes()));
    set(c, "l:big", "quicklist", vec![big]);
    let _: () = q(c, &[b"CONFIG", b"SET", b"list-compress-depth", b"1"]);
    let mut comp = vec![b("RPUSH"), b("l:compressed")];
    comp.extend((0..5000).map(|i| format!("compressible-element-{}", i % 7).into_bytes()));
    set(c, "l:compressed", "quicklist", vec![comp]);
    let _: () = q(c, &[b"CONFIG", b"SET", b"list-compress-depth", b"0"]);
    let _: redis::Value = q(c, &[b"DEBUG", b"QUICKLIST-PACKED-THRESHOLD", b"100"]);
    set(
        c,
        "l:plain",
        "quicklist",
        vec![cmd(&[
            b"RPUSH",
            b"l:plain",
            b"a",
            &[b'p'; 500],
            b"b",
            &[b'q'; 1000],
            b"c",
        ])],
    );
    let _: redis::Value = q(c, &[b"DEBUG", b"QUICKLIST-PACKED-THRESHOLD", b"1073741824"]);

    // Sets.
    set(
        c,
        "set:int16",
        "intset",
        vec![cmd(&[b"SADD", b"set:int16", b"1", b"-5", b"300"])],
    );
    set(
        c,
        "set:int32",
        "intset",
        vec![cmd(&[b"SADD", b"set:int32", b"1", b"100000"])],
    );
    set(
        c,
        "set:int64",
        "intset",
        vec![cmd(&[b"SADD", b"set:int64", b"1", b"-9223372036854775808"])],
    );
    set(
        c,
        "set:ht",
        "hashtable",
        vec![cmd(&[b"SADD", b"set:ht", b"a", b"b", b"12", b""])],
    );
    let mut many = vec![b("SADD"), b("set:bigint")];
    many.extend((0..1000).map(|i| (i * 3).to_string().into_bytes()));
    set(c, "set:bigint", "hashtable", vec![many]);

    // Hashes.
    set(
        c,
        "h:lp",
        "listpack",
        vec![cmd(&[
            b"HSET", b"h:lp", b"f1", b"v1", b"n", b"-123456", b"", b"empty",
        ])],
    );
    set(
        c,
        "h:longval",
        "hashtable",
        vec![cmd(&[b"HSET", b"h:longval", b"f", &[b'v'; 100]])],
    );
    let mut hbig = vec![b("HSET"), b("h:big")];
    for i in 0..500 {
        hbig.push(format!("field{i}").into_bytes());
        hbig.push(format!("{}", i * 1000).into_bytes());
    }
    set(c, "h:big", "hashtable", vec![hbig]);

    // Sorted sets.
    set(
        c,
        "z:lp",
        "listpack",
        vec![cmd(&[
            b"ZADD",
            b"z:lp",
            b"1",
            b"one",
            b"2.5",
            b"two-and-half",
            b"-0.1",
            b"neg",
            b"inf",
            b"top",
            b"-inf",
            b"bottom",
            b"1e300",
            b"huge",
            b"100000",
            b"int",
            b"0",
            b"0",
        ])],
    );
    let mut zbig = vec![b("ZADD"), b("z:big")];
    for i in 0..300 {
        zbig.push(format!("{}", f64::from(i) / 7.0).into_bytes());
        zbig.push(format!("member{i}").into_bytes());
    }
    zbig.push(b("inf"));
    zbig.push(b("infinite"));
    set(c, "z:big", "skiplist", vec![zbig]);
    set(
        c,
        "z:longmember",
        "skiplist",
        vec![cmd(&[b"ZADD", b"z:longmember", b"3", &[b'm'; 100]])],
    );
    keys
}

/// Every prefix length of a short payload; of a long one, the first and
/// last 300 and 300 spread over the rest (each decode is linear, so all
/// of them would be quadratic).
fn cuts(len: usize) -> Vec<usize> {
    if len <= 1000 {
        return (0..len).collect();
    }
    let mut v: Vec<usize> = (0..300).chain(len - 300..len).collect();
    v.extend((300..len - 300).step_by((len - 600) / 300 + 1));
    v
}

#[test]
fn dump_from_redis_decodes_and_restores() {
    let Some(r) = Redis::start(None) else { return };
    let mut c = r.con();
    let keys = populate(&mut c);
    for (key, enc) in &keys {
        let name = String::from_utf8_lossy(key);
        let payload = dump(&mut c, key);
        let decoded = decode_dump(&payload).unwrap_or_else(|e| panic!("{name} ({enc}): {e}"));
        let expected = read_key(&mut c, key);
        assert_eq!(canonical(&decoded), expected, "{name} ({enc})");

        // Ours, restored into Redis, reads back the same.
        let ours = encode_dump(&decoded);
        let mut copy = b"copy:".to_vec();
        copy.extend_from_slice(key);
        let _: () = q(&mut c, &[b"RESTORE", &copy, b"0", &ours]);
        assert_eq!(read_key(&mut c, &copy), expected, "restored {name}");
        // And Redis's DUMP of the restored key decodes to the same value.
        assert_eq!(
            canonical(&decode_dump(&dump(&mut c, &copy)).unwrap()),
            expected
        );

        // Every truncation is an error, never a panic; so is every
        // single-bit flip (the checksum catches it).
        for cut in cuts(payload.len()) {
            assert!(decode_dump(&payload[..cut]).is_err(), "{name} cut at {cut}");
        }
        if payload.len() < 200 {
            for bit in 0..payload.len() * 8 {
                let mut p = payload.clone();
                p[bit / 8] ^= 1 << (bit % 8);
                assert!(decode_dump(&p).is_err(), "{name} bit {bit}");
            }
        }
        // Truncated bodies with a valid footer reach the parser: errors.
        for cut in cuts(payload.len() - 10) {
            let mut p = payload[..cut].to_vec();
            p.extend_from_slice(&10u16.to_le_bytes());
            let crc = respite_rdb::crc64(&p);
            p.extend_from_slice(&crc.to_le_bytes());
            let _ = decode_dump(&p);
        }
    }
}

#[test]
fn restore_errors_match_redis() {
    let Some(r) = Redis::start(None) else { return };
    let mut c = r.con();
    let good = encode_dump(&Value::String(b"x".to_vec()));
    let mut bad_crc = good.clone();
    let n = bad_crc.len();
    bad_crc[n - 1] ^= 1;
    let v11 = encode_dump_with_version(&Value::String(b"x".to_vec()), 11);
    let v9 = encode_dump_with_version(&Value::String(b"x".to_vec()), 9);
    // Type 8 does not exist; type 0 with a length running past the end.
    let fix = |body: &[u8]| {
        let mut p = body.to_vec();
        p.extend_from_slice(&10u16.to_le_bytes());
        let crc = respite_rdb::crc64(&p);
        p.extend_from_slice(&crc.to_le_bytes());
        p
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("good", good),
        ("v9", v9),
        ("bad crc", bad_crc),
        ("v11", v11),
        ("short", b"\x00\x01x".to_vec()),
        ("type 8", fix(b"\x08\x01x")),
        ("long length", fix(b"\x00\x3fxyz")),
        ("empty list", fix(b"\x01\x00")),
        ("bad lzf", fix(b"\x00\xc3\x02\x05\x00a")),
        ("module", fix(b"\x06\x01")),
    ];
    for (i, (name, payload)) in cases.iter().enumerate() {
        let key = format!("k{i}");
        let theirs: redis::RedisResult<()> = redis::cmd("RESTORE")
            .arg(&key)
            .arg(0)
            .arg(payload)
            .query(&mut c);
        let ours = decode_dump(payload);
        match (theirs, ours) {
            (Ok(()), Ok(_)) => {}
            (Err(e), Err(o)) => {
                assert_eq!(e.detail(), Some(o.restore_message()), "{name}: {e} vs {o}");
            }
            (t, o) => panic!("{name}: redis {t:?}, ours {o:?}"),
        }
    }
}

/// A ziplist from entries (strings or integers), as Redis 6.2 wrote them.
fn ziplist(entries: &[&[u8]]) -> Vec<u8> {
    let mut body = Vec::new();
    let mut prev = 0usize;
    let mut last = 10usize;
    for e in entries {
        let start = body.len();
        last = 10 + start;
        if prev < 254 {
            body.push(prev as u8);
        } else {
            body.push(254);
            body.extend_from_slice(&(prev as u32).to_le_bytes());
        }
        let int = std::str::from_utf8(e)
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
            .filter(|i| i.to_string().as_bytes() == *e);
        match int {
            Some(i @ 0..=12) => body.push(0xf1 + i as u8),
            Some(i) if i8::try_from(i).is_ok() => body.extend_from_slice(&[0xfe, i as u8]),
            Some(i) if i16::try_from(i).is_ok() => {
                body.push(0xc0);
                body.extend_from_slice(&(i as i16).to_le_bytes());
            }
            Some(i) if (-(1 << 23)..(1 << 23)).contains(&i) => {
                body.push(0xf0);
                body.extend_from_slice(&(i as i32).to_le_bytes()[..3]);
            }
            Some(i) if i32::try_from(i).is_ok() => {
                body.push(0xd0);
                body.extend_from_slice(&(i as i32).to_le_bytes());
            }
            Some(i) => {
                body.push(0xe0);
                body.extend_from_slice(&i.to_le_bytes());
            }
            None if e.len() < 64 => {
                body.push(e.len() as u8);
                body.extend_from_slice(e);
            }
            None if e.len() < 16384 => {
                body.extend_from_slice(&[0x40 | (e.len() >> 8) as u8, e.len() as u8]);
                body.extend_from_slice(e);
            }
            None => {
                body.push(0x80);
                body.extend_from_slice(&(e.len() as u32).to_be_bytes());
                body.extend_from_slice(e);
            }
        }
        prev = body.len() - start;
    }
    let total = 10 + body.len() + 1;
    let mut zl = (total as u32).to_le_bytes().to_vec();
    zl.extend_from_slice(&(last as u32).to_le_bytes());
    zl.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    zl.extend_from_slice(&body);
    zl.push(0xff);
    zl
}

fn raw_string(out: &mut Vec<u8>, s: &[u8]) {
    assert!(s.len() < 16384);
    if s.len() < 64 {
        out.push(s.len() as u8);
    } else {
        out.extend_from_slice(&[0x40 | (s.len() >> 8) as u8, s.len() as u8]);
    }
    out.extend_from_slice(s);
}

fn with_footer(mut body: Vec<u8>, version: u16) -> Vec<u8> {
    body.extend_from_slice(&version.to_le_bytes());
    let crc = respite_rdb::crc64(&body);
    body.extend_from_slice(&crc.to_le_bytes());
    body
}

#[test]
fn old_encodings_read_as_redis_reads_them() {
    let Some(r) = Redis::start(None) else { return };
    let mut c = r.con();
    let long = vec![b'L'; 300];
    let entries: Vec<&[u8]> = vec![
        b"a",
        b"0",
        b"12",
        b"13",
        b"-1",
        b"127",
        b"-128",
        b"1000",
        b"-30000",
        b"100000",
        b"-8000000",
        b"2000000000",
        b"-2147483648",
        b"9000000000",
        b"-9223372036854775808",
        b"text",
        &long,
        b"",
    ];
    let zl = ziplist(&entries);
    let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();

    let mut p = vec![10u8]; // list as one ziplist (Redis before 3.2)
    raw_string(&mut p, &zl);
    cases.push(("list ziplist", with_footer(p, 6)));

    let mut p = vec![14u8, 2]; // quicklist of two ziplists (3.2 to 6.2)
    raw_string(&mut p, &zl);
    raw_string(&mut p, &ziplist(&[b"tail", b"7"]));
    cases.push(("quicklist", with_footer(p, 9)));

    // Hash and zset ziplists: pairs.
    let pairs: Vec<&[u8]> = vec![b"f1", b"v1", b"f2", b"12345", b"77", b"", b"f3", &long];
    let mut p = vec![13u8];
    raw_string(&mut p, &ziplist(&pairs));
    cases.push(("hash ziplist", with_footer(p, 9)));
    let zpairs: Vec<&[u8]> = vec![
        b"c", b"-3", b"a", b"1", b"b", b"2.5", b"e", b"100000", b"d", b"1e10",
    ];
    let mut p = vec![12u8];
    raw_string(&mut p, &ziplist(&zpairs));
    cases.push(("zset ziplist", with_footer(p, 9)));

    // Zipmap (Redis 2.4): count, then len field len free value.
    let mut zm = vec![2u8];
    for (f, v, free) in [(&b"name"[..], &b"redis"[..], 2u8), (b"n", b"42", 0)] {
        zm.push(f.len() as u8);
        zm.extend_from_slice(f);
        zm.push(v.len() as u8);
        zm.push(free);
        zm.extend_from_slice(v);
        zm.extend(std::iter::repeat_n(0u8, free as usize));
    }
    zm.push(0xff);
    let mut p = vec![9u8];
    raw_string(&mut p, &zm);
    cases.push(("zipmap", with_footer(p, 3)));

    // Sorted set with scores as text (type 3): "1.5", inf, -inf.
    let mut p = vec![3u8, 3];
    raw_string(&mut p, b"x");
    p.push(3);
    p.extend_from_slice(b"1.5");
    raw_string(&mut p, b"y");
    p.push(254);
    raw_string(&mut p, b"z");
    p.push(255);
    cases.push(("zset text scores", with_footer(p, 6)));

    for (i, (name, payload)) in cases.iter().enumerate() {
        let key = format!("old{i}");
        let _: () = redis::cmd("RESTORE")
            .arg(&key)
            .arg(0)
            .arg(payload)
            .query(&mut c)
            .unwrap_or_else(|e| panic!("redis refused {name}: {e}"));
        let theirs = read_key(&mut c, key.as_bytes());
        let ours = decode_dump(payload).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(canonical(&ours), theirs, "{name}");
        for cut in 0..payload.len() {
            assert!(decode_dump(&payload[..cut]).is_err());
        }
    }
}

#[test]
fn rdb_file_saved_by_redis_reads_back_and_ours_loads() {
    let Some(r) = Redis::start(None) else { return };
    let mut c = r.con();
    let keys = populate(&mut c);
    // Other databases, expiry times, and a function library.
    let _: () = q(&mut c, &[b"SELECT", b"3"]);
    let _: () = q(
        &mut c,
        &[b"SET", b"db3:key", b"v", b"PXAT", b"4102444800000"],
    );
    let _: i64 = q(&mut c, &[b"RPUSH", b"db3:list", b"a", b"b"]);
    let _: i64 = q(&mut c, &[b"PEXPIREAT", b"db3:list", b"4102444800123"]);
    let _: () = q(&mut c, &[b"SELECT", b"0"]);
    let lib = b"#!lua name=mylib\nredis.register_function('f', function() return 1 end)";
    let _: String = q(&mut c, &[b"FUNCTION", b"LOAD", lib]);
    let _: () = q(&mut c, &[b"SAVE"]);

    let file = std::fs::File::open(r.rdb_path()).unwrap();
    let mut reader = RdbReader::new(std::io::BufReader::new(file)).unwrap();
    assert_eq!(reader.version(), 10);
    let entries: Vec<_> = reader.by_ref().collect::<Result<_, _>>().unwrap();
    let stats = reader.stats();
    assert!(stats
        .aux
        .iter()
        .any(|(k, v)| k == b"redis-ver" && v == b"7.0.15"));
    assert_eq!(stats.functions, vec![lib.to_vec()]);
    assert_eq!(entries.len(), keys.len() + 2);
    for e in &entries {
        let _: () = q(&mut c, &[b"SELECT", e.db.to_string().as_bytes()]);
        assert_eq!(
            canonical(&e.value),
            read_key(&mut c, &e.key),
            "{:?}",
            String::from_utf8_lossy(&e.key)
        );
        let pexp: i64 = q(&mut c, &[b"PEXPIRETIME", &e.key]);
        assert_eq!(e.expire_ms, (pexp >= 0).then_some(pexp));
    }
    let _: () = q(&mut c, &[b"SELECT", b"0"]);

    // Truncated files: errors, never panics, never a clean end.
    let bytes = std::fs::read(r.rdb_path()).unwrap();
    for cut in (0..bytes.len())
        .step_by(bytes.len() / 500 + 1)
        .chain(bytes.len() - 9..bytes.len())
    {
        let res: Result<Vec<_>, _> = match RdbReader::new(&bytes[..cut]) {
            Ok(rd) => rd.collect(),
            Err(e) => Err(e),
        };
        assert!(res.is_err(), "cut at {cut}");
    }
    // A flipped byte in the middle: the checksum (or the parser) says so.
    let mut flipped = bytes.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x20;
    let res: Result<Vec<_>, _> = RdbReader::new(&flipped[..]).unwrap().collect();
    assert!(
        matches!(
            res,
            Err(Error::FileChecksum { .. }) | Err(Error::BadData(_))
        ),
        "{res:?}"
    );

    // Ours: written from the entries, loaded by a fresh redis-server.
    let out = tempfile::NamedTempFile::new().unwrap();
    let mut w = RdbWriter::new(
        std::io::BufWriter::new(out.reopen().unwrap()),
        &[(b"redis-bits", b"64")],
    )
    .unwrap();
    w.function(lib).unwrap();
    for e in &entries {
        w.entry(e.db, &e.key, &e.value, e.expire_ms).unwrap();
    }
    w.finish().unwrap();
    let r2 = Redis::start(Some(out.path())).expect("second redis");
    let mut c2 = r2.con();
    for e in &entries {
        let _: () = q(&mut c2, &[b"SELECT", e.db.to_string().as_bytes()]);
        assert_eq!(canonical(&e.value), read_key(&mut c2, &e.key));
        let pexp: i64 = q(&mut c2, &[b"PEXPIRETIME", &e.key]);
        assert_eq!(e.expire_ms, (pexp >= 0).then_some(pexp));
    }
    let libs: redis::Value = q(&mut c2, &[b"FUNCTION", b"LIST"]);
    assert!(format!("{libs:?}").contains("mylib"));
    // And our file reads back with our reader.
    let again: Vec<_> = RdbReader::new(std::fs::File::open(out.path()).unwrap())
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(again, entries);
}

/// What Redis answers about a stream: its entries and XINFO STREAM FULL
/// with the fields that describe the stored state (not the node layout).
fn stream_state(c: &mut Connection, key: &[u8]) -> (redis::Value, Vec<(String, String)>) {
    let entries: redis::Value = q(c, &[b"XRANGE", key, b"-", b"+"]);
    let full: Vec<redis::Value> = q(c, &[b"XINFO", b"STREAM", key, b"FULL"]);
    let mut facts = Vec::new();
    for pair in full.chunks(2) {
        let name: String = redis::from_redis_value(pair[0].clone()).unwrap();
        if matches!(
            name.as_str(),
            "radix-tree-keys" | "radix-tree-nodes" | "entries"
        ) {
            continue;
        }
        facts.push((name, format!("{:?}", pair[1])));
    }
    (entries, facts)
}

#[test]
fn streams_with_groups_round_trip_through_redis() {
    let Some(r) = Redis::start(None) else { return };
    let mut c = r.con();
    // A small stream in one node, a long one over many nodes with varying
    // fields, deletions, and groups with pending entries.
    for i in 0..3 {
        let id = format!("{}-{}", 1000 + i, i);
        let v = format!("v{i}");
        let _: String = q(&mut c, &[b"XADD", b"s1", id.as_bytes(), b"f", v.as_bytes()]);
    }
    for i in 0..450u32 {
        let id = format!("{}-0", 5000 + i);
        let v = i.to_string();
        if i % 7 == 0 {
            let _: String = q(
                &mut c,
                &[
                    b"XADD",
                    b"s2",
                    id.as_bytes(),
                    b"other",
                    v.as_bytes(),
                    b"x",
                    b"y",
                ],
            );
        } else {
            let big = "z".repeat((i as usize % 5) * 40);
            let _: String = q(
                &mut c,
                &[
                    b"XADD",
                    b"s2",
                    id.as_bytes(),
                    b"a",
                    v.as_bytes(),
                    b"b",
                    big.as_bytes(),
                ],
            );
        }
    }
    for i in (0..450u32).step_by(11) {
        let id = format!("{}-0", 5000 + i);
        let _: i64 = q(&mut c, &[b"XDEL", b"s2", id.as_bytes()]);
    }
    let _: () = q(&mut c, &[b"XGROUP", b"CREATE", b"s2", b"g1", b"0"]);
    let _: () = q(&mut c, &[b"XGROUP", b"CREATE", b"s2", b"g2", b"$"]);
    let _: () = q(&mut c, &[b"XGROUP", b"CREATE", b"s1", b"g", b"0"]);
    let _: redis::Value = q(
        &mut c,
        &[
            b"XREADGROUP",
            b"GROUP",
            b"g1",
            b"alice",
            b"COUNT",
            b"30",
            b"STREAMS",
            b"s2",
            b">",
        ],
    );
    let _: redis::Value = q(
        &mut c,
        &[
            b"XREADGROUP",
            b"GROUP",
            b"g1",
            b"bob",
            b"COUNT",
            b"5",
            b"STREAMS",
            b"s2",
            b">",
        ],
    );
    let _: i64 = q(&mut c, &[b"XACK", b"s2", b"g1", b"5001-0", b"5002-0"]);
    let _: () = q(
        &mut c,
        &[b"XGROUP", b"CREATECONSUMER", b"s2", b"g2", b"carol"],
    );
    // An empty stream that keeps its last ID and a group.
    let _: String = q(&mut c, &[b"XADD", b"s3", b"7-7", b"f", b"v"]);
    let _: i64 = q(&mut c, &[b"XDEL", b"s3", b"7-7"]);
    let _: () = q(&mut c, &[b"XGROUP", b"CREATE", b"s3", b"g", b"$"]);

    for key in [&b"s1"[..], b"s2", b"s3"] {
        let name = String::from_utf8_lossy(key);
        let payload = dump(&mut c, key);
        let decoded = decode_dump(&payload).unwrap_or_else(|e| panic!("{name}: {e}"));
        let Value::Stream(s) = &decoded else {
            panic!("{name}: not a stream")
        };
        let len: usize = q(&mut c, &[b"XLEN", key]);
        assert_eq!(s.entries.len(), len, "{name}");
        let ours = encode_dump(&decoded);
        assert_eq!(
            decode_dump(&ours).unwrap(),
            decoded,
            "{name}: our encoding reads back"
        );
        let mut copy = b"copy:".to_vec();
        copy.extend_from_slice(key);
        let _: () = q(&mut c, &[b"RESTORE", &copy, b"0", &ours]);
        assert_eq!(
            stream_state(&mut c, &copy),
            stream_state(&mut c, key),
            "{name}: restored into redis"
        );
        for cut in cuts(payload.len() - 10) {
            let mut p = payload[..cut].to_vec();
            p.extend_from_slice(&10u16.to_le_bytes());
            let crc = respite_rdb::crc64(&p);
            p.extend_from_slice(&crc.to_le_bytes());
            assert!(decode_dump(&p).is_err(), "{name} cut at {cut}");
        }
    }
}

//! What the replication tests share: a write load of every type over
//! several databases (`populate`, `load`, `run_load`), and the comparison
//! of two servers' datasets key by key (`assert_same`), whichever of
//! redis-server and respite is the master.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::Connection;

/// A respited that allows DEBUG (DIGEST, DIGEST-VALUE), with its directory.
pub fn debug_server() -> (tempfile::TempDir, super::Respited) {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("respite.toml");
    std::fs::write(&conf, "enable_debug_command = \"yes\"\n").unwrap();
    let server = super::Respited::start_in(dir.path(), &["--config", conf.to_str().unwrap()]);
    (dir, server)
}

/// Databases the load writes to.
pub const DBS: [u32; 3] = [0, 2, 5];

pub fn con_db(port: u16, db: u32) -> Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/{db}"))
        .expect("client")
        .get_connection()
        .expect("connect")
}

pub fn info_text(con: &mut Connection, section: &str) -> String {
    redis::cmd("INFO").arg(section).query(con).expect("INFO")
}

/// Waits until respite's link is up and its sync done.
pub fn wait_link_up(replica: &mut Connection, within: Duration) -> String {
    let deadline = Instant::now() + within;
    loop {
        let text = info_text(replica, "replication");
        if text.contains("master_link_status:up") && text.contains("master_sync_in_progress:0") {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "the link did not come up: {text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Fills every type, with and without expiries, in several databases.
pub fn populate(port: u16, n: usize) {
    for db in DBS {
        let mut c = con_db(port, db);
        let mut pipe = redis::pipe();
        for i in 0..n {
            pipe.cmd("SET")
                .arg(format!("s:{i}"))
                .arg(format!("v{i}"))
                .ignore();
            pipe.cmd("HSET")
                .arg(format!("h:{}", i % 50))
                .arg(format!("f{i}"))
                .arg(i)
                .ignore();
            pipe.cmd("RPUSH")
                .arg(format!("l:{}", i % 40))
                .arg(i)
                .ignore();
            pipe.cmd("SADD")
                .arg(format!("set:{}", i % 30))
                .arg(i)
                .ignore();
            pipe.cmd("ZADD")
                .arg(format!("z:{}", i % 20))
                .arg(i as f64 / 3.0)
                .arg(format!("m{i}"))
                .ignore();
            if i % 7 == 0 {
                pipe.cmd("SET")
                    .arg(format!("ttl:{i}"))
                    .arg(i)
                    .arg("EX")
                    .arg(1000)
                    .ignore();
            }
        }
        pipe.cmd("XADD")
            .arg("stream")
            .arg("*")
            .arg("a")
            .arg(1)
            .ignore();
        pipe.cmd("XGROUP")
            .arg("CREATE")
            .arg("stream")
            .arg("g")
            .arg("0")
            .ignore();
        pipe.cmd("PFADD")
            .arg("hll")
            .arg("a")
            .arg("b")
            .arg("c")
            .ignore();
        pipe.query::<()>(&mut c).expect("populate");
    }
}

/// One client's share of the load: every kind of write, until `stop`.
pub fn load(port: u16, seed: u64, stop: Arc<AtomicBool>) -> u64 {
    let mut cons: Vec<Connection> = DBS.iter().map(|&db| con_db(port, db)).collect();
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut ops = 0;
    while !stop.load(Ordering::Relaxed) {
        let r = next();
        let c = &mut cons[(r % DBS.len() as u64) as usize];
        let k = next() % 60;
        let v = next() % 1000;
        let mut cmd = |args: &[&str]| {
            let mut cmd = redis::cmd(args[0]);
            for a in &args[1..] {
                cmd.arg(*a);
            }
            // Errors (WRONGTYPE between kinds of the same key) are part
            // of the load: they must replicate nothing.
            let _: redis::RedisResult<redis::Value> = cmd.query(c);
        };
        let key = |p: &str| format!("{p}:{k}");
        match next() % 26 {
            0 => cmd(&["SET", &key("s"), &v.to_string()]),
            1 => cmd(&["INCRBY", &key("n"), &v.to_string()]),
            2 => cmd(&["INCRBYFLOAT", &key("f"), "1.5"]),
            3 => cmd(&["APPEND", &key("s"), "x"]),
            4 => cmd(&["HSET", &key("h"), &format!("f{v}"), &v.to_string()]),
            5 => cmd(&["HINCRBYFLOAT", &key("h"), "fl", "0.25"]),
            6 => cmd(&["LPUSH", &key("l"), &v.to_string()]),
            7 => cmd(&["RPOP", &key("l")]),
            8 => cmd(&["SADD", &key("set"), &v.to_string()]),
            9 => cmd(&["SPOP", &key("set")]),
            10 => cmd(&["ZADD", &key("z"), &v.to_string(), &format!("m{v}")]),
            11 => cmd(&["ZINCRBY", &key("z"), "2", &format!("m{}", v % 10)]),
            12 => cmd(&["EXPIRE", &key("s"), "1000"]),
            13 => cmd(&["SET", &key("short"), "x", "PX", &(20 + v % 200).to_string()]),
            14 => cmd(&["DEL", &key("s")]),
            15 => cmd(&["RENAME", &key("l"), &format!("l:{}", (k + 1) % 60)]),
            16 => cmd(&["XADD", "stream", "*", "v", &v.to_string()]),
            17 => cmd(&[
                "EVAL",
                "redis.call('INCR', KEYS[1]); redis.call('SADD', KEYS[2], ARGV[1]); return redis.call('SRANDMEMBER', KEYS[2])",
                "2",
                &key("n"),
                &key("set"),
                &v.to_string(),
            ]),
            18 => {
                let _: redis::RedisResult<()> = redis::pipe()
                    .atomic()
                    .cmd("SET")
                    .arg(key("s"))
                    .arg(v)
                    .cmd("LPUSH")
                    .arg(key("l"))
                    .arg(v)
                    .cmd("HDEL")
                    .arg(key("h"))
                    .arg(format!("f{}", v % 10))
                    .query(c);
            }
            19 => cmd(&["MSET", &key("s"), "1", &format!("s:{}", (k + 7) % 60), "2"]),
            20 => cmd(&["LMOVE", &key("l"), &format!("l:{}", (k + 3) % 60), "LEFT", "RIGHT"]),
            21 => cmd(&["GETEX", &key("s"), "PX", "100000"]),
            22 => cmd(&["PFADD", "hll", &v.to_string()]),
            23 => cmd(&["SETRANGE", &key("s"), "2", "ab"]),
            24 => cmd(&["ZPOPMIN", &key("z")]),
            _ => cmd(&["PERSIST", &key("s")]),
        }
        ops += 1;
    }
    ops
}

/// Both datasets, compared: DBSIZE of each database, DEBUG DIGEST, and
/// key by key where the digests differ.
pub fn assert_same(master: u16, replica: u16) {
    for db in 0..16 {
        let mut m = con_db(master, db);
        let mut r = con_db(replica, db);
        let mk: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(&mut m).unwrap();
        let mut mk = mk;
        let mut rk: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(&mut r).unwrap();
        mk.sort();
        rk.sort();
        let show = |v: &[Vec<u8>]| {
            v.iter()
                .map(|k| String::from_utf8_lossy(k).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(show(&mk), show(&rk), "the keys of database {db} differ");
        for key in &mk {
            let a: Vec<String> = redis::cmd("DEBUG")
                .arg("DIGEST-VALUE")
                .arg(key)
                .query(&mut m)
                .unwrap();
            let b: Vec<String> = redis::cmd("DEBUG")
                .arg("DIGEST-VALUE")
                .arg(key)
                .query(&mut r)
                .unwrap();
            let pm: i64 = redis::cmd("PEXPIRETIME").arg(key).query(&mut m).unwrap();
            let pr: i64 = redis::cmd("PEXPIRETIME").arg(key).query(&mut r).unwrap();
            assert_eq!(
                (a, pm),
                (b, pr),
                "key {:?} of database {db} differs",
                String::from_utf8_lossy(key)
            );
        }
    }
    let dm: String = redis::cmd("DEBUG")
        .arg("DIGEST")
        .query(&mut con_db(master, 0))
        .unwrap();
    let dr: String = redis::cmd("DEBUG")
        .arg("DIGEST")
        .query(&mut con_db(replica, 0))
        .unwrap();
    assert_eq!(dm, dr, "DEBUG DIGEST differs");
}

pub fn run_load(port: u16, clients: u64, secs: u64, during: impl FnOnce()) -> u64 {
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..clients)
        .map(|i| {
            let stop = stop.clone();
            std::thread::spawn(move || load(port, i + 1, stop))
        })
        .collect();
    during();
    std::thread::sleep(Duration::from_secs(secs));
    stop.store(true, Ordering::Relaxed);
    handles.into_iter().map(|h| h.join().unwrap()).sum()
}

//! EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT against a real
//! redis-server, reply by reply in RESP2 and RESP3 (the same commands sent
//! to both, raw replies compared), plus what only a durable server must
//! show: a script's writes before its error are kept and survive a SIGKILL
//! right after the reply, and scripts run by many clients at once are
//! atomic.

mod common;

use std::time::Duration;

use common::resp_conn::Conn;
use common::{RedisServer, Respited};

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
    let failures = differences(redis.port, respite.port, &[&["FLUSHALL"]], SESSION);
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

/// FUNCTION and FCALL, each line as in [`SESSION`]; FUNCTION LIST is only
/// asked where it shows one library (redis lists them in its hash
/// table's order).
const FUNCTION_SESSION: &[&str] = &[
    "FUNCTION | FLUSH",
    "FUNCTION | LIST",
    "FUNCTION | STATS",
    "FUNCTION | LOAD | #!lua name=lib1\\nredis.register_function('f1', function(keys, args) return redis.call('set', keys[1], args[1]) end)",
    "FUNCTION | LIST",
    "FUNCTION | LIST | WITHCODE",
    "FUNCTION | LIST | LIBRARYNAME | LIB*",
    "FUNCTION | LIST | LIBRARYNAME | nomatch",
    "FUNCTION | LIST | LIBRARYNAME",
    "FUNCTION | LIST | BAD",
    "FUNCTION | LIST | WITHCODE | WITHCODE",
    "FUNCTION | STATS",
    "FCALL | f1 | 1 | k | v",
    "FCALL | F1 | 1 | k | v2",
    "GET | k",
    "FCALL | nosuch | 0",
    "FCALL | f1 | x",
    "FCALL | f1 | 3 | a",
    "FCALL | f1 | -1",
    "FCALL_RO | f1 | 1 | k | v",
    "FUNCTION | LOAD | #!lua name=lib1\\nredis.register_function('f1', function() return 1 end)",
    "FUNCTION | LOAD | #!lua name=lib2\\nredis.register_function('f1', function() return 1 end)",
    "FUNCTION | LOAD | REPLACE | #!lua name=lib1\\nredis.register_function{function_name='f1', callback=function(keys, args) return {keys[1], args[1], redis.call('get', keys[1])} end, flags={'no-writes', 'ALLOW-STALE'}, description='reads'}",
    "FUNCTION | LIST",
    "FCALL_RO | f1 | 1 | k | a",
    "FCALL | f1 | 1 | k | a",
    "FUNCTION | LOAD | REPLACE | #!lua name=lib1\\nredis.register_function('f1', function(keys, args) redis.setresp(3); return redis.call('hgetall', 'nohash') end)",
    "FCALL | f1 | 0",
    "FUNCTION | LOAD | REPLACE | #!lua name=lib1\\nredis.register_function('f1', function(keys, args) return x end)",
    "FCALL | f1 | 0",
    "FUNCTION | LOAD | REPLACE | #!lua name=lib1\\nredis.register_function('f1', function(keys, args) error('boom') end)",
    "FCALL | f1 | 0",
    "FUNCTION | LOAD | REPLACE | #!lua name=lib1\\nredis.register_function('f1', function(keys, args) return redis.call('nosuch') end)",
    "FCALL | f1 | 0",
    "FUNCTION | LOAD | REPLACE | #!lua name=lib1\\nredis.register_function('f1', function(keys, args) return redis.register_function end)",
    "FCALL | f1 | 0",
    "FUNCTION | LOAD | REPLACE | #!lua name=lib1\\nredis.register_function('f1', function(keys, args) return redis.call('fcall', 'f1', '0') end)",
    "FCALL | f1 | 0",
    "FUNCTION | LOAD | REPLACE | #!lua name=lib1\\nlocal function helper() return 'h' end\\nredis.register_function('f1', function() return helper() end)\\nredis.register_function('f2', function() return string.rep('a', 3) end)",
    "FCALL | f1 | 0",
    "FCALL | f2 | 0",
    "FUNCTION | STATS",
    // Header errors.
    "FUNCTION | LOAD | redis.register_function('f', function() end)",
    "FUNCTION | LOAD | #!lua name=x",
    "FUNCTION | LOAD | #!lua\\nreturn 1",
    "FUNCTION | LOAD | #!lua name=a name=b\\nreturn 1",
    "FUNCTION | LOAD | #!lua name=a foo=b\\nreturn 1",
    "FUNCTION | LOAD | #!lua name=a-b\\nreturn 1",
    "FUNCTION | LOAD | #!lua name=\\nreturn 1",
    "FUNCTION | LOAD | #!python name=a\\nreturn 1",
    "FUNCTION | LOAD | #!LUA name=upper\\nredis.register_function('upper_f', function() return 'up' end)",
    "FCALL | upper_f | 0",
    "FUNCTION | LOAD | #!lua name=\"quoted\"\\nredis.register_function('qf', function() return 1 end)",
    "FUNCTION | LOAD | #!lua name=\"bad\\nreturn 1",
    // Code errors.
    "FUNCTION | LOAD | #!lua name=e\\nreturn 1",
    "FUNCTION | LOAD | #!lua name=e\\nredis.register_function('f', function() end",
    "FUNCTION | LOAD | #!lua name=e\\nlocal a = string.len('x')",
    "FUNCTION | LOAD | #!lua name=e\\nredis.call('ping')",
    "FUNCTION | LOAD | #!lua name=e\\nredis.setresp(3)",
    "FUNCTION | LOAD | #!lua name=e\\nerror('x')",
    "FUNCTION | LOAD | #!lua name=e\\nredis.register_function('f', 1)",
    "FUNCTION | LOAD | #!lua name=e\\nredis.register_function({}, function() end)",
    "FUNCTION | LOAD | #!lua name=e\\nredis.register_function('f')",
    "FUNCTION | LOAD | #!lua name=e\\nredis.register_function('f', function() end, 3)",
    "FUNCTION | LOAD | #!lua name=e\\nredis.register_function('bad-name', function() end)",
    "FUNCTION | LOAD | #!lua name=e\\nredis.register_function('f', function() end)\\nredis.register_function('f', function() end)",
    "FUNCTION | LOAD | #!lua name=e\\nredis.register_function{function_name='f'}",
    "FUNCTION | LOAD | #!lua name=e\\nredis.register_function{callback=function() end}",
    "FUNCTION | LOAD | #!lua name=e\\nredis.register_function{function_name='f', callback=function() end, flags={'bad'}}",
    "FUNCTION | LOAD | #!lua name=e\\nredis.register_function{function_name='f', callback=function() end, flags='no-writes'}",
    "FUNCTION | LOAD | #!lua name=e\\nredis.register_function{function_name='f', callback=function() end, other=1}",
    "FUNCTION | LOAD | #!lua name=e\\nredis.register_function{function_name='f', callback=1}",
    "FUNCTION | LOAD | #!lua name=e\\nredis.register_function{function_name={}, callback=function() end}",
    "FUNCTION | LOAD | #!lua name=e\\nredis.register_function{function_name='f', callback=function() end, description={}}",
    "FUNCTION | LOAD | #!lua name=e\\nredis.register_function{[1]='f'}",
    "FUNCTION | LOAD | #!lua name=e\\nredis.register_function('f')",
    "FUNCTION | LOAD | #!lua name=e\\nlocal x = redis.log(redis.LOG_NOTICE, 'loading') redis.register_function('ok', function() return redis.REDIS_VERSION_NUM > 0 end)",
    "FCALL | ok | 0",
    "FUNCTION | LOAD | #!lua name=e\\nwhile true do end",
    "FUNCTION | LOAD | BADOPT | #!lua name=e\\nreturn 1",
    "FUNCTION | LOAD | REPLACE",
    // DELETE, FLUSH, RESTORE argument errors, HELP.
    "FUNCTION | DELETE | nosuch",
    "FUNCTION | DELETE | e",
    "FCALL | ok | 0",
    "FUNCTION | FLUSH | BAD",
    "FUNCTION | FLUSH | SYNC | EXTRA",
    "FUNCTION | RESTORE | x | BAD",
    "FUNCTION | RESTORE | x",
    "FUNCTION | RESTORE | x | APPEND | more",
    "FUNCTION | KILL",
    "FUNCTION | NOPE",
    "FUNCTION | HELP",
    "FUNCTION | FLUSH | ASYNC",
    "FUNCTION | STATS",
    "FCALL | f1 | 0",
    // Inside MULTI.
    "MULTI",
    "FUNCTION | LOAD | #!lua name=m\\nredis.register_function('mf', function() return 'm' end)",
    "FUNCTION | LOAD | #!lua name=m\\nreturn 1",
    "EXEC",
    "FCALL | mf | 0",
    "FUNCTION | FLUSH",
];

#[test]
fn function_differential_session() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let respite = Respited::start(&[]);
    let failures = differences(redis.port, respite.port, &[], FUNCTION_SESSION);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A library FUNCTION LOAD acknowledged is in the file: it is there after
/// a SIGKILL right after the reply, and so is a FUNCTION DELETE's effect.
#[test]
fn functions_survive_sigkill() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut respite = Respited::start_in(dir.path(), &[]);
    let mut c = Conn::open(respite.port, 2);
    for lib in ["a", "b", "c"] {
        let code = format!(
            "#!lua name={lib}\nredis.register_function('{lib}_f', function(keys, args) return '{lib}' .. (args[1] or '') end)"
        );
        let reply = c.command(&["FUNCTION", "LOAD", &code]);
        assert_eq!(reply, format!("${}\r\n{lib}\r\n", lib.len()).as_bytes());
    }
    assert_eq!(c.command(&["FUNCTION", "DELETE", "b"]), b"+OK\r\n");
    respite.kill();
    let mut respite = Respited::start_in(dir.path(), &[]);
    let mut c = Conn::open(respite.port, 2);
    assert_eq!(c.command(&["FCALL", "a_f", "0", "x"]), b"$2\r\nax\r\n");
    assert_eq!(c.command(&["FCALL", "c_f", "0"]), b"$1\r\nc\r\n");
    assert_eq!(
        c.command(&["FCALL", "b_f", "0"]),
        b"-ERR Function not found\r\n"
    );
    let stats = c.command(&["FUNCTION", "STATS"]);
    assert!(
        stats.ends_with(b"$15\r\nlibraries_count\r\n:2\r\n$15\r\nfunctions_count\r\n:2\r\n"),
        "{}",
        String::from_utf8_lossy(&stats)
    );
    // FLUSH is durable too; FLUSHALL leaves libraries alone (as in redis).
    assert_eq!(c.command(&["FLUSHALL"]), b"+OK\r\n");
    assert_eq!(c.command(&["FCALL", "a_f", "0"]), b"$1\r\na\r\n");
    assert_eq!(c.command(&["FUNCTION", "FLUSH"]), b"+OK\r\n");
    respite.kill();
    let respite = Respited::start_in(dir.path(), &[]);
    let mut c = Conn::open(respite.port, 2);
    assert_eq!(c.command(&["FUNCTION", "LIST"]), b"*0\r\n");
}

/// FUNCTION DUMP and RESTORE both ways between redis-server and respite
/// (the payload is redis's), and RESTORE's policies compared reply by
/// reply.
#[test]
fn function_dump_restore_with_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let respite = Respited::start(&[]);
    let mut theirs = Conn::open(redis.port, 2);
    let mut ours = Conn::open(respite.port, 2);
    let libs = [
        "#!lua name=one\nredis.register_function('f_one', function() return 1 end)",
        // Long enough to be LZF-compressed in the payload.
        "#!lua name=two\nredis.register_function{function_name='f_two', callback=function(keys, args) return 'two two two two two two two two' end, flags={'no-writes'}}",
    ];
    for code in libs {
        let r = theirs.command(&["FUNCTION", "LOAD", code]);
        assert_eq!(r[0], b'$');
    }
    let dump = theirs.command(&["FUNCTION", "DUMP"]);
    let payload = bulk_body(&dump);
    assert_eq!(
        ours.command(&[b"FUNCTION".as_slice(), b"RESTORE", &payload]),
        b"+OK\r\n"
    );
    assert_eq!(ours.command(&["FCALL", "f_one", "0"]), b":1\r\n");
    assert_eq!(
        ours.command(&["FCALL_RO", "f_two", "0"]),
        b"$31\r\ntwo two two two two two two two\r\n"
    );
    // respite's DUMP goes back into redis.
    let ours_dump = bulk_body(&ours.command(&["FUNCTION", "DUMP"]));
    assert_eq!(
        theirs.command(&[b"FUNCTION".as_slice(), b"RESTORE", &ours_dump, b"FLUSH"]),
        b"+OK\r\n"
    );
    assert_eq!(theirs.command(&["FCALL", "f_one", "0"]), b":1\r\n");
    // The policies and the payload errors, on both.
    let one_only = {
        theirs.command(&["FUNCTION", "FLUSH"]);
        theirs.command(&["FUNCTION", "LOAD", libs[0]]);
        let d = bulk_body(&theirs.command(&["FUNCTION", "DUMP"]));
        theirs.command(&[b"FUNCTION".as_slice(), b"RESTORE", &ours_dump, b"FLUSH"]);
        d
    };
    let clash = "#!lua name=other\nredis.register_function('f_one', function() return 2 end)";
    let clash_dump = {
        let mut r = Conn::open(redis.port, 2);
        r.command(&["FUNCTION", "FLUSH"]);
        r.command(&["FUNCTION", "LOAD", clash]);
        let d = bulk_body(&r.command(&["FUNCTION", "DUMP"]));
        r.command(&[b"FUNCTION".as_slice(), b"RESTORE", &ours_dump, b"FLUSH"]);
        d
    };
    let mut corrupt = one_only.clone();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    let steps: Vec<Vec<Vec<u8>>> = vec![
        vec![b"FUNCTION".to_vec(), b"RESTORE".to_vec(), one_only.clone()],
        vec![
            b"FUNCTION".to_vec(),
            b"RESTORE".to_vec(),
            one_only.clone(),
            b"APPEND".to_vec(),
        ],
        vec![
            b"FUNCTION".to_vec(),
            b"RESTORE".to_vec(),
            one_only.clone(),
            b"REPLACE".to_vec(),
        ],
        vec![b"FCALL".to_vec(), b"f_two".to_vec(), b"0".to_vec()],
        vec![
            b"FUNCTION".to_vec(),
            b"RESTORE".to_vec(),
            clash_dump.clone(),
        ],
        vec![
            b"FUNCTION".to_vec(),
            b"RESTORE".to_vec(),
            clash_dump.clone(),
            b"REPLACE".to_vec(),
        ],
        vec![b"FUNCTION".to_vec(), b"RESTORE".to_vec(), corrupt],
        vec![b"FUNCTION".to_vec(), b"RESTORE".to_vec(), b"short".to_vec()],
        vec![
            b"FUNCTION".to_vec(),
            b"RESTORE".to_vec(),
            clash_dump,
            b"FLUSH".to_vec(),
        ],
        vec![b"FCALL".to_vec(), b"f_one".to_vec(), b"0".to_vec()],
        vec![b"FCALL".to_vec(), b"f_two".to_vec(), b"0".to_vec()],
        vec![b"FUNCTION".to_vec(), b"LIST".to_vec()],
    ];
    for step in steps {
        let expected = theirs.command(&step);
        let got = ours.command(&step);
        assert_eq!(
            String::from_utf8_lossy(&expected),
            String::from_utf8_lossy(&got),
            "{}",
            String::from_utf8_lossy(&step[1])
        );
    }
}

/// The body of a bulk reply.
fn bulk_body(reply: &[u8]) -> Vec<u8> {
    assert_eq!(reply[0], b'$', "{}", String::from_utf8_lossy(reply));
    let start = reply.windows(2).position(|w| w == b"\r\n").expect("header") + 2;
    reply[start..reply.len() - 2].to_vec()
}

/// What another client gets while a script or function runs past
/// `busy-reply-threshold` (lowered to 100 ms): BUSY for everything but
/// the `allow-busy` commands, SCRIPT KILL and FUNCTION KILL each for
/// their own kind, UNKILLABLE once the script wrote, and the killed
/// script's error; the same steps on redis-server and respite, replies
/// compared (FUNCTION STATS's duration masked).
#[test]
fn busy_scripts_differential() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let respite = Respited::start(&[]);
    let ours = busy_scenario(respite.port);
    let theirs = busy_scenario(redis.port);
    let show = |v: &[Vec<u8>]| {
        v.iter()
            .map(|r| String::from_utf8_lossy(r).into_owned())
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(show(&ours), show(&theirs));
}

fn busy_scenario(port: u16) -> Vec<Vec<u8>> {
    let mut b = Conn::open(port, 2);
    let mut out = Vec::new();
    assert_eq!(
        b.command(&["CONFIG", "SET", "busy-reply-threshold", "100"]),
        b"+OK\r\n"
    );
    b.command(&["FUNCTION", "FLUSH"]);
    b.command(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=busy\nredis.register_function('spin', function() while true do end end)",
    ]);
    let start = |args: &'static [&'static str]| {
        let handle = std::thread::spawn(move || Conn::open(port, 2).command(args));
        std::thread::sleep(Duration::from_millis(500));
        handle
    };
    // An EVAL script that never ends.
    let a = start(&["EVAL", "while true do end", "0"]);
    for step in [
        &["PING"][..],
        &["GET", "k"],
        &["SET", "k", "v"],
        &["FUNCTION", "KILL"],
        &["FUNCTION", "STATS"],
        &["SCRIPT", "KILL"],
    ] {
        out.push(b.command(step));
    }
    out.push(a.join().expect("script client"));
    out.push(b.command(&["PING"]));
    // A function that never ends.
    let a = start(&["FCALL", "spin", "0"]);
    for step in [
        &["PING"][..],
        &["SCRIPT", "KILL"],
        &["FUNCTION", "STATS"],
        &["FUNCTION", "KILL"],
    ] {
        out.push(mask_duration(b.command(step)));
    }
    out.push(a.join().expect("function client"));
    // A script that wrote cannot be killed; it ends on its own.
    let a = start(&[
        "EVAL",
        "redis.call('set', 'w', '1') local s = redis.call('time') while true do local t = redis.call('time') if (t[1] - s[1]) * 1000000 + (t[2] - s[2]) > 1500000 then break end end return 'done'",
        "0",
    ]);
    out.push(b.command(&["SCRIPT", "KILL"]));
    out.push(b.command(&["PING"]));
    out.push(a.join().expect("writing client"));
    out.push(b.command(&["GET", "w"]));
    out.push(b.command(&["SCRIPT", "KILL"]));
    b.command(&["FUNCTION", "FLUSH"]);
    out
}

/// FUNCTION STATS's `duration_ms` value replaced by 0.
fn mask_duration(mut reply: Vec<u8>) -> Vec<u8> {
    let needle = b"duration_ms\r\n:";
    if let Some(at) = reply.windows(needle.len()).position(|w| w == needle) {
        let from = at + needle.len();
        let to = from + reply[from..].iter().position(|&c| c == b'\r').unwrap_or(0);
        reply.splice(from..to, [b'0']);
    }
    reply
}

/// INFO memory's counts of scripts, functions and libraries, as redis
/// gives them; the interpreters' memory is reported once they ran.
#[test]
fn info_counts_scripts_and_functions() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let respite = Respited::start(&[]);
    let field = |info: &[u8], name: &str| -> String {
        let text = String::from_utf8_lossy(info).into_owned();
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")).map(str::to_string))
            .unwrap_or_default()
    };
    for port in [redis.port, respite.port] {
        let mut c = Conn::open(port, 2);
        c.command(&["SCRIPT", "FLUSH"]);
        c.command(&["FUNCTION", "FLUSH"]);
        c.command(&["EVAL", "return 1", "0"]);
        c.command(&["SCRIPT", "LOAD", "return 2"]);
        c.command(&[
            "FUNCTION",
            "LOAD",
            "#!lua name=l\nredis.register_function('a', function() return 1 end)\nredis.register_function('b', function() return 2 end)",
        ]);
        c.command(&["FCALL", "a", "0"]);
        let info = c.command(&["INFO", "memory"]);
        assert_eq!(field(&info, "number_of_cached_scripts"), "2", "{port}");
        assert_eq!(field(&info, "number_of_functions"), "2", "{port}");
        assert_eq!(field(&info, "number_of_libraries"), "1", "{port}");
        for name in [
            "used_memory_lua",
            "used_memory_vm_functions",
            "used_memory_functions",
        ] {
            let n: u64 = field(&info, name).parse().unwrap_or(0);
            assert!(n > 0, "{name} on {port}");
        }
    }
}

/// Runs `lines` (each as in [`SESSION`]) on both servers, in RESP2 and
/// then in RESP3, each pass after `setup` on a connection of its own;
/// answers the differences.
fn differences(
    redis_port: u16,
    respite_port: u16,
    setup: &[&[&str]],
    lines: &[&str],
) -> Vec<String> {
    let mut failures = Vec::new();
    for resp in [2u8, 3] {
        for port in [redis_port, respite_port] {
            let mut c = Conn::open(port, 2);
            for command in setup {
                c.command(command);
            }
        }
        let mut theirs = Conn::open(redis_port, resp);
        let mut ours = Conn::open(respite_port, resp);
        for line in lines {
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
    failures
}

/// The ACL LOG's entries as (reason, context, object, username).
fn acl_log(port: u16) -> Vec<(String, String, String, String)> {
    let mut con = common::client_for(port);
    let entries: Vec<std::collections::HashMap<String, redis::Value>> = redis::cmd("ACL")
        .arg("LOG")
        .query(&mut con)
        .expect("ACL LOG");
    let text = |e: &std::collections::HashMap<String, redis::Value>, k: &str| match e.get(k) {
        Some(redis::Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
        Some(redis::Value::SimpleString(s)) => s.clone(),
        other => format!("{other:?}"),
    };
    entries
        .iter()
        .map(|e| {
            (
                text(e, "reason"),
                text(e, "context"),
                text(e, "object"),
                text(e, "username"),
            )
        })
        .collect()
}

/// `redis.call` and `redis.pcall` run as the calling user: a command, key
/// or channel the user may not use is redis's "The user executing the
/// script ..." error (before the read-only script check, as in redis),
/// logged in the ACL LOG with the context `lua`; `redis.acl_check_cmd`
/// answers for that user.
#[test]
fn acl_inside_scripts_differential() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let respite = Respited::start(&[]);
    let setup: &[&[&str]] = &[
        &["FLUSHALL"],
        &["ACL", "LOG", "RESET"],
        &["FUNCTION", "FLUSH"],
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=acllib\nredis.register_function('setit', function(keys, args) return redis.call('set', keys[1], args[1]) end)\nredis.register_function{function_name='getit', callback=function(keys) return redis.call('get', keys[1]) end, flags={'no-writes'}}",
        ],
        &[
            "ACL", "SETUSER", "lim", "on", ">pw", "+@all", "-set", "~k*", "&ch*",
        ],
        &["SET", "k1", "v1"],
    ];
    let lines = &[
        "AUTH | lim | pw",
        "EVAL | return redis.call('set', 'k1', 'v') | 0",
        "EVAL | return redis.pcall('set', 'k1', 'v') | 0",
        "EVAL | local r = redis.pcall('set', 'k1', 'v'); return r['err'] | 0",
        "EVAL | return redis.call('get', 'other') | 0",
        "EVAL | return redis.call('get', 'k1') | 0",
        "EVAL | return redis.call('incr', 'other') | 0",
        "EVAL | return redis.call('publish', 'other', 'm') | 0",
        "EVAL | return redis.call('publish', 'ch1', 'm') | 0",
        "EVAL | return redis.acl_check_cmd('set', 'k1', 'v') | 0",
        "EVAL | return redis.acl_check_cmd('get', 'k1') | 0",
        "EVAL | return redis.acl_check_cmd('get', 'other') | 0",
        "EVAL | return redis.acl_check_cmd('nosuch') | 0",
        "EVAL | return redis.acl_check_cmd('object', 'nosuch') | 0",
        "EVAL | return redis.acl_check_cmd() | 0",
        "EVAL_RO | return redis.call('set', 'k1', 'v') | 0",
        "EVAL_RO | return redis.call('get', 'other') | 0",
        "EVAL_RO | return redis.call('incr', 'k1') | 0",
        "EVAL | #!lua flags=no-writes\nreturn redis.call('get', 'other') | 0",
        "FCALL | setit | 1 | k1 | v",
        "FCALL | getit | 1 | other",
        "FCALL_RO | getit | 1 | other",
        "FCALL_RO | getit | 1 | k1",
        "EVAL | return redis.call('get', 'other') | 1 | other",
    ];
    let failures = differences(redis.port, respite.port, setup, lines);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let (theirs, ours) = (acl_log(redis.port), acl_log(respite.port));
    assert!(!theirs.is_empty());
    assert_eq!(theirs, ours);
}

/// A read-only script runs on the read pool: while one loops for a
/// second and a half, past `busy-reply-threshold`, another client's
/// writes and reads are answered at once (no BUSY), and SCRIPT KILL
/// still stops it.
#[test]
fn read_only_scripts_do_not_block_writes() {
    let respite = Respited::start(&[]);
    let port = respite.port;
    let mut c = Conn::open(port, 2);
    assert_eq!(
        c.command(&["CONFIG", "SET", "busy-reply-threshold", "100"]),
        b"+OK\r\n"
    );
    c.command(&["SET", "k", "0"]);
    // Loops until TIME says 1.5 s have passed.
    // Reads the key first (its snapshot starts there) and last.
    let spin = "local first = redis.call('get', KEYS[1]); local t0 = redis.call('time'); \
        while true do local t = redis.call('time'); \
        if (t[1] - t0[1]) * 1000000 + (t[2] - t0[2]) > 1500000 then break end end; \
        return {first, redis.call('get', KEYS[1])}";
    for (command, body) in [
        ("EVAL_RO", spin.to_string()),
        ("EVAL", format!("#!lua flags=no-writes\n{spin}")),
    ] {
        let body2 = body.clone();
        let reader = std::thread::spawn(move || {
            let mut r = Conn::open(port, 2);
            r.command(&[command, body2.as_str(), "1", "k"])
        });
        std::thread::sleep(Duration::from_millis(400));
        let started = std::time::Instant::now();
        for i in 0..20 {
            assert_eq!(
                c.command(&["SET", "k", &i.to_string()]),
                b"+OK\r\n",
                "{command}"
            );
            assert_eq!(c.command(&["INCR", "n"])[0], b':');
        }
        assert!(
            started.elapsed() < Duration::from_millis(600),
            "{command}: writes waited {:?} for a read-only script",
            started.elapsed()
        );
        // The script's snapshot began before those writes.
        assert_eq!(
            reader.join().expect("reader"),
            b"*2\r\n$1\r\n0\r\n$1\r\n0\r\n",
            "{command}"
        );
        c.command(&["SET", "k", "0"]);
    }
    // SCRIPT KILL reaches a read-only script on the read pool.
    let reader = std::thread::spawn(move || {
        let mut r = Conn::open(port, 2);
        r.command(&["EVAL_RO", "while true do end", "0"])
    });
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
    assert!(killed);
    let text = String::from_utf8_lossy(&reader.join().expect("reader")).into_owned();
    assert!(
        text.starts_with("-ERR Script killed by user with SCRIPT KILL..."),
        "{text}"
    );
    assert_eq!(c.command(&["PING"]), b"+PONG\r\n");
}

/// PUBLISH, SPUBLISH and PUBSUB from scripts and functions, against
/// redis-server: the replies (receivers counted), and what subscribers
/// receive, in order.
#[test]
fn publish_from_scripts_differential() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let respite = Respited::start(&[]);
    let mut received = Vec::new();
    for port in [redis.port, respite.port] {
        let mut sub = Conn::open(port, 2);
        sub.command(&["SUBSCRIBE", "ch"]);
        sub.command(&["PSUBSCRIBE", "c*"]);
        sub.command(&["SSUBSCRIBE", "sh"]);
        let mut c = Conn::open(port, 2);
        let mut replies = Vec::new();
        for args in [
            vec!["EVAL", "redis.call('set', 'k', 'v'); local a = redis.call('publish', 'ch', 'one'); local b = redis.call('PUBLISH', 'cx', 'two'); local d = redis.call('spublish', 'sh', 'three'); return {a, b, d}", "0"],
            vec!["EVAL", "return redis.call('pubsub', 'numsub', 'ch', 'none')", "0"],
            vec!["EVAL", "return redis.call('pubsub', 'channels', 'c*')", "0"],
            vec!["EVAL", "return redis.call('pubsub', 'numpat')", "0"],
            vec!["EVAL", "return redis.call('pubsub', 'shardchannels')", "0"],
            vec!["EVAL", "return redis.call('pubsub', 'bad')", "0"],
            vec!["EVAL", "local c = ARGV[1]; return redis.call(c, 'ch', 'dynamic')", "0", "publish"],
            vec!["EVAL", "redis.call('publish', 'ch', 'before-error'); error('late')", "0"],
            vec!["EVAL_RO", "return redis.call('publish', 'ch', 'ro')", "0"],
            vec!["FUNCTION", "LOAD", "REPLACE", "#!lua name=pub\nredis.register_function('p', function(keys, args) return redis.call('publish', keys[1], args[1]) end)"],
            vec!["FCALL", "p", "1", "ch", "from-function"],
            vec!["MULTI"],
            vec!["EVAL", "return redis.call('publish', 'ch', 'in-multi')", "0"],
            vec!["PUBLISH", "ch", "after-in-multi"],
            vec!["EXEC"],
        ] {
            replies.push(String::from_utf8_lossy(&c.command(&args)).into_owned());
        }
        received.push((replies, String::from_utf8_lossy(&sub.drain()).into_owned()));
    }
    assert_eq!(received[0], received[1]);
}

/// The daemon's resident memory, in bytes.
fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Hostile scripts each get an error and leave the server serving, with
/// its memory bounded by `lua-memory-limit`: tables, strings and
/// encoders' outputs past the limit, deep recursion, decoder bombs, bad
/// `redis.call` arguments and odd error objects. A script that wrote
/// before its error keeps its writes (redis does not roll back).
#[test]
fn hostile_scripts() {
    let respite = Respited::start(&[]);
    let mut c = Conn::open(respite.port, 2);
    assert_eq!(
        c.command(&["CONFIG", "SET", "lua-memory-limit", "64mb"]),
        b"+OK\r\n"
    );
    assert_eq!(
        c.command(&["CONFIG", "GET", "lua-memory-limit"]),
        b"*2\r\n$16\r\nlua-memory-limit\r\n$8\r\n67108864\r\n"
    );
    let cases: &[(&str, &str)] = &[
        ("local t = {} for i = 1, 1e9 do t[i] = i end", "not enough memory"),
        ("return string.rep('x', 1024 * 1024 * 1024)", "not enough memory"),
        ("return string.rep('ab', 1e10)", ""),
        ("local s = string.rep('x', 1024 * 1024) local t = {} for i = 1, 1000 do t[i] = s .. i end", "not enough memory"),
        ("local s = 'x' while true do s = s .. s end", "not enough memory"),
        ("local s = string.rep('x', 1024 * 1024) local t = {} for i = 1, 4000 do t[i] = s end return #cjson.encode(t)", "not enough memory"),
        ("local s = string.rep('x', 1024 * 1024) local t = {} for i = 1, 4000 do t[i] = s end return #cmsgpack.pack(t)", "not enough memory"),
        ("local s = string.rep('x', 1024 * 1024) local t = {} for i = 1, 4000 do t[i] = s end return #cmsgpack.pack(unpack(t))", ""),
        ("local function f(n) return f(n + 1) + 1 end return f(1)", "stack overflow"),
        ("local function f() local ok, e = pcall(f) error(e, 0) end return f()", "C stack overflow"),
        ("local function f(t) return f({t}) end return f({})", ""),
        ("return cjson.decode(string.rep('[', 100000))", "too many nested"),
        ("return cjson.decode(string.rep('{\"a\":', 100000))", ""),
        ("return cmsgpack.unpack('\\221\\255\\255\\255\\255')", ""),
        ("return cmsgpack.unpack('\\223\\255\\255\\255\\255')", ""),
        ("return cmsgpack.unpack(string.rep('\\145', 100000) .. '\\192')", ""),
        ("return struct.unpack('c2000000000', 'x')", ""),
        ("return struct.pack('c2000000000', 'x')", ""),
        ("return struct.pack(string.rep('i', 1000000), 1)", ""),
        ("return redis.call()", "Please specify at least one argument"),
        ("return redis.call({})", ""),
        ("return redis.call('set', {}, 'v')", "Lua redis lib command arguments must be strings or integers"),
        ("return redis.call('set', 'k', nil)", ""),
        ("return redis.call('eval', 'return 1', 0)", "not allowed from script"),
        ("return redis.call(string.rep('x', 10000000))", "Unknown Redis command"),
        ("error({err = 'MYERR custom'})", "MYERR custom"),
        ("error(setmetatable({}, {__index = function() error('meta') end}))", ""),
        ("error(nil)", ""),
        ("error(12)", ""),
        ("error(string.rep('e', 10000000))", ""),
        ("return assert(loadstring(string.rep('(', 100000)))", "chunk has too many syntax levels"),
        ("local co = coroutine.create(function() while true do coroutine.yield(string.rep('y', 1e6)) end end) local t = {} for i = 1, 1000 do local _, v = coroutine.resume(co) t[i] = v .. i end", "not enough memory"),
        ("redis.call('set', 'written', 'yes') local t = {} for i = 1, 1e9 do t[i] = i end", "not enough memory"),
    ];
    let mut other = Conn::open(respite.port, 2);
    let mut peak = 0;
    for (script, expected) in cases {
        let reply = c.command(&["EVAL", script, "0"]);
        let text = String::from_utf8_lossy(&reply);
        assert!(text.starts_with('-'), "{script}: {text:.200}");
        assert!(text.contains(expected), "{script}: {text:.200}");
        // Others are still served, at once.
        let started = std::time::Instant::now();
        assert_eq!(
            other.command(&["SET", "alive", "1"]),
            b"+OK\r\n",
            "{script}"
        );
        assert!(started.elapsed() < Duration::from_secs(2), "{script}");
        peak = peak.max(rss_bytes(respite.pid()));
    }
    assert!(peak < 600 << 20, "resident memory reached {peak} bytes");
    // What redis-server answers with a value, respite answers alike: a
    // recursion whose every level is caught by pcall (its first value), a
    // chunk too deep to compile or a big one compiled (loadstring's nil,
    // a function: both nil).
    for (script, expected) in [
        (
            "local function f() return pcall(f) end return f()",
            &b":1\r\n"[..],
        ),
        ("return loadstring(string.rep('(', 100000))", b"$-1\r\n"),
        (
            "return loadstring(string.rep('x = 1 ', 1000000))",
            b"$-1\r\n",
        ),
    ] {
        assert_eq!(c.command(&["EVAL", script, "0"]), expected, "{script}");
    }
    // The parser under collections (CVE-2025-49844's pattern): chunks
    // parsed while garbage is collected all the time still parse.
    assert_eq!(
        c.command(&[
            "EVAL",
            "local n = 0 for i = 1, 200 do local junk = string.rep('x', 10000) .. i \
             collectgarbage('collect') local f = loadstring('return ' .. string.rep('1+', 2000) .. '1') \
             n = n + f() end return n",
            "0"
        ]),
        b":400200\r\n"
    );
    assert_eq!(c.command(&["GET", "written"]), b"$3\r\nyes\r\n");
    // A script that stays within the limit still runs (the garbage of the
    // failed ones was collected).
    assert_eq!(
        c.command(&[
            "EVAL",
            "local t = {} for i = 1, 100000 do t[i] = i end return #t",
            "0"
        ]),
        b":100000\r\n"
    );
    // Without a limit, what fits in memory runs.
    assert_eq!(
        c.command(&["CONFIG", "SET", "lua-memory-limit", "0"]),
        b"+OK\r\n"
    );
    assert_eq!(
        c.command(&["EVAL", "return #string.rep('x', 100 * 1024 * 1024)", "0"]),
        b":104857600\r\n"
    );
}

/// A write sent while a script runs, before `busy-reply-threshold`, is
/// answered BUSY once the script passes the threshold (redis reads it only
/// then), and runs normally when the script ends before it; against
/// redis-server.
#[test]
fn writes_queued_behind_a_busy_script_get_busy() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let respite = Respited::start(&[]);
    let spin = |ms: u64| {
        format!(
            "local t0 = redis.call('time') while true do local t = redis.call('time') \
             if (t[1] - t0[1]) * 1000000 + (t[2] - t0[2]) > {} then break end end return 1",
            ms * 1000
        )
    };
    let mut outcomes = Vec::new();
    for port in [redis.port, respite.port] {
        let mut c = Conn::open(port, 2);
        c.command(&["CONFIG", "SET", "busy-reply-threshold", "300"]);
        let mut got = Vec::new();
        for ms in [1200u64, 100] {
            let body = spin(ms);
            let script = std::thread::spawn(move || {
                let mut s = Conn::open(port, 2);
                s.command(&["EVAL", body.as_str(), "0"])
            });
            std::thread::sleep(Duration::from_millis(60));
            got.push(String::from_utf8_lossy(&c.command(&["SET", "queued", "1"])).into_owned());
            got.push(String::from_utf8_lossy(&script.join().expect("script")).into_owned());
        }
        outcomes.push(got);
    }
    assert_eq!(outcomes[0], outcomes[1]);
    assert!(outcomes[1][0].starts_with("-BUSY"), "{:?}", outcomes[1]);
}

/// What redis refuses around a script's run, reply by reply against
/// redis-server in RESP2 and RESP3: a shebang script over `maxmemory`
/// (refused whole unless `allow-oom` or `no-writes`; an `allow-oom` one
/// writes), FUNCTION LOAD and an FCALL over `maxmemory`, NOREPLICAS for a
/// shebang script that may write, commands redis has and flags
/// `noscript` (CLUSTER), XREAD and XREADGROUP with BLOCK, and DEBUG from
/// a script once DEBUG SET-DISABLE-DENY-SCRIPTS lets it (PROTOCOL's
/// replies through `redis.setresp`).
#[test]
fn refusals_around_a_run_differential() {
    let dir = tempfile::tempdir().expect("tempdir");
    let conf = dir.path().join("respite.toml");
    std::fs::write(&conf, "enable_debug_command = \"yes\"\n").expect("config");
    let respite = Respited::start_in(dir.path(), &["--config", conf.to_str().expect("path")]);
    let Some(redis) = RedisServer::start_with(&["--enable-debug-command", "yes"]) else {
        return;
    };
    let session: &[&str] = &[
        "FUNCTION | LOAD | REPLACE | #!lua name=lib\\nredis.register_function('w', function(k) return redis.call('set', k[1], 'w') end)\\nredis.register_function{function_name='oom', callback=function(k) return redis.call('set', k[1], 'o') end, flags={'allow-oom'}}",
        "SET | x | 1",
        "CONFIG | SET | maxmemory | 1",
        "EVAL | #!lua\\nreturn 1 | 0",
        "EVAL | #!lua flags=allow-oom\\nreturn redis.call('set', 'x', 2) | 0",
        "EVAL | #!lua flags=no-writes\\nreturn redis.call('get', 'x') | 0",
        "EVAL_RO | #!lua\\nreturn 1 | 0",
        "EVAL | return redis.pcall('set', 'x', 3) | 0",
        "EVAL | return redis.call('get', 'x') | 0",
        "FCALL | w | 1 | x",
        "FCALL | oom | 1 | x",
        "FUNCTION | LOAD | #!lua name=other\\nredis.register_function('o', function() return 1 end)",
        "CONFIG | SET | maxmemory | 0",
        "CONFIG | SET | min-replicas-to-write | 1",
        "EVAL | #!lua\\nreturn redis.call('get', 'x') | 0",
        "EVAL | #!lua flags=no-writes\\nreturn redis.call('get', 'x') | 0",
        "EVAL | return redis.call('get', 'x') | 0",
        "EVAL | return redis.pcall('set', 'x', 4) | 0",
        "CONFIG | SET | min-replicas-to-write | 0",
        "EVAL | return redis.pcall('cluster', 'reset', 'hard') | 0",
        "EVAL | return redis.pcall('cluster') | 0",
        "EVAL | return redis.pcall('xread', 'BLOCK', '0', 'STREAMS', 's', '$') | 0",
        "EVAL | return redis.pcall('XRead', 'COUNT', '1', 'BLOCK', '0', 'STREAMS', 's', '$') | 0",
        "EVAL | return redis.pcall('xread', 'COUNT', 'x', 'BLOCK', '0', 'STREAMS', 's', '$') | 0",
        "EVAL | return redis.pcall('xreadgroup', 'GROUP', 'g', 'c', 'BLOCK', '0', 'STREAMS', 's', '>') | 0",
        "EVAL | return redis.pcall('xreadgroup', 'GROUP', 'g', 'c', 'NOACK', 'BLOCK', '0', 'STREAMS', 's', '>') | 0",
        "EVAL | return redis.pcall('xread', 'STREAMS', 's', '0') | 0",
        "EVAL | return redis.pcall('debug', 'protocol', 'double') | 0",
        "DEBUG | SET-DISABLE-DENY-SCRIPTS | 1",
        "EVAL | return redis.call('debug', 'protocol', 'double') | 0",
        "EVAL | redis.setresp(3) return redis.call('debug', 'protocol', 'double') | 0",
        "EVAL | redis.setresp(3) return redis.call('debug', 'protocol', 'bignum') | 0",
        "EVAL | redis.setresp(3) return redis.call('debug', 'protocol', 'map') | 0",
        "EVAL | redis.setresp(3) return redis.call('debug', 'protocol', 'set') | 0",
        "EVAL | redis.setresp(3) return redis.call('debug', 'protocol', 'verbatim') | 0",
        "EVAL | redis.setresp(3) return redis.call('debug', 'protocol', 'true') | 0",
        "EVAL | redis.setresp(3) return redis.call('debug', 'protocol', 'null') | 0",
        "EVAL | redis.setresp(3) return redis.call('debug', 'protocol', 'attrib') | 0",
        "EVAL | redis.call('set', 'k', 'v', 'PX', '1') redis.call('debug', 'sleep', '0.01') return redis.call('exists', 'k') | 0",
        "DEBUG | SET-DISABLE-DENY-SCRIPTS | 0",
        "EVAL | return redis.pcall('debug', 'protocol', 'double') | 0",
    ];
    let failures = differences(redis.port, respite.port, &[], session);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The commands a script calls are counted in INFO commandstats as redis
/// counts them: run (`calls`, `failed_calls` for an error reply) or
/// refused before they ran (`rejected_calls`: arity, `noscript`, a write
/// from a read-only script), and so is the script's own call, whether or
/// not it publishes; against redis-server.
#[test]
fn script_calls_in_commandstats_differential() {
    let respite = Respited::start(&[]);
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let fields = |info: &[u8], cmd: &str| -> String {
        let text = String::from_utf8_lossy(info).into_owned();
        let Some(line) = text
            .lines()
            .find(|l| l.starts_with(&format!("cmdstat_{cmd}:")))
        else {
            return String::new();
        };
        line.split(',')
            .filter(|f| !f.contains("usec"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut seen = Vec::new();
    for port in [redis.port, respite.port] {
        let mut c = Conn::open(port, 2);
        c.command(&["CONFIG", "RESETSTAT"]);
        c.command(&[
            "EVAL",
            "redis.call('set', 'k', 'v') redis.pcall('set', 'k') redis.pcall('incr', 'k') \
             redis.pcall('cluster', 'info') return redis.call('get', 'k')",
            "0",
        ]);
        c.command(&["EVAL_RO", "return redis.pcall('set', 'k', 'v')", "0"]);
        // A script that names PUBLISH: its reply waits for its messages,
        // and its call is counted (failed: its reply is an error) then.
        c.command(&["EVAL", "return redis.pcall('publish', 'ch')", "0"]);
        c.command(&["EVAL", "return redis.call('publish', 'ch', 'm')", "0"]);
        let info = c.command(&["INFO", "commandstats"]);
        seen.push(
            [
                "set", "get", "incr", "cluster", "publish", "eval", "eval_ro",
            ]
            .map(|cmd| fields(&info, cmd))
            .to_vec(),
        );
    }
    assert_eq!(seen[0], seen[1]);
}

/// The Lua security fixes, reply by reply against redis-server 7.0.15 as
/// distributions ship it (with the 2025 Lua fixes): malformed long
/// strings and comments (CVE-2025-46819's lexer paths: unfinished,
/// invalid delimiters, a `[[` nested inside, long runs of `=`) compile to
/// redis's errors or strings, and `unpack` and `rawget` at the edges of
/// the int range (CVE-2025-46817) answer redis's values or "too many
/// results to unpack"; none of them takes the server down.
#[test]
fn lua_security_fixes_differential() {
    let respite = Respited::start(&[]);
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let compile =
        |code: &str| format!("local f, e = loadstring({code}) return {{f and 1 or 0, e}}");
    let mut scripts: Vec<String> = [
        "'x = [[abc'",
        "'--[[ unfinished comment'",
        "'x = [==[abc]=]'",
        "'x = [='",
        "'x = [==x'",
        "'--[==[ abc ]='",
        "'x = [[' .. string.rep('=', 100000)",
        "'--[' .. string.rep('=', 100000) .. '['",
        "'--[' .. string.rep('=', 100000)",
        "'x = [' .. string.rep('=', 100000) .. 'x'",
        "'x = [[a]] .. [[b'",
        "'x = [[ [[ ]]'",
        "'x = [[ [['",
        "'--[[ a [[ b ]] return 1'",
        "'--[[\\n\\n[[\\n' .. string.rep('a', 70000)",
        "'return [==[ [==[ [[ ]==]'",
    ]
    .iter()
    .map(|code| compile(code))
    .collect();
    scripts.extend(
        [
            "return [[a [[ b]]",
            "return loadstring('return [[a [[ b]] .. [[c]]')()",
            "return unpack({}, -2147483648, -2147483648)",
            "return unpack({1, 2, 3}, 2147483646, 2147483647)",
            "return unpack({}, 0, 2147483647)",
            "return unpack({}, -2147483648, 2147483647)",
            "return unpack({}, -2147483647, 0)",
            "return rawget({}, -2147483648)",
            "local t = {} t[-2147483648] = 'min' return {rawget(t, -2147483648), unpack(t, -2147483648, -2147483648)}",
            "return #{unpack({1, 2}, -1, 1)}",
        ]
        .map(String::from),
    );
    let mut failures = Vec::new();
    let mut theirs = Conn::open(redis.port, 2);
    let mut ours = Conn::open(respite.port, 2);
    for script in &scripts {
        let expected = theirs.command(&["EVAL", script, "0"]);
        let got = ours.command(&["EVAL", script, "0"]);
        if expected != got {
            failures.push(format!(
                "{script:.120}\n  redis:   {:.300}\n  respite: {:.300}",
                String::from_utf8_lossy(&expected),
                String::from_utf8_lossy(&got)
            ));
        }
    }
    assert_eq!(ours.command(&["PING"]), b"+PONG\r\n");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// INFO errorstats, `total_error_replies` and the scripts' `failed_calls`
/// against redis-server 7.0, case by case from a reset: an error a
/// `redis.call` meets counts once, when the call fails, whether the script
/// raises it, catches it with `redis.pcall`, or returns it (as its reply
/// or inside a table); a refusal of the call (unknown command, arity, a
/// write from a read-only script, the ACL) counts the same; an error the
/// script makes itself counts when it is replied, nested ones included;
/// the script's call fails when its reply holds an error.
#[test]
fn script_errors_in_errorstats_differential() {
    let respite = Respited::start(&[]);
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let cases: &[&[&str]] = &[
        &["EVAL", "return redis.call('incr', KEYS[1])", "1", "s"],
        &[
            "EVAL",
            "local r = redis.pcall('incr', KEYS[1]) return 1",
            "1",
            "s",
        ],
        &["EVAL", "return redis.pcall('incr', KEYS[1])", "1", "s"],
        &["EVAL", "return {1, redis.pcall('incr', KEYS[1])}", "1", "s"],
        &[
            "EVAL",
            "local e = redis.pcall('incr', KEYS[1]) error(e)",
            "1",
            "s",
        ],
        &[
            "EVAL",
            "return {1, redis.error_reply('XY bad'), {err='ZZ q'}}",
            "0",
        ],
        &["EVAL", "return redis.error_reply('MY err')", "0"],
        &["EVAL", "error('boom')", "0"],
        &["EVAL", "error({err='XYZ bad'})", "0"],
        &["EVAL", "return redis.call('nosuch')", "0"],
        &["EVAL", "local ok = redis.pcall('nosuch') return 1", "0"],
        &["EVAL", "return redis.call('get')", "0"],
        &["EVAL", "local ok = redis.pcall('get') return 1", "0"],
        &["EVAL", "local ok = pcall(redis.call, {}) return 1", "0"],
        &["EVAL", "return redis.call({})", "0"],
        &["EVAL_RO", "return redis.call('set', 'x', 'y')", "0"],
        &[
            "EVAL_RO",
            "local ok = redis.pcall('set', 'x', 'y') return 1",
            "0",
        ],
        &["EVAL", "return 1 +", "0"],
        &["EVALSHA", "ffffffffffffffffffffffffffffffffffffffff", "0"],
        &["EVAL", "return {err='ERR x'}", "-1"],
        &["FCALL", "nosuch", "0"],
        &["FCALL", "rmw", "1", "s"],
        &["FCALL", "catch", "1", "s"],
        &["EVAL", "return redis.call('set', 'x', 'y')", "0"],
    ];
    let library = "#!lua name=errs\n\
        redis.register_function('rmw', function(k) return redis.call('incr', k[1]) end)\n\
        redis.register_function('catch', function(k) redis.pcall('incr', k[1]) return 'ok' end)";
    let stats = |c: &mut Conn| -> Vec<String> {
        let mut out = Vec::new();
        for section in ["errorstats", "stats", "commandstats"] {
            let text = String::from_utf8_lossy(&c.command(&["INFO", section])).into_owned();
            let mut lines: Vec<String> = text
                .lines()
                .filter(|l| {
                    l.starts_with("errorstat_")
                        || l.starts_with("total_error_replies:")
                        || (l.starts_with("cmdstat_")
                            && !l.contains("info")
                            && !l.contains("config"))
                })
                .map(|l| {
                    // Counts only: the times differ.
                    l.split(',')
                        .filter(|f| !f.contains("usec"))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .collect();
            lines.sort();
            out.extend(lines);
        }
        out
    };
    let mut seen: Vec<Vec<(Vec<u8>, Vec<String>)>> = Vec::new();
    for port in [redis.port, respite.port] {
        let mut c = Conn::open(port, 2);
        c.command(&["SET", "s", "not a number"]);
        c.command(&["FUNCTION", "LOAD", library]);
        let mut results = Vec::new();
        for case in cases {
            c.command(&["CONFIG", "RESETSTAT"]);
            let reply = c.command(case);
            results.push((reply, stats(&mut c)));
        }
        seen.push(results);
    }
    for (i, case) in cases.iter().enumerate() {
        assert_eq!(seen[0][i], seen[1][i], "{case:?}");
    }
}

/// The ACL refusal of a script's call counts as an error when it happens,
/// caught or not, as in redis-server 7.0.
#[test]
fn script_acl_refusals_in_errorstats_differential() {
    let respite = Respited::start(&[]);
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let mut seen = Vec::new();
    for port in [redis.port, respite.port] {
        let mut admin = Conn::open(port, 2);
        admin.command(&["ACL", "SETUSER", "u1", "on", ">p", "~*", "+@all", "-set"]);
        let mut c = Conn::open(port, 2);
        c.command(&["AUTH", "u1", "p"]);
        admin.command(&["CONFIG", "RESETSTAT"]);
        let raised = c.command(&["EVAL", "return redis.call('set', 'a', 'b')", "0"]);
        let caught = c.command(&[
            "EVAL",
            "local r = redis.pcall('set', 'a', 'b') return r['err']",
            "0",
        ]);
        let errors = String::from_utf8_lossy(&admin.command(&["INFO", "errorstats"])).into_owned();
        let total = String::from_utf8_lossy(&admin.command(&["INFO", "stats"]))
            .lines()
            .find(|l| l.starts_with("total_error_replies:"))
            .map(str::to_string);
        seen.push((raised, caught, errors, total));
    }
    assert_eq!(seen[0], seen[1]);
}

/// MONITOR shows a script's own command, then each call it makes as a
/// `[db lua]` line (the database as the call left it), for EVAL, EVALSHA,
/// EVAL_RO and FCALL, and a script command that fails after it started;
/// a call refused before it runs is not shown. Compared with
/// redis-server 7.0 line by line, without times and client ports.
#[test]
fn monitor_shows_script_calls_differential() {
    let respite = Respited::start(&[]);
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let rmw = "redis.call('set', KEYS[1], ARGV[1]) redis.pcall('incr', KEYS[1]) \
               redis.pcall('nosuch') redis.pcall('get') return redis.call('get', KEYS[1])";
    let mut outputs = Vec::new();
    for port in [redis.port, respite.port] {
        let mut c = Conn::open(port, 2);
        c.command(&[
            "FUNCTION",
            "LOAD",
            "#!lua name=mon\nredis.register_function('f', function(k, a) \
             return redis.call('set', k[1], a[1]) end)",
        ]);
        let sha = c.command(&["SCRIPT", "LOAD", "return redis.call('ping')"]);
        let sha = String::from_utf8_lossy(&sha[5..45]).into_owned();
        let mut mon = common::raw_for(port);
        assert_eq!(common::exchange(&mut mon, b"MONITOR\r\n", 5), b"+OK\r\n");
        c.command(&["EVAL", rmw, "1", "k", "v"]);
        c.command(&["EVALSHA", &sha, "0"]);
        c.command(&["EVAL_RO", "return redis.call('get', KEYS[1])", "1", "k"]);
        c.command(&["FCALL", "f", "1", "fk", "fv"]);
        c.command(&["FCALL", "nosuch", "0"]);
        c.command(&["EVAL", "return redis.call('incr', 'k')", "0"]);
        c.command(&["SELECT", "3"]);
        c.command(&[
            "EVAL",
            "redis.call('select', 5) return redis.call('echo', 'x')",
            "0",
        ]);
        c.command(&["PING"]);
        let (text, _) = common::read_until_quiet(&mut mon, Duration::from_millis(500));
        let lines: Vec<String> = String::from_utf8(text)
            .unwrap()
            .split("\r\n")
            .filter(|l| !l.is_empty())
            .map(|l| {
                // `+time [db addr] args` -> `[db addr'] args`, the address
                // kept only when it is `lua`.
                let (_, rest) = l.split_once(' ').unwrap();
                let (head, args) = rest.split_once("] ").unwrap();
                let (db, addr) = head.trim_start_matches('[').split_once(' ').unwrap();
                let who = if addr == "lua" { "lua" } else { "client" };
                format!("[{db} {who}] {args}")
            })
            .collect();
        outputs.push(lines);
    }
    assert_eq!(outputs[0], outputs[1]);
    assert!(outputs[1].contains(&r#"[0 lua] "set" "k" "v""#.to_string()));
    assert!(outputs[1].contains(&r#"[5 lua] "echo" "x""#.to_string()));
}

/// The slow log keeps a script's calls as redis-server 7.0 does: each
/// call as its own entry, logged before the script's, from a client with
/// no address (`?:0`) and no name.
#[test]
fn slowlog_keeps_script_calls_differential() {
    let respite = Respited::start(&[]);
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let mut seen = Vec::new();
    for port in [redis.port, respite.port] {
        let mut c = Conn::open(port, 2);
        c.command(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
        c.command(&["CLIENT", "SETNAME", "scripter"]);
        c.command(&["SLOWLOG", "RESET"]);
        c.command(&[
            "EVAL",
            "redis.call('set', 'a', 'b') redis.pcall('nosuch') return redis.call('get', 'a')",
            "0",
        ]);
        c.command(&["CONFIG", "SET", "slowlog-log-slower-than", "-1"]);
        let mut reader = redis::Client::open(format!("redis://127.0.0.1:{port}"))
            .unwrap()
            .get_connection()
            .unwrap();
        let entries: Vec<redis::Value> = redis::cmd("SLOWLOG")
            .arg("GET")
            .arg(-1)
            .query(&mut reader)
            .unwrap();
        // Each entry without its id, time and duration: the command, the
        // client's address (kept only as "?:0" or not) and its name.
        let shown: Vec<String> = entries
            .iter()
            .map(|e| {
                let redis::Value::Array(fields) = e else {
                    panic!("{e:?}")
                };
                let text = |v: &redis::Value| match v {
                    redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                    other => format!("{other:?}"),
                };
                let redis::Value::Array(argv) = &fields[3] else {
                    panic!("{e:?}")
                };
                let args: Vec<String> = argv.iter().map(text).collect();
                let addr = text(&fields[4]);
                let addr = if addr == "?:0" { addr } else { "client".into() };
                format!("{} {} {}", args.join(" "), addr, text(&fields[5]))
            })
            .collect();
        seen.push(shown);
    }
    assert_eq!(seen[0], seen[1]);
    assert!(seen[1].iter().any(|l| l == "get a ?:0 "), "{:?}", seen[1]);
}

/// Hostile nesting meets redis-server 7.0's bounds and errors, reply by
/// reply: `cmsgpack.unpack` of arrays, maps and flat values up to Lua's
/// stack limit and one past it ("stack overflow (in function
/// mp_decode_to_lua_array)", "too many return values at once..."),
/// `struct.unpack` likewise, `cmsgpack.pack` and `cjson.encode` of a
/// 10,000-deep table (packed as nil past 16 levels; "Cannot serialise,
/// excessive nesting"), and a script returning a 10,000-deep table ("ERR
/// reached lua stack limit" where the reply passes Lua's stack), from
/// the writer and from the read pool, in RESP2 and RESP3. The server keeps
/// serving on its ordinary thread stacks.
#[test]
fn hostile_nesting_meets_redis_bounds_differential() {
    // The replies nest thousands deep and `frame_len` reads them
    // recursively: more than a test thread's default stack.
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(hostile_nesting)
        .expect("thread")
        .join()
        .expect("hostile nesting");
}

fn hostile_nesting() {
    let respite = Respited::start(&[]);
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let deep = |levels: u32, body: &str| {
        format!("local t = {{}} local c = t for i = 1, {levels} do {body} end")
    };
    let mut scripts: Vec<String> = Vec::new();
    for (n, byte) in [
        (3999, "0x91"),
        (4000, "0x91"),
        (3999, "0x81, 0x00"),
        (4000, "0x81, 0x00"),
    ] {
        scripts.push(format!(
            "local ok, e = pcall(cmsgpack.unpack, string.rep(string.char({byte}), {n}) .. string.char(0)) \
             return {{tostring(ok), type(e) == 'string' and e or type(e)}}"
        ));
    }
    for n in [7999, 8000] {
        scripts.push(format!(
            "return {{pcall(function() return select('#', cmsgpack.unpack(string.rep(string.char(0), {n}))) end)}}"
        ));
        scripts.push(format!(
            "return {{pcall(function() return select('#', struct.unpack(string.rep('b', {n}), string.rep('a', {n}))) end)}}"
        ));
    }
    scripts.push(format!(
        "{} return cmsgpack.pack(t)",
        deep(10_000, "c[1] = {} c = c[1]")
    ));
    scripts.push(format!(
        "{} local ok, e = pcall(cjson.encode, t) return {{tostring(ok), e}}",
        deep(10_000, "c[1] = {} c = c[1]")
    ));
    for levels in [7_000, 10_000] {
        scripts.push(format!("{} return t", deep(levels, "c[1] = {} c = c[1]")));
        scripts.push(format!("{} return t", deep(levels, "c[1] = {1} c = c[1]")));
        scripts.push(format!("{} return t", deep(levels, "c.map = {} c = c.map")));
    }
    for resp in [2u8, 3] {
        let mut ours = Conn::open(respite.port, resp);
        let mut theirs = Conn::open(redis.port, resp);
        for script in &scripts {
            for command in ["EVAL", "EVAL_RO"] {
                let got = ours.command(&[command, script.as_str(), "0"]);
                let want = theirs.command(&[command, script.as_str(), "0"]);
                assert!(
                    got == want,
                    "RESP{resp} {command} {script:.120}: {:.300} against {:.300}",
                    String::from_utf8_lossy(&got),
                    String::from_utf8_lossy(&want)
                );
            }
        }
    }
    let mut c = Conn::open(respite.port, 2);
    assert_eq!(c.command(&["PING"]), b"+PONG\r\n");
}

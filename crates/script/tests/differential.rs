//! respite-script against a real redis-server 7.0, reply by reply.
//!
//! Each case is a script run twice: by redis-server's own EVAL, and by an
//! [`Engine`] whose [`Host`] sends every `redis.call` to the same
//! redis-server and hands back its raw reply (so the conversions under test
//! get real replies). Both replies are compared as RESP bytes, once with a
//! RESP2 client and once with a RESP3 one, after a FLUSHALL each time so
//! scripts that write see the same data. Where redis-server is not
//! installed the test skips, unless `RESPITE_REQUIRE_REDIS=1`.

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use respite_script::{Engine, Host, LogLevel, RunOptions, Script, Value};

// The daemon's tests' raw RESP connection (replies as the server's bytes).
#[path = "../../../bin/respited/tests/common/resp_conn.rs"]
mod resp_conn;
use resp_conn::Conn;

struct RedisServer {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_redis() -> Option<RedisServer> {
    if Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_err()
    {
        if std::env::var("RESPITE_REQUIRE_REDIS").is_ok_and(|v| v == "1") {
            panic!("redis-server not found and RESPITE_REQUIRE_REDIS=1");
        }
        eprintln!("skipping: redis-server not found");
        return None;
    }
    for _ in 0..5 {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("free port");
        let dir = tempfile::tempdir().expect("tempdir");
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(["--dir", dir.path().to_str().expect("utf-8 path")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        let mut server = RedisServer {
            child,
            port,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(server);
            }
            if let Ok(Some(_)) = server.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    panic!("could not start redis-server");
}

/// A host that runs `redis.call` on the redis-server.
struct Forward {
    resp2: Conn,
    resp3: Conn,
}

impl Host for Forward {
    fn call(&mut self, argv: Vec<Vec<u8>>, resp: u8) -> Result<Vec<u8>, Vec<u8>> {
        Ok(if resp == 3 {
            self.resp3.command(&argv)
        } else {
            self.resp2.command(&argv)
        })
    }

    fn acl_check(&mut self, _argv: &[Vec<u8>]) -> Option<bool> {
        Some(true)
    }

    fn log(&mut self, _level: LogLevel, _message: &[u8]) {}
}

fn g17(d: f64) -> String {
    if d.is_infinite() {
        return if d > 0.0 { "inf" } else { "-inf" }.into();
    }
    let mut buf = [0u8; 64];
    let n = unsafe { libc_snprintf(buf.as_mut_ptr(), buf.len(), c"%.17g".as_ptr(), d) };
    String::from_utf8_lossy(&buf[..n as usize]).into_owned()
}

unsafe extern "C" {
    #[link_name = "snprintf"]
    fn libc_snprintf(buf: *mut u8, len: usize, fmt: *const std::ffi::c_char, ...) -> i32;
}

fn bulk(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// A script's reply as redis writes it to a client of protocol `resp`.
fn encode(v: &Value, resp: u8, out: &mut Vec<u8>) {
    match v {
        Value::Status(s) => {
            out.push(b'+');
            out.extend_from_slice(s);
            out.extend_from_slice(b"\r\n");
        }
        Value::Error(s) | Value::CalledError(s) => {
            out.push(b'-');
            out.extend_from_slice(s);
            out.extend_from_slice(b"\r\n");
        }
        Value::Int(n) => out.extend_from_slice(format!(":{n}\r\n").as_bytes()),
        Value::Bulk(b) => bulk(out, b),
        Value::Null => out.extend_from_slice(if resp == 3 { b"_\r\n" } else { b"$-1\r\n" }),
        Value::Array(items) | Value::Set(items) => {
            let t = if resp == 3 && matches!(v, Value::Set(_)) {
                '~'
            } else {
                '*'
            };
            out.extend_from_slice(format!("{t}{}\r\n", items.len()).as_bytes());
            for i in items {
                encode(i, resp, out);
            }
        }
        Value::Map(pairs) => {
            if resp == 3 {
                out.extend_from_slice(format!("%{}\r\n", pairs.len()).as_bytes());
            } else {
                out.extend_from_slice(format!("*{}\r\n", pairs.len() * 2).as_bytes());
            }
            for (k, v) in pairs {
                encode(k, resp, out);
                encode(v, resp, out);
            }
        }
        Value::Double(d) => {
            let s = g17(*d);
            if resp == 3 {
                out.extend_from_slice(format!(",{s}\r\n").as_bytes());
            } else {
                bulk(out, s.as_bytes());
            }
        }
        Value::Bool(b) => out.extend_from_slice(match (resp, b) {
            (3, true) => b"#t\r\n",
            (3, false) => b"#f\r\n",
            (_, true) => b":1\r\n",
            (_, false) => b":0\r\n",
        }),
        Value::BigNumber(n) => {
            if resp == 3 {
                out.push(b'(');
                out.extend_from_slice(n);
                out.extend_from_slice(b"\r\n");
            } else {
                bulk(out, n);
            }
        }
        Value::Verbatim(format, text) => {
            if resp == 3 {
                out.extend_from_slice(format!("={}\r\n", text.len() + 4).as_bytes());
                out.extend_from_slice(format);
                out.push(b':');
                out.extend_from_slice(text);
                out.extend_from_slice(b"\r\n");
            } else {
                bulk(out, text);
            }
        }
    }
}

/// Runs every case on both sides and reports each difference.
fn compare(cases: &[(&str, &[&str], &[&str])]) {
    let Some(redis) = start_redis() else {
        return;
    };
    let mut client2 = Conn::open(redis.port, 2);
    let mut client3 = Conn::open(redis.port, 3);
    let mut host = Forward {
        resp2: Conn::open(redis.port, 2),
        resp3: Conn::open(redis.port, 3),
    };
    let mut engine = Engine::new().expect("engine");
    let mut failures = Vec::new();
    for (body, keys, args) in cases {
        if std::env::var_os("RESPITE_TRACE").is_some() {
            eprintln!("case {body:?}");
        }
        let script = Script::new(body.as_bytes().to_vec()).expect("shebang");
        for resp in [2u8, 3] {
            let client = if resp == 2 {
                &mut client2
            } else {
                &mut client3
            };
            client.command(&["FLUSHALL"]);
            let mut eval: Vec<Vec<u8>> = vec![b"EVAL".to_vec(), body.as_bytes().to_vec()];
            eval.push(keys.len().to_string().into_bytes());
            eval.extend(keys.iter().map(|k| k.as_bytes().to_vec()));
            eval.extend(args.iter().map(|a| a.as_bytes().to_vec()));
            let expected = client.command(&eval);
            client.command(&["FLUSHALL"]);
            let k: Vec<&[u8]> = keys.iter().map(|s| s.as_bytes()).collect();
            let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
            let value = engine.run(&script, &k, &a, &mut host, RunOptions::default());
            let mut got = Vec::new();
            encode(&value, resp, &mut got);
            if got != expected {
                failures.push(format!(
                    "RESP{resp} {body:?}\n  redis:   {:?}\n  respite: {:?}",
                    String::from_utf8_lossy(&expected),
                    String::from_utf8_lossy(&got)
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} differ:\n{}",
        failures.len(),
        cases.len() * 2,
        failures.join("\n")
    );
}

const NONE: &[&str] = &[];

#[test]
fn conversions() {
    compare(&[
        ("return 1", NONE, NONE),
        ("return 1.9", NONE, NONE),
        ("return -1.9", NONE, NONE),
        ("return 1e20", NONE, NONE),
        ("return -1e20", NONE, NONE),
        ("return 0/0", NONE, NONE),
        ("return 'x'", NONE, NONE),
        ("return ''", NONE, NONE),
        ("return true", NONE, NONE),
        ("return false", NONE, NONE),
        ("return nil", NONE, NONE),
        ("return", NONE, NONE),
        ("return {1,2,3,'x',nil,4}", NONE, NONE),
        ("return {1,{2,{3,{true,false}}}}", NONE, NONE),
        ("return {}", NONE, NONE),
        ("return {a=1}", NONE, NONE),
        ("return {err='My Error'}", NONE, NONE),
        ("return {err='-X'}", NONE, NONE),
        ("return {ok='fine'}", NONE, NONE),
        ("return {ok='line\\r\\nbreak'}", NONE, NONE),
        ("return redis.error_reply('X bad thing')", NONE, NONE),
        ("return redis.error_reply('-X bad thing')", NONE, NONE),
        ("return redis.error_reply('bad')", NONE, NONE),
        ("return redis.error_reply('')", NONE, NONE),
        ("return redis.error_reply(1)", NONE, NONE),
        ("return redis.status_reply('PONG')", NONE, NONE),
        ("return redis.status_reply()", NONE, NONE),
        ("return {double=3.14}", NONE, NONE),
        ("return {double=1/0}", NONE, NONE),
        ("return {double='x'}", NONE, NONE),
        ("return {map={a=1}}", NONE, NONE),
        ("return {map={a=1,b={1,2},c={map={x='y'}}}}", NONE, NONE),
        ("return {set={a=true}}", NONE, NONE),
        ("return {big_number='123456789012345678901234567890'}", NONE, NONE),
        ("return {verbatim_string={format='txt', string='hi'}}", NONE, NONE),
        ("return {1, {err='inner'}, {ok='ok'}, 3}", NONE, NONE),
        ("return KEYS", &["a", "b"], &["c"]),
        ("return ARGV", &["a", "b"], &["c", "d"]),
        ("return {#KEYS, #ARGV}", NONE, NONE),
        ("redis.setresp(3); return true", NONE, NONE),
        ("redis.setresp(3); return false", NONE, NONE),
        ("redis.setresp(3); return {true, false, 1}", NONE, NONE),
        ("redis.setresp(4)", NONE, NONE),
        ("redis.setresp()", NONE, NONE),
        ("return redis.call('set','k','v')", NONE, NONE),
        ("return redis.call('get','nokey')", NONE, NONE),
        ("return type(redis.call('get','nokey'))", NONE, NONE),
        ("redis.setresp(3); return type(redis.call('get','nokey'))", NONE, NONE),
        ("redis.setresp(3); return redis.call('get','nokey')", NONE, NONE),
        ("redis.call('hset','h','a','1','b','2'); return redis.call('hgetall','h')", NONE, NONE),
        ("redis.setresp(3); redis.call('hset','h','a','1'); return redis.call('hgetall','h')", NONE, NONE),
        ("redis.setresp(3); redis.call('hset','h','a','1'); local r = redis.call('hgetall','h'); return r.map.a", NONE, NONE),
        ("redis.setresp(3); redis.call('sadd','s','a'); return redis.call('smembers','s')", NONE, NONE),
        ("redis.setresp(3); redis.call('zadd','z','1.5','a'); return redis.call('zscore','z','a')", NONE, NONE),
        ("redis.setresp(3); redis.call('zadd','z','1.5','a'); return redis.call('zscore','z','a').double", NONE, NONE),
        ("redis.call('zadd','z','1.5','a'); return redis.call('zscore','z','a')", NONE, NONE),
        ("redis.setresp(3); return redis.call('exists','x') == 0", NONE, NONE),
        ("return redis.call('ping')", NONE, NONE),
        ("return redis.call('lrange','nolist',0,-1)", NONE, NONE),
        ("redis.call('set','s','x'); return redis.pcall('incr','s')", NONE, NONE),
        ("redis.call('set','s','x'); return redis.call('incr','s')", NONE, NONE),
        ("redis.call('set','s','x'); local ok, e = pcall(function() return redis.call('incr','s') end); return {tostring(ok), e}", NONE, NONE),
        ("redis.call('set','s','x'); local r = redis.pcall('incr','s'); return r.err", NONE, NONE),
        ("redis.call('set','s','x'); local ok, e = pcall(redis.call, 'incr', 's'); return e", NONE, NONE),
        ("redis.call('lpush','l','a'); return redis.pcall('get','l')", NONE, NONE),
        ("return redis.call()", NONE, NONE),
        ("return redis.pcall()", NONE, NONE),
        ("return redis.call('set','k',{})", NONE, NONE),
        ("return redis.pcall('set','k',{})", NONE, NONE),
        ("redis.call('set','n',3.5); return redis.call('get','n')", NONE, NONE),
        ("redis.call('set','n',0.1); return redis.call('get','n')", NONE, NONE),
        ("redis.call('set','n',1e20); return redis.call('get','n')", NONE, NONE),
        ("redis.call('set','n',-0); return redis.call('get','n')", NONE, NONE),
        ("redis.call('set','n',12345678901234567); return redis.call('get','n')", NONE, NONE),
        ("return redis.call('incrbyfloat','f','1.5')", NONE, NONE),
        ("return tostring(1e15)", NONE, NONE),
        ("return tostring(0.1)", NONE, NONE),
        ("return tostring(1/3)", NONE, NONE),
        ("error('boom')", NONE, NONE),
        ("error({err='CUSTOM boom'})", NONE, NONE),
        ("error()", NONE, NONE),
        ("error('x', 0)", NONE, NONE),
        ("local t = nil; return t.x", NONE, NONE),
        ("\n\nreturn nosuch()", NONE, NONE),
        ("return 'a' + 1", NONE, NONE),
        ("return redis.sha1hex('')", NONE, NONE),
        ("return redis.sha1hex('abc')", NONE, NONE),
        ("return redis.sha1hex(123)", NONE, NONE),
        ("return redis.sha1hex()", NONE, NONE),
        ("return {redis.REDIS_VERSION_NUM, redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING}", NONE, NONE),
        ("return {redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL}", NONE, NONE),
        ("redis.log(redis.LOG_WARNING, 'hello', 1, {}, 'x'); return 1", NONE, NONE),
        ("redis.log(9, 'x')", NONE, NONE),
        ("redis.log('x', 'x')", NONE, NONE),
        ("redis.log(1)", NONE, NONE),
        ("redis.set_repl(redis.REPL_ALL); return 1", NONE, NONE),
        ("redis.set_repl(9)", NONE, NONE),
        ("redis.set_repl()", NONE, NONE),
        ("return redis.replicate_commands()", NONE, NONE),
        ("return redis.breakpoint()", NONE, NONE),
        ("return redis.debug('x')", NONE, NONE),
        ("math.randomseed(42); return {tostring(math.random()), math.random(100), math.random(5,10)}", NONE, NONE),
        ("return math.random(0)", NONE, NONE),
        ("return math.random(5,1)", NONE, NONE),
        ("return math.random(1,2,3)", NONE, NONE),
        ("return table.getn({1,2,3})", NONE, NONE),
        ("return unpack({1,2,3})", NONE, NONE),
        ("return select('#', unpack({1,2,3}))", NONE, NONE),
        ("return loadstring('return 5')()", NONE, NONE),
        ("return {pcall(error)}", NONE, NONE),
        ("return {pcall(function() error({err='E x'}) end)}", NONE, NONE),
        ("return {pcall(function() error({err=1}) end)}", NONE, NONE),
        ("return {pcall(function() error({other=1}) end)}", NONE, NONE),
        ("return {xpcall(function() error('e') end, function(m) return 'handled: ' .. m end)}", NONE, NONE),
        ("return string.format('%5.2f|%d|%s|%q', 3.14159, 42, 'x', 'a\\nb')", NONE, NONE),
        ("return _VERSION", NONE, NONE),
        ("return string.rep('ab', 3, ',')", NONE, NONE),
        ("return #string.rep('x', 1000)", NONE, NONE),
        ("local s = 0; for i = 1, 100000 do s = s + i end; return s", NONE, NONE),
    ]);
}

#[test]
fn sandbox() {
    compare(&[
        ("a = 10", NONE, NONE),
        ("return a", NONE, NONE),
        ("return x.y", NONE, NONE),
        ("local t = {}; for k in pairs(_G) do t[#t+1] = k end; table.sort(t); return t", NONE, NONE),
        ("local t = {}; for k in pairs(redis) do t[#t+1] = k end; table.sort(t); return t", NONE, NONE),
        ("local t = {}; for k in pairs(string) do t[#t+1] = k end; table.sort(t); return t", NONE, NONE),
        ("local t = {}; for k in pairs(math) do t[#t+1] = k end; table.sort(t); return t", NONE, NONE),
        ("local t = {}; for k in pairs(table) do t[#t+1] = k end; table.sort(t); return t", NONE, NONE),
        ("local t = {}; for k in pairs(coroutine) do t[#t+1] = k end; table.sort(t); return t", NONE, NONE),
        ("local t = {}; for k, v in pairs(cjson) do t[#t+1] = k .. '=' .. type(v) end; table.sort(t); return t", NONE, NONE),
        ("local t = {}; for k, v in pairs(cmsgpack) do t[#t+1] = k .. '=' .. tostring(type(v) == 'string' and v or type(v)) end; table.sort(t); return t", NONE, NONE),
        ("local t = {}; for k in pairs(struct) do t[#t+1] = k end; table.sort(t); return t", NONE, NONE),
        ("local t = {}; for k in pairs(bit) do t[#t+1] = k end; table.sort(t); return t", NONE, NONE),
        ("print('x')", NONE, NONE),
        ("loadfile('x')", NONE, NONE),
        ("dofile('x')", NONE, NONE),
        ("return io", NONE, NONE),
        ("return os.time()", NONE, NONE),
        ("return package", NONE, NONE),
        ("return debug", NONE, NONE),
        ("return require", NONE, NONE),
        ("return module", NONE, NONE),
        ("setmetatable(_G, {})", NONE, NONE),
        ("local g = getmetatable(_G); g.__index = {}", NONE, NONE),
        ("redis = function() return 1 end", NONE, NONE),
        ("_G = {}", NONE, NONE),
        ("redis.call = function() return 1 end", NONE, NONE),
        ("cjson.encode = function() return 1 end", NONE, NONE),
        ("cmsgpack.pack = function() return 1 end", NONE, NONE),
        ("bit.lshift = function() return 1 end", NONE, NONE),
        ("string.upper = nil", NONE, NONE),
        ("rawset(_G, 'x', 1)", NONE, NONE),
        ("rawset(string, 'x', 1)", NONE, NONE),
        ("table.insert(math, 1)", NONE, NONE),
        ("KEYS[1] = 'x'; return KEYS", &["a"], NONE),
        ("local t = {}; t.x = 1; setmetatable(t, {}); return t.x", NONE, NONE),
        ("getmetatable('').__index.upper = nil", NONE, NONE),
        ("return loadstring(string.dump(function() return 1 end))()", NONE, NONE),
        ("return {loadstring(string.dump(function() return 1 end))}", NONE, NONE),
        ("return {loadstring('x =')}", NONE, NONE),
        ("local f = loadstring('y = 1'); f()", NONE, NONE),
        ("return getfenv(0) == _G", NONE, NONE),
        ("getmetatable('').x = 1", NONE, NONE),
        ("getmetatable('').__index = {}", NONE, NONE),
        ("return getmetatable('').__index == string", NONE, NONE),
        ("return unpack({}, 1, 1e8)", NONE, NONE),
        ("return {unpack({1,2,3}, -1, 2)}", NONE, NONE),
        ("return {unpack({1,2,3}, -2147483648, 2147483647)}", NONE, NONE),
        ("setfenv(1, {})", NONE, NONE),
        ("local co = coroutine.create(function() coroutine.yield(1) return 2 end); local _, a = coroutine.resume(co); local _, b = coroutine.resume(co); return {a, b}", NONE, NONE),
        ("return newproxy() ~= nil", NONE, NONE),
        ("return gcinfo() > 0", NONE, NONE),
        ("return collectgarbage('count') > 0", NONE, NONE),
        ("local function f(n) if n == 0 then return 0 end return 1 + f(n - 1) end; return f(10000)", NONE, NONE),
        ("local function f() return f() + 1 end; return f()", NONE, NONE),
    ]);
}

#[test]
fn shebang() {
    compare(&[
        ("#!lua\nreturn 1", NONE, NONE),
        ("#!lua flags=no-writes\nreturn 1", NONE, NONE),
        ("#!lua flags=no-writes,allow-oom,allow-stale,no-cluster,allow-cross-slot-keys\nreturn 1", NONE, NONE),
        ("#!lua flags=\nreturn 1", NONE, NONE),
        ("#!lua\n\nerror('line3')", NONE, NONE),
        ("#!lua\nreturn syntax error here", NONE, NONE),
        ("return syntax error here", NONE, NONE),
        ("return 'unterminated", NONE, NONE),
    ]);
}

/// `error({})` takes redis-server 7.0 down (it formats a missing message);
/// respite answers an error.
#[test]
fn error_without_message() {
    struct NoHost;
    impl Host for NoHost {
        fn call(&mut self, _: Vec<Vec<u8>>, _: u8) -> Result<Vec<u8>, Vec<u8>> {
            Err(b"no".to_vec())
        }
        fn acl_check(&mut self, _: &[Vec<u8>]) -> Option<bool> {
            None
        }
        fn log(&mut self, _: LogLevel, _: &[u8]) {}
    }
    let mut engine = Engine::new().expect("engine");
    let script = Script::new(b"error({})".to_vec()).expect("script");
    let v = engine.run(&script, &[], &[], &mut NoHost, RunOptions::default());
    assert_eq!(
        v,
        Value::Error(
            format!(
                "ERR unknown error script: {}, on @user_script:1.",
                script.sha
            )
            .into_bytes()
        )
    );
}

#[test]
fn shebang_errors() {
    // Refused before the script runs: the texts redis gives EVAL.
    for (body, err) in [
        ("#!lua", "Invalid script shebang"),
        (
            "#!luax\nreturn 1",
            "Unexpected engine in script shebang: #!luax",
        ),
        (
            "#!lua flags=bad\nreturn 1",
            "Unexpected flag in script shebang: bad",
        ),
        (
            "#!lua flags=no-writes,\nreturn 1",
            "Unexpected flag in script shebang: ",
        ),
        (
            "#!lua name=x\nreturn 1",
            "Unknown lua shebang option: name=x",
        ),
        ("#! \nreturn 1", "Unexpected engine in script shebang: #!"),
    ] {
        assert_eq!(
            Script::new(body.as_bytes().to_vec()).unwrap_err(),
            err,
            "{body}"
        );
    }
    let Some(redis) = start_redis() else {
        return;
    };
    let mut c = Conn::open(redis.port, 2);
    for body in [
        "#!lua",
        "#!luax\nreturn 1",
        "#!lua flags=bad\nreturn 1",
        "#!lua name=x\nreturn 1",
    ] {
        let reply = c.command(&["EVAL", body, "0"]);
        let ours = format!(
            "-ERR {}\r\n",
            Script::new(body.as_bytes().to_vec()).unwrap_err()
        );
        assert_eq!(String::from_utf8_lossy(&reply), ours, "{body}");
    }
}

#[test]
fn cjson() {
    compare(&[
        ("return cjson.encode({})", NONE, NONE),
        ("return cjson.encode({1,2,3})", NONE, NONE),
        ("return cjson.encode({a=1})", NONE, NONE),
        ("return cjson.encode({a={b={c={1,'x',true,false}}}})", NONE, NONE),
        ("return cjson.encode({1,2,nil,4})", NONE, NONE),
        ("return cjson.encode({[1]=1,[20]=2})", NONE, NONE),
        ("return cjson.encode({[1]=1,[10]=2})", NONE, NONE),
        ("return cjson.encode({[0]=1})", NONE, NONE),
        ("return cjson.encode({[1.5]=1})", NONE, NONE),
        ("return cjson.encode({[true]=1})", NONE, NONE),
        ("return cjson.encode(0.1)", NONE, NONE),
        ("return cjson.encode(1e15)", NONE, NONE),
        ("return cjson.encode(123456789012345678)", NONE, NONE),
        ("return cjson.encode(-0)", NONE, NONE),
        ("return cjson.encode(1/3)", NONE, NONE),
        ("return cjson.encode(1e300 * 1e300)", NONE, NONE),
        ("return cjson.encode(0/0)", NONE, NONE),
        ("return cjson.encode('str/\"\\n\\0\\127\\1\\31 é')", NONE, NONE),
        ("return cjson.encode(cjson.null)", NONE, NONE),
        ("return cjson.encode(nil)", NONE, NONE),
        ("return cjson.encode()", NONE, NONE),
        ("return cjson.encode(1, 2)", NONE, NONE),
        ("return cjson.encode(function() end)", NONE, NONE),
        ("return cjson.encode({f=function() end})", NONE, NONE),
        ("local t = {}; t[1] = t; return cjson.encode(t)", NONE, NONE),
        ("return cjson.encode({[1]=1,[2]=2,a=3})", NONE, NONE),
        ("return cjson.encode({[2]=1})", NONE, NONE),
        ("return cjson.encode({[1]='a', [2]='b', [3]='c', [5]='e'})", NONE, NONE),
        ("return cjson.encode(KEYS)", &["k1", "k2"], NONE),
        ("return cjson.encode({x=1,y=2,z=3,w=4})", NONE, NONE),
        ("return cjson.encode(cjson.decode('{\"a\":[1,2,{\"b\":null}],\"c\":\"d\"}'))", NONE, NONE),
        ("return tostring(cjson.decode('12345678901234567890'))", NONE, NONE),
        ("return cjson.decode('12345678901234567890')", NONE, NONE),
        ("return cjson.decode('[1.5, -2, 3e2, 0.1]')", NONE, NONE),
        ("return cjson.decode('\"\\\\u00e9\\\\u20ac\\\\ud83d\\\\ude00\"')", NONE, NONE),
        ("return cjson.decode('\"\\\\ud83d\"')", NONE, NONE),
        ("return cjson.decode('\"\\\\x\"')", NONE, NONE),
        ("return cjson.decode('\"abc')", NONE, NONE),
        ("return cjson.decode('[1,2')", NONE, NONE),
        ("return cjson.decode('{\"a\" 1}')", NONE, NONE),
        ("return cjson.decode('{1:2}')", NONE, NONE),
        ("return cjson.decode('nul')", NONE, NONE),
        ("return cjson.decode('')", NONE, NONE),
        ("return cjson.decode('  ')", NONE, NONE),
        ("return cjson.decode('[] x')", NONE, NONE),
        ("return cjson.decode('0x10')", NONE, NONE),
        ("return cjson.decode('-')", NONE, NONE),
        ("return tostring(cjson.decode('inf'))", NONE, NONE),
        ("return tostring(cjson.decode('nan'))", NONE, NONE),
        ("return cjson.decode('+1')", NONE, NONE),
        ("return cjson.decode('01')", NONE, NONE),
        ("return cjson.decode('true')", NONE, NONE),
        ("return cjson.decode('false')", NONE, NONE),
        ("return type(cjson.decode('null'))", NONE, NONE),
        ("return cjson.decode('null') == cjson.null", NONE, NONE),
        ("return cjson.decode('{\"a\":1}').a", NONE, NONE),
        ("return cjson.decode('[[[[1]]]]')[1][1][1][1]", NONE, NONE),
        ("return cjson.decode(string.rep('[', 1001))", NONE, NONE),
        ("return cjson.decode(string.rep('[', 1000) .. string.rep(']', 1000)) ~= nil", NONE, NONE),
        ("return cjson.decode('\\0a')", NONE, NONE),
        ("return cjson.decode()", NONE, NONE),
        ("return cjson.decode({})", NONE, NONE),
        ("return cjson.decode('[1] ')[1]", NONE, NONE),
        ("return cjson.decode('{\"a\":1,}')", NONE, NONE),
        ("return cjson.decode('[1,]')", NONE, NONE),
        ("return cjson.decode('\"\\t\"')", NONE, NONE),
        ("return {cjson.encode_max_depth(), cjson.decode_max_depth()}", NONE, NONE),
        ("return {cjson.encode_sparse_array()}", NONE, NONE),
        ("return cjson.encode_number_precision()", NONE, NONE),
        ("return cjson.encode_keep_buffer()", NONE, NONE),
        ("return cjson.encode_invalid_numbers()", NONE, NONE),
        ("return cjson.decode_invalid_numbers()", NONE, NONE),
        ("return cjson.encode_number_precision(0)", NONE, NONE),
        ("return cjson.encode_max_depth(1, 2)", NONE, NONE),
        ("return cjson.encode_invalid_numbers('maybe')", NONE, NONE),
        ("local c = cjson.new(); c.encode_number_precision(3); return {c.encode(1/3), cjson.encode(1/3)}", NONE, NONE),
        ("local c = cjson.new(); c.encode_invalid_numbers('null'); return c.encode({1/0, 0/0})", NONE, NONE),
        ("local c = cjson.new(); c.encode_invalid_numbers(true); return c.encode({1/0, -1/0})", NONE, NONE),
        ("local c = cjson.new(); c.encode_sparse_array(true); return c.encode({[1]=1,[20]=2})", NONE, NONE),
        ("local c = cjson.new(); c.decode_invalid_numbers(false); return c.decode('0x10')", NONE, NONE),
        ("local c = cjson.new(); c.encode_max_depth(2); return c.encode({{{1}}})", NONE, NONE),
        ("local c = cjson.new(); c.decode_max_depth(2); return c.decode('[[[1]]]')", NONE, NONE),
        ("return {cjson._NAME, cjson._VERSION}", NONE, NONE),
    ]);
}

#[test]
fn cmsgpack() {
    compare(&[
        ("return cmsgpack.pack(1, -1, 0, 127, 128, 255, 256, 65535, 65536, 4294967295, 4294967296)", NONE, NONE),
        ("return cmsgpack.pack(2^53, 2^63, -2^63, 2^64, -32, -33, -128, -129, -32768, -32769, -2^31, -2^31-1)", NONE, NONE),
        ("return cmsgpack.pack(1.5, 0.1, 1e300, -0.0, 1/0, -1/0, 3.4028234663852886e38)", NONE, NONE),
        ("return cmsgpack.pack('', 'str', string.rep('x', 31), string.rep('x', 32), string.rep('x', 255), string.rep('x', 256))", NONE, NONE),
        ("return #cmsgpack.pack(string.rep('x', 65535), string.rep('x', 65536))", NONE, NONE),
        ("return cmsgpack.pack(string.rep('x', 65536)):sub(1, 8)", NONE, NONE),
        ("return cmsgpack.pack(true, false, nil)", NONE, NONE),
        ("return cmsgpack.pack({}, {1,2,3}, {a=1}, {1,2,nil,4}, {[2]=1}, {[1.5]=1}, {[0]=1})", NONE, NONE),
        ("local t = {}; for i = 1, 16 do t[i] = i end; return cmsgpack.pack(t)", NONE, NONE),
        ("local t = {}; for i = 1, 70000 do t[i] = 1 end; return cmsgpack.pack(t):sub(1, 8)", NONE, NONE),
        ("local t = {}; for i = 1, 20 do t['k' .. i] = i end; return #cmsgpack.pack(t)", NONE, NONE),
        ("local t = {}; local c = t; for i = 1, 20 do c[1] = {}; c = c[1] end; return cmsgpack.pack(t)", NONE, NONE),
        ("local t = {}; t[1] = t; return cmsgpack.pack(t)", NONE, NONE),
        ("return cmsgpack.pack(function() end, cjson.null)", NONE, NONE),
        ("return cmsgpack.pack()", NONE, NONE),
        ("return cmsgpack.pack({name='job', data={1,2,{x='y'}}, opts={attempts=3, delay=0.5}})", NONE, NONE),
        ("return cjson.encode({cmsgpack.unpack(cmsgpack.pack(1, -1, 1.5, 'x', true, {1,2}, {a='b'}))})", NONE, NONE),
        ("return {cmsgpack.unpack(cmsgpack.pack(2^53, -2^40, 4294967296))}", NONE, NONE),
        ("return tostring(cmsgpack.unpack('\\207\\255\\255\\255\\255\\255\\255\\255\\255'))", NONE, NONE),
        ("return tostring(cmsgpack.unpack('\\211\\255\\255\\255\\255\\255\\255\\255\\254'))", NONE, NONE),
        ("return {cmsgpack.unpack('\\204\\200\\208\\200\\205\\1\\2\\209\\255\\0\\206\\0\\1\\0\\0\\210\\255\\255\\255\\0')}", NONE, NONE),
        ("return tostring(cmsgpack.unpack('\\202\\63\\192\\0\\0'))", NONE, NONE),
        ("return cmsgpack.unpack('\\217\\3abc')", NONE, NONE),
        ("return cmsgpack.unpack('\\218\\0\\3abc')", NONE, NONE),
        ("return cmsgpack.unpack('\\219\\0\\0\\0\\3abc')", NONE, NONE),
        ("return cmsgpack.unpack('\\220\\0\\2\\1\\2')", NONE, NONE),
        ("return cmsgpack.unpack('\\221\\0\\0\\0\\2\\1\\2')", NONE, NONE),
        ("return cjson.encode(cmsgpack.unpack('\\222\\0\\1\\161a\\1'))", NONE, NONE),
        ("return cjson.encode(cmsgpack.unpack('\\223\\0\\0\\0\\1\\161a\\1'))", NONE, NONE),
        ("return cmsgpack.unpack('\\193')", NONE, NONE),
        ("return cmsgpack.unpack('\\146\\1')", NONE, NONE),
        ("return cmsgpack.unpack('\\217')", NONE, NONE),
        ("return cmsgpack.unpack('\\205\\1')", NONE, NONE),
        ("return {cmsgpack.unpack('')}", NONE, NONE),
        ("return cmsgpack.unpack()", NONE, NONE),
        ("return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3))}", NONE, NONE),
        ("local p = cmsgpack.pack(1, 2, 3); return {cmsgpack.unpack_one(p, 1)}", NONE, NONE),
        ("local p = cmsgpack.pack(1, 2, 3); return {cmsgpack.unpack_one(p, 2)}", NONE, NONE),
        ("local p = cmsgpack.pack(1, 2, 3); return {cmsgpack.unpack_limit(p, 2)}", NONE, NONE),
        ("local p = cmsgpack.pack(1, 2, 3); return {cmsgpack.unpack_limit(p, 0)}", NONE, NONE),
        ("local p = cmsgpack.pack(1, 2, 3); return {cmsgpack.unpack_limit(p, 5, 1)}", NONE, NONE),
        ("local p = cmsgpack.pack(1, 2, 3); return {cmsgpack.unpack_limit(p, -1)}", NONE, NONE),
        ("local p = cmsgpack.pack(1, 2, 3); return {cmsgpack.unpack_one(p, 10)}", NONE, NONE),
        ("return cmsgpack.unpack_limit('x')", NONE, NONE),
    ]);
}

#[test]
fn struct_and_bit() {
    compare(&[
        ("return struct.pack('>I2', 258)", NONE, NONE),
        ("return struct.pack('<i4', -2)", NONE, NONE),
        ("return struct.pack('b', 200)", NONE, NONE),
        ("return struct.pack('B', -1)", NONE, NONE),
        ("return struct.pack('hHlLT', 1, 2, 3, 4, 5)", NONE, NONE),
        ("return struct.pack('>i16', -1)", NONE, NONE),
        ("return struct.pack('i33', 1)", NONE, NONE),
        ("return struct.pack('s', 'abc')", NONE, NONE),
        ("return struct.pack('c5', 'ab')", NONE, NONE),
        ("return struct.pack('c0', 'abc')", NONE, NONE),
        ("return struct.pack('c2', 'abc')", NONE, NONE),
        ("return struct.pack('!4 b i4', 1, 2)", NONE, NONE),
        ("return struct.pack('! b d', 1, 2)", NONE, NONE),
        ("return struct.pack('!3 b i4', 1, 2)", NONE, NONE),
        ("return struct.pack('>d<d', 1.5, 1.5)", NONE, NONE),
        ("return struct.pack('>f', 0.1)", NONE, NONE),
        ("return struct.pack('xbx', 7)", NONE, NONE),
        ("return struct.pack('z', 1)", NONE, NONE),
        ("return struct.pack('i', 'x')", NONE, NONE),
        ("return struct.pack('i')", NONE, NONE),
        ("return struct.pack()", NONE, NONE),
        ("return struct.pack('i99999999999', 1)", NONE, NONE),
        ("return {struct.unpack('>I2', '\\1\\2')}", NONE, NONE),
        ("return {struct.unpack('<i2', '\\254\\255')}", NONE, NONE),
        ("return {struct.unpack('s', 'abc\\0def')}", NONE, NONE),
        ("return {struct.unpack('s', 'abc')}", NONE, NONE),
        ("return {struct.unpack('bc0', '\\3abcd')}", NONE, NONE),
        ("return {struct.unpack('c0', 'abcd')}", NONE, NONE),
        ("return {struct.unpack('>i2', 'x')}", NONE, NONE),
        ("return {struct.unpack('b', 'xyz', 2)}", NONE, NONE),
        ("return {struct.unpack('b', 'xyz', 0)}", NONE, NONE),
        ("return {struct.unpack('b', 'xyz', 4)}", NONE, NONE),
        ("return {tostring(struct.unpack('>d', struct.pack('>d', 0.1)))}", NONE, NONE),
        ("return {tostring(struct.unpack('<f', struct.pack('<f', 0.1)))}", NONE, NONE),
        ("return {struct.unpack('!4 b i4', struct.pack('!4 b i4', 1, 2))}", NONE, NONE),
        ("return {struct.unpack('>I8', '\\255\\255\\255\\255\\255\\255\\255\\255')}", NONE, NONE),
        ("return {struct.unpack('>i3', '\\255\\255\\254')}", NONE, NONE),
        ("return struct.size('i4d')", NONE, NONE),
        ("return struct.size('!8 b d')", NONE, NONE),
        ("return struct.size('s')", NONE, NONE),
        ("return struct.size('c0')", NONE, NONE),
        ("return struct.size('c3 >')", NONE, NONE),
        ("return struct.size('q')", NONE, NONE),
        ("return struct.size('!5')", NONE, NONE),
        ("return {bit.tobit(2^32+1), bit.tobit(1.5), bit.tobit(2.5), bit.tobit(-1.5), bit.tobit(2^31)}", NONE, NONE),
        ("return {bit.band(0xff, 0x0f, 0x3), bit.bor(1, 2, 4), bit.bxor(5, 3), bit.bnot(0)}", NONE, NONE),
        ("return {bit.lshift(1, 31), bit.lshift(1, 32), bit.rshift(-1, 28), bit.arshift(-256, 4), bit.rshift(1, -1)}", NONE, NONE),
        ("return {bit.rol(0x12345678, 8), bit.ror(0x12345678, 8), bit.rol(1, 0), bit.bswap(0x12345678)}", NONE, NONE),
        ("return {bit.tohex(255), bit.tohex(-1, -4), bit.tohex(255, 2), bit.tohex(1, 20), bit.tohex(1, 0)}", NONE, NONE),
        ("return bit.tobit('x')", NONE, NONE),
        ("return bit.tobit()", NONE, NONE),
        ("return bit.band('12', 10)", NONE, NONE),
        ("return bit.band(1, 'x')", NONE, NONE),
        ("return bit.band()", NONE, NONE),
    ]);
}

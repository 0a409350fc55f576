//! The introspection commands against a real redis-server: COMMAND INFO,
//! DOCS, LIST FILTERBY and GETKEYS compared field by field for every
//! command respite implements.
//!
//! Both servers are spoken to in RESP3, so sets, maps and arrays stay
//! apart: a set's order means nothing and is sorted before comparing, a
//! map's and an array's are compared as they come, except the order of a
//! container's subcommands (redis lists them in hash-table order), which
//! are matched by name. respite lists only the subcommands it implements,
//! so a container's are compared one by one against redis's of the same
//! name.

mod common;

use std::collections::BTreeMap;

use common::{RedisServer, Respited};
use redis::Value;

/// Commands respite has that redis 7.0 does not (described from redis
/// 7.2's JSON): left out of the comparison.
const NEWER_THAN_7_0: &[&str] = &["client|setinfo", "client|no-touch", "waitaof"];

/// A RESP3 connection.
fn resp3(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/?protocol=resp3"))
        .expect("client")
        .get_connection()
        .expect("connect")
}

/// Runs a command; a server error comes back as its text.
fn run(con: &mut redis::Connection, args: &[&str]) -> Result<Value, String> {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query::<Value>(con).map_err(|e| {
        format!(
            "{} {}",
            e.code().unwrap_or("?"),
            e.detail().unwrap_or_default()
        )
    })
}

/// A value with every set sorted, recursively, so two replies compare
/// regardless of set order.
fn canon(v: &Value) -> Value {
    match v {
        Value::Set(items) => {
            let mut items: Vec<Value> = items.iter().map(canon).collect();
            items.sort_by_key(|i| format!("{i:?}"));
            Value::Set(items)
        }
        Value::Array(items) => Value::Array(items.iter().map(canon).collect()),
        Value::Map(pairs) => Value::Map(pairs.iter().map(|(k, v)| (canon(k), canon(v))).collect()),
        other => other.clone(),
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Okay => "OK".into(),
        other => panic!("not a string: {other:?}"),
    }
}

fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::Array(items) | Value::Set(items) => items.iter().map(text).collect(),
        other => panic!("not an array: {other:?}"),
    }
}

/// Compares two COMMAND INFO entries; returns the differences.
fn compare_info(name: &str, ours: &Value, theirs: &Value, problems: &mut Vec<String>) {
    let (Value::Array(a), Value::Array(b)) = (ours, theirs) else {
        problems.push(format!("{name}: {ours:?} against {theirs:?}"));
        return;
    };
    if a.len() != 10 || b.len() != 10 {
        problems.push(format!("{name}: {} fields against {}", a.len(), b.len()));
        return;
    }
    const FIELDS: [&str; 9] = [
        "name", "arity", "flags", "first", "last", "step", "acl", "tips", "keyspecs",
    ];
    for (i, field) in FIELDS.iter().enumerate() {
        if canon(&a[i]) != canon(&b[i]) {
            problems.push(format!("{name} {field}: {:?} against {:?}", a[i], b[i]));
        }
    }
    let by_name = |v: &Value| -> BTreeMap<String, Value> {
        match v {
            Value::Array(items) | Value::Set(items) => items
                .iter()
                .map(|e| match e {
                    Value::Array(f) => (text(&f[0]), e.clone()),
                    other => panic!("subcommand entry {other:?}"),
                })
                .collect(),
            other => panic!("subcommands {other:?}"),
        }
    };
    let (ours_subs, theirs_subs) = (by_name(&a[9]), by_name(&b[9]));
    if !theirs_subs.is_empty() && ours_subs.is_empty() {
        problems.push(format!("{name}: lists no subcommands"));
    }
    for (sub, entry) in &ours_subs {
        if NEWER_THAN_7_0.contains(&sub.as_str()) {
            continue;
        }
        match theirs_subs.get(sub) {
            Some(t) => compare_info(sub, entry, t, problems),
            None => problems.push(format!("{name}: {sub} unknown to redis")),
        }
    }
}

/// Compares two COMMAND DOCS entries (maps).
fn compare_docs(name: &str, ours: &Value, theirs: &Value, problems: &mut Vec<String>) {
    let fields = |v: &Value| -> Vec<(String, Value)> {
        match v {
            Value::Map(pairs) => pairs.iter().map(|(k, v)| (text(k), v.clone())).collect(),
            other => panic!("docs {other:?}"),
        }
    };
    let (a, b) = (fields(ours), fields(theirs));
    let keys = |f: &[(String, Value)]| f.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    if keys(&a) != keys(&b) {
        problems.push(format!(
            "{name} docs fields: {:?} against {:?}",
            keys(&a),
            keys(&b)
        ));
        return;
    }
    for ((key, x), (_, y)) in a.iter().zip(&b) {
        if key == "subcommands" {
            let (xs, ys) = (fields(x), fields(y));
            let ys: BTreeMap<String, Value> = ys.into_iter().collect();
            for (sub, doc) in xs {
                if NEWER_THAN_7_0.contains(&sub.as_str()) {
                    continue;
                }
                match ys.get(&sub) {
                    Some(theirs) => compare_docs(&sub, &doc, theirs, problems),
                    None => problems.push(format!("{name}: docs of {sub} unknown to redis")),
                }
            }
        } else if canon(x) != canon(y) {
            problems.push(format!("{name} docs {key}: {x:?} against {y:?}"));
        }
    }
}

#[test]
fn command_info_and_docs_match_redis_for_every_command() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let server = Respited::start(&[]);
    let mut ours = resp3(server.port);
    let mut theirs = resp3(redis.port);

    let names = strings(&run(&mut ours, &["COMMAND", "LIST"]).unwrap());
    let count = run(&mut ours, &["COMMAND", "COUNT"]).unwrap();
    let top_level = names.iter().filter(|n| !n.contains('|')).count();
    assert_eq!(count, Value::Int(top_level as i64));
    assert!(names.contains(&"client|list".to_string()), "{names:?}");
    let Value::Array(all) = run(&mut ours, &["COMMAND"]).unwrap() else {
        panic!("COMMAND is not an array");
    };
    assert_eq!(all.len(), top_level);

    let mut problems = Vec::new();
    let mut compared = 0;
    for name in &names {
        if NEWER_THAN_7_0.contains(&name.as_str()) {
            continue;
        }
        let a = run(&mut ours, &["COMMAND", "INFO", name]).unwrap();
        let b = run(&mut theirs, &["COMMAND", "INFO", name]).unwrap();
        let (Value::Array(a), Value::Array(b)) = (a, b) else {
            panic!("COMMAND INFO {name}");
        };
        compare_info(name, &a[0], &b[0], &mut problems);
        let a = run(&mut ours, &["COMMAND", "DOCS", name]).unwrap();
        let b = run(&mut theirs, &["COMMAND", "DOCS", name]).unwrap();
        match (&a, &b) {
            (Value::Map(x), Value::Map(y)) if x.len() == 1 && y.len() == 1 => {
                assert_eq!(x[0].0, y[0].0);
                compare_docs(name, &x[0].1, &y[0].1, &mut problems);
            }
            _ => problems.push(format!("COMMAND DOCS {name}: {a:?} against {b:?}")),
        }
        compared += 1;
    }
    assert!(compared > 150, "compared only {compared}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    // Unknown names: nil in INFO, left out of DOCS, as redis does.
    for con in [&mut ours, &mut theirs] {
        let info = run(con, &["COMMAND", "INFO", "get", "nosuch", "client|nosuch"]).unwrap();
        let Value::Array(items) = info else { panic!() };
        assert_eq!(items[1], Value::Nil);
        assert_eq!(items[2], Value::Nil);
        let docs = run(con, &["COMMAND", "DOCS", "nosuch", "get"]).unwrap();
        let Value::Map(pairs) = docs else { panic!() };
        assert_eq!(pairs.len(), 1);
    }
}

#[test]
fn command_list_filterby_and_getkeys_match_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let server = Respited::start(&[]);
    let mut ours = resp3(server.port);
    let mut theirs = resp3(redis.port);
    let implemented = strings(&run(&mut ours, &["COMMAND", "LIST"]).unwrap());

    // A filtered list is redis's filtered list, restricted to what respite
    // has.
    for filter in [
        ["ACLCAT", "list"],
        ["ACLCAT", "dangerous"],
        ["ACLCAT", "read"],
        ["ACLCAT", "slow"],
        ["ACLCAT", "nosuchcat"],
        ["PATTERN", "z*store"],
        ["PATTERN", "CLIENT|*"],
        ["PATTERN", "[a-c]*"],
        ["MODULE", "nosuchmodule"],
    ] {
        let args = ["COMMAND", "LIST", "FILTERBY", filter[0], filter[1]];
        let mut a: Vec<String> = strings(&run(&mut ours, &args).unwrap())
            .into_iter()
            .filter(|n| !NEWER_THAN_7_0.contains(&n.as_str()))
            .collect();
        let mut b: Vec<String> = strings(&run(&mut theirs, &args).unwrap())
            .into_iter()
            .filter(|n| implemented.contains(n))
            .collect();
        a.sort();
        b.sort();
        assert_eq!(a, b, "{filter:?}");
        if filter[1] == "list" {
            assert!(a.contains(&"lpush".to_string()));
        }
    }

    // Errors and keys, reply for reply.
    let cases: &[&[&str]] = &[
        &[
            "COMMAND", "LIST", "FILTERBY", "ACLCAT", "list", "PATTERN", "l*",
        ],
        &["COMMAND", "LIST", "FILTERBY", "NOSUCH", "x"],
        &["COMMAND", "LIST", "FILTERBY", "ACLCAT"],
        &["COMMAND", "LIST", "extra"],
        &["COMMAND", "COUNT", "extra"],
        &["COMMAND", "NOSUCH"],
        &["COMMAND", "GETKEYS"],
        &["COMMAND", "GETKEYS", "get"],
        &["COMMAND", "GETKEYS", "get", "k"],
        &["COMMAND", "GETKEYS", "nosuch", "k"],
        &["COMMAND", "GETKEYS", "ping"],
        &["COMMAND", "GETKEYS", "mset", "a", "1", "b", "2"],
        &["COMMAND", "GETKEYS", "mget", "a", "b", "c"],
        &[
            "COMMAND",
            "GETKEYS",
            "zunionstore",
            "d",
            "2",
            "a",
            "b",
            "WEIGHTS",
            "1",
            "2",
        ],
        &["COMMAND", "GETKEYS", "zunionstore", "d", "5", "a", "b"],
        &["COMMAND", "GETKEYS", "zunionstore", "d", "x", "a", "b"],
        &["COMMAND", "GETKEYS", "lmpop", "2", "a", "b", "LEFT"],
        &["COMMAND", "GETKEYS", "blmpop", "0", "2", "a", "b", "LEFT"],
        &["COMMAND", "GETKEYS", "sort", "a", "BY", "w*", "STORE", "d"],
        &[
            "COMMAND", "GETKEYS", "sort", "a", "LIMIT", "0", "1", "GET", "store",
        ],
        &["COMMAND", "GETKEYS", "sort_ro", "a", "BY", "x"],
        &["COMMAND", "GETKEYS", "eval", "return 1", "0"],
        &[
            "COMMAND",
            "GETKEYSANDFLAGS",
            "eval",
            "return 1",
            "2",
            "a",
            "b",
        ],
        &["COMMAND", "GETKEYS", "evalsha_ro", "abc", "1", "k"],
        &["COMMAND", "GETKEYSANDFLAGS", "set", "k", "v"],
        &["COMMAND", "GETKEYSANDFLAGS", "set", "k", "v", "GET"],
        &[
            "COMMAND",
            "GETKEYSANDFLAGS",
            "bitfield",
            "k",
            "GET",
            "u8",
            "0",
        ],
        &[
            "COMMAND",
            "GETKEYSANDFLAGS",
            "bitfield",
            "k",
            "SET",
            "u8",
            "0",
            "1",
        ],
        &[
            "COMMAND",
            "GETKEYSANDFLAGS",
            "lmove",
            "a",
            "b",
            "LEFT",
            "RIGHT",
        ],
        &["COMMAND", "GETKEYSANDFLAGS", "sort", "a", "STORE", "d"],
        &["COMMAND", "GETKEYSANDFLAGS", "del", "a", "b"],
        &["COMMAND", "GETKEYSANDFLAGS", "rename", "a", "b"],
        &["COMMAND", "GETKEYSANDFLAGS", "copy", "a", "b"],
        &[
            "COMMAND",
            "GETKEYSANDFLAGS",
            "sintercard",
            "2",
            "a",
            "b",
            "LIMIT",
            "1",
        ],
        &["COMMAND", "GETKEYSANDFLAGS", "object", "encoding", "k"],
        &[
            "COMMAND",
            "GETKEYSANDFLAGS",
            "zrangestore",
            "d",
            "s",
            "0",
            "1",
        ],
        &["COMMAND", "GETKEYSANDFLAGS", "client", "list"],
        &["COMMAND", "GETKEYSANDFLAGS", "client", "nosuch"],
    ];
    let mut problems = Vec::new();
    for args in cases {
        let a = run(&mut ours, args).map(|v| canon(&v));
        let b = run(&mut theirs, args).map(|v| canon(&v));
        if a != b {
            problems.push(format!("{args:?}: {a:?} against {b:?}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// INFO's text as (section, [(field, value)]) in order.
fn info_sections(text: &str) -> Vec<(String, Vec<(String, String)>)> {
    let mut out: Vec<(String, Vec<(String, String)>)> = Vec::new();
    for line in text.split("\r\n") {
        if let Some(name) = line.strip_prefix("# ") {
            out.push((name.to_string(), Vec::new()));
        } else if let Some((k, v)) = line.split_once(':') {
            out.last_mut()
                .expect("a field before any section")
                .1
                .push((k.to_string(), v.to_string()));
        }
    }
    out
}

/// What kind of value a field holds, as a tool parsing it would see it.
fn kind(v: &str) -> &'static str {
    if v.parse::<i64>().is_ok() {
        "integer"
    } else if v.parse::<f64>().is_ok() {
        "float"
    } else if v.ends_with('%') && v[..v.len() - 1].parse::<f64>().is_ok() {
        "percent"
    } else {
        "string"
    }
}

fn info_text(con: &mut redis::Connection, args: &[&str]) -> String {
    let mut cmd = redis::cmd("INFO");
    for a in args {
        cmd.arg(*a);
    }
    cmd.query::<String>(con).expect("INFO")
}

#[test]
fn info_has_every_section_and_field_of_redis_with_the_same_types() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let server = Respited::start(&[]);
    let mut ours = server.client();
    let mut theirs = redis.client();
    for con in [&mut ours, &mut theirs] {
        let _: () = redis::cmd("SET").arg("k").arg("v").query(con).unwrap();
        let _: Option<String> = redis::cmd("GET").arg("k").query(con).unwrap();
    }
    let mut problems = Vec::new();
    for args in [
        &[][..],
        &["everything"],
        &["all"],
        &["default"],
        &["server", "CLIENTS"],
        &["commandstats"],
        &["nosuch"],
    ] {
        let a = info_sections(&info_text(&mut ours, args));
        let b = info_sections(&info_text(&mut theirs, args));
        let names = |s: &[(String, Vec<(String, String)>)]| {
            s.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>()
        };
        if names(&a) != names(&b) {
            problems.push(format!(
                "INFO {args:?} sections: {:?} against {:?}",
                names(&a),
                names(&b)
            ));
            continue;
        }
        for ((section, ours), (_, theirs)) in a.iter().zip(&b) {
            if ["Keyspace", "Commandstats", "Latencystats", "Errorstats"]
                .contains(&section.as_str())
            {
                continue;
            }
            for (field, value) in theirs {
                match ours.iter().find(|(f, _)| f == field) {
                    None => problems.push(format!("{section}: no {field}")),
                    Some((_, v))
                        if kind(v) != kind(value)
                            && !(kind(value) == "string" && value.is_empty()) =>
                    {
                        problems.push(format!("{section} {field}: {v:?} against {value:?}"))
                    }
                    Some(_) => {}
                }
            }
            // redis's fields come first, in redis's order.
            let order: Vec<&String> = ours
                .iter()
                .map(|(f, _)| f)
                .filter(|f| theirs.iter().any(|(g, _)| g == *f))
                .collect();
            let want: Vec<&String> = theirs.iter().map(|(f, _)| f).collect();
            if order != want {
                problems.push(format!("{section}: fields out of redis's order"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    // Fields tools read, with the values they expect.
    let text = info_text(&mut ours, &[]);
    for needle in [
        "cluster_enabled:0",
        "role:master",
        "connected_slaves:0",
        "redis_mode:standalone",
        "aof_enabled:1",
    ] {
        assert!(
            text.contains(&format!("{needle}\r\n")),
            "{needle} in {text}"
        );
    }
    assert!(text.contains(&format!("process_id:{}\r\n", server.pid())));
    assert!(text.contains(&format!("tcp_port:{}\r\n", server.port)));
    assert!(
        text.contains("db0:keys=1,expires=0,avg_ttl=0\r\n"),
        "{text}"
    );
    assert!(text.contains("group_commit_batches:"));
}

/// Parses `cmdstat_x:calls=..,usec=..,...` into (calls, rejected, failed).
fn cmdstats(text: &str) -> BTreeMap<String, (u64, u64, u64)> {
    let mut out = BTreeMap::new();
    for line in text.split("\r\n") {
        let Some(rest) = line.strip_prefix("cmdstat_") else {
            continue;
        };
        let (name, fields) = rest.split_once(':').unwrap();
        let get = |key: &str| -> u64 {
            fields
                .split(',')
                .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
                .unwrap()
                .parse()
                .unwrap()
        };
        out.insert(
            name.to_string(),
            (get("calls"), get("rejected_calls"), get("failed_calls")),
        );
    }
    out
}

fn errorstats(text: &str) -> Vec<String> {
    text.split("\r\n")
        .filter(|l| l.starts_with("errorstat_"))
        .map(str::to_string)
        .collect()
}

#[test]
fn commandstats_errorstats_and_latencystats_count_like_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let server = Respited::start(&[]);
    let mut ours = server.client();
    let mut theirs = redis.client();
    let script: &[&[&str]] = &[
        &["CONFIG", "RESETSTAT"],
        &["SET", "k", "v"],
        &["GET", "k"],
        &["GET", "k"],
        &["GET"],
        &["LPUSH", "l", "a"],
        &["INCR", "l"],
        &["INCRBY", "k", "x"],
        &["SET", "k", "v", "NOSUCHOPTION"],
        &["CLIENT", "ID"],
        &["CLIENT", "NOSUCH"],
        &["CONFIG", "GET", "maxmemory"],
        &["NOSUCHCOMMAND"],
        &["MULTI"],
        &["SET", "a", "1"],
        &["INCR", "a"],
        &["EXEC"],
        &["DBSIZE"],
    ];
    for con in [&mut ours, &mut theirs] {
        for args in script {
            let mut cmd = redis::cmd(args[0]);
            for a in &args[1..] {
                cmd.arg(*a);
            }
            let _ = cmd.query::<redis::Value>(con);
        }
    }
    let (a, b) = (
        info_text(&mut ours, &["commandstats"]),
        info_text(&mut theirs, &["commandstats"]),
    );
    assert_eq!(cmdstats(&a), cmdstats(&b), "\n{a}\n{b}");
    let (a, b) = (
        info_text(&mut ours, &["errorstats"]),
        info_text(&mut theirs, &["errorstats"]),
    );
    assert_eq!(errorstats(&a), errorstats(&b));
    let lat = info_text(&mut ours, &["latencystats"]);
    let line = lat
        .split("\r\n")
        .find(|l| l.starts_with("latency_percentiles_usec_get:"))
        .unwrap_or_else(|| panic!("{lat}"));
    let shown: Vec<&str> = line
        .split(':')
        .nth(1)
        .unwrap()
        .split(',')
        .map(|p| p.split('=').next().unwrap())
        .collect();
    assert_eq!(shown, ["p50", "p99", "p99.9"]);
    // CONFIG RESETSTAT zeroes every counter, the group commit's too.
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut ours)
        .unwrap();
    let after = info_text(&mut ours, &["everything"]);
    let stats = cmdstats(&after);
    assert!(
        stats.keys().all(|k| k == "config|resetstat" || k == "info"),
        "{stats:?}"
    );
    assert!(errorstats(&after).is_empty());
    assert!(after.contains("group_commit_batches:0\r\n"));
    assert!(after.contains("total_error_replies:0\r\n"));
}

/// A blocking command's error reply counts in errorstats and as a failed
/// call, as redis counts it: one refused on its first try, and one a
/// CLIENT UNBLOCK ... ERROR ends.
#[test]
fn blocked_commands_errors_count_like_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let server = Respited::start(&[]);
    let mut outcomes = Vec::new();
    for (mut con, mut blocked) in [
        (server.client(), server.client()),
        (redis.client(), redis.client()),
    ] {
        let _: () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query(&mut con)
            .unwrap();
        let _: () = redis::cmd("SET").arg("s").arg("x").query(&mut con).unwrap();
        let first = run(&mut con, &["BLPOP", "s", "1"]);
        let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut blocked).unwrap();
        let waiter = std::thread::spawn(move || run(&mut blocked, &["BLPOP", "emptyq", "0"]));
        // Unblocks it once it is blocked.
        let unblocked = (0..500).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            redis::cmd("CLIENT")
                .arg("UNBLOCK")
                .arg(id)
                .arg("ERROR")
                .query::<i64>(&mut con)
                .unwrap()
                == 1
        });
        assert!(unblocked);
        let second = waiter.join().unwrap();
        let errors = errorstats(&info_text(&mut con, &["errorstats"]));
        let blpop = cmdstats(&info_text(&mut con, &["commandstats"]))
            .get("blpop")
            .copied();
        let total = info_text(&mut con, &["stats"])
            .split("\r\n")
            .find(|l| l.starts_with("total_error_replies:"))
            .map(str::to_string);
        outcomes.push((first, second, errors, blpop, total));
    }
    assert_eq!(outcomes[0], outcomes[1]);
    assert_eq!(outcomes[0].2.len(), 2, "{:?}", outcomes[0]);
}

fn config_get(con: &mut redis::Connection, pattern: &str) -> BTreeMap<String, String> {
    let v: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg(pattern)
        .query(con)
        .unwrap();
    v.chunks(2)
        .map(|kv| (kv[0].clone(), kv[1].clone()))
        .collect()
}

fn error_of(con: &mut redis::Connection, args: &[&str]) -> String {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    match cmd.query::<redis::Value>(con) {
        Ok(v) => format!("ok {v:?}"),
        Err(e) => format!(
            "{} {}",
            e.code().unwrap_or("?"),
            e.detail().unwrap_or_default()
        ),
    }
}

#[test]
fn config_get_and_set_match_redis_for_shared_parameters() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let server = Respited::start(&[]);
    let mut ours = server.client();
    let mut theirs = redis.client();
    // Where the two servers are set up differently, or respite's value
    // says what it is (always on disk).
    const DIFFERENT: &[&str] = &[
        "port",
        "bind",
        "dir",
        "dbfilename",
        "unixsocket",
        "unixsocketperm",
        "appendonly",
        "appendfsync",
        "maxclients",
        "save",
        "enable-debug-command",
    ];
    let all = config_get(&mut ours, "*");
    let redis_all = config_get(&mut theirs, "*");
    let mut shared = 0;
    let mut problems = Vec::new();
    for (name, value) in &all {
        let Some(theirs) = redis_all.get(name) else {
            // respite's own (max-batch...).
            assert!(
                [
                    "max-batch",
                    "write-queue-depth",
                    "readers",
                    "wal-checkpoint-bytes",
                    "page-size",
                    "checkpoint-wal-bytes",
                    "checkpoint-wal-percent",
                    "checkpoint",
                    "journal-size-limit",
                    "expire-chunk",
                    "read-cache-bytes",
                    "maxdisk",
                    "disk-reserve-bytes",
                    "lua-memory-limit",
                ]
                .contains(&name.as_str()),
                "{name} unknown to redis"
            );
            continue;
        };
        shared += 1;
        if !DIFFERENT.contains(&name.as_str()) && value != theirs {
            problems.push(format!("{name}: {value:?} against {theirs:?}"));
        }
    }
    assert!(shared > 50, "only {shared} shared");
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    // Patterns match names and aliases, case-insensitively; an exact name
    // answers under the name as asked.
    // Names and aliases are separate entries (`*of` finds `replicaof` and
    // `slaveof`); hidden parameters answer only by name.
    for pattern in [
        "*max-*-entries*",
        "SLOWLOG-*",
        "maxmemory*",
        "MAXMEMORY",
        "lua-time-limit",
        "nosuch",
        "*of",
        "slave-*",
        "key-load-delay",
        "*load-delay*",
        "*repl*",
    ] {
        let a = config_get(&mut ours, pattern);
        let b: BTreeMap<String, String> = config_get(&mut theirs, pattern)
            .into_iter()
            .filter(|(k, _)| all.contains_key(k) || a.contains_key(k))
            .collect();
        assert_eq!(a, b, "{pattern}");
    }

    // CONFIG SET: the same errors, the same values read back.
    let cases: &[&[&str]] = &[
        &["CONFIG", "SET", "timeout", "70"],
        &["CONFIG", "SET", "timeout", "-1"],
        &["CONFIG", "SET", "timeout", "x"],
        &["CONFIG", "SET", "maxmemory", "1gb"],
        &["CONFIG", "SET", "maxmemory", "1x"],
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
        &["CONFIG", "SET", "maxmemory-policy", "bogus"],
        &["CONFIG", "SET", "notify-keyspace-events", "KEA"],
        &["CONFIG", "SET", "notify-keyspace-events", "Elgx"],
        &["CONFIG", "SET", "notify-keyspace-events", "Q"],
        &["CONFIG", "SET", "latency-tracking", "maybe"],
        &[
            "CONFIG",
            "SET",
            "latency-tracking-info-percentiles",
            "50 200",
        ],
        &[
            "CONFIG",
            "SET",
            "latency-tracking-info-percentiles",
            "50 99.50",
        ],
        &["CONFIG", "SET", "hz", "20", "hz", "30"],
        &["CONFIG", "SET", "hz", "20", "timeout"],
        &["CONFIG", "SET", "nosuch", "1"],
        &["CONFIG", "SET", "hz", "1", "nosuch", "2"],
        &["CONFIG", "SET", "databases", "4"],
        &["CONFIG", "SET", "dir", "/tmp"],
        &["CONFIG", "SET", "lua-time-limit", "100"],
        &["CONFIG", "SET", "slowlog-log-slower-than", "-2"],
        &[
            "CONFIG",
            "SET",
            "slowlog-max-len",
            "5",
            "slowlog-log-slower-than",
            "0",
        ],
        &["CONFIG", "SET", "save", "100 x"],
        &["CONFIG", "SET", "save", "3600 1 300 100"],
        &["CONFIG", "SET", "tcp-keepalive", "60"],
        &["CONFIG", "SET", "loglevel", "warning"],
        &["CONFIG", "SET", "list-compress-depth", "abc"],
        &["CONFIG", "SET", "activerehashing", "NO"],
        &["CONFIG", "GET"],
        // A memory value or a percentage (redis's PERCENT_CONFIG).
        &["CONFIG", "SET", "maxmemory-clients", "200%"],
        &["CONFIG", "SET", "maxmemory-clients", "-5"],
        &["CONFIG", "SET", "maxmemory-clients", "abc"],
        &["CONFIG", "SET", "maxmemory-clients", "%"],
        &["CONFIG", "SET", "maxmemory-clients", "10%"],
        // A failed multi-argument SET changes nothing.
        &["CONFIG", "SET", "maxmemory", "10000002"],
        &[
            "CONFIG",
            "SET",
            "maxmemory",
            "10000001",
            "maxmemory-clients",
            "200%",
            "client-query-buffer-limit",
            "invalid",
        ],
        // Replication and other stored parameters, with redis's checks.
        &[
            "CONFIG",
            "SET",
            "maxmemory",
            "10000001",
            "repl-backlog-size",
            "10000002",
            "save",
            "3000 5",
        ],
        &["CONFIG", "SET", "repl-backlog-size", "0"],
        &["CONFIG", "SET", "masterauth", "secret"],
        &["CONFIG", "SET", "masteruser", "repl"],
        &["CONFIG", "SET", "min-slaves-to-write", "2"],
        &["CONFIG", "SET", "repl-diskless-load", "swapdb"],
        &["CONFIG", "SET", "repl-diskless-load", "maybe"],
        &["CONFIG", "SET", "shutdown-on-sigterm", "nosave now"],
        &["CONFIG", "SET", "shutdown-on-sigint", "save nosave"],
        &["CONFIG", "SET", "shutdown-on-sigint", "later"],
        &["CONFIG", "SET", "oom-score-adj-values", "1 2"],
        &["CONFIG", "SET", "oom-score-adj-values", "1 2 3000"],
        &["CONFIG", "SET", "oom-score-adj-values", "10 20 30"],
        &["CONFIG", "SET", "slaveof", "no one"],
        &["CONFIG", "SET", "daemonize", "no"],
        &["CONFIG", "SET", "key-load-delay", "5"],
        &[
            "CONFIG",
            "SET",
            "bind",
            "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17",
        ],
    ];
    for args in cases {
        assert_eq!(
            error_of(&mut ours, args),
            error_of(&mut theirs, args),
            "{args:?}"
        );
    }
    for name in [
        "timeout",
        "maxmemory",
        "maxmemory-policy",
        "notify-keyspace-events",
        "busy-reply-threshold",
        "latency-tracking-info-percentiles",
        "slowlog-max-len",
        "save",
        "activerehashing",
        "hz",
        "maxmemory-clients",
        "repl-backlog-size",
        "masterauth",
        "min-replicas-to-write",
        "min-slaves-to-write",
        "repl-diskless-load",
        "shutdown-on-sigterm",
        "shutdown-on-sigint",
        "oom-score-adj-values",
        "key-load-delay",
        "slaveof",
    ] {
        assert_eq!(
            config_get(&mut ours, name),
            config_get(&mut theirs, name),
            "{name}"
        );
    }
}

#[test]
fn config_timeout_closes_idle_clients() {
    let server = Respited::start(&[]);
    let mut admin = server.client();
    let mut idle = server.raw();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("timeout")
        .arg("1")
        .query(&mut admin)
        .unwrap();
    // The idle connection is closed within a couple of seconds.
    idle.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let mut buf = [0u8; 16];
    let n = std::io::Read::read(&mut idle, &mut buf).unwrap_or(0);
    assert_eq!(n, 0, "the idle client was not closed");
    // The admin connection idled as long: a new one turns the timeout off.
    let mut admin = server.client();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("timeout")
        .arg("0")
        .query(&mut admin)
        .unwrap();
    assert_eq!(config_get(&mut admin, "timeout")["timeout"], "0");
}

#[test]
fn config_rewrite_keeps_comments_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("respite.toml");
    std::fs::write(
        &conf,
        "# respite test configuration\n\n# group commit\nmax_batch = 64 # ops per batch\n\n[redis]\n# how slow is slow\nslowlog-max-len = 10\n",
    )
    .unwrap();
    let conf_arg = conf.to_str().unwrap().to_string();
    {
        let server = Respited::start_in(dir.path(), &["--config", &conf_arg]);
        let mut con = server.client();
        assert_eq!(
            config_get(&mut con, "slowlog-max-len")["slowlog-max-len"],
            "10"
        );
        let info = info_text(&mut con, &["server"]);
        assert!(
            info.contains(&format!("config_file:{}\r\n", conf.display())),
            "{info}"
        );
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("max-batch")
            .arg("32")
            .arg("slowlog-max-len")
            .arg("20")
            .arg("maxmemory")
            .arg("1mb")
            .arg("notify-keyspace-events")
            .arg("Ex")
            .query(&mut con)
            .unwrap();
        let _: () = redis::cmd("CONFIG").arg("REWRITE").query(&mut con).unwrap();
    }
    let text = std::fs::read_to_string(&conf).unwrap();
    for kept in [
        "# respite test configuration",
        "# group commit",
        "max_batch = 32 # ops per batch",
        "# how slow is slow",
        "slowlog-max-len = \"20\"",
        "maxmemory = \"1048576\"",
        "notify-keyspace-events = \"xE\"",
    ] {
        assert!(text.contains(kept), "{kept:?} not in:\n{text}");
    }
    let server = Respited::start_in(dir.path(), &["--config", &conf_arg]);
    let mut con = server.client();
    assert_eq!(config_get(&mut con, "max-batch")["max-batch"], "32");
    assert_eq!(
        config_get(&mut con, "slowlog-max-len")["slowlog-max-len"],
        "20"
    );
    assert_eq!(config_get(&mut con, "maxmemory")["maxmemory"], "1048576");

    // Without a config file there is nothing to rewrite, as in redis.
    let bare = Respited::start(&[]);
    assert_eq!(
        error_of(&mut bare.client(), &["CONFIG", "REWRITE"]),
        "ERR The server is running without a config file"
    );
}

/// SLOWLOG GET's entries as (argv, client name), newest first.
fn slow_entries(con: &mut redis::Connection) -> Vec<(Vec<String>, String)> {
    let v = run(con, &["SLOWLOG", "GET", "-1"]).unwrap();
    let Value::Array(entries) = v else {
        panic!("{v:?}")
    };
    entries
        .iter()
        .map(|e| {
            let Value::Array(f) = e else { panic!("{e:?}") };
            assert_eq!(f.len(), 6);
            assert!(
                matches!(f[0], Value::Int(_))
                    && matches!(f[1], Value::Int(_))
                    && matches!(f[2], Value::Int(_))
            );
            (strings(&f[3]), text(&f[5]))
        })
        .collect()
}

#[test]
fn slowlog_matches_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let server = Respited::start(&[]);
    let mut ours = resp3(server.port);
    let mut theirs = resp3(redis.port);
    let long = "x".repeat(200);
    let many: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
    let mut del = vec!["DEL"];
    del.extend(many.iter().map(String::as_str));
    let script: Vec<Vec<&str>> = vec![
        vec![
            "CONFIG",
            "SET",
            "slowlog-log-slower-than",
            "0",
            "slowlog-max-len",
            "6",
        ],
        vec!["SLOWLOG", "RESET"],
        vec!["CLIENT", "SETNAME", "tester"],
        vec!["SET", "k", "v"],
        vec!["GET", "k"],
        vec!["SET", "big", &long],
        del,
        vec!["AUTH", "user", "secret"],
        vec!["ACL", "SETUSER", "bob", ">secret", "on"],
        vec!["CONFIG", "SET", "requirepass", ""],
    ];
    let mut problems = Vec::new();
    let mut results = Vec::new();
    for con in [&mut ours, &mut theirs] {
        for args in &script {
            let _ = run(con, args);
        }
        let len = run(con, &["SLOWLOG", "LEN"]).unwrap();
        results.push((slow_entries(con), len));
    }
    if results[0] != results[1] {
        problems.push(format!("{:#?}\nagainst\n{:#?}", results[0], results[1]));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let (entries, len) = &results[0];
    assert_eq!(*len, Value::Int(6));
    assert!(entries
        .iter()
        .any(|(argv, _)| argv == &["ACL", "SETUSER", "(redacted)", "(redacted)", "(redacted)"]));
    assert!(entries
        .iter()
        .any(|(argv, _)| argv == &["AUTH", "(redacted)", "(redacted)"]));
    assert!(entries
        .iter()
        .any(|(argv, _)| argv.len() == 32 && argv[31] == "... (10 more arguments)"));
    for args in [
        &["SLOWLOG", "GET", "-2"][..],
        &["SLOWLOG", "GET", "x"],
        &["SLOWLOG", "GET", "1", "2"],
        &["SLOWLOG", "LEN", "1"],
        &["SLOWLOG", "NOSUCH"],
    ] {
        assert_eq!(run(&mut ours, args), run(&mut theirs, args), "{args:?}");
    }
    // Off: nothing more is logged.
    let _ = run(
        &mut ours,
        &["CONFIG", "SET", "slowlog-log-slower-than", "-1"],
    );
    let _ = run(&mut ours, &["SLOWLOG", "RESET"]);
    let _ = run(&mut ours, &["SET", "k", "v"]);
    assert_eq!(run(&mut ours, &["SLOWLOG", "LEN"]).unwrap(), Value::Int(0));
}

/// CONFIG GET's entries for several patterns and names at once, in
/// redis's form: each entry once, whatever its case.
#[test]
fn config_get_with_several_arguments_matches_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let server = Respited::start(&[]);
    let mut ours = server.client();
    let mut theirs = redis.client();
    for args in [
        &["maxmemory", "maxmemory*", "bind", "*of"][..],
        &["maxmemory", "MAXMEMORY"],
        &["MAXMEMORY", "maxmem*y"],
        &["slaveof", "replicaof", "SLAVEOF"],
    ] {
        let get = |con: &mut redis::Connection| {
            let v: Vec<String> = redis::cmd("CONFIG")
                .arg("GET")
                .arg(args)
                .query(con)
                .unwrap();
            let mut names: Vec<String> = v.chunks(2).map(|kv| kv[0].clone()).collect();
            names.sort();
            names
        };
        assert_eq!(get(&mut ours), get(&mut theirs), "{args:?}");
    }
}

/// redis 7.0's "CONFIG sanity": every parameter CONFIG GET * lists takes
/// CONFIG SET of its own value and still shows it, except the ones redis
/// itself leaves out (immutable ones, and those a test cannot set back).
#[test]
fn config_set_of_every_value_in_force_succeeds() {
    let server = Respited::start(&[]);
    let mut con = server.client();
    const SKIP: &[&str] = &[
        "rdbchecksum",
        "daemonize",
        "io-threads-do-reads",
        "tcp-backlog",
        "always-show-logo",
        "syslog-enabled",
        "cluster-enabled",
        "disable-thp",
        "aclfile",
        "unixsocket",
        "pidfile",
        "syslog-ident",
        "appendfilename",
        "appenddirname",
        "supervised",
        "syslog-facility",
        "databases",
        "io-threads",
        "logfile",
        "unixsocketperm",
        "replicaof",
        "slaveof",
        "requirepass",
        "server_cpulist",
        "bio_cpulist",
        "aof_rewrite_cpulist",
        "bgsave_cpulist",
        "set-proc-title",
        "cluster-config-file",
        "cluster-port",
        "oom-score-adj",
        "oom-score-adj-values",
        "enable-protected-configs",
        "enable-debug-command",
        "enable-module-command",
        "dbfilename",
        "dir",
        "socket-mark-id",
    ];
    let before = config_get(&mut con, "*");
    assert!(before.len() > 150, "{} parameters", before.len());
    for (name, value) in &before {
        if SKIP.contains(&name.as_str()) {
            continue;
        }
        let set: redis::RedisResult<()> = redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(value)
            .query(&mut con);
        assert!(set.is_ok(), "CONFIG SET {name} {value:?}: {set:?}");
    }
    assert_eq!(config_get(&mut con, "*"), before);
    // A value other than the one in force is still refused where respite
    // decides it (`appendonly`, its own start-up settings).
    for (name, value) in [("appendonly", "no"), ("readers", "99")] {
        assert_eq!(
            error_of(&mut con, &["CONFIG", "SET", name, value]),
            format!(
                "ERR CONFIG SET failed (possibly related to argument '{name}') - can't set immutable config"
            )
        );
    }
}

/// CONFIG SET port and bind listen anew, as redis's: a busy port fails
/// with redis's text, changes nothing (the other arguments included) and
/// keeps the old listener; a free one moves the listener.
#[test]
fn config_set_port_and_bind_rebind_the_listener() {
    let redis = RedisServer::start();
    let server = Respited::start(&[]);
    let mut ours = server.client();
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy_port = busy.local_addr().unwrap().port().to_string();
    let args = [
        "CONFIG",
        "SET",
        "maxmemory",
        "10000001",
        "port",
        &busy_port,
        "client-query-buffer-limit",
        "10m",
    ];
    let expected = "ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port. Check server logs.";
    assert_eq!(error_of(&mut ours, &args), expected);
    if let Some(redis) = &redis {
        assert_eq!(error_of(&mut redis.client(), &args), expected);
    }
    let bind_args = ["CONFIG", "SET", "bind", "192.0.2.1", "maxmemory", "5"];
    assert_eq!(
        error_of(&mut ours, &bind_args),
        "ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to specified addresses."
    );
    if let Some(redis) = &redis {
        assert_eq!(
            error_of(&mut redis.client(), &bind_args),
            error_of(&mut ours, &bind_args)
        );
    }
    assert_eq!(config_get(&mut ours, "maxmemory")["maxmemory"], "0");
    assert_eq!(
        config_get(&mut ours, "client-query-buffer-limit")["client-query-buffer-limit"],
        "1073741824"
    );
    assert_eq!(
        config_get(&mut ours, "port")["port"],
        server.port.to_string()
    );
    common::assert_still_serves(&mut common::client_for(server.port));

    // The values in force: nothing moves.
    let same = server.port.to_string();
    redis::cmd("CONFIG")
        .arg(&["SET", "bind", "127.0.0.1", "port", &same])
        .query::<()>(&mut ours)
        .unwrap();
    common::assert_still_serves(&mut common::client_for(server.port));

    // A free port: the new listener answers, the old one is closed, and
    // the connection that asked stays open.
    let new_port = common::free_port();
    redis::cmd("CONFIG")
        .arg(&["SET", "port", &new_port.to_string()])
        .query::<()>(&mut ours)
        .unwrap();
    assert_eq!(config_get(&mut ours, "port")["port"], new_port.to_string());
    let info: String = redis::cmd("INFO").arg("server").query(&mut ours).unwrap();
    assert!(info.contains(&format!("tcp_port:{new_port}\r\n")), "{info}");
    common::assert_still_serves(&mut common::client_for(new_port));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::net::TcpStream::connect(("127.0.0.1", server.port)).is_ok() {
        assert!(std::time::Instant::now() < deadline, "old port still open");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Two addresses, one of them optional and absent here: the one that
    // exists is bound.
    redis::cmd("CONFIG")
        .arg(&["SET", "bind", "127.0.0.1 -192.0.2.1"])
        .query::<()>(&mut ours)
        .unwrap();
    assert_eq!(
        config_get(&mut ours, "bind")["bind"],
        "127.0.0.1 -192.0.2.1"
    );
    common::assert_still_serves(&mut common::client_for(new_port));
    drop(busy);
}

/// DEBUG DIGEST and DIGEST-VALUE compute redis's digests over the same
/// data: equal hex strings for every type, with and without a TTL, for
/// missing keys and for the whole dataset (redis's test suites compare
/// them across COPY, RESTORE and reloads).
#[test]
fn debug_digest_matches_redis() {
    let Some(redis) = RedisServer::start_with(&["--enable-debug-command", "yes"]) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("respite.toml");
    std::fs::write(&conf, "enable_debug_command = \"yes\"\n").unwrap();
    let server = Respited::start_in(dir.path(), &["--config", conf.to_str().unwrap()]);
    let mut ours = server.client();
    let mut theirs = redis.client();
    let script: &[&[&str]] = &[
        &["DEBUG", "DIGEST"],
        &["RPUSH", "l", "a", "b", "1", "-2", ""],
        &["SADD", "s", "1", "2", "x", "-7"],
        &["SADD", "ints", "1", "2", "300"],
        &[
            "ZADD", "z", "1.5", "a", "2", "b", "inf", "c", "-0.1", "d", "3", "17",
        ],
        &["HSET", "h", "f", "v", "g", "w", "12", "34"],
        &["SET", "str", "12345"],
        &["SET", "bin", "a\x00b"],
        &["SET", "e", "v", "EX", "100"],
        &[
            "DEBUG",
            "DIGEST-VALUE",
            "l",
            "s",
            "ints",
            "z",
            "h",
            "str",
            "bin",
            "e",
            "nosuch",
        ],
        &["DEBUG", "DIGEST-VALUE"],
        &["DEBUG", "DIGEST"],
        &["SELECT", "3"],
        &["COPY", "h", "h2", "DB", "0"],
        &["DEBUG", "DIGEST-VALUE", "h"],
        &["SET", "in3", "x"],
        &["DEBUG", "DIGEST"],
        &["RPUSH", "l2", "b", "a"],
        &["RPUSH", "l3", "a", "b"],
        &["DEBUG", "DIGEST-VALUE", "l2", "l3"],
    ];
    for args in script {
        assert_eq!(run(&mut ours, args), run(&mut theirs, args), "{args:?}");
    }
}

/// DEBUG PROTOCOL answers every RESP type byte for byte as redis-server,
/// in RESP2 and RESP3 (booleans, big numbers, attributes, a push before
/// its reply, verbatim text), and the same error for a bad name.
#[test]
fn debug_protocol_matches_redis_byte_for_byte() {
    let Some(redis) = RedisServer::start_with(&["--enable-debug-command", "yes"]) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("respite.toml");
    std::fs::write(&conf, "enable_debug_command = \"yes\"\n").unwrap();
    let server = Respited::start_in(dir.path(), &["--config", conf.to_str().unwrap()]);
    let quiet = std::time::Duration::from_millis(200);
    let talk = |port: u16, hello: &str| {
        let mut stream = common::raw_for(port);
        std::io::Write::write_all(&mut stream, &common::encode(&["HELLO", hello])).unwrap();
        common::read_until_quiet(&mut stream, quiet);
        let mut out = Vec::new();
        for name in [
            "string", "integer", "double", "bignum", "null", "array", "set", "map", "attrib",
            "push", "true", "false", "verbatim", "nosuch",
        ] {
            std::io::Write::write_all(&mut stream, &common::encode(&["DEBUG", "PROTOCOL", name]))
                .unwrap();
            let (got, _) = common::read_until_quiet(&mut stream, quiet);
            out.push((name, String::from_utf8_lossy(&got).into_owned()));
        }
        out
    };
    for hello in ["2", "3"] {
        assert_eq!(
            talk(server.port, hello),
            talk(redis.port, hello),
            "RESP{hello}"
        );
    }
}

#[test]
fn latency_monitor_and_histogram_match_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("respite.toml");
    std::fs::write(&conf, "enable_debug_command = \"yes\"\n").unwrap();
    let server = Respited::start_in(dir.path(), &["--config", conf.to_str().unwrap()]);
    let mut ours = resp3(server.port);
    let mut theirs = resp3(redis.port);
    for con in [&mut ours, &mut theirs] {
        // Disabled and never enabled: redis's refusal.
        let doctor = format!("{:?}", run(con, &["LATENCY", "DOCTOR"]).unwrap());
        assert!(
            doctor.contains("Latency monitoring is disabled"),
            "{doctor}"
        );
        run(con, &["CONFIG", "SET", "latency-monitor-threshold", "50"]).unwrap();
        assert_eq!(
            run(con, &["LATENCY", "LATEST"]).unwrap(),
            Value::Array(vec![])
        );
        let doctor = format!("{:?}", run(con, &["LATENCY", "DOCTOR"]).unwrap());
        assert!(doctor.contains("no latency spike was observed"), "{doctor}");
        for _ in 0..3 {
            run(con, &["SET", "k", "v"]).unwrap();
        }
    }
    // The histograms: the same shape (calls, then cumulative buckets).
    let hist = |con: &mut redis::Connection| {
        let hist = run(con, &["LATENCY", "HISTOGRAM", "set", "nosuch", "config"]).unwrap();
        let Value::Map(cmds) = hist else {
            panic!("{hist:?}")
        };
        cmds.into_iter()
            .map(|(name, v)| {
                let Value::Map(f) = v else { panic!("{v:?}") };
                assert_eq!(text(&f[0].0), "calls");
                assert_eq!(text(&f[1].0), "histogram_usec");
                let Value::Map(buckets) = &f[1].1 else {
                    panic!()
                };
                let counts: Vec<i64> = buckets
                    .iter()
                    .map(|(_, n)| if let Value::Int(n) = n { *n } else { panic!() })
                    .collect();
                assert!(
                    counts.windows(2).all(|w| w[0] < w[1]),
                    "cumulative: {counts:?}"
                );
                (text(&name), (f[0].1.clone(), counts.last().copied()))
            })
            .collect::<BTreeMap<_, _>>()
    };
    assert_eq!(hist(&mut ours), hist(&mut theirs));
    // A container stands for its subcommands, and a subcommand answers by
    // its full name (`client|id`), case aside.
    for con in [&mut ours, &mut theirs] {
        run(con, &["CONFIG", "RESETSTAT"]).unwrap();
        run(con, &["CLIENT", "ID"]).unwrap();
        run(con, &["CLIENT", "GETNAME"]).unwrap();
    }
    let names = |con: &mut redis::Connection, args: &[&str]| {
        let Value::Map(cmds) = run(con, args).unwrap() else {
            panic!()
        };
        let mut names: Vec<String> = cmds.iter().map(|(n, _)| text(n)).collect();
        names.sort();
        names
    };
    for args in [
        &["LATENCY", "HISTOGRAM", "client"][..],
        &["LATENCY", "HISTOGRAM", "client|id"],
        &[
            "LATENCY",
            "HISTOGRAM",
            "CLIENT|GETNAME",
            "client|nosuch",
            "nosuch|id",
        ],
        &["LATENCY", "HISTOGRAM", "client|id", "client|id"],
    ] {
        let got = names(&mut ours, args);
        assert!(!got.is_empty() || args.len() > 3, "{args:?}");
        assert_eq!(got, names(&mut theirs, args), "{args:?}");
    }

    // A command slower than the threshold is an event (DEBUG SLEEP stalls
    // the writer, a `command` as redis classes it).
    run(&mut ours, &["DEBUG", "SLEEP", "0.1"]).unwrap();
    let latest = run(&mut ours, &["LATENCY", "LATEST"]).unwrap();
    let Value::Array(events) = latest else {
        panic!()
    };
    assert_eq!(events.len(), 1, "{events:?}");
    let Value::Array(f) = &events[0] else {
        panic!()
    };
    assert_eq!(text(&f[0]), "command");
    let (Value::Int(latest), Value::Int(max)) = (&f[2], &f[3]) else {
        panic!()
    };
    assert!(*latest >= 100 && max >= latest, "{f:?}");
    let Value::Array(samples) = run(&mut ours, &["LATENCY", "HISTORY", "command"]).unwrap() else {
        panic!()
    };
    assert_eq!(samples.len(), 1);
    let doctor = format!("{:?}", run(&mut ours, &["LATENCY", "DOCTOR"]).unwrap());
    assert!(doctor.contains("1. command: 1 latency spikes"), "{doctor}");
    assert_eq!(
        run(&mut ours, &["LATENCY", "RESET", "command", "nosuch"]).unwrap(),
        Value::Int(1)
    );
    assert_eq!(
        run(&mut ours, &["LATENCY", "HISTORY", "command"]).unwrap(),
        Value::Array(vec![])
    );
    for args in [
        &["LATENCY", "HISTORY"][..],
        &["LATENCY", "NOSUCH"],
        &["LATENCY", "LATEST", "x"],
        &["LATENCY", "RESET"],
    ] {
        assert_eq!(run(&mut ours, args), run(&mut theirs, args), "{args:?}");
    }
}

/// Every container's HELP is redis's text, line for line (redis's
/// `addReplyHelp` ends each with `HELP` / `Prints this help.`). CLIENT's
/// is left out: it lists redis 7.2's SETINFO and NO-TOUCH and not
/// TRACKING, which respite does not have.
#[test]
fn help_replies_are_redis_text() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let server = Respited::start(&[]);
    let (mut ours, mut theirs) = (server.client(), redis.client());
    for cmd in [
        "ACL", "COMMAND", "CONFIG", "LATENCY", "MEMORY", "OBJECT", "SLOWLOG",
    ] {
        let args = [cmd, "HELP"];
        assert_eq!(run(&mut ours, &args), run(&mut theirs, &args), "{cmd} HELP");
    }
}

/// LATENCY GRAPH of one slow command on each server. The latencies
/// differ, so the digits are set aside; everything else is redis's text
/// (a one-sample graph is the same whatever the sample: `_` on the bottom
/// row, its age written downwards under a blank row), and the numbers in
/// respite's title are its LATENCY LATEST's.
#[test]
fn latency_graph_draws_what_redis_draws() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("respite.toml");
    std::fs::write(&conf, "enable_debug_command = \"yes\"\n").unwrap();
    let server = Respited::start_in(dir.path(), &["--config", conf.to_str().unwrap()]);
    let mut ours = server.client();
    let mut theirs = redis.client();
    let before: &[&[&str]] = &[
        &["LATENCY", "GRAPH", "command"],
        &["LATENCY", "GRAPH"],
        &["LATENCY", "GRAPH", "command", "x"],
        &["LATENCY", "HELP"],
    ];
    for args in before {
        assert_eq!(run(&mut ours, args), run(&mut theirs, args), "{args:?}");
    }
    for con in [&mut ours, &mut theirs] {
        run(con, &["CONFIG", "SET", "latency-monitor-threshold", "50"]).unwrap();
    }
    // A command of at least 100 ms on each: DEBUG SLEEP here; redis-server
    // refuses DEBUG unless started with it, so a script that spins.
    run(&mut ours, &["DEBUG", "SLEEP", "0.1"]).unwrap();
    run(
        &mut theirs,
        &[
            "EVAL",
            "local s = redis.call('TIME') repeat local n = redis.call('TIME') \
             until (n[1] - s[1]) * 1000000 + (n[2] - s[2]) > 100000 return 1",
            "0",
        ],
    )
    .unwrap();
    let graph =
        |con: &mut redis::Connection| text(&run(con, &["LATENCY", "GRAPH", "command"]).unwrap());
    let (mine, redis_graph) = (graph(&mut ours), graph(&mut theirs));
    // Each number as one `N` (a label's digits are one a row, so stay).
    let digits = |s: &str| -> String {
        let mut out = s
            .chars()
            .map(|c| if c.is_ascii_digit() { 'N' } else { c })
            .collect::<String>();
        while out.contains("NN") {
            out = out.replace("NN", "N");
        }
        out
    };
    assert_eq!(digits(&mine), digits(&redis_graph), "{mine}\n{redis_graph}");
    assert!(
        mine.starts_with("command - high ") && mine.lines().nth(1) == Some(&"-".repeat(80)[..]),
        "{mine}"
    );
    let Value::Array(events) = run(&mut ours, &["LATENCY", "LATEST"]).unwrap() else {
        panic!()
    };
    let Value::Array(f) = &events[0] else {
        panic!()
    };
    let (Value::Int(ms), Value::Int(max)) = (&f[2], &f[3]) else {
        panic!("{f:?}")
    };
    let title = format!("command - high {ms} ms, low {ms} ms (all time high {max} ms)");
    assert_eq!(mine.lines().next(), Some(&title[..]), "{mine}");
    // Case matters, as in redis: the event is `command`.
    for args in [
        &["LATENCY", "GRAPH", "COMMAND"][..],
        &["LATENCY", "GRAPH", "nosuch"],
    ] {
        assert_eq!(run(&mut ours, args), run(&mut theirs, args), "{args:?}");
    }
}

/// LOLWUT against redis-server. The art is random in both, so each
/// reply is reduced to its shape: per line, braille characters as `B`
/// (version 5) or one of the four gray cells as `C` (version 6), anything
/// else as itself; the signature lines, the version line of every other
/// version and the errors must be redis's exactly.
#[test]
fn lolwut_draws_redis_shapes() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let server = Respited::start(&[]);
    let (mut ours, mut theirs) = (server.client(), redis.client());
    let shape = |reply: Result<Value, String>| -> Result<String, String> {
        let text = text(&reply?);
        let mut out = text.clone();
        for cell in ["0;30;40m", "0;90;100m", "0;37;47m", "0;97;107m"] {
            out = out.replace(&format!("\x1b[{cell} \x1b[0m"), "C");
        }
        Ok(out
            .chars()
            .map(|c| {
                if ('\u{2800}'..='\u{28ff}').contains(&c) {
                    'B'
                } else {
                    c
                }
            })
            .collect())
    };
    let cases: &[&[&str]] = &[
        &["LOLWUT"],
        &["LOLWUT", "foo", "bar"],
        &["LOLWUT", "VERSION"],
        &["LOLWUT", "VERSION", "7", "x"],
        &["LOLWUT", "VERSION", "50"],
        &["LOLWUT", "VERSION", "-1"],
        &["LOLWUT", "VERSION", "5"],
        &["LOLWUT", "version", "5", "1", "1", "1"],
        &["LOLWUT", "VERSION", "5", "40", "3", "5"],
        &["LOLWUT", "VERSION", "5", "7", "200", "1"],
        &["LOLWUT", "VERSION", "5", "10", "1", "1", "ignored"],
        &["LOLWUT", "VERSION", "5", "0", "-3", "0"],
        &["LOLWUT", "VERSION", "4294967301", "20"],
        &["LOLWUT", "VERSION", "6"],
        &["LOLWUT", "VERSION", "6", "1", "1"],
        &["LOLWUT", "VERSION", "6", "13", "5", "x"],
        &["LOLWUT", "VERSION", "6", "-5", "3000"],
        &["LOLWUT", "VERSION", "x"],
        &["LOLWUT", "VERSION", "5", "1.5"],
        &["LOLWUT", "VERSION", "5", "1", "2", "x"],
        &["LOLWUT", "VERSION", "6", "80", "-0"],
    ];
    for args in cases {
        let (mine, redis_shape) = (shape(run(&mut ours, args)), shape(run(&mut theirs, args)));
        assert_eq!(mine, redis_shape, "{args:?}");
    }
    // Schotter's first two rows of squares are not random (redis turns
    // and moves squares from the third row down): with the defaults (side
    // 16 pixels) the first 6 lines (24 pixel rows) are drawn before any
    // third-row square can reach them, so they must be redis's exactly,
    // braille dot for dot.
    let head = |con: &mut redis::Connection| {
        let art = text(&run(con, &["LOLWUT", "VERSION", "5"]).unwrap());
        art.lines().take(6).collect::<Vec<_>>().join("\n")
    };
    let mine = head(&mut ours);
    assert_eq!(mine, head(&mut theirs));
    assert!(mine.chars().any(|c| c != '\u{2800}' && c != '\n'), "{mine}");
    // The shapes compared above are not trivially equal: version 5 is
    // braille above the signature, version 6 cells.
    let five = shape(run(&mut ours, &["LOLWUT", "VERSION", "5"])).unwrap();
    assert!(five.starts_with(&"B".repeat(66)), "{five}");
    assert!(five.ends_with("\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. 7.0.15\n"));
    let six = shape(run(&mut ours, &["LOLWUT", "VERSION", "6"])).unwrap();
    assert_eq!(
        six.lines().filter(|l| *l == "C".repeat(80)).count(),
        20,
        "{six}"
    );
}

#[test]
fn wait_waitaof_role_lolwut_and_debug() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("respite.toml");
    std::fs::write(&conf, "enable_debug_command = \"yes\"\n").unwrap();
    let server = Respited::start_in(dir.path(), &["--config", conf.to_str().unwrap()]);
    let mut ours = resp3(server.port);
    let mut theirs = resp3(redis.port);
    let cases: &[&[&str]] = &[
        &["ROLE"],
        &["WAIT", "0", "0"],
        &["WAIT", "-1", "100"],
        &["WAIT", "x", "0"],
        &["WAIT", "1", "-1"],
        &["WAIT", "1", "x"],
        &["WAIT", "1"],
        &["ROLE", "x"],
    ];
    for args in cases {
        assert_eq!(run(&mut ours, args), run(&mut theirs, args), "{args:?}");
    }
    // No replica ever acknowledges: WAIT blocks for its timeout, then
    // counts none.
    let started = std::time::Instant::now();
    assert_eq!(
        run(&mut ours, &["WAIT", "1", "200"]).unwrap(),
        Value::Int(0)
    );
    assert!(started.elapsed() >= std::time::Duration::from_millis(190));
    // Inside MULTI nothing blocks.
    for con in [&mut ours, &mut theirs] {
        run(con, &["MULTI"]).unwrap();
        run(con, &["WAIT", "1", "0"]).unwrap();
        assert_eq!(
            run(con, &["EXEC"]).unwrap(),
            Value::Array(vec![Value::Int(0)])
        );
    }
    // WAITAOF (redis 7.2): the local fsync is done with appendfsync always.
    assert_eq!(
        run(&mut ours, &["WAITAOF", "1", "0", "0"]).unwrap(),
        Value::Array(vec![Value::Int(1), Value::Int(0)])
    );
    assert_eq!(
        run(&mut ours, &["WAITAOF", "2", "0", "0"]),
        Err("ERR value is out of range, value must between 0 and 1".into())
    );
    assert_eq!(
        run(&mut ours, &["WAITAOF", "0", "1", "100"]).unwrap(),
        Value::Array(vec![Value::Int(1), Value::Int(0)])
    );

    // LOLWUT ends with the version line.
    let lolwut = format!("{:?}", run(&mut ours, &["LOLWUT"]).unwrap());
    assert!(lolwut.contains("Redis ver. 7.0.15"), "{lolwut}");
    assert_eq!(
        run(&mut ours, &["LOLWUT", "VERSION", "x"]),
        run(&mut theirs, &["LOLWUT", "VERSION", "x"])
    );

    // DEBUG OBJECT reports the encoding OBJECT ENCODING does, in redis's
    // line.
    let _ = run(
        &mut theirs,
        &["CONFIG", "SET", "enable-debug-command", "yes"],
    );
    let _ = run(&mut ours, &["RPUSH", "l", "a"]);
    // A shared integer (0..9999) has redis's OBJ_SHARED_REFCOUNT there too.
    for (key, value, refcount) in [
        ("s", "hello", 1),
        ("n", "12345", 1),
        ("small", "42", 2147483647),
    ] {
        let _ = run(&mut ours, &["SET", key, value]);
        let line = format!("{:?}", run(&mut ours, &["DEBUG", "OBJECT", key]).unwrap());
        let enc = if value == "hello" { "embstr" } else { "int" };
        assert!(
            line.contains(&format!(
                "refcount:{refcount} encoding:{enc} serializedlength:"
            )),
            "{line}"
        );
    }
    assert_eq!(
        run(&mut ours, &["DEBUG", "OBJECT", "nosuch"]),
        Err("ERR no such key".into())
    );
    assert_eq!(run(&mut ours, &["DEBUG", "RELOAD"]).unwrap(), Value::Okay);
    let replid = |con: &mut redis::Connection| {
        let info = info_text(con, &["replication"]);
        info.split("\r\n")
            .find(|l| l.starts_with("master_replid:"))
            .unwrap()
            .to_string()
    };
    let mut plain = server.client();
    let before = replid(&mut plain);
    assert_eq!(
        run(&mut ours, &["DEBUG", "CHANGE-REPL-ID"]).unwrap(),
        Value::Okay
    );
    assert_ne!(replid(&mut plain), before);

    // DEBUG SET-ACTIVE-EXPIRE 0 stops the sweep: an expired key is not
    // deleted (nor counted) until it is turned back on.
    let expired = |con: &mut redis::Connection| {
        let info = info_text(con, &["stats"]);
        info.split("\r\n")
            .find_map(|l| l.strip_prefix("expired_keys:"))
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    run(&mut ours, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]).unwrap();
    let _ = run(&mut ours, &["SET", "e", "v", "PX", "10"]);
    std::thread::sleep(std::time::Duration::from_millis(400));
    assert_eq!(expired(&mut plain), 0);
    run(&mut ours, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while expired(&mut plain) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the sweep did not come back"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(
        run(&mut ours, &["DEBUG", "NOSUCH"]),
        Err(
            "ERR unknown subcommand or wrong number of arguments for 'NOSUCH'. Try DEBUG HELP."
                .into()
        )
    );
}

#[test]
fn ttl_rounds_to_the_nearest_second_as_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let server = Respited::start(&[]);
    for con in [&mut server.client(), &mut redis.client()] {
        // An expiry 60.4 s away reads 60, one 59.6 s away reads 60 too.
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let _: () = redis::cmd("SET").arg("a").arg("v").query(con).unwrap();
        let _: () = redis::cmd("PEXPIREAT")
            .arg("a")
            .arg(now_ms + 60_400)
            .query(con)
            .unwrap();
        let _: () = redis::cmd("SET").arg("b").arg("v").query(con).unwrap();
        let _: () = redis::cmd("PEXPIREAT")
            .arg("b")
            .arg(now_ms + 59_800)
            .query(con)
            .unwrap();
        let (a, b): (i64, i64) = redis::pipe()
            .cmd("TTL")
            .arg("a")
            .cmd("TTL")
            .arg("b")
            .query(con)
            .unwrap();
        assert_eq!((a, b), (60, 60));
    }
}

/// CLIENT LIST's field names, in order.
fn client_fields(line: &str) -> Vec<String> {
    line.trim()
        .split(' ')
        .map(|kv| kv.split('=').next().unwrap().to_string())
        .collect()
}

fn client_field(line: &str, name: &str) -> String {
    line.trim()
        .split(' ')
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("{name} in {line}"))
        .to_string()
}

#[test]
fn client_list_info_setinfo_and_flags_match_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let server = Respited::start(&[]);
    let mut ours = server.client();
    let mut theirs = redis.client();
    for con in [&mut ours, &mut theirs] {
        let _: () = redis::cmd("CLIENT")
            .arg("NO-EVICT")
            .arg("on")
            .query(con)
            .unwrap();
        let _: () = redis::cmd("CLIENT")
            .arg("SETNAME")
            .arg("me")
            .query(con)
            .unwrap();
    }
    let a: String = redis::cmd("CLIENT").arg("LIST").query(&mut ours).unwrap();
    let b: String = redis::cmd("CLIENT").arg("LIST").query(&mut theirs).unwrap();
    // redis 7.0's fields, in its order; then 7.2's lib-name and lib-ver.
    let mut want = client_fields(&b);
    want.extend(["lib-name".to_string(), "lib-ver".to_string()]);
    assert_eq!(client_fields(&a), want);
    for field in ["cmd", "flags", "name", "db", "resp", "user", "multi", "sub"] {
        assert_eq!(client_field(&a, field), client_field(&b, field), "{field}");
    }
    assert_eq!(client_field(&a, "cmd"), "client|list");
    assert!(client_field(&a, "fd").parse::<i32>().unwrap() > 2);
    assert_eq!(client_field(&a, "flags"), "e");

    let _: () = redis::cmd("CLIENT")
        .arg("SETINFO")
        .arg("LIB-NAME")
        .arg("redis-rs")
        .query(&mut ours)
        .unwrap();
    let _: () = redis::cmd("CLIENT")
        .arg("SETINFO")
        .arg("lib-ver")
        .arg("1.0")
        .query(&mut ours)
        .unwrap();
    let info: String = redis::cmd("CLIENT").arg("INFO").query(&mut ours).unwrap();
    assert_eq!(client_field(&info, "lib-name"), "redis-rs");
    assert_eq!(client_field(&info, "lib-ver"), "1.0");
    assert_eq!(client_field(&info, "cmd"), "client|info");
    assert_eq!(
        error_of(&mut ours, &["CLIENT", "SETINFO", "lib-name", "a b"]),
        "ERR lib-name cannot contain spaces, newlines or special characters."
    );
    assert_eq!(
        error_of(&mut ours, &["CLIENT", "SETINFO", "other", "x"]),
        "ERR Unrecognized option 'other'"
    );
    let _: () = redis::cmd("CLIENT")
        .arg("NO-TOUCH")
        .arg("on")
        .query(&mut ours)
        .unwrap();
    let info: String = redis::cmd("CLIENT").arg("INFO").query(&mut ours).unwrap();
    assert_eq!(client_field(&info, "flags"), "eT");

    let cases: &[&[&str]] = &[
        &["CLIENT", "NO-EVICT", "maybe"],
        &["CLIENT", "REPLY", "maybe"],
        &["CLIENT", "PAUSE", "x"],
        &["CLIENT", "PAUSE", "-1"],
        &["CLIENT", "PAUSE", "10", "NOSUCH"],
        &["CLIENT", "PAUSE", "10", "ALL", "extra"],
        &["CLIENT", "KILL", "TYPE", "nosuch"],
        &["CLIENT", "KILL", "TYPE", "pubsub"],
        &["CLIENT", "KILL", "ID", "0"],
        &["CLIENT", "KILL", "ID", "987654"],
        &["CLIENT", "KILL", "USER", "nosuch"],
        &["CLIENT", "KILL", "127.0.0.1:1"],
        &["CLIENT", "KILL", "ADDR"],
        &["CLIENT", "LIST", "TYPE", "nosuch"],
        &["CLIENT", "LIST", "TYPE", "master"],
        &["CLIENT", "LIST", "ID", "x"],
        &["CLIENT", "GETREDIR"],
        &["CLIENT", "UNPAUSE"],
        &["CLIENT", "NOSUCH"],
    ];
    for args in cases {
        assert_eq!(
            error_of(&mut ours, args),
            error_of(&mut theirs, args),
            "{args:?}"
        );
    }
}

#[test]
fn client_reply_off_skip_on_match_redis_byte_for_byte() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let server = Respited::start(&[]);
    let script = b"CLIENT REPLY SKIP\r\nPING\r\nPING\r\nCLIENT REPLY OFF\r\nSET a b\r\nGET a\r\nINCR a\r\nCLIENT REPLY ON\r\nGET a\r\nCLIENT REPLY SKIP\r\nSET c d\r\nGET c\r\n";
    let mut replies = Vec::new();
    for port in [server.port, redis.port] {
        let mut s = common::raw_for(port);
        std::io::Write::write_all(&mut s, script).unwrap();
        let (got, _) = common::read_until_quiet(&mut s, std::time::Duration::from_millis(500));
        replies.push(String::from_utf8_lossy(&got).into_owned());
    }
    assert_eq!(replies[0], replies[1]);
    assert_eq!(replies[0], "+PONG\r\n+OK\r\n$1\r\nb\r\n$1\r\nd\r\n");
}

#[test]
fn client_pause_holds_writes_or_everything_until_unpause() {
    let server = Respited::start(&[]);
    let mut admin = server.client();
    let mut other = server.client();
    let ms = |t: std::time::Instant| t.elapsed().as_millis();

    // WRITE: reads go on, writes wait for the deadline.
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg("400")
        .arg("WRITE")
        .query(&mut admin)
        .unwrap();
    let t = std::time::Instant::now();
    let _: Option<String> = redis::cmd("GET").arg("k").query(&mut other).unwrap();
    assert!(ms(t) < 300, "a read waited {} ms", ms(t));
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query(&mut other)
        .unwrap();
    assert!(ms(t) >= 300, "a write did not wait ({} ms)", ms(t));

    // ALL holds every command, CLIENT UNPAUSE included (as redis 7.0
    // does): only the deadline ends it.
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg("600")
        .arg("ALL")
        .query(&mut admin)
        .unwrap();
    let t = std::time::Instant::now();
    let _: String = redis::cmd("PING").query(&mut other).unwrap();
    assert!(ms(t) >= 500, "PING ran during PAUSE ALL ({} ms)", ms(t));

    // WRITE, ended early by CLIENT UNPAUSE (not a write, so not held).
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg("10000")
        .arg("WRITE")
        .query(&mut admin)
        .unwrap();
    let port = server.port;
    let writer = std::thread::spawn(move || {
        let mut c = common::client_for(port);
        let t = std::time::Instant::now();
        let _: () = redis::cmd("SET").arg("k").arg("w").query(&mut c).unwrap();
        t.elapsed()
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(!writer.is_finished(), "SET ran during PAUSE WRITE");
    let _: () = redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .query(&mut admin)
        .unwrap();
    let waited = writer.join().unwrap();
    assert!(
        waited >= std::time::Duration::from_millis(250),
        "{waited:?}"
    );
    assert!(waited < std::time::Duration::from_secs(5), "{waited:?}");
    let v: String = redis::cmd("GET").arg("k").query(&mut admin).unwrap();
    assert_eq!(v, "w");
}

#[test]
fn client_kill_filters() {
    let server = Respited::start(&[]);
    let mut admin = server.client();
    let my_id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut admin).unwrap();
    let victim = |server: &Respited| {
        let mut c = server.client();
        let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut c).unwrap();
        let info: String = redis::cmd("CLIENT").arg("INFO").query(&mut c).unwrap();
        (
            c,
            id,
            client_field(&info, "addr"),
            client_field(&info, "laddr"),
        )
    };
    let alive = |c: &mut redis::Connection| redis::cmd("PING").query::<String>(c).is_ok();
    let kill = |admin: &mut redis::Connection, args: &[&str]| -> i64 {
        let mut cmd = redis::cmd("CLIENT");
        cmd.arg("KILL");
        for a in args {
            cmd.arg(*a);
        }
        cmd.query(admin).unwrap()
    };

    let (mut c, id, _, _) = victim(&server);
    assert_eq!(kill(&mut admin, &["ID", &id.to_string()]), 1);
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(!alive(&mut c));

    let (mut c, _, addr, _) = victim(&server);
    assert_eq!(kill(&mut admin, &["ADDR", &addr]), 1);
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(!alive(&mut c));

    // LADDR, TYPE normal and USER default match everyone but the caller
    // (SKIPME yes is the default).
    let (mut c, _, _, laddr) = victim(&server);
    assert_eq!(
        kill(
            &mut admin,
            &["LADDR", &laddr, "TYPE", "normal", "USER", "default"]
        ),
        1
    );
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(!alive(&mut c));
    assert!(alive(&mut admin));

    // MAXAGE: only clients at least that old.
    let (mut young, _, _, _) = victim(&server);
    assert_eq!(kill(&mut admin, &["MAXAGE", "3600"]), 0);
    assert!(alive(&mut young));

    // SKIPME no: the caller too.
    let (mut c, _, _, _) = victim(&server);
    let killed = kill(&mut admin, &["ID", &my_id.to_string(), "SKIPME", "no"]);
    assert_eq!(killed, 1);
    assert!(alive(&mut c));
}

/// A MONITOR line without its timestamp and client port: `[db] "arg" ...`.
fn monitor_line(line: &str) -> String {
    let rest = line.trim_start_matches('+');
    let (_, rest) = rest.split_once(' ').unwrap();
    let db = rest.trim_start_matches('[').split(' ').next().unwrap();
    let (_, args) = rest.split_once("] ").unwrap();
    format!("[{db}] {args}")
}

#[test]
fn monitor_streams_commands_as_redis_does() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let server = Respited::start(&[]);
    let mut outputs = Vec::new();
    for port in [server.port, redis.port] {
        let mut mon = common::raw_for(port);
        let got = common::exchange(&mut mon, b"MONITOR\r\n", 5);
        assert_eq!(got, b"+OK\r\n");
        let mut con = common::client_for(port);
        let script: &[&[&str]] = &[
            &["SET", "a b", "x\"y\n\x01"],
            &["GET", "a b"],
            &["CONFIG", "GET", "maxmemory"],
            &["AUTH", "user", "pass"],
            &["SELECT", "3"],
            &["DEL", "k"],
            &["GET"],
            &["MULTI"],
            &["SET", "m", "1"],
            &["INCR", "m"],
            &["EXEC"],
        ];
        for args in script {
            let mut cmd = redis::cmd(args[0]);
            for a in &args[1..] {
                cmd.arg(*a);
            }
            let _ = cmd.query::<redis::Value>(&mut con);
        }
        let (text, _) = common::read_until_quiet(&mut mon, std::time::Duration::from_millis(500));
        let text = String::from_utf8(text).unwrap();
        let lines: Vec<String> = text
            .split("\r\n")
            .filter(|l| !l.is_empty())
            // redis-rs's own hello on connect.
            .filter(|l| !l.contains("\"CLIENT\" \"SETINFO\""))
            .map(monitor_line)
            .collect();
        outputs.push(lines);
    }
    assert_eq!(outputs[0], outputs[1]);
    assert!(
        outputs[0].contains(&r#"[0] "SET" "a b" "x\"y\n\x01""#.to_string()),
        "{:?}",
        outputs[0]
    );
    assert!(outputs[0].contains(&r#"[3] "DEL" "k""#.to_string()));
}

#[test]
fn memory_and_object_answer_like_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let server = Respited::start(&[]);
    let mut ours = resp3(server.port);
    let mut theirs = resp3(redis.port);
    for con in [&mut ours, &mut theirs] {
        run(con, &["SET", "s", "hello"]).unwrap();
        run(con, &["RPUSH", "l", "a", "b", "c"]).unwrap();
        run(con, &["HSET", "h", "f", "v"]).unwrap();
    }
    for key in ["s", "l", "h"] {
        for args in [
            vec!["MEMORY", "USAGE", key],
            vec!["MEMORY", "USAGE", key, "SAMPLES", "0"],
        ] {
            let v = run(&mut ours, &args).unwrap();
            assert!(
                matches!(v, Value::Int(n) if n > key.len() as i64),
                "{args:?} {v:?}"
            );
        }
    }
    let cases: &[&[&str]] = &[
        &["MEMORY", "USAGE", "nosuch"],
        &["MEMORY", "USAGE", "s", "SAMPLES", "x"],
        &["MEMORY", "USAGE", "s", "NOSUCH"],
        &["MEMORY", "USAGE", "s", "SAMPLES"],
        &["MEMORY", "PURGE"],
        &["MEMORY", "NOSUCH"],
        &["MEMORY", "USAGE"],
        &["OBJECT", "FREQ", "s"],
        &["OBJECT", "REFCOUNT", "l"],
        &["OBJECT", "IDLETIME", "nosuch"],
        &["OBJECT", "ENCODING", "h"],
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"],
        &["OBJECT", "IDLETIME", "s"],
        &["CONFIG", "SET", "maxmemory-policy", "noeviction"],
    ];
    for args in cases {
        assert_eq!(run(&mut ours, args), run(&mut theirs, args), "{args:?}");
    }
    // MEMORY STATS: redis's fields, in redis's order.
    let keys = |v: Value| -> Vec<String> {
        let Value::Map(pairs) = v else {
            panic!("{v:?}")
        };
        pairs.iter().map(|(k, _)| text(k)).collect()
    };
    assert_eq!(
        keys(run(&mut ours, &["MEMORY", "STATS"]).unwrap()),
        keys(run(&mut theirs, &["MEMORY", "STATS"]).unwrap())
    );
    let doctor = format!("{:?}", run(&mut ours, &["MEMORY", "DOCTOR"]).unwrap());
    assert!(doctor.contains("Sam"), "{doctor}");
    assert_eq!(
        run(&mut ours, &["MEMORY", "MALLOC-STATS"]).unwrap(),
        Value::BulkString(b"Stats not supported for the current allocator".to_vec())
    );
}

/// Runs redis-cli with arguments, feeding `stdin`; its standard output.
fn redis_cli(port: u16, args: &[&str], stdin: &[u8]) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("redis-cli")
        .arg("-p")
        .arg(port.to_string())
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("redis-cli");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn redis_cli_tools_work_against_respite() {
    if !common::have_tool("redis-cli") {
        return;
    }
    let server = Respited::start(&[]);
    let port = server.port;
    let mut con = server.client();
    let _: () = redis::cmd("SET")
        .arg("s1")
        .arg("hello")
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("RPUSH")
        .arg("l")
        .arg("a")
        .arg("b")
        .arg("c")
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg("h")
        .arg("f")
        .arg("v")
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("SADD")
        .arg("st")
        .arg("x")
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("ZADD")
        .arg("z")
        .arg(1)
        .arg("m")
        .query(&mut con)
        .unwrap();

    // --pipe: mass insertion from the protocol.
    let mut proto = Vec::new();
    for i in 0..100 {
        proto.extend_from_slice(&common::encode(&["SET", &format!("p{i}"), &i.to_string()]));
    }
    let out = redis_cli(port, &["--pipe"], &proto);
    assert!(out.contains("errors: 0, replies: 100"), "{out}");

    // --scan lists every key.
    let out = redis_cli(port, &["--scan", "--pattern", "p*"], b"");
    assert_eq!(out.lines().count(), 100, "{out}");

    // --bigkeys and --memkeys find the biggest key of each type.
    let out = redis_cli(port, &["--bigkeys"], b"");
    assert!(
        out.contains("Biggest   list found '\"l\"' has 3 items"),
        "{out}"
    );
    assert!(
        out.contains("Biggest   hash found '\"h\"' has 1 fields"),
        "{out}"
    );
    let out = redis_cli(port, &["--memkeys"], b"");
    assert!(out.contains("Biggest   list found '\"l\"' has"), "{out}");
    assert!(out.contains("1 zsets with"), "{out}");

    // --latency (raw: one line after a second: min max avg samples).
    let out = redis_cli(port, &["--latency", "--raw"], b"");
    let fields: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(fields.len(), 4, "{out}");
    assert!(fields[3].parse::<u64>().unwrap() > 0, "{out}");

    // --stat, briefly (unbuffered through stdbuf, stopped after its first
    // lines).
    if common::have_tool("stdbuf") {
        use std::io::BufRead;
        let mut child = std::process::Command::new("stdbuf")
            .args([
                "-o0",
                "redis-cli",
                "-p",
                &port.to_string(),
                "--stat",
                "-i",
                "0.2",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let header = lines.next().unwrap().unwrap();
        assert!(header.contains("------- data ------"), "{header}");
        let _columns = lines.next().unwrap().unwrap();
        let first = lines.next().unwrap().unwrap();
        let _ = child.kill();
        let _ = child.wait();
        let keys: u64 = first.split_whitespace().next().unwrap().parse().unwrap();
        assert_eq!(keys, 105, "{first}");
    }
}

#[test]
fn sighup_applies_the_redis_table() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("respite.toml");
    std::fs::write(&conf, "[redis]\nslowlog-max-len = 10\n").unwrap();
    let server = Respited::start_in(dir.path(), &["--config", conf.to_str().unwrap()]);
    let mut con = server.client();
    assert_eq!(
        config_get(&mut con, "slowlog-max-len")["slowlog-max-len"],
        "10"
    );
    std::fs::write(
        &conf,
        "[redis]\nslowlog-max-len = 30\nnotify-keyspace-events = \"Ex\"\n",
    )
    .unwrap();
    common::signal(server.pid(), "HUP");
    let line = server.wait_log("configuration reloaded", std::time::Duration::from_secs(10));
    assert!(line.contains("slowlog-max-len 10 -> 30"), "{line}");
    assert_eq!(
        config_get(&mut con, "slowlog-max-len")["slowlog-max-len"],
        "30"
    );
    assert_eq!(
        config_get(&mut con, "notify-keyspace-events")["notify-keyspace-events"],
        "xE"
    );
}

#[test]
fn client_list_shows_an_open_multi_as_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let server = Respited::start(&[]);
    let mut seen = Vec::new();
    for port in [server.port, redis.port] {
        let mut a = common::raw_for(port);
        let id = common::exchange(&mut a, b"CLIENT ID\r\n", 3);
        let id = String::from_utf8_lossy(&id)
            .trim()
            .trim_start_matches(':')
            .to_string();
        common::exchange(&mut a, b"MULTI\r\nSET a 1\r\nSET b 2\r\n", 23);
        let mut b = common::client_for(port);
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .arg("ID")
            .arg(&id)
            .query(&mut b)
            .unwrap();
        seen.push((client_field(&list, "multi"), client_field(&list, "flags")));
    }
    assert_eq!(seen[0], seen[1]);
    assert_eq!(seen[0], ("2".to_string(), "x".to_string()));
}

/// The keepalive timer `ss` shows for the server's side of a connection
/// from `client_port`.
fn keepalive_timer(server_port: u16, client_port: u16) -> String {
    let out = std::process::Command::new("ss")
        .args([
            "-tno",
            "state",
            "established",
            &format!("( sport = :{server_port} and dport = :{client_port} )"),
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn tcp_keepalive_applies_to_new_connections() {
    if !common::have_tool("ss") {
        return;
    }
    let server = Respited::start(&[]);
    let mut admin = server.client();
    // A round trip first: the server has accepted (and set up) the
    // connection once it answers.
    let mut first = server.raw();
    assert_eq!(common::exchange(&mut first, b"PING\r\n", 7), b"+PONG\r\n");
    let shown = keepalive_timer(server.port, first.local_addr().unwrap().port());
    assert!(
        shown.contains("timer:(keepalive,4min") || shown.contains("timer:(keepalive,5min"),
        "default 300 s: {shown}"
    );
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("tcp-keepalive")
        .arg("60")
        .query(&mut admin)
        .unwrap();
    let mut second = server.raw();
    assert_eq!(common::exchange(&mut second, b"PING\r\n", 7), b"+PONG\r\n");
    let shown = keepalive_timer(server.port, second.local_addr().unwrap().port());
    assert!(
        shown.contains("timer:(keepalive,59sec") || shown.contains("timer:(keepalive,1min"),
        "{shown}"
    );
}

/// CONFIG SET loglevel swaps the log filter at run time (redis's levels on
/// tracing's: debug and verbose show debug lines, notice is info, warning
/// is warn): a protocol error, logged at debug, shows only once the level
/// is debug, and not again after warning.
#[test]
fn config_set_loglevel_changes_what_is_logged() {
    let server = Respited::start(&[]);
    let mut con = server.client();
    let protocol_error = || {
        let mut s = common::raw_for(server.port);
        std::io::Write::write_all(&mut s, b"*x\r\n").unwrap();
        common::read_until_quiet(&mut s, std::time::Duration::from_secs(2));
    };
    let logged = |needle: &str| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(500);
        let mut seen = false;
        while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
            match server.log.recv_timeout(left) {
                Ok(line) => seen |= line.contains(needle),
                Err(_) => break,
            }
        }
        seen
    };
    protocol_error();
    assert!(
        !logged("protocol error"),
        "a debug line at the default level"
    );
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("loglevel")
        .arg("debug")
        .query(&mut con)
        .unwrap();
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("loglevel")
        .query(&mut con)
        .unwrap();
    assert_eq!(got, vec!["loglevel", "debug"]);
    protocol_error();
    server.wait_log("protocol error", std::time::Duration::from_secs(5));
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("loglevel")
        .arg("warning")
        .query(&mut con)
        .unwrap();
    protocol_error();
    assert!(!logged("protocol error"), "a debug line at warning");
}

/// INFO clients' `client_recent_max_input_buffer` shows the largest read
/// buffer: a client halfway through sending a 100 KB value holds at least
/// what it sent.
#[test]
fn info_shows_the_largest_client_input_buffer() {
    use std::io::Write;
    let server = Respited::start(&[]);
    let mut con = server.client();
    let field = |con: &mut redis::Connection| {
        common::info_field(con, "clients", "client_recent_max_input_buffer")
    };
    let idle = field(&mut con);
    let mut raw = server.raw();
    raw.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100000\r\n")
        .unwrap();
    raw.write_all(&vec![b'x'; 60_000]).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while field(&mut con) < 60_000.0 {
        assert!(std::time::Instant::now() < deadline, "idle {idle}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    drop(raw);
}

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
        if args.get(2) == Some(&"eval") {
            // respite has no EVAL: an invalid command to it.
            assert_eq!(a, Err("ERR Invalid command specified".into()));
            continue;
        }
        if a != b {
            problems.push(format!("{args:?}: {a:?} against {b:?}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

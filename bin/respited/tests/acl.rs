//! ACL users against a real respited: logging in, what a restricted user
//! may do (pipelined GET and SET included, which take the connection's
//! fast paths), the log and counters, the ACL file, and what happens to
//! connections when their user changes or goes. The replies redis-server
//! gives to the same commands are compared in `differential.rs`.

mod common;

use std::time::Duration;

use common::*;

fn cmd(con: &mut redis::Connection, args: &[&str]) -> redis::RedisResult<redis::Value> {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(con)
}

fn ok(con: &mut redis::Connection, args: &[&str]) {
    match cmd(con, args) {
        Ok(redis::Value::Okay) => {}
        other => panic!("{args:?}: {other:?}"),
    }
}

fn err(con: &mut redis::Connection, args: &[&str]) -> String {
    match cmd(con, args) {
        Err(e) => format!("{} {}", e.code().unwrap_or(""), e.detail().unwrap_or("")),
        Ok(v) => panic!("{args:?} succeeded: {v:?}"),
    }
}

fn text(con: &mut redis::Connection, args: &[&str]) -> String {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query::<String>(con).unwrap()
}

const NOPERM_KEY: &str =
    "NOPERM this user has no permissions to access one of the keys used as arguments";

#[test]
fn a_restricted_user_gets_noperm_for_commands_and_keys_even_pipelined() {
    let server = Respited::start(&[]);
    let mut admin = server.client();
    ok(
        &mut admin,
        &[
            "ACL",
            "SETUSER",
            "app",
            "on",
            ">apppw",
            "~app:*",
            "+get",
            "+set",
            "+ping",
            "+client|list",
        ],
    );
    ok(&mut admin, &["SET", "other", "secret"]);
    let mut app = server.client();
    ok(&mut app, &["AUTH", "app", "apppw"]);
    ok(&mut app, &["SET", "app:1", "v"]);
    assert_eq!(text(&mut app, &["GET", "app:1"]), "v");
    assert_eq!(err(&mut app, &["GET", "other"]), NOPERM_KEY);
    assert_eq!(
        err(&mut app, &["DEL", "app:1"]),
        "NOPERM this user has no permissions to run the 'del' command"
    );
    assert_eq!(
        err(&mut app, &["CONFIG", "GET", "maxclients"]),
        "NOPERM this user has no permissions to run the 'config|get' command"
    );
    // CLIENT LIST names the user; the admin connection is `default`.
    let list = text(&mut app, &["CLIENT", "LIST"]);
    assert!(list.contains(" user=app "), "{list}");
    assert!(list.contains(" user=default "), "{list}");
    // Plain GET and SET take the connection's fast paths: pipelined, the
    // refusals still hold, and nothing was written.
    let mut raw = raw_for(server.port);
    let mut pipeline = encode(&["AUTH", "app", "apppw"]);
    pipeline.extend(encode(&["GET", "other"]));
    pipeline.extend(encode(&["SET", "other", "overwritten"]));
    pipeline.extend(encode(&["GET", "app:1"]));
    let want = format!("+OK\r\n-{NOPERM_KEY}\r\n-{NOPERM_KEY}\r\n$1\r\nv\r\n");
    let got = exchange(&mut raw, &pipeline, want.len());
    assert_eq!(String::from_utf8_lossy(&got), want);
    assert_eq!(text(&mut admin, &["GET", "other"]), "secret");
    // Counted in INFO, and logged.
    assert_eq!(
        info_field(&mut admin, "stats", "acl_access_denied_cmd"),
        2.0
    );
    assert_eq!(
        info_field(&mut admin, "stats", "acl_access_denied_key"),
        3.0
    );
    assert_eq!(
        info_field(&mut admin, "stats", "acl_access_denied_auth"),
        0.0
    );
    let log: Vec<redis::Value> = redis::cmd("ACL").arg("LOG").query(&mut admin).unwrap();
    // The three refusals of the same key by the same user share an entry.
    assert_eq!(log.len(), 3, "{log:?}");
    let newest = format!("{:?}", log[0]);
    assert!(
        newest.contains("int(3)") && newest.contains("\"other\"") && newest.contains("\"key\""),
        "{newest}"
    );
}

#[test]
fn rule_changes_reach_connected_clients_and_deleting_a_user_closes_them() {
    let server = Respited::start(&[]);
    let mut admin = server.client();
    ok(
        &mut admin,
        &[
            "ACL", "SETUSER", "u", "on", "nopass", "+get", "+multi", "+exec", "~*",
        ],
    );
    let mut u = server.client();
    ok(&mut u, &["AUTH", "u", "anything"]);
    assert_eq!(
        err(&mut u, &["SET", "k", "v"]),
        "NOPERM this user has no permissions to run the 'set' command"
    );
    // Allowed from the next command on, on the open connection.
    ok(&mut admin, &["ACL", "SETUSER", "u", "+set"]);
    ok(&mut u, &["SET", "k", "v"]);
    // Taken away between MULTI and EXEC: refused at EXEC with Redis's text.
    let mut raw = raw_for(server.port);
    let mut queued = encode(&["AUTH", "u", "x"]);
    queued.extend(encode(&["MULTI"]));
    queued.extend(encode(&["SET", "k", "queued"]));
    let want = "+OK\r\n+OK\r\n+QUEUED\r\n";
    assert_eq!(
        String::from_utf8_lossy(&exchange(&mut raw, &queued, want.len())),
        want
    );
    ok(&mut admin, &["ACL", "SETUSER", "u", "-set"]);
    let want = "*1\r\n-NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: no permission to execute the command or subcommand\r\n";
    assert_eq!(
        String::from_utf8_lossy(&exchange(&mut raw, &encode(&["EXEC"]), want.len())),
        want
    );
    assert_eq!(text(&mut admin, &["GET", "k"]), "v");
    let log: Vec<Vec<redis::Value>> = redis::cmd("ACL")
        .arg("LOG")
        .arg("1")
        .query(&mut admin)
        .unwrap();
    assert_eq!(log[0][5], redis::Value::BulkString(b"multi".to_vec()));
    ok(&mut admin, &["ACL", "SETUSER", "u", "+set"]);
    // And taken away again, fast path included.
    ok(&mut admin, &["ACL", "SETUSER", "u", "-set"]);
    let mut raw = raw_for(server.port);
    let mut pipeline = encode(&["AUTH", "u", "x"]);
    pipeline.extend(encode(&["SET", "k", "v2"]));
    let want = "+OK\r\n-NOPERM this user has no permissions to run the 'set' command\r\n";
    assert_eq!(
        String::from_utf8_lossy(&exchange(&mut raw, &pipeline, want.len())),
        want
    );
    // Turning the user off keeps open connections; a new login fails.
    ok(&mut admin, &["ACL", "SETUSER", "u", "off"]);
    assert_eq!(text(&mut u, &["GET", "k"]), "v");
    let mut other = server.client();
    assert_eq!(
        err(&mut other, &["AUTH", "u", "x"]),
        "WRONGPASS invalid username-password pair or user is disabled."
    );
    // CLIENT KILL USER, and an unknown user.
    assert_eq!(
        err(&mut admin, &["CLIENT", "KILL", "USER", "nobody"]),
        "ERR No such user 'nobody'"
    );
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("USER")
        .arg("u")
        .query(&mut admin)
        .unwrap();
    // `u` and the two raw connections logged in as u; not the admin.
    assert_eq!(killed, 3);
    assert!(cmd(&mut u, &["GET", "k"]).is_err());
    let (_, closed) = read_until_quiet(&mut raw, Duration::from_secs(2));
    assert!(closed);
    // DELUSER closes the user's connections.
    ok(&mut admin, &["ACL", "SETUSER", "u", "on"]);
    let mut again = raw_for(server.port);
    assert_eq!(
        exchange(&mut again, &encode(&["AUTH", "u", "x"]), 5),
        b"+OK\r\n"
    );
    let deleted: i64 = redis::cmd("ACL")
        .arg("DELUSER")
        .arg("u")
        .arg("nosuch")
        .query(&mut admin)
        .unwrap();
    assert_eq!(deleted, 1);
    let (rest, closed) = read_until_quiet(&mut again, Duration::from_secs(2));
    assert!(closed, "{rest:?}");
    assert_eq!(text(&mut admin, &["ACL", "WHOAMI"]), "default");
}

#[test]
fn requirepass_is_the_default_users_password() {
    let server = Respited::start(&["--requirepass", "s3cret"]);
    let mut con = server.client();
    assert_eq!(
        err(&mut con, &["GET", "k"]),
        "NOAUTH Authentication required."
    );
    assert_eq!(
        err(&mut con, &["AUTH", "wrong"]),
        "WRONGPASS invalid username-password pair or user is disabled."
    );
    ok(&mut con, &["AUTH", "default", "s3cret"]);
    let list: Vec<String> = redis::cmd("ACL").arg("LIST").query(&mut con).unwrap();
    assert_eq!(
        list,
        [format!(
            "user default on #{} ~* &* +@all",
            sha256_hex("s3cret")
        )]
    );
    assert_eq!(info_field(&mut con, "stats", "acl_access_denied_auth"), 1.0);
    ok(&mut con, &["CONFIG", "RESETSTAT"]);
    assert_eq!(info_field(&mut con, "stats", "acl_access_denied_auth"), 0.0);
    // CONFIG SET requirepass changes it; connections stay logged in.
    ok(&mut con, &["CONFIG", "SET", "requirepass", "other"]);
    assert_eq!(text(&mut con, &["PING"]), "PONG");
    let mut fresh = server.client();
    ok(&mut fresh, &["AUTH", "other"]);
    // Removing it opens the default user again.
    ok(&mut con, &["CONFIG", "SET", "requirepass", ""]);
    let mut open = server.client();
    ok(&mut open, &["SET", "k", "v"]);
}

/// SHA-256 in hex, computed by the system's sha256sum (an independent
/// implementation).
fn sha256_hex(text: &str) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("sha256sum");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn the_acl_file_is_loaded_at_start_saved_and_reloaded() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("users.acl");
    std::fs::write(
        &file,
        format!(
            "user default on nopass ~* &* +@all\nuser reader on #{} ~cache:* resetchannels -@all +@read\n",
            sha256_hex("rpw")
        ),
    )
    .unwrap();
    let file_arg = file.display().to_string();
    let server = Respited::start(&["--aclfile", &file_arg]);
    let mut admin = server.client();
    let users: Vec<String> = redis::cmd("ACL").arg("USERS").query(&mut admin).unwrap();
    assert_eq!(users, ["default", "reader"]);
    let mut reader = server.client();
    ok(&mut reader, &["AUTH", "reader", "rpw"]);
    assert_eq!(
        err(&mut reader, &["SET", "cache:1", "v"]),
        "NOPERM this user has no permissions to run the 'set' command"
    );
    // SAVE writes ACL LIST's lines.
    ok(
        &mut admin,
        &["ACL", "SETUSER", "writer", "on", ">wpw", "~*", "+@write"],
    );
    ok(&mut admin, &["ACL", "SAVE"]);
    let saved = std::fs::read_to_string(&file).unwrap();
    let list: Vec<String> = redis::cmd("ACL").arg("LIST").query(&mut admin).unwrap();
    assert_eq!(saved, list.join("\n") + "\n");
    // A broken file changes nothing, and says where it is wrong.
    std::fs::write(&file, "user x on +nosuchcommand\nnot a user line\n").unwrap();
    let e = err(&mut admin, &["ACL", "LOAD"]);
    assert!(
        e.contains(&format!(
            "{file_arg}:1: Error in applying operation '+nosuchcommand': Unknown command or category name in ACL."
        )) && e.contains("should start with user keyword")
            && e.ends_with("no change to the previously active ACL rules was performed"),
        "{e}"
    );
    assert_eq!(
        redis::cmd("ACL")
            .arg("USERS")
            .query::<Vec<String>>(&mut admin)
            .unwrap(),
        ["default", "reader", "writer"]
    );
    // LOAD replaces the users and closes the other users' connections.
    std::fs::write(&file, "user solo on nopass ~* +@all\n").unwrap();
    ok(&mut admin, &["ACL", "LOAD"]);
    assert_eq!(
        redis::cmd("ACL")
            .arg("USERS")
            .query::<Vec<String>>(&mut admin)
            .unwrap(),
        ["default", "solo"]
    );
    assert!(cmd(&mut reader, &["GET", "cache:1"]).is_err());
    // The file cannot be moved by a client.
    assert!(err(&mut admin, &["CONFIG", "SET", "aclfile", "/tmp/x"])
        .contains("can't set immutable config"));
}

#[test]
fn a_broken_acl_file_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("users.acl");
    std::fs::write(&file, "user x on +nosuch\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_respited"))
        .args(["--port", "0", "--aclfile"])
        .arg(&file)
        .arg("--db")
        .arg(dir.path().join("r.db"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("cannot load the ACL file"), "{log}");
    assert!(
        !dir.path().join("r.db").exists(),
        "a failed start leaves no database"
    );
}

#[test]
fn hello_auth_logs_in_and_a_failure_is_logged() {
    let server = Respited::start(&[]);
    let mut admin = server.client();
    ok(
        &mut admin,
        &[
            "ACL",
            "SETUSER",
            "h",
            "on",
            ">hpw",
            "allcommands",
            "allkeys",
        ],
    );
    let mut raw = raw_for(server.port);
    let got = exchange(&mut raw, &encode(&["HELLO", "2", "AUTH", "h", "bad"]), 10);
    assert_eq!(
        String::from_utf8_lossy(&got),
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
    let got = exchange(&mut raw, &encode(&["HELLO", "2", "AUTH", "h", "hpw"]), 10);
    assert!(
        got.starts_with(b"*14\r\n"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    let got = exchange(&mut raw, &encode(&["ACL", "WHOAMI"]), 6);
    assert_eq!(got, b"$1\r\nh\r\n");
    let log: Vec<Vec<redis::Value>> = redis::cmd("ACL").arg("LOG").query(&mut admin).unwrap();
    assert_eq!(log.len(), 1);
    let fields: Vec<String> = log[0]
        .iter()
        .map(|v| match v {
            redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            redis::Value::Int(n) => n.to_string(),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        &fields[..10],
        [
            "count", "1", "reason", "auth", "context", "toplevel", "object", "HELLO", "username",
            "h"
        ]
    );
    ok(&mut admin, &["ACL", "LOG", "RESET"]);
    let log: Vec<redis::Value> = redis::cmd("ACL").arg("LOG").query(&mut admin).unwrap();
    assert!(log.is_empty());
}

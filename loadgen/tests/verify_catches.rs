//! `--verify` must catch a server that answers fast and wrong. A tiny
//! in-test RESP server stores SETs faithfully but corrupts one GET reply.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use common::run_json;

/// Reads one command as a RESP array of bulk strings (all a client sends);
/// `None` at end of stream or on anything else.
fn read_command(r: &mut BufReader<TcpStream>) -> Option<Vec<Vec<u8>>> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let n: usize = line.trim().strip_prefix('*')?.parse().ok()?;
    let mut args = Vec::with_capacity(n);
    for _ in 0..n {
        line.clear();
        r.read_line(&mut line).ok()?;
        let len: usize = line.trim().strip_prefix('$')?.parse().ok()?;
        let mut buf = vec![0; len + 2];
        r.read_exact(&mut buf).ok()?;
        buf.truncate(len);
        args.push(buf);
    }
    Some(args)
}

/// Answers one connection: SET stores, GET returns what was stored (wrong
/// from the `bad_get`-th GET on), anything else gets `+OK`.
fn serve(
    stream: TcpStream,
    db: Arc<Mutex<HashMap<Vec<u8>, Vec<u8>>>>,
    gets: Arc<AtomicU64>,
    bad_get: u64,
) {
    let mut w = stream.try_clone().unwrap();
    let mut r = BufReader::new(stream);
    while let Some(args) = read_command(&mut r) {
        let cmd = String::from_utf8_lossy(&args[0]).to_uppercase();
        let reply = match cmd.as_str() {
            "SET" => {
                db.lock().unwrap().insert(args[1].clone(), args[2].clone());
                b"+OK\r\n".to_vec()
            }
            "GET" => {
                let n = gets.fetch_add(1, Ordering::SeqCst);
                match db.lock().unwrap().get(&args[1]) {
                    Some(v) => {
                        let mut v = v.clone();
                        if n >= bad_get {
                            // The wrong answer: same length, one byte off.
                            v[0] ^= 1;
                        }
                        let mut out = format!("${}\r\n", v.len()).into_bytes();
                        out.extend_from_slice(&v);
                        out.extend_from_slice(b"\r\n");
                        out
                    }
                    None => b"$-1\r\n".to_vec(),
                }
            }
            _ => b"+OK\r\n".to_vec(),
        };
        if w.write_all(&reply).is_err() {
            return;
        }
    }
}

/// Starts the server on a free port and returns it. It serves until the test
/// process ends and corrupts every GET reply that finds a value from the
/// `bad_get`-th GET on (`u64::MAX` for an honest server).
fn start(bad_get: u64) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let db = Arc::new(Mutex::new(HashMap::new()));
    let gets = Arc::new(AtomicU64::new(0));
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let (db, gets) = (db.clone(), gets.clone());
            std::thread::spawn(move || serve(s, db, gets, bad_get));
        }
    });
    port
}

/// A small verified SET/GET run on few keys, so GETs mostly hit.
fn run(port: u16) -> (std::process::Output, serde_json::Value) {
    let p = port.to_string();
    run_json(&[
        "--port",
        &p,
        "-c",
        "2",
        "-n",
        "400",
        "--ratio",
        "1:1",
        "--keyspace",
        "10",
        "--verify",
        "-q",
    ])
}

#[test]
fn verify_passes_on_an_honest_server() {
    let (out, v) = run(start(u64::MAX));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(v["targets"][0]["verify"]["mismatches"], 0);
}

#[test]
fn verify_catches_a_wrong_get() {
    let (out, v) = run(start(150));
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let ver = &v["targets"][0]["verify"];
    assert!(ver["mismatches"].as_u64().unwrap() >= 1, "{ver}");
    let sample = ver["samples"][0].as_str().unwrap();
    assert!(sample.starts_with("GET: key"), "{sample}");
    assert!(
        v["targets"][0]["commands"]["GET"]["mismatches"]
            .as_u64()
            .unwrap()
            >= 1
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("mismatch"), "{stdout}");
}

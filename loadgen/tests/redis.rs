//! End-to-end tests against a real redis-server started by the tests
//! (skipped when it is not installed; see `common::redis`).

mod common;

use std::process::Command;
use std::time::Duration;

use common::{assert_sane, redis, run_json};

/// Flags every run shares: the server, four connections and no live line.
fn base(port: u16) -> Vec<String> {
    vec![
        "--port".into(),
        port.to_string(),
        "-c".into(),
        "4".into(),
        "-q".into(),
    ]
}

/// Runs with `base` plus `extra`, asserts success, sane figures and no
/// error replies, and returns the JSON report.
fn run_ok(port: u16, extra: &[&str]) -> serde_json::Value {
    let mut args = base(port);
    args.extend(extra.iter().map(|s| s.to_string()));
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let (out, v) = run_json(&a);
    assert!(
        out.status.success(),
        "{extra:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t = &v["targets"][0];
    assert_sane(&format!("{extra:?} overall"), &t["overall"]);
    assert_eq!(t["overall"]["errors"], 0, "{extra:?}: {t}");
    for (name, s) in t["commands"].as_object().expect("commands") {
        assert_sane(&format!("{extra:?} {name}"), s);
    }
    v
}

/// Every way of describing a workload (ratio, templates, key patterns,
/// value sizes, RESP3, pipelining, durations, profiles) runs cleanly against
/// the reference server and does what it says.
#[test]
fn every_workload_and_profile_runs() {
    let Some(r) = redis() else { return };
    let p = r.port;
    let v = run_ok(p, &["-n", "2000", "--ratio", "1:3"]);
    let cmds = v["targets"][0]["commands"].as_object().unwrap();
    assert!(cmds.contains_key("SET") && cmds.contains_key("GET"));
    let (set, get) = (
        cmds["SET"]["ops"].as_f64().unwrap(),
        cmds["GET"]["ops"].as_f64().unwrap(),
    );
    assert_eq!(set + get, 2000.0);
    assert!(
        get > set * 2.0,
        "ratio 1:3 not respected: {set} SET, {get} GET"
    );

    let v = run_ok(
        p,
        &[
            "-n",
            "1500",
            "--command",
            "2:HSET h:__key__ f __data__",
            "--command",
            "INCR ctr:__key__",
            "--command",
            "SET __key__ __data__ EX __ttl__",
            "--expire-range",
            "10-20",
            "--key-pattern",
            "sequential",
        ],
    );
    let cmds = v["targets"][0]["commands"].as_object().unwrap();
    assert_eq!(cmds.len(), 3, "{cmds:?}");
    assert!(cmds["HSET"]["ops"].as_f64().unwrap() > cmds["INCR"]["ops"].as_f64().unwrap());

    run_ok(
        p,
        &[
            "-n",
            "1000",
            "--key-pattern",
            "gaussian",
            "--data-size-range",
            "10-2000",
        ],
    );
    run_ok(
        p,
        &[
            "-n",
            "1000",
            "--key-zipf",
            "0.99",
            "--resp3",
            "-P",
            "8",
            "-t",
            "2",
        ],
    );
    run_ok(
        p,
        &["--duration", "300ms", "--warmup", "100ms", "--ratio", "1:1"],
    );
    for prof in [
        "get-heavy",
        "set-heavy",
        "mixed",
        "ttl-heavy",
        "pipeline-10",
    ] {
        let v = run_ok(p, &["-n", "1000", "--keyspace", "500", "--profile", prof]);
        assert_eq!(v["targets"][0]["overall"]["ops"], 1000, "{prof}");
    }
    let v = run_ok(p, &["-n", "40", "--keyspace", "50", "--profile", "redlite"]);
    let cmds = v["targets"][0]["commands"].as_object().unwrap();
    for c in [
        "SET_10KB",
        "HSET_1000",
        "LRANGE_1000",
        "SMEMBERS_100",
        "ZRANGE",
        "EXPIRE",
        "LPOP",
    ] {
        assert_eq!(cmds[c]["ops"], 40, "{c}");
    }
    // LRANGE 0 999 over prepared 1000-element lists moves far more bytes.
    assert!(
        cmds["LRANGE_1000"]["bytes_per_sec"].as_f64() > cmds["LRANGE_10"]["bytes_per_sec"].as_f64()
    );
}

/// `--verify` must not cry wolf: redis-server is correct by definition, so
/// any mismatch here is a bug in the checker, pipelined or not.
#[test]
fn verify_passes_against_redis() {
    let Some(r) = redis() else { return };
    let v = run_ok(
        r.port,
        &[
            "-n",
            "3000",
            "--verify",
            "--keyspace",
            "50",
            "--command",
            "SET __key__ __data__",
            "--command",
            "GET __key__",
            "--command",
            "INCR ctr:__key__",
        ],
    );
    let ver = &v["targets"][0]["verify"];
    assert_eq!(ver["mismatches"], 0, "{ver}");
    assert!(ver["checked"].as_u64().unwrap() >= 3000, "{ver}");
    let v = run_ok(
        r.port,
        &[
            "-n",
            "2000",
            "--verify",
            "--ratio",
            "1:1",
            "--keyspace",
            "20",
            "-P",
            "4",
        ],
    );
    assert_eq!(v["targets"][0]["verify"]["mismatches"], 0);
}

/// The (value, percentile) columns of an `.hgrm` file's rows.
fn hgrm_rows(text: &str) -> Vec<(f64, f64)> {
    text.lines()
        .skip(2)
        .take_while(|l| !l.starts_with('#'))
        .map(|l| {
            let f: Vec<f64> = l
                .split_whitespace()
                .map(|x| x.parse().expect("number"))
                .collect();
            (f[0], f[1])
        })
        .collect()
}

/// The report files describe one histogram, so they must agree with each
/// other and with HdrHistogram's formats.
#[test]
fn hgrm_and_json_agree_and_are_monotone() {
    let Some(r) = redis() else { return };
    let dir = tempfile::tempdir().unwrap();
    let hgrm = dir.path().join("lat.hgrm");
    let log = dir.path().join("lat.hlog");
    let html = dir.path().join("r.html");
    let (out, v) = run_json(&[
        "--target",
        &format!("redis=127.0.0.1:{}", r.port),
        "-n",
        "5000",
        "-c",
        "4",
        "-q",
        "--ratio",
        "1:1",
        "--hgrm",
        hgrm.to_str().unwrap(),
        "--hdr-log",
        log.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    for cmd in ["SET", "GET", "overall"] {
        let path = dir.path().join(format!("lat.redis.{cmd}.hgrm"));
        let text = std::fs::read_to_string(&path).expect("hgrm written");
        let rows = hgrm_rows(&text);
        assert!(rows.len() > 10);
        for w in rows.windows(2) {
            assert!(w[0].0 <= w[1].0 && w[0].1 <= w[1].1, "not monotone: {w:?}");
        }
        assert_eq!(rows.last().unwrap().1, 1.0);
        let s = if cmd == "overall" {
            &v["targets"][0]["overall"]
        } else {
            &v["targets"][0]["commands"][cmd]
        };
        for (q, key) in [(0.5, "p50_us"), (0.9, "p90_us"), (0.99, "p99_us")] {
            let want = s[key].as_f64().unwrap() / 1000.0;
            let i = rows.iter().position(|r| r.1 >= q).unwrap();
            let lo = if i == 0 { 0.0 } else { rows[i - 1].0 };
            assert!(
                lo <= want && want <= rows[i].0,
                "{cmd} {key}: {lo} <= {want} <= {}",
                rows[i].0
            );
        }
        let max_line = text.lines().find(|l| l.starts_with("#[Max")).unwrap();
        let max: f64 = max_line
            .split(['=', ','])
            .nth(1)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(
            (max - s["max_us"].as_f64().unwrap() / 1000.0).abs() < 0.01,
            "{max_line} vs {s}"
        );
    }
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(
        log.contains("#[BaseTime:") && log.contains("Tag=redis/SET,"),
        "{log}"
    );
    let html = std::fs::read_to_string(&html).unwrap();
    assert!(
        html.contains("<svg") && html.contains("Latency by percentile") && html.contains("redis")
    );
}

/// Several `--target`s are run in order, named, and compared.
#[test]
fn multiple_targets_print_a_comparison() {
    let Some(r) = redis() else { return };
    let a = format!("first=127.0.0.1:{}", r.port);
    let b = format!("second=127.0.0.1:{}", r.port);
    let (out, v) = run_json(&[
        "--target", &a, "--target", &b, "-n", "1000", "-c", "2", "-q",
    ]);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("comparison") && stdout.contains("ratio"),
        "{stdout}"
    );
    let ts = v["targets"].as_array().unwrap();
    assert_eq!(ts.len(), 2);
    assert_eq!(ts[0]["name"], "first");
    assert_eq!(ts[1]["name"], "second");
    for t in ts {
        assert_sane("target", &t["overall"]);
    }
}

/// Runs for 3 s, pausing the server with SIGSTOP for 1 s in the middle.
fn paused_run(port: u16, pid: u32, extra: &[&str]) -> serde_json::Value {
    let pid = pid.to_string();
    let pauser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1000));
        Command::new("kill").args(["-STOP", &pid]).status().unwrap();
        std::thread::sleep(Duration::from_millis(1000));
        Command::new("kill").args(["-CONT", &pid]).status().unwrap();
    });
    let p = port.to_string();
    let mut args = vec![
        "--port",
        &p,
        "-c",
        "4",
        "-q",
        "--duration",
        "3s",
        "--ratio",
        "1:1",
    ];
    args.extend_from_slice(extra);
    let (out, v) = run_json(&args);
    pauser.join().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    v
}

/// The point of `--rate`: a stalled server shows in the open loop's tail
/// (coordinated omission is avoided), while the closed loop simply stops
/// sending and hides it from every percentile but the max.
#[test]
fn open_loop_sees_a_stall_that_closed_loop_hides() {
    let Some(r) = redis() else { return };
    let pid = r.child.id();
    let open = paused_run(r.port, pid, &["--rate", "2000"]);
    let o = &open["targets"][0]["overall"];
    // A third of the scheduled requests fell in the pause: p99 sits near it.
    assert!(
        o["p99_us"].as_u64().unwrap() > 300_000,
        "open loop p99: {o}"
    );
    assert!(
        o["service"].is_object(),
        "open loop reports service time: {o}"
    );
    let rate = o["ops_per_sec"].as_f64().unwrap();
    assert!(
        (1500.0..2600.0).contains(&rate),
        "open loop keeps its rate: {rate}"
    );

    let closed = paused_run(r.port, pid, &[]);
    let c = &closed["targets"][0]["overall"];
    // Only the 4 in-flight requests waited out the pause.
    assert!(
        c["p99_us"].as_u64().unwrap() < 100_000,
        "closed loop p99: {c}"
    );
    assert!(
        c["max_us"].as_u64().unwrap() > 500_000,
        "closed loop still saw the stall: {c}"
    );
}

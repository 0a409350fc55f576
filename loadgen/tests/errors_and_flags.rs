//! A run that failed must say so: error replies are counted, shown with
//! their text and fail the exit status; a server that refuses the
//! connection's commands stops the run with the reason. Also the command
//! line a new user meets first: `--help`, unnamed targets, and
//! memtier_benchmark's flag names. All against a real redis-server.

mod common;

use std::process::Command;

use common::{command, redis, redis_with, run_json, BIN};

/// A password the run does not give: the run stops before measuring,
/// exits non-zero and names the reason, instead of reporting a rate of
/// refusals as throughput.
#[test]
fn missing_password_fails_the_run_with_the_reason() {
    let Some(r) = redis_with(&["--requirepass", "sekret"]) else {
        return;
    };
    let out = Command::new(BIN)
        .args(["-p", &r.port.to_string(), "-n", "2000", "-q"])
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("NOAUTH"), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("ops/s"));

    // With the password the same run succeeds.
    let (out, v) = run_json(&["-p", &r.port.to_string(), "-n", "500", "-q", "-a", "sekret"]);
    assert!(out.status.success());
    assert_eq!(v["targets"][0]["overall"]["ops"], 500);
}

/// Every request answered `-ERR`: no throughput, the errors counted per
/// command with their text, exit status 3; `--allow-errors` keeps the
/// figures but exits 0.
#[test]
fn error_replies_are_counted_shown_and_fail_the_exit_status() {
    let Some(r) = redis() else { return };
    let port = r.port.to_string();
    let args = [
        "-p",
        &port,
        "-n",
        "2000",
        "-c",
        "4",
        "-q",
        "--command",
        "NOSUCHCMD __key__",
        "--command",
        "3:GET __key__",
    ];
    let (out, v) = run_json(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--allow-errors"),
        "the message says how to accept errors"
    );
    let t = &v["targets"][0];
    let bad = &t["commands"]["NOSUCHCMD"];
    let good = &t["commands"]["GET"];
    let errs = bad["errors"].as_u64().unwrap();
    assert!(errs > 200, "{bad}");
    assert_eq!(bad["ops"], 0, "errors are not ops: {bad}");
    assert_eq!(bad["ops_per_sec"], 0.0, "{bad}");
    assert!(bad["errors_per_sec"].as_f64().unwrap() > 0.0, "{bad}");
    assert_eq!(good["errors"], 0);
    assert_eq!(
        errs + good["ops"].as_u64().unwrap(),
        2000,
        "every request is a success or an error"
    );
    // One distinct text despite a different key in every request.
    let texts = bad["error_replies"].as_array().expect("error texts");
    assert_eq!(texts.len(), 1, "{texts:?}");
    assert!(texts[0]["text"]
        .as_str()
        .unwrap()
        .contains("unknown command"));
    assert_eq!(texts[0]["count"].as_u64(), Some(errs));
    assert!(
        stdout.contains("ERROR REPLIES") && stdout.contains("unknown command"),
        "{stdout}"
    );
    // Overall throughput counts only the GETs.
    assert_eq!(t["overall"]["ops"], good["ops"]);

    let mut allowed = args.to_vec();
    allowed.push("--allow-errors");
    let (out, v) = run_json(&allowed);
    assert!(out.status.success());
    assert!(v["targets"][0]["overall"]["errors"].as_u64().unwrap() > 0);
}

/// `--help` starts with what the tool does and shows an example.
#[test]
fn help_opens_with_what_the_tool_does() {
    let out = Command::new(BIN).arg("--help").output().expect("run");
    let help = String::from_utf8_lossy(&out.stdout);
    let first = help.lines().next().unwrap_or("");
    assert!(
        first.starts_with("Measures the throughput and latency"),
        "{help}"
    );
    assert!(help.contains("Example"), "{help}");
    assert!(!help.contains("Fields are kept"), "{help}");
}

/// A target without a name is shown by its address once, not twice.
#[test]
fn unnamed_target_prints_its_address_once() {
    let Some(r) = redis() else { return };
    let addr = format!("127.0.0.1:{}", r.port);
    let (out, _) = run_json(&["--target", &addr, "-n", "100", "-q"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(&format!("== {addr} ==")), "{stdout}");
    assert!(!stdout.contains(&format!("({addr})")), "{stdout}");
}

/// A memtier_benchmark command line runs as memtier would: --clients per
/// thread, --test-time, keys from --key-minimum to --key-maximum, and its
/// report-file flags.
#[test]
fn memtier_command_lines_carry_over() {
    let Some(r) = redis() else { return };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("mt.json");
    let prefix = dir.path().join("lat");
    let out = Command::new(BIN)
        .args(["-p", &r.port.to_string(), "-q"])
        .args(["--threads", "2", "--clients", "3", "--test-time", "1"])
        .args([
            "--ratio",
            "1:0",
            "--key-pattern",
            "P:P",
            "--key-prefix",
            "memtier-",
        ])
        .args(["--key-minimum", "1000", "--key-maximum", "1009"])
        .args(["--data-size", "32", "--random-data", "--hide-histogram"])
        .arg("--json-out-file")
        .arg(&json)
        .arg("--hdr-file-prefix")
        .arg(&prefix)
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = common::read_json(&json, &out);
    assert_eq!(v["config"]["connections"], 6, "3 clients x 2 threads");
    assert_eq!(v["config"]["keyspace"], 10);
    let secs = v["targets"][0]["elapsed_sec"].as_f64().unwrap();
    assert!((0.9..1.5).contains(&secs), "--test-time 1 ran {secs} s");
    // PREFIX.<target>.<command>.hgrm, the target slugged for a file name.
    let target = format!("127_0_0_1_{}", r.port);
    let hgrm = dir.path().join(format!("lat.{target}.SET.hgrm"));
    assert!(hgrm.exists(), "{}", hgrm.display());
    // Exactly the ten keys memtier-1000 .. memtier-1009 were written.
    let keys = command(r.port, &["KEYS", "*"]);
    let mut names: Vec<&str> = keys.lines().filter(|l| l.starts_with("memtier-")).collect();
    names.sort();
    let want: Vec<String> = (1000..1010).map(|i| format!("memtier-{i}")).collect();
    assert_eq!(names, want, "{keys}");
}

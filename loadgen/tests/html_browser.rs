//! The HTML report, rendered by a real browser: Debian's chromium, run
//! headless, loads the report of a real run against redis-server and dumps
//! the page as its scripts left it. The test checks that the plots were
//! drawn with every curve, that no script failed, and that the latency
//! curve is not flattened against its axis.
//!
//! Skipped when chromium is not installed, unless RESPITE_REQUIRE_CHROMIUM=1
//! (CI sets it, and installs chromium) makes that a failure.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{redis, run_json};

/// The browser to use: $RESPITE_CHROMIUM, or the first of the usual names
/// that runs.
fn chromium() -> Option<String> {
    let candidates: Vec<String> = match std::env::var("RESPITE_CHROMIUM") {
        Ok(c) => vec![c],
        Err(_) => ["chromium", "chromium-browser", "google-chrome"]
            .map(String::from)
            .to_vec(),
    };
    let found = candidates.into_iter().find(|c| {
        Command::new(c)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    if found.is_none() {
        if std::env::var("RESPITE_REQUIRE_CHROMIUM").as_deref() == Ok("1") {
            panic!("chromium not found but RESPITE_REQUIRE_CHROMIUM=1");
        }
        eprintln!("skipping: chromium not found");
    }
    found
}

/// Loads `page` in headless chromium and returns (DOM after the scripts
/// ran, chromium's log with the page's console messages).
fn render(browser: &str, page: &Path) -> (String, String) {
    let profile = tempfile::tempdir().expect("tempdir");
    let dir = tempfile::tempdir().expect("tempdir");
    let (dom_path, log_path) = (dir.path().join("dom"), dir.path().join("log"));
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--no-first-run",
        ])
        // Console messages and uncaught exceptions go to the log.
        .args(["--enable-logging=stderr", "--v=0"])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .stdout(std::fs::File::create(&dom_path).expect("dom file"))
        .stderr(std::fs::File::create(&log_path).expect("log file"))
        .spawn()
        .expect("start chromium");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    (
        std::fs::read_to_string(&dom_path).expect("dom"),
        std::fs::read_to_string(&log_path).unwrap_or_default(),
    )
}

/// The `points` of every polyline of class `curve <kind>` in `dom`, parsed.
fn curves(dom: &str, kind: &str) -> Vec<Vec<(f64, f64)>> {
    let marker = format!("class=\"curve {kind}\"");
    dom.match_indices(&marker)
        .map(|(i, _)| {
            let rest = &dom[i..];
            let start = rest.find("points=\"").expect("points") + 8;
            let end = start + rest[start..].find('"').expect("end of points");
            rest[start..end]
                .split_whitespace()
                .map(|p| {
                    let (x, y) = p.split_once(',').expect("x,y");
                    (
                        x.parse().unwrap_or_else(|_| panic!("x in {p}")),
                        y.parse().unwrap_or_else(|_| panic!("y in {p}")),
                    )
                })
                .collect()
        })
        .collect()
}

#[test]
fn html_report_renders_every_curve_without_script_errors() {
    let Some(browser) = chromium() else { return };
    let Some(r) = redis() else { return };
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("report.html");
    let (out, _) = run_json(&[
        "--target",
        &format!("first=127.0.0.1:{}", r.port),
        "--target",
        &format!("second=127.0.0.1:{}", r.port),
        "--duration",
        "1.6s",
        "-c",
        "4",
        "-q",
        "--ratio",
        "1:1",
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let (dom, log) = render(&browser, &html);

    assert!(dom.contains("data-rendered=\"ok\""), "not rendered:\n{dom}");
    assert!(
        dom.contains("<pre id=\"errors\"></pre>"),
        "script errors in the page:\n{dom}"
    );
    // The page itself logs nothing: any console line is an error.
    let console: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
        .collect();
    assert!(console.is_empty(), "console: {console:?}");

    // Two targets x (SET, GET, overall), in both plots.
    assert!(dom.contains("data-curves=\"6 6\""), "curve counts:\n{dom}");
    let pct = curves(&dom, "pct");
    assert_eq!(pct.len(), 6);
    for c in &pct {
        assert!(c.len() >= 5, "too few points: {c:?}");
        assert!(c.iter().all(|(x, y)| x.is_finite() && y.is_finite()));
        // Percentiles go left to right and latency never falls.
        assert!(c.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 >= w[1].1));
        // Not a flat line on the axis: sub-millisecond latencies over a
        // log axis fill a good part of the 288-pixel-high plot.
        let ys: Vec<f64> = c.iter().map(|p| p.1).collect();
        let span = ys.iter().cloned().fold(f64::MIN, f64::max)
            - ys.iter().cloned().fold(f64::MAX, f64::min);
        assert!(span > 40.0, "flat curve, {span} px: {c:?}");
    }
    let tput = curves(&dom, "tput");
    assert_eq!(tput.len(), 6);
    for c in &tput {
        // 1.6 s: a full second and a 0.6 s interval, each at its own end.
        assert_eq!(c.len(), 2, "{c:?}");
    }
    for text in [
        "Comparison",
        "ratio",
        "Settings",
        "redis_version",
        "--duration",
    ] {
        assert!(dom.contains(text), "{text} missing from the page");
    }
}

//! Reports: the final tables and the report files (the live line is
//! `live.rs`).
//!
//! All figures come from HdrHistograms recording microseconds with three
//! significant digits, so percentiles are exact to 0.1% however long the
//! tail. The same histograms feed every output: the text table, the JSON
//! summary (whose percentile fields are defined here once, in [`Summary`]),
//! the `.hgrm` percentile distributions in the format HdrHistogram's plotter
//! and wrk2 use (values in milliseconds), the interval log (one tagged
//! histogram per second and command) and the HTML report. Because they all
//! derive from one histogram, the JSON and `.hgrm` files agree by
//! construction, which the tests check.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag as LogTag};
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::error::Error;
use crate::runner::{Interval, OpStats, VerifyOutcome};

/// Microseconds, as recorded, to milliseconds, as displayed.
pub fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// Percentiles of one histogram, in microseconds.
#[derive(Debug, Clone, Serialize)]
pub struct Percentiles {
    /// Rounded to 0.1 µs: finer digits would only be histogram noise.
    pub mean_us: f64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub p9999_us: u64,
    pub max_us: u64,
}

impl Percentiles {
    /// Reads the reported percentiles off `h`.
    pub fn of(h: &Histogram<u64>) -> Percentiles {
        Percentiles {
            mean_us: (h.mean() * 10.0).round() / 10.0,
            p50_us: h.value_at_quantile(0.5),
            p90_us: h.value_at_quantile(0.9),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            p9999_us: h.value_at_quantile(0.9999),
            max_us: h.max(),
        }
    }
}

/// One distinct error text and how many replies carried it.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorText {
    pub text: String,
    pub count: u64,
}

/// The JSON object written per target overall and per command.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Measured successful replies (warm-up and error replies excluded).
    pub ops: u64,
    /// `ops` over the measured time, rounded to 0.1: error replies are not
    /// throughput.
    pub ops_per_sec: f64,
    /// Flattened so the JSON reads `p99_us` rather than `latency.p99_us`;
    /// over successful replies only.
    #[serde(flatten)]
    pub latency: Percentiles,
    /// Measured replies that were RESP errors.
    pub errors: u64,
    /// `errors` over the measured time, rounded to 0.1.
    pub errors_per_sec: f64,
    /// The first distinct error texts with their counts (absent when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub error_replies: Vec<ErrorText>,
    /// Replies `--verify` rejected (0 without it).
    pub mismatches: u64,
    /// Request plus reply bytes per second, as encoded on the wire.
    pub bytes_per_sec: f64,
    /// Open loop only: time from the actual send, not the intended one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service: Option<Percentiles>,
}

impl Summary {
    /// Summarises `s` over `elapsed`; `open_loop` adds the service times.
    pub fn of(s: &OpStats, elapsed: Duration, open_loop: bool) -> Summary {
        let secs = elapsed.as_secs_f64().max(1e-9);
        Summary {
            ops: s.ops,
            ops_per_sec: (s.ops as f64 / secs * 10.0).round() / 10.0,
            latency: Percentiles::of(&s.latency),
            errors: s.errors,
            errors_per_sec: (s.errors as f64 / secs * 10.0).round() / 10.0,
            error_replies: s
                .error_texts
                .iter()
                .map(|(text, count)| ErrorText {
                    text: text.clone(),
                    count: *count,
                })
                .collect(),
            mismatches: s.mismatches,
            bytes_per_sec: ((s.tx + s.rx) as f64 / secs).round(),
            service: open_loop.then(|| Percentiles::of(&s.service)),
        }
    }
}

/// One stretch of the time series, normally a second.
pub struct IntervalRow {
    /// Seconds into the measured run (phases laid end to end).
    pub start: f64,
    /// Its true length: the last interval of a phase ends with the phase's
    /// last reply, not on a whole second (see `TargetResult::add_phase`).
    pub secs: f64,
    /// Latencies of the successful replies per command.
    pub hists: Vec<(String, Histogram<u64>)>,
    /// Error replies, all commands together.
    pub errors: u64,
}

impl IntervalRow {
    /// Successful replies per second over the interval, all commands or
    /// (with `cmd`) one.
    pub fn rate(&self, cmd: Option<&str>) -> f64 {
        let n: u64 = self
            .hists
            .iter()
            .filter(|(c, _)| cmd.is_none_or(|w| w == c))
            .map(|(_, h)| h.len())
            .sum();
        n as f64 / self.secs.max(1e-9)
    }
}

/// A final interval shorter than this is merged into the one before it:
/// a rate over a few milliseconds is noise, and plotting it as a whole
/// second drew a false drop at the end of every curve.
const MIN_LAST_INTERVAL: f64 = 0.25;

/// Everything measured against one target.
pub struct TargetResult {
    /// The target's name.
    pub name: String,
    /// The target's address, as displayed.
    pub addr: String,
    /// Per command, with the measured time of the phase it ran in: phases
    /// run one after another, so each command's rate is over its own phase.
    pub commands: Vec<(OpStats, Duration)>,
    /// Every command of every phase merged.
    pub overall: OpStats,
    /// The measured time of all phases together.
    pub elapsed: Duration,
    /// Every second of every phase, phases laid end to end.
    pub intervals: Vec<IntervalRow>,
    /// `--verify` results over all phases.
    pub verify: VerifyOutcome,
    /// Whether the run was open loop (`--rate`), so service times exist.
    pub open_loop: bool,
    /// What the server said about itself (`*_version` fields of `INFO
    /// server`), for the report's settings; empty if it would not say.
    pub server: Vec<(String, String)>,
}

impl TargetResult {
    /// An empty result, filled phase by phase with `add_phase`.
    pub fn new(name: &str, addr: &str, open_loop: bool) -> TargetResult {
        TargetResult {
            name: name.to_string(),
            addr: addr.to_string(),
            commands: Vec::new(),
            overall: OpStats::new("overall"),
            elapsed: Duration::ZERO,
            intervals: Vec::new(),
            verify: VerifyOutcome::default(),
            open_loop,
            server: Vec::new(),
        }
    }

    /// How the report names the target: its name, with the address
    /// beside it only when the two differ.
    pub fn label(&self) -> String {
        if self.name == self.addr {
            self.name.clone()
        } else {
            format!("{} ({})", self.name, self.addr)
        }
    }

    /// Appends one phase's figures, shifting its intervals to start where
    /// the previous phase's measured time ended.
    pub fn add_phase(
        &mut self,
        ops: Vec<OpStats>,
        elapsed: Duration,
        intervals: Vec<Interval>,
        verify: VerifyOutcome,
    ) {
        let offset = self.elapsed.as_secs_f64();
        let total = elapsed.as_secs_f64();
        let first = self.intervals.len();
        for (i, iv) in intervals.into_iter().enumerate() {
            // Interval i covers [i, i+1) seconds, but the phase ended at
            // `total`: the last one is only as long as what is left.
            let start = i as f64;
            let secs = (total - start).min(1.0);
            let count: u64 = iv.hists.iter().map(|h| h.len()).sum();
            if secs <= 0.0 {
                // Flushed after the last reply; nothing can be in it, but
                // never drop figures silently.
                if count == 0 && iv.errors == 0 {
                    continue;
                }
            }
            let hists: Vec<(String, Histogram<u64>)> = ops
                .iter()
                .zip(iv.hists)
                .map(|(o, h)| (o.name.clone(), h))
                .collect();
            let secs = secs.max(1e-3);
            if secs < MIN_LAST_INTERVAL && self.intervals.len() > first {
                if let Some(prev) = self.intervals.last_mut() {
                    for ((_, a), (_, b)) in prev.hists.iter_mut().zip(&hists) {
                        // Same bounds: cannot fail.
                        let _ = a.add(b);
                    }
                    prev.errors += iv.errors;
                    prev.secs += secs;
                    continue;
                }
            }
            self.intervals.push(IntervalRow {
                start: offset + start,
                secs,
                hists,
                errors: iv.errors,
            });
        }
        for o in ops {
            self.overall.merge(&o);
            self.commands.push((o, elapsed));
        }
        self.elapsed += elapsed;
        self.verify.checked += verify.checked;
        self.verify.mismatches += verify.mismatches;
        self.verify.samples.extend(verify.samples);
    }

    /// The summary over all commands and phases.
    pub fn overall_summary(&self) -> Summary {
        Summary::of(&self.overall, self.elapsed, self.open_loop)
    }

    /// One summary per command, in workload order.
    pub fn command_summaries(&self) -> Vec<(String, Summary)> {
        self.commands
            .iter()
            .map(|(o, e)| (o.name.clone(), Summary::of(o, *e, self.open_loop)))
            .collect()
    }

    /// Successful replies per second over each interval of the run, all
    /// commands or (with `cmd`) one, as (end of the interval, ops/s): the
    /// first point sits at x = 1, and a shorter last interval is divided
    /// by its own length.
    pub fn throughput(&self, cmd: Option<&str>) -> Vec<(f64, f64)> {
        self.intervals
            .iter()
            .filter(|iv| cmd.is_none_or(|c| iv.hists.iter().any(|(n, _)| n == c)))
            .map(|iv| (iv.start + iv.secs, iv.rate(cmd)))
            .collect()
    }

    /// Error replies over the whole run.
    pub fn errors(&self) -> u64 {
        self.overall.errors
    }
}

/// One line of the text table; the columns match the header in `text`.
fn row(out: &mut String, name: &str, s: &Summary) {
    let p = &s.latency;
    out.push_str(&format!(
        "{name:<14} {:>11.0} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>9.3} {:>7} {:>9.2}\n",
        s.ops_per_sec,
        p.mean_us / 1000.0,
        ms(p.p50_us),
        ms(p.p90_us),
        ms(p.p99_us),
        ms(p.p999_us),
        ms(p.p9999_us),
        ms(p.max_us),
        s.errors,
        s.bytes_per_sec / 1e6,
    ));
}

/// The end-of-run table for one target.
pub fn text(t: &TargetResult) -> String {
    let mut out = format!(
        "== {} ==  {} successful replies in {:.2}s\n",
        t.label(),
        t.overall.ops,
        t.elapsed.as_secs_f64()
    );
    let hdr = format!(
        "{:<14} {:>11} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>7} {:>9}\n",
        "command", "ops/s", "mean", "p50", "p90", "p99", "p99.9", "p99.99", "max", "errors", "MB/s"
    );
    out.push_str("latency in ms\n");
    out.push_str(&hdr);
    let cmds = t.command_summaries();
    for (n, s) in &cmds {
        row(&mut out, n, s);
    }
    if cmds.len() > 1 {
        row(&mut out, "overall", &t.overall_summary());
    }
    if t.open_loop {
        out.push_str("service time (from the actual send, not the schedule), ms\n");
        out.push_str(&hdr);
        for (o, e) in &t.commands {
            let mut s = Summary::of(o, *e, true);
            if let Some(sv) = s.service.take() {
                s.latency = sv;
            }
            row(&mut out, &o.name, &s);
        }
    }
    if t.errors() > 0 {
        let total = t.overall.ops + t.errors();
        out.push_str(&format!(
            "ERROR REPLIES: {} of {} requests ({:.1}%), {:.0} errors/s, not counted in ops/s\n",
            t.errors(),
            total,
            100.0 * t.errors() as f64 / total.max(1) as f64,
            t.overall_summary().errors_per_sec,
        ));
        for (o, _) in &t.commands {
            for (text, n) in &o.error_texts {
                out.push_str(&format!("  {:<12} {n:>9} x {text}\n", o.name));
            }
            let shown: u64 = o.error_texts.iter().map(|(_, n)| n).sum();
            if o.errors > shown {
                out.push_str(&format!(
                    "  {:<12} {:>9} x (other texts)\n",
                    o.name,
                    o.errors - shown
                ));
            }
        }
    }
    if t.verify.checked > 0 {
        out.push_str(&format!(
            "verify: {} replies checked, {} mismatches\n",
            t.verify.checked, t.verify.mismatches
        ));
        for s in &t.verify.samples {
            out.push_str(&format!("  mismatch: {s}\n"));
        }
    }
    out
}

/// One row of the comparison: a command, a metric, and per target its
/// value and (after the first target) the ratio to the first target's.
pub struct CompareRow {
    pub command: String,
    pub metric: &'static str,
    pub cells: Vec<(Option<f64>, Option<f64>)>,
}

/// The comparison of several targets, shared by the terminal and the HTML
/// report so that both show the same figures: ops/s, p50, p99 and p99.9
/// per command (and overall when there are several), plus errors/s when
/// any target had errors.
pub fn compare_rows(ts: &[TargetResult]) -> Vec<CompareRow> {
    let Some(base) = ts.first() else {
        return Vec::new();
    };
    let mut names: Vec<String> = base.commands.iter().map(|(o, _)| o.name.clone()).collect();
    if names.len() > 1 {
        names.push("overall".into());
    }
    // Targets ran the same workload, but look commands up by name anyway:
    // a missing one shows as `-` rather than misaligning the table.
    let get = |t: &TargetResult, n: &str| -> Option<Summary> {
        if n == "overall" {
            return Some(t.overall_summary());
        }
        t.command_summaries()
            .into_iter()
            .find(|(m, _)| m == n)
            .map(|(_, s)| s)
    };
    type Metric = (&'static str, fn(&Summary) -> f64);
    let mut metrics: Vec<Metric> = vec![
        ("ops/s", |s| s.ops_per_sec),
        ("p50 ms", |s| ms(s.latency.p50_us)),
        ("p99 ms", |s| ms(s.latency.p99_us)),
        ("p99.9 ms", |s| ms(s.latency.p999_us)),
    ];
    if ts.iter().any(|t| t.errors() > 0) {
        metrics.insert(1, ("errors/s", |s| s.errors_per_sec));
    }
    let mut rows = Vec::new();
    for n in &names {
        for (m, f) in &metrics {
            // Latencies of a command that never succeeded do not exist;
            // showing them as 0 ms would read as infinitely fast.
            let value = |t: &TargetResult| {
                get(t, n)
                    .filter(|s| s.ops > 0 || m.ends_with("/s"))
                    .map(|s| f(&s))
            };
            let b = value(base);
            let cells = ts
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let v = value(t);
                    let ratio = match (v, b) {
                        (Some(v), Some(b)) if i > 0 && b > 0.0 => Some(v / b),
                        _ => None,
                    };
                    (v, ratio)
                })
                .collect();
            rows.push(CompareRow {
                command: n.clone(),
                metric: m,
                cells,
            });
        }
    }
    rows
}

/// The side-by-side table for several targets, with ratios to the first.
pub fn comparison(ts: &[TargetResult]) -> String {
    let mut out = String::from("== comparison (ratio = target / first target) ==\n");
    out.push_str(&format!("{:<14} {:<8}", "command", "metric"));
    for (i, t) in ts.iter().enumerate() {
        out.push_str(&format!(" {:>14}", t.name));
        if i > 0 {
            out.push_str(&format!(" {:>8}", "ratio"));
        }
    }
    out.push('\n');
    for r in compare_rows(ts) {
        out.push_str(&format!("{:<14} {:<8}", r.command, r.metric));
        for (i, (v, ratio)) in r.cells.iter().enumerate() {
            match v {
                Some(v) => out.push_str(&format!(" {v:>14.3}")),
                None => out.push_str(&format!(" {:>14}", "-")),
            }
            if i > 0 {
                match ratio {
                    Some(x) => out.push_str(&format!(" {x:>7.2}x")),
                    None => out.push_str(&format!(" {:>8}", "-")),
                }
            }
        }
        out.push('\n');
    }
    out
}

/// Creates a report file, buffered.
fn create(path: &Path) -> Result<io::BufWriter<File>, Error> {
    File::create(path)
        .map(io::BufWriter::new)
        .map_err(|source| Error::Output {
            path: path.to_path_buf(),
            source,
        })
}

/// Maps an I/O error while writing `path` to `Error::Output`.
fn out_err(path: &Path) -> impl Fn(io::Error) -> Error + '_ {
    move |source| Error::Output {
        path: path.to_path_buf(),
        source,
    }
}

/// The run's effective settings, as `main` assembled them: in the JSON's
/// `config` and the HTML report's settings table, so that a report says
/// how it was made.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    /// The command line as typed (shell-quoted).
    pub command_line: String,
    /// When the run started, RFC 3339 in UTC.
    pub date: String,
    /// The workload's one-line description.
    pub workload: String,
    pub threads: usize,
    /// In total, over all threads.
    pub connections: usize,
    pub pipeline: usize,
    /// Open loop rate, requests per second in total.
    pub rate: Option<f64>,
    /// Measured requests per phase, if bounded by count.
    pub requests: Option<u64>,
    pub duration_sec: Option<f64>,
    pub warmup_sec: f64,
    pub resp3: bool,
    pub verify: bool,
    /// Distinct keys, starting at index `key_minimum`.
    pub keyspace: u64,
    pub key_minimum: u64,
    pub key_pattern: String,
    pub key_prefix: String,
    pub data_size: usize,
    pub data_size_range: Option<String>,
    /// Whether every write carries different bytes (not `--data-repeat`).
    pub random_data: bool,
    pub expire_range: Option<String>,
}

/// One target in the JSON report.
#[derive(Serialize)]
struct JsonTarget {
    name: String,
    address: String,
    /// The server's `*_version` fields from `INFO server`.
    server: serde_json::Map<String, serde_json::Value>,
    elapsed_sec: f64,
    overall: Summary,
    /// A JSON object keyed by command name, so scripts can index it
    /// (`commands.GET.p99_us`) instead of searching a list.
    commands: serde_json::Map<String, serde_json::Value>,
    /// Present only with `--verify`.
    #[serde(skip_serializing_if = "Option::is_none")]
    verify: Option<JsonVerify>,
}

/// The `--verify` section of a JSON target.
#[derive(Serialize)]
struct JsonVerify {
    checked: u64,
    mismatches: u64,
    samples: Vec<String>,
}

/// The top level of the JSON report.
#[derive(Serialize)]
struct JsonReport<'a> {
    /// Always `respite-loadgen`, so a stray file identifies itself.
    tool: &'static str,
    version: &'static str,
    /// The workload's one-line description.
    workload: &'a str,
    /// The effective settings, as assembled by `main`.
    config: &'a Settings,
    targets: Vec<JsonTarget>,
}

/// Writes the JSON summary of every target to `path`.
pub fn write_json(path: &Path, ts: &[TargetResult], settings: &Settings) -> Result<(), Error> {
    let targets = ts
        .iter()
        .map(|t| JsonTarget {
            name: t.name.clone(),
            address: t.addr.clone(),
            server: t
                .server
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                .collect(),
            elapsed_sec: t.elapsed.as_secs_f64(),
            overall: t.overall_summary(),
            commands: t
                .command_summaries()
                .into_iter()
                .map(|(n, s)| (n, serde_json::to_value(s).unwrap_or_default()))
                .collect(),
            verify: (t.verify.checked > 0).then(|| JsonVerify {
                checked: t.verify.checked,
                mismatches: t.verify.mismatches,
                samples: t.verify.samples.clone(),
            }),
        })
        .collect();
    let rep = JsonReport {
        tool: "respite-loadgen",
        version: env!("CARGO_PKG_VERSION"),
        workload: &settings.workload,
        config: settings,
        targets,
    };
    let mut w = create(path)?;
    serde_json::to_writer_pretty(&mut w, &rep).map_err(|e| out_err(path)(io::Error::other(e)))?;
    writeln!(w).and_then(|_| w.flush()).map_err(out_err(path))
}

/// File-name-safe form of a target or command name.
pub fn slug(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `out.hgrm` becomes `out.<target>.<command>.hgrm`.
pub fn suffixed(path: &Path, target: &str, cmd: &str) -> PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = path
        .extension()
        .map_or("hgrm".into(), |e| e.to_string_lossy().into_owned());
    path.with_file_name(format!("{stem}.{}.{}.{ext}", slug(target), slug(cmd)))
}

/// Writes the HdrHistogram percentile distribution text (values in ms).
pub fn hgrm_text(h: &Histogram<u64>) -> String {
    let scale = 1000.0;
    let mut out = format!(
        "{:>12} {:>14} {:>10} {:>14}\n\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    let mut total = 0u64;
    for v in h.iter_quantiles(5) {
        total += v.count_since_last_iteration();
        let q = v.quantile_iterated_to();
        let value = h.highest_equivalent(v.value_iterated_to()) as f64 / scale;
        if q < 1.0 {
            out.push_str(&format!(
                "{value:12.3} {q:2.12} {total:10} {:14.2}\n",
                1.0 / (1.0 - q)
            ));
        } else {
            out.push_str(&format!("{value:12.3} {q:2.12} {total:10}\n"));
        }
    }
    out.push_str(&format!(
        "#[Mean    = {:12.3}, StdDeviation   = {:12.3}]\n",
        h.mean() / scale,
        h.stdev() / scale
    ));
    out.push_str(&format!(
        "#[Max     = {:12.3}, Total count    = {:12}]\n",
        h.max() as f64 / scale,
        h.len()
    ));
    out.push_str(&format!(
        "#[Buckets = {:12}, SubBuckets     = {:12}]\n",
        h.buckets(),
        h.distinct_values()
    ));
    out
}

/// One `.hgrm` per target and command (plus `overall`); returns the paths.
pub fn write_hgrm(path: &Path, ts: &[TargetResult]) -> Result<Vec<PathBuf>, Error> {
    let mut written = Vec::new();
    for t in ts {
        let mut all: Vec<(&str, &Histogram<u64>)> = t
            .commands
            .iter()
            .map(|(o, _)| (o.name.as_str(), &o.latency))
            .collect();
        all.push(("overall", &t.overall.latency));
        for (cmd, h) in all {
            let p = suffixed(path, &t.name, cmd);
            let mut w = create(&p)?;
            w.write_all(hgrm_text(h).as_bytes())
                .and_then(|_| w.flush())
                .map_err(out_err(&p))?;
            written.push(p);
        }
    }
    Ok(written)
}

/// An HdrHistogram interval log: one entry per second and command, tagged
/// `target/command`; max values in ms.
pub fn write_hdr_log(path: &Path, ts: &[TargetResult], started: SystemTime) -> Result<(), Error> {
    let mut w = create(path)?;
    let mut ser = V2DeflateSerializer::new();
    let herr = |e: String| Error::HdrLog {
        path: path.to_path_buf(),
        msg: e,
    };
    {
        let mut log = IntervalLogWriterBuilder::new()
            .add_comment("respite-loadgen interval log: latency in microseconds, one entry per second per target/command")
            .with_base_time(started)
            .with_start_time(started)
            .with_max_value_divisor(1000.0)
            .begin_log_with(&mut w, &mut ser)
            .map_err(|e| herr(e.to_string()))?;
        for t in ts {
            for iv in &t.intervals {
                for (cmd, h) in &iv.hists {
                    let tag_s = format!("{}/{}", slug(&t.name), slug(cmd));
                    let tag = LogTag::new(&tag_s);
                    log.write_histogram(
                        h,
                        Duration::from_secs_f64(iv.start),
                        Duration::from_secs_f64(iv.secs),
                        tag,
                    )
                    .map_err(|e| herr(format!("{e:?}")))?;
                }
            }
        }
    }
    w.flush().map_err(out_err(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hgrm_is_monotone_and_matches_quantiles() {
        let mut h = crate::runner::new_hist();
        for v in 1..=10_000u64 {
            h.saturating_record(v);
        }
        let text = hgrm_text(&h);
        let mut prev = (0.0f64, 0.0f64);
        let mut p99_bracket = None;
        for line in text.lines().skip(2).take_while(|l| !l.starts_with('#')) {
            let f: Vec<f64> = line
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            assert!(f[0] >= prev.0 && f[1] >= prev.1, "not monotone: {line}");
            if p99_bracket.is_none() && f[1] >= 0.99 {
                p99_bracket = Some((prev.0, f[0]));
            }
            prev = (f[0], f[1]);
        }
        let (lo, hi) = p99_bracket.unwrap();
        let p99 = h.value_at_quantile(0.99) as f64 / 1000.0;
        assert!(lo <= p99 && p99 <= hi, "{lo} <= {p99} <= {hi}");
        assert!(suffixed(Path::new("/x/out.hgrm"), "a b", "SET").ends_with("out.a_b.SET.hgrm"));
    }
}

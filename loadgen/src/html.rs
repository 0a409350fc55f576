//! The self-contained HTML report (`--html`).
//!
//! One file with no external assets (CI machines and users may be offline,
//! and the file is meant to be attached to an issue or archived next to the
//! JSON). It holds:
//!
//! - the run's settings (command line, connections, pipeline, keys, values,
//!   length, date, each server's version from `INFO server`);
//! - the latency-by-percentile plot as HdrHistogram's plotter draws it: x
//!   is log10(1/(1-percentile)), so each extra nine of the tail gets as
//!   much width as the step from 0% to 90%; y is latency, log-scaled by
//!   default so a 0.3 ms median and a 100 ms maximum are both readable (a
//!   checkbox switches to a linear axis);
//! - throughput over time, each interval divided by its true length;
//! - one curve per target and command (and overall), with a selector;
//! - the comparison table with ratios, as in the terminal, and each
//!   target's summary table with its error replies.
//!
//! The tables are rendered here; the plots are drawn in the browser by a
//! small inline script from the data embedded as JSON, so the selector and
//! the axis switch need no round trip. The script reports its own failures
//! in the page (`#errors`) and marks the body `data-rendered="ok"` when
//! done, which is what the headless-browser test checks.

use std::fmt::Write as _;
use std::path::Path;

use hdrhistogram::Histogram;

use crate::error::Error;
use crate::report::{compare_rows, ms, Settings, Summary, TargetResult};

/// Escapes text for HTML element content and quoted attribute values.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// The points of a latency-by-percentile curve: (nines, ms), where nines
/// is log10(1/(1-q)). The maximum is placed at the resolution of the data,
/// 1 - 1/count, where the plotter would find it.
fn percentile_points(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    // Quantiles past 1 - 1/count are beyond what the data resolves (they
    // all read the maximum), so the curve ends at `end` with the maximum.
    let end = (h.len() as f64).log10();
    let mut pts: Vec<(f64, f64)> = h
        .iter_quantiles(5)
        .filter(|v| {
            let q = v.quantile_iterated_to();
            q < 1.0 && (1.0 / (1.0 - q)).log10() < end
        })
        .map(|v| {
            let q = v.quantile_iterated_to();
            (
                (1.0 / (1.0 - q)).log10(),
                ms(h.highest_equivalent(v.value_iterated_to())),
            )
        })
        .collect();
    pts.push((end, ms(h.max())));
    pts
}

/// Rounds for the embedded data: more digits would only bloat the file.
fn round(v: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (v * f).round() / f
}

/// The data the script plots: one curve per target and command, plus the
/// target's overall curve when it ran several commands.
fn plot_data(ts: &[TargetResult]) -> serde_json::Value {
    let mut curves = Vec::new();
    for t in ts {
        let mut items: Vec<(&str, &Histogram<u64>, Option<&str>)> = t
            .commands
            .iter()
            .map(|(o, _)| (o.name.as_str(), &o.latency, Some(o.name.as_str())))
            .collect();
        if items.len() > 1 {
            items.push(("overall", &t.overall.latency, None));
        }
        for (cmd, h, filter) in items {
            let pct: Vec<[f64; 2]> = percentile_points(h)
                .into_iter()
                .map(|(x, y)| [round(x, 4), round(y, 4)])
                .collect();
            let tput: Vec<[f64; 2]> = t
                .throughput(filter)
                .into_iter()
                .map(|(x, y)| [round(x, 3), round(y, 1)])
                .collect();
            curves.push(serde_json::json!({
                "target": t.name,
                "command": cmd,
                "pct": pct,
                "tput": tput,
            }));
        }
    }
    serde_json::json!({ "curves": curves })
}

/// The settings table: how the run was made.
fn settings_table(s: &Settings, ts: &[TargetResult]) -> String {
    let mut rows: Vec<(String, String)> = vec![
        ("command line".into(), s.command_line.clone()),
        ("date (UTC)".into(), s.date.clone()),
        ("workload".into(), s.workload.clone()),
        (
            "connections".into(),
            format!("{} over {} thread(s)", s.connections, s.threads),
        ),
        ("pipeline".into(), s.pipeline.to_string()),
        (
            "length".into(),
            match (s.requests, s.duration_sec) {
                (Some(n), _) => format!("{n} requests per phase"),
                (None, Some(d)) => format!("{d} s per phase"),
                (None, None) => "-".into(),
            },
        ),
        ("warm-up".into(), format!("{} s", s.warmup_sec)),
        (
            "load".into(),
            match s.rate {
                Some(r) => format!("open loop, {r} requests/s"),
                None => "closed loop".into(),
            },
        ),
        (
            "keyspace".into(),
            format!(
                "{} keys ({}{} .. {}{}), {}",
                s.keyspace,
                s.key_prefix,
                s.key_minimum,
                s.key_prefix,
                s.key_minimum + s.keyspace.saturating_sub(1),
                s.key_pattern
            ),
        ),
        (
            "values".into(),
            format!(
                "{} bytes, {}",
                s.data_size_range
                    .clone()
                    .unwrap_or_else(|| s.data_size.to_string()),
                if s.random_data {
                    "different on every write"
                } else {
                    "the same bytes every time (--data-repeat)"
                }
            ),
        ),
        (
            "TTL".into(),
            s.expire_range
                .as_ref()
                .map_or("none".into(), |r| format!("{r} s")),
        ),
        (
            "protocol".into(),
            if s.resp3 { "RESP3" } else { "RESP2" }.into(),
        ),
        ("verify".into(), if s.verify { "on" } else { "off" }.into()),
    ];
    for t in ts {
        let v = if t.server.is_empty() {
            "unknown (no INFO server)".to_string()
        } else {
            t.server
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        rows.push((format!("server {}", t.label()), v));
    }
    let mut out = String::from("<h2>Settings</h2><table class='settings'>");
    for (k, v) in rows {
        let _ = write!(out, "<tr><th>{}</th><td>{}</td></tr>", esc(&k), esc(&v));
    }
    out.push_str("</table>");
    out
}

/// The comparison of several targets, as in the terminal.
fn comparison_table(ts: &[TargetResult]) -> String {
    if ts.len() < 2 {
        return String::new();
    }
    let mut s = String::from(
        "<h2>Comparison</h2><p>ratio = target / first target</p><table class='cmp'><tr><th>command</th><th>metric</th>",
    );
    for (i, t) in ts.iter().enumerate() {
        let _ = write!(s, "<th>{}</th>", esc(&t.name));
        if i > 0 {
            s.push_str("<th>ratio</th>");
        }
    }
    s.push_str("</tr>");
    for r in compare_rows(ts) {
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td>",
            esc(&r.command),
            esc(r.metric)
        );
        for (i, (v, ratio)) in r.cells.iter().enumerate() {
            match v {
                Some(v) if r.metric.ends_with("/s") => {
                    let _ = write!(s, "<td>{v:.0}</td>");
                }
                Some(v) => {
                    let _ = write!(s, "<td>{v:.3}</td>");
                }
                None => s.push_str("<td>-</td>"),
            }
            if i > 0 {
                match ratio {
                    Some(x) => {
                        let _ = write!(s, "<td>{x:.2}x</td>");
                    }
                    None => s.push_str("<td>-</td>"),
                }
            }
        }
        s.push_str("</tr>");
    }
    s.push_str("</table>");
    s
}

/// The summary table of one target, per command and overall, in ms, with
/// its error replies under it.
fn table(t: &TargetResult) -> String {
    let mut s = format!(
        "<h2>{}</h2><table><tr><th>command</th><th>ops/s</th><th>mean</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>p99.99</th><th>max</th><th>errors</th><th>errors/s</th><th>MB/s</th></tr>",
        esc(&t.label()),
    );
    let mut rows: Vec<(String, Summary)> = t.command_summaries();
    if rows.len() > 1 {
        rows.push(("overall".into(), t.overall_summary()));
    }
    for (n, r) in &rows {
        let p = &r.latency;
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{:.0}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{}</td><td>{:.0}</td><td>{:.2}</td></tr>",
            esc(n),
            r.ops_per_sec,
            p.mean_us / 1000.0,
            ms(p.p50_us),
            ms(p.p90_us),
            ms(p.p99_us),
            ms(p.p999_us),
            ms(p.p9999_us),
            ms(p.max_us),
            r.errors,
            r.errors_per_sec,
            r.bytes_per_sec / 1e6
        );
    }
    s.push_str(
        "</table><p>latencies in ms, over successful replies; ops/s counts successful replies only</p>",
    );
    let errs: Vec<String> = t
        .commands
        .iter()
        .flat_map(|(o, _)| {
            o.error_texts
                .iter()
                .map(move |(text, n)| format!("{}: {n} x {text}", o.name))
        })
        .collect();
    if !errs.is_empty() {
        s.push_str("<p class='err'>Error replies:</p><ul class='err'>");
        for e in errs {
            let _ = write!(s, "<li>{}</li>", esc(&e));
        }
        s.push_str("</ul>");
    }
    s
}

/// Catches every script error, including a syntax error in the plotting
/// script, and shows it in the page; a separate script so that it runs
/// even when the other cannot be parsed.
const ONERROR: &str = r#"<script>
window.onerror = function (msg, src, line) {
  var e = document.getElementById('errors');
  e.textContent += msg + ' (line ' + line + ')\n';
  document.body.setAttribute('data-rendered', 'error');
};
</script>"#;

/// Draws both plots from the embedded data, and the selector.
const SCRIPT: &str = r##"<script>
(function () {
  var data = JSON.parse(document.getElementById('data').textContent);
  var curves = data.curves;
  var COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd',
                '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22', '#17becf'];
  var W = 820, H = 360, L = 64, R = 48, T = 28, B = 44;
  var shown = curves.map(function () { return true; });

  // 1, 2, 5 x 10^k: the tick values people read without effort.
  function niceStep(span, count) {
    var raw = span / count, p = Math.pow(10, Math.floor(Math.log10(raw)));
    var m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }
  function fmt(v) {
    if (v === 0) return '0';
    var a = Math.abs(v);
    if (a >= 1e6) return +(v / 1e6).toPrecision(3) + 'M';
    if (a >= 1e4) return +(v / 1e3).toPrecision(3) + 'k';
    return String(+v.toPrecision(3));
  }
  function linTicks(lo, hi, count) {
    var st = niceStep(hi - lo || 1, count), out = [];
    for (var v = Math.ceil(lo / st) * st; v <= hi + st * 1e-9; v += st) out.push(+v.toPrecision(12));
    return out;
  }
  function logTicks(lo, hi) {
    var out = [];
    for (var e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
      [1, 2, 5].forEach(function (m) {
        var v = +(m * Math.pow(10, e)).toPrecision(12);
        if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) out.push(v);
      });
    }
    return out;
  }
  function esc(s) {
    return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  }
  // One SVG plot: frame, ticks (x: [value, label], y: values), curves.
  function plot(id, title, xlabel, ylabel, sx, sy, xt, yt, key, cls) {
    var s = '<svg xmlns="http://www.w3.org/2000/svg" width="' + W + '" height="' + H +
      '" font-family="sans-serif" font-size="11">';
    s += '<text x="' + (W / 2) + '" y="16" text-anchor="middle" font-size="13">' + esc(title) + '</text>';
    xt.forEach(function (t) {
      var x = sx(t[0]).toFixed(1);
      s += '<line x1="' + x + '" y1="' + T + '" x2="' + x + '" y2="' + (H - B) + '" stroke="#eee"/>';
      s += '<text x="' + x + '" y="' + (H - B + 14) + '" text-anchor="middle">' + esc(t[1]) + '</text>';
    });
    yt.forEach(function (v) {
      var y = sy(v).toFixed(1);
      s += '<line x1="' + L + '" y1="' + y + '" x2="' + (W - R) + '" y2="' + y + '" stroke="#eee"/>';
      s += '<text x="' + (L - 4) + '" y="' + (+y + 4) + '" text-anchor="end">' + fmt(v) + '</text>';
    });
    s += '<line x1="' + L + '" y1="' + (H - B) + '" x2="' + (W - R) + '" y2="' + (H - B) + '" stroke="#333"/>';
    s += '<line x1="' + L + '" y1="' + T + '" x2="' + L + '" y2="' + (H - B) + '" stroke="#333"/>';
    s += '<text x="' + (L + (W - L - R) / 2) + '" y="' + (H - 8) + '" text-anchor="middle">' + esc(xlabel) + '</text>';
    s += '<text x="14" y="' + (H / 2) + '" transform="rotate(-90 14 ' + (H / 2) + ')" text-anchor="middle">' + esc(ylabel) + '</text>';
    var drawn = 0;
    curves.forEach(function (c, i) {
      if (!shown[i] || c[key].length === 0) return;
      var pts = c[key].map(function (p) { return sx(p[0]).toFixed(1) + ',' + sy(p[1]).toFixed(1); });
      s += '<polyline class="curve ' + cls + '" data-curve="' + i + '" fill="none" stroke="' +
        COLORS[i % COLORS.length] + '" stroke-width="1.8" points="' + pts.join(' ') + '"><title>' +
        esc(c.target + ' ' + c.command) + '</title></polyline>';
      drawn++;
    });
    s += '</svg>';
    document.getElementById(id).innerHTML = s;
    return drawn;
  }
  function visible(key) {
    var pts = [];
    curves.forEach(function (c, i) { if (shown[i]) pts = pts.concat(c[key]); });
    return pts;
  }
  function draw() {
    var logY = document.getElementById('logy').checked;
    // Percentiles: x in nines up to the deepest one the data reaches.
    var pp = visible('pct');
    var xmax = Math.max(1, Math.min(7, Math.ceil(Math.max.apply(null, pp.map(function (p) { return p[0]; }).concat([1])) - 1e-9)));
    var ys = pp.map(function (p) { return p[1]; });
    var ymax = Math.max.apply(null, ys.concat([0.001]));
    var ymin = Math.max(0.001, Math.min.apply(null, ys.concat([ymax])));
    var yt, sy, top = H - B - T;
    if (logY) {
      // The nearest 1-2-5 values around the data, not whole decades: a
      // 0.04-3 ms run gets 0.02-5 ms, not 0.01-10.
      var p0 = Math.pow(10, Math.floor(Math.log10(ymin))), m0 = ymin / p0;
      var lo = (m0 >= 5 ? 5 : m0 >= 2 ? 2 : 1) * p0;
      var p1 = Math.pow(10, Math.floor(Math.log10(ymax))), m1 = ymax / p1;
      var hi = (m1 <= 1 ? 1 : m1 <= 2 ? 2 : m1 <= 5 ? 5 : 10) * p1;
      if (hi <= lo) hi = lo * 2;
      yt = logTicks(lo, hi);
      sy = function (v) { return H - B - (Math.log10(Math.max(v, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo)) * top; };
    } else {
      var st = niceStep(ymax, 5), hy = Math.ceil(ymax / st) * st;
      yt = linTicks(0, hy, 5);
      sy = function (v) { return H - B - v / hy * top; };
    }
    var sx = function (x) { return L + Math.min(x, xmax) / xmax * (W - L - R); };
    var xt = [];
    for (var n = 0; n <= xmax; n++) {
      xt.push([n, n === 0 ? '0%' : (100 - Math.pow(10, 2 - n)).toFixed(Math.max(0, n - 2)) + '%']);
    }
    var a = plot('pct', 'Latency by percentile', 'percentile', 'latency (ms)' + (logY ? ', log scale' : ''),
      sx, sy, xt, yt, 'pct', 'pct');
    // Throughput: every point is an interval's end, its rate over its own length.
    var tp = visible('tput');
    var tmax = Math.max.apply(null, tp.map(function (p) { return p[0]; }).concat([1]));
    var rmax = Math.max.apply(null, tp.map(function (p) { return p[1]; }).concat([1]));
    var rst = niceStep(rmax, 5), rtop = Math.ceil(rmax * 1.05 / rst) * rst;
    var tst = niceStep(tmax, 8), ttop = Math.ceil(tmax / tst - 1e-9) * tst;
    var b = plot('tput', 'Throughput over time (successful replies)', 'seconds', 'ops/s',
      function (x) { return L + x / ttop * (W - L - R); },
      function (v) { return H - B - v / rtop * top; },
      linTicks(0, ttop, 8).map(function (v) { return [v, fmt(v)]; }),
      linTicks(0, rtop, 5), 'tput', 'tput');
    document.body.setAttribute('data-curves', a + ' ' + b);
  }
  var sel = document.getElementById('curves');
  curves.forEach(function (c, i) {
    var l = document.createElement('label');
    l.innerHTML = '<input type="checkbox" checked data-curve="' + i + '"><span class="sw" style="background:' +
      COLORS[i % COLORS.length] + '"></span>' + esc(c.target + ' ' + c.command);
    l.firstChild.addEventListener('change', function (ev) { shown[i] = ev.target.checked; draw(); });
    sel.appendChild(l);
  });
  document.getElementById('logy').addEventListener('change', draw);
  draw();
  if (document.body.getAttribute('data-rendered') !== 'error') document.body.setAttribute('data-rendered', 'ok');
})();
</script>"##;

/// Writes the whole report for `ts` to `path`.
pub fn write_html(path: &Path, ts: &[TargetResult], settings: &Settings) -> Result<(), Error> {
    let mut s = String::from(
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>respite-loadgen report</title>\
<style>body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;margin-bottom:.5em}\
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}td:first-child,th:first-child{text-align:left}\
table.settings td{text-align:left;font-family:monospace}table.cmp td:nth-child(2){text-align:left}\
#curves label{margin-right:1.2em;white-space:nowrap}.sw{display:inline-block;width:10px;height:10px;margin:0 4px}\
.err{color:#b00}#errors{color:#b00}</style></head><body>",
    );
    s.push_str(ONERROR);
    let _ = write!(
        s,
        "<h1>respite-loadgen report</h1><p>{} &mdash; {}</p><pre id='errors'></pre>",
        esc(&settings.workload),
        esc(&settings.date)
    );
    s.push_str(
        "<div id='curves'></div><p><label><input type='checkbox' id='logy' checked> log latency axis</label></p>\
<div id='pct'></div><div id='tput'></div>",
    );
    s.push_str(&comparison_table(ts));
    for t in ts {
        s.push_str(&table(t));
    }
    s.push_str(&settings_table(settings, ts));
    // `</` inside the JSON would end the script element early.
    let json = plot_data(ts).to_string().replace("</", "<\\/");
    let _ = write!(
        s,
        "<script type='application/json' id='data'>{json}</script>"
    );
    s.push_str(SCRIPT);
    s.push_str("</body></html>\n");
    std::fs::write(path, s).map_err(|source| Error::Output {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_points_reach_the_max() {
        let mut h = crate::runner::new_hist();
        for v in 1..=1000u64 {
            h.saturating_record(v);
        }
        let pts = percentile_points(&h);
        let last = pts.last().copied().unwrap_or_default();
        assert!((last.0 - 3.0).abs() < 1e-9 && (last.1 - 1.0).abs() < 1e-3);
        assert!(pts.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
    }
}

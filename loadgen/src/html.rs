//! The self-contained HTML report (`--html`).
//!
//! One file with no scripts and no external assets, so it can be attached
//! to an issue or archived next to the JSON: a summary table per target, the
//! latency-by-percentile plot in the style of HdrHistogram's plotter (the
//! x axis is log-scaled in 1/(1-percentile), so the tail gets as much room
//! as the median; one curve per target) and throughput over time. The plots
//! are inline SVG drawn here, which is simpler than shipping a chart library.

use std::fmt::Write as _;
use std::path::Path;

use crate::error::Error;
use crate::report::{Summary, TargetResult};

/// One colour per target, in `--target` order (matplotlib's defaults, which
/// stay distinguishable in print); they repeat beyond six targets.
const COLORS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
];
/// Width of each plot, in SVG units.
const W: f64 = 760.0;
/// Height of each plot, in SVG units.
const H: f64 = 320.0;
/// Room left of and below the plot area for tick labels and axis titles.
const PAD: f64 = 56.0;

/// The colour of the `i`-th target.
fn color(i: usize) -> &'static str {
    COLORS[i % COLORS.len()]
}

/// Escapes text for HTML and SVG content. Names come from the command line
/// and are put in element text only, never in attributes, so `&`, `<` and
/// `>` suffice.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Opens an SVG plot: the title, both axes and their labels. Callers add
/// ticks and curves, then close it with `finish_plot`.
fn svg_frame(title: &str, xlabel: &str, ylabel: &str) -> String {
    format!(
        "<svg xmlns='http://www.w3.org/2000/svg' width='{W}' height='{H}' font-family='sans-serif' font-size='11'>\
<text x='{}' y='16' text-anchor='middle' font-size='13'>{}</text>\
<line x1='{PAD}' y1='{}' x2='{}' y2='{}' stroke='#333'/><line x1='{PAD}' y1='24' x2='{PAD}' y2='{}' stroke='#333'/>\
<text x='{}' y='{}' text-anchor='middle'>{}</text>\
<text x='14' y='{}' transform='rotate(-90 14 {})' text-anchor='middle'>{}</text>",
        W / 2.0,
        esc(title),
        H - PAD,
        W - 10.0,
        H - PAD,
        H - PAD,
        W / 2.0,
        H - 12.0,
        esc(xlabel),
        H / 2.0,
        H / 2.0,
        esc(ylabel)
    )
}

/// One curve, from points already in SVG coordinates.
fn polyline(points: &[(f64, f64)], color: &str) -> String {
    let mut s = format!("<polyline fill='none' stroke='{color}' stroke-width='1.8' points='");
    for (x, y) in points {
        let _ = write!(s, "{x:.1},{y:.1} ");
    }
    s.push_str("'/>");
    s
}

/// A colour key in the top-left corner of the plot area, one row per name.
fn legend(names: &[&str]) -> String {
    let mut s = String::new();
    for (i, n) in names.iter().enumerate() {
        let y = 34.0 + 14.0 * i as f64;
        let _ = write!(
            s,
            "<rect x='{}' y='{}' width='10' height='10' fill='{}'/><text x='{}' y='{}'>{}</text>",
            PAD + 10.0,
            y - 9.0,
            color(i),
            PAD + 24.0,
            y,
            esc(n)
        );
    }
    s
}

/// Draws one curve per target (`series[i]` belongs to `ts[i]`, in data
/// coordinates mapped through `sx`/`sy`), adds the legend and closes the
/// SVG opened by `svg_frame`.
fn finish_plot(
    mut s: String,
    ts: &[TargetResult],
    series: &[Vec<(f64, f64)>],
    sx: impl Fn(f64) -> f64,
    sy: impl Fn(f64) -> f64,
) -> String {
    for (i, c) in series.iter().enumerate() {
        let pts: Vec<(f64, f64)> = c.iter().map(|(x, y)| (sx(*x), sy(*y))).collect();
        s.push_str(&polyline(&pts, color(i)));
    }
    s.push_str(&legend(
        &ts.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
    ));
    s.push_str("</svg>");
    s
}

/// Latency against percentile, one curve per target, as HdrHistogram's
/// plotter draws it: the x axis is log10(1/(1-q)), so each extra nine of
/// the tail gets the same width as the step from 0% to 90%.
fn percentile_plot(ts: &[TargetResult]) -> String {
    // x = log10(1/(1-q)), up to 99.999%.
    let xmax = 5.0;
    let curves: Vec<Vec<(f64, f64)>> = ts
        .iter()
        .map(|t| {
            let h = &t.overall.latency;
            h.iter_quantiles(5)
                .map(|v| {
                    let q = v.quantile_iterated_to().min(0.99999);
                    (
                        (1.0 / (1.0 - q)).log10(),
                        h.highest_equivalent(v.value_iterated_to()) as f64 / 1000.0,
                    )
                })
                .collect()
        })
        .collect();
    let ymax = curves
        .iter()
        .flatten()
        .map(|p| p.1)
        .fold(0.001f64, f64::max)
        * 1.05;
    let sx = |x: f64| PAD + (x / xmax).min(1.0) * (W - PAD - 10.0);
    let sy = |y: f64| H - PAD - (y / ymax) * (H - PAD - 24.0);
    let mut s = svg_frame("Latency by percentile", "percentile", "latency (ms)");
    for (i, label) in ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%"]
        .iter()
        .enumerate()
    {
        let x = sx(i as f64);
        let _ = write!(s, "<line x1='{x}' y1='24' x2='{x}' y2='{}' stroke='#eee'/><text x='{x}' y='{}' text-anchor='middle'>{label}</text>", H - PAD, H - PAD + 14.0);
    }
    for i in 0..=4 {
        let v = ymax * i as f64 / 4.0;
        let _ = write!(
            s,
            "<text x='{}' y='{}' text-anchor='end'>{v:.2}</text>",
            PAD - 4.0,
            sy(v) + 4.0
        );
    }
    finish_plot(s, ts, &curves, sx, sy)
}

/// Completed requests per second over the measured run, one curve per
/// target: it shows stalls and slowdowns that the percentiles blur.
fn throughput_plot(ts: &[TargetResult]) -> String {
    let series: Vec<Vec<(f64, f64)>> = ts.iter().map(|t| t.throughput()).collect();
    let xmax = series.iter().flatten().map(|p| p.0).fold(1.0f64, f64::max);
    let ymax = series.iter().flatten().map(|p| p.1).fold(1.0f64, f64::max) * 1.1;
    let sx = |x: f64| PAD + x / xmax * (W - PAD - 10.0);
    let sy = |y: f64| H - PAD - y / ymax * (H - PAD - 24.0);
    let mut s = svg_frame("Throughput over time", "seconds", "ops/s");
    for i in 0..=4 {
        let v = ymax * i as f64 / 4.0;
        let _ = write!(
            s,
            "<text x='{}' y='{}' text-anchor='end'>{v:.0}</text>",
            PAD - 4.0,
            sy(v) + 4.0
        );
        let x = xmax * i as f64 / 4.0;
        let _ = write!(
            s,
            "<text x='{}' y='{}' text-anchor='middle'>{x:.0}</text>",
            sx(x),
            H - PAD + 14.0
        );
    }
    finish_plot(s, ts, &series, sx, sy)
}

/// The summary table of one target, per command and overall, in ms.
fn table(t: &TargetResult) -> String {
    let mut s = format!(
        "<h2>{} <small>({})</small></h2><table><tr><th>command</th><th>ops/s</th><th>mean</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>p99.99</th><th>max</th><th>errors</th><th>MB/s</th></tr>",
        esc(&t.name),
        esc(&t.addr)
    );
    let mut rows: Vec<(String, Summary)> = t.command_summaries();
    rows.push(("overall".into(), t.overall_summary()));
    for (n, r) in rows {
        let p = &r.latency;
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{:.0}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{}</td><td>{:.2}</td></tr>",
            esc(&n),
            r.ops_per_sec,
            p.mean_us / 1000.0,
            p.p50_us as f64 / 1000.0,
            p.p90_us as f64 / 1000.0,
            p.p99_us as f64 / 1000.0,
            p.p999_us as f64 / 1000.0,
            p.p9999_us as f64 / 1000.0,
            p.max_us as f64 / 1000.0,
            r.errors,
            r.bytes_per_sec / 1e6
        );
    }
    s.push_str("</table><p>latencies in ms</p>");
    s
}

/// Writes the whole report for `ts` to `path`.
pub fn write_html(path: &Path, ts: &[TargetResult], workload: &str) -> Result<(), Error> {
    let mut s = String::from(
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>respite-loadgen report</title>\
<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}td:first-child{text-align:left}</style></head><body>",
    );
    let _ = write!(
        s,
        "<h1>respite-loadgen report</h1><p>workload: {}</p>",
        esc(workload)
    );
    s.push_str(&percentile_plot(ts));
    s.push_str(&throughput_plot(ts));
    for t in ts {
        s.push_str(&table(t));
    }
    s.push_str("</body></html>\n");
    std::fs::write(path, s).map_err(|source| Error::Output {
        path: path.to_path_buf(),
        source,
    })
}

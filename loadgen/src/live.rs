//! The live progress line: one line of figures per measured second, redrawn
//! in place on a terminal and printed line by line elsewhere. The runner
//! prints it as the seconds pass; the reports are written at the end of the
//! run from the same histograms (`report.rs`).

use std::io::{self, IsTerminal, Write};
use std::time::Duration;

use hdrhistogram::Histogram;

/// The live progress line, printed once per measured second.
#[derive(Debug, Clone)]
pub struct Live {
    /// On a terminal the line is redrawn in place; elsewhere (a log, CI)
    /// each second gets its own line, since escape codes would be noise.
    pub tty: bool,
}

impl Live {
    /// Decides whether to show the live line: on a terminal by default,
    /// elsewhere only with `--progress`.
    pub fn choose(progress: bool, quiet: bool) -> Option<Live> {
        let tty = io::stdout().is_terminal();
        (!quiet && (tty || progress)).then_some(Live { tty })
    }

    /// Prints the figures of one second: `h` holds that second's latencies
    /// (so its count is the second's throughput), `done` the measured
    /// requests so far. The progress bar follows `-n` when given, else
    /// `--duration`, and is left out when neither bounds the run.
    #[allow(clippy::too_many_arguments)]
    pub fn print(
        &self,
        label: &str,
        second: u64,
        h: &Histogram<u64>,
        errors: u64,
        done: u64,
        requests: Option<u64>,
        duration: Option<Duration>,
    ) {
        let frac = match (requests, duration) {
            (Some(n), _) if n > 0 => Some(done as f64 / n as f64),
            (_, Some(d)) if !d.is_zero() => Some(second as f64 / d.as_secs_f64()),
            _ => None,
        };
        let bar = frac.map_or(String::new(), |f| {
            let f = f.clamp(0.0, 1.0);
            let w = 20;
            let full = (f * w as f64) as usize;
            format!(
                " [{}{}] {:3.0}%",
                "#".repeat(full),
                ".".repeat(w - full),
                f * 100.0
            )
        });
        let line = format!(
            "{label} {second:>4}s {:>10.0} ops/s  p50 {:>8.3} ms  p99 {:>8.3} ms  errors {errors}{bar}",
            h.len() as f64,
            h.value_at_quantile(0.5) as f64 / 1000.0,
            h.value_at_quantile(0.99) as f64 / 1000.0,
        );
        let mut out = io::stdout().lock();
        // A broken stdout must not stop the measurement.
        let _ = if self.tty {
            write!(out, "\r\x1b[2K{line}")
        } else {
            writeln!(out, "{line}")
        };
        let _ = out.flush();
    }

    /// Erases the in-place line so the final table starts on a clean line.
    pub fn finish(&self) {
        if self.tty {
            let mut out = io::stdout().lock();
            let _ = write!(out, "\r\x1b[2K");
            let _ = out.flush();
        }
    }
}

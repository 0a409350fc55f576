//! The command line.
//!
//! Flag names follow the tools users already know: `--data-size`,
//! `--key-pattern`, `--ratio` and `--command` come from memtier_benchmark,
//! `-c`, `-n`, `-P` and `-d` behave like redis-benchmark's. Values that clap
//! cannot check by type alone (durations, ranges, ratios, targets,
//! templates) are parsed into typed forms here or in `workload`, and their
//! errors are `ArgError`s.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use crate::error::ArgError;
use crate::keys::KeyPattern;
use crate::workload::Profile;

/// Every flag of the binary, as clap parses it.
///
/// Fields are kept close to the raw command line on purpose: cross-flag
/// rules (one of `--profile`/`--ratio`/`--command`, `__ttl__` needing
/// `--expire-range`, ...) live in `main` and `workload::build`, where the
/// error can name the conflict precisely.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "respite-loadgen",
    version,
    about = "A load generator for any RESP server, with HdrHistogram latency reports",
    after_help = "See docs/loadgen.md for every flag with an example."
)]
pub struct Cli {
    /// Server host (used when no --target is given).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Server port (used when no --target is given).
    #[arg(short = 'p', long, default_value_t = 6379)]
    pub port: u16,
    /// Unix socket path; overrides --host/--port.
    #[arg(short = 's', long)]
    pub socket: Option<PathBuf>,
    /// A target as [NAME=]HOST:PORT or [NAME=]unix:PATH; repeat to compare servers.
    #[arg(long = "target", value_name = "[NAME=]ADDR")]
    pub targets: Vec<String>,
    /// Speak RESP3 (HELLO 3) instead of RESP2.
    #[arg(long)]
    pub resp3: bool,
    /// ACL user for AUTH (defaults to "default" when only --password is given).
    #[arg(long)]
    pub user: Option<String>,
    /// Password for AUTH.
    #[arg(short = 'a', long)]
    pub password: Option<String>,
    /// Database to SELECT.
    #[arg(long, default_value_t = 0)]
    pub db: u32,
    /// Worker threads; connections are spread over them.
    #[arg(short = 't', long, default_value_t = 1)]
    pub threads: usize,
    /// Connections in total (not per thread).
    #[arg(short = 'c', long, default_value_t = 50)]
    pub connections: usize,
    /// Requests in flight per connection, sent as one buffer.
    #[arg(short = 'P', long)]
    pub pipeline: Option<usize>,
    /// Open loop: total requests per second across all connections.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Total measured requests (default 100000 when --duration is absent).
    #[arg(short = 'n', long)]
    pub requests: Option<u64>,
    /// Measured run length, e.g. 30s, 500ms, 2m.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Unmeasured warm-up before the measured run.
    #[arg(long, value_parser = parse_duration, default_value = "0s")]
    pub warmup: Duration,
    /// Seconds to wait for a reply before giving up.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    pub timeout: Duration,
    /// SET:GET weights, e.g. 1:10.
    #[arg(long)]
    pub ratio: Option<String>,
    /// A command template such as 'HSET __key__ f __data__', optionally
    /// weighted as '3:HSET ...'; repeat for a mix.
    #[arg(long = "command", value_name = "[WEIGHT:]TEMPLATE")]
    pub commands: Vec<String>,
    /// How keys are picked from the keyspace.
    #[arg(long, value_enum, default_value = "uniform")]
    pub key_pattern: KeyPattern,
    /// Zipf exponent; implies --key-pattern zipf.
    #[arg(long)]
    pub key_zipf: Option<f64>,
    /// Number of distinct keys.
    #[arg(long, default_value_t = 10_000)]
    pub keyspace: u64,
    /// Prefix of every generated key.
    #[arg(long, default_value = "key:")]
    pub key_prefix: String,
    /// Value size in bytes.
    #[arg(short = 'd', long, default_value_t = 64)]
    pub data_size: usize,
    /// Random value size in MIN-MAX bytes (overrides --data-size).
    #[arg(long)]
    pub data_size_range: Option<String>,
    /// Put a TTL of MIN-MAX seconds on every SET (and on __ttl__ in templates).
    #[arg(long)]
    pub expire_range: Option<String>,
    /// A named workload: get-heavy, set-heavy, mixed, ttl-heavy, redlite, pipeline-10.
    #[arg(long, value_enum)]
    pub profile: Option<Profile>,
    /// SET every key of the keyspace before measuring.
    #[arg(long)]
    pub preload: bool,
    /// Check every reply and report mismatches (exit status 2 on failure).
    #[arg(long)]
    pub verify: bool,
    /// Write a JSON summary.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write .hgrm percentile distributions (one file per target and command).
    #[arg(long)]
    pub hgrm: Option<PathBuf>,
    /// Write an HdrHistogram interval log (one tagged entry per second and command).
    #[arg(long)]
    pub hdr_log: Option<PathBuf>,
    /// Write a self-contained HTML report.
    #[arg(long)]
    pub html: Option<PathBuf>,
    /// Print the live line even when stdout is not a terminal.
    #[arg(long)]
    pub progress: bool,
    /// Never print the live line.
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Seed for key and value choice (default: fixed, so runs are repeatable).
    #[arg(long, default_value_t = 0x5eed)]
    pub seed: u64,
}

/// Parses `30s`, `500ms`, `2m`, `1h` or a plain number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, ArgError> {
    let bad = || ArgError::Duration(s.to_string());
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().map_err(|_| bad())?;
    let secs = match unit {
        "" | "s" => v,
        "ms" => v / 1000.0,
        "us" => v / 1_000_000.0,
        "m" => v * 60.0,
        "h" => v * 3600.0,
        _ => return Err(bad()),
    };
    Duration::try_from_secs_f64(secs).map_err(|_| bad())
}

/// Parses `MIN-MAX` into an inclusive range.
pub fn parse_range(s: &str) -> Result<(u64, u64), ArgError> {
    let bad = || ArgError::Range(s.to_string());
    let (a, b) = s.split_once('-').ok_or_else(bad)?;
    let a: u64 = a.trim().parse().map_err(|_| bad())?;
    let b: u64 = b.trim().parse().map_err(|_| bad())?;
    if a > b {
        return Err(bad());
    }
    Ok((a, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("x").is_err());
        assert!(parse_duration("3 days").is_err());
    }

    #[test]
    fn ranges() {
        assert_eq!(parse_range("10-20").unwrap(), (10, 20));
        assert!(parse_range("20-10").is_err());
        assert!(parse_range("20").is_err());
    }
}

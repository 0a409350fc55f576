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

// Every flag of the binary, as clap parses it. Fields stay close to the
// raw command line: cross-flag rules (one of --profile/--ratio/--command,
// __ttl__ needing --expire-range, ...) live in `main` and `workload::build`,
// where the error can name the conflict precisely. (Plain comments, not doc
// comments: clap would print a doc comment at the top of --help.)
#[derive(Debug, Clone, Parser)]
#[command(
    name = "respite-loadgen",
    version,
    about = "Measures the throughput and latency of any Redis-protocol (RESP) server, \
             or of several side by side, per command, with HdrHistogram percentiles.",
    long_about = "Measures the throughput and latency of any Redis-protocol (RESP) server, \
                  or of several side by side, per command, with HdrHistogram percentiles.\n\n\
                  Example: 50 connections, 1 SET for every 10 GETs, 200,000 requests:\n\n    \
                  respite-loadgen -p 6379 -c 50 -n 200000 --ratio 1:10\n\n\
                  Two servers compared, with an HTML report:\n\n    \
                  respite-loadgen --target redis=127.0.0.1:6379 --target respite=127.0.0.1:6380 \\\n        \
                  --duration 30s --ratio 1:1 --html report.html\n\n\
                  Only successful replies count as ops/s. Error replies are counted per command \
                  and printed with their text; any error reply, connection failure or --verify \
                  mismatch makes the exit status non-zero (see --allow-errors).",
    after_help = "memtier_benchmark's flag names are accepted too (--clients, --test-time, \
                  --key-pattern R:R, --key-minimum/--key-maximum, --random-data, \
                  --hdr-file-prefix, --json-out-file); note that -c and -n are totals here, as in \
                  redis-benchmark. See docs/loadgen.md for every flag with an example."
)]
pub struct Cli {
    /// Server host (used when no --target is given).
    #[arg(long, visible_alias = "server", default_value = "127.0.0.1")]
    pub host: String,
    /// Server port (used when no --target is given).
    #[arg(short = 'p', long, default_value_t = 6379)]
    pub port: u16,
    /// Unix socket path; overrides --host/--port.
    #[arg(short = 's', long, visible_alias = "unix-socket")]
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
    #[arg(short = 'a', long, visible_alias = "authenticate")]
    pub password: Option<String>,
    /// Database to SELECT.
    #[arg(long, visible_alias = "select-db", default_value_t = 0)]
    pub db: u32,
    /// Worker threads; connections are spread over them.
    #[arg(short = 't', long, default_value_t = 1)]
    pub threads: usize,
    /// Connections in total (not per thread, unlike memtier's --clients).
    #[arg(short = 'c', long, conflicts_with = "clients")]
    pub connections: Option<usize>,
    /// Connections per thread, as memtier_benchmark's --clients: the total
    /// is CLIENTS x THREADS.
    #[arg(long)]
    pub clients: Option<usize>,
    /// Requests in flight per connection, sent as one buffer.
    #[arg(short = 'P', long)]
    pub pipeline: Option<usize>,
    /// Open loop: total requests per second across all connections.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Total measured requests, over all connections (default 100000 when
    /// --duration is absent). memtier's -n counts per client instead.
    #[arg(short = 'n', long)]
    pub requests: Option<u64>,
    /// Measured run length, e.g. 30s, 500ms, 2m (a plain number is seconds,
    /// as memtier's --test-time).
    #[arg(long, visible_alias = "test-time", value_parser = parse_duration)]
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
    /// How keys are picked: uniform, sequential, gaussian or zipf, or
    /// memtier's SET:GET form R:R, S:S, P:P, G:G.
    #[arg(long, value_parser = parse_key_pattern, default_value = "uniform")]
    pub key_pattern: KeyPattern,
    /// Zipf exponent; implies --key-pattern zipf.
    #[arg(long)]
    pub key_zipf: Option<f64>,
    /// Number of distinct keys (default 10000).
    #[arg(long, conflicts_with_all = ["key_minimum", "key_maximum"])]
    pub keyspace: Option<u64>,
    /// Smallest key index, as memtier (keys KEY_MINIMUM..=KEY_MAXIMUM).
    #[arg(long)]
    pub key_minimum: Option<u64>,
    /// Largest key index, as memtier.
    #[arg(long)]
    pub key_maximum: Option<u64>,
    /// Prefix of every generated key.
    #[arg(long, default_value = "key:")]
    pub key_prefix: String,
    /// Value size in bytes.
    #[arg(short = 'd', long, default_value_t = 64)]
    pub data_size: usize,
    /// Random value size in MIN-MAX bytes (overrides --data-size).
    #[arg(long)]
    pub data_size_range: Option<String>,
    /// Every write carries different bytes (the default; accepted for
    /// memtier compatibility).
    #[arg(long, conflicts_with = "data_repeat")]
    pub random_data: bool,
    /// Every value is the same bytes, as redis-benchmark sends. A store may
    /// skip rewriting an unchanged value (SQLite does), which flatters it.
    #[arg(long)]
    pub data_repeat: bool,
    /// Put a TTL of MIN-MAX seconds on every SET (and on __ttl__ in templates).
    #[arg(long, visible_alias = "expiry-range")]
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
    /// Exit with status 0 even when some replies were errors (they are
    /// still counted and shown). Without it, any error reply fails the run.
    #[arg(long)]
    pub allow_errors: bool,
    /// Write a JSON summary.
    #[arg(long, visible_alias = "json-out-file")]
    pub json: Option<PathBuf>,
    /// Write .hgrm percentile distributions (one file per target and command).
    #[arg(long, conflicts_with = "hdr_file_prefix")]
    pub hgrm: Option<PathBuf>,
    /// memtier's spelling: PREFIX.<target>.<command>.hgrm files, as --hgrm PREFIX.hgrm.
    #[arg(long)]
    pub hdr_file_prefix: Option<String>,
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
    /// Accepted for memtier compatibility; no histogram is printed anyway.
    #[arg(long, hide = true)]
    pub hide_histogram: bool,
    /// Accepted for memtier compatibility: every connection has its own seed.
    #[arg(long, hide = true)]
    pub distinct_client_seed: bool,
    /// Seed for key and value choice (default: fixed, so runs are repeatable).
    #[arg(long, default_value_t = 0x5eed)]
    pub seed: u64,
}

impl Cli {
    /// Connections in total: `-c`, or `--clients` per thread, or 50.
    pub fn total_connections(&self) -> usize {
        match (self.connections, self.clients) {
            (Some(c), _) => c,
            (None, Some(per)) => per.saturating_mul(self.threads),
            (None, None) => 50,
        }
    }

    /// The keys' index range as (first, count): `--keyspace N` is 0..N,
    /// memtier's `--key-minimum/--key-maximum` an inclusive range (its
    /// defaults 0 and 10,000,000 when only one is given).
    pub fn key_range(&self) -> Result<(u64, u64), ArgError> {
        match (self.key_minimum, self.key_maximum) {
            (None, None) => Ok((0, self.keyspace.unwrap_or(10_000).max(1))),
            (min, max) => {
                let (min, max) = (min.unwrap_or(0), max.unwrap_or(10_000_000));
                if min > max {
                    return Err(ArgError::Conflict(
                        "--key-minimum must not exceed --key-maximum",
                    ));
                }
                Ok((min, (max - min).saturating_add(1)))
            }
        }
    }

    /// Where the .hgrm files go: `--hgrm`, or memtier's prefix.
    pub fn hgrm_path(&self) -> Option<PathBuf> {
        self.hgrm.clone().or_else(|| {
            self.hdr_file_prefix
                .as_ref()
                .map(|p| PathBuf::from(format!("{p}.hgrm")))
        })
    }
}

/// Parses a key pattern: a name, or memtier's `SET:GET` letters (`R`
/// random, `S` sequential, `P` parallel, which is sequential with each
/// connection starting in its own part of the keyspace, as ours always do,
/// `G` gaussian). One pattern serves every command, so both letters must
/// agree.
pub fn parse_key_pattern(s: &str) -> Result<KeyPattern, ArgError> {
    let bad = || ArgError::KeyPattern(s.to_string());
    let letter = |l: &str| match l.trim().to_ascii_uppercase().as_str() {
        "R" => Ok(KeyPattern::Uniform),
        "S" | "P" => Ok(KeyPattern::Sequential),
        "G" => Ok(KeyPattern::Gaussian),
        _ => Err(bad()),
    };
    if let Some((a, b)) = s.split_once(':') {
        let (a, b) = (letter(a)?, letter(b)?);
        return if a == b { Ok(a) } else { Err(bad()) };
    }
    <KeyPattern as clap::ValueEnum>::from_str(s, true).map_err(|_| bad())
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

/// The named workloads (`--profile`): ready-made mixes for the comparisons
/// respite is routinely measured on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Profile {
    /// 90% GET, 10% SET over a preloaded keyspace.
    GetHeavy,
    /// 80% SET, 20% GET.
    SetHeavy,
    /// 50% SET, 50% GET over a preloaded keyspace.
    Mixed,
    /// 50% SET with 1-5 s TTLs, 50% GET: keys expire constantly.
    TtlHeavy,
    /// Each operation of Redlite's benchmark table in turn.
    Redlite,
    /// 50/50 SET/GET with 10 requests per pipeline.
    #[value(name = "pipeline-10")]
    Pipeline10,
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
    fn memtier_flags() {
        assert_eq!(parse_key_pattern("R:R").unwrap(), KeyPattern::Uniform);
        assert_eq!(parse_key_pattern("p:p").unwrap(), KeyPattern::Sequential);
        assert_eq!(parse_key_pattern("gaussian").unwrap(), KeyPattern::Gaussian);
        assert!(parse_key_pattern("R:S").is_err());
        assert!(parse_key_pattern("X:X").is_err());
        let cli = Cli::try_parse_from([
            "respite-loadgen",
            "--clients",
            "25",
            "-t",
            "2",
            "--test-time",
            "3",
            "--key-minimum",
            "1",
            "--key-maximum",
            "100000",
            "--random-data",
            "--json-out-file",
            "x.json",
            "--hdr-file-prefix",
            "lat",
            "--key-pattern",
            "R:R",
            "--hide-histogram",
        ])
        .unwrap();
        assert_eq!(cli.total_connections(), 50);
        assert_eq!(cli.duration, Some(Duration::from_secs(3)));
        assert_eq!(cli.key_range().unwrap(), (1, 100_000));
        assert_eq!(cli.json, Some(PathBuf::from("x.json")));
        assert_eq!(cli.hgrm_path(), Some(PathBuf::from("lat.hgrm")));
        assert!(Cli::try_parse_from(["x", "-c", "1", "--clients", "2"]).is_err());
        assert!(Cli::try_parse_from(["x", "--random-data", "--data-repeat"]).is_err());
    }

    #[test]
    fn ranges() {
        assert_eq!(parse_range("10-20").unwrap(), (10, 20));
        assert!(parse_range("20-10").is_err());
        assert!(parse_range("20").is_err());
    }
}

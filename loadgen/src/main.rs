//! respite-loadgen: a load generator for any RESP server.
//!
//! This is how respite is measured against Redis. The binary parses the
//! command line (`cli`), builds the workload (`workload`, `keys`), then for
//! each target runs every phase of it (`runner`, over `conn`, reading replies
//! with `resp` and checking them with `verify`), and finally prints tables and
//! writes the requested report files (`report`, `html`).
//!
//! Exit status: 0 on success, 1 when the run could not be completed (a
//! bad command line, a connection that failed or was refused), 2 when
//! `--verify` found mismatching replies, 3 when a server answered any
//! request with an error reply (unless `--allow-errors`).

mod cli;
mod conn;
mod error;
mod html;
mod keys;
mod live;
mod report;
mod resp;
mod runner;
mod target;
mod verify;
mod workload;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::SystemTime;

use clap::Parser;

use crate::cli::Cli;
use crate::conn::ConnOpts;
use crate::error::{ArgError, Error};
use crate::report::TargetResult;
use crate::runner::RunCfg;
use crate::target::{Addr, Target};

/// The servers to measure: every `--target` in the order given, or else the
/// single server described by `--host`/`--port`/`--socket`, named after its
/// address.
fn targets(cli: &Cli) -> Result<Vec<Target>, ArgError> {
    if cli.targets.is_empty() {
        let addr = match &cli.socket {
            Some(p) => Addr::Unix(p.clone()),
            None => Addr::Tcp {
                host: cli.host.clone(),
                port: cli.port,
            },
        };
        return Ok(vec![Target {
            name: addr.to_string(),
            addr,
        }]);
    }
    cli.targets.iter().map(|t| Target::parse(t)).collect()
}

/// How a completed run turned out, for the exit status.
struct Outcome {
    /// Replies `--verify` rejected, over all targets.
    mismatches: u64,
    /// Error replies, over all targets.
    errors: u64,
}

/// The command line as typed, quoted for a POSIX shell where needed, so
/// the report shows a line that can be pasted to rerun it.
fn command_line() -> String {
    std::env::args_os()
        .map(|a| {
            let a = a.to_string_lossy().into_owned();
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c));
            if plain {
                a
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs every phase against every target, prints the tables and writes the
/// requested report files.
fn run(cli: Cli) -> Result<Outcome, Error> {
    let targets = targets(&cli)?;
    let connections = cli.total_connections();
    if connections == 0 || cli.threads == 0 {
        return Err(ArgError::Conflict("--connections and --threads must be at least 1").into());
    }
    if cli.rate.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
        return Err(ArgError::Conflict("--rate must be a positive number").into());
    }
    let wl = Arc::new(workload::build(&cli)?);
    // Neither a count nor a duration: fall back to redis-benchmark's habit
    // of a fixed request count rather than running forever.
    let requests = match (cli.requests, cli.duration) {
        (None, None) => Some(100_000),
        (r, _) => r,
    };
    let cfg = Arc::new(RunCfg {
        threads: cli.threads,
        connections,
        pipeline: wl.pipeline,
        rate: cli.rate,
        requests,
        duration: cli.duration,
        warmup: cli.warmup,
        seed: cli.seed,
        verify: cli.verify,
        conn: ConnOpts {
            resp3: cli.resp3,
            user: cli.user.clone(),
            password: cli.password.clone(),
            db: cli.db,
            timeout: cli.timeout,
        },
        live: live::Live::choose(cli.progress, cli.quiet),
    });
    let started = SystemTime::now();
    let mut results = Vec::new();
    for t in &targets {
        let mut tr = TargetResult::new(&t.name, &t.addr.to_string(), cfg.rate.is_some());
        tr.server = runner::probe(t, &cfg.conn)?;
        for phase in &wl.phases {
            // A one-operation phase (each row of `redlite`) is labelled with
            // its operation so the live line says which row is running.
            let label = if phase.ops.len() == 1 {
                format!("{} {}", t.name, phase.ops[0].name)
            } else {
                t.name.clone()
            };
            let r = runner::run_phase(t, &wl, phase, &cfg, &label)?;
            tr.add_phase(r.ops, r.elapsed, r.intervals, r.verify);
        }
        print!("{}", report::text(&tr));
        results.push(tr);
    }
    if results.len() > 1 {
        print!("{}", report::comparison(&results));
    }
    let (key_base, keyspace) = cli.key_range()?;
    // The effective settings, recorded in the JSON and the HTML so that a
    // report can be reproduced (and compared only with reports made the
    // same way).
    let settings = report::Settings {
        command_line: command_line(),
        date: humantime::format_rfc3339_seconds(started).to_string(),
        workload: wl.description.clone(),
        threads: cfg.threads,
        connections: cfg.connections,
        pipeline: cfg.pipeline,
        rate: cfg.rate,
        requests: cfg.requests,
        duration_sec: cfg.duration.map(|d| d.as_secs_f64()),
        warmup_sec: cfg.warmup.as_secs_f64(),
        resp3: cli.resp3,
        verify: cli.verify,
        keyspace,
        key_minimum: key_base,
        key_pattern: format!("{:?}", wl.pattern).to_lowercase(),
        key_prefix: cli.key_prefix.clone(),
        data_size: cli.data_size,
        data_size_range: cli.data_size_range.clone(),
        random_data: !wl.repeat,
        expire_range: cli.expire_range.clone(),
    };
    if let Some(p) = &cli.json {
        report::write_json(p, &results, &settings)?;
    }
    if let Some(p) = &cli.hgrm_path() {
        report::write_hgrm(p, &results)?;
    }
    if let Some(p) = &cli.hdr_log {
        report::write_hdr_log(p, &results, started)?;
    }
    if let Some(p) = &cli.html {
        html::write_html(p, &results, &settings)?;
    }
    Ok(Outcome {
        mismatches: results.iter().map(|r| r.verify.mismatches).sum(),
        errors: results.iter().map(|r| r.errors()).sum(),
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let allow_errors = cli.allow_errors;
    match run(cli) {
        Ok(o) if o.mismatches > 0 => {
            eprintln!("respite-loadgen: verification failed: mismatching replies (see above)");
            ExitCode::from(2)
        }
        Ok(o) if o.errors > 0 && !allow_errors => {
            eprintln!(
                "respite-loadgen: {} error replies (see above); pass --allow-errors if the run expects them",
                o.errors
            );
            ExitCode::from(3)
        }
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("respite-loadgen: {e}");
            ExitCode::from(1)
        }
    }
}

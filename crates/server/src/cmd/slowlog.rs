//! SLOWLOG and LATENCY: the slow commands, and how long the server took.
//!
//! Both read what `crate::stats` records as commands run: the slow log
//! keeps the commands that ran for at least `slowlog-log-slower-than`
//! microseconds (their arguments trimmed as redis trims them, passwords
//! redacted), the latency monitor keeps one sample a second of every event
//! at least `latency-monitor-threshold` milliseconds long (`command` and
//! `fast-command`, as redis names them), and LATENCY HISTOGRAM reads the
//! per-command histograms INFO latencystats prints percentiles of. The
//! replies are redis 7.0's, field for field.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::common::help;
use crate::args::subcommand;
use crate::args::Args;
use crate::command::{lookup, LocalCommand, Plan, Session};
use crate::error::{c_str, CommandError, Lossy};
use crate::reply::Reply;
use crate::state::Shared;

/// `SLOWLOG GET [count] | LEN | RESET | HELP`
pub enum Slowlog {
    /// The newest `count` entries (all with `None`).
    Get(Option<usize>),
    /// How many entries there are.
    Len,
    /// Empties the log.
    Reset,
    /// SLOWLOG HELP.
    Help,
}

impl LocalCommand for Slowlog {
    fn parse(args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        // Names and arities were checked with the table's subcommand list.
        let sub = subcommand(args)?;
        Ok(match sub.name.as_str() {
            "GET" => {
                let count = match args.next_opt() {
                    None => Some(10),
                    Some(n) => match crate::args::parse_i64(&n) {
                        Some(-1) => None,
                        Some(n) if n >= 0 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
                        _ => {
                            return Err(CommandError::Other(
                                "count should be greater than or equal to -1".into(),
                            ))
                        }
                    },
                };
                if args.remaining() > 0 {
                    return Err(sub.syntax("SLOWLOG"));
                }
                Slowlog::Get(count)
            }
            "LEN" => Slowlog::Len,
            "RESET" => Slowlog::Reset,
            "HELP" => Slowlog::Help,
            _ => return Err(sub.unknown("SLOWLOG")),
        })
    }

    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        let st = &s.shared.stats;
        let reply = match self {
            Slowlog::Get(count) => Reply::Array(
                st.slowlog(count)
                    .into_iter()
                    .map(|e| {
                        Reply::Array(vec![
                            Reply::Int(e.id as i64),
                            Reply::Int(e.time as i64),
                            Reply::Int(i64::try_from(e.micros).unwrap_or(i64::MAX)),
                            Reply::Array(e.argv.into_iter().map(Reply::Bulk).collect()),
                            Reply::bulk(e.addr),
                            Reply::bulk(e.name),
                        ])
                    })
                    .collect(),
            ),
            Slowlog::Len => Reply::Int(st.slowlog_len() as i64),
            Slowlog::Reset => {
                st.slowlog_reset();
                Reply::Ok
            }
            Slowlog::Help => help(
                "SLOWLOG",
                &[
                    "GET [<count>]",
                    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
                    "    Entries are made of:",
                    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
                    "    client name",
                    "LEN",
                    "    Return the length of the slowlog.",
                    "RESET",
                    "    Reset the slowlog.",
                ],
            ),
        };
        Ok(Plan::Reply(reply))
    }
}

/// `LATENCY LATEST | HISTORY event | GRAPH event | RESET [event ...] |
/// DOCTOR | HISTOGRAM [command ...] | HELP`
pub enum Latency {
    /// The latest sample of every event.
    Latest,
    /// An event's samples.
    History(String),
    /// An event's samples drawn as an ASCII graph.
    Graph(Bytes),
    /// Forgets events.
    Reset(Vec<String>),
    /// The human-readable report.
    Doctor,
    /// Per-command latency histograms.
    Histogram(Vec<Bytes>),
    /// LATENCY HELP.
    Help,
}

impl LocalCommand for Latency {
    fn parse(args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        let sub = subcommand(args)?;
        let text = |b: Bytes| String::from_utf8_lossy(&b).into_owned();
        Ok(match sub.name.as_str() {
            "LATEST" => Latency::Latest,
            "HISTORY" => Latency::History(text(args.next()?)),
            "GRAPH" => Latency::Graph(args.next()?),
            "RESET" => Latency::Reset(args.rest().into_iter().map(text).collect()),
            "DOCTOR" => Latency::Doctor,
            "HISTOGRAM" => Latency::Histogram(args.rest()),
            "HELP" => Latency::Help,
            _ => return Err(sub.unknown("LATENCY")),
        })
    }

    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        let sh = s.shared.clone();
        let st = &sh.stats;
        let reply = match self {
            Latency::Latest => Reply::Array(
                st.latency_events()
                    .into_iter()
                    .map(|(name, e)| {
                        let (time, latest) = e.samples.last().copied().unwrap_or_default();
                        Reply::Array(vec![
                            Reply::bulk(name),
                            Reply::Int(time as i64),
                            Reply::Int(latest as i64),
                            Reply::Int(e.max as i64),
                        ])
                    })
                    .collect(),
            ),
            Latency::History(event) => Reply::Array(
                st.latency_events()
                    .get(event.as_str())
                    .map(|e| {
                        e.samples
                            .iter()
                            .map(|(t, ms)| {
                                Reply::Array(vec![Reply::Int(*t as i64), Reply::Int(*ms as i64)])
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
            Latency::Graph(event) => graph(&sh, event)?,
            Latency::Reset(events) => {
                let n = if events.is_empty() {
                    st.latency_reset(None)
                } else {
                    st.latency_reset(Some(&events))
                };
                Reply::Int(n as i64)
            }
            Latency::Doctor => Reply::Verbatim(doctor(&sh)),
            Latency::Histogram(names) => histogram(&sh, &names),
            Latency::Help => help(
                "LATENCY",
                &[
                    "DOCTOR",
                    "    Return a human readable latency analysis report.",
                    "GRAPH <event>",
                    "    Return an ASCII latency graph for the <event> class.",
                    "HISTORY <event>",
                    "    Return time-latency samples for the <event> class.",
                    "LATEST",
                    "    Return the latest latency samples for all events.",
                    "RESET [<event> ...]",
                    "    Reset latency data of one or more <event> classes.",
                    "    (default: reset all data for all event classes)",
                    "HISTOGRAM [COMMAND ...]",
                    "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
                    "    If no commands are specified then all histograms are replied.",
                ],
            ),
        };
        Ok(Plan::Reply(reply))
    }
}

/// LATENCY GRAPH: the event's samples drawn as redis draws them (see
/// `crate::sparkline`), labelled with their age as of now. Redis finds
/// the event by the argument as a C string (case-sensitive, up to a NUL).
fn graph(sh: &Shared, event: Bytes) -> Result<Reply, CommandError> {
    let events = sh.stats.latency_events();
    let found = std::str::from_utf8(c_str(&event))
        .ok()
        .and_then(|name| events.get_key_value(name));
    let Some((name, e)) = found else {
        return Err(CommandError::Quoted {
            before: "ERR No samples available for event '",
            arg: Lossy(event.to_vec()),
            after: "'",
        });
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let text = crate::sparkline::latency_graph(name, &e.samples, e.max, now);
    // Every byte is ASCII: the event name is one of ours, the rest digits
    // and the graph's characters.
    Ok(Reply::Verbatim(String::from_utf8_lossy(&text).into_owned()))
}

/// LATENCY DOCTOR's report, in redis's words.
fn doctor(sh: &Shared) -> String {
    let events = sh.stats.latency_events();
    if events.is_empty() && sh.stats.latency_monitor_threshold.load(Ordering::Relaxed) == 0 {
        return "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. If we weren't in a deep space mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n".into();
    }
    if events.is_empty() {
        return "Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think things over.\n".into();
    }
    let mut out = String::from(
        "Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n",
    );
    for (i, (name, e)) in events.iter().enumerate() {
        let n = e.samples.len().max(1) as u64;
        let avg = e.samples.iter().map(|(_, ms)| ms).sum::<u64>() / n;
        let mad = e
            .samples
            .iter()
            .map(|(_, ms)| ms.abs_diff(avg))
            .sum::<u64>()
            / n;
        let span = match (e.samples.first(), e.samples.last()) {
            (Some((a, _)), Some((b, _))) => (b - a) as f64 / n as f64,
            _ => 0.0,
        };
        let _ = writeln!(
            out,
            "{}. {name}: {} latency spikes (average {avg}ms, mean deviation {mad}ms, period {span:.2} sec). Worst all time event {}ms.",
            i + 1,
            e.samples.len(),
            e.max
        );
    }
    out.push_str("\nWhile there are latency events logged, I'm not able to suggest any easy fix. Please use the Redis community to get some help, providing this report in your help request.\n");
    out
}

/// LATENCY HISTOGRAM: for each command with samples (those named, a
/// container naming all its subcommands), its calls and the cumulative
/// count of calls at each power-of-two bucket in microseconds.
fn histogram(sh: &Shared, names: &[Bytes]) -> Reply {
    let mut rows: Vec<String> = Vec::new();
    let all = sh.stats.rows();
    if names.is_empty() {
        rows = all.into_iter().map(|r| r.name).collect();
    } else {
        // Each name as redis's lookupCommandBySds finds it: a command (a
        // container stands for all its subcommands) or one subcommand by
        // its full name (`client|id`); an unknown name is skipped, and a
        // name given twice answers twice, as in redis.
        for name in names {
            let (container, sub) = match name.iter().position(|&b| b == b'|') {
                Some(at) => (&name[..at], Some(&name[at + 1..])),
                None => (&name[..], None),
            };
            let Some(spec) = lookup(container) else {
                continue;
            };
            let subs = spec.subcommands.map_or(&[][..], |(_, subs)| subs);
            match sub {
                Some(sub) => {
                    if let Some(sub) = subs.iter().find(|s| s.as_bytes().eq_ignore_ascii_case(sub))
                    {
                        rows.push(format!("{}|{sub}", spec.name));
                    }
                }
                None if subs.is_empty() => rows.push(spec.name.to_string()),
                None => rows.extend(subs.iter().map(|sub| format!("{}|{sub}", spec.name))),
            }
        }
    }
    Reply::Map(
        rows.into_iter()
            .filter_map(|name| {
                let (calls, buckets) = sh.stats.histogram(&name)?;
                Some((
                    Reply::bulk(name),
                    Reply::Map(vec![
                        (Reply::bulk("calls"), Reply::Int(calls as i64)),
                        (
                            Reply::bulk("histogram_usec"),
                            Reply::Map(
                                buckets
                                    .into_iter()
                                    .map(|(us, n)| (Reply::Int(us as i64), Reply::Int(n as i64)))
                                    .collect(),
                            ),
                        ),
                    ]),
                ))
            })
            .collect(),
    )
}

/// This family's rows of the command table (see [`crate::command::table`]).
#[rustfmt::skip]
pub(crate) fn commands() -> Vec<crate::command::Spec> {
    use crate::command::Spec;
    vec![
        Spec::local::<Slowlog>("slowlog")
            .with_subcommands("SLOWLOG", &["get", "help", "len", "reset"]),
        Spec::local::<Latency>("latency")
            .with_subcommands("LATENCY", &["doctor", "graph", "help", "histogram", "history", "latest", "reset"]),
    ]
}

//! CONFIG GET, SET, RESETSTAT, REWRITE and HELP: the command over the
//! parameter system of [`crate::params`].

use bytes::Bytes;

use super::common::help;
use crate::args::{subcommand, Args};
use crate::command::{LocalCommand, Plan, Session};
use crate::error::CommandError;
use crate::params::{config_get, config_set, rewrite};
use crate::reply::Reply;

/// `CONFIG GET parameter [parameter ...] | SET parameter value [parameter
/// value ...] | RESETSTAT | REWRITE | HELP`
pub enum Config {
    /// CONFIG GET with names or glob patterns.
    Get(Vec<Bytes>),
    /// CONFIG SET pairs.
    Set(Vec<(Bytes, Bytes)>),
    /// CONFIG RESETSTAT.
    ResetStat,
    /// CONFIG REWRITE.
    Rewrite,
    /// CONFIG HELP.
    Help,
}

impl LocalCommand for Config {
    fn parse(args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        // Names and arities were checked with the table's subcommand list.
        let sub = subcommand(args)?;
        match sub.name.as_str() {
            "GET" => Ok(Config::Get(args.rest())),
            "SET" => {
                let rest = args.rest();
                if rest.len() % 2 == 1 {
                    return Err(CommandError::Syntax);
                }
                Ok(Config::Set(
                    rest.chunks_exact(2)
                        .map(|kv| (kv[0].clone(), kv[1].clone()))
                        .collect(),
                ))
            }
            "RESETSTAT" => Ok(Config::ResetStat),
            "REWRITE" => Ok(Config::Rewrite),
            "HELP" => Ok(Config::Help),
            _ => Err(sub.unknown("CONFIG")),
        }
    }

    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        let sh = s.shared.clone();
        let reply = match self {
            Config::Get(patterns) => config_get(&sh, &patterns),
            Config::Set(pairs) => {
                config_set(&sh, &pairs)?;
                Reply::Ok
            }
            Config::ResetStat => {
                sh.counters.reset();
                sh.acl.denied.reset();
                sh.engine.reset_stats();
                sh.stats.reset();
                sh.acl.denied.reset();
                Reply::Ok
            }
            Config::Rewrite => {
                rewrite(&sh).map_err(CommandError::Other)?;
                Reply::Ok
            }
            Config::Help => help(
                "CONFIG",
                &[
                    "GET <pattern>",
                    "    Return parameters matching the glob-like <pattern> and their values.",
                    "SET <directive> <value>",
                    "    Set the configuration <directive> to <value>.",
                    "RESETSTAT",
                    "    Reset statistics reported by the INFO command.",
                    "REWRITE",
                    "    Rewrite the configuration file.",
                ],
            ),
        };
        Ok(Plan::Reply(reply))
    }
}

/// This family's rows of the command table (see [`crate::command::table`]).
#[rustfmt::skip]
pub(crate) fn commands() -> Vec<crate::command::Spec> {
    use crate::command::Spec;
    vec![
        Spec::local::<Config>("config")
            .with_subcommands("CONFIG", &["get", "help", "resetstat", "rewrite", "set"]),
    ]
}

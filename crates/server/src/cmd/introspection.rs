//! COMMAND: what the server says about its own commands.
//!
//! Client libraries and tools ask the server what it can do: redis-cli
//! builds its argument hints and `HELP` pages from `COMMAND DOCS`, cluster
//! clients find keys with `COMMAND INFO`'s key specs or `COMMAND GETKEYS`,
//! and ACL tooling lists commands by category with `COMMAND LIST FILTERBY`.
//! The answers come from two places: the command table ([`crate::command::TABLE`])
//! says which commands and subcommands respite has, and redis's own
//! description of each ([`crate::meta`]) says everything else, so every
//! field reads as redis-server 7.0's does.
//!
//! `COMMAND GETKEYS` finds keys as redis does: with the key specs where they
//! are complete and their flags fixed, else with the command's own rule
//! (SET's and BITFIELD's key flags depend on the arguments, SORT's STORE key
//! is found by parsing).

use bytes::Bytes;
use respite_engine::glob::glob_match;

use super::common::help;
use crate::args::subcommand;
use crate::args::Args;
use crate::command::{lookup, LocalCommand, Plan, Session, Spec, TABLE};
use crate::error::CommandError;
use crate::meta::{self, Arg, BeginSearch, FindKeys, KeySpec, Meta};
use crate::reply::Reply;

/// The description of a table row.
fn meta_of(spec: &Spec) -> Option<&'static Meta> {
    meta::find(spec.name.as_bytes(), None)
}

/// The subcommands respite implements of a container, as redis describes
/// them, in name order.
fn implemented_subs(spec: &Spec) -> Vec<&'static Meta> {
    let Some((_, subs)) = spec.subcommands else {
        return Vec::new();
    };
    meta_of(spec).map_or(Vec::new(), |m| {
        m.subcommands()
            .iter()
            .filter(|s| subs.iter().any(|name| Some(*name) == s.sub))
            .collect()
    })
}

/// A command or `container|sub` name, if respite implements it.
fn lookup_full(name: &[u8]) -> Option<(&'static Spec, &'static Meta)> {
    let (cmd, sub) = match name.iter().position(|&b| b == b'|') {
        Some(bar) => (&name[..bar], Some(&name[bar + 1..])),
        None => (name, None),
    };
    let spec = lookup(cmd)?;
    let m = match sub {
        None => meta_of(spec)?,
        Some(sub) => *implemented_subs(spec).iter().find(|m| {
            m.sub
                .is_some_and(|s| s.as_bytes().eq_ignore_ascii_case(sub))
        })?,
    };
    Some((spec, m))
}

fn statuses(items: &[&str]) -> Reply {
    Reply::Set(items.iter().map(|s| Reply::Status((*s).into())).collect())
}

fn pair(key: &'static str, value: Reply) -> (Reply, Reply) {
    (Reply::bulk(key), value)
}

fn key_spec(ks: &KeySpec) -> Reply {
    let mut fields = Vec::with_capacity(4);
    if let Some(notes) = ks.notes {
        fields.push(pair("notes", Reply::bulk(notes)));
    }
    fields.push(pair("flags", statuses(ks.flags)));
    let begin = match ks.begin_search {
        BeginSearch::Unknown => ("unknown", Vec::new()),
        BeginSearch::Index(pos) => ("index", vec![pair("index", Reply::Int(pos.into()))]),
        BeginSearch::Keyword { keyword, startfrom } => (
            "keyword",
            vec![
                pair("keyword", Reply::bulk(keyword)),
                pair("startfrom", Reply::Int(startfrom.into())),
            ],
        ),
    };
    fields.push(pair(
        "begin_search",
        Reply::Map(vec![
            pair("type", Reply::bulk(begin.0)),
            pair("spec", Reply::Map(begin.1)),
        ]),
    ));
    let find = match ks.find_keys {
        FindKeys::Unknown => ("unknown", Vec::new()),
        FindKeys::Range {
            lastkey,
            keystep,
            limit,
        } => (
            "range",
            vec![
                pair("lastkey", Reply::Int(lastkey.into())),
                pair("keystep", Reply::Int(keystep.into())),
                pair("limit", Reply::Int(limit.into())),
            ],
        ),
        FindKeys::Keynum {
            keynumidx,
            firstkey,
            keystep,
        } => (
            "keynum",
            vec![
                pair("keynumidx", Reply::Int(keynumidx.into())),
                pair("firstkey", Reply::Int(firstkey.into())),
                pair("keystep", Reply::Int(keystep.into())),
            ],
        ),
    };
    fields.push(pair(
        "find_keys",
        Reply::Map(vec![
            pair("type", Reply::bulk(find.0)),
            pair("spec", Reply::Map(find.1)),
        ]),
    ));
    Reply::Map(fields)
}

/// One COMMAND INFO entry (redis's `addReplyCommandInfo`); `subs` are the
/// implemented subcommands of a container.
fn info_entry(m: &Meta, subs: &[&'static Meta]) -> Reply {
    let subcommands = if m.sub.is_none() && !m.subcommands().is_empty() {
        Reply::Array(subs.iter().map(|s| info_entry(s, &[])).collect())
    } else {
        Reply::Set(Vec::new())
    };
    Reply::Array(vec![
        Reply::bulk(m.name),
        Reply::Int(m.arity.into()),
        statuses(m.flags),
        Reply::Int(m.first_key.into()),
        Reply::Int(m.last_key.into()),
        Reply::Int(m.step.into()),
        Reply::Set(
            m.categories
                .iter()
                .map(|c| Reply::Status(format!("@{c}")))
                .collect(),
        ),
        Reply::Set(m.tips.iter().map(|t| Reply::bulk(*t)).collect()),
        Reply::Set(m.key_specs.iter().map(key_spec).collect()),
        subcommands,
    ])
}

fn row_info(spec: &Spec) -> Reply {
    meta_of(spec).map_or(Reply::Nil, |m| info_entry(m, &implemented_subs(spec)))
}

fn args_reply(args: &[Arg]) -> Reply {
    Reply::Array(
        args.iter()
            .map(|a| {
                let mut f = vec![
                    pair("name", Reply::bulk(a.name)),
                    pair("type", Reply::bulk(a.kind)),
                ];
                if a.key_spec_index != -1 {
                    f.push(pair("key_spec_index", Reply::Int(a.key_spec_index.into())));
                }
                let optional = [
                    ("token", a.token),
                    ("summary", a.summary),
                    ("since", a.since),
                    ("deprecated_since", a.deprecated_since),
                ];
                for (key, value) in optional {
                    if let Some(v) = value {
                        f.push(pair(key, Reply::bulk(v)));
                    }
                }
                if !a.flags.is_empty() {
                    f.push(pair("flags", statuses(a.flags)));
                }
                if a.kind == "oneof" || a.kind == "block" {
                    f.push(pair("arguments", args_reply(a.arguments)));
                }
                Reply::Map(f)
            })
            .collect(),
    )
}

/// One COMMAND DOCS entry (redis's `addReplyCommandDocs`).
fn docs_entry(m: &Meta, subs: &[&'static Meta]) -> Reply {
    let mut f = Vec::new();
    if let Some(s) = m.summary {
        f.push(pair("summary", Reply::bulk(s)));
    }
    if let Some(s) = m.since {
        f.push(pair("since", Reply::bulk(s)));
    }
    f.push(pair("group", Reply::bulk(m.group)));
    if let Some(c) = m.complexity {
        f.push(pair("complexity", Reply::bulk(c)));
    }
    if !m.doc_flags.is_empty() {
        f.push(pair("doc_flags", statuses(m.doc_flags)));
    }
    if let Some(d) = m.deprecated_since {
        f.push(pair("deprecated_since", Reply::bulk(d)));
    }
    if let Some(r) = m.replaced_by {
        f.push(pair("replaced_by", Reply::bulk(r)));
    }
    if !m.history.is_empty() {
        f.push(pair(
            "history",
            Reply::Set(
                m.history
                    .iter()
                    .map(|(v, t)| Reply::Array(vec![Reply::bulk(*v), Reply::bulk(*t)]))
                    .collect(),
            ),
        ));
    }
    if !m.arguments.is_empty() {
        f.push(pair("arguments", args_reply(m.arguments)));
    }
    if m.sub.is_none() && !m.subcommands().is_empty() {
        f.push(pair(
            "subcommands",
            Reply::Map(
                subs.iter()
                    .map(|s| (Reply::bulk(s.name), docs_entry(s, &[])))
                    .collect(),
            ),
        ));
    }
    Reply::Map(f)
}

/// A COMMAND LIST filter.
pub enum Filter {
    /// FILTERBY MODULE: respite loads no modules, so nothing matches.
    Module,
    /// FILTERBY ACLCAT (an unknown category matches nothing).
    AclCat(String),
    /// FILTERBY PATTERN, matched without regard to case, as redis does.
    Pattern(Vec<u8>),
}

impl Filter {
    fn keeps(&self, m: &Meta) -> bool {
        match self {
            Filter::Module => false,
            Filter::AclCat(cat) => m.in_category(cat),
            Filter::Pattern(p) => glob_match(p, m.name.as_bytes()),
        }
    }
}

/// Key positions and flags of a command, as redis's
/// `getKeysFromCommandWithSpecs` finds them (positions index `argv`,
/// where 0 is the command name). `None` where redis finds the arguments
/// invalid.
pub(crate) fn find_keys(m: &Meta, argv: &[Bytes]) -> Option<Vec<(usize, &'static [&'static str])>> {
    let specs_usable = m.key_specs.iter().any(|k| !k.flags.contains(&"not_key"))
        && !m
            .key_specs
            .iter()
            .any(|k| k.flags.contains(&"variable_flags"));
    if specs_usable {
        if let Some(keys) = keys_from_specs(m, argv) {
            return Some(keys);
        }
    }
    match m.get_keys_function {
        Some(f) => keys_by_rule(f, argv),
        None => Some(Vec::new()),
    }
}

/// redis's `getKeysUsingKeySpecs`.
fn keys_from_specs(m: &Meta, argv: &[Bytes]) -> Option<Vec<(usize, &'static [&'static str])>> {
    let argc = argv.len() as i64;
    let mut keys = Vec::new();
    for spec in m.key_specs {
        if spec.flags.contains(&"not_key") {
            continue;
        }
        let first: i64 = match spec.begin_search {
            BeginSearch::Index(pos) => pos.into(),
            BeginSearch::Keyword { keyword, startfrom } => {
                let startfrom = i64::from(startfrom);
                let (start, end) = if startfrom > 0 {
                    (startfrom, argc - 1)
                } else {
                    (argc + startfrom, 1)
                };
                let mut i = start;
                let mut found = 0;
                while i != end {
                    if i >= argc || i < 1 {
                        break;
                    }
                    if argv[i as usize].eq_ignore_ascii_case(keyword.as_bytes()) {
                        found = i + 1;
                        break;
                    }
                    i += if start <= end { 1 } else { -1 };
                }
                if found == 0 {
                    continue;
                }
                found
            }
            BeginSearch::Unknown => return None,
        };
        let (first, last, step) = match spec.find_keys {
            FindKeys::Range {
                lastkey,
                keystep,
                limit,
            } => {
                let (lastkey, limit) = (i64::from(lastkey), i64::from(limit));
                let last = if lastkey >= 0 {
                    first + lastkey
                } else if limit == 0 {
                    argc + lastkey
                } else {
                    first + ((argc - first) / limit + lastkey)
                };
                (first, last, i64::from(keystep))
            }
            FindKeys::Keynum {
                keynumidx,
                firstkey,
                keystep,
            } => {
                if i64::from(keynumidx) >= argc {
                    return None;
                }
                let at = (first + i64::from(keynumidx)) as usize;
                let numkeys = argv
                    .get(at)
                    .and_then(|a| crate::args::parse_i64(a))
                    .filter(|n| *n >= 0)?;
                let first = first + i64::from(firstkey);
                (first, first + numkeys - 1, i64::from(keystep))
            }
            FindKeys::Unknown => return None,
        };
        if last >= argc || last < first || first >= argc {
            return None;
        }
        let mut i = first;
        while i <= last {
            keys.push((i as usize, spec.flags));
            i += step.max(1);
        }
        if spec.flags.contains(&"incomplete") {
            return None;
        }
    }
    Some(keys)
}

/// The key-finding rules of redis's `*GetKeys` functions for the commands
/// whose key specs are not enough; any other rule finds the same keys as
/// the specs, which failed, so it finds none.
fn keys_by_rule(rule: &str, argv: &[Bytes]) -> Option<Vec<(usize, &'static [&'static str])>> {
    const RW_ACCESS_UPDATE: &[&str] = &["RW", "access", "update"];
    let is = |i: usize, word: &str| argv[i].eq_ignore_ascii_case(word.as_bytes());
    Some(match rule {
        "setGetKeys" => {
            let get = (3..argv.len()).any(|i| is(i, "get"));
            let flags: &'static [&'static str] = if get {
                RW_ACCESS_UPDATE
            } else {
                &["OW", "update"]
            };
            vec![(1, flags)]
        }
        "bitfieldGetKeys" => {
            let mut readonly = true;
            let mut i = 2;
            while i < argv.len() {
                let remaining = argv.len() - i - 1;
                if is(i, "get") && remaining >= 2 {
                    i += 3;
                } else if (is(i, "set") || is(i, "incrby")) && remaining >= 3 {
                    readonly = false;
                    break;
                } else if is(i, "overflow") && remaining >= 1 {
                    i += 2;
                } else {
                    readonly = false;
                    break;
                }
            }
            let flags: &'static [&'static str] = if readonly {
                &["RO", "access"]
            } else {
                RW_ACCESS_UPDATE
            };
            vec![(1, flags)]
        }
        "sortGetKeys" => {
            let mut keys: Vec<(usize, &'static [&'static str])> = vec![(1, &["RO", "access"])];
            let mut store = None;
            let mut i = 2;
            while i < argv.len() {
                let skip = [("limit", 2), ("get", 1), ("by", 1)]
                    .iter()
                    .find(|(w, _)| is(i, w))
                    .map(|(_, n)| *n);
                match skip {
                    Some(n) => i += n,
                    None if is(i, "store") && i + 1 < argv.len() => store = Some(i + 1),
                    None => {}
                }
                i += 1;
            }
            if let Some(at) = store {
                keys.push((at, &["OW", "update"]));
            }
            keys
        }
        "sortROGetKeys" => vec![(1, &["RO", "access"])],
        _ => Vec::new(),
    })
}

/// `COMMAND [COUNT | LIST [FILTERBY ...] | INFO [name ...] | DOCS [name ...]
/// | GETKEYS cmd [arg ...] | GETKEYSANDFLAGS cmd [arg ...] | HELP]`
pub enum Command {
    /// Every command's INFO entry.
    All,
    /// Number of commands.
    Count,
    /// Every command and subcommand name, perhaps filtered.
    List(Option<Filter>),
    /// INFO entries of the named commands (nil for unknown ones); all of
    /// them when none is named.
    Info(Vec<Bytes>),
    /// DOCS of the named commands (unknown ones left out), or of all.
    Docs(Vec<Bytes>),
    /// The keys of a full command line, with their flags or not.
    GetKeys {
        /// The command line.
        argv: Vec<Bytes>,
        /// GETKEYSANDFLAGS.
        with_flags: bool,
    },
    /// COMMAND HELP.
    Help,
}

impl LocalCommand for Command {
    fn parse(args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        if args.remaining() == 0 {
            return Ok(Command::All);
        }
        // Names and arities were checked against the table's subcommand
        // list before parsing (see `crate::command::check`).
        let sub = subcommand(args)?;
        Ok(match sub.name.as_str() {
            "COUNT" => Command::Count,
            "HELP" => Command::Help,
            "INFO" => Command::Info(args.rest()),
            "DOCS" => Command::Docs(args.rest()),
            "GETKEYS" | "GETKEYSANDFLAGS" => Command::GetKeys {
                argv: args.rest(),
                with_flags: sub.name == "GETKEYSANDFLAGS",
            },
            "LIST" => {
                let rest = args.rest();
                // Exactly `FILTERBY <type> <arg>` or nothing, as redis's
                // parser takes it: anything else is a syntax error.
                match rest.as_slice() {
                    [] => Command::List(None),
                    [by, kind, arg] if by.eq_ignore_ascii_case(b"filterby") => {
                        let kind = crate::args::upper(kind);
                        Command::List(Some(match kind.as_str() {
                            "MODULE" => Filter::Module,
                            "ACLCAT" => Filter::AclCat(String::from_utf8_lossy(arg).into_owned()),
                            "PATTERN" => Filter::Pattern(arg.to_ascii_lowercase()),
                            _ => return Err(CommandError::Syntax),
                        }))
                    }
                    _ => return Err(CommandError::Syntax),
                }
            }
            _ => return Err(sub.unknown("COMMAND")),
        })
    }

    fn apply(self, _s: &mut Session) -> Result<Plan, CommandError> {
        let reply = match self {
            Command::Help => help(
                "COMMAND",
                &[
                    "(no subcommand)",
                    "    Return details about all Redis commands.",
                    "COUNT",
                    "    Return the total number of commands in this Redis server.",
                    "LIST",
                    "    Return a list of all commands in this Redis server.",
                    "INFO [<command-name> ...]",
                    "    Return details about multiple Redis commands.",
                    "    If no command names are given, documentation details for all",
                    "    commands are returned.",
                    "DOCS [<command-name> ...]",
                    "    Return documentation details about multiple Redis commands.",
                    "    If no command names are given, documentation details for all",
                    "    commands are returned.",
                    "GETKEYS <full-command>",
                    "    Return the keys from a full Redis command.",
                    "GETKEYSANDFLAGS <full-command>",
                    "    Return the keys and the access flags from a full Redis command.",
                ],
            ),
            Command::All => Reply::Array(TABLE.iter().map(row_info).collect()),
            Command::Count => Reply::Int(TABLE.len() as i64),
            Command::List(filter) => {
                let mut names = Vec::new();
                for spec in TABLE.iter() {
                    let Some(m) = meta_of(spec) else { continue };
                    for m in std::iter::once(m).chain(implemented_subs(spec)) {
                        if filter.as_ref().is_none_or(|f| f.keeps(m)) {
                            names.push(Reply::bulk(m.name));
                        }
                    }
                }
                Reply::Array(names)
            }
            Command::Info(names) if names.is_empty() => {
                Reply::Array(TABLE.iter().map(row_info).collect())
            }
            Command::Info(names) => Reply::Array(
                names
                    .iter()
                    .map(|n| match lookup_full(n) {
                        Some((spec, m)) if m.sub.is_none() => row_info(spec),
                        Some((_, m)) => info_entry(m, &[]),
                        None => Reply::Nil,
                    })
                    .collect(),
            ),
            Command::Docs(names) => {
                let rows: Vec<(&Spec, &Meta)> = if names.is_empty() {
                    TABLE
                        .iter()
                        .filter_map(|s| meta_of(s).map(|m| (s, m)))
                        .collect()
                } else {
                    names.iter().filter_map(|n| lookup_full(n)).collect()
                };
                Reply::Map(
                    rows.into_iter()
                        .map(|(spec, m)| {
                            let subs = if m.sub.is_none() {
                                implemented_subs(spec)
                            } else {
                                Vec::new()
                            };
                            (Reply::bulk(m.name), docs_entry(m, &subs))
                        })
                        .collect(),
                )
            }
            Command::GetKeys { argv, with_flags } => get_keys(&argv, with_flags)?,
        };
        Ok(Plan::Reply(reply))
    }
}

/// COMMAND GETKEYS / GETKEYSANDFLAGS, with redis's errors.
fn get_keys(argv: &[Bytes], with_flags: bool) -> Result<Reply, CommandError> {
    let invalid = |what: &str| CommandError::Other(what.into());
    let spec = lookup(&argv[0]).ok_or_else(|| invalid("Invalid command specified"))?;
    let base = meta_of(spec).ok_or_else(|| invalid("Invalid command specified"))?;
    // A container is looked up with its subcommand, as redis's
    // lookupCommand does.
    let m = if base.subcommands().is_empty() || argv.len() == 1 {
        base
    } else {
        implemented_subs(spec)
            .into_iter()
            .find(|m| {
                m.sub
                    .is_some_and(|s| s.as_bytes().eq_ignore_ascii_case(&argv[1]))
            })
            .ok_or_else(|| invalid("Invalid command specified"))?
    };
    let has_keys =
        m.get_keys_function.is_some() || m.key_specs.iter().any(|k| !k.flags.contains(&"not_key"));
    if !has_keys {
        return Err(invalid("The command has no key arguments"));
    }
    let argc = argv.len() as i32;
    if (m.arity > 0 && m.arity != argc) || argc < -m.arity {
        return Err(invalid("Invalid number of arguments specified for command"));
    }
    match find_keys(m, argv) {
        Some(keys) if !keys.is_empty() => Ok(Reply::Array(
            keys.into_iter()
                .map(|(at, flags)| {
                    let key = Reply::Bulk(argv[at].clone());
                    if with_flags {
                        Reply::Array(vec![key, statuses(flags)])
                    } else {
                        key
                    }
                })
                .collect(),
        )),
        _ if m.has_flag("no_mandatory_keys") => Ok(Reply::Array(Vec::new())),
        _ => Err(invalid("Invalid arguments specified for command")),
    }
}

/// This family's rows of the command table (see [`crate::command::table`]).
#[rustfmt::skip]
pub(crate) fn commands() -> Vec<crate::command::Spec> {
    use crate::command::Spec;
    vec![
        Spec::local::<Command>("command")
            .with_subcommands("COMMAND", &["count", "docs", "getkeys", "getkeysandflags", "help", "info", "list"]),
    ]
}

//! ACL: the command that shows and changes users (see `crate::acl` for
//! the model and the check).
//!
//! Every subcommand answers as redis-server 7.0's `aclCommand` does, with
//! its error texts. LOAD and SAVE work against `aclfile`, which is set in
//! the configuration file or on the command line only: no client can point
//! the server at another file (CONFIG SET aclfile is refused as an
//! immutable setting).

use bytes::Bytes;

use crate::acl::{self, Acl};
use crate::args::subcommand;
use crate::args::Args;
use crate::command::{LocalCommand, Plan, Session};
use crate::error::{CommandError, Lossy};
use crate::reply::Reply;

/// `ACL SETUSER username [rule ...] | GETUSER username | DELUSER username
/// [username ...] | LIST | USERS | WHOAMI | CAT [category] | GENPASS [bits]
/// | LOG [count | RESET] | SAVE | LOAD | DRYRUN username command [arg ...] |
/// HELP`
pub enum AclCmd {
    /// SETUSER
    SetUser(Bytes, Vec<Bytes>),
    /// GETUSER
    GetUser(Bytes),
    /// DELUSER
    DelUser(Vec<Bytes>),
    /// LIST
    List,
    /// USERS
    Users,
    /// WHOAMI
    WhoAmI,
    /// CAT, with a category or not.
    Cat(Option<Bytes>),
    /// GENPASS, in bits.
    GenPass(Bytes),
    /// LOG count, or RESET.
    Log(Option<Bytes>),
    /// SAVE
    Save,
    /// LOAD
    Load,
    /// DRYRUN username command args...
    DryRun(Bytes, Vec<Bytes>),
    /// HELP
    Help,
}

impl LocalCommand for AclCmd {
    fn parse(args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        let sub = subcommand(args)?;
        let n = args.remaining();
        Ok(match sub.name.as_str() {
            "SETUSER" => AclCmd::SetUser(args.next()?, args.rest()),
            "GETUSER" => AclCmd::GetUser(args.next()?),
            "DELUSER" => AclCmd::DelUser(args.rest()),
            "LIST" => AclCmd::List,
            "USERS" => AclCmd::Users,
            "WHOAMI" => AclCmd::WhoAmI,
            "CAT" | "GENPASS" | "LOG" if n > 1 => {
                // Redis's own answer to these with too many arguments.
                return Err(CommandError::Quoted {
                    before: "ERR unknown subcommand or wrong number of arguments for '",
                    arg: Lossy(sub.raw_bytes().to_vec()),
                    after: "'. Try ACL HELP.",
                });
            }
            "CAT" => AclCmd::Cat(args.next_opt()),
            "GENPASS" => AclCmd::GenPass(args.next_opt().unwrap_or_else(|| "256".into())),
            "LOG" => AclCmd::Log(args.next_opt()),
            "SAVE" => AclCmd::Save,
            "LOAD" => AclCmd::Load,
            "DRYRUN" if n >= 2 => AclCmd::DryRun(args.next()?, args.rest()),
            "HELP" => AclCmd::Help,
            _ => return Err(sub.unknown("ACL")),
        })
    }

    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        let sh = s.shared.clone();
        let reply = match self {
            AclCmd::SetUser(name, rules) => {
                if name.iter().any(|&c| c.is_ascii_whitespace() || c == 0) {
                    return Err(CommandError::Other(
                        "Usernames can't contain spaces or null characters".into(),
                    ));
                }
                let name = String::from_utf8_lossy(&name).into_owned();
                sh.acl.set_user(&name, &rules).map_err(CommandError::Other)?;
                Reply::Ok
            }
            AclCmd::GetUser(name) => match sh.acl.user(&String::from_utf8_lossy(&name)) {
                None => Reply::Nil,
                Some(u) => getuser_reply(&u),
            },
            AclCmd::DelUser(names) => {
                let names: Vec<String> = names
                    .iter()
                    .map(|n| String::from_utf8_lossy(n).into_owned())
                    .collect();
                if names.iter().any(|n| n == "default") {
                    return Err(CommandError::Other(
                        "The 'default' user cannot be removed".into(),
                    ));
                }
                let deleted = sh.acl.delete_users(&names);
                // As in Redis, a deleted user's connections are closed.
                acl::kill_clients_of(&sh.clients, &|u| names.iter().any(|n| n == u));
                Reply::Int(deleted as i64)
            }
            AclCmd::List => Reply::Array(sh.acl.list().into_iter().map(Reply::bulk).collect()),
            AclCmd::Users => Reply::Array(
                sh.acl
                    .users()
                    .iter()
                    .map(|u| Reply::bulk(u.name().to_string()))
                    .collect(),
            ),
            AclCmd::WhoAmI => Reply::bulk(s.acl.user.name().to_string()),
            AclCmd::Cat(None) => Reply::Array(
                acl::categories()
                    .iter()
                    .map(|c| Reply::bulk(*c))
                    .collect(),
            ),
            AclCmd::Cat(Some(cat)) => {
                let name = String::from_utf8_lossy(&cat);
                match acl::category_commands(&name) {
                    Some(cmds) => Reply::Array(cmds.into_iter().map(Reply::bulk).collect()),
                    None => {
                        let shown = crate::error::c_str(&cat);
                        return Err(CommandError::Quoted {
                            before: "ERR Unknown category '",
                            arg: Lossy(shown[..shown.len().min(128)].to_vec()),
                            after: "'",
                        });
                    }
                }
            }
            AclCmd::GenPass(bits) => {
                let bits = crate::args::parse_i64(&bits).ok_or(CommandError::NotInteger)?;
                if bits <= 0 || bits > 4096 {
                    return Err(CommandError::Other(
                        "ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096".into(),
                    ));
                }
                let chars = (bits as usize).div_ceil(4);
                let mut bytes = vec![0u8; chars.div_ceil(2)];
                rand::Rng::fill(&mut rand::rng(), &mut bytes[..]);
                let mut hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
                hex.truncate(chars);
                Reply::bulk(hex)
            }
            AclCmd::Log(Some(arg)) if arg.eq_ignore_ascii_case(b"reset") => {
                sh.acl.reset_log();
                Reply::Ok
            }
            AclCmd::Log(arg) => {
                let count = match arg {
                    None => 10,
                    Some(a) => crate::args::parse_i64(&a).ok_or(CommandError::NotInteger)?,
                };
                let now = acl::now_ms();
                Reply::Array(
                    sh.acl
                        .log_entries(count.max(0) as usize)
                        .iter()
                        .map(|e| e.reply(now))
                        .collect(),
                )
            }
            AclCmd::Save | AclCmd::Load if sh.config.aclfile.is_none() => {
                return Err(CommandError::Other("This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.".into()));
            }
            AclCmd::Save => {
                let path = sh.config.aclfile.as_deref().unwrap_or(std::path::Path::new(""));
                if let Err(e) = sh.acl.save(path) {
                    tracing::warn!(file = %path.display(), error = %e, "ACL SAVE failed");
                    return Err(CommandError::Other("There was an error trying to save the ACLs. Please check the server logs for more information".into()));
                }
                Reply::Ok
            }
            AclCmd::Load => {
                let path = sh.config.aclfile.as_deref().unwrap_or(std::path::Path::new(""));
                sh.acl.load(path).map_err(CommandError::Other)?;
                // As in Redis, every connection of a user other than the
                // default one is closed: the users it logged in as are gone.
                acl::kill_clients_of(&sh.clients, &|u| u != "default");
                Reply::Ok
            }
            AclCmd::DryRun(name, request) => dry_run(s, &name, &request)?,
            AclCmd::Help => Reply::Array(
                [
                    "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                    "CAT [<category>]",
                    "    List all commands that belong to <category>, or all command categories",
                    "    when no category is specified.",
                    "DELUSER <username> [<username> ...]",
                    "    Delete a list of users.",
                    "DRYRUN <username> <command> [<arg> ...]",
                    "    Returns whether the user can execute the given command without executing the command.",
                    "GETUSER <username>",
                    "    Get the user's details.",
                    "GENPASS [<bits>]",
                    "    Generate a secure 256-bit user password. The optional `bits` argument can",
                    "    be used to specify a different size.",
                    "LIST",
                    "    Show users details in config file format.",
                    "LOAD",
                    "    Reload users from the ACL file.",
                    "LOG [<count> | RESET]",
                    "    Show the ACL log entries.",
                    "SAVE",
                    "    Save the current config to the ACL file.",
                    "SETUSER <username> <attribute> [<attribute> ...]",
                    "    Create or modify a user with the specified attributes.",
                    "USERS",
                    "    List all the registered usernames.",
                    "WHOAMI",
                    "    Return the current connection username.",
                    "HELP",
                    "    Prints this help.",
                ]
                .iter()
                .map(|l| Reply::Status((*l).to_string()))
                .collect(),
            ),
        };
        Ok(Plan::Reply(reply))
    }
}

/// ACL GETUSER's map.
fn getuser_reply(u: &acl::User) -> Reply {
    let d = u.details();
    Reply::Map(vec![
        (
            Reply::bulk("flags"),
            Reply::Set(d.flags.into_iter().map(Reply::bulk).collect()),
        ),
        (
            Reply::bulk("passwords"),
            Reply::Array(d.passwords.into_iter().map(Reply::bulk).collect()),
        ),
        (Reply::bulk("commands"), Reply::bulk(d.commands)),
        (Reply::bulk("keys"), Reply::bulk(d.keys)),
        (Reply::bulk("channels"), Reply::bulk(d.channels)),
        (
            Reply::bulk("selectors"),
            Reply::Array(
                d.selectors
                    .into_iter()
                    .map(|[commands, keys, channels]| {
                        Reply::Map(vec![
                            (Reply::bulk("commands"), Reply::bulk(commands)),
                            (Reply::bulk("keys"), Reply::bulk(keys)),
                            (Reply::bulk("channels"), Reply::bulk(channels)),
                        ])
                    })
                    .collect(),
            ),
        ),
    ])
}

/// ACL DRYRUN: the check a command would meet, without running it.
fn dry_run(s: &Session, name: &[u8], request: &[Bytes]) -> Result<Reply, CommandError> {
    let shown = |b: &[u8]| String::from_utf8_lossy(crate::error::c_str(b)).into_owned();
    let Some(user) = s.shared.acl.user(&String::from_utf8_lossy(name)) else {
        return Err(CommandError::Other(format!(
            "User '{}' not found",
            shown(name)
        )));
    };
    let Some(row) = crate::command::lookup_index(&request[0]) else {
        return Err(CommandError::Other(format!(
            "Command '{}' not found",
            shown(&request[0])
        )));
    };
    let spec = &crate::command::TABLE[row];
    // As Redis's lookupCommand: a container with an argument is looked up
    // as its subcommand, whose arity and full name then count.
    let container =
        crate::meta::find(spec.name.as_bytes(), None).filter(|m| !m.subcommands().is_empty());
    let (arity, fullname) = match (container, request.get(1)) {
        (Some(_), Some(sub)) => match crate::meta::find(spec.name.as_bytes(), Some(sub)) {
            Some(m) => (m.arity, m.name),
            None => {
                return Err(CommandError::Other(format!(
                    "Command '{}' not found",
                    shown(&request[0])
                )))
            }
        },
        _ => (spec.arity, spec.name),
    };
    let argc = request.len() as i32;
    if (arity > 0 && argc != arity) || argc < -arity {
        return Err(CommandError::WrongArity(fullname.to_string()));
    }
    Ok(match Acl::check_user(&user, spec.acl_request(request)) {
        Ok(()) => Reply::Ok,
        Err(acl::Denied::Command(id)) => Reply::bulk(format!(
            "This user has no permissions to run the '{}' command",
            acl::id_name(id)
        )),
        Err(acl::Denied::Key(pos)) => Reply::bulk(format!(
            "This user has no permissions to access the '{}' key",
            shown(&request[pos])
        )),
        Err(acl::Denied::Channel(pos)) => Reply::bulk(format!(
            "This user has no permissions to access the '{}' channel",
            shown(&request[pos])
        )),
    })
}

/// Logs a failed AUTH or HELLO AUTH (`command` as the client spelled it).
pub(crate) fn auth_failed(s: &Session, command: &[u8], user: &[u8]) {
    let context = if s.multi.is_some() || s.acl.in_exec {
        "multi"
    } else {
        "toplevel"
    };
    s.shared.acl.log_denial(
        acl::Reason::Auth,
        context,
        String::from_utf8_lossy(command).into_owned(),
        String::from_utf8_lossy(user).into_owned(),
        crate::command::track::client_line(&s.client, None, None),
    );
}

/// Whether a login as `user` with `pass` succeeds; on success the session
/// is that user's.
pub(crate) fn log_in(
    s: &mut Session,
    command: &[u8],
    user: &[u8],
    pass: &[u8],
) -> Result<(), CommandError> {
    match s.shared.acl.authenticate(user, pass) {
        Some(u) => {
            let shared = s.shared.clone();
            let client = s.client.clone();
            s.acl.switch(&shared.acl, u, &client);
            s.authenticated = true;
            Ok(())
        }
        None => {
            auth_failed(s, command, user);
            Err(CommandError::WrongPass)
        }
    }
}

/// This family's rows of the command table.
#[rustfmt::skip]
pub(crate) fn commands() -> Vec<crate::command::Spec> {
    use crate::command::Spec;
    vec![
        Spec::local::<AclCmd>("acl")
            .with_subcommands("ACL", &[
                ("cat", -2), ("deluser", -3), ("dryrun", -4), ("genpass", -2), ("getuser", 3),
                ("help", 2), ("list", 2), ("load", 2), ("log", -2), ("save", 2),
                ("setuser", -3), ("users", 2), ("whoami", 2),
            ]),
    ]
}

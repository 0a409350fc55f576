//! Connection commands: PING, ECHO, HELLO, AUTH, SELECT, CLIENT, QUIT, RESET.
//!
//! These change or describe the connection itself, so they run right on the
//! connection's task and never touch the engine.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::{subcommand, LocalCommand, Plan, Session};
use crate::args::{upper, Args};
use crate::error::{CommandError, Lossy};
use crate::reply::Reply;
use crate::state::lock;

/// `PING [message]`
pub struct Ping {
    /// Echoed back instead of PONG.
    message: Option<Bytes>,
}

impl LocalCommand for Ping {
    fn parse(args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        if args.remaining() > 1 {
            return Err(CommandError::WrongArity("ping".into()));
        }
        Ok(Ping {
            message: args.next_opt(),
        })
    }
    fn apply(self, _s: &mut Session) -> Result<Plan, CommandError> {
        Ok(Plan::Reply(match self.message {
            Some(m) => Reply::Bulk(m),
            None => Reply::Simple("PONG"),
        }))
    }
}

/// `ECHO message`
pub struct Echo {
    /// The message.
    message: Bytes,
}

impl LocalCommand for Echo {
    fn parse(args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        Ok(Echo {
            message: args.next()?,
        })
    }
    fn apply(self, _s: &mut Session) -> Result<Plan, CommandError> {
        Ok(Plan::Reply(Reply::Bulk(self.message)))
    }
}

/// Checks a password against `requirepass`.
fn check_password(s: &Session, user: Option<&[u8]>, pass: &[u8]) -> Result<(), CommandError> {
    let Some(expected) = s.shared.requirepass() else {
        if user.is_none() {
            return Err(CommandError::AuthNotConfigured);
        }
        // With no password, the default user accepts any password.
        return if user == Some(b"default") {
            Ok(())
        } else {
            Err(CommandError::WrongPass)
        };
    };
    if user.is_some_and(|u| u != b"default") || pass != expected.as_bytes() {
        return Err(CommandError::WrongPass);
    }
    Ok(())
}

/// `AUTH [username] password`
pub struct Auth {
    /// The username (only `default` exists).
    user: Option<Bytes>,
    /// The password.
    pass: Bytes,
}

impl LocalCommand for Auth {
    fn parse(args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        match args.remaining() {
            1 => Ok(Auth {
                user: None,
                pass: args.next()?,
            }),
            2 => Ok(Auth {
                user: Some(args.next()?),
                pass: args.next()?,
            }),
            _ => Err(CommandError::Syntax),
        }
    }
    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        check_password(s, self.user.as_deref(), &self.pass)?;
        s.authenticated = true;
        Ok(Plan::Reply(Reply::Ok))
    }
}

/// `HELLO [protover [AUTH username password] [SETNAME clientname]]`
pub struct Hello {
    /// Protocol version to switch to.
    proto: Option<i64>,
    /// AUTH credentials.
    auth: Option<(Bytes, Bytes)>,
    /// SETNAME name.
    name: Option<Bytes>,
}

impl LocalCommand for Hello {
    fn parse(args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        let mut cmd = Hello {
            proto: None,
            auth: None,
            name: None,
        };
        if args.remaining() == 0 {
            return Ok(cmd);
        }
        let v = args.next()?;
        cmd.proto = Some(crate::args::parse_i64(&v).ok_or_else(|| {
            CommandError::Other("Protocol version is not an integer or out of range".into())
        })?);
        while args.remaining() > 0 {
            let opt_raw = args.next()?;
            match upper(&opt_raw).as_str() {
                "AUTH" if args.remaining() >= 2 => cmd.auth = Some((args.next()?, args.next()?)),
                "SETNAME" if args.remaining() >= 1 => cmd.name = Some(args.next()?),
                _ => {
                    return Err(CommandError::Quoted {
                        before: "ERR Syntax error in HELLO option '",
                        arg: Lossy(opt_raw.to_vec()),
                        after: "'",
                    })
                }
            }
        }
        Ok(cmd)
    }
    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        if let Some(v) = self.proto {
            if v != 2 && v != 3 {
                return Err(CommandError::NoProto);
            }
        }
        if let Some((user, pass)) = &self.auth {
            check_password(s, Some(user), pass)?;
            s.authenticated = true;
        }
        if !s.authenticated {
            return Ok(Plan::Reply(Reply::error(
                "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time",
            )));
        }
        if let Some(name) = &self.name {
            set_name(s, name)?;
        }
        if let Some(v) = self.proto {
            s.resp3 = v == 3;
            s.client.resp.store(v as u32, Ordering::Relaxed);
        }
        let fields = vec![
            (Reply::bulk("server"), Reply::bulk("respite")),
            (
                Reply::bulk("version"),
                Reply::bulk(env!("CARGO_PKG_VERSION")),
            ),
            (
                Reply::bulk("proto"),
                Reply::Int(if s.resp3 { 3 } else { 2 }),
            ),
            (Reply::bulk("id"), Reply::Int(s.client.id as i64)),
            (Reply::bulk("mode"), Reply::bulk("standalone")),
            (Reply::bulk("role"), Reply::bulk("master")),
            (Reply::bulk("modules"), Reply::Array(Vec::new())),
        ];
        Ok(Plan::Reply(Reply::Map(fields)))
    }
}

/// `SELECT index`
pub struct Select {
    /// The database to use.
    index: u32,
}

impl LocalCommand for Select {
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        let n = args.next_i32()?;
        if n < 0 || n as u32 >= s.shared.config.databases {
            return Err(CommandError::DbIndexOutOfRange);
        }
        Ok(Select { index: n as u32 })
    }
    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        s.db = self.index;
        s.client.db.store(self.index, Ordering::Relaxed);
        Ok(Plan::Reply(Reply::Ok))
    }
}

/// `QUIT`: OK, then the connection closes.
pub struct Quit;

impl LocalCommand for Quit {
    fn parse(args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        // Redis ignores any arguments to QUIT.
        let _ = args.rest();
        Ok(Quit)
    }
    fn apply(self, _s: &mut Session) -> Result<Plan, CommandError> {
        Ok(Plan::ReplyAndClose(Reply::Ok))
    }
}

/// `RESET`: back to a fresh connection's state.
pub struct Reset;

impl LocalCommand for Reset {
    fn parse(_args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        Ok(Reset)
    }
    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        s.db = 0;
        s.client.db.store(0, Ordering::Relaxed);
        s.resp3 = false;
        s.client.resp.store(2, Ordering::Relaxed);
        *lock(&s.client.name) = None;
        s.authenticated = s.shared.requirepass().is_none();
        s.multi = None;
        Ok(s.reply_ending_watches(Reply::Simple("RESET")))
    }
}

fn set_name(s: &Session, name: &[u8]) -> Result<(), CommandError> {
    if name.iter().any(|&b| b <= b' ' || b > b'~') {
        return Err(CommandError::Other(
            "Client names cannot contain spaces, newlines or special characters.".into(),
        ));
    }
    *lock(&s.client.name) = if name.is_empty() {
        None
    } else {
        Some(String::from_utf8_lossy(name).into_owned())
    };
    Ok(())
}

/// `CLIENT ID | SETNAME name | GETNAME | LIST [TYPE normal] [ID id ...] |
/// INFO | KILL ... | SETINFO ... | HELP`
pub enum Client {
    /// CLIENT ID
    Id,
    /// CLIENT SETNAME name
    SetName(Bytes),
    /// CLIENT GETNAME
    GetName,
    /// CLIENT LIST, optionally only these ids; `false` when a TYPE was
    /// given that no client here has.
    List(Option<Vec<u64>>, bool),
    /// CLIENT INFO
    Info,
    /// CLIENT KILL with its filters.
    Kill(KillFilter),
    /// CLIENT SETINFO LIB-NAME|LIB-VER value (accepted, not stored).
    SetInfo,
    /// CLIENT HELP
    Help,
    /// CLIENT UNBLOCK id [TIMEOUT|ERROR]: the client, and whether it gets
    /// an error rather than a timeout's reply.
    Unblock(u64, crate::blocking::Cancel),
}

/// Which clients CLIENT KILL targets.
pub struct KillFilter {
    /// `ID id`.
    id: Option<u64>,
    /// `ADDR ip:port` (or the old one-argument form).
    addr: Option<String>,
    /// `LADDR ip:port`.
    laddr: Option<String>,
    /// `SKIPME yes|no` (default yes).
    skipme: bool,
    /// `TYPE`: false when it names a type no client here has (all clients
    /// are `normal`).
    type_matches: bool,
    /// `USER`: false unless it names `default`, the only user.
    user_matches: bool,
    /// `MAXAGE seconds`: only clients at least this old.
    max_age: Option<u64>,
    /// The old form replies OK or an error instead of a count.
    old_form: bool,
}

fn wrong_client_arity(sub: &str) -> CommandError {
    CommandError::WrongArity(format!("client|{}", sub.to_lowercase()))
}

impl LocalCommand for Client {
    fn parse(args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        let sub = subcommand(args)?;
        let n = args.remaining();
        let cmd = match sub.name.as_str() {
            "ID" if n == 0 => Client::Id,
            "GETNAME" if n == 0 => Client::GetName,
            "INFO" if n == 0 => Client::Info,
            "HELP" if n == 0 => Client::Help,
            "SETNAME" if n == 1 => Client::SetName(args.next()?),
            "SETINFO" if n == 2 => {
                let attr = args.next_upper()?;
                let _ = args.next()?;
                if attr != "LIB-NAME" && attr != "LIB-VER" {
                    return Err(CommandError::Other(format!("Unrecognized option '{attr}'")));
                }
                Client::SetInfo
            }
            "LIST" => {
                let mut ids = None;
                let mut type_matches = true;
                while args.remaining() > 0 {
                    match args.next_upper()?.as_str() {
                        "TYPE" => {
                            let t = args.next_upper()?;
                            if !["NORMAL", "MASTER", "REPLICA", "SLAVE", "PUBSUB"]
                                .contains(&t.as_str())
                            {
                                return Err(CommandError::Other(format!(
                                    "Unknown client type '{}'",
                                    t.to_lowercase()
                                )));
                            }
                            type_matches = t == "NORMAL";
                        }
                        "ID" => {
                            let mut v = Vec::new();
                            while args.remaining() > 0 {
                                let id = crate::args::parse_i64(&args.next()?)
                                    .filter(|i| *i > 0)
                                    .ok_or_else(|| {
                                    CommandError::Other("Invalid client ID".into())
                                })?;
                                v.push(id as u64);
                            }
                            ids = Some(v);
                        }
                        _ => return Err(CommandError::Syntax),
                    }
                }
                Client::List(ids, type_matches)
            }
            "KILL" => {
                let mut f = KillFilter {
                    id: None,
                    addr: None,
                    laddr: None,
                    skipme: true,
                    type_matches: true,
                    user_matches: true,
                    max_age: None,
                    old_form: false,
                };
                if n == 1 {
                    f.addr = Some(String::from_utf8_lossy(&args.next()?).into_owned());
                    f.old_form = true;
                    // The old form may kill the caller itself.
                    f.skipme = false;
                } else if n == 0 || n % 2 == 1 {
                    return Err(CommandError::Syntax);
                } else {
                    while args.remaining() > 0 {
                        let opt = args.next_upper()?;
                        let val = args.next()?;
                        let text = String::from_utf8_lossy(&val).into_owned();
                        match opt.as_str() {
                            "ID" => {
                                f.id = Some(
                                    crate::args::parse_i64(&val).filter(|i| *i > 0).ok_or_else(
                                        || {
                                            CommandError::Other(
                                                "client-id should be greater than 0".into(),
                                            )
                                        },
                                    )? as u64,
                                )
                            }
                            "ADDR" => f.addr = Some(text),
                            "LADDR" => f.laddr = Some(text),
                            "SKIPME" => match text.to_ascii_lowercase().as_str() {
                                "yes" => f.skipme = true,
                                "no" => f.skipme = false,
                                _ => return Err(CommandError::Syntax),
                            },
                            "TYPE" => {
                                let t = text.to_ascii_lowercase();
                                if !["normal", "master", "replica", "slave", "pubsub"]
                                    .contains(&t.as_str())
                                {
                                    return Err(CommandError::Other(format!(
                                        "Unknown client type '{text}'"
                                    )));
                                }
                                f.type_matches = t == "normal";
                            }
                            "USER" => f.user_matches = text == "default",
                            "MAXAGE" => {
                                let age = crate::args::parse_i64(&val)
                                    .filter(|a| *a >= 0)
                                    .ok_or(CommandError::NotInteger)?;
                                f.max_age = Some(age as u64);
                            }
                            _ => return Err(CommandError::Syntax),
                        }
                    }
                }
                Client::Kill(f)
            }
            "UNBLOCK" if n == 1 || n == 2 => {
                let id = args.next()?;
                let why = match args.next_opt().map(|r| upper(&r)) {
                    None => crate::blocking::Cancel::Timeout,
                    Some(r) if r == "TIMEOUT" => crate::blocking::Cancel::Timeout,
                    Some(r) if r == "ERROR" => crate::blocking::Cancel::Error,
                    Some(_) => {
                        return Err(CommandError::Other(
                            "CLIENT UNBLOCK reason should be TIMEOUT or ERROR".into(),
                        ))
                    }
                };
                let id = crate::args::parse_i64(&id).ok_or(CommandError::NotInteger)?;
                Client::Unblock(id as u64, why)
            }
            "ID" | "GETNAME" | "INFO" | "SETNAME" | "SETINFO" | "UNBLOCK" => {
                return Err(wrong_client_arity(&sub.name))
            }
            _ => {
                return Err(sub.unknown("CLIENT"));
            }
        };
        Ok(cmd)
    }

    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        let reply = match self {
            Client::Id => Reply::Int(s.client.id as i64),
            Client::SetName(name) => {
                set_name(s, &name)?;
                Reply::Ok
            }
            Client::GetName => match lock(&s.client.name).clone() {
                Some(n) => Reply::bulk(n),
                None => Reply::Nil,
            },
            Client::Info => Reply::Verbatim(format!("{}\n", s.client.info_line())),
            Client::List(_, false) => Reply::Verbatim(String::new()),
            Client::List(ids, true) => {
                let clients = lock(&s.shared.clients);
                let mut handles: Vec<_> = clients.values().cloned().collect();
                drop(clients);
                handles.sort_by_key(|c| c.id);
                let mut out = String::new();
                for c in handles {
                    if ids.as_ref().is_some_and(|ids| !ids.contains(&c.id)) {
                        continue;
                    }
                    out.push_str(&c.info_line());
                    out.push('\n');
                }
                Reply::Verbatim(out)
            }
            Client::SetInfo => Reply::Ok,
            Client::Help => Reply::Array(
                [
                    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                    "GETNAME",
                    "    Return the name of the current connection.",
                    "ID",
                    "    Return the ID of the current connection.",
                    "INFO",
                    "    Return information about the current client connection.",
                    "KILL <ip:port>",
                    "    Kill connection made from <ip:port>.",
                    "KILL <option> <value> [<option> <value> [...]]",
                    "    Kill connections. Options are: ID, ADDR, LADDR, SKIPME.",
                    "LIST [TYPE <normal>] [ID <id> [<id> ...]]",
                    "    Return information about client connections.",
                    "SETNAME <name>",
                    "    Assign the name <name> to the current connection.",
                    "HELP",
                    "    Print this help.",
                ]
                .iter()
                .map(|l| Reply::Status((*l).to_string()))
                .collect(),
            ),
            Client::Unblock(id, why) => {
                let target = lock(&s.shared.clients).get(&id).cloned();
                let ticket = target.and_then(|c| lock(&c.blocked).clone());
                Reply::Int(ticket.is_some_and(|t| t.unblock(why)) as i64)
            }
            Client::Kill(f) => {
                let clients = lock(&s.shared.clients);
                let mut killed = 0;
                for c in clients.values() {
                    if f.skipme && c.id == s.client.id {
                        continue;
                    }
                    if !f.type_matches
                        || !f.user_matches
                        || f.max_age
                            .is_some_and(|age| c.created.elapsed().as_secs() < age)
                        || f.id.is_some_and(|id| id != c.id)
                        || f.addr.as_ref().is_some_and(|a| *a != c.addr())
                        || f.laddr.as_ref().is_some_and(|a| *a != c.laddr())
                    {
                        continue;
                    }
                    c.killed.store(true, Ordering::SeqCst);
                    c.kill_notify.notify_one();
                    killed += 1;
                }
                if f.old_form {
                    if killed == 0 {
                        return Err(CommandError::Other("No such client".into()));
                    }
                    Reply::Ok
                } else {
                    Reply::Int(killed)
                }
            }
        };
        Ok(Plan::Reply(reply))
    }
}

/// This family's rows of the command table (see [`super::table`]).
#[rustfmt::skip]
pub(super) fn commands() -> Vec<super::Spec> {
    use super::Spec;
    vec![
        Spec::local::<Auth>("auth", -2, &["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"], [0, 0, 0], "connection", "Authenticates the connection."),
        Spec::local::<Client>("client", -2, &[], [0, 0, 0], "connection", "A container for client connection commands.")
            .with_subcommands("CLIENT", &[("getname", 2), ("help", 2), ("id", 2), ("info", 2), ("kill", -3), ("list", -2), ("setinfo", 4), ("setname", 3), ("unblock", -3)]),
        Spec::local::<Echo>("echo", 2, &["loading", "stale", "fast"], [0, 0, 0], "connection", "Returns the given string."),
        Spec::local::<Hello>("hello", -1, &["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"], [0, 0, 0], "connection", "Handshakes with the Redis server."),
        Spec::local::<Ping>("ping", -1, &["fast"], [0, 0, 0], "connection", "Returns the server's liveliness response."),
        Spec::local::<Quit>("quit", -1, &["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"], [0, 0, 0], "connection", "Closes the connection."),
        Spec::local::<Reset>("reset", 1, &["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"], [0, 0, 0], "connection", "Resets the connection."),
        Spec::local::<Select>("select", 2, &["loading", "stale", "fast"], [0, 0, 0], "connection", "Changes the selected database."),
    ]
}

//! Connection commands: PING, ECHO, HELLO, AUTH, SELECT, QUIT, RESET
//! (CLIENT has its own file, `client.rs`).
//!
//! These change or describe the connection itself, so they run right on the
//! connection's task and never touch the engine.

use bytes::Bytes;

use crate::args::{upper, Args};
use crate::command::Ctx;
use crate::command::{ContextCommand, LocalCommand, Plan, Session};
use crate::error::{CommandError, Lossy};
use crate::reply::Reply;
use crate::sync::lock;

/// `PING [message]`
pub struct Ping {
    /// Echoed back instead of PONG.
    message: Option<Bytes>,
}

impl ContextCommand for Ping {
    fn parse(args: &mut Args, _ctx: &Ctx<'_>) -> Result<Self, CommandError> {
        if args.remaining() > 1 {
            return Err(CommandError::WrongArity("ping".into()));
        }
        Ok(Ping {
            message: args.next_opt(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> Result<Reply, CommandError> {
        // A RESP2 client in subscribed mode gets redis's `["pong", msg]`.
        if ctx.subscribed {
            let message = self.message.unwrap_or_default();
            return Ok(Reply::Array(vec![
                Reply::bulk("pong"),
                Reply::Bulk(message),
            ]));
        }
        Ok(match self.message {
            Some(m) => Reply::Bulk(m),
            None => Reply::Simple("PONG"),
        })
    }
}

/// `ECHO message`
pub struct Echo {
    /// The message.
    message: Bytes,
}

impl ContextCommand for Echo {
    fn parse(args: &mut Args, _ctx: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(Echo {
            message: args.next()?,
        })
    }
    fn apply(self, _ctx: &mut Ctx<'_>) -> Result<Reply, CommandError> {
        Ok(Reply::Bulk(self.message))
    }
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
        let user = match &self.user {
            Some(u) => u.clone(),
            None => {
                // Redis's answer to the old form when the default user has
                // no password.
                if s.shared.acl.user("default").is_some_and(|u| u.is_nopass()) {
                    return Err(CommandError::AuthNotConfigured);
                }
                Bytes::from_static(b"default")
            }
        };
        super::acl::log_in(s, b"AUTH", &user, &self.pass)?;
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
            super::acl::log_in(s, b"HELLO", user, pass)?;
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
            s.set_resp3(v == 3);
        }
        let fields = vec![
            (Reply::bulk("server"), Reply::bulk("respite")),
            (
                Reply::bulk("version"),
                Reply::bulk(env!("CARGO_PKG_VERSION")),
            ),
            (
                Reply::bulk("proto"),
                Reply::Int(if s.resp3() { 3 } else { 2 }),
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

impl ContextCommand for Select {
    fn parse(args: &mut Args, ctx: &Ctx<'_>) -> Result<Self, CommandError> {
        let n = args.next_i32()?;
        if n < 0 || n as u32 >= ctx.databases() {
            return Err(CommandError::DbIndexOutOfRange);
        }
        Ok(Select { index: n as u32 })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> Result<Reply, CommandError> {
        ctx.db = self.index;
        Ok(Reply::Ok)
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
        s.select(0);
        s.set_resp3(false);
        *lock(&s.client.name) = None;
        // Back to the default user, logged in only if it needs no password.
        s.acl.log_out(&s.shared.acl, &s.client);
        s.authenticated = s.shared.acl.default_user_open();
        s.multi = None;
        Ok(s.reply_ending_watches(Reply::Simple("RESET")))
    }
}

pub(super) fn set_name(s: &Session, name: &[u8]) -> Result<(), CommandError> {
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

/// This family's rows of the command table (see [`crate::command::table`]).
#[rustfmt::skip]
pub(crate) fn commands() -> Vec<crate::command::Spec> {
    use crate::command::Spec;
    vec![
        Spec::local::<Auth>("auth"),
        Spec::context::<Echo>("echo"),
        Spec::local::<Hello>("hello"),
        Spec::context::<Ping>("ping"),
        Spec::local::<Quit>("quit"),
        Spec::local::<Reset>("reset"),
        Spec::context::<Select>("select"),
    ]
}

//! Errors a command can answer with, with redis-server's exact texts.
//!
//! Parsing a command's arguments and checking its preconditions produce a
//! [`CommandError`]; failures inside the engine arrive as
//! [`respite_engine::EngineError`], whose texts are Redis's too. Both become
//! an error reply and the connection goes on.

use respite_engine::EngineError;

use crate::reply::Reply;

/// A command that cannot run, and why.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The command name is not in the command table.
    #[error("ERR unknown command '{name}', with args beginning with: {args}")]
    UnknownCommand {
        /// The name as the client sent it (at most 128 bytes).
        name: Lossy,
        /// The first arguments, quoted, as Redis prints them.
        args: Lossy,
    },
    /// A subcommand the container command does not have.
    #[error("ERR unknown subcommand '{sub}'. Try {cmd} HELP.")]
    UnknownSubcommand {
        /// The container command, upper case.
        cmd: &'static str,
        /// The subcommand as sent.
        sub: Lossy,
    },
    /// An error text that quotes a client's argument (`before`, the
    /// argument, `after`), which goes out as Redis's `%s` prints it.
    #[error("{before}{arg}{after}")]
    Quoted {
        /// The text before the argument, `ERR` included.
        before: &'static str,
        /// The argument as sent.
        arg: Lossy,
        /// The text after it.
        after: &'static str,
    },
    /// Too few or too many arguments.
    #[error("ERR wrong number of arguments for '{0}' command")]
    WrongArity(String),
    /// Options that do not parse or do not go together.
    #[error("ERR syntax error")]
    Syntax,
    /// An argument that must be an integer is not.
    #[error("ERR value is not an integer or out of range")]
    NotInteger,
    /// An argument that must be a float is not.
    #[error("ERR value is not a valid float")]
    NotFloat,
    /// A negative or zero expire time, or one that overflows.
    #[error("ERR invalid expire time in '{0}' command")]
    InvalidExpire(&'static str),
    /// SELECT / COPY DB outside `0..databases`.
    #[error("ERR DB index is out of range")]
    DbIndexOutOfRange,
    /// Any command but AUTH/HELLO before authenticating.
    #[error("NOAUTH Authentication required.")]
    NoAuth,
    /// AUTH with the wrong password.
    #[error("WRONGPASS invalid username-password pair or user is disabled.")]
    WrongPass,
    /// AUTH when no password is configured.
    #[error("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")]
    AuthNotConfigured,
    /// A write while `min-replicas-to-write` asks for replicas respite
    /// does not have.
    #[error("NOREPLICAS Not enough good replicas to write.")]
    NoReplicas,
    /// HELLO with a protocol version other than 2 or 3.
    #[error("NOPROTO unsupported protocol version")]
    NoProto,
    /// An error whose text is built by the command (CONFIG SET, CLIENT).
    #[error("ERR {0}")]
    Other(String),
    /// An error whose whole text, code included, is built by the caller
    /// (NOPERM).
    #[error("{0}")]
    Raw(String),
    /// The engine refused or failed the operation.
    #[error("{0}")]
    Engine(#[from] EngineError),
}

/// What C's `%s` shows of a client's argument: everything before its first
/// NUL byte. redis-server formats the arguments it quotes in errors that
/// way; every other byte goes out as sent (line breaks become spaces when
/// the reply is encoded, as redis-server does too).
pub fn c_str(b: &[u8]) -> &[u8] {
    b.iter().position(|&c| c == 0).map_or(b, |i| &b[..i])
}

/// Client bytes quoted in an error: shown lossily by `Display` (logs), sent
/// to the client as `c_str` shows them.
#[derive(Debug)]
pub struct Lossy(pub Vec<u8>);

impl std::fmt::Display for Lossy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.0))
    }
}

impl From<CommandError> for Reply {
    fn from(e: CommandError) -> Reply {
        match e {
            // Byte for byte what the client sent, as redis-server echoes it.
            CommandError::UnknownCommand { name, args } => {
                let mut text = b"ERR unknown command '".to_vec();
                text.extend_from_slice(&name.0);
                text.extend_from_slice(b"', with args beginning with: ");
                text.extend_from_slice(&args.0);
                Reply::Error(text.into())
            }
            // `%.128s`: at most 128 bytes, up to a NUL.
            CommandError::UnknownSubcommand { cmd, sub } => {
                let sub = c_str(&sub.0);
                let mut text = b"ERR unknown subcommand '".to_vec();
                text.extend_from_slice(&sub[..sub.len().min(128)]);
                text.extend_from_slice(format!("'. Try {cmd} HELP.").as_bytes());
                Reply::Error(text.into())
            }
            CommandError::Quoted { before, arg, after } => {
                let mut text = before.as_bytes().to_vec();
                text.extend_from_slice(c_str(&arg.0));
                text.extend_from_slice(after.as_bytes());
                Reply::Error(text.into())
            }
            e => Reply::error(e.to_string()),
        }
    }
}

impl From<EngineError> for Reply {
    fn from(e: EngineError) -> Reply {
        Reply::error(e.to_string())
    }
}

/// A command's result as the writer takes it. An engine error goes back
/// as one: the writer (or EXEC) answers it, and takes the group back if
/// the operation wrote. Any other error is the command's reply if the
/// command changed nothing since `before` (its `Txn::changes` when it
/// started; inside EXEC earlier commands may have written), else the group
/// cannot be trusted and goes back.
pub(crate) fn command_result(
    result: Result<Reply, CommandError>,
    txn: &respite_engine::Txn<'_, '_>,
    before: u64,
) -> respite_engine::Result<Reply> {
    match result {
        Ok(reply) => Ok(reply),
        Err(CommandError::Engine(e)) => Err(e),
        Err(e) if txn.changes() == before => Ok(Reply::from(e)),
        Err(e) => Err(EngineError::Internal(e.to_string())),
    }
}

//! A cursor over one request's arguments, with the conversions commands need.
//!
//! Arguments are `Bytes` slices of the connection's read buffer; taking one
//! is a reference-count bump, not a copy.

use bytes::Bytes;

use crate::error::{CommandError, Lossy};

/// The arguments of one command, after its name.
pub struct Args {
    items: std::vec::IntoIter<Bytes>,
    /// The command's name as the client sent it, when the dispatcher
    /// kept it (FUNCTION STATS shows the running FCALL as sent).
    name: Option<Bytes>,
}

impl Args {
    /// Wraps the arguments that follow the command name.
    pub fn new(items: std::vec::IntoIter<Bytes>) -> Self {
        Args { items, name: None }
    }

    /// [`Args::new`], keeping the command's name as sent.
    pub fn with_name(name: Option<Bytes>, items: std::vec::IntoIter<Bytes>) -> Self {
        Args { items, name }
    }

    /// The command's name as sent, if the dispatcher kept it.
    pub fn name(&self) -> Option<&Bytes> {
        self.name.as_ref()
    }

    /// How many arguments are left.
    pub fn remaining(&self) -> usize {
        self.items.len()
    }

    /// The next argument, if any.
    pub fn next_opt(&mut self) -> Option<Bytes> {
        self.items.next()
    }

    /// The next argument; a syntax error if there is none (arity is checked
    /// before parsing, so this is for optional clauses such as `EX` with no
    /// number after it).
    // Not `Iterator::next`: it fails instead of ending, and every command
    // calls it by this name.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Bytes, CommandError> {
        self.items.next().ok_or(CommandError::Syntax)
    }

    /// The next argument, upper-cased, for matching options and
    /// subcommands.
    pub fn next_upper(&mut self) -> Result<String, CommandError> {
        Ok(upper(&self.next()?))
    }

    /// The next argument as a signed 64-bit integer, strictly (no spaces, no
    /// `+`, no leading zeros games): Redis's `string2ll`.
    pub fn next_i64(&mut self) -> Result<i64, CommandError> {
        parse_i64(&self.next()?).ok_or(CommandError::NotInteger)
    }

    /// The next argument as a C `int`, as Redis's `getIntFromObjectOrReply`
    /// reads it (DB indexes): not an integer and outside `i32` are two
    /// different errors.
    pub fn next_i32(&mut self) -> Result<i32, CommandError> {
        let n = self.next_i64()?;
        i32::try_from(n).map_err(|_| {
            CommandError::Other(format!(
                "value is out of range, value must between {} and {}",
                i32::MIN,
                i32::MAX
            ))
        })
    }

    /// The bytes of the arguments left (CLIENT INFO's own `argv-mem`).
    pub fn bytes_left(&self) -> usize {
        self.items.as_slice().iter().map(|b| b.len()).sum()
    }

    /// Every remaining argument.
    pub fn rest(&mut self) -> Vec<Bytes> {
        self.items.by_ref().collect()
    }
}

/// Upper-cases an argument for comparison (lossy for non-UTF-8, which no
/// option name is).
pub fn upper(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_ascii_uppercase()
}

/// Redis's strict integer parsing: optional `-`, digits, no leading `+`,
/// spaces or leading zeros (except "0" itself), within `i64`.
pub fn parse_i64(b: &[u8]) -> Option<i64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    let digits = b.strip_prefix(b"-").unwrap_or(b);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if digits.len() > 1 && digits[0] == b'0' {
        return None;
    }
    if digits == b"0" && b.len() > 1 {
        // "-0" is not an integer to Redis.
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// Parses a subcommand name for container commands (CLIENT, CONFIG,
/// COMMAND).
pub(crate) fn subcommand(args: &mut Args) -> Result<Sub, CommandError> {
    let raw = args.next()?;
    Ok(Sub {
        name: upper(&raw),
        raw,
    })
}

/// A subcommand: upper case for matching, and as sent, for the error that
/// names an unknown one (Redis quotes it as the client wrote it).
pub(crate) struct Sub {
    /// Upper case.
    pub name: String,
    /// As sent.
    raw: Bytes,
}

impl Sub {
    /// `ERR unknown subcommand or wrong number of arguments for '...'. Try
    /// CMD HELP.` (redis's `addReplySubcommandSyntaxError`).
    pub(crate) fn syntax(&self, cmd: &'static str) -> CommandError {
        CommandError::Other(format!(
            "unknown subcommand or wrong number of arguments for '{}'. Try {cmd} HELP.",
            String::from_utf8_lossy(&self.raw)
        ))
    }

    /// The subcommand as sent.
    pub(crate) fn raw_bytes(&self) -> &[u8] {
        &self.raw
    }

    /// `ERR unknown subcommand '...'. Try CMD HELP.`
    pub(crate) fn unknown(&self, cmd: &'static str) -> CommandError {
        CommandError::UnknownSubcommand {
            cmd,
            sub: Lossy(self.raw.to_vec()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_integers() {
        assert_eq!(parse_i64(b"42"), Some(42));
        assert_eq!(parse_i64(b"-42"), Some(-42));
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-0"), None);
        assert_eq!(parse_i64(b"042"), None);
        assert_eq!(parse_i64(b"+1"), None);
        assert_eq!(parse_i64(b" 1"), None);
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
    }
}

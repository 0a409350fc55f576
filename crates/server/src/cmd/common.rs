//! Helpers more than one family uses: the options, cursor and reply of
//! the SCAN family (HSCAN, SSCAN, ZSCAN, SCAN), the random picks of
//! HRANDFIELD, SRANDMEMBER and ZRANDMEMBER, and the HELP reply of every
//! container command.

use bytes::Bytes;
use rand::seq::index;
use respite_engine::EngineError;

use crate::args::{parse_i64, upper, Args};
use crate::error::CommandError;
use crate::reply::Reply;

/// The largest number of elements a negative count may ask HRANDFIELD or
/// SRANDMEMBER for. redis-server streams such a reply; respite builds it
/// first, so a count meant to exhaust memory is refused instead.
pub const MAX_REPEATED: u64 = 10_000_000;

/// The optional `count [WITHVALUES]` of HRANDFIELD (`with` names the
/// option: ZRANDMEMBER's is WITHSCORES), checked as redis-server checks
/// it. redis-server streams a reply of repeated picks; respite builds it
/// first, so a negative count past [`MAX_REPEATED`] is refused rather than
/// allowed to exhaust memory.
pub(crate) fn parse_random_count(
    args: &mut Args,
    with: &str,
) -> Result<(Option<i64>, bool), CommandError> {
    let Some(count) = args.next_opt() else {
        return Ok((None, false));
    };
    let n = parse_i64(&count).ok_or(CommandError::NotInteger)?;
    if n == i64::MIN {
        return Err(range_error());
    }
    if args.remaining() > 1 {
        return Err(CommandError::Syntax);
    }
    let mut with_pairs = false;
    if let Some(opt) = args.next_opt() {
        if upper(&opt) != with {
            return Err(CommandError::Syntax);
        }
        with_pairs = true;
        if !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&n) {
            return Err(CommandError::Other("value is out of range".into()));
        }
    }
    if n < 0 && n.unsigned_abs() > MAX_REPEATED {
        return Err(CommandError::Other("value is out of range".into()));
    }
    Ok((Some(n), with_pairs))
}

/// Redis's error for a count outside `-LONG_MAX..=LONG_MAX`.
pub(crate) fn range_error() -> CommandError {
    CommandError::Other(format!(
        "value is out of range, value must between {} and {}",
        -i64::MAX,
        i64::MAX
    ))
}

/// The options of HSCAN and SSCAN, parsed as Redis's `scanGenericCommand`
/// does, after the key was found (so a missing key answers an empty scan
/// whatever follows, as in Redis).
pub(crate) struct ScanOptions {
    /// MATCH pattern.
    pub pattern: Option<Bytes>,
    /// COUNT: elements examined per call.
    pub count: usize,
    /// NOVALUES (HSCAN only).
    pub no_values: bool,
}

/// Parses a SCAN cursor as Redis's `strtoul` does: an optional sign, then
/// decimal digits within 64 bits (a `-` wraps around); anything else is
/// "invalid cursor".
pub(crate) fn parse_cursor(arg: &[u8]) -> Result<u64, CommandError> {
    let invalid = || CommandError::Engine(EngineError::InvalidCursor);
    let (negative, digits) = match arg.first() {
        Some(b'-') => (true, &arg[1..]),
        Some(b'+') => (false, &arg[1..]),
        _ => (false, arg),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(invalid());
    }
    let n = std::str::from_utf8(digits)
        .ok()
        .and_then(|t| t.parse::<u64>().ok())
        .ok_or_else(invalid)?;
    Ok(if negative { n.wrapping_neg() } else { n })
}

impl ScanOptions {
    /// Reads the options; `hash` allows NOVALUES.
    pub(crate) fn parse(args: &mut Args, hash: bool) -> Result<ScanOptions, CommandError> {
        let mut o = ScanOptions {
            pattern: None,
            count: 10,
            no_values: false,
        };
        while let Some(opt) = args.next_opt() {
            let word = upper(&opt);
            match word.as_str() {
                "COUNT" if args.remaining() > 0 => {
                    let n = args.next_i64()?;
                    if n < 1 {
                        return Err(CommandError::Syntax);
                    }
                    o.count = n.min(1_000_000) as usize;
                }
                "MATCH" if args.remaining() > 0 => o.pattern = Some(args.next()?),
                "NOVALUES" if hash => o.no_values = true,
                _ => return Err(CommandError::Syntax),
            }
        }
        Ok(o)
    }

    /// Whether an element passes MATCH.
    pub(crate) fn matches(&self, element: &[u8]) -> bool {
        self.pattern
            .as_deref()
            .is_none_or(|p| respite_engine::glob::glob_match(p, element))
    }
}

/// The reply of HSCAN and SSCAN: the cursor, then the elements.
pub(crate) fn scan_reply(cursor: u64, elements: Vec<Reply>) -> Reply {
    Reply::Array(vec![
        Reply::bulk(cursor.to_string()),
        Reply::Array(elements),
    ])
}

/// Random elements of `all` as Redis's random commands choose them: a
/// negative count picks `-count` times with repeats; a count at or above
/// the size takes everything; a smaller one distinct elements.
pub(crate) fn sample<T>(all: &[T], count: i64) -> Vec<&T> {
    if all.is_empty() || count == 0 {
        return Vec::new();
    }
    let mut rng = rand::rng();
    if count < 0 {
        return (0..count.unsigned_abs())
            .map(|_| &all[rand::Rng::random_range(&mut rng, 0..all.len())])
            .collect();
    }
    let n = count as u64;
    if n >= all.len() as u64 {
        return all.iter().collect();
    }
    index::sample(&mut rng, all.len(), n as usize)
        .into_iter()
        .map(|i| &all[i])
        .collect()
}

/// A HELP reply as redis's `addReplyHelp` builds it: a heading naming the
/// command, the lines, and the HELP entry every container has.
pub(crate) fn help(cmd: &str, lines: &[&str]) -> Reply {
    let mut out = Vec::with_capacity(lines.len() + 3);
    out.push(Reply::Status(format!(
        "{cmd} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    )));
    out.extend(lines.iter().map(|l| Reply::Status((*l).to_string())));
    out.push(Reply::Simple("HELP"));
    out.push(Reply::Simple("    Prints this help."));
    Reply::Array(out)
}

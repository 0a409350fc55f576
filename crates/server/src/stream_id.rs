//! Stream IDs as the stream commands read them: `ms-seq`, `ms` alone,
//! `-` and `+`, and the `(` of an exclusive interval bound, with redis's
//! rules and its one error text for all of them
//! (`streamGenericParseIDOrReply` in t_stream.c). The commands parse
//! their arguments with these, and so does the replication stream when it
//! rewrites a stream command the way redis sends it.

use respite_engine::stream::StreamId;

use crate::error::CommandError;

fn err(text: &str) -> CommandError {
    CommandError::Other(text.to_string())
}

const INVALID_ID: &str = "Invalid stream ID specified as stream command argument";

/// redis's `streamGenericParseIDOrReply`: `ms-seq`, `ms` (the sequence
/// then `missing_seq`), `-` and `+` unless `strict`. With `auto_seq`,
/// `ms-*` is accepted and answers `false` for "sequence given".
pub(crate) fn parse_id_full(
    arg: &[u8],
    missing_seq: u64,
    strict: bool,
    auto_seq: bool,
) -> Result<(StreamId, bool), CommandError> {
    if arg.len() > 127 {
        return Err(err(INVALID_ID));
    }
    // Up to a NUL, as redis's C string sees it.
    let arg = crate::error::c_str(arg);
    if strict && (arg == b"-" || arg == b"+") {
        return Err(err(INVALID_ID));
    }
    if arg == b"-" {
        return Ok((StreamId::MIN, true));
    }
    if arg == b"+" {
        return Ok((StreamId::MAX, true));
    }
    let (ms, seq) = match arg.iter().position(|&c| c == b'-') {
        Some(i) => (&arg[..i], Some(&arg[i + 1..])),
        None => (arg, None),
    };
    let ms = parse_u64(ms).ok_or_else(|| err(INVALID_ID))?;
    match seq {
        Some(b"*") if auto_seq => Ok((StreamId::new(ms, 0), false)),
        Some(s) => Ok((
            StreamId::new(ms, parse_u64(s).ok_or_else(|| err(INVALID_ID))?),
            true,
        )),
        None => Ok((StreamId::new(ms, missing_seq), true)),
    }
}

/// redis's `string2ull`: digits only (a leading `-` is read by strtoull
/// as a wrap, which `string2ull` refuses), at most 20 of them.
fn parse_u64(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 20 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// A strict ID (no `-` or `+`), the sequence 0 when missing.
pub(crate) fn strict_id(arg: &[u8]) -> Result<StreamId, CommandError> {
    Ok(parse_id_full(arg, 0, true, false)?.0)
}

/// An ID that may be `-` or `+`.
pub(crate) fn loose_id(arg: &[u8], missing_seq: u64) -> Result<StreamId, CommandError> {
    Ok(parse_id_full(arg, missing_seq, false, false)?.0)
}

/// The start of an interval (`(` excludes it).
pub(crate) fn start_id(arg: &[u8]) -> Result<StreamId, CommandError> {
    if arg.len() > 1 && arg[0] == b'(' {
        let id = parse_id_full(&arg[1..], 0, true, false)?.0;
        return id
            .next()
            .ok_or_else(|| err("invalid start ID for the interval"));
    }
    loose_id(arg, 0)
}

/// The end of an interval (`(` excludes it).
pub(crate) fn end_id(arg: &[u8]) -> Result<StreamId, CommandError> {
    if arg.len() > 1 && arg[0] == b'(' {
        let id = parse_id_full(&arg[1..], u64::MAX, true, false)?.0;
        return id
            .prev()
            .ok_or_else(|| err("invalid end ID for the interval"));
    }
    loose_id(arg, u64::MAX)
}

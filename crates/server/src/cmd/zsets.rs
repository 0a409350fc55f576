//! Sorted-set commands: ZADD and its options, scores and ranks, the range
//! family (ZRANGE with BYSCORE, BYLEX, REV and LIMIT, its STORE form and
//! the older ZRANGEBYSCORE-style names), removals by range, pops, the
//! algebra (ZUNION, ZINTER, ZDIFF, their STORE forms, ZINTERCARD),
//! ZRANDMEMBER and ZSCAN.
//!
//! Reads run on the read pool, each in one snapshot; writes (the STORE
//! forms too) on the writer through the engine's write gate
//! (`respite_engine::keyspace`). The engine (`respite_engine::zset`) keeps
//! members in Redis's order, by score and then by member bytes, so replies
//! match redis-server 7.0 element for element, not just as sets.
//!
//! Arguments are checked in redis-server's order, since that decides which
//! error a bad command gets: ZADD's options before its scores, a range's
//! options before its ends, and for the algebra the key types before the
//! options after the keys (so those option errors are kept with the parsed
//! command and answered only once the keys are looked at, as ZSCAN's are).
//!
//! Scores parse as C's `strtod` reads them (hexadecimal, `inf`, no NaN;
//! ZADD refuses an overflow, a range end takes it as an infinity) and print
//! as `%.17g` (`reply::format_double`); in RESP3 they are doubles, and
//! member/score pairs are nested arrays.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use respite_engine::zset::{AddFlags, LexBound, LexRange, ScoreRange, Scored};
use respite_engine::{EngineError, KeyRow, Kind, Txn, View};

use super::common::{parse_cursor, parse_random_count, sample, scan_reply, ScanOptions};
use crate::args::{parse_i64, upper, Args};
use crate::blocking::{parse_timeout, Blocker};
use crate::command::Ctx;
use crate::command::{BlockingCommand, ReadCommand, WriteCommand};
use crate::error::CommandError;
use crate::reply::{format_double, Reply};

/// The live sorted set under `key`, `None` if there is none (WRONGTYPE if
/// the key holds another type).
fn zset(view: &View<'_, '_>, db: u32, key: &[u8]) -> Result<Option<KeyRow>, CommandError> {
    Ok(view.live(db, key, Kind::ZSet)?)
}

/// C's `isspace`.
fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn starts_with_ci(s: &[u8], word: &[u8]) -> bool {
    s.len() >= word.len() && s[..word.len()].eq_ignore_ascii_case(word)
}

/// What glibc's `strtod` reads at the start of `s`: the value, how many
/// bytes it used (0 when there is no number), and whether it overflowed to
/// an infinity or underflowed to zero (ERANGE).
fn strtod(s: &[u8]) -> (f64, usize, bool) {
    let start = s.iter().position(|&c| !is_c_space(c)).unwrap_or(s.len());
    let mut i = start;
    let negative = s.get(i) == Some(&b'-');
    if matches!(s.get(i), Some(b'+' | b'-')) {
        i += 1;
    }
    let sign = if negative { -1.0 } else { 1.0 };
    let rest = &s[i..];
    if starts_with_ci(rest, b"infinity") {
        return (sign * f64::INFINITY, i + 8, false);
    }
    if starts_with_ci(rest, b"inf") {
        return (sign * f64::INFINITY, i + 3, false);
    }
    if starts_with_ci(rest, b"nan") {
        let mut end = i + 3;
        // `nan(chars)`
        if s.get(end) == Some(&b'(') {
            if let Some(close) = s[end + 1..]
                .iter()
                .position(|&c| !(c.is_ascii_alphanumeric() || c == b'_'))
            {
                if s[end + 1 + close] == b')' {
                    end += close + 2;
                }
            }
        }
        return (f64::NAN, end, false);
    }
    let hex_digit = |c: Option<&u8>| c.is_some_and(u8::is_ascii_hexdigit);
    if starts_with_ci(rest, b"0x")
        && (hex_digit(rest.get(2)) || (rest.get(2) == Some(&b'.') && hex_digit(rest.get(3))))
    {
        let (value, used, range) = hex_float(&rest[2..]);
        return (sign * value, i + 2 + used, range);
    }
    // Decimal: digits, an optional point and digits, an optional exponent.
    let mut j = i;
    let mut digits = 0;
    let mut nonzero = false;
    while let Some(c) = s.get(j).filter(|c| c.is_ascii_digit()) {
        nonzero |= *c != b'0';
        digits += 1;
        j += 1;
    }
    if s.get(j) == Some(&b'.') {
        j += 1;
        while let Some(c) = s.get(j).filter(|c| c.is_ascii_digit()) {
            nonzero |= *c != b'0';
            digits += 1;
            j += 1;
        }
    }
    if digits == 0 {
        return (0.0, 0, false);
    }
    if matches!(s.get(j), Some(b'e' | b'E')) {
        let mut k = j + 1;
        if matches!(s.get(k), Some(b'+' | b'-')) {
            k += 1;
        }
        if s.get(k).is_some_and(u8::is_ascii_digit) {
            while s.get(k).is_some_and(u8::is_ascii_digit) {
                k += 1;
            }
            j = k;
        }
    }
    // Rust's parser rounds correctly, as glibc does; it only lacks the
    // ERANGE report, which the result shows.
    let text = std::str::from_utf8(&s[start..j]).unwrap_or("0");
    let value: f64 = text.parse().unwrap_or(0.0);
    let range = value.is_infinite() || (value == 0.0 && nonzero);
    (value, j, range)
}

/// A hexadecimal float after its `0x`: digits, an optional point and
/// digits, an optional binary exponent `p[+-]n`.
fn hex_float(s: &[u8]) -> (f64, usize, bool) {
    let mut mantissa: u64 = 0;
    let mut exp: i64 = 0;
    let mut i = 0;
    let mut seen_point = false;
    let mut nonzero = false;
    while let Some(&c) = s.get(i) {
        if c == b'.' && !seen_point {
            seen_point = true;
        } else if let Some(d) = (c as char).to_digit(16) {
            nonzero |= d != 0;
            if mantissa >> 56 == 0 {
                mantissa = mantissa * 16 + d as u64;
                if seen_point {
                    exp -= 4;
                }
            } else if !seen_point {
                exp += 4;
            }
        } else {
            break;
        }
        i += 1;
    }
    if matches!(s.get(i), Some(b'p' | b'P')) {
        let mut k = i + 1;
        let negative = s.get(k) == Some(&b'-');
        if matches!(s.get(k), Some(b'+' | b'-')) {
            k += 1;
        }
        if s.get(k).is_some_and(u8::is_ascii_digit) {
            let mut e: i64 = 0;
            while let Some(c) = s.get(k).filter(|c| c.is_ascii_digit()) {
                e = (e * 10 + (c - b'0') as i64).min(1 << 20);
                k += 1;
            }
            exp += if negative { -e } else { e };
            i = k;
        }
    }
    let mut value = mantissa as f64;
    // Scale in steps that cannot overflow or underflow on their own.
    let mut e = exp;
    while e != 0 && value != 0.0 && value.is_finite() {
        let step = e.clamp(-1000, 1000);
        value *= 2f64.powi(step as i32);
        e -= step;
    }
    let range = value.is_infinite() || (value == 0.0 && nonzero);
    (value, i, range)
}

/// A score argument, as Redis's `getDoubleFromObject` reads it: the whole
/// argument a number, no leading space, no NaN, no overflow or underflow to
/// zero.
fn parse_float(arg: &[u8]) -> Option<f64> {
    if arg.first().is_none_or(|&c| is_c_space(c)) {
        return None;
    }
    let (value, used, range) = strtod(arg);
    if used != arg.len() || value.is_nan() || (range && (value.is_infinite() || value == 0.0)) {
        return None;
    }
    Some(value)
}

/// One end of a score range (`zslParseRange`): `(` makes it exclusive;
/// `strtod` must stop at the end of the C string (an empty end reads as
/// 0, as in Redis); NaN is refused.
fn parse_score_end(arg: &[u8]) -> Option<(f64, bool)> {
    let (exclusive, text) = match arg.first() {
        Some(b'(') => (true, &arg[1..]),
        _ => (false, arg),
    };
    let (value, used, _) = strtod(text);
    if text.get(used).is_some_and(|&c| c != 0) || value.is_nan() {
        return None;
    }
    Some((value, exclusive))
}

/// A score range from its two ends.
fn parse_score_range(min: &[u8], max: &[u8]) -> Result<ScoreRange, CommandError> {
    let not_float = || CommandError::Other("min or max is not a float".into());
    let (min, min_ex) = parse_score_end(min).ok_or_else(not_float)?;
    let (max, max_ex) = parse_score_end(max).ok_or_else(not_float)?;
    Ok(ScoreRange::new(min, min_ex, max, max_ex))
}

/// One end of a lexicographic range: `-`, `+`, `[member` or `(member`.
fn parse_lex_end(arg: &[u8]) -> Option<LexBound> {
    match arg.first()? {
        b'+' if arg.len() == 1 => Some(LexBound::Max),
        b'-' if arg.len() == 1 => Some(LexBound::Min),
        b'(' => Some(LexBound::Exclusive(arg[1..].to_vec())),
        b'[' => Some(LexBound::Inclusive(arg[1..].to_vec())),
        _ => None,
    }
}

/// A lexicographic range from its two ends.
fn parse_lex_range(min: &[u8], max: &[u8]) -> Result<LexRange, CommandError> {
    let invalid = || CommandError::Other("min or max not valid string range item".into());
    Ok(LexRange {
        min: parse_lex_end(min).ok_or_else(invalid)?,
        max: parse_lex_end(max).ok_or_else(invalid)?,
    })
}

/// Members, with their scores if asked: flat in RESP2, pairs in RESP3.
fn scored_reply(items: Vec<Scored>, with_scores: bool, resp3: bool) -> Reply {
    let mut out = Vec::with_capacity(items.len() * if with_scores { 2 } else { 1 });
    for (member, score) in items {
        let member = Reply::bulk(member);
        match (with_scores, resp3) {
            (false, _) => out.push(member),
            (true, false) => out.extend([member, Reply::Double(score)]),
            (true, true) => out.push(Reply::Array(vec![member, Reply::Double(score)])),
        }
    }
    Reply::Array(out)
}

/// `ZADD key [NX | XX] [GT | LT] [CH] [INCR] score member [score member
/// ...]`: the number of new members (with CH, of changed ones too); with
/// INCR the member's new score, or nil when an option skipped it.
pub struct ZAdd {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// Score/member pairs in argument order.
    items: Vec<(f64, Bytes)>,
    /// NX, XX, GT, LT, INCR.
    flags: AddFlags,
    /// CH: count changed members too.
    ch: bool,
}

impl ZAdd {
    /// Reads ZADD's arguments, or ZINCRBY's (`incr`: the same command with
    /// INCR set, and the same errors, as in Redis).
    fn parse_with(args: &mut Args, s: &Ctx<'_>, incr: bool) -> Result<ZAdd, CommandError> {
        let key = args.next()?;
        let rest = args.rest();
        let mut flags = AddFlags {
            incr,
            ..AddFlags::default()
        };
        let mut ch = false;
        let mut i = 0;
        while let Some(opt) = rest.get(i) {
            match upper(opt).as_str() {
                "NX" => flags.nx = true,
                "XX" => flags.xx = true,
                "CH" => ch = true,
                "INCR" => flags.incr = true,
                "GT" => flags.gt = true,
                "LT" => flags.lt = true,
                _ => break,
            }
            i += 1;
        }
        let elements = rest.len() - i;
        if elements == 0 || elements % 2 == 1 {
            return Err(CommandError::Syntax);
        }
        if flags.nx && flags.xx {
            return Err(CommandError::Other(
                "XX and NX options at the same time are not compatible".into(),
            ));
        }
        // At most one of GT, LT and NX.
        if [flags.gt, flags.lt, flags.nx]
            .iter()
            .filter(|&&f| f)
            .count()
            > 1
        {
            return Err(CommandError::Other(
                "GT, LT, and/or NX options at the same time are not compatible".into(),
            ));
        }
        if flags.incr && elements > 2 {
            return Err(CommandError::Other(
                "INCR option supports a single increment-element pair".into(),
            ));
        }
        let items = rest[i..]
            .chunks_exact(2)
            .map(|pair| {
                let score = parse_float(&pair[0]).ok_or(CommandError::NotFloat)?;
                Ok((score, pair[1].clone()))
            })
            .collect::<Result<_, CommandError>>()?;
        Ok(ZAdd {
            db: s.db,
            key,
            items,
            flags,
            ch,
        })
    }
}

impl WriteCommand for ZAdd {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        ZAdd::parse_with(args, s, false)
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let mut slot = txn.open(self.db, &self.key, Kind::ZSet)?;
        let done = txn.zset_add(&mut slot, &self.items, self.flags)?;
        Ok(if self.flags.incr {
            if done.processed > 0 {
                Reply::Double(done.score)
            } else {
                Reply::Nil
            }
        } else if self.ch {
            Reply::Int(done.added + done.updated)
        } else {
            Reply::Int(done.added)
        })
    }
}

/// `ZINCRBY key increment member`: the member's new score.
pub struct ZIncrBy(ZAdd);

impl WriteCommand for ZIncrBy {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(ZIncrBy(ZAdd::parse_with(args, s, true)?))
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        self.0.apply(txn)
    }
}

/// `ZREM key member [member ...]`: the number removed; the key goes with
/// its last member.
pub struct ZRem {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The members.
    members: Vec<Bytes>,
}

impl WriteCommand for ZRem {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(ZRem {
            db: s.db,
            key: args.next()?,
            members: args.rest(),
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let mut slot = txn.open(self.db, &self.key, Kind::ZSet)?;
        Ok(Reply::Int(txn.zset_remove(&mut slot, &self.members)?))
    }
}

/// `ZSCORE key member`
pub struct ZScore {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The member.
    member: Bytes,
}

impl ReadCommand for ZScore {
    const QUICK: bool = true;
    const MULTI_STATEMENT: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(ZScore {
            db: s.db,
            key: args.next()?,
            member: args.next()?,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let Some(row) = zset(view, self.db, &self.key)? else {
            return Ok(Reply::Nil);
        };
        Ok(view
            .zset_score(row.id, &self.member)?
            .map_or(Reply::Nil, Reply::Double))
    }
}

/// `ZMSCORE key member [member ...]`: a score or nil for each.
pub struct ZMScore {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The members.
    members: Vec<Bytes>,
}

impl ReadCommand for ZMScore {
    const QUICK: bool = true;
    const MULTI_STATEMENT: bool = true;
    fn is_quick(&self) -> bool {
        self.members.len() <= crate::command::QUICK_READ_LIMIT
    }
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(ZMScore {
            db: s.db,
            key: args.next()?,
            members: args.rest(),
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let row = zset(view, self.db, &self.key)?;
        let mut out = Vec::with_capacity(self.members.len());
        for m in &self.members {
            let score = match row {
                Some(row) => view.zset_score(row.id, m)?,
                None => None,
            };
            out.push(score.map_or(Reply::Nil, Reply::Double));
        }
        Ok(Reply::Array(out))
    }
}

/// `ZCARD key`: read from the key row, never counted.
pub struct ZCard {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
}

impl ReadCommand for ZCard {
    const QUICK: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(ZCard {
            db: s.db,
            key: args.next()?,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        Ok(Reply::Int(
            zset(view, self.db, &self.key)?.map_or(0, |r| r.count),
        ))
    }
}

/// `ZCOUNT key min max`: members with a score in the range, counted by
/// rank (two rank lookups, not a walk of the range).
pub struct ZCount {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The range.
    range: ScoreRange,
}

impl ReadCommand for ZCount {
    const QUICK: bool = true;
    const MULTI_STATEMENT: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let key = args.next()?;
        let (min, max) = (args.next()?, args.next()?);
        Ok(ZCount {
            db: s.db,
            key,
            range: parse_score_range(&min, &max)?,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let Some(row) = zset(view, self.db, &self.key)? else {
            return Ok(Reply::Int(0));
        };
        Ok(Reply::Int(view.zset_count(&row, self.range)?))
    }
}

/// `ZLEXCOUNT key min max`
pub struct ZLexCount {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The range.
    range: LexRange,
}

impl ReadCommand for ZLexCount {
    const MULTI_STATEMENT: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let key = args.next()?;
        let (min, max) = (args.next()?, args.next()?);
        Ok(ZLexCount {
            db: s.db,
            key,
            range: parse_lex_range(&min, &max)?,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let Some(row) = zset(view, self.db, &self.key)? else {
            return Ok(Reply::Int(0));
        };
        Ok(Reply::Int(view.zset_lex_count(&row, &self.range)?))
    }
}

/// `ZRANK key member` (`REV` false) and `ZREVRANK key member`.
pub struct ZRankGeneric<const REV: bool> {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The member.
    member: Bytes,
}

/// `ZRANK key member`
pub type ZRank = ZRankGeneric<false>;
/// `ZREVRANK key member`
pub type ZRevRank = ZRankGeneric<true>;

impl<const REV: bool> ReadCommand for ZRankGeneric<REV> {
    const QUICK: bool = true;
    const MULTI_STATEMENT: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(ZRankGeneric {
            db: s.db,
            key: args.next()?,
            member: args.next()?,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let Some(row) = zset(view, self.db, &self.key)? else {
            return Ok(Reply::Nil);
        };
        Ok(match view.zset_rank(&row, &self.member)? {
            Some((rank, _)) if REV => Reply::Int(row.count - 1 - rank),
            Some((rank, _)) => Reply::Int(rank),
            None => Reply::Nil,
        })
    }
}

/// What a range selects.
#[derive(Debug, Clone, PartialEq)]
enum RangeBy {
    /// By rank, `start` and `stop` as given (negative from the end).
    Rank(i64, i64),
    /// By score.
    Score(ScoreRange),
    /// By member, all scores being equal.
    Lex(LexRange),
}

/// A parsed ZRANGE (or older form).
#[derive(Debug, Clone, PartialEq)]
struct RangeSpec {
    /// What to select.
    by: RangeBy,
    /// REV: from the highest score down.
    rev: bool,
    /// LIMIT's offset.
    offset: i64,
    /// LIMIT's count (-1: none).
    limit: i64,
    /// WITHSCORES.
    with_scores: bool,
}

/// Which command name a range came in by: `ZRANGE` and `ZRANGESTORE` take
/// BYSCORE, BYLEX and REV as options, the older names fix them.
#[derive(Clone, Copy, PartialEq)]
enum Form {
    Auto,
    ByScore,
    RevByScore,
    ByLex,
    RevByLex,
    Rev,
}

impl Form {
    fn of(code: u8) -> Form {
        match code {
            1 => Form::ByScore,
            2 => Form::RevByScore,
            3 => Form::ByLex,
            4 => Form::RevByLex,
            5 => Form::Rev,
            _ => Form::Auto,
        }
    }
}

/// Reads `key min max [options]` as Redis's `zrangeGenericCommand` does:
/// the options first (syntax, LIMIT's integers), then their conflicts, then
/// the two ends by the type of range.
fn parse_range(
    args: &mut Args,
    form: Form,
    store: bool,
) -> Result<(Bytes, RangeSpec), CommandError> {
    #[derive(PartialEq, Clone, Copy)]
    enum By {
        Auto,
        Rank,
        Score,
        Lex,
    }
    let key = args.next()?;
    let (mut min, mut max) = (args.next()?, args.next()?);
    let (mut by, fixed_by) = match form {
        Form::Auto => (By::Auto, false),
        Form::ByScore | Form::RevByScore => (By::Score, true),
        Form::ByLex | Form::RevByLex => (By::Lex, true),
        Form::Rev => (By::Rank, true),
    };
    let fixed_direction = form != Form::Auto;
    let mut rev = matches!(form, Form::RevByScore | Form::RevByLex | Form::Rev);
    let (mut offset, mut limit, mut with_scores) = (0, -1, false);
    let rest = args.rest();
    let mut j = 0;
    while let Some(opt) = rest.get(j) {
        let left = rest.len() - j - 1;
        let word = upper(opt);
        if !store && word == "WITHSCORES" {
            with_scores = true;
        } else if word == "LIMIT" && left >= 2 {
            offset = parse_i64(&rest[j + 1]).ok_or(CommandError::NotInteger)?;
            limit = parse_i64(&rest[j + 2]).ok_or(CommandError::NotInteger)?;
            j += 2;
        } else if !fixed_direction && !rev && word == "REV" {
            rev = true;
        } else if !fixed_by && by == By::Auto && word == "BYLEX" {
            by = By::Lex;
        } else if !fixed_by && by == By::Auto && word == "BYSCORE" {
            by = By::Score;
        } else {
            return Err(CommandError::Syntax);
        }
        j += 1;
    }
    if by == By::Auto {
        by = By::Rank;
    }
    if limit != -1 && by == By::Rank {
        return Err(CommandError::Other(
            "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
                .into(),
        ));
    }
    if with_scores && by == By::Lex {
        return Err(CommandError::Other(
            "syntax error, WITHSCORES not supported in combination with BYLEX".into(),
        ));
    }
    // Reversed score and lex ranges are written max first.
    if rev && by != By::Rank {
        std::mem::swap(&mut min, &mut max);
    }
    let by = match by {
        By::Score => RangeBy::Score(parse_score_range(&min, &max)?),
        By::Lex => RangeBy::Lex(parse_lex_range(&min, &max)?),
        _ => {
            let start = parse_i64(&min).ok_or(CommandError::NotInteger)?;
            let stop = parse_i64(&max).ok_or(CommandError::NotInteger)?;
            RangeBy::Rank(start, stop)
        }
    };
    Ok((
        key,
        RangeSpec {
            by,
            rev,
            offset,
            limit,
            with_scores,
        },
    ))
}

/// Ranks as Redis sanitises them: negative from the end, clamped to the
/// set; `None` when the range is empty.
fn clamp_ranks(start: i64, stop: i64, len: i64) -> Option<(i64, i64)> {
    let start = if start < 0 {
        start.saturating_add(len)
    } else {
        start
    }
    .max(0);
    let stop = if stop < 0 {
        stop.saturating_add(len)
    } else {
        stop
    };
    if start > stop || start >= len {
        return None;
    }
    Some((start, stop.min(len - 1)))
}

/// The members a range selects from the set `row`, in reply order.
fn select(
    view: &View<'_, '_>,
    row: &KeyRow,
    spec: &RangeSpec,
) -> Result<Vec<Scored>, CommandError> {
    Ok(match &spec.by {
        RangeBy::Rank(start, stop) => match clamp_ranks(*start, *stop, row.count) {
            Some((start, stop)) => view.zset_by_rank(row, start, stop, spec.rev)?,
            None => Vec::new(),
        },
        RangeBy::Score(range) => {
            view.zset_by_score(row.id, *range, spec.rev, spec.offset, spec.limit)?
        }
        RangeBy::Lex(range) => view.zset_by_lex(row, range, spec.rev, spec.offset, spec.limit)?,
    })
}

/// `ZRANGE key start stop [BYSCORE | BYLEX] [REV] [LIMIT offset count]
/// [WITHSCORES]` (`FORM` 0), and the older `ZRANGEBYSCORE key min max
/// [WITHSCORES] [LIMIT offset count]` (1), `ZREVRANGEBYSCORE key max min
/// ...` (2), `ZRANGEBYLEX key min max [LIMIT offset count]` (3),
/// `ZREVRANGEBYLEX key max min ...` (4), `ZREVRANGE key start stop
/// [WITHSCORES]` (5).
pub struct ZRangeGeneric<const FORM: u8> {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The range and options.
    spec: RangeSpec,
    /// Speaking RESP3: member/score pairs are nested arrays.
    resp3: bool,
}

/// `ZRANGE key start stop [BYSCORE | BYLEX] [REV] [LIMIT offset count] [WITHSCORES]`
pub type ZRange = ZRangeGeneric<0>;
/// `ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]`
pub type ZRangeByScore = ZRangeGeneric<1>;
/// `ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count]`
pub type ZRevRangeByScore = ZRangeGeneric<2>;
/// `ZRANGEBYLEX key min max [LIMIT offset count]`
pub type ZRangeByLex = ZRangeGeneric<3>;
/// `ZREVRANGEBYLEX key max min [LIMIT offset count]`
pub type ZRevRangeByLex = ZRangeGeneric<4>;
/// `ZREVRANGE key start stop [WITHSCORES]`
pub type ZRevRange = ZRangeGeneric<5>;

impl<const FORM: u8> ReadCommand for ZRangeGeneric<FORM> {
    const MULTI_STATEMENT: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let (key, spec) = parse_range(args, Form::of(FORM), false)?;
        Ok(ZRangeGeneric {
            db: s.db,
            key,
            spec,
            resp3: s.resp3,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let Some(row) = zset(view, self.db, &self.key)? else {
            return Ok(Reply::Array(Vec::new()));
        };
        let items = select(view, &row, &self.spec)?;
        Ok(scored_reply(items, self.spec.with_scores, self.resp3))
    }
}

/// `ZRANGESTORE dst src min max [BYSCORE | BYLEX] [REV] [LIMIT offset
/// count]`: replaces `dst` (whatever it held) with the range, deleting it
/// when the range is empty; replies with its size.
pub struct ZRangeStore {
    /// Selected database.
    db: u32,
    /// The destination key.
    dest: Bytes,
    /// The source key.
    src: Bytes,
    /// The range and options.
    spec: RangeSpec,
}

impl WriteCommand for ZRangeStore {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let dest = args.next()?;
        let (src, spec) = parse_range(args, Form::Auto, true)?;
        Ok(ZRangeStore {
            db: s.db,
            dest,
            src,
            spec,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let items = match zset(txn, self.db, &self.src)? {
            Some(row) => select(txn, &row, &self.spec)?,
            None => Vec::new(),
        };
        Ok(Reply::Int(txn.zset_store(self.db, &self.dest, &items)?))
    }
}

/// `ZREMRANGEBYRANK key start stop` (`BY` 0), `ZREMRANGEBYSCORE key min
/// max` (1), `ZREMRANGEBYLEX key min max` (2): the number removed.
pub struct ZRemRange<const BY: u8> {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The range.
    by: RangeBy,
}

/// `ZREMRANGEBYRANK key start stop`
pub type ZRemRangeByRank = ZRemRange<0>;
/// `ZREMRANGEBYSCORE key min max`
pub type ZRemRangeByScore = ZRemRange<1>;
/// `ZREMRANGEBYLEX key min max`
pub type ZRemRangeByLex = ZRemRange<2>;

impl<const BY: u8> WriteCommand for ZRemRange<BY> {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let key = args.next()?;
        let (min, max) = (args.next()?, args.next()?);
        let by = match BY {
            0 => RangeBy::Rank(
                parse_i64(&min).ok_or(CommandError::NotInteger)?,
                parse_i64(&max).ok_or(CommandError::NotInteger)?,
            ),
            1 => RangeBy::Score(parse_score_range(&min, &max)?),
            _ => RangeBy::Lex(parse_lex_range(&min, &max)?),
        };
        Ok(ZRemRange { db: s.db, key, by })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let mut slot = txn.open(self.db, &self.key, Kind::ZSet)?;
        let Some(row) = slot.row() else {
            return Ok(Reply::Int(0));
        };
        let spec = RangeSpec {
            by: self.by,
            rev: false,
            offset: 0,
            limit: -1,
            with_scores: false,
        };
        let items = select(txn, &row, &spec)?;
        let members: Vec<&[u8]> = items.iter().map(|(m, _)| m.as_slice()).collect();
        Ok(Reply::Int(txn.zset_remove(&mut slot, &members)?))
    }
}

/// A pop count as `getPositiveLongFromObjectOrReply` reads it: anything
/// but a non-negative integer is "out of range".
fn positive_count(arg: &[u8]) -> Result<i64, CommandError> {
    match parse_i64(arg) {
        Some(n) if n >= 0 => Ok(n),
        _ => Err(CommandError::Other(
            "value is out of range, must be positive".into(),
        )),
    }
}

/// `ZPOPMIN key [count]` (`MAX` false) and `ZPOPMAX key [count]`: a flat
/// member/score list, or in RESP3 with a count, pairs.
pub struct ZPop<const MAX: bool> {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The count, if given.
    count: Option<i64>,
    /// Speaking RESP3.
    resp3: bool,
}

/// `ZPOPMIN key [count]`
pub type ZPopMin = ZPop<false>;
/// `ZPOPMAX key [count]`
pub type ZPopMax = ZPop<true>;

impl<const MAX: bool> WriteCommand for ZPop<MAX> {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let key = args.next()?;
        if args.remaining() > 1 {
            return Err(CommandError::Syntax);
        }
        let count = args.next_opt().map(|c| positive_count(&c)).transpose()?;
        Ok(ZPop {
            db: s.db,
            key,
            count,
            resp3: s.resp3,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let mut slot = txn.open(self.db, &self.key, Kind::ZSet)?;
        let popped = txn.zset_pop(&mut slot, !MAX, self.count.unwrap_or(1))?;
        let nested = self.resp3 && self.count.is_some();
        let mut out = Vec::new();
        for (member, score) in popped {
            let (m, s) = (Reply::bulk(member), Reply::Double(score));
            if nested {
                out.push(Reply::Array(vec![m, s]));
            } else {
                out.extend([m, s]);
            }
        }
        Ok(Reply::Array(out))
    }
}

/// `ZMPOP numkeys key [key ...] MIN | MAX [COUNT count]`: pops from the
/// first key that exists; `[key, [[member, score], ...]]`, or a null array
/// when none does.
pub struct ZMPop {
    /// Selected database.
    db: u32,
    /// The keys, in order.
    keys: Vec<Bytes>,
    /// MIN (true) or MAX.
    min: bool,
    /// How many to pop at most.
    count: i64,
}

impl WriteCommand for ZMPop {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let numkeys_error = || CommandError::Other("numkeys should be greater than 0".into());
        let numkeys = parse_i64(&args.next()?).ok_or_else(numkeys_error)?;
        if numkeys < 1 {
            return Err(numkeys_error());
        }
        if numkeys as u64 >= args.remaining() as u64 {
            return Err(CommandError::Syntax);
        }
        let keys: Vec<Bytes> = (0..numkeys)
            .map(|_| args.next())
            .collect::<Result<_, _>>()?;
        let min = match args.next_upper()?.as_str() {
            "MIN" => true,
            "MAX" => false,
            _ => return Err(CommandError::Syntax),
        };
        let mut count = None;
        while let Some(opt) = args.next_opt() {
            if count.is_none() && upper(&opt) == "COUNT" && args.remaining() > 0 {
                let count_error = || CommandError::Other("count should be greater than 0".into());
                let n = parse_i64(&args.next()?).ok_or_else(count_error)?;
                if n < 1 {
                    return Err(count_error());
                }
                count = Some(n);
            } else {
                return Err(CommandError::Syntax);
            }
        }
        Ok(ZMPop {
            db: s.db,
            keys,
            min,
            count: count.unwrap_or(1),
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        Ok(self.pop_first(txn)?.unwrap_or(Reply::NilArray))
    }
}

impl ZMPop {
    /// Pops from the first key that exists (Redis stops there, checking
    /// its type only); `None` when none does.
    fn pop_first(&self, txn: &mut Txn<'_, '_>) -> Result<Option<Reply>, CommandError> {
        for key in &self.keys {
            let Some(entry) = txn.entry(self.db, key)? else {
                continue;
            };
            if entry.kind != Kind::ZSet {
                return Err(EngineError::WrongType.into());
            }
            return self.pop_from(txn, key);
        }
        Ok(None)
    }

    /// `[key, [[member, score], ...]]` from `key`, a sorted set.
    fn pop_from(&self, txn: &mut Txn<'_, '_>, key: &[u8]) -> Result<Option<Reply>, CommandError> {
        let mut slot = txn.open(self.db, key, Kind::ZSet)?;
        let popped = txn.zset_pop(&mut slot, self.min, self.count)?;
        if popped.is_empty() {
            return Ok(None);
        }
        Ok(Some(Reply::Array(vec![
            Reply::bulk(key.to_vec()),
            scored_reply(popped, true, true),
        ])))
    }
}

/// Whether `key` holds a sorted set now (a blocked pop is served only
/// from one; a key of another type leaves the client blocked, as in
/// redis-server 7.0).
fn holds_zset(txn: &Txn<'_, '_>, db: u32, key: &[u8]) -> Result<bool, CommandError> {
    match txn.live(db, key, Kind::ZSet) {
        Ok(row) => Ok(row.is_some()),
        Err(EngineError::WrongType) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// `BZPOPMIN key [key ...] timeout` (`MAX` false) and `BZPOPMAX key [key
/// ...] timeout`: `[key, member, score]` from the first non-empty sorted
/// set, blocking until there is one (see `crate::blocking`).
pub struct BZPop<const MAX: bool> {
    /// Selected database.
    db: u32,
    /// The keys, tried in order.
    keys: Vec<Bytes>,
    /// How long to wait (`None`: forever).
    timeout: Option<std::time::Duration>,
}

impl<const MAX: bool> BZPop<MAX> {
    fn pop_from(&self, txn: &mut Txn<'_, '_>, key: &[u8]) -> Result<Option<Reply>, CommandError> {
        let mut slot = txn.open(self.db, key, Kind::ZSet)?;
        let popped = txn.zset_pop(&mut slot, !MAX, 1)?;
        Ok(popped.into_iter().next().map(|(member, score)| {
            Reply::Array(vec![
                Reply::bulk(key.to_vec()),
                Reply::bulk(member),
                Reply::Double(score),
            ])
        }))
    }
}

impl<const MAX: bool> BlockingCommand for BZPop<MAX> {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let mut keys = args.rest();
        let timeout = keys.pop().ok_or(CommandError::Syntax)?;
        Ok(BZPop {
            db: s.db,
            keys,
            timeout: parse_timeout(&timeout)?,
        })
    }
}

impl<const MAX: bool> Blocker for BZPop<MAX> {
    fn keys(&self) -> Vec<(u32, Bytes)> {
        self.keys.iter().map(|k| (self.db, k.clone())).collect()
    }
    fn timeout(&self) -> Option<std::time::Duration> {
        self.timeout
    }
    fn try_pop(
        &self,
        txn: &mut Txn<'_, '_>,
        ready: Option<(u32, &[u8])>,
    ) -> Result<Option<Reply>, CommandError> {
        if let Some((_, key)) = ready {
            if !holds_zset(txn, self.db, key)? {
                return Ok(None);
            }
            return self.pop_from(txn, key);
        }
        for key in &self.keys {
            // WRONGTYPE on the first key of another type, as in Redis.
            if txn.live(self.db, key, Kind::ZSet)?.is_some() {
                return self.pop_from(txn, key);
            }
        }
        Ok(None)
    }
}

/// `BZMPOP timeout numkeys key [key ...] MIN | MAX [COUNT count]`
pub struct BZMPop {
    /// The pop.
    pop: ZMPop,
    /// How long to wait (`None`: forever).
    timeout: Option<std::time::Duration>,
}

impl BlockingCommand for BZMPop {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        // Redis reads the timeout after the keys and options.
        let timeout = args.next()?;
        let pop = <ZMPop as WriteCommand>::parse(args, s)?;
        Ok(BZMPop {
            pop,
            timeout: parse_timeout(&timeout)?,
        })
    }
}

impl Blocker for BZMPop {
    fn keys(&self) -> Vec<(u32, Bytes)> {
        self.pop
            .keys
            .iter()
            .map(|k| (self.pop.db, k.clone()))
            .collect()
    }
    fn timeout(&self) -> Option<std::time::Duration> {
        self.timeout
    }
    fn try_pop(
        &self,
        txn: &mut Txn<'_, '_>,
        ready: Option<(u32, &[u8])>,
    ) -> Result<Option<Reply>, CommandError> {
        match ready {
            Some((_, key)) if holds_zset(txn, self.pop.db, key)? => self.pop.pop_from(txn, key),
            Some(_) => Ok(None),
            None => self.pop.pop_first(txn),
        }
    }
}

/// `ZRANDMEMBER key [count [WITHSCORES]]`
pub struct ZRandMember {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The count, if given: negative allows repeats.
    count: Option<i64>,
    /// WITHSCORES.
    with_scores: bool,
    /// Speaking RESP3: pairs are nested arrays.
    resp3: bool,
}

impl ReadCommand for ZRandMember {
    const MULTI_STATEMENT: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let key = args.next()?;
        let (count, with_scores) = parse_random_count(args, "WITHSCORES")?;
        Ok(ZRandMember {
            db: s.db,
            key,
            count,
            with_scores,
            resp3: s.resp3,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let row = zset(view, self.db, &self.key)?;
        let Some(count) = self.count else {
            let Some(row) = row else {
                return Ok(Reply::Nil);
            };
            let pick = rand::random_range(0..row.count.max(1));
            let member = view.zset_by_rank(&row, pick, pick, false)?.pop();
            return Ok(Reply::bulk_or_nil(member.map(|(m, _)| m)));
        };
        let Some(row) = row else {
            return Ok(Reply::Array(Vec::new()));
        };
        // A count at or above the size is the whole set, highest score
        // first (redis-server's set iterator runs from the tail);
        // otherwise a uniform pick.
        let mut all = view.zset_all(row.id)?;
        all.reverse();
        let picked: Vec<Scored> = sample(&all, count).into_iter().cloned().collect();
        Ok(scored_reply(picked, self.with_scores, self.resp3))
    }
}

/// `ZSCAN key cursor [MATCH pattern] [COUNT count]`
///
/// A set redis-server would keep as a listpack comes back whole, in order,
/// with cursor 0, as redis-server answers; a bigger one a page at a time in
/// member order. Scores are bulk strings in both protocols, as in Redis.
pub struct ZScan {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// Where to go on from.
    cursor: u64,
    /// The options, or the error they make (answered only if the key
    /// exists, as in Redis).
    options: Result<ScanOptions, CommandError>,
}

impl ReadCommand for ZScan {
    const MULTI_STATEMENT: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let key = args.next()?;
        let cursor = parse_cursor(&args.next()?)?;
        Ok(ZScan {
            db: s.db,
            key,
            cursor,
            options: ScanOptions::parse(args, false),
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let Some(row) = zset(view, self.db, &self.key)? else {
            return Ok(scan_reply(0, Vec::new()));
        };
        let options = self.options?;
        let (items, cursor) = view.zset_scan(&row, self.cursor, options.count)?;
        let mut out = Vec::new();
        for (member, score) in items {
            if options.matches(&member) {
                out.push(Reply::bulk(member));
                out.push(Reply::bulk(format_double(score)));
            }
        }
        Ok(scan_reply(cursor, out))
    }
}

/// Which algebra a command computes.
#[derive(Clone, Copy, PartialEq)]
enum Op {
    Union,
    Inter,
    Diff,
}

fn op_of(code: u8) -> Op {
    match code {
        0 => Op::Union,
        1 => Op::Inter,
        _ => Op::Diff,
    }
}

/// AGGREGATE.
#[derive(Clone, Copy, PartialEq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

/// The options after the keys.
struct AlgebraOptions {
    /// WEIGHTS, one per key (1 each by default).
    weights: Vec<f64>,
    /// AGGREGATE.
    aggregate: Aggregate,
    /// WITHSCORES (not for the STORE forms).
    with_scores: bool,
    /// ZINTERCARD's LIMIT (0: none).
    limit: u64,
}

/// An algebra command's keys and options. The options' errors are kept
/// (`Err`), to be answered after the keys' types are checked, as Redis
/// orders them.
struct Algebra {
    keys: Vec<Bytes>,
    options: Result<AlgebraOptions, CommandError>,
}

/// Reads `numkeys key [key ...] [options]` for `name` (its error texts
/// name the command): `store` forms take no WITHSCORES, `card`
/// (ZINTERCARD) only LIMIT, ZDIFF neither WEIGHTS nor AGGREGATE.
fn parse_algebra(
    args: &mut Args,
    op: Op,
    name: &str,
    store: bool,
    card: bool,
) -> Result<Algebra, CommandError> {
    let numkeys = parse_i64(&args.next()?).ok_or(CommandError::NotInteger)?;
    if numkeys < 1 {
        return Err(CommandError::Other(format!(
            "at least 1 input key is needed for '{name}' command"
        )));
    }
    if numkeys as u64 > args.remaining() as u64 {
        return Err(CommandError::Syntax);
    }
    let n = numkeys as usize;
    let keys: Vec<Bytes> = (0..n).map(|_| args.next()).collect::<Result<_, _>>()?;
    let rest = args.rest();
    let options = (|| {
        let mut o = AlgebraOptions {
            weights: vec![1.0; n],
            aggregate: Aggregate::Sum,
            with_scores: false,
            limit: 0,
        };
        let mut j = 0;
        while let Some(opt) = rest.get(j) {
            let remaining = rest.len() - j;
            let word = upper(opt);
            if op != Op::Diff && !card && remaining > n && word == "WEIGHTS" {
                for (i, w) in rest[j + 1..j + 1 + n].iter().enumerate() {
                    o.weights[i] = parse_float(w)
                        .ok_or_else(|| CommandError::Other("weight value is not a float".into()))?;
                }
                j += 1 + n;
            } else if op != Op::Diff && !card && remaining >= 2 && word == "AGGREGATE" {
                o.aggregate = match upper(&rest[j + 1]).as_str() {
                    "SUM" => Aggregate::Sum,
                    "MIN" => Aggregate::Min,
                    "MAX" => Aggregate::Max,
                    _ => return Err(CommandError::Syntax),
                };
                j += 2;
            } else if !store && !card && word == "WITHSCORES" {
                o.with_scores = true;
                j += 1;
            } else if card && remaining >= 2 && word == "LIMIT" {
                let negative = || CommandError::Other("LIMIT can't be negative".into());
                let limit = parse_i64(&rest[j + 1]).ok_or_else(negative)?;
                if limit < 0 {
                    return Err(negative());
                }
                o.limit = limit as u64;
                j += 2;
            } else {
                return Err(CommandError::Syntax);
            }
        }
        Ok(o)
    })();
    Ok(Algebra { keys, options })
}

/// Redis's `zunionInterAggregate`: a sum of `+inf` and `-inf` is 0.
fn aggregate(target: &mut f64, value: f64, how: Aggregate) {
    match how {
        Aggregate::Sum => {
            *target += value;
            if target.is_nan() {
                *target = 0.0;
            }
        }
        Aggregate::Min => {
            if value < *target {
                *target = value;
            }
        }
        Aggregate::Max => {
            if value > *target {
                *target = value;
            }
        }
    }
}

/// One input of the algebra: its members with scores, `None` for a
/// missing key.
type Source = Option<Vec<Scored>>;

/// Loads every key (WRONGTYPE for the first key of another type, before
/// any option error, as in Redis), then the options.
fn load(
    view: &View<'_, '_>,
    db: u32,
    algebra: Algebra,
) -> Result<(Vec<Source>, AlgebraOptions), CommandError> {
    let sources = algebra
        .keys
        .iter()
        .map(|k| view.zset_source(db, k))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((sources, algebra.options?))
}

/// The result of `op`, in order, computed in Redis's order of operations
/// (inputs from the smallest, in a stable sort, so sums of the same scores
/// round the same way); `limit` stops an intersection early (ZINTERCARD).
fn compute(op: Op, sources: Vec<Source>, o: &AlgebraOptions, limit: u64) -> Vec<Scored> {
    let len = |s: &Source| s.as_ref().map_or(0, Vec::len);
    let mut result: Vec<Scored> = match op {
        Op::Inter => {
            let mut order: Vec<usize> = (0..sources.len()).collect();
            order.sort_by_key(|&i| len(&sources[i]));
            let lookups: Vec<HashMap<&[u8], f64>> = sources
                .iter()
                .map(|s| {
                    s.iter()
                        .flatten()
                        .map(|(m, sc)| (m.as_slice(), *sc))
                        .collect()
                })
                .collect();
            let mut out = Vec::new();
            let first = order[0];
            for (member, score) in sources[first].iter().flatten() {
                let mut total = o.weights[first] * score;
                if total.is_nan() {
                    total = 0.0;
                }
                let everywhere = order[1..].iter().all(|&j| {
                    let Some(s) = lookups[j].get(member.as_slice()) else {
                        return false;
                    };
                    aggregate(&mut total, s * o.weights[j], o.aggregate);
                    true
                });
                if everywhere {
                    out.push((member.clone(), total));
                    if limit > 0 && out.len() as u64 >= limit {
                        break;
                    }
                }
            }
            out
        }
        Op::Union => {
            let mut order: Vec<usize> = (0..sources.len()).collect();
            order.sort_by_key(|&i| len(&sources[i]));
            let mut scores: HashMap<&[u8], f64> = HashMap::new();
            for &i in &order {
                for (member, score) in sources[i].iter().flatten() {
                    let mut value = o.weights[i] * score;
                    if value.is_nan() {
                        value = 0.0;
                    }
                    scores
                        .entry(member.as_slice())
                        .and_modify(|t| aggregate(t, value, o.aggregate))
                        .or_insert(value);
                }
            }
            scores.into_iter().map(|(m, s)| (m.to_vec(), s)).collect()
        }
        Op::Diff => {
            let others: HashSet<&[u8]> = sources[1..]
                .iter()
                .flatten()
                .flatten()
                .map(|(m, _)| m.as_slice())
                .collect();
            sources[0]
                .iter()
                .flatten()
                .filter(|(m, _)| !others.contains(m.as_slice()))
                .cloned()
                .collect()
        }
    };
    // Not `total_cmp`, which puts -0 before 0: Redis holds them equal, so
    // members with either zero are ordered by member alone.
    result.sort_by(|a, b| {
        a.1.partial_cmp(&b.1)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.0.cmp(&b.0))
    });
    result
}

/// `ZUNION numkeys key [key ...] [WEIGHTS weight ...] [AGGREGATE SUM | MIN
/// | MAX] [WITHSCORES]` (`OP` 0), `ZINTER ...` (1), `ZDIFF numkeys key
/// [key ...] [WITHSCORES]` (2). Sets count as sorted sets with every score
/// 1.
pub struct ZAlgebra<const OP: u8> {
    /// Selected database.
    db: u32,
    /// Keys and options.
    algebra: Algebra,
    /// Speaking RESP3: member/score pairs are nested arrays.
    resp3: bool,
}

/// `ZUNION numkeys key [key ...] [WEIGHTS weight ...] [AGGREGATE SUM | MIN | MAX] [WITHSCORES]`
pub type ZUnion = ZAlgebra<0>;
/// `ZINTER numkeys key [key ...] [WEIGHTS weight ...] [AGGREGATE SUM | MIN | MAX] [WITHSCORES]`
pub type ZInter = ZAlgebra<1>;
/// `ZDIFF numkeys key [key ...] [WITHSCORES]`
pub type ZDiff = ZAlgebra<2>;

fn algebra_name(op: Op, store: bool) -> &'static str {
    match (op, store) {
        (Op::Union, false) => "zunion",
        (Op::Inter, false) => "zinter",
        (Op::Diff, false) => "zdiff",
        (Op::Union, true) => "zunionstore",
        (Op::Inter, true) => "zinterstore",
        (Op::Diff, true) => "zdiffstore",
    }
}

impl<const OP: u8> ReadCommand for ZAlgebra<OP> {
    const MULTI_STATEMENT: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let op = op_of(OP);
        Ok(ZAlgebra {
            db: s.db,
            algebra: parse_algebra(args, op, algebra_name(op, false), false, false)?,
            resp3: s.resp3,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let (sources, options) = load(view, self.db, self.algebra)?;
        let result = compute(op_of(OP), sources, &options, 0);
        Ok(scored_reply(result, options.with_scores, self.resp3))
    }
}

/// `ZUNIONSTORE destination numkeys key [key ...] [WEIGHTS weight ...]
/// [AGGREGATE SUM | MIN | MAX]` and the ZINTER and ZDIFF forms: replaces
/// the destination with the result (deleting it when the result is empty)
/// and replies with its size.
pub struct ZAlgebraStore<const OP: u8> {
    /// Selected database.
    db: u32,
    /// The destination key.
    dest: Bytes,
    /// Keys and options.
    algebra: Algebra,
}

/// `ZUNIONSTORE destination numkeys key [key ...] [WEIGHTS weight ...] [AGGREGATE SUM | MIN | MAX]`
pub type ZUnionStore = ZAlgebraStore<0>;
/// `ZINTERSTORE destination numkeys key [key ...] [WEIGHTS weight ...] [AGGREGATE SUM | MIN | MAX]`
pub type ZInterStore = ZAlgebraStore<1>;
/// `ZDIFFSTORE destination numkeys key [key ...]`
pub type ZDiffStore = ZAlgebraStore<2>;

impl<const OP: u8> WriteCommand for ZAlgebraStore<OP> {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let op = op_of(OP);
        let dest = args.next()?;
        Ok(ZAlgebraStore {
            db: s.db,
            dest,
            algebra: parse_algebra(args, op, algebra_name(op, true), true, false)?,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let (sources, options) = load(txn, self.db, self.algebra)?;
        let result = compute(op_of(OP), sources, &options, 0);
        Ok(Reply::Int(txn.zset_store(self.db, &self.dest, &result)?))
    }
}

/// `ZINTERCARD numkeys key [key ...] [LIMIT limit]`
pub struct ZInterCard {
    /// Selected database.
    db: u32,
    /// Keys and options.
    algebra: Algebra,
}

impl ReadCommand for ZInterCard {
    const MULTI_STATEMENT: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(ZInterCard {
            db: s.db,
            algebra: parse_algebra(args, Op::Inter, "zintercard", false, true)?,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let (sources, options) = load(view, self.db, self.algebra)?;
        let n = compute(Op::Inter, sources, &options, options.limit).len();
        Ok(Reply::Int(n as i64))
    }
}

/// This family's rows of the command table (see [`crate::command::TABLE`]).
#[rustfmt::skip]
pub(crate) fn commands() -> Vec<crate::command::Spec> {
    use crate::command::Spec;
    vec![
        Spec::write::<ZAdd>("zadd"),
        Spec::read::<ZCard>("zcard"),
        Spec::read::<ZCount>("zcount"),
        Spec::read::<ZDiff>("zdiff"),
        Spec::write::<ZDiffStore>("zdiffstore"),
        Spec::write::<ZIncrBy>("zincrby"),
        Spec::read::<ZInter>("zinter"),
        Spec::read::<ZInterCard>("zintercard"),
        Spec::write::<ZInterStore>("zinterstore"),
        Spec::read::<ZLexCount>("zlexcount"),
        Spec::blocking::<BZMPop>("bzmpop"),
        Spec::blocking::<BZPop<true>>("bzpopmax"),
        Spec::blocking::<BZPop<false>>("bzpopmin"),
        Spec::write::<ZMPop>("zmpop"),
        Spec::read::<ZMScore>("zmscore"),
        Spec::write::<ZPopMax>("zpopmax"),
        Spec::write::<ZPopMin>("zpopmin"),
        Spec::read::<ZRandMember>("zrandmember"),
        Spec::read::<ZRange>("zrange"),
        Spec::read::<ZRangeByLex>("zrangebylex"),
        Spec::read::<ZRangeByScore>("zrangebyscore"),
        Spec::write::<ZRangeStore>("zrangestore"),
        Spec::read::<ZRank>("zrank"),
        Spec::write::<ZRem>("zrem"),
        Spec::write::<ZRemRangeByLex>("zremrangebylex"),
        Spec::write::<ZRemRangeByRank>("zremrangebyrank"),
        Spec::write::<ZRemRangeByScore>("zremrangebyscore"),
        Spec::read::<ZRevRange>("zrevrange"),
        Spec::read::<ZRevRangeByLex>("zrevrangebylex"),
        Spec::read::<ZRevRangeByScore>("zrevrangebyscore"),
        Spec::read::<ZRevRank>("zrevrank"),
        Spec::read::<ZScan>("zscan"),
        Spec::read::<ZScore>("zscore"),
        Spec::read::<ZUnion>("zunion"),
        Spec::write::<ZUnionStore>("zunionstore"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_parse_as_strtod_reads_them() {
        assert_eq!(parse_float(b"1.5"), Some(1.5));
        assert_eq!(parse_float(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_float(b"+Infinity"), Some(f64::INFINITY));
        assert_eq!(parse_float(b"0x10"), Some(16.0));
        assert_eq!(parse_float(b"0x1p-2"), Some(0.25));
        assert_eq!(parse_float(b".5"), Some(0.5));
        assert_eq!(parse_float(b"5."), Some(5.0));
        assert_eq!(parse_float(b"1e5"), Some(1e5));
        assert_eq!(parse_float(b"nan"), None);
        assert_eq!(parse_float(b"1e400"), None);
        assert_eq!(parse_float(b"1e-400"), None);
        assert_eq!(parse_float(b" 1"), None);
        assert_eq!(parse_float(b"1 "), None);
        assert_eq!(parse_float(b""), None);
        assert_eq!(parse_float(b"1e"), None);
        assert_eq!(parse_float(b"abc"), None);
        assert_eq!(parse_score_end(b"(1"), Some((1.0, true)));
        assert_eq!(parse_score_end(b""), Some((0.0, false)));
        assert_eq!(parse_score_end(b"("), Some((0.0, true)));
        assert_eq!(parse_score_end(b" 1"), Some((1.0, false)));
        assert_eq!(parse_score_end(b"1e400"), Some((f64::INFINITY, false)));
        assert_eq!(parse_score_end(b"nan"), None);
        assert_eq!(parse_score_end(b"1 "), None);
        assert_eq!(parse_score_end(b"x"), None);
    }

    #[test]
    fn ranks_clamp_as_redis_does() {
        assert_eq!(clamp_ranks(0, -1, 3), Some((0, 2)));
        assert_eq!(clamp_ranks(-100, 100, 3), Some((0, 2)));
        assert_eq!(clamp_ranks(2, 1, 3), None);
        assert_eq!(clamp_ranks(3, 5, 3), None);
        assert_eq!(clamp_ranks(i64::MIN, i64::MAX, 3), Some((0, 2)));
    }
}

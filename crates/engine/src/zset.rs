//! Sorted sets: one row per member in `zsets`, keyed by `(key id, member)`,
//! with the index `zsets_by_score (id, score, member)` giving the order
//! Redis keeps (by score, then by member bytes, as `memcmp` compares them).
//!
//! ZSCORE, ZADD and ZREM find a member by the primary key; ZRANGE BYSCORE
//! and ZCOUNT's ends are index seeks; ZRANGEBYLEX on a set whose members
//! all have one score (the only case Redis defines) is a seek on the
//! primary key, whose member order is then the set's order. ZCARD reads the
//! count kept in the key row. Writes open the key through the gate in
//! `keyspace.rs`, which deletes the key with its last member.
//!
//! ## Ranks
//!
//! A b-tree knows where a member is, not how many come before it: a
//! `count(*)` over the score index up to a member is O(rank), a full scan
//! for a member near the end of a million. So a set bigger than
//! [`BLOCKS_FROM`] members also keeps **rank blocks** in `zblocks`: the
//! set cut, in score order, into runs of about [`BLOCK`] members, each
//! row holding the run's lower boundary `(score, member)` and how many
//! members lie between it and the next boundary. The first block's
//! boundary is `(-inf, "")`, below every member, so every member falls in
//! exactly one block (the last boundary at or below it). A rank is then
//! the sum of the counts of the blocks before the member's (one index
//! range over at most n/[`BLOCK`] x 4 small rows) plus a `count(*)` from
//! that block's boundary to the member (at most 2 x [`BLOCK`] index
//! entries): ZRANK of a million-member set reads about a thousand block
//! rows and a thousand index entries, never the set. ZCOUNT, ZLEXCOUNT and
//! a rank range's start (`ZRANGE key 900000 900010`) use the same walk.
//!
//! The price is on writes to big sets: each new or removed member, or
//! changed score, finds its block (one seek in a small table) and rewrites
//! its count (one more page), and a block that outgrows 2 x [`BLOCK`] is
//! split at its middle member (an O(B) index walk, once per ~B inserts);
//! one that shrinks under [`BLOCK`]/4 is folded into the block before it.
//! Sets of at most [`BLOCKS_FROM`] members have no blocks and pay nothing
//! (a rank there counts at most that many index entries), so the common
//! one-member ZADD into a small set writes what an SADD writes: the member
//! row, its index entry and the key row's count. The blocks are built in
//! one pass when a set first grows past [`BLOCKS_FROM`], and flagged in the
//! key row ([`ZBLOCKS`]); they stay (updated) until the key is deleted,
//! and they are copied, freed and flushed with the members (`elements()`
//! in `keyspace.rs`). A B-tree with counts in its inner nodes would make
//! every rank O(log n), but SQLite's b-trees do not keep them, and a
//! second level of blocks would only pay above tens of millions of
//! members.
//!
//! Scores are stored as SQLite REALs (IEEE doubles, exact); `-0` is stored
//! as `0`, as redis-server's compact encoding does, and NaN never is.

use std::collections::HashMap;

use rusqlite::{params, OptionalExtension};

use crate::error::{EngineError, Result};
use crate::keyspace::{page, scan_start, KeyRow, Slot};
use crate::schema::{Kind, ENC_BIG, ZBLOCKS};
use crate::txn::Txn;
use crate::view::View;

/// The members a rank block aims at (see the module docs).
pub const BLOCK: i64 = 1024;
/// Sets with more members than this keep rank blocks.
pub const BLOCKS_FROM: i64 = 2 * BLOCK;
/// A block with more members is split in two.
const SPLIT_ABOVE: i64 = 2 * BLOCK;
/// A block (but the first) with fewer members joins the one before it.
const MERGE_BELOW: i64 = BLOCK / 4;

/// A member and its score.
pub type Scored = (Vec<u8>, f64);

/// A score range with both ends inclusive: an exclusive end has already
/// been moved to the next double inward, so one index range serves all
/// four forms. Empty when `min > max` (or NaN, for ranges nothing meets).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScoreRange {
    /// The lowest score in the range.
    pub min: f64,
    /// The highest score in the range.
    pub max: f64,
}

impl ScoreRange {
    /// The range from `min` to `max`, each end exclusive if flagged, as
    /// Redis's `zslParseRange` reads `(1 5`.
    pub fn new(min: f64, min_exclusive: bool, max: f64, max_exclusive: bool) -> ScoreRange {
        // Nothing lies above +inf or below -inf.
        let min = match (min_exclusive, min) {
            (true, m) if m == f64::INFINITY => f64::NAN,
            (true, m) => m.next_up(),
            (false, m) => m,
        };
        let max = match (max_exclusive, max) {
            (true, m) if m == f64::NEG_INFINITY => f64::NAN,
            (true, m) => m.next_down(),
            (false, m) => m,
        };
        ScoreRange { min, max }
    }

    /// Whether no score lies in the range.
    pub fn is_empty(&self) -> bool {
        // NaN ends compare as nothing: empty too.
        !matches!(
            self.min.partial_cmp(&self.max),
            Some(std::cmp::Ordering::Less | std::cmp::Ordering::Equal)
        )
    }

    /// Whether `score` lies in the range.
    pub fn contains(&self, score: f64) -> bool {
        score >= self.min && score <= self.max
    }
}

/// One end of a lexicographic range (`-`, `+`, `[member`, `(member`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LexBound {
    /// `-`: below every member.
    Min,
    /// `+`: above every member.
    Max,
    /// `[member`: the member itself is in the range.
    Inclusive(Vec<u8>),
    /// `(member`: the member itself is not.
    Exclusive(Vec<u8>),
}

/// A lexicographic range, as ZRANGEBYLEX reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LexRange {
    /// The lower end.
    pub min: LexBound,
    /// The upper end.
    pub max: LexBound,
}

impl LexBound {
    fn exclusive(&self) -> bool {
        !matches!(self, LexBound::Inclusive(_))
    }
}

impl LexRange {
    /// Whether `member` is at or above the lower end (`zslLexValueGteMin`).
    pub fn above_min(&self, member: &[u8]) -> bool {
        match &self.min {
            LexBound::Min => true,
            LexBound::Max => false,
            LexBound::Inclusive(m) => member >= m.as_slice(),
            LexBound::Exclusive(m) => member > m.as_slice(),
        }
    }

    /// Whether `member` is at or below the upper end (`zslLexValueLteMax`).
    pub fn below_max(&self, member: &[u8]) -> bool {
        match &self.max {
            LexBound::Min => false,
            LexBound::Max => true,
            LexBound::Inclusive(m) => member <= m.as_slice(),
            LexBound::Exclusive(m) => member < m.as_slice(),
        }
    }

    /// Whether the range is empty whatever the set holds (Redis compares the
    /// two ends first, `-` and `+` counting as exclusive).
    pub fn is_empty(&self) -> bool {
        use std::cmp::Ordering::*;
        use LexBound::*;
        let order = match (&self.min, &self.max) {
            (Min, Min) | (Max, Max) => Equal,
            (Min, _) | (_, Max) => Less,
            (Max, _) | (_, Min) => Greater,
            (Inclusive(a) | Exclusive(a), Inclusive(b) | Exclusive(b)) => a.cmp(b),
        };
        order == Greater || (order == Equal && (self.min.exclusive() || self.max.exclusive()))
    }

    /// The range as a half-open byte interval `[lo, hi)` (`hi` `None`: no
    /// upper end), for a primary-key seek. The byte string right after `m`
    /// in `memcmp` order is `m` followed by a zero byte.
    fn bytes(&self) -> (Vec<u8>, Option<Vec<u8>>) {
        let after = |m: &[u8]| {
            let mut v = m.to_vec();
            v.push(0);
            v
        };
        let lo = match &self.min {
            LexBound::Min | LexBound::Max => Vec::new(),
            LexBound::Inclusive(m) => m.clone(),
            LexBound::Exclusive(m) => after(m),
        };
        let hi = match &self.max {
            LexBound::Max => None,
            LexBound::Min => Some(Vec::new()),
            LexBound::Inclusive(m) => Some(after(m)),
            LexBound::Exclusive(m) => Some(m.clone()),
        };
        (lo, hi)
    }
}

/// What ZADD was told (ZINCRBY is ZADD with `incr`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AddFlags {
    /// NX: only add new members.
    pub nx: bool,
    /// XX: only update existing members.
    pub xx: bool,
    /// GT: only update to a greater score.
    pub gt: bool,
    /// LT: only update to a lower score.
    pub lt: bool,
    /// INCR: add the score to the current one.
    pub incr: bool,
}

/// What a ZADD did.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Added {
    /// New members.
    pub added: i64,
    /// Existing members whose score changed.
    pub updated: i64,
    /// Members not skipped by NX, XX, GT or LT.
    pub processed: i64,
    /// The score of the last member processed (ZADD INCR's reply).
    pub score: f64,
}

/// What ZADD decided for one member, before writing anything.
enum Change<'m> {
    Insert(&'m [u8], f64),
    Update(&'m [u8], f64, f64),
}

/// `-0` stored as `0`, as redis-server's listpack does.
pub(crate) fn canonical(score: f64) -> f64 {
    score + 0.0
}

fn scored(r: &rusqlite::Row<'_>) -> rusqlite::Result<Scored> {
    Ok((r.get(0)?, r.get(1)?))
}

impl View<'_, '_> {
    /// A member's score in the sorted set stored under `id`.
    pub fn zset_score(&self, id: i64, member: &[u8]) -> Result<Option<f64>> {
        Ok(self
            .stmt("SELECT score FROM zsets WHERE id = ?1 AND member = ?2")?
            .query_row(params![id, member], |r| r.get(0))
            .optional()?)
    }

    /// Every member of the set under `id`, in order.
    pub fn zset_all(&self, id: i64) -> Result<Vec<Scored>> {
        let mut stmt =
            self.stmt("SELECT member, score FROM zsets WHERE id = ?1 ORDER BY score, member")?;
        let rows = stmt.query_map([id], scored)?;
        Ok(rows.collect::<std::result::Result<_, _>>()?)
    }

    /// The members of the live key as an input of ZUNION and friends: a
    /// sorted set's with their scores, a set's with score 1 (in member
    /// order), `None` for a missing key, WRONGTYPE for any other type.
    pub fn zset_source(&self, db: u32, key: &[u8]) -> Result<Option<Vec<Scored>>> {
        let Some(entry) = self.entry(db, key)? else {
            return Ok(None);
        };
        match entry.kind {
            // Looked up once already, by `entry`.
            Kind::ZSet => match self.live_row(db, key, Kind::ZSet, false)? {
                Some(row) => Ok(Some(self.zset_all(row.id)?)),
                None => Ok(None),
            },
            Kind::Set => match self.live_row(db, key, Kind::Set, false)? {
                Some(row) => Ok(Some(
                    self.set_members(row.id)?
                        .into_iter()
                        .map(|m| (m, 1.0))
                        .collect(),
                )),
                None => Ok(None),
            },
            _ => Err(EngineError::WrongType),
        }
    }

    /// How many members of the set `row` come before the position
    /// `(score, member)` in the set's order (see the module docs for the
    /// blocks that make this O(n/B + B) on big sets).
    pub fn zset_rank_before(&self, row: &KeyRow, score: f64, member: &[u8]) -> Result<i64> {
        if row.flags & ZBLOCKS == 0 {
            return Ok(self
                .stmt("SELECT count(*) FROM zsets WHERE id = ?1 AND (score, member) < (?2, ?3)")?
                .query_row(params![row.id, score, member], |r| r.get(0))?);
        }
        let (lo_score, lo_member, _) = self.zset_block_of(row.id, score, member)?;
        let before: i64 = self
            .stmt(
                "SELECT coalesce(sum(count), 0) FROM zblocks
                 WHERE id = ?1 AND (score, member) < (?2, ?3)",
            )?
            .query_row(params![row.id, lo_score, lo_member], |r| r.get(0))?;
        let inside: i64 = self
            .stmt(
                "SELECT count(*) FROM zsets
                 WHERE id = ?1 AND (score, member) >= (?2, ?3) AND (score, member) < (?4, ?5)",
            )?
            .query_row(params![row.id, lo_score, lo_member, score, member], |r| {
                r.get(0)
            })?;
        Ok(before + inside)
    }

    /// The block holding the position `(score, member)`: its boundary and
    /// count. Every position has one, the first block starting at
    /// `(-inf, "")`.
    fn zset_block_of(&self, id: i64, score: f64, member: &[u8]) -> Result<(f64, Vec<u8>, i64)> {
        Ok(self
            .stmt(
                "SELECT score, member, count FROM zblocks
                 WHERE id = ?1 AND (score, member) <= (?2, ?3)
                 ORDER BY score DESC, member DESC LIMIT 1",
            )?
            .query_row(params![id, score, member], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?)
    }

    /// A member's rank (0-based, in score order) and score (ZRANK).
    pub fn zset_rank(&self, row: &KeyRow, member: &[u8]) -> Result<Option<(i64, f64)>> {
        let Some(score) = self.zset_score(row.id, member)? else {
            return Ok(None);
        };
        Ok(Some((self.zset_rank_before(row, score, member)?, score)))
    }

    /// How many members have a score in `range` (ZCOUNT): two ranks.
    pub fn zset_count(&self, row: &KeyRow, range: ScoreRange) -> Result<i64> {
        if range.is_empty() {
            return Ok(0);
        }
        let below = self.zset_rank_before(row, range.min, b"")?;
        let through = if range.max == f64::INFINITY {
            row.count
        } else {
            self.zset_rank_before(row, range.max.next_up(), b"")?
        };
        Ok((through - below).max(0))
    }

    /// The members ranked `start..=stop` (already within the set), in
    /// order or, with `rev`, counted from the highest score down.
    pub fn zset_by_rank(
        &self,
        row: &KeyRow,
        start: i64,
        stop: i64,
        rev: bool,
    ) -> Result<Vec<Scored>> {
        if start > stop || start >= row.count {
            return Ok(Vec::new());
        }
        let (from, to) = if rev {
            (row.count - 1 - stop, row.count - 1 - start)
        } else {
            (start, stop)
        };
        let n = to - from + 1;
        let mut out = if row.flags & ZBLOCKS == 0 {
            let mut stmt = self.stmt(
                "SELECT member, score FROM zsets WHERE id = ?1
                 ORDER BY score, member LIMIT ?2 OFFSET ?3",
            )?;
            let rows = stmt.query_map(params![row.id, n, from], scored)?;
            rows.collect::<std::result::Result<Vec<_>, _>>()?
        } else {
            // Skip whole blocks, then count inside the one holding `from`.
            let (lo_score, lo_member, skipped) = {
                let mut stmt = self.stmt(
                    "SELECT score, member, count FROM zblocks WHERE id = ?1
                     ORDER BY score, member",
                )?;
                let mut rows = stmt.query([row.id])?;
                let mut at = (f64::NEG_INFINITY, Vec::new(), 0i64);
                let mut seen = 0i64;
                while let Some(r) = rows.next()? {
                    let count: i64 = r.get(2)?;
                    at = (r.get(0)?, r.get(1)?, seen);
                    if seen + count > from {
                        break;
                    }
                    seen += count;
                }
                at
            };
            let mut stmt = self.stmt(
                "SELECT member, score FROM zsets WHERE id = ?1 AND (score, member) >= (?2, ?3)
                 ORDER BY score, member LIMIT ?4 OFFSET ?5",
            )?;
            let rows = stmt.query_map(
                params![row.id, lo_score, lo_member, n, from - skipped],
                scored,
            )?;
            rows.collect::<std::result::Result<Vec<_>, _>>()?
        };
        if rev {
            out.reverse();
        }
        Ok(out)
    }

    /// The members with a score in `range`, in order (or reversed), after
    /// skipping `offset` of them, at most `limit` (negative: no limit), as
    /// ZRANGE BYSCORE ... LIMIT reads them. A negative offset selects
    /// nothing, as in Redis.
    pub fn zset_by_score(
        &self,
        id: i64,
        range: ScoreRange,
        rev: bool,
        offset: i64,
        limit: i64,
    ) -> Result<Vec<Scored>> {
        if range.is_empty() || offset < 0 || limit == 0 {
            return Ok(Vec::new());
        }
        let sql = if rev {
            "SELECT member, score FROM zsets WHERE id = ?1 AND score >= ?2 AND score <= ?3
             ORDER BY score DESC, member DESC LIMIT ?4 OFFSET ?5"
        } else {
            "SELECT member, score FROM zsets WHERE id = ?1 AND score >= ?2 AND score <= ?3
             ORDER BY score, member LIMIT ?4 OFFSET ?5"
        };
        let mut stmt = self.stmt(sql)?;
        let rows = stmt.query_map(
            params![id, range.min, range.max, limit.max(-1), offset],
            scored,
        )?;
        Ok(rows.collect::<std::result::Result<_, _>>()?)
    }

    /// Whether every member of the set under `id` has the same score: the
    /// case where lexicographic ranges are defined, and where member order
    /// is the set's order. Two index seeks.
    fn zset_one_score(&self, id: i64) -> Result<Option<f64>> {
        let low: Option<f64> = self
            .stmt("SELECT score FROM zsets WHERE id = ?1 ORDER BY score LIMIT 1")?
            .query_row([id], |r| r.get(0))
            .optional()?;
        let high: Option<f64> = self
            .stmt("SELECT score FROM zsets WHERE id = ?1 ORDER BY score DESC LIMIT 1")?
            .query_row([id], |r| r.get(0))
            .optional()?;
        Ok(match (low, high) {
            (Some(a), Some(b)) if a == b => Some(a),
            _ => None,
        })
    }

    /// The run of members a lexicographic range selects, in order (or
    /// reversed), after `offset`, at most `limit` (negative: all).
    ///
    /// When all scores are equal this is a primary-key seek. Otherwise
    /// Redis leaves the result undefined; what redis-server does for a set
    /// it keeps compact is walk the set in order from the first member
    /// above the minimum while members stay below the maximum (from the
    /// end, backwards, for REV), and that walk is reproduced here.
    pub fn zset_by_lex(
        &self,
        row: &KeyRow,
        range: &LexRange,
        rev: bool,
        offset: i64,
        limit: i64,
    ) -> Result<Vec<Scored>> {
        if range.is_empty() || offset < 0 || limit == 0 {
            return Ok(Vec::new());
        }
        if self.zset_one_score(row.id)?.is_some() {
            let (lo, hi) = range.bytes();
            let sql = match (hi.is_some(), rev) {
                (true, false) => {
                    "SELECT member, score FROM zsets WHERE id = ?1 AND member >= ?2 AND member < ?3
                     ORDER BY member LIMIT ?4 OFFSET ?5"
                }
                (true, true) => {
                    "SELECT member, score FROM zsets WHERE id = ?1 AND member >= ?2 AND member < ?3
                     ORDER BY member DESC LIMIT ?4 OFFSET ?5"
                }
                (false, false) => {
                    "SELECT member, score FROM zsets WHERE id = ?1 AND member >= ?2 AND ?3 IS NULL
                     ORDER BY member LIMIT ?4 OFFSET ?5"
                }
                (false, true) => {
                    "SELECT member, score FROM zsets WHERE id = ?1 AND member >= ?2 AND ?3 IS NULL
                     ORDER BY member DESC LIMIT ?4 OFFSET ?5"
                }
            };
            let mut stmt = self.stmt(sql)?;
            let rows = stmt.query_map(params![row.id, lo, hi, limit.max(-1), offset], scored)?;
            return Ok(rows.collect::<std::result::Result<_, _>>()?);
        }
        let run = lex_walk(self.zset_all(row.id)?, range, rev);
        let take = if limit < 0 {
            usize::MAX
        } else {
            limit as usize
        };
        Ok(run.into_iter().skip(offset as usize).take(take).collect())
    }

    /// How many members a lexicographic range selects (ZLEXCOUNT).
    pub fn zset_lex_count(&self, row: &KeyRow, range: &LexRange) -> Result<i64> {
        if range.is_empty() {
            return Ok(0);
        }
        if let Some(score) = self.zset_one_score(row.id)? {
            let (lo, hi) = range.bytes();
            let below = self.zset_rank_before(row, score, &lo)?;
            let through = match hi {
                Some(hi) => self.zset_rank_before(row, score, &hi)?,
                None => row.count,
            };
            return Ok((through - below).max(0));
        }
        Ok(lex_walk(self.zset_all(row.id)?, range, false).len() as i64)
    }

    /// One ZSCAN page of the set `row`: a compact set (as redis-server
    /// would keep it as a listpack) whole and in order with cursor 0, as
    /// redis-server answers; a big one about `count` members from `cursor`
    /// in member order (see `keyspace.rs` for the cursor).
    pub fn zset_scan(&self, row: &KeyRow, cursor: u64, count: usize) -> Result<(Vec<Scored>, u64)> {
        if row.flags & ENC_BIG == 0 {
            return Ok((self.zset_all(row.id)?, 0));
        }
        let mut stmt = self.stmt(
            "SELECT member, score FROM zsets WHERE id = ?1 AND member >= ?2 ORDER BY member",
        )?;
        let mut rows = stmt.query(params![row.id, scan_start(cursor)])?;
        page(&mut rows, count.max(1), |r| {
            Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, f64>(1)?))
        })
    }
}

/// The members a lexicographic range selects from `all` (in order), as
/// redis-server walks a listpack: forwards from the first member at or
/// above the minimum while members stay at or below the maximum, or for
/// REV backwards from the last member at or below the maximum while they
/// stay at or above the minimum; nothing unless the last member is above
/// the minimum and the first below the maximum.
fn lex_walk(all: Vec<Scored>, range: &LexRange, rev: bool) -> Vec<Scored> {
    let (Some(first), Some(last)) = (all.first(), all.last()) else {
        return Vec::new();
    };
    if !range.above_min(&last.0) || !range.below_max(&first.0) {
        return Vec::new();
    }
    if rev {
        let Some(start) = all.iter().rposition(|(m, _)| range.below_max(m)) else {
            return Vec::new();
        };
        let mut run = Vec::new();
        for item in all[..=start].iter().rev() {
            if !range.above_min(&item.0) {
                break;
            }
            run.push(item.clone());
        }
        run
    } else {
        let Some(start) = all.iter().position(|(m, _)| range.above_min(m)) else {
            return Vec::new();
        };
        all.into_iter()
            .skip(start)
            .take_while(|(m, _)| range.below_max(m))
            .collect()
    }
}

impl Txn<'_, '_> {
    /// Adds or updates members of an opened sorted set (ZADD, ZINCRBY),
    /// following Redis's rules for NX, XX, GT, LT and INCR. Everything is
    /// decided before the first write, so a NaN from INCR
    /// ([`EngineError::ScoreNaN`]) leaves the set untouched; nothing is
    /// written (no key created) when nothing changes.
    pub fn zset_add<M: AsRef<[u8]>>(
        &mut self,
        slot: &mut Slot<'_>,
        items: &[(f64, M)],
        flags: AddFlags,
    ) -> Result<Added> {
        let mut done = Added::default();
        // The scores as this command leaves them so far: a member named
        // twice sees its first change.
        let mut pending: HashMap<&[u8], Option<f64>> = HashMap::new();
        let mut changes = Vec::new();
        for (score, member) in items {
            let member = member.as_ref();
            let current = match pending.get(member) {
                Some(s) => *s,
                None => match slot.row() {
                    Some(row) => self.zset_score(row.id, member)?,
                    None => None,
                },
            };
            match current {
                Some(current) => {
                    if flags.nx {
                        continue;
                    }
                    let mut new = *score;
                    if flags.incr {
                        new += current;
                        if new.is_nan() {
                            return Err(EngineError::ScoreNaN);
                        }
                    }
                    if (flags.lt && new >= current) || (flags.gt && new <= current) {
                        continue;
                    }
                    let new = canonical(new);
                    done.processed += 1;
                    done.score = new;
                    if new != current {
                        done.updated += 1;
                        changes.push(Change::Update(member, current, new));
                        pending.insert(member, Some(new));
                    }
                }
                None if !flags.xx => {
                    // Redis replies with the score as given (`-0` too) and
                    // stores it canonically.
                    done.score = *score;
                    let new = canonical(*score);
                    done.processed += 1;
                    done.added += 1;
                    changes.push(Change::Insert(member, new));
                    pending.insert(member, Some(new));
                }
                None => {}
            }
        }
        if changes.is_empty() {
            return Ok(done);
        }
        let id = self.slot_id_deferred(slot)?;
        let blocks = slot.row().is_some_and(|r| r.flags & ZBLOCKS != 0);
        let mut bits = 0;
        for change in changes {
            match change {
                Change::Insert(member, score) => {
                    self.stmt("INSERT INTO zsets (id, member, score) VALUES (?1, ?2, ?3)")?
                        .execute(params![id, member, score])?;
                    if member.len() > self.thresholds.zset_value() {
                        bits |= ENC_BIG;
                    }
                    if blocks {
                        self.zset_block_adjust(id, score, member, 1)?;
                    }
                }
                Change::Update(member, old, new) => {
                    self.stmt("UPDATE zsets SET score = ?3 WHERE id = ?1 AND member = ?2")?
                        .execute(params![id, member, new])?;
                    if blocks {
                        self.zset_block_adjust(id, old, member, -1)?;
                        self.zset_block_adjust(id, new, member, 1)?;
                    }
                }
            }
        }
        let count = slot.len() + done.added;
        if count > self.thresholds.zset_entries() {
            bits |= ENC_BIG;
        }
        if !blocks && count > BLOCKS_FROM {
            self.zset_build_blocks(id)?;
            bits |= ZBLOCKS;
        }
        self.settle(slot, done.added, bits)?;
        Ok(done)
    }

    /// Removes members of an opened sorted set (ZREM, the pops, the range
    /// removals); the key goes with its last member. Returns how many were
    /// there.
    pub fn zset_remove<M: AsRef<[u8]>>(
        &mut self,
        slot: &mut Slot<'_>,
        members: &[M],
    ) -> Result<i64> {
        let Some(row) = slot.row() else {
            return Ok(0);
        };
        let blocks = row.flags & ZBLOCKS != 0;
        let mut removed = 0;
        for member in members {
            let member = member.as_ref();
            // Read, then deleted by its key: a `DELETE ... RETURNING`
            // would build a temporary b-tree for its one row.
            let Some(score) = self.zset_score(row.id, member)? else {
                continue;
            };
            self.stmt("DELETE FROM zsets WHERE id = ?1 AND member = ?2")?
                .execute(params![row.id, member])?;
            if removed == 0 {
                self.changing(slot.db, slot.key);
            }
            removed += 1;
            if blocks {
                self.zset_block_adjust(row.id, score, member, -1)?;
            }
        }
        if blocks && removed == row.count {
            self.stmt("DELETE FROM zblocks WHERE id = ?1")?
                .execute([row.id])?;
        }
        self.settle(slot, -removed, 0)?;
        Ok(removed)
    }

    /// Removes and returns up to `count` members with the lowest scores
    /// (`min`) or the highest, lowest (or highest) first: ZPOPMIN, ZPOPMAX
    /// and ZMPOP, and the blocking pops once they have a key to pop from.
    pub fn zset_pop(&mut self, slot: &mut Slot<'_>, min: bool, count: i64) -> Result<Vec<Scored>> {
        let Some(row) = slot.row() else {
            return Ok(Vec::new());
        };
        if count <= 0 {
            return Ok(Vec::new());
        }
        let popped = if min {
            self.zset_by_rank(&row, 0, count.min(row.count) - 1, false)?
        } else {
            self.zset_by_rank(&row, 0, count.min(row.count) - 1, true)?
        };
        let members: Vec<&[u8]> = popped.iter().map(|(m, _)| m.as_slice()).collect();
        self.zset_remove(slot, &members)?;
        Ok(popped)
    }

    /// Replaces whatever is stored under the key with a sorted set of
    /// `items` (distinct members: the STORE forms); an empty result deletes
    /// the key. Returns the new size.
    pub fn zset_store(&mut self, db: u32, key: &[u8], items: &[Scored]) -> Result<i64> {
        let live = self.replace(db, key)?;
        if items.is_empty() {
            return Ok(0);
        }
        let mut slot = self.open(db, key, Kind::ZSet)?;
        let pairs: Vec<(f64, &[u8])> = items.iter().map(|(m, s)| (*s, m.as_slice())).collect();
        let added = self.zset_add(&mut slot, &pairs, AddFlags::default())?.added;
        if live {
            self.not_new(db, key);
        }
        Ok(added)
    }

    /// Cuts the set under `id` into rank blocks of [`BLOCK`] members, the
    /// first starting below every member. One pass over the score index,
    /// once, when the set first outgrows [`BLOCKS_FROM`].
    fn zset_build_blocks(&mut self, id: i64) -> Result<()> {
        let bounds: Vec<(f64, Vec<u8>, i64)> = {
            let mut stmt =
                self.stmt("SELECT member, score FROM zsets WHERE id = ?1 ORDER BY score, member")?;
            let mut rows = stmt.query([id])?;
            let mut bounds: Vec<(f64, Vec<u8>, i64)> = vec![(f64::NEG_INFINITY, Vec::new(), 0)];
            while let Some(r) = rows.next()? {
                let last = bounds.len() - 1;
                if bounds[last].2 == BLOCK {
                    bounds.push((r.get(1)?, r.get(0)?, 0));
                }
                let last = bounds.len() - 1;
                bounds[last].2 += 1;
            }
            bounds
        };
        for (score, member, count) in bounds {
            self.stmt("INSERT INTO zblocks (id, score, member, count) VALUES (?1, ?2, ?3, ?4)")?
                .execute(params![id, score, member, count])?;
        }
        Ok(())
    }

    /// Counts `delta` (±1) members at `(score, member)` in its block, after
    /// the member row itself was written: splits a block grown past
    /// [`SPLIT_ABOVE`] at its middle member, folds one shrunk under
    /// [`MERGE_BELOW`] into the block before it.
    fn zset_block_adjust(&mut self, id: i64, score: f64, member: &[u8], delta: i64) -> Result<()> {
        let (lo_score, lo_member, count) = self.zset_block_of(id, score, member)?;
        let count = count + delta;
        if count > SPLIT_ABOVE {
            let half = count / 2;
            let (mid_member, mid_score): Scored = self
                .stmt(
                    "SELECT member, score FROM zsets WHERE id = ?1 AND (score, member) >= (?2, ?3)
                     ORDER BY score, member LIMIT 1 OFFSET ?4",
                )?
                .query_row(params![id, lo_score, lo_member, half], scored)?;
            self.stmt(
                "UPDATE zblocks SET count = ?4 WHERE id = ?1 AND score = ?2 AND member = ?3",
            )?
            .execute(params![id, lo_score, lo_member, half])?;
            self.stmt("INSERT INTO zblocks (id, score, member, count) VALUES (?1, ?2, ?3, ?4)")?
                .execute(params![id, mid_score, mid_member, count - half])?;
            return Ok(());
        }
        if count < MERGE_BELOW {
            let before: Option<(f64, Vec<u8>)> = self
                .stmt(
                    "SELECT score, member FROM zblocks WHERE id = ?1 AND (score, member) < (?2, ?3)
                     ORDER BY score DESC, member DESC LIMIT 1",
                )?
                .query_row(params![id, lo_score, lo_member], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .optional()?;
            if let Some((prev_score, prev_member)) = before {
                self.stmt("DELETE FROM zblocks WHERE id = ?1 AND score = ?2 AND member = ?3")?
                    .execute(params![id, lo_score, lo_member])?;
                self.stmt(
                    "UPDATE zblocks SET count = count + ?4
                     WHERE id = ?1 AND score = ?2 AND member = ?3",
                )?
                .execute(params![id, prev_score, prev_member, count])?;
                return Ok(());
            }
        }
        self.stmt("UPDATE zblocks SET count = ?4 WHERE id = ?1 AND score = ?2 AND member = ?3")?
            .execute(params![id, lo_score, lo_member, count])?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use super::*;
    use crate::stmt_cache::Statements;
    use crate::watch::Watches;

    /// A deterministic spread of scores with many ties (so member order
    /// matters) and the infinities.
    fn score(i: u64) -> f64 {
        match i % 97 {
            0 => f64::INFINITY,
            1 => f64::NEG_INFINITY,
            _ => ((i.wrapping_mul(2_654_435_761) >> 7) % 5_000) as f64 / 4.0,
        }
    }

    fn member(i: u64) -> Vec<u8> {
        format!("m{i:07}").into_bytes()
    }

    /// Every block's count matches the members between its boundary and
    /// the next, the counts add up to the set, and no block is oversized.
    fn check_blocks(txn: &Txn<'_, '_>, row: &KeyRow) {
        let blocks: Vec<(f64, Vec<u8>, i64)> = {
            let mut stmt = txn
                .stmt(
                    "SELECT score, member, count FROM zblocks WHERE id = ?1 ORDER BY score, member",
                )
                .unwrap();
            let rows = stmt
                .query_map([row.id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .unwrap();
            rows.collect::<std::result::Result<_, _>>().unwrap()
        };
        assert_eq!(blocks[0].0, f64::NEG_INFINITY);
        assert_eq!(blocks.iter().map(|b| b.2).sum::<i64>(), row.count);
        let all = txn.zset_all(row.id).unwrap();
        for (i, b) in blocks.iter().enumerate() {
            assert!(b.2 <= SPLIT_ABOVE, "block {i} holds {}", b.2);
            let inside = all
                .iter()
                .filter(|(m, s)| {
                    let pos = (*s, m.as_slice());
                    let after_lo = pos.0 > b.0 || (pos.0 == b.0 && pos.1 >= b.1.as_slice());
                    let before_next = blocks
                        .get(i + 1)
                        .is_none_or(|n| pos.0 < n.0 || (pos.0 == n.0 && pos.1 < n.1.as_slice()));
                    after_lo && before_next
                })
                .count() as i64;
            assert_eq!(inside, b.2, "block {i}");
        }
    }

    /// ZRANK of the last member of a 100,000-member set, in SQLite VM
    /// steps (rows touched, not time): the blocks make it a small fraction
    /// of the plain count over the score index, which walks the set. Then
    /// ranks, rank ranges and counts agree with a sorted copy through
    /// inserts, score changes and removals that split and merge blocks.
    #[test]
    fn ranks_read_blocks_not_the_set() {
        let conn = Connection::open_in_memory().unwrap();
        crate::schema::prepare(&conn).unwrap();
        let stmts = Statements::new(&conn);
        let watches = Watches::default();
        let thresholds = crate::encoding::Thresholds::default();
        let mut txn = Txn::new(&stmts, &watches, &thresholds);
        let n: u64 = 100_000;
        // In batches, so the blocks are built once and then kept up by
        // inserts that split them.
        for chunk in (0..n).collect::<Vec<_>>().chunks(5_000) {
            let mut slot = txn.open(0, b"z", Kind::ZSet).unwrap();
            let items: Vec<(f64, Vec<u8>)> = chunk.iter().map(|&i| (score(i), member(i))).collect();
            txn.zset_add(&mut slot, &items, AddFlags::default())
                .unwrap();
        }
        let row = txn.live(0, b"z", Kind::ZSet).unwrap().unwrap();
        assert_eq!(row.count, n as i64);
        assert_ne!(row.flags & ZBLOCKS, 0);
        check_blocks(&txn, &row);

        let mut sorted: Vec<Scored> = (0..n).map(|i| (member(i), score(i))).collect();
        sorted.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        let (last, last_score) = sorted[sorted.len() - 1].clone();

        stmts.take_vm_steps();
        let rank = txn.zset_rank(&row, &last).unwrap();
        let blocked = stmts.take_vm_steps();
        assert_eq!(rank, Some((n as i64 - 1, last_score)));

        let mut plain = conn
            .prepare("SELECT count(*) FROM zsets WHERE id = ?1 AND (score, member) < (?2, ?3)")
            .unwrap();
        let count: i64 = plain
            .query_row(params![row.id, last_score, last], |r| r.get(0))
            .unwrap();
        let walked = plain.get_status(rusqlite::StatementStatus::VmStep) as i64;
        drop(plain);
        assert_eq!(count, n as i64 - 1);
        eprintln!("ZRANK of the last of {n}: {blocked} VM steps; a count over the index: {walked}");
        assert!(
            blocked * 10 < walked,
            "ZRANK took {blocked} VM steps, a count over the index {walked}"
        );

        let check_ranks = |txn: &Txn<'_, '_>, sorted: &[Scored]| {
            let row = txn.live(0, b"z", Kind::ZSet).unwrap().unwrap();
            for i in (0..sorted.len()).step_by(997).chain([sorted.len() - 1]) {
                let (m, s) = &sorted[i];
                assert_eq!(txn.zset_rank(&row, m).unwrap(), Some((i as i64, *s)));
                let got = txn
                    .zset_by_rank(&row, i as i64, i as i64 + 2, false)
                    .unwrap();
                assert_eq!(got, sorted[i..(i + 3).min(sorted.len())].to_vec());
            }
            let range = ScoreRange::new(100.0, true, 700.0, false);
            let expected = sorted.iter().filter(|(_, s)| range.contains(*s)).count();
            assert_eq!(txn.zset_count(&row, range).unwrap(), expected as i64);
            check_blocks(txn, &row);
        };
        check_ranks(&txn, &sorted);

        // Move a third of the members to new scores, then remove most of
        // them: blocks split, shrink and merge.
        let mut slot = txn.open(0, b"z", Kind::ZSet).unwrap();
        let moved: Vec<(f64, Vec<u8>)> = (0..n)
            .step_by(3)
            .map(|i| (score(i * 7 + 1) + 0.5, member(i)))
            .collect();
        let done = txn
            .zset_add(&mut slot, &moved, AddFlags::default())
            .unwrap();
        assert_eq!(done.added, 0);
        let mut current: HashMap<Vec<u8>, f64> = sorted.into_iter().collect();
        for (s, m) in &moved {
            current.insert(m.clone(), *s);
        }
        let gone: Vec<Vec<u8>> = (0..n).filter(|i| i % 5 != 0).map(member).collect();
        let mut slot = txn.open(0, b"z", Kind::ZSet).unwrap();
        assert_eq!(
            txn.zset_remove(&mut slot, &gone).unwrap(),
            gone.len() as i64
        );
        for m in &gone {
            current.remove(m);
        }
        let mut sorted: Vec<Scored> = current.into_iter().collect();
        sorted.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        check_ranks(&txn, &sorted);

        // Popping everything leaves no key and no blocks.
        let mut slot = txn.open(0, b"z", Kind::ZSet).unwrap();
        let popped = txn.zset_pop(&mut slot, true, i64::MAX).unwrap();
        assert_eq!(popped, sorted);
        assert!(txn.live(0, b"z", Kind::ZSet).unwrap().is_none());
        let left: i64 = conn
            .query_row("SELECT count(*) FROM zblocks", [], |r| r.get(0))
            .unwrap();
        assert_eq!(left, 0);
    }

    #[test]
    fn lex_ranges_compare_ends_as_redis_does() {
        use LexBound::*;
        let r = |min, max| LexRange { min, max };
        assert!(!r(Min, Max).is_empty());
        assert!(r(Max, Min).is_empty());
        assert!(r(Min, Min).is_empty());
        assert!(r(Max, Max).is_empty());
        assert!(!r(Inclusive(b"a".to_vec()), Inclusive(b"a".to_vec())).is_empty());
        assert!(r(Exclusive(b"a".to_vec()), Inclusive(b"a".to_vec())).is_empty());
        assert!(r(Inclusive(b"b".to_vec()), Inclusive(b"a".to_vec())).is_empty());
        assert!(ScoreRange::new(f64::INFINITY, true, f64::INFINITY, false).is_empty());
        assert!(ScoreRange::new(1.0, true, 1.0, false).is_empty());
        assert!(ScoreRange::new(0.0, true, 5e-324, false).contains(5e-324));
        assert!(!ScoreRange::new(-0.0, true, 1.0, false).contains(0.0));
    }
}

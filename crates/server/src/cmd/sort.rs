//! SORT and SORT_RO: the elements of a list, set or sorted set, sorted by
//! their own value or by keys they name, with values fetched alongside.
//!
//! `SORT key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC]
//! [ALPHA] [STORE destination]` follows redis-server 7.0's `sort.c` step
//! by step, because its corners are part of what clients rely on:
//!
//! - A pattern's first `*` is replaced by the element; `key->field` reads a
//!   hash field; `GET #` is the element itself. A key of the wrong type, a
//!   missing key or field, or a pattern without `*` gives nothing (nil).
//! - `BY` with a pattern without `*` means "do not sort": lists and sorted
//!   sets keep their own order (reversed by DESC, cut by LIMIT), a set is
//!   sorted ALPHA all the same when the result is stored (its own order is
//!   not defined).
//! - Numeric sorting reads each weight as `strtod` does; one that is not a
//!   number fails the whole command with Redis's error. Equal weights are
//!   ordered by the elements themselves, so the result is deterministic; a
//!   missing BY weight counts as 0 (numeric) or sorts first (ALPHA).
//! - STORE writes the result as a list, replacing the destination whatever
//!   it held (deleting it when the result is empty), and wakes clients
//!   blocked on it like any push.
//!
//! Without STORE, SORT only reads, so it runs on the read pool in one
//! snapshot; with STORE it runs on the writer. SORT_RO never stores.

use bytes::Bytes;
use respite_engine::list::End;
use respite_engine::{EngineError, Kind, Txn, View};

use crate::args::{parse_i64, upper, Args};
use crate::command::Ctx;
use crate::command::{read_job, write_op, Plan, ReadCommand, Session, WriteCommand};
use crate::error::CommandError;
use crate::reply::Reply;

/// `SORT` / `SORT_RO`, parsed.
pub struct Sort {
    /// Selected database.
    db: u32,
    /// The list, set or sorted set to sort.
    key: Bytes,
    /// BY pattern, when it has a `*`.
    by: Option<Bytes>,
    /// BY pattern without `*`: keep the stored order.
    dont_sort: bool,
    /// LIMIT offset count (count -1: to the end).
    limit: (i64, i64),
    /// GET patterns, in order.
    get: Vec<Bytes>,
    /// DESC.
    desc: bool,
    /// ALPHA.
    alpha: bool,
    /// STORE destination.
    store: Option<Bytes>,
}

impl Sort {
    /// Parses the options as `sortCommandGeneric` does; `readonly` refuses
    /// STORE (a syntax error in SORT_RO).
    fn parse_with(args: &mut Args, s: &Ctx<'_>, readonly: bool) -> Result<Sort, CommandError> {
        let mut sort = Sort {
            db: s.db,
            key: args.next()?,
            by: None,
            dont_sort: false,
            limit: (0, -1),
            get: Vec::new(),
            desc: false,
            alpha: false,
            store: None,
        };
        while let Some(opt) = args.next_opt() {
            let left = args.remaining();
            match upper(&opt).as_str() {
                "ASC" => sort.desc = false,
                "DESC" => sort.desc = true,
                "ALPHA" => sort.alpha = true,
                "LIMIT" if left >= 2 => {
                    let start = parse_i64(&args.next()?).ok_or(CommandError::NotInteger)?;
                    let count = parse_i64(&args.next()?).ok_or(CommandError::NotInteger)?;
                    sort.limit = (start, count);
                }
                "STORE" if !readonly && left >= 1 => sort.store = Some(args.next()?),
                "BY" if left >= 1 => {
                    let pattern = args.next()?;
                    if pattern.contains(&b'*') {
                        sort.by = Some(pattern);
                        sort.dont_sort = false;
                    } else {
                        sort.dont_sort = true;
                    }
                }
                "GET" if left >= 1 => sort.get.push(args.next()?),
                _ => return Err(CommandError::Syntax),
            }
        }
        Ok(sort)
    }

    /// Runs the sort on `view` and answers, or hands back the rows to
    /// store (with STORE).
    fn run(&self, view: &View<'_, '_>) -> Result<Sorted, CommandError> {
        let entry = view.entry(self.db, &self.key)?;
        let kind = match entry.as_ref().map(|e| e.kind) {
            None => Kind::List,
            Some(k @ (Kind::List | Kind::Set | Kind::ZSet)) => k,
            Some(_) => return Err(EngineError::WrongType.into()),
        };
        let row = match entry {
            Some(_) => view.live(self.db, &self.key, kind)?,
            None => None,
        };
        let mut elements: Vec<Vec<u8>> = match (kind, row) {
            (_, None) => Vec::new(),
            (Kind::List, Some(r)) => view.list_all(r.id)?,
            (Kind::Set, Some(r)) => view.set_members(r.id)?,
            (_, Some(r)) => view.zset_all(r.id)?.into_iter().map(|(m, _)| m).collect(),
        };
        let mut dont_sort = self.dont_sort;
        let mut alpha = self.alpha;
        let mut by = self.by.as_deref();
        // A set has no order of its own to keep: stored, it is sorted.
        if dont_sort && kind == Kind::Set && self.store.is_some() {
            dont_sort = false;
            alpha = true;
            by = None;
        }
        let len = elements.len() as i64;
        let (start, end) = limits(len, self.limit);
        if dont_sort {
            if self.desc {
                elements.reverse();
            }
        } else {
            elements = self.sorted(view, elements, by, alpha)?;
        }
        let chosen: &[Vec<u8>] = if start <= end {
            &elements[start as usize..=end as usize]
        } else {
            &[]
        };
        if self.get.is_empty() {
            return Ok(Sorted(chosen.iter().map(|e| Some(e.clone())).collect()));
        }
        let mut out = Vec::with_capacity(chosen.len() * self.get.len());
        for e in chosen {
            for pattern in &self.get {
                out.push(lookup(view, self.db, pattern, e)?);
            }
        }
        Ok(Sorted(out))
    }

    /// The elements in sorted order (a stable sort, as glibc's qsort is for
    /// these sizes, so ALPHA ties keep their stored order as in Redis).
    fn sorted(
        &self,
        view: &View<'_, '_>,
        elements: Vec<Vec<u8>>,
        by: Option<&[u8]>,
        alpha: bool,
    ) -> Result<Vec<Vec<u8>>, CommandError> {
        let mut keyed: Vec<(Vec<u8>, Weight)> = Vec::with_capacity(elements.len());
        let mut bad_number = false;
        for e in elements {
            let weight_of = match by {
                Some(pattern) => lookup(view, self.db, pattern, &e)?,
                None => Some(e.clone()),
            };
            let weight = match (alpha, weight_of) {
                (true, w) if by.is_some() => Weight::Text(w),
                (true, _) => Weight::Text(None),
                (false, None) => Weight::Number(0.0),
                (false, Some(w)) => match strtod(&w) {
                    Some(n) => Weight::Number(n),
                    None => {
                        bad_number = true;
                        Weight::Number(0.0)
                    }
                },
            };
            keyed.push((e, weight));
        }
        if bad_number {
            return Err(CommandError::Other(
                "One or more scores can't be converted into double".into(),
            ));
        }
        let store = self.store.is_some();
        keyed.sort_by(|(ea, wa), (eb, wb)| {
            let cmp = match (wa, wb) {
                (Weight::Number(a), Weight::Number(b)) => a
                    .partial_cmp(b)
                    .unwrap_or(std::cmp::Ordering::Equal)
                    .then_with(|| ea.cmp(eb)),
                (Weight::Text(a), Weight::Text(b)) if by.is_some() => match (a, b) {
                    (None, None) => std::cmp::Ordering::Equal,
                    (None, Some(_)) => std::cmp::Ordering::Less,
                    (Some(_), None) => std::cmp::Ordering::Greater,
                    (Some(a), Some(b)) => collate(a, b, store),
                },
                _ => collate(ea, eb, store),
            };
            if self.desc {
                cmp.reverse()
            } else {
                cmp
            }
        });
        Ok(keyed.into_iter().map(|(e, _)| e).collect())
    }
}

/// A sort weight.
enum Weight {
    /// Numeric sorting.
    Number(f64),
    /// ALPHA: the BY value (`None`: missing), or the element itself.
    Text(Option<Vec<u8>>),
}

/// Redis compares ALPHA weights with `strcoll` (the C locale: bytes up
/// to the first NUL) when answering, and whole binary strings when
/// storing.
fn collate(a: &[u8], b: &[u8], store: bool) -> std::cmp::Ordering {
    if store {
        a.cmp(b)
    } else {
        crate::error::c_str(a).cmp(crate::error::c_str(b))
    }
}

/// LIMIT applied as `sortCommandGeneric` does: the inclusive index range
/// to return (empty when `start > end`).
fn limits(len: i64, (offset, count): (i64, i64)) -> (i64, i64) {
    let mut start = offset.max(0).min(len);
    let count = count.max(-1).min(len);
    let mut end = if count < 0 {
        len - 1
    } else {
        start + count - 1
    };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    if end >= len {
        end = len - 1;
    }
    (start, end)
}

/// `strtod` on a whole value, as SORT reads numeric weights: leading
/// white space, decimal or hexadecimal, `inf`; nothing may follow, and an
/// out-of-range value or NaN is refused.
fn strtod(value: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(value).ok()?;
    let text = text.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let n = match text.parse::<f64>() {
        Ok(n) => n,
        Err(_) => crate::long_double::parse(text.as_bytes())?.to_f64(),
    };
    let lower = text.to_ascii_lowercase();
    let spelled_inf = lower.trim_start_matches(['+', '-']).starts_with("inf");
    if n.is_nan() || (n.is_infinite() && !spelled_inf) {
        return None;
    }
    // Underflow: glibc sets ERANGE for a nonzero value that rounds to 0 or
    // to a subnormal.
    let mantissa = lower.split(['e', 'p']).next().unwrap_or("");
    let nonzero = mantissa
        .trim_start_matches("0x")
        .bytes()
        .any(|b| b.is_ascii_alphanumeric() && b != b'0' && b != b'x');
    if nonzero && (n == 0.0 || n.is_subnormal()) {
        return None;
    }
    Some(n)
}

/// What a BY or GET pattern names for `element`: the element itself for
/// `#`, a string value, or a hash field (`key->field`); `None` if there is
/// nothing of that type there.
fn lookup(
    view: &View<'_, '_>,
    db: u32,
    pattern: &[u8],
    element: &[u8],
) -> Result<Option<Vec<u8>>, CommandError> {
    if pattern == b"#" {
        return Ok(Some(element.to_vec()));
    }
    let Some(star) = pattern.iter().position(|&b| b == b'*') else {
        return Ok(None);
    };
    let after = &pattern[star + 1..];
    // `->field`, where the field is not empty.
    let arrow = after.windows(2).position(|w| w == b"->");
    let (suffix, field) = match arrow {
        Some(i) if i + 2 < after.len() => (&after[..i], Some(&after[i + 2..])),
        _ => (after, None),
    };
    let mut key = Vec::with_capacity(star + element.len() + suffix.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(element);
    key.extend_from_slice(suffix);
    let found = match field {
        Some(field) => view.hash_get(db, &key, field),
        None => view.get_string(db, &key),
    };
    match found {
        Ok(v) => Ok(v),
        Err(EngineError::WrongType) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// A sort's result: the values to answer or store (`None`: a GET that
/// found nothing).
struct Sorted(Vec<Option<Vec<u8>>>);

impl Sorted {
    fn reply(self) -> Reply {
        Reply::Array(
            self.0
                .into_iter()
                .map(|v| v.map_or(Reply::Nil, Reply::bulk))
                .collect(),
        )
    }
}

impl ReadCommand for Sort {
    const MULTI_STATEMENT: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Sort::parse_with(args, s, false)
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        Ok(self.run(view)?.reply())
    }
}

impl WriteCommand for Sort {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Sort::parse_with(args, s, false)
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let sorted = self.run(txn)?;
        let Some(dst) = &self.store else {
            return Ok(sorted.reply());
        };
        // A GET that found nothing stores an empty string, as in Redis.
        let values: Vec<Vec<u8>> = sorted
            .0
            .into_iter()
            .map(Option::unwrap_or_default)
            .collect();
        txn.delete(self.db, dst)?;
        if !values.is_empty() {
            let mut slot = txn.open(self.db, dst, Kind::List)?;
            txn.list_push(&mut slot, &values, End::Right)?;
        }
        Ok(Reply::Int(values.len() as i64))
    }
}

/// `SORT_RO key [BY pattern] [LIMIT offset count] [GET pattern ...]
/// [ASC|DESC] [ALPHA]`
pub struct SortRo(Sort);

impl ReadCommand for SortRo {
    const MULTI_STATEMENT: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(SortRo(Sort::parse_with(args, s, true)?))
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        ReadCommand::apply(self.0, view)
    }
}

/// SORT reads on the pool unless it stores.
fn plan_sort(s: &mut Session, args: Args) -> Result<Plan, CommandError> {
    let sort = crate::command::parse_all(args, &s.ctx(), <Sort as WriteCommand>::parse)?;
    if sort.store.is_some() {
        Ok(Plan::Write(write_op(sort)))
    } else {
        let (f, needs) = read_job(sort, s);
        Ok(Plan::Read(f, needs))
    }
}

/// This family's rows of the command table (see [`crate::command::table`]).
#[rustfmt::skip]
pub(crate) fn commands() -> Vec<crate::command::Spec> {
    use crate::command::Spec;
    vec![
        Spec::write::<Sort>("sort").planned_by(plan_sort),
        Spec::read::<SortRo>("sort_ro"),
    ]
}

#[cfg(test)]
mod tests {
    use super::{limits, strtod};

    #[test]
    fn limits_follow_sort_c() {
        assert_eq!(limits(5, (0, -1)), (0, 4));
        assert_eq!(limits(5, (1, 2)), (1, 2));
        assert_eq!(limits(5, (-3, 2)), (0, 1));
        assert_eq!(limits(5, (10, 2)), (4, 3));
        assert_eq!(limits(0, (0, -1)), (-1, -2));
        assert_eq!(limits(5, (3, 100)), (3, 4));
    }

    #[test]
    fn weights_read_as_strtod_reads_them() {
        assert_eq!(strtod(b"1.5"), Some(1.5));
        assert_eq!(strtod(b" 2"), Some(2.0));
        assert_eq!(strtod(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(strtod(b"0x10"), Some(16.0));
        assert_eq!(strtod(b"0"), Some(0.0));
        assert_eq!(strtod(b"abc"), None);
        assert_eq!(strtod(b"1e400"), None);
        assert_eq!(strtod(b"1e-400"), None);
        assert_eq!(strtod(b"nan"), None);
        assert_eq!(strtod(b""), None);
    }
}

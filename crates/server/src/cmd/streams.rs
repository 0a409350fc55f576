//! Stream commands: XADD and the reads of a stream (XRANGE, XREVRANGE,
//! XLEN, XREAD), its trimming and deletion (XTRIM, XDEL, XSETID), consumer
//! groups (XGROUP, XREADGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM) and
//! XINFO, with redis 7.0's semantics and error texts; the storage is
//! `respite_engine::stream`.
//!
//! Each command checks what redis's `t_stream.c` checks in the order it
//! checks it, so the same bad input gets the same error: XRANGE parses its
//! IDs and COUNT before it looks at the key, XDEL looks at the key first.
//! The arguments are kept as a vector and walked by index, as redis walks
//! `argv`, since several commands (XADD, XREAD, XCLAIM) decide what an
//! argument is by where it stands.
//!
//! XREAD and XREADGROUP with BLOCK are [`Blocker`]s: the first try resolves
//! `$` and serves what is there; when nothing is, the client waits until
//! a write to one of its streams adds an entry past the ID it waits for
//! (see `crate::blocking`), and a blocked XREADGROUP gets redis's errors
//! when its stream or group goes. XREADGROUP is a write even without
//! BLOCK (it moves the group and fills the pending entries list), so its
//! delivery commits before the client sees it.

use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use respite_engine::notify::STREAM;
use respite_engine::stream::{
    Delivery, Entry, Fields, Group, Nack, StreamId, StreamState, Trim, TrimBy, ENTRIES_READ_UNKNOWN,
};
use respite_engine::{KeyRow, Kind, Slot, Txn, View};

use crate::args::{parse_i64, Args};
use crate::blocking::Blocker;
use crate::command::{Ctx, Plan, ReadCommand, Session, Spec, WriteCommand};
use crate::error::CommandError;
use crate::reply::Reply;
use crate::stream_id::{end_id, loose_id, parse_id_full, start_id, strict_id};

fn err(text: &str) -> CommandError {
    CommandError::Other(text.to_string())
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(crate::error::c_str(b)).into_owned()
}

fn id_reply(id: StreamId) -> Reply {
    Reply::bulk(id.to_string())
}

fn fields_reply(fields: Fields) -> Reply {
    Reply::Array(
        fields
            .into_iter()
            .flat_map(|(f, v)| [Reply::bulk(f), Reply::bulk(v)])
            .collect(),
    )
}

fn entry_reply((id, fields): Entry) -> Reply {
    Reply::Array(vec![id_reply(id), fields_reply(fields)])
}

fn entries_reply(entries: Vec<Entry>) -> Reply {
    Reply::Array(entries.into_iter().map(entry_reply).collect())
}

/// A map of `pairs` with string keys: RESP3 `%`, a flat array in RESP2.
fn map(pairs: Vec<(&'static str, Reply)>) -> Reply {
    Reply::Map(
        pairs
            .into_iter()
            .map(|(k, v)| (Reply::bulk(k), v))
            .collect(),
    )
}

fn integer(arg: &[u8]) -> Result<i64, CommandError> {
    parse_i64(arg).ok_or(CommandError::NotInteger)
}

fn integer_or(arg: &[u8], msg: &str) -> Result<i64, CommandError> {
    parse_i64(arg).ok_or_else(|| err(msg))
}

fn nogroup_key(key: &[u8], group: &[u8]) -> CommandError {
    CommandError::Raw(format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        lossy(key),
        lossy(group)
    ))
}

fn nogroup_for(key: &[u8], group: &[u8]) -> CommandError {
    CommandError::Raw(format!(
        "NOGROUP No such consumer group '{}' for key name '{}'",
        lossy(group),
        lossy(key)
    ))
}

/// The live stream under `key`, `None` if there is none (WRONGTYPE if the
/// key holds another type).
fn stream(view: &View<'_, '_>, db: u32, key: &[u8]) -> Result<Option<KeyRow>, CommandError> {
    Ok(view.live(db, key, Kind::Stream)?)
}

/// The trimming options of XADD and XTRIM, as
/// `streamParseAddOrTrimArgsOrReply` reads them.
#[derive(Debug, Default)]
struct AddTrim {
    /// The strategy and its argument.
    by: Option<TrimBy>,
    approx: bool,
    limit: Option<i64>,
    nomkstream: bool,
    /// XADD's ID: `None` for `*`; with whether the sequence was given.
    id: Option<(StreamId, bool)>,
    /// Where the ID stands (XADD).
    id_pos: usize,
}

impl AddTrim {
    /// `master`: the command came in the stream of this replica's master,
    /// whose trims are exact and whose LIMIT is ignored (redis's
    /// `mustObeyClient`).
    fn parse(argv: &[Bytes], xadd: bool, master: bool) -> Result<AddTrim, CommandError> {
        let mut a = AddTrim::default();
        let argc = argv.len();
        let mut i = 2;
        while i < argc {
            let more = argc - 1 - i;
            let opt = &argv[i];
            if xadd && &opt[..] == b"*" {
                break;
            } else if opt.eq_ignore_ascii_case(b"MAXLEN") && more > 0 {
                if a.by.is_some() {
                    return Err(err("syntax error, MAXLEN and MINID options at the same time are not compatible"));
                }
                a.approx = false;
                let next = &argv[i + 1];
                if more >= 2 && &next[..] == b"~" {
                    a.approx = true;
                    i += 1;
                } else if more >= 2 && &next[..] == b"=" {
                    i += 1;
                }
                let n = integer(&argv[i + 1])?;
                if n < 0 {
                    return Err(err("The MAXLEN argument must be >= 0."));
                }
                i += 1;
                a.by = Some(TrimBy::MaxLen(n));
            } else if opt.eq_ignore_ascii_case(b"MINID") && more > 0 {
                if a.by.is_some() {
                    return Err(err("syntax error, MAXLEN and MINID options at the same time are not compatible"));
                }
                a.approx = false;
                let next = &argv[i + 1];
                if more >= 2 && &next[..] == b"~" {
                    a.approx = true;
                    i += 1;
                } else if more >= 2 && &next[..] == b"=" {
                    i += 1;
                }
                let id = strict_id(&argv[i + 1])?;
                i += 1;
                a.by = Some(TrimBy::MinId(id));
            } else if opt.eq_ignore_ascii_case(b"LIMIT") && more > 0 {
                let n = integer(&argv[i + 1])?;
                if n < 0 {
                    return Err(err("The LIMIT argument must be >= 0."));
                }
                a.limit = Some(n);
                i += 1;
            } else if xadd && opt.eq_ignore_ascii_case(b"NOMKSTREAM") {
                a.nomkstream = true;
            } else if xadd {
                a.id = Some(parse_id_full(opt, 0, true, true)?);
                break;
            } else {
                return Err(CommandError::Syntax);
            }
            i += 1;
        }
        a.id_pos = i;
        if a.limit.is_some_and(|l| l != 0) && a.by.is_none() {
            return Err(err(
                "syntax error, LIMIT cannot be used without specifying a trimming strategy",
            ));
        }
        if !xadd && a.by.is_none() {
            return Err(err(
                "syntax error, XTRIM must be called with a trimming strategy",
            ));
        }
        if master {
            a.limit = Some(0);
        } else if a.limit.is_some() && !a.approx {
            return Err(err(
                "syntax error, LIMIT cannot be used without the special ~ option",
            ));
        }
        Ok(a)
    }

    /// The trim to run, with the default LIMIT of an approximate trim.
    fn trim(&self, node_entries: i64) -> Option<Trim> {
        let by = self.by?;
        let limit = match self.limit {
            Some(l) => l,
            None if self.approx => {
                let l = node_entries.saturating_mul(100);
                if l <= 0 {
                    10_000
                } else {
                    l.min(1_000_000)
                }
            }
            None => 0,
        };
        Some(Trim {
            by,
            approx: self.approx,
            limit,
        })
    }
}

/// Opens the stream at `key` for a write, with its state.
fn open_stream<'k>(
    txn: &mut Txn<'_, '_>,
    db: u32,
    key: &'k [u8],
) -> Result<(Slot<'k>, Option<StreamState>), CommandError> {
    let slot = txn.open(db, key, Kind::Stream)?;
    let state = match slot.row() {
        Some(row) => Some(txn.stream_state(&row)?),
        None => None,
    };
    Ok((slot, state))
}

/// An empty stream's state (before it is created).
fn empty_state() -> StreamState {
    StreamState {
        length: 0,
        last_id: StreamId::MIN,
        max_deleted: StreamId::MIN,
        entries_added: 0,
        first_id: StreamId::MIN,
        nodes: 0,
    }
}

/// `XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]]
/// *|id field value [field value ...]`: the new entry's ID.
pub struct XAdd {
    db: u32,
    key: Bytes,
    opts: AddTrim,
    fields: Vec<Bytes>,
}

impl WriteCommand for XAdd {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let mut argv = vec![Bytes::from_static(b"xadd")];
        argv.extend(args.rest());
        let opts = AddTrim::parse(&argv, true, s.master)?;
        let field_pos = opts.id_pos + 1;
        let n = argv.len().saturating_sub(field_pos);
        if argv.len() < field_pos || n < 2 || !n.is_multiple_of(2) {
            return Err(CommandError::WrongArity("xadd".into()));
        }
        if let Some((id, true)) = opts.id {
            if id.is_zero() {
                return Err(err("The ID specified in XADD must be greater than 0-0"));
            }
        }
        Ok(XAdd {
            db: s.db,
            key: argv[1].clone(),
            fields: argv[field_pos..].to_vec(),
            opts,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let mut slot = txn.open(self.db, &self.key, Kind::Stream)?;
        let state = match slot.row() {
            Some(row) => Some(txn.stream_state_for_append(&row)?),
            None => None,
        };
        if state.is_none() && self.opts.nomkstream {
            return Ok(Reply::Nil);
        }
        let mut st = state.unwrap_or_else(empty_state);
        if st.last_id == StreamId::MAX {
            return Err(err(
                "The stream has exhausted the last possible ID, unable to add more items",
            ));
        }
        let too_small =
            || err("The ID specified in XADD is equal or smaller than the target stream top item");
        let id = match self.opts.id {
            Some((id, true)) => id,
            Some((id, false)) => {
                if st.last_id.ms == id.ms {
                    if st.last_id.seq == u64::MAX {
                        return Err(too_small());
                    }
                    StreamId::new(id.ms, st.last_id.seq + 1)
                } else {
                    id
                }
            }
            None => {
                let now = txn.now().max(0) as u64;
                if now > st.last_id.ms {
                    StreamId::new(now, 0)
                } else {
                    st.last_id.next().ok_or_else(too_small)?
                }
            }
        };
        if id <= st.last_id {
            return Err(too_small());
        }
        if slot.is_empty() {
            txn.stream_create(&mut slot)?;
        }
        let pairs: Vec<(&[u8], &[u8])> = self
            .fields
            .chunks(2)
            .map(|c| (&c[0][..], &c[1][..]))
            .collect();
        let limits = txn.stream_node_limits();
        txn.stream_append(&mut slot, &mut st, id, &pairs, limits)?;
        txn.notify(STREAM, "xadd", self.db, &self.key);
        if let Some(trim) = self.opts.trim(limits.entries) {
            if txn.stream_trim(&mut slot, &mut st, trim)? > 0 {
                txn.notify(STREAM, "xtrim", self.db, &self.key);
            }
        }
        Ok(id_reply(id))
    }
}

/// `XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]`: how many
/// entries went.
pub struct XTrim {
    db: u32,
    key: Bytes,
    opts: AddTrim,
}

impl WriteCommand for XTrim {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let mut argv = vec![Bytes::from_static(b"xtrim")];
        argv.extend(args.rest());
        let opts = AddTrim::parse(&argv, false, s.master)?;
        Ok(XTrim {
            db: s.db,
            key: argv[1].clone(),
            opts,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let (mut slot, state) = open_stream(txn, self.db, &self.key)?;
        let Some(mut st) = state else {
            return Ok(Reply::Int(0));
        };
        let limits = txn.stream_node_limits();
        let Some(trim) = self.opts.trim(limits.entries) else {
            return Ok(Reply::Int(0));
        };
        let trimmed = txn.stream_trim(&mut slot, &mut st, trim)?;
        if trimmed > 0 {
            txn.notify(STREAM, "xtrim", self.db, &self.key);
        }
        Ok(Reply::Int(trimmed))
    }
}

/// `XRANGE key start end [COUNT count]` and `XREVRANGE key end start
/// [COUNT count]` (`REV`).
pub struct XRange<const REV: bool> {
    db: u32,
    key: Bytes,
    start: StreamId,
    end: StreamId,
    count: i64,
}

impl<const REV: bool> ReadCommand for XRange<REV> {
    const QUICK: bool = false;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let key = args.next()?;
        let a = args.next()?;
        let b = args.next()?;
        let (start_arg, end_arg) = if REV { (b, a) } else { (a, b) };
        let start = start_id(&start_arg)?;
        let end = end_id(&end_arg)?;
        let mut count = -1;
        let rest = args.rest();
        let mut j = 0;
        while j < rest.len() {
            if rest[j].eq_ignore_ascii_case(b"COUNT") && j + 1 < rest.len() {
                count = integer(&rest[j + 1])?.max(0);
                j += 2;
            } else {
                return Err(CommandError::Syntax);
            }
        }
        Ok(XRange {
            db: s.db,
            key,
            start,
            end,
            count,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let Some(row) = stream(view, self.db, &self.key)? else {
            return Ok(Reply::Array(Vec::new()));
        };
        if self.count == 0 {
            return Ok(Reply::NilArray);
        }
        let count = if self.count < 0 {
            0
        } else {
            self.count as usize
        };
        Ok(entries_reply(
            view.stream_range(row.id, self.start, self.end, count, REV)?,
        ))
    }
}

/// `XLEN key`
pub struct XLen {
    db: u32,
    key: Bytes,
}

impl ReadCommand for XLen {
    const QUICK: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(XLen {
            db: s.db,
            key: args.next()?,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        Ok(Reply::Int(
            stream(view, self.db, &self.key)?.map_or(0, |r| r.count),
        ))
    }
}

/// `XDEL key id [id ...]`: how many entries were deleted.
pub struct XDel {
    db: u32,
    key: Bytes,
    ids: Vec<Bytes>,
}

impl WriteCommand for XDel {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(XDel {
            db: s.db,
            key: args.next()?,
            ids: args.rest(),
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let (mut slot, state) = open_stream(txn, self.db, &self.key)?;
        let Some(mut st) = state else {
            return Ok(Reply::Int(0));
        };
        let ids = self
            .ids
            .iter()
            .map(|a| strict_id(a))
            .collect::<Result<Vec<_>, _>>()?;
        let mut deleted = 0;
        for id in ids {
            if txn.stream_delete(&mut slot, &mut st, id)? {
                deleted += 1;
            }
        }
        if deleted > 0 {
            txn.notify(STREAM, "xdel", self.db, &self.key);
        }
        Ok(Reply::Int(deleted))
    }
}

/// `XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID
/// max-deleted-id]`
pub struct XSetId {
    db: u32,
    key: Bytes,
    id: StreamId,
    entries_added: Option<i64>,
    max_deleted: StreamId,
}

impl WriteCommand for XSetId {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let key = args.next()?;
        let id = strict_id(&args.next()?)?;
        let rest = args.rest();
        let (mut entries_added, mut max_deleted) = (None, StreamId::MIN);
        let mut i = 0;
        while i < rest.len() {
            let more = rest.len() - 1 - i;
            if rest[i].eq_ignore_ascii_case(b"ENTRIESADDED") && more > 0 {
                let n = integer(&rest[i + 1])?;
                if n < 0 {
                    return Err(err("entries_added must be positive"));
                }
                entries_added = Some(n);
            } else if rest[i].eq_ignore_ascii_case(b"MAXDELETEDID") && more > 0 {
                max_deleted = strict_id(&rest[i + 1])?;
                if id < max_deleted {
                    return Err(err("The ID specified in XSETID is smaller than the provided max_deleted_entry_id"));
                }
            } else {
                return Err(CommandError::Syntax);
            }
            i += 2;
        }
        Ok(XSetId {
            db: s.db,
            key,
            id,
            entries_added,
            max_deleted,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let (mut slot, state) = open_stream(txn, self.db, &self.key)?;
        let Some(mut st) = state else {
            return Err(err("no such key"));
        };
        if st.length > 0 {
            let top = txn.stream_last_entry_id(slot.row().map_or(0, |r| r.id))?;
            if self.id < top {
                return Err(err(
                    "The ID specified in XSETID is smaller than the target stream top item",
                ));
            }
            if self.entries_added.is_some_and(|n| st.length > n) {
                return Err(err("The entries_added specified in XSETID is smaller than the target stream length"));
            }
        }
        st.last_id = self.id;
        if let Some(n) = self.entries_added {
            st.entries_added = n;
        }
        if !self.max_deleted.is_zero() {
            st.max_deleted = self.max_deleted;
        }
        txn.stream_set_state(&mut slot, &st)?;
        txn.notify(STREAM, "xsetid", self.db, &self.key);
        Ok(Reply::Ok)
    }
}

/// The ID one stream of an XREAD or XREADGROUP waits past.
#[derive(Debug, Clone, Copy)]
enum ReadFrom {
    /// After this ID.
    After(StreamId),
    /// `$`: after the stream's last ID when the command runs.
    Last,
    /// `>`: entries never delivered to the group.
    New,
}

/// The parsed options of XREAD and XREADGROUP (`xreadCommand`).
struct ReadArgs {
    db: u32,
    resp3: bool,
    block: Option<Option<Duration>>,
    count: i64,
    noack: bool,
    group: Option<(Bytes, Bytes)>,
    keys: Vec<Bytes>,
    ids: Vec<ReadFrom>,
}

impl ReadArgs {
    fn parse(args: &mut Args, s: &Ctx<'_>, xreadgroup: bool) -> Result<ReadArgs, CommandError> {
        let argv = args.rest();
        let argc = argv.len();
        let (mut block, mut count, mut noack, mut group) = (None, 0, false, None);
        let mut streams_at = None;
        let name = if xreadgroup { "XREADGROUP" } else { "XREAD" };
        let mut i = 0;
        while i < argc {
            let more = argc - i - 1;
            let o = &argv[i];
            if o.eq_ignore_ascii_case(b"BLOCK") && more > 0 {
                i += 1;
                let ms = parse_i64(&argv[i])
                    .ok_or_else(|| err("timeout is not an integer or out of range"))?;
                if ms < 0 {
                    return Err(err("timeout is negative"));
                }
                block = Some(if ms == 0 {
                    None
                } else {
                    Some(Duration::from_millis(ms as u64))
                });
            } else if o.eq_ignore_ascii_case(b"COUNT") && more > 0 {
                i += 1;
                count = integer(&argv[i])?.max(0);
            } else if o.eq_ignore_ascii_case(b"STREAMS") && more > 0 {
                let n = argc - (i + 1);
                if !n.is_multiple_of(2) {
                    return Err(err("Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified."));
                }
                streams_at = Some(i + 1);
                break;
            } else if o.eq_ignore_ascii_case(b"GROUP") && more >= 2 {
                if !xreadgroup {
                    return Err(err("The GROUP option is only supported by XREADGROUP. You called XREAD instead."));
                }
                group = Some((argv[i + 1].clone(), argv[i + 2].clone()));
                i += 2;
            } else if o.eq_ignore_ascii_case(b"NOACK") {
                if !xreadgroup {
                    return Err(err("The NOACK option is only supported by XREADGROUP. You called XREAD instead."));
                }
                noack = true;
            } else {
                return Err(CommandError::Syntax);
            }
            i += 1;
        }
        let Some(at) = streams_at else {
            return Err(CommandError::Syntax);
        };
        if xreadgroup && group.is_none() {
            return Err(err("Missing GROUP option for XREADGROUP"));
        }
        let n = (argc - at) / 2;
        let keys = argv[at..at + n].to_vec();
        let mut ids = Vec::with_capacity(n);
        for a in &argv[at + n..] {
            ids.push(match &a[..] {
                b"$" => {
                    if xreadgroup {
                        return Err(err("The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set."));
                    }
                    ReadFrom::Last
                }
                b">" => {
                    if !xreadgroup {
                        return Err(err("The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option."));
                    }
                    ReadFrom::New
                }
                _ => ReadFrom::After(strict_id(a)?),
            });
        }
        let _ = name;
        Ok(ReadArgs {
            db: s.db,
            resp3: s.resp3,
            block,
            count,
            noack,
            group,
            keys,
            ids,
        })
    }

    /// The reply for the streams served: `[[key, entries] ...]`, a map in
    /// RESP3.
    fn reply(&self, served: Vec<(Bytes, Reply)>) -> Reply {
        if self.resp3 {
            Reply::Map(
                served
                    .into_iter()
                    .map(|(k, v)| (Reply::bulk(k), v))
                    .collect(),
            )
        } else {
            Reply::Array(
                served
                    .into_iter()
                    .map(|(k, v)| Reply::Array(vec![Reply::bulk(k), v]))
                    .collect(),
            )
        }
    }

    fn count(&self) -> usize {
        self.count as usize
    }
}

/// `XREAD [COUNT count] [BLOCK milliseconds] STREAMS key [key ...] id [id
/// ...]`: a read, or with BLOCK a blocking command (see the module docs).
pub struct XRead {
    args: ReadArgs,
    /// The IDs each stream waits past, `$` resolved by the first try.
    waits: Mutex<Vec<StreamId>>,
}

impl XRead {
    /// The synchronous part (`xreadCommand` up to blocking): resolves `$`
    /// into `waits` and answers the streams that have entries past their
    /// ID; `None` when none has.
    fn serve(&self, view: &View<'_, '_>) -> Result<Option<Reply>, CommandError> {
        let a = &self.args;
        let mut rows = Vec::with_capacity(a.keys.len());
        let mut waits = Vec::with_capacity(a.keys.len());
        for (key, from) in a.keys.iter().zip(&a.ids) {
            let row = stream(view, a.db, key)?;
            let state = match &row {
                Some(r) => Some(view.stream_state(r)?),
                None => None,
            };
            waits.push(match from {
                ReadFrom::After(id) => *id,
                _ => state.map_or(StreamId::MIN, |s| s.last_id),
            });
            rows.push(row.zip(state));
        }
        let mut served = Vec::new();
        for (i, r) in rows.into_iter().enumerate() {
            let Some((row, state)) = r else { continue };
            if state.length == 0 {
                continue;
            }
            let gt = waits[i];
            if view.stream_last_entry_id(row.id)? <= gt {
                continue;
            }
            let Some(start) = gt.next() else { continue };
            let entries = view.stream_range(row.id, start, StreamId::MAX, a.count(), false)?;
            served.push((a.keys[i].clone(), entries_reply(entries)));
        }
        *crate::sync::lock(&self.waits) = waits;
        if served.is_empty() {
            return Ok(None);
        }
        Ok(Some(a.reply(served)))
    }
}

impl ReadCommand for XRead {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(XRead {
            args: ReadArgs::parse(args, s, false)?,
            waits: Mutex::new(Vec::new()),
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        Ok(self.serve(view)?.unwrap_or(Reply::NilArray))
    }
}

impl StreamReader for XRead {
    fn args(&self) -> &ReadArgs {
        &self.args
    }
    fn first_try(&self, txn: &mut Txn<'_, '_>) -> Result<Option<Reply>, CommandError> {
        self.serve(txn)
    }
    fn woken(
        &self,
        txn: &mut Txn<'_, '_>,
        i: usize,
        count: usize,
    ) -> Result<Option<Reply>, CommandError> {
        let a = &self.args;
        // Another type now: stay blocked, as redis does for XREAD.
        let Ok(Some(row)) = txn.live(a.db, &a.keys[i], Kind::Stream) else {
            return Ok(None);
        };
        let state = txn.stream_state(&row)?;
        let gt = crate::sync::lock(&self.waits)
            .get(i)
            .copied()
            .unwrap_or(StreamId::MIN);
        if state.last_id <= gt {
            return Ok(None);
        }
        let Some(start) = gt.next() else {
            return Ok(None);
        };
        let entries = txn.stream_range(row.id, start, StreamId::MAX, count, false)?;
        Ok(Some(entries_reply(entries)))
    }
}

/// `XREADGROUP GROUP group consumer [COUNT count] [BLOCK milliseconds]
/// [NOACK] STREAMS key [key ...] id [id ...]`: a write, or with BLOCK a
/// blocking command.
pub struct XReadGroup {
    args: ReadArgs,
}

impl XReadGroup {
    fn group(&self) -> (&[u8], &[u8]) {
        let (g, c) = self.args.group.as_ref().expect("parsed with GROUP");
        (g, c)
    }

    /// Serves one stream for the group: history from the consumer's own
    /// pending entries, or new entries past the group's last ID.
    fn serve_one(
        &self,
        txn: &mut Txn<'_, '_>,
        key: &[u8],
        from: ReadFrom,
        count: usize,
    ) -> Result<Option<Reply>, CommandError> {
        let a = &self.args;
        let (gname, consumer) = self.group();
        let mut slot = txn.open(a.db, key, Kind::Stream)?;
        let row = slot.row().ok_or_else(|| nogroup_readgroup(key, gname))?;
        match from {
            ReadFrom::After(id) => {
                if txn.stream_group(row.id, gname)?.is_none() {
                    return Err(nogroup_readgroup(key, gname));
                }
                txn.stream_see_consumer(&mut slot, gname, consumer)?;
                // Past the ID given, as for new entries.
                let history = match id.next() {
                    Some(start) => txn.stream_history(&mut slot, gname, consumer, start, count)?,
                    None => Vec::new(),
                };
                Ok(Some(Reply::Array(
                    history
                        .into_iter()
                        .map(|(id, fields)| {
                            Reply::Array(vec![
                                id_reply(id),
                                fields.map_or(Reply::NilArray, fields_reply),
                            ])
                        })
                        .collect(),
                )))
            }
            _ => {
                // The group and the stream's state in one statement; the
                // first entry's ID only where the group's counter needs it.
                let (mut group, mut state) = txn
                    .stream_group_and_state(&row, gname)?
                    .ok_or_else(|| nogroup_readgroup(key, gname))?;
                if state.length == 0 || state.last_id <= group.last_id {
                    return Ok(None);
                }
                if state.delivery_needs_first_id(&group) {
                    state.first_id = txn.stream_first_id(row.id)?;
                }
                let Some(start) = group.last_id.next() else {
                    return Ok(None);
                };
                // Served only when an entry past the group's last ID is
                // left (redis compares with the last live entry's ID): the
                // delivery finds none then, and writes nothing.
                let delivery = Delivery {
                    consumer,
                    start,
                    count,
                    noack: a.noack,
                };
                let entries = txn.stream_deliver(&mut slot, &state, &mut group, delivery)?;
                if entries.is_empty() {
                    return Ok(None);
                }
                Ok(Some(entries_reply(entries)))
            }
        }
    }

    fn serve(&self, txn: &mut Txn<'_, '_>) -> Result<Option<Reply>, CommandError> {
        let a = &self.args;
        let (gname, _) = self.group();
        // Every key and group is checked before anything is served (one
        // key is checked where it is served, with the same errors).
        for key in a.keys.iter().filter(|_| a.keys.len() > 1) {
            let row = stream(txn, a.db, key)?;
            let found = match row {
                Some(r) => txn.stream_group(r.id, gname)?.is_some(),
                None => false,
            };
            if !found {
                return Err(nogroup_readgroup(key, gname));
            }
        }
        let mut served = Vec::new();
        for (key, from) in a.keys.iter().zip(&a.ids) {
            if let Some(r) = self.serve_one(txn, key, *from, a.count())? {
                served.push((key.clone(), r));
            }
        }
        if served.is_empty() {
            return Ok(None);
        }
        Ok(Some(a.reply(served)))
    }
}

fn nogroup_readgroup(key: &[u8], group: &[u8]) -> CommandError {
    CommandError::Raw(format!(
        "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
        lossy(key),
        lossy(group)
    ))
}

impl WriteCommand for XReadGroup {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(XReadGroup {
            args: ReadArgs::parse(args, s, true)?,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        Ok(self.serve(txn)?.unwrap_or(Reply::NilArray))
    }
}

impl StreamReader for XReadGroup {
    fn args(&self) -> &ReadArgs {
        &self.args
    }
    fn first_try(&self, txn: &mut Txn<'_, '_>) -> Result<Option<Reply>, CommandError> {
        self.serve(txn)
    }
    fn woken(
        &self,
        txn: &mut Txn<'_, '_>,
        i: usize,
        count: usize,
    ) -> Result<Option<Reply>, CommandError> {
        let (db, key) = (self.args.db, &self.args.keys[i]);
        let (gname, _) = self.group();
        let row = match txn.live(db, key, Kind::Stream) {
            Ok(Some(row)) => row,
            _ => {
                return Err(CommandError::Raw(
                    "UNBLOCKED the stream key no longer exists".into(),
                ))
            }
        };
        if txn.stream_group(row.id, gname)?.is_none() {
            return Err(CommandError::Raw(
                "NOGROUP the consumer group this client was blocked on no longer exists".into(),
            ));
        }
        self.serve_one(txn, key, ReadFrom::New, count)
    }
}

/// What XREAD and XREADGROUP differ in as blocking commands; the one
/// [`Blocker`] below serves both (keys, timeout, which stream a write
/// woke, how many entries a woken read takes, the reply's shape).
trait StreamReader: Send + Sync + 'static {
    /// The parsed arguments.
    fn args(&self) -> &ReadArgs;
    /// The first try, over every stream in order: the command's own run.
    fn first_try(&self, txn: &mut Txn<'_, '_>) -> Result<Option<Reply>, CommandError>;
    /// Serves the `i`th stream, which a write has just changed, up to
    /// `count` entries: its entries' reply, or `Ok(None)` to stay blocked.
    fn woken(
        &self,
        txn: &mut Txn<'_, '_>,
        i: usize,
        count: usize,
    ) -> Result<Option<Reply>, CommandError>;
}

/// XREAD or XREADGROUP as a blocking command.
struct Blocking<R>(R);

impl<R: StreamReader> Blocker for Blocking<R> {
    fn keys(&self) -> Vec<(u32, Bytes)> {
        let a = self.0.args();
        a.keys.iter().map(|k| (a.db, k.clone())).collect()
    }
    fn timeout(&self) -> Option<Duration> {
        self.0.args().block.flatten()
    }
    fn try_pop(
        &self,
        txn: &mut Txn<'_, '_>,
        ready: Option<(u32, &[u8])>,
    ) -> Result<Option<Reply>, CommandError> {
        let Some((db, key)) = ready else {
            return self.0.first_try(txn);
        };
        let a = self.0.args();
        let Some(i) = a.keys.iter().position(|k| db == a.db && &k[..] == key) else {
            return Ok(None);
        };
        // A woken read without COUNT takes at most 1000 entries (redis's
        // XREAD_BLOCKED_DEFAULT_COUNT).
        let count = if a.count == 0 { 1000 } else { a.count() };
        Ok(self
            .0
            .woken(txn, i, count)?
            .map(|r| a.reply(vec![(a.keys[i].clone(), r)])))
    }
}

/// XREAD's plan: a read, or a blocking command with BLOCK.
fn plan_xread(s: &mut Session, args: Args) -> Result<Plan, CommandError> {
    let cmd = crate::command::parse_all(args, &s.ctx(), XRead::parse)?;
    if cmd.args.block.is_some() {
        return Ok(Plan::Block(std::sync::Arc::new(Blocking(cmd))));
    }
    let (f, needs) = crate::command::read_job(cmd, s);
    Ok(Plan::Read(f, needs))
}

/// XREADGROUP's plan: a write, or a blocking command with BLOCK.
fn plan_xreadgroup(s: &mut Session, args: Args) -> Result<Plan, CommandError> {
    let cmd = crate::command::parse_all(args, &s.ctx(), XReadGroup::parse)?;
    if cmd.args.block.is_some() {
        return Ok(Plan::Block(std::sync::Arc::new(Blocking(cmd))));
    }
    Ok(Plan::Write(crate::command::write_op(cmd)))
}

/// `XGROUP CREATE|SETID|DESTROY|CREATECONSUMER|DELCONSUMER|HELP ...`
pub struct XGroup {
    db: u32,
    argv: Vec<Bytes>,
}

impl WriteCommand for XGroup {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let mut argv = vec![Bytes::from_static(b"xgroup")];
        argv.extend(args.rest());
        Ok(XGroup { db: s.db, argv })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let argv = &self.argv;
        let argc = argv.len();
        let opt = crate::args::upper(&argv[1]);
        let syntax = || {
            err(&format!(
                "unknown subcommand or wrong number of arguments for '{}'. Try XGROUP HELP.",
                lossy(&argv[1])
            ))
        };
        let mut mkstream = false;
        let mut entries_read = ENTRIES_READ_UNKNOWN;
        if argc == 2 && opt == "HELP" {
            return Ok(super::common::help(
                "XGROUP",
                &[
                    "CREATE <key> <groupname> <id|$> [option]",
                    "    Create a new consumer group. Options are:",
                    "    * MKSTREAM",
                    "      Create the empty stream if it does not exist.",
                    "    * ENTRIESREAD entries_read",
                    "      Set the group's entries_read counter (internal use).",
                    "CREATECONSUMER <key> <groupname> <consumer>",
                    "    Create a new consumer in the specified group.",
                    "DELCONSUMER <key> <groupname> <consumer>",
                    "    Remove the specified consumer.",
                    "DESTROY <key> <groupname>",
                    "    Remove the specified group.",
                    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
                    "    Set the current group ID and entries_read counter.",
                ],
            ));
        }
        if argc < 4 {
            return Err(syntax());
        }
        let (create, setid) = (opt == "CREATE", opt == "SETID");
        let mut i = 5;
        while i < argc {
            if create && argv[i].eq_ignore_ascii_case(b"MKSTREAM") {
                mkstream = true;
                i += 1;
            } else if (create || setid)
                && argv[i].eq_ignore_ascii_case(b"ENTRIESREAD")
                && i + 1 < argc
            {
                entries_read = integer(&argv[i + 1])?;
                if entries_read < 0 && entries_read != ENTRIES_READ_UNKNOWN {
                    return Err(err("value for ENTRIESREAD must be positive or -1"));
                }
                i += 2;
            } else {
                return Err(syntax());
            }
        }
        let (key, gname) = (&argv[2][..], &argv[3][..]);
        let (mut slot, state) = open_stream(txn, self.db, key)?;
        let group = match slot.row() {
            Some(r) => txn.stream_group(r.id, gname)?,
            None => None,
        };
        if !mkstream {
            if state.is_none() {
                return Err(err("The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically."));
            }
            if group.is_none() && matches!(&opt[..], "SETID" | "CREATECONSUMER" | "DELCONSUMER") {
                return Err(nogroup_for(key, gname));
            }
        }
        match &opt[..] {
            "CREATE" if (5..=8).contains(&argc) => {
                let id = if &argv[4][..] == b"$" {
                    state.map_or(StreamId::MIN, |s| s.last_id)
                } else {
                    strict_id(&argv[4])?
                };
                if group.is_some() {
                    return Err(CommandError::Raw(
                        "BUSYGROUP Consumer Group name already exists".into(),
                    ));
                }
                if slot.is_empty() {
                    txn.stream_create(&mut slot)?;
                }
                txn.stream_put_group(
                    &mut slot,
                    &Group {
                        name: gname.to_vec(),
                        last_id: id,
                        entries_read,
                    },
                )?;
                txn.notify(STREAM, "xgroup-create", self.db, key);
                Ok(Reply::Ok)
            }
            "SETID" if argc == 5 || argc == 7 => {
                let id = if &argv[4][..] == b"$" {
                    state.map_or(StreamId::MIN, |s| s.last_id)
                } else {
                    loose_id(&argv[4], 0)?
                };
                txn.stream_put_group(
                    &mut slot,
                    &Group {
                        name: gname.to_vec(),
                        last_id: id,
                        entries_read,
                    },
                )?;
                txn.notify(STREAM, "xgroup-setid", self.db, key);
                Ok(Reply::Ok)
            }
            "DESTROY" if argc == 4 => {
                let destroyed = txn.stream_destroy_group(&mut slot, gname)?;
                if destroyed {
                    txn.notify(STREAM, "xgroup-destroy", self.db, key);
                }
                Ok(Reply::Int(i64::from(destroyed)))
            }
            "CREATECONSUMER" if argc == 5 => Ok(Reply::Int(i64::from(
                txn.stream_create_consumer(&mut slot, gname, &argv[4])?,
            ))),
            "DELCONSUMER" if argc == 5 => {
                let pending = txn.stream_delete_consumer(&mut slot, gname, &argv[4])?;
                if pending.is_some() {
                    txn.notify(STREAM, "xgroup-delconsumer", self.db, key);
                }
                Ok(Reply::Int(pending.unwrap_or(0)))
            }
            _ => Err(syntax()),
        }
    }
}

/// `XACK key group id [id ...]`: how many entries were acknowledged.
pub struct XAck {
    db: u32,
    key: Bytes,
    group: Bytes,
    ids: Vec<Bytes>,
}

impl WriteCommand for XAck {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(XAck {
            db: s.db,
            key: args.next()?,
            group: args.next()?,
            ids: args.rest(),
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let mut slot = txn.open(self.db, &self.key, Kind::Stream)?;
        let Some(row) = slot.row() else {
            return Ok(Reply::Int(0));
        };
        // A missing group acknowledges nothing, whatever the IDs (redis
        // looks it up before parsing them): its pending list is empty, so
        // the deletes find nothing, and it is looked up only for an error.
        let ids = match self
            .ids
            .iter()
            .map(|a| strict_id(a))
            .collect::<Result<Vec<_>, _>>()
        {
            Ok(ids) => ids,
            Err(e) => {
                return match txn.stream_group(row.id, &self.group)? {
                    Some(_) => Err(e),
                    None => Ok(Reply::Int(0)),
                }
            }
        };
        let mut acked = 0;
        for id in ids {
            if txn.stream_ack(&mut slot, &self.group, id)? {
                acked += 1;
            }
        }
        Ok(Reply::Int(acked))
    }
}

/// `XPENDING key group [[IDLE min-idle-time] start end count [consumer]]`
pub struct XPending {
    db: u32,
    key: Bytes,
    group: Bytes,
    /// The extended form: start, end, count, minimum idle, consumer.
    range: Option<(StreamId, StreamId, i64, i64, Option<Bytes>)>,
}

impl ReadCommand for XPending {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let key = args.next()?;
        let group = args.next()?;
        let rest = args.rest();
        let argc = rest.len() + 3;
        if argc != 3 && !(6..=9).contains(&argc) {
            return Err(CommandError::Syntax);
        }
        let mut range = None;
        if argc >= 6 {
            let mut at = 0;
            let mut minidle = 0;
            if rest[0].eq_ignore_ascii_case(b"IDLE") {
                minidle = integer(&rest[1])?;
                if argc < 8 {
                    return Err(CommandError::Syntax);
                }
                at = 2;
            }
            let count = integer(&rest[at + 2])?.max(0);
            let start = start_id(&rest[at])?;
            let end = end_id(&rest[at + 1])?;
            let consumer = rest.get(at + 3).cloned();
            range = Some((start, end, count, minidle, consumer));
        }
        Ok(XPending {
            db: s.db,
            key,
            group,
            range,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let row = stream(view, self.db, &self.key)?;
        let Some(row) = row.filter(|r| {
            view.stream_group(r.id, &self.group)
                .ok()
                .flatten()
                .is_some()
        }) else {
            return Err(nogroup_key(&self.key, &self.group));
        };
        let Some((start, end, count, minidle, consumer)) = self.range else {
            let sum = view.stream_pending_summary(row.id, &self.group)?;
            let Some((lo, hi)) = sum.bounds else {
                return Ok(Reply::Array(vec![
                    Reply::Int(0),
                    Reply::Nil,
                    Reply::Nil,
                    Reply::NilArray,
                ]));
            };
            return Ok(Reply::Array(vec![
                Reply::Int(sum.count),
                id_reply(lo),
                id_reply(hi),
                Reply::Array(
                    sum.consumers
                        .into_iter()
                        .map(|(name, n)| {
                            Reply::Array(vec![Reply::bulk(name), Reply::bulk(n.to_string())])
                        })
                        .collect(),
                ),
            ]));
        };
        if let Some(c) = &consumer {
            if !view.stream_consumer_exists(row.id, &self.group, c)? {
                return Ok(Reply::Array(Vec::new()));
            }
        }
        if count == 0 {
            return Ok(Reply::Array(Vec::new()));
        }
        let now = view.now();
        let limit = if minidle != 0 { 0 } else { count as usize };
        let nacks =
            view.stream_pending(row.id, &self.group, start, end, limit, consumer.as_deref())?;
        let out: Vec<Reply> = nacks
            .into_iter()
            .filter(|n| minidle == 0 || now - n.delivered >= minidle)
            .take(count as usize)
            .map(|n| {
                Reply::Array(vec![
                    id_reply(n.id),
                    Reply::bulk(n.consumer),
                    Reply::Int((now - n.delivered).max(0)),
                    Reply::Int(n.count),
                ])
            })
            .collect();
        Ok(Reply::Array(out))
    }
}

/// The pending entries one XCLAIM or XAUTOCLAIM hands to its consumer:
/// the consumer is created on the first entry claimed, each claim moves
/// the entry's delivery time and count as both commands move them, and
/// each answers as its ID (JUSTID) or the whole entry.
struct Claimer<'a> {
    group: &'a [u8],
    consumer: &'a [u8],
    justid: bool,
    /// XCLAIM's RETRYCOUNT: the delivery count to set.
    retry: Option<i64>,
    /// When the entries count as delivered.
    delivered: i64,
    /// Whether the consumer has been seen (created) yet.
    seen: bool,
    claimed: Vec<Reply>,
}

impl Claimer<'_> {
    fn take(
        &mut self,
        txn: &mut Txn<'_, '_>,
        slot: &mut Slot<'_>,
        mut nack: Nack,
        fields: Fields,
    ) -> Result<(), CommandError> {
        if !self.seen {
            txn.stream_see_consumer(slot, self.group, self.consumer)?;
            self.seen = true;
        }
        // RETRYCOUNT sets the count; otherwise a claim counts as a
        // delivery, except with JUSTID.
        match self.retry {
            Some(r) => nack.count = r,
            None if !self.justid => nack.count += 1,
            None => {}
        }
        nack.consumer = self.consumer.to_vec();
        nack.delivered = self.delivered;
        txn.stream_put_nack(slot, self.group, &nack)?;
        self.claimed.push(if self.justid {
            id_reply(nack.id)
        } else {
            entry_reply((nack.id, fields))
        });
        Ok(())
    }
}

/// `XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms] [TIME
/// unix-time-milliseconds] [RETRYCOUNT count] [FORCE] [JUSTID] [LASTID
/// lastid]`
pub struct XClaim {
    db: u32,
    argv: Vec<Bytes>,
}

impl WriteCommand for XClaim {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let mut argv = vec![Bytes::from_static(b"xclaim")];
        argv.extend(args.rest());
        Ok(XClaim { db: s.db, argv })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let argv = &self.argv;
        let (key, gname, name) = (&argv[1][..], &argv[2][..], &argv[3][..]);
        let (mut slot, _) = open_stream(txn, self.db, key)?;
        let sid = slot.row().map_or(0, |r| r.id);
        let Some(mut group) = (match slot.row() {
            Some(r) => txn.stream_group(r.id, gname)?,
            None => None,
        }) else {
            return Err(nogroup_key(key, gname));
        };
        let minidle = integer_or(&argv[4], "Invalid min-idle-time argument for XCLAIM")?.max(0);
        let mut ids = Vec::new();
        let mut j = 5;
        while j < argv.len() {
            match strict_id(&argv[j]) {
                Ok(id) => ids.push(id),
                Err(_) => break,
            }
            j += 1;
        }
        let now = txn.now();
        let (mut force, mut justid) = (false, false);
        let (mut delivery, mut retry, mut last_id) = (None, None, StreamId::MIN);
        while j < argv.len() {
            let more = argv.len() - 1 - j;
            let opt = &argv[j];
            if opt.eq_ignore_ascii_case(b"FORCE") {
                force = true;
            } else if opt.eq_ignore_ascii_case(b"JUSTID") {
                justid = true;
            } else if opt.eq_ignore_ascii_case(b"IDLE") && more > 0 {
                j += 1;
                let idle = integer_or(&argv[j], "Invalid IDLE option argument for XCLAIM")?;
                delivery = Some(now.wrapping_sub(idle));
            } else if opt.eq_ignore_ascii_case(b"TIME") && more > 0 {
                j += 1;
                delivery = Some(integer_or(
                    &argv[j],
                    "Invalid TIME option argument for XCLAIM",
                )?);
            } else if opt.eq_ignore_ascii_case(b"RETRYCOUNT") && more > 0 {
                j += 1;
                retry = Some(integer_or(
                    &argv[j],
                    "Invalid RETRYCOUNT option argument for XCLAIM",
                )?);
            } else if opt.eq_ignore_ascii_case(b"LASTID") && more > 0 {
                j += 1;
                last_id = strict_id(&argv[j])?;
            } else {
                return Err(CommandError::Raw(format!(
                    "ERR Unrecognized XCLAIM option '{}'",
                    lossy(opt)
                )));
            }
            j += 1;
        }
        if last_id > group.last_id {
            group.last_id = last_id;
            txn.stream_put_group(&mut slot, &group)?;
        }
        let delivered = match delivery {
            Some(d) if d < 0 || d > now => now,
            Some(d) => d,
            None => now,
        };
        let mut claimer = Claimer {
            group: gname,
            consumer: name,
            justid,
            retry: retry.filter(|r| *r >= 0),
            delivered,
            seen: false,
            claimed: Vec::new(),
        };
        for id in ids {
            let nack = txn.stream_nack(sid, gname, id)?;
            let Some(fields) = txn.stream_entry(sid, id)? else {
                if nack.is_some() {
                    txn.stream_ack(&mut slot, gname, id)?;
                }
                continue;
            };
            let nack = match nack {
                Some(n) => {
                    if minidle != 0 && now - n.delivered < minidle {
                        continue;
                    }
                    n
                }
                None if force => Nack {
                    id,
                    consumer: Vec::new(),
                    delivered: now,
                    count: 0,
                },
                None => continue,
            };
            claimer.take(txn, &mut slot, nack, fields)?;
        }
        Ok(Reply::Array(claimer.claimed))
    }
}

/// `XAUTOCLAIM key group consumer min-idle-time start [COUNT count]
/// [JUSTID]`
pub struct XAutoClaim {
    db: u32,
    key: Bytes,
    group: Bytes,
    consumer: Bytes,
    minidle: i64,
    start: StreamId,
    count: i64,
    justid: bool,
}

impl WriteCommand for XAutoClaim {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let key = args.next()?;
        let group = args.next()?;
        let consumer = args.next()?;
        let minidle = integer_or(
            &args.next()?,
            "Invalid min-idle-time argument for XAUTOCLAIM",
        )?
        .max(0);
        let start = start_id(&args.next()?)?;
        let rest = args.rest();
        let (mut count, mut justid) = (100, false);
        let mut j = 0;
        while j < rest.len() {
            let more = rest.len() - 1 - j;
            if rest[j].eq_ignore_ascii_case(b"COUNT") && more > 0 {
                let max = i64::MAX / 16;
                count = match parse_i64(&rest[j + 1]) {
                    Some(n) if (1..=max).contains(&n) => n,
                    _ => return Err(err("COUNT must be > 0")),
                };
                j += 1;
            } else if rest[j].eq_ignore_ascii_case(b"JUSTID") {
                justid = true;
            } else {
                return Err(CommandError::Syntax);
            }
            j += 1;
        }
        Ok(XAutoClaim {
            db: s.db,
            key,
            group,
            consumer,
            minidle,
            start,
            count,
            justid,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let (mut slot, _) = open_stream(txn, self.db, &self.key)?;
        let sid = slot.row().map_or(0, |r| r.id);
        let found = match slot.row() {
            Some(r) => txn.stream_group(r.id, &self.group)?.is_some(),
            None => false,
        };
        if !found {
            return Err(nogroup_key(&self.key, &self.group));
        }
        let now = txn.now();
        let mut count = self.count;
        let attempts = count.saturating_mul(10);
        // What the scan may examine, and the entry after it (the cursor).
        let want = usize::try_from(attempts.saturating_add(1)).unwrap_or(usize::MAX);
        let page = txn.stream_pending(sid, &self.group, self.start, StreamId::MAX, want, None)?;
        let mut claimer = Claimer {
            group: &self.group,
            consumer: &self.consumer,
            justid: self.justid,
            retry: None,
            delivered: now,
            seen: false,
            claimed: Vec::new(),
        };
        let mut deleted = Vec::new();
        let mut next_id = StreamId::MIN;
        for (i, nack) in page.into_iter().enumerate() {
            if i as i64 >= attempts || count == 0 {
                next_id = nack.id;
                break;
            }
            let id = nack.id;
            let Some(fields) = txn.stream_entry(sid, id)? else {
                txn.stream_ack(&mut slot, &self.group, id)?;
                deleted.push(id);
                count -= 1;
                continue;
            };
            if self.minidle != 0 && now - nack.delivered < self.minidle {
                continue;
            }
            claimer.take(txn, &mut slot, nack, fields)?;
            count -= 1;
        }
        Ok(Reply::Array(vec![
            id_reply(next_id),
            Reply::Array(claimer.claimed),
            Reply::Array(deleted.into_iter().map(id_reply).collect()),
        ]))
    }
}

/// `XINFO STREAM key [FULL [COUNT count]]`, `XINFO GROUPS key`, `XINFO
/// CONSUMERS key group`, `XINFO HELP`
pub struct XInfo {
    db: u32,
    argv: Vec<Bytes>,
}

impl ReadCommand for XInfo {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let mut argv = vec![Bytes::from_static(b"xinfo")];
        argv.extend(args.rest());
        Ok(XInfo { db: s.db, argv })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let argv = &self.argv;
        let opt = crate::args::upper(&argv[1]);
        let syntax = || {
            err(&format!(
                "unknown subcommand or wrong number of arguments for '{}'. Try XINFO HELP.",
                lossy(&argv[1])
            ))
        };
        if opt == "HELP" {
            if argv.len() != 2 {
                return Err(syntax());
            }
            return Ok(super::common::help(
                "XINFO",
                &[
                    "CONSUMERS <key> <groupname>",
                    "    Show consumers of <groupname>.",
                    "GROUPS <key>",
                    "    Show the stream consumer groups.",
                    "STREAM <key> [FULL [COUNT <count>]",
                    "    Show information about the stream.",
                ],
            ));
        }
        if argv.len() < 3 {
            return Err(syntax());
        }
        let key = &argv[2];
        let Some(row) = stream(view, self.db, key)? else {
            return Err(err("no such key"));
        };
        let state = view.stream_state(&row)?;
        let now = view.now();
        match &opt[..] {
            "CONSUMERS" if argv.len() == 4 => {
                if view.stream_group(row.id, &argv[3])?.is_none() {
                    return Err(nogroup_for(key, &argv[3]));
                }
                let consumers = view.stream_consumers(row.id, &argv[3])?;
                Ok(Reply::Array(
                    consumers
                        .into_iter()
                        .map(|c| {
                            map(vec![
                                ("name", Reply::bulk(c.name)),
                                ("pending", Reply::Int(c.pending)),
                                ("idle", Reply::Int((now - c.seen).max(0))),
                            ])
                        })
                        .collect(),
                ))
            }
            "GROUPS" if argv.len() == 3 => {
                let groups = view.stream_groups(row.id)?;
                let mut out = Vec::with_capacity(groups.len());
                for g in groups {
                    let consumers = view.stream_consumers(row.id, &g.name)?.len() as i64;
                    let pending = view.stream_pending_count(row.id, &g.name)?;
                    out.push(map(vec![
                        ("name", Reply::bulk(g.name.clone())),
                        ("consumers", Reply::Int(consumers)),
                        ("pending", Reply::Int(pending)),
                        ("last-delivered-id", id_reply(g.last_id)),
                        ("entries-read", entries_read_reply(&g)),
                        ("lag", state.lag(&g).map_or(Reply::Nil, Reply::Int)),
                    ]));
                }
                Ok(Reply::Array(out))
            }
            "STREAM" => stream_info(view, &row, &state, &argv[3..]).map_err(|e| match e {
                CommandError::Syntax => syntax(),
                e => e,
            }),
            _ => Err(syntax()),
        }
    }
}

fn entries_read_reply(g: &Group) -> Reply {
    if g.entries_read == ENTRIES_READ_UNKNOWN {
        Reply::Nil
    } else {
        Reply::Int(g.entries_read)
    }
}

/// XINFO STREAM's answer (`xinfoReplyWithStreamInfo`).
fn stream_info(
    view: &View<'_, '_>,
    row: &KeyRow,
    state: &StreamState,
    opts: &[Bytes],
) -> Result<Reply, CommandError> {
    let mut full = false;
    let mut count: i64 = 10;
    if !opts.is_empty() {
        if (opts.len() != 1 && opts.len() != 3) || !opts[0].eq_ignore_ascii_case(b"FULL") {
            return Err(CommandError::Syntax);
        }
        full = true;
        if opts.len() == 3 {
            if !opts[1].eq_ignore_ascii_case(b"COUNT") {
                return Err(CommandError::Syntax);
            }
            count = integer(&opts[2])?;
            if count < 0 {
                count = 10;
            }
        }
    }
    let mut out = vec![
        ("length", Reply::Int(state.length)),
        ("radix-tree-keys", Reply::Int(state.nodes)),
        ("radix-tree-nodes", Reply::Int(radix_nodes(state.nodes))),
        ("last-generated-id", id_reply(state.last_id)),
        ("max-deleted-entry-id", id_reply(state.max_deleted)),
        ("entries-added", Reply::Int(state.entries_added)),
        ("recorded-first-entry-id", id_reply(state.first_id)),
    ];
    if !full {
        out.push(("groups", Reply::Int(view.stream_group_count(row.id)?)));
        let first = view.stream_range(row.id, StreamId::MIN, StreamId::MAX, 1, false)?;
        let last = view.stream_range(row.id, StreamId::MIN, StreamId::MAX, 1, true)?;
        out.push((
            "first-entry",
            first.into_iter().next().map_or(Reply::Nil, entry_reply),
        ));
        out.push((
            "last-entry",
            last.into_iter().next().map_or(Reply::Nil, entry_reply),
        ));
        return Ok(map(out));
    }
    let n = count as usize;
    out.push((
        "entries",
        entries_reply(view.stream_range(row.id, StreamId::MIN, StreamId::MAX, n, false)?),
    ));
    let mut groups = Vec::new();
    for g in view.stream_groups(row.id)? {
        let pel = view.stream_pending(row.id, &g.name, StreamId::MIN, StreamId::MAX, n, None)?;
        let mut consumers = Vec::new();
        for c in view.stream_consumers(row.id, &g.name)? {
            let own = view.stream_pending(
                row.id,
                &g.name,
                StreamId::MIN,
                StreamId::MAX,
                n,
                Some(&c.name),
            )?;
            consumers.push(map(vec![
                ("name", Reply::bulk(c.name)),
                ("seen-time", Reply::Int(c.seen)),
                ("pel-count", Reply::Int(c.pending)),
                (
                    "pending",
                    Reply::Array(
                        own.into_iter()
                            .map(|p| {
                                Reply::Array(vec![
                                    id_reply(p.id),
                                    Reply::Int(p.delivered),
                                    Reply::Int(p.count),
                                ])
                            })
                            .collect(),
                    ),
                ),
            ]));
        }
        groups.push(map(vec![
            ("name", Reply::bulk(g.name.clone())),
            ("last-delivered-id", id_reply(g.last_id)),
            ("entries-read", entries_read_reply(&g)),
            ("lag", state.lag(&g).map_or(Reply::Nil, Reply::Int)),
            (
                "pel-count",
                Reply::Int(view.stream_pending_count(row.id, &g.name)?),
            ),
            (
                "pending",
                Reply::Array(
                    pel.into_iter()
                        .map(|p| {
                            Reply::Array(vec![
                                id_reply(p.id),
                                Reply::bulk(p.consumer),
                                Reply::Int(p.delivered),
                                Reply::Int(p.count),
                            ])
                        })
                        .collect(),
                ),
            ),
            ("consumers", Reply::Array(consumers)),
        ]));
    }
    out.push(("groups", Reply::Array(groups)));
    Ok(map(out))
}

/// A stand-in for redis's `radix-tree-nodes`, which counts the inner
/// nodes of its radix tree (respite has none): one more than the keys, as
/// redis reports for a stream of one node.
fn radix_nodes(keys: i64) -> i64 {
    keys + 1
}

pub(crate) fn commands() -> Vec<Spec> {
    vec![
        Spec::write::<XAck>("xack"),
        Spec::write::<XAdd>("xadd"),
        Spec::write::<XAutoClaim>("xautoclaim"),
        Spec::write::<XClaim>("xclaim"),
        Spec::write::<XDel>("xdel"),
        Spec::write::<XGroup>("xgroup")
            .with_keys([2, 2, 1])
            .with_subcommands(
                "XGROUP",
                &[
                    "create",
                    "createconsumer",
                    "delconsumer",
                    "destroy",
                    "help",
                    "setid",
                ],
            ),
        Spec::read::<XInfo>("xinfo")
            .with_keys([2, 2, 1])
            .with_subcommands("XINFO", &["consumers", "groups", "help", "stream"]),
        Spec::read::<XLen>("xlen"),
        Spec::read::<XPending>("xpending"),
        Spec::read::<XRange<false>>("xrange"),
        Spec::read::<XRead>("xread").planned_by(plan_xread),
        Spec::write::<XReadGroup>("xreadgroup").planned_by(plan_xreadgroup),
        Spec::read::<XRange<true>>("xrevrange"),
        Spec::write::<XSetId>("xsetid"),
        Spec::write::<XTrim>("xtrim"),
    ]
}

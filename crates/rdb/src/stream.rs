//! Streams (RDB types 15 and 19): entries in listpacks, the stream's
//! counters, and its consumer groups with their pending entries lists.
//!
//! Redis keeps a stream's entries in a radix tree of listpacks, each keyed
//! by the 128-bit big-endian ID of its *master entry*. A listpack starts
//! with the master entry (live count, deleted count, the master field
//! names, a 0 terminator) and then holds its entries, each its flags, its
//! ID as two deltas from the master ID, either its own field names or
//! (flag `SAMEFIELDS`) only the values of the master's fields, and the
//! number of listpack elements the entry took. An entry flagged `DELETED`
//! is a tombstone XDEL left; it is skipped here, as Redis skips it.
//!
//! After the nodes come the stream's length and last ID; type 19 (Redis
//! 7.0) adds the first ID, the greatest deleted ID and the count of
//! entries ever added. Then the groups: name, last delivered ID, (19:)
//! entries read, the group's pending entries (ID, last delivery time,
//! delivery count), and its consumers, each with its seen time and the IDs
//! of the pending entries it owns.
//!
//! Reading checks more than Redis does without `sanitize-dump-payload`:
//! entry IDs must be strictly increasing across the whole stream, the
//! declared length must be the number of live entries, group and consumer
//! names must be unique, and every pending entry must belong to exactly
//! one consumer. A value that passes can be stored as it is.

use std::io::Read;

use std::collections::HashSet;

use crate::packed::{self, Elem, ListpackWriter};
use crate::wire::{put_len, put_string, Input};
use crate::Error;

const FLAG_DELETED: i64 = 1;
const FLAG_SAMEFIELDS: i64 = 2;

/// Entries a node written by [`put_stream`] holds at most (Redis's
/// default `stream-node-max-entries`).
const NODE_ENTRIES: usize = 100;

/// A stream ID: milliseconds and sequence number.
pub type StreamId = (u64, u64);

/// One stream entry.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamEntry {
    pub id: StreamId,
    /// Field-value pairs in the order they were added.
    pub fields: Vec<(Vec<u8>, Vec<u8>)>,
}

/// A pending entry of a group: delivered, not acknowledged.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamNack {
    pub id: StreamId,
    /// The consumer that has it.
    pub consumer: Vec<u8>,
    /// Last delivery, Unix milliseconds.
    pub delivery_time: i64,
    pub delivery_count: u64,
}

/// A consumer of a group.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamConsumer {
    pub name: Vec<u8>,
    /// When it was last seen, Unix milliseconds.
    pub seen_time: i64,
}

/// A consumer group.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamGroup {
    pub name: Vec<u8>,
    pub last_id: StreamId,
    /// Entries read, -1 when unknown (Redis's `SCG_INVALID_ENTRIES_READ`).
    pub entries_read: i64,
    /// The pending entries, in ID order.
    pub pending: Vec<StreamNack>,
    pub consumers: Vec<StreamConsumer>,
}

/// A whole stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Stream {
    /// Live entries in ID order.
    pub entries: Vec<StreamEntry>,
    pub last_id: StreamId,
    pub first_id: StreamId,
    pub max_deleted: StreamId,
    pub entries_added: u64,
    pub groups: Vec<StreamGroup>,
}

fn bad(what: &'static str) -> Error {
    Error::BadData(what)
}

fn int(e: Option<&Elem<'_>>) -> Result<i64, Error> {
    match e {
        Some(Elem::Int(i)) => Ok(*i),
        Some(Elem::Str(s)) => std::str::from_utf8(s)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or(bad("stream listpack: integer expected")),
        None => Err(bad("stream listpack cut short")),
    }
}

fn bytes(e: Option<&Elem<'_>>) -> Result<Vec<u8>, Error> {
    e.map(|e| e.to_bytes())
        .ok_or(bad("stream listpack cut short"))
}

fn raw_id<R: Read>(inp: &mut Input<R>) -> Result<StreamId, Error> {
    let b: [u8; 16] = inp.array()?;
    Ok(id_from_raw(&b))
}

fn id_from_raw(b: &[u8]) -> StreamId {
    let mut ms = [0u8; 8];
    let mut seq = [0u8; 8];
    ms.copy_from_slice(&b[..8]);
    seq.copy_from_slice(&b[8..16]);
    (u64::from_be_bytes(ms), u64::from_be_bytes(seq))
}

fn id_to_raw(id: StreamId) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&id.0.to_be_bytes());
    b[8..].copy_from_slice(&id.1.to_be_bytes());
    b
}

fn len_id<R: Read>(inp: &mut Input<R>) -> Result<StreamId, Error> {
    Ok((inp.len()?, inp.len()?))
}

/// Decodes one node's listpack, appending its live entries to `out`.
fn read_node(master_id: StreamId, lp: &[u8], out: &mut Vec<StreamEntry>) -> Result<(), Error> {
    let elems = packed::listpack(lp)?;
    if elems.is_empty() {
        return Err(bad("empty listpack inside a stream"));
    }
    let mut it = elems.iter();
    let count = int(it.next())?;
    let deleted = int(it.next())?;
    let nmaster = int(it.next())?;
    if count < 0 || deleted < 0 || nmaster < 0 || nmaster as usize > elems.len() {
        return Err(bad("stream master entry"));
    }
    let mut master = Vec::with_capacity(nmaster as usize);
    for _ in 0..nmaster {
        master.push(bytes(it.next())?);
    }
    if int(it.next())? != 0 {
        return Err(bad("stream master entry terminator"));
    }
    let (mut live, mut dead) = (0i64, 0i64);
    while let Some(flags) = it.next() {
        let flags = int(Some(flags))?;
        let ms = master_id.0.wrapping_add(int(it.next())? as u64);
        let seq = master_id.1.wrapping_add(int(it.next())? as u64);
        let fields = if flags & FLAG_SAMEFIELDS != 0 {
            let mut f = Vec::with_capacity(master.len());
            for name in &master {
                f.push((name.clone(), bytes(it.next())?));
            }
            f
        } else {
            let n = int(it.next())?;
            if n < 0 || n as usize > elems.len() {
                return Err(bad("stream entry field count"));
            }
            let mut f = Vec::with_capacity(n as usize);
            for _ in 0..n {
                let name = bytes(it.next())?;
                f.push((name, bytes(it.next())?));
            }
            f
        };
        let expected = if flags & FLAG_SAMEFIELDS != 0 {
            3 + fields.len() as i64
        } else {
            4 + 2 * fields.len() as i64
        };
        if int(it.next())? != expected {
            return Err(bad("stream entry lp-count"));
        }
        if flags & FLAG_DELETED != 0 {
            dead += 1;
            continue;
        }
        live += 1;
        if out.last().is_some_and(|e| e.id >= (ms, seq)) {
            return Err(bad("stream entries out of order"));
        }
        out.push(StreamEntry {
            id: (ms, seq),
            fields,
        });
    }
    if live != count || dead != deleted {
        return Err(bad("stream node counts"));
    }
    Ok(())
}

/// Redis's `streamEstimateDistanceFromFirstEverEntry`: the entries-read
/// counter of a group whose last ID is `id`, for a type 15 stream, which
/// did not store it.
fn estimate_entries_read(s: &Stream, id: StreamId) -> i64 {
    let added = s.entries_added as i64;
    let length = s.entries.len() as i64;
    if added == 0 {
        return 0;
    }
    if length == 0 && id <= s.last_id {
        return added;
    }
    if id == s.last_id {
        return added;
    } else if id > s.last_id {
        return -1;
    }
    if s.max_deleted == (0, 0) || s.max_deleted < s.first_id {
        if id < s.first_id {
            return added - length;
        } else if id == s.first_id {
            return added - length + 1;
        }
    }
    -1
}

/// Reads the body of a stream of RDB type 15 (`v2` false) or 19.
pub(crate) fn read_stream<R: Read>(inp: &mut Input<R>, v2: bool) -> Result<Stream, Error> {
    let nodes = inp.len()?;
    let mut entries = Vec::new();
    for _ in 0..nodes {
        let key = inp.string()?;
        if key.len() != 16 {
            return Err(bad("stream node key is not a 128-bit ID"));
        }
        let lp = inp.string()?;
        read_node(id_from_raw(&key), &lp, &mut entries)?;
    }
    let length = inp.len()?;
    if length != entries.len() as u64 {
        return Err(bad("stream length does not match its entries"));
    }
    let last_id = len_id(inp)?;
    if entries.last().is_some_and(|e| e.id > last_id) {
        return Err(bad("stream entry after its last ID"));
    }
    let mut s = Stream {
        first_id: entries.first().map_or((0, 0), |e| e.id),
        entries,
        last_id,
        max_deleted: (0, 0),
        entries_added: length,
        groups: Vec::new(),
    };
    if v2 {
        s.first_id = len_id(inp)?;
        s.max_deleted = len_id(inp)?;
        s.entries_added = inp.len()?;
    }
    let ngroups = inp.len()?;
    let mut names: HashSet<Vec<u8>> = HashSet::new();
    for _ in 0..ngroups {
        let name = inp.string()?;
        if !names.insert(name.clone()) {
            return Err(bad("duplicate consumer group"));
        }
        let last = len_id(inp)?;
        let entries_read = if v2 {
            inp.len()? as i64
        } else {
            estimate_entries_read(&s, last)
        };
        let npel = inp.len()?;
        let mut pending: Vec<StreamNack> = Vec::new();
        for _ in 0..npel {
            let id = raw_id(inp)?;
            let delivery_time = i64::from_le_bytes(inp.array()?);
            let delivery_count = inp.len()?;
            if pending.last().is_some_and(|n| n.id >= id) {
                return Err(bad("group PEL out of order"));
            }
            pending.push(StreamNack {
                id,
                consumer: Vec::new(),
                delivery_time,
                delivery_count,
            });
        }
        let nconsumers = inp.len()?;
        let mut consumers: Vec<StreamConsumer> = Vec::new();
        let mut cnames: HashSet<Vec<u8>> = HashSet::new();
        for _ in 0..nconsumers {
            let cname = inp.string()?;
            if !cnames.insert(cname.clone()) {
                return Err(bad("duplicate consumer"));
            }
            let seen_time = i64::from_le_bytes(inp.array()?);
            let n = inp.len()?;
            for _ in 0..n {
                let id = raw_id(inp)?;
                let at = pending
                    .binary_search_by(|p| p.id.cmp(&id))
                    .map_err(|_| bad("consumer PEL entry not in the group PEL"))?;
                if !pending[at].consumer.is_empty() {
                    return Err(bad("PEL entry owned by two consumers"));
                }
                pending[at].consumer = cname.clone();
            }
            consumers.push(StreamConsumer {
                name: cname,
                seen_time,
            });
        }
        if pending.iter().any(|p| p.consumer.is_empty()) {
            return Err(bad("PEL entry without a consumer"));
        }
        s.groups.push(StreamGroup {
            name,
            last_id: last,
            entries_read,
            pending,
            consumers,
        });
    }
    Ok(s)
}

/// Appends the body of a type 19 stream.
pub(crate) fn put_stream(out: &mut Vec<u8>, s: &Stream) {
    let chunks = s.entries.chunks(NODE_ENTRIES);
    put_len(out, chunks.len() as u64);
    for chunk in chunks {
        let master_id = chunk[0].id;
        let master: Vec<&[u8]> = chunk[0].fields.iter().map(|(f, _)| f.as_slice()).collect();
        let mut lp = ListpackWriter::new();
        lp.int(chunk.len() as i64);
        lp.int(0);
        lp.int(master.len() as i64);
        for f in &master {
            lp.string(f);
        }
        lp.int(0);
        for e in chunk {
            let same = e.fields.len() == master.len()
                && e.fields.iter().zip(&master).all(|((f, _), m)| f == m);
            lp.int(if same { FLAG_SAMEFIELDS } else { 0 });
            lp.int(e.id.0.wrapping_sub(master_id.0) as i64);
            lp.int(e.id.1.wrapping_sub(master_id.1) as i64);
            if same {
                for (_, v) in &e.fields {
                    lp.string(v);
                }
                lp.int(3 + e.fields.len() as i64);
            } else {
                lp.int(e.fields.len() as i64);
                for (f, v) in &e.fields {
                    lp.string(f);
                    lp.string(v);
                }
                lp.int(4 + 2 * e.fields.len() as i64);
            }
        }
        put_string(out, &id_to_raw(master_id));
        put_string(out, &lp.finish());
    }
    put_len(out, s.entries.len() as u64);
    put_len(out, s.last_id.0);
    put_len(out, s.last_id.1);
    put_len(out, s.first_id.0);
    put_len(out, s.first_id.1);
    put_len(out, s.max_deleted.0);
    put_len(out, s.max_deleted.1);
    put_len(out, s.entries_added);
    put_len(out, s.groups.len() as u64);
    for g in &s.groups {
        put_string(out, &g.name);
        put_len(out, g.last_id.0);
        put_len(out, g.last_id.1);
        put_len(out, g.entries_read as u64);
        put_len(out, g.pending.len() as u64);
        for n in &g.pending {
            out.extend_from_slice(&id_to_raw(n.id));
            out.extend_from_slice(&n.delivery_time.to_le_bytes());
            put_len(out, n.delivery_count);
        }
        put_len(out, g.consumers.len() as u64);
        for c in &g.consumers {
            put_string(out, &c.name);
            out.extend_from_slice(&c.seen_time.to_le_bytes());
            let own: Vec<&StreamNack> = g.pending.iter().filter(|n| n.consumer == c.name).collect();
            put_len(out, own.len() as u64);
            for n in own {
                out.extend_from_slice(&id_to_raw(n.id));
            }
        }
    }
}

//! HyperLogLog commands: PFADD, PFCOUNT, PFMERGE, PFDEBUG and PFSELFTEST.
//!
//! An HLL is a string value in redis's own layout (the engine's
//! `hyperloglog.rs` holds the algorithm), read and written through the
//! string operations, so GET, SET, APPEND, DUMP and RESTORE see and take
//! the same bytes redis-server does. Each command follows `hyperloglog.c`
//! of redis 7.0, its checks and their order: a string that is not an HLL
//! answers `WRONGTYPE Key is not a valid HyperLogLog string value.`, a
//! sparse form that does not add up `INVALIDOBJ Corrupted HLL object
//! detected`, and a value stored with an expiry keeps it.
//!
//! An HLL that exists is written back with `Txn::patch_string`: only the
//! bytes that changed reach the storage, so a PFADD to a dense HLL (12 KB,
//! a dozen pages) writes the pages its changed registers are on, a stale
//! PFCOUNT only the header's, and a sparse HLL changed in place its
//! opcode's page; a sparse update that changes the length is stored whole.
//!
//! PFCOUNT of one key answers the count cached in the value's header and,
//! when that cache is stale (a PFADD or PFMERGE changed the registers
//! since), computes the count and writes it back, as redis does, so GET
//! afterwards returns redis's bytes. Most PFCOUNTs find the cache valid
//! and need no write, so the command is planned as a read that may turn
//! into a write ([`Plan::ReadOrWrite`]): it runs on the read pool, and
//! only a stale cache sends it to the writer, where it is run again whole
//! (the value may have changed in between), computes, stores and answers.
//! PFCOUNT of several keys counts their union and never writes, as in
//! redis.

use bytes::Bytes;
use respite_engine::hyperloglog::{
    self, Corrupt, Encoding, Hll, NotHll, CORRUPT_ERROR, NOT_HLL_ERROR, REGISTERS,
};
use respite_engine::notify::STRING;
use respite_engine::{Txn, View, WriteOp};

use crate::args::{upper, Args};
use crate::command::call::Target;
use crate::command::{
    parse_all, touch, Ctx, LocalCommand, Plan, ReadCommand, ReadNeeds, Session, Spec, WriteCommand,
};
use crate::error::{CommandError, Lossy};
use crate::reply::Reply;

impl From<NotHll> for CommandError {
    fn from(_: NotHll) -> CommandError {
        CommandError::Raw(NOT_HLL_ERROR.into())
    }
}

impl From<Corrupt> for CommandError {
    fn from(_: Corrupt) -> CommandError {
        CommandError::Raw(CORRUPT_ERROR.into())
    }
}

/// The HLL stored at a key, with the key's expiry; `None` if the key does
/// not exist. WRONGTYPE for another type, or for a string that is not an
/// HLL.
fn load(
    view: &View<'_, '_>,
    db: u32,
    key: &[u8],
) -> Result<Option<(Hll, Option<i64>)>, CommandError> {
    match view.string_entry(db, key)? {
        None => Ok(None),
        Some((value, expire_at)) => Ok(Some((Hll::from_bytes(value)?, expire_at))),
    }
}

/// `PFADD key [element [element ...]]`: 1 if the HLL was created or a
/// register changed, else 0.
pub struct PfAdd {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The elements.
    elements: Vec<Bytes>,
    /// `hll-sparse-max-bytes` when the command was parsed.
    sparse_max: usize,
}

impl WriteCommand for PfAdd {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(PfAdd {
            db: s.db,
            key: args.next()?,
            elements: args.rest(),
            sparse_max: s.hll_sparse_max_bytes(),
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        if let Some(reply) = self.add_in_place(txn)? {
            return Ok(reply);
        }
        // The value as stored, to write back only what the elements change
        // (see `Txn::patch_string`); `None` for a new key.
        let (mut hll, expire_at, stored) = match load(txn, self.db, &self.key)? {
            Some((hll, expire_at)) => {
                let stored = hll.as_bytes().to_vec();
                (hll, expire_at, Some(stored))
            }
            None => (Hll::new(), None, None),
        };
        let mut changed = false;
        for element in &self.elements {
            match hll.add(element, self.sparse_max) {
                Ok(true) => changed = true,
                Ok(false) => {}
                Err(Corrupt) => {
                    // redis changes the value in place: the elements added
                    // before the corrupt part was reached stay added (the
                    // cache as the sparse updates left it), and the client
                    // gets the error.
                    if changed {
                        store(txn, self.db, &self.key, stored.as_deref(), &hll, expire_at)?;
                    }
                    return Ok(Reply::from(CommandError::from(Corrupt)));
                }
            }
        }
        let updated = changed || stored.is_none();
        if updated {
            hll.invalidate_cache();
            store(txn, self.db, &self.key, stored.as_deref(), &hll, expire_at)?;
            txn.notify(STRING, "pfadd", self.db, &self.key);
        }
        Ok(Reply::Int(i64::from(updated)))
    }
}

impl PfAdd {
    /// PFADD to a dense HLL kept as a long value: each element's register
    /// is read and, if it grows, written where it is, without reading or
    /// writing the rest of the 12 KB (see `Txn::open_long_string`). `None`
    /// when the key holds anything else (missing, sparse, short, not an
    /// HLL): [`PfAdd::apply`] then reads the value whole.
    fn add_in_place(&self, txn: &mut Txn<'_, '_>) -> Result<Option<Reply>, CommandError> {
        let Some(mut value) = txn.open_long_string(self.db, &self.key)? else {
            return Ok(None);
        };
        let mut header = [0u8; hyperloglog::HDR_SIZE];
        if value.len() < header.len() {
            return Ok(None);
        }
        value.read_at(&mut header, 0)?;
        if !hyperloglog::is_dense_header(&header, value.len()) {
            return Ok(None);
        }
        txn.note_found(&value);
        let mut updated = false;
        for element in &self.elements {
            let (index, count) = hyperloglog::pattern(element);
            let at = hyperloglog::dense_offset(index);
            let mut window = [0u8; 2];
            value.read_at(&mut window, at)?;
            if hyperloglog::raise_in_window(&mut window, index, count) {
                // The last register's window ends the value.
                let n = (value.len() - at).min(2);
                txn.write_long_string(&mut value, at, &window[..n])?;
                updated = true;
            }
        }
        if updated {
            // HLL_INVALIDATE_CACHE: the top bit of the cached count.
            let last = hyperloglog::HDR_SIZE - 1;
            if header[last] & 0x80 == 0 {
                txn.write_long_string(&mut value, last, &[header[last] | 0x80])?;
            }
            txn.notify(STRING, "pfadd", self.db, &self.key);
        }
        Ok(Some(Reply::Int(i64::from(updated))))
    }
}

/// Writes `hll` under `key`: over `stored` (the bytes the key holds now),
/// only what changed; a new key whole.
fn store(
    txn: &mut Txn<'_, '_>,
    db: u32,
    key: &[u8],
    stored: Option<&[u8]>,
    hll: &Hll,
    expire_at: Option<i64>,
) -> Result<(), CommandError> {
    match stored {
        Some(old) => txn.patch_string(db, key, old, hll.as_bytes(), expire_at)?,
        None => txn.put_string(db, key, hll.as_bytes(), expire_at)?,
    }
    Ok(())
}

/// What PFCOUNT finds at one key.
enum Single {
    /// The count the cache holds (0 for a missing key).
    Cached(u64),
    /// The cache is stale: the HLL, its expiry, and the count computed,
    /// for the cache.
    Stale(Hll, Option<i64>, u64),
}

/// `PFCOUNT key [key ...]`: the estimated cardinality of one HLL, or of
/// the union of several (a missing key counts as an empty HLL).
pub struct PfCount {
    /// Selected database.
    db: u32,
    /// The keys.
    keys: Vec<Bytes>,
}

impl PfCount {
    /// The union's count (`pfcountCommand`'s first case).
    fn union(&self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let mut max = [0u8; REGISTERS];
        for key in &self.keys {
            if let Some((hll, _)) = load(view, self.db, key)? {
                hll.merge_into(&mut max)?;
            }
        }
        Ok(Reply::Int(hyperloglog::count_registers(&max) as i64))
    }

    /// One key's count, from the cache or computed.
    fn single(&self, view: &View<'_, '_>) -> Result<Single, CommandError> {
        let Some((hll, expire_at)) = load(view, self.db, &self.keys[0])? else {
            return Ok(Single::Cached(0));
        };
        if let Some(count) = hll.cached_count() {
            return Ok(Single::Cached(count));
        }
        let count = hll.count()?;
        Ok(Single::Stale(hll, expire_at, count))
    }

    /// One key's count when its cache is valid (0 for a missing key), from
    /// the value's 16-byte header alone; `None` when the cache is stale.
    /// A dense HLL is 12 KB: its header is read in place, not the value.
    fn cached(&self, view: &View<'_, '_>) -> Result<Option<u64>, CommandError> {
        match view.string_head(self.db, &self.keys[0], hyperloglog::HDR_SIZE)? {
            None => Ok(Some(0)),
            Some((head, len)) => Ok(hyperloglog::header_cached_count(&head, len)?),
        }
    }

    /// On the read pool: the reply, or the write to run instead when the
    /// cache must be written back (counted there, on the value as it is
    /// then).
    fn read_or_write(self, view: &View<'_, '_>) -> Result<Reply, WriteOp<Reply>> {
        match self.cached(view) {
            Ok(Some(count)) => Ok(Reply::Int(count as i64)),
            Ok(None) => Err(crate::command::write_op(PfCountWrite(self))),
            Err(e) => Ok(Reply::from(e)),
        }
    }

    /// On the writer: one key's count, the cache written back if stale.
    fn apply_writing(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        match self.single(txn)? {
            Single::Cached(count) => Ok(Reply::Int(count as i64)),
            Single::Stale(mut hll, expire_at, count) => {
                let stored = hll.as_bytes().to_vec();
                hll.set_cached_count(count);
                store(txn, self.db, &self.keys[0], Some(&stored), &hll, expire_at)?;
                Ok(Reply::Int(count as i64))
            }
        }
    }
}

impl ReadCommand for PfCount {
    const MULTI_STATEMENT: bool = true;
    const QUICK: bool = true;
    fn is_quick(&self) -> bool {
        self.keys.len() <= crate::command::QUICK_READ_LIMIT
    }
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(PfCount {
            db: s.db,
            keys: args.rest(),
        })
    }
    /// Against a read-only view (a read-only script): the count, with a
    /// stale cache left as it is, since nothing can be written there.
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        if self.keys.len() > 1 {
            return self.union(view);
        }
        if let Some(count) = self.cached(view)? {
            return Ok(Reply::Int(count as i64));
        }
        // Stale: counted from the whole value (its lookup noted above).
        match view.peek_string(self.db, &self.keys[0])? {
            None => Ok(Reply::Int(0)),
            Some(value) => Ok(Reply::Int(Hll::from_bytes(value)?.count()? as i64)),
        }
    }
}

/// PFCOUNT of one key run on the writer, to write its cache back.
struct PfCountWrite(PfCount);

impl WriteCommand for PfCountWrite {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        PfCount::parse(args, s).map(PfCountWrite)
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        self.0.apply_writing(txn)
    }
}

/// PFCOUNT's plan: several keys are a plain read; one key is a read that
/// turns into a write when the cached count is stale (see the module
/// docs).
fn plan_pfcount(s: &mut Session, args: Args) -> Result<Plan, CommandError> {
    let cmd = parse_all(args, &s.ctx(), PfCount::parse)?;
    if cmd.keys.len() > 1 {
        let (f, needs) = crate::command::read_job(cmd, s);
        return Ok(Plan::Read(f, needs));
    }
    let touches = touch::<PfCount>(s.touches());
    Ok(Plan::ReadOrWrite(Box::new(move |view| {
        view.set_touch(touches);
        cmd.read_or_write(view)
    })))
}

/// PFCOUNT called from a script: on the writer (a script that may
/// write), the cache is written back as for a client.
fn call_pfcount(
    ctx: &mut Ctx<'_>,
    args: Args,
    target: Target<'_, '_, '_>,
) -> Result<Reply, CommandError> {
    let cmd = parse_all(args, ctx, PfCount::parse)?;
    match target {
        Target::Writer(txn) => {
            txn.set_touch(touch::<PfCount>(ctx.touches));
            if cmd.keys.len() > 1 {
                cmd.union(txn)
            } else {
                cmd.apply_writing(txn)
            }
        }
        Target::Reader(view) => {
            view.set_touch(touch::<PfCount>(ctx.touches));
            cmd.apply(view)
        }
    }
}

/// `PFMERGE destkey [sourcekey [sourcekey ...]]`: the destination (an
/// empty HLL if missing) becomes the union of itself and the sources,
/// dense if any input was dense.
pub struct PfMerge {
    /// Selected database.
    db: u32,
    /// The destination, then the sources.
    keys: Vec<Bytes>,
    /// `hll-sparse-max-bytes` when the command was parsed.
    sparse_max: usize,
}

impl WriteCommand for PfMerge {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(PfMerge {
            db: s.db,
            keys: args.rest(),
            sparse_max: s.hll_sparse_max_bytes(),
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let mut max = [0u8; REGISTERS];
        let mut use_dense = false;
        let mut dest = None;
        for (i, key) in self.keys.iter().enumerate() {
            let Some((hll, expire_at)) = load(txn, self.db, key)? else {
                continue;
            };
            use_dense |= hll.encoding() == Encoding::Dense;
            hll.merge_into(&mut max)?;
            if i == 0 {
                dest = Some((hll, expire_at));
            }
        }
        let stored = dest.as_ref().map(|(hll, _)| hll.as_bytes().to_vec());
        let (mut hll, expire_at) = dest.unwrap_or_default();
        if use_dense {
            hll.to_dense()?;
        }
        for (index, &count) in max.iter().enumerate() {
            if count != 0 {
                // The destination was checked whole by the merge above, so
                // this cannot find it corrupt; redis ignores the result.
                let _ = hll.set(index, count, self.sparse_max);
            }
        }
        hll.invalidate_cache();
        store(
            txn,
            self.db,
            &self.keys[0],
            stored.as_deref(),
            &hll,
            expire_at,
        )?;
        // redis names PFMERGE's event `pfadd`, sent on every merge.
        txn.notify(STRING, "pfadd", self.db, &self.keys[0]);
        Ok(Reply::Ok)
    }
}

/// `PFDEBUG GETREG | DECODE | ENCODING | TODENSE key`: an HLL's registers,
/// its sparse opcodes, its encoding, or a conversion to dense. GETREG and
/// TODENSE store a sparse HLL converted to dense, as redis does.
pub struct PfDebug {
    /// Selected database.
    db: u32,
    /// The subcommand as sent.
    sub: Bytes,
    /// The key.
    key: Bytes,
}

impl WriteCommand for PfDebug {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(PfDebug {
            db: s.db,
            sub: args.next()?,
            key: args.next()?,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let Some((mut hll, expire_at)) = load(txn, self.db, &self.key)? else {
            return Err(CommandError::Other(
                "The specified key does not exist".into(),
            ));
        };
        match upper(&self.sub).as_str() {
            "GETREG" => {
                if hll.to_dense()? {
                    txn.put_string(self.db, &self.key, hll.as_bytes(), expire_at)?;
                }
                let registers = hll.dense_registers().unwrap_or_default();
                Ok(Reply::Array(
                    registers
                        .into_iter()
                        .map(|r| Reply::Int(i64::from(r)))
                        .collect(),
                ))
            }
            "DECODE" => match hll.decode() {
                Some(text) => Ok(Reply::Bulk(text.into())),
                None => Err(CommandError::Other("HLL encoding is not sparse".into())),
            },
            "ENCODING" => Ok(Reply::Status(
                match hll.encoding() {
                    Encoding::Dense => "dense",
                    Encoding::Sparse => "sparse",
                }
                .into(),
            )),
            "TODENSE" => {
                let converted = hll.to_dense()?;
                if converted {
                    txn.put_string(self.db, &self.key, hll.as_bytes(), expire_at)?;
                }
                Ok(Reply::Int(i64::from(converted)))
            }
            _ => Err(CommandError::Quoted {
                before: "ERR Unknown PFDEBUG subcommand '",
                arg: Lossy(self.sub.to_vec()),
                after: "'",
            }),
        }
    }
}

/// `PFSELFTEST`: redis's self test of the register code and the estimate
/// (ten million elements): `OK`, or `ERR TESTFAILED ...`. Run on the read
/// pool as a long job, so no connection task waits on it.
pub struct PfSelfTest {
    /// `hll-sparse-max-bytes` now.
    sparse_max: usize,
}

impl PfSelfTest {
    fn run(self) -> Reply {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        match hyperloglog::self_test(self.sparse_max, seed) {
            Ok(()) => Reply::Ok,
            Err(text) => Reply::from(CommandError::Other(text)),
        }
    }
}

impl LocalCommand for PfSelfTest {
    fn parse(_args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        Ok(PfSelfTest {
            sparse_max: s.ctx().hll_sparse_max_bytes(),
        })
    }
    fn apply(self, _s: &mut Session) -> Result<Plan, CommandError> {
        Ok(Plan::Read(
            Box::new(move |_view| self.run()),
            ReadNeeds {
                snapshot: false,
                quick: false,
            },
        ))
    }
}

/// PFSELFTEST called from a script: run where the script runs, as redis
/// runs it inside the script.
fn call_pfselftest(
    ctx: &mut Ctx<'_>,
    args: Args,
    _target: Target<'_, '_, '_>,
) -> Result<Reply, CommandError> {
    if args.remaining() > 0 {
        return Err(CommandError::Syntax);
    }
    let test = PfSelfTest {
        sparse_max: ctx.hll_sparse_max_bytes(),
    };
    Ok(test.run())
}

#[rustfmt::skip]
pub(crate) fn commands() -> Vec<Spec> {
    vec![
        Spec::write::<PfAdd>("pfadd"),
        Spec { call: call_pfcount, ..Spec::read::<PfCount>("pfcount") }.planned_by(plan_pfcount),
        Spec::write::<PfDebug>("pfdebug"),
        Spec::write::<PfMerge>("pfmerge"),
        Spec { call: call_pfselftest, ..Spec::local::<PfSelfTest>("pfselftest") },
    ]
}

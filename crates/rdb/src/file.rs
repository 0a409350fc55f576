//! Whole RDB files, read as a stream of keys and written from one.
//!
//! A file is `REDIS` and a four-digit version, then a sequence of opcodes
//! and objects: AUX fields (name/value pairs: the writer's version, its
//! creation time, replication ids), SELECTDB (the database the following
//! keys go to), RESIZEDB (size hints), functions (the library code of
//! `FUNCTION LOAD`), module auxiliary data, and keys, each a type byte, the
//! key as a string and the value, optionally preceded by its expiry time
//! (EXPIRETIME in seconds, EXPIRETIME_MS in milliseconds) and its LRU idle
//! time or LFU frequency. EOF (0xFF) ends it, followed from version 5 on
//! by the CRC-64 of everything before (zero when the writer had checksums
//! off).
//!
//! [`RdbReader`] reads such a file from any `Read` one key at a time,
//! holding no more than the key in hand, and checks the checksum when it
//! reaches the end: a consumer that must not act on a corrupt file commits
//! only after the iterator has ended without error. [`RdbWriter`] writes
//! one in the plain encodings (see the crate docs) with version 10, which
//! redis-server 7.0 loads.

use std::io::{Read, Write};

use crate::object::{self, Decoded};
use crate::wire::{self, Input};

use crate::{Crc64, Error, Value, RDB_VERSION};

const OP_FUNCTION2: u8 = 245;
const OP_FUNCTION: u8 = 246;
const OP_MODULE_AUX: u8 = 247;
const OP_IDLE: u8 = 248;
const OP_FREQ: u8 = 249;
const OP_AUX: u8 = 250;
const OP_RESIZEDB: u8 = 251;
const OP_EXPIRETIME_MS: u8 = 252;
const OP_EXPIRETIME: u8 = 253;
const OP_SELECTDB: u8 = 254;
const OP_EOF: u8 = 255;

/// One key of an RDB file.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The database number (SELECTDB) the key belongs to.
    pub db: u64,
    pub key: Vec<u8>,
    pub value: Value,
    /// Absolute expiry time in Unix milliseconds, if the key has one.
    pub expire_ms: Option<i64>,
    /// LRU idle time in seconds, if the writer recorded it.
    pub idle: Option<u64>,
    /// LFU frequency counter, if the writer recorded it.
    pub freq: Option<u8>,
}

/// What an [`RdbReader`] saw besides keys.
#[derive(Debug, Clone, Default)]
pub struct ReaderStats {
    /// AUX fields in file order (`redis-ver`, `ctime`, `repl-id`, ...).
    pub aux: Vec<(Vec<u8>, Vec<u8>)>,
    /// Function libraries' code, in file order.
    pub functions: Vec<Vec<u8>>,
    /// Keys whose values are of a module type, skipped: (db, key, module
    /// type name).
    pub skipped_modules: Vec<(u64, Vec<u8>, String)>,
    /// Module auxiliary data skipped, by module type name.
    pub skipped_module_aux: Vec<String>,
    /// Keys holding empty collections, skipped as Redis skips them.
    pub empty_skipped: u64,
    /// RESIZEDB hints seen: (db, keys, keys with an expiry).
    pub resize_hints: Vec<(u64, u64, u64)>,
}

/// Reads the keys of an RDB file one at a time.
///
/// An iterator of `Result<Entry, Error>`; after the first error it ends.
/// The trailing checksum is verified when EOF is reached, and a mismatch
/// is the iterator's last item.
pub struct RdbReader<R: Read> {
    inp: Input<R>,
    version: u32,
    db: u64,
    done: bool,
    stats: ReaderStats,
}

impl<R: Read> RdbReader<R> {
    /// Reads and checks the header. Wrap a file in a `BufReader`: the
    /// reader asks for a few bytes at a time.
    pub fn new(inner: R) -> Result<Self, Error> {
        let mut inp = Input::new(inner, true);
        let header: [u8; 9] = inp.array().map_err(|e| match e {
            Error::BadData(_) => Error::Signature,
            e => e,
        })?;
        if &header[..5] != b"REDIS" || !header[5..].iter().all(u8::is_ascii_digit) {
            return Err(Error::Signature);
        }
        let version = header[5..]
            .iter()
            .fold(0u32, |acc, d| acc * 10 + u32::from(d - b'0'));
        if version < 1 || version > u32::from(RDB_VERSION) {
            return Err(Error::FileVersion(version));
        }
        Ok(RdbReader {
            inp,
            version,
            db: 0,
            done: false,
            stats: ReaderStats::default(),
        })
    }

    /// The file's RDB format version.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// AUX fields, functions and skipped keys seen so far (all of them
    /// once the iterator has ended).
    pub fn stats(&self) -> &ReaderStats {
        &self.stats
    }

    fn next_entry(&mut self) -> Result<Option<Entry>, Error> {
        let mut expire_ms = None;
        let mut idle = None;
        let mut freq = None;
        loop {
            let op = self.inp.byte()?;
            match op {
                OP_EXPIRETIME => {
                    let secs = i32::from_le_bytes(self.inp.array()?);
                    expire_ms = Some(i64::from(secs) * 1000);
                }
                OP_EXPIRETIME_MS => {
                    expire_ms = Some(i64::from_le_bytes(self.inp.array()?));
                }
                OP_FREQ => freq = Some(self.inp.byte()?),
                OP_IDLE => idle = Some(self.inp.len()?),
                OP_SELECTDB => self.db = self.inp.len()?,
                OP_RESIZEDB => {
                    let keys = self.inp.len()?;
                    let expires = self.inp.len()?;
                    self.stats.resize_hints.push((self.db, keys, expires));
                }
                OP_AUX => {
                    let k = self.inp.string()?;
                    let v = self.inp.string()?;
                    self.stats.aux.push((k, v));
                }
                OP_MODULE_AUX => {
                    let id = self.inp.len()?;
                    if self.inp.len()? != 2 {
                        return Err(Error::BadData("module aux: bad when opcode"));
                    }
                    self.inp.len()?;
                    // The rest is a self-describing module value.
                    object::skip_module_value(&mut self.inp)?;
                    let name = object::module_type_name(id);
                    self.stats.skipped_module_aux.push(name);
                }
                OP_FUNCTION2 => {
                    let code = self.inp.string()?;
                    self.stats.functions.push(code);
                }
                OP_FUNCTION => {
                    // Redis 7.0 rc1/rc2: name, engine, optional description,
                    // code; rebuilt into the shebang form 7.0 uses.
                    let name = self.inp.string()?;
                    let engine = self.inp.string()?;
                    if self.inp.len()? != 0 {
                        self.inp.string()?;
                    }
                    let blob = self.inp.string()?;
                    let mut code = b"#!".to_vec();
                    code.extend_from_slice(&engine);
                    code.extend_from_slice(b" name=");
                    code.extend_from_slice(&name);
                    code.push(b'\n');
                    code.extend_from_slice(&blob);
                    self.stats.functions.push(code);
                }
                OP_EOF => {
                    if self.version >= 5 {
                        let expected = self.inp.crc();
                        let found = u64::from_le_bytes(self.inp.array()?);
                        if found != 0 && found != expected {
                            return Err(Error::FileChecksum { expected, found });
                        }
                    }
                    return Ok(None);
                }
                t if object::is_object_type(t) => {
                    let key = self.inp.string()?;
                    match object::read_object(&mut self.inp, t) {
                        Ok(Decoded::Value(value)) => {
                            return Ok(Some(Entry {
                                db: self.db,
                                key,
                                value,
                                expire_ms,
                                idle,
                                freq,
                            }))
                        }
                        Ok(Decoded::Module(name)) => {
                            self.stats.skipped_modules.push((self.db, key, name));
                        }
                        Err(Error::EmptyKey) => self.stats.empty_skipped += 1,
                        Err(e) => return Err(e),
                    }
                    expire_ms = None;
                    idle = None;
                    freq = None;
                }
                _ => return Err(Error::BadData("unknown opcode")),
            }
        }
    }
}

impl<R: Read> Iterator for RdbReader<R> {
    type Item = Result<Entry, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.next_entry() {
            Ok(Some(e)) => Some(Ok(e)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// Writes an RDB file (version 10) that redis-server 7.0 loads.
///
/// Call [`RdbWriter::entry`] for each key, grouped by database (a SELECTDB
/// is written whenever the database changes), then [`RdbWriter::finish`],
/// which writes EOF and the checksum and hands back the writer.
pub struct RdbWriter<W: Write> {
    out: W,
    crc: Crc64,
    buf: Vec<u8>,
    db: Option<u64>,
}

impl<W: Write> RdbWriter<W> {
    /// Writes the header and the given AUX fields (Redis writes
    /// `redis-ver`, `redis-bits`, `ctime`, `used-mem`, `aof-base`; any
    /// name is allowed, and loaders ignore those they do not know).
    pub fn new(out: W, aux: &[(&[u8], &[u8])]) -> Result<Self, Error> {
        let mut w = RdbWriter {
            out,
            crc: Crc64::new(),
            buf: Vec::with_capacity(64 * 1024),
            db: None,
        };
        w.buf
            .extend_from_slice(format!("REDIS{RDB_VERSION:04}").as_bytes());
        for (k, v) in aux {
            w.buf.push(OP_AUX);
            wire::put_string(&mut w.buf, k);
            wire::put_string(&mut w.buf, v);
        }
        w.flush_buf()?;
        Ok(w)
    }

    fn flush_buf(&mut self) -> Result<(), Error> {
        self.crc.update(&self.buf);
        self.out.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }

    /// Starts database `db`, with its size hints (keys, keys with an
    /// expiry), which Redis uses to size its tables up front.
    pub fn select_db(&mut self, db: u64, keys: u64, expires: u64) -> Result<(), Error> {
        self.buf.push(OP_SELECTDB);
        wire::put_len(&mut self.buf, db);
        self.buf.push(OP_RESIZEDB);
        wire::put_len(&mut self.buf, keys);
        wire::put_len(&mut self.buf, expires);
        self.db = Some(db);
        Ok(())
    }

    /// Writes one key (selecting its database first if it is not the
    /// current one). `expire_ms` is an absolute Unix time in milliseconds.
    pub fn entry(
        &mut self,
        db: u64,
        key: &[u8],
        value: &Value,
        expire_ms: Option<i64>,
    ) -> Result<(), Error> {
        if self.db != Some(db) {
            self.buf.push(OP_SELECTDB);
            wire::put_len(&mut self.buf, db);
            self.db = Some(db);
        }
        if let Some(at) = expire_ms {
            self.buf.push(OP_EXPIRETIME_MS);
            self.buf.extend_from_slice(&at.to_le_bytes());
        }
        self.buf.push(object::type_of(value));
        wire::put_string(&mut self.buf, key);
        object::put_body(&mut self.buf, value);
        if self.buf.len() >= 64 * 1024 {
            self.flush_buf()?;
        }
        Ok(())
    }

    /// Writes a function library's code (FUNCTION2), as Redis does before
    /// the databases.
    pub fn function(&mut self, code: &[u8]) -> Result<(), Error> {
        self.buf.push(OP_FUNCTION2);
        wire::put_string(&mut self.buf, code);
        Ok(())
    }

    /// Writes EOF and the checksum, flushes, and returns the writer.
    pub fn finish(mut self) -> Result<W, Error> {
        self.buf.push(OP_EOF);
        self.flush_buf()?;
        let crc = self.crc.value();
        self.out.write_all(&crc.to_le_bytes())?;
        self.out.flush()?;
        Ok(self.out)
    }
}

//! Redis's serialization format, read and written without Redis.
//!
//! Redis serializes a value the same way in three places: the payload of
//! `DUMP` (one value, then the RDB version in two bytes and a CRC-64), the
//! RDB file `SAVE` writes (a header, auxiliary fields, and for each
//! database its keys with their values and expiry times, then a CRC-64),
//! and the file a master streams to a replica on a full synchronization
//! (an RDB file again). This crate reads all three into a plain value model
//! ([`Value`]: bytes, lists of bytes, pairs) and writes them back.
//!
//! Reading accepts every encoding redis-server 7.0 writes or still loads:
//! strings raw, integer-encoded or LZF-compressed; lists as quicklists of
//! listpacks (with plain nodes for large elements), quicklists of
//! ziplists, ziplists, or plain element sequences; sets as intsets or
//! member sequences; hashes as listpacks, ziplists, zipmaps or field/value
//! sequences; sorted sets as listpacks, ziplists, or member/score sequences
//! with scores in binary or as text; streams as listpacks (types 15 and
//! 19) with their consumer groups (see `stream`). Module values are
//! recognised and reported as not supported rather than misread; a
//! module value of the self-describing kind (type 7) can be
//! skipped inside a file, so an import can name what it left out.
//!
//! Input is never trusted. Every declared length is checked against the
//! bytes that are actually there before anything is allocated for it:
//! strings are read in bounded chunks as they arrive, element counts size
//! nothing up front beyond a small cap, LZF output never exceeds what the
//! compressed input could expand to, and the packed encodings are
//! validated as deeply as Redis's `sanitize-dump-payload yes` does
//! (entries within bounds, back-lengths consistent, intsets sorted,
//! declared counts equal to what was found), plus duplicate members in a
//! set, hash or sorted set are refused. Whatever the input, the result is a
//! value or an [`Error`], never a panic.
//!
//! Writing uses the plain encodings (type 0 strings, 1 lists, 2 sets,
//! 4 hashes, 5 sorted sets with binary scores; streams as type 19), which every Redis since 4.0
//! loads and converts to its compact encodings itself; strings that are
//! decimal integers in 32 bits are integer-encoded and long strings are
//! LZF-compressed when that saves space, as Redis does.

mod crc64;
mod dump;
mod file;
mod functions;
pub mod lzf;
mod object;
mod packed;
mod stream;
mod wire;

pub use crc64::{crc64, Crc64};
pub use dump::{decode_dump, encode_dump, encode_dump_with_version, DUMP_RDB_VERSION};
pub use file::{Entry, RdbReader, RdbWriter, ReaderStats};
pub use functions::{decode_functions, encode_functions};
pub use stream::{Stream, StreamConsumer, StreamEntry, StreamGroup, StreamId, StreamNack};

/// The RDB format version redis-server 7.0 writes and the newest it reads.
pub const RDB_VERSION: u16 = 10;

/// A value in the shape clients see it, whatever its encoding on disk.
///
/// Collections keep the order they were serialized in: a list's order is
/// its order; a set's, hash's or sorted set's is whatever the writer's
/// iteration gave (for a sorted set, not necessarily by score).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Value {
    String(Vec<u8>),
    List(Vec<Vec<u8>>),
    Set(Vec<Vec<u8>>),
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
    ZSet(Vec<(Vec<u8>, f64)>),
    Stream(Box<Stream>),
}

impl Value {
    /// Redis's name for the value's type, as `TYPE` answers.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::String(_) => "string",
            Value::List(_) => "list",
            Value::Set(_) => "set",
            Value::Hash(_) => "hash",
            Value::ZSet(_) => "zset",
            Value::Stream(_) => "stream",
        }
    }

    /// About how many bytes of memory the value holds: its strings plus a
    /// fixed cost per element (16 bytes a list or set member, 32 a hash
    /// field or stream field, 24 a sorted-set member, 48 a stream entry,
    /// pending entry or consumer). A load counts it to bound the values it
    /// holds at once (the transactions of `respited import` and of a
    /// replica's full synchronization); it is not redis's MEMORY USAGE.
    pub fn approx_size(&self) -> usize {
        match self {
            Value::String(s) => s.len(),
            Value::List(items) | Value::Set(items) => items.iter().map(|x| x.len() + 16).sum(),
            Value::Hash(pairs) => pairs.iter().map(|(f, v)| f.len() + v.len() + 32).sum(),
            Value::ZSet(pairs) => pairs.iter().map(|(m, _)| m.len() + 24).sum(),
            Value::Stream(s) => {
                let entries: usize = s
                    .entries
                    .iter()
                    .map(|e| {
                        48 + e
                            .fields
                            .iter()
                            .map(|(f, v)| f.len() + v.len() + 32)
                            .sum::<usize>()
                    })
                    .sum();
                let groups: usize = s
                    .groups
                    .iter()
                    .map(|g| {
                        g.name.len()
                            + g.pending
                                .iter()
                                .map(|n| n.consumer.len() + 48)
                                .sum::<usize>()
                            + g.consumers.iter().map(|c| c.name.len() + 48).sum::<usize>()
                    })
                    .sum();
                entries + groups
            }
        }
    }
}

/// What went wrong reading serialized data.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A DUMP payload whose RDB version is newer than 10, or whose CRC-64
    /// does not match (Redis: `DUMP payload version or checksum are wrong`).
    #[error("DUMP payload version or checksum are wrong")]
    VersionOrChecksum,
    /// Malformed data: a bad length, encoding, packed structure, duplicate
    /// member, or input that ends early.
    #[error("Bad data format ({0})")]
    BadData(&'static str),
    /// An empty collection, which Redis refuses to restore and skips when
    /// loading a file.
    #[error("Bad data format (empty collection)")]
    EmptyKey,
    /// A type this crate recognises but does not decode (module values),
    /// by its RDB type byte.
    #[error("Bad data format (unsupported RDB type {0})")]
    Unsupported(u8),
    /// A file that does not start with `REDIS` and four digits.
    #[error("not an RDB file (wrong signature)")]
    Signature,
    /// A file of an RDB version this crate (and redis-server 7.0) cannot read.
    #[error("can't handle RDB format version {0}")]
    FileVersion(u32),
    /// A file whose trailing CRC-64 does not match its contents.
    #[error("RDB checksum mismatch: expected {expected:016x}, file has {found:016x}")]
    FileChecksum { expected: u64, found: u64 },
    /// The reader or writer underneath failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}

impl Error {
    /// The text of the error redis-server 7.0's RESTORE replies with for
    /// this failure (without the `ERR ` code).
    pub fn restore_message(&self) -> &'static str {
        match self {
            Error::VersionOrChecksum => "DUMP payload version or checksum are wrong",
            _ => "Bad data format",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approx_size_counts_strings_and_elements() {
        assert_eq!(Value::String(b"abc".to_vec()).approx_size(), 3);
        assert_eq!(
            Value::List(vec![b"a".to_vec(), b"bc".to_vec()]).approx_size(),
            3 + 2 * 16
        );
        assert_eq!(
            Value::Hash(vec![(b"f".to_vec(), b"vv".to_vec())]).approx_size(),
            3 + 32
        );
        assert_eq!(
            Value::ZSet(vec![(b"m".to_vec(), 1.5)]).approx_size(),
            1 + 24
        );
        let stream = Stream {
            entries: vec![StreamEntry {
                id: (1, 0),
                fields: vec![(b"f".to_vec(), b"v".to_vec())],
            }],
            last_id: (1, 0),
            first_id: (1, 0),
            max_deleted: (0, 0),
            entries_added: 1,
            groups: vec![StreamGroup {
                name: b"g".to_vec(),
                last_id: (1, 0),
                entries_read: 1,
                pending: vec![StreamNack {
                    id: (1, 0),
                    consumer: b"c".to_vec(),
                    delivery_time: 0,
                    delivery_count: 1,
                }],
                consumers: vec![StreamConsumer {
                    name: b"c".to_vec(),
                    seen_time: 0,
                }],
            }],
        };
        assert_eq!(
            Value::Stream(Box::new(stream)).approx_size(),
            (48 + 2 + 32) + 1 + (1 + 48) + (1 + 48)
        );
    }
}

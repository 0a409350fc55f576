//! DUMP payloads: one object, then the RDB version as two little-endian
//! bytes, then the CRC-64 of everything before it as eight little-endian
//! bytes.
//!
//! Checking is Redis's `verifyDumpPayload` followed by its object loader:
//! a payload shorter than the footer, of a version newer than this
//! format's, or with a CRC that does not match is
//! [`Error::VersionOrChecksum`]; anything wrong inside the object is
//! [`Error::BadData`] (or [`Error::EmptyKey`], [`Error::Unsupported`]).
//! Like Redis, bytes left over between the object and the footer are not
//! an error.

use crate::object::{self, Decoded};
use crate::wire::Input;
use crate::{crc64, Error, Value, RDB_VERSION};

/// The RDB version DUMP writes into its footer (redis-server 7.0's).
pub const DUMP_RDB_VERSION: u16 = RDB_VERSION;

/// Serializes `value` as a DUMP payload redis-server 7.0's RESTORE accepts.
pub fn encode_dump(value: &Value) -> Vec<u8> {
    encode_dump_with_version(value, DUMP_RDB_VERSION)
}

/// [`encode_dump`] with another version in the footer (for tests of the
/// version check).
pub fn encode_dump_with_version(value: &Value, version: u16) -> Vec<u8> {
    let mut out = Vec::new();
    out.push(object::type_of(value));
    object::put_body(&mut out, value);
    out.extend_from_slice(&version.to_le_bytes());
    let crc = crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Checks and decodes a DUMP payload.
pub fn decode_dump(payload: &[u8]) -> Result<Value, Error> {
    if payload.len() < 10 {
        return Err(Error::VersionOrChecksum);
    }
    let (body, footer) = payload.split_at(payload.len() - 10);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    if version > RDB_VERSION {
        return Err(Error::VersionOrChecksum);
    }
    let mut crc = [0u8; 8];
    crc.copy_from_slice(&footer[2..]);
    if crc64(&payload[..payload.len() - 8]) != u64::from_le_bytes(crc) {
        return Err(Error::VersionOrChecksum);
    }
    let mut inp = Input::new(body, false);
    let t = inp.byte()?;
    if !object::is_object_type(t) {
        return Err(Error::BadData("unknown RDB type"));
    }
    match object::read_object(&mut inp, t)? {
        Decoded::Value(v) => Ok(v),
        Decoded::Module(_) => Err(Error::Unsupported(t)),
    }
}

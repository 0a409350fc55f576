//! FUNCTION DUMP payloads: every library's code as an RDB function
//! record (`FUNCTION2`, opcode 245, then the code as an RDB string), then
//! the RDB version and the CRC-64, as in a DUMP payload. redis-server
//! 7.0's FUNCTION RESTORE accepts what [`encode_functions`] writes, and
//! [`decode_functions`] reads what redis-server's FUNCTION DUMP writes,
//! including the records of 7.0's release candidates (`FUNCTION`, opcode
//! 246: name, engine, an optional description and the code without its
//! header, made into `#!<engine> name=<name>\n<code>` as redis does).

use crate::wire::{self, Input};
use crate::{crc64, RDB_VERSION};

const OP_FUNCTION2: u8 = 245;
const OP_FUNCTION: u8 = 246;

/// Serializes libraries' code (header lines included) as FUNCTION DUMP
/// does.
pub fn encode_functions<'a>(codes: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for code in codes {
        out.push(OP_FUNCTION2);
        wire::put_string(&mut out, code);
    }
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Reads a FUNCTION DUMP payload back into the libraries' code, in
/// order; the error is redis's FUNCTION RESTORE text (without "ERR ").
pub fn decode_functions(payload: &[u8]) -> Result<Vec<Vec<u8>>, &'static str> {
    const WRONG: &str = "DUMP payload version or checksum are wrong";
    if payload.len() < 10 {
        return Err(WRONG);
    }
    let footer = &payload[payload.len() - 10..];
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    let mut crc = [0u8; 8];
    crc.copy_from_slice(&footer[2..]);
    if version > RDB_VERSION || crc64(&payload[..payload.len() - 8]) != u64::from_le_bytes(crc) {
        return Err(WRONG);
    }
    let mut codes = Vec::new();
    // redis reads records until 10 bytes are left: a record running into
    // them reads the footer as its data.
    let mut cursor: &[u8] = payload;
    while cursor.len() > 10 {
        let mut inp = Input::new(&mut cursor, false);
        let t = inp.byte().map_err(|_| "can not read data type")?;
        let code = match t {
            OP_FUNCTION2 => inp.string().map_err(|_| "Failed loading library payload")?,
            OP_FUNCTION => {
                let name = inp.string().map_err(|_| "Failed loading library name")?;
                let engine = inp.string().map_err(|_| "Failed loading engine name")?;
                let has_desc = inp
                    .len()
                    .map_err(|_| "Failed loading library description indicator")?;
                if has_desc != 0 {
                    inp.string()
                        .map_err(|_| "Failed loading library description")?;
                }
                let blob = inp.string().map_err(|_| "Failed loading library blob")?;
                let mut code = b"#!".to_vec();
                code.extend_from_slice(&engine);
                code.extend_from_slice(b" name=");
                code.extend_from_slice(&name);
                code.push(b'\n');
                code.extend_from_slice(&blob);
                code
            }
            _ => return Err("given type is not a function"),
        };
        codes.push(code);
    }
    Ok(codes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let long = b"#!lua name=big\n".repeat(20);
        let codes: Vec<&[u8]> = vec![
            b"#!lua name=a\nredis.register_function('f', function() end)",
            &long,
        ];
        let payload = encode_functions(codes.iter().copied());
        let back = decode_functions(&payload).expect("decodes");
        assert_eq!(back, codes.iter().map(|c| c.to_vec()).collect::<Vec<_>>());
        assert_eq!(decode_functions(&encode_functions([])), Ok(vec![]));
    }

    #[test]
    fn errors_are_redis_texts() {
        let mut payload = encode_functions([b"#!lua name=a\n".as_slice()]);
        let n = payload.len();
        payload[n - 1] ^= 1;
        assert_eq!(
            decode_functions(&payload),
            Err("DUMP payload version or checksum are wrong")
        );
        assert_eq!(
            decode_functions(b"short"),
            Err("DUMP payload version or checksum are wrong")
        );
        // A key's DUMP is not a function.
        let mut body = vec![0u8, 1, b'x'];
        body.extend_from_slice(&RDB_VERSION.to_le_bytes());
        let crc = crc64(&body);
        body.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(decode_functions(&body), Err("given type is not a function"));
    }

    #[test]
    fn release_candidate_records() {
        let mut body = vec![OP_FUNCTION];
        for s in [b"lib".as_slice(), b"LUA"] {
            wire::put_string(&mut body, s);
        }
        wire::put_len(&mut body, 1);
        wire::put_string(&mut body, b"desc");
        wire::put_string(&mut body, b"return 1");
        body.extend_from_slice(&RDB_VERSION.to_le_bytes());
        let crc = crc64(&body);
        body.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(
            decode_functions(&body),
            Ok(vec![b"#!LUA name=lib\nreturn 1".to_vec()])
        );
    }
}

//! Redis's serialization format (`crates/rdb`) fed arbitrary bytes: as a
//! DUMP payload for RESTORE, as the same bytes with a valid footer added
//! (so the checksum lets them through to the object parser), and as an
//! RDB file.
//!
//! The first input byte picks the mode; the rest is the data. The checks:
//!
//! - nothing panics, and no allocation is sized by a declared length
//!   (libFuzzer's `-rss_limit_mb` catches one that is);
//! - a payload that decodes re-encodes to a payload that decodes to the
//!   same value (what RESTORE accepts, DUMP gives back unchanged);
//! - every error maps to one of Redis's two RESTORE messages.

#![no_main]

use libfuzzer_sys::fuzz_target;
use respite_rdb::{crc64, decode_dump, encode_dump, RdbReader};

fuzz_target!(|input: &[u8]| {
    let Some((&mode, data)) = input.split_first() else {
        return;
    };
    match mode % 3 {
        0 => check_payload(data),
        1 => {
            let mut p = data.to_vec();
            p.extend_from_slice(&10u16.to_le_bytes());
            let crc = crc64(&p);
            p.extend_from_slice(&crc.to_le_bytes());
            check_payload(&p);
        }
        _ => {
            if let Ok(reader) = RdbReader::new(data) {
                for entry in reader {
                    if entry.is_err() {
                        break;
                    }
                }
            }
        }
    }
});

fn check_payload(p: &[u8]) {
    match decode_dump(p) {
        Ok(v) => {
            let again = decode_dump(&encode_dump(&v)).expect("our own payload decodes");
            assert_eq!(again, v);
        }
        Err(e) => {
            let m = e.restore_message();
            assert!(m == "Bad data format" || m == "DUMP payload version or checksum are wrong");
        }
    }
}

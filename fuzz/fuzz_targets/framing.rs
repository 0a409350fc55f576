//! Request framing (`crates/server/src/request.rs`) fed arbitrary bytes in
//! arbitrary pieces, as a socket delivers them.
//!
//! The input is one byte of settings (authenticated or not, and which
//! `proto-max-bulk-len`), eight bytes that seed how the rest is cut, and
//! the stream itself. The stream goes through a `Framer` twice: whole, and
//! cut into pieces of random sizes (one byte at a time now and then), each
//! piece followed by as many `next_frame` calls as find a request, the way
//! the connection loop calls it. The checks:
//!
//! - nothing panics (a bad range, an overflow, an index out of bounds);
//! - every request found takes bytes off the buffer (no request for
//!   nothing, so the loop always makes progress);
//! - the pieces give the same requests, and the same error, as the whole
//!   stream. The one allowed difference is Redis's own: a line with no end
//!   in sight is given up on once 64 KiB of it have arrived ("too big
//!   inline request", "too big mbulk count string", "too big bulk count
//!   string"), which depends on how much arrived at once; then the requests
//!   before it must still be those of the whole stream.

#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use respite_server::request::{Framer, Limits, ProtocolError};

/// How a stream ended: waiting for more, or closed for a protocol error.
#[derive(Debug, PartialEq)]
enum End {
    Waiting,
    Error(ProtocolError),
}

/// Feeds `pieces` one after another, taking every request each makes
/// complete.
fn feed<'a>(pieces: impl Iterator<Item = &'a [u8]>, limits: Limits) -> (Vec<Vec<Bytes>>, End) {
    let mut framer = Framer::default();
    let mut buf = BytesMut::new();
    let mut requests = Vec::new();
    for piece in pieces {
        buf.extend_from_slice(piece);
        loop {
            let before = buf.len();
            match framer.next_frame(&mut buf, limits) {
                Ok(Some(frame)) => {
                    let args = frame.take_args(&mut buf);
                    assert!(
                        buf.len() < before,
                        "a request took nothing off the buffer: {args:?}"
                    );
                    requests.push(args);
                }
                Ok(None) => break,
                Err(e) => return (requests, End::Error(e)),
            }
        }
    }
    (requests, End::Waiting)
}

/// xorshift64: the cuts, reproducible from the input.
struct Cuts(u64);

impl Cuts {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&settings, rest)) = data.split_first() else {
        return;
    };
    if rest.len() < 8 {
        return;
    }
    let (seed, stream) = rest.split_at(8);
    let limits = Limits {
        authenticated: settings & 1 == 1,
        max_bulk_len: match (settings >> 1) & 3 {
            0 => 512 * 1024 * 1024,
            1 => 16,
            2 => 1000,
            _ => 0,
        },
    };
    let mut cuts = Cuts(u64::from_le_bytes(seed.try_into().unwrap_or([0; 8])) | 1);
    // The largest piece: one byte at a time, a few, or up to a packet.
    let widest = match (settings >> 3) & 3 {
        0 => 1,
        1 => 7,
        2 => 64,
        _ => 1500,
    };
    let mut pieces = Vec::new();
    let mut at = 0;
    while at < stream.len() {
        let len = 1 + (cuts.next() % widest) as usize;
        let end = (at + len).min(stream.len());
        pieces.push(&stream[at..end]);
        at = end;
    }
    let whole = feed(std::iter::once(stream), limits);
    let split = feed(pieces.into_iter(), limits);
    match &split.1 {
        End::Error(
            ProtocolError::TooBigInline
            | ProtocolError::TooBigMultibulkCount
            | ProtocolError::TooBigBulkCount,
        ) => assert!(
            whole.0.starts_with(&split.0),
            "split: {split:?}\nwhole: {whole:?}"
        ),
        _ => assert_eq!(split, whole, "fed in pieces vs whole"),
    }
});

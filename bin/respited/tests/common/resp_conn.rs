//! A raw RESP connection: commands go out as clients send them, and each
//! reply comes back as the exact bytes the server wrote, so that two
//! servers' replies compare byte for byte (RESP2 or RESP3). The script
//! crate's differential test includes this file too
//! (`crates/script/tests/differential.rs`).

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Encodes a command as a RESP array of bulk strings, the way clients send
/// it.
pub fn encode<A: AsRef<[u8]>>(args: &[A]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        let a = a.as_ref();
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// A connection whose replies are read as raw frames.
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    /// Connects to the server on `port` of 127.0.0.1, in RESP3 after
    /// HELLO 3 when `resp` is 3.
    pub fn open(port: u16, resp: u8) -> Conn {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        let mut c = Conn {
            stream,
            buf: Vec::new(),
        };
        if resp == 3 {
            c.command(&["HELLO", "3"]);
        }
        c
    }

    /// Sends one command and returns its whole reply, raw.
    pub fn command<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Vec<u8> {
        self.stream.write_all(&encode(args)).expect("write");
        loop {
            if let Some(n) = frame_len(&self.buf, 0) {
                let reply = self.buf[..n].to_vec();
                self.buf.drain(..n);
                return reply;
            }
            let mut chunk = [0u8; 65536];
            let n = self.stream.read(&mut chunk).expect("read");
            assert!(n > 0, "connection closed");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// What the server has sent and no reply took (a subscribed
    /// connection's messages), read until it has been quiet for 300 ms;
    /// reads wait at most that long from then on.
    pub fn drain(&mut self) -> Vec<u8> {
        self.stream
            .set_read_timeout(Some(Duration::from_millis(300)))
            .expect("timeout");
        let mut chunk = [0u8; 65536];
        while let Ok(n) = self.stream.read(&mut chunk) {
            if n == 0 {
                break;
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
        std::mem::take(&mut self.buf)
    }
}

/// The length of the complete RESP frame starting at `at`, if it is all
/// there (an attribute, `|`, with the reply it comes before).
pub fn frame_len(b: &[u8], at: usize) -> Option<usize> {
    let line_end = at + b.get(at..)?.windows(2).position(|w| w == b"\r\n")?;
    let line = std::str::from_utf8(&b[at + 1..line_end]).ok()?;
    let after = line_end + 2;
    match b[at] {
        b'$' | b'=' | b'!' => {
            let n: i64 = line.parse().ok()?;
            if n < 0 {
                return Some(after - at);
            }
            let end = after + n as usize + 2;
            (b.len() >= end).then_some(end - at)
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let n: i64 = line.parse().ok()?;
            let items = if n < 0 {
                0
            } else if matches!(b[at], b'%' | b'|') {
                2 * n as usize
            } else {
                n as usize
            };
            let mut p = after;
            for _ in 0..items {
                p += frame_len(b, p)?;
            }
            if b[at] == b'|' {
                p += frame_len(b, p)?;
            }
            Some(p - at)
        }
        _ => Some(after - at),
    }
}

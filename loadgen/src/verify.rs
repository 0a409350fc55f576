//! Reply verification (`--verify`).
//!
//! A server that answers quickly and wrongly must not win a benchmark, so
//! with `--verify` every reply is checked against what this run itself did.
//! "What a GET should return" is only well defined when one writer owns a
//! key, so in verify mode the encoder partitions the keyspace: connection
//! `c` of `C` only uses keys whose index is congruent to `c` modulo `C`.
//! Commands on one connection execute in order, so the expected value of a
//! GET is exactly the last SET this connection issued for that key, decided
//! when the GET is encoded and carried with it as a [`Tag`]. Values written
//! in verify mode embed their key and a version number, so a reply that
//! belongs to another key or an older write is told apart from the right one.
//!
//! The checks: a GET returns the last value this run SET for the key (or nil
//! when TTLs are in play; anything at all when the run never wrote the key,
//! since it may predate the run); a SET answers `+OK`; consecutive INCRs on a
//! counter with no other write in between go up by exactly one, so counters
//! add up; no reply is an error. Mismatches are counted per command and the
//! first few are kept verbatim for the report.

use std::collections::HashMap;
use std::sync::Arc;

use crate::keys::push_u64;
use crate::resp::Reply;

/// What the reader should expect for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tag {
    /// Verification is off.
    Unchecked,
    /// A GET of `key`.
    Get {
        key: Vec<u8>,
        /// The value this connection last wrote there, if any.
        expect: Expect,
        /// TTLs are in play, so the key may have expired.
        nil_ok: bool,
    },
    /// A SET: the reply must be `+OK`.
    Set,
    /// An INCR of `key`: the reply must be an integer, one above the last.
    Incr {
        key: Vec<u8>,
        /// The previous write to this key was also an INCR on this connection.
        chain: bool,
    },
    /// Any non-error reply will do.
    Other,
}

/// What a GET should return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Exactly the value `make_value` builds for this key, version and
    /// length; carrying these instead of the bytes keeps the tag small.
    Value { version: u64, len: usize },
    /// The run has not written the key (or wrote it through something
    /// other than SET): any bulk string or nil.
    Anything,
}

/// Builds the value written by a verified SET: `<version>:<key>:` followed by
/// the run's filler bytes up to `len` (longer if the header does not fit).
pub fn make_value(out: &mut Vec<u8>, key: &[u8], version: u64, len: usize, filler: &[u8]) {
    out.clear();
    push_u64(out, version);
    out.push(b':');
    out.extend_from_slice(key);
    out.push(b':');
    if out.len() < len {
        let need = len - out.len();
        out.extend_from_slice(&filler[..need.min(filler.len())]);
    }
}

/// How many mismatch descriptions are kept for the report.
pub const MAX_SAMPLES: usize = 10;

/// Per-thread reply checker.
pub struct Checker {
    /// The run's filler, to rebuild expected values.
    filler: Arc<[u8]>,
    /// The last value each counter returned, for INCR chains.
    incr_last: HashMap<Vec<u8>, i64>,
    /// Reused for the expected value, so checking a GET does not allocate.
    scratch: Vec<u8>,
    /// Replies checked.
    pub checked: u64,
    /// Replies that failed their check.
    pub mismatches: u64,
    /// The first `MAX_SAMPLES` failures, described.
    pub samples: Vec<String>,
}

impl Checker {
    /// A checker for values built from `filler`.
    pub fn new(filler: Arc<[u8]>) -> Checker {
        Checker {
            filler,
            incr_last: HashMap::new(),
            scratch: Vec::new(),
            checked: 0,
            mismatches: 0,
            samples: Vec::new(),
        }
    }

    /// Counts a mismatch and keeps its description while there is room.
    fn fail(&mut self, cmd: &str, what: String) {
        self.mismatches += 1;
        if self.samples.len() < MAX_SAMPLES {
            self.samples.push(format!("{cmd}: {what}"));
        }
    }

    /// Checks one reply; returns true when it was a mismatch.
    pub fn check(&mut self, cmd: &str, tag: &Tag, reply: &Reply<'_>) -> bool {
        if matches!(tag, Tag::Unchecked) {
            return false;
        }
        self.checked += 1;
        let before = self.mismatches;
        if let Reply::Error(e) = reply {
            self.fail(cmd, format!("error reply {:?}", String::from_utf8_lossy(e)));
            return true;
        }
        match tag {
            Tag::Unchecked | Tag::Other => {}
            Tag::Set => {
                if !matches!(reply, Reply::Simple(b"OK")) {
                    self.fail(cmd, format!("expected +OK, got {}", show(reply)));
                }
            }
            Tag::Get {
                key,
                expect,
                nil_ok,
            } => match (expect, reply) {
                (_, Reply::Nil) if *nil_ok => {}
                (Expect::Anything, Reply::Nil | Reply::Bulk(_)) => {}
                (Expect::Value { version, len }, Reply::Bulk(got)) => {
                    let mut want = std::mem::take(&mut self.scratch);
                    make_value(&mut want, key, *version, *len, &self.filler);
                    if *got != want.as_slice() {
                        self.fail(
                            cmd,
                            format!(
                                "key {:?}: expected the value of write #{version}, got {}",
                                String::from_utf8_lossy(key),
                                show(reply)
                            ),
                        );
                    }
                    self.scratch = want;
                }
                _ => self.fail(
                    cmd,
                    format!(
                        "key {:?}: expected a bulk string, got {}",
                        String::from_utf8_lossy(key),
                        show(reply)
                    ),
                ),
            },
            Tag::Incr { key, chain } => match reply {
                Reply::Int(v) => {
                    let prev = self.incr_last.insert(key.clone(), *v);
                    if let (true, Some(p)) = (*chain, prev) {
                        if *v != p.wrapping_add(1) {
                            self.fail(
                                cmd,
                                format!(
                                    "counter {:?} went from {p} to {v}",
                                    String::from_utf8_lossy(key)
                                ),
                            );
                        }
                    }
                }
                _ => self.fail(cmd, format!("expected an integer, got {}", show(reply))),
            },
        }
        self.mismatches > before
    }
}

/// A short, printable form of a reply for mismatch samples; payloads are cut
/// so that a 10 KB value does not flood the report.
fn show(r: &Reply<'_>) -> String {
    const MAX: usize = 48;
    let cut = |b: &[u8]| {
        let s = String::from_utf8_lossy(&b[..b.len().min(MAX)]).into_owned();
        if b.len() > MAX {
            format!("{s:?}...")
        } else {
            format!("{s:?}")
        }
    };
    match r {
        Reply::Simple(s) => format!("+{}", cut(s)),
        Reply::Error(s) => format!("-{}", cut(s)),
        Reply::Int(i) => format!(":{i}"),
        Reply::Bulk(b) => format!("bulk {}", cut(b)),
        Reply::Nil => "nil".into(),
        Reply::Aggregate(n) => format!("aggregate of {n}"),
        Reply::Push => "push".into(),
        Reply::Other => "other".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_and_incr_checks() {
        let filler: Arc<[u8]> = Arc::from(vec![b'x'; 100]);
        let mut c = Checker::new(filler.clone());
        let mut v = Vec::new();
        make_value(&mut v, b"k:1", 7, 20, &filler);
        assert_eq!(v.len(), 20);
        let tag = Tag::Get {
            key: b"k:1".to_vec(),
            expect: Expect::Value {
                version: 7,
                len: 20,
            },
            nil_ok: false,
        };
        assert!(!c.check("GET", &tag, &Reply::Bulk(&v)));
        assert!(c.check("GET", &tag, &Reply::Bulk(b"nope")));
        assert!(c.check("GET", &tag, &Reply::Nil));
        let inc = |chain| Tag::Incr {
            key: b"c".to_vec(),
            chain,
        };
        assert!(!c.check("INCR", &inc(false), &Reply::Int(10)));
        assert!(!c.check("INCR", &inc(true), &Reply::Int(11)));
        assert!(c.check("INCR", &inc(true), &Reply::Int(13)));
        assert!(c.check("SET", &Tag::Set, &Reply::Error(b"ERR x")));
        assert_eq!(c.mismatches, 4);
    }
}

//! The master's stream, parsed into batches and applied through the
//! writer.
//!
//! [`Parser`] walks the stream's bytes as a redis replica processes its
//! master's query buffer: every frame moves the offset by its length,
//! `SELECT` changes the database the next commands run in, `MULTI` opens a
//! transaction whose commands are held until its `EXEC`, `PING` and
//! `REPLCONF` do nothing to the data (a `GETACK` asks for an
//! acknowledgement of everything before it). Whatever else arrives is a
//! command for the data, added to the open [`Batch`].
//!
//! A batch is one writer operation ([`op`]): its commands run through
//! [`crate::command::call`] without a connection (as a script's do, with
//! none of the refusals meant for clients), then the point the batch
//! reaches is stored in the same transaction. Before anything runs, the
//! operation checks that the stored point is the one the batch starts
//! from: a batch can never be applied on top of a gap (a batch before it
//! rolled back) or twice.

use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use respite_engine::upstream::Position;
use respite_engine::{EngineError, WriteOp};

use crate::command::{call, is_fatal, Ctx, Published};
use crate::reply::Reply;
use crate::request::{Framer, Limits, ProtocolError};
use crate::state::Shared;
use crate::sync::lock;

/// Commands applied in one writer operation, and the points around them.
#[derive(Default)]
pub(crate) struct Batch {
    /// Each command with the database it runs in.
    pub cmds: Vec<(u32, Vec<Bytes>)>,
    /// The offset the stored point must be at before the batch.
    pub start: i64,
    /// The offset after the batch's last whole command (never inside a
    /// MULTI), and the database selected there.
    pub end: i64,
    pub end_db: u32,
    /// Offsets to acknowledge once the batch is committed (one per
    /// `REPLCONF GETACK`: the offset before it).
    pub acks: Vec<i64>,
    /// Bytes of arguments in the batch.
    pub bytes: usize,
}

impl Batch {
    /// Whether the batch moves the point at all.
    pub fn is_empty(&self) -> bool {
        self.end == self.start && self.cmds.is_empty() && self.acks.is_empty()
    }
}

/// The stream's parser (see the module docs).
pub(crate) struct Parser {
    framer: Framer,
    /// The database the stream selected.
    db: u32,
    /// Databases there are (a SELECT beyond them is the master's error).
    databases: u32,
    /// Bytes of the stream processed, up to the last whole frame.
    offset: i64,
    /// The commands of an open MULTI.
    multi: Option<Vec<(u32, Vec<Bytes>)>>,
    /// The batch being filled.
    batch: Batch,
    /// The name of the last command of the stream (PINGs included), for
    /// the master's `cmd=` in CLIENT LIST.
    last: Option<Vec<u8>>,
}

impl Parser {
    /// A parser continuing from the point `offset`, in database `db`.
    pub fn new(offset: i64, db: u32, databases: u32) -> Parser {
        Parser {
            framer: Framer::default(),
            db,
            databases,
            offset,
            multi: None,
            batch: Batch {
                start: offset,
                end: offset,
                end_db: db,
                ..Batch::default()
            },
            last: None,
        }
    }

    /// The last command's name (lower case) since this was last asked,
    /// and the database the stream has selected.
    pub fn take_last(&mut self) -> Option<(Vec<u8>, u32)> {
        self.last.take().map(|name| (name, self.db))
    }

    /// The batch filled so far, or nothing.
    pub fn batch(&self) -> &Batch {
        &self.batch
    }

    /// Takes the batch filled so far (whole commands only), starting the
    /// next where it ends.
    pub fn take_batch(&mut self) -> Batch {
        let end = self.batch.end;
        let db = self.batch.end_db;
        std::mem::replace(
            &mut self.batch,
            Batch {
                start: end,
                end,
                end_db: db,
                ..Batch::default()
            },
        )
    }

    /// Takes every whole frame off `input` into the batch; an error is
    /// a malformed stream (the frames before it are in the batch).
    pub fn feed(&mut self, input: &mut BytesMut) -> Result<(), ProtocolError> {
        let limits = Limits {
            max_bulk_len: usize::MAX >> 1,
            authenticated: true,
        };
        loop {
            let before = input.len();
            let Some(frame) = self.framer.next_frame(input, limits)? else {
                return Ok(());
            };
            let args = frame.take_args(input);
            let len = (before - input.len()) as i64;
            let at = self.offset;
            self.offset += len;
            self.command(args, at)?;
            if self.multi.is_none() {
                self.batch.end = self.offset;
                self.batch.end_db = self.db;
            }
        }
    }

    /// One command of the stream, which began at offset `at`.
    fn command(&mut self, args: Vec<Bytes>, at: i64) -> Result<(), ProtocolError> {
        let Some(name) = args.first() else {
            return Ok(()); // an empty line: only the offset moves
        };
        let name = name.to_ascii_lowercase();
        self.last = Some(name.clone());
        match name.as_slice() {
            b"select" => {
                let db = args
                    .get(1)
                    .and_then(|a| std::str::from_utf8(a).ok())
                    .and_then(|s| s.parse::<u32>().ok())
                    .filter(|&db| db < self.databases);
                match db {
                    Some(db) => self.db = db,
                    None => {
                        return Err(ProtocolError::Malformed(format!(
                            "the master selected database {:?}, which this server does not have",
                            String::from_utf8_lossy(args.get(1).map_or(&b""[..], |a| a))
                        )))
                    }
                }
            }
            b"multi" => {
                if self.multi.is_some() {
                    return Err(ProtocolError::Malformed(
                        "MULTI calls can not be nested".into(),
                    ));
                }
                self.multi = Some(Vec::new());
            }
            b"exec" => match self.multi.take() {
                Some(cmds) => self.batch.cmds.extend(cmds),
                None => return Err(ProtocolError::Malformed("EXEC without MULTI".into())),
            },
            b"ping" => {}
            b"replconf" => {
                if args
                    .get(1)
                    .is_some_and(|a| a.eq_ignore_ascii_case(b"getack"))
                {
                    self.batch.acks.push(at);
                }
            }
            _ => {
                let bytes: usize = args.iter().map(|a| a.len()).sum();
                self.batch.bytes += bytes;
                let cmd = (self.db, args);
                match &mut self.multi {
                    Some(queued) => queued.push(cmd),
                    None => self.batch.cmds.push(cmd),
                }
            }
        }
        Ok(())
    }
}

/// What a batch leaves to do once it has committed: the messages its
/// PUBLISHes made, to deliver, and its changes to the function libraries,
/// to publish.
#[derive(Default)]
pub(crate) struct AfterCommit {
    pub published: Vec<Published>,
    pub functions: Vec<crate::cmd::functions::Change>,
}

/// The writer operation that applies `batch` and stores the point it
/// reaches under `replid`. What is left to do once it has committed goes
/// in `after`.
pub(crate) fn op(
    shared: Arc<Shared>,
    batch: Batch,
    replid: String,
    after: Arc<Mutex<AfterCommit>>,
) -> WriteOp<Reply> {
    Box::new(move |txn| {
        let stored = txn.upstream()?;
        if stored.as_ref().map(|p| p.offset) != Some(batch.start) {
            return Err(EngineError::Internal(format!(
                "the replication stream continues from offset {}, the database is at {}",
                batch.start,
                stored.map_or_else(|| "no offset".to_string(), |p| p.offset.to_string())
            )));
        }
        let mut ctx = Ctx::new(&shared, 0, false, false);
        // The master's commands obey none of the refusals a client's
        // writes meet (read-only replica, NOREPLICAS, a full disk), as
        // redis obeys its master.
        ctx.wrote = true;
        ctx.master = true;
        let mut functions = Vec::new();
        for (db, request) in batch.cmds {
            ctx.db = db;
            let name = request.first().cloned().unwrap_or_default();
            let result = if name.eq_ignore_ascii_case(b"function") {
                // Not a command a script may call: run as a client's
                // FUNCTION LOAD/DELETE/FLUSH/RESTORE runs, noted for this
                // server's own replicas.
                let mark = txn.step_mark();
                let noted = request.clone();
                crate::cmd::functions::from_master(txn, request).map(|(reply, change)| {
                    functions.extend(change);
                    let before = crate::propagation::Before::default();
                    crate::propagation::note(txn, mark, db, "function", &noted, &reply, &before);
                })
            } else {
                call(&mut ctx, request, txn).map(|_| ())
            };
            if let Err(e) = result {
                if is_fatal(&e) {
                    return Err(match e {
                        crate::error::CommandError::Engine(e) => e,
                        other => EngineError::Internal(other.to_string()),
                    });
                }
                // redis logs an error answered to its master and goes on:
                // the master already applied the command its way.
                tracing::warn!(
                    command = %String::from_utf8_lossy(&name),
                    error = %e,
                    "a command from the master failed here"
                );
            }
        }
        txn.set_upstream(Some(&Position {
            replid,
            offset: batch.end,
            db: batch.end_db,
        }))?;
        let mut after = lock(&after);
        after.published.append(&mut ctx.published);
        after.functions.append(&mut functions);
        Ok(Reply::Ok)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resp(args: &[&str]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
        out
    }

    #[test]
    fn offsets_count_every_byte_and_multi_is_never_split() {
        let mut p = Parser::new(100, 0, 16);
        let mut stream = Vec::new();
        stream.extend(resp(&["SELECT", "3"]));
        stream.extend(resp(&["SET", "a", "1"]));
        stream.extend(resp(&["PING"]));
        let whole = stream.len() as i64;
        stream.extend(resp(&["MULTI"]));
        stream.extend(resp(&["SET", "b", "2"]));
        let mut input = BytesMut::from(&stream[..]);
        assert_eq!(p.feed(&mut input), Ok(()));
        let b = p.take_batch();
        assert_eq!((b.start, b.end, b.end_db), (100, 100 + whole, 3));
        assert_eq!(b.cmds.len(), 1);
        assert_eq!(b.cmds[0].0, 3);
        // The EXEC, then half a command.
        let mut input = BytesMut::from(&resp(&["EXEC"])[..]);
        let partial = b"*3\r\n$3\r\nSET";
        input.extend_from_slice(partial);
        assert_eq!(p.feed(&mut input), Ok(()));
        let b = p.take_batch();
        let multi = (resp(&["MULTI"]).len() + resp(&["SET", "b", "2"]).len()) as i64;
        assert_eq!(b.start, 100 + whole);
        assert_eq!(b.end, 100 + whole + multi + resp(&["EXEC"]).len() as i64);
        assert_eq!(b.cmds.len(), 1);
        assert_eq!(&input[..], partial);
    }

    #[test]
    fn getack_is_acknowledged_at_the_offset_before_it() {
        let mut p = Parser::new(0, 0, 16);
        let set = resp(&["SET", "a", "1"]);
        let mut input = BytesMut::from(&set[..]);
        input.extend_from_slice(&resp(&["REPLCONF", "GETACK", "*"]));
        p.feed(&mut input).expect("parses");
        let b = p.take_batch();
        assert_eq!(b.acks, vec![set.len() as i64]);
        assert_eq!(
            b.end,
            (set.len() + resp(&["REPLCONF", "GETACK", "*"]).len()) as i64
        );
    }

    #[test]
    fn garbage_is_an_error_after_the_whole_commands_before_it() {
        let mut p = Parser::new(0, 0, 16);
        let mut input = BytesMut::from(&resp(&["SET", "a", "1"])[..]);
        input.extend_from_slice(&resp(&["MULTI"]));
        input.extend_from_slice(&resp(&["SET", "b", "1"]));
        input.extend_from_slice(b"*2\r\n+oops\r\n");
        assert!(p.feed(&mut input).is_err());
        let b = p.take_batch();
        assert_eq!(b.cmds.len(), 1);
        assert_eq!(b.end, resp(&["SET", "a", "1"]).len() as i64);
    }
}

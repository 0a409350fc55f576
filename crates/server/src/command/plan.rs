//! What a parsed command becomes: a [`Plan`] the connection carries out
//! (a reply, a read for the pool, an operation for the writer, a blocking
//! wait), and the glue that turns a parsed command into a job.

use respite_engine::{View, WriteOp};

use super::Session;
use crate::reply::Reply;

/// A read, to run on the read pool.
pub type ReadFn = Box<dyn FnOnce(&View<'_, '_>) -> Reply + Send>;

/// What the connection loop does with a parsed command.
pub enum Plan {
    /// Already answered.
    Reply(Reply),
    /// Answer, then close the connection (QUIT).
    ReplyAndClose(Reply),
    /// Close the connection without a reply (SHUTDOWN).
    Close,
    /// Run on the read pool.
    Read(ReadFn, ReadNeeds),
    /// Run on the writer.
    Write(WriteOp<Reply>),
    /// A blocking command (BLPOP...): tried on the writer, then waited on
    /// until a push serves it or it times out (see `crate::blocking`).
    Block(std::sync::Arc<dyn crate::blocking::Blocker>),
    /// A GET or MGET: answered from the engine's value cache when it holds
    /// the keys and this connection has no write in flight, else run on the
    /// read pool like any read.
    Cached(Box<dyn CachedRead>),
    /// A step run on the connection once this connection's earlier writes
    /// (and the write given, if any) have committed; it gets that write's
    /// reply. PUBLISH, so that a subscriber reading on receipt sees what
    /// was written before it; EXEC holding a PUBLISH, whose messages go
    /// out once the transaction has committed.
    After(Option<WriteOp<Reply>>, AfterFn),
    /// A read that may find it has to write after all (PFCOUNT of a value
    /// whose cached count is stale): run on the read pool once everything
    /// before it has run; `Ok` is its reply, `Err(op)` an operation for
    /// the writer, run in its place, whose reply is the command's.
    ReadOrWrite(ReadOrWriteFn),
}

/// What [`Plan::ReadOrWrite`] runs on the read pool.
pub type ReadOrWriteFn = Box<dyn FnOnce(&View<'_, '_>) -> Result<Reply, WriteOp<Reply>> + Send>;

/// What [`Plan::After`] runs.
pub type AfterFn = Box<dyn FnOnce(Option<Reply>) -> Reply + Send>;

/// The most commands (or MGET keys) a read job may hold and still count as
/// quick: a reader may hold a quick job's result back while it runs up to
/// 63 more, so each must be short.
pub const QUICK_READ_LIMIT: usize = 64;

/// What a read asks of the read pool (the engine's type, end to end).
pub use respite_engine::ReadNeeds;

/// A read the value cache may answer on the connection thread (GET and
/// MGET, see `cmd::strings`).
pub trait CachedRead: Send {
    /// The reply, if the value cache can give it: a hit is the same reply
    /// the read would give; a miss goes to the read pool. The caller must
    /// have no write of its own in flight.
    fn cached_reply(
        &self,
        cache: &respite_engine::ValueCache,
        access: &respite_engine::Access,
    ) -> Option<Reply>;
    /// The read for the pool, when the cache could not answer.
    fn into_read(self: Box<Self>) -> (ReadFn, ReadNeeds);
}

impl Session {
    /// `reply`, after ending the watches if there are any.
    pub(crate) fn reply_ending_watches(&mut self, reply: Reply) -> Plan {
        match self.end_watches(reply.clone()) {
            Some(op) => Plan::Write(op),
            None => Plan::Reply(reply),
        }
    }
}

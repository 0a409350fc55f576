//! CLIENT REPLY OFF and SKIP applied to a plan: the plan of a silenced
//! command answers with [`Reply::Silent`], which encodes to nothing,
//! wherever it runs (on the connection, a reader, the writer, or a
//! blocked client's wake-up).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::Plan;
use crate::blocking::Blocker;
use crate::clients::{ClientState, REPLY_OFF, REPLY_ON, REPLY_SKIP};
use crate::error::CommandError;
use crate::reply::Reply;

/// Applies CLIENT REPLY to a planned command: `before` is the mode when
/// the command arrived. OFF silences every reply from the command that set
/// it on; SKIP silences its own reply and the next command's; ON's own
/// reply is sent.
pub fn silence_if_asked(state: &ClientState, before: u8, plan: Plan) -> Plan {
    let after = state.reply_mode();
    let silent = match (before, after) {
        (_, REPLY_OFF) => true,
        (REPLY_SKIP, REPLY_SKIP) => {
            // This is the command after SKIP: silenced, then replies
            // resume.
            state.set_reply_mode(REPLY_ON);
            true
        }
        (_, REPLY_SKIP) => true,
        _ => false,
    };
    if silent {
        silenced(plan)
    } else {
        plan
    }
}

/// A plan whose reply encodes to nothing, wherever it runs.
fn silenced(plan: Plan) -> Plan {
    match plan {
        Plan::Reply(r) => Plan::Reply(r.pushes_only()),
        Plan::ReplyAndClose(_) => Plan::ReplyAndClose(Reply::Silent),
        Plan::Close => Plan::Close,
        Plan::Write(op) => Plan::Write(silenced_write(op)),
        Plan::Read(f, needs) => Plan::Read(
            Box::new(move |view| {
                f(view);
                Reply::Silent
            }),
            needs,
        ),
        Plan::Cached(read) => {
            let (f, needs) = read.into_read();
            silenced(Plan::Read(f, needs))
        }
        Plan::Block(blocker) => Plan::Block(Arc::new(Silent(blocker))),
        Plan::After(write, then) => Plan::After(write, Box::new(|r| then(r).pushes_only())),
        Plan::ReadOrWrite(f) => Plan::ReadOrWrite(Box::new(move |view| match f(view) {
            Ok(_) => Ok(Reply::Silent),
            Err(op) => Err(silenced_write(op)),
        })),
    }
}

/// A write whose reply encodes to nothing. An error the writer would
/// answer is silenced too; one that must take the group back (a failed
/// write, storage) still does.
fn silenced_write(op: respite_engine::WriteOp<Reply>) -> respite_engine::WriteOp<Reply> {
    Box::new(move |txn| {
        let before = txn.changes();
        match op(txn) {
            Ok(_) => Ok(Reply::Silent),
            Err(respite_engine::EngineError::Storage(e)) => {
                Err(respite_engine::EngineError::Storage(e))
            }
            Err(_) if txn.changes() == before => Ok(Reply::Silent),
            Err(e) => Err(e),
        }
    })
}

/// A blocking command whose reply is not sent.
struct Silent(Arc<dyn Blocker>);

impl Blocker for Silent {
    fn keys(&self) -> Vec<(u32, Bytes)> {
        self.0.keys()
    }
    fn timeout(&self) -> Option<Duration> {
        self.0.timeout()
    }
    fn try_pop(
        &self,
        txn: &mut respite_engine::Txn<'_, '_>,
        ready: Option<(u32, &[u8])>,
    ) -> Result<Option<Reply>, CommandError> {
        Ok(self.0.try_pop(txn, ready)?.map(|_| Reply::Silent))
    }
    fn timeout_reply(&self) -> Reply {
        Reply::Silent
    }
}

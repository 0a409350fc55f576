//! WAIT, WAITAOF and ROLE: the replication commands, for a server that has
//! no replicas.
//!
//! Client libraries call WAIT after writes they want on replicas, and
//! WAITAOF (redis 7.2) to learn that a write reached the local disk. respite
//! is always a master with no replicas, and with `appendfsync always` a
//! write is on disk before it is acknowledged; so these answer as a
//! redis-server master without replicas would: WAIT counts 0 replicas,
//! WAITAOF reports the local fsync. Asking for replicas that will never
//! come blocks until the timeout, as in redis (0 blocks until the client
//! goes), in the same machinery as BLPOP (so CLIENT UNBLOCK and CLIENT
//! KILL end it); inside MULTI nothing blocks and the count is answered at
//! once.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use respite_engine::{AppendFsync, Txn};

use crate::args::Args;
use crate::blocking::Blocker;
use crate::command::{LocalCommand, Plan, Session};
use crate::error::CommandError;
use crate::reply::Reply;
use crate::sync::lock;

/// A timeout in milliseconds as redis's `getTimeoutFromObjectOrReply`
/// reads it; 0 waits forever.
fn timeout_ms(arg: &[u8]) -> Result<Option<Duration>, CommandError> {
    let ms = crate::args::parse_i64(arg)
        .ok_or_else(|| CommandError::Other("timeout is not an integer or out of range".into()))?;
    if ms < 0 {
        return Err(CommandError::Other("timeout is negative".into()));
    }
    Ok((ms > 0).then(|| Duration::from_millis(ms as u64)))
}

/// Waits for acknowledgements that never come: blocks, on no key, until
/// its timeout, then answers what was acknowledged.
struct NoReplicas {
    timeout: Option<Duration>,
    reply: Reply,
}

impl Blocker for NoReplicas {
    fn keys(&self) -> Vec<(u32, Bytes)> {
        Vec::new()
    }
    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }
    fn try_pop(
        &self,
        _txn: &mut Txn<'_, '_>,
        _ready: Option<(u32, &[u8])>,
    ) -> Result<Option<Reply>, CommandError> {
        Ok(None)
    }
    fn timeout_reply(&self) -> Reply {
        self.reply.clone()
    }
}

/// `WAIT numreplicas timeout`
pub struct Wait {
    numreplicas: i64,
    timeout: Option<Duration>,
}

impl LocalCommand for Wait {
    fn parse(args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        let numreplicas = args.next_i64()?;
        let timeout = timeout_ms(&args.next()?)?;
        Ok(Wait {
            numreplicas,
            timeout,
        })
    }
    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        let reply = Reply::Int(0);
        if self.numreplicas <= 0 || s.multi.is_some() {
            return Ok(Plan::Reply(reply));
        }
        Ok(Plan::Block(Arc::new(NoReplicas {
            timeout: self.timeout,
            reply,
        })))
    }
}

/// `WAITAOF numlocal numreplicas timeout` (redis 7.2)
pub struct WaitAof {
    numlocal: i64,
    numreplicas: i64,
    timeout: Option<Duration>,
}

impl LocalCommand for WaitAof {
    fn parse(args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        let numlocal = args.next_i64()?;
        if !(0..=1).contains(&numlocal) {
            return Err(CommandError::Other(
                "value is out of range, value must between 0 and 1".into(),
            ));
        }
        let numreplicas = args.next_i64()?;
        if numreplicas < 0 {
            return Err(CommandError::Other(
                "value is out of range, must be positive".into(),
            ));
        }
        let timeout = timeout_ms(&args.next()?)?;
        Ok(WaitAof {
            numlocal,
            numreplicas,
            timeout,
        })
    }
    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        // With `always`, every write this client was answered for was
        // fsynced before the answer; with `everysec` or `no` respite cannot
        // tell this client's writes apart, so it does not claim them.
        let local = i64::from(*lock(&s.shared.settings.appendfsync) == AppendFsync::Always);
        let reply = Reply::Array(vec![Reply::Int(local), Reply::Int(0)]);
        let satisfied = local >= self.numlocal && self.numreplicas == 0;
        if satisfied || s.multi.is_some() {
            return Ok(Plan::Reply(reply));
        }
        Ok(Plan::Block(Arc::new(NoReplicas {
            timeout: self.timeout,
            reply,
        })))
    }
}

/// `ROLE`: a master with no replicas, or, serving a file replica
/// (`respite_engine::replica`), a replica with the follower's position as
/// its offset.
pub struct Role;

impl LocalCommand for Role {
    fn parse(_args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        Ok(Role)
    }
    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        let engine = &s.shared.engine;
        if engine.is_replica() {
            let position = respite_engine::replica::Position::read(engine.db_path());
            return Ok(Plan::Reply(Reply::Array(vec![
                Reply::bulk("slave"),
                Reply::bulk(""),
                Reply::Int(0),
                Reply::bulk(if position.is_some() {
                    "connected"
                } else {
                    "connect"
                }),
                Reply::Int(position.map_or(0, |p| p.offset() as i64)),
            ])));
        }
        Ok(Plan::Reply(Reply::Array(vec![
            Reply::bulk("master"),
            Reply::Int(0),
            Reply::Array(Vec::new()),
        ])))
    }
}

/// This family's rows of the command table (see [`crate::command::table`]).
#[rustfmt::skip]
pub(crate) fn commands() -> Vec<crate::command::Spec> {
    use crate::command::Spec;
    vec![
        Spec::local::<Role>("role"),
        Spec::local::<Wait>("wait"),
        Spec::local::<WaitAof>("waitaof"),
    ]
}

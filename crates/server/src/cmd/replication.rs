//! The replication commands: REPLCONF, PSYNC and SYNC (a replica's side of
//! the handshake; the link itself is served by `crate::repl`), WAIT,
//! WAITAOF, ROLE, and REPLICAOF (SLAVEOF), which makes this server a
//! replica of a master (the link is `crate::replica_link`) or a master
//! again.
//!
//! WAIT counts the replicas that acknowledged the master's offset as it
//! was when WAIT ran (every write this client was answered for is in it),
//! asking them with `REPLCONF GETACK *`; short of the number asked for it
//! blocks until enough acknowledge or the timeout passes, in the same
//! machinery as BLPOP (so CLIENT UNBLOCK and CLIENT KILL end it); inside
//! MULTI nothing blocks and the count is answered at once. WAITAOF (redis
//! 7.2) reports the local fsync: with `appendfsync always` a write is on
//! disk before it is acknowledged; replicas' fsyncs are not counted.

use std::sync::atomic::Ordering;
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

/// Waits for replicas' acknowledgements of `target`: woken by
/// `crate::repl::Master` when enough arrived, else at its timeout; either
/// way the reply is the count at that moment.
struct AckWait {
    master: Arc<crate::repl::Master>,
    target: u64,
    replicas: usize,
    timeout: Option<Duration>,
}

impl Blocker for AckWait {
    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }
    fn try_pop(
        &self,
        _txn: &mut Txn<'_, '_>,
        _ready: Option<(u32, &[u8])>,
    ) -> Result<Option<Reply>, CommandError> {
        let acked = self.master.acked(self.target);
        Ok((acked >= self.replicas).then_some(Reply::Int(acked as i64)))
    }
    fn timeout_reply(&self) -> Reply {
        Reply::Int(self.master.acked(self.target) as i64)
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
        if s.shared.engine.is_replica() || s.shared.upstream.is_replica() {
            return Err(CommandError::Other(
                "WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.".into(),
            ));
        }
        let master = s.shared.repl.clone();
        let target = master.offset();
        let acked = master.acked(target);
        if self.numreplicas <= acked as i64 || s.multi.is_some() {
            return Ok(Plan::Reply(Reply::Int(acked as i64)));
        }
        let replicas = usize::try_from(self.numreplicas).unwrap_or(usize::MAX);
        master.wait_for(&s.client, target, replicas, self.timeout);
        master.request_ack();
        Ok(Plan::Block(Arc::new(AckWait {
            master,
            target,
            replicas,
            timeout: self.timeout,
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

/// `ROLE`: a master and its replicas; a replica of a master, with its
/// link's state and offset; or, serving a file replica
/// (`respite_engine::replica`), a replica with the follower's position as
/// its offset.
pub struct Role;

impl LocalCommand for Role {
    fn parse(_args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        Ok(Role)
    }
    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        let link = &s.shared.upstream;
        if let Some((host, port)) = link.master() {
            let state = link.state();
            let offset = if state == crate::replica_link::State::Connected {
                link.offset()
            } else {
                -1
            };
            return Ok(Plan::Reply(Reply::Array(vec![
                Reply::bulk("slave"),
                Reply::bulk(host),
                Reply::Int(i64::from(port)),
                Reply::bulk(state.role_word()),
                Reply::Int(offset),
            ])));
        }
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
        let master = &s.shared.repl;
        let replicas = master
            .replicas()
            .into_iter()
            .filter(|r| r.state() == "online")
            .map(|r| {
                Reply::Array(vec![
                    Reply::bulk(r.ip.clone()),
                    Reply::bulk(r.port.to_string()),
                    Reply::bulk(r.ack.load(Ordering::Relaxed).to_string()),
                ])
            })
            .collect();
        Ok(Plan::Reply(Reply::Array(vec![
            Reply::bulk("master"),
            Reply::Int(master.offset() as i64),
            Reply::Array(replicas),
        ])))
    }
}

/// `REPLCONF option value [option value ...]`: what a replica announces
/// before PSYNC, and its acknowledgements (answered with nothing, as in
/// redis).
pub struct ReplConf {
    pairs: Vec<(Bytes, Bytes)>,
}

impl LocalCommand for ReplConf {
    fn parse(args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        if args.remaining() % 2 == 1 {
            return Err(CommandError::Syntax);
        }
        let mut pairs = Vec::new();
        while args.remaining() > 0 {
            let option = args.next()?;
            let value = args.next()?;
            pairs.push((option, value));
        }
        Ok(ReplConf { pairs })
    }
    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        let master = &s.shared.repl;
        for (option, value) in self.pairs {
            let range = |lo: i64, hi: i64| {
                crate::args::parse_i64(&value)
                    .filter(|v| (lo..=hi).contains(v))
                    .ok_or_else(|| {
                        CommandError::Other(format!(
                            "value is out of range, must be between {lo} and {hi}"
                        ))
                    })
            };
            match option.to_ascii_lowercase().as_slice() {
                b"listening-port" => {
                    let port = crate::args::parse_i64(&value).ok_or_else(|| {
                        CommandError::Other("value is not an integer or out of range".into())
                    })?;
                    master.handshake(s.client.id, Some(port as u16), None, None);
                }
                b"ip-address" => {
                    if value.len() > 46 {
                        return Err(CommandError::Other(format!(
                            "REPLCONF ip-address provided by replica instance is too long: {} bytes",
                            value.len()
                        )));
                    }
                    let ip = String::from_utf8_lossy(&value).into_owned();
                    master.handshake(s.client.id, None, Some(ip), None);
                }
                b"capa" => {}
                b"ack" | b"getack" => return Ok(Plan::Reply(Reply::Silent)),
                b"rdb-only" => {
                    let on = range(0, 1)? == 1;
                    master.handshake(s.client.id, None, None, Some(on));
                }
                b"rdb-filter-only" => {}
                _ => {
                    return Err(CommandError::Other(format!(
                        "Unrecognized REPLCONF option: {}",
                        String::from_utf8_lossy(&option)
                    )))
                }
            }
        }
        Ok(Plan::Reply(Reply::Ok))
    }
}

/// `PSYNC replicationid offset` and `SYNC`: the connection becomes a
/// replica's link (see `crate::repl`), after the replies before it.
pub struct Sync {
    psync: Option<(Bytes, i64)>,
}

impl LocalCommand for Sync {
    fn parse(args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        if args.remaining() == 0 {
            return Ok(Sync { psync: None });
        }
        let id = args.next()?;
        let offset = crate::args::parse_i64(&args.next()?).unwrap_or(-1);
        Ok(Sync {
            psync: Some((id, offset)),
        })
    }
    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        if s.shared.engine.is_replica() {
            return Err(CommandError::Raw(
                "NOMASTERLINK Can't SYNC while not connected with my master".into(),
            ));
        }
        s.shared.repl.request_sync(s.client.id, self.psync);
        // From now on a replica (CLIENT LIST's flag `S`, type `replica`).
        s.client.state.link.store(
            crate::clients::LINK_REPLICA,
            std::sync::atomic::Ordering::Relaxed,
        );
        Ok(Plan::Reply(Reply::Silent))
    }
}

/// `REPLICAOF host port` / `REPLICAOF NO ONE` (and `SLAVEOF`): follow a
/// master, or stop following it and take writes (promotion).
pub struct ReplicaOf {
    master: Option<(String, u16)>,
}

impl LocalCommand for ReplicaOf {
    fn parse(args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        let host = args.next()?;
        let port = args.next()?;
        if host.eq_ignore_ascii_case(b"no") && port.eq_ignore_ascii_case(b"one") {
            return Ok(ReplicaOf { master: None });
        }
        let port = crate::args::parse_i64(&port)
            .filter(|p| (0..=65535).contains(p))
            .ok_or_else(|| CommandError::Other("Invalid master port".into()))?;
        Ok(ReplicaOf {
            master: Some((String::from_utf8_lossy(&host).into_owned(), port as u16)),
        })
    }
    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        if s.shared.engine.is_replica() {
            return Err(CommandError::Other(
                "REPLICAOF not allowed while serving a file replica.".into(),
            ));
        }
        if s.shared.repl.replicas().iter().any(|r| r.id == s.client.id) {
            return Err(CommandError::Other(
                "Command is not valid when client is a replica.".into(),
            ));
        }
        let link = &s.shared.upstream;
        let from = client_name(s);
        match self.master {
            None => {
                if !link.is_replica() {
                    return Ok(Plan::Reply(Reply::Ok));
                }
                crate::replica_link::run::replicate(&s.shared, None);
                tracing::info!("MASTER MODE enabled (user request from '{from}')");
                // Queued behind every batch of the link: the point is
                // forgotten once the last of them is committed.
                Ok(Plan::Write(crate::replica_link::run::forget_op()))
            }
            Some((host, port)) => {
                if link
                    .master()
                    .is_some_and(|(h, p)| h.eq_ignore_ascii_case(&host) && p == port)
                {
                    tracing::info!(
                        "REPLICAOF would result into synchronization with the master we are \
                         already connected with. No operation performed."
                    );
                    return Ok(Plan::Reply(Reply::Simple(
                        "OK Already connected to specified master",
                    )));
                }
                crate::replica_link::run::replicate(&s.shared, Some((host.clone(), port)));
                tracing::info!("REPLICAOF {host}:{port} enabled (user request from '{from}')");
                Ok(Plan::Reply(Reply::Ok))
            }
        }
    }
}

/// How the log names the client that asked.
fn client_name(s: &Session) -> String {
    format!("id={}", s.client.id)
}

/// This family's rows of the command table (see [`crate::command::table`]).
#[rustfmt::skip]
pub(crate) fn commands() -> Vec<crate::command::Spec> {
    use crate::command::Spec;
    vec![
        Spec::local::<Sync>("psync"),
        Spec::local::<ReplConf>("replconf"),
        Spec::local::<ReplicaOf>("replicaof"),
        Spec::local::<Role>("role"),
        Spec::local::<ReplicaOf>("slaveof"),
        Spec::local::<Sync>("sync"),
        Spec::local::<Wait>("wait"),
        Spec::local::<WaitAof>("waitaof"),
    ]
}

//! What a data command may know of the world when it is parsed: the
//! database it names keys in, the protocol its reply is shaped for,
//! whether its reads count as accesses, and a handful of server facts
//! (the number of databases, `proto-max-bulk-len`, the memory policy that
//! OBJECT reports). Nothing else: a command parsed from a [`Ctx`] cannot
//! reach the connection, the client registry or the rest of the server,
//! so the same command runs for a client's connection, inside EXEC, from
//! a Lua script on the writer thread, or from a replication stream.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use respite_engine::Access;

use crate::state::Shared;

/// The context a command is parsed (and, for the few that need no
/// connection, run) in.
pub struct Ctx<'a> {
    /// The selected database. A SELECT called through
    /// [`call`](super::call) changes it for the calls after it.
    pub db: u32,
    /// Whether replies are shaped for RESP3 (after HELLO 3).
    pub resp3: bool,
    /// Whether reads count as accesses: false in CLIENT NO-TOUCH mode.
    pub touches: bool,
    /// Whether the client is in RESP2's subscribed mode (subscribed to a
    /// channel or pattern, not after HELLO 3): PING answers `["pong", msg]`
    /// there. Never for a script or a replication stream.
    pub subscribed: bool,
    /// A command with the `write` flag has been called through this
    /// context by [`call`](super::call) (a script's "dirty" state): from
    /// then on the refusals redis makes only before a script's first write
    /// (NOREPLICAS, a full disk) are no longer made, so a script is never
    /// stopped half-way for them.
    pub wrote: bool,
    /// A command with the `readonly` flag has been called through this
    /// context (for CLIENT TRACKING: a script that read has its declared
    /// keys remembered for its caller, as redis does).
    pub read: bool,
    /// An ACL check [`call`](super::call) runs for each command after its
    /// arity and script checks (the table row's index and the request,
    /// name first): a refusal is the command's error. `None`: no check.
    pub authorize: Option<&'a Authorize<'a>>,
    /// The commands come from this server's master (a replica applying
    /// its replication stream): a write is not refused for this server
    /// being a read-only replica.
    pub master: bool,
    /// The messages a script published (PUBLISH, SPUBLISH through
    /// [`call`](super::call)), in order: delivered once the script's
    /// group has committed.
    pub published: Vec<Published>,
    /// The script declared `allow-oom`: [`call`](super::call) does not
    /// refuse its `denyoom` commands over `maxmemory` (redis's
    /// `SCRIPT_ALLOW_OOM`).
    pub allow_oom: bool,
    /// The calls shown to MONITOR (`[db lua] ...` lines), in the
    /// monitor feed's encoding, while someone monitors: sent as one batch
    /// once the script ends ([`Ctx::publish_monitored`]). `None` when
    /// nobody monitored as the script started.
    pub(crate) monitored: Option<Vec<u8>>,
    /// The server, read only through the methods below.
    server: &'a Shared,
}

/// A message a script published: its channel, its payload, and whether
/// the channel is a shard channel (SPUBLISH).
#[derive(Debug, Clone)]
pub struct Published {
    /// The channel.
    pub channel: bytes::Bytes,
    /// The message.
    pub message: bytes::Bytes,
    /// SPUBLISH rather than PUBLISH.
    pub shard: bool,
}

/// An ACL check for [`Ctx::authorize`].
pub type Authorize<'a> =
    dyn Fn(usize, &[bytes::Bytes]) -> Result<(), crate::error::CommandError> + 'a;

impl<'a> Ctx<'a> {
    /// A context on `server`: database `db`, RESP3 if `resp3`, reads
    /// counted as accesses if `touches`; not subscribed, nothing written yet,
    /// no ACL check.
    pub fn new(server: &'a Shared, db: u32, resp3: bool, touches: bool) -> Ctx<'a> {
        Ctx {
            db,
            resp3,
            touches,
            subscribed: false,
            wrote: false,
            read: false,
            master: false,
            authorize: None,
            published: Vec::new(),
            allow_oom: false,
            monitored: None,
            server,
        }
    }

    /// How many databases there are (`databases`): SELECT, MOVE, COPY
    /// and SWAPDB check their indexes against it.
    pub fn databases(&self) -> u32 {
        self.server.config.databases
    }

    /// `proto-max-bulk-len` now: the longest string a command may make
    /// (SETBIT, SETRANGE, BITFIELD offsets).
    pub fn max_bulk_len(&self) -> usize {
        self.server
            .settings
            .proto_max_bulk_len
            .load(Ordering::Relaxed)
    }

    /// `hll-sparse-max-bytes` now: the largest a sparse HyperLogLog grows
    /// before it is made dense.
    pub fn hll_sparse_max_bytes(&self) -> usize {
        let value = self.server.params.get("hll-sparse-max-bytes");
        value.parse().unwrap_or(usize::MAX)
    }

    /// Whether `maxmemory-policy` is an LFU one (OBJECT FREQ answers only
    /// then).
    pub fn lfu(&self) -> bool {
        self.server.params.get("maxmemory-policy").ends_with("lfu")
    }

    /// Whether small integers count as shared objects (OBJECT REFCOUNT).
    pub fn shares_integers(&self) -> bool {
        let params = &self.server.params;
        let policy = params.get("maxmemory-policy");
        params.get("maxmemory") == "0" || !(policy.ends_with("lru") || policy.ends_with("lfu"))
    }

    /// The engine's access record (OBJECT IDLETIME and FREQ).
    pub fn access(&self) -> &'a Arc<Access> {
        self.server.engine.access()
    }

    /// When the last snapshot was saved, in Unix seconds (LASTSAVE).
    pub fn last_save_unix(&self) -> u64 {
        self.server.engine.snapshots().status().last_save_unix
    }

    /// The pub/sub registry (PUBLISH and PUBSUB from a script).
    pub(crate) fn pubsub(&self) -> &'a crate::pubsub::Registry {
        &self.server.pubsub
    }

    /// Delivers messages a script published once its group committed,
    /// in order, as PUBLISH delivers them.
    pub(crate) fn deliver(server: &Shared, published: Vec<Published>) {
        let limit = crate::sync::lock(&server.settings.output_limits)[2];
        for p in published {
            server.pubsub.publish(
                p.channel,
                p.message,
                p.shard,
                limit,
                &server.counters.output_limit_closes,
            );
        }
    }

    /// Tells the watchdog the writer is making progress (a long script
    /// checking back: see `crate::service`).
    pub(crate) fn note_progress(&self) {
        self.server.engine.note_progress();
    }

    /// Whether writes are refused for want of replicas
    /// (`min-replicas-to-write`).
    pub(super) fn wants_replicas(&self) -> bool {
        self.server.wants_replicas.load(Ordering::Relaxed)
    }

    /// Whether this server is a read-only replica of a master (see
    /// `crate::replica_link`).
    pub(super) fn read_only_replica(&self) -> bool {
        self.server.upstream.is_replica()
    }

    /// Counts an error reply a script's call met, as redis's
    /// `afterErrorReply` does for it: in the error statistics by its code,
    /// and in `total_error_replies`, whether or not the script catches it.
    pub(crate) fn count_error(&self, text: &[u8]) {
        self.server.stats.error(text);
        self.server
            .counters
            .error_replies
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an error reply in the error statistics only (the
    /// connection that sends it counts it in `total_error_replies`).
    pub(crate) fn count_error_stat(&self, text: &[u8]) {
        self.server.stats.error(text);
    }

    /// Takes back the one count of `total_error_replies` the connection
    /// will add for a script's error reply that passes on a call's error,
    /// already counted by [`Ctx::count_error`] (redis sends it with
    /// `ERR_REPLY_FLAG_NO_STATS_UPDATE`). Never below zero (a CONFIG
    /// RESETSTAT may have come between).
    pub(crate) fn uncount_reply_error(&self) {
        let _ = self.server.counters.error_replies.fetch_update(
            Ordering::Relaxed,
            Ordering::Relaxed,
            |n| n.checked_sub(1),
        );
    }

    /// Starts noting the script's calls for MONITOR, if anyone monitors.
    pub(crate) fn monitor_calls(&mut self) {
        if self.server.monitors.active() {
            self.monitored = Some(Vec::new());
        }
    }

    /// Sends the calls noted for MONITOR, as lines from `lua`.
    pub(crate) fn publish_monitored(&mut self) {
        if let Some(data) = self.monitored.take().filter(|d| !d.is_empty()) {
            self.server.monitors.publish_lua(data);
        }
    }

    /// The command statistics, which count a script's calls too.
    pub(super) fn stats(&self) -> &'a crate::stats::CommandStats {
        let server: &'a Shared = self.server;
        &server.stats
    }

    /// Why a command that may add data is refused now (over `maxmemory`
    /// or `maxdisk`, or the disk full), if it is.
    pub(super) fn disk_refusal(&self) -> Option<respite_engine::EngineError> {
        self.server.engine.refusal()
    }
}

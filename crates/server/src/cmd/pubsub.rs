//! Pub/sub commands: SUBSCRIBE and its kin, PUBLISH, SPUBLISH, PUBSUB.
//!
//! The registry and the delivery of messages are `crate::pubsub`'s; the
//! connection's subscribed mode (the push queue in its loop, RESP2's
//! filter on commands) is `crate::connection`'s. The confirmations of
//! (un)subscribing are push frames (`>` in RESP3), which CLIENT REPLY OFF
//! does not silence, as in redis. PUBLISH runs once this connection's
//! earlier writes have committed, so a subscriber that reads the key named
//! in a message when it gets it sees the write made just before (Celery's
//! result backend does exactly that); inside MULTI, once the transaction
//! has committed.

use bytes::Bytes;

use crate::args::Args;
use crate::command::call::Target;
use crate::command::{Ctx, LocalCommand, Plan, Session};
use crate::error::CommandError;
use crate::pubsub::Kind;
use crate::reply::Reply;
use crate::sync::lock;

/// `SUBSCRIBE channel [channel ...]`, `PSUBSCRIBE pattern [pattern ...]`,
/// `SSUBSCRIBE shardchannel [shardchannel ...]`, by `K`.
pub struct Subscribe<const K: u8> {
    names: Vec<Bytes>,
}

/// `UNSUBSCRIBE [channel ...]`, `PUNSUBSCRIBE [pattern ...]`,
/// `SUNSUBSCRIBE [shardchannel ...]`, by `K`.
pub struct Unsubscribe<const K: u8> {
    names: Vec<Bytes>,
}

const CHANNEL: u8 = 0;
const PATTERN: u8 = 1;
const SHARD: u8 = 2;

fn kind(k: u8) -> Kind {
    match k {
        PATTERN => Kind::Pattern,
        SHARD => Kind::Shard,
        _ => Kind::Channel,
    }
}

fn rest(args: &mut Args) -> Vec<Bytes> {
    std::iter::from_fn(|| args.next_opt()).collect()
}

impl<const K: u8> LocalCommand for Subscribe<K> {
    fn parse(args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        Ok(Subscribe { names: rest(args) })
    }
    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        // A client that expects one reply per command cannot subscribe:
        // inside EXEC redis still lets SUBSCRIBE and PSUBSCRIBE through
        // (for compatibility), not SSUBSCRIBE.
        if s.acl.in_exec && K == SHARD {
            return Err(CommandError::Other(
                "SSUBSCRIBE isn't allowed for a DENY BLOCKING client".into(),
            ));
        }
        let reply = s.shared.pubsub.subscribe(&s.client, kind(K), self.names);
        Ok(Plan::Reply(reply))
    }
}

impl<const K: u8> LocalCommand for Unsubscribe<K> {
    fn parse(args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        Ok(Unsubscribe { names: rest(args) })
    }
    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        let reply = s
            .shared
            .pubsub
            .unsubscribe(s.client.as_ref(), kind(K), self.names, true);
        Ok(Plan::Reply(reply))
    }
}

/// `PUBLISH channel message`, `SPUBLISH shardchannel message` (`SHARDED`).
pub struct Publish<const SHARDED: bool> {
    channel: Bytes,
    message: Bytes,
}

impl<const SHARDED: bool> LocalCommand for Publish<SHARDED> {
    fn parse(args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        Ok(Publish {
            channel: args.next()?,
            message: args.next()?,
        })
    }
    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        let shared = s.shared.clone();
        // While replicas are fed, the message goes to them too, in order
        // with the writes (redis forces PUBLISH's propagation): a step of
        // the writer that changes nothing, which dispatch makes note the
        // command as sent (see `crate::propagation`).
        let noted = shared.engine.propagation().is_active().then(|| {
            let op: respite_engine::WriteOp<Reply> = Box::new(|_| Ok(Reply::Nil));
            op
        });
        Ok(Plan::After(
            noted,
            Box::new(move |_| {
                let limit = lock(&shared.settings.output_limits)[2];
                Reply::Int(shared.pubsub.publish(
                    self.channel,
                    self.message,
                    SHARDED,
                    limit,
                    &shared.counters.output_limit_closes,
                ))
            }),
        ))
    }
}

/// PUBLISH and SPUBLISH from a script: the reply is the number of
/// subscribers the message reaches now; the message is delivered once
/// the script's group has committed (see [`crate::command::Published`]).
fn script_publish<const SHARDED: bool>(
    ctx: &mut Ctx<'_>,
    mut args: Args,
    _target: Target<'_, '_, '_>,
) -> Result<Reply, CommandError> {
    let channel = args.next()?;
    let message = args.next()?;
    if args.remaining() > 0 {
        return Err(CommandError::Syntax);
    }
    let n = ctx.pubsub().receivers(&channel, SHARDED);
    ctx.published.push(crate::command::Published {
        channel,
        message,
        shard: SHARDED,
    });
    Ok(Reply::Int(n))
}

/// PUBSUB from a script: the registry's answer, as for a client.
fn script_pubsub(
    ctx: &mut Ctx<'_>,
    mut args: Args,
    _target: Target<'_, '_, '_>,
) -> Result<Reply, CommandError> {
    let sub = crate::args::subcommand(&mut args)?;
    let left = args.remaining();
    let registry = ctx.pubsub();
    let query = match sub.name.as_str() {
        "HELP" if left == 0 => Pubsub::Help,
        "CHANNELS" if left <= 1 => Pubsub::Channels(false, args.next_opt()),
        "SHARDCHANNELS" if left <= 1 => Pubsub::Channels(true, args.next_opt()),
        "NUMSUB" => Pubsub::Numsub(false, rest(&mut args)),
        "SHARDNUMSUB" => Pubsub::Numsub(true, rest(&mut args)),
        "NUMPAT" if left == 0 => Pubsub::Numpat,
        _ => return Err(sub.syntax("PUBSUB")),
    };
    Ok(query.answer(registry))
}

/// `PUBSUB CHANNELS [pattern]`, `NUMSUB [channel ...]`, `NUMPAT`,
/// `SHARDCHANNELS [pattern]`, `SHARDNUMSUB [shardchannel ...]`, `HELP`.
pub enum Pubsub {
    /// CHANNELS or SHARDCHANNELS (`true`).
    Channels(bool, Option<Bytes>),
    /// NUMSUB or SHARDNUMSUB (`true`).
    Numsub(bool, Vec<Bytes>),
    /// NUMPAT.
    Numpat,
    /// HELP.
    Help,
}

impl LocalCommand for Pubsub {
    fn parse(args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        let sub = crate::args::subcommand(args)?;
        let left = args.remaining();
        Ok(match sub.name.as_str() {
            "HELP" if left == 0 => Pubsub::Help,
            "CHANNELS" if left <= 1 => Pubsub::Channels(false, args.next_opt()),
            "SHARDCHANNELS" if left <= 1 => Pubsub::Channels(true, args.next_opt()),
            "NUMSUB" => Pubsub::Numsub(false, rest(args)),
            "SHARDNUMSUB" => Pubsub::Numsub(true, rest(args)),
            "NUMPAT" if left == 0 => Pubsub::Numpat,
            _ => return Err(sub.syntax("PUBSUB")),
        })
    }
    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        Ok(Plan::Reply(self.answer(&s.shared.pubsub)))
    }
}

impl Pubsub {
    fn answer(self, registry: &crate::pubsub::Registry) -> Reply {
        match self {
            Pubsub::Help => super::common::help(
                "PUBSUB",
                &[
                    "CHANNELS [<pattern>]",
                    "    Return the currently active channels matching a <pattern> (default: '*').",
                    "NUMPAT",
                    "    Return number of subscriptions to patterns.",
                    "NUMSUB [<channel> ...]",
                    "    Return the number of subscribers for the specified channels, excluding",
                    "    pattern subscriptions(default: no channels).",
                    "SHARDCHANNELS [<pattern>]",
                    "    Return the currently active shard level channels matching a <pattern> (default: '*').",
                    "SHARDNUMSUB [<shardchannel> ...]",
                    "    Return the number of subscribers for the specified shard level channel(s)",
                ],
            ),
            Pubsub::Channels(shard, pattern) => Reply::Array(
                registry
                    .channels(shard, pattern.as_deref())
                    .into_iter()
                    .map(Reply::Bulk)
                    .collect(),
            ),
            Pubsub::Numsub(shard, channels) => Reply::Array(
                channels
                    .into_iter()
                    .flat_map(|c| {
                        let n = registry.numsub(shard, &c) as i64;
                        [Reply::Bulk(c), Reply::Int(n)]
                    })
                    .collect(),
            ),
            Pubsub::Numpat => Reply::Int(registry.sizes().1 as i64),
        }
    }
}

/// This family's rows of the command table (see [`crate::command::table`]).
#[rustfmt::skip]
pub(crate) fn commands() -> Vec<crate::command::Spec> {
    use crate::command::Spec;
    vec![
        Spec::local::<Subscribe<PATTERN>>("psubscribe"),
        Spec::local::<Publish<false>>("publish").with_call(script_publish::<false>),
        Spec::local::<Pubsub>("pubsub").with_call(script_pubsub)
            .with_subcommands("PUBSUB", &["channels", "help", "numpat", "numsub", "shardchannels", "shardnumsub"]),
        Spec::local::<Unsubscribe<PATTERN>>("punsubscribe"),
        Spec::local::<Publish<true>>("spublish").with_call(script_publish::<true>),
        Spec::local::<Subscribe<SHARD>>("ssubscribe"),
        Spec::local::<Subscribe<CHANNEL>>("subscribe"),
        Spec::local::<Unsubscribe<SHARD>>("sunsubscribe"),
        Spec::local::<Unsubscribe<CHANNEL>>("unsubscribe"),
    ]
}

//! Pub/sub: who listens to what, and how a message reaches them.
//!
//! The [`Registry`] maps each channel, pattern and shard channel to the
//! clients subscribed to it; each client keeps the other side, its own
//! subscriptions ([`Subscriptions`], in its registry entry), for its
//! replies' counts, CLIENT LIST's `sub=`/`psub=`/`ssub=` and for
//! unsubscribing everything at once. Both sides change together, under
//! the registry's lock.
//!
//! A message never touches the engine. PUBLISH walks the exact channel's
//! subscribers, then every pattern that matches (redis's order: a client
//! subscribed both ways gets `message` before `pmessage`), and puts one
//! [`Push`] on each subscriber's own queue: the message itself is shared
//! (one allocation whatever the number of subscribers), and each
//! subscriber's connection encodes it in its own protocol when it writes
//! it (see `crate::connection`'s modes). So memory grows with subscribers
//! and with what a slow subscriber has not taken yet, not with messages
//! times subscribers.
//!
//! What a subscriber has not taken is bounded as redis bounds it, by the
//! `pubsub` class of `client-output-buffer-limit`: each push adds its size
//! to the subscriber's pending count, the connection takes it off once
//! written; past the hard limit, or past the soft limit for longer than
//! its seconds, the publisher closes the subscriber (counted in INFO's
//! `client_output_buffer_limit_disconnections`) and the publisher itself
//! never waits.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};

use bytes::{BufMut, Bytes, BytesMut};
use respite_engine::glob::glob_match;
use respite_engine::notify::{self, Event, Notifier};
use tokio::sync::mpsc;

use crate::limits::ClassLimit;
use crate::reply::{bulk, Reply};
use crate::sync::lock;

/// One published message, shared by every subscriber that gets it.
pub struct Message {
    /// The channel it was published to.
    pub channel: Bytes,
    /// The payload.
    pub payload: Bytes,
    /// The `message` (or `smessage`) push as RESP2 writes it, encoded once
    /// for every subscriber of the exact channel (RESP3's push frame
    /// differs only in its first byte); empty when the channel has no
    /// subscriber of its own, only patterns.
    frame: Bytes,
}

impl Message {
    fn new(channel: Bytes, payload: Bytes, exact: Option<Kind>) -> Message {
        let frame = match exact {
            Some(kind) => {
                let mut out = BytesMut::with_capacity(channel.len() + payload.len() + 48);
                out.put_slice(b"*3\r\n");
                bulk(&mut out, kind.message_word());
                bulk(&mut out, &channel);
                bulk(&mut out, &payload);
                out.freeze()
            }
            None => Bytes::new(),
        };
        Message {
            channel,
            payload,
            frame,
        }
    }
}

/// What a subscriber's connection has to send.
pub enum Push {
    /// `message` (or `smessage` for a shard channel): a message on a
    /// channel the client subscribed to.
    Message(Arc<Message>, Kind),
    /// `pmessage`: a message on a channel that matched the pattern.
    PMessage(Bytes, Arc<Message>),
    /// A CLIENT TRACKING invalidation (see `crate::tracking`).
    Tracking(Invalidation),
}

impl Push {
    /// Appends the push as redis writes it: an array in RESP2, a `>` push
    /// frame in RESP3.
    pub fn encode(&self, out: &mut BytesMut, resp3: bool) {
        let mark = if resp3 { b'>' } else { b'*' };
        match self {
            Push::Message(m, _) if !m.frame.is_empty() => {
                let at = out.len();
                out.put_slice(&m.frame);
                out[at] = mark;
            }
            Push::Message(m, kind) => {
                out.put_u8(mark);
                out.put_slice(b"3\r\n");
                bulk(out, kind.message_word());
                bulk(out, &m.channel);
                bulk(out, &m.payload);
            }
            Push::PMessage(pattern, m) => {
                out.put_u8(mark);
                out.put_slice(b"4\r\n");
                bulk(out, b"pmessage");
                bulk(out, pattern);
                bulk(out, &m.channel);
                bulk(out, &m.payload);
            }
            Push::Tracking(payload) => payload.encode(out, resp3),
        }
    }

    /// About what the push takes in the output buffer, for the limits.
    pub fn cost(&self) -> u64 {
        let (pattern, m) = match self {
            Push::Message(m, _) => (0, m),
            Push::PMessage(p, m) => (p.len(), m),
            Push::Tracking(payload) => return payload.cost(),
        };
        (pattern + m.channel.len() + m.payload.len() + 48) as u64
    }
}

/// A CLIENT TRACKING message (see `crate::tracking`): what it carries.
#[derive(Clone)]
pub enum Invalidation {
    /// These keys.
    Keys(Arc<[Bytes]>),
    /// Every key (a flush): RESP3's null or RESP2's, after the protocol
    /// of the tracking client (redis's `shared.null[c->resp]`).
    Null(bool),
    /// `tracking-redir-broken`: the redirect target is gone.
    RedirBroken(u64),
}

impl Invalidation {
    /// Appends the message as redis writes it to a receiver speaking
    /// RESP3 (`resp3`) or RESP2 (then as a `message` on
    /// `__redis__:invalidate`).
    pub fn encode(&self, out: &mut BytesMut, resp3: bool) {
        if let Invalidation::RedirBroken(id) = self {
            out.put_slice(if resp3 { b">2\r\n" } else { b"*2\r\n" });
            out.put_slice(b"$21\r\ntracking-redir-broken\r\n:");
            out.put_slice(id.to_string().as_bytes());
            out.put_slice(b"\r\n");
            return;
        }
        if resp3 {
            out.put_slice(b">2\r\n$10\r\ninvalidate\r\n");
        } else {
            out.put_slice(b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n");
        }
        match self {
            Invalidation::Keys(keys) => {
                out.put_u8(b'*');
                out.put_slice(keys.len().to_string().as_bytes());
                out.put_slice(b"\r\n");
                for k in keys.iter() {
                    out.put_u8(b'$');
                    out.put_slice(k.len().to_string().as_bytes());
                    out.put_slice(b"\r\n");
                    out.put_slice(k);
                    out.put_slice(b"\r\n");
                }
            }
            Invalidation::Null(true) => out.put_slice(b"_\r\n"),
            Invalidation::Null(false) => out.put_slice(b"$-1\r\n"),
            Invalidation::RedirBroken(_) => {}
        }
    }

    /// About what it takes in an output buffer, for the limits.
    pub fn cost(&self) -> u64 {
        match self {
            Invalidation::Keys(keys) => keys.iter().map(|k| k.len() as u64 + 16).sum::<u64>() + 48,
            _ => 48,
        }
    }
}

/// The three kinds of subscription.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// SUBSCRIBE: an exact channel.
    Channel,
    /// PSUBSCRIBE: a glob pattern.
    Pattern,
    /// SSUBSCRIBE: a shard channel (every channel is local here).
    Shard,
}

impl Kind {
    /// The first word of a message's push.
    fn message_word(self) -> &'static [u8] {
        match self {
            Kind::Shard => b"smessage",
            _ => b"message",
        }
    }

    /// The word of the confirmation of a subscription.
    fn subscribed(self) -> &'static str {
        match self {
            Kind::Channel => "subscribe",
            Kind::Pattern => "psubscribe",
            Kind::Shard => "ssubscribe",
        }
    }

    /// The word of the confirmation of an unsubscription.
    fn unsubscribed(self) -> &'static str {
        match self {
            Kind::Channel => "unsubscribe",
            Kind::Pattern => "punsubscribe",
            Kind::Shard => "sunsubscribe",
        }
    }
}

/// A subscriber as the registry holds it: where to put its pushes, and
/// what it has not taken yet.
pub struct Subscriber {
    id: u64,
    tx: mpsc::UnboundedSender<Push>,
    /// Bytes queued or being written (see the module documentation).
    pending: AtomicU64,
    /// Since when (ms on the registry's clock, 0: not) `pending` has been
    /// over the soft limit.
    over_soft_since: AtomicU64,
    client: Weak<dyn Member>,
}

impl Subscriber {
    /// Queues a push, unless that puts the subscriber over its limit: then
    /// it is closed instead. Answers whether the push was queued.
    fn deliver(&self, push: Push, limit: ClassLimit, now_ms: u64, closes: &AtomicU64) -> bool {
        let cost = push.cost();
        let pending = self.pending.fetch_add(cost, Ordering::Relaxed) + cost;
        let over_hard = limit.hard > 0 && pending > limit.hard;
        let over_soft = limit.soft > 0 && pending > limit.soft;
        let mut close = over_hard;
        if over_soft {
            let since = match self.over_soft_since.compare_exchange(
                0,
                now_ms.max(1),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => now_ms.max(1),
                Err(since) => since,
            };
            close |= now_ms.saturating_sub(since) >= limit.soft_seconds * 1000;
        } else {
            self.over_soft_since.store(0, Ordering::Relaxed);
        }
        if close {
            self.pending.fetch_sub(cost, Ordering::Relaxed);
            if let Some(client) = self.client.upgrade() {
                if client.mark_closing() {
                    tracing::warn!(
                        client = client.member_id(),
                        addr = %client.peer_addr(),
                        "client scheduled to be closed ASAP for overcoming of output buffer limits \
                         (pubsub {} {} {})",
                        limit.hard,
                        limit.soft,
                        limit.soft_seconds,
                    );
                    closes.fetch_add(1, Ordering::Relaxed);
                    client.wake();
                }
            }
            return false;
        }
        self.tx.send(push).is_ok()
    }
}

/// What the registry needs of a subscribed client: its id, its
/// subscriptions, and a way to close it when it falls too far behind. The
/// client registry's entry implements it (`crate::clients`), so this
/// module names no client type and the registry's entries may name it.
pub trait Member: Send + Sync {
    /// The client id.
    fn member_id(&self) -> u64;
    /// Its subscriptions.
    fn subscriptions(&self) -> &Subscriptions;
    /// Marks it to be closed, as CLIENT KILL does: false if it was
    /// marked already.
    fn mark_closing(&self) -> bool;
    /// Wakes its connection, which then closes.
    fn wake(&self);
    /// Its address, for the log.
    fn peer_addr(&self) -> String;
}

/// One client's subscriptions (in its registry entry).
#[derive(Default)]
pub struct Subscriptions {
    own: Mutex<Own>,
    /// Channels and patterns (the count SUBSCRIBE and PSUBSCRIBE reply).
    count: AtomicUsize,
    /// Shard channels.
    shard_count: AtomicUsize,
    /// This client as the registry holds it, once it subscribed (or
    /// tracking gave it a queue).
    me: Mutex<Option<Arc<Subscriber>>>,
    /// Whether the queue exists (so the connection takes it).
    queued: std::sync::atomic::AtomicBool,
    /// Wakes an idle connection when its queue is made by another
    /// client's command (a tracking redirect to it).
    pub made: tokio::sync::Notify,
}

#[derive(Default)]
struct Own {
    channels: HashSet<Bytes>,
    /// In subscription order, as redis keeps them.
    patterns: Vec<Bytes>,
    shard: HashSet<Bytes>,
    /// The receiving end of this client's queue, until its connection
    /// takes it.
    rx: Option<mpsc::UnboundedReceiver<Push>>,
}

impl Subscriptions {
    /// Whether the client is subscribed to anything (redis's
    /// `CLIENT_PUBSUB` flag: RESP2 subscribed mode, CLIENT LIST `P`).
    pub fn active(&self) -> bool {
        self.count.load(Ordering::Relaxed) + self.shard_count.load(Ordering::Relaxed) > 0
    }

    /// CLIENT LIST's `sub=`, `psub=`, `ssub=`.
    pub fn counts(&self) -> (usize, usize, usize) {
        let own = lock(&self.own);
        (own.channels.len(), own.patterns.len(), own.shard.len())
    }

    /// The queue of pushes, for the connection to stream from (taken once).
    pub fn take_queue(&self) -> Option<mpsc::UnboundedReceiver<Push>> {
        lock(&self.own).rx.take()
    }

    /// Whether the queue was made (by a subscription or tracking).
    pub fn queued(&self) -> bool {
        self.queued.load(Ordering::Acquire)
    }

    /// The connection wrote pushes worth `cost`.
    pub fn written(&self, cost: u64) {
        if cost == 0 {
            return;
        }
        if let Some(me) = lock(&self.me).as_ref() {
            me.pending.fetch_sub(cost, Ordering::Relaxed);
        }
    }

    fn publish_counts(&self, own: &Own) {
        self.count
            .store(own.channels.len() + own.patterns.len(), Ordering::Relaxed);
        self.shard_count.store(own.shard.len(), Ordering::Relaxed);
    }

    /// The reply count of a kind: channels and patterns, or shard channels.
    fn count_of(own: &Own, kind: Kind) -> i64 {
        match kind {
            Kind::Shard => own.shard.len() as i64,
            _ => (own.channels.len() + own.patterns.len()) as i64,
        }
    }
}

/// The server's channels, patterns and shard channels.
#[derive(Default)]
pub struct Registry {
    tables: RwLock<Tables>,
    /// Told whether anyone could receive a keyspace event (see
    /// `crate::state::install_notifications`).
    notifier: std::sync::OnceLock<Arc<Notifier>>,
    /// The registry's clock for soft limits.
    started: std::sync::OnceLock<std::time::Instant>,
}

type Subscribers = HashMap<u64, Arc<Subscriber>>;

#[derive(Default)]
struct Tables {
    channels: HashMap<Bytes, Subscribers>,
    patterns: HashMap<Bytes, Subscribers>,
    shard: HashMap<Bytes, Subscribers>,
}

impl Tables {
    fn of(&mut self, kind: Kind) -> &mut HashMap<Bytes, Subscribers> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }
}

/// A confirmation push: `[word, name or nil, count]`.
fn confirmation(word: &'static str, name: Option<Bytes>, count: i64) -> Reply {
    Reply::Push(vec![
        Reply::bulk(word),
        name.map_or(Reply::Nil, Reply::Bulk),
        Reply::Int(count),
    ])
}

impl Registry {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Tables> {
        self.tables.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Tables> {
        self.tables.write().unwrap_or_else(|e| e.into_inner())
    }

    fn now_ms(&self) -> u64 {
        self.started
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_millis() as u64
    }

    /// The client's queue of pushes, made on first use.
    pub fn ensure_queue<C: Member + 'static>(&self, client: &Arc<C>) -> Arc<Subscriber> {
        let subs = client.subscriptions();
        let mut me = lock(&subs.me);
        if let Some(me) = me.as_ref() {
            return me.clone();
        }
        let weak = Arc::downgrade(client);
        let weak: Weak<dyn Member> = weak;
        let (tx, rx) = mpsc::unbounded_channel();
        lock(&subs.own).rx = Some(rx);
        let made = Arc::new(Subscriber {
            id: client.member_id(),
            tx,
            pending: AtomicU64::new(0),
            over_soft_since: AtomicU64::new(0),
            client: weak,
        });
        *me = Some(made.clone());
        subs.queued.store(true, Ordering::Release);
        subs.made.notify_one();
        made
    }

    /// Queues a push for one client (a CLIENT TRACKING message), under
    /// `limit` (its class's: `pubsub` while it is subscribed, else
    /// `normal`); a close is counted in `closes`.
    pub fn push_to<C: Member + 'static>(
        &self,
        client: &Arc<C>,
        push: Push,
        limit: ClassLimit,
        closes: &AtomicU64,
    ) {
        let me = self.ensure_queue(client);
        me.deliver(push, limit, self.now_ms(), closes);
    }

    /// Subscribes `client` to each name, answering redis's confirmations.
    pub fn subscribe<C: Member + 'static>(
        &self,
        client: &Arc<C>,
        kind: Kind,
        names: Vec<Bytes>,
    ) -> Reply {
        let subs = client.subscriptions();
        let me = self.ensure_queue(client);
        let mut own = lock(&subs.own);
        let mut tables = self.write();
        let mut replies = Vec::with_capacity(names.len());
        for name in names {
            let added = match kind {
                Kind::Channel => own.channels.insert(name.clone()),
                Kind::Shard => own.shard.insert(name.clone()),
                Kind::Pattern => {
                    let new = !own.patterns.contains(&name);
                    if new {
                        own.patterns.push(name.clone());
                    }
                    new
                }
            };
            if added {
                tables
                    .of(kind)
                    .entry(name.clone())
                    .or_default()
                    .insert(me.id, me.clone());
            }
            replies.push(confirmation(
                kind.subscribed(),
                Some(name),
                Subscriptions::count_of(&own, kind),
            ));
        }
        subs.publish_counts(&own);
        self.listening_changed(&tables);
        Reply::Several(replies)
    }

    /// Unsubscribes `client` from each name, or from every name of the
    /// kind when `names` is empty; answers redis's confirmations (one with
    /// a nil name when there was nothing to unsubscribe from), or nothing
    /// when `notify` is false (RESET, a connection closing).
    pub fn unsubscribe(
        &self,
        client: &dyn Member,
        kind: Kind,
        names: Vec<Bytes>,
        notify: bool,
    ) -> Reply {
        let subs = client.subscriptions();
        let mut own = lock(&subs.own);
        let names = if names.is_empty() {
            match kind {
                Kind::Channel => own.channels.iter().cloned().collect(),
                Kind::Shard => own.shard.iter().cloned().collect(),
                Kind::Pattern => own.patterns.clone(),
            }
        } else {
            names
        };
        let mut tables = self.write();
        let mut replies = Vec::with_capacity(names.len().max(1));
        let everything = names.is_empty();
        for name in names {
            let removed = match kind {
                Kind::Channel => own.channels.remove(&name),
                Kind::Shard => own.shard.remove(&name),
                Kind::Pattern => match own.patterns.iter().position(|p| *p == name) {
                    Some(i) => {
                        own.patterns.remove(i);
                        true
                    }
                    None => false,
                },
            };
            if removed {
                let table = tables.of(kind);
                if let Some(set) = table.get_mut(&name) {
                    set.remove(&client.member_id());
                    if set.is_empty() {
                        table.remove(&name);
                    }
                }
            }
            if notify {
                replies.push(confirmation(
                    kind.unsubscribed(),
                    Some(name),
                    Subscriptions::count_of(&own, kind),
                ));
            }
        }
        if notify && everything {
            replies.push(confirmation(
                kind.unsubscribed(),
                None,
                Subscriptions::count_of(&own, kind),
            ));
        }
        subs.publish_counts(&own);
        self.listening_changed(&tables);
        Reply::Several(replies)
    }

    /// Tells the engine whether a keyspace event could reach anyone: a
    /// pattern or a channel is subscribed (shard channels never get one).
    fn listening_changed(&self, tables: &Tables) {
        if let Some(n) = self.notifier.get() {
            n.set_listening(!tables.channels.is_empty() || !tables.patterns.is_empty());
        }
    }

    /// Publishes a committed group's keyspace events, each as redis's
    /// `notifyKeyspaceEvent` does: on `__keyspace@<db>__:<key>` with the
    /// event as the message (`K`), then on `__keyevent@<db>__:<event>` with
    /// the key (`E`).
    pub fn publish_events(
        &self,
        events: Vec<Event>,
        flags: u32,
        limit: ClassLimit,
        closes: &AtomicU64,
    ) {
        for e in events {
            let db = e.db.to_string();
            if flags & notify::KEYSPACE != 0 {
                let mut channel = BytesMut::with_capacity(16 + db.len() + e.key.len());
                channel.put_slice(b"__keyspace@");
                channel.put_slice(db.as_bytes());
                channel.put_slice(b"__:");
                channel.put_slice(&e.key);
                let event = Bytes::from_static(e.event.as_bytes());
                self.publish(channel.freeze(), event, false, limit, closes);
            }
            if flags & notify::KEYEVENT != 0 {
                let mut channel = BytesMut::with_capacity(16 + db.len() + e.event.len());
                channel.put_slice(b"__keyevent@");
                channel.put_slice(db.as_bytes());
                channel.put_slice(b"__:");
                channel.put_slice(e.event.as_bytes());
                self.publish(channel.freeze(), e.key, false, limit, closes);
            }
        }
    }

    /// Drops every subscription of `client`, without a word (RESET, or its
    /// connection ended).
    pub fn forget(&self, client: &dyn Member) {
        if !client.subscriptions().active() {
            return;
        }
        for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
            self.unsubscribe(client, kind, Vec::new(), false);
        }
    }

    /// Publishes a message: to the channel's subscribers, then (unless it
    /// is a shard channel) to those of every matching pattern. Answers how
    /// many received it, as PUBLISH replies.
    pub fn publish(
        &self,
        channel: Bytes,
        payload: Bytes,
        shard: bool,
        limit: ClassLimit,
        closes: &AtomicU64,
    ) -> i64 {
        let tables = self.read();
        let exact = if shard {
            &tables.shard
        } else {
            &tables.channels
        };
        let patterns = !shard && !tables.patterns.is_empty();
        let found = exact.get(&channel);
        if found.is_none() && !patterns {
            return 0;
        }
        let now = self.now_ms();
        let kind = if shard { Kind::Shard } else { Kind::Channel };
        let message = Arc::new(Message::new(
            channel,
            payload,
            found.is_some().then_some(kind),
        ));
        let mut receivers = 0;
        for sub in found.into_iter().flat_map(|s| s.values()) {
            sub.deliver(Push::Message(message.clone(), kind), limit, now, closes);
            receivers += 1;
        }
        if patterns {
            for (pattern, subs) in &tables.patterns {
                if !glob_match(pattern, &message.channel) {
                    continue;
                }
                for sub in subs.values() {
                    sub.deliver(
                        Push::PMessage(pattern.clone(), message.clone()),
                        limit,
                        now,
                        closes,
                    );
                    receivers += 1;
                }
            }
        }
        receivers
    }

    /// How many subscribers a message on `channel` would reach now (a
    /// PUBLISH from a script answers this; its message goes out once the
    /// script's group has committed).
    pub fn receivers(&self, channel: &[u8], shard: bool) -> i64 {
        let tables = self.read();
        let exact = if shard {
            &tables.shard
        } else {
            &tables.channels
        };
        let mut n = exact.get(channel).map_or(0, |s| s.len());
        if !shard {
            for (pattern, subs) in &tables.patterns {
                if glob_match(pattern, channel) {
                    n += subs.len();
                }
            }
        }
        n as i64
    }

    /// PUBSUB CHANNELS / SHARDCHANNELS: the channels with a subscriber,
    /// matching `pattern` if given.
    pub fn channels(&self, shard: bool, pattern: Option<&[u8]>) -> Vec<Bytes> {
        let tables = self.read();
        let table = if shard {
            &tables.shard
        } else {
            &tables.channels
        };
        table
            .keys()
            .filter(|c| pattern.is_none_or(|p| glob_match(p, c)))
            .cloned()
            .collect()
    }

    /// PUBSUB NUMSUB / SHARDNUMSUB: subscribers of a channel.
    pub fn numsub(&self, shard: bool, channel: &[u8]) -> usize {
        let tables = self.read();
        let table = if shard {
            &tables.shard
        } else {
            &tables.channels
        };
        table.get(channel).map_or(0, |s| s.len())
    }

    /// INFO's `pubsub_channels`, `pubsub_patterns`, `pubsubshard_channels`
    /// (PUBSUB NUMPAT is the second).
    pub fn sizes(&self) -> (usize, usize, usize) {
        let tables = self.read();
        (
            tables.channels.len(),
            tables.patterns.len(),
            tables.shard.len(),
        )
    }
}

impl Registry {
    /// Keeps `notifier`, the engine's, told whether anyone is subscribed,
    /// so that nobody listening costs a write nothing (see
    /// `respite_engine::notify`); `crate::state::install_notifications`
    /// connects the other way.
    pub fn attach(&self, notifier: Arc<Notifier>) {
        let _ = self.notifier.set(notifier);
        self.listening_changed(&self.read());
    }
}

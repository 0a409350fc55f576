// node-redis (the `redis` package) pub/sub against the server at
// REDIS_URL, over RESP2 or RESP3 (argument: 2 or 3):
// SUBSCRIBE and PSUBSCRIBE with listeners, 200 channel and 50 pattern
// messages once each and in order, PUBLISH's receiver counts, two
// listeners on one channel sharing one subscription, a listener removed
// alone, binary messages in buffer mode, sharded pub/sub (SSUBSCRIBE,
// SPUBLISH), UNSUBSCRIBE; with RESP3, ordinary commands on the subscribed
// connection between the pushes.
import { createClient } from 'redis';
import { equal, run, sleep, waitUntil } from './check.mjs';

const RESP = Number(process.argv[2] ?? 2);
const closers = [];

async function main() {
  const client = createClient({ url: process.env.REDIS_URL, RESP });
  client.on('error', (e) => console.error(`client error: ${e.message}`));
  await client.connect();
  closers.push(() => client.close());
  await client.flushDb();
  const sub = client.duplicate();
  sub.on('error', (e) => console.error(`subscriber error: ${e.message}`));
  await sub.connect();
  closers.push(() => sub.close());
  const numsub = async (ch) => (await client.sendCommand(['PUBSUB', 'NUMSUB', ch]))[1];

  const got = [];
  await sub.subscribe('jobs', (message, channel) => got.push(['message', channel, message]));
  await sub.pSubscribe('events.*', (message, channel) => got.push(['pmessage', channel, message]));
  equal(await numsub('jobs'), 1, 'PUBSUB NUMSUB jobs');
  equal(await client.pubSubNumPat(), 1, 'PUBSUB NUMPAT');

  const receivers = [];
  for (let i = 0; i < 200; i++) receivers.push(await client.publish('jobs', `job-${i}`));
  for (let i = 0; i < 50; i++) receivers.push(await client.publish(`events.${i % 5}`, `ev-${i}`));
  receivers.push(await client.publish('nobody', 'lost'));
  equal(receivers, [...Array(250).fill(1), 0], 'PUBLISH reports one receiver each (0 for an unheard channel)');
  await waitUntil(() => got.length >= 250, 10000, '250 messages');
  await sleep(100);
  equal(got.slice(0, 200), Array.from({ length: 200 }, (_, i) => ['message', 'jobs', `job-${i}`]), '200 channel messages once each, in order');
  equal(got.slice(200), Array.from({ length: 50 }, (_, i) => ['pmessage', `events.${i % 5}`, `ev-${i}`]), '50 pattern messages once each, in order');

  // Two listeners on one channel: one subscription on the server, each
  // listener called once per message; removing one leaves the other.
  const a = [];
  const b = [];
  const la = (m) => a.push(m);
  const lb = (m) => b.push(m);
  await sub.subscribe('shared', la);
  await sub.subscribe('shared', lb);
  equal(await numsub('shared'), 1, 'two listeners, one subscription');
  equal(await client.publish('shared', 's1'), 1, 'PUBLISH to the shared channel');
  await waitUntil(() => a.length === 1 && b.length === 1, 5000, 'both listeners called');
  await sub.unsubscribe('shared', la);
  equal(await numsub('shared'), 1, 'still subscribed after one listener left');
  await client.publish('shared', 's2');
  await waitUntil(() => b.length === 2, 5000, 'the remaining listener called');
  equal([a, b], [['s1'], ['s1', 's2']], 'each listener saw what it should');

  // Binary payloads in buffer mode.
  const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
  const bin = [];
  await sub.subscribe('bin', (m) => bin.push(m), true);
  await client.publish('bin', bytes);
  await waitUntil(() => bin.length === 1, 5000, 'the binary message');
  equal(Buffer.isBuffer(bin[0]) && bin[0].equals(bytes), true, 'all 256 byte values round trip');

  // Sharded pub/sub (one shard: every channel is local).
  const sharded = [];
  await sub.sSubscribe('orders{1}', (m, ch) => sharded.push([ch, m]));
  equal(await client.sendCommand(['PUBSUB', 'SHARDNUMSUB', 'orders{1}']), ['orders{1}', 1], 'PUBSUB SHARDNUMSUB');
  equal(await client.sPublish('orders{1}', 'o1'), 1, 'SPUBLISH reaches the shard subscriber');
  equal(await client.publish('orders{1}', 'plain'), 0, 'PUBLISH does not reach a shard subscriber');
  await waitUntil(() => sharded.length === 1, 5000, 'the sharded message');
  equal(sharded, [['orders{1}', 'o1']], 'sharded message');
  await sub.sUnsubscribe('orders{1}');

  if (RESP === 3) {
    // The subscribed connection keeps answering commands, pushes between.
    const mixed = [];
    await sub.subscribe('mixed', (m) => mixed.push(m));
    const replies = [];
    for (let i = 0; i < 20; i++) {
      const p = client.publish('mixed', `m${i}`);
      replies.push(await sub.set(`k${i}`, `v${i}`), await sub.get(`k${i}`));
      await p;
    }
    equal(replies, Array.from({ length: 20 }, (_, i) => ['OK', `v${i}`]).flat(), 'SET and GET on the subscribed connection');
    await waitUntil(() => mixed.length === 20, 5000, '20 pushes');
    equal(mixed, Array.from({ length: 20 }, (_, i) => `m${i}`), 'the pushes, in order');
    await sub.unsubscribe('mixed');
  }

  await sub.unsubscribe();
  await sub.pUnsubscribe();
  await waitUntil(async () => (await numsub('jobs')) === 0, 5000, 'NUMSUB back to 0 after UNSUBSCRIBE');
  equal(await client.pubSubNumPat(), 0, 'NUMPAT back to 0 after PUNSUBSCRIBE');
  equal(await client.publish('jobs', 'late'), 0, 'PUBLISH after UNSUBSCRIBE reaches nobody');
  // Out of subscribed mode, the connection serves commands again.
  // (node-redis 6.3.1 hands a RESP2 connection's replies back as Buffers
  // once it has been subscribed in buffer mode, on either server.)
  equal(String(await sub.set('after', 'v')), 'OK', 'the former subscriber serves commands again');
  equal(String(await sub.get('after')), 'v', 'and reads its write');
  console.log(`node-redis pub/sub (RESP${RESP}): all checks passed`);
}

await run(main, closers);

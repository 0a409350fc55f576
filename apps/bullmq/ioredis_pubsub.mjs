// ioredis pub/sub against the server at REDIS_URL: SUBSCRIBE and
// PSUBSCRIBE with their counts, `message`, `pmessage` and `messageBuffer`
// events, 200 channel and 50 pattern messages once each and in order,
// PUBLISH's receiver counts; the subscriber's connection killed by the
// server (CLIENT KILL ID), after which ioredis reconnects and subscribes
// again by itself and messages flow again; UNSUBSCRIBE and PUNSUBSCRIBE
// back to a normal connection; CLIENT LIST and CLIENT KILL with TYPE
// pubsub find a subscriber (and TYPE normal does not).
//
// UNSUBSCRIBE and PUNSUBSCRIBE name their channels: ioredis 6.0.0's
// argument-less unsubscribe() never resolves after an automatic
// resubscription (on redis-server too), a client bug this scenario steps
// around.
import Redis from 'ioredis';
import { equal, run, sleep, waitUntil } from './check.mjs';

const closers = [];

async function main() {
  const pub = new Redis(process.env.REDIS_URL);
  closers.push(() => pub.quit());
  const sub = new Redis(process.env.REDIS_URL);
  closers.push(() => sub.quit());
  sub.on('error', (e) => console.error(`subscriber error: ${e.message}`));
  await pub.flushdb();
  const numsub = async (ch) => (await pub.pubsub('NUMSUB', ch))[1];
  const subId = await sub.client('ID');

  equal(await sub.subscribe('jobs', 'other'), 2, 'SUBSCRIBE of two channels counts 2');
  equal(await sub.psubscribe('events.*'), 3, 'PSUBSCRIBE counts channels and patterns: 3');
  const got = [];
  const buffers = [];
  sub.on('message', (channel, message) => got.push(['message', channel, message]));
  sub.on('pmessage', (pattern, channel, message) => got.push(['pmessage', pattern, channel, message]));
  sub.on('messageBuffer', (channel, message) => buffers.push(message));
  equal(await numsub('jobs'), 1, 'PUBSUB NUMSUB jobs');
  equal(await pub.pubsub('NUMPAT'), 1, 'PUBSUB NUMPAT');

  const receivers = [];
  for (let i = 0; i < 200; i++) receivers.push(await pub.publish('jobs', `job-${i}`));
  for (let i = 0; i < 50; i++) receivers.push(await pub.publish(`events.${i % 5}`, `ev-${i}`));
  receivers.push(await pub.publish('nobody', 'lost'));
  equal(receivers, [...Array(250).fill(1), 0], 'PUBLISH reports one receiver each (0 for an unheard channel)');
  await waitUntil(() => got.length >= 250, 10000, '250 messages');
  await sleep(100);
  equal(got.slice(0, 200), Array.from({ length: 200 }, (_, i) => ['message', 'jobs', `job-${i}`]), '200 channel messages once each, in order');
  equal(got.slice(200), Array.from({ length: 50 }, (_, i) => ['pmessage', 'events.*', `events.${i % 5}`, `ev-${i}`]), '50 pattern messages once each, in order');
  equal(buffers.length, 200, 'messageBuffer saw the channel messages as Buffers');

  // The server drops the subscriber; ioredis reconnects and subscribes
  // again to what it had (autoResubscribe).
  const reconnected = new Promise((resolve) => sub.once('ready', resolve));
  equal(await pub.client('KILL', 'ID', String(subId)), 1, 'CLIENT KILL ID killed the subscriber');
  await Promise.race([reconnected, sleep(10000)]);
  await waitUntil(async () => (await numsub('jobs')) === 1 && (await pub.pubsub('NUMPAT')) === 1, 10000, 'subscribed again after the reconnect');
  got.length = 0;
  equal(await pub.publish('jobs', 'after'), 1, 'PUBLISH after the reconnect reaches it');
  equal(await pub.publish('events.x', 'after-p'), 1, 'and a pattern message too');
  await waitUntil(() => got.length === 2, 5000, 'two messages after the reconnect');
  equal(got, [['message', 'jobs', 'after'], ['pmessage', 'events.*', 'events.x', 'after-p']], 'messages after the reconnect');

  equal(await sub.unsubscribe('jobs', 'other'), 1, 'UNSUBSCRIBE of both channels leaves the pattern: 1');
  equal(await sub.punsubscribe('events.*'), 0, 'PUNSUBSCRIBE leaves nothing: 0');
  equal(await numsub('jobs'), 0, 'NUMSUB back to 0');
  equal(await sub.set('k', 'v'), 'OK', 'the former subscriber serves commands again');
  equal(await sub.get('k'), 'v', 'and reads its write');

  // The client types of CLIENT LIST and CLIENT KILL: a subscriber is
  // `pubsub`, not `normal`.
  const other = new Redis(process.env.REDIS_URL);
  closers.push(() => other.quit());
  other.on('error', () => {});
  equal(await other.subscribe('typed'), 1, 'another subscriber');
  const otherId = await pub.client('LIST').then((l) => l.split('\n').find((line) => / sub=1 /.test(line)).match(/^id=(\d+)/)[1]);
  const ids = async (type) => (await pub.client('LIST', 'TYPE', type)).split('\n').filter(Boolean).map((line) => line.match(/^id=(\d+)/)[1]);
  equal(await ids('pubsub'), [otherId], 'CLIENT LIST TYPE pubsub lists the subscriber');
  equal((await ids('normal')).includes(otherId), false, 'CLIENT LIST TYPE normal does not');
  other.disconnect(false);
  const third = new Redis(process.env.REDIS_URL, { retryStrategy: () => null });
  third.on('error', () => {});
  await third.psubscribe('typed.*');
  equal(await pub.client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes'), 1, 'CLIENT KILL TYPE normal spares the subscriber (kills only `sub`)');
  equal(await pub.client('KILL', 'TYPE', 'pubsub'), 1, 'CLIENT KILL TYPE pubsub kills the subscriber');
  console.log('ioredis pub/sub: all checks passed');
}

await run(main, closers);

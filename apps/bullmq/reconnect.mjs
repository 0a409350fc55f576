// The Node side of the restart under a connected client (py/reconnect.py
// node-redis|ioredis): one client of the library named in argv[2] (RESP
// version in argv[3], node-redis only) shared by 8 loops that each INCR
// a counter of their own, counting the INCRs acknowledged and the ones
// that failed; a subscriber on "news" and a publisher writing to it.
// Prints "ready" once every loop has had 50 acknowledgements and the
// subscriber 20 messages; the harness then SIGKILLs and restarts the
// server and writes "restarted" to stdin. Then: every loop's INCR
// succeeds again within 5 s; the subscriber, resubscribed by the library
// on its own, receives 20 more messages; every counter holds at least its
// acknowledged INCRs and at most those plus the failed ones plus one (an
// INCR in flight at the kill may have applied, and ioredis resends it
// after the reconnect: it may apply twice).
import { createInterface } from 'node:readline';
import { equal, run, sleep, waitUntil } from './check.mjs';

const [lib, resp] = [process.argv[2], Number(process.argv[3] ?? 2)];
const url = process.env.REDIS_URL;
const LOOPS = 8;
const closers = [];

async function connect() {
  if (lib === 'ioredis') {
    const { default: Redis } = await import('ioredis');
    const make = () => {
      const c = new Redis(url, { maxRetriesPerRequest: 1 });
      c.on('error', () => {});
      closers.push(() => c.disconnect());
      return c;
    };
    const client = make();
    const sub = make();
    const received = [];
    sub.on('message', (_ch, m) => received.push(m));
    await sub.subscribe('news');
    return { incr: (k) => client.incr(k), get: (k) => client.get(k), publish: (ch, m) => client.publish(ch, m), received };
  }
  const { createClient } = await import('redis');
  const client = createClient({ url, RESP: resp });
  client.on('error', () => {});
  await client.connect();
  closers.push(() => client.destroy());
  const sub = client.duplicate();
  sub.on('error', () => {});
  await sub.connect();
  closers.push(() => sub.destroy());
  const received = [];
  await sub.subscribe('news', (m) => received.push(m));
  return { incr: (k) => client.incr(k), get: (k) => client.get(k), publish: (ch, m) => client.publish(ch, m), received };
}

async function main() {
  const c = await connect();
  const acked = Array(LOOPS).fill(0);
  const failed = Array(LOOPS).fill(0);
  const lastOk = Array(LOOPS).fill(0);
  let stop = false;
  const loops = Array.from({ length: LOOPS }, async (_, t) => {
    while (!stop) {
      try {
        await c.incr(`counter:${t}`);
        acked[t] += 1;
        lastOk[t] = Date.now();
      } catch {
        failed[t] += 1;
        await sleep(50);
      }
    }
  });
  const publisher = (async () => {
    for (let i = 0; !stop; i++) {
      try { await c.publish('news', `n${i}`); } catch { /* the server is down */ }
      await sleep(10);
    }
  })();
  await waitUntil(() => Math.min(...acked) >= 50 && c.received.length >= 20, 30000, 'the client at work before the kill');
  console.log('ready');
  const lines = createInterface({ input: process.stdin });
  await new Promise((resolve) => lines.on('line', (l) => l === 'restarted' && resolve()));
  const restarted = Date.now();
  await waitUntil(() => lastOk.every((t) => t > restarted), 5000, "every loop's INCR succeeds again after the restart");
  console.log('ok: every loop went on with the same client');
  const after = c.received.length;
  await waitUntil(() => c.received.length >= after + 20, 10000, 'the subscriber resubscribed and receives again');
  console.log('ok: the subscriber resubscribed by itself');
  stop = true;
  await Promise.all([...loops, publisher]);
  for (let t = 0; t < LOOPS; t++) {
    const v = Number(await c.get(`counter:${t}`));
    equal(acked[t] <= v && v <= acked[t] + failed[t] + 1, true,
      `counter ${t}: ${v}, acknowledged ${acked[t]}, failed ${failed[t]}`);
  }
  console.log(`acknowledged INCRs ${acked.reduce((a, b) => a + b)}, failed ${failed.reduce((a, b) => a + b)}`);
  console.log(`reconnect (${lib}, RESP${lib === 'ioredis' ? 2 : resp}): all checks passed`);
}

await run(main, closers);

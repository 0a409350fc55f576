// node-redis's client-side cache (RESP3, CLIENT TRACKING, invalidation
// pushes) against the server at REDIS_URL: a repeated GET is a cache hit
// (the cache's own statistics, and the server's GET count does not move);
// a write by another client (SET, INCR, DEL, HSET) makes the next read
// return the new value within a second; 100 cached keys rewritten by
// another client all read back new; FLUSHDB empties the cache.
import { BasicClientSideCache, createClient } from 'redis';
import { equal, run, waitUntil } from './check.mjs';

const closers = [];

async function main() {
  const cache = new BasicClientSideCache({ ttl: 0, maxEntries: 0 });
  // No reconnecting: a server that refuses CLIENT TRACKING fails the
  // connect at once instead of retrying it until the scenario times out.
  const cached = createClient({ url: process.env.REDIS_URL, RESP: 3, clientSideCache: cache, socket: { reconnectStrategy: false } });
  cached.on('error', (e) => console.error(`cached client error: ${e.message}`));
  await cached.connect();
  closers.push(() => cached.close());
  const other = createClient({ url: process.env.REDIS_URL });
  other.on('error', (e) => console.error(`client error: ${e.message}`));
  await other.connect();
  closers.push(() => other.close());
  await other.flushDb();
  const gets = async () => {
    const m = (await other.info('commandstats')).match(/cmdstat_get:calls=(\d+)/);
    return m ? Number(m[1]) : 0;
  };
  const readsBack = (read, want, what) => waitUntil(async () => (await read()) === want, 1000, what).then(() => console.log(`ok: ${what}`));

  await other.set('k', 'v1');
  equal(await cached.get('k'), 'v1', 'first read');
  const hitsBefore = cache.stats().hitCount;
  const before = await gets();
  const reads = [];
  for (let i = 0; i < 10; i++) reads.push(await cached.get('k'));
  equal(reads, Array(10).fill('v1'), 'ten more reads');
  equal(cache.stats().hitCount - hitsBefore, 10, 'ten cache hits');
  equal((await gets()) - before, 0, 'the server saw none of them');

  await other.set('k', 'v2');
  await readsBack(() => cached.get('k'), 'v2', 'SET by another client invalidates');
  await other.set('n', '1');
  await cached.get('n');
  await other.incr('n');
  await readsBack(() => cached.get('n'), '2', 'INCR invalidates');
  await other.del('n');
  await readsBack(() => cached.get('n'), null, 'DEL invalidates');
  await other.hSet('h', 'f', '1');
  equal(await cached.hGet('h', 'f'), '1', 'HGET cached');
  await other.hSet('h', 'f', '2');
  await readsBack(() => cached.hGet('h', 'f'), '2', 'HSET invalidates HGET');

  const keys = Array.from({ length: 100 }, (_, i) => `key:${i}`);
  for (const k of keys) await other.set(k, 'old');
  equal(await Promise.all(keys.map((k) => cached.get(k))), Array(100).fill('old'), '100 keys cached');
  for (const k of keys) await other.set(k, 'new');
  await waitUntil(async () => (await Promise.all(keys.map((k) => cached.get(k)))).every((v) => v === 'new'), 2000, 'all 100 read back new');
  console.log('ok: 100 keys rewritten by another client all read back new');

  await other.flushDb();
  await readsBack(() => cached.get('k'), null, 'FLUSHDB invalidates everything');
  equal(cache.size() <= 1, true, 'the cache emptied by FLUSHDB (the one key read since)');
  console.log('node-redis client cache: all checks passed');
}

await run(main, closers);

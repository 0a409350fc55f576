// The BullMQ side of the durability run (py/durability.py bullmq), in two
// roles:
//
//   node durability.mjs push N   the enqueuer: N jobs on the queue "dur",
//                                the first 40% at once (the worker starts
//                                after them, so a backlog waits in the
//                                queue), the rest about one every 5 ms; each
//                                outcome in pushes.log as it happens:
//                                "acked I ID" once Queue.add resolved,
//                                "failed I ERROR" when it rejected. A
//                                failed add is not retried.
//   node durability.mjs work     a worker (concurrency 4) that records each
//                                run in runs.log ("slow I"), outside the
//                                server, with O_APPEND.
//
// Each job has its own id (`j<I>`), so that ioredis's resending of a
// command that was in flight when the connection broke cannot create a
// second job: adding an id that exists is a no-op in BullMQ. The worker
// holds a job's lock for 5 s (renewed while it runs) and checks for stalled
// jobs every 2 s: a job whose lock lapsed while it was active (its worker
// gone, or its completion lost) goes back to the wait list, once; a second
// time it is failed (maxStalledCount 1).
import { appendFileSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { Queue, Worker } from 'bullmq';

const url = new URL(process.env.REDIS_URL);
const scratch = process.env.APPS_SCRATCH;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const [role, count] = process.argv.slice(2);

if (role === 'push') {
  const n = Number(count);
  const queue = new Queue('dur', { connection: { host: url.hostname, port: Number(url.port), maxRetriesPerRequest: 1 } });
  queue.on('error', () => {});
  const log = openSync(join(scratch, 'pushes.log'), 'a');
  for (let i = 0; i < n; i++) {
    try {
      const job = await queue.add('slow', { i }, { jobId: `j${i}` });
      appendFileSync(log, `acked ${i} ${job.id}\n`);
    } catch (e) {
      appendFileSync(log, `failed ${i} ${(e.constructor?.name ?? 'Error')}\n`);
      await sleep(50);
    }
    if (i >= n * 0.4) await sleep(5);
  }
  appendFileSync(log, 'done\n');
  await Promise.race([queue.close(), sleep(3000)]);
  process.exit(0);
} else if (role === 'work') {
  const runs = openSync(join(scratch, 'runs.log'), 'a');
  const worker = new Worker('dur', async (job) => {
    await sleep(5);
    appendFileSync(runs, `slow ${job.data.i}\n`);
    return job.data.i;
  }, {
    connection: { host: url.hostname, port: Number(url.port), maxRetriesPerRequest: null },
    concurrency: 4,
    lockDuration: 5000,
    stalledInterval: 2000,
  });
  // Connection errors while the server is down are expected; the worker
  // reconnects by itself. They are logged so the run can be read back.
  worker.on('error', (e) => console.log(`worker error: ${e.message}`));
  const stop = async () => {
    await Promise.race([worker.close(), sleep(5000)]);
    process.exit(0);
  };
  process.on('SIGTERM', stop);
} else {
  console.error('usage: durability.mjs push N | work');
  process.exit(2);
}

// BullMQ against the server at REDIS_URL: 200 jobs through a worker with
// their return values, job progress and completions seen by QueueEvents,
// a delayed job run on time, retries with a fixed backoff, a repeatable
// job (a job scheduler, every 500 ms, 3 times), and a worker SIGKILLed
// mid-job whose job another worker gets back as stalled.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { isDeepStrictEqual } from 'node:util';
import { Job, Queue, QueueEvents, Worker } from 'bullmq';

const url = new URL(process.env.REDIS_URL);
const connection = { host: url.hostname, port: Number(url.port), maxRetriesPerRequest: null };
const closers = [];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function equal(got, want, what) {
  if (!isDeepStrictEqual(got, want)) {
    throw new Error(`check failed: ${what}: got ${JSON.stringify(got).slice(0, 300)}, want ${JSON.stringify(want).slice(0, 300)}`);
  }
  console.log(`ok: ${what} (${JSON.stringify(got).slice(0, 60)})`);
}
function within(v, low, high, what) {
  if (!(v >= low && v <= high)) throw new Error(`check failed: ${what}: ${v} not in [${low}, ${high}]`);
  console.log(`ok: ${what} (${v} in [${low}, ${high}])`);
}
async function waitUntil(cond, ms, what) {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`check failed: ${what} (not within ${ms} ms)`);
    await sleep(20);
  }
}
// Errors a worker or QueueEvents reports in the background end the run.
let backgroundError = null;
const onError = (who) => (e) => { backgroundError ??= new Error(`${who}: ${e.message}`); };
async function finished(job, events, ms, what) {
  return Promise.race([
    job.waitUntilFinished(events, ms),
    (async () => { await waitUntil(() => backgroundError, ms + 1000, what); throw backgroundError; })(),
  ]);
}

async function main() {
  const queue = new Queue('apps', { connection });
  closers.push(queue);
  await queue.obliterate({ force: true });
  const events = new QueueEvents('apps', { connection });
  closers.push(events);
  events.on('error', onError('QueueEvents'));
  await events.waitUntilReady();
  const completed = new Set();
  const progress = [];
  events.on('completed', ({ jobId }) => completed.add(jobId));
  events.on('progress', ({ jobId, data }) => progress.push([jobId, data]));

  const runs = new Map();
  const attempts = [];
  const ticks = [];
  const worker = new Worker('apps', async (job) => {
    switch (job.name) {
      case 'square':
        runs.set(job.data.i, (runs.get(job.data.i) ?? 0) + 1);
        return job.data.i ** 2;
      case 'progress':
        await job.updateProgress(50);
        await job.updateProgress(100);
        return 'done';
      case 'stamp':
        return Date.now();
      case 'flaky':
        attempts.push(Date.now());
        if (job.attemptsMade < 2) throw new Error(`flaky attempt ${job.attemptsMade + 1}`);
        return `ok after ${job.attemptsMade} failures`;
      case 'tick':
        ticks.push(Date.now());
        return ticks.length;
      default:
        throw new Error(`unknown job ${job.name}`);
    }
  }, { connection, concurrency: 10 });
  closers.push(worker);
  worker.on('error', onError('worker'));

  // 200 jobs.
  const jobs = await queue.addBulk(Array.from({ length: 200 }, (_, i) => ({ name: 'square', data: { i } })));
  equal(new Set(jobs.map((j) => j.id)).size, 200, '200 jobs added, each with its own id');
  await waitUntil(() => backgroundError || completed.size >= 200, 60000, 'QueueEvents saw 200 completions');
  if (backgroundError) throw backgroundError;
  equal([...runs.keys()].sort((a, b) => a - b), Array.from({ length: 200 }, (_, i) => i), 'every job ran');
  equal(Math.max(...runs.values()), 1, 'no job ran twice');
  const values = await Promise.all(jobs.map(async (j) => (await Job.fromId(queue, j.id)).returnvalue));
  equal(values, Array.from({ length: 200 }, (_, i) => i * i), '200 return values read back');
  equal(jobs.every((j) => completed.has(j.id)), true, 'QueueEvents saw every job complete');
  equal(await queue.getJobCounts('completed', 'failed', 'wait', 'active'), { completed: 200, failed: 0, wait: 0, active: 0 }, 'job counts');

  // Progress.
  const p = await queue.add('progress', {});
  equal(await finished(p, events, 10000, 'progress job'), 'done', 'progress job result');
  await waitUntil(() => progress.filter(([id]) => id === p.id).length >= 2, 5000, 'two progress events');
  equal(progress.filter(([id]) => id === p.id).map(([, d]) => d), [50, 100], 'progress events seen by QueueEvents');

  // A delayed job.
  const d = await queue.add('stamp', {}, { delay: 1500 });
  equal(await d.getState(), 'delayed', 'a job added with a delay waits in the delayed set');
  const ranAt = await finished(d, events, 10000, 'delayed job');
  within(ranAt - d.timestamp, 1500, 3000, 'delayed job ran after (ms)');

  // Retries with a fixed backoff.
  const f = await queue.add('flaky', {}, { attempts: 3, backoff: { type: 'fixed', delay: 300 } });
  equal(await finished(f, events, 15000, 'flaky job'), 'ok after 2 failures', 'the flaky job succeeded on its third attempt');
  equal(attempts.length, 3, 'three attempts');
  for (let i = 1; i < attempts.length; i++) within(attempts[i] - attempts[i - 1], 300, 2000, `backoff before attempt ${i + 1} (ms)`);

  // A repeatable job: every 500 ms, three times.
  await queue.upsertJobScheduler('ticker', { every: 500, limit: 3 }, { name: 'tick', data: {} });
  await waitUntil(() => backgroundError || ticks.length >= 3, 15000, 'three ticks');
  if (backgroundError) throw backgroundError;
  await sleep(1200);
  equal(ticks.length, 3, 'the repeatable job ran three times and then stopped');
  for (let i = 1; i < ticks.length; i++) within(ticks[i] - ticks[i - 1], 400, 1500, `interval before tick ${i + 1} (ms)`);

  // A worker killed mid-job: its job comes back as stalled.
  const stallQueue = new Queue('stall', { connection });
  closers.push(stallQueue);
  const stallEvents = new QueueEvents('stall', { connection });
  closers.push(stallEvents);
  stallEvents.on('error', onError('QueueEvents stall'));
  await stallEvents.waitUntilReady();
  const stalled = [];
  stallEvents.on('stalled', ({ jobId }) => stalled.push(jobId));
  const h = await stallQueue.add('hang', {});
  const child = spawn(process.execPath, [new URL('./stall-child.mjs', import.meta.url).pathname], { stdio: ['ignore', 'pipe', 'inherit'] });
  const line = await Promise.race([
    new Promise((resolve) => createInterface({ input: child.stdout }).once('line', resolve)),
    sleep(15000).then(() => 'timeout'),
  ]);
  equal(line, `active ${h.id}`, 'the doomed worker took the job');
  child.kill('SIGKILL');
  const rescuer = new Worker('stall', async () => 'recovered', { connection, stalledInterval: 1000, lockDuration: 2000 });
  closers.push(rescuer);
  rescuer.on('error', onError('rescuer'));
  equal(await finished(h, stallEvents, 20000, 'stalled job'), 'recovered', 'another worker finished the stalled job');
  equal(stalled, [h.id], 'QueueEvents reported the job stalled once');
  console.log('bullmq: all checks passed');
}

let code = 0;
try {
  await main();
} catch (e) {
  console.error(e.stack ?? String(e));
  code = 1;
}
await Promise.race([Promise.allSettled(closers.reverse().map((c) => c.close())), sleep(5000)]);
process.exit(code);

// A BullMQ worker that takes one job from the "stall" queue and never
// finishes it: scenario.mjs SIGKILLs it mid-job, so the job's lock
// (2 s) expires and another worker must get the job back as stalled. The
// stalled-check interval is a setting of the queue that all its workers
// share (the first check sets a key that lasts one interval).
import { Worker } from 'bullmq';

const url = new URL(process.env.REDIS_URL);
const connection = { host: url.hostname, port: Number(url.port), maxRetriesPerRequest: null };
const worker = new Worker('stall', async (job) => {
  console.log(`active ${job.id}`);
  await new Promise(() => {});
}, { connection, lockDuration: 2000, stalledInterval: 1000 });
worker.on('error', (e) => { console.error(`child worker error: ${e.message}`); process.exit(2); });

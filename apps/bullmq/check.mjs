// The checks the Node pub/sub scenarios share: each check that holds
// prints one line, one that fails throws with what it compared.
import { isDeepStrictEqual } from 'node:util';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function equal(got, want, what) {
  if (!isDeepStrictEqual(got, want)) {
    throw new Error(`check failed: ${what}: got ${JSON.stringify(got)?.slice(0, 300)}, want ${JSON.stringify(want)?.slice(0, 300)}`);
  }
  console.log(`ok: ${what} (${JSON.stringify(got)?.slice(0, 60)})`);
}

export async function waitUntil(cond, ms, what) {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`check failed: ${what} (not within ${ms} ms)`);
    await sleep(20);
  }
}

// Runs `main`, prints the error if it threw, closes what it opened and
// exits 0 only if every check held.
export async function run(main, closers) {
  let code = 0;
  try {
    await main();
  } catch (e) {
    console.error(e.stack ?? String(e));
    code = 1;
  }
  await Promise.race([Promise.allSettled(closers.reverse().map((c) => c())), sleep(5000)]);
  process.exit(code);
}

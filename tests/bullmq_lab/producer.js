// The lab's producer: plain jobs, and the ways a producer makes (or is spared) a
// duplicate. Settings from the environment: REDIS_URL, PREFIX, QUEUE, PLAIN (how many
// plain jobs), BLOCK_MS (how long the stalling job blocks its worker), ROUNDS (how many
// rounds of the faults, added at once; each needs two workers of its own).
'use strict';
const { Queue } = require('bullmq');

const env = process.env;
const url = new URL(env.REDIS_URL);
const connection = {
  host: url.hostname, port: Number(url.port || 6379), db: Number(url.pathname.slice(1) || 0),
};
const queue = new Queue(env.QUEUE, { connection, prefix: env.PREFIX });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function finished(id) {
  for (;;) {
    const job = await queue.getJob(id);
    if (!job || (await job.isCompleted()) || (await job.isFailed())) return;
    await sleep(50);
  }
}

// One round of the faults; round r keys its orders `<name>-<r>`.
async function faults(r, blockMs) {
  const k = (name) => `${name}-${r}`;
  // Faults in the workers.
  await queue.add('report', { order_id: k('stall'), fault: 'stall', block_ms: blockMs });
  await queue.add('charge', { order_id: k('crash'), fault: 'crash' });
  await queue.add('charge', { order_id: k('retry-backoff'), fault: 'fail-once' },
    { attempts: 3, backoff: { type: 'fixed', delay: 300 } });
  await queue.add('charge', { order_id: k('retry-now'), fault: 'fail-once' }, { attempts: 2 });
  // A producer that adds the same order twice (two job ids).
  await queue.add('charge', { order_id: k('twice') });
  await queue.add('charge', { order_id: k('twice') });
  // The same custom jobId twice while the job exists: BullMQ keeps one (`duplicated`).
  await queue.add('charge', { order_id: k('held') }, { jobId: k('held') });
  await queue.add('charge', { order_id: k('held') }, { jobId: k('held') });
  // A deduplication id added again while its job is pending: one run (`deduplicated`).
  await queue.add('charge', { order_id: k('dedup-held'), work_ms: 300 }, { deduplication: { id: k('dh') } });
  await queue.add('charge', { order_id: k('dedup-held'), work_ms: 300 }, { deduplication: { id: k('dh') } });
  // A deduplication id added again after its first job finished: it runs again.
  const first = await queue.add('charge', { order_id: k('dedup-again') }, { deduplication: { id: k('da') } });
  await finished(first.id);
  await queue.add('charge', { order_id: k('dedup-again') }, { deduplication: { id: k('da') } });
  // A custom jobId added again after removeOnComplete deleted the job: it runs again.
  await queue.add('charge', { order_id: k('reid') }, { jobId: k('reid'), removeOnComplete: true });
  await finished(k('reid'));
  await queue.add('charge', { order_id: k('reid') }, { jobId: k('reid'), removeOnComplete: true });
}

async function main() {
  const plain = Number(env.PLAIN || 20);
  for (let i = 0; i < plain; i++) {
    await queue.add('charge', { order_id: `ok-${i}` });
  }
  const rounds = Number(env.ROUNDS || 1);
  await Promise.all(Array.from({ length: rounds }, (_, r) => faults(r + 1, Number(env.BLOCK_MS || 6000))));
  await queue.close();
}

main().then(() => process.exit(0), (err) => { console.error(err); process.exit(1); });

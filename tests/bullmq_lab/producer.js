// The lab's producer: plain jobs, and the ways a producer makes (or is spared) a
// duplicate. Settings from the environment: REDIS_URL, PREFIX, QUEUE, PLAIN (how many
// plain jobs), BLOCK_MS (how long the stalling job blocks its worker).
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

async function main() {
  const plain = Number(env.PLAIN || 20);
  for (let i = 0; i < plain; i++) {
    await queue.add('charge', { order_id: `ok-${i}` });
  }
  // Faults in the workers.
  await queue.add('report', { order_id: 'stall-1', fault: 'stall', block_ms: Number(env.BLOCK_MS || 6000) });
  await queue.add('charge', { order_id: 'crash-1', fault: 'crash' });
  await queue.add('charge', { order_id: 'retry-backoff-1', fault: 'fail-once' },
    { attempts: 3, backoff: { type: 'fixed', delay: 300 } });
  await queue.add('charge', { order_id: 'retry-now-1', fault: 'fail-once' }, { attempts: 2 });
  // A producer that adds the same order twice (two job ids).
  await queue.add('charge', { order_id: 'twice-1' });
  await queue.add('charge', { order_id: 'twice-1' });
  // The same custom jobId twice while the job exists: BullMQ keeps one (`duplicated`).
  await queue.add('charge', { order_id: 'held-1' }, { jobId: 'held-1' });
  await queue.add('charge', { order_id: 'held-1' }, { jobId: 'held-1' });
  // A deduplication id added again while its job is pending: one run (`deduplicated`).
  await queue.add('charge', { order_id: 'dedup-held-1', work_ms: 300 }, { deduplication: { id: 'dh-1' } });
  await queue.add('charge', { order_id: 'dedup-held-1', work_ms: 300 }, { deduplication: { id: 'dh-1' } });
  // A deduplication id added again after its first job finished: it runs again.
  const first = await queue.add('charge', { order_id: 'dedup-again-1' }, { deduplication: { id: 'da-1' } });
  await finished(first.id);
  await queue.add('charge', { order_id: 'dedup-again-1' }, { deduplication: { id: 'da-1' } });
  // A custom jobId added again after removeOnComplete deleted the job: it runs again.
  await queue.add('charge', { order_id: 'reid-1' }, { jobId: 'reid-1', removeOnComplete: true });
  await finished('reid-1');
  await queue.add('charge', { order_id: 'reid-1' }, { jobId: 'reid-1', removeOnComplete: true });
  await queue.close();
}

main().then(() => process.exit(0), (err) => { console.error(err); process.exit(1); });

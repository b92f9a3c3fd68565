// A real BullMQ worker for dupescope's lab. Every run of a job body appends to a
// side-effect ledger (JSON lines, one write a line): `effect` when the business effect
// runs, `done` when the body returns. The faults are in the job's data:
//   fault=stall      blocks the event loop for block_ms on its first run (past the lock)
//   fault=crash      SIGKILLs its own worker right after the effect, on its first run
//   fault=fail-once  throws after the effect on its first attempt (BullMQ retries it)
// Settings from the environment: REDIS_URL, PREFIX, QUEUE, NAME, LEDGER, LOCK_MS, STALL_MS.
'use strict';
const fs = require('fs');
const crypto = require('crypto');
const { Worker } = require('bullmq');

const env = process.env;
const url = new URL(env.REDIS_URL);
const connection = {
  host: url.hostname,
  port: Number(url.port || 6379),
  db: Number(url.pathname.slice(1) || 0),
  maxRetriesPerRequest: null,
};
const queue = env.QUEUE;
const name = env.NAME;

function record(kind, job, run) {
  const row = {
    kind, key: job.data.order_id, job_id: `${queue}:${job.id}`, run, worker: name,
    pid: process.pid, t: Date.now() / 1000,
  };
  fs.appendFileSync(env.LEDGER, JSON.stringify(row) + '\n');
}

async function processJob(job) {
  const run = crypto.randomUUID();
  const firstRun = job.attemptsStarted <= 1;
  record('effect', job, run);
  const fault = job.data.fault;
  if (fault === 'crash' && firstRun) {
    process.kill(process.pid, 'SIGKILL');
  }
  if (fault === 'stall' && firstRun) {
    const until = Date.now() + job.data.block_ms;
    while (Date.now() < until) { /* the event loop is blocked: no lock renewal */ }
  }
  if (fault === 'fail-once' && job.attemptsMade === 0) {
    record('done', job, run);
    throw new Error('transient failure');
  }
  await new Promise((resolve) => setTimeout(resolve, job.data.work_ms || 10));
  record('done', job, run);
  return { ok: true };
}

const worker = new Worker(queue, processJob, {
  connection,
  prefix: env.PREFIX,
  name,
  concurrency: 1,
  lockDuration: Number(env.LOCK_MS || 30000),
  stalledInterval: Number(env.STALL_MS || 30000),
});
worker.on('error', (err) => console.error(`${name}: ${err.message}`));
worker.on('ready', () => console.log(`${name} ready`));
process.on('SIGTERM', async () => { await worker.close(); process.exit(0); });

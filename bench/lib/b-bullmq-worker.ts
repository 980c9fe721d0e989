/**
 * One BullMQ Worker process of the `peers` scenario (started by b-procs.ts): a `Worker` with
 * concurrency 1 on the given queue, whose processor does nothing but print, first thing, when it
 * was called and which fire it is:
 *
 *   { id, scheduledMs, startMs, timestamp, delay, worker }
 *
 * scheduledMs is `job.opts.prevMillis`: BullMQ's job scheduler creates each iteration's job with
 * `prevMillis = nextMillis` (the instant the repeat pattern gives) and the id
 * `repeat:<scheduler>:<nextMillis>` — the fire's instant, as `scheduled_at` is baton's. startMs
 * is this host's wall clock (performance.timeOrigin + performance.now(), sub-millisecond). Prints
 * `ready` once connected; exits on SIGTERM after closing the worker.
 */
import { Worker, type Job } from 'bullmq';
import { print, runWorker } from './b-procs.js';

export interface BullTask {
  queue: string;
  host: string;
  port: number;
  worker: string;
}

export interface BullFire {
  id: string;
  scheduledMs: number;
  startMs: number;
  /**
   * When the scheduler created the job, and the delay it gave it (`job.opts.delay`; `job.delay`
   * reads 0 once the job was promoted): scheduledMs = their sum.
   */
  timestamp: number;
  delay: number;
  worker: string;
}

async function main(task: BullTask): Promise<undefined> {
  const worker = new Worker(
    task.queue,
    async (job: Job) => {
      const startMs = performance.timeOrigin + performance.now();
      const fromId = Number(String(job.id).split(':').at(-1));
      const fire: BullFire = {
        id: String(job.id),
        scheduledMs: Number(job.opts.prevMillis ?? fromId),
        startMs,
        timestamp: job.timestamp,
        delay: Number(job.opts.delay ?? 0),
        worker: task.worker,
      };
      print(fire);
    },
    {
      connection: { host: task.host, port: task.port, maxRetriesPerRequest: null },
      concurrency: 1,
    },
  );
  worker.on('error', (err) => process.stderr.write(`worker error: ${String(err)}\n`));
  await worker.waitUntilReady();
  const stopped = new Promise<void>((resolve) => {
    process.once('SIGTERM', () => {
      void worker.close().finally(resolve);
    });
  });
  print('ready');
  await stopped;
  return undefined;
}

runWorker(main);

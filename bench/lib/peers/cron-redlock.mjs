/**
 * croner + redlock on Redis, the usual hand-made "cron on N servers" (redlock's README pattern):
 * every process schedules every job with croner on its own clock, and at each tick takes a
 * Redlock lock named after the job (`redlock.using`, retryCount 0: a process that finds the lock
 * taken skips the tick), runs the job and releases the lock. The job records its start (the
 * monotonic clock) and which fire it believes it is running: the tick's second by this
 * process's wall clock. Its work is `workMs` of waiting (a short job).
 *
 * task: { worker, jobs: string[], redis: { host, port }, prefix, ttlMs, workMs }
 */
import { Cron } from 'croner';
import Redis from 'ioredis';
import Redlock from 'redlock';
import { fail, mono, onStop, print, task } from './common.mjs';

try {
  const redis = new Redis({ ...task.redis, maxRetriesPerRequest: 1 });
  const redlock = new Redlock([redis], { retryCount: 0 });
  redlock.on('error', () => {}); // a lock taken by another process is the expected case
  await redis.ping();
  const crons = task.jobs.map(
    (job) =>
      new Cron('* * * * * *', async () => {
        const fireMs = Math.round(Date.now() / 1000) * 1000;
        try {
          await redlock.using([`${task.prefix}:${job}`], task.ttlMs, async () => {
            print({ job, worker: task.worker, fireMs, startMono: mono() });
            await new Promise((r) => setTimeout(r, task.workMs));
          });
        } catch {
          // not acquired: another process has this tick
        }
      }),
  );
  onStop(async () => {
    for (const c of crons) c.stop();
    await redis.quit();
  });
  print('ready');
} catch (err) {
  fail(err);
}

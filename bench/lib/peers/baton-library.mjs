/**
 * baton's library mode (docs/library-mode.md) as a peers-cron worker: each process is a replica
 * of an application that defines the same jobs in code with `createScheduler`, from the built
 * package (dist/index.js — in an application, `import { createScheduler } from 'baton-cron'`).
 * A job's handler is a function of this process, as the peers' are; its first instruction stamps
 * the monotonic clock, and the fire it runs is its `ctx.scheduledAt` (the cron instant on the
 * fleet's clock, the database's). The scheduler's options are its defaults, but its log (to
 * stderr, warnings and errors: stdout is the protocol's) and the stop's grace (5 s, the daemon
 * runners' `--grace 5`).
 *
 * task: { worker, databaseUrl, namespace, schedule, jobs: string[] }
 */
import { pino } from 'pino';
import { createScheduler } from '../../../dist/index.js';
import { fail, mono, onStop, print, task } from './common.mjs';

try {
  const scheduler = createScheduler({
    databaseUrl: task.databaseUrl,
    host: task.worker,
    namespace: task.namespace,
    log: pino({ level: 'warn' }, pino.destination(2)),
  });
  for (const job of task.jobs) {
    scheduler.job(job, { schedule: task.schedule }, (ctx) => {
      const startMono = mono();
      print({
        job,
        worker: task.worker,
        runId: ctx.runId,
        fireMs: ctx.scheduledAt.getTime(),
        startMono,
      });
    });
  }
  onStop(() => scheduler.stop({ grace: '5s' }));
  await scheduler.start();
  print('ready');
} catch (err) {
  fail(err);
}

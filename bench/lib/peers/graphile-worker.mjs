/**
 * graphile-worker's crontab: every process runs a worker with the same crontab (one line per job,
 * each its own identifier); graphile-worker's cron makes each fire's job once (its
 * known_crontabs table) and the workers pick it up by LISTEN/NOTIFY. The task's first
 * instruction stamps the monotonic clock; the fire is the crontab's own timestamp
 * (`payload._cron.ts`). Concurrency 10 per process; everything else its defaults.
 *
 * task: { worker, connectionString, crontab }
 */
import { Logger, run } from 'graphile-worker';
import { fail, mono, onStop, print, task } from './common.mjs';

try {
  const runner = await run({
    connectionString: task.connectionString,
    concurrency: 10,
    noHandleSignals: true,
    crontab: task.crontab,
    // Its own log lines (info: every job) are not the protocol's; warnings and errors to stderr.
    logger: new Logger(() => (level, message) => {
      if (level === 'error' || level === 'warning') process.stderr.write(`${level}: ${message}\n`);
    }),
    taskList: {
      tick: async (payload) => {
        const startMono = mono();
        print({
          job: payload.job,
          worker: task.worker,
          fireMs: new Date(payload._cron.ts).getTime(),
          startMono,
        });
      },
    },
  });
  onStop(() => runner.stop());
  print('ready');
} catch (err) {
  fail(err);
}

/**
 * pg-boss's `schedule()`: every process starts a PgBoss on the same schema (its timekeeper turns
 * the schedules into jobs, one process per interval thanks to a database lock) and works every
 * job's queue. The handler's first instruction stamps the monotonic clock; the fire it runs is
 * the minute the job was created in (job.createdOn, database time: pg-boss sends a schedule's
 * job within the minute after its instant).
 *
 * Settings: pg-boss's defaults (polling every 2 s, batch 1) except the cron monitor and cron
 * worker intervals at their minimum of 1 s (defaults 30 s and 5 s): the most favourable setting
 * for its lag.
 *
 * task: { worker, connectionString, schema, queues: string[] }
 */
import PgBoss from 'pg-boss';
import { fail, mono, onStop, print, task } from './common.mjs';

try {
  const boss = new PgBoss({
    connectionString: task.connectionString,
    schema: task.schema,
    cronMonitorIntervalSeconds: 1,
    cronWorkerIntervalSeconds: 1,
    supervise: true,
    max: 4,
  });
  boss.on('error', (err) => process.stderr.write(`pg-boss error: ${String(err)}\n`));
  await boss.start();
  for (const queue of task.queues) {
    await boss.work(queue, { includeMetadata: true }, async ([job]) => {
      const startMono = mono();
      print({
        job: queue,
        worker: task.worker,
        id: job.id,
        createdMs: new Date(job.createdOn).getTime(),
        startMono,
      });
    });
  }
  onStop(() => boss.stop({ graceful: true, wait: true, timeout: 5_000 }));
  print('ready');
} catch (err) {
  fail(err);
}

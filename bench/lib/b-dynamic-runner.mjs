/**
 * A bench replica of an application whose schedules are created at run time (docs/library-mode.md,
 * "Schedules created at run time"; bench/scenarios/dynamic-schedules.ts): one handler job,
 * `tenant`, with no schedule of its own. Its handler returns at once after noting `key instant`
 * in memory — its journal, written to BENCH_JOURNAL when the replica stops, so that the scenario
 * judges "once" by what the handlers ran, not only by baton's rows.
 *
 * Told by signals, so that the harness can time what it asks:
 * - SIGUSR1: upsert BENCH_DYN_KEYS keys (`k00000`…) on BENCH_DYN_SCHEDULE, BENCH_DYN_CONCURRENCY
 *   at a time; prints `bench: upserted` with how long it took;
 * - SIGUSR2: upsert one more key (`probe-N`, a yearly schedule: it never fires here); prints
 *   `bench: probe upserted` with the revision it wrote and when;
 * - SIGTERM: stop (grace 5 s), write the journal (BENCH_JOURNAL_DIR/journal-<host>.txt), exit 0.
 * Every `schedules:changed` event of the scheduler is printed as `bench: schedules changed`
 * (revision, changed, loaded, and this process's clock): when this replica had a change.
 *
 * Its own lines are JSON on stdout with level 40, so that a harness keeping warnings only
 * (BATON_LOG_LEVEL=warn) keeps them too.
 *
 * env: BENCH_DATABASE_URL, BENCH_HOST, BENCH_NAMESPACE, BENCH_DYN_KEYS, BENCH_DYN_SCHEDULE,
 * BENCH_DYN_CONCURRENCY, BENCH_JOURNAL_DIR, BATON_LOG_LEVEL.
 */
import { writeFileSync } from 'node:fs';
import { pino } from 'pino';
import { createScheduler } from '../../dist/index.js';

const env = process.env;
const say = (msg, fields = {}) =>
  process.stdout.write(
    `${JSON.stringify({ level: 40, msg: `bench: ${msg}`, t: Date.now(), ...fields })}\n`,
  );

const scheduler = createScheduler({
  databaseUrl: env.BENCH_DATABASE_URL,
  host: env.BENCH_HOST,
  namespace: env.BENCH_NAMESPACE,
  log: pino({ level: env.BATON_LOG_LEVEL ?? 'info' }),
});
const journal = [];
// BENCH_DYN_AS=jobs: the same fires as jobs defined in code (`tenant-k00000`…, no schedule
// created at run time), for comparison: what the fire path costs at this scale either way.
const asJobs = env.BENCH_DYN_AS === 'jobs';
const keys = Number(env.BENCH_DYN_KEYS);
const keyOf = (i) => `k${String(i).padStart(5, '0')}`;
scheduler.job('tenant', env.BENCH_DYN_SKIPS ? { skips: env.BENCH_DYN_SKIPS } : {}, (ctx) => {
  journal.push(`${ctx.key} ${ctx.scheduledAt.getTime()}`);
});
if (asJobs) {
  for (let i = 0; i < keys; i++) {
    const key = keyOf(i);
    scheduler.job(`tenant-${key}`, { schedule: env.BENCH_DYN_SCHEDULE }, (ctx) => {
      journal.push(`${key} ${ctx.scheduledAt.getTime()}`);
    });
  }
}
scheduler.events.on('schedules:changed', (e) =>
  say('schedules changed', asJobs ? { ...e, loaded: e.loaded + keys } : e),
);

let upserting = false;
process.on('SIGUSR1', async () => {
  if (upserting) return;
  upserting = true;
  if (asJobs) return say('upserted', { keys, ms: 0, statuses: { jobs: keys } });
  const concurrency = Number(env.BENCH_DYN_CONCURRENCY ?? 16);
  const statuses = {};
  const started = performance.now();
  let next = 0;
  const worker = async () => {
    while (next < keys) {
      const key = keyOf(next++);
      const { status } = await scheduler.schedules.upsert('tenant', key, {
        schedule: env.BENCH_DYN_SCHEDULE,
      });
      statuses[status] = (statuses[status] ?? 0) + 1;
    }
  };
  try {
    await Promise.all(Array.from({ length: concurrency }, worker));
    say('upserted', { keys, ms: performance.now() - started, statuses });
  } catch (err) {
    say('upsert failed', { err: String(err) });
  }
});

let probes = 0;
process.on('SIGUSR2', async () => {
  const key = `probe-${probes++}`;
  const asked = Date.now();
  try {
    const { revision } = await scheduler.schedules.upsert('tenant', key, { schedule: '0 0 1 1 *' });
    say('probe upserted', { key, revision, asked });
  } catch (err) {
    say('probe failed', { key, err: String(err) });
  }
});

process.once('SIGTERM', async () => {
  await scheduler.stop({ grace: '5s' });
  if (env.BENCH_JOURNAL_DIR) {
    writeFileSync(`${env.BENCH_JOURNAL_DIR}/journal-${env.BENCH_HOST}.txt`, journal.join('\n'));
  }
  process.exit(0);
});
await scheduler.start();

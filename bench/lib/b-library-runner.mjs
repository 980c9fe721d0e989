/**
 * A bench runner in library mode (docs/library-mode.md): an application process that defines
 * BENCH_LIBRARY_JOBS every-second jobs in code, each a handler that returns at once, and runs
 * them through `createScheduler` from the built package. fleet-scale uses it to measure what the
 * coordination of a fleet costs without a process per run (`BENCH_FLEET_JOBS=handlers`).
 *
 * Its log is JSON lines on stdout at BATON_LOG_LEVEL, as a `baton start` runner's; SIGTERM stops
 * the scheduler (its grace 5 s, as the daemon runners' `--grace 5`) and exits.
 *
 * env: BENCH_DATABASE_URL, BENCH_HOST, BENCH_NAMESPACE, BENCH_LIBRARY_JOBS, BENCH_LIBRARY_SKIPS
 * (`rows` or `tally`), BATON_LOG_LEVEL.
 */
import { pino } from 'pino';
import { createScheduler } from '../../dist/index.js';

const env = process.env;
const scheduler = createScheduler({
  databaseUrl: env.BENCH_DATABASE_URL,
  host: env.BENCH_HOST,
  namespace: env.BENCH_NAMESPACE,
  log: pino({ level: env.BATON_LOG_LEVEL ?? 'info' }),
});
const skips = env.BENCH_LIBRARY_SKIPS === 'tally' ? { skips: 'tally' } : {};
for (let i = 0; i < Number(env.BENCH_LIBRARY_JOBS); i++) {
  scheduler.job(`j${String(i).padStart(3, '0')}`, { schedule: '* * * * * *', ...skips }, () => {});
}
process.once('SIGTERM', async () => {
  await scheduler.stop({ grace: '5s' });
  process.exit(0);
});
await scheduler.start();

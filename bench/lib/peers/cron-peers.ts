/**
 * The peers of the peers-cron scenario (bench/scenarios/peers-cron.ts), each run through
 * harness.ts's runPeer with its worker program beside this file: croner + redlock on Redis,
 * pg-boss's `schedule()` and graphile-worker's crontab on PostgreSQL.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { BenchContext } from '../index.js';
import {
  jobNames,
  MINUTE_JOBS,
  realOf,
  runPeer,
  SECOND_JOBS,
  stampedRun,
  versionOf,
  windowInstants,
  WORKERS,
  type StampedFire,
  type SystemResult,
} from './harness.js';

export const REDIS = { host: '127.0.0.1', port: 6379 };
export const PG = { host: '127.0.0.1', port: 5432, user: 'postgres' };

export async function cronRedlock(ctx: BenchContext, seconds: number): Promise<SystemResult> {
  const prefix = `baton-bench-${randomBytes(4).toString('hex')}`;
  const jobs = jobNames(SECOND_JOBS);
  ctx.onCleanup(async () => {
    const { Redis } = await import('ioredis');
    const redis = new Redis({ ...REDIS, maxRetriesPerRequest: 1 });
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length) await redis.del(...keys);
    await redis.quit();
  });
  return runPeer<StampedFire>(ctx, {
    system: 'croner + redlock',
    version: `croner ${versionOf('croner')}, redlock ${versionOf('redlock')}, ioredis ${versionOf('ioredis')}`,
    workload: 'second',
    script: './peers/cron-redlock.mjs',
    tasks: Array.from({ length: WORKERS }, (_, i) => ({
      worker: i === WORKERS - 1 ? 'cron-late' : `cron-${i + 1}`,
      jobs,
      redis: REDIS,
      prefix,
      ttlMs: 5_000,
      workMs: 30,
    })),
    jobs,
    instants: () => windowInstants(1000, seconds, 3_000),
    tailMs: 5_000,
    fireOf: stampedRun(),
    notes: [
      `croner + redlock: each of ${WORKERS} processes schedules the ${SECOND_JOBS} jobs with croner (\`* * * * * *\`) and at each tick runs the job inside \`redlock.using([<prefix>:<job>], 5000 ms)\` with retryCount 0 (redlock's README pattern: the lock is released when the job ends); the job waits 30 ms. The fire a run belongs to is the tick's second by its process's clock; the late process's ticks come 0.4 s after the others', when the lock is free again.`,
    ],
  });
}

interface BossFire {
  job: string;
  worker: string;
  createdMs: number;
  startMono: number;
}

/** A fresh PostgreSQL database for one peer, dropped when the scenario ends. */
async function pgDatabase(ctx: BenchContext, label: string): Promise<string> {
  const name = `baton_bench_${label}_${randomBytes(3).toString('hex')}`;
  const admin = new pg.Client({ ...PG, database: 'postgres' });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  ctx.onCleanup(async () => {
    const c = new pg.Client({ ...PG, database: 'postgres' });
    await c.connect();
    await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await c.end();
  });
  return `postgres://${PG.user}@${PG.host}:${PG.port}/${name}`;
}

export async function pgBoss(ctx: BenchContext, minutes: number): Promise<SystemResult> {
  const connectionString = await pgDatabase(ctx, 'pgboss');
  const jobs = jobNames(MINUTE_JOBS);
  const schema = 'pgboss';
  // The schema, the queues and the schedules, once, before the workers start.
  const { default: PgBoss } = await import('pg-boss');
  const setup = new PgBoss({ connectionString, schema, schedule: false, supervise: false });
  setup.on('error', (err: unknown) => ctx.log(`pg-boss setup: ${String(err)}`));
  await setup.start();
  for (const q of jobs) {
    await setup.createQueue(q);
    await setup.schedule(q, '* * * * *');
  }
  await setup.stop({ graceful: false, wait: true });
  return runPeer<BossFire>(ctx, {
    system: 'pg-boss schedule()',
    version: `pg-boss ${versionOf('pg-boss')}, pg ${versionOf('pg')}`,
    workload: 'minute',
    script: './peers/pg-boss.mjs',
    tasks: Array.from({ length: WORKERS }, (_, i) => ({
      worker: i === WORKERS - 1 ? 'boss-late' : `boss-${i + 1}`,
      connectionString,
      schema,
      queues: jobs,
    })),
    jobs,
    instants: () => windowInstants(60_000, minutes, 10_000),
    tailMs: 45_000,
    fireOf: (m) => ({
      job: m.job,
      worker: m.worker,
      fireMs: Math.floor(m.createdMs / 60_000) * 60_000,
      startMs: realOf(m.startMono),
    }),
    notes: [
      `pg-boss: ${MINUTE_JOBS} queues with a schedule \`* * * * *\` each; ${WORKERS} processes each start a PgBoss (cron monitor and cron worker every 1 s — their minimum; defaults 30 s and 5 s) and work every queue (polling every 2 s, the default; pg-boss 10 has no notification path). A run's fire is the minute its job was created in (job.createdOn, database time).`,
    ],
  });
}

export async function graphileWorker(ctx: BenchContext, minutes: number): Promise<SystemResult> {
  const connectionString = await pgDatabase(ctx, 'graphile');
  const jobs = jobNames(MINUTE_JOBS);
  const crontab = jobs.map((j) => `* * * * * tick ?id=${j} {"job":"${j}"}`).join('\n');
  // Migrate once before the workers race to do it.
  const { runMigrations } = await import('graphile-worker');
  await runMigrations({ connectionString });
  return runPeer<StampedFire>(ctx, {
    system: 'graphile-worker crontab',
    version: `graphile-worker ${versionOf('graphile-worker')}, pg ${versionOf('pg')}`,
    workload: 'minute',
    script: './peers/graphile-worker.mjs',
    tasks: Array.from({ length: WORKERS }, (_, i) => ({
      worker: i === WORKERS - 1 ? 'gw-late' : `gw-${i + 1}`,
      connectionString,
      crontab,
    })),
    jobs,
    instants: () => windowInstants(60_000, minutes, 10_000),
    tailMs: 45_000,
    fireOf: stampedRun(),
    notes: [
      `graphile-worker: ${WORKERS} processes with the same crontab of ${MINUTE_JOBS} lines (\`* * * * * tick ?id=jNNN\`), concurrency 10 each, its defaults otherwise (jobs announced by LISTEN/NOTIFY). A run's fire is its crontab timestamp (payload._cron.ts).`,
    ],
  });
}

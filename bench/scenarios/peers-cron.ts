/**
 * Issue 21, part 3: the peers a Node team would pick for "cron on N servers", side by side with
 * baton in the same run. Every system gets 3 worker processes on this machine, the third with
 * its wall clock 0.4 s behind (libfaketime `FAKETIME=-0.4`, the monotonic clock left alone), and
 * the same workload:
 *
 * - every second (croner's granularity and baton's): 10 jobs every second for 60 s (quick: 10 s)
 *   — croner + redlock on Redis (bench/lib/peers/cron-redlock.mjs; node-cron is not installed:
 *   croner is the cron library baton itself uses) against 3 baton runners;
 * - every minute (pg-boss's `schedule()` and graphile-worker's crontab are minute-granular): 100
 *   jobs every minute for 2 minutes (`BENCH_PEER_MINUTES`; quick: 1) — pg-boss and
 *   graphile-worker on the local PostgreSQL, then 3 baton runners on the same 100 jobs.
 *
 * Measured the same way for every system: a fire's lag = the real instant its job ran its first
 * instruction − the fire's instant. The peers' jobs are functions in warm processes that stamp
 * the monotonic clock first thing; baton's are command jobs (bench/lib/stamp.ts's C program with
 * CLOCK_MONOTONIC), so baton's lag includes spawning a process. The harness maps the monotonic
 * clock to its own (unfaked) wall clock; baton's `scheduled_at` is database time (the offset to
 * the host is measured, ~0 on one machine). The lag of a fire is its first run's. Also per
 * system: fires run twice (two runs of one fire, by the jobs' own records), fires lost (no run),
 * and the idle footprint: each worker's resident memory (its process tree: a baton runner and its
 * spawner) just before the first measured fire, and the peak over the run.
 *
 * A peer whose server is unreachable (Redis at 127.0.0.1:6379, PostgreSQL at 127.0.0.1:5432 as
 * user postgres, trust auth) is skipped with a failed check that says so. Each peer's data is its
 * own: a Redis key prefix, a PostgreSQL database per peer, dropped at the end.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import path from 'node:path';
import type { RowDataPacket } from 'mysql2/promise';
import pg from 'pg';
import type {
  BenchContext,
  BenchRunner,
  Check,
  Distribution,
  Figure,
  Scenario,
  ScenarioResult,
  TableRow,
} from '../lib/index.js';
import {
  distFigures,
  makeTempDir,
  percentiles,
  readProc,
  ROOT,
  round,
  sleep,
} from '../lib/index.js';
import { buildStamp, clockOffset, readStamps } from '../lib/stamp.js';
import { skewedClockEnv, startProcs, type WorkerProc } from '../lib/b-procs.js';
import { loadAverages } from '../lib/machine.js';

const WORKERS = 3;
const SKEW = '-0.4';
const REDIS = { host: '127.0.0.1', port: 6379 };
const PG = { host: '127.0.0.1', port: 5432, user: 'postgres' };
const SECOND_JOBS = 10;
const MINUTE_JOBS = 100;

/** One run of one fire, in real (host, unfaked) time. */
interface Run {
  job: string;
  worker: string;
  fireMs: number;
  startMs: number;
}

interface SystemResult {
  system: string;
  version: string;
  workload: 'second' | 'minute';
  fires: number;
  lag: Distribution;
  twice: number;
  lost: number;
  runs: number;
  rssIdleMiB: number[];
  rssPeakMiB: number[];
  loadStart: string;
  loadEnd: string;
  byWorker: Record<string, number>;
  notes: string[];
  /** baton only: its claim lag (started_at − scheduled_at), the instant it decided to run. */
  claim?: Distribution;
}

/** Real time of a monotonic reading (ms): the harness's clock is not faked. */
const mono0 = Number(process.hrtime.bigint()) / 1e6;
const wall0 = performance.timeOrigin + performance.now();
const realOf = (monoMs: number) => wall0 + (monoMs - mono0);

const versionOf = (pkg: string) =>
  String(
    (
      JSON.parse(readFileSync(path.join(ROOT, 'node_modules', pkg, 'package.json'), 'utf8')) as {
        version: string;
      }
    ).version,
  );

function reachable(host: string, port: number, timeoutMs = 2_000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/** Resident memory of a process and its descendants (a baton runner has a spawner child), MiB. */
function treeRssMiB(pid: number): number {
  let kib = 0;
  const visit = (p: number) => {
    try {
      const rss = readProc(p).rssKiB;
      if (Number.isFinite(rss)) kib += rss; // a zombie has no VmRSS
      const kids = readFileSync(`/proc/${p}/task/${p}/children`, 'utf8').trim();
      for (const k of kids ? kids.split(/\s+/) : []) visit(Number(k));
    } catch {
      // gone
    }
  };
  visit(pid);
  return kib / 1024;
}

/** Peak tree RSS of some processes, sampled every 500 ms until stop(). */
function rssPeaks(pids: number[]): { stop(): number[] } {
  const peaks = pids.map((p) => treeRssMiB(p));
  const timer = setInterval(() => {
    pids.forEach((p, i) => (peaks[i] = Math.max(peaks[i]!, treeRssMiB(p))));
  }, 500);
  return {
    stop() {
      clearInterval(timer);
      return peaks;
    },
  };
}

/** The fires of a window: `jobs` × instants; runs outside it are left out. */
function judge(
  runs: Run[],
  jobs: string[],
  instants: number[],
): Pick<SystemResult, 'lag' | 'twice' | 'lost' | 'runs' | 'byWorker' | 'fires'> {
  const inWindow = new Set(instants);
  const perFire = new Map<string, Run[]>();
  for (const r of runs) {
    if (!inWindow.has(r.fireMs)) continue;
    const k = `${r.job}@${r.fireMs}`;
    perFire.set(k, [...(perFire.get(k) ?? []), r]);
  }
  const lag: number[] = [];
  const byWorker: Record<string, number> = {};
  let twice = 0;
  let total = 0;
  for (const fr of perFire.values()) {
    fr.sort((a, b) => a.startMs - b.startMs);
    lag.push(fr[0]!.startMs - fr[0]!.fireMs);
    if (fr.length > 1) twice++;
    total += fr.length;
    for (const r of fr) byWorker[r.worker] = (byWorker[r.worker] ?? 0) + 1;
  }
  let lost = 0;
  for (const at of instants) for (const j of jobs) if (!perFire.has(`${j}@${at}`)) lost++;
  return {
    lag: percentiles(lag),
    twice,
    lost,
    runs: total,
    byWorker,
    fires: jobs.length * instants.length,
  };
}

const jobNames = (n: number) =>
  Array.from({ length: n }, (_, i) => `j${String(i).padStart(3, '0')}`);

/** The instants of a window: from the first whole `periodMs` at least `leadMs` from now. */
function windowInstants(periodMs: number, count: number, leadMs: number): number[] {
  const first = Math.ceil((Date.now() + leadMs) / periodMs) * periodMs;
  return Array.from({ length: count }, (_, i) => first + i * periodMs);
}

/**
 * Runs a peer: 3 worker processes of `script` (the third with the skewed clock), the window's
 * fires, then SIGTERM. `fireOf` turns a worker's message into a Run (or null).
 */
async function runPeer<M>(
  ctx: BenchContext,
  o: {
    system: string;
    version: string;
    workload: 'second' | 'minute';
    script: string;
    tasks: object[];
    jobs: string[];
    instants: () => number[];
    tailMs: number;
    fireOf: (m: M) => Run | null;
    notes: string[];
  },
): Promise<SystemResult> {
  const skew = skewedClockEnv(SKEW) ?? {};
  const loadStart = loadAverages();
  const started = await Promise.all(
    o.tasks.map((t, i) =>
      startProcs<object, M>(o.script, [t], {
        env: i === WORKERS - 1 ? skew : {},
        timeoutMs: 15 * 60_000,
      }),
    ),
  );
  const procs: WorkerProc<M>[] = started.map((s) => s.procs[0]!);
  ctx.onCleanup(() => started.forEach((s) => s.kill()));
  const runs: Run[] = [];
  for (const p of procs) {
    p.onMessage = (m) => {
      const r = o.fireOf(m);
      if (r) runs.push(r);
    };
  }
  const instants = o.instants();
  const first = instants[0]!;
  const last = instants.at(-1)!;
  const period = instants.length > 1 ? instants[1]! - first : 1000;
  ctx.log(
    `${o.system}: ${o.jobs.length} jobs, ${instants.length} instants from ${new Date(first).toISOString()}`,
  );
  await sleep(Math.max(0, first - 1_000 - Date.now()));
  const pids = procs.map((p) => p.child.pid!);
  const rssIdleMiB = pids.map(treeRssMiB);
  const peaks = rssPeaks(pids);
  const expected = o.jobs.length * instants.length;
  await ctx
    .waitFor(
      `${o.system}: every fire of the window run`,
      () =>
        new Set(
          runs
            .filter((r) => r.fireMs >= first && r.fireMs <= last)
            .map((r) => `${r.job}@${r.fireMs}`),
        ).size >= expected,
      { timeoutMs: last - Date.now() + o.tailMs, intervalMs: 250 },
    )
    .catch(() => ctx.log(`${o.system}: not every fire ran within ${o.tailMs} ms of the last`));
  // A second run of a fire (the late worker's) shows up by now.
  await sleep(Math.min(period, 2_000));
  const rssPeakMiB = peaks.stop();
  const loadEnd = loadAverages();
  for (const p of procs) p.child.kill('SIGTERM');
  await Promise.all(procs.map((p) => p.exited));
  const errs = procs.map((p) => p.stderr().trim()).filter(Boolean);
  return {
    system: o.system,
    version: o.version,
    workload: o.workload,
    ...judge(runs, o.jobs, instants),
    rssIdleMiB,
    rssPeakMiB,
    loadStart,
    loadEnd,
    notes: [
      ...o.notes,
      ...errs.map((e) => `${o.system} worker stderr (last 300 chars): ${e.slice(-300)}`),
    ],
  };
}

interface CronRedlockFire {
  job: string;
  worker: string;
  fireMs: number;
  startMono: number;
}

async function cronRedlock(ctx: BenchContext, seconds: number): Promise<SystemResult> {
  const prefix = `baton-bench-${randomBytes(4).toString('hex')}`;
  const jobs = jobNames(SECOND_JOBS);
  ctx.onCleanup(async () => {
    const { Redis } = await import('ioredis');
    const redis = new Redis({ ...REDIS, maxRetriesPerRequest: 1 });
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length) await redis.del(...keys);
    await redis.quit();
  });
  return runPeer<CronRedlockFire>(ctx, {
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
    fireOf: (m) => ({
      job: m.job,
      worker: m.worker,
      fireMs: m.fireMs,
      startMs: realOf(m.startMono),
    }),
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

interface GraphileFire {
  job: string;
  worker: string;
  fireMs: number;
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

async function pgBoss(ctx: BenchContext, minutes: number): Promise<SystemResult> {
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

async function graphileWorker(ctx: BenchContext, minutes: number): Promise<SystemResult> {
  const connectionString = await pgDatabase(ctx, 'graphile');
  const jobs = jobNames(MINUTE_JOBS);
  const crontab = jobs.map((j) => `* * * * * tick ?id=${j} {"job":"${j}"}`).join('\n');
  // Migrate once before the workers race to do it.
  const { runMigrations } = await import('graphile-worker');
  await runMigrations({ connectionString });
  return runPeer<GraphileFire>(ctx, {
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
    fireOf: (m) => ({
      job: m.job,
      worker: m.worker,
      fireMs: m.fireMs,
      startMs: realOf(m.startMono),
    }),
    notes: [
      `graphile-worker: ${WORKERS} processes with the same crontab of ${MINUTE_JOBS} lines (\`* * * * * tick ?id=jNNN\`), concurrency 10 each, its defaults otherwise (jobs announced by LISTEN/NOTIFY). A run's fire is its crontab timestamp (payload._cron.ts).`,
    ],
  });
}

interface WinnerRow extends RowDataPacket {
  id: number;
  job: string;
  scheduled_at: Date;
  host: string;
}

/** baton on a workload: 3 runners, the third 0.4 s behind, each job the monotonic stamp. */
async function baton(
  ctx: BenchContext,
  workload: 'second' | 'minute',
  count: number,
): Promise<SystemResult> {
  const jobsN = workload === 'second' ? SECOND_JOBS : MINUTE_JOBS;
  const periodMs = workload === 'second' ? 1000 : 60_000;
  const namespace = `peers-${workload}`;
  const jobs = jobNames(jobsN);
  const stamp = buildStamp(undefined, { monotonic: true });
  const stampFile = path.join(makeTempDir('baton-bench-peers-'), 'stamps.txt');
  const withFile = ctx.writeSchedule({
    namespace,
    jobs: Object.fromEntries(
      jobs.map((j) => [
        j,
        {
          schedule: workload === 'second' ? '* * * * * *' : '* * * * *',
          command: stamp.argv(stampFile),
        },
      ]),
    ),
  });
  const offset = await clockOffset(ctx.db);
  const loadStart = loadAverages();
  const skew = skewedClockEnv(SKEW) ?? {};
  const runners: BenchRunner[] = [
    ...(await ctx.startRunners(WORKERS - 1, {
      config: withFile,
      hostPrefix: `baton-${workload}`,
      args: ['--grace', '5'],
      logLevel: 'warn',
      keepLines: false,
    })),
    ...(await ctx.startRunners(1, {
      config: withFile,
      hostPrefix: `baton-${workload}-late`,
      args: ['--grace', '5'],
      env: skew,
      logLevel: 'warn',
      keepLines: false,
    })),
  ];
  const instants = windowInstants(periodMs, count, workload === 'second' ? 3_000 : 10_000);
  const first = instants[0]!;
  const last = instants.at(-1)!;
  ctx.log(
    `baton (${workload}): ${jobsN} jobs, ${count} instants from ${new Date(first).toISOString()}`,
  );
  await sleep(Math.max(0, first - 1_000 - Date.now()));
  const pids = runners.map((r) => r.pid);
  const rssIdleMiB = pids.map(treeRssMiB);
  const peaks = rssPeaks(pids);
  const where = 'namespace = ? AND scheduled_at BETWEEN ? AND ?';
  const params = [namespace, new Date(first), new Date(last)];
  await ctx
    .waitForRows(
      `SELECT COUNT(*) AS n FROM baton_runs WHERE ${where} AND winner = 1 AND status <> 'running'`,
      params,
      jobsN * count,
      last - Date.now() + 30_000,
    )
    .catch(() => ctx.log(`baton (${workload}): not every fire was done 30 s after the last`));
  await sleep(1_000);
  const rssPeakMiB = peaks.stop();
  const loadEnd = loadAverages();
  await Promise.all(runners.map((r) => r.stop('SIGTERM')));
  // Every row (winners and skips) by id: a stamp under a non-winner's id would be a second run.
  const rows = await ctx.db.query<WinnerRow>(
    `SELECT id, job, scheduled_at, host FROM baton_runs WHERE ${where}`,
    params,
  );
  const byId = new Map(rows.map((r) => [Number(r.id), r]));
  const runs: Run[] = [];
  for (const [id, monoMs] of readStamps(stampFile)) {
    const r = byId.get(id);
    if (!r) continue;
    runs.push({
      job: r.job,
      worker: r.host,
      fireMs: r.scheduled_at.getTime(),
      // host real time → database time
      startMs: realOf(monoMs) + offset.offsetMs,
    });
  }
  const claims = await ctx.db.query<RowDataPacket>(
    `SELECT TIMESTAMPDIFF(MICROSECOND, scheduled_at, started_at) / 1000 AS ms FROM baton_runs
      WHERE ${where} AND winner = 1`,
    params,
  );
  const claim = percentiles(claims.map((c) => Number(c.ms)));
  const [w] = await ctx.db.query<RowDataPacket>(
    `SELECT COUNT(*) AS fires, COALESCE(SUM(n > 1), 0) AS doubled FROM
       (SELECT COUNT(*) AS n FROM baton_runs WHERE ${where} AND winner = 1
         GROUP BY job, scheduled_at) f`,
    params,
  );
  return {
    system: `baton (${workload === 'second' ? 'every second' : 'every minute'})`,
    version: '', // set by the caller (package.json's version)
    workload,
    ...judge(runs, jobs, instants),
    rssIdleMiB,
    rssPeakMiB,
    loadStart,
    loadEnd,
    claim,
    notes: [
      `baton (${workload}): ${WORKERS} runners (the third with its clock 0.4 s behind), ${jobsN} command jobs \`${workload === 'second' ? '* * * * * *' : '* * * * *'}\`, each the C stamp of CLOCK_MONOTONIC; claim lag (started_at − scheduled_at, database time) p50 / p99 ${round(claim.p50, 0)} / ${round(claim.p99, 0)} ms; history: ${Number(w?.fires)} fires with a winner, ${Number(w?.doubled)} with two; clock offset to the database ${round(offset.offsetMs, 2)} ms (± ${round(offset.rttMs / 2, 2)}).`,
    ],
  };
}

export default {
  name: 'peers-cron',
  title:
    'Side by side: croner + redlock, pg-boss, graphile-worker and baton, 3 workers, one 0.4 s late',
  async run(ctx: BenchContext): Promise<ScenarioResult> {
    const seconds = ctx.quick ? 10 : 60;
    const minutesEnv = Number(process.env.BENCH_PEER_MINUTES ?? (ctx.quick ? 1 : 2));
    if (!Number.isInteger(minutesEnv) || minutesEnv < 1) {
      throw new Error(`BENCH_PEER_MINUTES=${process.env.BENCH_PEER_MINUTES}: a whole number ≥ 1`);
    }
    const minutes = minutesEnv;
    const checks: Check[] = [];
    const notes: string[] = [];
    if (!skewedClockEnv(SKEW)) {
      checks.push({
        name: 'libfaketime installed (apt-get install faketime)',
        ok: false,
        detail: 'not found: every third worker ran on the real clock',
      });
    }
    const redis = await reachable(REDIS.host, REDIS.port);
    const postgres = await reachable(PG.host, PG.port);
    const results: SystemResult[] = [];
    const skipped = (what: string, why: string) =>
      checks.push({ name: `${what} measured`, ok: false, detail: `skipped: ${why}` });

    // Every second.
    if (redis) results.push(await cronRedlock(ctx, seconds));
    else skipped('croner + redlock', `no Redis at ${REDIS.host}:${REDIS.port}`);
    results.push(await baton(ctx, 'second', seconds));
    // Every minute.
    if (postgres) {
      results.push(await pgBoss(ctx, minutes));
      results.push(await graphileWorker(ctx, minutes));
    } else {
      skipped('pg-boss and graphile-worker', `no PostgreSQL at ${PG.host}:${PG.port}`);
    }
    results.push(await baton(ctx, 'minute', minutes));

    const batonVersion = (
      JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }
    ).version;
    const table: TableRow[] = [];
    const figures: Record<string, Figure> = {
      second_jobs: SECOND_JOBS,
      second_window_s: seconds,
      minute_jobs: MINUTE_JOBS,
      minute_window_min: minutes,
      skew_s: Number(SKEW),
    };
    const versions: Record<string, string> = {};
    for (const r of results) {
      if (r.system.startsWith('baton')) r.version = `baton-cron ${batonVersion}`;
      versions[r.system] = r.version;
      const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;
      table.push({
        system: r.system,
        workload:
          r.workload === 'second'
            ? `${SECOND_JOBS} jobs/s × ${seconds} s`
            : `${MINUTE_JOBS} jobs/min × ${minutes}`,
        'lag p50 / p99': `${round(r.lag.p50, 1)} / ${round(r.lag.p99, 1)} ms`,
        'run twice': `${r.twice} of ${r.fires}`,
        lost: r.lost,
        'idle RSS per worker': `${round(mean(r.rssIdleMiB), 0)} MiB`,
        'peak RSS': `${round(Math.max(...r.rssPeakMiB), 0)} MiB`,
        load: `${r.loadStart} → ${r.loadEnd}`,
      });
      const key = r.system
        .replace(/\(every (second|minute)\)/, '$1')
        .replace(/[^a-z0-9]+/gi, '_')
        .replace(/^_|_$/g, '')
        .toLowerCase();
      Object.assign(figures, distFigures(`${key}_lag_ms`, r.lag, 1), {
        [`${key}_fires`]: r.fires,
        [`${key}_fires_run_twice`]: r.twice,
        [`${key}_fires_lost`]: r.lost,
        [`${key}_runs`]: r.runs,
        [`${key}_idle_rss_mib`]: round(mean(r.rssIdleMiB), 1),
        [`${key}_peak_rss_mib`]: round(Math.max(...r.rssPeakMiB), 1),
        [`${key}_runs_by_worker`]: JSON.stringify(r.byWorker),
        [`${key}_load`]: `${r.loadStart} → ${r.loadEnd}`,
        ...(r.claim ? distFigures(`${key}_claim_lag_ms`, r.claim, 1) : {}),
      });
      notes.push(...r.notes);
    }
    figures.versions = JSON.stringify(versions);
    for (const w of ['second', 'minute'] as const) {
      const b = results.find((r) => r.workload === w && r.system.startsWith('baton'));
      if (!b) continue;
      for (const p of results.filter((r) => r.workload === w && r !== b)) {
        const ratio = p.lag.p99 / b.lag.p99;
        const key = p.system
          .replace(/[^a-z0-9]+/gi, '_')
          .replace(/_$/, '')
          .toLowerCase();
        figures[`${key}_p99_over_baton_p99`] = round(ratio, 1);
        // Beside baton's claim: when it decided to run the fire, before spawning the process
        // (the peers' lag has no spawn in it).
        if (b.claim) figures[`${key}_p99_over_baton_claim_p99`] = round(p.lag.p99 / b.claim.p99, 1);
        checks.push(
          {
            name: `baton's p99 lag ≥ 10× lower than ${p.system}'s (${w} workload)`,
            ok: ratio >= 10,
            detail: `${p.system} p99 ${round(p.lag.p99, 1)} ms, baton ${round(b.lag.p99, 1)} ms: ${round(ratio, 1)}×`,
          },
          {
            name: `${p.system} no better than baton on double runs and lost fires`,
            ok: p.twice >= b.twice && p.lost >= b.lost,
            detail: `${p.system}: ${p.twice} run twice, ${p.lost} lost; baton: ${b.twice} run twice, ${b.lost} lost (of ${b.fires})`,
          },
        );
      }
      checks.push({
        name: `baton (${w}): no fire run twice, none lost`,
        ok: b.twice === 0 && b.lost === 0,
        detail: `${b.twice} run twice, ${b.lost} lost of ${b.fires}`,
      });
    }
    notes.push(
      `Lag = the real instant of the job's first instruction − the fire's instant, the first run of each fire; the peers' jobs are functions in warm processes, baton's are processes it spawns (a C program). Idle RSS: each worker's process tree just before the first measured fire (a baton runner with its spawner); peak: the most over the window. Versions: ${JSON.stringify(versions)}.`,
      `The machine is shared (2 cores): load averages (1/5/15 min) at each system's start and end are in the table.`,
    );
    return { figures, table, notes, checks };
  },
} satisfies Scenario;

/**
 * baton in the peers-cron scenario (bench/scenarios/peers-cron.ts), as two systems on each
 * workload, 3 workers each, the third with its clock behind:
 *
 * - the daemon: 3 `baton start` runners, each job a command — the C stamp of CLOCK_MONOTONIC
 *   (stamp.ts), so its lag includes spawning a process;
 * - library mode: 3 replica processes of baton-library.mjs (`createScheduler`, the built
 *   package), each job a handler in the replica's process that stamps the monotonic clock first
 *   thing — like the peers' jobs, a function called in a process already running.
 *
 * Both fire on the database's clock (daemon/fleet-clock.ts), so a fire's instant, `scheduled_at`,
 * is database time: a stamp (host real time, harness.ts's realOf) is moved onto it by the
 * host-to-database offset measured before the run (~0 on one machine). Both also read their
 * history: the claim lag (`started_at − scheduled_at`, when the winner decided to run) and the
 * fires with two winner rows.
 */
import path from 'node:path';
import type { RowDataPacket } from 'mysql2/promise';
import type { BenchContext, BenchRunner, Distribution } from '../index.js';
import { makeTempDir, percentiles, round, sleep } from '../index.js';
import { buildStamp, clockOffset, readStamps, type ClockOffset } from '../stamp.js';
import { skewedClockEnv } from '../b-procs.js';
import { loadAverages } from '../machine.js';
import {
  batonVersion,
  judge,
  jobNames,
  MINUTE_JOBS,
  realOf,
  rssPeaks,
  runPeer,
  SECOND_JOBS,
  SKEW,
  stampedRun,
  treeRssMiB,
  windowInstants,
  WORKERS,
  type Run,
  type StampedFire,
  type SystemResult,
} from './harness.js';

type Workload = 'second' | 'minute';

/** A workload's jobs and timing, the same for both of baton's systems. */
function shape(workload: Workload) {
  const second = workload === 'second';
  return {
    jobs: jobNames(second ? SECOND_JOBS : MINUTE_JOBS),
    schedule: second ? '* * * * * *' : '* * * * *',
    periodMs: second ? 1000 : 60_000,
    /** From now to the window's first instant, at least: the runners settle meanwhile. */
    leadMs: second ? 3_000 : 10_000,
    every: second ? 'every second' : 'every minute',
  };
}

interface HistoryRow extends RowDataPacket {
  id: number;
  job: string;
  scheduled_at: Date;
  host: string;
}

interface History {
  /** Every row of the window, winners and skips. */
  rows: HistoryRow[];
  claim: Distribution;
  /** Fires with a winner row, and with two. */
  won: number;
  doubled: number;
  /** The winner rows by status (a run whose job never started is in `failed` or `lost`). */
  byStatus: Record<string, number>;
}

/** What a namespace's history says of the window's fires. */
async function history(
  ctx: BenchContext,
  namespace: string,
  first: number,
  last: number,
): Promise<History> {
  const where = 'namespace = ? AND scheduled_at BETWEEN ? AND ?';
  const params = [namespace, new Date(first), new Date(last)];
  const rows = await ctx.db.query<HistoryRow>(
    `SELECT id, job, scheduled_at, host FROM baton_runs WHERE ${where}`,
    params,
  );
  const claims = await ctx.db.query<RowDataPacket>(
    `SELECT TIMESTAMPDIFF(MICROSECOND, scheduled_at, started_at) / 1000 AS ms FROM baton_runs
      WHERE ${where} AND winner = 1`,
    params,
  );
  const [w] = await ctx.db.query<RowDataPacket>(
    `SELECT COUNT(*) AS fires, COALESCE(SUM(n > 1), 0) AS doubled FROM
       (SELECT COUNT(*) AS n FROM baton_runs WHERE ${where} AND winner = 1
         GROUP BY job, scheduled_at) f`,
    params,
  );
  const statuses = await ctx.db.query<RowDataPacket>(
    `SELECT status, COUNT(*) AS n FROM baton_runs WHERE ${where} AND winner = 1 GROUP BY status`,
    params,
  );
  return {
    rows,
    claim: percentiles(claims.map((c) => Number(c.ms))),
    won: Number(w?.fires),
    doubled: Number(w?.doubled),
    byStatus: Object.fromEntries(statuses.map((r) => [String(r.status), Number(r.n)])),
  };
}

/** The sentence a baton row's notes end with: its history and the clock offset. */
const historyNote = (h: History, offset: ClockOffset) =>
  `claim lag (started_at − scheduled_at, database time) p50 / p99 ${round(h.claim.p50, 0)} / ${round(h.claim.p99, 0)} ms; history: ${h.won} fires with a winner, ${h.doubled} with two, winners by status ${JSON.stringify(h.byStatus)}; clock offset to the database ${round(offset.offsetMs, 2)} ms (± ${round(offset.rttMs / 2, 2)}).`;

/** The daemon on a workload: 3 runners, the third 0.4 s behind, each job the monotonic stamp. */
export async function baton(
  ctx: BenchContext,
  workload: Workload,
  count: number,
): Promise<SystemResult> {
  const { jobs, schedule, periodMs, leadMs, every } = shape(workload);
  const namespace = `peers-${workload}`;
  const stamp = buildStamp(undefined, { monotonic: true });
  const stampFile = path.join(makeTempDir('baton-bench-peers-'), 'stamps.txt');
  const withFile = ctx.writeSchedule({
    namespace,
    jobs: Object.fromEntries(jobs.map((j) => [j, { schedule, command: stamp.argv(stampFile) }])),
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
  const instants = windowInstants(periodMs, count, leadMs);
  const first = instants[0]!;
  const last = instants.at(-1)!;
  ctx.log(
    `baton (${workload}): ${jobs.length} jobs, ${count} instants from ${new Date(first).toISOString()}`,
  );
  await sleep(Math.max(0, first - 1_000 - Date.now()));
  const pids = runners.map((r) => r.pid);
  const rssIdleMiB = pids.map(treeRssMiB);
  const peaks = rssPeaks(pids);
  await ctx
    .waitForRows(
      `SELECT COUNT(*) AS n FROM baton_runs WHERE namespace = ? AND scheduled_at BETWEEN ? AND ?
         AND winner = 1 AND status <> 'running'`,
      [namespace, new Date(first), new Date(last)],
      jobs.length * count,
      last - Date.now() + 30_000,
    )
    .catch(() => ctx.log(`baton (${workload}): not every fire was done 30 s after the last`));
  await sleep(1_000);
  const rssPeakMiB = peaks.stop();
  const loadEnd = loadAverages();
  await Promise.all(runners.map((r) => r.stop('SIGTERM')));
  const h = await history(ctx, namespace, first, last);
  // Every row (winners and skips) by id: a stamp under a non-winner's id would be a second run.
  const byId = new Map(h.rows.map((r) => [Number(r.id), r]));
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
  return {
    system: `baton (${every})`,
    version: batonVersion(),
    workload,
    baton: 'daemon',
    ...judge(runs, jobs, instants),
    rssIdleMiB,
    rssPeakMiB,
    loadStart,
    loadEnd,
    claim: h.claim,
    notes: [
      `baton (${workload}): ${WORKERS} runners (the third with its clock 0.4 s behind), ${jobs.length} command jobs \`${schedule}\`, each the C stamp of CLOCK_MONOTONIC; ${historyNote(h, offset)}`,
    ],
  };
}

/**
 * Library mode on a workload: 3 replicas of baton-library.mjs (the third 0.4 s behind), started
 * and judged by runPeer like the peers; each run is what its handler printed.
 */
export async function batonLibrary(
  ctx: BenchContext,
  workload: Workload,
  count: number,
): Promise<SystemResult> {
  const { jobs, schedule, periodMs, leadMs, every } = shape(workload);
  const namespace = `peers-library-${workload}`;
  const offset = await clockOffset(ctx.db);
  let window: number[] = [];
  const result = await runPeer<StampedFire>(ctx, {
    system: `baton library (${every})`,
    version: batonVersion(),
    workload,
    script: './peers/baton-library.mjs',
    tasks: Array.from({ length: WORKERS }, (_, i) => ({
      worker: `library-${workload}-${i === WORKERS - 1 ? 'late' : i + 1}`,
      databaseUrl: ctx.db.url,
      namespace,
      schedule,
      jobs,
    })),
    jobs,
    instants: () => (window = windowInstants(periodMs, count, leadMs)),
    tailMs: 30_000,
    // host real time → database time, as the daemon's stamps
    fireOf: stampedRun(offset.offsetMs),
    notes: [],
  });
  const h = await history(ctx, namespace, window[0]!, window.at(-1)!);
  return {
    ...result,
    baton: 'library',
    claim: h.claim,
    notes: [
      `baton library (${workload}): ${WORKERS} replica processes of one application (bench/lib/peers/baton-library.mjs, the third with its clock 0.4 s behind), each defining the ${jobs.length} jobs \`${schedule}\` in code with createScheduler (dist/index.js; every option its default but the log, warnings to stderr), each job a handler that stamps the monotonic clock as its first instruction; a run's fire is its ctx.scheduledAt; ${historyNote(h, offset)}`,
      ...result.notes,
    ],
  };
}

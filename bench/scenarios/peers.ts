/**
 * Scenario 6 of issue 7, side by side with what users would pick instead.
 *
 * 1. BullMQ (bullmq 6.7.0 on the local Redis, 127.0.0.1:6379): the fire-lag set-up — an
 *    every-second no-op job, 3 worker processes (b-bullmq-worker.ts, concurrency 1 each), 60
 *    fires (quick: 10) after 2 of warm-up — on a job scheduler (`queue.upsertJobScheduler` with
 *    the pattern `* * * * * *`). Lag = the processor's first instruction (host clock) − the fire's
 *    instant, `job.opts.prevMillis` (= the `nextMillis` the scheduler computed from the pattern,
 *    also the job id's suffix). Checked: every fire processed exactly once.
 * 2. baton in the same run, the same set-up (3 runners, an every-second command job, 20 fires,
 *    quick: 10): claim lag (`started_at − scheduled_at`) and process-start lag (the job is
 *    bench-A's stamp program, bench/lib/stamp.ts, as in the fire-lag scenario), and BullMQ's lag
 *    as a ratio to each. (The fire-lag scenario measures baton with 60 fires; a scenario cannot
 *    read another's figures, so this one measures its own, smaller sample.)
 * 3. The naive design of the seed story — cron on the host's clock, `GET_LOCK(job, 0)` per fire,
 *    the job, `RELEASE_LOCK` in finally, no fire key (b-naive-runner.ts) — as 3 processes, one of
 *    them with its clock 1.5 s late (libfaketime `FAKETIME=-1.5`), over 30 fires of a ~30 ms job;
 *    and, in the same 30 seconds, 3 baton runners (one 1.5 s late the same way) on the same kind
 *    of job. Counted: fires that ran twice (by each job's own record of its runs).
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { RowDataPacket } from 'mysql2/promise';
import { Queue } from 'bullmq';
import type { BenchContext, Check, Scenario, ScenarioResult, TableRow } from '../lib/index.js';
import { distFigures, distRow, percentiles, round, type Distribution } from '../lib/index.js';
import { buildStamp, clockOffset, readStamps } from '../lib/stamp.js';
import { lastMessages, skewedClockEnv, startProcs } from '../lib/b-procs.js';
import { reachable } from '../lib/peers/harness.js';
import type { BullFire, BullTask } from '../lib/b-bullmq-worker.js';
import type { NaiveResult, NaiveTask } from '../lib/b-naive-runner.js';

const REDIS = { host: '127.0.0.1', port: 6379 };
const WORKERS = 3;
const SKEW = '-1.5';

const list = (xs: unknown[]) => xs.slice(0, 5).join('; ') + (xs.length > 5 ? ' …' : '');

/** Part 1: BullMQ's job scheduler, 3 worker processes. */
async function bullmq(
  ctx: BenchContext,
  fires: number,
): Promise<{ lag: Distribution; checks: Check[]; byWorker: Record<string, number> }> {
  const queueName = `baton-bench-${randomBytes(4).toString('hex')}`;
  const queue = new Queue(queueName, { connection: { ...REDIS, maxRetriesPerRequest: null } });
  ctx.onCleanup(async () => {
    await queue.obliterate({ force: true }).catch(() => {});
    await queue.close().catch(() => {});
  });
  await queue.waitUntilReady();
  const tasks: BullTask[] = Array.from({ length: WORKERS }, (_, i) => ({
    queue: queueName,
    ...REDIS,
    worker: `bull-${i + 1}`,
  }));
  const { procs, kill } = await startProcs<BullTask, BullFire>('./b-bullmq-worker.ts', tasks, {
    timeoutMs: (fires + 120) * 1000,
  });
  ctx.onCleanup(kill);
  const seen: BullFire[] = [];
  for (const p of procs) p.onMessage = (m) => seen.push(m);
  // The measured fires start two seconds after the scheduler exists (two fires of warm-up).
  await queue.upsertJobScheduler(
    'tick',
    { pattern: '* * * * * *' },
    { name: 'tick', data: {}, opts: { removeOnComplete: true, removeOnFail: true } },
  );
  const first = Math.ceil(Date.now() / 1000) * 1000 + 2000;
  const last = first + (fires - 1) * 1000;
  ctx.log(`bullmq: measuring ${fires} fires from ${new Date(first).toISOString()}`);
  const inWindow = () => seen.filter((f) => f.scheduledMs >= first && f.scheduledMs <= last);
  await ctx.waitFor(
    `${fires} BullMQ fires`,
    () => new Set(inWindow().map((f) => f.scheduledMs)).size >= fires,
    { timeoutMs: (fires + 30) * 1000, intervalMs: 100 },
  );
  await ctx.sleep(500); // a duplicate of the last fire would show up by now
  await queue.removeJobScheduler('tick');
  for (const p of procs) p.child.kill('SIGTERM');
  await Promise.all(procs.map((p) => p.exited));

  const measured = inWindow();
  const perFire = new Map<number, BullFire[]>();
  for (const f of measured) perFire.set(f.scheduledMs, [...(perFire.get(f.scheduledMs) ?? []), f]);
  const twice = [...perFire.entries()].filter(([, fs]) => fs.length > 1);
  const missing = Array.from({ length: fires }, (_, i) => first + i * 1000).filter(
    (at) => !perFire.has(at),
  );
  const byWorker: Record<string, number> = {};
  for (const f of measured) byWorker[f.worker] = (byWorker[f.worker] ?? 0) + 1;
  // Where the instant came from, checked: the job's creation time + its delay.
  const offGrid = measured.filter((f) => Math.abs(f.timestamp + f.delay - f.scheduledMs) > 1);
  return {
    lag: percentiles(measured.map((f) => f.startMs - f.scheduledMs)),
    byWorker,
    checks: [
      {
        name: 'BullMQ: every fire processed exactly once',
        ok: twice.length === 0 && missing.length === 0,
        detail:
          twice.length || missing.length
            ? `twice: ${list(twice.map(([at]) => new Date(at).toISOString()))}; missing: ${list(missing.map((at) => new Date(at).toISOString()))}`
            : `${fires} fires, 1 processing each`,
      },
      {
        name: 'BullMQ: job.opts.prevMillis = job.timestamp + job.opts.delay (the instant used)',
        ok: offGrid.length === 0,
        detail: offGrid.length
          ? list(offGrid.map((f) => `${f.id}: ${f.timestamp}+${f.delay}`))
          : 'every job (the scheduler created it ahead of its instant)',
      },
    ],
  };
}

interface FireRow extends RowDataPacket {
  id: number;
  scheduled_at: Date;
  winner: number | null;
  status: string;
  host: string;
  started_at: Date;
}

/** Part 2: baton's lag in the same run, 3 runners, the stamp job. */
async function batonLag(
  ctx: BenchContext,
  fires: number,
): Promise<{ claim: Distribution; start: Distribution; checks: Check[] }> {
  const offset = await clockOffset(ctx.db);
  const stamp = buildStamp();
  const stampFile = path.join(path.dirname(ctx.writeSchedule('jobs: {}\n')), 'stamps.txt');
  const config = ctx.writeSchedule({
    namespace: 'peer-lag',
    jobs: { tick: { schedule: '* * * * * *', command: stamp.argv(stampFile) } },
  });
  const runners = await ctx.startRunners(WORKERS, {
    config,
    hostPrefix: 'lag',
    args: ['--grace', '5'],
  });
  const now = await ctx.db.now();
  const first = new Date(Math.ceil(now.getTime() / 1000) * 1000 + 2000);
  const last = new Date(first.getTime() + (fires - 1) * 1000);
  ctx.log(`baton: measuring ${fires} fires from ${first.toISOString()}`);
  const where = "namespace = 'peer-lag' AND job = 'tick' AND scheduled_at BETWEEN ? AND ?";
  await ctx.waitForRows(
    `SELECT COUNT(*) AS n FROM baton_runs WHERE ${where} AND winner = 1 AND status <> 'running'`,
    [first, last],
    fires,
    (fires + 60) * 1000,
  );
  await Promise.all(runners.map((r) => r.stop('SIGTERM')));
  const rows = await ctx.db.query<FireRow>(
    `SELECT id, scheduled_at, winner, status, host, started_at FROM baton_runs
      WHERE ${where} AND winner = 1 ORDER BY scheduled_at`,
    [first, last],
  );
  const stamps = readStamps(stampFile);
  const claim = rows.map((r) => r.started_at.getTime() - r.scheduled_at.getTime());
  const start = rows.flatMap((r) => {
    const s = stamps.get(Number(r.id));
    return s == null ? [] : [s + offset.offsetMs - r.scheduled_at.getTime()];
  });
  const perFire = new Map<number, number>();
  for (const r of rows)
    perFire.set(r.scheduled_at.getTime(), (perFire.get(r.scheduled_at.getTime()) ?? 0) + 1);
  const bad = [...perFire.values()].filter((n) => n !== 1).length + (fires - perFire.size);
  return {
    claim: percentiles(claim),
    start: percentiles(start),
    checks: [
      {
        name: 'baton: one winner per fire, every winner stamped its start',
        ok: bad === 0 && start.length === rows.length && rows.every((r) => r.status === 'done'),
        detail: `${perFire.size}/${fires} fires with a winner, ${start.length} stamps, statuses ${[...new Set(rows.map((r) => r.status))].join(',')}`,
      },
    ],
  };
}

/** Part 3: the naive GET_LOCK design and baton, each with one host 1.5 s late, 30 fires. */
async function underSkew(
  ctx: BenchContext,
  fires: number,
): Promise<{
  table: TableRow[];
  figures: Record<string, number>;
  checks: Check[];
  notes: string[];
}> {
  const skew = skewedClockEnv(SKEW);
  if (!skew) {
    return {
      table: [],
      figures: {},
      checks: [
        {
          name: 'libfaketime installed (apt-get install faketime)',
          ok: false,
          detail: 'not found: the skew comparison did not run',
        },
      ],
      notes: [],
    };
  }
  // baton: two runners on time, one late; the job records each run it makes.
  const dir = path.dirname(ctx.writeSchedule('jobs: {}\n'));
  const runsFile = path.join(dir, 'baton-runs.txt');
  writeFileSync(runsFile, '');
  const config = ctx.writeSchedule({
    namespace: 'skew',
    jobs: {
      tick: {
        schedule: '* * * * * *',
        command: `echo "$BATON_SCHEDULED_AT $BATON_HOST" >> ${runsFile}; sleep 0.03`,
        shell: true,
      },
    },
  });
  const onTime = await ctx.startRunners(2, {
    config,
    hostPrefix: 'ontime',
    args: ['--grace', '5'],
  });
  const late = await ctx.startRunners(1, {
    config,
    hostPrefix: 'late',
    args: ['--grace', '5'],
    env: skew,
  });

  // naive: the same, three processes, the third 1.5 s late.
  await ctx.db.query(`CREATE TABLE naive_runs (
    id BIGINT AUTO_INCREMENT PRIMARY KEY, fire_at DATETIME(3) NOT NULL,
    host VARCHAR(64) NOT NULL, started_at DATETIME(3) NOT NULL)`);
  const firstFireMs = Math.ceil(Date.now() / 1000) * 1000 + 3000;
  const tasks: NaiveTask[] = ['naive-1', 'naive-2', 'naive-late'].map((host) => ({
    url: ctx.db.url,
    host,
    lockName: `naive-bench:${ctx.db.name}`,
    firstFireMs,
    fires,
    workMs: 30,
  }));
  const started = await Promise.all(
    tasks.map((t) =>
      startProcs<NaiveTask, NaiveResult>('./b-naive-runner.ts', [t], {
        env: t.host === 'naive-late' ? skew : {},
        timeoutMs: (fires + 60) * 1000,
      }),
    ),
  );
  ctx.onCleanup(() => started.forEach((s) => s.kill()));
  ctx.log(`skew: ${fires} fires from ${new Date(firstFireMs).toISOString()}, naive and baton`);
  started.forEach((s) => s.go());
  const naive = (await Promise.all(started.map((s) => lastMessages(s.procs)))).flat();
  // baton's last fire: its winner and the late runner's attempt come within ~2 s.
  const lastFire = new Date(firstFireMs + (fires - 1) * 1000);
  await ctx
    .waitForRows(
      "SELECT COUNT(*) AS n FROM baton_runs WHERE namespace = 'skew' AND scheduled_at = ?",
      [lastFire],
      3,
      15_000,
    )
    .catch(() => ctx.log('skew: not every baton runner left a row for the last fire'));
  await ctx.sleep(500);
  await Promise.all([...onTime, ...late].map((r) => r.stop('SIGTERM')));

  const from = new Date(firstFireMs);
  const naiveRows = await ctx.db.query<RowDataPacket>(
    'SELECT fire_at, host FROM naive_runs ORDER BY fire_at, id',
  );
  const naiveRuns = new Map<number, string[]>();
  for (const r of naiveRows) {
    const k = (r.fire_at as Date).getTime();
    naiveRuns.set(k, [...(naiveRuns.get(k) ?? []), String(r.host)]);
  }
  const batonRuns = new Map<number, string[]>();
  for (const line of readFileSync(runsFile, 'utf8').split('\n').filter(Boolean)) {
    const [at, host] = line.split(' ');
    const k = Date.parse(at!);
    if (k < from.getTime() || k > lastFire.getTime()) continue;
    batonRuns.set(k, [...(batonRuns.get(k) ?? []), host!]);
  }
  const winnerRows = await ctx.db.query<RowDataPacket>(
    `SELECT scheduled_at, COUNT(*) AS winners FROM baton_runs
      WHERE namespace = 'skew' AND winner = 1 AND scheduled_at BETWEEN ? AND ?
      GROUP BY scheduled_at`,
    [from, lastFire],
  );
  const count = (runs: Map<number, string[]>) => ({
    fires: runs.size,
    twice: [...runs.values()].filter((h) => h.length > 1).length,
    runs: [...runs.values()].reduce((s, h) => s + h.length, 0),
    missing: fires - runs.size,
    secondBy: [
      ...new Set([...runs.values()].filter((h) => h.length > 1).map((h) => h.slice(1).join('+'))),
    ],
  });
  const n = count(naiveRuns);
  const b = count(batonRuns);
  const lateOffset = naive.find((r) => r.host === 'naive-late')?.clockOffsetMs ?? NaN;
  const batonLateLines = late[0]!.lines.filter((l) => l.msg === 'fire skipped').length;
  return {
    table: [
      {
        what: `naive GET_LOCK design, 1 of 3 hosts ${SKEW} s: fires run twice`,
        n: fires,
        result: `${n.twice} of ${fires} (2nd run by ${n.secondBy.join(', ') || '-'}; ${n.runs} runs, ${n.missing} fires not run)`,
      },
      {
        what: `baton, 1 of 3 runners ${SKEW} s: fires run twice`,
        n: fires,
        result: `${b.twice} of ${fires} (${b.runs} runs, ${b.missing} fires not run)`,
      },
    ],
    figures: {
      skew_fires: fires,
      skew_late_clock_offset_ms: Math.round(lateOffset),
      naive_fires_run_twice: n.twice,
      naive_fires_not_run: n.missing,
      naive_job_runs: n.runs,
      baton_skew_fires_run_twice: b.twice,
      baton_skew_fires_not_run: b.missing,
      baton_skew_job_runs: b.runs,
    },
    checks: [
      {
        name: 'naive design double-runs under a 1.5 s skew (expected: the seed story)',
        ok: n.twice > 0,
        detail: `${n.twice} of ${fires} fires ran twice (second run by ${n.secondBy.join(', ') || 'nobody'}); the late host's clock measured ${Math.round(lateOffset)} ms off the database's`,
      },
      {
        name: 'baton runs every fire exactly once under the same skew',
        ok: b.twice === 0 && b.missing === 0 && winnerRows.every((r) => Number(r.winners) === 1),
        detail: `${b.runs} runs for ${fires} fires, ${b.twice} twice, ${b.missing} not run; ${winnerRows.length} fires with exactly ${[...new Set(winnerRows.map((r) => Number(r.winners)))].join('/')} winner row(s)`,
      },
    ],
    notes: [
      `Under skew: the naive design's late host (clock ${Math.round(lateOffset)} ms off) reaches each fire by its own clock 1.5 s after the others, when the ~30 ms job has finished and the lock is free, so it runs the fire again. baton's late runner fires on the database's clock (it measures its offset), so it contends at the same moment; had it arrived late, the fire key would have refused it ("already ran"). The late baton runner wrote ${batonLateLines} 'fire skipped' line(s).`,
    ],
  };
}

export default {
  name: 'peers',
  title: 'Side by side: BullMQ job scheduler lag; the naive GET_LOCK design under clock skew',
  async run(ctx: BenchContext): Promise<ScenarioResult> {
    const bullFires = ctx.quick ? 10 : 60;
    const batonFires = ctx.quick ? 10 : 20;
    const skewFires = ctx.quick ? 10 : 30;
    const table: TableRow[] = [];
    const checks: Check[] = [];
    const notes: string[] = [];
    const figures: ScenarioResult['figures'] = {};

    let bull: Awaited<ReturnType<typeof bullmq>> | null = null;
    if (await reachable(REDIS.host, REDIS.port)) {
      bull = await bullmq(ctx, bullFires);
      checks.push(...bull.checks);
    } else {
      checks.push({
        name: 'Redis reachable at 127.0.0.1:6379',
        ok: false,
        detail: 'no Redis: the BullMQ comparison did not run',
      });
    }
    const baton = await batonLag(ctx, batonFires);
    checks.push(...baton.checks);

    const ratio = (a: number, b: number) => (b > 0 ? round(a / b, 1) : NaN);
    if (bull) {
      table.push(
        distRow(`BullMQ 6.7.0 job scheduler: processor start − prevMillis`, bull.lag, {
          result: `÷ baton process start: p50 ${ratio(bull.lag.p50, baton.start.p50)}×, p95 ${ratio(bull.lag.p95, baton.start.p95)}×, p99 ${ratio(bull.lag.p99, baton.start.p99)}×`,
        }),
      );
      Object.assign(figures, distFigures('bullmq_lag_ms', bull.lag));
      figures.bullmq_p50_over_baton_start_p50 = ratio(bull.lag.p50, baton.start.p50);
      figures.bullmq_p95_over_baton_start_p95 = ratio(bull.lag.p95, baton.start.p95);
      figures.bullmq_p99_over_baton_start_p99 = ratio(bull.lag.p99, baton.start.p99);
      figures.bullmq_p50_over_baton_claim_p50 = ratio(bull.lag.p50, baton.claim.p50);
      figures.bullmq_p99_over_baton_claim_p99 = ratio(bull.lag.p99, baton.claim.p99);
      figures.bullmq_fires_by_worker = JSON.stringify(bull.byWorker);
      checks.push(
        ctx.target(
          "baton's p99 process-start lag below BullMQ's p99 lag",
          baton.start.p99,
          bull.lag.p99,
          'ms',
        ),
      );
    }
    table.push(
      distRow('baton: process-start lag (stamp job)', baton.start),
      distRow('baton: claim lag (started_at − scheduled_at)', baton.claim),
    );
    Object.assign(figures, distFigures('baton_start_lag_ms', baton.start));
    Object.assign(figures, distFigures('baton_claim_lag_ms', baton.claim));

    const skew = await underSkew(ctx, skewFires);
    table.push(...skew.table);
    Object.assign(figures, skew.figures);
    checks.push(...skew.checks);

    notes.push(
      `BullMQ: ${bullFires} fires of a job scheduler (pattern "* * * * * *"), ${WORKERS} worker processes, concurrency 1, Redis at ${REDIS.host}:${REDIS.port}. Lag = the processor's first instruction (host clock, sub-ms) − job.opts.prevMillis, the instant the scheduler computed for that iteration (checked equal to job.timestamp + job.opts.delay). Its processor is a function call in a warm process; baton's start lag includes spawning the job's process.`,
      `baton: ${batonFires} fires on ${WORKERS} runners in this scenario (the fire-lag scenario's 60-fire figures are the reference for baton alone). Ratios are BullMQ's percentile over baton's same percentile.`,
      ...skew.notes,
    );
    return { figures, table, notes, checks };
  },
} satisfies Scenario;

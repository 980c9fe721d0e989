/**
 * Pools (issue 39, docs in src/config/pools.ts and src/coordination/pool-slots.ts): what a pool
 * costs the fire path. In one sitting, 3 runners and 20 command jobs (`true`) every second
 * (`*\/1 * * * * *`), twice:
 *   1. `nopool`: the jobs alone;
 *   2. `pool`: the same jobs with `pools: {p: {slots: 2}}` and `pool: p` on every job
 *      (`poolFull: skip`, the default) — so at each instant 2 of the 20 fires run and the other
 *      18 are skipped with reason kind `pool`. That is the point, not a failure.
 * Each variant on a fresh database, for a measured window of 60 s (quick: 8 s;
 * `BENCH_POOL_SECONDS`). 60 s rather than 30: the pool variant has 2 winners an instant, and the
 * p99 of 60 claims would be their maximum.
 *
 * The window is bounded as chain's are: the runners start with the jobs on a yearly schedule,
 * settle, and the runners' background (heartbeats, registry, reaper) is measured for 6 s with
 * nothing firing; a reload (SIGHUP) then gives the jobs their every-second schedule, and after
 * 3 s of warm-up the statement counter runs from 500 ms before the first measured instant to
 * 500 ms after the last (the fires of an instant are over long before the next one on a quiet
 * machine; in a steady state the spill at one edge is the spill at the other). Then a reload
 * gives the jobs their yearly schedule back, and the window's rows are read once every runner's
 * row of every fire is written.
 *
 * Per variant:
 * - statements per fire per runner = (Questions over the window − the harness's own − the
 *   background rate × the window's length) / (20 × seconds fires) / 3 runners — per fire of
 *   every job, the skipped ones included: a pool that runs 2 of 20 fires must be judged by what
 *   all 20 cost, not by its 2 runs. Under `--general-log` the notes break it down by statement
 *   shape, and list what the pool adds (shape by shape, pool − no pool);
 * - claim lag: the winner's `started_at − scheduled_at` (database time, DATETIME(3), as
 *   fire-lag), p50/p95/p99/max — of the winners only (20 an instant without the pool, 2 with);
 * - runs per fire, fires without a winner, fires with two, runner rows missing, rows by kind;
 * - the most runs alive at once, from the winners' [started_at, finished_at] intervals over the
 *   variant's whole history (a sweep; an end before a start at the same millisecond: the slot is
 *   taken before the claim's `started_at` and given back after the verdict, so these intervals
 *   lie inside the slot's holding), and the `pool` skip rows, with and without a holder named;
 * - runner CPU (each `baton start` process, not its spawner) and mariadbd's over the window.
 *
 * Figures also give the ratios pool / no pool of statements per fire per runner and of the
 * claim lag p99; checked (reported, never thrown) against issue 39's goal: within 1.2×.
 * Checks: no pool — one winner per fire; pool — no fire with two winners, at most 2 winners an
 * instant, at most 2 runs alive at once, every fire without a winner has a `pool` row, every
 * `pool` row names a holder; both — every runner recorded every fire, no runner error.
 */
import os from 'node:os';
import type { RowDataPacket } from 'mysql2/promise';
import { stringify } from 'yaml';
import type {
  BenchContext,
  Check,
  Distribution,
  Figure,
  Scenario,
  ScenarioResult,
  StatementCount,
  TableRow,
} from '../lib/index.js';
import { distFigures, percentiles, reloadSchedule, round, sleep } from '../lib/index.js';
import { loadAverages } from '../lib/machine.js';

const RUNNERS = 3;
const JOBS = 20;
const SLOTS = 2;
const POOL = 'p';
const EVERY_SECOND = '*/1 * * * * *';
const YEARLY = '0 0 1 1 *';
/** Start-up work (migrations, recovery's look-ups) settles before anything is measured. */
const SETTLE_MS = 5_000;
/** The runners' background, with nothing firing. */
const BASELINE_MS = 6_000;
/** Fires after the reload before the window (first spawns, first statements). */
const WARMUP_S = 3;
/** The counter starts this long before the first measured instant and stops after the last. */
const EDGE_MS = 500;
/** Issue 39's goal: the pool within 1.2× of no pool. */
const GOAL = 1.2;
/**
 * FIRST_ASKER_LEAD_MS (src/coordination/first-asker.ts): a fire's first asker contends at its
 * instant, the other runners this much later. A claim at least this late was made after the
 * lead — by a runner that was not the fire's first asker, or by one whose first try failed.
 */
const LEAD_MS = 50;
/** The end of a `pool` skip written on another runner's (coordination/skip-reasons.ts `poolDecided`). */
const SEEN = / \(seen by [^()]+\)$/;

type Variant = 'nopool' | 'pool';

interface RunRow extends RowDataPacket {
  job: string;
  scheduled_at: Date;
  winner: number | null;
  status: string;
  host: string;
  started_at: Date;
  finished_at: Date | null;
  reason_kind: string | null;
  reason: string | null;
  pool: string | null;
}

/** The schedules file of a variant, its jobs firing every second or once a year. */
function schedule(variant: Variant, firing: boolean): string {
  const jobs: Record<string, object> = {};
  for (let i = 0; i < JOBS; i++) {
    jobs[`j${String(i).padStart(2, '0')}`] = {
      schedule: firing ? EVERY_SECOND : YEARLY,
      command: ['true'],
      ...(variant === 'pool' ? { pool: POOL } : {}),
    };
  }
  return stringify({
    namespace: variant,
    ...(variant === 'pool' ? { pools: { [POOL]: { slots: SLOTS } } } : {}),
    jobs,
  });
}

/** The most intervals alive at once; an end sorts before a start at the same instant. */
function mostAlive(intervals: { from: number; to: number }[]): { most: number; at: number } {
  const points = intervals
    .flatMap((i) => [
      { at: i.from, delta: 1 },
      { at: i.to, delta: -1 },
    ])
    .sort((a, b) => a.at - b.at || a.delta - b.delta);
  let alive = 0;
  let most = 0;
  let at = NaN;
  for (const p of points) {
    alive += p.delta;
    if (alive > most) {
      most = alive;
      at = p.at;
    }
  }
  return { most, at };
}

/** A reason with instants, hosts and run ids taken out: its shape. */
const reasonShape = (r: RunRow) =>
  `${r.status}/${r.reason_kind ?? '-'}: ${(r.reason ?? '(no reason)')
    .replace(/\d{4}-\d\d-\d\dT[\d:.]+Z/g, '…')
    .replace(/\b(no)?pool-\d+\b/g, '<host>')
    .replace(/\brun \d+/g, 'run N')
    .replace(/\bj\d\d\b/g, '<job>')}`;

interface VariantResult {
  variant: Variant;
  seconds: number;
  fires: number;
  loadStart: string;
  loadEnd: string;
  count: StatementCount;
  base: StatementCount;
  baseRate: number;
  perFirePerRunner: number;
  claim: Distribution;
  winners: number;
  noWinner: number;
  twoWinners: number;
  /**
   * The claim lag of the first SLOTS winners of each instant: the claims that met free slots (a
   * slot given back within the instant is taken again by a later claim of it — a run of `true`
   * is over in tens of ms —, and those later claims carry the wait for it).
   */
  firstClaims: Distribution;
  winnersPerInstant: Distribution;
  missingRows: number;
  notDone: string[];
  rowsByKind: Record<string, number>;
  noWinnerRowsByShape: Record<string, number>;
  /** Winners claimed at least LEAD_MS after their instant. */
  claimsAfterLead: number;
  /** `pool` rows of the fires without a winner. */
  poolRowsOfNoWinner: number;
  /** Fires without a winner that have no `pool` row. */
  noWinnerWithoutPoolRow: number;
  poolRows: number;
  /**
   * `pool` rows of a runner that took the job's lock and asked the pool itself. The others either
   * skipped on that runner's row ("… (seen by H)": the fire was decided) or met the lock held
   * until the lock-passing wait gave up ("…; <the lock holder's words>").
   */
  poolRowsAfterLock: number;
  /** `pool` rows of a runner that skipped on another's: "… (seen by H)". */
  poolRowsSeen: number;
  poolRowsNamingHolder: number;
  poolRowExample: string;
  alive: { most: number; at: number };
  aliveWinners: number;
  openIntervals: number;
  winnersByHost: Record<string, number>;
  runnerCpu: number[];
  serverCpu: number;
  errors: string[];
  warnings: string[];
}

async function measureVariant(
  ctx: BenchContext,
  variant: Variant,
  seconds: number,
): Promise<VariantResult> {
  const db = await ctx.createDatabase(variant);
  const config = ctx.writeSchedule(schedule(variant, false));
  ctx.log(`${variant}: starting ${RUNNERS} runners (${JOBS} jobs, yearly for now)`);
  const runners = await ctx.startRunners(RUNNERS, {
    config,
    databaseUrl: db.url,
    hostPrefix: variant,
    args: ['--grace', '5'],
  });
  await sleep(SETTLE_MS);
  const baseline = await ctx.statements();
  await sleep(BASELINE_MS);
  const base = await baseline.stop();
  const baseRate = base.statements / base.seconds;

  ctx.log(`${variant}: every second from now (reload); window ${seconds} s after ${WARMUP_S} s`);
  await reloadSchedule(ctx, runners, config, schedule(variant, true));
  const now = (await db.now()).getTime();
  const fromMs = Math.ceil(now / 1000) * 1000 + WARMUP_S * 1000;
  const toMs = fromMs + (seconds - 1) * 1000;
  await sleep(Math.max(0, fromMs - EDGE_MS - (await db.now()).getTime()));
  const loadStart = loadAverages();
  const counter = await ctx.statements();
  const serverSampler = ctx.server.pid ? ctx.sampleProcess(ctx.server.pid, 1000) : null;
  const runnerSamplers = runners.map((r) => ctx.sampleProcess(r.pid, 1000));
  await sleep(Math.max(0, toMs + EDGE_MS - (await db.now()).getTime()));
  const count = await counter.stop();
  const serverCpu = serverSampler?.stop().cpuPercent ?? NaN;
  const runnerCpu = runnerSamplers.map((s) => s.stop().cpuPercent);
  const loadEnd = loadAverages();
  await reloadSchedule(ctx, runners, config, schedule(variant, false));

  const where = 'namespace = ? AND scheduled_at BETWEEN ? AND ?';
  const params = [variant, new Date(fromMs), new Date(toMs)];
  const fires = JOBS * seconds;
  await ctx
    .waitFor(
      "every runner's row of every fire of the window, none running",
      async () => {
        const [r] = await db.query<RowDataPacket>(
          `SELECT COUNT(*) AS n, COALESCE(SUM(status = 'running'), 0) AS running
             FROM baton_runs WHERE ${where}`,
          params,
        );
        return Number(r?.n) >= fires * RUNNERS && Number(r?.running) === 0;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    )
    .catch(() => ctx.log(`${variant}: rows still missing or running after 30 s (checked below)`));
  const rows = await db.query<RunRow>(
    `SELECT job, scheduled_at, winner, status, host, started_at, finished_at, reason_kind,
            reason, pool
       FROM baton_runs WHERE ${where}`,
    params,
  );
  // Every winner of the variant, warm-up and tail included: the pool must hold throughout.
  const everyWinner = await db.query<RunRow>(
    `SELECT job, scheduled_at, winner, status, host, started_at, finished_at
       FROM baton_runs WHERE namespace = ? AND winner >= 1`,
    [variant],
  );
  await Promise.all(runners.map((r) => r.stop('SIGTERM', 20_000)));

  const byFire = new Map<string, RunRow[]>();
  for (const r of rows) {
    const k = `${r.job}@${r.scheduled_at.getTime()}`;
    byFire.set(k, [...(byFire.get(k) ?? []), r]);
  }
  const claim: number[] = [];
  let noWinner = 0;
  let twoWinners = 0;
  let missingRows = 0;
  let noWinnerWithoutPoolRow = 0;
  let poolRowsOfNoWinner = 0;
  const notDone: string[] = [];
  const winnersByHost: Record<string, number> = {};
  for (const r of runners) winnersByHost[r.host] = 0;
  const noWinnerRowsByShape: Record<string, number> = {};
  const perInstant: number[] = [];
  const firstClaims: number[] = [];
  for (let at = fromMs; at <= toMs; at += 1000) {
    let instantWinners = 0;
    const instantLags: number[] = [];
    for (let i = 0; i < JOBS; i++) {
      const k = `j${String(i).padStart(2, '0')}@${at}`;
      const fr = byFire.get(k) ?? [];
      missingRows += Math.max(0, RUNNERS - fr.length);
      const winners = fr.filter((r) => (r.winner ?? 0) >= 1);
      instantWinners += winners.length;
      if (winners.length > 1) twoWinners++;
      if (winners.length === 0) {
        noWinner++;
        const pooled = fr.filter((r) => r.reason_kind === 'pool').length;
        poolRowsOfNoWinner += pooled;
        if (pooled === 0) noWinnerWithoutPoolRow++;
        for (const r of fr) {
          const shape = reasonShape(r);
          noWinnerRowsByShape[shape] = (noWinnerRowsByShape[shape] ?? 0) + 1;
        }
      }
      for (const w of winners) {
        claim.push(w.started_at.getTime() - at);
        instantLags.push(w.started_at.getTime() - at);
        winnersByHost[w.host] = (winnersByHost[w.host] ?? 0) + 1;
        if (w.status !== 'done') notDone.push(`${k}: ${w.status}`);
      }
    }
    perInstant.push(instantWinners);
    firstClaims.push(...instantLags.sort((a, b) => a - b).slice(0, SLOTS));
  }
  const rowsByKind: Record<string, number> = {};
  for (const r of rows) {
    const k = (r.winner ?? 0) >= 1 ? `winner/${r.status}` : `${r.status}/${r.reason_kind ?? '-'}`;
    rowsByKind[k] = (rowsByKind[k] ?? 0) + 1;
  }
  const poolRows = rows.filter((r) => r.reason_kind === 'pool');
  // A holder is named as "<job> on <host> (run N, …)" or "<host> (taking a slot)".
  const namesHolder = (r: RunRow) => /is full[^:]*\): \S/.test(r.reason ?? '');
  const intervals = everyWinner.map((w) => ({
    from: w.started_at.getTime(),
    // A run never finished (lost, or still running) stays alive to the end: the worst case.
    to: w.finished_at?.getTime() ?? Number.MAX_SAFE_INTEGER,
  }));
  const perFirePerRunner = (count.statements - baseRate * count.seconds) / fires / RUNNERS;
  return {
    variant,
    seconds,
    fires,
    loadStart,
    loadEnd,
    count,
    base,
    baseRate,
    perFirePerRunner,
    claim: percentiles(claim),
    winners: claim.length,
    claimsAfterLead: claim.filter((ms) => ms >= LEAD_MS).length,
    poolRowsOfNoWinner,
    noWinner,
    twoWinners,
    firstClaims: percentiles(firstClaims),
    winnersPerInstant: percentiles(perInstant),
    missingRows,
    notDone,
    rowsByKind,
    noWinnerRowsByShape,
    noWinnerWithoutPoolRow,
    poolRows: poolRows.length,
    poolRowsAfterLock: poolRows.filter(
      (r) => !(r.reason ?? '').includes('; ') && !SEEN.test(r.reason ?? ''),
    ).length,
    poolRowsSeen: poolRows.filter((r) => SEEN.test(r.reason ?? '')).length,
    poolRowsNamingHolder: poolRows.filter(namesHolder).length,
    poolRowExample: poolRows.find(namesHolder)?.reason ?? poolRows[0]?.reason ?? '',
    alive: mostAlive(intervals),
    aliveWinners: everyWinner.length,
    openIntervals: everyWinner.filter((w) => w.finished_at == null).length,
    winnersByHost,
    runnerCpu,
    serverCpu,
    errors: runners.flatMap((r) => r.errors().map((l) => `${r.host}: ${l.msg}`)),
    warnings: runners.flatMap((r) =>
      r
        .warnings()
        .filter((l) => l.level < 50)
        .map((l) => `${r.host}: ${l.msg}`),
    ),
  };
}

const list = (xs: unknown[]) =>
  xs.slice(0, 5).join('; ') + (xs.length > 5 ? ` … (${xs.length})` : '');

/** Com_* deltas per fire per runner (the counter's own SHOW left out). */
function comPerFire(r: VariantResult): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(r.count.com)) {
    if (k === 'Com_show_status') continue;
    const bg = (r.base.com[k] ?? 0) * (r.count.seconds / r.base.seconds);
    out[k.replace(/^Com_/, '')] = round((v - bg) / r.fires / RUNNERS, 3);
  }
  return out;
}

/** General-log shapes per fire per runner, the background's (scaled to the window) taken out. */
function shapesPerFire(r: VariantResult): Map<string, number> {
  const out = new Map<string, number>();
  const scale = r.count.seconds / r.base.seconds;
  for (const b of r.count.breakdown) out.set(b.statement, b.count);
  for (const b of r.base.breakdown) {
    out.set(b.statement, (out.get(b.statement) ?? 0) - b.count * scale);
  }
  for (const [k, v] of out) out.set(k, v / r.fires / RUNNERS);
  return out;
}

export default {
  name: 'pool',
  title: `Pools: ${JOBS} jobs every second on ${RUNNERS} runners, without and with a pool of ${SLOTS}`,
  async run(ctx: BenchContext): Promise<ScenarioResult> {
    const env = Number(process.env.BENCH_POOL_SECONDS);
    const seconds = Number.isInteger(env) && env > 0 ? env : ctx.quick ? 8 : 60;
    const results: VariantResult[] = [];
    for (const v of ['nopool', 'pool'] as const) {
      results.push(await measureVariant(ctx, v, seconds));
    }
    const [plain, pooled] = results as [VariantResult, VariantResult];

    const stmtRatio = pooled.perFirePerRunner / plain.perFirePerRunner;
    const p99Ratio = pooled.claim.p99 / plain.claim.p99;
    const figures: Record<string, Figure> = {
      jobs: JOBS,
      runners: RUNNERS,
      slots: SLOTS,
      window_s: seconds,
    };
    const table: TableRow[] = [];
    const checks: Check[] = [];
    const notes: string[] = [];
    for (const r of results) {
      const p = `${r.variant}_`;
      const cpuMean = r.runnerCpu.reduce((s, x) => s + x, 0) / r.runnerCpu.length;
      table.push({
        variant: r.variant,
        fires: r.fires,
        'runs/fire': round(r.winners / r.fires, 3),
        'no winner': r.noWinner,
        'stmts/fire/runner': round(r.perFirePerRunner, 3),
        'claim p50 / p95 / p99 / max': `${r.claim.p50} / ${r.claim.p95} / ${r.claim.p99} / ${r.claim.max} ms (n ${r.claim.n})`,
        [`first ${SLOTS} claims an instant p50 / p99`]: `${r.firstClaims.p50} / ${r.firstClaims.p99} ms`,
        'most alive': r.alive.most,
        'pool skips': r.poolRows,
        'runner CPU': `${round(cpuMean, 1)} %`,
        'server CPU': `${round(r.serverCpu, 1)} %`,
        load: `${r.loadStart} → ${r.loadEnd}`,
      });
      Object.assign(figures, {
        [`${p}fires`]: r.fires,
        [`${p}runs`]: r.winners,
        [`${p}runs_per_fire`]: round(r.winners / r.fires, 4),
        [`${p}fires_no_winner`]: r.noWinner,
        [`${p}fires_two_winners`]: r.twoWinners,
        [`${p}rows_missing`]: r.missingRows,
        [`${p}statements_per_fire_per_runner`]: round(r.perFirePerRunner, 3),
        [`${p}statements_window`]: r.count.statements,
        [`${p}background_statements_per_s`]: round(r.baseRate, 2),
        ...distFigures(`${p}claim_lag_ms`, r.claim, 1),
        ...distFigures(`${p}first${SLOTS}_claim_lag_ms`, r.firstClaims, 1),
        [`${p}winners_per_instant_min`]: r.winnersPerInstant.min,
        [`${p}winners_per_instant_max`]: r.winnersPerInstant.max,
        [`${p}most_runs_alive`]: r.alive.most,
        [`${p}claims_after_lead`]: r.claimsAfterLead,
        [`${p}pool_skip_rows`]: r.poolRows,
        [`${p}pool_skip_rows_naming_holder`]: r.poolRowsNamingHolder,
        [`${p}runner_cpu_mean_pct`]: round(cpuMean, 1),
        [`${p}server_cpu_pct`]: round(r.serverCpu, 1),
        [`${p}rows_by_kind`]: JSON.stringify(r.rowsByKind),
        [`${p}winners_by_host`]: JSON.stringify(r.winnersByHost),
        [`${p}load_start`]: r.loadStart,
        [`${p}load_end`]: r.loadEnd,
      });
      checks.push(
        {
          name: `${r.variant}: every runner recorded every fire`,
          ok: r.missingRows === 0,
          detail: `${r.missingRows} of ${r.fires * RUNNERS} runner rows missing`,
        },
        {
          name: `${r.variant}: every winner ended done`,
          ok: r.notDone.length === 0,
          detail: r.notDone.length ? list(r.notDone) : `${r.winners} winners, all done`,
        },
        {
          name: `${r.variant}: no runner logged an error`,
          ok: r.errors.length === 0,
          detail: r.errors.length ? list(r.errors) : 'none',
        },
      );
      notes.push(
        `${r.variant}: statements — Questions over ${round(r.count.seconds, 2)} s = ` +
          `${r.count.statements} (the harness's own ${r.count.harness} subtracted), minus the ` +
          `background ${round(r.baseRate, 2)}/s (measured ${round(r.base.seconds, 1)} s with ` +
          `nothing firing) × ${round(r.count.seconds, 2)} s, / ${r.fires} fires / ${RUNNERS} ` +
          `runners = ${round(r.perFirePerRunner, 3)}. Per fire per runner by command ` +
          `(background taken out): ${JSON.stringify(comPerFire(r))}.`,
        `${r.variant}: rows of the window by kind ${JSON.stringify(r.rowsByKind)}; winners by ` +
          `host ${JSON.stringify(r.winnersByHost)}; winners per instant ${r.winnersPerInstant.min}–` +
          `${r.winnersPerInstant.max}; most runs alive at once ${r.alive.most} (of ` +
          `${r.aliveWinners} winners of the variant, ${r.openIntervals} never finished` +
          `${Number.isFinite(r.alive.at) ? `, first reached at ${new Date(r.alive.at).toISOString()}` : ''}).`,
      );
      if (r.noWinner > 0) {
        notes.push(
          `${r.variant}: the rows of the ${r.noWinner} fires without a winner, by shape: ` +
            Object.entries(r.noWinnerRowsByShape)
              .sort((a, b) => b[1] - a[1])
              .slice(0, 6)
              .map(([s, n]) => `${n}× "${s.slice(0, 200)}"`)
              .join('; ') +
            '.',
        );
      }
      if (r.warnings.length) {
        const groups = new Map<string, number>();
        for (const w of r.warnings) {
          const msg = w.replace(/^[^:]+: /, '');
          groups.set(msg, (groups.get(msg) ?? 0) + 1);
        }
        notes.push(
          `${r.variant}: runners logged ${r.warnings.length} warnings: ` +
            [...groups]
              .slice(0, 5)
              .map(([m, n]) => `${n}× "${m}"`)
              .join('; ') +
            '.',
        );
      }
      if (r.count.breakdown.length) {
        const shapes = [...shapesPerFire(r)].sort((a, b) => b[1] - a[1]).slice(0, 14);
        notes.push(
          `${r.variant} (general log), per fire per runner, background taken out: ` +
            shapes.map(([s, n]) => `${round(n, 3)} "${s}"`).join('; '),
        );
      }
      if (r.count.otherConnections > 0) {
        notes.push(
          `${r.variant}: ${r.count.otherConnections} other client connections were on the server: counts include their statements.`,
        );
      }
    }

    // Runners that took a fire's job lock and asked the pool for a slot (the winner, and each
    // `pool` row written by a lock holder), per fire: 1 would be one ask per fire.
    figures.pool_slot_askers_per_fire = round(
      (pooled.poolRowsAfterLock + pooled.winners) / pooled.fires,
      3,
    );
    figures.pool_rows_per_fire_without_winner = round(
      pooled.poolRowsOfNoWinner / Math.max(1, pooled.noWinner),
      3,
    );
    notes.push(
      `pool: ${pooled.poolRows} \`pool\` rows, ${pooled.poolRowsAfterLock} of them by a runner ` +
        `that held the job's lock and asked the pool itself, ${pooled.poolRowsSeen} by one that ` +
        `skipped on such a row (the fire decided), ` +
        `${pooled.poolRows - pooled.poolRowsAfterLock - pooled.poolRowsSeen} by one that met the ` +
        `lock held until its lock-passing wait gave up; with the ` +
        `${pooled.winners} winners, ${round((pooled.poolRowsAfterLock + pooled.winners) / pooled.fires, 2)} ` +
        `runners per fire took the job's lock and asked for a slot (of ${RUNNERS}); a fire ` +
        `without a winner has ${round(pooled.poolRowsOfNoWinner / Math.max(1, pooled.noWinner), 2)} ` +
        `\`pool\` rows. Winners claimed ${LEAD_MS} ms or more after their instant (after the ` +
        `first asker's lead, src/coordination/first-asker.ts): ${pooled.claimsAfterLead} of ` +
        `${pooled.winners} with the pool, ${plain.claimsAfterLead} of ${plain.winners} without.`,
    );
    // The plain variant: one winner per fire.
    checks.push({
      name: 'nopool: exactly one winner per fire',
      ok: plain.noWinner === 0 && plain.twoWinners === 0,
      detail: `${plain.noWinner} without a winner, ${plain.twoWinners} with two, of ${plain.fires}`,
    });
    // The pool: never more than its slots.
    checks.push(
      {
        name: 'pool: no fire had two winners',
        ok: pooled.twoWinners === 0,
        detail: `${pooled.twoWinners} of ${pooled.fires}`,
      },
      {
        name: `pool: never more than ${SLOTS} runs alive at once (winners' started_at–finished_at)`,
        ok: pooled.alive.most <= SLOTS,
        detail:
          `at most ${pooled.alive.most} alive at once over the variant's ${pooled.aliveWinners} runs` +
          (pooled.openIntervals ? ` (${pooled.openIntervals} never finished, counted alive)` : '') +
          `; without the pool: ${plain.alive.most}`,
      },
      {
        name: 'pool: every fire without a winner was skipped for the pool',
        ok: pooled.noWinnerWithoutPoolRow === 0,
        detail: `${pooled.noWinner} fires without a winner, ${pooled.noWinnerWithoutPoolRow} of them with no \`pool\` row; ${pooled.poolRows} \`pool\` rows`,
      },
      {
        name: 'pool: every `pool` skip row names a holder',
        ok: pooled.poolRows > 0 && pooled.poolRowsNamingHolder === pooled.poolRows,
        detail: `${pooled.poolRowsNamingHolder} of ${pooled.poolRows}; e.g. "${pooled.poolRowExample.slice(0, 220)}"`,
      },
    );
    // Issue 39's goal, reported.
    Object.assign(figures, {
      pool_over_nopool_statements_per_fire_per_runner: round(stmtRatio, 3),
      pool_over_nopool_claim_lag_p99: round(p99Ratio, 3),
      pool_over_nopool_claim_lag_p50: round(pooled.claim.p50 / plain.claim.p50, 3),
      [`pool_over_nopool_first${SLOTS}_claim_lag_p99`]: round(
        pooled.firstClaims.p99 / plain.firstClaims.p99,
        3,
      ),
    });
    table.push({
      variant: 'pool / nopool',
      fires: '',
      'runs/fire': '',
      'no winner': '',
      'stmts/fire/runner': `${round(stmtRatio, 2)}×`,
      'claim p50 / p95 / p99 / max': `${round(pooled.claim.p50 / plain.claim.p50, 2)}× / ${round(pooled.claim.p95 / plain.claim.p95, 2)}× / ${round(p99Ratio, 2)}× / ${round(pooled.claim.max / plain.claim.max, 2)}×`,
      [`first ${SLOTS} claims an instant p50 / p99`]: `${round(pooled.firstClaims.p50 / plain.firstClaims.p50, 2)}× / ${round(pooled.firstClaims.p99 / plain.firstClaims.p99, 2)}×`,
      'most alive': '',
      'pool skips': '',
      'runner CPU': '',
      'server CPU': '',
      load: '',
    });
    checks.push(
      ctx.target(
        `statements per fire per runner, pool / no pool ≤ ${GOAL}× (issue 39's goal)`,
        stmtRatio,
        GOAL + 1e-9,
        '×',
        {
          context: `${round(pooled.perFirePerRunner, 3)} against ${round(plain.perFirePerRunner, 3)}`,
        },
      ),
      ctx.target(
        `claim lag p99, pool / no pool ≤ ${GOAL}× (issue 39's goal)`,
        p99Ratio,
        GOAL + 1e-9,
        '×',
        {
          context: `${pooled.claim.p99} ms (of ${pooled.claim.n} winners) against ${plain.claim.p99} ms (of ${plain.claim.n})`,
        },
      ),
    );
    if (plain.count.breakdown.length && pooled.count.breakdown.length) {
      // What the pool adds (or saves), shape by shape: pool − no pool, per fire per runner.
      const a = shapesPerFire(plain);
      const b = shapesPerFire(pooled);
      const diff = [...new Set([...a.keys(), ...b.keys()])]
        .map((s) => ({ s, a: a.get(s) ?? 0, b: b.get(s) ?? 0 }))
        .map((d) => ({ ...d, d: d.b - d.a }))
        .filter((d) => Math.abs(d.d) >= 0.005)
        .sort((x, y) => Math.abs(y.d) - Math.abs(x.d))
        .slice(0, 16);
      notes.push(
        `What the pool changes (general log), per fire per runner, pool − no pool: ` +
          diff
            .map(
              (d) =>
                `${d.d > 0 ? '+' : ''}${round(d.d, 3)} (${round(d.a, 3)} → ${round(d.b, 3)}) "${d.s}"`,
            )
            .join('; '),
      );
    }
    notes.push(
      `Each variant: a fresh database, ${RUNNERS} runners (\`baton start\`, log level info), ` +
        `${JOBS} jobs \`${EVERY_SECOND}\` running \`true\`; the pool variant adds \`pools: {${POOL}: ` +
        `{slots: ${SLOTS}}}\` and \`pool: ${POOL}\` on every job (poolFull: skip). Window ` +
        `${seconds} s = ${JOBS * seconds} fires per variant, from ${WARMUP_S} s after the reload ` +
        `that made the jobs fire. Statements per fire count every fire, skipped or run. Claim lag ` +
        `is of the winners only: ${plain.claim.n} without the pool, ${pooled.claim.n} with it ` +
        `(nearest-rank p99: with ${pooled.claim.n} samples it is the ` +
        `${Math.ceil(0.99 * pooled.claim.n)}th of ${pooled.claim.n}).`,
      `A slot given back within its instant (a run of \`true\` is over in tens of ms) is taken ` +
        `again by a later claim of the same instant, so the pool has more than ${SLOTS} winners ` +
        `an instant (never more than ${SLOTS} alive) and its later winners' claim lag includes ` +
        `that wait. "First ${SLOTS} claims an instant" is the claim lag of the ${SLOTS} earliest ` +
        `winners of each instant, in both variants: the claims that met free slots.`,
      `This machine has ${os.cpus().length} cores, shared by the runners, their jobs' ` +
        `processes, mariadbd and the harness.`,
    );
    return { figures, table, notes, checks };
  },
} satisfies Scenario;

/**
 * Issue 21, part 2: the cost as the fleet grows. 2, 4, 8 and 16 real `baton start` runners
 * (distinct --host) on one database, 100 cheap command jobs (`true`) every second, measured over
 * a fixed window per size (30 s; quick: sizes 2 and 4, 6 s). Each size gets a fresh database on
 * the bench server (so its history is its own) and its runners are stopped before the next size.
 *
 * Per size, over the window:
 * - claim lag: the winner's `started_at − scheduled_at` (database time, DATETIME(3)), p50/p99;
 * - fires won per runner; fires without a winner and fires with two (the guarantee: must be 0),
 *   both from the history (one GROUP BY over the window's fires), and rows per fire;
 * - statements per second at the server (`Questions` delta, the harness's own subtracted; the
 *   runners' background — heartbeats, registry — included: it is part of what a fleet costs),
 *   and per runner: "at most linear" = per runner per second not growing with the fleet;
 * - server CPU: the private mariadbd's utime + stime delta over the window (% of one core), and
 *   the runners' own CPU;
 * - history growth: after the runners stopped, `ANALYZE TABLE` and information_schema's
 *   data_length + index_length of `baton_runs` over its exact row count = bytes per row (the
 *   table holds only this size's rows), × rows per fire = bytes per fire, × 100 jobs × 86,400 s =
 *   per day; what `retention:` keeps (1d is its minimum) and the skip rows' share of it.
 *
 * Sizes and window: `BENCH_FLEET_SIZES=2,4,8,16` and `BENCH_FLEET_SECONDS=30` in the environment.
 * `BENCH_FLEET_JOBS=handlers` runs library-mode applications (bench/lib/b-library-runner.mjs)
 * instead of `baton start`, their jobs handlers that return at once: the fleet's coordination
 * without a process per run, whose fork costs a 2-core VM 5–15 ms each (100 a second). Recorded
 * as `fleet-scale+handlers`; the kind is the figure `kind`.
 * `BENCH_FLEET_SKIPS=tally` gives every job `skips: tally` (docs/history.md, "Skip tallies"): the
 * history is then `baton_runs` plus `baton_skip_tallies`, both measured (rows, bytes, per day).
 * On a 2-core machine 16 runners plus mariadbd saturate the CPU: the figures say so (load
 * averages at each size's start and end) rather than hide it.
 */
import os from 'node:os';
import type { RowDataPacket } from 'mysql2/promise';
import type {
  BenchContext,
  Check,
  Figure,
  Scenario,
  ScenarioResult,
  TableRow,
} from '../lib/index.js';
import { percentiles, round, sleep } from '../lib/index.js';
import { loadAverages } from '../lib/machine.js';

const JOBS = 100;
const NAMESPACE = 'fleet';
const SETTLE_MS = 5_000;
const DAY_S = 86_400;

interface SizeResult {
  n: number;
  loadStart: string;
  loadEnd: string;
  fires: number;
  claim: ReturnType<typeof percentiles>;
  noWinner: number;
  twoWinners: number;
  rowsPerFire: number;
  missingRows: number;
  wonByHost: Record<string, number>;
  statementsPerS: number;
  com: Record<string, number>;
  serverCpuPct: number;
  runnerCpuPct: number[];
  bytesPerRow: number;
  tableRows: number;
  skipRows: number;
  avgSkipReason: number;
  warnings: string[];
  lostRows: string[];
  /** `skips: tally` only: rows of baton_skip_tallies, the skips they count, their bytes. */
  tally: { rows: number; skips: number; hours: number; bytes: number } | null;
}

type SkipMode = 'rows' | 'tally';
/** What the jobs are: `true` commands (a process per run), or library mode's handlers. */
type JobKind = 'commands' | 'handlers';

function jobKind(): JobKind {
  const v = process.env.BENCH_FLEET_JOBS ?? 'commands';
  if (v !== 'commands' && v !== 'handlers') {
    throw new Error(`BENCH_FLEET_JOBS=${v}: expected commands or handlers`);
  }
  return v;
}

function skipMode(): SkipMode {
  const v = process.env.BENCH_FLEET_SKIPS ?? 'rows';
  if (v !== 'rows' && v !== 'tally') {
    throw new Error(`BENCH_FLEET_SKIPS=${v}: expected rows or tally`);
  }
  return v;
}

const envList = (name: string, fallback: number[]): number[] => {
  const v = process.env[name];
  if (!v) return fallback;
  const xs = v.split(',').map((x) => Number(x.trim()));
  if (xs.some((x) => !Number.isInteger(x) || x < 1)) {
    throw new Error(`${name}=${v}: expected a comma-separated list of whole numbers ≥ 1`);
  }
  return xs;
};

async function measureSize(
  ctx: BenchContext,
  n: number,
  seconds: number,
  skips: SkipMode,
  kind: JobKind,
): Promise<SizeResult> {
  const db = await ctx.createDatabase(`n${n}`);
  const jobs: Record<string, object> = {};
  for (let i = 0; i < JOBS; i++) {
    jobs[`j${String(i).padStart(3, '0')}`] = {
      schedule: '* * * * * *',
      command: ['true'],
      ...(skips === 'tally' ? { skips } : {}),
    };
  }
  const config = ctx.writeSchedule({ namespace: NAMESPACE, jobs });
  const loadStart = loadAverages();
  ctx.log(`${n} runners, ${JOBS} jobs every second; load ${loadStart}`);
  const runners = await ctx.startRunners(n, {
    config,
    databaseUrl: db.url,
    hostPrefix: `f${n}`,
    args: ['--grace', '5'],
    // 100 fires a second on every runner: info lines would be thousands a second to parse.
    logLevel: 'warn',
    keepLines: false,
    readyTimeoutMs: 180_000,
    ...(kind === 'handlers' ? { library: { jobs: JOBS, namespace: NAMESPACE, skips } } : {}),
  });
  await sleep(SETTLE_MS);
  const now = (await db.now()).getTime();
  const fromMs = Math.ceil(now / 1000) * 1000 + 1000;
  const toMs = fromMs + (seconds - 1) * 1000; // the last measured instant
  await sleep(Math.max(0, fromMs - 300 - (await db.now()).getTime()));
  // skips: tally — the skips counted during the window stand for the rows the losers did not
  // write (approximately: a sum before and after, fires of the edges included).
  const tallied = async () =>
    skips === 'tally'
      ? Number(
          (
            await db.query<RowDataPacket>(
              'SELECT COALESCE(SUM(skips), 0) AS s FROM baton_skip_tallies',
            )
          )[0]?.s,
        )
      : 0;
  const talliedBefore = await tallied();
  const counter = await ctx.statements();
  const serverCpu = ctx.server.pid ? ctx.sampleProcess(ctx.server.pid, 1000) : null;
  const runnerCpu = runners.map((r) => ctx.sampleProcess(r.pid, 1000));
  await sleep(Math.max(0, toMs + 700 - (await db.now()).getTime()));
  const count = await counter.stop();
  const server = serverCpu?.stop();
  const cpu = runnerCpu.map((s) => s.stop());
  const loadEnd = loadAverages();
  const range = [NAMESPACE, new Date(fromMs), new Date(toMs)];
  const where = 'namespace = ? AND scheduled_at BETWEEN ? AND ?';
  // The last instant's rows: every runner's, or 20 s (an overloaded fleet lags behind).
  await ctx
    .waitFor(
      'the last instant settled',
      async () => {
        const [r] = await db.query<RowDataPacket>(
          `SELECT COUNT(*) AS n, COALESCE(SUM(status = 'running'), 0) AS running
             FROM baton_runs WHERE namespace = ? AND scheduled_at = ?`,
          [NAMESPACE, new Date(toMs)],
        );
        return Number(r?.n) >= JOBS * n && Number(r?.running) === 0;
      },
      { timeoutMs: 20_000, intervalMs: 250 },
    )
    .catch(() => ctx.log(`${n} runners: the last instant had not every row after 20 s`));
  const talliedInWindow = (await tallied()) - talliedBefore;
  await Promise.all(runners.map((r) => r.stop('SIGTERM', 20_000)));

  const perFire = await db.query<RowDataPacket>(
    `SELECT COALESCE(SUM(winner = 1), 0) AS w, COUNT(*) AS r FROM baton_runs WHERE ${where}
      GROUP BY job, scheduled_at`,
    range,
  );
  const winners = await db.query<RowDataPacket>(
    `SELECT host, TIMESTAMPDIFF(MICROSECOND, scheduled_at, started_at) / 1000 AS lag
       FROM baton_runs WHERE ${where} AND winner = 1`,
    range,
  );
  // The rows of the fires without a winner, by what they say (status, kind, one example).
  const lostRows = await db.query<RowDataPacket>(
    `SELECT r.status, r.reason_kind AS kind, COUNT(*) AS n, MIN(r.reason) AS example
       FROM baton_runs r
       JOIN (SELECT job, scheduled_at FROM baton_runs WHERE ${where}
              GROUP BY job, scheduled_at HAVING COALESCE(SUM(winner = 1), 0) = 0) f
         ON f.job = r.job AND f.scheduled_at = r.scheduled_at
      WHERE r.namespace = ? GROUP BY r.status, r.reason_kind ORDER BY n DESC`,
    [...range, NAMESPACE],
  );
  const fires = JOBS * seconds;
  const withRows = perFire.length;
  const noWinner = fires - withRows + perFire.filter((f) => Number(f.w) === 0).length;
  const twoWinners = perFire.filter((f) => Number(f.w) > 1).length;
  const rowsInWindow = perFire.reduce((s, f) => s + Number(f.r), 0);
  const missingRows = Math.max(
    0,
    perFire.reduce((s, f) => s + Math.max(0, n - Number(f.r)), 0) +
      n * (fires - withRows) -
      talliedInWindow,
  );
  const wonByHost: Record<string, number> = {};
  for (const r of runners) wonByHost[r.host] = 0;
  for (const w of winners) wonByHost[String(w.host)] = (wonByHost[String(w.host)] ?? 0) + 1;

  // History size: the table holds only this fleet's rows (a fresh database).
  await db.query('ANALYZE TABLE baton_runs');
  const [t] = await db.query<RowDataPacket>(
    `SELECT DATA_LENGTH + INDEX_LENGTH AS bytes FROM information_schema.TABLES
      WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'baton_runs'`,
    [db.name],
  );
  const byStatus = await db.query<RowDataPacket>(
    `SELECT status, COUNT(*) AS n, AVG(COALESCE(LENGTH(reason), 0)) AS reason
       FROM baton_runs GROUP BY status`,
  );
  const tableRows = byStatus.reduce((s, r) => s + Number(r.n), 0);
  const skipped = byStatus.find((r) => r.status === 'skipped');
  const warnings = runners.flatMap((r) => r.warnings().map((l) => `${r.host}: ${l.msg}`));
  let tally: SizeResult['tally'] = null;
  if (skips === 'tally') {
    await db.query('ANALYZE TABLE baton_skip_tallies');
    const [c] = await db.query<RowDataPacket>(
      `SELECT COUNT(*) AS n, COALESCE(SUM(skips), 0) AS s, COUNT(DISTINCT period_start) AS h
         FROM baton_skip_tallies`,
    );
    const [b] = await db.query<RowDataPacket>(
      `SELECT DATA_LENGTH + INDEX_LENGTH AS bytes FROM information_schema.TABLES
        WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'baton_skip_tallies'`,
      [db.name],
    );
    tally = {
      rows: Number(c?.n),
      skips: Number(c?.s),
      hours: Number(c?.h),
      bytes: Number(b?.bytes),
    };
  }
  await db.drop();
  return {
    n,
    loadStart,
    loadEnd,
    fires,
    claim: percentiles(winners.map((w) => Number(w.lag))),
    noWinner,
    twoWinners,
    rowsPerFire: withRows ? rowsInWindow / withRows : NaN,
    missingRows,
    wonByHost,
    statementsPerS: count.statements / count.seconds,
    com: count.com,
    serverCpuPct: server?.cpuPercent ?? NaN,
    runnerCpuPct: cpu.map((c) => c.cpuPercent),
    bytesPerRow: tableRows ? Number(t?.bytes) / tableRows : NaN,
    tableRows,
    skipRows: Number(skipped?.n ?? 0),
    avgSkipReason: Number(skipped?.reason ?? 0),
    warnings,
    tally,
    lostRows: lostRows.map(
      (r) =>
        `${Number(r.n)}× ${String(r.status)}/${String(r.kind ?? '-')} (e.g. "${String(r.example ?? '').slice(0, 160)}")`,
    ),
  };
}

const gib = (bytes: number) => round(bytes / 2 ** 30, 2);

export default {
  name: 'fleet-scale',
  title: `Fleet scale: 2–16 runners on one database, ${JOBS} jobs every second`,
  variant: () =>
    [jobKind() === 'handlers' ? 'handlers' : null, skipMode() === 'tally' ? 'tally' : null]
      .filter(Boolean)
      .join('+') || null,
  async run(ctx: BenchContext): Promise<ScenarioResult> {
    const sizes = envList('BENCH_FLEET_SIZES', ctx.quick ? [2, 4] : [2, 4, 8, 16]);
    const seconds = envList('BENCH_FLEET_SECONDS', [ctx.quick ? 6 : 30])[0]!;
    const skips = skipMode();
    const kind = jobKind();
    const results: SizeResult[] = [];
    for (const n of sizes) results.push(await measureSize(ctx, n, seconds, skips, kind));

    const table: TableRow[] = [];
    const figures: Record<string, Figure> = { jobs: JOBS, window_s: seconds, skips, kind };
    const checks: Check[] = [];
    const notes: string[] = [];
    const base = results[0]!;
    const basePerRunner = base.statementsPerS / base.n;
    for (const r of results) {
      const won = Object.values(r.wonByHost);
      // Tallies: the same keys come back every hour, so a day is 24 × the rows of an hour.
      const tallyRowsPerDay = r.tally ? (r.tally.rows / Math.max(1, r.tally.hours)) * 24 : 0;
      const tallyBytesPerRow = r.tally?.rows ? r.tally.bytes / r.tally.rows : 0;
      const tallyPerDay = tallyRowsPerDay * tallyBytesPerRow;
      const rowsPerDay = r.rowsPerFire * r.bytesPerRow * JOBS * DAY_S;
      const perDayBytes = rowsPerDay + tallyPerDay;
      const skipShare = r.tableRows ? r.skipRows / r.tableRows : NaN;
      const runsPerDay = rowsPerDay * (1 - skipShare);
      const skipsPerDay = rowsPerDay * skipShare + tallyPerDay;
      const meanRunnerCpu = r.runnerCpuPct.reduce((s, x) => s + x, 0) / r.runnerCpuPct.length;
      table.push({
        runners: r.n,
        'claim p50 / p99': `${round(r.claim.p50, 0)} / ${round(r.claim.p99, 0)} ms`,
        'no winner / two': `${r.noWinner} / ${r.twoWinners} of ${r.fires}`,
        'won per runner min–max': `${Math.min(...won)}–${Math.max(...won)}`,
        'stmts/s (per runner)': `${round(r.statementsPerS, 0)} (${round(r.statementsPerS / r.n, 0)})`,
        'server CPU': `${round(r.serverCpuPct, 0)} %`,
        'runner CPU mean': `${round(meanRunnerCpu, 0)} %`,
        'rows/fire, B/row': `${round(r.rowsPerFire, 2)}, ${round(r.bytesPerRow, 0)}`,
        'GiB/day (skips %)': `${gib(perDayBytes)} (${round(skipShare * 100, 0)} %)`,
        'load start → end': `${r.loadStart} → ${r.loadEnd}`,
      });
      const p = `n${r.n}_`;
      Object.assign(figures, {
        [`${p}claim_lag_p50_ms`]: round(r.claim.p50, 1),
        [`${p}claim_lag_p99_ms`]: round(r.claim.p99, 1),
        [`${p}claim_lag_max_ms`]: round(r.claim.max, 1),
        [`${p}fires`]: r.fires,
        [`${p}fires_no_winner`]: r.noWinner,
        [`${p}fires_two_winners`]: r.twoWinners,
        [`${p}rows_missing`]: r.missingRows,
        [`${p}rows_written_pct`]: round(100 - (100 * r.missingRows) / (r.fires * r.n), 1),
        [`${p}won_per_runner_min`]: Math.min(...won),
        [`${p}won_per_runner_max`]: Math.max(...won),
        [`${p}statements_per_s`]: round(r.statementsPerS, 1),
        [`${p}statements_per_runner_per_s`]: round(r.statementsPerS / r.n, 1),
        [`${p}statements_per_fire`]: round(r.statementsPerS / JOBS, 2),
        [`${p}server_cpu_pct`]: round(r.serverCpuPct, 1),
        [`${p}runner_cpu_mean_pct`]: round(meanRunnerCpu, 1),
        [`${p}rows_per_fire`]: round(r.rowsPerFire, 2),
        [`${p}bytes_per_row`]: round(r.bytesPerRow, 0),
        [`${p}bytes_per_fire`]: round(r.rowsPerFire * r.bytesPerRow, 0),
        [`${p}history_gib_per_day`]: gib(perDayBytes),
        [`${p}rows_per_day`]: Math.round(r.rowsPerFire * JOBS * DAY_S),
        [`${p}skip_rows_pct`]: round(skipShare * 100, 1),
        [`${p}kept_gib_retention_1d`]: gib(perDayBytes),
        [`${p}kept_gib_retention_7d`]: gib(perDayBytes * 7),
        [`${p}kept_gib_retention_30d`]: gib(perDayBytes * 30),
        [`${p}kept_gib_runs_30d_skips_1d`]: gib(runsPerDay * 30 + skipsPerDay),
        [`${p}load_start`]: r.loadStart,
        [`${p}load_end`]: r.loadEnd,
        [`${p}won_by_runner`]: JSON.stringify(r.wonByHost),
        ...(r.tally
          ? {
              [`${p}tally_rows`]: r.tally.rows,
              [`${p}tallied_skips`]: r.tally.skips,
              [`${p}tally_bytes_per_row`]: round(tallyBytesPerRow, 0),
              [`${p}tally_rows_per_day`]: Math.round(tallyRowsPerDay),
              [`${p}tally_mib_per_day`]: round(tallyPerDay / 2 ** 20, 2),
              // The compact form's rows per fire: baton_runs rows plus tally rows per fire.
              [`${p}history_rows_per_fire`]: round(
                r.rowsPerFire + tallyRowsPerDay / (JOBS * DAY_S),
                4,
              ),
            }
          : {}),
      });
      if (r.tally) {
        notes.push(
          `${r.n} runners, skips: tally: ${r.tally.rows} tally rows (${r.tally.hours} hour(s)) counting ${r.tally.skips} skips, ${round(tallyBytesPerRow, 0)} B a row (InnoDB pages: a small table's bytes per row are high); ~${Math.round(tallyRowsPerDay)} tally rows a day for ${JOBS} jobs; baton_runs ${round(r.rowsPerFire, 2)} rows per fire.`,
        );
      }
      checks.push({
        name: `${r.n} runners: no fire without a winner, none with two (by the history)`,
        ok: r.noWinner === 0 && r.twoWinners === 0,
        detail: `${r.noWinner} without a winner, ${r.twoWinners} with two, of ${r.fires} fires; ${r.missingRows} runner rows missing (load ${r.loadStart} → ${r.loadEnd})`,
      });
      if (r.n > base.n) {
        const growth = r.statementsPerS / r.n / basePerRunner;
        checks.push({
          name: `${r.n} runners: statements grow at most linearly (per runner ≤ 1.1 × at ${base.n})`,
          ok: growth <= 1.1,
          detail:
            `${round(r.statementsPerS / r.n, 1)} per runner per s against ${round(basePerRunner, 1)} at ${base.n} runners (${round(growth, 2)}×); total ${round(r.statementsPerS, 0)}/s` +
            // A fleet that falls behind sends fewer statements: the figure then says nothing.
            (r.missingRows > 0
              ? `; NOT CONCLUSIVE: ${r.missingRows} of ${r.fires * r.n} runner rows of the window were never written (the fleet fell behind)`
              : ''),
        });
      }
      const coms = Object.entries(r.com)
        .filter(([k]) => k !== 'Com_show_status')
        .sort((a, b) => b[1] - a[1])
        .slice(0, 6)
        .map(
          ([k, v]) =>
            `${k.replace(/^Com_/, '')} ${round(v / ((seconds * 1000 + 1000) / 1000) / r.n, 1)}`,
        );
      notes.push(
        `${r.n} runners: per runner per second by command (approx.): ${coms.join(', ')}; fires won per runner ${JSON.stringify(r.wonByHost)}; skip rows' reason ${round(r.avgSkipReason, 0)} chars on average; ${r.tableRows} rows in the table at the end (warm-up and tail included).`,
      );
      if (r.lostRows.length) {
        notes.push(
          `${r.n} runners: the rows of the ${r.noWinner} fires without a winner: ${r.lostRows.join('; ')}.`,
        );
      }
      if (r.warnings.length) {
        const groups = new Map<string, number>();
        for (const w of r.warnings) {
          const msg = w.replace(/^[^:]+: /, '');
          groups.set(msg, (groups.get(msg) ?? 0) + 1);
        }
        notes.push(
          `${r.n} runners logged ${r.warnings.length} warnings/errors: ${[...groups.entries()]
            .map(([m, c]) => `${c}× "${m}"`)
            .slice(0, 6)
            .join('; ')}.`,
        );
      }
    }
    const largest = results.at(-1)!;
    checks.push(
      ctx.target(`claim lag p99 ≤ 25 ms at ${largest.n} runners`, largest.claim.p99, 25.001, 'ms', {
        context: `load ${largest.loadStart} → ${largest.loadEnd} on ${ctx.server.private ? 'a private' : 'the shared'} server`,
      }),
    );
    notes.push(
      `Each size on a fresh database; window ${seconds} s (${JOBS * seconds} fires) after the runners registered and ${SETTLE_MS / 1000} s settled. Statements: SHOW GLOBAL STATUS Questions delta over the window, the harness's own subtracted; the runners' background (heartbeats, registry, reaper) included.`,
      `History: bytes per row = (data_length + index_length) of baton_runs after ANALYZE TABLE over its exact row count; per day = rows per fire × bytes per row × ${JOBS} jobs × 86,400 fires; retention keeps ~that many days (1d is the smallest retention: allowed); "runs 30d, skips 1d" = retention: { runs: 30d, skips: 1d }.`,
      `This machine has ${os.cpus().length} cores, shared by every runner of every size, mariadbd, the harness and whatever else runs on it (the load averages say how much): the larger sizes saturate them and measure an overloaded machine, not a fleet of ${largest.n} servers, where each runner would have a host of its own.`,
    );
    return { figures, table, notes, checks };
  },
} satisfies Scenario;

/**
 * The bench harness's contract: what a scenario is, and the `ctx` it gets.
 *
 * A scenario is `bench/scenarios/<name>.ts`:
 *
 *   import type { Scenario } from '../lib/index.js';
 *   export default {
 *     name: 'fire-lag',                 // = the file name; `--only fire-lag` selects it
 *     title: 'Fire lag: 3 runners, one every-second job',
 *     async run(ctx) { ...; return { figures, table, notes, checks }; },
 *   } satisfies Scenario;
 *
 * `run(ctx)` returns a ScenarioResult:
 *   figures  Record<string, number | string>: the numbers worth comparing between two runs
 *            (flat keys, units in the name: `claim_lag_p99_ms`, `rss_peak_mib`, `cpu_pct`).
 *   table    rows (objects; columns = their keys) printed under the scenario's title.
 *   notes    sentences printed after the table and stored: what was measured and how, causes.
 *   checks   { name, ok, detail }: guarantees (one winner per fire) and targets (p99 < 10 ms).
 *            A failed check is printed loudly; the run goes on. Never throw for a missed target.
 * A scenario that throws is recorded with a failed check `scenario completed` and its error.
 *
 * `ctx` (BenchContext):
 *   ctx.quick                 true under `--quick`: shrink the work (a smoke run of seconds).
 *   ctx.pressure              'io' under `--pressure io` (only for a scenario that declares
 *                             `pressure: true`: it runs with a disk writer beside it), else null.
 *   ctx.log(...args)          progress lines on stderr, prefixed with the scenario's name.
 *   ctx.db                    a fresh database on the bench server, dropped after the scenario:
 *                             .name, .url (baton's --database-url), .serverUrl, .conn (mysql2,
 *                             UTC), .query(sql, params) → rows, .now() → NOW(3) as a Date.
 *                             Statements sent through ctx.db are not counted by ctx.statements.
 *   ctx.server                { url, private, version, settings, pid } of the server (pid: the
 *                             private mariadbd's, for ctx.sampleProcess).
 *   ctx.createDatabase(label) another fresh database on the same server, also dropped at the end.
 *   ctx.writeSchedule(yamlOrObject, files?)  → the path of a schedules.yaml in a temp folder
 *                             (files: name → text written beside it, e.g. job modules).
 *   ctx.startRunners(n, { config, databaseUrl?, hostPrefix?, args?, env?, logLevel?,
 *                    keepLines?, readyTimeoutMs?, probe? })
 *                             → BenchRunner[]: n real `baton start` processes (hosts
 *                             `<prefix>-1..n`), resolved once each has registered. They are
 *                             stopped (SIGTERM, then SIGKILL) when the scenario ends. A
 *                             BenchRunner has .host, .pid, .lines (parsed JSON log lines),
 *                             .stderr, .waitForLog(msg, where?, timeoutMs?), .warnings(),
 *                             .errors(), .stop(signal?, timeoutMs?), and with `probe: true`
 *                             (a preload via NODE_OPTIONS) .probe(fromMs, toMs) → { spawns,
 *                             spawnMs (event loop blocked inside spawn()), maxDelayMs (longest
 *                             event-loop delay), coveredMs } between two host instants.
 *   ctx.waitFor(what, check, { timeoutMs, intervalMs })  polls until check() is truthy.
 *   ctx.sleep(ms)
 *   ctx.waitForRows(sql, params, count, timeoutMs?)  polls until the query returns >= count rows
 *                             (or its first row's `n` column is >= count); returns the rows.
 *   ctx.statements()          starts a statement counter on the server (SHOW GLOBAL STATUS
 *                             'Questions' and 'Com_%' deltas, the harness's own statements
 *                             subtracted): `const c = await ctx.statements(); ...;
 *                             const { statements, seconds, com, breakdown } = await c.stop();`
 *                             (breakdown: statements by shape, only under --general-log)
 *   ctx.sampleProcess(pid, intervalMs?)  → { stop(): { rssPeakMiB, rssEndMiB, hwmMiB,
 *                             cpuPercent, cpuSeconds, seconds, … } } from /proc.
 *   ctx.readProc(pid)         one /proc reading (rssKiB, hwmKiB, cpuSeconds, threads).
 *   ctx.floors()              → Floors { rtt, commit, spawn, spawnExit } distributions (ms),
 *                             measured now on ctx.db (cached for the run: measured once).
 *   ctx.percentiles(values)   → { n, min, p50, p95, p99, max, mean } (nearest rank).
 *   ctx.target(name, value, limit, unit, { lowerIsBetter = true, context? })
 *                             → a Check "value < limit" whose detail says by how much it missed.
 *   ctx.onCleanup(fn)         runs after the scenario (before the database is dropped).
 *
 * Also exported for scenarios: percentiles, round, distFigures, distRow, waitFor, sleep,
 * ROOT, BATON_BIN, cleanEnv (the environment without BATON_*), readProc, sampleProcess,
 * summarizeWarnings(runners) (their warnings and errors grouped by message, with an example),
 * makeTempDir(prefix?) (a temp folder removed when the scenario ends).
 */
import type { ProcSampler, ProcSnapshot } from './proc.js';
import type { BenchDatabase, BenchServer, StatementCounter } from './database.js';
import type { BenchRunner, StartRunnersOptions } from './runners.js';
import type { Floors } from './floors.js';
import type { Distribution } from './stats.js';

export { percentiles, round, distFigures, distRow, type Distribution } from './stats.js';
export { waitFor, sleep } from './wait.js';
export {
  ROOT,
  BATON_BIN,
  cleanEnv,
  makeTempDir,
  reloadSchedule,
  summarizeWarnings,
  type BenchRunner,
  type ProbeSummary,
  type LogLine,
} from './runners.js';
export { readProc, sampleProcess, type ProcUsage } from './proc.js';
export type { Floors } from './floors.js';
export type { BenchDatabase, BenchServer, StatementCount } from './database.js';

export type Figure = number | string;
export type TableRow = Record<string, string | number>;

export interface Check {
  name: string;
  ok: boolean;
  detail: string;
}

export interface ScenarioResult {
  figures: Record<string, Figure>;
  table: TableRow[];
  notes: string[];
  checks: Check[];
}

export interface Scenario {
  name: string;
  title: string;
  /** It has a `--pressure io` variant (recorded as `<name>+io`). */
  pressure?: boolean;
  /**
   * The variant its environment selects (e.g. fleet-scale's `BENCH_FLEET_SKIPS=tally`), if not
   * the default: recorded as `<name>+<variant>`, so that it never replaces the default's figures
   * in latest.json and `--compare` lines it up with the same variant only.
   */
  variant?: () => string | null;
  run(ctx: BenchContext): Promise<ScenarioResult>;
}

export interface BenchContext {
  readonly name: string;
  readonly quick: boolean;
  readonly pressure: 'io' | null;
  log(...args: unknown[]): void;
  readonly db: BenchDatabase;
  readonly server: BenchServer;
  createDatabase(label: string): Promise<BenchDatabase>;
  writeSchedule(schedule: string | object, files?: Record<string, string>): string;
  startRunners(
    n: number,
    options: Omit<StartRunnersOptions, 'databaseUrl'> & { databaseUrl?: string },
  ): Promise<BenchRunner[]>;
  waitFor<T>(
    what: string,
    check: () => T | Promise<T>,
    options?: { timeoutMs?: number; intervalMs?: number },
  ): Promise<NonNullable<T>>;
  sleep(ms: number): Promise<void>;
  waitForRows<T = Record<string, unknown>>(
    sql: string,
    params: unknown[],
    count: number,
    timeoutMs?: number,
  ): Promise<T[]>;
  statements(): Promise<StatementCounter>;
  sampleProcess(pid: number, intervalMs?: number): ProcSampler;
  readProc(pid: number): ProcSnapshot;
  floors(): Promise<Floors>;
  percentiles(values: readonly number[]): Distribution;
  target(
    name: string,
    value: number,
    limit: number,
    unit: string,
    options?: { lowerIsBetter?: boolean; context?: string },
  ): Check;
  onCleanup(fn: () => unknown): void;
}

/**
 * A target as a check: `value < limit` (or `>` when higher is better), with a detail that says
 * by how much it was met or missed. Never throws.
 */
export function target(
  name: string,
  value: number,
  limit: number,
  unit: string,
  { lowerIsBetter = true, context }: { lowerIsBetter?: boolean; context?: string } = {},
): Check {
  const fmt = (v: number) => `${Math.round(v * 100) / 100}${unit ? ` ${unit}` : ''}`;
  const ok = Number.isFinite(value) && (lowerIsBetter ? value < limit : value > limit);
  const rel = ((value - limit) / limit) * 100;
  const by = Number.isFinite(value)
    ? ok
      ? `met (${fmt(value)} ${lowerIsBetter ? '<' : '>'} ${fmt(limit)})`
      : `MISSED by ${fmt(Math.abs(value - limit))} (${fmt(value)} vs target ${lowerIsBetter ? '<' : '>'} ${fmt(limit)}, ${rel > 0 ? '+' : ''}${Math.round(rel)} %)`
    : `no value (target ${fmt(limit)})`;
  return { name, ok, detail: context ? `${by}; ${context}` : by };
}

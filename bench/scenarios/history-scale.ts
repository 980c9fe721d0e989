/**
 * Scenario 5 of issue 7, history at scale: `baton history`, `baton explain` and `baton status`
 * over 1,000,000 rows of `baton_runs` (quick: 100,000), each under 50 ms of server time, with the
 * query plans printed (an index used, no full scan).
 *
 * The history is generated in the database (INSERT … SELECT from a numbers table), in time order
 * as a fleet writes it (ids rise with time), after `baton migrate` made the schema:
 * 3 namespaces (prod and staging with 50 jobs each, dev with 10), jobs every 10 s, every minute,
 * every 5 minutes, hourly and daily, 3 hosts; each fire has its winner (done, mostly; some
 * failed, timeout, lost, interrupted, retried) and two `skipped` rows, a few fires are `missed`
 * (one row), some are catch-up or manual runs (one row). The span of days is what makes the total.
 *
 * Each command is run as a real CLI process twice: once with a preload (b-sql-capture.ts) that
 * records every statement it sends, once plain for its wall clock (the median of 3, next to the
 * `node dist/cli/main.js --version` floor of starting Node and loading the CLI). Every captured
 * SELECT is then run under MariaDB's `ANALYZE FORMAT=JSON` (the median of 3 runs): server time
 * (optimisation + execution), rows really read, and the plan. "Server time" of a command = the
 * sum over its statements.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import mysql, { type RowDataPacket } from 'mysql2/promise';
import type { BenchContext, Check, Scenario, ScenarioResult, TableRow } from '../lib/index.js';
import { BATON_BIN, cleanEnv, round } from '../lib/index.js';
import { analyze, shapeOf, type StatementCost } from '../lib/b-analyze.js';
import { loadConfig } from '../../dist/config/load.js';
import { jobFingerprint } from '../../dist/config/fingerprint.js';
import { plantRunsFrom } from '../../test/helpers/db.js';

const HOSTS = ['batch-01', 'batch-02', 'batch-03'];

const JOB_NAMES = [
  'poll-inbox',
  'sync-orders',
  'refresh-prices',
  'push-notifications',
  'sync-inventory',
  'expire-sessions',
  'collect-metrics',
  'retry-webhooks',
  'match-payments',
  'update-rankings',
  'export-events',
  'import-partners',
  'rebuild-search',
  'send-digests',
  'clean-tmp',
  'rotate-tokens',
  'check-fraud',
  'score-leads',
  'sync-crm',
  'refresh-cache',
  'compact-logs',
  'reprice-offers',
  'sync-catalog',
  'mail-bounces',
  'reconcile-stock',
  'archive-chats',
  'sync-ads',
  'fetch-rates',
  'warm-thumbnails',
  'verify-backups',
  'hourly-report',
  'settle-hourly',
  'aggregate-clicks',
  'refresh-views',
  'purge-carts',
  'sync-ledger',
  'audit-access',
  'calc-quotas',
  'rollup-usage',
  'refresh-geo',
  'sync-suppliers',
  'rebuild-sitemap',
  'dedupe-contacts',
  'score-churn',
  'bill-usage',
  'settle',
  'reward',
  'daily-report',
  'backup-db',
  'vacuum-archive',
];

interface JobShape {
  name: string;
  periodS: number;
  /** A 5- or 6-field cron expression that fires on the generated instants. */
  cron: string;
  /** Phase of the fires within the period (the daily jobs run at 03:00 UTC). */
  phaseS: number;
  durMs: number;
}

function shapeOfJob(i: number): JobShape {
  const name = JOB_NAMES[i]!;
  if (i === 0) return { name, periodS: 10, cron: '*/10 * * * * *', phaseS: 0, durMs: 200 };
  if (i < 10) return { name, periodS: 60, cron: '* * * * *', phaseS: 0, durMs: 2_000 };
  if (i < 30) return { name, periodS: 300, cron: '*/5 * * * *', phaseS: 0, durMs: 8_000 };
  if (i < 45) return { name, periodS: 3600, cron: '0 * * * *', phaseS: 0, durMs: 60_000 };
  return { name, periodS: 86_400, cron: '0 3 * * *', phaseS: 3 * 3600, durMs: 900_000 };
}

const JOBS = JOB_NAMES.map((_, i) => shapeOfJob(i));
const NAMESPACES: Array<{ ns: string; jobs: JobShape[] }> = [
  { ns: 'prod', jobs: JOBS },
  { ns: 'staging', jobs: JOBS },
  { ns: 'dev', jobs: JOBS.slice(0, 10) },
];

/** Rows per fire on average: 3, less the one-row fires (missed 0.3 %, catch-up 0.2 %, manual 0.5 %). */
const ROWS_PER_FIRE = 3 - 2 * 0.01;

/** The winner row's columns, from `h` (a per-fire pseudo-random 0..999) and the job's duration. */
const WINNER_STATUS = `CASE WHEN f.h < 3 THEN 'missed' WHEN f.h < 30 THEN 'failed'
  WHEN f.h < 35 THEN 'timeout' WHEN f.h < 37 THEN 'lost' WHEN f.h < 39 THEN 'interrupted'
  ELSE 'done' END`;

/** The columns of a chunk of the history, in the order CHUNK_SELECT yields them. */
const CHUNK_FIELDS = [
  'namespace',
  'job',
  'scheduledAt',
  'winner',
  'trigger',
  'status',
  'reason',
  'host',
  'pid',
  'lockConnectionId',
  'startedAt',
  'finishedAt',
  'exitCode',
  'attempts',
  'error',
  'outputTail',
] as const;

/**
 * One chunk of the history: every fire of every job in [from, to), in time order. `h` is a
 * pseudo-random 0..999 per fire that decides its outcome, its hosts and its timings.
 */
const CHUNK_SELECT = `SELECT f.ns, f.job, f.at,
    CASE WHEN k.r > 0 THEN NULL WHEN f.h < 3 THEN 0 ELSE 1 END,
    CASE WHEN k.r > 0 THEN 'schedule' WHEN f.h BETWEEN 60 AND 61 THEN 'catchup'
         WHEN f.h >= 995 THEN 'manual' ELSE 'schedule' END,
    CASE WHEN k.r > 0 THEN 'skipped' ELSE ${WINNER_STATUS} END,
    CASE WHEN k.r = 0 AND f.h < 3 THEN 'no runner attempted this fire'
         WHEN k.r = 0 THEN NULL
         WHEN f.h MOD 4 = 0 THEN CONCAT('an earlier run is still running on ', f.host)
         ELSE CONCAT('already ran on ', f.host) END,
    CASE WHEN k.r = 0 THEN f.host ELSE ELT(1 + (f.h + k.r) MOD 3, ?, ?, ?) END,
    1000 + (f.h * 37 + k.r) MOD 60000,
    CASE WHEN k.r = 0 AND f.h >= 3 THEN 100 + f.h MOD 3 ELSE NULL END,
    f.at + INTERVAL ((5 + f.h MOD 20 + k.r * 3) * 1000) MICROSECOND,
    CASE WHEN k.r > 0 OR f.h < 3 THEN f.at + INTERVAL ((5 + f.h MOD 20 + k.r * 3) * 1000) MICROSECOND
         ELSE f.at + INTERVAL ((5 + f.h MOD 20 + f.dur_ms * (1 + f.h MOD 10) DIV 5) * 1000) MICROSECOND END,
    CASE WHEN k.r > 0 OR f.h < 3 THEN NULL WHEN f.h < 30 THEN 1 WHEN f.h < 39 THEN NULL ELSE 0 END,
    CASE WHEN k.r > 0 OR f.h < 3 THEN 0 WHEN f.h < 30 THEN 1 + f.h MOD 3 WHEN f.h < 60 THEN 2 ELSE 1 END,
    CASE WHEN k.r > 0 OR f.h < 3 OR f.h >= 39 THEN NULL WHEN f.h < 30 THEN 'exit code 1'
         WHEN f.h < 35 THEN 'timed out after 30s' WHEN f.h < 37 THEN 'the runner is gone'
         ELSE 'stopped by SIGTERM' END,
    CASE WHEN k.r = 0 AND f.h >= 3 THEN CONCAT('processed ', f.h * 13, ' rows\\n') ELSE NULL END
  FROM (
    SELECT g.ns, g.job, g.dur_ms, g.h, ELT(1 + g.h MOD 3, ?, ?, ?) AS host,
           IF(g.h >= 995, g.grid + INTERVAL 7500000 MICROSECOND, g.grid) AS at
      FROM (
        SELECT j.ns, j.job, j.dur_ms, (n.n * 2654435761 + j.salt) MOD 1000 AS h,
               j.first_at + INTERVAL (n.n * j.period_s) SECOND AS grid
          FROM bench_jobs j
          JOIN bench_n n
            ON n.n >= GREATEST(0, CEIL(TIMESTAMPDIFF(SECOND, j.first_at, ?) / j.period_s))
           AND n.n < LEAST(j.fires, CEIL(TIMESTAMPDIFF(SECOND, j.first_at, ?) / j.period_s))
      ) g
  ) f
  CROSS JOIN (SELECT 0 AS r UNION ALL SELECT 1 UNION ALL SELECT 2) k
  WHERE k.r = 0 OR f.h BETWEEN 3 AND 59 OR f.h BETWEEN 62 AND 994
  ORDER BY f.at, f.ns, f.job, k.r`;

interface Command {
  key: string;
  label: string;
  args: string[];
  /** Counted against the 50 ms target. */
  target: boolean;
}

interface CommandResult {
  command: Command;
  statements: StatementCost[];
  serverMs: number;
  slowest: StatementCost;
  rowsRead: number;
  wallMs: number;
  exitCode: number | null;
}

function runCli(
  args: string[],
  {
    cwd,
    env = {},
    preload = [],
  }: { cwd: string; env?: Record<string, string>; preload?: string[] },
): Promise<{ code: number | null; ms: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const t = process.hrtime.bigint();
    const child = spawn(
      process.execPath,
      [...preload.flatMap((p) => ['--import', p]), BATON_BIN, ...args],
      { cwd, env: cleanEnv(env), stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) =>
      resolve({ code, ms: Number(process.hrtime.bigint() - t) / 1e6, stdout, stderr }),
    );
  });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

export default {
  name: 'history-scale',
  title: 'History at scale: history / explain / status over 1,000,000 baton_runs rows',
  async run(ctx: BenchContext): Promise<ScenarioResult> {
    const targetRows = ctx.quick ? 100_000 : 1_000_000;
    const figures: ScenarioResult['figures'] = {};
    const table: TableRow[] = [];
    const checks: Check[] = [];
    const notes: string[] = [];
    const work = mkdtempSync(path.join(os.tmpdir(), 'baton-bench-history-'));
    ctx.onCleanup(() => rmSync(work, { recursive: true, force: true }));
    const tsx = import.meta.resolve('tsx');
    const capture = import.meta.resolve('../lib/b-sql-capture.ts');

    // --- schema, by the CLI itself
    const migrate = await runCli(['migrate', '--database-url', ctx.db.url], { cwd: work });
    if (migrate.code !== 0) throw new Error(`baton migrate failed: ${migrate.stderr}`);

    // --- the fleet's history
    const [{ now }] = (await ctx.db.query<{ now: Date }>('SELECT NOW(3) AS now')) as [
      { now: Date },
    ];
    const firesPerSecond = NAMESPACES.reduce(
      (s, n) => s + n.jobs.reduce((t, j) => t + 1 / j.periodS, 0),
      0,
    );
    const spanS = Math.ceil(targetRows / ROWS_PER_FIRE / firesPerSecond);
    await ctx.db.query(`CREATE TABLE bench_jobs (
      ns VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
      job VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
      period_s INT NOT NULL, fires INT NOT NULL, first_at DATETIME(3) NOT NULL,
      dur_ms INT NOT NULL, salt INT NOT NULL, PRIMARY KEY (ns, job)) ENGINE=InnoDB`);
    const jobRows: unknown[][] = [];
    let maxFires = 0;
    let salt = 0;
    for (const { ns, jobs } of NAMESPACES) {
      for (const j of jobs) {
        const nowS = Math.floor(now.getTime() / 1000);
        const lastS = Math.floor((nowS - j.phaseS) / j.periodS) * j.periodS + j.phaseS;
        const fires = Math.max(1, Math.floor(spanS / j.periodS));
        maxFires = Math.max(maxFires, fires);
        const first = new Date((lastS - (fires - 1) * j.periodS) * 1000);
        jobRows.push([ns, j.name, j.periodS, fires, first, j.durMs, (salt += 7919)]);
      }
    }
    await ctx.db.query(
      'INSERT INTO bench_jobs (ns, job, period_s, fires, first_at, dur_ms, salt) VALUES ?',
      [jobRows],
    );
    await ctx.db.query('CREATE TABLE bench_n (n INT NOT NULL PRIMARY KEY) ENGINE=InnoDB');
    await ctx.db.query(
      `INSERT INTO bench_n (n)
       WITH RECURSIVE d(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM d WHERE i < 99)
       SELECT a.i * 10000 + b.i * 100 + c.i FROM d a, d b, d c WHERE a.i * 10000 + b.i * 100 + c.i < ?`,
      [maxFires],
    );
    const chunks = ctx.quick ? 4 : 20;
    const start = new Date(now.getTime() - (spanS + 86_400) * 1000);
    const end = new Date(now.getTime() + 1000);
    const step = Math.ceil((end.getTime() - start.getTime()) / chunks);
    const genStarted = performance.now();
    for (let c = 0; c < chunks; c++) {
      const from = new Date(start.getTime() + c * step);
      const to = new Date(Math.min(end.getTime(), from.getTime() + step));
      await plantRunsFrom(ctx.db, CHUNK_FIELDS, CHUNK_SELECT, [...HOSTS, ...HOSTS, from, to]);
      if (c % 5 === 4) ctx.log(`history: chunk ${c + 1}/${chunks}`);
    }
    // Two runs in progress right now (the latest fires of two prod jobs), as `status` shows them.
    await ctx.db.query(
      `UPDATE baton_runs r JOIN (SELECT namespace, job, MAX(scheduled_at) AS at FROM baton_runs
          WHERE namespace = 'prod' AND job IN (?, ?) AND winner = 1 GROUP BY namespace, job) l
          ON r.namespace = l.namespace AND r.job = l.job AND r.scheduled_at = l.at AND r.winner = 1
        SET r.status = 'running', r.finished_at = NULL, r.exit_code = NULL, r.error = NULL`,
      [JOBS[1]!.name, JOBS[30]!.name],
    );
    await ctx.db.query('ANALYZE TABLE baton_runs');
    const genSeconds = (performance.now() - genStarted) / 1000;
    const [counted] = await ctx.db.query<RowDataPacket>('SELECT COUNT(*) AS n FROM baton_runs');
    const totalRows = Number(counted?.n);
    const [size] = await ctx.db.query<RowDataPacket>(
      `SELECT data_length + index_length AS bytes FROM information_schema.TABLES
        WHERE table_schema = DATABASE() AND table_name = 'baton_runs'`,
    );
    ctx.log(`history: ${totalRows} rows in ${round(genSeconds, 1)} s`);
    figures.rows = totalRows;
    figures.span_days = round(spanS / 86_400, 2);
    figures.generate_s = round(genSeconds, 1);
    figures.table_mib = round(Number(size?.bytes) / 2 ** 20, 1);

    // --- the runner registry of prod and a schedules file for it (what `status` reads)
    const schedule = {
      namespace: 'prod',
      jobs: Object.fromEntries(JOBS.map((j) => [j.name, { schedule: j.cron, command: ['true'] }])),
    };
    const configFile = ctx.writeSchedule(schedule);
    const config = loadConfig(configFile, { connectionVariables: 'ignore' });
    const since = new Date(now.getTime() - spanS * 1000).toISOString();
    const loaded = Object.fromEntries(
      config.jobs.map((j) => [j.name, { fp: jobFingerprint(j, config.file), since }]),
    );
    for (const [i, host] of HOSTS.entries()) {
      await ctx.db.query(
        `INSERT INTO baton_runners (namespace, host, pid, version, started_at, last_seen_at,
           clock_offset_ms, lock_connection_id, schedule)
         VALUES ('prod', ?, ?, '0.1.0', NOW(3) - INTERVAL 3 DAY, NOW(3), ?, NULL, ?)`,
        [host, 4000 + i, i * 3 - 3, JSON.stringify(loaded)],
      );
    }

    // --- the commands
    const db = ['--database-url', ctx.db.url];
    const busy = JOBS[0]!.name;
    const minute = JOBS[1]!.name;
    const fiveMin = JOBS[10]!.name;
    const hourly = JOBS[30]!.name;
    const daily = JOBS[45]!.name;
    const [mid] = await ctx.db.query<RowDataPacket>(
      `SELECT scheduled_at FROM baton_runs WHERE namespace = 'prod' AND job = ? AND winner = 1
        ORDER BY scheduled_at LIMIT 1 OFFSET ?`,
      [busy, Math.floor(spanS / 10 / 2)],
    );
    const midFire = (mid?.scheduled_at as Date).toISOString();
    const ns = ['--namespace', 'prod'];
    const commands: Command[] = [
      {
        key: 'history_busy',
        label: `history ${busy} --limit 50 (every 10 s)`,
        args: ['history', busy, '--limit', '50', ...ns],
        target: true,
      },
      {
        key: 'history_minute',
        label: `history ${minute} --limit 50 (every minute)`,
        args: ['history', minute, '--limit', '50', ...ns],
        target: true,
      },
      {
        key: 'history_5min',
        label: `history ${fiveMin} --limit 50 (every 5 min)`,
        args: ['history', fiveMin, '--limit', '50', ...ns],
        target: true,
      },
      {
        key: 'history_hourly',
        label: `history ${hourly} --limit 50 (hourly)`,
        args: ['history', hourly, '--limit', '50', ...ns],
        target: true,
      },
      {
        key: 'history_daily',
        label: `history ${daily} --limit 50 (daily)`,
        args: ['history', daily, '--limit', '50', ...ns],
        target: true,
      },
      {
        key: 'history_failed',
        label: `history ${busy} --status failed --limit 50`,
        args: ['history', busy, '--status', 'failed', '--limit', '50', ...ns],
        target: true,
      },
      {
        key: 'history_all',
        label: 'history --limit 50 (every job)',
        args: ['history', '--limit', '50', ...ns],
        target: true,
      },
      {
        key: 'explain_busy',
        label: `explain ${busy} (latest fire)`,
        args: ['explain', busy, ...ns],
        target: true,
      },
      {
        key: 'explain_daily',
        label: `explain ${daily} (latest fire)`,
        args: ['explain', daily, ...ns],
        target: true,
      },
      {
        key: 'explain_busy_mid',
        label: `explain ${busy} <a fire mid-history>`,
        args: ['explain', busy, midFire, ...ns],
        target: true,
      },
      {
        key: 'status',
        label: 'status (50 jobs, 3 runners)',
        args: ['status', '--config', configFile, ...ns],
        target: true,
      },
    ];

    // Node + the CLI's own start, the floor under every wall-clock figure.
    const floorRuns: number[] = [];
    for (let i = 0; i < 3; i++) floorRuns.push((await runCli(['--version'], { cwd: work })).ms);
    const floorMs = median(floorRuns);
    figures.cli_start_floor_ms = round(floorMs, 1);

    const analyzer = await mysql.createConnection({ uri: ctx.db.url, timezone: 'Z' });
    ctx.onCleanup(() => analyzer.end().catch(() => {}));
    await analyzer.query("SET time_zone = '+00:00'");
    const results: CommandResult[] = [];
    for (const command of commands) {
      // `explain` without --config must not pick up a schedules.yaml: cwd is an empty folder.
      const file = path.join(work, `${command.key}.jsonl`);
      writeFileSync(file, '');
      const captured = await runCli([...command.args, ...db], {
        cwd: work,
        env: { BENCH_SQL_CAPTURE: file },
        preload: [tsx, capture],
      });
      if (captured.code !== 0 && captured.code !== 1) {
        throw new Error(
          `baton ${command.args.join(' ')} exited ${captured.code}: ${captured.stderr}`,
        );
      }
      const sent = readFileSync(file, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { sql: string; error?: string });
      const statements: StatementCost[] = [];
      for (const s of sent) {
        if (s.error)
          throw new Error(`baton ${command.args[0]} sent a failing statement: ${s.error}`);
        if (!/^\s*(select|with)\b/i.test(s.sql)) continue; // SET time_zone
        statements.push(await analyze(analyzer, s.sql));
      }
      const walls: number[] = [];
      for (let i = 0; i < 3; i++)
        walls.push((await runCli([...command.args, ...db], { cwd: work })).ms);
      const serverMs = statements.reduce((s, c) => s + c.serverMs, 0);
      const slowest = statements.reduce((a, b) => (b.serverMs > a.serverMs ? b : a));
      results.push({
        command,
        statements,
        serverMs,
        slowest,
        rowsRead: statements.reduce((s, c) => s + c.rowsRead, 0),
        wallMs: median(walls),
        exitCode: captured.code,
      });
    }

    for (const r of results) {
      const k = r.command.key;
      table.push({
        command: r.command.label,
        statements: r.statements.length,
        'server ms': round(r.serverMs, 2),
        'slowest stmt ms': round(r.slowest.serverMs, 2),
        'rows read': r.rowsRead,
        'CLI wall ms': Math.round(r.wallMs),
        'wall − start floor ms': Math.round(r.wallMs - floorMs),
      });
      figures[`${k}_server_ms`] = round(r.serverMs, 2);
      figures[`${k}_slowest_stmt_ms`] = round(r.slowest.serverMs, 2);
      figures[`${k}_rows_read`] = r.rowsRead;
      figures[`${k}_statements`] = r.statements.length;
      figures[`${k}_wall_ms`] = Math.round(r.wallMs);
      if (r.command.target) {
        checks.push(
          ctx.target(`${r.command.label}: server time`, r.serverMs, 50, 'ms', {
            context: `${r.statements.length} statement(s), slowest ${round(r.slowest.serverMs, 2)} ms`,
          }),
        );
      }
      // Plans, once per statement shape (status asks the same two questions of every job).
      const shapes = new Map<string, StatementCost[]>();
      for (const s of r.statements) {
        const shape = shapeOf(s.sql);
        shapes.set(shape, [...(shapes.get(shape) ?? []), s]);
      }
      for (const [shape, same] of shapes) {
        const worst = same.reduce((a, b) => (b.rowsRead > a.rowsRead ? b : a));
        const total = same.reduce((s, c) => s + c.serverMs, 0);
        notes.push(
          `plan [${r.command.key}] ${same.length > 1 ? `${same.length}× ` : ''}${shape.slice(0, 160)}${shape.length > 160 ? '…' : ''} → ${worst.plan}; ${round(total, 2)} ms server`,
        );
      }
      const scans = r.statements.filter((s) => s.fullScan || s.rowsRead > 5_000);
      checks.push({
        name: `${r.command.label}: indexed reads only`,
        ok: scans.length === 0,
        detail:
          scans.length === 0
            ? `no full scan; at most ${Math.max(...r.statements.map((s) => s.rowsRead))} rows read by one statement`
            : scans
                .map((s) => `${s.plan} ← ${s.sql.replace(/\s+/g, ' ').slice(0, 200)}`)
                .join(' | '),
      });
    }

    // `history <job>` orders by (scheduled_at DESC, id DESC), which no index serves once a job is
    // named (the fire key has `winner` before the primary key): the optimiser either walks
    // baton_runs_scheduled — the whole namespace, newest first — until it has 50 of the job's
    // rows, or reads all of the job's rows by the fire key and sorts them. What the fire key's
    // own order (scheduled_at DESC, winner DESC) would cost, on the worst of the job histories:
    const jobHistories = results.filter(
      (r) =>
        r.command.args[0] === 'history' &&
        r.command.args[1] &&
        !r.command.args.includes('--status'),
    );
    const worst = jobHistories.reduce((a, b) => (b.rowsRead > a.rowsRead ? b : a));
    const listSql = worst.statements.find((st) =>
      /ORDER BY scheduled_at DESC, id DESC/.test(st.sql),
    );
    if (listSql) {
      const alt = await analyze(
        analyzer,
        listSql.sql.replace(
          'ORDER BY scheduled_at DESC, id DESC',
          'ORDER BY scheduled_at DESC, winner DESC',
        ),
      );
      figures.history_worst_job = worst.command.key;
      figures.history_worst_alt_order_server_ms = round(alt.serverMs, 2);
      figures.history_worst_alt_order_rows_read = alt.rowsRead;
      notes.push(
        `history <job> orders by (scheduled_at DESC, id DESC), which no index serves for one job (the fire key has winner before the primary key): MariaDB walks baton_runs_scheduled (the namespace's rows, newest first) until it has 50 of the job's, or reads all of the job's rows by the fire key and sorts them. Worst here: ${worst.command.label}, ${listSql.rowsRead} rows read for 50 shown, ${round(listSql.serverMs, 2)} ms (${listSql.plan}). The same statement ordered by (scheduled_at DESC, winner DESC), the fire key's order: ${alt.rowsRead} rows, ${round(alt.serverMs, 2)} ms (${alt.plan}).`,
      );
    }

    notes.unshift(
      `History: ${totalRows} rows over ${round(spanS / 86_400, 1)} days (3 namespaces, 110 jobs: 1 every 10 s, 9 every minute, 20 every 5 min, 15 hourly, 5 daily per namespace of 50; 3 hosts), generated in ${round(genSeconds, 1)} s, ${figures.table_mib} MiB with indexes; ANALYZE TABLE run after the load. The data is warm in the buffer pool (innodb_buffer_pool_size ${ctx.server.settings.innodb_buffer_pool_size ?? '?'}): cold-cache times are not measured.`,
      `Server time: the statements each command sent (captured from its mysql2 driver), each re-run under ANALYZE FORMAT=JSON (optimisation + execution, median of 3); "rows read" = Σ r_rows × r_loops. CLI wall: median of 3 real runs; the start floor (node dist/cli/main.js --version) is ${round(floorMs, 0)} ms.`,
    );
    return { figures, table, notes, checks };
  },
} satisfies Scenario;

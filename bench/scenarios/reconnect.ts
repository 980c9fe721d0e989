/**
 * Reconnect herd (issue 15): 16 runners, one every-second job, and a server that restarts under
 * them — 3 times (quick: once), each time 8 s down (quick: 4 s). What it costs to come back, and
 * whether the herd of reconnects hurts the server:
 * - per runner, the time from the server answering again (`start()` resolving: it polls every
 *   50 ms with a real SELECT) to its 'lock session reopened' line (host clock = server clock on
 *   this machine): p50, max, and the spread between the first and the last runner (jitter);
 * - the time to the first fire run after the answer (a winner's `started_at`, database time);
 * - the runners' connect attempts during the outage (the 'reopened' line's `attempts`; the old
 *   code logged one warn line per attempt, counted instead) — refused by the kernel, they never
 *   reach the server — and, from the server's status counters, which a restart resets to zero,
 *   what the reconnect cost it in its first 5 s: `Connections` (attempts that reached it, the
 *   harness's own few included), `Aborted_connects`, `Connection_errors_%`, the peak
 *   `Max_used_connections` against the steady `Threads_connected`, and `Questions`;
 * - errors: runner lines at error level other than the loss itself, and any "Too many
 *   connections" anywhere in the runners' logs.
 * It starts a private mariadbd of its own (the harness's server cannot be restarted from a
 * scenario), with the bench's settings (max_connections 500).
 */
import mysql, { type Connection, type RowDataPacket } from 'mysql2/promise';
import type { BenchRunner, Check, LogLine, Scenario, TableRow } from '../lib/index.js';
import { distFigures, distRow, percentiles, round, sleep } from '../lib/index.js';
import { PRIVATE_SERVER_ARGS } from '../lib/database.js';
import { startPrivateServer } from '../../test/helpers/private-server.js';

const RUNNERS = 16;
const REOPENED = 'lock session reopened';
const RECONNECTING = 'database unavailable: reconnecting';
/** The herd window ends this long after the last runner reopened (its look-back, first fires). */
const HERD_TAIL_MS = 3_000;

interface Restart {
  reopenedMs: number[];
  firstRunMs: number;
  attempts: number[];
  outageS: number;
  /** Counters of the herd window: from the answer to HERD_TAIL_MS after the last reopen. */
  status: Record<string, number>;
  windowS: number;
  /** mariadbd's CPU time (user + system) in the herd window. */
  serverCpuS: number;
  lostFires: number;
  threadsPeakSampled: number;
  threadsBefore: number;
}

async function status(conn: Connection): Promise<Record<string, number>> {
  const [rows] = await conn.query<RowDataPacket[]>(
    `SHOW GLOBAL STATUS WHERE Variable_name IN ('Connections', 'Aborted_connects',
      'Max_used_connections', 'Threads_connected', 'Questions')
      OR Variable_name LIKE 'Connection\\_errors\\_%'`,
  );
  const out: Record<string, number> = {};
  for (const r of rows) out[String(r.Variable_name)] = Number(r.Value);
  return out;
}

const reopenedAfter = (r: BenchRunner, t: number) =>
  r.lines.find((l) => l.msg === REOPENED && Date.parse(String(l.time)) >= t - 50);

export default {
  name: 'reconnect',
  title: `Reconnect herd: ${RUNNERS} runners, the server restarted under them`,
  async run(ctx) {
    const restarts = ctx.quick ? 1 : 3;
    const outageMs = ctx.quick ? 4_000 : 8_000;
    const server = await startPrivateServer({ args: PRIVATE_SERVER_ARGS });
    ctx.onCleanup(() => server.destroy());
    const url = `${server.url}/baton_bench_reconnect`;
    const connect = () => mysql.createConnection({ uri: url, timezone: 'Z' });
    const config = ctx.writeSchedule({
      namespace: 'reconnect',
      jobs: { tick: { schedule: '* * * * * *', command: ['true'] } },
    });
    ctx.log(`starting ${RUNNERS} runners`);
    const runners = await ctx.startRunners(RUNNERS, {
      config,
      databaseUrl: url,
      hostPrefix: 'rc',
      args: ['--grace', '2'],
    });
    const results: Restart[] = [];
    for (let k = 0; k < restarts; k++) {
      // Steady state first: every runner connected for a few seconds.
      await sleep(4_000);
      const before = await connect();
      const threadsBefore = (await status(before)).Threads_connected ?? NaN;
      await before.end();

      ctx.log(`restart ${k + 1}/${restarts}: down for ${outageMs / 1000} s`);
      const stoppedAt = Date.now();
      await server.stop();
      await sleep(outageMs);
      await server.start();
      const answeredHost = Date.now();
      const conn = await connect();
      const [[{ now: answeredDb }]] = (await conn.query('SELECT NOW(3) AS now')) as unknown as [
        [{ now: Date }],
      ];
      const serverCpuAtAnswer = ctx.readProc(server.pid!).cpuSeconds;
      // Threads_connected every 100 ms (Max_used_connections is the exact peak; this is its
      // shape) until every runner has reopened its lock session, then HERD_TAIL_MS more (its
      // look-back, the first fires): the herd window, whose counters are read at its end.
      let threadsPeakSampled = 0;
      let lines: LogLine[] | null = null;
      const deadline = answeredHost + 60_000;
      while (!lines) {
        threadsPeakSampled = Math.max(threadsPeakSampled, (await status(conn)).Threads_connected!);
        const found = runners.map((r) => reopenedAfter(r, answeredHost));
        if (found.every((l) => l != null)) lines = found as LogLine[];
        else if (Date.now() > deadline) throw new Error('not every runner reopened within 60 s');
        else await sleep(100);
      }
      const tailUntil = Date.now() + HERD_TAIL_MS;
      while (Date.now() < tailUntil) {
        threadsPeakSampled = Math.max(threadsPeakSampled, (await status(conn)).Threads_connected!);
        await sleep(100);
      }
      const counters = await status(conn);
      const windowS = (Date.now() - answeredHost) / 1000;
      const serverCpuS = ctx.readProc(server.pid!).cpuSeconds - serverCpuAtAnswer;
      const [firstRow] = await ctx.waitFor(
        'a fire run after the restart',
        async () => {
          const [rows] = await conn.query<RowDataPacket[]>(
            `SELECT started_at, scheduled_at FROM baton_runs
              WHERE winner = 1 AND triggered_by = 'schedule' AND started_at >= ?
              ORDER BY started_at LIMIT 1`,
            [answeredDb],
          );
          return rows.length ? rows : null;
        },
        { timeoutMs: 60_000, intervalMs: 100 },
      );
      const first = firstRow!.started_at as Date;
      // Fires lost to the restart: the instants between the last winner before the stop and
      // the first after the answer (the job fires every second), recorded `missed` or not yet.
      const [[lastBefore]] = await conn.query<RowDataPacket[]>(
        `SELECT MAX(scheduled_at) AS at FROM baton_runs WHERE winner = 1 AND scheduled_at < ?`,
        [firstRow!.scheduled_at],
      );
      const lostFires =
        ((firstRow!.scheduled_at as Date).getTime() - (lastBefore!.at as Date).getTime()) / 1000 -
        1;
      await conn.end();
      results.push({
        reopenedMs: lines.map((l) => Date.parse(String(l.time)) - answeredHost),
        firstRunMs: first.getTime() - answeredDb.getTime(),
        attempts: runners.map((r, i) => {
          const n = Number(lines[i]!.attempts);
          if (Number.isFinite(n)) return n;
          // The old code: a warn line per failed attempt, and no count on the reopened line.
          const failed = r.lines.filter((l) => {
            const t = Date.parse(String(l.time));
            return l.msg === RECONNECTING && t >= stoppedAt && t <= answeredHost + 60_000;
          }).length;
          return failed + 1;
        }),
        outageS: (answeredHost - stoppedAt) / 1000,
        status: counters,
        windowS,
        serverCpuS,
        lostFires,
        threadsPeakSampled,
        threadsBefore,
      });
    }

    const all = (f: (r: Restart) => number[]) => results.flatMap(f);
    const reopened = percentiles(all((r) => r.reopenedMs));
    const firstRun = percentiles(results.map((r) => r.firstRunMs));
    const spread = percentiles(
      results.map((r) => Math.max(...r.reopenedMs) - Math.min(...r.reopenedMs)),
    );
    const attemptsPerRunnerPerS = percentiles(
      results.flatMap((r) => r.attempts.map((a) => a / r.outageS)),
    );
    const maxOf = (key: string) => Math.max(...results.map((r) => r.status[key] ?? 0));
    const sumErrors = (r: Restart) =>
      Object.entries(r.status)
        .filter(([k]) => k.startsWith('Connection_errors_'))
        .reduce((s, [, v]) => s + v, 0);

    const errors = runners.flatMap((r) =>
      r
        .errors()
        .filter((l) => l.msg !== 'lock session lost')
        .map((l) => `${r.host}: ${l.msg}`),
    );
    const tooMany = runners.flatMap((r) =>
      r.lines
        .filter((l) => /Too many connections|ER_CON_COUNT_ERROR/.test(JSON.stringify(l)))
        .map(() => r.host),
    );
    const count = async (sql: string): Promise<number> => {
      const c = await connect();
      try {
        const [rows] = await c.query<RowDataPacket[]>(sql);
        return Number(rows[0]?.n ?? 0);
      } finally {
        await c.end();
      }
    };
    const doubleWinners = await count(
      `SELECT COUNT(*) AS n FROM (SELECT scheduled_at FROM baton_runs WHERE winner = 1
        GROUP BY scheduled_at HAVING COUNT(*) > 1) d`,
    );
    const missedRows = await count("SELECT COUNT(*) AS n FROM baton_runs WHERE status = 'missed'");

    const table: TableRow[] = [
      distRow('server answers → each runner reopened', reopened),
      distRow('server answers → first fire run', firstRun),
      distRow('first → last runner reopened (one restart)', spread),
      distRow('connect attempts per runner per second down', attemptsPerRunnerPerS, {}, '/s'),
      ...results.map((r, i) => ({
        what: `restart ${i + 1}: server, first ${round(r.windowS, 1)} s up`,
        n: RUNNERS,
        p50: `Connections ${r.status.Connections}`,
        p95: `Max_used ${r.status.Max_used_connections} (steady ${r.threadsBefore})`,
        p99: `Aborted ${r.status.Aborted_connects}, errors ${sumErrors(r)}`,
        max: `Questions ${r.status.Questions}, CPU ${round(r.serverCpuS, 2)} s`,
      })),
    ];
    const figures = {
      runners: RUNNERS,
      restarts,
      outage_s: round(outageMs / 1000, 1),
      ...distFigures('reopened_ms', reopened, 0),
      ...distFigures('first_run_ms', firstRun, 0),
      reopened_spread_max_ms: round(spread.max, 0),
      attempts_per_runner_per_s_p50: round(attemptsPerRunnerPerS.p50, 2),
      attempts_fleet_per_s: round(attemptsPerRunnerPerS.mean * RUNNERS, 1),
      server_connections_max: maxOf('Connections'),
      server_aborted_connects_max: maxOf('Aborted_connects'),
      server_connection_errors_max: Math.max(...results.map(sumErrors)),
      server_max_used_connections: maxOf('Max_used_connections'),
      server_threads_steady: Math.max(...results.map((r) => r.threadsBefore)),
      server_questions_herd_max: maxOf('Questions'),
      server_cpu_herd_s_max: round(Math.max(...results.map((r) => r.serverCpuS)), 2),
      lost_fires_per_restart_max: Math.max(...results.map((r) => r.lostFires)),
      missed_rows: missedRows,
      runner_errors: errors.length,
    };
    const checks: Check[] = [
      ctx.target('server answers → every runner reopened (max)', reopened.max, 2_000, 'ms'),
      ctx.target('server answers → first fire run (max)', firstRun.max, 2_000, 'ms'),
      {
        name: 'no fire with two winners',
        ok: doubleWinners === 0,
        detail: `${doubleWinners} fires with two winners`,
      },
      {
        name: 'no connection refused by the server (too many connections, aborted connects)',
        ok: tooMany.length === 0 && maxOf('Aborted_connects') === 0,
        detail:
          `"Too many connections" in ${tooMany.length} runner lines; Aborted_connects ` +
          `${results.map((r) => r.status.Aborted_connects).join(', ')}; Connection_errors_* ` +
          results.map(sumErrors).join(', '),
      },
      {
        name: 'no runner error but the loss itself',
        ok: errors.length === 0,
        detail: errors.length ? errors.slice(0, 5).join('; ') : 'none',
      },
    ];
    const notes = [
      `${restarts} restart(s), each ${outageMs / 1000} s down (SIGTERM, then a start on the same ` +
        `port and data dir); ${RUNNERS} runners, one job every second.`,
      `Per restart, each runner reopened (ms after the answer): ` +
        results.map((r) => [...r.reopenedMs].sort((a, b) => a - b).join(' ')).join(' | '),
      `First fire run after the answer (ms): ${results.map((r) => r.firstRunMs).join(', ')}; ` +
        `fires lost per restart (no winner): ${results.map((r) => r.lostFires).join(', ')}.`,
      `A reopen a few ms before "the answer" is a runner that connected before the harness's ` +
        `own readiness poll (every 50 ms) returned.`,
      `Connect attempts per runner during an outage (incl. the one that succeeded): ` +
        results.map((r) => r.attempts.join(' ')).join(' | '),
      `Threads_connected sampled every 100 ms after the answer peaked at ` +
        `${results.map((r) => r.threadsPeakSampled).join(', ')} (Max_used_connections ` +
        `${results.map((r) => r.status.Max_used_connections).join(', ')}; steady before the ` +
        `restart ${results.map((r) => r.threadsBefore).join(', ')}).`,
      `Server counters are since its restart (a restart zeroes them), read ${HERD_TAIL_MS / 1000} ` +
        `s after the last runner reopened; they include the harness's readiness probe and its ` +
        `status connection (2 connections) and its SHOW STATUS every 100 ms (Questions). ` +
        `missed_rows: all restarts, read at the end (the last restart's may not be written yet).`,
    ];
    return { figures, table, notes, checks };
  },
} satisfies Scenario;

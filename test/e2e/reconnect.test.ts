/**
 * Back within about a second of the database (issue 15): after a server restart, every runner
 * reopens its lock session, and fires run again, within about a second of the server answering —
 * not when a doubling backoff's next attempt happens to come round (the old 0.5 s doubling to
 * 30 s tried at 0, 0.5, 1.5, 3.5, 7.5 and 15.5 s after the loss: after an 8 s outage the fleet
 * came back ~7 s after the server did, and every fire in between was `missed`).
 *
 * Five runner processes and a job every second on a PRIVATE mariadbd, stopped (SIGTERM) for 8 s
 * and started again; then two restarts in a row (4 s down, up for half a second, 4 s down). The
 * instant the server answers again is when `start()` resolves (it polls every 50 ms with a real
 * `SELECT`), read as the server's own NOW(3) just after; the first fire run after it is read from
 * the history in database time (a winner row's `started_at`), each runner's return from its
 * 'lock session reopened' line (the host's clock, the same as the server's here). The bound,
 * 3 s, tells the two behaviours apart with room for a loaded 2-core machine (the old code misses
 * it by ~4 s); the figures are printed.
 */
import type { RowDataPacket } from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRunner, writeSchedule, type LogLine, type RunnerProcess } from '../helpers/cli.js';
import { queryFresh, type RunRow } from '../helpers/db.js';
import { expectOneWinnerPerFire } from '../helpers/fires.js';
import { startPrivateServer, type PrivateServer } from '../helpers/private-server.js';
import { sleep, waitFor } from '../helpers/wait.js';

const HOSTS = ['rc-1', 'rc-2', 'rc-3', 'rc-4', 'rc-5'];
/** Server answering → every runner reopened, and → the first fire run. Target ≤ 2 s. */
const BOUND_MS = 3_000;
const REOPENED = 'lock session reopened';

let server: PrivateServer;
let url: string;
const runners: RunnerProcess[] = [];

beforeAll(async () => {
  server = await startPrivateServer();
  url = `${server.url}/baton_reconnect`;
  const config = writeSchedule(`
namespace: reconnect
jobs:
  tick: { schedule: "* * * * * *", command: ["true"] }
`);
  runners.push(...HOSTS.map((host) => startRunner({ config, databaseUrl: url, host })));
  await Promise.all(runners.map((r) => r.ready()));
  // The fleet is at work: a fire with a done winner and a row from every runner.
  await waitFor(
    'a complete fire',
    async () =>
      (
        await query(
          `SELECT scheduled_at FROM baton_runs GROUP BY scheduled_at
            HAVING COUNT(*) = ${HOSTS.length} AND SUM(winner = 1 AND status = 'done') = 1`,
        )
      ).length > 0,
    { timeoutMs: 40_000, intervalMs: 200 },
  );
}, 90_000);

afterAll(async () => {
  await Promise.all(runners.splice(0).map((r) => r.stop('SIGKILL')));
  await server?.destroy();
});

/** One query on a fresh connection (connections do not survive a stop). */
const query = <T = RowDataPacket>(sql: string, params: unknown[] = []) =>
  queryFresh<T>(url, sql, params);

const reopenedLines = (r: RunnerProcess): LogLine[] => r.lines.filter((l) => l.msg === REOPENED);

interface Return {
  /**
   * Each runner: its first 'lock session reopened' since the server was started, ms after the
   * test saw it answer (below 0: before the test noticed).
   */
  reopenedMs: number[];
  /** The first fire run after the server answered: its start (database time), ms after it. */
  firstRunMs: number;
}

/** Starts the server; measures the fleet's return from the instant it answers. */
async function startAndMeasure(): Promise<Return> {
  // A runner may reopen between the server's first answer and the test's noticing it (start()
  // polls every 50 ms, and a loaded machine runs this test late): a line counts from the start.
  const startedHost = Date.now();
  await server.start();
  const answeredHost = Date.now();
  const answeredDb = (await query<{ now: Date }>('SELECT NOW(3) AS now'))[0]!.now;
  const lines = await Promise.all(
    runners.map((r) =>
      r.waitForLog(REOPENED, (l) => Date.parse(String(l.time)) >= startedHost, 40_000),
    ),
  );
  const [first] = await waitFor(
    'a fire run after the server answered',
    async () => {
      const rows = await query<{ started_at: Date }>(
        `SELECT started_at FROM baton_runs
          WHERE winner = 1 AND triggered_by = 'schedule' AND started_at >= ?
          ORDER BY started_at LIMIT 1`,
        [answeredDb],
      );
      return rows.length > 0 ? rows : null;
    },
    { timeoutMs: 40_000, intervalMs: 100 },
  );
  return {
    reopenedMs: lines.map((l) => Date.parse(String(l.time)) - answeredHost),
    firstRunMs: first!.started_at.getTime() - answeredDb.getTime(),
  };
}

function report(label: string, back: Return): void {
  const sorted = [...back.reopenedMs].sort((a, b) => a - b);
  console.log(
    `${label}: runners' lock sessions reopened ${sorted.join(', ')} ms after the server ` +
      `answered (max ${sorted.at(-1)} ms); first fire run ${back.firstRunMs} ms after it`,
  );
}

function expectBackWithinBound(back: Return): void {
  for (const [i, ms] of back.reopenedMs.entries()) {
    expect(ms, `${HOSTS[i]}: reopened ${ms} ms after the server answered`).toBeLessThan(BOUND_MS);
  }
  expect(back.firstRunMs, 'first fire run after the server answered').toBeLessThan(BOUND_MS);
  // Never a run started before the answer that the measurement would miss (the clocks agree).
  expect(back.firstRunMs).toBeGreaterThanOrEqual(0);
}

async function expectHistorySound(): Promise<void> {
  const rows = await query<RunRow>('SELECT * FROM baton_runs ORDER BY scheduled_at, id');
  expectOneWinnerPerFire(rows, 'tick', { noWinner: ['overlap', 'lock-being-released'] });
  for (const r of runners) {
    expect(r.child.exitCode, `${r.host} exited`).toBeNull();
    expect(r.stderr, r.host).toBe('');
  }
}

describe('the database restarts under five runners', () => {
  it('after 8 s down, every runner is back and fires run within a second or so', async () => {
    const before = runners.map((r) => reopenedLines(r).length);
    await server.stop();
    await sleep(8_000);
    const back = await startAndMeasure();
    report('8 s outage', back);
    expectBackWithinBound(back);
    // Each runner reconnected once, after trying all along (it did not sleep through it).
    for (const [i, r] of runners.entries()) {
      expect(reopenedLines(r).length - before[i]!, r.host).toBe(1);
      const reopened = reopenedLines(r).at(-1)!;
      expect(Number(reopened.attempts), `${r.host}: attempts`).toBeGreaterThan(6);
    }
    await expectHistorySound();
  }, 90_000);

  it('after two restarts in a row, too', async () => {
    await server.stop();
    await sleep(4_000);
    await server.start();
    await sleep(500);
    await server.stop();
    await sleep(4_000);
    const back = await startAndMeasure();
    report('two restarts in a row (4 s, 0.5 s up, 4 s)', back);
    expectBackWithinBound(back);
    await expectHistorySound();
  }, 90_000);

  it('logs a long outage at warn once per error, the attempts between at debug', () => {
    for (const r of runners) {
      const lines = r.lines.filter((l) => l.msg === 'database unavailable: reconnecting');
      const warns = lines.filter((l) => l.level === 40);
      // A warn for each outage's first failure (each outage is under 30 s), and one for each
      // change of error within one (refused, then the server shutting down): a few in all.
      expect(warns.length, r.host).toBeGreaterThanOrEqual(2);
      expect(warns.length, r.host).toBeLessThan(lines.length / 3);
      expect(warns[0], r.host).toMatchObject({ attempt: 1 });
      for (const l of lines) {
        expect(Number(l.retryInMs), r.host).toBeGreaterThanOrEqual(100);
        expect(Number(l.retryInMs), r.host).toBeLessThanOrEqual(1_000);
      }
    }
  });
});

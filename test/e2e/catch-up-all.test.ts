/**
 * `catchUp: {window, fires: all}` across a real outage: three runners on a PRIVATE mariadbd that
 * the test stops for about three fire intervals. After the restart every fire nobody attempted
 * runs exactly once, as a catch-up with its own `scheduled_at` (and `BATON_SCHEDULED_AT`), oldest
 * first and one after another — never two side by side, although three runners walk the same
 * list — and before the job's next regular fire. None of them is recorded `missed`.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startRunner, writeSchedule, type RunnerProcess } from '../helpers/cli.js';
import { byFire, queryFresh, type RunRow } from '../helpers/db.js';
import { expectOneWinnerPerFire } from '../helpers/fires.js';
import { startPrivateServer, type PrivateServer } from '../helpers/private-server.js';
import { sleep, waitFor } from '../helpers/wait.js';

const HOSTS = ['walk-a', 'walk-b', 'walk-c'];
/** The job's fire interval (every 4 s; 60 is a multiple, so the fires are multiples of it). */
const PERIOD_MS = 4_000;
/**
 * recovery.missedSettleMs (default 5 s): the wait before each runner's missed-row pass, which the
 * test waits out to show it recorded nothing. The walk's own fires are left out of that pass by
 * the runner that plans them, whatever the settle.
 */
const MISSED_SETTLE_MS = 1_500;
/**
 * The runners reconnect within 0.3 s of the restart (default back-off: up to 1 s; proven by
 * test/e2e/reconnect.test.ts): the walk starts at once and keeps its room before the next fire.
 */
const TIMINGS = {
  link: { reconnectMaxMs: 300 },
  recovery: { missedSettleMs: MISSED_SETTLE_MS },
};

let server: PrivateServer | undefined;
const runners: RunnerProcess[] = [];

afterEach(async () => {
  await Promise.all(runners.splice(0).map((r) => r.stop('SIGKILL')));
  await server?.destroy();
  server = undefined;
});

const query = queryFresh;

/** Sleeps until `offsetMs` past the next multiple of PERIOD_MS (a fire instant of the job). */
async function untilAfterFire(offsetMs: number): Promise<void> {
  const now = Date.now();
  const next = Math.ceil(now / PERIOD_MS) * PERIOD_MS + offsetMs;
  await sleep(next - now);
}

const iso = (ms: number) => new Date(ms).toISOString();

describe('catchUp with fires: all', () => {
  it('runs every fire nobody attempted once, oldest first, one after another', async () => {
    server = await startPrivateServer();
    const url = `${server.url}/baton_walk`;
    // Each run takes 0.4 s and prints the fire it was given, so that runs side by side would
    // show in the history's start and end times.
    const config = writeSchedule(`
namespace: walk
jobs:
  hourly-import:
    schedule: "*/4 * * * * *"
    command: ["sh", "-c", "echo fire=$BATON_SCHEDULED_AT; sleep 0.4"]
    catchUp: {window: 1m, fires: all}
`);
    runners.push(
      ...HOSTS.map((host) => startRunner({ config, databaseUrl: url, host, timings: TIMINGS })),
    );
    await Promise.all(runners.map((r) => r.ready()));
    await waitFor(
      'a complete fire before the outage',
      async () =>
        (
          await query(
            url,
            `SELECT scheduled_at FROM baton_runs GROUP BY scheduled_at
             HAVING COUNT(*) = 3 AND SUM(winner = 1 AND status = 'done') = 1`,
          )
        ).length > 0,
      { timeoutMs: 40_000, intervalMs: 200 },
    );

    // Down from 1.5 s after one fire to 0.3 s after the third one from there: those three
    // fires find no database; the walk then has more than 3 s (the interval less 0.3 s and the
    // reconnect) before the next regular fire, for three runs of 0.4 s one after another.
    await untilAfterFire(1_500);
    const stoppedAt = Date.now();
    await server.stop();
    await untilAfterFire(2 * PERIOD_MS + 300);
    for (const r of runners) expect(r.child.exitCode, `${r.host} exited`).toBeNull();
    await server.start();
    const startedAt = Date.now();
    for (const r of runners) await r.waitForLog('lock session reopened', () => true, 60_000);

    const blindFires = (rows: RunRow[]) =>
      [...byFire(rows).keys()].filter((at) => at > stoppedAt && at < startedAt);
    let rows: RunRow[] = [];
    await waitFor(
      'the three blind fires caught up, and a regular fire after them',
      async () => {
        rows = await query<RunRow>(url, 'SELECT * FROM baton_runs ORDER BY scheduled_at, id');
        const regularAfter = rows.some(
          (r) =>
            r.triggered_by === 'schedule' &&
            r.winner === 1 &&
            r.status === 'done' &&
            r.scheduled_at.getTime() > startedAt,
        );
        return regularAfter && blindFires(rows).length >= 3;
      },
      { timeoutMs: 40_000, intervalMs: 250 },
    );
    // The missed-row pass of every runner (MISSED_SETTLE_MS after its reconnect, which comes
    // within 0.5 s of the restart) is over too, with room for a loaded machine.
    await sleep(Math.max(0, startedAt + MISSED_SETTLE_MS + 2_500 - Date.now()));
    rows = await query<RunRow>(url, 'SELECT * FROM baton_runs ORDER BY scheduled_at, id');

    expectOneWinnerPerFire(rows, 'hourly-import', { noWinner: ['lock-being-released'] });
    const blind = blindFires(rows);
    expect(blind.length, 'fires inside the outage').toBe(3);
    const fires = byFire(rows);
    const caughtUp = blind.map((at) => {
      const winners = fires.get(at)!.filter((r) => r.winner === 1);
      expect(winners, iso(at)).toMatchObject([
        { triggered_by: 'catchup', status: 'done', exit_code: 0 },
      ]);
      // Its own instant, not the time it ran.
      expect(winners[0]!.output_tail, iso(at)).toContain(`fire=${iso(at)}`);
      return winners[0]!;
    });
    expect(rows.filter((r) => r.status === 'missed')).toEqual([]);

    // Oldest first, one after another: each catch-up starts after the previous one ended.
    for (let i = 1; i < caughtUp.length; i++) {
      expect(caughtUp[i]!.started_at.getTime(), iso(blind[i]!)).toBeGreaterThanOrEqual(
        caughtUp[i - 1]!.finished_at!.getTime(),
      );
    }
    // All of them before the regular fire that followed.
    const firstRegular = rows.find(
      (r) =>
        r.triggered_by === 'schedule' && r.winner === 1 && r.scheduled_at.getTime() > startedAt,
    )!;
    expect(caughtUp.at(-1)!.finished_at!.getTime()).toBeLessThanOrEqual(
      firstRegular.started_at.getTime(),
    );

    expect(await Promise.all(runners.map((r) => r.stop('SIGTERM')))).toEqual([0, 0, 0]);
    for (const r of runners) expect(r.stderr, r.host).toBe('');
  }, 120_000);
});

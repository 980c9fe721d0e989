/**
 * `catchUp: {window, fires: all}` across a real outage: three runners, built in the test process
 * (in-process-fleet.ts), on a PRIVATE mariadbd that the test stops for three fires. After the
 * restart every fire nobody attempted runs exactly once, as a catch-up with its own
 * `scheduled_at` (and `BATON_SCHEDULED_AT`), oldest first and one after another — never two side
 * by side, although three runners walk the same list — and before the job's next regular run
 * (a regular fire that meets the walk still going is skipped as an overlap). None of them is
 * recorded `missed`.
 *
 * The outage is paced by what the runners report, not by the clock: the server stops once a fire
 * is complete, and starts again once every runner has reported the third fire since then not run
 * (`fire:notAttempted`). The missed-row pass of each runner is known to be over, not slept out:
 * a second job, `no-catch-up`, has no catch-up, so the same pass records its fires of the outage
 * `missed`, after those of `hourly-import` — and each runner's look at them (its statements,
 * told apart by `runnerScope`) comes only once its pass over `hourly-import` is done.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { FireRef } from '../../src/fire/fire-events.js';
import { writeSchedule } from '../helpers/cli.js';
import { byFire, queryFresh, type RunRow } from '../helpers/db.js';
import { expectOneWinnerPerFire } from '../helpers/fires.js';
import {
  runnerScope,
  useInProcessFleet,
  type InProcessRunner,
} from '../helpers/in-process-fleet.js';
import { startPrivateServer, type PrivateServer } from '../helpers/private-server.js';
import { traceStatements } from '../helpers/statements.js';
import { waitFor } from '../helpers/wait.js';

const HOSTS = ['walk-a', 'walk-b', 'walk-c'];
const JOB = 'hourly-import';
/** The same pass records this job's fires of the outage `missed`: it has no catch-up. */
const CONTROL = 'no-catch-up';
/**
 * recovery.missedSettleMs (default 5 s): the wait before each runner's missed-row pass. The
 * walk's own fires are left out of that pass by the runner that plans them, whatever the settle.
 */
const MISSED_SETTLE_MS = 1_500;
/**
 * The runners reconnect within 0.3 s of the restart (default back-off: up to 1 s; proven by
 * test/e2e/reconnect.test.ts): the walk starts at once and keeps its room before the next fire.
 * A runner that lost a catch-up fire looks for its end every 100 ms (default 500 ms).
 */
const TIMINGS = {
  link: { reconnectMaxMs: 300 },
  recovery: { missedSettleMs: MISSED_SETTLE_MS, winnerPollMs: 100 },
};

const fleet = useInProcessFleet('catch_up_all');
let server: PrivateServer | undefined;
let runners: InProcessRunner[] = [];

afterEach(async () => {
  // Before the server goes: a runner left running (a failed test) stops against a live one.
  await Promise.all(runners.splice(0).map((r) => r.stop(true)));
  await server?.destroy();
  server = undefined;
});

const query = queryFresh;
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
  ${JOB}:
    schedule: "*/4 * * * * *"
    command: ["sh", "-c", "echo fire=$BATON_SCHEDULED_AT; sleep 0.4"]
    catchUp: {window: 1m, fires: all}
  ${CONTROL}:
    schedule: "*/4 * * * * *"
    command: ["true"]
`);
    const trace = traceStatements(() => runnerScope.getStore());
    runners = await fleet.start(HOSTS, {
      config,
      databaseUrl: url,
      runner: { timings: TIMINGS },
    });
    // The fires of JOB each runner could not run.
    const notRun = new Map(runners.map((r) => [r.host, new Set<number>()]));
    for (const r of runners) {
      r.runner.events.on('fire:notAttempted', ({ fire }: { fire: FireRef }) => {
        if (fire.job === JOB) notRun.get(r.host)!.add(fire.scheduledAt.getTime());
      });
    }

    // A complete fire (every runner's row, its run done), met within 2 s of its instant: the
    // server goes down at once, well before the next fire (4 s after it).
    await waitFor(
      'a complete fire before the outage, met within 2 s of its instant',
      async () => {
        const [latest] = await query<{ at: Date }>(
          url,
          `SELECT scheduled_at AS at FROM baton_runs WHERE job = ? GROUP BY scheduled_at
           HAVING COUNT(*) = 3 AND SUM(winner = 1 AND status = 'done') = 1
           ORDER BY scheduled_at DESC LIMIT 1`,
          [JOB],
        );
        return latest && Date.now() < latest.at.getTime() + 2_000;
      },
      { timeoutMs: 40_000, intervalMs: 100 },
    );
    await server.stop();
    // Down from here (its process has exited): the fires from now on find no database.
    const stoppedAt = Date.now();
    // Down until every runner has reported the third fire since then not run.
    const blindSoFar = (host: string) =>
      [...notRun.get(host)!].filter((at) => at > stoppedAt).sort((a, b) => a - b);
    await waitFor(
      'three fires not run by every runner',
      () => HOSTS.every((h) => blindSoFar(h).length >= 3),
      { timeoutMs: 30_000, intervalMs: 20 },
    );
    // Up and quiet until now: nothing but the loss of its lock session is an error.
    for (const r of runners) {
      expect(
        r.errors().filter((l) => l.msg !== 'lock session lost'),
        r.host,
      ).toEqual([]);
    }
    const restartAt = Date.now();
    await server.start();
    const startedAt = Date.now();
    for (const r of runners) {
      await r.waitForLog('lock session reopened', (l) => Number(l.time) >= restartAt, 60_000);
    }
    // The same three fires, not run by any runner.
    const blindFires = blindSoFar(HOSTS[0]!).slice(0, 3);
    for (const h of HOSTS) expect(blindSoFar(h).slice(0, 3), h).toEqual(blindFires);
    expect(blindFires.at(-1)!, 'the server was down at the third').toBeLessThan(restartAt);

    let rows: RunRow[] = [];
    await waitFor(
      'the three blind fires caught up, and a regular fire after them',
      async () => {
        rows = await query<RunRow>(
          url,
          'SELECT * FROM baton_runs WHERE job = ? ORDER BY scheduled_at, id',
          [JOB],
        );
        const regularAfter = rows.some(
          (r) =>
            r.triggered_by === 'schedule' &&
            r.winner === 1 &&
            r.status === 'done' &&
            r.scheduled_at.getTime() > startedAt,
        );
        const caughtUp = blindFires.every((at) =>
          rows.some(
            (r) => r.scheduled_at.getTime() === at && r.winner === 1 && r.status !== 'running',
          ),
        );
        return regularAfter && caughtUp;
      },
      { timeoutMs: 40_000, intervalMs: 100 },
    );
    // The missed-row pass of every runner is over: each has looked at CONTROL's fires, which
    // that pass does after JOB's (and nothing else does: CONTROL has no catch-up).
    const controlLook = new RegExp(
      `^\\s*SELECT DISTINCT scheduled_at FROM baton_runs\\s+WHERE namespace = 'walk' AND job = '${CONTROL}'`,
    );
    await waitFor(
      "every runner's missed-row pass over",
      () =>
        HOSTS.every((h) =>
          trace.statements.some(
            (s) => s.scope === h && s.at >= restartAt && controlLook.test(s.sql),
          ),
        ),
      { timeoutMs: MISSED_SETTLE_MS + 20_000 },
    );
    trace.stop();
    // A runner sends that look before it writes what it found: the rows may still be coming.
    await waitFor(
      "CONTROL's missed rows of the outage written",
      async () =>
        Number(
          (
            await query<{ n: number }>(
              url,
              `SELECT COUNT(*) AS n FROM baton_runs
              WHERE job = ? AND status = 'missed' AND scheduled_at > ?`,
              [CONTROL, new Date(stoppedAt)],
            )
          )[0]!.n,
        ) >= blindFires.length,
      { timeoutMs: 10_000, intervalMs: 100 },
    );
    const all = await query<RunRow>(url, 'SELECT * FROM baton_runs ORDER BY scheduled_at, id');
    rows = all.filter((r) => r.job === JOB);

    // `overlap`: on a loaded machine the server's restart and the walk can take longer than the
    // 4 s to the next regular fire, which then meets the walk's last run still going and is
    // skipped (the job's overlap policy) — the run it names must have been going at its instant.
    expectOneWinnerPerFire(rows, JOB, { noWinner: ['lock-being-released', 'overlap'] });
    const blind = [...byFire(rows).keys()].filter((at) => at > stoppedAt && at < startedAt);
    expect(blind.length, 'fires inside the outage').toBe(3);
    expect(blind).toEqual(blindFires);
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
    // The pass did record what nobody attempted and nothing caught up: CONTROL's three fires of
    // the outage (and any it met while the runners were starting, before it).
    const controlMissed = all.filter(
      (r) => r.job === CONTROL && r.status === 'missed' && r.scheduled_at.getTime() > stoppedAt,
    );
    expect(controlMissed.map((r) => r.scheduled_at.getTime())).toEqual(blindFires);

    // Oldest first, one after another: each catch-up starts after the previous one ended.
    for (let i = 1; i < caughtUp.length; i++) {
      expect(caughtUp[i]!.started_at.getTime(), iso(blind[i]!)).toBeGreaterThanOrEqual(
        caughtUp[i - 1]!.finished_at!.getTime(),
      );
    }
    // All of them before the regular run that followed (no regular fire ran beside them).
    const firstRegular = rows.find(
      (r) =>
        r.triggered_by === 'schedule' && r.winner === 1 && r.scheduled_at.getTime() > startedAt,
    )!;
    expect(caughtUp.at(-1)!.finished_at!.getTime()).toBeLessThanOrEqual(
      firstRegular.started_at.getTime(),
    );

    // A graceful stop of each, and nothing but the outage's loss logged as an error.
    await Promise.all(runners.map((r) => r.stop()));
    for (const r of runners) {
      expect(
        r.lines.filter((l) => l.msg === 'runner stopped'),
        r.host,
      ).toHaveLength(1);
      expect(
        r.errors().filter((l) => l.msg !== 'lock session lost'),
        r.host,
      ).toEqual([]);
      expect(r.stderr, r.host).toBe('');
    }
  }, 120_000);
});

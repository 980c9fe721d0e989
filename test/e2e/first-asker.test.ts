/**
 * Each fire's first asker (coordination/first-asker.ts), with three real runner processes and
 * twelve every-second jobs: a first asker killed (`kill -9`) is overtaken — while the others still
 * count it among the living (the registry's 15 s), its fires are won by them after the lead, never
 * before it, and every fire still has exactly one winner.
 *
 * That the first asker wins its fires, spread over the fleet, and a companion's jobs as the
 * registry tells them, are proven with runners in the test process: in-process/first-asker.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { FIRST_ASKER_LEAD_MS, firstAsker } from '../../src/coordination/first-asker.js';
import { writeSchedule, type RunnerProcess } from '../helpers/cli.js';
import { byFire, runs } from '../helpers/db.js';
import { expectOneWinnerPerFire, fireWindow } from '../helpers/fires.js';
import { useFleet } from '../helpers/fleet.js';

const HOSTS = ['srv-1', 'srv-2', 'srv-3'];
const JOBS = Array.from({ length: 12 }, (_, i) => `job-${String(i).padStart(2, '0')}`);
const fleet = useFleet('first_asker');
/** The runners look at their companions this often (default 5 s): they see each other sooner. */
const TIMINGS = { fleetWatch: { companionsMs: 500 } };

/** Waits until `runner` logged that it sees `hosts` as its companions (daemon/fleet-watch.ts). */
function seesCompanions(runner: RunnerProcess, hosts: string[]): Promise<unknown> {
  const want = [...hosts].sort().join(',');
  return runner.waitForLog(
    'fleet: companions',
    (l) => (l.companions as string[] | undefined)?.join(',') === want,
    20_000,
  );
}

describe('the first asker of each fire', () => {
  it('a killed one is overtaken after the lead, and every fire has one winner', async () => {
    const config = writeSchedule(
      `namespace: first-asker\njobs:\n` +
        JOBS.map((j) => `  ${j}:\n    schedule: "* * * * * *"\n    command: ["true"]\n`).join(''),
    );
    const runners = await fleet.start(HOSTS, {
      config,
      env: { BATON_LOG_LEVEL: 'debug' },
      timings: TIMINGS,
    });
    await Promise.all(
      runners.map((r) =>
        seesCompanions(
          r,
          HOSTS.filter((h) => h !== r.host),
        ),
      ),
    );

    // srv-3 is killed; the other two still count it alive for up to 15 s.
    const killed = runners[2]!;
    await killed.stop('SIGKILL');
    const after = await fireWindow(fleet.db, 5);
    const rows = (await Promise.all(JOBS.map((j) => runs(fleet.db, j)))).flat();
    const inWindow = rows.filter(
      (r) =>
        r.scheduled_at.getTime() >= after.from.getTime() &&
        r.scheduled_at.getTime() <= after.until.getTime(),
    );
    for (const job of JOBS) {
      const mine = inWindow.filter((r) => r.job === job);
      expectOneWinnerPerFire(mine, job);
      // Every fire of the window was won: nobody waited for the dead runner for nothing.
      expect(
        [...byFire(mine).values()].every((f) => f.some((r) => r.winner === 1)),
        job,
      ).toBe(true);
    }
    const overtaken = inWindow.filter(
      (r) => r.winner === 1 && firstAsker(HOSTS, r.job, r.scheduled_at) === killed.host,
    );
    expect(overtaken.length).toBeGreaterThan(0);
    for (const w of overtaken) {
      expect(w.host).not.toBe(killed.host);
      // The others waited for the lead before they contended (less the clock estimate's error and DATETIME(3)'s truncation).
      const lagMs = w.started_at!.getTime() - w.scheduled_at.getTime();
      expect(lagMs, `${w.job} ${w.scheduled_at.toISOString()}`).toBeGreaterThanOrEqual(
        FIRST_ASKER_LEAD_MS - 5,
      );
    }
  });
});

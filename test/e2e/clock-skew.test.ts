/**
 * The test that the session lock alone fails: one runner's clock is 1.5 s behind (a real skewed
 * clock through libfaketime), far more than the 30 ms job. It reaches each fire after the winner
 * has finished and released the lock, so only the unique fire key stops it from running the fire a
 * second time. Every fire must still have exactly one winner, and every host must compute the same
 * `scheduled_at` — the cron instant itself, whole seconds.
 */
import { describe, expect, it } from 'vitest';
import { writeSchedule } from '../helpers/cli.js';
import { byFire, runs } from '../helpers/db.js';
import { expectQuiet, useFleet } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';

const fleet = useFleet('skew');

describe('a runner whose clock is 1.5 s behind', () => {
  it('never wins a fire that already ran: one winner per fire', async () => {
    const config = writeSchedule(`
jobs:
  tick:
    schedule: "* * * * * *"
    command: ["sleep", "0.03"]
`);
    const db = fleet.db;
    const runners = await fleet.start(['fast-1', 'fast-2', 'late'], { config }, { late: '-1.5' });

    await waitFor(
      'eight fires that the late runner reached after the winner had finished',
      async () =>
        (
          await db.query(
            "SELECT id FROM baton_runs WHERE host = 'late' AND reason LIKE 'this fire already ran on %'",
          )
        ).length >= 8,
      { timeoutMs: 30_000 },
    );
    await Promise.all(runners.map((r) => r.stop('SIGTERM')));

    const rows = await runs(db, 'tick');
    // The skew is real: the late runner writes its rows ~1.5 s after the fire by the database's
    // clock, the others within a fraction of a second.
    const lag = (host: string) => {
      const lags = rows
        .filter((r) => r.host === host)
        .map((r) => r.started_at.getTime() - r.scheduled_at.getTime());
      return lags.sort((a, b) => a - b)[Math.floor(lags.length / 2)]!;
    };
    expect(lag('late')).toBeGreaterThan(1_200);
    expect(lag('fast-1')).toBeLessThan(500);
    expect(lag('fast-2')).toBeLessThan(500);
    expectQuiet(runners);

    for (const row of rows) expect(row.scheduled_at.getUTCMilliseconds()).toBe(0);
    for (const [at, fire] of byFire(rows)) {
      // A fire that came while every runner was still connecting has no attempt, only the
      // `missed` row the first runner to look back wrote for it.
      if (fire.some((r) => r.status === 'missed')) {
        expect(fire, new Date(at).toISOString()).toHaveLength(1);
        expect(fire[0]).toMatchObject({ winner: 0, status: 'missed' });
        continue;
      }
      const winners = fire.filter((r) => r.winner === 1);
      expect(winners, new Date(at).toISOString()).toHaveLength(1);
      expect(new Set(fire.map((r) => r.host)).size, 'one row per host and fire').toBe(fire.length);
    }
    // The late runner met the fire key (not the lock) for the fires it reached after they ran.
    const lateSkips = rows.filter((r) => r.host === 'late' && r.winner === null);
    expect(
      lateSkips.filter((r) => /^this fire already ran on fast-\d \(done\)$/.test(r.reason ?? ''))
        .length,
    ).toBeGreaterThanOrEqual(8);
  });
});

/**
 * Guarantee 1, the heart of baton: three runner processes with the same every-second schedule,
 * and every fire has exactly one winner that ran, two recorded skips, and no fire is missing.
 */
import { describe, expect, it } from 'vitest';
import { writeSchedule } from '../helpers/cli.js';
import { byFire, runs } from '../helpers/db.js';
import { expectQuiet, useFleet } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';

const HOSTS = ['srv-01', 'srv-02', 'srv-03'];
const fleet = useFleet('one_winner');

async function dbNow(): Promise<Date> {
  const [row] = await fleet.db.query<{ now: Date }>('SELECT NOW(3) AS now');
  return row!.now;
}

describe('three runners, one every-second job of ~30 ms', () => {
  it('gives every fire exactly one winner and two skips, with no fire missing', async () => {
    const config = writeSchedule(`
namespace: settle-test
jobs:
  tick:
    schedule: "* * * * * *"
    command: ["sleep", "0.03"]
`);
    const db = fleet.db;
    const runners = await fleet.start(HOSTS, { config });
    const from = await dbNow();
    const until = new Date(from.getTime() + 10_000);
    await waitFor(
      'ten seconds of fires',
      async () =>
        (
          await db.query(
            'SELECT id FROM baton_runs WHERE winner = 1 AND status = ? AND scheduled_at >= ?',
            ['done', until],
          )
        ).length > 0,
      { timeoutMs: 30_000 },
    );
    // Let the last fire's skips land before stopping.
    await waitFor(
      'all attempts of the last fire',
      async () =>
        (
          await db.query(
            'SELECT id FROM baton_runs WHERE scheduled_at = (SELECT MAX(scheduled_at) FROM baton_runs)',
          )
        ).length === 3,
    );
    const codes = await Promise.all(runners.map((r) => r.stop('SIGTERM')));
    expect(codes).toEqual([0, 0, 0]);

    const fires = byFire(
      (await runs(db, 'tick')).filter((r) => r.scheduled_at > from && r.scheduled_at <= until),
    );
    // No fire missing: every whole second in (from, until] is there.
    const expected: number[] = [];
    for (
      let t = Math.floor(from.getTime() / 1000) + 1;
      t <= Math.floor(until.getTime() / 1000);
      t++
    ) {
      expected.push(t * 1000);
    }
    expect(expected).toHaveLength(10);
    expect([...fires.keys()]).toEqual(expected);

    for (const [at, rows] of fires) {
      const label = new Date(at).toISOString();
      const winners = rows.filter((r) => r.winner === 1);
      expect(winners, label).toHaveLength(1);
      expect(winners[0]!.status, label).toBe('done');
      expect(winners[0]!.exit_code, label).toBe(0);
      const skips = rows.filter((r) => r.winner === null);
      expect(
        skips.map((r) => r.status),
        label,
      ).toEqual(['skipped', 'skipped']);
      expect(new Set(rows.map((r) => r.host)), label).toEqual(new Set(HOSTS));
      // A 30 ms job: the others find this very fire being claimed, running, or (if they came
      // late) done — always by the winner.
      for (const skip of skips)
        expect(skip.reason, label).toMatch(
          new RegExp(
            `^(this fire is being claimed by|this fire is running on|this fire already ran on) ${winners[0]!.host} `,
          ),
        );
    }
    expectQuiet(runners);
    const stillRunning = await db.query<{ free: number }>(
      'SELECT COUNT(*) AS free FROM baton_runs WHERE status = ?',
      ['running'],
    );
    expect(stillRunning[0]!.free).toBe(0);
  });
});

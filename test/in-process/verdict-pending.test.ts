/**
 * Bookkeeping never costs a fire (issue 15, found 4). With 500 jobs firing together and a disk
 * busy with fsyncs, 1,396 of 7,500 fires had no winner: every runner skipped them with "an earlier
 * run is still running", though the earlier runs' processes had exited — only their verdicts were
 * still being written. The runner that ran the job skipped because its own run was not over, and
 * the others because that run still held the job's lock (it is released after the verdict).
 *
 * Here the slow verdict is made certain rather than waited for: as soon as a run of a short job
 * (0.2 s, every second) is claimed, the test locks its row (SELECT … FOR UPDATE, under READ
 * COMMITTED so that no other row or gap is locked) and holds it past the next fire's instant —
 * as a server whose writes wait for a slow disk holds the verdict's UPDATE. The next fire must
 * still have its winner: the runner whose run is over but for its verdict waits for the write
 * (bounded by the job's next fire), and then contends as usual. Three runners in the test
 * process, their jobs real processes.
 * The real storm (500 jobs and an fsync writer) is a bench scenario; its figures are in
 * bench/README.md.
 */
import mysql from 'mysql2/promise';
import { describe, expect, it } from 'vitest';
import { writeSchedule } from '../helpers/cli.js';
import { runs } from '../helpers/db.js';
import { expectOneWinnerPerFire } from '../helpers/fires.js';
import { useInProcessFleet } from '../helpers/in-process-fleet.js';
import { sleep, waitFor } from '../helpers/wait.js';

const fleet = useInProcessFleet('verdict_pending');
/** How long after the next fire's instant the verdict is held back. */
const HELD_PAST_NEXT_FIRE_MS = 600;

describe('a fire right after a run whose verdict is slow to write', () => {
  it('has a winner: the run is over, only its bookkeeping was pending', async () => {
    const config = writeSchedule(`
namespace: pending
jobs:
  tick:
    schedule: "* * * * * *"
    overlap: skip
    command: ["sleep", "0.2"]
`);
    const runners = await fleet.start(['a', 'b', 'c'], { config });
    const holder = await mysql.createConnection({ uri: fleet.db.url, timezone: 'Z' });
    try {
      await holder.query('SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED');
      // Past the start-up: a fire whose claim the test sees within 150 ms of being written.
      const held: number[] = [];
      for (let round = 0; round < 3; round++) {
        const row = await waitFor(
          'a fresh running row',
          async () =>
            (await runs(fleet.db, 'tick')).find(
              (r) =>
                r.status === 'running' &&
                r.winner === 1 &&
                !held.includes(r.id) &&
                Date.now() - r.scheduled_at.getTime() < 400,
            ),
          { timeoutMs: 15_000, intervalMs: 10 },
        );
        await holder.beginTransaction();
        await holder.query('SELECT id FROM baton_runs WHERE id = ? FOR UPDATE', [row.id]);
        held.push(row.id);
        const nextFire = row.scheduled_at.getTime() + 1_000;
        await sleep(nextFire + HELD_PAST_NEXT_FIRE_MS - Date.now());
        await holder.commit();
        await sleep(2_000);
      }
      for (const r of runners) await r.stop();
      const rows = await runs(fleet.db, 'tick');
      const heldFires = rows.filter((r) => held.includes(r.id));
      expect(heldFires.map((r) => r.status)).toEqual(['done', 'done', 'done']);
      for (const first of heldFires) {
        const next = first.scheduled_at.getTime() + 1_000;
        const fire = rows.filter((r) => r.scheduled_at.getTime() === next);
        const winners = fire.filter((r) => (r.winner ?? 0) >= 1);
        expect(
          winners.map((w) => w.status),
          `the fire after ${first.scheduled_at.toISOString()} (its verdict held ` +
            `${HELD_PAST_NEXT_FIRE_MS} ms past it): ${fire.map((r) => `${r.host} ${r.status} ${r.reason ?? ''}`).join('; ')}`,
        ).toEqual(['done']);
      }
      expectOneWinnerPerFire(rows, 'tick', { noWinner: ['overlap', 'lock-being-released'] });
    } finally {
      await holder.end().catch(() => {});
    }
  }, 60_000);
});

/**
 * A fire whose claim the database could not take (issue 34, item 5). Another session holds
 * `LOCK TABLES baton_runs READ` across a fire — in life an ALTER, a backup's global read lock, an
 * fsync stall: the runner takes the job's lock, its claim waits on the table lock and misses the
 * statement deadline, the runner gives the lock back without running the job. Its lock session
 * stayed up, so no look-back would ever mark the fire `missed`; before the fix the fire had no row
 * at all and `baton explain` said "nobody attempted it". Now the runner keeps the fire and, once
 * the database answers again, writes one `missed` row of kind `not-claimed` that says why.
 */
import mysql from 'mysql2/promise';
import { afterEach, describe, expect, it } from 'vitest';
import { writeSchedule, type LogLine } from '../helpers/cli.js';
import { baton } from '../helpers/cli-in-process.js';
import { allRuns } from '../helpers/db.js';
import { useInProcessFleet } from '../helpers/in-process-fleet.js';
import { waitFor } from '../helpers/wait.js';

const fleet = useInProcessFleet('norow');
let locker: mysql.Connection | undefined;

afterEach(async () => {
  await locker?.end().catch(() => undefined);
  locker = undefined;
});

describe('a claim the database cannot take in time (LOCK TABLES baton_runs READ)', () => {
  it('is recorded late as one missed row saying why, which explain reports', async () => {
    const config = writeSchedule(`
namespace: norow
jobs:
  tick:
    schedule: "*/10 * * * * *"
    command: ["true"]
`);
    const [runner] = await fleet.start(['h1'], { config });
    // The table lock from a session of the test's own; the fire under test is the first whose
    // claim it holds up (told by the runner's log below, whichever instant that is).
    locker = await mysql.createConnection({ uri: fleet.db.url });
    await locker.query('LOCK TABLES baton_runs READ');

    // The situation: a claim of the runner's really waits on the table lock.
    await waitFor(
      'the claim waits for the table lock',
      async () =>
        (
          await fleet.db.query(
            `SELECT id FROM information_schema.processlist
              WHERE db = ? AND info LIKE 'INSERT INTO baton_runs%' AND state LIKE '%lock%'`,
            [fleet.db.name],
          )
        ).length > 0,
      { timeoutMs: 15_000 },
    );
    // It misses the deadline (10 s), and so does closing a claim that might have committed.
    const failed = await runner!.waitForLog('fire not completed', (l) => l.job === 'tick', 60_000);
    const fire = new Date(String(failed.scheduledAt));
    const instant = fire.getTime();
    expect(String(failed.err)).toContain('no answer from the database within 10000 ms');
    await locker.query('UNLOCK TABLES');

    const recorded = await waitFor(
      'the fire recorded missed',
      async () => {
        const rows = (await allRuns(fleet.db, 'tick')).filter(
          (r) => r.scheduled_at.getTime() === instant,
        );
        return rows.length > 0 ? rows : null;
      },
      { timeoutMs: 40_000 },
    );
    expect(recorded).toHaveLength(1);
    expect(recorded[0]).toMatchObject({
      status: 'missed',
      winner: 0,
      reason_kind: 'not-claimed',
      host: 'h1',
      reason:
        "claim not recorded: the database did not answer within 10 s (h1 held the job's lock; " +
        'the job did not run)',
    });

    const explained = await baton([
      'explain',
      'tick',
      fire.toISOString(),
      '--namespace',
      'norow',
      '--database-url',
      fleet.db.url,
    ]);
    expect(explained.code, explained.stderr).toBe(0);
    expect(explained.stdout).toContain(
      'nobody ran it: claim not recorded: the database did not answer within 10 s',
    );
    expect(explained.stdout).not.toContain('nobody attempted it');

    // Later fires run again; by then the backlog has nothing more for this fire: still one row,
    // written once.
    await waitFor(
      'a later fire done',
      async () =>
        (
          await fleet.db.query(
            "SELECT id FROM baton_runs WHERE job = 'tick' AND winner = 1 AND status = 'done' AND scheduled_at > ?",
            [fire],
          )
        ).length > 0,
      { timeoutMs: 40_000 },
    );
    const ofFire = (l: LogLine) => l.job === 'tick' && l.scheduledAt === fire.toISOString();
    await runner!.waitForLog('late missed row written', ofFire);
    await runner!.stop();
    const rows = (await allRuns(fleet.db, 'tick')).filter(
      (r) => r.scheduled_at.getTime() === instant,
    );
    expect(rows.map((r) => [r.status, r.winner, r.reason_kind])).toEqual([
      ['missed', 0, 'not-claimed'],
    ]);
    expect(
      runner!.lines
        .filter((l) => l.msg === 'late missed row written' && ofFire(l))
        .map((l) => l.wrote),
    ).toEqual([true]);
  }, 150_000);
});

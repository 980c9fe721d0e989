/**
 * Guarantee 2, no overlap: a job that outlasts its interval never runs twice at once — not on one
 * runner (GET_LOCK nests within a session, so the runner must skip its own job before asking),
 * and not across runners. The skip reasons tell the three cases apart.
 */
import { describe, expect, it } from 'vitest';
import { jobLockName } from '../../src/lock-names.js';
import { writeSchedule } from '../helpers/cli.js';
import { byFire, lockIsFree, runs } from '../helpers/db.js';
import { expectNoOverlapInHistory, expectOneWinnerPerFire } from '../helpers/fires.js';
import { expectQuiet } from '../helpers/fleet.js';
import { useInProcessFleet } from '../helpers/in-process-fleet.js';
import {
  expectHistoryMatchesJournal,
  expectNoOverlapInJournal,
  writeJournaledSchedule,
} from '../helpers/ground-truth.js';
import { waitFor } from '../helpers/wait.js';

const fleet = useInProcessFleet('overlap', { perTest: true });

describe('one runner, a 4 s job every 3 s', () => {
  it('skips its own later fires and leaves the lock free after the run', async () => {
    const config = writeSchedule(`
namespace: reentry
jobs:
  slow:
    schedule: "*/3 * * * * *"
    command: ["sleep", "4"]
`);
    const db = fleet.db;
    const runners = await fleet.start(['solo'], { config });
    const lock = jobLockName(db.name, 'reentry', 'slow');

    // The first run ends between two fires (4 s into a 6 s cycle): the lock must be free then.
    // Had the runner called GET_LOCK again for the fire in between, the lock would be nested
    // and one RELEASE_LOCK would leave it held.
    const firstDone = await waitFor(
      'a finished run that had a skipped fire inside it',
      async () => {
        const rows = await runs(db, 'slow');
        const done = rows.find((r) => r.winner === 1 && r.status === 'done');
        if (!done) return undefined;
        const inside = rows.find(
          (r) =>
            r.winner === null &&
            r.scheduled_at > done.started_at &&
            r.scheduled_at < done.finished_at!,
        );
        return inside ? done : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 20 },
    );
    // The verdict is written just before RELEASE_LOCK, so give the release a moment; it must
    // come well before the next fire would take the lock again.
    const nextFire = new Date(firstDone.scheduled_at.getTime() + 6_000);
    await waitFor('the lock to be released', () => lockIsFree(fleet.db, lock), {
      timeoutMs: 5_000,
      intervalMs: 10,
    });
    const [now] = await db.query<{ now: Date }>('SELECT NOW(3) AS now');
    expect(now!.now.getTime(), 'free before the next fire took the lock again').toBeLessThan(
      nextFire.getTime(),
    );

    const skipped = (await runs(db, 'slow')).filter((r) => r.winner === null);
    expect(skipped.length).toBeGreaterThanOrEqual(1);
    for (const s of skipped) {
      expect(s.reason).toMatch(/^an earlier run is still running on solo \(this runner; fire /);
      expect(s.reason_kind).toBe('overlap');
    }

    await runners[0]!.stop();
    expect(await lockIsFree(fleet.db, lock)).toBe(true);
  });
});

describe('three runners, a 2.5 s job every second', () => {
  it('never overlaps two runs, and every host skips the fires in between', async () => {
    const { config, journal } = writeJournaledSchedule(
      (j) => `
jobs:
  long:
    schedule: "* * * * * *"
    command: ${j.yaml({ work: 'sleep 2.5' })}
`,
    );
    const hosts = ['a', 'b', 'c'];
    const db = fleet.db;
    const runners = await fleet.start(hosts, { config });
    await waitFor(
      'three finished runs',
      async () =>
        (await db.query("SELECT id FROM baton_runs WHERE winner = 1 AND status = 'done'")).length >=
        3,
      { timeoutMs: 30_000 },
    );
    // A stop waits for the running job (it is shorter than the grace): no row stays `running`.
    await Promise.all(runners.map((r) => r.stop()));

    const rows = await runs(db, 'long');
    expect(rows.filter((r) => r.status === 'running')).toEqual([]);
    expectQuiet(runners);
    // By the database's times and by the job's own account: the next run starts only after the
    // previous one finished, and each fire ran at most once; fires in between have no winner
    // because a run was going (and true of the run they name).
    expectNoOverlapInHistory(rows, 'long');
    const attempts = journal.attempts('long');
    expectNoOverlapInJournal(attempts, 'long');
    expectHistoryMatchesJournal(rows, attempts, 'long');
    expectOneWinnerPerFire(rows, 'long', { noWinner: ['overlap'] });

    let inBetween = 0;
    for (const [at, fire] of byFire(rows)) {
      const winner = fire.find((r) => r.winner === 1);
      const skips = fire.filter((r) => r.winner === null);
      if (winner) {
        // The others found this very fire claimed by, or running on, the winner.
        for (const s of skips) {
          expect(s.reason, new Date(at).toISOString()).toMatch(
            new RegExp(`^this fire is (being claimed by|running on) ${winner.host} `),
          );
          expect(s.reason_kind).toBe('taken');
        }
      } else if (fire.length === hosts.length) {
        // A fire in the middle of a run: every host skipped it because an earlier run is going.
        inBetween += 1;
        for (const s of skips) {
          expect(s.reason, new Date(at).toISOString()).toMatch(
            /^an earlier run is still running on [abc] /,
          );
          expect(s.reason_kind).toBe('overlap');
        }
      }
    }
    expect(inBetween).toBeGreaterThanOrEqual(4);
  });
});

/**
 * `notify: {after: N}` as the writers of events apply it, on the shared MariaDB: each verdict
 * (store/run-verdicts.ts `finishRun`) and a reaper's `lost` (coordination/reaper.ts, what another
 * runner writes for a run whose runner is gone) counts the job's failures in a row inside its own
 * transaction, and enqueues its event only when the streak says so. What the outbox holds is what
 * will ever be told: a failure not enqueued by its verdict is told by nobody.
 *
 * The rule, verdict by verdict, with N = 3: failures 1 and 2 of a streak enqueue nothing, the 3rd
 * its event, the 4th and later theirs too (the throttle then holds them, as for any job); a success
 * after 3 or more is `recovered`, after fewer nothing; a `killed` run neither counts nor ends a
 * streak. The delivery of it, by real runner processes to a real receiver, is
 * e2e/notify-after.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseDatabaseUrl } from '../../src/config/database-url.js';
import { parseConfig } from '../../src/config/load.js';
import { eventTargets } from '../../src/config/notify-targets.js';
import { reapOrphanRuns } from '../../src/coordination/reaper.js';
import type { FinalStatus } from '../../src/run-status.js';
import { openPool } from '../../src/store/connect.js';
import { DeadlinePool } from '../../src/store/deadline.js';
import { finishRun } from '../../src/store/run-verdicts.js';
import { createTestDatabase, plantRun, type TestDatabase } from '../helpers/db.js';

const NS = 'streaks';
let db: TestDatabase;
let pool: DeadlinePool;

beforeAll(async () => {
  db = await createTestDatabase('notify-after', { migrated: true });
  pool = new DeadlinePool(openPool(parseDatabaseUrl(db.url)), 10_000);
});
afterAll(async () => {
  await pool.end();
  await db.drop();
});

const config = parseConfig(
  '/etc/baton/schedules.yaml',
  `
namespace: ${NS}
notify:
  ops: {command: ["true"]}
jobs:
  settle:
    schedule: "* * * * *"
    command: ["true"]
    notify: {to: [ops], after: 3}
`,
);
const job = config.jobs[0]!;
const targets = eventTargets(job.notify);

/** The fires of the test, a minute apart, a day ago. */
let fires = 0;
const nextFire = () => new Date(Date.now() - 86_400_000 + fires++ * 60_000);

/** A run of `settle` started (as its winner's claim writes it), and its id. */
function started(lockConnectionId: number | null = 4242): Promise<number> {
  return plantRun(db, {
    namespace: NS,
    job: 'settle',
    scheduledAt: nextFire(),
    status: 'running',
    lockConnectionId,
  });
}

/** A run that ends with `status`, its verdict written as its runner writes it. */
async function ran(status: FinalStatus): Promise<number> {
  const id = await started();
  const [row] = await db.query<{ scheduled_at: Date }>(
    'SELECT scheduled_at FROM baton_runs WHERE id = ?',
    [id],
  );
  const wrote = await finishRun(pool, id, {
    status,
    exitCode: status === 'failed' ? 3 : status === 'done' ? 0 : null,
    error: status === 'done' ? null : status,
    outputTail: null,
    notices: {
      scope: { namespace: NS, subject: 'settle', fire: row!.scheduled_at, slot: 1, rerun: 0 },
      targets,
    },
  });
  expect(wrote).toBe(true);
  return id;
}

/** A run whose runner is gone, declared `lost` by another runner's reaper. */
async function lostToTheReaper(): Promise<number> {
  const id = await started(null);
  const reaped = await reapOrphanRuns(pool, {
    namespace: NS,
    job: 'settle',
    serverStartedBefore: new Date(0),
    noticedBy: 'other-runner',
    // As the runner's reaper finds them (daemon/runner.ts): the job's `notify:` of its file.
    targetsOf: (name) => (name === 'settle' ? eventTargets(job.notify) : undefined),
  });
  expect(reaped).toBe(1);
  return id;
}

/** The outbox: each event enqueued, with its run. */
async function told(): Promise<[string, number][]> {
  const rows = await db.query<{ event: string; run_id: number }>(
    'SELECT event, run_id FROM baton_notifications ORDER BY id',
  );
  return rows.map((r) => [r.event, r.run_id]);
}

describe('notify: {after: 3}, verdict by verdict', () => {
  it('tells the 3rd failure in a row and those after it, and a recovery only after such a streak', async () => {
    await ran('failed');
    await ran('failed');
    expect(await told(), 'two failures in a row: nothing yet').toEqual([]);
    const f3 = await ran('failed');
    expect(await told(), 'the third in a row').toEqual([['failed', f3]]);
    // The 4th: told as any failure is (the throttle holds it, and the recovery folds it in).
    const t4 = await ran('timeout');
    expect(await told()).toEqual([
      ['failed', f3],
      ['timeout', t4],
    ]);
    const s5 = await ran('done');
    expect((await told()).at(-1), 'a success after four failures').toEqual(['recovered', s5]);

    // A success after two failures: no streak was told, so no recovery either.
    const before = (await told()).length;
    await ran('failed');
    await ran('failed');
    await ran('done');
    expect(await told(), 'two failures, then a success').toHaveLength(before);

    // A lost run declared by another runner's reaper counts, and is judged, the same way.
    await ran('failed');
    expect(await told()).toHaveLength(before);
    await lostToTheReaper();
    expect(await told(), 'a failure and a lost run: two in a row').toHaveLength(before);
    const lost = await lostToTheReaper();
    expect((await told()).at(-1), 'the third in a row, lost').toEqual(['lost', lost]);
    const s = await ran('done');
    expect((await told()).at(-1)).toEqual(['recovered', s]);

    // An operator's kill between failures neither counts nor ends the streak.
    const count = (await told()).length;
    await ran('failed');
    await plantRun(db, {
      namespace: NS,
      job: 'settle',
      scheduledAt: nextFire(),
      status: 'killed',
      finishedAt: new Date(),
    });
    await ran('failed');
    expect(await told()).toHaveLength(count);
    const third = await ran('failed');
    expect((await told()).slice(count)).toEqual([['failed', third]]);
  });

  it("a run declared lost after the next fire's success is judged by the fires before it", async () => {
    await ran('done');
    const before = (await told()).length;
    await ran('failed');
    await ran('failed');
    // The third fire's run hangs; its runner dies; the next fire's run succeeds before any
    // reaper has looked (a late reaper: the claim of the next fire missed it).
    const hung = await started(null);
    await ran('done');
    expect(await told(), 'the success followed two failures: nothing to recover from').toHaveLength(
      before,
    );
    const reaped = await reapOrphanRuns(pool, {
      namespace: NS,
      job: 'settle',
      serverStartedBefore: new Date(0),
      noticedBy: 'other-runner',
      targetsOf: () => targets,
    });
    expect(reaped).toBe(1);
    // By fire, the lost run is the third failure in a row: the success after it does not end it.
    expect((await told()).slice(before)).toEqual([['lost', hung]]);
  });
});

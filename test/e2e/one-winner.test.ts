/**
 * Guarantee 1, the heart of baton: one winner per fire.
 *
 * 1. Three runner processes with the same every-second schedule: every fire has exactly one
 *    winner that ran (by the job's own journal, not only baton's rows), two recorded skips that
 *    name it, and no fire is missing.
 * 2. The fire key, which the lock alone does not give. One runner reaches the server through a
 *    slow link (200 ms each way): it asks for the lock of each fire after the near runner's 10 ms
 *    job has finished and released it, so the lock is free — and only the unique fire key stops a
 *    second run. The test checks that this situation really happened (the far runner sent claims
 *    — which only a lock holder does — for fires it did not win), then that no fire ran twice.
 *    It happens for the fires the far runner asks first for (coordination/first-asker.ts: for the
 *    others it looks for the winner before it asks for the lock), so the window is one where it
 *    asks first for most of them.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { firstAsker } from '../../src/coordination/first-asker.js';
import { dbNow, runs, sharedServerAddress } from '../helpers/db.js';
import { expectCompleteFires, expectOneWinnerPerFire } from '../helpers/fires.js';
import { expectQuiet, useFleet } from '../helpers/fleet.js';
import {
  expectHistoryMatchesJournal,
  expectNoOverlapInJournal,
  writeJournaledSchedule,
} from '../helpers/ground-truth.js';
import { loggedStatements, statementLogEnv } from '../helpers/statements.js';
import { useTcpProxy } from '../helpers/tcp-proxy.js';
import { waitFor } from '../helpers/wait.js';

const HOSTS = ['srv-01', 'srv-02', 'srv-03'];
// Empty databases (as a fresh install has): the three runners migrate at start, together, which
// is tested here and nowhere else with several runners.
const fleet = useFleet('one_winner', { perTest: true, migrated: false });

/**
 * Waits until a winner of a fire after `until` is done and every host attempted the last fire of
 * the `everyMs` grid at or before `until`.
 */
async function waitPast(until: Date, hosts: number, everyMs = 1_000): Promise<void> {
  await waitFor(
    'the fires of the window, each attempted by every runner',
    async () => {
      const rows = await fleet.db.query<{ n: number }>(
        'SELECT COUNT(*) AS n FROM baton_runs WHERE scheduled_at = ?',
        [new Date(Math.floor(until.getTime() / everyMs) * everyMs)],
      );
      const later = await fleet.db.query(
        "SELECT id FROM baton_runs WHERE winner = 1 AND status = 'done' AND scheduled_at > ?",
        [until],
      );
      return Number(rows[0]!.n) === hosts && later.length > 0;
    },
    // A window may begin some seconds ahead (see the slow link's): wait for it too.
    { timeoutMs: Math.max(30_000, until.getTime() - Date.now() + 20_000) },
  );
}

describe('three runners, one every-second job of ~30 ms', () => {
  it('gives every fire exactly one winner and two skips, with no fire missing', async () => {
    const { config, journal } = writeJournaledSchedule(
      (j) => `
namespace: settle-test
jobs:
  tick:
    schedule: "* * * * * *"
    command: ${j.yaml({ work: 'sleep 0.03' })}
`,
    );
    const db = fleet.db;
    const runners = await fleet.start(HOSTS, { config });
    const from = await dbNow(fleet.db);
    const until = new Date(from.getTime() + 10_000);
    await waitPast(until, HOSTS.length);
    const codes = await Promise.all(runners.map((r) => r.stop('SIGTERM')));
    expect(codes).toEqual([0, 0, 0]);

    const rows = (await runs(db, 'tick')).filter(
      (r) => r.scheduled_at > from && r.scheduled_at <= until,
    );
    const after = new Date(from.getTime() + 1); // the window is (from, until]
    expectCompleteFires(rows, 'tick', { from: after, until, everyMs: 1_000, hosts: HOSTS });
    expectOneWinnerPerFire(rows, 'tick');
    // The window's fires, by the job's own account: each started once, never two at a time.
    const attempts = journal.attempts('tick', { from: after, until });
    expectNoOverlapInJournal(journal.attempts('tick'), 'tick');
    expectHistoryMatchesJournal(rows, attempts, 'tick');

    for (const winner of rows.filter((r) => r.winner === 1)) {
      const label = winner.scheduled_at.toISOString();
      // Exactly one: the window is complete and every fire has its winner (no missed fire).
      expect(winner, label).toMatchObject({ status: 'done', exit_code: 0 });
      const skips = rows.filter(
        (r) => r.winner === null && r.scheduled_at.getTime() === winner.scheduled_at.getTime(),
      );
      expect(
        skips.map((r) => r.status),
        label,
      ).toEqual(['skipped', 'skipped']);
      // A 30 ms job: the others find this very fire being claimed, running, or (if they came
      // late) done — always by the winner.
      for (const skip of skips)
        expect(skip.reason, label).toMatch(
          new RegExp(
            `^(this fire is being claimed by|this fire is running on|this fire already ran on) ${winner.host} `,
          ),
        );
    }
    expect(rows.filter((r) => r.winner === 1)).toHaveLength(10);
    expectQuiet(runners);
    expect((await runs(db)).filter((r) => r.status === 'running')).toEqual([]);
  });
});

describe('a runner behind a slow link (200 ms each way), beside a near one', () => {
  // Far enough that the near run (10 ms), begun a lead (50 ms) after the instant, has ended and
  // released the lock, with a wide margin, when the far runner's GET_LOCK arrives; fires 2 s apart, so that the far runner, a dozen
  // round trips per fire, keeps up.
  const LINK_MS = 200;
  const proxy = useTcpProxy(sharedServerAddress, {
    upMs: LINK_MS,
    downMs: LINK_MS,
  });

  it('finds the lock free after a short job and meets the fire key: no fire runs twice', async () => {
    const { config, journal } = writeJournaledSchedule(
      (j) => `
namespace: far
jobs:
  short:
    schedule: "*/2 * * * * *"
    command: ${j.yaml({ work: 'sleep 0.01' })}
`,
    );
    const db = fleet.db;
    const debug = { BATON_LOG_LEVEL: 'debug' };
    const [near] = await fleet.start(['near'], { config, env: debug });
    // The far runner logs the statements it sends: a claim (the winner row's INSERT) is sent
    // only by a runner that got the job's lock, so each claim of a fire it did not win is a fire
    // it found the lock free for, stopped by the fire key alone.
    const statementLog = path.join(journal.dir, 'far-statements');
    const [far] = await fleet.start(['far'], {
      config,
      databaseUrl: proxy().url(db.name),
      env: { ...statementLogEnv(statementLog, 120), ...debug },
    });
    // Only a fire the far runner asks first for (coordination/first-asker.ts) is one it asks the
    // lock for before looking: the near runner, 50 ms later, finds no winner yet (the far
    // GET_LOCK is still on its way), wins and is done before that GET_LOCK arrives. So the
    // window begins once each sees the other, where the far runner asks first for most fires.
    await Promise.all([
      near!.waitForLog('fleet: companions', (l) => String(l.companions) === 'far'),
      far!.waitForLog('fleet: companions', (l) => String(l.companions) === 'near'),
    ]);
    const farAsksFirst = (t: number) => firstAsker(['near', 'far'], 'short', new Date(t)) === 'far';
    // The far runner's claims of fires it did not win: each one a fire it found the lock free
    // for, stopped by the fire key alone (only a lock holder sends a claim, the winner row's
    // INSERT). Its claims of fires before the window count too.
    const lostToKey = async () => {
      const claims = loggedStatements(statementLog, 0, Infinity).filter((sql) =>
        /^INSERT INTO baton_runs \(namespace, job, scheduled_at, (rerun, )?winner, triggered_by, status, host, pid/.test(
          sql,
        ),
      );
      const farWins = (await runs(db, 'short')).filter((r) => r.host === 'far' && r.winner === 1);
      return claims.length - farWins.length;
    };
    const alreadyRan = (rows: Awaited<ReturnType<typeof runs>>) =>
      rows.filter((r) => r.host === 'far' && r.reason === 'this fire already ran on near (done)')
        .length;
    // From the next fire, for 14 s at least and until the far runner asked first for 5 of them;
    // then on, fire by fire, until the situation the key is for happened 4 times. Under the full
    // suite's load the near run sometimes still holds the lock when the far GET_LOCK arrives (a
    // "lock held" skip, the lock doing the work): a fixed window saw 3 now and then. Bounded, so
    // a key that never meets a free lock still fails here.
    const start = Math.ceil(((await dbNow(fleet.db)).getTime() + 1_000) / 2_000) * 2_000;
    let end = start + 14_000;
    const farFirsts = () =>
      Array.from({ length: (end - start) / 2_000 + 1 }, (_, i) => start + i * 2_000).filter(
        farAsksFirst,
      ).length;
    while (farFirsts() < 5) end += 2_000;
    const latest = end + 30_000;
    const from = new Date(start);
    await waitPast(new Date(end), 2, 2_000);
    for (;;) {
      const inWindow = (await runs(db, 'short')).filter(
        (r) => r.scheduled_at >= from && r.scheduled_at.getTime() <= end,
      );
      // 5 while the runners run: a claim still on its way (200 ms) is logged before its row is
      // there, so one the far runner is about to win counts here as lost for a moment.
      if ((await lostToKey()) >= 5 && alreadyRan(inWindow) >= 4) break;
      if (end >= latest) break; // the assertions below say what was missing
      do end += 2_000;
      while (!farAsksFirst(end) && end < latest);
      await waitPast(new Date(end), 2, 2_000);
    }
    const until = new Date(end);
    expect(await Promise.all([near!.stop('SIGTERM'), far!.stop('SIGTERM')])).toEqual([0, 0]);

    const all = await runs(db, 'short');
    const rows = all.filter((r) => r.scheduled_at >= from && r.scheduled_at <= until);
    expectCompleteFires(rows, 'short', { from, until, everyMs: 2_000, hosts: ['near', 'far'] });
    expectOneWinnerPerFire(rows, 'short', { noWinner: ['overlap', 'lock-being-released'] });
    expectNoOverlapInJournal(journal.attempts('short'), 'short');
    expectHistoryMatchesJournal(rows, journal.attempts('short', { from, until }), 'short');

    // The situation the key is for: the far runner held the lock of fires the near runner had
    // already run, several times — and ran none of them.
    expect(await lostToKey(), 'claims the far runner lost to the fire key').toBeGreaterThanOrEqual(
      4,
    );
    expect(alreadyRan(rows)).toBeGreaterThanOrEqual(4);
    expectQuiet([near!, far!]);
  }, 150_000); // start-up, the companions' first look (5 s), and a window of 14–60 s
});

/**
 * Each fire's first asker (coordination/first-asker.ts), with three runners built in the test
 * process (in-process-fleet.ts) and twelve every-second jobs:
 *
 * - Once every runner sees the other two in the registry, each fire is won by its first asker —
 *   the runner the rendezvous hash names — and the instant's fires are spread over all three,
 *   where first come, first served let one runner's single GET_LOCK statement take most of them.
 * - A companion's jobs, as the first asker reads them from the registry, are those it runs.
 *
 * A first asker killed with `kill -9` (overtaken after the lead) needs a runner process to kill:
 * e2e/first-asker.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { firstAsker } from '../../src/coordination/first-asker.js';
import { parseDatabaseUrl } from '../../src/config/database-url.js';
import type { FireRef } from '../../src/fire/fire-events.js';
import { openPool } from '../../src/store/connect.js';
import { DeadlinePool } from '../../src/store/deadline.js';
import { migrateDatabase } from '../../src/store/migrate.js';
import { jobsOfRunners } from '../../src/store/runners.js';
import { writeSchedule } from '../helpers/cli.js';
import { dbNow, runs, type RunRow } from '../helpers/db.js';
import { expectQuiet } from '../helpers/fleet.js';
import { useInProcessFleet, type InProcessRunner } from '../helpers/in-process-fleet.js';
import { waitFor } from '../helpers/wait.js';

const HOSTS = ['srv-1', 'srv-2', 'srv-3'];
const JOBS = Array.from({ length: 12 }, (_, i) => `job-${String(i).padStart(2, '0')}`);
/**
 * The runners look at their companions this often (default 5 s): they see each other sooner.
 * The others contend 400 ms after the first asker (default 50 ms): three runners share this
 * process's event loop, and on a saturated machine a first asker came later than 50 ms after its
 * instant for most fires (0.23 of them won by it, once). What is judged is who asks first, not
 * how soon; the lead's cost is the bench's (fire-lag).
 */
const TIMINGS = { fleetWatch: { companionsMs: 500 }, dispatcher: { firstAskerLeadMs: 400 } };
const fleet = useInProcessFleet('first_asker');

/** Waits until `runner` logged that it sees `hosts` as its companions (daemon/fleet-watch.ts). */
function seesCompanions(runner: InProcessRunner, hosts: string[]): Promise<unknown> {
  const want = [...hosts].sort().join(',');
  return runner.waitForLog(
    'fleet: companions',
    (l) => (l.companions as string[] | undefined)?.join(',') === want,
    20_000,
  );
}

/**
 * The fires each runner decided (won, skipped or could not attempt), as `job@instant` keys, from
 * now on: a fire is decided by the fleet once every runner has decided it, its rows written.
 */
function decidedFires(runners: InProcessRunner[]): Map<string, Set<string>> {
  const decided = new Map(runners.map((r) => [r.host, new Set<string>()]));
  const key = (f: FireRef) => `${f.job}@${f.scheduledAt.getTime()}`;
  for (const r of runners) {
    const mine = decided.get(r.host)!;
    for (const name of ['fire:won', 'fire:skipped', 'fire:notAttempted'] as const) {
      r.runner.events.on(name, (e: { fire: FireRef }) => mine.add(key(e.fire)));
    }
  }
  return decided;
}

/** The winner rows of every fire from `from` to `until` (instants), by fire. */
async function winnersBetween(from: Date, until: Date): Promise<RunRow[]> {
  const rows: RunRow[] = [];
  for (const job of JOBS) rows.push(...(await runs(fleet.db, job)));
  return rows.filter(
    (r) =>
      r.winner === 1 &&
      r.scheduled_at.getTime() >= from.getTime() &&
      r.scheduled_at.getTime() <= until.getTime(),
  );
}

/** The next `seconds` instants, once every runner has decided every job's fire of each. */
async function fireWindow(
  decided: Map<string, Set<string>>,
  seconds: number,
): Promise<{ from: Date; until: Date }> {
  const now = await dbNow(fleet.db);
  const from = new Date(Math.ceil(now.getTime() / 1000) * 1000 + 1000);
  const until = new Date(from.getTime() + (seconds - 1) * 1000);
  const fires = JOBS.flatMap((job) =>
    Array.from({ length: seconds }, (_, i) => `${job}@${from.getTime() + i * 1000}`),
  );
  await waitFor(
    `the fires up to ${until.toISOString()} decided by every runner`,
    () => [...decided.values()].every((mine) => fires.every((f) => mine.has(f))),
    { timeoutMs: seconds * 1000 + 20_000 },
  );
  return { from, until };
}

describe('the first asker of each fire', () => {
  it('wins its fires, spread over the fleet', async () => {
    const config = writeSchedule(
      `namespace: first-asker\njobs:\n` +
        JOBS.map((j) => `  ${j}:\n    schedule: "* * * * * *"\n    command: ["true"]\n`).join(''),
    );
    const runners = await fleet.start(HOSTS, { config, runner: { timings: TIMINGS } });
    const decided = decidedFires(runners);
    await Promise.all(
      runners.map((r) =>
        seesCompanions(
          r,
          HOSTS.filter((h) => h !== r.host),
        ),
      ),
    );

    // Every runner sees the other two: each fire is its first asker's.
    const steady = await fireWindow(decided, 6);
    const won = await winnersBetween(steady.from, steady.until);
    expect(won.length).toBeGreaterThanOrEqual(JOBS.length * 5);
    const byFirstAsker = won.filter(
      (w) => w.host === firstAsker(HOSTS, w.job, w.scheduled_at),
    ).length;
    // A first asker slower than the lead may be overtaken now and then. First come, first
    // served would match it for about a third of the fires (sd 0.06 over 60 fires): 0.6 is far
    // from that.
    expect(byFirstAsker / won.length).toBeGreaterThan(0.6);
    const share = new Map(HOSTS.map((h) => [h, won.filter((w) => w.host === h).length]));
    for (const [host, n] of share) expect(n, `${host}'s fires`).toBeGreaterThan(won.length / 6);

    await Promise.all(runners.map((r) => r.stop()));
    expectQuiet(runners);
  });
});

describe("a companion's jobs", () => {
  it('are those it runs: not a job it registered disabled (it never asks for one)', async () => {
    const target = parseDatabaseUrl(fleet.db.url);
    await migrateDatabase(target);
    const pool = new DeadlinePool(openPool(target), 10_000);
    try {
      const row = (host: string, schedule: object) =>
        fleet.db.query(
          `INSERT INTO baton_runners (namespace, host, pid, version, started_at, last_seen_at, schedule)
           VALUES ('companion-jobs', ?, 1, 'test', NOW(3), NOW(3), ?)`,
          [host, JSON.stringify(schedule)],
        );
      await row('now', {
        on: { fp: 'a', since: '2026-12-05T00:00:00.000Z' },
        off: { fp: 'b', since: null },
      });
      // A runner of an older version registered bare fingerprints: every job counts.
      await row('older', { on: 'a', off: 'b' });
      expect(await jobsOfRunners(pool, 'companion-jobs', ['now', 'older', 'absent'])).toEqual(
        new Map([
          ['now', ['on']],
          ['older', ['on', 'off']],
        ]),
      );
    } finally {
      await pool.end();
    }
  });
});

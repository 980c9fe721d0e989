/**
 * Each fire's first asker (coordination/first-asker.ts), with three runners built in the test
 * process (in-process-fleet.ts) and twelve every-second jobs:
 *
 * - Once every runner sees the other two in the registry, each fire's first asker — the runner
 *   the rendezvous hash names — contends at the instant, the others only after the lead: no fire
 *   is won by another runner before the lead is over, first askers win fires before it, and
 *   every runner wins fires (first come, first served let one runner's single GET_LOCK statement
 *   take most of an instant's). How many a first asker wins depends on the machine's load (a
 *   first asker later than the lead is overtaken): judged is the order of asking, which does not.
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
const LEAD_MS = 400;
const TIMINGS = { fleetWatch: { companionsMs: 500 }, dispatcher: { firstAskerLeadMs: LEAD_MS } };
/**
 * How far a runner's idea of the database's clock may be off (daemon/clock.ts: it fires by the
 * database's time, from round trips of a few ms on this host); a row's `started_at` is the
 * database's.
 */
const CLOCK_TOLERANCE_MS = 50;
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

/** How long after its fire's instant a winner started (database time). */
const startedAfterInstantMs = (w: RunRow) => w.started_at.getTime() - w.scheduled_at.getTime();

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

    // Every runner sees the other two: each fire is its first asker's unless its first asker
    // came later than the lead. How often that happens depends on the machine's load, so what is
    // judged is the order of asking, which does not: no other runner won a fire before the lead
    // was over, and first askers did win fires before it (a fleet where every runner waited the
    // lead, or none did, fails one or the other). Windows are looked at until one shows a first
    // asker's early win: on a saturated machine, first askers may all be late for a while.
    let won: RunRow[] = [];
    let earlyByFirstAsker: RunRow[] = [];
    for (let window = 0; window < 5 && earlyByFirstAsker.length === 0; window++) {
      const steady = await fireWindow(decided, 6);
      won = await winnersBetween(steady.from, steady.until);
      expect(won.length).toBeGreaterThanOrEqual(JOBS.length * 5);
      const isFirstAsker = (w: RunRow) => w.host === firstAsker(HOSTS, w.job, w.scheduled_at);
      for (const w of won.filter((r) => !isFirstAsker(r))) {
        expect(
          startedAfterInstantMs(w),
          `${w.job}@${w.scheduled_at.toISOString()}: won by ${w.host}, not its first asker`,
        ).toBeGreaterThanOrEqual(LEAD_MS - CLOCK_TOLERANCE_MS);
      }
      earlyByFirstAsker = won.filter(
        (w) => isFirstAsker(w) && startedAfterInstantMs(w) < LEAD_MS - CLOCK_TOLERANCE_MS,
      );
    }
    expect(
      earlyByFirstAsker.length,
      'fires won by their first asker before the lead',
    ).toBeGreaterThan(0);
    // Spread over the fleet: every runner won fires (first come, first served let one runner's
    // single GET_LOCK statement take most of an instant's).
    for (const host of HOSTS) {
      expect(won.filter((w) => w.host === host).length, `${host}'s fires`).toBeGreaterThan(0);
    }

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

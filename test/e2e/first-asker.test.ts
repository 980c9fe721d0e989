/**
 * Each fire's first asker (coordination/first-asker.ts), with three real runners and twelve
 * every-second jobs:
 *
 * - Once every runner sees the other two in the registry, each fire is won by its first asker —
 *   the runner the rendezvous hash names — and the instant's fires are spread over all three,
 *   where first come, first served let one runner's single GET_LOCK statement take most of them.
 * - A first asker killed (`kill -9`) is overtaken: while the others still count it among the
 *   living (the registry's 15 s), its fires are won by them after the lead, never before it, and
 *   every fire still has exactly one winner.
 */
import { describe, expect, it } from 'vitest';
import { FIRST_ASKER_LEAD_MS, firstAsker } from '../../src/coordination/first-asker.js';
import { writeSchedule, type RunnerProcess } from '../helpers/cli.js';
import { byFire, dbNow, runs, type RunRow } from '../helpers/db.js';
import { expectOneWinnerPerFire } from '../helpers/fires.js';
import { useFleet } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';
import { parseDatabaseUrl } from '../../src/config/database-url.js';
import { openPool } from '../../src/store/connect.js';
import { DeadlinePool } from '../../src/store/deadline.js';
import { migrateDatabase } from '../../src/store/migrate.js';
import { jobsOfRunners } from '../../src/store/runners.js';

const HOSTS = ['srv-1', 'srv-2', 'srv-3'];
const JOBS = Array.from({ length: 12 }, (_, i) => `job-${String(i).padStart(2, '0')}`);
const fleet = useFleet('first_asker');

/** Waits until `runner` logged that it sees `hosts` as its companions (daemon/fleet-watch.ts). */
function seesCompanions(runner: RunnerProcess, hosts: string[]): Promise<unknown> {
  const want = [...hosts].sort().join(',');
  return runner.waitForLog(
    'fleet: companions',
    (l) => (l.companions as string[] | undefined)?.join(',') === want,
    20_000,
  );
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

async function fireWindow(seconds: number): Promise<{ from: Date; until: Date }> {
  const now = await dbNow(fleet.db);
  const from = new Date(Math.ceil(now.getTime() / 1000) * 1000 + 1000);
  const until = new Date(from.getTime() + (seconds - 1) * 1000);
  await waitFor(
    `the fires up to ${until.toISOString()} decided`,
    async () => (await dbNow(fleet.db)).getTime() > until.getTime() + 2_000,
    { timeoutMs: seconds * 1000 + 20_000 },
  );
  return { from, until };
}

describe('the first asker of each fire', () => {
  it('wins its fires, spread over the fleet; a killed one is overtaken after the lead', async () => {
    const config = writeSchedule(
      `namespace: first-asker\njobs:\n` +
        JOBS.map((j) => `  ${j}:\n    schedule: "* * * * * *"\n    command: ["true"]\n`).join(''),
    );
    const runners = await fleet.start(HOSTS, {
      config,
      env: { BATON_LOG_LEVEL: 'debug' },
    });
    await Promise.all(
      runners.map((r) =>
        seesCompanions(
          r,
          HOSTS.filter((h) => h !== r.host),
        ),
      ),
    );

    // 1. Every runner sees the other two: each fire is its first asker's.
    const steady = await fireWindow(6);
    const won = await winnersBetween(steady.from, steady.until);
    expect(won.length).toBeGreaterThanOrEqual(JOBS.length * 5);
    const byFirstAsker = won.filter(
      (w) => w.host === firstAsker(HOSTS, w.job, w.scheduled_at),
    ).length;
    // A first asker slower than the lead (a loaded machine) may be overtaken now and then: 0.79
    // of 72 under the full suite's load once. First come, first served would match it for about
    // a third of the fires (sd 0.06 over 60 fires): 0.6 is far from both.
    expect(byFirstAsker / won.length).toBeGreaterThan(0.6);
    const share = new Map(HOSTS.map((h) => [h, won.filter((w) => w.host === h).length]));
    for (const [host, n] of share) expect(n, `${host}'s fires`).toBeGreaterThan(won.length / 6);

    // 2. srv-3 is killed; the other two still count it alive for up to 15 s.
    const killed = runners[2]!;
    await killed.stop('SIGKILL');
    const after = await fireWindow(5);
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

/**
 * What the tests of the fleet's inspection and controls (`baton pause/resume/list/history/explain/
 * show`) share, in the in-process tier (in-process/inspect.test.ts) and the process tier
 * (e2e/inspect.test.ts, the runners that are killed or frozen): the CLI as the operator `ops`, its
 * JSON, and the rows of a job's fires.
 */
import { expect } from 'vitest';
import type { CliResult } from './cli.js';
import { baton } from './cli-in-process.js';
import { byFire, dbNow, runs, type RunRow, type TestDatabase } from './db.js';
import { waitFor } from './wait.js';

/**
 * `baton <args> --config <config> --database-url <db's>`, as the operator `ops` (SUDO_USER: the
 * person who ran sudo is the one recorded).
 */
export function inspectCli(
  db: TestDatabase,
  config: string,
  ...args: string[]
): Promise<CliResult> {
  return baton([...args, '--config', config, '--database-url', db.url], {
    env: { SUDO_USER: 'ops' },
  });
}

/** The command's JSON, once it said nothing on stderr and exited 0. */
export function json<T>(r: CliResult): T {
  expect(r.stderr, r.stderr).toBe('');
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout) as T;
}

/** Rows of `job` at fires in [from, to), grouped by fire. */
export async function firesBetween(
  db: TestDatabase,
  job: string,
  from: Date,
  to = new Date(8.64e15),
): Promise<Map<number, RunRow[]>> {
  return byFire((await runs(db, job)).filter((r) => r.scheduled_at >= from && r.scheduled_at < to));
}

/** The first fire at or after `from` that has `count` rows (a `done` winner), once it has them. */
export async function fireWithRows(
  db: TestDatabase,
  job: string,
  from: Date,
  count: number,
): Promise<[Date, RunRow[]]> {
  return waitFor(
    `a fire of ${job} from ${from.toISOString()} with ${count} rows`,
    async () => {
      for (const [at, rows] of await firesBetween(db, job, from)) {
        if (rows.length === count && rows.some((r) => r.winner === 1 && r.status === 'done')) {
          return [new Date(at), rows] as [Date, RunRow[]];
        }
      }
      return null;
    },
    { timeoutMs: 20_000 },
  );
}

/** `baton explain --json`. */
export interface ExplainJson {
  job: string;
  scheduledAt: string | null;
  latestFromSchedule?: boolean;
  notes?: string[];
  verdict: string;
  attempts: { host: string; winner: boolean; status: string; reason: string | null }[];
  missing: string[];
  missingRunners: { host: string; state: string; alive: boolean; detail: string }[];
}

/** `baton list --json`. */
export interface ListJson {
  jobs: {
    name: string;
    paused: boolean | null;
    pause: { pausedBy: string; pausedAt: string; reason: string | null } | null;
  }[];
}

/**
 * Waits until `at` is past by the database's clock: an instant a test asks about as past (an
 * instant between fires) would otherwise be a fire to come when the command is quick.
 */
export async function untilPast(db: TestDatabase, at: Date): Promise<void> {
  await waitFor(`${at.toISOString()} to be past`, async () => (await dbNow(db)) > at, {
    intervalMs: 50,
  });
}

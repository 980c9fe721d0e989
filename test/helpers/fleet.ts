/**
 * The common set-up of an end-to-end file: a database of its own on the shared server, and the
 * runner processes its tests start — all killed (if a test left them running) and the database
 * dropped afterwards, per file or per test. The database is migrated (a copy of the schema
 * template, db.ts) unless `migrated: false` asks for an empty one, as a fresh install has.
 */
import { afterAll, afterEach, beforeAll, beforeEach, expect } from 'vitest';
import { startRunner, type RunnerProcess, type StartRunnerOptions } from './cli.js';
import { createTestDatabase, type TestDatabase } from './db.js';

export interface Fleet {
  readonly db: TestDatabase;
  /** Starts one runner per host on the fleet's database and waits until all have started. */
  start(
    hosts: string[],
    options: Omit<StartRunnerOptions, 'host' | 'databaseUrl'> & { databaseUrl?: string },
    clockOffsets?: Record<string, string>,
  ): Promise<RunnerProcess[]>;
}

export function useFleet(label: string, { perTest = false, migrated = true } = {}): Fleet {
  let db: TestDatabase | undefined;
  const runners: RunnerProcess[] = [];
  (perTest ? beforeEach : beforeAll)(async () => {
    db = await createTestDatabase(label, { migrated });
  });
  (perTest ? afterEach : afterAll)(async () => {
    await Promise.all(runners.splice(0).map((r) => r.stop('SIGKILL')));
    await db?.drop();
  });
  return {
    get db() {
      if (!db) throw new Error('the fleet database exists only inside tests');
      return db;
    },
    async start(hosts, options, clockOffsets = {}) {
      const started = hosts.map((host) =>
        startRunner({
          databaseUrl: this.db.url,
          ...options,
          host,
          ...(clockOffsets[host] != null ? { clockOffset: clockOffsets[host] } : {}),
        }),
      );
      runners.push(...started);
      await Promise.all(started.map((r) => r.ready()));
      return started;
    },
  };
}

/** A runner process, or one in the test process (in-process-fleet.ts), which has no stderr. */
type QuietRunner = Pick<RunnerProcess, 'host' | 'errors'> & { stderr?: string };

/** Every runner logged nothing at error level and printed nothing to stderr. */
export function expectQuiet(runners: readonly QuietRunner[]): void {
  for (const runner of runners) {
    expect(runner.errors(), runner.host).toEqual([]);
    // A runner in the test process has no stderr of its own: its log is all it says.
    if (runner.stderr != null) expect(runner.stderr, runner.host).toBe('');
  }
}

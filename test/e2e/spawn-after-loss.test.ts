/**
 * Never spawn without the lock (issue 15, found 2): a job must not start once its runner's lock
 * session is gone. The soak saw jobs start 2–8 ms after "lock session lost", when a server
 * shutdown hit a fire instant: the lock session was checked only once the job's process existed,
 * and the job was then aborted — after it had begun its work.
 *
 * The window is made certain here instead of waited for: the fire pipeline (`startFire`, exactly
 * as `baton start` and `baton run` use it) runs in this process against the real server, with a
 * pool that, right after the fire's claim is inserted, KILLs the fire's lock session and waits
 * until the session knows it is gone. The job (a command, spawned through the spawner) writes a
 * marker at its first step and ignores SIGTERM, so a job that was started leaves the marker
 * whatever the abort does. The fire must end with its row `lost`, "not started", no marker, and
 * the lock free.
 */
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseDatabaseUrl, type DatabaseTarget } from '../../src/config/database-url.js';
import { parseConfig } from '../../src/config/load.js';
import type { FireContext } from '../../src/coordination/fire-protocol.js';
import { openCoordination } from '../../src/coordination/open-coordination.js';
import { Spawner } from '../../src/execution/spawner-client.js';
import { LocalRuns } from '../../src/fire/local-runs.js';
import { startFire } from '../../src/fire/run-fire.js';
import { jobLockName } from '../../src/lock-names.js';
import { openPool } from '../../src/store/connect.js';
import { DeadlinePool, type Queryable } from '../../src/store/deadline.js';
import { createTestDatabase, runs, type TestDatabase } from '../helpers/db.js';
import { sleep, waitFor } from '../helpers/wait.js';

const NAMESPACE = 'spawnloss';
let db: TestDatabase;
let target: DatabaseTarget;
let pool: DeadlinePool;

beforeAll(async () => {
  db = await createTestDatabase('spawn_loss');
  target = parseDatabaseUrl(db.url);
  pool = new DeadlinePool(openPool(target, 2), 10_000);
});

/** The spawner a runner would own (the job must never reach it). */
const spawner = new Spawner();

afterAll(async () => {
  spawner.close();
  await pool?.end().catch(() => {});
  await db?.drop();
});

/** A contender as `baton run` opens one: the file's pool and a lock session of its own. */
async function contender(): Promise<FireContext> {
  const { lock } = await openCoordination(target, pool);
  return {
    database: target.database,
    namespace: NAMESPACE,
    host: 'alpha',
    pid: process.pid,
    pool,
    lock,
  };
}

/**
 * `pool`, except that the first claim of a run (the INSERT of a `running` row) is followed by a
 * KILL of `ctx`'s lock session, and answers only once the session has seen it.
 */
function killingAfterClaim(ctx: () => FireContext): Queryable {
  let done = false;
  return {
    async query<T>(sql: string, values?: never) {
      const answer = await pool.query<T>(sql, values);
      if (!done && /INSERT INTO baton_runs/i.test(sql) && /'running'/.test(sql)) {
        done = true;
        const { lock } = ctx();
        await db.query('KILL ?', [lock.connectionId]);
        await waitFor('the lock session to see its KILL', () => !lock.usable, {
          timeoutMs: 5_000,
          intervalMs: 5,
        });
      }
      return answer;
    },
  };
}

describe('a fire whose lock session dies while it is claimed', () => {
  it('does not start the job: the row is lost, "not started", and nothing ran', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'baton-spawn-loss-'));
    const marker = path.join(dir, 'started');
    const config = parseConfig(
      path.join(dir, 'schedules.yaml'),
      `
namespace: ${NAMESPACE}
jobs:
  job:
    schedule: "0 0 1 1 *"
    command: ["sh", "-c", "trap '' TERM; echo started > ${marker}; sleep 2"]
`,
    );
    const job = config.jobs.find((j) => j.name === 'job')!;
    const ctx = await contender();
    const { lock } = ctx;
    ctx.pool = killingAfterClaim(() => ctx);
    const scheduledAt = new Date(Math.floor(Date.now() / 1000) * 1000 - 60_000);
    try {
      const fire = startFire(job, scheduledAt, {
        trigger: 'manual',
        context: () => ctx,
        runs: new LocalRuns(),
        launchers: { spawner },
      });
      const outcome = await fire.outcome;
      // A job that had been started would have written it by now, SIGTERM or not.
      await sleep(500);
      expect(existsSync(marker), 'the job was started after its lock session was lost').toBe(false);
      expect(outcome.status).toBe('ran');
      if (outcome.status !== 'ran') return;
      expect(outcome.result.status).toBe('lost');
      expect(outcome.result.error).toMatch(
        /^lost: not started: the runner's lock session ended before the job was started/,
      );
      const [row] = await runs(db, 'job');
      expect(row).toMatchObject({ status: 'lost', host: 'alpha', winner: 1 });
      expect(row!.error).toMatch(/^lost: not started: /);
      const [free] = await db.query<{ free: number }>('SELECT IS_FREE_LOCK(?) AS free', [
        jobLockName(db.name, NAMESPACE, 'job'),
      ]);
      expect(Number(free!.free)).toBe(1);
    } finally {
      await lock.close();
    }
  });
});

// An operator's foreground fire (`baton backfill`, `baton run`) whose Ctrl-C came while its lock
// was being taken: the fire is claimed, but its job must not start (foreground-fire.ts).
describe('a fire whose owner was asked to stop while it was claimed', () => {
  it('does not start the job: the row is interrupted, "not started", and the lock is free', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'baton-spawn-interrupted-'));
    const marker = path.join(dir, 'started');
    const config = parseConfig(
      path.join(dir, 'schedules.yaml'),
      `
namespace: ${NAMESPACE}
jobs:
  asked:
    schedule: "0 0 1 1 *"
    command: ["sh", "-c", "echo started > ${marker}"]
`,
    );
    const job = config.jobs.find((j) => j.name === 'asked')!;
    const ctx = await contender();
    const { lock } = ctx;
    let asked = 0;
    try {
      const fire = startFire(job, new Date(Math.floor(Date.now() / 1000) * 1000 - 60_000), {
        trigger: 'manual',
        context: () => ctx,
        runs: new LocalRuns(),
        launchers: { spawner },
        interruptBeforeStart: () => {
          asked++;
          return 'SIGINT came while the lock was being taken';
        },
      });
      const outcome = await fire.outcome;
      expect(asked).toBe(1);
      expect(outcome.status).toBe('ran');
      if (outcome.status !== 'ran') return;
      expect(outcome.result).toMatchObject({
        status: 'interrupted',
        error: 'interrupted: not started: SIGINT came while the lock was being taken',
      });
      const [row] = await runs(db, 'asked');
      expect(row).toMatchObject({ status: 'interrupted', host: 'alpha', winner: 1 });
      const [free] = await db.query<{ free: number }>('SELECT IS_FREE_LOCK(?) AS free', [
        jobLockName(db.name, NAMESPACE, 'asked'),
      ]);
      expect(Number(free!.free)).toBe(1);
      // Nothing was spawned: the job would have written its marker at once.
      await sleep(300);
      expect(existsSync(marker), 'the job was started after the stop was asked').toBe(false);
    } finally {
      await lock.close();
    }
  });
});

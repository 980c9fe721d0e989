/**
 * Claims of many fires in one statement (store/fire-writes.ts), by two runners over the same fire
 * keys on a server that interleaves multi-row inserts: it needs a private server started with
 * `--innodb-autoinc-lock-mode=2`. The other batching tests, the runners' among them, run in the
 * test process: in-process/batching.test.ts.
 */
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPool } from '../../src/store/connect.js';
import { parseDatabaseUrl } from '../../src/config/database-url.js';
import { DeadlinePool } from '../../src/store/deadline.js';
import { migrateDatabase } from '../../src/store/migrate.js';
import { claimFires, type Claim } from '../../src/store/fire-writes.js';
import { startPrivateServer, type PrivateServer } from '../helpers/private-server.js';

describe('claims of two runners over the same fire keys, interleaved autoinc locking', () => {
  // `innodb_autoinc_lock_mode = 2` (MySQL 8's default) lets two multi-row inserts run side by
  // side; in opposite key orders they deadlock. Claims are inserted in fire-key order, and a
  // rolled-back batch falls back to one insert per claim: no claim is ever given up.
  let server: PrivateServer | undefined;
  beforeAll(async () => {
    server = await startPrivateServer({ args: ['--innodb-autoinc-lock-mode=2'] });
  }, 60_000);
  afterAll(async () => {
    await server?.destroy();
  });

  it('every claim gets an answer, each fire exactly one winner', async () => {
    const admin = await mysql.createConnection({ uri: server!.url });
    await admin.query('CREATE DATABASE interleaved');
    await admin.end();
    const target = parseDatabaseUrl(`${server!.url}/interleaved`);
    await migrateDatabase(target);
    const pools = [1, 2].map(() => new DeadlinePool(openPool(target), 10_000));
    try {
      const jobs = Array.from({ length: 60 }, (_, i) => `shared${String(i).padStart(2, '0')}`);
      for (let round = 0; round < 30; round++) {
        const at = new Date(Date.UTC(2021, 0, 1) + round * 1000);
        const claimOf = (host: string, job: string): Claim => ({
          attempt: { namespace: 'x', job, scheduledAt: at, trigger: 'schedule', host, pid: 1 },
          lockConnectionId: host === 'h1' ? 1 : 2,
        });
        // Opposite orders; h2 also claims a job only it holds the lock of.
        const [one, two] = await Promise.all([
          claimFires(
            pools[0]!,
            jobs.map((j) => claimOf('h1', j)),
          ),
          claimFires(
            pools[1]!,
            [...jobs]
              .reverse()
              .map((j) => claimOf('h2', j))
              .concat(claimOf('h2', 'mine')),
          ),
        ]);
        expect(two.at(-1)).toEqual({ runId: expect.any(Number) as number });
        for (const [i] of jobs.entries()) {
          const answers = [one[i], two[jobs.length - 1 - i]];
          expect(
            answers.filter((a) => a === 'taken'),
            `round ${round}, ${jobs[i]}`,
          ).toHaveLength(1);
        }
      }
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
  }, 60_000);
});

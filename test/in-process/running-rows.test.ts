/**
 * What a winner reads beside its GET_LOCK (store/run-verdicts.ts `findRunningRuns`, used by
 * coordination/fire-protocol.ts): every `running` row of the job, each with whether its runner
 * was gone when read — by the same test as the reaper's (its session lock free, or no session).
 * The winner trusts the read only when every row in it was already gone: a row whose runner was
 * alive then may have died between the read and the lock the winner took, and is read again.
 * Against the shared MariaDB, a session lock held by a connection of the test's own.
 */
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { sessionLockName } from '../../src/lock-names.js';
import { findRunningRuns } from '../../src/store/run-verdicts.js';
import { createTestDatabase, plantRun, type TestDatabase } from '../helpers/db.js';

let db: TestDatabase;
let runner: mysql.Connection;

beforeAll(async () => {
  db = await createTestDatabase('running_rows', { migrated: true });
  runner = await mysql.createConnection({ uri: db.url });
});
afterAll(async () => {
  await runner.end().catch(() => undefined);
  await db.drop();
});

it('names every running row of the job, alive or gone, and no other job or namespace', async () => {
  const [[{ id: session }]] = (await runner.query('SELECT CONNECTION_ID() AS id')) as unknown as [
    [{ id: number }],
  ];
  await runner.query('SELECT GET_LOCK(?, 0)', [sessionLockName(session)]);
  // Each its own fire (one winner row per fire), a minute apart.
  let fires = 0;
  const fire = () => new Date(Date.now() - ++fires * 60_000);
  const plant = (job: string, lockConnectionId: number | null, namespace = 'rr') =>
    plantRun(db, {
      namespace,
      job,
      scheduledAt: fire(),
      status: 'running',
      host: 'h1',
      lockConnectionId,
    });
  const alive = await plant('settle', session);
  const dead = await plant('settle', null);
  await plant('other', null);
  await plant('settle', null, 'elsewhere');
  await plantRun(db, { namespace: 'rr', job: 'settle', scheduledAt: fire(), status: 'done' });

  const read = async () =>
    (await findRunningRuns(db.conn, 'rr', ['settle']))
      .map((r) => [r.id, r.gone] as const)
      .sort((a, b) => a[0] - b[0]);
  expect(await read()).toEqual([
    [alive, false],
    [dead, true],
  ]);
  // The runner's session ends (its lock session killed, its process gone): gone at the next read.
  await runner.end();
  await expect.poll(read, { timeout: 10_000 }).toEqual([
    [alive, true],
    [dead, true],
  ]);
});

/**
 * Lock names are server-wide. A job name of 100 characters still gets a lock name MySQL accepts
 * (at most 64 characters), and the same job in two databases on one server — two environments,
 * or two test files — never blocks the other.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jobLockName, LOCK_NAME_MAX } from '../../src/lock-names.js';
import { baton, writeSchedule } from '../helpers/cli.js';
import { createTestDatabase, runs, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/wait.js';

const JOB = `settle-${'x'.repeat(93)}`; // 100 characters
let blue: TestDatabase;
let green: TestDatabase;

beforeAll(async () => {
  [blue, green] = await Promise.all([
    createTestDatabase('scope_blue'),
    createTestDatabase('scope_green'),
  ]);
});
afterAll(async () => {
  await Promise.all([blue.drop(), green.drop()]);
});

describe('lock names', () => {
  it('a 100-character job gets a valid lock name that the run really holds', async () => {
    expect(JOB).toHaveLength(100);
    const name = jobLockName(blue.name, 'prod', JOB);
    expect(name.length).toBeLessThanOrEqual(LOCK_NAME_MAX);
    expect(name).toMatch(/^baton:settle-x+:[0-9a-f]{16}$/);

    const config = writeSchedule(
      `namespace: prod\njobs:\n  ${JOB}:\n    schedule: "0 3 * * *"\n    command: ["sleep", "1.5"]\n`,
    );
    const running = baton(['run', JOB, '--config', config, '--database-url', blue.url]);
    const holder = await waitFor('the lock to be taken', async () => {
      const [row] = await blue.query<{ holder: number | null }>(
        'SELECT IS_USED_LOCK(?) AS holder',
        [name],
      );
      return row!.holder;
    });
    expect((await running).code).toBe(0);
    const [row] = await runs(blue, JOB);
    expect(row).toMatchObject({ job: JOB, winner: 1, status: 'done' });
    // The row records the lock session that held the lock, so a reaper can check it later.
    const [full] = await blue.query<{ lock_connection_id: number }>(
      'SELECT lock_connection_id FROM baton_runs WHERE id = ?',
      [row!.id],
    );
    expect(Number(full!.lock_connection_id)).toBe(Number(holder));
  });

  it('the same job in two databases on one server runs in both at once', async () => {
    const job = (seconds: number) =>
      `namespace: prod\njobs:\n  settle:\n    schedule: "0 3 * * *"\n    command: ["sleep", "${seconds}"]\n`;
    const config = writeSchedule(job(10));
    const quick = writeSchedule(job(0.1));
    const blueLock = jobLockName(blue.name, 'prod', 'settle');
    expect(blueLock).not.toBe(jobLockName(green.name, 'prod', 'settle'));
    const inBlue = baton(['run', 'settle', '--config', config, '--database-url', blue.url]);
    await waitFor('blue to hold its lock', async () => {
      const [row] = await blue.query<{ holder: number | null }>(
        'SELECT IS_USED_LOCK(?) AS holder',
        [blueLock],
      );
      return row!.holder;
    });
    // While blue's run holds its lock, green's run of the same job does not even wait.
    const inGreen = await baton([
      'run',
      'settle',
      '--config',
      quick,
      '--database-url',
      green.url,
      '--wait',
      '0',
    ]);
    expect(inGreen.code).toBe(0);
    const [blueRow] = await runs(blue, 'settle');
    expect(blueRow!.status, 'blue still running when green finished').toBe('running');
    expect((await inBlue).code).toBe(0);
  });

  it('two namespaces in one database do not share a lock either', () => {
    expect(jobLockName(blue.name, 'prod', 'settle')).not.toBe(
      jobLockName(blue.name, 'staging', 'settle'),
    );
  });
});

describe('naming the holder of a lock', () => {
  it('names a live registered runner only: a stale registry row with the same connection id is not it', async () => {
    const config = writeSchedule(
      'namespace: holder\njobs:\n  j:\n    schedule: "0 3 * * *"\n    command: ["true"]\n',
    );
    const run = () => baton(['run', 'j', '--config', config, '--database-url', green.url]);
    expect((await run()).code).toBe(0); // creates the schema
    // Some session holds the job's lock and has no row yet (a run between GET_LOCK and INSERT).
    const lockName = jobLockName(green.name, 'holder', 'j');
    const [me] = await green.query<{ id: number }>('SELECT CONNECTION_ID() AS id');
    await green.query('SELECT GET_LOCK(?, 0)', [lockName]);
    try {
      // A runner that stopped years ago, whose session had the same connection id (connection
      // ids start again with every server start).
      await green.query(
        `INSERT INTO baton_runners (namespace, host, pid, version, started_at, last_seen_at,
           stopped_at, clock_offset_ms, lock_connection_id, schedule)
         VALUES ('holder', 'stopped-in-2020', 1, '0.0.0', '2020-01-01', '2020-01-01', '2020-01-01',
           0, ?, '{}')`,
        [me!.id],
      );
      const skipped = await run();
      expect(skipped.code).toBe(75);
      expect(skipped.stderr).not.toContain('stopped-in-2020');
      expect(skipped.stderr).toContain(`the lock is held by connection ${me!.id}`);
    } finally {
      await green.query('SELECT RELEASE_LOCK(?)', [lockName]);
    }
  });
});

/**
 * Seed 002, `forEachSkipLocked`: four worker PROCESSES over 120 places (20 ms of work each)
 * process every place exactly once with no deadlock error, each taking a share. One row per
 * transaction: a failing callback rolls its row back (and the error reaches the caller), a
 * callback that forgets to mark its row is caught instead of looping, an aborted signal stops
 * the loop between rows, and a deadlock inside the callback is rolled back and retried. The
 * documented pitfall is shown too: a select no index can serve lets one worker lock every row.
 */
import mysql, { type Pool } from 'mysql2/promise';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { forEachSkipLocked } from '../../src/sdk/index.js';
import { results, startWorkers } from '../fixtures/sdk-spawn.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

let db: TestDatabase;
let pool: Pool;

beforeAll(async () => {
  db = await createTestDatabase('sdk_skip');
  pool = mysql.createPool({ uri: db.url, connectionLimit: 6, timezone: 'Z' });
});
afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

beforeEach(async () => {
  await db.query('DROP TABLE IF EXISTS place, job_log, acct');
  await db.query(`CREATE TABLE place (
    id INT NOT NULL PRIMARY KEY, name VARCHAR(50) NOT NULL, processed_at DATETIME(3) NULL,
    KEY todo (processed_at, id)
  ) ENGINE=InnoDB`);
  await db.query(`CREATE TABLE job_log (
    id BIGINT AUTO_INCREMENT PRIMARY KEY, place_id INT NOT NULL, worker VARCHAR(32) NOT NULL
  ) ENGINE=InnoDB`);
});

async function places(n: number): Promise<void> {
  await db.query(
    `INSERT INTO place (id, name)
     WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < ?)
     SELECT n, CONCAT('place ', n) FROM s`,
    [n],
  );
}

const TODO = 'SELECT * FROM place WHERE processed_at IS NULL ORDER BY id';

async function markDone(conn: mysql.Connection, id: number): Promise<void> {
  await conn.query('UPDATE place SET processed_at = UTC_TIMESTAMP(3) WHERE id = ?', [id]);
}

describe('four worker processes over 120 places', () => {
  it('process every place exactly once, without a deadlock, each taking a share', async () => {
    await places(120);
    const { workers, go } = await startWorkers(
      ['p0', 'p1', 'p2', 'p3'].map((worker) => ({
        mode: 'skip-locked',
        url: db.url,
        worker,
        workMs: 20,
      })),
    );
    go();
    // A deadlock (or any error) would make a worker exit non-zero: results() throws then.
    const out = await results(workers);

    const [log] = await db.query<{ n: number; places: number }>(
      'SELECT COUNT(*) AS n, COUNT(DISTINCT place_id) AS places FROM job_log',
    );
    expect(Number(log!.n)).toBe(120);
    expect(Number(log!.places)).toBe(120);
    const [left] = await db.query<{ n: number }>(
      'SELECT COUNT(*) AS n FROM place WHERE processed_at IS NULL',
    );
    expect(Number(left!.n)).toBe(0);
    const counts = out.map((r) => r.rows);
    expect(counts.reduce((a, b) => a + b, 0)).toBe(120);
    const perWorker = await db.query<{ worker: string; n: number }>(
      'SELECT worker, COUNT(*) AS n FROM job_log GROUP BY worker',
    );
    for (const r of out) {
      expect(perWorker.find((p) => p.worker === r.worker)?.n, r.worker).toBe(r.rows);
      // A fair share is 30; every worker got a real part of the work (none below a third).
      expect(r.rows, `${r.worker} of ${JSON.stringify(counts)}`).toBeGreaterThanOrEqual(10);
    }
  });
});

describe('one row per transaction', () => {
  it('rolls back the failing row, keeps the ones before, and throws the error', async () => {
    await places(5);
    let seen = 0;
    const failing = forEachSkipLocked<{ id: number }>(pool, { select: TODO }, async (p, conn) => {
      seen++;
      await conn.query('INSERT INTO job_log (place_id, worker) VALUES (?, ?)', [p.id, 'x']);
      if (p.id === 3) throw new Error('the API for place 3 is down');
      await markDone(conn, p.id);
    });
    await expect(failing).rejects.toThrow('the API for place 3 is down');
    expect(seen).toBe(3);
    const done = await db.query<{ id: number }>(
      'SELECT id FROM place WHERE processed_at IS NOT NULL ORDER BY id',
    );
    expect(done.map((r) => r.id)).toEqual([1, 2]);
    const logged = await db.query<{ place_id: number }>('SELECT place_id FROM job_log ORDER BY id');
    expect(logged.map((r) => r.place_id)).toEqual([1, 2]); // place 3's insert rolled back

    // The next run picks up where it failed, and returns how many it did.
    const n = await forEachSkipLocked<{ id: number }>(pool, { select: TODO }, (p, conn) =>
      markDone(conn, p.id),
    );
    expect(n).toBe(3);
  });

  it('stops with a clear error when the callback leaves its row matching the select', async () => {
    await places(3);
    let calls = 0;
    await expect(
      forEachSkipLocked(pool, { select: TODO }, async () => {
        calls++;
      }),
    ).rejects.toThrow(/returned the row just processed, unchanged; the callback must update it/);
    expect(calls).toBe(1);
  });

  it('honours maxRows and params, and stops between rows once the signal is aborted', async () => {
    await places(10);
    const two = await forEachSkipLocked<{ id: number }>(
      pool,
      {
        select: 'SELECT * FROM place WHERE processed_at IS NULL AND id > ? ORDER BY id',
        params: [5],
        maxRows: 2,
      },
      (p, conn) => markDone(conn, p.id),
    );
    expect(two).toBe(2);
    const controller = new AbortController();
    const ids: number[] = [];
    const aborted = forEachSkipLocked<{ id: number }>(
      pool,
      { select: TODO, signal: controller.signal },
      async (p, conn) => {
        ids.push(p.id);
        if (ids.length === 2) controller.abort(new Error('timeout'));
        await markDone(conn, p.id);
      },
    );
    await expect(aborted).rejects.toThrow('timeout');
    expect(ids).toEqual([1, 2]);
    const done = await db.query<{ id: number }>(
      'SELECT id FROM place WHERE processed_at IS NOT NULL ORDER BY id',
    );
    // The row in hand when the signal came was finished and committed.
    expect(done.map((r) => r.id)).toEqual([1, 2, 6, 7]);
  });

  it('rolls back and retries a row whose callback deadlocked', async () => {
    await places(2);
    await db.query('CREATE TABLE acct (id INT PRIMARY KEY, balance INT NOT NULL) ENGINE=InnoDB');
    await db.query('INSERT INTO acct VALUES (1, 0), (2, 0)');
    // Both callbacks lock one account, wait until the other holds its own, then take the other:
    // a lock cycle InnoDB breaks by rolling one transaction back.
    let arrived = 0;
    let release!: () => void;
    const bothHoldOne = new Promise<void>((r) => (release = r));
    let calls = 0;
    const work = (first: number, second: number) =>
      forEachSkipLocked<{ id: number }>(pool, { select: TODO, maxRows: 1 }, async (p, conn) => {
        calls++;
        await conn.query('UPDATE acct SET balance = balance + 1 WHERE id = ?', [first]);
        if (++arrived === 2) release();
        await bothHoldOne;
        await conn.query('UPDATE acct SET balance = balance + 1 WHERE id = ?', [second]);
        await markDone(conn, p.id);
      });
    const [a, b] = await Promise.all([work(1, 2), work(2, 1)]);
    expect([a, b]).toEqual([1, 1]);
    expect(calls, 'one callback ran twice: its first run deadlocked and was rolled back').toBe(3);
    const accts = await db.query<{ balance: number }>('SELECT balance FROM acct ORDER BY id');
    expect(accts.map((r) => r.balance)).toEqual([2, 2]); // the rolled-back run left nothing
    const [left] = await db.query<{ n: number }>(
      'SELECT COUNT(*) AS n FROM place WHERE processed_at IS NULL',
    );
    expect(Number(left!.n)).toBe(0);
  });

  it('refuses a connection with an open transaction (START TRANSACTION would commit it)', async () => {
    await places(1);
    await db.conn.beginTransaction();
    try {
      await expect(forEachSkipLocked(db.conn, { select: TODO }, async () => {})).rejects.toThrow(
        /a transaction is open on this connection/,
      );
    } finally {
      await db.conn.rollback();
    }
  });
});

describe('the index pitfall (docs/job-sdk.md)', () => {
  it('without an index serving the ORDER BY, the first worker locks every row and the second sees none', async () => {
    await places(20);
    const select = 'SELECT * FROM place WHERE processed_at IS NULL ORDER BY name'; // no index on name
    const seenBySecond: number[] = [];
    let release!: () => void;
    const hold = new Promise<void>((r) => (release = r));
    let holding!: () => void;
    const firstHolds = new Promise<void>((r) => (holding = r));
    const first = forEachSkipLocked<{ id: number }>(
      pool,
      { select, maxRows: 1 },
      async (p, conn) => {
        holding();
        await hold;
        await markDone(conn, p.id);
      },
    );
    await firstHolds;
    const second = await forEachSkipLocked<{ id: number }>(pool, { select }, async (p, conn) => {
      seenBySecond.push(p.id);
      await markDone(conn, p.id);
    });
    release();
    expect(await first).toBe(1);
    // 19 rows were waiting, yet the second worker found nothing and stopped.
    expect(second).toBe(0);
    expect(seenBySecond).toEqual([]);
  });
});

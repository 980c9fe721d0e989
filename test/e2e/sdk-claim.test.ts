/**
 * Seed 000, claiming work rows: `claimRows` hands each row to exactly one worker — proven with
 * four worker PROCESSES claiming 1,000 rows at once (one process can never show the race): every
 * row is logged once and the shares are fair. A claim reads back only its own batch (worker +
 * per-call token). `reclaimStale` gives a dead worker's rows back only once they are older than
 * the bound, by the database's clock, and the dead worker's token can no longer complete them.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  claimRows,
  completeClaim,
  reclaimStale,
  releaseClaim,
  type ClaimTable,
} from '../../src/sdk/index.js';
import { results, startWorkers } from '../fixtures/sdk-spawn.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/wait.js';

const queue: ClaimTable = { table: 'reward_job', orderBy: 'job_no' };

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('sdk_claim');
});
afterAll(async () => {
  await db?.drop();
});

beforeEach(async () => {
  await db.query('DROP TABLE IF EXISTS reward_job, claim_log');
  await db.query(`CREATE TABLE reward_job (
    job_no INT NOT NULL PRIMARY KEY,
    uid VARCHAR(50) NOT NULL,
    kind VARCHAR(16) NOT NULL DEFAULT 'item',
    status VARCHAR(16) NOT NULL DEFAULT 'ready',
    worker_id VARCHAR(191) NULL,
    claim_token CHAR(36) NULL,
    claimed_at DATETIME(3) NULL,
    KEY status_job (status, job_no),
    KEY claim_token (claim_token)
  ) ENGINE=InnoDB`);
  await db.query(`CREATE TABLE claim_log (
    id BIGINT AUTO_INCREMENT PRIMARY KEY, job_no INT NOT NULL, worker VARCHAR(191) NOT NULL
  ) ENGINE=InnoDB`);
});

async function queueJobs(n: number, kind = 'item'): Promise<void> {
  const [{ max }] = (await db.query<{ max: number | null }>(
    'SELECT MAX(job_no) AS max FROM reward_job',
  )) as [{ max: number | null }];
  const start = (max ?? 0) + 1;
  await db.query(
    `INSERT INTO reward_job (job_no, uid, kind)
     WITH RECURSIVE s(n) AS (SELECT ? UNION ALL SELECT n + 1 FROM s WHERE n < ?)
     SELECT n, CONCAT('u', n), ? FROM s`,
    [start, start + n - 1, kind],
  );
}

async function statusCounts(): Promise<Record<string, number>> {
  const rows = await db.query<{ status: string; n: number }>(
    'SELECT status, COUNT(*) AS n FROM reward_job GROUP BY status',
  );
  return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
}

describe('four worker processes over 1,000 queued rows', () => {
  it('claim every row exactly once, in fair shares, and complete all of them', async () => {
    await queueJobs(1000);
    const names = ['w1', 'w2', 'w3', 'w4'];
    const { workers, go } = await startWorkers(
      names.map((worker) => ({ mode: 'claim', url: db.url, worker, queue, limit: 5, workMs: 5 })),
    );
    go();
    const out = await results(workers);

    // Each row processed once: 1,000 log rows, 1,000 distinct jobs, none twice.
    const [log] = await db.query<{ n: number; jobs: number }>(
      'SELECT COUNT(*) AS n, COUNT(DISTINCT job_no) AS jobs FROM claim_log',
    );
    expect(Number(log!.n)).toBe(1000);
    expect(Number(log!.jobs)).toBe(1000);
    expect(await statusCounts()).toEqual({ done: 1000 });

    // Every worker's claimed rows are exactly the rows it logged, and the table agrees.
    const perWorker = await db.query<{ worker_id: string; n: number }>(
      'SELECT worker_id, COUNT(*) AS n FROM reward_job GROUP BY worker_id ORDER BY worker_id',
    );
    const logged = await db.query<{ worker: string; n: number }>(
      'SELECT worker, COUNT(*) AS n FROM claim_log GROUP BY worker ORDER BY worker',
    );
    const shares = Object.fromEntries(perWorker.map((r) => [r.worker_id, Number(r.n)]));
    expect(Object.fromEntries(logged.map((r) => [r.worker, Number(r.n)]))).toEqual(shares);
    for (const r of out) {
      expect(r.mode).toBe('claim');
      if (r.mode !== 'claim') continue;
      expect(r.rows, `${r.worker} reported what the table says`).toBe(shares[r.worker]);
      expect(r.lost, `${r.worker} lost no claim`).toBe(0);
      // Fair-ish: a fair share is 250; none below half of it (the seed: 142/138/145 of 425).
      expect(r.rows, `${r.worker}'s share (${JSON.stringify(shares)})`).toBeGreaterThanOrEqual(125);
    }
  });
});

describe('one worker', () => {
  it('gets an empty claim when nothing is ready, and touches nothing', async () => {
    const empty = await claimRows(db.conn, { ...queue, worker: 'w', limit: 10 });
    expect(empty.rows).toEqual([]);
    await queueJobs(3);
    await db.query("UPDATE reward_job SET status = 'done'");
    const none = await claimRows(db.conn, { ...queue, worker: 'w', limit: 10 });
    expect(none.rows).toEqual([]);
    expect(await statusCounts()).toEqual({ done: 3 });
  });

  it('reads back only the batch it just claimed, not its earlier ones', async () => {
    await queueJobs(10);
    const first = await claimRows<{ job_no: number }>(db.conn, { ...queue, worker: 'w', limit: 4 });
    const second = await claimRows<{ job_no: number; claim_token: string }>(db.conn, {
      ...queue,
      worker: 'w',
      limit: 4,
    });
    expect(first.rows.map((r) => r.job_no)).toEqual([1, 2, 3, 4]);
    expect(second.rows.map((r) => r.job_no)).toEqual([5, 6, 7, 8]);
    expect(second.token).not.toBe(first.token);
    expect(new Set(second.rows.map((r) => r.claim_token))).toEqual(new Set([second.token]));
    // The last claim gets what is left, fewer than asked.
    const last = await claimRows(db.conn, { ...queue, worker: 'w', limit: 4 });
    expect(last.rows).toHaveLength(2);
  });

  it('claims only rows matching the extra condition', async () => {
    await queueJobs(3, 'item');
    await queueJobs(3, 'coupon');
    const coupons = await claimRows<{ job_no: number; kind: string }>(db.conn, {
      ...queue,
      where: 'kind = ?',
      params: ['coupon'],
      worker: 'w',
      limit: 10,
    });
    expect(coupons.rows.map((r) => r.job_no)).toEqual([4, 5, 6]);
    expect(await statusCounts()).toEqual({ ready: 3, working: 3 });
  });

  it('completes or releases only the rows of its claim', async () => {
    await queueJobs(6);
    const a = await claimRows<{ job_no: number }>(db.conn, { ...queue, worker: 'a', limit: 3 });
    const b = await claimRows<{ job_no: number }>(db.conn, { ...queue, worker: 'b', limit: 3 });
    expect(await completeClaim(db.conn, queue, a, { ids: [1, 2], idColumn: 'job_no' })).toBe(2);
    expect(await releaseClaim(db.conn, queue, a)).toBe(1); // job 3 goes back
    expect(await completeClaim(db.conn, queue, b, { status: 'failed' })).toBe(3);
    const rows = await db.query<{ job_no: number; status: string; worker_id: string | null }>(
      'SELECT job_no, status, worker_id FROM reward_job ORDER BY job_no',
    );
    expect(rows.map((r) => `${r.job_no}:${r.status}:${r.worker_id}`)).toEqual([
      '1:done:a',
      '2:done:a',
      '3:ready:null',
      '4:failed:b',
      '5:failed:b',
      '6:failed:b',
    ]);
  });
});

describe('a worker killed while holding claims', () => {
  it("gets its rows reclaimed after the bound, not before, and can't complete them after", async () => {
    await queueJobs(8);
    const { workers, go } = await startWorkers([
      { mode: 'claim-and-hang', url: db.url, worker: 'dead', queue, limit: 5 },
    ]);
    const dead = workers[0]!;
    go();
    const claimed = await waitFor('the doomed worker to claim', () => dead.messages[0]);
    expect(claimed).toMatchObject({ mode: 'claim-and-hang', rows: 5 });
    dead.child.kill('SIGKILL');
    await dead.exited;
    const token = claimed.mode === 'claim-and-hang' ? claimed.token : '';

    // Just claimed: a 60 s bound gives nothing back. 59 s old (the database clock says so):
    // still nothing. 61 s old: all five.
    expect(await reclaimStale(db.conn, queue, { olderThanMs: 60_000 })).toBe(0);
    const age = (s: number) =>
      db.query(
        "UPDATE reward_job SET claimed_at = UTC_TIMESTAMP(3) - INTERVAL ? SECOND WHERE worker_id = 'dead'",
        [s],
      );
    await age(59);
    expect(await reclaimStale(db.conn, queue, { olderThanMs: 60_000 })).toBe(0);
    expect(await statusCounts()).toEqual({ ready: 3, working: 5 });
    await age(61);
    expect(await reclaimStale(db.conn, queue, { olderThanMs: 60_000 })).toBe(5);
    expect(await statusCounts()).toEqual({ ready: 8 });
    const [left] = await db.query<{ n: number }>(
      'SELECT COUNT(*) AS n FROM reward_job WHERE worker_id IS NOT NULL OR claim_token IS NOT NULL OR claimed_at IS NOT NULL',
    );
    expect(Number(left!.n)).toBe(0);

    // A live worker claims them again (the same, oldest jobs); the dead claim completes nothing.
    const again = await claimRows<{ job_no: number }>(db.conn, {
      ...queue,
      worker: 'live',
      limit: 5,
    });
    expect(again.rows.map((r) => r.job_no)).toEqual([1, 2, 3, 4, 5]);
    expect(await completeClaim(db.conn, queue, { token })).toBe(0);
    expect(await completeClaim(db.conn, queue, again)).toBe(5);
  });

  it('by the real clock too: reclaimed once the claim is older than the bound', async () => {
    await queueJobs(2);
    await claimRows(db.conn, { ...queue, worker: 'gone', limit: 2 });
    const [{ claimedAt }] = (await db.query<{ claimedAt: Date }>(
      'SELECT MIN(claimed_at) AS claimedAt FROM reward_job',
    )) as [{ claimedAt: Date }];
    const now = async () =>
      ((await db.query<{ t: Date }>('SELECT UTC_TIMESTAMP(3) AS t'))[0]!.t as Date).getTime();
    const bound = 1500;
    await waitFor(
      'the claim to be reclaimed',
      async () => {
        const before = await now();
        const n = await reclaimStale(db.conn, queue, { olderThanMs: bound });
        const after = await now();
        // Not before the bound: a poll that got nothing started before the claim was old enough;
        // one that got the rows ended after it was.
        if (n === 0) expect(before - claimedAt.getTime()).toBeLessThan(bound + 1);
        else expect(after - claimedAt.getTime()).toBeGreaterThanOrEqual(bound);
        return n === 2;
      },
      { timeoutMs: 15_000, intervalMs: 100 },
    );
  });
});

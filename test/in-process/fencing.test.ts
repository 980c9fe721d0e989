/**
 * Fencing (issue 43), its parts on the real database: the claim moves the job's fence, a fenced
 * transaction of a run that no longer holds its job is rolled back with StaleFenceError, a check
 * that races a new claim holds the claim back until it commits, and a fence never goes backwards
 * across a failover. The runners' side (a stale handler or a stalled runner writing through the
 * helper while the next run goes on) is test/e2e/fencing.test.ts.
 */
import mysql, { type Pool, type RowDataPacket } from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  checkFence,
  fenced,
  once,
  StaleFenceError,
  upsertRows,
  type RunFence,
} from '../../src/sdk/index.js';
import { claimFires, type Claim } from '../../src/store/fire-writes.js';
import { moveRunIds } from '../../src/store/failovers.js';
import { jobLockName } from '../../src/lock-names.js';
import { createTestDatabase, dbNow, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/wait.js';

let db: TestDatabase;
let pool: Pool;
const NS = 'fence';

beforeAll(async () => {
  db = await createTestDatabase('fencing', { migrated: true });
  pool = mysql.createPool({ uri: db.url, timezone: 'Z', connectionLimit: 6 });
  await db.query(
    `CREATE TABLE effect (id BIGINT AUTO_INCREMENT PRIMARY KEY, fence BIGINT NOT NULL,
       k VARCHAR(32) NULL, UNIQUE KEY (k))`,
  );
  await db.query('CREATE TABLE ledger (ledger_key VARCHAR(191) PRIMARY KEY, done_at DATETIME(3))');
});

afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

let second = 0;
/**
 * A claim of a fresh past fire of `job`, under its lock (as the protocol makes it: the lock held
 * by the session the claim names), or `allow`'s, without one; or, `holding: false`, a claim that
 * names the job's lock its session does not hold (a runner's claim that reached the server after
 * its session died).
 */
async function claim(
  job: string,
  fencedClaim = true,
  { holding = true }: { holding?: boolean } = {},
): Promise<number> {
  const now = await dbNow(db);
  const lock = jobLockName(db.name, NS, job);
  if (fencedClaim && holding) await db.query('SELECT GET_LOCK(?, 5)', [lock]);
  try {
    return await claimAs(job, now, fencedClaim ? lock : null);
  } finally {
    if (fencedClaim && holding) await db.query('SELECT RELEASE_LOCK(?)', [lock]);
  }
}

async function claimAs(job: string, now: Date, underLock: string | null): Promise<number> {
  const c: Claim = {
    attempt: {
      namespace: NS,
      job,
      scheduledAt: new Date(Math.floor(now.getTime() / 1000) * 1000 - 100_000 + second++ * 1000),
      trigger: 'schedule',
      host: 'h1',
      pid: process.pid,
    },
    lockConnectionId: db.conn.threadId,
    ...(underLock ? { underLock } : {}),
  };
  const [result] = await claimFires(pool, [c]);
  if (typeof result !== 'object') throw new Error(`claim not won: ${String(result)}`);
  return result.runId;
}

const fenceOf = (runId: number): RunFence => ({ fence: runId, database: db.name });
const newest = async (job: string) =>
  (
    await db.query<RowDataPacket>(
      `SELECT fence FROM baton_fences WHERE namespace = ? AND job = ?`,
      [NS, job],
    )
  )[0]?.fence as number | undefined;
const effects = async () =>
  (await db.query<RowDataPacket>('SELECT id, fence FROM effect ORDER BY id')).map((r) =>
    Number(r.fence),
  );
const write = (f: RunFence) =>
  fenced(pool, f, (tx) => tx.query('INSERT INTO effect (fence) VALUES (?)', [f.fence]));

describe('the fence', () => {
  it('grows per job: each claim under the lock makes its run id the newest fence', async () => {
    const a = await claim('grow');
    expect(Number(await newest('grow'))).toBe(a);
    const b = await claim('grow');
    expect(b).toBeGreaterThan(a);
    expect(Number(await newest('grow'))).toBe(b);
    // Another job's fence is its own; an `overlap: allow` claim (no lock) moves none.
    const other = await claim('grow-other');
    expect(Number(await newest('grow'))).toBe(b);
    expect(Number(await newest('grow-other'))).toBe(other);
    await claim('grow', false);
    expect(Number(await newest('grow'))).toBe(b);
  });

  it("moves only while the claim's session holds the job's lock: a late claim of a dead session does not fence out the next run", async () => {
    await db.query('DELETE FROM effect');
    const next = await claim('late');
    // A claim that reached the server after its runner's session died (it names the lock, but
    // holds it no more): its row is there, with a higher id, yet the fence stays the next run's.
    const late = await claim('late', true, { holding: false });
    expect(late).toBeGreaterThan(next);
    expect(Number(await newest('late'))).toBe(next);
    await write(fenceOf(next));
    expect(await effects()).toEqual([next]);
  });

  it('refuses a stale run: fenced() rolls back and throws StaleFenceError', async () => {
    await db.query('DELETE FROM effect');
    const stale = await claim('stale');
    await write(fenceOf(stale));
    // The next run of the job took its lock (its claim moved the fence); the stale row still
    // says `running` (its runner never wrote a verdict).
    const next = await claim('stale');
    const err = await write(fenceOf(stale)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StaleFenceError);
    expect(err).toMatchObject({ code: 'STALE_FENCE', reason: 'newer-fence', newerFence: next });
    expect((err as Error).message).toContain(`a newer run, fence ${next}, holds it`);
    await write(fenceOf(next));
    expect(await effects()).toEqual([stale, next]);

    // A row that no longer says running is refused too (its verdict, or the reaper's lost).
    await db.query(`UPDATE baton_runs SET status = 'lost' WHERE id = ?`, [next]);
    await expect(write(fenceOf(next))).rejects.toMatchObject({
      reason: 'not-running',
      status: 'lost',
    });
    expect(await effects()).toEqual([stale, next]);
  });

  it("the helpers given the fence refuse a stale run's effects", async () => {
    await db.query('DELETE FROM effect');
    const stale = await claim('helpers');
    await claim('helpers');
    const f = fenceOf(stale);
    await expect(
      once(pool, { ledger: 'ledger', key: 'k1', fence: f }, (tx) =>
        tx.query('INSERT INTO effect (fence) VALUES (?)', [stale]),
      ),
    ).rejects.toBeInstanceOf(StaleFenceError);
    // Nothing of it: neither the effect nor the ledger key (free for the run that holds the job).
    expect(await effects()).toEqual([]);
    expect(await db.query('SELECT * FROM ledger')).toEqual([]);
    await expect(
      upsertRows(pool, { table: 'effect', key: ['k'], rows: [{ k: 'a', fence: stale }], fence: f }),
    ).rejects.toBeInstanceOf(StaleFenceError);
    expect(await effects()).toEqual([]);
  });

  it('a check that races a new claim holds the claim back until its transaction commits', async () => {
    await db.query('DELETE FROM effect');
    const stale = await claim('race');
    const conn = await pool.getConnection();
    try {
      await conn.beginTransaction();
      await conn.query('INSERT INTO effect (fence) VALUES (?)', [stale]);
      await checkFence(conn, fenceOf(stale)); // passes: no newer claim yet; shared locks held
      let claimed: number | null = null;
      const next = claim('race').then((id) => (claimed = id));
      // The situation: the new claim's fence move waits on the check's lock.
      await waitFor('the claim waits for the fenced transaction', async () => {
        // (PROCESSLIST, not INNODB_TRX: MariaDB does not list this statement's transaction
        // there while it waits.)
        const rows = await db.query(
          `SELECT 1 FROM information_schema.PROCESSLIST WHERE command = 'Query'
             AND state = 'Update' AND info LIKE 'INSERT INTO baton_fences%'`,
        );
        return rows.length > 0;
      });
      expect(claimed).toBeNull();
      await conn.commit();
      const id = await next;
      // The stale write landed before the new run's fence (so before it could start) …
      expect(await effects()).toEqual([stale]);
      expect(Number(await newest('race'))).toBe(id);
      // … and nothing of the stale run lands after it.
      await expect(write(fenceOf(stale))).rejects.toBeInstanceOf(StaleFenceError);
      expect(await effects()).toEqual([stale]);
    } finally {
      conn.release();
    }
  });

  it('never goes backwards across a failover, also where the fence row is lower than a lost run', async () => {
    const lost = await claim('failover');
    // The promoted replica lacks the old primary's last row: its run row and the fence it moved
    // (the fence row holds an older fence), and its AUTO_INCREMENT continues from what it has.
    const older = await claim('failover-old');
    await db.query(`UPDATE baton_fences SET fence = ? WHERE namespace = ? AND job = ?`, [
      older,
      NS,
      'failover',
    ]);
    await db.query('DELETE FROM baton_runs WHERE id >= ?', [lost]);
    await db.query('ALTER TABLE baton_runs AUTO_INCREMENT = 1');
    const [counter] = await db.query<RowDataPacket>(
      `SELECT AUTO_INCREMENT AS next FROM information_schema.TABLES
        WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'baton_runs'`,
      [db.name],
    );
    // The precondition: without the failover's move, the next fence would be the lost one's.
    expect(Number(counter!.next)).toBeLessThanOrEqual(lost);
    // What the first runner on the new server does before any fire (daemon/failover.ts).
    await moveRunIds(pool, { server: 'new', fromServer: 'old', host: 'h1' });
    const after = await claim('failover');
    expect(after).toBeGreaterThan(lost);
    expect(Number(await newest('failover'))).toBe(after);
    // The lost run, if it lives on somewhere, is refused here: its row is not on this server.
    await expect(write(fenceOf(lost))).rejects.toMatchObject({ reason: 'no-run' });
  });
});

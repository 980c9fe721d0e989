/**
 * Seed 000's second guard, the idempotency ledger: `once` does an effect only if inserting its
 * key into a PRIMARY KEY ledger succeeds, in the same transaction as the effect's writes. Eight
 * concurrent attempts of one key (eight connections) give exactly one effect; when the first
 * attempt fails, exactly one of the waiting ones takes over (the deadlocks among them are retried,
 * none escapes); a failed effect leaves the key free. Keys are exact (case and trailing spaces
 * count), and a seed-style existing ledger table works through options.
 */
import mysql, { type Pool, type RowDataPacket } from 'mysql2/promise';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ensureLedger, isDone, markDone, once, type OnceResult } from '../../src/sdk/index.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

let db: TestDatabase;
let pool: Pool;

beforeAll(async () => {
  db = await createTestDatabase('sdk_ledger');
  pool = mysql.createPool({ uri: db.url, connectionLimit: 8, timezone: 'Z' });
});
afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

beforeEach(async () => {
  await db.query('DROP TABLE IF EXISTS payment_ledger, payment, reward_given');
  await ensureLedger(pool, 'payment_ledger');
  await db.query(`CREATE TABLE payment (
    id BIGINT AUTO_INCREMENT PRIMARY KEY, ref VARCHAR(191) NOT NULL, amount INT NOT NULL
  ) ENGINE=InnoDB`);
});

async function count(table: string): Promise<number> {
  const [row] = await db.query<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table}`);
  return Number(row!.n);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function pay(ref: string, effects: { n: number }) {
  return async (conn: mysql.Connection) => {
    effects.n++;
    await conn.query('INSERT INTO payment (ref, amount) VALUES (?, 100)', [ref]);
    await sleep(100); // the others arrive while this attempt holds the key
    return ref;
  };
}

describe('ensureLedger', () => {
  it('creates a PRIMARY KEY table with an exact (binary, no-pad) key, and is idempotent', async () => {
    await ensureLedger(pool, 'payment_ledger');
    const cols = await db.query<RowDataPacket>(
      `SELECT COLUMN_NAME AS name, COLUMN_KEY AS k, COLLATION_NAME AS coll, COLUMN_TYPE AS type
       FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'payment_ledger'
       ORDER BY ORDINAL_POSITION`,
      [db.name],
    );
    expect(cols).toEqual([
      { name: 'ledger_key', k: 'PRI', coll: 'utf8mb4_nopad_bin', type: 'varchar(191)' },
      { name: 'done_at', k: '', coll: null, type: 'datetime(3)' },
    ]);
  });
});

describe('once', () => {
  it('eight concurrent attempts of one key: exactly one effect', async () => {
    const effects = { n: 0 };
    const attempts = Array.from({ length: 8 }, () =>
      once(pool, { ledger: 'payment_ledger', key: 'reward:42' }, pay('reward:42', effects)),
    );
    const out = await Promise.all(attempts);
    expect(out.filter((r) => r.done)).toEqual([{ done: true, value: 'reward:42' }]);
    expect(out.filter((r) => !r.done)).toHaveLength(7);
    expect(effects.n).toBe(1);
    expect(await count('payment')).toBe(1);
    expect(await count('payment_ledger')).toBe(1);
  });

  it('when the first attempt fails, exactly one waiting attempt takes over; no deadlock escapes', async () => {
    const effects = { n: 0 };
    let failed = false;
    const effect = async (conn: mysql.Connection) => {
      effects.n++;
      await conn.query("INSERT INTO payment (ref, amount) VALUES ('reward:7', 100)");
      await sleep(100);
      if (!failed) {
        failed = true;
        throw new Error('the item server said no');
      }
      return 'paid';
    };
    const settled = await Promise.allSettled(
      Array.from({ length: 8 }, () =>
        once(pool, { ledger: 'payment_ledger', key: 'reward:7' }, effect),
      ),
    );
    const errors = settled.flatMap((s) => (s.status === 'rejected' ? [String(s.reason)] : []));
    expect(errors).toEqual(['Error: the item server said no']);
    const ok = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    expect(ok.filter((r) => r.done)).toEqual([{ done: true, value: 'paid' }]);
    expect(ok.filter((r) => !r.done)).toHaveLength(6);
    expect(effects.n).toBe(2); // the failed one and the one that took over
    expect(await count('payment')).toBe(1); // the failed attempt's insert was rolled back
    expect(await count('payment_ledger')).toBe(1);
  });

  it('a failed effect leaves the key free for the next attempt', async () => {
    await expect(
      once(pool, { ledger: 'payment_ledger', key: 'k' }, async (conn) => {
        await conn.query("INSERT INTO payment (ref, amount) VALUES ('k', 1)");
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(await isDone(pool, { ledger: 'payment_ledger', key: 'k' })).toBe(false);
    expect(await count('payment')).toBe(0);
    const again: OnceResult<string> = await once(
      pool,
      { ledger: 'payment_ledger', key: 'k' },
      async () => 'ok',
    );
    expect(again).toEqual({ done: true, value: 'ok' });
    expect(await isDone(pool, { ledger: 'payment_ledger', key: 'k' })).toBe(true);
    expect(await once(pool, { ledger: 'payment_ledger', key: 'k' }, async () => 'twice')).toEqual({
      done: false,
    });
  });

  it('treats keys that differ in case or a trailing space as different keys', async () => {
    const keys = ['Pay:1', 'pay:1', 'pay:1 ', '정산:1'];
    for (const key of keys) {
      expect(await once(pool, { ledger: 'payment_ledger', key }, async () => key)).toEqual({
        done: true,
        value: key,
      });
    }
    for (const key of keys) {
      expect(await once(pool, { ledger: 'payment_ledger', key }, async () => key)).toEqual({
        done: false,
      });
    }
    expect(await count('payment_ledger')).toBe(4);
  });

  it("works on the seed's own ledger table (job_no INT PRIMARY KEY, uid, reg_date)", async () => {
    await db.query(`CREATE TABLE reward_given (
      job_no INT NOT NULL, uid VARCHAR(50) NOT NULL, reg_date DATETIME NOT NULL, PRIMARY KEY (job_no)
    ) ENGINE=InnoDB`);
    const seedLedger = {
      ledger: 'reward_given',
      key: 1001,
      keyColumn: 'job_no',
      doneAtColumn: 'reg_date',
      values: { uid: 'u-1' },
    };
    expect(await once(pool, seedLedger, async () => 'given')).toEqual({
      done: true,
      value: 'given',
    });
    expect(await once(pool, seedLedger, async () => 'again')).toEqual({ done: false });
    const rows = await db.query<{ job_no: number; uid: string }>(
      'SELECT job_no, uid FROM reward_given',
    );
    expect(rows).toEqual([{ job_no: 1001, uid: 'u-1' }]);
  });

  it('runs on a connection of its own, and refuses one with an open transaction', async () => {
    expect(await once(db.conn, { ledger: 'payment_ledger', key: 'c' }, async () => 1)).toEqual({
      done: true,
      value: 1,
    });
    await db.conn.beginTransaction();
    try {
      await expect(
        once(db.conn, { ledger: 'payment_ledger', key: 'd' }, async () => 1),
      ).rejects.toThrow(/a transaction is open on this connection/);
    } finally {
      await db.conn.rollback();
    }
  });
});

describe('markDone (record first, then act: at most once)', () => {
  it('says true to the first caller only, also under concurrency', async () => {
    const out = await Promise.all(
      Array.from({ length: 8 }, () => markDone(pool, { ledger: 'payment_ledger', key: 'm' })),
    );
    expect(out.filter(Boolean)).toHaveLength(1);
    expect(await markDone(pool, { ledger: 'payment_ledger', key: 'm' })).toBe(false);
  });

  it('rejects a key the ledger cannot hold instead of truncating it', async () => {
    await expect(
      markDone(pool, { ledger: 'payment_ledger', key: 'x'.repeat(192) }),
    ).rejects.toThrow(RangeError);
    expect(await count('payment_ledger')).toBe(0);
  });
});

/**
 * Seed 001, the idempotent settlement: `upsertSelect`/`upsertRows` on a UNIQUE key give the same
 * totals however often — twice in a row, or four at once — and never a duplicate row; late
 * source rows are recomputed into the total (set semantics), while `increment` columns add up
 * exactly under concurrency. The key is checked first (no key → MissingUniqueKeyError, nothing
 * written), and `addUniqueKey` refuses while duplicates exist — clean first, then add the key.
 * Runs the MariaDB flavour (`VALUES()`); the MySQL row-alias SQL is unit-tested in sdk-sql.
 */
import mysql, { type Pool } from 'mysql2/promise';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  addUniqueKey,
  DuplicateRowsError,
  findDuplicates,
  MissingUniqueKeyError,
  serverInfo,
  upsertRows,
  upsertSelect,
  type UpsertSelectOptions,
} from '../../src/sdk/index.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

let db: TestDatabase;
let pool: Pool;

beforeAll(async () => {
  db = await createTestDatabase('sdk_upsert');
  pool = mysql.createPool({
    uri: db.url,
    connectionLimit: 8,
    timezone: 'Z',
    dateStrings: ['DATE'],
  });
});
afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

beforeEach(async () => {
  await db.query('DROP TABLE IF EXISTS payment, settle_daily, hits, `odd ``name`');
  await db.query(`CREATE TABLE payment (
    id INT AUTO_INCREMENT PRIMARY KEY, provider_no INT NOT NULL, paid_at DATETIME NOT NULL,
    amount INT NOT NULL
  ) ENGINE=InnoDB`);
  await db.query(`CREATE TABLE settle_daily (
    settle_no INT AUTO_INCREMENT PRIMARY KEY, settle_date DATE NOT NULL, provider_no INT NOT NULL,
    amount BIGINT NOT NULL, UNIQUE KEY uk_date_provider (settle_date, provider_no)
  ) ENGINE=InnoDB`);
  // 3 providers × 40 payments on 2015-02-24, and some on the next day (not settled here).
  await db.query(
    `INSERT INTO payment (provider_no, paid_at, amount)
     WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 130)
     SELECT n % 3 + 1, IF(n <= 120, '2015-02-24 03:00:00', '2015-02-25 01:00:00'), n FROM s`,
  );
});

const day = '2015-02-24';
const settle: UpsertSelectOptions = {
  table: 'settle_daily',
  key: ['settle_date', 'provider_no'],
  columns: ['settle_date', 'provider_no', 'amount'],
  select: `SELECT DATE(paid_at) AS settle_date, provider_no, SUM(amount) AS amount
           FROM payment WHERE paid_at >= ? AND paid_at < ? + INTERVAL 1 DAY
           GROUP BY DATE(paid_at), provider_no`,
  params: [day, day],
};

async function totals(): Promise<string[]> {
  const rows = await db.query<{ settle_date: Date; provider_no: number; amount: number }>(
    'SELECT settle_date, provider_no, amount FROM settle_daily ORDER BY settle_date, provider_no',
  );
  return rows.map(
    (r) => `${r.settle_date.toISOString().slice(0, 10)}/${r.provider_no}=${r.amount}`,
  );
}

async function expected(): Promise<string[]> {
  const rows = await db.query<{ p: number; total: number }>(
    `SELECT provider_no AS p, SUM(amount) AS total FROM payment
     WHERE paid_at >= ? AND paid_at < ? + INTERVAL 1 DAY GROUP BY provider_no ORDER BY provider_no`,
    [day, day],
  );
  return rows.map((r) => `${day}/${r.p}=${r.total}`);
}

describe('the daily settlement (INSERT … SELECT, set semantics)', () => {
  it('runs on MariaDB with VALUES()', async () => {
    expect((await serverInfo(pool)).flavor).toBe('mariadb');
  });

  it('gives the same totals when run twice, and recomputes late payments instead of adding', async () => {
    await upsertSelect(pool, settle);
    const first = await totals();
    expect(first).toEqual(await expected());
    expect(first).toHaveLength(3);
    await upsertSelect(pool, settle);
    expect(await totals()).toEqual(first);

    await db.query(
      `INSERT INTO payment (provider_no, paid_at, amount) VALUES (1, '2015-02-24 23:59:59', 1000)`,
    );
    await upsertSelect(pool, settle);
    const after = await totals();
    expect(after).toEqual(await expected());
    expect(after).not.toEqual(first);
  });

  it('gives the same totals when four run at once, with no duplicate row and no error', async () => {
    const runs = await Promise.allSettled(
      Array.from({ length: 4 }, () => upsertSelect(pool, settle)),
    );
    expect(runs.filter((r) => r.status === 'rejected')).toEqual([]);
    expect(await totals()).toEqual(await expected());
    const [n] = await db.query<{ n: number }>('SELECT COUNT(*) AS n FROM settle_daily');
    expect(Number(n!.n)).toBe(3);
  });
});

describe('upsertRows', () => {
  const rows = [
    { settle_date: day, provider_no: 1, amount: 10 },
    { settle_date: day, provider_no: 2, amount: 20 },
    { settle_date: day, provider_no: 3, amount: 30 },
  ];

  it('is idempotent with set columns, concurrently too, in chunks', async () => {
    expect(
      await upsertRows(pool, {
        table: 'settle_daily',
        key: ['settle_date', 'provider_no'],
        rows,
        chunkSize: 2,
      }),
    ).toEqual({
      affectedRows: 3,
      statements: 2,
    });
    await Promise.all(
      Array.from({ length: 4 }, () =>
        upsertRows(pool, { table: 'settle_daily', key: ['settle_date', 'provider_no'], rows }),
      ),
    );
    expect(await totals()).toEqual([`${day}/1=10`, `${day}/2=20`, `${day}/3=30`]);
    // A changed value replaces the old one.
    await upsertRows(pool, {
      table: 'settle_daily',
      key: ['settle_date', 'provider_no'],
      rows: [{ settle_date: day, provider_no: 2, amount: 25 }],
    });
    expect(await totals()).toEqual([`${day}/1=10`, `${day}/2=25`, `${day}/3=30`]);
  });

  it('adds increment columns exactly: 8 callers × 50 upserts over 5 keys', async () => {
    await db.query(
      'CREATE TABLE hits (page VARCHAR(20) PRIMARY KEY, hits INT NOT NULL, last_by INT NOT NULL) ENGINE=InnoDB',
    );
    await Promise.all(
      Array.from({ length: 8 }, async (_, caller) => {
        for (let i = 0; i < 50; i++) {
          await upsertRows(pool, {
            table: 'hits',
            key: ['page'],
            increment: ['hits'],
            rows: [{ page: `p${i % 5}`, hits: 1, last_by: caller }],
          });
        }
      }),
    );
    const rows = await db.query<{ page: string; hits: number }>(
      'SELECT page, hits FROM hits ORDER BY page',
    );
    expect(rows.map((r) => `${r.page}=${r.hits}`)).toEqual([
      'p0=80',
      'p1=80',
      'p2=80',
      'p3=80',
      'p4=80',
    ]);
  });

  it('quotes odd table and column names for real', async () => {
    await db.query('CREATE TABLE `odd ``name` (`the key` INT PRIMARY KEY, `v``al` INT NOT NULL)');
    const odd = { table: 'odd `name', key: ['the key'], increment: ['v`al'] };
    await upsertRows(pool, { ...odd, rows: [{ 'the key': 1, 'v`al': 2 }] });
    await upsertRows(pool, { ...odd, rows: [{ 'the key': 1, 'v`al': 3 }] });
    const [row] = await db.query<{ v: number }>('SELECT `v``al` AS v FROM `odd ``name`');
    expect(row!.v).toBe(5);
  });
});

describe('the unique key comes first', () => {
  async function withoutKey(): Promise<void> {
    await db.query('ALTER TABLE settle_daily DROP KEY uk_date_provider');
  }

  it('refuses to upsert into a table without the unique key, writing nothing', async () => {
    await withoutKey();
    // A fresh pool: the first pool remembers that the key was there.
    const fresh = mysql.createPool({ uri: db.url, connectionLimit: 1 });
    try {
      await expect(upsertSelect(fresh, settle)).rejects.toThrow(MissingUniqueKeyError);
      await expect(
        upsertRows(fresh, {
          table: 'settle_daily',
          key: ['settle_date', 'provider_no'],
          rows: [{ settle_date: day, provider_no: 1, amount: 1 }],
        }),
      ).rejects.toThrow(/no UNIQUE or PRIMARY KEY on exactly \(settle_date, provider_no\)/);
      // A unique key on other columns is not the same key.
      await db.query('ALTER TABLE settle_daily ADD UNIQUE KEY uk_date (settle_date, amount)');
      await expect(upsertSelect(fresh, settle)).rejects.toThrow(MissingUniqueKeyError);
    } finally {
      await fresh.end();
    }
    const [n] = await db.query<{ n: number }>('SELECT COUNT(*) AS n FROM settle_daily');
    expect(Number(n!.n)).toBe(0);
  });

  it('addUniqueKey refuses while duplicates exist; after cleaning them it adds the key', async () => {
    await withoutKey();
    // The doubled night: the settlement ran on both servers.
    await upsertSelect(pool, { ...settle, checkKey: false });
    await upsertSelect(pool, { ...settle, checkKey: false });
    const doubled = await totals();
    expect(doubled).toHaveLength(6);

    const dups = await findDuplicates(pool, {
      table: 'settle_daily',
      columns: ['settle_date', 'provider_no'],
    });
    expect(dups.map((d) => [d.values.provider_no, d.count])).toEqual(
      expect.arrayContaining([
        [1, 2],
        [2, 2],
        [3, 2],
      ]),
    );
    const refused = addUniqueKey(pool, {
      table: 'settle_daily',
      columns: ['settle_date', 'provider_no'],
    });
    await expect(refused).rejects.toThrow(DuplicateRowsError);
    await expect(refused).rejects.toThrow(/3 key values already occur more than once/);
    expect(await totals()).toEqual(doubled); // nothing changed

    // The seed's cleanup: keep the first row of each key (the later settle_no is the double).
    await db.query(`DELETE s1 FROM settle_daily s1 JOIN settle_daily s2
      ON s1.settle_date = s2.settle_date AND s1.provider_no = s2.provider_no
     AND s1.settle_no > s2.settle_no`);
    expect(
      await addUniqueKey(pool, { table: 'settle_daily', columns: ['provider_no', 'settle_date'] }),
    ).toBe(true);
    expect(
      await addUniqueKey(pool, { table: 'settle_daily', columns: ['settle_date', 'provider_no'] }),
    ).toBe(false);
    await upsertSelect(pool, settle);
    expect(await totals()).toEqual(await expected());
  });
});

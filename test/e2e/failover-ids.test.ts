/**
 * The move of the run ids after a failover (src/store/failovers.ts), in process on the real
 * MariaDB, with the grants a runner has (`SELECT, INSERT, UPDATE`: no ALTER, no DELETE):
 * - the next run's id is above the highest id + the gap, and the move is recorded;
 * - the placeholder row is never seen: not by a reader polling while the fleet moves the ids
 *   again and again, not afterwards; and a real fire planted meanwhile is not disturbed;
 * - a move on this server within a window is found; one on another server is not.
 * The whole failover (a real replica promoted, the old primary's ids read back) is in
 * failover.test.ts.
 */
import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseDatabaseUrl } from '../../src/config/database-url.js';
import { openPool } from '../../src/store/connect.js';
import { DeadlinePool } from '../../src/store/deadline.js';
import { moveRunIds, RUN_ID_GAP, runIdsMovedWithin } from '../../src/store/failovers.js';
import { createTestDatabase, plantRun, type TestDatabase } from '../helpers/db.js';

const USER = `baton_ids_${randomBytes(3).toString('hex')}`;
const PASSWORD = randomBytes(12).toString('hex');
let db: TestDatabase;
let pool: DeadlinePool;

beforeAll(async () => {
  db = await createTestDatabase('failover_ids', { migrated: true });
  await db.query('CREATE USER ?@? IDENTIFIED BY ?', [USER, '%', PASSWORD]);
  await db.query('GRANT SELECT, INSERT, UPDATE ON ??.* TO ?@?', [db.name, USER, '%']);
  const url = new URL(db.url);
  url.username = USER;
  url.password = PASSWORD;
  pool = new DeadlinePool(openPool(parseDatabaseUrl(url.toString())), 10_000);
});

afterAll(async () => {
  await pool?.end();
  await db?.query('DROP USER IF EXISTS ?@?', [USER, '%']);
  await db?.drop();
});

const at = (iso: string) => new Date(iso);
const move = { server: 'server_id 2', fromServer: 'server_id 1', host: 'ids-a' };

describe('moving the run ids after a failover', () => {
  it('puts the next run above the highest id + the gap, with a runner grants, and records it', async () => {
    const ids = [];
    for (const s of ['00', '01', '02']) {
      ids.push(
        await plantRun(db, {
          namespace: 'ids',
          job: 'tick',
          scheduledAt: at(`2026-12-06T03:00:${s}.000Z`),
        }),
      );
    }
    const top = Math.max(...ids);
    expect(await moveRunIds(pool, move)).toEqual({ before: top, floor: top + RUN_ID_GAP });
    const next = await plantRun(db, {
      namespace: 'ids',
      job: 'tick',
      scheduledAt: at('2026-12-06T03:00:03.000Z'),
    });
    expect(next).toBe(top + RUN_ID_GAP + 1);
    expect(await db.query("SELECT id FROM baton_runs WHERE job = '#failover'")).toEqual([]);
    expect(
      await db.query(
        'SELECT server, from_server, host, runs_id_before, runs_id_floor FROM baton_failovers',
      ),
    ).toEqual([
      {
        server: 'server_id 2',
        from_server: 'server_id 1',
        host: 'ids-a',
        runs_id_before: top,
        runs_id_floor: top + RUN_ID_GAP,
      },
    ]);
    expect(await runIdsMovedWithin(pool, 'server_id 2', 60_000)).toBe(true);
    expect(await runIdsMovedWithin(pool, 'server_id 3', 60_000)).toBe(false);
  });

  it('never shows the placeholder to a reader, nor takes a real fire key', async () => {
    const reader = await mysql.createConnection({ uri: db.url });
    await reader.query('SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED');
    let moving = true;
    let reads = 0;
    let seen = 0;
    const polling = (async () => {
      while (moving) {
        const [rows] = await reader.query<mysql.RowDataPacket[]>(
          "SELECT COUNT(*) AS n FROM baton_runs WHERE job = '#failover' OR namespace = ''",
        );
        seen += Number(rows[0]!.n);
        reads++;
      }
    })();
    try {
      for (let i = 0; i < 20; i++) {
        await moveRunIds(pool, { ...move, host: `ids-${i}` });
        // A fire claimed between two moves gets an id above the last floor.
        const id = await plantRun(db, {
          namespace: 'ids',
          job: 'tock',
          scheduledAt: at(`2026-12-06T03:01:${String(i).padStart(2, '0')}.000Z`),
        });
        const [last] = await db.query<{ floor: number }>(
          'SELECT MAX(runs_id_floor) AS floor FROM baton_failovers',
        );
        expect(id).toBe(Number(last!.floor) + 1);
      }
    } finally {
      moving = false;
      await polling;
      await reader.end();
    }
    expect(reads, 'the reader read while the ids moved').toBeGreaterThan(0);
    expect(seen, 'placeholder rows a reader saw').toBe(0);
    expect(await db.query("SELECT id FROM baton_runs WHERE job = '#failover'")).toEqual([]);
  });
});

/**
 * `baton_runs.reason_kind` (migrations 0006 and 0007): the rows written before the column existed
 * get their kind from the sentence baton wrote, without holding up a fleet that goes on writing;
 * the rows written after it carry the kind they are given, and the history filters on it.
 */
import mysql, { type ResultSetHeader } from 'mysql2/promise';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { insertMissed, insertSkips } from '../../src/store/fire-writes.js';
import { findRun, listRuns } from '../../src/store/history-reads.js';
import { loadMigrations, migrate } from '../../src/store/migrate.js';
import { pausedReason, type Pause } from '../../src/store/pauses.js';
import { finishRun } from '../../src/store/run-verdicts.js';
import type { Attempt } from '../../src/store/runs.js';
import { createTestDatabase, plantRun, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/wait.js';

let db: TestDatabase;
beforeEach(async () => {
  db = await createTestDatabase('reason_kind');
});
afterEach(async () => {
  await db.drop();
});

/** The schema as the last baton without `reason_kind` left it: migrations 0001–0005. */
async function migrateBeforeReasonKind(): Promise<void> {
  const before = loadMigrations().filter((m) => m.version <= 5);
  expect(before.map((m) => m.version)).toEqual([1, 2, 3, 4, 5]);
  await migrate(db.conn, db.name, before);
  const columns = await db.query<{ n: number }>(
    `SELECT COUNT(*) AS n FROM information_schema.COLUMNS
      WHERE table_schema = ? AND table_name = 'baton_runs' AND column_name = 'reason_kind'`,
    [db.name],
  );
  expect(Number(columns[0]!.n)).toBe(0);
}

const T = Date.parse('2026-12-01T10:00:00.000Z');
const ISO = (ms: number) => new Date(T + ms).toISOString();
const pause: Pause = { job: 'tick', reason: 'audit', pausedBy: 'ops-1', pausedAt: new Date(T) };

/** Every sentence baton wrote into a skip row (fire-protocol.ts, pauses.ts), with its kind. */
const SKIPS: [string, string | null][] = [
  ['this fire already ran on srv-01 (done)', 'already-ran'],
  ['this fire already ran on srv-01 (failed)', 'already-ran'],
  ['this fire already ran on another runner', 'already-ran'],
  ['this runner already took worker slot 2 of this fire', 'already-ran'],
  [`this fire is running on srv-01 (started ${ISO(4)})`, 'taken'],
  ["this fire is being claimed by srv-01 (it holds the job's lock)", 'taken'],
  ['another run held the lock at this instant (it is free now)', 'taken'],
  [
    `an earlier run is still running on srv-01 (fire ${ISO(-1000)}, started ${ISO(-997)})`,
    'overlap',
  ],
  [`an earlier run is still running on srv-02 (this runner; fire ${ISO(-1000)})`, 'overlap'],
  [`a manual run is running on srv-01 (started ${ISO(-2000)})`, 'overlap'],
  ['the lock is held by connection 12, which has no running row for this job', 'overlap'],
  [
    `waited in the queue until the next fire (${ISO(2000)}) came first; an earlier run is still ` +
      `running on srv-01 (fire ${ISO(-1000)}, started ${ISO(-997)})`,
    'overlap',
  ],
  [
    `waited in the queue until the runner is stopping; this fire is running on srv-01 (started ${ISO(4)})`,
    'overlap',
  ],
  [
    `a later fire (${ISO(1000)}) is already running on srv-01; this runner is behind (check its clock)`,
    'behind',
  ],
  [pausedReason(pause), 'paused'],
  [pausedReason({ ...pause, reason: null }), 'paused'],
  // Fan-out: overlap when every slot's reason is overlap, else taken.
  [
    `all 2 worker slots are taken: 1: an earlier run is still running on a (fire ${ISO(-1000)}, ` +
      `started ${ISO(-997)}); 2: a manual run is running on b (started ${ISO(-2000)})`,
    'overlap',
  ],
  [
    `all 2 worker slots are taken: 1: waited in the queue until the next fire (${ISO(2000)}) came ` +
      `first; this fire is running on a (started ${ISO(4)}); 2: waited in the queue until the ` +
      'runner is stopping; the lock is held by connection 7, which has no running row for this job',
    'overlap',
  ],
  [
    `all 2 worker slots are taken: 1: an earlier run is still running on a (fire ${ISO(-1000)}, ` +
      `started ${ISO(-997)}); 2: this fire already ran on b (done)`,
    'taken',
  ],
  [
    `all 3 worker slots are taken: 1: this fire is running on a (started ${ISO(4)}); 2: a manual ` +
      `run is running on b (started ${ISO(-2000)}); 3: another run held the lock at this instant ` +
      '(it is free now)',
    'taken',
  ],
  [
    `all 2 worker slots are taken: 1: a manual run is running on a (started ${ISO(-2000)}); 2: a ` +
      `later fire (${ISO(1000)}) is already running on b; this runner is behind (check its clock)`,
    'taken',
  ],
  // Not a sentence baton writes: left unclassified.
  ['busy', null],
];

/** The migrations after the backfill, whatever they are: applied with it. */
const laterMigrations = loadMigrations()
  .filter((m) => m.version > 7)
  .map((m) => m.name);

describe('migrations 0006 and 0007 on a history written before them', () => {
  it('give every row the kind of the sentence baton wrote, and none to the rows of runs', async () => {
    await migrateBeforeReasonKind();
    const planted: { id: number; reason: string | null; kind: string | null }[] = [];
    let second = 0;
    const at = () => new Date(T + 1_000 * second++);
    for (const [reason, kind] of SKIPS) {
      const id = await plantRun(db, {
        namespace: 'old',
        job: 'tick',
        scheduledAt: at(),
        status: 'skipped',
        reason,
        host: 'srv-02',
      });
      planted.push({ id, reason, kind });
    }
    const missed =
      'nobody attempted this fire: no runner was connected to the database at the time';
    planted.push({
      id: await plantRun(db, {
        namespace: 'old',
        job: 'tick',
        scheduledAt: at(),
        status: 'missed',
        reason: missed,
      }),
      reason: missed,
      kind: 'not-run',
    });
    for (const status of ['done', 'failed', 'lost', 'running']) {
      const id = await plantRun(db, { namespace: 'old', job: 'tick', scheduledAt: at(), status });
      planted.push({ id, reason: null, kind: null });
    }

    const { applied } = await migrate(db.conn, db.name);
    expect(applied).toEqual([
      '0006_add_baton_runs_reason_kind',
      '0007_backfill_baton_runs_reason_kind',
      ...laterMigrations,
    ]);
    const rows = await db.query<{ id: number; reason: string | null; reason_kind: string | null }>(
      'SELECT id, reason, reason_kind FROM baton_runs ORDER BY id',
    );
    expect(rows.map((r) => ({ id: Number(r.id), reason: r.reason, kind: r.reason_kind }))).toEqual(
      planted,
    );
  });

  it("leave the fleet's claims, skips and verdicts free while the backfill runs", async () => {
    await migrateBeforeReasonKind();
    // The column is there (0006: DDL, which would wait for the row lock's transaction below to
    // end, as for any open transaction on the table); the backfill (0007) is to come.
    await migrate(
      db.conn,
      db.name,
      loadMigrations().filter((m) => m.version <= 6),
    );
    // A run in progress (read by the backfill before the skip it waits on), then that skip.
    const running = await plantRun(db, {
      namespace: 'live',
      job: 'tick',
      scheduledAt: new Date(T),
      status: 'running',
    });
    const skip = await plantRun(db, {
      namespace: 'live',
      job: 'tick',
      scheduledAt: new Date(T),
      status: 'skipped',
      reason: 'this fire already ran on srv-01 (done)',
      host: 'srv-02',
    });
    // Someone holds the skip's row: the backfill stops there, holding what it read so far.
    const holder = await mysql.createConnection({ uri: db.url });
    const migrating = await mysql.createConnection({ uri: db.url, timezone: 'Z' });
    const fleet = await mysql.createConnection({ uri: db.url, timezone: 'Z' });
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT id FROM baton_runs WHERE id = ? FOR UPDATE', [skip]);
      const migration = migrate(migrating, db.name);
      migration.catch(() => {}); // Awaited below; a failing test must not leave it unhandled.
      // InnoDB's lock wait, seen from information_schema. INNODB_TRX is a snapshot the server
      // takes again only when it was last read more than 0.1 s ago: poll slower than that.
      await waitFor(
        'the backfill to wait for the held row',
        async () => {
          const waiting = await db.query<{ query: string | null }>(
            `SELECT trx_query AS query FROM information_schema.INNODB_TRX
              WHERE trx_mysql_thread_id = ? AND trx_state = 'LOCK WAIT'`,
            [migrating.threadId],
          );
          return waiting[0]?.query?.startsWith('UPDATE baton_runs');
        },
        { intervalMs: 250 },
      );
      // The fleet goes on; none of its writes may wait for the backfill (under REPEATABLE READ
      // the verdict would: the backfill would hold every row it read).
      await fleet.query('SET SESSION innodb_lock_wait_timeout = 1');
      const wrote = await finishRun(fleet, running, {
        status: 'done',
        exitCode: 0,
        error: null,
        outputTail: null,
      });
      expect(wrote).toBe(true);
      const attempt: Attempt = {
        namespace: 'live',
        job: 'tick',
        scheduledAt: new Date(T + 10_000),
        trigger: 'schedule',
        host: 'srv-03',
        pid: 3,
      };
      // A runner of that schema's time claims (today's claim names columns of later migrations).
      const [claimed] = await fleet.query<ResultSetHeader>(
        `INSERT INTO baton_runs (namespace, job, scheduled_at, winner, triggered_by, status, host,
           pid, started_at, attempts)
         VALUES (?, ?, ?, 1, 'schedule', 'running', ?, ?, NOW(3), 1)`,
        [attempt.namespace, attempt.job, attempt.scheduledAt, attempt.host, attempt.pid],
      );
      expect(claimed.insertId).toBeGreaterThan(0);
      const [skipped] = await fleet.query<ResultSetHeader>(
        `INSERT INTO baton_runs (namespace, job, scheduled_at, winner, triggered_by, status, reason,
           reason_kind, host, pid, started_at, finished_at)
         VALUES (?, ?, ?, NULL, 'schedule', 'skipped', 'this fire is running on srv-03', 'taken',
           'srv-04', 4, NOW(3), NOW(3))`,
        [attempt.namespace, attempt.job, attempt.scheduledAt],
      );
      expect(skipped.affectedRows).toBe(1);
      await holder.query('COMMIT');
      expect((await migration).applied).toEqual([
        '0007_backfill_baton_runs_reason_kind',
        ...laterMigrations,
      ]);
      const [row] = await db.query<{ reason_kind: string | null }>(
        'SELECT reason_kind FROM baton_runs WHERE id = ?',
        [skip],
      );
      expect(row!.reason_kind).toBe('already-ran');
    } finally {
      await Promise.all([holder.end(), migrating.end(), fleet.end()]);
    }
  });
});

describe('reason_kind, written and read', () => {
  const attempt = (job: string, second: number, host = 'srv-02'): Attempt => ({
    namespace: 'new',
    job,
    scheduledAt: new Date(T + second * 1_000),
    trigger: 'schedule',
    host,
    pid: 2,
  });

  it('is written by insertSkips and insertMissed, and filters the history', async () => {
    await migrate(db.conn, db.name);
    const [overlap, ran, paused] = await insertSkips(db.conn, [
      {
        attempt: attempt('tick', 0),
        reason: 'an earlier run is still running on srv-01',
        kind: 'overlap',
      },
      {
        attempt: attempt('tick', 1),
        reason: 'this fire already ran on srv-02 (done)',
        kind: 'already-ran',
      },
      { attempt: attempt('other', 0), reason: pausedReason(pause), kind: 'paused' },
    ]);
    expect(await insertMissed(db.conn, attempt('tick', 2), 'nobody attempted this fire')).toBe(
      true,
    );
    const winner = await plantRun(db, {
      namespace: 'new',
      job: 'tick',
      scheduledAt: new Date(T),
      host: 'srv-01',
    });

    const kinds = await db.query<{ id: number; status: string; reason_kind: string | null }>(
      "SELECT id, status, reason_kind FROM baton_runs WHERE namespace = 'new' ORDER BY id",
    );
    expect(kinds.map((r) => [Number(r.id), r.status, r.reason_kind])).toEqual([
      [overlap, 'skipped', 'overlap'],
      [ran, 'skipped', 'already-ran'],
      [paused, 'skipped', 'paused'],
      [expect.any(Number), 'missed', 'not-run'],
      [winner, 'done', null],
    ]);
    expect((await findRun(db.conn, overlap!))?.reasonKind).toBe('overlap');
    expect((await findRun(db.conn, winner))?.reasonKind).toBeNull();

    const history = (reasonKind?: 'overlap' | 'paused' | 'not-run' | 'taken', job?: string) =>
      listRuns(db.conn, { namespace: 'new', reasonKind, job, limit: 50 });
    expect((await history('overlap')).map((r) => r.id)).toEqual([overlap]);
    expect((await history('paused')).map((r) => [r.job, r.reasonKind])).toEqual([
      ['other', 'paused'],
    ]);
    expect((await history('not-run', 'tick')).map((r) => [r.status, r.reasonKind])).toEqual([
      ['missed', 'not-run'],
    ]);
    expect(await history('taken')).toEqual([]);
    expect(await history()).toHaveLength(5);
  });
});

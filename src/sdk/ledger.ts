/**
 * The idempotency ledger (seed 000's second guard). Before paying a reward, insert its key into a
 * table whose PRIMARY KEY is that key; if the insert finds the key there, the reward was already
 * paid and nothing happens. The database enforces it, across processes and hosts, however the
 * work was handed out (a too-short reclaim bound, a retried fire, a second runner).
 *
 * `once` does the insert and the effect's own writes in ONE transaction: the key is recorded if
 * and only if the effect's writes commit. A concurrent attempt of the same key waits on the
 * uncommitted key, then finds it (done: false) or — if the first attempt failed and rolled back —
 * takes over. What the effect does OUTSIDE this database (an HTTP call, a message) cannot be
 * rolled back: if it happens and then the commit fails, the next attempt does it again. Pass the
 * key to that system as its idempotency key, or use `markDone` (record first, then act: at most
 * once, possibly never).
 *
 * The seed used INSERT IGNORE; this does a plain INSERT and catches ER_DUP_ENTRY, because IGNORE
 * also turns a too-long key into a truncated one (and two keys into one) without an error.
 */
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { isDuplicateKeyError } from '../errors.js';
import {
  assertNoOpenTransaction,
  backoffMs,
  isPool,
  isTransactionConflict,
  rollbackQuietly,
  sleep,
  withConnection,
  type Db,
} from './connection.js';
import { checkFence, fencedWork, type RunFence } from './fence.js';
import { serverInfo } from './server-flavor.js';
import { columnId, nonNegativeInt, tableId } from './sql.js';

/** The longest key the default ledger table holds (VARCHAR(191): an index fits utf8mb4). */
export const LEDGER_KEY_MAX = 191;

export interface LedgerOptions {
  /** The ledger table, e.g. `'payment_ledger'` (see `ensureLedger`). */
  ledger: string;
  /** What must happen once: `reward:${job.job_no}`. */
  key: string | number;
  /** Default `ledger_key`; the table's PRIMARY KEY. */
  keyColumn?: string;
  /** Default `done_at`; set to the database's UTC time. `null`: the table has no such column. */
  doneAtColumn?: string | null;
  /** More columns of the ledger row, e.g. `{ uid: job.uid }`. */
  values?: Readonly<Record<string, unknown>>;
  /** Deadlocks on the key retried before the effect runs. Default 3. */
  retries?: number;
  /**
   * The run's fence (`ctx.db.fence`; sdk/fence.ts): the key and the effect commit only while the
   * run still holds its job, else nothing does and StaleFenceError is thrown.
   */
  fence?: RunFence;
}

export type OnceResult<T> = { done: true; value: T } | { done: false };

/** The ledger row's INSERT (pure). */
export function buildLedgerInsert(o: LedgerOptions): { sql: string; values: unknown[] } {
  const key = String(o.key);
  if (key === '') throw new TypeError('ledger key must not be empty');
  if ([...key].length > LEDGER_KEY_MAX) {
    throw new RangeError(
      `ledger key is longer than ${LEDGER_KEY_MAX} characters: ${key.slice(0, 40)}…`,
    );
  }
  const extra = Object.entries(o.values ?? {}).filter(([, v]) => v !== undefined);
  const doneAt = o.doneAtColumn === undefined ? 'done_at' : o.doneAtColumn;
  const cols = [columnId(o.keyColumn ?? 'ledger_key'), ...extra.map(([c]) => columnId(c))];
  const vals = ['?', ...extra.map(() => '?')];
  if (doneAt !== null) {
    cols.push(columnId(doneAt));
    vals.push('UTC_TIMESTAMP(3)');
  }
  return {
    sql: `INSERT INTO ${tableId(o.ledger)} (${cols.join(', ')}) VALUES (${vals.join(', ')})`,
    values: [key, ...extra.map(([, v]) => v)],
  };
}

/**
 * Runs `effect` only if `key` is not in the ledger yet, recording the key in the same transaction
 * as the effect's writes (make them on the `conn` it is given). `{ done: false }`: it was already
 * done (by this or any other worker). An error in `effect` rolls everything back and is thrown;
 * the key stays free for the next attempt.
 *
 *     const r = await once(ctx.db, { ledger: 'reward_given', key: `job:${job.job_no}` }, (conn) =>
 *       conn.query('INSERT INTO payment (uid, item_id) VALUES (?, ?)', [job.uid, job.item_id]));
 *     if (!r.done) ctx.log.warn({ job: job.job_no }, 'already paid');
 */
export async function once<T>(
  db: Db,
  options: LedgerOptions,
  effect: (conn: Connection) => Promise<T>,
): Promise<OnceResult<T>> {
  const insert = buildLedgerInsert(options);
  const retries = nonNegativeInt('retries', options.retries ?? 3);
  return withConnection(db, async (conn) => {
    if (!isPool(db)) await assertNoOpenTransaction(conn, 'once');
    for (let attempt = 0; ; attempt++) {
      await conn.beginTransaction();
      try {
        await conn.query(insert.sql, insert.values);
      } catch (err) {
        await rollbackQuietly(conn);
        if (isDuplicateKeyError(err)) return { done: false };
        // Several attempts waiting on a key whose first holder rolled back can deadlock on it;
        // nothing has run yet, so trying again is always safe.
        if (isTransactionConflict(err) && attempt < retries) {
          await sleep(backoffMs(attempt, 5, 200));
          continue;
        }
        throw err;
      }
      // The key is ours (uncommitted): the effect and the commit, rolled back on any error.
      const fence = options.fence;
      const value = await inTransactionTail(conn, async (tx) => {
        const v = await effect(tx);
        if (fence) await checkFence(tx, fence);
        return v;
      });
      return { done: true, value };
    }
  });
}

/** The rest of a transaction already begun: `fn`, COMMIT; ROLLBACK and rethrow on error. */
async function inTransactionTail<T>(conn: Connection, fn: (conn: Connection) => Promise<T>) {
  let value: T;
  try {
    value = await fn(conn);
    await conn.commit();
  } catch (err) {
    await rollbackQuietly(conn);
    throw err;
  }
  return value;
}

/**
 * Records `key` on its own (autocommit) and says whether this call recorded it: `true` — do the
 * effect now; `false` — it was recorded before, skip it. At most once: a crash between this and
 * the effect leaves the key recorded and the effect undone (seed 000's INSERT IGNORE guard).
 */
export async function markDone(db: Db, options: LedgerOptions): Promise<boolean> {
  const insert = buildLedgerInsert(options);
  try {
    if (options.fence) {
      const retries = nonNegativeInt('retries', options.retries ?? 3);
      await fencedWork(db, options.fence, retries, (conn) => conn.query(insert.sql, insert.values));
    } else await db.query(insert.sql, insert.values);
    return true;
  } catch (err) {
    if (isDuplicateKeyError(err)) return false;
    throw err;
  }
}

/** Whether `key` is in the ledger (a plain read: it may be recorded a moment later). */
export async function isDone(db: Db, options: Pick<LedgerOptions, 'ledger' | 'key' | 'keyColumn'>) {
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT 1 FROM ${tableId(options.ledger)} WHERE ${columnId(options.keyColumn ?? 'ledger_key')} = ? LIMIT 1`,
    [String(options.key)],
  );
  return rows.length > 0;
}

/**
 * Creates the ledger table if it is missing:
 *
 *     CREATE TABLE IF NOT EXISTS payment_ledger (
 *       ledger_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
 *       done_at DATETIME(3) NOT NULL,
 *       PRIMARY KEY (ledger_key)) ENGINE=InnoDB
 *
 * The collation is binary without PAD SPACE (`utf8mb4_0900_bin` on MySQL 8): under the server's
 * default, case-insensitive collation `Pay:1` and `pay:1` — or `a` and `a ` — would be one key.
 */
export async function ensureLedger(
  db: Db,
  table: string,
  options: { keyColumn?: string } = {},
): Promise<void> {
  const info = await serverInfo(db);
  await db.query(
    `CREATE TABLE IF NOT EXISTS ${tableId(table)} (` +
      `${columnId(options.keyColumn ?? 'ledger_key')} VARCHAR(${LEDGER_KEY_MAX}) CHARACTER SET ` +
      `utf8mb4 COLLATE ${info.exactCollation} NOT NULL, ` +
      `done_at DATETIME(3) NOT NULL, PRIMARY KEY (${columnId(options.keyColumn ?? 'ledger_key')})` +
      ') ENGINE=InnoDB',
  );
}

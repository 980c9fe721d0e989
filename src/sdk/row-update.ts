/**
 * Read-modify-write of one row without lost updates (seed 004). Two requests that read `count`,
 * subtract one and write it back both write the same number: one decrement is lost. Two remedies:
 *
 * - `updateOptimistic`: read the row with its version, compute, then
 *   `UPDATE … SET …, version = version + 1 WHERE key AND version = <read>`. 0 rows affected means
 *   someone wrote in between: read again and retry, a bounded number of times with a jittered
 *   backoff, then throw OptimisticConflictError. No lock is held while computing; best when
 *   conflicts are rare. Under heavy contention on one row most attempts are wasted.
 * - `updateLocked`: `SELECT … FOR UPDATE` in a transaction, compute, UPDATE, COMMIT. Writers
 *   queue on the row lock; every call succeeds (a deadlock retries the transaction). Best for a
 *   hot row, or when the update must not fail.
 *
 * If both kinds write the same table, give `updateLocked` the `versionColumn` too: a locked writer
 * that does not bump the version is invisible to the optimistic ones.
 */
import type { Connection, ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import {
  assertNoOpenTransaction,
  backoffMs,
  isPool,
  isTransactionConflict,
  rollbackQuietly,
  sleep,
  transaction,
  withConnection,
  type Db,
} from './connection.js';
import { OptimisticConflictError, RowNotFoundError } from './errors.js';
import { columnId, keyCondition, nonNegativeInt, setClause, tableId } from './sql.js';

export interface RowTarget {
  table: string;
  /** The row's key: `{ id: 7 }` or `{ pet_id: 7, kind: 'kibble' }`. */
  key: Readonly<Record<string, unknown>>;
}

export interface OptimisticTarget extends RowTarget {
  /** An integer column bumped by every write. Default `version`. */
  versionColumn?: string;
}

/** Column → new value; `null`/`undefined` instead of an object: leave the row alone. */
export type Changes = Readonly<Record<string, unknown>> | null | undefined;

export type UpdateResult<T> =
  | { updated: true; before: T; changes: Record<string, unknown>; attempts: number }
  | { updated: false; before: T; attempts: number };

export interface OptimisticOptions<T> {
  /** Retries after the first attempt. Default 10. */
  maxRetries?: number;
  /** Backoff before retry n: random in [0, min(maxDelayMs, baseDelayMs·2^n)). Defaults 10 / 200. */
  baseDelayMs?: number;
  maxDelayMs?: number;
  /**
   * More writes that must commit with the winning update (the seed's `pet.power += 1` beside
   * `food.count -= 1`). When given, each attempt runs in a transaction and this runs after the
   * version check passed, on the same connection.
   */
  afterUpdate?: (
    conn: Connection,
    result: { before: T; changes: Record<string, unknown> },
  ) => Promise<unknown>;
}

/** The version-checked UPDATE (pure). */
export function buildOptimisticUpdate(
  target: OptimisticTarget,
  changes: Readonly<Record<string, unknown>>,
  version: unknown,
) {
  const versionColumn = target.versionColumn ?? 'version';
  if (Object.keys(changes).some((c) => c.toLowerCase() === versionColumn.toLowerCase())) {
    throw new TypeError(`changes must not set the version column ${versionColumn}`);
  }
  const set = setClause(changes);
  const where = keyCondition(target.key);
  const v = columnId(versionColumn);
  return {
    sql:
      `UPDATE ${tableId(target.table)} SET ${set.sql ? `${set.sql}, ` : ''}${v} = ${v} + 1 ` +
      `WHERE ${where.sql} AND ${v} = ?`,
    values: [...set.values, ...where.values, version],
  };
}

async function readRow<T>(conn: Connection, target: RowTarget, lock: boolean): Promise<T> {
  const where = keyCondition(target.key);
  const [rows] = await conn.query<RowDataPacket[]>(
    `SELECT * FROM ${tableId(target.table)} WHERE ${where.sql}${lock ? ' FOR UPDATE' : ''}`,
    where.values,
  );
  if (rows.length > 1) {
    throw new TypeError(
      `key ${JSON.stringify(Object.keys(target.key))} matches ${rows.length} rows of ${target.table}`,
    );
  }
  const row = rows[0];
  if (!row) throw new RowNotFoundError(target.table, target.key);
  return row as T;
}

/**
 * Reads the row, asks `compute` for the changes, and writes them only if nobody wrote the row in
 * between (its version is unchanged); otherwise reads again and retries.
 *
 *     await updateOptimistic(ctx.db, { table: 'food', key: { pet_id } },
 *       (food) => (food.count > 0 ? { count: food.count - 1 } : null), { maxRetries: 20 });
 */
export async function updateOptimistic<T extends RowDataPacket = RowDataPacket>(
  db: Db,
  target: OptimisticTarget,
  compute: (row: T) => Changes | Promise<Changes>,
  options: OptimisticOptions<T> = {},
): Promise<UpdateResult<T>> {
  const maxRetries = nonNegativeInt('maxRetries', options.maxRetries ?? 10);
  const base = options.baseDelayMs ?? 10;
  const max = options.maxDelayMs ?? 200;
  const versionColumn = target.versionColumn ?? 'version';
  const { afterUpdate } = options;
  return withConnection(db, async (conn) => {
    if (!isPool(db)) await assertNoOpenTransaction(conn, 'updateOptimistic');
    for (let attempt = 1; ; attempt++) {
      // Without afterUpdate, autocommit: each read sees the latest committed row. With it, a
      // transaction per attempt, begun before the read, so the read is as fresh.
      if (afterUpdate) await conn.beginTransaction();
      let won = false;
      try {
        const before = await readRow<T>(conn, target, false);
        const changes = await compute(before);
        if (changes == null) {
          if (afterUpdate) await conn.commit();
          return { updated: false, before, attempts: attempt };
        }
        const update = buildOptimisticUpdate(target, changes, before[versionColumn]);
        try {
          const [result] = await conn.query<ResultSetHeader>(update.sql, update.values);
          won = result.affectedRows > 0;
        } catch (err) {
          // MariaDB 11.6+ snapshot isolation reports the lost race as ER_CHECKREAD.
          if (!isTransactionConflict(err)) throw err;
        }
        if (won) {
          const written = { ...changes };
          await afterUpdate?.(conn, { before, changes: written });
          if (afterUpdate) await conn.commit();
          return { updated: true, before, changes: written, attempts: attempt };
        }
        if (afterUpdate) await conn.rollback();
      } catch (err) {
        if (afterUpdate) await rollbackQuietly(conn);
        throw err;
      }
      if (attempt > maxRetries)
        throw new OptimisticConflictError(target.table, target.key, attempt);
      await sleep(backoffMs(attempt - 1, base, max));
    }
  });
}

export interface LockedOptions<T> {
  /** Also bump this version column, for tables that optimistic writers update too. */
  versionColumn?: string;
  /** Deadlock retries of the whole transaction. Default 3. */
  retries?: number;
  /** More writes in the same transaction, after the UPDATE. */
  afterUpdate?: (
    conn: Connection,
    result: { before: T; changes: Record<string, unknown> },
  ) => Promise<unknown>;
}

/**
 * `SELECT … FOR UPDATE`, `compute`, UPDATE, COMMIT: writers of the row take turns. `compute`
 * gets the transaction's connection for reads (and writes) that belong with the update.
 *
 *     await updateLocked(ctx.db, { table: 'food', key: { pet_id } },
 *       (food) => (food.count > 0 ? { count: food.count - 1 } : null));
 */
export async function updateLocked<T extends RowDataPacket = RowDataPacket>(
  db: Db,
  target: RowTarget,
  compute: (row: T, conn: Connection) => Changes | Promise<Changes>,
  options: LockedOptions<T> = {},
): Promise<UpdateResult<T>> {
  let attempts = 0;
  return transaction(
    db,
    async (conn) => {
      attempts++;
      const before = await readRow<T>(conn, target, true);
      const changes = await compute(before, conn);
      if (changes == null) return { updated: false, before, attempts } as const;
      const set = setClause(changes);
      const v = options.versionColumn ? columnId(options.versionColumn) : null;
      const assignments = [set.sql, v ? `${v} = ${v} + 1` : ''].filter(Boolean).join(', ');
      const written = { ...changes };
      if (assignments) {
        const where = keyCondition(target.key);
        await conn.query(`UPDATE ${tableId(target.table)} SET ${assignments} WHERE ${where.sql}`, [
          ...set.values,
          ...where.values,
        ]);
      }
      await options.afterUpdate?.(conn, { before, changes: written });
      return { updated: true, before, changes: written, attempts } as const;
    },
    { retries: options.retries ?? 3 },
  );
}

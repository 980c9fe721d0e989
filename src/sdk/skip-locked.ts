/**
 * One row at a time under `FOR UPDATE SKIP LOCKED` (seed 002). Four schedulers that each took
 * "the next unprocessed place" without it picked the same rows, deadlocked and took 45 s for 120
 * rows; with it, each worker locks the next row nobody holds, skips the ones others hold, and
 * every row is processed once.
 *
 * Each row gets its own transaction on one connection: the row stays locked while the callback
 * works on it, the callback's writes (on the connection it is given) commit with the row, and a
 * failure rolls the row back for another worker or the next run. The callback must change the
 * row so that the select no longer returns it (set `processed_at`, a status…) — otherwise the
 * next iteration would take the same row again; that mistake is detected and thrown.
 *
 * The select needs an index that serves its WHERE and ORDER BY: a locking read locks every row
 * it examines, so a full scan (or a filesort) by one worker locks rows the others then skip, and
 * they stop early thinking the work is done.
 */
import type { Connection, RowDataPacket } from 'mysql2/promise';
import {
  assertNoOpenTransaction,
  backoffMs,
  inTransaction,
  isPool,
  isTransactionConflict,
  sleep,
  withConnection,
  type Db,
} from './connection.js';
import { assertSkipLocked, serverInfo } from './server-flavor.js';
import { nonNegativeInt, positiveInt } from './sql.js';

export interface SkipLockedOptions {
  /**
   * The SELECT of candidate rows, e.g. `SELECT * FROM place WHERE processed_at IS NULL ORDER BY
   * id`, without LIMIT or a locking clause: the helper appends `LIMIT 1 FOR UPDATE SKIP LOCKED`.
   */
  select: string;
  /** Values for the `?` in `select`. */
  params?: readonly unknown[];
  /** Stop after this many rows. Default: until no unlocked row is left. */
  maxRows?: number;
  /**
   * Checked between rows: once aborted, the row in hand is finished (committed) and the loop
   * throws `signal.reason`. Pass `ctx.signal`.
   */
  signal?: AbortSignal;
  /**
   * A row whose transaction deadlocked is rolled back and taken again (by whichever worker gets
   * it first); after this many deadlocks in a row the error is thrown. Default 3.
   */
  retries?: number;
}

const LOCKING_CLAUSE =
  /\b(for\s+update|for\s+share|lock\s+in\s+share\s+mode|skip\s+locked|nowait)\b/i;
const TRAILING_LIMIT = /\blimit\s+[\w?]+(\s*,\s*[\w?]+)?(\s+offset\s+[\w?]+)?\s*$/i;

/** The statement run for each row (pure). */
export function buildSkipLockedSelect(select: string): string {
  const sql = select.trim().replace(/;\s*$/, '');
  if (!/^(select|with)\b/i.test(sql)) {
    throw new TypeError('forEachSkipLocked: select must be a SELECT statement');
  }
  if (LOCKING_CLAUSE.test(sql)) {
    throw new TypeError(
      'forEachSkipLocked: leave the locking clause out of select; FOR UPDATE SKIP LOCKED is added',
    );
  }
  if (TRAILING_LIMIT.test(sql)) {
    throw new TypeError(
      'forEachSkipLocked: leave LIMIT out of select; each row is taken with LIMIT 1 in its own ' +
        'transaction',
    );
  }
  return `${sql} LIMIT 1 FOR UPDATE SKIP LOCKED`;
}

/**
 * Calls `fn(row, conn)` for each row of `select` that no other worker holds, one row per
 * transaction, until none is left. Returns how many rows were processed (committed).
 *
 *     const n = await forEachSkipLocked<Place>(ctx.db, {
 *       select: 'SELECT * FROM place WHERE processed_at IS NULL ORDER BY id',
 *       signal: ctx.signal,
 *     }, async (place, conn) => {
 *       await upsertRows(conn, { table: 'population', key: ['place_id'], rows: [await fetch(place)] });
 *       await conn.query('UPDATE place SET processed_at = NOW(3) WHERE id = ?', [place.id]);
 *     });
 */
export async function forEachSkipLocked<T = RowDataPacket>(
  db: Db,
  options: SkipLockedOptions,
  fn: (row: T, conn: Connection) => Promise<unknown>,
): Promise<number> {
  const sql = buildSkipLockedSelect(options.select);
  const maxRows = options.maxRows == null ? Infinity : positiveInt('maxRows', options.maxRows);
  const retries = nonNegativeInt('retries', options.retries ?? 3);
  const params = [...(options.params ?? [])];
  assertSkipLocked(await serverInfo(db));

  return withConnection(db, async (conn) => {
    if (!isPool(db)) await assertNoOpenTransaction(conn, 'forEachSkipLocked');
    let processed = 0;
    let conflicts = 0;
    let lastDone: string | undefined;
    while (processed < maxRows) {
      options.signal?.throwIfAborted();
      try {
        // READ COMMITTED for each row's transaction (the statement applies to the next one only):
        // under REPEATABLE READ, workers' next-key locks on the status index deadlock each other
        // when they mark their rows done (measured in bench/scenarios/claims.ts: 2,002 deadlocks
        // for 10,000 rows; none at READ COMMITTED). SKIP LOCKED needs no gap locks.
        await conn.query('SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
        const row = await inTransaction(conn, async (tx) => {
          const [rows] = await tx.query<RowDataPacket[]>(sql, params);
          const next = rows[0];
          if (!next) return undefined;
          const print = fingerprint(next);
          if (print === lastDone) {
            throw new Error(
              'forEachSkipLocked: the select returned the row just processed, unchanged; the ' +
                'callback must update it so the select no longer matches (e.g. SET ' +
                `processed_at = NOW()). Row: ${print.slice(0, 200)}`,
            );
          }
          await fn(next as T, tx);
          return print;
        });
        if (row === undefined) break;
        lastDone = row;
        processed++;
        conflicts = 0;
      } catch (err) {
        if (!isTransactionConflict(err) || conflicts >= retries) throw err;
        await sleep(backoffMs(conflicts++, 5, 200));
      }
    }
    return processed;
  });
}

function fingerprint(row: RowDataPacket): string {
  return JSON.stringify(row, (_key, value: unknown) =>
    typeof value === 'bigint' ? value.toString() : value,
  );
}

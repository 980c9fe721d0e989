/**
 * What the helpers run on, and the transaction rules they share.
 *
 * A helper takes a `Db`: a mysql2/promise Pool (`ctx.db`), or a Connection / PoolConnection the
 * job already holds. The difference matters in two places:
 *
 * - A helper that runs its own transaction (`transaction`, `once`, `forEachSkipLocked`,
 *   `updateOptimistic`, `updateLocked`) takes a connection of its own from a pool. Handed a
 *   connection, it uses that one — and refuses if a transaction is open on it, because
 *   `START TRANSACTION` would silently commit the caller's half-done work.
 * - InnoDB answers a deadlock by rolling back the whole transaction. A helper may retry only what
 *   it owns: its own transaction, or a single statement it sent through a pool (autocommit). On a
 *   connection the caller handed in, the statement may have been part of the caller's
 *   transaction, so the deadlock is thrown to the caller, whose transaction is gone.
 *
 * MariaDB 11.6+ (`innodb_snapshot_isolation`, on by default) can also end a REPEATABLE READ
 * transaction with ER_CHECKREAD ("record has changed since last read"); it is retried like a
 * deadlock.
 */
import type { Connection, Pool, PoolConnection, ResultSetHeader } from 'mysql2/promise';
import { dbErrorCode } from '../errors.js';
import { nonNegativeInt } from './sql.js';

/** A mysql2/promise pool or connection (a `PoolConnection` is a `Connection`). */
export type Db = Pool | Connection;

export function isPool(db: Db): db is Pool {
  return typeof (db as Partial<Pool>).getConnection === 'function';
}

/** Error codes after which the whole transaction may be run again. */
const TRANSACTION_RETRY_CODES: ReadonlySet<string> = new Set(['ER_LOCK_DEADLOCK', 'ER_CHECKREAD']);

/** True for a deadlock (or MariaDB's snapshot-isolation conflict): retry the transaction. */
export function isTransactionConflict(err: unknown): boolean {
  const code = dbErrorCode(err);
  return code != null && TRANSACTION_RETRY_CODES.has(code);
}

/** Connections whose state is unknown after a failed ROLLBACK: destroyed, not returned. */
const broken = new WeakSet<Connection>();

/**
 * Runs `fn` on one connection: a fresh one from a pool (released afterwards, or destroyed when
 * its state is unknown), or the connection given.
 */
export async function withConnection<T>(db: Db, fn: (conn: Connection) => Promise<T>): Promise<T> {
  if (!isPool(db)) return fn(db);
  const conn: PoolConnection = await db.getConnection();
  try {
    return await fn(conn);
  } finally {
    if (broken.has(conn)) conn.destroy();
    else conn.release();
  }
}

/** SERVER_STATUS_IN_TRANS of the protocol's OK packet. */
const SERVER_STATUS_IN_TRANS = 0x0001;

/**
 * Refuses a connection with an open transaction (one cheap round trip, read from the server's
 * status flags, so it works on MySQL and MariaDB alike).
 */
export async function assertNoOpenTransaction(conn: Connection, helper: string): Promise<void> {
  if (await inOpenTransaction(conn)) {
    throw new Error(
      `${helper} runs its own transaction, but a transaction is open on this connection ` +
        '(START TRANSACTION would commit it). Commit or roll back first, or pass the pool.',
    );
  }
}

/** Whether a transaction is open on `conn` (one cheap round trip: the server's status flags). */
export async function inOpenTransaction(conn: Connection): Promise<boolean> {
  const [ok] = await conn.query<ResultSetHeader>('DO 0');
  return (ok.serverStatus & SERVER_STATUS_IN_TRANS) !== 0;
}

/** BEGIN, `fn`, COMMIT; on any error ROLLBACK and rethrow. Runs `fn` once. */
export async function inTransaction<T>(
  conn: Connection,
  fn: (conn: Connection) => Promise<T>,
): Promise<T> {
  await conn.beginTransaction();
  let value: T;
  try {
    value = await fn(conn);
  } catch (err) {
    await rollbackQuietly(conn);
    throw err;
  }
  try {
    await conn.commit();
  } catch (err) {
    // A COMMIT that failed on a live connection (a deadlock is impossible here, but a lost
    // connection is not) leaves nothing to commit; the outcome of a lost one is unknown.
    await rollbackQuietly(conn);
    throw err;
  }
  return value;
}

export async function rollbackQuietly(conn: Connection): Promise<void> {
  try {
    await conn.rollback();
  } catch {
    broken.add(conn);
  }
}

export interface TransactionOptions {
  /**
   * How many times to run the whole transaction again after a deadlock (or ER_CHECKREAD).
   * `fn` then runs more than once: its database writes were rolled back, but anything it did
   * outside the database was not. Default 3; 0 never retries.
   */
  retries?: number;
}

/**
 * Runs `fn` in a transaction on one connection (from the pool, or the one given): COMMIT after
 * it, ROLLBACK and rethrow on error, and the whole transaction again after a deadlock.
 *
 *     await transaction(ctx.db, async (conn) => {
 *       await conn.query('UPDATE account SET balance = balance - ? WHERE id = ?', [amount, from]);
 *       await conn.query('UPDATE account SET balance = balance + ? WHERE id = ?', [amount, to]);
 *     });
 */
export async function transaction<T>(
  db: Db,
  fn: (conn: Connection) => Promise<T>,
  options: TransactionOptions = {},
): Promise<T> {
  const retries = nonNegativeInt('retries', options.retries ?? 3);
  return withConnection(db, async (conn) => {
    if (!isPool(db)) await assertNoOpenTransaction(conn, 'transaction()');
    for (let attempt = 0; ; attempt++) {
      try {
        return await inTransaction(conn, fn);
      } catch (err) {
        if (!isTransactionConflict(err) || attempt >= retries) throw err;
        await sleep(backoffMs(attempt, 5, 200));
      }
    }
  });
}

/**
 * Runs one statement-sized piece of work, again after a deadlock — only when `db` is a pool (the
 * statement was its own autocommit transaction). See the header comment.
 */
export async function retryStatement<T>(
  db: Db,
  retries: number,
  work: () => Promise<T>,
): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await work();
    } catch (err) {
      if (!isPool(db) || !isTransactionConflict(err) || attempt >= retries) throw err;
      await sleep(backoffMs(attempt, 5, 200));
    }
  }
}

/** "Full jitter": a random wait in [0, min(max, base·2^attempt)) ms, so retries spread out. */
export function backoffMs(attempt: number, baseMs: number, maxMs: number): number {
  return Math.random() * Math.min(maxMs, baseMs * 2 ** Math.min(attempt, 30));
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

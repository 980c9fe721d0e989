/**
 * Client-side deadlines for statements. A server behind a network partition never answers and
 * never closes the socket: without a deadline a query waits forever (TCP keeps quiet for hours),
 * and a runner would sit on a job it can no longer prove it owns. mysql2's own query `timeout`
 * leaves the connection in use, so here a statement that misses its deadline destroys its
 * connection: nothing is left half-read, and a pool simply opens a fresh one next time.
 */
import type { Connection, FieldPacket, Pool, PoolConnection, QueryValues } from 'mysql2/promise';

/**
 * A statement that got no answer in time; treated like a lost connection. src/errors.ts (a leaf,
 * which cannot import this) recognises it by its `code`.
 */
export class StatementTimeoutError extends Error {
  readonly code = 'STATEMENT_TIMEOUT';
  constructor(
    what: string,
    /** The deadline it missed. */
    readonly ms: number,
  ) {
    super(`${what}: no answer from the database within ${ms} ms`);
    this.name = 'StatementTimeoutError';
  }
}

/** Settles with `work`, or rejects after `ms` (calling `onTimeout` first, to free resources). */
export function withDeadline<T>(
  work: Promise<T>,
  ms: number,
  what: string,
  onTimeout: () => void,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    // Timers run before the poll phase reads the sockets: after the event loop was blocked (a
    // burst of synchronous spawns), an answer that arrived in time would lose to its own
    // deadline. One more pass through the loop lets it be read first.
    const timer = setTimeout(
      () =>
        setImmediate(() => {
          if (settled) return;
          settled = true;
          onTimeout();
          reject(new StatementTimeoutError(what, ms));
        }),
      ms,
    );
    work.then(
      (value) => {
        clearTimeout(timer);
        if (settled) return;
        settled = true;
        resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        if (settled) return;
        settled = true;
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}

/** The one method the stores use; a Pool, a Connection and a `DeadlinePool` all have it. */
export interface Queryable {
  query<T>(sql: string, values?: QueryValues): Promise<[T, FieldPacket[]]>;
}

/** A pool whose every statement has a deadline. */
export class DeadlinePool implements Queryable {
  constructor(
    readonly pool: Pool,
    readonly deadlineMs: number,
  ) {}

  async query<T>(sql: string, values?: QueryValues): Promise<[T, FieldPacket[]]> {
    let conn: PoolConnection | undefined;
    let timedOut = false;
    const work = (async () => {
      const acquired = await this.pool.getConnection();
      // The deadline passed while connecting: this connection must not serve anyone.
      if (timedOut) {
        acquired.destroy();
        throw new StatementTimeoutError('statement', this.deadlineMs);
      }
      conn = acquired;
      try {
        return (await acquired.query(sql, values)) as unknown as [T, FieldPacket[]];
      } finally {
        if (!timedOut) acquired.release();
      }
    })();
    return withDeadline(work, this.deadlineMs, 'statement', () => {
      timedOut = true;
      conn?.destroy();
    });
  }

  end(): Promise<void> {
    return this.pool.end();
  }
}

/** `conn.query` with a deadline that destroys the connection when missed. */
export function queryWithDeadline<T>(
  conn: Connection,
  sql: string,
  values: QueryValues,
  ms: number,
): Promise<[T, FieldPacket[]]> {
  return withDeadline(
    conn.query(sql, values) as unknown as Promise<[T, FieldPacket[]]>,
    ms,
    'statement',
    () => conn.destroy(),
  );
}

/**
 * `conn` seen through `queryWithDeadline`: every statement on it has the deadline `ms`, and one
 * that misses it destroys the connection. For a single connection's short statements (a server
 * check, a ledger read), where a silent link must not leave the caller waiting for TCP to give up.
 */
export function withStatementDeadline(conn: Connection, ms: number): Queryable {
  return {
    query: <T>(sql: string, values?: QueryValues) =>
      queryWithDeadline<T>(conn, sql, values ?? [], ms),
  };
}

/**
 * Runs `fn` in a transaction on one connection of `db`: BEGIN, `fn`, COMMIT. For the few writes
 * that must land together (a verdict and the notifications it carries). On a `DeadlinePool` every
 * statement keeps the pool's deadline; on any failure the connection is destroyed rather than
 * reused (its transaction's state is unknown), which rolls back whatever was not committed.
 * A plain connection (no pool) runs the transaction on itself.
 */
export async function inTransaction<T>(
  db: Queryable,
  fn: (tx: Queryable) => Promise<T>,
): Promise<T> {
  const pool = db instanceof DeadlinePool ? db.pool : isPool(db) ? db : null;
  const deadlineMs = db instanceof DeadlinePool ? db.deadlineMs : null;
  if (!pool) return onConnection(db as unknown as Connection, deadlineMs, fn);
  const acquiring = pool.getConnection();
  const conn =
    deadlineMs == null
      ? await acquiring
      : await withDeadline(acquiring, deadlineMs, 'connection', () => {
          acquiring.then((c) => c.destroy()).catch(() => {});
        });
  try {
    const value = await onConnection(conn, deadlineMs, fn);
    conn.release();
    return value;
  } catch (err) {
    conn.destroy();
    throw err;
  }
}

async function onConnection<T>(
  conn: Connection,
  deadlineMs: number | null,
  fn: (tx: Queryable) => Promise<T>,
): Promise<T> {
  const tx: Queryable = {
    query: <R>(sql: string, values?: QueryValues) =>
      deadlineMs == null
        ? (conn.query(sql, values) as unknown as Promise<[R, FieldPacket[]]>)
        : queryWithDeadline<R>(conn, sql, values ?? [], deadlineMs),
  };
  await tx.query('START TRANSACTION');
  try {
    const value = await fn(tx);
    await tx.query('COMMIT');
    return value;
  } catch (err) {
    await tx.query('ROLLBACK').catch(() => {});
    throw err;
  }
}

function isPool(db: Queryable): db is Pool {
  return typeof (db as Partial<Pool>).getConnection === 'function';
}

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
  constructor(what: string, ms: number) {
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
    private readonly deadlineMs: number,
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

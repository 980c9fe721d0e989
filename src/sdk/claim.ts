/**
 * Claiming work rows (seed 000). Two workers that SELECT a ready row and then UPDATE it both see
 * it ready in the gap between the two statements, and both do the work. Claiming with a single
 * statement leaves no gap:
 *
 *     UPDATE reward_job SET status = 'working', worker_id = ?, claim_token = ?,
 *                           claimed_at = UTC_TIMESTAMP(3)
 *     WHERE status = 'ready' ORDER BY job_no LIMIT 10
 *
 * InnoDB makes concurrent claimers wait for each other's row locks and re-check `status`, so a
 * row goes to exactly one of them; `affectedRows` says how many this call got (0: nothing left).
 * The rows are then read back by worker id AND a token made fresh for every call, so a worker
 * never mistakes rows from an earlier batch of its own (still claimed, or reclaimed and claimed
 * again) for this one.
 *
 * A worker that dies leaves its rows claimed. `reclaimStale` puts rows claimed longer ago than a
 * bound back to ready. Times are the database server's, in UTC (`UTC_TIMESTAMP(3)`, not `NOW()`,
 * which follows each session's time_zone): the hosts' clocks and time zones do not matter. The
 * bound must exceed the longest a live worker ever holds a claim, or a row is reclaimed from a
 * worker still processing it and done twice — guard the effect with `once`.
 *
 * Table requirements (column names are options):
 *
 *     status VARCHAR(16) NOT NULL DEFAULT 'ready', worker_id VARCHAR(191) NULL,
 *     claim_token CHAR(36) NULL, claimed_at DATETIME(3) NULL,
 *     KEY (status, job_no),          -- the claim's WHERE + ORDER BY, or it scans and locks all
 *     KEY (claim_token)              -- the read-back
 */
import { randomUUID } from 'node:crypto';
import type { Connection, ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import { isPool, retryStatement, withConnection, type Db } from './connection.js';
import { fencedWork, type RunFence } from './fence.js';
import { columnId, orderByClause, positiveInt, setClause, tableId } from './sql.js';

/** Where the work rows live and how their claim is recorded. Shared by every claim helper. */
export interface ClaimTable {
  table: string;
  /** The order in which rows are handed out: `'job_no'`, `['priority DESC', 'id']`. */
  orderBy: string | readonly string[];
  /** An extra, trusted SQL condition ANDed to the claim (and to `reclaimStale`), e.g. `'kind = ?'`. */
  where?: string;
  /** Values for the `?` in `where`. */
  params?: readonly unknown[];
  /** Default `status`. */
  statusColumn?: string;
  /** Default `worker_id`. */
  workerColumn?: string;
  /** Default `claim_token`; a CHAR(36) (a UUID per claim). */
  tokenColumn?: string;
  /** Default `claimed_at`; DATETIME(3) keeps the reclaim bound precise. */
  claimedAtColumn?: string;
  /** The status of a row waiting to be claimed. Default `'ready'`. */
  ready?: string;
  /** The status of a claimed row. Default `'working'`. */
  claimed?: string;
}

export interface ClaimOptions extends ClaimTable {
  /** Who claims: stable and unique per worker, e.g. `${ctx.fire.host}-${process.pid}`. */
  worker: string;
  /** At most this many rows. */
  limit: number;
  /** Deadlock retries of the claim statement (only through a pool). Default 3. */
  retries?: number;
  /** The run's fence (`ctx.db.fence`; sdk/fence.ts): a stale run claims nothing (StaleFenceError). */
  fence?: RunFence;
}

/** The rows one `claimRows` call got, and the token that identifies exactly this claim. */
export interface Claim<T> {
  worker: string;
  token: string;
  /** In claim order; empty when nothing was ready. */
  rows: T[];
}

function columns(t: ClaimTable) {
  return {
    table: tableId(t.table),
    status: columnId(t.statusColumn ?? 'status'),
    worker: columnId(t.workerColumn ?? 'worker_id'),
    token: columnId(t.tokenColumn ?? 'claim_token'),
    claimedAt: columnId(t.claimedAtColumn ?? 'claimed_at'),
    ready: t.ready ?? 'ready',
    claimed: t.claimed ?? 'working',
  };
}

function extraWhere(t: ClaimTable): { sql: string; values: unknown[] } {
  return t.where
    ? { sql: ` AND (${t.where})`, values: [...(t.params ?? [])] }
    : { sql: '', values: [] };
}

/** The claim statement and the read-back (pure; exported for tests and for the curious). */
export function buildClaim(o: ClaimOptions, token: string) {
  const c = columns(o);
  const limit = positiveInt('limit', o.limit);
  if (!o.worker) throw new TypeError('worker must be a non-empty string');
  const where = extraWhere(o);
  const order = orderByClause(o.orderBy);
  return {
    claim: {
      sql:
        `UPDATE ${c.table} SET ${c.status} = ?, ${c.worker} = ?, ${c.token} = ?, ` +
        `${c.claimedAt} = UTC_TIMESTAMP(3) WHERE ${c.status} = ?${where.sql} ORDER BY ${order} LIMIT ?`,
      values: [c.claimed, o.worker, token, c.ready, ...where.values, limit],
    },
    readBack: {
      sql:
        `SELECT * FROM ${c.table} WHERE ${c.worker} = ? AND ${c.token} = ? AND ${c.status} = ? ` +
        `ORDER BY ${order}`,
      values: [o.worker, token, c.claimed],
    },
  };
}

/**
 * Claims up to `limit` ready rows for `worker` with one UPDATE, and reads them back.
 *
 *     const { rows, token } = await claimRows<RewardJob>(ctx.db, {
 *       table: 'reward_job', orderBy: 'job_no', worker, limit: 10 });
 *     for (const job of rows) { … }
 *     await completeClaim(ctx.db, queue, { token });
 */
export async function claimRows<T = RowDataPacket>(
  db: Db,
  options: ClaimOptions,
): Promise<Claim<T>> {
  const token = randomUUID();
  const { claim, readBack } = buildClaim(options, token);
  const readCommitted = async (conn: Connection) => {
    await conn.query('SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
  };
  const [result] = await (options.fence
    ? fencedWork(
        db,
        options.fence,
        options.retries ?? 3,
        (conn) => conn.query<ResultSetHeader>(claim.sql, claim.values),
        isPool(db) ? readCommitted : undefined,
      )
    : retryStatement(db, options.retries ?? 3, () =>
        isPool(db)
          ? withConnection(db, async (conn) => {
              // READ COMMITTED for the claim (the statement applies to the next transaction only):
              // at REPEATABLE READ the UPDATE's range scan takes next-key locks on rows it then does
              // not change, and claimers running together deadlock (bench claims: dozens per 10,000
              // rows, some past the retries). A connection given by the caller may be inside its own
              // transaction, whose level is the caller's.
              await conn.query('SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
              return conn.query<ResultSetHeader>(claim.sql, claim.values);
            })
          : db.query<ResultSetHeader>(claim.sql, claim.values),
      ));
  if (result.affectedRows === 0) return { worker: options.worker, token, rows: [] };
  const [rows] = await db.query<RowDataPacket[]>(readBack.sql, readBack.values);
  return { worker: options.worker, token, rows: rows as T[] };
}

export interface ReclaimOptions {
  /**
   * Rows claimed longer ago than this (ms, by the database's clock) go back to ready. Measure the
   * worst case a live worker holds a claim and add a wide margin (the seed: 2 min worst, 10 min
   * bound).
   */
  olderThanMs: number;
  /** The run's fence (`ctx.db.fence`): a stale run gives nothing back (StaleFenceError). */
  fence?: RunFence;
}

export function buildReclaim(t: ClaimTable, o: ReclaimOptions) {
  const c = columns(t);
  const micros = positiveInt('olderThanMs', o.olderThanMs) * 1000;
  const where = extraWhere(t);
  return {
    sql:
      `UPDATE ${c.table} SET ${c.status} = ?, ${c.worker} = NULL, ${c.token} = NULL, ` +
      `${c.claimedAt} = NULL WHERE ${c.status} = ? AND ${c.claimedAt} < UTC_TIMESTAMP(3) - INTERVAL ? ` +
      `MICROSECOND${where.sql}`,
    values: [c.ready, c.claimed, micros, ...where.values],
  };
}

/** Puts rows claimed longer than `olderThanMs` ago back to ready; returns how many. */
export async function reclaimStale(
  db: Db,
  table: ClaimTable,
  options: ReclaimOptions,
): Promise<number> {
  const { sql, values } = buildReclaim(table, options);
  const [result] = await statement<ResultSetHeader>(db, options.fence, sql, values);
  return result.affectedRows;
}

export interface CompleteOptions {
  /** The new status. Default `'done'`. */
  status?: string;
  /** Only these rows of the claim (values of `idColumn`); default every row still claimed. */
  ids?: readonly unknown[];
  /** Default `id`. */
  idColumn?: string;
  /** More columns to set with the status, e.g. `{ finished_at: new Date() }`. */
  set?: Readonly<Record<string, unknown>>;
  /** The run's fence (`ctx.db.fence`): a stale run changes no row (StaleFenceError). */
  fence?: RunFence;
}

/**
 * Marks rows of a claim finished — only while they are still this claim's: a row reclaimed and
 * claimed by another worker meanwhile is left alone. Returns how many rows changed; fewer than
 * expected means some claim was lost (the reclaim bound is too short).
 */
export async function completeClaim(
  db: Db,
  table: ClaimTable,
  claim: Pick<Claim<unknown>, 'token'>,
  options: CompleteOptions = {},
): Promise<number> {
  const { sql, values } = buildComplete(table, claim.token, options);
  if (sql === '') return 0;
  const [result] = await statement<ResultSetHeader>(db, options.fence, sql, values);
  return result.affectedRows;
}

export function buildComplete(table: ClaimTable, token: string, o: CompleteOptions) {
  const c = columns(table);
  const extra = setClause(o.set ?? {});
  const ids = o.ids;
  if (ids && ids.length === 0) return { sql: '', values: [] };
  return {
    sql:
      `UPDATE ${c.table} SET ${c.status} = ?${extra.sql ? `, ${extra.sql}` : ''} ` +
      `WHERE ${c.token} = ? AND ${c.status} = ?` +
      (ids ? ` AND ${columnId(o.idColumn ?? 'id')} IN (?)` : ''),
    values: [o.status ?? 'done', ...extra.values, token, c.claimed, ...(ids ? [ids] : [])],
  };
}

/**
 * Gives rows of a claim back (ready, no worker) at once — e.g. when the job is told to stop —
 * instead of leaving them for `reclaimStale`. Returns how many.
 */
export async function releaseClaim(
  db: Db,
  table: ClaimTable,
  claim: Pick<Claim<unknown>, 'token'>,
  options: Pick<CompleteOptions, 'ids' | 'idColumn' | 'fence'> = {},
): Promise<number> {
  const c = columns(table);
  const ids = options.ids;
  if (ids && ids.length === 0) return 0;
  const [result] = await statement<ResultSetHeader>(
    db,
    options.fence,
    `UPDATE ${c.table} SET ${c.status} = ?, ${c.worker} = NULL, ${c.token} = NULL, ` +
      `${c.claimedAt} = NULL WHERE ${c.token} = ? AND ${c.status} = ?` +
      (ids ? ` AND ${columnId(options.idColumn ?? 'id')} IN (?)` : ''),
    [c.ready, claim.token, c.claimed, ...(ids ? [ids] : [])],
  );
  return result.affectedRows;
}

/** One statement: retried after a deadlock through a pool, or fenced (sdk/fence.ts). */
function statement<T extends ResultSetHeader>(
  db: Db,
  fence: RunFence | undefined,
  sql: string,
  values: unknown[],
) {
  if (fence) return fencedWork(db, fence, 3, (conn) => conn.query<T>(sql, values));
  return retryStatement(db, 3, () => db.query<T>(sql, values));
}

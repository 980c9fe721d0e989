/**
 * Fenced writes (issue 43): a run that baton has stopped cannot commit its effects.
 *
 * baton stops what it can, but an in-process handler that ignores `ctx.signal`, or a job on a
 * host that froze and thawed, may still be writing after its row says lost, timeout or killed —
 * and after the job's next run started elsewhere. The job's lock keeps a second *start* out; this
 * keeps the first run's late *writes* out.
 *
 * Every run has a fence (`ctx.fence`, `BATON_FENCE`): its run id. Ids only grow, and after a
 * failover they move past every id the old primary handed out, so a newer run of a job always
 * has a higher fence. A winner under the job's lock records its fence as the newest of the job's
 * slot (`baton_fences`) after its claim and before its run starts (store/fire-writes.ts).
 *
 * `fenced` runs the job's writes in a transaction and, before its COMMIT, reads the run's row
 * and the job's fence row with a shared lock (held to the end of the transaction): the row must
 * still be `running` and no newer fence may hold the job. Otherwise it rolls back and throws
 * `StaleFenceError`. The shared lock orders the check with a new claim: a claim that moves the
 * fence after the check waits for this COMMIT (so these writes land before the new run starts);
 * one that moved it before is seen. docs/job-sdk.md, "Fenced writes".
 *
 * The check reads baton's own tables, qualified by baton's database name, so it works on any
 * database of the same server the job's user may read them on (`SELECT` on `baton_runs` and
 * `baton_fences`). Data on another server cannot join baton's transaction: store the fence with
 * each effect there and refuse a lower one (the docs' pattern).
 */
import type { Connection, Pool, RowDataPacket } from 'mysql2/promise';
import { escapeId } from 'mysql2/promise';
import { dbErrorCode } from '../errors.js';
import {
  backoffMs,
  inOpenTransaction,
  inTransaction,
  isPool,
  isTransactionConflict,
  sleep,
  withConnection,
  type Db,
  type TransactionOptions,
} from './connection.js';
import { nonNegativeInt } from './sql.js';
import { SdkError } from './errors.js';

/** What a run's fenced writes are checked against. */
export interface RunFence {
  /** The run's fence: its run id (`ctx.fence`, `BATON_FENCE`). */
  fence: number;
  /** baton's database (where `baton_runs` and `baton_fences` are), on the job's server. */
  database: string;
  /** Told of each refusal (library mode counts them per run for its warning). */
  onRefused?: (err: StaleFenceError) => void;
}

/** Why a fenced transaction was refused. */
export type StaleReason = 'not-running' | 'newer-fence' | 'no-run';

/**
 * A fenced transaction of a run that no longer holds its job: it was rolled back, nothing of it
 * committed. Thrown from job code it fails the run (which is over for baton anyway).
 */
export class StaleFenceError extends SdkError {
  constructor(
    readonly fence: number,
    readonly reason: StaleReason,
    /** The run's status as its row says (`lost`, `timeout`, `killed`, …); null: no row. */
    readonly status: string | null,
    /** The job's newest fence when it is newer than this run's; else null. */
    readonly newerFence: number | null,
  ) {
    super(
      'STALE_FENCE',
      `run ${fence} no longer holds its job (${describe(reason, status, newerFence)}): ` +
        'its fenced transaction was rolled back and nothing of it was written',
    );
  }
}

function describe(reason: StaleReason, status: string | null, newer: number | null): string {
  if (reason === 'no-run') return "its row is not in baton's database on this server";
  if (reason === 'newer-fence') return `a newer run, fence ${newer}, holds it`;
  return `its row says ${status}`;
}

/** The lookup of `checkFence` (the run's row and its job slot's fence), per baton database. */
function checkSql(database: string): string {
  const db = escapeId(database);
  // LOCK IN SHARE MODE (MariaDB and MySQL alike; MariaDB has no FOR SHARE): the run's row and
  // the fence row are locked to the end of the transaction — or, with no fence row yet, the gap
  // where a first claim of the slot would insert it.
  return `SELECT r.status, f.fence AS newest
       FROM ${db}.baton_runs AS r
       LEFT JOIN ${db}.baton_fences AS f
         ON f.namespace = r.namespace AND f.job = r.job AND f.slot = r.winner
      WHERE r.id = ?
      LOCK IN SHARE MODE`;
}

/**
 * Checks, inside the caller's open transaction on `conn`, that the run still holds its job;
 * throws StaleFenceError otherwise (the caller rolls back). Call it right before COMMIT: the
 * shared locks it takes are held until then.
 */
export async function checkFence(conn: Connection, f: RunFence): Promise<void> {
  const fence = fenceValue(f.fence);
  if (!f.database)
    throw new TypeError("a run fence needs baton's database name (BATON_FENCE_DATABASE)");
  let rows: RowDataPacket[];
  try {
    [rows] = await conn.query<RowDataPacket[]>(checkSql(f.database), [fence]);
  } catch (err) {
    const code = dbErrorCode(err);
    if (
      code === 'ER_NO_SUCH_TABLE' ||
      code === 'ER_BAD_DB_ERROR' ||
      code === 'ER_TABLEACCESS_DENIED_ERROR'
    ) {
      throw new SdkError(
        'FENCE_UNAVAILABLE',
        `the fence of run ${fence} cannot be checked on this connection: ${(err as Error).message}. ` +
          `A fenced transaction reads baton's tables (${f.database}.baton_runs, baton_fences) on ` +
          "the job's server; for data elsewhere, store the fence with each effect and refuse a " +
          'lower one (docs/job-sdk.md, "Fenced writes").',
        { cause: err },
      );
    }
    throw err;
  }
  const row = rows[0];
  let refused: StaleFenceError | null = null;
  if (!row) refused = new StaleFenceError(fence, 'no-run', null, null);
  else {
    const status = String(row.status);
    const newest = row.newest == null ? null : Number(row.newest);
    if (status !== 'running') refused = new StaleFenceError(fence, 'not-running', status, null);
    else if (newest != null && newest > fence) {
      refused = new StaleFenceError(fence, 'newer-fence', status, newest);
    }
  }
  if (refused) {
    f.onRefused?.(refused);
    throw refused;
  }
}

/**
 * Runs `fn` in a transaction that commits only while the run still holds its job (see the
 * header): `fn`'s writes, then the fence check, then COMMIT; a stale run's transaction is rolled
 * back and StaleFenceError thrown. Retried after a deadlock like `transaction` (then `fn` runs
 * again). Keep it short: a stale run's open transaction holds the next claim of its job back.
 *
 *     await fenced(ctx.db, ctx.db.fence, async (tx) => {
 *       await tx.query('INSERT INTO settlement (day, amount) VALUES (?, ?)', [day, amount]);
 *     });
 */
export function fenced<T>(
  db: Db,
  f: RunFence,
  fn: (tx: Connection) => Promise<T>,
  options: TransactionOptions = {},
): Promise<T> {
  return fencedWork(db, f, nonNegativeInt('retries', options.retries ?? 3), fn);
}

/**
 * What every fenced helper runs: `work` then the fence check in a transaction of its own (on a
 * connection from the pool, or the one given; `prepare` before its BEGIN, e.g. an isolation
 * level), retried after a deadlock — or, on a connection the caller has a transaction open on,
 * inside that transaction, whose COMMIT is the caller's (the check's locks are held until then).
 */
export function fencedWork<R>(
  db: Db,
  f: RunFence,
  retries: number,
  work: (conn: Connection) => Promise<R>,
  prepare?: (conn: Connection) => Promise<void>,
): Promise<R> {
  const checked = async (conn: Connection) => {
    const value = await work(conn);
    await checkFence(conn, f);
    return value;
  };
  return withConnection(db, async (conn) => {
    if (!isPool(db) && (await inOpenTransaction(conn))) return checked(conn);
    for (let attempt = 0; ; attempt++) {
      await prepare?.(conn);
      try {
        return await inTransaction(conn, checked);
      } catch (err) {
        if (!isTransactionConflict(err) || attempt >= retries) throw err;
        await sleep(backoffMs(attempt, 5, 200));
      }
    }
  });
}

/** `ctx.db`: the job's pool, with the run's fence and its fenced transaction. */
export type FencedPool = Pool & {
  /** The run's fence, to pass to the helpers (`once(ctx.db, { …, fence: ctx.db.fence })`). */
  readonly fence: RunFence;
  /** `fenced(ctx.db, ctx.db.fence, fn, options)`. */
  fenced<T>(fn: (tx: Connection) => Promise<T>, options?: TransactionOptions): Promise<T>;
};

/**
 * The pool as a run sees it: every method of `pool` (bound to it), plus `fence` and `fenced`.
 * One pool may serve many runs (library mode): each run gets its own view of it.
 */
export function fencedPool(pool: Pool, f: RunFence): FencedPool {
  const own = {
    fence: f,
    fenced: <T>(fn: (tx: Connection) => Promise<T>, options?: TransactionOptions) =>
      fenced(pool, f, fn, options),
  };
  return new Proxy(pool, {
    get(target, name) {
      if (name === 'fence' || name === 'fenced') return own[name];
      const value: unknown = Reflect.get(target, name, target);
      return typeof value === 'function'
        ? (value as (...a: unknown[]) => unknown).bind(target)
        : value;
    },
  }) as FencedPool;
}

/**
 * The run's fence in a command job's process (or any process baton started): `BATON_FENCE` and
 * `BATON_FENCE_DATABASE`. For `fenced(pool, runFenceFromEnvironment(), fn)` on a pool of the
 * job's own.
 */
export function runFenceFromEnvironment(env: NodeJS.ProcessEnv = process.env): RunFence {
  const fence = Number(env.BATON_FENCE);
  const database = env.BATON_FENCE_DATABASE;
  if (!Number.isSafeInteger(fence) || fence <= 0 || !database) {
    throw new Error(
      'BATON_FENCE and BATON_FENCE_DATABASE must be set (this process is run by baton)',
    );
  }
  return { fence, database };
}

function fenceValue(fence: number): number {
  if (!Number.isSafeInteger(fence) || fence <= 0) {
    throw new TypeError(`invalid fence ${String(fence)}: pass ctx.db.fence (a run's fence)`);
  }
  return fence;
}

/**
 * Pruning `baton_runs`: deleting history rows older than the retention (`retention:` in
 * schedules.yaml, `baton prune`). History is only ever deleted here, and only when asked.
 *
 * The age of a row is the age of its fire, `scheduled_at`, measured against the database's clock
 * (`NOW(3)`, read once: one bound for the whole prune, whatever this host's clock says). Why that
 * column: it is the row's identity (the fire), set on every row, and it is the last column of
 * the key `baton_runs_job_status (namespace, job, status, scheduled_at)` (migration 0005) — so
 * "this job's `skipped` rows before B" is one contiguous index range. `started_at` and
 * `finished_at` are not indexed, and differ from the fire by the run's length at most.
 *
 * The deletion never holds a long lock, nor many locks at once:
 * - per job and per status, the ids of at most `batchSize` rows are read with a plain SELECT
 *   (a consistent read: it takes no lock), then deleted by primary key, each DELETE its own
 *   autocommit statement — only those rows are locked, for milliseconds;
 * - nothing scans the table. EXPLAIN (MariaDB 10.11): the batch SELECT and the dry run's COUNT
 *   are `type: range` on `baton_runs_job_status`, `Using where; Using index` (an index-only range
 *   read); the job walk and the latest success are `Select tables optimized away` (one index
 *   dive each); the DELETE is `range` on PRIMARY. test/e2e/retention.test.ts checks the plans;
 * - `running` rows are never read, and the DELETE re-checks it;
 * - each job keeps its latest `done` fire, however old: `baton status` reads it as the job's last
 *   success, and the dead-man's switch counts from it (a monthly job pruned at 30 days would
 *   otherwise show "last success: never").
 *
 * The chain's rows (`baton_dependent_fires`, docs/dependencies.md) go with the runs' bound: a
 * child's rows of instants before it that are judged (`started`, `skipped`), and those still
 * `waiting` whose deadline is before the bound too (a child removed from the schedule, or one no
 * runner had, is never judged), per child along the primary key `(namespace, job, scheduled_at, …)`, the
 * child's latest `done` instant kept like its run (`history` still names the parents behind it).
 *
 * The rows of schedules created at run time and since removed (`baton_schedules`, library mode)
 * go with the runs' bound too, by when they were removed: a live schedule is never pruned.
 *
 * Two prunes at once (two runners, a runner and `baton prune`) are harmless: both delete by id,
 * and a row deleted twice is counted once. Runners still take a lock so that only one does the
 * work (`withPruneLock`).
 */
import type { ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import type { Retention } from '../config/schema.js';
import type { Queryable } from './deadline.js';
import { databaseNow } from './fire-reads.js';
import { pruneLockName } from '../lock-names.js';
import { RUN_STATUSES, type RunStatus } from '../run-status.js';
import { deleteActionsBefore } from './audit.js';
import { deleteInBatches } from './batch-delete.js';
import { orEmpty } from '../errors.js';
import { deleteNoticesBefore } from './notifications.js';
import { deleteRunRequestsBefore } from './run-requests.js';
import { deleteOutputBefore, deleteOutputOf } from './run-output.js';
import { countTalliesBefore, deleteTalliesBefore } from './skip-tallies.js';
import { countRemovedSchedulesBefore, deleteRemovedSchedulesBefore } from './schedules.js';

/** Rows per DELETE: a few hundred milliseconds of work at most, even with large output tails. */
export const DEFAULT_BATCH_SIZE = 500;

/**
 * The statuses pruned: every finished one (`runs`: done, failed, timeout, interrupted, killed,
 * lost, missed) and `skipped`. `running` is not among them: a run going on now is never deleted.
 */
const PRUNED_STATUSES = RUN_STATUSES.filter((s) => s !== 'running');

export interface PruneOptions {
  namespace: string;
  retention: Retention;
  /** Count what would be deleted, delete nothing. */
  dryRun?: boolean;
  batchSize?: number;
  /** A pause between two DELETEs, to leave the server to other work. */
  pauseMs?: number;
  /** Stops between two batches (a runner shutting down); the result counts what was done. */
  signal?: AbortSignal;
}

export interface PruneResult {
  namespace: string;
  dryRun: boolean;
  /** Finished runs deleted (or that would be). */
  runs: number;
  /** Skip rows deleted (or that would be). */
  skips: number;
  /** Rows of `baton_skip_tallies` deleted with the skips' bound (or that would be). */
  skipTallies: number;
  /** Output chunks deleted, with their runs or by `retention.output` (not counted by a dry run). */
  outputChunks: number;
  /** Finished notifications deleted with the runs' bound (not counted by a dry run). */
  notifications: number;
  /** Operators' actions (`baton_audit`) deleted with the runs' bound (not counted by a dry run). */
  actions: number;
  /** Library mode's run requests (`baton_run_requests`) deleted with the runs' bound (the same). */
  runRequests: number;
  /** The chain's judged rows (`baton_dependent_fires`) deleted with the runs' bound (or would be). */
  dependentFires: number;
  /**
   * Rows of schedules created at run time and removed (`baton_schedules`, library mode) deleted
   * with the runs' bound, by when they were removed (or would be).
   */
  removedSchedules: number;
  /** DELETE statements run (or that would be). */
  batches: number;
  /** Runs scheduled before this instant (database time) are pruned; null: runs are kept. */
  runsBefore: Date | null;
  skipsBefore: Date | null;
}

/** The predicate of every read: one job, one status, fires before a bound — one index range. */
const RANGE = 'namespace = ? AND job = ? AND status = ? AND scheduled_at < ?';
export const SELECT_BATCH_SQL = `SELECT id FROM baton_runs WHERE ${RANGE} LIMIT ?`;
export const COUNT_SQL = `SELECT COUNT(*) AS n FROM baton_runs WHERE ${RANGE}`;
/**
 * The namespace's next job name: one index dive into the fire key (`Select tables optimized
 * away`). Walking the jobs this way costs one dive per job, where `SELECT DISTINCT job` reads every
 * index entry of the namespace (MariaDB 10.11 does not choose a loose scan for it).
 */
export const NEXT_JOB_SQL =
  'SELECT MIN(job) AS job FROM baton_runs WHERE namespace = ? AND job > ?';
/** One index entry of `baton_runs_job_status` (`Select tables optimized away`). */
export const LATEST_DONE_SQL = `SELECT MAX(scheduled_at) AS latest FROM baton_runs
  WHERE namespace = ? AND job = ? AND status = 'done'`;

export async function pruneHistory(db: Queryable, options: PruneOptions): Promise<PruneResult> {
  const { namespace, retention, dryRun = false, batchSize = DEFAULT_BATCH_SIZE } = options;
  if (!Number.isInteger(batchSize) || batchSize < 1) {
    throw new RangeError(`batch size must be a positive integer, got ${batchSize}`);
  }
  const now = await databaseNow(db);
  const before = (ms: number | null) => (ms == null ? null : new Date(now.getTime() - ms));
  const result: PruneResult = {
    namespace,
    dryRun,
    runs: 0,
    skips: 0,
    skipTallies: 0,
    outputChunks: 0,
    notifications: 0,
    actions: 0,
    runRequests: 0,
    dependentFires: 0,
    removedSchedules: 0,
    batches: 0,
    runsBefore: before(retention.runsMs),
    skipsBefore: before(retention.skipsMs),
  };
  // Job names are never empty, so every one sorts after ''.
  for (
    let job = await nextJob(db, namespace, '');
    job != null;
    job = await nextJob(db, namespace, job)
  ) {
    for (const status of PRUNED_STATUSES) {
      if (options.signal?.aborted) return result;
      const kind = status === 'skipped' ? 'skips' : 'runs';
      let bound = kind === 'skips' ? result.skipsBefore : result.runsBefore;
      if (bound == null) continue;
      if (status === 'done') bound = await keepLatestDone(db, namespace, job, bound);
      const range = { namespace, job, status, bound };
      const { rows, batches } = dryRun
        ? await countRange(db, range, batchSize)
        : await deleteRange(db, range, batchSize, options, result);
      result[kind] += rows;
      result.batches += batches;
    }
  }
  if (result.runsBefore && !dryRun && !options.signal?.aborted) {
    const told = await deleteNoticesBefore(
      db,
      namespace,
      result.runsBefore,
      batchSize,
      options.signal,
    );
    result.notifications += told.rows;
    const actions = await deleteActionsBefore(
      db,
      namespace,
      result.runsBefore,
      batchSize,
      options.signal,
    );
    result.actions += actions.rows;
    const requests = await deleteRunRequestsBefore(
      db,
      namespace,
      result.runsBefore,
      batchSize,
      options.signal,
    );
    result.runRequests += requests.rows;
    result.batches += told.batches + actions.batches + requests.batches;
  }
  if (result.runsBefore && !options.signal?.aborted) {
    // A database from before migration 0018 has no chain rows.
    const chain = await orEmpty(
      pruneDependentFires(db, namespace, result.runsBefore, batchSize, options),
      { rows: 0, batches: 0 },
    );
    result.dependentFires += chain.rows;
    result.batches += chain.batches;
  }
  if (result.runsBefore && !options.signal?.aborted) {
    // A removed schedule's row, kept so that every replica saw the removal; a database from
    // before migration 0027 has none.
    const removed = dryRun
      ? {
          rows: await orEmpty(countRemovedSchedulesBefore(db, namespace, result.runsBefore), 0),
          batches: 0,
        }
      : await orEmpty(
          deleteRemovedSchedulesBefore(db, namespace, result.runsBefore, batchSize, options.signal),
          { rows: 0, batches: 0 },
        );
    result.removedSchedules += removed.rows;
    result.batches += dryRun ? Math.ceil(removed.rows / batchSize) : removed.batches;
  }
  if (result.skipsBefore && !options.signal?.aborted) {
    // The tallies whose whole hour is before the skips' bound (store/skip-tallies.ts).
    if (dryRun) {
      result.skipTallies = await countTalliesBefore(db, namespace, result.skipsBefore);
      result.batches += Math.ceil(result.skipTallies / batchSize);
    } else {
      const t = await deleteTalliesBefore(
        db,
        namespace,
        result.skipsBefore,
        batchSize,
        options.signal,
      );
      result.skipTallies = t.rows;
      result.batches += t.batches;
    }
  }
  const outputBefore = before(retention.outputMs ?? null);
  if (outputBefore && !dryRun && !options.signal?.aborted) {
    const { chunks, batches } = await deleteOutputBefore(
      db,
      namespace,
      outputBefore,
      options.signal,
    );
    result.outputChunks += chunks;
    result.batches += batches;
  }
  return result;
}

async function nextJob(db: Queryable, namespace: string, after: string): Promise<string | null> {
  const [[row]] = await db.query<RowDataPacket[]>(NEXT_JOB_SQL, [namespace, after]);
  return (row?.job as string | null | undefined) ?? null;
}

interface Range {
  namespace: string;
  job: string;
  status: RunStatus;
  bound: Date;
}

/** The bound for `done` rows: never past the job's latest success (its rows are kept). */
async function keepLatestDone(
  db: Queryable,
  namespace: string,
  job: string,
  bound: Date,
): Promise<Date> {
  const [[row]] = await db.query<RowDataPacket[]>(LATEST_DONE_SQL, [namespace, job]);
  const latest = (row?.latest as Date | null | undefined) ?? null;
  return latest != null && latest < bound ? latest : bound;
}

const rangeValues = (r: Range) => [r.namespace, r.job, r.status, r.bound];

async function countRange(
  db: Queryable,
  range: Range,
  batchSize: number,
): Promise<{ rows: number; batches: number }> {
  const [[row]] = await db.query<RowDataPacket[]>(COUNT_SQL, rangeValues(range));
  const rows = Number(row?.n ?? 0);
  return { rows, batches: Math.ceil(rows / batchSize) };
}

async function deleteRange(
  db: Queryable,
  range: Range,
  batchSize: number,
  { pauseMs = 0, signal }: PruneOptions,
  result: PruneResult,
): Promise<{ rows: number; batches: number }> {
  let rows = 0;
  let batches = 0;
  for (;;) {
    const [found] = await db.query<RowDataPacket[]>(SELECT_BATCH_SQL, [
      ...rangeValues(range),
      batchSize,
    ]);
    if (found.length === 0) break;
    // Their output first: if the runs' DELETE then fails, those runs were going anyway, while
    // output left behind by deleted runs would never be read or pruned with a run again. Skips
    // and missed marks have none.
    if (range.status !== 'skipped' && range.status !== 'missed') {
      result.outputChunks += await deleteOutputOf(
        db,
        found.map((r) => r.id as number),
      );
    }
    // By primary key, and never a `running` row, whatever happened since the read.
    const [res] = await db.query<ResultSetHeader>(
      "DELETE FROM baton_runs WHERE id IN (?) AND status <> 'running'",
      [found.map((r) => r.id as number)],
    );
    rows += res.affectedRows;
    batches++;
    if (found.length < batchSize || signal?.aborted) break;
    if (pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs));
  }
  return { rows, batches };
}

/** The namespace's next child with chain rows: one dive into the primary key. */
export const NEXT_CHILD_SQL =
  'SELECT MIN(job) AS job FROM baton_dependent_fires WHERE namespace = ? AND job > ?';
/** A child's judged rows before a bound: a range of the primary key. */
const CHAIN_RANGE =
  "namespace = ? AND job = ? AND scheduled_at < ? AND (status <> 'waiting' OR deadline < ?)";

/**
 * Deletes (or counts, for a dry run) each child's judged chain rows of instants before `bound`,
 * by instant: every generation of an instant goes together, as its runs do.
 */
async function pruneDependentFires(
  db: Queryable,
  namespace: string,
  bound: Date,
  batchSize: number,
  { dryRun = false, signal }: PruneOptions,
): Promise<{ rows: number; batches: number }> {
  const total = { rows: 0, batches: 0 };
  let child = '';
  for (;;) {
    const [[row]] = await db.query<RowDataPacket[]>(NEXT_CHILD_SQL, [namespace, child]);
    const next = (row?.job as string | null | undefined) ?? null;
    if (next == null || signal?.aborted) return total;
    child = next;
    const before = await keepLatestDone(db, namespace, child, bound);
    if (dryRun) {
      const [[n]] = await db.query<RowDataPacket[]>(
        `SELECT COUNT(*) AS n FROM baton_dependent_fires WHERE ${CHAIN_RANGE}`,
        [namespace, child, before, bound],
      );
      const rows = Number(n?.n ?? 0);
      total.rows += rows;
      total.batches += Math.ceil(rows / batchSize);
      continue;
    }
    const done = await deleteInBatches(
      db,
      {
        selectSql: `SELECT scheduled_at FROM baton_dependent_fires
                     WHERE ${CHAIN_RANGE} LIMIT ?`,
        params: [namespace, child, before, bound],
        deleteSql: `DELETE FROM baton_dependent_fires
                     WHERE scheduled_at IN (?) AND namespace = ? AND job = ?
                       AND (status <> 'waiting' OR deadline < ?)`,
        deleteParams: [namespace, child, bound],
        keyOf: (r) => r.scheduled_at as Date,
      },
      batchSize,
      signal,
    );
    total.rows += done.rows;
    total.batches += done.batches;
  }
}

export type PruneLockResult<T> =
  | { lockName: string; locked: false }
  | {
      lockName: string;
      locked: true;
      value: T;
      /** Whether the lock's release was confirmed; if not, end the session (see withPruneLock). */
      released: boolean;
    };

/**
 * Runs `work` while `session` holds the namespace's prune lock, so that one runner of the fleet
 * at a time prunes it. `GET_LOCK(…, 0)`: when another session holds the lock, `work` does not run
 * and the answer is `locked: false` at once (the holder is doing the work).
 *
 * A named lock belongs to the session that took it, so `session` must be one connection (never a
 * pool), and it must not go back to a pool still holding the lock. After `work` succeeds, the
 * lock is released on that session; `released: false` says the release was not confirmed. When
 * `work` throws (or the release is not confirmed), the session is in doubt — a statement may
 * still be running on it, the lock may still be held: the caller ends the session instead of
 * reusing it, and the lock ends with it. So nothing here releases after a failure.
 */
export async function withPruneLock<T>(
  session: Queryable,
  scope: { database: string; namespace: string },
  work: () => Promise<T>,
): Promise<PruneLockResult<T>> {
  const lockName = pruneLockName(scope.database, scope.namespace);
  const [[row]] = await session.query<RowDataPacket[]>('SELECT GET_LOCK(?, 0) AS got', [lockName]);
  if (row?.got !== 1) return { lockName, locked: false };
  const value = await work();
  let released = false;
  try {
    await session.query('DO RELEASE_LOCK(?)', [lockName]);
    released = true;
  } catch {
    // Reported as `released: false`: the caller ends the session, which frees the lock.
  }
  return { lockName, locked: true, value, released };
}

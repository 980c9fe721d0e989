/**
 * Retention in the daemon: with `retention:` in schedules.yaml, runners prune the history on their
 * own — soon after start, then every hour (`src/store/prune.ts` does the deleting, in small
 * batches).
 *
 * One runner of the fleet at a time: the prune runs under the namespace's prune lock
 * (`withPruneLock`, store/prune.ts), and a runner that finds the lock taken leaves the work to
 * its holder until the next interval. Two prunes at once would be harmless (both delete by id),
 * only wasted. The lock is taken on a connection of its own, borrowed from the pool for the prune
 * and released *on that connection* — a named lock belongs to its session, so a connection
 * handed back to the pool still holding it would keep it taken; after a failure, or when the
 * release cannot be confirmed, the connection is destroyed instead, which frees the lock with the
 * session.
 *
 * A failure (the database away, a missing DELETE grant) is logged and tried again at the next
 * interval; it never reaches the runner.
 */
import type { PoolConnection, QueryValues } from 'mysql2/promise';
import { formatDuration } from '../config/duration.js';
import type { Retention } from '../config/schema.js';
import { errorMessage } from '../errors.js';
import type { Logger } from '../log.js';
import { MAX_SLEEP_MS } from '../schedule/fire-schedule.js';
import { queryWithDeadline, type DeadlinePool, type Queryable } from '../store/deadline.js';
import { pruneHistory, withPruneLock } from '../store/prune.js';

export const DEFAULT_RETENTION_INTERVAL_MS = 3_600_000;
/** The first prune after start (or after `retention:` changes): once the runner has settled. */
export const FIRST_PRUNE_DELAY_MS = 5_000;
/** Each batch statement's deadline on the borrowed connection (a batch takes milliseconds). */
const PRUNE_STATEMENT_DEADLINE_MS = 30_000;
/** How long a stop waits for the batch in flight before it destroys the connection under it. */
const STOP_WAIT_MS = 1_000;
/** Between two DELETEs: the fleet's own writes go first. */
const PAUSE_BETWEEN_BATCHES_MS = 20;

/** Retention's pace; the runner sets it (timings.ts), these are the defaults. */
export interface RetentionTimings {
  /** DEFAULT_RETENTION_INTERVAL_MS: time between two prunes. */
  intervalMs: number;
  /** FIRST_PRUNE_DELAY_MS: the first prune after start, or after `retention:` changed. */
  firstPruneDelayMs: number;
  /** PRUNE_STATEMENT_DEADLINE_MS: each batch statement. */
  statementDeadlineMs: number;
  /** STOP_WAIT_MS: a stop waits this long for the batch in flight. */
  stopWaitMs: number;
  /** PAUSE_BETWEEN_BATCHES_MS: between two DELETEs. */
  batchPauseMs: number;
}

export const RETENTION_TIMINGS: Readonly<RetentionTimings> = {
  intervalMs: DEFAULT_RETENTION_INTERVAL_MS,
  firstPruneDelayMs: FIRST_PRUNE_DELAY_MS,
  statementDeadlineMs: PRUNE_STATEMENT_DEADLINE_MS,
  stopWaitMs: STOP_WAIT_MS,
  batchPauseMs: PAUSE_BETWEEN_BATCHES_MS,
};

export interface RetentionScheduleOptions {
  /** The runner's pool while it can coordinate; null while it cannot (then nothing is pruned). */
  pool: () => DeadlinePool | null;
  database: string;
  namespace: string;
  /** null: nothing to prune (until `update` gives a retention). */
  retention: Retention | null;
  log: Logger;
  /** RETENTION_TIMINGS, or some of them replaced. */
  timings?: Partial<RetentionTimings>;
}

export class RetentionSchedule {
  private retention: Retention | null;
  private timer: NodeJS.Timeout | undefined;
  /** When the next prune is due (this host's clock); null while there is no retention. */
  private dueAt: number | null = null;
  private running: Promise<void> | null = null;
  /** The connection of the prune in flight. */
  private conn: PoolConnection | undefined;
  private readonly stopSignal = new AbortController();
  private readonly t: RetentionTimings;

  constructor(private readonly options: RetentionScheduleOptions) {
    this.retention = options.retention;
    this.t = { ...RETENTION_TIMINGS, ...options.timings };
  }

  start(): void {
    if (this.retention) this.dueSoon();
  }

  /** After a reload: a changed retention applies soon; none stops pruning. */
  update(retention: Retention | null): void {
    const changed = JSON.stringify(retention) !== JSON.stringify(this.retention);
    this.retention = retention;
    if (!retention) {
      this.dueAt = null;
      clearTimeout(this.timer);
    } else if (changed) {
      this.dueSoon();
    }
  }

  /**
   * Clears the timer; a prune in flight stops after its current batch and is awaited. A batch
   * takes milliseconds; one that hangs (the database went away mid-statement) must not hold up
   * the runner's stop for its whole deadline, so after STOP_WAIT_MS its connection is destroyed
   * (which frees the prune lock too).
   */
  async stop(): Promise<void> {
    this.stopSignal.abort();
    this.dueAt = null;
    clearTimeout(this.timer);
    if (!this.running) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.running,
      new Promise((r) => (timer = setTimeout(r, this.t.stopWaitMs))),
    ]);
    clearTimeout(timer);
    this.conn?.destroy();
    await this.running;
  }

  private dueSoon(): void {
    this.schedule(Date.now() + this.t.firstPruneDelayMs);
  }

  private schedule(at: number): void {
    if (this.stopSignal.signal.aborted) return;
    this.dueAt = at;
    this.arm();
  }

  private arm(): void {
    clearTimeout(this.timer);
    if (this.dueAt == null) return;
    const wait = Math.min(Math.max(0, this.dueAt - Date.now()), MAX_SLEEP_MS);
    this.timer = setTimeout(() => this.wake(), wait);
    this.timer.unref();
  }

  private wake(): void {
    if (this.dueAt == null || this.stopSignal.signal.aborted) return;
    if (Date.now() < this.dueAt) return this.arm();
    // Due while the previous prune still runs (a reload meanwhile): after it, not beside it.
    if (this.running) return this.schedule(Date.now() + this.t.firstPruneDelayMs);
    const retention = this.retention;
    this.dueAt = null;
    if (!retention) return;
    const pool = this.options.pool();
    // Not connected (yet): look again soon rather than in an hour.
    if (!pool) return this.schedule(Date.now() + this.t.firstPruneDelayMs);
    this.running = this.prune(pool, retention).finally(() => {
      this.running = null;
      // Unless a reload already asked for a prune soon, or took the retention away.
      if (this.dueAt == null && this.retention) this.schedule(Date.now() + this.t.intervalMs);
    });
  }

  private async prune(pool: DeadlinePool, retention: Retention): Promise<void> {
    const { log, namespace, database } = this.options;
    let conn: PoolConnection | undefined;
    // Whether the connection may go back to the pool: not while it could still hold the lock.
    let reusable = false;
    try {
      conn = await pool.pool.getConnection();
      this.conn = conn;
      const db = deadlineQueryable(conn, this.t.statementDeadlineMs);
      const pruned = await withPruneLock(db, { database, namespace }, () =>
        pruneHistory(db, {
          namespace,
          retention,
          pauseMs: this.t.batchPauseMs,
          signal: this.stopSignal.signal,
        }),
      );
      if (!pruned.locked) {
        reusable = true;
        log.debug(
          { lockName: pruned.lockName },
          'history not pruned: another runner is pruning it',
        );
        return;
      }
      reusable = pruned.released;
      const result = pruned.value;
      log.info(
        {
          runs: result.runs,
          skips: result.skips,
          skipTallies: result.skipTallies,
          outputChunks: result.outputChunks,
          notifications: result.notifications,
          actions: result.actions,
          dependentFires: result.dependentFires,
          removedSchedules: result.removedSchedules,
          batches: result.batches,
          runsBefore: result.runsBefore?.toISOString() ?? null,
          skipsBefore: result.skipsBefore?.toISOString() ?? null,
          retention: describeRetention(retention),
        },
        'history pruned',
      );
    } catch (err) {
      log.warn(
        { err: errorMessage(err), retryInMs: this.t.intervalMs },
        'history not pruned: trying again at the next interval',
      );
    } finally {
      this.conn = undefined;
      giveBack(conn, reusable);
    }
  }
}

/**
 * Hands the connection back to the pool, or destroys it when it is in doubt (after a failure, or
 * a release of the lock that was not confirmed): the lock ends with its session, and a connection
 * in doubt never returns to the pool.
 */
function giveBack(conn: PoolConnection | undefined, reusable: boolean): void {
  if (!conn) return;
  if (!reusable) return conn.destroy();
  try {
    conn.release();
  } catch {
    conn.destroy();
  }
}

/** A borrowed connection whose every statement has a deadline (it is destroyed on a miss). */
function deadlineQueryable(conn: PoolConnection, deadlineMs: number): Queryable {
  return {
    query: <T>(sql: string, values?: QueryValues) =>
      queryWithDeadline<T>(conn, sql, values ?? [], deadlineMs),
  };
}

function describeRetention(r: Retention): string {
  const d = (ms: number | null) => (ms == null ? 'kept' : formatDuration(ms));
  const output = r.outputMs != null ? `, output ${d(r.outputMs)}` : '';
  return `runs ${d(r.runsMs)}, skips ${d(r.skipsMs)}${output}`;
}

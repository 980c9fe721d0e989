/**
 * One claiming worker process of the `claims` scenario (started by b-procs.ts). It takes rows of
 * the table `work` until none is left, by one of three strategies, and reports which rows it took
 * (so the scenario can count duplicates across workers) and the errors it met:
 *
 * - `claim`: the SDK's `claimRows` (one atomic UPDATE … ORDER BY … LIMIT n per batch, then a
 *   read-back by token) and `completeClaim`;
 * - `skip-locked`: the SDK's `forEachSkipLocked`, one row per transaction;
 * - `for-update`: the baseline a developer writes without either — BEGIN, `SELECT … ORDER BY id
 *   LIMIT 1 FOR UPDATE`, UPDATE, COMMIT — retrying after a deadlock or a lock wait timeout (and
 *   counting them).
 *
 * `workMs` is slept per row while the row is held (0: zero-work rows, the claim's own cost).
 * The SDK is the built one (dist/), as users get it.
 */
import mysql, { type RowDataPacket } from 'mysql2/promise';
import {
  claimRows,
  completeClaim,
  forEachSkipLocked,
  isTransactionConflict,
  type ClaimTable,
} from '../../dist/index.js';
import { goSignal, runWorker } from './b-procs.js';

export type ClaimStrategy = 'claim' | 'skip-locked' | 'for-update';

export interface ClaimTask {
  strategy: ClaimStrategy;
  url: string;
  worker: string;
  /** Rows per claim (`claim` only). */
  batch: number;
  workMs: number;
  /** The sessions' isolation level: InnoDB's default REPEATABLE READ, or READ COMMITTED. */
  isolation: 'repeatable-read' | 'read-committed';
}

export interface ClaimResult {
  worker: string;
  strategy: ClaimStrategy;
  /** Every row id this worker took (and completed), in order. */
  ids: number[];
  /** Claim statements / transactions that got at least one row. */
  batches: number;
  /** Errors the worker saw (the SDK retries its own deadlocks silently: the server counts those). */
  deadlocks: number;
  lockWaitTimeouts: number;
  /** Rows of a claim that completeClaim no longer found claimed (must be 0). */
  lost: number;
  /** Wall clock (ms since the epoch) at `go` and after the last row. */
  startMs: number;
  endMs: number;
}

const WORK_QUEUE: ClaimTable = { table: 'work', orderBy: 'id' };

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Runs an SDK call again after a deadlock that its own retries (3, through a pool) did not absorb,
 * counting each one: what a worker has to do when the error reaches it. Both calls are safe to
 * repeat (a claim statement is atomic; completeClaim is conditional on the claim's token).
 */
async function persist<T>(result: ClaimResult, call: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await call();
    } catch (err) {
      if (!isTransactionConflict(err) || result.deadlocks >= 1000) throw err;
      result.deadlocks++;
      await sleep(Math.random() * 20);
    }
  }
}

async function main(task: ClaimTask): Promise<ClaimResult> {
  const pool = mysql.createPool({ uri: task.url, connectionLimit: 2, timezone: 'Z' });
  const result: ClaimResult = {
    worker: task.worker,
    strategy: task.strategy,
    ids: [],
    batches: 0,
    deadlocks: 0,
    lockWaitTimeouts: 0,
    lost: 0,
    startMs: 0,
    endMs: 0,
  };
  try {
    // Every connection of the pool gets the session settings (queued before any other statement).
    pool.pool.on('connection', (c) => {
      c.query('SET SESSION innodb_lock_wait_timeout = 10');
      if (task.isolation === 'read-committed') {
        c.query('SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED');
      }
    });
    // Open both connections before the start, so no worker pays a connect inside the window.
    const held = await Promise.all([pool.getConnection(), pool.getConnection()]);
    held.forEach((c) => c.release());
    await goSignal();
    result.startMs = Date.now();
    switch (task.strategy) {
      case 'claim':
        for (;;) {
          const claim = await persist(result, () =>
            claimRows<{ id: number }>(pool, {
              ...WORK_QUEUE,
              worker: task.worker,
              limit: task.batch,
            }),
          );
          if (claim.rows.length === 0) break;
          result.batches++;
          if (task.workMs > 0) await sleep(task.workMs * claim.rows.length);
          for (const r of claim.rows) result.ids.push(Number(r.id));
          const done = await persist(result, () => completeClaim(pool, WORK_QUEUE, claim));
          result.lost += claim.rows.length - done;
        }
        break;
      case 'skip-locked':
        // forEachSkipLocked retries a deadlocked row 3 times in a row, then throws: the worker
        // counts that and calls it again (it goes on with whatever is left).
        result.batches = await persist(result, () =>
          forEachSkipLocked<{ id: number }>(
            pool,
            { select: "SELECT id FROM work WHERE status = 'ready' ORDER BY id" },
            async (row, conn) => {
              if (task.workMs > 0) await sleep(task.workMs);
              await conn.query("UPDATE work SET status = 'done', worker_id = ? WHERE id = ?", [
                task.worker,
                row.id,
              ]);
              result.ids.push(Number(row.id));
            },
          ),
        );
        break;
      case 'for-update': {
        const conn = await pool.getConnection();
        try {
          for (;;) {
            let id: number | undefined;
            try {
              await conn.beginTransaction();
              const [rows] = await conn.query<RowDataPacket[]>(
                "SELECT id FROM work WHERE status = 'ready' ORDER BY id LIMIT 1 FOR UPDATE",
              );
              id = rows[0] == null ? undefined : Number(rows[0].id);
              if (id != null) {
                if (task.workMs > 0) await sleep(task.workMs);
                await conn.query("UPDATE work SET status = 'done', worker_id = ? WHERE id = ?", [
                  task.worker,
                  id,
                ]);
              }
              await conn.commit();
            } catch (err) {
              await conn.rollback().catch(() => {});
              const code = (err as { code?: string }).code;
              if (isTransactionConflict(err)) result.deadlocks++;
              else if (code === 'ER_LOCK_WAIT_TIMEOUT') result.lockWaitTimeouts++;
              else throw err;
              continue;
            }
            if (id == null) break;
            result.batches++;
            result.ids.push(id);
          }
        } finally {
          conn.release();
        }
        break;
      }
    }
    result.endMs = Date.now();
    return result;
  } finally {
    await pool.end();
  }
}

runWorker(main);

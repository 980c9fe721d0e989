/**
 * Kill requests on `baton_runs` (migration 0011): `baton kill` (or the write API) on any host
 * writes one on a `running` row; the runner that owns the run finds it (`findKillRequests`, one
 * statement by primary key per tick, only while it has runs) and stops the job, and its verdict
 * is `killed` (run-verdicts.ts:finishRun, as any verdict). The issuer reads the row back
 * (`readKillState`) until the verdict is in, or until it finds the owner gone.
 *
 * The request is conditional on the row still being `running`, like every change of a running
 * row (runs.ts): a run that finished meanwhile is not touched. Every statement here names the
 * run's namespace as well as its id: a run id is unique across namespaces, but an issuer acting
 * for one namespace (the write API of a runner) must never read, nor change, another's run.
 */
import type { ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import type { RunStatus } from '../run-status.js';
import { truncate } from '../text.js';
import type { Queryable } from './deadline.js';
import { RUNNER_GONE_SQL } from './run-verdicts.js';

export interface KillRequest {
  /** The operator (src/operator.ts) or the API token's name: named in the row's error. */
  by: string;
  reason: string | null;
  /** SIGTERM → SIGKILL. */
  graceMs: number;
}

/** A run named by its namespace and id (the statements ask for both). */
export interface RunKey {
  namespace: string;
  id: number;
}

/**
 * Writes a kill request on a running run of the namespace that has none yet. False when the row
 * is not `running` (or already has a request): the caller reads the row to say which.
 */
export async function requestKill(db: Queryable, run: RunKey, r: KillRequest): Promise<boolean> {
  const [res] = await db.query<ResultSetHeader>(
    `UPDATE baton_runs
        SET kill_requested_at = NOW(3), kill_requested_by = ?, kill_reason = ?, kill_grace_ms = ?
      WHERE id = ? AND namespace = ? AND status = 'running' AND kill_requested_at IS NULL`,
    [
      truncate(r.by, 255),
      r.reason == null ? null : truncate(r.reason, 512),
      r.graceMs,
      run.id,
      run.namespace,
    ],
  );
  return res.affectedRows === 1;
}

/** The kill requests on those of `runIds` that are still running (the owner's tick). */
export async function findKillRequests(
  db: Queryable,
  runIds: readonly number[],
): Promise<Map<number, KillRequest>> {
  if (runIds.length === 0) return new Map();
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT id, kill_requested_by, kill_reason, kill_grace_ms FROM baton_runs
      WHERE id IN (?) AND status = 'running' AND kill_requested_at IS NOT NULL`,
    [runIds],
  );
  return new Map(
    rows.map((r) => [
      Number(r.id),
      {
        by: String(r.kill_requested_by ?? 'someone'),
        reason: r.kill_reason == null ? null : String(r.kill_reason),
        graceMs: Number(r.kill_grace_ms ?? 0),
      },
    ]),
  );
}

/** What the issuer of a kill needs to know about the run. */
export interface KillState {
  id: number;
  namespace: string;
  job: string;
  scheduledAt: Date;
  status: RunStatus;
  winner: boolean;
  /** The worker slot of a winner's row (1 for an ordinary job). */
  slot: number;
  /** The fire's generation (0, or an operator's re-run): what a `lost` notification is about. */
  rerun: number;
  host: string;
  lockConnectionId: number | null;
  finishedAt: Date | null;
  error: string | null;
  /** The request on the row, if any, and when it was written (database time). */
  request: (KillRequest & { at: Date }) | null;
  /**
   * A `running` row whose runner is gone: its lock session no longer holds its session lock, or
   * it started before the server did — the reaper's test (run-verdicts.ts:RUNNER_GONE_SQL).
   */
  orphaned: boolean;
}

/**
 * The row, or null when there is none with that id — in `namespace` when one is given (the write
 * API's), in any namespace when it is null (`baton kill`, whose operator holds the database's own
 * credentials). `serverStartedBefore`: as the reaper's (`serverStartedBefore` below), so that a
 * connection id of an earlier server life is not mistaken for a live session.
 */
export async function readKillState(
  db: Queryable,
  runId: number,
  namespace: string | null,
  serverStartedBefore: Date,
): Promise<KillState | null> {
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT id, namespace, job, scheduled_at, status, winner, rerun, host, lock_connection_id,
            finished_at, error, kill_requested_at, kill_requested_by, kill_reason, kill_grace_ms,
            (status = 'running' AND attempts > 0 AND ${RUNNER_GONE_SQL}) AS orphaned
       FROM baton_runs WHERE id = ?${namespace == null ? '' : ' AND namespace = ?'}`,
    namespace == null ? [serverStartedBefore, runId] : [serverStartedBefore, runId, namespace],
  );
  const r = rows[0];
  if (!r) return null;
  return {
    id: Number(r.id),
    namespace: String(r.namespace),
    job: String(r.job),
    scheduledAt: r.scheduled_at as Date,
    status: r.status as RunStatus,
    winner: r.winner != null && Number(r.winner) >= 1,
    slot: Number(r.winner ?? 1),
    rerun: Number(r.rerun ?? 0),
    host: String(r.host),
    lockConnectionId: r.lock_connection_id == null ? null : Number(r.lock_connection_id),
    finishedAt: r.finished_at as Date | null,
    error: r.error == null ? null : String(r.error),
    request:
      r.kill_requested_at == null
        ? null
        : {
            at: r.kill_requested_at as Date,
            by: String(r.kill_requested_by ?? 'someone'),
            reason: r.kill_reason == null ? null : String(r.kill_reason),
            graceMs: Number(r.kill_grace_ms ?? 0),
          },
    orphaned: Number(r.orphaned) === 1,
  };
}

/**
 * When the server started, rounded a second early (as LockSession.serverStartedBefore): rows
 * that started before it belong to an earlier life of the server.
 */
export async function serverStartedBefore(db: Queryable): Promise<Date> {
  const [status] = await db.query<RowDataPacket[]>("SHOW GLOBAL STATUS LIKE 'Uptime'", []);
  const [[now]] = await db.query<RowDataPacket[]>('SELECT NOW(3) AS now', []);
  const uptimeSeconds = Number(status[0]?.Value ?? 0);
  return new Date((now!.now as Date).getTime() - (uptimeSeconds + 1) * 1000);
}

/**
 * `baton_run_requests`, the owner: `baton run <job>` of a job the CLI does not run itself — a
 * library-mode replica's (migration 0014 says why), a placed one (`runOn`), or one asked of a
 * given runner (`--on-host`, the write API's `onHost`: `target_host`, migration 0021). The asker
 * inserts (actions/run-request.ts); a runner lists the open requests it may take — those of the
 * jobs it may run addressed to no one, and every one addressed to it — takes one by a
 * conditional UPDATE (one runner wins it), and records what came of it
 * (actions/run-request-watch.ts).
 *
 * `env` (the `--env K=V` parameters) is needed only until the request is taken: the take, and a
 * cancel, clear it in the same statement, so the parameters are not kept in plain text with the
 * request until retention (they are on the run's row, `secretEnv` masked). Values of a job's
 * `secretEnv` never get here: the CLI refuses them (cli/fleet-run.ts).
 */
import type { ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import { deleteInBatches } from './batch-delete.js';
import type { Queryable } from './deadline.js';

/**
 * How long the CLI waits for a replica to take its request; a request nobody took for this long
 * is stale and taken by no replica (the CLI cancels it too: `cancelRunRequest`).
 */
export const RUN_REQUEST_TTL_MS = 15_000;
/** `taken_by` of a request its CLI cancelled (no host is named ''). */
const CANCELLED = '';

export interface RunRequest {
  id: number;
  job: string;
  /** The runner it is addressed to; null: any runner that may run the job. */
  targetHost: string | null;
  takenBy: string | null;
  runId: number | null;
  outcome: string | null;
}

export async function insertRunRequest(
  db: Queryable,
  r: {
    namespace: string;
    job: string;
    requestedBy: string;
    env: Record<string, string>;
    /** The runner asked (`--on-host`); null or absent: any runner that may run the job. */
    targetHost?: string | null;
  },
): Promise<number> {
  const env = Object.keys(r.env).length > 0 ? JSON.stringify(r.env) : null;
  const [res] = await db.query<ResultSetHeader>(
    `INSERT INTO baton_run_requests (namespace, job, target_host, requested_at, requested_by, env)
     VALUES (?, ?, ?, NOW(3), ?, ?)`,
    [r.namespace, r.job, r.targetHost ?? null, r.requestedBy, env],
  );
  return res.insertId;
}

/**
 * Cancels a request no replica has taken (the CLI gave up waiting): true when cancelled, false
 * when a replica took it first — then it runs, and the CLI follows it as if it had been in time.
 */
export async function cancelRunRequest(db: Queryable, id: number, why: string): Promise<boolean> {
  const [res] = await db.query<ResultSetHeader>(
    `UPDATE baton_run_requests SET taken_by = ?, taken_at = NOW(3), outcome = ?, env = NULL
     WHERE id = ? AND taken_by IS NULL`,
    [CANCELLED, `cancelled: ${why}`.slice(0, 512), id],
  );
  return res.affectedRows === 1;
}

/** An open request, as the runner that may take it reads it. */
export interface OpenRunRequest {
  id: number;
  job: string;
  targetHost: string | null;
  env: Record<string, string>;
}

/**
 * The statement of `openRunRequests`, for a read that asks it together with another
 * (store/replica-inbox.ts): its columns are `id, job, target_host, env`.
 */
export function openRunRequestsQuery(
  namespace: string,
  host: string,
  jobs: readonly string[],
): { sql: string; values: unknown[] } {
  // `job IN ()` is not SQL: a runner that may run no job still answers requests addressed to it.
  return {
    sql: `SELECT id, job, target_host, env FROM baton_run_requests
     WHERE namespace = ? AND taken_by IS NULL
       AND (target_host = ? ${jobs.length > 0 ? 'OR (target_host IS NULL AND job IN (?))' : ''})
       AND requested_at > NOW(3) - INTERVAL ? MICROSECOND
     ORDER BY id LIMIT 20`,
    values:
      jobs.length > 0
        ? [namespace, host, jobs, RUN_REQUEST_TTL_MS * 1000]
        : [namespace, host, RUN_REQUEST_TTL_MS * 1000],
  };
}

/** A row of `openRunRequestsQuery`. */
export function toOpenRunRequest(r: RowDataPacket): OpenRunRequest {
  return {
    id: Number(r.id),
    job: String(r.job),
    targetHost: r.target_host == null ? null : String(r.target_host),
    env: r.env == null ? {} : (JSON.parse(String(r.env)) as Record<string, string>),
  };
}

/**
 * The open (untaken, fresh) requests `host` may take, oldest first: those of `jobs` (the jobs it
 * may run) addressed to no one, and every one addressed to it — of a job it may not run too, so
 * that it says why at once instead of leaving the asker to wait out the TTL.
 */
export async function openRunRequests(
  db: Queryable,
  namespace: string,
  host: string,
  jobs: readonly string[],
): Promise<OpenRunRequest[]> {
  const { sql, values } = openRunRequestsQuery(namespace, host, jobs);
  const [rows] = await db.query<RowDataPacket[]>(sql, values);
  return rows.map(toOpenRunRequest);
}

/**
 * Takes the request for `host`; false when another runner took it first, or the CLI cancelled
 * it, or it went stale meanwhile (checked again here: the list was read a moment ago), or it is
 * addressed to another runner (checked here too: the statement is the guarantee, not the list).
 * Its `env` is cleared by the take itself: the taker has it from `openRunRequests`.
 */
export async function takeRunRequest(db: Queryable, id: number, host: string): Promise<boolean> {
  const [res] = await db.query<ResultSetHeader>(
    `UPDATE baton_run_requests SET taken_by = ?, taken_at = NOW(3), env = NULL
     WHERE id = ? AND taken_by IS NULL AND (target_host IS NULL OR target_host = ?)
       AND requested_at > NOW(3) - INTERVAL ? MICROSECOND`,
    [host, id, host, RUN_REQUEST_TTL_MS * 1000],
  );
  return res.affectedRows === 1;
}

export async function settleRunRequest(
  db: Queryable,
  id: number,
  runId: number | null,
  outcome: string,
): Promise<void> {
  await db.query(`UPDATE baton_run_requests SET run_id = ?, outcome = ? WHERE id = ?`, [
    runId,
    outcome.slice(0, 512),
    id,
  ]);
}

export async function findRunRequest(db: Queryable, id: number): Promise<RunRequest | null> {
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT id, job, target_host, taken_by, run_id, outcome FROM baton_run_requests WHERE id = ?`,
    [id],
  );
  const r = rows[0];
  if (!r) return null;
  return {
    id: Number(r.id),
    job: String(r.job),
    targetHost: r.target_host == null ? null : String(r.target_host),
    takenBy: r.taken_by == null ? null : String(r.taken_by),
    runId: r.run_id == null ? null : Number(r.run_id),
    outcome: r.outcome == null ? null : String(r.outcome),
  };
}

/** Deletes requests made before `before` (retention's `runs` bound, store/prune.ts), in batches. */
export function deleteRunRequestsBefore(
  db: Queryable,
  namespace: string,
  before: Date,
  batchSize: number,
  signal?: AbortSignal,
): Promise<{ rows: number; batches: number }> {
  const batch = {
    selectSql: 'SELECT id FROM baton_run_requests WHERE namespace = ? AND requested_at < ? LIMIT ?',
    params: [namespace, before],
    deleteSql: 'DELETE FROM baton_run_requests WHERE id IN (?)',
  };
  return deleteInBatches(db, batch, batchSize, signal);
}

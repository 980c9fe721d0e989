/**
 * `baton_run_requests`, the owner: library mode's `baton run <job>` (migration 0014 says why).
 * The CLI inserts; a replica lists the open requests of its jobs, takes one by a conditional
 * UPDATE (one replica wins it), and records what came of it.
 */
import type { ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import type { Queryable } from './deadline.js';

/** A request nobody took for this long is stale: no replica will run it any more. */
export const RUN_REQUEST_TTL_MS = 60_000;

export interface RunRequest {
  id: number;
  job: string;
  takenBy: string | null;
  runId: number | null;
  outcome: string | null;
}

export async function insertRunRequest(
  db: Queryable,
  r: { namespace: string; job: string; requestedBy: string },
): Promise<number> {
  const [res] = await db.query<ResultSetHeader>(
    `INSERT INTO baton_run_requests (namespace, job, requested_at, requested_by)
     VALUES (?, ?, NOW(3), ?)`,
    [r.namespace, r.job, r.requestedBy],
  );
  return res.insertId;
}

/** The open (untaken, fresh) requests of `jobs`, oldest first. */
export async function openRunRequests(
  db: Queryable,
  namespace: string,
  jobs: readonly string[],
): Promise<{ id: number; job: string }[]> {
  if (jobs.length === 0) return [];
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT id, job FROM baton_run_requests
     WHERE namespace = ? AND taken_by IS NULL AND job IN (?)
       AND requested_at > NOW(3) - INTERVAL ? MICROSECOND
     ORDER BY id LIMIT 20`,
    [namespace, jobs, RUN_REQUEST_TTL_MS * 1000],
  );
  return rows.map((r) => ({ id: Number(r.id), job: String(r.job) }));
}

/** Takes the request for `host`; false when another replica took it first. */
export async function takeRunRequest(db: Queryable, id: number, host: string): Promise<boolean> {
  const [res] = await db.query<ResultSetHeader>(
    `UPDATE baton_run_requests SET taken_by = ?, taken_at = NOW(3)
     WHERE id = ? AND taken_by IS NULL`,
    [host, id],
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
    `SELECT id, job, taken_by, run_id, outcome FROM baton_run_requests WHERE id = ?`,
    [id],
  );
  const r = rows[0];
  if (!r) return null;
  return {
    id: Number(r.id),
    job: String(r.job),
    takenBy: r.taken_by == null ? null : String(r.taken_by),
    runId: r.run_id == null ? null : Number(r.run_id),
    outcome: r.outcome == null ? null : String(r.outcome),
  };
}

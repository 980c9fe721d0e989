/**
 * `baton_pauses`, the fleet's pause switches (`baton pause`, `baton resume`): a paused job is
 * skipped by every runner at its next fire, with a skip row that says so.
 */
import type { ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import type { Queryable } from './deadline.js';

export interface Pause {
  job: string;
  reason: string | null;
  pausedBy: string;
  pausedAt: Date;
}

interface PauseRow extends RowDataPacket {
  job: string;
  reason: string | null;
  paused_by: string;
  paused_at: Date;
}

const toPause = (r: PauseRow): Pause => ({
  job: r.job,
  reason: r.reason,
  pausedBy: r.paused_by,
  pausedAt: r.paused_at,
});

/** Pauses a job (again: the latest reason and author win). */
export async function pauseJob(
  db: Queryable,
  namespace: string,
  job: string,
  reason: string | null,
  pausedBy: string,
): Promise<void> {
  await db.query(
    `INSERT INTO baton_pauses (namespace, job, reason, paused_by, paused_at)
     VALUES (?, ?, ?, ?, NOW(3))
     ON DUPLICATE KEY UPDATE reason = VALUES(reason), paused_by = VALUES(paused_by),
       paused_at = VALUES(paused_at)`,
    [namespace, job, reason, pausedBy],
  );
}

/** Resumes a job; false when it was not paused. */
export async function resumeJob(db: Queryable, namespace: string, job: string): Promise<boolean> {
  const [res] = await db.query<ResultSetHeader>(
    'DELETE FROM baton_pauses WHERE namespace = ? AND job = ?',
    [namespace, job],
  );
  return res.affectedRows === 1;
}

export async function findPause(
  db: Queryable,
  namespace: string,
  job: string,
): Promise<Pause | null> {
  return (await findPauses(db, namespace, [job])).get(job) ?? null;
}

/** The pauses of the given jobs, by job (one statement for a whole instant's fires). */
export async function findPauses(
  db: Queryable,
  namespace: string,
  jobs: readonly string[],
): Promise<Map<string, Pause>> {
  const [rows] = await db.query<PauseRow[]>(
    `SELECT job, reason, paused_by, paused_at FROM baton_pauses
      WHERE namespace = ? AND job IN (?)`,
    [namespace, jobs],
  );
  return new Map(rows.map((r) => [r.job, toPause(r)]));
}

export async function listPauses(db: Queryable, namespace: string): Promise<Pause[]> {
  const [rows] = await db.query<PauseRow[]>(
    'SELECT job, reason, paused_by, paused_at FROM baton_pauses WHERE namespace = ? ORDER BY job',
    [namespace],
  );
  return rows.map(toPause);
}

/** The skip reason of a paused fire; starts with `paused` so it can be filtered on. */
export function pausedReason(p: Pause): string {
  return `paused by ${p.pausedBy} at ${p.pausedAt.toISOString()}${p.reason ? `: ${p.reason}` : ''}`;
}

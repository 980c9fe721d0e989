/**
 * The history as people ask for it: `baton history` (the newest fires first, filtered), `baton
 * show` (one row) and `baton explain` (every row of one fire). Read-only; for the protocol's own
 * reads see fire-reads.ts.
 */
import type { Queryable } from './deadline.js';
import type { ReasonKind, RunStatus } from '../run-status.js';
import { COLUMNS, toRun, type Run, type RunRow } from './runs.js';

/**
 * Every row of one fire: the winner first (then a `missed` mark), then the skips in the order they
 * were written (`baton explain`).
 */
export async function fireRows(
  db: Queryable,
  namespace: string,
  job: string,
  scheduledAt: Date,
): Promise<Run[]> {
  const [rows] = await db.query<RunRow[]>(
    `SELECT ${COLUMNS} FROM baton_runs
      WHERE namespace = ? AND job = ? AND scheduled_at = ?
      ORDER BY winner IS NULL, winner DESC, id`,
    [namespace, job, scheduledAt],
  );
  return rows.map(toRun);
}

export async function findRun(db: Queryable, id: number): Promise<Run | null> {
  const [rows] = await db.query<RunRow[]>(`SELECT ${COLUMNS} FROM baton_runs WHERE id = ?`, [id]);
  return rows[0] ? toRun(rows[0]) : null;
}

export interface HistoryFilter {
  namespace: string;
  job?: string;
  host?: string;
  status?: RunStatus;
  /** Rows of this `reason_kind` (skips of one kind, or `not-run`: the `missed` rows). */
  reasonKind?: ReasonKind;
  since?: Date;
  limit: number;
}

/**
 * Newest fires first. The order matches an index so that a LIMIT reads only what it shows: for
 * one job the fire key (`…, scheduled_at, winner`: within a fire the winner first), otherwise
 * `baton_runs_scheduled` (newest row first within a fire). Measured on a million rows in
 * bench/scenarios/history-scale.ts.
 */
export async function listRuns(db: Queryable, filter: HistoryFilter): Promise<Run[]> {
  const where = ['namespace = ?'];
  const params: unknown[] = [filter.namespace];
  if (filter.job != null) {
    where.push('job = ?');
    params.push(filter.job);
  }
  if (filter.host != null) {
    where.push('host = ?');
    params.push(filter.host);
  }
  if (filter.status != null) {
    where.push('status = ?');
    params.push(filter.status);
  }
  if (filter.reasonKind != null) {
    where.push('reason_kind = ?');
    params.push(filter.reasonKind);
  }
  if (filter.since != null) {
    where.push('scheduled_at >= ?');
    params.push(filter.since);
  }
  params.push(filter.limit);
  const [rows] = await db.query<RunRow[]>(
    `SELECT ${COLUMNS} FROM baton_runs WHERE ${where.join(' AND ')}
      ORDER BY ${filter.job != null ? 'scheduled_at DESC, winner DESC' : 'scheduled_at DESC, id DESC'}
      LIMIT ?`,
    params,
  );
  return rows.map(toRun);
}

/**
 * The latest run of `job` (a winner's row: scheduled, caught up or manual), or null; of a fan-out
 * fire, its highest slot. Both keys descending, so the fire key is read backwards from its end
 * (one row), where mixed directions would sort every run of the job.
 */
export async function latestRunOf(
  db: Queryable,
  namespace: string,
  job: string,
): Promise<Run | null> {
  const [rows] = await db.query<RunRow[]>(
    `SELECT ${COLUMNS} FROM baton_runs FORCE INDEX (baton_runs_fire)
      WHERE namespace = ? AND job = ? AND winner >= 1
      ORDER BY scheduled_at DESC, winner DESC LIMIT 1`,
    [namespace, job],
  );
  return rows[0] ? toRun(rows[0]) : null;
}

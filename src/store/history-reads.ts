/**
 * The history as people ask for it: `baton history` (the newest fires first, filtered), `baton
 * show` (one row) and `baton explain` (every row of one fire). Read-only; for the protocol's own
 * reads see fire-reads.ts.
 */
import type { RowDataPacket } from 'mysql2/promise';
import type { Queryable } from './deadline.js';
import type { ReasonKind, RunStatus } from '../run-status.js';
import { COLUMNS, toRun, type Run, type RunRow } from './runs.js';

/**
 * Every row of one fire, generation by generation (its scheduled run, then each re-run): within
 * one the winner first (then a `missed` mark), then the skips in the order they were written
 * (`baton explain`).
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
      ORDER BY rerun, winner IS NULL, winner DESC, id`,
    [namespace, job, scheduledAt],
  );
  return rows.map(toRun);
}

export async function findRun(db: Queryable, id: number): Promise<Run | null> {
  const [rows] = await db.query<RunRow[]>(`SELECT ${COLUMNS} FROM baton_runs WHERE id = ?`, [id]);
  return rows[0] ? toRun(rows[0]) : null;
}

/** One value, or several of which a row may have any (`--status failed --status timeout`). */
export type OneOrMore<T> = T | readonly T[];

/** Each field narrows the rows (AND); a field of several values matches any of them (OR). */
export interface HistoryFilter {
  namespace: string;
  job?: OneOrMore<string>;
  host?: OneOrMore<string>;
  status?: OneOrMore<RunStatus>;
  /** Rows of this `reason_kind` (skips of one kind, or `not-run`: the `missed` rows). */
  reasonKind?: OneOrMore<ReasonKind>;
  since?: Date;
  limit: number;
}

/**
 * Newest fires first. The order matches an index so that a LIMIT reads only what it shows: for
 * one job the fire key (`…, scheduled_at, rerun, winner`: within a fire the latest generation
 * first, and in it the winner first), otherwise
 * `baton_runs_scheduled` (newest row first within a fire). Measured on a million rows in
 * bench/scenarios/history-scale.ts.
 */
export async function listRuns(db: Queryable, filter: HistoryFilter): Promise<Run[]> {
  const where = ['namespace = ?'];
  const params: unknown[] = [filter.namespace];
  const matching = (column: string, value: OneOrMore<string> | undefined) => {
    const values = value == null ? [] : typeof value === 'string' ? [value] : value;
    if (values.length === 0) return;
    // `IN (?)` with an array: mysql2 expands it to a list of placeholders' values, escaped.
    where.push(values.length === 1 ? `${column} = ?` : `${column} IN (?)`);
    params.push(values.length === 1 ? values[0] : values);
  };
  matching('job', filter.job);
  matching('host', filter.host);
  matching('status', filter.status);
  matching('reason_kind', filter.reasonKind);
  if (filter.since != null) {
    where.push('scheduled_at >= ?');
    params.push(filter.since);
  }
  params.push(filter.limit);
  const oneJob = typeof filter.job === 'string' || filter.job?.length === 1;
  const [rows] = await db.query<RunRow[]>(
    `SELECT ${COLUMNS} FROM baton_runs WHERE ${where.join(' AND ')}
      ORDER BY ${oneJob ? 'scheduled_at DESC, rerun DESC, winner DESC' : 'scheduled_at DESC, id DESC'}
      LIMIT ?`,
    params,
  );
  return rows.map(toRun);
}

/**
 * The jobs the namespace's history names, by name: what `baton pause` and `resume` know of a job
 * without a schedules file. DISTINCT over the fire key's prefix (namespace, job) reads one entry
 * per job, not every row.
 */
export async function historyJobs(db: Queryable, namespace: string): Promise<string[]> {
  const [rows] = await db.query<(RowDataPacket & { job: string })[]>(
    'SELECT DISTINCT job FROM baton_runs WHERE namespace = ? ORDER BY job',
    [namespace],
  );
  return rows.map((r) => r.job);
}

/**
 * The newest runs of a namespace (winners and `missed` marks, not the skips): the run ids shell
 * completion offers for `baton show`. Newest fires first, along `baton_runs_scheduled`, so that
 * only the newest rows are read however long the history.
 */
export async function recentRuns(
  db: Queryable,
  namespace: string,
  limit: number,
): Promise<Pick<Run, 'id' | 'job' | 'status' | 'scheduledAt'>[]> {
  const [rows] = await db.query<RunRow[]>(
    `SELECT id, job, status, scheduled_at FROM baton_runs
      WHERE namespace = ? AND (winner IS NOT NULL OR status = 'missed')
      ORDER BY scheduled_at DESC, id DESC LIMIT ?`,
    [namespace, limit],
  );
  return rows.map((r) => ({
    id: Number(r.id),
    job: r.job,
    status: r.status,
    scheduledAt: r.scheduled_at,
  }));
}

/**
 * The latest run of `job` (a winner's row: scheduled, caught up or manual), or null; of a fan-out
 * fire, its latest generation's highest slot. All keys descending, so the fire key is read backwards from its end
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
      ORDER BY scheduled_at DESC, rerun DESC, winner DESC LIMIT 1`,
    [namespace, job],
  );
  return rows[0] ? toRun(rows[0]) : null;
}

/**
 * What the operators' views read of `baton_dependent_fires` (migration 0018, docs/dependencies.md):
 * the parent runs behind a child's run or its `upstream` skip (`history`, `show`), and a child's
 * rows at one instant (`explain`). Read-only; the rows are written by store/dependent-fires.ts.
 *
 * Every read goes along a key: `run_id` (`baton_dependent_fires_run`) for the runs a view shows,
 * the primary key `(namespace, job, scheduled_at, rerun)` for a child's instant and its latest.
 * The row's type and its reading are the table's one (store/dependent-fires.ts reads with them).
 */
import type { RowDataPacket } from 'mysql2/promise';
import type { Queryable } from './deadline.js';

/** The parent runs a child's judgement rested on, by parent job: `{"settle": 123}`. */
export type ParentRuns = Record<string, number>;

/** What a row says of its child's fire: not judged yet, started, or skipped as `upstream`. */
export type DependentFireStatus = 'waiting' | 'started' | 'skipped';

/** One row: a child's fire at its parents' instant, one generation of it. */
export interface DependentFire {
  namespace: string;
  /** The child job. */
  job: string;
  /** The parents' instant: the child's fire. */
  scheduledAt: Date;
  /** The child's generation this row claims (0: the chain's own). */
  rerun: number;
  status: DependentFireStatus;
  /** When runners judge it next (database time). */
  checkAt: Date;
  /** The instant plus `within`: a child still waiting then is skipped as `upstream`. */
  deadline: Date;
  /** The parent runs that let it start, or the one that stopped it; null when none is named. */
  parentRuns: ParentRuns | null;
  /** The child's run (started), or its `upstream` skip row (skipped); null while waiting. */
  runId: number | null;
  /** Why it was skipped. */
  reason: string | null;
  createdAt: Date;
  updatedAt: Date;
}

export const DEPENDENT_FIRE_COLUMNS = `namespace, job, scheduled_at, rerun, status, check_at, deadline, parent_runs,
  run_id, reason, created_at, updated_at`;

/**
 * `parent_runs` as stored: a JSON object of run ids by parent. Anything else (a hand-written
 * value that does not parse, ids that are not numbers) reads as what of it is sound, or null.
 */
export function parseParentRuns(text: string | null): ParentRuns | null {
  if (text == null) return null;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (value == null || typeof value !== 'object' || Array.isArray(value)) return null;
  const runs: ParentRuns = {};
  for (const [job, id] of Object.entries(value as Record<string, unknown>)) {
    const n = typeof id === 'string' && /^\d+$/.test(id) ? Number(id) : id;
    if (typeof n === 'number' && Number.isSafeInteger(n) && n > 0) runs[job] = n;
  }
  return Object.keys(runs).length > 0 ? runs : null;
}

/** A row as read with DEPENDENT_FIRE_COLUMNS. */
export function toDependentFire(r: RowDataPacket): DependentFire {
  return {
    namespace: String(r.namespace),
    job: String(r.job),
    scheduledAt: r.scheduled_at as Date,
    rerun: Number(r.rerun),
    status: r.status as DependentFireStatus,
    checkAt: r.check_at as Date,
    deadline: r.deadline as Date,
    parentRuns: parseParentRuns((r.parent_runs as string | null) ?? null),
    runId: r.run_id == null ? null : Number(r.run_id),
    reason: (r.reason as string | null) ?? null,
    createdAt: r.created_at as Date,
    updatedAt: r.updated_at as Date,
  };
}

/**
 * The parent runs behind each of `runIds` that is a child's run or its `upstream` skip row (a
 * run that is neither is not in the map). A database from before migration 0018 has none.
 */
export async function parentRunsOf(
  db: Queryable,
  runIds: readonly number[],
): Promise<Map<number, ParentRuns>> {
  const byRun = new Map<number, ParentRuns>();
  if (runIds.length === 0) return byRun;
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT run_id, parent_runs FROM baton_dependent_fires
      WHERE run_id IN (?) AND parent_runs IS NOT NULL`,
    [[...new Set(runIds)]],
  );
  for (const r of rows) {
    const runs = parseParentRuns(String(r.parent_runs));
    if (runs) byRun.set(Number(r.run_id), runs);
  }
  return byRun;
}

/** A child's rows at one instant, generation by generation (the latest last). */
export async function dependentFiresAt(
  db: Queryable,
  namespace: string,
  job: string,
  scheduledAt: Date,
): Promise<DependentFire[]> {
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT ${DEPENDENT_FIRE_COLUMNS} FROM baton_dependent_fires
      WHERE namespace = ? AND job = ? AND scheduled_at = ? ORDER BY rerun`,
    [namespace, job, scheduledAt],
  );
  return rows.map(toDependentFire);
}

/** A child's latest instant with a row (one index dive backwards), or null. */
export async function latestDependentFire(
  db: Queryable,
  namespace: string,
  job: string,
): Promise<Date | null> {
  const [[row]] = await db.query<RowDataPacket[]>(
    `SELECT scheduled_at FROM baton_dependent_fires
      WHERE namespace = ? AND job = ? ORDER BY scheduled_at DESC LIMIT 1`,
    [namespace, job],
  );
  return (row?.scheduled_at as Date | undefined) ?? null;
}

/** Parent runs as the views name them: `settle#123 export#124`. */
export function parentRunsWords(runs: ParentRuns): string {
  return Object.entries(runs)
    .map(([job, id]) => `${job}#${id}`)
    .join(' ');
}

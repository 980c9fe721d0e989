/**
 * The reads behind `baton status`: the database's clock, the runs in progress, and per job its
 * latest success and its first history row. Read-only; the writes to these tables live in
 * fire-writes.ts and run-verdicts.ts (`baton_runs`: see runs.ts), runners.ts and pauses.ts.
 */
import type { RowDataPacket } from 'mysql2/promise';
import type { Queryable } from './deadline.js';
import type { Trigger } from '../run-status.js';

// `NOW(3)` — the one clock every runner fires by, so the one `status` judges by — is read with
// fire-reads.ts's databaseNow, re-exported here for the status command.
export { databaseNow } from './fire-reads.js';

/** A winning run still in progress. */
export interface RunningRun {
  id: number;
  job: string;
  scheduledAt: Date;
  trigger: Trigger;
  host: string;
  pid: number | null;
  startedAt: Date;
  attempts: number;
  /** When it becomes slow (its job's `duration.warn`); null: no warn. Optional: older fixtures. */
  warnAt?: Date | null;
  /** When it was told slow; null: not (yet). */
  slowAt?: Date | null;
}

interface RunningRow extends RowDataPacket {
  id: number;
  job: string;
  scheduled_at: Date;
  triggered_by: Trigger;
  host: string;
  pid: number | null;
  started_at: Date;
  attempts: number;
  warn_at: Date | null;
  slow_at: Date | null;
}

/** The namespace's `running` winner rows, oldest first (index baton_runs_running). */
export async function listRunningRuns(db: Queryable, namespace: string): Promise<RunningRun[]> {
  const [rows] = await db.query<RunningRow[]>(
    `SELECT id, job, scheduled_at, triggered_by, host, pid, started_at, attempts, warn_at, slow_at
       FROM baton_runs
      WHERE namespace = ? AND status = 'running' AND winner >= 1
      ORDER BY started_at, id`,
    [namespace],
  );
  return rows.map((r) => ({
    id: Number(r.id),
    job: r.job,
    scheduledAt: r.scheduled_at,
    trigger: r.triggered_by,
    host: r.host,
    pid: r.pid == null ? null : Number(r.pid),
    startedAt: r.started_at,
    attempts: Number(r.attempts),
    warnAt: r.warn_at ?? null,
    slowAt: r.slow_at ?? null,
  }));
}

/** What the dead-man's switch needs to know about one job's history. */
export interface JobHistoryFacts {
  /** `finished_at` of its latest successful run (`done`, winner), or null. */
  lastSuccessAt: Date | null;
  /** The fire of its first history row of any kind, or null when it has none. */
  firstSeenAt: Date | null;
  /** Its failed, timed-out and lost runs since its latest success; absent = none read. */
  failures?: RecentFailures | null;
}

/**
 * The winner runs that failed (`failed`, `timeout`, `lost`) after a job's latest success — by
 * fire, since the success's fire, or all of them when it never succeeded. `interrupted` is not
 * one: a graceful drain interrupts runs on purpose.
 */
export interface RecentFailures {
  /** How many, counted up to FAILURE_COUNT_CAP. */
  count: number;
  /** The latest of them. */
  latest: { status: FailedStatus; scheduledAt: Date };
}

export const FAILED_STATUSES = ['failed', 'timeout', 'lost'] as const;
export type FailedStatus = (typeof FAILED_STATUSES)[number];

/** Failures since the last success are counted up to this many: "at least 1000". */
export const FAILURE_COUNT_CAP = 1000;

/** The fire of a job's latest success (MAX over the key baton_runs_job_status: one entry). */
export const LAST_SUCCESS_FIRE_SQL = `SELECT MAX(scheduled_at) AS fire FROM baton_runs
  WHERE namespace = ? AND job = ? AND status = 'done'`;

/*
 * Only a winner's row ever leaves the status it was inserted in (runs.ts): a failed, timed-out or
 * lost row is a winner's, so the reads below need no `winner` test and stay inside the key.
 */

/**
 * The latest failed winner run after a fire: the newest entry of each failed status in the key
 * baton_runs_job_status (namespace, job, status, scheduled_at), then the newest of those three —
 * not one ORDER BY over `status IN (…)`, which sorts every failure the job ever had.
 */
export const LATEST_FAILURE_SQL = `SELECT status, scheduled_at FROM (${FAILED_STATUSES.map(
  () => `(SELECT status, scheduled_at FROM baton_runs
     WHERE namespace = ? AND job = ? AND status = ? AND scheduled_at > ?
     ORDER BY scheduled_at DESC LIMIT 1)`,
).join(' UNION ALL ')}) AS latest ORDER BY scheduled_at DESC LIMIT 1`;

/** How many failed winner runs after a fire, reading at most FAILURE_COUNT_CAP index entries. */
export const FAILURE_COUNT_SQL = `SELECT COUNT(*) AS n FROM (SELECT 1 FROM baton_runs
  WHERE namespace = ? AND job = ? AND status IN (${FAILED_STATUSES.map(() => '?').join(', ')})
    AND scheduled_at > ? LIMIT ${FAILURE_COUNT_CAP}) AS f`;

/** Before every fire: the lower bound of a job that never succeeded. */
const BEFORE_ANY_FIRE = new Date(0);

async function recentFailures(
  db: Queryable,
  namespace: string,
  job: string,
): Promise<RecentFailures | null> {
  const [[success]] = await db.query<RowDataPacket[]>(LAST_SUCCESS_FIRE_SQL, [namespace, job]);
  const after = (success?.fire as Date | null | undefined) ?? BEFORE_ANY_FIRE;
  const [latest] = await db.query<RowDataPacket[]>(
    LATEST_FAILURE_SQL,
    FAILED_STATUSES.flatMap((status) => [namespace, job, status, after]),
  );
  const row = latest[0];
  if (!row) return null;
  const [[counted]] = await db.query<RowDataPacket[]>(FAILURE_COUNT_SQL, [
    namespace,
    job,
    ...FAILED_STATUSES,
    after,
  ]);
  return {
    count: Number(counted?.n ?? 1),
    latest: { status: row.status as FailedStatus, scheduledAt: row.scheduled_at as Date },
  };
}

/**
 * The finish of a job's latest success: the latest `done` fire (the inner MAX reads one entry of
 * the key `baton_runs_job_status (namespace, job, status, scheduled_at)`, migration 0005: "Select
 * tables optimized away"), then that fire's `done` winner rows (one, or one per worker slot of a
 * `workers: N` job) — however long the history. Not `ORDER BY scheduled_at DESC LIMIT 1`: for a
 * job whose rows are not the namespace's newest, MariaDB may walk `baton_runs_scheduled`
 * backwards through every other job's rows instead. Without migration 0005 the MAX reads the
 * job's rows through the fire key.
 */
export const LAST_SUCCESS_SQL = `SELECT MAX(finished_at) AS finished_at FROM baton_runs
  WHERE namespace = ? AND job = ? AND winner >= 1 AND status = 'done'
    AND scheduled_at = (SELECT MAX(scheduled_at) FROM baton_runs
                         WHERE namespace = ? AND job = ? AND status = 'done')`;

/** The fire of a job's first row: MIN over the fire key's prefix, one index entry. */
export const FIRST_ROW_SQL =
  'SELECT MIN(scheduled_at) AS first FROM baton_runs WHERE namespace = ? AND job = ?';

/**
 * Per job: the latest success, the first row and the failures since that success — a few
 * statements per job, each reading an index entry or two (LAST_SUCCESS_SQL, FIRST_ROW_SQL,
 * LATEST_FAILURE_SQL; the count reads at most FAILURE_COUNT_CAP), rather than one GROUP BY over
 * the whole history: a long history stays cheap to ask about. "Latest" is by fire.
 */
export async function jobHistoryFacts(
  db: Queryable,
  namespace: string,
  jobs: Iterable<string>,
): Promise<Map<string, JobHistoryFacts>> {
  const facts = new Map<string, JobHistoryFacts>();
  for (const job of jobs) {
    const [success] = await db.query<RowDataPacket[]>(LAST_SUCCESS_SQL, [
      namespace,
      job,
      namespace,
      job,
    ]);
    const [[first]] = await db.query<RowDataPacket[]>(FIRST_ROW_SQL, [namespace, job]);
    facts.set(job, {
      lastSuccessAt: (success[0]?.finished_at as Date | null | undefined) ?? null,
      firstSeenAt: (first?.first as Date | null | undefined) ?? null,
      failures: await recentFailures(db, namespace, job),
    });
  }
  return facts;
}

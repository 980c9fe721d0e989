/**
 * The reads behind the per-job timestamps of `/metrics` (`baton_job_last_success_timestamp_seconds`
 * and its siblings): for each job, when its latest run of each final status finished; and its
 * runs overdue now (`baton_job_runs_overdue`, `overdueRuns`). The fleet's truth, whichever runner ran
 * it. Read-only.
 *
 * A scrape may ask every few seconds about a thousand jobs, so each (job, status) costs two index
 * entries whatever the history's length: the latest fire of that status is a MAX over the key
 * `baton_runs_job_status (namespace, job, status, scheduled_at)` (migration 0005; "Select tables
 * optimized away"), then that fire's winner rows are read through the same key. As in
 * fleet-reads.ts's LAST_SUCCESS_SQL, "latest" is by fire: a run of an earlier fire that finished
 * later (overlap: allow) does not count. Jobs are asked about in batches, one statement of
 * UNION ALL parts per JOBS_PER_STATEMENT jobs.
 */
import type { RowDataPacket } from 'mysql2/promise';
import { FINAL_STATUSES, type FinalStatus } from '../run-status.js';
import type { Queryable } from './deadline.js';

const JOBS_PER_STATEMENT = 25;

/** A job's latest finish of each final status it has had (a status it never had is missing). */
export type JobOutcomes = Partial<Record<FinalStatus, Date>>;

/**
 * The finish of one job's latest fire of one status. The job and status come back as parameters
 * (a bare column beside MAX() is refused under ONLY_FULL_GROUP_BY); no row matches → NULL.
 */
export const LATEST_FINISH_SQL = `SELECT ? AS job, ? AS status, MAX(finished_at) AS finished_at
   FROM baton_runs
  WHERE namespace = ? AND job = ? AND status = ? AND winner >= 1
    AND scheduled_at = (SELECT MAX(scheduled_at) FROM baton_runs
                         WHERE namespace = ? AND job = ? AND status = ?)`;

/** Per job of `jobs`, the finish of its latest fire of each final status. */
export async function latestOutcomes(
  db: Queryable,
  namespace: string,
  jobs: readonly string[],
): Promise<Map<string, JobOutcomes>> {
  const outcomes = new Map<string, JobOutcomes>(jobs.map((job) => [job, {}]));
  for (let i = 0; i < jobs.length; i += JOBS_PER_STATEMENT) {
    const parts = jobs
      .slice(i, i + JOBS_PER_STATEMENT)
      .flatMap((job) => FINAL_STATUSES.map((status) => [job, status] as const));
    const [rows] = await db.query<RowDataPacket[]>(
      parts.map(() => `(${LATEST_FINISH_SQL})`).join('\nUNION ALL\n'),
      parts.flatMap(([job, status]) => [
        job,
        status,
        namespace,
        job,
        status,
        namespace,
        job,
        status,
      ]),
    );
    for (const r of rows) {
      const of = outcomes.get(String(r.job));
      if (of && r.finished_at != null) of[r.status as FinalStatus] = r.finished_at as Date;
    }
  }
  return outcomes;
}

/**
 * Per job, how many of its runs are going on past their warn (`duration.warn`: the row's
 * `warn_at` before the database's now), whichever runner runs them; jobs with none are left out.
 * One read of the namespace's `running` rows along `baton_runs_running`: a handful, however long
 * the history.
 */
export async function overdueRuns(db: Queryable, namespace: string): Promise<Map<string, number>> {
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT job, COUNT(*) AS n FROM baton_runs
      WHERE namespace = ? AND status = 'running' AND winner >= 1 AND warn_at <= NOW(3)
      GROUP BY job`,
    [namespace],
  );
  return new Map(rows.map((r) => [String(r.job), Number(r.n)]));
}

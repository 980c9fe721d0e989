/**
 * The reads behind `baton status`: the database's clock, the runs in progress, and per job its
 * latest success and its first history row. Read-only; the writes to these tables live in
 * runs.ts, runners.ts and pauses.ts.
 */
import type { RowDataPacket } from 'mysql2/promise';
import type { Queryable } from './deadline.js';
import type { Trigger } from './runs.js';

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
}

/** The namespace's `running` winner rows, oldest first (index baton_runs_running). */
export async function listRunningRuns(db: Queryable, namespace: string): Promise<RunningRun[]> {
  const [rows] = await db.query<RunningRow[]>(
    `SELECT id, job, scheduled_at, triggered_by, host, pid, started_at, attempts
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
  }));
}

/** What the dead-man's switch needs to know about one job's history. */
export interface JobHistoryFacts {
  /** `finished_at` of its latest successful run (`done`, winner), or null. */
  lastSuccessAt: Date | null;
  /** The fire of its first history row of any kind, or null when it has none. */
  firstSeenAt: Date | null;
}

/**
 * Per job: the latest success and the first row. Two statements per job, each an index lookup
 * on the fire key `(namespace, job, scheduled_at, winner)`, rather than one GROUP BY over the
 * whole history: a long history stays cheap to ask about. "Latest" is by fire, the order the
 * index keeps.
 */
export async function jobHistoryFacts(
  db: Queryable,
  namespace: string,
  jobs: Iterable<string>,
): Promise<Map<string, JobHistoryFacts>> {
  const facts = new Map<string, JobHistoryFacts>();
  for (const job of jobs) {
    const [success] = await db.query<RowDataPacket[]>(
      `SELECT finished_at FROM baton_runs
        WHERE namespace = ? AND job = ? AND winner >= 1 AND status = 'done'
        ORDER BY scheduled_at DESC LIMIT 1`,
      [namespace, job],
    );
    const [[first]] = await db.query<RowDataPacket[]>(
      'SELECT MIN(scheduled_at) AS first FROM baton_runs WHERE namespace = ? AND job = ?',
      [namespace, job],
    );
    facts.set(job, {
      lastSuccessAt: (success[0]?.finished_at as Date | null | undefined) ?? null,
      firstSeenAt: (first?.first as Date | null | undefined) ?? null,
    });
  }
  return facts;
}

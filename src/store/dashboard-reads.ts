/**
 * The reads behind the HTTP dashboard (src/http/dashboard/): each job's recent fires with every
 * row of them, and the namespace's latest failures with their output. Read-only.
 *
 * The daemon may serve a thousand jobs to several viewers every few seconds, so every read is
 * bounded and walks a key: a job's fires along the fire key `baton_runs_fire (namespace, job,
 * scheduled_at, rerun, winner)` backwards, its failures along `baton_runs_job_status (namespace, job,
 * status, scheduled_at)` (migration 0005, applied by every runner at start). Jobs are asked about
 * in batches (one statement of UNION ALL parts per JOBS_PER_STATEMENT jobs), so a thousand jobs
 * cost a few dozen round trips rather than thousands. No statement reads a job's whole history;
 * none scans the namespace.
 */
import type { RowDataPacket } from 'mysql2/promise';
import { truncate } from '../text.js';
import type { Queryable } from './deadline.js';
import type { ReasonKind, RunStatus, Trigger } from '../run-status.js';
import type { Run } from './runs.js';
import { chunks } from '../chunks.js';

/** Fires shown per job… */
export const FIRES_PER_JOB = 30;
/** …as long as all jobs together show at most this many (a thousand jobs show ten each)… */
export const FIRES_IN_ALL = 10_000;
/** …but never fewer than this per job. */
export const MIN_FIRES_PER_JOB = 10;
/**
 * Rows read per fire shown, at most: a fire has one row per runner that considered it, so with
 * more runners than this fewer fires are shown (never a fire with rows missing).
 */
export const ROWS_PER_FIRE = 10;
/** Failures shown for the namespace. */
export const FAILURES_SHOWN = 10;
/** The statuses of a run that ended badly on its own (not stopped by an operator). */
export const FAILURE_STATUSES = ['failed', 'timeout', 'lost'] as const;
/** The end of a failure's output shown (output_tail holds up to 8 KiB). */
export const OUTPUT_TAIL_CHARS = 4_000;
/** Reasons and errors are one-liners on the timeline (their columns hold up to 512 / 64 KiB). */
export const NOTE_CHARS = 200;
const ERROR_CHARS = 1_000;
const JOBS_PER_STATEMENT = 25;

/** One row of a recent fire, as the timeline needs it. */
export interface FireRow {
  id: number;
  job: string;
  scheduledAt: Date;
  /** The worker slot of a winner (1…N), 0 on a `missed` row, null on a skip. */
  winner: number | null;
  /** The fire's generation (0: its scheduled run; 1, 2, …: re-runs). */
  rerun: number;
  trigger: Trigger;
  status: RunStatus;
  reason: string | null;
  /** The skip's or `missed` mark's kind (`reason_kind`); null on a run's row. */
  reasonKind: ReasonKind | null;
  host: string;
  exitCode: number | null;
  /** From start to finish; null while running. */
  durationMs: number | null;
  error: string | null;
  /** Told slow: it went past its warn (`duration.warn`). */
  slow: boolean;
  /** A success shorter than its job's `duration.min`. */
  tooShort: boolean;
}

/** How many fires each of `jobCount` jobs shows. */
export function firesPerJob(jobCount: number): number {
  return Math.max(
    MIN_FIRES_PER_JOB,
    Math.min(FIRES_PER_JOB, Math.floor(FIRES_IN_ALL / Math.max(1, jobCount))),
  );
}

/**
 * The rows of one job's latest `fires` fires, newest fire first: the fires are the first distinct
 * instants read backwards along the fire key (the derived table stops after them), then each
 * fire's rows are read through the same key; the row LIMIT bounds a large fleet. The statement
 * for one job (tests measure what it reads); a batch joins several with UNION ALL.
 */
export function fireRowsSql(fires: number): string {
  const n = Math.trunc(fires);
  return `(SELECT r.id, r.job, r.scheduled_at, r.rerun, r.winner, r.triggered_by, r.status,
        LEFT(r.reason, ${NOTE_CHARS + 1}) AS reason, r.reason_kind, r.host, r.exit_code,
        TIMESTAMPDIFF(MICROSECOND, r.started_at, r.finished_at) DIV 1000 AS duration_ms,
        LEFT(r.error, ${NOTE_CHARS + 1}) AS error, r.slow_at IS NOT NULL AS slow, r.too_short
   FROM (SELECT DISTINCT scheduled_at FROM baton_runs FORCE INDEX (baton_runs_fire)
          WHERE namespace = ? AND job = ? ORDER BY scheduled_at DESC LIMIT ${n}) AS f
   JOIN baton_runs AS r FORCE INDEX (baton_runs_fire)
     ON r.namespace = ? AND r.job = ? AND r.scheduled_at = f.scheduled_at
  ORDER BY r.scheduled_at DESC LIMIT ${n * ROWS_PER_FIRE})`;
}

/**
 * Per job, the rows of its latest `fires` fires, newest fire first. When a job's rows reach the
 * row limit, its oldest fire read may be incomplete and is left out.
 */
export async function recentFireRows(
  db: Queryable,
  namespace: string,
  jobs: readonly string[],
  fires: number,
): Promise<Map<string, FireRow[]>> {
  const byJob = new Map<string, FireRow[]>(jobs.map((job) => [job, []]));
  const part = fireRowsSql(fires);
  for (const batch of chunks(jobs, JOBS_PER_STATEMENT)) {
    const [rows] = await db.query<RowDataPacket[]>(
      batch.map(() => part).join('\nUNION ALL\n'),
      batch.flatMap((job) => [namespace, job, namespace, job]),
    );
    for (const r of rows) byJob.get(String(r.job))?.push(toFireRow(r));
  }
  for (const [job, rows] of byJob) {
    if (rows.length < Math.trunc(fires) * ROWS_PER_FIRE) continue;
    const oldest = rows[rows.length - 1]!.scheduledAt.getTime();
    byJob.set(
      job,
      rows.filter((r) => r.scheduledAt.getTime() !== oldest),
    );
  }
  return byJob;
}

function toFireRow(r: RowDataPacket): FireRow {
  return {
    id: Number(r.id),
    job: String(r.job),
    scheduledAt: r.scheduled_at as Date,
    winner: r.winner == null ? null : Number(r.winner),
    rerun: Number(r.rerun ?? 0),
    trigger: r.triggered_by as Trigger,
    status: r.status as RunStatus,
    reason: r.reason == null ? null : truncate(String(r.reason), NOTE_CHARS),
    reasonKind: (r.reason_kind as ReasonKind | null) ?? null,
    host: String(r.host),
    exitCode: r.exit_code == null ? null : Number(r.exit_code),
    durationMs: r.duration_ms == null ? null : Number(r.duration_ms),
    error: r.error == null ? null : truncate(String(r.error), NOTE_CHARS),
    slow: Number(r.slow ?? 0) === 1,
    tooShort: Number(r.too_short ?? 0) === 1,
  };
}

/**
 * A run that ended badly, with the end of its output: `error` cut to ERROR_CHARS, `outputTail` to
 * its last OUTPUT_TAIL_CHARS characters (starting with '…' when cut).
 */
export type Failure = Pick<
  Run,
  | 'id'
  | 'job'
  | 'scheduledAt'
  | 'trigger'
  | 'host'
  | 'startedAt'
  | 'finishedAt'
  | 'exitCode'
  | 'attempts'
  | 'error'
  | 'outputTail'
> & { status: (typeof FAILURE_STATUSES)[number] };

/**
 * One job's latest FAILURES_SHOWN rows of one status: a backwards walk of `baton_runs_job_status`
 * that stops after them, reading the key alone (the id is in every InnoDB secondary key).
 */
const FAILURE_CANDIDATES_PART = `(SELECT id, scheduled_at FROM baton_runs
  WHERE namespace = ? AND job = ? AND status = ?
  ORDER BY scheduled_at DESC LIMIT ${FAILURES_SHOWN})`;

export const FAILURE_CANDIDATES_SQL = FAILURE_CANDIDATES_PART;

/**
 * The namespace's FAILURES_SHOWN latest failures (by fire) among `jobs`: the latest few of each
 * job and status (FAILURE_CANDIDATES_PART), the newest of those overall, then their rows by id.
 */
export async function recentFailures(
  db: Queryable,
  namespace: string,
  jobs: readonly string[],
): Promise<Failure[]> {
  const candidates: { id: number; at: number }[] = [];
  for (const batch of chunks(jobs, JOBS_PER_STATEMENT)) {
    const parts = batch.flatMap((job) => FAILURE_STATUSES.map((status) => [job, status]));
    const [rows] = await db.query<RowDataPacket[]>(
      parts.map(() => FAILURE_CANDIDATES_PART).join('\nUNION ALL\n'),
      parts.flatMap(([job, status]) => [namespace, job, status]),
    );
    for (const r of rows) {
      candidates.push({ id: Number(r.id), at: (r.scheduled_at as Date).getTime() });
    }
  }
  const newest = candidates
    .sort((a, b) => b.at - a.at || b.id - a.id)
    .slice(0, FAILURES_SHOWN)
    .map((c) => c.id);
  if (newest.length === 0) return [];
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT id, job, scheduled_at, triggered_by, status, host, started_at, finished_at, exit_code,
            attempts, LEFT(error, ${ERROR_CHARS + 1}) AS error,
            RIGHT(output_tail, ${OUTPUT_TAIL_CHARS}) AS output_tail,
            CHAR_LENGTH(output_tail) > ${OUTPUT_TAIL_CHARS} AS output_cut
       FROM baton_runs WHERE id IN (?)
      ORDER BY scheduled_at DESC, id DESC`,
    [newest],
  );
  return rows.map((r) => ({
    id: Number(r.id),
    job: String(r.job),
    scheduledAt: r.scheduled_at as Date,
    trigger: r.triggered_by as Trigger,
    status: r.status as Failure['status'],
    host: String(r.host),
    startedAt: r.started_at as Date,
    finishedAt: (r.finished_at as Date | null) ?? null,
    exitCode: r.exit_code == null ? null : Number(r.exit_code),
    attempts: Number(r.attempts),
    error: r.error == null ? null : truncate(String(r.error), ERROR_CHARS),
    outputTail: outputTail(r.output_tail as string | null, Number(r.output_cut) === 1),
  }));
}

/** The tail as read; a tail cut here (or already cut by the runner) starts with '…'. */
function outputTail(text: string | null, cut: boolean): string | null {
  if (text == null) return null;
  if (!cut || text.startsWith('…')) return text;
  // The ellipsis takes the place of the first character (a code point: never half a pair).
  return `…${text.slice(text.codePointAt(0)! > 0xffff ? 2 : 1)}`;
}

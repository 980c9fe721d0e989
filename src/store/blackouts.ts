/**
 * `baton_blackouts`, the fleet's timed pauses (`baton blackout`): a scheduled fire whose instant
 * falls in a blackout of its job is skipped by every runner as `paused`, with a reason that names
 * the blackout. The fire's own instant is compared, never a runner's clock, so every runner
 * judges a fire at either edge the same way. A blackout cancelled early ends at its cancel (the
 * database's clock); one cancelled before it started covers nothing and is never told.
 */
import type { ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import { jobOfSubject } from '../schedule-keys.js';
import type { Queryable } from './deadline.js';

export interface Blackout {
  id: number;
  /** Inclusive. */
  startsAt: Date;
  /** Exclusive, as planned; `endOf` is when it ends (earlier when cancelled). */
  endsAt: Date;
  /** The jobs it covers; null: every job of the namespace. */
  jobs: string[] | null;
  reason: string;
  /** `operator@host`. */
  createdBy: string;
  createdAt: Date;
  cancelledAt: Date | null;
  cancelledBy: string | null;
}

interface BlackoutRow extends RowDataPacket {
  id: number;
  starts_at: Date;
  ends_at: Date;
  jobs: string | null;
  reason: string;
  created_by: string;
  created_at: Date;
  cancelled_at: Date | null;
  cancelled_by: string | null;
}

const COLUMNS =
  'id, starts_at, ends_at, jobs, reason, created_by, created_at, cancelled_at, cancelled_by';

function toBlackout(r: BlackoutRow): Blackout {
  let jobs: string[] | null = null;
  if (r.jobs != null) {
    const parsed: unknown = JSON.parse(r.jobs);
    jobs = Array.isArray(parsed) ? parsed.map(String) : [];
  }
  return {
    id: Number(r.id),
    startsAt: r.starts_at,
    endsAt: r.ends_at,
    jobs,
    reason: r.reason,
    createdBy: r.created_by,
    createdAt: r.created_at,
    cancelledAt: r.cancelled_at,
    cancelledBy: r.cancelled_by,
  };
}

/** When it ends: as planned, or at its cancel if that came first. */
export function endOf(b: Blackout): Date {
  return b.cancelledAt && b.cancelledAt < b.endsAt ? b.cancelledAt : b.endsAt;
}

/** Whether it covers any instant at all (not cancelled before its start). */
export function takesEffect(b: Blackout): boolean {
  return endOf(b) > b.startsAt;
}

/** What it covers, in words: `every job` or `jobs a, b`. */
export function describeCover(b: Pick<Blackout, 'jobs'>): string {
  if (b.jobs == null) return 'every job';
  return `${b.jobs.length === 1 ? 'job' : 'jobs'} ${b.jobs.join(', ')}`;
}

/** Whether it covers `job` (a schedule created at run time, `<job>:<key>`, by its job). */
export function coversJob(b: Blackout, job: string): boolean {
  return b.jobs == null || b.jobs.includes(job) || b.jobs.includes(jobOfSubject(job));
}

/** Whether the fire of `job` at `instant` is inside it: instant in [start, end). */
export function blackoutCovers(b: Blackout, job: string, instant: Date): boolean {
  return b.startsAt <= instant && instant < endOf(b) && coversJob(b, job);
}

/** The first of `blackouts` (by start, then id) that covers the fire, or null. */
export function coveringBlackout(
  blackouts: readonly Blackout[],
  job: string,
  instant: Date,
): Blackout | null {
  let first: Blackout | null = null;
  for (const b of blackouts) {
    if (!blackoutCovers(b, job, instant)) continue;
    const [at, firstAt] = [b.startsAt.getTime(), first?.startsAt.getTime() ?? Infinity];
    if (at < firstAt || (at === firstAt && b.id < first!.id)) first = b;
  }
  return first;
}

const BLACKOUT_REASON_START = 'paused by blackout #';

/**
 * The skip reason of a fire inside a blackout; starts with `paused` as a pause's does, so that
 * filters on it (the dashboard's, people's) take both.
 */
export function blackoutReason(b: Blackout): string {
  return `${BLACKOUT_REASON_START}${b.id} (${b.createdBy}) until ${endOf(b).toISOString()}: ${b.reason}`;
}

/**
 * Whether a `paused` skip is a blackout's: it covers its own instants only, where a job's pause
 * covers every fire until it is lifted (a catch-up walk goes on past the one, not the other).
 */
export function isBlackoutReason(reason: string): boolean {
  return reason.startsWith(BLACKOUT_REASON_START);
}

export interface NewBlackout {
  startsAt: Date;
  endsAt: Date;
  jobs: readonly string[] | null;
  reason: string;
  createdBy: string;
}

/** Records a blackout; its id. */
export async function insertBlackout(
  db: Queryable,
  namespace: string,
  b: NewBlackout,
): Promise<number> {
  const [res] = await db.query<ResultSetHeader>(
    `INSERT INTO baton_blackouts (namespace, starts_at, ends_at, jobs, reason, created_by, created_at)
     VALUES (?, ?, ?, ?, ?, ?, NOW(3))`,
    [
      namespace,
      b.startsAt,
      b.endsAt,
      b.jobs == null ? null : JSON.stringify(b.jobs),
      b.reason,
      b.createdBy,
    ],
  );
  return res.insertId;
}

export async function findBlackout(
  db: Queryable,
  namespace: string,
  id: number,
): Promise<Blackout | null> {
  const [rows] = await db.query<BlackoutRow[]>(
    `SELECT ${COLUMNS} FROM baton_blackouts WHERE namespace = ? AND id = ?`,
    [namespace, id],
  );
  return rows[0] ? toBlackout(rows[0]) : null;
}

/**
 * Ends a blackout now (the database's clock): fires from now on run again. False when it was
 * over already, or cancelled before.
 */
export async function cancelBlackout(
  db: Queryable,
  namespace: string,
  id: number,
  cancelledBy: string,
): Promise<boolean> {
  const [res] = await db.query<ResultSetHeader>(
    `UPDATE baton_blackouts SET cancelled_at = NOW(3), cancelled_by = ?
      WHERE namespace = ? AND id = ? AND cancelled_at IS NULL AND ends_at > NOW(3)`,
    [cancelledBy, namespace, id],
  );
  return res.affectedRows === 1;
}

/**
 * The blackouts not over at the database's clock (going on, or to come), by start; with
 * `endedSince`, also those that ended (or were cancelled) since then.
 */
export async function listBlackouts(
  db: Queryable,
  namespace: string,
  { endedSince }: { endedSince?: Date } = {},
): Promise<Blackout[]> {
  const [rows] = await db.query<BlackoutRow[]>(
    `SELECT ${COLUMNS} FROM baton_blackouts
      WHERE namespace = ? AND ends_at > COALESCE(?, NOW(3))
        AND (cancelled_at IS NULL OR cancelled_at > COALESCE(?, NOW(3)))
      ORDER BY starts_at, id`,
    [namespace, endedSince ?? null, endedSince ?? null],
  );
  return rows.map(toBlackout);
}

/**
 * Whether the namespace has a blackout not over, or over within `withinMs` (by the database's
 * clock): one indexed look, without the notify lock, before a start or an end may need telling.
 */
export async function anyBlackoutSince(
  db: Queryable,
  namespace: string,
  withinMs: number,
): Promise<boolean> {
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT 1 FROM baton_blackouts
      WHERE namespace = ? AND ends_at > NOW(3) - INTERVAL ? MICROSECOND LIMIT 1`,
    [namespace, Math.round(withinMs) * 1000],
  );
  return rows.length > 0;
}

/**
 * The blackouts that may cover an instant in [from, to]: one statement for a whole batch of
 * fires (coordination/fire-batches.ts), each fire then judged by `coveringBlackout`.
 */
export async function blackoutsAround(
  db: Queryable,
  namespace: string,
  from: Date,
  to: Date,
): Promise<Blackout[]> {
  const [rows] = await db.query<BlackoutRow[]>(
    `SELECT ${COLUMNS} FROM baton_blackouts
      WHERE namespace = ? AND ends_at > ? AND starts_at <= ?
        AND (cancelled_at IS NULL OR cancelled_at > ?)`,
    [namespace, from, to, from],
  );
  return rows.map(toBlackout);
}

/**
 * A blackout of `job` going on now, by the database's clock (the first to start), or null: what
 * an operator's `baton run` is reminded of, as of a pause.
 */
export async function currentBlackout(
  db: Queryable,
  namespace: string,
  job: string,
): Promise<Blackout | null> {
  const [rows] = await db.query<BlackoutRow[]>(
    `SELECT ${COLUMNS} FROM baton_blackouts
      WHERE namespace = ? AND starts_at <= NOW(3) AND ends_at > NOW(3) AND cancelled_at IS NULL
      ORDER BY starts_at, id`,
    [namespace],
  );
  return rows.map(toBlackout).find((b) => coversJob(b, job)) ?? null;
}

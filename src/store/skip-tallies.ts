/**
 * `baton_skip_tallies`: the compact form of the skips of a job with `skips: tally`
 * (docs/history.md, "Skip tallies"). Instead of one `baton_runs` row per runner per fire, a
 * runner adds one to its row for the job, the kind and the hour the fire falls in. An
 * every-second job on 8 runners writes 7 × 86,400 skip rows a day; tallied, at most
 * 24 × 7 × 2 rows (an hour, a losing runner, a kind).
 *
 * Only skips that say nothing the fire's winner row does not say are tallied — the protocol
 * decides which (`SkipReason.sawWinner`, coordination/skip-reasons.ts): a fire is never left
 * looking unattempted because its skips were counted here.
 *
 * Written by the same batched statement slot as the skip rows (coordination/fire-batches.ts):
 * one `INSERT … SELECT … ON DUPLICATE KEY UPDATE` for every tallied skip of a turn. Each runner
 * writes only its own host's rows, so runners never update the same row.
 */
import type { ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import { isLockConflictError } from '../errors.js';
import { truncate } from '../text.js';
import type { Queryable } from './deadline.js';
import type { Skip } from './fire-writes.js';

/** The tallies' bucket: an hour of fires. A day of a job is 24 rows per runner and kind. */
export const TALLY_PERIOD_MS = 3_600_000;

/** The start of the hour `at` falls in (UTC). */
export function tallyPeriod(at: Date): Date {
  return new Date(Math.floor(at.getTime() / TALLY_PERIOD_MS) * TALLY_PERIOD_MS);
}

/** One row of `baton_skip_tallies`. */
export interface SkipTally {
  job: string;
  periodStart: Date;
  host: string;
  kind: string;
  skips: number;
  firstFire: Date;
  lastFire: Date;
  lastReason: string;
}

/** Statement retries on a deadlock or lock wait (new rows of one hour, inserted by several runners). */
const LOCK_RETRIES = 3;

/** Adds the skips to their tallies: one statement, however many. */
export async function tallySkips(db: Queryable, skips: readonly Skip[]): Promise<void> {
  // One row per key, in key order: fewer rows, and the same lock order on every runner.
  const rows = new Map<string, { s: Skip; n: number; first: Date; last: Date; reason: string }>();
  for (const s of skips) {
    const a = s.attempt;
    const key = [a.namespace, a.job, tallyPeriod(a.scheduledAt).getTime(), a.host, s.kind].join(
      '\0',
    );
    const r = rows.get(key);
    if (!r) rows.set(key, { s, n: 1, first: a.scheduledAt, last: a.scheduledAt, reason: s.reason });
    else {
      r.n++;
      if (a.scheduledAt < r.first) r.first = a.scheduledAt;
      if (a.scheduledAt >= r.last) [r.last, r.reason] = [a.scheduledAt, s.reason];
    }
  }
  const sorted = [...rows.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([, r]) => r);
  const row = `SELECT ? AS namespace, ? AS job, CAST(? AS DATETIME) AS period_start, ? AS host,
    ? AS reason_kind, ? AS skips, CAST(? AS DATETIME(3)) AS first_fire,
    CAST(? AS DATETIME(3)) AS last_fire, ? AS last_reason`;
  const sql = `INSERT INTO baton_skip_tallies (namespace, job, period_start, host, reason_kind,
      skips, first_fire, last_fire, last_reason, updated_at)
    SELECT f.namespace, f.job, f.period_start, f.host, f.reason_kind, f.skips, f.first_fire,
           f.last_fire, f.last_reason, NOW(3)
      FROM (${sorted.map(() => row).join(' UNION ALL ')}) AS f
    ON DUPLICATE KEY UPDATE
      skips = baton_skip_tallies.skips + f.skips,
      first_fire = LEAST(baton_skip_tallies.first_fire, f.first_fire),
      last_reason = IF(f.last_fire >= baton_skip_tallies.last_fire, f.last_reason,
                       baton_skip_tallies.last_reason),
      last_fire = GREATEST(baton_skip_tallies.last_fire, f.last_fire),
      updated_at = NOW(3)`;
  const values = sorted.flatMap((r) => [
    r.s.attempt.namespace,
    r.s.attempt.job,
    tallyPeriod(r.s.attempt.scheduledAt),
    r.s.attempt.host,
    r.s.kind,
    r.n,
    r.first,
    r.last,
    truncate(r.reason, 512),
  ]);
  for (let attempt = 0; ; attempt++) {
    try {
      await db.query<ResultSetHeader>(sql, values);
      return;
    } catch (err) {
      if (!isLockConflictError(err) || attempt >= LOCK_RETRIES) throw err;
    }
  }
}

export interface TallyFilter {
  /** Only these jobs, hosts, kinds (absent: all). */
  jobs?: readonly string[];
  hosts?: readonly string[];
  kinds?: readonly string[];
  /** Only hours that overlap [from, to]; either may be absent (open). */
  from?: Date | null;
  to?: Date | null;
  /** At most this many rows (default 1,000), newest hour first. */
  limit?: number;
}

export async function readTallies(
  db: Queryable,
  namespace: string,
  filter: TallyFilter = {},
): Promise<SkipTally[]> {
  const where = ['namespace = ?'];
  const values: unknown[] = [namespace];
  const among = (column: string, xs?: readonly string[]) => {
    if (!xs) return;
    where.push(xs.length ? `${column} IN (?)` : 'FALSE');
    if (xs.length) values.push([...xs]);
  };
  among('job', filter.jobs);
  among('host', filter.hosts);
  among('reason_kind', filter.kinds);
  if (filter.from) {
    where.push('period_start >= ?');
    values.push(tallyPeriod(filter.from));
  }
  if (filter.to) {
    where.push('period_start <= ?');
    values.push(filter.to);
  }
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT job, period_start, host, reason_kind, skips, first_fire, last_fire, last_reason
       FROM baton_skip_tallies WHERE ${where.join(' AND ')}
      ORDER BY period_start DESC, job, host, reason_kind LIMIT ?`,
    [...values, filter.limit ?? 1000],
  );
  return rows.map((r) => ({
    job: String(r.job),
    periodStart: r.period_start as Date,
    host: String(r.host),
    kind: String(r.reason_kind),
    skips: Number(r.skips),
    firstFire: r.first_fire as Date,
    lastFire: r.last_fire as Date,
    lastReason: String(r.last_reason),
  }));
}

/** The tallies of the hour a fire falls in: which runners counted skips then. */
export function talliesOfFireHour(
  db: Queryable,
  namespace: string,
  job: string,
  fire: Date,
): Promise<SkipTally[]> {
  const hour = tallyPeriod(fire);
  return readTallies(db, namespace, { jobs: [job], from: hour, to: hour });
}

/**
 * Deletes the tallies whose whole hour is before `bound` (`retention.skips`), in batches by the
 * `(namespace, period_start)` key; the rows deleted and the DELETEs that deleted some.
 */
export async function deleteTalliesBefore(
  db: Queryable,
  namespace: string,
  bound: Date,
  batchSize: number,
  signal?: AbortSignal,
): Promise<{ rows: number; batches: number }> {
  const lastHour = new Date(bound.getTime() - TALLY_PERIOD_MS);
  // Looked for first (SELECT is a runner's grant anyway): a namespace without tallies needs no
  // DELETE grant on this table — granted DELETE on baton_runs alone, prune goes on working.
  const [any] = await db.query<RowDataPacket[]>(
    'SELECT 1 FROM baton_skip_tallies WHERE namespace = ? AND period_start <= ? LIMIT 1',
    [namespace, lastHour],
  );
  let rows = 0;
  let batches = 0;
  if (any.length === 0) return { rows, batches };
  for (;;) {
    const [res] = await db.query<ResultSetHeader>(
      `DELETE FROM baton_skip_tallies WHERE namespace = ? AND period_start <= ?
        ORDER BY period_start LIMIT ?`,
      [namespace, lastHour, batchSize],
    );
    rows += res.affectedRows;
    if (res.affectedRows > 0) batches++; // counted as prune.ts counts: the DELETEs that deleted
    if (res.affectedRows < batchSize || signal?.aborted) return { rows, batches };
  }
}

/** How many tallies (rows) and skips a dry run would delete. */
export async function countTalliesBefore(
  db: Queryable,
  namespace: string,
  bound: Date,
): Promise<number> {
  const [[row]] = await db.query<RowDataPacket[]>(
    'SELECT COUNT(*) AS n FROM baton_skip_tallies WHERE namespace = ? AND period_start <= ?',
    [namespace, new Date(bound.getTime() - TALLY_PERIOD_MS)],
  );
  return Number(row?.n ?? 0);
}

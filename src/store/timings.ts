/**
 * `baton_timings`: the versions of each job's timing — its cron expression and time zone — and
 * the instant each takes effect, the same for every runner (schedule/timing-switch.ts has the
 * rule; docs/schedules.md, "Changing a job's time", the operator's view).
 *
 * A version is recorded once, by whoever first loads a timing the table does not have: a runner
 * at start or reload, or an operator (`baton definitions apply`). Two recorders at once: the
 * unique (namespace, job, version) key lets one insert; the other reads again and finds its
 * timing recorded (the same file on two servers), or records the next version after it.
 */
import type { ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import { isDuplicateKeyError } from '../errors.js';
import type { Queryable } from './deadline.js';

/** Who chose a version's effective instant (`chosen_by`). */
export type TimingChosenBy = 'first' | 'settle' | 'operator';

export interface TimingRecord {
  job: string;
  version: number;
  /** config/fingerprint.ts `timingPrint`. */
  print: string;
  schedule: string;
  timezone: string;
  effectiveAt: Date;
  chosenBy: TimingChosenBy;
  recordedAt: Date;
  recordedBy: string;
}

/** The instant the first version of a job takes effect: before any fire. */
export const FIRST_VERSION_AT = new Date(0);

const COLUMNS = `job, version, print, schedule, timezone, effective_at, chosen_by, recorded_at,
  recorded_by`;

function toRecord(r: RowDataPacket): TimingRecord {
  return {
    job: String(r.job),
    version: Number(r.version),
    print: String(r.print),
    schedule: String(r.schedule),
    timezone: String(r.timezone),
    effectiveAt: r.effective_at as Date,
    chosenBy: r.chosen_by as TimingChosenBy,
    recordedAt: r.recorded_at as Date,
    recordedBy: String(r.recorded_by),
  };
}

/** Every version of `jobs` (all the namespace's without), by job, oldest first. */
export async function readTimings(
  db: Queryable,
  namespace: string,
  jobs?: readonly string[],
): Promise<Map<string, TimingRecord[]>> {
  if (jobs && jobs.length === 0) return new Map();
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT ${COLUMNS} FROM baton_timings
      WHERE namespace = ?${jobs ? ' AND job IN (?)' : ''}
      ORDER BY job, version`,
    jobs ? [namespace, jobs] : [namespace],
  );
  const byJob = new Map<string, TimingRecord[]>();
  for (const r of rows) {
    const record = toRecord(r);
    byJob.set(record.job, [...(byJob.get(record.job) ?? []), record]);
  }
  return byJob;
}

/**
 * What changes when a version is recorded or moved: compared between two looks, a runner reads
 * the versions again only when it differs (one cheap statement a look).
 */
export async function timingsMarker(db: Queryable, namespace: string): Promise<string> {
  const [[row]] = await db.query<RowDataPacket[]>(
    `SELECT COUNT(*) AS n, MAX(updated_at) AS changed,
            SUM(UNIX_TIMESTAMP(effective_at)) AS instants
       FROM baton_timings WHERE namespace = ?`,
    [namespace],
  );
  // The instants' sum too: a moved instant changes it even where the clock was stepped back
  // between two changes (MAX(updated_at) alone would not move).
  return `${Number(row?.n ?? 0)}@${(row?.changed as Date | null)?.getTime() ?? 0}#${String(row?.instants ?? 0)}`;
}

/** The newest version whose timing is `print`: the runner's own; null when it is not recorded. */
export function ownVersion(records: readonly TimingRecord[], print: string): number | null {
  let own: number | null = null;
  for (const r of records) if (r.print === print) own = r.version;
  return own;
}

/** A timing to record, and how its effective instant is chosen once the latest is known. */
export interface TimingProposal {
  namespace: string;
  job: string;
  print: string;
  schedule: string;
  timezone: string;
  recordedBy: string;
  /**
   * The effective instant given the job's latest version (none: its first) and the database's
   * time; runs again if another recorder got there first.
   */
  effective: (latest: TimingRecord | null, now: Date) => { at: Date; chosenBy: TimingChosenBy };
  /**
   * Record it even if its print is recorded already (an operator re-proposing an earlier timing:
   * a rollback), unless it is the latest.
   */
  again?: boolean;
}

/**
 * Records `p` as the job's next version, unless its timing is recorded already (then that
 * version is the answer, `recorded: false`). Retried when another recorder took the version.
 */
export async function recordTiming(
  db: Queryable,
  p: TimingProposal,
): Promise<{ record: TimingRecord; recorded: boolean }> {
  for (let tries = 0; ; tries++) {
    const records = (await readTimings(db, p.namespace, [p.job])).get(p.job) ?? [];
    const latest = records.at(-1) ?? null;
    const known = p.again ? (latest?.print === p.print ? latest : null) : null;
    const own = p.again ? known?.version : ownVersion(records, p.print);
    if (own != null) return { record: records.find((r) => r.version === own)!, recorded: false };
    const [[clock]] = await db.query<RowDataPacket[]>('SELECT NOW(3) AS now');
    const { at, chosenBy } = p.effective(latest, clock!.now as Date);
    const version = (latest?.version ?? 0) + 1;
    try {
      await db.query<ResultSetHeader>(
        `INSERT INTO baton_timings (namespace, ${COLUMNS}, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, NOW(3), ?, NOW(6))`,
        [p.namespace, p.job, version, p.print, p.schedule, p.timezone, at, chosenBy, p.recordedBy],
      );
      const record = (await readTimings(db, p.namespace, [p.job]))
        .get(p.job)!
        .find((r) => r.version === version)!;
      return { record, recorded: true };
    } catch (err) {
      if (!isDuplicateKeyError(err) || tries >= 10) throw err;
    }
  }
}

/**
 * Records the first version of each job in `first` that has none, in one statement: a fleet's
 * first start with 1,000 jobs writes one row each, not 1,000 round trips. A job another recorder
 * got to first keeps that one's row (the version key; no IGNORE, which would also turn a
 * value too long for its column into a warning).
 */
export async function recordFirstVersions(
  db: Queryable,
  namespace: string,
  first: readonly { job: string; print: string; schedule: string; timezone: string }[],
  recordedBy: string,
): Promise<void> {
  if (first.length === 0) return;
  const row = `(?, ?, 1, ?, ?, ?, ?, 'first', NOW(3), ?, NOW(6))`;
  await db.query(
    `INSERT INTO baton_timings (namespace, ${COLUMNS}, updated_at)
     VALUES ${first.map(() => row).join(', ')}
     ON DUPLICATE KEY UPDATE id = id`,
    first.flatMap((f) => [
      namespace,
      f.job,
      f.print,
      f.schedule,
      f.timezone,
      FIRST_VERSION_AT,
      recordedBy,
    ]),
  );
}

/** How long before a pending version's instant it may still be moved. */
export const RETIME_MARGIN_SECONDS = 60;

/**
 * Moves the instant of the job's latest version `version`, if it is still pending by more than
 * RETIME_MARGIN_SECONDS (runners see the change within their watch's interval): true if moved.
 */
export async function retimeTiming(
  db: Queryable,
  namespace: string,
  job: string,
  version: number,
  at: Date,
): Promise<boolean> {
  const [res] = await db.query<ResultSetHeader>(
    `UPDATE baton_timings SET effective_at = ?, chosen_by = 'operator', updated_at = NOW(6)
      WHERE namespace = ? AND job = ? AND version = ?
        AND effective_at > NOW(3) + INTERVAL ${RETIME_MARGIN_SECONDS} SECOND
        AND NOT EXISTS (SELECT /*+ NO_MERGE(newer) */ 1 FROM (SELECT version FROM baton_timings
                         WHERE namespace = ? AND job = ? AND version > ?) AS newer)`,
    [at, namespace, job, version, namespace, job, version],
  );
  return res.affectedRows === 1;
}

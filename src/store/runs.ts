/**
 * `baton_runs`, the run history: every statement that touches it lives here.
 *
 * One row per runner per fire it considered. The winner's row is guarded by the unique fire key
 * `(namespace, job, scheduled_at, winner)`; skip rows carry `winner = NULL` and never collide.
 * The columns are documented for operators in docs/history.md.
 */
import type { ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import { isDuplicateKeyError, isLockConflictError } from '../errors.js';
import { truncate } from '../text.js';
import { sessionLockSql } from '../lock-names.js';
import type { Queryable } from './deadline.js';
import type { FinalStatus, RunStatus, Trigger } from '../run-status.js';

/** `baton_runs.reason` is VARCHAR(512). */
const REASON_MAX = 512;

export type { Queryable };

export interface Run {
  id: number;
  namespace: string;
  job: string;
  scheduledAt: Date;
  /** The row of a runner that ran the fire (a worker slot of it, for `workers: N`). */
  winner: boolean;
  /** Which worker slot (1..N) the winner took; null on other rows. */
  workerSlot: number | null;
  trigger: Trigger;
  status: RunStatus;
  reason: string | null;
  host: string;
  pid: number | null;
  lockConnectionId: number | null;
  startedAt: Date;
  finishedAt: Date | null;
  exitCode: number | null;
  /** How many times the job was started for this fire (retries); 0 when it never ran. */
  attempts: number;
  error: string | null;
  outputTail: string | null;
}

/** Who is attempting which fire: the fields every row has. */
export interface Attempt {
  namespace: string;
  job: string;
  scheduledAt: Date;
  trigger: Trigger;
  host: string;
  pid: number;
  /** The worker slot a winner claims (`workers: N`); 1 for an ordinary job. */
  slot?: number;
}

const COLUMNS = `id, namespace, job, scheduled_at, winner, triggered_by, status, reason, host, pid,
  lock_connection_id, started_at, finished_at, exit_code, attempts, error, output_tail`;

interface RunRow extends RowDataPacket {
  id: number;
  namespace: string;
  job: string;
  scheduled_at: Date;
  winner: number | null;
  triggered_by: Trigger;
  status: RunStatus;
  reason: string | null;
  host: string;
  pid: number | null;
  lock_connection_id: number | null;
  started_at: Date;
  finished_at: Date | null;
  exit_code: number | null;
  attempts: number;
  error: string | null;
  output_tail: string | null;
}

function toRun(r: RunRow): Run {
  return {
    id: Number(r.id),
    namespace: r.namespace,
    job: r.job,
    scheduledAt: r.scheduled_at,
    winner: r.winner != null && r.winner >= 1,
    workerSlot: r.winner != null && r.winner >= 1 ? Number(r.winner) : null,
    trigger: r.triggered_by,
    status: r.status,
    reason: r.reason,
    host: r.host,
    pid: r.pid,
    lockConnectionId: r.lock_connection_id == null ? null : Number(r.lock_connection_id),
    startedAt: r.started_at,
    finishedAt: r.finished_at,
    exitCode: r.exit_code,
    attempts: Number(r.attempts),
    error: r.error,
    outputTail: r.output_tail,
  };
}

/**
 * A claim's answer: the winning row's id; `early` (not due yet by the database's clock: ask
 * again); or `taken` (this slot of the fire already has a winner).
 */
export type ClaimResult = { runId: number } | 'early' | 'taken';

export interface Claim {
  attempt: Attempt;
  /** The claiming runner's lock session, recorded on the row for the reaper. */
  lockConnectionId: number | null;
}

const CLAIM_COLUMNS = `(namespace, job, scheduled_at, winner, triggered_by, status, host, pid,
  lock_connection_id, started_at, attempts)`;

function claimValues(c: Claim): unknown[] {
  const a = c.attempt;
  return [
    a.namespace,
    a.job,
    a.scheduledAt,
    a.slot ?? 1,
    a.trigger,
    a.host,
    a.pid,
    c.lockConnectionId,
  ];
}

/**
 * Claims fires: inserts each winning row — but only once the fire's instant has come by the
 * database's clock (`NOW(3) >= scheduled_at`), so no run ever starts early, whatever the runner's
 * clock says. The fire key decides who won: a slot of a fire that already has a winner is
 * `taken`.
 *
 * Many claims (a whole instant's fires, each under its job's lock) are one insert, in fire-key
 * order. A duplicate key fails all of it (nothing is inserted), and the claims are then made one
 * by one, so each gets its exact answer — rare: only a late host meets fires that already ran. So
 * does a deadlock or lock wait (rolled back too): the claims are held under their locks, and
 * giving them up would leave their fires to nobody.
 */
export async function claimFires(db: Queryable, claims: readonly Claim[]): Promise<ClaimResult[]> {
  if (claims.length > 1) {
    const order = claims.map((_, i) => i).sort((i, j) => compareFireKeys(claims[i]!, claims[j]!));
    try {
      const sorted = await claimTogether(
        db,
        order.map((i) => claims[i]!),
      );
      const results: ClaimResult[] = [];
      order.forEach((i, k) => (results[i] = sorted[k]!));
      return results;
    } catch (err) {
      if (!isDuplicateKeyError(err) && !isLockConflictError(err)) throw err;
    }
  }
  const results: ClaimResult[] = [];
  for (const c of claims) results.push(await claimOne(db, c));
  return results;
}

/** The unique fire key's order (job is ascii_bin: code-unit order is the index's order). */
function compareFireKeys(a: Claim, b: Claim): number {
  const x = a.attempt;
  const y = b.attempt;
  if (x.job !== y.job) return x.job < y.job ? -1 : 1;
  return x.scheduledAt.getTime() - y.scheduledAt.getTime() || (x.slot ?? 1) - (y.slot ?? 1);
}

async function claimOne(db: Queryable, c: Claim): Promise<ClaimResult> {
  try {
    const [res] = await db.query<ResultSetHeader>(
      `INSERT INTO baton_runs ${CLAIM_COLUMNS}
       SELECT ?, ?, ?, ?, ?, 'running', ?, ?, ?, NOW(3), 1 FROM DUAL WHERE NOW(3) >= ?`,
      [...claimValues(c), c.attempt.scheduledAt],
    );
    return res.affectedRows === 1 ? { runId: res.insertId } : 'early';
  } catch (err) {
    if (isDuplicateKeyError(err)) return 'taken';
    throw err;
  }
}

/**
 * One insert for all claims, then the rows read back by fire key. A row at a claim's key is this
 * claim's when this statement inserted it: its id is at least the statement's first id (ids only
 * grow, so a row written before has a smaller one) and it names this lock session, host and pid.
 */
async function claimTogether(db: Queryable, claims: readonly Claim[]): Promise<ClaimResult[]> {
  const row = `SELECT ? AS namespace, ? AS job, CAST(? AS DATETIME(3)) AS scheduled_at,
       ? AS winner, ? AS triggered_by, ? AS host, ? AS pid, ? AS lock_connection_id`;
  const [res] = await db.query<ResultSetHeader>(
    `INSERT INTO baton_runs ${CLAIM_COLUMNS}
     SELECT f.namespace, f.job, f.scheduled_at, f.winner, f.triggered_by, 'running', f.host,
            f.pid, f.lock_connection_id, NOW(3), 1
       FROM (${claims.map(() => row).join(' UNION ALL ')}) AS f
      WHERE NOW(3) >= f.scheduled_at`,
    claims.flatMap(claimValues),
  );
  const winners = await winnersOfFires(
    db,
    claims[0]!.attempt.namespace,
    claims.map((c) => c.attempt),
  );
  return claims.map((c): ClaimResult => {
    const a = c.attempt;
    const w = winners.find(
      (r) =>
        r.job === a.job &&
        r.scheduledAt.getTime() === a.scheduledAt.getTime() &&
        r.workerSlot === (a.slot ?? 1),
    );
    if (!w) return 'early';
    const ours =
      res.affectedRows > 0 &&
      w.id >= res.insertId &&
      w.lockConnectionId === c.lockConnectionId &&
      w.host === a.host &&
      w.pid === a.pid;
    return ours ? { runId: w.id } : 'taken';
  });
}

/**
 * Closes a winner row whose insert failed without a clear answer (it may have committed): by fire
 * key and lock session, so only this runner's own claim is touched.
 */
export async function abandonClaim(
  db: Queryable,
  attempt: Attempt,
  lockConnectionId: number,
  why: string,
): Promise<void> {
  await db.query(
    `UPDATE baton_runs SET status = 'failed', finished_at = NOW(3), error = ?
      WHERE namespace = ? AND job = ? AND scheduled_at = ? AND winner = ?
        AND lock_connection_id = ? AND status = 'running'`,
    [
      truncate(`baton could not confirm its claim of this fire: ${why}`, 2000),
      attempt.namespace,
      attempt.job,
      attempt.scheduledAt,
      attempt.slot ?? 1,
      lockConnectionId,
    ],
  );
}

/** Records that this runner considered the fire and did not run it, and why. */
export async function insertSkip(db: Queryable, attempt: Attempt, reason: string): Promise<number> {
  const [id] = await insertSkips(db, [{ attempt, reason }]);
  return id!;
}

/**
 * Skip rows of many fires in one statement; their ids in the same order. The ids are read back
 * by fire rather than assumed consecutive from the first one (they need not be, with
 * `innodb_autoinc_lock_mode = 2` or an `auto_increment_increment` above 1).
 */
export async function insertSkips(
  db: Queryable,
  skips: readonly { attempt: Attempt; reason: string }[],
): Promise<number[]> {
  const [res] = await db.query<ResultSetHeader>(
    `INSERT INTO baton_runs (namespace, job, scheduled_at, winner, triggered_by, status, reason,
       host, pid, started_at, finished_at)
     VALUES ${skips.map(() => "(?, ?, ?, NULL, ?, 'skipped', ?, ?, ?, NOW(3), NOW(3))").join(', ')}`,
    skips.flatMap(({ attempt: a, reason }) => [
      a.namespace,
      a.job,
      a.scheduledAt,
      a.trigger,
      truncate(reason, REASON_MAX),
      a.host,
      a.pid,
    ]),
  );
  if (skips.length === 1) return [res.insertId];
  const attempts = skips.map((s) => s.attempt);
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT id, job, scheduled_at, triggered_by FROM baton_runs
      WHERE id >= ? AND namespace IN (?) AND host IN (?) AND pid IN (?) AND status = 'skipped'
        AND job IN (?) ORDER BY id`,
    [
      res.insertId,
      [...new Set(attempts.map((a) => a.namespace))],
      [...new Set(attempts.map((a) => a.host))],
      [...new Set(attempts.map((a) => a.pid))],
      [...new Set(attempts.map((a) => a.job))],
    ],
  );
  // Each fire's rows in id order, handed out in the order they were asked for.
  const ids = new Map<string, number[]>();
  for (const r of rows) {
    const key = fireKey(String(r.job), r.scheduled_at as Date, String(r.triggered_by));
    ids.set(key, [...(ids.get(key) ?? []), Number(r.id)]);
  }
  return skips.map(({ attempt: a }) => {
    const id = ids.get(fireKey(a.job, a.scheduledAt, a.trigger))?.shift();
    if (id == null) throw new Error(`internal error: the skip row of ${a.job} was not found back`);
    return id;
  });
}

function fireKey(job: string, scheduledAt: Date, trigger: string): string {
  return `${job}\0${scheduledAt.getTime()}\0${trigger}`;
}

export interface RunOutcome {
  status: FinalStatus;
  exitCode: number | null;
  error: string | null;
  outputTail: string | null;
  /**
   * When the run really ended, in database time (the runner's clock corrected by its measured
   * offset). Default: the moment of writing, `NOW(3)`. Never before `started_at`.
   */
  finishedAt?: Date;
}

/**
 * Writes a run's verdict. Conditional on the row still being `running`: a verdict already written
 * by someone else (a reaper that declared the run lost) is never overwritten. Returns whether
 * this call wrote it.
 */
export async function finishRun(db: Queryable, id: number, outcome: RunOutcome): Promise<boolean> {
  const [res] = await db.query<ResultSetHeader>(
    `UPDATE baton_runs
        SET status = ?, finished_at = GREATEST(started_at, COALESCE(?, NOW(3))), exit_code = ?,
            error = ?,
            output_tail = ?
      WHERE id = ? AND status = 'running'`,
    [
      outcome.status,
      outcome.finishedAt ?? null,
      outcome.exitCode,
      outcome.error,
      outcome.outputTail,
      id,
    ],
  );
  if (res.affectedRows === 1) return true;
  if (outcome.status === 'lost' && outcome.finishedAt) {
    // Someone else declared it lost first, stamping the moment they noticed. The runner that ran
    // it knows when it really ended — earlier (the history must not show it overlapping the next
    // run) or later (a real overlap in the detection window must not be hidden) — so its end
    // time wins. The verdict itself stays as written.
    await db.query(
      `UPDATE baton_runs SET finished_at = GREATEST(started_at, ?) WHERE id = ? AND status = 'lost'`,
      [outcome.finishedAt, id],
    );
  }
  return false;
}

/** A retry starts: the row counts it (still conditional on the run being this one, `running`). */
export async function recordAttempt(db: Queryable, id: number, attempt: number): Promise<void> {
  await db.query(`UPDATE baton_runs SET attempts = ? WHERE id = ? AND status = 'running'`, [
    attempt,
    id,
  ]);
}

/** A `running` row whose runner is gone, as the reaper finds it. */
export interface OrphanRun {
  id: number;
  job: string;
  host: string;
  lockConnectionId: number | null;
}

/**
 * `running` rows of the namespace whose lock session is gone: its session lock is not held by the
 * connection the row names, or the row started before the server did (connection ids restart
 * after a server restart, so an id alone could be a stranger's). `serverStartedBefore` is the
 * server's start time rounded down (a second early), which never misjudges a live row.
 *
 * Rows with `attempts = 0` are left alone: they were written by runners older than migration 0002,
 * which hold no session lock — judged by this test, they would all look dead.
 */
export async function findOrphanRuns(
  db: Queryable,
  namespace: string,
  serverStartedBefore: Date,
  jobs?: readonly string[],
): Promise<OrphanRun[]> {
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT id, job, host, lock_connection_id FROM baton_runs
      WHERE namespace = ? AND status = 'running' AND attempts > 0
        ${jobs == null ? '' : 'AND job IN (?)'}
        AND (lock_connection_id IS NULL OR started_at < ?
             OR NOT (IS_USED_LOCK(${sessionLockSql('lock_connection_id')})
                     <=> lock_connection_id))`,
    jobs == null ? [namespace, serverStartedBefore] : [namespace, jobs, serverStartedBefore],
  );
  return rows.map((r) => ({
    id: Number(r.id),
    job: String(r.job),
    host: String(r.host),
    lockConnectionId: r.lock_connection_id == null ? null : Number(r.lock_connection_id),
  }));
}

/**
 * Declares a run lost (its runner vanished, or its lock session died under it). Conditional on
 * the row still being `running`: whoever writes first wins, nobody overwrites a verdict.
 */
export async function markLost(db: Queryable, id: number, error: string): Promise<boolean> {
  const [res] = await db.query<ResultSetHeader>(
    `UPDATE baton_runs SET status = 'lost', finished_at = NOW(3), error = ?
      WHERE id = ? AND status = 'running'`,
    [error, id],
  );
  return res.affectedRows === 1;
}

/**
 * Records that nobody attempted a fire (the fleet was down or cut off). The row takes the fire
 * key's `winner = 0` slot: written once however many runners notice, and never in the way of a
 * winner (`winner = 1`). Returns whether this call wrote it.
 */
export async function insertMissed(
  db: Queryable,
  attempt: Attempt,
  reason: string,
): Promise<boolean> {
  try {
    await db.query(
      `INSERT INTO baton_runs (namespace, job, scheduled_at, winner, triggered_by, status, reason,
         host, pid, started_at, finished_at)
       VALUES (?, ?, ?, 0, ?, 'missed', ?, ?, ?, NOW(3), NOW(3))`,
      [
        attempt.namespace,
        attempt.job,
        attempt.scheduledAt,
        attempt.trigger,
        truncate(reason, REASON_MAX),
        attempt.host,
        attempt.pid,
      ],
    );
    return true;
  } catch (err) {
    // Another runner recorded it first. (Not `ON DUPLICATE KEY UPDATE id = id`: mysql2 connects
    // with CLIENT_FOUND_ROWS, so that no-op update reports one affected row, like an insert.)
    if (isDuplicateKeyError(err)) return false;
    throw err;
  }
}

/** The instants in [from, to] at which the job has any row (an attempt, a skip, a missed mark). */
export async function firesWithRows(
  db: Queryable,
  namespace: string,
  job: string,
  from: Date,
  to: Date,
): Promise<Set<number>> {
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT DISTINCT scheduled_at FROM baton_runs
      WHERE namespace = ? AND job = ? AND scheduled_at BETWEEN ? AND ?`,
    [namespace, job, from, to],
  );
  return new Set(rows.map((r) => (r.scheduled_at as Date).getTime()));
}

/**
 * The earliest fire the history knows for each of the jobs (absent: the job never fired), in one
 * statement: a runner with 1,000 jobs asks this at every start and reconnect.
 */
export async function firstFiresOf(
  db: Queryable,
  namespace: string,
  jobs: readonly string[],
): Promise<Map<string, Date>> {
  if (jobs.length === 0) return new Map();
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT job, MIN(scheduled_at) AS first FROM baton_runs
      WHERE namespace = ? AND job IN (?) GROUP BY job`,
    [namespace, [...jobs]],
  );
  return new Map(rows.map((r) => [String(r.job), r.first as Date]));
}

/**
 * The winning row of one fire, if any runner claimed it: of the given worker slot, or of the
 * first slot taken.
 */
export async function findWinner(
  db: Queryable,
  namespace: string,
  job: string,
  scheduledAt: Date,
  slot?: number,
): Promise<Run | null> {
  const [rows] = await db.query<RunRow[]>(
    `SELECT ${COLUMNS} FROM baton_runs
      WHERE namespace = ? AND job = ? AND scheduled_at = ?
        AND ${slot == null ? 'winner >= 1' : 'winner = ?'}
      ORDER BY winner LIMIT 1`,
    slot == null ? [namespace, job, scheduledAt] : [namespace, job, scheduledAt, slot],
  );
  return rows[0] ? toRun(rows[0]) : null;
}

/** The slot of one fire that `host` won, if it won one (fan-out: one slot per runner). */
export async function findWinnerOnHost(
  db: Queryable,
  namespace: string,
  job: string,
  scheduledAt: Date,
  host: string,
): Promise<Run | null> {
  const [rows] = await db.query<RunRow[]>(
    `SELECT ${COLUMNS} FROM baton_runs
      WHERE namespace = ? AND job = ? AND scheduled_at = ? AND winner >= 1 AND host = ?
      LIMIT 1`,
    [namespace, job, scheduledAt, host],
  );
  return rows[0] ? toRun(rows[0]) : null;
}

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

/** The `running` rows of `jobs` claimed by the lock sessions `connectionIds`. */
export async function runsOfLockSessions(
  db: Queryable,
  namespace: string,
  jobs: readonly string[],
  connectionIds: readonly number[],
): Promise<Run[]> {
  const [rows] = await db.query<RunRow[]>(
    `SELECT ${COLUMNS} FROM baton_runs
      WHERE namespace = ? AND status = 'running' AND lock_connection_id IN (?) AND job IN (?)`,
    [namespace, connectionIds, jobs],
  );
  return rows.map(toRun);
}

/** The winning rows (every slot) of the given fires. */
export async function winnersOfFires(
  db: Queryable,
  namespace: string,
  fires: readonly { job: string; scheduledAt: Date }[],
): Promise<Run[]> {
  // The exact pairs (a row constructor): the fire key's range per pair, not jobs × instants.
  const pairs = new Map(fires.map((f) => [`${f.job}\0${f.scheduledAt.getTime()}`, f]));
  const [rows] = await db.query<RunRow[]>(
    `SELECT ${COLUMNS} FROM baton_runs
      WHERE namespace = ? AND (job, scheduled_at) IN (?) AND winner >= 1`,
    [namespace, [...pairs.values()].map((f) => [f.job, f.scheduledAt])],
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

/**
 * The writes that put a row into `baton_runs` at a fire (its life is drawn in runs.ts; the fire's
 * reads are in fire-reads.ts): the winner's claim, which carries the one-winner guarantee, and the
 * rows of fires a runner did not run — its skips, and the `missed` mark of a fire nobody
 * attempted. Plus `abandonClaim`, which closes a claim whose answer was lost.
 *
 * The claim is one INSERT that the unique fire key `(namespace, job, scheduled_at, rerun, winner)`
 * decides (`rerun`: the fire's generation, 0 but for a re-run — docs/history.md, "Re-runs"): whoever inserts a slot of a fire first has won it, and every later insert of that
 * slot is a duplicate key (`taken`), whatever the runners' clocks said. The job's lock
 * (coordination/fire-protocol.ts) keeps runs from overlapping; this key is what keeps a fire from
 * running twice when a late host finds the lock free again.
 */
import type { ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import { isDuplicateKeyError, isLockConflictError } from '../errors.js';
import { truncate } from '../text.js';
import type { EventTargets } from '../config/notify-targets.js';
import { inTransaction, type Queryable } from './deadline.js';
import { enqueueNotices } from './notifications.js';
import {
  closeDependent,
  dependentsWithVerdict,
  holdsJudgement,
  markDependentStarted,
  setDependentRun,
  type DependentKey,
  type DependentPlan,
  type UpstreamSkip,
} from './dependent-fires.js';
import { winnersOfFires } from './fire-reads.js';
import type { MissedKind, SkipKind } from '../run-status.js';
import type { Attempt } from './runs.js';

/** `baton_runs.reason` is VARCHAR(512). */
const REASON_MAX = 512;

/**
 * A claim's answer: the winning row's id; `early` (not due yet by the database's clock: ask
 * again); `taken` (this slot of the fire already has a winner); `fenced` (a chain's claim
 * whose judge no longer holds the judgement: `Attempt.chain`); or `stale` (the instant is no
 * fire of the job's schedule as the database has it now: `definitionFence`).
 */
export type ClaimResult = { runId: number } | 'early' | 'taken' | 'fenced' | 'stale';

export interface Claim {
  attempt: Attempt;
  /** The claiming runner's lock session, recorded on the row for the reaper. */
  lockConnectionId: number | null;
  /**
   * The job's lock the claim is made under (every overlap policy but `allow`): its run id
   * becomes the newest fence of the job's slot in `baton_fences` (`moveFences`) before it is
   * answered — while `lockConnectionId` still holds this lock by the server.
   */
  underLock?: string;
}

const CLAIM_COLUMNS = `(namespace, job, scheduled_at, rerun, winner, triggered_by, status, host,
  pid, lock_connection_id, params, pool, timing_version, warn_at, started_at, attempts)`;

/**
 * The claim of a scheduled fire is fenced by the job's schedule as the database has it at the
 * claim, not only as this runner last read it: the timing version the runner fires the instant
 * by must be the one in force there (`baton_timings`: the newest whose instant has come), and a
 * schedule created at run time must still be there with the timing the runner read
 * (`baton_schedules`) — at once, without a look at its row, while the namespace's revision has
 * not moved since the runner read every change up to it (one read for a whole batch: a storm of
 * ten thousand keys' claims does not read ten thousand rows). A runner whose read is stale — the database stalled past a switch or a
 * removal, or it was paused across one — claims nothing: every runner on time fires by the
 * fleet's, and no instant runs under two timings. `f` is the claim's row (`FENCE_COLUMNS`).
 */
function definitionFence(f: string): string {
  return `(${f}.timing_version IS NULL OR ${f}.timing_version =
      (SELECT MAX(t.version) FROM baton_timings AS t
        WHERE t.namespace = ${f}.namespace AND t.job = ${f}.job
          AND t.effective_at <= ${f}.scheduled_at))
    AND (${f}.dynamic_job IS NULL
      OR (SELECT r.revision FROM baton_schedule_revisions AS r
           WHERE r.namespace = ${f}.namespace) = ${f}.dynamic_revision
      OR EXISTS (SELECT 1 FROM baton_schedules AS s
        WHERE s.namespace = ${f}.namespace AND s.job = ${f}.dynamic_job
          AND s.schedule_key = ${f}.dynamic_key AND s.removed_at IS NULL
          AND s.schedule = ${f}.dynamic_schedule AND s.timezone = ${f}.dynamic_timezone))`;
}

/** The fence's values of a claim, after `claimValues`'. */
function fenceValues(a: Attempt): unknown[] {
  const d = a.dynamic;
  return [
    d?.job ?? null,
    d?.key ?? null,
    d?.schedule ?? null,
    d?.timezone ?? null,
    d?.revision ?? null,
  ];
}

/** One claim as a row of a derived table: `claimValues` then `fenceValues`. */
const CLAIM_ROW = `SELECT ? AS namespace, ? AS job, CAST(? AS DATETIME(3)) AS scheduled_at,
     ? AS rerun, ? AS winner, ? AS triggered_by, ? AS host, ? AS pid, ? AS lock_connection_id,
     ? AS params, ? AS pool, ? AS timing_version, ? AS warn_us, ? AS dynamic_job,
     ? AS dynamic_key, ? AS dynamic_schedule, ? AS dynamic_timezone, ? AS dynamic_revision`;

/** What inserts a winner row from each claim row of `f` that is due and passes its fences. */
function claimInsert(rows: string, extra = ''): string {
  return `INSERT INTO baton_runs ${CLAIM_COLUMNS}
     SELECT f.namespace, f.job, f.scheduled_at, f.rerun, f.winner, f.triggered_by, 'running',
            f.host, f.pid, f.lock_connection_id, f.params, f.pool, f.timing_version,
            NOW(3) + INTERVAL f.warn_us MICROSECOND, NOW(3), 1
       FROM (${rows}) AS f
      WHERE NOW(3) >= f.scheduled_at AND ${definitionFence('f')} ${extra}`;
}

/**
 * Why a claim inserted nothing (it met no duplicate key): `stale` when its fence refused it;
 * `taken` for a re-run's claim refused because a generation of the fire is done by now
 * (`unlessDone`); else `early` — the database's clock had not reached the fire, or reached it
 * only between the insert and this read: either way, ask again.
 */
async function notInserted(db: Queryable, c: Claim): Promise<'early' | 'stale' | 'taken'> {
  const a = c.attempt;
  const [[row]] = await db.query<RowDataPacket[]>(
    `SELECT NOW(3) >= f.scheduled_at AS due, ${definitionFence('f')} AS fresh,
            ${a.unlessDone ? `NOT (TRUE ${NOT_DONE})` : 'FALSE'} AS done
       FROM (${CLAIM_ROW}) AS f`,
    [
      ...claimValues(c),
      ...fenceValues(a),
      ...(a.unlessDone ? [a.namespace, a.job, a.scheduledAt] : []),
    ],
  );
  if (Number(row?.due) !== 1) return 'early';
  if (Number(row?.fresh) !== 1) return 'stale';
  return Number(row?.done) === 1 ? 'taken' : 'early';
}

function claimValues(c: Claim): unknown[] {
  const a = c.attempt;
  return [
    a.namespace,
    a.job,
    a.scheduledAt,
    a.rerun ?? 0,
    a.slot ?? 1,
    a.trigger,
    a.host,
    a.pid,
    c.lockConnectionId,
    a.params ? JSON.stringify(a.params) : null,
    a.pool ?? null,
    a.timingVersion ?? null,
    // The run's warn instant (`duration.warn`, store/duration-flags.ts): `started_at` plus the
    // warn, both the statement's NOW(3); NULL without one (INTERVAL NULL is NULL).
    a.warnMs == null ? null : Math.round(a.warnMs) * 1000,
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
  const results = await claimAll(db, claims);
  // A chain's claim moved its fence in its own transaction (claimOne).
  await moveFences(
    db,
    claims.flatMap((c, i) => {
      const r = results[i];
      return c.underLock && !c.attempt.chain && typeof r === 'object'
        ? [{ c, runId: r.runId }]
        : [];
    }),
  );
  return results;
}

/**
 * The fence (issue 43; docs/design.md, "Fencing a stopped run"): a winner under the job's lock
 * makes its run id the newest fence of the job's slot, after its claim and before its run starts
 * — one statement for every fence a batch of claims won. A run id only grows (and moves past the
 * old primary's after a failover: store/failovers.ts), so `GREATEST` never lowers a fence, also
 * when this server's row lacks a fence the old primary gave out. The update takes the row's
 * exclusive lock, so it waits for a stale run's fenced transaction that read the row (a shared
 * lock, held to its commit: sdk/fence.ts) — whose writes then precede this run's start — and a
 * fenced transaction that reads the row after it finds the newer fence and rolls back.
 *
 * A fence moves only while its claimer's lock session still holds the job's lock by the server
 * (`IS_USED_LOCK`): a claim sent by a runner whose session died on the way, and that the server
 * took only after the job's next winner claimed, would otherwise set the fence above the next
 * run's and have that run's fenced writes refused (its own run never starts: the runner finds its
 * session gone). On an engine that cannot name a lock's holder (lock-probe.ts warns of it) no
 * fence moves, and fencing rests on the run's row alone.
 *
 * If it fails, the claim fails with it (`claim` in coordination/fire-protocol.ts closes the row
 * and does not run the job): no run starts without its fence in place.
 */
async function moveFences(
  db: Queryable,
  won: readonly { c: Claim; runId: number }[],
): Promise<void> {
  if (won.length === 0) return;
  // In key order, like the claims: two batches never take two fence rows in opposite orders.
  const rows = [...won].sort((x, y) => compareFireKeys(x.c, y.c));
  await db.query(
    `INSERT INTO baton_fences (namespace, job, slot, fence, fenced_at)
     VALUES ${rows.map(() => '(?, ?, ?, IF(IS_USED_LOCK(?) = ?, ?, 0), NOW(3))').join(', ')}
     ON DUPLICATE KEY UPDATE fenced_at = IF(VALUES(fence) > fence, VALUES(fenced_at), fenced_at),
                             fence = GREATEST(fence, VALUES(fence))`,
    rows.flatMap(({ c, runId }) => [
      c.attempt.namespace,
      c.attempt.job,
      c.attempt.slot ?? 1,
      c.underLock,
      c.lockConnectionId,
      runId,
    ]),
  );
}

async function claimAll(db: Queryable, claims: readonly Claim[]): Promise<ClaimResult[]> {
  if (claims.length > 1 && !claims.some((c) => c.attempt.unlessDone || c.attempt.chain)) {
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
  return (
    x.scheduledAt.getTime() - y.scheduledAt.getTime() ||
    (x.rerun ?? 0) - (y.rerun ?? 0) ||
    (x.slot ?? 1) - (y.slot ?? 1)
  );
}

/** A re-run's condition (`unlessDone`): no generation of the fire has a `done` run. */
const NOT_DONE = `AND NOT EXISTS (SELECT 1 FROM baton_runs AS d
  WHERE d.namespace = ? AND d.job = ? AND d.scheduled_at = ? AND d.winner >= 1
    AND d.status = 'done')`;

async function claimOne(db: Queryable, c: Claim): Promise<ClaimResult> {
  const chain = c.attempt.chain;
  if (!chain) return insertClaim(db, c);
  // A chain's claim: fenced by its judgement, and the chain row started with the run, in one
  // transaction (holdsJudgement) — a judge that stalled past its lease claims nothing, and no
  // judge ever finds a claimed child's row still `waiting`.
  const key = { ...c.attempt, rerun: c.attempt.rerun ?? 0 };
  return inTransaction(db, async (tx) => {
    if (!(await holdsJudgement(tx, key, chain.judge))) return 'fenced';
    const result = await insertClaim(tx, c);
    if (typeof result === 'object') {
      await markDependentStarted(tx, key, result.runId, chain.parentRuns, chain.judge);
      if (c.underLock) await moveFences(tx, [{ c, runId: result.runId }]);
    }
    return result;
  });
}

async function insertClaim(db: Queryable, c: Claim): Promise<ClaimResult> {
  const a = c.attempt;
  try {
    const [res] = await db.query<ResultSetHeader>(
      claimInsert(CLAIM_ROW, a.unlessDone ? NOT_DONE : ''),
      [
        ...claimValues(c),
        ...fenceValues(a),
        ...(a.unlessDone ? [a.namespace, a.job, a.scheduledAt] : []),
      ],
    );
    if (res.affectedRows === 1) return { runId: res.insertId };
    return await notInserted(db, c);
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
  const [res] = await db.query<ResultSetHeader>(
    claimInsert(claims.map(() => CLAIM_ROW).join(' UNION ALL ')),
    claims.flatMap((c) => [...claimValues(c), ...fenceValues(c.attempt)]),
  );
  const winners = await winnersOfFires(
    db,
    claims[0]!.attempt.namespace,
    claims.map((c) => c.attempt),
  );
  // By fire key: a batch may claim thousands of fires (schedules created at run time).
  const key = (job: string, at: Date, rerun: number, slot: number | null) =>
    `${job}\0${at.getTime()}\0${rerun}\0${slot}`;
  const byKey = new Map(winners.map((r) => [key(r.job, r.scheduledAt, r.rerun, r.workerSlot), r]));
  const results = claims.map((c): ClaimResult | null => {
    const a = c.attempt;
    const w = byKey.get(key(a.job, a.scheduledAt, a.rerun ?? 0, a.slot ?? 1));
    // No row: early, or refused by its fence (told apart below).
    if (!w) return null;
    const ours =
      res.affectedRows > 0 &&
      w.id >= res.insertId &&
      w.lockConnectionId === c.lockConnectionId &&
      w.host === a.host &&
      w.pid === a.pid;
    return ours ? { runId: w.id } : 'taken';
  });
  if (results.includes(null)) {
    // A batch sent a moment early (runners contend within a millisecond of the instant) has no
    // row at all: one read of the clock tells those; a due claim without a row was refused by
    // its fence, or the clock reached it just after the insert — each told alone, rare.
    const [[clock]] = await db.query<RowDataPacket[]>('SELECT NOW(3) AS now');
    const now = (clock?.now as Date).getTime();
    for (const [i, r] of results.entries()) {
      if (r != null) continue;
      const c = claims[i]!;
      results[i] = c.attempt.scheduledAt.getTime() > now ? 'early' : await notInserted(db, c);
    }
  }
  return results as ClaimResult[];
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
      WHERE namespace = ? AND job = ? AND scheduled_at = ? AND rerun = ? AND winner = ?
        AND lock_connection_id = ? AND status = 'running'`,
    [
      truncate(`baton could not confirm its claim of this fire: ${why}`, 2000),
      attempt.namespace,
      attempt.job,
      attempt.scheduledAt,
      attempt.rerun ?? 0,
      attempt.slot ?? 1,
      lockConnectionId,
    ],
  );
}

/** A fire this runner considered and did not run: why, in words and as a kind. */
export interface Skip {
  attempt: Attempt;
  reason: string;
  kind: SkipKind;
  /** Counted in `baton_skip_tallies` instead of a row here (store/skip-tallies.ts). */
  tally?: boolean;
}

/**
 * Skip rows of many fires in one statement; their ids in the same order. The ids are read back
 * by fire rather than assumed consecutive from the first one (they need not be, with
 * `innodb_autoinc_lock_mode = 2` or an `auto_increment_increment` above 1).
 */
export async function insertSkips(db: Queryable, skips: readonly Skip[]): Promise<number[]> {
  const [res] = await db.query<ResultSetHeader>(
    `INSERT INTO baton_runs (namespace, job, scheduled_at, rerun, winner, triggered_by, status,
       reason, reason_kind, host, pid, started_at, finished_at)
     VALUES ${skips.map(() => "(?, ?, ?, ?, NULL, ?, 'skipped', ?, ?, ?, ?, NOW(3), NOW(3))").join(', ')}`,
    skips.flatMap(({ attempt: a, reason, kind }) => [
      a.namespace,
      a.job,
      a.scheduledAt,
      a.rerun ?? 0,
      a.trigger,
      truncate(reason, REASON_MAX),
      kind,
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
/**
 * Records that nobody attempted a fire (the fleet was down or cut off), with the kind `not-run`;
 * that a fire is in doubt after a failover (`in-doubt`: daemon/in-doubt.ts); or that a runner
 * contended a fire but its claim could not be written (`not-claimed`: the database did not
 * answer in time, or its clock had not reached the fire), written late from the runner's backlog
 * (fire/verdict-backlog.ts); or that no live runner may run the job (`no-eligible-runner`:
 * daemon/placement-watch.ts).
 * The row takes the fire key's `winner = 0` slot: written once however many runners notice, and
 * never in the way of a winner (`winner = 1`). A `not-claimed` or `no-eligible-runner` row is written only while the fire
 * has no winner (another runner may have won it after this one gave up): it yields to the winner
 * as to another runner's `missed` row. Returns whether this call wrote it.
 */
export async function insertMissed(
  db: Queryable,
  attempt: Attempt,
  reason: string,
  targets?: EventTargets,
  kind: MissedKind = 'not-run',
  /** The job's children (`after:`): their fires written with the mark, judged at once. */
  dependents: readonly DependentPlan[] = [],
): Promise<boolean> {
  const told = targets?.missed ?? [];
  if (told.length === 0 && dependents.length === 0) {
    return (await writeMissed(db, attempt, reason, kind)) != null;
  }
  // The mark, its notifications and its children's fires land together: a runner that dies
  // between them loses none of them.
  return inTransaction(db, async (tx) => {
    const runId = await writeMissed(tx, attempt, reason, kind);
    if (runId == null) return false;
    const scope = { namespace: attempt.namespace, subject: attempt.job, fire: attempt.scheduledAt };
    if (told.length > 0) {
      await enqueueNotices(tx, [{ ...scope, event: 'missed', targets: told, runId }]);
    }
    await dependentsWithVerdict(tx, attempt.namespace, attempt.scheduledAt, dependents, 0);
    return true;
  });
}

/**
 * A fire's calendar skip (schedule/calendar.ts): the instant its schedule has and its calendars
 * skipped, written once by whichever runner writes it first, in the fire key's `winner = 0`
 * slot. Its id, or null when another runner wrote it first.
 */
export function insertCalendarSkip(
  db: Queryable,
  attempt: Attempt,
  reason: string,
): Promise<number | null> {
  return writeSlotZero(db, attempt, 'skipped', reason, 'calendar', false);
}

/** The `missed` row; its id, or null when another runner wrote it first (or won the fire). */
function writeMissed(
  db: Queryable,
  attempt: Attempt,
  reason: string,
  kind: MissedKind,
): Promise<number | null> {
  // A winner already there wins: the fire ran (or runs) after all. One that comes later meets a
  // `missed` row the way it would meet the look-back's.
  const unlessWon = kind === 'not-claimed' || kind === 'no-eligible-runner';
  return writeSlotZero(db, attempt, 'missed', reason, kind, unlessWon);
}

/** A decided row of a fire in its `winner = 0` slot: its id, or null when one is there. */
async function writeSlotZero(
  db: Queryable,
  a: Attempt,
  status: 'missed' | 'skipped',
  reason: string,
  kind: MissedKind | 'calendar',
  onlyUnlessWon: boolean,
): Promise<number | null> {
  const unlessWon = onlyUnlessWon
    ? `WHERE NOT EXISTS (SELECT 1 FROM baton_runs AS w
          WHERE w.namespace = ? AND w.job = ? AND w.scheduled_at = ? AND w.rerun = ?
            AND w.winner >= 1)`
    : '';
  try {
    const [res] = await db.query<ResultSetHeader>(
      `INSERT INTO baton_runs (namespace, job, scheduled_at, rerun, winner, triggered_by, status,
         reason, reason_kind, host, pid, started_at, finished_at)
       SELECT ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, NOW(3), NOW(3) FROM DUAL ${unlessWon}`,
      [
        a.namespace,
        a.job,
        a.scheduledAt,
        a.rerun ?? 0,
        a.trigger,
        status,
        truncate(reason, REASON_MAX),
        kind,
        a.host,
        a.pid,
        ...(unlessWon ? [a.namespace, a.job, a.scheduledAt, a.rerun ?? 0] : []),
      ],
    );
    return res.affectedRows === 1 ? res.insertId : null;
  } catch (err) {
    // Another runner recorded it first. (Not `ON DUPLICATE KEY UPDATE id = id`: mysql2 connects
    // with CLIENT_FOUND_ROWS, so that no-op update reports one affected row, like an insert.)
    if (isDuplicateKeyError(err)) return null;
    throw err;
  }
}

/**
 * Closes a child's fire (`after:`, store/dependent-fires.ts) as not run: the row `skipped`, one `upstream` skip row in the child's
 * history, and its notifications — in one transaction, conditional on the row still `waiting`
 * and judged by `judge`, so that of every runner that judges it only one writes them. Returns
 * the child's own children as written (`dependentsWithVerdict`), or null: this call did not close
 * it.
 *
 * Without `writeRow` (the child's own fire skipped: its pause, its overlap) no `upstream` row is
 * written: the fire has its own skip rows already.
 */
export async function skipDependent(
  db: Queryable,
  key: DependentKey,
  skip: UpstreamSkip,
  attempt: Pick<Attempt, 'host' | 'pid'> & { judge: string },
  /** The child's own children: their fires written too, to be judged now (nothing to wait for). */
  cascade: readonly DependentPlan[],
  writeRow = true,
): Promise<DependentPlan[] | null> {
  return inTransaction(db, async (tx) => {
    if (!(await closeDependent(tx, key, skip.reason, skip.parentRuns, attempt.judge))) return null;
    const written = await dependentsWithVerdict(tx, key.namespace, key.scheduledAt, cascade, 0);
    if (!writeRow) return written;
    const [runId] = await insertSkips(tx, [
      {
        attempt: { ...key, trigger: 'after', host: attempt.host, pid: attempt.pid },
        reason: skip.reason,
        kind: 'upstream',
      },
    ]);
    await setDependentRun(tx, key, runId!);
    if (skip.targets.length > 0) {
      await enqueueNotices(tx, [
        {
          namespace: key.namespace,
          subject: key.job,
          fire: key.scheduledAt,
          rerun: key.rerun,
          event: 'upstream',
          targets: skip.targets,
          runId: runId ?? null,
          details: {
            parent: skip.parent,
            parentRunId: skip.parentRunId,
            parentStatus: skip.parentStatus,
            reason: skip.reason,
          },
        },
      ]);
    }
    return written;
  });
}

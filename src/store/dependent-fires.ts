/**
 * `baton_dependent_fires`: the fires of child jobs (`after:`, docs/dependencies.md), one row per
 * child, instant and generation — the chain's outbox.
 *
 * The life of a row:
 *
 *   (expected at the parents' instant, or written with a parent's verdict)
 *        │
 *        ▼
 *     waiting ──judged: every parent's run lets it──▶ started   (run_id: the child's run)
 *        │  ▲
 *        │  └── judged: a parent has no verdict yet (check_at later)
 *        └────judged: a parent's run (or its absence) does not let it, or `within` passed
 *                                                 ──▶ skipped   (run_id: the `upstream` skip row)
 *
 * Written by whoever learns something of the parents (their verdict, in its transaction:
 * `dependentsWithVerdict`; their instant: `expectDependents`), judged by any live runner that has
 * the child (fire/dependents.ts). Every write is idempotent or conditional on `waiting`, so a
 * row is started or skipped once however many runners judge it; the child's own fire key
 * (namespace, job, scheduled_at, rerun, slot) keeps its run to one.
 */
import { randomBytes } from 'node:crypto';
import type { ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import { MAX_AFTER_WITHIN_MS } from '../config/defaults.js';
import { isDuplicateKeyError } from '../errors.js';
import { truncate } from '../text.js';
import type { FinalStatus, RunStatus, SkipKind } from '../run-status.js';
import type { Queryable } from './deadline.js';
import {
  DEPENDENT_FIRE_COLUMNS,
  toDependentFire,
  type DependentFire,
} from './dependent-fire-reads.js';

/** `baton_dependent_fires.reason` is VARCHAR(512); `parent_runs` VARCHAR(2048). */
const REASON_MAX = 512;
const PARENT_RUNS_MAX = 2048;

/** A child's fire: its job, the parents' instant, the generation it claims. */
export interface DependentKey {
  namespace: string;
  job: string;
  scheduledAt: Date;
  rerun: number;
}

/** A child that a parent's run carries to its verdict: written with it (`dependentsWithVerdict`). */
export interface DependentPlan {
  job: string;
  /** The child's generation to claim: 0 for the scheduled chain, planned for an operator's. */
  rerun: number;
  withinMs: number;
  /**
   * Where `within` counts from: the instant (a scheduled chain), or the moment the verdict is
   * written (an operator's re-run of a past fire, whose instant may be long gone).
   */
  deadlineFrom: 'instant' | 'now';
}

/**
 * `within` as a child's deadline may count it: finite, 0 to MAX_AFTER_WITHIN_MS. The file refuses
 * anything else, but the deadline is written in the parent's verdict transaction, and a date
 * past DATETIME's range there would fail the parent's verdict with it (its run left `running`):
 * a child's row must never be able to do that, whatever reached the plan.
 */
export function deadlineWithinMs(withinMs: number): number {
  if (!Number.isFinite(withinMs)) return MAX_AFTER_WITHIN_MS;
  return Math.min(Math.max(withinMs, 0), MAX_AFTER_WITHIN_MS);
}

/** A row as read (store/dependent-fire-reads.ts: the one reading of the table's rows). */
export type DependentRow = DependentFire;

/**
 * The children of a parent's run, written in the transaction of its verdict: a runner that dies
 * right after the verdict leaves them for another to judge. `check_at` is `leadMs` ahead, so that
 * the writer (which judges them at once) goes first and the others come only if it does not.
 *
 * The schedule's chain (`deadlineFrom: 'instant'`) writes generation 0, and the verdicts of a
 * child's parents (fan-in) meet on that one row. An operator's chain (`'now'`) owns its rows: its
 * generation was planned before the parent's run, and another chain of the same instant (two
 * `--again --with-dependents` at once) may have taken it meanwhile — then the next free one is
 * taken here, never the other chain's row, which would give two parent runs one child run.
 * Its row names the parent run that carried it (`carrier`, in `parent_runs`): the chain's child is
 * judged after that run, not after whichever generation of the parent is the latest by then.
 * Returns the plans as written (the generations each child's fire really has).
 */
export async function dependentsWithVerdict(
  tx: Queryable,
  namespace: string,
  scheduledAt: Date,
  plans: readonly DependentPlan[],
  leadMs: number,
  carrier: { job: string; runId: number } | null = null,
): Promise<DependentPlan[]> {
  const shared = plans.filter((p) => p.deadlineFrom === 'instant');
  if (shared.length > 0) {
    await tx.query(
      `INSERT INTO baton_dependent_fires (namespace, job, scheduled_at, rerun, status, check_at,
         deadline, created_at, updated_at)
       VALUES ${shared.map(() => `(${DEPENDENT_ROW})`).join(', ')}
       ON DUPLICATE KEY UPDATE
         check_at = IF(status = 'waiting', LEAST(check_at, VALUES(check_at)), check_at),
         updated_at = NOW(3)`,
      shared.flatMap((p) => rowValues(namespace, scheduledAt, p, leadMs)),
    );
  }
  const written: DependentPlan[] = [];
  for (const plan of plans) {
    written.push(
      plan.deadlineFrom === 'instant'
        ? plan
        : await ownRow(tx, namespace, scheduledAt, plan, leadMs, carrier),
    );
  }
  return written;
}

/** One row of a verdict's children: namespace, job, instant, generation, lead, deadline. */
const DEPENDENT_ROW =
  "?, ?, ?, ?, 'waiting', NOW(3) + INTERVAL ? MICROSECOND, " +
  'IF(? = 1, ?, NOW(3)) + INTERVAL ? MICROSECOND, NOW(3), NOW(3)';

function rowValues(namespace: string, scheduledAt: Date, p: DependentPlan, leadMs: number) {
  return [
    namespace,
    p.job,
    scheduledAt,
    p.rerun,
    leadMs * 1000,
    p.deadlineFrom === 'instant' ? 1 : 0,
    scheduledAt,
    deadlineWithinMs(p.withinMs) * 1000,
  ];
}

/**
 * How many generations past the planned one an operator's chain looks for a free one: as many
 * chains of one instant as ran meanwhile (each holds the parent's lock for its run).
 */
const GENERATIONS_AHEAD = 1_000;

/**
 * An operator's chain's row, at its planned generation or the first free one after it. A plain
 * INSERT: its duplicate key (another chain's row) fails the statement alone, not the transaction.
 */
async function ownRow(
  tx: Queryable,
  namespace: string,
  scheduledAt: Date,
  plan: DependentPlan,
  leadMs: number,
  carrier: { job: string; runId: number } | null,
): Promise<DependentPlan> {
  const pinned = carrier ? JSON.stringify({ [carrier.job]: carrier.runId }) : null;
  for (let rerun = plan.rerun; rerun < plan.rerun + GENERATIONS_AHEAD; rerun++) {
    try {
      await tx.query(
        `INSERT INTO baton_dependent_fires (namespace, job, scheduled_at, rerun, status,
           check_at, deadline, created_at, updated_at, parent_runs) VALUES (${DEPENDENT_ROW}, ?)`,
        [...rowValues(namespace, scheduledAt, { ...plan, rerun }, leadMs), pinned],
      );
      return { ...plan, rerun };
    } catch (err) {
      if (!isDuplicateKeyError(err)) throw err;
    }
  }
  throw new Error(
    `no free generation of ${plan.job}'s fire ${scheduledAt.toISOString()} from ${plan.rerun} on`,
  );
}

/** A child's fire expected at its parents' instant, judged first at `checkAt`. */
export interface Expected {
  key: DependentKey;
  checkAt: Date;
  deadline: Date;
}

/**
 * The children's fires of instants the parents reached, written by every runner that has the
 * children (INSERT IGNORE: the first one's row stands), so that a parent that does not run the
 * instant at all — paused, skipped, nobody there — still has its children judged.
 */
export async function expectDependents(db: Queryable, rows: readonly Expected[]): Promise<void> {
  if (rows.length === 0) return;
  await db.query(
    `INSERT IGNORE INTO baton_dependent_fires (namespace, job, scheduled_at, rerun, status,
       check_at, deadline, created_at, updated_at)
     VALUES ${rows.map(() => "(?, ?, ?, ?, 'waiting', ?, ?, NOW(3), NOW(3))").join(', ')}`,
    rows.flatMap(({ key: k, checkAt, deadline }) => [
      k.namespace,
      k.job,
      k.scheduledAt,
      k.rerun,
      checkAt,
      deadline,
    ]),
  );
}

/** The waiting rows of `jobs` whose time to be judged has come, oldest first. */
export async function dueDependents(
  db: Queryable,
  namespace: string,
  jobs: readonly string[],
  limit: number,
): Promise<DependentRow[]> {
  if (jobs.length === 0) return [];
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT ${DEPENDENT_FIRE_COLUMNS} FROM baton_dependent_fires
      WHERE namespace = ? AND status = 'waiting' AND job IN (?) AND check_at <= NOW(3)
        AND (judged_until IS NULL OR judged_until < NOW(3))
      ORDER BY check_at LIMIT ?`,
    [namespace, jobs, limit],
  );
  return rows.map(toDependentFire);
}

/**
 * Takes the judgement of a waiting child's fire for `judge` (one judgement's own name: `judgeName`),
 * for `leaseMs`: none else judges it meanwhile (one judge at a time, so that a fire is never
 * contended by one runner and skipped as upstream by another). Null when it is not `waiting`, or
 * another judge holds it; else the row.
 */
export async function takeDependent(
  db: Queryable,
  key: DependentKey,
  judge: string,
  leaseMs: number,
): Promise<DependentRow | null> {
  const [res] = await db.query<ResultSetHeader>(
    `UPDATE baton_dependent_fires
        SET judged_by = ?, judged_until = NOW(3) + INTERVAL ? MICROSECOND
      WHERE namespace = ? AND job = ? AND scheduled_at = ? AND rerun = ? AND status = 'waiting'
        AND (judged_until IS NULL OR judged_until < NOW(3))`,
    [judge, leaseMs * 1000, key.namespace, key.job, key.scheduledAt, key.rerun],
  );
  if (res.affectedRows !== 1) return null;
  return readDependent(db, key);
}

/**
 * A judgement's name in `judged_by`: its runner's host, pid and a random token, so that two
 * processes — two runners given the same `--host` by mistake, or one process's two judgements of a
 * fire — never take one lease for their own. Within VARCHAR(255) whatever the host's length.
 */
export function judgeName(host: string, pid: number): string {
  return `${host.slice(0, 200)} pid ${pid} ${randomBytes(6).toString('hex')}`;
}

/**
 * The judgement goes on (its judge contends the child's fire): held `leaseMs` more — only while
 * it is still `judge`'s, unexpired, and the row still `waiting`. Returns whether it was: false
 * means the lease lapsed (the judge stalled) and another may have taken and closed the fire.
 */
export async function renewDependent(
  db: Queryable,
  key: DependentKey,
  judge: string,
  leaseMs: number,
): Promise<boolean> {
  const [res] = await db.query<ResultSetHeader>(
    `UPDATE baton_dependent_fires SET judged_until = NOW(3) + INTERVAL ? MICROSECOND
      WHERE namespace = ? AND job = ? AND scheduled_at = ? AND rerun = ? AND status = 'waiting'
        AND judged_by = ? AND judged_until >= NOW(3)`,
    [leaseMs * 1000, key.namespace, key.job, key.scheduledAt, key.rerun, judge],
  );
  return res.affectedRows === 1;
}

/**
 * The fence of a judge's claim of the child's fire (store/fire-writes.ts): in the claim's
 * transaction, the row locked and checked still `waiting` and judged by `judge`, its lease not
 * expired. Another judge's take or close waits on the row lock until the claim has committed (and
 * then finds the row started); a claim after another's take finds it not its own. So a judge
 * that stalled anywhere before its claim never claims a fire another judge has taken since.
 */
export async function holdsJudgement(
  tx: Queryable,
  key: DependentKey,
  judge: string,
): Promise<boolean> {
  const [rows] = await tx.query<RowDataPacket[]>(
    `SELECT 1 FROM baton_dependent_fires
      WHERE namespace = ? AND job = ? AND scheduled_at = ? AND rerun = ? AND status = 'waiting'
        AND judged_by = ? AND judged_until >= NOW(3)
      FOR UPDATE`,
    [key.namespace, key.job, key.scheduledAt, key.rerun, judge],
  );
  return rows.length === 1;
}

/** One child's fire, as it stands; null: no row (nothing of its parents is known yet). */
export async function readDependent(
  db: Queryable,
  key: DependentKey,
): Promise<DependentRow | null> {
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT ${DEPENDENT_FIRE_COLUMNS} FROM baton_dependent_fires
      WHERE namespace = ? AND job = ? AND scheduled_at = ? AND rerun = ?`,
    [key.namespace, key.job, key.scheduledAt, key.rerun],
  );
  return rows[0] ? toDependentFire(rows[0]) : null;
}

/** What a parent did with an instant: its latest generation's run, and what else was written. */
export interface ParentRecord {
  job: string;
  /** The run of its latest generation at the instant (slot 1), or null: none. */
  run: {
    id: number;
    status: RunStatus;
    rerun: number;
    host: string;
    startedAt: Date;
    /** When its verdict says it ended (database time); null while it runs. */
    finishedAt: Date | null;
  } | null;
  /** Its `missed` row at the instant, if any. */
  missed: { id: number; reason: string | null } | null;
  /** Its skip rows at the instant (every runner's): the kinds and one row's id and words. */
  skips: { id: number; kind: SkipKind | null; reason: string | null }[];
}

/**
 * Every row the parents have at the instant, folded per parent (`parents` order). `pinned`: the
 * parent run that carried an operator's chain (`dependentsWithVerdict`) stands for its job rather
 * than its latest generation — another chain's later run of it is not this chain's parent.
 */
export async function parentRecords(
  db: Queryable,
  namespace: string,
  parents: readonly string[],
  scheduledAt: Date,
  pinned: Readonly<Record<string, number>> | null = null,
): Promise<ParentRecord[]> {
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT id, job, rerun, winner, status, reason, reason_kind, host, started_at, finished_at
       FROM baton_runs
      WHERE namespace = ? AND job IN (?) AND scheduled_at = ?
      ORDER BY rerun DESC, id`,
    [namespace, parents, scheduledAt],
  );
  return parents.map((job) => {
    const mine = rows.filter((r) => String(r.job) === job);
    const carrier = pinned?.[job];
    const latest =
      (carrier != null ? mine.find((r) => Number(r.id) === carrier) : undefined) ??
      mine.find((r) => r.winner != null && Number(r.winner) >= 1);
    const missed = mine.find((r) => r.status === 'missed');
    return {
      job,
      run: latest
        ? {
            id: Number(latest.id),
            status: latest.status as RunStatus,
            rerun: Number(latest.rerun),
            host: String(latest.host),
            startedAt: latest.started_at as Date,
            finishedAt: (latest.finished_at as Date | null) ?? null,
          }
        : null,
      missed: missed
        ? { id: Number(missed.id), reason: missed.reason == null ? null : String(missed.reason) }
        : null,
      skips: mine
        .filter((r) => r.status === 'skipped')
        .map((r) => ({
          id: Number(r.id),
          kind: (r.reason_kind ?? null) as SkipKind | null,
          reason: r.reason == null ? null : String(r.reason),
        })),
    };
  });
}

/**
 * A waiting row judged again later: its judge (`judge`, holding it for `leaseMs` since its last
 * take or renewal) lets it go. A parent's verdict written since (`updated_at` after the take: it
 * moved `check_at` to its lead) keeps that earlier time — the judge read the parents before it.
 */
export async function postponeDependent(
  db: Queryable,
  key: DependentKey,
  checkAt: Date,
  judge: string,
  leaseMs: number,
): Promise<void> {
  await db.query(
    `UPDATE baton_dependent_fires
        SET check_at = IF(updated_at > judged_until - INTERVAL ? MICROSECOND, check_at, ?),
            judged_by = NULL, judged_until = NULL
      WHERE namespace = ? AND job = ? AND scheduled_at = ? AND rerun = ? AND status = 'waiting'
        AND judged_by = ?`,
    [leaseMs * 1000, checkAt, key.namespace, key.job, key.scheduledAt, key.rerun, judge],
  );
}

/**
 * The child's fire was contended and has its run: its judge's claim (in the claim's transaction,
 * store/fire-writes.ts), or a chain's claim of an earlier judge found by this one. Conditional on
 * `waiting` and on `judge` still named on it (any other judge takes it first, renaming it): only
 * its judge starts it, once.
 */
export async function markDependentStarted(
  db: Queryable,
  key: DependentKey,
  runId: number | null,
  parentRuns: Record<string, number>,
  judge: string,
): Promise<boolean> {
  const [res] = await db.query<ResultSetHeader>(
    `UPDATE baton_dependent_fires
        SET status = 'started', run_id = ?, parent_runs = ?, judged_by = NULL,
            judged_until = NULL, updated_at = NOW(3)
      WHERE namespace = ? AND job = ? AND scheduled_at = ? AND rerun = ? AND status = 'waiting'
        AND judged_by = ?`,
    [
      runId,
      truncate(JSON.stringify(parentRuns), PARENT_RUNS_MAX),
      key.namespace,
      key.job,
      key.scheduledAt,
      key.rerun,
      judge,
    ],
  );
  return res.affectedRows === 1;
}

/** Why a child does not run an instant, as its `upstream` skip row and notification say. */
export interface UpstreamSkip {
  reason: string;
  /** The parent runs the judgement rested on (the one that stopped it, or none). */
  parentRuns: Record<string, number>;
  /** The parent that stopped it, and what it did (for the notification). */
  parent: string;
  parentStatus: FinalStatus | 'skipped' | 'missed' | 'running' | 'none';
  parentRunId: number | null;
  /** Targets told of `upstream` (config/notify-targets.ts); empty: none. */
  targets: readonly string[];
}

/**
 * Closes a child's fire as not run (fire-writes.ts `skipDependent` writes its `upstream` row in
 * the same transaction): conditional on the row still `waiting` and judged by `judge`
 * (`takeDependent`), so that only its judge closes it, once. Returns whether this call did.
 */
export async function closeDependent(
  tx: Queryable,
  key: DependentKey,
  reason: string,
  parentRuns: Record<string, number>,
  judge: string,
): Promise<boolean> {
  const [res] = await tx.query<ResultSetHeader>(
    `UPDATE baton_dependent_fires
        SET status = 'skipped', reason = ?, parent_runs = ?, judged_by = NULL,
            judged_until = NULL, updated_at = NOW(3)
      WHERE namespace = ? AND job = ? AND scheduled_at = ? AND rerun = ? AND status = 'waiting'
        AND judged_by = ?`,
    [
      truncate(reason, REASON_MAX),
      truncate(JSON.stringify(parentRuns), PARENT_RUNS_MAX),
      key.namespace,
      key.job,
      key.scheduledAt,
      key.rerun,
      judge,
    ],
  );
  return res.affectedRows === 1;
}

/** The row a closed child's fire points at: its `upstream` skip row. */
export async function setDependentRun(
  tx: Queryable,
  key: DependentKey,
  runId: number,
): Promise<void> {
  await tx.query(
    `UPDATE baton_dependent_fires SET run_id = ?
      WHERE namespace = ? AND job = ? AND scheduled_at = ? AND rerun = ?`,
    [runId, key.namespace, key.job, key.scheduledAt, key.rerun],
  );
}

/** The winner of a child's fire (slot 1 of its generation), if it has one: who claimed it, how. */
export async function dependentWinner(
  db: Queryable,
  key: DependentKey,
): Promise<{ id: number; trigger: string; host: string; startedAt: Date } | null> {
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT id, triggered_by, host, started_at FROM baton_runs
      WHERE namespace = ? AND job = ? AND scheduled_at = ? AND rerun = ? AND winner = 1`,
    [key.namespace, key.job, key.scheduledAt, key.rerun],
  );
  const row = rows[0];
  return row
    ? {
        id: Number(row.id),
        trigger: String(row.triggered_by),
        host: String(row.host),
        startedAt: row.started_at as Date,
      }
    : null;
}

/**
 * The next free generation of each job's fire at `scheduledAt` (0 where it has neither a winner
 * nor a chain row yet): what an operator's chain claims for its children — never a generation
 * one of them ran already, nor one a chain judged already (a child skipped as `upstream` at the
 * instant has no winner there, but its generation is decided: a re-run is the next one).
 */
export async function nextGenerations(
  db: Queryable,
  namespace: string,
  jobs: readonly string[],
  scheduledAt: Date,
): Promise<Map<string, number>> {
  const next = new Map(jobs.map((j) => [j, 0]));
  if (jobs.length === 0) return next;
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT job, MAX(latest) AS latest FROM (
       SELECT job, MAX(rerun) AS latest FROM baton_runs
        WHERE namespace = ? AND job IN (?) AND scheduled_at = ? AND winner >= 1 GROUP BY job
       UNION ALL
       SELECT job, MAX(rerun) AS latest FROM baton_dependent_fires
        WHERE namespace = ? AND job IN (?) AND scheduled_at = ? GROUP BY job) AS g
      GROUP BY job`,
    [namespace, jobs, scheduledAt, namespace, jobs, scheduledAt],
  );
  for (const r of rows) next.set(String(r.job), Number(r.latest) + 1);
  return next;
}

/** A child's latest generation's fire at `scheduledAt`, as it stands; null: none. */
export async function latestDependent(
  db: Queryable,
  namespace: string,
  job: string,
  scheduledAt: Date,
): Promise<DependentRow | null> {
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT ${DEPENDENT_FIRE_COLUMNS} FROM baton_dependent_fires
      WHERE namespace = ? AND job = ? AND scheduled_at = ? ORDER BY rerun DESC LIMIT 1`,
    [namespace, job, scheduledAt],
  );
  return rows[0] ? toDependentFire(rows[0]) : null;
}
